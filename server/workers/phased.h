/* Phased restart (docs/SERVER.md "Phased restart"): SIGUSR1 or POST /phased-restart replaces
 * every worker with one running the code now on disk, one at a time, while the server keeps
 * its listeners and its queue. Three steps: a probe shepherd (--workers 0) loads the new code
 * and says READY (else the restart is aborted and the old generation keeps serving); the
 * current shepherd is replaced by one that loads the new code and adopts the old workers;
 * then the roll: SPAWN one new worker, and when all its threads are connected RETIRE one old
 * worker, until no old worker is left, so ready capacity never drops below what it was.
 * Everything runs on the loop thread. */
#ifndef PP_PHASED_H
#define PP_PHASED_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "server/base/buf.h"
#include "server/workers/workers.h"

/* Its state is the layer context's (pp_phased in workers.h, ws->phased): shepherd.c reads the
 * two bits it needs of it there (pp_phased_swap_planned, pp_phased_owns_pid), so the two
 * modules do not include each other. */

/* Starts the SIGUSR1 handler and the timer. Called once, before the loop runs. */
void pp_phased_init(pp_workers *ws);

/* Starts a phased restart (SIGUSR1, POST /phased-restart). Returns the probe shepherd's pid,
 * or -1 with the reason in msg (one already in progress, a hot restart in progress, draining,
 * the workers not ready yet, the shepherd being restarted, or the probe could not start). */
long pp_phased_begin(pp_workers *ws, char *msg, size_t msg_len);

/* Abandons a phased restart in progress (a drain began): the probe is killed, the roll
 * stops; workers already retiring finish. The reason goes to the log and to last_error. */
void pp_phased_abort(pp_workers *ws, const char *why);

/* "idle", "probing", "rolling". */
const char *pp_phased_state_name(pp_phased_state st);

/* Workers of an older generation than the current phase (any state but free). */
uint32_t pp_phased_old_workers(const pp_workers *ws);

/* Writes /stats "phased_restart" into root. */
void pp_phased_stats_json(pp_workers *ws, json_t *root);

/* Writes its lines of /metrics into out. */
void pp_phased_metrics(pp_workers *ws, pp_buf *out);

#endif
