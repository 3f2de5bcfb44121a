/* dispatch: the one queue (FIFO of runnable exchanges), matching them with idle worker
 * slots from the registry (queue.h), and the frames that carry a request to its worker:
 * REQUEST (with puma_plus.queue_ns = T3 - T2b), BODY / BODY_END for streamed uploads,
 * CANCEL. Queue time is measured here and nowhere else. */
#ifndef PP_DISPATCH_H
#define PP_DISPATCH_H

#include <stddef.h>
#include <stdint.h>

#include "server/exchange/exchange.h"

/* x is runnable (T2b): into the queue, then dispatched if a slot is idle. */
void pp_dispatch_push(pp_exchange *x);
/* Dispatches queued exchanges while idle slots exist. */
void pp_dispatch_all(server *s);
/* Body bytes of a running streamed upload, as BODY frames of at most 64 KiB. */
void pp_dispatch_send_body(pp_exchange *x, const uint8_t *data, size_t len);
void pp_dispatch_send_body_end(pp_exchange *x);
/* CANCEL to the worker running x (the client went away). */
void pp_dispatch_send_cancel(pp_exchange *x);

/* Admission (control/admit.h) reads the queue through these. */
#include "control/admit.h"
/* The queue as the admission rule sees it now. */
void pp_dispatch_admit_input(server *s, pp_admit_input *in);
/* The predicted wait of a request arriving now under the policy's rule (UINT64_MAX: no
 * capacity). */
uint64_t pp_dispatch_predicted_wait(server *s);
/* After an admission call: logs the rule's one-line reason (pp_admit_reason) when its mode
 * changed, i.e. a standing queue began or ended; was_standing is pp_admit_state.standing
 * before the call. */
void pp_dispatch_admit_note(server *s, int was_standing, const pp_admit_input *in);

#endif
