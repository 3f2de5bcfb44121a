/* Measured results in SQLite, and the reports read back from it (store.h). */
#include "bench/store/store.h"

#include <errno.h>
#include <stdio.h>

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "control/control.h"

static const char side_schema[] =
    "CREATE TABLE IF NOT EXISTS bench_measure (\n"
    "  config_id INTEGER PRIMARY KEY REFERENCES configs(config_id),\n"
    "  ran INTEGER NOT NULL, error TEXT,\n"
    "  check_ok INTEGER, check_reason TEXT,\n"
    "  http_errors INTEGER, conn_errors INTEGER,\n"
    "  pacer_p50_ms REAL, pacer_p99_ms REAL, pacer_max_ms REAL, send_p99_ms REAL,\n"
    "  connections INTEGER, server_cmd TEXT, conn_error_causes TEXT,\n"
    "  protocol TEXT NOT NULL DEFAULT 'h1',\n"
    "  memory_source TEXT, avg_rss_bytes REAL, avg_pss_bytes REAL, avg_uss_bytes REAL,\n"
    "  activations INTEGER, activation_p50_ms REAL, activation_p99_ms REAL,\n"
    "  activation_max_ms REAL, activation_recent_ms TEXT);\n"
    "CREATE TABLE IF NOT EXISTS bench_memory (\n"
    "  config_id INTEGER NOT NULL REFERENCES configs(config_id), t_s INTEGER NOT NULL,\n"
    "  rss_bytes INTEGER, pss_bytes INTEGER, uss_bytes INTEGER, workers_parked INTEGER,\n"
    "  PRIMARY KEY (config_id, t_s));\n";

/* Whether every sampled second of the run has the tree's PSS (smaps_rollup readable). */
static bool rows_have_pss(const pb_config_result *r) {
  bool any = false;
  for (size_t k = 0; k < r->n_rows; k++) {
    if (!r->rows[k].procs) continue;
    if (!r->rows[k].pss_bytes) return false;
    any = true;
  }
  return any;
}

/* Workers from what the harness saw: /stats when it reports them, else the process tree
 * minus the processes that are not workers (puma: the master; puma-plus: server + shepherd). */
static double row_workers(const pb_config_result *r, const pb_row *row) {
  if (row->workers >= 0) return row->workers;
  if (row->procs == 0) return -1;
  uint32_t overhead = r->spec.kind == PB_SERVER_PUMA ? 1 : 2;
  if (r->spec.kind == PB_SERVER_PUMA && r->spec.workers == 0) overhead = 0;
  return row->procs > overhead ? row->procs - overhead : 0;
}

void pb_store_convert(const pb_config_result *r, double duration_s, uint64_t slo_ns, pp_summary *s,
                      pp_timeline_row *rows) {
  memset(s, 0, sizeof *s);
  const pb_summary *m = &r->summary;
  uint64_t dur_ns = (uint64_t)(duration_s * 1e9);
  s->duration_s = duration_s;
  s->requests = m->offered;
  s->completed = m->outcomes[PB_OK];
  s->shed = m->outcomes[PB_SHED];
  s->timed_out = m->outcomes[PB_TIMEOUT];
  s->errors = m->outcomes[PB_HTTP_ERROR] + m->outcomes[PB_CONN_ERROR];
  s->unfinished = m->outcomes[PB_PENDING];
  double excess = 0;
  for (size_t i = 0; i < r->n; i++) {
    const pb_result *x = &r->results[i];
    uint64_t lat = 0;
    if (x->outcome == PB_OK) {
      lat = x->done_ns - x->intended_ns;
      if (x->done_ns <= dur_ns) s->completed_in_run++;
    } else if (x->outcome == PB_TIMEOUT) {
      lat = m->timeout_ns;
    }
    if (lat > slo_ns) excess += (double)(lat - slo_ns);
  }
  s->offered_rps = duration_s > 0 ? m->offered / duration_s : 0;
  s->achieved_rps = m->check_ok && duration_s > 0 ? s->completed_in_run / duration_s : -1;
  const pp_hist *h = &m->latency;
  bool any = h->count > 0;
  s->p50_ns = any ? (double)pp_hist_percentile(h, 50) : -1;
  s->p90_ns = any ? (double)pp_hist_percentile(h, 90) : -1;
  s->p99_ns = any ? (double)pp_hist_percentile(h, 99) : -1;
  s->p999_ns = any ? (double)pp_hist_percentile(h, 99.9) : -1;
  s->max_ns = any ? (double)h->max_ns : -1;
  s->mean_ns = any ? (double)pp_hist_mean(h) : -1;
  s->excess_latency_ns = excess;
  s->queue_p95_ns = r->queue_p95_lifetime_ms >= 0 ? r->queue_p95_lifetime_ms * 1e6 : -1;
  s->queue_mean_ns = -1;
  double wsum = 0, msum = 0;
  size_t wn = 0, mn = 0;
  double qmax = -1;
  /* Memory is the sum of PSS over the tree when smaps_rollup gave it for every sample (RSS
   * counts each copy-on-write page once per worker), else RSS; bench_measure says which. */
  bool pss = rows_have_pss(r);
  for (size_t k = 0; k < r->n_rows; k++) {
    const pb_row *row = &r->rows[k];
    pp_timeline_row *t = &rows[k];
    memset(t, 0, sizeof *t);
    t->t_s = row->client.t;
    t->arrivals = row->client.offered;
    t->completed = row->client.ok;
    t->p50_ns = row->client.ok ? (double)row->client.p50_ns : -1;
    t->p99_ns = row->client.ok ? (double)row->client.p99_ns : -1;
    double w = row_workers(r, row);
    t->workers = w >= 0 ? (uint32_t)w : 0;
    t->workers_ready = t->workers;
    t->queue_p95_ns = row->queue_p95_ms >= 0 ? row->queue_p95_ms * 1e6 : -1;
    t->queue_len = row->queue_depth >= 0 ? (int64_t)row->queue_depth : -1;
    t->shed = row->client.shed;
    t->timeouts = row->client.timeouts;
    double mem = pss ? (double)row->pss_bytes : (double)row->rss_bytes;
    t->memory_bytes = mem;
    if (row->queue_p95_ms > qmax) qmax = row->queue_p95_ms;
    /* Averages over the scenario's duration only, where the server was sampled. */
    if (row->procs && row->client.t < duration_s) {
      if (w >= 0) {
        wsum += w;
        wn++;
        if ((uint32_t)w > s->peak_workers) s->peak_workers = (uint32_t)w;
      }
      msum += mem;
      mn++;
      if (mem > s->peak_memory_bytes) s->peak_memory_bytes = mem;
    }
  }
  s->avg_workers = wn ? wsum / wn : 0;
  s->avg_memory_bytes = mn ? msum / mn : 0;
  s->worker_seconds = s->avg_workers * duration_s;
}

static void bind_text_or_null(sqlite3_stmt *st, int i, const char *s) {
  if (s)
    sqlite3_bind_text(st, i, s, -1, SQLITE_TRANSIENT);
  else
    sqlite3_bind_null(st, i);
}

/* Adds `column` (its declaration `decl`) to bench_measure when an older database lacks it. */
static int add_side_column(sqlite3 *db, const char *column, const char *decl) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, "SELECT 1 FROM pragma_table_info('bench_measure') WHERE name = ?", -1,
                         &st, NULL) != SQLITE_OK)
    return -1;
  sqlite3_bind_text(st, 1, column, -1, SQLITE_STATIC);
  bool have = sqlite3_step(st) == SQLITE_ROW;
  sqlite3_finalize(st);
  if (have) return 0;
  char sql[256];
  snprintf(sql, sizeof sql, "ALTER TABLE bench_measure ADD COLUMN %s %s", column, decl);
  return sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : -1;
}

/* Databases written before a column existed get it added: conn_error_causes, then protocol
 * (rows measured before pp-bench spoke h2 or TLS were HTTP/1.1 in cleartext: 'h1'). The
 * INSERT below names its columns, so the physical order does not matter. */
static int upgrade_side(sqlite3 *db) {
  if (add_side_column(db, "conn_error_causes", "TEXT") < 0) return -1;
  if (add_side_column(db, "protocol", "TEXT NOT NULL DEFAULT 'h1'") < 0) return -1;
  const char *mem[] = {
      "memory_source",     "TEXT", "avg_rss_bytes",     "REAL",    "avg_pss_bytes",        "REAL",
      "avg_uss_bytes",     "REAL", "activations",       "INTEGER", "activation_p50_ms",    "REAL",
      "activation_p99_ms", "REAL", "activation_max_ms", "REAL",    "activation_recent_ms", "TEXT"};
  for (size_t i = 0; i < sizeof mem / sizeof mem[0]; i += 2)
    if (add_side_column(db, mem[i], mem[i + 1]) < 0) return -1;
  return 0;
}

/* Time-averages over the scenario's sampled seconds, as the summary's avg_memory_bytes. */
static void avg_memory(const pb_config_result *r, double duration_s, double *rss, double *pss,
                       double *uss) {
  double sr = 0, sp = 0, su = 0;
  size_t n = 0;
  for (size_t k = 0; k < r->n_rows; k++) {
    const pb_row *row = &r->rows[k];
    if (!row->procs || row->client.t >= duration_s) continue;
    sr += (double)row->rss_bytes;
    sp += (double)row->pss_bytes;
    su += (double)row->uss_bytes;
    n++;
  }
  *rss = n ? sr / n : -1;
  *pss = n ? sp / n : -1;
  *uss = n ? su / n : -1;
}

/* One bench_memory row per sampled second. */
static int write_memory(sqlite3 *db, int64_t config_id, const pb_config_result *r) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(
          db,
          "INSERT OR REPLACE INTO bench_memory (config_id, t_s, rss_bytes, pss_bytes,"
          " uss_bytes, workers_parked) VALUES (?,?,?,?,?,?)",
          -1, &st, NULL) != SQLITE_OK)
    return -1;
  int rc = 0;
  for (size_t k = 0; k < r->n_rows && rc == 0; k++) {
    const pb_row *row = &r->rows[k];
    if (!row->procs) continue;
    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, config_id);
    sqlite3_bind_int64(st, 2, (sqlite3_int64)row->client.t);
    sqlite3_bind_int64(st, 3, (sqlite3_int64)row->rss_bytes);
    if (row->pss_bytes) {
      sqlite3_bind_int64(st, 4, (sqlite3_int64)row->pss_bytes);
      sqlite3_bind_int64(st, 5, (sqlite3_int64)row->uss_bytes);
    } else {
      sqlite3_bind_null(st, 4);
      sqlite3_bind_null(st, 5);
    }
    if (row->workers_parked >= 0)
      sqlite3_bind_int64(st, 6, (sqlite3_int64)row->workers_parked);
    else
      sqlite3_bind_null(st, 6);
    if (sqlite3_step(st) != SQLITE_DONE) rc = -1;
  }
  sqlite3_finalize(st);
  return rc;
}

static int write_side(sqlite3 *db, int64_t config_id, const pb_config_result *r,
                      double duration_s) {
  char cmd[2048] = "";
  char *argv[40];
  char storage[4096];
  int argc = pb_server_argv(&r->spec, argv, 40, storage, sizeof storage);
  for (int i = 0; i < argc; i++) {
    size_t len = strlen(cmd);
    snprintf(cmd + len, sizeof cmd - len, "%s%s", i ? " " : "", argv[i]);
  }
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(
          db,
          "INSERT OR REPLACE INTO bench_measure (config_id, ran, error, check_ok, check_reason,"
          " http_errors, conn_errors, pacer_p50_ms, pacer_p99_ms, pacer_max_ms, send_p99_ms,"
          " connections, server_cmd, conn_error_causes, protocol, memory_source, avg_rss_bytes,"
          " avg_pss_bytes, avg_uss_bytes, activations, activation_p50_ms, activation_p99_ms,"
          " activation_max_ms, activation_recent_ms)"
          " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
          -1, &st, NULL) != SQLITE_OK)
    return -1;
  const pb_summary *m = &r->summary;
  int i = 1;
  sqlite3_bind_int64(st, i++, config_id);
  sqlite3_bind_int(st, i++, r->ran);
  bind_text_or_null(st, i++, r->ran ? NULL : r->error);
  if (r->ran) {
    sqlite3_bind_int(st, i++, m->check_ok);
    bind_text_or_null(st, i++, m->check_ok ? NULL : m->check_reason);
    sqlite3_bind_int64(st, i++, (sqlite3_int64)m->outcomes[PB_HTTP_ERROR]);
    sqlite3_bind_int64(st, i++, (sqlite3_int64)m->outcomes[PB_CONN_ERROR]);
    sqlite3_bind_double(st, i++, pp_hist_percentile(&m->pacer_lateness, 50) / 1e6);
    sqlite3_bind_double(st, i++, pp_hist_percentile(&m->pacer_lateness, 99) / 1e6);
    sqlite3_bind_double(st, i++, m->pacer_lateness.max_ns / 1e6);
    sqlite3_bind_double(st, i++, pp_hist_percentile(&m->send_lateness, 99) / 1e6);
    sqlite3_bind_int64(st, i++, (sqlite3_int64)m->conns_opened);
  } else {
    for (int k = 0; k < 9; k++)
      sqlite3_bind_null(st, i++);
  }
  bind_text_or_null(st, i++, cmd);
  bind_text_or_null(st, i++, r->ran && m->conn_error_causes[0] ? m->conn_error_causes : NULL);
  sqlite3_bind_text(st, i++, r->protocol[0] ? r->protocol : "h1", -1, SQLITE_TRANSIENT);
  double rss, pss, uss;
  avg_memory(r, duration_s, &rss, &pss, &uss);
  bool have_pss = rows_have_pss(r);
  if (r->ran && rss >= 0) {
    sqlite3_bind_text(st, i++, have_pss ? "pss" : "rss", -1, SQLITE_STATIC);
    sqlite3_bind_double(st, i++, rss);
    if (have_pss) {
      sqlite3_bind_double(st, i++, pss);
      sqlite3_bind_double(st, i++, uss);
    } else {
      sqlite3_bind_null(st, i++);
      sqlite3_bind_null(st, i++);
    }
  } else {
    for (int k = 0; k < 4; k++)
      sqlite3_bind_null(st, i++);
  }
  /* Standby activations from the last /stats (docs/SERVER.md controller.activation). */
  const pb_server_stats *ls = &r->last_stats;
  if (r->ran && ls->activations >= 0) {
    sqlite3_bind_int64(st, i++, (sqlite3_int64)ls->activations);
    bool any = ls->activation_count > 0;
    if (any) {
      sqlite3_bind_double(st, i++, ls->activation_p50_ms);
      sqlite3_bind_double(st, i++, ls->activation_p99_ms);
      sqlite3_bind_double(st, i++, ls->activation_max_ms);
    } else {
      for (int k = 0; k < 3; k++)
        sqlite3_bind_null(st, i++);
    }
    char recent[32 * 16] = "";
    for (uint32_t k = 0; k < ls->activation_recent_n; k++) {
      size_t len = strlen(recent);
      snprintf(recent + len, sizeof recent - len, "%s%.3f", k ? " " : "",
               ls->activation_recent_ms[k]);
    }
    bind_text_or_null(st, i++, any ? recent : NULL);
  } else {
    for (int k = 0; k < 5; k++)
      sqlite3_bind_null(st, i++);
  }
  int rc = sqlite3_step(st) == SQLITE_DONE ? 0 : -1;
  sqlite3_finalize(st);
  if (rc == 0 && r->ran) rc = write_memory(db, config_id, r);
  return rc;
}

/* Stores an autoscaling server's decision log (JSONL, docs/CONTROL.md) in the decisions table,
 * one row per tick line, as pp-sim does for simulated runs. Header lines are skipped. A line
 * that does not decode (a server stopped mid-write leaves a truncated last line) is reported on
 * stderr with its line number and skipped: the other ticks are still stored. A missing log is
 * reported and stores nothing. Returns 0, or -1 when the database refuses a row. */
static int add_decisions(pp_results_db *db, int64_t config_id, const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "pp-bench: decision log %s: %s (no decisions stored)\n", path, strerror(errno));
    return 0;
  }
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  long lineno = 0;
  int rc = 0;
  while (rc == 0 && (len = getline(&line, &cap, f)) > 0) {
    lineno++;
    if (pp_declog_line_kind(line, (size_t)len) == PP_DECLOG_KIND_HEADER) continue;
    pp_declog_record rec;
    pp_declog_error derr;
    if (pp_declog_decode(&rec, line, (size_t)len, lineno, &derr) != 0) {
      fprintf(stderr, "pp-bench: %s:%ld: %s: %s (line skipped)\n", path, lineno, derr.field,
              derr.message);
      continue;
    }
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
      line[--len] = '\0';
    rc = pp_results_add_decision(db, config_id, rec.tick, rec.time_ns,
                                 pp_action_name(rec.decision.action), rec.decision.count,
                                 rec.decision.workers_target, rec.decision.reason, line);
  }
  free(line);
  fclose(f);
  return rc == 0 ? 0 : -1;
}

int pb_store_write(const char *db_path, const pb_store_run *run, const pb_config_result *configs,
                   size_t n, int64_t *run_id, char *err, size_t errlen) {
  pp_results_db *db;
  if (pp_results_open(&db, db_path, err, errlen) != 0) return -1;
  char created[32];
  time_t now = time(NULL);
  strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
  pp_results_run rr = {.kind = "measured",
                       .tool = "pp-bench",
                       .scenario = run->scenario,
                       .scenario_path = run->scenario_path,
                       .seed = run->seed,
                       .duration_s = run->duration_s,
                       .created_at = created,
                       .notes = run->notes};
  int64_t *ids = calloc(n ? n : 1, sizeof *ids);
  int rc = ids ? pp_results_begin(db) : -1;
  if (rc == 0) rc = pp_results_add_run(db, &rr, run_id);
  for (size_t i = 0; rc == 0 && i < n; i++) {
    const pb_config_result *r = &configs[i];
    pp_results_config c = {.name = r->spec.name,
                           .server = r->spec.kind == PB_SERVER_PUMA ? "puma" : "pumaplus",
                           .queue_model = r->spec.kind == PB_SERVER_PUMA ? "per_worker" : "fifo",
                           .workers = r->spec.workers,
                           .threads = r->spec.threads,
                           .autoscale = r->spec.autoscale};
    rc = pp_results_add_config(db, *run_id, &c, &ids[i]);
    if (rc || !r->ran) continue;
    pp_summary s;
    pp_timeline_row *rows = calloc(r->n_rows ? r->n_rows : 1, sizeof *rows);
    if (!rows) {
      rc = -1;
      break;
    }
    pb_store_convert(r, run->duration_s, run->slo_ns, &s, rows);
    rc = pp_results_add_summary(db, ids[i], &s);
    if (rc == 0) rc = pp_results_add_timeline(db, ids[i], rows, r->n_rows);
    if (rc == 0 && r->spec.decision_log[0]) rc = add_decisions(db, ids[i], r->spec.decision_log);
    free(rows);
  }
  if (rc == 0) rc = pp_results_commit(db);
  if (rc != 0) snprintf(err, errlen, "%s: %s", db_path, pp_results_errmsg(db));
  pp_results_close(db);
  if (rc == 0) {
    /* The side table, through a second connection (the results handle is opaque). */
    sqlite3 *s3;
    if (sqlite3_open(db_path, &s3) != SQLITE_OK ||
        sqlite3_exec(s3, side_schema, NULL, NULL, NULL) != SQLITE_OK || upgrade_side(s3) != 0) {
      snprintf(err, errlen, "%s: %s", db_path, sqlite3_errmsg(s3));
      rc = -1;
    }
    for (size_t i = 0; rc == 0 && i < n; i++)
      rc = write_side(s3, ids[i], &configs[i], run->duration_s);
    if (rc != 0 && !err[0]) snprintf(err, errlen, "%s: %s", db_path, sqlite3_errmsg(s3));
    sqlite3_close(s3);
  }
  free(ids);
  return rc == 0 ? 0 : -1;
}

/* ---- reports ---- */

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

/* ---- soak ---- */

/* Columns beyond the keys, in the order the INSERTs bind them. A database from an older
 * pp-bench gets the columns it lacks (ALTER TABLE ... ADD COLUMN), so each list only grows. */
static const char *const soak_run_columns[][2] = {
    {"created_at", "TEXT"},       {"server", "TEXT"},
    {"server_cmd", "TEXT"},       {"flags", "TEXT"},
    {"protocol", "TEXT"},         {"workers", "INTEGER"},
    {"threads", "INTEGER"},       {"shed", "INTEGER"},
    {"cycles", "INTEGER"},        {"cycles_ran", "INTEGER"},
    {"capacity_rps", "REAL"},     {"capacity_estimated", "INTEGER"},
    {"overload_x", "REAL"},       {"steady_rps", "REAL"},
    {"fds_baseline", "INTEGER"},  {"rss_baseline_bytes", "INTEGER"},
    {"heap_baseline", "INTEGER"}, {"fd_tolerance", "INTEGER"},
    {"fds_flat", "INTEGER"},      {"requests", "INTEGER"},
    {"failures", "INTEGER"},      {"transport_errors", "INTEGER"},
    {"passed", "INTEGER"},        {"error", "TEXT"},
    {"wall_s", "REAL"},
};
static const char *const soak_phase_columns[][2] = {
    {"requests", "INTEGER"},
    {"ok", "INTEGER"},
    {"status_503", "INTEGER"},
    {"status_413", "INTEGER"},
    {"status_other", "INTEGER"},
    {"transport_errors", "INTEGER"},
    {"timeouts", "INTEGER"},
    {"cancelled", "INTEGER"},
    {"failures", "INTEGER"},
    {"p99_ok_ms", "REAL"},
    {"p99_503_ms", "REAL"},
    {"duration_s", "REAL"},
    {"fds_end", "INTEGER"},
    {"fds_max", "INTEGER"},
    {"rss_end_bytes", "INTEGER"},
    {"rss_max_bytes", "INTEGER"},
    {"heap_live_slots", "INTEGER"},
    {"transport_causes", "TEXT"},
    {"server_shed", "INTEGER"},
    {"server_left_queued", "INTEGER"},
    {"server_left_running", "INTEGER"},
    {"steal_pct", "REAL"},
};
#define N_RUN_COLS   (sizeof soak_run_columns / sizeof soak_run_columns[0])
#define N_PHASE_COLS (sizeof soak_phase_columns / sizeof soak_phase_columns[0])

static int ensure_columns(sqlite3 *db, const char *table, const char *const (*cols)[2], size_t n) {
  for (size_t i = 0; i < n; i++) {
    sqlite3_stmt *st;
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT 1 FROM pragma_table_info('%s') WHERE name = ?", table);
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) return -1;
    sqlite3_bind_text(st, 1, cols[i][0], -1, SQLITE_STATIC);
    bool have = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    if (have) continue;
    snprintf(sql, sizeof sql, "ALTER TABLE %s ADD COLUMN %s %s", table, cols[i][0], cols[i][1]);
    if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK) return -1;
  }
  return 0;
}

static sqlite3_stmt *prepare_insert(sqlite3 *db, const char *table, const char *keys, int n_keys,
                                    const char *const (*cols)[2], size_t n) {
  char sql[2048];
  int len = snprintf(sql, sizeof sql, "INSERT INTO %s (%s", table, keys);
  for (size_t i = 0; i < n; i++)
    len += snprintf(sql + len, sizeof sql - (size_t)len, ", %s", cols[i][0]);
  len += snprintf(sql + len, sizeof sql - (size_t)len, ") VALUES (");
  for (size_t i = 0; i < n + (size_t)n_keys; i++)
    len += snprintf(sql + len, sizeof sql - (size_t)len, "%s?", i ? ", " : "");
  snprintf(sql + len, sizeof sql - (size_t)len, ")");
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) return NULL;
  return st;
}

static void bind_i64_known(sqlite3_stmt *st, int i, int64_t v, bool known) {
  if (known)
    sqlite3_bind_int64(st, i, v);
  else
    sqlite3_bind_null(st, i);
}

static void bind_ms(sqlite3_stmt *st, int i, double ms) {
  if (ms >= 0)
    sqlite3_bind_double(st, i, ms);
  else
    sqlite3_bind_null(st, i);
}

static int insert_phase(sqlite3_stmt *st, int64_t soak_id, uint32_t cycle, const char *phase,
                        const pb_soak_phase *p, int32_t fds_end, uint64_t rss_end, int64_t heap,
                        bool is_end) {
  int i = 1;
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  sqlite3_bind_int64(st, i++, soak_id);
  sqlite3_bind_int64(st, i++, cycle);
  sqlite3_bind_text(st, i++, phase, -1, SQLITE_STATIC);
  if (is_end) {
    i += 12; /* counts and latencies are per phase: NULL on the end row */
    bind_i64_known(st, i++, fds_end, fds_end >= 0);
    i++;
    bind_i64_known(st, i++, (int64_t)rss_end, rss_end > 0);
    i++;
    bind_i64_known(st, i++, heap, heap >= 0);
  } else {
    sqlite3_bind_int64(st, i++, (int64_t)p->requests);
    sqlite3_bind_int64(st, i++, (int64_t)p->ok);
    sqlite3_bind_int64(st, i++, (int64_t)p->shed_503);
    sqlite3_bind_int64(st, i++, (int64_t)p->too_large_413);
    sqlite3_bind_int64(st, i++, (int64_t)p->other_status);
    sqlite3_bind_int64(st, i++, (int64_t)p->transport_errors);
    sqlite3_bind_int64(st, i++, (int64_t)p->timeouts);
    sqlite3_bind_int64(st, i++, (int64_t)p->cancelled);
    sqlite3_bind_int64(st, i++, (int64_t)p->failures);
    bind_ms(st, i++, p->p99_ok_ms);
    bind_ms(st, i++, p->p99_503_ms);
    sqlite3_bind_double(st, i++, p->duration_s);
    bind_i64_known(st, i++, p->fds_end, p->fds_end >= 0);
    bind_i64_known(st, i++, p->fds_max, p->fds_max >= 0);
    bind_i64_known(st, i++, (int64_t)p->rss_end, p->rss_end > 0);
    bind_i64_known(st, i++, (int64_t)p->rss_max, p->rss_max > 0);
    bind_i64_known(st, i++, p->heap_live_slots, p->heap_live_slots >= 0);
    sqlite3_bind_text(st, i++, p->transport_causes, -1, SQLITE_STATIC);
    bind_i64_known(st, i++, p->server_shed, p->server_shed >= 0);
    bind_i64_known(st, i++, p->server_left_queued, p->server_left_queued >= 0);
    bind_i64_known(st, i++, p->server_left_running, p->server_left_running >= 0);
    bind_ms(st, i++, p->steal_pct); /* -1 (unknown) is NULL, as for the latencies */
  }
  return sqlite3_step(st) == SQLITE_DONE ? 0 : -1;
}

int pb_store_soak(const char *db_path, const pb_soak_config *c, const pb_soak_result *r,
                  const char *flags, int64_t *soak_id, char *err, size_t errlen) {
  sqlite3 *db;
  if (sqlite3_open(db_path, &db) != SQLITE_OK) {
    snprintf(err, errlen, "%s: %s", db_path, sqlite3_errmsg(db));
    sqlite3_close(db);
    return -1;
  }
  sqlite3_busy_timeout(db, 5000);
  sqlite3_stmt *run = NULL, *ph = NULL;
  int rc = sqlite3_exec(db,
                        "BEGIN;"
                        "CREATE TABLE IF NOT EXISTS soak_runs (soak_id INTEGER PRIMARY KEY);"
                        "CREATE TABLE IF NOT EXISTS soak_phases ("
                        "  soak_id INTEGER NOT NULL REFERENCES soak_runs(soak_id),"
                        "  cycle INTEGER NOT NULL, phase TEXT NOT NULL,"
                        "  PRIMARY KEY (soak_id, cycle, phase));",
                        NULL, NULL, NULL) == SQLITE_OK
               ? 0
               : -1;
  if (rc == 0) rc = ensure_columns(db, "soak_runs", soak_run_columns, N_RUN_COLS);
  if (rc == 0) rc = ensure_columns(db, "soak_phases", soak_phase_columns, N_PHASE_COLS);
  if (rc == 0) {
    run = prepare_insert(db, "soak_runs", "soak_id", 1, soak_run_columns, N_RUN_COLS);
    ph = prepare_insert(db, "soak_phases", "soak_id, cycle, phase", 3, soak_phase_columns,
                        N_PHASE_COLS);
    if (!run || !ph) rc = -1;
  }
  if (rc == 0) {
    char now[32];
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(now, sizeof now, "%Y-%m-%dT%H:%M:%SZ", &tm);
    const char *server = c->spec.kind == PB_SERVER_PUMA       ? "puma"
                         : c->spec.kind == PB_SERVER_PUMAPLUS ? "pumaplus"
                                                              : "null";
    int i = 1;
    sqlite3_bind_null(run, i++); /* soak_id: a new rowid */
    sqlite3_bind_text(run, i++, now, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(run, i++, server, -1, SQLITE_STATIC);
    sqlite3_bind_text(run, i++, r->server_cmd, -1, SQLITE_STATIC);
    bind_text_or_null(run, i++, flags);
    sqlite3_bind_text(run, i++, r->protocol, -1, SQLITE_STATIC);
    sqlite3_bind_int64(run, i++, c->spec.workers);
    sqlite3_bind_int64(run, i++, c->spec.threads);
    sqlite3_bind_int(run, i++, c->spec.shed);
    sqlite3_bind_int64(run, i++, c->cycles);
    sqlite3_bind_int64(run, i++, r->n_cycles);
    sqlite3_bind_double(run, i++, r->capacity_rps);
    sqlite3_bind_int(run, i++, r->capacity_estimated);
    sqlite3_bind_double(run, i++, c->overload_x);
    sqlite3_bind_double(run, i++, c->steady_rps);
    bind_i64_known(run, i++, r->fds_baseline, r->fds_baseline >= 0);
    bind_i64_known(run, i++, (int64_t)r->rss_baseline, r->rss_baseline > 0);
    bind_i64_known(run, i++, r->heap_baseline, r->heap_baseline >= 0);
    sqlite3_bind_int64(run, i++, c->fd_tolerance);
    sqlite3_bind_int(run, i++, r->fds_flat);
    sqlite3_bind_int64(run, i++, (int64_t)r->requests);
    sqlite3_bind_int64(run, i++, (int64_t)r->failures);
    sqlite3_bind_int64(run, i++, (int64_t)r->transport_errors);
    sqlite3_bind_int(run, i++, r->passed);
    bind_text_or_null(run, i++, r->error[0] ? r->error : NULL);
    sqlite3_bind_double(run, i++, r->wall_s);
    rc = sqlite3_step(run) == SQLITE_DONE ? 0 : -1;
  }
  int64_t id = sqlite3_last_insert_rowid(db);
  for (uint32_t cy = 0; rc == 0 && cy < r->n_cycles; cy++) {
    const pb_soak_cycle *cyc = &r->cycles[cy];
    for (int p = 0; rc == 0 && p < PB_SOAK_PHASES; p++)
      rc = insert_phase(ph, id, cy + 1, pb_soak_phase_name(p), &cyc->phase[p], 0, 0, 0, false);
    if (rc == 0)
      rc = insert_phase(ph, id, cy + 1, "end", NULL, cyc->fds_end, cyc->rss_end,
                        cyc->heap_live_slots, true);
  }
  if (rc == 0 && sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) rc = -1;
  if (rc != 0) {
    snprintf(err, errlen, "%s: %s", db_path, sqlite3_errmsg(db));
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
  }
  sqlite3_finalize(run);
  sqlite3_finalize(ph);
  sqlite3_close(db);
  if (rc == 0 && soak_id) *soak_id = id;
  return rc;
}

/* ---- compare ---- */

/* Columns beyond the keys, in the order pb_store_compare binds them; like the soak tables,
 * an older database gets the columns it lacks. */
static const char *const compare_run_columns[][2] = {
    {"created_at", "TEXT"},
    {"flags", "TEXT"},
    {"servers", "TEXT"},
    {"shapes", "TEXT"},
    {"rounds", "INTEGER"},
    {"dur_s", "REAL"},
    {"warmup_s", "REAL"},
    {"conns", "INTEGER"},
    {"path", "TEXT"},
    {"app", "TEXT"},
    {"open_rate", "REAL"},
    {"open_dur_s", "REAL"},
    {"closed_loop_tool", "TEXT"},
    {"ruby", "TEXT"},
    {"cpus", "INTEGER"},
    {"loadavg_start", "REAL"},
    {"loadavg_end", "REAL"},
    {"wall_s", "REAL"},
    {"cells", "INTEGER"},
    {"cells_failed", "INTEGER"},
    {"cells_with_errors", "INTEGER"},
    {"max_steal_pct", "REAL"},
    {"steal_retries", "INTEGER"},
    {"cells_over_steal", "INTEGER"},
};
static const char *const compare_server_columns[][2] = {
    {"position", "INTEGER"},      {"version", "TEXT"}, {"command", "TEXT"},
    {"threads_apply", "INTEGER"}, {"kind", "TEXT"},    {"dir", "TEXT"},
};
static const char *const compare_result_columns[][2] = {
    {"workers", "INTEGER"},
    {"threads", "INTEGER"},
    {"run_order", "INTEGER"},
    {"ran", "INTEGER"},
    {"error", "TEXT"},
    {"note", "TEXT"},
    {"requests", "INTEGER"},
    {"duration_s", "REAL"},
    {"rps", "REAL"},
    {"p50_ms", "REAL"},
    {"p99_ms", "REAL"},
    {"non2xx", "INTEGER"},
    {"sock_connect", "INTEGER"},
    {"sock_read", "INTEGER"},
    {"sock_write", "INTEGER"},
    {"sock_timeout", "INTEGER"},
    {"procs", "INTEGER"},
    {"cpu_us_per_req", "REAL"},
    {"frontend_us_per_req", "REAL"},
    {"ruby_us_per_req", "REAL"},
    {"open_rate", "REAL"},
    {"open_offered", "INTEGER"},
    {"open_ok", "INTEGER"},
    {"open_shed", "INTEGER"},
    {"open_http_errors", "INTEGER"},
    {"open_conn_errors", "INTEGER"},
    {"open_timeouts", "INTEGER"},
    {"open_achieved_rps", "REAL"},
    {"open_p50_ms", "REAL"},
    {"open_p99_ms", "REAL"},
    {"open_p999_ms", "REAL"},
    {"open_error", "TEXT"},
    {"has_errors", "INTEGER"},
    {"answer", "TEXT"},
    {"steal_pct", "REAL"},
    {"open_steal_pct", "REAL"},
    {"attempts", "INTEGER"},
    {"kept_attempt", "INTEGER"},
    {"steal_over", "INTEGER"},
};
#define N_CMP_RUN_COLS    (sizeof compare_run_columns / sizeof compare_run_columns[0])
#define N_CMP_SERVER_COLS (sizeof compare_server_columns / sizeof compare_server_columns[0])
#define N_CMP_RESULT_COLS (sizeof compare_result_columns / sizeof compare_result_columns[0])
#define N_CMP_MEDIAN_HEAD 5
#define N_CMP_MEDIAN_COLS (N_CMP_MEDIAN_HEAD + 3 * PB_CMP_N_METRICS)

/* A value that is -1 when unknown: NULL then. `scale` converts units (us -> ms). */
static void bind_known(sqlite3_stmt *st, int i, double v, double scale) {
  if (v >= 0)
    sqlite3_bind_double(st, i, v * scale);
  else
    sqlite3_bind_null(st, i);
}

/* Latency metrics are kept in us in memory and stored in ms (the schema's convention). */
static double metric_scale(int metric) {
  return metric == PB_CMP_P50 || metric == PB_CMP_P99 || metric == PB_CMP_OPEN_P50 ||
                 metric == PB_CMP_OPEN_P99 || metric == PB_CMP_OPEN_P999
             ? 1e-3
             : 1;
}

int pb_store_compare(const char *db_path, const pb_compare_config *c, const pb_compare_result *r,
                     const char *flags, int64_t *compare_id, char *err, size_t errlen) {
  /* compare_medians' columns: the head, then <metric>_med, _min, _max per metric. */
  char median_names[3 * PB_CMP_N_METRICS][48];
  const char *median_cols[N_CMP_MEDIAN_COLS][2] = {{"workers", "INTEGER"},
                                                   {"threads", "INTEGER"},
                                                   {"rounds_ran", "INTEGER"},
                                                   {"rounds_failed", "INTEGER"},
                                                   {"rounds_with_errors", "INTEGER"}};
  static const char *const suffix[3] = {"med", "min", "max"};
  for (int m = 0; m < PB_CMP_N_METRICS; m++)
    for (int k = 0; k < 3; k++) {
      snprintf(median_names[3 * m + k], sizeof median_names[0], "%s_%s", pb_cmp_metric_name(m),
               suffix[k]);
      median_cols[N_CMP_MEDIAN_HEAD + 3 * m + k][0] = median_names[3 * m + k];
      median_cols[N_CMP_MEDIAN_HEAD + 3 * m + k][1] = "REAL";
    }
  size_t n_med = c->n_shapes * c->n_servers;
  pb_cmp_median *med = calloc(n_med ? n_med : 1, sizeof *med);
  if (!med) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  pb_cmp_medians(r->cells, r->n_cells, c->n_shapes, c->n_servers, med);
  sqlite3 *db;
  if (sqlite3_open(db_path, &db) != SQLITE_OK) {
    snprintf(err, errlen, "%s: %s", db_path, sqlite3_errmsg(db));
    sqlite3_close(db);
    free(med);
    return -1;
  }
  sqlite3_busy_timeout(db, 5000);
  sqlite3_stmt *run = NULL, *srv = NULL, *res = NULL, *mst = NULL;
  int rc = sqlite3_exec(db,
                        "BEGIN;"
                        "CREATE TABLE IF NOT EXISTS compare_runs (compare_id INTEGER PRIMARY KEY);"
                        "CREATE TABLE IF NOT EXISTS compare_servers ("
                        "  compare_id INTEGER NOT NULL REFERENCES compare_runs(compare_id),"
                        "  server TEXT NOT NULL, PRIMARY KEY (compare_id, server));"
                        "CREATE TABLE IF NOT EXISTS compare_results ("
                        "  compare_id INTEGER NOT NULL REFERENCES compare_runs(compare_id),"
                        "  round INTEGER NOT NULL, shape TEXT NOT NULL, server TEXT NOT NULL,"
                        "  PRIMARY KEY (compare_id, round, shape, server));"
                        "CREATE TABLE IF NOT EXISTS compare_medians ("
                        "  compare_id INTEGER NOT NULL REFERENCES compare_runs(compare_id),"
                        "  shape TEXT NOT NULL, server TEXT NOT NULL,"
                        "  PRIMARY KEY (compare_id, shape, server));",
                        NULL, NULL, NULL) == SQLITE_OK
               ? 0
               : -1;
  if (rc == 0) rc = ensure_columns(db, "compare_runs", compare_run_columns, N_CMP_RUN_COLS);
  if (rc == 0)
    rc = ensure_columns(db, "compare_servers", compare_server_columns, N_CMP_SERVER_COLS);
  if (rc == 0)
    rc = ensure_columns(db, "compare_results", compare_result_columns, N_CMP_RESULT_COLS);
  if (rc == 0)
    rc = ensure_columns(db, "compare_medians", (const char *const(*)[2])median_cols,
                        N_CMP_MEDIAN_COLS);
  if (rc == 0) {
    run = prepare_insert(db, "compare_runs", "compare_id", 1, compare_run_columns, N_CMP_RUN_COLS);
    srv = prepare_insert(db, "compare_servers", "compare_id, server", 2, compare_server_columns,
                         N_CMP_SERVER_COLS);
    res = prepare_insert(db, "compare_results", "compare_id, round, shape, server", 4,
                         compare_result_columns, N_CMP_RESULT_COLS);
    mst = prepare_insert(db, "compare_medians", "compare_id, shape, server", 3,
                         (const char *const(*)[2])median_cols, N_CMP_MEDIAN_COLS);
    if (!run || !srv || !res || !mst) rc = -1;
  }
  char servers[PB_CMP_MAX_SERVERS * (PB_CMP_MAX_LABEL + 1) + 1] = "", shapes[256] = "";
  for (size_t i = 0; i < c->n_servers; i++) {
    size_t l = strlen(servers);
    snprintf(servers + l, sizeof servers - l, "%s%s", i ? "," : "", pb_cmp_label(c, i));
  }
  for (size_t i = 0; i < c->n_shapes; i++) {
    size_t l = strlen(shapes);
    snprintf(shapes + l, sizeof shapes - l, "%s%ux%u", i ? "," : "", c->shapes[i].workers,
             c->shapes[i].threads);
  }
  uint32_t failed = 0, with_errors = 0, over_steal = 0;
  for (size_t i = 0; i < r->n_cells; i++) {
    if (!r->cells[i].ran) failed++;
    if (r->cells[i].ran && r->cells[i].has_errors) with_errors++;
    over_steal += r->cells[i].steal_over;
  }
  if (rc == 0) {
    char now[32];
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(now, sizeof now, "%Y-%m-%dT%H:%M:%SZ", &tm);
    int i = 1;
    sqlite3_bind_null(run, i++);
    sqlite3_bind_text(run, i++, now, -1, SQLITE_TRANSIENT);
    bind_text_or_null(run, i++, flags);
    sqlite3_bind_text(run, i++, servers, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(run, i++, shapes, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(run, i++, c->rounds);
    sqlite3_bind_double(run, i++, c->dur_ns / 1e9);
    sqlite3_bind_double(run, i++, c->warmup_ns / 1e9);
    sqlite3_bind_int64(run, i++, c->conns);
    sqlite3_bind_text(run, i++, c->path, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(run, i++, c->app, -1, SQLITE_TRANSIENT);
    sqlite3_bind_double(run, i++, c->rate);
    sqlite3_bind_double(run, i++, c->rate_dur_ns / 1e9);
    sqlite3_bind_text(run, i++, r->wrk_version, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(run, i++, r->ruby_version, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(run, i++, sysconf(_SC_NPROCESSORS_ONLN));
    bind_known(run, i++, r->loadavg_start, 1);
    bind_known(run, i++, r->loadavg_end, 1);
    sqlite3_bind_double(run, i++, r->wall_s);
    sqlite3_bind_int64(run, i++, (int64_t)r->n_cells);
    sqlite3_bind_int64(run, i++, failed);
    sqlite3_bind_int64(run, i++, with_errors);
    bool steal_on = c->max_steal_pct > 0; /* -max-steal's columns are NULL without it */
    bind_known(run, i++, steal_on ? c->max_steal_pct : -1, 1);
    bind_i64_known(run, i++, c->steal_retries, steal_on);
    bind_i64_known(run, i++, over_steal, steal_on);
    rc = sqlite3_step(run) == SQLITE_DONE ? 0 : -1;
  }
  int64_t id = sqlite3_last_insert_rowid(db);
  for (size_t s = 0; rc == 0 && s < c->n_servers; s++) {
    int i = 1;
    sqlite3_reset(srv);
    sqlite3_clear_bindings(srv);
    sqlite3_bind_int64(srv, i++, id);
    sqlite3_bind_text(srv, i++, pb_cmp_label(c, s), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(srv, i++, (int64_t)s + 1);
    sqlite3_bind_text(srv, i++, r->versions[s], -1, SQLITE_TRANSIENT);
    bind_text_or_null(srv, i++, r->commands[s][0] ? r->commands[s] : NULL);
    sqlite3_bind_int(srv, i++, c->servers[s] != PB_CMP_FALCON);
    sqlite3_bind_text(srv, i++, pb_cmp_server_name(c->servers[s]), -1, SQLITE_STATIC);
    bind_text_or_null(srv, i++, c->server_dirs[s][0] ? c->server_dirs[s] : NULL);
    rc = sqlite3_step(srv) == SQLITE_DONE ? 0 : -1;
  }
  for (size_t k = 0; rc == 0 && k < r->n_cells; k++) {
    const pb_cmp_cell *x = &r->cells[k];
    const pb_cmp_shape *sh = &c->shapes[x->shape];
    bool falcon = c->servers[x->server] == PB_CMP_FALCON;
    char shape[24];
    snprintf(shape, sizeof shape, "%ux%u", sh->workers, sh->threads);
    int i = 1;
    sqlite3_reset(res);
    sqlite3_clear_bindings(res);
    sqlite3_bind_int64(res, i++, id);
    sqlite3_bind_int64(res, i++, x->round);
    sqlite3_bind_text(res, i++, shape, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(res, i++, pb_cmp_label(c, x->server), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(res, i++, sh->workers);
    bind_i64_known(res, i++, sh->threads, !falcon);
    sqlite3_bind_int64(res, i++, x->order);
    sqlite3_bind_int(res, i++, x->ran);
    bind_text_or_null(res, i++, x->error[0] ? x->error : NULL);
    bind_text_or_null(res, i++, x->note[0] ? x->note : NULL);
    if (x->ran) {
      sqlite3_bind_int64(res, i++, (int64_t)x->wrk.requests);
      sqlite3_bind_double(res, i++, x->wrk.seconds);
      sqlite3_bind_double(res, i++, x->wrk.rps);
      bind_known(res, i++, x->wrk.p50_us, 1e-3);
      bind_known(res, i++, x->wrk.p99_us, 1e-3);
      sqlite3_bind_int64(res, i++, (int64_t)x->wrk.non2xx);
      sqlite3_bind_int64(res, i++, (int64_t)x->wrk.sock_connect);
      sqlite3_bind_int64(res, i++, (int64_t)x->wrk.sock_read);
      sqlite3_bind_int64(res, i++, (int64_t)x->wrk.sock_write);
      sqlite3_bind_int64(res, i++, (int64_t)x->wrk.sock_timeout);
      sqlite3_bind_int64(res, i++, x->procs);
      bind_known(res, i++, x->cpu_us_per_req, 1);
      bind_known(res, i++, x->frontend_us_per_req, 1);
      bind_known(res, i++, x->ruby_us_per_req, 1);
    } else {
      i += 14;
    }
    if (c->rate > 0) sqlite3_bind_double(res, i, c->rate);
    i++;
    if (x->open_ran) {
      sqlite3_bind_int64(res, i++, (int64_t)x->open_offered);
      sqlite3_bind_int64(res, i++, (int64_t)x->open_ok);
      sqlite3_bind_int64(res, i++, (int64_t)x->open_shed);
      sqlite3_bind_int64(res, i++, (int64_t)x->open_http_errors);
      sqlite3_bind_int64(res, i++, (int64_t)x->open_conn_errors);
      sqlite3_bind_int64(res, i++, (int64_t)x->open_timeouts);
      sqlite3_bind_double(res, i++, x->open_achieved_rps);
      bind_known(res, i++, x->open_p50_us, 1e-3);
      bind_known(res, i++, x->open_p99_us, 1e-3);
      bind_known(res, i++, x->open_p999_us, 1e-3);
    } else {
      i += 10;
    }
    bind_text_or_null(res, i++, x->open_error[0] ? x->open_error : NULL);
    sqlite3_bind_int(res, i++, x->ran ? x->has_errors : 1);
    bind_text_or_null(res, i++, x->answer[0] ? x->answer : NULL);
    bind_known(res, i++, x->ran ? x->steal_pct : -1, 1);
    bind_known(res, i++, x->open_ran ? x->open_steal_pct : -1, 1);
    sqlite3_bind_int64(res, i++, x->attempts ? x->attempts : 1);
    sqlite3_bind_int64(res, i++, x->attempt ? x->attempt : 1);
    bind_i64_known(res, i++, x->steal_over, c->max_steal_pct > 0);
    rc = sqlite3_step(res) == SQLITE_DONE ? 0 : -1;
  }
  for (size_t k = 0; rc == 0 && k < n_med; k++) {
    const pb_cmp_median *m = &med[k];
    const pb_cmp_shape *sh = &c->shapes[m->shape];
    char shape[24];
    snprintf(shape, sizeof shape, "%ux%u", sh->workers, sh->threads);
    int i = 1;
    sqlite3_reset(mst);
    sqlite3_clear_bindings(mst);
    sqlite3_bind_int64(mst, i++, id);
    sqlite3_bind_text(mst, i++, shape, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(mst, i++, pb_cmp_label(c, m->server), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(mst, i++, sh->workers);
    bind_i64_known(mst, i++, sh->threads, c->servers[m->server] != PB_CMP_FALCON);
    sqlite3_bind_int64(mst, i++, m->rounds_ran);
    sqlite3_bind_int64(mst, i++, m->rounds_failed);
    sqlite3_bind_int64(mst, i++, m->rounds_with_errors);
    for (int q = 0; q < PB_CMP_N_METRICS; q++) {
      double scale = metric_scale(q);
      const pb_cmp_stat *st = &m->m[q];
      bind_known(mst, i++, st->n ? st->med : -1, scale);
      bind_known(mst, i++, st->n ? st->min : -1, scale);
      bind_known(mst, i++, st->n ? st->max : -1, scale);
    }
    rc = sqlite3_step(mst) == SQLITE_DONE ? 0 : -1;
  }
  if (rc == 0 && sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) rc = -1;
  if (rc != 0) {
    snprintf(err, errlen, "%s: %s", db_path, sqlite3_errmsg(db));
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
  }
  sqlite3_finalize(run);
  sqlite3_finalize(srv);
  sqlite3_finalize(res);
  sqlite3_finalize(mst);
  sqlite3_close(db);
  free(med);
  if (rc == 0 && compare_id) *compare_id = id;
  return rc;
}
