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
} opts;

static void usage(FILE *f) {
  fprintf(f, "usage:\n"
             "  pp-bench smoke [-server null|puma|pumaplus | -url HOST:PORT] [-path /hello]\n"
             "                 [-rate 100] [-dur 10s] [-timeout 20s] [-conns 256] [-seed N]\n"
             "                 [-uniform] [-spectrum] [-csv FILE] [-max-errors 0.01]\n"
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

typedef struct progress_ctx {
  const char *phase;
  bool tty;
} progress_ctx;

static void on_progress(const pb_progress *p, void *data) {
  progress_ctx *ctx = data;
  if (!ctx->tty) return;
  fprintf(stderr,
          "\r\033[K[%s] %5.1fs  offered %" PRIu64 "  done %" PRIu64 "  rps %" PRIu64
          "  in-flight %" PRIu64 "  waiting %" PRIu64 "  conns %" PRIu64,
          ctx->phase, p->elapsed_ns / 1e9, p->offered, p->completed, p->completed_last_second,
          p->in_flight, p->waiting, p->open_conns);
  fflush(stderr);
}

/* Runs `sched` against host:port and prints the summary. Returns 0 when the check passed. */
static int generate_and_report(const opts *o, const pb_schedule *sched, const char *host, int port,
                               const char *label) {
  pb_result *results = calloc(sched->count ? sched->count : 1, sizeof *results);
  if (!results) {
    fprintf(stderr, "pp-bench: out of memory\n");
    return 2;
  }
  progress_ctx pctx = {.phase = label, .tty = isatty(2)};
  pb_gen_config cfg = {.host = host,
                       .port = port,
                       .max_connections = o->conns,
                       .timeout_ns = o->timeout_ns,
                       .progress = on_progress,
                       .data = &pctx};
  char err[256];
  int rc = pb_gen_run(&cfg, sched, results, NULL, err, sizeof err);
  if (pctx.tty) fprintf(stderr, "\r\033[K");
  if (rc < 0) {
    fprintf(stderr, "pp-bench: %s\n", err);
    free(results);
    return 2;
  }
  pb_summary s;
  pb_summarize(results, sched->count, o->timeout_ns ? o->timeout_ns : 20000000000ull, o->max_errors,
               &s);
  pb_summary_print(stdout, label, &s);
  if (o->spectrum) pb_spectrum_print(stdout, &s.latency);
  if (o->csv) {
    FILE *f = fopen(o->csv, "w");
    if (!f)
      fprintf(stderr, "pp-bench: cannot write %s: %s\n", o->csv, strerror(errno));
    else {
      pb_csv_write(f, results, sched->count, sched->paths);
      fclose(f);
    }
  }
  free(results);
  return s.check_ok ? 0 : 1;
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
  if (o->url) {
    char host[128];
    int port;
    if (split_hostport(o->url, host, sizeof host, &port) < 0) {
      fprintf(stderr, "pp-bench: -url wants HOST:PORT, got '%s'\n", o->url);
      pb_schedule_dispose(&sched);
      return 2;
    }
    rc = generate_and_report(o, &sched, host, port, o->url);
  } else if (!o->server || strcmp(o->server, "null") == 0) {
    pb_nullsrv *srv;
    int port;
    pb_nullsrv_config nc = {.delay_ms = o->delay_ms};
    if (pb_nullsrv_start(&nc, &srv, &port) < 0) {
      pb_schedule_dispose(&sched);
      return 2;
    }
    rc = generate_and_report(o, &sched, "127.0.0.1", port, "null server");
    pb_nullsrv_stop(srv, NULL, NULL);
  } else {
    fprintf(stderr, "pp-bench: -server %s: not available in this build yet\n", o->server);
    rc = 2;
  }
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
