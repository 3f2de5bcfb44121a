/* The generator's private state, shared by the core (gen.c: pacing, pool, waiting FIFO,
 * timeouts, outcomes) and the protocol generators it drives through gen_proto_ops: h1/h2 over
 * TCP and TLS (gen_tcp.c, gen_h2.c) and h3 over QUIC (gen_h3.c). Not part of the public API
 * (gen.h).
 *
 * Calls go one way: a protocol generator calls the core's gen_* helpers below; the core reaches
 * a protocol only through g->ops. */
#ifndef PP_BENCH_GEN_INT_H
#define PP_BENCH_GEN_INT_H

#include "bench/gen/gen.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include <llhttp.h>
#include <nghttp2/nghttp2.h>
#include <openssl/ssl.h>
#include <uv.h>

struct h3q;
struct h3ctx;
typedef struct gen gen;
typedef struct conn conn;

/* What a protocol generator implements for the core. Every function runs on the generator's
 * loop; none may call back into the core from inside an engine's callback. */
typedef struct gen_proto_ops {
  /* Per run, after the core's own set-up and before any connection: 0, or a negative PB_E*
   * code with a message in `err`. */
  int (*init)(gen *g, char *err, size_t errlen);
  /* Per run, always (also after a failed or skipped init): frees what init made. */
  void (*dispose)(gen *g);
  /* `c` is a fresh C_CONNECTING slot, already counted: start connecting. False if it failed at
   * once (the protocol has charged and closed it with gen_conn_fail_setup). */
  bool (*open)(conn *c);
  /* `c` is C_CLOSING, its requests settled: free the protocol's state and close its handles,
   * then return the slot with gen_conn_release. */
  void (*close)(conn *c);
  /* Arrival `i` is due: send it on a connection that can take it now and return true, or
   * return false (the core parks it in the FIFO and opens a connection if it may). */
  bool (*dispatch)(gen *g, uint32_t i);
  /* Every 10 ms, for every slot ever used: the protocol's own deadlines (connection set-up, and
   * for h1 the request on the connection). */
  void (*sweep_conn)(conn *c, uint64_t now);
  /* Multiplexed protocols (h2, h3) only: reset a stream the core gave up on (client timeout,
   * or the client leaves); the core has settled its request already. */
  void (*cancel_stream)(conn *c, int64_t stream_id);
  /* Multiplexed protocols only: move waiting arrivals onto `c` while it has room, then write. */
  void (*fill)(conn *c);
} gen_proto_ops;

extern const gen_proto_ops gen_tcp_ops;  /* h1 and h2, cleartext or TLS (gen_tcp.c) */
extern const gen_proto_ops gen_quic_ops; /* h3 (gen_h3.c) */
/* The h2 session over gen_tcp_ops' connections (gen_h2.c), handed to the run in g->session. */
struct gen_tcp_session_ops;
extern const struct gen_tcp_session_ops gen_h2_session_ops;

/* C_CONNECTING lasts until the connection can carry a request: TCP connected, TLS handshake
 * done, and for h2 the server's SETTINGS received. C_OPEN: usable, nothing in flight (h1) or
 * carrying streams (h2: an h2 connection stays C_OPEN while it has streams). */
enum conn_state { C_FREE = 0, C_CONNECTING, C_OPEN, C_IDLE, C_BUSY, C_CLOSING };

/* The longest a connection may take from TCP connect to usable (TLS handshake, h2 SETTINGS),
 * so a peer that accepts and stays silent is reported instead of waited for. */
#define SETUP_TIMEOUT_NS 5000000000ull

/* Request bodies are written in pieces of this size from one shared buffer, at most
 * BODY_QUEUED bytes queued per connection at a time, so an upload never holds a copy of itself.
 * h2 and h3 hand the body to nghttp2/nghttp3 at most BODY_PIECE bytes at a time. */
#define BODY_PIECE  65536u
#define BODY_QUEUED (4u * BODY_PIECE)

/* After a write error on an upload, how long to wait for the server's answer (a 413 or 503
 * already on its way) before the request is charged with the write error. */
#define WRITE_ERROR_GRACE_NS 1000000000ull

typedef struct bytes {
  char *p;
  size_t len, cap;
} bytes;

struct conn {
  uv_tcp_t tcp;
  uv_connect_t connect_req;
  uv_write_t write_req;
  llhttp_t parser;
  gen *g;
  uint32_t id;
  int state;
  int64_t req; /* h1: result index in flight, -1 if none */
  uint32_t served;
  bool got_bytes; /* any response byte for the request in flight */
  bool message_done;
  int32_t next_free;
  /* transport */
  bool tcp_up;
  uint64_t connected_ns; /* TCP connected (run clock), for SETUP_TIMEOUT_NS */
  SSL *ssl;              /* NULL in cleartext */
  bool tls_ready;
  bytes out;  /* bytes for the socket not yet handed to uv_write */
  bytes wbuf; /* the bytes of the write in flight */
  bool writing;
  int close_cause; /* error charged to requests still on the connection when it closes */
  /* h2 */
  nghttp2_session *h2;
  bool h2_settings_seen; /* set by the frame callback, acted on after mem_recv */
  bool h2_settings_new;  /* a SETTINGS frame arrived since the cap was last read */
  bool goaway;
  uint32_t preface_seen; /* bytes of the server preface checked so far (up to 4) */
  char preface[4];
  uint32_t h2_cap;   /* streams we allow at once (server limit, PB_H2_STREAM_CAP) */
  uint32_t h2_alloc; /* room in `streams`: the cap at setup (a later SETTINGS may lower it) */
  uint32_t *streams; /* result indices of the streams in flight */
  uint32_t n_streams;
  /* h1 upload of the request in flight */
  uint32_t body_left;      /* body bytes not yet queued */
  int write_error;         /* a write failed mid-upload: waiting for the server's answer */
  uint64_t write_error_ns; /* when (run clock) */
  /* h3 (gen_h3.c): the QUIC connection, NULL for TCP connections */
  struct h3q *q;
};

struct gen {
  const pb_gen_config *cfg;
  const pb_schedule *sched;
  pb_result *results;
  pb_gen_counters *counters;
  uv_loop_t loop;
  uv_poll_t pacer;
  int timerfd;
  uv_timer_t sweeper;  /* timeouts */
  uv_timer_t progress; /* once a second */
  uint64_t t0;
  uint64_t timeout_ns;
  size_t next_arrival;
  uint64_t completed, completed_at_last_tick, in_flight;
  /* Arrivals due but waiting for a connection: a FIFO ring in intended order. */
  uint32_t *pending;
  size_t pending_head, pending_len;
  conn *conns;
  uint32_t max_conns;
  int32_t free_head;
  uint32_t conn_high; /* slots [0, conn_high) have ever been used: the sweep scans only those */
  uint32_t open_conns, connecting;
  uint32_t *idle; /* stack of idle connection slots */
  uint32_t idle_len;
  uint32_t conn_serial;
  char **requests; /* h1: preformatted request bytes per kind */
  size_t *request_lens;
  struct sockaddr_storage addr;
  llhttp_settings_t settings;
  const gen_proto_ops *ops; /* the protocol generator of this run */
  bool mux;                 /* h2 or h3: requests are streams on the pool's connections */
  /* h1/h2 generator (gen_tcp.c, gen_h2.c) */
  bool h2;
  const struct gen_tcp_session_ops *session; /* h2: the session over TCP/TLS; NULL for h1 */
  struct h3ctx *h3ctx; /* h3 generator (gen_h3.c): GnuTLS credentials, QUIC callbacks */
  SSL_CTX *ssl_ctx;
  nghttp2_session_callbacks *h2_callbacks;
  char authority[80];
  uint32_t *req_slot;  /* h2, h3: connection slot of each request in flight, UINT32_MAX if none */
  int32_t *req_stream; /* h2: its stream id */
  size_t sweep_cursor; /* h2: results before this index are finished */
  uint32_t rr;         /* h2: round-robin start for picking a connection */
  const pb_kind_spec *kinds; /* cfg->kinds, NULL: plain GETs */
  bool any_cancel;           /* some kind cancels: the sweep looks for them */
  char *body;                /* BODY_PIECE bytes every upload is written from (never changes
                              * during a run: h3 hands nghttp3 pointers into it) */
  uint32_t *req_body_off;    /* h2, h3: body bytes handed to nghttp2/nghttp3 per request */
  char readbuf[65536];
  char plainbuf[65536];
  bool stopping;
  bool pacer_active;
};

/* The core's helpers for the protocol generators (gen.c). */
/* The request body size of `kind` (0: a GET). */
static inline uint32_t gen_kind_body(const gen *g, uint32_t kind) {
  return g->kinds ? g->kinds[kind].body_bytes : 0;
}
uint64_t gen_now_rel(gen *g);
void gen_finish_request(gen *g, uint32_t i, pb_outcome o, uint16_t status, int err);
pb_outcome gen_outcome_of_status(unsigned status);
void gen_note_error(gen *g, const char *fmt, const char *a, const char *b);
bool gen_pending_pop(gen *g, uint32_t *i);
void gen_maybe_finish(gen *g);
void gen_conn_fail_setup(conn *c, int err);
void gen_conn_close(conn *c);
void gen_stream_remove(conn *c, uint32_t i);
/* Returns a closed connection's slot to the free list (after its handles closed). */
void gen_conn_release(conn *c);

static inline bool gen_conn_alive(const conn *c) {
  return c->state != C_CLOSING && c->state != C_FREE;
}

#endif
