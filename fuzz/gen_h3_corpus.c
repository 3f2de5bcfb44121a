/* Writes the real-client seeds of fuzz/fuzz_h3.c into a directory (docs/FUZZING.md).
 *
 * Not a test: built on demand (cmake --build build --target fuzz-gen-h3) and run as
 * build/fuzz/fuzz-gen-h3 fuzz/corpus/h3; the result is committed. The client is the in-process
 * test client of server/tests/proto/test_h3.c (server/tests/h3_test_client.h, over the QUIC client
 * kit quic_client/: ngtcp2 0.12 + GnuTLS, nghttp3 0.8, ALPN h3), the same file, with this program's
 * hooks: every datagram it sends is recorded (h3c_on_send) and bodiless requests are answered after
 * each one the server took (h3c_after_recv). It talks to an in-process pp_h3_server configured
 * exactly as the fuzz target's (secret 0x5a..., the same deterministic config.rand restarted per
 * session, the clock starting at 1000 s, the same addresses), and every datagram the client sends
 * is recorded in the target's input format: mode byte, then per datagram a control byte
 * (milliseconds since the previous one, capped at 63; bit 6 for the second client address), a
 * big-endian u16 length and the bytes. Because the server's connection IDs come from that
 * deterministic rand, a replayed seed routes its later datagrams (Handshake, 1-RTT) to the
 * connection its Initial created, and the second Initial of the Retry seed carries a token the
 * target's server accepts. Those later packets do not decrypt in the target (the handshake's
 * ephemeral keys are GnuTLS's fresh randomness), which is expected.
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

#include "server/proto/h3.h"
#include "server/proto/tls.h"

#define CU_ASSERT(x)                                                                               \
  do {                                                                                             \
    if (!(x)) {                                                                                    \
      fprintf(stderr, "fuzz-gen-h3: %s:%d: %s\n", __FILE__, __LINE__, #x);                         \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)
#define CU_ASSERT_FATAL CU_ASSERT

static char cert_path[PP_TLS_PATH_MAX], key_path[PP_TLS_PATH_MAX], tmpdir[64];
static uint64_t now;
static pp_h3_server srv;
static struct sockaddr_in srv_addr;

/* ---- the recording, in fuzz_h3.c's input format ---- */

static pp_buf rec;
static int recording;
static uint64_t rec_last;
static size_t rec_count;

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
static const pp_h3_callbacks server_cbs = {NULL,     NULL, on_request, on_body, on_body_end,
                                           on_close, NULL, NULL,       NULL};

/* ---- the client (server/tests/h3_test_client.h) ---- */

#include "server/tests/h3_test_client.h"

/* h3c_on_send: every datagram a client sends, while recording */
static void record_datagram(client *c, const uint8_t *p, size_t n) {
  if (!recording) return;
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
    /* past the token (its length varint and bytes): the Length field */
    size_t tvl;
    uint64_t tl;
    size_t off = initial_token_field(pkt, &tvl, &tl) + tvl + tl;
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
  h3c_on_send = record_datagram;
  h3c_after_recv = answer_due;
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
