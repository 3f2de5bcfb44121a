/* The generator's HTTP/3 transport: one QUIC connection (ngtcp2 0.12 client, TLS 1.3 through
 * GnuTLS and libngtcp2_crypto_gnutls, ALPN "h3") with an nghttp3 0.8 client session per pool
 * slot, on a connected UDP socket of the generator's own libuv loop.
 *
 * This is the h3 generator behind gen_proto_ops (gen_quic_ops, gen_int.h): the pool, pacing,
 * waiting FIFO, timeouts and outcomes are the core's (gen.c), shared with h2: a QUIC connection
 * is a `conn` slot with `q` set. The QUIC connection itself (set-up, the ngtcp2 -> nghttp3 glue,
 * the packet writer) is the project's QUIC client kit (quic_client/quic_client.h). It takes no
 * stream before the QUIC handshake is complete, and at most as many as the server's stream credit
 * allows at once (ngtcp2_conn_get_streams_bidi_left: initial_max_streams_bidi, raised by
 * MAX_STREAMS as streams close; capped at PB_H2_STREAM_CAP). Arrivals beyond that wait in the same
 * FIFO and are timed from their intended start. A request is done when its response stream ended
 * (FIN); a timed-out stream is reset (RESET_STREAM + STOP_SENDING, H3_REQUEST_CANCELLED) and the
 * connection stays.
 *
 * The server certificate is NOT verified: the targets are loopback servers with development
 * certificates. ngtcp2 and nghttp3 callbacks only record what happened (and finish requests);
 * the connection is closed, filled and written only after ngtcp2_conn_read_pkt or
 * ngtcp2_conn_handle_expiry has returned. */
#include "bench/gen/gen_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gnutls/gnutls.h>
#include <nghttp3/nghttp3.h>
#include <ngtcp2/ngtcp2.h>

#include "quic_client/quic_client.h"

#define H3_PKT_MAX 1500 /* one UDP datagram */

struct h3ctx {
  gnutls_certificate_credentials_t cred; /* empty: nothing is verified */
  ngtcp2_callbacks callbacks;            /* the kit's client set, plus STOP_SENDING */
};

typedef struct h3q {
  conn *c;
  uv_udp_t udp;
  uv_timer_t timer;
  int handles;     /* libuv handles not yet closed */
  pp_qc_session s; /* the QUIC connection and its HTTP/3 session (quic_client.h); s.data = c */
  int liberr;      /* the ngtcp2 error we close with (0: a clean close) */
  uint8_t pkt[H3_PKT_MAX];
} h3q;

/* The connection is unusable: its streams (and, before it was usable, the oldest waiting
 * arrival) fail with `err`. */
static void h3_fail(conn *c, int err) {
  gen *g = c->g;
  if (!gen_conn_alive(c)) return;
  if (c->state == C_CONNECTING) {
    gen_conn_fail_setup(c, err);
    return;
  }
  if (!c->close_cause) c->close_cause = err;
  gen_conn_close(c);
  gen_maybe_finish(g);
}

/* Request `i` leaves connection `c` (its outcome is decided by the caller). */
static void h3_detach(conn *c, uint32_t i) {
  gen *g = c->g;
  gen_stream_remove(c, i);
  g->req_slot[i] = UINT32_MAX;
  g->in_flight--;
}

static uint32_t tag_of(conn *c, void *stream_user_data) {
  uintptr_t tag = (uintptr_t)stream_user_data;
  if (!tag) return UINT32_MAX;
  uint32_t i = (uint32_t)(tag - 1);
  /* Timed out (or otherwise finished) requests were detached already. */
  if (c->g->req_slot[i] != (uint32_t)(c - c->g->conns)) return UINT32_MAX;
  return i;
}

static void gen_h3_flush(conn *c);

/* ---- nghttp3 callbacks ---- */

static int cb_recv_header(nghttp3_conn *h3, int64_t id, int32_t token, nghttp3_rcbuf *name,
                          nghttp3_rcbuf *value, uint8_t flags, void *ud, void *sud) {
  (void)h3, (void)id, (void)name, (void)flags;
  conn *c = ud;
  uint32_t i = tag_of(c, sud);
  if (i == UINT32_MAX || token != NGHTTP3_QPACK_TOKEN__STATUS) return 0;
  nghttp3_vec v = nghttp3_rcbuf_get_buf(value);
  unsigned status = 0;
  for (size_t k = 0; k < v.len && k < 3; k++)
    status = status * 10 + (unsigned)(v.base[k] - '0');
  if (status >= 200) c->g->results[i].status = (uint16_t)status; /* scratch until the end */
  return 0;
}

static int cb_recv_data(nghttp3_conn *h3, int64_t id, const uint8_t *data, size_t len, void *ud,
                        void *sud) {
  (void)h3, (void)data, (void)sud;
  conn *c = ud;
  ngtcp2_conn_extend_max_stream_offset(c->q->s.qc, id, len);
  ngtcp2_conn_extend_max_offset(c->q->s.qc, len);
  return 0;
}

static int cb_deferred_consume(nghttp3_conn *h3, int64_t id, size_t n, void *ud, void *sud) {
  (void)h3, (void)sud;
  conn *c = ud;
  ngtcp2_conn_extend_max_stream_offset(c->q->s.qc, id, n);
  ngtcp2_conn_extend_max_offset(c->q->s.qc, n);
  return 0;
}

/* The response is complete (FIN on the request stream): the request's outcome. */
static int cb_end_stream(nghttp3_conn *h3, int64_t id, void *ud, void *sud) {
  (void)h3, (void)id;
  conn *c = ud;
  gen *g = c->g;
  uint32_t i = tag_of(c, sud);
  if (i == UINT32_MAX) return 0;
  h3_detach(c, i);
  uint16_t status = g->results[i].status;
  g->results[i].status = 0;
  if (status >= 200)
    gen_finish_request(g, i, gen_outcome_of_status(status), status, 0);
  else
    gen_finish_request(g, i, PB_CONN_ERROR, 0, PB_ERR_H3_PROTOCOL);
  return 0;
}

/* A stream closed before its response ended: reset by the server, or cut by GOAWAY. */
static int cb_stream_close(nghttp3_conn *h3, int64_t id, uint64_t code, void *ud, void *sud) {
  (void)h3, (void)id;
  conn *c = ud;
  gen *g = c->g;
  uint32_t i = tag_of(c, sud);
  if (i == UINT32_MAX) return 0;
  h3_detach(c, i);
  g->results[i].status = 0;
  gen_finish_request(g, i, PB_CONN_ERROR, 0,
                     code == NGHTTP3_H3_REQUEST_REJECTED || c->goaway ? PB_ERR_H3_GOAWAY
                                                                      : PB_ERR_H3_RESET);
  return 0;
}

static int cb_stop_sending(nghttp3_conn *h3, int64_t id, uint64_t code, void *ud, void *sud) {
  (void)h3, (void)sud;
  ngtcp2_conn_shutdown_stream_read(((conn *)ud)->q->s.qc, id, code);
  return 0;
}

static int cb_reset_stream(nghttp3_conn *h3, int64_t id, uint64_t code, void *ud, void *sud) {
  (void)h3, (void)sud;
  ngtcp2_conn_shutdown_stream_write(((conn *)ud)->q->s.qc, id, code);
  return 0;
}

static int cb_shutdown(nghttp3_conn *h3, int64_t id, void *ud) {
  (void)h3, (void)id;
  conn *c = ud;
  if (!c->goaway && c->g->counters) c->g->counters->goaways++;
  c->goaway = true;
  return 0;
}

/* The response side of every request stream; nghttp3's user data is the pool slot. */
static const nghttp3_callbacks h3_callbacks = {
    .stream_close = cb_stream_close,
    .recv_data = cb_recv_data,
    .deferred_consume = cb_deferred_consume,
    .recv_header = cb_recv_header,
    .stop_sending = cb_stop_sending,
    .end_stream = cb_end_stream,
    .reset_stream = cb_reset_stream,
    .shutdown = cb_shutdown,
};

/* ---- errors ---- */

/* Maps an ngtcp2 error from read_pkt/handle_expiry/writev to an outcome cause, notes the first
 * one in words, and fails the connection. */
static void h3_fail_liberr(conn *c, int rv) {
  gen *g = c->g;
  h3q *q = c->q;
  char what[200];
  int err = PB_ERR_QUIC;
  if (rv == NGTCP2_ERR_DRAINING) {
    ngtcp2_connection_close_error cc;
    ngtcp2_conn_get_connection_close_error(q->s.qc, &cc);
    snprintf(what, sizeof what, "%s error 0x%llx%s%.*s",
             cc.type == NGTCP2_CONNECTION_CLOSE_ERROR_CODE_TYPE_APPLICATION ? "application"
                                                                            : "transport",
             (unsigned long long)cc.error_code, cc.reasonlen ? ": " : "", (int)cc.reasonlen,
             cc.reason ? (const char *)cc.reason : "");
    gen_note_error(g, "the server closed the QUIC connection (%s)%s", what,
                   c->state == C_CONNECTING ? " during the handshake" : "");
  } else if (rv == NGTCP2_ERR_CRYPTO) {
    uint8_t alert = ngtcp2_conn_get_tls_alert(q->s.qc);
    if (alert == 120) { /* no_application_protocol */
      err = PB_ERR_ALPN;
      gen_note_error(g, "TLS alert no_application_protocol: the server does not offer ALPN h3%s%s",
                     "", "");
    } else {
      err = PB_ERR_TLS;
      snprintf(what, sizeof what, "%u", alert);
      gen_note_error(g, "QUIC TLS handshake failed (TLS alert %s)%s", what, "");
    }
    q->liberr = rv;
  } else if (rv == NGTCP2_ERR_IDLE_CLOSE) {
    if (c->state == C_CONNECTING)
      gen_note_error(g, "no QUIC handshake with the server: idle timeout%s%s", "", "");
  } else if (rv == NGTCP2_ERR_CALLBACK_FAILURE && q->s.h3_failed) {
    err = PB_ERR_H3_PROTOCOL;
    gen_note_error(g, "nghttp3 rejected what the server sent%s%s", "", "");
    q->liberr = rv;
  } else {
    gen_note_error(g, "QUIC: %s%s", ngtcp2_strerror(rv), "");
    q->liberr = rv;
  }
  h3_fail(c, err);
}

/* ---- I/O ---- */

static void on_timer(uv_timer_t *t);

static void arm_timer(conn *c) {
  h3q *q = c->q;
  ngtcp2_tstamp expiry = ngtcp2_conn_get_expiry(q->s.qc), now = uv_hrtime();
  if (expiry == UINT64_MAX) {
    uv_timer_stop(&q->timer);
    return;
  }
  uint64_t ms = expiry > now ? (expiry - now + 999999) / 1000000 : 0;
  uv_timer_start(&q->timer, on_timer, ms, 0);
}

static void gen_h3_flush(conn *c) {
  h3q *q = c->q;
  if (!q || !gen_conn_alive(c) || !q->s.qc) return;
  ngtcp2_tstamp ts = uv_hrtime();
  size_t maxlen = ngtcp2_conn_get_path_max_tx_udp_payload_size(q->s.qc);
  if (maxlen > sizeof q->pkt) maxlen = sizeof q->pkt;
  for (int guard = 0; guard < 100000; guard++) {
    int h3_error;
    ngtcp2_ssize n = pp_qc_write_packet(&q->s, q->pkt, maxlen, ts, &h3_error);
    if (h3_error) {
      gen_note_error(c->g, "nghttp3: %s%s", nghttp3_strerror(h3_error), "");
      q->liberr = NGTCP2_ERR_INTERNAL;
      h3_fail(c, PB_ERR_H3_PROTOCOL);
      return;
    }
    if (n < 0) {
      h3_fail_liberr(c, (int)n);
      return;
    }
    if (n == 0) break;
    uv_buf_t b = uv_buf_init((char *)q->pkt, (unsigned)n);
    int rc = uv_udp_try_send(&q->udp, &b, 1, NULL);
    /* A full socket buffer drops the datagram like the network would; QUIC recovers it. */
    if (rc < 0 && rc != UV_EAGAIN && rc != UV_ENOBUFS) {
      gen_note_error(c->g, "QUIC: send: %s%s", uv_strerror(rc), "");
      h3_fail(c, rc);
      return;
    }
  }
  arm_timer(c);
}

static void on_timer(uv_timer_t *t) {
  conn *c = t->data;
  if (!gen_conn_alive(c) || !c->q || !c->q->s.qc) return;
  int rv = ngtcp2_conn_handle_expiry(c->q->s.qc, uv_hrtime());
  if (rv != 0) {
    h3_fail_liberr(c, rv);
    return;
  }
  gen_h3_flush(c);
}

static bool h3_has_room(const conn *c) {
  return c->q && c->state == C_OPEN && c->q->s.h3 && !c->goaway && c->n_streams < c->h2_cap &&
         ngtcp2_conn_get_streams_bidi_left(c->q->s.qc) > 0;
}

static conn *gen_h3_pick(gen *g) {
  conn *best = NULL;
  for (uint32_t k = 0; k < g->conn_high; k++) {
    conn *c = &g->conns[(g->rr + k) % g->conn_high];
    if (h3_has_room(c) && (!best || c->n_streams < best->n_streams)) best = c;
  }
  if (best) g->rr = (uint32_t)(best - g->conns) + 1;
  return best;
}

/* h3 upload: the next piece of the body of the stream's request. nghttp3 keeps the vector until
 * the bytes are acknowledged; they point into g->body, which stays unchanged for the run. */
static nghttp3_ssize h3_body_read(nghttp3_conn *h3, int64_t id, nghttp3_vec *vec, size_t veccnt,
                                  uint32_t *pflags, void *ud, void *sud) {
  (void)h3, (void)id;
  conn *c = ud;
  gen *g = c->g;
  uint32_t i = tag_of(c, sud);
  if (i == UINT32_MAX || veccnt == 0) { /* cancelled or timed out: the stream is being reset */
    *pflags |= NGHTTP3_DATA_FLAG_EOF;
    return 0;
  }
  uint32_t total = gen_kind_body(g, g->results[i].kind), off = g->req_body_off[i];
  uint32_t n = total - off;
  if (n > BODY_PIECE) n = BODY_PIECE;
  vec[0].base = (uint8_t *)g->body;
  vec[0].len = n;
  g->req_body_off[i] = off + n;
  if (g->req_body_off[i] == total) *pflags |= NGHTTP3_DATA_FLAG_EOF;
  return 1;
}

static void gen_h3_submit(conn *c, uint32_t i) {
  gen *g = c->g;
  h3q *q = c->q;
  pb_result *r = &g->results[i];
  uint32_t kind = g->sched->arrivals[i].kind;
  const char *path = g->sched->paths[kind];
  uint32_t body = gen_kind_body(g, kind);
  char clen[16];
  snprintf(clen, sizeof clen, "%u", body);
#define NV(n, v)                                                                                   \
  {(uint8_t *)(uintptr_t)(n), (uint8_t *)(uintptr_t)(v), sizeof(n) - 1, strlen(v),                 \
   NGHTTP3_NV_FLAG_NONE}
  nghttp3_nv nva[] = {NV(":method", body ? "POST" : "GET"),
                      NV(":scheme", "https"),
                      NV(":authority", g->authority),
                      NV(":path", path),
                      NV("user-agent", "pp-bench"),
                      NV("content-length", clen),
                      NV("content-type", "application/octet-stream")};
#undef NV
  nghttp3_data_reader reader = {.read_data = h3_body_read};
  r->reused = c->served > 0;
  r->conn_id = c->id;
  r->sent_ns = gen_now_rel(g);
  if (body) g->req_body_off[i] = 0;
  int64_t sid;
  if (ngtcp2_conn_open_bidi_stream(q->s.qc, &sid, NULL) != 0 ||
      nghttp3_conn_submit_request(q->s.h3, sid, nva, body ? 7 : 5, body ? &reader : NULL,
                                  (void *)(uintptr_t)(i + 1)) != 0) {
    gen_finish_request(g, i, PB_CONN_ERROR, 0, PB_ERR_H3_PROTOCOL);
    return;
  }
  c->served++;
  c->streams[c->n_streams++] = i;
  g->req_slot[i] = (uint32_t)(c - g->conns);
  g->req_stream[i] = (int32_t)sid;
  g->in_flight++;
  if (g->counters && c->n_streams > g->counters->h2_peak_streams)
    g->counters->h2_peak_streams = c->n_streams;
}

static void gen_h3_fill(conn *c) {
  gen *g = c->g;
  uint32_t i;
  while (h3_has_room(c) && gen_pending_pop(g, &i)) {
    if (gen_now_rel(g) >= g->results[i].intended_ns + g->timeout_ns) {
      gen_finish_request(g, i, PB_TIMEOUT, 0, 0);
      continue;
    }
    gen_h3_submit(c, i);
  }
  gen_h3_flush(c);
}

static void gen_h3_cancel(conn *c, int64_t stream_id) {
  h3q *q = c->q;
  if (!q || !q->s.qc) return;
  if (q->s.h3) nghttp3_conn_shutdown_stream_write(q->s.h3, stream_id);
  ngtcp2_conn_shutdown_stream(q->s.qc, stream_id, NGHTTP3_H3_REQUEST_CANCELLED);
  /* The sweep writes afterwards (gen_h3_fill on every open connection). */
}

/* After the engine consumed a datagram: become usable once HTTP/3 is up, take waiting
 * arrivals, write, and close a connection that GOAWAY drained. */
static void h3_after_input(conn *c) {
  gen *g = c->g;
  h3q *q = c->q;
  if (!gen_conn_alive(c)) return;
  if (c->state == C_CONNECTING && q->s.h3) {
    const ngtcp2_transport_params *tp = ngtcp2_conn_get_remote_transport_params(q->s.qc);
    uint64_t max = tp ? tp->initial_max_streams_bidi : 0;
    uint32_t max32 = max > UINT32_MAX ? UINT32_MAX : (uint32_t)max;
    if (g->counters &&
        (g->counters->h2_server_max_streams == 0 || max32 < g->counters->h2_server_max_streams))
      g->counters->h2_server_max_streams = max32;
    /* The server's credit (MAX_STREAMS) is followed through streams_bidi_left; this is our
     * own cap. */
    c->h2_cap = PB_H2_STREAM_CAP;
    c->h2_alloc = c->h2_cap;
    c->streams = calloc(c->h2_alloc, sizeof *c->streams);
    if (!c->streams) {
      gen_conn_fail_setup(c, UV_ENOMEM);
      return;
    }
    g->connecting--;
    c->state = C_OPEN;
  }
  if (c->state == C_OPEN)
    gen_h3_fill(c);
  else
    gen_h3_flush(c);
  if (!gen_conn_alive(c)) return;
  if (c->goaway && c->n_streams == 0) {
    c->close_cause = PB_ERR_H3_GOAWAY;
    gen_conn_close(c);
    gen_maybe_finish(g);
  }
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  conn *c = h->data;
  *buf = uv_buf_init(c->g->readbuf, sizeof c->g->readbuf);
}

static void on_recv(uv_udp_t *h, ssize_t nread, const uv_buf_t *buf, const struct sockaddr *addr,
                    unsigned flags) {
  (void)addr, (void)flags;
  conn *c = h->data;
  if (!gen_conn_alive(c) || !c->q || !c->q->s.qc || nread == 0) return;
  if (nread < 0) { /* ECONNREFUSED: an ICMP port unreachable, nothing listens on the port */
    gen_note_error(c->g, "QUIC: %s%s", uv_strerror((int)nread),
                   nread == UV_ECONNREFUSED ? " (nothing listens on that UDP port)" : "");
    h3_fail(c, (int)nread);
    return;
  }
  ngtcp2_path path;
  pp_qc_session_path(&c->q->s, &path);
  ngtcp2_pkt_info pi = {0};
  int rv = ngtcp2_conn_read_pkt(c->q->s.qc, &path, &pi, (const uint8_t *)buf->base, (size_t)nread,
                                uv_hrtime());
  if (rv != 0) {
    h3_fail_liberr(c, rv);
    return;
  }
  h3_after_input(c);
}

/* ---- open, close ---- */

static void on_handle_closed(uv_handle_t *h) {
  conn *c = h->data;
  h3q *q = c->q;
  if (--q->handles > 0) return;
  free(q);
  c->q = NULL;
  gen_conn_release(c);
}

static void gen_h3_close(conn *c) {
  h3q *q = c->q;
  if (q->s.qc && !ngtcp2_conn_is_in_draining_period(q->s.qc) &&
      !ngtcp2_conn_is_in_closing_period(q->s.qc)) {
    /* Tell the server, so it frees the connection now rather than at its idle timeout. */
    ngtcp2_connection_close_error cc;
    if (q->liberr)
      ngtcp2_connection_close_error_set_transport_error_liberr(&cc, q->liberr, NULL, 0);
    else
      ngtcp2_connection_close_error_set_application_error(&cc, NGHTTP3_H3_NO_ERROR, NULL, 0);
    ngtcp2_path_storage ps;
    ngtcp2_path_storage_zero(&ps);
    ngtcp2_pkt_info pi;
    ngtcp2_ssize n = ngtcp2_conn_write_connection_close(q->s.qc, &ps.path, &pi, q->pkt,
                                                        sizeof q->pkt, &cc, uv_hrtime());
    if (n > 0) {
      uv_buf_t b = uv_buf_init((char *)q->pkt, (unsigned)n);
      uv_udp_try_send(&q->udp, &b, 1, NULL);
    }
  }
  pp_qc_session_dispose(&q->s);
  uv_udp_recv_stop(&q->udp);
  uv_close((uv_handle_t *)&q->udp, on_handle_closed);
  uv_close((uv_handle_t *)&q->timer, on_handle_closed);
}

static int h3_setup(conn *c) {
  gen *g = c->g;
  h3q *q = c->q;
  /* A connected UDP socket on an ephemeral loopback port: its address is the path's local. */
  struct sockaddr_storage any;
  memset(&any, 0, sizeof any);
  int rc;
  if (g->addr.ss_family == AF_INET6)
    rc = uv_ip6_addr("::1", 0, (struct sockaddr_in6 *)&any);
  else
    rc = uv_ip4_addr("127.0.0.1", 0, (struct sockaddr_in *)&any);
  if (rc == 0) rc = uv_udp_bind(&q->udp, (const struct sockaddr *)&any, 0);
  if (rc == 0) rc = uv_udp_connect(&q->udp, (const struct sockaddr *)&g->addr);
  struct sockaddr_storage local;
  int len = sizeof local;
  if (rc == 0) rc = uv_udp_getsockname(&q->udp, (struct sockaddr *)&local, &len);
  if (rc < 0) {
    gen_note_error(g, "QUIC: UDP socket: %s%s", uv_strerror(rc), "");
    return rc;
  }

  ngtcp2_transport_params params;
  ngtcp2_transport_params_default(&params);
  params.initial_max_streams_bidi = 0; /* the server opens none */
  params.initial_max_streams_uni = 3;  /* its control and QPACK streams */
  params.initial_max_stream_data_bidi_local = 1u << 20;
  params.initial_max_stream_data_uni = 1u << 20;
  params.initial_max_data = 16u << 20;
  params.max_idle_timeout = 30 * NGTCP2_SECONDS;
  const pp_qc_client_config qcfg = {
      .local = (const struct sockaddr *)&local,
      .local_len = (socklen_t)len,
      .remote = (const struct sockaddr *)&g->addr,
      .remote_len =
          g->addr.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in),
      .params = &params,
      .initial_ts = uv_hrtime(),
      .callbacks = &g->h3ctx->callbacks,
      .cred = g->h3ctx->cred,
      .alpn = "h3",
      .sni = g->cfg->tls_server_name ? g->cfg->tls_server_name : "localhost",
  };
  q->s.h3_callbacks = &h3_callbacks;
  q->s.data = c;
  rc = pp_qc_client_new(&q->s, &qcfg);
  if (rc == PP_QC_ENOMEM) return UV_ENOMEM;
  if (rc == PP_QC_ETLS) {
    gen_note_error(g, "QUIC: GnuTLS client session setup failed%s%s", "", "");
    return PB_ERR_TLS;
  }
  rc = uv_udp_recv_start(&q->udp, on_alloc, on_recv);
  if (rc < 0) return rc;
  return 0;
}

static bool gen_h3_open(conn *c) {
  gen *g = c->g;
  h3q *q = calloc(1, sizeof *q);
  if (!q) { /* without q the slot closes as a TCP one: give it a handle to close */
    uv_tcp_init(&g->loop, &c->tcp);
    c->tcp.data = c;
    gen_conn_fail_setup(c, UV_ENOMEM);
    return false;
  }
  c->q = q;
  q->c = c;
  uv_udp_init(&g->loop, &q->udp);
  uv_timer_init(&g->loop, &q->timer);
  q->udp.data = c;
  q->timer.data = c;
  q->handles = 2;
  c->tcp_up = true; /* the setup clock (SETUP_TIMEOUT_NS) starts now */
  c->connected_ns = gen_now_rel(g);
  int rc = h3_setup(c);
  if (rc != 0) {
    gen_conn_fail_setup(c, rc);
    return false;
  }
  gen_h3_flush(c); /* the Initial */
  return gen_conn_alive(c);
}

static int gen_h3_init(gen *g, char *err, size_t errlen) {
  g->h3ctx = calloc(1, sizeof *g->h3ctx);
  if (!g->h3ctx) {
    snprintf(err, errlen, "out of memory");
    return PB_ESYS;
  }
  /* No trust store and no verification: loopback servers with development certificates. */
  if (gnutls_certificate_allocate_credentials(&g->h3ctx->cred) != 0) {
    free(g->h3ctx);
    g->h3ctx = NULL;
    snprintf(err, errlen, "gnutls_certificate_allocate_credentials failed");
    return PB_ESYS;
  }
  pp_qc_client_callbacks(&g->h3ctx->callbacks);
  g->h3ctx->callbacks.stream_stop_sending = pp_qc_stream_stop_sending_cb;
  return 0;
}

static void gen_h3_dispose(gen *g) {
  if (!g->h3ctx) return;
  gnutls_certificate_free_credentials(g->h3ctx->cred);
  free(g->h3ctx);
  g->h3ctx = NULL;
}

/* ---- gen_proto_ops ---- */

static bool quic_dispatch(gen *g, uint32_t i) {
  conn *c = gen_h3_pick(g);
  if (!c) return false;
  gen_h3_submit(c, i);
  gen_h3_flush(c);
  return true;
}

/* A server that never completes the QUIC handshake is reported after SETUP_TIMEOUT_NS. */
static void quic_sweep_conn(conn *c, uint64_t now) {
  if (c->state == C_CONNECTING && c->tcp_up && now >= c->connected_ns + SETUP_TIMEOUT_NS) {
    gen_note_error(c->g, "no QUIC handshake (h3) with the server within 5 s%s%s", "", "");
    gen_conn_fail_setup(c, PB_ERR_QUIC);
  }
}

static void on_stub_closed(uv_handle_t *h) {
  gen_conn_release(h->data);
}

static void quic_close(conn *c) {
  if (!c->q) { /* gen_h3_open could not allocate: only the stand-in TCP handle to close */
    uv_close((uv_handle_t *)&c->tcp, on_stub_closed);
    return;
  }
  gen_h3_close(c);
}

const gen_proto_ops gen_quic_ops = {
    .init = gen_h3_init,
    .dispose = gen_h3_dispose,
    .open = gen_h3_open,
    .close = quic_close,
    .dispatch = quic_dispatch,
    .sweep_conn = quic_sweep_conn,
    .cancel_stream = gen_h3_cancel,
    .fill = gen_h3_fill,
};
