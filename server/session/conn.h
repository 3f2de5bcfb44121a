/* conn (session/): one client stream connection (TCP or unix, TLS filter optional) and the
 * protocol glue on it: the read buffer, the pooled output chunks, the timers, the h1 parser
 * (http1.h) and the one exchange an HTTP/1.1 connection carries at a time, or the HTTP/2
 * session and its streams. conn.c holds the stream part (accept, read, write, close) and
 * calls the protocol through c->proto; h1conn.c and h2conn.c are the protocol parts (parse
 * loop, timeouts, responses) and set c->proto. conn.c names no function of theirs: it starts
 * a protocol through the starters it was handed (pp_session_starters, pp_sessions_init).
 *
 * Pipelined bytes wait unparsed in rbuf while an exchange is in flight, so responses go out
 * in order. The client struct is pooled with its read buffer. */
#ifndef PP_CONN_H
#define PP_CONN_H

#include <jansson.h>
#include <stdint.h>
#include <uv.h>

#include "server/proto/env.h"
#include "server/exchange/exchange.h"
#include "server/core/exchange_owner.h"
#include "server/proto/http1.h"
#include "server/proto/tls.h"
#include "server/base/config.h"
#include "server/base/hooks.h"
#include "server/base/wallclock.h"
#include "server/core/core.h"
#include "server/base/queue.h"
#include "server/net/transport.h"
#include "server/session/wsconn.h"

#define PP_CLIENT_RBUF      16384 /* per-client read buffer */
#define PP_FREE_CLIENTS_MAX 1024  /* closed client structs kept for reuse */

typedef struct client client;
typedef struct pp_sessions pp_sessions;

/* How conn.c starts the protocol on a connection, handed in by the layer that sets the
 * sessions up (process/server.c: pp_h1conn_start and pp_h2conn_start below), so the stream
 * part calls the protocol parts only through what it was handed. */
typedef struct pp_session_starters {
  /* A connection was accepted: start HTTP/1.1 on it. */
  void (*h1)(client *c);
  /* TLS chose ALPN h2: switch c to HTTP/2 (upgraded NULL here); 0, or -1 (c is closed). */
  int (*h2)(client *c, pp_exchange *upgraded, const uint8_t *settings, size_t len);
} pp_session_starters;

/* The protocol on a client connection, set by the session glue that owns it (h1conn.c at
 * start, h2conn.c when the connection switches to HTTP/2): conn.c calls the stream's events
 * through it and never asks which protocol it is. */
typedef struct pp_client_proto {
  /* Bytes arrived in rbuf, or the connection may go on (parse as far as allowed). */
  void (*process)(client *c);
  /* A write finished; writes_in_flight and write_bytes are already updated. */
  void (*on_written)(client *c);
  /* (Re)arms the connection's timer for its current state. */
  void (*arm_timer)(client *c);
  /* No request in flight, no partial request and nothing being written. */
  int (*idle)(const client *c);
  /* Closing (after conn.c abandoned c->req): abandons the exchanges the session holds. May be NULL.
   */
  void (*abandon)(client *c);
  /* The handle closed: frees the session. May be NULL. */
  void (*dispose)(client *c);
} pp_client_proto;

struct client {
  union {
    uv_tcp_t tcp;
    uv_pipe_t pipe;
    uv_handle_t handle;
    uv_stream_t stream;
  } h;
  client *next_free;
  pp_qnode link;     /* in sess->clients */
  pp_sessions *sess; /* the session layer's context */
  listener *ls;
  const pp_client_proto *proto; /* NULL until the session glue starts */
  pp_h1 h1;
  uint8_t *rbuf;
  size_t rlen, rpos;
  uv_timer_t timer;
  uv_shutdown_t shutdown_req;
  pp_exchange *req;
  wchunk *out;
  int writes_in_flight;
  size_t write_bytes; /* bytes queued to the kernel and not yet written */
  int parser_paused, reading, closing, close_after_write, discarding, response_done;
  uint32_t requests_served; /* requests begun on this connection (-max-keep-alive) */
  int eof;
  int in_parse; /* inside pp_h1_execute: never re-enter the parser */
  int hijacked; /* its descriptor went to a worker (full hijack); detached once sent */
  /* The response went out before the request's body had all arrived (a streamed upload the
   * app did not read): the rest of the body is read and dropped, then keep-alive goes on. */
  int discard_body;
  int discard_done; /* that body ended inside the parser: resume it after pp_h1_execute */
  int64_t t1;
  int64_t last_progress;
  char remote[64];
  unsigned proxy_wait; /* the PROXY versions still expected before the first byte (0: none) */
  /* HTTP/2 (h2conn.c): the session once the connection switched to it, its exchanges,
   * and scratch buffers kept for the connection's life. */
  struct pp_h2 *h2;
  struct pp_h2_stats *h2_seen; /* the session's counters already added to the server's */
  pp_queue streams;
  pp_queue h2ws; /* its WebSocket tunnels (RFC 8441; pp_h2h3_ws.link, h2h3.h) */
  pp_buf h2out, h2hdrs;
  int h2c_upgrade;         /* the current h1 request asked for Upgrade: h2c and may switch */
  int read_paused;         /* h2: the client does not read our output, so we stop reading it */
  struct pp_tls_conn *tls; /* the TLS filter of a -listen-tls connection, else NULL */
  pp_buf tls_plain;        /* decrypted bytes not yet moved into rbuf */
  pp_buf tls_wire;         /* ciphertext waiting to be written */
  int tls_ready;           /* the handshake completed and was counted */
  int tls_trimmed;         /* idle: OpenSSL's record buffers were given back (pp_conn_trim_idle) */
  /* A GET /stats/stream subscriber (dashboard.c) once its response head is out: seconds
   * without a write before a heartbeat comment (0: not a subscriber), and the last write. */
  uint32_t sse_heartbeat_s;
  int64_t sse_last_write_ns;
  const struct pp_sse_ops *sse_ops; /* how dashboard.c writes to it (h1conn.c's) */
  /* WebSockets (h1conn.c): the checked handshake of the request being served, when it asked
   * for Upgrade: websocket; the connection once the app accepted it (then c->proto is the
   * WebSocket one after the upgrade's RESPONSE_END). */
  struct pp_h1ws *ws_hs;
  pp_wsconn *wsc;
};

#define PP_TLS_READ_BUF 65536 /* ciphertext read at once (decrypted before the next read) */

/* The session layer's own context: the client connections and their pools, the HTTP/1.1
 * limits, TLS and the HTTP/3 listeners. struct server holds one (s->sess). */
struct pp_sessions {
  pp_h1_limits limits;
  pp_queue clients;
  uint32_t max_connections; /* client connections open at most (-max-connections) */
  client *free_clients;
  uint32_t free_clients_n; /* at most PP_FREE_CLIENTS_MAX kept: a spike's structs are freed */
  uint64_t freed_bytes_since_trim; /* freed beyond the pools since the last malloc_trim */
  /* Read buffers of connections that have no unparsed bytes (conn.c): an idle keep-alive
   * connection holds none, a busy one takes one from here when bytes arrive. */
  uint8_t *rbuf_pool[64];
  int rbuf_pool_n;
  char alt_svc[64]; /* the Alt-Svc value while an HTTP/3 listener is open, else "" */
  struct pp_h3_listener *h3[PP_MAX_LISTEN]; /* -listen-h3 (h3conn.c) */
  int h3_count;
  pp_tls_ctx tls_ctx; /* for -listen-tls (tls_enabled) */
  int tls_enabled;
  uint8_t tls_rbuf[PP_TLS_READ_BUF];
  /* Handed in at set-up (pp_sessions_init): the lower layers' contexts, and what the session
   * reads of the process above it. */
  uv_loop_t *loop;
  const pp_config *cfg;
  pp_net *net;
  pp_exchange_pool *xpool;
  pp_core *core;
  const pp_hooks *hooks;     /* drain_progress */
  const int *draining;       /* the process is draining: no keep-alive, GOAWAY */
  server *srv;               /* handed to the hooks and the local app; never read here */
  const pp_wallclock *wall;  /* the Date value (base/wallclock.h), kept by the process layer */
  pp_wshub wshub;            /* WebSockets owned by the server (wsconn.h, pp_wshub_init) */
  pp_session_starters start; /* the protocols' starters */
};

/* Sets up s's lists and what it is handed (conn.c); start: both starters, copied. s->wshub is
 * set up by the caller (pp_wshub_init). */
void pp_sessions_init(pp_sessions *s, server *srv, uv_loop_t *loop, const pp_config *cfg,
                      pp_net *net, pp_exchange_pool *xpool, pp_core *core, const pp_hooks *hooks,
                      const int *draining, const pp_session_starters *start);

/* conn.c: the stream. */

/* A new connection on ls: accepted from the listener (fd < 0) or an already accepted
 * descriptor (drain's backlog). */
void pp_conn_accept(listener *ls, int fd);
/* Appends to the pending output chunk (flushed by pp_conn_flush). */
void pp_conn_out(client *c, const void *data, size_t len);
void pp_conn_outf(client *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Hands the pending output to the kernel. */
void pp_conn_flush(client *c);
/* Closes at once; an exchange in flight is abandoned. */
void pp_conn_close(client *c);
/* Half-closes, then reads and discards briefly so the peer reads the response first. */
void pp_conn_close_graceful(client *c);
/* Full hijack: c's descriptor now belongs to a worker. Gives up the handle without a
 * shutdown (closing our copy of the descriptor sends nothing to the peer) and returns c to
 * the pool. c must already be off sess->clients and marked closing. */
void pp_conn_detach(client *c);
/* Starts or stops reading as the read buffer and state allow. */
void pp_conn_update_reading(client *c);
/* The timer cases every protocol shares: closing, the discard after a graceful close is
 * over, a write stalled past -write-timeout. 1 if the connection was (or is being) closed. */
int pp_conn_timer_common(client *c);
/* An HTTP connection with no request, no partial request and nothing being written. */
int pp_conn_idle(const client *c);

/* Gives the read buffer back to the server's pool when every byte in it was parsed (an idle
 * connection holds no buffer; the next read takes one). */
void pp_conn_rbuf_release(client *c);

/* Every controller tick: TLS connections idle for at least idle_ns give OpenSSL's record
 * buffers back (about 34 KiB each). */
void pp_conn_trim_idle(pp_sessions *s, int64_t now, int64_t idle_ns);

/* TLS: moves decrypted bytes into rbuf as far as it has room (no-op without TLS). */
void pp_conn_take_plain(client *c);

/* The stream's events, through c->proto. */
void pp_conn_process(client *c);
void pp_conn_on_written(client *c);
void pp_conn_arm_timer(client *c);

/* h1conn.c: HTTP/1.1 on the stream. */

/* The stream is connected: start the h1 session (c->proto is HTTP/1.1's). */
void pp_h1conn_start(client *c);

/* h2conn.c: HTTP/2 on the stream (prior knowledge, h2c Upgrade, or ALPN h2). */

/* Switches c to HTTP/2 (c->proto is HTTP/2's). upgraded: the h1 exchange that asked for
 * Upgrade: h2c (it becomes stream 1; settings is its HTTP2-Settings value), or NULL. 0, or -1
 * (c is closed). */
int pp_h2conn_start(client *c, pp_exchange *upgraded, const uint8_t *settings, size_t len);
/* Drain: GOAWAY, in-flight streams finish. */
void pp_h2conn_drain(client *c);

/* /stats parts (ops/stats.c puts them in order): "tls" (conn.c), "http2" (h2conn.c). */
void pp_conn_tls_stats_json(pp_sessions *s, json_t *root);
void pp_h2conn_stats_json(pp_sessions *s, json_t *root);

#endif
