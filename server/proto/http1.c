/* HTTP/1.1 request parsing over llhttp, the refusal rules of issue 4, and the Rack env
 * builder of PROTOCOL.md. See http1.h for the contract.
 *
 * llhttp reports the URL and header bytes in fragments (a read may end anywhere); each
 * fragment is appended to one per-connection buffer and the spans are recorded, so a header
 * may arrive split across any number of reads. */
#include "server/proto/http1.h"

#include "server/proto/http1_int.h"

#include "server/proto/env.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server/base/alloc.h"

static llhttp_settings_t settings;
static int settings_ready;

void pp_h1_limits_default(pp_h1_limits *l) {
  l->max_header_bytes = 32768;
  l->max_uri_bytes = 8192;
  l->max_headers = 100;
  l->max_body_bytes = 64ull << 20;
}

static pp_h1 *of(llhttp_t *p) {
  return (pp_h1 *)p->data;
}

static int fail(pp_h1 *h, int status, const char *reason) {
  h->status = status;
  h->reason = reason;
  return HPE_USER;
}

static void reset_request(pp_h1 *h) {
  h->raw.len = 0;
  h->url.off = h->url.len = 0;
  h->header_count = 0;
  h->in_value = 0;
  h->has_content_length = 0;
  h->content_length = 0;
  h->chunked = 0;
  h->te_lines = h->te_chunked = 0;
  h->te_other = h->te_last_chunked = h->te_empty = 0;
  h->authority.off = h->authority.len = 0;
  h->ck_state = 0;
  h->ck_size = h->ck_body = 0;
  h->ck_ext_bytes = 0;
  h->expect_continue = 0;
  h->keep_alive = 0;
  h->host_index = -1;
  h->content_type_index = -1;
  h->upgrade = 0;
  h->in_trailers = 0;
  h->trailer_bytes = 0;
  h->body_received = 0;
  h->started = 0;
}

static int head_too_big(pp_h1 *h) {
  return h->raw.len + 4u * h->header_count > h->limits->max_header_bytes;
}

static int on_message_begin(llhttp_t *p) {
  pp_h1 *h = of(p);
  reset_request(h);
  h->started = 1;
  return 0;
}

static int on_url(llhttp_t *p, const char *at, size_t len) {
  pp_h1 *h = of(p);
  if (h->url.len == 0) h->url.off = (uint32_t)h->raw.len;
  if (h->url.len + len > h->limits->max_uri_bytes) return fail(h, 414, "request-target too long");
  pp_buf_append(&h->raw, at, len);
  h->url.len += (uint32_t)len;
  if (head_too_big(h)) return fail(h, 431, "request header section too large");
  return 0;
}

/* Trailer fields of a chunked body arrive through the header callbacks after the header
 * section, possibly after the request was dispatched. RFC 9110 §6.5.1 lets a recipient discard
 * them, and we do: the header rules (duplicate Host, Content-Length ...) do not apply to them,
 * they never reach the env, and their bytes are bounded by the header size limit (431). */
static int trailer_bytes(pp_h1 *h, size_t len) {
  h->trailer_bytes += (uint32_t)(len < UINT32_MAX ? len : UINT32_MAX);
  if (h->trailer_bytes > h->limits->max_header_bytes)
    return fail(h, 431, "request trailer section too large");
  return 0;
}

/* The header spans, at the connection's first field: max_headers of each (the limit as it is
 * now; spans_cap keeps the count, so a limit changed later never indexes past them). */
static void spans_alloc(pp_h1 *h) {
  uint32_t n = h->limits->max_headers < PP_H1_MAX_HEADERS_CAP ? h->limits->max_headers
                                                              : PP_H1_MAX_HEADERS_CAP;
  size_t each = n ? n : 1;
  h->name = pp_xmalloc(2 * each * sizeof *h->name);
  h->value = h->name + each;
  h->spans_cap = n;
}

static int on_header_field(llhttp_t *p, const char *at, size_t len) {
  pp_h1 *h = of(p);
  if (h->in_trailers) return trailer_bytes(h, len);
  uint32_t i = h->header_count;
  if (!h->in_value) {
    if (!h->name) spans_alloc(h);
    if (i >= h->limits->max_headers || i >= h->spans_cap)
      return fail(h, 431, "too many header fields");
    h->name[i].off = (uint32_t)h->raw.len;
    h->name[i].len = 0;
    h->in_value = 1; /* a field is open */
  }
  pp_buf_append(&h->raw, at, len);
  h->name[i].len += (uint32_t)len;
  if (head_too_big(h)) return fail(h, 431, "request header section too large");
  return 0;
}

static int on_header_field_complete(llhttp_t *p) {
  pp_h1 *h = of(p);
  if (h->in_trailers) return 0;
  uint32_t i = h->header_count;
  /* RFC 9112: a field name is a token; whitespace before the colon is a smuggling shape. */
  const pp_h1_span name = h->name[i];
  if (name.len == 0) return fail(h, 400, "empty header name");
  const uint8_t *b = h->raw.data + name.off;
  for (uint32_t k = 0; k < name.len; k++)
    if (!pp_h1__is_tchar(b[k])) return fail(h, 400, "invalid header name");
  h->value[i].off = (uint32_t)h->raw.len;
  h->value[i].len = 0;
  return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t len) {
  pp_h1 *h = of(p);
  if (h->in_trailers) return trailer_bytes(h, len);
  uint32_t i = h->header_count;
  pp_buf_append(&h->raw, at, len);
  h->value[i].len += (uint32_t)len;
  if (head_too_big(h)) return fail(h, 431, "request header section too large");
  return 0;
}

static int name_is(const pp_h1 *h, uint32_t i, const char *name) {
  size_t n = strlen(name);
  return h->name[i].len == n &&
         strncasecmp((const char *)h->raw.data + h->name[i].off, name, n) == 0;
}

/* Trims optional whitespace (SP / HTAB) around a header value. */
static void trimmed(const pp_h1 *h, uint32_t i, const char **s, size_t *n) {
  const char *v = (const char *)h->raw.data + h->value[i].off;
  size_t len = h->value[i].len;
  while (len && (v[0] == ' ' || v[0] == '\t'))
    v++, len--;
  while (len && (v[len - 1] == ' ' || v[len - 1] == '\t'))
    len--;
  *s = v;
  *n = len;
}

/* Records one Transfer-Encoding line: a comma-separated list of codings (RFC 9112 §6.1),
 * judged as a whole when the header section ends (te_verdict). */
static void te_line(pp_h1 *h, const char *v, size_t n) {
  int named = 0;
  h->te_lines++;
  size_t pos = 0, len;
  const uint8_t *e;
  while (pp_h1_list_next((const uint8_t *)v, n, &pos, &e, &len)) {
    named = 1;
    if (len == 7 && strncasecmp((const char *)e, "chunked", 7) == 0) {
      h->te_chunked++;
      h->te_last_chunked = 1;
    } else {
      h->te_other = 1;
      h->te_last_chunked = 0;
    }
  }
  if (!named) h->te_empty = 1;
}

/* RFC 9112 §6.1 and §6.3: Transfer-Encoding in HTTP/1.0 is faulty framing (400); chunked
 * not the final coding leaves the length unknown (400, MUST), and so does chunked applied
 * twice (§7.1; llhttp 8.1 refuses both too); chunked after another coding is not implemented
 * (501). */
static int te_verdict(pp_h1 *h) {
  if (!h->te_lines) return 0;
  if (h->http_minor == 0) return fail(h, 400, "Transfer-Encoding in an HTTP/1.0 request");
  if (h->te_empty || !h->te_last_chunked)
    return fail(h, 400, "chunked is not the final Transfer-Encoding");
  if (h->te_chunked > 1) return fail(h, 400, "chunked applied more than once");
  if (h->te_other) return fail(h, 501, "Transfer-Encoding other than chunked is not supported");
  h->chunked = 1;
  return 0;
}

/* RFC 9112 §3.2: origin-form, absolute-form (http or https, with a valid authority and no
 * userinfo), or asterisk-form for OPTIONS; authority-form is CONNECT's (refused before). */
static int target_verdict(pp_h1 *h) {
  const char *u = (const char *)h->raw.data + h->url.off;
  size_t n = h->url.len;
  if (n && u[0] == '/') return 0;
  if (n == 1 && u[0] == '*')
    return h->method == HTTP_OPTIONS ? 0 : fail(h, 400, "asterisk-form is for OPTIONS only");
  size_t scheme = 0;
  if (n > 7 && strncasecmp(u, "http://", 7) == 0)
    scheme = 7;
  else if (n > 8 && strncasecmp(u, "https://", 8) == 0)
    scheme = 8;
  if (!scheme) return fail(h, 400, "invalid request-target");
  size_t end = scheme;
  while (end < n && u[end] != '/' && u[end] != '?' && u[end] != '#')
    end++;
  if (!pp_h1_host_ok((const uint8_t *)u + scheme, end - scheme))
    return fail(h, 400, "invalid authority in the request-target");
  h->authority.off = h->url.off + (uint32_t)scheme;
  h->authority.len = (uint32_t)(end - scheme);
  return 0;
}

static int on_header_value_complete(llhttp_t *p) {
  pp_h1 *h = of(p);
  if (h->in_trailers) return 0;
  uint32_t i = h->header_count;
  const char *v;
  size_t n;
  trimmed(h, i, &v, &n);
  /* Whatever llhttp lets through, a value never carries CR or LF: that is obs-fold (a header
   * continued on the next line), a smuggling shape we refuse. */
  if (memchr(v, '\r', n) || memchr(v, '\n', n))
    return fail(h, 400, "obs-fold (folded header line) is not accepted");
  /* RFC 9110 §5.5: NUL and the other control characters are invalid in a value (llhttp 8.1
   * refuses them too; this does not depend on it). */
  if (!pp_h1_field_value_ok((const uint8_t *)v, n))
    return fail(h, 400, "control character in a header value");
  if (name_is(h, i, "content-length")) {
    if (h->has_content_length) return fail(h, 400, "duplicate Content-Length");
    if (n == 0 || n > 18) return fail(h, 400, "invalid Content-Length");
    uint64_t cl = 0;
    for (size_t k = 0; k < n; k++) {
      if (v[k] < '0' || v[k] > '9') return fail(h, 400, "invalid Content-Length");
      cl = cl * 10 + (uint64_t)(v[k] - '0');
    }
    h->has_content_length = 1;
    h->content_length = cl;
  } else if (name_is(h, i, "transfer-encoding")) {
    te_line(h, v, n);
  } else if (name_is(h, i, "host")) {
    if (h->host_index >= 0) return fail(h, 400, "duplicate Host");
    h->host_index = (int)i;
  } else if (name_is(h, i, "expect")) {
    if (n == 12 && strncasecmp(v, "100-continue", 12) == 0)
      h->expect_continue = 1;
    else
      return fail(h, 417, "unsupported Expect");
  } else if (name_is(h, i, "content-type")) {
    if (h->content_type_index < 0) h->content_type_index = (int)i;
  } else if (name_is(h, i, "upgrade")) {
    h->upgrade = 1;
  }
  if (h->has_content_length && h->te_lines)
    return fail(h, 400, "both Content-Length and Transfer-Encoding");
  h->header_count++;
  h->in_value = 0;
  return 0;
}

static int on_headers_complete(llhttp_t *p) {
  pp_h1 *h = of(p);
  h->in_trailers = 1;
  h->method = llhttp_get_method(p);
  h->http_major = llhttp_get_http_major(p);
  h->http_minor = llhttp_get_http_minor(p);
  if (h->method == HTTP_CONNECT) return fail(h, 501, "CONNECT is not supported");
  if (h->http_major != 1) return fail(h, 505, "HTTP version not supported");
  if (te_verdict(h)) return HPE_USER;
  if (target_verdict(h)) return HPE_USER;
  if (h->http_minor >= 1 && h->host_index < 0) return fail(h, 400, "HTTP/1.1 request without Host");
  if (h->host_index >= 0) {
    const char *v;
    size_t n;
    trimmed(h, (uint32_t)h->host_index, &v, &n);
    if (!pp_h1_host_ok((const uint8_t *)v, n)) return fail(h, 400, "invalid Host");
  }
  /* Our framing and llhttp's must be the same message: a disagreement would let the bytes we
   * think are the next request be body to llhttp, or the reverse. */
  if (h->chunked != ((p->flags & F_CHUNKED) != 0))
    return fail(h, 400, "Transfer-Encoding framing disagreement");
  if (h->has_content_length != ((p->flags & F_CONTENT_LENGTH) != 0) ||
      (h->has_content_length && p->content_length != h->content_length))
    return fail(h, 400, "Content-Length framing disagreement");
  if (h->chunked) h->ck_state = CK_SIZE_FIRST; /* the chunk scanner takes over */
  if (h->has_content_length && h->content_length > h->limits->max_body_bytes)
    return fail(h, 413, "Content-Length over the body limit");
  if (h->http_minor == 0) h->expect_continue = 0; /* RFC 9110: ignore Expect from HTTP/1.0 */
  h->keep_alive = llhttp_should_keep_alive(p);
  /* We never switch protocols: an Upgrade request is answered as plain HTTP and the
   * connection closes after it (llhttp would stop parsing HTTP after it anyway). */
  if (h->upgrade) h->keep_alive = 0;
  if (h->cb->on_headers) {
    int st = h->cb->on_headers(h);
    if (st) return fail(h, st, h->reason ? h->reason : "refused");
  }
  return 0;
}

static int on_body(llhttp_t *p, const char *at, size_t len) {
  pp_h1 *h = of(p);
  h->body_received += len;
  if (h->body_received > h->limits->max_body_bytes)
    return fail(h, 413, "request body over the limit");
  if (h->cb->on_body) {
    int st = h->cb->on_body(h, (const uint8_t *)at, len);
    if (st) return fail(h, st, h->reason ? h->reason : "refused");
  }
  return 0;
}

static int on_message_complete(llhttp_t *p) {
  pp_h1 *h = of(p);
  h->messages++;
  if (h->cb->on_complete) {
    int st = h->cb->on_complete(h);
    if (st) return fail(h, st, h->reason ? h->reason : "refused");
  }
  return HPE_PAUSED;
}

void pp_h1_init(pp_h1 *h, const pp_h1_callbacks *cb, const pp_h1_limits *limits, void *data) {
  if (!settings_ready) {
    llhttp_settings_init(&settings);
    settings.on_message_begin = on_message_begin;
    settings.on_url = on_url;
    settings.on_header_field = on_header_field;
    settings.on_header_field_complete = on_header_field_complete;
    settings.on_header_value = on_header_value;
    settings.on_header_value_complete = on_header_value_complete;
    settings.on_headers_complete = on_headers_complete;
    settings.on_body = on_body;
    settings.on_message_complete = on_message_complete;
    settings_ready = 1;
  }
  memset(h, 0, sizeof *h);
  llhttp_init(&h->parser, HTTP_REQUEST, &settings);
  h->parser.data = h;
  h->cb = cb;
  h->limits = limits;
  h->data = data;
  pp_buf_init(&h->raw);
  reset_request(h);
}

void pp_h1_dispose(pp_h1 *h) {
  pp_buf_dispose(&h->raw);
  free(h->name);
  h->name = h->value = NULL;
  h->spans_cap = 0;
}

pp_h1_result pp_h1_execute(pp_h1 *h, const uint8_t *data, size_t len, size_t *consumed) {
  *consumed = 0;
  if (h->status) return PP_H1_ERROR;
  uint64_t messages = h->messages;
  size_t off = 0;
  llhttp_errno_t e = HPE_OK;
  /* The head, then a chunked body, are each scanned before llhttp sees them: llhttp gets the
   * bytes in slices that end where a scanner stopped (the end of the head, the end of the
   * chunked message), so the chunk scanner starts once llhttp has judged the framing. */
  while (off < len) {
    size_t n = len - off;
    int st = 0;
    if (h->scan_state != 3)
      st = pp_h1__scan_head(h, data + off, n, &n);
    else if (h->ck_state != CK_OFF && h->ck_state != CK_DONE)
      st = pp_h1__scan_chunked(h, data + off, n, &n);
    else if (h->ck_state == CK_DONE) {
      /* llhttp did not end the message where the chunked coding ends */
      st = 400;
      h->reason = "chunked framing disagreement";
    }
    if (st) {
      h->status = st;
      return PP_H1_ERROR;
    }
    e = llhttp_execute(&h->parser, (const char *)data + off, n);
    if (e != HPE_OK) break;
    off += n;
  }
  if (e == HPE_OK) {
    *consumed = len;
    return PP_H1_NEED_MORE;
  }
  if ((e == HPE_PAUSED || e == HPE_PAUSED_UPGRADE) && h->messages > messages) {
    const char *pos = llhttp_get_error_pos(&h->parser);
    *consumed = pos ? (size_t)(pos - (const char *)data) : len;
    if (h->chunked && h->ck_state != CK_DONE) {
      h->status = 400;
      h->reason = "chunked framing disagreement";
      return PP_H1_ERROR;
    }
    if (e == HPE_PAUSED_UPGRADE) h->keep_alive = 0; /* we never switch protocols */
    return PP_H1_PAUSED;
  }
  if (e == HPE_PAUSED || e == HPE_PAUSED_UPGRADE) {
    /* Paused without completing a message: llhttp stops for good after an Upgrade request
     * (HPE_PAUSED_UPGRADE at once, nothing consumed, on every call). PAUSED must mean "a
     * message completed" or the owner's read loop would spin, so this is a refusal. The
     * server never gets here (it closes after an Upgrade request's response). */
    h->status = 400;
    h->reason = e == HPE_PAUSED_UPGRADE ? "bytes after an Upgrade request (no protocol switch)"
                                        : "parser paused without a complete message";
    return PP_H1_ERROR;
  }
  if (!h->status) {
    switch (e) {
    case HPE_INVALID_TRANSFER_ENCODING:
      /* llhttp 8.1 raises this when chunked is not the final coding: RFC 9112 §6.3 (400) */
      h->status = 400;
      h->reason = "chunked is not the final Transfer-Encoding";
      break;
    default:
      h->status = 400;
      h->reason = llhttp_get_error_reason(&h->parser);
      if (!h->reason) h->reason = llhttp_errno_name(e);
    }
  }
  return PP_H1_ERROR;
}

void pp_h1_resume(pp_h1 *h) {
  if (llhttp_get_errno(&h->parser) == HPE_PAUSED_UPGRADE)
    llhttp_resume_after_upgrade(&h->parser);
  else
    llhttp_resume(&h->parser);
  reset_request(h);
  h->scan_state = 0;
  h->rl_state = 0;
  h->rl_ver_len = 0;
  h->scan_lines = 0;
  h->scan_line_len = 0;
  h->scan_cr = 0;
}

const uint8_t *pp_h1_header(const pp_h1 *h, const char *name, size_t *len) {
  for (uint32_t i = 0; i < h->header_count; i++)
    if (name_is(h, i, name)) {
      const char *v;
      trimmed(h, i, &v, len);
      return (const uint8_t *)v;
    }
  return NULL;
}

void pp_h1_put_pair(pp_buf *out, const char *key, size_t key_len, const char *value,
                    size_t value_len) {
  pp_env_put_pair(out, key, key_len, value, value_len);
}

uint32_t pp_h1_build_env(const pp_h1 *h, const pp_h1_conninfo *ci, uint64_t request_id,
                         pp_buf *out) {
  pp_env_field fields[PP_H1_MAX_HEADERS_CAP + 1];
  uint32_t count = h->header_count;
  int host_index = h->host_index;
  for (uint32_t i = 0; i < count; i++) {
    fields[i].name = (const char *)h->raw.data + h->name[i].off;
    fields[i].name_len = h->name[i].len;
    trimmed(h, i, &fields[i].value, &fields[i].value_len);
  }
  /* RFC 9112 §3.2.2: with an absolute-form target, the target's authority is the host and
   * a Host field is ignored, so the env's Host (SERVER_NAME, SERVER_PORT, HTTP_HOST) is the
   * authority. */
  if (h->authority.len) {
    if (host_index < 0) {
      host_index = (int)count++;
      fields[host_index].name = "Host";
      fields[host_index].name_len = 4;
    }
    fields[host_index].value = (const char *)h->raw.data + h->authority.off;
    fields[host_index].value_len = h->authority.len;
  }
  const char *method = llhttp_method_name((llhttp_method_t)h->method);
  pp_env_request rq = {method,
                       strlen(method),
                       h->raw.data ? (const char *)h->raw.data + h->url.off : "",
                       h->url.len,
                       h->http_minor == 0 ? "HTTP/1.0" : "HTTP/1.1",
                       fields,
                       count,
                       host_index,
                       h->content_type_index,
                       h->has_content_length,
                       h->content_length};
  return pp_env_build(&rq, ci, request_id, out);
}
