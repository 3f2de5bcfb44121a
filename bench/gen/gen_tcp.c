/* The h1/h2 generator: connections over TCP (libuv), optionally TLS, carrying HTTP/1.1 (llhttp,
 * one request at a time) or HTTP/2 (gen_h2.c, reached only through the session ops in
 * g->session, never by name). It implements gen_proto_ops (gen_tcp_ops) for
 * the core (gen.c), which owns pacing, the pool and outcomes.
 *
 * Layers of a connection, bottom up: TCP -> optional TLS (OpenSSL over two memory BIOs: socket
 * bytes are written into the read BIO, records to send are drained from the write BIO into the
 * connection's output buffer) -> h1 here, or h2 (an nghttp2 client session fed with
 * nghttp2_session_mem_recv and drained with nghttp2_session_mem_send, gen_h2.c). One uv_write is
 * in flight per connection; bytes produced meanwhile collect in `out` and go in the next write.
 * h1 connections are reused when idle (the core's idle stack); an h1 request that is due takes an
 * idle connection or waits in the core's FIFO. */
#include "bench/gen/gen_int.h"
#include "bench/gen/gen_tcp_int.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llhttp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <uv.h>

static void conn_became_idle(conn *c);
static int body_pump(conn *c);

static int bytes_append(bytes *b, const void *data, size_t n) {
  if (b->len + n > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + n)
      cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) return -1;
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->len, data, n);
  b->len += n;
  return 0;
}

static void on_close(uv_handle_t *h) {
  gen_conn_release(h->data);
}

/* The request in flight on `c` (h1) or every stream on it (h2) failed with `o`/`err`; the
 * connection is unusable. */
void gen_tcp_fail(conn *c, pb_outcome o, int err) {
  if (c->req >= 0) gen_finish_request(c->g, (uint32_t)c->req, o, 0, err);
  if (!c->close_cause) c->close_cause = err;
  gen_conn_close(c);
  gen_maybe_finish(c->g);
}

static void on_write(uv_write_t *w, int status);

/* Hands `out` to libuv when no write is in flight. */
void gen_tcp_flush(conn *c) {
  if (c->writing || c->out.len == 0 || c->state == C_CLOSING || c->state == C_FREE) return;
  bytes t = c->wbuf;
  c->wbuf = c->out;
  c->out = t;
  c->out.len = 0;
  uv_buf_t buf = uv_buf_init(c->wbuf.p, (unsigned)c->wbuf.len);
  c->write_req.data = c;
  c->writing = true;
  int rc = uv_write(&c->write_req, (uv_stream_t *)&c->tcp, &buf, 1, on_write);
  if (rc < 0) {
    c->writing = false;
    gen_tcp_fail(c, PB_CONN_ERROR, rc);
  }
}

static void on_write(uv_write_t *w, int status) {
  conn *c = w->data;
  c->writing = false;
  c->wbuf.len = 0;
  if (c->state == C_CLOSING || c->state == C_FREE) return;
  if (status < 0) {
    /* h1 keeps its old rule: an idle connection's write error shows up as a read error. */
    if (c->state == C_CONNECTING) { /* TLS or h2 setup: charged like any setup failure */
      gen_conn_fail_setup(c, status);
    } else if (!c->h2 && c->state == C_BUSY && c->req >= 0 &&
               gen_kind_body(c->g, c->g->results[c->req].kind) > 0) {
      /* An upload cut by the server (it answered 413 or 503 and closed without reading the
       * rest): its answer may still be readable, so wait for the read side, briefly. */
      c->body_left = 0;
      c->out.len = 0;
      c->write_error = status;
      c->write_error_ns = gen_now_rel(c->g);
    } else if (c->h2 || c->state == C_BUSY) {
      gen_tcp_fail(c, PB_CONN_ERROR, status);
    }
    return;
  }
  if (c->h2) c->g->session->pump(c);
  if (!c->h2 && c->state == C_BUSY && c->body_left > 0 && body_pump(c) < 0) {
    gen_tcp_fail(c, PB_CONN_ERROR, c->ssl ? PB_ERR_TLS : UV_ENOMEM);
    return;
  }
  gen_tcp_flush(c);
}

/* Moves the TLS records OpenSSL produced into the output buffer. */
static int tls_drain(conn *c) {
  BIO *wbio = SSL_get_wbio(c->ssl);
  size_t n;
  while ((n = BIO_ctrl_pending(wbio)) > 0) {
    char tmp[16384];
    int got = BIO_read(wbio, tmp, (int)(n < sizeof tmp ? n : sizeof tmp));
    if (got <= 0) break;
    if (bytes_append(&c->out, tmp, (size_t)got) < 0) return -1;
  }
  return 0;
}

/* Queues application bytes for the socket (encrypted under TLS). The caller flushes. */
int gen_tcp_queue(conn *c, const void *data, size_t n) {
  if (!c->ssl) return bytes_append(&c->out, data, n);
  /* With memory BIOs a write after the handshake never wants I/O: the BIO grows. */
  if (n && SSL_write(c->ssl, data, (int)n) <= 0) return -1;
  return tls_drain(c);
}

/* Queues the next pieces of the upload in flight, up to BODY_QUEUED bytes. */
static int body_pump(conn *c) {
  while (c->body_left > 0 && c->out.len < BODY_QUEUED) {
    uint32_t n = c->body_left < BODY_PIECE ? c->body_left : BODY_PIECE;
    if (gen_tcp_queue(c, c->g->body, n) < 0) return -1;
    c->body_left -= n;
  }
  return 0;
}

static void conn_send(conn *c, uint32_t i) {
  gen *g = c->g;
  pb_result *r = &g->results[i];
  uint32_t kind = g->sched->arrivals[i].kind;
  c->state = C_BUSY;
  c->req = i;
  c->got_bytes = false;
  c->message_done = false;
  r->reused = c->served > 0;
  r->conn_id = c->id;
  g->in_flight++;
  r->sent_ns = gen_now_rel(g);
  c->body_left = gen_kind_body(g, kind);
  c->write_error = 0;
  if (gen_tcp_queue(c, g->requests[kind], g->request_lens[kind]) < 0 || body_pump(c) < 0) {
    gen_tcp_fail(c, PB_CONN_ERROR, c->ssl ? PB_ERR_TLS : UV_ENOMEM);
    return;
  }
  gen_tcp_flush(c);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  conn *c = h->data;
  *buf = uv_buf_init(c->g->readbuf, sizeof c->g->readbuf);
}

static int on_message_complete(llhttp_t *p) {
  conn *c = p->data;
  c->message_done = true;
  return HPE_PAUSED; /* handled after llhttp_execute returns, outside the parser */
}

static void after_message(conn *c) {
  gen *g = c->g;
  /* A response before the whole body was written leaves the connection mid-request: close it
   * (the rest of the body is never sent). */
  bool keep = llhttp_should_keep_alive(&c->parser) && c->body_left == 0 && !c->write_error;
  unsigned status = c->parser.status_code;
  c->body_left = 0;
  c->write_error = 0;
  llhttp_resume(&c->parser);
  if (c->req >= 0) {
    gen_finish_request(g, (uint32_t)c->req, gen_outcome_of_status(status), (uint16_t)status, 0);
    c->req = -1;
  }
  g->in_flight--;
  c->served++;
  c->state = C_OPEN;
  if (keep)
    conn_became_idle(c);
  else
    gen_conn_close(c);
  gen_maybe_finish(g);
}

/* h1: the peer closed (or a read failed) with `err`. */
static void h1_eof(conn *c, int err) {
  if (c->state == C_BUSY && err == UV_EOF && c->got_bytes) {
    /* A close-delimited body ends at EOF. llhttp_finish runs on_message_complete, which
     * pauses the parser, so HPE_PAUSED is its success here. */
    llhttp_errno_t e = llhttp_finish(&c->parser);
    if ((e == HPE_OK || e == HPE_PAUSED) && c->message_done) {
      after_message(c);
      if (c->state != C_CLOSING && c->state != C_FREE) gen_conn_close(c);
      return;
    }
  }
  if (c->state == C_BUSY)
    gen_tcp_fail(c, PB_CONN_ERROR, err);
  else
    gen_conn_close(c);
}

/* h1: response bytes (plaintext). */
static void h1_input(conn *c, const char *p, size_t left) {
  if (c->state != C_BUSY) { /* bytes nobody asked for: protocol error, drop the connection */
    gen_conn_close(c);
    return;
  }
  c->got_bytes = true;
  while (left > 0 && c->state == C_BUSY) {
    llhttp_errno_t e = llhttp_execute(&c->parser, p, left);
    if (e == HPE_PAUSED) {
      const char *stop = llhttp_get_error_pos(&c->parser);
      size_t used = stop ? (size_t)(stop - p) : left;
      p += used;
      left -= used;
      after_message(c);
      if (left > 0 && c->state != C_BUSY) { /* more bytes than one response: pipelining? */
        if (c->state != C_CLOSING && c->state != C_FREE) gen_conn_close(c);
      }
      return;
    }
    if (e != HPE_OK) {
      gen_tcp_fail(c, PB_CONN_ERROR, PB_ERR_BAD_HTTP);
      return;
    }
    left = 0;
  }
}

/* ---- transport ---- */

/* TCP (and TLS) up and the protocol checked: the connection can start its session. */
static void transport_ready(conn *c) {
  if (c->g->session) {
    c->g->session->start(c);
    return;
  }
  c->g->connecting--;
  c->state = C_OPEN;
  conn_became_idle(c);
}

static void plain_input(conn *c, const char *p, size_t n) {
  if (c->h2)
    c->g->session->input(c, p, n);
  else
    h1_input(c, p, n);
}

static void transport_eof(conn *c, int err) {
  if (c->state == C_CONNECTING && !c->h2) {
    /* Still in the TLS handshake (h1 has no other setup step). */
    gen_note_error(c->g, "the server closed the connection during the TLS handshake (%s)%s",
                   uv_err_name(err), "");
    gen_conn_fail_setup(c, PB_ERR_TLS);
    return;
  }
  if (c->h2)
    c->g->session->eof(c, err);
  else
    h1_eof(c, err);
}

static void tls_failed(conn *c, const char *what) {
  char msg[160];
  unsigned long e = ERR_get_error();
  ERR_error_string_n(e, msg, sizeof msg);
  ERR_clear_error();
  if (ERR_GET_REASON(e) == SSL_R_TLSV1_ALERT_NO_APPLICATION_PROTOCOL) {
    /* The server's ALPN accepts none of what we offered (RFC 7301 section 3.2). */
    gen_note_error(c->g, "ALPN: the server accepts none of the protocols offered (%s)%s",
                   c->g->h2 ? "h2: it does not speak h2 over TLS" : "http/1.1", "");
    if (c->state == C_CONNECTING)
      gen_conn_fail_setup(c, PB_ERR_ALPN);
    else
      gen_tcp_fail(c, PB_CONN_ERROR, PB_ERR_ALPN);
    return;
  }
  gen_note_error(c->g, "TLS %s failed: %s", what, e ? msg : "peer closed or sent non-TLS bytes");
  if (c->state == C_CONNECTING)
    gen_conn_fail_setup(c, PB_ERR_TLS);
  else
    gen_tcp_fail(c, PB_CONN_ERROR, PB_ERR_TLS);
}

/* The handshake finished: check ALPN, then hand over to h1 or h2. */
static void tls_established(conn *c) {
  gen *g = c->g;
  const unsigned char *alpn = NULL;
  unsigned alpn_len = 0;
  SSL_get0_alpn_selected(c->ssl, &alpn, &alpn_len);
  char got[64];
  snprintf(got, sizeof got, "%.*s", (int)alpn_len, alpn ? (const char *)alpn : "");
  bool ok = g->h2 ? strcmp(got, "h2") == 0 : (alpn_len == 0 || strcmp(got, "http/1.1") == 0);
  if (!ok) {
    gen_note_error(g, "ALPN: the server selected '%s', pp-bench asked for %s",
                   alpn_len ? got : "none",
                   g->h2 ? "h2 (it does not speak h2 over TLS)" : "http/1.1");
    gen_conn_fail_setup(c, PB_ERR_ALPN);
    return;
  }
  c->tls_ready = true;
  transport_ready(c);
}

static void tls_input(conn *c, const char *p, size_t n) {
  if (BIO_write(SSL_get_rbio(c->ssl), p, (int)n) != (int)n) {
    tls_failed(c, "read");
    return;
  }
  if (!c->tls_ready) {
    int r = SSL_do_handshake(c->ssl);
    if (tls_drain(c) < 0) {
      gen_conn_fail_setup(c, UV_ENOMEM);
      return;
    }
    gen_tcp_flush(c);
    if (!gen_conn_alive(c)) return;
    if (r <= 0) {
      int e = SSL_get_error(c->ssl, r);
      if (e == SSL_ERROR_WANT_READ) return;
      tls_failed(c, "handshake");
      return;
    }
    tls_established(c);
    if (!gen_conn_alive(c)) return;
  }
  for (;;) {
    int r = SSL_read(c->ssl, c->g->plainbuf, (int)sizeof c->g->plainbuf);
    if (r > 0) {
      plain_input(c, c->g->plainbuf, (size_t)r);
      if (!gen_conn_alive(c)) return;
      continue;
    }
    int e = SSL_get_error(c->ssl, r);
    if (e == SSL_ERROR_WANT_READ) break;
    if (e == SSL_ERROR_ZERO_RETURN) { /* close_notify */
      transport_eof(c, UV_EOF);
      return;
    }
    tls_failed(c, "read");
    return;
  }
  /* Reading may have produced records to send (key updates, alerts). */
  if (tls_drain(c) < 0) {
    gen_tcp_fail(c, PB_CONN_ERROR, UV_ENOMEM);
    return;
  }
  gen_tcp_flush(c);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  conn *c = s->data;
  if (!gen_conn_alive(c)) return;
  if (nread == 0) return;
  if (nread < 0) {
    transport_eof(c, (int)nread);
    return;
  }
  if (c->ssl)
    tls_input(c, buf->base, (size_t)nread);
  else
    plain_input(c, buf->base, (size_t)nread);
}

/* `c` is open and has nothing in flight: serve the oldest waiting arrival or park it. */
static void conn_became_idle(conn *c) {
  gen *g = c->g;
  uint32_t i;
  llhttp_init(&c->parser, HTTP_RESPONSE, &g->settings);
  c->parser.data = c;
  while (gen_pending_pop(g, &i)) {
    if (gen_now_rel(g) >= g->results[i].intended_ns + g->timeout_ns) {
      gen_finish_request(g, i, PB_TIMEOUT, 0, 0);
      continue;
    }
    conn_send(c, i);
    return;
  }
  c->state = C_IDLE;
  g->idle[g->idle_len++] = (uint32_t)(c - g->conns);
  gen_maybe_finish(g);
}

static void on_connect(uv_connect_t *req, int status) {
  conn *c = req->data;
  gen *g = c->g;
  if (c->state != C_CONNECTING) return; /* closed meanwhile */
  if (status < 0) {
    /* Charge the failure to the oldest waiting arrival so a dead server produces one error
     * per arrival instead of an endless reconnect loop. */
    gen_note_error(g, "connect: %s%s", uv_strerror(status), "");
    gen_conn_fail_setup(c, status);
    return;
  }
  c->tcp_up = true;
  c->connected_ns = gen_now_rel(g);
  uv_tcp_nodelay(&c->tcp, 1);
  if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) < 0) {
    gen_conn_close(c);
    return;
  }
  if (!g->ssl_ctx) {
    transport_ready(c);
    return;
  }
  c->ssl = SSL_new(g->ssl_ctx);
  BIO *rbio = BIO_new(BIO_s_mem()), *wbio = BIO_new(BIO_s_mem());
  if (!c->ssl || !rbio || !wbio) {
    BIO_free(rbio);
    BIO_free(wbio);
    gen_conn_fail_setup(c, UV_ENOMEM);
    return;
  }
  SSL_set_bio(c->ssl, rbio, wbio);
  SSL_set_connect_state(c->ssl);
  /* The macro casts away const; OpenSSL copies the name. */
  char sni[256];
  snprintf(sni, sizeof sni, "%s", g->cfg->tls_server_name ? g->cfg->tls_server_name : "localhost");
  SSL_set_tlsext_host_name(c->ssl, sni);
  SSL_do_handshake(c->ssl); /* writes the ClientHello into the write BIO */
  if (tls_drain(c) < 0) {
    gen_conn_fail_setup(c, UV_ENOMEM);
    return;
  }
  gen_tcp_flush(c);
}

/* ---- gen_proto_ops ---- */

/* The TLS context (ALPN h2 or http/1.1), the h2 session callbacks, and the h1 request bytes of
 * every kind, preformatted. */
static int tcp_init(gen *g, char *err, size_t errlen) {
  const pb_gen_config *cfg = g->cfg;
  const pb_schedule *sched = g->sched;
  if (g->session && g->session->init(g) < 0) return PB_ENOMEM;
  if (cfg->tls) {
    g->ssl_ctx = SSL_CTX_new(TLS_client_method());
    if (!g->ssl_ctx) {
      snprintf(err, errlen, "SSL_CTX_new failed");
      return PB_ESYS;
    }
    /* No verification: the targets are loopback servers with development certificates. */
    SSL_CTX_set_verify(g->ssl_ctx, SSL_VERIFY_NONE, NULL);
    SSL_CTX_set_min_proto_version(g->ssl_ctx, TLS1_2_VERSION); /* RFC 9113 section 9.2 */
    SSL_CTX_set_options(g->ssl_ctx, SSL_OP_NO_RENEGOTIATION);
    static const unsigned char alpn_h2[] = "\x02h2", alpn_h1[] = "\x08http/1.1";
    if (g->h2)
      SSL_CTX_set_alpn_protos(g->ssl_ctx, alpn_h2, sizeof alpn_h2 - 1);
    else
      SSL_CTX_set_alpn_protos(g->ssl_ctx, alpn_h1, sizeof alpn_h1 - 1);
  }
  g->requests = calloc(sched->path_count, sizeof *g->requests);
  g->request_lens = calloc(sched->path_count, sizeof *g->request_lens);
  if (!g->requests || !g->request_lens) return PB_ENOMEM;
  for (size_t k = 0; k < sched->path_count; k++) {
    const char *host = strchr(cfg->host, ':') ? "localhost" : cfg->host;
    uint32_t body = gen_kind_body(g, (uint32_t)k);
    int n = body ? asprintf(&g->requests[k],
                            "POST %s HTTP/1.1\r\nHost: %s:%d\r\nUser-Agent: pp-bench\r\n"
                            "Content-Type: application/octet-stream\r\nContent-Length: %u\r\n\r\n",
                            sched->paths[k], host, cfg->port, body)
                 : asprintf(&g->requests[k],
                            "GET %s HTTP/1.1\r\nHost: %s:%d\r\nUser-Agent: pp-bench\r\n\r\n",
                            sched->paths[k], host, cfg->port);
    if (n < 0) {
      g->requests[k] = NULL;
      return PB_ENOMEM;
    }
    g->request_lens[k] = (size_t)n;
  }
  llhttp_settings_init(&g->settings);
  g->settings.on_message_complete = on_message_complete;
  return 0;
}

static void tcp_dispose(gen *g) {
  if (g->requests)
    for (size_t k = 0; k < g->sched->path_count; k++)
      free(g->requests[k]);
  free(g->requests);
  free(g->request_lens);
  g->requests = NULL;
  g->request_lens = NULL;
  if (g->session) g->session->dispose(g);
  if (g->ssl_ctx) SSL_CTX_free(g->ssl_ctx);
  g->ssl_ctx = NULL;
}

static bool tcp_open(conn *c) {
  gen *g = c->g;
  uv_tcp_init(&g->loop, &c->tcp);
  c->tcp.data = c;
  c->connect_req.data = c;
  int rc = uv_tcp_connect(&c->connect_req, &c->tcp, (const struct sockaddr *)&g->addr, on_connect);
  if (rc < 0) {
    gen_note_error(g, "connect: %s%s", uv_strerror(rc), "");
    gen_conn_fail_setup(c, rc);
    return false;
  }
  return true;
}

static void tcp_close(conn *c) {
  if (c->h2) c->g->session->release(c);
  if (c->ssl) {
    SSL_free(c->ssl); /* frees both memory BIOs */
    c->ssl = NULL;
  }
  c->req = -1;
  uv_close((uv_handle_t *)&c->tcp, on_close);
}

/* h2: the least loaded connection with room takes the stream; h1: an idle connection. */
static bool tcp_dispatch(gen *g, uint32_t i) {
  if (g->session) {
    conn *c = g->session->pick(g);
    if (!c) return false;
    g->session->submit(c, i);
    g->session->pump(c);
    return true;
  }
  if (g->idle_len == 0) return false;
  conn *c = &g->conns[g->idle[--g->idle_len]];
  conn_send(c, i);
  return true;
}

/* h1: a client that leaves closes its connection; an upload's write error is charged after a
 * grace period; a request past the client timeout closes its connection. Any connection: a peer
 * that accepted but never finished TLS or sent h2 SETTINGS. */
static void tcp_sweep_conn(conn *c, uint64_t now) {
  gen *g = c->g;
  if (c->state == C_BUSY && c->req >= 0 && g->any_cancel) {
    const pb_result *r = &g->results[c->req];
    uint64_t after = g->kinds[r->kind].cancel_after_ns;
    if (after && now >= r->sent_ns + after) { /* the client leaves: close the connection */
      gen_tcp_fail(c, PB_CANCELLED, 0);
      return;
    }
  }
  if (c->state == C_BUSY && c->write_error && now >= c->write_error_ns + WRITE_ERROR_GRACE_NS) {
    gen_tcp_fail(c, PB_CONN_ERROR, c->write_error);
    return;
  }
  if (c->state == C_BUSY && c->req >= 0 && now >= g->results[c->req].intended_ns + g->timeout_ns) {
    gen_tcp_fail(c, PB_TIMEOUT, 0);
  }
  /* A peer that accepted but never finished TLS or sent h2 SETTINGS. */
  if (c->state == C_CONNECTING && c->tcp_up && now >= c->connected_ns + SETUP_TIMEOUT_NS) {
    if (c->ssl && !c->tls_ready) {
      gen_note_error(g, "the TLS handshake did not complete within 5 s%s%s", "", "");
      gen_conn_fail_setup(c, PB_ERR_TLS);
    } else {
      gen_note_error(g, "no h2 SETTINGS from the server within 5 s: it does not speak h2%s%s",
                     c->ssl ? "" : " with prior knowledge (h2c)", "");
      gen_conn_fail_setup(c, PB_ERR_H2_NO_SETTINGS);
    }
  }
}

/* h2: the session resets the stream. */
static void tcp_cancel_stream(conn *c, int64_t stream_id) {
  c->g->session->cancel(c, stream_id);
}

static void tcp_fill(conn *c) {
  c->g->session->fill(c);
  c->g->session->pump(c);
}

const gen_proto_ops gen_tcp_ops = {
    .init = tcp_init,
    .dispose = tcp_dispose,
    .open = tcp_open,
    .close = tcp_close,
    .dispatch = tcp_dispatch,
    .sweep_conn = tcp_sweep_conn,
    .cancel_stream = tcp_cancel_stream,
    .fill = tcp_fill,
};
