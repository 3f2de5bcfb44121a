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
#include "server/ops/ops.h"
#include "server/session/local_app.h"

/* The request and response types are the local app's (session/local_app.h). */
typedef pp_local_request pp_control_request;
typedef pp_local_response pp_control_response;

/* Answers one control request into *out (which it initialises). */
void pp_control_app(pp_ops *op, const pp_control_request *rq, pp_control_response *out);

#endif
