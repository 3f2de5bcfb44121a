#!/usr/bin/env bash
# CLI and policy-regression tests for pp-replay (ctest: replay_cli).
#   cli_test.sh PP_REPLAY PP_REPLAY_GEN LOGDIR
# Every recorded log in LOGDIR must replay identically (exit 0). Edited, truncated and
# mismatched inputs must fail with the documented exit code and name the tick / line / hash.
set -u
REPLAY=$1 GEN=$2 LOGS=$3
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failures=0

# expect CODE PATTERN -- command...: runs it, checks the exit code and that the combined
# output matches the extended regex PATTERN ("" for no check).
expect() {
  local code=$1 pattern=$2
  shift 3
  "$@" >"$TMP/out" 2>&1
  local rc=$?
  if [ "$rc" != "$code" ]; then
    echo "FAIL: exit $rc, want $code: $*"; sed 's/^/  | /' "$TMP/out" | head -20
    failures=$((failures + 1)); return
  fi
  if [ -n "$pattern" ] && ! grep -Eq -- "$pattern" "$TMP/out"; then
    echo "FAIL: output lacks /$pattern/: $*"; sed 's/^/  | /' "$TMP/out" | head -20
    failures=$((failures + 1)); return
  fi
  echo "ok: $* -> $rc"
}

# 1. The recorded logs replay identically: the policy regression tests.
n=0
for log in "$LOGS"/*.jsonl; do
  expect 0 "ticks replayed identically" -- "$REPLAY" "$log"
  n=$((n + 1))
done
[ "$n" -ge 2 ] || { echo "FAIL: expected at least 2 recorded logs in $LOGS"; failures=$((failures + 1)); }
expect 0 "identically \(policy from .*overload.yaml\)" -- \
  "$REPLAY" "$LOGS/overload.jsonl" --policy "$LOGS/overload.yaml" --verify

# 2. A freshly generated log replays too (decide() + codec through a file, end to end).
"$GEN" step >"$TMP/fresh.jsonl" && expect 0 "160 ticks replayed identically" -- "$REPLAY" "$TMP/fresh.jsonl"

# 3. One decision edited: exit 1 naming that tick and the field.
line=$(grep -n '"action":"spawn_worker","count":4' "$LOGS/step.jsonl" | head -1 | cut -d: -f1)
tick=$(sed -n "${line}p" "$LOGS/step.jsonl" | sed -E 's/^\{"v":1,"tick":([0-9]+),.*/\1/')
sed "${line}s/\"action\":\"spawn_worker\",\"count\":4/\"action\":\"spawn_worker\",\"count\":3/" \
  "$LOGS/step.jsonl" >"$TMP/edited.jsonl"
expect 1 "edited.jsonl:${line}: tick ${tick}: decision.count differs" -- "$REPLAY" "$TMP/edited.jsonl"
grep -q "logged:          3" "$TMP/out" && grep -q "replayed:        4" "$TMP/out" ||
  { echo "FAIL: edited log diff does not show logged 3 vs replayed 4"; failures=$((failures + 1)); }
# An edited next state is caught too.
line2=$((line + 5))
sed -E "${line2}s/(\"state_after\":\\{\"breach_ticks\":)([0-9]+)/\\1999/" "$LOGS/step.jsonl" >"$TMP/edited2.jsonl"
expect 1 ":${line2}: tick [0-9]+: state_after.breach_ticks differs" -- "$REPLAY" "$TMP/edited2.jsonl"

# 3b. Standby (decision log v2): the recorded pp-sim log holds activations, replacements and a
# gate-held activation; editing an activation count is caught, and so is a v2 line relabelled v1.
SB=$LOGS/sim-standby-step.jsonl
grep -q '"v":2,' "$SB" && grep -q '"activate":1,' "$SB" && grep -q 'forks held while booting' "$SB" ||
  { echo "FAIL: $SB holds no standby activations"; failures=$((failures + 1)); }
sbline=$(grep -n '"activate":1,' "$SB" | head -1 | cut -d: -f1)
sed "${sbline}s/\"activate\":1,/\"activate\":2,/" "$SB" >"$TMP/sb-edited.jsonl"
expect 1 "sb-edited.jsonl:${sbline}: tick [0-9]+: decision.activate differs" -- "$REPLAY" "$TMP/sb-edited.jsonl"
sed "${sbline}s/^{\"v\":2,/{\"v\":1,/" "$SB" >"$TMP/sb-v1.jsonl"
expect 2 "sb-v1.jsonl:${sbline}: obs.workers_standby: unknown field \(in a version 1 line\)" -- \
  "$REPLAY" "$TMP/sb-v1.jsonl"
expect 0 "from standby, 4 forked; standby \+1 to 1" -- "$REPLAY" "$SB" --explain

# 3c. Slots (decision log v3, rule 4b): the recorded pp-sim log of conc-io holds set_slots up
# (sized by Little's law) and back (calm); editing a slot count is caught, and so is a v3 line
# relabelled v2.
SL=$LOGS/sim-conc-io.jsonl
grep -q '"v":3,' "$SL" && grep -q '"action":"set_slots","count":401,' "$SL" &&
  grep -q 'twice the slots Little' "$SL" ||
  { echo "FAIL: $SL holds no slot decisions"; failures=$((failures + 1)); }
slline=$(grep -n '"action":"set_slots","count":401,' "$SL" | head -1 | cut -d: -f1)
sed "${slline}s/\"action\":\"set_slots\",\"count\":401,/\"action\":\"set_slots\",\"count\":400,/" "$SL" >"$TMP/sl-edited.jsonl"
expect 1 "sl-edited.jsonl:${slline}: tick [0-9]+: decision.count differs" -- "$REPLAY" "$TMP/sl-edited.jsonl"
sed "${slline}s/^{\"v\":3,/{\"v\":2,/" "$SL" >"$TMP/sl-v2.jsonl"
expect 2 "sl-v2.jsonl:${slline}: obs.cpu_share_mean: unknown field \(in a version 2 line\)" -- \
  "$REPLAY" "$TMP/sl-v2.jsonl"

# 4. Truncated in the middle of line 50: exit 2 naming the line.
head -n 49 "$LOGS/step.jsonl" >"$TMP/truncated.jsonl"
sed -n 50p "$LOGS/step.jsonl" | head -c 300 >>"$TMP/truncated.jsonl"
expect 2 "truncated.jsonl:50: " -- "$REPLAY" "$TMP/truncated.jsonl"
# A malformed field names it.
sed '7s/"queue_len":[0-9]*/"queue_len":-4/' "$LOGS/step.jsonl" >"$TMP/badfield.jsonl"
expect 2 "badfield.jsonl:7: obs.queue_len: " -- "$REPLAY" "$TMP/badfield.jsonl"
: >"$TMP/empty.jsonl"
expect 2 "no tick records" -- "$REPLAY" "$TMP/empty.jsonl"

# 5. Policies: without the header, a non-default policy must be given.
grep -v '"type":"header"' "$LOGS/overload.jsonl" >"$TMP/noheader.jsonl"
hash=$(sed -n 1p "$LOGS/overload.jsonl" | sed -E 's/.*"policy_hash":"([0-9a-f]{16})".*/\1/')
expect 2 "decided by policy ${hash}.*--policy FILE" -- "$REPLAY" "$TMP/noheader.jsonl"
expect 0 "replayed identically" -- "$REPLAY" "$TMP/noheader.jsonl" --policy "$LOGS/overload.yaml"
# The default-policy log needs nothing (the defaults hash matches).
grep -v '"type":"header"' "$LOGS/step.jsonl" >"$TMP/step-noheader.jsonl"
expect 0 "policy from the defaults" -- "$REPLAY" "$TMP/step-noheader.jsonl"
# --verify with a different policy: exit 2 naming both hashes.
printf 'max_step: 8\nspawn_cooldown: 2s\n' >"$TMP/tuned.yaml"
expect 2 "decided by policy ccaa2fca84f4120b; .*tuned.yaml hashes to [0-9a-f]{16}" -- \
  "$REPLAY" "$LOGS/step.jsonl" --policy "$TMP/tuned.yaml" --verify

# 6. Counterfactual: a different policy lists the ticks it decides differently.
expect 0 "counterfactual" -- "$REPLAY" "$LOGS/step.jsonl" --policy "$TMP/tuned.yaml"
grep -Eq "^tick [0-9]+ +logged spawn_worker x4 +tuned spawn_worker x[5-8] " "$TMP/out" ||
  { echo "FAIL: counterfactual does not show x4 -> a bigger step"; sed 's/^/  | /' "$TMP/out" | head; failures=$((failures + 1)); }
expect 0 "of 160 ticks decided differently" -- "$REPLAY" "$LOGS/step.jsonl" --policy "$TMP/tuned.yaml" --counterfactual
expect 0 "# 0 of 160 ticks decided differently" -- \
  "$REPLAY" "$TMP/step-noheader.jsonl" --policy /dev/null --counterfactual

# 7. --explain: the human table.
expect 0 "^tick 20 +spawn_worker x4 +queue p95 .* over severe 200ms for 1 tick" -- "$REPLAY" "$LOGS/step.jsonl" --explain
grep -Eq "^tick [0-9]+ +none +breach for [0-9]+ ticks? but [0-9]+ workers? still booting" "$TMP/out" ||
  { echo "FAIL: explain shows no settled-gate decline"; failures=$((failures + 1)); }

# 8. --simulate, when pp-replay was built with the simulator.
if "$REPLAY" --help | grep -q -- --simulate; then
  expect 0 "^p99 ms +[0-9.]+ +[0-9.]+" -- \
    "$REPLAY" "$LOGS/step.jsonl" --simulate --policy "$TMP/tuned.yaml" --cpu-share 0.2
  grep -Eq "^requests +4[0-9]{4} +4[0-9]{4}" "$TMP/out" ||
    { echo "FAIL: simulate does not show both columns"; failures=$((failures + 1)); }
  expect 0 "cpu share 0.10 \(from the log\)" -- "$REPLAY" "$LOGS/overload.jsonl" --simulate
  expect 2 "cpu-share: expected a number" -- "$REPLAY" "$LOGS/step.jsonl" --simulate --cpu-share 2
  expect 2 "is not in a header line" -- "$REPLAY" "$TMP/noheader.jsonl" --simulate
else
  echo "skip: pp-replay built without the simulator (--simulate)"
fi

# 9. Usage errors.
expect 0 "usage: pp-replay" -- "$REPLAY" --help
expect 2 "unknown option --frobnicate" -- "$REPLAY" "$LOGS/step.jsonl" --frobnicate
expect 2 "usage" -- "$REPLAY"
expect 2 "nope.jsonl: No such file" -- "$REPLAY" "$TMP/nope.jsonl"
expect 2 "needs --policy" -- "$REPLAY" "$LOGS/step.jsonl" --counterfactual
printf 'max_workers: 4\nthreads:\n  maxx: 3\n' >"$TMP/bad.yaml"
expect 2 "bad.yaml:3:3: threads.maxx: unknown policy field" -- "$REPLAY" "$LOGS/step.jsonl" --policy "$TMP/bad.yaml"
expect 2 "exclusive" -- "$REPLAY" "$LOGS/step.jsonl" --explain --verify

if [ "$failures" -ne 0 ]; then
  echo "replay_cli: $failures failure(s)"
  exit 1
fi
echo "replay_cli: all passed"
