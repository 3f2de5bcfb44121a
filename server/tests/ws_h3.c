/* ws-h3: WebSockets over HTTP/3 (RFC 9220) against a real server, checked case by case. Not a
 * unit test by itself: tests/e2e/test_ws_h2h3.rb runs it against puma-plus-server with
 * tests/apps/websocket (GET /echo is a sticky echo) on -listen-h3.
 *
 *   ws-h3 HOST PORT [-timeout SECS] [-quiet SECS] [-subscribe ROOM MESSAGE] [-sticky-close]
 *
 * One QUIC connection (the project's client kit, quic_client/quic_client.h and its UDP edge
 * quic_udp.h: ngtcp2 0.12 + GnuTLS + nghttp3 0.8, ALPN h3; the certificate is NOT verified,
 * loopback development pairs). Each case
 * opens request streams with an extended CONNECT (:protocol websocket) and frames the WebSocket
 * bytes itself (RFC 6455 §5, client frames masked):
 *   echo          200, text, binary 100 KB (several frames of the server's), ping/pong, sticky
 *                 state ("count"), close 1000 both ways, then the server's FIN
 *   two at once   two WebSockets on the connection, each echoes its own
 *   early         a message sent with the request, before the 200, is echoed after it
 *   tags          two WebSockets of /room get a message of either (broadcast to the room's tag)
 *   flexible      /flex (route: :flexible) answers "pid N"
 *   app refuses   the app's 403 for a path it does not upgrade, as it is
 *   bad version   sec-websocket-version 8: 426 with sec-websocket-version: 13
 *   no :path      stream error H3_MESSAGE_ERROR from the server (RFC 9220 §3, RFC 9114 §4.1.2)
 *   other         :protocol webtransport: 501 (WebTransport is not carried: docs/WEBSOCKET.md)
 *   client FIN    our FIN without a Close: the server ends the stream too
 *   quiet         (with -quiet SECS, for a server whose -keepalive-timeout is shorter) nothing
 *                 sent for SECS, then an echo: the server's keep-alive PINGs kept the
 *                 connection past QUIC's idle timeout while a WebSocket was open
 * Prints one line per case and "N passed, M failed"; exits 0 when all passed, 1 otherwise, 2 on
 * usage errors. With -subscribe it runs no case: it joins /room?name=ROOM, prints "ready", and
 * exits 0 once MESSAGE arrived (a subscriber for a cross-protocol broadcast test). With
 * -sticky-close it opens /echo, prints its worker's "pid N", then "close CODE" once the server
 * closes it (the caller kills that worker). */
#include <errno.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <nghttp3/nghttp3.h>
#include <ngtcp2/ngtcp2.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "quic_client/quic_client.h"
#include "quic_client/quic_udp.h"

#define MAX_STREAMS 16
#define OUT_CAP                                                                                    \
  (256u << 10) /* request bytes of one stream (append-only: nghttp3 keeps                          \
                  pointers into it until acknowledged) */
#define IN_CAP (256u << 10)

typedef struct wstream {
  int64_t id;
  int status, end, closed;
  uint64_t close_code;
  char version_hdr[16]; /* sec-websocket-version of the response */
  uint8_t out[OUT_CAP];
  size_t out_len, out_given;
  int fin;            /* our FIN after what was given */
  uint8_t in[IN_CAP]; /* response DATA not yet parsed into frames */
  size_t in_len;
} wstream;

typedef struct frame {
  int fin, op;
  uint8_t *p;
  size_t n;
} frame;

static int fd;
static pp_qc_session S; /* S.data = &S, for the kit's nghttp3 glue */
static gnutls_certificate_credentials_t cred;
static wstream streams[MAX_STREAMS];
static int nstreams;
static int dead;
static char dead_why[128];
static char authority[300];
static double timeout_s = 10, quiet_s = 0;
static const char *sub_room, *sub_msg; /* -subscribe ROOM MESSAGE */
static int sticky_close;               /* -sticky-close */

static wstream *stream_of(int64_t id) {
  for (int i = 0; i < nstreams; i++)
    if (streams[i].id == id) return &streams[i];
  return NULL;
}

/* ---- nghttp3 callbacks ---- */

static int h3_recv_header(nghttp3_conn *h3, int64_t id, int32_t token, nghttp3_rcbuf *name,
                          nghttp3_rcbuf *value, uint8_t flags, void *ud, void *sud) {
  (void)h3, (void)flags, (void)ud, (void)sud;
  wstream *s = stream_of(id);
  if (!s) return 0;
  nghttp3_vec n = nghttp3_rcbuf_get_buf(name), v = nghttp3_rcbuf_get_buf(value);
  char buf[16] = {0};
  memcpy(buf, v.base, v.len < 15 ? v.len : 15);
  if (token == NGHTTP3_QPACK_TOKEN__STATUS)
    s->status = atoi(buf);
  else if (n.len == 21 && !memcmp(n.base, "sec-websocket-version", 21))
    memcpy(s->version_hdr, buf, sizeof s->version_hdr);
  return 0;
}

static int h3_recv_data(nghttp3_conn *h3, int64_t id, const uint8_t *data, size_t len, void *ud,
                        void *sud) {
  (void)h3, (void)ud, (void)sud;
  wstream *s = stream_of(id);
  if (s) {
    if (s->in_len + len > IN_CAP) {
      dead = 1;
      snprintf(dead_why, sizeof dead_why, "more unparsed response bytes than %u", IN_CAP);
    } else {
      memcpy(s->in + s->in_len, data, len);
      s->in_len += len;
    }
  }
  pp_qc_consumed(&S, id, len);
  return 0;
}

static int h3_end_stream(nghttp3_conn *h3, int64_t id, void *ud, void *sud) {
  (void)h3, (void)ud, (void)sud;
  wstream *s = stream_of(id);
  if (s) s->end = 1;
  return 0;
}

static int h3_stream_close(nghttp3_conn *h3, int64_t id, uint64_t code, void *ud, void *sud) {
  (void)h3, (void)ud, (void)sud;
  wstream *s = stream_of(id);
  if (s) s->closed = 1, s->close_code = code;
  return 0;
}

static nghttp3_ssize read_out(nghttp3_conn *h3, int64_t id, nghttp3_vec *vec, size_t veccnt,
                              uint32_t *pflags, void *ud, void *sud) {
  (void)h3, (void)id, (void)veccnt, (void)ud;
  wstream *s = sud;
  if (s->out_given == s->out_len) {
    if (s->fin) {
      *pflags |= NGHTTP3_DATA_FLAG_EOF;
      return 0;
    }
    return NGHTTP3_ERR_WOULDBLOCK;
  }
  vec[0].base = s->out + s->out_given;
  vec[0].len = s->out_len - s->out_given;
  s->out_given = s->out_len;
  if (s->fin) *pflags |= NGHTTP3_DATA_FLAG_EOF;
  return 1;
}

static nghttp3_callbacks h3_callbacks; /* the kit's glue and the callbacks above (main) */

/* ---- the connection ---- */

/* A full socket is left to the next round of run_until (at most 50 ms on). */
static void conn_write(void) {
  if (dead) return;
  int full, h3_error;
  int rv = pp_qc_udp_write(&S, fd, &full, &h3_error);
  if (rv) {
    dead = 1;
    snprintf(dead_why, sizeof dead_why, "write: %s",
             h3_error ? nghttp3_strerror(h3_error) : ngtcp2_strerror(rv));
  }
}

static void conn_read(void) {
  int rv = pp_qc_udp_read(&S, fd);
  if (rv) {
    dead = 1;
    snprintf(dead_why, sizeof dead_why, "read: %s", ngtcp2_strerror(rv));
  }
}

/* Runs the connection until done(arg) or the deadline; 1 if done. */
static int run_until(int (*done)(void *), void *arg) {
  uint64_t deadline = pp_qc_udp_now() + (uint64_t)(timeout_s * 1e9);
  for (;;) {
    conn_write();
    if (done(arg)) return 1;
    if (dead) return 0;
    uint64_t t = pp_qc_udp_now();
    if (t >= deadline) return 0;
    uint64_t next = ngtcp2_conn_get_expiry(S.qc);
    if (next > deadline) next = deadline;
    int ms = next > t ? (int)((next - t + 999999) / 1000000) : 0;
    if (ms > 50) ms = 50;
    struct pollfd pfd = {fd, POLLIN, 0};
    poll(&pfd, 1, ms);
    if (pfd.revents & (POLLIN | POLLERR)) conn_read();
    t = pp_qc_udp_now();
    if (!dead && ngtcp2_conn_get_expiry(S.qc) <= t) {
      int rv = ngtcp2_conn_handle_expiry(S.qc, t);
      if (rv != 0) {
        dead = 1;
        snprintf(dead_why, sizeof dead_why, "expiry: %s", ngtcp2_strerror(rv));
      }
    }
  }
}

static int handshake_done(void *arg) {
  (void)arg;
  return S.h3 != NULL;
}

/* ---- WebSocket framing ---- */

static void ws_put(wstream *s, int op, const void *payload, size_t n, int fin_frame) {
  uint8_t head[14];
  size_t h = 0;
  head[h++] = (uint8_t)((fin_frame ? 0x80 : 0) | op);
  if (n < 126) {
    head[h++] = (uint8_t)(0x80 | n);
  } else if (n < 65536) {
    head[h++] = 0x80 | 126;
    head[h++] = (uint8_t)(n >> 8), head[h++] = (uint8_t)n;
  } else {
    head[h++] = 0x80 | 127;
    for (int i = 7; i >= 0; i--)
      head[h++] = (uint8_t)((uint64_t)n >> (8 * i));
  }
  uint8_t key[4];
  gnutls_rnd(GNUTLS_RND_NONCE, key, 4);
  if (s->out_len + h + 4 + n > OUT_CAP) {
    dead = 1;
    snprintf(dead_why, sizeof dead_why, "more request bytes than %u", OUT_CAP);
    return;
  }
  memcpy(s->out + s->out_len, head, h);
  memcpy(s->out + s->out_len + h, key, 4);
  const uint8_t *p = payload;
  uint8_t *o = s->out + s->out_len + h + 4;
  for (size_t i = 0; i < n; i++)
    o[i] = p[i] ^ key[i % 4];
  s->out_len += h + 4 + n;
  nghttp3_conn_resume_stream(S.h3, s->id);
}

static void ws_fin(wstream *s) {
  s->fin = 1;
  nghttp3_conn_resume_stream(S.h3, s->id);
}

/* Takes one whole server frame off s->in: 1 (f filled, f->p malloc'd), 0 not yet, -1 bad. */
static int ws_take(wstream *s, frame *f) {
  if (s->in_len < 2) return 0;
  const uint8_t *b = s->in;
  if (b[1] & 0x80) return -1; /* a masked server frame */
  size_t n = b[1] & 0x7f, off = 2;
  if (n == 126) {
    if (s->in_len < 4) return 0;
    n = (size_t)b[2] << 8 | b[3], off = 4;
  } else if (n == 127) {
    if (s->in_len < 10) return 0;
    n = 0;
    for (int i = 0; i < 8; i++)
      n = n << 8 | b[2 + i];
    off = 10;
  }
  if (s->in_len < off + n) return 0;
  f->fin = (b[0] & 0x80) != 0, f->op = b[0] & 0x0f, f->n = n;
  f->p = malloc(n + 1);
  memcpy(f->p, b + off, n);
  f->p[n] = 0;
  memmove(s->in, s->in + off + n, s->in_len - off - n);
  s->in_len -= off + n;
  return 1;
}

typedef struct frame_wait {
  wstream *s;
  frame *f;
  int rc;
} frame_wait;

static int frame_ready(void *arg) {
  frame_wait *w = arg;
  w->rc = ws_take(w->s, w->f);
  return w->rc != 0 || w->s->closed;
}

/* The next whole frame of s: 1, or 0 (timeout, stream closed, bad frame: why says). */
static int next_frame(wstream *s, frame *f, char *why, size_t cap) {
  frame_wait w = {s, f, 0};
  if (!run_until(frame_ready, &w) || w.rc != 1) {
    snprintf(why, cap, "no frame (%s%s, rc %d, closed %d code 0x%llx)", dead ? "dead: " : "timeout",
             dead ? dead_why : "", w.rc, s->closed, (unsigned long long)s->close_code);
    return 0;
  }
  return 1;
}

static int status_or_closed(void *arg) {
  wstream *s = arg;
  return s->status >= 200 || s->closed;
}

static int stream_closed(void *arg) {
  return ((wstream *)arg)->closed;
}

static int end_or_closed(void *arg) {
  wstream *s = arg;
  return s->end || s->closed;
}

/* Opens an extended CONNECT stream (path NULL: no :path). */
static wstream *ws_open(const char *protocol, const char *path, const char *version) {
  if (nstreams == MAX_STREAMS) return NULL;
  wstream *s = &streams[nstreams];
  memset(s, 0, sizeof *s);
  if (ngtcp2_conn_open_bidi_stream(S.qc, &s->id, NULL) != 0) return NULL;
  nstreams++;
#define NV(N, V)                                                                                   \
  nva[n++] = (nghttp3_nv){(uint8_t *)(uintptr_t)(N), (uint8_t *)(uintptr_t)(V), strlen(N),         \
                          strlen(V), NGHTTP3_NV_FLAG_NONE}
  nghttp3_nv nva[8];
  size_t n = 0;
  NV(":method", "CONNECT");
  NV(":protocol", protocol);
  NV(":scheme", "https");
  NV(":authority", authority);
  if (path) NV(":path", path);
  NV("sec-websocket-version", version);
#undef NV
  static const nghttp3_data_reader dr = {read_out};
  if (nghttp3_conn_submit_request(S.h3, s->id, nva, n, &dr, s) != 0) return NULL;
  return s;
}

/* ---- cases ---- */

static int passed, failed;

static void report(const char *name, const char *why) {
  if (why && *why) {
    failed++;
    printf("FAIL %s: %s\n", name, why);
  } else {
    passed++;
    printf("ok   %s\n", name);
  }
  fflush(stdout);
}

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      snprintf(why, cap, __VA_ARGS__);                                                             \
      return;                                                                                      \
    }                                                                                              \
  } while (0)

/* Opens path (a WebSocket) and waits for its 200. */
static wstream *open_path(const char *path, char *why, size_t cap) {
  wstream *s = ws_open("websocket", path, "13");
  if (!s) {
    snprintf(why, cap, "cannot open a stream");
    return NULL;
  }
  if (!run_until(status_or_closed, s) || s->status != 200 || s->closed) {
    snprintf(why, cap, "%.100s: status %d closed %d code 0x%llx%s%s", path, s->status, s->closed,
             (unsigned long long)s->close_code, dead ? ": " : "", dead ? dead_why : "");
    return NULL;
  }
  return s;
}

static wstream *open_echo(char *why, size_t cap) {
  return open_path("/echo", why, cap);
}

/* Sends one message and expects it back whole (the server may split it into frames). */
static int echo_one(wstream *s, int op, const uint8_t *p, size_t n, char *why, size_t cap) {
  ws_put(s, op, p, n, 1);
  uint8_t *got = malloc(n + 1);
  size_t have = 0;
  int first = 1;
  for (;;) {
    frame f;
    if (!next_frame(s, &f, why, cap)) {
      free(got);
      return 0;
    }
    int want_op = first ? op : 0;
    if (f.op != want_op || have + f.n > n) {
      snprintf(why, cap, "frame op %d (want %d), %zu bytes after %zu of %zu", f.op, want_op, f.n,
               have, n);
      free(f.p), free(got);
      return 0;
    }
    memcpy(got + have, f.p, f.n);
    have += f.n;
    first = 0;
    int fin = f.fin;
    free(f.p);
    if (fin) break;
  }
  int same = have == n && memcmp(got, p, n) == 0;
  free(got);
  if (!same) snprintf(why, cap, "echo differs: %zu bytes back of %zu", have, n);
  return same;
}

static void case_echo(char *why, size_t cap) {
  wstream *s = open_echo(why, cap);
  if (!s) return;
  CHECK(!s->end, "the stream ended after the 200");
  if (!echo_one(s, 1, (const uint8_t *)"hello over h3", 13, why, cap)) return;
  static uint8_t big[100 * 1024];
  for (size_t i = 0; i < sizeof big; i++)
    big[i] = (uint8_t)(i * 7 + 3);
  if (!echo_one(s, 2, big, sizeof big, why, cap)) return;
  ws_put(s, 9, "ping!", 5, 1);
  frame f;
  if (!next_frame(s, &f, why, cap)) return;
  int pong = f.op == 10 && f.n == 5 && !memcmp(f.p, "ping!", 5);
  free(f.p);
  CHECK(pong, "no pong for our ping");
  ws_put(s, 1, "count", 5, 1);
  if (!next_frame(s, &f, why, cap)) return;
  int count_ok = f.n == 7 && !memcmp(f.p, "count 3", 7);
  char got[64];
  snprintf(got, sizeof got, "%.*s", (int)(f.n < 60 ? f.n : 60), (char *)f.p);
  free(f.p);
  CHECK(count_ok, "sticky state: \"%s\", want \"count 3\"", got);
  uint8_t close_body[5] = {0x03, 0xe8, 'b', 'y', 'e'}; /* 1000 */
  ws_put(s, 8, close_body, 5, 1);
  if (!next_frame(s, &f, why, cap)) return;
  int close_ok = f.op == 8 && f.n >= 2 && f.p[0] == 0x03 && f.p[1] == 0xe8;
  free(f.p);
  CHECK(close_ok, "no Close 1000 echoed");
  CHECK(run_until(end_or_closed, s) && s->end, "no FIN after the close handshake (closed %d)",
        s->closed);
}

static void case_two(char *why, size_t cap) {
  wstream *a = open_echo(why, cap);
  if (!a) return;
  wstream *b = open_echo(why, cap);
  if (!b) return;
  if (!echo_one(a, 1, (const uint8_t *)"to a", 4, why, cap)) return;
  if (!echo_one(b, 1, (const uint8_t *)"to b", 4, why, cap)) return;
}

static void case_early(char *why, size_t cap) {
  wstream *s = ws_open("websocket", "/echo", "13");
  CHECK(s, "cannot open a stream");
  ws_put(s, 1, "sent early", 10, 1); /* goes out with the request, before the 200 */
  CHECK(run_until(status_or_closed, s) && s->status == 200, "status %d", s->status);
  frame f;
  if (!next_frame(s, &f, why, cap)) return;
  int ok = f.op == 1 && f.n == 10 && !memcmp(f.p, "sent early", 10);
  free(f.p);
  CHECK(ok, "the early message was not echoed");
}

/* The next frame of s is a whole message (text or binary: a POST body broadcast by the app is
 * binary) equal to want. */
static int expect_text(wstream *s, const char *want, char *why, size_t cap) {
  frame f;
  if (!next_frame(s, &f, why, cap)) return 0;
  int ok = (f.op == 1 || f.op == 2) && f.fin && f.n == strlen(want) && !memcmp(f.p, want, f.n);
  if (!ok) snprintf(why, cap, "got \"%.*s\", want \"%s\"", (int)(f.n < 60 ? f.n : 60), f.p, want);
  free(f.p);
  return ok;
}

static void case_room(char *why, size_t cap) {
  wstream *a = open_path("/room?name=h3room", why, cap);
  if (!a) return;
  wstream *b = open_path("/room?name=h3room", why, cap);
  if (!b) return;
  ws_put(a, 1, "from a", 6, 1);
  if (!expect_text(a, "from a", why, cap) || !expect_text(b, "from a", why, cap)) return;
}

static void case_flex(char *why, size_t cap) {
  wstream *s = open_path("/flex", why, cap);
  if (!s) return;
  ws_put(s, 1, "pid", 3, 1);
  frame f;
  if (!next_frame(s, &f, why, cap)) return;
  int ok = f.n > 4 && !memcmp(f.p, "pid ", 4);
  free(f.p);
  CHECK(ok, "no \"pid N\" from /flex");
}

static void case_refused(char *why, size_t cap) {
  wstream *s = ws_open("websocket", "/nope", "13");
  CHECK(s, "cannot open a stream");
  run_until(end_or_closed, s);
  CHECK(s->status == 403, "status %d, want the app's 403", s->status);
}

static void case_version(char *why, size_t cap) {
  wstream *s = ws_open("websocket", "/echo", "8");
  CHECK(s, "cannot open a stream");
  run_until(end_or_closed, s);
  CHECK(s->status == 426 && !strcmp(s->version_hdr, "13"),
        "status %d sec-websocket-version \"%s\", want 426 with 13", s->status, s->version_hdr);
}

static void case_no_path(char *why, size_t cap) {
  wstream *s = ws_open("websocket", NULL, "13");
  CHECK(s, "cannot open a stream");
  run_until(stream_closed, s);
  CHECK(s->closed && s->status == 0 && s->close_code == NGHTTP3_H3_MESSAGE_ERROR,
        "closed %d status %d code 0x%llx, want H3_MESSAGE_ERROR", s->closed, s->status,
        (unsigned long long)s->close_code);
}

static void case_other(char *why, size_t cap) {
  wstream *s = ws_open("webtransport", "/echo", "13");
  CHECK(s, "cannot open a stream");
  run_until(end_or_closed, s);
  CHECK(s->status == 501, "status %d, want 501", s->status);
}

static void case_client_fin(char *why, size_t cap) {
  wstream *s = open_echo(why, cap);
  if (!s) return;
  ws_fin(s);
  CHECK(run_until(end_or_closed, s) && (s->end || s->close_code == NGHTTP3_H3_NO_ERROR),
        "the server did not end the stream (end %d closed %d code 0x%llx)", s->end, s->closed,
        (unsigned long long)s->close_code);
}

static uint64_t quiet_until;

static int quiet_over(void *arg) {
  (void)arg;
  return pp_qc_udp_now() >= quiet_until;
}

static void case_quiet(char *why, size_t cap) {
  wstream *s = open_echo(why, cap);
  if (!s) return;
  quiet_until = pp_qc_udp_now() + (uint64_t)(quiet_s * 1e9);
  double keep = timeout_s;
  timeout_s = quiet_s + 1;
  run_until(quiet_over, NULL); /* the connection runs (ACKs, PINGs) but we send nothing */
  timeout_s = keep;
  CHECK(!dead && !s->closed, "the connection or stream ended while quiet: %s",
        dead ? dead_why : "stream closed");
  echo_one(s, 1, (const uint8_t *)"after the quiet", 15, why, cap);
}

static int usage(void) {
  fprintf(stderr, "usage: ws-h3 HOST PORT [-timeout SECS] [-quiet SECS] [-subscribe ROOM MSG] "
                  "[-sticky-close]\n");
  return 2;
}

int main(int argc, char **argv) {
  if (argc < 3) return usage();
  const char *host = argv[1], *port = argv[2];
  for (int i = 3; i < argc; i++) {
    if (!strcmp(argv[i], "-timeout") && i + 1 < argc)
      timeout_s = atof(argv[++i]);
    else if (!strcmp(argv[i], "-quiet") && i + 1 < argc)
      quiet_s = atof(argv[++i]);
    else if (!strcmp(argv[i], "-sticky-close"))
      sticky_close = 1;
    else if (!strcmp(argv[i], "-subscribe") && i + 2 < argc)
      sub_room = argv[i + 1], sub_msg = argv[i + 2], i += 2;
    else
      return usage();
  }
  snprintf(authority, sizeof authority, "%s:%s", host, port);
  if (gnutls_certificate_allocate_credentials(&cred) != 0) return 1;
  pp_qc_h3_client_callbacks(&h3_callbacks);
  h3_callbacks.recv_header = h3_recv_header;
  h3_callbacks.recv_data = h3_recv_data;
  h3_callbacks.end_stream = h3_end_stream;
  h3_callbacks.stream_close = h3_stream_close;
  ngtcp2_transport_params params;
  pp_qc_client_params(&params, 1 << 20, 8 << 20, 30 * NGTCP2_SECONDS);
  S.h3_callbacks = &h3_callbacks;
  S.data = &S;
  int rv = pp_qc_udp_dial(&S, &fd, host, port, &params, cred);
  if (rv == PP_QC_ERESOLVE) {
    fprintf(stderr, "ws-h3: cannot resolve %s:%s\n", host, port);
    return 2;
  }
  if (rv == PP_QC_ESOCKET) {
    fprintf(stderr, "ws-h3: socket: %s\n", strerror(errno));
    return 1;
  }
  if (rv != 0) {
    fprintf(stderr, "ws-h3: client setup failed\n");
    return 1;
  }
  if (!run_until(handshake_done, NULL)) {
    printf("FAIL handshake: %s\n0 passed, 1 failed\n", dead ? dead_why : "timeout");
    return 1;
  }
  if (sticky_close) { /* /echo's worker pid, then the code of the server's Close */
    char why[256] = "";
    wstream *s = open_path("/echo", why, sizeof why);
    if (!s) {
      printf("FAIL sticky-close: %s\n", why);
      return 1;
    }
    ws_put(s, 1, "pid", 3, 1);
    frame f;
    if (!next_frame(s, &f, why, sizeof why)) {
      printf("FAIL sticky-close: %s\n", why);
      return 1;
    }
    printf("%.*s\n", (int)(f.n < 40 ? f.n : 40), (char *)f.p);
    fflush(stdout);
    free(f.p);
    timeout_s = 20;
    for (;;) {
      if (!next_frame(s, &f, why, sizeof why)) {
        printf("FAIL sticky-close: %s\n", why);
        return 1;
      }
      int op = f.op, code = f.n >= 2 ? f.p[0] << 8 | f.p[1] : 0;
      free(f.p);
      if (op == 8) {
        printf("close %d\n", code);
        return 0;
      }
    }
  }
  if (sub_room) { /* a subscriber for a cross-protocol broadcast test */
    char path[160], why[256] = "";
    snprintf(path, sizeof path, "/room?name=%.140s", sub_room);
    wstream *s = open_path(path, why, sizeof why);
    if (!s) {
      printf("FAIL subscribe: %s\n", why);
      return 1;
    }
    printf("ready\n");
    fflush(stdout);
    if (!expect_text(s, sub_msg, why, sizeof why)) {
      printf("FAIL subscribe: %s\n", why);
      return 1;
    }
    printf("got\n");
    return 0;
  }
  static const struct {
    const char *name;
    void (*fn)(char *, size_t);
  } cases[] = {
      {"echo: text, binary 100 KB, ping, sticky count, close 1000, FIN", case_echo},
      {"two WebSockets on one connection", case_two},
      {"a message sent before the 200 is echoed after it", case_early},
      {"tags: two WebSockets of one room get a message of either", case_room},
      {"flexible routing: /flex answers from a worker", case_flex},
      {"app refuses: its 403 as it is", case_refused},
      {"sec-websocket-version 8: 426 with sec-websocket-version: 13", case_version},
      {"extended CONNECT without :path: H3_MESSAGE_ERROR", case_no_path},
      {":protocol webtransport: 501", case_other},
      {"client FIN without a Close: the server ends the stream", case_client_fin},
  };
  size_t ncases = sizeof cases / sizeof *cases;
  for (size_t i = 0; i <= ncases; i++) {
    if (i == ncases) {
      if (quiet_s <= 0) break;
      char why[256] = "";
      case_quiet(why, sizeof why);
      report("quiet past QUIC's idle timeout, then an echo", why);
      break;
    }
    char why[256] = "";
    if (dead)
      snprintf(why, sizeof why, "the connection died: %s", dead_why);
    else
      cases[i].fn(why, sizeof why);
    report(cases[i].name, why);
  }
  printf("%d passed, %d failed\n", passed, failed);
  if (!dead) { /* CONNECTION_CLOSE(H3_NO_ERROR): the server frees the connection at once */
    ngtcp2_connection_close_error ccerr;
    ngtcp2_connection_close_error_set_application_error(&ccerr, NGHTTP3_H3_NO_ERROR, NULL, 0);
    uint8_t buf[1452];
    ngtcp2_path_storage ps;
    ngtcp2_path_storage_zero(&ps);
    ngtcp2_pkt_info pi;
    ngtcp2_ssize n = ngtcp2_conn_write_connection_close(S.qc, &ps.path, &pi, buf, sizeof buf,
                                                        &ccerr, pp_qc_udp_now());
    if (n > 0) send(fd, buf, (size_t)n, 0);
  }
  pp_qc_session_dispose(&S);
  gnutls_certificate_free_credentials(cred);
  close(fd);
  return failed ? 1 : 0;
}
