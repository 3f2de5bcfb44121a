/* Discrete-event engine (see engine.h for the model). Workload: 10^4 - 10^7 requests per
 * run, up to a few dozen workers of up to 1024 slots; every event is O(log events) for the
 * heap plus O(workers) when the set of CPU-running workers changes. */
#include "sim/engine.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_rng.h>

#include "sim/arrivals.h"
#include "sim/evq.h"

enum { EV_ARRIVAL, EV_CPU, EV_IO, EV_BOOT, EV_TICK, EV_SECOND, EV_SLOTS };
enum { T_IDLE, T_GVL_WAIT, T_CPU, T_IO };
/* W_STANDBY: forked, booted, parked (takes no requests); W_SBOOT: a standby being forked. An
 * activated standby goes to W_BOOTING for its activation delay, then W_READY. */
enum { W_DEAD, W_BOOTING, W_READY, W_RETIRING, W_STANDBY, W_SBOOT };
enum { R_FREE, R_QUEUED, R_RUNNING, R_DONE, R_SHED };

typedef pp_sim_event event;

typedef struct req {
  int64_t t_arr, t_disp, t_done;
  uint64_t cpu_ns, io_ns;
  uint32_t kind;
  uint8_t status;
} req;

typedef struct thr {
  uint32_t req;
  uint8_t state;
  uint8_t in_idle;
  uint64_t cpu_left;
  int64_t wait_start;
  int64_t gvl_wait;
  /* the CPU segment this slot runs (processor sharing): with a per-process GVL only the
   * holder runs one; Ractor slots each hold their own GVL and run one each */
  double v_end;
  uint64_t seg;
  double seg_credited; /* of the running segment, CPU ns already credited to cpu_win */
  int32_t run_pos;
} thr;

typedef pp_sim_ring u32ring;

typedef struct worker {
  uint8_t state;
  uint32_t gen;
  uint32_t threads;
  uint32_t busy;
  thr *t;
  int32_t holder;
  uint32_t *gq; /* GVL wait queue (ring of thread indexes), capacity tcap */
  uint32_t gq_head, gq_len;
  u32ring q; /* per-worker queue (per_worker model) */
  /* CPU accounting for the observation's per-worker CPU share (what /proc gives the server) */
  double cpu_win;  /* CPU ns run in the current tick window */
  int64_t ready_t; /* when the worker became ready (serving) */
} worker;

typedef struct sim {
  const pp_scenario *scn;
  const pp_config *cfg;
  pp_policy policy;
  const pp_sim_options *opt;
  pp_sim_result *res;
  int64_t now;
  int64_t duration;
  /* heap */
  pp_sim_heap heap; /* the event queue (evq.h) */
  /* arrivals and requests (ring indexed by seq) */
  pp_arrivals arr;
  pp_arrival pending;
  int have_pending;
  uint64_t arrived;
  req *rq;
  size_t rq_cap; /* power of two */
  uint64_t rq_base;
  uint64_t finished; /* done or shed */
  uint64_t tcursor;  /* timeout cursor (seq) */
  /* workers */
  worker *w;
  uint32_t nw, capw;
  uint32_t tcap;
  uint32_t threads_per_worker;
  uint32_t slot_target;  /* slots per worker the controller asked for (set_slots) */
  uint64_t slot_version; /* invalidates a pending EV_SLOTS superseded by a newer decision */
  int64_t *cpu_buf;      /* per-worker CPU ns of the window, handed to the builder */
  uint32_t alive, ready, booting, retiring; /* serving workers; standby are not "alive" */
  uint32_t standby, standby_booting;
  gsl_rng *act_rng;  /* activation delays, its own stream so boot draws do not move */
  double standby_ns; /* integral of standby workers (parked + booting) */
  uint32_t slots_ready, slots_busy;
  uint32_t rr;
  gsl_rng *boot_rng;
  /* processor sharing */
  double V;
  int64_t v_t;
  uint32_t *running; /* running segments, each wi * tcap + ti */
  uint32_t nrun;
  uint64_t cpu_version;
  int64_t cpu_sched_t; /* time of the pending valid EV_CPU, -1 when none */
  uint64_t stale;      /* superseded EV_CPU events popped (not counted as work) */
  int ps_dirty;
  /* queues */
  u32ring fifo, idle;
  uint64_t queued;
  /* accounting */
  int64_t acc_t;
  double worker_ns, mem_ns;
  double mem_now;
  double peak_mem;
  uint32_t peak_workers;
  double excess_ns;
  uint64_t completed, completed_in_run, shed_total, late_served;
  /* window (tick) */
  pp_hist q_win, s_win, s_life;
  uint64_t w_arrivals, w_completions, w_shed, w_timeouts;
  double w_cpu_sum, w_gvl_sum;
  double life_cpu_sum;
  uint64_t life_completions;
  /* second */
  pp_hist q_sec;
  uint64_t s_arrivals, s_completed, s_shed, s_timeouts;
  uint32_t second;
  size_t tl_cap;
  double *lat_by_seq; /* keep_timeline: latency (ns) of each request by seq, NAN if none */
  size_t lat_cap;
  uint64_t *sec_first; /* keep_timeline: first seq arriving in each second */
  size_t n_sec, sec_cap;
  /* controller */
  pp_ctl_state ctl;
  uint64_t tick;
  int shed_on;
  int admit_on; /* autoscale with shed.enabled: pp_admit_* decides every arrival and dequeue */
  pp_admit_state admit;
  uint64_t last_service_mean;
  size_t dec_cap, tick_cap;
  int oom;
} sim;

/* ---- the event queue and rings (sim/evq.h, shared with cluster.c) --------------------- */

static void push_ev(sim *s, int64_t t, uint32_t type, uint32_t a, uint64_t b) {
  if (pp_sim_heap_push(&s->heap, t, type, a, b) < 0) s->oom = 1;
}

static event pop_ev(sim *s) {
  return pp_sim_heap_pop(&s->heap);
}

static int ring_push(sim *s, u32ring *r, uint32_t v) {
  if (pp_sim_ring_push(r, v) == 0) return 0;
  s->oom = 1;
  return -1;
}

static uint32_t ring_pop(u32ring *r) {
  return pp_sim_ring_pop(r);
}

/* ---- requests ---------------------------------------------------------------------------- */

static inline req *R(sim *s, uint64_t seq) {
  return &s->rq[seq & (s->rq_cap - 1)];
}

/* Makes room for request `seq` (= s->arrived): drops the finished prefix the timeout cursor
 * has passed, and doubles the ring if the live span is full. */
static req *req_new(sim *s) {
  while (s->rq_base < s->arrived && s->rq_base < s->tcursor) {
    uint8_t st = R(s, s->rq_base)->status;
    if (st != R_DONE && st != R_SHED) break;
    s->rq_base++;
  }
  if (s->arrived - s->rq_base >= s->rq_cap) {
    size_t nc = s->rq_cap * 2;
    req *nr = malloc(nc * sizeof *nr);
    if (!nr) {
      s->oom = 1;
      return NULL;
    }
    for (uint64_t q = s->rq_base; q < s->arrived; q++)
      nr[q & (nc - 1)] = *R(s, q);
    free(s->rq);
    s->rq = nr;
    s->rq_cap = nc;
  }
  return R(s, s->arrived);
}

/* ---- accounting -------------------------------------------------------------------------- */

static void account(sim *s) {
  int64_t t = s->now < s->duration ? s->now : s->duration;
  if (t > s->acc_t) {
    double dt = (double)(t - s->acc_t);
    s->worker_ns += dt * s->alive;
    s->standby_ns += dt * (s->standby + s->standby_booting);
    s->mem_ns += dt * s->mem_now;
    s->acc_t = t;
  }
}

/* A worker's private memory (USS). The shared part (machine.memory.shared, the preloaded app's
 * copy-on-write pages) is counted once for the whole fleet in recompute_mem, so the total is
 * the sum of PSS over the workers and the shepherd's share of the shared pages. */
static double worker_mem(const sim *s, const worker *w) {
  if (w->state == W_STANDBY || w->state == W_SBOOT)
    return s->scn->mem_standby_bytes >= 0
               ? (double)s->scn->mem_standby_bytes
               : (double)s->scn->mem_worker_bytes - (double)s->scn->mem_shared_bytes;
  return (double)s->scn->mem_worker_bytes - (double)s->scn->mem_shared_bytes +
         (double)(s->cfg->ractors  ? s->scn->mem_ractor_bytes
                  : s->cfg->fibers ? s->scn->mem_fiber_bytes
                                   : s->scn->mem_thread_bytes) *
             w->threads;
}

static void recompute_mem(sim *s) {
  double m = 0;
  int any = 0;
  for (uint32_t i = 0; i < s->nw; i++)
    if (s->w[i].state != W_DEAD) m += worker_mem(s, &s->w[i]), any = 1;
  if (any) m += (double)s->scn->mem_shared_bytes;
  s->mem_now = m;
  if (m > s->peak_mem) s->peak_mem = m;
  if (s->alive > s->peak_workers) s->peak_workers = s->alive;
}

/* ---- processor sharing of cores among GVL holders ------------------------------------- */

/* machine.background other runnable threads share the cores with the nrun GVL holders, all
 * equally: each runs at cores / (nrun + background) of a core, at most 1. */
static inline double ps_rate(const sim *s) {
  double n = (double)s->nrun + s->scn->background;
  return n <= (double)s->scn->cores ? 1.0 : (double)s->scn->cores / n;
}

static void ps_advance(sim *s) {
  if (s->nrun) s->V += (double)(s->now - s->v_t) * ps_rate(s);
  s->v_t = s->now;
}

static inline thr *run_thr(const sim *s, uint32_t id) {
  return &s->w[id / s->tcap].t[id % s->tcap];
}

static void ps_start(sim *s, uint32_t wi, uint32_t ti, uint64_t seg) {
  ps_advance(s);
  thr *t = &s->w[wi].t[ti];
  t->v_end = s->V + (double)seg;
  t->seg = seg;
  t->seg_credited = 0;
  t->run_pos = (int32_t)s->nrun;
  s->running[s->nrun++] = wi * s->tcap + ti;
  s->ps_dirty = 1;
}

/* Keeps exactly one valid EV_CPU pending, at the next segment end; an unchanged time keeps
 * the pending event (most segment starts do not move the earliest end). */
static void ps_reschedule(sim *s) {
  s->ps_dirty = 0;
  if (!s->nrun) {
    if (s->cpu_sched_t >= 0) s->cpu_version++, s->cpu_sched_t = -1;
    return;
  }
  double mn = run_thr(s, s->running[0])->v_end;
  for (uint32_t i = 1; i < s->nrun; i++)
    if (run_thr(s, s->running[i])->v_end < mn) mn = run_thr(s, s->running[i])->v_end;
  double dt = (mn - s->V) / ps_rate(s);
  int64_t t = s->now + (dt <= 0 ? 0 : (int64_t)ceil(dt));
  if (t == s->cpu_sched_t) return;
  s->cpu_version++;
  s->cpu_sched_t = t;
  push_ev(s, t, EV_CPU, 0, s->cpu_version);
}

/* ---- request flow ---------------------------------------------------------------------- */

static void start_segment(sim *s, uint32_t wi, uint32_t ti) {
  thr *t = &s->w[wi].t[ti];
  uint64_t seg = t->cpu_left < s->scn->gvl_timeslice_ns ? t->cpu_left : s->scn->gvl_timeslice_ns;
  ps_start(s, wi, ti, seg);
}

static void give_gvl_next(sim *s, uint32_t wi) {
  worker *w = &s->w[wi];
  uint32_t ti = w->gq[w->gq_head];
  w->gq_head = (w->gq_head + 1) % s->tcap;
  w->gq_len--;
  thr *t = &w->t[ti];
  t->gvl_wait += s->now - t->wait_start;
  t->state = T_CPU;
  w->holder = (int32_t)ti;
  start_segment(s, wi, ti);
}

static void gq_push(sim *s, worker *w, uint32_t ti) {
  w->gq[(w->gq_head + w->gq_len) % s->tcap] = ti;
  w->gq_len++;
  w->t[ti].state = T_GVL_WAIT;
  w->t[ti].wait_start = s->now;
}

static void complete(sim *s, uint32_t wi, uint32_t ti);

static void start_io(sim *s, uint32_t wi, uint32_t ti) {
  worker *w = &s->w[wi];
  thr *t = &w->t[ti];
  req *r = R(s, t->req);
  if (r->io_ns > 0) {
    t->state = T_IO;
    push_ev(s, s->now + (int64_t)r->io_ns, EV_IO, wi, ti);
  } else {
    complete(s, wi, ti);
  }
}

/* The enqueue (intended arrival) time of the oldest request still waiting, or INT64_MIN. */
static int64_t oldest_enqueue(const sim *s) {
  int64_t t = INT64_MIN;
  if (s->fifo.len) t = s->rq[s->fifo.v[s->fifo.head] & (s->rq_cap - 1)].t_arr;
  if (s->cfg->queue == PP_QUEUE_PER_WORKER)
    for (uint32_t i = 0; i < s->nw; i++) {
      const u32ring *q = &s->w[i].q;
      if (!q->len) continue;
      int64_t x = s->rq[q->v[q->head] & (s->rq_cap - 1)].t_arr;
      if (t == INT64_MIN || x < t) t = x;
    }
  return t;
}

/* The queue as admission control sees it now, exactly the fields the server passes. */
static void admit_input(const sim *s, pp_admit_input *in) {
  in->now_ns = s->now;
  in->queue_len = (uint32_t)s->queued;
  in->slots_ready = s->slots_ready;
  in->slots_busy = s->slots_busy;
  in->service_mean_ns = s->last_service_mean;
  in->oldest_enqueue_ns = oldest_enqueue(s);
  in->shedding = s->shed_on;
}

/* 1 if an arrival at t falls in one of the scenario's phases at its highest rate, 2 if also
 * after that phase's first second. */
static int in_busy(const sim *s, int64_t t) {
  const pp_scenario *scn = s->scn;
  if (scn->process == PP_ARRIVALS_TRACE || scn->n_phases == 0) return 0;
  double best = -1;
  for (uint32_t i = 0; i < scn->n_phases; i++)
    if (scn->phases[i].rate > best) best = scn->phases[i].rate;
  uint64_t start = 0;
  for (uint32_t i = 0; i < scn->n_phases; i++) {
    const pp_phase *ph = &scn->phases[i];
    if (ph->rate == best && t >= (int64_t)start && t < (int64_t)(start + ph->duration_ns))
      return t >= (int64_t)start + 1000000000ll ? 2 : 1;
    start += ph->duration_ns;
  }
  return 0;
}

/* Request seq is answered 503 by admission control (at arrival, or at dequeue). */
static void shed_request(sim *s, uint32_t seq) {
  req *r = R(s, seq);
  r->status = R_SHED;
  s->finished++;
  s->shed_total++;
  if (in_busy(s, r->t_arr)) s->res->busy_shed++;
  s->w_shed++;
  s->s_shed++;
  if (s->opt->on_request) {
    pp_sim_request pr = {seq, r->kind, r->t_arr, -1, -1, 1};
    s->opt->on_request(s->opt->data, &pr);
  }
}

/* Admission control's word on a request about to be handed to a slot: 1 to run it. */
static int admit_dequeued(sim *s, uint32_t seq) {
  if (!s->admit_on) return 1;
  pp_admit_input in;
  admit_input(s, &in);
  uint64_t sojourn = (uint64_t)(s->now - R(s, seq)->t_arr);
  if (pp_admit_dequeue(&s->admit, &s->policy, &in, sojourn) == PP_ADMIT_ACCEPT) return 1;
  shed_request(s, seq);
  return 0;
}

/* A request goes to a free slot without waiting. It is still a dequeue for admission control
 * (the server calls it for every dispatch), but with sojourn 0 it is never shed: 0 is within
 * any budget. */
static void admit_unqueued(sim *s) {
  if (!s->admit_on) return;
  pp_admit_input in;
  admit_input(s, &in);
  (void)pp_admit_dequeue(&s->admit, &s->policy, &in, 0);
}

static void dispatch(sim *s, uint32_t wi, uint32_t ti, uint32_t seq) {
  worker *w = &s->w[wi];
  thr *t = &w->t[ti];
  req *r = R(s, seq);
  r->status = R_RUNNING;
  r->t_disp = s->now;
  uint64_t qt = (uint64_t)(s->now - r->t_arr);
  pp_hist_record(&s->q_win, qt);
  pp_hist_record(&s->q_sec, qt);
  pp_hist_record(&s->res->queue, qt);
  s->res->queue_sum_ns += (double)qt;
  s->res->queue_count++;
  t->req = seq;
  t->in_idle = 0; /* any entry of this slot left in the idle ring is now stale */
  t->gvl_wait = 0;
  t->cpu_left = r->cpu_ns;
  w->busy++;
  s->slots_busy++;
  if (t->cpu_left > 0) {
    if (s->cfg->ractors) { /* its own GVL: runs at once, alongside the process's other slots */
      t->state = T_CPU;
      start_segment(s, wi, ti);
    } else if (w->holder < 0) {
      w->holder = (int32_t)ti;
      t->state = T_CPU;
      start_segment(s, wi, ti);
    } else {
      gq_push(s, w, ti);
    }
  } else {
    start_io(s, wi, ti);
  }
}

/* Pops the next queued request for worker wi (its own queue first in the per-worker model),
 * or UINT32_MAX. */
static uint32_t next_request(sim *s, worker *w) {
  if (s->admit_on && s->cfg->queue == PP_QUEUE_FIFO && pp_admit_lifo(&s->admit, &s->policy)) {
    /* Adaptive LIFO (shed.rule controlled-lifo while standing): the oldest are offered to
     * admission first while they are past the cap (it sheds them), then the newest runs. */
    pp_admit_input in;
    admit_input(s, &in);
    uint64_t cap = pp_admit_standing_wait(&s->policy, &in);
    while (s->fifo.len && (uint64_t)(s->now - R(s, s->fifo.v[s->fifo.head])->t_arr) > cap) {
      uint32_t seq = ring_pop(&s->fifo);
      s->queued--;
      if (admit_dequeued(s, seq)) return seq;
    }
    while (s->fifo.len) {
      uint32_t seq = pp_sim_ring_pop_back(&s->fifo);
      s->queued--;
      if (admit_dequeued(s, seq)) return seq;
    }
    return UINT32_MAX;
  }
  for (;;) {
    uint32_t seq;
    if (s->cfg->queue == PP_QUEUE_PER_WORKER && w->q.len)
      seq = ring_pop(&w->q);
    else if (s->fifo.len)
      seq = ring_pop(&s->fifo);
    else
      return UINT32_MAX;
    s->queued--;
    if (admit_dequeued(s, seq)) return seq;
  }
}

static void worker_exit(sim *s, uint32_t wi);

/* Thread ti of worker wi is free: take work or become idle. */
static void thread_free(sim *s, uint32_t wi, uint32_t ti) {
  worker *w = &s->w[wi];
  thr *t = &w->t[ti];
  t->state = T_IDLE;
  if (w->state == W_READY && ti < w->threads) {
    uint32_t seq = next_request(s, w);
    if (seq != UINT32_MAX) {
      dispatch(s, wi, ti, seq);
      return;
    }
    if (s->cfg->queue == PP_QUEUE_FIFO && !t->in_idle) {
      t->in_idle = 1;
      ring_push(s, &s->idle, wi << 16 | ti);
    }
  } else if (w->state == W_RETIRING && w->busy == 0) {
    worker_exit(s, wi);
  }
}

static void complete(sim *s, uint32_t wi, uint32_t ti) {
  worker *w = &s->w[wi];
  thr *t = &w->t[ti];
  req *r = R(s, t->req);
  r->status = R_DONE;
  r->t_done = s->now;
  uint64_t lat = (uint64_t)(s->now - r->t_arr);
  pp_hist_record(&s->res->latency, lat);
  if (s->lat_by_seq) s->lat_by_seq[t->req] = (double)lat;
  int busy = in_busy(s, r->t_arr);
  if (busy) {
    pp_hist_record(&s->res->busy_latency, lat);
    if (busy == 2) pp_hist_record(&s->res->standing_latency, lat);
    if (lat <= s->scn->client_timeout_ns) s->res->busy_served++;
  }
  uint64_t svc = (uint64_t)(s->now - r->t_disp);
  pp_hist_record(&s->s_win, svc);
  pp_hist_record(&s->s_life, svc);
  s->w_cpu_sum += (double)r->cpu_ns;
  s->life_cpu_sum += (double)r->cpu_ns;
  s->life_completions++;
  s->w_gvl_sum += (double)t->gvl_wait;
  s->w_completions++;
  s->s_completed++;
  s->completed++;
  s->finished++;
  if (s->admit_on) pp_admit_complete(&s->admit, &s->policy, s->now);
  if (s->now <= s->duration) s->completed_in_run++;
  if (lat > s->scn->slo_ns) s->excess_ns += (double)(lat - s->scn->slo_ns);
  if (lat > s->scn->client_timeout_ns) s->late_served++;
  if (s->opt->on_request) {
    pp_sim_request pr = {(uint32_t)t->req, r->kind, r->t_arr, r->t_disp, r->t_done, 0};
    s->opt->on_request(s->opt->data, &pr);
  }
  w->busy--;
  s->slots_busy--;
  thread_free(s, wi, ti);
}

/* Slot ti of worker wi (the GVL holder, or a Ractor slot) finished its segment. */
static void segment_done(sim *s, uint32_t wi, uint32_t ti) {
  worker *w = &s->w[wi];
  thr *t = &w->t[ti];
  t->cpu_left -= t->seg;
  w->cpu_win += (double)t->seg - t->seg_credited;
  t->seg_credited = 0;
  if (s->cfg->ractors) { /* no GVL shared with the other slots: nothing to hand over */
    if (t->cpu_left > 0)
      start_segment(s, wi, ti);
    else
      start_io(s, wi, ti);
    return;
  }
  if (t->cpu_left > 0) {
    if (w->gq_len) {
      gq_push(s, w, ti);
      give_gvl_next(s, wi);
    } else {
      start_segment(s, wi, ti);
    }
    return;
  }
  w->holder = -1;
  if (w->gq_len) give_gvl_next(s, wi);
  start_io(s, wi, ti);
}

static void on_cpu(sim *s, uint64_t version) {
  if (version != s->cpu_version) {
    s->stale++;
    return;
  }
  s->cpu_sched_t = -1;
  ps_advance(s);
  uint32_t done[64];
  uint32_t nd = 0;
  for (uint32_t i = 0; i < s->nrun;) {
    uint32_t id = s->running[i];
    if (run_thr(s, id)->v_end <= s->V + 0.5 && nd < 64) {
      done[nd++] = id;
      s->running[i] = s->running[--s->nrun];
      run_thr(s, s->running[i])->run_pos = (int32_t)i;
      run_thr(s, id)->run_pos = -1;
    } else {
      i++;
    }
  }
  s->ps_dirty = 1;
  for (uint32_t k = 0; k < nd; k++)
    segment_done(s, done[k] / s->tcap, done[k] % s->tcap);
}

/* ---- workers ----------------------------------------------------------------------------- */

static int grow_workers(sim *s) {
  if (s->nw < s->capw) return 0;
  uint32_t nc = s->capw ? s->capw * 2 : 8;
  worker *nw = realloc(s->w, nc * sizeof *nw);
  uint32_t *nr = realloc(s->running, (size_t)nc * s->tcap * sizeof *nr);
  if (nr) s->running = nr;
  int64_t *nb = realloc(s->cpu_buf, nc * sizeof *nb);
  if (nb) s->cpu_buf = nb;
  if (!nw || !nr || !nb) {
    if (nw) s->w = nw;
    s->oom = 1;
    return -1;
  }
  s->w = nw;
  memset(s->w + s->capw, 0, (nc - s->capw) * sizeof *nw);
  s->capw = nc;
  return 0;
}

static void worker_ready(sim *s, uint32_t wi) {
  worker *w = &s->w[wi];
  account(s);
  w->state = W_READY;
  w->ready_t = s->now;
  s->booting--;
  s->ready++;
  s->slots_ready += w->threads;
  for (uint32_t ti = 0; ti < w->threads; ti++)
    if (w->t[ti].state == T_IDLE) thread_free(s, wi, ti);
}

/* A free worker slot (a dead one, or a new one), or UINT32_MAX when out of memory. */
static uint32_t alloc_worker(sim *s) {
  uint32_t wi = UINT32_MAX;
  for (uint32_t i = 0; i < s->nw; i++)
    if (s->w[i].state == W_DEAD) {
      wi = i;
      break;
    }
  if (wi == UINT32_MAX) {
    if (grow_workers(s)) return UINT32_MAX;
    wi = s->nw++;
    s->w[wi].t = calloc(s->tcap, sizeof(thr));
    s->w[wi].gq = calloc(s->tcap, sizeof(uint32_t));
    if (!s->w[wi].t || !s->w[wi].gq) {
      s->oom = 1;
      return UINT32_MAX;
    }
  }
  worker *w = &s->w[wi];
  w->gen++;
  w->threads = s->threads_per_worker;
  w->busy = 0;
  w->holder = -1;
  w->gq_head = w->gq_len = 0;
  memset(w->t, 0, s->tcap * sizeof(thr));
  for (uint32_t i = 0; i < s->tcap; i++)
    w->t[i].run_pos = -1;
  return wi;
}

/* New standby worker: forked now, parked after `boot_ns` (0: parked now, as at start). */
static void spawn_standby(sim *s, int64_t boot_ns) {
  account(s);
  uint32_t wi = alloc_worker(s);
  if (wi == UINT32_MAX) return;
  worker *w = &s->w[wi];
  if (boot_ns <= 0) {
    w->state = W_STANDBY;
    s->standby++;
  } else {
    w->state = W_SBOOT;
    s->standby_booting++;
    push_ev(s, s->now + boot_ns, EV_BOOT, wi, w->gen);
  }
  recompute_mem(s);
}

/* A standby worker is activated: it serves after its activation delay, counting as booting
 * until then (as the server counts it until its slots connect). */
static int activate_standby(sim *s, int64_t delay_ns) {
  uint32_t wi = UINT32_MAX;
  for (uint32_t i = 0; i < s->nw; i++)
    if (s->w[i].state == W_STANDBY) {
      wi = i;
      break;
    }
  if (wi == UINT32_MAX) return -1;
  account(s);
  worker *w = &s->w[wi];
  w->gen++;
  w->threads = s->threads_per_worker;
  w->state = W_BOOTING;
  s->standby--;
  s->alive++;
  s->booting++;
  s->res->activations++;
  recompute_mem(s);
  if (delay_ns <= 0) delay_ns = 1;
  push_ev(s, s->now + delay_ns, EV_BOOT, wi, w->gen);
  return 0;
}

/* New worker: booting for `boot_ns` (0: ready now, as at start). */
static void spawn(sim *s, int64_t boot_ns) {
  account(s);
  uint32_t wi = alloc_worker(s);
  if (wi == UINT32_MAX) return;
  worker *w = &s->w[wi];
  w->state = W_BOOTING;
  s->alive++;
  s->booting++;
  recompute_mem(s);
  if (boot_ns <= 0)
    worker_ready(s, wi);
  else
    push_ev(s, s->now + boot_ns, EV_BOOT, wi, w->gen);
}

static void worker_exit(sim *s, uint32_t wi) {
  account(s);
  s->w[wi].state = W_DEAD;
  s->alive--;
  s->retiring--;
  recompute_mem(s);
}

static void retire(sim *s) {
  /* The newest ready worker (highest index) goes first; the oldest stays. */
  uint32_t wi = UINT32_MAX;
  for (uint32_t i = s->nw; i-- > 0;)
    if (s->w[i].state == W_READY) {
      wi = i;
      break;
    }
  if (wi == UINT32_MAX) return;
  worker *w = &s->w[wi];
  account(s);
  w->state = W_RETIRING;
  s->ready--;
  s->retiring++;
  s->slots_ready -= w->threads;
  s->slots_busy -= 0;
  while (w->q.len) {
    ring_push(s, &s->fifo, ring_pop(&w->q));
  }
  for (uint32_t ti = 0; ti < s->tcap; ti++)
    w->t[ti].in_idle = 0;
  if (w->busy == 0) worker_exit(s, wi);
  /* Its queued requests (per-worker model) moved to the shared backlog; wake idle slots. */
  while (s->fifo.len && s->idle.len) {
    uint32_t id = ring_pop(&s->idle);
    worker *x = &s->w[id >> 16];
    thr *t = &x->t[id & 0xffff];
    if (!t->in_idle || t->state != T_IDLE) continue;
    t->in_idle = 0;
    thread_free(s, id >> 16, id & 0xffff);
  }
}

static void set_threads(sim *s, uint32_t n) {
  if (n < 1) n = 1;
  if (n > s->tcap) n = s->tcap;
  account(s);
  s->threads_per_worker = n;
  for (uint32_t wi = 0; wi < s->nw; wi++) {
    worker *w = &s->w[wi];
    if (w->state == W_DEAD) continue;
    uint32_t old = w->threads;
    w->threads = n;
    if (w->state == W_READY) {
      s->slots_ready = s->slots_ready - old + n;
      for (uint32_t ti = old; ti < n; ti++)
        if (w->t[ti].state == T_IDLE) thread_free(s, wi, ti);
    }
  }
  recompute_mem(s);
}

/* ---- arrivals ---------------------------------------------------------------------------- */

static void schedule_next_arrival(sim *s) {
  if (pp_arrivals_next(&s->arr, &s->pending)) {
    s->have_pending = 1;
    push_ev(s, s->pending.t_ns, EV_ARRIVAL, 0, 0);
  } else {
    s->have_pending = 0;
  }
}

static uint32_t pick_idle_fifo(sim *s) {
  while (s->idle.len) {
    uint32_t id = ring_pop(&s->idle);
    worker *w = &s->w[id >> 16];
    thr *t = &w->t[id & 0xffff];
    if (!t->in_idle) continue;
    t->in_idle = 0;
    if (w->state == W_READY && (id & 0xffff) < w->threads && t->state == T_IDLE) return id;
  }
  return UINT32_MAX;
}

static void on_arrival(sim *s) {
  req *r = req_new(s);
  if (!r) return;
  uint32_t seq = (uint32_t)s->arrived++;
  r->t_arr = s->pending.t_ns;
  r->t_disp = r->t_done = -1;
  r->cpu_ns = s->pending.cpu_ns;
  /* The scenario's CPU per request is what the app measures on thread slots; a fiber slot
   * saves the difference of its two switches (suspend at the I/O, resume after it). */
  if (s->cfg->fibers && s->scn->switch_thread_ns > s->scn->switch_fiber_ns) {
    uint64_t save = 2 * (s->scn->switch_thread_ns - s->scn->switch_fiber_ns);
    r->cpu_ns = r->cpu_ns > save ? r->cpu_ns - save : 0;
  }
  /* The worker's own CPU per request outside the app (frames, env, response), on the GVL
   * like the app's: machine.overhead, 0 unless the scenario says. */
  r->cpu_ns += s->scn->overhead_ns;
  r->io_ns = s->pending.io_ns;
  r->kind = s->pending.kind;
  r->status = R_QUEUED;
  if (s->opt->keep_timeline) {
    if (seq >= s->lat_cap) {
      size_t nc = s->lat_cap ? s->lat_cap * 2 : 4096;
      double *nl = realloc(s->lat_by_seq, nc * sizeof *nl);
      if (!nl) {
        s->oom = 1;
        return;
      }
      s->lat_by_seq = nl;
      s->lat_cap = nc;
    }
    s->lat_by_seq[seq] = NAN;
    uint64_t sec = (uint64_t)(r->t_arr / 1000000000);
    while (s->n_sec <= sec) {
      if (s->n_sec == s->sec_cap) {
        size_t nc = s->sec_cap ? s->sec_cap * 2 : 256;
        uint64_t *ns = realloc(s->sec_first, nc * sizeof *ns);
        if (!ns) {
          s->oom = 1;
          return;
        }
        s->sec_first = ns;
        s->sec_cap = nc;
      }
      s->sec_first[s->n_sec++] = seq;
    }
  }
  s->w_arrivals++;
  s->s_arrivals++;
  schedule_next_arrival(s);

  if (s->admit_on) {
    pp_admit_input in;
    admit_input(s, &in);
    if (pp_admit_arrival(&s->admit, &s->policy, &in) == PP_ADMIT_SHED) {
      shed_request(s, seq);
      return;
    }
  }

  if (s->cfg->queue == PP_QUEUE_FIFO) {
    uint32_t id = pick_idle_fifo(s);
    if (id != UINT32_MAX) {
      admit_unqueued(s);
      dispatch(s, id >> 16, id & 0xffff, seq);
      return;
    }
    s->queued++;
    ring_push(s, &s->fifo, seq);
    return;
  }
  /* per-worker: deal round robin over ready workers */
  for (uint32_t k = 0; k < s->nw; k++) {
    uint32_t wi = (s->rr + k) % s->nw;
    worker *w = &s->w[wi];
    if (w->state != W_READY) continue;
    s->rr = wi + 1;
    for (uint32_t ti = 0; ti < w->threads; ti++)
      if (w->t[ti].state == T_IDLE) {
        admit_unqueued(s);
        dispatch(s, wi, ti, seq);
        return;
      }
    s->queued++;
    ring_push(s, &w->q, seq);
    return;
  }
  s->queued++;
  ring_push(s, &s->fifo, seq); /* no ready worker: the listen backlog */
}

/* ---- ticks, timeouts, timeline --------------------------------------------------------- */

static void advance_timeouts(sim *s) {
  int64_t to = (int64_t)s->scn->client_timeout_ns;
  while (s->tcursor < s->arrived) {
    req *r = R(s, s->tcursor);
    if (r->t_arr + to > s->now) break;
    if (r->status != R_SHED && (r->t_done < 0 || r->t_done - r->t_arr > to)) {
      s->w_timeouts++;
      s->s_timeouts++;
    }
    s->tcursor++;
  }
}

static double pct(const pp_hist *h, double q) {
  return h->count ? (double)pp_hist_percentile(h, q) : -1.0;
}

static void on_second(sim *s) {
  advance_timeouts(s);
  pp_sim_result *res = s->res;
  if (s->opt->keep_timeline) {
    if (res->timeline_len == s->tl_cap) {
      size_t nc = s->tl_cap ? s->tl_cap * 2 : 256;
      pp_timeline_row *nt = realloc(res->timeline, nc * sizeof *nt);
      if (!nt) {
        s->oom = 1;
        return;
      }
      res->timeline = nt;
      s->tl_cap = nc;
    }
    pp_timeline_row *row = &res->timeline[res->timeline_len++];
    memset(row, 0, sizeof *row); /* padding too: rows are compared bytewise */
    row->t_s = s->second;
    row->arrivals = s->s_arrivals;
    row->completed = s->s_completed;
    row->p50_ns = row->p99_ns = -1; /* filled at the end, by arrival second */
    row->workers = s->alive;
    row->workers_ready = s->ready;
    row->queue_p95_ns = s->q_sec.count ? pct(&s->q_sec, 95) : 0;
    row->queue_len = (int64_t)s->queued;
    row->shed = s->s_shed;
    row->timeouts = s->s_timeouts;
    row->memory_bytes = s->mem_now;
  }
  pp_hist_reset(&s->q_sec);
  s->s_arrivals = s->s_completed = s->s_shed = s->s_timeouts = 0;
  s->second++;
}

static void append_decision(sim *s, const pp_declog_record *rec) {
  pp_sim_result *res = s->res;
  char line[PP_DECLOG_LINE_MAX];
  int n = pp_declog_encode(rec, line, sizeof line);
  if (n < 0) n = snprintf(line, sizeof line, "{\"error\":\"encode failed\"}\n");
  if (res->decisions_len + (size_t)n + 1 > s->dec_cap) {
    size_t nc = s->dec_cap ? s->dec_cap * 2 : 65536;
    while (nc < res->decisions_len + (size_t)n + 1)
      nc *= 2;
    char *nd = realloc(res->decisions, nc);
    if (!nd) {
      s->oom = 1;
      return;
    }
    res->decisions = nd;
    s->dec_cap = nc;
  }
  memcpy(res->decisions + res->decisions_len, line, (size_t)n + 1);
  if (res->n_ticks == s->tick_cap) {
    size_t nc = s->tick_cap ? s->tick_cap * 2 : 256;
    pp_sim_tick *nt = realloc(res->ticks, nc * sizeof *nt);
    if (!nt) {
      s->oom = 1;
      return;
    }
    res->ticks = nt;
    s->tick_cap = nc;
  }
  pp_sim_tick *t = &res->ticks[res->n_ticks++];
  t->tick = rec->tick;
  t->time_ns = rec->time_ns;
  t->action = rec->decision.action;
  t->count = rec->decision.count;
  t->workers_target = rec->decision.workers_target;
  t->line_off = res->decisions_len;
  t->line_len = (size_t)n;
  snprintf(t->reason, sizeof t->reason, "%s", rec->decision.reason);
  res->decisions_len += (size_t)n;
}

static void on_tick(sim *s) {
  advance_timeouts(s);
  pp_obs_input in;
  memset(&in, 0, sizeof in);
  in.tick = s->tick;
  in.now_ns = s->now;
  in.window_ns = s->policy.tick_ns;
  in.queue_window = &s->q_win;
  in.service_window = &s->s_win;
  in.service_lifetime = &s->s_life;
  in.queue_len = (uint32_t)s->queued;
  in.slots_ready = s->slots_ready;
  in.slots_busy = s->slots_busy;
  in.workers_ready = s->ready;
  in.workers_booting = s->booting;
  in.workers_retiring = s->retiring;
  in.threads_per_worker = s->threads_per_worker;
  in.arrivals = s->w_arrivals;
  in.completions = s->w_completions;
  in.shed = s->w_shed;
  in.timeouts = s->w_timeouts;
  if (s->w_completions)
    in.service_cpu_mean_ns = (int64_t)llround(s->w_cpu_sum / (double)s->w_completions);
  else if (s->life_completions)
    in.service_cpu_mean_ns = (int64_t)llround(s->life_cpu_sum / (double)s->life_completions);
  else
    in.service_cpu_mean_ns = PP_UNKNOWN_NS;
  if (!s->scn->gvl_measured)
    in.gvl_wait_ns = PP_UNKNOWN_NS;
  else if (s->w_completions)
    in.gvl_wait_ns = (int64_t)llround(s->w_gvl_sum / (double)s->w_completions);
  else
    in.gvl_wait_ns = PP_UNKNOWN_NS; /* nothing completed: not measured this tick, never 0 */
  /* Mean PSS of a serving worker (docs/CONTROL.md §8): its USS plus its share of the shared
   * pages, split among every process that maps them (workers, standby and the shepherd). With
   * no shared part this is worker + per_thread x threads, as before. */
  {
    uint64_t shared = s->scn->mem_shared_bytes;
    uint64_t sharers = (uint64_t)s->alive + s->standby + s->standby_booting + 1;
    in.mem_per_worker_bytes =
        (int64_t)(s->scn->mem_worker_bytes - shared +
                  s->scn->mem_thread_bytes * s->threads_per_worker + shared / sharers);
  }
  in.workers_standby = s->standby;
  in.workers_standby_booting = s->standby_booting;
  in.threads_per_worker = s->slot_target;
  /* Each serving worker's CPU time over the window, as the server reads it from /proc: the
   * running segments are credited up to now. Workers that became ready inside the window are
   * left out, as the server leaves out a worker it first sees during the window. */
  ps_advance(s);
  uint32_t ncpu = 0;
  int64_t win_start = s->now - (int64_t)s->policy.tick_ns;
  for (uint32_t i = 0; i < s->nw; i++) {
    worker *w = &s->w[i];
    for (uint32_t ti = 0; ti < s->tcap; ti++) {
      thr *t = &w->t[ti];
      if (t->run_pos < 0) continue;
      double done = (double)t->seg - (t->v_end - s->V);
      if (done > t->seg_credited) w->cpu_win += done - t->seg_credited, t->seg_credited = done;
    }
    if (w->state == W_READY && w->ready_t <= win_start)
      s->cpu_buf[ncpu++] = (int64_t)llround(w->cpu_win);
    w->cpu_win = 0;
  }
  in.worker_cpu_ns = s->scn->cpu_measured ? s->cpu_buf : NULL;
  in.n_worker_cpu = s->scn->cpu_measured ? ncpu : 0;
  /* Ractor slots (slots: ractor): a GVL each, bounded by the machine's cores (rule 4b). */
  in.ractor_cores = s->cfg->ractors ? s->scn->cores : 0;

  pp_declog_record rec;
  memset(&rec, 0, sizeof rec);
  if (pp_observation_build(&rec.obs, &in) != 0) {
    s->oom = 1; /* cannot happen with the inputs above; treat as a fatal engine error */
    return;
  }
  rec.tick = s->tick;
  rec.time_ns = s->now;
  rec.policy_hash = s->res->policy_hash;
  snprintf(rec.source, sizeof rec.source, "sim");
  rec.state_before = s->ctl;
  rec.decision = pp_decide(&s->policy, &s->ctl, &rec.obs);
  rec.state_after = s->ctl;

  const pp_decision *d = &rec.decision;
  switch (d->action) {
  case PP_ACTION_SPAWN_WORKER: {
    const pp_dist *boot = s->cfg->has_boot ? &s->cfg->boot : &s->scn->boot;
    for (uint32_t i = 0; i < d->count; i++) {
      if (i < d->activate &&
          activate_standby(s, (int64_t)pp_dist_draw(&s->scn->activation, s->act_rng)) == 0)
        continue;
      uint64_t b = pp_dist_draw(boot, s->boot_rng);
      spawn(s, b > 0 ? (int64_t)b : 1);
    }
    break;
  }
  case PP_ACTION_RETIRE_WORKER:
    for (uint32_t i = 0; i < d->count; i++)
      retire(s);
    break;
  case PP_ACTION_ADD_THREAD:
    set_threads(s, s->threads_per_worker + d->count);
    s->slot_target = s->threads_per_worker;
    break;
  case PP_ACTION_REMOVE_THREAD:
    set_threads(s, s->threads_per_worker > d->count ? s->threads_per_worker - d->count : 1);
    s->slot_target = s->threads_per_worker;
    break;
  case PP_ACTION_SET_SLOTS: {
    /* Fewer slots at once (a busy slot finishes its request first); more after the slot delay
     * (a thread or fiber started, its connection dialled in). New workers get the target. */
    uint32_t n = d->count < 1 ? 1 : d->count > s->tcap ? s->tcap : d->count;
    s->slot_target = n;
    s->slot_version++;
    if (n <= s->threads_per_worker)
      set_threads(s, n);
    else {
      /* a Ractor slot has its own delay (Ractor.new, its own require work, its dial-in) */
      uint64_t dl = s->cfg->ractors ? s->scn->slot_delay_ractor_ns : s->scn->slot_delay_ns;
      push_ev(s, s->now + (int64_t)(dl ? dl : 1), EV_SLOTS, 0, s->slot_version);
    }
    break;
  }
  default: break;
  }
  if (d->standby_spawn) {
    const pp_dist *boot = s->cfg->has_boot ? &s->cfg->boot : &s->scn->boot;
    for (uint32_t i = 0; i < d->standby_spawn; i++) {
      uint64_t b = pp_dist_draw(boot, s->act_rng);
      spawn_standby(s, b > 0 ? (int64_t)b : 1);
    }
  }
  s->shed_on = d->shed;
  s->last_service_mean = rec.obs.service_mean_ns;
  if (s->opt->keep_decisions) append_decision(s, &rec);

  pp_hist_reset(&s->q_win);
  pp_hist_reset(&s->s_win);
  s->w_arrivals = s->w_completions = s->w_shed = s->w_timeouts = 0;
  s->w_cpu_sum = s->w_gvl_sum = 0;
  s->tick++;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of a sorted array. */
static double nearest_rank(const double *v, size_t n, double q) {
  size_t k = (size_t)ceil(q / 100.0 * (double)n);
  if (k < 1) k = 1;
  if (k > n) k = n;
  return v[k - 1];
}

/* Timeline p50/p99 are over the requests that arrived (intended) in each second, which is
 * how a load generator that measures from intended start bins them; requests of one second
 * are a contiguous run of sequence numbers. */
static void fill_latency_by_arrival(sim *s) {
  pp_sim_result *res = s->res;
  if (!s->lat_by_seq || !res->timeline_len) return;
  double *buf = malloc((s->arrived ? s->arrived : 1) * sizeof *buf);
  if (!buf) {
    s->oom = 1;
    return;
  }
  for (size_t row = 0; row < res->timeline_len; row++) {
    uint32_t t = res->timeline[row].t_s;
    if (t >= s->n_sec) break;
    uint64_t from = s->sec_first[t], to = t + 1 < s->n_sec ? s->sec_first[t + 1] : s->arrived;
    size_t n = 0;
    for (uint64_t q = from; q < to; q++)
      if (!isnan(s->lat_by_seq[q])) buf[n++] = s->lat_by_seq[q];
    if (n) {
      qsort(buf, n, sizeof *buf, cmp_double);
      res->timeline[row].p50_ns = nearest_rank(buf, n, 50);
      res->timeline[row].p99_ns = nearest_rank(buf, n, 99);
    }
  }
  free(buf);
}

/* ---- run --------------------------------------------------------------------------------- */

void pp_sim_options_default(pp_sim_options *o, const pp_scenario *scn) {
  memset(o, 0, sizeof *o);
  o->seed = scn->seed;
  o->keep_timeline = 1;
  o->keep_decisions = 1;
}

void pp_sim_result_dispose(pp_sim_result *r) {
  free(r->timeline);
  free(r->decisions);
  free(r->ticks);
  r->timeline = NULL;
  r->decisions = NULL;
  r->ticks = NULL;
  r->timeline_len = r->decisions_len = r->n_ticks = 0;
}

static void sim_free(sim *s) {
  for (uint32_t i = 0; i < s->nw; i++) {
    free(s->w[i].t);
    free(s->w[i].gq);
    free(s->w[i].q.v);
  }
  free(s->w);
  free(s->running);
  free(s->cpu_buf);
  free(s->heap.ev);
  free(s->rq);
  free(s->fifo.v);
  free(s->idle.v);
  free(s->lat_by_seq);
  free(s->sec_first);
  if (s->boot_rng) gsl_rng_free(s->boot_rng);
  if (s->act_rng) gsl_rng_free(s->act_rng);
  pp_arrivals_dispose(&s->arr);
}

int pp_sim_run(const pp_scenario *scn, uint32_t config_index, const pp_sim_options *opt,
               pp_sim_result *out) {
  memset(out, 0, sizeof *out);
  pp_hist_init(&out->latency);
  pp_hist_init(&out->queue);
  pp_hist_init(&out->busy_latency);
  pp_hist_init(&out->standing_latency);
  if (config_index >= scn->n_configs) return PP_SIM_EINVAL;
  pp_sim_options defaults;
  if (!opt) {
    pp_sim_options_default(&defaults, scn);
    opt = &defaults;
  }
  sim *s = calloc(1, sizeof *s);
  if (!s) return PP_SIM_ENOMEM;
  s->scn = scn;
  s->cfg = &scn->configs[config_index];
  s->opt = opt;
  s->res = out;
  s->duration = (int64_t)scn->duration_ns;
  if (scn->process != PP_ARRIVALS_TRACE) {
    double best = -1;
    for (uint32_t i = 0; i < scn->n_phases; i++)
      if (scn->phases[i].rate > best) best = scn->phases[i].rate;
    for (uint32_t i = 0; i < scn->n_phases; i++)
      if (scn->phases[i].rate == best) out->busy_s += (double)scn->phases[i].duration_ns / 1e9;
  }
  s->policy = opt->policy ? *opt->policy : s->cfg->policy;
  pp_hist_init(&s->q_win);
  pp_hist_init(&s->s_win);
  pp_hist_init(&s->s_life);
  pp_hist_init(&s->q_sec);
  int rc = pp_arrivals_init(&s->arr, scn, opt->seed);
  if (rc) {
    free(s);
    return rc;
  }
  s->boot_rng = gsl_rng_alloc(gsl_rng_mt19937);
  s->act_rng = gsl_rng_alloc(gsl_rng_mt19937);
  s->rq_cap = 1024;
  s->cpu_sched_t = -1;
  s->rq = malloc(s->rq_cap * sizeof *s->rq);
  if (!s->boot_rng || !s->act_rng || !s->rq) {
    sim_free(s);
    free(s);
    return PP_SIM_ENOMEM;
  }
  gsl_rng_set(s->boot_rng,
              (uint32_t)pp_splitmix64(opt->seed * 0x100000001b3ull + 1000 + config_index));
  gsl_rng_set(s->act_rng,
              (uint32_t)pp_splitmix64(opt->seed * 0x100000001b3ull + 2000 + config_index));

  s->threads_per_worker = s->cfg->threads;
  s->slot_target = s->cfg->threads;
  s->tcap = s->cfg->threads;
  if (s->cfg->autoscale && s->policy.threads_enabled && s->policy.max_threads > s->tcap)
    s->tcap = s->policy.max_threads;
  if (s->cfg->autoscale && s->policy.slots_enabled && s->policy.max_slots > s->tcap)
    s->tcap = s->policy.max_slots;
  if (s->tcap > PP_SCN_MAX_THREADS) s->tcap = PP_SCN_MAX_THREADS;
  if (s->cfg->autoscale) {
    out->policy_hash = pp_policy_hash(&s->policy);
    pp_ctl_state_init(&s->ctl, &s->policy, s->cfg->workers, s->cfg->threads);
    s->admit_on = s->policy.shed_enabled;
  }
  pp_admit_state_init(&s->admit);
  for (uint32_t i = 0; i < s->cfg->workers; i++)
    spawn(s, 0);
  /* The standby pool is there from the start, as the initial workers are; a pool behind the
   * slots (standby_cover > 0) starts empty and is filled when the controller finds it needed. */
  if (s->cfg->autoscale && s->policy.standby_cover == 0)
    for (uint32_t i = 0; i < s->policy.standby; i++)
      spawn_standby(s, 0);
  schedule_next_arrival(s);
  push_ev(s, 1000000000, EV_SECOND, 0, 0);
  if (s->cfg->autoscale) push_ev(s, (int64_t)s->policy.tick_ns, EV_TICK, 0, 0);

  int64_t hard_stop = s->duration + (int64_t)scn->drain_limit_ns;
  uint64_t events = 0;
  while (s->heap.n && !s->oom) {
    event e = pop_ev(s);
    if (e.t > hard_stop) break;
    s->now = e.t;
    events++;
    switch (e.type) {
    case EV_ARRIVAL: on_arrival(s); break;
    case EV_CPU: on_cpu(s, e.b); break;
    case EV_IO: complete(s, e.a, (uint32_t)e.b); break;
    case EV_BOOT:
      if (s->w[e.a].state == W_BOOTING && s->w[e.a].gen == e.b) {
        worker_ready(s, e.a);
      } else if (s->w[e.a].state == W_SBOOT && s->w[e.a].gen == e.b) {
        account(s);
        s->w[e.a].state = W_STANDBY;
        s->standby_booting--;
        s->standby++;
      }
      break;
    case EV_TICK:
      on_tick(s);
      push_ev(s, s->now + (int64_t)s->policy.tick_ns, EV_TICK, 0, 0);
      break;
    case EV_SLOTS:
      if (e.b == s->slot_version) set_threads(s, s->slot_target);
      break;
    case EV_SECOND:
      on_second(s);
      push_ev(s, s->now + 1000000000, EV_SECOND, 0, 0);
      break;
    }
    if (s->ps_dirty) ps_reschedule(s);
    /* Done when everything arrived, everything finished, and the last second is closed. */
    if (!s->have_pending && s->finished == s->arrived && s->now >= s->duration &&
        e.type == EV_SECOND)
      break;
  }
  if (s->oom) {
    sim_free(s);
    free(s);
    return PP_SIM_ENOMEM;
  }
  if (s->now < s->duration) s->now = s->duration;
  account(s);
  fill_latency_by_arrival(s);
  if (s->oom) {
    sim_free(s);
    free(s);
    return PP_SIM_ENOMEM;
  }

  /* Requests still in the server at the drain limit count as unfinished and timed out. */
  uint64_t unfinished = 0;
  for (uint64_t q = s->rq_base; q < s->arrived; q++) {
    req *r = R(s, q);
    if (r->status == R_QUEUED || r->status == R_RUNNING) {
      unfinished++;
      if (opt->on_request) {
        pp_sim_request pr = {(uint32_t)q, r->kind, r->t_arr, r->t_disp, -1, 0};
        opt->on_request(opt->data, &pr);
      }
    }
  }
  pp_summary *sm = &out->summary;
  sm->duration_s = (double)s->duration / 1e9;
  sm->requests = s->arrived;
  sm->completed = s->completed;
  sm->completed_in_run = s->completed_in_run;
  sm->shed = s->shed_total;
  sm->unfinished = unfinished;
  sm->timed_out = s->late_served + unfinished;
  sm->offered_rps = (double)s->arrived / sm->duration_s;
  sm->achieved_rps = (double)s->completed_in_run / sm->duration_s;
  sm->p50_ns = pct(&out->latency, 50);
  sm->p90_ns = pct(&out->latency, 90);
  sm->p99_ns = pct(&out->latency, 99);
  sm->p999_ns = pct(&out->latency, 99.9);
  sm->max_ns = out->latency.count ? (double)out->latency.max_ns : -1;
  sm->mean_ns = out->latency.count ? (double)out->latency.sum_ns / (double)out->latency.count : -1;
  sm->excess_latency_ns = s->excess_ns;
  sm->queue_p95_ns = pct(&out->queue, 95);
  sm->queue_p99_ns = pct(&out->queue, 99);
  sm->queue_max_ns = out->queue.count ? (double)out->queue.max_ns : -1;
  sm->queue_mean_ns = out->queue_count ? out->queue_sum_ns / (double)out->queue_count : -1;
  sm->avg_workers = s->worker_ns / (double)s->duration;
  sm->peak_workers = s->peak_workers;
  sm->avg_memory_bytes = s->mem_ns / (double)s->duration;
  sm->peak_memory_bytes = s->peak_mem;
  sm->worker_seconds = s->worker_ns / 1e9;
  out->avg_standby = s->standby_ns / (double)s->duration;
  out->events = events - s->stale;
  sim_free(s);
  free(s);
  return 0;
}
