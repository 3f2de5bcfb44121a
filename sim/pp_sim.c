/* pp-sim: the discrete-event simulator's command line.
 *
 *   pp-sim run SCENARIO.yaml [--timeline] [--decisions F] [--db F] [--plot F] ...
 *   pp-sim sweep SCENARIO.yaml --set policy.FIELD=v1,v2 [--set ...] ...
 *   pp-sim schedule SCENARIO.yaml [--seed N] [--limit N]
 *   pp-sim cluster SCENARIO.yaml [--timeline] [--hosts] [--phases] [--cluster NAME] ...
 *
 * All the work is in libppsim; this file parses flags, prints, and writes files. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "control/control.h"
#include "sim/arrivals.h"
#include "sim/cluster.h"
#include "sim/engine.h"
#include "sim/launch.h"
#include "sim/report.h"
#include "sim/results.h"
#include "sim/scenario.h"
#include "sim/scenario_file.h"
#include "sim/sweep.h"
#include "sim/units.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void usage_main(FILE *f) {
  fprintf(f, "usage: pp-sim <command> [options]\n\n"
             "Simulates Ruby app servers (puma, puma-plus static, puma-plus autoscale) under the\n"
             "traffic a scenario describes (docs/SCENARIOS.md, docs/SIM.md).\n\n"
             "commands:\n"
             "  run SCENARIO       simulate every configuration and print the comparison\n"
             "  sweep SCENARIO     run policy variants (--set field=v1,v2) and rank them\n"
             "  merge OUT SHARD... join the shard databases of a sweep into one\n"
             "  launch ENGINE      write a Slurm, GNU parallel or Kubernetes job for a sweep\n"
             "  schedule SCENARIO  print the arrival schedule (what pp-bench sends)\n"
             "  cluster SCENARIO   simulate the scenario's clusters (hosts:, clusters:)\n"
             "  help [COMMAND]     this text, or a command's options\n\n"
             "`pp-sim COMMAND --help` shows a command's options.\n");
}

static void usage_run(FILE *f) {
  fprintf(f,
          "usage: pp-sim run SCENARIO.yaml [options]\n\n"
          "Simulates each configuration of the scenario and prints the summary table.\n\n"
          "options:\n"
          "  -c, --config NAME      only this configuration (repeatable)\n"
          "  -s, --seed N           arrival seed (default: the scenario's `seed`)\n"
          "  -t, --timeline         print the per-second timeline of every configuration\n"
          "  -d, --decisions FILE   write the controllers' decision log (JSONL) to FILE\n"
          "      --db FILE          append the run to a SQLite results database (docs/RESULTS.md)\n"
          "  -p, --plot FILE.png    draw the timelines with gnuplot\n"
          "  -q, --quiet            no summary table (useful with --db)\n"
          "      --scaling          print the scaling table (standby, recovery, memory) even\n"
          "                         when no policy has standby (it is printed when one has)\n"
          "  -h, --help             this text\n");
}

static void usage_sweep(FILE *f) {
  fprintf(f,
          "usage: pp-sim sweep SCENARIO.yaml --set policy.FIELD=v1,v2[,...] [--set ...] "
          "[options]\n\n"
          "Runs every combination of the --set values (a cross product) on the scenario's\n"
          "autoscale configurations and prints them ranked.\n\n"
          "options:\n"
          "  -S, --set FIELD=V1,V2  a policy field and its values (repeatable, up to %d)\n"
          "  -c, --config NAME      only this autoscale configuration (repeatable)\n"
          "  -s, --seed N           arrival seed (default: the scenario's `seed`)\n"
          "  -r, --rank METRIC      excess (default), p50, p99, p999, memory, workers, shed,\n"
          "                         timeouts, achieved (higher is better)\n"
          "      --seeds LIST       run every variant with each of these seeds: 1,2,7 or 1-50\n"
          "                         (instead of --seed)\n"
          "  -n, --top N            print only the best N rows\n"
          "      --db FILE          append every variant to a SQLite results database\n"
          "      --shard I/N        run only shard I of N (1 <= I <= N) of the variants x seeds\n"
          "                         into its own --db; join shards with pp-sim merge\n"
          "      --progress SECONDS progress on stderr: a bar on a terminal, else a line every\n"
          "                         SECONDS (default 10); 0 = none\n"
          "  -q, --quiet            no ranked table (a shard's rows are in its --db)\n"
          "      --check            check the arguments, print the sweep's hash, units and\n"
          "                         definition, run nothing\n"
          "  -h, --help             this text\n\n"
          "policy fields:",
          PP_SWEEP_MAX_AXES);
  for (size_t i = 0; pp_policy_field_names[i]; i++)
    fprintf(f, "%s%s", i % 6 ? " " : "\n  ", pp_policy_field_names[i]);
  fprintf(f, "\n");
}

static void usage_schedule(FILE *f) {
  fprintf(f, "usage: pp-sim schedule SCENARIO.yaml [--seed N] [--limit N]\n\n"
             "Prints the arrival schedule, one line per request: seq, intended time (ns), kind,\n"
             "path, and the simulator's cpu/io draws (ns); then its digest. pp-bench generates\n"
             "the same schedule from the same scenario and seed.\n\n"
             "options:\n"
             "  -s, --seed N    arrival seed (default: the scenario's `seed`)\n"
             "  -l, --limit N   print only the first N arrivals (the digest covers all)\n"
             "  -h, --help      this text\n");
}

static int load(const char *path, pp_scenario *scn) {
  pp_scn_error err;
  int rc = pp_scenario_load(scn, path, &err);
  if (rc) {
    char buf[1200];
    fprintf(stderr, "pp-sim: %s\n", pp_scn_error_format(&err, buf, sizeof buf));
    return 2;
  }
  return 0;
}

static int parse_seed(const char *v, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long x = strtoull(v, &end, 10);
  if (errno || !*v || *end || v[0] == '-') {
    fprintf(stderr, "pp-sim: --seed: expected a whole number, got \"%s\"\n", v);
    return -1;
  }
  *out = x;
  return 0;
}

static void iso_now(char *buf, size_t cap) {
  time_t t = time(NULL);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static const char *server_name(pp_server_kind k) {
  return k == PP_SERVER_PUMA ? "puma" : "pumaplus";
}

static const char *queue_name(pp_queue_model q) {
  return q == PP_QUEUE_FIFO ? "fifo" : "per_worker";
}

/* Writes one configuration's results to the database. */
static int db_write_config(pp_results_db *db, int64_t run_id, const pp_config *c,
                           const pp_policy *pol, const char *variant, const pp_sim_result *r,
                           int64_t *config_id_out) {
  char hash[20], canon[4096];
  pp_results_config rc = {c->name,
                          server_name(c->server),
                          queue_name(c->queue),
                          c->workers,
                          c->threads,
                          c->autoscale,
                          NULL,
                          NULL,
                          variant};
  if (c->autoscale) {
    snprintf(hash, sizeof hash, "%016" PRIx64, pp_policy_hash(pol));
    if (pp_policy_canonical(pol, canon, sizeof canon) < 0) canon[0] = 0;
    rc.policy_hash = hash;
    rc.policy_text = canon;
  }
  int64_t config_id;
  if (pp_results_add_config(db, run_id, &rc, &config_id)) return -1;
  if (config_id_out) *config_id_out = config_id;
  if (pp_results_add_summary(db, config_id, &r->summary)) return -1;
  if (pp_results_add_timeline(db, config_id, r->timeline, r->timeline_len)) return -1;
  for (size_t i = 0; i < r->n_ticks; i++) {
    const pp_sim_tick *t = &r->ticks[i];
    char *line = strndup(r->decisions + t->line_off, t->line_len);
    if (!line) return -1;
    if (line[0] && line[strlen(line) - 1] == '\n') line[strlen(line) - 1] = 0;
    int e = pp_results_add_decision(db, config_id, t->tick, t->time_ns, pp_action_name(t->action),
                                    t->count, t->workers_target, t->reason, line);
    free(line);
    if (e) return -1;
  }
  return 0;
}

static int open_db(const char *path, pp_results_db **db) {
  char err[512];
  if (pp_results_open(db, path, err, sizeof err)) {
    fprintf(stderr, "pp-sim: %s\n", err);
    return -1;
  }
  return 0;
}

static int selected(const pp_scenario *scn, const char **only, int n_only, uint32_t i) {
  if (!n_only) return 1;
  for (int k = 0; k < n_only; k++)
    if (strcmp(scn->configs[i].name, only[k]) == 0) return 1;
  return 0;
}

static int check_only(const pp_scenario *scn, const char **only, int n_only, const char *path) {
  for (int k = 0; k < n_only; k++)
    if (pp_scenario_find_config(scn, only[k]) < 0) {
      fprintf(stderr, "pp-sim: %s has no configuration named \"%s\" (it has:", path, only[k]);
      for (uint32_t i = 0; i < scn->n_configs; i++)
        fprintf(stderr, " %s", scn->configs[i].name);
      fprintf(stderr, ")\n");
      return -1;
    }
  return 0;
}

static int cmd_run(int argc, char **argv) {
  static const struct option opts[] = {
      {"config", required_argument, 0, 'c'}, {"seed", required_argument, 0, 's'},
      {"timeline", no_argument, 0, 't'},     {"decisions", required_argument, 0, 'd'},
      {"db", required_argument, 0, 'D'},     {"plot", required_argument, 0, 'p'},
      {"quiet", no_argument, 0, 'q'},        {"scaling", no_argument, 0, 'S'},
      {"help", no_argument, 0, 'h'},         {0, 0, 0, 0}};
  const char *only[PP_SCN_MAX_CONFIGS];
  int n_only = 0, timeline = 0, quiet = 0, have_seed = 0, scaling = 0;
  const char *decisions = NULL, *dbpath = NULL, *plot = NULL;
  uint64_t seed = 0;
  int ch;
  optind = 1;
  while ((ch = getopt_long(argc, argv, "c:s:td:p:qh", opts, NULL)) != -1) {
    switch (ch) {
    case 'c':
      if (n_only == PP_SCN_MAX_CONFIGS) {
        fprintf(stderr, "pp-sim run: too many --config\n");
        return 2;
      }
      only[n_only++] = optarg;
      break;
    case 's':
      if (parse_seed(optarg, &seed)) return 2;
      have_seed = 1;
      break;
    case 't': timeline = 1; break;
    case 'd': decisions = optarg; break;
    case 'D': dbpath = optarg; break;
    case 'p': plot = optarg; break;
    case 'q': quiet = 1; break;
    case 'S': scaling = 1; break;
    case 'h': usage_run(stdout); return 0;
    default: usage_run(stderr); return 2;
    }
  }
  if (optind != argc - 1) {
    fprintf(stderr, "pp-sim run: expected one scenario file\n");
    usage_run(stderr);
    return 2;
  }
  const char *path = argv[optind];
  pp_scenario *scn = malloc(sizeof *scn);
  if (!scn) return 1;
  int rc = load(path, scn);
  if (!rc && check_only(scn, only, n_only, path)) rc = 2;
  if (rc) {
    pp_scenario_dispose(scn);
    free(scn);
    return rc;
  }
  if (!have_seed) seed = scn->seed;

  pp_sim_result *res = calloc(scn->n_configs, sizeof *res);
  pp_report_item items[PP_SCN_MAX_CONFIGS];
  uint32_t idx[PP_SCN_MAX_CONFIGS];
  size_t n = 0;
  uint64_t events = 0;
  double t0 = now_s();
  for (uint32_t i = 0; i < scn->n_configs && res; i++) {
    if (!selected(scn, only, n_only, i)) continue;
    pp_sim_options o;
    pp_sim_options_default(&o, scn);
    o.seed = seed;
    o.keep_decisions = scn->configs[i].autoscale;
    rc = pp_sim_run(scn, i, &o, &res[n]);
    if (rc) {
      fprintf(stderr, "pp-sim: config %s: %s\n", scn->configs[i].name, pp_sim_strerror(rc));
      rc = 1;
      goto out;
    }
    events += res[n].events;
    items[n] = (pp_report_item){scn->configs[i].name,
                                &res[n].summary,
                                res[n].timeline,
                                res[n].timeline_len,
                                scn->configs[i].autoscale ? &scn->configs[i].policy : NULL,
                                res[n].activations,
                                res[n].avg_standby,
                                0,
                                0,
                                &res[n].busy_latency,
                                &res[n].standing_latency,
                                res[n].busy_served,
                                res[n].busy_s};
    for (size_t t = 0; t < res[n].n_ticks; t++) {
      items[n].scale_ups += res[n].ticks[t].action == PP_ACTION_SPAWN_WORKER;
      items[n].scale_downs += res[n].ticks[t].action == PP_ACTION_RETIRE_WORKER;
    }
    idx[n++] = i;
  }
  double elapsed = now_s() - t0;
  if (!quiet) {
    printf("scenario %s (%s), seed %" PRIu64 ", %.0f s, %u cores\n", scn->name, path, seed,
           scn->duration_ns / 1e9, scn->cores);
    pp_report_summary(stdout, items, n, scn->slo_ns / 1e6);
    int any_shed = 0;
    for (size_t k = 0; k < n; k++)
      any_shed |= items[k].policy && items[k].policy->shed_enabled;
    if (any_shed) pp_report_admission(stdout, items, n, scn);
    int any_scaling = 0;
    for (size_t k = 0; k < n; k++)
      any_scaling |= items[k].policy && items[k].policy->standby;
    if (any_scaling || scaling) pp_report_scaling(stdout, items, n, scn);
  }
  if (timeline)
    for (size_t k = 0; k < n; k++)
      pp_report_timeline(stdout, &items[k]);
  fprintf(stderr, "pp-sim: %zu configs, %" PRIu64 " events in %.3f s (%.2f M events/s)\n", n,
          events, elapsed, elapsed > 0 ? events / elapsed / 1e6 : 0);

  if (decisions) {
    FILE *f = fopen(decisions, "w");
    if (!f) {
      fprintf(stderr, "pp-sim: cannot write %s: %s\n", decisions, strerror(errno));
      rc = 1;
      goto out;
    }
    /* Each autoscale config's ticks follow a header line carrying its policy, so
     * `pp-replay FILE` verifies without being handed the policy file. */
    for (size_t k = 0; k < n; k++) {
      if (!res[k].decisions_len) continue;
      pp_declog_header h;
      char hline[PP_DECLOG_LINE_MAX * 2];
      int hn = pp_declog_header_init(&h, &scn->configs[idx[k]].policy, "sim");
      if (hn >= 0 && scn->configs[idx[k]].ractors) snprintf(h.slots, sizeof h.slots, "ractor");
      if (hn >= 0 && scn->configs[idx[k]].fibers) snprintf(h.slots, sizeof h.slots, "fiber");
      if (hn >= 0) hn = pp_declog_encode_header(&h, hline, sizeof hline);
      if (hn < 0) {
        fprintf(stderr, "pp-sim: cannot encode the policy header for %s: %s\n",
                scn->configs[idx[k]].name, pp_ctl_strerror(hn));
        rc = 1;
      } else {
        fwrite(hline, 1, (size_t)hn, f);
      }
      fwrite(res[k].decisions, 1, res[k].decisions_len, f);
    }
    if (fclose(f)) {
      fprintf(stderr, "pp-sim: writing %s failed: %s\n", decisions, strerror(errno));
      rc = 1;
      goto out;
    }
  }
  if (dbpath) {
    pp_results_db *db;
    if (open_db(dbpath, &db)) {
      rc = 1;
      goto out;
    }
    char when[32];
    iso_now(when, sizeof when);
    pp_results_run run = {"simulated", "pp-sim", scn->name, path, seed, scn->duration_ns / 1e9,
                          when,        NULL};
    int64_t run_id;
    int e = pp_results_begin(db) || pp_results_add_run(db, &run, &run_id);
    for (size_t k = 0; k < n && !e; k++)
      e = db_write_config(db, run_id, &scn->configs[idx[k]], &scn->configs[idx[k]].policy, NULL,
                          &res[k], NULL);
    if (!e) e = pp_results_commit(db);
    if (e) {
      fprintf(stderr, "pp-sim: writing %s failed: %s\n", dbpath, pp_results_errmsg(db));
      rc = 1;
    } else {
      fprintf(stderr, "pp-sim: run %" PRId64 " written to %s\n", run_id, dbpath);
    }
    pp_results_close(db);
  }
  if (plot && !rc) {
    char err[512], title[256];
    snprintf(title, sizeof title, "pp-sim: %s (seed %" PRIu64 ")", scn->name, seed);
    if (pp_report_plot(plot, title, items, n, err, sizeof err)) {
      fprintf(stderr, "pp-sim: --plot %s: %s\n", plot, err);
      rc = 1;
    }
  }
out:
  for (size_t k = 0; k < n; k++)
    pp_sim_result_dispose(&res[k]);
  free(res);
  pp_scenario_dispose(scn);
  free(scn);
  return rc;
}

typedef struct sweep_row {
  size_t variant;
  uint32_t config;
  uint64_t seed;
  char label[256];
  pp_summary s;
  double key;
} sweep_row;

static int rank_cmp(const void *a, const void *b) {
  const sweep_row *x = a, *y = b;
  if (x->key < y->key) return -1;
  if (x->key > y->key) return 1;
  if (x->variant != y->variant) return x->variant < y->variant ? -1 : 1;
  if (x->seed != y->seed) return x->seed < y->seed ? -1 : 1;
  return x->config < y->config ? -1 : x->config > y->config;
}

static int rank_key(const char *metric, const pp_summary *s, double *key) {
  if (!strcmp(metric, "excess"))
    *key = s->excess_latency_ns;
  else if (!strcmp(metric, "p50"))
    *key = s->p50_ns;
  else if (!strcmp(metric, "p99"))
    *key = s->p99_ns;
  else if (!strcmp(metric, "p999"))
    *key = s->p999_ns;
  else if (!strcmp(metric, "memory"))
    *key = s->avg_memory_bytes;
  else if (!strcmp(metric, "workers"))
    *key = s->avg_workers;
  else if (!strcmp(metric, "shed"))
    *key = (double)s->shed;
  else if (!strcmp(metric, "timeouts"))
    *key = (double)s->timed_out;
  else if (!strcmp(metric, "achieved"))
    *key = -s->achieved_rps;
  else
    return -1;
  return 0;
}

/* FNV-1a of a file's bytes, as 16 hex digits. */
static int file_hash(const char *path, char out[17]) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  uint64_t h = PP_SWEEP_FNV_SEED;
  char buf[8192];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0)
    h = pp_sweep_fnv1a(h, buf, n);
  int bad = ferror(f);
  fclose(f);
  if (bad) return -1;
  snprintf(out, 17, "%016" PRIx64, h);
  return 0;
}

/* The sweep's definition (what makes two shards parts of one sweep) and its hash: the scenario
 * file's bytes, the swept configurations with their base policies, the axes and the seeds. */
static int sweep_definition(const pp_sweep *sw, const pp_scenario *scn, const char *path,
                            const uint32_t *cfgs, uint32_t n_cfg, char *def, size_t cap,
                            char scn_hash[17], char hash[17]) {
  if (file_hash(path, scn_hash)) {
    fprintf(stderr, "pp-sim sweep: cannot read %s: %s\n", path, strerror(errno));
    return -1;
  }
  size_t used = 0;
  int w = snprintf(def, cap, "scenario %s %s\n", scn->name, scn_hash);
  if (w < 0 || (size_t)w >= cap) return -1;
  used = (size_t)w;
  for (uint32_t k = 0; k < n_cfg; k++) {
    const pp_config *c = &scn->configs[cfgs[k]];
    w = snprintf(def + used, cap - used, "config %s policy %016" PRIx64 "\n", c->name,
                 pp_policy_hash(&c->policy));
    if (w < 0 || (size_t)w >= cap - used) return -1;
    used += (size_t)w;
  }
  if (pp_sweep_canonical(sw, def + used, cap - used) < 0) {
    fprintf(stderr, "pp-sim sweep: the sweep's definition is too long\n");
    return -1;
  }
  snprintf(hash, 17, "%016" PRIx64, pp_sweep_fnv1a(PP_SWEEP_FNV_SEED, def, strlen(def)));
  return 0;
}

/* What --check (and pp-sim launch) learns about a sweep without running it. */
typedef struct sweep_check {
  char hash[17];
  char scenario[128];
  uint64_t units;
} sweep_check;

/* pp-sim sweep; with chk, only checks the arguments and fills *chk (pp-sim launch). */
static int sweep_main(int argc, char **argv, sweep_check *chk) {
  static const struct option opts[] = {{"set", required_argument, 0, 'S'},
                                       {"config", required_argument, 0, 'c'},
                                       {"seed", required_argument, 0, 's'},
                                       {"seeds", required_argument, 0, 'E'},
                                       {"rank", required_argument, 0, 'r'},
                                       {"top", required_argument, 0, 'n'},
                                       {"db", required_argument, 0, 'D'},
                                       {"shard", required_argument, 0, 'H'},
                                       {"progress", required_argument, 0, 'P'},
                                       {"quiet", no_argument, 0, 'q'},
                                       {"check", no_argument, 0, 'K'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  pp_sweep *sw = malloc(sizeof *sw);
  if (!sw) return 1;
  pp_sweep_init(sw);
  const char *only[PP_SCN_MAX_CONFIGS];
  int n_only = 0, have_seed = 0;
  const char *metric = "excess", *dbpath = NULL, *seeds_spec = NULL;
  long top = -1;
  uint64_t seed = 0;
  uint32_t shard = 1, shards = 1;
  int sharded = 0, quiet = 0, check = 0;
  double progress = -1; /* default: a bar on a terminal, else a line every 10 s */
  char err[512];
  int ch, rc = 0;
  optind = 0; /* 0, not 1: GNU getopt re-initialises (pp-sim launch parsed with "+" first) */
  while ((ch = getopt_long(argc, argv, "S:c:s:r:n:qh", opts, NULL)) != -1) {
    switch (ch) {
    case 'S':
      if (pp_sweep_add(sw, optarg, err, sizeof err)) {
        fprintf(stderr, "pp-sim sweep: %s\n", err);
        free(sw);
        return 2;
      }
      break;
    case 'c':
      if (n_only == PP_SCN_MAX_CONFIGS) {
        free(sw);
        return 2;
      }
      only[n_only++] = optarg;
      break;
    case 's':
      if (parse_seed(optarg, &seed)) {
        free(sw);
        return 2;
      }
      have_seed = 1;
      break;
    case 'q': quiet = 1; break;
    case 'K': check = 1; break;
    case 'E': seeds_spec = optarg; break;
    case 'H':
      if (pp_sweep_parse_shard(optarg, &shard, &shards, err, sizeof err)) {
        fprintf(stderr, "pp-sim sweep: %s\n", err);
        free(sw);
        return 2;
      }
      sharded = 1;
      break;
    case 'P': {
      char *end;
      progress = strtod(optarg, &end);
      if (*end || end == optarg || !(progress >= 0)) {
        fprintf(stderr, "pp-sim sweep: --progress: expected seconds (0 = none), got \"%s\"\n",
                optarg);
        free(sw);
        return 2;
      }
      break;
    }
    case 'r': metric = optarg; break;
    case 'n': {
      char *end;
      top = strtol(optarg, &end, 10);
      if (*end || top < 1) {
        fprintf(stderr, "pp-sim sweep: --top: expected a positive number, got \"%s\"\n", optarg);
        free(sw);
        return 2;
      }
      break;
    }
    case 'D': dbpath = optarg; break;
    case 'h':
      usage_sweep(stdout);
      free(sw);
      return 0;
    default:
      usage_sweep(stderr);
      free(sw);
      return 2;
    }
  }
  double dummy;
  pp_summary zero;
  memset(&zero, 0, sizeof zero);
  if (rank_key(metric, &zero, &dummy)) {
    fprintf(stderr, "pp-sim sweep: --rank: unknown metric \"%s\" (see --help)\n", metric);
    free(sw);
    return 2;
  }
  if (optind != argc - 1) {
    fprintf(stderr, "pp-sim sweep: expected one scenario file\n");
    usage_sweep(stderr);
    free(sw);
    return 2;
  }
  if (sw->n_axes == 0) {
    fprintf(stderr, "pp-sim sweep: nothing to sweep: give at least one --set FIELD=V1,V2\n");
    free(sw);
    return 2;
  }
  if (seeds_spec && have_seed) {
    fprintf(stderr, "pp-sim sweep: give --seed or --seeds, not both\n");
    free(sw);
    return 2;
  }
  if (seeds_spec && pp_sweep_set_seeds(sw, seeds_spec, err, sizeof err)) {
    fprintf(stderr, "pp-sim sweep: %s\n", err);
    free(sw);
    return 2;
  }
  if (sharded && !dbpath && !check && !chk) {
    fprintf(stderr, "pp-sim sweep: --shard needs --db FILE (each shard writes its own database; "
                    "pp-sim merge joins them)\n");
    free(sw);
    return 2;
  }
  const char *path = argv[optind];
  pp_scenario *scn = malloc(sizeof *scn);
  if (!scn) {
    free(sw);
    return 1;
  }
  rc = load(path, scn);
  if (!rc && check_only(scn, only, n_only, path)) rc = 2;
  uint32_t cfgs[PP_SCN_MAX_CONFIGS], n_cfg = 0;
  for (uint32_t i = 0; !rc && i < scn->n_configs; i++)
    if (scn->configs[i].autoscale && selected(scn, only, n_only, i)) cfgs[n_cfg++] = i;
  if (!rc && n_cfg == 0) {
    fprintf(stderr, "pp-sim sweep: %s has no (selected) autoscale configuration to sweep\n", path);
    rc = 2;
  }
  if (!rc && !seeds_spec) {
    char one[32];
    snprintf(one, sizeof one, "%" PRIu64, have_seed ? seed : scn->seed);
    if (pp_sweep_set_seeds(sw, one, err, sizeof err)) rc = 2;
  }
  static char def[PP_SWEEP_MAX_AXES * PP_SWEEP_MAX_VALUES * (PP_SWEEP_VALUE_MAX + 1) +
                  PP_SWEEP_MAX_SEEDS * 21 + PP_SCN_MAX_CONFIGS * 160 + 1024];
  char scn_hash[17], hash[17];
  if (!rc && sweep_definition(sw, scn, path, cfgs, n_cfg, def, sizeof def, scn_hash, hash)) rc = 1;
  if (!rc && (check || chk)) {
    size_t units = pp_sweep_units(sw);
    if (chk) {
      snprintf(chk->hash, sizeof chk->hash, "%s", hash);
      snprintf(chk->scenario, sizeof chk->scenario, "%s", scn->name);
      chk->units = units;
    } else {
      printf("sweep %s of %s: %zu variants x %zu seeds x %u configs = %zu units\n%s", hash,
             scn->name, pp_sweep_count(sw), sw->n_seeds, n_cfg, units, def);
    }
    rc = 0;
    pp_scenario_dispose(scn);
    free(scn);
    free(sw);
    return 0;
  }
  if (rc) {
    pp_scenario_dispose(scn);
    free(scn);
    free(sw);
    return rc;
  }
  size_t nv = pp_sweep_count(sw), n_units = pp_sweep_units(sw);
  size_t my_units = pp_sweep_shard_size(n_units, shard, shards), total = my_units * n_cfg;
  sweep_row *rows = calloc(total ? total : 1, sizeof *rows);
  pp_results_db *db = NULL;
  char when[32];
  iso_now(when, sizeof when);
  if (!rows) rc = 1;
  if (!rc && dbpath) {
    uint32_t have_shards = 0;
    int have_shard = 0, st;
    if (open_db(dbpath, &db))
      rc = 1;
    else if ((st = pp_results_sweep_state(db, hash, shard, &have_shards, &have_shard)) < 0) {
      fprintf(stderr, "pp-sim: %s: %s\n", dbpath, pp_results_errmsg(db));
      rc = 1;
    } else if (st == 1 && have_shards != shards) {
      fprintf(stderr,
              "pp-sim sweep: %s already holds sweep %s split into %u shard(s), not %u: use "
              "another database\n",
              dbpath, hash, have_shards, shards);
      rc = 1;
    } else if (st == 1 && have_shard) {
      fprintf(stderr,
              "pp-sim sweep: %s already holds shard %u/%u of sweep %s: its rows would be "
              "duplicated (use another database)\n",
              dbpath, shard, shards, hash);
      rc = 1;
    } else {
      pp_results_sweep rs = {hash,        scn->name,       scn_hash, def,   nv,
                             sw->n_seeds, (uint64_t)n_cfg, n_units,  shards};
      if (pp_results_begin(db) || pp_results_add_sweep(db, &rs)) {
        fprintf(stderr, "pp-sim: %s: %s\n", dbpath, pp_results_errmsg(db));
        rc = 1;
      }
    }
  }
  int tty = isatty(2);
  if (progress < 0) progress = tty ? 0.1 : 10;
  int bar = tty && progress > 0;
  double t0 = now_s(), last = t0;
  size_t done = 0;
  for (size_t k = 0; k < my_units && !rc; k++) {
    size_t u = pp_sweep_shard_unit(k, shard, shards);
    size_t v = u / sw->n_seeds;
    uint64_t useed = sw->seeds[u % sw->n_seeds];
    int64_t run_id = 0;
    if (db) {
      pp_results_run run = {"simulated", "pp-sim sweep",         scn->name, path,
                            useed,       scn->duration_ns / 1e9, when,      NULL};
      if (pp_results_sweep_run(db, hash, &run, &run_id)) {
        fprintf(stderr, "pp-sim: %s: %s\n", dbpath, pp_results_errmsg(db));
        rc = 1;
        break;
      }
    }
    for (uint32_t kc = 0; kc < n_cfg && !rc; kc++) {
      const pp_config *c = &scn->configs[cfgs[kc]];
      sweep_row *row = &rows[done];
      pp_policy pol = c->policy;
      if (pp_sweep_apply(sw, v, &pol, row->label, sizeof row->label, err, sizeof err)) {
        fprintf(stderr, "%spp-sim sweep: config %s: %s\n", bar ? "\n" : "", c->name, err);
        rc = 2;
        break;
      }
      pp_sim_options o;
      pp_sim_options_default(&o, scn);
      o.seed = useed;
      o.policy = &pol;
      o.keep_timeline = db != NULL;
      o.keep_decisions = db != NULL;
      pp_sim_result r;
      int e = pp_sim_run(scn, cfgs[kc], &o, &r);
      if (e) {
        fprintf(stderr, "%spp-sim sweep: config %s: %s\n", bar ? "\n" : "", c->name,
                pp_sim_strerror(e));
        pp_sim_result_dispose(&r);
        rc = 1;
        break;
      }
      row->variant = v;
      row->config = cfgs[kc];
      row->seed = useed;
      row->s = r.summary;
      rank_key(metric, &r.summary, &row->key);
      if (db) {
        int64_t config_id = 0;
        if (db_write_config(db, run_id, c, &pol, row->label, &r, &config_id) ||
            pp_results_add_sweep_config(db, config_id, hash, u, v, useed, shard)) {
          fprintf(stderr, "%spp-sim: %s: %s\n", bar ? "\n" : "", dbpath, pp_results_errmsg(db));
          rc = 1;
        }
      }
      pp_sim_result_dispose(&r);
      done++;
      double t = now_s();
      if (progress > 0 && (t - last >= progress || done == total)) {
        double el = t - t0;
        char where[48] = "";
        if (sharded) snprintf(where, sizeof where, " (shard %u/%u)", shard, shards);
        if (bar) {
          int width = 40, fill = (int)(width * done / total);
          fprintf(stderr, "\r[%.*s%*s] %zu/%zu runs%s  %.1fs elapsed, ~%.0fs left ", fill,
                  "########################################", width - fill, "", done, total, where,
                  el, el / done * (total - done));
        } else if (done < total) {
          fprintf(stderr, "pp-sim sweep: %zu/%zu runs%s, %.0f s elapsed, ~%.0f s left\n", done,
                  total, where, el, el / done * (total - done));
        }
        fflush(stderr);
        last = t;
      }
    }
  }
  if (bar && done) fprintf(stderr, "\n");
  double wall = now_s() - t0;
  if (db) {
    char host[256] = "";
    if (gethostname(host, sizeof host - 1)) host[0] = 0;
    pp_results_shard rs = {shard, my_units, done, wall, host[0] ? host : NULL, when};
    if (!rc && (pp_results_add_sweep_shard(db, hash, &rs) || pp_results_commit(db))) {
      fprintf(stderr, "pp-sim: %s: %s\n", dbpath, pp_results_errmsg(db));
      rc = 1;
    }
    if (!rc)
      fprintf(stderr, "pp-sim: sweep %s shard %u/%u (%zu of %zu units) written to %s\n", hash,
              shard, shards, my_units, n_units, dbpath);
    pp_results_close(db);
  }
  if (!rc && !quiet) {
    qsort(rows, done, sizeof *rows, rank_cmp);
    printf("sweep of %s: %zu variants x %u configs", scn->name, nv, n_cfg);
    if (sw->n_seeds > 1) printf(" x %zu seeds", sw->n_seeds);
    if (sharded) printf(", shard %u/%u (%zu of %zu units)", shard, shards, my_units, n_units);
    printf(", ranked by %s", metric);
    if (sw->n_seeds == 1) printf(" (seed %" PRIu64 ")", sw->seeds[0]);
    printf("\n");
    printf("%4s  %-36s %-18s %8s %8s %8s %11s %6s %7s %6s %8s%s\n", "rank", "variant", "config",
           "achieved", "p50", "p99", "excess_s", "shed", "timeout", "avg_w", "avg_mem",
           sw->n_seeds > 1 ? "  seed" : "");
    size_t show = top > 0 && (size_t)top < done ? (size_t)top : done;
    for (size_t i = 0; i < show; i++) {
      const sweep_row *r = &rows[i];
      char a[24], b[24], m[24];
      printf("%4zu  %-36s %-18s %8.1f %8s %8s %11.1f %6llu %7llu %6.2f %8s", i + 1, r->label,
             scn->configs[r->config].name, r->s.achieved_rps,
             pp_units_format_ns(r->s.p50_ns, a, sizeof a),
             pp_units_format_ns(r->s.p99_ns, b, sizeof b), r->s.excess_latency_ns / 1e9,
             (unsigned long long)r->s.shed, (unsigned long long)r->s.timed_out, r->s.avg_workers,
             pp_units_format_bytes(r->s.avg_memory_bytes, m, sizeof m));
      if (sw->n_seeds > 1) printf("  %" PRIu64, r->seed);
      printf("\n");
    }
  }
  if (!rc) fprintf(stderr, "pp-sim: %zu simulations in %.2f s\n", done, wall);
  free(rows);
  pp_scenario_dispose(scn);
  free(scn);
  free(sw);
  return rc;
}

static int cmd_sweep(int argc, char **argv) {
  return sweep_main(argc, argv, NULL);
}

static void usage_launch(FILE *f) {
  fprintf(f,
          "usage: pp-sim launch slurm|parallel|k8s --shards N [options] -- SCENARIO.yaml "
          "SWEEP-OPTIONS...\n\n"
          "Writes the job that runs a sweep's N shards on a batch engine: task I runs\n"
          "  pp-sim sweep SCENARIO.yaml SWEEP-OPTIONS... --shard I/N --db OUT/shard-I.db --quiet\n"
          "slurm: a job-array script for sbatch; parallel: a GNU parallel command line (local\n"
          "cores, or other hosts with --sshlogin); k8s: a Kubernetes Indexed Job manifest.\n"
          "The sweep options are checked first (as pp-sim sweep --check). Join the shards with\n"
          "pp-sim merge OUT/merged.db OUT/shard-*.db (docs/SIM.md).\n\n"
          "options:\n"
          "  -N, --shards N         number of shards (tasks)\n"
          "  -o, --output FILE      write the job to FILE (default: stdout)\n"
          "      --out DIR          where shard databases go (default: shards; k8s: /results,\n"
          "                         the results volume's mount point)\n"
          "      --name NAME        job name (default: pp-sweep)\n"
          "      --pp-sim PATH      the pp-sim the tasks run (default: this one's absolute\n"
          "                         path; k8s: pp-sim, from the image's PATH)\n"
          "  slurm:\n"
          "      --partition P      #SBATCH --partition\n"
          "      --time T           #SBATCH --time (the cluster's default otherwise)\n"
          "      --max-running M    at most M tasks at once (--array=1-N%%M)\n"
          "  parallel:\n"
          "  -j, --jobs J           tasks at once per host (default: one per core)\n"
          "      --sshlogin LOGIN   run on this host too (repeatable; \":\" is this machine);\n"
          "                         the scenario goes there with --basefile and each shard\n"
          "                         database comes back with --return\n"
          "  k8s:\n"
          "      --image IMAGE      the container image holding pp-sim and the scenario\n"
          "      --workdir DIR      the directory in the image the scenario path is relative to\n"
          "      --claim PVC        the ReadWriteMany volume claim for the shard databases\n"
          "      --parallelism P    pods at once (default: N)\n"
          "  -h, --help             this text\n");
}

static int cmd_launch(int argc, char **argv) {
  static const struct option opts[] = {
      {"shards", required_argument, 0, 'N'}, {"output", required_argument, 0, 'o'},
      {"out", required_argument, 0, 'O'},    {"name", required_argument, 0, 'a'},
      {"pp-sim", required_argument, 0, 'p'}, {"partition", required_argument, 0, 'P'},
      {"time", required_argument, 0, 't'},   {"max-running", required_argument, 0, 'M'},
      {"jobs", required_argument, 0, 'j'},   {"sshlogin", required_argument, 0, 'L'},
      {"image", required_argument, 0, 'i'},  {"workdir", required_argument, 0, 'w'},
      {"claim", required_argument, 0, 'C'},  {"parallelism", required_argument, 0, 'R'},
      {"help", no_argument, 0, 'h'},         {0, 0, 0, 0}};
  if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
    usage_launch(stdout);
    return 0;
  }
  if (argc < 2) {
    usage_launch(stderr);
    return 2;
  }
  pp_launch l;
  memset(&l, 0, sizeof l);
  const char *engine = argv[1], *output = NULL;
  if (!strcmp(engine, "slurm"))
    l.engine = PP_LAUNCH_SLURM;
  else if (!strcmp(engine, "parallel"))
    l.engine = PP_LAUNCH_PARALLEL;
  else if (!strcmp(engine, "k8s") || !strcmp(engine, "kubernetes"))
    l.engine = PP_LAUNCH_K8S;
  else {
    fprintf(stderr, "pp-sim launch: unknown engine \"%s\" (slurm, parallel or k8s)\n", engine);
    return 2;
  }
  const char *logins[64];
  l.name = "pp-sweep";
  l.out_dir = l.engine == PP_LAUNCH_K8S ? "/results" : "shards";
  int ch;
  optind = 0;
  /* Parse from the engine on; `--` ends our options, the rest is the sweep's. */
  while ((ch = getopt_long(argc - 1, argv + 1, "+N:o:j:h", opts, NULL)) != -1) {
    char *end;
    unsigned long v = 0;
    if (strchr("NMjR", ch)) {
      v = strtoul(optarg, &end, 10);
      if (*end || !*optarg || v < 1 || v > 1000000) {
        fprintf(stderr, "pp-sim launch: expected a number from 1 to 1000000, got \"%s\"\n", optarg);
        return 2;
      }
    }
    switch (ch) {
    case 'N': l.shards = (uint32_t)v; break;
    case 'o': output = optarg; break;
    case 'O': l.out_dir = optarg; break;
    case 'a': l.name = optarg; break;
    case 'p': l.pp_sim = optarg; break;
    case 'P': l.partition = optarg; break;
    case 't': l.time_limit = optarg; break;
    case 'M': l.max_running = (uint32_t)v; break;
    case 'j': l.jobs = (uint32_t)v; break;
    case 'L':
      if (l.n_sshlogins == 64) return 2;
      logins[l.n_sshlogins++] = optarg;
      break;
    case 'i': l.image = optarg; break;
    case 'w': l.workdir = optarg; break;
    case 'C': l.claim = optarg; break;
    case 'R': l.parallelism = (uint32_t)v; break;
    case 'h': usage_launch(stdout); return 0;
    default: usage_launch(stderr); return 2;
    }
  }
  int first = optind + 1; /* index into argv */
  if (first > 1 && strcmp(argv[first - 1], "--") != 0) {
    fprintf(stderr,
            "pp-sim launch: put the sweep after --: pp-sim launch %s --shards N -- "
            "SCENARIO.yaml --set FIELD=V1,V2 ...\n",
            engine);
    return 2;
  }
  if (first >= argc) {
    fprintf(stderr, "pp-sim launch: no sweep after --\n");
    return 2;
  }
  if (!l.shards) {
    fprintf(stderr, "pp-sim launch: --shards N is required\n");
    return 2;
  }
  for (int i = first; i < argc; i++)
    if (!strncmp(argv[i], "--shard", 7) || !strncmp(argv[i], "--db", 4) ||
        !strcmp(argv[i], "--check") || !strncmp(argv[i], "--progress", 10)) {
      fprintf(stderr, "pp-sim launch: %s is the launcher's to set, not the sweep's\n", argv[i]);
      return 2;
    }
  if (l.engine == PP_LAUNCH_K8S && (!l.image || !l.claim || !l.workdir)) {
    fprintf(stderr, "pp-sim launch k8s: --image, --workdir and --claim are required\n");
    return 2;
  }
  /* Check the sweep as pp-sim sweep would (getopt permutes, so on a copy). */
  int n = argc - first;
  char **copy = calloc((size_t)n + 2, sizeof *copy);
  if (!copy) return 1;
  copy[0] = "sweep";
  for (int i = 0; i < n; i++)
    copy[i + 1] = argv[first + i];
  sweep_check chk;
  memset(&chk, 0, sizeof chk);
  int rc = sweep_main(n + 1, copy, &chk);
  free(copy);
  if (rc) return rc;
  if (chk.units < l.shards)
    fprintf(stderr,
            "pp-sim launch: note: %u shards for %" PRIu64 " units: %" PRIu64
            " shard(s) will be empty\n",
            l.shards, chk.units, (uint64_t)l.shards - chk.units);
  char self[4096];
  if (!l.pp_sim) {
    if (l.engine == PP_LAUNCH_K8S)
      l.pp_sim = "pp-sim";
    else if (realpath("/proc/self/exe", self))
      l.pp_sim = self;
    else
      l.pp_sim = "pp-sim";
  }
  l.sweep_args = (const char *const *)argv + first;
  l.n_sweep_args = (size_t)n;
  l.sshlogins = logins;
  l.scenario_path = NULL;
  /* The scenario is the sweep's one non-option word; options with values are --x=v or -x v. */
  for (int i = first; i < argc; i++) {
    const char *a = argv[i];
    if (a[0] != '-') {
      l.scenario_path = a;
      break;
    }
    if (!strchr(a, '=') && strcmp(a, "-q") && strcmp(a, "--quiet")) i++;
  }
  l.hash = chk.hash;
  l.scenario = chk.scenario;
  l.units = chk.units;
  if (l.engine != PP_LAUNCH_K8S && mkdir(l.out_dir, 0777) && errno != EEXIST) {
    fprintf(stderr, "pp-sim launch: cannot create %s: %s\n", l.out_dir, strerror(errno));
    return 1;
  }
  FILE *f = output ? fopen(output, "w") : stdout;
  if (!f) {
    fprintf(stderr, "pp-sim launch: cannot write %s: %s\n", output, strerror(errno));
    return 1;
  }
  char err[256];
  rc = pp_launch_write(f, &l, err, sizeof err);
  if (rc) fprintf(stderr, "pp-sim launch: %s\n", err);
  if (output) {
    if (fclose(f) && !rc) {
      fprintf(stderr, "pp-sim launch: cannot write %s: %s\n", output, strerror(errno));
      rc = 1;
    }
    if (!rc && l.engine == PP_LAUNCH_SLURM) chmod(output, 0755);
  }
  if (!rc)
    fprintf(stderr, "pp-sim launch: sweep %s of %s, %" PRIu64 " units in %u shards%s%s\n", chk.hash,
            chk.scenario, chk.units, l.shards, output ? ": " : "", output ? output : "");
  return rc ? 1 : 0;
}

static void usage_merge(FILE *f) {
  fprintf(f, "usage: pp-sim merge OUT.db [SHARD.db ...]\n\n"
             "Merges the shard databases of one sweep (pp-sim sweep --shard I/N --db SHARD.db)\n"
             "into OUT.db (created if missing), then says which shards are in and which are\n"
             "missing. Shards of another sweep (a different scenario, configuration, policy,\n"
             "--set, seeds or shard count) are refused and nothing is merged. A shard already in\n"
             "OUT.db or given twice is reported and skipped, so merging again changes nothing.\n"
             "With no SHARD.db it only reports on OUT.db.\n\n"
             "exit status: 0 every shard is in, 3 some are missing, 1 refused or failed,\n"
             "2 bad usage.\n");
}

static int cmd_merge(int argc, char **argv) {
  if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
    usage_merge(stdout);
    return 0;
  }
  if (argc < 2 || argv[1][0] == '-') {
    usage_merge(stderr);
    return 2;
  }
  char err[2048];
  double t0 = now_s();
  int rc = pp_results_merge(argv[1], (const char *const *)argv + 2, (size_t)argc - 2, stderr, err,
                            sizeof err);
  if (rc < 0) {
    fprintf(stderr, "pp-sim merge: %s\n", err);
    return 1;
  }
  if (argc > 2) fprintf(stderr, "pp-sim merge: %.3f s\n", now_s() - t0);
  return rc;
}

static int cmd_schedule(int argc, char **argv) {
  static const struct option opts[] = {{"seed", required_argument, 0, 's'},
                                       {"limit", required_argument, 0, 'l'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  uint64_t seed = 0;
  int have_seed = 0;
  long long limit = -1;
  int ch;
  optind = 1;
  while ((ch = getopt_long(argc, argv, "s:l:h", opts, NULL)) != -1) {
    switch (ch) {
    case 's':
      if (parse_seed(optarg, &seed)) return 2;
      have_seed = 1;
      break;
    case 'l': {
      char *end;
      limit = strtoll(optarg, &end, 10);
      if (*end || limit < 0) {
        fprintf(stderr, "pp-sim schedule: --limit: expected a number, got \"%s\"\n", optarg);
        return 2;
      }
      break;
    }
    case 'h': usage_schedule(stdout); return 0;
    default: usage_schedule(stderr); return 2;
    }
  }
  if (optind != argc - 1) {
    fprintf(stderr, "pp-sim schedule: expected one scenario file\n");
    usage_schedule(stderr);
    return 2;
  }
  pp_scenario *scn = malloc(sizeof *scn);
  if (!scn) return 1;
  int rc = load(argv[optind], scn);
  if (!rc) {
    if (!have_seed) seed = scn->seed;
    pp_schedule sch;
    rc = pp_schedule_build(&sch, scn, seed);
    if (rc) {
      fprintf(stderr, "pp-sim schedule: %s\n", pp_sim_strerror(rc));
      rc = 1;
    } else {
      for (size_t i = 0; i < sch.n && (limit < 0 || (long long)i < limit); i++) {
        const pp_arrival *a = &sch.items[i];
        printf("%u %" PRId64 " %u %s %" PRIu64 " %" PRIu64 "\n", a->seq, a->t_ns, a->kind,
               scn->kinds[a->kind].path, a->cpu_ns, a->io_ns);
      }
      printf("# %zu arrivals, digest %016" PRIx64 "\n", sch.n, pp_schedule_digest(&sch));
      pp_schedule_dispose(&sch);
    }
  }
  pp_scenario_dispose(scn);
  free(scn);
  return rc;
}

static void usage_cluster(FILE *f) {
  fprintf(f, "usage: pp-sim cluster SCENARIO.yaml [options]\n\n"
             "Simulates each entry of the scenario's `clusters:` (a balancer and a cluster\n"
             "autoscaler over the `hosts:` fleet, docs/SIM.md \"Cluster mode\") and prints the\n"
             "summary table and the per-phase table.\n\n"
             "options:\n"
             "  -c, --cluster NAME     only this cluster (repeatable)\n"
             "  -s, --seed N           arrival seed (default: the scenario's `seed`)\n"
             "  -t, --timeline         print the per-second cluster timeline of every cluster\n"
             "  -H, --hosts            print the per-second, per-host timeline of every cluster\n"
             "  -q, --quiet            only the summary table (no per-phase table)\n"
             "  -h, --help             this text\n");
}

static const char *metric_name(pp_cluster_metric m) {
  return m == PP_CMETRIC_QUEUE  ? "queue_p95"
         : m == PP_CMETRIC_CPU  ? "cpu"
         : m == PP_CMETRIC_BUSY ? "busy"
                                : "static";
}

static void fmt_ms(char *buf, size_t cap, double ns) {
  if (ns < 0)
    snprintf(buf, cap, "-");
  else
    snprintf(buf, cap, "%.1f", ns / 1e6);
}

static int cmd_cluster(int argc, char **argv) {
  static const struct option opts[] = {{"cluster", required_argument, 0, 'c'},
                                       {"seed", required_argument, 0, 's'},
                                       {"timeline", no_argument, 0, 't'},
                                       {"hosts", no_argument, 0, 'H'},
                                       {"quiet", no_argument, 0, 'q'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  const char *only[PP_SCN_MAX_CLUSTERS];
  int n_only = 0, timeline = 0, hosts = 0, quiet = 0, have_seed = 0;
  uint64_t seed = 0;
  int ch;
  optind = 1;
  while ((ch = getopt_long(argc, argv, "c:s:tHqh", opts, NULL)) != -1) {
    switch (ch) {
    case 'c':
      if (n_only == PP_SCN_MAX_CLUSTERS) {
        fprintf(stderr, "pp-sim cluster: too many --cluster\n");
        return 2;
      }
      only[n_only++] = optarg;
      break;
    case 's':
      if (parse_seed(optarg, &seed)) return 2;
      have_seed = 1;
      break;
    case 't': timeline = 1; break;
    case 'H': hosts = 1; break;
    case 'q': quiet = 1; break;
    case 'h': usage_cluster(stdout); return 0;
    default: usage_cluster(stderr); return 2;
    }
  }
  if (optind != argc - 1) {
    fprintf(stderr, "pp-sim cluster: expected one scenario file\n");
    usage_cluster(stderr);
    return 2;
  }
  const char *path = argv[optind];
  pp_scenario *scn = malloc(sizeof *scn);
  if (!scn) return 1;
  int rc = load(path, scn);
  if (!rc && !scn->hosts.present) {
    fprintf(stderr, "pp-sim cluster: %s has no `hosts:` section (docs/SCENARIOS.md)\n", path);
    rc = 2;
  }
  for (int i = 0; !rc && i < n_only; i++)
    if (pp_scenario_find_cluster(scn, only[i]) < 0) {
      fprintf(stderr, "pp-sim cluster: %s has no cluster named \"%s\"\n", path, only[i]);
      rc = 2;
    }
  if (rc) {
    pp_scenario_dispose(scn);
    free(scn);
    return rc;
  }
  if (!have_seed) seed = scn->seed;
  pp_cluster_result *res = calloc(scn->n_clusters, sizeof *res);
  int ran[PP_SCN_MAX_CLUSTERS] = {0};
  if (!res) rc = 1;
  uint64_t events = 0;
  double t0 = now_s();
  for (uint32_t i = 0; i < scn->n_clusters && !rc; i++) {
    int want = n_only == 0;
    for (int k = 0; k < n_only; k++)
      if (!strcmp(only[k], scn->clusters[i].name)) want = 1;
    if (!want) continue;
    pp_cluster_options o;
    pp_cluster_options_default(&o, scn);
    o.seed = seed;
    o.keep_timeline = timeline;
    o.keep_hosts = hosts;
    int r = pp_cluster_run(scn, i, &o, &res[i]);
    if (r) {
      fprintf(stderr, "pp-sim cluster: %s: %s\n", scn->clusters[i].name, pp_sim_strerror(r));
      rc = 1;
      break;
    }
    ran[i] = 1;
    events += res[i].events;
  }
  double wall = now_s() - t0;
  if (!rc) {
    const pp_config *hc = &scn->configs[scn->hosts.config_index];
    printf("%s: %u hosts of %s (%u cores, %u workers x %u threads%s), seed %" PRIu64 "\n",
           scn->name, scn->hosts.count, hc->name, scn->hosts.cores, hc->workers, hc->threads,
           hc->autoscale ? ", autoscale" : "", seed);
    printf("%-20s %-17s %-9s %7s %8s %8s %8s %8s %8s %8s %6s %6s %9s %6s\n", "cluster", "balancer",
           "scaler", "target", "offered", "achieved", "p50", "p99", "p99.9", "excess_s", "avg_h",
           "peak_h", "host_s", "up/dn");
    for (uint32_t i = 0; i < scn->n_clusters; i++) {
      if (!ran[i]) continue;
      const pp_cluster_cfg *c = &scn->clusters[i];
      const pp_cluster_result *r = &res[i];
      char tgt[32], p50[24], p99[24], p999[24], updn[24];
      if (c->metric == PP_CMETRIC_QUEUE)
        snprintf(tgt, sizeof tgt, "%.0fms", c->target * 1e3);
      else if (c->metric != PP_CMETRIC_NONE)
        snprintf(tgt, sizeof tgt, "%.0f%%", c->target * 1e2);
      else
        snprintf(tgt, sizeof tgt, "-");
      char scaler[24];
      snprintf(scaler, sizeof scaler, "%s%s", metric_name(c->metric), c->n_metrics > 1 ? "+" : "");
      fmt_ms(p50, sizeof p50, r->p50_ns);
      fmt_ms(p99, sizeof p99, r->p99_ns);
      fmt_ms(p999, sizeof p999, r->p999_ns);
      snprintf(updn, sizeof updn, "%u/%u", r->scale_ups, r->scale_downs);
      printf("%-20s %-17s %-9s %7s %8.1f %8.1f %8s %8s %8s %8.1f %6.1f %6u %9.0f %6s\n", c->name,
             pp_balancer_name(c->balancer), scaler, tgt, r->offered_rps, r->achieved_rps, p50, p99,
             p999, r->excess_latency_ns / 1e9, r->avg_hosts, r->peak_hosts, r->host_seconds, updn);
    }
    printf("(latency in ms; host_s = integral of hosts booting, ready or draining)\n");
    if (!quiet) {
      printf("\nper phase: achieved rps (responses ending in the phase) and p99 ms (requests "
             "arriving in it)\n");
      printf("%-20s %5s %13s %9s %9s %9s %9s\n", "cluster", "phase", "time_s", "offered",
             "achieved", "p50", "p99");
      for (uint32_t i = 0; i < scn->n_clusters; i++) {
        if (!ran[i]) continue;
        const pp_cluster_result *r = &res[i];
        for (uint32_t p = 0; p < r->n_phases; p++) {
          const pp_cluster_phase *ph = &r->phases[p];
          char span[32], p50[24], p99[24];
          snprintf(span, sizeof span, "%.0f-%.0f", ph->start_s, ph->end_s);
          fmt_ms(p50, sizeof p50, ph->p50_ns);
          fmt_ms(p99, sizeof p99, ph->p99_ns);
          double d = ph->end_s - ph->start_s;
          printf("%-20s %5u %13s %9.1f %9.1f %9s %9s\n", scn->clusters[i].name, p, span,
                 d > 0 ? (double)ph->arrivals / d : 0, ph->achieved_rps, p50, p99);
        }
      }
    }
    for (uint32_t i = 0; timeline && i < scn->n_clusters; i++) {
      if (!ran[i]) continue;
      const pp_cluster_result *r = &res[i];
      printf("\n# %s: cluster timeline (metric: what the autoscaler last saw; queue_p95: "
             "true, of the second's dispatches)\n",
             scn->clusters[i].name);
      printf("%6s %7s %7s %8s %8s %9s %6s %6s %6s %6s %7s %7s %9s %6s\n", "t", "arrived", "done",
             "p50", "p99", "queue_p95", "ready", "boot", "drain", "want", "workers", "queued",
             "metric", "cpu");
      for (size_t k = 0; k < r->timeline_len; k++) {
        const pp_cluster_second *row = &r->timeline[k];
        char p50[24], p99[24], met[32];
        fmt_ms(p50, sizeof p50, row->p50_ns);
        fmt_ms(p99, sizeof p99, row->p99_ns);
        if (isnan(row->metric))
          snprintf(met, sizeof met, "-");
        else if (scn->clusters[i].metric != PP_CMETRIC_QUEUE)
          snprintf(met, sizeof met, "%.1f%%", row->metric * 100);
        else
          snprintf(met, sizeof met, "%.1fms", row->metric * 1e3);
        printf("%6u %7" PRIu64 " %7" PRIu64 " %8s %8s %9.1f %6u %6u %6u %6u %7u %7" PRIu64
               " %9s %5.1f%%\n",
               row->t_s, row->arrivals, row->completed, p50, p99, row->queue_p95_ns / 1e6,
               row->hosts_ready, row->hosts_booting, row->hosts_draining, row->desired,
               row->workers, row->queued, met, row->cpu_util * 100);
      }
    }
    for (uint32_t i = 0; hosts && i < scn->n_clusters; i++) {
      if (!ran[i]) continue;
      const pp_cluster_result *r = &res[i];
      static const char *st[] = {"dead", "booting", "ready", "draining"};
      printf("\n# %s: per-host timeline\n%6s %5s %-8s %6s %7s %6s %11s %9s\n",
             scn->clusters[i].name, "t", "host", "state", "done", "workers", "queue", "outstanding",
             "queue_p95");
      for (size_t k = 0; k < r->host_rows_len; k++) {
        const pp_host_second *row = &r->host_rows[k];
        printf("%6u %5u %-8s %6u %7u %6u %11u %9.1f\n", row->t_s, row->host, st[row->state & 3],
               row->completed, row->workers, row->queued, row->outstanding,
               row->queue_p95_ns / 1e6);
      }
    }
    fprintf(stderr, "pp-sim cluster: %" PRIu64 " events in %.2f s (%.2f M events/s)\n", events,
            wall, wall > 0 ? (double)events / wall / 1e6 : 0.0);
  }
  for (uint32_t i = 0; res && i < scn->n_clusters; i++)
    pp_cluster_result_dispose(&res[i]);
  free(res);
  pp_scenario_dispose(scn);
  free(scn);
  return rc;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage_main(stderr);
    return 2;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "run")) return cmd_run(argc - 1, argv + 1);
  if (!strcmp(cmd, "sweep")) return cmd_sweep(argc - 1, argv + 1);
  if (!strcmp(cmd, "schedule")) return cmd_schedule(argc - 1, argv + 1);
  if (!strcmp(cmd, "merge")) return cmd_merge(argc - 1, argv + 1);
  if (!strcmp(cmd, "launch")) return cmd_launch(argc - 1, argv + 1);
  if (!strcmp(cmd, "cluster")) return cmd_cluster(argc - 1, argv + 1);
  if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
    if (argc > 2 && !strcmp(argv[2], "run"))
      usage_run(stdout);
    else if (argc > 2 && !strcmp(argv[2], "sweep"))
      usage_sweep(stdout);
    else if (argc > 2 && !strcmp(argv[2], "launch"))
      usage_launch(stdout);
    else if (argc > 2 && !strcmp(argv[2], "merge"))
      usage_merge(stdout);
    else if (argc > 2 && !strcmp(argv[2], "schedule"))
      usage_schedule(stdout);
    else if (argc > 2 && !strcmp(argv[2], "cluster"))
      usage_cluster(stdout);
    else
      usage_main(stdout);
    return 0;
  }
  fprintf(stderr, "pp-sim: unknown command \"%s\"\n\n", cmd);
  usage_main(stderr);
  return 2;
}
