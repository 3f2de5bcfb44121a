/* puma-plus-server's event loop: HTTP/1.1 listeners, the queue, worker connections, the
 * shepherd and the control app. pp_server_run() owns the process until it exits. */
#ifndef PP_SERVER_H
#define PP_SERVER_H

#include <stdio.h>

#include "server/config.h"

/* Runs the server with *cfg until a signal stops it. argv0 helps find the gem directory.
 * Returns the process exit code (0 after a clean drain). */
int pp_server_run(pp_config *cfg, const char *argv0);

/* pp_server_run with the whole command line (argv[argc] is NULL), which a hot restart
 * (SIGUSR2, POST /restart) re-executes; argc 0 turns the hot restart off. */
int pp_server_run_argv(pp_config *cfg, int argc, char **argv);

/* -print-policy: loads the policy exactly as the server would (the file, then the flags that
 * override it), prints its canonical text and the admission rule's effective values to out.
 * Returns 0, or 2 after printing the error to stderr. */
int pp_server_print_policy(pp_config *cfg, FILE *out);

#endif
