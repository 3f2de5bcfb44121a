/* Lines of the Prometheus text format 0.0.4 (/metrics, docs/SERVER.md), for every module that
 * writes its own part of /metrics (prom.c). */
#ifndef PP_PROM_H
#define PP_PROM_H

#include <stdint.h>

#include "server/base/buf.h"

/* printf into b (one line is at most 1023 bytes). */
void pp_prom_appendf(pp_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* # HELP, # TYPE counter and the sample of name. */
void pp_prom_counter(pp_buf *b, const char *name, const char *help, uint64_t v);
/* # HELP, # TYPE gauge and the sample of name. */
void pp_prom_gauge(pp_buf *b, const char *name, const char *help, double v);

#endif
