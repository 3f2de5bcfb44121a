#!/bin/sh
# fuzz/run.sh [SECONDS] [TARGET...]: build the clang libFuzzer binaries and fuzz each target
# for SECONDS (default 60), one after the other (one core each: the machine is shared).
#
# New interesting inputs are kept in fuzz/work/corpus/<target>/ (git-ignored) and reused by
# the next run; crashes, leaks, timeouts and failed properties are written to
# fuzz/work/artifacts/<target>/ and listed at the end. Exits 1 if any target found something.
#
# Environment:
#   PP_FUZZ_BUILD       build directory (default build-fuzz at the top of the repository)
#   PP_FUZZ_WORK        work directory (default fuzz/work)
#   PP_FUZZ_ARGS        extra libFuzzer flags, e.g. "-max_len=8192"
#   PP_FUZZ_SKIP_KNOWN  1 = skip inputs shaped like pending findings (fuzz/known.h)
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
SECONDS_EACH=${1:-60}
[ $# -gt 0 ] && shift
TARGETS=${*:-"http1 wire policy declog scenario tls h2 h3"}
BUILD=${PP_FUZZ_BUILD:-$ROOT/build-fuzz}
WORK=${PP_FUZZ_WORK:-$ROOT/fuzz/work}

case $SECONDS_EACH in
  '' | *[!0-9]*) echo "usage: fuzz/run.sh [SECONDS] [TARGET...]" >&2; exit 2 ;;
esac

if ! command -v clang >/dev/null 2>&1; then
  echo "fuzz/run.sh: clang is needed (apt-get install clang libclang-rt-14-dev)" >&2
  exit 2
fi
mkdir -p "$WORK"
echo "fuzz/run.sh: building libFuzzer binaries in $BUILD"
if ! { CC=clang cmake -S "$ROOT" -B "$BUILD" -DPP_FUZZ=ON &&
  cmake --build "$BUILD" --target fuzzers -j2; } >"$WORK/build.log" 2>&1; then
  cat "$WORK/build.log" >&2
  exit 2
fi
found=0
summary=""
for t in $TARGETS; do
  bin=$BUILD/fuzz/fuzz-$t
  if [ ! -x "$bin" ]; then
    echo "fuzz/run.sh: no $bin (is its library built?)" >&2
    found=1
    continue
  fi
  corpus=$WORK/corpus/$t
  artifacts=$WORK/artifacts/$t
  log=$WORK/$t.log
  mkdir -p "$corpus" "$artifacts"
  seeds=$ROOT/fuzz/corpus/$t
  [ "$t" = wire ] && seeds="$seeds $ROOT/docs/protocol-corpus"
  before=$(find "$corpus" -type f | wc -l)
  echo "fuzz/run.sh: fuzzing $t for ${SECONDS_EACH}s (log $log)"
  # The first directory receives new inputs; the seed directories are only read.
  # shellcheck disable=SC2086
  if "$bin" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" ${PP_FUZZ_ARGS:-} \
    "$corpus" $seeds >"$log" 2>&1; then
    status=ok
  else
    status="FOUND: $(grep -m1 -E '^(SUMMARY|==[0-9]+== ERROR)' "$log" || echo "exit non-zero")"
    found=1
  fi
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  after=$(find "$corpus" -type f | wc -l)
  crash=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
  line="$t: ${execs:-?} execs (${rate:-?}/s), corpus $before -> $after, $status"
  [ -n "$crash" ] && line="$line
    reproducer: $crash"
  summary="$summary
$line"
done
echo "fuzz/run.sh: summary ($SECONDS_EACH s per target)$summary"
exit $found
