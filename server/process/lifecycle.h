/* Process lifecycle around the loop (docs/SERVER.md "systemd", "Hot restart", "Pid and state
 * files"): systemd notifications (READY=1 once the workers are ready, STATUS= every tick,
 * RELOADING=1, STOPPING=1, WATCHDOG=1), listening sockets inherited from systemd or from the
 * server before a hot restart (LISTEN_FDS), the hot restart itself (SIGUSR2 or POST /restart:
 * fork + exec of the same binary and arguments, which takes over the listeners once its
 * workers are ready, while this process drains), and the -pidfile / -state-path files.
 * Everything here runs on the loop thread; systemd.h holds the protocol parts. */
#ifndef PP_LIFECYCLE_H
#define PP_LIFECYCLE_H

#include <limits.h>
#include <uv.h>

#include "server/base/config.h"
#include "server/core/core.h"
#include "server/net/transport.h"
#include "server/proto/systemd.h"
#include "server/workers/workers.h"

typedef struct server server;

typedef struct pp_lifecycle {
  pp_sd_notify notify;
  char notify_socket[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* $NOTIFY_SOCKET, or "" */
  uint64_t watchdog_usec;    /* $WATCHDOG_USEC for us, else 0 */
  pp_sd_listen inherited;    /* sockets from LISTEN_FDS */
  int defer_accept;          /* a hot-restart child: inherited listeners accept once ready */
  int restarted;             /* started by a hot restart: the inherited sockets are ours */
  int ready_fd;              /* a hot-restart child: tells the old server we are ready; or -1 */
  int ready;                 /* the workers were ready once (READY=1 sent) */
  uv_timer_t ready_timer;    /* polls for ready, then sends STATUS= every tick */
  uv_timer_t watchdog_timer; /* WATCHDOG=1 at half of WATCHDOG_USEC */
  uv_timer_t action_timer;   /* POST /stop: drains outside the request's callback */
  uv_signal_t sig_usr2, sig_chld;
  int argc; /* our command line, for the hot restart (0: unknown) */
  char **argv;
  char exe[PATH_MAX];    /* the path we were started with, made absolute */
  long child_pid;        /* the new server of a hot restart, until it is reaped */
  long new_pid;          /* the new server of the last hot restart (for messages) */
  int restarting;        /* a new server is booting */
  uv_pipe_t child_ready; /* its ready pipe (read end) while restarting */
  int handed_over;       /* the new server took over: drain, exit, leave shared files */
  int files_written;     /* -pidfile / -state-path were written by us */

  /* Handed in at set-up (pp_lifecycle_init): what it reads of the other layers, and how it
   * asks the process for a drain. It never sees struct server. */
  uv_loop_t *loop;
  const pp_config *cfg;
  pp_net *net;                /* the listeners: inherited sockets, the handover */
  const pp_core *core;        /* the queue and the counters (STATUS=) */
  const pp_workers *workers;  /* the registry, workers_wanted, the phased restart's state */
  const int *draining;        /* the process is draining */
  void (*drain)(server *srv); /* starts the drain (a handover, POST /stop): pp_server_drain */
  server *srv;                /* handed to drain; never read here */
} pp_lifecycle;

/* Takes what it is handed (the fields above). Reads and clears the environment systemd (or the
 * old server) gave us: NOTIFY_SOCKET, WATCHDOG_USEC/PID, LISTEN_PID/FDS/FDNAMES,
 * PUMA_PLUS_READY_FD; remembers argv for a hot restart (argc 0: no hot restart). Inherited
 * descriptors become close-on-exec, so the shepherd never holds them. 0, or -1 (logged: a
 * malformed variable). */
int pp_lifecycle_init(pp_lifecycle *l, server *srv, void (*drain)(server *srv), uv_loop_t *loop,
                      const pp_config *cfg, pp_net *net, const pp_core *core,
                      const pp_workers *workers, const int *draining, int argc, char **argv);

/* An inherited socket for listener `ls` (by name, then by bound address; docs/SERVER.md), or
 * -1 when there is none, or -2 when the matching descriptor is not a listening stream socket
 * (logged). The descriptor then belongs to the listener. */
int pp_lifecycle_take_inherited(pp_lifecycle *l, listener *ls);

/* After every listener is open: an inherited socket that no listener took is an error (logged
 * with its descriptor, name and address); returns -1 then, else 0. */
int pp_lifecycle_check_inherited(pp_lifecycle *l);

/* Starts the signals (SIGUSR2: hot restart), the ready poll and the watchdog, and writes the
 * pid and state files (unless this is a hot-restart child: then when it takes over). */
void pp_lifecycle_start(pp_lifecycle *l);

/* A drain began (SIGTERM/SIGINT, POST /stop, or after a handover): STOPPING=1 unless the new
 * server of a hot restart took over. */
void pp_lifecycle_draining(pp_lifecycle *l);

/* SIGHUP's reload (certificate, decision log), which is synchronous: RELOADING=1 before
 * (begin 1), READY=1 after (begin 0), as systemd's Type=notify-reload expects. */
void pp_lifecycle_reloading(pp_lifecycle *l, int begin);
/* The same for another reload (a phased restart): `what` is the STATUS= text of RELOADING=1. */
void pp_lifecycle_reloading_for(pp_lifecycle *l, int begin, const char *what);

/* At exit: removes the pid and state files if they still name this process. */
void pp_lifecycle_exit(pp_lifecycle *l);

/* Starts a hot restart (SIGUSR2, POST /restart). Returns the new server's pid, or -1 with the
 * reason in msg (already restarting, draining, not ready yet, -listen-h3, fork failed). */
long pp_restart_begin(pp_lifecycle *l, char *msg, size_t msg_len);

/* POST /stop: a drain, as SIGTERM, started from the next loop iteration. */
void pp_lifecycle_stop_soon(pp_lifecycle *l);

#endif
