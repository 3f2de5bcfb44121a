#!/usr/bin/env bash
# The run behind this folder (issue 16): every server x shape x round of pp-bench compare,
# stored in compare-hello.db, with its figure (compare-hello.png, gnuplot script and data beside
# it) and its stdout (compare-hello.txt). A cell whose steal (closed or open loop) is above 10% is
# measured again with a fresh server, up to twice (-max-steal 10 -steal-retries 2): 11 minutes
# without a retry, up to three times that. Run it on a machine with nothing else of ours busy.
# BUILD= points at a build tree (default build/).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${BUILD:-$here/../../build}
rm -f "$here/compare-hello.db"
"$build/bench/pp-bench" compare -servers pumaplus,puma,puma8,falcon -shapes 1x1,1x5,2x5 \
  -rounds 3 -dur 5s -max-steal 10 -steal-retries 2 -plot "$here/compare-hello.png" -db "$here/compare-hello.db" \
  -log-dir "${TMPDIR:-/tmp}" | tee "$here/compare-hello.txt"
