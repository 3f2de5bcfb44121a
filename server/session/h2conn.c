/* h2conn: HTTP/2 on a client stream (see conn.h), the glue between the sans-I/O session
 * (h2.h) and the exchange layer. A connection gets here by the client preface (h2c with
 * prior knowledge, -h2c), by Upgrade: h2c (the upgrading request becomes stream 1), or by
 * ALPN h2 on a TLS listener. Every stream is an exchange of its own in the one queue; an
 * extended CONNECT for a WebSocket (RFC 8441) is one too until the app accepts it, then its
 * stream carries a server-owned WebSocket (the "WebSocket tunnels" part below, h2h3.h).
 *
 * Flow control: request-body bytes are released to the client's windows (pp_h2_consume)
 * only once the exchange took them: at once while the body is being buffered (at most
 * PP_BODY_BUFFER_LIMIT per stream before the request is runnable), and for a streamed upload
 * only while the worker socket has room (pp_exchange_can_take_body); otherwise they wait in
 * body_unconsumed until ops->body_writable. Responses: the session frames what the worker
 * sent as fast as the client's windows and our output allow; output is produced only while
 * less than PP_CLIENT_WRITE_HIGH is waiting in the kernel, and a worker whose stream has
 * more than that buffered is paused (ops->flush), resumed when it drains below
 * PP_CLIENT_WRITE_LOW. Never call into the session's feed/output from its own callbacks:
 * in_parse marks pp_h2_feed, and the pump runs after it returns. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nghttp2/nghttp2.h>

#include "server/session/conn.h"
#include "server/session/h2h3.h"
#include "server/proto/env.h"
#include "server/proto/h2.h"
#include "server/base/alloc.h"
#include "server/base/clock.h"
#include "server/base/log.h"
#include "server/core/dispatch.h"
#include "server/workers/wlink.h"

static const pp_exchange_ops h2_ops;

#define H2_OUT_STEP 65536 /* bytes asked of the session per output call */

static void h2_pump(client *c);
static void h2_process(client *c);
static void h2_on_written(client *c);
static void h2_arm_timer(client *c);
static int h2_idle(const client *c);
static void h2_abandon_all(client *c);
static void h2_dispose(client *c);
static const pp_client_proto h2_proto = {h2_process, h2_on_written,  h2_arm_timer,
                                         h2_idle,    h2_abandon_all, h2_dispose};

/* Releases flow-control credit for bytes the exchange has taken. */
static void release_body(client *c, pp_exchange *x) {
  if (x->body_unconsumed && pp_exchange_can_take_body(x)) {
    pp_h2_consume(c->h2, x->stream_id, (size_t)x->body_unconsumed);
    x->body_unconsumed = 0;
  }
}

/* ---------------------------------------------------------------- session callbacks */

static int ws_request(client *c, const pp_h2h3_origin *o, pp_h2h3_request *r,
                      const pp_h2_request *rq, void **stream_data);

static int on_request(pp_h2 *h, const pp_h2_request *rq, void **stream_data) {
  client *c = h->data;
  pp_h2h3_origin o = {c->sess,
                      &h2_ops,
                      c,
                      c->remote,
                      "HTTP/2",
                      c->ls->addr.is_unix ? "localhost" : c->ls->addr.host,
                      c->ls->addr.port_text,
                      c->tls ? "https" : "http"};
  pp_h2h3_request r = PP_H2H3_REQUEST_OF(rq);
  if (rq->protocol) return ws_request(c, &o, &r, rq, stream_data);
  int refuse;
  *stream_data =
      pp_h2h3_open(&o, &r, rq->stream_id, rq->end_stream, &c->h2hdrs, &c->streams, &refuse);
  return refuse;
}

static void ws_data(client *c, pp_h2h3_ws *t, const uint8_t *data, size_t len);
static void ws_fin(client *c, pp_h2h3_ws *t);
static void ws_closed(client *c, pp_h2h3_ws *t);

static int on_body(pp_h2 *h, int32_t stream_id, void *stream_data, const uint8_t *data,
                   size_t len) {
  client *c = h->data;
  pp_h2h3_ws *t = c->h2ws.len ? pp_h2h3_ws_find(&c->h2ws, stream_id) : NULL;
  if (t) {
    ws_data(c, t, data, len);
    return 0;
  }
  pp_exchange *x = stream_data;
  if (pp_exchange_stream_body(x, data, len))
    release_body(h->data, x);
  else
    pp_h2_consume(h, stream_id, len);
  return 0;
}

static int on_body_end(pp_h2 *h, int32_t stream_id, void *stream_data) {
  client *c = h->data;
  pp_h2h3_ws *t = c->h2ws.len ? pp_h2h3_ws_find(&c->h2ws, stream_id) : NULL;
  if (t) {
    ws_fin(c, t);
    return 0;
  }
  pp_exchange_stream_end(stream_data);
  return 0;
}

static void on_close(pp_h2 *h, int32_t stream_id, void *stream_data, uint32_t error_code) {
  client *c = h->data;
  pp_exchange *x = stream_data;
  pp_h2h3_ws *t = c->h2ws.len ? pp_h2h3_ws_find(&c->h2ws, stream_id) : NULL;
  if (t) ws_closed(c, t);
  if (!x) return;
  pp_queue_remove(&c->streams, &x->olink);
  pp_exchange_stream_closed(x, error_code);
}

/* The session answered a request itself (431, 501, 413) before it had an exchange. */
static void on_answered(pp_h2 *h, const pp_h2_request *rq, int status) {
  client *c = h->data;
  pp_h2h3_log_refused(c->sess->hooks, c->remote, "HTTP/2", status, rq->method, rq->method_len,
                      rq->path, rq->path_len);
}

static const pp_h2_callbacks h2_callbacks = {on_request, on_body, on_body_end, on_close,
                                             on_answered};

/* ---------------------------------------------------------------- output */

/* Resumes workers whose streams drained, once the connection's output is low too. */
static void resume_drained(client *c) {
  if (c->write_bytes >= PP_CLIENT_WRITE_LOW) return;
  for (pp_qnode *n = c->streams.head.next; n != &c->streams.head; n = n->next) {
    pp_exchange *x = PP_CONTAINER_OF(n, pp_exchange, olink);
    if (x->w && pp_h2_stream_pending(c->h2, x->stream_id) < PP_CLIENT_WRITE_LOW)
      pp_exchange_client_drained(x);
  }
  for (pp_qnode *n = c->h2ws.head.next; n != &c->h2ws.head;) {
    pp_h2h3_ws *t = PP_CONTAINER_OF(n, pp_h2h3_ws, link);
    n = n->next; /* drained may close it, never free it (only its stream's end does) */
    if (t->wc && pp_h2_stream_pending(c->h2, (int32_t)t->stream_id) < PP_WSCONN_WRITE_LOW)
      pp_wsconn_drained(t->wc);
  }
}

/* Moves what the session has to send into the connection's output, as far as the bound
 * allows, flushes it, and closes the connection when the session is finished. */
static void h2_pump(client *c) {
  if (c->closing || c->in_parse || !c->h2) return;
  for (;;) {
    size_t queued = c->write_bytes + (c->out ? c->out->len : 0);
    if (queued >= PP_CLIENT_WRITE_HIGH) break;
    c->h2out.len = 0;
    ssize_t n = pp_h2_output(c->h2, &c->h2out, H2_OUT_STEP);
    if (n < 0) {
      LOG_ERR(c->sess, "client %s: HTTP/2 output: %s", c->remote, pp_h2_strerror((int)n));
      pp_conn_close(c);
      return;
    }
    if (n == 0) break;
    pp_conn_out(c, c->h2out.data, c->h2out.len);
  }
  pp_conn_flush(c);
  if (c->closing) return;
  resume_drained(c);
  if (pp_h2_finished(c->h2) && c->writes_in_flight == 0 && !c->out) {
    pp_conn_close_graceful(c);
    return;
  }
  /* A client that does not read what we send is not read either (its PINGs and SETTINGS
   * would otherwise grow our output without bound). */
  c->read_paused = c->write_bytes >= PP_CLIENT_WRITE_HIGH;
  pp_conn_update_reading(c);
  h2_arm_timer(c);
}

/* Adds what the session counted since the last call to the server's counters. */
static void account(client *c) {
  pp_stats *st = &c->sess->core->stats;
  const pp_h2_stats *now = &c->h2->stats;
  pp_h2_stats *seen = c->h2_seen;
  st->h2_streams += now->streams_opened - seen->streams_opened;
  st->h2_peer_resets += now->peer_resets - seen->peer_resets;
  st->h2_stream_errors += now->stream_errors - seen->stream_errors;
  st->h2_refused_streams += now->refused_streams - seen->refused_streams;
  st->h2_protocol_errors += now->protocol_errors - seen->protocol_errors;
  st->h2_connection_errors += now->connection_errors - seen->connection_errors;
  st->h2_flood_closes += now->flood_closes - seen->flood_closes;
  *seen = *now;
}

static void h2_process(client *c) {
  if (c->closing || c->in_parse) return;
  pp_conn_take_plain(c);
  while (c->rpos < c->rlen && !c->closing && !c->close_after_write) {
    c->in_parse = 1;
    ssize_t n = pp_h2_feed(c->h2, c->rbuf + c->rpos, c->rlen - c->rpos);
    c->in_parse = 0;
    c->rpos = c->rlen = 0;
    if (n < 0) {
      LOG(c->sess, "client %s: HTTP/2: %s", c->remote, pp_h2_strerror((int)n));
      c->close_after_write = 1;
    }
    pp_conn_take_plain(c); /* TLS: the next decrypted bytes */
  }
  account(c);
  if (c->closing) return;
  h2_pump(c);
  if (!c->closing && c->close_after_write && c->writes_in_flight == 0) pp_conn_close_graceful(c);
}

static void h2_on_written(client *c) {
  if (c->close_after_write && c->writes_in_flight == 0) {
    pp_conn_close_graceful(c);
    return;
  }
  h2_pump(c);
}

/* ---------------------------------------------------------------- timers */

static void on_h2_timer(uv_timer_t *t) {
  client *c = t->data;
  if (pp_conn_timer_common(c)) return;
  /* idle: no stream for the keep-alive timeout */
  pp_h2_goaway(c->h2);
  c->close_after_write = 1;
  h2_pump(c);
  if (!c->closing && c->writes_in_flight == 0) pp_conn_close_graceful(c);
}

static void h2_arm_timer(client *c) {
  if (c->closing) return;
  const pp_config *cfg = c->sess->cfg;
  uint64_t ms;
  if (c->discarding)
    ms = 2000;
  else if (c->writes_in_flight > 0)
    ms = cfg->write_timeout_ns / 1000000;
  else if (c->streams.len == 0 && c->h2ws.len == 0)
    ms = cfg->keepalive_timeout_ns / 1000000;
  else {
    uv_timer_stop(&c->timer);
    return;
  }
  uv_timer_start(&c->timer, on_h2_timer, ms ? ms : 1, 0);
}

/* ---------------------------------------------------------------- lifecycle */

int pp_h2conn_start(client *c, pp_exchange *upgraded, const uint8_t *settings, size_t len) {
  pp_sessions *s = c->sess;
  pp_h2 *h = pp_xmalloc(sizeof *h);
  pp_h2_limits lim;
  pp_h2_limits_default(&lim);
  lim.max_concurrent_streams = s->cfg->h2_max_streams;
  lim.max_header_list = s->cfg->max_header_bytes;
  lim.max_body_bytes = s->cfg->max_body_bytes;
  lim.date = s->wall->date;
  lim.connect_protocol = !s->cfg->no_extended_connect;
  int rc = upgraded
               ? pp_h2_init_upgrade(h, &h2_callbacks, &lim, c, settings, len, upgraded->head_method)
               : pp_h2_init(h, &h2_callbacks, &lim, c);
  if (rc < 0) {
    free(h);
    return -1;
  }
  c->h2 = h;
  c->proto = &h2_proto;
  c->h2_seen = pp_xmalloc(sizeof *c->h2_seen);
  memset(c->h2_seen, 0, sizeof *c->h2_seen);
  s->core->stats.h2_connections++;
  uv_timer_stop(&c->timer); /* re-armed with on_h2_timer by h2_pump */
  if (upgraded) {
    pp_conn_out(
        c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n", 71);
    upgraded->ops = &h2_ops;
    upgraded->stream_id = 1;
    upgraded->keep_alive = 1;
    upgraded->body_unconsumed = 0;
    pp_queue_push(&c->streams, &upgraded->olink);
    pp_h2_set_stream_data(h, 1, upgraded);
  }
  if (*s->draining) pp_h2_goaway(h);
  h2_process(c); /* bytes already read (the preface) go to the session */
  return 0;
}

void pp_h2conn_drain(client *c) {
  pp_h2_goaway(c->h2);
  h2_pump(c);
}

static void h2_abandon_all(client *c) {
  while (c->h2ws.len) /* the tunnels first: an upgrade's exchange is among the streams */
    ws_closed(c, PP_CONTAINER_OF(c->h2ws.head.next, pp_h2h3_ws, link));
  while (c->streams.len) {
    pp_exchange *x = PP_CONTAINER_OF(pp_queue_pop(&c->streams), pp_exchange, olink);
    pp_h2_set_stream_data(c->h2, x->stream_id, NULL);
    pp_exchange_abandon(x);
  }
}

static void h2_dispose(client *c) {
  account(c);
  pp_h2_dispose(c->h2);
  free(c->h2);
  free(c->h2_seen);
  c->h2 = NULL;
  c->h2_seen = NULL;
  c->proto = NULL;
}

static int h2_idle(const client *c) {
  return c->streams.len == 0 && c->h2ws.len == 0 && c->writes_in_flight == 0;
}

/* ---------------------------------------------------------------- response events */

static void local_response(client *c, pp_exchange *x, int status, const char *msg) {
  pp_h2_header hd[4] = {
      {(const uint8_t *)"content-type", 12, (const uint8_t *)"text/plain", 10},
      {(const uint8_t *)"date", 4, (const uint8_t *)c->sess->wall->date, PP_HTTP_DATE_LEN}};
  size_t n = 2;
  if (status == 503) /* shed at dequeue by admission control */
    hd[n++] = (pp_h2_header){(const uint8_t *)"retry-after", 11, (const uint8_t *)"1", 1};
  if (c->sess->alt_svc[0])
    hd[n++] = (pp_h2_header){(const uint8_t *)"alt-svc", 7, (const uint8_t *)c->sess->alt_svc,
                             strlen(c->sess->alt_svc)};
  pp_h2_respond(c->h2, x->stream_id, status, hd, n, 0);
  pp_h2_send_data(c->h2, x->stream_id, (const uint8_t *)msg, strlen(msg));
  pp_h2_send_end(c->h2, x->stream_id);
  pp_exchange_count_status(c->sess->xpool, status);
  c->sess->core->stats.responses++;
  x->status = status, x->resp_bytes = strlen(msg);
}

static int ws_head(client *c, pp_h2h3_ws *t, pp_exchange *x, const pp_wire_frame *f);

static pp_h2h3_ws *tunnel_of(client *c, pp_exchange *x) {
  pp_h2h3_ws *t = c->h2ws.len ? pp_h2h3_ws_find(&c->h2ws, x->stream_id) : NULL;
  return t && t->x == x ? t : NULL;
}

static void x_head(pp_exchange *x, const pp_wire_frame *f) {
  client *c = x->owner;
  pp_sessions *s = c->sess;
  pp_h2h3_ws *t = tunnel_of(c, x);
  if (t && ws_head(c, t, x, f)) return;
  int status = f->status;
  x->resp_no_body = x->head_method || status < 200 || status == 204 || status == 304;
  size_t n = pp_h2h3_headers(s->alt_svc, s->wall->date, &f->pairs, &c->h2hdrs);
  if (pp_h2_respond(c->h2, x->stream_id, status, (const pp_h2_header *)c->h2hdrs.data, n,
                    x->resp_no_body) < 0) {
    /* a status HTTP/2 cannot carry (101, or outside 100..599): the app's error */
    LOG_ERR(s, "client %s: stream %d: the app's status %d cannot be sent over HTTP/2", c->remote,
            (int)x->stream_id, status);
    local_response(c, x, 500, "500 Internal Server Error\n");
    s->core->stats.errors_500++;
    x->resp_no_body = 1;
    return;
  }
  pp_h2h3_count_response(s, x, status);
}

static void x_body(pp_exchange *x, const uint8_t *data, size_t len) {
  client *c = x->owner;
  if (x->resp_no_body || !len) return;
  pp_h2_send_data(c->h2, x->stream_id, data, len);
  x->resp_bytes += len;
}

static void x_end(pp_exchange *x) {
  client *c = x->owner;
  pp_h2h3_ws *t = tunnel_of(c, x);
  if (t && t->wc) { /* the accept is done: the stream is the WebSocket's from now on */
    x->state = PP_X_RESPONDED;
    t->x = NULL;
    pp_queue_remove(&c->streams, &x->olink);
    pp_h2_set_stream_data(c->h2, x->stream_id, NULL);
    pp_exchange_stream_closed(x, 0);
    h2_pump(c);
    return;
  }
  if (!x->head_sent) {
    c->sess->core->stats.errors_500++;
    x->head_sent = 1;
    local_response(c, x, 500, "500 Internal Server Error\n");
  } else if (!x->resp_no_body) {
    pp_h2_send_end(c->h2, x->stream_id);
  }
  x->state = PP_X_RESPONDED;
  h2_pump(c);
}

static void ws_drop(client *c, pp_h2h3_ws *t);

static void x_fail(pp_exchange *x, int status, const char *msg) {
  client *c = x->owner;
  pp_h2h3_ws *t = tunnel_of(c, x);
  if (t && !t->wc) ws_drop(c, t); /* not accepted: an ordinary answer on the stream */
  if (!x->head_sent) {
    x->head_sent = 1;
    local_response(c, x, status, msg);
  } else {
    pp_h2_reset(c->h2, x->stream_id, NGHTTP2_INTERNAL_ERROR); /* a truncated response */
  }
  x->state = PP_X_RESPONDED;
  h2_pump(c);
}

static size_t x_flush(pp_exchange *x) {
  client *c = x->owner;
  h2_pump(c);
  if (c->closing) return 0;
  size_t pending = pp_h2_stream_pending(c->h2, x->stream_id);
  return pending > c->write_bytes ? pending : c->write_bytes;
}

static void x_body_writable(pp_exchange *x) {
  client *c = x->owner;
  release_body(c, x);
  h2_pump(c);
}

/* 103 Early Hints: interim HEADERS on the stream (pp_h2_respond with a 1xx). */
static void x_early_hints(pp_exchange *x, const pp_wire_frame *f) {
  client *c = x->owner;
  size_t n = pp_h2h3_headers("", NULL, &f->pairs, &c->h2hdrs);
  if (pp_h2_respond(c->h2, x->stream_id, 103, (const pp_h2_header *)c->h2hdrs.data, n, 0) == 0)
    pp_exchange_count_status(c->sess->xpool, 103);
}

static const pp_exchange_ops h2_ops = {x_head,  x_body,          x_end, x_fail,
                                       x_flush, x_body_writable, NULL,  x_early_hints};

/* ---------------------------------------------------------------- WebSocket tunnels
 * RFC 8441: see pp_h2h3_ws (h2h3.h). The stream's DATA is the WebSocket's bytes both ways; its
 * flow control is the backpressure: bytes fed while the WebSocket is paused keep their credit
 * (held) until it resumes, and what it writes waits in the stream's buffer while the client's
 * windows are closed (io->unsent counts it). The client's END_STREAM (its FIN) is answered
 * with ours; RST_STREAM either way, or the connection's end, is the transport lost. */

static pp_wshub *hub_of(pp_sessions *s) {
  return &s->wshub;
}

static void ws_pump(pp_h2h3_ws *t) {
  h2_pump(t->conn);
}

static int ws_io_write(void *tp, const uint8_t *p, size_t n) {
  pp_h2h3_ws *t = tp;
  client *c = t->conn;
  if (c->closing || !c->h2 || t->ended) return -1;
  if (pp_h2_send_data(c->h2, (int32_t)t->stream_id, p, n) < 0) return -1;
  pp_h2h3_ws_kick(t);
  return 0;
}

static size_t ws_io_unsent(void *tp) {
  pp_h2h3_ws *t = tp;
  client *c = t->conn;
  if (!c->h2) return 0;
  size_t pending = pp_h2_stream_pending(c->h2, (int32_t)t->stream_id);
  return pending > c->write_bytes ? pending : c->write_bytes;
}

static void ws_io_pause(void *tp, int pause) {
  pp_h2h3_ws *t = tp;
  client *c = t->conn;
  t->paused = pause;
  if (!pause && t->held && c->h2) {
    pp_h2_consume(c->h2, (int32_t)t->stream_id, (size_t)t->held);
    t->held = 0;
    pp_h2h3_ws_kick(t); /* the WINDOW_UPDATE */
  }
}

static void ws_io_close(void *tp) {
  pp_h2h3_ws *t = tp;
  client *c = t->conn;
  if (!t->ended && c->h2) {
    t->ended = 1;
    pp_h2_send_end(c->h2, (int32_t)t->stream_id);
  }
  pp_h2h3_ws_kick(t);
}

static const pp_wsconn_io h2_ws_io = {ws_io_write, ws_io_unsent, ws_io_pause, ws_io_close};

/* The tunnel leaves the connection (its stream ended, or the connection did). */
static void ws_closed(client *c, pp_h2h3_ws *t) {
  pp_queue_remove(&c->h2ws, &t->link);
  pp_h2h3_ws_end(t);
}

/* Not accepted: the stream is an ordinary request's; bytes that came early are given back. */
static void ws_drop(client *c, pp_h2h3_ws *t) {
  if (t->early.len && c->h2) pp_h2_consume(c->h2, (int32_t)t->stream_id, t->early.len);
  t->early.len = 0;
  ws_closed(c, t);
}

static void ws_data(client *c, pp_h2h3_ws *t, const uint8_t *data, size_t len) {
  int32_t id = (int32_t)t->stream_id;
  if (!t->wc) {
    if (t->x)
      pp_buf_append(&t->early, data, len); /* its credit waits: the stream window bounds it */
    else
      pp_h2_consume(c->h2, id, len);
    return;
  }
  pp_wsconn_feed(t->wc, data, len);
  if (t->paused)
    t->held += len;
  else
    pp_h2_consume(c->h2, id, len);
}

static void ws_fin(client *c, pp_h2h3_ws *t) {
  t->fin_in = 1;
  if (t->wc && !t->ended) { /* as a TCP FIN: our side ends too, then the stream closes */
    t->ended = 1;
    pp_h2_send_end(c->h2, (int32_t)t->stream_id);
  }
}

/* The app's head for an upgrade: 1 if handled here (accepted, or answered 500), 0 when the
 * app refused and its response goes out as it is. */
static int ws_head(client *c, pp_h2h3_ws *t, pp_exchange *x, const pp_wire_frame *f) {
  pp_sessions *s = c->sess;
  int32_t id = (int32_t)t->stream_id;
  pp_ws_accept a;
  const char *why = "";
  int rc = pp_ws_accept_parse(f, (const char *)t->offered.data, t->offered.len, &a, &why);
  if (rc == 0) {
    ws_drop(c, t);
    return 0;
  }
  if (rc < 0) {
    LOG_ERR(s, "client %s: stream %d: the app's WebSocket accept cannot be served: %s", c->remote,
            (int)id, why);
    ws_drop(c, t);
    local_response(c, x, 500, "500 Internal Server Error\n");
    s->core->stats.errors_500++;
    x->resp_no_body = 1;
    return 1;
  }
  size_t n = pp_h2h3_ws_headers(t, &a, s->wall->date, &f->pairs, &c->h2hdrs);
  x->resp_no_body = 1; /* the app's body bytes, if any, are not WebSocket bytes */
  if (pp_h2_respond(c->h2, id, 200, (const pp_h2_header *)c->h2hdrs.data, n, 0) < 0) {
    ws_drop(c, t);
    return 1;
  }
  pp_h2h3_count_response(s, x, 200);
  t->wc = pp_h2h3_ws_open(t, hub_of(s), &h2_ws_io, &a, f);
  if (!t->wc) {
    pp_h2_reset(c->h2, id, NGHTTP2_INTERNAL_ERROR);
    return 1;
  }
  size_t credit = pp_h2h3_ws_feed_early(t);
  if (credit) pp_h2_consume(c->h2, id, credit);
  if (t->fin_in) ws_fin(c, t);
  pp_h2h3_ws_kick(t);
  return 1;
}

/* An extended CONNECT (RFC 8441 §4; nghttp2 checked :scheme, :path and :authority). */
static int ws_request(client *c, const pp_h2h3_origin *o, pp_h2h3_request *r,
                      const pp_h2_request *rq, void **stream_data) {
  pp_sessions *s = c->sess;
  pp_h2h3_ws *t;
  int status =
      pp_h2h3_ws_request(o, r, &hub_of(s)->pmd, rq->protocol, rq->protocol_len, rq->scheme,
                         rq->scheme_len, c, rq->stream_id, ws_pump, &c->h2hdrs, &c->streams, &t);
  if (status == 426) {
    pp_h2_respond(c->h2, rq->stream_id, 426, PP_H2H3_WS_426_FIELDS, 2, 0);
    pp_h2_send_data(c->h2, rq->stream_id, (const uint8_t *)PP_H2H3_WS_426_BODY,
                    sizeof PP_H2H3_WS_426_BODY - 1);
    pp_h2_send_end(c->h2, rq->stream_id);
    *stream_data = NULL;
    return 0;
  }
  if (status) return status;
  pp_queue_push(&c->h2ws, &t->link);
  *stream_data = t->x;
  return 0;
}

/* /stats "http2": the counters summed over connections. */
void pp_h2conn_stats_json(pp_sessions *s, json_t *root) {
  pp_stats *st = &s->core->stats;
  json_t *h2 = json_object();
  json_object_set_new(h2, "connections", json_integer((json_int_t)st->h2_connections));
  json_object_set_new(h2, "upgrades", json_integer((json_int_t)st->h2c_upgrades));
  json_object_set_new(h2, "streams", json_integer((json_int_t)st->h2_streams));
  json_object_set_new(h2, "peer_resets", json_integer((json_int_t)st->h2_peer_resets));
  json_object_set_new(h2, "stream_errors", json_integer((json_int_t)st->h2_stream_errors));
  json_object_set_new(h2, "refused_streams", json_integer((json_int_t)st->h2_refused_streams));
  json_object_set_new(h2, "protocol_errors", json_integer((json_int_t)st->h2_protocol_errors));
  json_object_set_new(h2, "connection_errors", json_integer((json_int_t)st->h2_connection_errors));
  json_object_set_new(h2, "flood_closes", json_integer((json_int_t)st->h2_flood_closes));
  json_object_set_new(root, "http2", h2);
}
