/* pp-sim merge: shard databases of one sweep into one results database (results.h).
 *
 * Every input is validated before anything is written: it must be a sweep database (a `sweeps`
 * table with exactly one sweep), of the same sweep as the first input (hash) and with the same
 * shard count, which `out` must share if it already holds that sweep. Then each input is copied
 * in one transaction through ATTACH: its runs are mapped onto `out`'s run for the same sweep and
 * seed (created when missing), and its configs, summary, timeline and decision rows are copied
 * with their config_id shifted past `out`'s largest, so values are copied as SQLite holds them
 * (bit for bit). The shard's sweep_shards row records where it came from. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sqlite3.h>

#include "sim/results.h"
#include "sim/scenario.h"

typedef struct merge_input {
  const char *path;
  char hash[64];
  char scenario[128];
  char *definition;
  uint32_t shards;
  uint64_t units;
  size_t n_shard;
  uint32_t *shard; /* the shard numbers it holds */
  uint8_t *take;   /* per shard: 1 to copy it */
} merge_input;

static void input_free(merge_input *in) {
  free(in->definition);
  free(in->shard);
  free(in->take);
}

/* Reads an input's sweep and shard list (read-only; the file is never created). */
static int input_read(merge_input *in, char *errbuf, size_t errcap) {
  sqlite3 *db = NULL;
  sqlite3_stmt *st = NULL;
  int rc = -1;
  if (sqlite3_open_v2(in->path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
    snprintf(errbuf, errcap, "cannot open %s: %s", in->path, db ? sqlite3_errmsg(db) : "?");
    goto out;
  }
  if (sqlite3_prepare_v2(db, "SELECT sweep_hash, scenario, definition, shards, units FROM sweeps",
                         -1, &st, NULL) != SQLITE_OK) {
    snprintf(errbuf, errcap, "%s is not a pp-sim sweep database (%s)", in->path,
             sqlite3_errmsg(db));
    goto out;
  }
  int n = 0;
  while (sqlite3_step(st) == SQLITE_ROW) {
    if (n++) break;
    snprintf(in->hash, sizeof in->hash, "%s", (const char *)sqlite3_column_text(st, 0));
    snprintf(in->scenario, sizeof in->scenario, "%s", (const char *)sqlite3_column_text(st, 1));
    const char *d = (const char *)sqlite3_column_text(st, 2);
    in->definition = strdup(d ? d : "");
    in->shards = (uint32_t)sqlite3_column_int64(st, 3);
    in->units = (uint64_t)sqlite3_column_int64(st, 4);
  }
  sqlite3_finalize(st);
  st = NULL;
  if (n != 1) {
    snprintf(errbuf, errcap, "%s holds %s sweeps: an input must hold shards of exactly one",
             in->path, n ? "several" : "no");
    goto out;
  }
  if (!in->definition) goto out;
  if (sqlite3_prepare_v2(db, "SELECT shard FROM sweep_shards WHERE sweep_hash = ? ORDER BY shard",
                         -1, &st, NULL) != SQLITE_OK) {
    snprintf(errbuf, errcap, "%s: %s", in->path, sqlite3_errmsg(db));
    goto out;
  }
  sqlite3_bind_text(st, 1, in->hash, -1, SQLITE_TRANSIENT);
  size_t cap = 0;
  while (sqlite3_step(st) == SQLITE_ROW) {
    if (in->n_shard == cap) {
      cap = cap ? cap * 2 : 8;
      uint32_t *p = realloc(in->shard, cap * sizeof *p);
      if (!p) goto out;
      in->shard = p;
    }
    in->shard[in->n_shard++] = (uint32_t)sqlite3_column_int64(st, 0);
  }
  in->take = calloc(in->n_shard ? in->n_shard : 1, 1);
  if (!in->take) goto out;
  if (in->n_shard == 0) {
    snprintf(errbuf, errcap, "%s holds no finished shard of sweep %s", in->path, in->hash);
    goto out;
  }
  rc = 0;
out:
  sqlite3_finalize(st);
  sqlite3_close(db);
  return rc;
}

/* The first line where two definitions differ, for the refusal message. */
static void first_difference(const char *a, const char *b, char *out, size_t cap) {
  while (*a || *b) {
    size_t la = strcspn(a, "\n"), lb = strcspn(b, "\n");
    if (la != lb || memcmp(a, b, la)) {
      snprintf(out, cap, "\"%.*s\" against \"%.*s\"", (int)(la > 200 ? 200 : la), a,
               (int)(lb > 200 ? 200 : lb), b);
      return;
    }
    a += la + (a[la] == '\n');
    b += lb + (b[lb] == '\n');
  }
  snprintf(out, cap, "identical definitions");
}

static int exec(sqlite3 *db, const char *sql, char *errbuf, size_t errcap) {
  char *msg = NULL;
  if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
    snprintf(errbuf, errcap, "%s: %s", sql, msg ? msg : "?");
    sqlite3_free(msg);
    return -1;
  }
  return 0;
}

/* INSERT INTO main.T (cols) SELECT cols FROM s.T x WHERE x.config_id is in the shard, with
 * config_id shifted by ?1; ?2 the sweep hash, ?3 the shard. Columns come from main's T, so a
 * shard written by an older pp-sim (fewer columns) fails loudly rather than misaligning. */
static int copy_table(sqlite3 *db, const char *table, int64_t offset, const char *hash,
                      uint32_t shard, char *errbuf, size_t errcap) {
  char cols[4096] = "", sel[4096] = "", sql[9000];
  sqlite3_stmt *st;
  snprintf(sql, sizeof sql, "PRAGMA main.table_info(%s)", table);
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) return -1;
  size_t lc = 0, ls = 0;
  while (sqlite3_step(st) == SQLITE_ROW) {
    const char *name = (const char *)sqlite3_column_text(st, 1);
    int is_id = strcmp(name, "config_id") == 0;
    lc += (size_t)snprintf(cols + lc, sizeof cols - lc, "%s%s", lc ? "," : "", name);
    ls += (size_t)snprintf(sel + ls, sizeof sel - ls, "%sx.%s%s", ls ? "," : "", name,
                           is_id ? " + ?1" : "");
    if (lc >= sizeof cols || ls >= sizeof sel) break;
  }
  sqlite3_finalize(st);
  if (lc == 0 || lc >= sizeof cols || ls >= sizeof sel) {
    snprintf(errbuf, errcap, "cannot list the columns of %s", table);
    return -1;
  }
  snprintf(sql, sizeof sql,
           "INSERT INTO main.%s (%s) SELECT %s FROM s.%s x WHERE x.config_id IN"
           " (SELECT config_id FROM s.sweep_configs WHERE sweep_hash = ?2 AND shard = ?3)",
           table, cols, sel, table);
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
    snprintf(errbuf, errcap, "copying %s: %s", table, sqlite3_errmsg(db));
    return -1;
  }
  sqlite3_bind_int64(st, 1, offset);
  sqlite3_bind_text(st, 2, hash, -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(st, 3, shard);
  int rc = sqlite3_step(st);
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) {
    snprintf(errbuf, errcap, "copying %s: %s", table, sqlite3_errmsg(db));
    return -1;
  }
  return 0;
}

static int64_t query_int(sqlite3 *db, const char *sql, const char *hash, int64_t dflt) {
  sqlite3_stmt *st;
  int64_t v = dflt;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) return dflt;
  if (hash) sqlite3_bind_text(st, 1, hash, -1, SQLITE_TRANSIENT);
  if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
    v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return v;
}

/* Maps the input's run old_run (of `seed`) onto out's run of the same sweep and seed, adding
 * that run (a copy of the input's row) when out has none. */
static int map_run(sqlite3 *db, const char *hash, int64_t old_run, int64_t seed) {
  sqlite3_stmt *f;
  int64_t new_run = -1;
  if (sqlite3_prepare_v2(db, "SELECT run_id FROM main.sweep_runs WHERE sweep_hash = ? AND seed = ?",
                         -1, &f, NULL) != SQLITE_OK)
    return -1;
  sqlite3_bind_text(f, 1, hash, -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(f, 2, seed);
  if (sqlite3_step(f) == SQLITE_ROW) new_run = sqlite3_column_int64(f, 0);
  sqlite3_finalize(f);
  int r;
  if (new_run < 0) {
    if (sqlite3_prepare_v2(db,
                           "INSERT INTO main.runs (kind, tool, scenario, scenario_path, seed,"
                           " duration_s, created_at, notes) SELECT kind, tool, scenario,"
                           " scenario_path, seed, duration_s, created_at, notes FROM s.runs"
                           " WHERE run_id = ?",
                           -1, &f, NULL) != SQLITE_OK)
      return -1;
    sqlite3_bind_int64(f, 1, old_run);
    r = sqlite3_step(f);
    sqlite3_finalize(f);
    if (r != SQLITE_DONE) return -1;
    new_run = sqlite3_last_insert_rowid(db);
    if (sqlite3_prepare_v2(db,
                           "INSERT INTO main.sweep_runs (run_id, sweep_hash, seed) VALUES (?,?,?)",
                           -1, &f, NULL) != SQLITE_OK)
      return -1;
    sqlite3_bind_int64(f, 1, new_run);
    sqlite3_bind_text(f, 2, hash, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(f, 3, seed);
    r = sqlite3_step(f);
    sqlite3_finalize(f);
    if (r != SQLITE_DONE) return -1;
  }
  if (sqlite3_prepare_v2(db, "INSERT INTO temp.runmap VALUES (?,?)", -1, &f, NULL) != SQLITE_OK)
    return -1;
  sqlite3_bind_int64(f, 1, old_run);
  sqlite3_bind_int64(f, 2, new_run);
  r = sqlite3_step(f);
  sqlite3_finalize(f);
  return r == SQLITE_DONE ? 0 : -1;
}

/* Copies the taken shards of one input, in one transaction. */
static int merge_one(sqlite3 *db, const merge_input *in, const char *when, char *errbuf,
                     size_t errcap) {
  sqlite3_stmt *st = NULL;
  char sql[512];
  char *q = sqlite3_mprintf("ATTACH DATABASE %Q AS s", in->path);
  if (!q) return -1;
  int rc = exec(db, q, errbuf, errcap);
  sqlite3_free(q);
  if (rc) return -1;
  rc = -1;
  if (exec(db, "BEGIN", errbuf, errcap)) goto detach;
  if (exec(db,
           "INSERT OR IGNORE INTO main.sweeps SELECT sweep_hash, scenario, scenario_hash,"
           " definition, variants, seeds, configs, units, shards FROM s.sweeps",
           errbuf, errcap) ||
      exec(db, "CREATE TEMP TABLE IF NOT EXISTS runmap (old INTEGER PRIMARY KEY, new INTEGER)",
           errbuf, errcap) ||
      exec(db, "DELETE FROM temp.runmap", errbuf, errcap))
    goto rollback;
  for (size_t k = 0; k < in->n_shard; k++) {
    if (!in->take[k]) continue;
    uint32_t shard = in->shard[k];
    /* Runs of this shard's seeds: onto out's run of the same sweep and seed. */
    snprintf(sql, sizeof sql,
             "SELECT DISTINCT c.run_id, sc.seed FROM s.sweep_configs sc JOIN s.configs c"
             " USING (config_id) WHERE sc.sweep_hash = ?1 AND sc.shard = ?2"
             " AND c.run_id NOT IN (SELECT old FROM temp.runmap)");
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) goto sqlerr;
    sqlite3_bind_text(st, 1, in->hash, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 2, shard);
    int64_t *pairs = NULL;
    size_t np = 0, pcap = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
      if (np == pcap) {
        pcap = pcap ? pcap * 2 : 16;
        int64_t *p = realloc(pairs, 2 * pcap * sizeof *p);
        if (!p) {
          free(pairs);
          goto sqlerr;
        }
        pairs = p;
      }
      pairs[2 * np] = sqlite3_column_int64(st, 0);
      pairs[2 * np + 1] = sqlite3_column_int64(st, 1);
      np++;
    }
    sqlite3_finalize(st);
    st = NULL;
    for (size_t i = 0; i < np; i++) {
      if (map_run(db, in->hash, pairs[2 * i], pairs[2 * i + 1])) {
        free(pairs);
        goto sqlerr;
      }
    }
    free(pairs);
    int64_t offset = query_int(db, "SELECT max(config_id) FROM main.configs", NULL, 0);
    if (sqlite3_prepare_v2(db,
                           "INSERT INTO main.configs (config_id, run_id, name, server, queue_model,"
                           " workers, threads, autoscale, policy_hash, policy_text, variant)"
                           " SELECT c.config_id + ?1, m.new, c.name, c.server, c.queue_model,"
                           " c.workers, c.threads, c.autoscale, c.policy_hash, c.policy_text,"
                           " c.variant FROM s.configs c JOIN temp.runmap m ON m.old = c.run_id"
                           " WHERE c.config_id IN (SELECT config_id FROM s.sweep_configs"
                           " WHERE sweep_hash = ?2 AND shard = ?3)",
                           -1, &st, NULL) != SQLITE_OK)
      goto sqlerr;
    sqlite3_bind_int64(st, 1, offset);
    sqlite3_bind_text(st, 2, in->hash, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 3, shard);
    int r = sqlite3_step(st);
    sqlite3_finalize(st);
    st = NULL;
    if (r != SQLITE_DONE) goto sqlerr;
    if (copy_table(db, "summary", offset, in->hash, shard, errbuf, errcap) ||
        copy_table(db, "timeline", offset, in->hash, shard, errbuf, errcap) ||
        copy_table(db, "decisions", offset, in->hash, shard, errbuf, errcap) ||
        copy_table(db, "sweep_configs", offset, in->hash, shard, errbuf, errcap))
      goto rollback;
    if (sqlite3_prepare_v2(db,
                           "INSERT INTO main.sweep_shards (sweep_hash, shard, units, simulations,"
                           " wall_s, host, created_at, merged_from, merged_at) SELECT sweep_hash,"
                           " shard, units, simulations, wall_s, host, created_at, ?3, ?4"
                           " FROM s.sweep_shards WHERE sweep_hash = ?1 AND shard = ?2",
                           -1, &st, NULL) != SQLITE_OK)
      goto sqlerr;
    sqlite3_bind_text(st, 1, in->hash, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 2, shard);
    sqlite3_bind_text(st, 3, in->path, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 4, when, -1, SQLITE_TRANSIENT);
    r = sqlite3_step(st);
    sqlite3_finalize(st);
    st = NULL;
    if (r != SQLITE_DONE) goto sqlerr;
  }
  if (exec(db, "COMMIT", errbuf, errcap)) goto rollback;
  rc = 0;
  goto detach;
sqlerr:
  snprintf(errbuf, errcap, "merging %s: %s", in->path, sqlite3_errmsg(db));
rollback:
  sqlite3_finalize(st);
  sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
detach:
  sqlite3_exec(db, "DETACH DATABASE s", NULL, NULL, NULL);
  return rc;
}

/* "3, 7-9, 12" into out. */
static void ranges(const uint8_t *flag, uint32_t n, uint8_t want, char *out, size_t cap) {
  size_t used = 0;
  out[0] = 0;
  for (uint32_t i = 1; i <= n && used < cap; i++) {
    if (flag[i] != want) continue;
    uint32_t j = i;
    while (j + 1 <= n && flag[j + 1] == want)
      j++;
    int w = j == i ? snprintf(out + used, cap - used, "%s%u", used ? ", " : "", i)
                   : snprintf(out + used, cap - used, "%s%u-%u", used ? ", " : "", i, j);
    if (w > 0) used += (size_t)w;
    i = j;
  }
  if (used >= cap && cap > 4) strcpy(out + cap - 4, "...");
}

/* One status line per sweep in db; returns 1 when any sweep is incomplete. */
static int status(sqlite3 *db, const char *out, const char *only_hash, FILE *report) {
  sqlite3_stmt *st;
  int incomplete = 0;
  if (sqlite3_prepare_v2(db,
                         "SELECT sweep_hash, scenario, units, shards FROM sweeps"
                         " WHERE ?1 IS NULL OR sweep_hash = ?1 ORDER BY sweep_hash",
                         -1, &st, NULL) != SQLITE_OK)
    return -1;
  if (only_hash) sqlite3_bind_text(st, 1, only_hash, -1, SQLITE_TRANSIENT);
  while (sqlite3_step(st) == SQLITE_ROW) {
    const char *hash = (const char *)sqlite3_column_text(st, 0);
    const char *scn = (const char *)sqlite3_column_text(st, 1);
    int64_t units = sqlite3_column_int64(st, 2);
    uint32_t n = (uint32_t)sqlite3_column_int64(st, 3);
    uint8_t *in = calloc((size_t)n + 2, 1);
    if (!in) break;
    sqlite3_stmt *s2;
    uint32_t have = 0;
    int64_t units_in = 0;
    if (sqlite3_prepare_v2(db, "SELECT shard, units FROM sweep_shards WHERE sweep_hash = ?", -1,
                           &s2, NULL) == SQLITE_OK) {
      sqlite3_bind_text(s2, 1, hash, -1, SQLITE_TRANSIENT);
      while (sqlite3_step(s2) == SQLITE_ROW) {
        int64_t k = sqlite3_column_int64(s2, 0);
        if (k >= 1 && k <= n && !in[k]) {
          in[k] = 1;
          have++;
          units_in += sqlite3_column_int64(s2, 1);
        }
      }
      sqlite3_finalize(s2);
    }
    fprintf(report,
            "pp-sim merge: %s: sweep %s (%s): %u of %u shards in, %" PRId64 " of %" PRId64 " units",
            out, hash, scn, have, n, units_in, units);
    if (have < n) {
      char list[512];
      ranges(in, n, 0, list, sizeof list);
      fprintf(report, "; missing shards %s\n", list);
      incomplete = 1;
    } else {
      fprintf(report, "; complete\n");
    }
    free(in);
  }
  sqlite3_finalize(st);
  return incomplete;
}

int pp_results_merge(const char *out, const char *const *inputs, size_t n_inputs, FILE *report,
                     char *errbuf, size_t errcap) {
  merge_input *in = calloc(n_inputs ? n_inputs : 1, sizeof *in);
  pp_results_db *rdb = NULL;
  int rc = PP_SIM_EDB;
  if (!in) return PP_SIM_ENOMEM;
  if (n_inputs == 0) {
    /* Status only: never create the file. */
    sqlite3 *db;
    if (sqlite3_open_v2(out, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
      snprintf(errbuf, errcap, "cannot open %s: %s", out, db ? sqlite3_errmsg(db) : "?");
      sqlite3_close(db);
      free(in);
      return PP_SIM_EDB;
    }
    int64_t n = query_int(db, "SELECT count(*) FROM sweeps", NULL, -1);
    if (n < 0)
      snprintf(errbuf, errcap, "%s is not a pp-sim sweep database (no sweeps table)", out);
    else if (n == 0)
      snprintf(errbuf, errcap, "%s holds no sweep", out);
    else {
      int s = status(db, out, NULL, report);
      rc = s < 0 ? PP_SIM_EDB : s ? PP_RESULTS_INCOMPLETE : 0;
      if (s < 0) snprintf(errbuf, errcap, "%s: %s", out, sqlite3_errmsg(db));
    }
    sqlite3_close(db);
    free(in);
    return rc;
  }
  for (size_t i = 0; i < n_inputs; i++) {
    in[i].path = inputs[i];
    if (strcmp(inputs[i], out) == 0) {
      snprintf(errbuf, errcap, "%s is both the output and an input", out);
      goto done;
    }
    if (input_read(&in[i], errbuf, errcap)) goto done;
  }
  /* One sweep, one shard count: refuse before writing anything. */
  for (size_t i = 1; i < n_inputs; i++) {
    if (strcmp(in[i].hash, in[0].hash)) {
      char diff[512];
      first_difference(in[0].definition, in[i].definition, diff, sizeof diff);
      snprintf(errbuf, errcap,
               "refused: %s holds sweep %s (%s), not sweep %s (%s) like %s; their definitions "
               "differ: %s; nothing merged",
               in[i].path, in[i].hash, in[i].scenario, in[0].hash, in[0].scenario, in[0].path,
               diff);
      goto done;
    }
    if (in[i].shards != in[0].shards) {
      snprintf(errbuf, errcap,
               "refused: %s splits sweep %s into %u shards, %s into %u; nothing merged", in[i].path,
               in[i].hash, in[i].shards, in[0].path, in[0].shards);
      goto done;
    }
  }
  const char *hash = in[0].hash;
  uint32_t n = in[0].shards;
  for (size_t i = 0; i < n_inputs; i++)
    for (size_t k = 0; k < in[i].n_shard; k++)
      if (in[i].shard[k] < 1 || in[i].shard[k] > n) {
        snprintf(errbuf, errcap, "%s: shard %u is outside 1..%u; nothing merged", in[i].path,
                 in[i].shard[k], n);
        goto done;
      }
  if (pp_results_open(&rdb, out, errbuf, errcap)) goto done;
  sqlite3 *db = pp_results_sqlite(rdb);
  uint32_t have_n = 0;
  int have_shard = 0;
  int st = pp_results_sweep_state(rdb, hash, 1, &have_n, &have_shard);
  if (st < 0) {
    snprintf(errbuf, errcap, "%s: %s", out, sqlite3_errmsg(db));
    goto done;
  }
  if (st == 1 && have_n != n) {
    snprintf(errbuf, errcap,
             "refused: %s already holds sweep %s split into %u shards, the inputs into %u; "
             "nothing merged",
             out, hash, have_n, n);
    goto done;
  }
  /* Which copy of each shard to take: the first not already in out. */
  uint8_t *seen = calloc((size_t)n + 2, 1);
  const char **from = calloc((size_t)n + 2, sizeof *from);
  if (!seen || !from) {
    free(seen);
    free(from);
    rc = PP_SIM_ENOMEM;
    goto done;
  }
  sqlite3_stmt *q;
  if (sqlite3_prepare_v2(db,
                         "SELECT shard, coalesce(merged_from, '(written there)') FROM sweep_shards"
                         " WHERE sweep_hash = ?",
                         -1, &q, NULL) == SQLITE_OK) {
    sqlite3_bind_text(q, 1, hash, -1, SQLITE_TRANSIENT);
    while (sqlite3_step(q) == SQLITE_ROW) {
      int64_t k = sqlite3_column_int64(q, 0);
      if (k >= 1 && k <= n) seen[k] = 2;
    }
    sqlite3_finalize(q);
  }
  size_t skipped_in = 0, duplicated = 0, taken = 0;
  for (size_t i = 0; i < n_inputs; i++)
    for (size_t k = 0; k < in[i].n_shard; k++) {
      uint32_t s = in[i].shard[k];
      if (seen[s] == 2) {
        fprintf(report, "pp-sim merge: shard %u/%u of %s is already in %s: skipped\n", s, n,
                in[i].path, out);
        skipped_in++;
      } else if (seen[s] == 1) {
        fprintf(report,
                "pp-sim merge: duplicated shard %u/%u: in %s and in %s; the copy in %s is "
                "skipped\n",
                s, n, from[s], in[i].path, in[i].path);
        duplicated++;
      } else {
        seen[s] = 1;
        from[s] = in[i].path;
        in[i].take[k] = 1;
        taken++;
      }
    }
  char when[32];
  time_t t = time(NULL);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
  int failed = 0;
  for (size_t i = 0; i < n_inputs && !failed; i++) {
    size_t nt = 0;
    for (size_t k = 0; k < in[i].n_shard; k++)
      nt += in[i].take[k];
    if (!nt) continue;
    if (merge_one(db, &in[i], when, errbuf, errcap))
      failed = 1;
    else
      fprintf(report, "pp-sim merge: %s: %zu shard(s) of sweep %s merged into %s\n", in[i].path, nt,
              hash, out);
  }
  free(seen);
  free(from);
  if (failed) goto done;
  if (duplicated || skipped_in)
    fprintf(report, "pp-sim merge: %zu shard(s) merged, %zu already in %s, %zu duplicated\n", taken,
            skipped_in, out, duplicated);
  int s = status(db, out, hash, report);
  rc = s < 0 ? PP_SIM_EDB : s ? PP_RESULTS_INCOMPLETE : 0;
  if (s < 0) snprintf(errbuf, errcap, "%s: %s", out, sqlite3_errmsg(db));
done:
  pp_results_close(rdb);
  for (size_t i = 0; i < n_inputs; i++)
    input_free(&in[i]);
  free(in);
  return rc;
}
