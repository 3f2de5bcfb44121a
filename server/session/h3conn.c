/* h3conn: HTTP/3 listeners, the glue between a UDP socket and the sans-I/O HTTP/3 endpoint
 * (h3.h), and between its request streams and the exchange layer. Every request stream is an
 * exchange in the one queue, exactly as an HTTP/2 stream is (h2conn.c), so the worker cannot
 * tell the protocols apart. An extended CONNECT for a WebSocket (RFC 9220) becomes a
 * server-owned WebSocket on its stream once the app accepts it ("WebSocket tunnels" below).
 *
 * UDP I/O: our own non-blocking socket polled with uv_poll_t, read with recvmsg and written
 * with sendmsg, not uv_udp_t: libuv's receive callback gives neither the local address of a
 * datagram (needed for QUIC paths when bound to a wildcard address) nor its ECN bits, and
 * sendmsg lets us pick the source address (IP_PKTINFO / IPV6_PKTINFO) and the ECN codepoint.
 * Reads take up to 64 datagrams per readiness event; writes drain the endpoint's bounded out
 * queue, up to 64 datagrams per sendmmsg, until the kernel says EAGAIN (then we wait for
 * POLLOUT) or the endpoint has nothing more (pp_h3_server_flush).
 *
 * Timers: one uv_timer_t per connection, re-armed from on_conn_timer (ngtcp2's expiry: loss
 * detection, ACK delay, PTO, idle, closing period).
 *
 * Flow control and backpressure as on h2: request-body credit is released (pp_h3_consume)
 * when the exchange took the bytes (the endpoint gathers them into pieces of one worker-link
 * chunk first: limits.body_piece); response bytes the endpoint cannot hold yet (its
 * unacknowledged bound: pp_h3_send_room) wait in the exchange's resp_overflow, handed over
 * from an offset as acknowledgements make room (never a memmove per piece), and a worker whose
 * stream holds more than PP_CLIENT_WRITE_HIGH is paused until acknowledgements bring it below
 * PP_CLIENT_WRITE_LOW (on_stream_acked). When the connection's bound (not the stream's) is what
 * stopped a stream, an acknowledgement on any stream of the connection moves it on too: a
 * stream with nothing in flight gets no acknowledgement of its own. */
#include "server/session/h3conn.h"
#include "server/session/h2h3.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/proto/env.h"
#include "server/proto/h3.h"
#include "server/base/alloc.h"
#include "server/base/clock.h"
#include "server/base/log.h"
#include "server/core/dispatch.h"
#include "server/session/conn.h"

#define H3_READ_BATCH   64
#define H3_CANCELLED    0x10c /* H3_REQUEST_CANCELLED */
#define H3_INTERNAL_ERR 0x102 /* H3_INTERNAL_ERROR */

typedef struct pp_h3_listener {
  pp_sessions *sess;
  pp_addr addr;
  int fd;
  int family;
  int wildcard; /* bound to 0.0.0.0 / :: : the source address comes from IP_PKTINFO */
  struct sockaddr_storage bound;
  socklen_t bound_len;
  uv_poll_t poll;
  int poll_events;
  pp_h3_server h3;
  int open;
} pp_h3_listener;

/* One QUIC connection: its timer, its exchanges and the text of the peer's address. */
typedef struct h3_conn {
  uv_timer_t timer;
  pp_h3_listener *l;
  pp_h3_conn *conn; /* NULL once the endpoint freed it */
  pp_queue streams; /* its exchanges (olink) */
  char remote[64];
  pp_buf hdrs;      /* scratch: header arrays */
  int conn_blocked; /* some stream's overflow waits for room on the connection */
  pp_queue ws;      /* its WebSocket tunnels (RFC 9220; pp_h2h3_ws.link, h2h3.h) */
} h3_conn;

static const pp_exchange_ops h3_ops;

static void drain_out(pp_h3_listener *l);

/* ---------------------------------------------------------------- socket */

static void set_poll(pp_h3_listener *l, int events) {
  if (events == l->poll_events) return;
  l->poll_events = events;
  void on_poll(uv_poll_t * h, int status, int events);
  uv_poll_start(&l->poll, events, on_poll);
}

static void sockaddr_text(const struct sockaddr_storage *ss, char *out, size_t n) {
  if (ss->ss_family == AF_INET)
    inet_ntop(AF_INET, &((const struct sockaddr_in *)ss)->sin_addr, out, (socklen_t)n);
  else
    inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)ss)->sin6_addr, out, (socklen_t)n);
  if (strncmp(out, "::ffff:", 7) == 0 && strchr(out, '.')) memmove(out, out + 7, strlen(out) - 6);
}

#define H3_SEND_BATCH 64 /* datagrams per sendmmsg */

typedef union h3_cmsg {
  char v4[CMSG_SPACE(sizeof(struct in_pktinfo)) + CMSG_SPACE(sizeof(int))];
  char v6[CMSG_SPACE(sizeof(struct in6_pktinfo)) + CMSG_SPACE(sizeof(int))];
} h3_cmsg;

/* The message for one datagram: its destination, its source address when the socket is bound to
 * a wildcard address (IP_PKTINFO / IPV6_PKTINFO) and its ECN codepoint (IP_TOS / IPV6_TCLASS). */
static void fill_msg(pp_h3_listener *l, const pp_h3_datagram *d, struct msghdr *mh,
                     struct iovec *iov, h3_cmsg *cbuf) {
  *iov = (struct iovec){(void *)d->data, d->len};
  memset(cbuf, 0, sizeof *cbuf);
  *mh = (struct msghdr){.msg_name = (void *)&d->remote,
                        .msg_namelen = d->remote_len,
                        .msg_iov = iov,
                        .msg_iovlen = 1,
                        .msg_control = cbuf,
                        .msg_controllen = sizeof *cbuf};
  size_t used = 0;
  struct cmsghdr *cm = CMSG_FIRSTHDR(mh);
  int tos = (int)d->ecn;
  if (l->family == AF_INET) {
    if (l->wildcard && d->local.ss_family == AF_INET) {
      cm->cmsg_level = IPPROTO_IP, cm->cmsg_type = IP_PKTINFO;
      cm->cmsg_len = CMSG_LEN(sizeof(struct in_pktinfo));
      struct in_pktinfo pi = {0};
      pi.ipi_spec_dst = ((const struct sockaddr_in *)&d->local)->sin_addr;
      memcpy(CMSG_DATA(cm), &pi, sizeof pi);
      used += CMSG_SPACE(sizeof pi);
      cm = CMSG_NXTHDR(mh, cm);
    }
    cm->cmsg_level = IPPROTO_IP, cm->cmsg_type = IP_TOS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &tos, sizeof tos);
    used += CMSG_SPACE(sizeof(int));
  } else {
    if (l->wildcard && d->local.ss_family == AF_INET6) {
      cm->cmsg_level = IPPROTO_IPV6, cm->cmsg_type = IPV6_PKTINFO;
      cm->cmsg_len = CMSG_LEN(sizeof(struct in6_pktinfo));
      struct in6_pktinfo pi;
      memset(&pi, 0, sizeof pi);
      pi.ipi6_addr = ((const struct sockaddr_in6 *)&d->local)->sin6_addr;
      memcpy(CMSG_DATA(cm), &pi, sizeof pi);
      used += CMSG_SPACE(sizeof pi);
      cm = CMSG_NXTHDR(mh, cm);
    }
    cm->cmsg_level = IPPROTO_IPV6, cm->cmsg_type = IPV6_TCLASS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &tos, sizeof tos);
    used += CMSG_SPACE(sizeof(int));
  }
  mh->msg_controllen = used;
}

/* Sends the queued datagrams, up to H3_SEND_BATCH per sendmmsg (one syscall, not one per
 * datagram), popping what went. Returns 0 when the queue is empty, -1 when the kernel's buffer
 * is full (EAGAIN). A datagram the kernel refuses for another reason (unreachable peer, too
 * long) is dropped: QUIC recovers from loss. */
static int send_queued(pp_h3_listener *l) {
  static struct mmsghdr msgs[H3_SEND_BATCH];
  static struct iovec iovs[H3_SEND_BATCH];
  static h3_cmsg cbufs[H3_SEND_BATCH];
  for (;;) {
    unsigned n = 0;
    const pp_h3_datagram *d;
    while (n < H3_SEND_BATCH && (d = pp_h3_server_out_at(&l->h3, n))) {
      fill_msg(l, d, &msgs[n].msg_hdr, &iovs[n], &cbufs[n]);
      n++;
    }
    if (!n) return 0;
    int sent = sendmmsg(l->fd, msgs, n, MSG_DONTWAIT);
    if (sent < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return -1;
      sent = 1; /* the first one is refused: dropped */
    }
    for (int i = 0; i < sent; i++)
      pp_h3_server_out_pop(&l->h3);
  }
}

/* Writes the endpoint's out queue, asking it for more until it has none or the kernel is
 * full (then POLLOUT resumes it). */
static void drain_out(pp_h3_listener *l) {
  if (!l->open) return;
  for (int rounds = 0; rounds < 1024; rounds++) {
    if (send_queued(l) < 0) {
      set_poll(l, UV_READABLE | UV_WRITABLE);
      return;
    }
    if (l->h3.depth > 0) break; /* inside the endpoint's callbacks: it flushes on return */
    pp_h3_server_flush(&l->h3, uv_hrtime());
    if (!pp_h3_server_out_count(&l->h3)) break;
  }
  set_poll(l, UV_READABLE);
}

static void read_datagrams(pp_h3_listener *l) {
  static uint8_t buf[65536];
  for (int i = 0; i < H3_READ_BATCH && l->open; i++) {
    struct sockaddr_storage remote;
    struct iovec iov = {buf, sizeof buf};
    char cbuf[256];
    struct msghdr mh = {.msg_name = &remote,
                        .msg_namelen = sizeof remote,
                        .msg_iov = &iov,
                        .msg_iovlen = 1,
                        .msg_control = cbuf,
                        .msg_controllen = sizeof cbuf};
    ssize_t n = recvmsg(l->fd, &mh, MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      break; /* EAGAIN, or an ICMP error reported on the socket */
    }
    struct sockaddr_storage local = l->bound;
    socklen_t local_len = l->bound_len;
    uint32_t ecn = 0;
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
      if (cm->cmsg_level == IPPROTO_IP && cm->cmsg_type == IP_PKTINFO && l->wildcard) {
        struct in_pktinfo pi;
        memcpy(&pi, CMSG_DATA(cm), sizeof pi);
        ((struct sockaddr_in *)&local)->sin_addr = pi.ipi_addr;
      } else if (cm->cmsg_level == IPPROTO_IPV6 && cm->cmsg_type == IPV6_PKTINFO && l->wildcard) {
        struct in6_pktinfo pi;
        memcpy(&pi, CMSG_DATA(cm), sizeof pi);
        ((struct sockaddr_in6 *)&local)->sin6_addr = pi.ipi6_addr;
      } else if ((cm->cmsg_level == IPPROTO_IP && cm->cmsg_type == IP_TOS) ||
                 (cm->cmsg_level == IPPROTO_IPV6 && cm->cmsg_type == IPV6_TCLASS)) {
        unsigned char tos = 0;
        if (cm->cmsg_len >= CMSG_LEN(sizeof(int))) {
          int v;
          memcpy(&v, CMSG_DATA(cm), sizeof v);
          tos = (unsigned char)v;
        } else {
          memcpy(&tos, CMSG_DATA(cm), 1);
        }
        ecn = tos & 0x3;
      }
    }
    pp_h3_server_recv(&l->h3, buf, (size_t)n, (struct sockaddr *)&local, local_len,
                      (struct sockaddr *)&remote, mh.msg_namelen, ecn, uv_hrtime());
  }
  drain_out(l);
}

void on_poll(uv_poll_t *h, int status, int events) {
  pp_h3_listener *l = h->data;
  if (status < 0) return;
  if (events & UV_READABLE) read_datagrams(l);
  if (events & UV_WRITABLE) drain_out(l);
}

/* ---------------------------------------------------------------- connections */

static void arm(h3_conn *hc, uint64_t expiry);

static void on_timer(uv_timer_t *t) {
  h3_conn *hc = t->data;
  pp_h3_listener *l = hc->l;
  /* may free the connection (on_conn_close clears hc->conn) */
  if (hc->conn && pp_h3_conn_handle_expiry(hc->conn, uv_hrtime()) == 0 && hc->conn) {
    /* libuv's timers run on the loop's cached millisecond clock, so this may fire a little
     * before the deadline; the endpoint then reports no change and we must re-arm here */
    arm(hc, pp_h3_conn_expiry(hc->conn));
  }
  drain_out(l);
}

static void on_conn_open(pp_h3_server *srv, pp_h3_conn *conn) {
  pp_h3_listener *l = srv->data;
  h3_conn *hc = pp_xmalloc(sizeof *hc);
  memset(hc, 0, sizeof *hc);
  hc->l = l;
  hc->conn = conn;
  pp_queue_init(&hc->streams);
  pp_queue_init(&hc->ws);
  pp_buf_init(&hc->hdrs);
  sockaddr_text(&conn->remote, hc->remote, sizeof hc->remote);
  uv_timer_init(l->sess->loop, &hc->timer);
  hc->timer.data = hc;
  conn->data = hc;
  l->sess->core->stats.h3_connections++;
}

static void on_timer_closed(uv_handle_t *h) {
  h3_conn *hc = h->data;
  pp_buf_dispose(&hc->hdrs);
  free(hc);
}

static void ws_closed(h3_conn *hc, pp_h2h3_ws *t);

static void on_conn_close(pp_h3_server *srv, pp_h3_conn *conn) {
  (void)srv;
  h3_conn *hc = conn->data;
  if (!hc) return;
  hc->conn = NULL;
  while (hc->ws.len) /* the tunnels first: an upgrade's exchange is among the streams */
    ws_closed(hc, PP_CONTAINER_OF(hc->ws.head.next, pp_h2h3_ws, link));
  while (hc->streams.len) { /* every on_close ran; anything left is abandoned */
    pp_exchange *x = PP_CONTAINER_OF(pp_queue_pop(&hc->streams), pp_exchange, olink);
    pp_exchange_abandon(x);
  }
  uv_timer_stop(&hc->timer);
  uv_close((uv_handle_t *)&hc->timer, on_timer_closed);
}

static void arm(h3_conn *hc, uint64_t expiry) {
  if (expiry == UINT64_MAX) {
    uv_timer_stop(&hc->timer);
    return;
  }
  uint64_t now = uv_hrtime();
  uint64_t ms = expiry > now ? (expiry - now + 999999) / 1000000 : 0;
  uv_timer_start(&hc->timer, on_timer, ms + 1, 0); /* +1: the loop's clock lags hrtime */
}

static void on_conn_timer(pp_h3_server *srv, pp_h3_conn *conn, uint64_t expiry) {
  (void)srv;
  h3_conn *hc = conn->data;
  if (hc) arm(hc, expiry);
}

/* ---------------------------------------------------------------- request streams */

static void release_body(h3_conn *hc, pp_exchange *x) {
  if (hc->conn && x->body_unconsumed && pp_exchange_can_take_body(x)) {
    pp_h3_consume(hc->conn, x->stream_id, (size_t)x->body_unconsumed);
    x->body_unconsumed = 0;
  }
}

static int ws_request(h3_conn *hc, const pp_h2h3_origin *o, pp_h2h3_request *r,
                      const pp_h3_request *rq, void **stream_data);
static void ws_data(h3_conn *hc, pp_h2h3_ws *t, const uint8_t *data, size_t len);
static void ws_fin(h3_conn *hc, pp_h2h3_ws *t);
static void ws_acked(h3_conn *hc);

static pp_h2h3_ws *ws_find(h3_conn *hc, int64_t stream_id) {
  return hc && hc->ws.len ? pp_h2h3_ws_find(&hc->ws, stream_id) : NULL;
}

static int on_request(pp_h3_conn *conn, const pp_h3_request *rq, void **stream_data) {
  h3_conn *hc = conn->data;
  char port[8];
  snprintf(port, sizeof port, "%d", hc->l->addr.port);
  pp_h2h3_origin o = {hc->l->sess, &h3_ops,          hc,   hc->remote,
                      "HTTP/3",    hc->l->addr.host, port, "https"};
  pp_h2h3_request r = PP_H2H3_REQUEST_OF(rq);
  if (rq->protocol) return ws_request(hc, &o, &r, rq, stream_data);
  int refuse;
  *stream_data =
      pp_h2h3_open(&o, &r, rq->stream_id, rq->end_stream, &hc->hdrs, &hc->streams, &refuse);
  return refuse;
}

static int on_body(pp_h3_conn *conn, int64_t stream_id, void *stream_data, const uint8_t *data,
                   size_t len) {
  pp_h2h3_ws *t = ws_find(conn->data, stream_id);
  if (t) {
    ws_data(conn->data, t, data, len);
    return 0;
  }
  pp_exchange *x = stream_data;
  if (pp_exchange_stream_body(x, data, len))
    release_body(conn->data, x);
  else
    pp_h3_consume(conn, stream_id, len);
  return 0;
}

static int on_body_end(pp_h3_conn *conn, int64_t stream_id, void *stream_data) {
  pp_h2h3_ws *t = ws_find(conn->data, stream_id);
  if (t) {
    ws_fin(conn->data, t);
    return 0;
  }
  pp_exchange_stream_end(stream_data);
  return 0;
}

static void sweep_blocked(h3_conn *hc, pp_exchange *except);

static void on_close(pp_h3_conn *conn, int64_t stream_id, void *stream_data, uint64_t code) {
  h3_conn *hc = conn->data;
  pp_exchange *x = stream_data;
  pp_h2h3_ws *t = ws_find(hc, stream_id);
  if (t) ws_closed(hc, t);
  if (!x || !hc) return;
  pp_queue_remove(&hc->streams, &x->olink);
  pp_exchange_stream_closed(x, code);
  sweep_blocked(hc, NULL); /* what it held unacknowledged is the connection's room again */
}

/* Response bytes waiting in the exchange (not yet in the endpoint). */
static size_t overflow_left(const pp_exchange *x) {
  return x->resp_overflow.len - x->resp_overflow_off;
}

/* Hands as much of data as the endpoint's bounds take now; returns the bytes taken. Notes when
 * the connection's bound, not the stream's, stopped it. */
static size_t send_some(h3_conn *hc, pp_exchange *x, const uint8_t *data, size_t len) {
  size_t room = pp_h3_send_room(hc->conn, x->stream_id);
  size_t n = len < room ? len : room;
  if (n && pp_h3_send_data(hc->conn, x->stream_id, data, n) != 0) n = 0;
  if (n < len &&
      pp_h3_stream_pending(hc->conn, x->stream_id) < hc->l->h3.cfg.limits.max_stream_unacked)
    hc->conn_blocked = 1;
  return n;
}

/* Moves what waits in the exchange's overflow into the endpoint, as far as it takes it; a
 * drained overflow buffer that grew large is freed at once (a 4 MiB RESPONSE_BODY frame). */
static void push_overflow(h3_conn *hc, pp_exchange *x) {
  if (!hc->conn) return;
  if (x->resp_overflow.len) {
    x->resp_overflow_off +=
        send_some(hc, x, x->resp_overflow.data + x->resp_overflow_off, overflow_left(x));
    if (!overflow_left(x)) {
      x->resp_overflow.len = x->resp_overflow_off = 0;
      if (x->resp_overflow.cap > PP_EXCHANGE_KEEP_BODY) pp_buf_dispose(&x->resp_overflow);
    }
  }
  if (!x->resp_overflow.len && x->end_pending) {
    x->end_pending = 0;
    pp_h3_send_end(hc->conn, x->stream_id);
  }
}

/* After acknowledgements: the stream's overflow moves on, and its worker resumes once little
 * is left. */
static void after_ack(h3_conn *hc, pp_exchange *x) {
  push_overflow(hc, x);
  if (x->w && !x->resp_overflow.len && hc->conn &&
      pp_h3_stream_pending(hc->conn, x->stream_id) < PP_CLIENT_WRITE_LOW)
    pp_exchange_client_drained(x);
}

/* The connection has room again (an acknowledgement, a stream gone): the streams its bound
 * stopped have no acknowledgement of their own coming. */
static void sweep_blocked(h3_conn *hc, pp_exchange *except) {
  if (!hc->conn_blocked || !hc->conn) return;
  hc->conn_blocked = 0;
  for (pp_qnode *n = hc->streams.head.next; n != &hc->streams.head; n = n->next) {
    pp_exchange *y = PP_CONTAINER_OF(n, pp_exchange, olink);
    if (y != except && y->resp_overflow.len) after_ack(hc, y);
  }
}

static void on_stream_acked(pp_h3_conn *conn, int64_t stream_id, void *stream_data,
                            size_t pending) {
  h3_conn *hc = conn->data;
  pp_exchange *x = stream_data;
  (void)stream_id, (void)pending;
  if (hc && hc->ws.len) ws_acked(hc);
  if (!x || !hc) return;
  after_ack(hc, x);
  sweep_blocked(hc, x);
}

/* The session answered a request itself (431, 400, 501, 413) before it had an exchange. */
static void on_answered(pp_h3_conn *conn, const pp_h3_request *rq, int status) {
  h3_conn *hc = conn->data;
  pp_sessions *s = hc->l->sess;
  pp_h2h3_log_refused(s->hooks, hc->remote, "HTTP/3", status, rq->method, rq->method_len, rq->path,
                      rq->path_len);
}

static const pp_h3_callbacks h3_callbacks = {on_conn_open,  on_conn_close,   on_request,
                                             on_body,       on_body_end,     on_close,
                                             on_conn_timer, on_stream_acked, on_answered};

/* ---------------------------------------------------------------- response events */

static void local_response(h3_conn *hc, pp_exchange *x, int status, const char *msg) {
  pp_sessions *s = hc->l->sess;
  pp_h2_header hd[3] = {
      {(const uint8_t *)"content-type", 12, (const uint8_t *)"text/plain", 10},
      {(const uint8_t *)"date", 4, (const uint8_t *)s->wall->date, PP_HTTP_DATE_LEN}};
  size_t n = 2;
  if (status == 503) /* shed at dequeue by admission control */
    hd[n++] = (pp_h2_header){(const uint8_t *)"retry-after", 11, (const uint8_t *)"1", 1};
  pp_h3_respond(hc->conn, x->stream_id, status, hd, n, 0); /* never alt-svc on HTTP/3 */
  pp_h3_send_data(hc->conn, x->stream_id, (const uint8_t *)msg, strlen(msg));
  pp_h3_send_end(hc->conn, x->stream_id);
  pp_exchange_count_status(s->xpool, status);
  s->core->stats.responses++;
  x->status = status, x->resp_bytes = strlen(msg);
}

static int ws_head(h3_conn *hc, pp_h2h3_ws *t, pp_exchange *x, const pp_wire_frame *f);
static void ws_drop(h3_conn *hc, pp_h2h3_ws *t);

static pp_h2h3_ws *tunnel_of(h3_conn *hc, pp_exchange *x) {
  pp_h2h3_ws *t = ws_find(hc, x->stream_id);
  return t && t->x == x ? t : NULL;
}

static void x_head(pp_exchange *x, const pp_wire_frame *f) {
  h3_conn *hc = x->owner;
  pp_sessions *s = hc->l->sess;
  if (!hc->conn) return;
  pp_h2h3_ws *t = tunnel_of(hc, x);
  if (t && ws_head(hc, t, x, f)) return;
  int status = f->status;
  x->resp_no_body = x->head_method || status < 200 || status == 204 || status == 304;
  char saved = s->alt_svc[0];
  s->alt_svc[0] = 0; /* never on HTTP/3 responses */
  size_t n = pp_h2h3_headers(s->alt_svc, s->wall->date, &f->pairs, &hc->hdrs);
  s->alt_svc[0] = saved;
  if (pp_h3_respond(hc->conn, x->stream_id, status, (const pp_h2_header *)hc->hdrs.data, n,
                    x->resp_no_body) < 0) {
    LOG_ERR(s, "client %s: stream %lld: the app's status %d cannot be sent over HTTP/3", hc->remote,
            (long long)x->stream_id, status);
    s->core->stats.errors_500++;
    local_response(hc, x, 500, "500 Internal Server Error\n");
    x->resp_no_body = 1;
    return;
  }
  pp_h2h3_count_response(s, x, status);
}

static void x_body(pp_exchange *x, const uint8_t *data, size_t len) {
  h3_conn *hc = x->owner;
  if (x->resp_no_body || !len || !hc->conn) return;
  x->resp_bytes += len;
  if (!x->resp_overflow.len) {
    size_t n = send_some(hc, x, data, len);
    data += n, len -= n;
    if (!len) return;
  }
  /* Over the endpoint's unacknowledged bound: the rest waits for acknowledgements
   * (on_stream_acked); the worker is paused meanwhile (x_flush counts it). What was handed
   * over goes once it is at least half the buffer (amortized: one move per byte at most). */
  if (x->resp_overflow_off && x->resp_overflow_off >= overflow_left(x)) {
    pp_buf_consume(&x->resp_overflow, x->resp_overflow_off);
    x->resp_overflow_off = 0;
  }
  pp_buf_append(&x->resp_overflow, data, len);
}

static void x_end(pp_exchange *x) {
  h3_conn *hc = x->owner;
  x->state = PP_X_RESPONDED;
  if (!hc->conn) return;
  pp_h2h3_ws *t = tunnel_of(hc, x);
  if (t && t->wc) { /* the accept is done: the stream is the WebSocket's from now on */
    t->x = NULL;
    pp_queue_remove(&hc->streams, &x->olink);
    pp_h3_set_stream_data(hc->conn, x->stream_id, NULL);
    pp_exchange_stream_closed(x, 0);
    drain_out(hc->l);
    return;
  }
  if (!x->head_sent) {
    hc->l->sess->core->stats.errors_500++;
    x->head_sent = 1;
    local_response(hc, x, 500, "500 Internal Server Error\n");
  } else if (!x->resp_no_body) {
    if (x->resp_overflow.len)
      x->end_pending = 1;
    else
      pp_h3_send_end(hc->conn, x->stream_id);
  }
  drain_out(hc->l);
}

static void x_fail(pp_exchange *x, int status, const char *msg) {
  h3_conn *hc = x->owner;
  x->state = PP_X_RESPONDED;
  if (!hc->conn) return;
  pp_h2h3_ws *t = tunnel_of(hc, x);
  if (t && !t->wc) ws_drop(hc, t); /* not accepted: an ordinary answer on the stream */
  if (!x->head_sent) {
    x->head_sent = 1;
    local_response(hc, x, status, msg);
  } else {
    pp_h3_reset(hc->conn, x->stream_id, H3_INTERNAL_ERR); /* a truncated response */
  }
  drain_out(hc->l);
}

static size_t x_flush(pp_exchange *x) {
  h3_conn *hc = x->owner;
  pp_h3_listener *l = hc->l;
  size_t pending = hc->conn ? pp_h3_stream_pending(hc->conn, x->stream_id) : 0;
  drain_out(l);
  return pending + overflow_left(x);
}

static void x_body_writable(pp_exchange *x) {
  h3_conn *hc = x->owner;
  release_body(hc, x);
  drain_out(hc->l);
}

/* 103 Early Hints: an interim HEADERS frame on the stream (pp_h3_respond with a 1xx). */
static void x_early_hints(pp_exchange *x, const pp_wire_frame *f) {
  h3_conn *hc = x->owner;
  if (!hc->conn) return;
  size_t n = pp_h2h3_headers("", NULL, &f->pairs, &hc->hdrs);
  if (pp_h3_respond(hc->conn, x->stream_id, 103, (const pp_h2_header *)hc->hdrs.data, n, 0) == 0)
    pp_exchange_count_status(hc->l->sess->xpool, 103);
}

static const pp_exchange_ops h3_ops = {x_head,  x_body,          x_end, x_fail,
                                       x_flush, x_body_writable, NULL,  x_early_hints};

/* ---------------------------------------------------------------- WebSocket tunnels
 * RFC 9220, as h2conn.c does RFC 8441 (pp_h2h3_ws, h2h3.h). What the endpoint cannot take yet
 * (its unacknowledged bound) waits in the tunnel's own buffer (t->out) and moves on as
 * acknowledgements arrive; io->unsent counts it with what is unacknowledged. */

static void ws_pump(pp_h2h3_ws *t) {
  h3_conn *hc = t->conn;
  drain_out(hc->l);
}

static size_t ws_out_left(const pp_h2h3_ws *t) {
  return t->out.len - t->out_off;
}

/* Hands what waits in t->out to the endpoint as far as it takes it; then our FIN if asked. */
static void ws_push(h3_conn *hc, pp_h2h3_ws *t) {
  if (!hc->conn) return;
  size_t left = ws_out_left(t);
  if (left) {
    size_t room = pp_h3_send_room(hc->conn, t->stream_id);
    size_t n = left < room ? left : room;
    if (n && pp_h3_send_data(hc->conn, t->stream_id, t->out.data + t->out_off, n) == 0)
      t->out_off += n;
    if (t->out_off == t->out.len) t->out.len = t->out_off = 0;
  }
  if (t->ended == 1 && !ws_out_left(t)) {
    t->ended = 2; /* sent */
    pp_h3_send_end(hc->conn, t->stream_id);
  }
}

static void ws_acked(h3_conn *hc) {
  for (pp_qnode *n = hc->ws.head.next; n != &hc->ws.head;) {
    pp_h2h3_ws *t = PP_CONTAINER_OF(n, pp_h2h3_ws, link);
    n = n->next;
    ws_push(hc, t);
    if (t->wc && hc->conn && !ws_out_left(t) &&
        pp_h3_stream_pending(hc->conn, t->stream_id) < PP_WSCONN_WRITE_LOW)
      pp_wsconn_drained(t->wc);
  }
}

static int ws_io_write(void *tp, const uint8_t *p, size_t n) {
  pp_h2h3_ws *t = tp;
  h3_conn *hc = t->conn;
  if (!hc->conn || t->ended) return -1;
  if (t->out_off && t->out_off >= ws_out_left(t)) { /* amortized: one move per byte at most */
    pp_buf_consume(&t->out, t->out_off);
    t->out_off = 0;
  }
  pp_buf_append(&t->out, p, n);
  ws_push(hc, t);
  pp_h2h3_ws_kick(t);
  return 0;
}

static size_t ws_io_unsent(void *tp) {
  pp_h2h3_ws *t = tp;
  h3_conn *hc = t->conn;
  return ws_out_left(t) + (hc->conn ? pp_h3_stream_pending(hc->conn, t->stream_id) : 0);
}

static void ws_io_pause(void *tp, int pause) {
  pp_h2h3_ws *t = tp;
  h3_conn *hc = t->conn;
  t->paused = pause;
  if (!pause && t->held && hc->conn) {
    pp_h3_consume(hc->conn, t->stream_id, (size_t)t->held);
    t->held = 0;
    pp_h2h3_ws_kick(t);
  }
}

static void ws_io_close(void *tp) {
  pp_h2h3_ws *t = tp;
  h3_conn *hc = t->conn;
  if (!t->ended) t->ended = 1;
  ws_push(hc, t);
  pp_h2h3_ws_kick(t);
}

static const pp_wsconn_io h3_ws_io = {ws_io_write, ws_io_unsent, ws_io_pause, ws_io_close};

static void ws_closed(h3_conn *hc, pp_h2h3_ws *t) {
  pp_queue_remove(&hc->ws, &t->link);
  if (!hc->ws.len && hc->conn) pp_h3_conn_keep_alive(hc->conn, 0);
  pp_h2h3_ws_end(t);
}

static void ws_drop(h3_conn *hc, pp_h2h3_ws *t) {
  if (t->early.len && hc->conn) pp_h3_consume(hc->conn, t->stream_id, t->early.len);
  t->early.len = 0;
  ws_closed(hc, t);
}

static void ws_data(h3_conn *hc, pp_h2h3_ws *t, const uint8_t *data, size_t len) {
  if (!t->wc) {
    if (t->x)
      pp_buf_append(&t->early, data, len); /* its credit waits: the stream window bounds it */
    else
      pp_h3_consume(hc->conn, t->stream_id, len);
    return;
  }
  pp_wsconn_feed(t->wc, data, len);
  if (t->paused)
    t->held += len;
  else
    pp_h3_consume(hc->conn, t->stream_id, len);
}

static void ws_fin(h3_conn *hc, pp_h2h3_ws *t) {
  t->fin_in = 1;
  if (t->wc && !t->ended) { /* as a TCP FIN: our side ends too */
    t->ended = 1;
    ws_push(hc, t);
  }
}

static int ws_head(h3_conn *hc, pp_h2h3_ws *t, pp_exchange *x, const pp_wire_frame *f) {
  pp_sessions *s = hc->l->sess;
  pp_ws_accept a;
  const char *why = "";
  int rc = pp_ws_accept_parse(f, (const char *)t->offered.data, t->offered.len, &a, &why);
  if (rc == 0) {
    ws_drop(hc, t);
    return 0;
  }
  if (rc < 0) {
    LOG_ERR(s, "client %s: stream %lld: the app's WebSocket accept cannot be served: %s",
            hc->remote, (long long)t->stream_id, why);
    ws_drop(hc, t);
    s->core->stats.errors_500++;
    local_response(hc, x, 500, "500 Internal Server Error\n");
    x->resp_no_body = 1;
    return 1;
  }
  size_t n = pp_h2h3_ws_headers(t, &a, s->wall->date, &f->pairs, &hc->hdrs);
  x->resp_no_body = 1; /* the app's body bytes, if any, are not WebSocket bytes */
  if (pp_h3_respond(hc->conn, t->stream_id, 200, (const pp_h2_header *)hc->hdrs.data, n, 0) < 0) {
    ws_drop(hc, t);
    return 1;
  }
  pp_h2h3_count_response(s, x, 200);
  t->wc = pp_h2h3_ws_open(t, &s->wshub, &h3_ws_io, &a, f);
  if (!t->wc) {
    pp_h3_reset(hc->conn, t->stream_id, H3_INTERNAL_ERR);
    return 1;
  }
  size_t credit = pp_h2h3_ws_feed_early(t);
  if (credit) pp_h3_consume(hc->conn, t->stream_id, credit);
  if (t->fin_in) ws_fin(hc, t);
  pp_h2h3_ws_kick(t);
  return 1;
}

/* An extended CONNECT (RFC 9220; nghttp3 checked :scheme, :path and :authority). */
static int ws_request(h3_conn *hc, const pp_h2h3_origin *o, pp_h2h3_request *r,
                      const pp_h3_request *rq, void **stream_data) {
  pp_sessions *s = hc->l->sess;
  pp_h2h3_ws *t;
  int status =
      pp_h2h3_ws_request(o, r, &s->wshub.pmd, rq->protocol, rq->protocol_len, rq->scheme,
                         rq->scheme_len, hc, rq->stream_id, ws_pump, &hc->hdrs, &hc->streams, &t);
  if (status == 426) {
    pp_h3_respond(hc->conn, rq->stream_id, 426, PP_H2H3_WS_426_FIELDS, 2, 0);
    pp_h3_send_data(hc->conn, rq->stream_id, (const uint8_t *)PP_H2H3_WS_426_BODY,
                    sizeof PP_H2H3_WS_426_BODY - 1);
    pp_h3_send_end(hc->conn, rq->stream_id);
    *stream_data = NULL;
    return 0;
  }
  if (status) return status;
  pp_queue_push(&hc->ws, &t->link);
  /* QUIC's idle timeout (-keepalive-timeout) would end a quiet WebSocket: PINGs at half of it
   * keep the connection while its WebSockets are open and the client answers */
  if (hc->ws.len == 1) pp_h3_conn_keep_alive(hc->conn, s->cfg->keepalive_timeout_ns / 2);
  *stream_data = t->x;
  return 0;
}

/* ---------------------------------------------------------------- listeners */

static int open_socket(pp_h3_listener *l, char *err, size_t errlen) {
  struct sockaddr_storage ss;
  memset(&ss, 0, sizeof ss);
  const char *host = l->addr.host;
  if (!strcmp(host, "localhost")) host = "127.0.0.1";
  if (strchr(host, ':')) {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
    a->sin6_family = AF_INET6;
    a->sin6_port = htons((uint16_t)l->addr.port);
    if (inet_pton(AF_INET6, host, &a->sin6_addr) != 1) goto bad_addr;
    l->wildcard = IN6_IS_ADDR_UNSPECIFIED(&a->sin6_addr);
    l->bound_len = sizeof *a;
  } else {
    struct sockaddr_in *a = (struct sockaddr_in *)&ss;
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t)l->addr.port);
    if (inet_pton(AF_INET, host, &a->sin_addr) != 1) goto bad_addr;
    l->wildcard = a->sin_addr.s_addr == htonl(INADDR_ANY);
    l->bound_len = sizeof *a;
  }
  l->family = ss.ss_family;
  l->fd = socket(l->family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (l->fd < 0) goto sys;
  int on = 1, size = 4 << 20;
  if (l->family == AF_INET6) {
    setsockopt(l->fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof on);
    setsockopt(l->fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &on, sizeof on);
    setsockopt(l->fd, IPPROTO_IPV6, IPV6_RECVTCLASS, &on, sizeof on);
    setsockopt(l->fd, IPPROTO_IPV6, IPV6_DONTFRAG, &on, sizeof on);
  } else {
    int pmtu = IP_PMTUDISC_DO;
    setsockopt(l->fd, IPPROTO_IP, IP_PKTINFO, &on, sizeof on);
    setsockopt(l->fd, IPPROTO_IP, IP_RECVTOS, &on, sizeof on);
    setsockopt(l->fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu);
  }
  setsockopt(l->fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
  setsockopt(l->fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
  if (bind(l->fd, (struct sockaddr *)&ss, l->bound_len) < 0) goto sys;
  socklen_t len = sizeof l->bound;
  getsockname(l->fd, (struct sockaddr *)&l->bound, &len);
  l->bound_len = len;
  l->addr.port = ntohs(l->family == AF_INET ? ((struct sockaddr_in *)&l->bound)->sin_port
                                            : ((struct sockaddr_in6 *)&l->bound)->sin6_port);
  return 0;
bad_addr:
  snprintf(err, errlen, "not a numeric address: %.200s", l->addr.host);
  return -1;
sys:
  snprintf(err, errlen, "%s", strerror(errno));
  if (l->fd >= 0) close(l->fd), l->fd = -1;
  return -1;
}

int pp_h3conn_open_all(pp_sessions *s, const char *cert, const char *key) {
  const pp_config *cfg = s->cfg;
  for (int i = 0; i < cfg->listen_h3_count; i++) {
    pp_h3_listener *l = pp_xmalloc(sizeof *l);
    memset(l, 0, sizeof *l);
    l->sess = s;
    l->fd = -1;
    l->addr = cfg->listen_h3[i];
    char err[256];
    if (open_socket(l, err, sizeof err) < 0) {
      LOG_ERR(s, "cannot listen for HTTP/3 on %s (-listen-h3): %s", l->addr.text, err);
      free(l);
      return -1;
    }
    pp_h3_config hc;
    pp_h3_config_default(&hc);
    hc.cert_file = cert;
    hc.key_file = key;
    hc.retry = cfg->h3_retry;
    hc.date = s->wall->date;
    hc.limits.max_streams_bidi = cfg->h2_max_streams;
    /* conn_window stays 0: the sum of the stream windows, so requests waiting for a worker
     * never hold the credit of the running ones. Body pieces fill one pooled worker-link chunk
     * (its 16-byte BODY frame header included). */
    hc.limits.body_piece = PP_CHUNK_CAP - 16;
    hc.limits.max_header_list = cfg->max_header_bytes;
    hc.limits.max_body_bytes = cfg->max_body_bytes;
    hc.limits.idle_timeout_ns = cfg->keepalive_timeout_ns;
    hc.limits.connect_protocol = !cfg->no_extended_connect;
    if (getrandom(hc.secret, sizeof hc.secret, 0) != (ssize_t)sizeof hc.secret) {
      LOG_ERR(s, "HTTP/3: getrandom: %s", strerror(errno));
      close(l->fd);
      free(l);
      return -1;
    }
    int rc = pp_h3_server_init(&l->h3, &h3_callbacks, &hc, l);
    if (rc < 0) {
      LOG_ERR(s, "HTTP/3 on %s: %s", l->addr.text, pp_h3_strerror(rc));
      close(l->fd);
      free(l);
      return -1;
    }
    uv_poll_init(s->loop, &l->poll, l->fd);
    l->poll.data = l;
    l->open = 1;
    set_poll(l, UV_READABLE);
    s->h3[s->h3_count++] = l;
    LOG_ERR(s, "HTTP/3 listening on %s (UDP port %d)%s", l->addr.host, l->addr.port,
            cfg->h3_retry ? ", Retry on" : "");
  }
  if (s->h3_count && !cfg->no_alt_svc)
    snprintf(s->alt_svc, sizeof s->alt_svc, "h3=\":%d\"; ma=86400", s->h3[0]->addr.port);
  return 0;
}

void pp_h3conn_drain(pp_sessions *s) {
  s->alt_svc[0] = 0; /* the listener is going away: stop advertising it */
  for (int i = 0; i < s->h3_count; i++) {
    pp_h3_listener *l = s->h3[i];
    pp_h3_server_shutdown(&l->h3, uv_hrtime());
    drain_out(l);
  }
}

size_t pp_h3conn_live(pp_sessions *s) {
  size_t n = 0;
  for (int i = 0; i < s->h3_count; i++)
    n += pp_h3_server_conn_count(&s->h3[i]->h3);
  return n;
}

void pp_h3conn_stats(pp_sessions *s, pp_h3_stats *sum) {
  memset(sum, 0, sizeof *sum);
  for (int i = 0; i < s->h3_count; i++) {
    const uint64_t *src = (const uint64_t *)&s->h3[i]->h3.stats;
    uint64_t *dst = (uint64_t *)sum;
    for (size_t k = 0; k < sizeof *sum / sizeof(uint64_t); k++)
      dst[k] += src[k];
  }
}

/* /stats "http3": the endpoints' counters summed over the listeners. */
void pp_h3conn_stats_json(pp_sessions *s, json_t *root) {
  json_t *h3 = json_object();
  pp_h3_stats h3s;
  pp_h3conn_stats(s, &h3s);
  json_object_set_new(h3, "listeners", json_integer(s->h3_count));
  json_object_set_new(h3, "connections", json_integer((json_int_t)h3s.connections));
  json_object_set_new(h3, "connections_open", json_integer((json_int_t)pp_h3conn_live(s)));
  json_object_set_new(h3, "handshakes", json_integer((json_int_t)h3s.handshakes));
  json_object_set_new(h3, "streams", json_integer((json_int_t)h3s.streams_accepted));
  json_object_set_new(h3, "peer_resets", json_integer((json_int_t)h3s.peer_resets));
  json_object_set_new(h3, "idle_closes", json_integer((json_int_t)h3s.idle_closes));
  json_object_set_new(h3, "retries_sent", json_integer((json_int_t)h3s.retries_sent));
  json_object_set_new(h3, "version_negotiations",
                      json_integer((json_int_t)h3s.version_negotiations));
  json_object_set_new(h3, "stateless_resets", json_integer((json_int_t)h3s.stateless_resets));
  json_t *drops = json_object();
#define DROP(name) json_object_set_new(drops, #name, json_integer((json_int_t)h3s.drop_##name))
  DROP(garbage);
  DROP(unknown_cid);
  DROP(bad_version);
  DROP(small_initial);
  DROP(large_initial);
  DROP(truncated);
  DROP(token_invalid);
  DROP(too_many_conns);
  DROP(out_queue_full);
  DROP(closing);
#undef DROP
  json_object_set_new(h3, "drops", drops);
  json_t *h3err = json_object();
  json_object_set_new(h3err, "stream_limit", json_integer((json_int_t)h3s.stream_limit_errors));
  json_object_set_new(h3err, "qpack", json_integer((json_int_t)h3s.qpack_errors));
  json_object_set_new(h3err, "protocol", json_integer((json_int_t)h3s.protocol_errors));
  json_object_set_new(h3, "connection_errors", h3err);
  json_object_set_new(root, "http3", h3);
}
