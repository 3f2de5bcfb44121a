/* nghttp2's memory for one HTTP/2 session, from per-session free lists by size class, so a
 * connection that has served a few requests serves the next without calling malloc: nghttp2
 * allocates per stream (its stream record, header and frame buffers) and frees at stream
 * close, with sizes from a small set. Blocks up to 32 KiB are kept in ten power-of-two classes
 * for the session's life (bounded by its peak use) and freed at pp_h2_dispose; larger ones go
 * straight to malloc. Each block carries a 16-byte header (class and a magic word), so free and
 * realloc know its capacity and every pointer keeps malloc's alignment. nghttp2 1.52 hands a
 * few blocks it got from the C library's malloc to the session's free (seen on stream-error
 * paths): without our magic word such a pointer goes back to the C library. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/proto/h2_int.h"

#define MIN_SHIFT 6 /* 64 bytes */
#define HDR       16
#define BIG       0xff
#define MAGIC     0x7070683268326d65ull /* "pph2h2me" */

typedef struct header {
  union {
    struct header *next; /* while on a free list */
    uint8_t cls;         /* while allocated: the class, or BIG */
  } u;
  uint64_t magic;
} header;

static int class_of(size_t size) {
  for (int c = 0; c < PP_H2_MEM_CLASSES; c++)
    if (size <= ((size_t)1 << (MIN_SHIFT + c))) return c;
  return -1;
}

static header *raw_alloc(size_t size) {
  header *hd = malloc(HDR + size);
  if (!hd) {
    fprintf(stderr, "puma-plus: out of memory (h2, %zu bytes)\n", size);
    abort();
  }
  hd->magic = MAGIC;
  return hd;
}

static header *head_of(void *ptr) {
  header *hd = (header *)((uint8_t *)ptr - HDR);
  return hd->magic == MAGIC ? hd : NULL;
}

static void *mem_malloc(size_t size, void *ud) {
  pp_h2 *h = ud;
  int c = class_of(size);
  header *hd;
  if (c < 0) {
    hd = raw_alloc(size);
    hd->u.cls = BIG;
  } else {
    hd = h->mem_free[c];
    if (hd)
      h->mem_free[c] = hd->u.next;
    else
      hd = raw_alloc((size_t)1 << (MIN_SHIFT + c));
    hd->u.cls = (uint8_t)c;
  }
  return (uint8_t *)hd + HDR;
}

static void mem_free(void *ptr, void *ud) {
  pp_h2 *h = ud;
  if (!ptr) return;
  header *hd = head_of(ptr);
  if (!hd) { /* not ours: nghttp2 got it from the C library */
    free(ptr);
    return;
  }
  if (hd->u.cls == BIG) {
    hd->magic = 0;
    free(hd);
    return;
  }
  uint8_t c = hd->u.cls;
  hd->u.next = h->mem_free[c];
  h->mem_free[c] = hd;
}

static void *mem_calloc(size_t n, size_t size, void *ud) {
  if (size && n > SIZE_MAX / size) return NULL;
  void *p = mem_malloc(n * size, ud);
  memset(p, 0, n * size);
  return p;
}

static void *mem_realloc(void *ptr, size_t size, void *ud) {
  if (!ptr) return mem_malloc(size, ud);
  header *hd = head_of(ptr);
  if (!hd) return realloc(ptr, size); /* the C library's block */
  size_t cap = hd->u.cls == BIG ? 0 : (size_t)1 << (MIN_SHIFT + hd->u.cls);
  if (hd->u.cls != BIG && size <= cap) return ptr;
  if (hd->u.cls == BIG) {
    header *grown = realloc(hd, HDR + size);
    if (!grown) {
      fprintf(stderr, "puma-plus: out of memory (h2, %zu bytes)\n", size);
      abort();
    }
    return (uint8_t *)grown + HDR;
  }
  void *p = mem_malloc(size, ud);
  memcpy(p, ptr, cap);
  mem_free(ptr, ud);
  return p;
}

nghttp2_mem pp_h2__mem(pp_h2 *h) {
  nghttp2_mem m = {h, mem_malloc, mem_free, mem_calloc, mem_realloc};
  return m;
}

void pp_h2__mem_dispose(pp_h2 *h) {
  for (int c = 0; c < PP_H2_MEM_CLASSES; c++) {
    while (h->mem_free[c]) {
      header *hd = h->mem_free[c];
      h->mem_free[c] = hd->u.next;
      hd->magic = 0;
      free(hd);
    }
  }
}
