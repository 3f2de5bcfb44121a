#!/usr/bin/env bash
# Protocols side by side on one server: h2c vs HTTP/1.1, cleartext vs TLS, /hello, with the
# same worker count, in one run; rounds alternate the protocol order; medians of the rounds.
# A benchmark, not a test. For each worker shape (default "1x5 2x5") one server is started
# with -listen (h1 + -h2c) and -listen-tls (the development certificate, P-256, TLS 1.3):
#
#   h2c     h2load -n N -c 10 -m 10  http://HOST/hello
#   h1      h2load --h1 -n N -c 10   http://HOST/hello
#   h2-tls  h2load -n N -c 10 -m 10  https://HOST/hello     (ALPN h2)
#   h1-tls  h2load --h1 -n N -c 10   https://HOST/hello     (ALPN http/1.1)
#   hs      h2load --h1 -n H -c H -m 1 https://HOST/hello   H connections at once, one request
#           each: full handshakes (h2load keeps no session across clients); handshakes/s = H /
#           h2load's elapsed time, checked against /stats tls.handshakes
#   s_time  openssl s_time -new -time 5: one client, sequential full handshakes (no request);
#           connections / the run's wall-clock time
#
#   server/tools/bench_protocols.sh build/server/puma-plus-server [rounds=3] [N=100000] [H=2000] ["1x5 2x5"]
#
# h2load runs with one thread on the same cores as the server and the Ruby workers.
set -euo pipefail
bin=$(realpath "$1"); rounds=${2:-3}; n=${3:-100000}; hs=${4:-2000}; shapes=${5:-"1x5 2x5"}
repo=$(cd "$(dirname "$0")/../.." && pwd)
app=$repo/scenarios/apps/mix/config.ru
work=$(mktemp -d /tmp/pp-benchproto.XXXXXX)
pid=
cleanup() { [[ -n $pid ]] && { kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }; rm -rf "$work"; }
trap cleanup EXIT
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

rps_of() { awk '/^finished in/ {for (i = 1; i <= NF; i++) if ($(i+1) ~ /^req\/s/) {gsub(",", "", $i); print $i}}' "$1"; }
secs_of() { awk '/^finished in/ {v=$3; sub(",", "", v); if (v ~ /ms$/) {sub("ms", "", v); print v/1000} else if (v ~ /us$/) {sub("us", "", v); print v/1e6} else {sub("s", "", v); print v}}' "$1"; }
ok_of() { grep -q "$2 succeeded, 0 failed, 0 errored, 0 timeout" "$1"; }
handshakes() { curl -fs "http://127.0.0.1:$cport/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["tls"]["handshakes"])'; }

cmd_of() { # $1 = protocol: the command line (with this run's ports)
  case $1 in
    h2c) echo "h2load -n $n -c 10 -m 10 http://127.0.0.1:$port/hello" ;;
    h1) echo "h2load --h1 -n $n -c 10 http://127.0.0.1:$port/hello" ;;
    h2-tls) echo "h2load -n $n -c 10 -m 10 https://127.0.0.1:$tport/hello" ;;
    h1-tls) echo "h2load --h1 -n $n -c 10 https://127.0.0.1:$tport/hello" ;;
    hs) echo "h2load --h1 -n $hs -c $hs -m 1 https://127.0.0.1:$tport/hello" ;;
    s_time) echo "openssl s_time -connect 127.0.0.1:$tport -new -time 5" ;;
  esac
}

results=$work/results
: > "$results"
protos=(h2c h1 h2-tls h1-tls hs s_time)
for shape in $shapes; do
  workers=${shape%x*}; threads=${shape#*x}
  port=$((20000 + RANDOM % 20000)); tport=$((port + 1)); cport=$((port + 2))
  setsid "$bin" -app "$app" -workers "$workers" -threads "$threads" -listen "127.0.0.1:$port" \
    -listen-tls "127.0.0.1:$tport" -h2c -control "127.0.0.1:$cport" -runtime-dir "$work/rt-$shape" \
    -backlog 4096 -quiet -gem-dir "$repo/gem" > "$work/server-$shape.log" 2>&1 < /dev/null &
  pid=$!
  for _ in $(seq 200); do curl -fs -o /dev/null "http://127.0.0.1:$port/hello" && break; sleep 0.05; done
  sleep 0.5 # every worker connected
  for p in h2c h1 h2-tls h1-tls; do # warm-up
    h2load $( [[ $p == h1* ]] && echo --h1 ) -n 5000 -c 10 $( [[ $p == h2* ]] && echo -m 10 ) \
      "$( [[ $p == *tls ]] && echo "https://127.0.0.1:$tport" || echo "http://127.0.0.1:$port" )/hello" > /dev/null
  done
  for r in $(seq "$rounds"); do
    # rotate the order every round so no protocol always runs first or last
    for i in $(seq 0 $((${#protos[@]} - 1))); do
      p=${protos[$(((i + r - 1) % ${#protos[@]}))]}
      out=$work/out
      case $p in
        s_time)
          # s_time prints whole real seconds only: time the run here (it ends after -time 5)
          t0=$(date +%s.%N)
          openssl s_time -connect "127.0.0.1:$tport" -new -time 5 > "$out" 2>&1 || true
          t1=$(date +%s.%N)
          v=$(awk -v t0="$t0" -v t1="$t1" '/connections in .* real seconds/ {printf "%.0f", $1 / (t1 - t0)}' "$out" | tail -1)
          ;;
        hs)
          h0=$(handshakes)
          $(cmd_of hs) > "$out" 2>&1 || true
          h1=$(handshakes)
          ok_of "$out" "$hs" || { echo "hs: not every request succeeded:" >&2; grep -E "^requests|^status" "$out" >&2; }
          [[ $((h1 - h0)) -ge $hs ]] || echo "hs: only $((h1 - h0)) handshakes for $hs connections" >&2
          v=$(awk -v h="$hs" -v s="$(secs_of "$out")" 'BEGIN {printf "%.0f", h / s}')
          ;;
        *)
          $(cmd_of "$p") > "$out" 2>&1 || true
          ok_of "$out" "$n" || { echo "$p: errors:" >&2; grep -E "^requests|^status" "$out" >&2; }
          v=$(rps_of "$out")
          ;;
      esac
      echo "$shape $p $r ${v:-nan}" | tee -a "$results" >&2
    done
  done
  for p in "${protos[@]}"; do echo "cmd $shape $p $(cmd_of "$p")" >> "$results"; done
  kill -TERM "$pid"; wait "$pid" || true; pid=
  sleep 0.5
done

echo "date: $(date -u +%FT%TZ)  load average: $(cut -d' ' -f1-3 /proc/loadavg)  cores: $(nproc)  rounds: $rounds"
python3 - "$results" <<'EOF'
import statistics, sys
vals, cmds = {}, {}
for line in open(sys.argv[1]):
    f = line.split()
    if f[0] == "cmd":
        cmds[(f[1], f[2])] = " ".join(f[3:])
        continue
    shape, proto, _, v = f
    vals.setdefault((shape, proto), []).append(float(v))
shapes = sorted({s for s, _ in vals}, key=lambda s: [int(x) for x in s.split("x")])
label = {"h2c": "h2c req/s", "h1": "h1 req/s", "h2-tls": "h2+TLS req/s", "h1-tls": "h1+TLS req/s",
         "hs": "TLS handshakes/s (h2load, concurrent)", "s_time": "TLS handshakes/s (s_time, sequential)"}
base = {"h2-tls": "h2c", "h1-tls": "h1", "h2c": "h1"}
print("| measure | " + " | ".join(f"{s} median (rounds)" for s in shapes) + " |")
print("|---|" + "---:|" * len(shapes))
for p in ["h2c", "h1", "h2-tls", "h1-tls", "hs", "s_time"]:
    cells = []
    for s in shapes:
        v = vals.get((s, p), [])
        if not v:
            cells.append("—")
            continue
        m = statistics.median(v)
        cell = f"{m:,.0f} ({' / '.join(f'{x:,.0f}' for x in v)})"
        if p in base and vals.get((s, base[p])):
            cell += f", ×{m / statistics.median(vals[(s, base[p])]):.2f} vs {base[p]}"
        cells.append(cell)
    print(f"| {label[p]} | " + " | ".join(cells) + " |")
print()
for (s, p), c in sorted(cmds.items()):
    print(f"    {s} {p:7s} {c}")
EOF
