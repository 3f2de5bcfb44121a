#!/bin/sh
# Makes this notebook's data: pp-sim on the same scenario and seed as the measured step-2core
# run of ../step-response (its results.db is copied here, then the simulated run is added),
# the per-phase comparison table, and the figure.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=${BUILD:-$repo/build}
cd "$here"
cp ../step-response/results.db results.db
"$build/sim/pp-sim" run "$repo/scenarios/step-2core.yaml" --db results.db --quiet
"$build/bench/pp-bench" report latest -db results.db \
  -vs-sim "$(sqlite3 results.db "SELECT max(run_id) FROM runs WHERE kind='simulated'")" | tee vs-sim.txt
gnuplot sim-vs-real.gp
