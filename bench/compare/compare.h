/* `pp-bench compare`: servers x shapes x rounds in one run (issue 16). For every round, every
 * shape (workers x threads) and every server, interleaved so that drift on a shared machine
 * hits all servers alike, it starts the server in its own process group, waits until it
 * answers, warms it up, measures closed-loop throughput with wrk (requests/s, p50, p99, non-2xx
 * and socket errors) while reading the CPU time (utime + stime from /proc/PID/stat) of the
 * server's whole process tree before and after, then runs pp-bench's open-loop generator at a
 * fixed rate (latency from intended start: p50, p99, p99.9, errors), and stops the server.
 * Medians (with min and max) per server x shape and ratios against puma and puma8 follow.
 *
 * Workload assumed: a handful of servers and shapes, a few rounds of seconds each; everything
 * here runs on the main thread, blocking. The pure parts (list and wrk-output parsing, medians,
 * ratios) take no clocks and no I/O so tests can feed them directly. */
#ifndef PP_BENCH_COMPARE_H
#define PP_BENCH_COMPARE_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "bench/harness/harness.h"

/* The servers compare knows. */
typedef enum pb_cmp_server {
  PB_CMP_PUMAPLUS = 0, /* the gem's CLI, which execs puma-plus-server (as `smoke` runs it) */
  PB_CMP_PUMA = 1,     /* Debian's /usr/bin/puma (5.6.5) */
  PB_CMP_PUMA8 = 2,    /* puma 8.0 from the RubyGems column (build/gems, bundle exec) */
  PB_CMP_FALCON = 3,   /* falcon 0.51 from the same column: processes only (--count W) */
  PB_CMP_N_SERVERS
} pb_cmp_server;

/* "pumaplus", "puma", "puma8", "falcon". Static storage. */
const char *pb_cmp_server_name(pb_cmp_server s);

/* A column's label: the server's name, or for `pumaplus@DIR` (another built checkout of this
 * repository, PB_CMP_PUMAPLUS with a dir) "pumaplus@NAME", NAME being DIR's basename or the
 * LABEL of `pumaplus@DIR=LABEL`: letters, digits, '.', '_' and '-', at most
 * PB_CMP_MAX_LABEL_NAME bytes. */
#define PB_CMP_MAX_LABEL_NAME 32
#define PB_CMP_MAX_LABEL      (9 + PB_CMP_MAX_LABEL_NAME + 1)
#define PB_CMP_MAX_DIR        400

#define PB_CMP_MAX_SERVERS 8
#define PB_CMP_MAX_SHAPES  16
#define PB_CMP_MAX_ROUNDS  100

#define PB_CMP_MAX_STEAL_RETRIES 20
#define PB_CMP_MAX_STEAL_SEQ     64

typedef struct pb_cmp_shape {
  uint32_t workers, threads;
} pb_cmp_shape;

/* The servers of -servers as written: the kind, and for `pumaplus@DIR[=LABEL]` the directory
 * ("" for the others) and the label (pb_cmp_label). */
typedef struct pb_cmp_server_list {
  pb_cmp_server servers[PB_CMP_MAX_SERVERS];
  char dirs[PB_CMP_MAX_SERVERS][PB_CMP_MAX_DIR];
  char labels[PB_CMP_MAX_SERVERS][PB_CMP_MAX_LABEL];
  size_t n;
} pb_cmp_server_list;

/* Parses "pumaplus,puma,pumaplus@../base,pumaplus@/x/y=old" into out (at most
 * PB_CMP_MAX_SERVERS). Every label must be unique: a repeated server, or two directories with
 * one basename and no =LABEL, is an error. Pure (no file is looked at: pb_compare_run checks the
 * directories). Returns the count, or -1 with the reason in `bad` (NUL-terminated, truncated to
 * badlen). */
int pb_cmp_parse_server_list(const char *list, pb_cmp_server_list *out, char *bad, size_t badlen);

/* Parses "1x1,1x5,2x5" (WORKERSxTHREADS, each 1..256). Returns the count or -1 with the
 * offending word in `bad`. */
int pb_cmp_parse_shapes(const char *list, pb_cmp_shape *out, size_t max, char *bad, size_t badlen);

/* Parses PP_BENCH_STEAL_SEQ: comma-separated percentages, each 0..100 (`40,2.5,0`), at most
 * `max`. Returns the count, or -1 (empty, a bad number, out of range, too many). */
int pb_cmp_parse_steal_seq(const char *list, double *out, size_t max);

/* What wrk printed (wrk --latency). Latencies in microseconds; -1 when wrk did not print it. */
typedef struct pb_wrk_result {
  uint64_t requests; /* "N requests in 5.00s" (every response, whatever its status) */
  double seconds;    /* the run time wrk reports */
  double rps;        /* "Requests/sec:" */
  double p50_us, p99_us;
  uint64_t non2xx; /* "Non-2xx or 3xx responses: N" (0 when absent) */
  uint64_t sock_connect, sock_read, sock_write, sock_timeout; /* "Socket errors: ..." */
} pb_wrk_result;

/* Parses wrk's report. true when the request count, duration and rate were found. */
bool pb_wrk_parse(const char *text, pb_wrk_result *out);

/* One (round, shape, server) measurement. */
typedef struct pb_cmp_cell {
  uint32_t round;         /* 1-based */
  uint32_t shape, server; /* indexes into the config's shapes[] and servers[] */
  uint32_t order;         /* position within the round (1-based) */
  bool ran;               /* started, answered and the closed loop ran */
  char answer[64];        /* the first line of the body of one GET -path before the warm-up
                           * (tests/apps/codec answers the worker's codec); "" when none */
  char error[512];        /* why not, when !ran */
  char note[256];         /* a warning that did not stop the cell ("" when none) */
  /* closed loop (wrk) */
  pb_wrk_result wrk;
  uint32_t procs;             /* processes in the server's tree during the measurement */
  double cpu_us_per_req;      /* the whole process tree's CPU / requests completed */
  double frontend_us_per_req; /* pumaplus: puma-plus-server's own pid; -1 otherwise */
  double ruby_us_per_req;     /* pumaplus: the rest (shepherd and workers); -1 otherwise */
  /* The hypervisor's steal time (/proc/stat, all CPUs) over the closed loop and over the open
   * loop, in percent of all CPU time in the window; -1 when unknown. On a shared VM it is what
   * swings a round most, so a round is judged beside it. */
  double steal_pct, open_steal_pct;
  /* open loop (pp-bench's generator at a fixed rate; open_ran false when -rate 0 or it failed) */
  bool open_ran;
  char open_error[256];
  uint64_t open_offered, open_ok, open_shed, open_http_errors, open_conn_errors, open_timeouts;
  double open_achieved_rps;
  double open_p50_us, open_p99_us, open_p999_us;
  bool has_errors; /* non-2xx, socket errors, or open-loop failures: marked, never dropped */
  /* -max-steal: a cell whose steal was too high is measured again (a fresh server each time).
   * `attempt` is which measurement this is (1-based); in the kept cell of pb_compare_result,
   * the one that was kept, `attempts` how many were made (1 when not retried) and `steal_over`
   * whether the kept one is still above the limit (marked STEAL, kept in the medians). */
  uint32_t attempt, attempts;
  bool steal_over;
} pb_cmp_cell;

/* The worse of a cell's two steal readings: max(closed loop's, open loop's) over those known
 * (a loop that did not run has none); -1 when neither is known. */
double pb_cmp_cell_steal(const pb_cmp_cell *cell);

/* -max-steal's trigger: true when the attempt ran, its steal (pb_cmp_cell_steal) is known and it
 * is above max_steal_pct (> 0). A failed attempt, or one whose steal is unknown, is not measured
 * again for steal. */
bool pb_cmp_steal_too_high(const pb_cmp_cell *attempt, double max_steal_pct);

/* -max-steal's choice among the `n` (>= 1) attempts made of one cell: among those that ran, the
 * one with the lowest pb_cmp_cell_steal (unknown counts as under any limit; the earliest on a
 * tie); when none ran, the first. *steal_over (may be NULL) is set when the kept attempt is
 * pb_cmp_steal_too_high. Returns its index. Pure. */
size_t pb_cmp_steal_pick(const pb_cmp_cell *attempts, size_t n, double max_steal_pct,
                         bool *steal_over);

typedef struct pb_compare_config {
  pb_cmp_server servers[PB_CMP_MAX_SERVERS];
  size_t n_servers;
  /* Per server: for pumaplus@DIR the checkout DIR, whose gem CLI (DIR/gem/exe/puma-plus) and
   * server (DIR/build/server/puma-plus-server) it runs; "" = this build's. The label, "" = the
   * server's name (pb_cmp_label). */
  char server_dirs[PB_CMP_MAX_SERVERS][PB_CMP_MAX_DIR];
  char server_labels[PB_CMP_MAX_SERVERS][PB_CMP_MAX_LABEL];
  pb_cmp_shape shapes[PB_CMP_MAX_SHAPES];
  size_t n_shapes;
  uint32_t rounds;
  uint64_t dur_ns, warmup_ns;
  uint32_t conns; /* wrk connections (one wrk thread) */
  char path[256];
  char app[512];
  double rate; /* open-loop rps; 0 = no open-loop run */
  uint64_t rate_dur_ns;
  uint64_t ready_timeout_ns;
  char log_dir[512];
  char wrk_bin[256];  /* "wrk" from PATH when empty */
  char gem_home[512]; /* the RubyGems column for puma8 and falcon */
  char gemfile[512];
  char source_dir[512]; /* the checkout, for versions (git) */
  pb_server_spec base;  /* binaries for pumaplus and puma (pumaplus_bin, server_bin, puma_bin) */
  /* -max-steal PCT (0 = off): a cell whose closed- or open-loop steal% is above it is measured
   * again, up to steal_retries more times (-steal-retries, 0..PB_CMP_MAX_STEAL_RETRIES). */
  double max_steal_pct;
  uint32_t steal_retries;
  /* Test hook (PP_BENCH_STEAL_SEQ): when n_steal_seq > 0, the steal% of successive loops that
   * ran (each attempt's closed loop, then its open loop) are these values in order instead of
   * /proc/stat's; once they are used up, /proc/stat's again. */
  double steal_seq[PB_CMP_MAX_STEAL_SEQ];
  size_t n_steal_seq;
  volatile sig_atomic_t *running_pgid; /* as pb_run_options.running_pgid */
} pb_compare_config;

/* The label of config server i (static or the config's storage): server_labels[i], or the
 * server's name when that is empty. */
const char *pb_cmp_label(const pb_compare_config *c, size_t i);

/* Copies a parsed list into the config's servers, server_dirs and server_labels. */
void pb_cmp_config_set_servers(pb_compare_config *c, const pb_cmp_server_list *l);

/* Fills the defaults: pumaplus,puma; 1x1,1x5,2x5; 3 rounds; 5 s; warm-up 1 s; 10 connections;
 * /hello; 1000 rps for 10 s; ready timeout 60 s; logs in /tmp. Binaries and paths are left
 * for the caller. */
void pb_compare_defaults(pb_compare_config *c);

/* Per server x shape over the rounds that ran: median, min and max. Unknown values (n = 0)
 * are -1. */
typedef struct pb_cmp_stat {
  double med, min, max;
  uint32_t n;
} pb_cmp_stat;

enum {
  PB_CMP_RPS = 0,
  PB_CMP_P50,      /* closed loop, us */
  PB_CMP_P99,      /* closed loop, us */
  PB_CMP_CPU,      /* us per request, the whole tree */
  PB_CMP_FRONTEND, /* us per request, puma-plus-server alone */
  PB_CMP_RUBY,     /* us per request, the rest */
  PB_CMP_OPEN_P50, /* open loop, us */
  PB_CMP_OPEN_P99,
  PB_CMP_OPEN_P999,
  PB_CMP_N_METRICS
};

/* Column stem of a metric in compare_medians ("rps", "p50_ms", "cpu_us_per_req", ...). */
const char *pb_cmp_metric_name(int metric);

typedef struct pb_cmp_median {
  uint32_t shape, server;
  uint32_t rounds_ran, rounds_failed, rounds_with_errors;
  pb_cmp_stat m[PB_CMP_N_METRICS];
} pb_cmp_median;

typedef struct pb_compare_result {
  pb_cmp_cell *cells; /* rounds x shapes x servers, in the order they ran; owned */
  size_t n_cells;
  char versions[PB_CMP_MAX_SERVERS][160];  /* per config server, what the binary or gem says */
  char commands[PB_CMP_MAX_SERVERS][1024]; /* the first command line each server ran with */
  char wrk_version[128];
  char ruby_version[160];
  double loadavg_start, loadavg_end; /* 1-minute load average */
  double wall_s;
  bool prerequisites_ok; /* false: nothing ran, `error` says why */
  size_t steal_seq_next; /* the next value of the config's steal_seq (test hook) */
  char error[1024];
} pb_compare_result;

/* The value of one metric of a cell (-1 when unknown or the cell did not run). */
double pb_cmp_cell_metric(const pb_cmp_cell *c, int metric);

/* Medians of `n` cells for `n_shapes` x `n_servers` pairs into out[shape * n_servers + server].
 * Every cell that ran counts, with or without errors (rounds_with_errors says how many had). */
void pb_cmp_medians(const pb_cmp_cell *cells, size_t n, size_t n_shapes, size_t n_servers,
                    pb_cmp_median *out);

/* The median of `n` values (sorts a copy): the middle one, or the mean of the two middle ones. */
double pb_cmp_median_of(const double *v, size_t n);

/* Checks what the chosen servers need (wrk; for puma8/falcon the RubyGems column, whose absence
 * is an error naming scripts/install-gems.sh; for pumaplus@DIR the directory, its gem CLI, server
 * and C codec, each missing one named with the command that builds it, and that DIR/build was
 * configured from DIR, else its server would run DIR/gem on the pure-Ruby codec) and records
 * versions, then runs every cell, printing each round's table to `out` as it completes and progress
 * to stderr. Returns 0 when every cell ran without errors, 1 when some failed or had errors, 2 when
 * nothing could run (result->error). The caller disposes `result`. */
int pb_compare_run(const pb_compare_config *c, pb_compare_result *result, FILE *out);

void pb_compare_result_dispose(pb_compare_result *r);

/* The rows of one round (or every round when round == 0) as a table. */
void pb_compare_print_round(FILE *f, const pb_compare_config *c, const pb_compare_result *r,
                            uint32_t round);
/* Medians per server x shape, then ratios against puma and puma8 (when they ran), and against
 * pumaplus when a pumaplus@ column is present (req/s, cpu, front_us, ruby_us, open_p99). */
void pb_compare_print_summary(FILE *f, const pb_compare_config *c, const pb_compare_result *r);

/* The four-panel figure (requests/s, p50, p99, CPU per request; by shape, one point per server,
 * medians with min..max bars) via gnuplot's pngcairo terminal, or png when pngcairo is
 * missing. Writes PNG.dat and PNG.gp beside it. 0 or -1 with a message in err. */
int pb_compare_plot(const pb_compare_config *c, const pb_compare_result *r, const char *png,
                    char *err, size_t errlen);

/* CPU ticks (utime + stime, in clock ticks) of the process tree rooted at `root` (its process
 * group and descendants) and of `root` alone; *procs counts the tree. 0 or -1. */
int pb_cmp_tree_cpu(pid_t root, uint64_t *tree_ticks, uint64_t *root_ticks, uint32_t *procs);

#endif
