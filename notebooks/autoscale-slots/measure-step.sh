#!/bin/sh
# The measured step (issue 24's step goal): scenarios/step12-2core.yaml under pp-bench,
# ROUNDS rounds, the configurations interleaved within each round. Per run it prints the load
# average before the run and the hypervisor steal (ticks of /proc/stat's 8th cpu column)
# during it. Run from the repository root of a built tree:
#   notebooks/autoscale-slots/measure-step.sh 3 pumaplus-peak-w3t4 auto-k0 auto-k1-c4 auto-k2
set -eu
ROUNDS=${1:-3}
shift
CONFIGS=${*:-pumaplus-peak-w3t4 auto-k0 auto-k1-c4}
DB=${DB:-/tmp/pp-step-$$.db}
LOGS=${LOGS:-/tmp/pp-step-logs-$$}
steal() { awk '/^cpu /{print $9}' /proc/stat; }
r=1
while [ "$r" -le "$ROUNDS" ]; do
  for c in $CONFIGS; do
    mkdir -p "$LOGS/r$r-$c"
    s0=$(steal)
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    PUMA_PLUS_CONFIG=scenarios/step12-boot.rb build/bench/pp-bench run scenarios/step12-2core.yaml \
      -only "$c" -db "$DB" -timeline -log-dir "$LOGS/r$r-$c" >"$LOGS.r$r-$c.out" 2>&1 || echo "run failed: $c round $r"
    s1=$(steal)
    echo "round $r $c load_before $load steal_ticks $((s1 - s0)) $(date -u +%H:%M:%S)"
    grep -E "^$c " "$LOGS.r$r-$c.out" || tail -3 "$LOGS.r$r-$c.out"
  done
  r=$((r + 1))
done
echo "db $DB logs $LOGS"
