/* Results store: schema creation, inserts, read-back, reopen, NULL for unknown. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <CUnit/Basic.h>
#include <sqlite3.h>

#include "sim/results.h"

static char path[64];

static void test_roundtrip(void) {
  snprintf(path, sizeof path, "/tmp/pp-sim-test-%d.db", (int)getpid());
  unlink(path);
  char err[256];
  for (int pass = 0; pass < 2; pass++) { /* the second pass reopens an existing schema */
    pp_results_db *db;
    CU_ASSERT_EQUAL_FATAL(pp_results_open(&db, path, err, sizeof err), 0);
    CU_ASSERT_EQUAL(pp_results_begin(db), 0);
    pp_results_run run = {pass ? "measured" : "simulated", "test", "step", NULL, 42, 120,
                          "2026-01-01T00:00:00Z",          NULL};
    int64_t run_id, cfg_id;
    CU_ASSERT_EQUAL(pp_results_add_run(db, &run, &run_id), 0);
    pp_results_config c = {"puma-avg", "puma", "per_worker", 2, 5, 0, NULL, NULL, NULL};
    CU_ASSERT_EQUAL(pp_results_add_config(db, run_id, &c, &cfg_id), 0);
    pp_summary s;
    memset(&s, 0, sizeof s);
    s.requests = 100;
    s.p50_ns = 25e6;
    s.queue_p95_ns = -1;               /* unknown */
    s.achieved_rps = pass ? -1 : 99.5; /* the measured pass "failed its success check" */
    CU_ASSERT_EQUAL(pp_results_add_summary(db, cfg_id, &s), 0);
    pp_timeline_row rows[3];
    memset(rows, 0, sizeof rows);
    for (int i = 0; i < 3; i++)
      rows[i].t_s = (uint32_t)i, rows[i].p50_ns = 1e6 * (i + 1);
    rows[1].queue_p95_ns = -1;
    CU_ASSERT_EQUAL(pp_results_add_timeline(db, cfg_id, rows, 3), 0);
    CU_ASSERT_EQUAL(
        pp_results_add_decision(db, cfg_id, 0, 1000000000, "none", 0, 1, "calm", "{\"v\":1}"), 0);
    CU_ASSERT_EQUAL(pp_results_commit(db), 0);
    pp_results_close(db);
  }
  sqlite3 *q;
  CU_ASSERT_EQUAL_FATAL(sqlite3_open(path, &q), SQLITE_OK);
  sqlite3_stmt *st;
  CU_ASSERT_EQUAL_FATAL(sqlite3_prepare_v2(q,
                                           "SELECT count(*), sum(kind='measured'), "
                                           "(SELECT p50_ms FROM v_summary LIMIT 1), "
                                           "(SELECT count(*) FROM summary WHERE queue_p95_ms IS "
                                           "NULL), (SELECT count(*) FROM timeline), "
                                           "(SELECT count(*) FROM timeline WHERE queue_p95_ms IS "
                                           "NULL), (SELECT count(*) FROM summary WHERE "
                                           "achieved_rps IS NULL), (SELECT sum(achieved_rps) "
                                           "FROM summary) FROM runs",
                                           -1, &st, NULL),
                        SQLITE_OK);
  CU_ASSERT_EQUAL_FATAL(sqlite3_step(st), SQLITE_ROW);
  CU_ASSERT_EQUAL(sqlite3_column_int(st, 0), 2);
  CU_ASSERT_EQUAL(sqlite3_column_int(st, 1), 1);
  CU_ASSERT_DOUBLE_EQUAL(sqlite3_column_double(st, 2), 25.0, 1e-9);
  CU_ASSERT_EQUAL(sqlite3_column_int(st, 3), 2);
  CU_ASSERT_EQUAL(sqlite3_column_int(st, 4), 6);
  CU_ASSERT_EQUAL(sqlite3_column_int(st, 5), 2);
  CU_ASSERT_EQUAL(sqlite3_column_int(st, 6), 1);                    /* failed run: NULL */
  CU_ASSERT_DOUBLE_EQUAL(sqlite3_column_double(st, 7), 99.5, 1e-9); /* never averaged in */
  sqlite3_finalize(st);
  sqlite3_close(q);
  unlink(path);
}

static void test_bad_kind_and_path(void) {
  char err[256];
  pp_results_db *db;
  CU_ASSERT_NOT_EQUAL(pp_results_open(&db, "/nonexistent-dir/x.db", err, sizeof err), 0);
  CU_ASSERT(strstr(err, "/nonexistent-dir/x.db") != NULL);
  snprintf(path, sizeof path, "/tmp/pp-sim-test-%d-b.db", (int)getpid());
  unlink(path);
  CU_ASSERT_EQUAL_FATAL(pp_results_open(&db, path, err, sizeof err), 0);
  pp_results_run run = {"guessed", "test", "x", NULL, 1, 1, "now", NULL};
  int64_t id;
  CU_ASSERT_NOT_EQUAL(pp_results_add_run(db, &run, &id), 0); /* CHECK constraint on kind */
  pp_results_close(db);
  unlink(path);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("results", NULL, NULL);
  CU_add_test(s, "write, reopen, read back", test_roundtrip);
  CU_add_test(s, "bad kind and bad path", test_bad_kind_and_path);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned fails = CU_get_number_of_failures();
  CU_cleanup_registry();
  return fails ? 1 : 0;
}
