/* A tiny HTTP/1.1 or HTTP/2 server, cleartext or TLS, with a known, fixed behaviour: the
 * reference the generator is measured against (`pp-bench floor`) and tested against
 * (bench/tests).
 *
 * It answers every request after `delay_ms` (a timer, so requests overlap: capacity is not
 * limited by the delay), with 200 and a 2-byte body, except GET /status/<code> which answers
 * <code>, and GET /close which answers 200 with Connection: close and closes. Optionally the whole
 * event loop stalls once — blocks in nanosleep, as a GC pause or a stuck process would — for
 * `stall_ns` starting at `stall_at_ns` (absolute CLOCK_MONOTONIC), and records when the stall
 * really began and ended. Runs on its own thread and uv loop. Loopback only. Not a general server:
 * no bodies, no pipelining beyond one request at a time.
 *
 * h2 (`h2`): prior knowledge in cleartext, ALPN "h2" over TLS; SETTINGS_MAX_CONCURRENT_STREAMS
 * is `h2_max_streams`; each stream is answered after `delay_ms` like an h1 request; GET /reset
 * is answered with RST_STREAM (INTERNAL_ERROR) and GET /goaway with GOAWAY that refuses that
 * stream, then the connection closes. TLS (`tls`): a self-signed P-256 certificate for
 * localhost made in memory at start; the ALPN callback accepts only `tls_alpn` (default "h2"
 * for h2, "http/1.1" for h1) and answers anything else with the no_application_protocol alert.
 * h3: pb_nullsrv_h3_start below (a separate server on a UDP port). */
#ifndef PP_BENCH_NULLSRV_H
#define PP_BENCH_NULLSRV_H

#include <stdint.h>

typedef struct pb_nullsrv_config {
  const char *host; /* "127.0.0.1" when NULL */
  int port;         /* 0 picks a free port */
  uint32_t delay_ms;
  uint64_t stall_at_ns; /* absolute uv_hrtime(); 0 = never stall */
  uint64_t stall_ns;
  int h2;                  /* speak HTTP/2 instead of HTTP/1.1 */
  uint32_t h2_max_streams; /* SETTINGS_MAX_CONCURRENT_STREAMS (100 when 0) */
  int tls;                 /* TLS with an in-memory self-signed certificate */
  const char *tls_alpn;    /* the one ALPN protocol accepted (NULL: "h2" or "http/1.1") */
  uint32_t leak_every;     /* > 0: every Nth answered request leaks one descriptor (an open
                            * /dev/null never closed), for tests that must see a leak */
} pb_nullsrv_config;

typedef struct pb_nullsrv pb_nullsrv;

/* Starts the server on a new thread. On success returns 0 and sets *out (owned by the caller
 * until pb_nullsrv_stop) and *port_out (the bound port). Negative on error. */
int pb_nullsrv_start(const pb_nullsrv_config *cfg, pb_nullsrv **out, int *port_out);

/* Requests served so far (answered, any status). Safe from any thread. */
uint64_t pb_nullsrv_served(const pb_nullsrv *s);

/* Stops the thread, closes every connection and frees the server. Reports the stall's real
 * start and end (absolute uv_hrtime ns; 0 when it never stalled) if the pointers are not NULL. */
void pb_nullsrv_stop(pb_nullsrv *s, uint64_t *stall_began_ns, uint64_t *stall_ended_ns);

/* The same over HTTP/3 (nullsrv_h3.c): QUIC v1 on a UDP port, TLS 1.3 (GnuTLS) with an
 * in-memory self-signed P-256 certificate for localhost, ALPN "h3" only. `delay_ms`, the stall
 * and GET /status/<code> as above; `h2_max_streams` is the stream credit
 * (initial_max_streams_bidi, 100 when 0), extended as streams close; `h2`, `tls` and `tls_alpn`
 * are ignored. Routes datagrams by the peer's address (loopback clients do not migrate). */
typedef struct pb_nullsrv_h3 pb_nullsrv_h3;
int pb_nullsrv_h3_start(const pb_nullsrv_config *cfg, pb_nullsrv_h3 **out, int *port_out);
uint64_t pb_nullsrv_h3_served(const pb_nullsrv_h3 *s);
void pb_nullsrv_h3_stop(pb_nullsrv_h3 *s, uint64_t *stall_began_ns, uint64_t *stall_ended_ns);

#endif
