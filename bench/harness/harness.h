/* The harness around the generator: start a server under test as its own process group, wait
 * until it answers, sample it once a second while load runs (process-tree size and RSS from
 * /proc, queue p95 from puma-plus's /stats), and stop it by its process group.
 *
 * Processes are started with fork+exec; the child calls setpgid(0, 0) so the whole tree the
 * server forks (puma's workers, puma-plus's shepherd and Ruby workers) can be signalled with
 * kill(-pgid, ...) and never by name. Output goes to a log file the caller names. */
#ifndef PP_BENCH_HARNESS_H
#define PP_BENCH_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef enum pb_server_kind {
  PB_SERVER_PUMA = 0,     /* Debian's puma: puma -w W -t T:T -b tcp://127.0.0.1:PORT app */
  PB_SERVER_PUMAPLUS = 1, /* puma-plus-server (static or autoscale with a policy) */
  PB_SERVER_NULL = 2,     /* pp-bench's own null server as a child process (`null_bin
                           * null-server -port PORT`): a reference with no app, for soak tests */
  PB_SERVER_FALCON = 3,   /* falcon (RubyGems, fiber-based): `bundle exec falcon serve --bind
                           * http://127.0.0.1:PORT --count W --forked --config app`; needs
                           * gemfile and gem_home; `threads` does not apply */
} pb_server_kind;

typedef struct pb_server_spec {
  char name[64];
  pb_server_kind kind;
  uint32_t workers, threads;
  bool ractors; /* puma-plus: the slots are Ractors (--ractors THREADS; a scenario's
                 * `slots: ractor`, issue 28), each with its own GVL */
  bool autoscale;
  uint32_t max_workers;     /* autoscale bound; 0 = server default */
  char policy_path[512];    /* autoscale policy file, "" for the server's default */
  char app[512];            /* the Rack app (config.ru) */
  char puma_bin[256];       /* "puma" from PATH when empty */
  char pumaplus_bin[512];   /* the gem's CLI; "puma-plus" from PATH when empty */
  char server_bin[512];     /* puma-plus-server for the CLI's --server ("" = its default) */
  int port;                 /* listening port (the caller picks a free one) */
  int stats_port;           /* puma-plus control app port for /stats (0 = port + 1) */
  char log_path[512];       /* server stdout+stderr */
  char decision_log[512];   /* autoscale: the server's JSONL decision log ("" = none) */
  bool h2c;                 /* puma-plus: also serve cleartext HTTP/2 (-h2c), for -proto h2 */
  bool h3;                  /* puma-plus: also serve HTTP/3 (-listen-h3 127.0.0.1:port, UDP,
                             * the development certificate), for -proto h3 */
  bool shed;                /* puma-plus: admission control (-shed), with -policy policy_path when
                             * set (also without autoscale: the policy carries shed.budget) */
  char null_bin[512];       /* PB_SERVER_NULL: the pp-bench binary */
  uint32_t null_leak_every; /* PB_SERVER_NULL: -leak-every N (an injected descriptor leak) */
  /* The RubyGems column (scripts/install-gems.sh): when `gemfile` is set, PB_SERVER_PUMA and
   * PB_SERVER_FALCON run under `bundle exec` with GEM_HOME = gem_home and BUNDLE_GEMFILE =
   * gemfile (pb_rubygems_env_apply); "" = Debian's packages, no Bundler. */
  char gemfile[512];
  char gem_home[512];
} pb_server_spec;

/* In a child process before exec: the environment of the RubyGems column (GEM_HOME,
 * BUNDLE_GEMFILE, BUNDLE_FROZEN, Bundler's config and home under gem_home; GEM_PATH, RUBYOPT
 * and BUNDLE_BIN_PATH unset), as tests/e2e/helper.rb's rubygems_env. With gemfile NULL or "":
 * the same variables unset, so Debian's gems are what loads. */
void pb_rubygems_env_apply(const char *gem_home, const char *gemfile);

typedef struct pb_server {
  pid_t pid; /* also the process group id */
  int port;
  bool exited;
  int status; /* wait status once exited */
} pb_server;

/* Builds the argv for `spec` into argv (NULL-terminated, at most `max` entries, strings point
 * into `storage` of `storage_len` bytes). Returns the argument count or -1 if it does not fit.
 * Exposed so the exact command can be printed and tested. */
int pb_server_argv(const pb_server_spec *spec, char **argv, int max, char *storage,
                   size_t storage_len);

/* Starts the server. 0 or -1 with a message in err. */
int pb_server_start(const pb_server_spec *spec, pb_server *srv, char *err, size_t errlen);

/* Polls GET `path` every 100 ms until a 2xx arrives or `timeout_ns` passes, or the process
 * dies. 0 when ready, -1 otherwise (message in err). */
int pb_server_wait_ready(pb_server *srv, const char *host, const char *path, uint64_t timeout_ns,
                         char *err, size_t errlen);

/* SIGTERM to the process group, then SIGKILL after `grace_ns`; reaps the leader. */
void pb_server_stop(pb_server *srv, uint64_t grace_ns);

/* One blocking HTTP/1.1 GET with Connection: close. Returns the status (>0) and fills body
 * (NUL-terminated, truncated to cap-1) or -1 on failure/timeout. */
int pb_http_get(const char *host, int port, const char *path, uint64_t timeout_ns, char *body,
                size_t cap);

/* Memory of the process tree rooted at `root` (itself, its process group and descendants),
 * summed over its processes: RSS from /proc/PID/stat, and PSS and USS
 * (Private_Clean + Private_Dirty) from /proc/PID/smaps_rollup. `smaps_procs` counts the
 * processes whose smaps_rollup was read; PSS and USS are meaningful only when it equals
 * `procs` (the file needs Linux 4.14 and the same user, or CAP_SYS_PTRACE). */
typedef struct pb_tree_mem {
  uint32_t procs, smaps_procs;
  uint64_t rss_bytes, pss_bytes, uss_bytes;
} pb_tree_mem;

/* 0 or -1. */
int pb_proc_tree_mem(pid_t root, pb_tree_mem *out);
/* CPU time (utime + stime, clock ticks) of the same tree, zombies included (their time still
 * counts until reaped): the tree's sum, the root's own (root_ticks may be NULL) and the number of
 * processes (procs may be NULL). 0, or -1 when /proc cannot be read. */
int pb_proc_tree_cpu(pid_t root, uint64_t *tree_ticks, uint64_t *root_ticks, uint32_t *procs);

/* The directory part of `path` into out ("." when it has no '/'), as dirname(1) for the paths
 * pp-bench is given (no trailing slashes). */
void pb_dirname(const char *path, char *out, size_t len);

/* The machine's CPU times from /proc/stat's "cpu" line (all CPUs): the hypervisor's steal (its
 * 8th value) and the sum of its first eight (user nice system idle iowait irq softirq steal;
 * guest time is inside user). ok false when unreadable. */
typedef struct pb_cpu_times {
  bool ok;
  uint64_t steal, total;
} pb_cpu_times;
pb_cpu_times pb_cpu_times_now(void);
/* Percent of the CPU time between two readings that was stolen: 100 * dsteal / dtotal; -1 when
 * a reading failed, no tick passed, or a counter went back. On a shared VM steal is what swings
 * a measurement most (the guest counts a stolen moment as the running task's time). */
double pb_steal_pct(pb_cpu_times before, pb_cpu_times after);

/* One process's smaps_rollup: 0 with RSS, PSS and USS in bytes, or -1. */
int pb_smaps_rollup(pid_t pid, uint64_t *rss, uint64_t *pss, uint64_t *uss);

/* Finds a number named `key` anywhere in a JSON document (depth-first). true if found. */
bool pb_json_find_number(const char *json, const char *key, double *out);

/* One sample per second while load runs. */
typedef struct pb_sample {
  uint64_t t_ns; /* since the run's t0 (may be negative-clamped to 0) */
  uint32_t procs;
  uint64_t rss_bytes;
  double queue_p95_ms; /* < 0: not available (puma, or /stats unanswered) */
  double workers;      /* from /stats when reported, else < 0 */
  double queue_depth;  /* from /stats, < 0 when not reported */
  /* the process tree's PSS and USS (pb_tree_mem), 0 when smaps_rollup was not readable for
   * every process of the tree */
  uint64_t pss_bytes, uss_bytes;
  double workers_parked; /* /stats controller.workers_standby, < 0 when not reported */
} pb_sample;

/* What pp-bench reads from puma-plus's /stats (docs/SERVER.md): root.workers, and in
 * root.queue: depth, window.p95_ms (the last tick), lifetime.p95_ms, and
 * controller.workers_standby. Absent fields are -1.
 * false when the text is not JSON. */
typedef struct pb_server_stats {
  double workers;
  double workers_parked; /* controller.workers_standby (puma-plus with a standby policy) */
  /* controller.activations and controller.activation (docs/SERVER.md): standby activations
   * and their latency in ms (count, p50, p99, max), the last ones one by one; -1 / 0 when
   * absent */
  double activations, activation_count, activation_p50_ms, activation_p99_ms, activation_max_ms;
  double activation_recent_ms[32];
  uint32_t activation_recent_n;
  double queue_depth;
  double queue_p95_ms;
  double queue_p95_lifetime_ms;
} pb_server_stats;

bool pb_stats_parse(const char *json, pb_server_stats *out);

typedef struct pb_sampler pb_sampler;

/* Starts a thread sampling every second from now on. `stats_port` 0 disables /stats polling
 * (puma). Samples are timestamped relative to `t0_ns` (absolute uv_hrtime). */
int pb_sampler_start(pb_sampler **out, pid_t root, const char *host, int stats_port,
                     const char *stats_path, uint64_t t0_ns);
/* Stops the thread; *samples (malloc'd, caller frees) and *n receive what was collected, and
 * *lifetime_p95_ms (if not NULL) the server's whole-run queue p95 from the last /stats read
 * (-1 when never read). */
void pb_sampler_stop(pb_sampler *s, pb_sample **samples, size_t *n, double *lifetime_p95_ms);
/* pb_sampler_stop, and *last (if not NULL) receives the last /stats read (every field -1 when
 * none was). */
void pb_sampler_stop_stats(pb_sampler *s, pb_sample **samples, size_t *n, pb_server_stats *last);

#endif
