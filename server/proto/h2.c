/* The HTTP/2 session over nghttp2 1.52. See h2.h for the contract.
 *
 * nghttp2 does the framing, HPACK, flow-control accounting and the RFC 9113 checks; this file
 * adds what a server in front of slow Ruby workers needs: request header blocks collected into
 * one per-connection buffer (header blocks never interleave, RFC 9113 §4.3), request bodies
 * whose windows open only when the owner consumes them, a per-stream response buffer read by a
 * deferred data source, the refusals the session answers itself, and counters.
 *
 * Rule kept throughout: nothing here calls nghttp2_session_mem_recv/send/consume/resume_data
 * from inside an nghttp2 callback. Callbacks only record (stream flags, h->release_conn,
 * h->refuse) or use nghttp2_submit_*, which nghttp2 allows there; flush() does the rest once the
 * outermost pp_h2_feed / pp_h2_output is back from nghttp2. */
#include "server/proto/h2.h"

#include "server/proto/h2_int.h"

#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <string.h>

#include "server/proto/http_status.h"

#define MAX_OUTBOUND_ACK  1000 /* queued SETTINGS/PING acks before the peer counts as flooding */
#define MAX_SETTINGS      32   /* entries per SETTINGS frame */
#define MAX_CONTINUATIONS 8    /* CONTINUATION frames per header block */
#define DEFAULT_WINDOW    65535u
#define MAX_WINDOW        0x7fffffffu
#define CLIENT_MAGIC_LEN  24
#define FRAME_HEADER_LEN  9

typedef struct hdr_span {
  uint32_t name_off, name_len, value_off, value_len;
} hdr_span;

const char *pp_h2_strerror(int err) {
  switch (err) {
  case 0: return "success";
  case PP_H2_EPROTO: return "HTTP/2 connection error caused by the peer";
  case PP_H2_EFLOOD: return "the peer flooded the connection";
  case PP_H2_ESTREAM: return "no such stream, or the stream does not allow this";
  case PP_H2_EINVAL: return "invalid argument";
  case PP_H2_ELIBRARY: return "nghttp2 failed";
  case PP_H2_EREENTER: return "called from a session callback";
  case PP_H2_EFINISHED: return "the session has already failed";
  default: return "unknown h2 error";
  }
}

void pp_h2_limits_default(pp_h2_limits *l) {
  l->max_concurrent_streams = 100;
  l->max_header_list = 65536;
  l->max_body_bytes = 64ull << 20;
  l->stream_window = 256u << 10;
  l->conn_window = 1u << 20;
  l->reset_burst = 1000;
  l->reset_rate = 33;
  l->connect_protocol = 1;
  l->date = NULL;
}

static pp_h2 *of(void *user_data) {
  return (pp_h2 *)user_data;
}

pp_h2_stream *pp_h2__stream_of(pp_h2 *h, int32_t stream_id) {
  if (stream_id <= 0 || !h->session) return NULL;
  return nghttp2_session_get_stream_user_data(h->session, stream_id);
}

/* A stream record from the free list (or a new one); linked into h->live. */
static pp_h2_stream *stream_new(pp_h2 *h, int32_t id) {
  pp_h2_stream *s = h->free;
  if (s) {
    h->free = s->next;
  } else {
    s = calloc(1, sizeof *s);
    if (!s) {
      fprintf(stderr, "puma-plus: out of memory (h2 stream)\n");
      abort();
    }
    pp_buf_init(&s->resp);
  }
  pp_buf keep = s->resp;
  memset(s, 0, sizeof *s);
  s->resp = keep;
  s->resp.len = 0;
  s->id = id;
  s->next = h->live;
  if (h->live) h->live->prev = s;
  h->live = s;
  return s;
}

#define KEEP_BUFFER_MAX (256u << 10) /* a larger response buffer is not kept for reuse */

static void stream_free(pp_h2 *h, pp_h2_stream *s) {
  if (s->resp.cap > KEEP_BUFFER_MAX) pp_buf_dispose(&s->resp);
  if (s->prev)
    s->prev->next = s->next;
  else
    h->live = s->next;
  if (s->next) s->next->prev = s->prev;
  s->prev = NULL;
  s->next = h->free;
  h->free = s;
}

/* The owner lets go of the stream: on_close, and its unconsumed body bytes go back to the
 * connection window (the stream's own window no longer matters). */
static void detach(pp_h2 *h, pp_h2_stream *s, uint32_t error_code) {
  if (!s->owned) return;
  s->owned = 0;
  s->unconsumed = s->consume_pending = 0; /* their connection credit went back on receipt */
  if (h->cb->on_close) h->cb->on_close(h, s->id, s->owner_data, error_code);
  s->owner_data = NULL;
}

void pp_h2__owe_work(pp_h2 *h) {
  h->pending_work = 1;
}

/* Deferred work, done outside nghttp2's callbacks. Returns 0 or PP_H2_ELIBRARY. */
static int flush(pp_h2 *h) {
  if (h->depth) return 0;
  int rv = 0;
  if (h->pending_work) {
    h->pending_work = 0;
    for (pp_h2_stream *s = h->live; s; s = s->next) {
      if (s->consume_pending) {
        size_t n = (size_t)s->consume_pending;
        s->consume_pending = 0;
        if (nghttp2_session_consume_stream(h->session, s->id, n) != 0) rv = PP_H2_ELIBRARY;
      }
      if (s->resume) {
        s->resume = 0;
        if (s->deferred) {
          s->deferred = 0;
          nghttp2_session_resume_data(h->session, s->id); /* fails only if not deferred */
        }
      }
    }
  }
  if (h->release_conn) {
    uint64_t n = h->release_conn;
    h->release_conn = 0;
    if (nghttp2_session_consume_connection(h->session, (size_t)n) != 0) rv = PP_H2_ELIBRARY;
  }
  for (uint32_t i = 0; i < h->refuse_count; i++) {
    /* nghttp2 ignored this HEADERS (our GOAWAY was out): the stream was never opened. */
    if (!nghttp2_session_find_stream(h->session, h->refuse[i]))
      nghttp2_submit_rst_stream(h->session, NGHTTP2_FLAG_NONE, h->refuse[i],
                                NGHTTP2_REFUSED_STREAM);
  }
  h->refuse_count = 0;
  return rv;
}

/* ---- the session's own answers ---- */

static void nv_add(nghttp2_nv *nv, const char *name, const char *value, size_t value_len) {
  nv->name = (uint8_t *)name;
  nv->namelen = strlen(name);
  nv->value = (uint8_t *)value;
  nv->valuelen = value_len;
  nv->flags = NGHTTP2_NV_FLAG_NONE;
}

/* Answers the stream with a short text/plain response; the owner never hears of it (a caller
 * that had handed it to the owner detaches first). */
static void answer(pp_h2 *h, pp_h2_stream *s, int status) {
  s->answered = 1;
  s->responded = 1;
  s->ended = 1;
  h->stats.session_answers++;
  char body[96], status_text[8], length_text[24];
  int body_len = snprintf(body, sizeof body, "%d %s\n", status, pp_http_reason_phrase(status));
  snprintf(status_text, sizeof status_text, "%03d", status);
  snprintf(length_text, sizeof length_text, "%d", body_len);
  s->resp.len = s->resp_off = 0;
  if (!s->head) pp_buf_append(&s->resp, body, (size_t)body_len);
  nghttp2_nv nva[5];
  nv_add(&nva[0], ":status", status_text, strlen(status_text));
  nv_add(&nva[1], "content-type", "text/plain; charset=utf-8", 25);
  nv_add(&nva[2], "content-length", length_text, strlen(length_text));
  size_t nv = 3;
  if (status == 503) nv_add(&nva[nv++], "retry-after", "1", 1); /* admission control's refusal */
  if (h->limits.date) nv_add(&nva[nv++], "date", h->limits.date, strlen(h->limits.date));
  nghttp2_data_provider prd = {.source.ptr = s, .read_callback = pp_h2__read_response};
  if (nghttp2_submit_response(h->session, s->id, nva, nv, s->head ? NULL : &prd) != 0)
    nghttp2_submit_rst_stream(h->session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_INTERNAL_ERROR);
}

/* ---- request header blocks ---- */

static int span_is(const pp_h2 *h, uint32_t off, uint32_t len, const char *text) {
  size_t n = strlen(text);
  return len == n && memcmp(h->hdr_raw.data + off, text, n) == 0;
}

static int parse_u64(const uint8_t *p, size_t n, uint64_t *out) {
  uint64_t v = 0;
  if (n == 0) return -1;
  for (size_t i = 0; i < n; i++) {
    if (p[i] < '0' || p[i] > '9') return -1;
    if (v > (UINT64_MAX - 9) / 10) return -1;
    v = v * 10 + (uint64_t)(p[i] - '0');
  }
  *out = v;
  return 0;
}

static void handle_request(pp_h2 *h, pp_h2_stream *s, const nghttp2_frame *frame) {
  if (s->answered) return;
  pp_h2_request req;
  memset(&req, 0, sizeof req);
  req.stream_id = s->id;
  req.end_stream = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
  const hdr_span *spans = (const hdr_span *)h->hdr_spans.data;
  size_t count = h->hdr_spans.len / sizeof(hdr_span);
  h->hdr_list.len = 0;
  pp_buf_reserve(&h->hdr_list, (count ? count : 1) * sizeof(pp_h2_header));
  pp_h2_header *list = (pp_h2_header *)h->hdr_list.data;
  const uint8_t *raw = h->hdr_raw.data;
  for (size_t i = 0; i < count; i++) {
    const hdr_span *sp = &spans[i];
    const uint8_t *name = raw + sp->name_off, *value = raw + sp->value_off;
    if (sp->name_len && name[0] == ':') {
      /* nghttp2 already refused unknown, duplicate and misplaced pseudo-headers. */
      if (span_is(h, sp->name_off, sp->name_len, ":method")) {
        req.method = value;
        req.method_len = sp->value_len;
      } else if (span_is(h, sp->name_off, sp->name_len, ":scheme")) {
        req.scheme = value;
        req.scheme_len = sp->value_len;
      } else if (span_is(h, sp->name_off, sp->name_len, ":authority")) {
        req.authority = value;
        req.authority_len = sp->value_len;
      } else if (span_is(h, sp->name_off, sp->name_len, ":path")) {
        req.path = value;
        req.path_len = sp->value_len;
      } else if (span_is(h, sp->name_off, sp->name_len, ":protocol")) {
        req.protocol = value; /* only with the setting on: else nghttp2 reset the stream */
        req.protocol_len = sp->value_len;
      }
      continue;
    }
    if (span_is(h, sp->name_off, sp->name_len, "content-length")) {
      /* nghttp2 checked the syntax and the duplicates. */
      if (parse_u64(value, sp->value_len, &req.content_length) == 0) req.has_content_length = 1;
    }
    pp_h2_header *o = &list[req.header_count++];
    o->name = name;
    o->name_len = sp->name_len;
    o->value = value;
    o->value_len = sp->value_len;
  }
  req.headers = list;
  s->head = req.method_len == 4 && memcmp(req.method, "HEAD", 4) == 0;
  if (s->too_large) { /* the pseudo-headers come first, so HEAD is usually known */
    answer(h, s, 431);
    if (h->cb->on_answered) h->cb->on_answered(h, &req, 431);
    return;
  }
  int connect = req.method_len == 7 && memcmp(req.method, "CONNECT", 7) == 0;
  if (connect && !req.protocol) { /* a plain CONNECT: no proxying here */
    answer(h, s, 501);
    if (h->cb->on_answered) h->cb->on_answered(h, &req, 501);
    return;
  }
  if (!connect && req.has_content_length && req.content_length > h->limits.max_body_bytes) {
    answer(h, s, 413);
    if (h->cb->on_answered) h->cb->on_answered(h, &req, 413);
    return;
  }
  void *stream_data = NULL;
  s->owned = 1; /* the owner may respond from inside on_request */
  int status = h->cb->on_request ? h->cb->on_request(h, &req, &stream_data) : 500;
  if (status != 0) {
    s->owned = 0;
    s->owner_data = NULL;
    if (s->responded) { /* it answered and refused: nothing sane to send but a reset */
      s->answered = 1;
      nghttp2_submit_rst_stream(h->session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_INTERNAL_ERROR);
      return;
    }
    s->resp.len = s->resp_off = 0;
    answer(h, s, status >= 400 && status <= 599 ? status : 500);
    return;
  }
  if (stream_data) s->owner_data = stream_data; /* else pp_h2_set_stream_data's, or NULL */
  s->tunnel = connect;
  h->stats.streams_accepted++;
}

static void body_end(pp_h2 *h, pp_h2_stream *s) {
  if (!s->owned || s->answered || s->over_body) return;
  if (h->cb->on_body_end && h->cb->on_body_end(h, s->id, s->owner_data) != 0)
    nghttp2_submit_rst_stream(h->session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_INTERNAL_ERROR);
}

/* ---- nghttp2 callbacks ---- */

static ssize_t send_cb(nghttp2_session *session, const uint8_t *data, size_t length, int flags,
                       void *user_data) {
  (void)session, (void)flags;
  pp_h2 *h = of(user_data);
  if (!h->out || h->out->len >= h->out_max) return NGHTTP2_ERR_WOULDBLOCK;
  size_t room = h->out_max - h->out->len;
  size_t n = length < room ? length : room;
  pp_buf_append(h->out, data, n);
  h->stats.bytes_out += n;
  return (ssize_t)n;
}

#define OPENED_IDS 1024 /* odd stream ids remembered below max_client_id */

static unsigned opened_bit(int32_t id) {
  return (unsigned)(id >> 1) % OPENED_IDS;
}

/* RFC 9113 5.1.1: a HEADERS for a lower stream id that was never opened (skipped, so
 * implicitly closed) is a connection error PROTOCOL_ERROR. nghttp2 ignores it (it cannot tell
 * it from a closed stream), leaving the client's request unanswered. Ids further back than
 * OPENED_IDS are still ignored. */
static int on_begin_frame(nghttp2_session *session, const nghttp2_frame_hd *hd, void *user_data) {
  (void)session;
  pp_h2 *h = of(user_data);
  int32_t id = hd->stream_id;
  if (hd->type != NGHTTP2_HEADERS || !(id & 1) || id >= h->max_client_id) return 0;
  if ((h->max_client_id - id) / 2 >= OPENED_IDS) return 0;
  unsigned b = opened_bit(id);
  if (h->opened[b / 8] & (1u << (b % 8))) return 0;
  h->stats.protocol_errors++;
  return NGHTTP2_ERR_CALLBACK_FAILURE;
}

static void mark_opened(pp_h2 *h, int32_t id) {
  if (id <= h->max_client_id) return;
  int32_t from = h->max_client_id + 2;
  if ((id - from) / 2 >= OPENED_IDS) from = id - 2 * (OPENED_IDS - 1);
  for (int32_t k = from; k < id; k += 2) {
    unsigned b = opened_bit(k);
    h->opened[b / 8] &= (uint8_t) ~(1u << (b % 8));
  }
  unsigned b = opened_bit(id);
  h->opened[b / 8] |= (uint8_t)(1u << (b % 8));
  h->max_client_id = id;
}

static int on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *user_data) {
  pp_h2 *h = of(user_data);
  if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
  mark_opened(h, frame->hd.stream_id);
  h->hdr_raw.len = h->hdr_spans.len = 0;
  h->hdr_size = 0;
  pp_h2_stream *s = stream_new(h, frame->hd.stream_id);
  nghttp2_session_set_stream_user_data(session, frame->hd.stream_id, s);
  h->stats.streams_opened++;
  if (h->goaway_sent && frame->hd.stream_id > h->goaway_last) {
    /* Our GOAWAY is queued but not yet sent, so nghttp2 opened the stream: refuse it, as the
     * client will assume from the GOAWAY's last stream id anyway. */
    s->answered = 1;
    nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_REFUSED_STREAM);
  }
  return 0;
}

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *user_data) {
  (void)flags;
  pp_h2 *h = of(user_data);
  if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
  pp_h2_stream *s = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
  if (!s || s->answered || s->too_large) return 0;
  h->hdr_size += namelen + valuelen + 32; /* RFC 9113 §6.5.2 */
  if (h->hdr_size > h->limits.max_header_list) {
    s->too_large = 1; /* keep decoding (HPACK state), answer 431 at the end of the block */
    return 0;
  }
  hdr_span sp = {(uint32_t)h->hdr_raw.len, (uint32_t)namelen, 0, (uint32_t)valuelen};
  pp_buf_append(&h->hdr_raw, name, namelen);
  sp.value_off = (uint32_t)h->hdr_raw.len;
  pp_buf_append(&h->hdr_raw, value, valuelen);
  pp_buf_append(&h->hdr_spans, &sp, sizeof sp);
  return 0;
}

/* A field nghttp2 would silently drop (a forbidden character, whitespace around a value):
 * RFC 9113 §8.2.1 makes the request malformed, so reset the stream with PROTOCOL_ERROR. */
static int on_invalid_header(nghttp2_session *session, const nghttp2_frame *frame,
                             const uint8_t *name, size_t namelen, const uint8_t *value,
                             size_t valuelen, uint8_t flags, void *user_data) {
  (void)session, (void)frame, (void)name, (void)namelen, (void)value, (void)valuelen, (void)flags;
  of(user_data)->stats.protocol_errors++;
  return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
}

static int on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *user_data) {
  pp_h2 *h = of(user_data);
  h->last_recv_type = frame->hd.type;
  pp_h2_stream *s = frame->hd.stream_id
                        ? nghttp2_session_get_stream_user_data(session, frame->hd.stream_id)
                        : NULL;
  int end_stream = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
  switch (frame->hd.type) {
  case NGHTTP2_HEADERS:
    if (!s) break;
    if (end_stream) s->remote_closed = 1;
    if (frame->headers.cat == NGHTTP2_HCAT_REQUEST)
      handle_request(h, s, frame);
    else if (end_stream)
      body_end(h, s); /* trailers end the body; their fields are dropped */
    break;
  case NGHTTP2_DATA:
    if (s && end_stream) {
      s->remote_closed = 1;
      body_end(h, s);
    }
    break;
  case NGHTTP2_RST_STREAM:
    h->stats.peer_resets++;
    if (++h->resets_since_output > h->limits.reset_burst) {
      h->flood_detected = 1;
      return NGHTTP2_ERR_CALLBACK_FAILURE; /* mem_recv stops here; pp_h2_feed ends it */
    }
    break;
  case NGHTTP2_GOAWAY: h->stats.goaway_received++; break;
  default: break;
  }
  return 0;
}

static int on_data_chunk_recv(nghttp2_session *session, uint8_t flags, int32_t stream_id,
                              const uint8_t *data, size_t len, void *user_data) {
  (void)flags;
  pp_h2 *h = of(user_data);
  pp_h2_stream *s = nghttp2_session_get_stream_user_data(session, stream_id);
  if (!s || !s->owned || s->answered || s->over_body) {
    h->release_conn += len; /* nobody will consume it: give the connection window back */
    return 0;
  }
  s->body_received += len;
  if (s->body_received > h->limits.max_body_bytes && !s->tunnel) {
    s->over_body = 1;
    h->release_conn += len;
    if (!s->responded) {
      detach(h, s, NGHTTP2_CANCEL);
      answer(h, s, 413);
    } else {
      nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, stream_id, NGHTTP2_CANCEL);
    }
    return 0;
  }
  s->unconsumed += len;
  /* The connection window is given back at once and only the stream's waits for the owner:
   * otherwise streams whose worker has not taken their bytes yet (queued uploads) would hold
   * the whole connection window and stall the running streams' bodies behind them. What the
   * owner holds is bounded by the stream window per stream. */
  h->release_conn += len;
  if (h->cb->on_body && h->cb->on_body(h, stream_id, s->owner_data, data, len) != 0)
    nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, stream_id, NGHTTP2_INTERNAL_ERROR);
  return 0;
}

static int on_stream_close(nghttp2_session *session, int32_t stream_id, uint32_t error_code,
                           void *user_data) {
  pp_h2 *h = of(user_data);
  pp_h2_stream *s = nghttp2_session_get_stream_user_data(session, stream_id);
  if (!s) return 0;
  detach(h, s, error_code);
  nghttp2_session_set_stream_user_data(session, stream_id, NULL);
  stream_free(h, s);
  return 0;
}

static int on_frame_send(nghttp2_session *session, const nghttp2_frame *frame, void *user_data) {
  pp_h2 *h = of(user_data);
  switch (frame->hd.type) {
  case NGHTTP2_RST_STREAM: {
    uint32_t code = frame->rst_stream.error_code;
    pp_h2_stream *s = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
    if (code == NGHTTP2_REFUSED_STREAM)
      h->stats.refused_streams++;
    else if (code != NGHTTP2_NO_ERROR && !(s && s->local_reset))
      h->stats.stream_errors++;
    break;
  }
  case NGHTTP2_GOAWAY: {
    uint32_t code = frame->goaway.error_code;
    if (code == NGHTTP2_NO_ERROR) {
      h->local_goaway = 0;
      break;
    }
    if (h->err) break; /* counted where it was detected */
    /* nghttp2 ended the connection itself. Debian's rapid-reset backport answers an empty
     * token bucket with GOAWAY(INTERNAL_ERROR) right after the RST_STREAM that emptied it. */
    int flood = code == NGHTTP2_ENHANCE_YOUR_CALM ||
                (code == NGHTTP2_INTERNAL_ERROR && h->last_recv_type == NGHTTP2_RST_STREAM);
    if (flood)
      h->stats.flood_closes++;
    else
      h->stats.connection_errors++;
    h->err = flood ? PP_H2_EFLOOD : PP_H2_EPROTO;
    break;
  }
  case NGHTTP2_HEADERS:
  case NGHTTP2_DATA:
    if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) {
      /* RFC 9113 §8.1: a complete response before the complete request is followed by
       * RST_STREAM(NO_ERROR), so the client stops sending a body nobody reads. */
      pp_h2_stream *s = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
      if (s && !s->remote_closed)
        nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_NO_ERROR);
    }
    break;
  default: break;
  }
  return 0;
}

static int on_invalid_frame_recv(nghttp2_session *session, const nghttp2_frame *frame,
                                 int lib_error_code, void *user_data) {
  (void)session, (void)frame, (void)lib_error_code;
  of(user_data)->stats.protocol_errors++;
  return 0;
}

/* ---- life cycle ---- */

static int session_new(pp_h2 *h, const pp_h2_callbacks *cb, const pp_h2_limits *limits,
                       void *data) {
  memset(h, 0, sizeof *h);
  h->cb = cb;
  if (limits)
    h->limits = *limits;
  else
    pp_h2_limits_default(&h->limits);
  h->data = data;
  h->scan_skip = CLIENT_MAGIC_LEN;
  pp_buf_init(&h->hdr_raw);
  pp_buf_init(&h->hdr_spans);
  pp_buf_init(&h->hdr_list);
  pp_buf_init(&h->scratch);
  pp_buf_init(&h->nvbuf);
  const pp_h2_limits *l = &h->limits;
  if (l->stream_window > MAX_WINDOW || l->conn_window > MAX_WINDOW ||
      l->conn_window < DEFAULT_WINDOW || l->max_concurrent_streams == 0)
    return PP_H2_EINVAL;

  nghttp2_session_callbacks *cbs;
  nghttp2_option *opt;
  if (nghttp2_session_callbacks_new(&cbs) != 0) return PP_H2_ELIBRARY;
  if (nghttp2_option_new(&opt) != 0) {
    nghttp2_session_callbacks_del(cbs);
    return PP_H2_ELIBRARY;
  }
  nghttp2_session_callbacks_set_send_callback(cbs, send_cb);
  nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, on_begin_headers);
  nghttp2_session_callbacks_set_on_begin_frame_callback(cbs, on_begin_frame);
  nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
  nghttp2_session_callbacks_set_on_invalid_header_callback(cbs, on_invalid_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk_recv);
  nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
  nghttp2_session_callbacks_set_on_frame_send_callback(cbs, on_frame_send);
  nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(cbs, on_invalid_frame_recv);

  nghttp2_option_set_no_auto_window_update(opt, 1);
  nghttp2_option_set_max_outbound_ack(opt, MAX_OUTBOUND_ACK);
  nghttp2_option_set_max_settings(opt, MAX_SETTINGS);
  nghttp2_option_set_max_continuations(opt, MAX_CONTINUATIONS);
  nghttp2_option_set_stream_reset_rate_limit(opt, l->reset_burst, l->reset_rate);

  nghttp2_mem mem = pp_h2__mem(h); /* copied by nghttp2 */
  int rv = nghttp2_session_server_new3(&h->session, cbs, h, opt, &mem);
  nghttp2_session_callbacks_del(cbs);
  nghttp2_option_del(opt);
  if (rv != 0) {
    h->session = NULL;
    return PP_H2_ELIBRARY;
  }
  nghttp2_settings_entry iv[4] = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, l->max_concurrent_streams},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, l->stream_window},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE,
       l->max_header_list > UINT32_MAX ? UINT32_MAX : (uint32_t)l->max_header_list},
      {NGHTTP2_SETTINGS_ENABLE_CONNECT_PROTOCOL, 1},
  };
  rv = nghttp2_submit_settings(h->session, NGHTTP2_FLAG_NONE, iv, l->connect_protocol ? 4 : 3);
  if (rv == 0 && l->conn_window > DEFAULT_WINDOW)
    rv = nghttp2_session_set_local_window_size(h->session, NGHTTP2_FLAG_NONE, 0,
                                               (int32_t)l->conn_window);
  if (rv != 0) {
    nghttp2_session_del(h->session);
    h->session = NULL;
    return PP_H2_ELIBRARY;
  }
  return 0;
}

static void buffers_dispose(pp_h2 *h) {
  pp_h2__mem_dispose(h); /* after nghttp2_session_del: nghttp2's blocks are all back */
  pp_buf_dispose(&h->hdr_raw);
  pp_buf_dispose(&h->hdr_spans);
  pp_buf_dispose(&h->hdr_list);
  pp_buf_dispose(&h->scratch);
  pp_buf_dispose(&h->nvbuf);
}

int pp_h2_init(pp_h2 *h, const pp_h2_callbacks *cb, const pp_h2_limits *limits, void *data) {
  int rv = session_new(h, cb, limits, data);
  if (rv != 0) buffers_dispose(h);
  return rv;
}

static int b64url_value(uint8_t c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '-') return 62;
  if (c == '_') return 63;
  return -1;
}

/* Decodes token68 base64url (RFC 7540 §3.2.1: no padding; "=" padding tolerated at the end)
 * into out (at least len * 3 / 4 bytes). Returns the decoded length or -1. */
static ssize_t b64url_decode(const uint8_t *in, size_t len, uint8_t *out) {
  while (len && in[len - 1] == '=')
    len--;
  if (len % 4 == 1) return -1;
  size_t n = 0;
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < len; i++) {
    int v = b64url_value(in[i]);
    if (v < 0) return -1;
    acc = (acc << 6) | (uint32_t)v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[n++] = (uint8_t)(acc >> bits);
    }
  }
  return (ssize_t)n;
}

int pp_h2_init_upgrade(pp_h2 *h, const pp_h2_callbacks *cb, const pp_h2_limits *limits, void *data,
                       const uint8_t *http2_settings, size_t len, int head_request) {
  int rv = session_new(h, cb, limits, data);
  if (rv != 0) {
    buffers_dispose(h);
    return rv;
  }
  pp_buf_reserve(&h->scratch, len + 4);
  ssize_t n = b64url_decode(http2_settings, len, h->scratch.data);
  if (n < 0 ||
      nghttp2_session_upgrade2(h->session, h->scratch.data, (size_t)n, head_request, NULL) != 0) {
    nghttp2_session_del(h->session);
    h->session = NULL;
    buffers_dispose(h);
    return PP_H2_EINVAL;
  }
  mark_opened(h, 1); /* the upgrading request is stream 1 (RFC 7540 section 3.2) */
  pp_h2_stream *s = stream_new(h, 1);
  nghttp2_session_set_stream_user_data(h->session, 1, s);
  s->owned = 1;
  s->remote_closed = 1;
  s->head = head_request != 0;
  h->stats.streams_opened++;
  h->stats.streams_accepted++;
  return 0;
}

void pp_h2_set_stream_data(pp_h2 *h, int32_t stream_id, void *stream_data) {
  pp_h2_stream *s = pp_h2__stream_of(h, stream_id);
  if (s && s->owned) s->owner_data = stream_data;
}

void pp_h2_dispose(pp_h2 *h) {
  if (!h->session || h->depth) return;
  for (pp_h2_stream *s = h->live; s; s = s->next)
    detach(h, s, NGHTTP2_CANCEL);
  while (h->live)
    stream_free(h, h->live);
  while (h->free) {
    pp_h2_stream *s = h->free;
    h->free = s->next;
    pp_buf_dispose(&s->resp);
    free(s);
  }
  nghttp2_session_del(h->session);
  h->session = NULL;
  buffers_dispose(h);
}

int pp_h2_is_preface(const uint8_t *data, size_t len) {
  size_t n = len < CLIENT_MAGIC_LEN ? len : CLIENT_MAGIC_LEN;
  if (memcmp(data, NGHTTP2_CLIENT_MAGIC, n) != 0) return -1;
  return len >= CLIENT_MAGIC_LEN ? 1 : 0;
}

/* Follows frame boundaries over the input so that, after our GOAWAY, a HEADERS for a later
 * stream is queued for REFUSED_STREAM once it has been read whole (nghttp2 has then seen it and
 * ignored it; resetting before that would reset an idle stream). Returns how many of the len
 * bytes it took: all of them, or, once either side has sent a GOAWAY, up to the end of the
 * first frame that completes (so that the caller can ask nghttp2 after each frame whether it
 * still reads: see pp_h2_feed). */
static size_t scan_frames(pp_h2 *h, const uint8_t *data, size_t len) {
  size_t i = 0;
  while (i < len) {
    if (h->scan_skip) {
      size_t n = len - i < h->scan_skip ? len - i : h->scan_skip;
      h->scan_skip -= (uint32_t)n;
      i += n;
      continue;
    }
    if (h->scan_left == 0 && h->scan_hdr_len < FRAME_HEADER_LEN) {
      h->scan_hdr[h->scan_hdr_len++] = data[i++];
      if (h->scan_hdr_len < FRAME_HEADER_LEN) continue;
      const uint8_t *p = h->scan_hdr;
      h->scan_left = (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
      int32_t id =
          (int32_t)(((uint32_t)p[5] << 24 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 8 | p[8]) &
                    0x7fffffffu);
      h->scan_refuse = 0;
      if (p[3] == NGHTTP2_HEADERS && h->goaway_sent && (id & 1) && id > h->goaway_last &&
          id > h->refuse_upto)
        h->scan_refuse = id;
    } else {
      size_t n = len - i < h->scan_left ? len - i : h->scan_left;
      h->scan_left -= (uint32_t)n;
      i += n;
    }
    if (h->scan_left == 0 && h->scan_hdr_len == FRAME_HEADER_LEN) {
      /* the frame is complete */
      if (h->scan_refuse && h->refuse_count < sizeof h->refuse / sizeof h->refuse[0]) {
        h->refuse[h->refuse_count++] = h->scan_refuse;
        h->refuse_upto = h->scan_refuse;
      }
      if (h->scan_hdr[3] == NGHTTP2_GOAWAY) h->scan_goaway = 1;
      h->scan_refuse = 0;
      h->scan_hdr_len = 0;
      if (h->goaway_sent || h->scan_goaway) break;
    }
  }
  return i;
}

/* Gives nghttp2 len bytes, every frame header whole: its CONTINUATION limit counts once per
 * call that enters the frame-header state, so a header cut across reads would count several
 * times. A trailing incomplete frame header (scan_frames has just read its first bytes) is held
 * back until it is complete. Returns nghttp2's result (< 0: a connection error). */
static ssize_t recv_whole_headers(pp_h2 *h, const uint8_t *data, size_t len) {
  ssize_t rv = 0;
  size_t off = 0;
  if (h->hold_len) {
    size_t need = FRAME_HEADER_LEN - h->hold_len, k = len < need ? len : need;
    memcpy(h->hold + h->hold_len, data, k);
    h->hold_len += (uint32_t)k;
    off = k;
    if (h->hold_len == FRAME_HEADER_LEN) {
      h->hold_len = 0;
      h->depth++;
      rv = nghttp2_session_mem_recv(h->session, h->hold, FRAME_HEADER_LEN);
      h->depth--;
    }
  }
  size_t tail = 0;
  if (!h->hold_len && !h->scan_skip && h->scan_left == 0 && h->scan_hdr_len > 0 &&
      h->scan_hdr_len < FRAME_HEADER_LEN)
    tail = h->scan_hdr_len; /* the last bytes of data */
  if (rv >= 0 && len - off > tail) {
    h->depth++;
    rv = nghttp2_session_mem_recv(h->session, data + off, len - off - tail);
    h->depth--;
  }
  if (rv >= 0 && tail && off < len) {
    memcpy(h->hold, data + len - tail, tail);
    h->hold_len = (uint32_t)tail;
  }
  return rv;
}

ssize_t pp_h2_feed(pp_h2 *h, const uint8_t *data, size_t len) {
  if (h->depth) return PP_H2_EREENTER;
  if (h->err) return PP_H2_EFINISHED;
  if (len == 0) return 0;
  /* Once nghttp2 stops reading (a GOAWAY was sent or received and no stream is open), it
   * ignores every later call's input but would still process the rest of the call in which
   * that happened. So after a GOAWAY the input goes in frame by frame and, as soon as nghttp2
   * no longer reads, the rest is ignored here too: the outcome does not depend on how the
   * bytes were split (FUZZING.md, finding 7). */
  ssize_t rv = 0;
  size_t done = 0;
  while (done < len && !h->input_ignored) {
    size_t seg = scan_frames(h, data + done, len - done);
    rv = recv_whole_headers(h, data + done, seg);
    done += seg;
    if (rv < 0) break;
    if ((h->goaway_sent || h->scan_goaway) && !nghttp2_session_want_read(h->session))
      h->input_ignored = 1;
  }
  h->stats.bytes_in += len;
  if (rv < 0) {
    int flood = rv == NGHTTP2_ERR_FLOODED || h->flood_detected;
    h->err = flood ? PP_H2_EFLOOD : PP_H2_EPROTO;
    if (flood)
      h->stats.flood_closes++;
    else
      h->stats.connection_errors++;
    nghttp2_session_terminate_session(h->session,
                                      flood ? NGHTTP2_ENHANCE_YOUR_CALM : NGHTTP2_PROTOCOL_ERROR);
    h->refuse_count = 0;
    flush(h);
    return h->err;
  }
  if (flush(h) != 0) return PP_H2_ELIBRARY;
  return (ssize_t)len;
}

ssize_t pp_h2_output(pp_h2 *h, pp_buf *out, size_t max) {
  if (h->depth) return PP_H2_EREENTER;
  size_t before = out->len;
  h->resets_since_output = 0;
  h->out = out;
  h->out_max = max;
  /* Frames queued by the deferred work (WINDOW_UPDATE after a stream closed, a resumed data
   * source, RST_STREAM) go out in the same call; a few rounds always suffice. */
  for (int round = 0; round < 4 && out->len < max; round++) {
    h->depth++;
    int rv = nghttp2_session_send(h->session);
    h->depth--;
    int had_work = h->pending_work || h->release_conn || h->refuse_count;
    int frv = flush(h);
    if (rv != 0 || frv != 0) {
      h->out = NULL;
      return PP_H2_ELIBRARY;
    }
    if (!had_work) break;
  }
  h->out = NULL;
  return (ssize_t)(out->len - before);
}

int pp_h2_want_write(pp_h2 *h) {
  return h->session && nghttp2_session_want_write(h->session);
}

int pp_h2_finished(pp_h2 *h) {
  if (!h->session) return 1;
  if (nghttp2_session_want_write(h->session)) return 0;
  if (h->err) return 1;
  return !nghttp2_session_want_read(h->session);
}
