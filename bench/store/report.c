/* `pp-bench report` (store.h): the comparison table, one configuration's per-second table,
 * measured against simulated per phase, and the gnuplot figure, all read back from SQLite. */
#include "bench/store/store.h"
#include "bench/store/store_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

static int open_ro(const char *path, sqlite3 **db, char *err, size_t errlen) {
  if (access(path, R_OK) != 0) {
    snprintf(err, errlen, "%s: no such database", path);
    return -1;
  }
  if (sqlite3_open_v2(path, db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
    snprintf(err, errlen, "%s: %s", path, sqlite3_errmsg(*db));
    sqlite3_close(*db);
    return -1;
  }
  return 0;
}

int64_t pb_store_latest_run(const char *db_path, const char *kind) {
  sqlite3 *db;
  char err[64];
  if (open_ro(db_path, &db, err, sizeof err)) return -1;
  sqlite3_stmt *st;
  int64_t id = -1;
  if (sqlite3_prepare_v2(db, "SELECT max(run_id) FROM runs WHERE kind = ?", -1, &st, NULL) ==
      SQLITE_OK) {
    sqlite3_bind_text(st, 1, kind, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
      id = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return id;
}

static const char *fmt_ms(sqlite3_stmt *st, int col, char *buf, size_t len) {
  if (sqlite3_column_type(st, col) == SQLITE_NULL) return "(n/a)";
  return pb_fmt_ns((uint64_t)(sqlite3_column_double(st, col) * 1e6), buf, len);
}

static bool has_side_table(sqlite3 *db) {
  sqlite3_stmt *st;
  bool yes = false;
  if (sqlite3_prepare_v2(db, "SELECT 1 FROM sqlite_master WHERE name = 'bench_measure'", -1, &st,
                         NULL) == SQLITE_OK) {
    yes = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
  }
  return yes;
}

int pb_report_table(FILE *f, const char *db_path, int64_t run_id, char *err, size_t errlen) {
  sqlite3 *db;
  if (open_ro(db_path, &db, err, errlen)) return -1;
  sqlite3_stmt *st;
  const char *side = has_side_table(db) ? "LEFT JOIN bench_measure b USING (config_id)" : "";
  char sql[1400];
  snprintf(sql, sizeof sql,
           "SELECT r.run_id, r.kind, r.scenario, r.seed, r.duration_s, r.created_at, c.name,"
           " c.server, c.workers, c.threads, c.autoscale, s.offered_rps, s.achieved_rps,"
           " s.p50_ms, s.p99_ms, s.p999_ms, s.excess_latency_ms, s.shed, s.timed_out, s.errors,"
           " s.avg_workers, s.avg_memory_bytes, %s, %s"
           " FROM runs r JOIN configs c USING (run_id) LEFT JOIN summary s USING (config_id) %s"
           " WHERE r.run_id = ? ORDER BY c.config_id",
           side[0] ? "b.check_ok" : "NULL", side[0] ? "coalesce(b.error, b.check_reason)" : "NULL",
           side);
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
    snprintf(err, errlen, "%s: %s", db_path, sqlite3_errmsg(db));
    sqlite3_close(db);
    return -1;
  }
  sqlite3_bind_int64(st, 1, run_id);
  int rows = 0;
  while (sqlite3_step(st) == SQLITE_ROW) {
    char a[32], b[32], c[32], d[32], e[32];
    if (rows++ == 0) {
      fprintf(f, "run %" PRId64 " (%s) scenario %s seed %" PRId64 ", %.0fs, %s\n",
              (int64_t)sqlite3_column_int64(st, 0), sqlite3_column_text(st, 1),
              sqlite3_column_text(st, 2), (int64_t)sqlite3_column_int64(st, 3),
              sqlite3_column_double(st, 4), sqlite3_column_text(st, 5));
      fprintf(f, "%-22s %-16s %8s %8s %9s %9s %9s %10s %6s %6s %6s %6s %7s\n", "config", "server",
              "offered", "rps", "p50", "p99", "p99.9", "excess", "shed", "tmo", "err", "avg_w",
              "avg_MB");
    }
    char shape[48];
    snprintf(shape, sizeof shape, "%s %dx%d%s", sqlite3_column_text(st, 7),
             sqlite3_column_int(st, 8), sqlite3_column_int(st, 9),
             sqlite3_column_int(st, 10) ? " auto" : "");
    if (sqlite3_column_type(st, 11) == SQLITE_NULL) {
      const unsigned char *why = sqlite3_column_text(st, 23);
      fprintf(f, "%-22s %-16s did not run: %s\n", sqlite3_column_text(st, 6), shape,
              why ? (const char *)why : "unknown");
      continue;
    }
    char rps[32];
    double ach = sqlite3_column_double(st, 12);
    if (sqlite3_column_type(st, 12) == SQLITE_NULL || ach < 0)
      snprintf(rps, sizeof rps, "FAILED");
    else
      snprintf(rps, sizeof rps, "%.1f", ach);
    double excess = sqlite3_column_double(st, 16) * 1e6;
    fprintf(f, "%-22s %-16s %8.1f %8s %9s %9s %9s %10s %6d %6d %6d %6.2f %7.0f\n",
            sqlite3_column_text(st, 6), shape, sqlite3_column_double(st, 11), rps,
            fmt_ms(st, 13, a, sizeof a), fmt_ms(st, 14, b, sizeof b), fmt_ms(st, 15, c, sizeof c),
            pb_fmt_ns((uint64_t)excess, d, sizeof d), sqlite3_column_int(st, 17),
            sqlite3_column_int(st, 18), sqlite3_column_int(st, 19), sqlite3_column_double(st, 20),
            sqlite3_column_double(st, 21) / 1048576.0);
    (void)e;
    if (sqlite3_column_type(st, 22) != SQLITE_NULL && !sqlite3_column_int(st, 22))
      fprintf(f, "%-22s   check failed: %s\n", "", sqlite3_column_text(st, 23));
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  if (!rows) {
    snprintf(err, errlen, "%s: no run %" PRId64, db_path, run_id);
    return -1;
  }
  return 0;
}

int pb_report_timeline(FILE *f, const char *db_path, int64_t run_id, const char *config, char *err,
                       size_t errlen) {
  sqlite3 *db;
  if (open_ro(db_path, &db, err, errlen)) return -1;
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db,
                         "SELECT t.t_s, t.arrivals, t.rps, t.p50_ms, t.p99_ms, t.workers,"
                         " t.memory_bytes, t.queue_p95_ms, t.shed, t.timeouts, r.kind"
                         " FROM timeline t JOIN configs c USING (config_id) JOIN runs r USING"
                         " (run_id) WHERE r.run_id = ? AND c.name = ? ORDER BY t.t_s",
                         -1, &st, NULL) != SQLITE_OK) {
    snprintf(err, errlen, "%s: %s", db_path, sqlite3_errmsg(db));
    sqlite3_close(db);
    return -1;
  }
  sqlite3_bind_int64(st, 1, run_id);
  sqlite3_bind_text(st, 2, config, -1, SQLITE_STATIC);
  int rows = 0;
  while (sqlite3_step(st) == SQLITE_ROW) {
    char a[32], b[32], q[32];
    if (rows++ == 0)
      fprintf(f, "%5s %8s %8s %10s %10s %7s %8s %10s %6s %6s\n", "t", "offered", "rps", "p50",
              "p99", "workers", "mem_MB", "queue_p95", "shed", "tmo");
    if (sqlite3_column_type(st, 7) == SQLITE_NULL)
      snprintf(q, sizeof q, "(n/a)");
    else
      snprintf(q, sizeof q, "%.1fms", sqlite3_column_double(st, 7));
    fprintf(f, "%4ds %8d %8.0f %10s %10s %7d %8.1f %10s %6d %6d\n", sqlite3_column_int(st, 0),
            sqlite3_column_int(st, 1), sqlite3_column_double(st, 2), fmt_ms(st, 3, a, sizeof a),
            fmt_ms(st, 4, b, sizeof b), sqlite3_column_int(st, 5),
            sqlite3_column_double(st, 6) / 1048576.0, q, sqlite3_column_int(st, 8),
            sqlite3_column_int(st, 9));
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  if (!rows) {
    snprintf(err, errlen, "run %" PRId64 " has no timeline for config '%s'", run_id, config);
    return -1;
  }
  return 0;
}

/* Mean rps, and the median across seconds of per-second p50 and p99, in [lo, hi) seconds. */
static bool phase_stats(sqlite3 *db, int64_t run_id, const char *config, double lo, double hi,
                        double *rps, double *p50, double *p99) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db,
                         "SELECT avg(t.rps), avg(t.p50_ms), max(t.p99_ms) FROM timeline t JOIN"
                         " configs c USING (config_id) WHERE c.run_id = ? AND c.name = ? AND"
                         " t.t_s >= ? AND t.t_s < ?",
                         -1, &st, NULL) != SQLITE_OK)
    return false;
  sqlite3_bind_int64(st, 1, run_id);
  sqlite3_bind_text(st, 2, config, -1, SQLITE_STATIC);
  sqlite3_bind_double(st, 3, lo);
  sqlite3_bind_double(st, 4, hi);
  bool ok = sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL;
  if (ok) {
    *rps = sqlite3_column_double(st, 0);
    *p50 = sqlite3_column_type(st, 1) == SQLITE_NULL ? -1 : sqlite3_column_double(st, 1);
    *p99 = sqlite3_column_type(st, 2) == SQLITE_NULL ? -1 : sqlite3_column_double(st, 2);
  }
  sqlite3_finalize(st);
  return ok;
}

int pb_report_vs_sim(FILE *f, const char *db_path, int64_t measured_run, int64_t simulated_run,
                     const double *edges, size_t n_phases, char *err, size_t errlen) {
  sqlite3 *db;
  if (open_ro(db_path, &db, err, errlen)) return -1;
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db,
                         "SELECT name FROM configs WHERE run_id = ? AND name IN (SELECT name FROM"
                         " configs WHERE run_id = ?) ORDER BY config_id",
                         -1, &st, NULL) != SQLITE_OK) {
    snprintf(err, errlen, "%s: %s", db_path, sqlite3_errmsg(db));
    sqlite3_close(db);
    return -1;
  }
  sqlite3_bind_int64(st, 1, measured_run);
  sqlite3_bind_int64(st, 2, simulated_run);
  fprintf(f,
          "measured run %" PRId64 " vs simulated run %" PRId64
          " per phase (rps: mean per second; p50: mean of per-second p50; p99: worst second)\n",
          measured_run, simulated_run);
  fprintf(f, "%-22s %-14s %9s %9s %10s %10s %10s %10s\n", "config", "phase", "rps sim", "rps real",
          "p50 sim", "p50 real", "p99 sim", "p99 real");
  int configs = 0;
  while (sqlite3_step(st) == SQLITE_ROW) {
    const char *name = (const char *)sqlite3_column_text(st, 0);
    configs++;
    for (size_t p = 0; p < n_phases; p++) {
      double r1 = 0, a1 = -1, b1 = -1, r2 = 0, a2 = -1, b2 = -1;
      bool s_ok = phase_stats(db, simulated_run, name, edges[p], edges[p + 1], &r1, &a1, &b1);
      bool m_ok = phase_stats(db, measured_run, name, edges[p], edges[p + 1], &r2, &a2, &b2);
      char ph[32], x1[32], x2[32], y1[32], y2[32];
      snprintf(ph, sizeof ph, "%zu [%.0f,%.0f)s", p + 1, edges[p], edges[p + 1]);
#define MSF(v, buf) ((v) < 0 ? "-" : pb_fmt_ns((uint64_t)((v)*1e6), buf, sizeof buf))
      fprintf(f, "%-22s %-14s %9.1f %9.1f %10s %10s %10s %10s\n", name, ph, s_ok ? r1 : 0,
              m_ok ? r2 : 0, MSF(a1, x1), MSF(a2, x2), MSF(b1, y1), MSF(b2, y2));
#undef MSF
    }
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  if (!configs) {
    snprintf(err, errlen, "runs %" PRId64 " and %" PRId64 " share no configuration name",
             measured_run, simulated_run);
    return -1;
  }
  return 0;
}

int pb_report_plot(const char *db_path, int64_t run_id, const char *png, char *err, size_t errlen) {
  sqlite3 *db;
  if (open_ro(db_path, &db, err, errlen)) return -1;
  char dat[600], gp[600];
  snprintf(dat, sizeof dat, "%s.dat", png);
  snprintf(gp, sizeof gp, "%s.gp", png);
  FILE *d = fopen(dat, "w");
  if (!d) {
    snprintf(err, errlen, "cannot write %s", dat);
    sqlite3_close(db);
    return -1;
  }
  sqlite3_stmt *st;
  sqlite3_prepare_v2(db,
                     "SELECT c.name, t.t_s, t.rps, coalesce(t.p50_ms, 0/0.0), coalesce(t.p99_ms,"
                     " 0/0.0), t.workers, coalesce(t.queue_p95_ms, -1) FROM timeline t JOIN"
                     " configs c USING (config_id) WHERE c.run_id = ? ORDER BY c.config_id, t.t_s",
                     -1, &st, NULL);
  sqlite3_bind_int64(st, 1, run_id);
  char names[16][64];
  int n_names = 0;
  while (sqlite3_step(st) == SQLITE_ROW) {
    const char *name = (const char *)sqlite3_column_text(st, 0);
    if (n_names == 0 || strcmp(names[n_names - 1], name) != 0) {
      if (n_names == 16) break;
      if (n_names) fprintf(d, "\n\n");
      snprintf(names[n_names++], 64, "%s", name);
      fprintf(d, "# %s\n", name);
    }
    double p50 = sqlite3_column_type(st, 3) == SQLITE_NULL ? -1 : sqlite3_column_double(st, 3);
    double p99 = sqlite3_column_type(st, 4) == SQLITE_NULL ? -1 : sqlite3_column_double(st, 4);
    char p50s[32] = "NaN", p99s[32] = "NaN";
    if (p50 >= 0) snprintf(p50s, sizeof p50s, "%.3f", p50);
    if (p99 >= 0) snprintf(p99s, sizeof p99s, "%.3f", p99);
    fprintf(d, "%d %.1f %s %s %d %.3f\n", sqlite3_column_int(st, 1), sqlite3_column_double(st, 2),
            p50s, p99s, sqlite3_column_int(st, 5), sqlite3_column_double(st, 6));
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  fclose(d);
  if (!n_names) {
    snprintf(err, errlen, "run %" PRId64 " has no timeline", run_id);
    return -1;
  }
  FILE *g = fopen(gp, "w");
  if (!g) {
    snprintf(err, errlen, "cannot write %s", gp);
    return -1;
  }
  fprintf(g,
          "set terminal pngcairo size 1200,900\nset output '%s'\nset multiplot layout 3,1\n"
          "set key outside right\nset grid\nset xlabel 't (s)'\n",
          png);
  const char *panels[3][2] = {
      {"3", "p50 latency (ms, log)"}, {"2", "completed rps"}, {"5", "workers"}};
  for (int p = 0; p < 3; p++) {
    fprintf(g, "set ylabel '%s'\n%s", panels[p][1],
            p == 0 ? "set logscale y\n" : "unset logscale y\n");
    fprintf(g, "plot ");
    for (int i = 0; i < n_names; i++)
      fprintf(g, "%s'%s' index %d using 1:%s with lines lw 2 title '%s'", i ? ", " : "", dat, i,
              panels[p][0], names[i]);
    fprintf(g, "\n");
  }
  fprintf(g, "unset multiplot\n");
  fclose(g);
  char cmd[1400];
  snprintf(cmd, sizeof cmd, "gnuplot '%s'", gp);
  if (system(cmd) != 0) {
    snprintf(err, errlen, "gnuplot failed on %s", gp);
    return -1;
  }
  return 0;
}
