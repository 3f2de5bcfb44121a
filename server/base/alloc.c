/* Allocation that cannot fail (alloc.h). */
#include "server/base/alloc.h"

#include <stdio.h>
#include <stdlib.h>

void *pp_xmalloc(size_t n) {
  void *p = malloc(n);
  if (!p) {
    fprintf(stderr, "puma-plus: out of memory\n");
    abort();
  }
  return p;
}
