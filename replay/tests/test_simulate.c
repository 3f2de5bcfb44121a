/* Tests for replay/simulate.c: a log becomes a scenario whose trace has exactly the logged
 * arrivals inside each logged window, whose service model has the logged mean, and whose
 * configs carry the logged and the tuned policy; and the simulator runs it. */
#include "replay/simulate.h"

#include <CUnit/Basic.h>
#include <math.h>
#include <string.h>

static pp_replay_log log_;
static pp_declog_record recs[20];

static void make_log(void) {
  memset(&log_, 0, sizeof log_);
  memset(recs, 0, sizeof recs);
  pp_policy p;
  pp_policy_defaults(&p);
  for (int i = 0; i < 20; i++) {
    pp_declog_record *r = &recs[i];
    r->tick = (uint64_t)i;
    r->time_ns = (int64_t)(i + 1) * 1000000000 + 5000000000; /* the log starts at t = 5 s */
    r->policy_hash = pp_policy_hash(&p);
    r->obs.window_ns = 1000000000;
    r->obs.arrivals = i < 10 ? 50 : 300;
    r->obs.completions = r->obs.arrivals;
    r->obs.service_mean_ns = i < 10 ? 20000000 : 30000000;
    r->obs.service_p95_ns = r->obs.service_mean_ns * 2;
    r->obs.service_cpu_mean_ns = i < 10 ? PP_UNKNOWN_NS : 6000000;
    r->obs.workers_ready = 2;
    r->obs.threads_per_worker = 4;
  }
  log_.recs = recs;
  log_.n = 20;
}

static void test_build(void) {
  make_log();
  pp_policy logged, tuned;
  pp_policy_defaults(&logged);
  tuned = logged;
  tuned.max_step = 8;
  pp_replay_sim_options opt = {7, 4, -1.0};
  pp_scenario scn;
  pp_replay_workload w;
  char err[256];
  CU_ASSERT_EQUAL_FATAL(
      pp_replay_build_scenario(&log_, &logged, &tuned, &opt, &scn, &w, err, sizeof err), 0);
  CU_ASSERT_EQUAL(scn.process, PP_ARRIVALS_TRACE);
  CU_ASSERT_EQUAL(scn.trace_len, 10 * 50 + 10 * 300);
  CU_ASSERT_EQUAL(w.arrivals, 3500);
  CU_ASSERT_EQUAL(scn.duration_ns, 20000000000ull);
  CU_ASSERT_EQUAL(scn.cores, 4);
  size_t in_first_half = 0;
  int sorted = 1;
  for (size_t i = 0; i < scn.trace_len; i++) {
    CU_ASSERT(scn.trace_ns[i] >= 0 && scn.trace_ns[i] < 20000000000ll);
    if (scn.trace_ns[i] < 10000000000ll) in_first_half++;
    if (i && scn.trace_ns[i] < scn.trace_ns[i - 1]) sorted = 0;
  }
  CU_ASSERT(sorted);
  CU_ASSERT_EQUAL(in_first_half, 500);
  /* Completion-weighted: (500 * 20 ms + 3000 * 30 ms) / 3500. */
  CU_ASSERT_DOUBLE_EQUAL(w.service_mean_ns, (500 * 20e6 + 3000 * 30e6) / 3500, 1);
  /* CPU share only from ticks that measured it: 6 / 30. */
  CU_ASSERT_DOUBLE_EQUAL(w.cpu_share, 0.2, 1e-12);
  CU_ASSERT(w.cpu_share_from_log);
  double mean = (double)scn.kinds[0].cpu.mean_ns + (double)scn.kinds[0].io.mean_ns;
  CU_ASSERT(fabs(mean - w.service_mean_ns) <= 2);
  CU_ASSERT_EQUAL(scn.n_configs, 2);
  CU_ASSERT_EQUAL(scn.configs[0].workers, 2);
  CU_ASSERT_EQUAL(scn.configs[0].threads, 4);
  CU_ASSERT_EQUAL(pp_policy_hash(&scn.configs[0].policy), pp_policy_hash(&logged));
  CU_ASSERT_EQUAL(pp_policy_hash(&scn.configs[1].policy), pp_policy_hash(&tuned));
  /* The same seed places the same arrivals. */
  pp_scenario again;
  CU_ASSERT_EQUAL_FATAL(
      pp_replay_build_scenario(&log_, &logged, NULL, &opt, &again, &w, err, sizeof err), 0);
  CU_ASSERT_EQUAL(again.n_configs, 1);
  CU_ASSERT_EQUAL(memcmp(again.trace_ns, scn.trace_ns, scn.trace_len * sizeof(int64_t)), 0);
  /* And the simulator accepts it. */
  pp_sim_options so;
  pp_sim_options_default(&so, &scn);
  so.keep_decisions = 0;
  so.keep_timeline = 0;
  pp_sim_result res;
  memset(&res, 0, sizeof res);
  CU_ASSERT_EQUAL(pp_sim_run(&scn, 0, &so, &res), 0);
  CU_ASSERT_EQUAL(res.summary.requests, 3500);
  pp_sim_result_dispose(&res);
  pp_scenario_dispose(&again);
  pp_scenario_dispose(&scn);
}

static void test_rejects(void) {
  make_log();
  pp_policy p;
  pp_policy_defaults(&p);
  pp_replay_sim_options opt = {1, 0, 0.3};
  pp_scenario scn;
  pp_replay_workload w;
  char err[256];
  for (int i = 0; i < 20; i++)
    recs[i].obs.completions = 0;
  CU_ASSERT_EQUAL(pp_replay_build_scenario(&log_, &p, NULL, &opt, &scn, &w, err, sizeof err), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "no completions"));
  pp_scenario_dispose(&scn);
  log_.n = 0;
  CU_ASSERT_EQUAL(pp_replay_build_scenario(&log_, &p, NULL, &opt, &scn, &w, err, sizeof err), -1);
  pp_scenario_dispose(&scn);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 2;
  CU_pSuite s = CU_add_suite("simulate", NULL, NULL);
  if (!s || !CU_add_test(s, "log to scenario", test_build) ||
      !CU_add_test(s, "rejects logs it cannot model", test_rejects)) {
    CU_cleanup_registry();
    return 2;
  }
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failures = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}
