/* struct server: the whole front end, owned by the process layer (server.c). It holds each
 * layer's context (declared in that layer's folder: pp_net, pp_exchange_pool, pp_workers,
 * pp_core, pp_sessions, pp_ops) and what the process layer owns itself: the loop, the
 * configuration, signals, the drain state, the hooks and the lifecycle. Every lower layer is
 * handed its own context and never includes this header, nor does lifecycle.c (pp_lifecycle
 * is handed what it reads). What a lower layer calls back into above it is s->hooks
 * (base/hooks.h), set by server.c, never a name. Only server.c (and unit tests) include it. Not a
 * public API. */
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
#include "server/workers/workers.h"
#include "server/core/core.h"
#include "server/ops/ops.h"

typedef struct client client;

/* The whole front end: the layers' contexts, each declared in its own folder, and what the
 * process layer itself owns (the loop, the configuration, signals, drain, lifecycle). */
struct server {
  uv_loop_t *loop;
  pp_config *cfg;
  pp_net net;             /* listeners and write chunks (net/transport.h) */
  pp_exchange_pool xpool; /* the exchange pool and the body budget (exchange/exchange.h) */
  pp_workers workers;     /* worker link, registry, shepherd, phased restart (workers/workers.h) */
  pp_core core;           /* queue, request ids, admission, counters (core/core.h) */
  pp_sessions sess;       /* client connections, TLS, HTTP/3 listeners (session/conn.h) */
  pp_ops ops;             /* controller and dashboard (ops/ops.h) */

  uv_signal_t sig_term, sig_int, sig_quit, sig_hup;
  uv_timer_t tick_timer, drain_timer;
  uv_timer_t date_timer; /* fires at each realtime second: wall (the Date value) */
  pp_wallclock wall;     /* the Date value and realtime - monotonic (base/wallclock.h) */
  int draining, stopping;
  int64_t drain_started_ns;
  int64_t stop_sent_ns;
  time_t started_at;
  int exit_code;
  char tls_dev_cert[300], tls_dev_key[300]; /* a generated development pair, removed at exit */

  pp_hooks hooks;    /* what the lower layers call back into (process/server.c sets them) */
  pp_lifecycle life; /* systemd, inherited sockets, hot restart, pid/state files (lifecycle.c) */
};

/* server.c: lifecycle */
/* While draining: closes idle connections after the grace and stops when nothing is left. */
void pp_drain_check(server *s);
/* Starts the drain of SIGTERM (no new connections, finish what is queued and in flight, stop
 * the workers, exit); a no-op when already draining. Not from a session's own callback. */
void pp_server_drain(server *s);
/* Stops the shepherd if alive, removes our files, exits the process. */
void pp_server_exit(server *s, int code) __attribute__((noreturn));

#endif
