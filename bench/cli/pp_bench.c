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

#include "bench/cli/cli.h"

int main(int argc, char **argv) {
  if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
    cli_usage(argc < 2 ? stderr : stdout);
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
  if (!cli_parse_opts(argc, argv, first, &o)) {
    cli_usage(stderr);
    return 2;
  }
  if (strcmp(cmd, "smoke") == 0 || strcmp(cmd, "run") == 0) cli_stop_servers_on_interrupt();
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
  cli_usage(stderr);
  return 2;
}
