/* What the two reference servers share (nullsrv.c: HTTP/1.1 and HTTP/2 over TCP; nullsrv_h3.c:
 * HTTP/3 over UDP): their own uv loop on their own thread (pb_nullsrv_loop, which each embeds
 * and opens its sockets on), the stop that wakes it from the caller's thread, the one stall of
 * the whole loop (`stall_at_ns`, `stall_ns`) with when it really began and ended, the count of
 * answered requests with the descriptor leak of `leak_every` (nullsrv.h), and the self-signed
 * certificate both serve TLS with. */
#ifndef PP_BENCH_NULLSRV_BASE_H
#define PP_BENCH_NULLSRV_BASE_H

#include <openssl/evp.h>
#include <openssl/x509.h>
#include <stdint.h>
#include <uv.h>

#include "bench/refsrv/nullsrv.h"

typedef struct pb_nullsrv_loop {
  uv_loop_t loop;
  uv_async_t stop_async;  /* data: the server (its stop callback and close walk use it) */
  uv_timer_t stall_timer; /* data: the server, likewise */
  uv_thread_t thread;
  uint64_t stall_at_ns, stall_ns; /* from the configuration */
  uint32_t leak_every;
  _Atomic uint64_t served;
  uint64_t stall_began, stall_ended; /* uv_hrtime(); 0 when it never stalled */
} pb_nullsrv_loop;

/* Initialises the loop (before the server opens its sockets on it) and takes the stall and
 * the leak from cfg. */
void pb_nullsrv_loop_init(pb_nullsrv_loop *l, const pb_nullsrv_config *cfg);
/* Sets up the stop (stop_cb runs on the loop when pb_nullsrv_loop_stop is called) and the
 * stall, both handles with data `server`, then runs the loop on a new thread. */
void pb_nullsrv_loop_run(pb_nullsrv_loop *l, uv_async_cb stop_cb, void *server);
/* One answered request (any status); every leak_every-th also opens /dev/null and never
 * closes it: the descriptor leak a soak test injects to prove it can see one. */
void pb_nullsrv_loop_count(pb_nullsrv_loop *l);
/* Requests answered so far. Safe from any thread. */
uint64_t pb_nullsrv_loop_served(const pb_nullsrv_loop *l);
/* Wakes stop_cb, waits for the thread (the loop ends when stop_cb has closed every handle)
 * and closes the loop; the stall's real start and end into the pointers that are not NULL. */
void pb_nullsrv_loop_stop(pb_nullsrv_loop *l, uint64_t *stall_began_ns, uint64_t *stall_ended_ns);

/* A self-signed P-256 certificate for localhost and 127.0.0.1, valid for a day, and its key,
 * made in memory (the caller frees both). 0, or -1 (nothing to free). */
int pb_nullsrv_self_signed(EVP_PKEY **key_out, X509 **cert_out);

#endif
