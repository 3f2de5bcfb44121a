/* puma-plus-server's process: it builds every layer (listeners, sessions, the queue, worker
 * links, the shepherd, the control app), runs the event loop, and owns start-up, signals,
 * drain and exit. main.c parses the flags and calls pp_server_run_argv, which owns the
 * process until it exits. */
#ifndef PP_SERVER_H
#define PP_SERVER_H

#include <stdio.h>

#include "server/base/config.h"

/* Runs the server with *cfg and the whole command line (argv[argc] is NULL; argv[0] helps
 * find the gem directory) until a signal stops it. A hot restart (SIGUSR2, POST /restart)
 * re-executes that command line; argc 0 turns the hot restart off. Returns the process exit
 * code (0 after a clean drain). */
int pp_server_run_argv(pp_config *cfg, int argc, char **argv);

/* -print-policy (ops/autoscale.c): loads the policy exactly as the server would (the file,
 * then the flags that override it), prints its canonical text and the admission rule's
 * effective values to out. Returns 0, or 2 after printing the error to stderr. */
int pp_server_print_policy(pp_config *cfg, FILE *out);

#endif
