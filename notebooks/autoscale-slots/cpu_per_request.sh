#!/usr/bin/env bash
# CPU time per request, per process, on the mix app: numbers that do not hang on the wall
# clock. Starts one server, warms it, runs `wrk -t2 -cCONNS -dDURs` on PATH, and reads
# utime+stime (/proc/PID/stat) and context switches (voluntary + involuntary, summed over
# /proc/PID/task/*/status) of every process in the server's process group before and after,
# plus wrk's own (from /usr/bin/time). Prints one line per process kind, in microseconds of
# CPU per request, and the server's total without wrk. With PERF=1 the whole group also runs
# under `perf stat -e instructions,context-switches` (user+kernel instructions per request).
# With fixed connections below saturation (e.g. /mix/5/300 at 60 connections, ~195 req/s,
# one core of app CPU) the offered rate is set by the connections, not by the server.
#
#   notebooks/autoscale-slots/cpu_per_request.sh SERVER [CONNS=60] [DUR=20] [PATH=/mix/5/300]
#   SERVER: pp-W-T (static puma-plus, W workers x T threads), ppf-W-N (W workers x N fiber
#   slots), pp-auto, falcon-N
#   PP=binary (default build/server/puma-plus-server of this checkout)
#   PP_GEM_DIR=DIR PP_EXT_LIB=DIR: puma-plus runs another copy of the gem with the C codec built
#   in DIR (e.g. /work/main/gem and /work/main/build/gem/ext-lib): a before/after of the gem alone
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SERVER=$1 CONNS=${2:-60} DUR=${3:-20} URLPATH=${4:-/mix/5/300}
APP=$ROOT/scenarios/apps/mix/config.ru
PP=${PP:-$ROOT/build/server/puma-plus-server}
export GEM_HOME=$ROOT/build/gems BUNDLE_GEMFILE=$ROOT/tests/apps/gemfiles/rubygems/Gemfile BUNDLE_FROZEN=true
export BUNDLE_APP_CONFIG=$ROOT/build/gems/.bundle-config BUNDLE_USER_HOME=$ROOT/build/gems/.bundle-home
export RACK_ENV=production RUBYOPT=-rbundler/setup
PORT=${PORT:-19681}
CPORT=$((PORT + 1))
ulimit -n 8192
HZ=$(getconf CLK_TCK)

case $SERVER in
  pp-auto) cmd=("$PP" -app "$APP" -workers 1 -threads 5 -autoscale -listen 127.0.0.1:$PORT -control 127.0.0.1:$CPORT -quiet) ;;
  ppf-*-*) w=${SERVER#ppf-}; t=${w#*-}; w=${w%-*}
    cmd=("$PP" -app "$APP" -workers "$w" -fibers "$t" -listen 127.0.0.1:$PORT -control 127.0.0.1:$CPORT -quiet) ;;
  pp-*-*) w=${SERVER#pp-}; t=${w#*-}; w=${w%-*}
    cmd=("$PP" -app "$APP" -workers "$w" -threads "$t" -listen 127.0.0.1:$PORT -control 127.0.0.1:$CPORT -quiet) ;;
  falcon-*) cmd=(bundle exec falcon serve --bind "http://127.0.0.1:$PORT" --count "${SERVER#falcon-}" --forked --config "$APP") ;;
  *) echo "cpu_per_request: unknown server $SERVER" >&2; exit 2 ;;
esac

if [[ -n ${PP_GEM_DIR:-} && $SERVER == pp* ]]; then
  cmd+=(-gem-dir "$PP_GEM_DIR")
  export RUBYLIB=${PP_EXT_LIB:?PP_EXT_LIB must name the directory holding puma_plus/puma_plus_ext.so}${RUBYLIB:+:$RUBYLIB}
fi
setsid "${cmd[@]}" > /tmp/pp-cpr-$SERVER.log 2>&1 &
pid=$!
stop() {
  kill -TERM -- -"$pid" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL -- -"$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
trap stop EXIT
for _ in $(seq 300); do
  curl -fs -o /dev/null "http://127.0.0.1:$PORT/hello" && break
  sleep 0.1
done
wrk -t2 -c"$CONNS" -d5s --timeout 10s "http://127.0.0.1:$PORT$URLPATH" > /dev/null # warm-up (and slot growth)
sleep 1

# "pid kind ticks ctxsw" for every process of the group. kind: the front end, the shepherd
# (puma-plus's master), a worker; falcon's supervisor and workers by their titles.
snap() {
  local p comm kind ticks cs
  for p in $(ps -o pid= -g "$pid"); do
    [[ -r /proc/$p/stat ]] || continue
    comm=$(tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null | cut -c1-200)
    case $comm in
      *puma-plus-server*) kind=frontend ;;
      *"puma-plus "*" worker "*) kind=worker ;;
      *"puma-plus "*" shepherd:"*) kind=master ;;
      *"127.0.0.1:$PORT"*) kind=worker ;;
      *falcon*supervisor*|*"falcon serve"*) kind=master ;;
      *) kind=$(echo "$comm" | awk '{print $1}' | xargs basename 2>/dev/null || echo other) ;;
    esac
    ticks=$(awk '{print $14 + $15, $14}' /proc/$p/stat 2>/dev/null || echo 0 0)
    cs=$(cat /proc/$p/task/*/status 2>/dev/null | awk '/ctxt_switches/{s+=$2} END{print s+0}')
    echo "$p $kind $ticks $cs" # pid kind ticks user_ticks ctxsw
  done
}
steal() { awk '/^cpu /{print $9}' /proc/stat; }
s0=$(steal); load0=$(cut -d' ' -f1 /proc/loadavg)
snap > /tmp/pp-cpr-before.txt
if [[ -n ${PERF:-} ]]; then
  pids=$(ps -o pid= -g "$pid" | xargs | tr ' ' ,)
  perf stat -e instructions,context-switches -p "$pids" -x, -o /tmp/pp-cpr-perf.txt -- sleep "$DUR" &
  perfpid=$!
fi
/usr/bin/time -f "%U %S" -o /tmp/pp-cpr-wrktime.txt \
  wrk -t2 -c"$CONNS" -d"${DUR}s" --timeout 10s --latency "http://127.0.0.1:$PORT$URLPATH" > /tmp/pp-cpr-wrk.txt
snap > /tmp/pp-cpr-after.txt
[[ -n ${PERF:-} ]] && wait "$perfpid"
s1=$(steal)
reqs=$(awk '/requests in/{print $1}' /tmp/pp-cpr-wrk.txt)
rps=$(awk '/Requests\/sec/{print $2}' /tmp/pp-cpr-wrk.txt)
p99=$(awk '/^ +99%/{print $2}' /tmp/pp-cpr-wrk.txt)
read -r wu ws < /tmp/pp-cpr-wrktime.txt
shape=-
if [[ $SERVER == pp* ]]; then
  shape=$(curl -fs "http://127.0.0.1:$CPORT/stats" | /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); print("%dx%d" % (d["booted_workers"], d.get("slots_per_worker", 0)))' 2>/dev/null || echo "?")
fi
printf '%s conns %s %ss %s: %s requests, %s req/s, p99 %s, shape %s, load %s, steal %s ticks\n' \
  "$SERVER" "$CONNS" "$DUR" "$URLPATH" "$reqs" "$rps" "$p99" "$shape" "$load0" $((s1 - s0))
# Per kind: CPU us per request and context switches per request.
awk -v reqs="$reqs" -v hz="$HZ" -v dur="$DUR" -v wu="$wu" -v ws="$ws" '
  NR == FNR {t[$1] = $3; u[$1] = $4; c[$1] = $5; next}
  {k = $2; n[k]++; dt = $3 - ($1 in t ? t[$1] : 0); du = $4 - ($1 in u ? u[$1] : 0); dc = $5 - ($1 in c ? c[$1] : 0)
   cpu[k] += dt; usr[k] += du; cs[k] += dc; tot += dt; tcs += dc}
  END {
    for (k in cpu) printf "  %-9s x%d  %8.1f us CPU/req (user %.1f, sys %.1f)  %6.2f ctxsw/req\n", k, n[k], cpu[k] * 1e6 / hz / reqs,
      usr[k] * 1e6 / hz / reqs, (cpu[k] - usr[k]) * 1e6 / hz / reqs, cs[k] / reqs
    printf "  %-9s     %8.1f us CPU/req  %6.2f ctxsw/req  %.2f cores\n", "server", tot * 1e6 / hz / reqs, tcs / reqs, tot / hz / dur
    printf "  %-9s     %8.1f us CPU/req (user %.1f, sys %.1f)  %.2f cores\n", "wrk", (wu + ws) * 1e6 / reqs, wu * 1e6 / reqs, ws * 1e6 / reqs, (wu + ws) / dur
  }' /tmp/pp-cpr-before.txt /tmp/pp-cpr-after.txt
if [[ -n ${PERF:-} ]]; then
  awk -F, -v reqs="$reqs" '$3 ~ /instructions|context-switches/ {printf "  perf %-18s %12.0f per req\n", $3, $1 / reqs}' /tmp/pp-cpr-perf.txt
fi
