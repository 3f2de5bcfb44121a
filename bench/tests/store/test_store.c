/* bench/store/: the side table's `protocol` column, written for every protocol and added to
 * databases made before it existed (their rows read 'h1', which is what they measured).
 * Unit test: a temporary SQLite file, no sockets, no clocks. */
#include <CUnit/Basic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "bench/store/store.h"
#include "control/control.h"

static char db_path[64];

static void fresh_db(void) {
  snprintf(db_path, sizeof db_path, "/tmp/test_bench_store.%d.db", (int)getpid());
  unlink(db_path);
}

/* One configuration that ran, with `protocol`. */
static void one_config(pb_config_result *r, const char *name, const char *protocol) {
  memset(r, 0, sizeof *r);
  snprintf(r->spec.name, sizeof r->spec.name, "%s", name);
  r->spec.kind = PB_SERVER_PUMAPLUS;
  r->spec.workers = 1;
  r->spec.threads = 1;
  r->ran = true;
  r->queue_p95_lifetime_ms = -1;
  snprintf(r->protocol, sizeof r->protocol, "%s", protocol);
  pp_hist_init(&r->summary.latency);
  pp_hist_init(&r->summary.pacer_lateness);
  pp_hist_init(&r->summary.send_lateness);
}

static int64_t store(const pb_config_result *r, size_t n) {
  pb_store_run run = {.scenario = "t", .seed = 1, .duration_s = 1, .slo_ns = 1000000};
  int64_t id = -1;
  char err[256] = "";
  CU_ASSERT_EQUAL(pb_store_write(db_path, &run, r, n, &id, err, sizeof err), 0);
  if (err[0]) fprintf(stderr, "%s\n", err);
  return id;
}

/* The protocols of the rows, in config order, joined by ','. */
static void protocols(char *out, size_t len) {
  sqlite3 *db;
  sqlite3_stmt *st;
  out[0] = 0;
  CU_ASSERT_FATAL(sqlite3_open(db_path, &db) == SQLITE_OK);
  CU_ASSERT_FATAL(sqlite3_prepare_v2(db, "SELECT protocol FROM bench_measure ORDER BY config_id",
                                     -1, &st, NULL) == SQLITE_OK);
  while (sqlite3_step(st) == SQLITE_ROW) {
    size_t used = strlen(out);
    snprintf(out + used, len - used, "%s%s", used ? "," : "",
             (const char *)sqlite3_column_text(st, 0));
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
}

static void test_protocol_is_stored(void) {
  fresh_db();
  pb_config_result r[4];
  one_config(&r[0], "a", "h1");
  one_config(&r[1], "b", "h2");
  one_config(&r[2], "c", "h1+tls");
  one_config(&r[3], "d", "h2+tls");
  CU_ASSERT(store(r, 4) > 0);
  char got[128];
  protocols(got, sizeof got);
  CU_ASSERT_STRING_EQUAL(got, "h1,h2,h1+tls,h2+tls");
  unlink(db_path);
}

/* A database whose bench_measure predates conn_error_causes and protocol. */
static void test_old_database_gets_the_column(void) {
  fresh_db();
  pb_config_result r[1];
  one_config(&r[0], "old", "h1");
  CU_ASSERT(store(r, 1) > 0);
  sqlite3 *db;
  CU_ASSERT_FATAL(sqlite3_open(db_path, &db) == SQLITE_OK);
  /* Rebuild the side table as the first pp-bench wrote it, keeping its row. */
  CU_ASSERT_EQUAL(
      sqlite3_exec(db,
                   "CREATE TABLE old AS SELECT config_id, ran, error, check_ok, check_reason,"
                   " http_errors, conn_errors, pacer_p50_ms, pacer_p99_ms, pacer_max_ms,"
                   " send_p99_ms, connections, server_cmd FROM bench_measure;"
                   "DROP TABLE bench_measure; ALTER TABLE old RENAME TO bench_measure;",
                   NULL, NULL, NULL),
      SQLITE_OK);
  sqlite3_close(db);
  one_config(&r[0], "new", "h2+tls");
  CU_ASSERT(store(r, 1) > 0);
  char got[128];
  protocols(got, sizeof got);
  CU_ASSERT_STRING_EQUAL(got, "h1,h2+tls");
  unlink(db_path);
}

/* ---- soak tables ---- */

static int64_t query_i64(const char *sql, bool *is_null) {
  sqlite3 *db;
  sqlite3_stmt *st;
  int64_t v = -999;
  CU_ASSERT_FATAL(sqlite3_open(db_path, &db) == SQLITE_OK);
  CU_ASSERT_FATAL(sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK);
  if (sqlite3_step(st) == SQLITE_ROW) {
    if (is_null) *is_null = sqlite3_column_type(st, 0) == SQLITE_NULL;
    v = sqlite3_column_int64(st, 0);
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return v;
}

static void one_soak(pb_soak_config *c, pb_soak_result *r, pb_soak_cycle *cyc) {
  pb_soak_defaults(c);
  c->cycles = 1;
  snprintf(c->spec.name, sizeof c->spec.name, "soak-t");
  c->spec.kind = PB_SERVER_PUMAPLUS;
  memset(r, 0, sizeof *r);
  memset(cyc, 0, sizeof *cyc);
  r->ran = r->passed = r->fds_flat = true;
  r->fds_baseline = 27;
  r->heap_baseline = -1; /* unknown: stored as NULL, never as -1 */
  r->n_cycles = 1;
  r->cycles = cyc;
  for (int p = 0; p < PB_SOAK_PHASES; p++) {
    cyc->phase[p].requests = 100 + (uint64_t)p;
    cyc->phase[p].ok = 100;
    cyc->phase[p].heap_live_slots = -1;
    cyc->phase[p].fds_end = 27;
    cyc->phase[p].server_left_queued = p == PB_SOAK_CANCEL ? 7 : 0;
    cyc->phase[p].server_shed = -1;
    cyc->phase[p].steal_pct = p == PB_SOAK_OVERLOAD ? 12.5 : -1; /* -1: unknown, NULL */
  }
  cyc->fds_end = 28;
  cyc->heap_live_slots = 123;
}

/* A soak is stored with one row per phase plus the cycle's end row; unknown values are NULL. */
static void test_soak_is_stored(void) {
  fresh_db();
  pb_soak_config c;
  pb_soak_result r;
  pb_soak_cycle cyc;
  one_soak(&c, &r, &cyc);
  int64_t id = -1;
  char err[256] = "";
  CU_ASSERT_EQUAL_FATAL(pb_store_soak(db_path, &c, &r, "-short", &id, err, sizeof err), 0);
  CU_ASSERT(id > 0);
  CU_ASSERT_EQUAL(query_i64("SELECT count(*) FROM soak_phases", NULL), 6);
  CU_ASSERT_EQUAL(query_i64("SELECT requests FROM soak_phases WHERE phase = 'cancel'", NULL), 103);
  CU_ASSERT_EQUAL(
      query_i64("SELECT server_left_queued FROM soak_phases WHERE phase = 'cancel'", NULL), 7);
  CU_ASSERT_EQUAL(query_i64("SELECT fds_end FROM soak_phases WHERE phase = 'end'", NULL), 28);
  CU_ASSERT_EQUAL(query_i64("SELECT heap_live_slots FROM soak_phases WHERE phase = 'end'", NULL),
                  123);
  bool is_null = false;
  query_i64("SELECT heap_baseline FROM soak_runs", &is_null);
  CU_ASSERT_TRUE(is_null);
  query_i64("SELECT server_shed FROM soak_phases WHERE phase = 'steady'", &is_null);
  CU_ASSERT_TRUE(is_null);
  CU_ASSERT_EQUAL(
      query_i64("SELECT CAST(steal_pct * 10 AS INTEGER) FROM soak_phases WHERE phase = 'overload'",
                &is_null),
      125);
  CU_ASSERT_FALSE(is_null);
  query_i64("SELECT steal_pct FROM soak_phases WHERE phase = 'steady'", &is_null);
  CU_ASSERT_TRUE(is_null);
  query_i64("SELECT steal_pct FROM soak_phases WHERE phase = 'end'", &is_null);
  CU_ASSERT_TRUE(is_null);
  CU_ASSERT_EQUAL(query_i64("SELECT passed FROM soak_runs", NULL), 1);
  unlink(db_path);
}

/* A database from an older pp-bench (soak tables with fewer columns and a row in them) gets the
 * new columns, keeps its row, and takes the new soak. */
static void test_old_soak_tables_get_the_columns(void) {
  fresh_db();
  sqlite3 *db;
  CU_ASSERT_FATAL(sqlite3_open(db_path, &db) == SQLITE_OK);
  CU_ASSERT_FATAL(
      sqlite3_exec(db,
                   "CREATE TABLE soak_runs (soak_id INTEGER PRIMARY KEY, server TEXT);"
                   "CREATE TABLE soak_phases (soak_id INTEGER NOT NULL, cycle INTEGER NOT NULL,"
                   " phase TEXT NOT NULL, requests INTEGER, PRIMARY KEY (soak_id, cycle, phase));"
                   "INSERT INTO soak_runs VALUES (1, 'pumaplus');"
                   "INSERT INTO soak_phases VALUES (1, 1, 'steady', 42);",
                   NULL, NULL, NULL) == SQLITE_OK);
  sqlite3_close(db);
  pb_soak_config c;
  pb_soak_result r;
  pb_soak_cycle cyc;
  one_soak(&c, &r, &cyc);
  int64_t id = -1;
  char err[256] = "";
  CU_ASSERT_EQUAL_FATAL(pb_store_soak(db_path, &c, &r, NULL, &id, err, sizeof err), 0);
  CU_ASSERT_EQUAL(id, 2);
  CU_ASSERT_EQUAL(query_i64("SELECT requests FROM soak_phases WHERE soak_id = 1", NULL), 42);
  bool is_null = false;
  query_i64("SELECT server_left_running FROM soak_phases WHERE soak_id = 1", &is_null);
  CU_ASSERT_TRUE(is_null);
  query_i64("SELECT steal_pct FROM soak_phases WHERE soak_id = 1", &is_null);
  CU_ASSERT_TRUE(is_null);
  CU_ASSERT_EQUAL(
      query_i64("SELECT server_left_queued FROM soak_phases WHERE soak_id = 2 AND phase = 'cancel'",
                NULL),
      7);
  unlink(db_path);
}

/* Writes a decision log of `n` tick lines, ticks first..first+n-1, after a header. */
static void write_ticks(FILE *f, uint64_t first, int n) {
  pp_policy p;
  pp_policy_defaults(&p);
  pp_declog_header h;
  char buf[PP_DECLOG_LINE_MAX];
  CU_ASSERT_EQUAL_FATAL(pp_declog_header_init(&h, &p, "server"), 0);
  CU_ASSERT_FATAL(pp_declog_encode_header(&h, buf, sizeof buf) > 0);
  fputs(buf, f);
  for (int i = 0; i < n; i++) {
    pp_declog_record r;
    memset(&r, 0, sizeof r);
    r.tick = first + (uint64_t)i;
    r.time_ns = (int64_t)r.tick * 250000000;
    r.policy_hash = pp_policy_hash(&p);
    snprintf(r.source, sizeof r.source, "server");
    pp_ctl_state_init(&r.state_before, &p, 1, 4);
    r.state_after = r.state_before;
    snprintf(r.decision.reason, sizeof r.decision.reason, "none: steady");
    CU_ASSERT_FATAL(pp_declog_encode(&r, buf, sizeof buf) > 0);
    fputs(buf, f);
  }
}

/* A decision log a server appended to (a reused -log-dir before pp-bench gave each run its own
 * file): ticks start again after the first run's. The run is stored with the first run's ticks;
 * before, the second run's tick 1 broke the decisions table's uniqueness and the whole run
 * (summary, timeline, every configuration) was refused. */
static void test_appended_decision_log(void) {
  fresh_db();
  char log[80];
  snprintf(log, sizeof log, "/tmp/test_bench_store.%d.decisions.jsonl", (int)getpid());
  FILE *f = fopen(log, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  write_ticks(f, 1, 3);
  write_ticks(f, 1, 2); /* the next run, appended */
  fclose(f);
  pb_config_result r[1];
  one_config(&r[0], "auto", "h1");
  r[0].spec.autoscale = true;
  snprintf(r[0].spec.decision_log, sizeof r[0].spec.decision_log, "%s", log);
  CU_ASSERT(store(r, 1) > 0);
  CU_ASSERT_EQUAL(query_i64("SELECT COUNT(*) FROM decisions", NULL), 3);
  CU_ASSERT_EQUAL(query_i64("SELECT MAX(tick) FROM decisions", NULL), 3);
  CU_ASSERT_EQUAL(query_i64("SELECT COUNT(*) FROM bench_measure", NULL), 1);
  /* A header inside one run (a reload) is not a run boundary: ticks 1-3, header, 4-5. */
  fresh_db();
  f = fopen(log, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  write_ticks(f, 1, 3);
  write_ticks(f, 4, 2);
  fclose(f);
  CU_ASSERT(store(r, 1) > 0);
  CU_ASSERT_EQUAL(query_i64("SELECT COUNT(*) FROM decisions", NULL), 5);
  unlink(log);
  unlink(db_path);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 2;
  CU_pSuite s = CU_add_suite("bench_store", NULL, NULL);
  CU_add_test(s, "protocol is stored", test_protocol_is_stored);
  CU_add_test(s, "old database gets the column", test_old_database_gets_the_column);
  CU_add_test(s, "soak is stored", test_soak_is_stored);
  CU_add_test(s, "old soak tables get the columns", test_old_soak_tables_get_the_columns);
  CU_add_test(s, "appended decision log: the first run is stored", test_appended_decision_log);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failures = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}
