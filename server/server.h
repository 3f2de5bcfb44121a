/* puma-plus-server's event loop: HTTP/1.1 listeners, the queue, worker connections, the
 * shepherd and the control app. pp_server_run() owns the process until it exits. */
#ifndef PP_SERVER_H
#define PP_SERVER_H

#include "server/config.h"

/* Runs the server with *cfg until a signal stops it. argv0 helps find the gem directory.
 * Returns the process exit code (0 after a clean drain). */
int pp_server_run(pp_config *cfg, const char *argv0);

#endif
