/* Validation of the engine against queueing theory (closed forms), label `sim`.
 *
 * M/M/c: Erlang C gives the mean wait Wq = C / (c mu - lambda) and the tail
 * P(W > t) = C exp(-(c mu - lambda) t), so the p99 of wait is ln(100 C) / (c mu - lambda).
 * M/D/1: Pollaczek-Khinchine gives Wq = rho D / (2 (1 - rho)).
 *
 * Sample sizes. Waits in a queue are strongly autocorrelated, so the error of a sample mean
 * is far larger than sigma/sqrt(n). Daley (1968) gives the asymptotic variance of the mean of
 * n M/M/1 waits as rho (2 + 5 rho - 4 rho^2 + rho^3) / (mu^2 (1 - rho)^4 n). Relative to
 * Wq = rho / (mu (1 - rho)) that is a relative standard error of sqrt(K / n) with
 * K = 29 at rho 0.5, 124 at 0.8 and 1683 at 0.95. With n = 1M, 2M and 16M requests the
 * relative standard errors are 0.54%, 0.79% and 1.03%, so the 3% tolerance is about 3
 * standard errors or more: a correct engine passes with any seed, while a wrong model (the
 * wrong c, FIFO broken, processor sharing where there should be none) misses by far more.
 * The M/M/c cases with c > 1 wait less often than M/M/1 at the same rho, which only lowers
 * the error. The p99 estimate has similar relative error; the histogram's resolution adds at
 * most 0.4% (bucket midpoint, 128 sub-buckets). A fixed seed keeps the test deterministic. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <CUnit/Basic.h>

#include "sim/engine.h"
#include "sim/scenario.h"

static void build(pp_scenario *s, double lambda, uint64_t n, uint32_t c, pp_dist_kind service,
                  uint64_t service_mean_ns) {
  pp_scenario_defaults(s);
  s->seed = 20261129;
  s->n_phases = 1;
  s->phases[0].rate = s->phases[0].rate_end = lambda;
  s->phases[0].duration_ns = (uint64_t)((double)n / lambda * 1e9);
  s->duration_ns = s->phases[0].duration_ns;
  s->n_kinds = 1;
  snprintf(s->kinds[0].path, sizeof s->kinds[0].path, "/mix");
  s->kinds[0].weight = 1;
  s->kinds[0].cpu.kind = service;
  s->kinds[0].cpu.mean_ns = service_mean_ns;
  s->cores = c;
  s->gvl_timeslice_ns = 3600000000000ull; /* one thread per worker: never sliced */
  s->client_timeout_ns = 60000000000ull;
  s->n_configs = 1;
  pp_config *cfg = &s->configs[0];
  snprintf(cfg->name, sizeof cfg->name, "mmc");
  cfg->server = PP_SERVER_PUMAPLUS;
  cfg->queue = PP_QUEUE_FIFO;
  cfg->workers = c;
  cfg->threads = 1;
}

static double erlang_c(uint32_t c, double a) {
  double term = 1, sum = 0;
  for (uint32_t k = 0; k < c; k++) {
    sum += term;
    term *= a / (k + 1);
  }
  double top = term * c / (c - a); /* term == a^c / c! now */
  return top / (sum + top);
}

static void run_mmc(double rho, uint32_t c, uint64_t n) {
  const double mu = 100.0; /* 10 ms mean service */
  double lambda = rho * c * mu;
  pp_scenario s;
  build(&s, lambda, n, c, PP_DIST_EXPONENTIAL, 10000000);
  pp_sim_options o;
  pp_sim_options_default(&o, &s);
  o.keep_timeline = 0;
  o.keep_decisions = 0;
  pp_sim_result r;
  CU_ASSERT_EQUAL_FATAL(pp_sim_run(&s, 0, &o, &r), 0);
  double C = erlang_c(c, lambda / mu);
  double wq = C / (c * mu - lambda);
  double p99 = log(100 * C) / (c * mu - lambda);
  double got_mean = r.queue_sum_ns / (double)r.queue_count / 1e9;
  double got_p99 = (double)pp_hist_percentile(&r.queue, 99) / 1e9;
  printf("\n  M/M/%u rho %.2f: n %llu, Wq %.4fms (Erlang C %.4fms, %+.2f%%), p99 %.3fms (%.3fms, "
         "%+.2f%%), %.1f M events",
         c, rho, (unsigned long long)r.queue_count, got_mean * 1e3, wq * 1e3,
         100 * (got_mean / wq - 1), got_p99 * 1e3, p99 * 1e3, 100 * (got_p99 / p99 - 1),
         r.events / 1e6);
  CU_ASSERT(r.queue_count >= n * 99 / 100);
  CU_ASSERT(fabs(got_mean / wq - 1) < 0.03);
  CU_ASSERT(fabs(got_p99 / p99 - 1) < 0.03);
  pp_sim_result_dispose(&r);
  pp_scenario_dispose(&s);
}

static void test_mmc_rho050(void) {
  run_mmc(0.5, 2, 1000000);
}
static void test_mmc_rho080(void) {
  run_mmc(0.8, 4, 2000000);
}
static void test_mmc_rho095(void) {
  run_mmc(0.95, 8, 16000000);
}

static void run_md1(double rho, uint64_t n) {
  const double D = 0.010;
  double lambda = rho / D;
  pp_scenario s;
  build(&s, lambda, n, 1, PP_DIST_FIXED, 10000000);
  pp_sim_options o;
  pp_sim_options_default(&o, &s);
  o.keep_timeline = 0;
  o.keep_decisions = 0;
  pp_sim_result r;
  CU_ASSERT_EQUAL_FATAL(pp_sim_run(&s, 0, &o, &r), 0);
  double wq = rho * D / (2 * (1 - rho));
  double got = r.queue_sum_ns / (double)r.queue_count / 1e9;
  printf("\n  M/D/1 rho %.2f: n %llu, Wq %.4fms (P-K %.4fms, %+.2f%%)", rho,
         (unsigned long long)r.queue_count, got * 1e3, wq * 1e3, 100 * (got / wq - 1));
  CU_ASSERT(fabs(got / wq - 1) < 0.03);
  pp_sim_result_dispose(&r);
  pp_scenario_dispose(&s);
}

/* M/D/1 waits vary less than M/M/1 at the same rho (about half the variance constant), so
 * the M/M/1 sizes above are conservative here. */
static void test_md1_rho050(void) {
  run_md1(0.5, 1000000);
}
static void test_md1_rho080(void) {
  run_md1(0.8, 2000000);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("validation", NULL, NULL);
  CU_add_test(s, "M/M/2 at rho 0.5 vs Erlang C", test_mmc_rho050);
  CU_add_test(s, "M/M/4 at rho 0.8 vs Erlang C", test_mmc_rho080);
  CU_add_test(s, "M/M/8 at rho 0.95 vs Erlang C", test_mmc_rho095);
  CU_add_test(s, "M/D/1 at rho 0.5 vs Pollaczek-Khinchine", test_md1_rho050);
  CU_add_test(s, "M/D/1 at rho 0.8 vs Pollaczek-Khinchine", test_md1_rho080);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned fails = CU_get_number_of_failures();
  CU_cleanup_registry();
  return fails ? 1 : 0;
}
