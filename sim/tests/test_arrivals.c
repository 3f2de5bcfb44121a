/* Arrival schedules: rates, spacing, ramps, kinds, traces, and the determinism contract
 * pp-bench relies on (same seed same schedule; service and weights never move times). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <CUnit/Basic.h>

#include "sim/arrivals.h"

static void base(pp_scenario *s) {
  pp_scenario_defaults(s);
  s->seed = 11;
  s->n_kinds = 1;
  snprintf(s->kinds[0].path, sizeof s->kinds[0].path, "/hello");
  s->kinds[0].weight = 1;
  s->kinds[0].cpu.kind = PP_DIST_EXPONENTIAL;
  s->kinds[0].cpu.mean_ns = 1000000;
}

static void phase(pp_scenario *s, double rate, double to, double secs) {
  pp_phase *p = &s->phases[s->n_phases++];
  p->rate = rate;
  p->rate_end = to;
  p->has_ramp = rate != to;
  p->duration_ns = (uint64_t)(secs * 1e9);
  s->duration_ns += p->duration_ns;
}

static size_t count_in(const pp_schedule *sc, double from_s, double to_s) {
  size_t n = 0;
  for (size_t i = 0; i < sc->n; i++) {
    double t = sc->items[i].t_ns / 1e9;
    if (t >= from_s && t < to_s) n++;
  }
  return n;
}

/* Poisson counts per phase within 4 standard deviations (sqrt of the mean). */
static void test_poisson_rates(void) {
  pp_scenario s;
  base(&s);
  phase(&s, 60, 60, 30);
  phase(&s, 700, 700, 60);
  phase(&s, 60, 60, 30);
  pp_schedule sc;
  CU_ASSERT_EQUAL_FATAL(pp_schedule_build(&sc, &s, s.seed), 0);
  double expect[3] = {1800, 42000, 1800};
  size_t got[3] = {count_in(&sc, 0, 30), count_in(&sc, 30, 90), count_in(&sc, 90, 120)};
  for (int i = 0; i < 3; i++)
    CU_ASSERT(fabs(got[i] - expect[i]) < 4 * sqrt(expect[i]));
  CU_ASSERT_EQUAL(got[0] + got[1] + got[2], sc.n);
  /* Gaps inside the long phase: mean 1/700 s and coefficient of variation 1 (exponential). */
  double sum = 0, sum2 = 0;
  size_t n = 0;
  for (size_t i = 1; i < sc.n; i++) {
    if (sc.items[i - 1].t_ns < 31000000000ll || sc.items[i].t_ns > 89000000000ll) continue;
    double g = (sc.items[i].t_ns - sc.items[i - 1].t_ns) / 1e9;
    sum += g, sum2 += g * g, n++;
  }
  double mean = sum / n, cv = sqrt(sum2 / n - mean * mean) / mean;
  CU_ASSERT(fabs(mean * 700 - 1) < 0.03);
  CU_ASSERT(fabs(cv - 1) < 0.03);
  for (size_t i = 1; i < sc.n; i++)
    CU_ASSERT_FATAL(sc.items[i].t_ns >= sc.items[i - 1].t_ns);
  CU_ASSERT(sc.items[sc.n - 1].t_ns < 120000000000ll);
  pp_schedule_dispose(&sc);
}

static void test_uniform_and_ramps(void) {
  pp_scenario s;
  base(&s);
  s.process = PP_ARRIVALS_UNIFORM;
  phase(&s, 10, 10, 1);
  phase(&s, 0, 100, 10); /* integrated rate: 500 */
  pp_schedule sc;
  CU_ASSERT_EQUAL_FATAL(pp_schedule_build(&sc, &s, 1), 0);
  CU_ASSERT_EQUAL_FATAL(sc.n, 10 + 500);
  for (int i = 0; i < 10; i++)
    CU_ASSERT_EQUAL(sc.items[i].t_ns, i * 100000000ll);
  /* In a linear ramp from 0, the first half of the time holds a quarter of the arrivals. */
  CU_ASSERT_EQUAL(count_in(&sc, 1, 6), 125);
  pp_schedule_dispose(&sc);

  pp_scenario p;
  base(&p);
  phase(&p, 0, 200, 20); /* Poisson ramp by thinning: 2000 expected, 500 in the first half */
  CU_ASSERT_EQUAL_FATAL(pp_schedule_build(&sc, &p, 3), 0);
  CU_ASSERT(fabs((double)sc.n - 2000) < 4 * sqrt(2000));
  CU_ASSERT(fabs((double)count_in(&sc, 0, 10) - 500) < 4 * sqrt(500));
  pp_schedule_dispose(&sc);
}

static void test_determinism_contract(void) {
  pp_scenario s;
  base(&s);
  phase(&s, 300, 300, 10);
  s.n_kinds = 2;
  s.kinds[1] = s.kinds[0];
  snprintf(s.kinds[1].path, sizeof s.kinds[1].path, "/mix/5/20");
  s.kinds[0].weight = 3;
  pp_schedule a, b, c;
  CU_ASSERT_EQUAL_FATAL(pp_schedule_build(&a, &s, 5), 0);
  CU_ASSERT_EQUAL_FATAL(pp_schedule_build(&b, &s, 5), 0);
  CU_ASSERT_EQUAL_FATAL(pp_schedule_build(&c, &s, 6), 0);
  CU_ASSERT_EQUAL(pp_schedule_digest(&a), pp_schedule_digest(&b));
  CU_ASSERT_EQUAL_FATAL(a.n, b.n);
  CU_ASSERT(memcmp(a.items, b.items, a.n * sizeof *a.items) == 0);
  CU_ASSERT_NOT_EQUAL(pp_schedule_digest(&a), pp_schedule_digest(&c));
  CU_ASSERT(a.n != c.n || a.items[0].t_ns != c.items[0].t_ns);
  /* Kinds by weight: 3:1 within 4 sigma. */
  size_t k0 = 0;
  for (size_t i = 0; i < a.n; i++)
    k0 += a.items[i].kind == 0;
  double p = 0.75, sd = sqrt(a.n * p * (1 - p));
  CU_ASSERT(fabs(k0 - a.n * p) < 4 * sd);
  /* Streaming gives the same sequence as the array. */
  pp_arrivals st;
  CU_ASSERT_EQUAL_FATAL(pp_arrivals_init(&st, &s, 5), 0);
  pp_arrival x;
  size_t i = 0, same = 0;
  while (pp_arrivals_next(&st, &x)) {
    if (i < a.n && memcmp(&x, &a.items[i], sizeof x) == 0) same++;
    i++;
  }
  pp_arrivals_dispose(&st);
  CU_ASSERT_EQUAL(i, a.n);
  CU_ASSERT_EQUAL(same, a.n);
  /* Changing the service model or the weights never moves an arrival time. */
  s.kinds[0].cpu.mean_ns = 7000000;
  s.kinds[1].io.kind = PP_DIST_LOGNORMAL;
  s.kinds[1].io.mean_ns = 20000000;
  s.kinds[1].io.sd_ns = 5000000;
  s.kinds[0].weight = 1;
  pp_schedule_dispose(&b);
  CU_ASSERT_EQUAL_FATAL(pp_schedule_build(&b, &s, 5), 0);
  CU_ASSERT_EQUAL_FATAL(b.n, a.n);
  size_t same_t = 0, same_all = 0;
  for (size_t k = 0; k < a.n; k++) {
    same_t += a.items[k].t_ns == b.items[k].t_ns;
    same_all += memcmp(&a.items[k], &b.items[k], sizeof x) == 0;
  }
  CU_ASSERT_EQUAL(same_t, a.n);
  CU_ASSERT(same_all < a.n);
  pp_schedule_dispose(&a);
  pp_schedule_dispose(&b);
  pp_schedule_dispose(&c);
}

static void test_trace_process(void) {
  pp_scenario s;
  base(&s);
  s.process = PP_ARRIVALS_TRACE;
  pp_scn_error err;
  const char *t = "0.1\n0.2\n0.2\n1.5\n";
  CU_ASSERT_EQUAL_FATAL(pp_scenario_parse_trace(&s, t, strlen(t), "t", &err), 0);
  pp_schedule sc;
  CU_ASSERT_EQUAL_FATAL(pp_schedule_build(&sc, &s, 1), 0);
  CU_ASSERT_EQUAL_FATAL(sc.n, 4);
  CU_ASSERT_EQUAL(sc.items[0].t_ns, 100000000);
  CU_ASSERT_EQUAL(sc.items[3].t_ns, 1500000000);
  pp_schedule_dispose(&sc);
  pp_scenario_dispose(&s);
}

static void test_dist_draws(void) {
  gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
  gsl_rng_set(r, 1);
  pp_dist d = {PP_DIST_LOGNORMAL, 20000000, 5000000, 0, 0};
  double sum = 0, sum2 = 0;
  int n = 200000;
  for (int i = 0; i < n; i++) {
    double v = (double)pp_dist_draw(&d, r);
    sum += v, sum2 += v * v;
  }
  double mean = sum / n, sd = sqrt(sum2 / n - mean * mean);
  CU_ASSERT(fabs(mean / 20e6 - 1) < 0.01);
  CU_ASSERT(fabs(sd / 5e6 - 1) < 0.03);
  pp_dist u = {PP_DIST_UNIFORM, 0, 0, 1000, 2000};
  for (int i = 0; i < 1000; i++) {
    uint64_t v = pp_dist_draw(&u, r);
    CU_ASSERT(v >= 1000 && v <= 2000);
  }
  pp_dist f = {PP_DIST_FIXED, 42, 0, 0, 0};
  CU_ASSERT_EQUAL(pp_dist_draw(&f, r), 42);
  gsl_rng_free(r);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("arrivals", NULL, NULL);
  CU_add_test(s, "poisson rates and gaps", test_poisson_rates);
  CU_add_test(s, "uniform spacing and ramps", test_uniform_and_ramps);
  CU_add_test(s, "determinism contract", test_determinism_contract);
  CU_add_test(s, "trace process", test_trace_process);
  CU_add_test(s, "distribution draws", test_dist_draws);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned fails = CU_get_number_of_failures();
  CU_cleanup_registry();
  return fails ? 1 : 0;
}
