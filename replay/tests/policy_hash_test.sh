#!/usr/bin/env bash
# A policy file written for pp-sim loads unchanged in the server: the same file gives the same
# policy hash in pp-sim's decision log and in the real puma-plus-server's decision log, and
# pp-replay verifies the server's log with the policy from its header (ctest: policy_hash).
#   policy_hash_test.sh PP_SIM PUMA_PLUS_SERVER PP_REPLAY REPO_ROOT
set -u
SIM=$1 SERVER=$2 REPLAY=$3 ROOT=$4
POLICY=$ROOT/scenarios/policies/step-2core.yaml
TMP=$(mktemp -d)
pid=
cleanup() {
  [ -n "$pid" ] && kill -QUIT "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$TMP"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
header_hash() { sed -n 1p "$1" | sed -nE 's/.*"type":"header".*"policy_hash":"([0-9a-f]{16})".*/\1/p'; }

# The simulator: step-2core's autoscale config names policies/step-2core.yaml.
grep -q 'policy: policies/step-2core.yaml' "$ROOT/scenarios/step-2core.yaml" ||
  fail "scenarios/step-2core.yaml no longer uses policies/step-2core.yaml"
"$SIM" run "$ROOT/scenarios/step-2core.yaml" --config pumaplus-auto-1to3 -q \
  --decisions "$TMP/sim.jsonl" >/dev/null 2>"$TMP/sim.err" || { cat "$TMP/sim.err"; fail "pp-sim"; }
sim_hash=$(header_hash "$TMP/sim.jsonl")
[ -n "$sim_hash" ] || fail "pp-sim's log has no header line"

# The server, with the very same file, on free ports; ticks are 1 s, so wait for 3 lines.
port=$((20000 + RANDOM % 20000))
"$SERVER" -app "$ROOT/scenarios/apps/mix/config.ru" -workers 1 -threads 2 -quiet \
  -listen 127.0.0.1:$port -control 127.0.0.1:$((port + 1)) \
  -autoscale -policy "$POLICY" -decision-log "$TMP/server.jsonl" >"$TMP/server.log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do
  [ -f "$TMP/server.jsonl" ] && [ "$(wc -l <"$TMP/server.jsonl")" -ge 3 ] && break
  kill -0 "$pid" 2>/dev/null || { cat "$TMP/server.log"; fail "server exited"; }
  sleep 0.1
done
[ "$(wc -l <"$TMP/server.jsonl" 2>/dev/null || echo 0)" -ge 3 ] || { cat "$TMP/server.log"; fail "no decision log"; }
kill -TERM "$pid"; wait "$pid"; rc=$?; pid=
[ "$rc" = 0 ] || fail "server exit status $rc after SIGTERM"
server_hash=$(header_hash "$TMP/server.jsonl")

echo "policy $POLICY: pp-sim hash $sim_hash, server hash $server_hash"
[ "$sim_hash" = "$server_hash" ] || fail "the same policy file hashes differently"
"$REPLAY" "$TMP/server.jsonl" || fail "pp-replay did not verify the server's log"
"$REPLAY" "$TMP/sim.jsonl" >/dev/null || fail "pp-replay did not verify pp-sim's log"
echo "1 passed, 0 failed"
