/* Admission control: the per-request shed decision, one function for the server and pp-sim.
 *
 * pp_decide() runs once per tick; admission runs once per arriving request and once per
 * request taken off the queue, so it must be cheap (no allocation, a few float operations)
 * and it must see the queue as it is now, not as it was at the last tick. The rule is the
 * policy's `shed.rule` (docs/CONTROL.md §5):
 *
 *   predicted  W = (L - free + 1) * S / c, shed when W > budget, only while the last tick's
 *              decision has shedding on (the format-1 rule, unchanged).
 *   drain      W = (L - free + 1) / mu, shed when W > budget, on every arrival. mu is the
 *              measured drain rate: completions per second, an EWMA with time constant
 *              shed.rate_window; c / S until the estimator has a half window of data.
 *   codel      overloaded when the oldest waiting request has been older than shed.target
 *              without a break for shed.interval (a standing queue, as in CoDel and "Fail at
 *              Scale"); while overloaded every arrival that finds no free slot is shed, and a
 *              request taken off the queue after waiting more than the budget is shed.
 *   controlled (and its two variants, docs/CONTROL.md §7): a burst gets drain's budget; a
 *              standing queue gets a short cap. Standing once an arrival's wait W is over
 *              the budget (the burst did not fit: controlled, controlled-lifo) or once the
 *              oldest waiting request has been over the cap for shed.interval
 *              (controlled-codel). W for the budget is (L - free + 1) / mu_busy, mu_busy the
 *              completions per second since requests began to wait (the drain measured
 *              while saturated), once there have been 2c of them; before that the faster of
 *              mu and c / S. While standing, an arrival is shed when drain's W is over the
 *              cap, and a request taken off the queue after waiting more than the cap is
 *              shed; cap = shed.standing_wait, auto = max(2 x S, 1.5 x target_queue_p95)
 *              (S: shed.target while unknown; the second term keeps a standing queue visible
 *              to the controller); at most the budget, at least 1ms. Standing ends once nothing has
 *              been shed for shed.interval. controlled-lifo also serves newest first while
 *              standing (pp_admit_lifo).
 *
 * Pure: the caller passes the time and the queue's state; everything the rule remembers is
 * in pp_admit_state, which the caller owns (one per queue). Deterministic for a given
 * sequence of calls. Workload: 10^3-10^5 calls per second, each O(1). */
#ifndef PP_ADMIT_H
#define PP_ADMIT_H

#include <stddef.h>
#include <stdint.h>
#include "control/policy.h"

typedef enum pp_admit_verdict {
  PP_ADMIT_ACCEPT = 0, /* queue it (at arrival) / run it (at dequeue) */
  PP_ADMIT_SHED = 1,   /* answer 503 with Retry-After now */
} pp_admit_verdict;

/* What the rules remember between calls. Plain data; init with pp_admit_state_init.
 * INT64_MIN in a *_ns field means "never". */
typedef struct pp_admit_state {
  /* drain rate: completions as a decayed count (events, weight e^-(age/tau)) */
  double rate_count;     /* decayed count as of rate_last_ns */
  int64_t rate_last_ns;  /* time of the last completion */
  int64_t rate_since_ns; /* start of the estimator's current run of data */
  /* codel */
  int64_t above_since_ns; /* since when the oldest waiting request has been over target */
  int overloaded;         /* codel: a standing queue was detected and has not cleared */
  /* controlled */
  int standing;              /* a standing queue: waits are capped at the standing wait */
  int64_t standing_since_ns; /* when the current standing period began (NEVER if none yet) */
  int64_t last_shed_ns;      /* the last shed verdict (arrival or dequeue), NEVER if none */
  uint64_t entry_wait_ns;    /* the wait that started the standing period (for the reason) */
  uint64_t standing_entries; /* standing periods begun (counter) */
  /* the current busy period (requests waiting since busy_since_ns), for the burst wait */
  uint64_t completions;       /* completions ever (pp_admit_complete) */
  int64_t busy_since_ns;      /* when requests began to wait; NEVER while none waits */
  uint64_t busy_completions0; /* completions when the busy period began */
  /* counters (for /stats and tests; the rules do not read them) */
  uint64_t accepted, shed_at_arrival, shed_at_dequeue;
} pp_admit_state;

/* The queue as the caller sees it at the moment of the call. */
typedef struct pp_admit_input {
  int64_t now_ns;            /* caller's monotonic clock */
  uint32_t queue_len;        /* L: requests waiting, excluding the one being decided */
  uint32_t slots_ready;      /* c: connected slots (busy + idle) */
  uint32_t slots_busy;       /* slots running a request */
  uint64_t service_mean_ns;  /* S: mean service time as the server measures it (last window,
                                else lifetime; 0 when nothing has completed yet) */
  int64_t oldest_enqueue_ns; /* enqueue time of the oldest request still waiting (after the
                                dequeue, for pp_admit_dequeue); INT64_MIN when none waits */
  int shedding;              /* the last pp_decision.shed (only the predicted rule reads it) */
} pp_admit_input;

/* Sets the state to "nothing seen yet". */
void pp_admit_state_init(pp_admit_state *st);

/* A request arrived (its head is parsed; it has not been queued). Returns PP_ADMIT_SHED if it
 * must be answered 503 at once, else PP_ADMIT_ACCEPT (queue it, or run it on a free slot).
 * Does nothing but count when shed.enabled is false. p must be valid (pp_policy_validate). */
pp_admit_verdict pp_admit_arrival(pp_admit_state *st, const pp_policy *p, const pp_admit_input *in);

/* A request is being taken off the queue for a slot, after waiting sojourn_ns (call it for
 * every request handed to a slot, including one that never waited: sojourn 0). in->queue_len
 * and in->oldest_enqueue_ns describe the queue without it. Returns PP_ADMIT_SHED if it must be
 * answered 503 instead of run (then take the next one and call again), else PP_ADMIT_ACCEPT.
 * Only the codel rule sheds here. */
pp_admit_verdict pp_admit_dequeue(pp_admit_state *st, const pp_policy *p, const pp_admit_input *in,
                                  uint64_t sojourn_ns);

/* A request's response ended at now_ns (it freed its slot). Feeds the drain-rate estimator. */
void pp_admit_complete(pp_admit_state *st, const pp_policy *p, int64_t now_ns);

/* The drain rate mu (requests per second) the drain rule uses now: the EWMA of completions
 * once it has shed.rate_window / 2 of data since its last restart (the first completion after
 * a gap of more than shed.rate_window restarts it; during a gap it keeps decaying, so a stuck
 * server's mu falls towards 0), else c / S. 0 when c = 0; HUGE_VAL when S = 0 and there is no
 * data yet (nothing measured: like the predicted rule, no wait is predicted). */
double pp_admit_drain_rate(const pp_admit_state *st, const pp_policy *p, const pp_admit_input *in);

/* The wait the policy's rule predicts for a request arriving now, in ns: 0 while L < free;
 * UINT64_MAX when there is no capacity to serve it (c = 0, or a drain rate of 0 with requests
 * queued); finite values saturate at UINT64_MAX - 1. For codel, the oldest waiting request's
 * age (the quantity it watches). For /stats and the reasons; does not change the state. */
uint64_t pp_admit_predicted_wait(const pp_admit_state *st, const pp_policy *p,
                                 const pp_admit_input *in);

/* The wait cap while a standing queue is detected (controlled rules): shed.standing_wait, or for
 * auto max(2 x in->service_mean_ns (shed.target when that is 0), 1.5 x target_queue_p95); at
 * most the budget, never under 1ms. */
uint64_t pp_admit_standing_wait(const pp_policy *p, const pp_admit_input *in);

/* 1 when the caller should take the newest waiting request next (controlled-lifo while
 * standing), else 0 (oldest first). Before taking the newest, the caller offers the oldest to
 * pp_admit_dequeue while it is shed, so stale requests do not sit behind fresh ones. */
int pp_admit_lifo(const pp_admit_state *st, const pp_policy *p);

/* The admission mode in one line, for logs and /stats: e.g. "standing queue since 12.30s:
 * drain wait 1.01s broke the budget 1.00s; capping waits at 44.0ms (2 x service 22.0ms)", or
 * "burst: admitting up to the budget 1.00s". Writes at most cap bytes (NUL-terminated,
 * truncated if needed); returns the length it wanted, like snprintf. */
int pp_admit_reason(const pp_admit_state *st, const pp_policy *p, const pp_admit_input *in,
                    char *buf, size_t cap);

#endif
