/* What the store's files share (runs.c, report.c, soak_rows.c, compare_rows.c): small SQLite
 * helpers. Not part of the store's API (store.h). */
#ifndef PP_BENCH_STORE_INT_H
#define PP_BENCH_STORE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

/* Binds `s` (copied), or NULL when `s` is NULL. */
void pb_store__bind_text_or_null(sqlite3_stmt *st, int i, const char *s);

/* Adds to `table` every column of `cols` (name, declaration) it lacks, so a database from an
 * older pp-bench takes the newer rows. 0 or -1. */
int pb_store__ensure_columns(sqlite3 *db, const char *table, const char *const (*cols)[2],
                             size_t n);

/* Prepares "INSERT INTO table (keys, cols...) VALUES (?, ...)" for `n_keys` key columns and the
 * `n` columns of `cols`. NULL on error. */
sqlite3_stmt *pb_store__prepare_insert(sqlite3 *db, const char *table, const char *keys, int n_keys,
                                       const char *const (*cols)[2], size_t n);

/* Binds `v`, or NULL when not `known`. */
void pb_store__bind_i64_known(sqlite3_stmt *st, int i, int64_t v, bool known);

#endif
