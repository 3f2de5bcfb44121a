/* CHECK(cond): a fuzz target's property. A failed property names the file, line and condition
 * on stderr and aborts, so libFuzzer (and the replay driver) report the input as a finding. */
#ifndef PP_FUZZ_CHECK_H
#define PP_FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "property failed at %s:%d: %s\n", __FILE__, __LINE__, #cond);                \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

#endif
