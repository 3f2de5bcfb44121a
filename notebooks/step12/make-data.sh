#!/bin/sh
# Makes this notebook's data: scenarios/step12-2core.yaml measured with pp-bench (five servers
# in turn, ~7 minutes on 2 cores) and simulated with pp-sim, both into results.db next to this
# file; pp-sim's step-mix table for the simulated goals; then the figures.
# Run from anywhere; BUILD defaults to the repo's build/ directory.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=${BUILD:-$repo/build}
logs=${TMPDIR:-/tmp}/step12-logs
mkdir -p "$logs"
rm -f "$logs"/*.decisions.jsonl # the server appends: a log must hold this run's ticks only
cd "$here"
uptime > load.txt # the machine is shared: its load before and after the measured run
# Every puma-plus worker takes 1 s in on_worker_boot (the scenario's machine.boot).
PUMA_PLUS_CONFIG="$repo/scenarios/step12-boot.rb" \
  "$build/bench/pp-bench" run "$repo/scenarios/step12-2core.yaml" -db results.db -timeline \
  -log-dir "$logs" | tee run.txt
uptime >> load.txt
# Each autoscaling run's decision log replays identically (pp-replay verify).
for f in "$logs"/auto-k*.decisions.jsonl; do "$build/replay/pp-replay" "$f"; done | tee replay.txt
"$build/sim/pp-sim" run "$repo/scenarios/step12-2core.yaml" --db results.db | tee sim.txt
"$build/sim/pp-sim" run "$repo/scenarios/standby-step.yaml" --db results.db | tee sim-step-mix.txt
sqlite3 -header -column results.db < table.sql | tee table.txt
gnuplot step12.gp
