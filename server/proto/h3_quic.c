/* One HTTP/3 connection of the endpoint (h3.h, h3_int.h): its ngtcp2_conn, GnuTLS session and
 * nghttp3 connection, the ngtcp2 callbacks, the read and write loop, its timer, and closing,
 * draining and graceful GOAWAY. Routing to it and freeing it at the end of a public call are
 * h3.c's; its request streams are h3_stream.c's.
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
 * which runs before every write, outside the engines. */
#include "server/proto/h3.h"

#include <stdlib.h>
#include <string.h>

#include <gnutls/gnutls.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>

#include "server/proto/h3_int.h"

#define WRITES_PER_CALL 64 /* datagrams one connection may queue per write pass */

static uint64_t min_u64(uint64_t a, uint64_t b) {
  return a < b ? a : b;
}

/* Puts the connection on the list the end of the current call (flush_all) visits. */
static void mark(pp_h3_conn *c) {
  if (c->dirty) return;
  c->dirty = 1;
  c->dirty_next = c->srv->dirty;
  c->srv->dirty = c;
}

void pp_h3__conn_mark(pp_h3_conn *c) {
  mark(c);
}

void pp_h3__conn_want(pp_h3_conn *c) {
  c->want_write = 1;
  mark(c);
}

void pp_h3__conn_owe_work(pp_h3_conn *c) {
  c->pending_work = 1;
  pp_h3__conn_want(c);
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
  nghttp3_settings settings;
  nghttp3_settings_default(&settings);
  settings.max_field_section_size = c->srv->cfg.limits.max_header_list;
  settings.qpack_max_dtable_capacity = 0; /* no dynamic table: no blocked streams to bound */
  settings.qpack_blocked_streams = 0;
  settings.enable_connect_protocol = c->srv->cfg.limits.connect_protocol;
  if (nghttp3_conn_server_new(&c->h3, &pp_h3__request_callbacks, &settings, NULL, c) != 0)
    return -1;
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

static int cb_stream_reset(ngtcp2_conn *qc, int64_t stream_id, uint64_t final_size,
                           uint64_t app_error_code, void *user_data, void *stream_user_data) {
  (void)qc, (void)final_size, (void)stream_user_data;
  pp_h3_conn *c = conn_of(user_data);
  if (c->h3) nghttp3_conn_shutdown_stream_read(c->h3, stream_id);
  pp_h3__stream_peer_abort(c, stream_id, app_error_code);
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
  pp_h3__rand_bytes(rand_ctx->native_handle, dest, destlen);
}

static int cb_get_new_connection_id(ngtcp2_conn *qc, ngtcp2_cid *cid, uint8_t *token, size_t cidlen,
                                    void *user_data) {
  (void)qc;
  pp_h3_conn *c = conn_of(user_data);
  pp_h3_server *srv = c->srv;
  for (int tries = 0; tries < 8; tries++) {
    uint8_t id[NGTCP2_MAX_CIDLEN];
    pp_h3__rand_bytes(srv, id, cidlen);
    if (pp_h3__cid_add(srv, c, id, cidlen) != 0) continue;
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
  pp_h3__cid_remove(c->srv, cid->data, cid->datalen);
  return 0;
}

static ngtcp2_conn *get_conn(ngtcp2_crypto_conn_ref *ref) {
  return ((pp_h3_conn *)ref->user_data)->qc;
}

/* ---- connections ---- */

void pp_h3__conn_free(pp_h3_conn *c) {
  pp_h3_server *srv = c->srv;
  /* The owner hears about every stream it holds before the connection goes. */
  for (pp_h3_stream *s = c->streams; s; s = s->next)
    pp_h3__stream_detach(c, s, s->detach_pending ? s->close_code : NGHTTP3_H3_REQUEST_CANCELLED);
  if (srv->cb->on_conn_close) srv->cb->on_conn_close(srv, c);
  while (c->streams)
    pp_h3__stream_free(c, c->streams);
  pp_h3__cid_remove_all(srv, c);
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
  pp_h3__out_push(srv, buf, (size_t)n, (struct sockaddr *)ps.path.local.addr, ps.path.local.addrlen,
                  (struct sockaddr *)ps.path.remote.addr, ps.path.remote.addrlen);
}

/* Deferred work on streams, outside ngtcp2 and nghttp3. */
static void run_pending(pp_h3_conn *c) {
  if (!c->pending_work || c->state != CS_OPEN) return;
  c->pending_work = 0;
  for (pp_h3_stream *s = c->streams; s;) {
    pp_h3_stream *next = s->next;
    int64_t id = s->id;
    if (s->detach_pending) pp_h3__stream_detach(c, s, s->close_code);
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
void pp_h3__conn_write(pp_h3_conn *c, uint64_t now) {
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
    pp_h3_datagram *d = pp_h3__out_slot(srv);
    if (!d || written >= WRITES_PER_CALL) {
      pp_h3__conn_want(c); /* more may be waiting: the owner's next flush continues */
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
    pp_h3__out_set_addrs(d, (struct sockaddr *)ps.path.local.addr, ps.path.local.addrlen,
                         (struct sockaddr *)ps.path.remote.addr, ps.path.remote.addrlen);
    d->ecn = pi.ecn;
    pp_h3__out_commit(srv, d, (size_t)n);
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
void pp_h3__conn_recv(pp_h3_conn *c, const uint8_t *pkt, size_t len, const ngtcp2_path *path,
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
      pp_h3__out_push(srv, c->close_pkt.data, c->close_pkt.len, (struct sockaddr *)path->local.addr,
                      path->local.addrlen, (struct sockaddr *)path->remote.addr,
                      path->remote.addrlen);
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
  pp_h3__conn_write(c, now);
}

int pp_h3__conn_new(pp_h3_server *srv, const ngtcp2_pkt_hd *hd, const ngtcp2_cid *odcid,
                    int retried, const ngtcp2_path *path, uint64_t now, pp_h3_conn **out) {
  const pp_h3_limits *l = &srv->cfg.limits;
  pp_h3_conn *c = pp_h3__xcalloc(1, sizeof *c);
  c->srv = srv;
  pp_buf_init(&c->close_pkt);
  memcpy(&c->local, path->local.addr, path->local.addrlen);
  c->local_len = path->local.addrlen;
  memcpy(&c->remote, path->remote.addr, path->remote.addrlen);
  c->remote_len = path->remote.addrlen;
  c->last_ts = now;

  uint8_t scid_bytes[PP_H3_SCID_LEN];
  for (int tries = 0;; tries++) {
    pp_h3__rand_bytes(srv, scid_bytes, sizeof scid_bytes);
    if (!pp_h3__cid_find(srv, scid_bytes, sizeof scid_bytes)) break;
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
  pp_h3__cid_add(srv, c, scid_bytes, sizeof scid_bytes);
  /* The client's Initials keep its chosen DCID until it sees ours. */
  pp_h3__cid_add(srv, c, hd->dcid.data, hd->dcid.datalen);
  if (srv->cb->on_conn_open) srv->cb->on_conn_open(srv, c);
  *out = c;
  return 0;
fail:
  if (c->qc) ngtcp2_conn_del(c->qc);
  if (c->tls) gnutls_deinit(c->tls);
  free(c);
  return -1;
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

void pp_h3__conn_expire(pp_h3_conn *c, uint64_t now) {
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
  pp_h3__conn_write(c, now);
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
  pp_h3__conn_want(c);
}

void pp_h3_conn_keep_alive(pp_h3_conn *c, uint64_t interval_ns) {
  if (c->qc) ngtcp2_conn_set_keep_alive_timeout(c->qc, interval_ns);
  pp_h3__conn_want(c);
}

int pp_h3_conn_handshake_done(const pp_h3_conn *c) {
  return c->handshake_done;
}
