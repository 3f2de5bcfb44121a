/* The open-loop HTTP load generator at the heart of pp-bench: HTTP/1.1 or HTTP/2, each in
 * cleartext or over TLS, and HTTP/3 over QUIC.
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
 * HTTP/2 (nghttp2 client sessions): streams are multiplexed on at most `h2_connections`
 * connections (default 4), all opened at the start. A connection takes no stream before the
 * server's SETTINGS arrived, and at most the server's SETTINGS_MAX_CONCURRENT_STREAMS (capped at
 * PB_H2_STREAM_CAP) at once; arrivals beyond that wait in the same intended-order FIFO as the
 * h1 path and are timed from their intended start. Cleartext h2 is prior knowledge (h2c). A
 * timed-out stream is cancelled with RST_STREAM; the connection stays.
 *
 * TLS (OpenSSL, memory BIOs, inside the same loop): ALPN offers "h2" for h2 (anything else is
 * an error) and "http/1.1" for h1; SNI is `tls_server_name` (default "localhost"). The peer's
 * certificate is NOT verified: targets are loopback servers with development certificates.
 *
 * HTTP/3 (gen_h3.c: ngtcp2 0.12 + nghttp3 0.8, QUIC v1, TLS 1.3 through GnuTLS, ALPN "h3"): the
 * same pool rules as h2 on `h2_connections` QUIC connections, each on its own connected UDP
 * socket; a connection takes streams once the handshake completed, at most the server's stream
 * credit (initial_max_streams_bidi, then MAX_STREAMS) and PB_H2_STREAM_CAP at once. A request is
 * done when its response stream ends; a timed-out stream is reset (H3_REQUEST_CANCELLED), the
 * connection stays. The certificate is NOT verified either. `tls` is ignored for h3.
 *
 * Request kinds (`pb_gen_config.kinds`, optional): a kind may carry a request body (POST with
 * Content-Length, the bytes written in 64 KiB pieces from one shared buffer as the socket takes
 * them, so 64 concurrent 4 MiB uploads do not hold 256 MiB of copies; h2: a data provider
 * under the server's flow control; h3: an nghttp3 data reader pointing into the same buffer,
 * under QUIC stream and connection flow control) and may cancel: the client leaves
 * `cancel_after_ns` after the request was sent (h1: closes the connection; h2:
 * RST_STREAM(CANCEL); h3: RESET_STREAM + STOP_SENDING with H3_REQUEST_CANCELLED; for h2 and h3
 * the connection stays), unless the response came first. An h1 response that arrives before
 * the whole body was written ends the request and closes the connection (the rest is never
 * sent).
 *
 * Workload assumed: one request per arrival (GET, or POST with a body), responses parsed and
 * discarded, up to a few thousand requests per second, one thread. The h1 path does not
 * allocate per request after setup; connection buffers grow once and are reused; nghttp2
 * allocates per stream internally. */
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
  PB_CANCELLED,   /* the client left on purpose (pb_kind_spec.cancel_after_ns) before a response */
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

/* pb_result.error values of our own (positive; libuv's are negative). */
#define PB_ERR_BAD_HTTP 1 /* the response did not parse as HTTP/1.1 */
#define PB_ERR_TLS      2 /* TLS handshake or record error */
#define PB_ERR_ALPN     3 /* TLS: the server did not select the protocol asked for */
#define PB_ERR_H2_NO_SETTINGS                                                                      \
  4                          /* h2: no SETTINGS preface (an HTTP/1 answer, another frame,          \
                              * silence for 5 s, or a close): the server does not speak h2 */
#define PB_ERR_H2_PROTOCOL 5 /* h2: nghttp2 rejected what the server sent */
#define PB_ERR_H2_GOAWAY   6 /* h2: the stream was refused or cut by the server's GOAWAY */
#define PB_ERR_H2_RESET    7 /* h2: the server reset the stream (RST_STREAM) */
#define PB_ERR_QUIC                                                                                \
  8                           /* h3: QUIC handshake failed or timed out, or the connection closed  \
                               * (CONNECTION_CLOSE, idle timeout, a transport error) */
#define PB_ERR_H3_PROTOCOL 9  /* h3: nghttp3 rejected what the server sent, or no :status */
#define PB_ERR_H3_RESET    10 /* h3: the server reset the request stream */
#define PB_ERR_H3_GOAWAY   11 /* h3: the stream was cut by the server's GOAWAY */

/* Most concurrent streams pp-bench opens on one h2 connection, whatever the server allows. */
#define PB_H2_STREAM_CAP 1024

/* Wire protocol of the generator. */
typedef enum pb_proto { PB_PROTO_H1 = 0, PB_PROTO_H2 = 1, PB_PROTO_H3 = 2 } pb_proto;

/* "h1", "h2", "h1+tls", "h2+tls", "h3" (always TLS 1.3 inside QUIC; `tls` is ignored): the
 * protocol label stored with results. Static storage. */
const char *pb_proto_label(pb_proto proto, int tls);

/* "ECONNRESET", "EOF", "bad_http", ... for pb_result.error; "" for 0. Static storage. */
const char *pb_error_name(int err);

/* Counters of the transport, filled by pb_gen_run when the caller passes them. */
typedef struct pb_gen_counters {
  uint32_t connections_opened;    /* TCP (h3: QUIC) connection attempts */
  uint32_t connections_peak;      /* most connections open (or connecting) at once */
  uint32_t h2_server_max_streams; /* lowest SETTINGS_MAX_CONCURRENT_STREAMS seen (0: none);
                                   * h3: lowest initial_max_streams_bidi transport parameter */
  uint32_t h2_peak_streams;       /* most streams in flight on one connection */
  uint32_t goaways;               /* GOAWAY frames received (h2 and h3) */
  char first_error[256];          /* the first connection-level failure in words ("" if none) */
} pb_gen_counters;

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

/* What one request kind sends beyond its path. Zeroed: a GET that waits for its response. */
typedef struct pb_kind_spec {
  uint32_t body_bytes;      /* > 0: POST with a body of this many bytes (Content-Length,
                             * application/octet-stream); at most PB_BODY_MAX */
  uint64_t cancel_after_ns; /* > 0: leave this long after the request was sent (h1: close the
                             * connection; h2: RST_STREAM(CANCEL); h3: stream reset with
                             * H3_REQUEST_CANCELLED); outcome PB_CANCELLED */
} pb_kind_spec;

/* Largest request body a kind may carry. */
#define PB_BODY_MAX (256u << 20)

typedef struct pb_gen_config {
  const char *host; /* numeric IPv4/IPv6 loopback address, e.g. "127.0.0.1" */
  int port;
  uint32_t max_connections;    /* cap on open connections (default when 0: 4096, or the open-file
                                * limit minus 64 if that is lower) */
  uint64_t timeout_ns;         /* client timeout from intended start (default 20 s when 0) */
  uint64_t start_delay_ns;     /* t0 = now + this at pb_gen_run (default 20 ms when 0) */
  uint64_t t0_ns;              /* absolute uv_hrtime() start; overrides start_delay_ns when set
                                * (so a sampler started earlier shares the run's clock) */
  pb_progress_cb progress;     /* optional, called every second from the loop */
  void *data;                  /* passed to progress */
  pb_proto proto;              /* PB_PROTO_H1 (default), PB_PROTO_H2 or PB_PROTO_H3 */
  int tls;                     /* nonzero: TLS (no certificate verification) */
  const char *tls_server_name; /* SNI; "localhost" when NULL */
  uint32_t h2_connections;     /* h2, h3: connections to multiplex on (default 4 when 0);
                                * max_connections is the h1 cap and is ignored for h2 */
  pb_gen_counters *counters;   /* optional out: transport counters (zeroed by pb_gen_run) */
  const pb_kind_spec *kinds;   /* optional: sched->path_count entries (NULL: every kind is a
                                * plain GET); read during pb_gen_run only */
} pb_gen_config;

/* Runs the whole schedule against the target and returns when every arrival has an outcome.
 * `results` must have room for sched->count records; it is filled in schedule order.
 * `t0_out`, if not NULL, receives the absolute CLOCK_MONOTONIC ns of the run start (so callers
 * can relate server-side events to the run). Returns 0 or a negative PB_E* code (with a message
 * in `err`, which may be NULL). The generator does not keep `sched` or `results` afterwards. */
int pb_gen_run(const pb_gen_config *cfg, const pb_schedule *sched, pb_result *results,
               uint64_t *t0_out, char *err, size_t errlen);

#endif
