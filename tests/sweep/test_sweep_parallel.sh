#!/usr/bin/env bash
# Issue 29: GNU parallel runs a sweep in shards from the command line `pp-sim launch parallel`
# writes; the merged rows equal a single-process sweep's. Twice: 7 shards on this machine, and
# 3 shards through --sshlogin ":" (parallel's name for this machine), which exercises the
# launcher's --sshlogin/--basefile/--return form without an ssh server.
#   tests/sweep/test_sweep_parallel.sh build/sim/pp-sim
set -euo pipefail
PP_SIM=$(realpath "${1:?usage: $0 PP_SIM}")
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
source "$ROOT/tests/sweep/lib.sh"
command -v parallel >/dev/null || die "GNU parallel is not installed (scripts/install-deps.sh installs it)"
parallel --version | head -1 | grep -q 'GNU parallel' || die "parallel is not GNU parallel"
work=$(mktemp -d /tmp/pp-sweep-parallel.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work"

"$PP_SIM" sweep "${SWEEP_ARGS[@]}" --db whole.db --quiet
for run in "7 local" "3 sshlogin"; do
  read -r n how <<<"$run"
  extra=()
  [[ $how == sshlogin ]] && extra=(--sshlogin 2/:)
  "$PP_SIM" launch parallel --shards "$n" --jobs 2 --out "shards-$n" "${extra[@]}" -o "run-$n.sh" \
    -- "${SWEEP_ARGS[@]}"
  grep -q "seq 1 $n | parallel" "run-$n.sh" || die "run-$n.sh has no parallel command line"
  if [[ $how == sshlogin ]]; then grep -q -- '--sshlogin 2/:' "run-$n.sh" || die "no --sshlogin"; fi
  bash "run-$n.sh"
  [[ $(ls shards-$n/shard-*.db | wc -l) -eq $n ]] || die "expected $n shard databases"
  "$PP_SIM" merge "merged-$n.db" shards-$n/shard-*.db || die "merge of $n shards did not complete"
  same_rows whole.db "merged-$n.db" || die "$n shards ($how): merged rows differ from the whole sweep's"
  units=$(sqlite3 "merged-$n.db" "SELECT sum(units) FROM sweep_shards")
  [[ $units -eq $SWEEP_UNITS ]] || die "merged-$n.db: $units units, expected $SWEEP_UNITS"
done
echo "PASS: parallel shards (7 local, 3 via --sshlogin) merge to the whole sweep's rows"
