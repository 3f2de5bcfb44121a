# Shared by the sweep tests (tests/sweep/test_*.sh): the sweep they run and the row comparison.
# Sourced; expects PP_SIM (the binary) and ROOT (the checkout).

# 200 variants x 2 seeds = 400 units of tests/sweep/small-step.yaml (a few seconds in all).
SWEEP_ARGS=("$ROOT/tests/sweep/small-step.yaml"
  --set spawn_cooldown=1s,2s,3s,5s,8s,10s,15s,20s,25s,30s
  --set max_step=1,2,3,4,5,6,7,8,9,10
  --set breach_ticks=1,2
  --seeds 7,8)
SWEEP_VARIANTS=200
SWEEP_UNITS=400

die() { echo "FAIL: $*" >&2; exit 1; }

# same_rows A.db B.db: every row of the sweep tables in A is in B and the other way round,
# keyed by (sweep, unit, config) rather than by row ids, and compared by SQLite's own equality
# (REAL values bit for bit). runs.created_at, runs.scenario_path and the shard bookkeeping are
# not results and are left out. Prints the differing counts and returns 1 on any difference.
same_rows() {
  local a=$1 b=$2 bad=0 t cols q na nb d1 d2
  for t in configs summary timeline decisions; do
    case $t in
    configs)
      cols="c.name, c.server, c.queue_model, c.workers, c.threads, c.autoscale, c.policy_hash,
            c.policy_text, c.variant, r.kind, r.tool, r.scenario, r.seed, r.duration_s,
            k.variant_index, k.seed"
      q() { echo "SELECT k.sweep_hash, k.unit, $cols FROM $1.sweep_configs k
                  JOIN $1.configs c USING (config_id) JOIN $1.runs r USING (run_id)"; } ;;
    *)
      cols=$(sqlite3 "$a" "SELECT group_concat('x.' || name, ', ') FROM pragma_table_info('$t')
                           WHERE name <> 'config_id'")
      q() { echo "SELECT k.sweep_hash, k.unit, c.name, $cols FROM $1.$t x
                  JOIN $1.sweep_configs k USING (config_id) JOIN $1.configs c USING (config_id)"; } ;;
    esac
    read -r na nb d1 d2 < <(sqlite3 -separator ' ' "$a" "ATTACH '$b' AS b;
      SELECT (SELECT count(*) FROM ($(q main))), (SELECT count(*) FROM ($(q b))),
             (SELECT count(*) FROM ($(q main) EXCEPT $(q b))),
             (SELECT count(*) FROM ($(q b) EXCEPT $(q main)));")
    echo "same_rows $t: $na rows in $(basename "$a"), $nb in $(basename "$b"), $d1 only in the first, $d2 only in the second"
    if [[ -z $na || $na -eq 0 || $na -ne $nb || $d1 -ne 0 || $d2 -ne 0 ]]; then bad=1; fi
  done
  return $bad
}
