/* The server's log: one line on stderr, "[puma-plus <UTC time>] message" (log.c). */
#ifndef PP_LOG_H
#define PP_LOG_H

#include "server/base/config.h"

/* Writes one line unless cfg says -quiet and always is 0 (cfg may be NULL: never quiet). */
void pp_log(const pp_config *cfg, int always, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* s: anything with the run's pp_config in s->cfg (the server, in every layer's code). */
#define LOG(s, ...)     pp_log((s)->cfg, 0, __VA_ARGS__)
#define LOG_ERR(s, ...) pp_log((s)->cfg, 1, __VA_ARGS__)

#endif
