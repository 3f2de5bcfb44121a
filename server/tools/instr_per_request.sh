#!/usr/bin/env bash
# Instructions per request of the C front end, per protocol, under callgrind (repeatable,
# unlike timings on a shared machine). Starts puma-plus-server under
# `valgrind --tool=callgrind` (the Ruby shepherd and workers it spawns are not traced: no
# --trace-children), warms every protocol up, then per protocol zeroes the counters
# (callgrind_control -z), runs N requests with h2load, dumps (callgrind_control -d), runs 2N,
# dumps again. Prints per protocol:
#   total/req     instructions (Ir) over the N run / N, including the 10 connections' setup
#   marginal/req  (the 2N run minus the N run) / N: the cost of one more request
# No other request reaches the server between a zero and its dump.
#
#   server/tools/instr_per_request.sh build/server/puma-plus-server [N=2000] [protocols...]
#   protocols: h1 h2c h1-tls h2-tls (default: all four)
#
# PP_INSTR_EXTRA="flags" adds server flags (e.g. "-access-log /tmp/a.log" to measure the
# access log's cost against a run without it).
#
# With PP_INSTR_CHECK=FILE it compares each protocol's marginal/req with the baseline in FILE
# (lines "protocol instructions") and exits 1 when one grew more than 20% (the ctest
# instr_per_request does this with server/tools/instr_baseline.txt).
set -euo pipefail
bin=$(realpath "$1"); n=${2:-2000}; shift 2 || shift $#
protocols=("$@"); [[ ${#protocols[@]} -gt 0 ]] || protocols=(h1 h2c h1-tls h2-tls)
repo=$(cd "$(dirname "$0")/../.." && pwd)
. "$repo/server/tools/instr_check.sh"
app=$repo/scenarios/apps/mix/config.ru
for tool in valgrind callgrind_control h2load curl; do
  command -v "$tool" >/dev/null || { echo "instr_per_request: $tool missing (scripts/install-deps.sh installs it)" >&2; exit 1; }
done
work=$(mktemp -d /tmp/pp-instr.XXXXXX)
port=$((20000 + RANDOM % 20000)); tport=$((port + 1)); cport=$((port + 2))

setsid valgrind --tool=callgrind --callgrind-out-file="$work/cg.out" --dump-instr=no --compress-strings=no \
  "$bin" -app "$app" -workers 1 -threads 5 -listen "127.0.0.1:$port" \
  -listen-tls "127.0.0.1:$tport" -h2c -control "127.0.0.1:$cport" -runtime-dir "$work/rt" \
  -quiet -gem-dir "$repo/gem" ${PP_INSTR_EXTRA:-} > "$work/server.log" 2>&1 < /dev/null &
pid=$!
cleanup() { kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
[[ -n ${PP_INSTR_KEEP:-} ]] && trap "kill -TERM $pid; echo kept $work" EXIT
up=0
for _ in $(seq 600); do
  if curl -fs -o /dev/null "http://127.0.0.1:$port/hello"; then up=1; break; fi
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
[[ $up == 1 ]] || { echo "instr_per_request: the server did not answer"; cat "$work/server.log"; exit 1; } >&2

# shellcheck source=hello_load.sh
. "$repo/server/tools/hello_load.sh"

instructions() { # $1 = dump number; dumps and prints the Ir since the last zero
  callgrind_control -d "$pid" > /dev/null 2>&1
  local f="$work/cg.out.$1"
  for _ in $(seq 300); do [[ -s $f ]] && grep -q '^totals:' "$f" && break; sleep 0.05; done
  awk '$1=="summary:" {print $2}' "$f"
}

for p in "${protocols[@]}"; do load "$p" 500; done # warm-up: pools, buffers, OpenSSL
callgrind_control -z "$pid" > /dev/null 2>&1
status=0 dumps=0
printf '%-7s %7s %12s %13s   %s\n' protocol N total/req marginal/req "command (N)"
for p in "${protocols[@]}"; do
  callgrind_control -z "$pid" > /dev/null 2>&1
  load "$p" "$n"
  dumps=$((dumps + 1)); i1=$(instructions $dumps)
  callgrind_control -z "$pid" > /dev/null 2>&1
  load "$p" $((2 * n))
  dumps=$((dumps + 1)); i2=$(instructions $dumps)
  marginal=$(( (i2 - i1) / n ))
  printf '%-7s %7d %12d %13d   h2load%s -n %d -c 10%s .../hello\n' "$p" "$n" $((i1 / n)) "$marginal" \
    "$([[ $p == h1* ]] && echo ' --h1')" "$n" "$([[ $p == h2* ]] && echo ' -m 10')"
  if [[ -n ${PP_INSTR_CHECK:-} ]]; then
    instr_check instr_per_request "$p" "$marginal" "$PP_INSTR_CHECK" || status=1
  fi
done
exit $status
