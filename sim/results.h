/* Results: the summary and timeline records of a run, and their SQLite store.
 *
 * pp-sim (kind 'simulated') and pp-bench (kind 'measured') both fill these structs and write
 * them with these helpers, so one SQL query compares simulated and measured runs. The schema
 * is documented in docs/RESULTS.md and created by pp_results_open() if absent (it is
 * versioned with PRAGMA user_version). All durations in the database are milliseconds (REAL),
 * rates per second, memory in bytes; NULL means "not measured" (puma's queue time). */
#ifndef PP_SIM_RESULTS_H
#define PP_SIM_RESULTS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define PP_RESULTS_SCHEMA_VERSION 1

/* One configuration's outcome over a run. Latencies are from the intended arrival to the end
 * of the response, over every served request (including ones whose client had given up);
 * -1 marks "unknown" in the *_ns fields that may be unmeasured. */
typedef struct pp_summary {
  double duration_s;         /* the scenario's length (arrivals happen inside it) */
  uint64_t requests;         /* arrivals */
  uint64_t completed;        /* responses served (2xx), whenever they ended */
  uint64_t completed_in_run; /* of those, ended within the scenario's duration */
  uint64_t shed;             /* 503 from admission control */
  uint64_t timed_out;        /* client gave up: latency above the client timeout, or never served */
  uint64_t errors;           /* other failures (measured runs; 0 in the simulator) */
  uint64_t unfinished;       /* still in the server when the run stopped (drain limit) */
  double offered_rps;        /* requests / duration */
  double achieved_rps;       /* completed_in_run / duration */
  double p50_ns, p90_ns, p99_ns, p999_ns, max_ns, mean_ns;
  double excess_latency_ns; /* sum over served requests of max(0, latency - SLO) */
  double queue_p95_ns;      /* queue time (T3 - arrival), -1 when not measurable */
  double queue_mean_ns;
  double avg_workers; /* time-average over the duration, booting and draining included */
  uint32_t peak_workers;
  double avg_memory_bytes; /* time-average of the model's (or measured) memory */
  double peak_memory_bytes;
  double worker_seconds; /* integral of workers over the duration */
  double queue_p99_ns;   /* queue time p99 of served requests, -1 when not measurable */
  double queue_max_ns;   /* longest queue time of a served request, -1 when not measurable */
} pp_summary;

/* One second of one configuration. Percentiles over requests completed in that second;
 * -1 when none completed, or when the quantity is not measurable (queue for puma). */
typedef struct pp_timeline_row {
  uint32_t t_s; /* second index: covers [t_s, t_s + 1) */
  uint64_t arrivals;
  uint64_t completed; /* rps */
  double p50_ns, p99_ns;
  uint32_t workers; /* alive at the end of the second (booting/draining included) */
  uint32_t workers_ready;
  double queue_p95_ns; /* queue time p95 of requests dispatched this second */
  int64_t queue_len;   /* waiting at the end of the second */
  uint64_t shed, timeouts;
  double memory_bytes;
} pp_timeline_row;

typedef struct pp_results_run {
  const char *kind;     /* "simulated" or "measured" */
  const char *tool;     /* "pp-sim", "pp-bench" */
  const char *scenario; /* scenario name */
  const char *scenario_path;
  uint64_t seed;
  double duration_s;
  const char *created_at; /* ISO 8601 UTC text, supplied by the caller */
  const char *notes;      /* may be NULL */
} pp_results_run;

typedef struct pp_results_config {
  const char *name;
  const char *server;      /* "puma", "pumaplus" */
  const char *queue_model; /* "fifo", "per_worker" */
  uint32_t workers, threads;
  int autoscale;
  const char *policy_hash; /* 16 hex digits, NULL when static */
  const char *policy_text; /* canonical policy text, NULL when static */
  const char *variant;     /* sweep settings ("spawn_cooldown=2s"), NULL otherwise */
} pp_results_config;

typedef struct pp_results_db pp_results_db; /* opaque: a connection and prepared statements */

/* Opens (creating if needed) the database and its schema. On failure returns PP_SIM_EDB and
 * writes a sentence into errbuf. *out is owned by the caller; close with pp_results_close. */
struct sqlite3;
/* The connection itself, for pp_results_merge (sim/merge.c). */
struct sqlite3 *pp_results_sqlite(pp_results_db *db);
int pp_results_open(pp_results_db **out, const char *path, char *errbuf, size_t errcap);
void pp_results_close(pp_results_db *db);
/* Transactions: wrap a run in begin/commit for speed (thousands of rows). */
int pp_results_begin(pp_results_db *db);
int pp_results_commit(pp_results_db *db);
/* The last SQLite error message. */
const char *pp_results_errmsg(pp_results_db *db);

int pp_results_add_run(pp_results_db *db, const pp_results_run *run, int64_t *run_id);
int pp_results_add_config(pp_results_db *db, int64_t run_id, const pp_results_config *c,
                          int64_t *config_id);
int pp_results_add_summary(pp_results_db *db, int64_t config_id, const pp_summary *s);
int pp_results_add_timeline(pp_results_db *db, int64_t config_id, const pp_timeline_row *rows,
                            size_t n);
/* One decision-log line (`line` is the JSONL text, stored verbatim). */
int pp_results_add_decision(pp_results_db *db, int64_t config_id, uint64_t tick, int64_t time_ns,
                            const char *action, uint32_t count, uint32_t workers_target,
                            const char *reason, const char *line);

/* Sweeps (docs/RESULTS.md, "Sweeps and shards"). A sweep is identified by the FNV-1a hash of
 * its definition text (scenario file hash, swept configurations and their base policy hashes,
 * axes, seeds); its rows come from one or more shards, each registered in sweep_shards. */
typedef struct pp_results_sweep {
  const char *hash; /* 16 hex digits */
  const char *scenario;
  const char *scenario_hash; /* 16 hex digits, FNV-1a of the scenario file's bytes */
  const char *definition;
  uint64_t variants, seeds, configs, units;
  uint32_t shards; /* the number of shards the sweep was split into (1: run whole) */
} pp_results_sweep;

typedef struct pp_results_shard {
  uint32_t shard; /* 1-based */
  uint64_t units, simulations;
  double wall_s;
  const char *host, *created_at;
} pp_results_shard;

/* How the database already holds sweep `hash`: 0 not at all; 1 with *shards set to its shard
 * count and *has_shard to whether shard `shard` is in. PP_SIM_EDB on a database error. */
int pp_results_sweep_state(pp_results_db *db, const char *hash, uint32_t shard, uint32_t *shards,
                           int *has_shard);
int pp_results_add_sweep(pp_results_db *db, const pp_results_sweep *sw);
/* The sweep's run for run->seed: found (sweep_runs), or added from *run. */
int pp_results_sweep_run(pp_results_db *db, const char *hash, const pp_results_run *run,
                         int64_t *run_id);
int pp_results_add_sweep_config(pp_results_db *db, int64_t config_id, const char *hash,
                                uint64_t unit, uint64_t variant, uint64_t seed, uint32_t shard);
int pp_results_add_sweep_shard(pp_results_db *db, const char *hash, const pp_results_shard *s);

/* pp-sim merge: copies every shard of the inputs into `out` (created if missing), one
 * transaction per input. All inputs must hold shards of one sweep (the same hash) and the same
 * shard count, which `out` must agree with if it already holds that sweep; otherwise nothing
 * is merged. A shard already in `out`, or given twice, is reported and skipped, so merging again
 * changes nothing. Reports each step, and then which shards are in and which are missing, one
 * line each to `report`. With no inputs it only reports on `out`'s sweeps (`out` must exist).
 * Returns 0 when every shard of the sweep is in, PP_RESULTS_INCOMPLETE when some are missing,
 * PP_SIM_EDB (with errbuf) on a refusal or an error. */
#define PP_RESULTS_INCOMPLETE 3
int pp_results_merge(const char *out, const char *const *inputs, size_t n_inputs, FILE *report,
                     char *errbuf, size_t errcap);

#endif
