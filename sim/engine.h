/* The discrete-event engine: one server configuration of a scenario, simulated.
 *
 * Model (docs/SIM.md has the full text and the limits):
 *  - Arrivals come from arrivals.h (same seed, same schedule in every configuration, so
 *    configurations are compared on common random numbers).
 *  - Queue: one FIFO (puma-plus: any idle slot takes the head) or per-worker queues fed
 *    round robin (the puma baseline). Queue time is dispatch minus intended arrival.
 *  - Workers x threads. A request holds its thread for a CPU segment then an IO segment.
 *    CPU segments of threads in one worker serialise on that worker's GVL, handed over FIFO
 *    every `gvl_timeslice` while others wait; IO segments overlap freely.
 *  - Across workers, running CPU segments share `cores` by processor sharing: with n > cores
 *    running, each progresses at cores/n (tracked with a virtual CPU clock, so a change of n
 *    costs O(workers), not O(requests)).
 *  - Actuators: spawn (the worker connects after a boot time drawn from the boot
 *    distribution; readiness = connected), retire (stop dispatching, drain, exit), threads.
 *  - Clients give up at the timeout; the server still serves the request. Admission control
 *    (shed.enabled) is control/admit.h, called as the server calls it: pp_admit_arrival on
 *    every arrival (503 at once when it sheds), pp_admit_dequeue on every dispatch (a shed
 *    there is a 503 instead of a run; only shed.rule codel does it), pp_admit_complete on
 *    every completion.
 *  - Autoscale configurations call pp_observation_build() and pp_decide() every policy tick,
 *    exactly as the server does, and log each tick with pp_declog_encode() (source "sim").
 * Deterministic: the same scenario and seed give byte-identical results. Events are ordered by
 * (time, insertion sequence) in a binary heap. Memory is O(requests in flight + timeout
 * window), so runs of tens of millions of requests are fine. */
#ifndef PP_SIM_ENGINE_H
#define PP_SIM_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "control/control.h"
#include "sim/results.h"
#include "sim/scenario.h"

/* A finished request, handed to pp_sim_options.on_request (tests, per-request logs). */
typedef struct pp_sim_request {
  uint32_t seq;
  uint32_t kind;
  int64_t arrival_ns;
  int64_t dispatch_ns; /* -1 when shed or never dispatched */
  int64_t done_ns;     /* -1 when shed or unfinished at the drain limit */
  int shed;
} pp_sim_request;

typedef struct pp_sim_options {
  uint64_t seed;           /* arrival seed; normally scenario->seed */
  const pp_policy *policy; /* overrides the config's policy (sweeps); NULL: the config's */
  int keep_timeline;       /* fill result->timeline */
  int keep_decisions;      /* fill result->decisions (JSONL text) and ->ticks */
  void (*on_request)(void *data, const pp_sim_request *r); /* optional, every request */
  void *data;
} pp_sim_options;

/* One controller tick, for the results database. */
typedef struct pp_sim_tick {
  uint64_t tick;
  int64_t time_ns;
  pp_action action;
  uint32_t count;
  uint32_t workers_target;
  size_t line_off, line_len; /* its JSONL line inside result->decisions */
  char reason[256];
} pp_sim_tick;

typedef struct pp_sim_result {
  pp_summary summary;
  pp_timeline_row *timeline; /* owned; one row per second until the run ended */
  size_t timeline_len;
  char *decisions; /* owned JSONL text, "" when none */
  size_t decisions_len;
  pp_sim_tick *ticks; /* owned */
  size_t n_ticks;
  uint64_t policy_hash; /* of the policy used (0 when static) */
  pp_hist latency;      /* lifetime: intended arrival -> response end, served requests */
  pp_hist queue;        /* lifetime: intended arrival -> dispatch */
  double queue_sum_ns;  /* exact sum behind the queue mean */
  uint64_t queue_count;
  uint64_t events;      /* events processed (for the events/s benchmark) */
  uint64_t activations; /* standby workers activated */
  double avg_standby;   /* standby workers (parked + booting), time-averaged over the duration */
  /* The overload phases: every phase at the scenario's highest rate (arrival phases only) */
  pp_hist busy_latency;     /* served requests that arrived in them: intended arrival -> end */
  pp_hist standing_latency; /* the same, arriving after each such phase's first second */
  uint64_t busy_served;     /* of those, served within the client timeout */
  uint64_t busy_shed;       /* arrivals in them answered 503 */
  double busy_s;            /* their total length in seconds (0: no phases) */
} pp_sim_result;

/* Runs configuration `config_index` of `scn` (resolved and validated). Returns 0, or
 * PP_SIM_EINVAL / PP_SIM_ENOMEM. *out must be disposed with pp_sim_result_dispose either way. */
int pp_sim_run(const pp_scenario *scn, uint32_t config_index, const pp_sim_options *opt,
               pp_sim_result *out);
void pp_sim_result_dispose(pp_sim_result *r);

/* Default options: the scenario's seed, timeline and decisions kept. */
void pp_sim_options_default(pp_sim_options *o, const pp_scenario *scn);

#endif
