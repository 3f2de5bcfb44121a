/* Tests for control/decide.c. Each policy rule has a test that fails if the rule is removed:
 * breach -> spawn, the settled gate, cooldown, hysteresis, calm -> retire one, bounds,
 * multi-unit sizing for a 12x step, unknown GVL never adds a thread, shedding on/off; plus
 * determinism (same sequence twice -> same decisions and byte-identical states). */
#include "control/control.h"
#include "test_util.h"

#include <string.h>

#define MS 1000000ull
#define S  1000000000ull

/* An observation for tick t: `workers` ready with `tpw` threads each, `booting` on the way,
 * `rate` arrivals/s with mean service `svc`, queue p95 `p95`, queue length L, `busy` slots. */
static pp_observation mk(uint64_t t, uint32_t workers, uint32_t booting, uint32_t tpw, double rate,
                         uint64_t svc, uint64_t p95, uint32_t len, uint32_t busy) {
  pp_observation o;
  memset(&o, 0, sizeof o);
  o.tick = t;
  o.time_ns = (int64_t)(t * S);
  o.window_ns = S;
  o.queue_p50_ns = p95 / 2;
  o.queue_p95_ns = p95;
  o.queue_p99_ns = p95 + p95 / 10;
  o.queue_max_ns = p95 * 2;
  o.queue_count = (uint64_t)rate;
  o.queue_len = len;
  o.slots_ready = workers * tpw;
  o.slots_busy = busy;
  o.workers_ready = workers;
  o.workers_booting = booting;
  o.threads_per_worker = tpw;
  o.arrivals = (uint64_t)rate;
  o.completions = (uint64_t)rate;
  o.arrival_rate = rate;
  o.service_mean_ns = svc;
  o.service_p95_ns = svc * 2;
  o.service_cpu_mean_ns = PP_UNKNOWN_NS;
  o.gvl_wait_ns = PP_UNKNOWN_NS;
  o.mem_per_worker_bytes = -1;
  return o;
}

static pp_policy P;
static pp_ctl_state st;

static void setup(uint32_t workers, uint32_t threads) {
  pp_policy_defaults(&P);
  pp_ctl_state_init(&st, &P, workers, threads);
}

/* A breaching tick for 2 workers x 5 threads: 320 rps at 25 ms is 8 slots of work, more
 * than 70% of 10; p95 80 ms is over the 50 ms target but under the 200 ms severe tier. */
static pp_observation breaching(uint64_t t) {
  return mk(t, 2, 0, 5, 320, 25 * MS, 80 * MS, 4, 10);
}

static void test_breach_spawns(void) {
  setup(2, 5);
  pp_observation o = breaching(1);
  pp_decision d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_NONE); /* 1 tick of 2 */
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "for 1 tick of 2"));
  CU_ASSERT_EQUAL(st.breach_ticks, 1);
  o = breaching(2);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_SPAWN_WORKER);
  CU_ASSERT(d.count >= 1);
  CU_ASSERT_EQUAL(d.workers_target, 2 + d.count);
  CU_ASSERT_EQUAL(st.workers_wanted, 2 + d.count);
  CU_ASSERT_EQUAL(st.last_spawn_ns, (int64_t)(2 * S));
  CU_ASSERT_EQUAL(st.breach_ticks, 0);
  CU_ASSERT_NSTRING_EQUAL(d.reason, "spawn_worker x", 14);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "queue p95 80ms over target 50ms for 2 ticks"));
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "2 workers ready, 0 booting"));
}

static void test_severe_acts_first_tick(void) {
  setup(1, 5);
  pp_observation o = mk(1, 1, 0, 5, 300, 25 * MS, 503 * MS, 40, 5);
  pp_decision d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_SPAWN_WORKER);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "queue p95 503ms over severe 200ms for 1 tick"));
  /* A severe breach from the predicted wait names the wait, not a p95 under the tier:
   * (40 + 1) x 25 ms / 5 slots = 205 ms over severe 200 ms while p95 is 140 ms. */
  setup(1, 5);
  o = mk(1, 1, 0, 5, 300, 25 * MS, 140 * MS, 40, 5);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_SPAWN_WORKER);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "predicted wait 205ms over severe 200ms for 1 tick"));
  CU_ASSERT_PTR_NULL(strstr(d.reason, "queue p95 140ms over severe"));
  /* The same p95 below the severe tier waits for breach_ticks. */
  setup(1, 5);
  o = mk(1, 1, 0, 5, 300, 25 * MS, 150 * MS, 4, 5);
  P.breach_ticks = 3;
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_NONE);
}

static void test_settled_gate(void) {
  setup(2, 5);
  P.breach_ticks = 1;
  for (uint64_t t = 1; t <= 3; t++) {
    pp_observation o = mk(t, 2, 2, 5, 320, 25 * MS, 300 * MS, 30, 10);
    pp_decision d = pp_decide(&P, &st, &o);
    CU_ASSERT_EQUAL(d.action, PP_ACTION_NONE);
    CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "but 2 workers still booting"));
    CU_ASSERT_NSTRING_EQUAL(d.reason, "none: breach for ", 17);
    CU_ASSERT_EQUAL(d.workers_target, 4);
  }
  pp_observation o4 = mk(4, 2, 1, 5, 320, 25 * MS, 300 * MS, 30, 10);
  CU_ASSERT_PTR_NOT_NULL(
      strstr(pp_decide(&P, &st, &o4).reason, "breach for 4 ticks but 1 worker still booting"));
  /* Once they are ready and it still breaches, it acts. */
  pp_observation o = mk(5, 4, 0, 5, 900, 25 * MS, 300 * MS, 30, 20);
  pp_decision d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_SPAWN_WORKER);
}

static void test_spawn_cooldown(void) {
  setup(2, 5);
  P.breach_ticks = 1;
  pp_observation o = breaching(10);
  CU_ASSERT_EQUAL(pp_decide(&P, &st, &o).action, PP_ACTION_SPAWN_WORKER);
  /* The new worker is ready a tick later (booting 0) and the breach persists: cooldown. */
  o = mk(11, 3, 0, 5, 500, 25 * MS, 80 * MS, 10, 15);
  pp_decision d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_NONE);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "spawn cooldown has 2.00s left"));
  o = mk(12, 3, 0, 5, 500, 25 * MS, 80 * MS, 10, 15);
  CU_ASSERT_EQUAL(pp_decide(&P, &st, &o).action, PP_ACTION_NONE);
  o = mk(13, 3, 0, 5, 500, 25 * MS, 80 * MS, 10, 15);
  CU_ASSERT_EQUAL(pp_decide(&P, &st, &o).action, PP_ACTION_SPAWN_WORKER);
}

static void test_hysteresis_no_flapping(void) {
  /* A p95 oscillating around the target (45 ms / 55 ms) never spawns (breach is never
   * sustained) and never retires (never calm). With breach_ticks 1 it would spawn. */
  setup(2, 5);
  int actions = 0;
  for (uint64_t t = 1; t <= 200; t++) {
    pp_observation o = mk(t, 2, 0, 5, 300, 25 * MS, (t % 2 ? 55 : 45) * MS, 0, 8);
    if (pp_decide(&P, &st, &o).action != PP_ACTION_NONE) actions++;
  }
  CU_ASSERT_EQUAL(actions, 0);
  CU_ASSERT_EQUAL(st.workers_wanted, 2);
  /* Oscillating between calm (2 ms, idle) and breach never accumulates calm ticks either. */
  setup(3, 5);
  actions = 0;
  for (uint64_t t = 1; t <= 200; t++) {
    pp_observation o = t % 2 ? mk(t, 3, 0, 5, 10, 25 * MS, 2 * MS, 0, 0)
                             : mk(t, 3, 0, 5, 300, 25 * MS, 60 * MS, 0, 8);
    if (pp_decide(&P, &st, &o).action != PP_ACTION_NONE) actions++;
  }
  CU_ASSERT_EQUAL(actions, 0);
  /* Control: the same oscillation with breach_ticks 1 does act (the test can fail). */
  setup(2, 5);
  P.breach_ticks = 1;
  actions = 0;
  for (uint64_t t = 1; t <= 20; t++) {
    pp_observation o = mk(t, 2, 0, 5, 320, 25 * MS, (t % 2 ? 55 : 45) * MS, 4, 10);
    if (pp_decide(&P, &st, &o).action != PP_ACTION_NONE) actions++;
  }
  CU_ASSERT(actions > 0);
}

static pp_observation calm_obs(uint64_t t, uint32_t workers) {
  return mk(t, workers, 0, 5, 20, 25 * MS, 1 * MS, 0, 1);
}

static void test_calm_retires_one(void) {
  setup(4, 5);
  P.calm_ticks = 30;
  P.retire_cooldown_ns = 30 * S;
  uint64_t t = 100;
  for (uint32_t i = 1; i < 30; i++, t++) {
    pp_observation o = calm_obs(t, 4);
    pp_decision d = pp_decide(&P, &st, &o);
    CU_ASSERT_EQUAL(d.action, PP_ACTION_NONE);
  }
  pp_observation o = calm_obs(t++, 4);
  pp_decision d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_RETIRE_WORKER);
  CU_ASSERT_EQUAL(d.count, 1);
  CU_ASSERT_EQUAL(d.workers_target, 3);
  CU_ASSERT_NSTRING_EQUAL(d.reason, "retire_worker x1: calm for 30 ticks", 35);
  CU_ASSERT_EQUAL(st.calm_ticks, 0);
  /* One at a time: the next retire needs another calm_ticks of calm and the cooldown. */
  int retired_at = -1;
  for (uint32_t i = 1; i <= 40; i++, t++) {
    o = calm_obs(t, 3);
    d = pp_decide(&P, &st, &o);
    if (d.action == PP_ACTION_RETIRE_WORKER && retired_at < 0) retired_at = (int)i;
  }
  CU_ASSERT_EQUAL(retired_at, 30);
}

static void test_retire_guards(void) {
  /* Not while booting, not below min, not when one fewer would overload the rest. */
  setup(2, 5);
  P.calm_ticks = 3;
  P.retire_cooldown_ns = 0;
  for (uint64_t t = 1; t <= 10; t++) {
    pp_observation o = mk(t, 2, 1, 5, 20, 25 * MS, 1 * MS, 0, 1);
    CU_ASSERT_NOT_EQUAL(pp_decide(&P, &st, &o).action, PP_ACTION_RETIRE_WORKER);
  }
  setup(1, 5);
  P.calm_ticks = 3;
  for (uint64_t t = 1; t <= 10; t++) {
    pp_observation o = calm_obs(t, 1);
    CU_ASSERT_EQUAL(pp_decide(&P, &st, &o).action, PP_ACTION_NONE);
  }
  /* 2 workers x 5, 4 busy (calm: 40% < 50%) at 150 rps x 25 ms = 3.75 slots: with one
   * fewer worker rho would be 0.75, over the 0.7 target: keep it. */
  setup(2, 5);
  P.calm_ticks = 3;
  P.retire_cooldown_ns = 0;
  pp_decision d;
  for (uint64_t t = 1; t <= 10; t++) {
    pp_observation o = mk(t, 2, 0, 5, 150, 25 * MS, 1 * MS, 0, 4);
    d = pp_decide(&P, &st, &o);
    CU_ASSERT_NOT_EQUAL(d.action, PP_ACTION_RETIRE_WORKER);
  }
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "one fewer worker would put rho at 0.75"));
}

static void test_bounds(void) {
  /* At max_workers: decline, naming the bound. */
  setup(8, 5);
  P.breach_ticks = 1;
  pp_observation o = mk(1, 8, 0, 5, 2000, 25 * MS, 900 * MS, 400, 40);
  pp_decision d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_NONE);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "at max_workers bound of 8 workers"));
  /* Near max: the step is cut to what is left. */
  setup(6, 5);
  P.breach_ticks = 1;
  o = mk(1, 6, 0, 5, 2000, 25 * MS, 900 * MS, 400, 30);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_SPAWN_WORKER);
  CU_ASSERT_EQUAL(d.count, 2);
  CU_ASSERT_EQUAL(d.workers_target, 8);
  /* Below min_workers (a worker died): back to the floor at once, no breach needed. */
  setup(3, 5);
  P.min_workers = 3;
  o = calm_obs(1, 1);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_SPAWN_WORKER);
  CU_ASSERT_EQUAL(d.count, 2);
  CU_ASSERT_EQUAL(d.workers_target, 3);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "below min_workers 3"));
  /* Above max_workers (a reload lowered it): one retire per tick. */
  setup(8, 5);
  P.max_workers = 6;
  o = mk(1, 8, 0, 5, 300, 25 * MS, 30 * MS, 0, 10);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_RETIRE_WORKER);
  CU_ASSERT_EQUAL(d.count, 1);
  CU_ASSERT_EQUAL(d.workers_target, 7);
}

static void test_step_12x_sizes_several(void) {
  /* 60 -> 700 rps at S = 25 ms with 1 worker x 5 threads: 17.5 slots of work at rho 0.7 is
   * 25 slots, and 500 queued requests drain over 3 s with 4.2 more: 6 workers, 5 to add. */
  setup(1, 5);
  pp_observation o = mk(1, 1, 0, 5, 60, 25 * MS, 2 * MS, 0, 2);
  CU_ASSERT_EQUAL(pp_decide(&P, &st, &o).action, PP_ACTION_NONE);
  o = mk(2, 1, 0, 5, 700, 25 * MS, 503 * MS, 500, 5);
  pp_decision d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_SPAWN_WORKER);
  CU_ASSERT_EQUAL(d.count, 4); /* capped by max_step 4 */
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "sized 6 workers, capped by max_step"));
  setup(1, 5);
  P.max_step = 8;
  o = mk(1, 1, 0, 5, 60, 25 * MS, 2 * MS, 0, 2);
  pp_decide(&P, &st, &o);
  o = mk(2, 1, 0, 5, 700, 25 * MS, 503 * MS, 500, 5);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_SPAWN_WORKER);
  CU_ASSERT_EQUAL(d.count, 5);
  CU_ASSERT_EQUAL(d.workers_target, 6);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "rho 3.50, 1 worker ready, 0 booting"));
}

static void test_cores_and_memory_bound(void) {
  /* CPU-bound service (cpu share 1) on 2 cores: no more than 2 workers, whatever the load. */
  setup(1, 5);
  P.cores = 2;
  pp_observation o = mk(1, 1, 0, 5, 700, 25 * MS, 503 * MS, 500, 5);
  o.service_cpu_mean_ns = 25 * MS;
  pp_decision d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_SPAWN_WORKER);
  CU_ASSERT_EQUAL(d.count, 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "capped by cores"));
  /* Mostly waiting (5% CPU, 5 threads = 0.25 core per worker): 8 workers fit in 2 cores. */
  setup(1, 5);
  P.cores = 2;
  o.service_cpu_mean_ns = 1250000;
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.count, 4);
  /* Unknown CPU share: cores does not bind (documented). */
  setup(1, 5);
  P.cores = 1;
  o.service_cpu_mean_ns = PP_UNKNOWN_NS;
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.count, 4);
  /* Memory: 1 GiB limit at 300 MiB per worker is 3 workers. */
  setup(1, 5);
  P.memory_limit_bytes = 1 << 30;
  o.mem_per_worker_bytes = 300 << 20;
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.count, 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "capped by memory_limit"));
  o = mk(2, 3, 0, 5, 700, 25 * MS, 503 * MS, 500, 15);
  o.mem_per_worker_bytes = 300 << 20;
  st.last_spawn_ns = INT64_MIN;
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_NONE);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "at memory_limit bound of 3 workers"));
}

static void test_draining_declines(void) {
  /* p95 still high from an earlier shortage, but capacity is sized and the request arriving
   * now would not wait: do not overshoot. */
  setup(6, 5);
  P.breach_ticks = 1;
  pp_observation o = mk(1, 6, 0, 5, 700, 25 * MS, 400 * MS, 0, 20);
  pp_decision d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_NONE);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "draining"));
  /* Nor by a thread. */
  setup(6, 5);
  P.breach_ticks = 1;
  P.threads_enabled = 1;
  o.gvl_wait_ns = 1 * MS;
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_NONE);
  /* Control: with a real backlog (predicted wait over target) the same tick acts. */
  o = mk(1, 6, 0, 5, 700, 25 * MS, 400 * MS, 200, 30);
  o.gvl_wait_ns = 1 * MS;
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_ADD_THREAD);
}

static void test_unknown_gvl_never_adds_thread(void) {
  setup(1, 2);
  P.threads_enabled = 1;
  P.breach_ticks = 1;
  P.spawn_cooldown_ns = 0;
  P.max_workers = 64;
  int threads_added = 0, spawned = 0;
  for (uint64_t t = 1; t <= 100; t++) {
    uint32_t w = st.workers_wanted;
    pp_observation o = mk(t, w, 0, 2, 400.0 * (double)t, 25 * MS, 300 * MS, 100, w * 2);
    pp_decision d = pp_decide(&P, &st, &o);
    threads_added += d.action == PP_ACTION_ADD_THREAD;
    spawned += d.action == PP_ACTION_SPAWN_WORKER;
  }
  CU_ASSERT_EQUAL(threads_added, 0);
  CU_ASSERT(spawned > 0);
  /* Measured and low: a thread is added instead of a worker. */
  setup(1, 2);
  P.threads_enabled = 1;
  P.breach_ticks = 1;
  pp_observation o = mk(1, 1, 0, 2, 400, 25 * MS, 300 * MS, 100, 2);
  o.gvl_wait_ns = 1 * MS;
  pp_decision d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_ADD_THREAD);
  CU_ASSERT_EQUAL(st.threads_wanted, 3);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "gvl wait 1.0ms under 5.0ms, 2 -> 3 threads"));
  /* Measured but high: workers, not threads; and off the breach, one thread is removed. */
  setup(1, 4);
  P.threads_enabled = 1;
  P.breach_ticks = 1;
  o = mk(1, 1, 0, 4, 400, 25 * MS, 300 * MS, 100, 4);
  o.gvl_wait_ns = 20 * MS;
  CU_ASSERT_EQUAL(pp_decide(&P, &st, &o).action, PP_ACTION_SPAWN_WORKER);
  o = mk(10, 2, 0, 4, 100, 25 * MS, 20 * MS, 0, 3);
  o.gvl_wait_ns = 20 * MS;
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_REMOVE_THREAD);
  CU_ASSERT_EQUAL(st.threads_wanted, 3);
  /* Threads disabled: never, even when measured and low. */
  setup(1, 2);
  P.breach_ticks = 1;
  o = mk(1, 1, 0, 2, 400, 25 * MS, 300 * MS, 100, 2);
  o.gvl_wait_ns = 0;
  CU_ASSERT_EQUAL(pp_decide(&P, &st, &o).action, PP_ACTION_SPAWN_WORKER);
}

static void test_shedding_on_off(void) {
  setup(2, 5);
  P.shed_enabled = 1;
  P.shed_budget_ns = 1 * S;
  /* 10 slots, all busy, 400 waiting at 25 ms: W = 401 * 25 ms / 10 = 1.0025 s > 1 s. */
  pp_observation o = mk(1, 2, 2, 5, 400, 25 * MS, 900 * MS, 400, 10);
  pp_decision d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.shed, 1);
  CU_ASSERT_EQUAL(st.shedding, 1);
  CU_ASSERT_EQUAL(d.shed_budget_ns, 1 * S);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "shedding on: predicted 1.00s over budget 1.00s"));
  /* 0.8 s: under the budget but over half of it: stays on (hysteresis). */
  o = mk(2, 2, 2, 5, 400, 25 * MS, 900 * MS, 319, 10);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.shed, 1);
  /* 0.4 s: off. */
  o = mk(3, 2, 2, 5, 400, 25 * MS, 900 * MS, 159, 10);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.shed, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "shedding off"));
  /* A reload that disables shedding turns it off at once, saying why. */
  P.shed_enabled = 0;
  st.shedding = 1;
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.shed, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "shedding off: disabled by the policy"));
  /* Disabled: never on. */
  setup(2, 5);
  o = mk(1, 2, 0, 5, 400, 25 * MS, 900 * MS, 4000, 10);
  CU_ASSERT_EQUAL(pp_decide(&P, &st, &o).shed, 0);
}

static void test_reconcile_dead_worker(void) {
  setup(3, 5);
  st.workers_wanted = 3;
  pp_observation o = mk(1, 2, 0, 5, 50, 25 * MS, 10 * MS, 0, 2);
  pp_decision d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_NONE);
  CU_ASSERT_EQUAL(st.workers_wanted, 2);
  CU_ASSERT_EQUAL(d.workers_target, 2);
}

static void test_invalid_inputs(void) {
  setup(1, 1);
  pp_decision d = pp_decide(&P, &st, NULL);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_NONE);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "invalid input"));
  d = pp_decide(NULL, NULL, NULL);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_NONE);
  pp_observation o = breaching(1);
  P.max_step = 0;
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_NONE);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "invalid policy: max_step"));
  P.max_step = 4;
  o.arrival_rate = NAN;
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_NONE);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "arrival_rate"));
  /* No capacity and nothing booting: back to the floor. */
  o = mk(5, 0, 0, 5, 100, 25 * MS, 0, 50, 0);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_SPAWN_WORKER);
  CU_ASSERT_EQUAL(d.predicted_wait_ns, UINT64_MAX);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "predicted unbounded"));
}

static void test_action_names(void) {
  for (int a = 0; a <= 4; a++) {
    pp_action back;
    CU_ASSERT_EQUAL(pp_action_parse(pp_action_name((pp_action)a), &back), 0);
    CU_ASSERT_EQUAL(back, (pp_action)a);
  }
  pp_action x;
  CU_ASSERT_EQUAL(pp_action_parse("explode", &x), PP_CTL_EINVAL);
  CU_ASSERT_EQUAL(pp_action_parse(NULL, &x), PP_CTL_EINVAL);
  CU_ASSERT_STRING_EQUAL(pp_action_name((pp_action)99), "invalid");
}

/* A pseudo-random but plausible observation stream (load waves, boots, GVL, memory). */
static pp_observation random_obs(test_rng *r, uint64_t t, const pp_ctl_state *s) {
  uint32_t wanted = s->workers_wanted ? s->workers_wanted : 1;
  uint32_t booting = (uint32_t)(rng_next(r) % 3 == 0 ? rng_next(r) % (wanted + 1) : 0);
  uint32_t ready = wanted - booting;
  uint32_t tpw = s->threads_wanted ? s->threads_wanted : 1;
  double rate = 50 + 600 * fabs(sin((double)t / 40.0)) + (double)(rng_next(r) % 100);
  uint64_t p95 = rng_next(r) % 4 == 0 ? (rng_next(r) % 800) * MS : (rng_next(r) % 60) * MS;
  uint32_t len = (uint32_t)(rng_next(r) % 200);
  pp_observation o = mk(t, ready, booting, tpw, rate, (10 + rng_next(r) % 40) * MS, p95, len,
                        (uint32_t)(rng_next(r) % (ready * tpw + 1)));
  o.gvl_wait_ns = rng_next(r) % 3 == 0 ? PP_UNKNOWN_NS : (int64_t)(rng_next(r) % (10 * MS));
  o.service_cpu_mean_ns = rng_next(r) % 2 ? PP_UNKNOWN_NS : (int64_t)(rng_next(r) % (10 * MS));
  o.mem_per_worker_bytes = rng_next(r) % 2 ? -1 : (int64_t)(200 + rng_next(r) % 200) << 20;
  return o;
}

#define DET_TICKS 2000
static pp_decision det_a[DET_TICKS], det_b[DET_TICKS];
static pp_ctl_state det_sa[DET_TICKS], det_sb[DET_TICKS];

static void run_sequence(uint64_t seed, pp_decision *out, pp_ctl_state *states) {
  pp_policy p;
  pp_policy_defaults(&p);
  p.threads_enabled = 1;
  p.shed_enabled = 1;
  p.shed_budget_ns = 2 * S;
  p.cores = 4;
  p.memory_limit_bytes = 4ll << 30;
  p.calm_ticks = 5;
  p.retire_cooldown_ns = 5 * S;
  pp_ctl_state s;
  memset(&s, 0, sizeof s);
  pp_ctl_state_init(&s, &p, 1, 2);
  test_rng r = {seed};
  for (uint64_t t = 0; t < DET_TICKS; t++) {
    pp_observation o = random_obs(&r, t, &s);
    out[t] = pp_decide(&p, &s, &o);
    states[t] = s;
  }
}

/* ---- standby workers (policy `standby`) ---- */

/* mk() plus a standby pool: `parked` activatable now, `sbooting` replacements on the way. */
static pp_observation mk_sb(uint64_t t, uint32_t workers, uint32_t booting, double rate,
                            uint64_t p95, uint32_t len, uint32_t busy, uint32_t parked,
                            uint32_t sbooting) {
  pp_observation o = mk(t, workers, booting, 5, rate, 25 * MS, p95, len, busy);
  o.workers_standby = parked;
  o.workers_standby_booting = sbooting;
  return o;
}

/* The 12x step with standby: the pool is used first, forks make up the rest (max_step bounds
 * forks only), and the same decision refills the pool. */
static void test_standby_activates_before_forking(void) {
  setup(1, 5);
  P.standby = 2;
  pp_observation o = mk_sb(2, 1, 0, 700, 503 * MS, 500, 5, 2, 0);
  pp_decision d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_SPAWN_WORKER);
  CU_ASSERT_EQUAL(d.count, 5); /* sized 6: 2 activated + 3 forked */
  CU_ASSERT_EQUAL(d.activate, 2);
  CU_ASSERT_EQUAL(d.standby_spawn, 2);
  CU_ASSERT_EQUAL(d.workers_target, 6);
  CU_ASSERT_EQUAL(st.standby_wanted, 2);
  CU_ASSERT_EQUAL(st.last_spawn_ns, (int64_t)(2 * S));
  CU_ASSERT_EQUAL(st.last_activate_ns, (int64_t)(2 * S));
  CU_ASSERT_EQUAL(st.breach_ticks, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "spawn_worker x5: queue p95 503ms over severe 200ms"));
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "; sized 6 workers; 2 from standby, 3 forked"));
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "; standby +2 to 2"));
  /* A pool that covers the whole shortfall: no fork at all, and max_step does not bound it. */
  setup(1, 5);
  P.standby = 8;
  P.max_step = 2;
  o = mk_sb(2, 1, 0, 700, 503 * MS, 500, 5, 8, 0);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.count, 5);
  CU_ASSERT_EQUAL(d.activate, 5);
  CU_ASSERT_EQUAL(st.last_spawn_ns, INT64_MIN); /* nothing forked: the spawn cooldown is free */
  CU_ASSERT_EQUAL(st.last_activate_ns, (int64_t)(2 * S));
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "5 from standby, 0 forked"));
  CU_ASSERT_PTR_NULL(strstr(d.reason, "capped by"));
  CU_ASSERT_EQUAL(d.standby_spawn, 5);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "; standby +5 to 8"));
  /* The same step without standby: today's decision, and the new fields stay at rest. */
  setup(1, 5);
  o = mk_sb(2, 1, 0, 700, 503 * MS, 500, 5, 0, 0);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.count, 4);
  CU_ASSERT_EQUAL(d.activate, 0);
  CU_ASSERT_EQUAL(d.standby_spawn, 0);
  CU_ASSERT_EQUAL(st.standby_wanted, 0);
  CU_ASSERT_EQUAL(st.last_activate_ns, INT64_MIN);
  CU_ASSERT_PTR_NULL(strstr(d.reason, "standby"));
  /* The worker cap bounds activations too: max_workers 3 leaves room for 2. */
  setup(1, 5);
  P.standby = 4;
  P.max_workers = 3;
  o = mk_sb(2, 1, 0, 700, 503 * MS, 500, 5, 4, 0);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.count, 2);
  CU_ASSERT_EQUAL(d.activate, 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "capped by max_workers; 2 from standby, 0 forked"));
  /* The pool's memory is reserved: 1 GiB at 300 MiB per worker is 3, minus 1 standby. */
  setup(1, 5);
  P.standby = 1;
  P.memory_limit_bytes = 1 << 30;
  o = mk_sb(2, 1, 0, 700, 503 * MS, 500, 5, 1, 0);
  o.mem_per_worker_bytes = 300 << 20;
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.count, 1);
  CU_ASSERT_EQUAL(d.activate, 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "capped by memory_limit"));
}

/* Replacements: forked for what the pool lacks (parked + booting against `standby`), on any
 * tick and whatever the action; never more; a pool above `standby` is not refilled. */
static void test_standby_replacements(void) {
  setup(2, 5);
  P.standby = 2;
  pp_observation o = mk_sb(1, 2, 0, 100, 5 * MS, 0, 3, 1, 0); /* steady, one parked */
  pp_decision d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_NONE);
  CU_ASSERT_EQUAL(d.standby_spawn, 1);
  CU_ASSERT_EQUAL(st.standby_wanted, 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "; standby +1 to 2"));
  /* The replacement is booting: nothing more. */
  o = mk_sb(2, 2, 0, 100, 5 * MS, 0, 3, 1, 1);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.standby_spawn, 0);
  CU_ASSERT_EQUAL(st.standby_wanted, 2);
  CU_ASSERT_PTR_NULL(strstr(d.reason, "standby +"));
  /* Replacement forks are not held by the settled gate (they are not capacity). */
  o = mk_sb(3, 2, 2, 100, 5 * MS, 0, 3, 0, 0);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.standby_spawn, 2);
  /* A pool above the policy's (a reload lowered it to 0): used, not refilled. */
  setup(1, 5);
  P.standby = 0;
  o = mk_sb(2, 1, 0, 700, 503 * MS, 500, 5, 3, 0);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.activate, 3);
  CU_ASSERT_EQUAL(d.count, 5);
  CU_ASSERT_EQUAL(d.standby_spawn, 0);
  CU_ASSERT_EQUAL(st.standby_wanted, 0);
}

/* Where a pool is not used: one breach tick below the severe tier (confirmation still
 * applies), a backlog draining with enough workers, at the cap, and while booting workers
 * already cover the sized need. */
static void test_standby_declined(void) {
  setup(2, 5);
  P.standby = 2;
  pp_observation o = mk_sb(1, 2, 0, 320, 80 * MS, 4, 10, 2, 0);
  pp_decision d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_NONE);
  CU_ASSERT_EQUAL(d.activate, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "for 1 tick of 2"));
  /* Draining: 8 workers for 700 rps is plenty, the arrival would wait 0. */
  setup(8, 5);
  P.standby = 2;
  o = mk_sb(1, 8, 0, 700, 300 * MS, 0, 20, 2, 0);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_NONE);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "draining"));
  CU_ASSERT_EQUAL(d.activate, 0);
  /* At max_workers: declined naming the bound, the pool untouched. */
  setup(8, 5);
  P.standby = 2;
  o = mk_sb(1, 8, 0, 2000, 503 * MS, 900, 40, 2, 0);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_NONE);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "at max_workers bound of 8 workers"));
  CU_ASSERT_EQUAL(d.activate, 0);
  CU_ASSERT_EQUAL(st.standby_wanted, 2);
  /* Booting workers already cover the need (6 sized, 2 ready + 4 booting): the gate holds. */
  setup(2, 5);
  P.standby = 2;
  P.breach_ticks = 1;
  o = mk_sb(1, 2, 4, 400, 300 * MS, 30, 10, 2, 0);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_NONE);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "but 4 workers still booting"));
  CU_ASSERT_EQUAL(d.activate, 0);
}

/* Standby serves within a tick: the settled gate and the spawn cooldown hold forks, not
 * activations; an activation counts as a spawn for the retire cooldown. */
static void test_standby_gate_and_cooldowns(void) {
  /* Gate: 1 ready, 1 booting, sized 6 (the 12x step): activate 2, fork nothing. */
  setup(1, 5);
  P.standby = 2;
  pp_observation o = mk_sb(3, 1, 1, 700, 503 * MS, 500, 5, 2, 0);
  pp_decision d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_SPAWN_WORKER);
  CU_ASSERT_EQUAL(d.count, 2);
  CU_ASSERT_EQUAL(d.activate, 2);
  CU_ASSERT_EQUAL(d.workers_target, 4);
  CU_ASSERT_EQUAL(st.last_spawn_ns, INT64_MIN);
  CU_ASSERT_EQUAL(st.last_activate_ns, (int64_t)(3 * S));
  CU_ASSERT_EQUAL(st.breach_ticks, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "; forks held while booting (predicted"));
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "sized 6 workers; 2 from standby, 0 forked"));
  CU_ASSERT_EQUAL(d.standby_spawn, 2);
  /* Cooldown: forked 1 s ago, 3 ready, still short: the pool is used, forks wait. */
  setup(3, 5);
  P.standby = 1;
  st.last_spawn_ns = (int64_t)(9 * S);
  o = mk_sb(10, 3, 0, 900, 503 * MS, 400, 15, 1, 0);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_SPAWN_WORKER);
  CU_ASSERT_EQUAL(d.activate, 1);
  CU_ASSERT_EQUAL(d.count, 1);
  CU_ASSERT_EQUAL(st.last_spawn_ns, (int64_t)(9 * S));
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "; forks held: cooldown 2.00s left"));
  /* The same tick with an empty pool: the old cooldown decline. */
  setup(3, 5);
  P.standby = 1;
  st.last_spawn_ns = (int64_t)(9 * S);
  o = mk_sb(10, 3, 0, 900, 503 * MS, 400, 15, 0, 1);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_NONE);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "but spawn cooldown has 2.00s left"));
  /* Retire cooldown counts from the last activation. */
  setup(3, 5);
  P.standby = 1;
  P.calm_ticks = 1;
  st.last_activate_ns = (int64_t)(90 * S);
  o = mk_sb(100, 3, 0, 20, 1 * MS, 0, 1, 1, 0);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_NONE);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "retire cooldown has 20.0s left"));
  st.last_activate_ns = (int64_t)(60 * S);
  o = mk_sb(101, 3, 0, 20, 1 * MS, 0, 1, 1, 0);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_RETIRE_WORKER);
}

/* Below min_workers (a worker died): a parked standby replaces it at once, even while others
 * boot; forks for the rest still wait for the settled gate. */
static void test_standby_floor(void) {
  setup(1, 5);
  P.standby = 1;
  pp_observation o = mk_sb(5, 0, 0, 50, 0, 0, 0, 1, 0);
  pp_decision d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_SPAWN_WORKER);
  CU_ASSERT_EQUAL(d.count, 1);
  CU_ASSERT_EQUAL(d.activate, 1);
  CU_ASSERT_EQUAL(st.last_spawn_ns, INT64_MIN);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "below min_workers 1"));
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "1 from standby, 0 forked"));
  CU_ASSERT_EQUAL(d.standby_spawn, 1);
  setup(3, 5);
  P.min_workers = 4;
  P.standby = 1;
  o = mk_sb(5, 1, 1, 50, 0, 0, 0, 1, 0);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.count, 1); /* 2 short: 1 from standby, the fork waits for the booting one */
  CU_ASSERT_EQUAL(d.activate, 1);
  CU_ASSERT_EQUAL(d.workers_target, 3);
}

static void test_determinism(void) {
  memset(det_sa, 0, sizeof det_sa);
  memset(det_sb, 0, sizeof det_sb);
  run_sequence(77, det_a, det_sa);
  /* Something unrelated in between must not matter: decide() keeps no global state. */
  {
    static pp_decision other[DET_TICKS];
    static pp_ctl_state other_s[DET_TICKS];
    run_sequence(78, other, other_s);
  }
  run_sequence(77, det_b, det_sb);
  int counts[5] = {0};
  int same = 1;
  for (int t = 0; t < DET_TICKS; t++) {
    same &= det_a[t].action == det_b[t].action && det_a[t].count == det_b[t].count &&
            det_a[t].workers_target == det_b[t].workers_target &&
            det_a[t].predicted_wait_ns == det_b[t].predicted_wait_ns &&
            memcmp(&det_a[t].rho, &det_b[t].rho, sizeof(double)) == 0 &&
            det_a[t].shed == det_b[t].shed && strcmp(det_a[t].reason, det_b[t].reason) == 0;
    same &= memcmp(&det_sa[t], &det_sb[t], sizeof(pp_ctl_state)) == 0;
    counts[det_a[t].action]++;
  }
  CU_ASSERT(same);
  /* The stream exercises more than one kind of decision, or the test proves little. */
  CU_ASSERT(counts[PP_ACTION_NONE] > 0);
  CU_ASSERT(counts[PP_ACTION_SPAWN_WORKER] > 0);
  CU_ASSERT(counts[PP_ACTION_ADD_THREAD] + counts[PP_ACTION_REMOVE_THREAD] > 0);
}

/* ---- rule 4b: slots per worker ---- */

/* mk() plus the concurrency signal: every worker at `share` of a core, `c_req` CPU/request. */
static pp_observation mkc(uint64_t t, uint32_t workers, uint32_t tpw, double rate, uint64_t svc,
                          uint64_t p95, uint32_t len, uint32_t busy, double share, int64_t c_req) {
  pp_observation o = mk(t, workers, 0, tpw, rate, svc, p95, len, busy);
  o.cpu_share_mean = o.cpu_share_max = share;
  o.cpu_workers = workers;
  o.cpu_per_request_ns = c_req;
  return o;
}

/* standby_cover: the pool is kept only while slots alone could not carry standby_cover x the
 * load (arrival rate x CPU per request, per worker). Each branch with its reason: CPU per
 * request not measured, closed (I/O-leaning, also when run-queue wait inflates the measured
 * demand), open by the load's CPU, open at the slot bound, open without slots, a parked pool
 * kept but not refilled while closed, activations not gated, and standby_cover 0 as before. */
static void test_standby_cover(void) {
  setup(1, 4);
  P.standby = 2;
  P.standby_cover = 4;
  /* A steady tick, no CPU signal yet: nothing parked, and the reason says why. */
  pp_observation o = mk_sb(1, 1, 0, 30, 5 * MS, 0, 1, 0, 0);
  o.threads_per_worker = 4, o.slots_ready = 4;
  pp_decision d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_NONE);
  CU_ASSERT_EQUAL(d.standby_spawn, 0);
  CU_ASSERT_EQUAL(st.standby_wanted, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "; standby 0 of 2: CPU per request not measured yet"));
  /* I/O-leaning: 30 rps x 2 ms = 6% of a core, x4 = 24% under slots.cpu_target: slots carry
   * a 4x step. The worker's measured demand (70%: run-queue wait on a shared machine) does
   * not open the gate. */
  o = mkc(2, 1, 4, 30, 22 * MS, 0, 0, 1, 0.70, 2 * (int64_t)MS);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_NONE);
  CU_ASSERT_EQUAL(d.standby_spawn, 0);
  CU_ASSERT_EQUAL(st.standby_wanted, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "; standby 0 of 2: load 6% of a core per worker "
                                          "(30.00 rps x 2.0ms CPU), x4.00 = 24% under "
                                          "slots.cpu_target 80%"));
  /* CPU-leaning: 225 rps x 2 ms = 45%, x4 = 180%: the pool is filled. */
  o = mkc(3, 1, 4, 225, 22 * MS, 0, 0, 2, 0.10, 2 * (int64_t)MS);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.standby_spawn, 2);
  CU_ASSERT_EQUAL(st.standby_wanted, 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "; standby +2 to 2 (load 45% of a core per worker "
                                          "(225.00 rps x 2.0ms CPU), x4.00 = 180% at or over "
                                          "slots.cpu_target 80%)"));
  /* The load is per worker: the same 225 rps over 3 workers is 15%, x4 = 60%: closed. */
  setup(3, 4);
  P.standby = 2;
  P.standby_cover = 4;
  o = mkc(4, 3, 4, 225, 22 * MS, 0, 0, 2, 0.15, 2 * (int64_t)MS);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.standby_spawn, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "; standby 0 of 2: load 15% of a core per worker"));
  /* Closed with one parked: kept (no decision retires a parked worker), not refilled. */
  setup(1, 4);
  P.standby = 2;
  P.standby_cover = 4;
  o = mkc(5, 1, 4, 30, 22 * MS, 0, 0, 1, 0.06, 2 * (int64_t)MS);
  o.workers_standby = 1;
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.standby_spawn, 0);
  CU_ASSERT_EQUAL(st.standby_wanted, 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "; standby 1 of 2: load 6% of a core"));
  /* Slots at their bound (slots.max 4 reached) with little CPU: 40 rps x 22 ms = 0.88 busy,
   * x4 = 3.52 over 70% of 4 slots: they cannot carry a 4x step. */
  setup(1, 4);
  P.standby = 1;
  P.standby_cover = 4;
  P.max_slots = 4;
  o = mkc(6, 1, 4, 40, 22 * MS, 0, 0, 1, 0.08, 2 * (int64_t)MS);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.standby_spawn, 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "; standby +1 to 1 (slots at their bound of 4; x4.00 the "
                                          "load keeps 3.52 busy, over target_utilisation 70%)"));
  /* At the bound but lightly loaded (a CPU-only app's bound is 1 slot): 10 rps x 1.5 ms, x4 =
   * 0.06 busy of 2 slots: they carry it, nothing parked. */
  setup(1, 2);
  P.standby = 1;
  P.standby_cover = 4;
  o = mkc(6, 1, 2, 10, 1500000, 0, 0, 0, 0.02, 1500000);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.standby_spawn, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "; standby 0 of 1: load 2% of a core per worker"));
  /* Slots disabled: processes are the only actuator, so the pool is kept. */
  setup(1, 4);
  P.standby = 1;
  P.standby_cover = 4;
  P.slots_enabled = 0;
  o = mkc(7, 1, 4, 30, 22 * MS, 0, 0, 1, 0.06, 2 * (int64_t)MS);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.standby_spawn, 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "; standby +1 to 1 (slots.enabled is false)"));
  /* A closed gate does not stop activations: a severe step with two parked uses them (no CPU
   * signal, so rule 4b does not act), and the pool is not refilled. */
  setup(1, 5);
  P.standby = 2;
  P.standby_cover = 4;
  o = mk_sb(8, 1, 0, 700, 503 * MS, 500, 5, 2, 0);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_SPAWN_WORKER);
  CU_ASSERT_EQUAL(d.activate, 2);
  CU_ASSERT_EQUAL(d.standby_spawn, 0);
  CU_ASSERT_EQUAL(st.standby_wanted, 0);
  CU_ASSERT_PTR_NOT_NULL(
      strstr(d.reason, "2 from standby, 3 forked; standby 0 of 2: CPU per request not measured"));
  /* standby_cover 0: the pool is always kept, whatever the load, and the reason is as before. */
  setup(1, 4);
  P.standby = 2;
  o = mkc(9, 1, 4, 30, 22 * MS, 0, 0, 1, 0.06, 2 * (int64_t)MS);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.standby_spawn, 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "; standby +2 to 2"));
  CU_ASSERT_PTR_NULL(strstr(d.reason, "of a core per worker"));
}

/* standby_cover > 0: the pool is refilled only up to the room the worker cap leaves (a parked
 * worker beyond it could never be activated); the reason names the bound. standby_cover 0
 * keeps the pool at K whatever the cap, as before. */
static void test_standby_cover_room(void) {
  setup(5, 5);
  P.standby = 4;
  P.standby_cover = 4;
  P.max_workers = 6;
  /* 700 rps x 5 ms over 5 workers = 70% of a core, x4 = 280%: open, but 6 - 5 leaves 1. */
  pp_observation o = mkc(1, 5, 5, 700, 25 * MS, 0, 0, 10, 0.70, 5 * (int64_t)MS);
  pp_decision d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_NONE);
  CU_ASSERT_EQUAL(d.standby_spawn, 1);
  CU_ASSERT_EQUAL(st.standby_wanted, 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "; standby 1 of 4: room for 1 under the max_workers "
                                          "bound of 6 workers (5 expected); standby +1 to 1 (load "
                                          "70% of a core per worker"));
  /* One parked: the room is used up, nothing forked, and the reason says so. */
  o = mkc(2, 5, 5, 700, 25 * MS, 0, 0, 10, 0.70, 5 * (int64_t)MS);
  o.workers_standby = 1;
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.standby_spawn, 0);
  CU_ASSERT_EQUAL(st.standby_wanted, 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "; standby 1 of 4: room for 1 under the max_workers"));
  CU_ASSERT_PTR_NULL(strstr(d.reason, "standby +"));
  /* Back at 1 worker (60 rps x 5 ms = 30%, x4 = 120%: open), room 5: refilled to K. */
  setup(1, 5);
  P.standby = 4;
  P.standby_cover = 4;
  P.max_workers = 6;
  o = mkc(3, 1, 5, 60, 25 * MS, 0, 0, 2, 0.30, 5 * (int64_t)MS);
  o.workers_standby = 1;
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.standby_spawn, 3);
  CU_ASSERT_EQUAL(st.standby_wanted, 4);
  CU_ASSERT_PTR_NULL(strstr(d.reason, "room for"));
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "; standby +3 to 4 (load 30% of a core"));
  /* standby_cover 0: K whatever the room. */
  setup(5, 5);
  P.standby = 2;
  P.max_workers = 6;
  o = mkc(4, 5, 5, 700, 25 * MS, 0, 0, 10, 0.70, 5 * (int64_t)MS);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.standby_spawn, 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "; standby +2 to 2"));
  CU_ASSERT_PTR_NULL(strstr(d.reason, "room for"));
}

/* standby_cover > 0: an activation starts the forks' spawn cooldown too (the window after it
 * still holds the backlog from before the activated workers); activations are not held.
 * standby_cover 0: an activation leaves forks free, as before. */
static void test_standby_cover_activation_cools_forks(void) {
  for (int cover = 0; cover <= 4; cover += 4) {
    setup(1, 5);
    P.standby = 2;
    P.standby_cover = cover;
    /* 150 rps x 25 ms / 0.7 over 5 slots: 2 workers; one parked covers it, nothing forked. */
    pp_observation o = mk_sb(10, 1, 0, 150, 250 * MS, 10, 5, 2, 0);
    pp_decision d = pp_decide(&P, &st, &o);
    CU_ASSERT_EQUAL(d.action, PP_ACTION_SPAWN_WORKER);
    CU_ASSERT_EQUAL(d.count, 1);
    CU_ASSERT_EQUAL(d.activate, 1);
    CU_ASSERT_EQUAL(st.last_spawn_ns, INT64_MIN);
    /* 1 s later, 500 rps: 4 workers, one parked. */
    o = mk_sb(11, 2, 0, 500, 250 * MS, 50, 10, 1, 0);
    d = pp_decide(&P, &st, &o);
    CU_ASSERT_EQUAL(d.action, PP_ACTION_SPAWN_WORKER);
    CU_ASSERT_EQUAL(d.activate, 1);
    if (cover) {
      CU_ASSERT_EQUAL(d.count, 1);
      CU_ASSERT_PTR_NOT_NULL(
          strstr(d.reason, "; forks held: cooldown 2.00s left after a standby activation"));
      CU_ASSERT_EQUAL(st.last_spawn_ns, INT64_MIN);
      /* Pool empty, 1 s later: no fork until 3 s after the last activation. */
      o = mk_sb(12, 3, 0, 500, 250 * MS, 50, 15, 0, 0);
      d = pp_decide(&P, &st, &o);
      CU_ASSERT_EQUAL(d.action, PP_ACTION_NONE);
      CU_ASSERT_PTR_NOT_NULL(
          strstr(d.reason, " but spawn cooldown has 2.00s left after a standby activation"));
      /* 3 s after it, forks are free again. */
      o = mk_sb(14, 3, 0, 500, 250 * MS, 50, 15, 0, 0);
      d = pp_decide(&P, &st, &o);
      CU_ASSERT_EQUAL(d.action, PP_ACTION_SPAWN_WORKER);
      CU_ASSERT_EQUAL(d.activate, 0);
      CU_ASSERT_EQUAL(d.count, 1);
    } else {
      CU_ASSERT_EQUAL(d.count, 2);
      CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "1 from standby, 1 forked"));
      CU_ASSERT_PTR_NULL(strstr(d.reason, "after a standby activation"));
    }
  }
}

/* I/O-bound: workers at 6% of a core with a queue grow their slots, sized by Little's law in
 * one step (not one at a time), and no process is added. */
static void test_slots_io_grows_by_little(void) {
  setup(1, 5);
  /* 376 rps x 500 ms / 0.7 = 268.6 slots + 264 queued x 500 ms / 1 s = 132: 401 slots. */
  pp_observation o = mkc(20, 1, 5, 376, 500 * MS, 600 * MS, 264, 5, 0.06, 300000);
  pp_decision d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_SET_SLOTS);
  CU_ASSERT_EQUAL(d.count, 401);
  CU_ASSERT_EQUAL(d.workers_target, 1);
  CU_ASSERT_EQUAL(st.threads_wanted, 401);
  CU_ASSERT_EQUAL(st.slots_from, 5);
  CU_ASSERT_EQUAL(st.slots_base, 5);
  CU_ASSERT_EQUAL(st.last_slots_ns, 20 * (int64_t)S);
  CU_ASSERT_NSTRING_EQUAL(d.reason, "set_slots 5->401: queue p95 600ms over severe 200ms", 51);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "workers at 6% of a core (max 6%)"));
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "sized 401 slots"));
  /* Without the CPU signal the same tick spawns, as before rule 4b. */
  setup(1, 5);
  o.cpu_workers = 0;
  o.cpu_share_mean = o.cpu_share_max = -1;
  o.cpu_per_request_ns = -1;
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_SPAWN_WORKER);
  /* slots.enabled false: likewise. */
  setup(1, 5);
  P.slots_enabled = 0;
  o = mkc(20, 1, 5, 376, 500 * MS, 600 * MS, 264, 5, 0.06, 300000);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_SPAWN_WORKER);
}

/* The step's first ticks (measured on step12-2core): the window's arrival rate lags the step,
 * so Little's law finds 4 slots enough (or 5), yet 10 requests queue. A slot for each queued
 * request (microseconds) comes before a fork (seconds) or a second growth a cooldown later. */
static void test_slots_for_the_queue_before_a_fork(void) {
  setup(1, 4);
  P.breach_ticks = 1;
  pp_observation o = mkc(20, 1, 4, 120, 22 * MS, 14 * MS, 10, 4, 0.18, 2 * MS);
  pp_decision d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_SET_SLOTS);
  CU_ASSERT_EQUAL(d.count, 13); /* 4 + 10 queued, capped by the CPU bound 22 / (2 x 0.8) */
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "sized 4 slots"));
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "CPU bound 13"));
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "a slot for each queued request"));
  /* The step's first tick of a measured run: Little's law sizes 5 slots (a lagging 128 rps),
   * 11 queue: 4 + 11 = 15, capped by the CPU bound 23 / (2 x 0.8) = 14. */
  setup(1, 4);
  P.breach_ticks = 1;
  o = mkc(20, 1, 4, 128, 23 * MS, 51 * MS, 11, 4, 0.19, 2 * MS);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_SET_SLOTS);
  CU_ASSERT_EQUAL(d.count, 14);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "sized 5 slots"));
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "; a slot for each queued request"));
  /* The CPU bound still holds: at 2 ms CPU of 3 ms service, S / (c x 0.8) = 1 slot. */
  setup(1, 4);
  P.breach_ticks = 1;
  o = mkc(20, 1, 4, 120, 3 * MS, 14 * MS, 10, 4, 0.5, 2 * MS);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_NOT_EQUAL(d.action, PP_ACTION_SET_SLOTS);
}

/* CPU-bound: a worker near one core gets processes (sized by CPU), not slots. */
static void test_slots_cpu_bound_spawns(void) {
  setup(1, 5);
  /* 100 rps x 17 ms = 1.7 cores / 0.8 = 3 workers: 2 more. */
  pp_observation o = mkc(20, 1, 5, 100, 85 * MS, 900 * MS, 50, 5, 0.98, 17 * MS);
  pp_decision d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_SPAWN_WORKER);
  CU_ASSERT_EQUAL(d.count, 2);
  CU_ASSERT_EQUAL(st.threads_wanted, 5);
  CU_ASSERT_NSTRING_EQUAL(d.reason, "spawn_worker x2: ", 17);
  /* Mixed, one worker short of CPU: the cheap actuator first, up to the CPU bound
   * S / (c x cpu_target) (305 / (5 x 0.8) = 76 slots keep a core's GVL busy) ... */
  setup(1, 5);
  o = mkc(20, 1, 5, 300, 305 * MS, 900 * MS, 200, 5, 0.40, 5 * MS);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_SET_SLOTS);
  CU_ASSERT_EQUAL(d.count, 76);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "CPU bound 76"));
  /* ... then, the worker near a core, processes, sized with 76 slots each (156 slots of
   * work and backlog: 3 workers) and by CPU (300 x 5 ms / 0.8: 2): 2 more. */
  o = mkc(21, 1, 76, 300, 305 * MS, 900 * MS, 250, 76, 0.95, 5 * MS);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_SPAWN_WORKER);
  CU_ASSERT_EQUAL(d.count, 2);
  CU_ASSERT_EQUAL(st.threads_wanted, 76);
  /* While they boot, slots grow no further (at the CPU bound) and no more forks. */
  o = mkc(22, 1, 76, 300, 305 * MS, 900 * MS, 250, 76, 0.95, 5 * MS);
  o.workers_booting = 2;
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_NONE);
}

/* The cores bound on a shared machine: run-queue wait stretches S to 250 ms for 5 slots of
 * 17 ms CPU, so 5 x 17 / 250 = 0.34 of a core per worker would allow floor(2 / 0.34) = 5
 * workers on 2 cores; the workers' measured demand (0.97 of a core) bounds them at 2. */
static void test_cores_bound_uses_cpu_demand(void) {
  setup(2, 5);
  P.cores = 2;
  pp_observation o = mkc(20, 2, 5, 60, 250 * MS, 900 * MS, 60, 10, 0.97, 17 * MS);
  o.service_cpu_mean_ns = 17 * MS;
  pp_decision d = pp_decide(&P, &st, &o);
  /* No third worker: at the bound, the configured slots the GVL cannot use are cut. */
  CU_ASSERT_EQUAL(d.action, PP_ACTION_SET_SLOTS);
  CU_ASSERT_EQUAL(d.count, 3);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "at the cores bound of 2 workers"));
  /* With the slots' cut at the floor, the breach at the bound does nothing. */
  setup(2, 1);
  P.cores = 2;
  o = mkc(20, 2, 1, 60, 17 * MS, 900 * MS, 60, 2, 0.97, 17 * MS);
  o.service_cpu_mean_ns = 17 * MS;
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_NONE);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "but at cores bound of 2 workers"));
  setup(2, 5);
  P.cores = 2;
  o = mkc(20, 2, 5, 60, 250 * MS, 900 * MS, 60, 10, 0.97, 17 * MS);
  o.service_cpu_mean_ns = 17 * MS;
  /* Fiber slots report no per-request CPU (service_cpu_mean_ns unknown): the workers' process
   * CPU per completion stands in, and the cores still bound the processes. */
  setup(2, 5);
  P.cores = 2;
  o = mkc(20, 2, 5, 60, 250 * MS, 900 * MS, 60, 10, 0.97, 17 * MS);
  CU_ASSERT_EQUAL(o.service_cpu_mean_ns, PP_UNKNOWN_NS);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_NOT_EQUAL(d.action, PP_ACTION_SPAWN_WORKER);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "cores bound of 2 workers"));
  setup(2, 5);
  P.cores = 2;
  o = mkc(20, 2, 5, 60, 250 * MS, 900 * MS, 60, 10, 0.97, 17 * MS);
  o.service_cpu_mean_ns = 17 * MS;
  /* Without the demand signal, the old bound: a third worker is forked. */
  setup(2, 5);
  P.cores = 2;
  o.cpu_workers = 0;
  o.cpu_share_mean = o.cpu_share_max = -1;
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_SPAWN_WORKER);
}

/* The cut: a GVL-bound worker's configured slots (none added by rule 4b) are halved, each cut
 * judged a cooldown later: kept while the CPU stays at its target, reverted (with a floor that
 * calm clears) when the CPU idles, which says the slots were waiting on I/O. */
static void test_slots_cut(void) {
  setup(1, 5);
  P.max_workers = 1;
  /* 1 worker at the max_workers bound, 5 slots of 17 ms CPU queueing at the GVL: 57 rps. */
  pp_observation o = mkc(20, 1, 5, 57, 85 * MS, 900 * MS, 20, 5, 0.97, 17 * MS);
  pp_decision d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_SET_SLOTS);
  CU_ASSERT_EQUAL(d.count, 3);
  CU_ASSERT_STRING_EQUAL(d.reason,
                         "set_slots 5->3: queue p95 900ms over severe 200ms for 1 tick at the "
                         "max_workers bound of 1 worker; workers at 97% of a core (max 97%) at "
                         "or over slots.cpu_target 80%: slots wait for the GVL, not in the "
                         "queue; halved, judged in 1.00s");
  CU_ASSERT_EQUAL(st.slots_cut_from, 5);
  CU_ASSERT_EQUAL(st.slots_base, 0);
  /* Within the cooldown: nothing more, and no judgement yet. */
  o = mkc(20, 1, 3, 57, 51 * MS, 900 * MS, 20, 3, 0.97, 17 * MS);
  o.time_ns += (int64_t)(S / 2);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_NOT_EQUAL(d.action, PP_ACTION_SET_SLOTS);
  CU_ASSERT_EQUAL(st.slots_cut_from, 5);
  /* A cooldown later the CPU is still at its target: kept, and cut again, 3 -> 2 -> 1. */
  o = mkc(22, 1, 3, 57, 51 * MS, 900 * MS, 20, 3, 0.97, 17 * MS);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_SET_SLOTS);
  CU_ASSERT_EQUAL(d.count, 2);
  CU_ASSERT_EQUAL(st.slots_cut_from, 3);
  o = mkc(24, 1, 2, 57, 34 * MS, 900 * MS, 20, 2, 0.97, 17 * MS);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.count, 1);
  o = mkc(26, 1, 1, 57, 17 * MS, 900 * MS, 20, 1, 0.97, 17 * MS);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_NONE); /* at slots.min: the breach waits at the bound */
  CU_ASSERT_EQUAL(st.slots_cut_from, 0);
  CU_ASSERT_EQUAL(st.threads_wanted, 1);
  /* The CPU stays full at 1 slot: nothing grows back. */
  o = mkc(28, 1, 1, 57, 17 * MS, 900 * MS, 20, 1, 0.97, 17 * MS);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_NONE);

  /* slots.min is the floor: 5 -> 4 (not 3), then nothing. */
  setup(1, 5);
  P.max_workers = 1;
  P.min_slots = 4;
  o = mkc(20, 1, 5, 57, 85 * MS, 900 * MS, 20, 5, 0.97, 17 * MS);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.count, 4);
  o = mkc(22, 1, 4, 57, 68 * MS, 900 * MS, 20, 4, 0.97, 17 * MS);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_NONE);

  /* A worker of I/O (20 slots of 5 ms CPU and 100 ms sleep) near its core: the cut starves
   * the CPU (40%), so it is reverted and floored. */
  setup(1, 20);
  P.max_workers = 1;
  o = mkc(20, 1, 20, 180, 110 * MS, 900 * MS, 40, 20, 0.9, 5 * MS);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.count, 10);
  o = mkc(22, 1, 10, 90, 105 * MS, 900 * MS, 60, 10, 0.45, 5 * MS);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_SET_SLOTS);
  CU_ASSERT_EQUAL(d.count, 20);
  CU_ASSERT_STRING_EQUAL(d.reason,
                         "set_slots 10->20: workers at 45% of a core (max 45%) under 81% after "
                         "the cut from 20: the slots waited on I/O, not on the GVL; no cut under "
                         "20 until calm");
  CU_ASSERT_EQUAL(st.slots_floor, 20);
  CU_ASSERT_EQUAL(st.slots_cut_from, 0);
  /* Back at its core with 20 slots: no second cut while the floor holds. */
  o = mkc(24, 1, 20, 180, 110 * MS, 900 * MS, 40, 20, 0.9, 5 * MS);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_NOT_EQUAL(d.action, PP_ACTION_SET_SLOTS);
  /* A calm period clears the floor. */
  for (uint64_t t = 30; t < 30 + P.calm_ticks; t++) {
    o = mkc(t, 1, 20, 10, 105 * MS, 0, 0, 1, 0.05, 5 * MS);
    d = pp_decide(&P, &st, &o);
  }
  CU_ASSERT_EQUAL(st.slots_floor, 0);

  /* Slots rule 4b added are taken back (to slots_base), never cut; Ractor slots are not cut. */
  setup(1, 5);
  P.max_workers = 1;
  st.slots_base = 5;
  o = mkc(20, 1, 5, 57, 85 * MS, 900 * MS, 20, 5, 0.97, 17 * MS);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_NOT_EQUAL(d.action, PP_ACTION_SET_SLOTS);
  setup(1, 5);
  P.max_workers = 1;
  o.ractor_cores = 2;
  o.cpu_share_mean = o.cpu_share_max = 0.99;
  d = pp_decide(&P, &st, &o);
  CU_ASSERT(d.action != PP_ACTION_SET_SLOTS || d.count > 5);
}

/* Taking concurrency back: a worker at its CPU target with more slots than the CPU can use
 * returns the extra slots (only what rule 4b added); calm returns them to twice the need. */
static void test_slots_taken_back(void) {
  setup(1, 40);
  st.slots_base = 5;
  /* Not a breach, not calm (busy 35/40): 0.95 of a core, S / (c x 0.8) = 100 / 8 = 12 slots. */
  pp_observation o = mkc(30, 1, 40, 300, 100 * MS, 0, 0, 35, 0.95, 10 * MS);
  pp_decision d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_SET_SLOTS);
  CU_ASSERT_EQUAL(d.count, 12);
  CU_ASSERT_NSTRING_EQUAL(d.reason, "set_slots 40->12: workers at 95% of a core", 41);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "at or over slots.cpu_target 80%"));
  CU_ASSERT_EQUAL(st.slots_base, 5);
  /* Nothing added by the rule (slots_base 0): the operator's slots are not taken back; off a
   * breach they are not cut either (that is on a breach at the process bound: test_slots_cut). */
  setup(1, 40);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_NONE);
  /* Calm for calm_ticks: back to twice what Little's law needs, never under slots_base. */
  setup(1, 200);
  st.slots_base = 5;
  st.slots_ceiling = 30;
  pp_decision last;
  for (uint64_t t = 100; t < 100 + P.calm_ticks; t++) {
    o = mkc(t, 1, 200, 20, 500 * MS, 0, 0, 10, 0.01, 300000);
    last = pp_decide(&P, &st, &o);
  }
  CU_ASSERT_EQUAL(last.action, PP_ACTION_SET_SLOTS);
  CU_ASSERT_EQUAL(last.count, 30); /* 2 x ceil(20 x 0.5 / 0.7) = 2 x 15 */
  CU_ASSERT_NSTRING_EQUAL(last.reason, "set_slots 200->30: calm for 30 ticks", 36);
  CU_ASSERT_EQUAL(st.slots_ceiling, 0); /* calm clears an inflation ceiling */
  CU_ASSERT_EQUAL(st.slots_base, 5);
  /* Processes added since the last slot change (connected now): each worker needs half the
   * slots, so the excess goes back at once: 2 x ceil(376 x 0.5 / 0.7 / 2) = 270. */
  setup(2, 600);
  st.slots_base = 5;
  st.last_slots_ns = 10 * (int64_t)S;
  st.last_spawn_ns = 15 * (int64_t)S;
  o = mkc(20, 2, 600, 376, 500 * MS, 0, 0, 200, 0.10, 300000);
  last = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(last.action, PP_ACTION_SET_SLOTS);
  CU_ASSERT_EQUAL(last.count, 270);
  CU_ASSERT_NSTRING_EQUAL(last.reason,
                          "set_slots 600->270: processes added since the last slot change carry "
                          "it (2 workers, 376.00 rps x 500ms)",
                          89);
  /* Under 1.5x the need it stays; and not while a process still boots. */
  setup(2, 400);
  st.slots_base = 5;
  st.last_slots_ns = 10 * (int64_t)S;
  st.last_spawn_ns = 15 * (int64_t)S;
  o = mkc(20, 2, 400, 376, 500 * MS, 0, 0, 200, 0.10, 300000);
  CU_ASSERT_NOT_EQUAL(pp_decide(&P, &st, &o).action, PP_ACTION_SET_SLOTS);
  setup(2, 600);
  st.slots_base = 5;
  st.last_slots_ns = 10 * (int64_t)S;
  st.last_spawn_ns = 15 * (int64_t)S;
  o = mkc(20, 2, 600, 376, 500 * MS, 0, 0, 200, 0.10, 300000);
  o.workers_booting = 1;
  CU_ASSERT_NOT_EQUAL(pp_decide(&P, &st, &o).action, PP_ACTION_SET_SLOTS);
}

/* The settled gate for slots: right after a growth, while the new slots still connect (or
 * within slots.cooldown), a breach of an I/O-bound worker that could grow further waits for
 * them instead of forking; a worker near one core does not wait. */
static void test_slots_settling_holds_forks(void) {
  setup(1, 5);
  /* a closed loop: 40 clients, 500 ms each, 5 slots: the arrival rate shows only 10 rps */
  pp_observation o = mkc(20, 1, 5, 10, 500 * MS, 900 * MS, 35, 5, 0.02, 300000);
  pp_decision d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL_FATAL(d.action, PP_ACTION_SET_SLOTS);
  uint32_t grown = d.count;
  CU_ASSERT_EQUAL(grown, 40); /* a slot for each queued request: 5 + 35 */
  /* next tick: the queue is still there and only 12 of the new slots have connected */
  o = mkc(21, 1, grown, 24, 500 * MS, 990 * MS, 18, 12, 0.02, 300000);
  o.slots_ready = 12;
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_NONE);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "but slots changed 1.00s ago and are still connecting"));
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "workers at 2% of a core"));
  /* settled and cooled, more clients queued: it grows again */
  o = mkc(22, 1, grown, 80, 500 * MS, 990 * MS, 18, grown, 0.03, 300000);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_SET_SLOTS);
  CU_ASSERT(d.count > grown);
  /* a worker near one core never waits on slots: it forks */
  setup(1, 5);
  st.last_slots_ns = 20 * (int64_t)S;
  st.slots_base = 5;
  o = mkc(21, 1, 5, 40, 500 * MS, 990 * MS, 18, 5, 0.95, 300000);
  o.slots_ready = 3;
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_SPAWN_WORKER);
}

/* Service time inflating after a slot increase reverts it, and caps later growth there. */
static void test_slots_inflation_reverts(void) {
  setup(1, 5);
  /* 5 queued: Little's law sizes the increase (over 5 + a slot for each queued request). */
  pp_observation o = mkc(20, 1, 5, 85, 100 * MS, 600 * MS, 5, 5, 0.10, 2 * MS);
  pp_decision d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL_FATAL(d.action, PP_ACTION_SET_SLOTS);
  uint32_t grown = d.count;
  CU_ASSERT(grown > 5);
  CU_ASSERT_EQUAL(grown, 13); /* 85 x 100 ms / 0.7 + 5 x 100 ms / 1 s */
  /* Settled a cooldown later, service mean tripled for 2.6x the slots (capacity down): back
   * to 5. */
  o = mkc(22, 1, grown, 50, 300 * MS, 600 * MS, 50, grown, 0.20, 2 * MS);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_SET_SLOTS);
  CU_ASSERT_EQUAL(d.count, 5);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "is 3.00x the 100ms before the increase from 5"));
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "for 2.60x the slots"));
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "(over slots.inflation 1.50)"));
  CU_ASSERT_EQUAL(st.slots_ceiling, 5);
  CU_ASSERT_EQUAL(st.slots_from, 0);
  /* The next breach does not grow past the ceiling: it spawns. */
  o = mkc(24, 1, 5, 50, 100 * MS, 600 * MS, 50, 5, 0.10, 2 * MS);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_SPAWN_WORKER);
  /* Service doubled for 2.6x the slots: capacity still grew 30%, so the increase is kept. */
  setup(1, 5);
  o = mkc(20, 1, 5, 85, 100 * MS, 600 * MS, 5, 5, 0.10, 2 * MS);
  d = pp_decide(&P, &st, &o);
  o = mkc(22, 1, d.count, 50, 200 * MS, 0, 0, d.count / 2, 0.20, 2 * MS);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_NOT_EQUAL(d.action, PP_ACTION_SET_SLOTS);
  CU_ASSERT_EQUAL(st.slots_from, 0);
  CU_ASSERT_EQUAL(st.slots_ceiling, 0);
  /* No inflation: the increase is kept (slots_from cleared, no action from the judgement). */
  setup(1, 5);
  o = mkc(20, 1, 5, 50, 100 * MS, 600 * MS, 50, 5, 0.10, 2 * MS);
  d = pp_decide(&P, &st, &o);
  grown = d.count;
  o = mkc(22, 1, grown, 50, 110 * MS, 0, 0, grown / 2, 0.10, 2 * MS);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_NOT_EQUAL(d.action, PP_ACTION_SET_SLOTS);
  CU_ASSERT_EQUAL(st.slots_from, 0);
}

/* Bounds (slots.max, slots.min), the slot cooldown and the slot settled gate. */
static void test_slots_bounds_and_gates(void) {
  setup(1, 5);
  P.max_slots = 20;
  pp_observation o = mkc(20, 1, 5, 376, 500 * MS, 600 * MS, 264, 5, 0.06, 300000);
  pp_decision d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_SET_SLOTS);
  CU_ASSERT_EQUAL(d.count, 20);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "capped by slots.max"));
  /* At slots.max: processes. */
  o = mkc(23, 1, 20, 376, 500 * MS, 600 * MS, 264, 20, 0.06, 300000);
  st.slots_from = 0;
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_SPAWN_WORKER);
  /* Cooldown: a second growth within slots.cooldown waits. */
  setup(1, 5);
  P.slots_cooldown_ns = 5 * S;
  o = mkc(20, 1, 5, 50, 500 * MS, 600 * MS, 10, 5, 0.06, 300000);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL_FATAL(d.action, PP_ACTION_SET_SLOTS);
  uint32_t n = d.count;
  o = mkc(22, 1, n, 400, 500 * MS, 600 * MS, 300, n, 0.06, 300000);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_NOT_EQUAL(d.action, PP_ACTION_SET_SLOTS);
  /* Settled gate: slots not all connected yet (slots_ready < workers x tpw). */
  setup(1, 5);
  o = mkc(30, 1, 40, 400, 500 * MS, 600 * MS, 300, 30, 0.06, 300000);
  o.slots_ready = 30;
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_NOT_EQUAL(d.action, PP_ACTION_SET_SLOTS);
  /* slots.min: growth is at least slots.min. */
  setup(1, 1);
  P.min_slots = 8;
  o = mkc(20, 1, 1, 3, 500 * MS, 600 * MS, 1, 1, 0.01, 300000);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_SET_SLOTS);
  CU_ASSERT_EQUAL(d.count, 8);
}

/* GVL wait: unknown (Ruby 3.1) stays unknown and leaves the decision to the CPU share; a
 * measured wait at threads.gvl_wait_max is GVL-bound: processes, not slots. */
static void test_slots_gvl_wait(void) {
  pp_obs_input in;
  memset(&in, 0, sizeof in);
  pp_hist q, sw;
  pp_hist_init(&q);
  pp_hist_init(&sw);
  for (int i = 0; i < 100; i++)
    pp_hist_record(&q, 600 * MS), pp_hist_record(&sw, 500 * MS);
  int64_t cpu[1] = {60 * (int64_t)MS};
  in.tick = 20;
  in.now_ns = 20 * (int64_t)S;
  in.window_ns = S;
  in.queue_window = &q;
  in.service_window = &sw;
  in.queue_len = 264;
  in.slots_ready = 5;
  in.slots_busy = 5;
  in.workers_ready = 1;
  in.threads_per_worker = 5;
  in.arrivals = 376;
  in.completions = 200;
  in.service_cpu_mean_ns = PP_UNKNOWN_NS;
  in.gvl_wait_ns = PP_UNKNOWN_NS;
  in.mem_per_worker_bytes = -1;
  in.worker_cpu_ns = cpu;
  in.n_worker_cpu = 1;
  pp_observation o;
  CU_ASSERT_EQUAL_FATAL(pp_observation_build(&o, &in), 0);
  CU_ASSERT_EQUAL(o.gvl_wait_ns, PP_UNKNOWN_NS); /* unknown stays unknown, never 0 */
  setup(1, 5);
  pp_decision d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_SET_SLOTS);
  CU_ASSERT_EQUAL(o.gvl_wait_ns, PP_UNKNOWN_NS);
  /* Measured and under threads.gvl_wait_max (5 ms): slots. */
  in.gvl_wait_ns = 1 * (int64_t)MS;
  CU_ASSERT_EQUAL_FATAL(pp_observation_build(&o, &in), 0);
  setup(1, 5);
  CU_ASSERT_EQUAL(pp_decide(&P, &st, &o).action, PP_ACTION_SET_SLOTS);
  /* Measured at 20 ms: processes, even at 6% of a core. */
  in.gvl_wait_ns = 20 * (int64_t)MS;
  CU_ASSERT_EQUAL_FATAL(pp_observation_build(&o, &in), 0);
  setup(1, 5);
  CU_ASSERT_EQUAL(pp_decide(&P, &st, &o).action, PP_ACTION_SPAWN_WORKER);
}

/* The gradient design (slots.rule gradient): grows by sqrt(limit) while service time stays
 * within the tolerance of its baseline; past it, processes, and the slots shrink. */
static void test_slots_gradient(void) {
  setup(1, 16);
  P.slots_rule = PP_SLOTS_RULE_GRADIENT;
  pp_observation o = mkc(20, 1, 16, 300, 500 * MS, 600 * MS, 100, 16, 0.05, 300000);
  pp_decision d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_SET_SLOTS);
  CU_ASSERT_EQUAL(d.count, 20); /* 16 x 1 + sqrt(16) */
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "gradient 1.00"));
  CU_ASSERT_EQUAL(st.svc_base_ns, 500 * MS);
  /* Service 4x the baseline: gradient 0.5 (clamped), no growth, a spawn. */
  o = mkc(22, 1, 20, 300, 2000 * MS, 600 * MS, 100, 20, 0.95, 300000);
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_SPAWN_WORKER);
}

/* ---- rule 4b with Ractor slots (obs.ractor_cores) ---- */

/* mkc() for workers whose slots are Ractors on `cores` cores. */
static pp_observation mkr(uint64_t t, uint32_t workers, uint32_t tpw, double rate, uint64_t svc,
                          uint64_t p95, uint32_t len, uint32_t busy, double share, int64_t c_req,
                          uint32_t cores) {
  pp_observation o = mkc(t, workers, tpw, rate, svc, p95, len, busy, share, c_req);
  o.ractor_cores = cores;
  return o;
}

/* CPU-bound work on one worker near one core: threads (one GVL) get a process; Ractor slots (a
 * GVL each) on 2 cores grow to the cores first, S / c x 2 / 0.8 = 2 slots, without a fork. */
static void test_ractor_cpu_grows_slots_to_cores(void) {
  /* 55 rps x 17 ms (all CPU) / 0.7 = 1.34 slots + 10 queued x 17 ms / 1 s: 2 slots. */
  pp_observation o = mkr(20, 1, 1, 55, 17 * MS, 900 * MS, 10, 1, 0.98, 17 * MS, 0);
  setup(1, 1);
  pp_decision d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_SPAWN_WORKER);
  CU_ASSERT_PTR_NULL(strstr(d.reason, "Ractor"));
  setup(1, 1);
  o.ractor_cores = 2;
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_SET_SLOTS);
  CU_ASSERT_EQUAL(d.count, 2);
  CU_ASSERT_EQUAL(d.workers_target, 1);
  CU_ASSERT_NSTRING_EQUAL(d.reason, "set_slots 1->2: queue p95 900ms over severe 200ms", 49);
  CU_ASSERT_PTR_NOT_NULL(
      strstr(d.reason, "workers at 98% of a core (max 98%), Ractor slots: 98% of 2 cores"));
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "CPU bound 2"));
  CU_ASSERT_PTR_NULL(strstr(d.reason, "before a fork")); /* Little's law asked for 2 itself */
  /* On 4 cores the CPU bound is 4 / slots.cpu_target (0.8) = 5 slots, and Little's law's 2 is
   * what it grows to. */
  setup(1, 1);
  o.ractor_cores = 4;
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_SET_SLOTS);
  CU_ASSERT_EQUAL(d.count, 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "CPU bound 5"));
}

/* A breach Little's law finds 1 slot enough for (near the target): Ractor slots with cores to
 * spare grow by one, the cheap actuator, where threads fork (the sizing's floor of one). */
static void test_ractor_one_more_before_a_fork(void) {
  /* 20 rps x 17 ms / 0.7 = 0.49 slots + 3 queued x 17 ms / 1 s: 1 slot; but the request
   * arriving now waits (3 + 1) x 17 ms = 68 ms, over the 50 ms target, on a second breach
   * tick: not a backlog draining. */
  pp_observation o = mkr(20, 1, 1, 20, 17 * MS, 16 * MS, 3, 1, 0.35, 17 * MS, 0);
  setup(1, 1);
  st.breach_ticks = 1;
  CU_ASSERT_EQUAL(pp_decide(&P, &st, &o).action, PP_ACTION_SPAWN_WORKER);
  setup(1, 1);
  st.breach_ticks = 1;
  o.ractor_cores = 2;
  pp_decision d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_SET_SLOTS);
  CU_ASSERT_EQUAL(d.count, 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "sized 1 slots"));
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "; a Ractor before a fork"));
  /* At the CPU bound already (2 slots of 17 ms CPU fill 2 cores) no slot is added. */
  setup(1, 2);
  st.breach_ticks = 1;
  o = mkr(20, 1, 2, 20, 17 * MS, 16 * MS, 6, 2, 0.35, 17 * MS, 2); /* waits 7 x 17 / 2 ms */
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_SPAWN_WORKER);
}

/* The cores full: Ractor workers together at slots.cpu_target of the cores get no more slots;
 * processes as for threads, sized by CPU a worker's cores at a time; with the policy's cores
 * set, the cores bound holds them at one worker (a thread worker holds one core, so two). */
static void test_ractor_cores_full(void) {
  /* 1 worker x 2 Ractors at 1.9 cores (>= 0.8 x 2): 110 rps x 17 ms = 1.87 cores of work. */
  pp_observation o = mkr(20, 1, 2, 110, 17 * MS, 900 * MS, 30, 2, 1.9, 17 * MS, 2);
  o.service_cpu_mean_ns = 17 * MS; /* the cores bound reads the CPU share of service */
  setup(1, 2);
  pp_decision d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_SPAWN_WORKER);
  setup(1, 2);
  P.cores = 2;
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_NONE);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "at cores bound of 1 worker"));
  /* threads on the same policy: one core a worker, so a second one fits the 2 cores */
  setup(1, 2);
  P.cores = 2;
  o.ractor_cores = 0;
  o.cpu_share_mean = o.cpu_share_max = 0.98;
  CU_ASSERT_EQUAL(pp_decide(&P, &st, &o).action, PP_ACTION_SPAWN_WORKER);
  /* Two Ractor workers share the 2 cores: each one's CPU bound is S / c x 1 = 1 slot, so a
   * breach at 0.5 cores each (1 of 2 in all) with 1 slot each grows none. */
  setup(2, 1);
  o = mkr(20, 2, 1, 50, 17 * MS, 900 * MS, 10, 2, 0.5, 17 * MS, 2);
  CU_ASSERT_NOT_EQUAL(pp_decide(&P, &st, &o).action, PP_ACTION_SET_SLOTS);
}

/* Taking back: Ractor slots beyond the cores' bound go back once the cores are full; a Ractor
 * worker near one core of two keeps them (a thread worker there would give them back). */
static void test_ractor_taken_back_at_the_cores(void) {
  /* Not a breach, not calm (busy 5/6): S / c = 1, 2 cores: 2 slots carry the CPU. */
  pp_observation o = mkr(30, 1, 6, 110, 17 * MS, 0, 0, 5, 1.9, 17 * MS, 2);
  setup(1, 6);
  st.slots_base = 1;
  pp_decision d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_SET_SLOTS);
  CU_ASSERT_EQUAL(d.count, 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "at or over slots.cpu_target 80% of the cores"));
  CU_ASSERT_PTR_NOT_NULL(strstr(d.reason, "the CPU uses 2 slots"));
  setup(1, 6);
  st.slots_base = 1;
  o = mkr(30, 1, 6, 55, 17 * MS, 0, 0, 5, 0.95, 17 * MS, 2);
  CU_ASSERT_NOT_EQUAL(pp_decide(&P, &st, &o).action, PP_ACTION_SET_SLOTS);
  setup(1, 6);
  st.slots_base = 1;
  o.ractor_cores = 0;
  d = pp_decide(&P, &st, &o);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_SET_SLOTS);
  CU_ASSERT_EQUAL(d.count, 1);
}

int pp_test_register(void) {
  static const test_case cases[] = {
      {"breach for breach_ticks spawns", test_breach_spawns},
      {"severe tier acts on the first tick", test_severe_acts_first_tick},
      {"settled gate declines while booting", test_settled_gate},
      {"spawn cooldown", test_spawn_cooldown},
      {"hysteresis: no flapping around target", test_hysteresis_no_flapping},
      {"calm retires one at a time", test_calm_retires_one},
      {"retire guards", test_retire_guards},
      {"bounds: max, min, step", test_bounds},
      {"12x step sizes several workers", test_step_12x_sizes_several},
      {"cores and memory bound sizing", test_cores_and_memory_bound},
      {"draining backlog declines", test_draining_declines},
      {"unknown GVL never adds a thread", test_unknown_gvl_never_adds_thread},
      {"shedding on and off", test_shedding_on_off},
      {"state reconciles with observation", test_reconcile_dead_worker},
      {"invalid inputs give NONE with a reason", test_invalid_inputs},
      {"action names", test_action_names},
      {"determinism", test_determinism},
      {"standby: activated before forking", test_standby_activates_before_forking},
      {"standby: replacements refill the pool", test_standby_replacements},
      {"standby: declined cases", test_standby_declined},
      {"standby: gate and cooldowns hold forks, not activations", test_standby_gate_and_cooldowns},
      {"standby: replaces a dead worker at the floor", test_standby_floor},
      {"standby_cover: the pool behind the slots", test_standby_cover},
      {"standby_cover: the pool within the worker cap's room", test_standby_cover_room},
      {"standby_cover: an activation cools forks", test_standby_cover_activation_cools_forks},
      {"slots: I/O-bound grows slots sized by Little's law", test_slots_io_grows_by_little},
      {"slots: CPU-bound adds processes, not slots", test_slots_cpu_bound_spawns},
      {"slots: taken back (CPU, calm, processes added)", test_slots_taken_back},
      {"slots: configured slots cut on a GVL-bound worker, judged", test_slots_cut},
      {"slots: a slot for each queued request", test_slots_for_the_queue_before_a_fork},
      {"cores bound: the workers' CPU demand, not tpw x c / S", test_cores_bound_uses_cpu_demand},
      {"slots: inflation after an increase reverts it", test_slots_inflation_reverts},
      {"slots: a breach waits for slots still settling", test_slots_settling_holds_forks},
      {"slots: bounds, cooldown, settled gate", test_slots_bounds_and_gates},
      {"slots: the gradient design", test_slots_gradient},
      {"slots: unknown GVL wait stays unknown; measured wait means processes", test_slots_gvl_wait},
      {"Ractor slots: CPU-bound grows slots to the cores", test_ractor_cpu_grows_slots_to_cores},
      {"Ractor slots: one more slot before a fork", test_ractor_one_more_before_a_fork},
      {"Ractor slots: the cores full means processes, cores bound", test_ractor_cores_full},
      {"Ractor slots: taken back at the cores", test_ractor_taken_back_at_the_cores},
      {NULL, NULL},
  };
  return register_suite("decide", cases);
}
