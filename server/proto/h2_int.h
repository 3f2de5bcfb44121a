/* Internals shared by the two files of the HTTP/2 session: h2.c (life cycle, input, the
 * nghttp2 callbacks) and h2_response.c (the response data source and the owner's response
 * calls). Not a public API (STYLE.md: a private <module>_int.h). */
#ifndef PP_H2_INT_H
#define PP_H2_INT_H

#include <nghttp2/nghttp2.h>

#include "server/proto/h2.h"

struct pp_h2_stream {
  int32_t id;
  void *owner_data;
  unsigned owned : 1;         /* the owner holds it: on_close is owed */
  unsigned answered : 1;      /* the session answered it (or refused it): no owner callbacks */
  unsigned head : 1;          /* the request is HEAD */
  unsigned responded : 1;     /* a final response was submitted */
  unsigned no_body : 1;       /* ... without a body */
  unsigned ended : 1;         /* no more response bytes will be added */
  unsigned deferred : 1;      /* the data source returned DEFERRED */
  unsigned resume : 1;        /* resume_data is owed (flush) */
  unsigned remote_closed : 1; /* END_STREAM received */
  unsigned too_large : 1;     /* the header list went over max_header_list */
  unsigned over_body : 1;     /* DATA went over max_body_bytes */
  unsigned local_reset : 1;   /* pp_h2_reset was called */
  unsigned tunnel : 1;        /* an extended CONNECT the owner took (RFC 8441) */
  uint64_t body_received;     /* request-body bytes seen */
  uint64_t unconsumed;        /* delivered to the owner, not yet consumed by it */
  uint64_t consume_pending;   /* consumed by the owner, not yet told to nghttp2 (flush) */
  pp_buf resp;                /* response bytes; resp_off of them already framed */
  size_t resp_off;
  pp_h2_stream *prev, *next;
};

/* The stream record of an open stream, or NULL. */
pp_h2_stream *pp_h2__stream_of(pp_h2 *h, int32_t stream_id);
/* Some stream has deferred work (consume, resume): done once outside nghttp2's callbacks. */
void pp_h2__owe_work(pp_h2 *h);
/* The data source of every response: the stream's response buffer (DEFERRED while empty). */
ssize_t pp_h2__read_response(nghttp2_session *session, int32_t stream_id, uint8_t *buf,
                             size_t length, uint32_t *data_flags, nghttp2_data_source *source,
                             void *user_data);

/* h2_mem.c: the session's allocator for nghttp2 (free lists of PP_H2_MEM_CLASSES size
 * classes, 64 B to 32 KiB), and the release of its blocks after nghttp2_session_del. */
#define PP_H2_MEM_CLASSES 10
nghttp2_mem pp_h2__mem(pp_h2 *h);
void pp_h2__mem_dispose(pp_h2 *h);

#endif
