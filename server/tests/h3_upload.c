/* h3-upload: concurrent request-body uploads over HTTP/3 to a real server, every echoed byte
 * checked. Not a unit test by itself: tests/e2e/test_h3.rb runs it against puma-plus-server
 * (POST /echo of scenarios/apps/mix) and reads the server's peak RSS around it.
 *
 *   h3-upload HOST PORT [-conns 4] [-streams 8] [-size 4194304] [-path /echo] [-timeout 60]
 *             [-sequential] [-digest]
 *   h3-upload HOST PORT -show [-method GET] [-path /] [-header 'name: value']... [-size 0]
 *
 * -conns QUIC connections (one UDP socket each), -streams concurrent requests on each, all
 * opened at once after the handshake: POST PATH with a content-length of -size bytes. Each
 * stream's body is its own window of an 8 MiB pseudo-random pool (a different offset per stream),
 * so a response that carries another stream's bytes, or its own out of order, fails the check.
 * Streams are marked incremental (RFC 9218 i), so nghttp3 interleaves their bodies on the
 * connection instead of sending them one after another; -sequential leaves the default. The
 * response body is compared with the request byte by byte as it arrives (nothing is stored);
 * with -digest the route answers the SHA-256 of the body instead (lowercase hex), and that is
 * what is compared (a body-reading route whose response is small).
 *
 * Prints one summary line (ok, failed, bytes, seconds) and a line per failed stream on stderr;
 * exits 0 when every stream got status 200 and exactly its own bytes back, 1 otherwise, 2 on
 * usage errors. The client is the project's QUIC client kit (quic_client/quic_client.h: ngtcp2
 * 0.12 + GnuTLS + nghttp3 0.8, ALPN h3) on blocking-free UDP sockets (quic_client/quic_udp.h)
 * and poll(2), and does NOT verify the server certificate (loopback development certificates).
 *
 * -show sends one request as given (the method, the :path as is, "*" included, extra header
 * fields, a body of -size pool bytes or none) and prints what came back on stdout: "status N",
 * one "name: value" line per response field (interim 1xx heads included, each after its own
 * status line), "body N bytes", then the body; it exits 0 when the stream ended cleanly, whatever
 * the status (the caller judges it), and 1 otherwise. tests/e2e/test_ops_headers.rb uses it for
 * what gtlsclient cannot send (OPTIONS *, the server's own answers). */
#include <errno.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <nghttp3/nghttp3.h>
#include <ngtcp2/ngtcp2.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quic_client/quic_client.h"
#include "quic_client/quic_udp.h"

#define POOL_SIZE   (8u << 20)
#define MAX_CONNS   64
#define MAX_STREAMS 256
#define PIECE       16384 /* request bytes handed to nghttp3 per read_data call */

static uint8_t *pool;
static size_t body_size = 4u << 20;
static const char *req_path = "/echo";
static char authority[300];
static int incremental = 1, digest_mode;
/* -show: one request as given, its response printed (see the header) */
static int show_mode;
static const char *req_method = "POST";
static const char *extra_headers[8];
static int n_extra_headers;
static char show_out[1 << 16];
static size_t show_len;
static size_t show_body;
static uint8_t show_body_buf[1 << 16];

static void show_append(const char *fmt, const void *a, size_t alen, const void *b, size_t blen) {
  int n = snprintf(show_out + show_len, sizeof show_out - show_len, fmt, (int)alen, (const char *)a,
                   (int)blen, (const char *)b);
  if (n > 0 && show_len + (size_t)n < sizeof show_out) show_len += (size_t)n;
}

typedef struct ustream {
  int64_t id;
  size_t pool_off; /* this stream's body is pool[(pool_off + i) % POOL_SIZE] */
  size_t sent;     /* request bytes handed to nghttp3 */
  size_t got;      /* response bytes received and checked */
  int status, end, closed, bad;
  uint64_t close_code;
  char why[96];
  char want_hex[65], got_hex[65]; /* -digest: SHA-256 of the body, and the response */
} ustream;

typedef struct uconn {
  pp_qc_session s; /* first (the kit's glue finds it through s.data = this uconn): the QUIC
                      connection and its HTTP/3 session */
  int idx, fd;
  int submitted, dead, want_out;
  char dead_why[96];
  ustream streams[MAX_STREAMS];
  int nstreams;
} uconn;

static uconn conns[MAX_CONNS];
static int nconns = 4, nstreams = 8;
static gnutls_certificate_credentials_t cred;

static void fail_stream(ustream *s, const char *why) {
  if (s->bad) return;
  s->bad = 1;
  snprintf(s->why, sizeof s->why, "%s", why);
}

static void kill_conn(uconn *c, const char *why, int code) {
  if (c->dead) return;
  c->dead = 1;
  snprintf(c->dead_why, sizeof c->dead_why, "%s (%d)", why, code);
}

static ustream *stream_of(uconn *c, int64_t id) {
  for (int i = 0; i < c->nstreams; i++)
    if (c->streams[i].id == id) return &c->streams[i];
  return NULL;
}

/* ---- nghttp3 callbacks ---- */

static int h3_recv_header(nghttp3_conn *h3, int64_t id, int32_t token, nghttp3_rcbuf *name,
                          nghttp3_rcbuf *value, uint8_t flags, void *ud, void *sud) {
  (void)h3, (void)name, (void)flags, (void)sud;
  ustream *s = stream_of(ud, id);
  if (show_mode) {
    nghttp3_vec n = nghttp3_rcbuf_get_buf(name), v = nghttp3_rcbuf_get_buf(value);
    if (token == NGHTTP3_QPACK_TOKEN__STATUS)
      show_append("%.*sstatus %.*s\n", "", 0, v.base, v.len);
    else
      show_append("%.*s: %.*s\n", n.base, n.len, v.base, v.len);
  }
  if (s && token == NGHTTP3_QPACK_TOKEN__STATUS) {
    nghttp3_vec v = nghttp3_rcbuf_get_buf(value);
    char buf[8] = {0};
    memcpy(buf, v.base, v.len < 7 ? v.len : 7);
    s->status = atoi(buf);
  }
  return 0;
}

static int h3_recv_data(nghttp3_conn *h3, int64_t id, const uint8_t *data, size_t len, void *ud,
                        void *sud) {
  (void)h3, (void)sud;
  uconn *c = ud;
  ustream *s = stream_of(c, id);
  if (show_mode) {
    size_t room = sizeof show_body_buf - show_body;
    memcpy(show_body_buf + show_body, data, len < room ? len : room);
    show_body += len < room ? len : room;
  } else if (s && !s->bad && digest_mode) {
    if (s->got + len > 64)
      fail_stream(s, "a digest response longer than 64 bytes");
    else
      memcpy(s->got_hex + s->got, data, len);
    s->got += len;
  } else if (s && !s->bad) {
    if (s->got + len > body_size) {
      fail_stream(s, "more response bytes than were sent");
    } else {
      for (size_t i = 0; i < len; i++) {
        if (data[i] != pool[(s->pool_off + s->got + i) % POOL_SIZE]) {
          char why[96];
          snprintf(why, sizeof why, "response byte %zu differs from the request", s->got + i);
          fail_stream(s, why);
          break;
        }
      }
    }
    s->got += len;
  }
  pp_qc_consumed(&c->s, id, len);
  return 0;
}

static int h3_end_stream(nghttp3_conn *h3, int64_t id, void *ud, void *sud) {
  (void)h3, (void)sud;
  ustream *s = stream_of(ud, id);
  if (s) s->end = 1;
  return 0;
}

static int h3_stream_close(nghttp3_conn *h3, int64_t id, uint64_t code, void *ud, void *sud) {
  (void)h3, (void)sud;
  ustream *s = stream_of(ud, id);
  if (s) s->closed = 1, s->close_code = code;
  return 0;
}

static nghttp3_ssize read_body(nghttp3_conn *h3, int64_t id, nghttp3_vec *vec, size_t veccnt,
                               uint32_t *pflags, void *ud, void *sud) {
  (void)h3, (void)id, (void)veccnt, (void)ud;
  ustream *s = sud;
  size_t off = (s->pool_off + s->sent) % POOL_SIZE;
  size_t n = body_size - s->sent;
  if (n > PIECE) n = PIECE;
  if (n > POOL_SIZE - off) n = POOL_SIZE - off;
  vec[0].base = pool + off; /* stays valid (and unchanged) until acknowledged */
  vec[0].len = n;
  s->sent += n;
  if (s->sent == body_size) *pflags |= NGHTTP3_DATA_FLAG_EOF;
  return 1;
}

static nghttp3_callbacks h3_callbacks; /* the kit's glue and the callbacks above (main) */

/* ---- connections ---- */

/* Dials host:port for c: 0, or the kit's error (quic_udp.h). */
static int conn_open(uconn *c, const char *host, const char *port) {
  ngtcp2_transport_params params;
  pp_qc_client_params(&params, 4 << 20, 32 << 20, 60 * NGTCP2_SECONDS);
  c->s.h3_callbacks = &h3_callbacks;
  c->s.data = c;
  return pp_qc_udp_dial(&c->s, &c->fd, host, port, &params, cred);
}

/* Opens every stream of c once HTTP/3 is up. */
static void submit_all(uconn *c) {
  if (c->submitted || !c->s.h3) return;
  c->submitted = 1;
  char cl[32];
  snprintf(cl, sizeof cl, "%zu", body_size);
  for (int i = 0; i < nstreams; i++) {
    ustream *s = &c->streams[c->nstreams];
    memset(s, 0, sizeof *s);
    /* a different, odd-spaced window of the pool for every stream of every connection */
    s->pool_off = ((size_t)(c->idx * nstreams + i) * 1048573u) % POOL_SIZE;
    if (digest_mode) {
      gnutls_hash_hd_t h;
      uint8_t md[32];
      gnutls_hash_init(&h, GNUTLS_DIG_SHA256);
      for (size_t done = 0; done < body_size;) {
        size_t off = (s->pool_off + done) % POOL_SIZE, n = body_size - done;
        if (n > POOL_SIZE - off) n = POOL_SIZE - off;
        gnutls_hash(h, pool + off, n);
        done += n;
      }
      gnutls_hash_deinit(h, md);
      for (int k = 0; k < 32; k++)
        snprintf(s->want_hex + 2 * k, 3, "%02x", md[k]);
    }
    if (ngtcp2_conn_open_bidi_stream(c->s.qc, &s->id, NULL) != 0) {
      kill_conn(c, "no stream credit for all streams", 0);
      return;
    }
    c->nstreams++;
#define NV(N, V)                                                                                   \
  {(uint8_t *)(uintptr_t)(N), (uint8_t *)(uintptr_t)(V), strlen(N), strlen(V), NGHTTP3_NV_FLAG_NONE}
    nghttp3_nv nva[6 + 8] = {NV(":method", req_method),
                             NV(":scheme", "https"),
                             NV(":authority", authority),
                             NV(":path", req_path),
                             NV("content-type", "application/octet-stream"),
                             NV("content-length", cl)};
#undef NV
    size_t nv = body_size ? 6 : 4;
    static char names[8][256];
    for (int h = 0; h < n_extra_headers; h++) { /* "name: value" */
      const char *colon = strchr(extra_headers[h], ':');
      size_t nl = colon ? (size_t)(colon - extra_headers[h]) : strlen(extra_headers[h]);
      if (nl >= sizeof names[h]) nl = sizeof names[h] - 1;
      memcpy(names[h], extra_headers[h], nl);
      names[h][nl] = 0;
      const char *v = colon ? colon + 1 : "";
      while (*v == ' ')
        v++;
      nva[nv++] = (nghttp3_nv){(uint8_t *)names[h], (uint8_t *)(uintptr_t)v, nl, strlen(v),
                               NGHTTP3_NV_FLAG_NONE};
    }
    static const nghttp3_data_reader dr = {read_body};
    if (nghttp3_conn_submit_request(c->s.h3, s->id, nva, nv, body_size ? &dr : NULL, s) != 0) {
      kill_conn(c, "nghttp3_conn_submit_request failed", 0);
      return;
    }
    if (incremental) {
      nghttp3_pri pri = {NGHTTP3_DEFAULT_URGENCY, 1};
      nghttp3_conn_set_stream_priority(c->s.h3, s->id, &pri);
    }
  }
}

/* Writes what c has to send until ngtcp2 has nothing or the socket is full. */
static void conn_write(uconn *c) {
  if (c->dead) return;
  int h3_error;
  int rv = pp_qc_udp_write(&c->s, c->fd, &c->want_out, &h3_error);
  if (h3_error)
    kill_conn(c, "nghttp3_conn_writev_stream", h3_error);
  else if (rv)
    kill_conn(c, "ngtcp2_conn_writev_stream", rv);
}

static void conn_read(uconn *c) {
  int rv = pp_qc_udp_read(&c->s, c->fd);
  if (rv) {
    kill_conn(c, ngtcp2_strerror(rv), rv);
    return;
  }
  submit_all(c);
}

static int conn_done(const uconn *c) {
  if (c->dead) return 1;
  if (!c->submitted || c->nstreams < nstreams) return 0;
  for (int i = 0; i < c->nstreams; i++)
    if (!c->streams[i].closed) return 0;
  return 1;
}

static int usage(void) {
  fprintf(stderr, "usage: h3-upload HOST PORT [-conns 4] [-streams 8] [-size BYTES] [-path /echo] "
                  "[-timeout SECS] [-sequential] [-digest]\n"
                  "       h3-upload HOST PORT -show [-method M] [-path P] [-header 'n: v']... "
                  "[-size BYTES] [-timeout SECS]\n");
  return 2;
}

int main(int argc, char **argv) {
  if (argc < 3) return usage();
  const char *host = argv[1], *port = argv[2];
  double timeout_s = 60;
  for (int i = 3; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "-sequential")) {
      incremental = 0;
      continue;
    }
    if (!strcmp(a, "-digest")) {
      digest_mode = 1;
      continue;
    }
    if (!strcmp(a, "-show")) {
      show_mode = 1;
      nconns = nstreams = 1;
      body_size = 0;
      continue;
    }
    if (!v) return usage();
    if (!strcmp(a, "-conns"))
      nconns = atoi(v);
    else if (!strcmp(a, "-streams"))
      nstreams = atoi(v);
    else if (!strcmp(a, "-size"))
      body_size = (size_t)strtoull(v, NULL, 10);
    else if (!strcmp(a, "-path"))
      req_path = v;
    else if (!strcmp(a, "-timeout"))
      timeout_s = atof(v);
    else if (!strcmp(a, "-method"))
      req_method = v;
    else if (!strcmp(a, "-header") && n_extra_headers < 8)
      extra_headers[n_extra_headers++] = v;
    else
      return usage();
    i++;
  }
  if (nconns < 1 || nconns > MAX_CONNS || nstreams < 1 || nstreams > MAX_STREAMS ||
      (body_size == 0 && !show_mode) || timeout_s <= 0 || (show_mode && nconns * nstreams != 1))
    return usage();
  snprintf(authority, sizeof authority, "%s:%s", host, port);
  pool = malloc(POOL_SIZE);
  if (!pool) return 1;
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < POOL_SIZE; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    pool[i] = (uint8_t)(x >> 32);
  }
  if (gnutls_certificate_allocate_credentials(&cred) != 0) return 1;
  pp_qc_h3_client_callbacks(&h3_callbacks);
  h3_callbacks.recv_header = h3_recv_header;
  h3_callbacks.recv_data = h3_recv_data;
  h3_callbacks.end_stream = h3_end_stream;
  h3_callbacks.stream_close = h3_stream_close;
  for (int i = 0; i < nconns; i++) {
    conns[i].idx = i;
    int rv = conn_open(&conns[i], host, port);
    if (rv == PP_QC_ERESOLVE) {
      fprintf(stderr, "h3-upload: cannot resolve %s:%s\n", host, port);
      return 2;
    }
    if (rv != 0) {
      fprintf(stderr, "h3-upload: connection %d: setup failed: %s\n", i,
              rv == PP_QC_ESOCKET ? strerror(errno) : "the QUIC client kit");
      return 1;
    }
  }
  uint64_t t0 = pp_qc_udp_now(), deadline = t0 + (uint64_t)(timeout_s * 1e9), linger_until = 0;
  struct pollfd pfd[MAX_CONNS];
  for (;;) {
    int all = 1;
    uint64_t next = deadline;
    for (int i = 0; i < nconns; i++) {
      uconn *c = &conns[i];
      if (!c->dead) conn_write(c);
      if (!conn_done(c)) all = 0;
      pfd[i].fd = c->fd;
      pfd[i].events = (short)(c->dead ? 0 : POLLIN | (c->want_out ? POLLOUT : 0));
      pfd[i].revents = 0;
      if (!c->dead) {
        uint64_t e = ngtcp2_conn_get_expiry(c->s.qc);
        if (e < next) next = e;
      }
    }
    uint64_t t = pp_qc_udp_now();
    /* -show: once done, 200 ms more of the loop, so the client's last ACKs reach the server
     * (which keeps a stream until its response is acknowledged) before it goes away */
    if (all && show_mode && !linger_until) linger_until = t + 200000000u;
    if ((all && (!show_mode || t >= linger_until)) || t >= deadline) break;
    if (linger_until && linger_until < next) next = linger_until;
    int ms = next > t ? (int)((next - t + 999999) / 1000000) : 0;
    poll(pfd, (nfds_t)nconns, ms);
    t = pp_qc_udp_now();
    for (int i = 0; i < nconns; i++) {
      uconn *c = &conns[i];
      if (c->dead) continue;
      if (pfd[i].revents & (POLLIN | POLLERR)) conn_read(c);
      if (!c->dead && ngtcp2_conn_get_expiry(c->s.qc) <= t) {
        int rv = ngtcp2_conn_handle_expiry(c->s.qc, t);
        if (rv != 0) kill_conn(c, ngtcp2_strerror(rv), rv);
      }
    }
  }
  double secs = (double)(pp_qc_udp_now() - t0) / 1e9;
  if (show_mode) {
    uconn *c = &conns[0];
    ustream *s = c->nstreams ? &c->streams[0] : NULL;
    fwrite(show_out, 1, show_len, stdout);
    printf("body %zu bytes\n", show_body);
    fwrite(show_body_buf, 1, show_body, stdout);
    if (!s || !s->closed) {
      fprintf(stderr, "h3-upload: the stream did not finish%s%s\n", c->dead ? ": " : "",
              c->dead ? c->dead_why : "");
      return 1;
    }
    return 0;
  }
  int ok = 0, failed = 0;
  unsigned long long bytes = 0;
  for (int i = 0; i < nconns; i++) {
    uconn *c = &conns[i];
    for (int k = 0; k < nstreams; k++) {
      ustream *s = k < c->nstreams ? &c->streams[k] : NULL;
      char why[160];
      why[0] = 0;
      if (!s)
        snprintf(why, sizeof why, "never opened: %s", c->dead ? c->dead_why : "no handshake");
      else if (s->bad)
        snprintf(why, sizeof why, "%s", s->why);
      else if (!s->closed)
        snprintf(why, sizeof why, "not finished (%zu of %zu bytes sent, %zu back)%s%s", s->sent,
                 body_size, s->got, c->dead ? ": " : "", c->dead ? c->dead_why : "");
      else if (s->status != 200)
        snprintf(why, sizeof why, "status %d", s->status);
      else if (s->close_code != NGHTTP3_H3_NO_ERROR)
        snprintf(why, sizeof why, "closed with error 0x%llx", (unsigned long long)s->close_code);
      else if (digest_mode && (s->got != 64 || memcmp(s->got_hex, s->want_hex, 64) != 0))
        snprintf(why, sizeof why, "digest %.64s, want %.64s", s->got_hex, s->want_hex);
      else if (!digest_mode && s->got != body_size)
        snprintf(why, sizeof why, "%zu of %zu bytes echoed", s->got, body_size);
      if (s) bytes += s->got;
      if (why[0]) {
        failed++;
        fprintf(stderr, "h3-upload: connection %d stream %d: %s\n", i, k, why);
      } else {
        ok++;
      }
    }
  }
  printf("h3-upload: ok %d failed %d response_bytes %llu secs %.2f\n", ok, failed, bytes, secs);
  return failed ? 1 : 0;
}
