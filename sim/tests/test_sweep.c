/* Sweep axes: parsing, cross product order, labels, errors. */
#include <string.h>

#include <CUnit/Basic.h>

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

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("sweep", NULL, NULL);
  CU_add_test(s, "cross product", test_cross_product);
  CU_add_test(s, "errors", test_errors);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned fails = CU_get_number_of_failures();
  CU_cleanup_registry();
  return fails ? 1 : 0;
}
