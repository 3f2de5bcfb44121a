/* The in-process HTTP/3 test client of server/tests/proto/test_h3.c and fuzz/gen_h3_corpus.c (one
 * copy; included by exactly one .c file of each program, its functions are static).
 *
 * A real client: the project's QUIC client kit (quic_client/quic_client.h: ngtcp2 0.12 with the
 * GnuTLS crypto backend and an nghttp3 0.8 client connection), ALPN h3 (client_alpn), not
 * verifying the certificate; `qc`, `h3` and `handshake_done` of a client name the kit session's
 * (set when it creates them), so tests read them directly. Datagrams go between up to
 * four clients and one pp_h3_server in memory: client_write() hands what a client sends to
 * pp_h3_server_recv, deliver() drains the server's out queue into the client whose address it
 * names, pump() runs both until quiet on the fake clock. client_request() opens a request
 * stream (a body given whole, or held open with `hold`).
 *
 * The including file defines, before including this: `now` (uint64_t, the fake clock in ns),
 * `srv` (pp_h3_server) and `srv_addr` (struct sockaddr_in, the server's address), and
 * CU_ASSERT / CU_ASSERT_FATAL (CUnit's, or its own). It may set h3c_on_send and
 * h3c_after_recv. */
#ifndef PP_H3_TEST_CLIENT_H
#define PP_H3_TEST_CLIENT_H

#include <arpa/inet.h>
#include <gnutls/gnutls.h>
#include <nghttp3/nghttp3.h>
#include <ngtcp2/ngtcp2.h>
#include <stdlib.h>
#include <string.h>

#include "quic_client/quic_client.h"
#include "server/base/buf.h"
#include "server/proto/h3.h"

typedef struct cstream {
  int64_t id;
  int status, end, closed, hold;
  uint64_t close_code;
  pp_buf body, hdrs;
  const uint8_t *req;
  size_t req_len, req_off;
} cstream;

typedef struct client {
  pp_qc_session s;  /* first: the connection (the kit's); s.data = this client */
  ngtcp2_conn *qc;  /* s.qc */
  nghttp3_conn *h3; /* s.h3, once the handshake completed */
  gnutls_certificate_credentials_t cred;
  struct sockaddr_in addr;
  int handshake_done, got_goaway, mute, deaf, tamper_token, write_err;
  int64_t goaway_id;
  cstream streams[32];
  int nstreams;
  pp_buf first;  /* the first datagram it sent (when mute) */
  pp_buf record; /* every datagram it sent while recording: u16 length, bytes */
  int recording;
  int64_t raw_sid; /* a stream written around nghttp3 (bad input), or -1 */
  const uint8_t *raw;
  size_t raw_len;
  int sent;
} client;

static client clients[4];
/* Optional hooks of the including program: every datagram a client sends, just before the
 * server gets it, and after the server handled it. */
static void (*h3c_on_send)(client *c, const uint8_t *p, size_t n);
static void (*h3c_after_recv)(void);
static const char *client_alpn = "h3"; /* what the next client offers */
static pp_buf new_token;               /* the last NEW_TOKEN a client received */
static int use_token;                  /* the next client presents it */

static int cli_recv_new_token(ngtcp2_conn *qc, const ngtcp2_vec *token, void *ud) {
  (void)qc, (void)ud;
  new_token.len = 0;
  pp_buf_append(&new_token, token->base, token->len);
  return 0;
}

static cstream *cs_of(client *c, int64_t id) {
  for (int i = 0; i < c->nstreams; i++)
    if (c->streams[i].id == id) return &c->streams[i];
  return NULL;
}

static int h3_recv_header(nghttp3_conn *h3, int64_t id, int32_t token, nghttp3_rcbuf *name,
                          nghttp3_rcbuf *value, uint8_t flags, void *ud, void *sud) {
  (void)h3, (void)flags, (void)sud;
  cstream *s = cs_of(ud, id);
  if (!s) return 0;
  nghttp3_vec n = nghttp3_rcbuf_get_buf(name), v = nghttp3_rcbuf_get_buf(value);
  if (token == NGHTTP3_QPACK_TOKEN__STATUS) {
    s->status = atoi((const char *)v.base);
    return 0;
  }
  pp_buf_append(&s->hdrs, n.base, n.len);
  pp_buf_append(&s->hdrs, ": ", 2);
  pp_buf_append(&s->hdrs, v.base, v.len);
  pp_buf_append(&s->hdrs, "\n", 1);
  return 0;
}
static int h3_recv_data(nghttp3_conn *h3, int64_t id, const uint8_t *data, size_t len, void *ud,
                        void *sud) {
  (void)h3, (void)sud;
  client *c = ud;
  cstream *s = cs_of(c, id);
  if (s) pp_buf_append(&s->body, data, len);
  pp_qc_consumed(&c->s, id, len);
  return 0;
}
static int h3_end_stream(nghttp3_conn *h3, int64_t id, void *ud, void *sud) {
  (void)h3, (void)sud;
  cstream *s = cs_of(ud, id);
  if (s) s->end = 1;
  return 0;
}
static int h3_stream_close(nghttp3_conn *h3, int64_t id, uint64_t code, void *ud, void *sud) {
  (void)h3, (void)sud;
  cstream *s = cs_of(ud, id);
  if (s) s->closed = 1, s->close_code = code;
  return 0;
}
static int h3_shutdown(nghttp3_conn *h3, int64_t id, void *ud) {
  (void)h3;
  client *c = ud;
  c->got_goaway++;
  c->goaway_id = id;
  return 0;
}

static nghttp3_callbacks client_h3_callbacks; /* the kit's glue and the above (client_new) */

/* The client's current path: its address may change (a migration test moves it), so this is
 * built from c->addr each time rather than from the kit's copy of the first path. */
static void client_path(client *c, ngtcp2_path *p) {
  p->local.addr = (ngtcp2_sockaddr *)&c->addr;
  p->local.addrlen = sizeof c->addr;
  p->remote.addr = (ngtcp2_sockaddr *)&srv_addr;
  p->remote.addrlen = sizeof srv_addr;
  p->user_data = NULL;
}

/* The kit started HTTP/3 (or failed to): the client's names for it. */
static void cli_on_handshake(pp_qc_session *s) {
  client *c = s->data;
  c->handshake_done = 1;
  c->h3 = s->h3;
}

static client *client_new(int idx) {
  client *c = &clients[idx];
  memset(c, 0, sizeof *c);
  c->raw_sid = -1;
  c->addr.sin_family = AF_INET;
  c->addr.sin_port = htons((uint16_t)(40000 + idx));
  inet_pton(AF_INET, "10.0.0.2", &c->addr.sin_addr);
  pp_buf_init(&c->first);
  pp_buf_init(&c->record);
  ngtcp2_callbacks cbs;
  pp_qc_client_callbacks(&cbs);
  cbs.recv_new_token = cli_recv_new_token;
  ngtcp2_transport_params params;
  pp_qc_client_params(&params, 4 << 20, 16 << 20, 60 * NGTCP2_SECONDS);
  pp_qc_h3_client_callbacks(&client_h3_callbacks);
  client_h3_callbacks.recv_header = h3_recv_header;
  client_h3_callbacks.recv_data = h3_recv_data;
  client_h3_callbacks.end_stream = h3_end_stream;
  client_h3_callbacks.stream_close = h3_stream_close;
  client_h3_callbacks.shutdown = h3_shutdown;
  CU_ASSERT_FATAL(gnutls_certificate_allocate_credentials(&c->cred) == 0);
  const pp_qc_client_config cfg = {
      .local = (const struct sockaddr *)&c->addr,
      .local_len = sizeof c->addr,
      .remote = (const struct sockaddr *)&srv_addr,
      .remote_len = sizeof srv_addr,
      .params = &params,
      .initial_ts = now,
      .token = use_token ? new_token.data : NULL,
      .token_len = use_token ? new_token.len : 0,
      .callbacks = &cbs,
      .cred = c->cred,
      .alpn = client_alpn,
      .sni = "localhost",
  };
  c->s.h3_callbacks = &client_h3_callbacks;
  c->s.data = c;
  c->s.on_handshake = cli_on_handshake;
  CU_ASSERT_FATAL(pp_qc_client_new(&c->s, &cfg) == 0);
  c->qc = c->s.qc;
  return c;
}

static void client_free(client *c) {
  if (!c->qc) return;
  for (int i = 0; i < c->nstreams; i++) {
    pp_buf_dispose(&c->streams[i].body);
    pp_buf_dispose(&c->streams[i].hdrs);
  }
  pp_qc_session_dispose(&c->s);
  gnutls_certificate_free_credentials(c->cred);
  pp_buf_dispose(&c->first);
  pp_buf_dispose(&c->record);
  memset(c, 0, sizeof *c);
}

/* In a client Initial p (first byte, version, DCID and SCID with their lengths, then the token:
 * RFC 9000 §17.2.2), the offset of the token's length varint; *vlen is that varint's width and
 * *tlen its value. */
static size_t initial_token_field(const uint8_t *p, size_t *vlen, uint64_t *tlen) {
  size_t off = 5;
  off += 1 + p[off];
  off += 1 + p[off];
  *vlen = (size_t)1 << (p[off] >> 6);
  *tlen = p[off] & 0x3f;
  for (size_t i = 1; i < *vlen; i++)
    *tlen = (*tlen << 8) | p[off + i];
  return off;
}

/* Flips the last byte of the token of an Initial that carries one. */
static void tamper_token(uint8_t *p, size_t n) {
  if (n < 7 || !(p[0] & 0x80) || ((p[0] >> 4) & 3) != 0) return;
  size_t vl;
  uint64_t tl;
  size_t off = initial_token_field(p, &vl, &tl);
  if (tl) p[off + vl + tl - 1] ^= 0x55;
}

/* One packet carrying the raw stream's bytes (written around nghttp3, with FIN): its length, or
 * a negative ngtcp2 error; NGTCP2_ERR_WRITE_MORE when the bytes all went into a packet that
 * pp_qc_write_packet then completes. */
static ngtcp2_ssize write_raw(client *c, uint8_t *buf, size_t len) {
  ngtcp2_vec v = {(uint8_t *)(uintptr_t)c->raw, c->raw_len};
  ngtcp2_path_storage ps;
  ngtcp2_path_storage_zero(&ps);
  ngtcp2_pkt_info pi;
  ngtcp2_ssize ndatalen = -1;
  ngtcp2_ssize n = ngtcp2_conn_writev_stream(
      c->qc, &ps.path, &pi, buf, len, &ndatalen,
      NGTCP2_WRITE_STREAM_FLAG_MORE | NGTCP2_WRITE_STREAM_FLAG_FIN, c->raw_sid, &v, 1, now);
  if (n == NGTCP2_ERR_WRITE_MORE)
    c->raw_len = 0;
  else if (n >= 0 && ndatalen >= 0)
    c->raw += ndatalen, c->raw_len -= (size_t)ndatalen;
  return n;
}

static void client_write(client *c) {
  if (!c->qc || c->write_err) return;
  uint8_t buf[1452]; /* one buffer: a packet built over two calls (WRITE_MORE) stays in it */
  for (int guard = 0; guard < 1000; guard++) {
    int h3_error = 0;
    ngtcp2_ssize n = c->raw_len ? write_raw(c, buf, sizeof buf)
                                : pp_qc_write_packet(&c->s, buf, sizeof buf, now, &h3_error);
    CU_ASSERT(h3_error == 0);
    if (h3_error) return;
    if (n == NGTCP2_ERR_WRITE_MORE) continue;
    if (n < 0) {
      c->write_err = (int)n;
      return;
    }
    if (n == 0) return;
    c->sent++;
    if (c->mute) {
      if (!c->first.len) pp_buf_append(&c->first, buf, (size_t)n);
      continue;
    }
    if (c->tamper_token) tamper_token(buf, (size_t)n);
    if (c->recording) {
      uint8_t l2[2] = {(uint8_t)(n >> 8), (uint8_t)n};
      pp_buf_append(&c->record, l2, 2);
      pp_buf_append(&c->record, buf, (size_t)n);
    }
    if (h3c_on_send) h3c_on_send(c, buf, (size_t)n);
    CU_ASSERT(pp_h3_server_recv(&srv, buf, (size_t)n, (struct sockaddr *)&srv_addr, sizeof srv_addr,
                                (struct sockaddr *)&c->addr, sizeof c->addr, 0, now) == 0);
    if (h3c_after_recv) h3c_after_recv();
  }
}

static pp_buf stray; /* the last datagram for no client (or a deaf one) */
static int stray_count;

static int deliver(void) {
  int n = 0;
  const pp_h3_datagram *d;
  while ((d = pp_h3_server_out_peek(&srv))) {
    const struct sockaddr_in *to = (const struct sockaddr_in *)&d->remote;
    client *c = NULL;
    for (int i = 0; i < 4; i++)
      if (clients[i].qc && clients[i].addr.sin_port == to->sin_port) c = &clients[i];
    CU_ASSERT(d->local_len == sizeof srv_addr &&
              memcmp(&d->local, &srv_addr, sizeof srv_addr) == 0);
    if (c && !c->deaf) {
      ngtcp2_path path;
      client_path(c, &path);
      ngtcp2_pkt_info pi = {0};
      ngtcp2_conn_read_pkt(c->qc, &path, &pi, d->data, d->len, now);
    } else {
      stray.len = 0;
      pp_buf_append(&stray, d->data, d->len);
      stray_count++;
    }
    pp_h3_server_out_pop(&srv);
    n++;
  }
  return n;
}

/* Runs the exchange until it is quiet, moving the clock 1 ms per round trip and jumping to the
 * next timer when nothing moves (if it is within 200 ms). */
static void pump(void) {
  for (int round = 0; round < 5000; round++) {
    for (int i = 0; i < 4; i++)
      client_write(&clients[i]);
    pp_h3_server_flush(&srv, now);
    int moved = deliver();
    if (moved) {
      now += NGTCP2_MILLISECONDS;
    } else {
      uint64_t t = pp_h3_server_expiry(&srv);
      for (int i = 0; i < 4; i++)
        if (clients[i].qc && !clients[i].mute) {
          uint64_t e = ngtcp2_conn_get_expiry(clients[i].qc);
          if (e < t) t = e;
        }
      if (t == UINT64_MAX || t > now + 200 * NGTCP2_MILLISECONDS) return;
      if (t > now) now = t;
    }
    for (int i = 0; i < 4; i++)
      if (clients[i].qc && !clients[i].mute && ngtcp2_conn_get_expiry(clients[i].qc) <= now)
        ngtcp2_conn_handle_expiry(clients[i].qc, now);
    if (pp_h3_server_expiry(&srv) <= now) pp_h3_server_handle_expiry(&srv, now);
  }
}

static nghttp3_ssize read_req(nghttp3_conn *h3, int64_t id, nghttp3_vec *vec, size_t veccnt,
                              uint32_t *pflags, void *ud, void *sud);
static const char *extra_value; /* a long x-pad field for the next requests */

static int64_t client_request(client *c, const char *method, const char *path, const uint8_t *body,
                              size_t body_len, int hold) {
  int64_t sid;
  CU_ASSERT_FATAL(c->h3 != NULL);
  CU_ASSERT_FATAL(ngtcp2_conn_open_bidi_stream(c->qc, &sid, NULL) == 0);
  cstream *s = &c->streams[c->nstreams++];
  memset(s, 0, sizeof *s);
  s->id = sid;
  s->req = body, s->req_len = body_len, s->hold = hold;
  pp_buf_init(&s->body);
  pp_buf_init(&s->hdrs);
  char cl[32];
  snprintf(cl, sizeof cl, "%zu", body_len);
  nghttp3_nv nva[7];
  size_t n = 0;
#define NV(N, V)                                                                                   \
  nva[n++] =                                                                                       \
      (nghttp3_nv){(uint8_t *)(N), (uint8_t *)(V), strlen(N), strlen(V), NGHTTP3_NV_FLAG_NONE}
  NV(":method", method);
  NV(":scheme", "https");
  NV(":authority", "localhost");
  NV(":path", path);
  NV("x-test", "yes");
  if (body && !hold) NV("content-length", cl);
  if (extra_value) NV("x-pad", extra_value);
#undef NV
  static const nghttp3_data_reader dr = {read_req};
  CU_ASSERT_FATAL(nghttp3_conn_submit_request(c->h3, sid, nva, n, body ? &dr : NULL, s) == 0);
  return sid;
}

static nghttp3_ssize read_req(nghttp3_conn *h3, int64_t id, nghttp3_vec *vec, size_t veccnt,
                              uint32_t *pflags, void *ud, void *sud) {
  (void)h3, (void)id, (void)veccnt, (void)ud;
  cstream *s = sud;
  if (s->req_off == s->req_len) {
    if (s->hold) return NGHTTP3_ERR_WOULDBLOCK;
    *pflags |= NGHTTP3_DATA_FLAG_EOF;
    return 0;
  }
  vec[0].base = (uint8_t *)(uintptr_t)(s->req + s->req_off);
  vec[0].len = s->req_len - s->req_off;
  s->req_off = s->req_len;
  if (!s->hold) *pflags |= NGHTTP3_DATA_FLAG_EOF;
  return 1;
}

#endif
