#!/usr/bin/env bash
# HTTP/1.1, HTTP/2 and HTTP/3 side by side on one server, at the same open-loop rate, in one run.
# A benchmark, not a test (issue 13's note). One puma-plus-server with every listener:
#
#   h1      -listen (cleartext)          pp-bench smoke -url 127.0.0.1:P -proto h1
#   h1-tls  -listen-tls, ALPN http/1.1   pp-bench smoke -url 127.0.0.1:T -proto h1 -tls
#   h2c     -listen + -h2c               pp-bench smoke -url 127.0.0.1:P -proto h2
#   h2-tls  -listen-tls, ALPN h2         pp-bench smoke -url 127.0.0.1:T -proto h2 -tls
#   h3      -listen-h3 (UDP T)           pp-bench smoke -url 127.0.0.1:T -proto h3
#
# for /hello and /mix/2/20 (scenarios/apps/mix: 2 ms CPU + 20 ms sleep), each at RATE requests
# per second (Poisson arrivals, latency from the intended start) for DUR, ROUNDS rounds whose
# order rotates (no protocol always first or last); medians of the rounds. Per run: p50 and p99
# from pp-bench, and the front end's CPU per request: utime+stime of the puma-plus-server
# process (/proc/PID/stat; the shepherd and the Ruby workers are other processes, not counted)
# over the run, divided by the requests it served in that time (/stats requests.total).
#
#   server/tools/bench_h1_h2_h3.sh build/server/puma-plus-server [rounds=3] [rate=300] [dur=10s] [workers=2] [threads=5]
#
# Loopback has no RTT: what this shows is what each protocol costs the front end and the tail it
# adds on one machine, not which one is faster for a client across a network (HTTP/3 saves
# round trips that loopback does not have). pp-bench runs on the same 2 cores as the server and
# the workers; the h2/h3 generators use 4 connections (-h2-conns 4), h1 one connection per
# request in flight.
set -euo pipefail
bin=$(realpath "$1"); rounds=${2:-3}; rate=${3:-300}; dur=${4:-10s}; workers=${5:-2}; threads=${6:-5}
repo=$(cd "$(dirname "$0")/../.." && pwd)
bench=${PP_BENCH:-$repo/build/bench/pp-bench}
app=$repo/scenarios/apps/mix/config.ru
work=$(mktemp -d /tmp/pp-bench-h123.XXXXXX)
pid=
cleanup() { [[ -n $pid ]] && { kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }; rm -rf "$work"; }
trap cleanup EXIT
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

port=$((20000 + RANDOM % 20000)); tport=$((port + 1)); cport=$((port + 2))
setsid "$bin" -app "$app" -workers "$workers" -threads "$threads" -listen "127.0.0.1:$port" -h2c \
  -listen-tls "127.0.0.1:$tport" -listen-h3 "127.0.0.1:$tport" -control "127.0.0.1:$cport" \
  -runtime-dir "$work/rt" -backlog 4096 -quiet -gem-dir "$repo/gem" > "$work/server.log" 2>&1 < /dev/null &
pid=$!
for _ in $(seq 200); do curl -fs -o /dev/null "http://127.0.0.1:$port/hello" && break; sleep 0.05; done
sleep 0.5 # every worker connected

args_of() { # $1 = protocol: pp-bench's target and protocol flags (this run's ports)
  case $1 in
    h1) echo "-url 127.0.0.1:$port -proto h1" ;;
    h1-tls) echo "-url 127.0.0.1:$tport -proto h1 -tls" ;;
    h2c) echo "-url 127.0.0.1:$port -proto h2" ;;
    h2-tls) echo "-url 127.0.0.1:$tport -proto h2 -tls" ;;
    h3) echo "-url 127.0.0.1:$tport -proto h3" ;;
  esac
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
served() { curl -fs "http://127.0.0.1:$cport/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["requests"]["total"])'; }

protos=(h1 h1-tls h2c h2-tls h3)
paths=(/hello /mix/2/20)
combos=()
for p in "${protos[@]}"; do for u in "${paths[@]}"; do combos+=("$p $u"); done; done
for p in "${protos[@]}"; do # warm-up: every path of every protocol taken once
  # shellcheck disable=SC2046
  "$bench" smoke $(args_of "$p") -path /hello -rate "$rate" -dur 2s > /dev/null 2>&1 || true
done

results=$work/results
: > "$results"
hz=$(getconf CLK_TCK)
for r in $(seq "$rounds"); do
  n=${#combos[@]}
  for i in $(seq 0 $((n - 1))); do
    read -r p u <<< "${combos[$(((i + (r - 1) * 3) % n))]}" # rotate by 3: path and protocol both move
    out=$work/out
    c0=$(cpu_ticks); s0=$(served)
    # shellcheck disable=SC2046
    "$bench" smoke $(args_of "$p") -path "$u" -rate "$rate" -dur "$dur" -seed "$r" > "$out" 2>&1 || true
    c1=$(cpu_ticks); s1=$(served)
    python3 - "$out" "$p" "$u" "$r" "$((c1 - c0))" "$((s1 - s0))" "$hz" >> "$results" <<'EOF'
import re, sys
out, proto, path, rnd, ticks, served, hz = sys.argv[1:]
text = open(out).read()
def ns(v):
    m = re.fullmatch(r"([\d.]+)(ns|us|ms|s)", v)
    return float(m.group(1)) * {"ns": 1e-3, "us": 1, "ms": 1e3, "s": 1e6}[m.group(2)] if m else float("nan")
lat = re.search(r"latency\s+p50 (\S+)\s+p90 (\S+)\s+p99 (\S+)", text)
req = re.search(r"requests\s+offered (\d+)\s+ok (\d+)\s+shed\(503\) (\d+)\s+http_errors (\d+)\s+conn_errors (\d+)\s+timeouts (\d+)", text)
if not lat or not req:
    sys.stderr.write(f"{proto} {path} round {rnd}: no summary in pp-bench output:\n{text[-1500:]}\n")
    sys.exit(0)
offered, ok = int(req.group(1)), int(req.group(2))
errors = sum(int(req.group(k)) for k in (3, 4, 5, 6))
cpu_us = int(ticks) * 1e6 / int(hz) / int(served) if int(served) else float("nan")
print(f"{proto} {path} {rnd} {ns(lat.group(1)):.1f} {ns(lat.group(3)):.1f} {cpu_us:.1f} {offered} {ok} {errors} {served}")
EOF
    tail -1 "$results" >&2
  done
done

echo "date: $(date -u +%FT%TZ)  load average: $(cut -d' ' -f1-3 /proc/loadavg)  cores: $(nproc)  rounds: $rounds  rate: $rate rps  duration: $dur  workers x threads: ${workers}x$threads"
python3 - "$results" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    p, u, _, p50, p99, cpu, offered, ok, err, served = line.split()
    rows.setdefault((p, u), []).append((float(p50), float(p99), float(cpu), int(offered), int(ok), int(err)))
def us(v):
    return f"{v / 1000:.2f} ms" if v >= 1000 else f"{v:.0f} µs"
def cell(vals, fmt):
    return f"{fmt(statistics.median(vals))} ({' / '.join(fmt(v) for v in vals)})"
print("| protocol | path | p50 median (rounds) | p99 median (rounds) | front-end CPU per request, median (rounds) | ok / offered | errors |")
print("|---|---|---:|---:|---:|---:|---:|")
for u in ["/hello", "/mix/2/20"]:
    for p in ["h1", "h1-tls", "h2c", "h2-tls", "h3"]:
        v = rows.get((p, u))
        if not v:
            print(f"| {p} | {u} | — | — | — | — | — |")
            continue
        print(f"| {p} | {u} | {cell([x[0] for x in v], us)} | {cell([x[1] for x in v], us)} | "
              f"{cell([x[2] for x in v], lambda c: f'{c:.0f} µs')} | "
              f"{sum(x[4] for x in v)} / {sum(x[3] for x in v)} | {sum(x[5] for x in v)} |")
EOF
echo
for p in "${protos[@]}"; do echo "    $p  $bench smoke $(args_of "$p") -path PATH -rate $rate -dur $dur -seed ROUND"; done
