/* bench/store.c: the side table's `protocol` column, written for every protocol and added to
 * databases made before it existed (their rows read 'h1', which is what they measured).
 * Unit test: a temporary SQLite file, no sockets, no clocks. */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "bench/store.h"

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

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 2;
  CU_pSuite s = CU_add_suite("bench_store", NULL, NULL);
  CU_add_test(s, "protocol is stored", test_protocol_is_stored);
  CU_add_test(s, "old database gets the column", test_old_database_gets_the_column);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failures = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}
