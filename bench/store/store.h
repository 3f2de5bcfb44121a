/* Measured results in the shared SQLite schema (docs/RESULTS.md, sim/results.h), and the
 * reports pp-bench prints from it.
 *
 * A measured run is one `runs` row (kind 'measured', tool 'pp-bench'), one `configs` row per
 * configuration, its `summary` and per-second `timeline` rows, written with the simulator's
 * own helpers so one query compares both. What only a measurement has goes in a side table
 * that pp-bench owns, `bench_measure` (one row per config): the success check and its
 * reason, http/connection error split, the generator's lateness, connections used, the exact
 * server command and, for a configuration that could not run, why.
 *
 * Conventions (as the schema's): durations in ms, NULL = not measured (puma's queue time).
 * A configuration whose success check failed gets achieved_rps = -1 (never throughput). */
#ifndef PP_BENCH_STORE_H
#define PP_BENCH_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "bench/compare/compare.h"
#include "bench/run/run.h"
#include "bench/soak/soak.h"
#include "sim/results.h"

typedef struct pb_store_run {
  const char *scenario;      /* name */
  const char *scenario_path; /* may be NULL */
  uint64_t seed;
  double duration_s; /* the schedule's length */
  uint64_t slo_ns;
  const char *notes;
} pb_store_run;

/* Converts one measured configuration into the schema's summary and timeline records.
 * `rows_out` must hold r->n_rows entries. */
void pb_store_convert(const pb_config_result *r, double duration_s, uint64_t slo_ns,
                      pp_summary *sum, pp_timeline_row *rows_out);

/* Writes the run and every configuration (ran or not). Returns 0 and sets *run_id, or -1 with
 * a message in err. */
int pb_store_write(const char *db_path, const pb_store_run *run, const pb_config_result *configs,
                   size_t n, int64_t *run_id, char *err, size_t errlen);

/* `pp-bench report`: the comparison table of run `run_id` (< 0: the latest measured run). */
int pb_report_table(FILE *f, const char *db_path, int64_t run_id, char *err, size_t errlen);
/* The per-second table of one configuration of a run. */
int pb_report_timeline(FILE *f, const char *db_path, int64_t run_id, const char *config, char *err,
                       size_t errlen);
/* Measured vs simulated per phase: for each configuration name present in both runs, mean
 * rps, p50 and p99 of the per-second rows within each phase [start, end) seconds. */
int pb_report_vs_sim(FILE *f, const char *db_path, int64_t measured_run, int64_t simulated_run,
                     const double *phase_edges_s, size_t n_phases, char *err, size_t errlen);
/* Writes a gnuplot script + data for the run's timelines and runs gnuplot to make `png`. */
int pb_report_plot(const char *db_path, int64_t run_id, const char *png, char *err, size_t errlen);

/* Writes one soak (`pp-bench soak`) into its own tables, `soak_runs` (one row: the command,
 * shape, verdict) and `soak_phases` (one row per cycle and phase, plus one `end` row per cycle
 * with the settled counts); docs/RESULTS.md has the columns. Unknown values (descriptors,
 * RSS, heap slots the server does not report) are NULL. Migration-safe: tables are created
 * when missing and columns a newer pp-bench added are added to an older database's tables.
 * `flags` is the soak's command line. 0 and *soak_id, or -1 with a message in err. */
int pb_store_soak(const char *db_path, const pb_soak_config *c, const pb_soak_result *r,
                  const char *flags, int64_t *soak_id, char *err, size_t errlen);

/* Writes one `pp-bench compare` into its own tables (docs/RESULTS.md has the columns):
 * compare_runs (one row: flags, shape of the run, tools, load average), compare_servers (per
 * server: its version and the first command line it ran with), compare_results (one row per
 * round x shape x server, ran or not, errors kept) and compare_medians (per shape x server:
 * median, min and max of every metric over the rounds that ran). Latencies in ms, CPU in us
 * per request, NULL = not measured (threads for falcon, the front end's share for servers
 * other than pumaplus). Migration-safe as pb_store_soak. 0 and *compare_id, or -1 with a
 * message in err. */
int pb_store_compare(const char *db_path, const pb_compare_config *c, const pb_compare_result *r,
                     const char *flags, int64_t *compare_id, char *err, size_t errlen);

/* The latest run id of `kind` ("measured", "simulated"), or -1. */
int64_t pb_store_latest_run(const char *db_path, const char *kind);

#endif
