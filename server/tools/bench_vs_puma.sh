#!/usr/bin/env bash
# Side-by-side /hello benchmark: puma-plus-server vs Debian's puma on the same config.ru, the
# same Ruby processes and threads, the same load generator (wrk, closed loop), alternating
# rounds in one run. A benchmark, not a test. Prints per-round lines and the medians.
#
#   server/tools/bench_vs_puma.sh BUILD/server/puma-plus-server [rounds=3] [seconds=5] [conns=10] [workers=1] [threads=5]
#
# CPU per request: utime+stime of the process group (from /proc/<pid>/stat) over the round,
# divided by the requests wrk completed; for puma-plus also the C server alone.
set -euo pipefail
bin=$(realpath "$1"); rounds=${2:-3}; secs=${3:-5}; conns=${4:-10}; workers=${5:-1}; threads=${6:-5}
repo=$(cd "$(dirname "$0")/../.." && pwd)
app=$repo/scenarios/apps/mix/config.ru
tck=$(getconf CLK_TCK)
port=$((20000 + RANDOM % 20000)); cport=$((port + 1))

cpu_ticks() { # sum utime+stime over the given pids
  local t=0 p
  for p in "$@"; do
    [[ -r /proc/$p/stat ]] || continue
    t=$((t + $(awk '{sub(/^.*\) /, ""); print $12 + $13}' /proc/$p/stat)))
  done
  echo $t
}
group_pids() { pgrep -g "$1" | tr '\n' ' '; }
wait_http() { for _ in $(seq 200); do curl -fs -o /dev/null "http://127.0.0.1:$port/hello" && return 0; sleep 0.05; done; return 1; }

run_round() { # $1 = name; server already listening, $2 = pgid, $3 = server-only pid (or 0)
  local pids; pids=$(group_pids "$2")
  wrk -t1 -c"$conns" -d1s "http://127.0.0.1:$port/hello" > /dev/null # warm-up
  local c0 s0; c0=$(cpu_ticks $pids); s0=$(cpu_ticks "$3")
  local out; out=$(wrk -t1 -c"$conns" -d"${secs}s" --latency "http://127.0.0.1:$port/hello")
  local c1 s1; c1=$(cpu_ticks $pids); s1=$(cpu_ticks "$3")
  local rps reqs p50 p99
  rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  reqs=$(awk '/requests in/ {print $1}' <<<"$out")
  to_us='{v=$2; if (v ~ /us$/) {sub(/us$/,"",v); print v+0} else if (v ~ /ms$/) {sub(/ms$/,"",v); print v*1000} else {sub(/s$/,"",v); print v*1e6}}'
  p50=$(awk '$1=="50%" '"$to_us" <<<"$out"); p99=$(awk '$1=="99%" '"$to_us" <<<"$out")
  local cpu_us srv_us
  cpu_us=$(awk -v d=$((c1 - c0)) -v n="$reqs" -v t="$tck" 'BEGIN {printf "%.1f", d / t * 1e6 / n}')
  srv_us=$(awk -v d=$((s1 - s0)) -v n="$reqs" -v t="$tck" 'BEGIN {printf "%.1f", d / t * 1e6 / n}')
  echo "$1 rps=$rps p50_us=$p50 p99_us=$p99 cpu_us_per_req_total=$cpu_us cpu_us_per_req_frontend=$srv_us"
}

results=()
for r in $(seq "$rounds"); do
  # The gem's C codec, built beside the binary (without it the worker falls back to the
  # pure-Ruby codec, about twice its instructions per request).
  RUBYLIB=$(dirname "$bin")/../gem/ext-lib${RUBYLIB:+:$RUBYLIB} setsid "$bin" -app "$app" -workers "$workers" -threads "$threads" -listen "127.0.0.1:$port" \
    -control "127.0.0.1:$cport" -quiet -gem-dir "$repo/gem" > /tmp/bench-pp-$$.log 2>&1 < /dev/null &
  pp=$!
  wait_http; sleep 0.5
  results+=("$(run_round puma-plus "$pp" "$pp")")
  kill -TERM "$pp"; wait "$pp" || true; sleep 0.3

  pushd "$(dirname "$app")" > /dev/null
  setsid puma -w "$workers" -t "$threads:$threads" -b "tcp://127.0.0.1:$port" \
    -e production --silent "$app" > /tmp/bench-puma-$$.log 2>&1 < /dev/null &
  pm=$!
  popd > /dev/null
  wait_http; sleep 0.5
  results+=("$(run_round puma "$pm" 0)")
  kill -TERM -- "-$pm" 2>/dev/null || true; wait "$pm" || true; sleep 0.5
  echo "round $r done" >&2
done
printf '%s\n' "${results[@]}"
printf '%s\n' "${results[@]}" | python3 -c '
import sys, statistics
rows = {}
for line in sys.stdin:
    name, *kvs = line.split()
    for kv in kvs:
        k, v = kv.split("=")
        rows.setdefault(name, {}).setdefault(k, []).append(float(v))
for name, cols in rows.items():
    print("median " + name + ": " + " ".join(f"{k}={statistics.median(v):g}" for k, v in cols.items()))
pp, pu = rows.get("puma-plus"), rows.get("puma")
if pp and pu:
    k = "rps"
    print("ratio puma-plus/puma rps: %.2f" % (statistics.median(pp[k]) / statistics.median(pu[k])))
'
