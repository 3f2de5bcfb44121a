#!/usr/bin/env bash
# Issue 24's simulator validation, the measured side (a benchmark, not a test): pp-bench runs
# scenarios/validate-conc-{io,mixed,cpu}.yaml on the real server (1 worker x 5 threads,
# autoscale, the scenario's policy), ROUNDS times each, interleaved, into results.db here; then
# pp-sim runs the same scenarios into the same database, `pp-bench report -vs-sim` prints the
# per-phase comparison of the last round, and fixture.py writes the per-phase medians over the
# rounds to fixture.txt (copy it to sim/tests/fixtures/validate-conc.txt to re-pin the ctest).
# Prints the load average before and after, the hypervisor steal over the measurement, the
# worker's CPU per request outside the app (overhead.sh: machine.overhead) and the other work
# on the machine before and after each run (the probe below: machine.background).
#   notebooks/sim-vs-real-conc/measure.sh [ROUNDS]      (from a built checkout; ~65 s a run)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BUILD=${BUILD:-$ROOT/build}
ROUNDS=${1:-3}
export GEM_HOME=$BUILD/gems BUNDLE_GEMFILE=$ROOT/tests/apps/gemfiles/rubygems/Gemfile BUNDLE_FROZEN=true
export BUNDLE_APP_CONFIG=$BUILD/gems/.bundle-config BUNDLE_USER_HOME=$BUILD/gems/.bundle-home
export RACK_ENV=production
ulimit -n 8192
DB=$HERE/results.db
rm -f "$DB"
steal() { awk '/^cpu /{print $9}' /proc/stat; }
total() { awk '/^cpu /{s=0; for(i=2;i<=NF;i++) s+=$i; print s}' /proc/stat; }
echo "start $(date -u +%FT%TZ), commit $(git -C "$ROOT" rev-parse --short HEAD), load $(cut -d' ' -f1-3 /proc/loadavg)"
s0=$(steal); t0=$(total)
# The worker's CPU per request outside the app (machine.overhead), once: overhead.sh.
"$HERE/overhead.sh" >"$HERE/.overhead"
cat "$HERE/.overhead"
awk '$1 == "/mix/0/0" {print "overhead", $(NF-3)}' "$HERE/.overhead" >"$HERE/overhead.txt"
rm -f "$HERE/.overhead"
# The other work on the machine (other processes: the machine may be shared), as pp-sim's
# machine.background B, seen as a request sees it: 20 times, sleep 20 ms then burn 10 ms of
# CPU; the wall time of the burns over their CPU time is the slowdown f of a sporadic request.
# pp-sim runs one segment among B others on C cores at C / (1 + B), so B = C x f - 1 (f = 1,
# a free core, says only B <= C - 1 and reads C - 1). Measured before and after each run. Two
# always-busy probes read 2-4x more (the scheduler favours threads that wake from a sleep, as
# requests do, over CPU hogs); so did the kernel's count of runnable threads.
probe() {
  /usr/bin/python3 - <<'PY'
import os, time
walls, cpus = 0.0, 0.0
for _ in range(20):
    time.sleep(0.02)
    t0, c0 = time.monotonic(), time.process_time()
    while time.process_time() - c0 < 0.01:
        pass
    walls += time.monotonic() - t0
    cpus += time.process_time() - c0
print("%.2f" % max(0.0, os.cpu_count() * walls / cpus - 1))
PY
}
: >"$HERE/background.txt"
for r in $(seq "$ROUNDS"); do
  for wl in io mixed cpu; do
    b0=$(probe)
    # -warmup 1ms: the server starts cold, as pp-sim's configuration does (the default 3 s
    # warm-up at the first phase's rate would grow the slots before the scenario starts).
    # A fresh log directory per run: the server appends to an existing decision log, and
    # pp-bench would then store the earlier run's ticks twice.
    logs=$(mktemp -d)
    "$BUILD/bench/pp-bench" run "$ROOT/scenarios/validate-conc-$wl.yaml" -db "$DB" -warmup 1ms \
      -conns 1500 -app "$ROOT/scenarios/apps/mix/config.ru" -log-dir "$logs" |
      grep -A1 '^config ' | sed "s/^/round $r $wl: /"
    rm -rf "$logs"
    b1=$(probe)
    echo "validate-conc-$wl $r $b0 $b1" >>"$HERE/background.txt"
    echo "round $r $wl: background (other runnable threads) before $b0, after $b1, load $(cut -d' ' -f1-3 /proc/loadavg)"
  done
done
s1=$(steal); t1=$(total)
echo "end $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "steal: $(( (s1 - s0) * 100 / (t1 - t0 > 0 ? t1 - t0 : 1) ))% of all CPU time ($((s1 - s0)) of $((t1 - t0)) ticks)"
/usr/bin/python3 "$HERE/fixture.py" "$DB" "$ROOT/scenarios" >"$HERE/fixture.txt"
for wl in io mixed cpu; do
  # pp-sim with the fixture's machine.background and overhead (a copy of the scenario).
  bg=$(awk -v s="validate-conc-$wl" '$1 == "background" && $2 == s {print $3}' "$HERE/fixture.txt")
  ov=$(awk '$1 == "overhead" {print $2}' "$HERE/fixture.txt")
  sed "s/^machine:/machine:\n  background: ${bg:-0}\n  overhead: ${ov:-0}ms/" "$ROOT/scenarios/validate-conc-$wl.yaml" \
    >"$ROOT/scenarios/.validate-conc-$wl-bg.yaml"
  "$BUILD/sim/pp-sim" run "$ROOT/scenarios/.validate-conc-$wl-bg.yaml" --db "$DB" --quiet
  rm -f "$ROOT/scenarios/.validate-conc-$wl-bg.yaml"
  m=$(sqlite3 "$DB" "SELECT max(run_id) FROM runs WHERE kind='measured' AND scenario='validate-conc-$wl'")
  s=$(sqlite3 "$DB" "SELECT max(run_id) FROM runs WHERE kind='simulated' AND scenario='validate-conc-$wl'")
  "$BUILD/bench/pp-bench" report "$m" -db "$DB" -vs-sim "$s" | tail -n 5
done
cat "$HERE/fixture.txt"
