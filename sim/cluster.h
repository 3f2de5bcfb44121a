/* Cluster mode of the simulator: N puma-plus hosts behind a load balancer, scaled by a model
 * of the Kubernetes HorizontalPodAutoscaler fed by a simulated Prometheus (docs/SIM.md,
 * "Cluster mode"; the scenario's `hosts:` and `clusters:`, docs/SCENARIOS.md).
 *
 * Model:
 *  - Arrivals are the scenario's schedule (arrivals.h), the same for every cluster, handed to
 *    a host by the balancer: round robin over ready hosts, least outstanding requests (queued
 *    plus running, ties by least recently picked), power of two choices, or uniform random.
 *  - A host is a puma-plus: one FIFO, workers × threads; a request holds its thread for its CPU
 *    segment (on its worker's GVL, FIFO, without timeslicing) then its IO segment. A dispatch
 *    goes to the ready worker with the fewest busy threads. Workers run on separate cores: a
 *    host never has more workers than cores (its policy's max_workers is capped to cores), so
 *    there is no processor sharing across workers.
 *  - A host whose config autoscales runs pp_observation_build() and pp_decide() every policy
 *    tick, as the server does; spawn and retire apply (boot from the config's boot
 *    distribution, retire drains the newest worker). Thread changes, standby and shedding are
 *    not modelled here (the one-host engine has them).
 *  - Every host exports the server's /metrics histogram puma_plus_queue_seconds (its bucket
 *    bounds) and a CPU-seconds counter. A Prometheus scrapes every ready or draining host
 *    every scrape interval; at each HPA sync the query is evaluated on the scraped samples:
 *    histogram_quantile(q, sum by (le) (rate(puma_plus_queue_seconds_bucket[w]))) for the queue
 *    metric, mean rate(cpu)/cores over ready hosts for CPU. rate() is the slope between the
 *    first and last sample inside the window (Prometheus also extrapolates to the window's
 *    edges; that scales a host's buckets alike).
 *  - The cluster autoscaler is hpa.h every sync period. A scale-up boots hosts (start-up time
 *    from `hosts.boot`; a booting host takes no traffic); a scale-down takes the newest hosts
 *    (booting ones first) out of the balancer at once and drains them.
 * Deterministic for a scenario and seed. Memory is O(hosts + requests in flight). */
#ifndef PP_SIM_CLUSTER_H
#define PP_SIM_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#include "control/control.h"
#include "sim/scenario.h"

/* The server's /metrics bucket bounds of puma_plus_queue_seconds (server/ops/stats.c), seconds. */
#define PP_CLUSTER_PROM_BUCKETS 19 /* 18 finite bounds and +Inf */
extern const double pp_cluster_prom_bounds[PP_CLUSTER_PROM_BUCKETS];

typedef struct pp_cluster_second {
  uint32_t t_s;
  uint64_t arrivals, completed;
  double p50_ns, p99_ns; /* latency of the requests completed in this second; -1 if none */
  double queue_p95_ns;   /* queue time of the requests dispatched in this second; 0 if none */
  uint32_t hosts_ready, hosts_booting, hosts_draining;
  uint32_t desired; /* the autoscaler's replica count */
  uint32_t workers; /* workers alive over every host */
  uint64_t queued;  /* requests waiting in host queues at the end of the second */
  double metric;    /* the last value the autoscaler saw (seconds or utilisation); NaN */
  double cpu_util;  /* CPU busy / (cores × ready hosts) over the second */
} pp_cluster_second;

typedef struct pp_host_second {
  uint32_t t_s, host;
  uint8_t state; /* 1 booting, 2 ready, 3 draining */
  uint32_t completed, workers, queued, outstanding;
  double queue_p95_ns;
} pp_host_second;

typedef struct pp_cluster_phase {
  double start_s, end_s;
  uint64_t arrivals;
  uint64_t completed;    /* responses that ended inside the phase */
  double achieved_rps;   /* completed / phase duration */
  double p50_ns, p99_ns; /* latency of the requests that arrived in the phase */
} pp_cluster_phase;

typedef struct pp_cluster_result {
  uint64_t requests, completed, completed_in_run, unfinished, timed_out;
  double duration_s, offered_rps, achieved_rps;
  double p50_ns, p99_ns, p999_ns, mean_ns;
  double queue_mean_ns, queue_p99_ns;
  double excess_latency_ns;
  double host_seconds, avg_hosts;
  uint32_t peak_hosts;
  uint32_t scale_ups, scale_downs; /* autoscaler decisions that changed the count */
  double avg_workers;              /* workers alive over every host, time-averaged */
  uint64_t events;
  pp_hist latency, queue;
  uint32_t n_phases;
  pp_cluster_phase phases[PP_SCN_MAX_PHASES];
  pp_cluster_second *timeline; /* owned, one row per second */
  size_t timeline_len;
  pp_host_second *host_rows; /* owned (keep_hosts), one row per live host per second */
  size_t host_rows_len;
} pp_cluster_result;

/* A finished request (tests): host it ran on, intended arrival, dispatch, end (-1: none). */
typedef struct pp_cluster_request {
  uint32_t seq, host;
  int64_t arrival_ns, dispatch_ns, done_ns;
} pp_cluster_request;

typedef struct pp_cluster_options {
  uint64_t seed;                                               /* normally scenario->seed */
  int keep_timeline;                                           /* fill result->timeline */
  int keep_hosts;                                              /* fill result->host_rows */
  void (*on_request)(void *data, const pp_cluster_request *r); /* optional */
  void *data;
} pp_cluster_options;

void pp_cluster_options_default(pp_cluster_options *o, const pp_scenario *scn);

/* Runs clusters[cluster_index] of a resolved scenario with `hosts:`. 0, PP_SIM_EINVAL or
 * PP_SIM_ENOMEM; *out must be disposed with pp_cluster_result_dispose either way. */
int pp_cluster_run(const pp_scenario *scn, uint32_t cluster_index, const pp_cluster_options *opt,
                   pp_cluster_result *out);
void pp_cluster_result_dispose(pp_cluster_result *r);

const char *pp_balancer_name(pp_balancer b);

#endif
