/* Scenarios: the YAML description of traffic and of the server configurations to compare,
 * shared by pp-sim and pp-bench. Field reference: docs/SCENARIOS.md.
 *
 * The parser is sans-I/O: pp_scenario_parse() takes the YAML text and the name to quote in
 * errors; files it refers to (a policy file, a trace) are only recorded as paths, and
 * scenario_file.h reads them at the edge. Every error names the file, line, column and the
 * dotted field ("configs[2].policy.spawn_cooldown"). The struct is plain data plus a few
 * owned heap arrays; pp_scenario_dispose() frees them. */
#ifndef PP_SIM_SCENARIO_H
#define PP_SIM_SCENARIO_H

#include <stddef.h>
#include <stdint.h>

#include "control/control.h"
#include "sim/hpa.h"

#define PP_SCN_NAME_MAX     64
#define PP_SCN_PATH_MAX     512
#define PP_SCN_MAX_PHASES   64
#define PP_SCN_MAX_KINDS    16
#define PP_SCN_MAX_CONFIGS  16
#define PP_SCN_MAX_THREADS  1024
#define PP_SCN_MAX_CLUSTERS 16
#define PP_SCN_MAX_HOSTS    100000

/* Errors of the sim library (negative, one enum). */
typedef enum pp_sim_err {
  PP_SIM_OK = 0,
  PP_SIM_EINVAL = -1, /* a value is out of its domain */
  PP_SIM_EPARSE = -2, /* malformed text (the error struct says where) */
  PP_SIM_EIO = -3,    /* a file could not be read or written */
  PP_SIM_ENOMEM = -4,
  PP_SIM_EDB = -5, /* SQLite failed */
} pp_sim_err;

const char *pp_sim_strerror(int err);

/* Where parsing failed. line/column are 1-based; 0 when the error is not tied to text. */
typedef struct pp_scn_error {
  char file[PP_SCN_PATH_MAX * 2 + 2];
  int line;
  int column;
  char field[96];
  char message[384];
} pp_scn_error;

/* Formats "file:line:col: field: message" into buf. Returns buf. */
char *pp_scn_error_format(const pp_scn_error *e, char *buf, size_t cap);

typedef enum pp_dist_kind {
  PP_DIST_FIXED = 0,
  PP_DIST_EXPONENTIAL = 1,
  PP_DIST_LOGNORMAL = 2,
  PP_DIST_UNIFORM = 3,
} pp_dist_kind;

/* A non-negative random duration. mean_ns for fixed/exponential/lognormal, sd_ns for
 * lognormal, min_ns/max_ns for uniform. */
typedef struct pp_dist {
  pp_dist_kind kind;
  uint64_t mean_ns;
  uint64_t sd_ns;
  uint64_t min_ns, max_ns;
} pp_dist;

typedef enum pp_arrival_process {
  PP_ARRIVALS_POISSON = 0,
  PP_ARRIVALS_UNIFORM = 1,
  PP_ARRIVALS_TRACE = 2,
} pp_arrival_process;

/* One phase: `rate` requests/s for `duration_ns`, ramping linearly to `rate_end` when
 * has_ramp (the `to:` field). */
typedef struct pp_phase {
  double rate;
  double rate_end;
  int has_ramp;
  uint64_t duration_ns;
} pp_phase;

/* One request kind: the path the real app serves and the service model the sim uses. Each
 * request runs its CPU segment (holding the worker's GVL) and then its IO segment, as
 * /mix/<cpu_ms>/<sleep_ms> does. */
typedef struct pp_request_kind {
  char path[128];
  double weight;
  pp_dist cpu;
  pp_dist io;
} pp_request_kind;

typedef enum pp_server_kind {
  PP_SERVER_PUMA = 0,     /* per-worker queues fed round robin */
  PP_SERVER_PUMAPLUS = 1, /* one FIFO in the front end */
} pp_server_kind;

typedef enum pp_queue_model {
  PP_QUEUE_FIFO = 0,       /* one shared queue, any idle slot takes the head */
  PP_QUEUE_PER_WORKER = 1, /* arrivals dealt round robin to ready workers' own queues */
} pp_queue_model;

typedef struct pp_config {
  char name[PP_SCN_NAME_MAX];
  pp_server_kind server;
  pp_queue_model queue;
  uint32_t workers; /* static: workers; autoscale: initial workers */
  uint32_t threads; /* threads per worker (slots; the controller's set_slots changes them) */
  int fibers;       /* slots: fiber (1) or thread (0, default): a fiber slot's memory is
                       machine.memory.per_fiber and its request's CPU is smaller by two switches'
                       difference (machine.switch_thread - switch_fiber) */
  int ractors;      /* slots: ractor (1): each slot is a Ractor with its own GVL, so one
                       process's slots run CPU in parallel up to machine.cores; memory is
                       machine.memory.per_ractor, set_slots waits machine.slot_delay_ractor */
  int autoscale;
  pp_policy policy;                  /* valid when autoscale */
  char policy_path[PP_SCN_PATH_MAX]; /* "" when inline or none; resolved by scenario_file.h */
  int policy_line;                   /* where `policy:` was written, for file errors */
  int policy_loaded;                 /* policy_path has been read into policy */
  int has_boot;                      /* per-config boot distribution overrides machine.boot */
  pp_dist boot;
} pp_config;

/* Cluster mode (docs/SIM.md, "Cluster mode"): `hosts:` describes the fleet, every host a
 * puma-plus running one entry of `configs:` (its workers, threads and policy, so its own
 * decide()); each entry of `clusters:` is one balancer and cluster autoscaler to compare. */
typedef enum pp_balancer {
  PP_BAL_ROUND_ROBIN = 0,       /* HAProxy `balance roundrobin` */
  PP_BAL_LEAST_OUTSTANDING = 1, /* `balance leastconn`: fewest requests in queue + in service */
  PP_BAL_P2C = 2,               /* `balance random(2)`: the less loaded of two random hosts */
  PP_BAL_RANDOM = 3,            /* `balance random`: uniform, for the closed-form checks */
} pp_balancer;

typedef enum pp_cluster_metric {
  PP_CMETRIC_NONE = 0,  /* no cluster autoscaler: the host count stays */
  PP_CMETRIC_QUEUE = 1, /* histogram_quantile(q, sum by (le) (rate(queue bucket[w]))) */
  PP_CMETRIC_CPU = 2,   /* CPU utilisation averaged over ready hosts (metrics-server) */
  PP_CMETRIC_BUSY = 3,  /* sum(rate(service seconds)) / sum(slots ready): busy threads */
} pp_cluster_metric;

#define PP_CLUSTER_MAX_METRICS 3

typedef struct pp_hosts {
  int present;
  char config[PP_SCN_NAME_MAX]; /* the configs: entry every host runs */
  uint32_t config_index;        /* resolved at the end of parsing */
  uint32_t count;               /* hosts ready at t = 0 (default 2) */
  uint32_t cores;               /* per host (default machine.cores) */
  pp_dist boot; /* host start-up: scale decision to ready (default lognormal 30s sd 5s) */
} pp_hosts;

typedef struct pp_cluster_cfg {
  char name[PP_SCN_NAME_MAX];
  pp_balancer balancer;
  uint32_t count;           /* initial hosts (default hosts.count) */
  pp_cluster_metric metric; /* the first metric (NONE: static) */
  double target;            /* queue: seconds; cpu, busy: utilisation 0..1 */
  uint32_t n_metrics;       /* several: the HPA takes the largest recommendation */
  pp_cluster_metric metrics[PP_CLUSTER_MAX_METRICS];
  double targets[PP_CLUSTER_MAX_METRICS];
  double quantile;         /* queue: 0.95 */
  uint64_t sync_ns;        /* HPA sync period, 15 s */
  uint64_t scrape_ns;      /* Prometheus scrape interval, 15 s */
  uint64_t rate_window_ns; /* the query's rate() window, 30 s */
  pp_hpa_spec hpa;         /* min/max hosts, tolerance, windows and rate policies */
} pp_cluster_cfg;

typedef struct pp_scenario {
  char name[PP_SCN_NAME_MAX];
  char description[256];
  uint64_t seed;

  pp_arrival_process process;
  uint32_t n_phases;
  pp_phase phases[PP_SCN_MAX_PHASES];
  char trace_path[PP_SCN_PATH_MAX]; /* for process: trace */
  int64_t *trace_ns;                /* owned; sorted offsets from start, loaded at the edge */
  size_t trace_len;
  uint64_t duration_ns; /* sum of phases, or `duration:`, or the trace's last timestamp */

  uint32_t n_kinds;
  pp_request_kind kinds[PP_SCN_MAX_KINDS];

  uint64_t client_timeout_ns; /* default 20s */
  uint64_t slo_ns;            /* default 150ms */
  uint64_t drain_limit_ns;    /* how long to keep serving after the last arrival; 600s */

  uint32_t cores;                /* machine.cores, default 8 */
  double background;             /* machine.background: other runnable threads sharing the
                                    cores (mean run-queue length of other work), default 0 */
  uint64_t overhead_ns;          /* machine.overhead: the worker's CPU per request outside the
                                    app (frames, env, response), default 0 */
  uint64_t mem_worker_bytes;     /* machine.memory.worker, default 80MB */
  uint64_t mem_thread_bytes;     /* machine.memory.per_thread, default 2MB */
  uint64_t mem_fiber_bytes;      /* machine.memory.per_fiber, default 640KB (docs/SIM.md) */
  uint64_t mem_ractor_bytes;     /* machine.memory.per_ractor, default 2.325MB (docs/SIM.md) */
  uint64_t switch_thread_ns;     /* machine.switch_thread: a thread slot's switch, default 22us */
  uint64_t switch_fiber_ns;      /* machine.switch_fiber: a fiber slot's switch, default 100ns */
  uint64_t slot_delay_ns;        /* machine.slot_delay: set_slots to new slots serving, 1ms */
  uint64_t slot_delay_ractor_ns; /* machine.slot_delay_ractor: the same for Ractor slots, 10.3ms */
  uint64_t gvl_timeslice_ns;     /* machine.gvl_timeslice, default 100ms */
  int gvl_measured;              /* machine.gvl_measured, default true */
  int cpu_measured;              /* machine.cpu_measured: the server passes its workers' CPU times
                                    to the observation (rule 4b's signal), default true; false
                                    models a server without it (rule 4b never acts) */
  pp_dist boot;                  /* machine.boot: worker boot time, default lognormal 2s sd 0.5s */
  /* Standby workers and the USS/PSS memory model (docs/SIM.md, "Memory"). */
  uint64_t mem_shared_bytes; /* machine.memory.shared: of `worker`, shared copy-on-write with
                                the shepherd (the preloaded app), counted once; default 0 */
  int64_t mem_standby_bytes; /* machine.memory.standby: private memory (USS) of a parked
                                standby worker; -1 (default) = worker - shared */
  pp_dist activation;        /* machine.activation: standby activation delay, decision to
                                serving; default lognormal 10ms sd 5ms */

  uint32_t n_configs;
  pp_config configs[PP_SCN_MAX_CONFIGS];

  pp_hosts hosts; /* hosts.present = 0 without a `hosts:` section */
  uint32_t n_clusters;
  pp_cluster_cfg clusters[PP_SCN_MAX_CLUSTERS];
} pp_scenario;

/* Sets defaults: no phases, no kinds, no configs. */
void pp_scenario_defaults(pp_scenario *s);

/* Parses YAML text. `file` is only quoted in errors. Policy and trace files are recorded as
 * paths (exactly as written) and must be resolved with scenario_file.h before use.
 * Returns 0, or PP_SIM_EPARSE / PP_SIM_EINVAL with *err filled. *out must be disposed either way.
 */
int pp_scenario_parse(pp_scenario *out, const char *yaml, size_t len, const char *file,
                      pp_scn_error *err);

/* Parses a trace: one timestamp per line in seconds from the start ("0.0125"); blank lines and
 * lines starting with '#' are ignored; timestamps must not decrease. Fills s->trace_ns (owned
 * by s). Returns 0 or PP_SIM_EPARSE with err naming the line. */
int pp_scenario_parse_trace(pp_scenario *s, const char *text, size_t len, const char *file,
                            pp_scn_error *err);

/* Cross-field checks after everything is resolved (weights, phases, autoscale only on
 * pumaplus ...). 0 or PP_SIM_EINVAL. */
int pp_scenario_validate(const pp_scenario *s, pp_scn_error *err);

/* The cluster with this name, or -1. */
int pp_scenario_find_cluster(const pp_scenario *s, const char *name);

/* The config with this name, or -1. */
int pp_scenario_find_config(const pp_scenario *s, const char *name);

/* Frees owned arrays; the struct may be reused after pp_scenario_defaults(). */
void pp_scenario_dispose(pp_scenario *s);

/* Draws are done by arrivals.c/engine.c; this returns the distribution's mean in ns. */
double pp_dist_mean_ns(const pp_dist *d);

#endif
