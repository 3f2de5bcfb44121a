/* pp-bench: open-loop load generator and benchmark harness. The only main() of bench/.
 *
 *   pp-bench smoke [-server null|puma|pumaplus | -url HOST:PORT] [-path P] [-rate R] [-dur D]
 *   pp-bench floor [-rate R] [-dur D]
 *   pp-bench null-server [-port P] [-delay MS]
 *
 * Options accept one or two leading dashes. Durations: 10s, 500ms, 2m, 1500us. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "bench/gen.h"
#include "bench/nullsrv.h"
#include "bench/run.h"
#include "bench/schedule.h"
#include "bench/stats.h"

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
} opts;

static void usage(FILE *f) {
  fprintf(f, "usage:\n"
             "  pp-bench smoke [-server null|puma|pumaplus | -url HOST:PORT] [-path /hello]\n"
             "                 [-rate 100] [-dur 10s] [-timeout 20s] [-conns 256] [-seed N]\n"
             "                 [-uniform] [-spectrum] [-timeline] [-csv FILE] [-max-errors 0.01]\n"
             "                 [-w 2] [-t 5] [-app config.ru] [-autoscale] [-policy FILE]\n"
             "                 [-warmup 2s] [-delay MS (null server)]\n"
             "  pp-bench floor [-rate 500] [-dur 10s] [-spectrum]\n"
             "  pp-bench null-server [-port 0] [-delay 0]   (runs until SIGINT/SIGTERM)\n");
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
      continue;
    }
    if (strcmp(a, "autoscale") == 0) {
      o->autoscale = true;
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
      ok = parse_double(v, &d) && d >= 0 && ((o->seed = (uint64_t)d), 1);
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
}

/* Prints what a smoke run measured. Returns 0 when the success check passed. */
static int report_result(const opts *o, const pb_config_result *r, const pb_schedule *sched,
                         const char *label) {
  if (!r->ran) {
    fprintf(stderr, "pp-bench: %s: %s\n", label, r->error);
    return 2;
  }
  pb_summary_print(stdout, label, &r->summary);
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
    pb_nullsrv *srv;
    int port;
    pb_nullsrv_config nc = {.delay_ms = o->delay_ms};
    if (pb_nullsrv_start(&nc, &srv, &port) < 0) {
      pb_schedule_dispose(&sched);
      return 2;
    }
    run_options(o, &ro, "null server");
    pb_run_target("127.0.0.1", port, &sched, &ro, &r);
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
    spec.port = pb_free_port();
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

static volatile sig_atomic_t stop_flag;
static void on_signal(int sig) {
  (void)sig;
  stop_flag = 1;
}

static int cmd_null_server(opts *o) {
  pb_nullsrv *srv;
  int port;
  pb_nullsrv_config nc = {.port = o->port, .delay_ms = o->delay_ms};
  if (pb_nullsrv_start(&nc, &srv, &port) < 0) return 2;
  printf("null server on 127.0.0.1:%d, delay %u ms\n", port, o->delay_ms);
  fflush(stdout);
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  while (!stop_flag)
    pause();
  pb_nullsrv_stop(srv, NULL, NULL);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  opts o = {.path = "/hello", .rate = 100, .dur_ns = 10000000000ull, .max_errors = 0.01, .seed = 1};
  const char *cmd = argv[1];
  if (strcmp(cmd, "floor") == 0) o.rate = 500;
  if (!parse_opts(argc, argv, 2, &o)) {
    usage(stderr);
    return 2;
  }
  if (strcmp(cmd, "smoke") == 0) return cmd_smoke(&o);
  if (strcmp(cmd, "floor") == 0) return cmd_floor(&o);
  if (strcmp(cmd, "null-server") == 0) return cmd_null_server(&o);
  fprintf(stderr, "pp-bench: unknown command '%s'\n", cmd);
  usage(stderr);
  return 2;
}
