/* The core's own context (core/): the one request queue, the request ids, the admission
 * rule's memory, and the front end's counters and latency windows that /stats and /metrics
 * report (pp_stats). struct server holds one (s->core). */
#ifndef PP_CORE_H
#define PP_CORE_H

#include <stdint.h>

#include "control/admit.h"
#include "control/hist.h"
#include "server/base/hooks.h"
#include "server/base/queue.h"
#include "server/base/wallclock.h"
#include "server/exchange/exchange.h"
#include "server/net/transport.h"
#include "server/proto/tls.h"

typedef struct pp_stats {
  pp_hist_window queue, service, ttfb, total, body_wait;
  pp_hist queue_last, service_last, ttfb_last; /* the last completed window */
  uint64_t last_window_ns;
  uint64_t requests, responses, arrivals, completions;
  uint64_t arrivals_window, completions_window, shed_window, timeouts_window;
  uint64_t arrivals_last, completions_last;
  uint64_t refused;                             /* requests answered by the parser (4xx/5xx) */
  uint64_t control_requests, control_responses; /* the control app's, in none of the above */
  uint64_t proxy_headers;  /* PROXY protocol headers accepted (listeners with ,proxy=) */
  uint64_t proxy_rejected; /* connections closed for a missing or malformed PROXY header */
  uint64_t cancelled_queued, cancelled_running, shed, errors_502, errors_500;
  uint64_t hijacked;     /* requests whose client socket went to the worker (full hijack) */
  uint64_t slots_closed; /* SLOT_CLOSE frames sent (run-time slots taken back) */
  uint64_t timeouts, worker_restarts, worker_protocol_errors;
  uint64_t body_budget_waits, body_budget_streamed; /* -max-buffered-body-total at work */
  uint64_t request_timeouts;         /* requests answered 504 (or cut) by -request-timeout */
  uint64_t workers_killed_timeout;   /* killed: a timed-out request outlived the kill grace */
  uint64_t workers_killed_heartbeat; /* killed: heartbeat silent past -worker-timeout */
  uint64_t shepherd_restarts, workers_adopted, orphans_reaped;
  uint64_t connections_accepted, connections_refused;
  uint64_t h2_connections, h2c_upgrades, h3_connections;
  /* summed over connections from each session's pp_h2_stats */
  uint64_t h2_streams, h2_peer_resets, h2_stream_errors, h2_refused_streams, h2_protocol_errors,
      h2_connection_errors, h2_flood_closes;
  uint64_t tls_handshakes, tls_incomplete;
  uint64_t tls_failures[PP_TLS_CAUSE_COUNT]; /* by pp_tls_cause */
  int64_t gvl_sum_ns, cpu_sum_ns;
  uint64_t gvl_count, cpu_count;
} pp_stats;
typedef struct pp_core {
  pp_queue queue; /* runnable exchanges waiting for a worker (PP_X_QUEUED) */
  uint64_t next_request_id;
  pp_stats stats;
  pp_admit_state admit; /* the admission rule's memory (control/admit.h) */
  /* Handed in at set-up (pp_core_init): the lower layers' contexts the core drives, and what
   * it reads of the layers above it. */
  pp_net *net;              /* write chunks for REQUEST, BODY, CANCEL */
  pp_exchange_pool *xpool;  /* the exchanges (its `up` is this context) */
  pp_registry *reg;         /* the workers' idle slots (workers/) */
  const pp_policy *policy;  /* the controller's policy (ops/): admission */
  const int *shedding;      /* the controller's shedding flag (ops/) */
  const pp_hooks *hooks;    /* activated_dispatch */
  server *srv;              /* handed to the hooks; never read here */
  const pp_wallclock *wall; /* realtime - monotonic, for X-Request-Start (base/wallclock.h) */
} pp_core;

/* The core of an exchange (from its pool). */
#define PP_CORE_OF(x) ((pp_core *)(x)->pool->up)

/* Sets up c (its queue, admission memory) with what it is handed, and makes it the `up` of
 * xpool. The counters' windows are the caller's to initialise. */
void pp_core_init(pp_core *c, server *srv, const pp_hooks *hooks, pp_net *net,
                  pp_exchange_pool *xpool, pp_registry *reg, const pp_policy *policy,
                  const int *shedding);

#endif
