#!/bin/sh
# The step with Ractors as the unit, measured (issue 28): scenarios/ractor-step.yaml
# (step12-2core's 30 -> 240 -> 30 rps of /mix/2/20 on 2 cores) on the real server with the
# shareable app tests/apps/ractor/config.ru, every worker 1 s in on_worker_boot
# (scenarios/step12-boot.rb), ROUNDS rounds of the configurations below one after another
# (so each round compares them under the same neighbours), then pp-sim on the same scenario.
# Writes into OUT/ (default step/): run*.txt (pp-bench's report per round), sim.txt,
# load.txt (load average and hypervisor steal from /proc/stat around each run), replay.txt
# (pp-replay of every autoscaled run's decision log) and the logs round*-*.decisions.jsonl.
# ~1.5 minutes a configuration.
#   BUILD=build ROUNDS=2 OUT=step-b CONFIGS=auto-ractor,auto-thread notebooks/ractors/step.sh
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=${BUILD:-$repo/build}
case $build in /*) ;; *) build=$repo/$build ;; esac
rounds=${ROUNDS:-2}
configs=${CONFIGS:-static-w3s4-thread,auto-thread,auto-ractor,static-w1s4-ractor}
out=$here/${OUT:-step}
logs=${TMPDIR:-/tmp}/ractor-step-logs
mkdir -p "$out"
mkdir -p "$logs"
cd "$here"
steal() { awk '/^cpu /{print $9}' /proc/stat; } # jiffies (1/100 s), summed over the CPUs
: > "$out/load.txt"
: > "$out/replay.txt"
r=1
while [ "$r" -le "$rounds" ]; do
  rm -f "$logs"/*.jsonl
  : > "$out/run$r.txt"
  # one pp-bench per configuration: a run lost (the machine is shared) loses one row only
  for c in $(echo "$configs" | tr , ' '); do
    s0=$(steal)
    echo "round $r $c before: $(cat /proc/loadavg)" >> "$out/load.txt"
    PUMA_PLUS_CONFIG="$repo/scenarios/step12-boot.rb" stdbuf -oL \
      "$build/bench/pp-bench" run "$repo/scenarios/ractor-step.yaml" -only "$c" \
      -app "$repo/tests/apps/ractor/config.ru" -db "$out/step.db" -log-dir "$logs" >> "$out/run$r.txt" ||
      echo "round $r $c: pp-bench exited $?" >> "$out/load.txt"
    s1=$(steal)
    echo "round $r $c after: $(cat /proc/loadavg); steal $(( (s1 - s0) / 100 )) s (all CPUs)" >> "$out/load.txt"
  done
  for f in "$logs"/*.decisions.jsonl; do
    [ -e "$f" ] || continue
    echo "round $r $(basename "$f"): $("$build/replay/pp-replay" "$f" 2>&1 | tail -1)" >> "$out/replay.txt"
    cp "$f" "$out/round$r-$(basename "$f")"
  done
  r=$((r + 1))
done
"$build/sim/pp-sim" run "$repo/scenarios/ractor-step.yaml" > "$out/sim.txt"
