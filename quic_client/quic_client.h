/* The QUIC client kit: one HTTP/3 client connection set up the same way for every program of
 * the project that speaks QUIC as a client (pp-bench's generator, bench/gen/gen_h3.c; the
 * in-process test client of server/tests/test_h3.c and fuzz/gen_h3_corpus.c; h3-upload, ws-h3),
 * plus the few pieces a QUIC server shares with them (pp-bench's HTTP/3 reference server).
 *
 * Stack: ngtcp2 0.12 with the GnuTLS crypto backend (libngtcp2_crypto_gnutls), TLS 1.3 only
 * (PP_QC_TLS_PRIORITY), QUIC v1, and an nghttp3 0.8 client connection started as soon as the
 * handshake completed (control stream and the two QPACK streams bound). The kit owns the
 * connection objects and the glue between ngtcp2 and nghttp3 (stream data in, acknowledged
 * offsets, stream close and reset, flow-control unblocking); the caller owns the socket (or the
 * in-memory link), the clock, its nghttp3 response callbacks and what it does with responses
 * (quic_udp.h is the socket edge of the clients that talk to a real server).
 *
 * The server certificate is NOT verified: every user talks to loopback or in-memory servers
 * with development certificates (the credentials the caller passes may be empty).
 *
 * Workload assumed: a handful to a few thousand connections per process, one thread per
 * connection set. Nothing here allocates per packet; callbacks only record (h3_failed). */
#ifndef PP_QUIC_CLIENT_H
#define PP_QUIC_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <gnutls/gnutls.h>
#include <nghttp3/nghttp3.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>

/* TLS 1.3 only (RFC 9001), the cipher suites and groups QUIC defines, no middlebox
 * compatibility mode: the GnuTLS priority string of every QUIC endpoint here, client or server. */
#define PP_QC_TLS_PRIORITY                                                                         \
  "NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+AES-128-GCM:+AES-256-GCM:+CHACHA20-POLY1305:"        \
  "+AES-128-CCM:-GROUP-ALL:+GROUP-X25519:+GROUP-SECP256R1:+GROUP-SECP384R1:+GROUP-SECP521R1:"      \
  "%DISABLE_TLS13_COMPAT_MODE"

/* Errors of pp_qc_* (negative). */
enum {
  PP_QC_ENOMEM = -1,   /* ngtcp2_conn_client_new or gnutls_init failed */
  PP_QC_ETLS = -2,     /* the GnuTLS session could not be configured (priority, ALPN, SNI, ...) */
  PP_QC_ERESOLVE = -3, /* quic_udp.h: the host and port did not resolve */
  PP_QC_ESOCKET = -4,  /* quic_udp.h: the UDP socket could not be made or connected (errno) */
};

/* ngtcp2 callbacks any endpoint may use, client or server: randomness from GnuTLS
 * (rand), and new connection IDs with stateless-reset tokens from the same source
 * (get_new_connection_id; NGTCP2_ERR_CALLBACK_FAILURE if GnuTLS fails). */
void pp_qc_rand_cb(uint8_t *dest, size_t len, const ngtcp2_rand_ctx *ctx);
int pp_qc_new_cid_cb(ngtcp2_conn *qc, ngtcp2_cid *cid, uint8_t *token, size_t cidlen, void *ud);

/* A random connection ID of `len` bytes (at most NGTCP2_MAX_CIDLEN). */
void pp_qc_random_cid(ngtcp2_cid *cid, size_t len);

typedef struct pp_qc_session pp_qc_session;

/* One client connection. The caller allocates it (zeroed or not; pp_qc_client_new fills it) and
 * must keep it at one address while the connection lives (ngtcp2 holds a pointer to it). */
struct pp_qc_session {
  ngtcp2_conn *qc;      /* owned */
  nghttp3_conn *h3;     /* owned; NULL until the handshake completed and HTTP/3 started */
  gnutls_session_t tls; /* owned */
  ngtcp2_crypto_conn_ref ref;
  struct sockaddr_storage local, remote; /* the path (copied from the config) */
  ngtcp2_socklen local_len, remote_len;
  bool handshake_done;
  bool h3_failed; /* nghttp3 refused something inside an ngtcp2 callback (the callback failed) */
  /* Set by the caller before the handshake completes: */
  const nghttp3_callbacks *h3_callbacks; /* the caller's response callbacks */
  void *data; /* the caller's: nghttp3's conn_user_data, and free for the caller's use */
  /* Optional: called from ngtcp2's handshake_completed callback once HTTP/3 was started (h3 set)
   * or failed to start (h3 NULL: the callback then fails the connection). Must not call back into
   * ngtcp2's read or write functions. */
  void (*on_handshake)(pp_qc_session *s);
};

/* Fills `cbs` with the callbacks pp_qc_client_new uses by default: the GnuTLS crypto callbacks,
 * pp_qc_rand_cb, pp_qc_new_cid_cb, the kit's handshake_completed (starts HTTP/3), and the
 * ngtcp2 -> nghttp3 glue (recv_stream_data, acked_stream_data_offset, stream_close, stream_reset,
 * extend_max_stream_data). A caller that wants more (recv_new_token, stream_stop_sending) fills
 * a table with this, adds its own, and passes it in pp_qc_client_config.callbacks. Every
 * callback is handed the pp_qc_session as its user data. */
void pp_qc_client_callbacks(ngtcp2_callbacks *cbs);

/* Optional glue callback (not in the default set): STOP_SENDING from the server stops nghttp3
 * reading the stream. */
int pp_qc_stream_stop_sending_cb(ngtcp2_conn *qc, int64_t id, uint64_t code, void *ud, void *sud);

/* A client's transport parameters as the clients here set them: ngtcp2's defaults, three
 * unidirectional streams (the server's control and QPACK streams) with 1 MiB each,
 * stream_window bytes on each bidirectional stream we open, conn_window on the connection,
 * and idle_timeout (ns). */
void pp_qc_client_params(ngtcp2_transport_params *params, uint64_t stream_window,
                         uint64_t conn_window, ngtcp2_duration idle_timeout);

typedef struct pp_qc_client_config {
  const struct sockaddr *local; /* the path: local address (the socket's own) */
  socklen_t local_len;
  const struct sockaddr *remote; /* the server */
  socklen_t remote_len;
  const ngtcp2_transport_params *params; /* the client's transport parameters (copied) */
  uint64_t initial_ts;                   /* the connection's clock start, ns */
  const uint8_t *token;                  /* optional: a NEW_TOKEN token to present */
  size_t token_len;
  const ngtcp2_callbacks *callbacks;     /* NULL: pp_qc_client_callbacks's set */
  gnutls_certificate_credentials_t cred; /* the caller's (may hold nothing: no verification) */
  const char *alpn;                      /* ALPN offered, mandatory ("h3") */
  const char *sni;                       /* server name ("localhost") */
} pp_qc_client_config;

/* Creates the ngtcp2 client connection (QUIC v1, random 18-byte destination and 16-byte source
 * connection IDs) and its GnuTLS session, and ties them together. `s->h3_callbacks`, `s->data`
 * and `s->on_handshake` are kept as the caller set them. Returns 0, PP_QC_ENOMEM or PP_QC_ETLS;
 * on failure whatever was created is left in `s` for pp_qc_session_dispose. Nothing is sent:
 * the caller writes the Initial. */
int pp_qc_client_new(pp_qc_session *s, const pp_qc_client_config *cfg);

/* The session's path, for ngtcp2_conn_read_pkt. Points into `s`. */
void pp_qc_session_path(pp_qc_session *s, ngtcp2_path *path);

/* One packet of what the connection has to send: stream data nghttp3 has ready (while the
 * connection has flow-control credit), ACKs, handshake and control frames. Writes at most
 * `buflen` bytes into `buf` and returns their length, 0 when there is nothing to send, or a
 * negative ngtcp2 error. An nghttp3 error (its writev failed) is returned as
 * NGTCP2_ERR_CALLBACK_FAILURE with `*h3_error` set to the nghttp3 code (0 otherwise). */
ngtcp2_ssize pp_qc_write_packet(pp_qc_session *s, uint8_t *buf, size_t buflen, ngtcp2_tstamp ts,
                                int *h3_error);

/* ---- nghttp3 -> ngtcp2 glue (the other direction) ----
 * The client's nghttp3 callbacks that only pass a stream's state on to ngtcp2. They find the
 * session through nghttp3's user data, pp_qc_session.data: a caller that uses them sets it to
 * the session itself or to its own record whose first member is the session. */

/* Fills `cbs` with the glue (deferred_consume and the caller's recv_data through
 * pp_qc_consumed: flow-control credit back; stop_sending and reset_stream: the QUIC stream's
 * read or write side shut), the rest zero: the caller adds its own response callbacks
 * (recv_header, recv_data, end_stream, stream_close, ...) and keeps the table as long as the
 * session. */
void pp_qc_h3_client_callbacks(nghttp3_callbacks *cbs);

/* `n` bytes of stream `id` were consumed: gives their flow-control credit back to the server
 * (the stream's and the connection's). What a recv_data callback calls for the body it took. */
void pp_qc_consumed(pp_qc_session *s, int64_t id, size_t n);

/* Frees the nghttp3 connection, the ngtcp2 connection and the GnuTLS session (any may be NULL)
 * and sets them to NULL. The credentials are the caller's. */
void pp_qc_session_dispose(pp_qc_session *s);

#endif
