/* conn: the client stream (see conn.h): accept, read into the connection's buffer, pooled
 * output chunks, close. What the bytes mean is the business of the protocol glue that set
 * c->proto (h1conn.c, h2conn.c). */
#include "server/proto/proxy.h"
#include "server/session/conn.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/base/alloc.h"
#include "server/base/clock.h"
#include "server/base/log.h"
#include "server/core/dispatch.h"
#include "server/workers/wlink.h"
#include "server/proto/tls.h"

void pp_sessions_init(pp_sessions *s, server *srv, uv_loop_t *loop, const pp_config *cfg,
                      pp_net *net, pp_exchange_pool *xpool, pp_core *core, const pp_hooks *hooks,
                      const int *draining, const pp_session_starters *start) {
  pp_queue_init(&s->clients);
  s->srv = srv;
  s->loop = loop;
  s->cfg = cfg;
  s->net = net;
  s->xpool = xpool;
  s->core = core;
  s->hooks = hooks;
  s->draining = draining;
  s->start = *start;
}

/* The read buffer of a connection that holds none (c->rbuf is never NULL, so that
 * `rbuf + rpos` with nothing buffered stays well defined). */
static uint8_t no_rbuf[1];

static void rbuf_acquire(client *c) {
  if (c->rbuf != no_rbuf) return;
  pp_sessions *s = c->sess;
  c->rbuf = s->rbuf_pool_n ? s->rbuf_pool[--s->rbuf_pool_n] : pp_xmalloc(PP_CLIENT_RBUF);
  c->rpos = c->rlen = 0;
}

static void rbuf_put(pp_sessions *s, uint8_t *b) {
  if (s->rbuf_pool_n < (int)(sizeof s->rbuf_pool / sizeof s->rbuf_pool[0]))
    s->rbuf_pool[s->rbuf_pool_n++] = b;
  else
    free(b), s->freed_bytes_since_trim += PP_CLIENT_RBUF;
}

void pp_conn_rbuf_release(client *c) {
  if (c->rbuf == no_rbuf || c->rpos != c->rlen || c->in_parse) return;
  rbuf_put(c->sess, c->rbuf);
  c->rbuf = no_rbuf;
  c->rpos = c->rlen = 0;
}

static void on_client_closed(uv_handle_t *h) {
  client *c = h->data;
  pp_sessions *s = c->sess;
  if (c->rbuf != no_rbuf) rbuf_put(s, c->rbuf), c->rbuf = no_rbuf;
  c->rpos = c->rlen = 0;
  pp_h1_dispose(&c->h1); /* here, never while a parser callback may still run */
  if (c->proto && c->proto->dispose) c->proto->dispose(c);
  if (c->tls) {
    pp_tls_conn_dispose(c->tls);
    free(c->tls);
    c->tls = NULL;
  }
  if (c->out) pp_chunk_put(s->net, c->out), c->out = NULL;
  if (s->free_clients_n < PP_FREE_CLIENTS_MAX) {
    c->next_free = s->free_clients;
    s->free_clients = c;
    s->free_clients_n++;
  } else {
    pp_buf_dispose(&c->h2out);
    pp_buf_dispose(&c->h2hdrs);
    pp_buf_dispose(&c->tls_plain);
    pp_buf_dispose(&c->tls_wire);
    free(c);
    s->freed_bytes_since_trim += sizeof *c;
  }
  if (*s->draining && s->hooks->drain_progress) s->hooks->drain_progress(s->srv);
}

static void on_timer_closed(uv_handle_t *h) {
  client *c = h->data;
  uv_close(&c->h.handle, on_client_closed);
}

void pp_conn_detach(client *c) {
  if (c->out) pp_chunk_put(c->sess->net, c->out), c->out = NULL;
  uv_read_stop(&c->h.stream);
  uv_timer_stop(&c->timer);
  uv_close((uv_handle_t *)&c->timer, on_timer_closed);
}

void pp_conn_close(client *c) {
  if (c->closing) return;
  c->closing = 1;
  /* A hijack waiting for our last writes: the worker learns the client is gone. */
  if (c->req && c->req->hijack_wait) {
    c->req->hijack_wait = 0;
    pp_wlink_hijacked(c->req, PP_WIRE_HIJACK_GONE, NULL, NULL, 0, NULL, NULL);
  }
  if (c->tls && !c->tls_ready && pp_tls_conn_cause(c->tls) == PP_TLS_CAUSE_NONE)
    c->sess->core->stats.tls_incomplete++; /* timed out or dropped before the handshake ended */
  if (c->req) {
    pp_exchange *x = c->req;
    c->req = NULL;
    pp_exchange_abandon(x);
  }
  if (c->proto && c->proto->abandon) c->proto->abandon(c);
  if (c->out) pp_chunk_put(c->sess->net, c->out), c->out = NULL;
  pp_queue_remove(&c->sess->clients, &c->link);
  uv_read_stop(&c->h.stream);
  uv_timer_stop(&c->timer);
  uv_close((uv_handle_t *)&c->timer, on_timer_closed);
}

static void on_client_shutdown(uv_shutdown_t *req, int status) {
  client *c = req->data;
  (void)status;
  if (c->closing) return;
  /* Read and discard what the client still sends, briefly, so that closing does not reset
   * the connection before the client has read our response. */
  c->discarding = 1;
  pp_conn_arm_timer(c);
}

static void send_wire(client *c);

void pp_conn_close_graceful(client *c) {
  if (c->closing || c->discarding) return;
  if (c->tls && c->tls_ready) {
    pp_tls_conn_shutdown(c->tls, &c->tls_wire); /* close_notify */
    send_wire(c);
    if (c->closing) return;
  }
  c->discarding = 1;
  c->shutdown_req.data = c;
  if (uv_shutdown(&c->shutdown_req, &c->h.stream, on_client_shutdown) < 0) pp_conn_close(c);
  pp_conn_arm_timer(c);
}

static void on_client_write(uv_write_t *wr, int status) {
  wchunk *k = (wchunk *)wr;
  client *c = k->owner;
  c->writes_in_flight--;
  c->write_bytes -= k->len;
  pp_chunk_put(k->net, k);
  if (c->closing) return;
  if (status < 0) {
    pp_conn_close(c);
    return;
  }
  c->last_progress = pp_now_ns();
  pp_conn_on_written(c);
}

/* Hands one chunk to the kernel, accounting for it while it is queued. */
static void write_chunk(client *c, wchunk *k) {
  k->owner = c;
  uv_buf_t b = uv_buf_init((char *)k->data, (unsigned)k->len);
  int rc = pp_write_or_queue(&c->h.stream, &k->wr, &b, 1, on_client_write);
  if (rc <= 0) {
    pp_chunk_put(c->sess->net, k);
    if (rc < 0)
      pp_conn_close(c);
    else
      c->last_progress = pp_now_ns();
    return;
  }
  c->writes_in_flight++;
  c->write_bytes += b.len;
  k->len = b.len; /* what is still queued (write_bytes is decremented by it) */
  /* The first pending write starts the write timeout; each completion restarts it. */
  if (c->writes_in_flight == 1) pp_conn_arm_timer(c);
}

/* Writes the pending ciphertext in pooled chunks. */
static void send_wire(client *c) {
  size_t off = 0;
  while (off < c->tls_wire.len && !c->closing) {
    wchunk *k = pp_chunk_get(c->sess->net, 0);
    size_t n = c->tls_wire.len - off < k->cap ? c->tls_wire.len - off : k->cap;
    memcpy(k->data, c->tls_wire.data + off, n);
    k->len = n;
    off += n;
    write_chunk(c, k);
  }
  c->tls_wire.len = 0;
}

void pp_conn_flush(client *c) {
  wchunk *k = c->out;
  if (!k) return;
  c->out = NULL;
  if (k->len == 0 || c->closing) {
    pp_chunk_put(c->sess->net, k);
    return;
  }
  if (c->tls) {
    int rc = pp_tls_conn_write(c->tls, k->data, k->len, &c->tls_wire);
    pp_chunk_put(c->sess->net, k);
    if (rc < 0) {
      LOG(c->sess, "client %s: TLS write: %s", c->remote, pp_tls_strerror(rc));
      pp_conn_close(c);
      return;
    }
    send_wire(c);
    return;
  }
  write_chunk(c, k);
}

void pp_conn_out(client *c, const void *data, size_t len) {
  const uint8_t *p = data;
  while (len) {
    if (c->out && c->out->len == c->out->cap) pp_conn_flush(c);
    if (!c->out) c->out = pp_chunk_get(c->sess->net, len > PP_CHUNK_CAP ? len : 0);
    size_t n = c->out->cap - c->out->len;
    if (n > len) n = len;
    memcpy(c->out->data + c->out->len, p, n);
    c->out->len += n;
    p += n;
    len -= n;
  }
}

void pp_conn_outf(client *c, const char *fmt, ...) {
  char tmp[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n > 0) pp_conn_out(c, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

static void on_client_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf);

static void on_client_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  client *c = h->data;
  (void)suggested;
  if (c->discarding) {
    static char sink[4096];
    *buf = uv_buf_init(sink, sizeof sink);
    return;
  }
  if (c->tls) { /* ciphertext: decrypted at once in on_client_read, so one buffer serves all */
    *buf = uv_buf_init((char *)c->sess->tls_rbuf, PP_TLS_READ_BUF);
    return;
  }
  rbuf_acquire(c);
  if (c->rpos > 0 && c->rpos == c->rlen) c->rpos = c->rlen = 0;
  *buf = uv_buf_init((char *)c->rbuf + c->rlen, (unsigned)(PP_CLIENT_RBUF - c->rlen));
}

void pp_conn_update_reading(client *c) {
  if (c->closing) return;
  int room = c->tls ? c->tls_plain.len < PP_CLIENT_RBUF : c->rlen < PP_CLIENT_RBUF;
  int want = c->discarding || (room && !c->eof && !c->read_paused);
  if (want && !c->reading) {
    uv_read_start(&c->h.stream, on_client_alloc, on_client_read);
    c->reading = 1;
  } else if (!want && c->reading) {
    uv_read_stop(&c->h.stream);
    c->reading = 0;
  }
}

void pp_conn_take_plain(client *c) {
  if (!c->tls || !c->tls_plain.len) return;
  rbuf_acquire(c);
  if (c->rpos > 0) {
    memmove(c->rbuf, c->rbuf + c->rpos, c->rlen - c->rpos);
    c->rlen -= c->rpos;
    c->rpos = 0;
  }
  size_t n = PP_CLIENT_RBUF - c->rlen;
  if (n > c->tls_plain.len) n = c->tls_plain.len;
  memcpy(c->rbuf + c->rlen, c->tls_plain.data, n);
  c->rlen += n;
  pp_buf_consume(&c->tls_plain, n);
}

/* Ciphertext arrived: decrypt, send what the handshake produced, and start the session
 * ALPN chose once the handshake is done. 0 to go on, -1 if the connection is closing. */
static int tls_read(client *c, const uint8_t *data, size_t len) {
  pp_sessions *s = c->sess;
  int rc = pp_tls_conn_feed(c->tls, data, len, &c->tls_plain, &c->tls_wire);
  send_wire(c);
  if (c->closing) return -1;
  if (rc < 0) {
    pp_tls_cause cause = pp_tls_conn_cause(c->tls);
    s->core->stats.tls_failures[cause < PP_TLS_CAUSE_COUNT ? cause : 0]++;
    LOG(s, "client %s: TLS %s: %s", c->remote, pp_tls_cause_name(cause),
        c->tls->reason ? c->tls->reason : pp_tls_strerror(rc));
    pp_conn_close_graceful(c); /* after the alert OpenSSL queued, if any */
    return -1;
  }
  if (!c->tls_ready && pp_tls_conn_handshake_done(c->tls)) {
    c->tls_ready = 1;
    s->core->stats.tls_handshakes++;
    const char *alpn = pp_tls_conn_alpn(c->tls);
    if (alpn && !strcmp(alpn, "h2")) {
      s->start.h2(c, NULL, NULL, 0);
      return -1; /* the session took the plaintext already */
    }
  }
  return 0;
}

/* A listener with ,proxy=: the bytes so far are collected in rbuf (TLS: the ciphertext is
 * copied there) until the PROXY header is complete. Its client address becomes c->remote
 * (REMOTE_ADDR); what follows it goes on as the connection's own first bytes. Returns 1 when
 * the header is done and the rest was handed on, 0 when more is needed or the connection
 * was closed (missing or malformed header: counted, logged, closed without a response). */
static int proxy_read(client *c, const uint8_t *data, size_t len) {
  pp_sessions *s = c->sess;
  if (c->tls) { /* the plain case read into rbuf already */
    rbuf_acquire(c);
    if (len > PP_CLIENT_RBUF - c->rlen) len = PP_CLIENT_RBUF - c->rlen;
    memcpy(c->rbuf + c->rlen, data, len);
  }
  c->rlen += len;
  pp_proxy_info info;
  pp_proxy_rc rc = pp_proxy_parse(c->rbuf, c->rlen, c->proxy_wait, &info);
  if (rc == PP_PROXY_MORE && c->rlen < PP_CLIENT_RBUF) return 0;
  if (rc != PP_PROXY_DONE) {
    s->core->stats.proxy_rejected++;
    LOG(s, "client %s: %s on a PROXY protocol listener (%s): connection closed", c->remote,
        rc == PP_PROXY_MORE ? "PROXY header too long" : info.error, c->ls->addr.text);
    pp_conn_close(c);
    return 0;
  }
  s->core->stats.proxy_headers++;
  c->proxy_wait = 0;
  if (!info.local) snprintf(c->remote, sizeof c->remote, "%s", info.src);
  c->rpos = info.header_len;
  if (c->tls) { /* the ciphertext after the header goes to the TLS filter */
    size_t rest = c->rlen - c->rpos;
    c->rpos = c->rlen = 0;
    if (rest && tls_read(c, c->rbuf + info.header_len, rest) < 0) return 0;
  }
  return 1;
}

static void on_client_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf) {
  client *c = st->data;
  if (c->closing) return;
  if (nread < 0) {
    if (c->tls && !c->tls_ready && pp_tls_conn_cause(c->tls) == PP_TLS_CAUSE_NONE) {
      pp_tls_cause cause = pp_tls_conn_eof(c->tls); /* counted once: the cause is sticky */
      if (cause != PP_TLS_CAUSE_NONE) c->sess->core->stats.tls_failures[cause]++;
    }
    c->eof = 1;
    /* EOF or reset. With a request in flight the client has gone away: it leaves the queue,
     * or the worker gets CANCEL. (A half-close after a complete request is treated the same
     * way; HTTP clients that wait for a response do not half-close.) */
    pp_conn_close(c);
    return;
  }
  if (c->discarding || nread == 0) return;
  if (!c->t1 && !c->req && !c->h1.started && c->rpos == c->rlen) c->t1 = pp_now_ns();
  if (c->proxy_wait) {
    if (!proxy_read(c, (const uint8_t *)buf->base, (size_t)nread)) {
      if (!c->closing) pp_conn_rbuf_release(c);
      return;
    }
    c->last_progress = pp_now_ns();
    pp_conn_process(c);
  } else if (c->tls) {
    if (tls_read(c, (const uint8_t *)buf->base, (size_t)nread) < 0) return;
    c->last_progress = pp_now_ns();
    pp_conn_process(c);
  } else {
    c->rlen += (size_t)nread;
    c->last_progress = pp_now_ns();
    pp_conn_process(c);
  }
  c->tls_trimmed = 0;
  if (!c->closing) pp_conn_rbuf_release(c);
}

/* A client struct from the pool with its stream handle initialised (not yet connected). */
static client *client_new(pp_sessions *s, listener *ls) {
  client *c = s->free_clients;
  if (c) {
    s->free_clients = c->next_free;
    s->free_clients_n--;
  } else {
    c = pp_xmalloc(sizeof *c);
    memset(c, 0, sizeof *c);
    c->rbuf = no_rbuf;
  }
  uint8_t *rbuf = c->rbuf;
  pp_buf h2out = c->h2out, h2hdrs = c->h2hdrs, plain = c->tls_plain, wire = c->tls_wire;
  memset(c, 0, sizeof *c);
  c->tls_plain = plain, c->tls_plain.len = 0;
  c->tls_wire = wire, c->tls_wire.len = 0;
  c->rbuf = rbuf;
  c->h2out = h2out, c->h2out.len = 0;
  c->h2hdrs = h2hdrs, c->h2hdrs.len = 0;
  pp_queue_init(&c->streams);
  pp_queue_init(&c->h2ws);
  c->sess = s;
  c->ls = ls;
  if (ls->addr.is_unix)
    uv_pipe_init(s->loop, &c->h.pipe, 0);
  else
    uv_tcp_init(s->loop, &c->h.tcp);
  c->h.handle.data = c;
  return c;
}

/* A client whose stream could not be connected: release it through the close callbacks. */
static void client_discard(client *c) {
  c->closing = 1;
  uv_timer_init(c->sess->loop, &c->timer);
  c->timer.data = c;
  uv_close((uv_handle_t *)&c->timer, on_timer_closed);
}

/* The stream is connected: start serving it. */
static void client_start(client *c) {
  pp_sessions *s = c->sess;
  s->core->stats.connections_accepted++;
  if (!c->ls->addr.is_unix) {
    uv_tcp_nodelay(&c->h.tcp, 1);
    struct sockaddr_storage ss;
    int len = sizeof ss;
    if (uv_tcp_getpeername(&c->h.tcp, (struct sockaddr *)&ss, &len) == 0) {
      if (ss.ss_family == AF_INET)
        uv_ip4_name((struct sockaddr_in *)&ss, c->remote, sizeof c->remote);
      else
        uv_ip6_name((struct sockaddr_in6 *)&ss, c->remote, sizeof c->remote);
      /* v4-mapped addresses read as plain IPv4, as Rack apps expect */
      if (strncmp(c->remote, "::ffff:", 7) == 0 && strchr(c->remote, '.'))
        memmove(c->remote, c->remote + 7, strlen(c->remote + 7) + 1);
    }
  } else {
    strcpy(c->remote, "127.0.0.1");
  }
  uv_timer_init(s->loop, &c->timer);
  c->timer.data = c;
  c->proxy_wait = c->ls->addr.proxy;
  pp_queue_push(&s->clients, &c->link);
  s->start.h1(c);
}

/* Over -max-connections: the connection is accepted (so the kernel's backlog does not fill)
 * and refused at once: a 503 on cleartext HTTP, a plain close on TLS (no handshake spent). */
static void refuse_connection(pp_sessions *s, listener *ls, client *c) {
  s->core->stats.connections_refused++;
  uv_os_fd_t fd;
  if (!ls->tls && uv_fileno(&c->h.handle, &fd) == 0) {
    char msg[256];
    int len =
        snprintf(msg, sizeof msg,
                 "HTTP/1.1 503 Service Unavailable\r\nDate: %s\r\nContent-Type: text/plain\r\n"
                 "Content-Length: 41\r\nRetry-After: 1\r\nConnection: close\r\n\r\n"
                 "503 Service Unavailable: too many clients\n",
                 s->wall->date);
    ssize_t n = send(fd, msg, (size_t)len, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)n; /* best effort: the connection is closed either way */
    shutdown(fd, SHUT_WR);
  }
  client_discard(c);
}

void pp_conn_accept(listener *ls, int fd) {
  pp_sessions *s = ls->owner;
  /* Draining takes no new HTTP connection (it stays in the listen backlog until drain closes
   * the listener); the control app still answers (/ready says 503 draining to the balancer's
   * health check, /stats shows the drain). Drain's own backlog pass (fd >= 0) is served. */
  if (fd < 0 && *s->draining && ls->kind != LISTEN_CONTROL) return;
  client *c = client_new(s, ls);
  int rc;
  if (fd < 0)
    rc = uv_accept(&ls->h.stream, &c->h.stream);
  else
    rc = ls->addr.is_unix ? uv_pipe_open(&c->h.pipe, fd) : uv_tcp_open(&c->h.tcp, fd);
  if (rc < 0) {
    if (fd >= 0) close(fd);
    client_discard(c);
    return;
  }
  if (ls->kind == LISTEN_HTTP && s->clients.len >= s->max_connections) {
    refuse_connection(s, ls, c);
    return;
  }
  if (ls->tls) {
    c->tls = pp_xmalloc(sizeof *c->tls);
    if (pp_tls_conn_init(c->tls, &s->tls_ctx) < 0) {
      LOG_ERR(s, "TLS: cannot create a connection (out of memory in OpenSSL)");
      free(c->tls);
      c->tls = NULL;
      client_discard(c);
      return;
    }
  }
  client_start(c);
}

void pp_conn_trim_idle(pp_sessions *s, int64_t now, int64_t idle_ns) {
  for (pp_qnode *n = s->clients.head.next; n != &s->clients.head; n = n->next) {
    client *c = PP_CONTAINER_OF(n, client, link);
    if (c->closing || !c->tls || !c->tls_ready || c->tls_trimmed) continue;
    if (now - c->last_progress < idle_ns || !pp_conn_idle(c) || c->tls_plain.len || c->tls_wire.len)
      continue;
    pp_tls_conn_release_buffers(c->tls);
    c->tls_trimmed = 1;
  }
}

int pp_conn_idle(const client *c) {
  return c->proto->idle(c);
}

void pp_conn_process(client *c) {
  c->proto->process(c);
}

void pp_conn_on_written(client *c) {
  c->proto->on_written(c);
}

void pp_conn_arm_timer(client *c) {
  c->proto->arm_timer(c);
}

int pp_conn_timer_common(client *c) {
  if (c->closing) return 1;
  if (c->discarding) { /* the short read-and-discard after a graceful close is over */
    pp_conn_close(c);
    return 1;
  }
  if (c->writes_in_flight > 0) {
    LOG(c->sess, "client %s: write timeout%s", c->remote, c->h2 ? " (HTTP/2)" : "");
    c->sess->core->stats.timeouts++;
    pp_conn_close(c);
    return 1;
  }
  return 0;
}

/* /stats "tls": handshakes, failures by cause, certificate reloads. */
void pp_conn_tls_stats_json(pp_sessions *s, json_t *root) {
  pp_stats *st = &s->core->stats;
  json_t *tls = json_object();
  json_object_set_new(tls, "enabled", json_boolean(s->tls_enabled));
  json_object_set_new(tls, "handshakes", json_integer((json_int_t)st->tls_handshakes));
  json_object_set_new(tls, "incomplete", json_integer((json_int_t)st->tls_incomplete));
  json_object_set_new(tls, "reloads",
                      json_integer((json_int_t)(s->tls_enabled ? s->tls_ctx.reloads : 0)));
  json_t *fail = json_object();
  for (int i = 1; i < PP_TLS_CAUSE_COUNT; i++)
    json_object_set_new(fail, pp_tls_cause_name((pp_tls_cause)i),
                        json_integer((json_int_t)st->tls_failures[i]));
  json_object_set_new(tls, "failures", fail);
  json_object_set_new(root, "tls", tls);
}
