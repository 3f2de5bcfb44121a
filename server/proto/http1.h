/* HTTP/1.1 request parsing for one client connection, on top of llhttp, without I/O.
 *
 * The owner feeds bytes with pp_h1_execute(); the parser calls the owner back when a
 * request's headers are complete and validated, for each piece of body, and when the message
 * is complete, and then pauses so that the owner answers requests one at a time, in order
 * (pipelined bytes wait unparsed in the owner's buffer). Everything that must be refused is
 * refused here with the status the issue asks for: 431 (header section or trailers too large,
 * or too many headers), 414 (URI too long), 413 (body over the limit, a chunk-size that would
 * pass it, chunk extensions over the bound), 400 (malformed, or a smuggling shape: every
 * MUST-reject of RFC 9112 listed in docs/SERVER.md "HTTP/1.1 refusals", whether or not
 * llhttp 8.1 lets it through), 501 (a coding before the final chunked, or CONNECT), 505 (an
 * HTTP-version other than 1.0 and 1.1), 417 (an Expect other than 100-continue). The request
 * line and header section, then a chunked body, are scanned by our own code before llhttp
 * sees the bytes, so the outcome never depends on how the stream was split into reads.
 *
 * pp_h1_build_env() writes the Rack env pairs of PROTOCOL.md (REQUEST) for the current
 * request. The parser keeps URL and header bytes in one buffer it reuses for every request
 * of the connection, so after warm-up it does not allocate. */
#ifndef PP_HTTP1_H
#define PP_HTTP1_H

#include <stddef.h>
#include <stdint.h>
#include <llhttp.h>

#include "server/base/buf.h"
#include "server/proto/env.h"
#include "server/proto/http_status.h" /* pp_http_reason_phrase, for the status line */

#define PP_H1_MAX_HEADERS_CAP 256 /* hard upper bound of the header-count limit */

typedef struct pp_h1_limits {
  size_t max_header_bytes; /* request line + header section (431 beyond; 414 if the URI alone) */
  size_t max_uri_bytes;    /* request-target length (414 beyond) */
  uint32_t max_headers;    /* header lines (431 beyond), at most PP_H1_MAX_HEADERS_CAP */
  uint64_t max_body_bytes; /* body (413 beyond) */
} pp_h1_limits;

void pp_h1_limits_default(pp_h1_limits *l);

typedef enum pp_h1_result {
  PP_H1_NEED_MORE = 0, /* every byte consumed, the message is not complete */
  PP_H1_PAUSED = 1,    /* a message completed; call pp_h1_resume() before feeding more */
  PP_H1_ERROR = -1,    /* the request is refused: see pp_h1.status and pp_h1.reason */
} pp_h1_result;

typedef struct pp_h1 pp_h1;

/* The owner's callbacks. Each returns 0 to go on, or an HTTP status (>= 400) to refuse the
 * request (the parser then fails with that status). */
typedef struct pp_h1_callbacks {
  int (*on_headers)(pp_h1 *h); /* headers complete and validated */
  int (*on_body)(pp_h1 *h, const uint8_t *data, size_t len);
  int (*on_complete)(pp_h1 *h); /* whole message received */
} pp_h1_callbacks;

typedef struct pp_h1_span {
  uint32_t off, len;
} pp_h1_span;

struct pp_h1 {
  llhttp_t parser;
  const pp_h1_callbacks *cb;
  const pp_h1_limits *limits;
  void *data; /* the owner's */

  /* The current request. Spans index into `raw`. name and value hold limits->max_headers
   * spans each, in one allocation made at the connection's first header field (NULL
   * before), so a connection that switched protocols gives them back with raw
   * (pp_h1_dispose). */
  pp_buf raw;
  pp_h1_span url;
  pp_h1_span *name, *value;
  uint32_t header_count;
  int in_value;   /* a header field is open (until its value completes) */
  uint8_t method; /* llhttp_method_t */
  uint8_t http_major, http_minor;
  int has_content_length;
  uint64_t content_length;
  int chunked;
  uint32_t te_lines;    /* Transfer-Encoding field lines seen */
  uint32_t te_chunked;  /* "chunked" elements among them */
  int te_other;         /* a coding other than chunked was named */
  int te_last_chunked;  /* the final coding named so far is chunked */
  int te_empty;         /* a Transfer-Encoding line named no coding */
  pp_h1_span authority; /* absolute-form: the target's authority (the env's Host) */
  int expect_continue;
  int keep_alive;         /* after headers: the connection may carry another request */
  int host_index;         /* header index of Host, or -1 */
  int content_type_index; /* header index of Content-Type, or -1 */
  int upgrade;            /* an Upgrade header was present (answered, then closed) */
  int in_trailers;        /* past the header section: fields now are chunked-body trailers */
  uint32_t trailer_bytes; /* trailer field bytes seen (discarded; bounded like the head) */
  uint64_t body_received;
  uint64_t messages; /* requests completed on this connection */
  int started;       /* a byte of the current request has been seen */

  int scan_state; /* head scanner: 0 in a line, 2 line start, 3 section over */
  int scan_cr;    /* head scanner: the last byte seen was CR (the next must be LF) */
  uint32_t scan_lines, scan_line_len;
  int rl_state;        /* request-line scanner state (http1.c) */
  uint8_t rl_ver_len;  /* bytes of the HTTP-version seen */
  char rl_version[10]; /* the HTTP-version, as sent (at most 9 bytes kept) */

  /* Chunked-coding scanner (ahead of llhttp, like the head scanner). */
  int ck_state;
  uint64_t ck_size;      /* the chunk-size being read, then the data bytes left */
  uint64_t ck_body;      /* chunk-data bytes announced so far (413 past the body limit) */
  uint32_t ck_ext_bytes; /* chunk-extension bytes of this message (bounded) */

  /* The glue's response framing state for the current response (h1conn.c): the bytes its
   * Content-Length still allows, when resp_length_known. Never read by the parser. */
  int resp_length_known;
  uint64_t resp_length_left;

  uint32_t spans_cap; /* spans in each of name and value (beside status: no padding) */
  int status;         /* after PP_H1_ERROR: the HTTP status to answer */
  const char *reason; /* after PP_H1_ERROR: why, for the log */
};

/* Initialises a parser; cb and limits must outlive it. */
void pp_h1_init(pp_h1 *h, const pp_h1_callbacks *cb, const pp_h1_limits *limits, void *data);
/* Frees the parser's heap memory (the request head and the header spans). It may be called
 * again; a parser fed after it allocates them anew. */
void pp_h1_dispose(pp_h1 *h);

/* Feeds bytes. *consumed is how many were parsed (all of them for NEED_MORE; up to the end of
 * the completed message for PAUSED). PAUSED always means that exactly one message completed
 * in this call. Bytes after an Upgrade request (which is never switched) are an ERROR. The
 * result does not depend on how the stream is split into calls. After ERROR the parser
 * stays failed. */
pp_h1_result pp_h1_execute(pp_h1 *h, const uint8_t *data, size_t len, size_t *consumed);

/* Prepares for the next request on the connection after PP_H1_PAUSED. */
void pp_h1_resume(pp_h1 *h);

/* The header value of the first header named `name` (case-insensitive), or NULL. */
const uint8_t *pp_h1_header(const pp_h1 *h, const char *name, size_t *len);

/* The connection facts the env needs (env.h). */
typedef pp_env_conninfo pp_h1_conninfo;

/* Appends the env pairs of the current request through pp_env_build (env.h), so h1 and h2
 * requests give the same env. With an absolute-form target the target's authority stands for
 * Host (RFC 9112 §3.2.2: SERVER_NAME, SERVER_PORT and HTTP_HOST come from it). Returns the
 * number of pairs written. */
uint32_t pp_h1_build_env(const pp_h1 *h, const pp_h1_conninfo *ci, uint64_t request_id,
                         pp_buf *out);

/* Appends one encoded pair (bytes key, bytes value): pp_env_put_pair. */
void pp_h1_put_pair(pp_buf *out, const char *key, size_t key_len, const char *value,
                    size_t value_len);

/* Response checks the glue applies to what the app sends (docs/RACK.md "The response").
 * pp_h1_token_ok: 1 if s[0..n) is a non-empty token (RFC 9110 §5.6.2), the syntax of a field
 * name. pp_h1_field_value_ok: 1 if s[0..n) holds no control character other than HTAB (so
 * no CR, LF, NUL or DEL): the bytes can go on one header line as they are.
 * pp_h1_app_status_ok: 1 if an app may send `status` as its final response: 200..999 (a 1xx
 * cannot end an exchange, and anything outside three digits breaks the status line). */
int pp_h1_token_ok(const uint8_t *s, size_t n);
int pp_h1_field_value_ok(const uint8_t *s, size_t n);
int pp_h1_app_status_ok(int status);

/* 1 if s[0..n) is a valid Host value or absolute-form authority (RFC 9112 §3.2, RFC 3986
 * §3.2.2): uri-host [":" port], no userinfo, a non-empty host and, when a port is given, a
 * non-empty one of at most 65535. */
int pp_h1_host_ok(const uint8_t *s, size_t n);

/* The next element of a comma-separated field value (RFC 9110 section 5.6.1: empty elements and
 * the whitespace around each are skipped). Start with *pos = 0; returns 1 with the element, or
 * 0 at the end. */
int pp_h1_list_next(const uint8_t *v, size_t n, size_t *pos, const uint8_t **elem,
                    size_t *elem_len);

#endif
