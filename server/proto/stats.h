/* The front end's counters and latency windows (pp_stats): plain data that /stats and
 * /metrics report (ops/stats.c). It lives in the core's context (pp_core.stats) and is bumped
 * by the layers that count, from workers/ up. It is here, not in base/, because it counts TLS
 * failures by pp_tls_cause (proto/tls.h). */
#ifndef PP_STATS_H
#define PP_STATS_H

#include <stdint.h>

#include "control/hist.h"
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
  /* WebSockets owned by the server (session/wsconn.c): connections, events, messages both
   * ways (payload bytes before deflate / after inflate), broadcasts and their fan-out, the
   * queue time of events, and closes by code (1000..1015 at code - 1000, others at 16). */
  struct {
    uint64_t open, opened, closed, events, messages_in, messages_out, bytes_in, bytes_out;
    uint64_t broadcasts, fanout, unknown_conn, slow_reader_closes, worker_gone_closes;
    uint64_t events_lost;     /* events whose worker died while running them */
    uint64_t overload_closes; /* 1013: -ws-max-output-total reached */
    uint64_t closes[17];
    pp_hist_window queue;
  } ws;
} pp_stats;

#endif
