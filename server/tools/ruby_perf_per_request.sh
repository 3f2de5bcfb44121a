#!/usr/bin/env bash
# CPU per /hello request of the Ruby worker process under closed-loop load, split into user
# and kernel time, with a perf profile of where it goes. A measurement on a shared machine,
# not a test: run it alone, compare rounds made side by side.
#
# Starts puma-plus-server with 1 worker x THREADS threads on scenarios/apps/mix/config.ru,
# warms it up (wrk, 1 s), then for SECONDS runs `wrk -t1 -cCONNS` against /hello while
# `perf record -g` samples the worker process (all its threads). CPU per request is the
# worker's utime and stime (/proc/PID/stat) over the run divided by the requests wrk
# completed; the front end's is printed beside it. Then, with PP_PERF_TOP=K (default 20; 0
# skips perf), the top K symbols by self samples, and the samples' split by object: kernel
# ([kernel.kallsyms]), libruby, libc, the gem's C extension. With PP_PERF_STRACE=1 a second,
# shorter run counts the worker's syscalls per request with `strace -c -f` (strace slows the
# worker, so its CPU is not used). Prints one line "cpu ..." to be grepped by a driver.
#
#   server/tools/ruby_perf_per_request.sh build/server/puma-plus-server [threads=5] [seconds=10] [conns=10]
#
# The worker loads the C codec from build/gem/ext-lib, as the e2e tests do (PUMA_PLUS_PURE_RUBY=1:
# the pure-Ruby codec). PP_GEM_DIR and PP_EXT_LIB measure another copy of the gem (e.g. an
# older commit's, for a before/after in one run). perf on a VM without hardware counters
# samples the cpu-clock; libruby has no symbols here, so its static functions show as addresses.
set -euo pipefail
bin=$(realpath "$1"); threads=${2:-5}; secs=${3:-10}; conns=${4:-10}
top=${PP_PERF_TOP:-20}
repo=$(cd "$(dirname "$0")/../.." && pwd)
gem_dir=${PP_GEM_DIR:-$repo/gem}
ext=${PP_EXT_LIB:-$(dirname "$bin")/../gem/ext-lib}
app=$repo/scenarios/apps/mix/config.ru
for tool in wrk curl; do
  command -v "$tool" > /dev/null || { echo "ruby_perf_per_request: $tool missing" >&2; exit 1; }
done
[[ $top == 0 ]] || command -v perf > /dev/null || { echo "ruby_perf_per_request: perf missing (PP_PERF_TOP=0 skips it)" >&2; exit 1; }
work=$(mktemp -d /tmp/pp-rperf.XXXXXX)
port=$((20000 + RANDOM % 20000))
tck=$(getconf CLK_TCK)

start_server() {
  RUBYLIB=$ext${RUBYLIB:+:$RUBYLIB} setsid "$bin" -app "$app" -workers 1 -threads "$threads" \
    -listen "127.0.0.1:$port" -control off -quiet -runtime-dir "$work/rt" -gem-dir "$gem_dir" \
    > "$work/server.log" 2>&1 < /dev/null &
  pid=$!
}
start_server
cleanup() {
  kill -TERM "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
url=http://127.0.0.1:$port/hello
up=0
for _ in $(seq 300); do
  if curl -fs -o /dev/null "$url"; then up=1; break; fi
  if ! kill -0 "$pid" 2>/dev/null; then
    grep -q "address already in use" "$work/server.log" || break
    port=$((20000 + RANDOM % 20000)) url=http://127.0.0.1:$port/hello # taken: another port
    wait "$pid" 2>/dev/null || true
    start_server
  fi
  sleep 0.1
done
[[ $up == 1 ]] || { echo "ruby_perf_per_request: the server did not answer"; cat "$work/server.log"; exit 1; } >&2
shepherd=$(pgrep -P "$pid" | head -1)
worker=$(pgrep -P "$shepherd" | head -1)
[[ -n $worker ]] || { echo "ruby_perf_per_request: no worker process" >&2; exit 1; }
sleep 0.5 # every thread connected

ticks() { awk '{sub(/^.*\) /, ""); print $12, $13}' "/proc/$1/stat"; } # utime stime
wrk -t1 -c"$conns" -d1s "$url" > /dev/null # warm-up
read -r wu0 ws0 <<< "$(ticks "$worker")"; read -r su0 ss0 <<< "$(ticks "$pid")"
if [[ $top != 0 ]]; then
  perf record -q -g -F 999 -p "$worker" -o "$work/perf.data" -- sleep "$secs" > /dev/null 2>&1 &
  perf_pid=$!
fi
wrk -t1 -c"$conns" -d"${secs}s" "$url" > "$work/wrk.out"
read -r wu1 ws1 <<< "$(ticks "$worker")"; read -r su1 ss1 <<< "$(ticks "$pid")"
[[ $top != 0 ]] && wait "$perf_pid"
reqs=$(awk '/requests in/ {print $1}' "$work/wrk.out")
rps=$(awk '/Requests\/sec/ {print $2}' "$work/wrk.out")
grep -q "Non-2xx" "$work/wrk.out" && { echo "ruby_perf_per_request: wrk saw errors" >&2; cat "$work/wrk.out" >&2; exit 1; }
awk -v t="$tck" -v n="$reqs" -v wu=$((wu1 - wu0)) -v ws=$((ws1 - ws0)) -v su=$((su1 - su0)) -v ss=$((ss1 - ss0)) \
  -v th="$threads" -v rps="$rps" -v codec="${PUMA_PLUS_PURE_RUBY:+ruby}" 'BEGIN {
    us = 1e6 / t / n
    printf "cpu threads=%d rps=%s requests=%d worker_us=%.1f worker_user_us=%.1f worker_sys_us=%.1f frontend_us=%.1f codec=%s\n",
      th, rps, n, (wu + ws) * us, wu * us, ws * us, (su + ss) * us, codec == "" ? "native" : codec }'

if [[ -n ${PP_PERF_STRACE:-} ]] && command -v strace > /dev/null; then
  strace -f -c -p "$worker" -o "$work/strace.txt" > /dev/null 2>&1 &
  st=$!
  sleep 0.5
  wrk -t1 -c"$conns" -d3s "$url" > "$work/wrk2.out"
  kill -INT "$st"; wait "$st" 2>/dev/null || true
  n2=$(awk '/requests in/ {print $1}' "$work/wrk2.out")
  echo; echo "worker syscalls per request (strace -c -f, $n2 requests; strace slows the worker):"
  awk -v n="$n2" '$1 ~ /^[0-9.]+$/ && NF >= 5 && $NF != "total" && $4 / n >= 0.01 {printf "%8.2f  %s\n", $4 / n, $NF}' "$work/strace.txt" | sort -rn
fi

[[ $top != 0 ]] || exit 0
echo; echo "perf: samples by object (worker, all threads; cpu-clock):"
perf report -i "$work/perf.data" --no-children --sort dso --stdio 2> /dev/null |
  awk '$1 ~ /%$/ {print "  " $0}' | head -8
echo; echo "perf: top $top symbols by self samples:"
perf report -i "$work/perf.data" --no-children --sort dso,sym --stdio -g none 2> /dev/null |
  awk '$1 ~ /%$/ {print "  " $0}' | head -"$top"
