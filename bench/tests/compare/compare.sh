#!/usr/bin/env bash
# End to end: `pp-bench compare` against real servers, small and polite (the closed loop is one
# wrk connection on /mix/0/5, at most ~200 requests/s; the open loop 100 rps), then what it
# stored, printed and plotted is checked from outside (sqlite3, the PNG signature).
#
#   compare.sh debian PP_BENCH WORKDIR    pumaplus and Debian's puma, shape 1x2, 2 rounds:
#       every round x server row in compare_results with closed- and open-loop numbers, CPU
#       per request (and puma-plus's front-end share, NULL for puma), rotation of the first
#       server between rounds, medians equal to the mean of the two rounds (n = 2), versions,
#       the exit status agreeing with the rows' error marks, a PNG; and flag errors (a bad
#       flag, an unknown server, a bad shape, a fractional -dur) exit 2 naming the bad value.
#   compare.sh rubygems PP_BENCH WORKDIR  puma8 and falcon from the RubyGems column, shape 2x2,
#       1 round: versions 8.0.x and 0.51.x, falcon's threads NULL (they do not apply); and a
#       GEM_HOME without the column fails naming scripts/install-gems.sh. When the column is
#       not installed the real run fails the same way: this test fails, it never skips.
#   compare.sh ab PP_BENCH WORKDIR SOURCE_DIR BUILD_DIR   A/B of two puma-plus builds:
#       `pumaplus,pumaplus@WORKDIR/base`, where base is another checkout made of symlinks to this
#       one's gem/ and build/ (so its server's own gem is its gem/, as in a real checkout), shape
#       1x1, 1 round on tests/apps/codec: both columns ran, both answered "native" (the C codec;
#       a run under PUMA_PLUS_PURE_RUBY=1 answers "ruby", so the check can tell), the base
#       column ran base's CLI and server (the recorded command), the labels in the tables and
#       the DB, and the ratio table against pumaplus agrees with the rows; and before anything
#       starts, exit 2 naming the problem: a missing DIR, a missing server (with the cmake
#       command that builds it), a build/ configured from another checkout (whose server would
#       run the pure-Ruby codec), a label clash.
#   compare.sh steal PP_BENCH WORKDIR    -max-steal: its flag errors (exit 2 naming them), then
#       Debian's puma at 1x1 for one round with the steal readings given by the test hook
#       PP_BENCH_STEAL_SEQ: off by default (40% recorded, measured once, unmarked); an open loop
#       above the limit measured again and the attempt under it kept (attempts 2 in the DB, 2/2
#       in the table, the retry in the progress, the dropped attempt noted, the summary); and,
#       in a database whose -max-steal columns were dropped (an older one: they come back, the
#       old rows NULL), no attempt under the limit: the lowest kept (not the last), STEAL.
set -euo pipefail

USAGE="usage: compare.sh debian|rubygems|steal PP_BENCH WORKDIR | compare.sh ab PP_BENCH WORKDIR SOURCE_DIR BUILD_DIR"
MODE=${1:?$USAGE}
PPBENCH=${2:?$USAGE}
WORK=${3:?$USAGE}

for tool in sqlite3 wrk gnuplot ruby od; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "FAIL: required tool '$tool' is missing (scripts/install-deps.sh installs it)" >&2
    exit 1
  fi
done

rm -rf "$WORK"
mkdir -p "$WORK/logs"
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
q() { sqlite3 "$WORK/c.db" "$1"; }

# expect_usage_error WORD ARGS...: exit 2, and stderr names WORD.
expect_usage_error() {
  local word=$1
  shift
  local rc=0
  "$PPBENCH" compare -no-db "$@" > "$WORK/usage.out" 2> "$WORK/usage.err" || rc=$?
  [[ $rc -eq 2 ]] || fail "pp-bench compare $* exited $rc, expected 2"
  grep -qF -- "$word" "$WORK/usage.err" || fail "pp-bench compare $*: stderr does not name '$word': $(cat "$WORK/usage.err")"
}

run_compare() { # ARGS...: sets rc, leaves stdout/stderr in $WORK/out, $WORK/err
  rc=0
  "$PPBENCH" compare -rounds "$ROUNDS" -dur 1s -warmup 1s -path /mix/0/5 -conns 1 -rate 100 \
    -db "$WORK/c.db" -log-dir "$WORK/logs" "$@" > "$WORK/out" 2> "$WORK/err" || rc=$?
  cat "$WORK/out"
  if [[ $rc -eq 2 ]]; then
    cat "$WORK/err" >&2
    fail "pp-bench compare $* could not run (exit 2)"
  fi
  [[ $rc -eq 0 || $rc -eq 1 ]] || fail "pp-bench compare $* exited $rc"
}

# The exit status says whether any row failed or carries errors, and the rows say which.
check_status_matches_rows() {
  local marked
  marked=$(q "SELECT count(*) FROM compare_results WHERE ran = 0 OR has_errors = 1")
  if [[ $rc -eq 0 && $marked -ne 0 ]]; then fail "exit 0 but $marked rows failed or had errors"; fi
  if [[ $rc -eq 1 && $marked -eq 0 ]]; then fail "exit 1 but no row failed or had errors"; fi
  if [[ $marked -ne 0 ]]; then
    grep -qE "ERRORS|FAILED" "$WORK/out" || fail "rows with errors are not marked in the table"
  fi
  [[ $(q "SELECT cells_failed + cells_with_errors FROM compare_runs") -eq $marked ]] ||
    fail "compare_runs' failure counts disagree with the rows"
}

case "$MODE" in
debian)
  expect_usage_error "-bogus" -bogus 1
  expect_usage_error "unicorn" -servers pumaplus,unicorn
  expect_usage_error "0x5" -shapes 1x1,0x5
  expect_usage_error "1500ms" -dur 1500ms
  expect_usage_error "needs a value" -rounds

  ROUNDS=2
  run_compare -servers pumaplus,puma -shapes 1x2 -rate-dur 2s -plot "$WORK/c.png"
  [[ $(q "SELECT count(*) FROM compare_runs") -eq 1 ]] || fail "expected one compare_runs row"
  [[ $(q "SELECT count(*) FROM compare_results WHERE ran = 1") -eq 4 ]] ||
    fail "expected 4 rows that ran: $(q "SELECT round, server, error FROM compare_results")"
  [[ $(q "SELECT count(*) FROM compare_results WHERE requests > 0 AND rps > 0 AND p50_ms > 0
          AND p99_ms >= p50_ms AND cpu_us_per_req > 0 AND procs >= 2 AND threads = 2") -eq 4 ]] ||
    fail "closed-loop numbers missing: $(q "SELECT * FROM compare_results")"
  [[ $(q "SELECT count(*) FROM compare_results WHERE server = 'pumaplus'
          AND frontend_us_per_req > 0 AND frontend_us_per_req < cpu_us_per_req
          AND abs(frontend_us_per_req + ruby_us_per_req - cpu_us_per_req) < 1e-6") -eq 2 ]] ||
    fail "puma-plus's front-end / Ruby split missing or inconsistent"
  [[ $(q "SELECT count(*) FROM compare_results WHERE server = 'puma'
          AND frontend_us_per_req IS NULL AND ruby_us_per_req IS NULL") -eq 2 ]] ||
    fail "puma has no front end of its own: its split must be NULL"
  [[ $(q "SELECT count(*) FROM compare_results WHERE open_offered > 100 AND open_rate = 100
          AND open_ok + open_shed + open_http_errors + open_conn_errors + open_timeouts
              = open_offered AND open_p50_ms > 0 AND open_p999_ms >= open_p99_ms") -eq 4 ]] ||
    fail "open-loop numbers missing or not adding up"
  # The hypervisor's steal over each loop: a percentage of the window, known for every row.
  [[ $(q "SELECT count(*) FROM compare_results WHERE steal_pct BETWEEN 0 AND 100
          AND open_steal_pct BETWEEN 0 AND 100") -eq 4 ]] ||
    fail "steal_pct / open_steal_pct missing: $(q "SELECT server, steal_pct, open_steal_pct FROM compare_results")"
  [[ $(grep -c 'steal%.*steal%' "$WORK/out") -eq 2 ]] || fail "the round tables lack the steal% columns"
  # Interleaved and rotated: the server that ran first in round 1 runs second in round 2.
  first1=$(q "SELECT server FROM compare_results WHERE round = 1 ORDER BY run_order LIMIT 1")
  first2=$(q "SELECT server FROM compare_results WHERE round = 2 ORDER BY run_order LIMIT 1")
  [[ -n $first1 && $first1 != "$first2" ]] || fail "round 2 did not rotate the first server ($first1, $first2)"
  # Medians of two rounds: the mean of both, min and max the two values.
  for s in pumaplus puma; do
    ok=$(q "SELECT abs(m.rps_med - (SELECT avg(rps) FROM compare_results WHERE server = '$s'))
              < 1e-6 AND m.rps_min = (SELECT min(rps) FROM compare_results WHERE server = '$s')
              AND m.rps_max = (SELECT max(rps) FROM compare_results WHERE server = '$s')
              AND abs(m.cpu_us_per_req_med - (SELECT avg(cpu_us_per_req) FROM compare_results
                  WHERE server = '$s')) < 1e-6 AND m.rounds_ran = 2
            FROM compare_medians m WHERE m.server = '$s' AND m.shape = '1x2'")
    [[ $ok == 1 ]] || fail "$s: compare_medians does not hold the median of the rounds"
    med=$(q "SELECT printf('%.0f', rps_med) FROM compare_medians WHERE server = '$s'")
    grep -qE "^1x2 +$s +2/2 +[0-9]+ +$med " "$WORK/out" || fail "$s: printed median is not $med"
  done
  grep -qF "ratios against puma" "$WORK/out" || fail "no ratios against puma"
  q "SELECT version FROM compare_servers WHERE server = 'puma'" | grep -qF "5.6.5" ||
    fail "Debian's puma version not recorded as 5.6.5"
  q "SELECT version FROM compare_servers WHERE server = 'pumaplus'" | grep -qE "^puma-plus [0-9]" ||
    fail "puma-plus version not recorded"
  [[ $(od -An -tx1 -N8 "$WORK/c.png" | tr -d ' \n') == 89504e470d0a1a0a ]] || fail "-plot did not write a PNG"
  check_status_matches_rows
  ;;
rubygems)
  # Without the column: a clear failure naming the script that installs it.
  expect_usage_error "scripts/install-gems.sh" -servers puma8 -gem-home "$WORK/no-gems"
  expect_usage_error "scripts/install-gems.sh" -servers falcon -gem-home "$WORK/no-gems"

  ROUNDS=1
  run_compare -servers puma8,falcon -shapes 2x2 -rate-dur 1s
  [[ $(q "SELECT count(*) FROM compare_results WHERE ran = 1 AND rps > 0
          AND cpu_us_per_req > 0 AND procs >= 3") -eq 2 ]] ||
    fail "expected 2 rows that ran: $(q "SELECT server, error FROM compare_results")"
  q "SELECT version FROM compare_servers WHERE server = 'puma8'" | grep -qE "8\.0\.[0-9]" ||
    fail "puma8's version is not 8.0.x: $(q "SELECT version FROM compare_servers")"
  q "SELECT version FROM compare_servers WHERE server = 'falcon'" | grep -qE "0\.51\.[0-9]" ||
    fail "falcon's version is not 0.51.x: $(q "SELECT version FROM compare_servers")"
  [[ $(q "SELECT count(*) FROM compare_results WHERE server = 'falcon' AND threads IS NULL
          AND workers = 2") -eq 1 ]] || fail "falcon's threads must be NULL (they do not apply)"
  [[ $(q "SELECT threads_apply FROM compare_servers WHERE server = 'falcon'") -eq 0 ]] ||
    fail "falcon: threads_apply must be 0"
  q "SELECT command FROM compare_servers WHERE server = 'falcon'" | grep -qF -- "--count 2" ||
    fail "falcon did not run with --count 2"
  grep -qF "ratios against puma8" "$WORK/out" || fail "no ratios against puma8"
  check_status_matches_rows
  ;;
ab)
  SRC=${4:?$USAGE}
  BUILD=${5:?$USAGE}
  CODEC_APP="$SRC/tests/apps/codec/config.ru"
  [[ -r $CODEC_APP ]] || fail "$CODEC_APP is missing"
  [[ -x $BUILD/server/puma-plus-server && -r $BUILD/gem/ext-lib/puma_plus/puma_plus_ext.so ]] ||
    fail "this build has no puma-plus-server or C codec: cmake --build $BUILD --target puma-plus-server puma_plus_ext"
  BASE="$WORK/base" # another checkout: its gem/ and build/ are this one's
  mkdir -p "$BASE"
  ln -s "$SRC/gem" "$BASE/gem"
  ln -s "$BUILD" "$BASE/build"

  # Before anything starts: exit 2 naming what is wrong and how to build it.
  expect_usage_error "$WORK/nowhere is not a directory" -servers "pumaplus,pumaplus@$WORK/nowhere"
  mkdir -p "$WORK/unbuilt/build"
  ln -s "$SRC/gem" "$WORK/unbuilt/gem"
  expect_usage_error "$WORK/unbuilt/build/server/puma-plus-server is missing" -servers "pumaplus@$WORK/unbuilt"
  grep -qF -- "cmake --build $WORK/unbuilt/build --target puma-plus-server puma_plus_ext" "$WORK/usage.err" ||
    fail "the missing server's error does not say how to build it: $(cat "$WORK/usage.err")"
  mkdir -p "$WORK/foreign" # its own gem/, but build/ was configured from this checkout
  mkdir -p "$WORK/foreign/gem"
  cp -r "$SRC/gem/exe" "$SRC/gem/lib" "$WORK/foreign/gem/"
  ln -s "$BUILD" "$WORK/foreign/build"
  expect_usage_error "pure-Ruby codec" -servers "pumaplus,pumaplus@$WORK/foreign"
  expect_usage_error "pumaplus@base is taken" -servers "pumaplus@$BASE,pumaplus@$WORK/foreign/../base"
  expect_usage_error "'pumaplus' is repeated" -servers pumaplus,pumaplus

  ROUNDS=1
  run_compare -servers "pumaplus,pumaplus@$BASE" -shapes 1x1 -warmup 0 -rate 50 -rate-dur 1s \
    -app "$CODEC_APP" -path / -plot "$WORK/ab.png"
  [[ $(od -An -tx1 -N8 "$WORK/ab.png" | tr -d ' \n') == 89504e470d0a1a0a ]] || fail "-plot did not write a PNG"
  # The figure's key names both columns as text ('@' is markup in gnuplot's enhanced mode).
  grep -q "noenhanced" "$WORK/ab.png.gp" && grep -qF "title 'pumaplus@base'" "$WORK/ab.png.gp" ||
    fail "the figure does not label pumaplus@base as text: $(grep title "$WORK/ab.png.gp")"
  [[ $(q "SELECT servers FROM compare_runs") == "pumaplus,pumaplus@base" ]] ||
    fail "compare_runs.servers: $(q "SELECT servers FROM compare_runs")"
  [[ $(q "SELECT count(*) FROM compare_results WHERE ran = 1 AND rps > 0 AND cpu_us_per_req > 0
          AND frontend_us_per_req > 0 AND procs >= 3") -eq 2 ]] ||
    fail "expected 2 rows that ran: $(q "SELECT server, ran, error FROM compare_results")"
  for s in pumaplus pumaplus@base; do
    answer=$(q "SELECT answer FROM compare_results WHERE server = '$s'")
    [[ $answer == native ]] || fail "$s's workers answered '$answer', not native: not the C codec"
    [[ $(q "SELECT count(*) FROM compare_medians WHERE server = '$s' AND rounds_ran = 1") -eq 1 ]] ||
      fail "$s: no median row"
    grep -qE "^ +1 1x1 +$s +[0-9]+ " "$WORK/out" || fail "$s: no row in the round's table"
  done
  [[ $(q "SELECT dir || '|' || kind FROM compare_servers WHERE server = 'pumaplus@base'") == "$BASE|pumaplus" ]] ||
    fail "compare_servers: pumaplus@base's dir and kind: $(q "SELECT * FROM compare_servers")"
  [[ $(q "SELECT dir IS NULL FROM compare_servers WHERE server = 'pumaplus'") == 1 ]] ||
    fail "pumaplus (this build) must have no dir"
  cmd=$(q "SELECT command FROM compare_servers WHERE server = 'pumaplus@base'")
  [[ $cmd == "$BASE/gem/exe/puma-plus "* && $cmd == *"--server $BASE/build/server/puma-plus-server "* ]] ||
    fail "pumaplus@base did not run base's CLI and server: $cmd"
  [[ $(q "SELECT command FROM compare_servers WHERE server = 'pumaplus'") != *"$BASE"* ]] ||
    fail "pumaplus ran base's files"
  grep -qF "ratios against pumaplus" "$WORK/out" || fail "no ratios against pumaplus"
  # The ratio row agrees with the rows: req/s and CPU per request of base over this build's.
  row=$(grep -E "^1x1 +pumaplus@base +[0-9.e+-]+ +[0-9.e+-]+ +[0-9.e+-]+ +[0-9.e+-]+ +[0-9.e+-]+$" "$WORK/out" | tail -1)
  [[ -n $row ]] || fail "no full ratio row for pumaplus@base: $(grep -A3 "ratios against pumaplus" "$WORK/out")"
  want_rps=$(q "SELECT b.rps / a.rps FROM compare_results a, compare_results b
                WHERE a.server = 'pumaplus' AND b.server = 'pumaplus@base'")
  want_cpu=$(q "SELECT b.cpu_us_per_req / a.cpu_us_per_req FROM compare_results a, compare_results b
                WHERE a.server = 'pumaplus' AND b.server = 'pumaplus@base'")
  awk -v row="$row" -v rps="$want_rps" -v cpu="$want_cpu" 'BEGIN {
    split(row, f, / +/)
    if (f[3] / rps < 0.99 || f[3] / rps > 1.01 || f[4] / cpu < 0.99 || f[4] / cpu > 1.01) exit 1
  }' || fail "ratio row '$row' is not req/s $want_rps, cpu $want_cpu"
  check_status_matches_rows

  # The codec check can fail: forced onto the pure-Ruby codec, the workers say so.
  rm -f "$WORK/c.db"
  rc=0
  PUMA_PLUS_PURE_RUBY=1 "$PPBENCH" compare -servers "pumaplus@$BASE=pure" -shapes 1x1 -rounds 1 \
    -dur 1s -warmup 0 -conns 1 -rate 0 -app "$CODEC_APP" -path / -db "$WORK/c.db" \
    -log-dir "$WORK/logs" > "$WORK/out" 2> "$WORK/err" || rc=$?
  [[ $rc -eq 0 ]] || fail "the PUMA_PLUS_PURE_RUBY=1 run exited $rc: $(cat "$WORK/err")"
  [[ $(q "SELECT answer FROM compare_results WHERE server = 'pumaplus@pure'") == ruby ]] ||
    fail "PUMA_PLUS_PURE_RUBY=1 did not answer ruby: $(q "SELECT server, answer FROM compare_results")"
  ;;
steal)
  # -max-steal's flags: a bad PCT or N, and -steal-retries alone, exit 2 naming them.
  expect_usage_error "-max-steal" -max-steal 0
  expect_usage_error "0 < PCT <= 100" -max-steal 100.5
  expect_usage_error "-max-steal" -max-steal ten
  expect_usage_error "-steal-retries" -max-steal 10 -steal-retries 21
  expect_usage_error "-steal-retries" -max-steal 10 -steal-retries 1.5
  expect_usage_error "-steal-retries needs -max-steal" -steal-retries 2
  PP_BENCH_STEAL_SEQ=40,x expect_usage_error "PP_BENCH_STEAL_SEQ" -max-steal 10
  PP_BENCH_STEAL_SEQ=140 expect_usage_error "PP_BENCH_STEAL_SEQ" -max-steal 10

  # Steal cannot be forced, so the test hook gives the readings: each attempt's closed loop,
  # then its open loop. Debian's puma, 1x1, one round of 1 s + 1 s at 50 rps per attempt.
  ROUNDS=1
  STEAL_ARGS=(-servers puma -shapes 1x1 -warmup 0 -rate 50 -rate-dur 1s)
  row() { grep -E "^ +1 1x1 +puma +[0-9]+ " "$WORK/out" || fail "no row for puma: $(cat "$WORK/out")"; }

  # 1. Off by default: 40% steal is recorded, the cell is measured once, nothing is marked.
  PP_BENCH_STEAL_SEQ=40,40 run_compare "${STEAL_ARGS[@]}"
  [[ $(q "SELECT steal_pct || '|' || open_steal_pct || '|' || attempts || '|' || kept_attempt
          || '|' || ifnull(steal_over, 'NULL') FROM compare_results") == "40.0|40.0|1|1|NULL" ]] ||
    fail "without -max-steal: $(q "SELECT steal_pct, open_steal_pct, attempts, steal_over FROM compare_results")"
  [[ $(q "SELECT ifnull(max_steal_pct, 'NULL') || '|' || ifnull(cells_over_steal, 'NULL')
          FROM compare_runs") == "NULL|NULL" ]] || fail "without -max-steal compare_runs has its columns set"
  row | grep -qE " 1/1 +-" || fail "without -max-steal the row is not 'attempt 1/1', unmarked: $(row)"
  ! grep -qF "attempt 2" "$WORK/err" || fail "without -max-steal a cell was measured again"
  rm -f "$WORK/c.db"

  # 2. The open loop's 40% triggers the retry (the closed loop's 5% is under the limit), the
  #    second attempt (3%, 2%) is kept.
  PP_BENCH_STEAL_SEQ=5,40,3,2 run_compare "${STEAL_ARGS[@]}" -max-steal 10
  grep -qF "1x1 puma round 1: steal 40.0% > 10%, attempt 2 of 4" "$WORK/err" ||
    fail "no retry in the progress: $(cat "$WORK/err")"
  ! grep -qF "attempt 3" "$WORK/err" || fail "measured again after an attempt under the limit"
  [[ $(q "SELECT steal_pct || '|' || open_steal_pct || '|' || attempts || '|' || kept_attempt
          || '|' || steal_over FROM compare_results WHERE compare_id = 1") == "3.0|2.0|2|2|0" ]] ||
    fail "kept the wrong attempt: $(q "SELECT * FROM compare_results WHERE compare_id = 1")"
  row | grep -qE " 2/2 +-" || fail "the row does not show attempt 2/2, unmarked: $(row)"
  grep -qF "attempt 1 dropped (steal 40.0%)" "$WORK/out" || fail "the dropped attempt is not noted"
  grep -qF "1 of 1 cells measured again (1 extra attempts); 0 stayed above 10%" "$WORK/out" ||
    fail "the summary does not count the retry: $(grep -F "steal:" "$WORK/out")"
  grep -qF "PP_BENCH_STEAL_SEQ (a test hook)" "$WORK/out" || fail "the summary hides the test hook"
  check_status_matches_rows

  # 3. An older database (without -max-steal's columns) gets them; its rows stay, NULL there.
  for col in attempts kept_attempt steal_over; do q "ALTER TABLE compare_results DROP COLUMN $col"; done
  for col in max_steal_pct steal_retries cells_over_steal; do q "ALTER TABLE compare_runs DROP COLUMN $col"; done

  # 4. No attempt gets under the limit: the lowest max(closed, open) is kept (the first, 20%,
  #    not the last, 40%), marked STEAL, still in the medians; the exit status ignores STEAL.
  PP_BENCH_STEAL_SEQ=20,1,1,40 run_compare "${STEAL_ARGS[@]}" -max-steal 10 -steal-retries 1
  grep -qF "steal 20.0% > 10%, attempt 2 of 2" "$WORK/err" || fail "no retry: $(cat "$WORK/err")"
  [[ $(q "SELECT steal_pct || '|' || open_steal_pct || '|' || attempts || '|' || kept_attempt
          || '|' || steal_over FROM compare_results WHERE compare_id = 2") == "20.0|1.0|2|1|1" ]] ||
    fail "kept the wrong attempt: $(q "SELECT * FROM compare_results WHERE compare_id = 2")"
  [[ $(q "SELECT count(*) FROM compare_results WHERE compare_id < 2 AND attempts IS NULL") -eq 1 ]] ||
    fail "the older rows did not survive the upgrade with NULL attempts"
  [[ $(q "SELECT max_steal_pct || '|' || steal_retries || '|' || cells_over_steal FROM compare_runs
          WHERE compare_id = 2") == "10.0|1|1" ]] || fail "compare_runs: $(q "SELECT * FROM compare_runs")"
  row | grep -qE " 1/2 +STEAL" || fail "the row is not 'attempt 1/2' marked STEAL: $(row)"
  grep -qF "1 stayed above 10% (marked STEAL" "$WORK/out" || fail "the summary does not count the cell above the limit"
  [[ $(q "SELECT rounds_ran || '|' || printf('%.3f', rps_med) FROM compare_medians WHERE compare_id = 2") == \
     "1|$(q "SELECT printf('%.3f', rps) FROM compare_results WHERE compare_id = 2")" ]] ||
    fail "the STEAL cell is not in the medians"
  [[ $rc -eq 0 || $(q "SELECT has_errors FROM compare_results WHERE compare_id = 2") -eq 1 ]] ||
    fail "STEAL alone made the exit status $rc"
  ;;
*) fail "unknown mode $MODE" ;;
esac
echo "PASS: compare $MODE"
