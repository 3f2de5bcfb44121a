#!/bin/bash
# Hot restart under wrk (a measurement, not a test): two SIGUSR2 during 6 s of load, 8
# connections, against tests/apps/pid. wrk prints "Socket errors" / "Non-2xx" lines only when
# there were any; the last line counts the handovers in the server's log.
#   server/tools/hot_restart_wrk.sh [close|keepalive] [BUILD]
# Measured here (2 shared cores, Release build): close 22,214 requests, keep-alive 34,397
# requests, no socket errors and no non-2xx in either, 2 handovers each.
set -u
MODE=${1:-close}
BUILD=${2:-build}
cd "$(dirname "$0")/../.."
PORT=$((20000 + RANDOM % 2000))
DIR=$(mktemp -d)
"$BUILD/server/puma-plus-server" -app tests/apps/pid/config.ru -workers 2 -threads 2 \
  -listen 127.0.0.1:$PORT -control 127.0.0.1:$((PORT + 1)) -gem-dir gem \
  -pidfile "$DIR/server.pid" -quiet >"$DIR/server.log" 2>&1 &
sleep 2
if [ "$MODE" = close ]; then HDR=(-H "Connection: close"); else HDR=(); fi
wrk -t 2 -c 8 -d 6s "${HDR[@]}" "http://127.0.0.1:$PORT/" &
WRK=$!
sleep 2; kill -USR2 "$(cat "$DIR/server.pid")"
sleep 2; kill -USR2 "$(cat "$DIR/server.pid")"
wait $WRK
echo "handovers: $(grep -c 'took over' "$DIR/server.log")"
kill -TERM "$(cat "$DIR/server.pid")"
sleep 1
rm -rf "$DIR"
