/* What the h1/h2 generator's two files share: the TCP/TLS connection (gen_tcp.c) and the h2
 * session on it (gen_h2.c). Not used by the core (gen.c) nor by the h3 generator. */
#ifndef PP_BENCH_GEN_TCP_INT_H
#define PP_BENCH_GEN_TCP_INT_H

#include "bench/gen/gen_int.h"

/* gen_tcp.c: the connection under a session. */
/* The request in flight (h1) or every stream (h2) failed with `o`/`err`; the connection closes. */
void gen_tcp_fail(conn *c, pb_outcome o, int err);
/* Queues bytes for the socket (encrypted under TLS); the caller flushes. 0 or -1 (no memory, TLS).
 */
int gen_tcp_queue(conn *c, const void *data, size_t n);
/* Hands the queued bytes to libuv when no write is in flight. */
void gen_tcp_flush(conn *c);

/* The session a TCP/TLS connection carries when it is not h1: what the transport (gen_tcp.c)
 * calls upward. gen_h2.c implements it (gen_h2_session_ops); the core hands it to the run in
 * g->session, so the transport never names the session's functions. */
struct gen_tcp_session_ops {
  int (*init)(gen *g);     /* the session callbacks of the run: 0 or -1 (no memory) */
  void (*dispose)(gen *g); /* safe without init */
  void (*start)(conn *c);  /* TCP (and TLS) up: the client session and our SETTINGS */
  void (*input)(conn *c, const char *p, size_t n); /* plaintext bytes from the server */
  void (*eof)(conn *c, int err);                   /* the server closed, or a read failed */
  void (*pump)(conn *c);                           /* what the session has to send, written */
  conn *(*pick)(gen *g);               /* least loaded usable connection with room, or NULL */
  void (*submit)(conn *c, uint32_t i); /* arrival `i` as a stream on `c` (which has room) */
  void (*fill)(conn *c);               /* waiting arrivals onto `c` while it has room */
  void (*cancel)(conn *c, int64_t stream_id); /* reset a stream the core gave up on */
  void (*release)(conn *c);                   /* the connection closes: free its session */
};

#endif
