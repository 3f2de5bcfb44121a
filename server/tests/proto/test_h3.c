/* Tests for the HTTP/3 endpoint (server/proto/h3.c).
 *
 * The peer is a real in-process client: ngtcp2 0.12 with the GnuTLS crypto backend and an
 * nghttp3 0.8 client connection, ALPN h3, not verifying the certificate. Datagrams go between
 * the client and pp_h3_server in memory (the server's out queue is drained into the client), and
 * time is a fake clock that only moves when a test says so or when the pump jumps to the next
 * timer. The certificate is a fresh development pair from pp_tls_dev_cert in a temp dir. */
#include <CUnit/Basic.h>
#include <arpa/inet.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <nghttp3/nghttp3.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/proto/h3.h"
#include "server/proto/tls.h"

static char cert_path[4096], key_path[4096], tmpdir[256];
static uint64_t now = 1000 * NGTCP2_SECONDS;
static pp_h3_server srv;
static struct sockaddr_in srv_addr;

/* ---- the server's owner ---- */

typedef struct req_rec {
  pp_h3_conn *conn;
  int64_t id;
  char method[16], path[256], authority[64], scheme[16], xtest[64], protocol[32];
  int has_cl, end_stream, body_end, closed;
  uint64_t cl, close_code;
  pp_buf body;
  int body_calls; /* on_body calls, and the largest piece */
  size_t max_piece;
} req_rec;

static req_rec reqs[64];
static int nreqs, conns_opened, conns_closed, answer_status;
static int respond_inside; /* 1: on_request answers 426 itself and returns 0; 2: ... and 403 */

static void copy_str(char *dst, size_t cap, const uint8_t *p, size_t n) {
  if (!p) n = 0;
  if (n >= cap) n = cap - 1;
  if (n) memcpy(dst, p, n);
  dst[n] = 0;
}

static void on_conn_open(pp_h3_server *s, pp_h3_conn *c) {
  (void)s, (void)c;
  conns_opened++;
}
static void on_conn_close(pp_h3_server *s, pp_h3_conn *c) {
  (void)s, (void)c;
  conns_closed++;
}
static int on_request(pp_h3_conn *c, const pp_h3_request *req, void **sd) {
  /* I/O-level calls from a callback are refused. */
  CU_ASSERT_EQUAL(pp_h3_server_flush(&srv, now), PP_H3_EREENTER);
  CU_ASSERT_EQUAL(pp_h3_conn_handle_expiry(c, now), PP_H3_EREENTER);
  if (answer_status) return answer_status;
  if (respond_inside) {
    pp_h2_header v = {(const uint8_t *)"sec-websocket-version", 21, (const uint8_t *)"13", 2};
    CU_ASSERT_EQUAL(pp_h3_respond(c, req->stream_id, 426, &v, 1, 0), 0);
    CU_ASSERT_EQUAL(pp_h3_send_data(c, req->stream_id, (const uint8_t *)"426\n", 4), 0);
    CU_ASSERT_EQUAL(pp_h3_send_end(c, req->stream_id), 0);
    *sd = NULL;
    return respond_inside == 1 ? 0 : 403;
  }
  CU_ASSERT_FATAL(nreqs < 64);
  req_rec *r = &reqs[nreqs++];
  memset(r, 0, sizeof *r);
  r->conn = c;
  r->id = req->stream_id;
  copy_str(r->method, sizeof r->method, req->method, req->method_len);
  copy_str(r->path, sizeof r->path, req->path, req->path_len);
  copy_str(r->authority, sizeof r->authority, req->authority, req->authority_len);
  copy_str(r->scheme, sizeof r->scheme, req->scheme, req->scheme_len);
  copy_str(r->protocol, sizeof r->protocol, req->protocol, req->protocol_len);
  for (size_t i = 0; i < req->header_count; i++)
    if (req->headers[i].name_len == 6 && memcmp(req->headers[i].name, "x-test", 6) == 0)
      copy_str(r->xtest, sizeof r->xtest, req->headers[i].value, req->headers[i].value_len);
  r->has_cl = req->has_content_length;
  r->cl = req->content_length;
  r->end_stream = req->end_stream;
  pp_buf_init(&r->body);
  *sd = r;
  return 0;
}
static int on_body(pp_h3_conn *c, int64_t id, void *sd, const uint8_t *data, size_t len) {
  (void)c, (void)id;
  req_rec *r = sd;
  if (!r) return 0;
  pp_buf_append(&r->body, data, len);
  r->body_calls++;
  if (len > r->max_piece) r->max_piece = len;
  return 0;
}
static int on_body_end(pp_h3_conn *c, int64_t id, void *sd) {
  (void)c, (void)id;
  if (!sd) return 0;
  ((req_rec *)sd)->body_end = 1;
  return 0;
}
static void on_close(pp_h3_conn *c, int64_t id, void *sd, uint64_t code) {
  (void)c, (void)id;
  req_rec *r = sd;
  if (!r) return;        /* answered from inside on_request (respond_inside) */
  CU_ASSERT(!r->closed); /* exactly once */
  r->closed = 1;
  r->close_code = code;
}

static int timer_calls;
static uint64_t timer_last;
static void on_conn_timer(pp_h3_server *s, pp_h3_conn *c, uint64_t expiry) {
  (void)s, (void)c;
  timer_calls++;
  timer_last = expiry;
}

static int acked_calls;
static size_t acked_last = 1;
static void on_stream_acked(pp_h3_conn *c, int64_t id, void *sd, size_t pending) {
  (void)id, (void)sd;
  acked_calls++;
  acked_last = pending;
  CU_ASSERT_EQUAL(pending, pp_h3_stream_pending(c, id));
}

static const pp_h3_callbacks server_cbs = {on_conn_open,  on_conn_close,   on_request,
                                           on_body,       on_body_end,     on_close,
                                           on_conn_timer, on_stream_acked, NULL};

/* ---- the client (server/tests/h3_test_client.h) ---- */

#include "server/tests/h3_test_client.h"

/* ---- fixtures ---- */

static void server_start(void (*tweak)(pp_h3_config *)) {
  pp_h3_config cfg;
  pp_h3_config_default(&cfg);
  cfg.cert_file = cert_path;
  cfg.key_file = key_path;
  memset(cfg.secret, 0x5a, sizeof cfg.secret);
  if (tweak) tweak(&cfg);
  CU_ASSERT_FATAL(pp_h3_server_init(&srv, &server_cbs, &cfg, NULL) == 0);
  nreqs = conns_opened = conns_closed = answer_status = timer_calls = 0;
  stray_count = 0;
}

static void server_stop(void) {
  for (int i = 0; i < 4; i++)
    client_free(&clients[i]);
  pp_h3_server_dispose(&srv);
  for (int i = 0; i < nreqs; i++)
    pp_buf_dispose(&reqs[i].body);
  nreqs = 0;
}

static client *connect_client(int idx) {
  client *c = client_new(idx);
  pump();
  return c;
}

static int has_line(const pp_buf *b, const char *line) {
  size_t n = strlen(line);
  for (size_t i = 0; i + n <= b->len; i++)
    if ((i == 0 || b->data[i - 1] == '\n') && memcmp(b->data + i, line, n) == 0 &&
        (i + n == b->len || b->data[i + n] == '\n'))
      return 1;
  return 0;
}

/* ---- tests ---- */

static void test_handshake(void) {
  server_start(NULL);
  client *c = connect_client(0);
  CU_ASSERT(c->handshake_done);
  CU_ASSERT(c->h3 != NULL);
  CU_ASSERT_EQUAL(srv.stats.connections, 1);
  CU_ASSERT_EQUAL(srv.stats.handshakes, 1);
  CU_ASSERT_EQUAL(pp_h3_server_conn_count(&srv), 1);
  CU_ASSERT_EQUAL(conns_opened, 1);
  CU_ASSERT(srv.conns && pp_h3_conn_handshake_done(srv.conns));
  /* Several CIDs issued (active_connection_id_limit of the client is 2 by default: 1 + 1). */
  CU_ASSERT(srv.cid_count >= 2);
  CU_ASSERT(pp_h3_conn_expiry(srv.conns) > now);
  /* The deadline is reported to the owner whenever it moves. */
  CU_ASSERT(timer_calls >= 1);
  CU_ASSERT_EQUAL(timer_last, pp_h3_conn_expiry(srv.conns));
  server_stop();
  CU_ASSERT_EQUAL(conns_closed, 1);
}

static void test_alpn_required(void) {
  server_start(NULL);
  client_alpn = "h2";
  client *c = client_new(0);
  client_alpn = "h3";
  pump();
  CU_ASSERT(!c->handshake_done);
  CU_ASSERT_EQUAL(srv.stats.handshakes, 0);
  CU_ASSERT(srv.stats.protocol_errors >= 1);
  for (int i = 0; i < 50 && pp_h3_server_conn_count(&srv); i++) {
    now += 100 * NGTCP2_MILLISECONDS;
    pp_h3_server_handle_expiry(&srv, now);
  }
  CU_ASSERT_EQUAL(pp_h3_server_conn_count(&srv), 0);
  server_stop();
}

static void test_get(void) {
  server_start(NULL);
  client *c = connect_client(0);
  int64_t sid = client_request(c, "GET", "/hello?x=1", NULL, 0, 0);
  pump();
  CU_ASSERT_EQUAL_FATAL(nreqs, 1);
  req_rec *r = &reqs[0];
  CU_ASSERT_EQUAL(r->id, sid);
  CU_ASSERT_STRING_EQUAL(r->method, "GET");
  CU_ASSERT_STRING_EQUAL(r->path, "/hello?x=1");
  CU_ASSERT_STRING_EQUAL(r->authority, "localhost");
  CU_ASSERT_STRING_EQUAL(r->scheme, "https");
  CU_ASSERT_STRING_EQUAL(r->xtest, "yes");
  CU_ASSERT(r->end_stream);
  CU_ASSERT(!r->has_cl);
  pp_h2_header pairs[] = {
      {(const uint8_t *)"Content-Type", 12, (const uint8_t *)"text/plain", 10},
      {(const uint8_t *)"X-Multi", 7, (const uint8_t *)"a\nb", 3},
      {(const uint8_t *)"Connection", 10, (const uint8_t *)"close", 5},
      {(const uint8_t *)"Bad Name", 8, (const uint8_t *)"x", 1},
  };
  CU_ASSERT_EQUAL(pp_h3_respond(r->conn, sid, 200, pairs, 4, 0), 0);
  CU_ASSERT_EQUAL(pp_h3_respond(r->conn, sid, 200, pairs, 1, 0), PP_H3_ESTREAM);
  CU_ASSERT_EQUAL(pp_h3_send_data(r->conn, sid, (const uint8_t *)"hello ", 6), 0);
  CU_ASSERT_EQUAL(pp_h3_send_data(r->conn, sid, (const uint8_t *)"world", 5), 0);
  CU_ASSERT_EQUAL(pp_h3_stream_pending(r->conn, sid), 11);
  CU_ASSERT_EQUAL(pp_h3_send_end(r->conn, sid), 0);
  pump();
  cstream *s = &c->streams[0];
  CU_ASSERT_EQUAL(s->status, 200);
  CU_ASSERT(s->end);
  CU_ASSERT_EQUAL(s->body.len, 11);
  CU_ASSERT(s->body.len == 11 && memcmp(s->body.data, "hello world", 11) == 0);
  CU_ASSERT(has_line(&s->hdrs, "content-type: text/plain"));
  CU_ASSERT(has_line(&s->hdrs, "x-multi: a"));
  CU_ASSERT(has_line(&s->hdrs, "x-multi: b"));
  CU_ASSERT(!has_line(&s->hdrs, "connection: close"));
  CU_ASSERT(r->closed);
  CU_ASSERT_EQUAL(r->close_code, 0);
  CU_ASSERT_EQUAL(pp_h3_stream_count(r->conn), 0);
  CU_ASSERT_EQUAL(pp_h3_pending_total(r->conn), 0);
  CU_ASSERT_EQUAL(srv.stats.streams_accepted, 1);
  /* A second request on the same connection reuses the records. */
  answer_status = 404;
  client_request(c, "GET", "/missing", NULL, 0, 0);
  pump();
  CU_ASSERT_EQUAL(c->streams[1].status, 404);
  CU_ASSERT(c->streams[1].end);
  CU_ASSERT_EQUAL(srv.stats.session_answers, 1);
  server_stop();
}

static void small_windows(pp_h3_config *cfg) {
  cfg->limits.stream_window = 16384;
  cfg->limits.conn_window = 65536;
}

static void test_post_flow_control(void) {
  server_start(small_windows);
  client *c = connect_client(0);
  static uint8_t body[100000];
  for (size_t i = 0; i < sizeof body; i++)
    body[i] = (uint8_t)(i * 7 + 3);
  int64_t sid = client_request(c, "POST", "/echo", body, sizeof body, 0);
  pump();
  CU_ASSERT_EQUAL_FATAL(nreqs, 1);
  req_rec *r = &reqs[0];
  CU_ASSERT(r->has_cl && r->cl == sizeof body);
  CU_ASSERT(!r->end_stream);
  /* Nothing beyond the initial stream window before consume. */
  /* The window counts HTTP/3 framing too (HEADERS, DATA headers: credited back at once). */
  CU_ASSERT(r->body.len <= 16384 && r->body.len > 16384 - 100);
  CU_ASSERT_EQUAL(ngtcp2_conn_get_max_stream_data_left(c->qc, sid), 0);
  size_t before = r->body.len;
  pump();
  CU_ASSERT_EQUAL(r->body.len, before);
  size_t consumed = 0;
  for (int i = 0; i < 100 && !r->body_end; i++) {
    size_t got = r->body.len - consumed;
    CU_ASSERT(got <= 16384);
    pp_h3_consume(r->conn, sid, got);
    consumed += got;
    pump();
  }
  CU_ASSERT(r->body_end);
  CU_ASSERT_EQUAL(r->body.len, sizeof body);
  CU_ASSERT(r->body.len == sizeof body && memcmp(r->body.data, body, sizeof body) == 0);
  pp_h3_consume(r->conn, sid, r->body.len - consumed);
  CU_ASSERT_EQUAL(pp_h3_respond(r->conn, sid, 201, NULL, 0, 0), 0);
  /* A response bigger than one chunk and than the client's flight. */
  static uint8_t big[200000];
  memset(big, 'z', sizeof big);
  CU_ASSERT_EQUAL(pp_h3_send_data(r->conn, sid, big, sizeof big), 0);
  CU_ASSERT_EQUAL(pp_h3_send_end(r->conn, sid), 0);
  pump();
  CU_ASSERT_EQUAL(c->streams[0].status, 201);
  CU_ASSERT_EQUAL(c->streams[0].body.len, sizeof big);
  CU_ASSERT(r->closed && r->close_code == 0);
  server_stop();
}

static req_rec *req_of(int64_t id) {
  for (int k = 0; k < nreqs; k++)
    if (reqs[k].id == id) return &reqs[k];
  return NULL;
}

/* Body bytes arrive a datagram (~1.2 KB) at a time but reach the owner gathered: one on_body
 * per datagram would make one worker-link BODY frame and 64 KiB write chunk each. */
static void test_body_gathered_into_pieces(void) {
  server_start(NULL);
  client *c = connect_client(0);
  static uint8_t body[1000000];
  for (size_t i = 0; i < sizeof body; i++)
    body[i] = (uint8_t)(i * 13 + 5);
  int64_t sid = client_request(c, "POST", "/up", body, sizeof body, 0);
  req_rec *r = NULL;
  size_t consumed = 0;
  for (int i = 0; i < 200 && !(r && r->body_end); i++) {
    pump();
    if (!r) r = req_of(sid);
    if (!r) continue;
    pp_h3_consume(r->conn, sid, r->body.len - consumed); /* an owner that takes all at once */
    consumed = r->body.len;
  }
  CU_ASSERT_FATAL(r != NULL);
  CU_ASSERT(r->body_end);
  CU_ASSERT(r->body.len == sizeof body && memcmp(r->body.data, body, sizeof body) == 0);
  CU_ASSERT(r->max_piece <= 65520);
  /* ~830 datagrams; pieces of up to 64 KiB (the client writes ~1000 datagrams a round) */
  CU_ASSERT(r->body_calls <= 60);
  CU_ASSERT(r->body_calls >= (int)(sizeof body / 65520));
  server_stop();
}

static void window_1mib(pp_h3_config *cfg) {
  cfg->limits.conn_window = 1u << 20; /* the old default: 4 parked stream windows fill it */
}

/* Requests whose owner does not consume (queued for a worker) hold at most their stream window;
 * the connection window (by default the sum of the stream windows) stays open for the stream
 * whose owner does. With a connection window smaller than the parked streams' windows, the
 * running stream gets nothing more: the deadlock of 32 x 4 MiB uploads (issue 13). */
static void run_parked_streams(int small_window) {
  server_start(small_window ? window_1mib : NULL);
  client *c = connect_client(0);
  static uint8_t body[700000];
  memset(body, 'p', sizeof body);
  int64_t ids[6];
  for (int i = 0; i < 6; i++)
    ids[i] = client_request(c, "POST", "/up", body, sizeof body, 0);
  pump();
  /* with the small window even the last HEADERS may wait for connection credit */
  CU_ASSERT_FATAL(small_window ? nreqs >= 4 : nreqs == 6);
  req_rec *run = req_of(ids[0]);
  CU_ASSERT_FATAL(run != NULL);
  size_t consumed = 0;
  for (int i = 0; i < 100 && !run->body_end; i++) {
    pp_h3_consume(run->conn, run->id, run->body.len - consumed);
    consumed = run->body.len;
    pump();
  }
  if (small_window) {
    CU_ASSERT(!run->body_end); /* starved: the parked streams hold the connection's credit */
  } else {
    CU_ASSERT(run->body_end);
    CU_ASSERT_EQUAL(run->body.len, sizeof body);
  }
  for (int i = 1; i < 6; i++) { /* parked: never more than their stream window */
    req_rec *r = req_of(ids[i]);
    CU_ASSERT(r != NULL || small_window);
    if (!r) continue;
    CU_ASSERT(r->body.len <= 256 * 1024);
    CU_ASSERT(!r->body_end);
  }
  server_stop();
}

static void test_parked_streams_do_not_starve_running_ones(void) {
  run_parked_streams(0);
  run_parked_streams(1);
}

static void test_concurrent_streams(void) {
  server_start(NULL);
  client *c = connect_client(0);
  int64_t ids[5];
  for (int i = 0; i < 5; i++) {
    char path[32];
    snprintf(path, sizeof path, "/s/%d", i);
    ids[i] = client_request(c, "GET", path, NULL, 0, 0);
  }
  pump();
  CU_ASSERT_EQUAL_FATAL(nreqs, 5);
  CU_ASSERT_EQUAL(pp_h3_stream_count(reqs[0].conn), 5);
  for (int i = 4; i >= 0; i--) {
    req_rec *r = NULL;
    for (int k = 0; k < nreqs; k++)
      if (reqs[k].id == ids[i]) r = &reqs[k];
    CU_ASSERT_FATAL(r != NULL);
    char want[32];
    snprintf(want, sizeof want, "/s/%d", i);
    CU_ASSERT_STRING_EQUAL(r->path, want);
    CU_ASSERT_EQUAL(pp_h3_respond(r->conn, r->id, 200, NULL, 0, 0), 0);
    CU_ASSERT_EQUAL(pp_h3_send_data(r->conn, r->id, (const uint8_t *)want, strlen(want)), 0);
    CU_ASSERT_EQUAL(pp_h3_send_end(r->conn, r->id), 0);
    if (i == 2) pump(); /* some finish before others are answered */
  }
  pump();
  for (int i = 0; i < 5; i++) {
    cstream *s = cs_of(c, ids[i]);
    char want[32];
    snprintf(want, sizeof want, "/s/%d", i);
    CU_ASSERT_EQUAL(s->status, 200);
    CU_ASSERT(s->body.len == strlen(want) && memcmp(s->body.data, want, s->body.len) == 0);
  }
  for (int k = 0; k < nreqs; k++)
    CU_ASSERT(reqs[k].closed && reqs[k].close_code == 0);
  server_stop();
}

/* An extended CONNECT (RFC 9220) held open with `body` as its first bytes; `path` NULL leaves
 * :path out (malformed), `method` lets a GET carry :protocol (malformed). */
static int64_t client_connect(client *c, const char *method, const char *protocol, const char *path,
                              const uint8_t *body, size_t body_len) {
  int64_t sid;
  CU_ASSERT_FATAL(ngtcp2_conn_open_bidi_stream(c->qc, &sid, NULL) == 0);
  cstream *s = &c->streams[c->nstreams++];
  memset(s, 0, sizeof *s);
  s->id = sid;
  s->req = body, s->req_len = body_len, s->hold = 1;
  pp_buf_init(&s->body);
  pp_buf_init(&s->hdrs);
  nghttp3_nv nva[6];
  size_t n = 0;
#define NV(N, V)                                                                                   \
  nva[n++] =                                                                                       \
      (nghttp3_nv){(uint8_t *)(N), (uint8_t *)(V), strlen(N), strlen(V), NGHTTP3_NV_FLAG_NONE}
  NV(":method", method);
  NV(":protocol", protocol);
  NV(":scheme", "https");
  NV(":authority", "localhost");
  if (path) NV(":path", path);
  NV("sec-websocket-version", "13");
#undef NV
  static const nghttp3_data_reader dr = {read_req};
  CU_ASSERT_FATAL(nghttp3_conn_submit_request(c->h3, sid, nva, n, &dr, s) == 0);
  return sid;
}

static void connect_off(pp_h3_config *cfg) {
  cfg->limits.connect_protocol = 0;
}

static void small_body_limit(pp_h3_config *cfg) {
  cfg->limits.max_body_bytes = 4; /* a tunnel is not bounded by it */
}

/* RFC 9220: the setting, an extended CONNECT as a tunnel (bytes both ways on an open stream),
 * and the malformed ones refused before the owner hears of them. */
static void test_extended_connect(void) {
  server_start(small_body_limit);
  client *c = connect_client(0);
  static const uint8_t hello[] = "hello, tunnel";
  int64_t sid = client_connect(c, "CONNECT", "websocket", "/chat?room=1", hello, 13);
  pump();
  CU_ASSERT_EQUAL_FATAL(nreqs, 1);
  req_rec *r = &reqs[0];
  CU_ASSERT_STRING_EQUAL(r->method, "CONNECT");
  CU_ASSERT_STRING_EQUAL(r->protocol, "websocket");
  CU_ASSERT_STRING_EQUAL(r->path, "/chat?room=1");
  CU_ASSERT(!r->end_stream);
  CU_ASSERT_EQUAL(r->body.len, 13); /* over max_body_bytes, yet delivered */
  CU_ASSERT(!r->body_end);
  pp_h3_consume(r->conn, sid, r->body.len);
  CU_ASSERT_EQUAL(pp_h3_respond(r->conn, sid, 200, NULL, 0, 0), 0);
  CU_ASSERT_EQUAL(pp_h3_send_data(r->conn, sid, (const uint8_t *)"first", 5), 0);
  pump();
  cstream *s = cs_of(c, sid);
  CU_ASSERT_EQUAL(s->status, 200);
  CU_ASSERT_EQUAL(s->body.len, 5);
  CU_ASSERT(!s->end);
  CU_ASSERT(!r->closed);
  /* later bytes both ways */
  static const uint8_t more[] = "more bytes";
  s->req = more, s->req_len = 10, s->req_off = 0;
  nghttp3_conn_resume_stream(c->h3, sid);
  CU_ASSERT_EQUAL(pp_h3_send_data(r->conn, sid, (const uint8_t *)"second", 6), 0);
  pump();
  CU_ASSERT_EQUAL(r->body.len, 23);
  CU_ASSERT_EQUAL(s->body.len, 11);
  CU_ASSERT(!r->closed);
  /* the client's FIN, then ours */
  s->hold = 0;
  nghttp3_conn_resume_stream(c->h3, sid);
  pump();
  CU_ASSERT(r->body_end);
  CU_ASSERT(!r->closed);
  CU_ASSERT_EQUAL(pp_h3_send_end(r->conn, sid), 0);
  pump();
  CU_ASSERT(s->end);
  CU_ASSERT(r->closed);
  CU_ASSERT_EQUAL(r->close_code, 0);
  /* malformed: no :path; :protocol on a GET */
  int64_t bad1 = client_connect(c, "CONNECT", "websocket", NULL, NULL, 0);
  int64_t bad2 = client_connect(c, "GET", "websocket", "/", NULL, 0);
  pump();
  CU_ASSERT_EQUAL(nreqs, 1);
  CU_ASSERT(cs_of(c, bad1)->status == 0 && cs_of(c, bad1)->closed);
  CU_ASSERT_EQUAL(cs_of(c, bad1)->close_code, NGHTTP3_H3_MESSAGE_ERROR);
  CU_ASSERT(cs_of(c, bad2)->status == 0 && cs_of(c, bad2)->closed);
  CU_ASSERT_EQUAL(cs_of(c, bad2)->close_code, NGHTTP3_H3_MESSAGE_ERROR);
  /* CONNECT with :scheme and :path but no :protocol is malformed too (RFC 9114 §4.4) */
  client_request(c, "CONNECT", "/", NULL, 0, 0);
  pump();
  CU_ASSERT_EQUAL(c->streams[c->nstreams - 1].status, 0);
  CU_ASSERT_EQUAL(c->streams[c->nstreams - 1].close_code, NGHTTP3_H3_MESSAGE_ERROR);
  CU_ASSERT_EQUAL(nreqs, 1);
  CU_ASSERT_EQUAL(pp_h3_server_conn_count(&srv), 1); /* stream errors only */
  server_stop();
  /* The owner answers from inside on_request (a 426 with its field) and returns 0; answering
   * and then refusing resets the stream instead. */
  server_start(NULL);
  c = connect_client(0);
  respond_inside = 1;
  int64_t in1 = client_connect(c, "CONNECT", "websocket", "/v", NULL, 0);
  pump();
  cstream *cs = cs_of(c, in1);
  CU_ASSERT_EQUAL(cs->status, 426);
  CU_ASSERT(has_line(&cs->hdrs, "sec-websocket-version: 13"));
  CU_ASSERT(cs->body.len == 4 && !memcmp(cs->body.data, "426\n", 4));
  respond_inside = 2;
  int64_t in2 = client_connect(c, "CONNECT", "websocket", "/v", NULL, 0);
  pump();
  respond_inside = 0;
  CU_ASSERT(cs_of(c, in2)->closed);
  CU_ASSERT_EQUAL(cs_of(c, in2)->close_code, NGHTTP3_H3_REQUEST_CANCELLED);
  server_stop();
  /* The setting off: :protocol is malformed. */
  server_start(connect_off);
  c = connect_client(0);
  sid = client_connect(c, "CONNECT", "websocket", "/chat", NULL, 0);
  pump();
  CU_ASSERT_EQUAL(nreqs, 0);
  CU_ASSERT(cs_of(c, sid)->status == 0 && cs_of(c, sid)->closed);
  CU_ASSERT_EQUAL(cs_of(c, sid)->close_code, NGHTTP3_H3_MESSAGE_ERROR);
  server_stop();
}

static void test_client_reset(void) {
  server_start(NULL);
  client *c = connect_client(0);
  static const uint8_t part[] = "partial upload";
  int64_t sid = client_request(c, "POST", "/upload", part, sizeof part - 1, 1);
  pump();
  CU_ASSERT_EQUAL_FATAL(nreqs, 1);
  CU_ASSERT_EQUAL(reqs[0].body.len, sizeof part - 1);
  CU_ASSERT(!reqs[0].closed);
  nghttp3_conn_shutdown_stream_write(c->h3, sid);
  CU_ASSERT(ngtcp2_conn_shutdown_stream(c->qc, sid, NGHTTP3_H3_REQUEST_INCOMPLETE) == 0);
  pump();
  CU_ASSERT(reqs[0].closed);
  CU_ASSERT_EQUAL(reqs[0].close_code, NGHTTP3_H3_REQUEST_INCOMPLETE); /* the client's code */
  CU_ASSERT_EQUAL(srv.stats.peer_resets, 1);
  CU_ASSERT_EQUAL(pp_h3_stream_count(reqs[0].conn), 0);
  /* The owner's calls on the gone stream fail cleanly. */
  CU_ASSERT_EQUAL(pp_h3_respond(reqs[0].conn, sid, 200, NULL, 0, 0), PP_H3_ESTREAM);
  CU_ASSERT_EQUAL(pp_h3_send_data(reqs[0].conn, sid, part, 1), PP_H3_ESTREAM);
  /* The owner resets a second stream: on_close with its code, the client sees the reset. */
  int64_t sid2 = client_request(c, "GET", "/slow", NULL, 0, 0);
  pump();
  CU_ASSERT_EQUAL_FATAL(nreqs, 2);
  pp_h3_respond(reqs[1].conn, sid2, 200, NULL, 0, 0);
  pp_h3_send_data(reqs[1].conn, sid2, part, 4);
  pp_h3_reset(reqs[1].conn, sid2, NGHTTP3_H3_INTERNAL_ERROR);
  pump();
  CU_ASSERT(reqs[1].closed);
  CU_ASSERT_EQUAL(reqs[1].close_code, NGHTTP3_H3_INTERNAL_ERROR);
  CU_ASSERT(cs_of(c, sid2)->closed);
  CU_ASSERT(!cs_of(c, sid2)->end);
  server_stop();
}

static int recv_raw(const uint8_t *p, size_t n, uint16_t port) {
  struct sockaddr_in from = {.sin_family = AF_INET, .sin_port = htons(port)};
  inet_pton(AF_INET, "10.0.0.9", &from.sin_addr);
  return pp_h3_server_recv(&srv, p, n, (struct sockaddr *)&srv_addr, sizeof srv_addr,
                           (struct sockaddr *)&from, sizeof from, 0, now);
}

static void test_version_negotiation(void) {
  server_start(NULL);
  uint8_t pkt[1200];
  memset(pkt, 0, sizeof pkt);
  pkt[0] = 0xc0;
  pkt[1] = 0x0a, pkt[2] = 0x0a, pkt[3] = 0x0a, pkt[4] = 0x0a; /* a reserved version */
  pkt[5] = 8;
  memcpy(pkt + 6, "DCID5678", 8);
  pkt[14] = 8;
  memcpy(pkt + 15, "SCID5678", 8);
  CU_ASSERT_EQUAL(recv_raw(pkt, sizeof pkt, 5000), 0);
  CU_ASSERT_EQUAL(srv.stats.version_negotiations, 1);
  CU_ASSERT_EQUAL(srv.stats.drop_bad_version, 1);
  const pp_h3_datagram *d = pp_h3_server_out_peek(&srv);
  CU_ASSERT_FATAL(d != NULL);
  CU_ASSERT(d->data[0] & 0x80);
  CU_ASSERT(d->data[1] == 0 && d->data[2] == 0 && d->data[3] == 0 && d->data[4] == 0);
  /* DCID of the reply is the client's SCID and the other way round. */
  CU_ASSERT(d->data[5] == 8 && memcmp(d->data + 6, "SCID5678", 8) == 0);
  CU_ASSERT(d->data[14] == 8 && memcmp(d->data + 15, "DCID5678", 8) == 0);
  int has_v1 = 0;
  for (size_t off = 23; off + 4 <= d->len; off += 4)
    if (d->data[off] == 0 && d->data[off + 1] == 0 && d->data[off + 2] == 0 &&
        d->data[off + 3] == 1)
      has_v1 = 1;
  CU_ASSERT(has_v1);
  CU_ASSERT_EQUAL(((const struct sockaddr_in *)&d->remote)->sin_port, htons(5000));
  pp_h3_server_out_pop(&srv);
  /* Too small to be a client's first flight: no reply. */
  CU_ASSERT_EQUAL(recv_raw(pkt, 200, 5000), 0);
  CU_ASSERT_EQUAL(srv.stats.version_negotiations, 1);
  CU_ASSERT_EQUAL(srv.stats.drop_bad_version, 2);
  CU_ASSERT_EQUAL(pp_h3_server_out_count(&srv), 0);
  CU_ASSERT_EQUAL(pp_h3_server_conn_count(&srv), 0);
  server_stop();
}

static void retry_on(pp_h3_config *cfg) {
  cfg->retry = 1;
}

static void test_retry(void) {
  server_start(retry_on);
  client *c = connect_client(0);
  CU_ASSERT_EQUAL(srv.stats.retries_sent, 1);
  CU_ASSERT(c->handshake_done);
  CU_ASSERT_EQUAL(srv.stats.handshakes, 1);
  CU_ASSERT_EQUAL(srv.stats.drop_token_invalid, 0);
  int64_t sid = client_request(c, "GET", "/after-retry", NULL, 0, 0);
  pump();
  CU_ASSERT_EQUAL_FATAL(nreqs, 1);
  pp_h3_respond(reqs[0].conn, sid, 204, NULL, 0, 1);
  pump();
  CU_ASSERT_EQUAL(c->streams[0].status, 204);
  /* The server handed out a NEW_TOKEN: the same client coming back skips the Retry. */
  CU_ASSERT_FATAL(new_token.len > 0);
  client_free(&clients[0]);
  use_token = 1;
  client *again = client_new(0);
  use_token = 0;
  pump();
  CU_ASSERT(again->handshake_done);
  CU_ASSERT_EQUAL(srv.stats.retries_sent, 1);
  /* A client whose token is damaged after the Retry: INVALID_TOKEN, no connection. */
  client *bad = client_new(1);
  bad->tamper_token = 1;
  pump();
  CU_ASSERT_EQUAL(srv.stats.retries_sent, 2);
  CU_ASSERT(srv.stats.drop_token_invalid >= 1);
  CU_ASSERT(!bad->handshake_done);
  /* The client read the CONNECTION_CLOSE (it decrypts with its own DCID's keys). */
  CU_ASSERT(ngtcp2_conn_is_in_draining_period(bad->qc));
  CU_ASSERT_EQUAL(pp_h3_server_conn_count(&srv), 2);
  server_stop();
}

/* The Length field of the first long-header packet, patched by delta. */
static void patch_length(uint8_t *p, int delta) {
  size_t vl;
  uint64_t tl;
  size_t off = initial_token_field(p, &vl, &tl) + vl + tl;
  size_t ll = (size_t)1 << (p[off] >> 6);
  uint64_t v = p[off] & 0x3f;
  for (size_t i = 1; i < ll; i++)
    v = (v << 8) | p[off + i];
  v += (uint64_t)delta;
  for (size_t i = ll; i-- > 1;) {
    p[off + i] = (uint8_t)v;
    v >>= 8;
  }
  p[off] = (uint8_t)((p[off] & 0xc0) | (v & 0x3f));
}

static void test_bad_initials(void) {
  server_start(NULL);
  client *c = client_new(0);
  c->mute = 1;
  client_write(c);
  CU_ASSERT_FATAL(c->first.len >= 1200);
  size_t n = c->first.len;
  static uint8_t buf[2000];
  /* Garbage: a long header cut inside its connection IDs. */
  static const uint8_t junk[] = {0xc3, 0, 0, 0, 1, 20, 1, 2};
  recv_raw(junk, sizeof junk, 6000);
  recv_raw(junk, 1, 6000);
  CU_ASSERT_EQUAL(srv.stats.drop_garbage, 2);
  /* Undersized: the Initial cut to 1000 bytes. */
  recv_raw(c->first.data, 1000, 6000);
  CU_ASSERT_EQUAL(srv.stats.drop_small_initial, 1);
  /* Oversized: padded past max_initial_datagram. */
  memcpy(buf, c->first.data, n);
  memset(buf + n, 0, sizeof buf - n);
  recv_raw(buf, 1600, 6000);
  CU_ASSERT_EQUAL(srv.stats.drop_large_initial, 1);
  /* Truncated: its Length runs past the datagram. */
  memcpy(buf, c->first.data, n);
  patch_length(buf, 100);
  recv_raw(buf, n, 6000);
  CU_ASSERT_EQUAL(srv.stats.drop_truncated, 1);
  CU_ASSERT_EQUAL(pp_h3_server_conn_count(&srv), 0);
  CU_ASSERT_EQUAL(pp_h3_server_out_count(&srv), 0);
  /* Every truncated prefix of the valid Initial is dropped without a connection. */
  for (size_t len = 0; len < n; len += 37)
    recv_raw(c->first.data, len, 6001);
  CU_ASSERT_EQUAL(pp_h3_server_conn_count(&srv), 0);
  /* The intact one still makes a connection. */
  recv_raw(c->first.data, n, 6000);
  CU_ASSERT_EQUAL(pp_h3_server_conn_count(&srv), 1);
  CU_ASSERT(pp_h3_server_out_count(&srv) > 0);
  while (pp_h3_server_out_peek(&srv))
    pp_h3_server_out_pop(&srv);
  server_stop();
}

static void one_reset(pp_h3_config *cfg) {
  cfg->limits.reset_burst = 1;
  cfg->limits.reset_rate = 1;
}

static void test_stateless_reset(void) {
  server_start(one_reset);
  uint8_t pkt[60];
  gnutls_rnd(GNUTLS_RND_RANDOM, pkt, sizeof pkt);
  pkt[0] = 0x40 | (pkt[0] & 0x3f);
  recv_raw(pkt, sizeof pkt, 7000);
  CU_ASSERT_EQUAL(srv.stats.drop_unknown_cid, 1);
  CU_ASSERT_EQUAL(srv.stats.stateless_resets, 1);
  const pp_h3_datagram *d = pp_h3_server_out_peek(&srv);
  CU_ASSERT_FATAL(d != NULL);
  CU_ASSERT(d->len < sizeof pkt && d->len >= 21);
  CU_ASSERT((d->data[0] & 0xc0) == 0x40);
  ngtcp2_cid cid;
  ngtcp2_cid_init(&cid, pkt + 1, PP_H3_SCID_LEN);
  uint8_t token[NGTCP2_STATELESS_RESET_TOKENLEN];
  ngtcp2_crypto_generate_stateless_reset_token(token, srv.cfg.secret, PP_H3_SECRET_LEN, &cid);
  CU_ASSERT(memcmp(d->data + d->len - sizeof token, token, sizeof token) == 0);
  pp_h3_server_out_pop(&srv);
  /* Again at once: the bucket is empty. */
  recv_raw(pkt, sizeof pkt, 7000);
  CU_ASSERT_EQUAL(srv.stats.stateless_resets, 1);
  CU_ASSERT_EQUAL(srv.stats.resets_rate_limited, 1);
  CU_ASSERT_EQUAL(pp_h3_server_out_count(&srv), 0);
  /* Too short to be answered with something shorter. */
  now += 2 * NGTCP2_SECONDS;
  recv_raw(pkt, 22, 7000);
  CU_ASSERT_EQUAL(srv.stats.stateless_resets, 1);
  /* A second later the bucket has a token again. */
  recv_raw(pkt, sizeof pkt, 7000);
  CU_ASSERT_EQUAL(srv.stats.stateless_resets, 2);
  server_stop();
}

static void test_reset_after_restart(void) {
  server_start(NULL);
  client *c = connect_client(0);
  CU_ASSERT_FATAL(c->handshake_done);
  /* The server restarts with the same secret: the client's next packet meets no connection and
   * the stateless reset it gets carries the token it was given for that CID. */
  pp_h3_server_dispose(&srv);
  pp_h3_config cfg;
  pp_h3_config_default(&cfg);
  cfg.cert_file = cert_path;
  cfg.key_file = key_path;
  memset(cfg.secret, 0x5a, sizeof cfg.secret);
  CU_ASSERT_FATAL(pp_h3_server_init(&srv, &server_cbs, &cfg, NULL) == 0);
  client_request(c, "GET", "/anyone-there", NULL, 0, 0);
  pump();
  CU_ASSERT(srv.stats.stateless_resets >= 1);
  CU_ASSERT(ngtcp2_conn_is_in_draining_period(c->qc));
  CU_ASSERT_EQUAL(pp_h3_server_conn_count(&srv), 0);
  server_stop();
}

static void short_idle(pp_h3_config *cfg) {
  cfg->limits.idle_timeout_ns = 2 * NGTCP2_SECONDS;
}

static void test_idle_timeout(void) {
  server_start(short_idle);
  client *c = connect_client(0);
  CU_ASSERT_FATAL(c->handshake_done);
  int64_t sid = client_request(c, "GET", "/held", NULL, 0, 0);
  pump();
  CU_ASSERT_EQUAL_FATAL(nreqs, 1);
  (void)sid;
  /* The client vanishes. */
  c->mute = c->deaf = 1;
  uint64_t until = now + 10 * NGTCP2_SECONDS;
  while (now < until && pp_h3_server_conn_count(&srv)) {
    now += 100 * NGTCP2_MILLISECONDS;
    pp_h3_server_handle_expiry(&srv, now);
    deliver();
  }
  CU_ASSERT_EQUAL(pp_h3_server_conn_count(&srv), 0);
  CU_ASSERT_EQUAL(srv.stats.idle_closes, 1);
  CU_ASSERT_EQUAL(conns_closed, 1);
  CU_ASSERT(reqs[0].closed);
  CU_ASSERT_EQUAL(reqs[0].close_code, NGHTTP3_H3_REQUEST_CANCELLED);
  CU_ASSERT_EQUAL(srv.cid_count, 0);
  server_stop();
}

static void test_graceful_shutdown(void) {
  server_start(NULL);
  client *c = connect_client(0);
  int64_t sid = client_request(c, "GET", "/in-flight", NULL, 0, 0);
  pump();
  CU_ASSERT_EQUAL_FATAL(nreqs, 1);
  CU_ASSERT_EQUAL(pp_h3_server_shutdown(&srv, now), 0);
  pump();
  CU_ASSERT(c->got_goaway >= 1);
  CU_ASSERT_EQUAL(pp_h3_server_conn_count(&srv), 1); /* the stream is still open */
  /* Let the final GOAWAY go (two PTOs after the notice). */
  for (int i = 0; i < 20; i++) {
    now += 50 * NGTCP2_MILLISECONDS;
    pp_h3_server_handle_expiry(&srv, now);
    pump();
  }
  CU_ASSERT(c->got_goaway >= 2);
  CU_ASSERT(c->goaway_id > sid); /* the in-flight stream is below the last id */
  CU_ASSERT_EQUAL(pp_h3_server_conn_count(&srv), 1);
  CU_ASSERT_EQUAL(pp_h3_respond(reqs[0].conn, sid, 200, NULL, 0, 0), 0);
  CU_ASSERT_EQUAL(pp_h3_send_data(reqs[0].conn, sid, (const uint8_t *)"bye", 3), 0);
  CU_ASSERT_EQUAL(pp_h3_send_end(reqs[0].conn, sid), 0);
  pump();
  CU_ASSERT_EQUAL(c->streams[0].status, 200);
  CU_ASSERT(c->streams[0].body.len == 3);
  CU_ASSERT(reqs[0].closed && reqs[0].close_code == 0);
  /* Then CONNECTION_CLOSE(H3_NO_ERROR): the client drains, the server frees after its period. */
  CU_ASSERT(ngtcp2_conn_is_in_draining_period(c->qc));
  for (int i = 0; i < 50 && pp_h3_server_conn_count(&srv); i++) {
    now += 100 * NGTCP2_MILLISECONDS;
    pp_h3_server_handle_expiry(&srv, now);
  }
  CU_ASSERT_EQUAL(pp_h3_server_conn_count(&srv), 0);
  CU_ASSERT_EQUAL(conns_closed, 1);
  server_stop();
}

static void test_client_stop_sending(void) {
  server_start(NULL);
  client *c = connect_client(0);
  int64_t sid = client_request(c, "GET", "/stream", NULL, 0, 0);
  pump();
  CU_ASSERT_EQUAL_FATAL(nreqs, 1);
  CU_ASSERT_EQUAL(pp_h3_respond(reqs[0].conn, sid, 200, NULL, 0, 0), 0);
  CU_ASSERT_EQUAL(pp_h3_send_data(reqs[0].conn, sid, (const uint8_t *)"tick\n", 5), 0);
  pump();
  CU_ASSERT_EQUAL(cs_of(c, sid)->body.len, 5);
  /* The client leaves mid-response: STOP_SENDING. */
  CU_ASSERT(ngtcp2_conn_shutdown_stream_read(c->qc, sid, NGHTTP3_H3_REQUEST_INCOMPLETE) == 0);
  pump();
  CU_ASSERT(reqs[0].closed);
  CU_ASSERT_EQUAL(reqs[0].close_code, NGHTTP3_H3_REQUEST_INCOMPLETE); /* the client's code */
  CU_ASSERT_EQUAL(pp_h3_send_data(reqs[0].conn, sid, (const uint8_t *)"tick\n", 5), PP_H3_ESTREAM);
  CU_ASSERT_EQUAL(pp_h3_stream_count(reqs[0].conn), 0);
  CU_ASSERT_EQUAL(pp_h3_server_conn_count(&srv), 1);
  server_stop();
}

static void test_qpack_error(void) {
  server_start(NULL);
  client *c = connect_client(0);
  CU_ASSERT_FATAL(c->handshake_done);
  /* HEADERS whose field line names static-table entry 190 (there are 99). */
  static const uint8_t bad[] = {0x01, 0x04, 0x00, 0x00, 0xff, 0x7f};
  CU_ASSERT_FATAL(ngtcp2_conn_open_bidi_stream(c->qc, &c->raw_sid, NULL) == 0);
  c->raw = bad, c->raw_len = sizeof bad;
  pump();
  CU_ASSERT_EQUAL(srv.stats.qpack_errors, 1);
  CU_ASSERT_EQUAL(nreqs, 0);
  CU_ASSERT(ngtcp2_conn_is_in_draining_period(c->qc));
  for (int i = 0; i < 50 && pp_h3_server_conn_count(&srv); i++) {
    now += 100 * NGTCP2_MILLISECONDS;
    pp_h3_server_handle_expiry(&srv, now);
  }
  CU_ASSERT_EQUAL(pp_h3_server_conn_count(&srv), 0);
  server_stop();
}

static void small_queue(pp_h3_config *cfg) {
  cfg->limits.out_queue = 4;
}

static void test_bounded_out_queue(void) {
  server_start(small_queue);
  client *c = connect_client(0);
  CU_ASSERT_FATAL(c->handshake_done);
  int64_t sid = client_request(c, "GET", "/big", NULL, 0, 0);
  pump();
  CU_ASSERT_EQUAL_FATAL(nreqs, 1);
  static uint8_t big[300000];
  for (size_t i = 0; i < sizeof big; i++)
    big[i] = (uint8_t)(i % 251);
  CU_ASSERT_EQUAL(pp_h3_respond(reqs[0].conn, sid, 200, NULL, 0, 0), 0);
  CU_ASSERT_EQUAL(pp_h3_send_data(reqs[0].conn, sid, big, sizeof big), 0);
  CU_ASSERT_EQUAL(pp_h3_send_end(reqs[0].conn, sid), 0);
  pp_h3_server_flush(&srv, now);
  CU_ASSERT_EQUAL(pp_h3_server_out_count(&srv), 4);
  CU_ASSERT(pp_h3_server_expiry(&srv) == 0); /* more to write once drained */
  pump();
  cstream *s = cs_of(c, sid);
  CU_ASSERT_EQUAL(s->body.len, sizeof big);
  CU_ASSERT(s->body.len == sizeof big && memcmp(s->body.data, big, sizeof big) == 0);
  CU_ASSERT(reqs[0].closed && reqs[0].close_code == 0);
  server_stop();
}

static void test_migration_new_cid(void) {
  server_start(NULL);
  client *c = connect_client(0);
  CU_ASSERT_FATAL(c->handshake_done);
  int64_t sid = client_request(c, "GET", "/before", NULL, 0, 0);
  pump();
  CU_ASSERT_EQUAL_FATAL(nreqs, 1);
  pp_h3_respond(reqs[0].conn, sid, 204, NULL, 0, 1);
  pump();
  size_t cids_before = srv.cid_count;
  CU_ASSERT(cids_before >= 2);
  /* The client moves to another port: a new path with a new connection ID of ours. */
  c->addr.sin_port = htons(41000);
  ngtcp2_path path;
  client_path(c, &path);
  CU_ASSERT_FATAL(ngtcp2_conn_initiate_immediate_migration(c->qc, &path, now) == 0);
  int64_t sid2 = client_request(c, "GET", "/after", NULL, 0, 0);
  pump();
  CU_ASSERT_EQUAL_FATAL(nreqs, 2);
  CU_ASSERT_STRING_EQUAL(reqs[1].path, "/after");
  CU_ASSERT_EQUAL(reqs[1].conn, reqs[0].conn);
  pp_h3_respond(reqs[1].conn, sid2, 200, NULL, 0, 0);
  pp_h3_send_data(reqs[1].conn, sid2, (const uint8_t *)"moved", 5);
  pp_h3_send_end(reqs[1].conn, sid2);
  pump();
  CU_ASSERT_EQUAL(cs_of(c, sid2)->status, 200);
  CU_ASSERT_EQUAL(cs_of(c, sid2)->body.len, 5);
  /* The old CID was retired and replaced: the map does not grow without bound. */
  CU_ASSERT(srv.stats.cids_retired >= 1);
  CU_ASSERT(srv.stats.cids_issued >= 2);
  CU_ASSERT(srv.cid_count <= cids_before + 1);
  CU_ASSERT_EQUAL(pp_h3_server_conn_count(&srv), 1);
  server_stop();
  CU_ASSERT_EQUAL(srv.cid_count, 0);
}

static void small_requests(pp_h3_config *cfg) {
  cfg->limits.max_header_list = 1000;
  cfg->limits.max_body_bytes = 1000;
}

static void test_session_answers(void) {
  server_start(small_requests);
  client *c = connect_client(0);
  CU_ASSERT_FATAL(c->handshake_done);
  static char pad[1200];
  memset(pad, 'p', sizeof pad - 1);
  extra_value = pad;
  int64_t big_head = client_request(c, "GET", "/big-head", NULL, 0, 0);
  extra_value = NULL;
  static uint8_t body[2000];
  int64_t big_body = client_request(c, "POST", "/big-body", body, sizeof body, 0);
  pump();
  CU_ASSERT_EQUAL(nreqs, 0); /* neither reached the owner */
  CU_ASSERT_EQUAL(cs_of(c, big_head)->status, 431);
  CU_ASSERT_EQUAL(cs_of(c, big_body)->status, 413);
  CU_ASSERT(cs_of(c, big_body)->end);
  CU_ASSERT_EQUAL(srv.stats.session_answers, 2);
  CU_ASSERT_EQUAL(pp_h3_stream_count(srv.conns), 0);
  /* The connection is still good. */
  int64_t ok = client_request(c, "GET", "/ok", NULL, 0, 0);
  pump();
  CU_ASSERT_EQUAL_FATAL(nreqs, 1);
  pp_h3_respond(reqs[0].conn, ok, 204, NULL, 0, 1);
  pump();
  CU_ASSERT_EQUAL(cs_of(c, ok)->status, 204);
  server_stop();
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rng(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

/* A poor man's fuzz run: the datagrams of a real exchange, mutated (bytes flipped, cut,
 * extended) and replayed from the client's address and from strangers, then random junk. The
 * server must not crash, leak (ASan) or hold more than the one real connection. */
static void test_mutated_datagrams(void) {
  server_start(NULL);
  client *c = client_new(0);
  c->recording = 1;
  pump();
  int64_t sid = client_request(c, "POST", "/m", (const uint8_t *)"abc", 3, 0);
  pump();
  CU_ASSERT_EQUAL_FATAL(nreqs, 1);
  pp_h3_respond(reqs[0].conn, sid, 200, NULL, 0, 0);
  pp_h3_send_data(reqs[0].conn, sid, (const uint8_t *)"xyz", 3);
  pp_h3_send_end(reqs[0].conn, sid);
  pump();
  c->recording = 0;
  CU_ASSERT_EQUAL(cs_of(c, sid)->status, 200);
  /* Index the recorded datagrams. */
  size_t offs[256], lens[256], count = 0;
  for (size_t off = 0; off + 2 <= c->record.len && count < 256;) {
    size_t n = (size_t)c->record.data[off] << 8 | c->record.data[off + 1];
    offs[count] = off + 2, lens[count] = n, count++;
    off += 2 + n;
  }
  CU_ASSERT_FATAL(count >= 3);
  static uint8_t buf[2048];
  for (int i = 0; i < 3000; i++) {
    size_t k = rng() % count, n = lens[k];
    memcpy(buf, c->record.data + offs[k], n);
    int flips = 1 + (int)(rng() % 4);
    for (int f = 0; f < flips; f++)
      buf[rng() % n] ^= (uint8_t)(1u << (rng() % 8));
    switch (rng() % 4) {
    case 0: n = rng() % (n + 1); break;
    case 1:
      if (n < sizeof buf - 64) {
        size_t extra = rng() % 64;
        for (size_t e = 0; e < extra; e++)
          buf[n + e] = (uint8_t)rng();
        n += extra;
      }
      break;
    default: break;
    }
    if (rng() % 2)
      pp_h3_server_recv(&srv, buf, n, (struct sockaddr *)&srv_addr, sizeof srv_addr,
                        (struct sockaddr *)&c->addr, sizeof c->addr, 0, now);
    else
      recv_raw(buf, n, (uint16_t)(8000 + rng() % 4));
    while (pp_h3_server_out_peek(&srv))
      pp_h3_server_out_pop(&srv);
    if (i % 100 == 0) {
      now += 10 * NGTCP2_MILLISECONDS;
      pp_h3_server_handle_expiry(&srv, now);
    }
  }
  for (int i = 0; i < 2000; i++) {
    size_t n = rng() % 1500;
    for (size_t b = 0; b < n; b++)
      buf[b] = (uint8_t)rng();
    if (i % 3 == 0 && n > 0) buf[0] |= 0xc0; /* long headers too */
    recv_raw(buf, n, 9000);
    while (pp_h3_server_out_peek(&srv))
      pp_h3_server_out_pop(&srv);
  }
  CU_ASSERT(pp_h3_server_conn_count(&srv) <= 1);
  CU_ASSERT(srv.stats.drop_garbage + srv.stats.drop_unknown_cid + srv.stats.drop_bad_version > 0);
  server_stop();
}

static void tiny_limits(pp_h3_config *cfg) {
  cfg->limits.max_connections = 1;
  cfg->limits.max_stream_unacked = 20000;
}

static void test_limits(void) {
  server_start(tiny_limits);
  client *c = connect_client(0);
  CU_ASSERT(c->handshake_done);
  /* A second client is over max_connections. */
  client *c2 = client_new(1);
  pump();
  CU_ASSERT(!c2->handshake_done);
  CU_ASSERT(srv.stats.drop_too_many_conns >= 1);
  CU_ASSERT_EQUAL(pp_h3_server_conn_count(&srv), 1);
  /* The unacknowledged bound per stream. */
  int64_t sid = client_request(c, "GET", "/big", NULL, 0, 0);
  pump();
  CU_ASSERT_EQUAL_FATAL(nreqs, 1);
  static uint8_t block[15000];
  memset(block, 'q', sizeof block);
  CU_ASSERT_EQUAL(pp_h3_respond(reqs[0].conn, sid, 200, NULL, 0, 0), 0);
  CU_ASSERT_EQUAL(pp_h3_send_data(reqs[0].conn, sid, block, sizeof block), 0);
  CU_ASSERT_EQUAL(pp_h3_send_data(reqs[0].conn, sid, block, sizeof block), PP_H3_EFULL);
  acked_calls = 0;
  pump(); /* acknowledged: room again, and the owner was told */
  CU_ASSERT_EQUAL(pp_h3_stream_pending(reqs[0].conn, sid), 0);
  CU_ASSERT(acked_calls >= 1);
  CU_ASSERT_EQUAL(acked_last, 0);
  CU_ASSERT_EQUAL(pp_h3_send_data(reqs[0].conn, sid, block, sizeof block), 0);
  CU_ASSERT_EQUAL(pp_h3_send_end(reqs[0].conn, sid), 0);
  pump();
  CU_ASSERT_EQUAL(c->streams[0].body.len, 2 * sizeof block);
  /* HEAD: no body even if the owner sends one. */
  int64_t sid2 = client_request(c, "HEAD", "/h", NULL, 0, 0);
  pump();
  CU_ASSERT_EQUAL_FATAL(nreqs, 2);
  CU_ASSERT_EQUAL(pp_h3_respond(reqs[1].conn, sid2, 200, NULL, 0, 0), 0);
  pp_h3_send_data(reqs[1].conn, sid2, block, 10);
  pump();
  CU_ASSERT_EQUAL(cs_of(c, sid2)->status, 200);
  CU_ASSERT_EQUAL(cs_of(c, sid2)->body.len, 0);
  CU_ASSERT(reqs[1].closed);
  server_stop();
}

int main(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/pp-h3-test-XXXXXX");
  if (!mkdtemp(tmpdir)) return 1;
  char fp[PP_TLS_FINGERPRINT_LEN], err[256];
  if (pp_tls_dev_cert(tmpdir, cert_path, sizeof cert_path, key_path, sizeof key_path, fp, sizeof fp,
                      err, sizeof err) != 0) {
    fprintf(stderr, "dev cert: %s\n", err);
    return 1;
  }
  srv_addr.sin_family = AF_INET;
  srv_addr.sin_port = htons(443);
  inet_pton(AF_INET, "10.0.0.1", &srv_addr.sin_addr);
  pp_buf_init(&stray);
  pp_buf_init(&new_token);
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("h3", NULL, NULL);
  CU_add_test(s, "handshake completes (GnuTLS, ALPN h3)", test_handshake);
  CU_add_test(s, "ALPN h3 is mandatory", test_alpn_required);
  CU_add_test(s, "GET end to end: request fields, response head, data, end", test_get);
  CU_add_test(s, "POST body: no credit beyond the window before consume", test_post_flow_control);
  CU_add_test(s, "several concurrent streams answered out of order", test_concurrent_streams);
  CU_add_test(s, "request body handed up in gathered pieces", test_body_gathered_into_pieces);
  CU_add_test(s, "parked streams do not starve the consuming one (connection window)",
              test_parked_streams_do_not_starve_running_ones);
  CU_add_test(s, "RESET_STREAM from the client, reset by the owner", test_client_reset);
  CU_add_test(s, "RFC 9220 extended CONNECT: setting, tunnel both ways, malformed ones",
              test_extended_connect);
  CU_add_test(s, "version negotiation for an unknown version", test_version_negotiation);
  CU_add_test(s, "Retry, then a handshake with the token; a bad token", test_retry);
  CU_add_test(s, "garbage, undersized, oversized, truncated Initials dropped", test_bad_initials);
  CU_add_test(s, "unknown short-header CID: one stateless reset, rate-limited",
              test_stateless_reset);
  CU_add_test(s, "after a restart with the same secret the client accepts the reset",
              test_reset_after_restart);
  CU_add_test(s, "idle timeout frees a vanished client", test_idle_timeout);
  CU_add_test(s, "graceful shutdown: GOAWAY, in-flight finishes, close", test_graceful_shutdown);
  CU_add_test(s, "limits: connections, unacknowledged bytes, HEAD", test_limits);
  CU_add_test(s, "STOP_SENDING from the client mid-response", test_client_stop_sending);
  CU_add_test(s, "QPACK error closes the connection, counted", test_qpack_error);
  CU_add_test(s, "a full out queue pauses writing, flush resumes it", test_bounded_out_queue);
  CU_add_test(s, "431 and 413 answered by the session", test_session_answers);
  CU_add_test(s, "mutated and random datagrams: no crash, bounded", test_mutated_datagrams);
  CU_add_test(s, "client migration: new path, new CID, old one retired", test_migration_new_cid);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failures = CU_get_number_of_failures();
  CU_cleanup_registry();
  pp_buf_dispose(&stray);
  pp_buf_dispose(&new_token);
  unlink(cert_path);
  unlink(key_path);
  rmdir(tmpdir);
  return failures ? 1 : 0;
}
