#!/usr/bin/env bash
# I/O-bound /mix/0/500 at 200 connections, one process each (issue 24, item 5 of the gem
# half): puma-plus 1 worker x 5 threads, 1 worker x 200 thread slots, 1 worker x 200 fiber
# slots, and falcon 0.51.1 --count 1. Each server: started in its own process group, warmed up
# 2 s, then `wrk -t2 -cC -d10s --timeout 10s` (C = 200); the sum of PSS over its process group is read
# at the end of the load; stopped by PID. ROUNDS rounds, servers interleaved. Prints one line
# per run and the hypervisor steal over the whole measurement.
#   notebooks/slots/measure.sh [ROUNDS]      (from the checkout; build/ must be built)
#   C=1000 SLOTS=1000 notebooks/slots/measure.sh 1     (connections, slots of the 2nd and 3rd)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
ROUNDS=${1:-3}
C=${C:-200}
SLOTS=${SLOTS:-200}
APP=$ROOT/scenarios/apps/mix/config.ru
export GEM_HOME=$ROOT/build/gems BUNDLE_GEMFILE=$ROOT/tests/apps/gemfiles/rubygems/Gemfile BUNDLE_FROZEN=true
export BUNDLE_APP_CONFIG=$ROOT/build/gems/.bundle-config BUNDLE_USER_HOME=$ROOT/build/gems/.bundle-home
export RACK_ENV=production RUBYOPT=-rbundler/setup
PORT=19481
CPORT=19482

steal() { awk '/^cpu /{print $9}' /proc/stat; }
total() { awk '/^cpu /{s=0; for(i=2;i<=NF;i++) s+=$i; print s}' /proc/stat; }
pss_of_group() { # sum of Pss (kB) over the processes of process group $1
  local sum=0 p v
  for p in $(ps -o pid= -g "$1"); do
    v=$(awk '/^Pss:/{print $2}' /proc/$p/smaps_rollup 2>/dev/null || echo 0)
    sum=$((sum + ${v:-0}))
  done
  echo $sum
}

run() { # NAME CMD...
  local name=$1; shift
  setsid "$@" >/tmp/pp-slots-measure-$name.log 2>&1 &
  local pid=$!
  for _ in $(seq 200); do
    curl -fs -o /dev/null "http://127.0.0.1:$PORT/mix/0/0" && break
    sleep 0.1
  done
  wrk -t2 -c"$C" -d2s --timeout 10s "http://127.0.0.1:$PORT/mix/0/500" >/dev/null
  wrk -t2 -c"$C" -d10s --timeout 10s "http://127.0.0.1:$PORT/mix/0/500" >/tmp/pp-slots-wrk-$name.txt &
  local w=$!
  sleep 9
  local pss; pss=$(pss_of_group "$pid")
  wait $w
  local rps lat errs
  rps=$(awk '/Requests\/sec/{print $2}' /tmp/pp-slots-wrk-$name.txt)
  lat=$(awk '/^    Latency/{print $2}' /tmp/pp-slots-wrk-$name.txt)
  errs=$(grep -E "Socket errors|Non-2xx" /tmp/pp-slots-wrk-$name.txt | tr -s ' ' | tr '\n' ' ' || true)
  printf '%-16s req/s %8s  mean latency %9s  PSS sum %6d MiB  %s\n' "$name" "$rps" "$lat" $((pss / 1024)) "$errs"
  kill -TERM -- -"$pid" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL -- -"$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

PP=$ROOT/build/server/puma-plus-server
s0=$(steal); t0=$(total)
for r in $(seq "$ROUNDS"); do
  echo "round $r"
  run pp-5-threads "$PP" -app "$APP" -workers 1 -threads 5 -listen 127.0.0.1:$PORT -control 127.0.0.1:$CPORT -quiet
  run pp-$SLOTS-threads "$PP" -app "$APP" -workers 1 -threads "$SLOTS" -listen 127.0.0.1:$PORT -control 127.0.0.1:$CPORT -quiet
  run pp-$SLOTS-fibers "$PP" -app "$APP" -workers 1 -fibers "$SLOTS" -listen 127.0.0.1:$PORT -control 127.0.0.1:$CPORT -quiet
  run falcon-n1 bundle exec falcon serve --bind "http://127.0.0.1:$PORT" --count 1 --forked --config "$APP"
done
s1=$(steal); t1=$(total)
echo "steal: $(( (s1 - s0) * 100 / (t1 - t0 > 0 ? t1 - t0 : 1) ))% of all CPU time over the measurement ($((s1 - s0)) of $((t1 - t0)) ticks)"
