/* wsconn (see wsconn.h): WebSocket connections owned by the server, their events through the
 * one queue, the tag table and fan-out, and the hub's timer. */
#include "server/session/wsconn.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server/base/alloc.h"
#include "server/base/clock.h"
#include "server/base/log.h"
#include "server/core/dispatch.h"
#include "server/workers/wlink.h"

/* ---------------------------------------------------------------- the accepting response */

static int name_is(const uint8_t *k, size_t kl, const char *name) {
  size_t n = strlen(name);
  return kl == n && strncasecmp((const char *)k, name, n) == 0;
}

int pp_ws_accept_skips_field(const uint8_t *k, size_t kl) {
  return (kl >= 19 && strncasecmp((const char *)k, "puma-plus-websocket", 19) == 0) ||
         name_is(k, kl, "upgrade") || name_is(k, kl, "connection") ||
         name_is(k, kl, "keep-alive") || name_is(k, kl, "sec-websocket-accept") ||
         name_is(k, kl, "sec-websocket-extensions") || name_is(k, kl, "sec-websocket-protocol") ||
         name_is(k, kl, "content-length") || name_is(k, kl, "transfer-encoding");
}

/* 1 if token (len n) is an element of the comma-separated list (optional whitespace). */
static int list_contains(const char *list, size_t len, const uint8_t *token, size_t n) {
  size_t i = 0;
  while (i < len) {
    while (i < len && (list[i] == ' ' || list[i] == '\t' || list[i] == ','))
      i++;
    size_t start = i;
    while (i < len && list[i] != ',')
      i++;
    size_t end = i;
    while (end > start && (list[end - 1] == ' ' || list[end - 1] == '\t'))
      end--;
    if (end - start == n && n && memcmp(list + start, token, n) == 0) return 1;
  }
  return 0;
}

int pp_ws_accept_parse(const pp_wire_frame *f, const char *offered, size_t offered_len,
                       pp_ws_accept *a, const char **why) {
  memset(a, 0, sizeof *a);
  *why = NULL;
  int seen = 0;
  pp_wire_pairs_iter it;
  const uint8_t *k, *v;
  uint32_t kl, vl;
  pp_wire_pairs_iter_init(&it, &f->pairs);
  while (pp_wire_pairs_next(&it, &k, &kl, &v, &vl)) {
    if (name_is(k, kl, "puma-plus-websocket")) {
      seen++;
      if (vl == 6 && memcmp(v, "sticky", 6) == 0)
        a->route = PP_WIRE_WS_ROUTE_STICKY;
      else if (vl == 8 && memcmp(v, "flexible", 8) == 0)
        a->route = PP_WIRE_WS_ROUTE_FLEXIBLE;
      else
        *why = "puma-plus-websocket is neither sticky nor flexible";
    } else if (name_is(k, kl, "puma-plus-websocket-handler")) {
      if (vl > PP_WS_HANDLER_MAX) *why = "puma-plus-websocket-handler over 255 bytes";
      a->handler = v, a->handler_len = vl;
    } else if (name_is(k, kl, "puma-plus-websocket-tags")) {
      a->ntags++;
    } else if (name_is(k, kl, "sec-websocket-protocol")) {
      if (a->protocol) *why = "two sec-websocket-protocol fields";
      a->protocol = v, a->protocol_len = vl;
    }
  }
  if (f->status != 101) return 0; /* refused: the response goes out as it is */
  if (!seen) *why = "status 101 without puma-plus-websocket (use PumaPlus::WebSocket.accept)";
  if (seen > 1) *why = "two puma-plus-websocket fields";
  if (!*why && a->protocol && !list_contains(offered, offered_len, a->protocol, a->protocol_len))
    *why = "sec-websocket-protocol is not one the client offered";
  return *why ? -1 : 1;
}

/* ---------------------------------------------------------------- ids and tags */

typedef struct pp_wstag {
  pp_hnode node; /* in hub->tags */
  uint64_t hash; /* of its name */
  uint32_t count;
  pp_wssub *first; /* subscriptions, doubly linked */
  size_t len;
  uint8_t name[];
} pp_wstag;

static uint64_t id_hash(const pp_hnode *n) {
  return PP_CONTAINER_OF(n, pp_wsconn, id_node)->id;
}

static uint64_t tag_hash(const pp_hnode *n) {
  return PP_CONTAINER_OF(n, pp_wstag, node)->hash;
}

pp_wsconn *pp_wshub_find(const pp_wshub *h, uint64_t id) {
  for (pp_hnode *n = pp_htable_chain(&h->ids, id); n; n = n->next) {
    pp_wsconn *c = PP_CONTAINER_OF(n, pp_wsconn, id_node);
    if (c->id == id) return c;
  }
  return NULL;
}

static pp_wstag *tag_find_hashed(const pp_wshub *h, const uint8_t *name, size_t len,
                                 uint64_t hash) {
  for (pp_hnode *n = pp_htable_chain(&h->tags, hash); n; n = n->next) {
    pp_wstag *t = PP_CONTAINER_OF(n, pp_wstag, node);
    if (t->hash == hash && t->len == len && (!len || memcmp(t->name, name, len) == 0)) return t;
  }
  return NULL;
}

static const pp_wstag *tag_find(const pp_wshub *h, const uint8_t *name, size_t len) {
  return tag_find_hashed(h, name, len, pp_hash_bytes(PP_HASH_SEED, name, len));
}

uint32_t pp_wshub_tag_count(const pp_wshub *h, const uint8_t *tag, size_t len) {
  const pp_wstag *t = tag_find(h, tag, len);
  return t ? t->count : 0;
}

/* Unlinks s from its tag (freeing the tag when it was the last) and frees s; the caller
 * unlinks it from the connection's list. */
static void sub_free(pp_wshub *h, pp_wssub *s) {
  pp_wstag *t = s->tag;
  if (s->tprev)
    s->tprev->tnext = s->tnext;
  else
    t->first = s->tnext;
  if (s->tnext) s->tnext->tprev = s->tprev;
  if (--t->count == 0) {
    pp_htable_remove(&h->tags, &t->node, t->hash);
    free(t);
  }
  free(s);
}

int pp_wshub_tag(pp_wshub *h, pp_wsconn *c, int op, const uint8_t *tag, size_t tag_len,
                 const uint8_t *prefix, size_t prefix_len, const uint8_t *suffix,
                 size_t suffix_len) {
  if (op == PP_WIRE_WS_TAG_REMOVE_ALL) {
    while (c->subs) {
      pp_wssub *s = c->subs;
      c->subs = s->cnext;
      sub_free(h, s);
    }
    return 0;
  }
  /* remove (or, for add, replace) c's subscription to tag */
  for (pp_wssub **p = &c->subs; *p; p = &(*p)->cnext) {
    pp_wssub *s = *p;
    if (s->tag->len == tag_len && (!tag_len || memcmp(s->tag->name, tag, tag_len) == 0)) {
      *p = s->cnext;
      sub_free(h, s);
      break;
    }
  }
  if (op != PP_WIRE_WS_TAG_ADD) return 0;
  uint64_t hash = pp_hash_bytes(PP_HASH_SEED, tag, tag_len);
  pp_wstag *t = tag_find_hashed(h, tag, tag_len, hash);
  if (!t) {
    t = pp_xmalloc(sizeof *t + tag_len);
    memset(t, 0, sizeof *t);
    t->hash = hash;
    t->len = tag_len;
    if (tag_len) memcpy(t->name, tag, tag_len);
    pp_htable_add(&h->tags, &t->node, hash);
  }
  pp_wssub *s = pp_xmalloc(sizeof *s + prefix_len + suffix_len);
  memset(s, 0, sizeof *s);
  s->tag = t;
  s->conn = c;
  s->prefix_len = (uint32_t)prefix_len;
  s->suffix_len = (uint32_t)suffix_len;
  if (prefix_len) memcpy(s->env, prefix, prefix_len);
  if (suffix_len) memcpy(s->env + prefix_len, suffix, suffix_len);
  s->tnext = t->first;
  if (t->first) t->first->tprev = s;
  t->first = s;
  t->count++;
  s->cnext = c->subs;
  c->subs = s;
  return 0;
}

/* ---------------------------------------------------------------- events */

static void ev_head(pp_exchange *x, const pp_wire_frame *f) {
  (void)x, (void)f;
}
static void ev_body(pp_exchange *x, const uint8_t *d, size_t n) {
  (void)x, (void)d, (void)n;
}
static size_t ev_flush(pp_exchange *x) {
  (void)x;
  return 0;
}
static void ev_body_writable(pp_exchange *x) {
  (void)x;
}
static void ev_end(pp_exchange *x);
static void ev_fail(pp_exchange *x, int status, const char *msg);
static const pp_exchange_ops event_ops = {ev_head,  ev_body,          ev_end, ev_fail,
                                          ev_flush, ev_body_writable, NULL,   NULL};

static void conn_maybe_free(pp_wsconn *c);
static void flush(pp_wsconn *c);
static void server_close(pp_wsconn *c, int code, const char *reason, size_t reason_len);
static void lost_worker(pp_wsconn *c);

/* A new event of c: the frame's common part (header filled in by event_queue). */
static pp_exchange *event_new(pp_wsconn *c, uint8_t type) {
  pp_wshub *h = c->hub;
  pp_exchange *x = pp_exchange_get(h->xpool, &event_ops, c);
  x->ws_event = 1;
  x->logged = 1; /* not a request: no access-log line */
  x->id = ++h->core->next_request_id;
  x->t1 = x->t2 = pp_now_ns();
  x->sticky_pid = c->route == PP_WIRE_WS_ROUTE_STICKY ? c->sticky_pid : 0;
  x->state = PP_X_BODY;
  uint8_t fixed[8 + 32];
  memset(fixed, 0, sizeof fixed);
  fixed[0] = type;
  pp_wire_put_u64(fixed + 8, x->id);
  pp_wire_put_u64(fixed + 16, c->id);
  pp_buf_append(&x->head, fixed, sizeof fixed); /* t_ready_ns, t3_ns: at dispatch */
  pp_buf_append_u32(&x->head, c->handler_len);
  if (c->handler_len) pp_buf_append(&x->head, c->handler, c->handler_len);
  return x;
}

/* Into the queue now, or after the event of c that is queued or running. */
static void event_queue(pp_wsconn *c, pp_exchange *x) {
  pp_wire_put_u32(x->head.data + 4, (uint32_t)(x->head.len - PP_WIRE_HEADER_SIZE));
  if (c->running) {
    pp_queue_push(&c->pending, &x->wslink);
    if (!c->paused && c->pending.len >= PP_WSCONN_EVENTS_HIGH && !c->gone) {
      c->paused = 1;
      c->io->pause(c->t, 1);
    }
    return;
  }
  c->running = x;
  pp_dispatch_push(x);
}

static void event_next(pp_wsconn *c) {
  c->running = NULL;
  pp_qnode *n = pp_queue_pop(&c->pending);
  if (c->paused && c->pending.len <= PP_WSCONN_EVENTS_HIGH / 2 && !c->gone) {
    c->paused = 0;
    c->io->pause(c->t, 0);
  }
  if (n) {
    c->running = PP_CONTAINER_OF(n, pp_exchange, wslink);
    pp_dispatch_push(c->running);
    return;
  }
  conn_maybe_free(c);
}

static void ev_end(pp_exchange *x) {
  pp_wsconn *c = x->owner;
  x->owner = NULL;
  x->state = PP_X_RESPONDED;
  pp_exchange_release(c->hub->xpool, x);
  event_next(c);
}

/* The event could not run: its worker is gone (1012, from dispatch), its worker connection
 * died while it ran (502) or it ran past -request-timeout (504). A sticky connection whose
 * worker is gone, or whose event died with its worker connection, closes with 1012 (its state
 * may be gone with it); when the whole worker is gone, worker_gone closes its other ones. */
static void ev_fail(pp_exchange *x, int status, const char *msg) {
  pp_wsconn *c = x->owner;
  (void)msg;
  x->owner = NULL;
  x->state = PP_X_RESPONDED;
  pp_exchange_release(c->hub->xpool, x);
  if (status != 1012) c->hub->core->stats.ws.events_lost++;
  if (c->route == PP_WIRE_WS_ROUTE_STICKY && (status == 1012 || status == 502)) lost_worker(c);
  event_next(c);
}

static void queue_close_event(pp_wsconn *c, int by, int code, const uint8_t *reason, size_t n) {
  if (c->close_event) return;
  c->close_event = 1;
  pp_exchange *x = event_new(c, PP_WIRE_WS_CLOSE);
  uint8_t b[3] = {(uint8_t)(code >> 8), (uint8_t)code, (uint8_t)by};
  pp_buf_append(&x->head, b, 3);
  if (n) pp_buf_append(&x->head, reason, n);
  event_queue(c, x);
}

/* ---------------------------------------------------------------- the codec's callbacks */

static int on_message(pp_ws *ws, pp_ws_opcode op, const uint8_t *data, size_t len) {
  pp_wsconn *c = ws->data;
  pp_stats *st = &c->hub->core->stats;
  st->ws.messages_in++;
  st->ws.bytes_in += len;
  if (c->close_event) return 0;
  pp_exchange *x = event_new(c, PP_WIRE_WS_MESSAGE);
  uint8_t o = (uint8_t)op;
  pp_buf_append(&x->head, &o, 1);
  pp_buf_append(&x->head, data, len);
  event_queue(c, x);
  return 0;
}

static void on_close(pp_ws *ws, int code, const uint8_t *reason, size_t len) {
  pp_wsconn *c = ws->data;
  if (c->close_by == (int)PP_WIRE_WS_BY_SERVER) /* our Close, answered */
    queue_close_event(c, PP_WIRE_WS_BY_SERVER, c->close_code, NULL, 0);
  else {
    c->close_by = PP_WIRE_WS_BY_PEER, c->close_code = code;
    queue_close_event(c, PP_WIRE_WS_BY_PEER, code, reason, len);
  }
}

static const pp_ws_callbacks codec_cb = {on_message, NULL, NULL, on_close};

/* ---------------------------------------------------------------- output, closing */

/* Keeps hub->output_total equal to the sum of the connections' unsent codec output. */
static void count_output(pp_wsconn *c) {
  size_t now = c->gone ? 0 : pp_ws_pending(&c->ws);
  c->hub->output_total = c->hub->output_total - c->output_counted + now;
  c->output_counted = now;
}

/* Moves the codec's output to the transport while it has room; once the close handshake is
 * over (or failed) and everything is out, closes the transport. */
static void flush(pp_wsconn *c) {
  count_output(c);
  if (c->gone) return;
  while (c->io->unsent(c->t) < PP_WSCONN_WRITE_LOW) {
    const uint8_t *p;
    size_t n = pp_ws_output(&c->ws, &p);
    if (!n) break;
    if (n > PP_WSCONN_WRITE_LOW) n = PP_WSCONN_WRITE_LOW;
    if (c->io->write(c->t, p, n) < 0) return;
    pp_ws_output_consumed(&c->ws, n);
  }
  count_output(c);
  if (c->ws.state == PP_WS_CLOSED && !pp_ws_pending(&c->ws) && !c->close_asked) {
    c->close_asked = 1;
    c->io->close(c->t);
  }
}

static void count_close(pp_wsconn *c) {
  pp_stats *st = &c->hub->core->stats;
  int code = c->close_code ? c->close_code : PP_WS_CLOSE_ABNORMAL;
  st->ws.closes[code >= 1000 && code <= 1015 ? code - 1000 : 16]++;
  st->ws.closed++;
  st->ws.open--;
}

/* The server closes c (the app's WS_CLOSE_CONN, a slow reader, a worker gone, shutdown): a
 * Close goes out, the peer's answer is awaited until the close timeout. */
static void server_close(pp_wsconn *c, int code, const char *reason, size_t reason_len) {
  if (c->gone || c->ws.close_sent) return;
  if (c->close_by != (int)PP_WIRE_WS_BY_PEER) {
    c->close_by = PP_WIRE_WS_BY_SERVER;
    c->close_code = code;
  }
  pp_ws_close(&c->ws, code, reason, reason_len);
  c->close_deadline_ns = pp_now_ns() + (int64_t)c->hub->close_timeout_ns;
  flush(c);
}

static void conn_free(pp_wsconn *c) {
  pp_wshub *h = c->hub;
  h->output_total -= c->output_counted;
  pp_queue_remove(&h->conns, &c->link);
  pp_ws_dispose(&c->ws);
  free(c);
  if (!h->conns.len && h->timer_on) {
    uv_timer_stop(&h->timer);
    h->timer_on = 0;
  }
}

static void conn_maybe_free(pp_wsconn *c) {
  if (c->gone && !c->running) conn_free(c);
}

/* ---------------------------------------------------------------- the timer */

static void on_hub_timer(uv_timer_t *t) {
  pp_wshub *h = t->data;
  int64_t now = pp_now_ns();
  for (pp_qnode *n = h->conns.head.next, *next; n != &h->conns.head; n = next) {
    next = n->next;
    pp_wsconn *c = PP_CONTAINER_OF(n, pp_wsconn, link);
    if (c->gone || c->close_asked) continue;
    if (c->close_deadline_ns && now >= c->close_deadline_ns) {
      /* the peer did not answer our Close (or does not read): TCP closes anyway */
      c->close_asked = 1;
      c->io->close(c->t);
      continue;
    }
    if (!h->ping_interval_ns || c->ws.close_sent) continue;
    if (c->ping_sent_ns) {
      if (now - c->ping_sent_ns >= (int64_t)h->ping_interval_ns) { /* no answer: dead peer */
        c->close_asked = 1;
        c->io->close(c->t);
      }
    } else if (now - c->last_in_ns >= (int64_t)h->ping_interval_ns) {
      if (pp_ws_ping(&c->ws, NULL, 0) == 0) {
        c->ping_sent_ns = now;
        flush(c);
      }
    } else if (!pp_ws_pending(&c->ws)) {
      pp_ws_trim(&c->ws); /* an idle connection holds no buffers */
    }
  }
}

void pp_wshub_init(pp_wshub *h, uv_loop_t *loop, const pp_config *cfg, pp_core *core,
                   pp_exchange_pool *xpool) {
  memset(h, 0, sizeof *h);
  h->loop = loop, h->cfg = cfg, h->core = core, h->xpool = xpool;
  pp_ws_limits_default(&h->limits);
  pp_ws_pmd_config_default(&h->pmd);
  h->ping_interval_ns = 30ull * 1000000000ull;
  h->close_timeout_ns = 5ull * 1000000000ull;
  if (cfg) {
    if (cfg->ws_max_message) h->limits.max_message_bytes = cfg->ws_max_message;
    h->ping_interval_ns = cfg->ws_ping_interval_ns;
    if (cfg->ws_close_timeout_ns) h->close_timeout_ns = cfg->ws_close_timeout_ns;
    h->pmd.enabled = !cfg->ws_no_deflate;
    h->max_output_total = cfg->ws_max_output_total;
  }
  /* an event's frame must fit the wire's 4 MiB payload */
  uint64_t cap = PP_WIRE_MAX_PAYLOAD - 64 - PP_WS_HANDLER_MAX;
  if (h->limits.max_message_bytes > cap) h->limits.max_message_bytes = cap;
  pp_queue_init(&h->conns);
  pp_htable_init(&h->ids, id_hash);
  pp_htable_init(&h->tags, tag_hash);
  /* the timer is set up with the first connection (a hub that never holds one, as in the unit
   * tests of other parts, needs no loop) */
}

/* ---------------------------------------------------------------- the connection */

pp_wsconn *pp_wsconn_open(pp_wshub *h, const pp_wsconn_io *io, void *t, const pp_ws_accept *a,
                          const pp_wire_frame *head, const pp_exchange *x,
                          const pp_ws_pmd_params *pmd) {
  /* the handler key lives right after the struct, in the same allocation */
  size_t hl = a->handler_len > PP_WS_HANDLER_MAX ? 0 : a->handler_len;
  pp_wsconn *c = pp_xmalloc(sizeof *c + hl);
  memset(c, 0, sizeof *c);
  if (pp_ws_init(&c->ws, &codec_cb, &h->limits, pmd, &h->pmd, c) != 0) {
    free(c);
    return NULL;
  }
  c->hub = h;
  c->io = io;
  c->t = t;
  c->id = ++h->next_conn_id;
  c->route = a->route;
  c->sticky_pid = x->w ? x->w->pid : 0;
  c->handler_len = (uint8_t)hl;
  if (hl) {
    memcpy(c + 1, a->handler, hl);
    c->handler = (const uint8_t *)(c + 1);
  }
  c->last_in_ns = pp_now_ns();
  c->close_by = -1; /* no close yet */
  pp_queue_init(&c->pending);
  pp_queue_push(&h->conns, &c->link);
  pp_htable_add(&h->ids, &c->id_node, c->id);
  pp_stats *st = &h->core->stats;
  st->ws.open++;
  st->ws.opened++;
  if (!h->timer_on && (h->ping_interval_ns || h->close_timeout_ns)) {
    if (!h->timer_ready) {
      uv_timer_init(h->loop, &h->timer);
      h->timer.data = h;
      uv_unref((uv_handle_t *)&h->timer);
      h->timer_ready = 1;
    }
    uv_timer_start(&h->timer, on_hub_timer, 1000, 1000);
    h->timer_on = 1;
  }

  /* WS_OPEN: route, protocol, tags, then the upgrade request's env as its REQUEST had it */
  pp_exchange *e = event_new(c, PP_WIRE_WS_OPEN);
  pp_buf_append(&e->head, &c->route, 1);
  pp_buf_append_u32(&e->head, (uint32_t)(a->protocol ? a->protocol_len : 0));
  if (a->protocol) pp_buf_append(&e->head, a->protocol, a->protocol_len);
  pp_buf_append_u32(&e->head, a->ntags);
  pp_wire_pairs_iter it;
  const uint8_t *k, *v;
  uint32_t kl, vl;
  pp_wire_pairs_iter_init(&it, &head->pairs);
  while (pp_wire_pairs_next(&it, &k, &kl, &v, &vl)) {
    if (!name_is(k, kl, "puma-plus-websocket-tags")) continue;
    pp_buf_append_u32(&e->head, 3);
    pp_buf_append(&e->head, "tag", 3);
    pp_buf_append_u32(&e->head, vl);
    pp_buf_append(&e->head, v, vl);
    pp_wshub_tag(h, c, PP_WIRE_WS_TAG_ADD, v, vl, NULL, 0, NULL, 0);
  }
  if (x->head.len >= 37) /* REQUEST: header, id, t2b, t3, flags, then the env's count */
    pp_buf_append(&e->head, x->head.data + 33, x->head.len - 33);
  else
    pp_buf_append_u32(&e->head, 0);
  event_queue(c, e);
  return c;
}

void pp_wsconn_feed(pp_wsconn *c, const uint8_t *p, size_t n) {
  if (c->gone || !n) return;
  c->last_in_ns = pp_now_ns();
  c->ping_sent_ns = 0; /* any byte shows the peer is alive */
  if (pp_ws_feed(&c->ws, p, n) == PP_WS_EPROTO && !c->close_event) {
    c->close_by = PP_WIRE_WS_BY_SERVER;
    c->close_code = c->ws.fail_code;
    const char *r = c->ws.fail_reason ? c->ws.fail_reason : "";
    queue_close_event(c, PP_WIRE_WS_BY_SERVER, c->ws.fail_code, (const uint8_t *)r, strlen(r));
    c->close_deadline_ns = pp_now_ns() + (int64_t)c->hub->close_timeout_ns;
  }
  flush(c);
}

void pp_wsconn_drained(pp_wsconn *c) {
  flush(c);
}

void pp_wsconn_gone(pp_wsconn *c) {
  pp_wshub *h = c->hub;
  if (c->gone) return;
  c->gone = 1;
  count_output(c); /* its unsent output is dropped with the transport */
  pp_htable_remove(&h->ids, &c->id_node, c->id);
  pp_wshub_tag(h, c, PP_WIRE_WS_TAG_REMOVE_ALL, NULL, 0, NULL, 0, NULL, 0);
  if (c->close_by < 0) c->close_by = PP_WIRE_WS_BY_TRANSPORT, c->close_code = PP_WS_CLOSE_ABNORMAL;
  if (c->close_by == (int)PP_WIRE_WS_BY_SERVER)
    queue_close_event(c, PP_WIRE_WS_BY_SERVER, c->close_code, NULL, 0);
  else
    queue_close_event(c, PP_WIRE_WS_BY_TRANSPORT, PP_WS_CLOSE_ABNORMAL, NULL, 0);
  count_close(c);
  conn_maybe_free(c);
}

/* ---------------------------------------------------------------- the app's commands */

/* The server-wide budget (-ws-max-output-total): 1 if a message of n bytes for c may be
 * queued; else c is closed with 1013 (the server is overloaded, not the client at fault). */
static int within_budget(pp_wsconn *c, size_t n) {
  pp_wshub *h = c->hub;
  if (!h->max_output_total || h->output_total + n <= h->max_output_total) return 1;
  h->core->stats.ws.overload_closes++;
  server_close(c, PP_WS_CLOSE_TRY_AGAIN_LATER, "server overloaded", 17);
  return 0;
}

/* Queues one message for c (pp_ws_send, or the shared encoded bytes of a broadcast): a client
 * that does not read is closed with 1008. */
static void deliver(pp_wsconn *c, int rc) {
  pp_stats *st = &c->hub->core->stats;
  if (rc == 0) {
    st->ws.messages_out++;
  } else if (rc == PP_WS_EFULL) {
    st->ws.slow_reader_closes++;
    server_close(c, PP_WS_CLOSE_POLICY, "slow reader", 11);
    return;
  } else if (rc == PP_WS_EZLIB) {
    server_close(c, PP_WS_CLOSE_INTERNAL_ERROR, "internal error", 14);
    return;
  }
  flush(c);
}

#define BCAST_CACHE 8

static void broadcast(pp_wshub *h, const pp_wire_frame *f) {
  const pp_wstag *t = tag_find(h, f->tag, f->tag_len);
  pp_stats *st = &h->core->stats;
  st->ws.broadcasts++;
  if (!t) return;
  /* one encoded frame per distinct envelope (all subscribers without one share the first) */
  struct {
    const pp_wssub *sub;
    pp_buf frame;
  } cache[BCAST_CACHE];
  int cached = 0;
  pp_buf payload, scratch;
  pp_buf_init(&payload);
  pp_buf_init(&scratch);
  pp_ws_opcode op = (pp_ws_opcode)f->opcode;
  for (pp_wssub *s = t->first, *next; s; s = next) {
    next = s->tnext;
    pp_wsconn *c = s->conn;
    if (c->gone || c->ws.close_sent) continue;
    size_t env_len = (size_t)s->prefix_len + s->suffix_len;
    const pp_buf *frame = NULL;
    for (int i = 0; i < cached && !frame; i++) {
      const pp_wssub *o = cache[i].sub;
      if (o->prefix_len == s->prefix_len && o->suffix_len == s->suffix_len &&
          (!env_len || memcmp(o->env, s->env, env_len) == 0))
        frame = &cache[i].frame;
    }
    if (!frame) {
      pp_buf *out = &scratch;
      if (cached < BCAST_CACHE) {
        cache[cached].sub = s;
        pp_buf_init(&cache[cached].frame);
        out = &cache[cached++].frame;
      }
      out->len = 0;
      if (!env_len) {
        pp_ws_frame_write(out, 1, 0, op, f->data, f->data_len);
      } else {
        payload.len = 0;
        pp_buf_append(&payload, s->env, s->prefix_len);
        pp_buf_append(&payload, f->data, f->data_len);
        pp_buf_append(&payload, s->env + s->prefix_len, s->suffix_len);
        pp_ws_frame_write(out, 1, 0, op, payload.data, payload.len);
      }
      frame = out;
    }
    if (!within_budget(c, frame->len)) continue;
    st->ws.fanout++;
    st->ws.bytes_out += f->data_len + env_len;
    deliver(c, pp_ws_send_encoded(&c->ws, frame->data, frame->len, f->data_len + env_len));
  }
  for (int i = 0; i < cached; i++)
    pp_buf_dispose(&cache[i].frame);
  pp_buf_dispose(&payload);
  pp_buf_dispose(&scratch);
}

const char *pp_wshub_command(void *hub, const pp_wire_frame *f) {
  pp_wshub *h = hub;
  pp_stats *st = &h->core->stats;
  if ((f->type == PP_WIRE_WS_SEND || f->type == PP_WIRE_WS_BROADCAST) &&
      f->opcode != PP_WS_OP_TEXT && f->opcode != PP_WS_OP_BINARY)
    return "WebSocket message with an opcode other than 1 (text) or 2 (binary)";
  if ((f->type == PP_WIRE_WS_SEND || f->type == PP_WIRE_WS_BROADCAST) &&
      f->opcode == PP_WS_OP_TEXT && !pp_ws_utf8_valid(f->data, f->data_len))
    return "WebSocket text message that is not UTF-8";
  if (f->type == PP_WIRE_WS_TAG &&
      (f->tag_op > PP_WIRE_WS_TAG_REMOVE_ALL || !pp_ws_utf8_valid(f->prefix, f->prefix_len) ||
       !pp_ws_utf8_valid(f->suffix, f->suffix_len)))
    return "WS_TAG with an unknown op or an envelope that is not UTF-8";
  if (f->type == PP_WIRE_WS_CLOSE_CONN && (!pp_ws_close_code_valid(f->code) || f->data_len > 123 ||
                                           !pp_ws_utf8_valid(f->data, f->data_len)))
    return "WS_CLOSE_CONN with a code that may not be sent, or a bad reason";
  if (f->type == PP_WIRE_WS_BROADCAST) {
    broadcast(h, f);
    return NULL;
  }
  pp_wsconn *c = pp_wshub_find(h, f->conn_id);
  if (!c || c->gone) {
    st->ws.unknown_conn++;
    return NULL;
  }
  switch (f->type) {
  case PP_WIRE_WS_SEND:
    st->ws.bytes_out += f->data_len;
    if (c->ws.close_sent) break; /* closing: nothing more goes out */
    if (!within_budget(c, f->data_len)) break;
    deliver(c, pp_ws_send(&c->ws, (pp_ws_opcode)f->opcode, f->data, f->data_len));
    break;
  case PP_WIRE_WS_TAG:
    pp_wshub_tag(h, c, f->tag_op, f->tag, f->tag_len, f->prefix, f->prefix_len, f->suffix,
                 f->suffix_len);
    break;
  case PP_WIRE_WS_CLOSE_CONN: server_close(c, f->code, (const char *)f->data, f->data_len); break;
  }
  return NULL;
}

/* A sticky connection whose worker (or the state it held) is gone: 1012, no WS_CLOSE to
 * anyone, and its events that never ran are dropped. */
static void lost_worker(pp_wsconn *c) {
  pp_wshub *h = c->hub;
  if (c->close_event || c->gone) return;
  c->close_event = 1;
  h->core->stats.ws.worker_gone_closes++;
  while (c->pending.len) {
    pp_exchange *x = PP_CONTAINER_OF(pp_queue_pop(&c->pending), pp_exchange, wslink);
    x->owner = NULL;
    pp_exchange_release(h->xpool, x);
  }
  c->close_by = PP_WIRE_WS_BY_SERVER;
  server_close(c, PP_WS_CLOSE_SERVICE_RESTART, "worker restarted", 16);
}

void pp_wshub_worker_gone(pp_wshub *h, uint32_t pid) {
  for (pp_qnode *n = h->conns.head.next, *next; n != &h->conns.head; n = next) {
    next = n->next;
    pp_wsconn *c = PP_CONTAINER_OF(n, pp_wsconn, link);
    if (c->route == PP_WIRE_WS_ROUTE_STICKY && c->sticky_pid == pid) lost_worker(c);
  }
}

void pp_wshub_shutdown(pp_wshub *h) {
  for (pp_qnode *n = h->conns.head.next, *next; n != &h->conns.head; n = next) {
    next = n->next;
    pp_wsconn *c = PP_CONTAINER_OF(n, pp_wsconn, link);
    server_close(c, PP_WS_CLOSE_GOING_AWAY, "server shutting down", 20);
  }
}
