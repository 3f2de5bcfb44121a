/* pp-bench: open-loop load generator and benchmark harness. The only main() of bench/.
 *
 *   pp-bench run SCENARIO.yaml      every configuration of a scenario, measured, into SQLite
 *   pp-bench report RUN|latest      comparison table, -timeline CONFIG, -plot, -vs-sim
 *   pp-bench smoke ...              one quick load against null, puma, pumaplus or a URL
 *   pp-bench floor                  the harness's resolution floor (null server)
 *   pp-bench schedule SCENARIO.yaml the arrival schedule's count and digest (as pp-sim's)
 *   pp-bench null-server            the built-in do-nothing server, in the foreground
 *   pp-bench soak                   cycles of steady, overload, body, cancel and recovery
 *                                   traffic against one server: failures and descriptors
 *   pp-bench compare                servers x shapes x rounds, closed loop (wrk) and a fixed
 *                                   open rate, medians and ratios, SQLite, a gnuplot figure
 *
 * Options accept one or two leading dashes. Durations: 10s, 500ms, 2m, 1500us.
 * bench/README.md documents all of it. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>
#include <uv.h>

#include "bench/compare/compare.h"
#include "bench/gen/gen.h"
#include "bench/refsrv/nullsrv.h"
#include "bench/run/plan.h"
#include "bench/run/run.h"
#include "bench/store/store.h"
#include "sim/scenario_file.h"
#include "bench/gen/schedule.h"
#include "bench/soak/soak.h"
#include "bench/run/stats.h"

typedef struct opts {
  const char *server; /* null | puma | pumaplus */
  const char *url;    /* host:port of an already running server */
  const char *path;
  double rate;
  uint64_t dur_ns;
  uint64_t timeout_ns;
  uint32_t conns;
  uint32_t delay_ms;
  int port;
  uint64_t seed;
  bool uniform;
  bool spectrum;
  const char *csv;
  double max_errors;
  uint32_t workers, threads;
  const char *app;
  const char *policy;
  bool autoscale;
  bool timeline;
  uint64_t warmup_ns;
  const char *db;
  const char *only;
  const char *log_dir;
  const char *timeline_config;
  const char *plot;
  const char *vs_sim;
  bool seed_set;
  pb_proto proto;
  bool tls;
  uint32_t h2_conns;
  uint32_t leak_every;
} opts;

static void usage(FILE *f) {
  fprintf(f,
          "usage:\n"
          "  pp-bench smoke [-server null|puma|pumaplus | -url HOST:PORT] [-path /hello]\n"
          "                 [-rate 100] [-dur 10s] [-timeout 20s] [-conns 256] [-seed N]\n"
          "                 [-uniform] [-spectrum] [-timeline] [-csv FILE] [-max-errors 0.01]\n"
          "                 [-w 2] [-t 5] [-app config.ru] [-autoscale] [-policy FILE]\n"
          "                 [-warmup 2s] [-delay MS (null server)]\n"
          "                 [-proto h1|h2|h3] [-tls] [-h2-conns 4]\n"
          "  pp-bench floor [-rate 500] [-dur 10s] [-spectrum] [-proto h1|h2|h3] [-tls]\n"
          "  pp-bench run SCENARIO.yaml [-db results.db] [-only A,B] [-timeline] [-warmup 3s]\n"
          "               [-conns N] [-seed N] [-app config.ru] [-log-dir DIR]\n"
          "               [-proto h1|h2|h3] [-h2-conns 4]\n"
          "  pp-bench report RUN|latest [-db results.db] [-timeline CONFIG] [-plot out.png]\n"
          "               [-vs-sim [SIMRUN]]\n"
          "  pp-bench schedule SCENARIO.yaml [-seed N] [-timeline (list arrivals)]\n"
          "  pp-bench null-server [-port 0] [-delay 0] [-proto h1|h2|h3] [-tls] [-leak-every N]\n"
          "                 (runs until SIGINT/SIGTERM; -tls: a self-signed certificate;\n"
          "                 -leak-every N: every Nth request leaks a descriptor, for tests)\n"
          "  pp-bench soak [-short] [-server pumaplus|puma|null] [-cycles 3] ...\n"
          "                 (overload and bad-traffic cycles; pp-bench soak --help)\n"
          "  pp-bench compare [-servers pumaplus,puma,puma8,falcon,pumaplus@DIR]\n"
          "                 [-shapes 1x1,1x5,2x5]\n"
          "                 [-rounds 3] [-dur 5s] ... (servers side by side; pp-bench compare\n"
          "                 --help)\n"
          "\n"
          "protocol (smoke, run, floor; the same schedule and timing from intended start):\n"
          "  -proto h1       HTTP/1.1, one request per connection at a time, up to -conns\n"
          "                  connections (default)\n"
          "  -proto h2       HTTP/2 (nghttp2): streams multiplexed on -h2-conns connections,\n"
          "                  at most the server's SETTINGS_MAX_CONCURRENT_STREAMS each (and\n"
          "                  1024); arrivals beyond that wait in the generator, still timed\n"
          "                  from their intended start. Cleartext h2 is prior knowledge (h2c)\n"
          "  -proto h3       HTTP/3 (ngtcp2 + nghttp3, QUIC v1, TLS 1.3 through GnuTLS, ALPN\n"
          "                  \"h3\", SNI localhost): streams multiplexed on -h2-conns QUIC\n"
          "                  connections, at most the server's stream credit\n"
          "                  (initial_max_streams_bidi, MAX_STREAMS) each (and 1024). The\n"
          "                  server certificate is NOT verified (loopback development\n"
          "                  certificates). The harness starts puma-plus with -listen-h3 on\n"
          "                  the UDP port of its TCP port number; -url HOST:UDPPORT; the null\n"
          "                  server and floor speak h3 too (-tls is implied)\n"
          "  -h2-conns N     h2/h3 connections, all opened at the start (default 4);\n"
          "                  -h3-conns is the same flag\n"
          "  -tls            TLS (OpenSSL), SNI localhost, ALPN \"h2\" for h2 (required) or\n"
          "                  \"http/1.1\" for h1. The server certificate is NOT verified: the\n"
          "                  targets are loopback servers with development certificates.\n"
          "                  With -url or the null server (the harness starts puma and\n"
          "                  puma-plus without TLS)\n");
}

static bool parse_duration(const char *s, uint64_t *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || v < 0) return false;
  double mul;
  if (strcmp(end, "s") == 0 || *end == 0)
    mul = 1e9;
  else if (strcmp(end, "ms") == 0)
    mul = 1e6;
  else if (strcmp(end, "us") == 0)
    mul = 1e3;
  else if (strcmp(end, "m") == 0)
    mul = 60e9;
  else
    return false;
  *out = (uint64_t)(v * mul);
  return true;
}

static bool parse_double(const char *s, double *out) {
  char *end;
  errno = 0;
  *out = strtod(s, &end);
  return !errno && end != s && *end == 0;
}

/* Parses -flag value pairs from argv[first..]. Returns false (after printing why) on error. */
static bool parse_opts(int argc, char **argv, int first, opts *o) {
  for (int i = first; i < argc; i++) {
    const char *a = argv[i];
    if (a[0] != '-') {
      fprintf(stderr, "pp-bench: unexpected argument '%s'\n", a);
      return false;
    }
    a += (a[1] == '-') ? 2 : 1;
    if (strcmp(a, "uniform") == 0) {
      o->uniform = true;
      continue;
    }
    if (strcmp(a, "spectrum") == 0) {
      o->spectrum = true;
      continue;
    }
    if (strcmp(a, "timeline") == 0) {
      o->timeline = true;
      if (i + 1 < argc && argv[i + 1][0] != '-') o->timeline_config = argv[++i];
      continue;
    }
    if (strcmp(a, "vs-sim") == 0 && (i + 1 >= argc || argv[i + 1][0] == '-')) {
      o->vs_sim = "run";
      continue;
    }
    if (strcmp(a, "autoscale") == 0) {
      o->autoscale = true;
      continue;
    }
    if (strcmp(a, "tls") == 0) {
      o->tls = true;
      continue;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "pp-bench: option -%s needs a value\n", a);
      return false;
    }
    const char *v = argv[++i];
    double d;
    bool ok = true;
    if (strcmp(a, "server") == 0)
      o->server = v;
    else if (strcmp(a, "url") == 0)
      o->url = v;
    else if (strcmp(a, "path") == 0)
      o->path = v;
    else if (strcmp(a, "csv") == 0)
      o->csv = v;
    else if (strcmp(a, "app") == 0)
      o->app = v;
    else if (strcmp(a, "policy") == 0)
      o->policy = v;
    else if (strcmp(a, "db") == 0)
      o->db = v;
    else if (strcmp(a, "only") == 0)
      o->only = v;
    else if (strcmp(a, "log-dir") == 0)
      o->log_dir = v;
    else if (strcmp(a, "plot") == 0)
      o->plot = v;
    else if (strcmp(a, "vs-sim") == 0)
      o->vs_sim = v;
    else if (strcmp(a, "proto") == 0) {
      if (strcmp(v, "h1") == 0)
        o->proto = PB_PROTO_H1;
      else if (strcmp(v, "h2") == 0)
        o->proto = PB_PROTO_H2;
      else if (strcmp(v, "h3") == 0)
        o->proto = PB_PROTO_H3;
      else
        ok = false;
    } else if (strcmp(a, "h2-conns") == 0 || strcmp(a, "h3-conns") == 0)
      ok = parse_double(v, &d) && d >= 1 && d <= 4096 && ((o->h2_conns = (uint32_t)d), 1);
    else if (strcmp(a, "warmup") == 0)
      ok = parse_duration(v, &o->warmup_ns);
    else if (strcmp(a, "w") == 0)
      ok = parse_double(v, &d) && d >= 1 && ((o->workers = (uint32_t)d), 1);
    else if (strcmp(a, "t") == 0)
      ok = parse_double(v, &d) && d >= 1 && ((o->threads = (uint32_t)d), 1);
    else if (strcmp(a, "rate") == 0)
      ok = parse_double(v, &o->rate) && o->rate > 0;
    else if (strcmp(a, "max-errors") == 0)
      ok = parse_double(v, &o->max_errors);
    else if (strcmp(a, "dur") == 0)
      ok = parse_duration(v, &o->dur_ns) && o->dur_ns > 0;
    else if (strcmp(a, "timeout") == 0)
      ok = parse_duration(v, &o->timeout_ns) && o->timeout_ns;
    else if (strcmp(a, "conns") == 0)
      ok = parse_double(v, &d) && d >= 1 && (o->conns = (uint32_t)d);
    else if (strcmp(a, "delay") == 0)
      ok = parse_double(v, &d) && d >= 0 && ((o->delay_ms = (uint32_t)d), 1);
    else if (strcmp(a, "port") == 0)
      ok = parse_double(v, &d) && d >= 0 && d < 65536 && ((o->port = (int)d), 1);
    else if (strcmp(a, "seed") == 0)
      ok = parse_double(v, &d) && d >= 0 && ((o->seed = (uint64_t)d), (o->seed_set = true), 1);
    else if (strcmp(a, "leak-every") == 0)
      ok = parse_double(v, &d) && d >= 0 && ((o->leak_every = (uint32_t)d), 1);
    else {
      fprintf(stderr, "pp-bench: unknown option -%s\n", a);
      return false;
    }
    if (!ok) {
      fprintf(stderr, "pp-bench: bad value '%s' for -%s\n", v, a);
      return false;
    }
  }
  return true;
}

/* The server being measured, so an interrupted pp-bench does not leave it running. */
static volatile sig_atomic_t running_pgid;

static void on_interrupt(int sig) {
  if (running_pgid > 0) kill(-(pid_t)running_pgid, SIGTERM);
  signal(sig, SIG_DFL);
  raise(sig);
}

static void stop_servers_on_interrupt(void) {
  signal(SIGINT, on_interrupt);
  signal(SIGTERM, on_interrupt);
  signal(SIGHUP, on_interrupt);
}

static void run_options(const opts *o, pb_run_options *ro, const char *label) {
  memset(ro, 0, sizeof *ro);
  ro->timeout_ns = o->timeout_ns ? o->timeout_ns : 20000000000ull;
  ro->max_connections = o->conns;
  ro->warmup_ns = o->warmup_ns;
  ro->warmup_rate = o->rate < 50 ? o->rate : 50;
  ro->warmup_path = o->path;
  ro->max_error_ratio = o->max_errors;
  ro->stats_path = "/stats";
  ro->label = label;
  ro->running_pgid = &running_pgid;
  ro->proto = o->proto;
  ro->tls = o->tls;
  ro->h2_connections = o->h2_conns;
}

/* Prints what a smoke run measured. Returns 0 when the success check passed. */
static int report_result(const opts *o, const pb_config_result *r, const pb_schedule *sched,
                         const char *label) {
  if (!r->ran) {
    fprintf(stderr, "pp-bench: %s: %s\n", label, r->error);
    return 2;
  }
  pb_summary_print(stdout, label, &r->summary);
  pb_transport_print(stdout, r);
  if (o->timeline) pb_rows_print(stdout, r->rows, r->n_rows);
  if (o->spectrum) pb_spectrum_print(stdout, &r->summary.latency);
  if (o->csv) {
    FILE *f = fopen(o->csv, "w");
    if (!f)
      fprintf(stderr, "pp-bench: cannot write %s: %s\n", o->csv, strerror(errno));
    else {
      pb_csv_write(f, r->results, r->n, sched->paths);
      fclose(f);
    }
  }
  return r->summary.check_ok ? 0 : 1;
}

#ifndef PB_DEFAULT_APP
#define PB_DEFAULT_APP "scenarios/apps/mix/config.ru"
#endif
#ifndef PB_PPSIM
#define PB_PPSIM "pp-sim"
#endif
#ifndef PB_SOURCE_DIR
#define PB_SOURCE_DIR "."
#endif

/* Binaries of this build tree are preferred over PATH: puma-plus-server and the gem's CLI. */
static void default_binaries(pb_server_spec *spec) {
  const char *env = getenv("PP_PUMAPLUS");
  if (env)
    snprintf(spec->pumaplus_bin, sizeof spec->pumaplus_bin, "%s", env);
  else
    snprintf(spec->pumaplus_bin, sizeof spec->pumaplus_bin, "%s/gem/exe/puma-plus", PB_SOURCE_DIR);
  env = getenv("PP_PUMA_PLUS_SERVER");
  if (env) snprintf(spec->server_bin, sizeof spec->server_bin, "%s", env);
#ifdef PB_SERVER_BIN
  else
    snprintf(spec->server_bin, sizeof spec->server_bin, "%s", PB_SERVER_BIN);
#endif
  env = getenv("PP_PUMA");
  if (env) snprintf(spec->puma_bin, sizeof spec->puma_bin, "%s", env);
}

static int split_hostport(const char *url, char *host, size_t hostlen, int *port) {
  const char *p = url;
  if (strncmp(p, "http://", 7) == 0) p += 7;
  const char *colon = strrchr(p, ':');
  if (!colon || (size_t)(colon - p) >= hostlen) return -1;
  memcpy(host, p, (size_t)(colon - p));
  host[colon - p] = 0;
  if (host[0] == '[') { /* [::1]:8080 */
    memmove(host, host + 1, strlen(host));
    char *rb = strchr(host, ']');
    if (rb) *rb = 0;
  }
  *port = atoi(colon + 1);
  return *port > 0 && *port < 65536 ? 0 : -1;
}

static int cmd_smoke(opts *o) {
  if (o->proto == PB_PROTO_H3) o->tls = false; /* QUIC always carries TLS 1.3 */
  if (o->tls && o->server && strcmp(o->server, "null") != 0) {
    fprintf(stderr, "pp-bench: -tls works with -url HOST:PORT of a TLS server or the null "
                    "server; the harness starts puma and puma-plus without TLS\n");
    return 2;
  }
  pb_schedule sched;
  if (pb_schedule_constant(&sched, o->rate, o->dur_ns, o->path, !o->uniform, o->seed) < 0) {
    fprintf(stderr, "pp-bench: cannot build a schedule for rate %g over %" PRIu64 " ns\n", o->rate,
            o->dur_ns);
    return 2;
  }
  int rc;
  pb_run_options ro;
  pb_config_result r;
  if (o->url) {
    char host[128];
    int port;
    if (split_hostport(o->url, host, sizeof host, &port) < 0) {
      fprintf(stderr, "pp-bench: -url wants HOST:PORT, got '%s'\n", o->url);
      pb_schedule_dispose(&sched);
      return 2;
    }
    run_options(o, &ro, o->url);
    pb_run_target(host, port, &sched, &ro, &r);
    rc = report_result(o, &r, &sched, o->url);
  } else if (!o->server || strcmp(o->server, "null") == 0) {
    pb_nullsrv *srv = NULL;
    pb_nullsrv_h3 *srv3 = NULL;
    int port;
    pb_nullsrv_config nc = {.delay_ms = o->delay_ms, .h2 = o->proto == PB_PROTO_H2, .tls = o->tls};
    if (o->proto == PB_PROTO_H3 ? pb_nullsrv_h3_start(&nc, &srv3, &port) < 0
                                : pb_nullsrv_start(&nc, &srv, &port) < 0) {
      pb_schedule_dispose(&sched);
      return 2;
    }
    run_options(o, &ro, "null server");
    pb_run_target("127.0.0.1", port, &sched, &ro, &r);
    if (srv3)
      pb_nullsrv_h3_stop(srv3, NULL, NULL);
    else
      pb_nullsrv_stop(srv, NULL, NULL);
    rc = report_result(o, &r, &sched, "null server");
  } else if (strcmp(o->server, "puma") == 0 || strcmp(o->server, "pumaplus") == 0) {
    pb_server_spec spec;
    memset(&spec, 0, sizeof spec);
    bool puma = strcmp(o->server, "puma") == 0;
    spec.kind = puma ? PB_SERVER_PUMA : PB_SERVER_PUMAPLUS;
    spec.workers = o->workers ? o->workers : 2;
    spec.threads = o->threads ? o->threads : 5;
    spec.autoscale = o->autoscale;
    if (o->policy) snprintf(spec.policy_path, sizeof spec.policy_path, "%s", o->policy);
    snprintf(spec.name, sizeof spec.name, "%s-w%ut%u%s", o->server, spec.workers, spec.threads,
             o->autoscale ? "-autoscale" : "");
    snprintf(spec.app, sizeof spec.app, "%s", o->app ? o->app : PB_DEFAULT_APP);
    default_binaries(&spec);
    spec.h2c = o->proto == PB_PROTO_H2;
    spec.h3 = o->proto == PB_PROTO_H3;
    spec.port = pb_free_port();
    spec.stats_port = pb_free_port();
    run_options(o, &ro, spec.name);
    ro.log_dir = "/tmp";
    pb_run_config(&spec, &sched, &ro, &r);
    rc = report_result(o, &r, &sched, spec.name);
    if (r.ran) printf("  server log: %s\n", r.spec.log_path);
  } else {
    fprintf(stderr, "pp-bench: -server wants null, puma or pumaplus, got '%s'\n", o->server);
    pb_schedule_dispose(&sched);
    return 2;
  }
  pb_config_result_dispose(&r);
  pb_schedule_dispose(&sched);
  return rc;
}

static int cmd_floor(opts *o) {
  printf("resolution floor: the generator against the built-in null server (answers at once),\n"
         "%.0f rps Poisson for %.1fs on loopback. Differences between servers smaller than\n"
         "these percentiles are not resolvable by this harness on this machine.\n",
         o->rate, o->dur_ns / 1e9);
  o->delay_ms = 0;
  o->server = "null";
  o->url = NULL;
  return cmd_smoke(o);
}

static bool selected(const char *only, const char *name) {
  if (!only) return true;
  size_t len = strlen(name);
  for (const char *p = only; *p;) {
    const char *comma = strchr(p, ',');
    size_t n = comma ? (size_t)(comma - p) : strlen(p);
    if (n == len && strncmp(p, name, n) == 0) return true;
    if (!comma) break;
    p = comma + 1;
  }
  return false;
}

static int load_scenario(const char *path, pp_scenario *scn) {
  pp_scn_error e;
  memset(&e, 0, sizeof e);
  pp_scenario_defaults(scn);
  if (pp_scenario_load(scn, path, &e) != 0) {
    char buf[1024];
    fprintf(stderr, "pp-bench: %s\n", pp_scn_error_format(&e, buf, sizeof buf));
    pp_scenario_dispose(scn);
    return -1;
  }
  return 0;
}

/* pp-bench run scenario.yaml: every configuration in turn, then the comparison table. */
static int cmd_run(const char *path, opts *o) {
  if (o->proto == PB_PROTO_H3) o->tls = false; /* QUIC always carries TLS 1.3 */
  if (o->tls) {
    fprintf(stderr, "pp-bench run: -tls is not supported: the harness starts its servers without "
                    "TLS (use smoke -url HOST:PORT -tls against a TLS server)\n");
    return 2;
  }
  pp_scenario scn;
  if (load_scenario(path, &scn) < 0) return 2;
  uint64_t seed = o->seed_set ? o->seed : scn.seed;
  pb_schedule sched;
  uint64_t digest = 0;
  if (pb_plan_schedule(&scn, seed, &sched, &digest) < 0) {
    fprintf(stderr, "pp-bench: cannot build the schedule of %s\n", path);
    pp_scenario_dispose(&scn);
    return 2;
  }
  printf("scenario %s: %zu arrivals over %.1fs, seed %" PRIu64 ", schedule digest %016" PRIx64 "\n",
         scn.name, sched.count, scn.duration_ns / 1e9, seed, digest);
  char dir[512];
  pb_dirname(path, dir, sizeof dir);
  const char *log_dir = o->log_dir ? o->log_dir : "/tmp";
  pb_config_result *res = calloc(scn.n_configs ? scn.n_configs : 1, sizeof *res);
  size_t n = 0;
  uint64_t phase_end[PP_SCN_MAX_PHASES];
  for (uint32_t p = 0; p < scn.n_phases; p++)
    phase_end[p] = (p ? phase_end[p - 1] : 0) + scn.phases[p].duration_ns;
  int rc = 0;
  for (uint32_t i = 0; i < scn.n_configs; i++) {
    if (!selected(o->only, scn.configs[i].name)) continue;
    pb_server_spec spec;
    char err[512];
    if (pb_plan_server(&scn, i, o->app ? o->app : PB_DEFAULT_APP, dir, log_dir, &spec, err,
                       sizeof err) < 0) {
      fprintf(stderr, "pp-bench: %s\n", err);
      rc = 2;
      continue;
    }
    default_binaries(&spec);
    spec.h2c = o->proto == PB_PROTO_H2;
    spec.h3 = o->proto == PB_PROTO_H3;
    spec.port = pb_free_port();
    spec.stats_port = pb_free_port();
    pb_run_options ro;
    memset(&ro, 0, sizeof ro);
    ro.timeout_ns = scn.client_timeout_ns;
    ro.max_connections = o->conns;
    ro.warmup_ns = o->warmup_ns ? o->warmup_ns : 3000000000ull;
    ro.warmup_rate = scn.n_phases ? scn.phases[0].rate : 10;
    if (ro.warmup_rate > 100) ro.warmup_rate = 100;
    ro.warmup_path = scn.n_kinds ? scn.kinds[0].path : "/hello";
    ro.max_error_ratio = o->max_errors;
    ro.stats_path = "/stats";
    ro.log_dir = log_dir;
    ro.phase_end_ns = phase_end;
    ro.running_pgid = &running_pgid;
    ro.n_phases = scn.n_phases;
    ro.proto = o->proto;
    ro.h2_connections = o->h2_conns;
    pb_run_config(&spec, &sched, &ro, &res[n]);
    if (!res[n].ran) {
      fprintf(stderr, "pp-bench: %s: %s\n", spec.name, res[n].error);
      rc = 1;
    } else {
      pb_summary_print(stdout, spec.name, &res[n].summary);
      pb_transport_print(stdout, &res[n]);
      if (res[n].spec.decision_log[0])
        printf("  decision log: %s (pp-replay --explain reads it)\n", res[n].spec.decision_log);
      if (o->timeline) pb_rows_print(stdout, res[n].rows, res[n].n_rows);
      if (!res[n].summary.check_ok) rc = 1;
    }
    fflush(stdout);
    n++;
  }
  const char *db = o->db ? o->db : "results.db";
  int64_t run_id = -1;
  char err[512] = "";
  char notes[160];
  snprintf(notes, sizeof notes, "schedule digest %016" PRIx64, digest);
  pb_store_run sr = {.scenario = scn.name,
                     .scenario_path = path,
                     .seed = seed,
                     .duration_s = scn.duration_ns / 1e9,
                     .slo_ns = scn.slo_ns,
                     .notes = notes};
  if (n && pb_store_write(db, &sr, res, n, &run_id, err, sizeof err) < 0) {
    fprintf(stderr, "pp-bench: results not stored: %s\n", err);
    rc = 2;
  } else if (n) {
    printf("\nstored as run %" PRId64 " in %s\n", run_id, db);
    if (pb_report_table(stdout, db, run_id, err, sizeof err) < 0)
      fprintf(stderr, "pp-bench: %s\n", err);
  }
  for (size_t i = 0; i < n; i++)
    pb_config_result_dispose(&res[i]);
  free(res);
  pb_schedule_dispose(&sched);
  pp_scenario_dispose(&scn);
  return rc;
}

/* pp-bench schedule scenario.yaml: what `run` would send (count and digest, as pp-sim
 * schedule prints them), optionally every arrival. */
static int cmd_schedule(const char *path, opts *o) {
  pp_scenario scn;
  if (load_scenario(path, &scn) < 0) return 2;
  uint64_t seed = o->seed_set ? o->seed : scn.seed;
  pb_schedule sched;
  if (pb_plan_schedule(&scn, seed, &sched, NULL) < 0) {
    fprintf(stderr, "pp-bench: cannot build the schedule of %s\n", path);
    pp_scenario_dispose(&scn);
    return 2;
  }
  if (o->timeline) /* -timeline doubles as "list every arrival" here */
    for (size_t i = 0; i < sched.count; i++)
      printf("%zu %" PRIu64 " %u %s\n", i, sched.arrivals[i].intended_ns, sched.arrivals[i].kind,
             sched.paths[sched.arrivals[i].kind]);
  printf("# %zu arrivals, digest %016" PRIx64 "\n", sched.count, pb_schedule_digest(&sched));
  pb_schedule_dispose(&sched);
  pp_scenario_dispose(&scn);
  return 0;
}

/* Looks up the scenario path recorded for a run. */
static int run_scenario_path(const char *db, int64_t run_id, char *out, size_t len);

static int cmd_report(const char *which, opts *o) {
  const char *db = o->db ? o->db : "results.db";
  int64_t run_id = -1;
  if (!which || strcmp(which, "latest") == 0)
    run_id = pb_store_latest_run(db, "measured");
  else
    run_id = strtoll(which, NULL, 10);
  if (run_id < 0) {
    fprintf(stderr, "pp-bench: %s: no measured run\n", db);
    return 2;
  }
  char err[512] = "";
  if (o->timeline_config) {
    if (pb_report_timeline(stdout, db, run_id, o->timeline_config, err, sizeof err) < 0) {
      fprintf(stderr, "pp-bench: %s\n", err);
      return 2;
    }
    return 0;
  }
  if (pb_report_table(stdout, db, run_id, err, sizeof err) < 0) {
    fprintf(stderr, "pp-bench: %s\n", err);
    return 2;
  }
  if (o->plot) {
    if (pb_report_plot(db, run_id, o->plot, err, sizeof err) < 0) {
      fprintf(stderr, "pp-bench: %s\n", err);
      return 2;
    }
    printf("plot: %s\n", o->plot);
  }
  if (o->vs_sim) {
    char scenario[1024];
    if (run_scenario_path(db, run_id, scenario, sizeof scenario) < 0) {
      fprintf(stderr, "pp-bench: run %" PRId64 " has no scenario path\n", run_id);
      return 2;
    }
    pp_scenario scn;
    if (load_scenario(scenario, &scn) < 0) return 2;
    int64_t sim_run;
    if (strcmp(o->vs_sim, "run") == 0) {
      /* Simulate the same scenario now, into the same database. */
      char cmd[2048];
      snprintf(cmd, sizeof cmd, "'%s' run '%s' --db '%s' > /dev/null", PB_PPSIM, scenario, db);
      if (system(cmd) != 0) {
        fprintf(stderr, "pp-bench: pp-sim failed: %s\n", cmd);
        pp_scenario_dispose(&scn);
        return 2;
      }
      sim_run = pb_store_latest_run(db, "simulated");
    } else {
      sim_run = strtoll(o->vs_sim, NULL, 10);
    }
    double edges[PP_SCN_MAX_PHASES + 1];
    edges[0] = 0;
    for (uint32_t p = 0; p < scn.n_phases; p++)
      edges[p + 1] = edges[p] + scn.phases[p].duration_ns / 1e9;
    int rc = pb_report_vs_sim(stdout, db, run_id, sim_run, edges, scn.n_phases, err, sizeof err);
    pp_scenario_dispose(&scn);
    if (rc < 0) {
      fprintf(stderr, "pp-bench: %s\n", err);
      return 2;
    }
  }
  return 0;
}

static volatile sig_atomic_t stop_flag;
static void on_signal(int sig) {
  (void)sig;
  stop_flag = 1;
}

static int cmd_null_server(opts *o) {
  if (o->proto == PB_PROTO_H3) {
    pb_nullsrv_h3 *srv3;
    int port;
    pb_nullsrv_config nc = {.port = o->port, .delay_ms = o->delay_ms, .leak_every = o->leak_every};
    if (pb_nullsrv_h3_start(&nc, &srv3, &port) < 0) return 2;
    printf("null server on 127.0.0.1:%d (h3, UDP), delay %u ms\n", port, o->delay_ms);
    fflush(stdout);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    while (!stop_flag)
      pause();
    pb_nullsrv_h3_stop(srv3, NULL, NULL);
    return 0;
  }
  pb_nullsrv *srv;
  int port;
  pb_nullsrv_config nc = {.port = o->port,
                          .delay_ms = o->delay_ms,
                          .h2 = o->proto == PB_PROTO_H2,
                          .tls = o->tls,
                          .leak_every = o->leak_every};
  if (pb_nullsrv_start(&nc, &srv, &port) < 0) return 2;
  printf("null server on 127.0.0.1:%d (%s), delay %u ms\n", port, pb_proto_label(o->proto, o->tls),
         o->delay_ms);
  fflush(stdout);
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  while (!stop_flag)
    pause();
  pb_nullsrv_stop(srv, NULL, NULL);
  return 0;
}

/* ---- pp-bench soak ---- */

static void soak_usage(FILE *f) {
  fprintf(f,
          "usage: pp-bench soak [-short] [-server pumaplus|puma|null] [options]\n"
          "\n"
          "Starts one server and runs -cycles cycles of five phases against it, each phase an\n"
          "open-loop schedule timed from intended start (like `run`):\n"
          "  1 steady    Poisson -rate rps: 50%% GET /hello, 40%% GET /mix/2/20, 10%% POST /echo\n"
          "              with an -echo-size body\n"
          "  2 overload  GET /mix/2/20 at -overload-x times the capacity (with -shed the 503s\n"
          "              must come fast: see the p99 503 column)\n"
          "  3 body      bursts of -body-conc concurrent POST /echo of -body-size, every\n"
          "              -body-every\n"
          "  4 cancel    -cancel-rate rps of GET /mix/0/2000 whose clients leave after\n"
          "              -cancel-queued (half: while queued) or -cancel-running (half: while\n"
          "              running); h1 closes the socket, h2 and h3 reset the stream\n"
          "  5 recovery  as steady\n"
          "Each second it samples the server process's open descriptors (/proc/PID/fd), its\n"
          "RSS (VmRSS) and the workers' live heap slots (/stats worker_status[].last_status.\n"
          "heap_live_slots; \"unknown\" while the server does not report it). After each cycle it\n"
          "waits up to -settle for the descriptor count to come back. Each phase also records\n"
          "the hypervisor's steal over its traffic (/proc/stat; the table's steal column): a\n"
          "phase at high steal serves less than its shape says.\n"
          "PASS = 0 failures (anything but 2xx) in steady and recovery phases, and flat\n"
          "descriptors: every end-of-cycle count within -fd-tol of the baseline read before\n"
          "cycle 1 (after a 1 s warm-up of the steady mix, settled). Exit 0 on PASS, 1 on FAIL,\n"
          "2 when it could not run.\n"
          "\n"
          "server:\n"
          "  -server KIND        pumaplus (default), puma, or null (pp-bench's null server as a\n"
          "                      child process: no app, every request answered 200)\n"
          "  -w N -t N           workers and threads (default 2 x 5)\n"
          "  -app FILE           Rack app (default scenarios/apps/mix/config.ru)\n"
          "  -shed               puma-plus admission control (-shed); the budget comes from\n"
          "  -shed-budget DUR    a policy file written to -log-dir (default 1s), or from\n"
          "  -policy FILE        your own policy file\n"
          "  -proto h1|h2|h3     h2: cleartext prior knowledge, the server gets -h2c; h3:\n"
          "                      QUIC, the server gets -listen-h3 on the UDP port of its TCP\n"
          "                      port (readiness is still probed over TCP)\n"
          "  -h2-conns N         h2/h3 connections (default 4; -h3-conns is the same flag)\n"
          "  -leak-every N       null server: leak one descriptor every N requests (tests)\n"
          "shape (defaults: the long form, ~2.5 M requests with 2 x 5 threads, ~55 min):\n"
          "  -short              the short form: 3 cycles of 3s/2s/1s/2s/3s, one body burst,\n"
          "                      -settle 3s: under 60 s in all (flags after it still apply)\n"
          "  -cycles N           (3)\n"
          "  -steady DUR -overload DUR -body DUR -cancel DUR -recovery DUR\n"
          "                      phase lengths (300s 420s 30s 30s 300s); 0 skips a phase\n"
          "  -gap DUR            idle time between phases (0)\n"
          "  -recovery-gap DUR   extra idle time before recovery (2s: the cancel phase's\n"
          "                      abandoned /mix/0/2000 still hold threads that long; 0 starts\n"
          "                      recovery at once, and admission control may then shed it)\n"
          "  -rate RPS           steady and recovery rate (150)\n"
          "  -overload-x X       overload = X times capacity (4)\n"
          "  -capacity RPS       capacity (default: estimated, min(w*t/22ms, cores/2ms),\n"
          "                      the /mix/2/20 service time)\n"
          "  -echo-size SIZE     steady upload (256KiB)\n"
          "  -body-conc N        uploads per burst (64)\n"
          "  -body-size SIZE     upload size in the body phase (4MiB)\n"
          "  -body-every DUR     burst period (5s; 0: one burst)\n"
          "  -cancel-rate RPS    (20)   -cancel-queued DUR (50ms)   -cancel-running DUR (500ms)\n"
          "  -timeout DUR        client timeout from intended start (10s)\n"
          "  -conns N            h1 connection cap (default 4096 or the descriptor limit - 64)\n"
          "  -fd-tol N           descriptor tolerance for flat (4)\n"
          "  -settle DUR         longest wait for descriptors after a cycle (5s)\n"
          "  -seed N             schedule seed (1)\n"
          "output:\n"
          "  -db FILE            SQLite results (results.db): tables soak_runs, soak_phases\n"
          "  -no-db              do not store\n"
          "  -log-dir DIR        server log and policy file (/tmp)\n"
          "Sizes: 4096, 64KiB, 4MiB (K/KiB, M/MiB are binary). Durations: 10s, 500ms, 2m.\n"
          "Progress goes to stderr: an updating line on a terminal, else a line every 10 s;\n"
          "one line per phase either way. The table goes to stdout.\n");
}

static bool parse_size(const char *s, uint32_t *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || v < 0) return false;
  double mul = 1;
  if (*end == 0 || strcmp(end, "B") == 0)
    mul = 1;
  else if (strcmp(end, "K") == 0 || strcmp(end, "KiB") == 0 || strcmp(end, "k") == 0)
    mul = 1024;
  else if (strcmp(end, "M") == 0 || strcmp(end, "MiB") == 0 || strcmp(end, "m") == 0)
    mul = 1024.0 * 1024;
  else
    return false;
  if (v * mul > PB_BODY_MAX) return false;
  *out = (uint32_t)(v * mul);
  return true;
}

static int cmd_soak(int argc, char **argv) {
  pb_soak_config c;
  pb_soak_defaults(&c);
  const char *server = "pumaplus", *app = NULL, *policy = NULL, *db = "results.db";
  const char *log_dir = "/tmp";
  uint64_t shed_budget = 1000000000ull;
  uint32_t leak_every = 0;
  bool shed = false;
  for (int i = 2; i < argc; i++) { /* -short first, so the flags after it override it */
    const char *a = argv[i] + (argv[i][0] == '-' && argv[i][1] == '-' ? 2 : 1);
    if (strcmp(a, "short") == 0) pb_soak_short(&c);
    if (strcmp(a, "h") == 0 || strcmp(a, "help") == 0) {
      soak_usage(stdout);
      return 0;
    }
  }
  char flags[1024] = "";
  for (int i = 2; i < argc; i++) {
    size_t fl = strlen(flags);
    snprintf(flags + fl, sizeof flags - fl, "%s%s", fl ? " " : "", argv[i]);
    if (argv[i][0] != '-') {
      fprintf(stderr, "pp-bench soak: unexpected argument '%s'\n", argv[i]);
      return 2;
    }
    const char *a = argv[i] + (argv[i][1] == '-' ? 2 : 1);
    if (strcmp(a, "short") == 0) continue;
    if (strcmp(a, "shed") == 0) {
      shed = true;
      continue;
    }
    if (strcmp(a, "no-db") == 0) {
      db = NULL;
      continue;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "pp-bench soak: option -%s needs a value\n", a);
      return 2;
    }
    const char *v = argv[++i];
    fl = strlen(flags);
    snprintf(flags + fl, sizeof flags - fl, " %s", v);
    double d;
    bool ok = true;
    int phase = -1;
    for (int p = 0; p < PB_SOAK_PHASES; p++)
      if (strcmp(a, pb_soak_phase_name(p)) == 0) phase = p;
    if (phase >= 0)
      ok = parse_duration(v, &c.phase_ns[phase]);
    else if (strcmp(a, "server") == 0)
      server = v;
    else if (strcmp(a, "app") == 0)
      app = v;
    else if (strcmp(a, "policy") == 0)
      policy = v;
    else if (strcmp(a, "db") == 0)
      db = v;
    else if (strcmp(a, "log-dir") == 0)
      log_dir = v;
    else if (strcmp(a, "proto") == 0) {
      if (strcmp(v, "h1") == 0)
        c.proto = PB_PROTO_H1;
      else if (strcmp(v, "h2") == 0)
        c.proto = PB_PROTO_H2;
      else if (strcmp(v, "h3") == 0)
        c.proto = PB_PROTO_H3;
      else
        ok = false;
    } else if (strcmp(a, "w") == 0)
      ok = parse_double(v, &d) && d >= 1 && ((c.spec.workers = (uint32_t)d), 1);
    else if (strcmp(a, "t") == 0)
      ok = parse_double(v, &d) && d >= 1 && ((c.spec.threads = (uint32_t)d), 1);
    else if (strcmp(a, "cycles") == 0)
      ok = parse_double(v, &d) && d >= 1 && d <= 4096 && ((c.cycles = (uint32_t)d), 1);
    else if (strcmp(a, "h2-conns") == 0 || strcmp(a, "h3-conns") == 0)
      ok = parse_double(v, &d) && d >= 1 && d <= 4096 && ((c.h2_connections = (uint32_t)d), 1);
    else if (strcmp(a, "leak-every") == 0)
      ok = parse_double(v, &d) && d >= 0 && ((leak_every = (uint32_t)d), 1);
    else if (strcmp(a, "shed-budget") == 0)
      ok = parse_duration(v, &shed_budget) && shed_budget >= 1000000ull;
    else if (strcmp(a, "gap") == 0)
      ok = parse_duration(v, &c.gap_ns);
    else if (strcmp(a, "recovery-gap") == 0)
      ok = parse_duration(v, &c.recovery_gap_ns);
    else if (strcmp(a, "rate") == 0)
      ok = parse_double(v, &c.steady_rps) && c.steady_rps >= 0;
    else if (strcmp(a, "overload-x") == 0)
      ok = parse_double(v, &c.overload_x) && c.overload_x >= 0;
    else if (strcmp(a, "capacity") == 0)
      ok = parse_double(v, &c.capacity_rps) && c.capacity_rps > 0;
    else if (strcmp(a, "echo-size") == 0)
      ok = parse_size(v, &c.echo_bytes) && c.echo_bytes > 0;
    else if (strcmp(a, "body-size") == 0)
      ok = parse_size(v, &c.body_bytes) && c.body_bytes > 0;
    else if (strcmp(a, "body-conc") == 0)
      ok = parse_double(v, &d) && d >= 0 && d <= 100000 && ((c.body_concurrency = (uint32_t)d), 1);
    else if (strcmp(a, "body-every") == 0)
      ok = parse_duration(v, &c.body_every_ns);
    else if (strcmp(a, "cancel-rate") == 0)
      ok = parse_double(v, &c.cancel_rps) && c.cancel_rps >= 0;
    else if (strcmp(a, "cancel-queued") == 0)
      ok = parse_duration(v, &c.cancel_queued_ns) && c.cancel_queued_ns > 0;
    else if (strcmp(a, "cancel-running") == 0)
      ok = parse_duration(v, &c.cancel_running_ns) && c.cancel_running_ns > 0;
    else if (strcmp(a, "timeout") == 0)
      ok = parse_duration(v, &c.timeout_ns) && c.timeout_ns > 0;
    else if (strcmp(a, "conns") == 0)
      ok = parse_double(v, &d) && d >= 1 && ((c.max_connections = (uint32_t)d), 1);
    else if (strcmp(a, "fd-tol") == 0)
      ok = parse_double(v, &d) && d >= 0 && ((c.fd_tolerance = (uint32_t)d), 1);
    else if (strcmp(a, "settle") == 0)
      ok = parse_duration(v, &c.settle_ns);
    else if (strcmp(a, "seed") == 0)
      ok = parse_double(v, &d) && d >= 0 && ((c.seed = (uint64_t)d), 1);
    else {
      fprintf(stderr, "pp-bench soak: unknown option -%s (pp-bench soak --help)\n", a);
      return 2;
    }
    if (!ok) {
      fprintf(stderr, "pp-bench soak: bad value '%s' for -%s\n", v, a);
      return 2;
    }
  }
  pb_server_spec *spec = &c.spec;
  if (!spec->workers) spec->workers = 2;
  if (!spec->threads) spec->threads = 5;
  if (strcmp(server, "pumaplus") == 0)
    spec->kind = PB_SERVER_PUMAPLUS;
  else if (strcmp(server, "puma") == 0)
    spec->kind = PB_SERVER_PUMA;
  else if (strcmp(server, "null") == 0)
    spec->kind = PB_SERVER_NULL;
  else {
    fprintf(stderr, "pp-bench soak: -server wants pumaplus, puma or null, got '%s'\n", server);
    return 2;
  }
  if ((shed || policy) && spec->kind != PB_SERVER_PUMAPLUS) {
    fprintf(stderr, "pp-bench soak: -shed and -policy are puma-plus flags\n");
    return 2;
  }
  if (leak_every && spec->kind != PB_SERVER_NULL) {
    fprintf(stderr, "pp-bench soak: -leak-every is a null-server flag\n");
    return 2;
  }
  if (c.proto == PB_PROTO_H2 && spec->kind != PB_SERVER_PUMAPLUS) {
    fprintf(stderr, "pp-bench soak: -proto h2 needs -server pumaplus (puma has no HTTP/2; the "
                    "null server's h2 mode cannot answer the HTTP/1.1 readiness probe)\n");
    return 2;
  }
  if (c.proto == PB_PROTO_H3 && spec->kind != PB_SERVER_PUMAPLUS) {
    fprintf(stderr, "pp-bench soak: -proto h3 needs -server pumaplus (puma has no HTTP/3; the "
                    "null server's h3 mode listens on UDP only and cannot answer the HTTP/1.1 "
                    "readiness probe)\n");
    return 2;
  }
  spec->shed = shed;
  if (policy) snprintf(spec->policy_path, sizeof spec->policy_path, "%s", policy);
  c.shed_budget_ns = shed && !policy ? shed_budget : 0;
  spec->h2c = c.proto == PB_PROTO_H2;
  spec->h3 = c.proto == PB_PROTO_H3;
  spec->null_leak_every = leak_every;
  snprintf(spec->app, sizeof spec->app, "%s", app ? app : PB_DEFAULT_APP);
  default_binaries(spec);
  if (spec->kind == PB_SERVER_NULL &&
      readlink("/proc/self/exe", spec->null_bin, sizeof spec->null_bin - 1) < 0)
    snprintf(spec->null_bin, sizeof spec->null_bin, "%s", argv[0]);
  if (spec->kind == PB_SERVER_NULL)
    snprintf(spec->name, sizeof spec->name, "soak-null%s", leak_every ? "-leaky" : "");
  else
    snprintf(spec->name, sizeof spec->name, "soak-%s-w%ut%u%s", server, spec->workers,
             spec->threads, shed ? "-shed" : "");
  c.log_dir = log_dir;
  c.running_pgid = &running_pgid;
  stop_servers_on_interrupt();

  double cap = c.capacity_rps > 0 ? c.capacity_rps
                                  : pb_soak_capacity(spec->workers, spec->threads, 2, 20,
                                                     (uint32_t)sysconf(_SC_NPROCESSORS_ONLN));
  double planned, seconds;
  pb_soak_plan(&c, cap, &planned, &seconds);
  fprintf(stderr,
          "[soak] plan: %u cycles, ~%.0f requests over ~%.0f s of schedules (plus tails and "
          "settling); capacity %.0f rps, overload %.0f rps\n",
          c.cycles, planned, seconds, cap, cap * c.overload_x);
  pb_soak_result r;
  pb_soak_run(&c, &r);
  pb_soak_print(stdout, &c, &r);
  int rc = !r.ran && r.n_cycles == 0 ? 2 : r.passed ? 0 : 1;
  if (db) {
    char err[512] = "";
    int64_t id;
    if (pb_store_soak(db, &c, &r, flags, &id, err, sizeof err) < 0) {
      fprintf(stderr, "pp-bench soak: not stored: %s\n", err);
      if (rc == 0) rc = 2;
    } else {
      printf("stored as soak %" PRId64 " in %s (tables soak_runs, soak_phases)\n", id, db);
    }
  }
  pb_soak_result_dispose(&r);
  return rc;
}

/* ---- pp-bench compare ---- */

static void compare_usage(FILE *f) {
  fprintf(f,
          "usage: pp-bench compare [-servers LIST] [-shapes LIST] [-rounds N] [options]\n"
          "\n"
          "Servers side by side on one Rack app, in one run: for each round, each shape and each\n"
          "server (servers interleaved within a shape, the first one rotating per round, so\n"
          "drift hits all alike) it starts the server in its own process group, waits for a 2xx\n"
          "on -path and for the shape's processes, warms it up with wrk, then measures:\n"
          "  closed loop  wrk -t1 -c CONNS -d DUR --latency: requests/s, p50, p99 (wrk's, from\n"
          "               the moment each request was written), non-2xx and socket errors; CPU\n"
          "               per request = utime+stime of the server's whole process tree\n"
          "               (/proc/PID/stat) over the wrk run / requests completed; for pumaplus\n"
          "               also puma-plus-server's own pid (front_us) and the rest (ruby_us)\n"
          "  open loop    pp-bench's generator, Poisson -rate rps for -rate-dur (the smoke\n"
          "               engine): p50, p99, p99.9 from intended start, shed/errors/timeouts\n"
          "  steal%%      over each loop, the hypervisor's steal time in percent of all CPU\n"
          "               time (/proc/stat): on a shared VM the largest swing between rounds\n"
          "then stops it. A round with errors is marked ERRORS and kept in the medians. Each\n"
          "round's table goes to stdout as it completes, progress to stderr; then medians\n"
          "(min..max) per shape x server and ratios against puma and puma8, and against\n"
          "pumaplus when a pumaplus@DIR column ran (A/B of two builds).\n"
          "\n"
          "servers:\n"
          "  -servers LIST    comma-separated, in this order within a round (default\n"
          "                   pumaplus,puma):\n"
          "                   pumaplus  the gem's CLI (gem/exe/puma-plus) running this build's\n"
          "                             puma-plus-server, -w W -t T:T\n"
          "                   puma      Debian's puma 5.6.5 (puma from PATH, or $PP_PUMA),\n"
          "                             --no-config -w W -t T:T\n"
          "                   puma8     puma 8.0 from the RubyGems column: bundle exec puma with\n"
          "                             GEM_HOME=-gem-home, BUNDLE_GEMFILE=-gemfile\n"
          "                   falcon    falcon 0.51 from the same column: falcon serve --count W\n"
          "                             --forked; fibers, so a shape's threads do NOT apply to\n"
          "                             it (stored as NULL): equal processes, not equal threads\n"
          "                   pumaplus@DIR  as pumaplus, with another built checkout's CLI\n"
          "                             DIR/gem/exe/puma-plus and server\n"
          "                             DIR/build/server/puma-plus-server (and so its C codec,\n"
          "                             DIR/build/gem/ext-lib); labelled pumaplus@BASENAME, or\n"
          "                             pumaplus@LABEL with pumaplus@DIR=LABEL (1..32 of\n"
          "                             [A-Za-z0-9._-]); any number of them; a label used twice\n"
          "                             is refused. DIR must be built (cmake --build DIR/build\n"
          "                             --target puma-plus-server puma_plus_ext) from DIR itself\n"
          "                             (else its workers would run the pure-Ruby codec):\n"
          "                             compare checks it before it starts\n"
          "                   puma8 and falcon need scripts/install-gems.sh; without it compare\n"
          "                   fails before it starts, naming it\n"
          "  -shapes LIST     WORKERSxTHREADS, comma-separated (default 1x1,1x5,2x5)\n"
          "  -rounds N        (default 3)\n"
          "  -app FILE        Rack app (default scenarios/apps/mix/config.ru); every cell\n"
          "                   stores the first line of one GET -path before the warm-up\n"
          "                   (compare_results.answer): tests/apps/codec/config.ru with -path /\n"
          "                   answers the workers' codec, native or ruby\n"
          "  -gem-home DIR    the RubyGems column (default $PP_GEM_HOME or build/gems of the\n"
          "                   checkout)\n"
          "  -gemfile FILE    (default tests/apps/gemfiles/rubygems/Gemfile)\n"
          "load:\n"
          "  -path PATH       request path of both loops and the readiness probe (/hello)\n"
          "  -dur DUR         closed-loop measurement, whole seconds (5s)\n"
          "  -warmup DUR      closed-loop warm-up before it, whole seconds, 0 = none (1s)\n"
          "  -conns N         wrk connections, one wrk thread (10)\n"
          "  -rate RPS        open-loop rate, 0 = no open-loop run (1000)\n"
          "  -rate-dur DUR    open-loop length (10s)\n"
          "  -ready-timeout DUR  longest wait for a server's first 2xx (60s)\n"
          "steal:\n"
          "  -max-steal PCT   0 < PCT <= 100 (default off): a cell whose closed-loop or open-loop\n"
          "                   steal%% is above PCT is measured again from a fresh server start,\n"
          "                   as a new cell; of its attempts the one with the lowest\n"
          "                   max(closed, open) steal%% is kept (column attempt: kept/made);\n"
          "                   when none got under PCT the kept one is marked STEAL and still\n"
          "                   counts in the medians (the exit status ignores STEAL); the\n"
          "                   summary says how many cells stayed above\n"
          "  -steal-retries N more attempts per cell, 0..20 (default 3); only with -max-steal\n"
          "                   (alone it is an error)\n"
          "                   PP_BENCH_STEAL_SEQ=40,2 (a test hook) gives the steal%% of the\n"
          "                   successive loops that ran instead of /proc/stat's\n"
          "output:\n"
          "  -db FILE         SQLite results (results.db): tables compare_runs, compare_servers,\n"
          "                   compare_results, compare_medians (docs/RESULTS.md)\n"
          "  -no-db           do not store\n"
          "  -plot FILE.png   gnuplot figure: requests/s, p50, p99, CPU us per request by shape,\n"
          "                   one point per server (median, bars min..max); FILE.png.dat and\n"
          "                   FILE.png.gp beside it\n"
          "  -log-dir DIR     server logs, one per round x shape x server (/tmp)\n"
          "Exit 0 when every run ran without errors, 1 when one failed or had errors, 2 when\n"
          "compare could not start (bad flags, a missing server or tool).\n"
          "Durations: 10s, 500ms, 2m. Needs wrk and gnuplot-nox (scripts/install-deps.sh).\n");
}

static int cmd_compare(int argc, char **argv) {
  pb_compare_config c;
  pb_compare_defaults(&c);
  const char *db = "results.db", *plot = NULL, *app = NULL, *gem_home = getenv("PP_GEM_HOME");
  const char *gemfile = NULL;
  bool steal_retries_given = false;
  char flags[1024] = "";
  for (int i = 2; i < argc; i++) {
    size_t fl = strlen(flags);
    snprintf(flags + fl, sizeof flags - fl, "%s%s", fl ? " " : "", argv[i]);
    if (argv[i][0] != '-') {
      fprintf(stderr, "pp-bench compare: unexpected argument '%s' (pp-bench compare --help)\n",
              argv[i]);
      return 2;
    }
    const char *a = argv[i] + (argv[i][1] == '-' ? 2 : 1);
    if (strcmp(a, "h") == 0 || strcmp(a, "help") == 0) {
      compare_usage(stdout);
      return 0;
    }
    if (strcmp(a, "no-db") == 0) {
      db = NULL;
      continue;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "pp-bench compare: option -%s needs a value\n", a);
      return 2;
    }
    const char *v = argv[++i];
    fl = strlen(flags);
    snprintf(flags + fl, sizeof flags - fl, " %s", v);
    double d;
    bool ok = true;
    char bad[64];
    if (strcmp(a, "servers") == 0) {
      pb_cmp_server_list list;
      char why[512];
      if (pb_cmp_parse_server_list(v, &list, why, sizeof why) < 0) {
        fprintf(stderr, "pp-bench compare: -servers: %s\n", why[0] ? why : "an empty word");
        return 2;
      }
      pb_cmp_config_set_servers(&c, &list);
    } else if (strcmp(a, "shapes") == 0) {
      int n = pb_cmp_parse_shapes(v, c.shapes, PB_CMP_MAX_SHAPES, bad, sizeof bad);
      if (n < 0) {
        fprintf(stderr,
                "pp-bench compare: -shapes: bad shape '%s' (WORKERSxTHREADS, each 1..256, at "
                "most %d shapes: 1x1,2x5)\n",
                bad, PB_CMP_MAX_SHAPES);
        return 2;
      }
      c.n_shapes = (size_t)n;
    } else if (strcmp(a, "rounds") == 0)
      ok = parse_double(v, &d) && d >= 1 && d <= PB_CMP_MAX_ROUNDS && d == (uint32_t)d &&
           ((c.rounds = (uint32_t)d), 1);
    else if (strcmp(a, "dur") == 0)
      ok = parse_duration(v, &c.dur_ns) && c.dur_ns >= 1000000000ull &&
           c.dur_ns % 1000000000ull == 0;
    else if (strcmp(a, "warmup") == 0)
      ok = parse_duration(v, &c.warmup_ns) && c.warmup_ns % 1000000000ull == 0;
    else if (strcmp(a, "conns") == 0)
      ok = parse_double(v, &d) && d >= 1 && d <= 10000 && ((c.conns = (uint32_t)d), 1);
    else if (strcmp(a, "path") == 0)
      ok = v[0] == '/' && strlen(v) < sizeof c.path && snprintf(c.path, sizeof c.path, "%s", v);
    else if (strcmp(a, "rate") == 0)
      ok = parse_double(v, &c.rate) && c.rate >= 0 && c.rate <= 100000;
    else if (strcmp(a, "rate-dur") == 0)
      ok = parse_duration(v, &c.rate_dur_ns) && c.rate_dur_ns >= 100000000ull;
    else if (strcmp(a, "ready-timeout") == 0)
      ok = parse_duration(v, &c.ready_timeout_ns) && c.ready_timeout_ns > 0;
    else if (strcmp(a, "max-steal") == 0)
      ok = parse_double(v, &c.max_steal_pct) && c.max_steal_pct > 0 && c.max_steal_pct <= 100;
    else if (strcmp(a, "steal-retries") == 0)
      ok = parse_double(v, &d) && d >= 0 && d <= PB_CMP_MAX_STEAL_RETRIES && d == (uint32_t)d &&
           ((c.steal_retries = (uint32_t)d), (steal_retries_given = true));
    else if (strcmp(a, "app") == 0)
      app = v;
    else if (strcmp(a, "db") == 0)
      db = v;
    else if (strcmp(a, "plot") == 0)
      plot = v;
    else if (strcmp(a, "log-dir") == 0)
      ok = strlen(v) < sizeof c.log_dir && snprintf(c.log_dir, sizeof c.log_dir, "%s", v);
    else if (strcmp(a, "gem-home") == 0)
      gem_home = v;
    else if (strcmp(a, "gemfile") == 0)
      gemfile = v;
    else {
      fprintf(stderr, "pp-bench compare: unknown option -%s (pp-bench compare --help)\n", a);
      return 2;
    }
    if (!ok) {
      const char *why = strcmp(a, "dur") == 0         ? " (whole seconds, at least 1s: wrk's -d)"
                        : strcmp(a, "warmup") == 0    ? " (whole seconds: wrk's -d; 0 = none)"
                        : strcmp(a, "path") == 0      ? " (a path starting with /)"
                        : strcmp(a, "max-steal") == 0 ? " (a steal percentage PCT, 0 < PCT <= 100)"
                        : strcmp(a, "steal-retries") == 0 ? " (a whole number, 0..20)"
                                                          : "";
      fprintf(stderr, "pp-bench compare: bad value '%s' for -%s%s\n", v, a, why);
      return 2;
    }
  }
  if (steal_retries_given && c.max_steal_pct <= 0) {
    fprintf(stderr, "pp-bench compare: -steal-retries needs -max-steal PCT (retries are for cells "
                    "whose steal is above PCT)\n");
    return 2;
  }
  if (c.max_steal_pct > 0 && !steal_retries_given) c.steal_retries = 3;
  const char *steal_seq = getenv("PP_BENCH_STEAL_SEQ");
  if (steal_seq && steal_seq[0]) {
    int n = pb_cmp_parse_steal_seq(steal_seq, c.steal_seq, PB_CMP_MAX_STEAL_SEQ);
    if (n < 0) {
      fprintf(stderr,
              "pp-bench compare: PP_BENCH_STEAL_SEQ='%s': want comma-separated percentages "
              "0..100, at most %d (a test hook: `40,2` gives the steal%% of successive loops)\n",
              steal_seq, PB_CMP_MAX_STEAL_SEQ);
      return 2;
    }
    c.n_steal_seq = (size_t)n;
  }
  snprintf(c.app, sizeof c.app, "%s", app ? app : PB_DEFAULT_APP);
  if (access(c.app, R_OK) != 0) {
    fprintf(stderr, "pp-bench compare: -app %s: %s\n", c.app, strerror(errno));
    return 2;
  }
  if (gem_home)
    snprintf(c.gem_home, sizeof c.gem_home, "%s", gem_home);
  else
    snprintf(c.gem_home, sizeof c.gem_home, "%s/build/gems", PB_SOURCE_DIR);
  if (gemfile)
    snprintf(c.gemfile, sizeof c.gemfile, "%s", gemfile);
  else
    snprintf(c.gemfile, sizeof c.gemfile, "%s/tests/apps/gemfiles/rubygems/Gemfile", PB_SOURCE_DIR);
  snprintf(c.source_dir, sizeof c.source_dir, "%s", PB_SOURCE_DIR);
  default_binaries(&c.base);
  c.running_pgid = &running_pgid;
  /* Debian's column for pumaplus and puma whatever the caller's shell exported; puma8 and
   * falcon get the RubyGems column's variables in their own child (pb_rubygems_env_apply). */
  pb_rubygems_env_apply(NULL, NULL);
  stop_servers_on_interrupt();
  if (plot && system("command -v gnuplot > /dev/null 2>&1") != 0) {
    fprintf(stderr, "pp-bench compare: -plot needs gnuplot (Debian package gnuplot-nox)\n");
    return 2;
  }
  pb_compare_result r;
  int rc = pb_compare_run(&c, &r, stdout);
  if (!r.prerequisites_ok) {
    fprintf(stderr, "pp-bench compare: %s\n", r.error);
    pb_compare_result_dispose(&r);
    return 2;
  }
  pb_compare_print_summary(stdout, &c, &r);
  char err[512] = "";
  if (db) {
    int64_t id;
    if (pb_store_compare(db, &c, &r, flags, &id, err, sizeof err) < 0) {
      fprintf(stderr, "pp-bench compare: not stored: %s\n", err);
      rc = 2;
    } else {
      printf("stored as compare %" PRId64 " in %s (tables compare_runs, compare_servers, "
             "compare_results, compare_medians)\n",
             id, db);
    }
  }
  if (plot) {
    if (pb_compare_plot(&c, &r, plot, err, sizeof err) < 0) {
      fprintf(stderr, "pp-bench compare: %s\n", err);
      rc = 2;
    } else {
      printf("plot: %s\n", plot);
    }
  }
  pb_compare_result_dispose(&r);
  return rc;
}

int main(int argc, char **argv) {
  if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (strcmp(argv[1], "soak") == 0) return cmd_soak(argc, argv);
  if (strcmp(argv[1], "compare") == 0) return cmd_compare(argc, argv);
  opts o = {.path = "/hello", .rate = 100, .dur_ns = 10000000000ull, .max_errors = 0.01, .seed = 1};
  const char *cmd = argv[1];
  if (strcmp(cmd, "floor") == 0) o.rate = 500;
  const char *positional = NULL;
  int first = 2;
  if ((strcmp(cmd, "run") == 0 || strcmp(cmd, "report") == 0 || strcmp(cmd, "schedule") == 0) &&
      argc > 2 && argv[2][0] != '-') {
    positional = argv[2];
    first = 3;
  }
  if (!parse_opts(argc, argv, first, &o)) {
    usage(stderr);
    return 2;
  }
  if (strcmp(cmd, "smoke") == 0 || strcmp(cmd, "run") == 0) stop_servers_on_interrupt();
  if (strcmp(cmd, "smoke") == 0) return cmd_smoke(&o);
  if (strcmp(cmd, "floor") == 0) return cmd_floor(&o);
  if (strcmp(cmd, "null-server") == 0) return cmd_null_server(&o);
  if (strcmp(cmd, "run") == 0) {
    if (!positional) {
      fprintf(stderr, "pp-bench run: which scenario? (pp-bench run scenarios/step-2core.yaml)\n");
      return 2;
    }
    return cmd_run(positional, &o);
  }
  if (strcmp(cmd, "report") == 0) return cmd_report(positional, &o);
  if (strcmp(cmd, "schedule") == 0) {
    if (!positional) {
      fprintf(stderr, "pp-bench schedule: which scenario?\n");
      return 2;
    }
    return cmd_schedule(positional, &o);
  }
  fprintf(stderr, "pp-bench: unknown command '%s'\n", cmd);
  usage(stderr);
  return 2;
}

static int run_scenario_path(const char *db, int64_t run_id, char *out, size_t len) {
  sqlite3 *s3;
  if (sqlite3_open_v2(db, &s3, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
    sqlite3_close(s3);
    return -1;
  }
  sqlite3_stmt *st;
  int rc = -1;
  if (sqlite3_prepare_v2(s3, "SELECT scenario_path FROM runs WHERE run_id = ?", -1, &st, NULL) ==
      SQLITE_OK) {
    sqlite3_bind_int64(st, 1, run_id);
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0)) {
      snprintf(out, len, "%s", (const char *)sqlite3_column_text(st, 0));
      rc = 0;
    }
    sqlite3_finalize(st);
  }
  sqlite3_close(s3);
  return rc;
}
