/* What the HTTP/2 and HTTP/3 session glue share (h2h3.h): a request stream's exchange (admission,
 * env from its pseudo-headers and fields), a response head's pairs as header entries, and the
 * record of a WebSocket over extended CONNECT (RFC 8441 / RFC 9220) with its handshake check
 * and accepting answer. One tunnel record per WebSocket stream, allocated at its CONNECT. */
#include "server/session/h2h3.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server/base/alloc.h"

#include "server/base/access.h"
#include "server/base/clock.h"
#include "server/core/exchange_owner.h"
#include "server/base/hooks.h"
#include "server/base/log.h"
#include "server/proto/http_status.h"
#include "server/session/conn.h"

void pp_h2h3_env(pp_exchange *x, pp_buf *scratch, const char *protocol, const pp_env_conninfo *ci,
                 const pp_h2h3_request *rq) {
  /* The fields as env.c wants them: :authority first as Host (it wins over a host field,
   * RFC 9113 section 8.3.1), then the regular fields. */
  pp_buf_reserve(scratch, (rq->header_count + 3) * sizeof(pp_env_field));
  pp_env_field *fields = (pp_env_field *)scratch->data;
  uint32_t n = 0;
  int host_index = -1, ctype_index = -1;
  if (rq->authority) {
    fields[n] = (pp_env_field){"host", 4, (const char *)rq->authority, rq->authority_len};
    host_index = (int)n++;
  }
  for (size_t i = 0; i < rq->header_count && n < PP_ENV_MAX_FIELDS; i++) {
    const pp_h2_header *f = &rq->headers[i];
    int is_host = f->name_len == 4 && !memcmp(f->name, "host", 4);
    if (is_host && rq->authority) continue;
    fields[n] =
        (pp_env_field){(const char *)f->name, f->name_len, (const char *)f->value, f->value_len};
    if (is_host && host_index < 0) host_index = (int)n;
    if (f->name_len == 12 && !memcmp(f->name, "content-type", 12) && ctype_index < 0)
      ctype_index = (int)n;
    n++;
  }
  const char *method = (const char *)rq->method;
  size_t method_len = rq->method_len;
  if (rq->websocket) { /* as HTTP/1.1's upgrade reaches the app (RFC 6455 §4.1) */
    method = "GET", method_len = 3;
    if (n < PP_ENV_MAX_FIELDS) fields[n++] = (pp_env_field){"upgrade", 7, "websocket", 9};
    if (n < PP_ENV_MAX_FIELDS) fields[n++] = (pp_env_field){"connection", 10, "Upgrade", 7};
  }
  pp_env_request er = {
      method,     method_len,  (const char *)rq->path, rq->path_len,      protocol, fields, n,
      host_index, ctype_index, rq->has_content_length, rq->content_length};
  pp_exchange_env_begin(x);
  uint32_t pairs = pp_env_build(&er, ci, x->id, &x->head);
  if (rq->websocket) {
    pp_env_put_pair(&x->head, PP_H2H3_WS_ENV_FLAG, strlen(PP_H2H3_WS_ENV_FLAG), "true", 4);
    pp_env_put_pair(&x->head, PP_H2H3_WS_ENV_PROTOCOLS, strlen(PP_H2H3_WS_ENV_PROTOCOLS),
                    rq->ws_protocols ? (const char *)rq->ws_protocols : "",
                    rq->ws_protocols ? rq->ws_protocols_len : 0);
    pairs += 2;
  }
  pp_exchange_env_end(x, pairs, rq->has_content_length ? (int64_t)rq->content_length : -1);
}

pp_exchange *pp_h2h3_open(const pp_h2h3_origin *o, const pp_h2h3_request *rq, int64_t stream_id,
                          int end_stream, pp_buf *scratch, pp_queue *streams, int *refuse) {
  pp_sessions *s = o->s;
  s->core->stats.requests++;
  *refuse = pp_exchange_admit(s->core);
  if (*refuse) { /* answered by the session, counted as shed */
    pp_h2h3_log_refused(s->hooks, o->remote, o->protocol, *refuse, rq->method, rq->method_len,
                        rq->path, rq->path_len);
    return NULL;
  }
  pp_exchange *x = pp_exchange_get(s->xpool, o->ops, o->owner);
  x->t1 = x->t2 = pp_now_ns();
  x->keep_alive = 1;
  x->head_method = rq->method_len == 4 && !memcmp(rq->method, "HEAD", 4);
  x->stream_id = stream_id;
  x->id = ++s->core->next_request_id;
  x->state = PP_X_BODY;
  x->early_hints = s->cfg->early_hints;
  pp_env_conninfo ci = {o->remote,
                        o->local_host,
                        o->local_port,
                        o->scheme,
                        s->cfg->request_start,
                        &x->add_request_start,
                        s->cfg->remote_addr_header,
                        s->cfg->trusted,
                        s->cfg->trusted_count};
  pp_h2h3_env(x, scratch, o->protocol, &ci, rq);
  pp_queue_push(streams, &x->olink);
  if (end_stream) pp_exchange_body_done(x);
  return x;
}

static void put_header(pp_buf *out, const uint8_t *k, size_t kl, const uint8_t *v, size_t vl) {
  pp_h2_header hd = {k, kl, v, vl};
  pp_buf_append(out, &hd, sizeof hd);
}

/* The app's pairs as entries in *out (emptied first), less those pp_ws_accept_skips_field names
 * when ws_accept, then date unless it is NULL or the app gave its own. Returns the count. */
static size_t put_app_fields(pp_buf *out, const pp_wire_pairs *pairs, const char *date,
                             int ws_accept) {
  out->len = 0;
  pp_wire_pairs_iter it;
  pp_wire_pairs_iter_init(&it, pairs);
  const uint8_t *k, *v;
  uint32_t kl, vl;
  size_t n = 0;
  int has_date = 0;
  while (pp_wire_pairs_next(&it, &k, &kl, &v, &vl)) {
    if (ws_accept && pp_ws_accept_skips_field(k, kl)) continue;
    if (kl == 4 && !strncasecmp((const char *)k, "date", 4)) has_date = 1;
    put_header(out, k, kl, v, vl), n++;
  }
  if (date && !has_date)
    put_header(out, (const uint8_t *)"date", 4, (const uint8_t *)date, strlen(date)), n++;
  return n;
}

size_t pp_h2h3_headers(const char *alt_svc, const char *date, const pp_wire_pairs *pairs,
                       pp_buf *out) {
  size_t n = put_app_fields(out, pairs, date, 0);
  if (alt_svc[0])
    put_header(out, (const uint8_t *)"alt-svc", 7, (const uint8_t *)alt_svc, strlen(alt_svc)), n++;
  return n;
}

void pp_h2h3_count_response(pp_sessions *s, pp_exchange *x, int status) {
  pp_exchange_count_status(s->xpool, status);
  x->status = status;
  s->core->stats.responses++;
  pp_hist_window_record(&s->core->stats.ttfb, (uint64_t)(pp_now_ns() - x->t1));
}

void pp_h2h3_log_refused(const pp_hooks *hooks, const char *remote, const char *protocol,
                         int status, const uint8_t *method, size_t method_len, const uint8_t *path,
                         size_t path_len) {
  if (!hooks->request_done) return;
  int64_t now = pp_now_ns();
  pp_access_rec rec = {.remote = remote,
                       .protocol = protocol,
                       .method = (const char *)method,
                       .method_len = method_len,
                       .target = (const char *)path,
                       .target_len = path_len,
                       .status = status,
                       .bytes = strlen(pp_http_reason_phrase(status)) + 5,
                       .t1 = now,
                       .t_end = now,
                       .service_ns = -1,
                       .worker = -1};
  hooks->request_done(hooks->request_done_ctx, &rec);
}

/* ---------------------------------------------------------------- WebSocket tunnels */

static void on_kick(uv_timer_t *tm) {
  pp_h2h3_ws *t = tm->data;
  t->pump(t);
}

pp_h2h3_ws *pp_h2h3_ws_new(uv_loop_t *loop, void *conn, int64_t stream_id,
                           void (*pump)(pp_h2h3_ws *t)) {
  pp_h2h3_ws *t = pp_xmalloc(sizeof *t);
  memset(t, 0, sizeof *t);
  t->conn = conn;
  t->stream_id = stream_id;
  t->pump = pump;
  pp_buf_init(&t->offered);
  pp_buf_init(&t->early);
  pp_buf_init(&t->out);
  uv_timer_init(loop, &t->kick);
  t->kick.data = t;
  return t;
}

static void on_kick_closed(uv_handle_t *h) {
  free(h->data);
}

void pp_h2h3_ws_free(pp_h2h3_ws *t) {
  pp_buf_dispose(&t->offered);
  pp_buf_dispose(&t->early);
  pp_buf_dispose(&t->out);
  uv_timer_stop(&t->kick);
  uv_close((uv_handle_t *)&t->kick, on_kick_closed);
}

void pp_h2h3_ws_end(pp_h2h3_ws *t) {
  if (t->wc) {
    pp_wsconn *wc = t->wc;
    t->wc = NULL;
    pp_wsconn_gone(wc);
  }
  pp_h2h3_ws_free(t);
}

size_t pp_h2h3_ws_feed_early(pp_h2h3_ws *t) {
  size_t k = t->early.len;
  if (!k) return 0;
  pp_wsconn_feed(t->wc, t->early.data, k);
  t->early.len = 0;
  if (!t->paused) return k;
  t->held += k;
  return 0;
}

void pp_h2h3_ws_kick(pp_h2h3_ws *t) {
  if (!uv_is_active((uv_handle_t *)&t->kick)) uv_timer_start(&t->kick, on_kick, 0, 0);
}

pp_h2h3_ws *pp_h2h3_ws_find(pp_queue *list, int64_t stream_id) {
  for (pp_qnode *n = list->head.next; n != &list->head; n = n->next) {
    pp_h2h3_ws *t = PP_CONTAINER_OF(n, pp_h2h3_ws, link);
    if (t->stream_id == stream_id) return t;
  }
  return NULL;
}

int pp_h2h3_ws_check(pp_h2h3_ws *t, const pp_ws_pmd_config *pmd, const pp_h2h3_request *rq,
                     const uint8_t *protocol, size_t protocol_len, const uint8_t *scheme,
                     size_t scheme_len, const char **why) {
  pp_ws_handshake hs;
  pp_ws_handshake_init(&hs, PP_WS_HS_CONNECT);
  pp_ws_handshake_field(&hs, (const uint8_t *)":method", 7, rq->method, rq->method_len);
  pp_ws_handshake_field(&hs, (const uint8_t *)":protocol", 9, protocol, protocol_len);
  if (scheme) pp_ws_handshake_field(&hs, (const uint8_t *)":scheme", 7, scheme, scheme_len);
  if (rq->path) pp_ws_handshake_field(&hs, (const uint8_t *)":path", 5, rq->path, rq->path_len);
  if (rq->authority)
    pp_ws_handshake_field(&hs, (const uint8_t *)":authority", 10, rq->authority, rq->authority_len);
  for (size_t i = 0; i < rq->header_count; i++)
    pp_ws_handshake_field(&hs, rq->headers[i].name, rq->headers[i].name_len, rq->headers[i].value,
                          rq->headers[i].value_len);
  int status = pp_ws_handshake_check(&hs, pmd);
  *why = hs.reason;
  if (status == 0) {
    t->pmd_ok = hs.pmd_accepted;
    t->pmd = hs.pmd;
    snprintf(t->ext_resp, sizeof t->ext_resp, "%s", hs.extensions_response);
    t->offered.len = 0;
    if (hs.subprotocols) pp_buf_append(&t->offered, hs.subprotocols, hs.subprotocols_len);
  }
  pp_ws_handshake_dispose(&hs);
  return status;
}

size_t pp_h2h3_ws_headers(const pp_h2h3_ws *t, const pp_ws_accept *a, const char *date,
                          const pp_wire_pairs *pairs, pp_buf *out) {
  size_t n = put_app_fields(out, pairs, date, 1);
  if (a->protocol)
    put_header(out, (const uint8_t *)"sec-websocket-protocol", 22, a->protocol, a->protocol_len),
        n++;
  if (t->pmd_ok && t->ext_resp[0])
    put_header(out, (const uint8_t *)"sec-websocket-extensions", 24, (const uint8_t *)t->ext_resp,
               strlen(t->ext_resp)),
        n++;
  return n;
}

pp_wsconn *pp_h2h3_ws_open(pp_h2h3_ws *t, pp_wshub *hub, const pp_wsconn_io *io,
                           const pp_ws_accept *a, const pp_wire_frame *f) {
  return pp_wsconn_open(hub, io, t, a, f, t->x, t->pmd_ok ? &t->pmd : NULL);
}

const pp_h2_header PP_H2H3_WS_426_FIELDS[2] = {
    {(const uint8_t *)"sec-websocket-version", 21, (const uint8_t *)"13", 2},
    {(const uint8_t *)"content-type", 12, (const uint8_t *)"text/plain", 10}};

int pp_h2h3_ws_request(const pp_h2h3_origin *o, pp_h2h3_request *r, const pp_ws_pmd_config *pmd,
                       const uint8_t *protocol, size_t protocol_len, const uint8_t *scheme,
                       size_t scheme_len, void *conn, int64_t stream_id,
                       void (*pump)(pp_h2h3_ws *t), pp_buf *hdrs, pp_queue *streams,
                       pp_h2h3_ws **out) {
  pp_sessions *s = o->s;
  *out = NULL;
  if (!(protocol_len == 9 && !memcmp(protocol, "websocket", 9))) {
    pp_h2h3_log_refused(s->hooks, o->remote, o->protocol, 501, r->method, r->method_len, r->path,
                        r->path_len);
    return 501; /* a protocol we do not carry (WebTransport: docs/WEBSOCKET.md) */
  }
  pp_h2h3_ws *t = pp_h2h3_ws_new(s->loop, conn, stream_id, pump);
  const char *why = "";
  int status = pp_h2h3_ws_check(t, pmd, r, protocol, protocol_len, scheme, scheme_len, &why);
  if (status) {
    LOG(s, "client %s: stream %lld: WebSocket handshake refused with %d: %s", o->remote,
        (long long)stream_id, status, why);
    pp_h2h3_ws_free(t);
    pp_h2h3_log_refused(s->hooks, o->remote, o->protocol, status, r->method, r->method_len, r->path,
                        r->path_len);
    return status;
  }
  r->websocket = 1;
  r->ws_protocols = t->offered.len ? t->offered.data : NULL;
  r->ws_protocols_len = t->offered.len;
  int refuse;
  pp_exchange *x = pp_h2h3_open(o, r, stream_id, 1, hdrs, streams, &refuse);
  if (!x) {
    pp_h2h3_ws_free(t);
    return refuse;
  }
  t->x = x;
  *out = t;
  return 0;
}
