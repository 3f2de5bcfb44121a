/* The observation: everything one controller tick knows, and the one builder that makes it.
 *
 * The live server and the simulator both call pp_observation_build() at every tick, from
 * their own histogram windows and counters, so "queue p95 over the last tick" means the same
 * thing in production and in simulation. Pure: the caller passes the time. */
#ifndef PP_OBSERVATION_H
#define PP_OBSERVATION_H

#include <stdint.h>
#include "control/hist.h"

typedef struct pp_observation {
  uint64_t tick;      /* tick number, 0-based, monotonically increasing */
  int64_t time_ns;    /* the tick's time (end of its window), caller's monotonic clock */
  uint64_t window_ns; /* length of the window the percentiles and rates cover */

  /* Queue time (T3 - T2b) of requests dispatched in the window. 0 when none were. */
  uint64_t queue_p50_ns, queue_p95_ns, queue_p99_ns, queue_max_ns;
  uint64_t queue_count; /* requests dispatched in the window (samples behind the p's) */
  uint32_t queue_len;   /* L: runnable requests waiting at tick time */

  /* Capacity. A slot is one worker thread connection. */
  uint32_t slots_ready;      /* connected slots (busy + idle), the capacity c */
  uint32_t slots_busy;       /* slots running a request at tick time */
  uint32_t workers_ready;    /* workers with at least one connected slot */
  uint32_t workers_booting;  /* workers expected but not yet connected (expected - observed) */
  uint32_t workers_retiring; /* workers draining towards exit; not capacity */
  uint32_t threads_per_worker;

  /* Workload over the window. */
  uint64_t arrivals;        /* requests that became runnable in the window */
  uint64_t completions;     /* requests whose response ended in the window */
  double arrival_rate;      /* arrivals per second over the window */
  uint64_t service_mean_ns; /* mean service time (T5 - T4 - body_read) of completions;
                               falls back to the lifetime mean when the window has none */
  uint64_t service_p95_ns;
  int64_t service_cpu_mean_ns;  /* mean CPU time per request, PP_UNKNOWN_NS if unmeasured */
  int64_t gvl_wait_ns;          /* mean GVL wait per request, PP_UNKNOWN_NS if unmeasured */
  int64_t mem_per_worker_bytes; /* RSS per worker, -1 if unknown */

  uint64_t shed;     /* 503s answered by admission control in the window */
  uint64_t timeouts; /* requests whose client gave up (or timed out) in the window */

  /* Standby workers (policy `standby`): forked and booted but parked, taking no requests, and
   * counted neither in workers_ready nor in workers_booting. An activated standby counts as
   * booting until it connects its slots, then as ready. Both 0 without standby. */
  uint32_t workers_standby;         /* parked, activatable within a tick */
  uint32_t workers_standby_booting; /* standby replacements forked, not yet parked */

  /* The gain of concurrency, on every Ruby (decision log v3; docs/CONTROL.md §2). From each
   * serving worker's CPU time over the window (utime + stime deltas from /proc, or the
   * simulator's accounting): its share of one core. A worker near 1.0 is bound by its GVL
   * (more slots cannot help it); a worker at a small share with a queue is waiting on I/O.
   * -1 when unknown (no worker's CPU time was passed in); unknown is never 0. */
  double cpu_share_mean;      /* mean over the workers passed in */
  double cpu_share_max;       /* the busiest worker's share */
  uint32_t cpu_workers;       /* workers the two shares cover (0 when unknown) */
  int64_t cpu_per_request_ns; /* sum of the workers' CPU time / completions, -1 if unknown */

  /* The slot kind (decision log v4; docs/CONTROL.md rule 4b). 0: the workers' slots are
   * threads or fibers, one GVL per worker (a worker runs Ruby on at most one core). n > 0: they
   * are Ractors, each with its own GVL, on a machine of n cores: one worker's slots run Ruby
   * on up to n cores at once, so a worker near one core may still grow slots. */
  uint32_t ractor_cores;
} pp_observation;

/* What a tick's caller hands the builder. Histograms are read, never kept or freed. */
typedef struct pp_obs_input {
  uint64_t tick;
  int64_t now_ns;
  uint64_t window_ns;
  const pp_hist *queue_window;     /* queue times of this window (required) */
  const pp_hist *service_window;   /* service times of this window (required) */
  const pp_hist *service_lifetime; /* fallback for the mean when the window is empty; may be NULL */
  uint32_t queue_len;
  uint32_t slots_ready, slots_busy;
  uint32_t workers_ready, workers_booting, workers_retiring, threads_per_worker;
  uint64_t arrivals, completions, shed, timeouts;
  int64_t service_cpu_mean_ns;                       /* PP_UNKNOWN_NS if unmeasured */
  int64_t gvl_wait_ns;                               /* PP_UNKNOWN_NS if unmeasured */
  int64_t mem_per_worker_bytes;                      /* -1 if unknown */
  uint32_t workers_standby, workers_standby_booting; /* 0 without standby */

  /* Per-worker CPU time over this window, for the concurrency signal (v3). One entry per
   * serving worker (ready, not retiring, not standby) that was alive for the whole window:
   * (utime + stime now) - (utime + stime at the previous tick), converted to ns
   * (clock ticks x 10^9 / sysconf(_SC_CLK_TCK), or the ns fields of /proc/PID/schedstat).
   * A worker first seen during the window, or whose /proc read failed, is left out (or passed
   * as a negative entry, which is skipped). NULL or n_worker_cpu 0: CPU unknown (every cpu_*
   * field of the observation reads -1). The builder reads the array and never keeps it.
   * The slot count per worker is threads_per_worker above (the target the workers are told,
   * threads or fibers alike); slots_ready is what is connected. */
  const int64_t *worker_cpu_ns;
  uint32_t n_worker_cpu;
  uint32_t ractor_cores; /* 0: thread or fiber slots; n: Ractor slots on n cores (copied) */
} pp_obs_input;

/* Fills *out from *in. Returns 0, or PP_CTL_EINVAL if a required pointer is NULL or
 * window_ns is 0 (then *out is untouched). */
int pp_observation_build(pp_observation *out, const pp_obs_input *in);

/* Predicted wait of a request arriving now, by Little's law: with c = slots_ready,
 * free = c - slots_busy and S = service_mean_ns, W_pred = 0 while L < free (a slot will take
 * it at once), else (L - free + 1) * S / c, which is DESIGN.md's (L + 1) * S / c when no slot
 * is free. Returns UINT64_MAX when c is 0 (nothing can serve it). */
uint64_t pp_observation_predicted_wait(const pp_observation *obs);

#endif
