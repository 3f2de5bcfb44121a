/* A measured run into the shared SQLite schema (store.h): the runs, configs, summary and timeline
 * rows through the simulator's helpers, and pp-bench's side tables (bench_measure, bench_memory)
 * with what only a measurement has. Also the conversion of one configuration's results into the
 * schema's records. */
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
  pb_store__bind_text_or_null(st, i++, r->ran ? NULL : r->error);
  if (r->ran) {
    sqlite3_bind_int(st, i++, m->check_ok);
    pb_store__bind_text_or_null(st, i++, m->check_ok ? NULL : m->check_reason);
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
  pb_store__bind_text_or_null(st, i++, cmd);
  pb_store__bind_text_or_null(st, i++,
                              r->ran && m->conn_error_causes[0] ? m->conn_error_causes : NULL);
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
    pb_store__bind_text_or_null(st, i++, any ? recent : NULL);
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
 * reported and stores nothing. A log that holds more than one run (a server appended to a log
 * an earlier run left: the ticks start again) is stored up to the end of its first run, and
 * the rest is reported, not stored: the ticks of two runs would collide in the table and
 * refuse the whole run. Returns 0, or -1 when the database refuses a row. */
static int add_decisions(pp_results_db *db, int64_t config_id, const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "pp-bench: decision log %s: %s (no decisions stored)\n", path, strerror(errno));
    return 0;
  }
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  long lineno = 0, ticks = 0;
  uint64_t last_tick = 0;
  int rc = 0;
  while (rc == 0 && (len = getline(&line, &cap, f)) > 0) {
    lineno++;
    /* Headers also come within one run (a reload, a policy change): not a run boundary. */
    if (pp_declog_line_kind(line, (size_t)len) == PP_DECLOG_KIND_HEADER) continue;
    pp_declog_record rec;
    pp_declog_error derr;
    if (pp_declog_decode(&rec, line, (size_t)len, lineno, &derr) != 0) {
      fprintf(stderr, "pp-bench: %s:%ld: %s: %s (line skipped)\n", path, lineno, derr.field,
              derr.message);
      continue;
    }
    if (ticks > 0 && rec.tick <= last_tick) {
      fprintf(stderr,
              "pp-bench: %s:%ld: tick %" PRIu64 " after tick %" PRIu64
              ": the log holds another run after this one's %ld ticks (a server appended to an "
              "earlier run's log); only the first run's ticks are stored\n",
              path, lineno, rec.tick, last_tick, ticks);
      break;
    }
    last_tick = rec.tick;
    ticks++;
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
