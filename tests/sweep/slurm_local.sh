# A one-node Slurm of a test's own, for tests/sweep/test_sweep_slurm.sh and bench_sweep.sh.
# Sourced; `slurm_up` makes a temp dir $T, starts munged (own key and socket), slurmctld -D
# and slurmd -D on free ports with every path inside $T, exports SLURM_CONF, and installs an
# EXIT trap that stops every process it started by PID (also on failure) and removes $T
# (kept when KEEP is set). Needs root. `die` must be defined.
# The daemons run with their working directory in $T/daemons, so the job step daemons
# (slurmstepd, which slurmd double-forks) inherit it, and the jobs run in $T/work: on the way
# out, after cancelling the jobs, every process whose working directory is inside $T is one
# this test started, and is stopped by its PID.
pids=()
procs_in_T() {
  local d p
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    [[ $p == "$$" ]] && continue
    [[ $(readlink "$d/cwd" 2>/dev/null) == "$T"/* ]] && echo "$p"
  done
  return 0
}
slurm_cleanup() {
  local rc=$? p
  cd /
  if [[ -n ${SLURM_CONF:-} && -n ${T:-} ]]; then
    local jobs
    jobs=$(squeue -h -o %A 2>/dev/null | tr '\n' ' ')
    if [[ -n ${jobs// /} ]]; then
      scancel $jobs 2>/dev/null || true
      for _ in $(seq 50); do squeue -h 2>/dev/null | grep -q . || break; sleep 0.1; done
    fi
  fi
  local stray=()
  [[ -n ${T:-} ]] && mapfile -t stray < <(procs_in_T)
  for p in "${stray[@]}" "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${stray[@]}" "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null || true
  done
  if [[ $rc -ne 0 && -n ${T:-} ]]; then
    for f in slurmctld.log slurmd.log munged.log; do
      [[ -f $T/$f ]] && { echo "--- $f (last 30 lines)" >&2; tail -30 "$T/$f" >&2; }
    done
    ls "$T"/work/shards/*.out >/dev/null 2>&1 && tail -5 "$T"/work/shards/*.out >&2
  fi
  [[ -n ${KEEP:-} || -z ${T:-} ]] || rm -rf "$T"
  exit $rc
}

slurm_up() {
  [[ $(id -u) -eq 0 ]] || die "needs root: slurmd runs the array's tasks as the submitting user"
  for b in munged slurmctld slurmd sbatch squeue scontrol python3 sqlite3; do
    command -v $b >/dev/null || die "$b is not installed (scripts/install-deps.sh: slurm-wlm, munge)"
  done
T=$(mktemp -d /tmp/pp-sweep-slurm.XXXXXX)
chmod 700 "$T"
trap slurm_cleanup EXIT
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
(cd "$T/munge" && exec munged --foreground --force --socket="$sock" --key-file="$T/munge/munge.key" \
  --pid-file="$T/munge/munged.pid" --log-file="$T/munged.log" --seed-file="$T/munge/seed") \
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
mkdir -p "$T/daemons"
(cd "$T/daemons" && exec slurmctld -D -c -f "$SLURM_CONF") >"$T/slurmctld.out" 2>&1 &
pids+=($!)
(cd "$T/daemons" && exec slurmd -D -c -f "$SLURM_CONF") >"$T/slurmd.out" 2>&1 &
pids+=($!)
up=0
for _ in $(seq 150); do
  if scontrol show node "$host" 2>/dev/null | grep -Eq 'State=(IDLE|MIXED|ALLOCATED)'; then up=1; break; fi
  sleep 0.2
done
[[ $up -eq 1 ]] || { scontrol show node "$host" >&2 || true; die "the Slurm node did not come up"; }
echo "slurm: slurmctld on port $ctld_port, slurmd on $slurmd_port, node $host idle"

}
