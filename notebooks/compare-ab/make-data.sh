#!/usr/bin/env bash
# The run behind this folder (issue 16): this build against the build before 30758fa (the
# dispatch-before-flush change in server/workers/wlink.c) and Debian's puma, 1x1 and 1x5, 3 rounds.
# BASE= is a checkout of 2599634 built with
#   cmake -S BASE -B BASE/build -DCMAKE_BUILD_TYPE=Release
#   cmake --build BASE/build --target puma-plus-server puma_plus_ext
# (git archive 2599634 | tar -x -C BASE). About 4 minutes; BUILD= points at a build tree.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${BUILD:-$here/../../build}
base=${BASE:?BASE=a built checkout of 2599634}
rm -f "$here/ab.db"
"$build/bench/pp-bench" compare -servers "pumaplus,pumaplus@$base=base,puma" -shapes 1x1,1x5 \
  -rounds 3 -dur 5s -rate-dur 5s -db "$here/ab.db" -plot "$here/ab.png" \
  -log-dir "${TMPDIR:-/tmp}" | tee "$here/ab.txt"
