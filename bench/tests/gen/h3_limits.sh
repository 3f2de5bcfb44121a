#!/usr/bin/env bash
# End to end: pp-bench's HTTP/3 generator against puma-plus-server started directly with
# -listen-h3 (the development certificate), for the rules the harness smoke does not reach:
#
#   - the server's stream credit is honoured: with -h2-max-streams 2 (puma-plus's
#     initial_max_streams_bidi for h3) and a backlog of 50 ms requests on 2 QUIC connections,
#     no connection carries more than 2 streams, every request still gets a 200, and the
#     latency of the backlog is timed from the intended start (p99 well above 50 ms);
#   - a stream past the client timeout is a timeout, reset, and the QUIC connection stays
#     (exactly 1 connection opened for the whole run);
#   - a UDP port nobody listens on ends every arrival quickly as a conn_error
#     (ECONNREFUSED, "nothing listens on that UDP port"), no hang.
#
# The server is started on a free loopback port and stopped by PID. A missing tool fails.
# Usage: h3_limits.sh PP_BENCH PUMA_PLUS_SERVER APP WORKDIR
set -euo pipefail

PPBENCH=${1:?usage: h3_limits.sh PP_BENCH SERVER APP WORKDIR}
SERVER=${2:?usage: h3_limits.sh PP_BENCH SERVER APP WORKDIR}
APP=${3:?usage: h3_limits.sh PP_BENCH SERVER APP WORKDIR}
WORK=${4:?usage: h3_limits.sh PP_BENCH SERVER APP WORKDIR}

for tool in ruby curl timeout; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "FAIL: required tool '$tool' is missing (scripts/install-deps.sh installs it)" >&2
    exit 1
  fi
done

rm -rf "$WORK"
mkdir -p "$WORK"

PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

free_port() { ruby -rsocket -e 's = TCPServer.new("127.0.0.1", 0); puts s.addr[1]; s.close'; }

PORT=$(free_port)
"$SERVER" -app "$APP" -listen "127.0.0.1:$PORT" -listen-h3 "127.0.0.1:$PORT" -h2-max-streams 2 \
  -workers 1 -threads 8 -control off -runtime-dir "$WORK" >"$WORK/server.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 300); do
  if curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$PORT/hello" 2>/dev/null; then break; fi
  sleep 0.1
done
curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$PORT/hello" || fail "puma-plus did not come up: $(tail -5 "$WORK/server.log")"

# 1. Stream credit: 100 rps of 50 ms requests, 2 connections x 2 streams = 80 rps capacity.
out=$(timeout 60 "$PPBENCH" smoke -url "127.0.0.1:$PORT" -proto h3 -h2-conns 2 -rate 100 -dur 3s \
  -path /mix/0/50 2>&1) || fail "backlog run exited nonzero: $out"
echo "$out"
offered=$(sed -n 's/.*offered \([0-9]*\)  ok \([0-9]*\) .*/\1/p' <<<"$out")
ok=$(sed -n 's/.*offered \([0-9]*\)  ok \([0-9]*\) .*/\2/p' <<<"$out")
[[ -n "$offered" && "$offered" == "$ok" ]] || fail "backlog: not every request got a 2xx"
grep -q "transport: h3, 2 QUIC connections opened" <<<"$out" || fail "backlog: not 2 QUIC connections"
grep -q "server initial max streams 2, at most 2 streams on one connection" <<<"$out" ||
  fail "backlog: the server's stream credit (2) was not reached or was exceeded"
p99=$(sed -n 's/.*p99 \([0-9.]*\)\(ms\|s\) .*/\1 \2/p' <<<"$out" | head -1)
read -r v unit <<<"$p99"
if [[ "$unit" == "ms" ]]; then
  ruby -e "exit(#{v} > 100 ? 0 : 1)" || fail "backlog: p99 $v ms is not timed from intended start"
fi

# 2. Timeouts: 400 ms requests, 200 ms client timeout, one connection that stays.
out=$(timeout 60 "$PPBENCH" smoke -url "127.0.0.1:$PORT" -proto h3 -h2-conns 1 -rate 20 -dur 2s \
  -path /mix/0/400 -timeout 200ms 2>&1) || true
echo "$out"
grep -Eq "ok 0 .* conn_errors 0  timeouts [1-9]" <<<"$out" || fail "timeouts: expected only timeouts"
grep -q "transport: h3, 1 QUIC connections opened" <<<"$out" ||
  fail "timeouts: the QUIC connection was not kept"

# 3. Nothing listens on the UDP port: quick conn_errors with a message.
DEAD=$(free_port)
out=$(timeout 30 "$PPBENCH" smoke -url "127.0.0.1:$DEAD" -proto h3 -rate 50 -dur 1s 2>&1) || true
echo "$out"
grep -q "conn_errors by cause: ECONNREFUSED" <<<"$out" || fail "dead port: no ECONNREFUSED"
grep -q "nothing listens on that UDP port" <<<"$out" || fail "dead port: no message"
grep -Eq "ok 0 .* conn_errors [1-9][0-9]*  timeouts 0" <<<"$out" || fail "dead port: not all errors"
echo "PASS"
