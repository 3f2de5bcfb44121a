#!/usr/bin/env bash
# Re-records the policy-regression logs in replay/tests/logs/ after a deliberate change to
# decide() (or to the generator), and prints what changed as a diff of `pp-replay --explain`.
#   replay/tests/rerecord.sh [BUILD_DIR]     (default: build)
# Review the diff, then commit the logs with the change that caused it.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build}
LOGS=$ROOT/replay/tests/logs
cmake --build "$BUILD" --target pp-replay pp-replay-gen >/dev/null
REPLAY=$BUILD/replay/pp-replay
GEN=$BUILD/replay/pp-replay-gen
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# log file -> generator arguments. Keep in step with docs/REPLAY.md.
declare -A RECIPES=(
  [step.jsonl]="step"
  [overload.jsonl]="overload --policy $LOGS/overload.yaml"
)

# A log from the simulator: pp-sim's decision log of the step scenario. pp-sim writes the
# header line carrying the scenario's policy itself, so it replays without the policy file.
SIM_SCENARIO=$ROOT/scenarios/step-mix.yaml
record_sim() {
  cmake --build "$BUILD" --target pp-sim >/dev/null
  "$BUILD/sim/pp-sim" run "$SIM_SCENARIO" --decisions "$1" \
    >/dev/null 2>"$TMP/sim.err" || { cat "$TMP/sim.err" >&2; exit 1; }
}
RECIPES[sim-step-mix.jsonl]=record_sim

changed=0
for name in "${!RECIPES[@]}"; do
  if [ "${RECIPES[$name]}" = record_sim ]; then
    record_sim "$TMP/$name"
  else
    # shellcheck disable=SC2086
    "$GEN" ${RECIPES[$name]} >"$TMP/$name"
  fi
  if [ -f "$LOGS/$name" ] && cmp -s "$LOGS/$name" "$TMP/$name"; then
    echo "$name: unchanged"
    continue
  fi
  changed=$((changed + 1))
  if [ -f "$LOGS/$name" ]; then
    "$REPLAY" "$LOGS/$name" --explain 2>&1 | tail -n +2 >"$TMP/old.txt" || true
    "$REPLAY" "$TMP/$name" --explain | tail -n +2 >"$TMP/new.txt"
    ndiff=$(diff "$TMP/old.txt" "$TMP/new.txt" | grep -c '^>' || true)
    echo "$name: re-recorded; $ndiff explain line(s) changed:"
    diff -u --label "old $name" --label "new $name" "$TMP/old.txt" "$TMP/new.txt" || true
  else
    echo "$name: recorded (new)"
  fi
  cp "$TMP/$name" "$LOGS/$name"
done
echo "rerecord: $changed log(s) changed in $LOGS"
