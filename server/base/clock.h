/* The one clock of the server: CLOCK_MONOTONIC nanoseconds (libuv's uv_hrtime), shared by every
 * process on the host, so a worker's T4/T5 compare with the server's stamps (DESIGN.md section 3).
 */
#ifndef PP_CLOCK_H
#define PP_CLOCK_H

#include <stdint.h>
#include <uv.h>

static inline int64_t pp_now_ns(void) {
  return (int64_t)uv_hrtime();
}

#endif
