/* The worker link: the unix-socket connections Ruby worker threads dial in on, one per
 * thread, speaking the wire protocol (wire.h, docs/PROTOCOL.md). A connection becomes a
 * slot in the registry on HELLO; each runs at most one exchange at a time. Response frames
 * are handed to that exchange's owner through pp_exchange_ops; a frame that does not fit
 * the protocol closes the connection with a logged reason (the exchange gets a 502).
 * Each worker process also dials one monitor connection (HEARTBEAT first, never a slot):
 * the watch (pp_wlink_watch) times requests out (-request-timeout, 504 + TIMEOUT), kills a
 * worker whose timed-out thread outlives -worker-kill-grace, and one whose heartbeat is
 * silent past -worker-timeout. It works on the layer's context (pp_workers, workers.h) and
 * what that was handed at set-up, never on struct server. */
#ifndef PP_WLINK_H
#define PP_WLINK_H

#include <stdint.h>
#include <uv.h>

#include "server/base/buf.h"
#include "server/exchange/exchange.h"
#include "server/base/queue.h"
#include "server/net/transport.h"
#include "server/proto/wire.h"

typedef struct pp_workers pp_workers;

struct wconn {
  uv_pipe_t pipe;
  pp_qnode link;         /* in the workers' wconns */
  struct pp_workers *ws; /* the layer context it belongs to */
  pp_wire_decoder dec;
  pp_buf rbuf;
  pp_slot slot;
  pp_exchange *req;
  int hello, closing, paused;
  /* Run-time slots (docs/PROTOCOL.md "SLOTS, SLOT_CLOSE"): SLOT_CLOSE goes out after the
   * running request's RESPONSE_END (slot_closing); SLOT_CLOSE was sent, the slot is no
   * longer capacity and the worker's EOF is expected (slot_closed). */
  int slot_closing, slot_closed;
  int monitor; /* the worker process's monitor connection (HEARTBEAT first; no slot) */
  uint32_t pid;
  /* A request that ran past -request-timeout: answered 504 by the server, the worker told
   * (TIMEOUT), its frames discarded until RESPONSE_END frees the slot; the worker is killed
   * if that has not happened by timed_out_deadline_ns (-worker-kill-grace). */
  uint64_t timed_out_id;
  int64_t timed_out_deadline_ns;
};

/* Starts accepting worker connections on the server's worker socket, and takes the
 * shepherd's reports of exited workers (ws->close_worker_conns). 0 or a libuv error. */
int pp_wlink_listen(pp_workers *ws, const char *path);
/* x now runs on w. */
void pp_wlink_assign(wconn *w, pp_exchange *x);
/* Sends one chunk (returned to the pool when written). <0: the write failed. */
int pp_wlink_send(wconn *w, wchunk *k);
/* Writes bufs (the REQUEST frame): as pp_write_or_queue; on error the connection closes. */
int pp_wlink_writev(wconn *w, uv_write_t *req, uv_buf_t *bufs, unsigned n, uv_write_cb cb);
/* As pp_wlink_writev, with `handle`'s descriptor attached to the bytes (SCM_RIGHTS): the
 * REQUEST of a spooled body. Always queued: 1 (cb fires once written or failed, and `handle`
 * must stay open until then), or < 0 (nothing sent, cb never called; the caller closes w). */
int pp_wlink_writev_handle(wconn *w, uv_write_t *req, uv_buf_t *bufs, unsigned n,
                           uv_stream_t *handle, uv_write_cb cb);
/* Bytes queued on w's socket and not yet written (streamed uploads stop above a mark). */
size_t pp_wlink_write_queue(wconn *w);
/* Answers x's HIJACK with HIJACKED(result) on its worker connection. With result
 * PP_WIRE_HIJACK_OK, `client` is the client stream whose descriptor rides on the frame
 * (SCM_RIGHTS) and `buffered` the bytes already read from it past the request (copied);
 * `client` must stay open until `sent(arg, status)` fires, which it does exactly once if
 * this returns 0 (status < 0: the frame was not sent). 0, or < 0 (nothing sent, sent never
 * called, the worker connection is closed). */
int pp_wlink_hijacked(pp_exchange *x, int result, uv_stream_t *client, const uint8_t *buffered,
                      size_t len, void (*sent)(void *arg, int status), void *arg);
/* Reads w again if backpressure had paused it. */
void pp_wlink_resume(wconn *w);
/* Closes w; an exchange running on it gets worker_lost (or is freed if abandoned). */
void pp_wlink_close(wconn *w, const char *reason);
/* Closes every connection of the worker with this pid (it exited). */
void pp_wlink_close_pid(pp_workers *ws, uint32_t pid);

/* Sets worker wk's slot target, clamped to [-min-threads, -max-slots]: SLOTS on its monitor
 * connection (the worker dials what is missing; each new connection is capacity when its
 * HELLO arrives) and SLOT_CLOSE to the slots above the target, idle ones at once, busy ones
 * after their RESPONSE_END (docs/PROTOCOL.md "SLOTS, SLOT_CLOSE"). The actuator of the
 * autoscale glue and of POST /slots. Returns the target set, or -1 with *why set when the
 * worker cannot take one (not serving, no monitor connection to tell it, the server
 * draining). */
int pp_wlink_set_slots(pp_workers *ws, pp_worker *wk, uint32_t count, const char **why);
/* The slot target of every serving worker (pp_wlink_set_slots each) and of the workers that
 * connect from now on (forked, respawned or activated later: told with SLOTS when their monitor
 * connection says HEARTBEAT). The autoscale glue's set_slots. Returns the target, clamped. */
uint32_t pp_wlink_set_slots_all(pp_workers *ws, uint32_t count);
/* The slot target of wk: what was last set, else the count workers start with. */
uint32_t pp_wlink_slots_target(const pp_workers *ws, const pp_worker *wk);

/* Starts the watch timer: request deadlines (-request-timeout), the kill grace after one
 * (-worker-kill-grace) and worker heartbeats (-worker-timeout). Called once at start. */
void pp_wlink_watch_start(pp_workers *ws);
/* One pass of the watch (the timer calls it; exposed for the shepherd's reaper). */
void pp_wlink_watch(pp_workers *ws, int64_t now_ns);
/* SIGKILLs worker wk (once), closes its connections at once (its in-flight requests get 502)
 * and counts why; the shepherd (or the server's reaper) reports the exit, which respawns. */
void pp_wlink_kill_worker(pp_workers *ws, pp_worker *wk, const char *why);

#endif
