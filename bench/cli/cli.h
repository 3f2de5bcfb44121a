/* What the files of pp-bench's command line share (bench/cli/): the options of the commands
 * that take the common flag set, the flag parsers, the interrupt handling that stops a measured
 * server, and one entry point per command. pp_bench.c's main() picks the command. */
#ifndef PP_BENCH_CLI_H
#define PP_BENCH_CLI_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "bench/gen/gen.h"
#include "bench/harness/harness.h"
#include "bench/run/run.h"

/* Build-time defaults (bench/CMakeLists.txt defines the real ones). */
#ifndef PB_DEFAULT_APP
#define PB_DEFAULT_APP "scenarios/apps/mix/config.ru"
#endif
#ifndef PB_PPSIM
#define PB_PPSIM "pp-sim"
#endif
#ifndef PB_SOURCE_DIR
#define PB_SOURCE_DIR "."
#endif

/* The flags of run, report, smoke, floor, schedule and null-server (soak and compare parse their
 * own). */
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

/* options.c */
void cli_usage(FILE *f);
/* "10s", "500ms", "2m", "1500us" into ns; false when malformed. */
bool cli_parse_duration(const char *s, uint64_t *out);
bool cli_parse_double(const char *s, double *out);
/* A byte count with an optional k/m suffix (KiB, MiB); false when malformed. */
bool cli_parse_size(const char *s, uint32_t *out);
/* One step of the flag loop of the commands that store their command line with their results
 * (compare, soak): the flag at argv[*i] and its value are appended to flags (space-separated)
 * and *i is left on the last word taken. *name: the flag without its dashes; *value: its value,
 * or NULL when the flag is one of `switches` (NULL-terminated; they take none). false, after
 * saying why on stderr as "pp-bench CMD: ...", for a word that is not a flag or a flag whose
 * value is missing. */
bool cli_next_flag(const char *cmd, int argc, char **argv, int *i, const char *const *switches,
                   char *flags, size_t flags_cap, const char **name, const char **value);
/* The common flags from argv[first]; false (after a message) on a bad flag. */
bool cli_parse_opts(int argc, char **argv, int first, opts *o);
/* The process group of the server being measured (0: none), killed on SIGINT/SIGTERM/SIGHUP. */
extern volatile sig_atomic_t cli_running_pgid;
void cli_stop_servers_on_interrupt(void);
void cli_run_options(const opts *o, pb_run_options *ro, const char *label);
/* This build tree's binaries (puma-plus-server, the gem's CLI) unless the environment names
 * others. */
void cli_default_binaries(pb_server_spec *spec);
/* "[http://]host:port" into its parts; 0 or -1. */
int cli_split_hostport(const char *url, char *host, size_t hostlen, int *port);

/* The commands: each returns the process's exit status. */
int cmd_smoke(opts *o);                      /* cmd_smoke.c */
int cmd_floor(opts *o);                      /* cmd_smoke.c */
int cmd_null_server(opts *o);                /* cmd_smoke.c */
int cmd_run(const char *path, opts *o);      /* cmd_run.c */
int cmd_schedule(const char *path, opts *o); /* cmd_run.c */
int cmd_report(const char *which, opts *o);  /* cmd_run.c */
int cmd_soak(int argc, char **argv);         /* cmd_soak.c */
int cmd_compare(int argc, char **argv);      /* cmd_compare.c */

#endif
