/* The discrete-event core both simulators share (engine.c: one host; cluster.c: many): a
 * binary min-heap of events ordered by time, ties by insertion order (so a run is a pure
 * function of its inputs), and a growable FIFO ring of u32. Header-only: the push and pop
 * are the simulators' innermost loop. Allocation failure is reported (-1), never fatal:
 * the caller records it and stops the run. */
#ifndef PP_SIM_EVQ_H
#define PP_SIM_EVQ_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct pp_sim_event {
  int64_t t;
  uint64_t seq; /* insertion order: the tie-break */
  uint32_t type;
  uint32_t a;
  uint64_t b;
} pp_sim_event;

typedef struct pp_sim_heap {
  pp_sim_event *ev;
  size_t n, cap;
  uint64_t seq;
} pp_sim_heap;

static inline int pp_sim_ev_less(const pp_sim_event *x, const pp_sim_event *y) {
  return x->t < y->t || (x->t == y->t && x->seq < y->seq);
}

/* 0, or -1 when the heap could not grow (the event is not added). */
static inline int pp_sim_heap_push(pp_sim_heap *h, int64_t t, uint32_t type, uint32_t a,
                                   uint64_t b) {
  if (h->n == h->cap) {
    size_t nc = h->cap ? h->cap * 2 : 256;
    pp_sim_event *ne = realloc(h->ev, nc * sizeof *ne);
    if (!ne) return -1;
    h->ev = ne;
    h->cap = nc;
  }
  pp_sim_event e = {t, h->seq++, type, a, b};
  size_t i = h->n++;
  while (i > 0) {
    size_t p = (i - 1) / 2;
    if (!pp_sim_ev_less(&e, &h->ev[p])) break;
    h->ev[i] = h->ev[p];
    i = p;
  }
  h->ev[i] = e;
  return 0;
}

/* The earliest event; the heap must not be empty. */
static inline pp_sim_event pp_sim_heap_pop(pp_sim_heap *h) {
  pp_sim_event top = h->ev[0];
  pp_sim_event last = h->ev[--h->n];
  size_t i = 0, n = h->n;
  for (;;) {
    size_t l = 2 * i + 1;
    if (l >= n) break;
    size_t m = l;
    if (l + 1 < n && pp_sim_ev_less(&h->ev[l + 1], &h->ev[l])) m = l + 1;
    if (!pp_sim_ev_less(&h->ev[m], &last)) break;
    h->ev[i] = h->ev[m];
    i = m;
  }
  if (n) h->ev[i] = last;
  return top;
}

typedef struct pp_sim_ring {
  uint32_t *v;
  size_t head, len, cap;
} pp_sim_ring;

/* Appends v; 0, or -1 when the ring could not grow (v is not added). */
static inline int pp_sim_ring_push(pp_sim_ring *r, uint32_t v) {
  if (r->len == r->cap) {
    size_t nc = r->cap ? r->cap * 2 : 16;
    uint32_t *nv = malloc(nc * sizeof *nv);
    if (!nv) return -1;
    for (size_t i = 0; i < r->len; i++)
      nv[i] = r->v[(r->head + i) % r->cap];
    free(r->v);
    r->v = nv;
    r->head = 0;
    r->cap = nc;
  }
  r->v[(r->head + r->len) % r->cap] = v;
  r->len++;
  return 0;
}

/* Takes the oldest value; the ring must not be empty. */
static inline uint32_t pp_sim_ring_pop(pp_sim_ring *r) {
  uint32_t v = r->v[r->head];
  r->head = (r->head + 1) % r->cap;
  r->len--;
  return v;
}

/* Takes the newest value; the ring must not be empty. */
static inline uint32_t pp_sim_ring_pop_back(pp_sim_ring *r) {
  r->len--;
  return r->v[(r->head + r->len) % r->cap];
}

#endif
