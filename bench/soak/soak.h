/* `pp-bench soak`: the server under overload and bad traffic, cycle after cycle, and whether it
 * comes back (issue 11). One server process lives through the whole soak; each cycle runs five
 * phases, each its own open-loop schedule run to completion by the generator (bench/gen/gen.h):
 *
 *   steady    mixed traffic: /hello, /mix/2/20 and POST /echo with a 256 KiB body
 *   overload  /mix/2/20 at `overload_x` times the capacity estimate (with shedding on, the
 *             503s must come fast: the phase reports their p99 from intended start)
 *   body      bursts of `body_concurrency` concurrent POST /echo uploads of `body_bytes`
 *   cancel    /mix/0/2000 whose clients leave `cancel_queued_ns` (while queued) or
 *             `cancel_running_ns` (while running) after sending
 *   recovery  the steady mix again
 *
 * A sampler thread reads, once a second, the server process's open descriptors
 * (/proc/PID/fd), its RSS (/proc/PID/status VmRSS) and, from puma-plus's /stats, the workers'
 * live heap slots (see pb_soak_heap_slots; "unknown" while the server does not report them).
 * After each cycle the harness waits (at most `settle_ns`) for the descriptor count to come
 * back, then records it. The soak passes when no steady or recovery request failed (anything
 * but a 2xx) and descriptors are flat: every end-of-cycle count within `fd_tolerance` of the
 * baseline taken before the first cycle (after a warm-up of every request kind, settled).
 *
 * Workload assumed: loopback, one server at a time, up to a few thousand requests per second,
 * a few million requests per soak; results of one phase are summarised and freed before the
 * next (about 40 bytes per request while a phase runs). */
#ifndef PP_BENCH_SOAK_H
#define PP_BENCH_SOAK_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "bench/gen/gen.h"
#include "bench/harness/harness.h"

enum {
  PB_SOAK_STEADY = 0,
  PB_SOAK_OVERLOAD,
  PB_SOAK_BODY,
  PB_SOAK_CANCEL,
  PB_SOAK_RECOVERY,
  PB_SOAK_PHASES
};

/* "steady", "overload", "body", "cancel", "recovery". Static storage. */
const char *pb_soak_phase_name(int phase);

typedef struct pb_soak_config {
  pb_server_spec spec; /* the server: kind, shape, app, binaries, shed; the port, stats port
                        * and log path are filled by pb_soak_run when 0 / empty */
  uint32_t cycles;
  uint64_t phase_ns[PB_SOAK_PHASES]; /* each phase's schedule length */
  uint64_t gap_ns;                   /* idle time between phases (0: back to back) */
  uint64_t recovery_gap_ns;          /* idle time before recovery, added to gap_ns: the
                                      * cancel phase's abandoned requests are still running in
                                      * the app (up to /mix/0/2000's 2 s); 0: none */
  double steady_rps;                 /* steady and recovery arrival rate (Poisson) */
  double capacity_rps;               /* what overload multiplies; 0: pb_soak_capacity() */
  double overload_x;
  uint32_t echo_bytes; /* steady upload size */
  uint32_t body_concurrency, body_bytes;
  uint64_t body_every_ns; /* a burst every this long (0: one burst) */
  double cancel_rps;
  uint64_t cancel_queued_ns, cancel_running_ns;
  uint64_t shed_budget_ns; /* puma-plus with spec.shed and no spec.policy_path: the budget of
                            * the policy file written to log_dir (0: the server's default) */
  pb_proto proto;
  uint32_t h2_connections;
  uint64_t timeout_ns; /* client timeout from intended start */
  uint32_t max_connections;
  uint32_t fd_tolerance; /* descriptors */
  uint64_t settle_ns;    /* longest wait for descriptors to come back after a cycle */
  uint64_t seed;
  const char *log_dir;                 /* server log and policy file ("/tmp" when NULL) */
  volatile sig_atomic_t *running_pgid; /* optional: the server's process group while it runs */
  FILE *progress; /* progress lines (stderr when NULL); updating on a terminal, else a line
                   * every 10 s and one per phase */
} pb_soak_config;

/* Fills the defaults of the long form (see bench/README.md) for `workers` × `threads`. */
void pb_soak_defaults(pb_soak_config *c);
/* Shrinks `c` to the short form: under 60 s in all on this machine. */
void pb_soak_short(pb_soak_config *c);

/* The capacity estimate for /mix/<cpu_ms>/<sleep_ms>: each request holds a thread for
 * cpu + sleep and a core for cpu, so min(threads / (cpu + sleep), cores / cpu) per second. */
double pb_soak_capacity(uint32_t workers, uint32_t threads, double cpu_ms, double sleep_ms,
                        uint32_t cores);

/* The schedule of one phase and its request kinds (`*kinds` has sched->path_count entries,
 * malloc'd, the caller frees it and disposes the schedule). Pure: same config and seed, same
 * schedule. `capacity_rps` is the resolved capacity. 0 or a negative PB_E* code. */
int pb_soak_schedule(const pb_soak_config *c, int phase, double capacity_rps, uint64_t seed,
                     pb_schedule *sched, pb_kind_spec **kinds);

/* What one phase of one cycle saw. Counts are by arrival; each arrival is in exactly one of
 * ok, shed_503, too_large_413, other_status, transport_errors, timeouts, cancelled. */
typedef struct pb_soak_phase {
  uint64_t requests;
  uint64_t ok;                /* 2xx */
  uint64_t shed_503;          /* 503 */
  uint64_t too_large_413;     /* 413 */
  uint64_t other_status;      /* any other status */
  uint64_t transport_errors;  /* connect, reset, EOF mid-response, bad HTTP, TLS, h2 errors */
  uint64_t timeouts;          /* no response within the client timeout */
  uint64_t cancelled;         /* the client left on purpose (cancel phase) */
  uint64_t failures;          /* steady and recovery only: requests - ok */
  double p99_ok_ms;           /* 2xx latency from intended start; -1 when none */
  double p99_503_ms;          /* 503 latency from intended start; -1 when none */
  double duration_s;          /* wall time, schedule plus its tail */
  int32_t fds_max;            /* most descriptors seen during the phase; -1 unknown */
  int32_t fds_end;            /* at the phase's end; -1 unknown */
  uint64_t rss_max, rss_end;  /* bytes; 0 unknown */
  int64_t heap_live_slots;    /* at the phase's end; -1 unknown */
  char transport_causes[160]; /* "ECONNRESET 3, EOF 1", "" if none */
  /* What the server counted during the phase, from /stats before and after (puma-plus's
   * queue.shed, queue.cancelled_queued, queue.cancelled_running); -1 unknown. */
  int64_t server_shed, server_left_queued, server_left_running;
  /* The hypervisor's steal over the phase's generator run, in percent of all CPU time
   * (/proc/stat, pb_steal_pct); -1 unknown. A phase at high steal serves less than its shape
   * says: read its latencies beside it. */
  double steal_pct;
} pb_soak_phase;

typedef struct pb_soak_cycle {
  pb_soak_phase phase[PB_SOAK_PHASES];
  int32_t fds_end; /* after the cycle, settled; -1 unknown */
  uint64_t rss_end;
  int64_t heap_live_slots; /* -1 unknown */
} pb_soak_cycle;

typedef struct pb_soak_result {
  bool ran; /* the server started and every cycle ran */
  char error[512];
  char server_cmd[2048];
  char protocol[16];
  double capacity_rps;
  bool capacity_estimated;
  int32_t fds_baseline; /* -1 unknown */
  uint64_t rss_baseline;
  int64_t heap_baseline;
  uint32_t n_cycles;     /* cycles that ran */
  pb_soak_cycle *cycles; /* owned: pb_soak_result_dispose */
  uint64_t requests, failures, transport_errors;
  bool fds_flat;
  bool passed; /* ran, failures == 0 and fds_flat */
  double wall_s;
} pb_soak_result;

/* Counts one phase's results into `out` (the sample fields are left alone). `steady`: count
 * every non-2xx as a failure. Pure. */
void pb_soak_tally(const pb_result *r, size_t n, bool steady, pb_soak_phase *out);

/* Flat descriptors: the baseline and every end count are known and each end is within
 * `tolerance` of the baseline (either way). Pure. */
bool pb_soak_fds_flat(int32_t baseline, const int32_t *ends, size_t n, uint32_t tolerance);

/* The workers' live heap slots from a /stats document: the sum of
 * worker_status[].last_status.heap_live_slots (GC.stat(:heap_live_slots) of each worker).
 * -1 (unknown) when the document has no workers or any worker does not report it. Pure. */
int64_t pb_soak_heap_slots(const char *stats_json);

/* Runs the whole soak. Always fills `out` (check out->ran, out->passed). */
void pb_soak_run(const pb_soak_config *c, pb_soak_result *out);

/* The per-cycle, per-phase table and the verdict. */
void pb_soak_print(FILE *f, const pb_soak_config *c, const pb_soak_result *r);

/* Requests the configuration will offer (expected value) and the schedules' total length. */
void pb_soak_plan(const pb_soak_config *c, double capacity_rps, double *requests, double *seconds);

void pb_soak_result_dispose(pb_soak_result *r);

#endif
