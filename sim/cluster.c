/* Cluster engine (see cluster.h for the model). Workload: up to a few thousand hosts of a few
 * workers each and 10^8 requests; every event is O(log events) for the heap, O(log hosts) for
 * least-outstanding balancing and O(workers of one host) for a dispatch; a scrape or a sync
 * is O(hosts). */
#include "sim/cluster.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_rng.h>

#include "sim/arrivals.h"
#include "sim/evq.h"
#include "sim/hpa.h"

const double pp_cluster_prom_bounds[PP_CLUSTER_PROM_BUCKETS] = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,    0.1,
    0.25,   0.5,     1,      2.5,   5,      10,    30,   60,    INFINITY};

enum { EV_ARRIVAL, EV_CPU, EV_IO, EV_WBOOT, EV_HBOOT, EV_HTICK, EV_SYNC, EV_SCRAPE, EV_SECOND };
enum { H_DEAD, H_BOOTING, H_READY, H_DRAINING };
enum { W_DEAD, W_BOOTING, W_READY, W_RETIRING };
enum { R_FREE, R_QUEUED, R_RUNNING, R_DONE };

typedef pp_sim_event event;

typedef struct creq {
  int64_t t_arr, t_disp, t_gvl;
  uint64_t cpu_ns, io_ns;
  uint32_t host;
  uint8_t status, phase;
} creq;

typedef pp_sim_ring u32ring;

typedef struct cworker {
  uint8_t state;
  uint32_t gen, busy;
  int64_t holder; /* request seq holding the GVL, -1 */
  u32ring gq;     /* requests waiting for the GVL */
} cworker;

typedef struct sample {
  int64_t t;
  double cpu_ns, busy_ns;
  uint32_t slots_ready;
  uint64_t cum[PP_CLUSTER_PROM_BUCKETS];
} sample;

typedef struct host {
  uint8_t state;
  uint32_t gen;
  cworker *w;
  uint32_t nw;
  uint32_t threads;
  uint32_t ready_w, booting_w, retiring_w, alive_w;
  uint32_t slots_ready, slots_busy;
  u32ring q;
  uint32_t outstanding;
  int32_t rdy_pos;  /* index in the ready array, -1 */
  int32_t heap_pos; /* index in the least-outstanding heap, -1 */
  uint64_t last_pick;
  /* exported metrics */
  uint64_t prom[PP_CLUSTER_PROM_BUCKETS]; /* non-cumulative counts per bucket */
  double cpu_total_ns;
  double busy_total_ns; /* puma_plus_service_seconds_sum, in ns */
  sample *smp;
  uint32_t n_smp, smp_head;
  /* controller (autoscale hosts) */
  pp_hist *q_win, *s_win;
  pp_ctl_state ctl;
  uint64_t tick;
  uint64_t w_arrivals, w_completions;
  double w_cpu_sum, w_gvl_sum;
  /* per second */
  uint32_t s_completed;
  pp_hist *q_sec; /* keep_hosts only */
} host;

typedef struct csim {
  const pp_scenario *scn;
  const pp_config *cfg;
  const pp_cluster_cfg *cc;
  const pp_cluster_options *opt;
  pp_cluster_result *res;
  pp_policy policy; /* the host config's, max_workers capped to cores */
  uint32_t cores;
  int64_t now, duration;
  pp_sim_heap heap; /* the event queue (evq.h) */
  pp_arrivals arr;
  pp_arrival pending;
  int have_pending;
  uint64_t arrived, finished;
  creq *rq;
  size_t rq_cap;
  uint64_t rq_base;
  host *h;
  uint32_t nh, caph;
  uint32_t *rdy;
  uint32_t n_rdy;
  uint32_t *lh; /* least-outstanding heap of host ids */
  uint32_t n_lh;
  uint64_t pick_counter;
  uint32_t rr;
  u32ring backlog; /* arrivals while no host is ready */
  gsl_rng *wboot_rng, *hboot_rng, *bal_rng;
  uint32_t hosts_booting, hosts_ready, hosts_draining, workers_alive;
  uint64_t queued;
  int64_t acc_t;
  double host_ns, worker_ns;
  uint32_t peak_hosts;
  pp_hpa hpa;
  double last_metric;
  /* per second */
  pp_hist lat_sec, q_sec;
  uint64_t s_arrivals, s_completed;
  double s_cpu_ns;
  uint32_t second;
  size_t tl_cap, hr_cap;
  pp_hist *phase_lat;
  int64_t phase_end[PP_SCN_MAX_PHASES];
  uint32_t n_phases;
  double excess_ns;
  uint64_t timed_out;
  int oom;
} csim;

const char *pp_balancer_name(pp_balancer b) {
  switch (b) {
  case PP_BAL_ROUND_ROBIN: return "round_robin";
  case PP_BAL_LEAST_OUTSTANDING: return "least_outstanding";
  case PP_BAL_P2C: return "p2c";
  case PP_BAL_RANDOM: return "random";
  }
  return "?";
}

/* ---- the event queue and rings (sim/evq.h, shared with engine.c) ---------------------- */

static void push_ev(csim *s, int64_t t, uint32_t type, uint32_t a, uint64_t b) {
  if (pp_sim_heap_push(&s->heap, t, type, a, b) < 0) s->oom = 1;
}

static event pop_ev(csim *s) {
  return pp_sim_heap_pop(&s->heap);
}

static int ring_push(csim *s, u32ring *r, uint32_t v) {
  if (pp_sim_ring_push(r, v) == 0) return 0;
  s->oom = 1;
  return -1;
}

static uint32_t ring_pop(u32ring *r) {
  return pp_sim_ring_pop(r);
}

/* Resets a histogram touching only the buckets between its min and max (a window histogram
 * of a host is reset every tick; a full memset of 32 KiB per host per tick would dominate). */
static void hist_clear(pp_hist *h) {
  if (h->count) {
    uint32_t lo = pp_hist__bucket_of(h->min_ns), hi = pp_hist__bucket_of(h->max_ns);
    memset(&h->buckets[lo], 0, (size_t)(hi - lo + 1) * sizeof h->buckets[0]);
  }
  h->count = h->sum_ns = h->max_ns = 0;
  h->min_ns = UINT64_MAX;
}

static pp_hist *hist_new(csim *s) {
  pp_hist *h = malloc(sizeof *h);
  if (!h) {
    s->oom = 1;
    return NULL;
  }
  pp_hist_init(h);
  return h;
}

static double pct(const pp_hist *h, double q) {
  return h->count ? (double)pp_hist_percentile(h, q) : -1.0;
}

/* ---- requests ---------------------------------------------------------------------------- */

static inline creq *R(csim *s, uint64_t seq) {
  return &s->rq[seq & (s->rq_cap - 1)];
}

static creq *req_new(csim *s) {
  while (s->rq_base < s->arrived && R(s, s->rq_base)->status == R_DONE)
    s->rq_base++;
  if (s->arrived - s->rq_base >= s->rq_cap) {
    size_t nc = s->rq_cap * 2;
    creq *nr = malloc(nc * sizeof *nr);
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

static void account(csim *s) {
  int64_t t = s->now < s->duration ? s->now : s->duration;
  if (t > s->acc_t) {
    double dt = (double)(t - s->acc_t);
    s->host_ns += dt * (s->hosts_booting + s->hosts_ready + s->hosts_draining);
    s->worker_ns += dt * s->workers_alive;
    s->acc_t = t;
  }
  uint32_t alive = s->hosts_booting + s->hosts_ready + s->hosts_draining;
  if (alive > s->peak_hosts) s->peak_hosts = alive;
}

/* ---- balancer ---------------------------------------------------------------------------- */

static inline uint64_t lkey(const csim *s, uint32_t hi) {
  return (uint64_t)s->h[hi].outstanding << 40 | (s->h[hi].last_pick & ((1ull << 40) - 1));
}

static void lh_swap(csim *s, uint32_t i, uint32_t j) {
  uint32_t a = s->lh[i], b = s->lh[j];
  s->lh[i] = b;
  s->lh[j] = a;
  s->h[b].heap_pos = (int32_t)i;
  s->h[a].heap_pos = (int32_t)j;
}

static void lh_fix(csim *s, uint32_t i) {
  while (i > 0) {
    uint32_t p = (i - 1) / 2;
    if (lkey(s, s->lh[i]) >= lkey(s, s->lh[p])) break;
    lh_swap(s, i, p);
    i = p;
  }
  for (;;) {
    uint32_t l = 2 * i + 1, m = i;
    if (l < s->n_lh && lkey(s, s->lh[l]) < lkey(s, s->lh[m])) m = l;
    if (l + 1 < s->n_lh && lkey(s, s->lh[l + 1]) < lkey(s, s->lh[m])) m = l + 1;
    if (m == i) break;
    lh_swap(s, i, m);
    i = m;
  }
}

static void bal_add(csim *s, uint32_t hi) {
  host *h = &s->h[hi];
  h->rdy_pos = (int32_t)s->n_rdy;
  s->rdy[s->n_rdy++] = hi;
  if (s->cc->balancer == PP_BAL_LEAST_OUTSTANDING) {
    h->heap_pos = (int32_t)s->n_lh;
    s->lh[s->n_lh++] = hi;
    lh_fix(s, (uint32_t)h->heap_pos);
  }
}

static void bal_remove(csim *s, uint32_t hi) {
  host *h = &s->h[hi];
  if (h->rdy_pos >= 0) {
    uint32_t last = s->rdy[--s->n_rdy];
    s->rdy[h->rdy_pos] = last;
    s->h[last].rdy_pos = h->rdy_pos;
    h->rdy_pos = -1;
  }
  if (h->heap_pos >= 0) {
    uint32_t pos = (uint32_t)h->heap_pos;
    uint32_t last = --s->n_lh;
    if (pos != last) {
      lh_swap(s, pos, last);
      h->heap_pos = -1;
      lh_fix(s, pos);
    }
    h->heap_pos = -1;
  }
}

static void outstanding_changed(csim *s, uint32_t hi) {
  if (s->h[hi].heap_pos >= 0) lh_fix(s, (uint32_t)s->h[hi].heap_pos);
}

static uint32_t bal_pick(csim *s) {
  if (!s->n_rdy) return UINT32_MAX;
  switch (s->cc->balancer) {
  case PP_BAL_ROUND_ROBIN:
    if (s->rr >= s->n_rdy) s->rr = 0;
    return s->rdy[s->rr++];
  case PP_BAL_LEAST_OUTSTANDING: return s->lh[0];
  case PP_BAL_RANDOM: return s->rdy[gsl_rng_uniform_int(s->bal_rng, s->n_rdy)];
  case PP_BAL_P2C: {
    if (s->n_rdy == 1) return s->rdy[0];
    uint32_t i = (uint32_t)gsl_rng_uniform_int(s->bal_rng, s->n_rdy);
    uint32_t j = (uint32_t)gsl_rng_uniform_int(s->bal_rng, s->n_rdy - 1);
    if (j >= i) j++;
    uint32_t a = s->rdy[i], b = s->rdy[j];
    return s->h[b].outstanding < s->h[a].outstanding ? b : a;
  }
  }
  return s->rdy[0];
}

/* ---- request flow in a host -------------------------------------------------------------- */

static void complete(csim *s, uint32_t hi, uint32_t wi, uint32_t seq);

static void start_io(csim *s, uint32_t hi, uint32_t wi, uint32_t seq) {
  creq *r = R(s, seq);
  if (r->io_ns > 0)
    push_ev(s, s->now + (int64_t)r->io_ns, EV_IO, hi, (uint64_t)wi << 32 | seq);
  else
    complete(s, hi, wi, seq);
}

static void dispatch(csim *s, uint32_t hi, uint32_t wi, uint32_t seq) {
  host *h = &s->h[hi];
  cworker *w = &h->w[wi];
  creq *r = R(s, seq);
  r->status = R_RUNNING;
  r->t_disp = s->now;
  uint64_t qt = (uint64_t)(s->now - r->t_arr);
  pp_hist_record(&s->res->queue, qt);
  pp_hist_record(&s->q_sec, qt);
  if (h->q_win) pp_hist_record(h->q_win, qt);
  if (h->q_sec) pp_hist_record(h->q_sec, qt);
  double qs = (double)qt / 1e9;
  uint32_t b = 0;
  while (b < PP_CLUSTER_PROM_BUCKETS - 1 && qs > pp_cluster_prom_bounds[b])
    b++;
  h->prom[b]++;
  w->busy++;
  h->slots_busy++;
  if (r->cpu_ns > 0) {
    if (w->holder < 0) {
      w->holder = seq;
      push_ev(s, s->now + (int64_t)r->cpu_ns, EV_CPU, hi, (uint64_t)wi << 32 | seq);
    } else {
      r->t_gvl = s->now;
      ring_push(s, &w->gq, seq);
    }
  } else {
    start_io(s, hi, wi, seq);
  }
}

/* The ready worker of host hi with a free thread and the fewest busy ones, or UINT32_MAX. */
static uint32_t free_worker(const host *h) {
  uint32_t best = UINT32_MAX, busy = UINT32_MAX;
  for (uint32_t i = 0; i < h->nw; i++) {
    const cworker *w = &h->w[i];
    if (w->state == W_READY && w->busy < h->threads && w->busy < busy) best = i, busy = w->busy;
  }
  return best;
}

/* Fills free threads of host hi from its queue. */
static void drain_queue(csim *s, uint32_t hi) {
  host *h = &s->h[hi];
  while (h->q.len) {
    uint32_t wi = free_worker(h);
    if (wi == UINT32_MAX) return;
    s->queued--;
    dispatch(s, hi, wi, ring_pop(&h->q));
  }
}

static void host_arrival(csim *s, uint32_t hi, uint32_t seq) {
  host *h = &s->h[hi];
  R(s, seq)->host = hi;
  h->outstanding++;
  h->last_pick = ++s->pick_counter;
  outstanding_changed(s, hi);
  h->w_arrivals++;
  uint32_t wi = free_worker(h);
  if (wi != UINT32_MAX && !h->q.len) {
    dispatch(s, hi, wi, seq);
    return;
  }
  s->queued++;
  ring_push(s, &h->q, seq);
}

static void host_dead(csim *s, uint32_t hi) {
  host *h = &s->h[hi];
  account(s);
  s->hosts_draining--;
  s->workers_alive -= h->alive_w;
  for (uint32_t i = 0; i < h->nw; i++)
    h->w[i].state = W_DEAD;
  h->alive_w = h->ready_w = h->booting_w = h->retiring_w = 0;
  h->state = H_DEAD;
  h->gen++;
}

static void worker_exit(csim *s, uint32_t hi, uint32_t wi) {
  host *h = &s->h[hi];
  account(s);
  h->w[wi].state = W_DEAD;
  h->retiring_w--;
  h->alive_w--;
  s->workers_alive--;
}

static void complete(csim *s, uint32_t hi, uint32_t wi, uint32_t seq) {
  host *h = &s->h[hi];
  cworker *w = &h->w[wi];
  creq *r = R(s, seq);
  r->status = R_DONE;
  uint64_t lat = (uint64_t)(s->now - r->t_arr);
  pp_hist_record(&s->res->latency, lat);
  pp_hist_record(&s->lat_sec, lat);
  pp_hist_record(&s->phase_lat[r->phase], lat);
  for (uint32_t p = 0; p < s->n_phases; p++)
    if (s->now < s->phase_end[p]) {
      s->res->phases[p].completed++;
      break;
    }
  uint64_t svc = (uint64_t)(s->now - r->t_disp);
  if (h->s_win) pp_hist_record(h->s_win, svc);
  h->busy_total_ns += (double)svc;
  h->w_completions++;
  h->w_cpu_sum += (double)r->cpu_ns;
  h->s_completed++;
  s->s_completed++;
  s->finished++;
  s->res->completed++;
  if (s->now <= s->duration) s->res->completed_in_run++;
  if (lat > s->scn->slo_ns) s->excess_ns += (double)(lat - s->scn->slo_ns);
  if (lat > s->scn->client_timeout_ns) s->timed_out++;
  if (s->opt->on_request) {
    pp_cluster_request pr = {seq, hi, r->t_arr, r->t_disp, s->now};
    s->opt->on_request(s->opt->data, &pr);
  }
  h->outstanding--;
  outstanding_changed(s, hi);
  w->busy--;
  h->slots_busy--;
  if (w->state == W_READY) {
    drain_queue(s, hi);
  } else if (w->state == W_RETIRING && w->busy == 0) {
    worker_exit(s, hi, wi);
  }
  if (h->state == H_DRAINING && h->outstanding == 0) host_dead(s, hi);
}

static void on_cpu(csim *s, uint32_t hi, uint32_t wi, uint32_t seq) {
  host *h = &s->h[hi];
  cworker *w = &h->w[wi];
  creq *r = R(s, seq);
  h->cpu_total_ns += (double)r->cpu_ns;
  s->s_cpu_ns += (double)r->cpu_ns;
  w->holder = -1;
  if (w->gq.len) {
    uint32_t next = ring_pop(&w->gq);
    creq *n = R(s, next);
    h->w_gvl_sum += (double)(s->now - n->t_gvl);
    w->holder = next;
    push_ev(s, s->now + (int64_t)n->cpu_ns, EV_CPU, hi, (uint64_t)wi << 32 | next);
  }
  start_io(s, hi, wi, seq);
}

/* ---- workers and hosts ------------------------------------------------------------------- */

static void worker_ready(csim *s, uint32_t hi, uint32_t wi) {
  host *h = &s->h[hi];
  h->w[wi].state = W_READY;
  h->booting_w--;
  h->ready_w++;
  h->slots_ready += h->threads;
  if (h->state == H_READY || h->state == H_DRAINING) drain_queue(s, hi);
}

/* A new worker on host hi: ready now (boot_ns 0) or after boot_ns. */
static void worker_spawn(csim *s, uint32_t hi, int64_t boot_ns) {
  host *h = &s->h[hi];
  uint32_t wi = UINT32_MAX;
  for (uint32_t i = 0; i < h->nw; i++)
    if (h->w[i].state == W_DEAD) {
      wi = i;
      break;
    }
  if (wi == UINT32_MAX) {
    if (h->nw >= s->cores) return; /* one core per worker at most */
    wi = h->nw++;
  }
  account(s);
  cworker *w = &h->w[wi];
  w->gen++;
  w->busy = 0;
  w->holder = -1;
  w->state = W_BOOTING;
  h->booting_w++;
  h->alive_w++;
  s->workers_alive++;
  if (boot_ns <= 0)
    worker_ready(s, hi, wi);
  else
    push_ev(s, s->now + boot_ns, EV_WBOOT, hi, (uint64_t)wi << 32 | w->gen);
}

static void worker_retire(csim *s, uint32_t hi) {
  host *h = &s->h[hi];
  for (uint32_t i = h->nw; i-- > 0;)
    if (h->w[i].state == W_READY) {
      h->w[i].state = W_RETIRING;
      h->ready_w--;
      h->retiring_w++;
      h->slots_ready -= h->threads;
      if (h->w[i].busy == 0) worker_exit(s, hi, i);
      return;
    }
}

/* Samples a host keeps: every scrape inside the longest rate window, plus one. */
static uint32_t samples_cap(const csim *s) {
  return (uint32_t)(s->cc->rate_window_ns / s->cc->scrape_ns) + 2;
}

static uint32_t host_new(csim *s) {
  if (s->nh == s->caph) {
    uint32_t nc = s->caph ? s->caph * 2 : 16;
    host *nh = realloc(s->h, nc * sizeof *nh);
    uint32_t *nr = nh ? realloc(s->rdy, nc * sizeof *nr) : NULL;
    if (nh) s->h = nh;
    if (nr) s->rdy = nr;
    uint32_t *nl = nr ? realloc(s->lh, nc * sizeof *nl) : NULL;
    if (nl) s->lh = nl;
    if (!nh || !nr || !nl) {
      s->oom = 1;
      return UINT32_MAX;
    }
    memset(s->h + s->caph, 0, (nc - s->caph) * sizeof *nh);
    s->caph = nc;
  }
  uint32_t hi = s->nh++;
  host *h = &s->h[hi];
  h->rdy_pos = h->heap_pos = -1;
  h->threads = s->cfg->threads;
  h->w = calloc(s->cores, sizeof *h->w);
  h->smp = calloc(samples_cap(s), sizeof *h->smp);
  if (!h->w || !h->smp) {
    s->oom = 1;
    return UINT32_MAX;
  }
  if (s->cfg->autoscale) {
    h->q_win = hist_new(s);
    h->s_win = hist_new(s);
    pp_ctl_state_init(&h->ctl, &s->policy, s->cfg->workers, s->cfg->threads);
  }
  if (s->opt->keep_hosts) h->q_sec = hist_new(s);
  return hi;
}

static void host_ready(csim *s, uint32_t hi) {
  host *h = &s->h[hi];
  account(s);
  h->state = H_READY;
  s->hosts_booting--;
  s->hosts_ready++;
  for (uint32_t i = 0; i < s->cfg->workers; i++)
    worker_spawn(s, hi, 0);
  if (s->cfg->autoscale) push_ev(s, s->now + (int64_t)s->policy.tick_ns, EV_HTICK, hi, h->gen);
  bal_add(s, hi);
  /* Arrivals that found no ready host wait for the first one. */
  while (s->backlog.len)
    host_arrival(s, hi, ring_pop(&s->backlog));
}

/* Starts a host: ready now (t = 0) or after a start-up time from hosts.boot. */
static void host_start(csim *s, int now_ready) {
  uint32_t hi = host_new(s);
  if (hi == UINT32_MAX) return;
  account(s);
  host *h = &s->h[hi];
  h->state = H_BOOTING;
  s->hosts_booting++;
  if (now_ready) {
    host_ready(s, hi);
    return;
  }
  uint64_t b = pp_dist_draw(&s->scn->hosts.boot, s->hboot_rng);
  push_ev(s, s->now + (int64_t)(b > 0 ? b : 1), EV_HBOOT, hi, h->gen);
}

/* Takes one host out: the newest booting host, else the newest ready one (drained). */
static void host_stop(csim *s) {
  account(s);
  for (uint32_t i = s->nh; i-- > 0;)
    if (s->h[i].state == H_BOOTING) {
      s->h[i].state = H_DEAD;
      s->h[i].gen++;
      s->hosts_booting--;
      return;
    }
  for (uint32_t i = s->nh; i-- > 0;)
    if (s->h[i].state == H_READY) {
      host *h = &s->h[i];
      bal_remove(s, i);
      h->state = H_DRAINING;
      s->hosts_ready--;
      s->hosts_draining++;
      if (h->outstanding == 0) host_dead(s, i);
      return;
    }
}

/* ---- the host's own controller ------------------------------------------------------------ */

static void host_tick(csim *s, uint32_t hi) {
  host *h = &s->h[hi];
  pp_obs_input in;
  memset(&in, 0, sizeof in);
  in.tick = h->tick;
  in.now_ns = s->now;
  in.window_ns = s->policy.tick_ns;
  in.queue_window = h->q_win;
  in.service_window = h->s_win;
  in.service_lifetime = NULL;
  in.queue_len = (uint32_t)h->q.len;
  in.slots_ready = h->slots_ready;
  in.slots_busy = h->slots_busy;
  in.workers_ready = h->ready_w;
  in.workers_booting = h->booting_w;
  in.workers_retiring = h->retiring_w;
  in.threads_per_worker = h->threads;
  in.arrivals = h->w_arrivals;
  in.completions = h->w_completions;
  in.service_cpu_mean_ns =
      h->w_completions ? (int64_t)llround(h->w_cpu_sum / (double)h->w_completions) : PP_UNKNOWN_NS;
  in.gvl_wait_ns = s->scn->gvl_measured && h->w_completions
                       ? (int64_t)llround(h->w_gvl_sum / (double)h->w_completions)
                       : PP_UNKNOWN_NS;
  in.mem_per_worker_bytes =
      (int64_t)(s->scn->mem_worker_bytes + s->scn->mem_thread_bytes * h->threads);
  pp_observation obs;
  if (pp_observation_build(&obs, &in) != 0) {
    s->oom = 1;
    return;
  }
  pp_decision d = pp_decide(&s->policy, &h->ctl, &obs);
  const pp_dist *boot = s->cfg->has_boot ? &s->cfg->boot : &s->scn->boot;
  if (d.action == PP_ACTION_SPAWN_WORKER) {
    for (uint32_t i = 0; i < d.count; i++) {
      uint64_t b = pp_dist_draw(boot, s->wboot_rng);
      worker_spawn(s, hi, b > 0 ? (int64_t)b : 1);
    }
  } else if (d.action == PP_ACTION_RETIRE_WORKER) {
    for (uint32_t i = 0; i < d.count; i++)
      worker_retire(s, hi);
  }
  hist_clear(h->q_win);
  hist_clear(h->s_win);
  h->w_arrivals = h->w_completions = 0;
  h->w_cpu_sum = h->w_gvl_sum = 0;
  h->tick++;
}

/* ---- Prometheus and the cluster autoscaler ------------------------------------------------ */

static void scrape(csim *s) {
  uint32_t cap = samples_cap(s);
  for (uint32_t hi = 0; hi < s->nh; hi++) {
    host *h = &s->h[hi];
    if (h->state != H_READY && h->state != H_DRAINING) continue;
    sample *x;
    if (h->n_smp < cap) {
      x = &h->smp[(h->smp_head + h->n_smp++) % cap];
    } else {
      x = &h->smp[h->smp_head];
      h->smp_head = (h->smp_head + 1) % cap;
    }
    x->t = s->now;
    x->cpu_ns = h->cpu_total_ns;
    x->busy_ns = h->busy_total_ns;
    x->slots_ready = h->slots_ready;
    uint64_t c = 0;
    for (uint32_t b = 0; b < PP_CLUSTER_PROM_BUCKETS; b++)
      x->cum[b] = c += h->prom[b];
  }
}

/* The first and last samples of host h inside (now - window, now]; 0 if fewer than two. */
static int window_samples(const csim *s, const host *h, const sample **first, const sample **last) {
  uint32_t cap = samples_cap(s);
  *first = *last = NULL;
  for (uint32_t i = 0; i < h->n_smp; i++) {
    const sample *x = &h->smp[(h->smp_head + i) % cap];
    if (x->t <= s->now - (int64_t)s->cc->rate_window_ns) continue;
    if (!*first) *first = x;
    *last = x;
  }
  return *first && *last && *first != *last;
}

/* One metric's recommendation at this sync; *seen is the value the query returned. */
static uint32_t metric_recommendation(csim *s, pp_cluster_metric m, double target, uint32_t current,
                                      double *seen) {
  const pp_cluster_cfg *cc = s->cc;
  if (m == PP_CMETRIC_QUEUE) {
    double rate[PP_CLUSTER_PROM_BUCKETS] = {0};
    for (uint32_t hi = 0; hi < s->nh; hi++) {
      const sample *a, *b;
      if (!window_samples(s, &s->h[hi], &a, &b)) continue;
      double dt = (double)(b->t - a->t) / 1e9;
      for (uint32_t k = 0; k < PP_CLUSTER_PROM_BUCKETS; k++)
        rate[k] += (double)(b->cum[k] - a->cum[k]) / dt;
    }
    double v = pp_prom_histogram_quantile(cc->quantile, pp_cluster_prom_bounds, rate,
                                          PP_CLUSTER_PROM_BUCKETS);
    /* No traffic gives NaN; KEDA's Prometheus scaler reads it as 0 (ignoreNullValues). */
    if (isnan(v)) v = 0;
    *seen = v;
    return pp_hpa_replicas(PP_HPA_VALUE, cc->hpa.tolerance, current, s->hosts_ready, v, target);
  }
  if (m == PP_CMETRIC_BUSY) {
    /* sum(rate(puma_plus_service_seconds_sum[w])) / sum(puma_plus_slots_ready) */
    double busy = 0, slots = 0;
    for (uint32_t hi = 0; hi < s->nh; hi++) {
      const host *h = &s->h[hi];
      const sample *a, *b;
      if (!window_samples(s, h, &a, &b)) continue;
      busy += (b->busy_ns - a->busy_ns) / (double)(b->t - a->t);
      if (h->state == H_READY) slots += b->slots_ready;
    }
    double v = slots > 0 ? busy / slots : 0;
    *seen = v;
    return pp_hpa_replicas(PP_HPA_VALUE, cc->hpa.tolerance, current, s->hosts_ready, v, target);
  }
  double sum = 0;
  uint32_t n = 0;
  for (uint32_t hi = 0; hi < s->nh; hi++) {
    const host *h = &s->h[hi];
    const sample *a, *b;
    if (h->state != H_READY || !window_samples(s, h, &a, &b)) continue;
    sum += (b->cpu_ns - a->cpu_ns) / (double)(b->t - a->t) / (double)s->cores;
    n++;
  }
  *seen = n ? sum / n : NAN;
  return n ? pp_hpa_replicas(PP_HPA_UTILIZATION, cc->hpa.tolerance, current, n, sum, target)
           : current;
}

static void hpa_sync(csim *s) {
  const pp_cluster_cfg *cc = s->cc;
  uint32_t current = s->hosts_booting + s->hosts_ready;
  /* With several metrics the HPA takes the largest recommendation (Kubernetes' rule). */
  uint32_t rec = 0;
  for (uint32_t i = 0; i < cc->n_metrics; i++) {
    double seen;
    uint32_t r = metric_recommendation(s, cc->metrics[i], cc->targets[i], current, &seen);
    if (i == 0) s->last_metric = seen;
    if (r > rec) rec = r;
  }
  uint32_t want = pp_hpa_sync(&s->hpa, s->now, current, rec);
  if (want > current) {
    s->res->scale_ups++;
    for (uint32_t i = current; i < want; i++)
      host_start(s, 0);
  } else if (want < current) {
    s->res->scale_downs++;
    for (uint32_t i = want; i < current; i++)
      host_stop(s);
  }
}

/* ---- arrivals and seconds ------------------------------------------------------------------ */

static void schedule_next_arrival(csim *s) {
  if (pp_arrivals_next(&s->arr, &s->pending)) {
    s->have_pending = 1;
    push_ev(s, s->pending.t_ns, EV_ARRIVAL, 0, 0);
  } else {
    s->have_pending = 0;
  }
}

static void on_arrival(csim *s) {
  creq *r = req_new(s);
  if (!r) return;
  uint32_t seq = (uint32_t)s->arrived++;
  r->t_arr = s->pending.t_ns;
  r->t_disp = -1;
  r->cpu_ns = s->pending.cpu_ns;
  r->io_ns = s->pending.io_ns;
  r->status = R_QUEUED;
  r->phase = 0;
  while (r->phase + 1u < s->n_phases && r->t_arr >= s->phase_end[r->phase])
    r->phase++;
  s->res->phases[r->phase].arrivals++;
  s->s_arrivals++;
  schedule_next_arrival(s);
  uint32_t hi = bal_pick(s);
  if (hi == UINT32_MAX) {
    ring_push(s, &s->backlog, seq);
    return;
  }
  host_arrival(s, hi, seq);
}

static void on_second(csim *s) {
  pp_cluster_result *res = s->res;
  if (s->opt->keep_timeline) {
    if (res->timeline_len == s->tl_cap) {
      size_t nc = s->tl_cap ? s->tl_cap * 2 : 256;
      pp_cluster_second *nt = realloc(res->timeline, nc * sizeof *nt);
      if (!nt) {
        s->oom = 1;
        return;
      }
      res->timeline = nt;
      s->tl_cap = nc;
    }
    pp_cluster_second *row = &res->timeline[res->timeline_len++];
    memset(row, 0, sizeof *row);
    row->t_s = s->second;
    row->arrivals = s->s_arrivals;
    row->completed = s->s_completed;
    row->p50_ns = pct(&s->lat_sec, 50);
    row->p99_ns = pct(&s->lat_sec, 99);
    row->queue_p95_ns = s->q_sec.count ? pct(&s->q_sec, 95) : 0;
    row->hosts_ready = s->hosts_ready;
    row->hosts_booting = s->hosts_booting;
    row->hosts_draining = s->hosts_draining;
    row->desired = s->hosts_booting + s->hosts_ready;
    row->workers = s->workers_alive;
    row->queued = s->queued + s->backlog.len;
    row->metric = s->last_metric;
    row->cpu_util = s->hosts_ready ? s->s_cpu_ns / 1e9 / ((double)s->cores * s->hosts_ready) : 0;
  }
  if (s->opt->keep_hosts) {
    for (uint32_t hi = 0; hi < s->nh; hi++) {
      host *h = &s->h[hi];
      if (h->state == H_DEAD) continue;
      if (res->host_rows_len == s->hr_cap) {
        size_t nc = s->hr_cap ? s->hr_cap * 2 : 1024;
        pp_host_second *nr = realloc(res->host_rows, nc * sizeof *nr);
        if (!nr) {
          s->oom = 1;
          return;
        }
        res->host_rows = nr;
        s->hr_cap = nc;
      }
      pp_host_second *row = &res->host_rows[res->host_rows_len++];
      memset(row, 0, sizeof *row);
      row->t_s = s->second;
      row->host = hi;
      row->state = h->state;
      row->completed = h->s_completed;
      row->workers = h->alive_w;
      row->queued = (uint32_t)h->q.len;
      row->outstanding = h->outstanding;
      row->queue_p95_ns = h->q_sec && h->q_sec->count ? pct(h->q_sec, 95) : 0;
      if (h->q_sec) hist_clear(h->q_sec);
    }
  }
  for (uint32_t hi = 0; hi < s->nh; hi++)
    s->h[hi].s_completed = 0;
  hist_clear(&s->lat_sec);
  hist_clear(&s->q_sec);
  s->s_arrivals = s->s_completed = 0;
  s->s_cpu_ns = 0;
  s->second++;
}

/* ---- run --------------------------------------------------------------------------------- */

void pp_cluster_options_default(pp_cluster_options *o, const pp_scenario *scn) {
  memset(o, 0, sizeof *o);
  o->seed = scn->seed;
  o->keep_timeline = 1;
}

void pp_cluster_result_dispose(pp_cluster_result *r) {
  free(r->timeline);
  free(r->host_rows);
  r->timeline = NULL;
  r->host_rows = NULL;
  r->timeline_len = r->host_rows_len = 0;
}

static void csim_free(csim *s) {
  for (uint32_t i = 0; i < s->nh; i++) {
    host *h = &s->h[i];
    if (h->w)
      for (uint32_t k = 0; k < s->cores; k++)
        free(h->w[k].gq.v);
    free(h->w);
    free(h->q.v);
    free(h->smp);
    free(h->q_win);
    free(h->s_win);
    free(h->q_sec);
  }
  free(s->h);
  free(s->rdy);
  free(s->lh);
  free(s->heap.ev);
  free(s->rq);
  free(s->backlog.v);
  free(s->phase_lat);
  if (s->wboot_rng) gsl_rng_free(s->wboot_rng);
  if (s->hboot_rng) gsl_rng_free(s->hboot_rng);
  if (s->bal_rng) gsl_rng_free(s->bal_rng);
  pp_arrivals_dispose(&s->arr);
}

int pp_cluster_run(const pp_scenario *scn, uint32_t ci, const pp_cluster_options *opt,
                   pp_cluster_result *out) {
  memset(out, 0, sizeof *out);
  pp_hist_init(&out->latency);
  pp_hist_init(&out->queue);
  if (!scn->hosts.present || ci >= scn->n_clusters) return PP_SIM_EINVAL;
  pp_cluster_options defaults;
  if (!opt) {
    pp_cluster_options_default(&defaults, scn);
    opt = &defaults;
  }
  csim *s = calloc(1, sizeof *s);
  if (!s) return PP_SIM_ENOMEM;
  s->scn = scn;
  s->cfg = &scn->configs[scn->hosts.config_index];
  s->cc = &scn->clusters[ci];
  s->opt = opt;
  s->res = out;
  s->duration = (int64_t)scn->duration_ns;
  s->cores = scn->hosts.cores ? scn->hosts.cores : scn->cores;
  s->policy = s->cfg->policy;
  if (s->policy.max_workers > s->cores) s->policy.max_workers = s->cores;
  if (s->policy.min_workers > s->policy.max_workers) s->policy.min_workers = s->policy.max_workers;
  s->last_metric = NAN;
  pp_hist_init(&s->lat_sec);
  pp_hist_init(&s->q_sec);
  int rc = pp_arrivals_init(&s->arr, scn, opt->seed);
  if (rc) {
    free(s);
    return rc;
  }
  /* Phases, for the per-phase table (a trace is one phase). */
  s->n_phases = scn->process == PP_ARRIVALS_TRACE || scn->n_phases == 0 ? 1 : scn->n_phases;
  {
    int64_t t = 0;
    for (uint32_t p = 0; p < s->n_phases; p++) {
      out->phases[p].start_s = (double)t / 1e9;
      t += scn->process == PP_ARRIVALS_TRACE || scn->n_phases == 0
               ? s->duration
               : (int64_t)scn->phases[p].duration_ns;
      s->phase_end[p] = t;
      out->phases[p].end_s = (double)t / 1e9;
    }
    s->phase_end[s->n_phases - 1] = s->duration; /* responses after the end are not counted */
    out->n_phases = s->n_phases;
  }
  s->phase_lat = malloc(s->n_phases * sizeof *s->phase_lat);
  s->wboot_rng = gsl_rng_alloc(gsl_rng_mt19937);
  s->hboot_rng = gsl_rng_alloc(gsl_rng_mt19937);
  s->bal_rng = gsl_rng_alloc(gsl_rng_mt19937);
  s->rq_cap = 4096;
  s->rq = malloc(s->rq_cap * sizeof *s->rq);
  if (!s->phase_lat || !s->wboot_rng || !s->hboot_rng || !s->bal_rng || !s->rq) {
    csim_free(s);
    free(s);
    return PP_SIM_ENOMEM;
  }
  for (uint32_t p = 0; p < s->n_phases; p++)
    pp_hist_init(&s->phase_lat[p]);
  uint64_t base = opt->seed * 0x100000001b3ull;
  gsl_rng_set(s->wboot_rng, (uint32_t)pp_splitmix64(base + 3000 + ci));
  gsl_rng_set(s->hboot_rng, (uint32_t)pp_splitmix64(base + 4000 + ci));
  gsl_rng_set(s->bal_rng, (uint32_t)pp_splitmix64(base + 5000 + ci));
  if (s->cc->metric != PP_CMETRIC_NONE) pp_hpa_init(&s->hpa, &s->cc->hpa);

  for (uint32_t i = 0; i < s->cc->count && !s->oom; i++)
    host_start(s, 1);
  schedule_next_arrival(s);
  push_ev(s, 1000000000, EV_SECOND, 0, 0);
  if (s->cc->metric != PP_CMETRIC_NONE) {
    /* Scrapes half a period out of phase with the syncs, as unaligned timers are on average. */
    push_ev(s, (int64_t)(s->cc->scrape_ns / 2), EV_SCRAPE, 0, 0);
    push_ev(s, (int64_t)s->cc->sync_ns, EV_SYNC, 0, 0);
  }
  int64_t hard_stop = s->duration + (int64_t)scn->drain_limit_ns;
  uint64_t events = 0;
  while (s->heap.n && !s->oom) {
    event e = pop_ev(s);
    if (e.t > hard_stop) break;
    s->now = e.t;
    events++;
    switch (e.type) {
    case EV_ARRIVAL: on_arrival(s); break;
    case EV_CPU: on_cpu(s, e.a, (uint32_t)(e.b >> 32), (uint32_t)e.b); break;
    case EV_IO: complete(s, e.a, (uint32_t)(e.b >> 32), (uint32_t)e.b); break;
    case EV_WBOOT: {
      host *h = &s->h[e.a];
      uint32_t wi = (uint32_t)(e.b >> 32);
      if (h->state != H_DEAD && h->w[wi].state == W_BOOTING && h->w[wi].gen == (uint32_t)e.b)
        worker_ready(s, e.a, wi);
      break;
    }
    case EV_HBOOT:
      if (s->h[e.a].state == H_BOOTING && s->h[e.a].gen == e.b) host_ready(s, e.a);
      break;
    case EV_HTICK:
      if (s->h[e.a].state != H_DEAD && s->h[e.a].gen == e.b) {
        host_tick(s, e.a);
        push_ev(s, s->now + (int64_t)s->policy.tick_ns, EV_HTICK, e.a, e.b);
      }
      break;
    case EV_SCRAPE:
      scrape(s);
      push_ev(s, s->now + (int64_t)s->cc->scrape_ns, EV_SCRAPE, 0, 0);
      break;
    case EV_SYNC:
      hpa_sync(s);
      push_ev(s, s->now + (int64_t)s->cc->sync_ns, EV_SYNC, 0, 0);
      break;
    case EV_SECOND:
      on_second(s);
      push_ev(s, s->now + 1000000000, EV_SECOND, 0, 0);
      break;
    }
    if (!s->have_pending && s->finished == s->arrived && s->now >= s->duration &&
        e.type == EV_SECOND)
      break;
  }
  if (s->oom) {
    csim_free(s);
    free(s);
    return PP_SIM_ENOMEM;
  }
  if (s->now < s->duration) s->now = s->duration;
  account(s);
  out->requests = s->arrived;
  out->unfinished = s->arrived - s->finished;
  out->timed_out = s->timed_out + out->unfinished;
  out->duration_s = (double)s->duration / 1e9;
  out->offered_rps = (double)s->arrived / out->duration_s;
  out->achieved_rps = (double)out->completed_in_run / out->duration_s;
  out->p50_ns = pct(&out->latency, 50);
  out->p99_ns = pct(&out->latency, 99);
  out->p999_ns = pct(&out->latency, 99.9);
  out->mean_ns = out->latency.count ? (double)out->latency.sum_ns / (double)out->latency.count : -1;
  out->queue_mean_ns = out->queue.count ? (double)out->queue.sum_ns / (double)out->queue.count : -1;
  out->queue_p99_ns = pct(&out->queue, 99);
  out->excess_latency_ns = s->excess_ns;
  out->host_seconds = s->host_ns / 1e9;
  out->avg_hosts = s->host_ns / (double)s->duration;
  out->avg_workers = s->worker_ns / (double)s->duration;
  out->peak_hosts = s->peak_hosts;
  for (uint32_t p = 0; p < s->n_phases; p++) {
    pp_cluster_phase *ph = &out->phases[p];
    double d = ph->end_s - ph->start_s;
    ph->achieved_rps = d > 0 ? (double)ph->completed / d : 0;
    ph->p50_ns = pct(&s->phase_lat[p], 50);
    ph->p99_ns = pct(&s->phase_lat[p], 99);
  }
  out->events = events;
  csim_free(s);
  free(s);
  return 0;
}
