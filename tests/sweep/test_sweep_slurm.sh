#!/usr/bin/env bash
# Issue 29: a sweep on a real Slurm. The test brings up a one-node Slurm of its own — a
# slurm.conf for this host (2 CPUs), a munge key and munged on a socket in a temp dir,
# slurmctld -D and slurmd -D on free ports, all state in the temp dir, so no system service
# or file is touched — submits the job array `pp-sim launch slurm` writes (sbatch --array) and
# a merge job that depends on it (afterok), waits for both, and checks that the merged rows
# equal a single-process sweep's. Everything it started is stopped by PID, also on failure.
# Needs root (slurmd runs jobs as their user).
#   tests/sweep/test_sweep_slurm.sh build/sim/pp-sim
set -euo pipefail
PP_SIM=$(realpath "${1:?usage: $0 PP_SIM}")
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
source "$ROOT/tests/sweep/lib.sh"
SHARDS=${SHARDS:-10}
TIMEOUT=${TIMEOUT:-100}
source "$ROOT/tests/sweep/slurm_local.sh"
slurm_up

cd "$T/work"
t0=$(date +%s.%N)
"$PP_SIM" sweep "${SWEEP_ARGS[@]}" --db whole.db --quiet
t1=$(date +%s.%N)
"$PP_SIM" launch slurm --shards "$SHARDS" --name pp-sweep-test --out shards -o sweep.sbatch \
  -- "${SWEEP_ARGS[@]}"
grep -q "^#SBATCH --array=1-$SHARDS$" sweep.sbatch || die "sweep.sbatch has no --array=1-$SHARDS"
t2=$(date +%s.%N)
array=$(sbatch --parsable sweep.sbatch)
merge=$(sbatch --parsable --dependency="afterok:$array" --job-name=pp-sweep-merge \
  --output=shards/merge.out --wrap "$PP_SIM merge shards/merged.db shards/shard-*.db")
echo "slurm: array job $array ($SHARDS tasks), merge job $merge after it"
deadline=$(($(date +%s) + TIMEOUT))
while squeue -h -j "$array,$merge" 2>/dev/null | grep -q .; do
  [[ $(date +%s) -lt $deadline ]] || { squeue >&2; die "the jobs did not finish within ${TIMEOUT}s"; }
  sleep 0.5
done
t3=$(date +%s.%N)
# Every task and the merge completed with exit code 0 (accounting is off: scontrol keeps them
# for MinJobAge).
states=$(scontrol -o show job "$array" | grep -o 'JobState=[A-Z_]* .*ExitCode=[0-9:]*' |
  sed -E 's/JobState=([A-Z_]+).*ExitCode=([0-9:]+)/\1 \2/' | sort | uniq -c)
echo "slurm: array tasks: $states"
[[ $(scontrol -o show job "$array" | grep -c 'JobState=COMPLETED .*ExitCode=0:0') -eq $SHARDS ]] \
  || die "not every array task completed with exit 0"
scontrol -o show job "$merge" | grep -q 'JobState=COMPLETED .*ExitCode=0:0' \
  || { cat shards/merge.out >&2; die "the merge job did not complete"; }
grep -q "$SHARDS of $SHARDS shards in, $SWEEP_UNITS of $SWEEP_UNITS units; complete" shards/merge.out \
  || { cat shards/merge.out >&2; die "the merge job's report is not complete"; }
same_rows whole.db shards/merged.db || die "the Slurm shards' merged rows differ from the whole sweep's"
[[ $(sqlite3 shards/merged.db "SELECT count(DISTINCT shard) FROM sweep_shards") -eq $SHARDS ]] \
  || die "merged.db does not list $SHARDS shards"
printf 'slurm: whole sweep %.2f s in one process; %d shards on Slurm %.2f s from sbatch to merged\n' \
  "$(awk "BEGIN{print $t1 - $t0}")" "$SHARDS" "$(awk "BEGIN{print $t3 - $t2}")"
sqlite3 -separator ' ' shards/merged.db \
  "SELECT 'slurm: shard wall s: min', round(min(wall_s),3), 'mean', round(avg(wall_s),3), 'max', round(max(wall_s),3) FROM sweep_shards"
echo "PASS: $SWEEP_UNITS units in $SHARDS Slurm array tasks merge to the whole sweep's rows"
