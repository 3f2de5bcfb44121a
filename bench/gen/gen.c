/* The open-loop generator: pacing, connection pool, HTTP/1.1 and HTTP/2 sessions, TLS,
 * outcomes. See gen.h for the contract. Single-threaded; everything runs on one private uv
 * loop.
 *
 * Layers of a connection, bottom up: TCP (libuv) -> optional TLS (OpenSSL over two memory
 * BIOs: socket bytes are written into the read BIO, records to send are drained from the write
 * BIO into the connection's output buffer) -> h1 (llhttp, one request at a time) or h2 (an
 * nghttp2 client session fed with nghttp2_session_mem_recv and drained with
 * nghttp2_session_mem_send). One uv_write is in flight per connection; bytes produced meanwhile
 * collect in `out` and go in the next write. nghttp2 callbacks only record what happened; the
 * engine is driven again only after nghttp2_session_mem_recv has returned. */
#include "bench/gen/gen.h"
#include "bench/gen/gen_int.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <llhttp.h>
#include <nghttp2/nghttp2.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <uv.h>

const char *pb_error_name(int err) {
  switch (err) {
  case 0: return "";
  case PB_ERR_BAD_HTTP: return "bad_http";
  case PB_ERR_TLS: return "tls";
  case PB_ERR_ALPN: return "alpn";
  case PB_ERR_H2_NO_SETTINGS: return "h2_no_settings";
  case PB_ERR_H2_PROTOCOL: return "h2_protocol";
  case PB_ERR_H2_GOAWAY: return "h2_goaway";
  case PB_ERR_H2_RESET: return "h2_reset";
  case PB_ERR_QUIC: return "quic";
  case PB_ERR_H3_PROTOCOL: return "h3_protocol";
  case PB_ERR_H3_RESET: return "h3_reset";
  case PB_ERR_H3_GOAWAY: return "h3_goaway";
  default: return uv_err_name(err);
  }
}

const char *pb_proto_label(pb_proto proto, int tls) {
  if (proto == PB_PROTO_H3) return "h3";
  if (proto == PB_PROTO_H2) return tls ? "h2+tls" : "h2";
  return tls ? "h1+tls" : "h1";
}

const char *pb_outcome_name(pb_outcome o) {
  switch (o) {
  case PB_PENDING: return "pending";
  case PB_OK: return "ok";
  case PB_SHED: return "shed";
  case PB_HTTP_ERROR: return "http_error";
  case PB_TIMEOUT: return "timeout";
  case PB_CONN_ERROR: return "conn_error";
  case PB_CANCELLED: return "cancelled";
  default: return "?";
  }
}

uint64_t gen_now_rel(gen *g) {
  uint64_t n = uv_hrtime();
  return n > g->t0 ? n - g->t0 : 0;
}

static void conn_became_idle(conn *c);
static void maybe_open(gen *g);
static void h2_pump(conn *c);
static void h2_fill(conn *c);
static int body_pump(conn *c);

void gen_finish_request(gen *g, uint32_t i, pb_outcome o, uint16_t status, int err) {
  pb_result *r = &g->results[i];
  if (r->outcome != PB_PENDING) return;
  r->outcome = (uint8_t)o;
  r->error = (int16_t)err;
  r->status = status;
  r->done_ns = gen_now_rel(g);
  g->completed++;
}

pb_outcome gen_outcome_of_status(unsigned status) {
  if (status >= 200 && status <= 299) return PB_OK;
  if (status == 503) return PB_SHED;
  return PB_HTTP_ERROR;
}

/* Keeps the first connection-level failure, in words, for the caller. */
void gen_note_error(gen *g, const char *fmt, const char *a, const char *b) {
  if (!g->counters || g->counters->first_error[0]) return;
  snprintf(g->counters->first_error, sizeof g->counters->first_error, fmt, a ? a : "", b ? b : "");
}

static int bytes_append(bytes *b, const void *data, size_t n) {
  if (b->len + n > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + n)
      cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) return -1;
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->len, data, n);
  b->len += n;
  return 0;
}

/* ---- connections ---- */

void gen_conn_release(conn *c) {
  gen *g = c->g;
  free(c->out.p);
  free(c->wbuf.p);
  free(c->streams);
  c->out = c->wbuf = (bytes){0};
  c->streams = NULL;
  c->state = C_FREE;
  c->next_free = g->free_head;
  g->free_head = (int32_t)(c - g->conns);
  g->open_conns--;
  /* A connection that died (timeout, reset, server close) is replaced while arrivals wait. */
  if (!g->stopping) maybe_open(g);
  gen_maybe_finish(g);
}

static void on_close(uv_handle_t *h) {
  gen_conn_release(h->data);
}

static void idle_remove(gen *g, conn *c) {
  uint32_t slot = (uint32_t)(c - g->conns);
  for (uint32_t k = 0; k < g->idle_len; k++) {
    if (g->idle[k] == slot) {
      g->idle[k] = g->idle[--g->idle_len];
      return;
    }
  }
}

void gen_conn_close(conn *c) {
  gen *g = c->g;
  if (c->state == C_CLOSING || c->state == C_FREE) return;
  if (c->state == C_IDLE) idle_remove(g, c);
  if (c->state == C_CONNECTING) g->connecting--;
  if (c->state == C_BUSY) g->in_flight--;
  /* h2: every stream still in flight fails with the connection. */
  int cause = c->close_cause ? c->close_cause : (c->goaway ? PB_ERR_H2_GOAWAY : UV_EOF);
  for (uint32_t k = 0; k < c->n_streams; k++) {
    uint32_t i = c->streams[k];
    g->req_slot[i] = UINT32_MAX;
    g->in_flight--;
    gen_finish_request(g, i, PB_CONN_ERROR, 0, cause);
  }
  c->n_streams = 0;
  if (c->q) { /* h3: the QUIC engine closes its own handles, then releases the slot */
    c->state = C_CLOSING;
    gen_h3_close(c);
    return;
  }
  if (c->h2) {
    nghttp2_session_del(c->h2);
    c->h2 = NULL;
  }
  if (c->ssl) {
    SSL_free(c->ssl); /* frees both memory BIOs */
    c->ssl = NULL;
  }
  c->state = C_CLOSING;
  c->req = -1;
  uv_close((uv_handle_t *)&c->tcp, on_close);
}

/* The request in flight on `c` (h1) or every stream on it (h2) failed with `o`/`err`; the
 * connection is unusable. */
static void conn_fail(conn *c, pb_outcome o, int err) {
  if (c->req >= 0) gen_finish_request(c->g, (uint32_t)c->req, o, 0, err);
  if (!c->close_cause) c->close_cause = err;
  gen_conn_close(c);
  gen_maybe_finish(c->g);
}

/* A connection failed before it could carry a request (connect refused, TLS, ALPN, no h2
 * SETTINGS): nothing is in flight on it, so the failure is charged to the oldest waiting
 * arrival. A dead or wrong server thus produces one error per arrival instead of an endless
 * reconnect loop. */
void gen_conn_fail_setup(conn *c, int err) {
  gen *g = c->g;
  uint32_t i;
  if (gen_pending_pop(g, &i)) gen_finish_request(g, i, PB_CONN_ERROR, 0, err);
  c->close_cause = err;
  gen_conn_close(c);
  gen_maybe_finish(g);
}

static void on_write(uv_write_t *w, int status);

/* Hands `out` to libuv when no write is in flight. */
static void conn_flush(conn *c) {
  if (c->writing || c->out.len == 0 || c->state == C_CLOSING || c->state == C_FREE) return;
  bytes t = c->wbuf;
  c->wbuf = c->out;
  c->out = t;
  c->out.len = 0;
  uv_buf_t buf = uv_buf_init(c->wbuf.p, (unsigned)c->wbuf.len);
  c->write_req.data = c;
  c->writing = true;
  int rc = uv_write(&c->write_req, (uv_stream_t *)&c->tcp, &buf, 1, on_write);
  if (rc < 0) {
    c->writing = false;
    conn_fail(c, PB_CONN_ERROR, rc);
  }
}

static void on_write(uv_write_t *w, int status) {
  conn *c = w->data;
  c->writing = false;
  c->wbuf.len = 0;
  if (c->state == C_CLOSING || c->state == C_FREE) return;
  if (status < 0) {
    /* h1 keeps its old rule: an idle connection's write error shows up as a read error. */
    if (c->state == C_CONNECTING) { /* TLS or h2 setup: charged like any setup failure */
      gen_conn_fail_setup(c, status);
    } else if (!c->h2 && c->state == C_BUSY && c->req >= 0 &&
               gen_kind_body(c->g, c->g->results[c->req].kind) > 0) {
      /* An upload cut by the server (it answered 413 or 503 and closed without reading the
       * rest): its answer may still be readable, so wait for the read side, briefly. */
      c->body_left = 0;
      c->out.len = 0;
      c->write_error = status;
      c->write_error_ns = gen_now_rel(c->g);
    } else if (c->h2 || c->state == C_BUSY) {
      conn_fail(c, PB_CONN_ERROR, status);
    }
    return;
  }
  if (c->h2) h2_pump(c);
  if (!c->h2 && c->state == C_BUSY && c->body_left > 0 && body_pump(c) < 0) {
    conn_fail(c, PB_CONN_ERROR, c->ssl ? PB_ERR_TLS : UV_ENOMEM);
    return;
  }
  conn_flush(c);
}

/* Moves the TLS records OpenSSL produced into the output buffer. */
static int tls_drain(conn *c) {
  BIO *wbio = SSL_get_wbio(c->ssl);
  size_t n;
  while ((n = BIO_ctrl_pending(wbio)) > 0) {
    char tmp[16384];
    int got = BIO_read(wbio, tmp, (int)(n < sizeof tmp ? n : sizeof tmp));
    if (got <= 0) break;
    if (bytes_append(&c->out, tmp, (size_t)got) < 0) return -1;
  }
  return 0;
}

/* Queues application bytes for the socket (encrypted under TLS). The caller flushes. */
static int conn_queue(conn *c, const void *data, size_t n) {
  if (!c->ssl) return bytes_append(&c->out, data, n);
  /* With memory BIOs a write after the handshake never wants I/O: the BIO grows. */
  if (n && SSL_write(c->ssl, data, (int)n) <= 0) return -1;
  return tls_drain(c);
}

/* Queues the next pieces of the upload in flight, up to BODY_QUEUED bytes. */
static int body_pump(conn *c) {
  while (c->body_left > 0 && c->out.len < BODY_QUEUED) {
    uint32_t n = c->body_left < BODY_PIECE ? c->body_left : BODY_PIECE;
    if (conn_queue(c, c->g->body, n) < 0) return -1;
    c->body_left -= n;
  }
  return 0;
}

static void conn_send(conn *c, uint32_t i) {
  gen *g = c->g;
  pb_result *r = &g->results[i];
  uint32_t kind = g->sched->arrivals[i].kind;
  c->state = C_BUSY;
  c->req = i;
  c->got_bytes = false;
  c->message_done = false;
  r->reused = c->served > 0;
  r->conn_id = c->id;
  g->in_flight++;
  r->sent_ns = gen_now_rel(g);
  c->body_left = gen_kind_body(g, kind);
  c->write_error = 0;
  if (conn_queue(c, g->requests[kind], g->request_lens[kind]) < 0 || body_pump(c) < 0) {
    conn_fail(c, PB_CONN_ERROR, c->ssl ? PB_ERR_TLS : UV_ENOMEM);
    return;
  }
  conn_flush(c);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  conn *c = h->data;
  *buf = uv_buf_init(c->g->readbuf, sizeof c->g->readbuf);
}

static int on_message_complete(llhttp_t *p) {
  conn *c = p->data;
  c->message_done = true;
  return HPE_PAUSED; /* handled after llhttp_execute returns, outside the parser */
}

static void after_message(conn *c) {
  gen *g = c->g;
  /* A response before the whole body was written leaves the connection mid-request: close it
   * (the rest of the body is never sent). */
  bool keep = llhttp_should_keep_alive(&c->parser) && c->body_left == 0 && !c->write_error;
  unsigned status = c->parser.status_code;
  c->body_left = 0;
  c->write_error = 0;
  llhttp_resume(&c->parser);
  if (c->req >= 0) {
    gen_finish_request(g, (uint32_t)c->req, gen_outcome_of_status(status), (uint16_t)status, 0);
    c->req = -1;
  }
  g->in_flight--;
  c->served++;
  c->state = C_OPEN;
  if (keep)
    conn_became_idle(c);
  else
    gen_conn_close(c);
  gen_maybe_finish(g);
}

/* h1: the peer closed (or a read failed) with `err`. */
static void h1_eof(conn *c, int err) {
  if (c->state == C_BUSY && err == UV_EOF && c->got_bytes) {
    /* A close-delimited body ends at EOF. llhttp_finish runs on_message_complete, which
     * pauses the parser, so HPE_PAUSED is its success here. */
    llhttp_errno_t e = llhttp_finish(&c->parser);
    if ((e == HPE_OK || e == HPE_PAUSED) && c->message_done) {
      after_message(c);
      if (c->state != C_CLOSING && c->state != C_FREE) gen_conn_close(c);
      return;
    }
  }
  if (c->state == C_BUSY)
    conn_fail(c, PB_CONN_ERROR, err);
  else
    gen_conn_close(c);
}

/* h1: response bytes (plaintext). */
static void h1_input(conn *c, const char *p, size_t left) {
  if (c->state != C_BUSY) { /* bytes nobody asked for: protocol error, drop the connection */
    gen_conn_close(c);
    return;
  }
  c->got_bytes = true;
  while (left > 0 && c->state == C_BUSY) {
    llhttp_errno_t e = llhttp_execute(&c->parser, p, left);
    if (e == HPE_PAUSED) {
      const char *stop = llhttp_get_error_pos(&c->parser);
      size_t used = stop ? (size_t)(stop - p) : left;
      p += used;
      left -= used;
      after_message(c);
      if (left > 0 && c->state != C_BUSY) { /* more bytes than one response: pipelining? */
        if (c->state != C_CLOSING && c->state != C_FREE) gen_conn_close(c);
      }
      return;
    }
    if (e != HPE_OK) {
      conn_fail(c, PB_CONN_ERROR, PB_ERR_BAD_HTTP);
      return;
    }
    left = 0;
  }
}

/* ---- h2 ---- */

static void h2_input(conn *c, const char *p, size_t n);
static void h2_eof(conn *c, int err);

static int h2_on_header(nghttp2_session *s, const nghttp2_frame *frame, const uint8_t *name,
                        size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                        void *user_data) {
  (void)flags;
  conn *c = user_data;
  if (frame->hd.type != NGHTTP2_HEADERS || namelen != 7 || memcmp(name, ":status", 7) != 0)
    return 0;
  uintptr_t tag = (uintptr_t)nghttp2_session_get_stream_user_data(s, frame->hd.stream_id);
  if (!tag) return 0;
  unsigned status = 0;
  for (size_t k = 0; k < valuelen && k < 3; k++)
    status = status * 10 + (unsigned)(value[k] - '0');
  if (status >= 200) c->g->results[tag - 1].status = (uint16_t)status; /* scratch until close */
  return 0;
}

static int h2_on_frame_recv(nghttp2_session *s, const nghttp2_frame *frame, void *user_data) {
  (void)s;
  conn *c = user_data;
  gen *g = c->g;
  if (frame->hd.type == NGHTTP2_SETTINGS && !(frame->hd.flags & NGHTTP2_FLAG_ACK)) {
    c->h2_settings_seen = true;
    c->h2_settings_new = true;
  } else if (frame->hd.type == NGHTTP2_GOAWAY) {
    c->goaway = true;
    if (g->counters) g->counters->goaways++;
    char code[64];
    snprintf(code, sizeof code, "%s", nghttp2_http2_strerror(frame->goaway.error_code));
    gen_note_error(g, "the server sent GOAWAY (%s)%s", code,
                   c->h2_settings_seen ? "" : " before SETTINGS: it does not accept h2 here");
  }
  return 0;
}

void gen_stream_remove(conn *c, uint32_t i) {
  for (uint32_t k = 0; k < c->n_streams; k++) {
    if (c->streams[k] == i) {
      c->streams[k] = c->streams[--c->n_streams];
      return;
    }
  }
}

static int h2_on_stream_close(nghttp2_session *s, int32_t stream_id, uint32_t error_code,
                              void *user_data) {
  conn *c = user_data;
  gen *g = c->g;
  uintptr_t tag = (uintptr_t)nghttp2_session_get_stream_user_data(s, stream_id);
  if (!tag) return 0; /* cancelled by us (timeout) and already accounted for */
  uint32_t i = (uint32_t)(tag - 1);
  gen_stream_remove(c, i);
  g->req_slot[i] = UINT32_MAX;
  g->in_flight--;
  uint16_t status = g->results[i].status;
  g->results[i].status = 0;
  if (error_code == NGHTTP2_NO_ERROR && status >= 200)
    gen_finish_request(g, i, gen_outcome_of_status(status), status, 0);
  else
    gen_finish_request(g, i, PB_CONN_ERROR, 0,
                       error_code == NGHTTP2_REFUSED_STREAM || c->goaway ? PB_ERR_H2_GOAWAY
                                                                         : PB_ERR_H2_RESET);
  return 0;
}

/* Sends what the session has to send, then writes. */
static void h2_pump(conn *c) {
  if (!gen_conn_alive(c) || !c->h2) return;
  while (c->out.len < (1u << 20)) { /* a soft cap; on_write pumps again */
    const uint8_t *data;
    ssize_t n = nghttp2_session_mem_send(c->h2, &data);
    if (n < 0) {
      gen_note_error(c->g, "nghttp2: %s%s", nghttp2_strerror((int)n), "");
      conn_fail(c, PB_CONN_ERROR, PB_ERR_H2_PROTOCOL);
      return;
    }
    if (n == 0) break;
    if (conn_queue(c, data, (size_t)n) < 0) {
      conn_fail(c, PB_CONN_ERROR, c->ssl ? PB_ERR_TLS : UV_ENOMEM);
      return;
    }
  }
  conn_flush(c);
}

/* h2 upload: the next piece of the body of the stream's request, from the shared buffer. */
static ssize_t h2_body_read(nghttp2_session *s, int32_t stream_id, uint8_t *buf, size_t length,
                            uint32_t *data_flags, nghttp2_data_source *source, void *user_data) {
  (void)source;
  conn *c = user_data;
  gen *g = c->g;
  uintptr_t tag = (uintptr_t)nghttp2_session_get_stream_user_data(s, stream_id);
  if (!tag) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* cancelled: reset the stream */
  uint32_t i = (uint32_t)(tag - 1);
  uint32_t total = gen_kind_body(g, g->results[i].kind), off = g->req_body_off[i];
  size_t n = total - off;
  if (n > length) n = length;
  if (n > BODY_PIECE) n = BODY_PIECE;
  memcpy(buf, g->body, n);
  g->req_body_off[i] = off + (uint32_t)n;
  if (g->req_body_off[i] == total) *data_flags |= NGHTTP2_DATA_FLAG_EOF;
  return (ssize_t)n;
}

/* Opens a stream for arrival `i` on `c` (which has room). */
static void h2_submit(conn *c, uint32_t i) {
  gen *g = c->g;
  pb_result *r = &g->results[i];
  uint32_t kind = g->sched->arrivals[i].kind;
  const char *path = g->sched->paths[kind];
  uint32_t body = gen_kind_body(g, kind);
  char clen[16];
  snprintf(clen, sizeof clen, "%u", body);
#define NV(n, v) {(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), NGHTTP2_NV_FLAG_NONE}
  nghttp2_nv nva[] = {NV(":method", body ? "POST" : "GET"),
                      NV(":scheme", c->ssl ? "https" : "http"),
                      NV(":authority", g->authority),
                      NV(":path", path),
                      NV("user-agent", "pp-bench"),
                      NV("content-length", clen),
                      NV("content-type", "application/octet-stream")};
#undef NV
  nghttp2_data_provider provider = {.read_callback = h2_body_read};
  r->reused = c->served > 0;
  r->conn_id = c->id;
  r->sent_ns = gen_now_rel(g);
  if (body) g->req_body_off[i] = 0;
  int32_t sid = nghttp2_submit_request(c->h2, NULL, nva, body ? 7 : 5, body ? &provider : NULL,
                                       (void *)(uintptr_t)(i + 1));
  if (sid < 0) {
    gen_finish_request(g, i, PB_CONN_ERROR, 0, PB_ERR_H2_PROTOCOL);
    return;
  }
  c->served++;
  c->streams[c->n_streams++] = i;
  g->req_slot[i] = (uint32_t)(c - g->conns);
  g->req_stream[i] = sid;
  g->in_flight++;
  if (g->counters && c->n_streams > g->counters->h2_peak_streams)
    g->counters->h2_peak_streams = c->n_streams;
}

static bool h2_has_room(const conn *c) {
  return c->state == C_OPEN && c->h2 && !c->goaway && c->n_streams < c->h2_cap;
}

/* Moves waiting arrivals onto `c` while it has room. */
static void h2_fill(conn *c) {
  gen *g = c->g;
  uint32_t i;
  while (h2_has_room(c) && gen_pending_pop(g, &i)) {
    if (gen_now_rel(g) >= g->results[i].intended_ns + g->timeout_ns) {
      gen_finish_request(g, i, PB_TIMEOUT, 0, 0);
      continue;
    }
    h2_submit(c, i);
  }
}

/* The least loaded usable h2 connection, NULL when all are full or not ready. */
static conn *h2_pick(gen *g) {
  conn *best = NULL;
  for (uint32_t k = 0; k < g->conn_high; k++) {
    conn *c = &g->conns[(g->rr + k) % g->conn_high];
    if (h2_has_room(c) && (!best || c->n_streams < best->n_streams)) best = c;
  }
  if (best) g->rr = (uint32_t)(best - g->conns) + 1;
  return best;
}

/* The transport is up (TCP, and TLS if any): start the h2 session with our SETTINGS. */
static void h2_start(conn *c) {
  gen *g = c->g;
  if (nghttp2_session_client_new(&c->h2, g->h2_callbacks, c) != 0) {
    c->h2 = NULL;
    gen_conn_fail_setup(c, UV_ENOMEM);
    return;
  }
  nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
                                 {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1u << 20}};
  nghttp2_submit_settings(c->h2, NGHTTP2_FLAG_NONE, iv, sizeof iv / sizeof iv[0]);
  h2_pump(c);
}

/* After the engine consumed input: become usable on the server's SETTINGS, take waiting
 * arrivals, send, and close a connection that is done (GOAWAY drained, or the session ended). */
static void h2_after_input(conn *c) {
  gen *g = c->g;
  if (!gen_conn_alive(c)) return;
  if (c->state == C_CONNECTING && c->h2_settings_seen) {
    uint32_t max =
        nghttp2_session_get_remote_settings(c->h2, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
    if (g->counters &&
        (g->counters->h2_server_max_streams == 0 || max < g->counters->h2_server_max_streams))
      g->counters->h2_server_max_streams = max;
    c->h2_cap = max < PB_H2_STREAM_CAP ? max : PB_H2_STREAM_CAP;
    c->h2_alloc = c->h2_cap;
    c->streams = calloc(c->h2_alloc ? c->h2_alloc : 1, sizeof *c->streams);
    if (!c->streams) {
      gen_conn_fail_setup(c, UV_ENOMEM);
      return;
    }
    g->connecting--;
    c->state = C_OPEN;
    c->h2_settings_new = false;
  } else if (c->state == C_OPEN && c->h2_settings_new) {
    /* The server changed its limit: follow it down, and up as far as the setup allocation. */
    uint32_t max =
        nghttp2_session_get_remote_settings(c->h2, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
    c->h2_cap = max < c->h2_alloc ? max : c->h2_alloc;
    c->h2_settings_new = false;
  }
  h2_fill(c);
  h2_pump(c);
  if (!gen_conn_alive(c)) return;
  if ((c->goaway && c->n_streams == 0) ||
      (!nghttp2_session_want_read(c->h2) && !nghttp2_session_want_write(c->h2))) {
    if (c->state == C_CONNECTING) {
      gen_conn_fail_setup(c, c->goaway ? PB_ERR_H2_GOAWAY : PB_ERR_H2_NO_SETTINGS);
      return;
    }
    gen_conn_close(c);
  }
}

static void h2_input(conn *c, const char *p, size_t n) {
  gen *g = c->g;
  /* Before nghttp2 sees anything, make sure the server speaks h2: its first frame must be
   * SETTINGS (type 0x4, the fourth byte). An HTTP/1 server answers "HTTP/1.1 400 ...". */
  while (c->preface_seen < 4 && n > 0) {
    size_t take = 4 - c->preface_seen < n ? 4 - c->preface_seen : n;
    memcpy(c->preface + c->preface_seen, p, take);
    c->preface_seen += (uint32_t)take;
    if (c->preface_seen == 4) {
      if (memcmp(c->preface, "HTTP", 4) == 0) {
        gen_note_error(g,
                       "the server answered the h2 preface in HTTP/1.x: it does not speak h2%s%s",
                       c->ssl ? "" : " with prior knowledge (h2c)", "");
        gen_conn_fail_setup(c, PB_ERR_H2_NO_SETTINGS);
        return;
      }
      if (c->preface[3] != NGHTTP2_SETTINGS) {
        gen_note_error(g,
                       "the server's first bytes are not an h2 SETTINGS frame: it does not speak "
                       "h2%s%s",
                       c->ssl ? "" : " with prior knowledge (h2c)", "");
        gen_conn_fail_setup(c, PB_ERR_H2_NO_SETTINGS);
        return;
      }
    }
    break; /* the bytes themselves are fed to nghttp2 below */
  }
  ssize_t used = nghttp2_session_mem_recv(c->h2, (const uint8_t *)p, n);
  if (used < 0) {
    gen_note_error(g, "nghttp2 rejected the server's bytes: %s%s", nghttp2_strerror((int)used), "");
    if (c->state == C_CONNECTING)
      gen_conn_fail_setup(c, PB_ERR_H2_NO_SETTINGS);
    else
      conn_fail(c, PB_CONN_ERROR, PB_ERR_H2_PROTOCOL);
    return;
  }
  h2_after_input(c);
}

static void h2_eof(conn *c, int err) {
  if (c->state == C_CONNECTING) {
    gen_note_error(c->g,
                   "the server closed the connection before sending h2 SETTINGS (%s): it does "
                   "not speak h2%s",
                   uv_err_name(err), c->ssl ? "" : " with prior knowledge (h2c)");
    gen_conn_fail_setup(c, PB_ERR_H2_NO_SETTINGS);
    return;
  }
  conn_fail(c, PB_CONN_ERROR, c->goaway ? PB_ERR_H2_GOAWAY : err);
}

/* ---- transport ---- */

/* TCP (and TLS) up and the protocol checked: the connection can start its session. */
static void transport_ready(conn *c) {
  if (c->g->h2) {
    h2_start(c);
    return;
  }
  c->g->connecting--;
  c->state = C_OPEN;
  conn_became_idle(c);
}

static void plain_input(conn *c, const char *p, size_t n) {
  if (c->h2)
    h2_input(c, p, n);
  else
    h1_input(c, p, n);
}

static void transport_eof(conn *c, int err) {
  if (c->state == C_CONNECTING && !c->h2) {
    /* Still in the TLS handshake (h1 has no other setup step). */
    gen_note_error(c->g, "the server closed the connection during the TLS handshake (%s)%s",
                   uv_err_name(err), "");
    gen_conn_fail_setup(c, PB_ERR_TLS);
    return;
  }
  if (c->h2)
    h2_eof(c, err);
  else
    h1_eof(c, err);
}

static void tls_failed(conn *c, const char *what) {
  char msg[160];
  unsigned long e = ERR_get_error();
  ERR_error_string_n(e, msg, sizeof msg);
  ERR_clear_error();
  if (ERR_GET_REASON(e) == SSL_R_TLSV1_ALERT_NO_APPLICATION_PROTOCOL) {
    /* The server's ALPN accepts none of what we offered (RFC 7301 section 3.2). */
    gen_note_error(c->g, "ALPN: the server accepts none of the protocols offered (%s)%s",
                   c->g->h2 ? "h2: it does not speak h2 over TLS" : "http/1.1", "");
    if (c->state == C_CONNECTING)
      gen_conn_fail_setup(c, PB_ERR_ALPN);
    else
      conn_fail(c, PB_CONN_ERROR, PB_ERR_ALPN);
    return;
  }
  gen_note_error(c->g, "TLS %s failed: %s", what, e ? msg : "peer closed or sent non-TLS bytes");
  if (c->state == C_CONNECTING)
    gen_conn_fail_setup(c, PB_ERR_TLS);
  else
    conn_fail(c, PB_CONN_ERROR, PB_ERR_TLS);
}

/* The handshake finished: check ALPN, then hand over to h1 or h2. */
static void tls_established(conn *c) {
  gen *g = c->g;
  const unsigned char *alpn = NULL;
  unsigned alpn_len = 0;
  SSL_get0_alpn_selected(c->ssl, &alpn, &alpn_len);
  char got[64];
  snprintf(got, sizeof got, "%.*s", (int)alpn_len, alpn ? (const char *)alpn : "");
  bool ok = g->h2 ? strcmp(got, "h2") == 0 : (alpn_len == 0 || strcmp(got, "http/1.1") == 0);
  if (!ok) {
    gen_note_error(g, "ALPN: the server selected '%s', pp-bench asked for %s",
                   alpn_len ? got : "none",
                   g->h2 ? "h2 (it does not speak h2 over TLS)" : "http/1.1");
    gen_conn_fail_setup(c, PB_ERR_ALPN);
    return;
  }
  c->tls_ready = true;
  transport_ready(c);
}

static void tls_input(conn *c, const char *p, size_t n) {
  if (BIO_write(SSL_get_rbio(c->ssl), p, (int)n) != (int)n) {
    tls_failed(c, "read");
    return;
  }
  if (!c->tls_ready) {
    int r = SSL_do_handshake(c->ssl);
    if (tls_drain(c) < 0) {
      gen_conn_fail_setup(c, UV_ENOMEM);
      return;
    }
    conn_flush(c);
    if (!gen_conn_alive(c)) return;
    if (r <= 0) {
      int e = SSL_get_error(c->ssl, r);
      if (e == SSL_ERROR_WANT_READ) return;
      tls_failed(c, "handshake");
      return;
    }
    tls_established(c);
    if (!gen_conn_alive(c)) return;
  }
  for (;;) {
    int r = SSL_read(c->ssl, c->g->plainbuf, (int)sizeof c->g->plainbuf);
    if (r > 0) {
      plain_input(c, c->g->plainbuf, (size_t)r);
      if (!gen_conn_alive(c)) return;
      continue;
    }
    int e = SSL_get_error(c->ssl, r);
    if (e == SSL_ERROR_WANT_READ) break;
    if (e == SSL_ERROR_ZERO_RETURN) { /* close_notify */
      transport_eof(c, UV_EOF);
      return;
    }
    tls_failed(c, "read");
    return;
  }
  /* Reading may have produced records to send (key updates, alerts). */
  if (tls_drain(c) < 0) {
    conn_fail(c, PB_CONN_ERROR, UV_ENOMEM);
    return;
  }
  conn_flush(c);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  conn *c = s->data;
  if (!gen_conn_alive(c)) return;
  if (nread == 0) return;
  if (nread < 0) {
    transport_eof(c, (int)nread);
    return;
  }
  if (c->ssl)
    tls_input(c, buf->base, (size_t)nread);
  else
    plain_input(c, buf->base, (size_t)nread);
}

bool gen_pending_pop(gen *g, uint32_t *i) {
  if (g->pending_len == 0) return false;
  *i = g->pending[g->pending_head];
  g->pending_head = (g->pending_head + 1) % g->sched->count;
  g->pending_len--;
  return true;
}

static void pending_push(gen *g, uint32_t i) {
  g->pending[(g->pending_head + g->pending_len) % g->sched->count] = i;
  g->pending_len++;
}

/* `c` is open and has nothing in flight: serve the oldest waiting arrival or park it. */
static void conn_became_idle(conn *c) {
  gen *g = c->g;
  uint32_t i;
  llhttp_init(&c->parser, HTTP_RESPONSE, &g->settings);
  c->parser.data = c;
  while (gen_pending_pop(g, &i)) {
    if (gen_now_rel(g) >= g->results[i].intended_ns + g->timeout_ns) {
      gen_finish_request(g, i, PB_TIMEOUT, 0, 0);
      continue;
    }
    conn_send(c, i);
    return;
  }
  c->state = C_IDLE;
  g->idle[g->idle_len++] = (uint32_t)(c - g->conns);
  gen_maybe_finish(g);
}

static void on_connect(uv_connect_t *req, int status) {
  conn *c = req->data;
  gen *g = c->g;
  if (c->state != C_CONNECTING) return; /* closed meanwhile */
  if (status < 0) {
    /* Charge the failure to the oldest waiting arrival so a dead server produces one error
     * per arrival instead of an endless reconnect loop. */
    gen_note_error(g, "connect: %s%s", uv_strerror(status), "");
    gen_conn_fail_setup(c, status);
    return;
  }
  c->tcp_up = true;
  c->connected_ns = gen_now_rel(g);
  uv_tcp_nodelay(&c->tcp, 1);
  if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) < 0) {
    gen_conn_close(c);
    return;
  }
  if (!g->ssl_ctx) {
    transport_ready(c);
    return;
  }
  c->ssl = SSL_new(g->ssl_ctx);
  BIO *rbio = BIO_new(BIO_s_mem()), *wbio = BIO_new(BIO_s_mem());
  if (!c->ssl || !rbio || !wbio) {
    BIO_free(rbio);
    BIO_free(wbio);
    gen_conn_fail_setup(c, UV_ENOMEM);
    return;
  }
  SSL_set_bio(c->ssl, rbio, wbio);
  SSL_set_connect_state(c->ssl);
  /* The macro casts away const; OpenSSL copies the name. */
  char sni[256];
  snprintf(sni, sizeof sni, "%s", g->cfg->tls_server_name ? g->cfg->tls_server_name : "localhost");
  SSL_set_tlsext_host_name(c->ssl, sni);
  SSL_do_handshake(c->ssl); /* writes the ClientHello into the write BIO */
  if (tls_drain(c) < 0) {
    gen_conn_fail_setup(c, UV_ENOMEM);
    return;
  }
  conn_flush(c);
}

static bool conn_open(gen *g) {
  if (g->free_head < 0) return false;
  conn *c = &g->conns[g->free_head];
  if ((uint32_t)g->free_head + 1 > g->conn_high) g->conn_high = (uint32_t)g->free_head + 1;
  g->free_head = c->next_free;
  memset(c, 0, sizeof *c);
  c->g = g;
  c->id = ++g->conn_serial;
  c->req = -1;
  c->next_free = -1;
  if (g->h3) {
    c->state = C_CONNECTING;
    g->open_conns++;
    g->connecting++;
    if (g->counters) {
      g->counters->connections_opened++;
      if (g->open_conns > g->counters->connections_peak)
        g->counters->connections_peak = g->open_conns;
    }
    return gen_h3_open(c);
  }
  uv_tcp_init(&g->loop, &c->tcp);
  c->tcp.data = c;
  c->connect_req.data = c;
  c->state = C_CONNECTING;
  g->open_conns++;
  g->connecting++;
  if (g->counters) {
    g->counters->connections_opened++;
    if (g->open_conns > g->counters->connections_peak)
      g->counters->connections_peak = g->open_conns;
  }
  int rc = uv_tcp_connect(&c->connect_req, &c->tcp, (const struct sockaddr *)&g->addr, on_connect);
  if (rc < 0) {
    gen_note_error(g, "connect: %s%s", uv_strerror(rc), "");
    gen_conn_fail_setup(c, rc);
    return false;
  }
  return true;
}

/* ---- pacing ---- */

static void dispatch(gen *g, uint32_t i) {
  g->results[i].dispatched_ns = gen_now_rel(g);
  if (g->h3) {
    conn *c = gen_h3_pick(g);
    if (c) {
      gen_h3_submit(c, i);
      gen_h3_flush(c);
      return;
    }
    pending_push(g, i);
    maybe_open(g);
    return;
  }
  if (g->h2) {
    conn *c = h2_pick(g);
    if (c) {
      h2_submit(c, i);
      h2_pump(c);
      return;
    }
    pending_push(g, i);
    maybe_open(g);
    return;
  }
  if (g->idle_len > 0) {
    conn *c = &g->conns[g->idle[--g->idle_len]];
    conn_send(c, i);
    return;
  }
  pending_push(g, i);
  maybe_open(g);
}

/* Opens connections while more arrivals wait than connections are being opened for them. */
static void maybe_open(gen *g) {
  if (g->h2) {
    /* h2: the pool is the cap, all opened at the start; a lost connection is replaced when
     * arrivals wait, one connection attempt per waiting arrival at most. */
    while (g->pending_len > g->connecting && g->open_conns < g->max_conns && g->free_head >= 0)
      if (!conn_open(g)) break;
    return;
  }
  while (g->pending_len > g->connecting && g->open_conns < g->max_conns && g->free_head >= 0) {
    if (!conn_open(g)) break; /* failed at once; its close callback will try again */
  }
}

static void arm_pacer(gen *g) {
  struct itimerspec its = {0};
  uint64_t at = g->t0 + g->sched->arrivals[g->next_arrival].intended_ns;
  its.it_value.tv_sec = (time_t)(at / 1000000000u);
  its.it_value.tv_nsec = (long)(at % 1000000000u);
  if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0) its.it_value.tv_nsec = 1;
  timerfd_settime(g->timerfd, TFD_TIMER_ABSTIME, &its, NULL);
}

static void on_pacer(uv_poll_t *h, int status, int events) {
  (void)status;
  (void)events;
  gen *g = h->data;
  uint64_t expirations;
  ssize_t n = read(g->timerfd, &expirations, sizeof expirations);
  (void)n;
  uint64_t now = gen_now_rel(g);
  while (g->next_arrival < g->sched->count &&
         g->sched->arrivals[g->next_arrival].intended_ns <= now) {
    dispatch(g, (uint32_t)g->next_arrival++);
    now = gen_now_rel(g);
  }
  if (g->next_arrival < g->sched->count) {
    arm_pacer(g);
  } else if (g->pacer_active) {
    g->pacer_active = false;
    uv_poll_stop(&g->pacer);
  }
}

/* ---- timeouts, progress, shutdown ---- */

/* h2 streams past the client timeout are cancelled (RST_STREAM) and counted as timeouts; the
 * connection stays. Streams are opened in intended order, so a cursor over the results that
 * skips finished ones finds every overdue stream without scanning all of them. */
static void h2_sweep(gen *g, uint64_t now) {
  while (g->sweep_cursor < g->next_arrival) {
    uint32_t i = (uint32_t)g->sweep_cursor;
    pb_result *r = &g->results[i];
    if (r->outcome != PB_PENDING) {
      g->sweep_cursor++;
      continue;
    }
    if (now < r->intended_ns + g->timeout_ns) break;
    uint32_t slot = g->req_slot[i];
    if (slot != UINT32_MAX) {
      conn *c = &g->conns[slot];
      gen_stream_remove(c, i);
      g->req_slot[i] = UINT32_MAX;
      g->in_flight--;
      if (c->q) {
        gen_h3_cancel(c, g->req_stream[i]);
      } else {
        nghttp2_session_set_stream_user_data(c->h2, g->req_stream[i], NULL);
        nghttp2_submit_rst_stream(c->h2, NGHTTP2_FLAG_NONE, g->req_stream[i], NGHTTP2_CANCEL);
      }
    }
    g->results[i].status = 0;
    gen_finish_request(g, i, PB_TIMEOUT, 0, 0);
    g->sweep_cursor++;
  }
  for (uint32_t k = 0; k < g->conn_high; k++) {
    conn *c = &g->conns[k];
    if (c->state != C_OPEN || (!c->h2 && !c->q)) continue;
    /* Clients that leave: their streams are reset, the connection stays. */
    for (uint32_t s = 0; g->any_cancel && s < c->n_streams;) {
      uint32_t i = c->streams[s];
      uint64_t after = g->kinds[g->results[i].kind].cancel_after_ns;
      if (!after || now < g->results[i].sent_ns + after) {
        s++;
        continue;
      }
      c->streams[s] = c->streams[--c->n_streams];
      g->req_slot[i] = UINT32_MAX;
      g->in_flight--;
      if (c->q) { /* h3: RESET_STREAM + STOP_SENDING (H3_REQUEST_CANCELLED) */
        gen_h3_cancel(c, g->req_stream[i]);
      } else {
        nghttp2_session_set_stream_user_data(c->h2, g->req_stream[i], NULL);
        nghttp2_submit_rst_stream(c->h2, NGHTTP2_FLAG_NONE, g->req_stream[i], NGHTTP2_CANCEL);
      }
      g->results[i].status = 0;
      gen_finish_request(g, i, PB_CANCELLED, 0, 0);
    }
    if (c->q) {
      gen_h3_fill(c);
    } else {
      h2_fill(c);
      h2_pump(c);
    }
  }
}

static void on_sweep(uv_timer_t *t) {
  gen *g = t->data;
  uint64_t now = gen_now_rel(g);
  /* Waiting arrivals are in intended order: only the head can be the oldest. */
  while (g->pending_len > 0) {
    uint32_t i = g->pending[g->pending_head];
    if (now < g->results[i].intended_ns + g->timeout_ns) break;
    gen_pending_pop(g, &i);
    gen_finish_request(g, i, PB_TIMEOUT, 0, 0);
  }
  for (uint32_t k = 0; k < g->conn_high; k++) {
    conn *c = &g->conns[k];
    if (c->state == C_BUSY && c->req >= 0 && g->any_cancel) {
      const pb_result *r = &g->results[c->req];
      uint64_t after = g->kinds[r->kind].cancel_after_ns;
      if (after && now >= r->sent_ns + after) { /* the client leaves: close the connection */
        conn_fail(c, PB_CANCELLED, 0);
        continue;
      }
    }
    if (c->state == C_BUSY && c->write_error && now >= c->write_error_ns + WRITE_ERROR_GRACE_NS) {
      conn_fail(c, PB_CONN_ERROR, c->write_error);
      continue;
    }
    if (c->state == C_BUSY && c->req >= 0 &&
        now >= g->results[c->req].intended_ns + g->timeout_ns) {
      conn_fail(c, PB_TIMEOUT, 0);
    }
    /* A peer that accepted but never finished TLS or sent h2 SETTINGS. */
    if (c->state == C_CONNECTING && c->tcp_up && now >= c->connected_ns + SETUP_TIMEOUT_NS) {
      if (c->q) {
        gen_note_error(g, "no QUIC handshake (h3) with the server within 5 s%s%s", "", "");
        gen_conn_fail_setup(c, PB_ERR_QUIC);
      } else if (c->ssl && !c->tls_ready) {
        gen_note_error(g, "the TLS handshake did not complete within 5 s%s%s", "", "");
        gen_conn_fail_setup(c, PB_ERR_TLS);
      } else {
        gen_note_error(g, "no h2 SETTINGS from the server within 5 s: it does not speak h2%s%s",
                       c->ssl ? "" : " with prior knowledge (h2c)", "");
        gen_conn_fail_setup(c, PB_ERR_H2_NO_SETTINGS);
      }
    }
  }
  if (g->h2 || g->h3) h2_sweep(g, now);
  gen_maybe_finish(g);
}

static void on_progress(uv_timer_t *t) {
  gen *g = t->data;
  if (!g->cfg->progress) return;
  pb_progress p = {
      .elapsed_ns = gen_now_rel(g),
      .offered = g->next_arrival,
      .completed = g->completed,
      .completed_last_second = g->completed - g->completed_at_last_tick,
      .in_flight = g->in_flight,
      .waiting = g->pending_len,
      .open_conns = g->open_conns,
  };
  g->completed_at_last_tick = g->completed;
  g->cfg->progress(&p, g->cfg->data);
}

static void close_all(gen *g) {
  for (uint32_t k = 0; k < g->conn_high; k++) {
    conn *c = &g->conns[k];
    if (c->state != C_FREE && c->state != C_CLOSING) gen_conn_close(c);
  }
}

void gen_maybe_finish(gen *g) {
  if (g->stopping || g->completed < g->sched->count) return;
  g->stopping = true;
  if (g->pacer_active) uv_poll_stop(&g->pacer);
  uv_timer_stop(&g->sweeper);
  uv_timer_stop(&g->progress);
  close_all(g);
}

/* 4096, or less when the open-file limit would not allow it (keep 64 descriptors spare). */
static uint32_t default_max_conns(void) {
  struct rlimit rl;
  uint32_t cap = 4096;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < cap + 64)
    cap = rl.rlim_cur > 128 ? (uint32_t)rl.rlim_cur - 64 : 64;
  return cap;
}

static int resolve(gen *g, const char *host, int port) {
  if (strchr(host, ':')) return uv_ip6_addr(host, port, (struct sockaddr_in6 *)&g->addr);
  return uv_ip4_addr(host, port, (struct sockaddr_in *)&g->addr);
}

int pb_gen_run(const pb_gen_config *cfg, const pb_schedule *sched, pb_result *results,
               uint64_t *t0_out, char *err, size_t errlen) {
  char dummy[8];
  if (!err) {
    err = dummy;
    errlen = sizeof dummy;
  }
  if (!cfg || !sched || !results || !cfg->host || cfg->port <= 0 || cfg->port > 65535) {
    snprintf(err, errlen, "invalid generator configuration");
    return PB_EINVAL;
  }
  for (size_t k = 0; cfg->kinds && k < sched->path_count; k++) {
    if (cfg->kinds[k].body_bytes > PB_BODY_MAX) {
      snprintf(err, errlen, "kind %zu: a body of %u bytes is over the %u limit", k,
               cfg->kinds[k].body_bytes, PB_BODY_MAX);
      return PB_EINVAL;
    }
  }
  for (size_t i = 0; i < sched->count; i++) {
    if (sched->arrivals[i].kind >= sched->path_count ||
        (i > 0 && sched->arrivals[i].intended_ns < sched->arrivals[i - 1].intended_ns)) {
      snprintf(err, errlen, "arrival %zu: kind out of range or times not sorted", i);
      return PB_EINVAL;
    }
  }
  memset(results, 0, sched->count * sizeof *results);
  for (size_t i = 0; i < sched->count; i++) {
    results[i].intended_ns = sched->arrivals[i].intended_ns;
    results[i].kind = sched->arrivals[i].kind;
  }
  if (sched->count == 0) {
    if (t0_out) *t0_out = uv_hrtime();
    return 0;
  }

  gen *g = calloc(1, sizeof *g);
  if (!g) return PB_ENOMEM;
  int rc = 0;
  g->cfg = cfg;
  g->sched = sched;
  g->results = results;
  g->timeout_ns = cfg->timeout_ns ? cfg->timeout_ns : 20000000000ull;
  g->max_conns = cfg->max_connections ? cfg->max_connections : default_max_conns();
  if (cfg->proto == PB_PROTO_H2 || cfg->proto == PB_PROTO_H3)
    g->max_conns = cfg->h2_connections ? cfg->h2_connections : 4;
  g->timerfd = -1;
  g->pending = calloc(sched->count, sizeof *g->pending);
  g->conns = calloc(g->max_conns, sizeof *g->conns);
  g->idle = calloc(g->max_conns, sizeof *g->idle);
  g->counters = cfg->counters;
  if (g->counters) memset(g->counters, 0, sizeof *g->counters);
  g->h2 = cfg->proto == PB_PROTO_H2;
  g->h3 = cfg->proto == PB_PROTO_H3;
  g->kinds = cfg->kinds;
  bool any_body = false;
  for (size_t k = 0; g->kinds && k < sched->path_count; k++) {
    if (g->kinds[k].cancel_after_ns) g->any_cancel = true;
    if (g->kinds[k].body_bytes) any_body = true;
  }
  if (any_body) {
    g->body = malloc(BODY_PIECE);
    bool mux = g->h2 || g->h3;
    g->req_body_off = mux ? calloc(sched->count, sizeof *g->req_body_off) : NULL;
    if (!g->body || (mux && !g->req_body_off)) {
      rc = PB_ENOMEM;
      goto out;
    }
    for (uint32_t k = 0; k < BODY_PIECE; k++) /* printable, so a server log of it reads */
      g->body[k] = (char)('a' + k % 26);
  }
  if (g->h2 || g->h3) {
    g->req_slot = malloc(sched->count * sizeof *g->req_slot);
    g->req_stream = calloc(sched->count, sizeof *g->req_stream);
    if (!g->req_slot || !g->req_stream) {
      rc = PB_ENOMEM;
      goto out;
    }
    memset(g->req_slot, 0xff, sched->count * sizeof *g->req_slot);
  }
  if (g->h3 && gen_h3_init(g, err, errlen) < 0) {
    rc = PB_ESYS;
    goto out;
  }
  if (g->h2) {
    if (nghttp2_session_callbacks_new(&g->h2_callbacks) != 0) {
      rc = PB_ENOMEM;
      goto out;
    }
    nghttp2_session_callbacks_set_on_header_callback(g->h2_callbacks, h2_on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(g->h2_callbacks, h2_on_frame_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(g->h2_callbacks, h2_on_stream_close);
  }
  if (cfg->tls && !g->h3) { /* h3 brings its own TLS 1.3 (GnuTLS inside QUIC) */
    g->ssl_ctx = SSL_CTX_new(TLS_client_method());
    if (!g->ssl_ctx) {
      snprintf(err, errlen, "SSL_CTX_new failed");
      rc = PB_ESYS;
      goto out;
    }
    /* No verification: the targets are loopback servers with development certificates. */
    SSL_CTX_set_verify(g->ssl_ctx, SSL_VERIFY_NONE, NULL);
    SSL_CTX_set_min_proto_version(g->ssl_ctx, TLS1_2_VERSION); /* RFC 9113 section 9.2 */
    SSL_CTX_set_options(g->ssl_ctx, SSL_OP_NO_RENEGOTIATION);
    static const unsigned char alpn_h2[] = "\x02h2", alpn_h1[] = "\x08http/1.1";
    if (g->h2)
      SSL_CTX_set_alpn_protos(g->ssl_ctx, alpn_h2, sizeof alpn_h2 - 1);
    else
      SSL_CTX_set_alpn_protos(g->ssl_ctx, alpn_h1, sizeof alpn_h1 - 1);
  }
  g->requests = calloc(sched->path_count, sizeof *g->requests);
  g->request_lens = calloc(sched->path_count, sizeof *g->request_lens);
  if (!g->pending || !g->conns || !g->idle || !g->requests || !g->request_lens) {
    rc = PB_ENOMEM;
    goto out;
  }
  if (resolve(g, cfg->host, cfg->port) < 0) {
    snprintf(err, errlen, "cannot parse address %s (numeric IP expected)", cfg->host);
    rc = PB_EINVAL;
    goto out;
  }
  for (size_t k = 0; k < sched->path_count; k++) {
    const char *host = strchr(cfg->host, ':') ? "localhost" : cfg->host;
    uint32_t body = gen_kind_body(g, (uint32_t)k);
    int n = body ? asprintf(&g->requests[k],
                            "POST %s HTTP/1.1\r\nHost: %s:%d\r\nUser-Agent: pp-bench\r\n"
                            "Content-Type: application/octet-stream\r\nContent-Length: %u\r\n\r\n",
                            sched->paths[k], host, cfg->port, body)
                 : asprintf(&g->requests[k],
                            "GET %s HTTP/1.1\r\nHost: %s:%d\r\nUser-Agent: pp-bench\r\n\r\n",
                            sched->paths[k], host, cfg->port);
    if (n < 0) {
      g->requests[k] = NULL;
      rc = PB_ENOMEM;
      goto out;
    }
    g->request_lens[k] = (size_t)n;
  }
  if (strchr(cfg->host, ':'))
    snprintf(g->authority, sizeof g->authority, "[%s]:%d", cfg->host, cfg->port);
  else
    snprintf(g->authority, sizeof g->authority, "%s:%d", cfg->host, cfg->port);
  g->free_head = -1;
  for (int32_t k = (int32_t)g->max_conns - 1; k >= 0; k--) {
    g->conns[k].next_free = g->free_head;
    g->free_head = k;
  }
  llhttp_settings_init(&g->settings);
  g->settings.on_message_complete = on_message_complete;

  g->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (g->timerfd < 0) {
    snprintf(err, errlen, "timerfd_create: %s", strerror(errno));
    rc = PB_ESYS;
    goto out;
  }
  uv_loop_init(&g->loop);
  uv_poll_init(&g->loop, &g->pacer, g->timerfd);
  g->pacer.data = g;
  uv_timer_init(&g->loop, &g->sweeper);
  g->sweeper.data = g;
  uv_timer_init(&g->loop, &g->progress);
  g->progress.data = g;

  g->t0 = uv_hrtime() + (cfg->start_delay_ns ? cfg->start_delay_ns : 20000000ull);
  if (cfg->t0_ns) g->t0 = cfg->t0_ns;
  if (t0_out) *t0_out = g->t0;
  /* h2, h3: the whole pool is opened before the first arrival. */
  if (g->h2 || g->h3)
    for (uint32_t k = 0; k < g->max_conns; k++)
      conn_open(g);
  g->pacer_active = true;
  uv_poll_start(&g->pacer, UV_READABLE, on_pacer);
  arm_pacer(g);
  uv_timer_start(&g->sweeper, on_sweep, 10, 10);
  uv_timer_start(&g->progress, on_progress, 1000, 1000);
  uv_run(&g->loop, UV_RUN_DEFAULT);

  uv_close((uv_handle_t *)&g->pacer, NULL);
  uv_close((uv_handle_t *)&g->sweeper, NULL);
  uv_close((uv_handle_t *)&g->progress, NULL);
  uv_run(&g->loop, UV_RUN_DEFAULT);
  uv_loop_close(&g->loop);

out:
  if (g->timerfd >= 0) close(g->timerfd);
  if (g->requests)
    for (size_t k = 0; k < sched->path_count; k++)
      free(g->requests[k]);
  free(g->requests);
  free(g->request_lens);
  free(g->pending);
  free(g->conns);
  free(g->idle);
  free(g->req_slot);
  free(g->req_stream);
  free(g->req_body_off);
  free(g->body);
  if (g->h3) gen_h3_dispose(g);
  if (g->h2_callbacks) nghttp2_session_callbacks_del(g->h2_callbacks);
  if (g->ssl_ctx) SSL_CTX_free(g->ssl_ctx);
  free(g);
  return rc;
}
