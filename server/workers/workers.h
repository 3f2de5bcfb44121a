/* The workers layer's own context (workers/): the worker listener and the worker
 * connections, the registry of workers, the shepherd and its control pipe, the spawn
 * bookkeeping and the phased restart, and what it is handed of the other layers at set-up
 * (pp_workers_init). struct server holds one (s->workers). */
#ifndef PP_WORKERS_H
#define PP_WORKERS_H

#include <stdint.h>
#include <uv.h>

#include "control/admit.h"
#include "server/base/buf.h"
#include "server/base/config.h"
#include "server/base/hooks.h"
#include "server/base/queue.h"
#include "server/exchange/exchange.h"
#include "server/net/transport.h"
#include "server/proto/stats.h"
#include "server/proto/wire.h"
#include "server/workers/phased.h"

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

  uv_timer_t respawn_timer;
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

  pp_registry reg;
  pp_queue wconns;
  uint32_t workers_wanted; /* the count the server keeps alive (respawn target) */
  uint32_t slots_shape;    /* slots per worker set for all (pp_wlink_set_slots_all); 0: the
                              starting count. Workers that connect later are told it. */
  uint32_t spawns_pending; /* SPAWNed but not yet FORKED */
  int64_t last_spawn_ns;   /* when the last SPAWN was sent */

  pp_phased phased; /* SIGUSR1, POST /phased-restart (phased.c) */

  /* Handed in at set-up (process/server.c): the lower layers' contexts it drives, and what it
   * reads or bumps of the layers above it, as plain pointers. */
  uv_loop_t *loop;
  const pp_config *cfg;
  pp_net *net;             /* write chunks (wlink.c) */
  pp_exchange_pool *xpool; /* exchanges released when their worker is lost */
  const pp_hooks *hooks;   /* slot_free, drain_progress */
  server *srv;             /* handed to the hooks and to shepherd.c; never read here */
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

#endif
