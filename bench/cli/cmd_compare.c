/* `pp-bench compare`: its flags and usage; the comparison itself is bench/compare/. */
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

int cmd_compare(int argc, char **argv) {
  pb_compare_config c;
  pb_compare_defaults(&c);
  const char *db = "results.db", *plot = NULL, *app = NULL, *gem_home = getenv("PP_GEM_HOME");
  const char *gemfile = NULL;
  bool steal_retries_given = false;
  char flags[1024] = "";
  static const char *const switches[] = {"h", "help", "no-db", NULL};
  for (int i = 2; i < argc; i++) {
    const char *a, *v;
    if (!cli_next_flag("compare", argc, argv, &i, switches, flags, sizeof flags, &a, &v)) return 2;
    if (strcmp(a, "h") == 0 || strcmp(a, "help") == 0) {
      compare_usage(stdout);
      return 0;
    }
    if (strcmp(a, "no-db") == 0) {
      db = NULL;
      continue;
    }
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
      ok = cli_parse_double(v, &d) && d >= 1 && d <= PB_CMP_MAX_ROUNDS && d == (uint32_t)d &&
           ((c.rounds = (uint32_t)d), 1);
    else if (strcmp(a, "dur") == 0)
      ok = cli_parse_duration(v, &c.dur_ns) && c.dur_ns >= 1000000000ull &&
           c.dur_ns % 1000000000ull == 0;
    else if (strcmp(a, "warmup") == 0)
      ok = cli_parse_duration(v, &c.warmup_ns) && c.warmup_ns % 1000000000ull == 0;
    else if (strcmp(a, "conns") == 0)
      ok = cli_parse_double(v, &d) && d >= 1 && d <= 10000 && ((c.conns = (uint32_t)d), 1);
    else if (strcmp(a, "path") == 0)
      ok = v[0] == '/' && strlen(v) < sizeof c.path && snprintf(c.path, sizeof c.path, "%s", v);
    else if (strcmp(a, "rate") == 0)
      ok = cli_parse_double(v, &c.rate) && c.rate >= 0 && c.rate <= 100000;
    else if (strcmp(a, "rate-dur") == 0)
      ok = cli_parse_duration(v, &c.rate_dur_ns) && c.rate_dur_ns >= 100000000ull;
    else if (strcmp(a, "ready-timeout") == 0)
      ok = cli_parse_duration(v, &c.ready_timeout_ns) && c.ready_timeout_ns > 0;
    else if (strcmp(a, "max-steal") == 0)
      ok = cli_parse_double(v, &c.max_steal_pct) && c.max_steal_pct > 0 && c.max_steal_pct <= 100;
    else if (strcmp(a, "steal-retries") == 0)
      ok = cli_parse_double(v, &d) && d >= 0 && d <= PB_CMP_MAX_STEAL_RETRIES && d == (uint32_t)d &&
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
  cli_default_binaries(&c.base);
  c.running_pgid = &cli_running_pgid;
  /* Debian's column for pumaplus and puma whatever the caller's shell exported; puma8 and
   * falcon get the RubyGems column's variables in their own child (pb_rubygems_env_apply). */
  pb_rubygems_env_apply(NULL, NULL);
  cli_stop_servers_on_interrupt();
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
