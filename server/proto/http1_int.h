/* Internals shared by the two files of the HTTP/1.1 session: http1.c (the llhttp glue and
 * the request's fields) and http1_syntax.c (the scanners and syntax checks). Not a public
 * API. */
#ifndef PP_HTTP1_INT_H
#define PP_HTTP1_INT_H

#include "server/proto/http1.h"

/* The chunked-body scanner's states (pp_h1.ck_state). */
enum {
  CK_OFF = 0,
  CK_SIZE_FIRST, /* 1: set by on_headers_complete */
  CK_SIZE,
  CK_EXT_NAME_FIRST,
  CK_EXT_NAME,
  CK_EXT_VALUE_FIRST,
  CK_EXT_VALUE,
  CK_EXT_QUOTED,
  CK_EXT_QUOTED_ESC,
  CK_EXT_AFTER_QUOTE,
  CK_SIZE_LF,
  CK_DATA,
  CK_DATA_CR,
  CK_DATA_LF,
  CK_TRAILER_START,
  CK_TRAILER_NAME,
  CK_TRAILER_VALUE,
  CK_TRAILER_LF,
  CK_END_LF,
  CK_DONE,
};

/* RFC 9110 tchar. */
int pp_h1__is_tchar(unsigned char c);
/* The head scanner: request line and header section of the bytes about to be fed to llhttp.
 * *end: the bytes up to and including the empty line ending the section, or len. Returns 0,
 * or the status to refuse with (h->reason says why). */
int pp_h1__scan_head(pp_h1 *h, const uint8_t *data, size_t len, size_t *end);
/* The chunked-body scanner, ahead of llhttp: sizes, extensions, delimiters, trailers.
 * *end as for the head scanner (the end of the trailer section). Returns 0 or a status. */
int pp_h1__scan_chunked(pp_h1 *h, const uint8_t *data, size_t len, size_t *end);

#endif
