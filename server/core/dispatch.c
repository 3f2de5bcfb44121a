/* dispatch (see dispatch.h). The REQUEST frame's prefix (env pairs) was built once by the
 * session; at dispatch only the queue_ns value and the frame header are filled in, and the
 * body buffer goes out behind it in the same writev. */
#include "server/core/dispatch.h"

#include "control/admit.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/base/alloc.h"
#include "server/base/clock.h"
#include "server/base/log.h"
#include "server/proto/env.h"
#include "server/workers/wlink.h"

static void send_request(pp_core *c, pp_exchange *r, wconn *w);
static void send_event(pp_core *c, pp_exchange *r, wconn *w);
static void on_request_written(uv_write_t *wr, int status);

void pp_core_init(pp_core *c, server *srv, const pp_hooks *hooks, pp_net *net,
                  pp_exchange_pool *xpool, pp_registry *reg, const pp_policy *policy,
                  const int *shedding) {
  pp_queue_init(&c->queue);
  pp_runq_init(&c->runq);
  pp_admit_state_init(&c->admit);
  c->srv = srv;
  c->hooks = hooks;
  c->net = net;
  c->xpool = xpool;
  c->reg = reg;
  c->policy = policy;
  c->shedding = shedding;
  xpool->up = c;
}

/* Into the one queue (its tail) and its run list. */
static void enqueue(pp_core *c, pp_exchange *r) {
  pp_queue_push(&c->queue, &r->qlink);
  pp_runq_push(&c->runq, c->reg, &r->run, r->sticky_pid);
}

void pp_dispatch_push(pp_exchange *r) {
  pp_core *c = PP_CORE_OF(r);
  r->t2b = pp_now_ns();
  r->state = PP_X_QUEUED;
  c->stats.arrivals++;
  c->stats.arrivals_window++;
  if (r->ws_event)
    c->stats.ws.events++;
  else if (r->t2b > r->t2)
    pp_hist_window_record(&c->stats.body_wait, (uint64_t)(r->t2b - r->t2));
  enqueue(c, r);
  pp_dispatch_all(c);
}

/* The admission rule's second look (codel past the budget, controlled past its standing cap):
 * 1 if r was answered 503 instead of dispatched. */
static int shed_at_dequeue(pp_core *c, pp_exchange *r) {
  if (!c->policy->shed_enabled) return 0;
  pp_admit_input in;
  pp_dispatch_admit_input(c, &in); /* the queue without r */
  int was_standing = c->admit.standing;
  pp_admit_verdict v = pp_admit_dequeue(&c->admit, c->policy, &in, (uint64_t)(in.now_ns - r->t2b));
  pp_dispatch_admit_note(c, was_standing, &in);
  if (v != PP_ADMIT_SHED) return 0;
  c->stats.shed++;
  c->stats.shed_window++;
  if (r->owner)
    r->ops->fail(r, 503, "503 Service Unavailable: waited past the admission wait limit (shed)\n");
  else
    pp_exchange_release(c->xpool, r);
  return 1;
}

/* Dispatch takes the oldest queued entry an idle slot may run: one without a sticky worker,
 * or a sticky one whose worker has an idle slot; a sticky entry whose worker is gone or no
 * longer takes work is failed (its connection closes with 1012). One FIFO, one L: an entry
 * waiting for its busy worker is skipped, not reordered, and never walked past: the run lists
 * (pp_runq, base/queue.h) hold each worker's waiting entries apart, so the choice looks at the
 * head of each list only. */
void pp_dispatch_all(pp_core *c) {
  while (c->queue.len && pp_registry_has_idle(c->reg)) {
    pp_worker *wk;
    int gone;
    pp_runlink *e = pp_runq_first(&c->runq, c->reg, &wk, &gone);
    if (!e) return; /* only sticky entries of busy workers wait */
    pp_exchange *r = PP_CONTAINER_OF(e, pp_exchange, run);
    pp_queue_remove(&c->queue, &r->qlink);
    pp_runq_remove(&c->runq, &r->run);
    if (gone) {
      r->ops->fail(r, 1012, "its worker is gone");
      continue;
    }
    if (!r->ws_event && shed_at_dequeue(c, r)) continue;
    pp_slot *slot = wk ? pp_registry_take_worker(c->reg, wk) : pp_registry_take(c->reg);
    if (!slot) { /* cannot happen: a slot was idle */
      enqueue(c, r);
      return;
    }
    if (slot->worker->activated_ns && c->hooks->activated_dispatch)
      c->hooks->activated_dispatch(c->srv, slot->worker, r->t2b);
    if (r->ws_event)
      send_event(c, r, slot->data);
    else
      send_request(c, r, slot->data);
  }
}

/* A WebSocket event: its frame is whole in r->head but for t_ready_ns and t3_ns (bytes 24..40,
 * after the header, event_id and conn_id). Its queue time goes to the WebSocket window, not
 * to the requests'. */
static void send_event(pp_core *c, pp_exchange *r, wconn *w) {
  r->t3 = pp_now_ns();
  pp_hist_window_record(&c->stats.ws.queue, (uint64_t)(r->t3 - r->t2b));
  uint8_t *h = r->head.data;
  pp_wire_put_u64(h + 24, (uint64_t)r->t2b);
  pp_wire_put_u64(h + 32, (uint64_t)r->t3);
  uv_buf_t b = uv_buf_init((char *)r->head.data, (unsigned)r->head.len);
  r->w = w;
  pp_wlink_assign(w, r);
  r->state = PP_X_RUNNING;
  int rc = pp_wlink_writev(w, &r->wreq, &b, 1, on_request_written);
  if (rc == 1) r->writes++;
}

static void on_spool_pipe_closed(uv_handle_t *h) {
  free(h);
}

/* Our copy of the spool file's descriptor goes once the REQUEST carrying it is written (or
 * failed); the worker's copy stays, and the file with it. */
static void close_spool_pipe(pp_exchange *r) {
  if (!r->spool_pipe) return;
  uv_close((uv_handle_t *)r->spool_pipe, on_spool_pipe_closed);
  r->spool_pipe = NULL;
}

static void on_request_written(uv_write_t *wr, int status) {
  pp_exchange *r = PP_CONTAINER_OF(wr, pp_exchange, wreq);
  (void)status;
  close_spool_pipe(r);
  r->writes--;
  if (r->release_pending && r->writes == 0) {
    r->release_pending = 0;
    pp_exchange_release(r->pool, r);
  }
}

void pp_dispatch_send_body(pp_exchange *r, const uint8_t *data, size_t len) {
  pp_core *c = PP_CORE_OF(r);
  wconn *w = r->w;
  while (len) {
    size_t n = len > PP_WIRE_MAX_BODY_CHUNK ? PP_WIRE_MAX_BODY_CHUNK : len;
    wchunk *k = pp_chunk_get(c->net, n + 16);
    pp_wire_put_header(k->data, PP_WIRE_BODY, (uint32_t)(8 + n));
    pp_wire_put_u64(k->data + 8, r->id);
    memcpy(k->data + 16, data, n);
    k->len = 16 + n;
    if (pp_wlink_send(w, k) < 0) return;
    data += n;
    len -= n;
  }
}

/* A frame with only a request id (BODY_END, CANCEL) to the worker running r. */
static void send_id_frame(pp_exchange *r, uint8_t type) {
  wchunk *k = pp_chunk_get(PP_CORE_OF(r)->net, 0);
  pp_wire_frame f;
  memset(&f, 0, sizeof f);
  f.type = type;
  f.request_id = r->id;
  k->len = (size_t)pp_wire_encode(&f, k->data, k->cap);
  pp_wlink_send(r->w, k);
}

void pp_dispatch_send_body_end(pp_exchange *r) {
  send_id_frame(r, PP_WIRE_BODY_END);
}

void pp_dispatch_send_cancel(pp_exchange *r) {
  send_id_frame(r, PP_WIRE_CANCEL);
}

static void send_request(pp_core *c, pp_exchange *r, wconn *w) {
  r->t3 = pp_now_ns();
  uint64_t queue_ns = (uint64_t)(r->t3 - r->t2b);
  pp_hist_window_record(&c->stats.queue, queue_ns);
  r->head.len = r->queue_key_end;
  size_t n = pp_fmt_u64(r->queue_digits, queue_ns);
  pp_buf_append_u32(&r->head, (uint32_t)n);
  pp_buf_append(&r->head, r->queue_digits, (size_t)n);
  if (r->add_request_start) {
    /* X-Request-Start of T2b: the realtime offset was taken at the last second (wallclock.h) */
    char v[24] = "t=";
    size_t vn = pp_fmt_u64(v + 2, (uint64_t)pp_wallclock_epoch_us(c->wall, r->t2b));
    pp_env_put_pair(&r->head, "HTTP_X_REQUEST_START", 20, v, vn + 2);
  }
  uint8_t *h = r->head.data;
  size_t body_len = r->streaming || r->spooling ? 0 : r->body.len - 4;
  size_t payload = r->head.len - 8 + 4 + body_len;
  pp_wire_put_header(h, PP_WIRE_REQUEST, (uint32_t)payload);
  pp_wire_put_u64(h + 8, r->id);
  pp_wire_put_u64(h + 16, (uint64_t)r->t2b);
  pp_wire_put_u64(h + 24, (uint64_t)r->t3);
  h[32] = (uint8_t)((r->streaming ? PP_WIRE_FLAG_BODY_STREAMS : 0) |
                    (r->spooling ? PP_WIRE_FLAG_BODY_FILE : 0) |
                    (r->hijackable ? PP_WIRE_FLAG_HIJACKABLE : 0) |
                    (r->early_hints ? PP_WIRE_FLAG_EARLY_HINTS : 0));
  uv_buf_t bufs[2];
  bufs[0] = uv_buf_init((char *)r->head.data, (unsigned)r->head.len);
  if (r->streaming || r->spooling) {
    memset(r->len_zero, 0, 4);
    bufs[1] = uv_buf_init((char *)r->len_zero, 4);
  } else {
    pp_wire_put_u32(r->body.data, (uint32_t)body_len);
    bufs[1] = uv_buf_init((char *)r->body.data, (unsigned)r->body.len);
  }
  r->w = w;
  pp_wlink_assign(w, r);
  r->state = PP_X_RUNNING;
  int rc;
  if (r->spooling) {
    /* The spool file's descriptor rides on the frame (SCM_RIGHTS): libuv sends a handle, so
     * the file is wrapped in one (it is never read through it). */
    r->spool_pipe = pp_xmalloc(sizeof *r->spool_pipe);
    uv_pipe_init(c->net->loop, r->spool_pipe, 0);
    rc = uv_pipe_open(r->spool_pipe, r->spool_fd);
    if (rc == 0) r->spool_fd = -1; /* the handle owns it now */
    rc = rc < 0 ? rc
                : pp_wlink_writev_handle(w, &r->wreq, bufs, 2, (uv_stream_t *)r->spool_pipe,
                                         on_request_written);
    if (rc < 0) {
      close_spool_pipe(r);
      pp_wlink_close(w, "cannot send the spooled body's descriptor"); /* r: 502 */
    }
  } else {
    rc = pp_wlink_writev(w, &r->wreq, bufs, 2, on_request_written);
  }
  if (rc < 0) return;       /* the worker connection closed (and answered r with a 502) */
  if (rc == 1) r->writes++; /* the buffers stay referenced until on_request_written */
  if (r->streaming) {
    if (r->body.len > 4) pp_dispatch_send_body(r, r->body.data + 4, r->body.len - 4);
    r->body.len = 4;
    if (r->body_done) pp_dispatch_send_body_end(r);
    /* reading the client may resume now (the owner checks it is not inside its parser) */
    if (r->owner && r->w) r->ops->body_writable(r);
  }
  pp_exchange_unbudget(r); /* its buffered body is on its way to the worker */
}

void pp_dispatch_admit_input(const pp_core *c, pp_admit_input *in) {
  memset(in, 0, sizeof *in);
  in->now_ns = pp_now_ns();
  in->queue_len = c->queue.len;
  in->slots_ready = c->reg->slots_ready;
  in->slots_busy = c->reg->slots_busy;
  in->service_mean_ns = pp_hist_mean(&c->stats.service.lifetime);
  if (c->stats.service_last.count) in->service_mean_ns = pp_hist_mean(&c->stats.service_last);
  pp_qnode *head = pp_queue_peek(&c->queue);
  in->oldest_enqueue_ns = head ? PP_CONTAINER_OF(head, pp_exchange, qlink)->t2b : INT64_MIN;
  in->shedding = *c->shedding;
}

void pp_dispatch_admit_note(const pp_core *c, int was_standing, const pp_admit_input *in) {
  if (c->admit.standing == was_standing) return;
  char reason[256];
  pp_admit_reason(&c->admit, c->policy, in, reason, sizeof reason);
  pp_log(c->xpool->cfg, 1, "admission: %s", reason); /* rare and worth seeing: even with -quiet */
}

uint64_t pp_dispatch_predicted_wait(const pp_core *c) {
  pp_admit_input in;
  pp_dispatch_admit_input(c, &in);
  return pp_admit_predicted_wait(&c->admit, c->policy, &in);
}
