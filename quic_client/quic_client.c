/* The QUIC client kit (quic_client.h): connection set-up, the ngtcp2 -> nghttp3 glue and the
 * packet writer shared by every QUIC client of the project. Sans-I/O: the caller sends and
 * receives the datagrams and owns the clock. */
#include "quic_client/quic_client.h"

#include <string.h>

#include <gnutls/crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>

void pp_qc_rand_cb(uint8_t *dest, size_t len, const ngtcp2_rand_ctx *ctx) {
  (void)ctx;
  gnutls_rnd(GNUTLS_RND_RANDOM, dest, len);
}

int pp_qc_new_cid_cb(ngtcp2_conn *qc, ngtcp2_cid *cid, uint8_t *token, size_t cidlen, void *ud) {
  (void)qc, (void)ud;
  uint8_t id[NGTCP2_MAX_CIDLEN];
  if (gnutls_rnd(GNUTLS_RND_RANDOM, id, cidlen) != 0 ||
      gnutls_rnd(GNUTLS_RND_RANDOM, token, NGTCP2_STATELESS_RESET_TOKENLEN) != 0)
    return NGTCP2_ERR_CALLBACK_FAILURE;
  ngtcp2_cid_init(cid, id, cidlen);
  return 0;
}

void pp_qc_random_cid(ngtcp2_cid *cid, size_t len) {
  uint8_t id[NGTCP2_MAX_CIDLEN];
  if (len > sizeof id) len = sizeof id;
  gnutls_rnd(GNUTLS_RND_RANDOM, id, len);
  ngtcp2_cid_init(cid, id, len);
}

/* ---- ngtcp2 -> nghttp3 glue (user data: the pp_qc_session) ---- */

/* 1-RTT keys are in place: start HTTP/3 (control and QPACK streams). */
static int cb_handshake_completed(ngtcp2_conn *qc, void *ud) {
  pp_qc_session *s = ud;
  s->handshake_done = true;
  nghttp3_settings settings;
  nghttp3_settings_default(&settings);
  int64_t ctrl, enc, dec;
  int failed = 0;
  if (nghttp3_conn_client_new(&s->h3, s->h3_callbacks, &settings, NULL, s->data) != 0) {
    s->h3 = NULL;
    failed = 1;
  } else if (ngtcp2_conn_open_uni_stream(qc, &ctrl, NULL) ||
             nghttp3_conn_bind_control_stream(s->h3, ctrl) ||
             ngtcp2_conn_open_uni_stream(qc, &enc, NULL) ||
             ngtcp2_conn_open_uni_stream(qc, &dec, NULL) ||
             nghttp3_conn_bind_qpack_streams(s->h3, enc, dec)) {
    failed = 1;
  }
  if (s->on_handshake) s->on_handshake(s);
  if (failed) {
    s->h3_failed = true;
    return NGTCP2_ERR_CALLBACK_FAILURE;
  }
  return 0;
}

static int cb_recv_stream_data(ngtcp2_conn *qc, uint32_t flags, int64_t id, uint64_t off,
                               const uint8_t *data, size_t len, void *ud, void *sud) {
  (void)off, (void)sud;
  pp_qc_session *s = ud;
  if (!s->h3) return 0;
  nghttp3_ssize n =
      nghttp3_conn_read_stream(s->h3, id, data, len, (flags & NGTCP2_STREAM_DATA_FLAG_FIN) != 0);
  if (n < 0) {
    s->h3_failed = true;
    return NGTCP2_ERR_CALLBACK_FAILURE;
  }
  ngtcp2_conn_extend_max_stream_offset(qc, id, (uint64_t)n);
  ngtcp2_conn_extend_max_offset(qc, (uint64_t)n);
  return 0;
}

static int cb_acked(ngtcp2_conn *qc, int64_t id, uint64_t off, uint64_t len, void *ud, void *sud) {
  (void)qc, (void)off, (void)sud;
  pp_qc_session *s = ud;
  if (s->h3 && nghttp3_conn_add_ack_offset(s->h3, id, len) != 0) {
    s->h3_failed = true;
    return NGTCP2_ERR_CALLBACK_FAILURE;
  }
  return 0;
}

static int cb_stream_close(ngtcp2_conn *qc, uint32_t flags, int64_t id, uint64_t code, void *ud,
                           void *sud) {
  (void)qc, (void)sud;
  pp_qc_session *s = ud;
  if (!(flags & NGTCP2_STREAM_CLOSE_FLAG_APP_ERROR_CODE_SET)) code = NGHTTP3_H3_NO_ERROR;
  if (s->h3) {
    int rv = nghttp3_conn_close_stream(s->h3, id, code);
    if (rv != 0 && rv != NGHTTP3_ERR_STREAM_NOT_FOUND) {
      s->h3_failed = true;
      return NGTCP2_ERR_CALLBACK_FAILURE;
    }
  }
  return 0;
}

static int cb_stream_reset(ngtcp2_conn *qc, int64_t id, uint64_t fs, uint64_t code, void *ud,
                           void *sud) {
  (void)qc, (void)fs, (void)code, (void)sud;
  pp_qc_session *s = ud;
  if (s->h3) nghttp3_conn_shutdown_stream_read(s->h3, id);
  return 0;
}

int pp_qc_stream_stop_sending_cb(ngtcp2_conn *qc, int64_t id, uint64_t code, void *ud, void *sud) {
  (void)qc, (void)code, (void)sud;
  pp_qc_session *s = ud;
  if (s->h3) nghttp3_conn_shutdown_stream_read(s->h3, id);
  return 0;
}

static int cb_extend_msd(ngtcp2_conn *qc, int64_t id, uint64_t max, void *ud, void *sud) {
  (void)qc, (void)max, (void)sud;
  pp_qc_session *s = ud;
  if (s->h3) nghttp3_conn_unblock_stream(s->h3, id);
  return 0;
}

static ngtcp2_conn *cb_get_conn(ngtcp2_crypto_conn_ref *ref) {
  return ((pp_qc_session *)ref->user_data)->qc;
}

void pp_qc_client_callbacks(ngtcp2_callbacks *cbs) {
  memset(cbs, 0, sizeof *cbs);
  cbs->client_initial = ngtcp2_crypto_client_initial_cb;
  cbs->recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb;
  cbs->handshake_completed = cb_handshake_completed;
  cbs->encrypt = ngtcp2_crypto_encrypt_cb;
  cbs->decrypt = ngtcp2_crypto_decrypt_cb;
  cbs->hp_mask = ngtcp2_crypto_hp_mask_cb;
  cbs->recv_stream_data = cb_recv_stream_data;
  cbs->acked_stream_data_offset = cb_acked;
  cbs->stream_close = cb_stream_close;
  cbs->recv_retry = ngtcp2_crypto_recv_retry_cb;
  cbs->rand = pp_qc_rand_cb;
  cbs->get_new_connection_id = pp_qc_new_cid_cb;
  cbs->update_key = ngtcp2_crypto_update_key_cb;
  cbs->stream_reset = cb_stream_reset;
  cbs->extend_max_stream_data = cb_extend_msd;
  cbs->delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb;
  cbs->delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb;
  cbs->get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb;
  cbs->version_negotiation = ngtcp2_crypto_version_negotiation_cb;
}

/* ---- nghttp3 -> ngtcp2 glue (user data: the pp_qc_session, or a record that starts with it) ----
 */

void pp_qc_consumed(pp_qc_session *s, int64_t id, size_t n) {
  ngtcp2_conn_extend_max_stream_offset(s->qc, id, n);
  ngtcp2_conn_extend_max_offset(s->qc, n);
}

static int h3_deferred_consume(nghttp3_conn *h3, int64_t id, size_t n, void *ud, void *sud) {
  (void)h3, (void)sud;
  pp_qc_consumed(ud, id, n);
  return 0;
}

static int h3_stop_sending(nghttp3_conn *h3, int64_t id, uint64_t code, void *ud, void *sud) {
  (void)h3, (void)sud;
  ngtcp2_conn_shutdown_stream_read(((pp_qc_session *)ud)->qc, id, code);
  return 0;
}

static int h3_reset_stream(nghttp3_conn *h3, int64_t id, uint64_t code, void *ud, void *sud) {
  (void)h3, (void)sud;
  ngtcp2_conn_shutdown_stream_write(((pp_qc_session *)ud)->qc, id, code);
  return 0;
}

void pp_qc_h3_client_callbacks(nghttp3_callbacks *cbs) {
  memset(cbs, 0, sizeof *cbs);
  cbs->deferred_consume = h3_deferred_consume;
  cbs->stop_sending = h3_stop_sending;
  cbs->reset_stream = h3_reset_stream;
}

/* ---- set-up ---- */

void pp_qc_client_params(ngtcp2_transport_params *params, uint64_t stream_window,
                         uint64_t conn_window, ngtcp2_duration idle_timeout) {
  ngtcp2_transport_params_default(params);
  params->initial_max_streams_uni = 3;
  params->initial_max_stream_data_bidi_local = stream_window;
  params->initial_max_stream_data_uni = 1 << 20;
  params->initial_max_data = conn_window;
  params->max_idle_timeout = idle_timeout;
}

void pp_qc_session_path(pp_qc_session *s, ngtcp2_path *path) {
  path->local.addr = (ngtcp2_sockaddr *)&s->local;
  path->local.addrlen = s->local_len;
  path->remote.addr = (ngtcp2_sockaddr *)&s->remote;
  path->remote.addrlen = s->remote_len;
  path->user_data = NULL;
}

int pp_qc_client_new(pp_qc_session *s, const pp_qc_client_config *cfg) {
  s->qc = NULL;
  s->h3 = NULL;
  s->tls = NULL;
  s->handshake_done = false;
  s->h3_failed = false;
  memset(&s->local, 0, sizeof s->local);
  memset(&s->remote, 0, sizeof s->remote);
  memcpy(&s->local, cfg->local, cfg->local_len);
  memcpy(&s->remote, cfg->remote, cfg->remote_len);
  s->local_len = (ngtcp2_socklen)cfg->local_len;
  s->remote_len = (ngtcp2_socklen)cfg->remote_len;

  ngtcp2_cid dcid, scid;
  pp_qc_random_cid(&dcid, 18);
  pp_qc_random_cid(&scid, 16);
  ngtcp2_callbacks defaults;
  const ngtcp2_callbacks *cbs = cfg->callbacks;
  if (!cbs) {
    pp_qc_client_callbacks(&defaults);
    cbs = &defaults;
  }
  ngtcp2_settings settings;
  ngtcp2_settings_default(&settings);
  settings.initial_ts = cfg->initial_ts;
  if (cfg->token && cfg->token_len) {
    settings.token.base = (uint8_t *)(uintptr_t)cfg->token;
    settings.token.len = cfg->token_len;
  }
  ngtcp2_path path;
  pp_qc_session_path(s, &path);
  if (ngtcp2_conn_client_new(&s->qc, &dcid, &scid, &path, NGTCP2_PROTO_VER_V1, cbs, &settings,
                             cfg->params, NULL, s) != 0) {
    s->qc = NULL;
    return PP_QC_ENOMEM;
  }
  if (gnutls_init(&s->tls, GNUTLS_CLIENT) != 0) {
    s->tls = NULL;
    return PP_QC_ENOMEM;
  }
  gnutls_datum_t alpn = {(unsigned char *)(uintptr_t)cfg->alpn, (unsigned)strlen(cfg->alpn)};
  if (gnutls_priority_set_direct(s->tls, PP_QC_TLS_PRIORITY, NULL) != 0 ||
      ngtcp2_crypto_gnutls_configure_client_session(s->tls) != 0 ||
      gnutls_credentials_set(s->tls, GNUTLS_CRD_CERTIFICATE, cfg->cred) != 0 ||
      gnutls_alpn_set_protocols(s->tls, &alpn, 1, GNUTLS_ALPN_MANDATORY) != 0 ||
      gnutls_server_name_set(s->tls, GNUTLS_NAME_DNS, cfg->sni, strlen(cfg->sni)) != 0)
    return PP_QC_ETLS;
  s->ref.get_conn = cb_get_conn;
  s->ref.user_data = s;
  gnutls_session_set_ptr(s->tls, &s->ref);
  ngtcp2_conn_set_tls_native_handle(s->qc, s->tls);
  return 0;
}

/* ---- writing ---- */

ngtcp2_ssize pp_qc_write_packet(pp_qc_session *s, uint8_t *buf, size_t buflen, ngtcp2_tstamp ts,
                                int *h3_error) {
  *h3_error = 0;
  /* Each pass either produces a packet, finds nothing, or moves a stream's state on (blocked,
   * shut, or "write more" after its data went into the packet being built); the bound only
   * guards against an engine that never settles. */
  for (int guard = 0; guard < 100000; guard++) {
    int64_t sid = -1;
    int fin = 0;
    nghttp3_vec vec[16];
    nghttp3_ssize veccnt = 0;
    if (s->h3 && ngtcp2_conn_get_max_data_left(s->qc)) {
      veccnt = nghttp3_conn_writev_stream(s->h3, &sid, &fin, vec, 16);
      if (veccnt < 0) {
        *h3_error = (int)veccnt;
        return NGTCP2_ERR_CALLBACK_FAILURE;
      }
    }
    ngtcp2_path_storage ps;
    ngtcp2_path_storage_zero(&ps);
    ngtcp2_pkt_info pi;
    ngtcp2_ssize ndatalen = -1;
    uint32_t flags = NGTCP2_WRITE_STREAM_FLAG_MORE | (fin ? NGTCP2_WRITE_STREAM_FLAG_FIN : 0);
    ngtcp2_ssize n = ngtcp2_conn_writev_stream(s->qc, &ps.path, &pi, buf, buflen, &ndatalen, flags,
                                               sid, (const ngtcp2_vec *)vec, (size_t)veccnt, ts);
    if (n < 0) {
      if (n == NGTCP2_ERR_STREAM_DATA_BLOCKED) {
        nghttp3_conn_block_stream(s->h3, sid);
        continue;
      }
      if (n == NGTCP2_ERR_STREAM_SHUT_WR) {
        nghttp3_conn_shutdown_stream_write(s->h3, sid);
        continue;
      }
      if (n == NGTCP2_ERR_WRITE_MORE) {
        nghttp3_conn_add_write_offset(s->h3, sid, (size_t)ndatalen);
        continue;
      }
      return n;
    }
    if (ndatalen >= 0 && sid >= 0) nghttp3_conn_add_write_offset(s->h3, sid, (size_t)ndatalen);
    return n;
  }
  return 0;
}

void pp_qc_session_dispose(pp_qc_session *s) {
  if (s->h3) nghttp3_conn_del(s->h3);
  if (s->qc) ngtcp2_conn_del(s->qc);
  if (s->tls) gnutls_deinit(s->tls);
  s->h3 = NULL;
  s->qc = NULL;
  s->tls = NULL;
}
