/* The TLS filter (tls.h): OpenSSL 3.0 server connections over memory BIOs, the SSL_CTX
 * lifecycle (load, SIGHUP reload) and the development certificate.
 *
 * Every connection call follows one pattern: clear the error queue, push at most
 * PP_TLS_FEED_CHUNK bytes into the read BIO, run the handshake or read plaintext until
 * OpenSSL wants more input, move whatever it wrote into the caller's wire buffer, repeat; then
 * clear the error queue again. A failure is classified once (pp_tls_cause) from what OpenSSL
 * put on the error queue and from the first bytes of the stream, and then sticks. */
#include "server/proto/tls.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

/* ALPN wire lists (length-prefixed), in server preference order; the select callback points
 * into them (or the client's list) and OpenSSL copies the selection into the session. */
static const unsigned char alpn_h2_h1[] = "\x02h2\x08http/1.1";
static const unsigned char alpn_h1[] = "\x08http/1.1";

/* TLS 1.2 suites: ECDHE + AEAD only (Mozilla "intermediate" without DHE). TLS 1.3 suites are
 * OpenSSL's defaults (AES-GCM, ChaCha20-Poly1305). */
static const char tls12_ciphers[] = "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
                                    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
                                    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

#define PLAIN_STEP 16384 /* plaintext read per SSL_read: one full record */

const char *pp_tls_strerror(int err) {
  switch (err) {
  case PP_TLS_OK: return "success";
  case PP_TLS_EINVAL: return "invalid argument or buffer too small";
  case PP_TLS_ECERT: return "certificate file unreadable or invalid";
  case PP_TLS_EKEY: return "private key file unreadable or invalid";
  case PP_TLS_EMISMATCH: return "private key does not match the certificate";
  case PP_TLS_ESSL: return "OpenSSL failure";
  case PP_TLS_EIO: return "cannot write the development certificate";
  case PP_TLS_ENOTREADY: return "TLS handshake not complete";
  case PP_TLS_ECLOSED: return "TLS connection already shut down";
  case PP_TLS_ENOTTLS: return "peer did not speak TLS";
  case PP_TLS_EHANDSHAKE: return "TLS handshake failed";
  case PP_TLS_EALERT: return "TLS alert received from the peer";
  case PP_TLS_EEOF: return "peer closed during the TLS handshake";
  case PP_TLS_EPROTO: return "TLS protocol error";
  }
  return "unknown error";
}

const char *pp_tls_cause_name(pp_tls_cause cause) {
  switch (cause) {
  case PP_TLS_CAUSE_NONE: return "none";
  case PP_TLS_CAUSE_NOT_TLS: return "not_tls";
  case PP_TLS_CAUSE_HANDSHAKE: return "handshake_failed";
  case PP_TLS_CAUSE_ALERT: return "alert_received";
  case PP_TLS_CAUSE_EOF_HANDSHAKE: return "closed_mid_handshake";
  case PP_TLS_CAUSE_PROTOCOL: return "protocol_error";
  case PP_TLS_CAUSE_COUNT: break;
  }
  return "unknown";
}

static int error_of_cause(pp_tls_cause cause) {
  switch (cause) {
  case PP_TLS_CAUSE_NOT_TLS: return PP_TLS_ENOTTLS;
  case PP_TLS_CAUSE_HANDSHAKE: return PP_TLS_EHANDSHAKE;
  case PP_TLS_CAUSE_ALERT: return PP_TLS_EALERT;
  case PP_TLS_CAUSE_EOF_HANDSHAKE: return PP_TLS_EEOF;
  default: return PP_TLS_EPROTO;
  }
}

/* Formats into err (if any) and returns code, so failures read `return fail(...)`. Appends
 * OpenSSL's first queued reason when `with_ssl` is set, then clears the queue. */
static int say(int code, int with_ssl, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int say(int code, int with_ssl, char *err, size_t errlen, const char *fmt, ...) {
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    unsigned long e = with_ssl ? ERR_peek_error() : 0;
    if (e && n >= 0 && (size_t)n < errlen) {
      const char *r = ERR_reason_error_string(e);
      snprintf(err + n, errlen - (size_t)n, ": %s", r ? r : "OpenSSL error");
    }
  }
  ERR_clear_error();
  return code;
}

/* ---- the server context ---- */

static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned int inlen, void *arg) {
  (void)ssl;
  const unsigned char *server = arg;
  unsigned int server_len = (unsigned int)strlen((const char *)server);
  unsigned char *chosen = NULL;
  unsigned char chosen_len = 0;
  /* SSL_select_next_proto walks the server's list first: server preference. When nothing
   * matches it still "selects" the client's first entry; we answer with no ALPN instead. */
  if (SSL_select_next_proto(&chosen, &chosen_len, server, server_len, in, inlen) !=
      OPENSSL_NPN_NEGOTIATED)
    return SSL_TLSEXT_ERR_NOACK;
  *out = chosen;
  *outlen = chosen_len;
  return SSL_TLSEXT_ERR_OK;
}

/* Why a file cannot be opened, if it cannot: OpenSSL's own message for a missing file is
 * "system lib", which names neither the file nor the errno. */
static int unreadable(const char *path, int *saved_errno) {
  FILE *f = fopen(path, "r");
  if (!f) {
    *saved_errno = errno;
    return 1;
  }
  fclose(f);
  return 0;
}

static int build_ctx(SSL_CTX **out, const char *cert_file, const char *key_file, int offer_h2,
                     char *err, size_t errlen) {
  *out = NULL;
  ERR_clear_error();
  int e;
  if (unreadable(cert_file, &e))
    return say(PP_TLS_ECERT, 0, err, errlen, "certificate %s: %s", cert_file, strerror(e));
  if (unreadable(key_file, &e))
    return say(PP_TLS_EKEY, 0, err, errlen, "private key %s: %s", key_file, strerror(e));

  SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
  if (!ctx) return say(PP_TLS_ESSL, 1, err, errlen, "SSL_CTX_new");
  int rc = PP_TLS_ESSL;
  if (!SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) ||
      !SSL_CTX_set_cipher_list(ctx, tls12_ciphers)) {
    rc = say(PP_TLS_ESSL, 1, err, errlen, "TLS settings");
    goto fail;
  }
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
  /* The default session cache is for session IDs (TLS 1.2 without tickets); tickets need no
   * server state, and a per-process cache would only grow with clients. */
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_alpn_select_cb(ctx, alpn_select, (void *)(offer_h2 ? alpn_h2_h1 : alpn_h1));

  if (SSL_CTX_use_certificate_chain_file(ctx, cert_file) != 1) {
    rc = say(PP_TLS_ECERT, 1, err, errlen, "certificate %s", cert_file);
    goto fail;
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, key_file, SSL_FILETYPE_PEM) != 1) {
    unsigned long last = ERR_peek_last_error();
    int mismatch = ERR_GET_REASON(last) == X509_R_KEY_VALUES_MISMATCH;
    rc = mismatch ? say(PP_TLS_EMISMATCH, 0, err, errlen,
                        "private key %s does not match certificate %s", key_file, cert_file)
                  : say(PP_TLS_EKEY, 1, err, errlen, "private key %s", key_file);
    goto fail;
  }
  if (SSL_CTX_check_private_key(ctx) != 1) {
    rc = say(PP_TLS_EMISMATCH, 0, err, errlen, "private key %s does not match certificate %s",
             key_file, cert_file);
    goto fail;
  }
  *out = ctx;
  ERR_clear_error();
  return 0;
fail:
  SSL_CTX_free(ctx);
  return rc;
}

int pp_tls_ctx_init(pp_tls_ctx *t, const char *cert_file, const char *key_file, int offer_h2,
                    char *err, size_t errlen) {
  memset(t, 0, sizeof *t);
  if (!cert_file || !key_file) return say(PP_TLS_EINVAL, 0, err, errlen, "no certificate/key");
  if (strlen(cert_file) >= sizeof t->cert_file || strlen(key_file) >= sizeof t->key_file)
    return say(PP_TLS_EINVAL, 0, err, errlen, "certificate or key path too long");
  SSL_CTX *ctx;
  int rc = build_ctx(&ctx, cert_file, key_file, offer_h2, err, errlen);
  if (rc) return rc;
  t->ssl_ctx = ctx;
  memcpy(t->cert_file, cert_file, strlen(cert_file) + 1);
  memcpy(t->key_file, key_file, strlen(key_file) + 1);
  t->offer_h2 = offer_h2 ? 1 : 0;
  return 0;
}

int pp_tls_ctx_reload(pp_tls_ctx *t, char *err, size_t errlen) {
  if (!t->ssl_ctx) return say(PP_TLS_EINVAL, 0, err, errlen, "TLS context not initialised");
  SSL_CTX *ctx;
  int rc = build_ctx(&ctx, t->cert_file, t->key_file, t->offer_h2, err, errlen);
  if (rc) return rc;
  SSL_CTX_free(t->ssl_ctx); /* live connections hold their own references */
  t->ssl_ctx = ctx;
  t->reloads++;
  return 0;
}

static int fingerprint_of(X509 *x, char *out, size_t len) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (!x || len < PP_TLS_FINGERPRINT_LEN || !X509_digest(x, EVP_sha256(), md, &n) || n != 32) {
    ERR_clear_error();
    return PP_TLS_EINVAL;
  }
  static const char hex[] = "0123456789ABCDEF";
  for (unsigned int i = 0; i < n; i++) {
    out[3 * i] = hex[md[i] >> 4];
    out[3 * i + 1] = hex[md[i] & 15];
    out[3 * i + 2] = i + 1 < n ? ':' : '\0';
  }
  return 0;
}

int pp_tls_ctx_fingerprint(const pp_tls_ctx *t, char *out, size_t len) {
  if (!t->ssl_ctx) return PP_TLS_EINVAL;
  return fingerprint_of(SSL_CTX_get0_certificate(t->ssl_ctx), out, len);
}

void pp_tls_ctx_dispose(pp_tls_ctx *t) {
  SSL_CTX_free(t->ssl_ctx);
  t->ssl_ctx = NULL;
}

/* ---- the development certificate ---- */

static int add_ext(X509 *x, int nid, const char *value) {
  X509V3_CTX v3;
  X509V3_set_ctx_nodb(&v3);
  X509V3_set_ctx(&v3, x, x, NULL, NULL, 0);
  X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &v3, nid, value);
  if (!ext) return 0;
  int ok = X509_add_ext(x, ext, -1);
  X509_EXTENSION_free(ext);
  return ok;
}

static X509 *make_cert(EVP_PKEY *pkey) {
  X509 *x = X509_new();
  BIGNUM *bn = BN_new();
  int ok = x && bn && X509_set_version(x, 2);
  /* A positive 127-bit random serial (RFC 5280 §4.1.2.2: at most 20 octets, positive). */
  unsigned char serial[16];
  ok = ok && RAND_bytes(serial, sizeof serial) == 1;
  if (ok) {
    serial[0] &= 0x7f;
    serial[0] |= 0x40; /* never zero, and always 16 octets */
    ok = BN_bin2bn(serial, sizeof serial, bn) != NULL &&
         BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) != NULL;
  }
  ok = ok && X509_gmtime_adj(X509_getm_notBefore(x), 0) &&
       X509_gmtime_adj(X509_getm_notAfter(x), 30L * 24 * 3600) && X509_set_pubkey(x, pkey);
  X509_NAME *name = ok ? X509_get_subject_name(x) : NULL;
  ok = ok && name &&
       X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"localhost", -1,
                                  -1, 0) &&
       X509_set_issuer_name(x, name);
  ok = ok && add_ext(x, NID_basic_constraints, "critical,CA:FALSE") &&
       add_ext(x, NID_key_usage, "critical,digitalSignature") &&
       add_ext(x, NID_ext_key_usage, "serverAuth") &&
       add_ext(x, NID_subject_key_identifier, "hash") &&
       add_ext(x, NID_subject_alt_name, "DNS:localhost,IP:127.0.0.1,IP:::1") &&
       X509_sign(x, pkey, EVP_sha256()) > 0;
  BN_free(bn);
  if (!ok) {
    X509_free(x);
    return NULL;
  }
  return x;
}

/* Writes a PEM file through path.tmp (created with `mode`, fchmod'ed in case it existed) and
 * renames it over path. */
static int write_pem(const char *path, mode_t mode, X509 *x, EVP_PKEY *pkey, char *err,
                     size_t errlen) {
  char tmp[PP_TLS_PATH_MAX + 8];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return say(PP_TLS_EIO, 0, err, errlen, "%s: %s", tmp, strerror(errno));
  if (fchmod(fd, mode) != 0) {
    int e = errno;
    close(fd);
    unlink(tmp);
    return say(PP_TLS_EIO, 0, err, errlen, "%s: %s", tmp, strerror(e));
  }
  FILE *f = fdopen(fd, "w");
  if (!f) {
    int e = errno;
    close(fd);
    unlink(tmp);
    return say(PP_TLS_EIO, 0, err, errlen, "%s: %s", tmp, strerror(e));
  }
  int ok = x ? PEM_write_X509(f, x) : PEM_write_PrivateKey(f, pkey, NULL, NULL, 0, NULL, NULL);
  ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
  int e = errno;
  if (fclose(f) != 0) ok = 0;
  if (!ok) {
    unlink(tmp);
    return say(PP_TLS_EIO, 0, err, errlen, "%s: %s", tmp, strerror(e));
  }
  if (rename(tmp, path) != 0) {
    e = errno;
    unlink(tmp);
    return say(PP_TLS_EIO, 0, err, errlen, "%s: %s", path, strerror(e));
  }
  return 0;
}

int pp_tls_dev_cert(const char *dir, char *cert_path, size_t cert_len, char *key_path,
                    size_t key_len, char *fingerprint, size_t fp_len, char *err, size_t errlen) {
  ERR_clear_error();
  if (!dir || !cert_path || !key_path || !fingerprint)
    return say(PP_TLS_EINVAL, 0, err, errlen, "missing argument");
  if (fp_len < PP_TLS_FINGERPRINT_LEN)
    return say(PP_TLS_EINVAL, 0, err, errlen, "fingerprint buffer too small");
  struct stat st;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
    return say(PP_TLS_EINVAL, 0, err, errlen, "%s: not a directory", dir);
  int n1 = snprintf(cert_path, cert_len, "%s/dev-cert.pem", dir);
  int n2 = snprintf(key_path, key_len, "%s/dev-key.pem", dir);
  if (n1 < 0 || (size_t)n1 >= cert_len || n2 < 0 || (size_t)n2 >= key_len ||
      (size_t)n1 >= PP_TLS_PATH_MAX || (size_t)n2 >= PP_TLS_PATH_MAX)
    return say(PP_TLS_EINVAL, 0, err, errlen, "%s: path too long", dir);

  EVP_PKEY *pkey = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
  if (!pkey) return say(PP_TLS_ESSL, 1, err, errlen, "P-256 key generation");
  X509 *x = make_cert(pkey);
  int rc;
  if (!x) {
    rc = say(PP_TLS_ESSL, 1, err, errlen, "signing the development certificate");
  } else if ((rc = write_pem(key_path, 0600, NULL, pkey, err, errlen)) == 0 &&
             (rc = write_pem(cert_path, 0644, x, NULL, err, errlen)) == 0) {
    rc = fingerprint_of(x, fingerprint, fp_len);
    if (rc) say(rc, 0, err, errlen, "fingerprint");
  }
  X509_free(x);
  EVP_PKEY_free(pkey);
  ERR_clear_error();
  return rc;
}

/* ---- connections ---- */

int pp_tls_conn_init(pp_tls_conn *c, pp_tls_ctx *t) {
  memset(c, 0, sizeof *c);
  ERR_clear_error();
  if (!t || !t->ssl_ctx) return PP_TLS_EINVAL;
  SSL *ssl = SSL_new(t->ssl_ctx);
  BIO *rbio = BIO_new(BIO_s_mem());
  BIO *wbio = BIO_new(BIO_s_mem());
  if (!ssl || !rbio || !wbio) {
    SSL_free(ssl);
    BIO_free(rbio);
    BIO_free(wbio);
    ERR_clear_error();
    return PP_TLS_ESSL;
  }
  /* An empty read BIO means "retry later" (WANT_READ), never EOF: EOF is the glue's call. */
  BIO_set_mem_eof_return(rbio, -1);
  BIO_set_mem_eof_return(wbio, -1);
  SSL_set_bio(ssl, rbio, wbio); /* ssl owns both now */
  SSL_set_accept_state(ssl);
  c->ssl = ssl;
  c->rbio = rbio;
  c->wbio = wbio;
  return 0;
}

void pp_tls_conn_dispose(pp_tls_conn *c) {
  if (c->ssl) SSL_free(c->ssl);
  c->ssl = NULL;
  c->rbio = c->wbio = NULL;
  ERR_clear_error();
}

/* Moves everything OpenSSL has written into *wire. */
static void drain(pp_tls_conn *c, pp_buf *wire) {
  size_t pending;
  while ((pending = BIO_ctrl_pending(c->wbio)) > 0) {
    pp_buf_reserve(wire, pending);
    int n =
        BIO_read(c->wbio, wire->data + wire->len, (int)(pending > INT32_MAX ? INT32_MAX : pending));
    if (n <= 0) break;
    wire->len += (size_t)n;
  }
}

/* Records the failure OpenSSL just reported and returns its sticky code. */
static int fail(pp_tls_conn *c, int ssl_error) {
  pp_tls_cause cause;
  const char *reason = NULL;
  int alert = -1;
  unsigned long e;
  /* A received fatal alert is reported as reason SSL_AD_REASON_OFFSET + its description
   * (OpenSSL's SSL_R_SSLV3_ALERT_* / SSL_R_TLSV1_ALERT_* codes). */
  while ((e = ERR_get_error()) != 0) {
    int r = ERR_GET_REASON(e);
    if (!reason) reason = ERR_reason_error_string(e);
    if (alert < 0 && ERR_GET_LIB(e) == ERR_LIB_SSL && r >= SSL_AD_REASON_OFFSET &&
        r < SSL_AD_REASON_OFFSET + 256)
      alert = r - SSL_AD_REASON_OFFSET;
  }
  if (ssl_error == SSL_ERROR_ZERO_RETURN) {
    cause = PP_TLS_CAUSE_EOF_HANDSHAKE; /* close_notify before the handshake completed */
    reason = "close_notify during the handshake";
  } else if (alert >= 0) {
    cause = PP_TLS_CAUSE_ALERT;
    reason = SSL_alert_desc_string_long(alert);
  } else if (!c->handshake_done) {
    /* A TLS stream starts with a handshake record (22) of major version 3; anything else
     * (an HTTP request, a scanner's probe) is not TLS at all. An SSLv2-format ClientHello
     * (length with the top bit set, type 1, version 3.x) counts as TLS: OpenSSL parses it and
     * refuses it on its merits. OpenSSL never fails on fewer than 5 bytes, so `first` is
     * complete here. */
    const uint8_t *b = c->first;
    int tls_like = (b[0] == 22 && b[1] == 3) || ((b[0] & 0x80) && b[2] == 1 && b[3] == 3);
    cause = tls_like ? PP_TLS_CAUSE_HANDSHAKE : PP_TLS_CAUSE_NOT_TLS;
  } else {
    cause = PP_TLS_CAUSE_PROTOCOL;
  }
  c->cause = cause;
  c->reason = reason ? reason : "TLS error";
  c->error = error_of_cause(cause);
  ERR_clear_error();
  return c->error;
}

/* Runs the handshake and reads plaintext until OpenSSL needs more ciphertext. */
static int advance(pp_tls_conn *c, pp_buf *plain, pp_buf *wire) {
  if (!c->handshake_done) {
    int r = SSL_do_handshake(c->ssl);
    drain(c, wire);
    if (r != 1) {
      int e = SSL_get_error(c->ssl, r);
      if (e == SSL_ERROR_WANT_READ) return 0;
      return fail(c, e);
    }
    c->handshake_done = 1;
  }
  for (;;) {
    pp_buf_reserve(plain, PLAIN_STEP);
    int r = SSL_read(c->ssl, plain->data + plain->len, PLAIN_STEP);
    drain(c, wire);
    if (r > 0) {
      plain->len += (size_t)r;
      continue;
    }
    int e = SSL_get_error(c->ssl, r);
    if (e == SSL_ERROR_WANT_READ) return 0;
    if (e == SSL_ERROR_ZERO_RETURN) {
      c->peer_closed = 1;
      ERR_clear_error();
      return 0;
    }
    return fail(c, e);
  }
}

int pp_tls_conn_feed(pp_tls_conn *c, const uint8_t *in, size_t len, pp_buf *plain, pp_buf *wire) {
  ERR_clear_error();
  if (c->error) return c->error;
  if (!c->ssl) return PP_TLS_EINVAL;
  if (c->peer_closed) return 0; /* nothing may follow close_notify: discard */
  for (size_t i = 0; i < len && c->bytes_in + i < sizeof c->first; i++)
    c->first[c->bytes_in + i] = in[i];
  size_t off = 0;
  int rc = 0;
  do {
    size_t n = len - off < PP_TLS_FEED_CHUNK ? len - off : PP_TLS_FEED_CHUNK;
    if (n) {
      if (BIO_write(c->rbio, in + off, (int)n) != (int)n) {
        ERR_clear_error();
        return PP_TLS_ESSL; /* out of memory in the BIO: not the peer's fault, not sticky */
      }
      c->bytes_in += n;
      off += n;
      size_t held = BIO_ctrl_pending(c->rbio);
      if (held > c->rbio_peak) c->rbio_peak = held;
    }
    rc = advance(c, plain, wire);
  } while (rc == 0 && off < len && !c->peer_closed);
  ERR_clear_error();
  return rc;
}

int pp_tls_conn_write(pp_tls_conn *c, const uint8_t *data, size_t len, pp_buf *wire) {
  ERR_clear_error();
  if (c->error) return c->error;
  if (!c->ssl) return PP_TLS_EINVAL;
  if (!c->handshake_done) return PP_TLS_ENOTREADY;
  if (c->shutdown_sent) return PP_TLS_ECLOSED;
  size_t off = 0;
  while (off < len) {
    /* One record's worth at a time, drained at once: the write BIO never holds more. */
    size_t n = len - off < PLAIN_STEP ? len - off : PLAIN_STEP;
    int r = SSL_write(c->ssl, data + off, (int)n);
    drain(c, wire);
    if (r <= 0) return fail(c, SSL_get_error(c->ssl, r));
    off += (size_t)r;
  }
  ERR_clear_error();
  return 0;
}

int pp_tls_conn_shutdown(pp_tls_conn *c, pp_buf *wire) {
  ERR_clear_error();
  if (c->error) return c->error;
  if (!c->ssl) return PP_TLS_EINVAL;
  if (!c->handshake_done) return PP_TLS_ENOTREADY;
  if (c->shutdown_sent) return 0;
  /* Returns 0 (sent, peer's not yet seen) or 1 (both); either way close_notify is queued. */
  SSL_shutdown(c->ssl);
  drain(c, wire);
  c->shutdown_sent = 1;
  ERR_clear_error();
  return 0;
}

void pp_tls_conn_release_buffers(pp_tls_conn *c) {
  if (c->ssl) SSL_free_buffers(c->ssl); /* refuses (0) while a record is half read or written */
  ERR_clear_error();
}

int pp_tls_conn_handshake_done(const pp_tls_conn *c) {
  return c->handshake_done;
}

const char *pp_tls_conn_alpn(const pp_tls_conn *c) {
  if (!c->ssl || !c->handshake_done) return NULL;
  const unsigned char *p = NULL;
  unsigned int n = 0;
  SSL_get0_alpn_selected(c->ssl, &p, &n);
  if (n == 2 && memcmp(p, "h2", 2) == 0) return "h2";
  if (n == 8 && memcmp(p, "http/1.1", 8) == 0) return "http/1.1";
  return NULL;
}

const char *pp_tls_conn_version(const pp_tls_conn *c) {
  if (!c->ssl || !c->handshake_done) return NULL;
  return SSL_get_version(c->ssl);
}

int pp_tls_conn_peer_closed(const pp_tls_conn *c) {
  return c->peer_closed;
}

pp_tls_cause pp_tls_conn_cause(const pp_tls_conn *c) {
  return c->cause;
}

pp_tls_cause pp_tls_conn_eof(pp_tls_conn *c) {
  if (c->cause != PP_TLS_CAUSE_NONE) return c->cause;
  if (c->handshake_done || c->bytes_in == 0) return PP_TLS_CAUSE_NONE;
  c->cause = PP_TLS_CAUSE_EOF_HANDSHAKE;
  c->error = PP_TLS_EEOF;
  c->reason = "EOF during the handshake";
  return c->cause;
}
