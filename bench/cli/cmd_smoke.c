/* `pp-bench smoke` (one quick load against null, puma, pumaplus or a running server), `floor`
 * (the harness's resolution floor against the null server) and `null-server` (the reference
 * server in the foreground). */
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

#include "bench/cli/cli.h"

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

int cmd_smoke(opts *o) {
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
    if (cli_split_hostport(o->url, host, sizeof host, &port) < 0) {
      fprintf(stderr, "pp-bench: -url wants HOST:PORT, got '%s'\n", o->url);
      pb_schedule_dispose(&sched);
      return 2;
    }
    cli_run_options(o, &ro, o->url);
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
    cli_run_options(o, &ro, "null server");
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
    cli_default_binaries(&spec);
    spec.h2c = o->proto == PB_PROTO_H2;
    spec.h3 = o->proto == PB_PROTO_H3;
    spec.port = pb_free_port();
    spec.stats_port = pb_free_port();
    cli_run_options(o, &ro, spec.name);
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

int cmd_floor(opts *o) {
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

int cmd_null_server(opts *o) {
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
