#!/bin/sh
# Makes this notebook's data: the 2-core step scenario measured with pp-bench (four servers in
# turn, ~8 minutes), into results.db next to this file, then the figure.
# Run from anywhere; BUILD defaults to the repo's build/ directory.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=${BUILD:-$repo/build}
cd "$here"
"$build/bench/pp-bench" run "$repo/scenarios/step-2core.yaml" -db results.db -timeline \
  -log-dir "${TMPDIR:-/tmp}" | tee run.txt
gnuplot step-response.gp
