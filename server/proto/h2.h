/* The HTTP/2 session of one client connection, on top of nghttp2 1.52, without I/O.
 *
 * Bytes in (pp_h2_feed), bytes out (pp_h2_output), callbacks up, exactly like the h1 session
 * (http1.h): no sockets, no timers, no clocks of ours (nghttp2's rapid-reset token bucket reads
 * its own monotonic clock). The owner (the libuv glue and the exchange above it) feeds every
 * byte the client sent, drains the output into its bounded write buffer, and answers the
 * requests it is called back for, each on its own stream, in any order.
 *
 * The workload assumed: up to max_concurrent_streams requests at a time per connection, each
 * answered by a Ruby worker that may be slow. Request bodies are flow-controlled by the owner:
 * no stream WINDOW_UPDATE leaves before pp_h2_consume() says the worker (or a bounded buffer in
 * front of it) took the bytes, so a slow app back-pressures the client, and the unconsumed
 * request body of one stream never exceeds limits.stream_window. The connection window is given
 * back as bytes arrive, so streams whose owner has not taken their bytes yet (queued uploads)
 * never stall the bodies of the other streams. Response bytes are copied into a per-stream
 * buffer (pp_buf, kept across requests on a free list of stream records, so the steady state
 * does not allocate per request) and framed only as fast as the output is drained and the
 * client's windows allow; pp_h2_stream_pending() tells the owner when to stop reading its worker.
 *
 * Refused here, never reaching the owner: a request whose header list exceeds max_header_list
 * (431), whose content-length exceeds max_body_bytes (413), CONNECT without :protocol (501), and
 * whatever status on_request returns.
 *
 * Extended CONNECT (RFC 8441): with limits.connect_protocol the session advertises
 * SETTINGS_ENABLE_CONNECT_PROTOCOL and hands a CONNECT with :protocol to on_request (req.protocol
 * set). Its stream is a tunnel: DATA in is on_body (not bounded by max_body_bytes: the owner's
 * protocol bounds it, and flow control still waits for pp_h2_consume), END_STREAM in is
 * on_body_end, a 2xx response keeps the stream open, pp_h2_send_data frames bytes as they come
 * and pp_h2_send_end sends END_STREAM (RFC 8441 §6: the TCP FIN). A malformed one (no :path,
 * :scheme or :authority, :protocol on another method, :protocol while the setting is off) is
 * reset with PROTOCOL_ERROR by nghttp2 before any callback (RFC 8441 §4, RFC 9113 §8.1.1).
 * nghttp2's HTTP messaging checks stay on, so a missing or bad pseudo-header, an uppercase field
 * name, a connection-specific field, a bad content-length or a field value RFC 9113 forbids resets
 * the stream with PROTOCOL_ERROR before any callback. Where RFC 9113 allows a stream error to be
 * treated as a connection error (§5.4.1), nghttp2 sometimes does: DATA on a half-closed (remote)
 * stream, or a HEADERS over SETTINGS_MAX_CONCURRENT_STREAMS once the client acknowledged our
 * SETTINGS, end the connection with GOAWAY (STREAM_CLOSED, PROTOCOL_ERROR); before the
 * acknowledgement an excess stream is reset with REFUSED_STREAM. Floods end the connection:
 * RST_STREAM faster than the token bucket (CVE-2023-44487), more than 1000 queued SETTINGS/PING
 * acks, over 32 settings per frame, over 8 CONTINUATION frames.
 *
 * Reentrancy: the callbacks run inside nghttp2; from them the owner may call pp_h2_respond,
 * pp_h2_send_data, pp_h2_send_end, pp_h2_consume, pp_h2_reset, pp_h2_set_stream_data,
 * pp_h2_goaway and the getters, but not pp_h2_feed, pp_h2_output or pp_h2_dispose
 * (PP_H2_EREENTER). Work that would call into nghttp2's session from a callback is queued and
 * done when the outermost pp_h2_feed / pp_h2_output returns. */
#ifndef PP_H2_H
#define PP_H2_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "server/base/buf.h"

struct nghttp2_session;

/* Negative return codes of this module. */
typedef enum pp_h2_err {
  PP_H2_EPROTO = -1,    /* connection error caused by the peer; a GOAWAY is queued */
  PP_H2_EFLOOD = -2,    /* the peer flooded us (acks, rapid reset); a GOAWAY is queued */
  PP_H2_ESTREAM = -3,   /* no such stream, or not in a state that allows the call */
  PP_H2_EINVAL = -4,    /* a bad argument (status, settings value) */
  PP_H2_ELIBRARY = -5,  /* nghttp2 failed (out of memory inside it) */
  PP_H2_EREENTER = -6,  /* pp_h2_feed / pp_h2_output / pp_h2_dispose called from a callback */
  PP_H2_EFINISHED = -7, /* the session has already failed; it stays failed */
} pp_h2_err;

/* A static English description of a pp_h2_err; never NULL. */
const char *pp_h2_strerror(int err);

typedef struct pp_h2 pp_h2;

typedef struct pp_h2_limits {
  uint32_t max_concurrent_streams; /* SETTINGS_MAX_CONCURRENT_STREAMS, default 100 */
  size_t max_header_list;  /* SETTINGS_MAX_HEADER_LIST_SIZE (RFC sizes: name + value + 32 per
                              field); a request over it is answered 431. Default 65536. */
  uint64_t max_body_bytes; /* content-length over it: 413 answered by the session; DATA beyond
                              it: 413 if no response was submitted yet (the owner gets on_close
                              with CANCEL first), else RST_STREAM CANCEL. Default 64 MiB. */
  uint32_t stream_window;  /* SETTINGS_INITIAL_WINDOW_SIZE we advertise: request-body bytes one
                              stream may have unconsumed. Default 256 KiB, enough for an upload
                              to stream at ~20 MB/s over a 10 ms RTT while bounding memory. */
  uint32_t conn_window;    /* connection receive window (bytes in flight from the client over
                              all streams; credit returns on receipt). Default 1 MiB. At least
                              65535. */
  uint32_t reset_burst;    /* RST_STREAM token bucket (rapid reset): burst, default 1000 ... */
  uint32_t reset_rate;     /* ... and tokens per second, default 33; empty bucket -> GOAWAY.
                              More than reset_burst RST_STREAM between two pp_h2_output calls
                              stop the input at once (PP_H2_EFLOOD): nghttp2's own GOAWAY would
                              only go out at the next output, and until then it keeps opening
                              the streams the flood sends. */
  int connect_protocol;    /* 1: SETTINGS_ENABLE_CONNECT_PROTOCOL=1 is sent (RFC 8441 §3) and an
                              extended CONNECT (:protocol) reaches on_request as a tunnel; 0:
                              not sent, and nghttp2 resets a request carrying :protocol with
                              PROTOCOL_ERROR. Default 1. */
  const char *date;        /* the Date value (IMF-fixdate) the owner keeps current, sent on the
                              session's own answers (400, 413, 431, ...); NULL: none. The codec
                              reads no clock. */
} pp_h2_limits;

/* Fills *l with the defaults above. */
void pp_h2_limits_default(pp_h2_limits *l);

typedef struct pp_h2_header {
  const uint8_t *name;
  size_t name_len;
  const uint8_t *value;
  size_t value_len;
} pp_h2_header;

/* A request whose header block is complete and valid. Every pointer is owned by the session
 * and valid only during the on_request call; the owner copies what it keeps. */
typedef struct pp_h2_request {
  int32_t stream_id;
  const uint8_t *method, *scheme, *authority, *path;
  size_t method_len, scheme_len, authority_len, path_len; /* authority may be NULL (then a
                                                              "host" header may exist) */
  const pp_h2_header *headers; /* regular fields in arrival order, names lowercase (nghttp2
                                  rejects others); cookie may come as several fields (RFC 9113
                                  §8.2.3: join them with "; ") */
  size_t header_count;
  int has_content_length;
  uint64_t content_length;
  int end_stream;          /* the request has no body (on_body / on_body_end will not be called) */
  const uint8_t *protocol; /* extended CONNECT (RFC 8441 §4): the :protocol value (method is
                              CONNECT; nghttp2 checked that :scheme, :path and :authority are
                              there), else NULL */
  size_t protocol_len;
} pp_h2_request;

typedef struct pp_h2_callbacks {
  /* A request's header block is complete and valid. Set *stream_data (the owner's per-stream
   * pointer) and return 0, or return an HTTP status >= 400 that the session answers itself
   * (short text/plain body) without further callbacks for that stream. */
  int (*on_request)(pp_h2 *h, const pp_h2_request *req, void **stream_data);
  /* A piece of request body (data valid only during the call). The bytes count against the
   * windows until pp_h2_consume(). Return 0, or nonzero to reset the stream (INTERNAL_ERROR). */
  int (*on_body)(pp_h2 *h, int32_t stream_id, void *stream_data, const uint8_t *data, size_t len);
  /* END_STREAM received after a body (never called when req->end_stream was set). Return 0, or
   * nonzero to reset the stream (INTERNAL_ERROR). */
  int (*on_body_end)(pp_h2 *h, int32_t stream_id, void *stream_data);
  /* The stream is gone (called exactly once for every stream on_request accepted, and for
   * stream 1 of an upgrade): error_code is the RST_STREAM / close code (0 = the response
   * completed normally; CANCEL when the session answered 413 on the owner's behalf or was
   * disposed with the stream open). After it, stream_data is never used again. */
  void (*on_close)(pp_h2 *h, int32_t stream_id, void *stream_data, uint32_t error_code);
  /* Optional (NULL: none): the session answered a request itself at its header section (431,
   * 501, 413 from Content-Length), before on_request; req is as far as it was read. For the
   * owner's record (the access log); the stream gets no other callback. */
  void (*on_answered)(pp_h2 *h, const pp_h2_request *req, int status);
} pp_h2_callbacks;

/* Connection counters for /stats. Monotonic over the session's life. */
typedef struct pp_h2_stats {
  uint64_t streams_opened;    /* request header blocks begun (and the upgrade's stream 1) */
  uint64_t streams_accepted;  /* on_request returned 0 (and the upgrade's stream 1) */
  uint64_t session_answers;   /* answered by the session: 413, 431, 501, on_request's status */
  uint64_t peer_resets;       /* RST_STREAM frames received */
  uint64_t stream_errors;     /* RST_STREAM sent with an error code, other than pp_h2_reset's */
  uint64_t refused_streams;   /* RST_STREAM REFUSED_STREAM sent (concurrency, after GOAWAY) */
  uint64_t protocol_errors;   /* invalid frames or fields the peer sent (stream or connection) */
  uint64_t connection_errors; /* connection ended by us for an error other than a flood */
  uint64_t flood_closes;      /* connection ended for a flood (rapid reset, acks, settings) */
  uint64_t goaway_received;   /* GOAWAY frames received */
  uint64_t bytes_in, bytes_out;
} pp_h2_stats;

typedef struct pp_h2_stream pp_h2_stream; /* private (h2.c) */

/* The session. The owner allocates it (any storage); its fields are private except data and
 * stats. */
struct pp_h2 {
  struct nghttp2_session *session; /* allocated by nghttp2, freed by pp_h2_dispose */
  const pp_h2_callbacks *cb;       /* the owner's; must outlive the session */
  pp_h2_limits limits;             /* a copy */
  void *data;                      /* the owner's */
  pp_h2_stats stats;

  int err;             /* sticky: the first connection error (a pp_h2_err), 0 while healthy */
  int depth;           /* > 0 while inside nghttp2 (feed or output) */
  int goaway_sent;     /* pp_h2_goaway called */
  int32_t goaway_last; /* its last stream id */
  int local_goaway;    /* the next GOAWAY sent is ours (pp_h2_goaway), not nghttp2's */
  int last_recv_type;  /* type of the last frame received (rapid-reset detection) */
  uint32_t resets_since_output; /* RST_STREAM received since pp_h2_output last ran */
  int flood_detected;    /* set in a callback: more resets than reset_burst without a write */
  int32_t max_client_id; /* the highest stream id a request HEADERS opened */
  uint8_t opened[128];   /* which of the 1024 odd ids up to it were opened (ring) */
  uint8_t hold[9];       /* an incomplete frame header held back from nghttp2 ... */
  uint32_t hold_len;     /* ... and its length (0-8) */

  pp_h2_stream *live;    /* streams with a record, doubly linked */
  pp_h2_stream *free;    /* records kept for reuse (their buffers too) */
  uint64_t release_conn; /* connection-level bytes to consume once outside nghttp2 */
  int32_t refuse[16];    /* streams to reset REFUSED_STREAM once outside nghttp2 */
  uint32_t refuse_count; /* entries used in refuse[] */
  int32_t refuse_upto;   /* the highest stream id queued in refuse[] so far */

  /* Frame boundaries of the input, tracked beside nghttp2 so that a HEADERS nghttp2 ignores
   * after our GOAWAY is refused once it has been read whole, however the bytes are split. */
  uint32_t scan_skip;    /* preface bytes still to skip */
  uint8_t scan_hdr[9];   /* the frame header being read */
  uint32_t scan_hdr_len; /* bytes of it read */
  uint32_t scan_left;    /* payload bytes of the current frame still to come */
  int32_t scan_refuse;   /* the current frame is a HEADERS to refuse (its stream id), or 0 */
  int scan_goaway;       /* a GOAWAY from the client has been read whole */
  int input_ignored;     /* nghttp2 wants no more input: later bytes are counted, not read */
  int pending_work;      /* some stream has deferred resume/consume/reset work */

  /* The header block being received (one at a time per connection, RFC 9113 §4.3). */
  pp_buf hdr_raw;   /* name and value bytes of the block */
  pp_buf hdr_spans; /* struct hdr_span per field */
  pp_buf hdr_list;  /* pp_h2_header per regular field, built for on_request */
  size_t hdr_size;  /* RFC 9113 size of the block so far */
  pp_buf scratch;   /* response header bytes (pp_h2_respond) ... */
  pp_buf nvbuf;     /* ... and their nghttp2_nv array */

  void *mem_free[10]; /* nghttp2's freed blocks by size class (h2_mem.c) */
  pp_buf *out;        /* during pp_h2_output: the owner's buffer ... */
  size_t out_max;     /* ... and its bound */
};

/* Initialises a server session and queues our SETTINGS (and the connection WINDOW_UPDATE that
 * raises the receive window to limits->conn_window). cb must outlive the session; limits is
 * copied (NULL: the defaults). Returns 0, or PP_H2_ELIBRARY / PP_H2_EINVAL (the session is
 * then not initialised and must not be disposed). */
int pp_h2_init(pp_h2 *h, const pp_h2_callbacks *cb, const pp_h2_limits *limits, void *data);

/* h2c by Upgrade (RFC 7540 §3.2): http2_settings is the HTTP2-Settings header value (token68
 * base64url, as received; padding tolerated) and head_request says whether the upgrading
 * request was HEAD. Stream 1 is then the upgraded request (half-closed remote, counted as
 * accepted: on_close will be called for it) and its stream_data is set by the caller with
 * pp_h2_set_stream_data. The client preface is still expected first in pp_h2_feed. Returns 0,
 * or PP_H2_EINVAL on a bad settings value (the session is then not initialised). */
int pp_h2_init_upgrade(pp_h2 *h, const pp_h2_callbacks *cb, const pp_h2_limits *limits, void *data,
                       const uint8_t *http2_settings, size_t len, int head_request);

/* Sets the owner's pointer of an open stream (replacing what on_request set). Does nothing if
 * the stream is unknown or no longer the owner's. */
void pp_h2_set_stream_data(pp_h2 *h, int32_t stream_id, void *stream_data);

/* Frees everything the session allocated. on_close(..., CANCEL) is called first for every
 * stream the owner still holds. Not from a callback. */
void pp_h2_dispose(pp_h2 *h);

/* 1: data starts with the 24-byte client preface; 0: too short to tell (a prefix of it, or
 * empty); -1: not the preface. */
int pp_h2_is_preface(const uint8_t *data, size_t len);

/* Feeds received bytes. Returns len (all of them consumed), or <0: PP_H2_EPROTO / PP_H2_EFLOOD
 * when the bytes broke the connection (a GOAWAY is queued: drain pp_h2_output, then close),
 * PP_H2_EFINISHED if it had already failed, PP_H2_EREENTER from a callback. Some connection
 * errors are detected inside nghttp2, which queues the GOAWAY itself and returns normally:
 * then this returns len and pp_h2_finished() turns true once the GOAWAY is drained (later calls
 * return PP_H2_EFINISHED). The result does not depend on how the bytes are split. */
ssize_t pp_h2_feed(pp_h2 *h, const uint8_t *data, size_t len);

/* Appends frames ready to send to *out, stopping once out->len reaches max (frames may be cut
 * anywhere; the rest follows in the next call). Returns bytes appended (0: nothing to send or
 * no room), or PP_H2_EREENTER / PP_H2_ELIBRARY. */
ssize_t pp_h2_output(pp_h2 *h, pp_buf *out, size_t max);

/* Nonzero when frames are ready to send (deferred or flow-blocked DATA does not count). */
int pp_h2_want_write(pp_h2 *h);

/* Nonzero when nothing more will be read or written: the connection may close (after a
 * GOAWAY was drained and no stream remains, or after a connection error was drained). */
int pp_h2_finished(pp_h2 *h);

/* Submits the response head of an open stream the owner holds. pairs are as a Ruby app sent
 * them (any case; a value may hold several values joined by "\n"): names are lowercased,
 * connection-specific fields (connection, keep-alive, transfer-encoding, upgrade,
 * proxy-connection), pseudo-header names and empty names are dropped, "\n" splits a value into
 * repeated fields (a trailing "\n" adds none), CR is dropped. The pairs are copied. no_body:
 * HEADERS carry END_STREAM (HEAD, 1xx/204/304, or the app gave none); it is implied for a HEAD
 * request and for 204/304, and later send_data bytes are then discarded. A 1xx status other than
 * 101 is an interim response: the final one follows with another call. Returns 0, PP_H2_ESTREAM
 * (unknown stream, not the owner's, or already answered), PP_H2_EINVAL (status not 100..599 or
 * 101). */
int pp_h2_respond(pp_h2 *h, int32_t stream_id, int status, const pp_h2_header *pairs, size_t n,
                  int no_body);

/* Copies len response-body bytes into the stream's buffer and resumes its deferred data
 * source. Allowed before pp_h2_respond (the bytes wait). Returns 0, or PP_H2_ESTREAM (unknown
 * stream, not the owner's, or already ended). */
int pp_h2_send_data(pp_h2 *h, int32_t stream_id, const uint8_t *data, size_t len);

/* Marks the response complete: END_STREAM follows the buffered data. Returns 0 or
 * PP_H2_ESTREAM. */
int pp_h2_send_end(pp_h2 *h, int32_t stream_id);

/* Response bytes buffered for the stream, not yet framed (0 for an unknown stream). */
size_t pp_h2_stream_pending(pp_h2 *h, int32_t stream_id);

/* The sum of pp_h2_stream_pending over all streams. */
size_t pp_h2_pending_total(pp_h2 *h);

/* The owner took n request-body bytes of the stream: only now may WINDOW_UPDATE (stream and
 * connection) go out. n is capped at what was delivered and not yet consumed; bytes of a
 * stream that has closed were already released by the session. */
void pp_h2_consume(pp_h2 *h, int32_t stream_id, size_t n);

/* Resets the stream with error_code (e.g. NGHTTP2_CANCEL when the worker died mid-response
 * after the head went out). on_close follows with that code. Unknown streams are ignored. */
void pp_h2_reset(pp_h2 *h, int32_t stream_id, uint32_t error_code);

/* Graceful drain: queues GOAWAY(NO_ERROR) with the last stream id processed; streams up to it
 * finish; HEADERS for later streams are answered RST_STREAM REFUSED_STREAM. Once the last stream
 * closes and the output is drained, pp_h2_finished() is true. Idempotent. */
void pp_h2_goaway(pp_h2 *h);

/* The number of streams the session holds a record for (open, or finishing a response). */
size_t pp_h2_stream_count(pp_h2 *h);

#endif
