/* Admission control (see admit.h for the rules; docs/CONTROL.md §5 for the why).
 *
 * The drain-rate estimator is an exponentially decayed count of completions: each completion
 * adds 1 and the count decays as e^-(age/tau) with tau = shed.rate_window, so for a steady
 * rate mu the count tends to mu * tau. Dividing by tau * (1 - e^-(T/tau)), where T is how long
 * the estimator has been collecting, removes the start-up bias, so the estimate is unbiased
 * from T = tau / 2 on (before that, c / S is used). Workload: one call per arrival, dequeue
 * and completion; each is O(1) with at most two exp() calls. */
#include "control/control.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>

#define NEVER INT64_MIN

void pp_admit_state_init(pp_admit_state *st) {
  st->rate_count = 0;
  st->rate_last_ns = NEVER;
  st->rate_since_ns = NEVER;
  st->above_since_ns = NEVER;
  st->overloaded = 0;
  st->standing = 0;
  st->standing_since_ns = NEVER;
  st->last_shed_ns = NEVER;
  st->entry_wait_ns = 0;
  st->standing_entries = 0;
  st->completions = 0;
  st->busy_since_ns = NEVER;
  st->busy_completions0 = 0;
  st->accepted = st->shed_at_arrival = st->shed_at_dequeue = 0;
}

static double elapsed_ns(int64_t now, int64_t then) {
  return now > then ? (double)now - (double)then : 0.0;
}

void pp_admit_complete(pp_admit_state *st, const pp_policy *p, int64_t now_ns) {
  st->completions++;
  double tau = (double)p->shed_rate_window_ns;
  if (st->rate_last_ns == NEVER || elapsed_ns(now_ns, st->rate_last_ns) > tau) {
    /* First completion, or the first after a long gap: restart from here. This completion
     * marks the start and is not counted, so the count covers (since, now]. */
    st->rate_count = 0;
    st->rate_since_ns = now_ns;
  } else {
    st->rate_count = st->rate_count * exp(-elapsed_ns(now_ns, st->rate_last_ns) / tau) + 1.0;
  }
  st->rate_last_ns = now_ns;
}

double pp_admit_drain_rate(const pp_admit_state *st, const pp_policy *p, const pp_admit_input *in) {
  if (in->slots_ready == 0) return 0;
  double tau = (double)p->shed_rate_window_ns;
  if (st->rate_last_ns != NEVER) {
    double span = elapsed_ns(in->now_ns, st->rate_since_ns);
    if (span >= tau / 2) {
      double count = st->rate_count * exp(-elapsed_ns(in->now_ns, st->rate_last_ns) / tau);
      double weight = tau * -expm1(-span / tau); /* ns */
      return count / weight * 1e9;
    }
  }
  if (in->service_mean_ns == 0) return HUGE_VAL;
  return (double)in->slots_ready * 1e9 / (double)in->service_mean_ns;
}

/* Requests ahead of an arrival that a free slot will not take: L - free + 1, or 0. */
static uint64_t ahead(const pp_admit_input *in) {
  uint64_t c = in->slots_ready;
  uint64_t free_slots = in->slots_busy >= c ? 0 : c - in->slots_busy;
  return in->queue_len < free_slots ? 0 : in->queue_len - free_slots + 1;
}

static uint64_t oldest_age(const pp_admit_input *in) {
  if (in->oldest_enqueue_ns == NEVER || in->now_ns <= in->oldest_enqueue_ns) return 0;
  return (uint64_t)in->now_ns - (uint64_t)in->oldest_enqueue_ns;
}

static uint64_t drain_wait(const pp_admit_state *st, const pp_policy *p, const pp_admit_input *in) {
  if (in->slots_ready == 0) return UINT64_MAX;
  uint64_t n = ahead(in);
  if (n == 0) return 0;
  double mu = pp_admit_drain_rate(st, p, in);
  if (!(mu > 0)) return UINT64_MAX;
  double w = (double)n / mu * 1e9;
  return w >= 1.8e19 ? UINT64_MAX - 1 : (uint64_t)w;
}

/* The busy period: requests have been waiting since busy_since_ns. It begins when an arrival
 * finds no free slot and ends when a call sees nobody waiting. */
static void busy_observe(pp_admit_state *st, const pp_admit_input *in, int arrival) {
  int waiting = arrival ? ahead(in) > 0 : in->queue_len > 0;
  if (!waiting) {
    st->busy_since_ns = NEVER;
  } else if (st->busy_since_ns == NEVER) {
    st->busy_since_ns = in->now_ns;
    st->busy_completions0 = st->completions;
  }
}

/* The wait a burst is judged by (controlled rules, not standing). While requests wait, every
 * slot that frees takes the next one, so the completions since the busy period began, per
 * second, are the drain rate as it is now (whatever the mix and the CPU contention); once
 * there are 2c of them that is the rate used. Before, the faster of mu and c / S: completions
 * undercount what the slots can drain while they are not all busy (at 100 rps steady mu is
 * 100/s even if c / S is 360/s), so mu alone would call the first tenth of a second of any
 * burst a broken budget; c / S alone would promise a drain a stuck server cannot give. */
static uint64_t burst_wait(const pp_admit_state *st, const pp_policy *p, const pp_admit_input *in) {
  if (in->slots_ready == 0) return UINT64_MAX;
  uint64_t n = ahead(in);
  if (n == 0) return 0;
  double mu;
  uint64_t done = st->completions - st->busy_completions0;
  if (st->busy_since_ns != NEVER && done >= 2ull * in->slots_ready &&
      in->now_ns > st->busy_since_ns) {
    mu = (double)done * 1e9 / elapsed_ns(in->now_ns, st->busy_since_ns);
  } else {
    mu = pp_admit_drain_rate(st, p, in);
    if (in->service_mean_ns) {
      double slots = (double)in->slots_ready * 1e9 / (double)in->service_mean_ns;
      if (slots > mu) mu = slots;
    }
  }
  if (!(mu > 0)) return UINT64_MAX;
  double w = (double)n / mu * 1e9;
  return w >= 1.8e19 ? UINT64_MAX - 1 : (uint64_t)w;
}

uint64_t pp_admit_predicted_wait(const pp_admit_state *st, const pp_policy *p,
                                 const pp_admit_input *in) {
  switch (p->shed_rule) {
  case PP_SHED_RULE_DRAIN:
  case PP_SHED_RULE_CONTROLLED:
  case PP_SHED_RULE_CONTROLLED_CODEL:
  case PP_SHED_RULE_CONTROLLED_LIFO: return drain_wait(st, p, in);
  case PP_SHED_RULE_CODEL: return oldest_age(in);
  default: {
    pp_observation o;
    o.queue_len = in->queue_len;
    o.slots_ready = in->slots_ready;
    o.slots_busy = in->slots_busy;
    o.service_mean_ns = in->service_mean_ns;
    return pp_observation_predicted_wait(&o);
  }
  }
}

/* CoDel's standing-queue detector, on the age of the oldest waiting request: overloaded once
 * that age has stayed at or over the target for a whole interval; cleared as soon as it is
 * under the target (which includes an empty queue). */
static void codel_observe(pp_admit_state *st, const pp_policy *p, const pp_admit_input *in) {
  if (oldest_age(in) < p->shed_target_ns) {
    st->above_since_ns = NEVER;
    st->overloaded = 0;
    return;
  }
  if (st->above_since_ns == NEVER) st->above_since_ns = in->now_ns;
  if (elapsed_ns(in->now_ns, st->above_since_ns) >= (double)p->shed_interval_ns) st->overloaded = 1;
}

static int is_controlled(uint32_t rule) {
  return rule == PP_SHED_RULE_CONTROLLED || rule == PP_SHED_RULE_CONTROLLED_CODEL ||
         rule == PP_SHED_RULE_CONTROLLED_LIFO;
}

uint64_t pp_admit_standing_wait(const pp_policy *p, const pp_admit_input *in) {
  uint64_t w = p->shed_standing_wait_ns;
  if (w == 0) {
    w = in->service_mean_ns ? 2 * in->service_mean_ns : p->shed_target_ns;
    /* The controller adds capacity when the queue p95 is over target_queue_p95 (section 3):
     * a cap under that would hide a standing overload from it, so auto keeps the standing
     * queue's p95 half as high again as that target. */
    uint64_t visible = p->target_queue_p95_ns + p->target_queue_p95_ns / 2;
    if (w < visible) w = visible;
  }
  uint64_t budget = pp_policy_shed_budget_ns(p);
  if (w > budget) w = budget; /* a standing queue never gets more than a burst */
  return w < 1000000ull ? 1000000ull : w;
}

int pp_admit_lifo(const pp_admit_state *st, const pp_policy *p) {
  return p->shed_enabled && p->shed_rule == PP_SHED_RULE_CONTROLLED_LIFO && st->standing;
}

static void standing_begin(pp_admit_state *st, const pp_admit_input *in, uint64_t wait) {
  st->standing = 1;
  st->standing_since_ns = in->now_ns;
  st->last_shed_ns = in->now_ns;
  st->entry_wait_ns = wait;
  st->standing_entries++;
  st->above_since_ns = NEVER;
}

/* Ends a standing period once nothing has been shed for shed.interval (the arrivals fit in
 * the capacity again); for controlled-codel, watches the oldest request's age against the cap
 * while not standing. */
static void standing_observe(pp_admit_state *st, const pp_policy *p, const pp_admit_input *in) {
  if (st->standing) {
    if (elapsed_ns(in->now_ns, st->last_shed_ns) >= (double)p->shed_interval_ns) {
      st->standing = 0;
      st->above_since_ns = NEVER;
    }
    return;
  }
  if (p->shed_rule != PP_SHED_RULE_CONTROLLED_CODEL) return;
  uint64_t cap = pp_admit_standing_wait(p, in), age = oldest_age(in);
  if (age < cap) {
    st->above_since_ns = NEVER;
    return;
  }
  if (st->above_since_ns == NEVER) st->above_since_ns = in->now_ns;
  if (elapsed_ns(in->now_ns, st->above_since_ns) >= (double)p->shed_interval_ns)
    standing_begin(st, in, age);
}

/* The controlled rules' arrival verdict: 1 to shed. */
static int controlled_arrival(pp_admit_state *st, const pp_policy *p, const pp_admit_input *in) {
  busy_observe(st, in, 1);
  standing_observe(st, p, in);
  if (!st->standing) {
    uint64_t w = burst_wait(st, p, in);
    if (w <= pp_policy_shed_budget_ns(p)) return 0;
    if (p->shed_rule == PP_SHED_RULE_CONTROLLED_CODEL) return 1; /* drain's verdict only */
    standing_begin(st, in, w); /* the burst did not fit in the budget */
    return 1;
  }
  if (drain_wait(st, p, in) <= pp_admit_standing_wait(p, in)) return 0;
  st->last_shed_ns = in->now_ns;
  return 1;
}

static size_t put_dur(char *buf, size_t cap, size_t at, uint64_t ns) {
  if (at >= cap) return at;
  int n;
  if (ns == UINT64_MAX)
    n = snprintf(buf + at, cap - at, "unbounded");
  else if (ns < 999500000ull)
    n = snprintf(buf + at, cap - at, "%.1fms", (double)ns / 1e6);
  else
    n = snprintf(buf + at, cap - at, "%.2fs", (double)ns / 1e9);
  return at + (n > 0 ? (size_t)n : 0);
}

int pp_admit_reason(const pp_admit_state *st, const pp_policy *p, const pp_admit_input *in,
                    char *buf, size_t cap) {
  /* Written into a local buffer first, so the length wanted is known however small cap is. */
  char b[256];
  size_t n = 0, m = sizeof b;
  uint64_t budget = pp_policy_shed_budget_ns(p);
#define PUT(...)                                                                                   \
  do {                                                                                             \
    if (n < m) {                                                                                   \
      int k_ = snprintf(b + n, m - n, __VA_ARGS__);                                                \
      n += k_ > 0 ? (size_t)k_ : 0;                                                                \
    }                                                                                              \
  } while (0)
  if (!p->shed_enabled) {
    PUT("shedding disabled");
  } else if (!is_controlled(p->shed_rule)) {
    PUT("%s: budget ", pp_shed_rule_name(p->shed_rule));
    n = put_dur(b, m, n, budget);
  } else if (!st->standing) {
    PUT("burst: admitting up to the budget ");
    n = put_dur(b, m, n, budget);
  } else {
    uint64_t cap_ns = pp_admit_standing_wait(p, in);
    PUT("standing queue since ");
    n = put_dur(b, m, n, (uint64_t)(st->standing_since_ns < 0 ? 0 : st->standing_since_ns));
    if (p->shed_rule == PP_SHED_RULE_CONTROLLED_CODEL) {
      PUT(": oldest waited ");
      n = put_dur(b, m, n, st->entry_wait_ns);
      PUT(" over the cap for ");
      n = put_dur(b, m, n, p->shed_interval_ns);
    } else {
      PUT(": drain wait ");
      n = put_dur(b, m, n, st->entry_wait_ns);
      PUT(" broke the budget ");
      n = put_dur(b, m, n, budget);
    }
    PUT("; capping waits at ");
    n = put_dur(b, m, n, cap_ns);
    if (p->shed_standing_wait_ns == 0 && cap_ns == pp_policy_shed_budget_ns(p)) {
      PUT(" (the budget)");
    } else if (p->shed_standing_wait_ns == 0 &&
               cap_ns == p->target_queue_p95_ns + p->target_queue_p95_ns / 2) {
      PUT(" (1.5 x target_queue_p95, so the controller sees it)");
    } else if (p->shed_standing_wait_ns == 0 && in->service_mean_ns) {
      PUT(" (2 x service ");
      n = put_dur(b, m, n, in->service_mean_ns);
      PUT(")");
    } else if (p->shed_standing_wait_ns == 0) {
      PUT(" (shed.target: no service time yet)");
    }
    if (p->shed_rule == PP_SHED_RULE_CONTROLLED_LIFO) PUT(", newest first");
  }
#undef PUT
  if (n >= m) n = m - 1;
  if (cap) {
    size_t k = n < cap ? n : cap - 1;
    for (size_t i = 0; i < k; i++)
      buf[i] = b[i];
    buf[k] = '\0';
  }
  return (int)n;
}

pp_admit_verdict pp_admit_arrival(pp_admit_state *st, const pp_policy *p,
                                  const pp_admit_input *in) {
  int shed = 0;
  if (p->shed_enabled) {
    uint64_t budget = pp_policy_shed_budget_ns(p);
    switch (p->shed_rule) {
    case PP_SHED_RULE_DRAIN: shed = drain_wait(st, p, in) > budget; break;
    case PP_SHED_RULE_CONTROLLED:
    case PP_SHED_RULE_CONTROLLED_CODEL:
    case PP_SHED_RULE_CONTROLLED_LIFO: shed = controlled_arrival(st, p, in); break;
    case PP_SHED_RULE_CODEL:
      codel_observe(st, p, in);
      shed = st->overloaded && ahead(in) > 0;
      break;
    default:
      /* Format 1, exactly as the server did it: only while the tick says so; no capacity at
       * all (UINT64_MAX) sheds. */
      if (in->shedding) {
        pp_observation o;
        o.queue_len = in->queue_len;
        o.slots_ready = in->slots_ready;
        o.slots_busy = in->slots_busy;
        o.service_mean_ns = in->service_mean_ns;
        shed = pp_observation_predicted_wait(&o) > budget;
      }
      break;
    }
  }
  if (shed)
    st->shed_at_arrival++;
  else
    st->accepted++;
  return shed ? PP_ADMIT_SHED : PP_ADMIT_ACCEPT;
}

pp_admit_verdict pp_admit_dequeue(pp_admit_state *st, const pp_policy *p, const pp_admit_input *in,
                                  uint64_t sojourn_ns) {
  if (!p->shed_enabled) return PP_ADMIT_ACCEPT;
  if (is_controlled(p->shed_rule)) {
    busy_observe(st, in, 0);
    standing_observe(st, p, in);
    if (!st->standing || sojourn_ns <= pp_admit_standing_wait(p, in)) return PP_ADMIT_ACCEPT;
    st->last_shed_ns = in->now_ns;
    st->shed_at_dequeue++;
    return PP_ADMIT_SHED;
  }
  if (p->shed_rule != PP_SHED_RULE_CODEL) return PP_ADMIT_ACCEPT;
  int shed = st->overloaded && sojourn_ns > pp_policy_shed_budget_ns(p);
  codel_observe(st, p, in);
  if (!shed) return PP_ADMIT_ACCEPT;
  st->shed_at_dequeue++;
  return PP_ADMIT_SHED;
}
