/* The dashboard's stream and decision history (see dashboard.h). A subscriber is an
 * HTTP/1.1 control connection whose response head went out and whose exchange is released:
 * it stays in the server's client list with sse_heartbeat_s set, so a subscriber that goes
 * away is closed and pooled by the ordinary connection code (EOF, reset, write error or
 * write timeout) and needs no list of its own. Fan-out walks the client list once per tick;
 * the event is built once. */
#include "server/ops/dashboard.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "server/session/conn.h"
#include "server/base/prom.h"
#include "server/base/clock.h"
#include "server/base/log.h"
#include "server/ops/ops.h"
#include "server/workers/phased.h"

static void remember_decision(pp_ops *op) {
  pp_dashboard *d = &op->dash;
  controller *ct = &op->ctl;
  if (!ct->have_last || (d->have_seen && ct->tick == d->seen_ctl_tick)) return;
  const pp_decision *dec = &ct->last;
  int first = !d->have_seen;
  d->have_seen = 1;
  d->seen_ctl_tick = ct->tick;
  const pp_dash_decision *prev =
      d->decisions_len
          ? &d->decisions[(d->decisions_head + PP_DASH_DECISIONS - 1) % PP_DASH_DECISIONS]
          : NULL;
  int shed_changed = prev ? prev->shed != dec->shed : dec->shed;
  if (!first && dec->action == PP_ACTION_NONE && !shed_changed) return;
  pp_dash_decision *e = &d->decisions[d->decisions_head];
  d->decisions_head = (d->decisions_head + 1) % PP_DASH_DECISIONS;
  if (d->decisions_len < PP_DASH_DECISIONS) d->decisions_len++;
  e->tick = ct->tick - 1; /* pp_autoscale_tick counted it already */
  e->at = time(NULL);
  e->action = dec->action;
  e->count = dec->count;
  e->shed = dec->shed;
  snprintf(e->reason, sizeof e->reason, "%s", dec->reason);
}

/* The tick's chart point, read from what /stats reports for the same tick (stats.c: the last
 * completed window, the registry's counts), so the page draws history as it draws live ticks. */
static void remember_point(pp_ops *op) {
  pp_dashboard *d = &op->dash;
  pp_stats *st = &op->core->stats;
  pp_dash_point *p = &d->points[d->points_head];
  d->points_head = (d->points_head + 1) % PP_DASH_HISTORY;
  if (d->points_len < PP_DASH_HISTORY) d->points_len++;
  p->tick = d->ticks;
  p->p50_ms = (double)pp_hist_percentile(&st->queue_last, 50) / 1e6;
  p->p95_ms = (double)pp_hist_percentile(&st->queue_last, 95) / 1e6;
  p->p99_ms = (double)pp_hist_percentile(&st->queue_last, 99) / 1e6;
  double window = (double)st->last_window_ns;
  p->arrival_rate = window ? (double)st->arrivals_last * 1e9 / window : 0;
  p->completion_rate = window ? (double)st->completions_last * 1e9 / window : 0;
  p->workers_ready = pp_registry_count(&op->workers->reg, PP_WORKER_READY);
  p->workers_booting =
      pp_registry_count(&op->workers->reg, PP_WORKER_BOOTING) + op->workers->spawns_pending;
  p->old_workers = pp_phased_old_workers(op->workers);
  p->shed = st->shed;
  p->timeouts = st->timeouts;
}

void pp_dashboard_history_json(pp_ops *op, pp_buf *out) {
  pp_dashboard *d = &op->dash;
  char num[512];
  int n = snprintf(num, sizeof num, "{\"window_seconds\":%.17g,\"points\":[",
                   (double)op->cfg->tick_ns / 1e9);
  pp_buf_append(out, num, (size_t)n);
  uint32_t first = (d->points_head + PP_DASH_HISTORY - d->points_len) % PP_DASH_HISTORY;
  for (uint32_t i = 0; i < d->points_len; i++) {
    const pp_dash_point *p = &d->points[(first + i) % PP_DASH_HISTORY];
    n = snprintf(
        num, sizeof num,
        "%s{\"id\":%" PRIu64 ",\"p50_ms\":%.17g,\"p95_ms\":%.17g,\"p99_ms\":%.17g,"
        "\"arrival_rate\":%.17g,\"completion_rate\":%.17g,\"workers_ready\":%u,"
        "\"workers_booting\":%u,\"old_workers\":%u,\"shed\":%" PRIu64 ",\"timeouts\":%" PRIu64 "}",
        i ? "," : "", p->tick, p->p50_ms, p->p95_ms, p->p99_ms, p->arrival_rate, p->completion_rate,
        p->workers_ready, p->workers_booting, p->old_workers, p->shed, p->timeouts);
    pp_buf_append(out, num, (size_t)n);
  }
  pp_buf_append(out, "]}", 2);
}

/* The current event: id, type and the /stats JSON on one data line (compact JSON has no raw
 * newline: jansson escapes them inside strings). */
static void build_event(pp_ops *op, pp_buf *ev) {
  ev->len = 0;
  char head[64];
  int n = snprintf(head, sizeof head, "id: %" PRIu64 "\nevent: stats\ndata: ", op->dash.ticks);
  pp_buf_append(ev, head, (size_t)n);
  op->stats_json(op, 0, ev);
  while (ev->len && ev->data[ev->len - 1] == '\n')
    ev->len--;
  pp_buf_append(ev, "\n\n", 2);
}

static int is_subscriber(const client *c) {
  return c->sse_heartbeat_s && !c->closing && !c->discarding && !c->req;
}

/* Queues bytes for a subscriber (the session's ops keep a write timeout armed for them). */
static void send_to(client *c, const void *data, size_t len) {
  c->sse_ops->send(c, data, len);
  c->sse_last_write_ns = pp_now_ns();
}

void pp_dashboard_tick(pp_ops *op) {
  pp_dashboard *d = &op->dash;
  d->ticks++;
  remember_decision(op);
  remember_point(op);
  int built = 0;
  pp_qnode *n = op->sess->clients.head.next;
  while (n != &op->sess->clients.head) {
    client *c = PP_CONTAINER_OF(n, client, link);
    n = n->next;
    if (!is_subscriber(c)) continue;
    if (*op->draining) { /* EventSource reconnects; the drain does not wait for streams */
      c->sse_ops->close(c, 1);
      continue;
    }
    if (c->write_bytes > PP_DASH_MAX_PENDING) {
      d->slow_closed++;
      LOG(op, "client %s: /stats/stream subscriber %zu bytes behind, closed", c->remote,
          c->write_bytes);
      c->sse_ops->close(c, 0);
      continue;
    }
    if (!built) {
      build_event(op, &d->event);
      built = 1;
    }
    send_to(c, d->event.data, d->event.len);
    d->events++;
  }
}

static void on_heartbeat(uv_timer_t *t) {
  pp_ops *op = t->data;
  int64_t now = pp_now_ns();
  char line[64];
  int len = snprintf(line, sizeof line, ": heartbeat %" PRIu64 "\n\n", op->dash.ticks);
  pp_qnode *n = op->sess->clients.head.next;
  while (n != &op->sess->clients.head) {
    client *c = PP_CONTAINER_OF(n, client, link);
    n = n->next;
    if (!is_subscriber(c)) continue;
    if (*op->draining) {
      c->sse_ops->close(c, 1);
      continue;
    }
    if (now - c->sse_last_write_ns < (int64_t)c->sse_heartbeat_s * 1000000000LL) continue;
    send_to(c, line, (size_t)len);
    op->dash.heartbeats++;
  }
}

void pp_dashboard_stream_prelude(pp_ops *op, pp_buf *out) {
  char head[128];
  int n = snprintf(head, sizeof head,
                   "retry: %d\n: puma-plus /stats/stream: one stats event per tick\n\n",
                   PP_DASH_RETRY_MS);
  pp_buf_append(out, head, (size_t)n);
  /* always (no points before the first tick), so every stream starts the same way */
  n = snprintf(head, sizeof head, "id: %" PRIu64 "\nevent: history\ndata: ", op->dash.ticks);
  pp_buf_append(out, head, (size_t)n);
  pp_dashboard_history_json(op, out);
  pp_buf_append(out, "\n\n", 2);
  pp_buf ev;
  pp_buf_init(&ev);
  build_event(op, &ev);
  pp_buf_append(out, ev.data, ev.len);
  pp_buf_dispose(&ev);
}

void pp_dashboard_subscribe(pp_ops *op, client *c, uint32_t heartbeat_s, const pp_sse_ops *ops) {
  pp_dashboard *d = &op->dash;
  c->sse_ops = ops;
  c->sse_heartbeat_s = heartbeat_s ? heartbeat_s : PP_DASH_HEARTBEAT_DEFAULT;
  c->sse_last_write_ns = pp_now_ns();
  d->subscribers_total++;
  if (!d->heartbeat_started) {
    uv_timer_init(op->loop, &d->heartbeat_timer);
    d->heartbeat_timer.data = op;
    uv_timer_start(&d->heartbeat_timer, on_heartbeat, 1000, 1000);
    uv_unref((uv_handle_t *)&d->heartbeat_timer); /* never what keeps the loop alive */
    d->heartbeat_started = 1;
  }
}

uint32_t pp_dashboard_subscribers(pp_ops *op) {
  uint32_t count = 0;
  for (pp_qnode *n = op->sess->clients.head.next; n != &op->sess->clients.head; n = n->next)
    count += is_subscriber(PP_CONTAINER_OF(n, client, link));
  return count;
}

/* /stats "stream": the /stats/stream subscribers and what was written to them. */
void pp_dashboard_stats_json(pp_ops *op, json_t *root) {
  pp_dashboard *d = &op->dash;
  json_t *sse = json_object();
  json_object_set_new(sse, "ticks", json_integer((json_int_t)d->ticks));
  json_object_set_new(sse, "subscribers", json_integer(pp_dashboard_subscribers(op)));
  json_object_set_new(sse, "subscribers_total", json_integer((json_int_t)d->subscribers_total));
  json_object_set_new(sse, "events", json_integer((json_int_t)d->events));
  json_object_set_new(sse, "heartbeats", json_integer((json_int_t)d->heartbeats));
  json_object_set_new(sse, "slow_closed", json_integer((json_int_t)d->slow_closed));
  json_object_set_new(root, "stream", sse);
}

/* /metrics: the subscribers open now. */
void pp_dashboard_metrics(pp_ops *op, pp_buf *out) {
  pp_prom_gauge(out, "puma_plus_stream_subscribers", "Open /stats/stream subscribers.",
                pp_dashboard_subscribers(op));
}
