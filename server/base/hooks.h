/* The hooks lower layers call instead of naming the modules above them (DESIGN.md section
 * 3a: calls go down, events come back through what a layer was handed). The process layer
 * (process/server.c) fills them in at start-up; each may be NULL (a unit test's server). */
#ifndef PP_HOOKS_H
#define PP_HOOKS_H

#include <stddef.h>
#include <stdint.h>

#include "server/base/queue.h"

typedef struct server server;
typedef struct pp_access_rec pp_access_rec;

typedef struct pp_hooks {
  /* The worker link (workers/wlink.c): */
  /* a slot became idle (HELLO, RESPONSE_END, a timed-out request ended): core/dispatch.c
   * gives queued requests to idle slots */
  void (*slot_free)(server *s);

  /* The client connections and the worker link: */
  /* while draining: a client connection or a worker connection went away, so the drain may
   * be complete (process/server.c: close idle connections, stop when nothing is left). */
  void (*drain_progress)(server *s);
  /* Dispatch sent a request that became runnable at enqueued_ns to w, the first since w was
   * activated from standby (ops/autoscale.c records the activation latency). */
  void (*activated_dispatch)(server *s, pp_worker *w, int64_t enqueued_ns);
  /* Worker pid exited (or was killed): its sticky WebSocket connections close with 1012
   * (session/wsconn.c). */
  void (*worker_gone)(server *s, uint32_t pid);
  /* A request's response is done (an exchange released, or a response the session made
   * itself before there was one): ops/access_log.c writes its line. NULL when no access log
   * is configured, so the request path pays one test for it. */
  void (*request_done)(void *ctx, const pp_access_rec *r);
  void *request_done_ctx;

  /* What the process does for the layers below it (process/server.c, process/lifecycle.c): */
  /* stops the shepherd if alive, removes the server's files, exits the process; never returns */
  void (*exit)(server *s, int code);
  /* POST /stop: a drain, as SIGTERM, from the next loop iteration */
  void (*stop_soon)(server *s);
  /* POST /restart: a hot restart; the new process's pid, or -1 with msg saying why */
  long (*hot_restart)(server *s, char *msg, size_t msg_len);
  /* a reload begins (what says which) or ends (begin 0): systemd's RELOADING=1 / READY=1 */
  void (*reloading)(server *s, int begin, const char *what);
} pp_hooks;

#endif
