/* The owner's calls on an exchange (see exchange_owner.h): admission, the REQUEST prefix every
 * session fills the same way, and the transitions a session drives (body in, body done,
 * abandon, the h2/h3 stream events). They hand the exchange down to dispatch and the worker
 * link; the record and its pool are exchange.c's. */
#include "server/core/exchange_owner.h"

#include <stdio.h>
#include <string.h>

#include "server/core/dispatch.h"
#include "server/base/clock.h"
#include "server/base/log.h"
#include "server/exchange/spool.h"
#include "server/proto/env.h"
#include "server/workers/wlink.h"

int pp_exchange_admit(pp_core *c) {
  if (!c->policy->shed_enabled) return 0;
  pp_admit_input in;
  pp_dispatch_admit_input(c, &in);
  int was_standing = c->admit.standing;
  pp_admit_verdict v = pp_admit_arrival(&c->admit, c->policy, &in);
  pp_dispatch_admit_note(c, was_standing, &in);
  if (v == PP_ADMIT_SHED) {
    c->stats.shed++;
    c->stats.shed_window++;
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

/* ---- the spool (exchange.h: bodies are read whole before dispatch) ----------------------- */

/* The refusals are answered here, from the loop: ops->fail is never called from inside the
 * owner's own call (pp_exchange_body_in runs in its parser's callback). */
static void on_refuse_idle(uv_idle_t *h) {
  pp_core *c = h->data;
  pp_exchange_pool *p = c->xpool;
  uv_idle_stop(h);
  while (p->refusals.len) {
    pp_exchange *x = PP_CONTAINER_OF(pp_queue_pop(&p->refusals), pp_exchange, rlink);
    if (!x->owner || x->state != PP_X_BODY) continue;
    if (x->refuse_status == 413)
      x->ops->fail(x, 413,
                   "413 Content Too Large: the request body is larger than the server's "
                   "spool budget (-max-spool-total)\n");
    else
      x->ops->fail(x, 503,
                   "503 Service Unavailable: request bodies fill the server's spool budget "
                   "(-max-spool-total) or its disk\n");
  }
}

/* The body cannot be kept: it is dropped (its file closed, its budget returned), and the
 * owner is answered with status when the loop comes round. Later bytes are dropped. */
static void refuse(pp_exchange *x, int status, const char *why) {
  pp_core *c = PP_CORE_OF(x);
  pp_exchange_pool *p = x->pool;
  x->refuse_status = status;
  if (status == 413)
    p->spool_refused_413++;
  else
    p->spool_refused_503++;
  pp_log(p->cfg, 0, "request %llu: body refused with %d: %s", (unsigned long long)x->id, status,
         why);
  x->body.len = 4;
  pp_exchange_unbudget(x);
  pp_exchange_unspool(x);
  pp_queue_push(&p->refusals, &x->rlink);
  if (!c->net || !c->net->loop) return; /* (unit tests without a loop answer by hand) */
  if (!c->refuse_idle_on) {
    uv_idle_init(c->net->loop, &c->refuse_idle);
    c->refuse_idle.data = c;
    c->refuse_idle_on = 1;
  }
  uv_idle_start(&c->refuse_idle, on_refuse_idle);
}

/* Counts the spool file as holding `need` bytes (it never shrinks): 0, or the status to
 * refuse with, 413 for a body larger than the whole -max-spool-total, else 503. */
static int spool_reserve(pp_exchange *x, uint64_t need) {
  pp_exchange_pool *p = x->pool;
  uint64_t max = p->cfg->max_spool_total;
  if (need <= x->spool_reserved) return 0;
  uint64_t more = need - x->spool_reserved;
  if (max && need > max) return 413;
  if (max && p->spool_bytes + more > max) return 503;
  p->spool_bytes += more;
  x->spool_reserved = need;
  return 0;
}

static void spool_append(pp_exchange *x, const uint8_t *data, size_t len) {
  int status = spool_reserve(x, x->spooled + len);
  if (status) {
    refuse(x, status, "over -max-spool-total");
    return;
  }
  int rc = pp_spool_write(x->spool_fd, data, len);
  if (rc < 0) {
    x->pool->spool_errors++;
    refuse(x, 503, strerror(-rc));
    return;
  }
  x->spooled += len;
}

/* The body goes to a spool file from here on: the file is opened (a known Content-Length is
 * reserved whole at once) and what was buffered in memory moves into it. 0, or -1 refused. */
static int spool_start(pp_exchange *x) {
  pp_exchange_pool *p = x->pool;
  uint64_t in_memory = x->body.len - 4;
  uint64_t need = in_memory;
  if (x->content_length > 0 && (uint64_t)x->content_length > need)
    need = (uint64_t)x->content_length;
  int status = spool_reserve(x, need);
  if (status) {
    refuse(x, status, "over -max-spool-total");
    return -1;
  }
  const char *dir = pp_spool_dir(p->cfg->body_spool_dir);
  int fd = pp_spool_open(dir);
  if (fd < 0) {
    p->spool_errors++;
    char why[512];
    snprintf(why, sizeof why, "cannot open a spool file in %s: %s", dir, strerror(-fd));
    refuse(x, 503, why);
    return -1;
  }
  x->spool_fd = fd;
  x->spooling = 1;
  p->spooled_bodies++;
  x->body.len = 4;
  pp_exchange_unbudget(x); /* the memory bytes leave the memory budget ... */
  if (in_memory) spool_append(x, x->body.data + 4, (size_t)in_memory); /* ... for the file */
  return x->refuse_status ? -1 : 0;
}

void pp_exchange_env_end(pp_exchange *x, uint32_t pairs, int64_t content_length) {
  pp_env_put_pair(&x->head, "puma_plus.queue_ns", 18, "", 0);
  x->head.len -= 4; /* the value (length + digits) is appended at dispatch */
  x->queue_key_end = x->head.len;
  pp_wire_put_u32(x->head.data + 33, pairs + 1 + (x->add_request_start ? 1 : 0));
  pp_buf_reserve(&x->body, 4);
  x->body.len = 4;
  x->content_length = content_length;
  if (content_length <= (int64_t)PP_BODY_BUFFER_LIMIT) return;
  if (x->pool->cfg->body_stream) {
    x->streaming = 1;
  } else if (x->state == PP_X_BODY) {
    /* Spooled from its first byte: the file is opened and the length reserved now, so a body
     * the budget cannot take is refused before the client sends it (no 100 Continue). */
    spool_start(x);
  }
}

void pp_exchange_body_in(pp_exchange *x, const uint8_t *data, size_t len) {
  if (x->state == PP_X_RUNNING) {
    if (!x->cancelled) pp_dispatch_send_body(x, data, len);
    return;
  }
  if (x->refuse_status) return; /* refused: the answer is on its way, the bytes are dropped */
  if (!x->pool->cfg->body_stream && x->state == PP_X_BODY) {
    if (!x->spooling &&
        (x->content_length > (int64_t)PP_BODY_BUFFER_LIMIT ||
         x->body.len - 4 + len > PP_BODY_BUFFER_LIMIT || pp_exchange_over_budget(x->pool)) &&
        spool_start(x) < 0)
      return;
    if (x->spooling) {
      spool_append(x, data, len);
      return;
    }
  }
  pp_buf_append(&x->body, data, len);
  x->budgeted += len;
  x->pool->body_buffered += len;
  if (x->state == PP_X_BODY && x->pool->cfg->body_stream &&
      (x->body.len - 4 >= PP_BODY_BUFFER_LIMIT || pp_exchange_over_budget(x->pool))) {
    if (x->body.len - 4 < PP_BODY_BUFFER_LIMIT) PP_CORE_OF(x)->stats.body_budget_streamed++;
    x->streaming = 1;
    pp_dispatch_push(x);
  }
}

void pp_exchange_body_done(pp_exchange *x) {
  x->body_done = 1;
  if (x->refuse_status) return; /* answered by the refusal */
  if (x->streaming) {
    if (x->state == PP_X_RUNNING && !x->cancelled)
      pp_dispatch_send_body_end(x);
    else if (x->state == PP_X_BODY)
      pp_dispatch_push(x); /* (CL > 1 MiB but body shorter) */
    return;
  }
  pp_dispatch_push(x);
}

int pp_exchange_can_take_body(pp_exchange *x) {
  pp_core *c = PP_CORE_OF(x);
  if (x->state == PP_X_BODY && x->pool->cfg->body_stream && !x->budgeted &&
      pp_exchange_over_budget(x->pool)) {
    /* an upload not yet buffering waits unread until the total has room */
    if (!x->blink.next) {
      pp_queue_push(&x->pool->body_waiters, &x->blink);
      c->stats.body_budget_waits++;
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
  pp_core *c = PP_CORE_OF(x);
  x->owner = NULL;
  if (pp_qnode_linked(&x->rlink)) pp_queue_remove(&x->pool->refusals, &x->rlink);
  switch (x->state) {
  case PP_X_QUEUED:
    pp_queue_remove(&c->queue, &x->qlink);
    pp_runq_remove(&c->runq, &x->run);
    c->stats.cancelled_queued++;
    c->stats.timeouts_window++;
    pp_exchange_release(x->pool, x);
    break;
  case PP_X_RUNNING:
    if (x->w) pp_wlink_resume(x->w); /* nobody reads this response any more */
    if (!x->cancelled && x->w) {
      x->cancelled = 1;
      c->stats.cancelled_running++;
      c->stats.timeouts_window++;
      pp_dispatch_send_cancel(x);
    }
    /* freed when RESPONSE_END arrives (or the worker connection closes); a worker already
     * gone (the owner was answering its loss) leaves nothing to wait for */
    if (!x->w) pp_exchange_release(x->pool, x);
    break;
  default: pp_exchange_release(x->pool, x); break;
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
    pp_hist_window_record(&PP_CORE_OF(x)->stats.total, (uint64_t)(pp_now_ns() - x->t1));
  pp_exchange_abandon(x);
}
