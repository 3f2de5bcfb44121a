/* Writes the real-client seeds of fuzz/fuzz_h3.c into a directory (docs/FUZZING.md).
 *
 * Not a test: built on demand (cmake --build build --target fuzz-gen-h3) and run as
 * build/fuzz/fuzz-gen-h3 fuzz/corpus/h3; the result is committed. The client is the one of
 * server/tests/test_h3.c (ngtcp2 0.12 + GnuTLS, nghttp3 0.8, ALPN h3), copied here because the
 * fuzz tree may not reach into the unit tests. It talks to an in-process pp_h3_server
 * configured exactly as the fuzz target's (secret 0x5a..., the same deterministic config.rand
 * restarted per session, the clock starting at 1000 s, the same addresses), and every datagram
 * the client sends is recorded in the target's input format: mode byte, then per datagram a
 * control byte (milliseconds since the previous one, capped at 63; bit 6 for the second client
 * address), a big-endian u16 length and the bytes. Because the server's connection IDs come
 * from that deterministic rand, a replayed seed routes its later datagrams (Handshake, 1-RTT)
 * to the connection its Initial created, and the second Initial of the Retry seed carries a
 * token the target's server accepts. Those later packets do not decrypt in the target (the
 * handshake's ephemeral keys are GnuTLS's fresh randomness), which is expected.
 *
 * The hand-made seeds (garbage, short and truncated Initials, a bad version, unknown CIDs) are
 * written here too, derived from a real Initial where they need one. The client's own
 * randomness is real, so a re-run changes the bytes but not the shapes. */
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

#include "server/h3.h"
#include "server/tls.h"

#define CU_ASSERT(x)                                                                               \
  do {                                                                                             \
    if (!(x)) {                                                                                    \
      fprintf(stderr, "fuzz-gen-h3: %s:%d: %s\n", __FILE__, __LINE__, #x);                         \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)
#define CU_ASSERT_FATAL CU_ASSERT

#define PRIORITY                                                                                   \
  "NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+AES-128-GCM:+AES-256-GCM:+CHACHA20-POLY1305:"        \
  "+AES-128-CCM:-GROUP-ALL:+GROUP-X25519:+GROUP-SECP256R1:+GROUP-SECP384R1:+GROUP-SECP521R1:"      \
  "%DISABLE_TLS13_COMPAT_MODE"

static char cert_path[PP_TLS_PATH_MAX], key_path[PP_TLS_PATH_MAX], tmpdir[64];
static uint64_t now;
static pp_h3_server srv;
static struct sockaddr_in srv_addr;

/* ---- the recording, in fuzz_h3.c's input format ---- */

static pp_buf rec;
static int recording;
static uint64_t rec_last;
static size_t rec_count;

struct client;
static void record_datagram(struct client *c, const uint8_t *p, size_t n);

/* ---- the server, as fuzz_h3.c configures it, with the same owner ---- */

static uint64_t rng_state;
static void det_rand(uint8_t *dest, size_t len, void *data) {
  (void)data;
  for (size_t i = 0; i < len; i++) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    dest[i] = (uint8_t)(rng_state >> 24);
  }
}

/* Requests without a body are answered after the call that delivered them (pp_h3_respond is
 * refused inside on_request), as fuzz_h3.c does. */
static pp_h3_conn *due_conn[64];
static int64_t due_id[64];
static int ndue;
static void answer_due(void) {
  for (int i = 0; i < ndue; i++) {
    pp_h3_respond(due_conn[i], due_id[i], 200, NULL, 0, 0);
    pp_h3_send_data(due_conn[i], due_id[i], (const uint8_t *)"ok\n", 3);
    pp_h3_send_end(due_conn[i], due_id[i]);
  }
  ndue = 0;
}
static int on_request(pp_h3_conn *conn, const pp_h3_request *req, void **sd) {
  *sd = NULL;
  if (req->end_stream && ndue < 64) due_conn[ndue] = conn, due_id[ndue++] = req->stream_id;
  return 0;
}
static int on_body(pp_h3_conn *conn, int64_t id, void *sd, const uint8_t *data, size_t len) {
  (void)sd, (void)data;
  pp_h3_consume(conn, id, len);
  return 0;
}
static int on_body_end(pp_h3_conn *conn, int64_t id, void *sd) {
  (void)sd;
  pp_h3_respond(conn, id, 200, NULL, 0, 0);
  pp_h3_send_data(conn, id, (const uint8_t *)"ok\n", 3);
  pp_h3_send_end(conn, id);
  return 0;
}
static void on_close(pp_h3_conn *c, int64_t id, void *sd, uint64_t code) {
  (void)c, (void)id, (void)sd, (void)code;
}
static const pp_h3_callbacks server_cbs = {NULL,        NULL,     on_request, on_body,
                                           on_body_end, on_close, NULL,       NULL};

/* ---- the client ---- */

typedef struct cstream {
  int64_t id;
  int status, end, closed, hold;
  uint64_t close_code;
  pp_buf body, hdrs;
  const uint8_t *req;
  size_t req_len, req_off;
} cstream;

typedef struct client {
  ngtcp2_conn *qc;
  nghttp3_conn *h3;
  gnutls_session_t tls;
  gnutls_certificate_credentials_t cred;
  ngtcp2_crypto_conn_ref ref;
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
static const char *client_alpn = "h3"; /* what the next client offers */
static pp_buf new_token;               /* the last NEW_TOKEN a client received */
static int use_token;                  /* the next client presents it */

static int cli_recv_new_token(ngtcp2_conn *qc, const ngtcp2_vec *token, void *ud) {
  (void)qc, (void)ud;
  new_token.len = 0;
  pp_buf_append(&new_token, token->base, token->len);
  return 0;
}

static void cli_rand(uint8_t *dest, size_t len, const ngtcp2_rand_ctx *ctx) {
  (void)ctx;
  gnutls_rnd(GNUTLS_RND_RANDOM, dest, len);
}
static int cli_new_cid(ngtcp2_conn *qc, ngtcp2_cid *cid, uint8_t *token, size_t cidlen, void *ud) {
  (void)qc, (void)ud;
  uint8_t id[NGTCP2_MAX_CIDLEN];
  gnutls_rnd(GNUTLS_RND_RANDOM, id, cidlen);
  ngtcp2_cid_init(cid, id, cidlen);
  gnutls_rnd(GNUTLS_RND_RANDOM, token, NGTCP2_STATELESS_RESET_TOKENLEN);
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
  ngtcp2_conn_extend_max_stream_offset(c->qc, id, len);
  ngtcp2_conn_extend_max_offset(c->qc, len);
  return 0;
}
static int h3_deferred_consume(nghttp3_conn *h3, int64_t id, size_t n, void *ud, void *sud) {
  (void)h3, (void)sud;
  client *c = ud;
  ngtcp2_conn_extend_max_stream_offset(c->qc, id, n);
  ngtcp2_conn_extend_max_offset(c->qc, n);
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
static int h3_stop_sending(nghttp3_conn *h3, int64_t id, uint64_t code, void *ud, void *sud) {
  (void)h3, (void)sud;
  ngtcp2_conn_shutdown_stream_read(((client *)ud)->qc, id, code);
  return 0;
}
static int h3_reset_stream(nghttp3_conn *h3, int64_t id, uint64_t code, void *ud, void *sud) {
  (void)h3, (void)sud;
  ngtcp2_conn_shutdown_stream_write(((client *)ud)->qc, id, code);
  return 0;
}
static int h3_shutdown(nghttp3_conn *h3, int64_t id, void *ud) {
  (void)h3;
  client *c = ud;
  c->got_goaway++;
  c->goaway_id = id;
  return 0;
}

static int cli_handshake_completed(ngtcp2_conn *qc, void *ud) {
  client *c = ud;
  c->handshake_done = 1;
  static const nghttp3_callbacks cbs = {
      .stream_close = h3_stream_close,
      .recv_data = h3_recv_data,
      .deferred_consume = h3_deferred_consume,
      .recv_header = h3_recv_header,
      .stop_sending = h3_stop_sending,
      .end_stream = h3_end_stream,
      .reset_stream = h3_reset_stream,
      .shutdown = h3_shutdown,
  };
  nghttp3_settings settings;
  nghttp3_settings_default(&settings);
  if (nghttp3_conn_client_new(&c->h3, &cbs, &settings, NULL, c) != 0) return -1;
  int64_t ctrl, enc, dec;
  if (ngtcp2_conn_open_uni_stream(qc, &ctrl, NULL) ||
      nghttp3_conn_bind_control_stream(c->h3, ctrl) ||
      ngtcp2_conn_open_uni_stream(qc, &enc, NULL) || ngtcp2_conn_open_uni_stream(qc, &dec, NULL) ||
      nghttp3_conn_bind_qpack_streams(c->h3, enc, dec))
    return NGTCP2_ERR_CALLBACK_FAILURE;
  return 0;
}
static int cli_recv_stream_data(ngtcp2_conn *qc, uint32_t flags, int64_t id, uint64_t off,
                                const uint8_t *data, size_t len, void *ud, void *sud) {
  (void)off, (void)sud;
  client *c = ud;
  if (!c->h3) return 0;
  nghttp3_ssize n =
      nghttp3_conn_read_stream(c->h3, id, data, len, (flags & NGTCP2_STREAM_DATA_FLAG_FIN) != 0);
  if (n < 0) return NGTCP2_ERR_CALLBACK_FAILURE;
  ngtcp2_conn_extend_max_stream_offset(qc, id, (uint64_t)n);
  ngtcp2_conn_extend_max_offset(qc, (uint64_t)n);
  return 0;
}
static int cli_acked(ngtcp2_conn *qc, int64_t id, uint64_t off, uint64_t len, void *ud, void *sud) {
  (void)qc, (void)off, (void)sud;
  client *c = ud;
  return c->h3 && nghttp3_conn_add_ack_offset(c->h3, id, len) ? NGTCP2_ERR_CALLBACK_FAILURE : 0;
}
static int cli_stream_close(ngtcp2_conn *qc, uint32_t flags, int64_t id, uint64_t code, void *ud,
                            void *sud) {
  (void)qc, (void)sud;
  client *c = ud;
  if (!(flags & NGTCP2_STREAM_CLOSE_FLAG_APP_ERROR_CODE_SET)) code = NGHTTP3_H3_NO_ERROR;
  if (c->h3) nghttp3_conn_close_stream(c->h3, id, code);
  return 0;
}
static int cli_stream_reset(ngtcp2_conn *qc, int64_t id, uint64_t fs, uint64_t code, void *ud,
                            void *sud) {
  (void)qc, (void)fs, (void)code, (void)sud;
  client *c = ud;
  if (c->h3) nghttp3_conn_shutdown_stream_read(c->h3, id);
  return 0;
}
static int cli_extend_msd(ngtcp2_conn *qc, int64_t id, uint64_t max, void *ud, void *sud) {
  (void)qc, (void)max, (void)sud;
  client *c = ud;
  if (c->h3) nghttp3_conn_unblock_stream(c->h3, id);
  return 0;
}
static ngtcp2_conn *cli_get_conn(ngtcp2_crypto_conn_ref *ref) {
  return ((client *)ref->user_data)->qc;
}

static void client_path(client *c, ngtcp2_path *p) {
  p->local.addr = (ngtcp2_sockaddr *)&c->addr;
  p->local.addrlen = sizeof c->addr;
  p->remote.addr = (ngtcp2_sockaddr *)&srv_addr;
  p->remote.addrlen = sizeof srv_addr;
  p->user_data = NULL;
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
  uint8_t d[18], s[16];
  gnutls_rnd(GNUTLS_RND_RANDOM, d, sizeof d);
  gnutls_rnd(GNUTLS_RND_RANDOM, s, sizeof s);
  ngtcp2_cid dcid, scid;
  ngtcp2_cid_init(&dcid, d, sizeof d);
  ngtcp2_cid_init(&scid, s, sizeof s);
  static const ngtcp2_callbacks cbs = {
      .client_initial = ngtcp2_crypto_client_initial_cb,
      .recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb,
      .handshake_completed = cli_handshake_completed,
      .encrypt = ngtcp2_crypto_encrypt_cb,
      .decrypt = ngtcp2_crypto_decrypt_cb,
      .hp_mask = ngtcp2_crypto_hp_mask_cb,
      .recv_stream_data = cli_recv_stream_data,
      .acked_stream_data_offset = cli_acked,
      .stream_close = cli_stream_close,
      .recv_retry = ngtcp2_crypto_recv_retry_cb,
      .rand = cli_rand,
      .get_new_connection_id = cli_new_cid,
      .update_key = ngtcp2_crypto_update_key_cb,
      .stream_reset = cli_stream_reset,
      .extend_max_stream_data = cli_extend_msd,
      .delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb,
      .delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb,
      .get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb,
      .version_negotiation = ngtcp2_crypto_version_negotiation_cb,
      .recv_new_token = cli_recv_new_token,
  };
  ngtcp2_settings settings;
  ngtcp2_settings_default(&settings);
  settings.initial_ts = now;
  if (use_token && new_token.len) {
    settings.token.base = new_token.data;
    settings.token.len = new_token.len;
  }
  ngtcp2_transport_params params;
  ngtcp2_transport_params_default(&params);
  params.initial_max_streams_uni = 3;
  params.initial_max_stream_data_bidi_local = 4 << 20;
  params.initial_max_stream_data_uni = 1 << 20;
  params.initial_max_data = 16 << 20;
  params.max_idle_timeout = 60 * NGTCP2_SECONDS;
  ngtcp2_path path;
  client_path(c, &path);
  CU_ASSERT_FATAL(ngtcp2_conn_client_new(&c->qc, &dcid, &scid, &path, NGTCP2_PROTO_VER_V1, &cbs,
                                         &settings, &params, NULL, c) == 0);
  CU_ASSERT_FATAL(gnutls_certificate_allocate_credentials(&c->cred) == 0);
  CU_ASSERT_FATAL(gnutls_init(&c->tls, GNUTLS_CLIENT) == 0);
  CU_ASSERT_FATAL(gnutls_priority_set_direct(c->tls, PRIORITY, NULL) == 0);
  CU_ASSERT_FATAL(ngtcp2_crypto_gnutls_configure_client_session(c->tls) == 0);
  c->ref.get_conn = cli_get_conn;
  c->ref.user_data = c;
  gnutls_session_set_ptr(c->tls, &c->ref);
  CU_ASSERT_FATAL(gnutls_credentials_set(c->tls, GNUTLS_CRD_CERTIFICATE, c->cred) == 0);
  gnutls_datum_t alpn = {(unsigned char *)(uintptr_t)client_alpn, (unsigned)strlen(client_alpn)};
  gnutls_alpn_set_protocols(c->tls, &alpn, 1, GNUTLS_ALPN_MANDATORY);
  gnutls_server_name_set(c->tls, GNUTLS_NAME_DNS, "localhost", 9);
  ngtcp2_conn_set_tls_native_handle(c->qc, c->tls);
  return c;
}

static void client_free(client *c) {
  if (!c->qc) return;
  for (int i = 0; i < c->nstreams; i++) {
    pp_buf_dispose(&c->streams[i].body);
    pp_buf_dispose(&c->streams[i].hdrs);
  }
  if (c->h3) nghttp3_conn_del(c->h3);
  ngtcp2_conn_del(c->qc);
  gnutls_deinit(c->tls);
  gnutls_certificate_free_credentials(c->cred);
  pp_buf_dispose(&c->first);
  pp_buf_dispose(&c->record);
  memset(c, 0, sizeof *c);
}

/* Flips the last byte of the token of an Initial that carries one. */
static void tamper_token(uint8_t *p, size_t n) {
  if (n < 7 || !(p[0] & 0x80) || ((p[0] >> 4) & 3) != 0) return;
  size_t off = 5;
  off += 1 + p[off];
  off += 1 + p[off];
  size_t vl = (size_t)1 << (p[off] >> 6);
  uint64_t tl = p[off] & 0x3f;
  for (size_t i = 1; i < vl; i++)
    tl = (tl << 8) | p[off + i];
  if (tl) p[off + vl + tl - 1] ^= 0x55;
}

static void client_write(client *c) {
  if (!c->qc || c->write_err) return;
  for (int guard = 0; guard < 1000; guard++) {
    int64_t sid = -1;
    int fin = 0;
    nghttp3_vec vec[16];
    nghttp3_ssize veccnt = 0;
    int raw = 0;
    if (c->raw_len) {
      sid = c->raw_sid, fin = 1, raw = 1;
      vec[0].base = (uint8_t *)(uintptr_t)c->raw;
      vec[0].len = c->raw_len;
      veccnt = 1;
    } else if (c->h3 && ngtcp2_conn_get_max_data_left(c->qc)) {
      veccnt = nghttp3_conn_writev_stream(c->h3, &sid, &fin, vec, 16);
      CU_ASSERT(veccnt >= 0);
      if (veccnt < 0) return;
    }
    uint8_t buf[1452];
    ngtcp2_path_storage ps;
    ngtcp2_path_storage_zero(&ps);
    ngtcp2_pkt_info pi;
    ngtcp2_ssize ndatalen = -1;
    uint32_t flags = NGTCP2_WRITE_STREAM_FLAG_MORE | (fin ? NGTCP2_WRITE_STREAM_FLAG_FIN : 0);
    ngtcp2_ssize n =
        ngtcp2_conn_writev_stream(c->qc, &ps.path, &pi, buf, sizeof buf, &ndatalen, flags, sid,
                                  (const ngtcp2_vec *)vec, (size_t)veccnt, now);
    if (n < 0) {
      if (n == NGTCP2_ERR_STREAM_DATA_BLOCKED) {
        nghttp3_conn_block_stream(c->h3, sid);
        continue;
      }
      if (n == NGTCP2_ERR_STREAM_SHUT_WR) {
        nghttp3_conn_shutdown_stream_write(c->h3, sid);
        continue;
      }
      if (n == NGTCP2_ERR_WRITE_MORE) {
        if (raw)
          c->raw_len = 0;
        else
          nghttp3_conn_add_write_offset(c->h3, sid, (size_t)ndatalen);
        continue;
      }
      c->write_err = (int)n;
      return;
    }
    if (raw && ndatalen >= 0)
      c->raw += ndatalen, c->raw_len -= (size_t)ndatalen;
    else if (ndatalen >= 0 && sid >= 0)
      nghttp3_conn_add_write_offset(c->h3, sid, (size_t)ndatalen);
    if (n == 0) return;
    c->sent++;
    if (c->mute) {
      if (!c->first.len) pp_buf_append(&c->first, buf, (size_t)n);
      continue;
    }
    if (c->tamper_token) tamper_token(buf, (size_t)n);
    if (recording) record_datagram(c, buf, (size_t)n);
    CU_ASSERT(pp_h3_server_recv(&srv, buf, (size_t)n, (struct sockaddr *)&srv_addr, sizeof srv_addr,
                                (struct sockaddr *)&c->addr, sizeof c->addr, 0, now) == 0);
    answer_due();
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

static void record_datagram(client *c, const uint8_t *p, size_t n) {
  uint64_t ms = (now - rec_last) / NGTCP2_MILLISECONDS;
  if (ms > 63) ms = 63;
  rec_last = now;
  uint8_t ctl = (uint8_t)ms | (c == &clients[1] ? 0x40 : 0);
  uint8_t h[3] = {ctl, (uint8_t)(n >> 8), (uint8_t)n};
  pp_buf_append(&rec, h, 3);
  pp_buf_append(&rec, p, n);
  rec_count++;
}

/* ---- sessions ---- */

static const char *outdir;

static void server_start(int retry) {
  pp_h3_config cfg;
  pp_h3_config_default(&cfg);
  cfg.cert_file = cert_path;
  cfg.key_file = key_path;
  memset(cfg.secret, 0x5a, sizeof cfg.secret);
  cfg.retry = retry;
  cfg.rand = det_rand;
  rng_state = 0x9e3779b97f4a7c15ull;
  now = 1000 * NGTCP2_SECONDS;
  CU_ASSERT(pp_h3_server_init(&srv, &server_cbs, &cfg, NULL) == 0);
  rec.len = 0;
  rec_count = 0;
  rec_last = now;
  pp_buf_append(&rec, (uint8_t[]){(uint8_t)retry}, 1);
  recording = 1;
}

static void server_stop(void) {
  recording = 0;
  for (int i = 0; i < 4; i++)
    client_free(&clients[i]);
  pp_h3_server_dispose(&srv);
}

static void write_seed(const char *name, const uint8_t *p, size_t n) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", outdir, name);
  FILE *f = fopen(path, "wb");
  CU_ASSERT(f != NULL);
  CU_ASSERT(fwrite(p, 1, n, f) == n);
  fclose(f);
  printf("fuzz-gen-h3: %s (%zu bytes)\n", path, n);
}

/* The first k datagrams of the recording (all of it when k is 0), with the mode byte. */
static size_t prefix_len(size_t k) {
  size_t off = 1;
  for (size_t i = 0; (k == 0 || i < k) && off + 3 <= rec.len; i++)
    off += 3 + ((size_t)rec.data[off + 1] << 8 | rec.data[off + 2]);
  return off;
}

static void wait_for(client *c, int64_t sid) {
  for (int i = 0; i < 20 && !cs_of(c, sid)->end; i++)
    pump();
}

static pp_buf first_initial; /* the first Initial of the GET session, for the hand-made seeds */

static void session_get(void) {
  server_start(0);
  client *c = client_new(0);
  pump();
  CU_ASSERT(c->handshake_done);
  int64_t sid = client_request(c, "GET", "/hello?x=1", NULL, 0, 0);
  wait_for(c, sid);
  CU_ASSERT(cs_of(c, sid)->status == 200);
  size_t n = (size_t)rec.data[2] << 8 | rec.data[3];
  first_initial.len = 0;
  pp_buf_append(&first_initial, rec.data + 4, n);
  write_seed("initial", rec.data, prefix_len(1));
  write_seed("handshake-get", rec.data, rec.len);
  server_stop();
}

static void session_post(void) {
  server_start(0);
  client *c = client_new(0);
  pump();
  static uint8_t body[3000];
  memset(body, 'b', sizeof body);
  int64_t sid = client_request(c, "POST", "/upload", body, sizeof body, 0);
  int64_t sid2 = client_request(c, "GET", "/second", NULL, 0, 0);
  wait_for(c, sid);
  wait_for(c, sid2);
  CU_ASSERT(cs_of(c, sid)->status == 200);
  write_seed("handshake-post-get", rec.data, rec.len);
  server_stop();
}

static void session_retry(void) {
  server_start(1);
  client *c = client_new(0);
  pump();
  CU_ASSERT(c->handshake_done);
  CU_ASSERT(srv.stats.retries_sent == 1);
  int64_t sid = client_request(c, "GET", "/r", NULL, 0, 0);
  wait_for(c, sid);
  write_seed("retry-initial-token", rec.data, prefix_len(2));
  write_seed("retry-handshake-get", rec.data, rec.len);
  server_stop();
}

static void session_two_clients(void) {
  server_start(0);
  client *a = client_new(0);
  client *b = client_new(1);
  pump();
  CU_ASSERT(a->handshake_done && b->handshake_done);
  write_seed("two-clients", rec.data, rec.len);
  server_stop();
}

/* The client closes at once after the handshake (CONNECTION_CLOSE in 1-RTT). */
static void session_close(void) {
  server_start(0);
  client *c = client_new(0);
  pump();
  uint8_t buf[1452];
  ngtcp2_path_storage ps;
  ngtcp2_path_storage_zero(&ps);
  ngtcp2_connection_close_error ccerr;
  ngtcp2_connection_close_error_set_application_error(&ccerr, NGHTTP3_H3_NO_ERROR, NULL, 0);
  ngtcp2_ssize n =
      ngtcp2_conn_write_connection_close(c->qc, &ps.path, NULL, buf, sizeof buf, &ccerr, now);
  if (n > 0) record_datagram(c, buf, (size_t)n);
  write_seed("handshake-close", rec.data, rec.len);
  server_stop();
}

/* ---- hand-made seeds ---- */

static void put_dgram(pp_buf *b, uint8_t ctl, const uint8_t *p, size_t n) {
  uint8_t h[3] = {ctl, (uint8_t)(n >> 8), (uint8_t)n};
  pp_buf_append(b, h, 3);
  pp_buf_append(b, p, n);
}

static void hand_made(void) {
  pp_buf b;
  pp_buf_init(&b);
  uint8_t pkt[1600];
#define SEED(name)                                                                                 \
  do {                                                                                             \
    write_seed(name, b.data, b.len);                                                               \
    b.len = 0;                                                                                     \
  } while (0)
  /* garbage */
  pp_buf_append(&b, (uint8_t[]){0}, 1);
  for (size_t i = 0; i < sizeof pkt; i++)
    pkt[i] = (uint8_t)(i * 151 + 7);
  put_dgram(&b, 1, pkt, 300);
  put_dgram(&b, 1, pkt + 300, 1200);
  put_dgram(&b, 1, pkt + 1200, 400);
  put_dgram(&b, 1, pkt, 0);
  SEED("garbage");
  /* a short datagram: one byte, then a long-header first byte alone */
  pp_buf_append(&b, (uint8_t[]){0}, 1);
  put_dgram(&b, 0, (const uint8_t *)"\x40", 1);
  put_dgram(&b, 0, (const uint8_t *)"\xc0\x00\x00\x00", 4);
  SEED("short");
  /* a long header of a version we do not speak: padded (Version Negotiation) and small */
  memset(pkt, 0, sizeof pkt);
  pkt[0] = 0xc0;
  pkt[1] = pkt[2] = pkt[3] = pkt[4] = 0x0a;
  pkt[5] = 8;
  memset(pkt + 6, 0x11, 8);
  pkt[14] = 8;
  memset(pkt + 15, 0x22, 8);
  pp_buf_append(&b, (uint8_t[]){0}, 1);
  put_dgram(&b, 1, pkt, 1200);
  put_dgram(&b, 1, pkt, 100);
  SEED("bad-version");
  /* the real Initial cut: under 1200 bytes (small) and with its Length past the end */
  const uint8_t *ini = first_initial.data;
  size_t ilen = first_initial.len;
  CU_ASSERT(ilen >= 1200 && ilen <= sizeof pkt);
  pp_buf_append(&b, (uint8_t[]){0}, 1);
  put_dgram(&b, 0, ini, 600);
  SEED("initial-cut-small");
  memcpy(pkt, ini, ilen);
  {
    /* first byte, version, DCID len + DCID, SCID len + SCID, token length varint, Length */
    size_t off = 5;
    off += 1 + pkt[off];
    off += 1 + pkt[off];
    size_t tvl = (size_t)1 << (pkt[off] >> 6);
    uint64_t tl = pkt[off] & 0x3f;
    for (size_t i = 1; i < tvl; i++)
      tl = tl << 8 | pkt[off + i];
    off += tvl + tl;
    /* the Length varint: the largest value of its width (ngtcp2 writes a 4-byte one) */
    size_t lvl = (size_t)1 << (pkt[off] >> 6);
    CU_ASSERT(lvl >= 2);
    pkt[off] |= 0x3f;
    for (size_t i = 1; i < lvl; i++)
      pkt[off + i] = 0xff;
  }
  pp_buf_append(&b, (uint8_t[]){0}, 1);
  put_dgram(&b, 0, pkt, ilen);
  SEED("initial-truncated");
  /* the Initial padded past max_initial_datagram (1500) */
  pp_buf_append(&b, (uint8_t[]){0}, 1);
  memcpy(pkt, ini, ilen);
  memset(pkt + ilen, 0, sizeof pkt - ilen);
  put_dgram(&b, 0, pkt, 1501);
  SEED("initial-large");
  /* the Initial sent again and again, the server's timers run between (PTO, idle) */
  pp_buf_append(&b, (uint8_t[]){0}, 1);
  for (int i = 0; i < 4; i++)
    put_dgram(&b, 0x80 | 63, ini, ilen);
  for (int i = 0; i < 40; i++) /* 40 x 63 ms: past the first PTOs */
    put_dgram(&b, 0x80 | 63, ini, 0);
  SEED("initial-repeated-timers");
  /* the Initial from both addresses */
  pp_buf_append(&b, (uint8_t[]){0}, 1);
  put_dgram(&b, 0, ini, ilen);
  put_dgram(&b, 0x40 | 5, ini, ilen);
  SEED("initial-two-addresses");
  /* the Initial to the Retry server without a token, then with a forged token */
  pp_buf_append(&b, (uint8_t[]){1}, 1);
  put_dgram(&b, 0, ini, ilen);
  SEED("retry-initial");
  /* short headers for unknown CIDs: stateless resets until the bucket (16) is empty */
  pp_buf_append(&b, (uint8_t[]){0}, 1);
  memset(pkt, 0x33, 60);
  pkt[0] = 0x41;
  for (int i = 0; i < 20; i++) {
    pkt[1] = (uint8_t)i;
    put_dgram(&b, 0, pkt, i < 18 ? 60 : 20);
  }
  SEED("unknown-cid-resets");
  /* empty input: the mode byte alone */
  pp_buf_append(&b, (uint8_t[]){0}, 1);
  SEED("empty");
#undef SEED
  pp_buf_dispose(&b);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  outdir = argv[1];
  snprintf(tmpdir, sizeof tmpdir, "/tmp/pp-gen-h3.XXXXXX");
  char fp[PP_TLS_FINGERPRINT_LEN], err[512];
  CU_ASSERT(mkdtemp(tmpdir) != NULL);
  if (pp_tls_dev_cert(tmpdir, cert_path, sizeof cert_path, key_path, sizeof key_path, fp, sizeof fp,
                      err, sizeof err) != 0) {
    fprintf(stderr, "fuzz-gen-h3: %s\n", err);
    return 1;
  }
  srv_addr.sin_family = AF_INET;
  srv_addr.sin_port = htons(443);
  inet_pton(AF_INET, "10.0.0.1", &srv_addr.sin_addr);
  pp_buf_init(&rec);
  pp_buf_init(&first_initial);
  session_get();
  session_post();
  session_retry();
  session_two_clients();
  session_close();
  hand_made();
  pp_buf_dispose(&rec);
  pp_buf_dispose(&first_initial);
  unlink(cert_path);
  unlink(key_path);
  rmdir(tmpdir);
  return 0;
}
