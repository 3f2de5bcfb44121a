/* Tests for control/observation.c: the builder maps histograms and counters to a tick's
 * observation, and the predicted wait follows the formula in observation.h. */
#include "control/control.h"
#include "test_util.h"

#include <string.h>

static pp_hist qwin, swin, slife;

static pp_obs_input base_input(void) {
  pp_obs_input in;
  memset(&in, 0, sizeof in);
  in.tick = 7;
  in.now_ns = 7000000000;
  in.window_ns = 1000000000;
  in.queue_window = &qwin;
  in.service_window = &swin;
  in.service_lifetime = &slife;
  in.queue_len = 3;
  in.slots_ready = 10;
  in.slots_busy = 9;
  in.workers_ready = 2;
  in.workers_booting = 1;
  in.workers_retiring = 0;
  in.threads_per_worker = 5;
  in.arrivals = 250;
  in.completions = 240;
  in.shed = 4;
  in.timeouts = 2;
  in.service_cpu_mean_ns = 5000000;
  in.gvl_wait_ns = PP_UNKNOWN_NS;
  in.mem_per_worker_bytes = -1;
  return in;
}

static void test_build_fields(void) {
  pp_hist_init(&qwin);
  pp_hist_init(&swin);
  pp_hist_init(&slife);
  for (int i = 1; i <= 100; i++)
    pp_hist_record(&qwin, (uint64_t)i * 1000000); /* 1..100 ms */
  for (int i = 0; i < 10; i++)
    pp_hist_record(&swin, 20000000 + (uint64_t)i * 1000000);
  pp_obs_input in = base_input();
  pp_observation o;
  CU_ASSERT_EQUAL_FATAL(pp_observation_build(&o, &in), 0);
  CU_ASSERT_EQUAL(o.tick, 7);
  CU_ASSERT_EQUAL(o.time_ns, 7000000000);
  CU_ASSERT_EQUAL(o.window_ns, 1000000000);
  CU_ASSERT_EQUAL(o.queue_p50_ns, pp_hist_percentile(&qwin, 50));
  CU_ASSERT(o.queue_p95_ns >= 94000000 && o.queue_p95_ns <= 96000000);
  CU_ASSERT(o.queue_p99_ns >= 98000000 && o.queue_p99_ns <= 100000000);
  CU_ASSERT_EQUAL(o.queue_max_ns, 100000000);
  CU_ASSERT_EQUAL(o.queue_count, 100);
  CU_ASSERT_EQUAL(o.queue_len, 3);
  CU_ASSERT_EQUAL(o.slots_ready, 10);
  CU_ASSERT_EQUAL(o.slots_busy, 9);
  CU_ASSERT_EQUAL(o.workers_ready, 2);
  CU_ASSERT_EQUAL(o.workers_booting, 1);
  CU_ASSERT_EQUAL(o.threads_per_worker, 5);
  CU_ASSERT_EQUAL(o.arrivals, 250);
  CU_ASSERT_EQUAL(o.completions, 240);
  CU_ASSERT_DOUBLE_EQUAL(o.arrival_rate, 250.0, 1e-9);
  CU_ASSERT_EQUAL(o.service_mean_ns, 24500000);
  CU_ASSERT_EQUAL(o.service_p95_ns, pp_hist_percentile(&swin, 95));
  CU_ASSERT_EQUAL(o.service_cpu_mean_ns, 5000000);
  CU_ASSERT_EQUAL(o.gvl_wait_ns, PP_UNKNOWN_NS);
  CU_ASSERT_EQUAL(o.mem_per_worker_bytes, -1);
  CU_ASSERT_EQUAL(o.shed, 4);
  CU_ASSERT_EQUAL(o.timeouts, 2);
  CU_ASSERT_EQUAL(o.ractor_cores, 0); /* thread slots */
  in.ractor_cores = 4;                /* Ractor slots on 4 cores: passed through */
  CU_ASSERT_EQUAL_FATAL(pp_observation_build(&o, &in), 0);
  CU_ASSERT_EQUAL(o.ractor_cores, 4);
}

static void test_build_rate_uses_window(void) {
  pp_hist_init(&qwin);
  pp_hist_init(&swin);
  pp_obs_input in = base_input();
  in.window_ns = 250000000; /* 250 ms */
  in.arrivals = 100;
  pp_observation o;
  CU_ASSERT_EQUAL_FATAL(pp_observation_build(&o, &in), 0);
  CU_ASSERT_DOUBLE_EQUAL(o.arrival_rate, 400.0, 1e-9);
  /* Nothing dispatched: the queue percentiles are 0, not stale. */
  CU_ASSERT_EQUAL(o.queue_p95_ns, 0);
  CU_ASSERT_EQUAL(o.queue_max_ns, 0);
  CU_ASSERT_EQUAL(o.queue_count, 0);
}

static void test_build_service_fallback(void) {
  pp_hist_init(&qwin);
  pp_hist_init(&swin);
  pp_hist_init(&slife);
  pp_hist_record(&slife, 30000000);
  pp_hist_record(&slife, 50000000);
  pp_obs_input in = base_input();
  pp_observation o;
  CU_ASSERT_EQUAL_FATAL(pp_observation_build(&o, &in), 0);
  CU_ASSERT_EQUAL(o.service_mean_ns, 40000000);
  CU_ASSERT(o.service_p95_ns >= 49500000 && o.service_p95_ns <= 50000000);
  in.service_lifetime = NULL;
  CU_ASSERT_EQUAL_FATAL(pp_observation_build(&o, &in), 0);
  CU_ASSERT_EQUAL(o.service_mean_ns, 0);
  /* Window wins over lifetime when it has samples. */
  pp_hist_record(&swin, 10000000);
  in.service_lifetime = &slife;
  CU_ASSERT_EQUAL_FATAL(pp_observation_build(&o, &in), 0);
  CU_ASSERT_EQUAL(o.service_mean_ns, 10000000);
}

static void test_build_unknowns_normalised(void) {
  pp_hist_init(&qwin);
  pp_hist_init(&swin);
  pp_obs_input in = base_input();
  in.gvl_wait_ns = -77;
  in.service_cpu_mean_ns = -3;
  in.mem_per_worker_bytes = -9;
  pp_observation o;
  CU_ASSERT_EQUAL_FATAL(pp_observation_build(&o, &in), 0);
  CU_ASSERT_EQUAL(o.gvl_wait_ns, PP_UNKNOWN_NS);
  CU_ASSERT_EQUAL(o.service_cpu_mean_ns, PP_UNKNOWN_NS);
  CU_ASSERT_EQUAL(o.mem_per_worker_bytes, -1);
  in.gvl_wait_ns = 0; /* a measured zero stays zero */
  CU_ASSERT_EQUAL_FATAL(pp_observation_build(&o, &in), 0);
  CU_ASSERT_EQUAL(o.gvl_wait_ns, 0);
}

static void test_build_rejects(void) {
  pp_hist_init(&qwin);
  pp_hist_init(&swin);
  pp_observation o, before;
  memset(&o, 0xab, sizeof o);
  before = o;
  pp_obs_input in = base_input();
  in.window_ns = 0;
  CU_ASSERT_EQUAL(pp_observation_build(&o, &in), PP_CTL_EINVAL);
  in = base_input();
  in.queue_window = NULL;
  CU_ASSERT_EQUAL(pp_observation_build(&o, &in), PP_CTL_EINVAL);
  in = base_input();
  in.service_window = NULL;
  CU_ASSERT_EQUAL(pp_observation_build(&o, &in), PP_CTL_EINVAL);
  CU_ASSERT_EQUAL(pp_observation_build(&o, NULL), PP_CTL_EINVAL);
  CU_ASSERT_EQUAL(pp_observation_build(NULL, &in), PP_CTL_EINVAL);
  CU_ASSERT_EQUAL(memcmp(&o, &before, sizeof o), 0);
}

static pp_observation wait_obs(uint32_t ready, uint32_t busy, uint32_t len, uint64_t s) {
  pp_observation o;
  memset(&o, 0, sizeof o);
  o.slots_ready = ready;
  o.slots_busy = busy;
  o.queue_len = len;
  o.service_mean_ns = s;
  return o;
}

static void test_predicted_wait(void) {
  pp_observation o = wait_obs(0, 0, 5, 25000000);
  CU_ASSERT_EQUAL(pp_observation_predicted_wait(&o), UINT64_MAX);
  o = wait_obs(10, 4, 5, 25000000); /* 6 free, 5 waiting: a slot takes it at once */
  CU_ASSERT_EQUAL(pp_observation_predicted_wait(&o), 0);
  o = wait_obs(10, 4, 6, 25000000); /* 6 free, 6 waiting: (6-6+1)*S/c */
  CU_ASSERT_EQUAL(pp_observation_predicted_wait(&o), 2500000);
  o = wait_obs(5, 5, 500, 25000000); /* none free: (L+1)*S/c = 501*25ms/5 */
  CU_ASSERT_EQUAL(pp_observation_predicted_wait(&o), 2505000000ull);
  o = wait_obs(5, 9, 0, 25000000); /* busy > ready (a race): no slot free, (0+1)*S/c */
  CU_ASSERT_EQUAL(pp_observation_predicted_wait(&o), 5000000);
  o = wait_obs(3, 3, 2, 10); /* integer division: 3*10/3 */
  CU_ASSERT_EQUAL(pp_observation_predicted_wait(&o), 10);
  o = wait_obs(1, 1, UINT32_MAX, UINT64_MAX); /* saturates below the "no capacity" marker */
  CU_ASSERT_EQUAL(pp_observation_predicted_wait(&o), UINT64_MAX - 1);
  o = wait_obs(4, 4, 10, 0); /* no service time known yet: 0, not a guess */
  CU_ASSERT_EQUAL(pp_observation_predicted_wait(&o), 0);
}

/* The concurrency signal: per-worker CPU shares from the caller's CPU-time deltas; without
 * them every CPU field is unknown (-1), never 0; negative entries are skipped. */
static void test_build_cpu_share(void) {
  pp_hist_init(&qwin);
  pp_hist_init(&swin);
  pp_hist_init(&slife);
  pp_obs_input in = base_input();
  pp_observation o;
  CU_ASSERT_EQUAL_FATAL(pp_observation_build(&o, &in), 0);
  CU_ASSERT_EQUAL(o.cpu_share_mean, -1.0);
  CU_ASSERT_EQUAL(o.cpu_share_max, -1.0);
  CU_ASSERT_EQUAL(o.cpu_workers, 0);
  CU_ASSERT_EQUAL(o.cpu_per_request_ns, -1);
  CU_ASSERT_EQUAL(o.gvl_wait_ns, PP_UNKNOWN_NS);
  /* Two workers over a 1 s window: 80 ms and 400 ms of CPU; one unread (-1). */
  int64_t cpu[3] = {80000000, -1, 400000000};
  in.worker_cpu_ns = cpu;
  in.n_worker_cpu = 3;
  CU_ASSERT_EQUAL_FATAL(pp_observation_build(&o, &in), 0);
  CU_ASSERT_DOUBLE_EQUAL(o.cpu_share_mean, 0.24, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(o.cpu_share_max, 0.40, 1e-12);
  CU_ASSERT_EQUAL(o.cpu_workers, 2);
  /* 480 ms of CPU over 240 completions (both ready workers covered): 2 ms a request. */
  CU_ASSERT_EQUAL(o.cpu_per_request_ns, 2000000);
  /* A measured zero stays zero. */
  int64_t idle[1] = {0};
  in.worker_cpu_ns = idle;
  in.n_worker_cpu = 1;
  CU_ASSERT_EQUAL_FATAL(pp_observation_build(&o, &in), 0);
  CU_ASSERT_EQUAL(o.cpu_share_max, 0.0);
  CU_ASSERT_EQUAL(o.cpu_workers, 1);
}

int pp_test_register(void) {
  static const test_case cases[] = {
      {"builder copies and derives every field", test_build_fields},
      {"arrival rate uses the window length", test_build_rate_uses_window},
      {"service time falls back to lifetime", test_build_service_fallback},
      {"negative unknowns normalised", test_build_unknowns_normalised},
      {"builder rejects bad input, leaves output", test_build_rejects},
      {"predicted wait formula", test_predicted_wait},
      {"CPU share per worker, unknown without it", test_build_cpu_share},
      {NULL, NULL},
  };
  return register_suite("observation", cases);
}
