/* The request FIFO and the worker registry (see queue.h). No I/O, no allocation. */
#include "server/base/queue.h"

#include <string.h>

#include "server/base/procmem.h"

void pp_queue_init(pp_queue *q) {
  q->head.prev = q->head.next = &q->head;
  q->len = 0;
}

void pp_queue_push(pp_queue *q, pp_qnode *n) {
  n->prev = q->head.prev;
  n->next = &q->head;
  q->head.prev->next = n;
  q->head.prev = n;
  q->len++;
}

pp_qnode *pp_queue_peek(const pp_queue *q) {
  return q->len ? q->head.next : NULL;
}

void pp_queue_remove(pp_queue *q, pp_qnode *n) {
  n->prev->next = n->next;
  n->next->prev = n->prev;
  n->prev = n->next = NULL;
  q->len--;
}

pp_qnode *pp_queue_pop(pp_queue *q) {
  pp_qnode *n = pp_queue_peek(q);
  if (n) pp_queue_remove(q, n);
  return n;
}

void pp_registry_init(pp_registry *r) {
  memset(r, 0, sizeof *r);
  for (int i = 0; i < PP_MAX_WORKERS; i++) {
    pp_queue_init(&r->workers[i].idle);
    pp_queue_init(&r->workers[i].sticky);
  }
}

pp_worker *pp_registry_find(pp_registry *r, uint32_t pid) {
  for (uint32_t i = 0; i < r->high; i++)
    if (r->workers[i].state != PP_WORKER_FREE && r->workers[i].pid == pid) return &r->workers[i];
  return NULL;
}

pp_worker *pp_registry_add(pp_registry *r, uint32_t pid, uint32_t index, int64_t now_ns) {
  pp_worker *w = pp_registry_find(r, pid);
  if (w) return w;
  for (int i = 0; i < PP_MAX_WORKERS; i++) {
    w = &r->workers[i];
    if (w->state != PP_WORKER_FREE || w->sticky.len) continue; /* in use, or still referenced */
    memset(w, 0, sizeof *w);
    pp_queue_init(&w->idle);
    pp_queue_init(&w->sticky);
    w->state = PP_WORKER_BOOTING;
    w->pid = pid;
    w->heap_live_slots = -1;
    w->cpu_share = -1;
    w->demand_share = -1;
    w->wait_ns = 0;
    w->wait_delta_ns = 0;
    w->cpu_delta_ns = -1;
    w->index = index;
    w->forked_ns = now_ns;
    w->generation = r->phase;
    if ((uint32_t)i >= r->high) r->high = (uint32_t)i + 1;
    return w;
  }
  return NULL;
}

pp_worker *pp_registry_attach(pp_registry *r, pp_slot *s, uint32_t pid, uint32_t worker_index,
                              uint32_t thread_index, int64_t now_ns) {
  pp_worker *w = pp_registry_add(r, pid, worker_index, now_ns);
  if (!w) return NULL;
  s->worker = w;
  s->thread_index = thread_index;
  s->busy = 0;
  w->slots++;
  if (s->ractor) w->ractor_slots++, r->ractor_slots++;
  if (w->state == PP_WORKER_BOOTING) {
    w->state = PP_WORKER_READY;
    w->ready_ns = now_ns;
  }
  if (w->state == PP_WORKER_READY) {
    r->slots_ready++;
    pp_queue_push(&w->idle, &s->idle_link);
  }
  return w;
}

pp_worker *pp_registry_detach(pp_registry *r, pp_slot *s) {
  pp_worker *w = s->worker;
  if (!w) return NULL;
  if (pp_qnode_linked(&s->idle_link)) pp_queue_remove(&w->idle, &s->idle_link);
  if (s->busy) {
    w->busy--;
    if (w->state == PP_WORKER_READY) r->slots_busy--;
  }
  if (w->state == PP_WORKER_READY) r->slots_ready--;
  w->slots--;
  if (s->ractor) w->ractor_slots--, r->ractor_slots--;
  s->busy = 0;
  s->worker = NULL;
  return w;
}

void pp_registry_remove(pp_registry *r, pp_worker *w) {
  (void)r;
  w->state = PP_WORKER_FREE;
  w->pid = 0;
}

void pp_registry_retire(pp_registry *r, pp_worker *w) {
  if (w->state == PP_WORKER_READY) {
    r->slots_ready -= w->slots;
    r->slots_busy -= w->busy;
  }
  while (pp_queue_pop(&w->idle)) {}
  w->state = PP_WORKER_RETIRING;
}

int pp_registry_has_idle(const pp_registry *r) {
  for (uint32_t i = 0; i < r->high; i++)
    if (r->workers[i].state == PP_WORKER_READY && r->workers[i].idle.len) return 1;
  return 0;
}

pp_slot *pp_registry_take(pp_registry *r) {
  pp_worker *best = NULL;
  for (uint32_t i = 0; i < r->high; i++) {
    pp_worker *w = &r->workers[i];
    if (w->state != PP_WORKER_READY || w->idle.len == 0) continue;
    if (!best || w->busy < best->busy || (w->busy == best->busy && w->index < best->index))
      best = w;
  }
  return pp_registry_take_worker(r, best);
}

pp_slot *pp_registry_take_worker(pp_registry *r, pp_worker *best) {
  if (!best || best->state != PP_WORKER_READY || best->idle.len == 0) return NULL;
  pp_slot *s = PP_CONTAINER_OF(pp_queue_pop(&best->idle), pp_slot, idle_link);
  s->busy = 1;
  best->busy++;
  best->requests++;
  r->slots_busy++;
  return s;
}

void pp_registry_release(pp_registry *r, pp_slot *s) {
  pp_worker *w = s->worker;
  if (!w || !s->busy) return;
  s->busy = 0;
  w->busy--;
  if (w->state == PP_WORKER_READY) {
    r->slots_busy--;
    pp_queue_push(&w->idle, &s->idle_link);
  }
}

uint32_t pp_registry_count(const pp_registry *r, pp_worker_state state) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < r->high; i++)
    n += r->workers[i].state == state;
  return n;
}

void pp_worker_sample_cpu(pp_worker *w, int64_t now_ns) {
  uint64_t cpu, run, wait;
  if (pp_proc_cpu_read(w->pid, &cpu) != 0) return;
  int have_wait = pp_proc_sched_read(w->pid, &run, &wait) == 0;
  if (w->cpu_sampled_ns && now_ns > w->cpu_sampled_ns && cpu >= w->cpu_ns) {
    double span = (double)(now_ns - w->cpu_sampled_ns);
    w->cpu_delta_ns = (int64_t)(cpu - w->cpu_ns);
    w->cpu_share = (double)w->cpu_delta_ns / span;
    /* a thread that ended takes its wait with it: a sum that fell counts as no wait */
    w->wait_delta_ns = have_wait && wait > w->wait_ns ? (int64_t)(wait - w->wait_ns) : 0;
    w->demand_share = (double)(w->cpu_delta_ns + w->wait_delta_ns) / span;
  }
  w->cpu_ns = cpu;
  if (have_wait) w->wait_ns = wait;
  w->cpu_sampled_ns = now_ns;
}

/* ---------------------------------------------------------------- the run lists */

void pp_runq_init(pp_runq *q) {
  memset(q, 0, sizeof *q);
  pp_queue_init(&q->any);
  pp_queue_init(&q->gone);
}

static pp_runlink *run_head(const pp_queue *l) {
  return PP_CONTAINER_OF(l->head.next, pp_runlink, node);
}

pp_runlink *pp_runq_first(pp_runq *q, pp_registry *r, pp_worker **wk, int *gone) {
  *wk = NULL;
  *gone = 0;
  if (q->gone.len) {
    q->looked++;
    *gone = 1;
    return run_head(&q->gone);
  }
  if (!q->waiting) { /* requests only (the common case): any slot takes the oldest */
    if (!q->any.len || !pp_registry_has_idle(r)) return NULL;
    q->looked++;
    return run_head(&q->any);
  }
  pp_runlink *best = NULL;
  int idle = 0; /* some slot may run an entry of `any` */
  for (uint32_t i = 0; i < r->high; i++) {
    pp_worker *w = &r->workers[i];
    int takes = w->state == PP_WORKER_READY && w->idle.len;
    idle |= takes;
    if (!w->sticky.len) continue;
    pp_runlink *e = run_head(&w->sticky);
    q->looked++;
    if (w->state != PP_WORKER_READY && w->state != PP_WORKER_BOOTING) {
      *wk = NULL;
      *gone = 1;
      return e;
    }
    if (takes && (!best || e->seq < best->seq)) best = e, *wk = w;
  }
  if (idle && q->any.len) {
    pp_runlink *e = run_head(&q->any);
    q->looked++;
    if (!best || e->seq < best->seq) best = e, *wk = NULL;
  }
  return best;
}
