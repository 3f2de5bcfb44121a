/* A tiny HTTP/1.1 server with a known, fixed behaviour: the reference the generator is
 * measured against (`pp-bench floor`) and tested against (bench/tests).
 *
 * It answers every request after `delay_ms` (a timer, so requests overlap: capacity is not
 * limited by the delay), with 200 and a 2-byte body, except GET /status/<code> which answers
 * <code>, and GET /close which answers 200 with Connection: close and closes. Optionally the whole
 * event loop stalls once — blocks in nanosleep, as a GC pause or a stuck process would — for
 * `stall_ns` starting at `stall_at_ns` (absolute CLOCK_MONOTONIC), and records when the stall
 * really began and ended. Runs on its own thread and uv loop. Loopback only. Not a general server:
 * no bodies, no pipelining beyond one request at a time. */
#ifndef PP_BENCH_NULLSRV_H
#define PP_BENCH_NULLSRV_H

#include <stdint.h>

typedef struct pb_nullsrv_config {
  const char *host; /* "127.0.0.1" when NULL */
  int port;         /* 0 picks a free port */
  uint32_t delay_ms;
  uint64_t stall_at_ns; /* absolute uv_hrtime(); 0 = never stall */
  uint64_t stall_ns;
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

#endif
