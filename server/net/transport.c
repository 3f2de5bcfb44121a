/* transport: listeners and the pooled write path (see transport.h). Workload: many small
 * writes (one per response, or one per worker read) on keep-alive streams; chunks of
 * PP_CHUNK_CAP are kept on a free list, so steady state does not call malloc. */
#include "server/net/transport.h"

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/base/alloc.h"
#include "server/base/log.h"

wchunk *pp_chunk_get(pp_net *n, size_t need) {
  wchunk *k;
  if (need <= PP_CHUNK_CAP && n->free_chunks) {
    k = n->free_chunks;
    n->free_chunks = k->next_free;
  } else {
    size_t cap = need > PP_CHUNK_CAP ? need : PP_CHUNK_CAP;
    k = pp_xmalloc(sizeof *k + cap);
    k->cap = cap;
    k->data = (uint8_t *)(k + 1);
  }
  k->net = n;
  k->len = 0;
  k->owner = NULL;
  return k;
}

void pp_chunk_put(pp_net *n, wchunk *k) {
  if (k->cap != PP_CHUNK_CAP) {
    free(k);
    return;
  }
  k->next_free = n->free_chunks;
  n->free_chunks = k;
}

int pp_write_or_queue(uv_stream_t *st, uv_write_t *req, uv_buf_t *bufs, unsigned n,
                      uv_write_cb cb) {
  int w = uv_try_write(st, bufs, n);
  if (w < 0 && w != UV_EAGAIN) return w;
  size_t done = w > 0 ? (size_t)w : 0;
  unsigned i = 0;
  while (i < n && done >= bufs[i].len)
    done -= bufs[i].len, i++;
  if (i == n) return 0;
  bufs[i].base += done;
  bufs[i].len -= done;
  int rc = uv_write(req, st, bufs + i, n - i, cb);
  return rc < 0 ? rc : 1;
}

int pp_chunk_send(pp_net *n, uv_stream_t *st, wchunk *k, uv_write_cb cb) {
  uv_buf_t b = uv_buf_init((char *)k->data, (unsigned)k->len);
  int rc = pp_write_or_queue(st, &k->wr, &b, 1, cb);
  if (rc <= 0) pp_chunk_put(n, k);
  return rc;
}

static void on_connection(uv_stream_t *ls_stream, int status) {
  listener *ls = ls_stream->data;
  if (status < 0) return;
  ls->on_accept(ls, -1); /* it may leave the connection in the backlog (draining) */
}

/* What a listener is and the flag that sets it, for its error messages. */
static const char *listener_what(const listener *ls) {
  return ls->kind == LISTEN_CONTROL ? "control app, -control"
         : ls->tls                  ? "HTTPS, -listen-tls"
                                    : "HTTP, -listen";
}

int pp_listener_open(pp_net *n, listener *ls, int fd, int defer) {
  int rc;
  if (fd >= 0) {
    ls->inherited = 1;
    if (ls->addr.is_unix) {
      uv_pipe_init(n->loop, &ls->h.pipe, 0);
      rc = uv_pipe_open(&ls->h.pipe, fd);
    } else {
      uv_tcp_init(n->loop, &ls->h.tcp);
      rc = uv_tcp_open(&ls->h.tcp, fd);
    }
  } else if (ls->addr.is_unix) {
    uv_pipe_init(n->loop, &ls->h.pipe, 0);
    unlink(ls->addr.path);
    rc = uv_pipe_bind(&ls->h.pipe, ls->addr.path);
  } else {
    uv_tcp_init(n->loop, &ls->h.tcp);
    struct sockaddr_storage ss;
    if (strchr(ls->addr.host, ':'))
      rc = uv_ip6_addr(ls->addr.host, ls->addr.port, (struct sockaddr_in6 *)&ss);
    else
      rc = uv_ip4_addr(ls->addr.host, ls->addr.port, (struct sockaddr_in *)&ss);
    if (rc == 0) rc = uv_tcp_bind(&ls->h.tcp, (struct sockaddr *)&ss, 0);
  }
  ls->h.handle.data = ls;
  ls->open = 1;
  ls->deferred = ls->inherited && defer;
  if (rc == 0 && !ls->deferred) rc = uv_listen(&ls->h.stream, n->cfg->backlog, on_connection);
  if (rc < 0) {
    LOG_ERR(n, "cannot listen on %s (%s): %s", ls->addr.text, listener_what(ls), uv_strerror(rc));
    return -1;
  }
  if (!ls->addr.is_unix && (ls->addr.port == 0 || ls->inherited)) {
    struct sockaddr_storage ss;
    int len = sizeof ss;
    uv_tcp_getsockname(&ls->h.tcp, (struct sockaddr *)&ss, &len);
    ls->addr.port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
  }
  snprintf(ls->addr.port_text, sizeof ls->addr.port_text, "%d",
           ls->addr.is_unix ? 80 : ls->addr.port);
  char from[64] = "";
  if (ls->inherited) snprintf(from, sizeof from, ", inherited fd %d", fd);
  LOG_ERR(n, "%s %s on %s%s%s (port %d%s)",
          ls->kind == LISTEN_CONTROL ? "control app"
          : ls->tls                  ? "HTTPS"
                                     : "HTTP",
          ls->deferred ? "will listen" : "listening", ls->addr.is_unix ? "unix:" : "",
          ls->addr.is_unix ? ls->addr.path : ls->addr.host, "", ls->addr.port, from);
  return 0;
}

void pp_listeners_accept_deferred(pp_net *n) {
  for (int i = 0; i < n->listener_count; i++) {
    listener *ls = &n->listeners[i];
    if (!ls->open || !ls->deferred) continue;
    ls->deferred = 0;
    int rc = uv_listen(&ls->h.stream, n->cfg->backlog, on_connection);
    if (rc < 0)
      LOG_ERR(n, "cannot listen on %s (%s): %s", ls->addr.text, listener_what(ls), uv_strerror(rc));
  }
}

static void on_listener_closed(uv_handle_t *h) {
  (void)h;
}

static void accept_backlog(listener *ls) {
  uv_os_fd_t fd;
  if (uv_fileno(&ls->h.handle, &fd) < 0) return;
  for (int n = 0; n < 4096; n++) {
    int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (cfd < 0) return;
    ls->on_accept(ls, cfd);
  }
}

void pp_listeners_close_control(pp_net *n) {
  for (int i = 0; i < n->listener_count; i++) {
    listener *ls = &n->listeners[i];
    if (ls->kind == LISTEN_CONTROL && ls->open) {
      if (ls->addr.is_unix) ls->h.pipe.pipe_fname = NULL; /* the new server's now: keep it */
      ls->open = 0;
      uv_close(&ls->h.handle, on_listener_closed);
    }
  }
}

void pp_listeners_close_http(pp_net *n, int keep_unix_paths) {
  for (int i = 0; i < n->listener_count; i++) {
    listener *ls = &n->listeners[i];
    if (ls->kind == LISTEN_HTTP && ls->open) {
      if (!ls->deferred) accept_backlog(ls); /* a deferred one's backlog is the old server's */
      /* libuv unlinks the path of a unix socket it bound when the handle closes; after a hot
       * restart's handover the new server listens on it, so the path must stay. */
      if (ls->addr.is_unix && keep_unix_paths) ls->h.pipe.pipe_fname = NULL;
      ls->open = 0;
      uv_close(&ls->h.handle, on_listener_closed);
    }
  }
}
