/* `pp-bench soak`: its flags and usage; the soak itself is bench/soak/. */
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

int cmd_soak(int argc, char **argv) {
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
  static const char *const switches[] = {"short", "shed", "no-db", NULL};
  for (int i = 2; i < argc; i++) {
    const char *a, *v;
    if (!cli_next_flag("soak", argc, argv, &i, switches, flags, sizeof flags, &a, &v)) return 2;
    if (strcmp(a, "short") == 0) continue;
    if (strcmp(a, "shed") == 0) {
      shed = true;
      continue;
    }
    if (strcmp(a, "no-db") == 0) {
      db = NULL;
      continue;
    }
    double d;
    bool ok = true;
    int phase = -1;
    for (int p = 0; p < PB_SOAK_PHASES; p++)
      if (strcmp(a, pb_soak_phase_name(p)) == 0) phase = p;
    if (phase >= 0)
      ok = cli_parse_duration(v, &c.phase_ns[phase]);
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
      ok = cli_parse_double(v, &d) && d >= 1 && ((c.spec.workers = (uint32_t)d), 1);
    else if (strcmp(a, "t") == 0)
      ok = cli_parse_double(v, &d) && d >= 1 && ((c.spec.threads = (uint32_t)d), 1);
    else if (strcmp(a, "cycles") == 0)
      ok = cli_parse_double(v, &d) && d >= 1 && d <= 4096 && ((c.cycles = (uint32_t)d), 1);
    else if (strcmp(a, "h2-conns") == 0 || strcmp(a, "h3-conns") == 0)
      ok = cli_parse_double(v, &d) && d >= 1 && d <= 4096 && ((c.h2_connections = (uint32_t)d), 1);
    else if (strcmp(a, "leak-every") == 0)
      ok = cli_parse_double(v, &d) && d >= 0 && ((leak_every = (uint32_t)d), 1);
    else if (strcmp(a, "shed-budget") == 0)
      ok = cli_parse_duration(v, &shed_budget) && shed_budget >= 1000000ull;
    else if (strcmp(a, "gap") == 0)
      ok = cli_parse_duration(v, &c.gap_ns);
    else if (strcmp(a, "recovery-gap") == 0)
      ok = cli_parse_duration(v, &c.recovery_gap_ns);
    else if (strcmp(a, "rate") == 0)
      ok = cli_parse_double(v, &c.steady_rps) && c.steady_rps >= 0;
    else if (strcmp(a, "overload-x") == 0)
      ok = cli_parse_double(v, &c.overload_x) && c.overload_x >= 0;
    else if (strcmp(a, "capacity") == 0)
      ok = cli_parse_double(v, &c.capacity_rps) && c.capacity_rps > 0;
    else if (strcmp(a, "echo-size") == 0)
      ok = cli_parse_size(v, &c.echo_bytes) && c.echo_bytes > 0;
    else if (strcmp(a, "body-size") == 0)
      ok = cli_parse_size(v, &c.body_bytes) && c.body_bytes > 0;
    else if (strcmp(a, "body-conc") == 0)
      ok = cli_parse_double(v, &d) && d >= 0 && d <= 100000 &&
           ((c.body_concurrency = (uint32_t)d), 1);
    else if (strcmp(a, "body-every") == 0)
      ok = cli_parse_duration(v, &c.body_every_ns);
    else if (strcmp(a, "cancel-rate") == 0)
      ok = cli_parse_double(v, &c.cancel_rps) && c.cancel_rps >= 0;
    else if (strcmp(a, "cancel-queued") == 0)
      ok = cli_parse_duration(v, &c.cancel_queued_ns) && c.cancel_queued_ns > 0;
    else if (strcmp(a, "cancel-running") == 0)
      ok = cli_parse_duration(v, &c.cancel_running_ns) && c.cancel_running_ns > 0;
    else if (strcmp(a, "timeout") == 0)
      ok = cli_parse_duration(v, &c.timeout_ns) && c.timeout_ns > 0;
    else if (strcmp(a, "conns") == 0)
      ok = cli_parse_double(v, &d) && d >= 1 && ((c.max_connections = (uint32_t)d), 1);
    else if (strcmp(a, "fd-tol") == 0)
      ok = cli_parse_double(v, &d) && d >= 0 && ((c.fd_tolerance = (uint32_t)d), 1);
    else if (strcmp(a, "settle") == 0)
      ok = cli_parse_duration(v, &c.settle_ns);
    else if (strcmp(a, "seed") == 0)
      ok = cli_parse_double(v, &d) && d >= 0 && ((c.seed = (uint64_t)d), 1);
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
  cli_default_binaries(spec);
  if (spec->kind == PB_SERVER_NULL &&
      readlink("/proc/self/exe", spec->null_bin, sizeof spec->null_bin - 1) < 0)
    snprintf(spec->null_bin, sizeof spec->null_bin, "%s", argv[0]);
  if (spec->kind == PB_SERVER_NULL)
    snprintf(spec->name, sizeof spec->name, "soak-null%s", leak_every ? "-leaky" : "");
  else
    snprintf(spec->name, sizeof spec->name, "soak-%s-w%ut%u%s", server, spec->workers,
             spec->threads, shed ? "-shed" : "");
  c.log_dir = log_dir;
  c.running_pgid = &cli_running_pgid;
  cli_stop_servers_on_interrupt();

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
