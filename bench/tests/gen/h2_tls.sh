#!/usr/bin/env bash
# End to end: pp-bench's generator over h2c, h2+TLS and h1+TLS against real peers from Debian,
# and its errors against servers that do not speak what it asked for.
#
#   nghttpd --no-tls (h2c, SETTINGS_MAX_CONCURRENT_STREAMS 2), nghttpd with a P-256 dev cert
#   (h2 over TLS via ALPN), openssl s_server -WWW (HTTP/1.0 over TLS, ALPN http/1.1), and
#   pp-bench's own null server (HTTP/1.1 only).
#
# Asserts: a fixed-rate open-loop smoke gets only 200s and no transport error over h2c, h2+TLS
# and h1+TLS; the h2 runs use exactly -h2-conns TCP connections, counted by pp-bench and,
# independently, by nghttpd -v (distinct session ids); under a backlog no connection carries
# more streams than the server's SETTINGS_MAX_CONCURRENT_STREAMS; h2 against an HTTP/1 server
# and h2 over TLS against a server whose ALPN offers only http/1.1 end quickly with
# conn_errors and a message in words (no hang).
#
# Servers are started on free loopback ports and stopped by PID. A missing tool fails the test.
# Usage: h2_tls.sh PP_BENCH WORKDIR
set -euo pipefail

PPBENCH=${1:?usage: h2_tls.sh PP_BENCH WORKDIR}
WORK=${2:?usage: h2_tls.sh PP_BENCH WORKDIR}

for tool in nghttpd openssl ruby curl timeout; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "FAIL: required tool '$tool' is missing (scripts/install-deps.sh installs it)" >&2
    exit 1
  fi
done

rm -rf "$WORK"
mkdir -p "$WORK/www"
echo hello >"$WORK/www/hello"
head -c 65536 /dev/zero | tr '\0' x >"$WORK/www/64k"

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

# wait_up PORT CURL_ARGS...: polls until the server answers (10 s at most).
wait_up() {
  local port=$1
  shift
  for _ in $(seq 100); do
    if curl -s -o /dev/null --max-time 1 "$@" 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  fail "server on port $port did not come up"
}

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -subj /CN=localhost -keyout "$WORK/key.pem" -out "$WORK/cert.pem" 2>"$WORK/openssl.log" ||
  fail "openssl req: $(cat "$WORK/openssl.log")"

H2C=$(free_port)
nghttpd -v --no-tls -m 2 -a 127.0.0.1 -d "$WORK/www" "$H2C" >"$WORK/h2c.log" 2>&1 &
PIDS+=($!)
H2TLS=$(free_port)
nghttpd -v -a 127.0.0.1 -d "$WORK/www" "$H2TLS" "$WORK/key.pem" "$WORK/cert.pem" \
  >"$WORK/h2tls.log" 2>&1 &
PIDS+=($!)
H1TLS=$(free_port)
(cd "$WORK/www" && exec openssl s_server -quiet -accept "127.0.0.1:$H1TLS" -key "$WORK/key.pem" \
  -cert "$WORK/cert.pem" -WWW -alpn http/1.1 >"$WORK/s_server.log" 2>&1) &
PIDS+=($!)
H1=$(free_port)
"$PPBENCH" null-server -port "$H1" >"$WORK/null.log" 2>&1 &
PIDS+=($!)

wait_up "$H2C" --http2-prior-knowledge "http://127.0.0.1:$H2C/hello"
wait_up "$H2TLS" -k --http2 "https://127.0.0.1:$H2TLS/hello"
wait_up "$H1TLS" -k --http1.1 "https://127.0.0.1:$H1TLS/hello"
wait_up "$H1" "http://127.0.0.1:$H1/hello"

# smoke NAME EXPECTED_RC ARGS...: runs pp-bench smoke (60 s at most), keeps its output.
smoke() {
  local name=$1 want=$2
  shift 2
  local rc=0
  timeout 60 "$PPBENCH" smoke -warmup 0s "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" || rc=$?
  cat "$WORK/$name.out"
  [[ $rc -ne 124 ]] || fail "$name: pp-bench hung (killed after 60 s)"
  [[ $rc -eq $want ]] || fail "$name: pp-bench exited $rc, expected $want: $(cat "$WORK/$name.err")"
}

# all_ok NAME: every arrival got a 2xx and nothing failed.
all_ok() {
  local out=$WORK/$1.out
  grep -Eq "offered ([0-9]+)  ok \1  shed\(503\) 0  http_errors 0  conn_errors 0  timeouts 0" "$out" ||
    fail "$1: not every request succeeded: $(grep requests "$out")"
  local n
  n=$(sed -nE 's/.*offered ([0-9]+)  ok.*/\1/p' "$out")
  [[ $n -ge 100 ]] || fail "$1: only $n arrivals"
}

# sessions LOG: distinct connections nghttpd saw.
sessions() { grep -oE '^\[id=[0-9]+\]' "$1" | sort -u | wc -l; }

echo "== h2c, 3 connections, 100 rps for 2 s"
before=$(sessions "$WORK/h2c.log") # the readiness probe's
smoke h2c 0 -url "127.0.0.1:$H2C" -proto h2 -h2-conns 3 -path /hello -rate 100 -dur 2s -uniform
all_ok h2c
grep -q "transport: h2, 3 TCP connections opened (at most 3 open at once)" "$WORK/h2c.out" ||
  fail "h2c: not exactly 3 connections"
seen=$(($(sessions "$WORK/h2c.log") - before))
[[ $seen -eq 3 ]] || fail "h2c: nghttpd saw $seen sessions, not 3"

echo "== h2+TLS, 2 connections, 100 rps for 2 s"
before=$(sessions "$WORK/h2tls.log")
smoke h2tls 0 -url "127.0.0.1:$H2TLS" -proto h2 -tls -h2-conns 2 -path /hello -rate 100 -dur 2s
all_ok h2tls
grep -q "transport: h2+tls, 2 TCP connections opened (at most 2 open at once)" "$WORK/h2tls.out" ||
  fail "h2+tls: not exactly 2 connections"
seen=$(($(sessions "$WORK/h2tls.log") - before))
[[ $seen -eq 2 ]] || fail "h2+tls: nghttpd saw $seen sessions, not 2"

echo "== h2c backlog: 1 connection, server allows 2 streams, 1500 rps of 64 KiB for 1 s"
smoke h2cap 0 -url "127.0.0.1:$H2C" -proto h2 -h2-conns 1 -path /64k -rate 1500 -dur 1s
all_ok h2cap
grep -Eq "server max concurrent streams 2, at most [12] streams on one connection" \
  "$WORK/h2cap.out" || fail "h2 cap: more streams than SETTINGS_MAX_CONCURRENT_STREAMS allow"

echo "== h1+TLS against openssl s_server -WWW, 50 rps for 2 s"
smoke h1tls 0 -url "127.0.0.1:$H1TLS" -tls -path /hello -rate 50 -dur 2s -uniform
all_ok h1tls
grep -q "transport: h1+tls" "$WORK/h1tls.out" || fail "h1+tls: protocol not reported"

echo "== h2c against an HTTP/1.1-only server: a clear error, not a hang"
smoke noh2 1 -url "127.0.0.1:$H1" -proto h2 -path /hello -rate 50 -dur 1s
grep -q "conn_errors by cause: h2_no_settings" "$WORK/noh2.out" || fail "noh2: wrong cause"
grep -q "first transport error: .*does not speak h2" "$WORK/noh2.out" || fail "noh2: no message"

echo "== h2 over TLS against a server whose ALPN is http/1.1 only"
smoke alpn 1 -url "127.0.0.1:$H1TLS" -proto h2 -tls -path /hello -rate 50 -dur 1s
grep -q "conn_errors by cause: alpn" "$WORK/alpn.out" || fail "alpn: wrong cause"
grep -q "first transport error: ALPN: " "$WORK/alpn.out" || fail "alpn: no message"

echo "PASS: h2c, h2+tls, h1+tls and the error cases"
