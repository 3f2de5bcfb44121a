/* The byte-level syntax of HTTP/1.1 requests that the h1 session checks itself rather than
 * trust llhttp 8.1 with (docs/SERVER.md, "HTTP/1.1 refusals"): the request-line and header
 * scanner, the chunked-body scanner that runs ahead of llhttp, the token / field-value / Host
 * checks shared with the response side, and the reason phrases. Pure functions over bytes
 * and the parser's scan state; no I/O. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "server/proto/http1_int.h"

int pp_h1__is_tchar(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* A field-value byte (RFC 9110 §5.5): VCHAR, obs-text, SP or HTAB; never CR, LF, NUL, DEL or
 * another control character. */
static int is_field_byte(unsigned char c) {
  return c == '\t' || (c >= 0x20 && c != 0x7f);
}

int pp_h1_token_ok(const uint8_t *s, size_t n) {
  if (n == 0) return 0;
  for (size_t i = 0; i < n; i++)
    if (!pp_h1__is_tchar(s[i])) return 0;
  return 1;
}

int pp_h1_field_value_ok(const uint8_t *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!is_field_byte(s[i])) return 0;
  return 1;
}

int pp_h1_app_status_ok(int status) {
  return status >= 200 && status <= 999;
}

static int is_unreserved_or_sub_delim(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         (c && strchr("-._~!$&'()*+,;=", c));
}

static int is_hex(unsigned char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

int pp_h1_host_ok(const uint8_t *s, size_t n) {
  size_t i = 0;
  if (n && s[0] == '[') { /* IP-literal: IPv6address or IPvFuture */
    for (i = 1; i < n && s[i] != ']'; i++)
      if (!is_unreserved_or_sub_delim(s[i]) && s[i] != ':') return 0;
    if (i == n || i == 1) return 0;
    i++;
  } else { /* IPv4address or reg-name: unreserved, pct-encoded, sub-delims */
    for (; i < n && s[i] != ':'; i++) {
      if (s[i] == '%') {
        if (i + 2 >= n || !is_hex(s[i + 1]) || !is_hex(s[i + 2])) return 0;
        i += 2;
      } else if (!is_unreserved_or_sub_delim(s[i])) {
        return 0;
      }
    }
    if (i == 0) return 0;
  }
  if (i == n) return 1;
  if (s[i] != ':' || i + 1 == n || n - i - 1 > 5) return 0;
  uint32_t port = 0;
  for (i++; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return 0;
    port = port * 10 + (uint32_t)(s[i] - '0');
  }
  return port <= 65535;
}

/* Scans the request line and header section ahead of llhttp, which accepts shapes that we
 * refuse: obs-fold (a line that starts with SP or HTAB), a bare CR (a CR not followed by LF;
 * llhttp 8 takes CR + any byte as a line end and swallows the byte, so its idea of where the
 * header section ends would depend on the bytes after the CR), and a request line other than
 * method SP request-target SP HTTP-version (RFC 9112 §3: llhttp 8.1 takes several spaces, and
 * obs-text in the target). Refusing here, before llhttp sees the offending byte, keeps the
 * outcome independent of how the bytes were split into reads. A CR at the end of one read is
 * judged by the first byte of the next. The scan stops at the empty line ending the section
 * (*end: the bytes up to and including it, or len); pp_h1_resume() restarts it for the next
 * request. Returns 0, or the status to refuse with (h->reason says why). */
enum { RL_METHOD = 0, RL_TARGET_FIRST, RL_TARGET, RL_VERSION, RL_DONE };

static int request_line_end(pp_h1 *h) {
  int st = h->rl_state;
  h->rl_state = RL_DONE;
  if (st == RL_TARGET) {
    h->reason = "HTTP/0.9 request line (no HTTP-version)";
    return 505;
  }
  if (st != RL_VERSION) {
    h->reason = "malformed request line";
    return 400;
  }
  const char *v = h->rl_version;
  if (h->rl_ver_len == 8 && (!memcmp(v, "HTTP/1.1", 8) || !memcmp(v, "HTTP/1.0", 8))) return 0;
  if (h->rl_ver_len == 8 && !memcmp(v, "HTTP/", 5) && v[5] >= '0' && v[5] <= '9' && v[6] == '.' &&
      v[7] >= '0' && v[7] <= '9') {
    h->reason = "HTTP version not supported";
    return 505;
  }
  h->reason = "invalid HTTP-version";
  return 400;
}

/* One byte of the request line (not CR or LF). */
static int request_line_byte(pp_h1 *h, uint8_t c) {
  switch (h->rl_state) {
  case RL_METHOD:
    if (c == ' ' && h->scan_line_len > 0) {
      h->rl_state = RL_TARGET_FIRST;
      return 0;
    }
    if (pp_h1__is_tchar(c)) return 0;
    break;
  case RL_TARGET_FIRST:
  case RL_TARGET:
    if (c == ' ' && h->rl_state == RL_TARGET) {
      h->rl_state = RL_VERSION;
      h->rl_ver_len = 0;
      return 0;
    }
    if (c > 0x20 && c < 0x7f) { /* RFC 3986 characters are visible ASCII */
      h->rl_state = RL_TARGET;
      return 0;
    }
    break;
  case RL_VERSION:
    if (h->rl_ver_len < sizeof h->rl_version - 1) h->rl_version[h->rl_ver_len++] = (char)c;
    /* "HTTP/d.d" other than 1.0 and 1.1 is judged at its last digit, before llhttp 8.1
     * (which refuses some with 400 at that byte) sees it, so the status is split-free. */
    if (h->rl_ver_len == 8) {
      const char *v = h->rl_version;
      if (!memcmp(v, "HTTP/", 5) && v[5] >= '0' && v[5] <= '9' && v[6] == '.' && v[7] >= '0' &&
          v[7] <= '9' && memcmp(v, "HTTP/1.1", 8) && memcmp(v, "HTTP/1.0", 8)) {
        h->reason = "HTTP version not supported";
        return 505;
      }
    }
    return 0;
  default: return 0;
  }
  h->reason = "malformed request line";
  return 400;
}

int pp_h1__scan_head(pp_h1 *h, const uint8_t *data, size_t len, size_t *end) {
  size_t i = 0;
  int st;
  for (; i < len && h->scan_state != 3; i++) {
    uint8_t c = data[i];
    if (h->scan_cr) {
      h->scan_cr = 0;
      if (c != '\n') {
        h->reason = "bare CR in the request head";
        return 400;
      }
    }
    if (h->scan_state == 2) { /* at the start of a line */
      if ((c == ' ' || c == '\t') && h->scan_lines > 0) {
        h->reason = "obs-fold (folded header line) is not accepted";
        return 400;
      }
      h->scan_state = 0;
    }
    if (c == '\n') {
      /* the end of the request line (empty lines before it are skipped, RFC 9112 §2.2) */
      if (h->scan_lines == 0 && h->scan_line_len > 0 && h->rl_state != RL_DONE &&
          (st = request_line_end(h)))
        return st;
    }
    if (c == '\n') {
      if (h->scan_line_len == 0 && h->scan_lines > 0) {
        h->scan_state = 3; /* end of the header section */
        i++;
        break;
      }
      if (h->scan_line_len > 0) h->scan_lines++;
      h->scan_line_len = 0;
      h->scan_state = 2;
    } else if (c == '\r') {
      h->scan_cr = 1;
    } else if (h->scan_lines == 0) {
      if ((st = request_line_byte(h, c))) return st;
      h->scan_line_len++;
    } else {
      /* inside a field line only CR and LF matter here (llhttp checks the rest): skip to
       * the next one in a tight loop */
      size_t j = i + 1;
      while (j < len && data[j] != '\r' && data[j] != '\n')
        j++;
      h->scan_line_len += j - i;
      i = j - 1;
    }
  }
  *end = i;
  return 0;
}

static int hex_value(uint8_t c) {
  return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
}

/* Scans a chunked body ahead of llhttp (RFC 9112 §7.1), which in 8.1 skips any two bytes
 * after chunk data without looking at them, takes an empty chunk-ext name, and lets trailer
 * lines through unchecked (obs-fold, names that are not tokens). Every line delimiter here
 * is exactly CRLF. chunk = 1*HEXDIG *( ";" token [ "=" ( token / quoted-string ) ] ) CRLF
 * data CRLF; the last chunk is followed by trailer field lines (token ":" field-value) and
 * CRLF. A chunk-size that would take the body past the limit is refused (413) before its
 * data arrives, and chunk extensions are bounded in total per message (413). The scan stops
 * at the end of the message (*end: bytes up to it, or len). Returns 0 or the status. */
int pp_h1__scan_chunked(pp_h1 *h, const uint8_t *data, size_t len, size_t *end) {
  size_t i = 0;
  for (; i < len && h->ck_state != CK_DONE; i++) {
    uint8_t c = data[i];
    int st = h->ck_state;
    if (st >= CK_EXT_NAME_FIRST && st <= CK_EXT_AFTER_QUOTE &&
        ++h->ck_ext_bytes > h->limits->max_header_bytes) {
      h->reason = "chunk extensions over the limit";
      return 413;
    }
    switch (st) {
    case CK_SIZE_FIRST:
    case CK_SIZE:
      if (is_hex(c)) {
        if (h->ck_size > (UINT64_MAX >> 4) ||
            (h->ck_size << 4) + (uint64_t)hex_value(c) > h->limits->max_body_bytes - h->ck_body) {
          h->reason = "chunk size over the body limit";
          return 413;
        }
        h->ck_size = (h->ck_size << 4) + (uint64_t)hex_value(c);
        h->ck_state = CK_SIZE;
        continue;
      }
      if (st == CK_SIZE && c == ';') {
        h->ck_state = CK_EXT_NAME_FIRST;
        continue;
      }
      if (st == CK_SIZE && c == '\r') {
        h->ck_state = CK_SIZE_LF;
        continue;
      }
      h->reason = "invalid chunk size";
      return 400;
    case CK_EXT_NAME_FIRST:
    case CK_EXT_NAME:
      if (pp_h1__is_tchar(c)) {
        h->ck_state = CK_EXT_NAME;
        continue;
      }
      if (st == CK_EXT_NAME && (c == ';' || c == '=' || c == '\r')) {
        h->ck_state = c == ';' ? CK_EXT_NAME_FIRST : c == '=' ? CK_EXT_VALUE_FIRST : CK_SIZE_LF;
        continue;
      }
      break;
    case CK_EXT_VALUE_FIRST:
    case CK_EXT_VALUE:
      if (pp_h1__is_tchar(c)) {
        h->ck_state = CK_EXT_VALUE;
        continue;
      }
      if (st == CK_EXT_VALUE_FIRST && c == '"') {
        h->ck_state = CK_EXT_QUOTED;
        continue;
      }
      if (st == CK_EXT_VALUE && (c == ';' || c == '\r')) {
        h->ck_state = c == ';' ? CK_EXT_NAME_FIRST : CK_SIZE_LF;
        continue;
      }
      break;
    case CK_EXT_QUOTED: /* qdtext / quoted-pair (RFC 9110 §5.6.4) */
      if (c == '"')
        h->ck_state = CK_EXT_AFTER_QUOTE;
      else if (c == '\\')
        h->ck_state = CK_EXT_QUOTED_ESC;
      else if (!is_field_byte(c))
        break;
      continue;
    case CK_EXT_QUOTED_ESC:
      if (!is_field_byte(c)) break;
      h->ck_state = CK_EXT_QUOTED;
      continue;
    case CK_EXT_AFTER_QUOTE:
      if (c == ';' || c == '\r') {
        h->ck_state = c == ';' ? CK_EXT_NAME_FIRST : CK_SIZE_LF;
        continue;
      }
      break;
    case CK_SIZE_LF:
      if (c != '\n') {
        h->reason = "chunk-size line not ended by CRLF";
        return 400;
      }
      h->ck_body += h->ck_size;
      h->ck_state = h->ck_size ? CK_DATA : CK_TRAILER_START;
      continue;
    case CK_DATA: {
      size_t take = len - i;
      if (take > h->ck_size) take = (size_t)h->ck_size;
      h->ck_size -= take;
      i += take - 1; /* the loop's i++ moves past the last data byte */
      if (h->ck_size == 0) h->ck_state = CK_DATA_CR;
      continue;
    }
    case CK_DATA_CR:
    case CK_DATA_LF:
      if (c != (st == CK_DATA_CR ? '\r' : '\n')) {
        h->reason = "chunk data not followed by CRLF";
        return 400;
      }
      h->ck_state = st == CK_DATA_CR ? CK_DATA_LF : CK_SIZE_FIRST;
      continue;
    case CK_TRAILER_START:
      if (c == '\r') {
        h->ck_state = CK_END_LF;
        continue;
      }
      if (pp_h1__is_tchar(c)) {
        h->ck_state = CK_TRAILER_NAME;
        continue;
      }
      h->reason =
          c == ' ' || c == '\t' ? "obs-fold in the trailer section" : "invalid trailer field";
      return 400;
    case CK_TRAILER_NAME:
      if (pp_h1__is_tchar(c)) continue;
      if (c == ':') {
        h->ck_state = CK_TRAILER_VALUE;
        continue;
      }
      h->reason = "invalid trailer field name";
      return 400;
    case CK_TRAILER_VALUE:
      if (c == '\r') {
        h->ck_state = CK_TRAILER_LF;
        continue;
      }
      if (is_field_byte(c)) continue;
      h->reason = "invalid trailer field value";
      return 400;
    case CK_TRAILER_LF:
    case CK_END_LF:
      if (c != '\n') {
        h->reason = "trailer line not ended by CRLF";
        return 400;
      }
      h->ck_state = st == CK_TRAILER_LF ? CK_TRAILER_START : CK_DONE;
      continue;
    default: continue;
    }
    h->reason = "invalid chunk extension";
    return 400;
  }
  *end = i;
  return 0;
}

int pp_h1_list_next(const uint8_t *v, size_t n, size_t *pos, const uint8_t **elem,
                    size_t *elem_len) {
  size_t i = *pos;
  for (;;) {
    while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
      i++;
    if (i >= n) {
      *pos = i;
      return 0;
    }
    size_t start = i;
    while (i < n && v[i] != ',')
      i++;
    size_t end = i;
    while (end > start && (v[end - 1] == ' ' || v[end - 1] == '\t'))
      end--;
    if (end > start) {
      *pos = i;
      *elem = v + start;
      *elem_len = end - start;
      return 1;
    }
  }
}
