/* puma-plus-server: parse the flags and run the server (see docs/SERVER.md). */
#include <stdio.h>

#include "server/base/config.h"
#include "server/process/server.h"

int main(int argc, char **argv) {
  static pp_config cfg;
  pp_config_defaults(&cfg);
  char err[512];
  int rc = pp_config_parse(&cfg, argc, argv, err, sizeof err, stdout);
  if (rc == 1) return 0;
  if (rc < 0) {
    fprintf(stderr, "puma-plus-server: %s\n", err);
    return 2;
  }
  if (cfg.print_policy) return pp_server_print_policy(&cfg, stdout);
  return pp_server_run_argv(&cfg, argc, argv);
}
