#!/usr/bin/env bash
# Side-by-side /hello benchmark: puma-plus-server vs Debian's puma on the same config.ru, the
# same Ruby processes and threads, the same closed-loop load generator (wrk), alternating
# rounds in one run. A benchmark, not a test. Now a thin wrapper around `pp-bench compare`
# (bench/README.md, "Compare"), which does the same and more (puma 8, falcon, several shapes,
# an open-loop rate, SQLite, a figure); the arguments are the ones this script always took:
#
#   server/tools/bench_vs_puma.sh BUILD/server/puma-plus-server [rounds=3] [seconds=5] [conns=10] [workers=1] [threads=5]
#
# It runs: pp-bench compare -servers pumaplus,puma -shapes WORKERSxTHREADS -rounds ROUNDS
#          -dur SECONDSs -conns CONNS -no-db, with PP_PUMA_PLUS_SERVER=the given binary and the
# pp-bench of the same build tree (BUILD/bench/pp-bench). Extra arguments after the six go to
# pp-bench compare as they are (e.g. -rate 0 to skip the open-loop run, -plot out.png).
set -euo pipefail
bin=$(realpath "$1"); rounds=${2:-3}; secs=${3:-5}; conns=${4:-10}; workers=${5:-1}; threads=${6:-5}
shift $(( $# < 6 ? $# : 6 ))
ppbench=$(dirname "$bin")/../bench/pp-bench
[[ -x $ppbench ]] || { echo "bench_vs_puma: $ppbench not found (build it: cmake --build BUILD)" >&2; exit 2; }
PP_PUMA_PLUS_SERVER=$bin exec "$ppbench" compare -servers pumaplus,puma -shapes "${workers}x${threads}" \
  -rounds "$rounds" -dur "${secs}s" -conns "$conns" -no-db "$@"
