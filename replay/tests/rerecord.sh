#!/usr/bin/env bash
# Re-records the policy-regression logs in replay/tests/logs/ after a deliberate change to
# decide() (or to the generator), and prints what changed as a diff of `pp-replay --explain`.
#   replay/tests/rerecord.sh [BUILD_DIR]            (default: build)
#   replay/tests/rerecord.sh [BUILD_DIR] --server   also re-record server-step-2core.jsonl
# Review the diff, then commit the logs with the change that caused it.
#
# server-step-2core.jsonl is the decision log of a real puma-plus-server under the 2-core step
# (pp-bench run scenarios/step-2core.yaml -only pumaplus-auto-1to3). It cannot be regenerated
# bit-for-bit: --server runs that real benchmark again (about 100 s, loopback only) and
# records whatever the real server decides this time.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$ROOT/build
SERVER=0
for a in "$@"; do
  case $a in
    --server) SERVER=1 ;;
    -h | --help) sed -n '2,12p' "$0"; exit 0 ;;
    *) BUILD=$a ;;
  esac
done
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

# The two older simulator logs are recorded without the CPU signal (machine.cpu_measured:
# false, in a copy of the scenario next to it so relative policy paths resolve): they stay the
# version-1 and version-2 logs of a server without rule 4b's input, which is what they test
# (and, recorded so, they are byte for byte what they were before rule 4b).
without_cpu() {
  local copy
  copy="$(dirname "$1")/.rerecord-$(basename "$1")"
  sed '/^machine:/a\  cpu_measured: false' "$1" >"$copy"
  echo "$copy"
}

# A log from the simulator: pp-sim's decision log of the step scenario. pp-sim writes the
# header line carrying the scenario's policy itself, so it replays without the policy file.
SIM_SCENARIO=$ROOT/scenarios/step-mix.yaml
record_sim() {
  cmake --build "$BUILD" --target pp-sim >/dev/null
  local scn
  scn=$(without_cpu "$SIM_SCENARIO")
  "$BUILD/sim/pp-sim" run "$scn" --decisions "$1" \
    >/dev/null 2>"$TMP/sim.err" || { rm -f "$scn"; cat "$TMP/sim.err" >&2; exit 1; }
  rm -f "$scn"
}
RECIPES[sim-step-mix.jsonl]=record_sim

# The simulator with a standby pool (decision log v2): standby-step's auto-k1, one standby.
record_sim_standby() {
  cmake --build "$BUILD" --target pp-sim >/dev/null
  local scn
  scn=$(without_cpu "$ROOT/scenarios/standby-step.yaml")
  "$BUILD/sim/pp-sim" run "$scn" -c auto-k1 --decisions "$1" \
    >/dev/null 2>"$TMP/sim.err" || { rm -f "$scn"; cat "$TMP/sim.err" >&2; exit 1; }
  rm -f "$scn"
}
RECIPES[sim-standby-step.jsonl]=record_sim_standby

# Rule 4b (decision log v3): conc-io's `little`, the CPU signal on, set_slots up and back.
record_sim_slots() {
  cmake --build "$BUILD" --target pp-sim >/dev/null
  "$BUILD/sim/pp-sim" run "$ROOT/scenarios/conc-io.yaml" -c little --decisions "$1" \
    >/dev/null 2>"$TMP/sim.err" || { cat "$TMP/sim.err" >&2; exit 1; }
}
RECIPES[sim-conc-io.jsonl]=record_sim_slots

record_server() {
  cmake --build "$BUILD" --target pp-bench puma-plus-server >/dev/null
  mkdir -p "$TMP/bench"
  "$BUILD/bench/pp-bench" run "$ROOT/scenarios/step-2core.yaml" -only pumaplus-auto-1to3 \
    -log-dir "$TMP/bench" -db "$TMP/bench/step.db" >"$TMP/bench.out" 2>&1 ||
    echo "rerecord: pp-bench reported a failed check (see below); the log is still recorded" >&2
  tail -n 5 "$TMP/bench.out" >&2
  cp "$TMP/bench/pumaplus-auto-1to3.decisions.jsonl" "$1"
}
if [ "$SERVER" = 1 ]; then RECIPES[server-step-2core.jsonl]=record_server; fi

changed=0
for name in "${!RECIPES[@]}"; do
  if [ "${RECIPES[$name]}" = record_sim ] || [ "${RECIPES[$name]}" = record_sim_standby ] ||
    [ "${RECIPES[$name]}" = record_sim_slots ] || [ "${RECIPES[$name]}" = record_server ]; then
    "${RECIPES[$name]}" "$TMP/$name"
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
