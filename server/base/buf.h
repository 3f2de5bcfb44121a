/* A growable byte buffer owned by its user. It grows geometrically and never shrinks, so a
 * pooled object that keeps its buffer stops allocating once it has seen its largest input
 * (the server's steady state does no per-request malloc). Aborts on out-of-memory, as the
 * server does everywhere (STYLE.md: programs abort on OOM). */
#ifndef PP_BUF_H
#define PP_BUF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct pp_buf {
  uint8_t *data;
  size_t len;
  size_t cap;
} pp_buf;

static inline void pp_buf_init(pp_buf *b) {
  b->data = NULL;
  b->len = b->cap = 0;
}
static inline void pp_buf_dispose(pp_buf *b) {
  free(b->data);
  pp_buf_init(b);
}
/* Makes room for `extra` more bytes after len. */
static inline void pp_buf_reserve(pp_buf *b, size_t extra) {
  if (b->cap - b->len >= extra) return;
  size_t cap = b->cap ? b->cap : 256;
  while (cap - b->len < extra)
    cap *= 2;
  uint8_t *p = realloc(b->data, cap);
  if (!p) {
    fprintf(stderr, "puma-plus: out of memory (%zu bytes)\n", cap);
    abort();
  }
  b->data = p;
  b->cap = cap;
}
static inline void pp_buf_append(pp_buf *b, const void *data, size_t len) {
  pp_buf_reserve(b, len);
  if (len) memcpy(b->data + b->len, data, len);
  b->len += len;
}
static inline void pp_buf_append_str(pp_buf *b, const char *s) {
  pp_buf_append(b, s, strlen(s));
}
static inline void pp_buf_append_u32(pp_buf *b, uint32_t v) {
  uint8_t p[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
  pp_buf_append(b, p, 4);
}
/* Removes the first n bytes. */
static inline void pp_buf_consume(pp_buf *b, size_t n) {
  if (n >= b->len) {
    b->len = 0;
    return;
  }
  memmove(b->data, b->data + n, b->len - n);
  b->len -= n;
}

/* Writes v in decimal to out (at least 20 bytes; no terminating NUL) and returns the number of
 * digits: snprintf's "%llu" costs ~500 instructions, this ~60, and it runs several times per
 * request. */
static inline size_t pp_fmt_u64(char *out, uint64_t v) {
  char tmp[20];
  size_t n = 0;
  do {
    tmp[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  for (size_t i = 0; i < n; i++)
    out[i] = tmp[n - 1 - i];
  return n;
}

#endif
