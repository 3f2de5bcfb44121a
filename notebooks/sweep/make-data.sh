#!/bin/sh
# Makes this notebook's data: the simulator's sweeps of spawn cooldown x max_step on the
# autoscale configuration of the prototype's step (step-mix: 8 cores, up to 8 workers) and of
# the 2-core step (step-2core: up to 3 workers), into sweep.db; the ranked tables; the figures.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=${BUILD:-$repo/build}
cd "$here"
rm -f sweep.db
"$build/sim/pp-sim" sweep "$repo/scenarios/step-2core.yaml" -c pumaplus-auto-1to3 \
  --set policy.spawn_cooldown=1s,2s,3s,5s,8s,12s --set policy.max_step=1,2,3 \
  --db sweep.db | tee sweep.txt
"$build/sim/pp-sim" sweep "$repo/scenarios/step-mix.yaml" -c pumaplus-auto-1to8 \
  --set policy.spawn_cooldown=1s,2s,3s,5s,8s,12s --set policy.max_step=1,2,4,8 \
  --db sweep.db | tee sweep-mix.txt
gnuplot sweep.gp
