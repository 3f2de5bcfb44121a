/* The open-loop HTTP/1.1 load generator at the heart of pp-bench.
 *
 * The caller hands over an arrival schedule (intended send times relative to the run start,
 * each naming one request kind) and a target on loopback. The generator sends every arrival at
 * its intended time from its own clock, independent of how fast the server answers, and
 * measures latency from that intended time, never from the moment the request was written.
 * A slow server therefore shows up as latency and never slows the offered load down (the
 * coordinated-omission trap of closed-loop tools such as wrk, hey and ab).
 *
 * Pacing: a Linux timerfd armed on CLOCK_MONOTONIC at the next intended time (absolute, ns
 * resolution) wakes the libuv loop; every arrival that is due is dispatched at that wake-up.
 * uv_timer alone would round to 1 ms; timerfd gives sub-millisecond pacing without spinning a
 * core that the server under test needs. The generator's own lateness (intended -> bytes handed
 * to the kernel) is recorded per request and reported separately.
 *
 * Connections: keep-alive connections are reused when idle; when none is idle a new one is
 * opened, up to `max_connections`. Beyond the cap arrivals wait inside the generator, in
 * intended order, and their latency still counts from the intended time. Every arrival ends
 * in exactly one outcome; none is dropped silently.
 *
 * Workload assumed: one HTTP/1.1 GET per arrival, small responses (bodies are parsed and
 * discarded), up to a few thousand requests per second, one thread. No allocation per request
 * after pp_gen_init: results and connections are preallocated. */
#ifndef PP_BENCH_GEN_H
#define PP_BENCH_GEN_H

#include <stddef.h>
#include <stdint.h>

/* One arrival of the schedule. `intended_ns` is relative to the run start, non-decreasing
 * along the array; `kind` indexes pb_schedule.paths. */
typedef struct pb_arrival {
  uint64_t intended_ns;
  uint32_t kind;
} pb_arrival;

/* An arrival schedule. The schedule owns `arrivals` and `paths` (see pb_schedule_dispose). */
typedef struct pb_schedule {
  pb_arrival *arrivals;
  size_t count;
  char **paths; /* request kinds: "/mix/5/20", "/hello", ... */
  size_t path_count;
} pb_schedule;

/* How a request ended. Exactly one per arrival. Only PB_OK is a success. */
typedef enum pb_outcome {
  PB_PENDING = 0, /* not finished (only seen while the run is in progress) */
  PB_OK,          /* 2xx */
  PB_SHED,        /* 503 */
  PB_HTTP_ERROR,  /* any other status (1xx final, 3xx, 4xx, 5xx but 503) */
  PB_TIMEOUT,     /* no complete response within the client timeout from intended start */
  PB_CONN_ERROR,  /* connect failed, reset, EOF before the response completed, bad HTTP */
  PB_OUTCOME_COUNT
} pb_outcome;

const char *pb_outcome_name(pb_outcome o);

/* Per-request record. Times are CLOCK_MONOTONIC ns relative to the run start (t0). */
typedef struct pb_result {
  uint64_t intended_ns;
  uint64_t dispatched_ns; /* the pacer handled the arrival (its own lateness is this - intended) */
  uint64_t sent_ns;       /* the write was handed to the kernel; 0 if never sent */
  uint64_t done_ns;       /* response complete, or the moment the outcome was decided */
  uint32_t kind;
  uint16_t status;  /* HTTP status, 0 if none */
  uint8_t outcome;  /* pb_outcome */
  uint8_t reused;   /* sent on a connection that had served a request before */
  uint32_t conn_id; /* connection serial (1-based), 0 if never sent */
  int16_t error;    /* PB_CONN_ERROR: the libuv error (UV_ECONNRESET, UV_EOF, ...) or
                     * PB_ERR_BAD_HTTP; 0 otherwise */
} pb_result;

#define PB_ERR_BAD_HTTP 1 /* pb_result.error: the response did not parse as HTTP/1.1 */

/* "ECONNRESET", "EOF", "bad_http", ... for pb_result.error; "" for 0. Static storage. */
const char *pb_error_name(int err);

/* Errors from pp_gen_* (negative). */
enum {
  PB_EINVAL = -1,
  PB_ENOMEM = -2,
  PB_ESYS = -3, /* a system call (timerfd, uv_*) failed; see errno / the message */
};

typedef struct pb_gen pb_gen;

/* Live counters, passed to the progress callback once per second. */
typedef struct pb_progress {
  uint64_t elapsed_ns;
  uint64_t offered;   /* arrivals dispatched (intended time passed) */
  uint64_t completed; /* outcomes decided so far */
  uint64_t completed_last_second;
  uint64_t in_flight;  /* written, awaiting a response */
  uint64_t waiting;    /* due, waiting in the generator for a connection */
  uint64_t open_conns; /* connections open or connecting */
} pb_progress;

typedef void (*pb_progress_cb)(const pb_progress *p, void *data);

typedef struct pb_gen_config {
  const char *host; /* numeric IPv4/IPv6 loopback address, e.g. "127.0.0.1" */
  int port;
  uint32_t max_connections; /* cap on open connections (default when 0: 4096, or the open-file
                             * limit minus 64 if that is lower) */
  uint64_t timeout_ns;      /* client timeout from intended start (default 20 s when 0) */
  uint64_t start_delay_ns;  /* t0 = now + this at pb_gen_run (default 20 ms when 0) */
  uint64_t t0_ns;           /* absolute uv_hrtime() start; overrides start_delay_ns when set
                             * (so a sampler started earlier shares the run's clock) */
  pb_progress_cb progress;  /* optional, called every second from the loop */
  void *data;               /* passed to progress */
} pb_gen_config;

/* Runs the whole schedule against the target and returns when every arrival has an outcome.
 * `results` must have room for sched->count records; it is filled in schedule order.
 * `t0_out`, if not NULL, receives the absolute CLOCK_MONOTONIC ns of the run start (so callers
 * can relate server-side events to the run). Returns 0 or a negative PB_E* code (with a message
 * in `err`, which may be NULL). The generator does not keep `sched` or `results` afterwards. */
int pb_gen_run(const pb_gen_config *cfg, const pb_schedule *sched, pb_result *results,
               uint64_t *t0_out, char *err, size_t errlen);

#endif
