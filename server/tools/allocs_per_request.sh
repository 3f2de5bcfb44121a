#!/usr/bin/env bash
# Allocations per request of the C front end, per protocol: runs puma-plus-server under the
# malloc_count.so preload (server/tools/malloc_count.c, built here with the system cc), warms
# up, and for each protocol snapshots the counters (SIGRTMIN+3), runs N requests with h2load,
# snapshots again, then runs 2N and snapshots once more. Prints per protocol:
#   total/req    (malloc+calloc+realloc) over the N run divided by N (includes the 10
#                connections' setup and teardown)
#   marginal/req (the 2N run minus the N run) / N: the steady-state cost of one more request
#   free/req     frees over the N run / N
# Only the server process is counted (the preload takes itself out of the environment
# before the shepherd is spawned). No /stats or other request is made between snapshots.
#
#   server/tools/allocs_per_request.sh build/server/puma-plus-server [N=20000] [workers=1] [threads=5]
#
# A measurement, not a test.
set -euo pipefail
bin=$(realpath "$1"); n=${2:-20000}; workers=${3:-1}; threads=${4:-5}
repo=$(cd "$(dirname "$0")/../.." && pwd)
app=$repo/scenarios/apps/mix/config.ru
work=$(mktemp -d /tmp/pp-allocs.XXXXXX)
so=$work/malloc_count.so
cc -O2 -shared -fPIC -o "$so" "$repo/server/tools/malloc_count.c" -ldl
port=$((20000 + RANDOM % 20000)); tport=$((port + 1)); cport=$((port + 2))
counts=$work/counts

# env after setsid: the preload drops LD_PRELOAD in the first process it loads into.
setsid env MALLOC_COUNT_FILE="$counts" LD_PRELOAD="$so" "$bin" -app "$app" -workers "$workers" \
  -threads "$threads" -listen "127.0.0.1:$port" -listen-tls "127.0.0.1:$tport" -h2c \
  -control "127.0.0.1:$cport" -runtime-dir "$work/rt" -quiet -gem-dir "$repo/gem" \
  > "$work/server.log" 2>&1 < /dev/null &
pid=$!
cleanup() { kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
for _ in $(seq 200); do curl -fs -o /dev/null "http://127.0.0.1:$port/hello" && break; sleep 0.05; done
curl -fs -o /dev/null "http://127.0.0.1:$port/hello" || { cat "$work/server.log"; exit 1; }

snapshot() { # prints "mallocs frees" after a fresh dump
  local seq0=0
  [[ -r $counts ]] && seq0=$(awk '$1=="seq" {print $2}' "$counts")
  kill -s RTMIN+3 "$pid"
  for _ in $(seq 200); do
    [[ -r $counts ]] && [[ $(awk '$1=="seq" {print $2}' "$counts") -gt $seq0 ]] && break
    sleep 0.01
  done
  awk '$1=="malloc"||$1=="calloc"||$1=="realloc" {a+=$2} $1=="free" {f=$2} END {print a, f}' "$counts"
}

# shellcheck source=hello_load.sh
. "$repo/server/tools/hello_load.sh"

for p in h1 h2c h1-tls h2-tls; do load "$p" 2000; done # warm-up: pools, buffers, OpenSSL
printf '%-7s %9s %12s %12s %9s   %s\n' protocol N total/req marginal/req free/req "command (N)"
for p in h1 h2c h1-tls h2-tls; do
  read -r a0 f0 < <(snapshot)
  load "$p" "$n"
  read -r a1 f1 < <(snapshot)
  load "$p" $((2 * n))
  read -r a2 _ < <(snapshot)
  case $p in
    h1) cmd="h2load --h1 -n $n -c 10 http://.../hello" ;;
    h2c) cmd="h2load -n $n -c 10 -m 10 http://.../hello" ;;
    h1-tls) cmd="h2load --h1 -n $n -c 10 https://.../hello" ;;
    h2-tls) cmd="h2load -n $n -c 10 -m 10 https://.../hello" ;;
  esac
  awk -v p="$p" -v n="$n" -v a0="$a0" -v a1="$a1" -v a2="$a2" -v f0="$f0" -v f1="$f1" -v c="$cmd" \
    'BEGIN {printf "%-7s %9d %12.2f %12.2f %9.2f   %s\n", p, n, (a1-a0)/n, ((a2-a1)-(a1-a0))/n, (f1-f0)/n, c}'
done
