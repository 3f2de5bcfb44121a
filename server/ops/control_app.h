/* The control app: /stats, /stats?pretty=1, /metrics, /dashboard and /stats/stream (GET), POST
 * /restart (a hot restart) and POST /stop (a drain, as SIGTERM) on the -control listener, behind
 * the optional -control-token (Bearer header or token= query parameter). Protocol-neutral: the
 * session glue hands in the request's method, target and Authorization value and writes the
 * response it gets back in its own framing; a `stream` response (server-sent events,
 * dashboard.h) stays open after its body and the glue makes the connection a subscriber. */
#ifndef PP_CONTROL_APP_H
#define PP_CONTROL_APP_H

#include <stddef.h>
#include <stdint.h>

#include "server/base/buf.h"

typedef struct server server;

typedef struct pp_control_request {
  int get_or_head;    /* the method is GET or HEAD (anything else is 405) */
  const char *target; /* request-target bytes (path and query) */
  size_t target_len;
  const uint8_t *authorization; /* the Authorization value, or NULL */
  size_t authorization_len;
  int head_method; /* HEAD: a stream answers its head only */
  int post;        /* the method is POST (POST /restart, POST /stop) */
} pp_control_request;

typedef struct pp_control_response {
  int status;
  const char *content_type;
  const char *allow; /* the Allow value for a 405, else NULL */
  pp_buf body;       /* initialised by pp_control_app; the caller disposes it */
  /* GET /stats/stream: no Content-Length, the body is the stream's first bytes, and the
   * connection stays open as a subscriber (pp_dashboard_subscribe) with this heartbeat. */
  int stream;
  uint32_t heartbeat_s;
} pp_control_response;

/* Answers one control request into *out (which it initialises). */
void pp_control_app(server *s, const pp_control_request *rq, pp_control_response *out);

#endif
