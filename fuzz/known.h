/* Filters for findings that are reported but not fixed yet (docs/FUZZING.md, "Findings").
 *
 * With PP_FUZZ_SKIP_KNOWN=1 in the environment a target returns early on inputs of the shape
 * of a known, pending finding, so a fuzzing session can look past it for new ones. Off by
 * default: the replay tests and fuzz/run.sh see every input. Remove a filter when its finding
 * is fixed and its reproducer has moved from fuzz/pending/ to fuzz/regressions/. */
#ifndef PP_FUZZ_KNOWN_H
#define PP_FUZZ_KNOWN_H

#include <stdlib.h>
#include <string.h>

static inline int pp_fuzz_skip_known(void) {
  static int cached = -1;
  if (cached < 0) {
    const char *v = getenv("PP_FUZZ_SKIP_KNOWN");
    cached = v && v[0] && strcmp(v, "0") != 0;
  }
  return cached;
}

#endif
