/* h2h3: what the HTTP/2 (h2conn.c) and HTTP/3 (h3conn.c) session glue share. */
#ifndef PP_H2H3_H
#define PP_H2H3_H

#include <stddef.h>
#include <stdint.h>

#include "server/base/buf.h"
#include "server/base/hooks.h"
#include "server/exchange/exchange.h"
#include "server/core/exchange_owner.h"
#include "server/proto/env.h"
#include "server/proto/h2.h"
#include "server/proto/wire.h"
#include "server/proto/ws.h"
#include "server/session/wsconn.h"

typedef struct pp_sessions pp_sessions; /* conn.h */

/* An HTTP/2 or HTTP/3 request as the env needs it (pointers valid during the call). */
typedef struct pp_h2h3_request {
  const uint8_t *method;
  size_t method_len;
  const uint8_t *path;
  size_t path_len;
  const uint8_t *authority; /* may be NULL */
  size_t authority_len;
  const struct pp_h2_header *headers;
  size_t header_count;
  int has_content_length;
  uint64_t content_length;
  /* A checked WebSocket over extended CONNECT (RFC 8441 / RFC 9220): the app sees the env of
   * HTTP/1.1's upgrade (REQUEST_METHOD GET, HTTP_UPGRADE websocket, HTTP_CONNECTION Upgrade)
   * plus PP_H2H3_WS_ENV_FLAG ("true") and PP_H2H3_WS_ENV_PROTOCOLS (the offer, or ""), as
   * h1conn.c writes them. */
  int websocket;
  const uint8_t *ws_protocols; /* Sec-WebSocket-Protocol as sent, or NULL */
  size_t ws_protocols_len;
} pp_h2h3_request;

/* An initializer of a pp_h2h3_request from rq, a pp_h2_request or a pp_h3_request (the two name
 * these fields alike): the request line, fields and length as they came, the WebSocket part
 * zero (pp_h2h3_ws_request fills it). A macro, as the two request types are distinct. */
#define PP_H2H3_REQUEST_OF(rq)                                                                     \
  {                                                                                                \
    .method = (rq)->method, .method_len = (rq)->method_len, .path = (rq)->path,                    \
    .path_len = (rq)->path_len, .authority = (rq)->authority,                                      \
    .authority_len = (rq)->authority_len, .headers = (rq)->headers,                                \
    .header_count = (rq)->header_count, .has_content_length = (rq)->has_content_length,            \
    .content_length = (rq)->content_length                                                         \
  }

#define PP_H2H3_WS_ENV_FLAG      "puma_plus.websocket?"
#define PP_H2H3_WS_ENV_PROTOCOLS "puma_plus.websocket.protocols"
/* Where a request came from, for its exchange and env: the session's state, the exchange ops and
 * owner of the connection, the peer's address text, "HTTP/2" or "HTTP/3", and the listener's
 * host, port text and scheme. */
typedef struct pp_h2h3_origin {
  pp_sessions *s;
  const pp_exchange_ops *ops;
  void *owner;
  const char *remote;
  const char *protocol;
  const char *local_host;
  const char *local_port;
  const char *scheme;
} pp_h2h3_origin;
/* A request stream's header section is complete: counts it, asks admission, and either logs the
 * refusal and returns NULL with *refuse set to the status the session answers itself, or creates
 * the stream's exchange (env written through scratch, pushed on streams, body done when
 * end_stream) and returns it. */
pp_exchange *pp_h2h3_open(const pp_h2h3_origin *o, const pp_h2h3_request *rq, int64_t stream_id,
                          int end_stream, pp_buf *scratch, pp_queue *streams, int *refuse);
/* Writes x's env (pp_exchange_env_begin .. _end) from an HTTP/2 or HTTP/3 request: :authority
 * is Host, :path the request-target, the fields as they came; scratch holds the field list. */
void pp_h2h3_env(pp_exchange *x, pp_buf *scratch, const char *protocol, const pp_env_conninfo *ci,
                 const pp_h2h3_request *rq);
/* The response pairs of a RESPONSE_HEAD as pp_h2_header entries in *out (pointers into the
 * frame), plus date: date unless it is NULL or the app gave its own, and alt-svc: alt_svc unless it
 * is "" (s->alt_svc: an HTTP/3 listener is open). Returns the count. */
size_t pp_h2h3_headers(const char *alt_svc, const char *date, const pp_wire_pairs *pairs,
                       pp_buf *out);
/* A response head with `status` went out on x's stream: sets x->status and counts it (the
 * pool's status counts, the responses, x's time to first byte). */
void pp_h2h3_count_response(pp_sessions *s, pp_exchange *x, int status);
/* The access-log record of a request the session refuses at its header section (admission's
 * 503) before it has an exchange: the session answers "<status> <reason>\n" itself. */
void pp_h2h3_log_refused(const pp_hooks *hooks, const char *remote, const char *protocol,
                         int status, const uint8_t *method, size_t method_len, const uint8_t *path,
                         size_t path_len);

/* ---------------------------------------------------------------- WebSocket tunnels */

/* An extended CONNECT with :protocol websocket (RFC 8441 on HTTP/2, RFC 9220 on HTTP/3), from
 * its checked handshake to the end of its stream. First the upgrade request's exchange (x)
 * goes through the queue and the app like any request; once the app accepted (a 101 with
 * puma-plus-websocket), the stream answers 200, stays open, and its DATA carries the bytes of a
 * server-owned WebSocket (wc, session/wsconn.h) both ways. h2conn.c and h3conn.c keep one per
 * such stream in a list of their connection, found by stream id (a stream's owner data stays
 * the exchange while there is one).
 *
 * io calls (write, close, pause) never pump the connection themselves: they kick a 0 ms timer
 * of the tunnel whose callback does (pump), so a connection that fails while it writes never
 * ends a wsconn from inside that wsconn's own call. */
typedef struct pp_h2h3_ws pp_h2h3_ws;
struct pp_h2h3_ws {
  pp_qnode link; /* in the connection's list */
  void *conn;    /* the client (h2) or h3_conn (h3) */
  int64_t stream_id;
  pp_exchange *x; /* the upgrade request, until its RESPONSE_END (or the stream's end) */
  pp_wsconn *wc;  /* the app accepted: the WebSocket; NULL before, and once it is gone */
  int pmd_ok;     /* permessage-deflate agreed in the handshake ... */
  pp_ws_pmd_params pmd;
  char ext_resp[128]; /* ... and the Sec-WebSocket-Extensions to answer */
  pp_buf offered;     /* Sec-WebSocket-Protocol as the client sent it */
  pp_buf early;       /* DATA before the accept: fed at the accept, its credit held till then */
  uint64_t held;      /* DATA fed while paused: flow-control credit not yet released */
  int paused;         /* io->pause(1): credit is held, so the client's window closes */
  int ended;          /* our END_STREAM is queued (io->close, or the client's FIN echoed) */
  int fin_in;         /* the client's END_STREAM arrived */
  pp_buf out;         /* h3: bytes the endpoint could not take yet ... */
  size_t out_off;     /* ... of which this many were handed over since */
  uv_timer_t kick;
  void (*pump)(pp_h2h3_ws *t); /* the connection's pump, run from the kick */
};

/* A tunnel record for stream_id of conn (not yet in a list). */
pp_h2h3_ws *pp_h2h3_ws_new(uv_loop_t *loop, void *conn, int64_t stream_id,
                           void (*pump)(pp_h2h3_ws *t));
/* Frees t (its timer is closed first); t must be out of its list. */
void pp_h2h3_ws_free(pp_h2h3_ws *t);
/* The tunnel's stream or connection is gone: its WebSocket, if it has one, is told so
 * (pp_wsconn_gone, t->wc cleared first), then t is freed. t must be out of its list. */
void pp_h2h3_ws_end(pp_h2h3_ws *t);
/* The connection's pump runs soon (from the loop, not from this call). */
void pp_h2h3_ws_kick(pp_h2h3_ws *t);
/* The tunnel of stream_id in list (of pp_h2h3_ws.link), or NULL. */
pp_h2h3_ws *pp_h2h3_ws_find(pp_queue *list, int64_t stream_id);
/* Checks the extended CONNECT rq (:scheme scheme; :protocol and :method in rq) as a WebSocket
 * opening handshake (pp_ws_handshake_check, PP_WS_HS_CONNECT) and negotiates
 * permessage-deflate with pmd: 0, with t's pmd_ok, pmd, ext_resp and offered filled, or the
 * status to answer (400, 426: then *why says which rule failed). */
int pp_h2h3_ws_check(pp_h2h3_ws *t, const pp_ws_pmd_config *pmd, const pp_h2h3_request *rq,
                     const uint8_t *protocol, size_t protocol_len, const uint8_t *scheme,
                     size_t scheme_len, const char **why);
/* The shared part of an extended CONNECT on a stream of conn (rq: :protocol, :scheme; r: the
 * request): a :protocol other than websocket is 501; the handshake is checked against pmd
 * (pp_h2h3_ws_check) and a refusal logged; else the upgrade request's exchange opens
 * (pp_h2h3_open, on hdrs and streams). Returns 0 with *out the tunnel (its x set; not yet in
 * the connection's list), or the status the session answers itself: 426 is written by the
 * caller on its stream with PP_H2H3_WS_426_FIELDS and PP_H2H3_WS_426_BODY (RFC 6455 §4.4: the
 * versions we speak go with it), any other as its bare status. */
int pp_h2h3_ws_request(const pp_h2h3_origin *o, pp_h2h3_request *r, const pp_ws_pmd_config *pmd,
                       const uint8_t *protocol, size_t protocol_len, const uint8_t *scheme,
                       size_t scheme_len, void *conn, int64_t stream_id,
                       void (*pump)(pp_h2h3_ws *t), pp_buf *hdrs, pp_queue *streams,
                       pp_h2h3_ws **out);
extern const struct pp_h2_header PP_H2H3_WS_426_FIELDS[2];
#define PP_H2H3_WS_426_BODY "426 Upgrade Required\n"
/* The fields of the 200 that accepts (a, from the app's head f): the app's own fields except
 * those pp_ws_accept_skips_field names, then date, sec-websocket-protocol (the app's choice)
 * and sec-websocket-extensions (agreed). As pp_h2h3_headers: entries in *out, the count
 * returned. */
size_t pp_h2h3_ws_headers(const pp_h2h3_ws *t, const pp_ws_accept *a, const char *date,
                          const pp_wire_pairs *pairs, pp_buf *out);
/* The WebSocket of an accepted tunnel (pp_wsconn_open with its upgrade request x and the
 * agreed permessage-deflate). NULL: the codec could not start. */
pp_wsconn *pp_h2h3_ws_open(pp_h2h3_ws *t, pp_wshub *hub, const pp_wsconn_io *io,
                           const pp_ws_accept *a, const pp_wire_frame *f);
/* Feeds the tunnel's new WebSocket the DATA that came before the accept (t->early, emptied).
 * Returns how many of those bytes the caller gives flow-control credit back for now: all, or 0
 * while t is paused (they are added to t->held). */
size_t pp_h2h3_ws_feed_early(pp_h2h3_ws *t);

#endif
