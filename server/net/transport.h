/* transport (net/, the layer under the workers and the sessions): the listeners (TCP and unix
 * stream sockets) and the write path every stream shares: pooled write chunks and
 * write_or_queue. A listener hands each new connection to the callback its owner set
 * (process/server.c: session/conn.c's pp_conn_accept); the QUIC listeners are the HTTP/3
 * glue's (session/h3conn.c). Nothing in this layer knows HTTP. */
#ifndef PP_TRANSPORT_H
#define PP_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "server/base/config.h"

#define PP_CHUNK_CAP 65536 /* pooled write chunk */

typedef struct server server;

typedef enum listener_kind { LISTEN_HTTP, LISTEN_CONTROL } listener_kind;

typedef struct listener listener;
/* A new connection on ls: fd < 0, take it with uv_accept from ls; else an already accepted
 * descriptor (drain's backlog). Owns fd from then on. */
typedef void (*pp_accept_cb)(listener *ls, int fd);

struct listener {
  union {
    uv_tcp_t tcp;
    uv_pipe_t pipe;
    uv_handle_t handle;
    uv_stream_t stream;
  } h;
  void *owner; /* the owner's context (process/server.c sets it: the sessions'), never read here */
  listener_kind kind;
  pp_addr addr;
  int open;
  int tls;       /* HTTPS: each connection gets a TLS filter (-listen-tls) */
  char name[24]; /* "listen.N", "listen-tls.N" or "control": its LISTEN_FDNAMES name */
  int inherited; /* the socket came from LISTEN_FDS (systemd or a hot restart): never unlinked */
  int deferred;  /* inherited by a hot-restart child: uv_listen once the workers are ready */
  pp_accept_cb on_accept; /* set by the owner before pp_listener_open */
  /* Requests on this listener are answered by this app in the server (the control app on
   * -control, session/local_app.h), set by the owner; NULL: they go to the workers. */
  const struct pp_local_app *local_app;
};

/* A pooled write buffer with its uv_write_t. `owner` is the stream's object (a client or a
 * worker connection); the write callback finds it there. */
typedef struct wchunk {
  uv_write_t wr;
  struct wchunk *next_free;
  struct pp_net *net; /* the pool it goes back to */
  void *owner;
  size_t len, cap;
  uint8_t *data;
} wchunk;

/* The net layer's own context: its listeners and its pool of write chunks. struct server
 * holds one (s->net); the layer reads nothing else of the server. */
typedef struct pp_net {
  uv_loop_t *loop;
  const pp_config *cfg;                      /* -backlog; -quiet (LOG) */
  listener listeners[2 * PP_MAX_LISTEN + 1]; /* -listen, -listen-tls, -control */
  int listener_count;
  wchunk *free_chunks;
} pp_net;

/* A chunk of at least `need` bytes (PP_CHUNK_CAP when need is 0 or smaller): pooled when it
 * has the standard size, else allocated for this one use. */
wchunk *pp_chunk_get(pp_net *n, size_t need);
void pp_chunk_put(pp_net *n, wchunk *k);

/* Writes bufs at once when the kernel takes them all (returns 0: no callback will fire, no
 * epoll change), else queues what is left with uv_write (returns 1: cb fires later).
 * uv_try_write refuses while earlier writes are queued, so order is kept. <0 on error. */
int pp_write_or_queue(uv_stream_t *st, uv_write_t *req, uv_buf_t *bufs, unsigned n, uv_write_cb cb);

/* Sends one chunk on st, returning it to the pool when the kernel took it at once.
 * Returns what pp_write_or_queue returned. */
int pp_chunk_send(pp_net *n, uv_stream_t *st, wchunk *k, uv_write_cb cb);

/* Binds and listens (logs and returns -1 on failure); port 0 is replaced by the bound one.
 * fd >= 0: an inherited socket (systemd or a hot restart) to use instead of binding; with
 * defer (a hot-restart child) listening on it waits for pp_listeners_accept_deferred. New
 * connections go to ls->on_accept. */
int pp_listener_open(pp_net *n, listener *ls, int fd, int defer);

/* Starts accepting on the listeners pp_listener_open deferred. */
void pp_listeners_accept_deferred(pp_net *n);

/* Closes the control app's listener after a hot restart's handover (the new server has it; a
 * unix socket path is left in place). */
void pp_listeners_close_control(pp_net *n);

/* Drain: takes every connection the kernel already completed (the listen backlog), then
 * closes each HTTP listener, so a client that connected before SIGTERM is served.
 * keep_unix_paths: the sockets were handed to a new server (hot restart), leave their paths. */
void pp_listeners_close_http(pp_net *n, int keep_unix_paths);

#endif
