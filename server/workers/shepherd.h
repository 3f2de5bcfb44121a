/* The shepherd link: the Ruby shepherd process (gem/exe/puma-plus-shepherd) that loads the
 * app once and forks workers when asked, over a socketpair speaking the wire protocol's
 * control frames (SPAWN, RETIRE, STOP, STANDBY, ACTIVATE out; READY, FORKED, EXITED, PARKED
 * in). It also keeps the worker count at workers_wanted (respawn with backoff for workers that
 * die young), and it supervises the shepherd: one that dies is replaced and adopts the live
 * workers. */
#ifndef PP_SHEPHERD_H
#define PP_SHEPHERD_H

#include <stdint.h>

#include "server/base/queue.h"
#include "server/workers/workers.h"

/* Finds the gem directory (-gem-dir, PUMA_PLUS_GEM_DIR, or beside the binary). 0 or -1. */
int pp_shepherd_find_gem(pp_workers *ws, const char *argv0);
/* Starts the shepherd with --workers workers_wanted. 0, or -1 (logged). */
int pp_shepherd_start(pp_workers *ws);

/* The shepherd's command line (the server <-> gem contract, docs/PROTOCOL.md): ruby -I<gem>/lib
 * <gem>/exe/puma-plus-shepherd --app --threads --socket --workers N [--standby K] [--fibers]. One
 * builder for the real shepherd and the phased restart's probe, so the two cannot drift apart. */
typedef struct pp_shepherd_cmd {
  char libdir[8300], extdir[8300], exe[8300], threads[16], workers[16], standby[16];
  char *args[17];
} pp_shepherd_cmd;
/* `standby` NULL: no --standby flag. */
void pp_shepherd_cmd_init(pp_workers *ws, pp_shepherd_cmd *c, uint32_t workers,
                          const uint32_t *standby);
/* SPAWN n workers. */
void pp_shepherd_spawn(pp_workers *ws, uint32_t n);
/* STANDBY n: the shepherd forks n standby workers (docs/CONTROL.md section 8); they count as
 * standby booting until PARKED. Only to a shepherd started with --standby. */
void pp_shepherd_standby(pp_workers *ws, uint32_t n);
/* ACTIVATE parked worker w (PP_WORKER_PARKED): it becomes BOOTING until its first HELLO;
 * `decided_ns` (the tick's time) starts its activation latency. */
void pp_shepherd_activate(pp_workers *ws, pp_worker *w, int64_t decided_ns);
/* Stops dispatching to w and RETIREs its pid once it has nothing in flight. */
void pp_shepherd_retire(pp_workers *ws, pp_worker *w);
/* A retiring worker with nothing in flight is told to exit. */
void pp_shepherd_retire_if_drained(pp_workers *ws, pp_worker *w);
/* STOP to the shepherd after a drain (the process exits when the shepherd does, with
 * *ws->exit_code); at once through hooks->exit when no shepherd is alive. The process sets its
 * stopping flag first. */
void pp_shepherd_stop(pp_workers *ws);

/* Supervision (docs/SERVER.md "Shepherd supervision"). Makes the server a child subreaper
 * (prctl PR_SET_CHILD_SUBREAPER), so the workers of a shepherd that died are reparented to it,
 * and starts watching SIGCHLD for them; sets up the respawn timer. Called once before
 * pp_shepherd_start. */
void pp_shepherd_supervise_init(pp_workers *ws);
/* Reaps exited children other than the shepherd (adopted workers, or anything else that was
 * reparented to the server) without taking the shepherd's status from libuv. */
void pp_shepherd_reap_orphans(pp_workers *ws);
/* Worker pid is gone with this status (exit code, or -signal) without an EXITED from the
 * shepherd (reaped by the server, or found missing): handled as EXITED is (respawn). */
void pp_shepherd_worker_gone(pp_workers *ws, uint32_t pid, int32_t status);

#endif
