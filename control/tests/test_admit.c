/* Tests for control/admit.c: each rule's verdict at hand-made queue states, the drain-rate
 * estimator against steady and changing completion streams, CoDel's interval logic, and
 * that the predicted rule is exactly the format-1 server rule. (The policy fields themselves
 * are tested with the policy, in test_policy.c.) */
#include "control/control.h"
#include "test_util.h"

#include <math.h>
#include <string.h>

#define MS    1000000ll
#define S     1000000000ll
#define NEVER INT64_MIN

static pp_policy policy(const char *yaml) {
  pp_policy p;
  pp_policy_error e;
  int rc = pp_policy_parse(&p, yaml, strlen(yaml), &e);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  return p;
}

static pp_admit_input input(int64_t now, uint32_t len, uint32_t ready, uint32_t busy,
                            uint64_t service, int64_t oldest, int shedding) {
  pp_admit_input in;
  memset(&in, 0, sizeof in);
  in.now_ns = now;
  in.queue_len = len;
  in.slots_ready = ready;
  in.slots_busy = busy;
  in.service_mean_ns = service;
  in.oldest_enqueue_ns = oldest;
  in.shedding = shedding;
  return in;
}

/* Feeds completions every `gap` ns from `from` to `to` (exclusive). */
static void complete_every(pp_admit_state *st, const pp_policy *p, int64_t from, int64_t to,
                           int64_t gap) {
  for (int64_t t = from; t < to; t += gap)
    pp_admit_complete(st, p, t);
}

/* One table for the arrival verdicts of the three rules. Budget 1s everywhere; the drain
 * cases have a warm estimator at 100 completions/s (8 slots, S 80ms: c/S is also 100/s). */
static void test_arrival_table(void) {
  static const struct {
    const char *name;
    const char *yaml;
    int warm_rate; /* completions per second fed for 2s before the decision, 0 = none */
    uint32_t len, ready, busy;
    uint64_t service_ns;
    int64_t oldest_age_ns; /* -1: nothing waits */
    int shedding;
    pp_admit_verdict want;
  } cases[] = {
      /* predicted: (L - free + 1) * S / c against the budget, only while shedding is on */
      {"pred: off while the tick says so", "shed: {enabled: true, budget: 1s, rule: predicted}", 0,
       500, 8, 8, 80 * MS, 5 * S, 0, PP_ADMIT_ACCEPT},
      {"pred: 99 ahead at 10ms each = 990ms", "shed: {enabled: true, budget: 1s, rule: predicted}",
       0, 98, 8, 8, 80 * MS, 900 * MS, 1, PP_ADMIT_ACCEPT},
      {"pred: 101 ahead = 1.01s", "shed: {enabled: true, budget: 1s, rule: predicted}", 0, 100, 8,
       8, 80 * MS, 900 * MS, 1, PP_ADMIT_SHED},
      {"pred: a free slot takes it", "shed: {enabled: true, budget: 1s, rule: predicted}", 0, 2, 8,
       5, 80 * MS, -1, 1, PP_ADMIT_ACCEPT},
      {"pred: no capacity sheds", "shed: {enabled: true, budget: 1s, rule: predicted}", 0, 0, 0, 0,
       80 * MS, -1, 1, PP_ADMIT_SHED},
      {"pred: nothing measured predicts 0", "shed: {enabled: true, budget: 1s, rule: predicted}", 0,
       500, 8, 8, 0, -1, 1, PP_ADMIT_ACCEPT},
      {"pred: disabled never sheds", "shed: {enabled: false, budget: 1s, rule: predicted}", 0, 5000,
       8, 8, 80 * MS, -1, 1, PP_ADMIT_ACCEPT},
      /* drain: (L - free + 1) / mu, every arrival, whatever the tick says */
      {"drain: 98 ahead at 100/s = 0.98s", "shed: {enabled: true, budget: 1s, rule: drain}", 100,
       97, 8, 8, 80 * MS, 900 * MS, 0, PP_ADMIT_ACCEPT},
      {"drain: 103 ahead", "shed: {enabled: true, budget: 1s, rule: drain}", 100, 102, 8, 8,
       80 * MS, 900 * MS, 0, PP_ADMIT_SHED},
      /* S says 10ms per request (c/S = 800/s) but only 100/s complete: the measured rate wins */
      {"drain: S optimistic, drain slow", "shed: {enabled: true, budget: 1s, rule: drain}", 100,
       200, 8, 8, 10 * MS, 900 * MS, 0, PP_ADMIT_SHED},
      {"pred: same state, S optimistic", "shed: {enabled: true, budget: 1s, rule: predicted}", 0,
       200, 8, 8, 10 * MS, 900 * MS, 1, PP_ADMIT_ACCEPT},
      {"drain: cold falls back to c/S", "shed: {enabled: true, budget: 1s, rule: drain}", 0, 99, 8,
       8, 80 * MS, -1, 0, PP_ADMIT_ACCEPT},
      {"drain: cold c/S over budget", "shed: {enabled: true, budget: 1s, rule: drain}", 0, 101, 8,
       8, 80 * MS, -1, 0, PP_ADMIT_SHED},
      {"drain: free slot", "shed: {enabled: true, budget: 1s, rule: drain}", 100, 3, 8, 4, 80 * MS,
       -1, 0, PP_ADMIT_ACCEPT},
      {"drain: no capacity", "shed: {enabled: true, budget: 1s, rule: drain}", 100, 0, 0, 0,
       80 * MS, -1, 0, PP_ADMIT_SHED},
      {"drain: disabled", "shed: {enabled: false, budget: 1s, rule: drain}", 100, 5000, 8, 8,
       80 * MS, -1, 0, PP_ADMIT_ACCEPT},
      /* codel: a lone arrival decides nothing over an interval (see the interval test) */
      {"codel: young queue", "shed: {enabled: true, budget: 1s, rule: codel}", 0, 500, 8, 8,
       80 * MS, 10 * MS, 1, PP_ADMIT_ACCEPT},
      {"codel: old head, but first sighting", "shed: {enabled: true, budget: 1s, rule: codel}", 0,
       500, 8, 8, 80 * MS, 5 * S, 1, PP_ADMIT_ACCEPT},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    pp_policy p = policy(cases[i].yaml);
    pp_admit_state st;
    pp_admit_state_init(&st);
    int64_t now = 10 * S;
    if (cases[i].warm_rate) complete_every(&st, &p, now - 2 * S, now, S / cases[i].warm_rate);
    int64_t oldest = cases[i].oldest_age_ns < 0 ? NEVER : now - cases[i].oldest_age_ns;
    pp_admit_input in = input(now, cases[i].len, cases[i].ready, cases[i].busy, cases[i].service_ns,
                              oldest, cases[i].shedding);
    pp_admit_verdict v = pp_admit_arrival(&st, &p, &in);
    if (v != cases[i].want)
      fprintf(stderr, "case %zu (%s): got %d, want %d (wait %llu)\n", i, cases[i].name, v,
              cases[i].want, (unsigned long long)pp_admit_predicted_wait(&st, &p, &in));
    CU_ASSERT_EQUAL(v, cases[i].want);
    CU_ASSERT_EQUAL(st.accepted + st.shed_at_arrival, 1);
    /* Arrivals under predicted and drain never change the rules' state. */
    if (p.shed_rule != PP_SHED_RULE_CODEL) {
      pp_admit_state again = st;
      pp_admit_arrival(&again, &p, &in);
      CU_ASSERT_EQUAL(again.rate_count, st.rate_count);
      CU_ASSERT_EQUAL(again.overloaded, 0);
    }
  }
}

/* The predicted rule is the format-1 server rule, bit for bit: shed iff shedding is on and
 * pp_observation_predicted_wait (UINT64_MAX included) exceeds the budget. Differential over
 * random states. */
static void test_predicted_is_format1(void) {
  pp_policy p = policy("shed: {enabled: true, budget: 250ms, rule: predicted}");
  test_rng r = {42};
  for (int i = 0; i < 100000; i++) {
    pp_admit_state st;
    pp_admit_state_init(&st);
    uint32_t ready = (uint32_t)(rng_next(&r) % 20);
    uint32_t busy = ready ? (uint32_t)(rng_next(&r) % (ready + 1)) : 0;
    uint32_t len = (uint32_t)(rng_next(&r) % 400);
    uint64_t svc = rng_next(&r) % (200 * MS);
    int shedding = (int)(rng_next(&r) & 1);
    pp_admit_input in = input((int64_t)i * MS, len, ready, busy, svc, NEVER, shedding);
    pp_observation o;
    memset(&o, 0, sizeof o);
    o.queue_len = len;
    o.slots_ready = ready;
    o.slots_busy = busy;
    o.service_mean_ns = svc;
    uint64_t w = pp_observation_predicted_wait(&o);
    int want = shedding && (w != UINT64_MAX ? w > 250 * MS : 1);
    CU_ASSERT_EQUAL(pp_admit_arrival(&st, &p, &in), want ? PP_ADMIT_SHED : PP_ADMIT_ACCEPT);
    CU_ASSERT_EQUAL(pp_admit_predicted_wait(&st, &p, &in), w);
    CU_ASSERT_EQUAL(pp_admit_dequeue(&st, &p, &in, 10 * S), PP_ADMIT_ACCEPT);
  }
}

/* The drain-rate EWMA: unbiased on a steady stream from half a window on; follows a change
 * of rate within a few windows; decays towards 0 while nothing completes (a stuck server);
 * restarts after a gap longer than the window. */
static void test_drain_rate_estimator(void) {
  pp_policy p = policy("shed: {enabled: true, budget: 1s, rule: drain, rate_window: 1s}");
  pp_admit_state st;
  pp_admit_state_init(&st);
  pp_admit_input in = input(0, 10, 8, 8, 100 * MS, NEVER, 0); /* c/S = 80/s */
  /* No data: c/S. */
  CU_ASSERT_DOUBLE_EQUAL(pp_admit_drain_rate(&st, &p, &in), 80.0, 1e-9);
  /* 360/s, evenly: still c/S before half a window, then within 1% of 360 at once. */
  complete_every(&st, &p, 0, 400 * MS, S / 360);
  in.now_ns = 400 * MS;
  CU_ASSERT_DOUBLE_EQUAL(pp_admit_drain_rate(&st, &p, &in), 80.0, 1e-9);
  complete_every(&st, &p, 400 * MS + 1, 600 * MS, S / 360);
  in.now_ns = 600 * MS;
  CU_ASSERT_DOUBLE_EQUAL(pp_admit_drain_rate(&st, &p, &in), 360.0, 3.6);
  complete_every(&st, &p, 600 * MS + 1, 5 * S, S / 360);
  in.now_ns = 5 * S;
  CU_ASSERT_DOUBLE_EQUAL(pp_admit_drain_rate(&st, &p, &in), 360.0, 3.6);
  /* The rate halves: after 3 time constants the estimate is within 5% of the new rate
   * (the old one's weight is e^-3 = 5%). */
  complete_every(&st, &p, 5 * S, 8 * S, S / 180);
  in.now_ns = 8 * S;
  double mu = pp_admit_drain_rate(&st, &p, &in);
  CU_ASSERT(mu > 180.0 && mu < 180.0 * 1.06);
  /* Nothing completes for 3s with every slot busy: the estimate decays by e^-3. */
  in.now_ns = 11 * S;
  CU_ASSERT(pp_admit_drain_rate(&st, &p, &in) < mu * 0.06);
  /* ...so the drain rule sheds a short queue that the S-based rule would admit. */
  pp_admit_state stuck = st;
  pp_admit_input few = input(11 * S, 20, 8, 8, 100 * MS, 11 * S - 3 * S, 1);
  CU_ASSERT_EQUAL(pp_admit_arrival(&stuck, &p, &few), PP_ADMIT_SHED);
  pp_policy pred = policy("shed: {enabled: true, budget: 1s, rule: predicted}");
  CU_ASSERT_EQUAL(pp_admit_arrival(&stuck, &pred, &few), PP_ADMIT_ACCEPT);
  /* The first completion after the gap restarts the estimator: c/S again until half a window
   * of new data, then the new rate. */
  pp_admit_complete(&st, &p, 11 * S);
  in.now_ns = 11 * S + 100 * MS;
  CU_ASSERT_DOUBLE_EQUAL(pp_admit_drain_rate(&st, &p, &in), 80.0, 1e-9);
  complete_every(&st, &p, 11 * S + 1, 12 * S, S / 50);
  in.now_ns = 12 * S;
  CU_ASSERT_DOUBLE_EQUAL(pp_admit_drain_rate(&st, &p, &in), 50.0, 1.0);
  /* c = 0: no drain at all; S = 0 and no data: no basis, infinite. */
  pp_admit_state fresh;
  pp_admit_state_init(&fresh);
  pp_admit_input none = input(0, 10, 0, 0, 100 * MS, NEVER, 0);
  CU_ASSERT_EQUAL(pp_admit_drain_rate(&fresh, &p, &none), 0.0);
  CU_ASSERT_EQUAL(pp_admit_predicted_wait(&fresh, &p, &none), UINT64_MAX);
  none = input(0, 10, 4, 4, 0, NEVER, 0);
  CU_ASSERT(isinf(pp_admit_drain_rate(&fresh, &p, &none)));
  CU_ASSERT_EQUAL(pp_admit_predicted_wait(&fresh, &p, &none), 0);
}

/* The estimator on Poisson completions: the estimate's mean over many instants is within 2%
 * of the rate, and its relative spread about 1 / sqrt(2 * rate * tau). */
static void test_drain_rate_poisson(void) {
  pp_policy p = policy("shed: {enabled: true, rule: drain, rate_window: 500ms}");
  pp_admit_state st;
  pp_admit_state_init(&st);
  test_rng r = {7};
  double t = 0, sum = 0, sum2 = 0;
  int n = 0;
  const double rate = 360.0;
  double next_probe = 2e9;
  while (t < 200e9) {
    t += -log(1.0 - rng_unit(&r)) / rate * 1e9;
    while (next_probe < t) {
      pp_admit_input in = input((int64_t)next_probe, 1, 8, 8, 100 * MS, NEVER, 0);
      double mu = pp_admit_drain_rate(&st, &p, &in);
      sum += mu;
      sum2 += mu * mu;
      n++;
      next_probe += 0.1e9;
    }
    pp_admit_complete(&st, &p, (int64_t)t);
  }
  double mean = sum / n, sd = sqrt(sum2 / n - mean * mean);
  CU_ASSERT_DOUBLE_EQUAL(mean, rate, rate * 0.02);
  double want_sd = rate / sqrt(2 * rate * 0.5);
  CU_ASSERT(sd > want_sd * 0.8 && sd < want_sd * 1.2);
}

/* CoDel: overloaded only after the oldest waiting request has been over the target for a
 * whole interval without a break; one sighting under the target (or an empty queue) clears
 * it; while overloaded, arrivals with no free slot and dequeued requests that waited more
 * than the budget are shed. */
static void test_codel_interval(void) {
  pp_policy p = policy("shed: {enabled: true, budget: 1s, rule: codel, target: 50ms, "
                       "interval: 500ms}");
  pp_admit_state st;
  pp_admit_state_init(&st);
  struct step {
    int64_t now_ms;
    int kind;           /* 0 arrival, 1 dequeue */
    int64_t oldest_ms;  /* enqueue time of the oldest waiting, -1 none */
    int64_t sojourn_ms; /* dequeue only */
    pp_admit_verdict want;
    int overloaded_after; /* st.overloaded after the call */
  } steps[] = {
      {0, 0, -1, 0, PP_ADMIT_ACCEPT, 0},      /* empty queue */
      {100, 0, 60, 0, PP_ADMIT_ACCEPT, 0},    /* oldest 40ms old: under target */
      {200, 0, 120, 0, PP_ADMIT_ACCEPT, 0},   /* 80ms: over target; the interval starts here */
      {500, 1, 300, 320, PP_ADMIT_ACCEPT, 0}, /* 200ms old, 300ms into the interval */
      {699, 0, 500, 0, PP_ADMIT_ACCEPT, 0},   /* 499ms: not yet a whole interval */
      {700, 0, 500, 0, PP_ADMIT_SHED, 1},     /* 500ms over target: overloaded, shed */
      {800, 0, 500, 0, PP_ADMIT_SHED, 1},
      {900, 1, 500, 1200, PP_ADMIT_SHED, 1},  /* waited 1.2s > budget: shed at dequeue */
      {910, 1, 600, 900, PP_ADMIT_ACCEPT, 1}, /* 900ms: within budget, served */
      {920, 1, 890, 800, PP_ADMIT_ACCEPT, 0}, /* the new oldest is 30ms old: cleared */
      {930, 0, 890, 0, PP_ADMIT_ACCEPT, 0},   /* 40ms: under target */
      {1000, 0, 900, 0, PP_ADMIT_ACCEPT, 0},  /* 100ms over: a new interval starts */
      {1400, 0, 900, 0, PP_ADMIT_ACCEPT, 0},
      {1450, 1, -1, 900, PP_ADMIT_ACCEPT, 0}, /* queue emptied: cleared, interval restarts */
      {1500, 0, 1400, 0, PP_ADMIT_ACCEPT, 0},
      {1999, 0, 1400, 0, PP_ADMIT_ACCEPT, 0}, /* 499ms since it restarted */
      {2000, 0, 1400, 0, PP_ADMIT_SHED, 1},
  };
  for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
    int64_t now = steps[i].now_ms * MS;
    int64_t oldest = steps[i].oldest_ms < 0 ? NEVER : steps[i].oldest_ms * MS;
    pp_admit_input in = input(now, oldest == NEVER ? 0 : 50, 8, 8, 20 * MS, oldest, 0);
    pp_admit_verdict v = steps[i].kind == 0
                             ? pp_admit_arrival(&st, &p, &in)
                             : pp_admit_dequeue(&st, &p, &in, (uint64_t)steps[i].sojourn_ms * MS);
    if (v != steps[i].want || st.overloaded != steps[i].overloaded_after)
      fprintf(stderr, "step %zu (t=%lldms): verdict %d want %d, overloaded %d want %d\n", i,
              (long long)steps[i].now_ms, v, steps[i].want, st.overloaded,
              steps[i].overloaded_after);
    CU_ASSERT_EQUAL(v, steps[i].want);
    CU_ASSERT_EQUAL(st.overloaded, steps[i].overloaded_after);
  }
  CU_ASSERT_EQUAL(st.shed_at_dequeue, 1);
  CU_ASSERT_EQUAL(st.shed_at_arrival, 3);
  /* Overloaded, but a slot is free: the arrival runs at once. */
  pp_admit_input freeslot = input(2001 * MS, 0, 8, 7, 20 * MS, 1400 * MS, 0);
  CU_ASSERT_EQUAL(pp_admit_arrival(&st, &p, &freeslot), PP_ADMIT_ACCEPT);
  /* What codel reports as its predicted wait is the oldest request's age. */
  CU_ASSERT_EQUAL(pp_admit_predicted_wait(&st, &p, &freeslot), 601 * MS);
}

/* Dequeue never sheds under predicted and drain, and never for a request that did not wait. */
static void test_dequeue_only_codel(void) {
  const char *rules[] = {"shed: {enabled: true, budget: 1s, rule: predicted}",
                         "shed: {enabled: true, budget: 1s, rule: drain}"};
  for (int k = 0; k < 2; k++) {
    pp_policy p = policy(rules[k]);
    pp_admit_state st;
    pp_admit_state_init(&st);
    pp_admit_input in = input(10 * S, 5000, 8, 8, 20 * MS, 0, 1);
    CU_ASSERT_EQUAL(pp_admit_dequeue(&st, &p, &in, 9 * S), PP_ADMIT_ACCEPT);
  }
  pp_policy p = policy("shed: {enabled: true, budget: 1ns, rule: codel}");
  pp_admit_state st;
  pp_admit_state_init(&st);
  st.overloaded = 1;
  pp_admit_input in = input(10 * S, 0, 8, 8, 20 * MS, NEVER, 0);
  CU_ASSERT_EQUAL(pp_admit_dequeue(&st, &p, &in, 0), PP_ADMIT_ACCEPT);
}

/* Feeds completions at `rate` per second for 2s before `until` (a warm drain-rate estimator). */
static void warm(pp_admit_state *st, const pp_policy *p, int64_t until, double rate) {
  complete_every(st, p, until - 2 * S, until, (int64_t)(1e9 / rate));
}

/* controlled, burst mode: the budget is judged with the faster of the measured drain and
 * c / S, so a burst from a quiet server (completions 100/s, slots 8 / 22ms = 364/s) is
 * admitted up to the budget, where drain alone would shed it; breaking the budget sheds and
 * starts a standing period. */
static void test_controlled_burst_absorbed(void) {
  pp_policy p = policy("shed: {enabled: true, budget: 1s, rule: controlled}");
  pp_policy d = policy("shed: {enabled: true, budget: 1s, rule: drain}");
  pp_admit_state st, sd;
  pp_admit_state_init(&st);
  pp_admit_state_init(&sd);
  int64_t t = 10 * S;
  warm(&st, &p, t, 100);
  warm(&sd, &d, t, 100);
  /* 300 waiting, all 8 slots busy: 301 ahead / 364 per s = 0.83s (drain: 301 / 100 = 3s) */
  pp_admit_input in = input(t, 300, 8, 8, 22 * MS, t - 600 * MS, 0);
  CU_ASSERT_EQUAL(pp_admit_arrival(&st, &p, &in), PP_ADMIT_ACCEPT);
  CU_ASSERT_EQUAL(pp_admit_arrival(&sd, &d, &in), PP_ADMIT_SHED);
  CU_ASSERT_EQUAL(st.standing, 0);
  /* a request that waited 900ms in a burst is served: only a standing queue has the cap */
  in = input(t + MS, 299, 8, 8, 22 * MS, t - 590 * MS, 0);
  CU_ASSERT_EQUAL(pp_admit_dequeue(&st, &p, &in, 900 * MS), PP_ADMIT_ACCEPT);
  CU_ASSERT_EQUAL(st.standing, 0);
  /* 370 waiting: 371 / 364 = 1.02s over the budget: shed, and the queue is standing */
  in = input(t + 2 * MS, 370, 8, 8, 22 * MS, t - 600 * MS, 0);
  CU_ASSERT_EQUAL(pp_admit_arrival(&st, &p, &in), PP_ADMIT_SHED);
  CU_ASSERT_EQUAL(st.standing, 1);
  CU_ASSERT_EQUAL(st.standing_entries, 1);
  CU_ASSERT_EQUAL(st.standing_since_ns, t + 2 * MS);
  CU_ASSERT(st.entry_wait_ns > 1000 * MS && st.entry_wait_ns < 1030 * MS);
  CU_ASSERT_EQUAL(st.shed_at_arrival, 1);
  CU_ASSERT_EQUAL(st.accepted, 1);
}

/* controlled, burst mode, once requests have waited for 2c completions: the budget is judged
 * with the completions per second since the busy period began, not with c / S (which a mix of
 * short requests before the burst makes optimistic, here 8 / 11ms = 727/s against a real drain
 * of 333/s); an empty queue ends the busy period. */
static void test_controlled_busy_rate(void) {
  pp_policy p = policy("shed: {enabled: true, budget: 1s}");
  pp_admit_state st;
  pp_admit_state_init(&st);
  int64_t t = 10 * S;
  warm(&st, &p, t, 100);
  pp_admit_input in = input(t, 0, 8, 8, 11 * MS, NEVER, 0); /* no free slot: the period begins */
  CU_ASSERT_EQUAL(pp_admit_arrival(&st, &p, &in), PP_ADMIT_ACCEPT);
  CU_ASSERT_EQUAL(st.busy_since_ns, t);
  /* 15 completions in 45ms: fewer than 2c, c / S still judges: 341 / 727 = 0.47s */
  complete_every(&st, &p, t + 3 * MS, t + 48 * MS, 3 * MS);
  in = input(t + 48 * MS, 340, 8, 8, 11 * MS, t, 0);
  CU_ASSERT_EQUAL(pp_admit_arrival(&st, &p, &in), PP_ADMIT_ACCEPT);
  /* 50 completions by 150ms (333/s): 341 / 333 = 1.02s breaks the budget */
  complete_every(&st, &p, t + 48 * MS, t + 151 * MS, 3 * MS);
  CU_ASSERT_EQUAL(st.completions - st.busy_completions0, 50);
  in = input(t + 150 * MS, 330, 8, 8, 11 * MS, t, 0); /* 331 / 333 = 0.99s */
  CU_ASSERT_EQUAL(pp_admit_arrival(&st, &p, &in), PP_ADMIT_ACCEPT);
  in = input(t + 150 * MS, 340, 8, 8, 11 * MS, t, 0);
  CU_ASSERT_EQUAL(pp_admit_arrival(&st, &p, &in), PP_ADMIT_SHED);
  CU_ASSERT_EQUAL(st.standing, 1);
  /* a dequeue that leaves nobody waiting ends the busy period */
  pp_admit_state_init(&st);
  in = input(t, 3, 8, 8, 11 * MS, t, 0);
  pp_admit_arrival(&st, &p, &in);
  CU_ASSERT_EQUAL(st.busy_since_ns, t);
  in = input(t + MS, 0, 8, 8, 11 * MS, NEVER, 0);
  CU_ASSERT_EQUAL(pp_admit_dequeue(&st, &p, &in, MS), PP_ADMIT_ACCEPT);
  CU_ASSERT_EQUAL(st.busy_since_ns, NEVER);
}

/* controlled, standing: arrivals are judged by the measured drain against the cap (2 x S),
 * requests taken off the queue after waiting more than the cap are shed, a free slot still
 * takes an arrival; nothing shed for shed.interval ends the standing period, after which the
 * budget applies again. */
static void test_controlled_standing_cap_and_recovery(void) {
  /* target_queue_p95 20ms: the cap is 2 x S = 40ms, over the 30ms the controller must see */
  pp_policy p =
      policy("target_queue_p95: 20ms\nshed: {enabled: true, budget: 1s, interval: 500ms}");
  CU_ASSERT_EQUAL(p.shed_rule, PP_SHED_RULE_CONTROLLED); /* the default rule */
  pp_admit_state st;
  pp_admit_state_init(&st);
  int64_t t = 10 * S;
  warm(&st, &p, t, 400); /* 400 completions/s */
  pp_admit_input in = input(t, 500, 8, 8, 20 * MS, t - 900 * MS, 0);
  CU_ASSERT_EQUAL(pp_admit_arrival(&st, &p, &in), PP_ADMIT_SHED); /* 501/400: standing */
  CU_ASSERT_EQUAL(st.standing, 1);
  CU_ASSERT_EQUAL(pp_admit_standing_wait(&p, &in), 40 * MS);
  /* the stale backlog goes at dequeue: waited 900ms > 40ms */
  in = input(t + MS, 499, 8, 7, 20 * MS, t - 890 * MS, 0);
  CU_ASSERT_EQUAL(pp_admit_dequeue(&st, &p, &in, 900 * MS), PP_ADMIT_SHED);
  CU_ASSERT_EQUAL(pp_admit_dequeue(&st, &p, &in, 41 * MS), PP_ADMIT_SHED);
  CU_ASSERT_EQUAL(pp_admit_dequeue(&st, &p, &in, 40 * MS), PP_ADMIT_ACCEPT);
  CU_ASSERT_EQUAL(st.shed_at_dequeue, 2);
  /* arrivals: 14 waiting = 15 ahead / 400 = 37.5ms, under the cap; 16 = 42.5ms, over */
  in = input(t + 10 * MS, 14, 8, 8, 20 * MS, t, 0);
  CU_ASSERT_EQUAL(pp_admit_arrival(&st, &p, &in), PP_ADMIT_ACCEPT);
  in = input(t + 10 * MS, 16, 8, 8, 20 * MS, t, 0);
  CU_ASSERT_EQUAL(pp_admit_arrival(&st, &p, &in), PP_ADMIT_SHED);
  in = input(t + 10 * MS, 0, 8, 7, 20 * MS, NEVER, 0); /* a free slot takes it at once */
  CU_ASSERT_EQUAL(pp_admit_arrival(&st, &p, &in), PP_ADMIT_ACCEPT);
  /* recovery: the last shed was at t + 10ms; 499ms later it still stands, 500ms ends it */
  in = input(t + 509 * MS, 16, 8, 8, 20 * MS, t + 480 * MS, 0);
  CU_ASSERT_EQUAL(pp_admit_dequeue(&st, &p, &in, 30 * MS), PP_ADMIT_ACCEPT);
  CU_ASSERT_EQUAL(st.standing, 1);
  in = input(t + 510 * MS, 16, 8, 8, 20 * MS, t + 480 * MS, 0);
  CU_ASSERT_EQUAL(pp_admit_arrival(&st, &p, &in), PP_ADMIT_ACCEPT); /* 42.5ms: budget again */
  CU_ASSERT_EQUAL(st.standing, 0);
  in = input(t + 511 * MS, 300, 8, 8, 20 * MS, t, 0);
  CU_ASSERT_EQUAL(pp_admit_dequeue(&st, &p, &in, 700 * MS), PP_ADMIT_ACCEPT);
  CU_ASSERT_EQUAL(pp_admit_arrival(&st, &p, &in), PP_ADMIT_ACCEPT); /* 301/400 = 0.75s */
  CU_ASSERT_EQUAL(st.standing_entries, 1);
  /* disabled: never sheds, never stands */
  pp_policy off = policy("shed: {enabled: false}");
  pp_admit_state so;
  pp_admit_state_init(&so);
  in = input(t, 100000, 8, 8, 20 * MS, 0, 0);
  CU_ASSERT_EQUAL(pp_admit_arrival(&so, &off, &in), PP_ADMIT_ACCEPT);
  CU_ASSERT_EQUAL(pp_admit_dequeue(&so, &off, &in, 100 * S), PP_ADMIT_ACCEPT);
  CU_ASSERT_EQUAL(so.standing, 0);
}

/* shed.standing_wait: explicit, auto from S and never under 1.5 x target_queue_p95,
 * shed.target while S is unknown, 1ms floor, the budget as ceiling. */
static void test_standing_wait(void) {
  pp_admit_input in = input(S, 0, 8, 0, 22 * MS, NEVER, 0);
  pp_policy p = policy("target_queue_p95: 20ms\nshed: {enabled: true}");
  CU_ASSERT_EQUAL(pp_admit_standing_wait(&p, &in), 44 * MS);
  /* auto keeps the standing queue visible to the controller: at least 1.5 x target_queue_p95
   * (the default 50ms: 75ms) */
  p = policy("shed: {enabled: true}");
  CU_ASSERT_EQUAL(pp_admit_standing_wait(&p, &in), 75 * MS);
  in.service_mean_ns = 60 * MS;
  CU_ASSERT_EQUAL(pp_admit_standing_wait(&p, &in), 120 * MS);
  in.service_mean_ns = 22 * MS;
  p = policy("shed: {enabled: true, standing_wait: 30ms}");
  CU_ASSERT_EQUAL(pp_admit_standing_wait(&p, &in), 30 * MS);
  p = policy("target_queue_p95: 20ms\nshed: {enabled: true, target: 70ms}");
  in.service_mean_ns = 0;
  CU_ASSERT_EQUAL(pp_admit_standing_wait(&p, &in), 70 * MS);
  p = policy("target_queue_p95: 200us\nshed: {enabled: true}");
  in.service_mean_ns = 100000; /* 100us: 200us (and 300us for the controller), floored */
  CU_ASSERT_EQUAL(pp_admit_standing_wait(&p, &in), 1 * MS);
  p = policy("shed: {enabled: true, budget: 300ms}");
  in.service_mean_ns = 200 * MS; /* 400ms: capped at the budget */
  CU_ASSERT_EQUAL(pp_admit_standing_wait(&p, &in), 300 * MS);
  p = policy("shed: {enabled: true, budget: 300ms, standing_wait: 1s}");
  CU_ASSERT_EQUAL(pp_admit_standing_wait(&p, &in), 300 * MS);
}

/* controlled-codel stands once the oldest has been over the cap for shed.interval (drain's
 * budget still applies before that, without standing); controlled-lifo asks for newest first
 * only while standing. */
static void test_controlled_variants(void) {
  pp_policy p = policy("target_queue_p95: 20ms\nshed: {enabled: true, budget: 1s, "
                       "rule: controlled-codel, interval: 100ms}");
  pp_admit_state st;
  pp_admit_state_init(&st);
  int64_t t = 10 * S;
  warm(&st, &p, t, 400);
  pp_admit_input in = input(t, 20, 8, 8, 20 * MS, t - 50 * MS, 0); /* oldest 50ms > cap 40ms */
  CU_ASSERT_EQUAL(pp_admit_arrival(&st, &p, &in), PP_ADMIT_ACCEPT);
  in = input(t + 99 * MS, 20, 8, 8, 20 * MS, t - 50 * MS, 0);
  CU_ASSERT_EQUAL(pp_admit_arrival(&st, &p, &in), PP_ADMIT_ACCEPT);
  CU_ASSERT_EQUAL(st.standing, 0);
  in = input(t + 100 * MS, 20, 8, 8, 20 * MS, t - 50 * MS, 0);
  CU_ASSERT_EQUAL(pp_admit_arrival(&st, &p, &in), PP_ADMIT_SHED); /* 21/400 = 52ms > 40ms */
  CU_ASSERT_EQUAL(st.standing, 1);
  CU_ASSERT_EQUAL(pp_admit_lifo(&st, &p), 0);
  pp_policy l = policy("target_queue_p95: 20ms\nshed: {enabled: true, budget: 1s, "
                       "rule: controlled-lifo}");
  pp_admit_state sl;
  pp_admit_state_init(&sl);
  warm(&sl, &l, t, 400);
  CU_ASSERT_EQUAL(pp_admit_lifo(&sl, &l), 0);
  in = input(t, 500, 8, 8, 20 * MS, t - 900 * MS, 0);
  CU_ASSERT_EQUAL(pp_admit_arrival(&sl, &l, &in), PP_ADMIT_SHED);
  CU_ASSERT_EQUAL(pp_admit_lifo(&sl, &l), 1);
}

/* The one-line reason, in both modes, and snprintf-like truncation. */
static void test_controlled_reason(void) {
  pp_policy p = policy("target_queue_p95: 20ms\nshed: {enabled: true, budget: 1s}");
  pp_admit_state st;
  pp_admit_state_init(&st);
  char buf[256];
  pp_admit_input in = input(12300 * MS, 0, 8, 0, 22 * MS, NEVER, 0);
  pp_admit_reason(&st, &p, &in, buf, sizeof buf);
  CU_ASSERT_STRING_EQUAL(buf, "burst: admitting up to the budget 1.00s");
  in = input(12300 * MS, 400, 8, 8, 22 * MS, 11 * S, 0);
  CU_ASSERT_EQUAL(pp_admit_arrival(&st, &p, &in), PP_ADMIT_SHED);
  int n = pp_admit_reason(&st, &p, &in, buf, sizeof buf);
  CU_ASSERT_STRING_EQUAL(buf, "standing queue since 12.30s: drain wait 1.10s broke the budget "
                              "1.00s; capping waits at 44.0ms (2 x service 22.0ms)");
  CU_ASSERT_EQUAL((size_t)n, strlen(buf));
  char small[11];
  CU_ASSERT_EQUAL(pp_admit_reason(&st, &p, &in, small, sizeof small), n);
  CU_ASSERT_STRING_EQUAL(small, "standing q");
  pp_policy d = policy("shed: {enabled: true, budget: 2s, rule: drain}");
  pp_admit_reason(&st, &d, &in, buf, sizeof buf);
  CU_ASSERT_STRING_EQUAL(buf, "drain: budget 2.00s");
  pp_policy dflt = policy("shed: {enabled: true, budget: 1s}");
  pp_admit_reason(&st, &dflt, &in, buf, sizeof buf);
  CU_ASSERT_PTR_NOT_NULL(
      strstr(buf, "; capping waits at 75.0ms (1.5 x target_queue_p95, so the controller sees it)"));
  pp_policy off = policy("shed: {enabled: false}");
  pp_admit_reason(&st, &off, &in, buf, sizeof buf);
  CU_ASSERT_STRING_EQUAL(buf, "shedding disabled");
}

int pp_test_register(void) {
  static const test_case cases[] = {
      {"arrival verdicts of every rule", test_arrival_table},
      {"predicted is the format-1 rule", test_predicted_is_format1},
      {"drain-rate estimator", test_drain_rate_estimator},
      {"drain-rate estimator on Poisson completions", test_drain_rate_poisson},
      {"codel interval logic", test_codel_interval},
      {"dequeue sheds only under codel", test_dequeue_only_codel},
      {"controlled: a burst within the budget is absorbed", test_controlled_burst_absorbed},
      {"controlled: the busy period's drain rate judges the budget", test_controlled_busy_rate},
      {"controlled: standing cap and recovery", test_controlled_standing_cap_and_recovery},
      {"controlled: standing wait", test_standing_wait},
      {"controlled: codel and lifo variants", test_controlled_variants},
      {"controlled: reason text", test_controlled_reason},
      {NULL, NULL},
  };
  return register_suite("admit", cases);
}
