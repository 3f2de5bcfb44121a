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
[[ $(id -u) -eq 0 ]] || die "needs root: slurmd runs the array's tasks as the submitting user"
for b in munged slurmctld slurmd sbatch squeue scontrol python3 sqlite3; do
  command -v $b >/dev/null || die "$b is not installed (scripts/install-deps.sh: slurm-wlm, munge)"
done
T=$(mktemp -d /tmp/pp-sweep-slurm.XXXXXX)
chmod 700 "$T"
pids=()
cleanup() {
  local rc=$?
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null || true
  done
  if [[ $rc -ne 0 ]]; then
    for f in slurmctld.log slurmd.log munged.log; do
      [[ -f $T/$f ]] && { echo "--- $f (last 30 lines)" >&2; tail -30 "$T/$f" >&2; }
    done
    ls "$T"/work/shards/*.out >/dev/null 2>&1 && tail -5 "$T"/work/shards/*.out >&2
  fi
  [[ -n ${KEEP:-} ]] || rm -rf "$T"
  exit $rc
}
trap cleanup EXIT
trap 'exit 1' INT TERM

host=$(hostname -s)
read -r ctld_port slurmd_port < <(python3 -c '
import socket
ss = [socket.socket() for _ in range(2)]
for s in ss: s.bind(("", 0))
print(*[s.getsockname()[1] for s in ss])')

# munge: its own key, socket, pid, log and seed files.
mkdir -p "$T/munge" "$T/state" "$T/spool" "$T/work"
chmod 700 "$T/munge"
dd if=/dev/urandom of="$T/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$T/munge/munge.key"
sock=$T/munge/munge.socket
munged --foreground --force --socket="$sock" --key-file="$T/munge/munge.key" \
  --pid-file="$T/munge/munged.pid" --log-file="$T/munged.log" --seed-file="$T/munge/seed" \
  >"$T/munged.out" 2>&1 &
pids+=($!)
for _ in $(seq 50); do [[ -S $sock ]] && break; sleep 0.1; done
[[ -S $sock ]] || die "munged did not create its socket"

cat >"$T/slurm.conf" <<CONF
ClusterName=ppsweep
SlurmctldHost=$host
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sock
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/slurmctld.log
SlurmdLogFile=$T/slurmd.log
PlugStackConfig=$T/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
MaxArraySize=10001
MinJobAge=600
NodeName=$host CPUs=2 State=UNKNOWN
PartitionName=sweep Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
: >"$T/plugstack.conf"
export SLURM_CONF=$T/slurm.conf
slurmctld -D -c -f "$SLURM_CONF" >"$T/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -c -f "$SLURM_CONF" >"$T/slurmd.out" 2>&1 &
pids+=($!)
up=0
for _ in $(seq 150); do
  if scontrol show node "$host" 2>/dev/null | grep -Eq 'State=(IDLE|MIXED|ALLOCATED)'; then up=1; break; fi
  sleep 0.2
done
[[ $up -eq 1 ]] || { scontrol show node "$host" >&2 || true; die "the Slurm node did not come up"; }
echo "slurm: slurmctld on port $ctld_port, slurmd on $slurmd_port, node $host idle"

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
