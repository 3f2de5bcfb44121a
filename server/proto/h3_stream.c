/* The request streams of an HTTP/3 connection (h3.h, h3_int.h): stream records and the
 * response chunks that stay put until the client acknowledges them, the nghttp3 callbacks that
 * carry a request up to the owner (headers, body, end, close, acknowledgements), the answers the
 * session gives itself (400, 413, 431, 501, on_request's status), and the owner's calls down:
 * pp_h3_respond, pp_h3_send_data, pp_h3_send_end, pp_h3_consume, pp_h3_reset and the getters.
 * Nothing here writes a packet: these calls mark the connection (pp_h3__conn_want) and the end
 * of the public call writes. */
#include "server/proto/h3.h"

#include <stdio.h>
#include <string.h>

#include "server/proto/fields.h"
#include "server/proto/h3_int.h"
#include "server/proto/http_status.h"

/* Recycled records and response chunks kept per server: what one burst needed beyond this goes
 * back to the allocator instead of staying resident for good. */
#define STREAM_FREE_MAX 256
#define CHUNK_FREE_MAX  256 /* 4 MiB */

struct hdr_span {
  uint32_t name_off, name_len, value_off, value_len;
  int32_t token;
};

/* ---- streams ---- */

static pp_h3_stream *stream_of(pp_h3_conn *c, int64_t id) {
  for (pp_h3_stream *s = c->streams; s; s = s->next)
    if (s->id == id) return s;
  return NULL;
}

static pp_h3_stream *stream_new(pp_h3_conn *c, int64_t id) {
  pp_h3_server *srv = c->srv;
  pp_h3_stream *s = srv->stream_free;
  pp_buf raw, spans, list, pend;
  if (s) {
    srv->stream_free = s->next;
    srv->stream_free_count--;
    raw = s->hdr_raw, spans = s->hdr_spans, list = s->hdr_list, pend = s->body_pend;
  } else {
    s = pp_h3__xcalloc(1, sizeof *s);
    pp_buf_init(&raw), pp_buf_init(&spans), pp_buf_init(&list), pp_buf_init(&pend);
  }
  memset(s, 0, sizeof *s);
  s->hdr_raw = raw, s->hdr_spans = spans, s->hdr_list = list, s->body_pend = pend;
  s->hdr_raw.len = s->hdr_spans.len = s->hdr_list.len = s->body_pend.len = 0;
  s->id = id;
  s->next = c->streams;
  if (c->streams) c->streams->prev = s;
  c->streams = s;
  c->stream_count++;
  return s;
}

static chunk *chunk_get(pp_h3_server *srv) {
  chunk *k = srv->chunk_free;
  if (k) {
    srv->chunk_free = k->next;
    srv->chunk_free_count--;
  } else
    k = pp_h3__xcalloc(1, sizeof *k);
  k->next = NULL;
  k->len = 0;
  return k;
}

static void chunk_put(pp_h3_server *srv, chunk *k) {
  if (srv->chunk_free_count >= CHUNK_FREE_MAX) {
    free(k);
    return;
  }
  k->next = srv->chunk_free;
  srv->chunk_free = k;
  srv->chunk_free_count++;
}

void pp_h3__stream_free(pp_h3_conn *c, pp_h3_stream *s) {
  pp_h3_server *srv = c->srv;
  for (chunk *k = s->head_chunk; k;) {
    chunk *next = k->next;
    chunk_put(srv, k);
    k = next;
  }
  if (!s->released) c->unacked -= (size_t)(s->written - s->acked);
  if (s->prev)
    s->prev->next = s->next;
  else
    c->streams = s->next;
  if (s->next) s->next->prev = s->prev;
  c->stream_count--;
  if (srv->stream_free_count >= STREAM_FREE_MAX) {
    pp_buf_dispose(&s->hdr_raw);
    pp_buf_dispose(&s->hdr_spans);
    pp_buf_dispose(&s->hdr_list);
    pp_buf_dispose(&s->body_pend);
    free(s);
    return;
  }
  s->next = srv->stream_free;
  srv->stream_free = s;
  srv->stream_free_count++;
}

/* Tells the owner the stream is gone (once). Its response bytes stop counting against the
 * connection's unacknowledged bound first, so the owner may give the room to other streams from
 * on_close (nothing more of this stream's will be sent, whether or not it is acknowledged). */
void pp_h3__stream_detach(pp_h3_conn *c, pp_h3_stream *s, uint64_t code) {
  if (!s->owned || s->detached) return;
  if (!s->released) {
    s->released = 1;
    c->unacked -= (size_t)(s->written - s->acked);
  }
  s->detached = 1;
  s->detach_pending = 0;
  if (c->srv->cb->on_close) c->srv->cb->on_close(c, s->id, s->owner_data, code);
}

/* Releases connection- and stream-level credit for n body bytes. */
static void extend_credit(pp_h3_conn *c, int64_t id, uint64_t n) {
  if (!n) return;
  ngtcp2_conn_extend_max_stream_offset(c->qc, id, n);
  ngtcp2_conn_extend_max_offset(c->qc, n);
}

/* ---- response body: chunks that stay put until acknowledged ---- */

static void append_body(pp_h3_conn *c, pp_h3_stream *s, const uint8_t *data, size_t len) {
  while (len) {
    if (!s->tail_chunk || s->tail_chunk->len == PP_H3_CHUNK) {
      chunk *k = chunk_get(c->srv);
      if (s->tail_chunk)
        s->tail_chunk->next = k;
      else {
        s->head_chunk = k;
        s->head_base = s->written;
      }
      s->tail_chunk = k;
    }
    chunk *t = s->tail_chunk;
    size_t n = PP_H3_CHUNK - t->len;
    if (n > len) n = len;
    memcpy(t->data + t->len, data, n);
    t->len += n;
    s->written += n;
    if (!s->released) c->unacked += n;
    data += n;
    len -= n;
  }
}

static void ack_body(pp_h3_conn *c, pp_h3_stream *s, uint64_t n) {
  s->acked += n;
  if (!s->released) c->unacked -= (size_t)n;
  while (s->head_chunk && s->acked >= s->head_base + s->head_chunk->len &&
         (s->head_chunk->next || s->head_chunk->len == PP_H3_CHUNK)) {
    chunk *k = s->head_chunk;
    s->head_base += k->len;
    s->head_chunk = k->next;
    if (!s->head_chunk) s->tail_chunk = NULL;
    if (s->send_chunk == k) s->send_chunk = NULL;
    chunk_put(c->srv, k);
  }
}

static nghttp3_ssize read_data(nghttp3_conn *h3, int64_t stream_id, nghttp3_vec *vec, size_t veccnt,
                               uint32_t *pflags, void *conn_user_data, void *stream_user_data) {
  (void)h3, (void)stream_user_data;
  pp_h3_conn *c = conn_user_data;
  pp_h3_stream *s = stream_of(c, stream_id);
  if (!s) return NGHTTP3_ERR_CALLBACK_FAILURE;
  chunk *k = s->send_chunk;
  uint64_t base = s->send_base;
  if (!k) k = s->head_chunk, base = s->head_base;
  size_t n = 0;
  uint64_t sent = s->sent;
  while (k && n < veccnt) {
    if (sent < base + k->len) {
      size_t off = (size_t)(sent - base);
      vec[n].base = k->data + off;
      vec[n].len = k->len - off;
      sent += vec[n].len;
      n++;
    }
    if (k->len < PP_H3_CHUNK || !k->next) break;
    base += k->len;
    k = k->next;
  }
  s->send_chunk = k, s->send_base = base;
  s->sent = sent;
  if (s->ended && s->sent == s->written) {
    *pflags |= NGHTTP3_DATA_FLAG_EOF;
    s->eof_given = 1;
    return (nghttp3_ssize)n;
  }
  if (n == 0) {
    s->wouldblock = 1;
    return NGHTTP3_ERR_WOULDBLOCK;
  }
  return (nghttp3_ssize)n;
}

/* ---- requests ---- */

static int parse_u64(const uint8_t *p, size_t n, uint64_t *out) {
  uint64_t v = 0;
  if (n == 0 || n > 19) return -1;
  for (size_t i = 0; i < n; i++) {
    if (p[i] < '0' || p[i] > '9') return -1;
    v = v * 10 + (uint64_t)(p[i] - '0');
  }
  *out = v;
  return 0;
}

static void make_nv(nghttp3_nv *nv, const uint8_t *name, size_t nlen, const uint8_t *value,
                    size_t vlen) {
  nv->name = (uint8_t *)(uintptr_t)name;
  nv->namelen = nlen;
  nv->value = (uint8_t *)(uintptr_t)value;
  nv->valuelen = vlen;
  nv->flags = NGHTTP3_NV_FLAG_NONE;
}

static int submit_head(pp_h3_conn *c, pp_h3_stream *s, int status, int no_body);
static void start_fields(pp_h3_server *srv, int status);
static void add_field(pp_h3_server *srv, size_t name_off, size_t name_len, const uint8_t *v,
                      size_t vlen);

/* The session answers the stream itself and stops reading its body. */
static void answer(pp_h3_conn *c, pp_h3_stream *s, int status) {
  pp_h3_server *srv = c->srv;
  srv->stats.session_answers++;
  s->answered = 1;
  char body[64];
  int n = snprintf(body, sizeof body, "%d %s\n", status, pp_http_reason_phrase(status));
  if (s->responded || s->written) { /* too late for a clean answer */
    s->want_reset = 1;
    s->reset_code = NGHTTP3_H3_REQUEST_CANCELLED;
    pp_h3__conn_owe_work(c);
    return;
  }
  srv->scratch.len = srv->nvbuf.len = 0;
  append_body(c, s, (const uint8_t *)body, (size_t)n);
  s->ended = 1;
  if (status == 503) { /* admission control's refusal: the client may retry after a second */
    start_fields(srv, status);
    size_t off = srv->scratch.len;
    pp_buf_append(&srv->scratch, "content-type", 12);
    add_field(srv, off, 12, (const uint8_t *)"text/plain", 10);
    off = srv->scratch.len;
    pp_buf_append(&srv->scratch, "retry-after", 11);
    add_field(srv, off, 11, (const uint8_t *)"1", 1);
  }
  if (submit_head(c, s, status, s->head) != 0) return;
  if (!s->req_fin) {
    s->want_stop = 1;
    pp_h3__conn_owe_work(c);
  }
}

static int on_begin_headers(nghttp3_conn *h3, int64_t stream_id, void *conn_user_data,
                            void *stream_user_data) {
  (void)h3, (void)stream_user_data;
  pp_h3_conn *c = conn_user_data;
  if (!stream_of(c, stream_id)) stream_new(c, stream_id);
  return 0;
}

static int on_recv_header(nghttp3_conn *h3, int64_t stream_id, int32_t token, nghttp3_rcbuf *name,
                          nghttp3_rcbuf *value, uint8_t flags, void *conn_user_data,
                          void *stream_user_data) {
  (void)h3, (void)flags, (void)stream_user_data;
  pp_h3_conn *c = conn_user_data;
  pp_h3_stream *s = stream_of(c, stream_id);
  if (!s || s->headers_done) return 0;
  nghttp3_vec n = nghttp3_rcbuf_get_buf(name), v = nghttp3_rcbuf_get_buf(value);
  s->hdr_size += n.len + v.len + 32;
  if (s->hdr_size > c->srv->cfg.limits.max_header_list) {
    s->hdr_too_big = 1;
    return 0;
  }
  struct hdr_span sp = {(uint32_t)s->hdr_raw.len, (uint32_t)n.len,
                        (uint32_t)(s->hdr_raw.len + n.len), (uint32_t)v.len, token};
  pp_buf_append(&s->hdr_raw, n.base, n.len);
  pp_buf_append(&s->hdr_raw, v.base, v.len);
  pp_buf_append(&s->hdr_spans, &sp, sizeof sp);
  return 0;
}

static int on_end_headers(nghttp3_conn *h3, int64_t stream_id, int fin, void *conn_user_data,
                          void *stream_user_data) {
  (void)h3, (void)stream_user_data;
  pp_h3_conn *c = conn_user_data;
  pp_h3_server *srv = c->srv;
  pp_h3_stream *s = stream_of(c, stream_id);
  if (!s || s->headers_done) return 0;
  s->headers_done = 1;
  s->req_fin = fin != 0;
  if (c->goaway == 2) { /* after the final GOAWAY nghttp3 rejects these itself */
    return 0;
  }
  pp_h3_request req;
  memset(&req, 0, sizeof req);
  req.stream_id = stream_id;
  req.end_stream = fin != 0;
  const struct hdr_span *sp = (const struct hdr_span *)s->hdr_spans.data;
  size_t count = s->hdr_spans.len / sizeof *sp;
  const uint8_t *raw = s->hdr_raw.data;
  s->hdr_list.len = 0;
  int bad_cl = 0;
  for (size_t i = 0; i < count; i++) {
    const uint8_t *v = raw + sp[i].value_off;
    size_t vl = sp[i].value_len;
    switch (sp[i].token) {
    case NGHTTP3_QPACK_TOKEN__METHOD: req.method = v, req.method_len = vl; continue;
    case NGHTTP3_QPACK_TOKEN__SCHEME: req.scheme = v, req.scheme_len = vl; continue;
    case NGHTTP3_QPACK_TOKEN__AUTHORITY: req.authority = v, req.authority_len = vl; continue;
    case NGHTTP3_QPACK_TOKEN__PATH: req.path = v, req.path_len = vl; continue;
    case NGHTTP3_QPACK_TOKEN__PROTOCOL: req.protocol = v, req.protocol_len = vl; continue;
    case NGHTTP3_QPACK_TOKEN_CONTENT_LENGTH:
      if (parse_u64(v, vl, &req.content_length) != 0) bad_cl = 1;
      req.has_content_length = 1;
      break;
    default: break;
    }
    if (sp[i].name_len && raw[sp[i].name_off] == ':') continue; /* :protocol etc. */
    pp_h2_header h = {raw + sp[i].name_off, sp[i].name_len, v, vl};
    pp_buf_append(&s->hdr_list, &h, sizeof h);
  }
  req.headers = (const pp_h2_header *)s->hdr_list.data;
  req.header_count = s->hdr_list.len / sizeof(pp_h2_header);
  s->head = req.method_len == 4 && memcmp(req.method, "HEAD", 4) == 0;
  s->has_cl = req.has_content_length, s->cl = req.content_length;
  if (s->hdr_too_big) {
    answer(c, s, 431);
    if (srv->cb->on_answered) srv->cb->on_answered(c, &req, 431);
    return 0;
  }
  if (bad_cl || !req.method || !req.path) { /* nghttp3 checks these; belt and braces */
    answer(c, s, 400);
    if (srv->cb->on_answered) srv->cb->on_answered(c, &req, 400);
    return 0;
  }
  int connect = req.method_len == 7 && memcmp(req.method, "CONNECT", 7) == 0;
  if (connect && !req.protocol) { /* a plain CONNECT: no proxying here */
    answer(c, s, 501);
    if (srv->cb->on_answered) srv->cb->on_answered(c, &req, 501);
    return 0;
  }
  if (!connect && req.has_content_length && req.content_length > srv->cfg.limits.max_body_bytes) {
    answer(c, s, 413);
    if (srv->cb->on_answered) srv->cb->on_answered(c, &req, 413);
    return 0;
  }
  void *sd = NULL;
  s->owned = 1; /* the owner may respond from inside on_request (then return 0) */
  int status = srv->cb->on_request ? srv->cb->on_request(c, &req, &sd) : 503;
  if (status != 0) {
    s->owned = 0; /* it answered and refused as well: answer() resets the stream */
    answer(c, s, status >= 400 && status <= 599 ? status : 500);
    return 0;
  }
  s->owner_data = sd;
  s->tunnel = connect;
  srv->stats.streams_accepted++;
  return 0;
}

/* Hands len body bytes (already counted in body_unconsumed) to the owner, or gives their credit
 * back when nobody takes them any more. */
static void give_body(pp_h3_conn *c, pp_h3_stream *s, const uint8_t *data, size_t len) {
  if (!s->owned || s->detached || c->state != CS_OPEN) {
    s->body_unconsumed -= len;
    extend_credit(c, s->id, len);
    return;
  }
  if (c->srv->cb->on_body && c->srv->cb->on_body(c, s->id, s->owner_data, data, len) != 0) {
    s->want_reset = 1;
    s->reset_code = s->close_code = NGHTTP3_H3_INTERNAL_ERROR;
    s->detach_pending = 1;
    pp_h3__conn_owe_work(c);
  }
}

static void deliver_pend(pp_h3_conn *c, pp_h3_stream *s) {
  if (!s->body_pend.len) return;
  give_body(c, s, s->body_pend.data, s->body_pend.len);
  s->body_pend.len = 0;
}

void pp_h3__conn_deliver_body(pp_h3_conn *c) {
  c->body_pend = 0;
  for (pp_h3_stream *s = c->streams; s; s = s->next)
    deliver_pend(c, s);
}

/* Body bytes arrive a STREAM frame (one datagram, ~1.2 KB) at a time. Handed up one by one,
 * each would become a REQUEST BODY frame and a 64 KiB write chunk of its own on the worker
 * link (the worker write bound counts bytes, not chunks: 1 MiB of 1.2 KB pieces held 57 MB),
 * and cost the worker a frame each. So they are gathered per stream up to body_piece and handed
 * up when the next bytes would not fit, at the end of the body, or when the owner's batch ends
 * (flush_all with deliver). Gathered bytes count as unconsumed: the stream window bounds them. */
static int on_recv_data(nghttp3_conn *h3, int64_t stream_id, const uint8_t *data, size_t datalen,
                        void *conn_user_data, void *stream_user_data) {
  (void)h3, (void)stream_user_data;
  pp_h3_conn *c = conn_user_data;
  pp_h3_stream *s = stream_of(c, stream_id);
  if (!s || !s->owned || s->detached) {
    extend_credit(c, stream_id, datalen);
    return 0;
  }
  s->body_received += datalen;
  if (s->body_received > c->srv->cfg.limits.max_body_bytes && !s->tunnel) {
    extend_credit(c, stream_id, datalen);
    pp_h3__stream_detach(c, s, NGHTTP3_H3_REQUEST_CANCELLED);
    answer(c, s, 413);
    return 0;
  }
  s->body_unconsumed += datalen;
  size_t piece = c->srv->cfg.limits.body_piece;
  if (s->body_pend.len && s->body_pend.len + datalen > piece) deliver_pend(c, s);
  if (!s->body_pend.len && datalen >= piece) {
    give_body(c, s, data, datalen);
    return 0;
  }
  pp_buf_append(&s->body_pend, data, datalen);
  c->body_pend = 1;
  pp_h3__conn_mark(c);
  return 0;
}

static int on_deferred_consume(nghttp3_conn *h3, int64_t stream_id, size_t consumed,
                               void *conn_user_data, void *stream_user_data) {
  (void)h3, (void)stream_user_data;
  extend_credit(conn_user_data, stream_id, consumed);
  return 0;
}

static int on_end_stream(nghttp3_conn *h3, int64_t stream_id, void *conn_user_data,
                         void *stream_user_data) {
  (void)h3, (void)stream_user_data;
  pp_h3_conn *c = conn_user_data;
  pp_h3_stream *s = stream_of(c, stream_id);
  if (s) deliver_pend(c, s); /* the last piece before the end */
  if (!s || !s->owned || s->detached || s->req_fin) return 0;
  if (c->srv->cb->on_body_end && c->srv->cb->on_body_end(c, stream_id, s->owner_data) != 0) {
    s->want_reset = 1;
    s->reset_code = s->close_code = NGHTTP3_H3_INTERNAL_ERROR;
    s->detach_pending = 1;
    pp_h3__conn_owe_work(c);
  }
  return 0;
}

static int on_h3_stream_close(nghttp3_conn *h3, int64_t stream_id, uint64_t app_error_code,
                              void *conn_user_data, void *stream_user_data) {
  (void)h3, (void)stream_user_data;
  pp_h3_conn *c = conn_user_data;
  pp_h3_stream *s = stream_of(c, stream_id);
  if (!s) return 0;
  uint64_t code = app_error_code == NGHTTP3_H3_NO_ERROR ? 0 : app_error_code;
  pp_h3__stream_detach(c, s, s->detach_pending ? s->close_code : code);
  s->body_pend.len = 0; /* gathered, never handed up: counted in body_unconsumed */
  /* Body bytes the owner never consumed still hold connection credit. */
  if (s->body_unconsumed) ngtcp2_conn_extend_max_offset(c->qc, s->body_unconsumed);
  pp_h3__stream_free(c, s);
  return 0;
}

static int on_acked_stream_data(nghttp3_conn *h3, int64_t stream_id, uint64_t datalen,
                                void *conn_user_data, void *stream_user_data) {
  (void)h3, (void)stream_user_data;
  pp_h3_conn *c = conn_user_data;
  pp_h3_stream *s = stream_of(c, stream_id);
  if (!s) return 0;
  ack_body(c, s, datalen);
  if (s->owned && !s->detached && c->srv->cb->on_stream_acked)
    c->srv->cb->on_stream_acked(c, stream_id, s->owner_data, (size_t)(s->written - s->acked));
  return 0;
}

static int on_stop_sending(nghttp3_conn *h3, int64_t stream_id, uint64_t app_error_code,
                           void *conn_user_data, void *stream_user_data) {
  (void)h3, (void)stream_user_data;
  pp_h3_conn *c = conn_user_data;
  pp_h3_stream *s = stream_of(c, stream_id);
  if (!s) return 0;
  s->want_shut_rd = 1;
  s->shut_rd_code = app_error_code;
  pp_h3__conn_owe_work(c);
  return 0;
}

static int on_reset_stream(nghttp3_conn *h3, int64_t stream_id, uint64_t app_error_code,
                           void *conn_user_data, void *stream_user_data) {
  (void)h3, (void)stream_user_data;
  pp_h3_conn *c = conn_user_data;
  pp_h3_stream *s = stream_of(c, stream_id);
  if (!s) return 0;
  s->want_shut_wr = 1;
  s->shut_wr_code = app_error_code;
  pp_h3__conn_owe_work(c);
  return 0;
}

/* Every connection's nghttp3 callbacks (setup_h3 in h3_quic.c). */
const nghttp3_callbacks pp_h3__request_callbacks = {
    .acked_stream_data = on_acked_stream_data,
    .stream_close = on_h3_stream_close,
    .recv_data = on_recv_data,
    .deferred_consume = on_deferred_consume,
    .begin_headers = on_begin_headers,
    .recv_header = on_recv_header,
    .end_headers = on_end_headers,
    .stop_sending = on_stop_sending,
    .end_stream = on_end_stream,
    .reset_stream = on_reset_stream,
};

/* The client aborted a request stream (RESET_STREAM or STOP_SENDING): the owner learns at once
 * with the client's code; the rest of the stream is torn down outside ngtcp2. */
void pp_h3__stream_peer_abort(pp_h3_conn *c, int64_t stream_id, uint64_t code) {
  pp_h3_stream *s = stream_of(c, stream_id);
  if (!s) return;
  c->srv->stats.peer_resets++;
  pp_h3__stream_detach(c, s, code);
  if (!s->want_reset) {
    s->want_reset = 1;
    s->reset_code = NGHTTP3_H3_REQUEST_CANCELLED;
    pp_h3__conn_owe_work(c);
  }
}

/* ---- responses ---- */

/* Appends one field (offsets now, pointers once scratch is final). */
static void add_field(pp_h3_server *srv, size_t name_off, size_t name_len, const uint8_t *v,
                      size_t vlen) {
  size_t value_off = pp_fields_value(&srv->scratch, v, vlen);
  nghttp3_nv nv;
  make_nv(&nv, (const uint8_t *)(uintptr_t)name_off, name_len,
          (const uint8_t *)(uintptr_t)value_off, srv->scratch.len - value_off);
  pp_buf_append(&srv->nvbuf, &nv, sizeof nv);
}

static void add_field_cb(void *data, size_t name_off, size_t name_len, const uint8_t *v,
                         size_t vlen) {
  add_field(data, name_off, name_len, v, vlen);
}

static void start_fields(pp_h3_server *srv, int status) {
  char status_text[4];
  snprintf(status_text, sizeof status_text, "%03d", status);
  srv->scratch.len = srv->nvbuf.len = 0;
  pp_buf_append(&srv->scratch, ":status", 7);
  add_field(srv, 0, 7, (const uint8_t *)status_text, 3);
}

static nghttp3_nv *finish_fields(pp_h3_server *srv, size_t *nvlen) {
  nghttp3_nv *nva = (nghttp3_nv *)srv->nvbuf.data;
  *nvlen = srv->nvbuf.len / sizeof(nghttp3_nv);
  for (size_t i = 0; i < *nvlen; i++) {
    nva[i].name = srv->scratch.data + (uintptr_t)nva[i].name;
    nva[i].value = srv->scratch.data + (uintptr_t)nva[i].value;
  }
  return nva;
}

/* Submits the fields in srv->nvbuf/scratch (or just :status and a text type when empty). */
static int submit_head(pp_h3_conn *c, pp_h3_stream *s, int status, int no_body) {
  pp_h3_server *srv = c->srv;
  if (srv->nvbuf.len == 0) {
    start_fields(srv, status);
    size_t off = srv->scratch.len;
    pp_buf_append(&srv->scratch, "content-type", 12);
    add_field(srv, off, 12, (const uint8_t *)"text/plain", 10);
    if (srv->cfg.date) {
      off = srv->scratch.len;
      pp_buf_append(&srv->scratch, "date", 4);
      add_field(srv, off, 4, (const uint8_t *)srv->cfg.date, strlen(srv->cfg.date));
    }
  }
  size_t nvlen;
  nghttp3_nv *nva = finish_fields(srv, &nvlen);
  if (s->head || status == 204 || status == 304) no_body = 1;
  s->responded = 1;
  s->no_body = no_body != 0;
  if (s->no_body) s->ended = 1;
  static const nghttp3_data_reader dr = {read_data};
  int rv = nghttp3_conn_submit_response(c->h3, s->id, nva, nvlen, s->no_body ? NULL : &dr);
  if (rv != 0) {
    s->responded = 0;
    return PP_H3_ESTREAM;
  }
  pp_h3__conn_want(c);
  return 0;
}

static pp_h3_stream *owned_stream(pp_h3_conn *c, int64_t id) {
  if (c->state != CS_OPEN) return NULL;
  pp_h3_stream *s = stream_of(c, id);
  return s && s->owned && !s->detached ? s : NULL;
}

int pp_h3_respond(pp_h3_conn *c, int64_t stream_id, int status, const pp_h2_header *pairs, size_t n,
                  int no_body) {
  pp_h3_stream *s = owned_stream(c, stream_id);
  if (!s || s->responded) return PP_H3_ESTREAM;
  if (status < 100 || status > 599 || status == 101) return PP_H3_EINVAL;
  pp_h3_server *srv = c->srv;
  start_fields(srv, status);
  pp_fields_from_pairs(&srv->scratch, pairs, n, add_field_cb, srv);
  if (status < 200) {
    size_t nvlen;
    nghttp3_nv *nva = finish_fields(srv, &nvlen);
    int rv = nghttp3_conn_submit_info(c->h3, stream_id, nva, nvlen);
    pp_h3__conn_want(c);
    return rv == 0 ? 0 : PP_H3_ESTREAM;
  }
  int rv = submit_head(c, s, status, no_body);
  if (rv == 0 && s->no_body) {
    /* Bytes sent before the head are discarded with a bodiless response. */
    s->sent = s->written;
  }
  return rv;
}

static void resume(pp_h3_conn *c, pp_h3_stream *s) {
  pp_h3__conn_want(c);
  if (!s->responded || !s->wouldblock) return;
  s->wouldblock = 0;
  s->want_resume = 1;
  pp_h3__conn_owe_work(c);
}

int pp_h3_send_data(pp_h3_conn *c, int64_t stream_id, const uint8_t *data, size_t len) {
  pp_h3_stream *s = owned_stream(c, stream_id);
  if (!s || s->ended) return s && s->no_body ? 0 : PP_H3_ESTREAM;
  const pp_h3_limits *l = &c->srv->cfg.limits;
  if ((s->written - s->acked) + len > l->max_stream_unacked ||
      c->unacked + len > l->max_conn_unacked)
    return PP_H3_EFULL;
  append_body(c, s, data, len);
  resume(c, s);
  return 0;
}

size_t pp_h3_send_room(pp_h3_conn *c, int64_t stream_id) {
  pp_h3_stream *s = owned_stream(c, stream_id);
  if (!s || s->ended) return 0;
  const pp_h3_limits *l = &c->srv->cfg.limits;
  size_t held = (size_t)(s->written - s->acked);
  if (held >= l->max_stream_unacked || c->unacked >= l->max_conn_unacked) return 0;
  size_t a = l->max_stream_unacked - held, b = l->max_conn_unacked - c->unacked;
  return a < b ? a : b;
}

int pp_h3_send_end(pp_h3_conn *c, int64_t stream_id) {
  pp_h3_stream *s = owned_stream(c, stream_id);
  if (!s) return PP_H3_ESTREAM;
  if (s->ended) return 0;
  s->ended = 1;
  resume(c, s);
  return 0;
}

size_t pp_h3_stream_pending(pp_h3_conn *c, int64_t stream_id) {
  pp_h3_stream *s = stream_of(c, stream_id);
  return s ? (size_t)(s->written - s->acked) : 0;
}

size_t pp_h3_pending_total(pp_h3_conn *c) {
  return c->unacked;
}

void pp_h3_consume(pp_h3_conn *c, int64_t stream_id, size_t n) {
  pp_h3_stream *s = stream_of(c, stream_id);
  if (!s || c->state != CS_OPEN) return;
  uint64_t given = s->body_unconsumed - s->body_pend.len; /* handed up, not yet consumed */
  if (n > given) n = (size_t)given;
  if (!n) return;
  s->body_unconsumed -= n;
  extend_credit(c, stream_id, n);
  pp_h3__conn_want(c);
}

void pp_h3_set_stream_data(pp_h3_conn *c, int64_t stream_id, void *stream_data) {
  pp_h3_stream *s = owned_stream(c, stream_id);
  if (s) s->owner_data = stream_data;
}

void pp_h3_reset(pp_h3_conn *c, int64_t stream_id, uint64_t error_code) {
  pp_h3_stream *s = owned_stream(c, stream_id);
  if (!s) return;
  s->want_reset = 1;
  s->reset_code = error_code;
  s->detach_pending = 1;
  s->close_code = error_code;
  pp_h3__conn_owe_work(c);
}

size_t pp_h3_stream_count(const pp_h3_conn *c) {
  return c->stream_count;
}
