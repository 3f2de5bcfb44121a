/* SQLite results store. Schema text lives here and in docs/RESULTS.md; keep them together. */
#include "sim/results.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "sim/scenario.h"

struct pp_results_db {
  sqlite3 *db;
  sqlite3_stmt *timeline, *decision, *sweep_config;
};

static const char schema[] =
    "CREATE TABLE IF NOT EXISTS runs (\n"
    "  run_id INTEGER PRIMARY KEY,\n"
    "  kind TEXT NOT NULL CHECK (kind IN ('simulated','measured')),\n"
    "  tool TEXT NOT NULL,\n"
    "  scenario TEXT NOT NULL,\n"
    "  scenario_path TEXT,\n"
    "  seed INTEGER NOT NULL,\n"
    "  duration_s REAL NOT NULL,\n"
    "  created_at TEXT NOT NULL,\n"
    "  notes TEXT);\n"
    "CREATE TABLE IF NOT EXISTS configs (\n"
    "  config_id INTEGER PRIMARY KEY,\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(run_id),\n"
    "  name TEXT NOT NULL,\n"
    "  server TEXT NOT NULL,\n"
    "  queue_model TEXT,\n"
    "  workers INTEGER NOT NULL,\n"
    "  threads INTEGER NOT NULL,\n"
    "  autoscale INTEGER NOT NULL,\n"
    "  policy_hash TEXT,\n"
    "  policy_text TEXT,\n"
    "  variant TEXT);\n"
    "CREATE TABLE IF NOT EXISTS summary (\n"
    "  config_id INTEGER PRIMARY KEY REFERENCES configs(config_id),\n"
    "  requests INTEGER, completed INTEGER, completed_in_run INTEGER, shed INTEGER,\n"
    "  timed_out INTEGER, errors INTEGER, unfinished INTEGER,\n"
    "  offered_rps REAL, achieved_rps REAL,\n"
    "  p50_ms REAL, p90_ms REAL, p99_ms REAL, p999_ms REAL, max_ms REAL, mean_ms REAL,\n"
    "  excess_latency_ms REAL, queue_p95_ms REAL, queue_mean_ms REAL,\n"
    "  avg_workers REAL, peak_workers INTEGER, avg_memory_bytes REAL, peak_memory_bytes REAL,\n"
    "  worker_seconds REAL);\n"
    "CREATE TABLE IF NOT EXISTS timeline (\n"
    "  config_id INTEGER NOT NULL REFERENCES configs(config_id),\n"
    "  t_s INTEGER NOT NULL,\n"
    "  arrivals INTEGER, rps REAL, p50_ms REAL, p99_ms REAL,\n"
    "  workers INTEGER, workers_ready INTEGER, queue_p95_ms REAL, queue_len INTEGER,\n"
    "  shed INTEGER, timeouts INTEGER, memory_bytes REAL,\n"
    "  PRIMARY KEY (config_id, t_s));\n"
    "CREATE TABLE IF NOT EXISTS decisions (\n"
    "  config_id INTEGER NOT NULL REFERENCES configs(config_id),\n"
    "  tick INTEGER NOT NULL,\n"
    "  time_ns INTEGER NOT NULL,\n"
    "  action TEXT NOT NULL,\n"
    "  count INTEGER NOT NULL,\n"
    "  workers_target INTEGER NOT NULL,\n"
    "  reason TEXT NOT NULL,\n"
    "  line TEXT NOT NULL,\n"
    "  PRIMARY KEY (config_id, tick));\n"
    "CREATE VIEW IF NOT EXISTS v_summary AS\n"
    "  SELECT r.run_id, r.kind, r.scenario, r.seed, c.name AS config, c.variant, s.*\n"
    "  FROM summary s JOIN configs c USING (config_id) JOIN runs r USING (run_id);\n"
    "CREATE TABLE IF NOT EXISTS sweeps (\n"
    "  sweep_hash TEXT PRIMARY KEY,\n"
    "  scenario TEXT NOT NULL,\n"
    "  scenario_hash TEXT NOT NULL,\n"
    "  definition TEXT NOT NULL,\n"
    "  variants INTEGER NOT NULL, seeds INTEGER NOT NULL, configs INTEGER NOT NULL,\n"
    "  units INTEGER NOT NULL,\n"
    "  shards INTEGER NOT NULL);\n"
    "CREATE TABLE IF NOT EXISTS sweep_shards (\n"
    "  sweep_hash TEXT NOT NULL REFERENCES sweeps(sweep_hash),\n"
    "  shard INTEGER NOT NULL,\n"
    "  units INTEGER NOT NULL,\n"
    "  simulations INTEGER NOT NULL,\n"
    "  wall_s REAL, host TEXT,\n"
    "  created_at TEXT NOT NULL,\n"
    "  merged_from TEXT, merged_at TEXT,\n"
    "  PRIMARY KEY (sweep_hash, shard));\n"
    "CREATE TABLE IF NOT EXISTS sweep_runs (\n"
    "  run_id INTEGER PRIMARY KEY REFERENCES runs(run_id),\n"
    "  sweep_hash TEXT NOT NULL,\n"
    "  seed INTEGER NOT NULL,\n"
    "  UNIQUE (sweep_hash, seed));\n"
    "CREATE TABLE IF NOT EXISTS sweep_configs (\n"
    "  config_id INTEGER PRIMARY KEY REFERENCES configs(config_id),\n"
    "  sweep_hash TEXT NOT NULL,\n"
    "  unit INTEGER NOT NULL,\n"
    "  variant_index INTEGER NOT NULL,\n"
    "  seed INTEGER NOT NULL,\n"
    "  shard INTEGER NOT NULL);\n"
    "CREATE INDEX IF NOT EXISTS sweep_configs_shard ON sweep_configs (sweep_hash, shard);\n"
    "CREATE VIEW IF NOT EXISTS v_sweep AS\n"
    "  SELECT sc.sweep_hash, sc.unit, sc.variant_index, sc.seed, sc.shard, c.name AS config,\n"
    "         c.variant, c.policy_hash, s.*\n"
    "  FROM sweep_configs sc JOIN configs c USING (config_id) JOIN summary s USING (config_id);\n"
    "PRAGMA user_version = 1;\n";

const char *pp_results_errmsg(pp_results_db *db) {
  return db && db->db ? sqlite3_errmsg(db->db) : "no database";
}

void pp_results_close(pp_results_db *db) {
  if (!db) return;
  sqlite3_finalize(db->timeline);
  sqlite3_finalize(db->decision);
  sqlite3_finalize(db->sweep_config);
  sqlite3_close(db->db);
  free(db);
}

int pp_results_open(pp_results_db **out, const char *path, char *errbuf, size_t errcap) {
  *out = NULL;
  pp_results_db *db = calloc(1, sizeof *db);
  if (!db) return PP_SIM_ENOMEM;
  if (sqlite3_open(path, &db->db) != SQLITE_OK) {
    snprintf(errbuf, errcap, "cannot open database %s: %s", path, sqlite3_errmsg(db->db));
    pp_results_close(db);
    return PP_SIM_EDB;
  }
  sqlite3_busy_timeout(db->db, 5000);
  char *msg = NULL;
  int version = 0;
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db->db, "PRAGMA user_version", -1, &st, NULL) == SQLITE_OK) {
    if (sqlite3_step(st) == SQLITE_ROW) version = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
  }
  if (version > PP_RESULTS_SCHEMA_VERSION) {
    snprintf(errbuf, errcap, "database %s has schema version %d, newer than this tool's %d", path,
             version, PP_RESULTS_SCHEMA_VERSION);
    pp_results_close(db);
    return PP_SIM_EDB;
  }
  if (sqlite3_exec(db->db, schema, NULL, NULL, &msg) != SQLITE_OK) {
    snprintf(errbuf, errcap, "cannot create the schema in %s: %s", path, msg ? msg : "?");
    sqlite3_free(msg);
    pp_results_close(db);
    return PP_SIM_EDB;
  }
  if (sqlite3_prepare_v2(db->db, "INSERT INTO timeline VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", -1,
                         &db->timeline, NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(db->db, "INSERT INTO decisions VALUES (?,?,?,?,?,?,?,?)", -1,
                         &db->decision, NULL) != SQLITE_OK) {
    snprintf(errbuf, errcap, "cannot prepare statements on %s: %s", path, sqlite3_errmsg(db->db));
    pp_results_close(db);
    return PP_SIM_EDB;
  }
  *out = db;
  return 0;
}

int pp_results_begin(pp_results_db *db) {
  return sqlite3_exec(db->db, "BEGIN", NULL, NULL, NULL) == SQLITE_OK ? 0 : PP_SIM_EDB;
}

int pp_results_commit(pp_results_db *db) {
  return sqlite3_exec(db->db, "COMMIT", NULL, NULL, NULL) == SQLITE_OK ? 0 : PP_SIM_EDB;
}

static void bind_text(sqlite3_stmt *st, int i, const char *v) {
  if (v)
    sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT);
  else
    sqlite3_bind_null(st, i);
}

/* ns to ms, NULL for unknown (< 0). */
static void bind_ms(sqlite3_stmt *st, int i, double ns) {
  if (ns < 0)
    sqlite3_bind_null(st, i);
  else
    sqlite3_bind_double(st, i, ns / 1e6);
}

static int step_done(sqlite3_stmt *st) {
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  return rc == SQLITE_DONE ? 0 : PP_SIM_EDB;
}

int pp_results_add_run(pp_results_db *db, const pp_results_run *run, int64_t *run_id) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db->db,
                         "INSERT INTO runs (kind, tool, scenario, scenario_path, seed, duration_s,"
                         " created_at, notes) VALUES (?,?,?,?,?,?,?,?)",
                         -1, &st, NULL) != SQLITE_OK)
    return PP_SIM_EDB;
  bind_text(st, 1, run->kind);
  bind_text(st, 2, run->tool);
  bind_text(st, 3, run->scenario);
  bind_text(st, 4, run->scenario_path);
  sqlite3_bind_int64(st, 5, (sqlite3_int64)run->seed);
  sqlite3_bind_double(st, 6, run->duration_s);
  bind_text(st, 7, run->created_at ? run->created_at : "");
  bind_text(st, 8, run->notes);
  int rc = step_done(st);
  sqlite3_finalize(st);
  if (!rc) *run_id = sqlite3_last_insert_rowid(db->db);
  return rc;
}

int pp_results_add_config(pp_results_db *db, int64_t run_id, const pp_results_config *c,
                          int64_t *config_id) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(
          db->db,
          "INSERT INTO configs (run_id, name, server, queue_model, workers, threads,"
          " autoscale, policy_hash, policy_text, variant) VALUES (?,?,?,?,?,?,?,?,?,?)",
          -1, &st, NULL) != SQLITE_OK)
    return PP_SIM_EDB;
  sqlite3_bind_int64(st, 1, run_id);
  bind_text(st, 2, c->name);
  bind_text(st, 3, c->server);
  bind_text(st, 4, c->queue_model);
  sqlite3_bind_int(st, 5, (int)c->workers);
  sqlite3_bind_int(st, 6, (int)c->threads);
  sqlite3_bind_int(st, 7, c->autoscale);
  bind_text(st, 8, c->policy_hash);
  bind_text(st, 9, c->policy_text);
  bind_text(st, 10, c->variant);
  int rc = step_done(st);
  sqlite3_finalize(st);
  if (!rc) *config_id = sqlite3_last_insert_rowid(db->db);
  return rc;
}

int pp_results_add_summary(pp_results_db *db, int64_t config_id, const pp_summary *s) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db->db,
                         "INSERT INTO summary VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,"
                         "?,?)",
                         -1, &st, NULL) != SQLITE_OK)
    return PP_SIM_EDB;
  int i = 1;
  sqlite3_bind_int64(st, i++, config_id);
  sqlite3_bind_int64(st, i++, (sqlite3_int64)s->requests);
  sqlite3_bind_int64(st, i++, (sqlite3_int64)s->completed);
  sqlite3_bind_int64(st, i++, (sqlite3_int64)s->completed_in_run);
  sqlite3_bind_int64(st, i++, (sqlite3_int64)s->shed);
  sqlite3_bind_int64(st, i++, (sqlite3_int64)s->timed_out);
  sqlite3_bind_int64(st, i++, (sqlite3_int64)s->errors);
  sqlite3_bind_int64(st, i++, (sqlite3_int64)s->unfinished);
  sqlite3_bind_double(st, i++, s->offered_rps);
  /* A negative rate means "not reported" (a measured run that failed its success check):
   * store NULL so no query can average it in as throughput. */
  if (s->achieved_rps < 0)
    sqlite3_bind_null(st, i++);
  else
    sqlite3_bind_double(st, i++, s->achieved_rps);
  bind_ms(st, i++, s->p50_ns);
  bind_ms(st, i++, s->p90_ns);
  bind_ms(st, i++, s->p99_ns);
  bind_ms(st, i++, s->p999_ns);
  bind_ms(st, i++, s->max_ns);
  bind_ms(st, i++, s->mean_ns);
  bind_ms(st, i++, s->excess_latency_ns);
  bind_ms(st, i++, s->queue_p95_ns);
  bind_ms(st, i++, s->queue_mean_ns);
  sqlite3_bind_double(st, i++, s->avg_workers);
  sqlite3_bind_int(st, i++, (int)s->peak_workers);
  sqlite3_bind_double(st, i++, s->avg_memory_bytes);
  sqlite3_bind_double(st, i++, s->peak_memory_bytes);
  sqlite3_bind_double(st, i++, s->worker_seconds);
  int rc = step_done(st);
  sqlite3_finalize(st);
  return rc;
}

int pp_results_add_timeline(pp_results_db *db, int64_t config_id, const pp_timeline_row *rows,
                            size_t n) {
  sqlite3_stmt *st = db->timeline;
  for (size_t k = 0; k < n; k++) {
    const pp_timeline_row *r = &rows[k];
    int i = 1;
    sqlite3_bind_int64(st, i++, config_id);
    sqlite3_bind_int(st, i++, (int)r->t_s);
    sqlite3_bind_int64(st, i++, (sqlite3_int64)r->arrivals);
    sqlite3_bind_double(st, i++, (double)r->completed);
    bind_ms(st, i++, r->p50_ns);
    bind_ms(st, i++, r->p99_ns);
    sqlite3_bind_int(st, i++, (int)r->workers);
    sqlite3_bind_int(st, i++, (int)r->workers_ready);
    bind_ms(st, i++, r->queue_p95_ns);
    if (r->queue_len < 0)
      sqlite3_bind_null(st, i++);
    else
      sqlite3_bind_int64(st, i++, r->queue_len);
    sqlite3_bind_int64(st, i++, (sqlite3_int64)r->shed);
    sqlite3_bind_int64(st, i++, (sqlite3_int64)r->timeouts);
    sqlite3_bind_double(st, i++, r->memory_bytes);
    if (step_done(st)) return PP_SIM_EDB;
  }
  return 0;
}

int pp_results_add_decision(pp_results_db *db, int64_t config_id, uint64_t tick, int64_t time_ns,
                            const char *action, uint32_t count, uint32_t workers_target,
                            const char *reason, const char *line) {
  sqlite3_stmt *st = db->decision;
  sqlite3_bind_int64(st, 1, config_id);
  sqlite3_bind_int64(st, 2, (sqlite3_int64)tick);
  sqlite3_bind_int64(st, 3, time_ns);
  bind_text(st, 4, action);
  sqlite3_bind_int(st, 5, (int)count);
  sqlite3_bind_int(st, 6, (int)workers_target);
  bind_text(st, 7, reason);
  bind_text(st, 8, line);
  return step_done(st);
}

struct sqlite3 *pp_results_sqlite(pp_results_db *db) {
  return db->db;
}

int pp_results_sweep_state(pp_results_db *db, const char *hash, uint32_t shard, uint32_t *shards,
                           int *has_shard) {
  sqlite3_stmt *st;
  int found = 0;
  *has_shard = 0;
  if (sqlite3_prepare_v2(db->db, "SELECT shards FROM sweeps WHERE sweep_hash = ?", -1, &st, NULL) !=
      SQLITE_OK)
    return PP_SIM_EDB;
  bind_text(st, 1, hash);
  if (sqlite3_step(st) == SQLITE_ROW) {
    found = 1;
    *shards = (uint32_t)sqlite3_column_int64(st, 0);
  }
  sqlite3_finalize(st);
  if (!found) return 0;
  if (sqlite3_prepare_v2(db->db, "SELECT 1 FROM sweep_shards WHERE sweep_hash = ? AND shard = ?",
                         -1, &st, NULL) != SQLITE_OK)
    return PP_SIM_EDB;
  bind_text(st, 1, hash);
  sqlite3_bind_int64(st, 2, shard);
  *has_shard = sqlite3_step(st) == SQLITE_ROW;
  sqlite3_finalize(st);
  return 1;
}

int pp_results_add_sweep(pp_results_db *db, const pp_results_sweep *sw) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db->db,
                         "INSERT OR IGNORE INTO sweeps (sweep_hash, scenario, scenario_hash,"
                         " definition, variants, seeds, configs, units, shards)"
                         " VALUES (?,?,?,?,?,?,?,?,?)",
                         -1, &st, NULL) != SQLITE_OK)
    return PP_SIM_EDB;
  bind_text(st, 1, sw->hash);
  bind_text(st, 2, sw->scenario);
  bind_text(st, 3, sw->scenario_hash);
  bind_text(st, 4, sw->definition);
  sqlite3_bind_int64(st, 5, (sqlite3_int64)sw->variants);
  sqlite3_bind_int64(st, 6, (sqlite3_int64)sw->seeds);
  sqlite3_bind_int64(st, 7, (sqlite3_int64)sw->configs);
  sqlite3_bind_int64(st, 8, (sqlite3_int64)sw->units);
  sqlite3_bind_int64(st, 9, sw->shards);
  int rc = step_done(st);
  sqlite3_finalize(st);
  return rc;
}

int pp_results_sweep_run(pp_results_db *db, const char *hash, const pp_results_run *run,
                         int64_t *run_id) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db->db, "SELECT run_id FROM sweep_runs WHERE sweep_hash = ? AND seed = ?",
                         -1, &st, NULL) != SQLITE_OK)
    return PP_SIM_EDB;
  bind_text(st, 1, hash);
  sqlite3_bind_int64(st, 2, (sqlite3_int64)run->seed);
  int found = sqlite3_step(st) == SQLITE_ROW;
  if (found) *run_id = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  if (found) return 0;
  if (pp_results_add_run(db, run, run_id)) return PP_SIM_EDB;
  if (sqlite3_prepare_v2(db->db, "INSERT INTO sweep_runs (run_id, sweep_hash, seed) VALUES (?,?,?)",
                         -1, &st, NULL) != SQLITE_OK)
    return PP_SIM_EDB;
  sqlite3_bind_int64(st, 1, *run_id);
  bind_text(st, 2, hash);
  sqlite3_bind_int64(st, 3, (sqlite3_int64)run->seed);
  int rc = step_done(st);
  sqlite3_finalize(st);
  return rc;
}

int pp_results_add_sweep_config(pp_results_db *db, int64_t config_id, const char *hash,
                                uint64_t unit, uint64_t variant, uint64_t seed, uint32_t shard) {
  sqlite3_stmt *st = db->sweep_config;
  if (!st && sqlite3_prepare_v2(db->db,
                                "INSERT INTO sweep_configs (config_id, sweep_hash, unit,"
                                " variant_index, seed, shard) VALUES (?,?,?,?,?,?)",
                                -1, &db->sweep_config, NULL) != SQLITE_OK)
    return PP_SIM_EDB;
  st = db->sweep_config;
  sqlite3_bind_int64(st, 1, config_id);
  bind_text(st, 2, hash);
  sqlite3_bind_int64(st, 3, (sqlite3_int64)unit);
  sqlite3_bind_int64(st, 4, (sqlite3_int64)variant);
  sqlite3_bind_int64(st, 5, (sqlite3_int64)seed);
  sqlite3_bind_int64(st, 6, shard);
  return step_done(st);
}

int pp_results_add_sweep_shard(pp_results_db *db, const char *hash, const pp_results_shard *s) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db->db,
                         "INSERT INTO sweep_shards (sweep_hash, shard, units, simulations, wall_s,"
                         " host, created_at) VALUES (?,?,?,?,?,?,?)",
                         -1, &st, NULL) != SQLITE_OK)
    return PP_SIM_EDB;
  bind_text(st, 1, hash);
  sqlite3_bind_int64(st, 2, s->shard);
  sqlite3_bind_int64(st, 3, (sqlite3_int64)s->units);
  sqlite3_bind_int64(st, 4, (sqlite3_int64)s->simulations);
  sqlite3_bind_double(st, 5, s->wall_s);
  bind_text(st, 6, s->host);
  bind_text(st, 7, s->created_at ? s->created_at : "");
  int rc = step_done(st);
  sqlite3_finalize(st);
  return rc;
}
