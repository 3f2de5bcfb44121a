/* The TLS filter: server-side TLS over OpenSSL 3.0 memory BIOs, without I/O.
 *
 * The owner (the libuv glue) reads ciphertext from a socket and hands it to
 * pp_tls_conn_feed(), which appends the plaintext it decrypts to one buffer and the bytes
 * that must go back to the peer (handshake flights, alerts, session tickets) to another; the
 * owner writes the second to the socket. Plaintext to send goes through pp_tls_conn_write().
 * Nothing here touches a socket, a timer or a thread, and no call ever blocks: OpenSSL reads
 * from and writes to two BIO_s_mem, and the write BIO is drained into the caller's buffer
 * after every SSL call, so it never holds bytes between calls.
 *
 * Workload assumed: many concurrent connections per pp_tls_ctx, each receiving reads of up to
 * a few tens of KiB. Ciphertext is handed to OpenSSL at most PP_TLS_FEED_CHUNK bytes at a
 * time and the plaintext is read out before the next chunk goes in, so the read BIO of a
 * connection never holds more than one chunk however much a peer sends in one read. In steady
 * state the filter allocates no buffer per record (OpenSSL's record buffers are kept, the
 * memory BIOs reuse their storage, the caller's pp_bufs stop growing); OpenSSL 3.0 itself
 * still makes a few 40-byte bookkeeping allocations per record.
 *
 * Protocol: TLS 1.2 minimum, 1.3 preferred, no renegotiation, ECDHE with AEAD ciphers only
 * for TLS 1.2 (all of them allowed by RFC 9113 §9.2.2 for HTTP/2), OpenSSL's TLS 1.3 suites,
 * stateless session tickets. ALPN in server preference order: "h2" (when offered) then
 * "http/1.1"; a client without ALPN, or with only protocols we do not speak, gets no ALPN
 * answer and HTTP/1.1 (the handshake still succeeds).
 *
 * Errors are negative pp_tls_error codes (pp_tls_strerror). A connection failure is also
 * described by a pp_tls_cause for the /stats counters (pp_tls_cause_name). Each call that
 * takes a pp_tls_conn or pp_tls_ctx clears OpenSSL's thread-local error queue when it starts
 * and before it returns, so one connection's error never shows up in another's call. */
#ifndef PP_TLS_H
#define PP_TLS_H

#include <stddef.h>
#include <stdint.h>

#include "server/base/buf.h"

/* OpenSSL's types, so that this header does not pull in <openssl/ssl.h>. */
struct ssl_ctx_st;
struct ssl_st;
struct bio_st;

#define PP_TLS_FEED_CHUNK      (16 * 1024) /* ciphertext handed to OpenSSL per step */
#define PP_TLS_FINGERPRINT_LEN 96          /* "AB:CD:...": 32 bytes as 95 chars + NUL */
#define PP_TLS_PATH_MAX        4096        /* longest certificate/key path kept */

typedef enum pp_tls_error {
  PP_TLS_OK = 0,
  PP_TLS_EINVAL = -1,    /* bad argument, or an output buffer too small for the result */
  PP_TLS_ECERT = -2,     /* the certificate file cannot be read or holds no certificate */
  PP_TLS_EKEY = -3,      /* the key file cannot be read or holds no private key */
  PP_TLS_EMISMATCH = -4, /* the private key does not belong to the certificate */
  PP_TLS_ESSL = -5,      /* OpenSSL failed otherwise (allocation, key generation, signing) */
  PP_TLS_EIO = -6,       /* the development certificate could not be written */
  PP_TLS_ENOTREADY = -7, /* pp_tls_conn_write or _shutdown before the handshake completed */
  PP_TLS_ECLOSED = -8,   /* pp_tls_conn_write after pp_tls_conn_shutdown */
  /* Connection failures, one per pp_tls_cause; sticky: every later feed/write returns it. */
  PP_TLS_ENOTTLS = -9,     /* PP_TLS_CAUSE_NOT_TLS */
  PP_TLS_EHANDSHAKE = -10, /* PP_TLS_CAUSE_HANDSHAKE */
  PP_TLS_EALERT = -11,     /* PP_TLS_CAUSE_ALERT */
  PP_TLS_EEOF = -12,       /* PP_TLS_CAUSE_EOF_HANDSHAKE (close_notify during the handshake) */
  PP_TLS_EPROTO = -13,     /* PP_TLS_CAUSE_PROTOCOL */
} pp_tls_error;

/* A static English description of a pp_tls_error ("unknown error" for any other value). */
const char *pp_tls_strerror(int err);

/* Why a connection failed, for counters by cause. */
typedef enum pp_tls_cause {
  PP_TLS_CAUSE_NONE = 0,      /* no failure (or a clean close) */
  PP_TLS_CAUSE_NOT_TLS,       /* the first bytes are not a TLS handshake record (e.g. HTTP) */
  PP_TLS_CAUSE_HANDSHAKE,     /* handshake failed: no shared version/cipher, bad ClientHello */
  PP_TLS_CAUSE_ALERT,         /* the peer sent a fatal alert (during or after the handshake) */
  PP_TLS_CAUSE_EOF_HANDSHAKE, /* the peer closed after starting, before finishing, the handshake */
  PP_TLS_CAUSE_PROTOCOL,      /* a protocol error after the handshake (bad record, MAC, ...) */
  PP_TLS_CAUSE_COUNT
} pp_tls_cause;

/* A static snake_case name for a cause: "none", "not_tls", "handshake_failed",
 * "alert_received", "closed_mid_handshake", "protocol_error"; "unknown" out of range. */
const char *pp_tls_cause_name(pp_tls_cause cause);

/* ---- the server context ---- */

/* One per TLS listener, allocated by the caller; pp_tls_ctx_init pairs with _dispose. */
typedef struct pp_tls_ctx {
  struct ssl_ctx_st *ssl_ctx;      /* the current context: new connections take a reference */
  char cert_file[PP_TLS_PATH_MAX]; /* PEM: the certificate, then its chain */
  char key_file[PP_TLS_PATH_MAX];  /* PEM private key */
  int offer_h2;                    /* ALPN offers "h2" before "http/1.1" */
  uint64_t reloads;                /* successful pp_tls_ctx_reload calls */
  void *data;                      /* the owner's */
} pp_tls_ctx;

/* Loads cert_file (certificate chain) and key_file, checks that the key matches the
 * certificate, and builds the SSL_CTX. The paths are copied. Returns 0, or PP_TLS_EINVAL,
 * _ECERT, _EKEY, _EMISMATCH, _ESSL with a one-line reason (naming the file) written to err
 * (NUL-terminated, truncated to errlen; err may be NULL). On failure *t holds nothing to
 * dispose (disposing it is harmless). */
int pp_tls_ctx_init(pp_tls_ctx *t, const char *cert_file, const char *key_file, int offer_h2,
                    char *err, size_t errlen);

/* SIGHUP: reads the same two files again into a new SSL_CTX. On success new connections use
 * it and the old one lives on, refcounted, until its last connection is disposed (session
 * tickets issued under the old context do not resume under the new one: those clients do a
 * full handshake). Returns 0, or the codes of pp_tls_ctx_init with err filled; on failure
 * the old pair stays in use. */
int pp_tls_ctx_reload(pp_tls_ctx *t, char *err, size_t errlen);

/* Writes the SHA-256 fingerprint of the current certificate as "AB:CD:..." (uppercase hex,
 * colon-separated, 95 chars) into out. Returns 0, or PP_TLS_EINVAL if len is below
 * PP_TLS_FINGERPRINT_LEN or there is no certificate. */
int pp_tls_ctx_fingerprint(const pp_tls_ctx *t, char *out, size_t len);

/* Drops the context's reference to its SSL_CTX. Connections still alive keep theirs and
 * stay usable; the pp_tls_ctx itself may be freed after this. */
void pp_tls_ctx_dispose(pp_tls_ctx *t);

/* A development certificate for when none is given: a fresh EC P-256 key and a self-signed
 * X.509 v3 certificate, CN localhost, subjectAltName DNS:localhost, IP:127.0.0.1, IP:::1,
 * serverAuth, valid from now for 30 days, random positive 16-octet serial (126 random bits).
 * Writes dir/dev-cert.pem (mode 0644) and dir/dev-key.pem (mode 0600, PKCS#8), each through
 * a temporary file renamed into place, replacing any earlier pair. Fills cert_path and
 * key_path with the two paths and fingerprint with the certificate's SHA-256 fingerprint
 * ("AB:CD:...", which needs PP_TLS_FINGERPRINT_LEN bytes). Returns 0, or PP_TLS_EINVAL (a
 * buffer too small, dir missing), PP_TLS_ESSL, PP_TLS_EIO with err filled. */
int pp_tls_dev_cert(const char *dir, char *cert_path, size_t cert_len, char *key_path,
                    size_t key_len, char *fingerprint, size_t fp_len, char *err, size_t errlen);

/* ---- one connection ---- */

/* One per accepted client, allocated by the caller; it must not move between _init and
 * _dispose. Fields are read-only for the owner except `data`. */
typedef struct pp_tls_conn {
  struct ssl_st *ssl; /* owns both BIOs and a reference to its SSL_CTX */
  struct bio_st *rbio, *wbio;
  int handshake_done;
  int peer_closed;   /* close_notify received */
  int shutdown_sent; /* pp_tls_conn_shutdown appended our close_notify */
  int error;         /* sticky pp_tls_error of a failed connection, else 0 */
  pp_tls_cause cause;
  const char *reason; /* after a failure: a static description for the log (OpenSSL's) */
  uint8_t first[4];   /* the first bytes received: tell "not TLS" from a bad handshake */
  uint64_t bytes_in;  /* ciphertext bytes fed */
  size_t rbio_peak;   /* the most ciphertext the read BIO ever held (bounded by one chunk) */
  void *data;         /* the owner's */
} pp_tls_conn;

/* Starts a server-side connection under t's current SSL_CTX (taking a reference, so a later
 * reload or even pp_tls_ctx_dispose does not affect it). Returns 0 or PP_TLS_ESSL. On failure
 * nothing needs disposing (disposing is harmless). */
int pp_tls_conn_init(pp_tls_conn *c, pp_tls_ctx *t);

/* Gives OpenSSL's record buffers (about 34 KiB) back while the connection is idle; the next
 * record allocates them again. No-op while a record is in progress. Not per record: that
 * would be two allocations per request (SSL_MODE_RELEASE_BUFFERS). */
void pp_tls_conn_release_buffers(pp_tls_conn *c);

/* Frees the connection's OpenSSL state. Never sends anything (call _shutdown first for a
 * clean close). Safe on a zeroed or failed-to-init conn. */
void pp_tls_conn_dispose(pp_tls_conn *c);

/* Ciphertext received from the peer: plaintext is appended to *plain and bytes to send back
 * (handshake flights, alerts, session tickets, key updates) to *wire, which the caller must
 * write to the peer even when this fails. `in` is only read during the call. Returns 0 (all
 * of `in` consumed; more may be needed), or a negative connection failure (PP_TLS_ENOTTLS,
 * _EHANDSHAKE, _EALERT, _EEOF, _EPROTO; see c->cause and c->reason): the connection must
 * close after *wire is sent. Failures are sticky: every later call returns the same code and
 * appends nothing. After close_notify (c->peer_closed) further bytes are discarded and 0 is
 * returned; the owner answers with pp_tls_conn_shutdown when it is done writing. */
int pp_tls_conn_feed(pp_tls_conn *c, const uint8_t *in, size_t len, pp_buf *plain, pp_buf *wire);

/* Plaintext to send: appends its records to *wire. Only after the handshake: the server never
 * speaks first (no early data is accepted), so before it this refuses with PP_TLS_ENOTREADY
 * and appends nothing. Writing after the peer's close_notify is allowed (half-close). Returns
 * 0 (all of data encrypted), PP_TLS_ENOTREADY, PP_TLS_ECLOSED (after _shutdown), the sticky
 * failure of the connection, or PP_TLS_EPROTO if OpenSSL refuses (then sticky too). */
int pp_tls_conn_write(pp_tls_conn *c, const uint8_t *data, size_t len, pp_buf *wire);

/* Appends our close_notify alert to *wire (once; later calls append nothing). Returns 0,
 * PP_TLS_ENOTREADY if the handshake never completed (nothing to send: just close), or the
 * sticky failure (nothing to send either). */
int pp_tls_conn_shutdown(pp_tls_conn *c, pp_buf *wire);

/* 1 once the handshake has completed, else 0. */
int pp_tls_conn_handshake_done(const pp_tls_conn *c);

/* After the handshake, the ALPN protocol agreed: "h2", "http/1.1", or NULL when the client sent
 * no ALPN or none we speak (then it is HTTP/1.1). A static string. NULL before the handshake. */
const char *pp_tls_conn_alpn(const pp_tls_conn *c);

/* The protocol version in use, "TLSv1.3" or "TLSv1.2" (static), or NULL before the handshake. */
const char *pp_tls_conn_version(const pp_tls_conn *c);

/* 1 once the peer's close_notify has been received, else 0. */
int pp_tls_conn_peer_closed(const pp_tls_conn *c);

/* The cause of the connection's failure so far (PP_TLS_CAUSE_NONE if none). */
pp_tls_cause pp_tls_conn_cause(const pp_tls_conn *c);

/* The socket hit EOF (the glue calls this once, then disposes). Returns the failure cause:
 * the one already recorded if the connection had failed; PP_TLS_CAUSE_EOF_HANDSHAKE if bytes
 * of a handshake had arrived but it had not completed (recorded, so it is also
 * pp_tls_conn_cause afterwards); PP_TLS_CAUSE_NONE when no byte ever arrived (a TCP probe is
 * not a TLS failure) and after a completed handshake, with or without close_notify (HTTP
 * framing, not TLS, tells a truncated response). */
pp_tls_cause pp_tls_conn_eof(pp_tls_conn *c);

#endif
