/* The fixed-delay reference server over HTTP/3 (see nullsrv.h, pb_nullsrv_h3_start): ngtcp2 0.12
 * server connections with GnuTLS (TLS 1.3, ALPN h3 mandatory, a self-signed P-256 certificate
 * for localhost made in memory with OpenSSL and loaded as PEM) and nghttp3 0.8, on one UDP socket
 * of its own thread and uv loop. Datagrams are routed by the peer's address (loopback clients
 * do not migrate), so no connection-ID table is kept. Every request is answered after
 * `delay_ms` (a timer per stream) with 200 and "ok", or <code> for GET /status/<code>; the
 * stream credit is `h2_max_streams` (initial_max_streams_bidi, 100 when 0), extended as streams
 * close. Request bodies are read and discarded (flow control is given back as they arrive):
 * the answer's delay starts when the request stream ended. `leak_every` leaks a descriptor
 * every Nth answer, as the TCP null server does. Not a general server: no Retry, no tokens, no
 * stateless reset.
 *
 * From the QUIC client kit (quic_client/quic_client.h) it takes what a server shares with the
 * clients: the TLS 1.3 priority string and the randomness and connection-ID callbacks. The rest
 * stays here because it is the server side of the same calls (ngtcp2_conn_server_new, a GnuTLS
 * server session with a certificate, nghttp3_conn_server_new, routing datagrams to
 * connections); the certificate is made here because no client needs one. */
#include "bench/refsrv/nullsrv.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gnutls/gnutls.h>
#include <nghttp3/nghttp3.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <uv.h>

#include "bench/refsrv/nullsrv_base.h"
#include "quic_client/quic_client.h"

typedef struct qconn qconn;

struct pb_nullsrv_h3 {
  pb_nullsrv_config cfg;
  pb_nullsrv_loop run; /* loop, thread, stop, stall, count (nullsrv_base.h) */
  uv_udp_t udp;
  struct sockaddr_in local;
  gnutls_certificate_credentials_t cred;
  qconn *conns;
  bool stopping;
  uint8_t rbuf[65536];
  uint8_t pkt[1500];
};

typedef struct qstream {
  qconn *c;
  struct qstream *prev, *next; /* the connection's streams */
  int64_t id;
  uint16_t status;
  uv_timer_t delay;
  bool answered, closed;
} qstream;

struct qconn {
  pb_nullsrv_h3 *srv;
  qconn *next;
  struct sockaddr_in remote;
  ngtcp2_conn *qc;
  nghttp3_conn *h3;
  gnutls_session_t tls;
  ngtcp2_crypto_conn_ref ref;
  uv_timer_t timer;
  qstream *streams;
  int handles; /* the timer and every stream timer not yet closed */
  bool dead;
};

static void qc_write(qconn *c);
static void qc_kill(qconn *c);

static void qc_path(qconn *c, ngtcp2_path *p) {
  p->local.addr = (ngtcp2_sockaddr *)&c->srv->local;
  p->local.addrlen = sizeof c->srv->local;
  p->remote.addr = (ngtcp2_sockaddr *)&c->remote;
  p->remote.addrlen = sizeof c->remote;
  p->user_data = NULL;
}

static void qc_unlink_free(qconn *c) {
  pb_nullsrv_h3 *srv = c->srv;
  for (qconn **pp = &srv->conns; *pp; pp = &(*pp)->next)
    if (*pp == c) {
      *pp = c->next;
      break;
    }
  free(c);
}

static void conn_handle_closed(qconn *c) {
  if (--c->handles == 0) qc_unlink_free(c);
}

static void timer_closed(uv_handle_t *h) {
  conn_handle_closed(h->data);
}

static void stream_closed(uv_handle_t *h) {
  qstream *s = h->data;
  qconn *c = s->c;
  free(s);
  conn_handle_closed(c);
}

/* Unlinks the stream and closes its timer (which frees it). */
static void stream_drop(qstream *s) {
  if (s->closed) return;
  s->closed = true;
  qconn *c = s->c;
  if (s->prev)
    s->prev->next = s->next;
  else
    c->streams = s->next;
  if (s->next) s->next->prev = s->prev;
  uv_close((uv_handle_t *)&s->delay, stream_closed);
}

/* ---- responses ---- */

static nghttp3_ssize read_body(nghttp3_conn *h3, int64_t id, nghttp3_vec *vec, size_t veccnt,
                               uint32_t *pflags, void *ud, void *sud) {
  (void)h3, (void)id, (void)veccnt, (void)ud, (void)sud;
  static const uint8_t ok[] = "ok";
  vec[0].base = (uint8_t *)(uintptr_t)ok;
  vec[0].len = 2;
  *pflags |= NGHTTP3_DATA_FLAG_EOF;
  return 1;
}

static void respond(uv_timer_t *t) {
  qstream *s = t->data;
  qconn *c = s->c;
  if (c->dead || !c->h3 || s->closed) return;
  char code[8];
  snprintf(code, sizeof code, "%u", s->status ? s->status : 200);
  nghttp3_nv nva[] = {
      {(uint8_t *)":status", (uint8_t *)code, 7, strlen(code), NGHTTP3_NV_FLAG_NONE},
      {(uint8_t *)"content-type", (uint8_t *)"text/plain", 12, 10, NGHTTP3_NV_FLAG_NONE}};
  static const nghttp3_data_reader dr = {read_body};
  s->answered = true;
  unsigned st = s->status ? s->status : 200;
  bool body = st != 204 && st != 304 && st >= 200; /* those carry no content (RFC 9110) */
  if (nghttp3_conn_submit_response(c->h3, s->id, nva, 2, body ? &dr : NULL) == 0)
    pb_nullsrv_loop_count(&c->srv->run);
  qc_write(c);
}

/* ---- nghttp3 callbacks ---- */

static int h_begin_headers(nghttp3_conn *h3, int64_t id, void *ud, void *sud) {
  (void)sud;
  qconn *c = ud;
  qstream *s = calloc(1, sizeof *s);
  if (!s) return NGHTTP3_ERR_CALLBACK_FAILURE;
  s->c = c;
  s->id = id;
  uv_timer_init(&c->srv->run.loop, &s->delay);
  s->delay.data = s;
  c->handles++;
  s->next = c->streams;
  if (c->streams) c->streams->prev = s;
  c->streams = s;
  nghttp3_conn_set_stream_user_data(h3, id, s);
  return 0;
}

static int h_recv_header(nghttp3_conn *h3, int64_t id, int32_t token, nghttp3_rcbuf *name,
                         nghttp3_rcbuf *value, uint8_t flags, void *ud, void *sud) {
  (void)h3, (void)id, (void)name, (void)flags, (void)ud;
  qstream *s = sud;
  if (!s || token != NGHTTP3_QPACK_TOKEN__PATH) return 0;
  nghttp3_vec v = nghttp3_rcbuf_get_buf(value);
  if (v.len > 8 && memcmp(v.base, "/status/", 8) == 0) {
    unsigned code = 0;
    for (size_t k = 8; k < v.len && k < 11; k++)
      code = code * 10 + (unsigned)(v.base[k] - '0');
    if (code >= 100 && code <= 999) s->status = (uint16_t)code;
  }
  return 0;
}

static int h_end_stream(nghttp3_conn *h3, int64_t id, void *ud, void *sud) {
  (void)h3, (void)id;
  qconn *c = ud;
  qstream *s = sud;
  if (s) uv_timer_start(&s->delay, respond, c->srv->cfg.delay_ms, 0);
  return 0;
}

static int h_stream_close(nghttp3_conn *h3, int64_t id, uint64_t code, void *ud, void *sud) {
  (void)h3, (void)code;
  qconn *c = ud;
  qstream *s = sud;
  if (ngtcp2_is_bidi_stream(id)) ngtcp2_conn_extend_max_streams_bidi(c->qc, 1);
  if (s) stream_drop(s);
  return 0;
}

static int h_recv_data(nghttp3_conn *h3, int64_t id, const uint8_t *data, size_t len, void *ud,
                       void *sud) {
  (void)h3, (void)data, (void)sud;
  qconn *c = ud;
  ngtcp2_conn_extend_max_stream_offset(c->qc, id, len);
  ngtcp2_conn_extend_max_offset(c->qc, len);
  return 0;
}

static int h_deferred_consume(nghttp3_conn *h3, int64_t id, size_t n, void *ud, void *sud) {
  (void)h3, (void)sud;
  qconn *c = ud;
  ngtcp2_conn_extend_max_stream_offset(c->qc, id, n);
  ngtcp2_conn_extend_max_offset(c->qc, n);
  return 0;
}

static int h_stop_sending(nghttp3_conn *h3, int64_t id, uint64_t code, void *ud, void *sud) {
  (void)h3, (void)sud;
  ngtcp2_conn_shutdown_stream_read(((qconn *)ud)->qc, id, code);
  return 0;
}

static int h_reset_stream(nghttp3_conn *h3, int64_t id, uint64_t code, void *ud, void *sud) {
  (void)h3, (void)sud;
  ngtcp2_conn_shutdown_stream_write(((qconn *)ud)->qc, id, code);
  return 0;
}

static int start_h3(qconn *c) {
  if (c->h3) return 0;
  static const nghttp3_callbacks cbs = {
      .stream_close = h_stream_close,
      .recv_data = h_recv_data,
      .deferred_consume = h_deferred_consume,
      .begin_headers = h_begin_headers,
      .recv_header = h_recv_header,
      .stop_sending = h_stop_sending,
      .end_stream = h_end_stream,
      .reset_stream = h_reset_stream,
  };
  nghttp3_settings settings;
  nghttp3_settings_default(&settings);
  if (nghttp3_conn_server_new(&c->h3, &cbs, &settings, NULL, c) != 0) {
    c->h3 = NULL;
    return -1;
  }
  uint32_t max = c->srv->cfg.h2_max_streams ? c->srv->cfg.h2_max_streams : 100;
  nghttp3_conn_set_max_client_streams_bidi(c->h3, max);
  int64_t ctrl, enc, dec;
  if (ngtcp2_conn_open_uni_stream(c->qc, &ctrl, NULL) ||
      nghttp3_conn_bind_control_stream(c->h3, ctrl) ||
      ngtcp2_conn_open_uni_stream(c->qc, &enc, NULL) ||
      ngtcp2_conn_open_uni_stream(c->qc, &dec, NULL) ||
      nghttp3_conn_bind_qpack_streams(c->h3, enc, dec))
    return -1;
  return 0;
}

/* ---- ngtcp2 callbacks ---- */

static int q_recv_tx_key(ngtcp2_conn *qc, ngtcp2_crypto_level level, void *ud) {
  (void)qc;
  if (level != NGTCP2_CRYPTO_LEVEL_APPLICATION) return 0;
  return start_h3(ud) == 0 ? 0 : NGTCP2_ERR_CALLBACK_FAILURE;
}

static int q_recv_stream_data(ngtcp2_conn *qc, uint32_t flags, int64_t id, uint64_t off,
                              const uint8_t *data, size_t len, void *ud, void *sud) {
  (void)off, (void)sud;
  qconn *c = ud;
  if (!c->h3 && start_h3(c) != 0) return NGTCP2_ERR_CALLBACK_FAILURE;
  nghttp3_ssize n =
      nghttp3_conn_read_stream(c->h3, id, data, len, (flags & NGTCP2_STREAM_DATA_FLAG_FIN) != 0);
  if (n < 0) return NGTCP2_ERR_CALLBACK_FAILURE;
  ngtcp2_conn_extend_max_stream_offset(qc, id, (uint64_t)n);
  ngtcp2_conn_extend_max_offset(qc, (uint64_t)n);
  return 0;
}

static int q_acked(ngtcp2_conn *qc, int64_t id, uint64_t off, uint64_t len, void *ud, void *sud) {
  (void)qc, (void)off, (void)sud;
  qconn *c = ud;
  return c->h3 && nghttp3_conn_add_ack_offset(c->h3, id, len) ? NGTCP2_ERR_CALLBACK_FAILURE : 0;
}

static int q_stream_close(ngtcp2_conn *qc, uint32_t flags, int64_t id, uint64_t code, void *ud,
                          void *sud) {
  (void)qc, (void)sud;
  qconn *c = ud;
  if (!(flags & NGTCP2_STREAM_CLOSE_FLAG_APP_ERROR_CODE_SET)) code = NGHTTP3_H3_NO_ERROR;
  if (c->h3) {
    int rv = nghttp3_conn_close_stream(c->h3, id, code);
    if (rv != 0 && rv != NGHTTP3_ERR_STREAM_NOT_FOUND) return NGTCP2_ERR_CALLBACK_FAILURE;
    if (rv == NGHTTP3_ERR_STREAM_NOT_FOUND && ngtcp2_is_bidi_stream(id))
      ngtcp2_conn_extend_max_streams_bidi(qc, 1);
  }
  return 0;
}

static int q_stream_reset(ngtcp2_conn *qc, int64_t id, uint64_t fs, uint64_t code, void *ud,
                          void *sud) {
  (void)qc, (void)fs, (void)code, (void)sud;
  qconn *c = ud;
  if (c->h3) nghttp3_conn_shutdown_stream_read(c->h3, id);
  return 0;
}

static int q_stream_stop_sending(ngtcp2_conn *qc, int64_t id, uint64_t code, void *ud, void *sud) {
  (void)qc, (void)code, (void)sud;
  qconn *c = ud;
  if (c->h3) nghttp3_conn_shutdown_stream_read(c->h3, id);
  return 0;
}

static int q_extend_msd(ngtcp2_conn *qc, int64_t id, uint64_t max, void *ud, void *sud) {
  (void)qc, (void)max, (void)sud;
  qconn *c = ud;
  if (c->h3) nghttp3_conn_unblock_stream(c->h3, id);
  return 0;
}

static ngtcp2_conn *q_get_conn(ngtcp2_crypto_conn_ref *ref) {
  return ((qconn *)ref->user_data)->qc;
}

/* ---- I/O ---- */

static void on_qtimer(uv_timer_t *t) {
  qconn *c = t->data;
  if (c->dead) return;
  if (ngtcp2_conn_handle_expiry(c->qc, uv_hrtime()) != 0) {
    qc_kill(c);
    return;
  }
  qc_write(c);
}

static void qc_write(qconn *c) {
  if (c->dead) return;
  pb_nullsrv_h3 *srv = c->srv;
  ngtcp2_tstamp ts = uv_hrtime();
  for (int guard = 0; guard < 100000; guard++) {
    int64_t sid = -1;
    int fin = 0;
    nghttp3_vec vec[16];
    nghttp3_ssize veccnt = 0;
    if (c->h3 && ngtcp2_conn_get_max_data_left(c->qc)) {
      veccnt = nghttp3_conn_writev_stream(c->h3, &sid, &fin, vec, 16);
      if (veccnt < 0) {
        qc_kill(c);
        return;
      }
    }
    ngtcp2_path_storage ps;
    ngtcp2_path_storage_zero(&ps);
    ngtcp2_pkt_info pi;
    ngtcp2_ssize ndatalen = -1;
    uint32_t flags = NGTCP2_WRITE_STREAM_FLAG_MORE | (fin ? NGTCP2_WRITE_STREAM_FLAG_FIN : 0);
    ngtcp2_ssize n =
        ngtcp2_conn_writev_stream(c->qc, &ps.path, &pi, srv->pkt, 1452, &ndatalen, flags, sid,
                                  (const ngtcp2_vec *)vec, (size_t)veccnt, ts);
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
        nghttp3_conn_add_write_offset(c->h3, sid, (size_t)ndatalen);
        continue;
      }
      qc_kill(c);
      return;
    }
    if (ndatalen >= 0 && sid >= 0) nghttp3_conn_add_write_offset(c->h3, sid, (size_t)ndatalen);
    if (n == 0) break;
    uv_buf_t b = uv_buf_init((char *)srv->pkt, (unsigned)n);
    uv_udp_try_send(&srv->udp, &b, 1, (const struct sockaddr *)&c->remote);
  }
  ngtcp2_tstamp expiry = ngtcp2_conn_get_expiry(c->qc), now = uv_hrtime();
  if (expiry == UINT64_MAX)
    uv_timer_stop(&c->timer);
  else
    uv_timer_start(&c->timer, on_qtimer, expiry > now ? (expiry - now + 999999) / 1000000 : 0, 0);
}

/* The connection ends: free the engines now, the handles through their close callbacks. */
static void qc_kill(qconn *c) {
  if (c->dead) return;
  c->dead = true;
  if (c->h3) nghttp3_conn_del(c->h3);
  c->h3 = NULL;
  if (c->qc) ngtcp2_conn_del(c->qc);
  c->qc = NULL;
  if (c->tls) gnutls_deinit(c->tls);
  c->tls = NULL;
  while (c->streams)
    stream_drop(c->streams);
  uv_close((uv_handle_t *)&c->timer, timer_closed);
}

static qconn *qc_new(pb_nullsrv_h3 *srv, const struct sockaddr_in *from, const uint8_t *data,
                     size_t len) {
  ngtcp2_pkt_hd hd;
  if (ngtcp2_accept(&hd, data, len) != 0) return NULL;
  qconn *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->srv = srv;
  c->remote = *from;
  ngtcp2_cid scid;
  pp_qc_random_cid(&scid, 16);
  static const ngtcp2_callbacks cbs = {
      .recv_client_initial = ngtcp2_crypto_recv_client_initial_cb,
      .recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb,
      .encrypt = ngtcp2_crypto_encrypt_cb,
      .decrypt = ngtcp2_crypto_decrypt_cb,
      .hp_mask = ngtcp2_crypto_hp_mask_cb,
      .recv_stream_data = q_recv_stream_data,
      .acked_stream_data_offset = q_acked,
      .stream_close = q_stream_close,
      .rand = pp_qc_rand_cb, /* the kit's, shared with every QUIC client */
      .get_new_connection_id = pp_qc_new_cid_cb,
      .update_key = ngtcp2_crypto_update_key_cb,
      .stream_reset = q_stream_reset,
      .extend_max_stream_data = q_extend_msd,
      .delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb,
      .delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb,
      .get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb,
      .stream_stop_sending = q_stream_stop_sending,
      .version_negotiation = ngtcp2_crypto_version_negotiation_cb,
      .recv_tx_key = q_recv_tx_key,
  };
  ngtcp2_settings settings;
  ngtcp2_settings_default(&settings);
  settings.initial_ts = uv_hrtime();
  ngtcp2_transport_params params;
  ngtcp2_transport_params_default(&params);
  params.initial_max_stream_data_bidi_local = 256 * 1024;
  params.initial_max_stream_data_bidi_remote = 256 * 1024;
  params.initial_max_stream_data_uni = 256 * 1024;
  params.initial_max_data = 16u << 20;
  params.initial_max_streams_bidi = srv->cfg.h2_max_streams ? srv->cfg.h2_max_streams : 100;
  params.initial_max_streams_uni = 3;
  params.max_idle_timeout = 30 * NGTCP2_SECONDS;
  params.original_dcid = hd.dcid;
  ngtcp2_path path;
  qc_path(c, &path);
  uv_timer_init(&srv->run.loop, &c->timer);
  c->timer.data = c;
  c->handles = 1;
  c->next = srv->conns;
  srv->conns = c;
  if (ngtcp2_conn_server_new(&c->qc, &hd.scid, &scid, &path, hd.version, &cbs, &settings, &params,
                             NULL, c) != 0) {
    c->qc = NULL;
    qc_kill(c);
    return NULL;
  }
  static const gnutls_datum_t alpn = {(unsigned char *)"h3", 2};
  if (gnutls_init(&c->tls, GNUTLS_SERVER | GNUTLS_NO_AUTO_SEND_TICKET) != 0) {
    c->tls = NULL;
    qc_kill(c);
    return NULL;
  }
  c->ref.get_conn = q_get_conn;
  c->ref.user_data = c;
  if (gnutls_priority_set_direct(c->tls, PP_QC_TLS_PRIORITY, NULL) != 0 ||
      gnutls_credentials_set(c->tls, GNUTLS_CRD_CERTIFICATE, srv->cred) != 0 ||
      ngtcp2_crypto_gnutls_configure_server_session(c->tls) != 0 ||
      gnutls_alpn_set_protocols(c->tls, &alpn, 1, GNUTLS_ALPN_MANDATORY) != 0) {
    qc_kill(c);
    return NULL;
  }
  gnutls_session_set_ptr(c->tls, &c->ref);
  ngtcp2_conn_set_tls_native_handle(c->qc, c->tls);
  return c;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  pb_nullsrv_h3 *srv = h->data;
  *buf = uv_buf_init((char *)srv->rbuf, sizeof srv->rbuf);
}

static void on_recv(uv_udp_t *h, ssize_t nread, const uv_buf_t *buf, const struct sockaddr *addr,
                    unsigned flags) {
  (void)flags;
  pb_nullsrv_h3 *srv = h->data;
  if (nread <= 0 || !addr || addr->sa_family != AF_INET || srv->stopping) return;
  const struct sockaddr_in *from = (const struct sockaddr_in *)addr;
  qconn *c = srv->conns;
  while (c && (c->dead || c->remote.sin_port != from->sin_port ||
               c->remote.sin_addr.s_addr != from->sin_addr.s_addr))
    c = c->next;
  const uint8_t *data = (const uint8_t *)buf->base;
  if (!c && !(c = qc_new(srv, from, data, (size_t)nread))) return;
  ngtcp2_path path;
  qc_path(c, &path);
  ngtcp2_pkt_info pi = {0};
  if (ngtcp2_conn_read_pkt(c->qc, &path, &pi, data, (size_t)nread, uv_hrtime()) != 0) {
    qc_kill(c); /* closed by the peer, or broken: no CONNECTION_CLOSE of our own */
    return;
  }
  qc_write(c);
}

/* ---- lifecycle ---- */

/* A self-signed P-256 certificate for localhost, as PEM (OpenSSL), for GnuTLS. */
static int make_cred(pb_nullsrv_h3 *srv) {
  EVP_PKEY *key = NULL;
  X509 *x = NULL;
  BIO *kb = BIO_new(BIO_s_mem()), *cb = BIO_new(BIO_s_mem());
  int rc = -1;
  if (kb && cb && pb_nullsrv_self_signed(&key, &x) == 0) {
    if (PEM_write_bio_X509(cb, x) == 1 &&
        PEM_write_bio_PrivateKey(kb, key, NULL, NULL, 0, NULL, NULL) == 1) {
      char *cp, *kp;
      long cl = BIO_get_mem_data(cb, &cp), kl = BIO_get_mem_data(kb, &kp);
      gnutls_datum_t cd = {(unsigned char *)cp, (unsigned)cl},
                     kd = {(unsigned char *)kp, (unsigned)kl};
      if (gnutls_certificate_allocate_credentials(&srv->cred) == 0 &&
          gnutls_certificate_set_x509_key_mem2(srv->cred, &cd, &kd, GNUTLS_X509_FMT_PEM, NULL, 0) >=
              0)
        rc = 0;
    }
  }
  BIO_free(kb);
  BIO_free(cb);
  X509_free(x);
  EVP_PKEY_free(key);
  return rc;
}

static void on_stop(uv_async_t *a) {
  pb_nullsrv_h3 *srv = a->data;
  srv->stopping = true;
  for (qconn *c = srv->conns; c; c = c->next)
    qc_kill(c);
  uv_close((uv_handle_t *)&srv->udp, NULL);
  uv_close((uv_handle_t *)&srv->run.stop_async, NULL);
  uv_close((uv_handle_t *)&srv->run.stall_timer, NULL);
}

int pb_nullsrv_h3_start(const pb_nullsrv_config *cfg, pb_nullsrv_h3 **out, int *port_out) {
  pb_nullsrv_h3 *srv = calloc(1, sizeof *srv);
  if (!srv) return -1;
  srv->cfg = *cfg;
  if (!srv->cfg.host) srv->cfg.host = "127.0.0.1";
  if (make_cred(srv) < 0) {
    fprintf(stderr, "null server: cannot make a TLS certificate\n");
    if (srv->cred) gnutls_certificate_free_credentials(srv->cred);
    free(srv);
    return -1;
  }
  pb_nullsrv_loop_init(&srv->run, &srv->cfg);
  uv_udp_init(&srv->run.loop, &srv->udp);
  srv->udp.data = srv;
  int rc = uv_ip4_addr(srv->cfg.host, srv->cfg.port, &srv->local);
  if (rc == 0) rc = uv_udp_bind(&srv->udp, (const struct sockaddr *)&srv->local, 0);
  int len = sizeof srv->local;
  if (rc == 0) rc = uv_udp_getsockname(&srv->udp, (struct sockaddr *)&srv->local, &len);
  if (rc == 0) rc = uv_udp_recv_start(&srv->udp, on_alloc, on_recv);
  if (rc < 0) {
    fprintf(stderr, "null server: cannot bind UDP %s:%d: %s\n", srv->cfg.host, srv->cfg.port,
            uv_strerror(rc));
    uv_close((uv_handle_t *)&srv->udp, NULL);
    uv_run(&srv->run.loop, UV_RUN_DEFAULT);
    uv_loop_close(&srv->run.loop);
    gnutls_certificate_free_credentials(srv->cred);
    free(srv);
    return -1;
  }
  *port_out = ntohs(srv->local.sin_port);
  pb_nullsrv_loop_run(&srv->run, on_stop, srv);
  *out = srv;
  return 0;
}

uint64_t pb_nullsrv_h3_served(const pb_nullsrv_h3 *s) {
  return pb_nullsrv_loop_served(&s->run);
}

void pb_nullsrv_h3_stop(pb_nullsrv_h3 *s, uint64_t *stall_began_ns, uint64_t *stall_ended_ns) {
  pb_nullsrv_loop_stop(&s->run, stall_began_ns, stall_ended_ns);
  gnutls_certificate_free_credentials(s->cred);
  free(s);
}
