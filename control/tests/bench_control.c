/* pp-control-bench: micro-benchmark of pp_hist_record() and pp_decide(). Not a test.
 * Prints ns/call over >= 10^6 calls of each. Usage: pp-control-bench [calls]. */
#include "control/control.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  long calls = argc > 1 ? atol(argv[1]) : 10000000;
  if (calls < 1000000) calls = 1000000;
  static pp_hist h;
  pp_hist_init(&h);
  enum { NV = 4096 };
  static uint64_t values[NV];
  uint64_t x = 88172645463325252ull;
  for (int i = 0; i < NV; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    values[i] = 1000 + x % 2000000000ull; /* 1 us .. 2 s */
  }
  double t0 = now_s();
  for (long i = 0; i < calls; i++)
    pp_hist_record(&h, values[i & (NV - 1)]);
  double t1 = now_s();
  printf("pp_hist_record: %.2f ns/call over %ld calls (p99 %llu)\n",
         (t1 - t0) * 1e9 / (double)calls, calls, (unsigned long long)pp_hist_percentile(&h, 99));

  pp_policy p;
  pp_policy_defaults(&p);
  p.shed_enabled = 1;
  enum { NO = 256 };
  static pp_observation obs[NO];
  for (int i = 0; i < NO; i++) {
    memset(&obs[i], 0, sizeof obs[i]);
    pp_observation *o = &obs[i];
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    o->workers_ready = 1 + (uint32_t)(x % 8);
    o->workers_booting = (x >> 8) % 4 == 0 ? 1 : 0;
    o->threads_per_worker = 5;
    o->slots_ready = o->workers_ready * 5;
    o->slots_busy = (uint32_t)((x >> 16) % (o->slots_ready + 1));
    o->queue_len = (uint32_t)((x >> 24) % 300);
    o->queue_count = 100;
    o->queue_p95_ns = ((x >> 32) % 600) * 1000000ull;
    o->arrival_rate = (double)((x >> 40) % 800);
    o->service_mean_ns = 25000000;
    o->gvl_wait_ns = PP_UNKNOWN_NS;
    o->service_cpu_mean_ns = PP_UNKNOWN_NS;
    o->mem_per_worker_bytes = -1;
  }
  long dcalls = calls / 10 < 1000000 ? 1000000 : calls / 10;
  pp_ctl_state s;
  pp_ctl_state_init(&s, &p, 1, 5);
  unsigned long sink = 0;
  double t2 = now_s();
  for (long i = 0; i < dcalls; i++) {
    pp_observation *o = &obs[i & (NO - 1)];
    o->time_ns = (int64_t)i * 1000000000;
    pp_decision d = pp_decide(&p, &s, o);
    sink += d.action + d.reason[0];
  }
  double t3 = now_s();
  printf("pp_decide: %.1f ns/call over %ld calls (sink %lu)\n", (t3 - t2) * 1e9 / (double)dcalls,
         dcalls, sink);
  return 0;
}
