/* The live dashboard of the control app: the page of GET /dashboard (server/ops/dashboard.html,
 * compiled in), the server-sent-events stream of GET /stats/stream (one `stats` event per
 * tick carrying the /stats JSON, heartbeat comments while nothing else is written) and the
 * short history of the controller's decisions that /stats shows as `controller.decisions`.
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
#include "server/session/local_app.h"

#define PP_DASH_DECISIONS         16 /* decisions kept for controller.decisions */
#define PP_DASH_HEARTBEAT_DEFAULT 15 /* seconds without a write before a heartbeat comment */
#define PP_DASH_HEARTBEAT_MAX     3600
#define PP_DASH_MAX_PENDING       (1u << 20) /* a subscriber this far behind is closed */
#define PP_DASH_RETRY_MS          2000       /* the `retry:` the stream announces */

/* One remembered decision: every action other than none, every change of shedding, and the
 * first decision after start. */
typedef struct pp_dash_decision {
  uint64_t tick; /* the controller's tick number */
  time_t at;     /* wall clock when it was made */
  pp_action action;
  uint32_t count;
  int shed;
  char reason[sizeof(((pp_decision *)0)->reason)];
} pp_dash_decision;

typedef struct pp_dashboard {
  uint64_t ticks;             /* stats windows completed since start: the events' id */
  uint64_t events;            /* stats events written, summed over subscribers */
  uint64_t heartbeats;        /* heartbeat comments written */
  uint64_t subscribers_total; /* subscriptions accepted since start */
  uint64_t slow_closed;       /* subscribers closed for falling PP_DASH_MAX_PENDING behind */
  uint64_t seen_ctl_tick;     /* the controller tick last looked at */
  int have_seen;
  pp_dash_decision decisions[PP_DASH_DECISIONS]; /* a ring, newest at head - 1 */
  uint32_t decisions_len, decisions_head;
  uv_timer_t heartbeat_timer; /* started with the first subscriber, unreferenced */
  int heartbeat_started;
  pp_buf event; /* the current tick's event, reused */
} pp_dashboard;

/* The page of GET /dashboard (build/server/dashboard_page.c, from server/ops/dashboard.html). */
extern const unsigned char pp_dashboard_html[];
extern const size_t pp_dashboard_html_len;

/* Called once per tick by the server, after the controller ran and before the windows roll:
 * remembers the controller's decision, then writes one event to every subscriber (closing
 * those too far behind, and all of them while the server drains). */
void pp_dashboard_tick(server *s);

/* Appends the SSE bytes a new subscriber gets first: `retry:`, a comment naming the stream,
 * and the latest tick's event (so a page shows data at once). */
void pp_dashboard_stream_prelude(server *s, pp_buf *out);

/* c now is a subscriber (its response head and prelude are queued), written through ops (the
 * session glue's): heartbeat_s seconds without a write make a heartbeat comment. */
void pp_dashboard_subscribe(server *s, client *c, uint32_t heartbeat_s, const pp_sse_ops *ops);

/* Subscribers open now (counted over the server's client list). */
uint32_t pp_dashboard_subscribers(server *s);

/* Writes /stats "stream" into root. */
void pp_dashboard_stats_json(server *s, json_t *root);

/* Writes its lines of /metrics into out. */
void pp_dashboard_metrics(server *s, pp_buf *out);

#endif
