/* Response header fields for HTTP/2 and HTTP/3, from the pairs a Rack app sent: the rules both
 * sessions apply (RFC 9113 section 8.2, RFC 9114 section 4.2) in one place. Pure: bytes in a
 * caller's pp_buf, no I/O, no library types (each session builds its own nv array). */
#ifndef PP_FIELDS_H
#define PP_FIELDS_H

#include <stddef.h>
#include <stdint.h>

#include "server/base/buf.h"
#include "server/proto/h2.h" /* pp_h2_header */

/* Appends a field value to *bytes without surrounding whitespace and without CR or NUL
 * anywhere; returns its offset in *bytes (its length is bytes->len minus that). */
size_t pp_fields_value(pp_buf *bytes, const uint8_t *v, size_t vlen);

/* Walks the app's pairs: each name is lowercased into *bytes and dropped (taken back out) if it
 * is empty, not a token, or connection-specific (connection, keep-alive, transfer-encoding,
 * upgrade, te, proxy-connection, http2-settings); a value holding several joined by "\n" (Rack)
 * gives one field each (a trailing "\n" adds none). For every field, add(data, name_off,
 * name_len, value, value_len) is called with the name at bytes->data + name_off. */
void pp_fields_from_pairs(pp_buf *bytes, const pp_h2_header *pairs, size_t n,
                          void (*add)(void *data, size_t name_off, size_t name_len,
                                      const uint8_t *v, size_t vlen),
                          void *data);

#endif
