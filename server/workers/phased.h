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
#include <stdint.h>
#include <time.h>
#include <uv.h>

#include "server/base/buf.h"
#include "server/proto/wire.h"

typedef struct server server;

typedef enum pp_phased_state {
  PP_PHASED_IDLE = 0,
  PP_PHASED_PROBING = 1, /* the probe shepherd is loading the new code */
  PP_PHASED_ROLLING = 2, /* the shepherd was swapped; old workers are being replaced */
} pp_phased_state;

typedef struct pp_phased {
  pp_phased_state state;
  uv_signal_t sig_usr1;
  uv_timer_t timer; /* the probe's timeout, then the roll's poll */
  /* The probe shepherd: its process, its control channel (fd 3) and its stderr, which is
   * copied to ours and remembered so that /stats can name why the new code did not boot. */
  uv_process_t probe;
  int probe_alive;
  uint32_t probe_pid;
  int probe_ready;
  int probe_settled;    /* exited and decided on (swap or abort) */
  int64_t probe_status; /* its exit status and signal */
  int probe_sig;
  uv_pipe_t probe_ctl, probe_err;
  int probe_ctl_open, probe_err_open;
  int handles_closing; /* probe handles whose close callback has not run yet */
  pp_wire_decoder probe_dec;
  pp_buf probe_rbuf;
  char probe_stderr[512]; /* the last line of the probe's stderr that names an error */
  char probe_err_buf[4096];
  int swap_planned;  /* the shepherd was killed on purpose (shepherd.c asks) */
  time_t started_at; /* wall time of the last start */
  int64_t started_ns;
  int roll_spawned;        /* a SPAWN of the roll not yet matched by a ready worker */
  int64_t roll_spawned_ns; /* when it was sent */
  uint32_t roll_failures;  /* SPAWNed workers in a row that exited before they were ready */
  uint32_t old_workers_at_start;
  uint32_t workers_replaced; /* old workers retired by this one */
  char last_result[16];      /* "none", "ok", "aborted" */
  char last_error[640];      /* why the last one was aborted, or "" */
  double last_duration_s;
  uint64_t completed, aborted; /* counters for /metrics */
} pp_phased;

/* Starts the SIGUSR1 handler and the timer. Called once, before the loop runs. */
void pp_phased_init(server *s);

/* Starts a phased restart (SIGUSR1, POST /phased-restart). Returns the probe shepherd's pid,
 * or -1 with the reason in msg (one already in progress, a hot restart in progress, draining,
 * the workers not ready yet, the shepherd being restarted, or the probe could not start). */
long pp_phased_begin(server *s, char *msg, size_t msg_len);

/* Abandons a phased restart in progress (a drain began): the probe is killed, the roll
 * stops; workers already retiring finish. The reason goes to the log and to last_error. */
void pp_phased_abort(server *s, const char *why);

/* shepherd.c: the shepherd that just exited was killed by the swap (1, once), so it is
 * replaced at once, without backoff and without counting it as an unexpected restart. */
int pp_phased_swap_planned(server *s);

/* Nonzero while pid is the probe shepherd (the orphan reaper leaves it to libuv). */
int pp_phased_owns_pid(const server *s, uint32_t pid);

/* "idle", "probing", "rolling". */
const char *pp_phased_state_name(pp_phased_state st);

/* Workers of an older generation than the current phase (any state but free). */
uint32_t pp_phased_old_workers(const server *s);

/* Writes /stats "phased_restart" into root. */
void pp_phased_stats_json(server *s, json_t *root);

/* Writes its lines of /metrics into out. */
void pp_phased_metrics(server *s, pp_buf *out);

#endif
