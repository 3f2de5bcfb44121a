/* The HTTP/3 endpoint: QUIC (ngtcp2 0.12, GnuTLS crypto backend) and HTTP/3 (nghttp3 0.8)
 * sessions for every client of one UDP listener, without I/O.
 *
 * Datagrams in (pp_h3_server_recv), datagrams out (a bounded queue the owner drains with
 * pp_h3_server_out_peek / pp_h3_server_out_pop), requests up by callbacks exactly like the h2
 * session (h2.h), responses down by pp_h3_respond / pp_h3_send_data / pp_h3_send_end. No
 * sockets, no timers and no clock: every call that may send takes the time (`now`, monotonic
 * nanoseconds, the same base as uv_hrtime()), and each connection says when it next wants to be
 * woken: on_conn_timer reports every change of pp_h3_conn_expiry, for one timer per connection
 * (pp_h3_server_expiry, the earliest over all connections, is a linear scan for small setups
 * and tests). A public call visits only the connections it touched (a dirty list), so the cost
 * of a datagram does not grow with the number of connections.
 *
 * The workload assumed: one server context per listening address, up to limits.max_connections
 * clients, each with up to limits.max_streams_bidi concurrent requests answered by a Ruby worker
 * that may be slow. Request bodies are flow-controlled by the owner: MAX_STREAM_DATA / MAX_DATA
 * credit for body bytes is extended only when pp_h3_consume() says the worker took them, so the
 * unconsumed request body of one stream never exceeds limits.stream_window, nor that of one
 * connection limits.conn_window. The connection window is by default the sum of the stream
 * windows (max_streams_bidi x stream_window): a smaller one lets streams whose owner is not
 * consuming (requests waiting in the queue for a worker) hold all of it, and then the streams
 * that do run get no body bytes either (a deadlock broken only by timeouts). Body bytes reach
 * the owner in pieces of up to limits.body_piece (QUIC delivers them a datagram, ~1.2 KB, at a
 * time): a piece is handed up when the next datagram's bytes would not fit, at the end of the
 * body, and at the end of pp_h3_server_flush / the expiry calls (the owner's batch ends), never
 * held past them. Response bytes are copied into per-stream chunks (16 KiB,
 * recycled on a per-server free list) that stay put until the client acknowledges them
 * (nghttp3 keeps pointers into them); pp_h3_stream_pending() counts buffered plus unacknowledged
 * bytes, and pp_h3_send_data refuses bytes beyond limits.max_stream_unacked per stream or
 * limits.max_conn_unacked per connection (PP_H3_EFULL), so memory is bounded per client.
 *
 * Connections are allocated by the server on a valid client Initial and freed by it (after
 * on_conn_close) at idle timeout, at the end of the closing or draining period, or when
 * pp_h3_server_dispose runs. The server owns the connection-ID map: the client's first DCID and
 * every CID we issue (several per connection, NEW_CONNECTION_ID / RETIRE_CONNECTION_ID as
 * ngtcp2 asks) route datagrams to their connection; stateless reset tokens are derived from the
 * static secret and the CID (so a restarted server with the same secret can still reset).
 *
 * Refused before any connection state exists, each counted by cause in pp_h3_stats: datagrams
 * whose header does not parse (garbage), a long header of a version we do not speak (Version
 * Negotiation is sent when the datagram is at least 1200 bytes), an Initial in a datagram under
 * 1200 bytes or over limits.max_initial_datagram, an Initial whose length field runs past the
 * datagram (truncated), an Initial without a valid token while retry is on (a Retry is sent), a
 * Retry token that does not verify (CONNECTION_CLOSE INVALID_TOKEN), more than max_connections,
 * short headers with an unknown CID (a stateless reset, from a token bucket).
 *
 * Not covered: 0-RTT, session resumption, the QPACK dynamic table, server push, DATAGRAM
 * frames, request trailers (skipped), preferred addresses. A client's STOP_SENDING has no
 * callback in ngtcp2 0.12: ngtcp2 answers it with RESET_STREAM and the owner hears the client's
 * code from on_close when the stream ends.
 *
 * Reentrancy: the owner's callbacks run inside ngtcp2 / nghttp3; from them the owner may call
 * pp_h3_respond, pp_h3_send_data, pp_h3_send_end, pp_h3_consume, pp_h3_reset,
 * pp_h3_conn_goaway and the getters, but not pp_h3_server_recv,
 * pp_h3_server_flush, pp_h3_server_handle_expiry, pp_h3_conn_handle_expiry,
 * pp_h3_server_shutdown or pp_h3_server_dispose (PP_H3_EREENTER). Packets are written when the
 * outermost call returns, never from inside an ngtcp2 or nghttp3 callback. */
#ifndef PP_H3_H
#define PP_H3_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "server/base/buf.h"
#include "server/proto/h2.h" /* pp_h2_header: the same pair type up and down */

#define PP_H3_SCID_LEN     18   /* length of every connection ID we issue */
#define PP_H3_MAX_DATAGRAM 1452 /* largest datagram we send (ngtcp2's default payload) */
#define PP_H3_SECRET_LEN   32   /* the static secret (reset tokens, Retry tokens) */
#define PP_H3_CHUNK        16384

/* Negative return codes of this module. */
typedef enum pp_h3_err {
  PP_H3_EINVAL = -1,   /* a bad argument */
  PP_H3_ECERT = -2,    /* the certificate or key could not be loaded */
  PP_H3_ETLS = -3,     /* GnuTLS failed (priority string, session) */
  PP_H3_ELIBRARY = -4, /* ngtcp2 / nghttp3 failed (out of memory inside it) */
  PP_H3_ESTREAM = -5,  /* no such stream, or not in a state that allows the call */
  PP_H3_EFULL = -6,    /* the stream's or connection's unacknowledged-data bound is reached */
  PP_H3_EREENTER = -7, /* an I/O-level call from inside a callback */
  PP_H3_ECLOSED = -8,  /* the connection is closing, draining or gone */
} pp_h3_err;

/* A static English description of a pp_h3_err; never NULL. */
const char *pp_h3_strerror(int err);

typedef struct pp_h3_limits {
  uint32_t max_connections;      /* live connections per server, default 10000 */
  uint32_t max_streams_bidi;     /* initial_max_streams_bidi (concurrent requests), default 100 */
  size_t max_header_list;        /* request field section (name + value + 32 per field) over it:
                                    431 answered by the session. Default 65536. */
  uint64_t max_body_bytes;       /* content-length or body over it: 413 (or reset). 64 MiB. */
  uint32_t stream_window;        /* request-body bytes one stream may have unconsumed, 256 KiB */
  uint32_t conn_window;          /* ... all streams of one connection together; 0 (default):
                                    max_streams_bidi x stream_window (see above) */
  uint32_t body_piece;           /* request-body bytes gathered before on_body, 65520 (one
                                    64 KiB write chunk of the worker link with its header) */
  uint64_t idle_timeout_ns;      /* max_idle_timeout, default 30 s */
  uint64_t handshake_timeout_ns; /* default 10 s */
  uint64_t retry_token_ttl_ns;   /* a Retry token is valid this long, default 10 s */
  size_t max_stream_unacked;     /* response bytes buffered + unacknowledged per stream, 1 MiB */
  size_t max_conn_unacked;       /* ... per connection, default 8 MiB */
  size_t max_initial_datagram;   /* a datagram carrying a client Initial over this is dropped
                                    (default 1500: Initials are padded to about 1200-1472) */
  uint32_t out_queue;            /* datagrams the out queue holds, default 512 */
  int connect_protocol;          /* 1 (default): SETTINGS_ENABLE_CONNECT_PROTOCOL=1 (RFC 9220)
                                    and an extended CONNECT reaches on_request as a tunnel, as
                                    on HTTP/2 (h2.h); 0: nghttp3 refuses :protocol (stream
                                    error H3_MESSAGE_ERROR) */
  uint32_t reset_burst;          /* stateless resets: token bucket burst, default 16 ... */
  uint32_t reset_rate;           /* ... and tokens per second, default 100 */
} pp_h3_limits;

/* Fills *l with the defaults above. */
void pp_h3_limits_default(pp_h3_limits *l);

typedef struct pp_h3_config {
  const char *cert_file, *key_file; /* PEM (the same files as -listen-tls) */
  uint8_t secret[PP_H3_SECRET_LEN]; /* static secret: stateless reset and Retry tokens */
  int retry;                        /* send Retry to every Initial without a valid token */
  pp_h3_limits limits;
  /* Randomness for connection IDs, Retry and ngtcp2 (NULL: gnutls_rnd). */
  void (*rand)(uint8_t *dest, size_t len, void *data);
  /* The Date value (IMF-fixdate) the owner keeps current, sent on the session's own answers
   * (400, 413, ...); NULL: none. The codec reads no clock. */
  const char *date;
} pp_h3_config;

/* Fills *c with the defaults (no files, zero secret, retry off, default limits). */
void pp_h3_config_default(pp_h3_config *c);

/* The request as on h2: every pointer is owned by the session and valid only during the
 * on_request call. */
typedef struct pp_h3_request {
  int64_t stream_id;
  const uint8_t *method, *scheme, *authority, *path;
  size_t method_len, scheme_len, authority_len, path_len; /* authority may be NULL */
  const pp_h2_header *headers; /* regular fields in arrival order, names lowercase */
  size_t header_count;
  int has_content_length;
  uint64_t content_length;
  int end_stream;          /* the request has no body */
  const uint8_t *protocol; /* extended CONNECT (RFC 9220): the :protocol value, else NULL */
  size_t protocol_len;
} pp_h3_request;

typedef struct pp_h3_server pp_h3_server;
typedef struct pp_h3_conn pp_h3_conn;
typedef struct pp_h3_stream pp_h3_stream; /* private (h3.c) */

typedef struct pp_h3_callbacks {
  /* A connection was created for a client Initial: set conn->data (optional). */
  void (*on_conn_open)(pp_h3_server *srv, pp_h3_conn *conn);
  /* The connection is about to be freed (every stream's on_close has run). */
  void (*on_conn_close)(pp_h3_server *srv, pp_h3_conn *conn);
  /* As pp_h2_callbacks.on_request: set *stream_data and return 0, or return a status >= 400
   * the session answers itself (short text/plain body). The owner may answer from inside it
   * (pp_h3_respond, pp_h3_send_data, pp_h3_send_end) and return 0. */
  int (*on_request)(pp_h3_conn *conn, const pp_h3_request *req, void **stream_data);
  /* A piece of request body (valid during the call; up to limits.body_piece bytes gathered
   * from several packets), counted against the windows until pp_h3_consume(). Nonzero: the
   * stream is reset (H3_INTERNAL_ERROR). */
  int (*on_body)(pp_h3_conn *conn, int64_t stream_id, void *stream_data, const uint8_t *data,
                 size_t len);
  /* FIN after a body (never when req->end_stream was set). Nonzero resets the stream. */
  int (*on_body_end)(pp_h3_conn *conn, int64_t stream_id, void *stream_data);
  /* Exactly once for every stream on_request accepted: error_code 0 when the response
   * completed, else the HTTP/3 code (the client's RESET_STREAM / STOP_SENDING code, or
   * H3_REQUEST_CANCELLED when the connection went away with the stream open). */
  void (*on_close)(pp_h3_conn *conn, int64_t stream_id, void *stream_data, uint64_t error_code);
  /* The connection's deadline changed (pp_h3_conn_expiry; UINT64_MAX: none): re-arm its timer.
   * Called at the end of the public call that changed it, outside the engines, only for
   * connections that call touched; never after on_conn_close. Optional: without it, poll
   * pp_h3_server_expiry (a scan over every connection). */
  void (*on_conn_timer)(pp_h3_server *srv, pp_h3_conn *conn, uint64_t expiry_ns);
  /* The client acknowledged response bytes of a stream the owner holds: pending is what
   * pp_h3_stream_pending says now. The backpressure signal to resume reading the worker (the
   * owner may call pp_h3_send_data from here). Optional. */
  void (*on_stream_acked)(pp_h3_conn *conn, int64_t stream_id, void *stream_data, size_t pending);
  /* Optional: as pp_h2_callbacks.on_answered (431, 400, 501, 413 at the header section). */
  void (*on_answered)(pp_h3_conn *conn, const pp_h3_request *req, int status);
} pp_h3_callbacks;

/* Server counters for /stats; monotonic. */
typedef struct pp_h3_stats {
  uint64_t datagrams_in, datagrams_out, bytes_in, bytes_out;
  uint64_t connections;          /* connections created */
  uint64_t handshakes;           /* handshakes completed */
  uint64_t drop_garbage;         /* header does not parse, or not an Initial for a new CID */
  uint64_t drop_unknown_cid;     /* short header for no connection of ours */
  uint64_t drop_bad_version;     /* long header of a version we do not speak */
  uint64_t drop_small_initial;   /* Initial in a datagram under 1200 bytes */
  uint64_t drop_large_initial;   /* Initial in a datagram over limits.max_initial_datagram */
  uint64_t drop_truncated;       /* Initial whose length runs past the datagram */
  uint64_t drop_token_invalid;   /* Retry token that does not verify */
  uint64_t drop_too_many_conns;  /* Initial while max_connections are live */
  uint64_t drop_out_queue_full;  /* datagrams not queued because the out queue was full */
  uint64_t drop_closing;         /* datagrams for a connection in its closing/draining period */
  uint64_t version_negotiations; /* Version Negotiation packets sent */
  uint64_t retries_sent;         /* Retry packets sent */
  uint64_t stateless_resets;     /* stateless resets sent */
  uint64_t resets_rate_limited;  /* stateless resets not sent: bucket empty or packet too short */
  uint64_t stream_limit_errors;  /* connections closed: client opened too many streams */
  uint64_t qpack_errors;         /* connections closed for a QPACK error */
  uint64_t protocol_errors;      /* connections closed for another QUIC / HTTP/3 error */
  uint64_t idle_closes;          /* connections freed at idle or handshake timeout */
  uint64_t streams_accepted;     /* on_request returned 0 */
  uint64_t session_answers;      /* answered by the session: 413, 431, 501, on_request's */
  uint64_t peer_resets;          /* RESET_STREAM received on request streams */
  uint64_t cids_issued;          /* connection IDs handed out (NEW_CONNECTION_ID) */
  uint64_t cids_retired;         /* connection IDs the client retired (removed from the map) */
} pp_h3_stats;

/* One datagram to send: path.local is the address it must leave from. */
typedef struct pp_h3_datagram {
  struct sockaddr_storage local, remote;
  socklen_t local_len, remote_len;
  uint32_t ecn; /* ECN bits to set (IP_TOS / IPV6_TCLASS) */
  size_t len;
  uint8_t data[PP_H3_MAX_DATAGRAM];
} pp_h3_datagram;

/* The server context. The owner allocates it; its fields are private except data and stats. */
struct pp_h3_server {
  const pp_h3_callbacks *cb;
  pp_h3_config cfg; /* a copy (the file names are not kept past init) */
  void *data;       /* the owner's */
  pp_h3_stats stats;

  void *cred;     /* gnutls_certificate_credentials_t */
  void *priority; /* gnutls_priority_t */
  int depth;      /* > 0 while inside a call that may reach ngtcp2 callbacks */

  /* The connection-ID map: chained hash of struct cid_entry (h3.c). */
  void **cid_buckets;
  size_t cid_nbuckets, cid_count;

  pp_h3_conn *conns; /* live connections, doubly linked */
  pp_h3_conn *dirty; /* connections touched since the last flush (singly linked) */
  size_t conn_count;
  void *chunk_free;          /* recycled response chunks */
  pp_h3_stream *stream_free; /* recycled stream records (their buffers too) */
  pp_buf scratch, nvbuf;     /* response header bytes and their nghttp3_nv array */

  pp_h3_datagram *outq; /* ring of cfg.limits.out_queue */
  uint32_t out_head, out_len;
  size_t chunk_free_count, stream_free_count; /* on the free lists (each capped) */

  double reset_tokens; /* stateless reset bucket */
  uint64_t reset_last_ns;
};

/* A connection: allocated and freed by the server. Fields are private except data. */
struct pp_h3_conn {
  pp_h3_server *srv;
  void *data; /* the owner's */
  pp_h3_conn *prev, *next;
  pp_h3_conn *dirty_next; /* on srv->dirty while dirty is set */
  int dirty;
  uint64_t armed; /* the expiry last reported through on_conn_timer */
  struct ngtcp2_conn *qc;
  struct nghttp3_conn *h3;
  void *tls; /* gnutls_session_t */
  struct {
    void *get_conn, *user_data;
  } conn_ref_storage; /* an ngtcp2_crypto_conn_ref (h3.c casts it) */
  struct sockaddr_storage local, remote;
  socklen_t local_len, remote_len;
  uint8_t odcid[20];
  size_t odcid_len;
  int state;      /* enum conn_state (h3.c) */
  int want_write; /* respond/send_data/consume since the last write */
  int handshake_done;
  int goaway;            /* 0 none, 1 notice sent, 2 final GOAWAY sent */
  uint64_t goaway_at;    /* when to send the final GOAWAY */
  uint64_t close_at;     /* end of the closing / draining period */
  uint64_t last_ts;      /* the latest `now` seen */
  uint64_t close_pkt_at; /* when the CONNECTION_CLOSE was last re-sent */
  pp_buf close_pkt;      /* our CONNECTION_CLOSE, re-sent in the closing period */
  pp_h3_stream *streams; /* request streams with a record */
  size_t stream_count;
  size_t unacked;       /* response bytes held for all streams */
  int pending_work;     /* some stream has deferred shutdown work */
  uint64_t ccerr_code;  /* the error to close with, set inside a callback ... */
  int ccerr_kind;       /* ... 0 none, 1 application (HTTP/3), 2 transport */
  int goaway_requested; /* pp_h3_conn_goaway called; done at the next write */
  int body_pend;        /* some stream holds body bytes not yet handed to on_body */
  void *cids;           /* struct cid_entry list of this connection (h3.c) */
};

/* Loads the credentials, builds the GnuTLS priority (TLS 1.3 only) and allocates the out
 * queue. cb must outlive the server; cfg is copied. Returns 0, or PP_H3_ECERT / PP_H3_ETLS /
 * PP_H3_EINVAL (then nothing is to be disposed). */
int pp_h3_server_init(pp_h3_server *srv, const pp_h3_callbacks *cb, const pp_h3_config *cfg,
                      void *data);

/* Frees every connection (on_close(H3_REQUEST_CANCELLED) for held streams, then on_conn_close)
 * and everything the server allocated. No packet is sent. Not from a callback. */
void pp_h3_server_dispose(pp_h3_server *srv);

/* Handles one received datagram. local is the address it arrived on (the listener's concrete
 * address), remote the client's; ecn the ECN bits received (0 if unknown). Replies and the
 * connection's own packets go to the out queue. Returns 0 (also when the datagram was dropped:
 * see stats), or PP_H3_EREENTER / PP_H3_EINVAL. */
int pp_h3_server_recv(pp_h3_server *srv, const uint8_t *pkt, size_t len,
                      const struct sockaddr *local, socklen_t local_len,
                      const struct sockaddr *remote, socklen_t remote_len, uint32_t ecn,
                      uint64_t now_ns);

/* Writes what every connection marked since its last write has to send (responses submitted
 * outside a recv, consumed body bytes, work stopped by a full out queue). Call it after
 * answering requests and after draining the out queue. Returns 0 or PP_H3_EREENTER. */
int pp_h3_server_flush(pp_h3_server *srv, uint64_t now_ns);

/* The oldest queued datagram, or NULL when the queue is empty. Valid until pop. */
const pp_h3_datagram *pp_h3_server_out_peek(pp_h3_server *srv);
/* The i-th queued datagram from the oldest (0: the same as peek), or NULL past the end; valid
 * until pop. For sending several with one sendmmsg. */
const pp_h3_datagram *pp_h3_server_out_at(pp_h3_server *srv, size_t i);
/* Removes the oldest queued datagram (after it was sent, or given up). */
void pp_h3_server_out_pop(pp_h3_server *srv);
/* Datagrams queued. */
size_t pp_h3_server_out_count(const pp_h3_server *srv);

/* The earliest expiry over all connections (UINT64_MAX: none). Re-read it after every call. */
uint64_t pp_h3_server_expiry(pp_h3_server *srv);
/* Runs pp_h3_conn_handle_expiry for every connection whose expiry is <= now (and frees the
 * connections that ended). Returns 0 or PP_H3_EREENTER. */
int pp_h3_server_handle_expiry(pp_h3_server *srv, uint64_t now_ns);

/* Graceful drain of every connection (pp_h3_conn_goaway). Returns 0 or PP_H3_EREENTER. */
int pp_h3_server_shutdown(pp_h3_server *srv, uint64_t now_ns);

/* Live connections. */
size_t pp_h3_server_conn_count(const pp_h3_server *srv);

/* The connection's next deadline (loss detection, ACK delay, PTO, idle, closing period, the
 * final GOAWAY), monotonic ns; UINT64_MAX if none. */
uint64_t pp_h3_conn_expiry(pp_h3_conn *conn);
/* Handles the connection's timer at now and writes what it has to send; may free the
 * connection (idle timeout, end of closing/draining): the pointer is then invalid and 1 is
 * returned. Returns 0, 1, or PP_H3_EREENTER. */
int pp_h3_conn_handle_expiry(pp_h3_conn *conn, uint64_t now_ns);

/* Graceful drain: a GOAWAY notice now, the final GOAWAY (last accepted stream) two PTOs later;
 * streams already open finish; once none remain, CONNECTION_CLOSE(H3_NO_ERROR). Idempotent. */
void pp_h3_conn_goaway(pp_h3_conn *conn);

/* Nonzero once the handshake completed. */
int pp_h3_conn_handshake_done(const pp_h3_conn *conn);
/* Keep-alive: after interval_ns without traffic the connection sends a PING, so a connection
 * whose streams are long-lived and quiet (WebSockets) outlives limits.idle_timeout_ns while the
 * peer answers; 0 turns it off (the default). */
void pp_h3_conn_keep_alive(pp_h3_conn *conn, uint64_t interval_ns);

/* As pp_h2_respond: pairs filtered, lowercased and "\n"-split, copied. 1xx other than 101 is
 * interim. no_body implied for HEAD and 204/304. Returns 0, PP_H3_ESTREAM or PP_H3_EINVAL. */
int pp_h3_respond(pp_h3_conn *conn, int64_t stream_id, int status, const pp_h2_header *pairs,
                  size_t n, int no_body);

/* Copies len body bytes into the stream's chunks and resumes it. Allowed before respond.
 * Returns 0, PP_H3_ESTREAM, or PP_H3_EFULL (nothing copied: the stream would hold more than
 * max_stream_unacked, or the connection more than max_conn_unacked). */
int pp_h3_send_data(pp_h3_conn *conn, int64_t stream_id, const uint8_t *data, size_t len);

/* How many bytes pp_h3_send_data would take now (0 when the stream's or the connection's
 * unacknowledged bound is reached, or no such stream). */
size_t pp_h3_send_room(pp_h3_conn *conn, int64_t stream_id);

/* The response is complete: FIN follows the buffered data. Returns 0 or PP_H3_ESTREAM. */
int pp_h3_send_end(pp_h3_conn *conn, int64_t stream_id);

/* Response bytes of the stream not yet acknowledged by the client (buffered or in flight). */
size_t pp_h3_stream_pending(pp_h3_conn *conn, int64_t stream_id);
/* The same over the connection. */
size_t pp_h3_pending_total(pp_h3_conn *conn);

/* The owner took n request-body bytes: only now is the client's flow-control credit
 * (MAX_STREAM_DATA, MAX_DATA) extended by n. Capped at what was delivered and not consumed. */
void pp_h3_consume(pp_h3_conn *conn, int64_t stream_id, size_t n);

/* Replaces the owner's pointer of a stream it holds (later callbacks get stream_data); nothing
 * for an unknown stream or one no longer the owner's. */
void pp_h3_set_stream_data(pp_h3_conn *conn, int64_t stream_id, void *stream_data);

/* Resets the stream both ways (RESET_STREAM + STOP_SENDING with error_code, an HTTP/3 code
 * such as H3_REQUEST_CANCELLED 0x10c). on_close follows with that code. */
void pp_h3_reset(pp_h3_conn *conn, int64_t stream_id, uint64_t error_code);

/* Request streams with a record. */
size_t pp_h3_stream_count(const pp_h3_conn *conn);

#endif
