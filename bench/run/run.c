/* One measured configuration (run.h). */
#include "bench/run/run.h"

#include <inttypes.h>
#include <stdbool.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <uv.h>

#include "bench/harness/harness.h"
#include "bench/gen/schedule.h"

int pb_free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  int port = -1;
  if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
      getsockname(fd, (struct sockaddr *)&a, &len) == 0)
    port = ntohs(a.sin_port);
  close(fd);
  return port;
}

typedef struct progress_ctx {
  const char *label;
  bool tty;
  const uint64_t *phase_end_ns;
  uint32_t n_phases;
} progress_ctx;

static void on_progress(const pb_progress *p, void *data) {
  progress_ctx *ctx = data;
  if (!ctx->tty) return;
  char phase[32] = "";
  if (ctx->n_phases) {
    uint32_t k = 0;
    while (k + 1 < ctx->n_phases && p->elapsed_ns >= ctx->phase_end_ns[k])
      k++;
    if (p->elapsed_ns >= ctx->phase_end_ns[ctx->n_phases - 1])
      snprintf(phase, sizeof phase, " drain");
    else
      snprintf(phase, sizeof phase, " phase %u/%u", k + 1, ctx->n_phases);
  }
  fprintf(stderr,
          "\r\033[K[%s%s] %5.0fs  offered %" PRIu64 "  done %" PRIu64 "  rps %" PRIu64
          "  in-flight %" PRIu64 "  waiting %" PRIu64 "  conns %" PRIu64,
          ctx->label, phase, p->elapsed_ns / 1e9, p->offered, p->completed,
          p->completed_last_second, p->in_flight, p->waiting, p->open_conns);
  fflush(stderr);
}

static void note(const pb_run_options *o, const char *fmt, const char *a, const char *b) {
  if (o->quiet) return;
  fprintf(stderr, fmt, a, b);
}

/* Joins client seconds and server samples into rows. */
static void build_rows(pb_config_result *out, const pb_sample *samples, size_t n_samples) {
  size_t need = pb_timeline(out->results, out->n, NULL, 0);
  pb_second *secs = calloc(need ? need : 1, sizeof *secs);
  out->rows = calloc(need ? need : 1, sizeof *out->rows);
  if (!secs || !out->rows) {
    free(secs);
    return;
  }
  pb_timeline(out->results, out->n, secs, need);
  for (size_t k = 0; k < need; k++) {
    out->rows[k].client = secs[k];
    out->rows[k].queue_p95_ms = -1;
    out->rows[k].workers = -1;
    out->rows[k].queue_depth = -1;
    out->rows[k].workers_parked = -1;
  }
  for (size_t i = 0; i < n_samples; i++) {
    size_t k = (size_t)(samples[i].t_ns / 1000000000u);
    if (k >= need) continue;
    out->rows[k].procs = samples[i].procs;
    out->rows[k].rss_bytes = samples[i].rss_bytes;
    out->rows[k].queue_p95_ms = samples[i].queue_p95_ms;
    out->rows[k].workers = samples[i].workers;
    out->rows[k].queue_depth = samples[i].queue_depth;
    out->rows[k].pss_bytes = samples[i].pss_bytes;
    out->rows[k].uss_bytes = samples[i].uss_bytes;
    out->rows[k].workers_parked = samples[i].workers_parked;
  }
  /* A second the sampler missed (its 1 s period drifts against the run's seconds) shows the
   * previous sample rather than an empty server; the server runs until every request ended. */
  for (size_t k = 1; k < need; k++) {
    if (out->rows[k].procs || !out->rows[k - 1].procs) continue;
    out->rows[k].procs = out->rows[k - 1].procs;
    out->rows[k].rss_bytes = out->rows[k - 1].rss_bytes;
    out->rows[k].queue_p95_ms = out->rows[k - 1].queue_p95_ms;
    out->rows[k].workers = out->rows[k - 1].workers;
    out->rows[k].queue_depth = out->rows[k - 1].queue_depth;
    out->rows[k].pss_bytes = out->rows[k - 1].pss_bytes;
    out->rows[k].uss_bytes = out->rows[k - 1].uss_bytes;
    out->rows[k].workers_parked = out->rows[k - 1].workers_parked;
  }
  /* A sample whose smaps_rollup reads raced a process's exit has no PSS: keep the previous
   * second's rather than mixing RSS into a PSS timeline. */
  for (size_t k = 1; k < need; k++) {
    if (out->rows[k].procs && !out->rows[k].pss_bytes && out->rows[k - 1].pss_bytes) {
      out->rows[k].pss_bytes = out->rows[k - 1].pss_bytes;
      out->rows[k].uss_bytes = out->rows[k - 1].uss_bytes;
    }
  }
  out->n_rows = need;
  free(secs);
}

static int generate(const char *host, int port, const pb_schedule *sched, const pb_run_options *o,
                    uint64_t t0, pb_config_result *out) {
  out->results = calloc(sched->count ? sched->count : 1, sizeof *out->results);
  if (!out->results) {
    snprintf(out->error, sizeof out->error, "out of memory");
    return -1;
  }
  out->n = sched->count;
  progress_ctx pctx = {.label = o->label ? o->label : out->spec.name,
                       .tty = isatty(2),
                       .phase_end_ns = o->phase_end_ns,
                       .n_phases = o->n_phases};
  pb_gen_config cfg = {.host = host,
                       .port = port,
                       .max_connections = o->max_connections,
                       .timeout_ns = o->timeout_ns,
                       .t0_ns = t0,
                       .progress = on_progress,
                       .data = &pctx,
                       .proto = o->proto,
                       .tls = o->tls,
                       .h2_connections = o->h2_connections,
                       .counters = &out->counters};
  snprintf(out->protocol, sizeof out->protocol, "%s", pb_proto_label(o->proto, o->tls));
  char err[256];
  pb_cpu_times m0 = pb_cpu_times_now();
  int rc = pb_gen_run(&cfg, sched, out->results, &out->t0_ns, err, sizeof err);
  pb_cpu_times m1 = pb_cpu_times_now();
  if (pctx.tty) fprintf(stderr, "\r\033[K");
  if (rc < 0) {
    snprintf(out->error, sizeof out->error, "generator: %s", err);
    return -1;
  }
  pb_summarize(out->results, out->n, o->timeout_ns ? o->timeout_ns : 20000000000ull,
               o->max_error_ratio, &out->summary);
  out->summary.steal_pct = pb_steal_pct(m0, m1);
  return 0;
}

static void warm_up(const char *host, int port, const pb_run_options *o) {
  if (!o->warmup_ns || !(o->warmup_rate > 0)) return;
  pb_schedule w;
  if (pb_schedule_constant(&w, o->warmup_rate, o->warmup_ns,
                           o->warmup_path ? o->warmup_path : "/hello", false, 1) < 0)
    return;
  pb_result *r = calloc(w.count ? w.count : 1, sizeof *r);
  if (r) {
    pb_gen_config cfg = {.host = host,
                         .port = port,
                         .timeout_ns = 5000000000ull,
                         .proto = o->proto,
                         .tls = o->tls,
                         .h2_connections = o->h2_connections};
    pb_gen_run(&cfg, &w, r, NULL, NULL, 0);
  }
  free(r);
  pb_schedule_dispose(&w);
}

static bool path_exists(const char *p) {
  return p[0] && access(p, F_OK) == 0;
}

/* `path` with ".N" before its suffix: ".decisions.jsonl" when it ends so, else the basename's
 * last extension ("x.log" -> "x.2.log"), else appended. -1 when it does not fit. */
static int numbered(char *out, size_t cap, const char *path, unsigned n) {
  size_t len = strlen(path), at = len;
  static const char dl[] = ".decisions.jsonl";
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  if (len >= sizeof dl - 1 && strcmp(path + len - (sizeof dl - 1), dl) == 0 &&
      path + len - (sizeof dl - 1) > base) {
    at = len - (sizeof dl - 1);
  } else {
    const char *dot = strrchr(base, '.');
    if (dot && dot > base) at = (size_t)(dot - path);
  }
  int w = snprintf(out, cap, "%.*s.%u%s", (int)at, path, n, path + at);
  return w < 0 || (size_t)w >= cap ? -1 : 0;
}

int pb_run_fresh_logs(pb_server_spec *s) {
  if (!path_exists(s->log_path) && !path_exists(s->decision_log)) return 0;
  char log[sizeof s->log_path], dec[sizeof s->decision_log];
  for (unsigned n = 2; n < 10000; n++) {
    log[0] = dec[0] = '\0';
    if (s->log_path[0] && numbered(log, sizeof log, s->log_path, n) < 0) return -1;
    if (s->decision_log[0] && numbered(dec, sizeof dec, s->decision_log, n) < 0) return -1;
    if (path_exists(log) || path_exists(dec)) continue;
    memcpy(s->log_path, log, sizeof log);
    memcpy(s->decision_log, dec, sizeof dec);
    return (int)n;
  }
  return -1;
}

void pb_run_config(const pb_server_spec *spec, const pb_schedule *sched, const pb_run_options *o,
                   pb_config_result *out) {
  memset(out, 0, sizeof *out);
  out->queue_p95_lifetime_ms = -1;
  out->spec = *spec;
  if (o->log_dir && o->log_dir[0] && !out->spec.log_path[0])
    snprintf(out->spec.log_path, sizeof out->spec.log_path, "%s/%s.log", o->log_dir, spec->name);
  /* An autoscaling server writes its decision log beside its server log, so the run's
   * decisions can be stored, explained and replayed (pp-replay). */
  if (spec->autoscale && spec->kind == PB_SERVER_PUMAPLUS && o->log_dir && o->log_dir[0] &&
      !out->spec.decision_log[0])
    snprintf(out->spec.decision_log, sizeof out->spec.decision_log, "%s/%s.decisions.jsonl",
             o->log_dir, spec->name);
  /* A log an earlier run left in the same directory is kept, and this run gets its own: the
   * server appends to an existing log, and two runs' ticks in one decision log collide when
   * stored. */
  char before[sizeof out->spec.log_path];
  memcpy(before, out->spec.log_path, sizeof before);
  int fresh = pb_run_fresh_logs(&out->spec);
  if (fresh < 0) {
    snprintf(out->error, sizeof out->error,
             "%.300s (or its decision log) exists and no free numbered name was found beside it",
             before);
    return;
  }
  if (fresh > 0 && !o->quiet)
    fprintf(stderr, "[%s] an earlier run's log is in the log directory: this run writes %s%s%s\n",
            spec->name, out->spec.log_path, out->spec.decision_log[0] ? " and " : "",
            out->spec.decision_log);
  pb_server srv;
  char err[256];
  note(o, "[%s] starting %s\n", spec->name, spec->kind == PB_SERVER_PUMA ? "puma" : "puma-plus");
  if (pb_server_start(&out->spec, &srv, err, sizeof err) < 0) {
    snprintf(out->error, sizeof out->error, "%s", err);
    return;
  }
  if (o->running_pgid) *o->running_pgid = (sig_atomic_t)srv.pid;
  const char *probe = o->warmup_path ? o->warmup_path : "/hello";
  uint64_t ready_timeout = o->ready_timeout_ns ? o->ready_timeout_ns : 60000000000ull;
  if (pb_server_wait_ready(&srv, "127.0.0.1", probe, ready_timeout, err, sizeof err) < 0) {
    snprintf(out->error, sizeof out->error, "%s (log: %s)", err,
             out->spec.log_path[0] ? out->spec.log_path : "none");
    pb_server_stop(&srv, 5000000000ull);
    if (o->running_pgid) *o->running_pgid = 0;
    return;
  }
  warm_up("127.0.0.1", spec->port, o);
  /* The run's clock starts 200 ms from now; the sampler shares it. */
  uint64_t t0 = uv_hrtime() + 200000000ull;
  pb_sampler *sampler = NULL;
  int stats_port =
      spec->kind == PB_SERVER_PUMAPLUS ? (spec->stats_port ? spec->stats_port : spec->port) : 0;
  pb_sampler_start(&sampler, srv.pid, "127.0.0.1", stats_port,
                   o->stats_path ? o->stats_path : "/stats", t0);
  int rc = generate("127.0.0.1", spec->port, sched, o, t0, out);
  pb_sample *samples = NULL;
  size_t n_samples = 0;
  pb_stats_parse("{}", &out->last_stats);
  if (sampler) {
    pb_sampler_stop_stats(sampler, &samples, &n_samples, &out->last_stats);
    out->queue_p95_lifetime_ms = out->last_stats.queue_p95_lifetime_ms;
  }
  pb_server_stop(&srv, 10000000000ull);
  if (o->running_pgid) *o->running_pgid = 0;
  if (rc == 0) {
    out->ran = true;
    build_rows(out, samples, n_samples);
  }
  free(samples);
}

void pb_run_target(const char *host, int port, const pb_schedule *sched, const pb_run_options *o,
                   pb_config_result *out) {
  memset(out, 0, sizeof *out);
  snprintf(out->spec.name, sizeof out->spec.name, "%s:%d", host, port);
  warm_up(host, port, o);
  if (generate(host, port, sched, o, uv_hrtime() + 100000000ull, out) == 0) {
    out->ran = true;
    build_rows(out, NULL, 0);
  }
}

void pb_config_result_dispose(pb_config_result *r) {
  free(r->results);
  free(r->rows);
  memset(r, 0, sizeof *r);
}

void pb_transport_print(FILE *f, const pb_config_result *r) {
  const pb_gen_counters *k = &r->counters;
  bool h3 = strcmp(r->protocol, "h3") == 0;
  fprintf(f, "  transport: %s, %u %s connections opened (at most %u open at once)",
          r->protocol[0] ? r->protocol : "h1", k->connections_opened, h3 ? "QUIC" : "TCP",
          k->connections_peak);
  if (h3)
    fprintf(f, ", server initial max streams %u, at most %u streams on one connection, %u GOAWAY",
            k->h2_server_max_streams, k->h2_peak_streams, k->goaways);
  else if (strncmp(r->protocol, "h2", 2) == 0)
    fprintf(f,
            ", server max concurrent streams %u, at most %u streams on one connection, %u GOAWAY",
            k->h2_server_max_streams, k->h2_peak_streams, k->goaways);
  fprintf(f, "\n");
  if (k->first_error[0]) fprintf(f, "  first transport error: %s\n", k->first_error);
}

void pb_rows_print(FILE *f, const pb_row *rows, size_t n) {
  char a[32], b[32];
  fprintf(f, "%5s %8s %8s %10s %10s %6s %9s %9s %6s %10s %5s %5s %5s\n", "t", "offered", "rps",
          "p50", "p99", "procs", "rss_MB", "pss_MB", "parked", "queue_p95", "shed", "err", "tmo");
  for (size_t k = 0; k < n; k++) {
    const pb_row *r = &rows[k];
    char q[32];
    if (r->queue_p95_ms < 0)
      snprintf(q, sizeof q, "(n/a)");
    else
      snprintf(q, sizeof q, "%.1fms", r->queue_p95_ms);
    char pss[32], parked[16];
    if (r->pss_bytes)
      snprintf(pss, sizeof pss, "%.1f", r->pss_bytes / 1048576.0);
    else
      snprintf(pss, sizeof pss, "-");
    if (r->workers_parked >= 0)
      snprintf(parked, sizeof parked, "%.0f", r->workers_parked);
    else
      snprintf(parked, sizeof parked, "-");
    fprintf(f, "%4us %8u %8u %10s %10s %6u %9.1f %9s %6s %10s %5u %5u %5u\n", r->client.t,
            r->client.offered, r->client.ok,
            r->client.ok ? pb_fmt_ns(r->client.p50_ns, a, sizeof a) : "-",
            r->client.ok ? pb_fmt_ns(r->client.p99_ns, b, sizeof b) : "-", r->procs,
            r->rss_bytes / 1048576.0, pss, parked, q, r->client.shed, r->client.errors,
            r->client.timeouts);
  }
}
