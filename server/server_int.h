/* Internals shared by server.c (the event loop: listeners, clients, worker connections,
 * shepherd) and stats.c (the control app's /stats and /metrics). Not a public API. */
#ifndef PP_SERVER_INT_H
#define PP_SERVER_INT_H

#include <stdint.h>
#include <stdio.h>
#include <uv.h>

#include "control/control.h"
#include "server/buf.h"
#include "server/config.h"
#include "server/http1.h"
#include "server/queue.h"
#include "server/wire.h"

#define PP_BODY_BUFFER_LIMIT (1u << 20)   /* bodies up to 1 MiB are buffered before T2b */
#define PP_CLIENT_RBUF       16384        /* per-client read buffer */
#define PP_CHUNK_CAP         65536        /* pooled write chunk */
#define PP_CLIENT_WRITE_HIGH (1u << 20)   /* stop reading the worker above this */
#define PP_CLIENT_WRITE_LOW  (256u << 10) /* resume below this */
#define PP_WORKER_WRITE_HIGH (1u << 20)   /* stop reading a streaming client above this */

typedef struct server server;
typedef struct client client;
typedef struct wconn wconn;
typedef struct request request;

typedef enum listener_kind { LISTEN_HTTP, LISTEN_CONTROL } listener_kind;

typedef struct listener {
  union {
    uv_tcp_t tcp;
    uv_pipe_t pipe;
    uv_handle_t handle;
    uv_stream_t stream;
  } h;
  server *srv;
  listener_kind kind;
  pp_addr addr;
  char port_text[8];
  int open;
} listener;

/* A pooled write buffer with its uv_write_t. */
typedef struct wchunk {
  uv_write_t wr;
  struct wchunk *next_free;
  server *srv;
  void *owner; /* client or wconn */
  int to_client;
  size_t len, cap;
  uint8_t *data;
} wchunk;

typedef enum req_state {
  RS_BODY = 1,  /* headers parsed, body arriving (not yet runnable) */
  RS_QUEUED,    /* runnable, in the queue */
  RS_RUNNING,   /* dispatched to a worker connection */
  RS_RESPONDED, /* RESPONSE_END received; bytes may still be flushing */
  RS_CONTROL,   /* a control-app request */
} req_state;

struct request {
  pp_qnode qlink;
  request *next_free;
  uint64_t id;
  req_state state;
  client *c; /* NULL once the client is gone */
  wconn *w;  /* while running */
  int streaming, body_done, head_method, cancelled, head_sent, keep_alive;
  int msg_complete;
  int resp_chunked, resp_no_body, resp_close;
  int64_t t1, t2, t2b, t3;
  pp_buf head; /* REQUEST frame up to and including the queue_ns key */
  size_t queue_key_end;
  pp_buf body;         /* [u32 length][body bytes] */
  uv_write_t wreq;     /* the REQUEST write */
  int writes;          /* REQUEST writes in flight referencing head/body */
  int release_pending; /* free when writes reaches 0 */
  uint8_t len_zero[4];
  char queue_digits[24];
};

struct client {
  union {
    uv_tcp_t tcp;
    uv_pipe_t pipe;
    uv_handle_t handle;
    uv_stream_t stream;
  } h;
  client *next_free;
  pp_qnode link; /* in srv->clients */
  server *srv;
  listener *ls;
  pp_h1 h1;
  uint8_t *rbuf;
  size_t rlen, rpos;
  uv_timer_t timer;
  uv_shutdown_t shutdown_req;
  request *req;
  wchunk *out;
  int writes_in_flight;
  size_t write_bytes; /* bytes queued to the kernel and not yet written */
  int parser_paused, reading, closing, close_after_write, discarding, response_done;
  int eof;
  int in_parse; /* inside pp_h1_execute: never re-enter the parser */
  /* The response went out before the request's body had all arrived (a streamed upload the
   * app did not read): the rest of the body is read and dropped, then keep-alive goes on. */
  int discard_body;
  int discard_done; /* that body ended inside the parser: resume it after pp_h1_execute */
  int64_t t1;
  int64_t last_progress;
  char remote[64];
};

struct wconn {
  uv_pipe_t pipe;
  pp_qnode link; /* in srv->wconns */
  server *srv;
  pp_wire_decoder dec;
  pp_buf rbuf;
  pp_slot slot;
  request *req;
  int hello, closing, paused;
  uint32_t pid;
};

typedef struct pp_stats {
  pp_hist_window queue, service, ttfb, total, body_wait;
  pp_hist queue_last, service_last, ttfb_last; /* the last completed window */
  uint64_t last_window_ns;
  uint64_t requests, responses, arrivals, completions;
  uint64_t arrivals_window, completions_window, shed_window, timeouts_window;
  uint64_t arrivals_last, completions_last;
  uint64_t status_1xx, status_2xx, status_3xx, status_4xx, status_5xx;
  uint64_t refused; /* requests answered by the parser (4xx/5xx) */
  uint64_t cancelled_queued, cancelled_running, shed, errors_502, errors_500;
  uint64_t timeouts, worker_restarts, worker_protocol_errors;
  uint64_t connections_accepted;
  int64_t gvl_sum_ns, cpu_sum_ns;
  uint64_t gvl_count, cpu_count;
} pp_stats;

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
} controller;

struct server {
  uv_loop_t *loop;
  pp_config *cfg;
  pp_h1_limits limits;
  listener listeners[PP_MAX_LISTEN + 1];
  int listener_count;
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
  uint32_t respawn_delay_ms; /* backoff for workers that die young */

  pp_queue queue;
  pp_registry reg;
  pp_queue clients, wconns;
  uint64_t next_request_id;
  uint32_t live_requests;  /* requests allocated (any state) */
  uint32_t workers_wanted; /* the count the server keeps alive (respawn target) */
  uint32_t spawns_pending; /* SPAWNed but not yet FORKED */
  int64_t last_spawn_ns;   /* when the last SPAWN was sent */

  request *free_requests;
  client *free_clients;
  wchunk *free_chunks;

  int draining, stopping;
  int64_t drain_started_ns;
  int64_t stop_sent_ns;
  time_t started_at;
  int exit_code;

  pp_stats stats;
  controller ctl_state;
};

/* stats.c */
/* Writes the /stats JSON (pretty: indented) into out. */
void pp_stats_json(server *s, int pretty, pp_buf *out);
/* Writes the Prometheus text of /metrics into out. */
void pp_stats_metrics(server *s, pp_buf *out);
/* The predicted wait of a request arriving now (UINT64_MAX: no capacity). */
uint64_t pp_server_predicted_wait(server *s);

/* autoscale.c */
/* Reads the policy (-policy, flags) and opens the decision log. 0, or -1 (logged). */
int pp_controller_init(server *s);
/* Writes the decision log's header line (the policy), at open and after SIGHUP. */
void pp_controller_log_header(server *s);
/* One controller tick: observation, pp_decide(), actuators, decision log. */
void pp_controller_tick(server *s);

/* server.c, for autoscale.c */
void pp__ctl_spawn(server *s, uint32_t n);    /* SPAWN n */
void pp__ctl_retire(server *s, pp_worker *w); /* stop dispatching to w, RETIRE its pid */

static inline int64_t pp_now_ns(void) {
  return (int64_t)uv_hrtime();
}

#endif
