/* The fixed-delay reference server (see nullsrv.h). One thread, one uv loop; connections,
 * h2 streams and writes are malloc'd (this is test scaffolding, not a hot path).
 *
 * A connection owns its handles: the TCP handle, the h1 delay timer and one timer per h2
 * stream. `handles` counts the open ones; the connection is freed when the last one has closed.
 * TLS runs over two memory BIOs: socket bytes go into the read BIO, and whatever OpenSSL puts
 * into the write BIO is written to the socket after every SSL call. */
#include "bench/refsrv/nullsrv.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llhttp.h>
#include <nghttp2/nghttp2.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <uv.h>

#include "bench/refsrv/nullsrv_base.h"

struct pb_nullsrv {
  pb_nullsrv_config cfg;
  pb_nullsrv_loop run; /* loop, thread, stop, stall, count (nullsrv_base.h) */
  uv_tcp_t listener;
  llhttp_settings_t settings;
  nghttp2_session_callbacks *h2_callbacks;
  SSL_CTX *ssl_ctx;
  char alpn[32]; /* the accepted ALPN protocol */
};

typedef struct sstream sstream;

typedef struct sconn {
  uv_tcp_t tcp;
  uv_timer_t delay;
  llhttp_t parser;
  pb_nullsrv *srv;
  char url[256];
  size_t url_len;
  bool keep_alive;
  bool busy;
  bool dying;
  int handles; /* open handles owned by this connection */
  int writes;  /* writes in flight */
  SSL *ssl;
  bool tls_ready;
  nghttp2_session *h2;
  sstream *streams; /* h2 streams with a response to come */
} sconn;

/* An h2 stream between its request and its response. */
struct sstream {
  uv_timer_t delay;
  sconn *c;
  int32_t id;
  char path[256];
  sstream *next, *prev;
};

static void sconn_free_if_done(sconn *c) {
  if (c->dying && c->handles == 0) {
    if (c->h2) nghttp2_session_del(c->h2);
    if (c->ssl) SSL_free(c->ssl);
    free(c);
  }
}

static void sconn_closed(uv_handle_t *h) {
  sconn *c = h->data;
  c->handles--;
  sconn_free_if_done(c);
}

static void stream_closed(uv_handle_t *h) {
  sstream *st = h->data;
  sconn *c = st->c;
  if (st->prev)
    st->prev->next = st->next;
  else if (c->streams == st)
    c->streams = st->next;
  if (st->next) st->next->prev = st->prev;
  free(st);
  c->handles--;
  sconn_free_if_done(c);
}

static void sconn_close(sconn *c) {
  if (c->dying) return;
  c->dying = true;
  uv_close((uv_handle_t *)&c->tcp, sconn_closed);
  uv_close((uv_handle_t *)&c->delay, sconn_closed);
  for (sstream *st = c->streams; st; st = st->next)
    if (!uv_is_closing((uv_handle_t *)&st->delay))
      uv_close((uv_handle_t *)&st->delay, stream_closed);
}

/* ---- writing ---- */

typedef struct wreq {
  uv_write_t req;
  sconn *c;
  size_t len;
  char data[];
} wreq;

static void after_write(sconn *c);

static void on_written(uv_write_t *w, int status) {
  wreq *r = (wreq *)w;
  sconn *c = r->c;
  free(r);
  c->writes--;
  if (c->dying) return;
  if (status < 0) {
    sconn_close(c);
    return;
  }
  after_write(c);
}

static void raw_write(sconn *c, const void *data, size_t n) {
  if (c->dying || n == 0) return;
  wreq *r = malloc(sizeof *r + n);
  if (!r) {
    sconn_close(c);
    return;
  }
  r->c = c;
  r->len = n;
  memcpy(r->data, data, n);
  uv_buf_t buf = uv_buf_init(r->data, (unsigned)n);
  c->writes++;
  if (uv_write(&r->req, (uv_stream_t *)&c->tcp, &buf, 1, on_written) < 0) {
    c->writes--;
    free(r);
    sconn_close(c);
  }
}

/* Writes what OpenSSL has queued in the write BIO. */
static void tls_flush(sconn *c) {
  BIO *wbio = SSL_get_wbio(c->ssl);
  char tmp[16384];
  int n;
  while (BIO_ctrl_pending(wbio) > 0 && (n = BIO_read(wbio, tmp, sizeof tmp)) > 0)
    raw_write(c, tmp, (size_t)n);
}

static void sconn_write(sconn *c, const void *data, size_t n) {
  if (!c->ssl) {
    raw_write(c, data, n);
    return;
  }
  if (SSL_write(c->ssl, data, (int)n) <= 0) {
    sconn_close(c);
    return;
  }
  tls_flush(c);
}

/* ---- HTTP/1.1 ---- */

static void respond(uv_timer_t *t) {
  sconn *c = t->data;
  unsigned code = 200;
  if (c->url_len > 8 && strncmp(c->url, "/status/", 8) == 0) {
    code = (unsigned)strtoul(c->url + 8, NULL, 10);
    if (code < 100 || code > 599) code = 400;
  }
  if (strcmp(c->url, "/close") == 0) c->keep_alive = false; /* answer, then close */
  char response[160];
  int n = snprintf(response, sizeof response, "HTTP/1.1 %u X\r\nContent-Length: 2\r\n%s\r\nok",
                   code, c->keep_alive ? "" : "Connection: close\r\n");
  pb_nullsrv_loop_count(&c->srv->run);
  sconn_write(c, response, (size_t)n);
}

static int on_url(llhttp_t *p, const char *at, size_t len) {
  sconn *c = p->data;
  if (c->url_len + len < sizeof c->url) {
    memcpy(c->url + c->url_len, at, len);
    c->url_len += len;
    c->url[c->url_len] = 0;
  }
  return 0;
}

static int on_message_begin(llhttp_t *p) {
  sconn *c = p->data;
  c->url_len = 0;
  c->url[0] = 0;
  return 0;
}

static int on_message_complete(llhttp_t *p) {
  sconn *c = p->data;
  c->keep_alive = llhttp_should_keep_alive(p);
  c->busy = true;
  uv_timer_start(&c->delay, respond, c->srv->cfg.delay_ms, 0);
  return 0;
}

/* ---- HTTP/2 ---- */

static void h2_send(sconn *c) {
  if (c->dying || !c->h2) return;
  for (;;) {
    const uint8_t *data;
    ssize_t n = nghttp2_session_mem_send(c->h2, &data);
    if (n < 0) {
      sconn_close(c);
      return;
    }
    if (n == 0) break;
    sconn_write(c, data, (size_t)n);
    if (c->dying) return;
  }
  /* A terminated session (GOAWAY sent) closes once its last write is out. */
  if (!nghttp2_session_want_read(c->h2) && !nghttp2_session_want_write(c->h2) && c->writes == 0)
    sconn_close(c);
}

static ssize_t h2_read_ok(nghttp2_session *s, int32_t sid, uint8_t *buf, size_t len,
                          uint32_t *flags, nghttp2_data_source *src, void *user_data) {
  (void)s, (void)sid, (void)src, (void)user_data;
  if (len < 2) return NGHTTP2_ERR_CALLBACK_FAILURE;
  memcpy(buf, "ok", 2);
  *flags |= NGHTTP2_DATA_FLAG_EOF;
  return 2;
}

static void h2_respond(uv_timer_t *t) {
  sstream *st = t->data;
  sconn *c = st->c;
  if (c->dying) return;
  pb_nullsrv_loop_count(&c->srv->run);
  if (strcmp(st->path, "/reset") == 0) {
    nghttp2_submit_rst_stream(c->h2, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
  } else if (strcmp(st->path, "/goaway") == 0) {
    /* Refuses this stream (last stream id below it) and ends the session. */
    nghttp2_session_terminate_session2(c->h2, st->id - 2, NGHTTP2_NO_ERROR);
  } else {
    char status[4] = "200";
    unsigned code = 200;
    if (strncmp(st->path, "/status/", 8) == 0) {
      code = (unsigned)strtoul(st->path + 8, NULL, 10);
      if (code < 200 || code > 599) code = 400;
      snprintf(status, sizeof status, "%u", code);
    }
    nghttp2_nv nv = {(uint8_t *)":status", (uint8_t *)status, 7, 3, NGHTTP2_NV_FLAG_NONE};
    nghttp2_data_provider prd = {.read_callback = h2_read_ok};
    /* 204 and 304 carry no content (RFC 9110 sections 15.3.5, 15.4.5); nghttp2 enforces it. */
    nghttp2_submit_response(c->h2, st->id, &nv, 1, code == 204 || code == 304 ? NULL : &prd);
  }
  /* The stream no longer points at `st`, which the close callback frees. */
  nghttp2_session_set_stream_user_data(c->h2, st->id, NULL);
  uv_close((uv_handle_t *)&st->delay, stream_closed);
  h2_send(c);
}

static int h2_on_begin_headers(nghttp2_session *s, const nghttp2_frame *frame, void *user_data) {
  sconn *c = user_data;
  if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
  sstream *st = calloc(1, sizeof *st);
  if (!st) return NGHTTP2_ERR_CALLBACK_FAILURE;
  st->c = c;
  st->id = frame->hd.stream_id;
  uv_timer_init(&c->srv->run.loop, &st->delay);
  st->delay.data = st;
  c->handles++;
  st->next = c->streams;
  if (c->streams) c->streams->prev = st;
  c->streams = st;
  nghttp2_session_set_stream_user_data(s, st->id, st);
  return 0;
}

static int h2_on_header(nghttp2_session *s, const nghttp2_frame *frame, const uint8_t *name,
                        size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                        void *user_data) {
  (void)flags, (void)user_data;
  sstream *st = nghttp2_session_get_stream_user_data(s, frame->hd.stream_id);
  if (st && namelen == 5 && memcmp(name, ":path", 5) == 0 && valuelen < sizeof st->path) {
    memcpy(st->path, value, valuelen);
    st->path[valuelen] = 0;
  }
  return 0;
}

static int h2_on_frame_recv(nghttp2_session *s, const nghttp2_frame *frame, void *user_data) {
  sconn *c = user_data;
  if (!(frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) return 0;
  if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) return 0;
  sstream *st = nghttp2_session_get_stream_user_data(s, frame->hd.stream_id);
  if (st) uv_timer_start(&st->delay, h2_respond, c->srv->cfg.delay_ms, 0);
  return 0;
}

static int h2_on_stream_close(nghttp2_session *s, int32_t sid, uint32_t error_code,
                              void *user_data) {
  (void)error_code, (void)user_data;
  sstream *st = nghttp2_session_get_stream_user_data(s, sid);
  /* The client cancelled before the answer: drop the pending response. */
  if (st && !uv_is_closing((uv_handle_t *)&st->delay))
    uv_close((uv_handle_t *)&st->delay, stream_closed);
  return 0;
}

static void h2_begin(sconn *c) {
  if (nghttp2_session_server_new(&c->h2, c->srv->h2_callbacks, c) != 0) {
    c->h2 = NULL;
    sconn_close(c);
    return;
  }
  uint32_t max = c->srv->cfg.h2_max_streams ? c->srv->cfg.h2_max_streams : 100;
  nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, max}};
  nghttp2_submit_settings(c->h2, NGHTTP2_FLAG_NONE, iv, 1);
  h2_send(c);
}

static void after_write(sconn *c) {
  if (c->h2) {
    h2_send(c);
    return;
  }
  if (c->busy && c->writes == 0) {
    c->busy = false;
    if (!c->keep_alive) sconn_close(c);
  }
}

/* ---- input ---- */

static void plain_input(sconn *c, const char *p, size_t n) {
  if (c->h2) {
    if (nghttp2_session_mem_recv(c->h2, (const uint8_t *)p, n) < 0) {
      sconn_close(c);
      return;
    }
    h2_send(c);
    return;
  }
  if (llhttp_execute(&c->parser, p, n) != HPE_OK) sconn_close(c);
}

static void tls_input(sconn *c, const char *p, size_t n) {
  BIO_write(SSL_get_rbio(c->ssl), p, (int)n);
  if (!c->tls_ready) {
    int r = SSL_do_handshake(c->ssl);
    tls_flush(c);
    if (r <= 0) {
      if (SSL_get_error(c->ssl, r) != SSL_ERROR_WANT_READ) sconn_close(c);
      return;
    }
    c->tls_ready = true;
    if (c->srv->cfg.h2) h2_begin(c);
  }
  char buf[16384];
  int r;
  while (!c->dying && (r = SSL_read(c->ssl, buf, sizeof buf)) > 0)
    plain_input(c, buf, (size_t)r);
  if (!c->dying) tls_flush(c);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)h;
  buf->base = malloc(suggested);
  buf->len = buf->base ? suggested : 0;
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  sconn *c = s->data;
  if (nread < 0) {
    sconn_close(c);
  } else if (nread > 0 && !c->dying) {
    if (c->ssl)
      tls_input(c, buf->base, (size_t)nread);
    else
      plain_input(c, buf->base, (size_t)nread);
  }
  free(buf->base);
}

static void on_connection(uv_stream_t *l, int status) {
  pb_nullsrv *srv = l->data;
  if (status < 0) return;
  sconn *c = calloc(1, sizeof *c);
  if (!c) return;
  c->srv = srv;
  uv_tcp_init(&srv->run.loop, &c->tcp);
  uv_timer_init(&srv->run.loop, &c->delay);
  c->handles = 2;
  c->tcp.data = c;
  c->delay.data = c;
  if (uv_accept(l, (uv_stream_t *)&c->tcp) < 0) {
    sconn_close(c);
    return;
  }
  uv_tcp_nodelay(&c->tcp, 1);
  llhttp_init(&c->parser, HTTP_REQUEST, &srv->settings);
  c->parser.data = c;
  if (srv->ssl_ctx) {
    c->ssl = SSL_new(srv->ssl_ctx);
    if (!c->ssl) {
      sconn_close(c);
      return;
    }
    SSL_set_bio(c->ssl, BIO_new(BIO_s_mem()), BIO_new(BIO_s_mem()));
    SSL_set_accept_state(c->ssl);
  } else if (srv->cfg.h2) {
    h2_begin(c);
  }
  uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

/* ---- TLS setup ---- */

static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned int inlen, void *arg) {
  (void)ssl;
  pb_nullsrv *srv = arg;
  size_t want = strlen(srv->alpn);
  for (unsigned k = 0; k < inlen; k += 1u + in[k]) {
    if (in[k] == want && k + 1 + want <= inlen && memcmp(in + k + 1, srv->alpn, want) == 0) {
      *out = in + k + 1;
      *outlen = (unsigned char)want;
      return SSL_TLSEXT_ERR_OK;
    }
  }
  return SSL_TLSEXT_ERR_ALERT_FATAL; /* no_application_protocol */
}

/* The TLS context: the self-signed certificate (nullsrv_base.c) and the one ALPN protocol. */
static SSL_CTX *make_ssl_ctx(pb_nullsrv *srv) {
  SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
  EVP_PKEY *key = NULL;
  X509 *x = NULL;
  bool ok = ctx && pb_nullsrv_self_signed(&key, &x) == 0 && SSL_CTX_use_certificate(ctx, x) == 1 &&
            SSL_CTX_use_PrivateKey(ctx, key) == 1;
  X509_free(x);
  EVP_PKEY_free(key);
  if (!ok) {
    SSL_CTX_free(ctx);
    return NULL;
  }
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_alpn_select_cb(ctx, alpn_select, srv);
  return ctx;
}

/* ---- lifecycle ---- */

static void close_walk(uv_handle_t *h, void *arg) {
  if (uv_is_closing(h)) return;
  if (h->data == arg)
    uv_close(h, NULL); /* the server's own handles */
  else if (h->type == UV_TCP)
    sconn_close(h->data); /* a connection: closes its timers too, frees when all closed */
}

static void on_stop(uv_async_t *a) {
  pb_nullsrv *srv = a->data;
  /* Connections free their memory when their last handle closed; close them that way. */
  uv_walk(&srv->run.loop, close_walk, srv);
}

static void srv_free(pb_nullsrv *srv) {
  if (srv->h2_callbacks) nghttp2_session_callbacks_del(srv->h2_callbacks);
  if (srv->ssl_ctx) SSL_CTX_free(srv->ssl_ctx);
  free(srv);
}

int pb_nullsrv_start(const pb_nullsrv_config *cfg, pb_nullsrv **out, int *port_out) {
  pb_nullsrv *srv = calloc(1, sizeof *srv);
  if (!srv) return -1;
  srv->cfg = *cfg;
  if (!srv->cfg.host) srv->cfg.host = "127.0.0.1";
  llhttp_settings_init(&srv->settings);
  srv->settings.on_url = on_url;
  srv->settings.on_message_begin = on_message_begin;
  srv->settings.on_message_complete = on_message_complete;
  if (cfg->h2) {
    if (nghttp2_session_callbacks_new(&srv->h2_callbacks) != 0) {
      srv_free(srv);
      return -1;
    }
    nghttp2_session_callbacks_set_on_begin_headers_callback(srv->h2_callbacks, h2_on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(srv->h2_callbacks, h2_on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(srv->h2_callbacks, h2_on_frame_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(srv->h2_callbacks, h2_on_stream_close);
  }
  if (cfg->tls) {
    snprintf(srv->alpn, sizeof srv->alpn, "%s",
             cfg->tls_alpn ? cfg->tls_alpn : (cfg->h2 ? "h2" : "http/1.1"));
    srv->ssl_ctx = make_ssl_ctx(srv);
    if (!srv->ssl_ctx) {
      fprintf(stderr, "null server: cannot make a TLS certificate\n");
      srv_free(srv);
      return -1;
    }
  }
  pb_nullsrv_loop_init(&srv->run, &srv->cfg);
  uv_tcp_init(&srv->run.loop, &srv->listener);
  srv->listener.data = srv;
  struct sockaddr_in addr;
  int rc = uv_ip4_addr(srv->cfg.host, srv->cfg.port, &addr);
  if (rc == 0) rc = uv_tcp_bind(&srv->listener, (const struct sockaddr *)&addr, 0);
  if (rc == 0) rc = uv_listen((uv_stream_t *)&srv->listener, 1024, on_connection);
  if (rc < 0) {
    fprintf(stderr, "null server: cannot listen on %s:%d: %s\n", srv->cfg.host, srv->cfg.port,
            uv_strerror(rc));
    uv_close((uv_handle_t *)&srv->listener, NULL);
    uv_run(&srv->run.loop, UV_RUN_DEFAULT);
    uv_loop_close(&srv->run.loop);
    srv_free(srv);
    return -1;
  }
  struct sockaddr_storage bound;
  int len = sizeof bound;
  uv_tcp_getsockname(&srv->listener, (struct sockaddr *)&bound, &len);
  *port_out = ntohs(((struct sockaddr_in *)&bound)->sin_port);
  pb_nullsrv_loop_run(&srv->run, on_stop, srv);
  *out = srv;
  return 0;
}

uint64_t pb_nullsrv_served(const pb_nullsrv *s) {
  return pb_nullsrv_loop_served(&s->run);
}

void pb_nullsrv_stop(pb_nullsrv *s, uint64_t *stall_began_ns, uint64_t *stall_ended_ns) {
  pb_nullsrv_loop_stop(&s->run, stall_began_ns, stall_ended_ns);
  srv_free(s);
}
