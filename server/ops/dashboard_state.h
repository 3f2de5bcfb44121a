/* The dashboard's state (dashboard.h): the decision history, the tick history the page draws
 * on load, the stream's counters and its heartbeat timer. Its own header so that the ops layer's
 * context (ops.h) can hold it while dashboard.c reads that context. */
#ifndef PP_DASHBOARD_STATE_H
#define PP_DASHBOARD_STATE_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <uv.h>

#include "control/decide.h"
#include "server/base/buf.h"

#define PP_DASH_DECISIONS         16 /* decisions kept for controller.decisions */
#define PP_DASH_HEARTBEAT_DEFAULT 15 /* seconds without a write before a heartbeat comment */
#define PP_DASH_HEARTBEAT_MAX     3600
#define PP_DASH_MAX_PENDING       (1u << 20) /* a subscriber this far behind is closed */
#define PP_DASH_RETRY_MS          2000       /* the `retry:` the stream announces */
#define PP_DASH_HISTORY           300        /* ticks kept for the page's charts (5 min at 1 s) */

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

/* One tick of the charts, as the page computes it from that tick's stats event: the last
 * window's queue percentiles and rates, the worker counts, and the shed and timeout totals
 * (the page turns those into per-second rates). About 90 bytes; PP_DASH_HISTORY of them. */
typedef struct pp_dash_point {
  uint64_t tick;                 /* the stats event's id */
  double p50_ms, p95_ms, p99_ms; /* queue wait, the last window */
  double arrival_rate, completion_rate;
  uint32_t workers_ready, workers_booting, old_workers;
  uint64_t shed, timeouts;
} pp_dash_point;

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
  pp_dash_point points[PP_DASH_HISTORY]; /* a ring, newest at points_head - 1 */
  uint32_t points_len, points_head;
  uv_timer_t heartbeat_timer; /* started with the first subscriber, unreferenced */
  int heartbeat_started;
  pp_buf event; /* the current tick's event, reused */
} pp_dashboard;

#endif
