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
} pp_h2h3_request;
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
/* The access-log record of a request the session refuses at its header section (admission's
 * 503) before it has an exchange: the session answers "<status> <reason>\n" itself. */
void pp_h2h3_log_refused(const pp_hooks *hooks, const char *remote, const char *protocol,
                         int status, const uint8_t *method, size_t method_len, const uint8_t *path,
                         size_t path_len);

#endif
