#!/usr/bin/env bash
# Issue 24, rule 4b in pp-sim: every comparison scenario, three seeds each, then the table.
#   BUILD=build notebooks/concurrency/make-data.sh      (about 10 s on one core)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
SIM=$BUILD/sim/pp-sim
cmake --build "$BUILD" --target pp-sim >/dev/null
cd "$HERE"
rm -f sim-*.txt
for scn in conc-io conc-io1000 conc-mixed conc-cpu conc-step conc-step12; do
  for seed in default 1 2; do
    if [ "$seed" = default ]; then
      "$SIM" run "$ROOT/scenarios/$scn.yaml" >"sim-$scn-s0.txt"
    else
      "$SIM" run "$ROOT/scenarios/$scn.yaml" -s "$seed" >"sim-$scn-s$seed.txt"
    fi
  done
  # The decision log of rule 4b (config little, or little-k1 on the steps) at the default seed.
  cfg=little
  case $scn in conc-step) cfg=little-k4 ;; conc-step12) cfg=little-k1 ;; esac
  "$SIM" run "$ROOT/scenarios/$scn.yaml" -c "$cfg" -q -d "decisions-$scn.jsonl"
done
python3 "$HERE/table.py" sim-*.txt >table.md
cat table.md
