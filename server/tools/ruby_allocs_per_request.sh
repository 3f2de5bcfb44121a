#!/usr/bin/env bash
# Ruby objects allocated per /hello request in the serving process (a measurement; GC.stat
# counts are exact): one worker process with one thread, under puma-plus and under puma
# (Debian's 5.6.5, or PUMA=path for another), on tests/apps/allocs/config.ru. Reads
# GC.stat(:total_allocated_objects) through GET /__allocs, runs N keep-alive /hello requests
# with h2load (one connection), reads it again; prints (after - before - one /__allocs) / N.
#
#   server/tools/ruby_allocs_per_request.sh build/server/puma-plus-server [N=5000]
set -euo pipefail
bin=$(realpath "$1"); n=${2:-5000}
repo=$(cd "$(dirname "$0")/../.." && pwd)
app=$repo/tests/apps/allocs/config.ru
work=$(mktemp -d /tmp/pp-rallocs.XXXXXX)
trap 'kill -TERM ${pid:-} 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
measure() { # $1 = label, $2 = port
  local url="http://127.0.0.1:$2"
  for _ in $(seq 300); do curl -fs -o /dev/null "$url/hello" && break; sleep 0.05; done
  h2load --h1 -n 500 -c 1 "$url/hello" > /dev/null # warm-up
  local a b c
  a=$(curl -fs "$url/__allocs"); b=$(curl -fs "$url/__allocs")
  h2load --h1 -n "$n" -c 1 "$url/hello" | grep -q "$n succeeded" || { echo "$1: h2load failed" >&2; exit 1; }
  c=$(curl -fs "$url/__allocs")
  awk -v l="$1" -v a="$a" -v b="$b" -v c="$c" -v n="$n" \
    'BEGIN {printf "%-12s %8.2f objects per /hello (one /__allocs costs %d)\n", l, (c - b - (b - a)) / n, b - a}'
}
port=$((20000 + RANDOM % 20000))
RUBYLIB=$(dirname "$bin")/../gem/ext-lib "$bin" -app "$app" -workers 1 -threads 1 -listen "127.0.0.1:$port" -control off -quiet \
  -runtime-dir "$work/rt" -gem-dir "$repo/gem" > "$work/pp.log" 2>&1 &
pid=$!
measure puma-plus "$port"
kill -TERM "$pid"; wait "$pid" || true
port=$((port + 1))
${PUMA:-puma} -w 1 -t 1:1 -b "tcp://127.0.0.1:$port" "$app" > "$work/puma.log" 2>&1 &
pid=$!
measure "puma $(${PUMA:-puma} --version 2>/dev/null | awk '{print $3}')" "$port"
