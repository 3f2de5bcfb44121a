#!/usr/bin/env bash
# Alternating rounds of ruby_perf_per_request.sh (CPU per /hello of the Ruby worker under wrk)
# over several configurations in one run, and the medians per configuration. A benchmark,
# not a test: the rounds alternate so that the machine's other load falls on all of them.
#
#   server/tools/ruby_cpu_rounds.sh BIN ROUNDS SECONDS CONNS CONFIG...
#   CONFIG = label:threads[:gem_dir:ext_lib[:pure]]
#     label     a name for the table
#     threads   the worker's threads (1 worker)
#     gem_dir   another copy of the gem (default: this checkout's)
#     ext_lib   the directory holding its built puma_plus/puma_plus_ext.so
#     pure      "pure": the pure-Ruby codec (PUMA_PLUS_PURE_RUBY=1)
#
# e.g. the GVL hand-off, 1 thread against 5, this checkout:
#   server/tools/ruby_cpu_rounds.sh build/server/puma-plus-server 3 10 10 t1:1 t5:5
set -euo pipefail
bin=$1; rounds=$2; secs=$3; conns=$4; shift 4
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp /tmp/pp-rrounds.XXXXXX)
trap 'rm -f "$out"' EXIT
for r in $(seq "$rounds"); do
  for cfg in "$@"; do
    IFS=: read -r label threads gem ext pure <<< "$cfg"
    vars=(PP_PERF_TOP=0 PP_GEM_DIR="${gem:-}" PP_EXT_LIB="${ext:-}")
    # Only when asked: the gem takes any value of PUMA_PLUS_PURE_RUBY, "" included, as yes.
    [[ ${pure:-} == pure ]] && vars+=(PUMA_PLUS_PURE_RUBY=1)
    line=$(env "${vars[@]}" "$here/ruby_perf_per_request.sh" "$bin" "$threads" "$secs" "$conns" | grep '^cpu ')
    echo "round $r $label ${line#cpu }" | tee -a "$out"
  done
done
python3 - "$out" << 'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    _, _, label, *kvs = line.split()
    for kv in kvs:
        k, v = kv.split("=")
        try:
            x = float(v)
        except ValueError:
            continue  # codec=native and the like
        rows.setdefault(label, {}).setdefault(k, []).append(x)
for label, cols in rows.items():
    print("median %-10s " % label + " ".join(f"{k}={statistics.median(v):g}" for k, v in cols.items()))
EOF
