/* struct server: the context of the whole front end, owned by the process layer (server.c).
 * It still holds every layer's state (loop, listeners, queue and registry, pools, counters,
 * controller, dashboard, lifecycle), so each layer's .c files include this header to reach
 * their own part: the one exception to the layer rule that remains (server/layers-allow.txt).
 * What a lower layer calls back into above it is s->hooks (base/hooks.h), set by server.c,
 * never a name. Each layer's functions are declared in its own header; this one adds what
 * process/server.c (drain, exit), ops/stats.c and ops/autoscale.c provide. Only .c files
 * include it. Not a public API. */
#ifndef PP_SERVER_INT_H
#define PP_SERVER_INT_H

#include <stdint.h>
#include <stdio.h>
#include <uv.h>

#include "control/admit.h"
#include "control/control.h"
#include "server/base/alloc.h"
#include "server/base/buf.h"
#include "server/base/clock.h"
#include "server/base/wallclock.h"
#include "server/base/hooks.h"
#include "server/base/log.h"
#include "server/base/config.h"
#include "server/session/conn.h"
#include "server/ops/dashboard.h"
#include "server/exchange/exchange.h"
#include "server/core/exchange_owner.h"
#include "server/session/h3conn.h"
#include "server/proto/http1.h"
#include "server/process/lifecycle.h"
#include "server/workers/phased.h"
#include "server/base/queue.h"
#include "server/workers/shepherd.h"
#include "server/net/transport.h"
#include "server/proto/wire.h"
#include "server/proto/tls.h"
#include "server/workers/wlink.h"

#define PP_TLS_READ_BUF 65536 /* ciphertext read at once (decrypted before the next read) */

typedef struct client client;
typedef struct pp_stats {
  pp_hist_window queue, service, ttfb, total, body_wait;
  pp_hist queue_last, service_last, ttfb_last; /* the last completed window */
  uint64_t last_window_ns;
  uint64_t requests, responses, arrivals, completions;
  uint64_t arrivals_window, completions_window, shed_window, timeouts_window;
  uint64_t arrivals_last, completions_last;
  uint64_t status_1xx, status_2xx, status_3xx, status_4xx, status_5xx;
  uint64_t refused;                             /* requests answered by the parser (4xx/5xx) */
  uint64_t control_requests, control_responses; /* the control app's, in none of the above */
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
  uint64_t proxy_headers;  /* PROXY protocol headers accepted (listeners with ,proxy=) */
  uint64_t proxy_rejected; /* connections closed for a missing or malformed PROXY header */
  uint64_t tls_failures[PP_TLS_CAUSE_COUNT]; /* by pp_tls_cause */
  int64_t gvl_sum_ns, cpu_sum_ns;
  uint64_t gvl_count, cpu_count;
} pp_stats;

#define PP_ACTIVATION_RECENT 32 /* activation latencies kept one by one for /stats */

/* Standby workers (docs/CONTROL.md section 8): the pool the shepherd keeps parked, and how
 * long activations took. Parked workers themselves are registry entries (PP_WORKER_PARKED). */
typedef struct pp_standby {
  uint32_t k;                  /* --standby K the shepherd was started with */
  int enabled;                 /* the shepherd was started with --standby: it takes the frames */
  uint32_t pending;            /* standby requested (STANDBY, K at start), not PARKED nor EXITED */
  int64_t last_request_ns;     /* when the last STANDBY went out (or the shepherd started) */
  uint64_t activations;        /* ACTIVATE frames sent */
  uint64_t activations_missed; /* an activation found no parked worker: SPAWN 1 instead */
  uint64_t parked_total;       /* PARKED frames received */
  /* Activation latency from the decision (tick time): `dispatch` until the worker could serve
   * (its first REQUEST, or its first HELLO when no request was waiting then), `hello` until its
   * first HELLO, `first_request` until its first REQUEST whenever that came; the last
   * PP_ACTIVATION_RECENT of `dispatch` one by one. */
  pp_hist dispatch, hello, first_request;
  int64_t recent_ns[PP_ACTIVATION_RECENT];
  uint32_t recent_n; /* total recorded; recent_ns[i % PP_ACTIVATION_RECENT] */
} pp_standby;

typedef struct controller {
  int enabled;
  pp_policy policy;
  pp_ctl_state state;
  pp_decision last;
  int have_last;
  uint64_t tick;
  FILE *log;
  const char *log_path;
  int shedding;
  uint64_t shed_budget_ns;
  pp_standby standby;
} controller;

struct server {
  uv_loop_t *loop;
  pp_config *cfg;
  pp_h1_limits limits;
  pp_net net; /* listeners and write chunks (net/transport.h) */
  uv_pipe_t worker_listener;
  int worker_listener_open;
  char runtime_dir[256];
  int own_runtime_dir;
  char socket_path[300];
  char gem_dir[2 * 4096];

  uv_pipe_t ctl;
  int ctl_open;
  pp_wire_decoder ctl_dec;
  pp_buf ctl_rbuf;
  uv_process_t shepherd;
  int shepherd_alive;
  uint32_t shepherd_pid;
  uint64_t boot_ns;

  uv_signal_t sig_term, sig_int, sig_quit, sig_hup;
  uv_timer_t tick_timer, drain_timer, respawn_timer;
  uv_timer_t date_timer;  /* fires at each realtime second: wall (the Date value) */
  pp_wallclock wall;      /* the Date value and realtime - monotonic (base/wallclock.h) */
  uv_timer_t watch_timer; /* wlink.c: request deadlines, kill grace, heartbeats */
  /* Shepherd supervision (shepherd.c): restart with backoff, reap adopted workers. */
  uv_timer_t shepherd_timer;
  uv_signal_t sig_chld;
  uint32_t shepherd_restart_delay_ms;
  int64_t shepherd_started_ns;
  int ctl_closing;         /* the old control pipe is closing (re-init after its close callback) */
  int shepherd_ever_ready; /* a shepherd has loaded the app once: from then on, supervise */
  int shepherd_planned_restart; /* the next shepherd replaces one a phased restart killed */
  uint32_t respawn_delay_ms;    /* backoff for workers that die young */

  pp_queue queue;
  pp_registry reg;
  pp_queue clients, wconns;
  uint64_t next_request_id;
  uint32_t live_requests;   /* requests allocated (any state) */
  uint32_t max_connections; /* client connections open at most (-max-connections) */
  uint32_t workers_wanted;  /* the count the server keeps alive (respawn target) */
  uint32_t slots_shape;     /* slots per worker set for all (pp_wlink_set_slots_all); 0: the
                               starting count. Workers that connect later are told it. */
  uint32_t spawns_pending;  /* SPAWNed but not yet FORKED */
  int64_t last_spawn_ns;    /* when the last SPAWN was sent */

  pp_exchange *free_exchanges;
  uint64_t body_buffered; /* request-body bytes buffered before dispatch, all exchanges */
  pp_queue body_waiters;  /* exchanges whose uploads wait for -max-buffered-body-total */
  client *free_clients;
  uint32_t free_clients_n; /* at most PP_FREE_CLIENTS_MAX kept: a spike's structs are freed */
  uint64_t freed_bytes_since_trim; /* freed beyond the pools since the last malloc_trim */
  /* Read buffers of connections that have no unparsed bytes (conn.c): an idle keep-alive
   * connection holds none, a busy one takes one from here when bytes arrive. */
  uint8_t *rbuf_pool[64];
  int rbuf_pool_n;

  int draining, stopping;
  int64_t drain_started_ns;
  int64_t stop_sent_ns;
  time_t started_at;
  int exit_code;

  pp_stats stats;
  controller ctl_state;
  pp_dashboard dash; /* /stats/stream and the decision history (dashboard.c) */

  pp_admit_state admit; /* the admission rule's memory (control/admit.h) */
  char alt_svc[64];     /* the Alt-Svc value while an HTTP/3 listener is open, else "" */
  struct pp_h3_listener *h3[PP_MAX_LISTEN]; /* -listen-h3 (h3conn.c) */
  int h3_count;
  pp_tls_ctx tls_ctx; /* for -listen-tls (tls_enabled) */
  int tls_enabled;
  char tls_dev_cert[300], tls_dev_key[300]; /* a generated development pair, removed at exit */
  uint8_t tls_rbuf[PP_TLS_READ_BUF];

  pp_hooks hooks;    /* what the lower layers call back into (process/server.c sets them) */
  pp_lifecycle life; /* systemd, inherited sockets, hot restart, pid/state files (lifecycle.c) */
  pp_phased phased;  /* SIGUSR1, POST /phased-restart (phased.c) */
  struct pp_access_log *access_log; /* -access-log (ops/access_log.c), NULL: none */
};

/* server.c: lifecycle */
/* While draining: closes idle connections after the grace and stops when nothing is left. */
void pp_drain_check(server *s);
/* Starts the drain of SIGTERM (no new connections, finish what is queued and in flight, stop
 * the workers, exit); a no-op when already draining. Not from a session's own callback. */
void pp_server_drain(server *s);
/* Stops the shepherd if alive, removes our files, exits the process. */
void pp_server_exit(server *s, int code) __attribute__((noreturn));

/* stats.c */
/* Writes the /stats JSON (pretty: indented) into out. */
void pp_stats_json(server *s, int pretty, pp_buf *out);
/* Writes the Prometheus text of /metrics into out. */
void pp_stats_metrics(server *s, pp_buf *out);

/* autoscale.c */
/* Reads the policy (-policy, flags) and opens the decision log. 0, or -1 (logged). */
int pp_autoscale_init(server *s);
/* Writes the decision log's header line (the policy), at open and after SIGHUP. */
void pp_autoscale_log_header(server *s);
/* One controller tick: observation, pp_decide(), actuators, decision log. */
void pp_autoscale_tick(server *s);
/* A request that became runnable at enqueued_ns was just dispatched to w: if it is an
 * activated standby worker's first, its activation latency is recorded (pp_standby). */
void pp_autoscale_note_dispatch(server *s, pp_worker *w, int64_t enqueued_ns);

/* Memory of one process from /proc/PID/smaps_rollup, in bytes: USS = Private_Clean +
 * Private_Dirty, PSS = Pss, RSS = Rss. */
typedef struct pp_proc_mem {
  uint64_t rss, pss, uss;
} pp_proc_mem;
/* stats.c: 0, or -1 when the file cannot be read or parsed (the process is gone). */
int pp_proc_mem_read(uint32_t pid, pp_proc_mem *out);
/* stats.c: the mean PSS of the ready workers, -1 when none could be read. */
/* Reads each worker's CPU time (/proc/PID/stat) and sets its cpu_share over the time since
 * the last sample (the tick calls it, before the controller). */
void pp_stats_sample_cpu(server *s, int64_t now_ns);
int64_t pp_workers_mean_pss(server *s);

#endif
