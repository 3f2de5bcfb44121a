#!/usr/bin/env bash
# Issue 29: pp-sim merge. Shards merged in pieces report the missing ones by number; a shard
# given twice or already merged is reported and skipped (merging again changes nothing); a shard
# of another sweep (other scenario bytes, other --set values) or another shard count is refused
# and nothing is merged; a sweep never writes a shard twice into one database. The comparison
# itself is shown able to fail: one REAL changed in its last bits is found. And progress: a long
# sweep off a terminal prints progress lines on stderr and the same stdout.
#   tests/sweep/test_sweep_merge.sh build/sim/pp-sim
set -euo pipefail
PP_SIM=$(realpath "${1:?usage: $0 PP_SIM}")
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
source "$ROOT/tests/sweep/lib.sh"
work=$(mktemp -d /tmp/pp-sweep-merge.XXXXXX)
trap '[[ -n ${KEEP:-} ]] || rm -rf "$work"' EXIT
cd "$work"

expect_rc() { # expect_rc RC LOG command...: runs it, stderr to LOG, checks the exit status
  local want=$1 log=$2 rc=0
  shift 2
  "$@" 2>"$log" >/dev/null || rc=$?
  [[ $rc -eq $want ]] || { cat "$log" >&2; die "$* exited $rc, expected $want"; }
}
count() { sqlite3 "$1" "SELECT count(*) FROM configs"; }

"$PP_SIM" sweep "${SWEEP_ARGS[@]}" --db whole.db --quiet 2>/dev/null
for i in 1 2 3 4 5; do
  "$PP_SIM" sweep "${SWEEP_ARGS[@]}" --shard "$i/5" --db "s$i.db" --quiet 2>/dev/null
done

# Missing shards, by number; exit 3.
expect_rc 3 log1 "$PP_SIM" merge m.db s1.db s2.db s4.db
grep -q "3 of 5 shards in" log1 || die "merge did not say 3 of 5 shards are in"
grep -q "missing shards 3, 5" log1 || die "merge did not name the missing shards 3 and 5"
expect_rc 3 log1s "$PP_SIM" merge m.db
grep -q "missing shards 3, 5" log1s || die "the status of m.db did not name the missing shards"

# Duplicates: shard 3 in two files, shard 2 already in; exit 0 once complete.
cp s3.db s3-copy.db
expect_rc 0 log2 "$PP_SIM" merge m.db s2.db s3.db s3-copy.db s5.db
grep -q "shard 2/5 of s2.db is already in m.db: skipped" log2 || die "shard 2 not reported as already in"
grep -q "duplicated shard 3/5: in s3.db and in s3-copy.db" log2 || die "shard 3 not reported as duplicated"
grep -q "5 of 5 shards in, $SWEEP_UNITS of $SWEEP_UNITS units; complete" log2 || die "merge not complete"
same_rows whole.db m.db || die "merged rows differ from the whole sweep's"
[[ $(sqlite3 m.db "SELECT count(*) FROM runs") -eq 2 ]] || die "m.db: expected one run per seed"

# Idempotent: merging everything again adds nothing.
before=$(count m.db)
sum_before=$(sqlite3 m.db "SELECT total(excess_latency_ms), count(*) FROM summary")
expect_rc 0 log3 "$PP_SIM" merge m.db s1.db s2.db s3.db s4.db s5.db
[[ $(grep -c "already in m.db: skipped" log3) -eq 5 ]] || die "a second merge did not skip all 5 shards"
[[ $(count m.db) -eq $before ]] || die "a second merge changed the row count"
[[ $(sqlite3 m.db "SELECT total(excess_latency_ms), count(*) FROM summary") == "$sum_before" ]] \
  || die "a second merge changed the summary"
expect_rc 0 log3s "$PP_SIM" merge m.db

# Merges nest: two merged halves merge into the whole.
expect_rc 3 log3a "$PP_SIM" merge half1.db s1.db s2.db
expect_rc 3 log3b "$PP_SIM" merge half2.db s3.db s4.db s5.db
expect_rc 0 log3c "$PP_SIM" merge tree.db half1.db half2.db
same_rows whole.db tree.db >/dev/null || die "a merge of merged halves differs from the whole sweep's rows"
expect_rc 0 log3d "$PP_SIM" merge tree.db s4.db
grep -q "shard 4/5 of s4.db is already in tree.db" log3d || die "a shard already in through a merged half was not seen"

# Refused: another sweep (scenario bytes differ by a comment), another --set, another shard count.
sed 's/^name:/# one more comment\nname:/' "$ROOT/tests/sweep/small-step.yaml" > other.yaml
other=("$work/other.yaml" "${SWEEP_ARGS[@]:1}")
"$PP_SIM" sweep "${other[@]}" --shard 2/5 --db o2.db --quiet 2>/dev/null
expect_rc 1 log4 "$PP_SIM" merge fresh.db s1.db o2.db
grep -q "refused: o2.db holds sweep" log4 || die "a shard of another scenario was not refused"
grep -q "nothing merged" log4 || die "the refusal did not say nothing was merged"
grep -q "scenario sweep-small-step" log4 || die "the refusal did not name the differing definition line"
[[ ! -e fresh.db || $(sqlite3 fresh.db "SELECT count(*) FROM configs") -eq 0 ]] \
  || die "a refused merge wrote rows"
"$PP_SIM" sweep "${SWEEP_ARGS[@]:0:5}" --set breach_ticks=1,3 --seeds 7,8 --shard 2/5 --db x2.db --quiet 2>/dev/null
expect_rc 1 log5 "$PP_SIM" merge fresh.db s1.db x2.db
grep -q "breach_ticks=1,2\" against \"set breach_ticks=1,3" log5 || die "another --set was not refused with its line"
"$PP_SIM" sweep "${SWEEP_ARGS[@]}" --shard 2/4 --db q2.db --quiet 2>/dev/null
expect_rc 1 log6 "$PP_SIM" merge fresh.db s1.db q2.db
grep -q "into 4 shards" log6 || die "another shard count was not refused"
expect_rc 1 log7 "$PP_SIM" merge m.db q2.db
grep -q "already holds sweep .* split into 5 shards" log7 || die "m.db accepted a 4-way shard of its 5-way sweep"
expect_rc 1 log8 "$PP_SIM" merge fresh.db s1.db no-such.db
expect_rc 1 log9 "$PP_SIM" merge fresh.db "$ROOT/README.md"

# A sweep does not write a shard twice into one database.
expect_rc 1 log10 "$PP_SIM" sweep "${SWEEP_ARGS[@]}" --shard 1/5 --db s1.db --quiet
grep -q "already holds shard 1/5" log10 || die "a shard was written twice into s1.db"

# The comparison finds one REAL changed in its last bits.
cp m.db bent.db
sqlite3 bent.db "UPDATE summary SET p99_ms = p99_ms * (1 + 1e-15)
                 WHERE config_id = (SELECT min(config_id) FROM summary WHERE p99_ms > 0)"
if same_rows whole.db bent.db >/dev/null; then die "same_rows missed a changed value"; fi

# Progress: off a terminal, a line every --progress seconds on stderr; stdout unchanged.
"$PP_SIM" sweep "${SWEEP_ARGS[@]}" --progress 0 >quiet.out 2>quiet.err
"$PP_SIM" sweep "${SWEEP_ARGS[@]}" --progress 0.001 >loud.out 2>loud.err
cmp -s quiet.out loud.out || die "progress changed stdout"
grep -q "^pp-sim sweep: [0-9]*/$SWEEP_UNITS runs, " loud.err || die "no progress lines on stderr"
if grep -q "runs, " quiet.err; then die "--progress 0 still printed progress"; fi
echo "PASS: merge reports missing and duplicated shards, is idempotent, refuses other sweeps"
