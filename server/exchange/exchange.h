/* The exchange: one request and its response, the protocol-neutral handle that everything
 * above the sessions sees (DESIGN.md section 3a). A session's glue (h1 today; h2 and h3 use
 * the same calls) creates an exchange when a request's header section is complete, fills the
 * env pairs, hands body bytes down and learns about the response through the callbacks in
 * pp_exchange_ops. Dispatch and the worker link never learn which protocol it was.
 *
 * The contract, in the order things happen:
 *   pp_exchange_get         the owner (session glue) takes one from the pool: t1, t2 set by it
 *   pp_exchange_env_begin   REQUEST prefix; the owner appends env pairs (pp_env_put_pair ...)
 *   pp_exchange_env_end     closes the env (puma_plus.queue_ns is appended at dispatch)
 *   pp_exchange_body_in     body bytes: in memory up to PP_BODY_BUFFER_LIMIT, then spooled
 *                           to an unlinked file (spool.h); with -body-stream, streamed
 *   pp_exchange_body_done   the request body ended (or there was none): runnable at the latest
 *   ... queued (T2b), dispatched to a worker connection (T3) ...
 *   ops->head / body / end  the worker's RESPONSE_HEAD / RESPONSE_BODY / RESPONSE_END
 *   ops->flush              once per read from the worker: write out what the frames produced
 *   ops->fail               the worker connection died while running it (502), or admission
 *                           shed it at dequeue (503): the owner answers with that status
 *   pp_exchange_release     the owner is done with it (its response flushed, T6)
 *   pp_exchange_abandon     instead, the client went away: it leaves the queue, or its
 *                           worker gets CANCEL; dispatch frees it when the worker answers
 *   ops->hijack             instead, the worker asked for the client's socket (HIJACK): the
 *                           owner hands it over (HIJACKED + SCM_RIGHTS) and lets go of x
 *                           (owner NULL); the exchange ends at RESPONSE_END as "hijacked"
 *
 * Ownership: the owner holds the exchange from pp_exchange_get until release or abandon;
 * while it is queued or running, dispatch holds a reference too (x->w, the queue link), and
 * the memory is returned to the pool only when neither holds it and no write still points at
 * its buffers. After abandon, x->owner is NULL and no callback fires again.
 *
 * Backpressure both ways: ops->flush returns the bytes the client has not yet taken, and the
 * worker link stops reading that worker above PP_CLIENT_WRITE_HIGH (resumed by
 * pp_exchange_client_drained). A streamed upload is read from the client only while
 * pp_exchange_can_take_body() says the worker socket has room; ops->body_writable tells the
 * owner when it has room again.
 *
 * Bodies are read whole before the request is runnable (T2b = the body's end), so a slow
 * upload never holds a slot: up to PP_BODY_BUFFER_LIMIT in memory, a larger one (or any one
 * once the memory budget below is reached) in a spool file whose descriptor the REQUEST
 * carries (PP_WIRE_FLAG_BODY_FILE). Spool files count against -max-spool-total from their
 * first byte (a known Content-Length is reserved whole) until the exchange is released;
 * beyond it the request is refused, 413 for one body larger than the whole budget and 503
 * otherwise, through ops->fail from the loop (never from inside the owner's call).
 *
 * The aggregate memory budget: bodies buffered in memory count against
 * -max-buffered-body-total; beyond it a body goes to its spool file. With -body-stream (the
 * old path) a body over PP_BODY_BUFFER_LIMIT streams to its worker in BODY frames instead:
 * beyond the budget an upload that has not started buffering waits unread
 * (pp_exchange_can_take_body is 0; body_writable when room frees), and one that was already
 * buffering goes to the queue with what it has and streams the rest (so the bytes held are
 * always on their way to a worker, and the wait cannot deadlock). */
#ifndef PP_EXCHANGE_H
#define PP_EXCHANGE_H

#include <stdint.h>
#include <uv.h>

#include "server/base/buf.h"
#include "server/base/config.h"
#include "server/base/hooks.h"
#include "server/base/queue.h"
#include "server/proto/wire.h"

#define PP_BODY_BUFFER_LIMIT  (1u << 20)   /* bodies up to 1 MiB are buffered before T2b */
#define PP_CLIENT_WRITE_HIGH  (1u << 20)   /* stop reading the worker above this */
#define PP_CLIENT_WRITE_LOW   (256u << 10) /* resume below this */
#define PP_WORKER_WRITE_HIGH  (1u << 20)   /* stop reading a streaming client above this */
#define PP_EXCHANGE_KEEP_BODY (64u << 10)  /* a pooled exchange keeps a body buffer up to this */

typedef struct server server;
typedef struct pp_exchange_pool pp_exchange_pool;
typedef struct wconn wconn;
typedef struct pp_exchange pp_exchange;

typedef enum pp_exchange_state {
  PP_X_BODY = 1,  /* headers parsed, body arriving (not yet runnable) */
  PP_X_QUEUED,    /* runnable, in the queue */
  PP_X_RUNNING,   /* dispatched to a worker connection */
  PP_X_RESPONDED, /* RESPONSE_END received (or answered locally); bytes may still be flushing */
  PP_X_LOCAL,     /* answered by the server itself (control app), never queued */
} pp_exchange_state;

/* The owner's side of the contract. Each is called from the worker link's read callback,
 * never from inside the owner's own calls into the exchange. */
typedef struct pp_exchange_ops {
  void (*head)(pp_exchange *x, const pp_wire_frame *f);          /* RESPONSE_HEAD */
  void (*body)(pp_exchange *x, const uint8_t *data, size_t len); /* RESPONSE_BODY */
  void (*end)(pp_exchange *x);                                   /* RESPONSE_END */
  /* The server answers instead of the app: status (502 the worker died, 503 shed at
   * dequeue) with a short text; if the head already went out, the response is cut. */
  void (*fail)(pp_exchange *x, int status, const char *msg);
  size_t (*flush)(pp_exchange *x); /* returns bytes not yet taken by the client */
  void (*body_writable)(pp_exchange *x);
  /* The worker sent HIJACK (full hijack, HTTP/1.1 only; NULL where the protocol cannot): the
   * owner stops reading its client, flushes what it had written, and hands the descriptor
   * over with pp_wlink_hijacked (at once or once the flush completed), or answers
   * PP_WIRE_HIJACK_REFUSED. Once handed over, x->owner is NULL. */
  void (*hijack)(pp_exchange *x);
  /* The worker sent EARLY_HINTS (before RESPONSE_HEAD, on a request dispatched with the
   * REQUEST flag EARLY_HINTS; NULL: never offered): the owner writes a 103 with f->pairs. */
  void (*early_hints)(pp_exchange *x, const pp_wire_frame *f);
} pp_exchange_ops;

struct pp_exchange {
  pp_qnode qlink; /* in the queue while PP_X_QUEUED */
  pp_exchange *next_free;
  server *srv;            /* the pool's srv */
  pp_exchange_pool *pool; /* the pool it came from */
  uint64_t id;
  pp_exchange_state state;
  const pp_exchange_ops *ops;
  void *owner; /* the session glue's connection or stream; NULL once abandoned */
  wconn *w;    /* while running */
  int streaming, body_done, head_method, cancelled, head_sent;
  int hijackable;  /* REQUEST carries PP_WIRE_FLAG_HIJACKABLE (h1 without TLS) */
  int early_hints; /* REQUEST carries PP_WIRE_FLAG_EARLY_HINTS (-early-hints, not HTTP/1.0) */
  int hijack_seen; /* the worker sent HIJACK (at most once) */
  int hijack_wait; /* h1: handing over once the client's pending writes are done */
  int64_t t1, t2, t2b, t3; /* first byte, headers, runnable, dispatched */
  int64_t content_length;  /* the request's, or -1 (unknown: chunked, h2/h3 without one) */
  /* The spool file (spool.h): its descriptor while the body is written to it (spooling), a
   * libuv handle around it while the REQUEST carrying it is written (spool_pipe), the bytes
   * counted against -max-spool-total (spool_reserved), and the status a refused body is
   * answered with once the loop comes round (refuse_status, in the core's refusals). */
  int spooling, spool_fd;
  uv_pipe_t *spool_pipe;
  uint64_t spooled, spool_reserved;
  int refuse_status;
  pp_qnode rlink;
  pp_buf head; /* REQUEST frame up to and including the queue_ns key */
  size_t queue_key_end;
  int add_request_start; /* dispatch appends HTTP_X_REQUEST_START (t= T2b in us since the epoch) */
  pp_buf body;           /* [u32 length][body bytes] */
  uv_write_t wreq;       /* the REQUEST write */
  int writes;            /* REQUEST writes in flight referencing head/body */
  int release_pending;   /* free when writes reaches 0 */
  uint8_t len_zero[4];
  char queue_digits[24];
  /* Session-private response state (the exchange layer never reads these). */
  int keep_alive, msg_complete, resp_chunked, resp_no_body, resp_close;
  int local_status;         /* h1: answered by the server itself with this status (shed) */
  int64_t stream_id;        /* h2, h3: the stream */
  pp_buf resp_overflow;     /* h3: response bytes the session could not take yet ... */
  size_t resp_overflow_off; /* ... of which this many were handed over since (h3conn.c) */
  int end_pending;          /* h3: RESPONSE_END came while resp_overflow held bytes */
  pp_qnode olink;           /* h2: in the connection's list of streams */
  uint64_t body_unconsumed; /* h2: request-body bytes not yet released to flow control */
  uint64_t budgeted;        /* body bytes counted in the server's buffered-body total */
  pp_qnode blink;           /* in the pool's body_waiters while its upload waits for the budget */
  /* For the access log (hooks.request_done), set by whoever knows them: */
  int status;          /* the status sent (the session); 0: none yet */
  uint64_t resp_bytes; /* response body bytes handed to the connection (the session) */
  int64_t service_ns;  /* the worker's service time (the worker link); 0 also when none */
  int32_t worker;      /* the worker index + 1 that served it (the worker link); 0: none */
  int logged;          /* hooks.request_done was called for it (or the session logged it) */
  /* A WebSocket event (WS_OPEN, WS_MESSAGE, WS_CLOSE; session/wsconn.c) rather than a request:
   * `head` holds the whole frame, whose t_ready_ns and t3_ns dispatch fills in; the worker
   * answers WS_DONE (ops->end). sticky_pid: only a slot of that worker may take it (0: any). */
  int ws_event;
  uint32_t sticky_pid;
  pp_runlink run;  /* in the core's run lists while PP_X_QUEUED (base/queue.h pp_runq) */
  pp_qnode wslink; /* in its connection's list of events not yet queued */
};

/* The exchange layer's own context: the pool of free exchanges, the count of live ones, and
 * the aggregate body budget (-max-buffered-body-total). struct server holds one (s->xpool). */
struct pp_exchange_pool {
  const pp_config *cfg; /* -max-buffered-body-total */
  server *srv;          /* handed back in each exchange's x->srv; never read here */
  void *up; /* the context of the layer that drives the exchanges (core/'s), never read here */
  const pp_hooks *hooks; /* request_done (the access log), handed in by the process; or NULL */
  pp_exchange *free_exchanges;
  uint64_t body_buffered; /* request-body bytes buffered before dispatch, all exchanges */
  pp_queue body_waiters;  /* exchanges whose uploads wait for -max-buffered-body-total */
  uint32_t live_requests; /* requests allocated (any state) */
  uint64_t spool_bytes;   /* bytes of spool files counted against -max-spool-total, now */
  pp_queue refusals;      /* exchanges refused by the spool budget, to be answered (rlink) */
  uint64_t spooled_bodies, spool_refused_413, spool_refused_503, spool_errors; /* counters */
  /* responses by status class, every protocol's (pp_exchange_count_status) */
  uint64_t status_1xx, status_2xx, status_3xx, status_4xx, status_5xx;
};

/* Sets up an empty pool: cfg for the body budget, srv handed back in x->srv. */
void pp_exchange_pool_init(pp_exchange_pool *p, const pp_config *cfg, server *srv);

/* A cleared exchange from the pool (its buffers kept), owned by `owner` with `ops`. */
pp_exchange *pp_exchange_get(pp_exchange_pool *p, const pp_exchange_ops *ops, void *owner);

/* Returns x to the pool once no write references its buffers. The owner calls it when the
 * response is flushed (or the exchange never reached dispatch). */
void pp_exchange_release(pp_exchange_pool *p, pp_exchange *x);

/* Hands x's access-log record to hooks.request_done (when one is set and x was not logged
 * yet); pp_exchange_release calls it. A session that answered x itself before its env was
 * built logs it with its own record instead and sets x->logged. */
void pp_exchange_log(pp_exchange_pool *p, pp_exchange *x);

/* The aggregate body budget (-max-buffered-body-total): x's buffered bytes leave the server's
 * total (at dispatch, or when x ends), and uploads that waited for room resume. */
void pp_exchange_unbudget(pp_exchange *x);

/* x's spool file leaves -max-spool-total and its descriptor is closed, if it has one. */
void pp_exchange_unspool(pp_exchange *x);

/* The buffered-body total is at -max-buffered-body-total (0: no limit, never). */
int pp_exchange_over_budget(const pp_exchange_pool *p);

/* Counts one response status in its class (1xx ... 5xx) for /stats: every protocol's
 * responses, the worker's and the ones the session answers itself. */
void pp_exchange_count_status(pp_exchange_pool *p, int status);

#endif
