/* HTTP/1.1 request parsing over llhttp, the refusal rules of issue 4, and the Rack env
 * builder of PROTOCOL.md. See http1.h for the contract.
 *
 * llhttp reports the URL and header bytes in fragments (a read may end anywhere); each
 * fragment is appended to one per-connection buffer and the spans are recorded, so a header
 * may arrive split across any number of reads. */
#include "server/http1.h"

#include "server/env.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

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

static int on_header_field(llhttp_t *p, const char *at, size_t len) {
  pp_h1 *h = of(p);
  if (h->in_trailers) return trailer_bytes(h, len);
  uint32_t i = h->header_count;
  if (!h->in_value) {
    if (i >= h->limits->max_headers || i >= PP_H1_MAX_HEADERS_CAP)
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

static int is_tchar(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         (c && strchr("!#$%&'*+-.^_`|~", c));
}

static int on_header_field_complete(llhttp_t *p) {
  pp_h1 *h = of(p);
  if (h->in_trailers) return 0;
  uint32_t i = h->header_count;
  /* RFC 9112: a field name is a token; whitespace before the colon is a smuggling shape. */
  if (h->name[i].len == 0) return fail(h, 400, "empty header name");
  for (uint32_t k = 0; k < h->name[i].len; k++)
    if (!is_tchar(h->raw.data[h->name[i].off + k])) return fail(h, 400, "invalid header name");
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
    if (h->chunked) return fail(h, 501, "repeated Transfer-Encoding is not supported");
    if (n != 7 || strncasecmp(v, "chunked", 7) != 0)
      return fail(h, 501, "Transfer-Encoding other than chunked is not supported");
    h->chunked = 1;
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
  if (h->has_content_length && h->chunked)
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
  if (h->http_minor >= 1 && h->host_index < 0) return fail(h, 400, "HTTP/1.1 request without Host");
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
}

/* Scans the request line and header section ahead of llhttp, which accepts two shapes that we
 * refuse: obs-fold (a line that starts with SP or HTAB) and a bare CR (a CR not followed by
 * LF; llhttp 8 takes CR + any byte as a line end and swallows the byte, so its idea of where
 * the header section ends would depend on the bytes after the CR). Refusing both here, before
 * llhttp sees the offending byte, keeps the outcome independent of how the bytes were split
 * into reads. A CR at the end of one read is judged by the first byte of the next. The scan
 * stops at the empty line ending the section; pp_h1_resume() restarts it for the next request.
 * Returns 0, or the reason for a 400. */
static const char *scan_head(pp_h1 *h, const uint8_t *data, size_t len) {
  for (size_t i = 0; i < len && h->scan_state != 3; i++) {
    uint8_t c = data[i];
    if (h->scan_cr) {
      h->scan_cr = 0;
      if (c != '\n') return "bare CR in the request head";
    }
    if (h->scan_state == 2) { /* at the start of a line */
      if ((c == ' ' || c == '\t') && h->scan_lines > 0)
        return "obs-fold (folded header line) is not accepted";
      h->scan_state = 0;
    }
    if (c == '\n') {
      if (h->scan_line_len == 0 && h->scan_lines > 0) {
        h->scan_state = 3; /* end of the header section */
        break;
      }
      if (h->scan_line_len > 0) h->scan_lines++;
      h->scan_line_len = 0;
      h->scan_state = 2;
    } else if (c == '\r') {
      h->scan_cr = 1;
    } else {
      h->scan_line_len++;
    }
  }
  return NULL;
}

pp_h1_result pp_h1_execute(pp_h1 *h, const uint8_t *data, size_t len, size_t *consumed) {
  *consumed = 0;
  if (h->status) return PP_H1_ERROR;
  const char *bad = h->scan_state != 3 ? scan_head(h, data, len) : NULL;
  if (bad) {
    h->status = 400;
    h->reason = bad;
    return PP_H1_ERROR;
  }
  uint64_t messages = h->messages;
  llhttp_errno_t e = llhttp_execute(&h->parser, (const char *)data, len);
  if (e == HPE_OK) {
    *consumed = len;
    return PP_H1_NEED_MORE;
  }
  if ((e == HPE_PAUSED || e == HPE_PAUSED_UPGRADE) && h->messages > messages) {
    const char *pos = llhttp_get_error_pos(&h->parser);
    *consumed = pos ? (size_t)(pos - (const char *)data) : len;
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
      h->status = 501;
      h->reason = "unsupported Transfer-Encoding";
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
  pp_env_field fields[PP_H1_MAX_HEADERS_CAP];
  for (uint32_t i = 0; i < h->header_count; i++) {
    fields[i].name = (const char *)h->raw.data + h->name[i].off;
    fields[i].name_len = h->name[i].len;
    trimmed(h, i, &fields[i].value, &fields[i].value_len);
  }
  const char *method = llhttp_method_name((llhttp_method_t)h->method);
  pp_env_request rq = {method,
                       strlen(method),
                       h->raw.data ? (const char *)h->raw.data + h->url.off : "",
                       h->url.len,
                       h->http_minor == 0 ? "HTTP/1.0" : "HTTP/1.1",
                       fields,
                       h->header_count,
                       h->host_index,
                       h->content_type_index,
                       h->has_content_length,
                       h->content_length};
  return pp_env_build(&rq, ci, request_id, out);
}

const char *pp_h1_reason_phrase(int status) {
  switch (status) {
  case 100: return "Continue";
  case 101: return "Switching Protocols";
  case 200: return "OK";
  case 201: return "Created";
  case 202: return "Accepted";
  case 203: return "Non-Authoritative Information";
  case 204: return "No Content";
  case 205: return "Reset Content";
  case 206: return "Partial Content";
  case 300: return "Multiple Choices";
  case 301: return "Moved Permanently";
  case 302: return "Found";
  case 303: return "See Other";
  case 304: return "Not Modified";
  case 307: return "Temporary Redirect";
  case 308: return "Permanent Redirect";
  case 400: return "Bad Request";
  case 401: return "Unauthorized";
  case 403: return "Forbidden";
  case 404: return "Not Found";
  case 405: return "Method Not Allowed";
  case 406: return "Not Acceptable";
  case 408: return "Request Timeout";
  case 409: return "Conflict";
  case 410: return "Gone";
  case 411: return "Length Required";
  case 412: return "Precondition Failed";
  case 413: return "Content Too Large";
  case 414: return "URI Too Long";
  case 415: return "Unsupported Media Type";
  case 416: return "Range Not Satisfiable";
  case 417: return "Expectation Failed";
  case 422: return "Unprocessable Content";
  case 429: return "Too Many Requests";
  case 431: return "Request Header Fields Too Large";
  case 500: return "Internal Server Error";
  case 501: return "Not Implemented";
  case 502: return "Bad Gateway";
  case 503: return "Service Unavailable";
  case 504: return "Gateway Timeout";
  case 505: return "HTTP Version Not Supported";
  default: return "Unknown";
  }
}
