/* `pp-bench run` (every configuration of a scenario, measured, into SQLite), `schedule` (the
 * arrival schedule's count and digest, as pp-sim's) and `report` (the comparison table, a
 * timeline, the figure, measured against simulated). */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>
#include <uv.h>

#include "bench/compare/compare.h"
#include "bench/gen/gen.h"
#include "bench/refsrv/nullsrv.h"
#include "bench/run/plan.h"
#include "bench/run/run.h"
#include "bench/store/store.h"
#include "sim/scenario_file.h"
#include "bench/gen/schedule.h"
#include "bench/soak/soak.h"
#include "bench/run/stats.h"

#include "bench/cli/cli.h"

static bool selected(const char *only, const char *name) {
  if (!only) return true;
  size_t len = strlen(name);
  for (const char *p = only; *p;) {
    const char *comma = strchr(p, ',');
    size_t n = comma ? (size_t)(comma - p) : strlen(p);
    if (n == len && strncmp(p, name, n) == 0) return true;
    if (!comma) break;
    p = comma + 1;
  }
  return false;
}

static int load_scenario(const char *path, pp_scenario *scn) {
  pp_scn_error e;
  memset(&e, 0, sizeof e);
  pp_scenario_defaults(scn);
  if (pp_scenario_load(scn, path, &e) != 0) {
    char buf[1024];
    fprintf(stderr, "pp-bench: %s\n", pp_scn_error_format(&e, buf, sizeof buf));
    pp_scenario_dispose(scn);
    return -1;
  }
  return 0;
}

static int run_scenario_path(const char *db, int64_t run_id, char *out, size_t len);

/* pp-bench run scenario.yaml: every configuration in turn, then the comparison table. */
int cmd_run(const char *path, opts *o) {
  if (o->proto == PB_PROTO_H3) o->tls = false; /* QUIC always carries TLS 1.3 */
  if (o->tls) {
    fprintf(stderr, "pp-bench run: -tls is not supported: the harness starts its servers without "
                    "TLS (use smoke -url HOST:PORT -tls against a TLS server)\n");
    return 2;
  }
  pp_scenario scn;
  if (load_scenario(path, &scn) < 0) return 2;
  uint64_t seed = o->seed_set ? o->seed : scn.seed;
  pb_schedule sched;
  uint64_t digest = 0;
  if (pb_plan_schedule(&scn, seed, &sched, &digest) < 0) {
    fprintf(stderr, "pp-bench: cannot build the schedule of %s\n", path);
    pp_scenario_dispose(&scn);
    return 2;
  }
  printf("scenario %s: %zu arrivals over %.1fs, seed %" PRIu64 ", schedule digest %016" PRIx64 "\n",
         scn.name, sched.count, scn.duration_ns / 1e9, seed, digest);
  char dir[512];
  pb_dirname(path, dir, sizeof dir);
  const char *log_dir = o->log_dir ? o->log_dir : "/tmp";
  pb_config_result *res = calloc(scn.n_configs ? scn.n_configs : 1, sizeof *res);
  size_t n = 0;
  uint64_t phase_end[PP_SCN_MAX_PHASES];
  for (uint32_t p = 0; p < scn.n_phases; p++)
    phase_end[p] = (p ? phase_end[p - 1] : 0) + scn.phases[p].duration_ns;
  int rc = 0;
  for (uint32_t i = 0; i < scn.n_configs; i++) {
    if (!selected(o->only, scn.configs[i].name)) continue;
    pb_server_spec spec;
    char err[512];
    if (pb_plan_server(&scn, i, o->app ? o->app : PB_DEFAULT_APP, dir, log_dir, &spec, err,
                       sizeof err) < 0) {
      fprintf(stderr, "pp-bench: %s\n", err);
      rc = 2;
      continue;
    }
    cli_default_binaries(&spec);
    spec.h2c = o->proto == PB_PROTO_H2;
    spec.h3 = o->proto == PB_PROTO_H3;
    spec.port = pb_free_port();
    spec.stats_port = pb_free_port();
    pb_run_options ro;
    memset(&ro, 0, sizeof ro);
    ro.timeout_ns = scn.client_timeout_ns;
    ro.max_connections = o->conns;
    ro.warmup_ns = o->warmup_ns ? o->warmup_ns : 3000000000ull;
    ro.warmup_rate = scn.n_phases ? scn.phases[0].rate : 10;
    if (ro.warmup_rate > 100) ro.warmup_rate = 100;
    ro.warmup_path = scn.n_kinds ? scn.kinds[0].path : "/hello";
    ro.max_error_ratio = o->max_errors;
    ro.stats_path = "/stats";
    ro.log_dir = log_dir;
    ro.phase_end_ns = phase_end;
    ro.running_pgid = &cli_running_pgid;
    ro.n_phases = scn.n_phases;
    ro.proto = o->proto;
    ro.h2_connections = o->h2_conns;
    pb_run_config(&spec, &sched, &ro, &res[n]);
    if (!res[n].ran) {
      fprintf(stderr, "pp-bench: %s: %s\n", spec.name, res[n].error);
      rc = 1;
    } else {
      pb_summary_print(stdout, spec.name, &res[n].summary);
      pb_transport_print(stdout, &res[n]);
      if (res[n].spec.decision_log[0])
        printf("  decision log: %s (pp-replay --explain reads it)\n", res[n].spec.decision_log);
      if (o->timeline) pb_rows_print(stdout, res[n].rows, res[n].n_rows);
      if (!res[n].summary.check_ok) rc = 1;
    }
    fflush(stdout);
    n++;
  }
  const char *db = o->db ? o->db : "results.db";
  int64_t run_id = -1;
  char err[512] = "";
  char notes[160];
  snprintf(notes, sizeof notes, "schedule digest %016" PRIx64, digest);
  pb_store_run sr = {.scenario = scn.name,
                     .scenario_path = path,
                     .seed = seed,
                     .duration_s = scn.duration_ns / 1e9,
                     .slo_ns = scn.slo_ns,
                     .notes = notes};
  if (n && pb_store_write(db, &sr, res, n, &run_id, err, sizeof err) < 0) {
    fprintf(stderr, "pp-bench: results not stored: %s\n", err);
    rc = 2;
  } else if (n) {
    printf("\nstored as run %" PRId64 " in %s\n", run_id, db);
    if (pb_report_table(stdout, db, run_id, err, sizeof err) < 0)
      fprintf(stderr, "pp-bench: %s\n", err);
  }
  for (size_t i = 0; i < n; i++)
    pb_config_result_dispose(&res[i]);
  free(res);
  pb_schedule_dispose(&sched);
  pp_scenario_dispose(&scn);
  return rc;
}

/* pp-bench schedule scenario.yaml: what `run` would send (count and digest, as pp-sim
 * schedule prints them), optionally every arrival. */
int cmd_schedule(const char *path, opts *o) {
  pp_scenario scn;
  if (load_scenario(path, &scn) < 0) return 2;
  uint64_t seed = o->seed_set ? o->seed : scn.seed;
  pb_schedule sched;
  if (pb_plan_schedule(&scn, seed, &sched, NULL) < 0) {
    fprintf(stderr, "pp-bench: cannot build the schedule of %s\n", path);
    pp_scenario_dispose(&scn);
    return 2;
  }
  if (o->timeline) /* -timeline doubles as "list every arrival" here */
    for (size_t i = 0; i < sched.count; i++)
      printf("%zu %" PRIu64 " %u %s\n", i, sched.arrivals[i].intended_ns, sched.arrivals[i].kind,
             sched.paths[sched.arrivals[i].kind]);
  printf("# %zu arrivals, digest %016" PRIx64 "\n", sched.count, pb_schedule_digest(&sched));
  pb_schedule_dispose(&sched);
  pp_scenario_dispose(&scn);
  return 0;
}

int cmd_report(const char *which, opts *o) {
  const char *db = o->db ? o->db : "results.db";
  int64_t run_id = -1;
  if (!which || strcmp(which, "latest") == 0)
    run_id = pb_store_latest_run(db, "measured");
  else
    run_id = strtoll(which, NULL, 10);
  if (run_id < 0) {
    fprintf(stderr, "pp-bench: %s: no measured run\n", db);
    return 2;
  }
  char err[512] = "";
  if (o->timeline_config) {
    if (pb_report_timeline(stdout, db, run_id, o->timeline_config, err, sizeof err) < 0) {
      fprintf(stderr, "pp-bench: %s\n", err);
      return 2;
    }
    return 0;
  }
  if (pb_report_table(stdout, db, run_id, err, sizeof err) < 0) {
    fprintf(stderr, "pp-bench: %s\n", err);
    return 2;
  }
  if (o->plot) {
    if (pb_report_plot(db, run_id, o->plot, err, sizeof err) < 0) {
      fprintf(stderr, "pp-bench: %s\n", err);
      return 2;
    }
    printf("plot: %s\n", o->plot);
  }
  if (o->vs_sim) {
    char scenario[1024];
    if (run_scenario_path(db, run_id, scenario, sizeof scenario) < 0) {
      fprintf(stderr, "pp-bench: run %" PRId64 " has no scenario path\n", run_id);
      return 2;
    }
    pp_scenario scn;
    if (load_scenario(scenario, &scn) < 0) return 2;
    int64_t sim_run;
    if (strcmp(o->vs_sim, "run") == 0) {
      /* Simulate the same scenario now, into the same database. */
      char cmd[2048];
      snprintf(cmd, sizeof cmd, "'%s' run '%s' --db '%s' > /dev/null", PB_PPSIM, scenario, db);
      if (system(cmd) != 0) {
        fprintf(stderr, "pp-bench: pp-sim failed: %s\n", cmd);
        pp_scenario_dispose(&scn);
        return 2;
      }
      sim_run = pb_store_latest_run(db, "simulated");
    } else {
      sim_run = strtoll(o->vs_sim, NULL, 10);
    }
    double edges[PP_SCN_MAX_PHASES + 1];
    edges[0] = 0;
    for (uint32_t p = 0; p < scn.n_phases; p++)
      edges[p + 1] = edges[p] + scn.phases[p].duration_ns / 1e9;
    int rc = pb_report_vs_sim(stdout, db, run_id, sim_run, edges, scn.n_phases, err, sizeof err);
    pp_scenario_dispose(&scn);
    if (rc < 0) {
      fprintf(stderr, "pp-bench: %s\n", err);
      return 2;
    }
  }
  return 0;
}

static int run_scenario_path(const char *db, int64_t run_id, char *out, size_t len) {
  sqlite3 *s3;
  if (sqlite3_open_v2(db, &s3, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
    sqlite3_close(s3);
    return -1;
  }
  sqlite3_stmt *st;
  int rc = -1;
  if (sqlite3_prepare_v2(s3, "SELECT scenario_path FROM runs WHERE run_id = ?", -1, &st, NULL) ==
      SQLITE_OK) {
    sqlite3_bind_int64(st, 1, run_id);
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0)) {
      snprintf(out, len, "%s", (const char *)sqlite3_column_text(st, 0));
      rc = 0;
    }
    sqlite3_finalize(st);
  }
  sqlite3_close(s3);
  return rc;
}
