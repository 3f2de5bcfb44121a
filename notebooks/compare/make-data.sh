#!/usr/bin/env bash
# The run behind this folder (issue 16): every server x shape x round of pp-bench compare,
# stored in compare-hello.db, with its figure (compare-hello.png, gnuplot script and data beside
# it) and its stdout (compare-hello.txt). About 11 minutes; run it on a machine with nothing else
# busy. BUILD= points at a build tree (default build/).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${BUILD:-$here/../../build}
rm -f "$here/compare-hello.db"
"$build/bench/pp-bench" compare -servers pumaplus,puma,puma8,falcon -shapes 1x1,1x5,2x5 \
  -rounds 3 -dur 5s -plot "$here/compare-hello.png" -db "$here/compare-hello.db" \
  -log-dir "${TMPDIR:-/tmp}" | tee "$here/compare-hello.txt"
