/* A local app: requests a listener's owner answers in the server itself instead of sending
 * them to a worker (the control app of -control, ops/control_app.c). The process layer hands
 * the listener its app (listener.local_app); the session glue gives the app each request
 * protocol-neutrally (method, target, Authorization) and writes the response it gets back in
 * its own framing. A `stream` response (server-sent events) stays open after its body: the
 * glue hands the app the connection as a subscriber, with the ops that write to it. Nothing in
 * the session names the app, and the data listeners have none. */
#ifndef PP_LOCAL_APP_H
#define PP_LOCAL_APP_H

#include <stddef.h>
#include <stdint.h>

#include "server/base/buf.h"

typedef struct server server;
typedef struct client client;

typedef struct pp_local_request {
  int get_or_head;    /* the method is GET or HEAD (anything else is 405) */
  const char *target; /* request-target bytes (path and query) */
  size_t target_len;
  const uint8_t *authorization; /* the Authorization value, or NULL */
  size_t authorization_len;
  int head_method; /* HEAD: a stream answers its head only */
  int post;        /* the method is POST (POST /restart, POST /stop) */
} pp_local_request;

typedef struct pp_local_response {
  int status;
  const char *content_type;
  const char *allow; /* the Allow value for a 405, else NULL */
  pp_buf body;       /* initialised by the app; the caller disposes it */
  /* A stream (GET /stats/stream): no Content-Length, the body is the stream's first bytes,
   * and the connection stays open as a subscriber (pp_local_app.subscribe) with this
   * heartbeat. */
  int stream;
  uint32_t heartbeat_s;
} pp_local_response;

/* How a local app writes to a subscriber: the session glue's, handed in with it. */
typedef struct pp_sse_ops {
  /* Queues and flushes bytes, keeping a write timeout armed for them. */
  void (*send)(client *c, const void *data, size_t len);
  /* Closes c: at once, or graceful (half-close, then discard briefly). */
  void (*close)(client *c, int graceful);
} pp_sse_ops;

typedef struct pp_local_app {
  /* Answers one request into *out (which it initialises). */
  void (*handle)(server *s, const pp_local_request *rq, pp_local_response *out);
  /* After a `stream` response's head and first bytes are queued: c is a subscriber from now
   * on, written through ops; heartbeat_s seconds without a write make a heartbeat. */
  void (*subscribe)(server *s, client *c, uint32_t heartbeat_s, const pp_sse_ops *ops);
} pp_local_app;

#endif
