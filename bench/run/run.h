/* One measured configuration, start to finish: start the server, wait until it answers, warm
 * it up, run the schedule with the sampler polling it every second, stop it, and turn the
 * per-request results into a summary and a per-second timeline joined with the samples.
 * Used by `pp-bench smoke` (one config) and `pp-bench run` (each config of a scenario). */
#ifndef PP_BENCH_RUN_H
#define PP_BENCH_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <signal.h>
#include <stdint.h>

#include "bench/gen/gen.h"
#include "bench/harness/harness.h"
#include "bench/run/stats.h"

typedef struct pb_run_options {
  uint64_t timeout_ns;      /* client timeout (scenario) */
  uint32_t max_connections; /* generator cap */
  uint64_t warmup_ns;       /* warm-up length (0 = none) */
  double warmup_rate;       /* warm-up rps */
  const char *warmup_path;  /* warm-up request path (and readiness probe) */
  uint64_t ready_timeout_ns;
  double max_error_ratio;
  const char *stats_path;       /* "/stats" */
  const char *label;            /* progress line label */
  const char *log_dir;          /* server logs go to <log_dir>/<config>.log ("" = /dev/null) */
  const uint64_t *phase_end_ns; /* optional: cumulative phase ends, for the progress line */
  /* Optional: the running server's process group id is stored here while it runs (0 when
   * none), so the program's signal handler can stop it if pp-bench is interrupted. */
  volatile sig_atomic_t *running_pgid;
  uint32_t n_phases;
  bool quiet;
  pb_proto proto;          /* h1 (default) or h2, for the run and its warm-up */
  int tls;                 /* nonzero: TLS to the target (no certificate verification) */
  uint32_t h2_connections; /* h2: connections to multiplex on (0: the generator's 4) */
} pb_run_options;

/* A timeline row: what the client saw that second, plus the harness's sample of the server. */
typedef struct pb_row {
  pb_second client;
  uint32_t procs; /* 0 when no sample fell in this second */
  uint64_t rss_bytes;
  double queue_p95_ms;           /* < 0: n/a */
  double workers;                /* from /stats, < 0 when not reported */
  double queue_depth;            /* from /stats, < 0 when not reported */
  uint64_t pss_bytes, uss_bytes; /* the tree's PSS / USS (smaps_rollup), 0 when unknown */
  double workers_parked;         /* /stats standby workers parked, < 0 when not reported */
} pb_row;

typedef struct pb_config_result {
  pb_server_spec spec;
  bool ran;         /* the server started, answered and the schedule ran */
  char error[1024]; /* why not, when !ran */
  pb_summary summary;
  pb_result *results; /* sched->count entries, owned */
  size_t n;
  pb_row *rows; /* owned */
  size_t n_rows;
  uint64_t t0_ns;
  double queue_p95_lifetime_ms; /* the server's own whole-run queue p95, -1 when n/a */
  pb_server_stats last_stats;   /* the last /stats the sampler read (fields -1 when none) */
  char protocol[16];            /* pb_proto_label: "h1", "h2", "h1+tls", "h2+tls" */
  pb_gen_counters counters;     /* the generator's transport counters for the run */
} pb_config_result;

/* Picks a free loopback TCP port (bind to 0, read it, close). > 0 or -1. */
int pb_free_port(void);

/* When s->log_path or s->decision_log already exists (a -log-dir reused), renames both to the
 * first free "NAME.N.log" / "NAME.N.decisions.jsonl" (N >= 2), so no run appends to another's
 * log. 0: kept as they were; N: renamed; -1: no free name that fits. pb_run_config calls it. */
int pb_run_fresh_logs(pb_server_spec *s);

/* Runs `sched` against the server `spec` describes. Always fills `out` (check out->ran). */
void pb_run_config(const pb_server_spec *spec, const pb_schedule *sched, const pb_run_options *o,
                   pb_config_result *out);

/* Runs `sched` against an already running target (no process management, no sampling). */
void pb_run_target(const char *host, int port, const pb_schedule *sched, const pb_run_options *o,
                   pb_config_result *out);

void pb_config_result_dispose(pb_config_result *r);

/* Prints the transport line: protocol, TCP connections opened and at most open at once, h2
 * streams, and the first connection-level failure in words when there was one. */
void pb_transport_print(FILE *f, const pb_config_result *r);

/* Prints the per-second table: t, offered, rps, p50, p99, procs, rss, queue_p95. */
void pb_rows_print(FILE *f, const pb_row *rows, size_t n);

#endif
