/* One `pp-bench compare` into its own tables, compare_runs, compare_servers, compare_results and
 * compare_medians (store.h, docs/RESULTS.md for the columns). */
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

/* The compare_runs row: the run's flags and shape, the tools, the load average, and counts. */
static int insert_run(sqlite3_stmt *run, const pb_compare_config *c, const pb_compare_result *r,
                      const char *flags) {
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
  char now[32];
  time_t t = time(NULL);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(now, sizeof now, "%Y-%m-%dT%H:%M:%SZ", &tm);
  int i = 1;
  sqlite3_bind_null(run, i++);
  sqlite3_bind_text(run, i++, now, -1, SQLITE_TRANSIENT);
  pb_store__bind_text_or_null(run, i++, flags);
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
  pb_store__bind_i64_known(run, i++, c->steal_retries, steal_on);
  pb_store__bind_i64_known(run, i++, over_steal, steal_on);
  return sqlite3_step(run) == SQLITE_DONE ? 0 : -1;
}

/* One compare_servers row: server `s`'s label, version and first command line. */
static int insert_server(sqlite3_stmt *srv, int64_t id, const pb_compare_config *c,
                         const pb_compare_result *r, size_t s) {
  int i = 1;
  sqlite3_reset(srv);
  sqlite3_clear_bindings(srv);
  sqlite3_bind_int64(srv, i++, id);
  sqlite3_bind_text(srv, i++, pb_cmp_label(c, s), -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(srv, i++, (int64_t)s + 1);
  sqlite3_bind_text(srv, i++, r->versions[s], -1, SQLITE_TRANSIENT);
  pb_store__bind_text_or_null(srv, i++, r->commands[s][0] ? r->commands[s] : NULL);
  sqlite3_bind_int(srv, i++, c->servers[s] != PB_CMP_FALCON);
  sqlite3_bind_text(srv, i++, pb_cmp_server_name(c->servers[s]), -1, SQLITE_STATIC);
  pb_store__bind_text_or_null(srv, i++, c->server_dirs[s][0] ? c->server_dirs[s] : NULL);
  return sqlite3_step(srv) == SQLITE_DONE ? 0 : -1;
}

/* One compare_results row: cell `x` (round x shape x server), ran or not, errors kept. */
static int insert_result(sqlite3_stmt *res, int64_t id, const pb_compare_config *c,
                         const pb_cmp_cell *x) {
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
  pb_store__bind_i64_known(res, i++, sh->threads, !falcon);
  sqlite3_bind_int64(res, i++, x->order);
  sqlite3_bind_int(res, i++, x->ran);
  pb_store__bind_text_or_null(res, i++, x->error[0] ? x->error : NULL);
  pb_store__bind_text_or_null(res, i++, x->note[0] ? x->note : NULL);
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
  pb_store__bind_text_or_null(res, i++, x->open_error[0] ? x->open_error : NULL);
  sqlite3_bind_int(res, i++, x->ran ? x->has_errors : 1);
  pb_store__bind_text_or_null(res, i++, x->answer[0] ? x->answer : NULL);
  bind_known(res, i++, x->ran ? x->steal_pct : -1, 1);
  bind_known(res, i++, x->open_ran ? x->open_steal_pct : -1, 1);
  sqlite3_bind_int64(res, i++, x->attempts ? x->attempts : 1);
  sqlite3_bind_int64(res, i++, x->attempt ? x->attempt : 1);
  pb_store__bind_i64_known(res, i++, x->steal_over, c->max_steal_pct > 0);
  return sqlite3_step(res) == SQLITE_DONE ? 0 : -1;
}

/* One compare_medians row: median, min and max of every metric of one shape x server. */
static int insert_median(sqlite3_stmt *mst, int64_t id, const pb_compare_config *c,
                         const pb_cmp_median *m) {
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
  pb_store__bind_i64_known(mst, i++, sh->threads, c->servers[m->server] != PB_CMP_FALCON);
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
  return sqlite3_step(mst) == SQLITE_DONE ? 0 : -1;
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
  if (rc == 0)
    rc = pb_store__ensure_columns(db, "compare_runs", compare_run_columns, N_CMP_RUN_COLS);
  if (rc == 0)
    rc = pb_store__ensure_columns(db, "compare_servers", compare_server_columns, N_CMP_SERVER_COLS);
  if (rc == 0)
    rc = pb_store__ensure_columns(db, "compare_results", compare_result_columns, N_CMP_RESULT_COLS);
  if (rc == 0)
    rc = pb_store__ensure_columns(db, "compare_medians", (const char *const(*)[2])median_cols,
                                  N_CMP_MEDIAN_COLS);
  if (rc == 0) {
    run = pb_store__prepare_insert(db, "compare_runs", "compare_id", 1, compare_run_columns,
                                   N_CMP_RUN_COLS);
    srv = pb_store__prepare_insert(db, "compare_servers", "compare_id, server", 2,
                                   compare_server_columns, N_CMP_SERVER_COLS);
    res = pb_store__prepare_insert(db, "compare_results", "compare_id, round, shape, server", 4,
                                   compare_result_columns, N_CMP_RESULT_COLS);
    mst = pb_store__prepare_insert(db, "compare_medians", "compare_id, shape, server", 3,
                                   (const char *const(*)[2])median_cols, N_CMP_MEDIAN_COLS);
    if (!run || !srv || !res || !mst) rc = -1;
  }
  if (rc == 0) rc = insert_run(run, c, r, flags);
  int64_t id = sqlite3_last_insert_rowid(db);
  for (size_t s = 0; rc == 0 && s < c->n_servers; s++)
    rc = insert_server(srv, id, c, r, s);
  for (size_t k = 0; rc == 0 && k < r->n_cells; k++)
    rc = insert_result(res, id, c, &r->cells[k]);
  for (size_t k = 0; rc == 0 && k < n_med; k++)
    rc = insert_median(mst, id, c, &med[k]);
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
