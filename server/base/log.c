/* The server's log (log.h). */
#include "server/base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

void pp_log(const pp_config *cfg, int always, const char *fmt, ...) {
  if (cfg && cfg->quiet && !always) return;
  char ts[32];
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
  fprintf(stderr, "[puma-plus %s] ", ts);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}
