/* pp-replay --simulate: rebuild the workload of a logged interval and run it closed-loop
 * through the simulator (libppsim) under the logged policy and, optionally, a tuned one.
 *
 * The workload: each logged tick's `arrivals` are placed at uniformly random times inside
 * that tick's window (a Poisson process conditioned on the count), from a seeded generator;
 * one request kind whose service time is lognormal with the completion-weighted mean and
 * p95 of the log, split into a CPU and an IO segment by the logged CPU share (or
 * --cpu-share). The starting workers and threads are the first tick's. Docs: docs/REPLAY.md. */
#ifndef PP_REPLAY_SIMULATE_H
#define PP_REPLAY_SIMULATE_H

#include <stddef.h>
#include <stdint.h>

#include "replay/replay.h"
#include "sim/engine.h"
#include "sim/scenario.h"

typedef struct pp_replay_sim_options {
  uint64_t seed;    /* arrival placement and the simulator's seed */
  uint32_t cores;   /* machine cores; 0 = the simulator's default */
  double cpu_share; /* CPU share of service in [0, 1]; < 0 = from the log (0.5 if unknown) */
} pp_replay_sim_options;

/* What the rebuilt workload was, for the report. */
typedef struct pp_replay_workload {
  uint64_t arrivals;
  double duration_s;
  double service_mean_ns, service_p95_ns;
  double cpu_share;
  int cpu_share_from_log;
  uint32_t workers, threads;
} pp_replay_workload;

/* Builds a scenario with config 0 "logged" (policy `logged`) and, if tuned is not NULL,
 * config 1 "tuned". *out must be disposed with pp_scenario_dispose. Returns 0, or -1 with a
 * sentence in errbuf. */
int pp_replay_build_scenario(const pp_replay_log *log, const pp_policy *logged,
                             const pp_policy *tuned, const pp_replay_sim_options *opt,
                             pp_scenario *out, pp_replay_workload *w, char *errbuf, size_t cap);

#endif
