/* wsconn (session/): a WebSocket connection the server owns after the app accepted it
 * (docs/WEBSOCKET.md), independent of what carries it. It holds the connection's codec
 * session (pp_ws, proto/ws.h), its id, route, handler key and tags, and turns what the client
 * sends into events for the one queue (WS_OPEN, WS_MESSAGE, WS_CLOSE: pp_exchange entries with
 * ws_event set, dispatched like requests, finished by WS_DONE), one at a time per connection
 * and in order. What the app sends (WS_SEND, WS_TAG, WS_BROADCAST, WS_CLOSE_CONN from any worker
 * connection) arrives through pp_wshub_command. The hub (pp_wshub) is the layer's table of
 * open connections by id and of tags, and runs the timers (idle ping, close handshake).
 *
 * The transport is reached only through the pp_wsconn_io it was handed, so an HTTP/1.1
 * client stream (h1conn.c) and an HTTP/2 or HTTP/3 stream (RFC 8441 / RFC 9220 extended
 * CONNECT) plug in the same way:
 *
 *   owner                                     wsconn
 *   pp_ws_accept_parse(RESPONSE_HEAD)  ->     1: the app accepted (route, handler, tags...)
 *   writes its 101 / 200 with the fields pp_ws_handshake_response_fields gives, then
 *   pp_wsconn_open(hub, &io, t, ...)   ->     WS_OPEN queued; bytes the client sent with the
 *                                             handshake may follow at once
 *   pp_wsconn_feed(c, bytes)           ->     parsed; messages become events; pongs, echoes
 *                                             and the app's messages go out by io->write
 *   pp_wsconn_drained(c)               ->     the transport took its bytes: more may be written
 *   io->close(t)                       <-     the close handshake is over (or failed, or
 *                                             timed out): the owner closes the transport
 *   pp_wsconn_gone(c)                  ->     the transport is closed (by io->close or lost):
 *                                             the owner never touches c again
 *
 * Ownership: the owner holds c from pp_wsconn_open to pp_wsconn_gone; the hub frees c once it
 * is gone and no event of it is queued or running. io->write copies (or takes into its own
 * buffer) the bytes it is given and returns at once; io->unsent says how many of them the peer
 * has not taken yet (kernel queue, TLS, stream flow control). The codec's output is moved to
 * the transport only while io->unsent is below PP_WSCONN_WRITE_LOW, so a client that does not
 * read fills the codec's bounded output and is closed with 1008 (docs/WEBSOCKET.md
 * "Backpressure"). io->pause stops reading the client while PP_WSCONN_EVENTS_HIGH of its
 * events wait, so a fast sender meets TCP (or stream) flow control instead of growing the
 * queue. No callback of io is called from inside pp_wsconn_feed's caller's own io call. */
#ifndef PP_WSCONN_H
#define PP_WSCONN_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "server/base/buf.h"
#include "server/base/config.h"
#include "server/base/hash.h"
#include "server/base/queue.h"
#include "server/core/core.h"
#include "server/exchange/exchange.h"
#include "server/proto/stats.h"
#include "server/proto/wire.h"
#include "server/proto/ws.h"

#define PP_WSCONN_WRITE_LOW   (64u << 10) /* move codec output to the transport below this */
#define PP_WSCONN_EVENTS_HIGH 8           /* stop reading the client with this many waiting */
#define PP_WS_HANDLER_MAX     255         /* puma-plus-websocket-handler, bytes */

typedef struct pp_wsconn pp_wsconn;
typedef struct pp_wshub pp_wshub;

/* How a wsconn reaches its transport; `t` is the owner's (the client, the stream). */
typedef struct pp_wsconn_io {
  /* Takes n bytes for the peer (copied or buffered by the transport). 0, or < 0: the
   * transport is gone (the owner calls pp_wsconn_gone, maybe later). */
  int (*write)(void *t, const uint8_t *p, size_t n);
  /* Bytes given to write that the peer has not taken yet. */
  size_t (*unsent)(void *t);
  /* Stop (1) or resume (0) reading the peer. */
  void (*pause)(void *t, int pause);
  /* Close the transport once what was written is out (HTTP/1.1: the server closes TCP first,
   * RFC 6455 §7.1.1; a stream: end it). The owner calls pp_wsconn_gone when it is closed. */
  void (*close)(void *t);
} pp_wsconn_io;

/* What the app's response to an upgrade said (pp_ws_accept_parse): pointers into the
 * RESPONSE_HEAD frame, valid while it is. */
typedef struct pp_ws_accept {
  uint8_t route; /* PP_WIRE_WS_ROUTE_* */
  const uint8_t *handler;
  size_t handler_len;
  const uint8_t *protocol; /* sec-websocket-protocol the app chose, or NULL */
  size_t protocol_len;
  uint32_t ntags;
} pp_ws_accept;

/* The app's response head f to a valid WebSocket upgrade request: 1 it accepts (status 101
 * with puma-plus-websocket: sticky | flexible; *a filled), 0 it refuses (any other status:
 * the response goes out as it is), -1 it cannot be served (a 101 without puma-plus-websocket
 * or with another value, a handler over 255 bytes, a second puma-plus-websocket field, a
 * sec-websocket-protocol the client did not offer: offered is the client's
 * Sec-WebSocket-Protocol list, comma-separated): the server answers 500. *why says why for
 * the log. */
int pp_ws_accept_parse(const pp_wire_frame *f, const char *offered, size_t offered_len,
                       pp_ws_accept *a, const char **why);
/* 1 if field name (any case) is one pp_ws_accept_parse consumes (puma-plus-websocket*), or
 * one the server writes itself in a 101 (upgrade, connection, sec-websocket-accept,
 * sec-websocket-extensions, sec-websocket-protocol, content-length, transfer-encoding): the
 * owner leaves them out of the 101 it writes from the app's fields. */
int pp_ws_accept_skips_field(const uint8_t *name, size_t len);

/* The hub: the session layer's WebSockets (struct pp_sessions holds one). */
struct pp_wshub {
  pp_ws_limits limits;
  pp_ws_pmd_config pmd;
  uint64_t ping_interval_ns; /* an idle connection is pinged after this (0: never) */
  uint64_t close_timeout_ns; /* the peer's Close is awaited this long, then TCP closes */
  uint64_t max_output_total; /* -ws-max-output-total: past it, 1013 (0: no limit) */
  uint64_t output_total;     /* codec output held for all connections (sum of pp_ws_pending) */
  uint64_t next_conn_id;
  pp_htable ids;  /* open connections by id (pp_wsconn.id_node; the id is the hash) */
  pp_htable tags; /* tag -> its subscriptions (struct pp_wstag); each connection lists its own */
  pp_queue conns; /* every connection not yet freed (the timer's walk) */
  uv_timer_t timer;
  int timer_on;
  int timer_ready; /* uv_timer_init done (at the first connection) */
  /* Handed in at set-up (pp_wshub_init). */
  uv_loop_t *loop;
  const pp_config *cfg;
  pp_core *core; /* the queue, event ids, and the counters (core->stats.ws) */
  pp_exchange_pool *xpool;
};

/* One connection's subscription to a tag, with its envelope (WS_TAG prefix and suffix). */
typedef struct pp_wssub pp_wssub;
struct pp_wssub {
  pp_wssub *tprev, *tnext; /* in its tag */
  pp_wssub *cnext;         /* in its connection's list */
  struct pp_wstag *tag;
  pp_wsconn *conn;
  uint32_t prefix_len, suffix_len;
  uint8_t env[]; /* prefix, then suffix */
};

struct pp_wsconn {
  pp_wshub *hub;
  uint64_t id;
  pp_hnode id_node; /* in hub->ids while open */
  pp_qnode link;    /* in hub->conns */
  const pp_wsconn_io *io;
  void *t;
  pp_ws ws;
  uint8_t route;
  uint32_t sticky_pid;    /* the accepting worker (sticky) */
  const uint8_t *handler; /* the app's handler key: the bytes after the struct, or NULL */
  uint8_t handler_len;
  pp_wssub *subs;           /* its tags */
  pp_exchange *running;     /* the event queued or running (one at a time) */
  pp_queue pending;         /* events waiting for it (pp_exchange.wslink) */
  int paused;               /* reading the client is paused (too many events waiting) */
  int gone;                 /* pp_wsconn_gone was called: the transport is closed */
  int close_asked;          /* io->close was called */
  int close_event;          /* WS_CLOSE was queued (or must never be: sticky worker gone) */
  int close_by, close_code; /* who closed (PP_WIRE_WS_BY_*, -1: nobody yet) and the code */
  int64_t last_in_ns;       /* the last bytes from the client */
  int64_t ping_sent_ns;     /* an unanswered ping, or 0 */
  int64_t close_deadline_ns;
  size_t output_counted; /* its part of hub->output_total */
};

void pp_wshub_init(pp_wshub *h, uv_loop_t *loop, const pp_config *cfg, pp_core *core,
                   pp_exchange_pool *xpool);
/* Closes every connection with 1001 (going away): the server stops. */
void pp_wshub_shutdown(pp_wshub *h);

/* The app accepted (a) the upgrade request x (still running on its worker: the response
 * head `head` is being handled): a connection over io/t with its codec (permessage-deflate
 * with pmd, or NULL: none), tagged with head's puma-plus-websocket-tags, sticky to x's worker
 * when a->route is sticky, and its WS_OPEN queued with x's env pairs (as its REQUEST carried
 * them). NULL when the codec could not start (zlib): the owner answers 500. */
pp_wsconn *pp_wsconn_open(pp_wshub *h, const pp_wsconn_io *io, void *t, const pp_ws_accept *a,
                          const pp_wire_frame *head, const pp_exchange *x,
                          const pp_ws_pmd_params *pmd);
void pp_wsconn_feed(pp_wsconn *c, const uint8_t *p, size_t n);
void pp_wsconn_drained(pp_wsconn *c);
void pp_wsconn_gone(pp_wsconn *c);

/* A WebSocket command from a worker (workers.h ws_command): NULL, or why it is malformed. */
const char *pp_wshub_command(void *hub, const pp_wire_frame *f);
/* Worker pid is gone: its sticky connections close with 1012, no WS_CLOSE for them. */
void pp_wshub_worker_gone(pp_wshub *h, uint32_t pid);

/* Tag table pieces, exposed for the unit test (server/tests/session/test_wsconn.c). */
int pp_wshub_tag(pp_wshub *h, pp_wsconn *c, int op, const uint8_t *tag, size_t tag_len,
                 const uint8_t *prefix, size_t prefix_len, const uint8_t *suffix,
                 size_t suffix_len);
/* Subscribers of tag (0 if none). */
uint32_t pp_wshub_tag_count(const pp_wshub *h, const uint8_t *tag, size_t len);
pp_wsconn *pp_wshub_find(const pp_wshub *h, uint64_t id);

#endif
