#!/usr/bin/env bash
# The worker's CPU per request outside the app (pp-sim's machine.overhead): one static worker
# of one thread on the mix app, wrk -c1 for DUR seconds on /mix/0/0 (no app work) and on
# /mix/17/0 (17 ms of app CPU); the worker process's utime + stime (/proc/PID/stat, CPU time,
# not run-queue wait) over the run divided by the requests served. Prints both and the
# overhead = /mix/0/0's figure.
#   notebooks/sim-vs-real-conc/overhead.sh       (from a built checkout; ~15 s)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$ROOT/build}
DUR=${DUR:-5}
export GEM_HOME=$BUILD/gems BUNDLE_GEMFILE=$ROOT/tests/apps/gemfiles/rubygems/Gemfile BUNDLE_FROZEN=true
export BUNDLE_APP_CONFIG=$BUILD/gems/.bundle-config BUNDLE_USER_HOME=$BUILD/gems/.bundle-home
export RACK_ENV=production
PORT=${PORT:-19591}
CPORT=$((PORT + 1))
setsid "$BUILD/server/puma-plus-server" -app "$ROOT/scenarios/apps/mix/config.ru" -workers 1 -threads 1 \
  -listen 127.0.0.1:$PORT -control 127.0.0.1:$CPORT -quiet >/tmp/pp-overhead.log 2>&1 &
pid=$!
trap 'kill -TERM -- -$pid 2>/dev/null || true; wait $pid 2>/dev/null || true' EXIT
for _ in $(seq 300); do curl -fs -o /dev/null "http://127.0.0.1:$PORT/hello" && break; sleep 0.1; done
wpid=$(curl -fs "http://127.0.0.1:$CPORT/stats" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["worker_status"][0]["pid"])')
hz=$(getconf CLK_TCK)
cpu() { awk -v hz="$hz" '{print ($14 + $15) / hz}' "/proc/$wpid/stat"; }
for path in /mix/0/0 /mix/17/0; do
  wrk -t1 -c1 -d2s "http://127.0.0.1:$PORT$path" >/dev/null # warm
  c0=$(cpu)
  n=$(wrk -t1 -c1 -d"${DUR}s" "http://127.0.0.1:$PORT$path" | awk '/requests in/{print $1}')
  c1=$(cpu)
  awk -v p="$path" -v a="$c0" -v b="$c1" -v n="$n" \
    'BEGIN{printf "%-10s %6d requests, worker CPU %.3f ms a request\n", p, n, (b - a) * 1000 / n}'
done
