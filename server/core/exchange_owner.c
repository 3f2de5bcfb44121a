/* The owner's calls on an exchange (see exchange_owner.h): admission, the REQUEST prefix every
 * session fills the same way, and the transitions a session drives (body in, body done,
 * abandon, the h2/h3 stream events). They hand the exchange down to dispatch and the worker
 * link; the record and its pool are exchange.c's. */
#include "server/core/exchange_owner.h"

#include <string.h>

#include "server/core/dispatch.h"
#include "server/process/server_int.h"
#include "server/workers/wlink.h"

int pp_exchange_admit(server *s) {
  controller *ct = &s->ctl_state;
  if (!ct->policy.shed_enabled) return 0;
  pp_admit_input in;
  pp_dispatch_admit_input(s, &in);
  int was_standing = s->admit.standing;
  pp_admit_verdict v = pp_admit_arrival(&s->admit, &ct->policy, &in);
  pp_dispatch_admit_note(s, was_standing, &in);
  if (v == PP_ADMIT_SHED) {
    s->stats.shed++;
    s->stats.shed_window++;
    return 503;
  }
  return 0;
}

void pp_exchange_env_begin(pp_exchange *x) {
  /* REQUEST frame prefix: header, id, t2b, t3, flags, pair count, then the env pairs. */
  pp_buf_reserve(&x->head, 1024);
  x->head.len = 8 + 8 + 8 + 8 + 1 + 4;
  memset(x->head.data, 0, x->head.len);
}

void pp_exchange_env_end(pp_exchange *x, uint32_t pairs, int64_t content_length) {
  pp_env_put_pair(&x->head, "puma_plus.queue_ns", 18, "", 0);
  x->head.len -= 4; /* the value (length + digits) is appended at dispatch */
  x->queue_key_end = x->head.len;
  pp_wire_put_u32(x->head.data + 33, pairs + 1 + (x->add_request_start ? 1 : 0));
  pp_buf_reserve(&x->body, 4);
  x->body.len = 4;
  if (content_length > (int64_t)PP_BODY_BUFFER_LIMIT) x->streaming = 1;
}

void pp_exchange_body_in(pp_exchange *x, const uint8_t *data, size_t len) {
  if (x->state == PP_X_RUNNING) {
    if (!x->cancelled) pp_dispatch_send_body(x, data, len);
    return;
  }
  pp_buf_append(&x->body, data, len);
  x->budgeted += len;
  x->srv->body_buffered += len;
  if (x->state == PP_X_BODY &&
      (x->body.len - 4 >= PP_BODY_BUFFER_LIMIT || pp_exchange_over_budget(x->srv))) {
    if (x->body.len - 4 < PP_BODY_BUFFER_LIMIT) x->srv->stats.body_budget_streamed++;
    x->streaming = 1;
    pp_dispatch_push(x);
  }
}

void pp_exchange_body_done(pp_exchange *x) {
  if (x->streaming) {
    x->body_done = 1;
    if (x->state == PP_X_RUNNING && !x->cancelled)
      pp_dispatch_send_body_end(x);
    else if (x->state == PP_X_BODY)
      pp_dispatch_push(x); /* (CL > 1 MiB but body shorter) */
    return;
  }
  pp_dispatch_push(x);
}

int pp_exchange_can_take_body(pp_exchange *x) {
  server *s = x->srv;
  if (x->state == PP_X_BODY && !x->budgeted && pp_exchange_over_budget(s)) {
    /* an upload not yet buffering waits unread until the total has room */
    if (!x->blink.next) {
      pp_queue_push(&s->body_waiters, &x->blink);
      s->stats.body_budget_waits++;
    }
    return 0;
  }
  if (!x->streaming) return 1;
  if (x->state == PP_X_QUEUED) return 0; /* 1 MiB buffered; wait for dispatch */
  if (x->state == PP_X_RUNNING && x->w && pp_wlink_write_queue(x->w) > PP_WORKER_WRITE_HIGH)
    return 0;
  return 1;
}

void pp_exchange_abandon(pp_exchange *x) {
  server *s = x->srv;
  x->owner = NULL;
  switch (x->state) {
  case PP_X_QUEUED:
    pp_queue_remove(&s->queue, &x->qlink);
    s->stats.cancelled_queued++;
    s->stats.timeouts_window++;
    pp_exchange_release(s, x);
    break;
  case PP_X_RUNNING:
    if (x->w) pp_wlink_resume(x->w); /* nobody reads this response any more */
    if (!x->cancelled && x->w) {
      x->cancelled = 1;
      s->stats.cancelled_running++;
      s->stats.timeouts_window++;
      pp_dispatch_send_cancel(x);
    }
    /* freed when RESPONSE_END arrives (or the worker connection closes); a worker already
     * gone (the owner was answering its loss) leaves nothing to wait for */
    if (!x->w) pp_exchange_release(s, x);
    break;
  default: pp_exchange_release(s, x); break;
  }
}

void pp_exchange_client_drained(pp_exchange *x) {
  if (x->w) pp_wlink_resume(x->w);
}

int pp_exchange_stream_body(pp_exchange *x, const uint8_t *data, size_t len) {
  if (!x || x->state == PP_X_RESPONDED) return 0; /* answered already: the rest is dropped */
  pp_exchange_body_in(x, data, len);
  x->body_unconsumed += len;
  return 1;
}

void pp_exchange_stream_end(pp_exchange *x) {
  if (x && x->state != PP_X_RESPONDED) pp_exchange_body_done(x);
}

void pp_exchange_stream_closed(pp_exchange *x, uint64_t error_code) {
  if (x->state == PP_X_RESPONDED && error_code == 0 && x->t1)
    pp_hist_window_record(&x->srv->stats.total, (uint64_t)(pp_now_ns() - x->t1));
  pp_exchange_abandon(x);
}
