/* Sweep axes: parsing, cross product order, labels, errors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/Basic.h>

#include "sim/launch.h"
#include "sim/sweep.h"

static void test_cross_product(void) {
  pp_sweep sw;
  char err[256], label[256];
  pp_sweep_init(&sw);
  CU_ASSERT_EQUAL(pp_sweep_count(&sw), 1);
  CU_ASSERT_EQUAL(pp_sweep_add(&sw, "policy.spawn_cooldown=1s,2s,5s,15s", err, sizeof err), 0);
  CU_ASSERT_EQUAL(pp_sweep_add(&sw, "max_step=1,4", err, sizeof err), 0);
  CU_ASSERT_EQUAL(pp_sweep_count(&sw), 8);
  pp_policy p;
  pp_policy_defaults(&p);
  CU_ASSERT_EQUAL(pp_sweep_apply(&sw, 0, &p, label, sizeof label, err, sizeof err), 0);
  CU_ASSERT_STRING_EQUAL(label, "spawn_cooldown=1s max_step=1");
  CU_ASSERT_EQUAL(p.spawn_cooldown_ns, 1000000000ull);
  CU_ASSERT_EQUAL(p.max_step, 1);
  CU_ASSERT_EQUAL(pp_sweep_apply(&sw, 7, &p, label, sizeof label, err, sizeof err), 0);
  CU_ASSERT_STRING_EQUAL(label, "spawn_cooldown=15s max_step=4");
  CU_ASSERT_EQUAL(p.spawn_cooldown_ns, 15000000000ull);
  CU_ASSERT_EQUAL(p.max_step, 4);
  CU_ASSERT_EQUAL(pp_sweep_apply(&sw, 3, &p, label, sizeof label, err, sizeof err), 0);
  CU_ASSERT_STRING_EQUAL(label, "spawn_cooldown=2s max_step=4");
}

static void test_errors(void) {
  pp_sweep sw;
  char err[256];
  pp_sweep_init(&sw);
  CU_ASSERT_EQUAL(pp_sweep_add(&sw, "policy.no_such_field=1", err, sizeof err), -1);
  CU_ASSERT(strstr(err, "unknown policy field") != NULL);
  CU_ASSERT_EQUAL(pp_sweep_add(&sw, "spawn_cooldown=fast", err, sizeof err), -1);
  CU_ASSERT_EQUAL(pp_sweep_add(&sw, "spawn_cooldown", err, sizeof err), -1);
  CU_ASSERT_EQUAL(pp_sweep_add(&sw, "spawn_cooldown=1s,,2s", err, sizeof err), -1);
  CU_ASSERT_EQUAL(pp_sweep_add(&sw, "spawn_cooldown=1s", err, sizeof err), 0);
  CU_ASSERT_EQUAL(pp_sweep_add(&sw, "policy.spawn_cooldown=2s", err, sizeof err), -1);
  CU_ASSERT(strstr(err, "already") != NULL);
  /* Cross-field validation happens per variant. */
  pp_sweep_init(&sw);
  CU_ASSERT_EQUAL(pp_sweep_add(&sw, "min_workers=1,9", err, sizeof err), 0);
  pp_policy p;
  pp_policy_defaults(&p); /* max_workers 8 */
  char label[128];
  CU_ASSERT_EQUAL(pp_sweep_apply(&sw, 0, &p, label, sizeof label, err, sizeof err), 0);
  pp_policy_defaults(&p);
  CU_ASSERT_EQUAL(pp_sweep_apply(&sw, 1, &p, label, sizeof label, err, sizeof err), -1);
}

/* Every unit in exactly one shard, for every shard count up to 40 and unit counts around it
 * (fewer units than shards included); a shard's units in increasing order; the three views
 * (in_shard, shard_size, shard_unit) agree. */
static void test_shard_split(void) {
  for (size_t units = 0; units <= 97; units++) {
    for (uint32_t n = 1; n <= 40; n++) {
      unsigned char *hits = calloc(units + 1, 1);
      size_t total = 0;
      for (uint32_t i = 1; i <= n; i++) {
        size_t size = pp_sweep_shard_size(units, i, n);
        size_t in = 0;
        for (size_t u = 0; u < units; u++)
          in += (size_t)pp_sweep_in_shard(u, i, n);
        CU_ASSERT_EQUAL(in, size);
        size_t prev = 0;
        for (size_t k = 0; k < size; k++) {
          size_t u = pp_sweep_shard_unit(k, i, n);
          CU_ASSERT(u < units);
          if (u >= units) break;
          CU_ASSERT(pp_sweep_in_shard(u, i, n));
          if (k) CU_ASSERT(u > prev);
          prev = u;
          hits[u]++;
        }
        /* Sizes differ by at most one: the split is balanced. */
        CU_ASSERT(size == units / n || size == units / n + 1);
        total += size;
      }
      CU_ASSERT_EQUAL(total, units);
      for (size_t u = 0; u < units; u++)
        CU_ASSERT_EQUAL(hits[u], 1);
      free(hits);
    }
  }
  /* The order is fixed: shard 2 of 3 of ten units is 1, 4, 7. */
  CU_ASSERT_EQUAL(pp_sweep_shard_size(10, 2, 3), 3);
  CU_ASSERT_EQUAL(pp_sweep_shard_unit(0, 2, 3), 1);
  CU_ASSERT_EQUAL(pp_sweep_shard_unit(1, 2, 3), 4);
  CU_ASSERT_EQUAL(pp_sweep_shard_unit(2, 2, 3), 7);
}

static void test_shard_parse(void) {
  uint32_t i = 0, n = 0;
  char err[256];
  CU_ASSERT_EQUAL(pp_sweep_parse_shard("3/10", &i, &n, err, sizeof err), 0);
  CU_ASSERT_EQUAL(i, 3);
  CU_ASSERT_EQUAL(n, 10);
  CU_ASSERT_EQUAL(pp_sweep_parse_shard("1/1", &i, &n, err, sizeof err), 0);
  const char *bad[] = {"0/10", "11/10", "3", "3/", "/3", "a/b", "3/10x", "-1/2", "1/0", ""};
  for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
    err[0] = 0;
    CU_ASSERT_EQUAL(pp_sweep_parse_shard(bad[k], &i, &n, err, sizeof err), -1);
    CU_ASSERT(strstr(err, "--shard") != NULL);
  }
}

static void test_seeds(void) {
  pp_sweep sw;
  char err[256], text[512];
  pp_sweep_init(&sw);
  CU_ASSERT_EQUAL(pp_sweep_add(&sw, "max_step=1,4", err, sizeof err), 0);
  CU_ASSERT_EQUAL(pp_sweep_units(&sw), 2);
  CU_ASSERT_EQUAL(pp_sweep_set_seeds(&sw, "1-3,10", err, sizeof err), 0);
  CU_ASSERT_EQUAL(sw.n_seeds, 4);
  CU_ASSERT_EQUAL(sw.seeds[3], 10);
  CU_ASSERT_EQUAL(pp_sweep_units(&sw), 8);
  CU_ASSERT(pp_sweep_canonical(&sw, text, sizeof text) > 0);
  CU_ASSERT_STRING_EQUAL(text, "set max_step=1,4\nseeds 1,2,3,10\n");
  CU_ASSERT_EQUAL(pp_sweep_canonical(&sw, text, 10), -1);
  const char *bad[] = {
      "", "1,", "1,,2", "3-1", "x", "1-2,2", "1-99999", "-5", "18446744073709551616"};
  for (size_t k = 0; k < sizeof bad / sizeof *bad; k++)
    CU_ASSERT_EQUAL(pp_sweep_set_seeds(&sw, bad[k], err, sizeof err), -1);
  CU_ASSERT_EQUAL(pp_sweep_set_seeds(&sw, "18446744073709551615", err, sizeof err), 0);
  /* FNV-1a's published test vector. */
  CU_ASSERT_EQUAL(pp_sweep_fnv1a(PP_SWEEP_FNV_SEED, "a", 1), 0xaf63dc4c8601ec8cull);
}

static char *launch_text(const pp_launch *l) {
  char *buf = NULL, err[256];
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  int rc = pp_launch_write(f, l, err, sizeof err);
  fclose(f);
  if (rc) {
    free(buf);
    return NULL;
  }
  return buf;
}

static void test_launch(void) {
  const char *args[] = {"scn.yaml", "--set", "spawn_cooldown=1s,2s", "--notes", "it's"};
  pp_launch l;
  memset(&l, 0, sizeof l);
  l.engine = PP_LAUNCH_SLURM;
  l.shards = 7;
  l.name = "sw";
  l.out_dir = "out dir";
  l.pp_sim = "/opt/pp-sim";
  l.sweep_args = args;
  l.n_sweep_args = 5;
  l.max_running = 3;
  char *t = launch_text(&l);
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT(strstr(t, "#SBATCH --array=1-7%3\n") != NULL);
  CU_ASSERT(strstr(t,
                   "exec /opt/pp-sim sweep scn.yaml --set spawn_cooldown=1s,2s --notes "
                   "'it'\\''s' --shard \"$i/7\" --db 'out dir'/shard-\"$i\".db --quiet\n") != NULL);
  free(t);
  l.engine = PP_LAUNCH_PARALLEL;
  l.out_dir = "out";
  l.n_sweep_args = 3;
  const char *logins[] = {"2/:", "me@box"};
  l.sshlogins = logins;
  l.n_sshlogins = 2;
  l.scenario_path = "scn.yaml";
  t = launch_text(&l);
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT(strstr(t,
                   "seq 1 7 | parallel --halt soon,fail=1 --joblog out/parallel.log --sshlogin "
                   "2/: --sshlogin me@box --basefile scn.yaml --return out/shard-{}.db --cleanup "
                   "'mkdir -p out && /opt/pp-sim sweep scn.yaml --set spawn_cooldown=1s,2s "
                   "--shard {}/7 --db out/shard-{}.db --quiet'\n") != NULL);
  free(t);
  l.engine = PP_LAUNCH_K8S;
  t = launch_text(&l);
  CU_ASSERT_PTR_NULL(t); /* no image, claim, workdir, and a relative out */
  l.image = "img";
  l.claim = "pvc";
  l.workdir = "/w";
  l.out_dir = "/results";
  t = launch_text(&l);
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT(strstr(t, "completionMode: Indexed\n  completions: 7\n  parallelism: 7\n") != NULL);
  CU_ASSERT(strstr(t, "i=$((JOB_COMPLETION_INDEX + 1))") != NULL);
  free(t);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("sweep", NULL, NULL);
  CU_add_test(s, "cross product", test_cross_product);
  CU_add_test(s, "errors", test_errors);
  CU_add_test(s, "shard split", test_shard_split);
  CU_add_test(s, "shard parse", test_shard_parse);
  CU_add_test(s, "seeds", test_seeds);
  CU_add_test(s, "launch", test_launch);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned fails = CU_get_number_of_failures();
  CU_cleanup_registry();
  return fails ? 1 : 0;
}
