/* SQLite helpers the store's writers share (store_int.h). */
#include "bench/store/store_int.h"

#include <stdbool.h>
#include <stdio.h>

void pb_store__bind_text_or_null(sqlite3_stmt *st, int i, const char *s) {
  if (s)
    sqlite3_bind_text(st, i, s, -1, SQLITE_TRANSIENT);
  else
    sqlite3_bind_null(st, i);
}

int pb_store__ensure_columns(sqlite3 *db, const char *table, const char *const (*cols)[2],
                             size_t n) {
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

sqlite3_stmt *pb_store__prepare_insert(sqlite3 *db, const char *table, const char *keys, int n_keys,
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

void pb_store__bind_i64_known(sqlite3_stmt *st, int i, int64_t v, bool known) {
  if (known)
    sqlite3_bind_int64(st, i, v);
  else
    sqlite3_bind_null(st, i);
}
