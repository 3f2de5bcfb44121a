/* Cluster mode (sim/cluster.c) against closed forms, and the claims docs/SCALING.md makes
 * about the shipped cluster scenarios.
 *
 * Closed forms, every host one worker of one thread serving exponential CPU segments (so a
 * host is an M/M/1 server), Poisson arrivals:
 *  - random split over N hosts is N independent M/M/1 queues at λ/N: mean wait ρ/(μ − λ/N);
 *  - least outstanding requests on single-server hosts is join-the-shortest-queue, which is
 *    close to (and never better than) M/M/N with one shared queue (Erlang C);
 *  - power of two choices approaches the supermarket model's limit for large N
 *    (Mitzenmacher): mean time in system Σ_{i≥1} ρ^(2^i − 2) / μ.
 * Sample sizes: at ρ = 0.8 an M/M/1 queue's relaxation time is ~1/(μ(1 − √ρ)²) ≈ 0.9 s, so
 * 2,000 s of traffic holds ~2,000 independent stretches per host and the mean wait is within
 * a few percent; the tolerances below are ~3 standard errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/Basic.h>

#include "sim/cluster.h"
#include "sim/scenario.h"
#include "sim/scenario_file.h"

static int parse(pp_scenario *s, const char *text) {
  pp_scn_error err;
  int rc = pp_scenario_parse(s, text, strlen(text), "test.yaml", &err);
  if (!rc) rc = pp_scenario_validate(s, &err);
  if (rc) printf("\n  %s:%d: %s: %s", err.file, err.line, err.field, err.message);
  return rc;
}

/* N single-thread hosts, exponential 10 ms service (μ = 100/s), utilisation rho. */
static int mm1_fleet(pp_scenario *s, uint32_t n, double rho, const char *balancer, uint32_t seconds,
                     uint64_t seed) {
  char text[2048];
  snprintf(text, sizeof text,
           "name: closed-form\n"
           "seed: %llu\n"
           "arrivals: {phases: [{rate: %.6f, duration: %us}]}\n"
           "requests: [{path: /mix/10/0, cpu: {dist: exponential, mean: 10ms}}]\n"
           "configs: [{name: h, server: pumaplus, workers: 1, threads: 1}]\n"
           "hosts: {config: h, count: %u, cores: 1}\n"
           "clusters: [{name: c, balancer: %s}]\n",
           (unsigned long long)seed, rho * 100.0 * n, seconds, n, balancer);
  return parse(s, text);
}

static double erlang_c_wait(uint32_t c, double lambda, double mu) {
  double a = lambda / mu, rho = a / c;
  double term = 1, sum = 1;
  for (uint32_t k = 1; k < c; k++) {
    term *= a / k;
    sum += term;
  }
  double last = term * a / c; /* a^c / c! */
  double pw = last / (1 - rho) / (sum + last / (1 - rho));
  return pw / (c * mu - lambda);
}

static double run_mean_wait(pp_scenario *s, double *sojourn) {
  pp_cluster_options o;
  pp_cluster_options_default(&o, s);
  o.keep_timeline = 0;
  pp_cluster_result r;
  int rc = pp_cluster_run(s, 0, &o, &r);
  CU_ASSERT_EQUAL(rc, 0);
  double w = r.queue_mean_ns / 1e9;
  if (sojourn) *sojourn = r.mean_ns / 1e9;
  CU_ASSERT_EQUAL(r.unfinished, 0);
  pp_cluster_result_dispose(&r);
  return w;
}

static void test_random_split_is_n_mm1(void) {
  pp_scenario s;
  CU_ASSERT_EQUAL_FATAL(mm1_fleet(&s, 4, 0.8, "random", 2000, 1), 0);
  double w = run_mean_wait(&s, NULL);
  double expect = 0.8 / (100.0 - 80.0); /* 40 ms */
  printf("\n  random split, 4 x M/M/1 at 0.8: mean wait %.2f ms (closed form %.2f)", w * 1e3,
         expect * 1e3);
  CU_ASSERT(fabs(w - expect) / expect < 0.06);
  pp_scenario_dispose(&s);
}

static void test_jsq_close_to_mmn(void) {
  pp_scenario s;
  CU_ASSERT_EQUAL_FATAL(mm1_fleet(&s, 4, 0.8, "least_outstanding", 2000, 2), 0);
  double w = run_mean_wait(&s, NULL);
  double mmn = erlang_c_wait(4, 320, 100);
  printf("\n  least outstanding (JSQ), 4 hosts at 0.8: mean wait %.2f ms (M/M/4 %.2f, 4 x M/M/1 "
         "40.00)",
         w * 1e3, mmn * 1e3);
  /* Never better than one shared queue (3% for noise), and far closer to it than to the
   * random split: JSQ at N = 4 is known to stay within ~1.5x of M/M/N's wait. */
  CU_ASSERT(w > mmn * 0.97);
  CU_ASSERT(w < mmn * 1.6);
  CU_ASSERT(w < 0.4 * 0.040);
  pp_scenario_dispose(&s);
  /* Round robin sits between the two: it removes the arrival variance but not the service's. */
  CU_ASSERT_EQUAL_FATAL(mm1_fleet(&s, 4, 0.8, "round_robin", 2000, 3), 0);
  double rr = run_mean_wait(&s, NULL);
  printf("\n  round robin: %.2f ms", rr * 1e3);
  CU_ASSERT(rr > w && rr < 0.040);
  pp_scenario_dispose(&s);
}

static void test_p2c_supermarket_limit(void) {
  pp_scenario s;
  CU_ASSERT_EQUAL_FATAL(mm1_fleet(&s, 200, 0.9, "p2c", 300, 4), 0);
  double sojourn;
  (void)run_mean_wait(&s, &sojourn);
  double limit = 0;
  for (int i = 1; i < 40; i++)
    limit += pow(0.9, pow(2, i) - 2);
  limit *= 0.010;
  printf("\n  p2c, 200 hosts at 0.9: mean time in system %.2f ms (N -> inf limit %.2f; M/M/1 "
         "100)",
         sojourn * 1e3, limit * 1e3);
  CU_ASSERT(fabs(sojourn - limit) / limit < 0.08);
  pp_scenario_dispose(&s);
}

typedef struct count_ctx {
  uint64_t n;
  uint64_t digest;
} count_ctx;

static void on_req(void *data, const pp_cluster_request *r) {
  count_ctx *c = data;
  c->n++;
  c->digest = (c->digest ^ ((uint64_t)r->done_ns * 31 + r->host)) * 0x100000001b3ull;
}

static int load(pp_scenario *s, const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/scenarios/%s", PP_SOURCE_DIR, name);
  pp_scn_error err;
  int rc = pp_scenario_load(s, path, &err);
  if (rc) printf("\n  %s:%d: %s: %s", err.file, err.line, err.field, err.message);
  return rc;
}

static void test_deterministic(void) {
  pp_scenario s;
  CU_ASSERT_EQUAL_FATAL(load(&s, "cluster-step.yaml"), 0);
  int ci = pp_scenario_find_cluster(&s, "queue5-p2c");
  CU_ASSERT_FATAL(ci >= 0);
  count_ctx a = {0, 1469598103934665603ull}, b = a;
  pp_cluster_options o;
  pp_cluster_options_default(&o, &s);
  o.on_request = on_req;
  o.data = &a;
  pp_cluster_result r1, r2;
  CU_ASSERT_EQUAL(pp_cluster_run(&s, (uint32_t)ci, &o, &r1), 0);
  o.data = &b;
  CU_ASSERT_EQUAL(pp_cluster_run(&s, (uint32_t)ci, &o, &r2), 0);
  CU_ASSERT_EQUAL(a.n, b.n);
  CU_ASSERT_EQUAL(a.digest, b.digest);
  CU_ASSERT_EQUAL(r1.timeline_len, r2.timeline_len);
  CU_ASSERT(r1.timeline_len > 0 &&
            !memcmp(r1.timeline, r2.timeline, r1.timeline_len * sizeof *r1.timeline));
  CU_ASSERT_EQUAL(a.n, r1.requests);
  pp_cluster_result_dispose(&r1);
  pp_cluster_result_dispose(&r2);
  pp_scenario_dispose(&s);
}

static void run_named(pp_scenario *s, const char *name, pp_cluster_result *r) {
  int ci = pp_scenario_find_cluster(s, name);
  CU_ASSERT_FATAL(ci >= 0);
  pp_cluster_options o;
  pp_cluster_options_default(&o, s);
  o.keep_timeline = 1;
  CU_ASSERT_EQUAL(pp_cluster_run(s, (uint32_t)ci, &o, r), 0);
  printf("\n  %-16s p99 %10.1f ms  host_s %7.0f  peak %u  up/dn %u/%u", name, r->p99_ns / 1e6,
         r->host_seconds, r->peak_hosts, r->scale_ups, r->scale_downs);
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Median p99 of a cluster over seeds 1..5, as SCALING.md's tables report it. */
static double median_p99(const pp_scenario *s, const char *name) {
  int ci = pp_scenario_find_cluster(s, name);
  CU_ASSERT_FATAL(ci >= 0);
  double v[5];
  for (int i = 0; i < 5; i++) {
    pp_cluster_options o;
    pp_cluster_options_default(&o, s);
    o.seed = (uint64_t)i + 1;
    o.keep_timeline = 0;
    pp_cluster_result r;
    CU_ASSERT_EQUAL(pp_cluster_run(s, (uint32_t)ci, &o, &r), 0);
    v[i] = r.p99_ns;
    pp_cluster_result_dispose(&r);
  }
  qsort(v, 5, sizeof v[0], cmp_d);
  printf("\n  %-16s median p99 over seeds 1-5: %.1f ms", name, v[2] / 1e6);
  return v[2];
}

/* docs/SCALING.md's table, step scenario: queue-time scaling keeps p99 near the service time
 * while the CPU autoscalers fall behind (at 60% they never scale: this IO-bound app cannot
 * drive a 2-core host past ~40% CPU), and it costs less than provisioning for the peak. */
static void test_step_queue_beats_cpu(void) {
  pp_scenario s;
  CU_ASSERT_EQUAL_FATAL(load(&s, "cluster-step.yaml"), 0);
  pp_cluster_result q, c60, c20, peak;
  /* SCALING.md's recommended cluster, over the table's five seeds: its p99 depends on how
   * many hosts are up when the step comes (2 or 3), so the claim is about the median. */
  CU_ASSERT(median_p99(&s, "queue5+busy50-lor") < 0.150e9);
  CU_ASSERT(median_p99(&s, "cpu20-lor") > 10e9);
  run_named(&s, "queue5-lor", &q);
  run_named(&s, "cpu60-lor", &c60);
  run_named(&s, "cpu20-lor", &c20);
  run_named(&s, "static-peak-lor", &peak);
  CU_ASSERT(q.p99_ns < 0.150e9); /* within the SLO */
  CU_ASSERT(c20.p99_ns > 10 * q.p99_ns);
  CU_ASSERT(c60.p99_ns > 10 * q.p99_ns);
  CU_ASSERT_EQUAL(c60.scale_ups, 0);                   /* the CPU trap */
  CU_ASSERT(q.peak_hosts > peak.peak_hosts);           /* it scaled out past the static fleet ... */
  CU_ASSERT(q.host_seconds < 2.0 * peak.host_seconds); /* ... within 2x its host-seconds */
  /* The hosts booted after the step: fewer than half were up when it came. */
  CU_ASSERT(q.timeline_len > 130 && q.timeline[119].hosts_ready < q.peak_hosts / 2);
  pp_cluster_result_dispose(&q);
  pp_cluster_result_dispose(&c60);
  pp_cluster_result_dispose(&c20);
  pp_cluster_result_dispose(&peak);
  pp_scenario_dispose(&s);
}

/* Diurnal: CPU at a typical 60% target never scales and collapses; queue time holds p99
 * within 10% of the peak-provisioned fleet's. */
static void test_diurnal_queue_vs_cpu(void) {
  pp_scenario s;
  CU_ASSERT_EQUAL_FATAL(load(&s, "cluster-diurnal.yaml"), 0);
  pp_cluster_result q, c60, peak;
  CU_ASSERT(median_p99(&s, "queue5+busy50-lor") < 1.1 * 151.5e6); /* peak fleet's p99 */
  run_named(&s, "queue5-lor", &q);
  run_named(&s, "cpu60-lor", &c60);
  run_named(&s, "static-peak-lor", &peak);
  CU_ASSERT(q.p99_ns < 1.1 * peak.p99_ns);
  CU_ASSERT_EQUAL(c60.scale_ups, 0);
  CU_ASSERT(c60.achieved_rps < 0.5 * q.achieved_rps);
  CU_ASSERT(q.avg_hosts > 2.0 && q.peak_hosts > peak.peak_hosts);
  pp_cluster_result_dispose(&q);
  pp_cluster_result_dispose(&c60);
  pp_cluster_result_dispose(&peak);
  pp_scenario_dispose(&s);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("cluster", NULL, NULL);
  CU_add_test(s, "random split = N x M/M/1", test_random_split_is_n_mm1);
  CU_add_test(s, "least outstanding close to M/M/N", test_jsq_close_to_mmn);
  CU_add_test(s, "power of two choices: supermarket limit", test_p2c_supermarket_limit);
  CU_add_test(s, "deterministic", test_deterministic);
  CU_add_test(s, "step: queue-time scaling beats CPU", test_step_queue_beats_cpu);
  CU_add_test(s, "diurnal: queue time vs CPU", test_diurnal_queue_vs_cpu);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned fails = CU_get_number_of_failures();
  CU_cleanup_registry();
  return fails ? 1 : 0;
}
