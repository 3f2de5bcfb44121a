/* One `pp-bench soak` into its own tables, soak_runs and soak_phases (store.h, docs/RESULTS.md
 * for the columns). */
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
    pb_store__bind_i64_known(st, i++, fds_end, fds_end >= 0);
    i++;
    pb_store__bind_i64_known(st, i++, (int64_t)rss_end, rss_end > 0);
    i++;
    pb_store__bind_i64_known(st, i++, heap, heap >= 0);
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
    pb_store__bind_i64_known(st, i++, p->fds_end, p->fds_end >= 0);
    pb_store__bind_i64_known(st, i++, p->fds_max, p->fds_max >= 0);
    pb_store__bind_i64_known(st, i++, (int64_t)p->rss_end, p->rss_end > 0);
    pb_store__bind_i64_known(st, i++, (int64_t)p->rss_max, p->rss_max > 0);
    pb_store__bind_i64_known(st, i++, p->heap_live_slots, p->heap_live_slots >= 0);
    sqlite3_bind_text(st, i++, p->transport_causes, -1, SQLITE_STATIC);
    pb_store__bind_i64_known(st, i++, p->server_shed, p->server_shed >= 0);
    pb_store__bind_i64_known(st, i++, p->server_left_queued, p->server_left_queued >= 0);
    pb_store__bind_i64_known(st, i++, p->server_left_running, p->server_left_running >= 0);
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
  if (rc == 0) rc = pb_store__ensure_columns(db, "soak_runs", soak_run_columns, N_RUN_COLS);
  if (rc == 0) rc = pb_store__ensure_columns(db, "soak_phases", soak_phase_columns, N_PHASE_COLS);
  if (rc == 0) {
    run = pb_store__prepare_insert(db, "soak_runs", "soak_id", 1, soak_run_columns, N_RUN_COLS);
    ph = pb_store__prepare_insert(db, "soak_phases", "soak_id, cycle, phase", 3, soak_phase_columns,
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
    pb_store__bind_text_or_null(run, i++, flags);
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
    pb_store__bind_i64_known(run, i++, r->fds_baseline, r->fds_baseline >= 0);
    pb_store__bind_i64_known(run, i++, (int64_t)r->rss_baseline, r->rss_baseline > 0);
    pb_store__bind_i64_known(run, i++, r->heap_baseline, r->heap_baseline >= 0);
    sqlite3_bind_int64(run, i++, c->fd_tolerance);
    sqlite3_bind_int(run, i++, r->fds_flat);
    sqlite3_bind_int64(run, i++, (int64_t)r->requests);
    sqlite3_bind_int64(run, i++, (int64_t)r->failures);
    sqlite3_bind_int64(run, i++, (int64_t)r->transport_errors);
    sqlite3_bind_int(run, i++, r->passed);
    pb_store__bind_text_or_null(run, i++, r->error[0] ? r->error : NULL);
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
