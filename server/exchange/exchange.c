/* The exchange (see exchange.h): the pool and the aggregate body budget. What the owner calls
 * to drive one (env, body, abandon) is core/exchange_owner.c's, above dispatch. Pooled structs
 * keep their buffers, so steady state does not call malloc. */
#include "server/exchange/exchange.h"

#include <string.h>
#include <unistd.h>

#include "server/base/access.h"
#include "server/base/alloc.h"
#include "server/base/clock.h"

void pp_exchange_pool_init(pp_exchange_pool *p, const pp_config *cfg, server *srv) {
  memset(p, 0, sizeof *p);
  p->cfg = cfg;
  p->srv = srv;
  pp_queue_init(&p->body_waiters);
  pp_queue_init(&p->refusals);
}

pp_exchange *pp_exchange_get(pp_exchange_pool *p, const pp_exchange_ops *ops, void *owner) {
  pp_exchange *x = p->free_exchanges;
  if (x) {
    p->free_exchanges = x->next_free;
  } else {
    x = pp_xmalloc(sizeof *x);
    memset(x, 0, sizeof *x);
    pp_buf_init(&x->head);
    pp_buf_init(&x->body);
    pp_buf_init(&x->resp_overflow);
  }
  pp_buf head = x->head, body = x->body, overflow = x->resp_overflow;
  memset(x, 0, sizeof *x);
  x->head = head;
  x->body = body;
  x->resp_overflow = overflow;
  x->head.len = 0;
  x->body.len = 0;
  x->resp_overflow.len = 0;
  x->srv = p->srv;
  x->pool = p;
  x->ops = ops;
  x->owner = owner;
  x->content_length = -1;
  x->spool_fd = -1;
  p->live_requests++;
  return x;
}

int pp_exchange_over_budget(const pp_exchange_pool *p) {
  uint64_t budget = p->cfg->max_buffered_body_total;
  return budget && p->body_buffered >= budget;
}

void pp_exchange_unbudget(pp_exchange *x) {
  pp_exchange_pool *p = x->pool;
  if (x->blink.next) pp_queue_remove(&p->body_waiters, &x->blink);
  if (!x->budgeted) return;
  p->body_buffered -= x->budgeted;
  x->budgeted = 0;
  /* wake waiting uploads while there is room (each may take more before the next wakes) */
  while (!pp_exchange_over_budget(p) && p->body_waiters.len) {
    pp_exchange *w = PP_CONTAINER_OF(pp_queue_pop(&p->body_waiters), pp_exchange, blink);
    if (w->owner) w->ops->body_writable(w);
  }
}

void pp_exchange_unspool(pp_exchange *x) {
  pp_exchange_pool *p = x->pool;
  if (x->spooling && x->spool_fd >= 0) close(x->spool_fd);
  x->spool_fd = -1;
  x->spooling = 0;
  p->spool_bytes -= x->spool_reserved;
  x->spool_reserved = 0;
}

void pp_exchange_log(pp_exchange_pool *p, pp_exchange *x) {
  if (x->logged || !p->hooks || !p->hooks->request_done) return;
  x->logged = 1;
  /* The env pairs sit in the REQUEST prefix (header, id, t2b, t3, flags, count) up to the
   * queue_ns key, which is the last pair and not counted here. An exchange the server
   * answered itself without building them (the control app's) is not logged. */
  const size_t start = 8 + 8 + 8 + 8 + 1 + 4;
  if (x->queue_key_end <= start) return;
  uint32_t count = pp_wire_get_u32(x->head.data + 33);
  pp_access_rec r = {
      .env = x->head.data + start,
      .env_len = x->queue_key_end - start,
      .env_count = count ? count - 1 : 0,
      .status = x->status,
      .bytes = x->resp_bytes,
      .id = x->id,
      .t1 = x->t1,
      .t2b = x->t2b,
      .t3 = x->t3,
      .t_end = pp_now_ns(),
      .service_ns = x->worker ? x->service_ns : -1,
      .worker = x->worker - 1,
  };
  p->hooks->request_done(p->hooks->request_done_ctx, &r);
}

void pp_exchange_release(pp_exchange_pool *p, pp_exchange *x) {
  if (!x->logged) pp_exchange_log(p, x);
  pp_exchange_unbudget(x);
  if (pp_qnode_linked(&x->rlink)) pp_queue_remove(&p->refusals, &x->rlink);
  if (x->writes > 0) {
    /* the spool file stays counted while the REQUEST carrying it is written */
    x->release_pending = 1;
    return;
  }
  /* A buffer that grew for one large upload does not stay large: pooled exchanges keep small
   * bodies' buffers (no malloc per request for them), not the up-to-1 MiB ones of an upload
   * burst, which would otherwise stay resident for good (pp-bench soak's body phase). */
  pp_exchange_unspool(x); /* the worker has its own descriptor and is done with the body */
  if (x->body.cap > PP_EXCHANGE_KEEP_BODY) pp_buf_dispose(&x->body);
  if (x->head.cap > 262144) pp_buf_dispose(&x->head);
  if (x->resp_overflow.cap > 262144) pp_buf_dispose(&x->resp_overflow);
  x->next_free = p->free_exchanges;
  p->free_exchanges = x;
  p->live_requests--;
  /* drain check deferred to the drain timer */
}

void pp_exchange_count_status(pp_exchange_pool *p, int status) {
  if (status < 200)
    p->status_1xx++;
  else if (status < 300)
    p->status_2xx++;
  else if (status < 400)
    p->status_3xx++;
  else if (status < 500)
    p->status_4xx++;
  else
    p->status_5xx++;
}
