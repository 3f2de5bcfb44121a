#!/usr/bin/env bash
# What the C front end's CPU per /hello request is made of, under closed-loop load: a
# measurement, not a test. Starts puma-plus-server (scenarios/apps/mix, W workers x T threads,
# -h2c), warms up, then for each protocol runs the load for SECS seconds while
#   perf stat  -p FE   task-clock, context switches and the syscalls the front end makes
#   perf record -p FE  cpu-clock samples with call graphs (the VM has no hardware counters)
# in three consecutive windows of the same load, so that perf's own cost stays out of the CPU
# figure: (1) nothing attached: req/s and front-end CPU per request, user and system, from
# /proc/PID/stat; (2) perf stat (syscall tracepoints): syscalls by name and context switches
# per request; (3) perf record: the top functions by self time, user and kernel apart.
# Requests per window come from /stats requests.total.
#
#   server/tools/fe_profile.sh build/server/puma-plus-server [secs=5] [protos="h1 h2c"] [workers=1] [threads=5]
#
# h1: wrk -t1 -c10 (keep-alive); h2c: h2load -c10 -m10 (10 streams per connection).
# Needs perf (linux-perf), wrk, h2load, curl: scripts/install-deps.sh installs them.
set -euo pipefail
bin=$(realpath "$1"); secs=${2:-5}; protos=${3:-"h1 h2c"}; workers=${4:-1}; threads=${5:-5}
repo=$(cd "$(dirname "$0")/../.." && pwd)
app=$repo/scenarios/apps/mix/config.ru
for tool in perf wrk h2load curl; do
  command -v "$tool" > /dev/null || { echo "fe_profile: $tool missing (scripts/install-deps.sh installs it)" >&2; exit 1; }
done
work=$(mktemp -d /tmp/pp-feprof.XXXXXX)
port=$((20000 + RANDOM % 20000)); cport=$((port + 1))
tck=$(getconf CLK_TCK)

setsid "$bin" -app "$app" -workers "$workers" -threads "$threads" -listen "127.0.0.1:$port" -h2c \
  -control "127.0.0.1:$cport" -runtime-dir "$work/rt" -quiet -gem-dir "$repo/gem" \
  > "$work/server.log" 2>&1 < /dev/null &
pid=$!
cleanup() { kill -TERM "$pid" 2> /dev/null || true; wait "$pid" 2> /dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
up=0
for _ in $(seq 300); do
  curl -fs -o /dev/null "http://127.0.0.1:$port/hello" && { up=1; break; }
  kill -0 "$pid" 2> /dev/null || break
  sleep 0.1
done
[[ $up == 1 ]] || { echo "fe_profile: the server did not answer"; cat "$work/server.log"; exit 1; } >&2

served() { curl -fs "http://127.0.0.1:$cport/stats" | ruby -rjson -e 'puts JSON.parse($stdin.read)["requests"]["total"]'; }
ticks() { awk '{sub(/^.*\) /, ""); print $12, $13}' "/proc/$pid/stat"; } # utime stime
load() { # $1 = protocol, $2 = seconds
  case $1 in
    h1) wrk -t1 -c10 -d"$2s" "http://127.0.0.1:$port/hello" > "$work/load.out" ;;
    h2c) h2load -c10 -m10 -D "$2" "http://127.0.0.1:$port/hello" > "$work/load.out" ;;
    *) echo "fe_profile: unknown protocol $1 (h1, h2c)" >&2; exit 2 ;;
  esac
}
events=task-clock,context-switches,raw_syscalls:sys_enter
names="read write readv writev recvmsg sendmsg epoll_wait epoll_pwait epoll_ctl futex clock_gettime"
for s in $names; do events+=",syscalls:sys_enter_$s"; done

echo "front end: $bin, ${workers} x ${threads}, ${secs}s per protocol, $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for p in $protos; do
  load "$p" 1 # warm-up
  load "$p" "$((3 * secs + 2))" &
  lp=$!
  sleep 1
  n0=$(served); read -r u0 s0 < <(ticks)
  sleep "$secs"
  n1=$(served); read -r u1 s1 < <(ticks)
  perf stat -x, -e "$events" -p "$pid" -o "$work/stat.$p" -- sleep "$secs"
  n2=$(served)
  perf record -q -F 499 -g -p "$pid" -o "$work/perf.$p.data" -- sleep "$secs" 2> /dev/null
  wait "$lp" || true
  n=$((n1 - n0))
  echo
  echo "== $p: $n requests in ${secs}s ($((n / secs)) req/s), nothing attached"
  awk -v n="$n" -v du=$((u1 - u0)) -v ds=$((s1 - s0)) -v t="$tck" 'BEGIN {
    printf "front-end CPU per request: %.1f us: user %.1f us, system %.1f us (/proc/PID/stat)\n", (du + ds) / t * 1e6 / n, du / t * 1e6 / n, ds / t * 1e6 / n }'
  n=$((n2 - n1))
  echo "under perf stat ($n requests; the tracepoints slow the server down, counts per request do not depend on it):"
  awk -F, -v n="$n" '
    $3 == "context-switches" { printf "context switches per request: %.2f\n", $1 / n }
    $3 == "raw_syscalls:sys_enter" { printf "syscalls per request: %.2f:", $1 / n }
    $3 ~ /^syscalls:sys_enter_/ && $1 > 0 { sub(/^syscalls:sys_enter_/, "", $3); printf " %s %.2f", $3, $1 / n }
    END { print "" }' "$work/stat.$p"
  perf report -i "$work/perf.$p.data" --no-children --sort dso --stdio 2> /dev/null |
    awk '/^ +[0-9.]+%/ { printf "  %7s  %s\n", $1, $2 }' | sed '1i self time by object:' | head -9 || true
  echo "top functions by self time:"
  perf report -i "$work/perf.$p.data" --no-children --sort dso,sym --stdio -g none 2> /dev/null |
    awk '/^ +[0-9.]+%/ { pct = $1; $1 = ""; printf "  %7s %s\n", pct, $0 }' | head -25 || true # head ends the pipe early
done
