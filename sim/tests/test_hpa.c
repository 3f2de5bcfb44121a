/* The HPA algorithm (sim/hpa.c) against the examples of the Kubernetes documentation
 * ("Horizontal Pod Autoscaling": algorithm details, stabilization window, scaling policies),
 * and Prometheus' histogram_quantile on hand-computed buckets. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <CUnit/Basic.h>

#include "sim/hpa.h"

#define S(x) ((int64_t)(x)*1000000000ll)

/* "if the current metric value is 200m, and the desired value is 100m, the number of replicas
 * will be doubled ... if the current value is instead 50m, you'll halve the number of
 * replicas ... skips any scaling action if the ratio is sufficiently close to 1.0 (within a
 * globally-configurable tolerance, 0.1 by default)". */
static void test_ratio_examples(void) {
  CU_ASSERT_EQUAL(pp_hpa_replicas(PP_HPA_VALUE, 0.1, 4, 4, 0.200, 0.100), 8);
  CU_ASSERT_EQUAL(pp_hpa_replicas(PP_HPA_VALUE, 0.1, 4, 4, 0.050, 0.100), 2);
  CU_ASSERT_EQUAL(pp_hpa_replicas(PP_HPA_VALUE, 0.1, 4, 4, 0.105, 0.100), 4); /* tolerance */
  CU_ASSERT_EQUAL(pp_hpa_replicas(PP_HPA_VALUE, 0.1, 4, 4, 0.095, 0.100), 4);
  CU_ASSERT_EQUAL(pp_hpa_replicas(PP_HPA_VALUE, 0.1, 4, 4, 0.111, 0.100), 5); /* ceil(4.44) */
  CU_ASSERT_EQUAL(pp_hpa_replicas(PP_HPA_VALUE, 0.0, 4, 4, 0.101, 0.100), 5); /* no tolerance */
  /* desired = ceil(current × ratio) with the ready replicas as "current" for a Value metric. */
  CU_ASSERT_EQUAL(pp_hpa_replicas(PP_HPA_VALUE, 0.1, 6, 3, 0.300, 0.100), 9);
  /* Utilisation is a mean over ready pods: 3 pods at 90% with a 50% target -> ceil(5.4). */
  CU_ASSERT_EQUAL(pp_hpa_replicas(PP_HPA_UTILIZATION, 0.1, 3, 3, 2.7, 0.5), 6);
  /* An unready pod counts as 0% on a scale-up: 2.7 / 4 pods = 67.5%, ratio 1.35 -> ceil(5.4). */
  CU_ASSERT_EQUAL(pp_hpa_replicas(PP_HPA_UTILIZATION, 0.1, 4, 3, 2.7, 0.5), 6);
  /* ... and a scale-up that this turns into a scale-down is dropped: 3 x 60% of 4 = 45%. */
  CU_ASSERT_EQUAL(pp_hpa_replicas(PP_HPA_UTILIZATION, 0.1, 4, 3, 1.8, 0.5), 4);
  /* Scale-down ignores unready pods: 3 x 20% of 50% -> ceil(1.2). */
  CU_ASSERT_EQUAL(pp_hpa_replicas(PP_HPA_UTILIZATION, 0.1, 4, 3, 0.6, 0.5), 2);
  /* A missing metric never reads as zero. */
  CU_ASSERT_EQUAL(pp_hpa_replicas(PP_HPA_VALUE, 0.1, 4, 4, NAN, 0.1), 4);
}

/* Default behaviour: scale-up by max(100%, 4 pods) per 15 s; min/max clamp. */
static void test_scale_up_policies(void) {
  pp_hpa_spec sp;
  pp_hpa_spec_defaults(&sp);
  sp.min_replicas = 1;
  sp.max_replicas = 100;
  pp_hpa h;
  pp_hpa_init(&h, &sp);
  CU_ASSERT_EQUAL(pp_hpa_sync(&h, S(0), 2, 40), 6);   /* 2 + 4 pods beats 100% of 2 */
  CU_ASSERT_EQUAL(pp_hpa_sync(&h, S(5), 6, 40), 6);   /* 2 + 4 already added this period */
  CU_ASSERT_EQUAL(pp_hpa_sync(&h, S(15), 6, 40), 12); /* new period: 100% of 6 */
  CU_ASSERT_EQUAL(pp_hpa_sync(&h, S(30), 12, 40), 24);
  CU_ASSERT_EQUAL(pp_hpa_sync(&h, S(45), 24, 40), 40);
  sp.max_replicas = 30;
  pp_hpa_init(&h, &sp);
  CU_ASSERT_EQUAL(pp_hpa_sync(&h, S(0), 20, 90), 30); /* maxReplicas */
  sp.min_replicas = 3;
  pp_hpa_init(&h, &sp);
  CU_ASSERT_EQUAL(pp_hpa_sync(&h, S(0), 3, 0), 3); /* minReplicas */
}

/* The scaling-policy example of the documentation: scaleDown with Pods 4 per 60 s and Percent
 * 10 per 60 s, the policy allowing the larger change wins. "if there are 80 replicas and the
 * target has to be scaled down to 10 replicas then during the first step 8 replicas will be
 * reduced. In the next iteration when the number of replicas is 72, 10% of the pods is 7.2 but
 * the number is rounded up to 8" — and with 40 or fewer the Pods policy applies. */
static void test_scale_down_policies(void) {
  pp_hpa_spec sp;
  pp_hpa_spec_defaults(&sp);
  sp.min_replicas = 1;
  sp.max_replicas = 100;
  sp.down.window_ns = 0;
  sp.down.n_policies = 2;
  sp.down.policies[0] = (pp_hpa_rate_policy){PP_HPA_PODS, 4, 60000000000ull};
  sp.down.policies[1] = (pp_hpa_rate_policy){PP_HPA_PERCENT, 10, 60000000000ull};
  pp_hpa h;
  pp_hpa_init(&h, &sp);
  CU_ASSERT_EQUAL(pp_hpa_sync(&h, S(0), 80, 10), 72);
  CU_ASSERT_EQUAL(pp_hpa_sync(&h, S(15), 72, 10), 72); /* the period's budget is spent */
  CU_ASSERT_EQUAL(pp_hpa_sync(&h, S(45), 72, 10), 72);
  CU_ASSERT_EQUAL(pp_hpa_sync(&h, S(60), 72, 10), 64); /* 7.2 rounded up to 8 */
  pp_hpa_init(&h, &sp);
  CU_ASSERT_EQUAL(pp_hpa_sync(&h, S(0), 40, 10), 36); /* 4 pods = 10% of 40 */
  pp_hpa_init(&h, &sp);
  CU_ASSERT_EQUAL(pp_hpa_sync(&h, S(0), 30, 10), 26); /* Pods (4) beats 10% (3) */
  /* selectPolicy: Min takes the smaller change; Disabled never scales down. */
  sp.down.select_min = 1;
  pp_hpa_init(&h, &sp);
  CU_ASSERT_EQUAL(pp_hpa_sync(&h, S(0), 80, 10), 76);
  sp.down.select_min = 0;
  sp.down.disabled = 1;
  pp_hpa_init(&h, &sp);
  CU_ASSERT_EQUAL(pp_hpa_sync(&h, S(0), 80, 10), 80);
}

/* "the stabilization window is used to restrict the flapping of replica count": the highest
 * recommendation of the last 300 s (the default) is used for a scale-down. */
static void test_stabilization(void) {
  pp_hpa_spec sp;
  pp_hpa_spec_defaults(&sp);
  sp.min_replicas = 1;
  sp.max_replicas = 100;
  pp_hpa h;
  pp_hpa_init(&h, &sp);
  CU_ASSERT_EQUAL(pp_hpa_sync(&h, S(0), 10, 10), 10);
  for (int t = 15; t < 300; t += 15)
    CU_ASSERT_EQUAL(pp_hpa_sync(&h, S(t), 10, 4), 10); /* 10 is still in the window */
  CU_ASSERT_EQUAL(pp_hpa_sync(&h, S(300), 10, 4), 4);  /* the 10 at t = 0 has left it */
  /* A recommendation between two older ones: the maximum inside the window wins. */
  pp_hpa_init(&h, &sp);
  CU_ASSERT_EQUAL(pp_hpa_sync(&h, S(0), 10, 10), 10);
  CU_ASSERT_EQUAL(pp_hpa_sync(&h, S(100), 10, 7), 10);
  CU_ASSERT_EQUAL(pp_hpa_sync(&h, S(200), 10, 5), 10);
  CU_ASSERT_EQUAL(pp_hpa_sync(&h, S(301), 10, 5), 7);
  CU_ASSERT_EQUAL(pp_hpa_sync(&h, S(401), 7, 5), 5);
  /* Scale-up window: the lowest recommendation of the window bounds a scale-up. */
  sp.up.window_ns = 60000000000ull;
  sp.down.window_ns = 0;
  pp_hpa_init(&h, &sp);
  CU_ASSERT_EQUAL(pp_hpa_sync(&h, S(0), 4, 4), 4);
  CU_ASSERT_EQUAL(pp_hpa_sync(&h, S(15), 4, 8), 4); /* the 4 at t = 0 holds it */
  CU_ASSERT_EQUAL(pp_hpa_sync(&h, S(30), 4, 6), 4);
  CU_ASSERT_EQUAL(pp_hpa_sync(&h, S(61), 4, 8), 6); /* min of 8, 6, 8 */
}

/* histogram_quantile: buckets le = 1, 2, 4, +Inf with 10 observations each. */
static void test_histogram_quantile(void) {
  const double b[] = {1, 2, 4, INFINITY};
  const double c[] = {10, 20, 30, 40};
  CU_ASSERT_DOUBLE_EQUAL(pp_prom_histogram_quantile(0.5, b, c, 4), 2.0, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(pp_prom_histogram_quantile(0.1, b, c, 4), 0.4, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(pp_prom_histogram_quantile(0.625, b, c, 4), 3.0, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(pp_prom_histogram_quantile(0.95, b, c, 4), 4.0, 1e-12); /* +Inf */
  const double z[] = {0, 0, 0, 0};
  CU_ASSERT(isnan(pp_prom_histogram_quantile(0.95, b, z, 4)));
  /* Rates work the same as counts. */
  const double r[] = {0.5, 1.0, 1.5, 2.0};
  CU_ASSERT_DOUBLE_EQUAL(pp_prom_histogram_quantile(0.5, b, r, 4), 2.0, 1e-12);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("hpa", NULL, NULL);
  CU_add_test(s, "replica ratio and tolerance (documented examples)", test_ratio_examples);
  CU_add_test(s, "scale-up rate policies (defaults)", test_scale_up_policies);
  CU_add_test(s, "scale-down rate policies (documented example)", test_scale_down_policies);
  CU_add_test(s, "stabilization windows", test_stabilization);
  CU_add_test(s, "histogram_quantile", test_histogram_quantile);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned fails = CU_get_number_of_failures();
  CU_cleanup_registry();
  return fails ? 1 : 0;
}
