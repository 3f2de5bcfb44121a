/* The HTTP/3 endpoint (h3.h): ngtcp2 0.12 + GnuTLS for QUIC, nghttp3 0.8 for HTTP/3, no I/O.
 *
 * Shape, after ngtcp2's gtlsserver (examples/server.cc at v0.12.1) but written for this
 * project: one ngtcp2_conn server per client, its gnutls_session_t configured with
 * ngtcp2_crypto_gnutls_configure_server_session and reached back through an
 * ngtcp2_crypto_conn_ref; the nghttp3 server connection (control + QPACK encoder/decoder uni
 * streams) is created when the 1-RTT TX key is installed, so 0.5-RTT SETTINGS can leave with the
 * server's handshake flight; the write loop asks nghttp3 for stream data and hands it to
 * ngtcp2_conn_writev_stream with NGTCP2_WRITE_STREAM_FLAG_MORE, blocking a stream on
 * STREAM_DATA_BLOCKED and unblocking it from extend_max_stream_data.
 *
 * Work that would call into ngtcp2 from one of its callbacks in a way that can close a stream
 * (shutdown_stream*, resume after a reset) is marked on the stream and done in run_pending(),
 * which runs before every write, outside the engines. Connections are freed only at the end of
 * the public call that ended them (reap()), never from a callback. */
#include "server/h3.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <nghttp3/nghttp3.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>

/* TLS 1.3 only, the QUIC cipher suites and groups (RFC 9001 §5.3 allows any TLS 1.3 suite but
 * CCM_8); middlebox compatibility mode is meaningless over QUIC. */
#define PRIORITY                                                                                   \
  "NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+AES-128-GCM:+AES-256-GCM:+CHACHA20-POLY1305:"        \
  "+AES-128-CCM:-GROUP-ALL:+GROUP-X25519:+GROUP-SECP256R1:+GROUP-SECP384R1:+GROUP-SECP521R1:"      \
  "%DISABLE_TLS13_COMPAT_MODE"

#define MIN_INITIAL_DATAGRAM 1200
#define WRITES_PER_CALL      64 /* datagrams one connection may queue per write pass */

enum conn_state { CS_OPEN, CS_CLOSING, CS_DRAINING, CS_DEAD };

struct cid_entry {
  struct cid_entry *next;      /* hash chain */
  struct cid_entry *conn_next; /* the connection's list */
  pp_h3_conn *conn;
  uint8_t len;
  uint8_t id[NGTCP2_MAX_CIDLEN];
};

typedef struct chunk {
  struct chunk *next;
  size_t len;
  uint8_t data[PP_H3_CHUNK];
} chunk;

struct hdr_span {
  uint32_t name_off, name_len, value_off, value_len;
  int32_t token;
};

struct pp_h3_stream {
  pp_h3_stream *prev, *next;
  int64_t id;
  void *owner_data;
  unsigned owned : 1;     /* on_request accepted it: the owner holds it */
  unsigned detached : 1;  /* on_close already ran */
  unsigned answered : 1;  /* the session answered it */
  unsigned responded : 1; /* a final response head was submitted */
  unsigned ended : 1;     /* send_end (or no body): EOF after the buffered bytes */
  unsigned eof_given : 1; /* EOF handed to nghttp3 */
  unsigned no_body : 1;
  unsigned head : 1;         /* HEAD request */
  unsigned req_fin : 1;      /* the request had no body */
  unsigned hdr_too_big : 1;  /* the field section exceeded max_header_list */
  unsigned headers_done : 1; /* end_headers ran */
  unsigned wouldblock : 1;   /* read_data returned WOULDBLOCK: resume on new data */
  unsigned want_resume : 1;  /* deferred nghttp3_conn_resume_stream */
  unsigned want_stop : 1;    /* deferred STOP_SENDING(H3_NO_ERROR): the session answered */
  unsigned want_reset : 1;   /* deferred full reset with reset_code */
  unsigned want_shut_rd : 1; /* deferred ngtcp2 shutdown read (nghttp3 asked) */
  unsigned want_shut_wr : 1; /* deferred ngtcp2 shutdown write (nghttp3 asked) */
  uint64_t reset_code, shut_rd_code, shut_wr_code;
  uint64_t close_code; /* for on_close when detached by the session */
  int detach_pending;  /* on_close(close_code) owed at the next run_pending */

  pp_buf hdr_raw, hdr_spans, hdr_list;
  size_t hdr_size;
  int has_cl;
  uint64_t cl;
  uint64_t body_received, body_unconsumed;

  chunk *head_chunk, *tail_chunk, *send_chunk;
  uint64_t head_base, send_base;
  uint64_t written, sent, acked;
};

const char *pp_h3_strerror(int err) {
  switch (err) {
  case 0: return "success";
  case PP_H3_EINVAL: return "invalid argument";
  case PP_H3_ECERT: return "certificate or key could not be loaded";
  case PP_H3_ETLS: return "GnuTLS failed";
  case PP_H3_ELIBRARY: return "ngtcp2 or nghttp3 failed";
  case PP_H3_ESTREAM: return "no such stream, or not in a state that allows the call";
  case PP_H3_EFULL: return "unacknowledged response data bound reached";
  case PP_H3_EREENTER: return "called from inside a callback";
  case PP_H3_ECLOSED: return "connection closing or gone";
  default: return "unknown error";
  }
}

void pp_h3_limits_default(pp_h3_limits *l) {
  l->max_connections = 10000;
  l->max_streams_bidi = 100;
  l->max_header_list = 65536;
  l->max_body_bytes = 64ull << 20;
  l->stream_window = 256 * 1024;
  l->conn_window = 1024 * 1024;
  l->idle_timeout_ns = 30 * NGTCP2_SECONDS;
  l->handshake_timeout_ns = 10 * NGTCP2_SECONDS;
  l->retry_token_ttl_ns = 10 * NGTCP2_SECONDS;
  l->max_stream_unacked = 1024 * 1024;
  l->max_conn_unacked = 8 * 1024 * 1024;
  l->max_initial_datagram = 1500;
  l->out_queue = 512;
  l->reset_burst = 16;
  l->reset_rate = 100;
}

void pp_h3_config_default(pp_h3_config *c) {
  memset(c, 0, sizeof *c);
  pp_h3_limits_default(&c->limits);
}

/* ---- small helpers ---- */

static void rand_bytes(pp_h3_server *srv, uint8_t *dest, size_t len) {
  if (srv->cfg.rand)
    srv->cfg.rand(dest, len, srv->data);
  else if (gnutls_rnd(GNUTLS_RND_RANDOM, dest, len) != 0) {
    fprintf(stderr, "puma-plus: gnutls_rnd failed\n");
    abort();
  }
}

static uint64_t min_u64(uint64_t a, uint64_t b) {
  return a < b ? a : b;
}

static void *xcalloc(size_t n, size_t size) {
  void *p = calloc(n, size);
  if (!p) {
    fprintf(stderr, "puma-plus: out of memory\n");
    abort();
  }
  return p;
}

/* ---- the connection-ID map ---- */

static size_t cid_hash(const pp_h3_server *srv, const uint8_t *id, size_t len) {
  /* FNV-1a seeded with the secret: the client picks its first DCID, so the seed keeps it from
   * aiming at one chain. */
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < 8; i++)
    h = (h ^ srv->cfg.secret[i]) * 1099511628211ull;
  for (size_t i = 0; i < len; i++)
    h = (h ^ id[i]) * 1099511628211ull;
  return (size_t)(h ^ (h >> 29)) & (srv->cid_nbuckets - 1);
}

static struct cid_entry *cid_find(pp_h3_server *srv, const uint8_t *id, size_t len) {
  struct cid_entry *e = srv->cid_buckets[cid_hash(srv, id, len)];
  for (; e; e = e->next)
    if (e->len == len && memcmp(e->id, id, len) == 0) return e;
  return NULL;
}

static void cid_grow(pp_h3_server *srv) {
  size_t old_n = srv->cid_nbuckets;
  void **old = srv->cid_buckets;
  srv->cid_nbuckets = old_n * 2;
  srv->cid_buckets = xcalloc(srv->cid_nbuckets, sizeof(void *));
  for (size_t i = 0; i < old_n; i++) {
    struct cid_entry *e = old[i];
    while (e) {
      struct cid_entry *next = e->next;
      size_t b = cid_hash(srv, e->id, e->len);
      e->next = srv->cid_buckets[b];
      srv->cid_buckets[b] = e;
      e = next;
    }
  }
  free(old);
}

static int cid_add(pp_h3_server *srv, pp_h3_conn *c, const uint8_t *id, size_t len) {
  if (len > NGTCP2_MAX_CIDLEN) return -1;
  if (cid_find(srv, id, len)) return -1;
  if (srv->cid_count + 1 > srv->cid_nbuckets * 2) cid_grow(srv);
  struct cid_entry *e = xcalloc(1, sizeof *e);
  e->conn = c;
  e->len = (uint8_t)len;
  memcpy(e->id, id, len);
  size_t b = cid_hash(srv, id, len);
  e->next = srv->cid_buckets[b];
  srv->cid_buckets[b] = e;
  e->conn_next = c->cids;
  c->cids = e;
  srv->cid_count++;
  return 0;
}

static void cid_unlink_bucket(pp_h3_server *srv, struct cid_entry *e) {
  struct cid_entry **pp = (struct cid_entry **)&srv->cid_buckets[cid_hash(srv, e->id, e->len)];
  while (*pp && *pp != e)
    pp = &(*pp)->next;
  if (*pp) *pp = e->next;
  srv->cid_count--;
}

static void cid_remove(pp_h3_server *srv, const uint8_t *id, size_t len) {
  struct cid_entry *e = cid_find(srv, id, len);
  if (!e) return;
  cid_unlink_bucket(srv, e);
  struct cid_entry **pp = (struct cid_entry **)&e->conn->cids;
  while (*pp && *pp != e)
    pp = &(*pp)->conn_next;
  if (*pp) *pp = e->conn_next;
  free(e);
}

static void cid_remove_all(pp_h3_server *srv, pp_h3_conn *c) {
  struct cid_entry *e = c->cids;
  while (e) {
    struct cid_entry *next = e->conn_next;
    cid_unlink_bucket(srv, e);
    free(e);
    e = next;
  }
  c->cids = NULL;
}

/* ---- the out queue ---- */

static pp_h3_datagram *out_slot(pp_h3_server *srv) {
  if (srv->out_len >= srv->cfg.limits.out_queue) return NULL;
  return &srv->outq[(srv->out_head + srv->out_len) % srv->cfg.limits.out_queue];
}

static void out_commit(pp_h3_server *srv, pp_h3_datagram *d, size_t len) {
  d->len = len;
  srv->out_len++;
  srv->stats.datagrams_out++;
  srv->stats.bytes_out += len;
}

static void set_addrs(pp_h3_datagram *d, const struct sockaddr *local, socklen_t local_len,
                      const struct sockaddr *remote, socklen_t remote_len) {
  memcpy(&d->local, local, local_len);
  d->local_len = local_len;
  memcpy(&d->remote, remote, remote_len);
  d->remote_len = remote_len;
  d->ecn = 0;
}

/* Queues bytes built by the caller in a stack buffer (stateless replies). */
static int out_push(pp_h3_server *srv, const uint8_t *data, size_t len,
                    const struct sockaddr *local, socklen_t local_len,
                    const struct sockaddr *remote, socklen_t remote_len) {
  pp_h3_datagram *d = out_slot(srv);
  if (!d || len > sizeof d->data) {
    srv->stats.drop_out_queue_full++;
    return -1;
  }
  set_addrs(d, local, local_len, remote, remote_len);
  memcpy(d->data, data, len);
  out_commit(srv, d, len);
  return 0;
}

const pp_h3_datagram *pp_h3_server_out_peek(pp_h3_server *srv) {
  return srv->out_len ? &srv->outq[srv->out_head] : NULL;
}

void pp_h3_server_out_pop(pp_h3_server *srv) {
  if (!srv->out_len) return;
  srv->out_head = (srv->out_head + 1) % srv->cfg.limits.out_queue;
  srv->out_len--;
}

size_t pp_h3_server_out_count(const pp_h3_server *srv) {
  return srv->out_len;
}

/* ---- streams ---- */

static pp_h3_stream *stream_of(pp_h3_conn *c, int64_t id) {
  for (pp_h3_stream *s = c->streams; s; s = s->next)
    if (s->id == id) return s;
  return NULL;
}

static pp_h3_stream *stream_new(pp_h3_conn *c, int64_t id) {
  pp_h3_server *srv = c->srv;
  pp_h3_stream *s = srv->stream_free;
  pp_buf raw, spans, list;
  if (s) {
    srv->stream_free = s->next;
    raw = s->hdr_raw, spans = s->hdr_spans, list = s->hdr_list;
  } else {
    s = xcalloc(1, sizeof *s);
    pp_buf_init(&raw), pp_buf_init(&spans), pp_buf_init(&list);
  }
  memset(s, 0, sizeof *s);
  s->hdr_raw = raw, s->hdr_spans = spans, s->hdr_list = list;
  s->hdr_raw.len = s->hdr_spans.len = s->hdr_list.len = 0;
  s->id = id;
  s->next = c->streams;
  if (c->streams) c->streams->prev = s;
  c->streams = s;
  c->stream_count++;
  return s;
}

static chunk *chunk_get(pp_h3_server *srv) {
  chunk *k = srv->chunk_free;
  if (k)
    srv->chunk_free = k->next;
  else
    k = xcalloc(1, sizeof *k);
  k->next = NULL;
  k->len = 0;
  return k;
}

static void chunk_put(pp_h3_server *srv, chunk *k) {
  k->next = srv->chunk_free;
  srv->chunk_free = k;
}

static void stream_free(pp_h3_conn *c, pp_h3_stream *s) {
  pp_h3_server *srv = c->srv;
  for (chunk *k = s->head_chunk; k;) {
    chunk *next = k->next;
    chunk_put(srv, k);
    k = next;
  }
  c->unacked -= (size_t)(s->written - s->acked);
  if (s->prev)
    s->prev->next = s->next;
  else
    c->streams = s->next;
  if (s->next) s->next->prev = s->prev;
  c->stream_count--;
  s->next = srv->stream_free;
  srv->stream_free = s;
}

/* Tells the owner the stream is gone (once). */
static void detach(pp_h3_conn *c, pp_h3_stream *s, uint64_t code) {
  if (!s->owned || s->detached) return;
  s->detached = 1;
  s->detach_pending = 0;
  if (c->srv->cb->on_close) c->srv->cb->on_close(c, s->id, s->owner_data, code);
}

/* Puts the connection on the list the end of the current call (flush_all) visits. */
static void mark(pp_h3_conn *c) {
  if (c->dirty) return;
  c->dirty = 1;
  c->dirty_next = c->srv->dirty;
  c->srv->dirty = c;
}

static void want(pp_h3_conn *c) {
  c->want_write = 1;
  mark(c);
}

static void owe_work(pp_h3_conn *c) {
  c->pending_work = 1;
  want(c);
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
    c->unacked += n;
    data += n;
    len -= n;
  }
}

static void ack_body(pp_h3_conn *c, pp_h3_stream *s, uint64_t n) {
  s->acked += n;
  c->unacked -= (size_t)n;
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

static const char *reason_of(int status) {
  switch (status) {
  case 400: return "Bad Request";
  case 403: return "Forbidden";
  case 404: return "Not Found";
  case 413: return "Content Too Large";
  case 429: return "Too Many Requests";
  case 431: return "Request Header Fields Too Large";
  case 501: return "Not Implemented";
  case 503: return "Service Unavailable";
  default: return "Error";
  }
}

static int submit_head(pp_h3_conn *c, pp_h3_stream *s, int status, int no_body);

/* The session answers the stream itself and stops reading its body. */
static void answer(pp_h3_conn *c, pp_h3_stream *s, int status) {
  pp_h3_server *srv = c->srv;
  srv->stats.session_answers++;
  s->answered = 1;
  char body[64];
  int n = snprintf(body, sizeof body, "%d %s\n", status, reason_of(status));
  if (s->responded || s->written) { /* too late for a clean answer */
    s->want_reset = 1;
    s->reset_code = NGHTTP3_H3_REQUEST_CANCELLED;
    owe_work(c);
    return;
  }
  srv->scratch.len = srv->nvbuf.len = 0;
  append_body(c, s, (const uint8_t *)body, (size_t)n);
  s->ended = 1;
  if (submit_head(c, s, status, s->head) != 0) return;
  if (!s->req_fin) {
    s->want_stop = 1;
    owe_work(c);
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
    return 0;
  }
  if (bad_cl || !req.method || !req.path) { /* nghttp3 checks these; belt and braces */
    answer(c, s, 400);
    return 0;
  }
  if (req.method_len == 7 && memcmp(req.method, "CONNECT", 7) == 0) {
    answer(c, s, 501);
    return 0;
  }
  if (req.has_content_length && req.content_length > srv->cfg.limits.max_body_bytes) {
    answer(c, s, 413);
    return 0;
  }
  void *sd = NULL;
  int status = srv->cb->on_request ? srv->cb->on_request(c, &req, &sd) : 503;
  if (status != 0) {
    answer(c, s, status >= 400 && status <= 599 ? status : 500);
    return 0;
  }
  s->owned = 1;
  s->owner_data = sd;
  srv->stats.streams_accepted++;
  return 0;
}

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
  if (s->body_received > c->srv->cfg.limits.max_body_bytes) {
    extend_credit(c, stream_id, datalen);
    detach(c, s, NGHTTP3_H3_REQUEST_CANCELLED);
    answer(c, s, 413);
    return 0;
  }
  s->body_unconsumed += datalen;
  if (c->srv->cb->on_body && c->srv->cb->on_body(c, stream_id, s->owner_data, data, datalen) != 0) {
    s->want_reset = 1;
    s->reset_code = s->close_code = NGHTTP3_H3_INTERNAL_ERROR;
    s->detach_pending = 1;
    owe_work(c);
  }
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
  if (!s || !s->owned || s->detached || s->req_fin) return 0;
  if (c->srv->cb->on_body_end && c->srv->cb->on_body_end(c, stream_id, s->owner_data) != 0) {
    s->want_reset = 1;
    s->reset_code = s->close_code = NGHTTP3_H3_INTERNAL_ERROR;
    s->detach_pending = 1;
    owe_work(c);
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
  detach(c, s, s->detach_pending ? s->close_code : code);
  /* Body bytes the owner never consumed still hold connection credit. */
  if (s->body_unconsumed) ngtcp2_conn_extend_max_offset(c->qc, s->body_unconsumed);
  stream_free(c, s);
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
  owe_work(c);
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
  owe_work(c);
  return 0;
}

/* ---- ngtcp2 callbacks ---- */

static pp_h3_conn *conn_of(void *user_data) {
  return user_data;
}

static void set_app_error(pp_h3_conn *c, int liberr) {
  if (c->ccerr_kind) return;
  c->ccerr_kind = 1;
  c->ccerr_code = nghttp3_err_infer_quic_app_error_code(liberr);
  switch (liberr) {
  case NGHTTP3_ERR_QPACK_FATAL:
  case NGHTTP3_ERR_QPACK_HEADER_TOO_LARGE:
  case NGHTTP3_ERR_QPACK_DECOMPRESSION_FAILED:
  case NGHTTP3_ERR_QPACK_ENCODER_STREAM_ERROR:
  case NGHTTP3_ERR_QPACK_DECODER_STREAM_ERROR: c->srv->stats.qpack_errors++; break;
  default: c->srv->stats.protocol_errors++; break;
  }
}

static int setup_h3(pp_h3_conn *c) {
  gnutls_datum_t alpn;
  if (gnutls_alpn_get_selected_protocol(c->tls, &alpn) != 0 || alpn.size != 2 ||
      memcmp(alpn.data, "h3", 2) != 0) {
    c->ccerr_kind = 2;
    c->ccerr_code = NGTCP2_CRYPTO_ERROR | 120; /* no_application_protocol */
    c->srv->stats.protocol_errors++;
    return -1;
  }
  static const nghttp3_callbacks cbs = {
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
  nghttp3_settings settings;
  nghttp3_settings_default(&settings);
  settings.max_field_section_size = c->srv->cfg.limits.max_header_list;
  settings.qpack_max_dtable_capacity = 0; /* no dynamic table: no blocked streams to bound */
  settings.qpack_blocked_streams = 0;
  if (nghttp3_conn_server_new(&c->h3, &cbs, &settings, NULL, c) != 0) return -1;
  nghttp3_conn_set_max_client_streams_bidi(c->h3, c->srv->cfg.limits.max_streams_bidi);
  int64_t ctrl, enc, dec;
  if (ngtcp2_conn_open_uni_stream(c->qc, &ctrl, NULL) != 0 ||
      nghttp3_conn_bind_control_stream(c->h3, ctrl) != 0 ||
      ngtcp2_conn_open_uni_stream(c->qc, &enc, NULL) != 0 ||
      ngtcp2_conn_open_uni_stream(c->qc, &dec, NULL) != 0 ||
      nghttp3_conn_bind_qpack_streams(c->h3, enc, dec) != 0)
    return -1;
  return 0;
}

static int cb_recv_tx_key(ngtcp2_conn *qc, ngtcp2_crypto_level level, void *user_data) {
  (void)qc;
  if (level != NGTCP2_CRYPTO_LEVEL_APPLICATION) return 0;
  return setup_h3(conn_of(user_data)) == 0 ? 0 : NGTCP2_ERR_CALLBACK_FAILURE;
}

static int cb_handshake_completed(ngtcp2_conn *qc, void *user_data) {
  pp_h3_conn *c = conn_of(user_data);
  c->handshake_done = 1;
  c->srv->stats.handshakes++;
  /* A NEW_TOKEN for the client's next connection: with retry on, a returning client whose
   * address is unchanged skips the Retry round trip. */
  uint8_t token[NGTCP2_CRYPTO_MAX_REGULAR_TOKENLEN];
  const ngtcp2_path *path = ngtcp2_conn_get_path(qc);
  ngtcp2_ssize n =
      ngtcp2_crypto_generate_regular_token(token, c->srv->cfg.secret, PP_H3_SECRET_LEN,
                                           path->remote.addr, path->remote.addrlen, c->last_ts);
  if (n > 0 && ngtcp2_conn_submit_new_token(qc, token, (size_t)n) != 0)
    return NGTCP2_ERR_CALLBACK_FAILURE;
  return 0;
}

static int cb_recv_stream_data(ngtcp2_conn *qc, uint32_t flags, int64_t stream_id, uint64_t offset,
                               const uint8_t *data, size_t datalen, void *user_data,
                               void *stream_user_data) {
  (void)offset, (void)stream_user_data;
  pp_h3_conn *c = conn_of(user_data);
  if (!c->h3) return 0;
  nghttp3_ssize n = nghttp3_conn_read_stream(c->h3, stream_id, data, datalen,
                                             (flags & NGTCP2_STREAM_DATA_FLAG_FIN) != 0);
  if (n < 0) {
    set_app_error(c, (int)n);
    return NGTCP2_ERR_CALLBACK_FAILURE;
  }
  ngtcp2_conn_extend_max_stream_offset(qc, stream_id, (uint64_t)n);
  ngtcp2_conn_extend_max_offset(qc, (uint64_t)n);
  return 0;
}

static int cb_acked_stream_data_offset(ngtcp2_conn *qc, int64_t stream_id, uint64_t offset,
                                       uint64_t datalen, void *user_data, void *stream_user_data) {
  (void)qc, (void)offset, (void)stream_user_data;
  pp_h3_conn *c = conn_of(user_data);
  if (!c->h3) return 0;
  int rv = nghttp3_conn_add_ack_offset(c->h3, stream_id, datalen);
  if (rv != 0) {
    set_app_error(c, rv);
    return NGTCP2_ERR_CALLBACK_FAILURE;
  }
  return 0;
}

static int cb_stream_close(ngtcp2_conn *qc, uint32_t flags, int64_t stream_id,
                           uint64_t app_error_code, void *user_data, void *stream_user_data) {
  (void)stream_user_data;
  pp_h3_conn *c = conn_of(user_data);
  if (!(flags & NGTCP2_STREAM_CLOSE_FLAG_APP_ERROR_CODE_SET)) app_error_code = NGHTTP3_H3_NO_ERROR;
  if (c->h3) {
    int rv = nghttp3_conn_close_stream(c->h3, stream_id, app_error_code);
    if (rv != 0 && rv != NGHTTP3_ERR_STREAM_NOT_FOUND) {
      set_app_error(c, rv);
      return NGTCP2_ERR_CALLBACK_FAILURE;
    }
  }
  /* A client request stream ended: let the client open another (concurrency stays at max). */
  if (ngtcp2_is_bidi_stream(stream_id) && !ngtcp2_conn_is_local_stream(qc, stream_id))
    ngtcp2_conn_extend_max_streams_bidi(qc, 1);
  return 0;
}

/* The client aborted a request stream (RESET_STREAM or STOP_SENDING): the owner learns at once
 * with the client's code; the rest of the stream is torn down outside ngtcp2. */
static void peer_abort(pp_h3_conn *c, int64_t stream_id, uint64_t code) {
  pp_h3_stream *s = stream_of(c, stream_id);
  if (!s) return;
  c->srv->stats.peer_resets++;
  detach(c, s, code);
  if (!s->want_reset) {
    s->want_reset = 1;
    s->reset_code = NGHTTP3_H3_REQUEST_CANCELLED;
    owe_work(c);
  }
}

static int cb_stream_reset(ngtcp2_conn *qc, int64_t stream_id, uint64_t final_size,
                           uint64_t app_error_code, void *user_data, void *stream_user_data) {
  (void)qc, (void)final_size, (void)stream_user_data;
  pp_h3_conn *c = conn_of(user_data);
  if (c->h3) nghttp3_conn_shutdown_stream_read(c->h3, stream_id);
  peer_abort(c, stream_id, app_error_code);
  return 0;
}

/* We stopped reading a stream (shutdown_stream_read, ours or nghttp3's): nghttp3 must drop what
 * it buffered for it. A client's STOP_SENDING has no callback in ngtcp2 0.12: ngtcp2 answers it
 * with RESET_STREAM itself, our writes then fail with STREAM_SHUT_WR, and the owner hears the
 * client's code from stream_close. */
static int cb_stream_stop_sending(ngtcp2_conn *qc, int64_t stream_id, uint64_t app_error_code,
                                  void *user_data, void *stream_user_data) {
  (void)qc, (void)app_error_code, (void)stream_user_data;
  pp_h3_conn *c = conn_of(user_data);
  if (c->h3) nghttp3_conn_shutdown_stream_read(c->h3, stream_id);
  return 0;
}

static int cb_extend_max_stream_data(ngtcp2_conn *qc, int64_t stream_id, uint64_t max_data,
                                     void *user_data, void *stream_user_data) {
  (void)qc, (void)max_data, (void)stream_user_data;
  pp_h3_conn *c = conn_of(user_data);
  if (c->h3 && nghttp3_conn_unblock_stream(c->h3, stream_id) != 0)
    return NGTCP2_ERR_CALLBACK_FAILURE;
  return 0;
}

static int cb_extend_max_remote_streams_bidi(ngtcp2_conn *qc, uint64_t max_streams,
                                             void *user_data) {
  (void)qc;
  pp_h3_conn *c = conn_of(user_data);
  if (c->h3) nghttp3_conn_set_max_client_streams_bidi(c->h3, max_streams);
  return 0;
}

static void cb_rand(uint8_t *dest, size_t destlen, const ngtcp2_rand_ctx *rand_ctx) {
  rand_bytes(rand_ctx->native_handle, dest, destlen);
}

static int cb_get_new_connection_id(ngtcp2_conn *qc, ngtcp2_cid *cid, uint8_t *token, size_t cidlen,
                                    void *user_data) {
  (void)qc;
  pp_h3_conn *c = conn_of(user_data);
  pp_h3_server *srv = c->srv;
  for (int tries = 0; tries < 8; tries++) {
    uint8_t id[NGTCP2_MAX_CIDLEN];
    rand_bytes(srv, id, cidlen);
    if (cid_add(srv, c, id, cidlen) != 0) continue;
    ngtcp2_cid_init(cid, id, cidlen);
    srv->stats.cids_issued++;
    if (ngtcp2_crypto_generate_stateless_reset_token(token, srv->cfg.secret, PP_H3_SECRET_LEN,
                                                     cid) != 0)
      return NGTCP2_ERR_CALLBACK_FAILURE;
    return 0;
  }
  return NGTCP2_ERR_CALLBACK_FAILURE;
}

static int cb_remove_connection_id(ngtcp2_conn *qc, const ngtcp2_cid *cid, void *user_data) {
  (void)qc;
  pp_h3_conn *c = conn_of(user_data);
  c->srv->stats.cids_retired++;
  cid_remove(c->srv, cid->data, cid->datalen);
  return 0;
}

static ngtcp2_conn *get_conn(ngtcp2_crypto_conn_ref *ref) {
  return ((pp_h3_conn *)ref->user_data)->qc;
}

/* ---- connections ---- */

static void conn_free(pp_h3_conn *c) {
  pp_h3_server *srv = c->srv;
  /* The owner hears about every stream it holds before the connection goes. */
  for (pp_h3_stream *s = c->streams; s; s = s->next)
    detach(c, s, s->detach_pending ? s->close_code : NGHTTP3_H3_REQUEST_CANCELLED);
  if (srv->cb->on_conn_close) srv->cb->on_conn_close(srv, c);
  while (c->streams)
    stream_free(c, c->streams);
  cid_remove_all(srv, c);
  if (c->dirty) {
    pp_h3_conn **pp = &srv->dirty;
    while (*pp && *pp != c)
      pp = &(*pp)->dirty_next;
    if (*pp) *pp = c->dirty_next;
  }
  if (c->h3) nghttp3_conn_del(c->h3);
  if (c->qc) ngtcp2_conn_del(c->qc);
  if (c->tls) gnutls_deinit(c->tls);
  pp_buf_dispose(&c->close_pkt);
  if (c->prev)
    c->prev->next = c->next;
  else
    srv->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  srv->conn_count--;
  free(c);
}

static void reap(pp_h3_server *srv) {
  for (pp_h3_conn *c = srv->conns; c;) {
    pp_h3_conn *next = c->next;
    if (c->state == CS_DEAD) conn_free(c);
    c = next;
  }
}

static void path_of(pp_h3_conn *c, ngtcp2_path *path, const struct sockaddr *local,
                    socklen_t local_len, const struct sockaddr *remote, socklen_t remote_len) {
  (void)c;
  path->local.addr = (ngtcp2_sockaddr *)(uintptr_t)local;
  path->local.addrlen = local_len;
  path->remote.addr = (ngtcp2_sockaddr *)(uintptr_t)remote;
  path->remote.addrlen = remote_len;
  path->user_data = NULL;
}

/* Enters the closing period with a CONNECTION_CLOSE built from the first error recorded. */
static void conn_close(pp_h3_conn *c, int liberr, uint64_t now) {
  if (c->state != CS_OPEN) return;
  pp_h3_server *srv = c->srv;
  ngtcp2_connection_close_error ccerr;
  ngtcp2_connection_close_error_default(&ccerr);
  if (c->ccerr_kind == 1)
    ngtcp2_connection_close_error_set_application_error(&ccerr, c->ccerr_code, NULL, 0);
  else if (c->ccerr_kind == 2)
    ngtcp2_connection_close_error_set_transport_error(&ccerr, c->ccerr_code, NULL, 0);
  else if (liberr == NGTCP2_ERR_CRYPTO)
    ngtcp2_connection_close_error_set_transport_error_tls_alert(
        &ccerr, ngtcp2_conn_get_tls_alert(c->qc), NULL, 0);
  else
    ngtcp2_connection_close_error_set_transport_error_liberr(&ccerr, liberr, NULL, 0);
  if (liberr == NGTCP2_ERR_STREAM_LIMIT)
    srv->stats.stream_limit_errors++;
  else if (!c->ccerr_kind && liberr != 0)
    srv->stats.protocol_errors++;
  c->state = CS_CLOSING;
  c->close_at = now + 3 * ngtcp2_conn_get_pto(c->qc);
  if (ngtcp2_conn_is_in_draining_period(c->qc)) {
    c->state = CS_DRAINING;
    return;
  }
  ngtcp2_path_storage ps;
  ngtcp2_path_storage_zero(&ps);
  ngtcp2_pkt_info pi;
  uint8_t buf[PP_H3_MAX_DATAGRAM];
  ngtcp2_ssize n =
      ngtcp2_conn_write_connection_close(c->qc, &ps.path, &pi, buf, sizeof buf, &ccerr, now);
  if (n <= 0) {
    c->state = CS_DEAD; /* nothing to say (e.g. no keys yet): just go */
    return;
  }
  c->close_pkt.len = 0;
  pp_buf_append(&c->close_pkt, buf, (size_t)n);
  c->close_pkt_at = now;
  out_push(srv, buf, (size_t)n, (struct sockaddr *)ps.path.local.addr, ps.path.local.addrlen,
           (struct sockaddr *)ps.path.remote.addr, ps.path.remote.addrlen);
}

/* Deferred work on streams, outside ngtcp2 and nghttp3. */
static void run_pending(pp_h3_conn *c) {
  if (!c->pending_work || c->state != CS_OPEN) return;
  c->pending_work = 0;
  for (pp_h3_stream *s = c->streams; s;) {
    pp_h3_stream *next = s->next;
    int64_t id = s->id;
    if (s->detach_pending) detach(c, s, s->close_code);
    if (s->want_stop) {
      s->want_stop = 0;
      ngtcp2_conn_shutdown_stream_read(c->qc, id, NGHTTP3_H3_NO_ERROR);
    }
    if (s->want_shut_rd) {
      s->want_shut_rd = 0;
      ngtcp2_conn_shutdown_stream_read(c->qc, id, s->shut_rd_code);
    }
    if (s->want_resume) {
      s->want_resume = 0;
      if (c->h3) nghttp3_conn_resume_stream(c->h3, id);
    }
    if (s->want_shut_wr || s->want_reset) {
      uint64_t code = s->want_reset ? s->reset_code : s->shut_wr_code;
      int full = s->want_reset;
      s->want_shut_wr = s->want_reset = 0;
      if (c->h3) nghttp3_conn_shutdown_stream_write(c->h3, id);
      /* May close the stream at once (stream_close frees s): s is not used after this. */
      if (full)
        ngtcp2_conn_shutdown_stream(c->qc, id, code);
      else
        ngtcp2_conn_shutdown_stream_write(c->qc, id, code);
    }
    s = next;
  }
}

/* Writes everything the connection has to send, up to WRITES_PER_CALL datagrams. */
static void conn_write(pp_h3_conn *c, uint64_t now) {
  pp_h3_server *srv = c->srv;
  if (c->state != CS_OPEN) return;
  c->want_write = 0;
  run_pending(c);
  if (c->goaway_requested && c->h3) {
    c->goaway_requested = 0;
    if (c->goaway == 0) {
      nghttp3_conn_submit_shutdown_notice(c->h3);
      c->goaway = 1;
      c->goaway_at = now + 2 * ngtcp2_conn_get_pto(c->qc);
    }
  }
  if (c->goaway == 1 && now >= c->goaway_at) {
    nghttp3_conn_shutdown(c->h3);
    c->goaway = 2;
  }
  size_t max = ngtcp2_conn_get_max_tx_udp_payload_size(c->qc);
  if (max > PP_H3_MAX_DATAGRAM) max = PP_H3_MAX_DATAGRAM;
  int written = 0;
  for (;;) {
    pp_h3_datagram *d = out_slot(srv);
    if (!d || written >= WRITES_PER_CALL) {
      want(c); /* more may be waiting: the owner's next flush continues */
      break;
    }
    int64_t stream_id = -1;
    int fin = 0;
    nghttp3_vec vec[16];
    nghttp3_ssize veccnt = 0;
    if (c->h3 && ngtcp2_conn_get_max_data_left(c->qc)) {
      veccnt = nghttp3_conn_writev_stream(c->h3, &stream_id, &fin, vec, 16);
      if (veccnt < 0) {
        set_app_error(c, (int)veccnt);
        conn_close(c, NGTCP2_ERR_CALLBACK_FAILURE, now);
        return;
      }
    }
    ngtcp2_ssize ndatalen = -1;
    uint32_t flags = NGTCP2_WRITE_STREAM_FLAG_MORE | (fin ? NGTCP2_WRITE_STREAM_FLAG_FIN : 0);
    ngtcp2_path_storage ps;
    ngtcp2_path_storage_zero(&ps);
    ngtcp2_pkt_info pi;
    ngtcp2_ssize n =
        ngtcp2_conn_writev_stream(c->qc, &ps.path, &pi, d->data, max, &ndatalen, flags, stream_id,
                                  (const ngtcp2_vec *)vec, (size_t)veccnt, now);
    if (n < 0) {
      switch (n) {
      case NGTCP2_ERR_STREAM_DATA_BLOCKED: nghttp3_conn_block_stream(c->h3, stream_id); continue;
      case NGTCP2_ERR_STREAM_SHUT_WR:
        nghttp3_conn_shutdown_stream_write(c->h3, stream_id);
        continue;
      case NGTCP2_ERR_WRITE_MORE:
        if (nghttp3_conn_add_write_offset(c->h3, stream_id, (size_t)ndatalen) != 0) {
          conn_close(c, NGTCP2_ERR_INTERNAL, now);
          return;
        }
        continue;
      default:
        if (n == NGTCP2_ERR_IDLE_CLOSE || n == NGTCP2_ERR_HANDSHAKE_TIMEOUT) {
          c->state = CS_DEAD;
          return;
        }
        conn_close(c, (int)n, now);
        return;
      }
    }
    if (ndatalen >= 0 && stream_id >= 0 &&
        nghttp3_conn_add_write_offset(c->h3, stream_id, (size_t)ndatalen) != 0) {
      conn_close(c, NGTCP2_ERR_INTERNAL, now);
      return;
    }
    if (n == 0) break;
    set_addrs(d, (struct sockaddr *)ps.path.local.addr, ps.path.local.addrlen,
              (struct sockaddr *)ps.path.remote.addr, ps.path.remote.addrlen);
    d->ecn = pi.ecn;
    out_commit(srv, d, (size_t)n);
    written++;
  }
  ngtcp2_conn_update_pkt_tx_time(c->qc, now);
  /* Graceful drain completes when the last request stream is gone. */
  if (c->goaway == 2 && c->stream_count == 0 && c->state == CS_OPEN) {
    c->ccerr_kind = 1;
    c->ccerr_code = NGHTTP3_H3_NO_ERROR;
    conn_close(c, 0, now);
  }
}

/* Feeds one packet to an existing connection. */
static void conn_recv(pp_h3_conn *c, const uint8_t *pkt, size_t len, const ngtcp2_path *path,
                      uint32_t ecn, uint64_t now) {
  pp_h3_server *srv = c->srv;
  c->last_ts = now;
  mark(c);
  if (c->state == CS_DRAINING || c->state == CS_DEAD) {
    srv->stats.drop_closing++;
    return;
  }
  if (c->state == CS_CLOSING) {
    srv->stats.drop_closing++;
    /* RFC 9000 §10.2.1: answer with the CONNECTION_CLOSE again, at most once per PTO. */
    if (c->close_pkt.len && now - c->close_pkt_at >= ngtcp2_conn_get_pto(c->qc)) {
      c->close_pkt_at = now;
      out_push(srv, c->close_pkt.data, c->close_pkt.len, (struct sockaddr *)path->local.addr,
               path->local.addrlen, (struct sockaddr *)path->remote.addr, path->remote.addrlen);
    }
    return;
  }
  ngtcp2_pkt_info pi = {.ecn = ecn};
  int rv = ngtcp2_conn_read_pkt(c->qc, path, &pi, pkt, len, now);
  if (rv != 0) {
    switch (rv) {
    case NGTCP2_ERR_DRAINING:
      c->state = CS_DRAINING;
      c->close_at = now + 3 * ngtcp2_conn_get_pto(c->qc);
      return;
    case NGTCP2_ERR_RETRY:
    case NGTCP2_ERR_DROP_CONN: c->state = CS_DEAD; return;
    case NGTCP2_ERR_DISCARD_PKT: srv->stats.drop_garbage++; return;
    default: conn_close(c, rv, now); return;
    }
  }
  conn_write(c, now);
}

static int conn_new(pp_h3_server *srv, const ngtcp2_pkt_hd *hd, const ngtcp2_cid *odcid,
                    int retried, const ngtcp2_path *path, uint64_t now, pp_h3_conn **out) {
  const pp_h3_limits *l = &srv->cfg.limits;
  pp_h3_conn *c = xcalloc(1, sizeof *c);
  c->srv = srv;
  pp_buf_init(&c->close_pkt);
  memcpy(&c->local, path->local.addr, path->local.addrlen);
  c->local_len = path->local.addrlen;
  memcpy(&c->remote, path->remote.addr, path->remote.addrlen);
  c->remote_len = path->remote.addrlen;
  c->last_ts = now;

  uint8_t scid_bytes[PP_H3_SCID_LEN];
  for (int tries = 0;; tries++) {
    rand_bytes(srv, scid_bytes, sizeof scid_bytes);
    if (!cid_find(srv, scid_bytes, sizeof scid_bytes)) break;
    if (tries == 8) goto fail;
  }
  ngtcp2_cid scid;
  ngtcp2_cid_init(&scid, scid_bytes, sizeof scid_bytes);

  static const ngtcp2_callbacks cbs = {
      .recv_client_initial = ngtcp2_crypto_recv_client_initial_cb,
      .recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb,
      .handshake_completed = cb_handshake_completed,
      .encrypt = ngtcp2_crypto_encrypt_cb,
      .decrypt = ngtcp2_crypto_decrypt_cb,
      .hp_mask = ngtcp2_crypto_hp_mask_cb,
      .recv_stream_data = cb_recv_stream_data,
      .acked_stream_data_offset = cb_acked_stream_data_offset,
      .stream_close = cb_stream_close,
      .rand = cb_rand,
      .get_new_connection_id = cb_get_new_connection_id,
      .remove_connection_id = cb_remove_connection_id,
      .update_key = ngtcp2_crypto_update_key_cb,
      .stream_reset = cb_stream_reset,
      .extend_max_remote_streams_bidi = cb_extend_max_remote_streams_bidi,
      .extend_max_stream_data = cb_extend_max_stream_data,
      .delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb,
      .delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb,
      .get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb,
      .stream_stop_sending = cb_stream_stop_sending,
      .version_negotiation = ngtcp2_crypto_version_negotiation_cb,
      .recv_tx_key = cb_recv_tx_key,
  };
  ngtcp2_settings settings;
  ngtcp2_settings_default(&settings);
  settings.initial_ts = now;
  settings.rand_ctx.native_handle = srv;
  settings.max_tx_udp_payload_size = PP_H3_MAX_DATAGRAM;
  settings.handshake_timeout = l->handshake_timeout_ns;
  /* No window auto-tuning past the configured windows: the owner's consume() is the bound. */
  settings.max_window = l->conn_window;
  settings.max_stream_window = l->stream_window;
  if (hd->token.len && !retried) settings.token = hd->token; /* a verified regular token */

  ngtcp2_transport_params params;
  ngtcp2_transport_params_default(&params);
  params.initial_max_stream_data_bidi_local = l->stream_window;
  params.initial_max_stream_data_bidi_remote = l->stream_window;
  params.initial_max_stream_data_uni = 64 * 1024; /* control + QPACK: consumed as read */
  params.initial_max_data = l->conn_window;
  params.initial_max_streams_bidi = l->max_streams_bidi;
  params.initial_max_streams_uni = 3;
  params.max_idle_timeout = l->idle_timeout_ns;
  params.active_connection_id_limit = 7;
  params.original_dcid = *odcid;
  if (retried) {
    params.retry_scid = hd->dcid;
    params.retry_scid_present = 1;
  }
  params.stateless_reset_token_present = 1;
  if (ngtcp2_crypto_generate_stateless_reset_token(params.stateless_reset_token, srv->cfg.secret,
                                                   PP_H3_SECRET_LEN, &scid) != 0)
    goto fail;

  ngtcp2_path p = *path;
  p.local.addr = (ngtcp2_sockaddr *)&c->local;
  p.remote.addr = (ngtcp2_sockaddr *)&c->remote;
  if (ngtcp2_conn_server_new(&c->qc, &hd->scid, &scid, &p, hd->version, &cbs, &settings, &params,
                             NULL, c) != 0) {
    c->qc = NULL;
    goto fail;
  }
  gnutls_session_t tls;
  if (gnutls_init(&tls, GNUTLS_SERVER | GNUTLS_NO_AUTO_SEND_TICKET) != 0) goto fail;
  c->tls = tls;
  ngtcp2_crypto_conn_ref *ref = (ngtcp2_crypto_conn_ref *)&c->conn_ref_storage;
  ref->get_conn = get_conn;
  ref->user_data = c;
  static const gnutls_datum_t alpn = {(unsigned char *)"h3", 2};
  if (gnutls_priority_set(tls, srv->priority) != 0 ||
      gnutls_credentials_set(tls, GNUTLS_CRD_CERTIFICATE, srv->cred) != 0 ||
      ngtcp2_crypto_gnutls_configure_server_session(tls) != 0 ||
      gnutls_alpn_set_protocols(tls, &alpn, 1, GNUTLS_ALPN_MANDATORY) != 0)
    goto fail;
  gnutls_session_set_ptr(tls, ref);
  ngtcp2_conn_set_tls_native_handle(c->qc, tls);

  c->next = srv->conns;
  if (srv->conns) srv->conns->prev = c;
  srv->conns = c;
  srv->conn_count++;
  srv->stats.connections++;
  cid_add(srv, c, scid_bytes, sizeof scid_bytes);
  /* The client's Initials keep its chosen DCID until it sees ours. */
  cid_add(srv, c, hd->dcid.data, hd->dcid.datalen);
  if (srv->cb->on_conn_open) srv->cb->on_conn_open(srv, c);
  *out = c;
  return 0;
fail:
  if (c->qc) ngtcp2_conn_del(c->qc);
  if (c->tls) gnutls_deinit(c->tls);
  free(c);
  return -1;
}

/* ---- stateless replies ---- */

static void send_version_negotiation(pp_h3_server *srv, const ngtcp2_version_cid *vc,
                                     const struct sockaddr *local, socklen_t local_len,
                                     const struct sockaddr *remote, socklen_t remote_len) {
  uint8_t buf[256];
  uint8_t unused;
  rand_bytes(srv, &unused, 1);
  /* One greased version (RFC 9000 §6.3, 0x?a?a?a?a) beside v1 keeps clients honest. */
  uint32_t sv[2] = {NGTCP2_PROTO_VER_V1, 0x1a2a3a4au};
  ngtcp2_ssize n = ngtcp2_pkt_write_version_negotiation(buf, sizeof buf, unused, vc->scid,
                                                        vc->scidlen, vc->dcid, vc->dcidlen, sv, 2);
  if (n < 0) return;
  if (out_push(srv, buf, (size_t)n, local, local_len, remote, remote_len) == 0)
    srv->stats.version_negotiations++;
}

static void send_retry(pp_h3_server *srv, const ngtcp2_pkt_hd *hd, const struct sockaddr *local,
                       socklen_t local_len, const struct sockaddr *remote, socklen_t remote_len,
                       uint64_t now) {
  uint8_t token[NGTCP2_CRYPTO_MAX_RETRY_TOKENLEN];
  uint8_t scid_bytes[PP_H3_SCID_LEN];
  rand_bytes(srv, scid_bytes, sizeof scid_bytes);
  ngtcp2_cid scid;
  ngtcp2_cid_init(&scid, scid_bytes, sizeof scid_bytes);
  ngtcp2_ssize tokenlen = ngtcp2_crypto_generate_retry_token(
      token, srv->cfg.secret, PP_H3_SECRET_LEN, hd->version, (const ngtcp2_sockaddr *)remote,
      remote_len, &scid, &hd->dcid, now);
  if (tokenlen < 0) return;
  uint8_t buf[256];
  ngtcp2_ssize n = ngtcp2_crypto_write_retry(buf, sizeof buf, hd->version, &hd->scid, &scid,
                                             &hd->dcid, token, (size_t)tokenlen);
  if (n < 0) return;
  if (out_push(srv, buf, (size_t)n, local, local_len, remote, remote_len) == 0)
    srv->stats.retries_sent++;
}

/* CONNECTION_CLOSE(INVALID_TOKEN) in an Initial protected with the keys of the client's DCID
 * (what it expects from us): our SCID is that DCID, as ngtcp2's examples do. */
static void send_invalid_token_close(pp_h3_server *srv, const ngtcp2_pkt_hd *hd,
                                     const struct sockaddr *local, socklen_t local_len,
                                     const struct sockaddr *remote, socklen_t remote_len) {
  uint8_t buf[PP_H3_MAX_DATAGRAM];
  ngtcp2_ssize n = ngtcp2_crypto_write_connection_close(buf, sizeof buf, hd->version, &hd->scid,
                                                        &hd->dcid, NGTCP2_INVALID_TOKEN, NULL, 0);
  if (n > 0) out_push(srv, buf, (size_t)n, local, local_len, remote, remote_len);
}

static void send_stateless_reset(pp_h3_server *srv, const uint8_t *dcid, size_t len, size_t pktlen,
                                 const struct sockaddr *local, socklen_t local_len,
                                 const struct sockaddr *remote, socklen_t remote_len,
                                 uint64_t now) {
  const pp_h3_limits *l = &srv->cfg.limits;
  /* Token bucket: reset_rate per second, reset_burst deep. */
  if (now > srv->reset_last_ns) {
    srv->reset_tokens += (double)(now - srv->reset_last_ns) * l->reset_rate / 1e9;
    if (srv->reset_tokens > l->reset_burst) srv->reset_tokens = l->reset_burst;
    srv->reset_last_ns = now;
  }
  /* RFC 9000 §10.3: shorter than the packet that triggered it (no loops between two servers),
   * and at least 21 bytes, so a packet of 22 bytes or less gets none. */
  size_t randlen = pktlen > 1 + NGTCP2_STATELESS_RESET_TOKENLEN
                       ? pktlen - 1 - NGTCP2_STATELESS_RESET_TOKENLEN
                       : 0;
  if (randlen > 40) randlen = 40;
  if (randlen < NGTCP2_MIN_STATELESS_RESET_RANDLEN + 1 || srv->reset_tokens < 1.0) {
    srv->stats.resets_rate_limited++;
    return;
  }
  srv->reset_tokens -= 1.0;
  ngtcp2_cid cid;
  ngtcp2_cid_init(&cid, dcid, len);
  uint8_t token[NGTCP2_STATELESS_RESET_TOKENLEN];
  if (ngtcp2_crypto_generate_stateless_reset_token(token, srv->cfg.secret, PP_H3_SECRET_LEN,
                                                   &cid) != 0)
    return;
  uint8_t rnd[40], buf[64];
  rand_bytes(srv, rnd, randlen);
  ngtcp2_ssize n = ngtcp2_pkt_write_stateless_reset(buf, sizeof buf, token, rnd, randlen - 1);
  if (n < 0) return;
  if (out_push(srv, buf, (size_t)n, local, local_len, remote, remote_len) == 0)
    srv->stats.stateless_resets++;
}

/* ---- the server ---- */

int pp_h3_server_init(pp_h3_server *srv, const pp_h3_callbacks *cb, const pp_h3_config *cfg,
                      void *data) {
  if (!srv || !cb || !cfg || !cfg->cert_file || !cfg->key_file) return PP_H3_EINVAL;
  memset(srv, 0, sizeof *srv);
  srv->cb = cb;
  srv->cfg = *cfg;
  srv->cfg.cert_file = srv->cfg.key_file = NULL;
  srv->data = data;
  pp_h3_limits *l = &srv->cfg.limits;
  if (l->out_queue == 0 || l->max_streams_bidi == 0 || l->conn_window < l->stream_window)
    return PP_H3_EINVAL;
  gnutls_certificate_credentials_t cred;
  if (gnutls_certificate_allocate_credentials(&cred) != 0) return PP_H3_ETLS;
  if (gnutls_certificate_set_x509_key_file2(cred, cfg->cert_file, cfg->key_file,
                                            GNUTLS_X509_FMT_PEM, NULL, 0) < 0) {
    gnutls_certificate_free_credentials(cred);
    return PP_H3_ECERT;
  }
  gnutls_priority_t prio;
  if (gnutls_priority_init2(&prio, PRIORITY, NULL, 0) != 0) {
    gnutls_certificate_free_credentials(cred);
    return PP_H3_ETLS;
  }
  srv->cred = cred;
  srv->priority = prio;
  srv->cid_nbuckets = 1024;
  srv->cid_buckets = xcalloc(srv->cid_nbuckets, sizeof(void *));
  srv->outq = xcalloc(l->out_queue, sizeof *srv->outq);
  srv->reset_tokens = l->reset_burst;
  pp_buf_init(&srv->scratch);
  pp_buf_init(&srv->nvbuf);
  return 0;
}

void pp_h3_server_dispose(pp_h3_server *srv) {
  while (srv->conns)
    conn_free(srv->conns);
  for (chunk *k = srv->chunk_free; k;) {
    chunk *next = k->next;
    free(k);
    k = next;
  }
  for (pp_h3_stream *s = srv->stream_free; s;) {
    pp_h3_stream *next = s->next;
    pp_buf_dispose(&s->hdr_raw);
    pp_buf_dispose(&s->hdr_spans);
    pp_buf_dispose(&s->hdr_list);
    free(s);
    s = next;
  }
  free(srv->cid_buckets);
  free(srv->outq);
  pp_buf_dispose(&srv->scratch);
  pp_buf_dispose(&srv->nvbuf);
  gnutls_priority_deinit(srv->priority);
  gnutls_certificate_free_credentials(srv->cred);
  memset(srv, 0, sizeof *srv);
}

/* Visits every connection touched since the last visit: writes what it has to send and reports
 * a changed deadline. A connection that still wants to write (full out queue) goes back on the
 * list for the next flush. */
static void flush_all(pp_h3_server *srv, uint64_t now) {
  pp_h3_conn *c = srv->dirty;
  srv->dirty = NULL;
  while (c) {
    pp_h3_conn *next = c->dirty_next;
    c->dirty = 0;
    c->dirty_next = NULL;
    if (c->want_write || c->goaway_requested) conn_write(c, now);
    if (c->state != CS_DEAD && srv->cb->on_conn_timer) {
      uint64_t e = pp_h3_conn_expiry(c);
      if (e != c->armed) {
        c->armed = e;
        srv->cb->on_conn_timer(srv, c, e);
      }
    }
    c = next;
  }
}

int pp_h3_server_recv(pp_h3_server *srv, const uint8_t *pkt, size_t len,
                      const struct sockaddr *local, socklen_t local_len,
                      const struct sockaddr *remote, socklen_t remote_len, uint32_t ecn,
                      uint64_t now_ns) {
  if (srv->depth) return PP_H3_EREENTER;
  if (!pkt || !local || !remote || local_len > sizeof(struct sockaddr_storage) ||
      remote_len > sizeof(struct sockaddr_storage))
    return PP_H3_EINVAL;
  srv->stats.datagrams_in++;
  srv->stats.bytes_in += len;
  if (len == 0) { /* ngtcp2_pkt_decode_version_cid asserts on an empty datagram */
    srv->stats.drop_garbage++;
    return 0;
  }
  ngtcp2_version_cid vc;
  int rv = ngtcp2_pkt_decode_version_cid(&vc, pkt, len, PP_H3_SCID_LEN);
  if (rv == NGTCP2_ERR_VERSION_NEGOTIATION) {
    srv->stats.drop_bad_version++;
    /* Only for a datagram big enough to be a client's first flight (RFC 9000 §6.1). */
    if (len >= MIN_INITIAL_DATAGRAM)
      send_version_negotiation(srv, &vc, local, local_len, remote, remote_len);
    return 0;
  }
  if (rv != 0) {
    /* ngtcp2 only asks for Version Negotiation at 1200 bytes and up; a smaller long header of
     * a version we do not speak is still that, not garbage. */
    if (len >= 5 && (pkt[0] & 0x80)) {
      uint32_t v = (uint32_t)pkt[1] << 24 | (uint32_t)pkt[2] << 16 | (uint32_t)pkt[3] << 8 | pkt[4];
      if (v != 0 && !ngtcp2_is_supported_version(v)) {
        srv->stats.drop_bad_version++;
        return 0;
      }
    }
    srv->stats.drop_garbage++;
    return 0;
  }
  ngtcp2_path path;
  path_of(NULL, &path, local, local_len, remote, remote_len);
  struct cid_entry *e = cid_find(srv, vc.dcid, vc.dcidlen);
  if (e) {
    srv->depth++;
    conn_recv(e->conn, pkt, len, &path, ecn, now_ns);
    flush_all(srv, now_ns);
    srv->depth--;
    reap(srv);
    return 0;
  }
  if (!(pkt[0] & 0x80)) {
    srv->stats.drop_unknown_cid++;
    send_stateless_reset(srv, vc.dcid, vc.dcidlen, len, local, local_len, remote, remote_len,
                         now_ns);
    return 0;
  }
  ngtcp2_pkt_hd hd;
  ngtcp2_ssize hdlen = ngtcp2_pkt_decode_hd_long(&hd, pkt, len);
  if (hdlen < 0) {
    srv->stats.drop_garbage++;
    return 0;
  }
  if (hd.type != NGTCP2_PKT_INITIAL) {
    srv->stats.drop_unknown_cid++; /* 0-RTT / Handshake for no connection of ours */
    return 0;
  }
  if (len < MIN_INITIAL_DATAGRAM) {
    srv->stats.drop_small_initial++;
    return 0;
  }
  if (len > srv->cfg.limits.max_initial_datagram) {
    srv->stats.drop_large_initial++;
    return 0;
  }
  if ((size_t)hdlen + hd.len > len) {
    srv->stats.drop_truncated++;
    return 0;
  }
  if (ngtcp2_accept(&hd, pkt, len) != 0) {
    srv->stats.drop_garbage++;
    return 0;
  }
  ngtcp2_cid odcid = hd.dcid;
  int retried = 0, validated = 0;
  if (hd.token.len) {
    if (hd.token.base[0] == NGTCP2_CRYPTO_TOKEN_MAGIC_RETRY) {
      if (ngtcp2_crypto_verify_retry_token(&odcid, hd.token.base, hd.token.len, srv->cfg.secret,
                                           PP_H3_SECRET_LEN, hd.version,
                                           (const ngtcp2_sockaddr *)remote, remote_len, &hd.dcid,
                                           srv->cfg.limits.retry_token_ttl_ns, now_ns) != 0) {
        srv->stats.drop_token_invalid++;
        send_invalid_token_close(srv, &hd, local, local_len, remote, remote_len);
        return 0;
      }
      retried = validated = 1;
    } else if (hd.token.base[0] == NGTCP2_CRYPTO_TOKEN_MAGIC_REGULAR &&
               ngtcp2_crypto_verify_regular_token(hd.token.base, hd.token.len, srv->cfg.secret,
                                                  PP_H3_SECRET_LEN, (const ngtcp2_sockaddr *)remote,
                                                  remote_len, 3600 * NGTCP2_SECONDS, now_ns) == 0) {
      validated = 1;
    } else {
      hd.token.len = 0; /* unknown or stale: as if none */
    }
  }
  if (srv->cfg.retry && !validated) {
    send_retry(srv, &hd, local, local_len, remote, remote_len, now_ns);
    return 0;
  }
  if (srv->conn_count >= srv->cfg.limits.max_connections) {
    srv->stats.drop_too_many_conns++;
    return 0;
  }
  pp_h3_conn *c;
  srv->depth++;
  if (conn_new(srv, &hd, &odcid, retried, &path, now_ns, &c) == 0) {
    conn_recv(c, pkt, len, &path, ecn, now_ns);
    flush_all(srv, now_ns);
  }
  srv->depth--;
  reap(srv);
  return 0;
}

int pp_h3_server_flush(pp_h3_server *srv, uint64_t now_ns) {
  if (srv->depth) return PP_H3_EREENTER;
  srv->depth++;
  flush_all(srv, now_ns);
  srv->depth--;
  reap(srv);
  return 0;
}

uint64_t pp_h3_conn_expiry(pp_h3_conn *c) {
  switch (c->state) {
  case CS_CLOSING:
  case CS_DRAINING: return c->close_at;
  case CS_DEAD: return 0;
  default: break;
  }
  uint64_t t = ngtcp2_conn_get_expiry(c->qc);
  if (c->goaway == 1) t = min_u64(t, c->goaway_at);
  return t;
}

static void conn_expire(pp_h3_conn *c, uint64_t now) {
  c->last_ts = now;
  mark(c);
  if (c->state == CS_CLOSING || c->state == CS_DRAINING) {
    if (now >= c->close_at) c->state = CS_DEAD;
    return;
  }
  if (c->state != CS_OPEN) return;
  int rv = ngtcp2_conn_handle_expiry(c->qc, now);
  if (rv != 0) {
    if (rv == NGTCP2_ERR_IDLE_CLOSE || rv == NGTCP2_ERR_HANDSHAKE_TIMEOUT) {
      c->srv->stats.idle_closes++;
      c->state = CS_DEAD; /* silently: the client has gone or will time out alike */
      return;
    }
    conn_close(c, rv, now);
    return;
  }
  conn_write(c, now);
}

int pp_h3_conn_handle_expiry(pp_h3_conn *c, uint64_t now_ns) {
  pp_h3_server *srv = c->srv;
  if (srv->depth) return PP_H3_EREENTER;
  srv->depth++;
  conn_expire(c, now_ns);
  flush_all(srv, now_ns);
  srv->depth--;
  int gone = c->state == CS_DEAD;
  reap(srv);
  return gone;
}

uint64_t pp_h3_server_expiry(pp_h3_server *srv) {
  uint64_t t = srv->dirty ? 0 : UINT64_MAX; /* touched: a flush is due */
  for (pp_h3_conn *c = srv->conns; c; c = c->next)
    t = min_u64(t, pp_h3_conn_expiry(c));
  return t;
}

int pp_h3_server_handle_expiry(pp_h3_server *srv, uint64_t now_ns) {
  if (srv->depth) return PP_H3_EREENTER;
  srv->depth++;
  for (pp_h3_conn *c = srv->conns; c; c = c->next)
    if (pp_h3_conn_expiry(c) <= now_ns) conn_expire(c, now_ns);
  flush_all(srv, now_ns);
  srv->depth--;
  reap(srv);
  return 0;
}

void pp_h3_conn_goaway(pp_h3_conn *c) {
  if (c->state != CS_OPEN) return;
  if (!c->h3 || !c->handshake_done) {
    /* Nothing in flight can be an accepted request yet: close now. */
    c->ccerr_kind = 1;
    c->ccerr_code = NGHTTP3_H3_NO_ERROR;
    c->goaway = 2;
  }
  c->goaway_requested = 1;
  want(c);
}

int pp_h3_server_shutdown(pp_h3_server *srv, uint64_t now_ns) {
  if (srv->depth) return PP_H3_EREENTER;
  for (pp_h3_conn *c = srv->conns; c; c = c->next)
    pp_h3_conn_goaway(c);
  return pp_h3_server_flush(srv, now_ns);
}

size_t pp_h3_server_conn_count(const pp_h3_server *srv) {
  return srv->conn_count;
}

int pp_h3_conn_handshake_done(const pp_h3_conn *c) {
  return c->handshake_done;
}

/* ---- responses ---- */

static int is_tchar(uint8_t c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
         (c && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static int dropped_name(const uint8_t *n, size_t len) {
  static const char *const names[] = {"connection",    "keep-alive",       "transfer-encoding",
                                      "upgrade",       "proxy-connection", "te",
                                      "http2-settings"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strlen(names[i]) == len && memcmp(names[i], n, len) == 0) return 1;
  return 0;
}

/* Appends one field (offsets now, pointers once scratch is final). */
static void add_field(pp_h3_server *srv, size_t name_off, size_t name_len, const uint8_t *v,
                      size_t vlen) {
  while (vlen && (v[0] == ' ' || v[0] == '\t'))
    v++, vlen--;
  while (vlen && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t' || v[vlen - 1] == '\r'))
    vlen--;
  size_t value_off = srv->scratch.len;
  for (size_t i = 0; i < vlen; i++)
    if (v[i] != '\r' && v[i] != '\0') pp_buf_append(&srv->scratch, &v[i], 1);
  nghttp3_nv nv;
  make_nv(&nv, (const uint8_t *)(uintptr_t)name_off, name_len,
          (const uint8_t *)(uintptr_t)value_off, srv->scratch.len - value_off);
  pp_buf_append(&srv->nvbuf, &nv, sizeof nv);
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
  want(c);
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
  for (size_t i = 0; i < n; i++) {
    const pp_h2_header *p = &pairs[i];
    size_t name_off = srv->scratch.len;
    int ok = p->name_len > 0;
    for (size_t k = 0; k < p->name_len && ok; k++) {
      uint8_t ch = p->name[k];
      if (ch >= 'A' && ch <= 'Z') ch = (uint8_t)(ch - 'A' + 'a');
      if (!is_tchar(ch)) ok = 0;
      pp_buf_append(&srv->scratch, &ch, 1);
    }
    if (!ok || dropped_name(srv->scratch.data + name_off, p->name_len)) {
      srv->scratch.len = name_off;
      continue;
    }
    const uint8_t *v = p->value;
    size_t left = p->value_len;
    do {
      const uint8_t *nl = left ? memchr(v, '\n', left) : NULL;
      size_t part = nl ? (size_t)(nl - v) : left;
      add_field(srv, name_off, p->name_len, v, part);
      if (!nl) break;
      v += part + 1;
      left -= part + 1;
    } while (left > 0);
  }
  if (status < 200) {
    size_t nvlen;
    nghttp3_nv *nva = finish_fields(srv, &nvlen);
    int rv = nghttp3_conn_submit_info(c->h3, stream_id, nva, nvlen);
    want(c);
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
  want(c);
  if (!s->responded || !s->wouldblock) return;
  s->wouldblock = 0;
  s->want_resume = 1;
  owe_work(c);
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
  if (n > s->body_unconsumed) n = (size_t)s->body_unconsumed;
  if (!n) return;
  s->body_unconsumed -= n;
  extend_credit(c, stream_id, n);
  want(c);
}

void pp_h3_reset(pp_h3_conn *c, int64_t stream_id, uint64_t error_code) {
  pp_h3_stream *s = owned_stream(c, stream_id);
  if (!s) return;
  s->want_reset = 1;
  s->reset_code = error_code;
  s->detach_pending = 1;
  s->close_code = error_code;
  owe_work(c);
}

void pp_h3_set_stream_data(pp_h3_conn *c, int64_t stream_id, void *stream_data) {
  pp_h3_stream *s = owned_stream(c, stream_id);
  if (s) s->owner_data = stream_data;
}

size_t pp_h3_stream_count(const pp_h3_conn *c) {
  return c->stream_count;
}
