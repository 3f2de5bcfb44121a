/* h2conn: HTTP/2 on a client stream (see conn.h), the glue between the sans-I/O session
 * (h2.h) and the exchange layer. A connection gets here by the client preface (h2c with
 * prior knowledge, -h2c), by Upgrade: h2c (the upgrading request becomes stream 1), or by
 * ALPN h2 on a TLS listener. Every stream is an exchange of its own in the one queue.
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
  int refuse;
  *stream_data =
      pp_h2h3_open(&o,
                   &(pp_h2h3_request){rq->method, rq->method_len, rq->path, rq->path_len,
                                      rq->authority, rq->authority_len, rq->headers,
                                      rq->header_count, rq->has_content_length, rq->content_length},
                   rq->stream_id, rq->end_stream, &c->h2hdrs, &c->streams, &refuse);
  return refuse;
}

static int on_body(pp_h2 *h, int32_t stream_id, void *stream_data, const uint8_t *data,
                   size_t len) {
  pp_exchange *x = stream_data;
  if (pp_exchange_stream_body(x, data, len))
    release_body(h->data, x);
  else
    pp_h2_consume(h, stream_id, len);
  return 0;
}

static int on_body_end(pp_h2 *h, int32_t stream_id, void *stream_data) {
  (void)h, (void)stream_id;
  pp_exchange_stream_end(stream_data);
  return 0;
}

static void on_close(pp_h2 *h, int32_t stream_id, void *stream_data, uint32_t error_code) {
  client *c = h->data;
  pp_exchange *x = stream_data;
  (void)stream_id;
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
  else if (c->streams.len == 0)
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
  return c->streams.len == 0 && c->writes_in_flight == 0;
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

static void x_head(pp_exchange *x, const pp_wire_frame *f) {
  client *c = x->owner;
  pp_sessions *s = c->sess;
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
  pp_exchange_count_status(s->xpool, status);
  x->status = status;
  s->core->stats.responses++;
  pp_hist_window_record(&s->core->stats.ttfb, (uint64_t)(pp_now_ns() - x->t1));
}

static void x_body(pp_exchange *x, const uint8_t *data, size_t len) {
  client *c = x->owner;
  if (x->resp_no_body || !len) return;
  pp_h2_send_data(c->h2, x->stream_id, data, len);
  x->resp_bytes += len;
}

static void x_end(pp_exchange *x) {
  client *c = x->owner;
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

static void x_fail(pp_exchange *x, int status, const char *msg) {
  client *c = x->owner;
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
