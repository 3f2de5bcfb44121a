/* The workers layer's own context (workers/): the worker listener and the worker
 * connections, the registry of workers, the shepherd and its control pipe, the spawn
 * bookkeeping, the phased restart and the standby pool, and what it is handed of the other
 * layers at set-up (pp_workers_init, pp_workers_init_process). struct server holds one
 * (s->workers). */
#ifndef PP_WORKERS_H
#define PP_WORKERS_H

#include <stdint.h>
#include <time.h>
#include <uv.h>

#include "control/admit.h"
#include "control/hist.h"
#include "server/base/buf.h"
#include "server/base/config.h"
#include "server/base/hooks.h"
#include "server/base/queue.h"
#include "server/exchange/exchange.h"
#include "server/net/transport.h"
#include "server/proto/stats.h"
#include "server/proto/wire.h"

/* A phased restart's state (phased.c; docs/SERVER.md "Phased restart"). */
typedef enum pp_phased_state {
  PP_PHASED_IDLE = 0,
  PP_PHASED_PROBING = 1, /* the probe shepherd is loading the new code */
  PP_PHASED_ROLLING = 2, /* the shepherd was swapped; old workers are being replaced */
} pp_phased_state;

typedef struct pp_phased {
  pp_phased_state state;
  uv_signal_t sig_usr1;
  uv_timer_t timer; /* the probe's timeout, then the roll's poll */
  /* The probe shepherd: its process, its control channel (fd 3) and its stderr, which is
   * copied to ours and remembered so that /stats can name why the new code did not boot. */
  uv_process_t probe;
  int probe_alive;
  uint32_t probe_pid;
  int probe_ready;
  int probe_settled;    /* exited and decided on (swap or abort) */
  int64_t probe_status; /* its exit status and signal */
  int probe_sig;
  uv_pipe_t probe_ctl, probe_err;
  int probe_ctl_open, probe_err_open;
  int handles_closing; /* probe handles whose close callback has not run yet */
  pp_wire_decoder probe_dec;
  pp_buf probe_rbuf;
  char probe_stderr[512]; /* the last line of the probe's stderr that names an error */
  char probe_err_buf[4096];
  int swap_planned;  /* the shepherd was killed on purpose (shepherd.c asks) */
  time_t started_at; /* wall time of the last start */
  int64_t started_ns;
  int roll_spawned;        /* a SPAWN of the roll not yet matched by a ready worker */
  int64_t roll_spawned_ns; /* when it was sent */
  uint32_t roll_failures;  /* SPAWNed workers in a row that exited before they were ready */
  uint32_t old_workers_at_start;
  uint32_t workers_replaced; /* old workers retired by this one */
  char last_result[16];      /* "none", "ok", "aborted" */
  char last_error[640];      /* why the last one was aborted, or "" */
  double last_duration_s;
  uint64_t completed, aborted; /* counters for /metrics */
} pp_phased;

#define PP_ACTIVATION_RECENT 32 /* activation latencies kept one by one for /stats */

/* Standby workers (docs/CONTROL.md section 8): the pool the shepherd keeps parked, and how
 * long activations took. Parked workers themselves are registry entries (PP_WORKER_PARKED).
 * The shepherd link sends STANDBY and ACTIVATE and counts PARKED (shepherd.c); the controller
 * (ops/autoscale.c) turns it on at start and records the activation latencies. */
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

/* What a phased restart reads of the process's lifecycle (process/lifecycle.h), handed in at
 * set-up as pointers to its fields (pp_workers_init_process); never written here. */
typedef struct pp_workers_life {
  const int *ready;       /* the workers were ready once (READY=1 sent) */
  const int *restarting;  /* a hot restart's new server is booting */
  const long *new_pid;    /* and its pid */
  const int *handed_over; /* the new server of a hot restart took over */
} pp_workers_life;

typedef struct pp_workers {
  uv_pipe_t worker_listener;
  int worker_listener_open;
  char runtime_dir[256];
  int own_runtime_dir;
  char socket_path[300];
  char gem_dir[2 * 4096];

  uv_pipe_t ctl; /* the shepherd's control pipe */
  int ctl_open;
  pp_wire_decoder ctl_dec;
  pp_buf ctl_rbuf;
  uv_process_t shepherd;
  int shepherd_alive;
  uint32_t shepherd_pid;
  uint64_t boot_ns;

  uv_timer_t respawn_timer; /* shepherd.c: a respawn after a young worker died */
  uv_timer_t watch_timer;   /* wlink.c: request deadlines, kill grace, heartbeats */
  /* Shepherd supervision (shepherd.c): restart with backoff, reap adopted workers. */
  uv_timer_t shepherd_timer;
  uv_signal_t sig_chld;
  uint32_t shepherd_restart_delay_ms;
  int64_t shepherd_started_ns;
  int ctl_closing;         /* the old control pipe is closing (re-init after its close callback) */
  int shepherd_ever_ready; /* a shepherd has loaded the app once: from then on, supervise */
  int shepherd_planned_restart; /* the next shepherd replaces one a phased restart killed */
  uint32_t respawn_delay_ms;    /* backoff for workers that die young */

  pp_registry reg;
  pp_queue wconns;
  uint32_t workers_wanted; /* the count the server keeps alive (respawn target) */
  uint32_t slots_shape;    /* slots per worker set for all (pp_wlink_set_slots_all); 0: the
                              starting count. Workers that connect later are told it. */
  uint32_t spawns_pending; /* SPAWNed but not yet FORKED */
  int64_t last_spawn_ns;   /* when the last SPAWN was sent */

  pp_phased phased;   /* SIGUSR1, POST /phased-restart (phased.c) */
  pp_standby standby; /* the standby pool (shepherd.c, ops/autoscale.c) */
  /* Set by the worker link when it starts (pp_wlink_listen): the shepherd reports a worker
   * process gone through it, and the link closes that worker's connections (wlink.c calls
   * the shepherd by name, so the shepherd calls it back through this). */
  void (*close_worker_conns)(struct pp_workers *ws, uint32_t pid);

  /* Handed in at set-up (process/server.c): the lower layers' contexts it drives, and what it
   * reads or bumps of the layers above it, as plain pointers. */
  uv_loop_t *loop;
  const pp_config *cfg;
  pp_net *net;             /* write chunks (wlink.c) */
  pp_exchange_pool *xpool; /* exchanges released when their worker is lost */
  const pp_hooks *hooks;   /* slot_free, drain_progress (wlink.c); exit (shepherd.c); reloading
                              (phased.c) */
  server *srv;             /* handed to the hooks; never read here */
  pp_stats *stats;         /* the counters (held in the core's context) */
  pp_admit_state *admit;   /* the admission rule's memory (core/): a completion updates it */
  const pp_policy *policy; /* the controller's policy (ops/) */
  const int *draining;     /* the server's drain and stop flags (process/) */
  const int *stopping;
  /* WebSocket commands from any worker connection (WS_SEND, WS_TAG, WS_BROADCAST,
   * WS_CLOSE_CONN), handed to the layer that owns the connections (session/wsconn.c): NULL when
   * the frame was taken, or why it breaks the protocol (the worker connection closes). */
  const char *(*ws_command)(void *ctx, const pp_wire_frame *f);
  void *ws_ctx;
  const int *exit_code; /* what the process exits with once stopping (process/) */
  pp_workers_life life; /* what a phased restart reads of the process's lifecycle */
} pp_workers;

/* Hands ws what it reaches outside its own layer (the fields above). */
static inline void pp_workers_init(pp_workers *ws, server *srv, uv_loop_t *loop,
                                   const pp_config *cfg, pp_net *net, pp_exchange_pool *xpool,
                                   const pp_hooks *hooks, pp_stats *stats, pp_admit_state *admit,
                                   const pp_policy *policy, const int *draining,
                                   const int *stopping) {
  ws->srv = srv, ws->loop = loop, ws->cfg = cfg, ws->net = net, ws->xpool = xpool;
  ws->hooks = hooks, ws->stats = stats, ws->admit = admit, ws->policy = policy;
  ws->draining = draining, ws->stopping = stopping;
}

/* The process's exit status and lifecycle (the fields above); the process layer calls it once
 * after pp_workers_init (a unit test that runs no shepherd need not). */
static inline void pp_workers_init_process(pp_workers *ws, const int *exit_code,
                                           pp_workers_life life) {
  ws->exit_code = exit_code, ws->life = life;
}

/* shepherd.c: the shepherd that just exited was killed by a phased restart's swap (1, once),
 * so it is replaced at once, without backoff and without counting it as an unexpected
 * restart. */
static inline int pp_phased_swap_planned(pp_workers *ws) {
  if (!ws->phased.swap_planned) return 0;
  ws->phased.swap_planned = 0;
  return 1;
}

/* Nonzero while pid is a phased restart's probe shepherd (the orphan reaper leaves it to
 * libuv). */
static inline int pp_phased_owns_pid(const pp_workers *ws, uint32_t pid) {
  return ws->phased.probe_alive && ws->phased.probe_pid == pid;
}

#endif
