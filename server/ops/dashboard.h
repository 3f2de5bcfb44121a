/* The live dashboard of the control app: the page of GET /dashboard (server/ops/dashboard.html,
 * compiled in), the server-sent-events stream of GET /stats/stream (one `stats` event per
 * tick carrying the /stats JSON, heartbeat comments while nothing else is written), the
 * history of the last PP_DASH_HISTORY ticks that a new subscriber gets first (a `history`
 * event: the page draws the minutes before it was opened) and the short history of the
 * controller's decisions that /stats shows as `controller.decisions`.
 * Workload: a handful of subscribers (browsers, scrapers) against thousands of data
 * connections; the event is built once per tick and copied to each subscriber. Format and
 * limits: docs/SERVER.md, "Dashboard and /stats/stream". Not a public API. */
#ifndef PP_DASHBOARD_H
#define PP_DASHBOARD_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <uv.h>

#include "control/decide.h"
#include "server/base/buf.h"
#include "server/ops/dashboard_state.h"
#include "server/session/local_app.h"

typedef struct pp_ops pp_ops; /* ops.h */

/* The page of GET /dashboard (build/server/dashboard_page.c, from server/ops/dashboard.html). */
extern const unsigned char pp_dashboard_html[];
extern const size_t pp_dashboard_html_len;

/* Called once per tick by the server, after the controller ran and before the windows roll:
 * remembers the controller's decision and the tick's chart point, then writes one event to
 * every subscriber (closing those too far behind, and all of them while the server drains). */
void pp_dashboard_tick(pp_ops *op);

/* Appends the SSE bytes a new subscriber gets first: `retry:`, a comment naming the stream,
 * the `history` event (the ticks kept, oldest first) and the latest tick's event (so a page
 * shows data, and minutes of it, at once). */
void pp_dashboard_stream_prelude(pp_ops *op, pp_buf *out);

/* c now is a subscriber (its response head and prelude are queued), written through ops (the
 * session glue's): heartbeat_s seconds without a write make a heartbeat comment. */
void pp_dashboard_subscribe(pp_ops *op, client *c, uint32_t heartbeat_s, const pp_sse_ops *ops);

/* Subscribers open now (counted over the server's client list). */
uint32_t pp_dashboard_subscribers(pp_ops *op);

/* Appends the history as JSON (one line): {"window_seconds": s, "points": [{"id": tick,
 * "p50_ms", "p95_ms", "p99_ms", "arrival_rate", "completion_rate", "workers_ready",
 * "workers_booting", "old_workers", "shed", "timeouts"}, ...]} oldest first. GET
 * /stats/history answers it too. */
void pp_dashboard_history_json(pp_ops *op, pp_buf *out);

/* Writes /stats "stream" into root. */
void pp_dashboard_stats_json(pp_ops *op, json_t *root);

/* Writes its lines of /metrics into out. */
void pp_dashboard_metrics(pp_ops *op, pp_buf *out);

#endif
