/* The access log (-access-log, puma's log_requests; docs/SERVER.md "Access log"): one line
 * per response, in the NCSA common or combined format or as JSON lines, to a file or stdout.
 *
 * Off the hot path: the request's end (hooks.request_done) formats its line into an
 * in-memory buffer on the loop thread and never writes. A writer thread of this module takes
 * the buffer when it reaches PP_ACCESS_LOG_BATCH bytes or when the flush timer fires
 * (PP_ACCESS_LOG_FLUSH_MS), and writes it with write(2) while the loop goes on filling the
 * next one. When the disk is slower than the requests, the next buffer grows to
 * PP_ACCESS_LOG_MAX bytes; past that, lines are dropped and counted (`dropped`, in /stats
 * and /metrics) instead of stalling the loop or growing without bound. SIGHUP reopens the
 * path (logrotate's rename, then SIGHUP): the loop opens the new file, and the writer moves
 * to it after the write in progress. At exit the writer writes what is buffered, then stops. */
#ifndef PP_ACCESS_LOG_H
#define PP_ACCESS_LOG_H

#include <stdint.h>
#include <uv.h>

#include "server/base/access.h"
#include "server/base/buf.h"
#include "server/base/config.h"

#define PP_ACCESS_LOG_BATCH    (64u << 10) /* hand the buffer to the writer at this size */
#define PP_ACCESS_LOG_MAX      (8u << 20)  /* the buffer's bound while the writer is busy */
#define PP_ACCESS_LOG_FLUSH_MS 200         /* and at least this often when it holds lines */

typedef struct pp_access_log pp_access_log;

/* Counters for /stats and /metrics. */
typedef struct pp_access_log_stats {
  uint64_t lines;        /* lines formatted into the buffer */
  uint64_t dropped;      /* lines dropped: the buffer was full (the disk too slow) */
  uint64_t bytes;        /* bytes written to the file */
  uint64_t write_errors; /* write(2) failures (the batch is lost) */
  uint64_t reopens;      /* SIGHUP reopens */
} pp_access_log_stats;

/* Opens cfg->access_log ("-": stdout) in cfg->access_log_format, starts the writer and the
 * flush timer on loop. NULL (logged) when it cannot be opened. */
pp_access_log *pp_access_log_open(uv_loop_t *loop, const pp_config *cfg);
/* The hook (hooks.request_done, ctx: the log): formats r's line into the buffer. */
void pp_access_log_record(void *ctx, const pp_access_rec *r);
/* SIGHUP: opens the path again (a file renamed away by logrotate is left to it). */
void pp_access_log_reopen(pp_access_log *al);
/* At exit: writes what is buffered and stops the writer (blocks until it is written). */
void pp_access_log_close(pp_access_log *al);
/* The counters; all zero for NULL (no access log). */
void pp_access_log_stats_get(const pp_access_log *al, pp_access_log_stats *out);
/* /stats "access_log" (null without one) and the /metrics lines (stats.c's tables). */
struct json_t;
void pp_access_log_stats_json(const pp_access_log *al, struct json_t *root);
void pp_access_log_metrics(const pp_access_log *al, pp_buf *out);

/* Formats one record as a line (with its newline) in `format` (PP_ACCESS_LOG_*) and appends
 * it to out. wall_ns is the wall clock (CLOCK_REALTIME) that corresponds to mono_ns on the
 * monotonic clock of the record's stamps. Pure: for the unit test. */
void pp_access_log_format(int format, const pp_access_rec *r, int64_t wall_ns, int64_t mono_ns,
                          pp_buf *out);

#endif
