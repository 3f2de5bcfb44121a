#!/usr/bin/env bash
# Issue 29's benchmark (not a test): a sweep of step-mix in one process against the same sweep
# as a Slurm job array on this host's local one-node Slurm (tests/sweep/slurm_local.sh), then
# the merge's own cost as the shard count grows. Prints one line per measurement, with the
# hypervisor's steal over each phase (/proc/stat). Needs root (slurmd).
#   tests/sweep/bench_sweep.sh build/sim/pp-sim [VARIANTS_PER_AXIS=10] [SLURM_SHARDS=50]
# VARIANTS_PER_AXIS v gives v^4 variants (10: 10,000). The merge series runs a 1,000-variant
# sweep (MERGE_VARIANTS_PER_AXIS, default 5x5x5x8) in 2, 10, 50 and 200 shards with GNU
# parallel and times `pp-sim merge` of each set, median of 3 into a fresh database.
set -euo pipefail
PP_SIM=$(realpath "${1:?usage: $0 PP_SIM [VARIANTS_PER_AXIS] [SLURM_SHARDS]}")
V=${2:-10}
SHARDS=${3:-50}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
die() { echo "FAIL: $*" >&2; exit 1; }
source "$ROOT/tests/sweep/slurm_local.sh"

pick() { # pick N v1,v2,...: the first N values
  echo "$2" | tr , '\n' | head -n "$1" | paste -sd, -
}
axes() { # axes N: four --set axes of N values each on step-mix's policy
  echo --set "spawn_cooldown=$(pick "$1" 1s,2s,3s,4s,5s,6s,8s,10s,15s,20s)" \
       --set "max_step=$(pick "$1" 1,2,3,4,5,6,7,8,9,10)" \
       --set "target_queue_p95=$(pick "$1" 10ms,20ms,30ms,50ms,75ms,100ms,150ms,200ms,300ms,500ms)" \
       --set "retire_cooldown=$(pick "$1" 5s,10s,15s,20s,30s,45s,60s,90s,120s,180s)"
}
cpu() { awk '/^cpu /{t=0; for(i=2;i<=9;i++) t+=$i; printf "%d %d\n", t, $9}' /proc/stat; }
steal_pct() { # steal_pct "T0 S0" "T1 S1"
  awk -v a="$1" -v b="$2" 'BEGIN{split(a,x," "); split(b,y," "); d=y[1]-x[1];
    printf "%.1f", (d > 0 ? 100*(y[2]-x[2])/d : 0)}'
}
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", b-a}'; }

slurm_up
cd "$T/work"
SCN=$ROOT/scenarios/step-mix.yaml
read -r -a AX <<<"$(axes "$V")"
units=$("$PP_SIM" sweep "$SCN" "${AX[@]}" --check | head -1)
echo "bench: $units; load $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) CPUs"

# 1. One process.
c0=$(cpu); t0=$(now)
/usr/bin/time -f "%e %U %S" -o whole.time "$PP_SIM" sweep "$SCN" "${AX[@]}" --db whole.db --quiet --progress 60
t1=$(now); c1=$(cpu)
read -r e u s <whole.time
echo "bench: one process: wall $(secs "$t0" "$t1") s, user $u s, sys $s s, steal $(steal_pct "$c0" "$c1")%, db $(du -m whole.db | cut -f1) MB"

# 2. Slurm: the array, then the merge job after it.
"$PP_SIM" launch slurm --shards "$SHARDS" --name bench --out shards -o sweep.sbatch -- "$SCN" "${AX[@]}"
c0=$(cpu); t0=$(now)
array=$(sbatch --parsable sweep.sbatch)
while squeue -h -j "$array" 2>/dev/null | grep -q .; do sleep 0.5; done
t1=$(now); c1=$(cpu)
[[ $(scontrol -o show job "$array" | grep -c 'JobState=COMPLETED .*ExitCode=0:0') -eq $SHARDS ]] || die "array tasks failed"
echo "bench: slurm array of $SHARDS: sbatch to last task done $(secs "$t0" "$t1") s, steal $(steal_pct "$c0" "$c1")%"
t0=$(now)
"$PP_SIM" merge merged.db shards/shard-*.db 2>merge.log || { cat merge.log; die "merge"; }
t1=$(now)
echo "bench: merge of $SHARDS shards ($(du -cm shards/shard-*.db | tail -1 | cut -f1) MB): $(secs "$t0" "$t1") s"
sqlite3 -separator ' ' merged.db "SELECT 'bench: shard wall_s: sum', round(sum(wall_s),1), 'min', round(min(wall_s),2),
  'max', round(max(wall_s),2), 'mean', round(avg(wall_s),2), 'units/shard', round(avg(units),1) FROM sweep_shards"
rm -rf shards merged.db whole.db

# 3. The merge's cost against the shard count, on a smaller sweep.
read -r -a MX <<<"--set spawn_cooldown=1s,2s,3s,5s,8s --set max_step=1,2,3,4,5 --set target_queue_p95=20ms,50ms,100ms,200ms,300ms --set retire_cooldown=5s,10s,15s,20s,30s,45s,60s,90s"
echo "bench: merge series: $("$PP_SIM" sweep "$SCN" "${MX[@]}" --check | head -1)"
for n in 2 10 50 200; do
  "$PP_SIM" launch parallel --shards "$n" --jobs 2 --out "m$n" -o "m$n.sh" -- "$SCN" "${MX[@]}" 2>/dev/null
  bash "m$n.sh" 2>/dev/null
  times=()
  for r in 1 2 3; do
    rm -f "merged-$n.db"
    t0=$(now)
    "$PP_SIM" merge "merged-$n.db" m$n/shard-*.db 2>/dev/null
    t1=$(now)
    times+=("$(secs "$t0" "$t1")")
  done
  med=$(printf '%s\n' "${times[@]}" | sort -n | sed -n 2p)
  echo "bench: merge of $n shards ($(du -cm m$n/shard-*.db | tail -1 | cut -f1) MB): median $med s of ${times[*]}"
  rm -rf "m$n" "merged-$n.db"
done
