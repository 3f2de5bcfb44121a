/* The wall clock as the responses need it: the Date value (RFC 9110 section 6.6.1,
 * IMF-fixdate, "Sun, 06 Nov 1994 08:49:37 GMT") formatted once a second, and the offset from
 * the monotonic clock (clock.h) to the realtime clock, taken at the same moment, which turns
 * a request's T2b into the microseconds since the epoch of X-Request-Start (docs/RACK.md).
 * The runtime (process/server.c) reads both clocks and calls pp_wallclock_set at each second
 * boundary; everything else only reads the fields, so no request formats a date or reads
 * the realtime clock. */
#ifndef PP_WALLCLOCK_H
#define PP_WALLCLOCK_H

#include <stddef.h>
#include <stdint.h>

#define PP_HTTP_DATE_LEN 29 /* strlen("Sun, 06 Nov 1994 08:49:37 GMT") */

typedef struct pp_wallclock {
  char date[PP_HTTP_DATE_LEN + 1]; /* IMF-fixdate of the current second, NUL-terminated */
  int64_t second;                  /* the realtime second it shows */
  int64_t real_minus_mono_ns;      /* realtime - monotonic, at the last set */
} pp_wallclock;

/* Writes the IMF-fixdate of `epoch_second` (seconds since 1970-01-01 UTC) into out (at least
 * PP_HTTP_DATE_LEN + 1 bytes, NUL-terminated). Pure. */
void pp_http_date(int64_t epoch_second, char *out);

/* Updates *w from one reading of both clocks: the date is reformatted only when the second
 * changed. */
void pp_wallclock_set(pp_wallclock *w, int64_t realtime_ns, int64_t monotonic_ns);

/* A monotonic instant (pp_now_ns) as microseconds since the epoch, by the last offset. */
static inline int64_t pp_wallclock_epoch_us(const pp_wallclock *w, int64_t monotonic_ns) {
  return (monotonic_ns + w->real_minus_mono_ns) / 1000;
}

#endif
