/* Allocation that cannot fail (alloc.c): the program aborts on out-of-memory (STYLE.md). */
#ifndef PP_ALLOC_H
#define PP_ALLOC_H

#include <stddef.h>

/* malloc that aborts on out-of-memory. */
void *pp_xmalloc(size_t n);

#endif
