/* Response fields for HTTP/2 and HTTP/3 (see fields.h). */
#include "server/proto/fields.h"

#include <string.h>

static int is_tchar(uint8_t c) {
  if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-') return 1;
  return c && strchr("!#$%&'*+.^_`|~", c) != NULL;
}

static int dropped_name(const uint8_t *n, size_t len) {
  static const char *const names[] = {"connection",    "keep-alive", "transfer-encoding",
                                      "upgrade",       "te",         "proxy-connection",
                                      "http2-settings"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strlen(names[i]) == len && memcmp(names[i], n, len) == 0) return 1;
  return 0;
}

size_t pp_fields_value(pp_buf *bytes, const uint8_t *v, size_t vlen) {
  /* RFC 9113 section 8.2.1: no leading or trailing whitespace; CR is dropped anywhere. */
  while (vlen && (v[0] == ' ' || v[0] == '\t'))
    v++, vlen--;
  while (vlen && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t' || v[vlen - 1] == '\r'))
    vlen--;
  size_t off = bytes->len;
  pp_buf_reserve(bytes, vlen);
  for (size_t i = 0; i < vlen; i++)
    if (v[i] != '\r' && v[i] != '\0') bytes->data[bytes->len++] = v[i];
  return off;
}

void pp_fields_from_pairs(pp_buf *bytes, const pp_h2_header *pairs, size_t n,
                          void (*add)(void *data, size_t name_off, size_t name_len,
                                      const uint8_t *v, size_t vlen),
                          void *data) {
  for (size_t i = 0; i < n; i++) {
    const pp_h2_header *p = &pairs[i];
    size_t name_off = bytes->len;
    int ok = p->name_len > 0;
    pp_buf_reserve(bytes, p->name_len);
    uint8_t *name = bytes->data + name_off;
    for (size_t k = 0; k < p->name_len && ok; k++) {
      uint8_t c = p->name[k];
      if (c >= 'A' && c <= 'Z') c = (uint8_t)(c - 'A' + 'a');
      if (!is_tchar(c)) ok = 0;
      name[k] = c;
    }
    bytes->len += p->name_len;
    if (!ok || dropped_name(bytes->data + name_off, p->name_len)) {
      bytes->len = name_off;
      continue;
    }
    const uint8_t *v = p->value;
    size_t left = p->value_len;
    do {
      const uint8_t *nl = left ? memchr(v, '\n', left) : NULL;
      size_t part = nl ? (size_t)(nl - v) : left;
      add(data, name_off, p->name_len, v, part);
      if (!nl) break;
      v += part + 1;
      left -= part + 1;
    } while (left > 0);
  }
}
