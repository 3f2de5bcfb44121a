#!/bin/sh
# The step with Ractors as the unit, measured (issue 28): scenarios/ractor-step.yaml
# (step12-2core's 30 -> 240 -> 30 rps of /mix/2/20 on 2 cores) on the real server with the
# shareable app tests/apps/ractor/config.ru, every worker 1 s in on_worker_boot
# (scenarios/step12-boot.rb), ROUNDS rounds of the configurations below one after another
# (so each round compares them under the same neighbours), then pp-sim on the same scenario.
# Writes step-run*.txt, step-sim.txt, step-load.txt (load average and hypervisor steal from
# /proc/stat around each round) and step-decisions/ (the autoscaled runs' decision logs,
# verified by pp-replay into step-replay.txt). ~5 minutes a round.
#   BUILD=build ROUNDS=2 notebooks/ractors/step.sh
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=${BUILD:-$repo/build}
case $build in /*) ;; *) build=$repo/$build ;; esac
rounds=${ROUNDS:-2}
configs=${CONFIGS:-static-w3s4-thread,auto-thread,auto-ractor,static-w1s4-ractor}
logs=$here/step-decisions
mkdir -p "$logs"
cd "$here"
steal() { awk '/^cpu /{print $9}' /proc/stat; } # jiffies (1/100 s), summed over the CPUs
: > step-load.txt
: > step-replay.txt
r=1
while [ "$r" -le "$rounds" ]; do
  rm -f "$logs"/*.jsonl
  s0=$(steal)
  echo "round $r before: $(cat /proc/loadavg)" >> step-load.txt
  PUMA_PLUS_CONFIG="$repo/scenarios/step12-boot.rb" \
    "$build/bench/pp-bench" run "$repo/scenarios/ractor-step.yaml" -only "$configs" \
    -app "$repo/tests/apps/ractor/config.ru" -db step.db -log-dir "$logs" > "step-run$r.txt"
  s1=$(steal)
  echo "round $r after: $(cat /proc/loadavg); steal $(( (s1 - s0) / 100 )) s (all CPUs)" >> step-load.txt
  for f in "$logs"/*.decisions.jsonl; do
    [ -e "$f" ] || continue
    echo "round $r $(basename "$f"): $("$build/replay/pp-replay" "$f" 2>&1 | tail -1)" >> step-replay.txt
    cp "$f" "$logs/round$r-$(basename "$f")"
  done
  r=$((r + 1))
done
"$build/sim/pp-sim" run "$repo/scenarios/ractor-step.yaml" > step-sim.txt
