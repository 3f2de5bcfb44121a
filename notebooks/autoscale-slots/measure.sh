#!/usr/bin/env bash
# Issue 24's goals, measured: puma-plus started as a new user would (`-workers 1 -threads 5
# -autoscale`, nothing else) against falcon 0.51.1 and a static puma-plus, on the mix app.
# Workloads (wrk -t2, --timeout 10s):
#   io200    /mix/0/500   200 connections   pp-auto, falcon -n 1
#   io1000   /mix/0/500  1000 connections   pp-auto, falcon -n 1
#   mixed    /mix/5/300   200 connections   pp-auto, falcon -n 2
#   cpu      /mix/17/0     20 connections   pp-auto, pp 2x1 (static, one process a core), pp 1x5
#   mixed-static  /mix/5/300  200 connections   static pp 2x60, 2x72, 2x100, 2x150, falcon -n 2
#   cpucut   /mix/17/0     20 connections   pp-auto, pp-auto with slots.cut false, pp 2x1
#   mixedfiber /mix/5/300  200 connections   pp-auto, pp-auto with fiber slots (-fibers 5), falcon -n 2
# Each run starts the server fresh, then `cold`: the first DUR seconds of load from the start
# (the controller has to find its size inside them), then `warm`: DUR more seconds. The sum of
# PSS over the server's process group is read near the end of the warm run; pp-auto's final
# processes and slots per worker come from /stats. Prints one line per run and the hypervisor
# steal over the whole measurement.
#   notebooks/autoscale-slots/measure.sh [ROUNDS] [WORKLOADS...]   (from a built checkout)
#   DUR=10 (seconds per phase)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
ROUNDS=${1:-3}
shift || true
WORKLOADS=${*:-io200 io1000 mixed cpu}
DUR=${DUR:-10}
APP=$ROOT/scenarios/apps/mix/config.ru
PP=${PP:-$ROOT/build/server/puma-plus-server} # PP=...: another server binary, side by side
export GEM_HOME=$ROOT/build/gems BUNDLE_GEMFILE=$ROOT/tests/apps/gemfiles/rubygems/Gemfile BUNDLE_FROZEN=true
export BUNDLE_APP_CONFIG=$ROOT/build/gems/.bundle-config BUNDLE_USER_HOME=$ROOT/build/gems/.bundle-home
export RACK_ENV=production RUBYOPT=-rbundler/setup
PORT=${PORT:-19581}
CPORT=$((PORT + 1))
ulimit -n 8192

steal() { awk '/^cpu /{print $9}' /proc/stat; }
total() { awk '/^cpu /{s=0; for(i=2;i<=NF;i++) s+=$i; print s}' /proc/stat; }
pss_of_group() {
  local sum=0 p v
  for p in $(ps -o pid= -g "$1"); do
    v=$(awk '/^Pss:/{print $2}' /proc/$p/smaps_rollup 2>/dev/null || echo 0)
    sum=$((sum + ${v:-0}))
  done
  echo $sum
}
wrk_line() { # FILE -> "rps p99"
  awk '/Requests\/sec/{r=$2} /^ +99%/{p=$2} END{print r, p}' "$1"
}

run() { # WORKLOAD NAME PATH CONNS CMD...
  local wl=$1 name=$2 path=$3 conns=$4; shift 4
  setsid "$@" >/tmp/pp-as-$name.log 2>&1 &
  local pid=$!
  for _ in $(seq 300); do
    curl -fs -o /dev/null "http://127.0.0.1:$PORT/hello" && break
    sleep 0.1
  done
  wrk -t2 -c"$conns" -d"${DUR}s" --timeout 10s --latency "http://127.0.0.1:$PORT$path" >/tmp/pp-as-cold.txt
  wrk -t2 -c"$conns" -d"${DUR}s" --timeout 10s --latency "http://127.0.0.1:$PORT$path" >/tmp/pp-as-warm.txt &
  local w=$!
  sleep $((DUR - 1))
  local pss; pss=$(pss_of_group "$pid")
  local shape="-"
  if [[ $name == pp-* ]]; then
    shape=$(curl -fs "http://127.0.0.1:$CPORT/stats" | /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); print("%dx%d" % (d["booted_workers"], d.get("slots_per_worker", 0)))' 2>/dev/null || echo "?")
  fi
  wait $w
  read -r crps cp99 < <(wrk_line /tmp/pp-as-cold.txt)
  read -r wrps wp99 < <(wrk_line /tmp/pp-as-warm.txt)
  local errs; errs=$(grep -hE "Socket errors|Non-2xx" /tmp/pp-as-cold.txt /tmp/pp-as-warm.txt | tr -s ' ' | tr '\n' ' ' || true)
  printf '%-7s %-10s cold %8s req/s p99 %8s | warm %8s req/s p99 %8s | PSS %5d MiB | shape %-8s %s\n' \
    "$wl" "$name" "$crps" "$cp99" "$wrps" "$wp99" $((pss / 1024)) "$shape" "$errs"
  kill -TERM -- -"$pid" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL -- -"$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

ppauto() { echo "$PP" -app "$APP" -workers 1 -threads 5 -autoscale -listen 127.0.0.1:$PORT -control 127.0.0.1:$CPORT -quiet; }
ppstatic() { echo "$PP" -app "$APP" -workers "$1" -threads "$2" -listen 127.0.0.1:$PORT -control 127.0.0.1:$CPORT -quiet; }
falcon() { echo bundle exec falcon serve --bind "http://127.0.0.1:$PORT" --count "$1" --forked --config "$APP"; }

# pp-auto as it starts without a policy file (cores = the machine's CPUs), the cut turned off.
NOCUT=$(mktemp --suffix=.yaml)
trap 'rm -f "$NOCUT"' EXIT
printf 'cores: %s\nslots:\n  cut: false\n' "$(nproc)" >"$NOCUT"

s0=$(steal); t0=$(total)
for r in $(seq "$ROUNDS"); do
  echo "round $r"
  for wl in $WORKLOADS; do
    case $wl in
      io200)
        run io200 pp-auto /mix/0/500 200 $(ppauto)
        run io200 falcon-n1 /mix/0/500 200 $(falcon 1) ;;
      io1000)
        run io1000 pp-auto /mix/0/500 1000 $(ppauto)
        run io1000 falcon-n1 /mix/0/500 1000 $(falcon 1) ;;
      mixed)
        run mixed pp-auto /mix/5/300 200 $(ppauto)
        run mixed falcon-n2 /mix/5/300 200 $(falcon 2) ;;
      mixedfiber) # the same start with fiber slots (-fibers 5: opt-in, a fiber-safe app)
        run mixed pp-auto /mix/5/300 200 $(ppauto)
        run mixed pp-auto-fib /mix/5/300 200 $(ppauto | sed 's/-threads 5/-fibers 5/')
        run mixed falcon-n2 /mix/5/300 200 $(falcon 2) ;;
      mixed-static)
        for t in 60 72 100 150; do run mixed pp-2x$t /mix/5/300 200 $(ppstatic 2 $t); done
        run mixed falcon-n2 /mix/5/300 200 $(falcon 2) ;;
      cpu)
        run cpu pp-auto /mix/17/0 20 $(ppauto)
        run cpu pp-2x1 /mix/17/0 20 $(ppstatic 2 1)
        run cpu pp-1x5 /mix/17/0 20 $(ppstatic 1 5) ;;
      cpucut) # rule 4b's cut of configured slots against the same server without it
        run cpu pp-auto /mix/17/0 20 $(ppauto)
        run cpu pp-nocut /mix/17/0 20 $(ppauto) -policy "$NOCUT"
        run cpu pp-2x1 /mix/17/0 20 $(ppstatic 2 1) ;;
      *) echo "unknown workload $wl" >&2; exit 2 ;;
    esac
  done
done
s1=$(steal); t1=$(total)
echo "steal: $(( (s1 - s0) * 100 / (t1 - t0 > 0 ? t1 - t0 : 1) ))% of all CPU time over the measurement ($((s1 - s0)) of $((t1 - t0)) ticks)"
