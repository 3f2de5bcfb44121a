/* Tests for server/proto/h2.c: the session is driven by scripted frames. Two kinds of peer:
 *   - a real nghttp2 client session (requests, bodies, resets, upgrade), its output fed to the
 *     server in pieces of a chosen size and the server's output parsed by it;
 *   - a raw peer that writes hand-built frames (HPACK by nghttp2's deflater, so any field can be
 *     sent, valid or not) and parses the server's output frame by frame itself.
 * Both record what the client saw per stream (status, fields, body, RST code) and the GOAWAY,
 * and the owner records what the session called back. */
#include <CUnit/Basic.h>
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include "server/proto/h2.h"

#define MAXS 512

/* ---- what the client saw ---- */

typedef struct sres {
  int32_t id;
  int status;
  char headers[1024]; /* "name: value\n" per regular response field */
  pp_buf body;
  int rst;
  uint32_t rst_code;
  int closed;
  uint32_t close_code;
} sres;

typedef struct peer {
  sres s[MAXS];
  int n;
  int goaway;
  uint32_t goaway_code;
  int32_t goaway_last;
  int window_updates; /* WINDOW_UPDATE frames received */
  int settings_acks;
} peer;

static sres *peer_stream(peer *p, int32_t id) {
  for (int i = 0; i < p->n; i++)
    if (p->s[i].id == id) return &p->s[i];
  if (p->n == MAXS) return &p->s[MAXS - 1];
  sres *r = &p->s[p->n++];
  memset(r, 0, sizeof *r);
  r->id = id;
  return r;
}

static void peer_dispose(peer *p) {
  for (int i = 0; i < p->n; i++)
    pp_buf_dispose(&p->s[i].body);
  p->n = 0;
}

static void add_header_text(sres *r, const uint8_t *name, size_t nl, const uint8_t *value,
                            size_t vl) {
  if (nl == 7 && memcmp(name, ":status", 7) == 0) {
    r->status = atoi((const char *)value); /* NUL-terminated by nghttp2 */
    return;
  }
  size_t at = strlen(r->headers);
  snprintf(r->headers + at, sizeof r->headers - at, "%.*s: %.*s\n", (int)nl, name, (int)vl, value);
}

/* ---- the owner ---- */

typedef struct rec {
  int32_t id;
  char method[16], scheme[16], authority[64], path[256], protocol[32];
  int has_authority;
  char headers[2048];
  int has_content_length;
  uint64_t content_length;
  int end_stream;
  pp_buf body;
  int body_end;
  int closed;
  uint32_t close_code;
} rec;

typedef struct owner {
  rec r[MAXS];
  int n;
  int refuse_status;   /* on_request returns it */
  int consume_at_once; /* consume body bytes inside on_body */
  int respond_at_once; /* 200 "ok" from inside on_request */
  int closes;
} owner;

static rec *owner_rec(owner *o, int32_t id) {
  for (int i = 0; i < o->n; i++)
    if (o->r[i].id == id) return &o->r[i];
  return NULL;
}

static void span_copy(char *dst, size_t cap, const uint8_t *p, size_t n) {
  if (!p) {
    dst[0] = 0;
    return;
  }
  snprintf(dst, cap, "%.*s", (int)n, p);
}

static int on_request(pp_h2 *h, const pp_h2_request *req, void **stream_data) {
  owner *o = h->data;
  if (o->refuse_status) return o->refuse_status;
  if (o->n == MAXS) return 503;
  rec *r = &o->r[o->n++];
  memset(r, 0, sizeof *r);
  r->id = req->stream_id;
  span_copy(r->method, sizeof r->method, req->method, req->method_len);
  span_copy(r->scheme, sizeof r->scheme, req->scheme, req->scheme_len);
  span_copy(r->path, sizeof r->path, req->path, req->path_len);
  span_copy(r->protocol, sizeof r->protocol, req->protocol, req->protocol_len);
  r->has_authority = req->authority != NULL;
  span_copy(r->authority, sizeof r->authority, req->authority, req->authority_len);
  for (size_t i = 0; i < req->header_count; i++) {
    size_t at = strlen(r->headers);
    snprintf(r->headers + at, sizeof r->headers - at, "%.*s: %.*s\n", (int)req->headers[i].name_len,
             req->headers[i].name, (int)req->headers[i].value_len, req->headers[i].value);
  }
  r->has_content_length = req->has_content_length;
  r->content_length = req->content_length;
  r->end_stream = req->end_stream;
  *stream_data = r;
  if (o->respond_at_once) {
    pp_h2_respond(h, req->stream_id, 200, NULL, 0, 0);
    pp_h2_send_data(h, req->stream_id, (const uint8_t *)"ok", 2);
    pp_h2_send_end(h, req->stream_id);
  }
  return 0;
}

static int on_body(pp_h2 *h, int32_t id, void *sd, const uint8_t *data, size_t len) {
  owner *o = h->data;
  rec *r = sd;
  CU_ASSERT_EQUAL(r->id, id);
  pp_buf_append(&r->body, data, len);
  if (o->consume_at_once) pp_h2_consume(h, id, len);
  return 0;
}

static int on_body_end(pp_h2 *h, int32_t id, void *sd) {
  (void)h;
  rec *r = sd;
  CU_ASSERT_EQUAL(r->id, id);
  r->body_end++;
  return 0;
}

static void on_close(pp_h2 *h, int32_t id, void *sd, uint32_t code) {
  owner *o = h->data;
  rec *r = sd;
  o->closes++;
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  CU_ASSERT_EQUAL(r->id, id);
  CU_ASSERT_EQUAL(r->closed, 0); /* exactly once */
  r->closed++;
  r->close_code = code;
}

static const pp_h2_callbacks owner_cbs = {on_request, on_body, on_body_end, on_close, NULL};

static void owner_dispose(owner *o) {
  for (int i = 0; i < o->n; i++)
    pp_buf_dispose(&o->r[i].body);
  o->n = 0;
}

/* ---- the nghttp2 client peer ---- */

typedef struct client {
  nghttp2_session *s;
  peer p;
} client;

static int c_on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t nl,
                       const uint8_t *value, size_t vl, uint8_t flags, void *ud) {
  (void)s, (void)flags;
  client *c = ud;
  add_header_text(peer_stream(&c->p, f->hd.stream_id), name, nl, value, vl);
  return 0;
}

static int c_on_data(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
                     void *ud) {
  (void)flags;
  client *c = ud;
  pp_buf_append(&peer_stream(&c->p, id)->body, data, len);
  nghttp2_session_consume(s, id, len); /* the client reads everything at once */
  return 0;
}

static int c_on_frame_recv(nghttp2_session *s, const nghttp2_frame *f, void *ud) {
  (void)s;
  client *c = ud;
  if (f->hd.type == NGHTTP2_RST_STREAM) {
    sres *r = peer_stream(&c->p, f->hd.stream_id);
    r->rst = 1;
    r->rst_code = f->rst_stream.error_code;
  } else if (f->hd.type == NGHTTP2_GOAWAY) {
    c->p.goaway = 1;
    c->p.goaway_code = f->goaway.error_code;
    c->p.goaway_last = f->goaway.last_stream_id;
  } else if (f->hd.type == NGHTTP2_WINDOW_UPDATE) {
    c->p.window_updates++;
  } else if (f->hd.type == NGHTTP2_SETTINGS && (f->hd.flags & NGHTTP2_FLAG_ACK)) {
    c->p.settings_acks++;
  }
  return 0;
}

static int c_on_close(nghttp2_session *s, int32_t id, uint32_t code, void *ud) {
  (void)s;
  client *c = ud;
  sres *r = peer_stream(&c->p, id);
  r->closed = 1;
  r->close_code = code;
  return 0;
}

static void client_init(client *c) {
  memset(c, 0, sizeof *c);
  nghttp2_session_callbacks *cbs;
  nghttp2_session_callbacks_new(&cbs);
  nghttp2_session_callbacks_set_on_header_callback(cbs, c_on_header);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, c_on_data);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, c_on_frame_recv);
  nghttp2_session_callbacks_set_on_stream_close_callback(cbs, c_on_close);
  nghttp2_option *opt;
  nghttp2_option_new(&opt);
  nghttp2_option_set_no_auto_window_update(opt, 1);
  CU_ASSERT_EQUAL(nghttp2_session_client_new2(&c->s, cbs, c, opt), 0);
  nghttp2_option_del(opt);
  nghttp2_session_callbacks_del(cbs);
  nghttp2_settings_entry iv[1] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0}};
  nghttp2_submit_settings(c->s, NGHTTP2_FLAG_NONE, iv, 1);
}

static void client_dispose(client *c) {
  nghttp2_session_del(c->s);
  peer_dispose(&c->p);
}

/* A request body served from a static buffer. */
typedef struct upload {
  const uint8_t *data;
  size_t len, off;
} upload;

static ssize_t upload_read(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length,
                           uint32_t *flags, nghttp2_data_source *src, void *ud) {
  (void)s, (void)id, (void)ud;
  upload *u = src->ptr;
  size_t n = u->len - u->off < length ? u->len - u->off : length;
  memcpy(buf, u->data + u->off, n);
  u->off += n;
  if (u->off == u->len) *flags |= NGHTTP2_DATA_FLAG_EOF;
  return (ssize_t)n;
}

#define NV(n, v)                                                                                   \
  { (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, sizeof(v) - 1, NGHTTP2_NV_FLAG_NONE }

static int32_t client_get(client *c, const char *path) {
  nghttp2_nv nva[] = {NV(":method", "GET"),
                      NV(":scheme", "https"),
                      NV(":authority", "example.org"),
                      {(uint8_t *)":path", (uint8_t *)path, 5, strlen(path), 0}};
  int32_t id = nghttp2_submit_request(c->s, NULL, nva, 4, NULL, NULL);
  CU_ASSERT(id > 0);
  return id;
}

static int server_err; /* the last negative pp_h2_feed result */

/* Feeds bytes to the server `step` at a time (0: all at once). */
static void feed(pp_h2 *h, const uint8_t *d, size_t n, size_t step) {
  size_t at = 0;
  while (at < n && !server_err) {
    size_t k = step && n - at > step ? step : n - at;
    ssize_t rv = pp_h2_feed(h, d + at, k);
    if (rv < 0) {
      server_err = (int)rv;
      break;
    }
    CU_ASSERT_EQUAL((size_t)rv, k);
    at += k;
  }
}

/* Drains the server's output, `chunk` bytes per pp_h2_output call (bounded output). */
static void drain(pp_h2 *h, pp_buf *out, size_t chunk) {
  for (int i = 0; i < 100000; i++) {
    ssize_t n = pp_h2_output(h, out, out->len + chunk);
    CU_ASSERT(n >= 0);
    if (n <= 0) break;
  }
}

/* Moves bytes both ways until neither side has anything to say. */
static void pump(pp_h2 *h, client *c, size_t step) {
  pp_buf out;
  pp_buf_init(&out);
  for (int round = 0; round < 1000; round++) {
    int progress = 0;
    const uint8_t *d;
    ssize_t n;
    while ((n = nghttp2_session_mem_send(c->s, &d)) > 0) {
      progress = 1;
      feed(h, d, (size_t)n, step);
    }
    out.len = 0;
    drain(h, &out, 4096);
    if (out.len) {
      progress = 1;
      CU_ASSERT_EQUAL(nghttp2_session_mem_recv(c->s, out.data, out.len), (ssize_t)out.len);
    }
    if (!progress) break;
  }
  pp_buf_dispose(&out);
}

static void server_init(pp_h2 *h, owner *o, const pp_h2_limits *l) {
  memset(o, 0, sizeof *o);
  server_err = 0;
  CU_ASSERT_EQUAL_FATAL(pp_h2_init(h, &owner_cbs, l, o), 0);
}

/* ---- the raw peer ---- */

typedef struct raw {
  nghttp2_hd_deflater *def;
  nghttp2_hd_inflater *inf;
  pp_buf in; /* server output not yet parsed */
  peer p;
} raw;

static void raw_init(raw *r) {
  memset(r, 0, sizeof *r);
  nghttp2_hd_deflate_new(&r->def, 4096);
  nghttp2_hd_inflate_new(&r->inf);
  pp_buf_init(&r->in);
}

static void raw_dispose(raw *r) {
  nghttp2_hd_deflate_del(r->def);
  nghttp2_hd_inflate_del(r->inf);
  pp_buf_dispose(&r->in);
  peer_dispose(&r->p);
}

static void frame(pp_buf *b, uint8_t type, uint8_t flags, int32_t id, const void *payload,
                  size_t len) {
  uint8_t hd[9] = {(uint8_t)(len >> 16), (uint8_t)(len >> 8), (uint8_t)len,       type,       flags,
                   (uint8_t)(id >> 24),  (uint8_t)(id >> 16), (uint8_t)(id >> 8), (uint8_t)id};
  pp_buf_append(b, hd, 9);
  pp_buf_append(b, payload, len);
}

static void raw_preface(pp_buf *b) {
  pp_buf_append(b, NGHTTP2_CLIENT_MAGIC, 24);
  frame(b, NGHTTP2_SETTINGS, 0, 0, NULL, 0);
}

/* Appends a HEADERS frame (END_HEADERS) with the fields given. */
static void raw_headers(raw *r, pp_buf *b, int32_t id, uint8_t flags, const nghttp2_nv *nva,
                        size_t n) {
  uint8_t block[16384];
  ssize_t len = nghttp2_hd_deflate_hd(r->def, block, sizeof block, nva, n);
  CU_ASSERT_FATAL(len >= 0);
  frame(b, NGHTTP2_HEADERS, (uint8_t)(flags | NGHTTP2_FLAG_END_HEADERS), id, block, (size_t)len);
}

static void raw_get(raw *r, pp_buf *b, int32_t id, uint8_t flags) {
  nghttp2_nv nva[] = {NV(":method", "GET"), NV(":scheme", "http"), NV(":authority", "a"),
                      NV(":path", "/")};
  raw_headers(r, b, id, flags, nva, 4);
}

static uint32_t be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Parses complete frames of the server output collected so far. */
static void raw_parse(raw *r) {
  size_t at = 0;
  while (r->in.len - at >= 9) {
    const uint8_t *p = r->in.data + at;
    size_t len = (size_t)p[0] << 16 | (size_t)p[1] << 8 | p[2];
    if (r->in.len - at < 9 + len) break;
    uint8_t type = p[3], flags = p[4];
    int32_t id = (int32_t)(be32(p + 5) & 0x7fffffffu);
    const uint8_t *pl = p + 9;
    if (type == NGHTTP2_HEADERS) {
      sres *s = peer_stream(&r->p, id);
      const uint8_t *blk = pl;
      size_t left = len;
      if (flags & NGHTTP2_FLAG_PRIORITY) blk += 5, left -= 5;
      for (;;) {
        nghttp2_nv nv;
        int fl = 0;
        ssize_t k = nghttp2_hd_inflate_hd2(r->inf, &nv, &fl, blk, left, 1);
        CU_ASSERT_FATAL(k >= 0);
        blk += k;
        left -= (size_t)k;
        if (fl & NGHTTP2_HD_INFLATE_EMIT)
          add_header_text(s, nv.name, nv.namelen, nv.value, nv.valuelen);
        if (fl & NGHTTP2_HD_INFLATE_FINAL) {
          nghttp2_hd_inflate_end_headers(r->inf);
          break;
        }
        if (k == 0 && left == 0) break;
      }
      if (flags & NGHTTP2_FLAG_END_STREAM) s->closed = 1;
    } else if (type == NGHTTP2_DATA) {
      sres *s = peer_stream(&r->p, id);
      pp_buf_append(&s->body, pl, len);
      if (flags & NGHTTP2_FLAG_END_STREAM) s->closed = 1;
    } else if (type == NGHTTP2_RST_STREAM && len == 4) {
      sres *s = peer_stream(&r->p, id);
      s->rst = 1;
      s->rst_code = be32(pl);
    } else if (type == NGHTTP2_GOAWAY && len >= 8) {
      r->p.goaway = 1;
      r->p.goaway_last = (int32_t)(be32(pl) & 0x7fffffffu);
      r->p.goaway_code = be32(pl + 4);
    } else if (type == NGHTTP2_SETTINGS && (flags & NGHTTP2_FLAG_ACK)) {
      r->p.settings_acks++;
    } else if (type == NGHTTP2_WINDOW_UPDATE) {
      r->p.window_updates++;
    }
    at += 9 + len;
  }
  pp_buf_consume(&r->in, at);
}

/* Feeds the raw bytes (step at a time), then drains and parses the server output. */
static void raw_send(pp_h2 *h, raw *r, pp_buf *b, size_t step) {
  feed(h, b->data, b->len, step);
  b->len = 0;
  drain(h, &r->in, 1000);
  raw_parse(r);
}

/* A raw connection past the SETTINGS exchange (our SETTINGS acknowledged if ack). */
static void raw_open(pp_h2 *h, raw *r, int ack) {
  pp_buf b;
  pp_buf_init(&b);
  raw_preface(&b);
  if (ack) frame(&b, NGHTTP2_SETTINGS, NGHTTP2_FLAG_ACK, 0, NULL, 0);
  raw_send(h, r, &b, 0);
  pp_buf_dispose(&b);
}

/* ---- tests ---- */

static void test_preface(void) {
  const uint8_t *m = (const uint8_t *)NGHTTP2_CLIENT_MAGIC;
  for (size_t n = 0; n < 24; n++)
    CU_ASSERT_EQUAL(pp_h2_is_preface(m, n), 0);
  CU_ASSERT_EQUAL(pp_h2_is_preface(m, 24), 1);
  uint8_t more[40];
  memcpy(more, m, 24);
  memset(more + 24, 0, 16);
  CU_ASSERT_EQUAL(pp_h2_is_preface(more, sizeof more), 1);
  for (size_t i = 0; i < 24; i++) {
    uint8_t bad[24];
    memcpy(bad, m, 24);
    bad[i] ^= 0x20;
    for (size_t n = i + 1; n <= 24; n++)
      CU_ASSERT_EQUAL(pp_h2_is_preface(bad, n), -1);
  }
  CU_ASSERT_EQUAL(pp_h2_is_preface((const uint8_t *)"GET / HTTP/1.1\r\n", 16), -1);
  CU_ASSERT_EQUAL(pp_h2_is_preface((const uint8_t *)"PRI * HTTP/1.1\r\n", 16), -1);
}

static void test_get_end_to_end(void) {
  pp_h2 h;
  owner o;
  client c;
  server_init(&h, &o, NULL);
  client_init(&c);
  nghttp2_nv nva[] = {
      NV(":method", "GET"),      NV(":scheme", "https"),     NV(":authority", "example.org"),
      NV(":path", "/hello?x=1"), NV("user-agent", "test/1"), NV("accept", "*/*"),
      NV("cookie", "a=1"),       NV("cookie", "b=2")};
  int32_t id = nghttp2_submit_request(c.s, NULL, nva, 8, NULL, NULL);
  pump(&h, &c, 0);
  CU_ASSERT_EQUAL_FATAL(o.n, 1);
  rec *r = &o.r[0];
  CU_ASSERT_EQUAL(r->id, id);
  CU_ASSERT_STRING_EQUAL(r->method, "GET");
  CU_ASSERT_STRING_EQUAL(r->scheme, "https");
  CU_ASSERT_STRING_EQUAL(r->authority, "example.org");
  CU_ASSERT_STRING_EQUAL(r->path, "/hello?x=1");
  CU_ASSERT_STRING_EQUAL(r->headers, "user-agent: test/1\naccept: */*\ncookie: a=1\ncookie: b=2\n");
  CU_ASSERT_EQUAL(r->end_stream, 1);
  CU_ASSERT_EQUAL(r->has_content_length, 0);
  pp_h2_header pairs[] = {
      {(const uint8_t *)"Content-Type", 12, (const uint8_t *)"text/plain", 10},
      {(const uint8_t *)"X-Multi", 7, (const uint8_t *)"a\nb", 3},
  };
  CU_ASSERT_EQUAL(pp_h2_respond(&h, id, 200, pairs, 2, 0), 0);
  CU_ASSERT_EQUAL(pp_h2_respond(&h, id, 200, pairs, 2, 0), PP_H2_ESTREAM); /* once */
  CU_ASSERT_EQUAL(pp_h2_send_data(&h, id, (const uint8_t *)"hello ", 6), 0);
  CU_ASSERT_EQUAL(pp_h2_send_data(&h, id, (const uint8_t *)"world", 5), 0);
  CU_ASSERT_EQUAL(pp_h2_stream_pending(&h, id), 11);
  CU_ASSERT_EQUAL(pp_h2_pending_total(&h), 11);
  CU_ASSERT_EQUAL(pp_h2_send_end(&h, id), 0);
  CU_ASSERT(pp_h2_want_write(&h));
  pump(&h, &c, 0);
  sres *s = peer_stream(&c.p, id);
  CU_ASSERT_EQUAL(s->status, 200);
  CU_ASSERT_STRING_EQUAL(s->headers, "content-type: text/plain\nx-multi: a\nx-multi: b\n");
  CU_ASSERT(s->body.len == 11 && memcmp(s->body.data, "hello world", 11) == 0);
  CU_ASSERT_EQUAL(s->closed, 1);
  CU_ASSERT_EQUAL(s->close_code, NGHTTP2_NO_ERROR);
  CU_ASSERT_EQUAL(r->closed, 1);
  CU_ASSERT_EQUAL(r->close_code, 0);
  CU_ASSERT_EQUAL(pp_h2_stream_count(&h), 0);
  CU_ASSERT_EQUAL(h.stats.streams_opened, 1);
  CU_ASSERT_EQUAL(h.stats.streams_accepted, 1);
  CU_ASSERT_EQUAL(h.stats.protocol_errors, 0);
  CU_ASSERT_EQUAL(pp_h2_send_data(&h, id, (const uint8_t *)"x", 1), PP_H2_ESTREAM); /* gone */
  CU_ASSERT(!pp_h2_finished(&h)); /* the connection stays open for more requests */
  pp_h2_dispose(&h);
  CU_ASSERT_EQUAL(o.closes, 1); /* dispose does not close it twice */
  client_dispose(&c);
  owner_dispose(&o);
}

/* Response pairs as a Ruby app gives them, and the fields the client sees. */
static void test_pairs_filtering(void) {
  static const struct {
    const char *name, *value, *expect;
  } rows[] = {
      {"Content-Type", "text/html", "content-type: text/html\n"},
      {"X-UPPER-case", "v", "x-upper-case: v\n"},
      {"Set-Cookie", "a=1\nb=2", "set-cookie: a=1\nset-cookie: b=2\n"},
      {"Set-Cookie", "a=1\r\nb=2\r\n", "set-cookie: a=1\nset-cookie: b=2\n"},
      {"X-Empty-Part", "a\n\nb", "x-empty-part: a\nx-empty-part: \nx-empty-part: b\n"},
      {"X-Cr", "a\rb", "x-cr: ab\n"},
      {"X-Space", "  padded \t", "x-space: padded\n"},
      {"Connection", "close", ""},
      {"Keep-Alive", "timeout=5", ""},
      {"Transfer-Encoding", "chunked", ""},
      {"Upgrade", "h2c", ""},
      {"Proxy-Connection", "keep-alive", ""},
      {"TE", "trailers", ""},
      {":status", "500", ""},
      {"bad name", "x", ""},
      {"", "x", ""},
      {"X-Empty", "", "x-empty: \n"},
  };
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    pp_h2 h;
    owner o;
    client c;
    server_init(&h, &o, NULL);
    client_init(&c);
    int32_t id = client_get(&c, "/");
    pump(&h, &c, 0);
    pp_h2_header pair[2] = {
        {(const uint8_t *)rows[i].name, strlen(rows[i].name), (const uint8_t *)rows[i].value,
         strlen(rows[i].value)},
        {(const uint8_t *)"X-After", 7, (const uint8_t *)"1", 1},
    };
    CU_ASSERT_EQUAL(pp_h2_respond(&h, id, 204, pair, 2, 1), 0);
    pump(&h, &c, 0);
    sres *s = peer_stream(&c.p, id);
    char expect[256];
    snprintf(expect, sizeof expect, "%sx-after: 1\n", rows[i].expect);
    CU_ASSERT_EQUAL(s->status, 204);
    CU_ASSERT_STRING_EQUAL(s->headers, expect);
    if (strcmp(s->headers, expect) != 0) printf("\n  row %zu: got [%s]\n", i, s->headers);
    CU_ASSERT_EQUAL(s->rst, 0); /* the client found nothing malformed */
    CU_ASSERT_EQUAL(s->closed, 1);
    pp_h2_dispose(&h);
    client_dispose(&c);
    owner_dispose(&o);
  }
}

static uint8_t big_body[300000];

static void fill_body(void) {
  for (size_t i = 0; i < sizeof big_body; i++)
    big_body[i] = (uint8_t)(i * 7 + (i >> 9));
}

/* The body reaches the owner, and the client's windows reopen only once the owner consumes. */
static void test_post_flow_control(void) {
  pp_h2_limits l;
  pp_h2_limits_default(&l);
  l.stream_window = 16384;
  l.conn_window = 65535;
  pp_h2 h;
  owner o;
  client c;
  server_init(&h, &o, &l);
  client_init(&c);
  pump(&h, &c, 0); /* SETTINGS both ways and acknowledged: our 16384 window is in force */
  upload u = {big_body, 100000, 0};
  nghttp2_nv nva[] = {NV(":method", "POST"), NV(":scheme", "http"), NV(":authority", "a"),
                      NV(":path", "/up"), NV("content-length", "100000")};
  nghttp2_data_provider prd = {.source.ptr = &u, .read_callback = upload_read};
  int32_t id = nghttp2_submit_request(c.s, NULL, nva, 5, &prd, NULL);
  pump(&h, &c, 0);
  CU_ASSERT_EQUAL_FATAL(o.n, 1);
  rec *r = &o.r[0];
  CU_ASSERT_EQUAL(r->has_content_length, 1);
  CU_ASSERT_EQUAL(r->content_length, 100000);
  CU_ASSERT_EQUAL(r->end_stream, 0);
  CU_ASSERT_EQUAL(r->body.len, 16384); /* one stream window */
  CU_ASSERT_EQUAL(nghttp2_session_get_stream_remote_window_size(c.s, id), 0);
  CU_ASSERT_EQUAL(c.p.window_updates, 0);
  pump(&h, &c, 0); /* nothing moves while the owner sits on the bytes */
  CU_ASSERT_EQUAL(r->body.len, 16384);
  CU_ASSERT_EQUAL(nghttp2_session_get_stream_remote_window_size(c.s, id), 0);
  CU_ASSERT_EQUAL(c.p.window_updates, 0);
  /* Consuming half a window is not yet worth a WINDOW_UPDATE (nghttp2 sends at half). */
  pp_h2_consume(&h, id, 4096);
  pump(&h, &c, 0);
  CU_ASSERT_EQUAL(r->body.len, 16384);
  size_t consumed = 4096;
  for (int i = 0; i < 100 && !r->body_end; i++) {
    pp_h2_consume(&h, id, r->body.len - consumed);
    consumed = r->body.len;
    pump(&h, &c, 0);
    CU_ASSERT(r->body.len - consumed <= 16384); /* never more than a window unconsumed */
  }
  CU_ASSERT_EQUAL(r->body_end, 1);
  CU_ASSERT(r->body.len == 100000 && memcmp(r->body.data, big_body, 100000) == 0);
  CU_ASSERT(c.p.window_updates > 0);
  pp_h2_consume(&h, id, r->body.len - consumed);
  pp_h2_consume(&h, id, 1000000); /* more than delivered: capped, harmless */
  pp_h2_respond(&h, id, 201, NULL, 0, 1);
  pump(&h, &c, 0);
  CU_ASSERT_EQUAL(peer_stream(&c.p, id)->status, 201);
  CU_ASSERT_EQUAL(r->closed, 1);
  CU_ASSERT_EQUAL(r->close_code, 0);
  /* The connection window is whole again: a second upload of a full window flows. */
  /* nghttp2 returns consumed bytes once they reach half the window: most are back. */
  CU_ASSERT(nghttp2_session_get_remote_window_size(c.s) > 65535 / 2);
  pp_h2_dispose(&h);
  client_dispose(&c);
  owner_dispose(&o);
}

/* A stream's bytes the owner has not consumed hold that stream's window only: the connection
 * window comes back at once (so queued uploads cannot stall the other streams' bodies), and a
 * stream that ends (reset by the client) leaves the connection window whole. */
static void test_closed_stream_returns_connection_window(void) {
  pp_h2_limits l;
  pp_h2_limits_default(&l);
  l.stream_window = 65535;
  l.conn_window = 65535;
  pp_h2 h;
  owner o;
  client c;
  server_init(&h, &o, &l);
  client_init(&c);
  upload u = {big_body, 200000, 0};
  nghttp2_nv nva[] = {NV(":method", "POST"), NV(":scheme", "http"), NV(":authority", "a"),
                      NV(":path", "/up")};
  nghttp2_data_provider prd = {.source.ptr = &u, .read_callback = upload_read};
  int32_t id = nghttp2_submit_request(c.s, NULL, nva, 4, &prd, NULL);
  pump(&h, &c, 0);
  CU_ASSERT_EQUAL(o.r[0].body.len, 65535);
  CU_ASSERT_EQUAL(nghttp2_session_get_stream_remote_window_size(c.s, id), 0); /* back-pressure */
  CU_ASSERT_EQUAL(nghttp2_session_get_remote_window_size(c.s), 65535); /* no head-of-line block */
  nghttp2_submit_rst_stream(c.s, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
  pump(&h, &c, 0);
  CU_ASSERT_EQUAL(o.r[0].closed, 1);
  CU_ASSERT_EQUAL(o.r[0].close_code, NGHTTP2_CANCEL);
  CU_ASSERT_EQUAL(nghttp2_session_get_remote_window_size(c.s), 65535);
  pp_h2_consume(&h, id, 65535); /* too late: ignored */
  pump(&h, &c, 0);
  CU_ASSERT_EQUAL(nghttp2_session_get_remote_window_size(c.s), 65535);
  pp_h2_dispose(&h);
  client_dispose(&c);
  owner_dispose(&o);
}

static void test_deferred_data_resumes(void) {
  pp_h2 h;
  owner o;
  client c;
  server_init(&h, &o, NULL);
  client_init(&c);
  int32_t id = client_get(&c, "/slow");
  pump(&h, &c, 0);
  CU_ASSERT_EQUAL(pp_h2_respond(&h, id, 200, NULL, 0, 0), 0);
  pump(&h, &c, 0);
  sres *s = peer_stream(&c.p, id);
  CU_ASSERT_EQUAL(s->status, 200);
  CU_ASSERT_EQUAL(s->body.len, 0);
  CU_ASSERT_EQUAL(s->closed, 0);
  CU_ASSERT(!pp_h2_want_write(&h)); /* the data source is deferred */
  for (int i = 0; i < 3; i++) {
    CU_ASSERT_EQUAL(pp_h2_send_data(&h, id, (const uint8_t *)"abc", 3), 0);
    CU_ASSERT(pp_h2_want_write(&h));
    pump(&h, &c, 0);
    CU_ASSERT_EQUAL(s->body.len, 3u * (unsigned)(i + 1));
    CU_ASSERT_EQUAL(s->closed, 0);
    CU_ASSERT_EQUAL(pp_h2_stream_pending(&h, id), 0);
  }
  CU_ASSERT_EQUAL(pp_h2_send_end(&h, id), 0);
  pump(&h, &c, 0);
  CU_ASSERT_EQUAL(s->closed, 1);
  CU_ASSERT(s->body.len == 9 && memcmp(s->body.data, "abcabcabc", 9) == 0);
  CU_ASSERT_EQUAL(o.r[0].closed, 1);
  CU_ASSERT_EQUAL(o.r[0].close_code, 0);
  /* Response data sent from inside on_request (deferred work done after the callback). */
  o.respond_at_once = 1;
  id = client_get(&c, "/fast");
  pump(&h, &c, 0);
  s = peer_stream(&c.p, id);
  CU_ASSERT_EQUAL(s->status, 200);
  CU_ASSERT(s->body.len == 2 && memcmp(s->body.data, "ok", 2) == 0);
  CU_ASSERT_EQUAL(s->closed, 1);
  pp_h2_dispose(&h);
  client_dispose(&c);
  owner_dispose(&o);
}

/* A large response goes out under the client's windows and a small output bound. */
static void test_large_response_bounded_output(void) {
  pp_h2 h;
  owner o;
  client c;
  server_init(&h, &o, NULL);
  client_init(&c);
  int32_t id = client_get(&c, "/big");
  pump(&h, &c, 0);
  pp_h2_respond(&h, id, 200, NULL, 0, 0);
  pp_h2_send_data(&h, id, big_body, sizeof big_body);
  pp_h2_send_end(&h, id);
  pp_buf out;
  pp_buf_init(&out);
  ssize_t n = pp_h2_output(&h, &out, 100);
  CU_ASSERT_EQUAL(n, 100); /* stops at the bound */
  CU_ASSERT_EQUAL(pp_h2_output(&h, &out, 100), 0);
  nghttp2_session_mem_recv(c.s, out.data, out.len);
  pp_buf_dispose(&out);
  pump(&h, &c, 0);
  sres *s = peer_stream(&c.p, id);
  CU_ASSERT(s->body.len == sizeof big_body && memcmp(s->body.data, big_body, sizeof big_body) == 0);
  CU_ASSERT_EQUAL(s->closed, 1);
  CU_ASSERT_EQUAL(pp_h2_pending_total(&h), 0);
  pp_h2_dispose(&h);
  client_dispose(&c);
  owner_dispose(&o);
}

static void test_concurrent_streams(void) {
  pp_h2 h;
  owner o;
  client c;
  server_init(&h, &o, NULL);
  client_init(&c);
  int32_t ids[5];
  char path[16];
  for (int i = 0; i < 5; i++) {
    snprintf(path, sizeof path, "/s%d", i);
    ids[i] = client_get(&c, path);
  }
  pump(&h, &c, 0);
  CU_ASSERT_EQUAL_FATAL(o.n, 5);
  CU_ASSERT_EQUAL(pp_h2_stream_count(&h), 5);
  for (int i = 4; i >= 0; i--) { /* answer in reverse order, bodies interleaved */
    pp_h2_respond(&h, ids[i], 200, NULL, 0, 0);
    char body[16];
    snprintf(body, sizeof body, "body-%d", i);
    pp_h2_send_data(&h, ids[i], (const uint8_t *)body, strlen(body));
  }
  CU_ASSERT_EQUAL(pp_h2_pending_total(&h), 30);
  pump(&h, &c, 0);
  for (int i = 0; i < 5; i++)
    pp_h2_send_end(&h, ids[i]);
  pump(&h, &c, 0);
  for (int i = 0; i < 5; i++) {
    rec *r = owner_rec(&o, ids[i]);
    snprintf(path, sizeof path, "/s%d", i);
    CU_ASSERT_STRING_EQUAL(r->path, path);
    sres *s = peer_stream(&c.p, ids[i]);
    char body[16];
    snprintf(body, sizeof body, "body-%d", i);
    CU_ASSERT(s->body.len == strlen(body) && memcmp(s->body.data, body, s->body.len) == 0);
    CU_ASSERT_EQUAL(s->closed, 1);
    CU_ASSERT_EQUAL(r->closed, 1);
  }
  CU_ASSERT_EQUAL(pp_h2_stream_count(&h), 0);
  pp_h2_dispose(&h);
  client_dispose(&c);
  owner_dispose(&o);
}

static void test_client_reset(void) {
  pp_h2 h;
  owner o;
  client c;
  server_init(&h, &o, NULL);
  client_init(&c);
  int32_t id = client_get(&c, "/");
  pump(&h, &c, 0);
  pp_h2_respond(&h, id, 200, NULL, 0, 0);
  pp_h2_send_data(&h, id, (const uint8_t *)"partial", 7);
  pump(&h, &c, 0);
  nghttp2_submit_rst_stream(c.s, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
  pump(&h, &c, 0);
  CU_ASSERT_EQUAL(o.r[0].closed, 1);
  CU_ASSERT_EQUAL(o.r[0].close_code, NGHTTP2_CANCEL);
  CU_ASSERT_EQUAL(h.stats.peer_resets, 1);
  CU_ASSERT_EQUAL(pp_h2_send_data(&h, id, (const uint8_t *)"x", 1), PP_H2_ESTREAM);
  CU_ASSERT_EQUAL(pp_h2_stream_count(&h), 0);
  /* The owner resets a stream (its worker died): the client sees the code, on_close too. */
  id = client_get(&c, "/");
  pump(&h, &c, 0);
  pp_h2_reset(&h, id, NGHTTP2_INTERNAL_ERROR);
  pump(&h, &c, 0);
  CU_ASSERT_EQUAL(peer_stream(&c.p, id)->rst_code, NGHTTP2_INTERNAL_ERROR);
  CU_ASSERT_EQUAL(o.r[1].close_code, NGHTTP2_INTERNAL_ERROR);
  CU_ASSERT_EQUAL(h.stats.stream_errors, 0); /* ours, not a protocol matter */
  pp_h2_dispose(&h);
  client_dispose(&c);
  owner_dispose(&o);
}

static size_t b64url(const uint8_t *in, size_t n, char *out) {
  static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  size_t k = 0;
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < n; i++) {
    acc = acc << 8 | in[i];
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out[k++] = a[(acc >> bits) & 63];
    }
  }
  if (bits) out[k++] = a[(acc << (6 - bits)) & 63];
  out[k] = 0;
  return k;
}

static void test_upgrade(void) {
  nghttp2_settings_entry iv[2] = {{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 10},
                                  {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20}};
  uint8_t payload[64];
  ssize_t plen = nghttp2_pack_settings_payload(payload, sizeof payload, iv, 2);
  CU_ASSERT_FATAL(plen == 12);
  char token[64];
  size_t tlen = b64url(payload, (size_t)plen, token);
  for (int head = 0; head <= 1; head++) {
    pp_h2 h;
    owner o;
    memset(&o, 0, sizeof o);
    server_err = 0;
    CU_ASSERT_EQUAL_FATAL(
        pp_h2_init_upgrade(&h, &owner_cbs, NULL, &o, (const uint8_t *)token, tlen, head), 0);
    rec *r = &o.r[o.n++];
    r->id = 1;
    pp_h2_set_stream_data(&h, 1, r);
    CU_ASSERT_EQUAL(h.stats.streams_accepted, 1);
    client c;
    client_init(&c);
    CU_ASSERT_EQUAL(nghttp2_session_upgrade2(c.s, payload, (size_t)plen, head, NULL), 0);
    pump(&h, &c, 0);
    CU_ASSERT_EQUAL(o.n, 1); /* no on_request for stream 1 */
    pp_h2_header ct = {(const uint8_t *)"content-type", 12, (const uint8_t *)"text/plain", 10};
    CU_ASSERT_EQUAL(pp_h2_respond(&h, 1, 200, &ct, 1, 0), 0);
    pp_h2_send_data(&h, 1, (const uint8_t *)"upgraded", 8);
    pp_h2_send_end(&h, 1);
    pump(&h, &c, 0);
    sres *s = peer_stream(&c.p, 1);
    CU_ASSERT_EQUAL(s->status, 200);
    CU_ASSERT_EQUAL(s->body.len, head ? 0u : 8u); /* HEAD: the body is dropped */
    CU_ASSERT_EQUAL(s->closed, 1);
    CU_ASSERT_EQUAL(s->rst, 0);
    CU_ASSERT_EQUAL(r->closed, 1);
    CU_ASSERT_EQUAL(r->close_code, 0);
    /* The connection goes on with stream 3. */
    int32_t id = client_get(&c, "/next");
    CU_ASSERT_EQUAL(id, 3);
    pump(&h, &c, 0);
    CU_ASSERT_EQUAL(o.n, 2);
    CU_ASSERT_STRING_EQUAL(o.r[1].path, "/next");
    pp_h2_dispose(&h);
    CU_ASSERT_EQUAL(o.r[1].close_code, NGHTTP2_CANCEL); /* disposed while open */
    client_dispose(&c);
    owner_dispose(&o);
  }
  static const char *bad[] = {"!!!!", "AAAAA", "AAAAAAA" /* 5 bytes: not whole settings */};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    pp_h2 h;
    owner o;
    CU_ASSERT(pp_h2_init_upgrade(&h, &owner_cbs, NULL, &o, (const uint8_t *)bad[i], strlen(bad[i]),
                                 0) < 0);
  }
  /* Padding is tolerated; an empty value is an empty SETTINGS payload. */
  pp_h2 h;
  owner o;
  CU_ASSERT_EQUAL(pp_h2_init_upgrade(&h, &owner_cbs, NULL, &o, (const uint8_t *)"", 0, 0), 0);
  pp_h2_set_stream_data(&h, 1, &o.r[0]);
  o.r[0].id = 1;
  o.r[0].closed = 0;
  pp_h2_dispose(&h);
  char padded[70];
  snprintf(padded, sizeof padded, "%s==", token);
  memset(&o, 0, sizeof o);
  CU_ASSERT_EQUAL(
      pp_h2_init_upgrade(&h, &owner_cbs, NULL, &o, (const uint8_t *)padded, strlen(padded), 0), 0);
  o.r[0].id = 1;
  pp_h2_set_stream_data(&h, 1, &o.r[0]);
  pp_h2_dispose(&h);
}

/* pp_h2_goaway: the stream in flight finishes; later streams are refused, whether their HEADERS
 * arrive before the GOAWAY left (nghttp2 opened them) or after (nghttp2 ignores them). */
static void test_goaway_drain(void) {
  for (size_t step = 0; step <= 1; step++) {
    pp_h2 h;
    owner o;
    raw r;
    server_init(&h, &o, NULL);
    raw_init(&r);
    raw_open(&h, &r, 1);
    pp_buf b;
    pp_buf_init(&b);
    raw_get(&r, &b, 1, NGHTTP2_FLAG_END_STREAM);
    raw_send(&h, &r, &b, step);
    CU_ASSERT_EQUAL(o.n, 1);
    pp_h2_goaway(&h);
    pp_h2_goaway(&h);                            /* idempotent */
    raw_get(&r, &b, 3, NGHTTP2_FLAG_END_STREAM); /* before the GOAWAY went out */
    raw_send(&h, &r, &b, step);
    CU_ASSERT(r.p.goaway);
    CU_ASSERT_EQUAL(r.p.goaway_code, NGHTTP2_NO_ERROR);
    CU_ASSERT_EQUAL(r.p.goaway_last, 1);
    raw_get(&r, &b, 5, NGHTTP2_FLAG_END_STREAM); /* after it */
    raw_send(&h, &r, &b, step);
    CU_ASSERT_EQUAL(o.n, 1); /* neither reached the owner */
    CU_ASSERT_EQUAL(peer_stream(&r.p, 3)->rst_code, NGHTTP2_REFUSED_STREAM);
    CU_ASSERT_EQUAL(peer_stream(&r.p, 3)->rst, 1);
    CU_ASSERT_EQUAL(peer_stream(&r.p, 5)->rst, 1);
    CU_ASSERT_EQUAL(peer_stream(&r.p, 5)->rst_code, NGHTTP2_REFUSED_STREAM);
    CU_ASSERT_EQUAL(h.stats.refused_streams, 2);
    CU_ASSERT(!pp_h2_finished(&h)); /* stream 1 is still in flight */
    pp_h2_respond(&h, 1, 200, NULL, 0, 0);
    pp_h2_send_data(&h, 1, (const uint8_t *)"done", 4);
    pp_h2_send_end(&h, 1);
    drain(&h, &r.in, 1000);
    raw_parse(&r);
    CU_ASSERT_EQUAL(peer_stream(&r.p, 1)->status, 200);
    CU_ASSERT_EQUAL(peer_stream(&r.p, 1)->closed, 1);
    CU_ASSERT_EQUAL(o.r[0].closed, 1);
    CU_ASSERT_EQUAL(o.r[0].close_code, 0);
    CU_ASSERT(pp_h2_finished(&h));
    CU_ASSERT_EQUAL(h.stats.protocol_errors, 0);
    pp_buf_dispose(&b);
    pp_h2_dispose(&h);
    raw_dispose(&r);
    owner_dispose(&o);
  }
}

/* A client GOAWAY with no stream open, then a WINDOW_UPDATE and a HEADERS: nghttp2 stops reading
 * at the GOAWAY (it ignores every later call's input), so pp_h2_feed ignores the rest of the
 * same call too: the request never reaches the owner and the session is finished, whether the
 * bytes arrive in one piece or in any two (FUZZING.md, finding 7). While a stream is open,
 * frames after the client's GOAWAY are still read. */
static void test_client_goaway_split(void) {
  pp_buf b;
  pp_buf_init(&b);
  raw enc;
  raw_init(&enc);
  uint8_t ga[8] = {0, 0, 0, 0, 0, 0, 0, 0}; /* last stream 0, NO_ERROR */
  uint8_t wu[4] = {0, 0, 0x10, 0};
  frame(&b, NGHTTP2_GOAWAY, 0, 0, ga, sizeof ga);
  frame(&b, NGHTTP2_WINDOW_UPDATE, 0, 0, wu, sizeof wu);
  raw_get(&enc, &b, 1, NGHTTP2_FLAG_END_STREAM);
  for (size_t cut = 0; cut <= b.len; cut++) {
    pp_h2 h;
    owner o;
    raw r;
    server_init(&h, &o, NULL);
    raw_init(&r);
    raw_open(&h, &r, 1);
    if (cut) CU_ASSERT_EQUAL(pp_h2_feed(&h, b.data, cut), (ssize_t)cut);
    if (cut < b.len)
      CU_ASSERT_EQUAL(pp_h2_feed(&h, b.data + cut, b.len - cut), (ssize_t)(b.len - cut));
    drain(&h, &r.in, 1000);
    raw_parse(&r);
    CU_ASSERT_EQUAL(o.n, 0);
    CU_ASSERT(pp_h2_finished(&h));
    CU_ASSERT_EQUAL(h.stats.bytes_in, 24 + 9 + 9 + b.len);
    CU_ASSERT_EQUAL(h.stats.protocol_errors, 0);
    pp_h2_dispose(&h);
    raw_dispose(&r);
    owner_dispose(&o);
  }
  /* With stream 1 open, the client's GOAWAY does not end reading: its DATA still arrives. */
  pp_h2 h;
  owner o;
  raw r;
  server_init(&h, &o, NULL);
  raw_init(&r);
  raw_open(&h, &r, 1);
  pp_buf c;
  pp_buf_init(&c);
  nghttp2_nv post[] = {NV(":method", "POST"), NV(":scheme", "http"), NV(":authority", "a"),
                       NV(":path", "/p")};
  raw_headers(&r, &c, 1, 0, post, 4);
  frame(&c, NGHTTP2_GOAWAY, 0, 0, ga, sizeof ga);
  frame(&c, NGHTTP2_DATA, NGHTTP2_FLAG_END_STREAM, 1, "abc", 3);
  raw_send(&h, &r, &c, 0);
  CU_ASSERT_EQUAL(o.n, 1);
  CU_ASSERT_EQUAL(o.r[0].body.len, 3);
  CU_ASSERT(!pp_h2_finished(&h));
  pp_buf_dispose(&c);
  pp_h2_dispose(&h);
  raw_dispose(&r);
  owner_dispose(&o);
  raw_dispose(&enc);
  pp_buf_dispose(&b);
}

static void test_max_concurrent_streams(void) {
  pp_h2_limits l;
  pp_h2_limits_default(&l);
  l.max_concurrent_streams = 2;
  /* Before the client has seen our SETTINGS: the excess stream is refused. */
  pp_h2 h;
  owner o;
  client c;
  server_init(&h, &o, &l);
  client_init(&c);
  int32_t ids[3];
  for (int i = 0; i < 3; i++)
    ids[i] = client_get(&c, "/");
  pump(&h, &c, 0);
  CU_ASSERT_EQUAL(o.n, 2);
  CU_ASSERT_EQUAL(peer_stream(&c.p, ids[2])->rst_code, NGHTTP2_REFUSED_STREAM);
  CU_ASSERT_EQUAL(peer_stream(&c.p, ids[2])->closed, 1);
  CU_ASSERT_EQUAL(h.stats.refused_streams, 1);
  CU_ASSERT_EQUAL(c.p.goaway, 0);
  /* The client now honours the limit: a fourth request waits for a free slot. */
  int32_t id4 = client_get(&c, "/4");
  pump(&h, &c, 0);
  CU_ASSERT_EQUAL(o.n, 2);
  pp_h2_respond(&h, ids[0], 200, NULL, 0, 1);
  pump(&h, &c, 0);
  CU_ASSERT_EQUAL(o.n, 3);
  CU_ASSERT_EQUAL(o.r[2].id, id4);
  pp_h2_dispose(&h);
  client_dispose(&c);
  owner_dispose(&o);

  /* After the client acknowledged them, nghttp2 makes it a connection error (RFC 9113 §5.4.1
   * allows treating the stream error as one). */
  raw r;
  server_init(&h, &o, &l);
  raw_init(&r);
  raw_open(&h, &r, 1);
  pp_buf b;
  pp_buf_init(&b);
  for (int32_t id = 1; id <= 5; id += 2)
    raw_get(&r, &b, id, NGHTTP2_FLAG_END_STREAM);
  raw_send(&h, &r, &b, 0);
  CU_ASSERT_EQUAL(o.n, 2);
  CU_ASSERT(r.p.goaway);
  CU_ASSERT_EQUAL(r.p.goaway_code, NGHTTP2_PROTOCOL_ERROR);
  CU_ASSERT(pp_h2_finished(&h));
  CU_ASSERT_EQUAL(h.stats.connection_errors, 1);
  CU_ASSERT(pp_h2_feed(&h, (const uint8_t *)"x", 1) < 0); /* sticky */
  pp_buf_dispose(&b);
  pp_h2_dispose(&h);
  CU_ASSERT_EQUAL(o.closes, 2); /* dispose closes what the owner held */
  raw_dispose(&r);
  owner_dispose(&o);
}

static void test_oversized_header_list(void) {
  pp_h2_limits l;
  pp_h2_limits_default(&l);
  l.max_header_list = 1024;
  pp_h2 h;
  owner o;
  client c;
  server_init(&h, &o, &l);
  client_init(&c);
  static char big[2000];
  memset(big, 'v', sizeof big - 1);
  nghttp2_nv nva[] = {NV(":method", "GET"),
                      NV(":scheme", "http"),
                      NV(":authority", "a"),
                      NV(":path", "/"),
                      {(uint8_t *)"x-big", (uint8_t *)big, 5, sizeof big - 1, 0}};
  int32_t id = nghttp2_submit_request(c.s, NULL, nva, 5, NULL, NULL);
  pump(&h, &c, 0);
  CU_ASSERT_EQUAL(o.n, 0);
  sres *s = peer_stream(&c.p, id);
  CU_ASSERT_EQUAL(s->status, 431);
  CU_ASSERT(s->body.len > 4 && memcmp(s->body.data, "431 ", 4) == 0);
  CU_ASSERT_EQUAL(s->closed, 1);
  CU_ASSERT_EQUAL(h.stats.session_answers, 1);
  /* The connection (and its HPACK state) is fine: the next request goes through. */
  id = client_get(&c, "/after");
  pump(&h, &c, 0);
  CU_ASSERT_EQUAL_FATAL(o.n, 1);
  CU_ASSERT_STRING_EQUAL(o.r[0].path, "/after");
  pp_h2_dispose(&h);
  client_dispose(&c);
  owner_dispose(&o);
}

static void test_continuation_flood(void) {
  pp_h2 h;
  owner o;
  raw r;
  server_init(&h, &o, NULL);
  raw_init(&r);
  raw_open(&h, &r, 1);
  pp_buf b;
  pp_buf_init(&b);
  nghttp2_nv nva[] = {NV(":method", "GET"), NV(":scheme", "http"), NV(":authority", "a"),
                      NV(":path", "/")};
  uint8_t block[256];
  ssize_t len = nghttp2_hd_deflate_hd(r.def, block, sizeof block, nva, 4);
  frame(&b, NGHTTP2_HEADERS, NGHTTP2_FLAG_END_STREAM, 1, block, (size_t)len);
  uint8_t filler[1] = {0x80 | 0x02}; /* indexed ":method GET" again */
  for (int i = 0; i < 20; i++)
    frame(&b, NGHTTP2_CONTINUATION, 0, 1, filler, 1);
  raw_send(&h, &r, &b, 0);
  CU_ASSERT_EQUAL(o.n, 0);
  CU_ASSERT(r.p.goaway);
  CU_ASSERT_NOT_EQUAL(r.p.goaway_code, NGHTTP2_NO_ERROR);
  CU_ASSERT(server_err < 0 || pp_h2_finished(&h));
  CU_ASSERT(h.stats.flood_closes + h.stats.protocol_errors >= 1);
  pp_buf_dispose(&b);
  pp_h2_dispose(&h);
  raw_dispose(&r);
  owner_dispose(&o);
}

/* Malformed requests: the stream is reset with PROTOCOL_ERROR, the owner never hears of it,
 * and the connection goes on. */
static void test_bad_requests(void) {
  static const struct {
    const char *what;
    nghttp2_nv nva[6];
    size_t n;
  } rows[] = {
      {"missing :path", {NV(":method", "GET"), NV(":scheme", "http"), NV(":authority", "a")}, 3},
      {"missing :method", {NV(":scheme", "http"), NV(":authority", "a"), NV(":path", "/")}, 3},
      {"uppercase name",
       {NV(":method", "GET"), NV(":scheme", "http"), NV(":path", "/"), NV("X-Foo", "1")},
       4},
      {"connection header",
       {NV(":method", "GET"), NV(":scheme", "http"), NV(":path", "/"),
        NV("connection", "keep-alive")},
       4},
      {"transfer-encoding",
       {NV(":method", "GET"), NV(":scheme", "http"), NV(":path", "/"),
        NV("transfer-encoding", "chunked")},
       4},
      {"te other than trailers",
       {NV(":method", "GET"), NV(":scheme", "http"), NV(":path", "/"), NV("te", "gzip")},
       4},
      {"unknown pseudo-header",
       {NV(":method", "GET"), NV(":scheme", "http"), NV(":path", "/"), NV(":foo", "x")},
       4},
      {"pseudo-header after a field",
       {NV(":method", "GET"), NV(":scheme", "http"), NV("x-a", "1"), NV(":path", "/")},
       4},
      {"duplicate :path",
       {NV(":method", "GET"), NV(":scheme", "http"), NV(":path", "/"), NV(":path", "/b")},
       4},
      {"empty :path", {NV(":method", "GET"), NV(":scheme", "http"), NV(":path", "")}, 3},
      {"bad content-length",
       {NV(":method", "POST"), NV(":scheme", "http"), NV(":path", "/"),
        NV("content-length", "12a")},
       4},
      {"value with leading space",
       {NV(":method", "GET"), NV(":scheme", "http"), NV(":path", "/"), NV("x-a", " v")},
       4},
      {"name with a space",
       {NV(":method", "GET"), NV(":scheme", "http"), NV(":path", "/"), NV("x a", "v")},
       4},
  };
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    pp_h2 h;
    owner o;
    raw r;
    server_init(&h, &o, NULL);
    raw_init(&r);
    raw_open(&h, &r, 1);
    pp_buf b;
    pp_buf_init(&b);
    raw_headers(&r, &b, 1, NGHTTP2_FLAG_END_STREAM, rows[i].nva, rows[i].n);
    raw_send(&h, &r, &b, 0);
    sres *s = peer_stream(&r.p, 1);
    CU_ASSERT_EQUAL(o.n, 0);
    CU_ASSERT_EQUAL(s->rst, 1);
    CU_ASSERT_EQUAL(s->rst_code, NGHTTP2_PROTOCOL_ERROR);
    CU_ASSERT_EQUAL(r.p.goaway, 0);
    CU_ASSERT(h.stats.protocol_errors >= 1);
    if (o.n || !s->rst || s->rst_code != NGHTTP2_PROTOCOL_ERROR || r.p.goaway)
      printf("\n  row \"%s\": requests %d rst %d code %u goaway %d\n", rows[i].what, o.n, s->rst,
             s->rst_code, r.p.goaway);
    raw_get(&r, &b, 3, NGHTTP2_FLAG_END_STREAM); /* the connection goes on */
    raw_send(&h, &r, &b, 0);
    CU_ASSERT_EQUAL(o.n, 1);
    pp_buf_dispose(&b);
    pp_h2_dispose(&h);
    raw_dispose(&r);
    owner_dispose(&o);
  }
}

/* Frames that break stream or connection rules, each as RFC 9113 (and nghttp2) answers. */
static void test_frame_errors(void) {
  enum { DATA_AFTER_END, STREAM_WINDOW_OVERFLOW, CONN_WINDOW_OVERFLOW, DATA_IDLE, EVEN_STREAM };
  static const struct {
    const char *what;
    int kind;
    int goaway; /* 1: connection error, 0: stream error on stream 1 */
    uint32_t code;
  } rows[] = {
      {"DATA after END_STREAM", DATA_AFTER_END, 1, NGHTTP2_STREAM_CLOSED},
      {"stream window over 2^31-1", STREAM_WINDOW_OVERFLOW, 0, NGHTTP2_FLOW_CONTROL_ERROR},
      {"connection window over 2^31-1", CONN_WINDOW_OVERFLOW, 1, NGHTTP2_FLOW_CONTROL_ERROR},
      {"DATA on an idle stream", DATA_IDLE, 1, NGHTTP2_PROTOCOL_ERROR},
      {"HEADERS on an even stream", EVEN_STREAM, 1, NGHTTP2_PROTOCOL_ERROR},
  };
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    pp_h2 h;
    owner o;
    raw r;
    server_init(&h, &o, NULL);
    raw_init(&r);
    raw_open(&h, &r, 1);
    pp_buf b;
    pp_buf_init(&b);
    uint8_t inc[4] = {0x7f, 0xff, 0xff, 0xff};
    switch (rows[i].kind) {
    case DATA_AFTER_END:
      raw_get(&r, &b, 1, NGHTTP2_FLAG_END_STREAM);
      frame(&b, NGHTTP2_DATA, 0, 1, "x", 1);
      break;
    case STREAM_WINDOW_OVERFLOW:
      raw_get(&r, &b, 1, NGHTTP2_FLAG_END_STREAM);
      frame(&b, NGHTTP2_WINDOW_UPDATE, 0, 1, inc, 4);
      break;
    case CONN_WINDOW_OVERFLOW: frame(&b, NGHTTP2_WINDOW_UPDATE, 0, 0, inc, 4); break;
    case DATA_IDLE: frame(&b, NGHTTP2_DATA, 0, 1, "x", 1); break;
    case EVEN_STREAM: raw_get(&r, &b, 2, NGHTTP2_FLAG_END_STREAM); break;
    }
    raw_send(&h, &r, &b, 0);
    int ok;
    if (rows[i].goaway) {
      ok = r.p.goaway && r.p.goaway_code == rows[i].code;
      CU_ASSERT(pp_h2_finished(&h));
    } else {
      ok = !r.p.goaway && peer_stream(&r.p, 1)->rst &&
           peer_stream(&r.p, 1)->rst_code == rows[i].code;
    }
    CU_ASSERT(ok);
    if (!ok)
      printf("\n  row \"%s\": goaway %d code %u, rst %d code %u\n", rows[i].what, r.p.goaway,
             r.p.goaway_code, peer_stream(&r.p, 1)->rst, peer_stream(&r.p, 1)->rst_code);
    pp_buf_dispose(&b);
    pp_h2_dispose(&h);
    for (int k = 0; k < o.n; k++)
      CU_ASSERT_EQUAL(o.r[k].closed, 1); /* every accepted stream was closed exactly once */
    raw_dispose(&r);
    owner_dispose(&o);
  }
}

/* Padding counts against the windows but never reaches the owner: nghttp2 consumes it itself,
 * so padded uploads do not starve the connection. Trailers end the body and are dropped. */
static void test_padding_and_trailers(void) {
  pp_h2_limits l;
  pp_h2_limits_default(&l);
  l.stream_window = 65535;
  l.conn_window = 65535;
  pp_h2 h;
  owner o;
  raw r;
  server_init(&h, &o, &l);
  o.consume_at_once = 1;
  raw_init(&r);
  raw_open(&h, &r, 1);
  pp_buf b;
  pp_buf_init(&b);
  nghttp2_nv nva[] = {NV(":method", "POST"), NV(":scheme", "http"), NV(":authority", "a"),
                      NV(":path", "/pad")};
  raw_headers(&r, &b, 1, 0, nva, 4);
  raw_send(&h, &r, &b, 0);
  uint8_t payload[256];
  memset(payload, 0, sizeof payload);
  payload[0] = 250; /* pad length */
  payload[1] = 'x';
  for (int i = 0; i < 1000; i++) { /* 256 KB of frames, 1000 bytes of data */
    frame(&b, NGHTTP2_DATA, NGHTTP2_FLAG_PADDED, 1, payload, 252);
    raw_send(&h, &r, &b, 0);
  }
  nghttp2_nv trailer[] = {NV("x-checksum", "abc")};
  raw_headers(&r, &b, 1, NGHTTP2_FLAG_END_STREAM, trailer, 1);
  raw_send(&h, &r, &b, 0);
  CU_ASSERT_EQUAL(r.p.goaway, 0);
  CU_ASSERT_EQUAL(peer_stream(&r.p, 1)->rst, 0);
  CU_ASSERT_EQUAL_FATAL(o.n, 1);
  CU_ASSERT_EQUAL(o.r[0].body.len, 1000);
  CU_ASSERT_EQUAL(o.r[0].body_end, 1);
  CU_ASSERT(strstr(o.r[0].headers, "x-checksum") == NULL);
  CU_ASSERT(r.p.window_updates > 0);
  pp_buf_dispose(&b);
  pp_h2_dispose(&h);
  raw_dispose(&r);
  owner_dispose(&o);
}

/* CVE-2023-44487: open-and-reset faster than the token bucket ends the connection. In one
 * read (no output in between) the session stops at reset_burst; across reads nghttp2's clocked
 * bucket does it. */
static void test_rapid_reset(void) {
  pp_h2_limits l;
  pp_h2_limits_default(&l);
  l.reset_burst = 10;
  l.reset_rate = 1;
  for (int per_read = 0; per_read <= 1; per_read++) {
    pp_h2 h;
    owner o;
    raw r;
    server_init(&h, &o, &l);
    raw_init(&r);
    raw_open(&h, &r, 1);
    pp_buf b;
    pp_buf_init(&b);
    uint8_t cancel[4] = {0, 0, 0, NGHTTP2_CANCEL};
    for (int32_t id = 1; id < 200 && !server_err; id += 2) {
      raw_get(&r, &b, id, NGHTTP2_FLAG_END_STREAM);
      frame(&b, NGHTTP2_RST_STREAM, 0, id, cancel, 4);
      if (per_read) raw_send(&h, &r, &b, 0); /* one read and one write per pair */
    }
    raw_send(&h, &r, &b, 0);
    if (!per_read) CU_ASSERT_EQUAL(server_err, PP_H2_EFLOOD);
    CU_ASSERT(r.p.goaway);
    CU_ASSERT_NOT_EQUAL(r.p.goaway_code, NGHTTP2_NO_ERROR);
    CU_ASSERT_EQUAL(h.stats.flood_closes, 1);
    CU_ASSERT(o.n <= 11);
    CU_ASSERT(o.n >= 10);
    CU_ASSERT(pp_h2_finished(&h));
    pp_buf_dispose(&b);
    pp_h2_dispose(&h);
    for (int k = 0; k < o.n; k++)
      CU_ASSERT_EQUAL(o.r[k].closed, 1);
    raw_dispose(&r);
    owner_dispose(&o);
  }
  /* A client cancelling many streams now and then is no flood. */
  pp_h2 h;
  owner o;
  raw r;
  server_init(&h, &o, &l);
  raw_init(&r);
  raw_open(&h, &r, 1);
  pp_buf b;
  pp_buf_init(&b);
  uint8_t cancel[4] = {0, 0, 0, NGHTTP2_CANCEL};
  for (int32_t id = 1; id < 20; id += 2) {
    raw_get(&r, &b, id, NGHTTP2_FLAG_END_STREAM);
    frame(&b, NGHTTP2_RST_STREAM, 0, id, cancel, 4);
  }
  raw_send(&h, &r, &b, 0);
  CU_ASSERT_EQUAL(o.n, 10);
  CU_ASSERT_EQUAL(r.p.goaway, 0);
  CU_ASSERT_EQUAL(h.stats.flood_closes, 0);
  pp_buf_dispose(&b);
  pp_h2_dispose(&h);
  raw_dispose(&r);
  owner_dispose(&o);
}

/* PING and SETTINGS floods from a client that never reads our acks. */
static void test_ack_flood(void) {
  for (int type = 0; type < 2; type++) {
    pp_h2 h;
    owner o;
    server_init(&h, &o, NULL);
    pp_buf b;
    pp_buf_init(&b);
    raw_preface(&b);
    uint8_t opaque[8] = {0};
    for (int i = 0; i < 2000; i++) {
      if (type == 0)
        frame(&b, NGHTTP2_PING, 0, 0, opaque, 8);
      else
        frame(&b, NGHTTP2_SETTINGS, 0, 0, NULL, 0);
    }
    ssize_t rv = pp_h2_feed(&h, b.data, b.len);
    CU_ASSERT_EQUAL(rv, PP_H2_EFLOOD);
    CU_ASSERT_EQUAL(h.stats.flood_closes, 1);
    CU_ASSERT_EQUAL(pp_h2_feed(&h, b.data, 1), PP_H2_EFINISHED);
    raw r;
    raw_init(&r);
    drain(&h, &r.in, 1 << 20);
    raw_parse(&r);
    CU_ASSERT(r.p.goaway);
    CU_ASSERT_EQUAL(r.p.goaway_code, NGHTTP2_ENHANCE_YOUR_CALM);
    CU_ASSERT(pp_h2_finished(&h));
    raw_dispose(&r);
    pp_buf_dispose(&b);
    pp_h2_dispose(&h);
  }
  /* Too many entries in one SETTINGS frame. */
  pp_h2 h;
  owner o;
  server_init(&h, &o, NULL);
  pp_buf b;
  pp_buf_init(&b);
  pp_buf_append(&b, NGHTTP2_CLIENT_MAGIC, 24);
  uint8_t entries[40 * 6];
  for (int i = 0; i < 40; i++) {
    uint8_t *e = entries + 6 * i;
    e[0] = 0, e[1] = NGHTTP2_SETTINGS_ENABLE_PUSH, e[2] = e[3] = e[4] = 0, e[5] = 0;
  }
  frame(&b, NGHTTP2_SETTINGS, 0, 0, entries, sizeof entries);
  CU_ASSERT_EQUAL(pp_h2_feed(&h, b.data, b.len), (ssize_t)b.len); /* nghttp2 queues GOAWAY */
  raw r;
  raw_init(&r);
  drain(&h, &r.in, 1 << 20);
  raw_parse(&r);
  CU_ASSERT(r.p.goaway);
  CU_ASSERT_EQUAL(r.p.goaway_code, NGHTTP2_ENHANCE_YOUR_CALM);
  CU_ASSERT_EQUAL(h.stats.flood_closes, 1);
  CU_ASSERT(pp_h2_finished(&h));
  CU_ASSERT_EQUAL(pp_h2_feed(&h, b.data, 1), PP_H2_EFINISHED);
  raw_dispose(&r);
  pp_buf_dispose(&b);
  pp_h2_dispose(&h);
  /* Not HTTP/2 at all. */
  server_init(&h, &o, NULL);
  CU_ASSERT_EQUAL(pp_h2_feed(&h, (const uint8_t *)"GET / HTTP/1.1\r\n\r\n", 18), PP_H2_EPROTO);
  CU_ASSERT_EQUAL(h.stats.connection_errors, 1);
  raw_init(&r);
  drain(&h, &r.in, 1 << 20);
  raw_parse(&r);
  CU_ASSERT(r.p.goaway);
  CU_ASSERT_EQUAL(r.p.goaway_code, NGHTTP2_PROTOCOL_ERROR);
  CU_ASSERT(pp_h2_finished(&h));
  raw_dispose(&r);
  pp_h2_dispose(&h);
}

static void test_body_limits(void) {
  pp_h2_limits l;
  pp_h2_limits_default(&l);
  l.max_body_bytes = 1000;
  pp_h2 h;
  owner o;
  client c;
  server_init(&h, &o, &l);
  client_init(&c);
  o.consume_at_once = 1;
  /* content-length over the limit: 413 without asking the owner. */
  upload u1 = {big_body, 5000, 0};
  nghttp2_nv nva[] = {NV(":method", "POST"), NV(":scheme", "http"), NV(":authority", "a"),
                      NV(":path", "/up"), NV("content-length", "5000")};
  nghttp2_data_provider prd = {.source.ptr = &u1, .read_callback = upload_read};
  int32_t id = nghttp2_submit_request(c.s, NULL, nva, 5, &prd, NULL);
  pump(&h, &c, 0);
  CU_ASSERT_EQUAL(o.n, 0);
  sres *s = peer_stream(&c.p, id);
  CU_ASSERT_EQUAL(s->status, 413);
  CU_ASSERT(s->body.len > 4 && memcmp(s->body.data, "413 ", 4) == 0);
  CU_ASSERT_EQUAL(s->closed, 1);
  CU_ASSERT_EQUAL(s->close_code, NGHTTP2_NO_ERROR); /* RST(NO_ERROR) after the answer */
  /* No content-length, DATA beyond the limit before any response: 413, on_close(CANCEL). */
  upload u2 = {big_body, 3000, 0};
  prd.source.ptr = &u2;
  id = nghttp2_submit_request(c.s, NULL, nva, 4, &prd, NULL);
  pump(&h, &c, 0);
  CU_ASSERT_EQUAL_FATAL(o.n, 1);
  CU_ASSERT_EQUAL(o.r[0].closed, 1);
  CU_ASSERT_EQUAL(o.r[0].close_code, NGHTTP2_CANCEL);
  CU_ASSERT(o.r[0].body.len <= 1000);
  CU_ASSERT_EQUAL(o.r[0].body_end, 0);
  s = peer_stream(&c.p, id);
  CU_ASSERT_EQUAL(s->status, 413);
  CU_ASSERT_EQUAL(s->closed, 1);
  CU_ASSERT_EQUAL(pp_h2_respond(&h, id, 200, NULL, 0, 1), PP_H2_ESTREAM); /* not the owner's */
  /* ... after the response head: RST_STREAM(CANCEL). */
  o.respond_at_once = 1;
  upload u3 = {big_body, 3000, 0};
  prd.source.ptr = &u3;
  id = nghttp2_submit_request(c.s, NULL, nva, 4, &prd, NULL);
  pump(&h, &c, 0);
  CU_ASSERT_EQUAL_FATAL(o.n, 2);
  CU_ASSERT_EQUAL(o.r[1].closed, 1);
  s = peer_stream(&c.p, id);
  /* The RST_STREAM overtook the queued response head (nghttp2 sends RST first). */
  CU_ASSERT(s->rst);
  CU_ASSERT_EQUAL(s->rst_code, NGHTTP2_CANCEL);
  CU_ASSERT_EQUAL(o.r[1].close_code, NGHTTP2_CANCEL);
  /* The owner refuses with its own status. */
  o.respond_at_once = 0;
  o.refuse_status = 503;
  id = client_get(&c, "/busy");
  pump(&h, &c, 0);
  CU_ASSERT_EQUAL(peer_stream(&c.p, id)->status, 503);
  CU_ASSERT_EQUAL(o.n, 2);
  CU_ASSERT_EQUAL(nghttp2_session_get_remote_window_size(c.s) > 60000, 1); /* all returned */
  pp_h2_dispose(&h);
  client_dispose(&c);
  owner_dispose(&o);
}

/* One scripted conversation, fed in pieces of several sizes, must give the same transcript. */
static void run_script(size_t step, char *transcript, size_t cap) {
  pp_h2_limits l;
  pp_h2_limits_default(&l);
  l.stream_window = 20000;
  pp_h2 h;
  owner o;
  client c;
  server_init(&h, &o, &l);
  client_init(&c);
  o.consume_at_once = 1;
  int32_t get = client_get(&c, "/a");
  upload u = {big_body, 50000, 0};
  nghttp2_nv nva[] = {NV(":method", "POST"), NV(":scheme", "http"), NV(":authority", "a"),
                      NV(":path", "/post"), NV("content-type", "application/octet-stream")};
  nghttp2_data_provider prd = {.source.ptr = &u, .read_callback = upload_read};
  int32_t post = nghttp2_submit_request(c.s, NULL, nva, 5, &prd, NULL);
  int32_t gone = client_get(&c, "/gone");
  pump(&h, &c, step);
  nghttp2_submit_rst_stream(c.s, NGHTTP2_FLAG_NONE, gone, NGHTTP2_CANCEL);
  nghttp2_submit_ping(c.s, NGHTTP2_FLAG_NONE, NULL);
  pump(&h, &c, step);
  pp_h2_header ct = {(const uint8_t *)"Content-Type", 12, (const uint8_t *)"text/plain", 10};
  pp_h2_respond(&h, get, 200, &ct, 1, 0);
  pp_h2_send_data(&h, get, big_body, 70000);
  pp_h2_send_end(&h, get);
  pp_h2_respond(&h, post, 201, NULL, 0, 1);
  pump(&h, &c, step);
  size_t at = 0;
  for (int i = 0; i < o.n; i++) {
    rec *r = &o.r[i];
    at += (size_t)snprintf(transcript + at, cap - at,
                           "req %d %s %s %s|%s|cl %d es %d body %zu end %d close %d/%u\n", r->id,
                           r->method, r->scheme, r->path, r->headers, r->has_content_length,
                           r->end_stream, r->body.len, r->body_end, r->closed, r->close_code);
  }
  for (int i = 0; i < c.p.n; i++) {
    sres *s = &c.p.s[i];
    at += (size_t)snprintf(transcript + at, cap - at,
                           "res %d %d %s body %zu rst %d/%u closed %d/%u\n", s->id, s->status,
                           s->headers, s->body.len, s->rst, s->rst_code, s->closed, s->close_code);
  }
  at += (size_t)snprintf(
      transcript + at, cap - at, "opened %llu accepted %llu resets %llu err %llu\n",
      (unsigned long long)h.stats.streams_opened, (unsigned long long)h.stats.streams_accepted,
      (unsigned long long)h.stats.peer_resets, (unsigned long long)h.stats.protocol_errors);
  CU_ASSERT(memcmp(o.r[1].body.data, big_body, 50000) == 0);
  CU_ASSERT_EQUAL(server_err, 0);
  pp_h2_dispose(&h);
  client_dispose(&c);
  owner_dispose(&o);
}

static void test_split_feeding(void) {
  static char whole[8192], piece[8192];
  run_script(0, whole, sizeof whole);
  CU_ASSERT(strstr(whole, "req 3 POST http /post|content-type: application/octet-stream\n|cl 0 es "
                          "0 body 50000 end 1 close 1/0") != NULL);
  CU_ASSERT(strstr(whole, "res 1 200 content-type: text/plain\n body 70000 rst 0/0 closed 1/0") !=
            NULL);
  CU_ASSERT(strstr(whole, "req 5 GET https /gone||cl 0 es 1 body 0 end 0 close 1/8") != NULL);
  static const size_t steps[] = {1, 2, 7, 9, 100, 4096};
  for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
    run_script(steps[i], piece, sizeof piece);
    CU_ASSERT_STRING_EQUAL(piece, whole);
    if (strcmp(piece, whole) != 0)
      printf("\n  step %zu:\n%s\nvs whole:\n%s\n", steps[i], piece, whole);
  }
}

static void test_misc_api(void) {
  pp_h2 h;
  owner o;
  server_init(&h, &o, NULL);
  CU_ASSERT_EQUAL(pp_h2_respond(&h, 1, 200, NULL, 0, 0), PP_H2_ESTREAM);
  CU_ASSERT_EQUAL(pp_h2_send_data(&h, 1, (const uint8_t *)"x", 1), PP_H2_ESTREAM);
  CU_ASSERT_EQUAL(pp_h2_send_end(&h, 7), PP_H2_ESTREAM);
  CU_ASSERT_EQUAL(pp_h2_stream_pending(&h, 1), 0);
  pp_h2_consume(&h, 1, 10);
  pp_h2_reset(&h, 1, 0);
  pp_h2_set_stream_data(&h, 1, NULL);
  CU_ASSERT(pp_h2_want_write(&h)); /* our SETTINGS */
  CU_ASSERT_EQUAL(pp_h2_feed(&h, NULL, 0), 0);
  CU_ASSERT_STRING_EQUAL(pp_h2_strerror(PP_H2_EFLOOD), "the peer flooded the connection");
  CU_ASSERT_PTR_NOT_NULL(pp_h2_strerror(-100));
  pp_h2_dispose(&h);
  pp_h2_limits l;
  pp_h2_limits_default(&l);
  CU_ASSERT_EQUAL(l.max_concurrent_streams, 100);
  l.conn_window = 1000; /* below the RFC's initial window */
  CU_ASSERT_EQUAL(pp_h2_init(&h, &owner_cbs, &l, &o), PP_H2_EINVAL);
  /* 1xx interim then the final response; HEAD drops the body. */
  client c;
  server_init(&h, &o, NULL);
  client_init(&c);
  int32_t id = client_get(&c, "/");
  pump(&h, &c, 0);
  CU_ASSERT_EQUAL(pp_h2_respond(&h, id, 101, NULL, 0, 0), PP_H2_EINVAL);
  CU_ASSERT_EQUAL(pp_h2_respond(&h, id, 99, NULL, 0, 0), PP_H2_EINVAL);
  pp_h2_header link = {(const uint8_t *)"Link", 4, (const uint8_t *)"</a.css>; rel=preload", 21};
  CU_ASSERT_EQUAL(pp_h2_respond(&h, id, 103, &link, 1, 0), 0);
  CU_ASSERT_EQUAL(pp_h2_respond(&h, id, 200, NULL, 0, 0), 0);
  pp_h2_send_data(&h, id, (const uint8_t *)"hi", 2);
  pp_h2_send_end(&h, id);
  pump(&h, &c, 0);
  CU_ASSERT_EQUAL(peer_stream(&c.p, id)->status, 200);
  CU_ASSERT(strstr(peer_stream(&c.p, id)->headers, "link: </a.css>; rel=preload") != NULL);
  CU_ASSERT_EQUAL(peer_stream(&c.p, id)->body.len, 2);
  nghttp2_nv head[] = {NV(":method", "HEAD"), NV(":scheme", "http"), NV(":authority", "a"),
                       NV(":path", "/")};
  id = nghttp2_submit_request(c.s, NULL, head, 4, NULL, NULL);
  pump(&h, &c, 0);
  pp_h2_header cl = {(const uint8_t *)"Content-Length", 14, (const uint8_t *)"5", 1};
  CU_ASSERT_EQUAL(pp_h2_respond(&h, id, 200, &cl, 1, 0), 0);
  CU_ASSERT_EQUAL(pp_h2_send_data(&h, id, (const uint8_t *)"hello", 5), 0); /* dropped */
  pump(&h, &c, 0);
  CU_ASSERT_EQUAL(peer_stream(&c.p, id)->status, 200);
  CU_ASSERT_EQUAL(peer_stream(&c.p, id)->body.len, 0);
  CU_ASSERT_EQUAL(peer_stream(&c.p, id)->closed, 1);
  CU_ASSERT_EQUAL(peer_stream(&c.p, id)->rst, 0);
  /* CONNECT is answered 501. */
  nghttp2_nv conn[] = {NV(":method", "CONNECT"), NV(":authority", "a:443")};
  id = nghttp2_submit_request(c.s, NULL, conn, 2, NULL, NULL);
  pump(&h, &c, 0);
  CU_ASSERT_EQUAL(peer_stream(&c.p, id)->status, 501);
  pp_h2_dispose(&h);
  client_dispose(&c);
  owner_dispose(&o);
}

/* A client-side tunnel source: hands out what was added, never ends the stream unless told. */
typedef struct tunnel_src {
  uint8_t data[256];
  size_t len, off;
  int end;
} tunnel_src;

static ssize_t tunnel_read(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length,
                           uint32_t *flags, nghttp2_data_source *src, void *ud) {
  (void)s, (void)id, (void)ud;
  tunnel_src *t = src->ptr;
  size_t n = t->len - t->off < length ? t->len - t->off : length;
  memcpy(buf, t->data + t->off, n);
  t->off += n;
  if (t->off < t->len) return (ssize_t)n;
  *flags |= NGHTTP2_DATA_FLAG_EOF;
  if (!t->end) *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
  return (ssize_t)n;
}

static void tunnel_send(client *c, int32_t id, tunnel_src *t, const char *text, int end) {
  t->len = t->off = 0;
  size_t n = strlen(text);
  memcpy(t->data, text, n);
  t->len = n;
  t->end = end;
  nghttp2_data_provider prd = {.source.ptr = t, .read_callback = tunnel_read};
  CU_ASSERT_EQUAL(
      nghttp2_submit_data(c->s, end ? NGHTTP2_FLAG_END_STREAM : NGHTTP2_FLAG_NONE, id, &prd), 0);
}

/* RFC 8441: SETTINGS_ENABLE_CONNECT_PROTOCOL, an extended CONNECT as a tunnel (DATA both ways
 * past max_body_bytes, the response stays open, END_STREAM each way), and the malformed ones
 * reset with PROTOCOL_ERROR before the owner hears of them. */
static void test_extended_connect(void) {
  pp_h2 h;
  owner o;
  client c;
  pp_h2_limits l;
  pp_h2_limits_default(&l);
  CU_ASSERT_EQUAL(l.connect_protocol, 1);
  l.max_body_bytes = 4; /* a tunnel is not bounded by it */
  server_init(&h, &o, &l);
  o.consume_at_once = 1;
  client_init(&c);
  pump(&h, &c, 0);
  CU_ASSERT_EQUAL(
      nghttp2_session_get_remote_settings(c.s, NGHTTP2_SETTINGS_ENABLE_CONNECT_PROTOCOL), 1);
  nghttp2_nv ws[] = {NV(":method", "CONNECT"),        NV(":protocol", "websocket"),
                     NV(":scheme", "https"),          NV(":path", "/chat?room=1"),
                     NV(":authority", "example.org"), NV("sec-websocket-version", "13")};
  int32_t id = nghttp2_submit_headers(c.s, NGHTTP2_FLAG_NONE, -1, NULL, ws, 6, NULL);
  CU_ASSERT_FATAL(id > 0);
  pump(&h, &c, 0); /* the stream exists once its HEADERS went */
  tunnel_src up;
  tunnel_send(&c, id, &up, "hello, tunnel", 0);
  pump(&h, &c, 7);
  rec *r = owner_rec(&o, id);
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  CU_ASSERT_STRING_EQUAL(r->method, "CONNECT");
  CU_ASSERT_STRING_EQUAL(r->protocol, "websocket");
  CU_ASSERT_STRING_EQUAL(r->path, "/chat?room=1");
  CU_ASSERT_STRING_EQUAL(r->scheme, "https");
  CU_ASSERT_STRING_EQUAL(r->authority, "example.org");
  CU_ASSERT_STRING_EQUAL(r->headers, "sec-websocket-version: 13\n");
  CU_ASSERT_EQUAL(r->end_stream, 0);
  CU_ASSERT_EQUAL(r->body.len, 13); /* over max_body_bytes, yet delivered */
  CU_ASSERT_EQUAL(r->body_end, 0);
  CU_ASSERT_EQUAL(r->closed, 0);
  CU_ASSERT_EQUAL(pp_h2_respond(&h, id, 200, NULL, 0, 0), 0);
  CU_ASSERT_EQUAL(pp_h2_send_data(&h, id, (const uint8_t *)"first", 5), 0);
  pump(&h, &c, 0);
  sres *cr = peer_stream(&c.p, id);
  CU_ASSERT_EQUAL(cr->status, 200);
  CU_ASSERT_EQUAL(cr->body.len, 5);
  CU_ASSERT_EQUAL(cr->closed, 0);
  /* later bytes both ways on the open stream */
  CU_ASSERT_EQUAL(pp_h2_send_data(&h, id, (const uint8_t *)"second", 6), 0);
  tunnel_send(&c, id, &up, "more", 0);
  pump(&h, &c, 0);
  CU_ASSERT_EQUAL(cr->body.len, 11);
  CU_ASSERT_EQUAL(r->body.len, 17);
  CU_ASSERT_EQUAL(r->closed, 0);
  /* the client's END_STREAM (its FIN), then ours */
  tunnel_send(&c, id, &up, "bye", 1);
  pump(&h, &c, 0);
  CU_ASSERT_EQUAL(r->body.len, 20);
  CU_ASSERT_EQUAL(r->body_end, 1);
  CU_ASSERT_EQUAL(r->closed, 0);
  CU_ASSERT_EQUAL(pp_h2_send_end(&h, id), 0);
  pump(&h, &c, 0);
  CU_ASSERT_EQUAL(r->closed, 1);
  CU_ASSERT_EQUAL(r->close_code, 0);
  CU_ASSERT_EQUAL(cr->closed, 1);
  CU_ASSERT_EQUAL(cr->rst, 0);
  /* the server ends first: END_STREAM, then RST_STREAM(NO_ERROR) for the open client side */
  id = nghttp2_submit_headers(c.s, NGHTTP2_FLAG_NONE, -1, NULL, ws, 6, NULL);
  pump(&h, &c, 0);
  CU_ASSERT_EQUAL(pp_h2_respond(&h, id, 200, NULL, 0, 0), 0);
  pp_h2_send_end(&h, id);
  pump(&h, &c, 0);
  CU_ASSERT_EQUAL(peer_stream(&c.p, id)->status, 200);
  CU_ASSERT_EQUAL(peer_stream(&c.p, id)->closed, 1);
  CU_ASSERT_EQUAL(owner_rec(&o, id)->closed, 1);
  /* the client resets the tunnel: on_close with its code */
  id = nghttp2_submit_headers(c.s, NGHTTP2_FLAG_NONE, -1, NULL, ws, 6, NULL);
  pump(&h, &c, 0);
  CU_ASSERT_EQUAL(pp_h2_respond(&h, id, 200, NULL, 0, 0), 0);
  pump(&h, &c, 0);
  nghttp2_submit_rst_stream(c.s, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
  pump(&h, &c, 0);
  CU_ASSERT_EQUAL(owner_rec(&o, id)->closed, 1);
  CU_ASSERT_EQUAL(owner_rec(&o, id)->close_code, NGHTTP2_CANCEL);
  /* malformed: each reset with PROTOCOL_ERROR, the owner never called */
  int before = o.n;
  nghttp2_nv no_path[] = {NV(":method", "CONNECT"), NV(":protocol", "websocket"),
                          NV(":scheme", "https"), NV(":authority", "a")};
  nghttp2_nv no_scheme[] = {NV(":method", "CONNECT"), NV(":protocol", "websocket"),
                            NV(":path", "/"), NV(":authority", "a")};
  nghttp2_nv no_authority[] = {NV(":method", "CONNECT"), NV(":protocol", "websocket"),
                               NV(":scheme", "https"), NV(":path", "/")};
  nghttp2_nv on_get[] = {NV(":method", "GET"), NV(":protocol", "websocket"), NV(":scheme", "https"),
                         NV(":path", "/"), NV(":authority", "a")};
  const nghttp2_nv *bad[] = {no_path, no_scheme, no_authority, on_get};
  size_t bad_n[] = {4, 4, 4, 5};
  for (int i = 0; i < 4; i++) {
    id = nghttp2_submit_headers(c.s, NGHTTP2_FLAG_NONE, -1, NULL, bad[i], bad_n[i], NULL);
    pump(&h, &c, 0);
    CU_ASSERT_EQUAL(peer_stream(&c.p, id)->rst, 1);
    CU_ASSERT_EQUAL(peer_stream(&c.p, id)->rst_code, NGHTTP2_PROTOCOL_ERROR);
  }
  CU_ASSERT_EQUAL(o.n, before);
  CU_ASSERT_EQUAL(server_err, 0); /* stream errors, the connection lives on */
  /* a plain CONNECT is still 501 */
  nghttp2_nv plain[] = {NV(":method", "CONNECT"), NV(":authority", "a:443")};
  id = nghttp2_submit_headers(c.s, NGHTTP2_FLAG_NONE, -1, NULL, plain, 2, NULL);
  pump(&h, &c, 0);
  CU_ASSERT_EQUAL(peer_stream(&c.p, id)->status, 501);
  pp_h2_dispose(&h);
  client_dispose(&c);
  owner_dispose(&o);

  /* The setting off: not advertised, and :protocol is a malformed request. */
  l.connect_protocol = 0;
  server_init(&h, &o, &l);
  client_init(&c);
  pump(&h, &c, 0);
  CU_ASSERT_EQUAL(
      nghttp2_session_get_remote_settings(c.s, NGHTTP2_SETTINGS_ENABLE_CONNECT_PROTOCOL), 0);
  id = nghttp2_submit_headers(c.s, NGHTTP2_FLAG_NONE, -1, NULL, ws, 6, NULL);
  pump(&h, &c, 0);
  CU_ASSERT_EQUAL(peer_stream(&c.p, id)->rst, 1);
  CU_ASSERT_EQUAL(peer_stream(&c.p, id)->rst_code, NGHTTP2_PROTOCOL_ERROR);
  CU_ASSERT_EQUAL(o.n, 0);
  pp_h2_dispose(&h);
  client_dispose(&c);
  owner_dispose(&o);
}

int main(void) {
  fill_body();
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("h2", NULL, NULL);
  CU_add_test(s, "preface detection over every prefix", test_preface);
  CU_add_test(s, "GET end to end: request fields, response head, data, end", test_get_end_to_end);
  CU_add_test(s, "response pairs: lowercase, connection fields dropped, \\n splits",
              test_pairs_filtering);
  CU_add_test(s, "POST body: WINDOW_UPDATE only after pp_h2_consume", test_post_flow_control);
  CU_add_test(s, "a closed stream's unconsumed bytes return to the connection window",
              test_closed_stream_returns_connection_window);
  CU_add_test(s, "deferred data source resumes on new data", test_deferred_data_resumes);
  CU_add_test(s, "large response under a small output bound", test_large_response_bounded_output);
  CU_add_test(s, "several concurrent streams answered out of order", test_concurrent_streams);
  CU_add_test(s, "RST_STREAM from the client and from the owner", test_client_reset);
  CU_add_test(s, "h2c upgrade: stream 1, HTTP2-Settings decoding", test_upgrade);
  CU_add_test(s, "GOAWAY drain: in-flight finishes, later streams REFUSED_STREAM",
              test_goaway_drain);
  CU_add_test(s, "client GOAWAY then a request: ignored however the bytes are split",
              test_client_goaway_split);
  CU_add_test(s, "max concurrent streams exceeded", test_max_concurrent_streams);
  CU_add_test(s, "oversized header list answered 431", test_oversized_header_list);
  CU_add_test(s, "CONTINUATION flood ends the connection", test_continuation_flood);
  CU_add_test(s, "malformed requests reset with PROTOCOL_ERROR", test_bad_requests);
  CU_add_test(s, "frame-level errors: DATA after END_STREAM, window overflow, ...",
              test_frame_errors);
  CU_add_test(s, "padded DATA and trailers", test_padding_and_trailers);
  CU_add_test(s, "rapid reset flood ends the connection with GOAWAY", test_rapid_reset);
  CU_add_test(s, "PING / SETTINGS floods, too many settings, not HTTP/2", test_ack_flood);
  CU_add_test(s, "body limits: content-length 413, DATA beyond the limit, owner's status",
              test_body_limits);
  CU_add_test(s, "bytes fed in pieces of any size give the same result", test_split_feeding);
  CU_add_test(s, "API edges: unknown streams, 1xx, HEAD, CONNECT, bad limits", test_misc_api);
  CU_add_test(s, "RFC 8441 extended CONNECT: setting, tunnel both ways, malformed ones",
              test_extended_connect);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failures = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}
