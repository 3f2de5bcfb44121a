/* Prometheus text exposition 0.0.4 (prom.h). */
#include "server/base/prom.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

void pp_prom_appendf(pp_buf *b, const char *fmt, ...) {
  char tmp[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n > 0) pp_buf_append(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

void pp_prom_counter(pp_buf *b, const char *name, const char *help, uint64_t v) {
  pp_prom_appendf(b, "# HELP %s %s\n# TYPE %s counter\n%s %" PRIu64 "\n", name, help, name, name,
                  v);
}
void pp_prom_gauge(pp_buf *b, const char *name, const char *help, double v) {
  pp_prom_appendf(b, "# HELP %s %s\n# TYPE %s gauge\n%s %.17g\n", name, help, name, name, v);
}
