/* pp_decide(): tiered thresholds with hysteresis, the settled gate, cooldowns, bounds,
 * Little's-law sizing, GVL-gated threads, slots per worker from the workers' CPU share (rule
 * 4b) and a shedding recommendation. docs/CONTROL.md explains each rule and why; the rule
 * order below is the order of that page.
 *
 * Workload: called once per tick (1 s by default) by the server, and millions of times by
 * sweeps in the simulator, so it avoids snprintf and allocation: the reason line is built by
 * the small appender below, into the decision's own buffer. */
#include "control/control.h"

#include <math.h>
#include <string.h>

/* ---- reason builder: bounded appends, always NUL-terminated, truncates silently ---- */

typedef struct line {
  char *buf;
  size_t cap, len;
} line;

static void put(line *l, const char *s) {
  while (*s && l->len + 1 < l->cap)
    l->buf[l->len++] = *s++;
  l->buf[l->len] = '\0';
}

static void put_u64(line *l, uint64_t v) {
  char tmp[24];
  int n = 0;
  do {
    tmp[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  char out[24];
  for (int i = 0; i < n; i++)
    out[i] = tmp[n - 1 - i];
  out[n] = '\0';
  put(l, out);
}

/* v / 10^decimals printed with exactly `decimals` fractional digits. */
static void put_fixed(line *l, uint64_t scaled, int decimals) {
  uint64_t div = 1;
  for (int i = 0; i < decimals; i++)
    div *= 10;
  put_u64(l, scaled / div);
  if (decimals == 0) return;
  put(l, ".");
  uint64_t frac = scaled % div;
  char digits[8];
  for (int i = decimals - 1; i >= 0; i--) {
    digits[i] = (char)('0' + frac % 10);
    frac /= 10;
  }
  digits[decimals] = '\0';
  put(l, digits);
}

/* A duration for people: 850ns, 2.5us, 503ms, 1.23s, 42.1s. */
static void put_dur(line *l, uint64_t ns) {
  if (ns == UINT64_MAX) {
    put(l, "unbounded");
    return;
  }
  uint64_t unit;
  const char *suffix;
  if (ns < 1000) {
    put_u64(l, ns);
    put(l, "ns");
    return;
  } else if (ns < 999500ull) {
    unit = 1000, suffix = "us";
  } else if (ns < 999500000ull) {
    unit = 1000000, suffix = "ms";
  } else {
    unit = 1000000000ull, suffix = "s";
  }
  uint64_t whole = ns / unit;
  int decimals = suffix[0] == 's' ? (whole < 10 ? 2 : whole < 100 ? 1 : 0) : (whole < 10 ? 1 : 0);
  uint64_t div = 1;
  for (int i = 0; i < decimals; i++)
    div *= 10;
  unsigned __int128 scaled = ((unsigned __int128)ns * div + unit / 2) / unit;
  put_fixed(l, (uint64_t)scaled, decimals);
  put(l, suffix);
}

static void put_ratio(line *l, double r) {
  if (!(r >= 0)) r = 0;
  if (r > 999999.0) r = 999999.0;
  put_fixed(l, (uint64_t)(r * 100.0 + 0.5), 2);
}

static void put_count(line *l, uint64_t n, const char *singular, const char *plural) {
  put_u64(l, n);
  put(l, " ");
  put(l, n == 1 ? singular : plural);
}

/* ---- helpers ---- */

static uint64_t elapsed_since(int64_t now, int64_t last) {
  if (last == INT64_MIN) return UINT64_MAX;
  if (now < last) return 0;
  return (uint64_t)now - (uint64_t)last;
}

static uint32_t sat_add32(uint32_t a, uint32_t b) {
  uint32_t r;
  return __builtin_add_overflow(a, b, &r) ? UINT32_MAX : r;
}

static uint64_t mul_clamp(uint64_t v, double f) {
  double x = (double)v * f;
  return x >= 1.8e19 ? UINT64_MAX : (uint64_t)x;
}

void pp_ctl_state_init(pp_ctl_state *s, const pp_policy *p, uint32_t workers, uint32_t threads) {
  memset(s, 0, sizeof *s);
  s->last_spawn_ns = INT64_MIN;
  s->last_retire_ns = INT64_MIN;
  s->last_thread_ns = INT64_MIN;
  s->last_activate_ns = INT64_MIN;
  s->last_slots_ns = INT64_MIN;
  s->workers_wanted = workers;
  s->threads_wanted = threads ? threads : (p ? p->min_threads : 1);
  s->shedding = 0;
}

static const char *const action_names[] = {"none",       "spawn_worker",  "retire_worker",
                                           "add_thread", "remove_thread", "set_slots"};

const char *pp_action_name(pp_action a) {
  if ((unsigned)a < sizeof action_names / sizeof action_names[0]) return action_names[a];
  return "invalid";
}

int pp_action_parse(const char *name, pp_action *out) {
  if (!name) return PP_CTL_EINVAL;
  for (unsigned i = 0; i < sizeof action_names / sizeof action_names[0]; i++) {
    if (strcmp(name, action_names[i]) == 0) {
      if (out) *out = (pp_action)i;
      return 0;
    }
  }
  return PP_CTL_EINVAL;
}

/* What one tick sees, derived once from the observation and policy. */
typedef struct view {
  uint64_t wait;     /* W_pred */
  uint64_t p95;      /* queue p95 (0 when nothing was dispatched) */
  uint64_t target;   /* target queue p95 */
  uint64_t severe;   /* severe threshold */
  uint32_t expected; /* ready + booting */
  uint32_t tpw;      /* threads per worker used for sizing */
  double offered;    /* arrival_rate * S: slots' worth of work arriving */
  double rho;        /* offered / c */
  uint32_t standby;  /* standby workers parked (activatable now) */
  int over_p95, over_wait, breach, severe_now, calm;
} view;

/* The common tail of most reasons: "(predicted 557ms, rho 0.92, 1 worker ready, 0 booting)". */
static void put_context(line *l, const view *v, const pp_observation *o, int with_p95) {
  put(l, " (");
  if (with_p95) {
    put(l, "queue p95 ");
    put_dur(l, v->p95);
    put(l, ", ");
  }
  put(l, "predicted ");
  put_dur(l, v->wait);
  put(l, ", rho ");
  put_ratio(l, v->rho);
  put(l, ", ");
  put_count(l, o->workers_ready, "worker", "workers");
  put(l, " ready, ");
  put_u64(l, o->workers_booting);
  put(l, " booting)");
}

/* "queue p95 503ms over target 50ms for 2 ticks" or the predicted-wait form. */
static void put_breach(line *l, const view *v, uint32_t ticks) {
  /* Name the signal that crossed the threshold the line names: a severe breach can come from
   * the predicted wait while queue p95 is only over target ("p95 140ms over severe 200ms"
   * would be false). */
  int use_p95 = v->severe_now ? v->p95 > v->severe : v->over_p95;
  if (use_p95) {
    put(l, "queue p95 ");
    put_dur(l, v->p95);
  } else {
    put(l, "predicted wait ");
    put_dur(l, v->wait);
  }
  put(l, v->severe_now ? " over severe " : " over target ");
  put_dur(l, v->severe_now ? v->severe : v->target);
  put(l, " for ");
  put_count(l, ticks, "tick", "ticks");
}

static void put_action(line *l, pp_action a, uint32_t count) {
  put(l, pp_action_name(a));
  if (a != PP_ACTION_NONE) {
    put(l, " x");
    put_u64(l, count);
  }
  put(l, ": ");
}

/* CPU per request, ns, or -1: the workers' own per-request figure (RESPONSE_END's thread CPU)
 * when they report it, else the process's CPU over the tick per completion. The latter also
 * counts what is not a request's (slots starting, GC of other threads), and with few
 * completions in a tick (a closed-loop load right after slots grew) it overstated c
 * several-fold, so the CPU bound S / c read 22 slots for a worker at 3% of a core. Fiber slots
 * report no per-request CPU (their thread's clock counts the other fibers'): theirs is the
 * latter. Rule 4b's c and rule 8's cores bound both read this. */
static double cpu_per_request(const pp_observation *o) {
  return o->service_cpu_mean_ns >= 0  ? (double)o->service_cpu_mean_ns
         : o->cpu_per_request_ns >= 0 ? (double)o->cpu_per_request_ns
                                      : -1;
}

/* The capacity bound on workers: max_workers, then cores (when the CPU share of service is
 * measured), then memory (when RSS per worker is measured). *why names the binding one. */
static uint32_t worker_cap(const pp_policy *p, const pp_observation *o, const view *v,
                           const char **why) {
  uint32_t cap = p->max_workers;
  *why = "max_workers";
  double c_req = cpu_per_request(o);
  if (p->cores > 0 && c_req >= 0 && o->service_mean_ns > 0) {
    double share = c_req / (double)o->service_mean_ns;
    if (share > 1) share = 1;
    /* A busy worker keeps at most one core (the GVL) and at most tpw * share of one; a worker
     * of Ractor slots (a GVL each) up to the machine's cores. Where the workers' CPU demand is
     * measured (rule 4b's signal: CPU time plus run-queue wait), the busiest one's share is what
     * a worker takes now: on a machine shared with other work, run-queue wait stretches S, so
     * tpw * c / S reads a fraction of the core a GVL-bound worker in fact demands, and the bound
     * let 3-8 processes fork on 2 cores. */
    double per_worker = (double)v->tpw * share;
    if (o->cpu_workers > 0 && o->cpu_share_max > per_worker) per_worker = o->cpu_share_max;
    double per_max = o->ractor_cores ? (double)o->ractor_cores : 1;
    if (per_worker > per_max) per_worker = per_max;
    if (per_worker > 0) {
      double by_cores = floor((double)p->cores / per_worker);
      if (by_cores < (double)cap) {
        cap = by_cores < 1 ? 1 : (uint32_t)by_cores;
        *why = "cores";
      }
    }
  }
  if (p->memory_limit_bytes > 0 && o->mem_per_worker_bytes > 0) {
    /* The standby pool's memory is reserved: serving workers get what is left. */
    int64_t by_mem = p->memory_limit_bytes / o->mem_per_worker_bytes - (int64_t)p->standby;
    if (by_mem < (int64_t)cap) {
      cap = by_mem < 1 ? 1 : (uint32_t)by_mem;
      *why = "memory_limit";
    }
  }
  return cap;
}

/* "cores bound of 2 workers": the worker cap and what binds it (worker_cap's *why). */
static void put_cap(line *l, const char *why, uint32_t cap) {
  put(l, why);
  put(l, " bound of ");
  put_count(l, cap, "worker", "workers");
}

/* Workers needed: enough slots to carry the offered load at target utilisation, plus enough
 * to drain the backlog L within a drain horizon (the longer of a tick and the spawn
 * cooldown, the soonest the controller could correct itself). Little's law both ways. */
static double workers_needed(const pp_policy *p, const pp_observation *o, const view *v,
                             uint32_t tpw) {
  double horizon = (double)(p->spawn_cooldown_ns > p->tick_ns ? p->spawn_cooldown_ns : p->tick_ns);
  double drain = (double)o->queue_len * (double)o->service_mean_ns / horizon;
  double slots = v->offered / p->target_utilisation + drain;
  double w = ceil(slots / (double)tpw);
  return w > 1e9 ? 1e9 : w;
}

static uint32_t min32(uint32_t a, uint32_t b) {
  return a < b ? a : b;
}

/* ---- slots per worker (rule 4b) ---- */

/* A share as a percentage, "8%", "97%", "180%", at most max (a bound against overflow). */
static void put_pct_upto(line *l, double share, double max) {
  if (!(share >= 0)) share = 0;
  if (share > max) share = max;
  put_u64(l, (uint64_t)(share * 100.0 + 0.5));
  put(l, "%");
}

/* A share of one core as a percentage: "8%", "97%". */
static void put_pct(line *l, double share) {
  put_pct_upto(l, share, 99.0);
}

/* "set_slots 5->40: " */
static void put_slots_action(line *l, uint32_t from, uint32_t to) {
  put(l, "set_slots ");
  put_u64(l, from);
  put(l, "->");
  put_u64(l, to);
  put(l, ": ");
}

/* "workers at 8% of a core (max 9%)" */
static void put_cpu(line *l, const pp_observation *o) {
  put(l, "workers at ");
  put_pct(l, o->cpu_share_mean);
  put(l, " of a core (max ");
  put_pct(l, o->cpu_share_max);
  put(l, ")");
  if (o->ractor_cores) {
    /* Ractor slots: a GVL each, so what bounds them is the machine's cores, not one core. */
    put(l, ", Ractor slots: ");
    put_pct(l, o->cpu_share_mean * (double)o->cpu_workers);
    put(l, " of ");
    put_u64(l, o->ractor_cores);
    put(l, " cores");
  }
}

/* What rule 4b needs, derived once per tick. */
typedef struct slots_view {
  int known;        /* the CPU share and the CPU per request are measured, S > 0 */
  int settled;      /* every ready worker has its slots connected */
  int cooled;       /* slots.cooldown has passed since the last set_slots */
  double c_req;     /* CPU per request, ns */
  uint32_t n_cpu;   /* the CPU bound: slots per worker whose full occupancy fills one core
                       (Ractor slots: the worker's share of the machine's cores) */
  uint32_t workers; /* workers sizing divides by (ready + booting, at least 1) */
  double cores;     /* cores one worker's slots can fill: 1 (one GVL), or for Ractor slots the
                       machine's cores shared among the workers */
} slots_view;

static double clampd(double x, double lo, double hi) {
  return x < lo ? lo : x > hi ? hi : x;
}

static slots_view slots_derive(const pp_policy *p, const pp_ctl_state *st, const pp_observation *o,
                               const view *v) {
  slots_view sv;
  memset(&sv, 0, sizeof sv);
  sv.c_req = cpu_per_request(o);
  sv.known = p->slots_enabled && o->cpu_workers > 0 && o->cpu_share_max >= 0 &&
             o->service_mean_ns > 0 && sv.c_req >= 0;
  sv.settled = (uint64_t)o->slots_ready >= (uint64_t)o->workers_ready * v->tpw;
  sv.cooled = elapsed_since(o->time_ns, st->last_slots_ns) >= p->slots_cooldown_ns;
  sv.workers = v->expected ? v->expected : 1;
  sv.cores = 1;
  if (o->ractor_cores) sv.cores = clampd((double)o->ractor_cores / (double)sv.workers, 1, 1e9);
  /* A busy slot keeps its worker at c_req / S of a core; S / c_req of them would fill the
   * core (the GVL) only if their CPU never overlapped. Their CPU comes at random, so at S /
   * c_req the GVL idles at times while requests wait in the queue for a slot: the bound is
   * S / (c_req x slots.cpu_target), the slots whose demand is 1 / cpu_target of a core. More
   * than that queue at the GVL. Ractor slots hold a GVL each: cores times as many fill the
   * worker's share of the machine. */
  double n_cpu =
      sv.c_req > 0 ? sv.cores * (double)o->service_mean_ns / (sv.c_req * p->slots_cpu_target) : 1e9;
  sv.n_cpu = (uint32_t)clampd(floor(n_cpu), 1, 1e9);
  return sv;
}

/* The CPU leaves more slots nothing to run on. Thread and fiber slots: the busiest worker is
 * at slots.cpu_target of its one core (its GVL). Ractor slots: the workers together are at
 * slots.cpu_target of the machine's cores (each slot has its own GVL, so one core is not a
 * bound; the cores are). */
static int slots_cpu_full(const pp_policy *p, const pp_observation *o) {
  if (o->ractor_cores)
    return o->cpu_share_mean * (double)o->cpu_workers >=
           p->slots_cpu_target * (double)o->ractor_cores;
  return o->cpu_share_max >= p->slots_cpu_target;
}

/* Slots per worker that carry the offered load at target utilisation and drain the backlog
 * within the horizon max(tick, slots.cooldown): Little's law, per worker. */
static uint32_t slots_needed(const pp_policy *p, const pp_observation *o, const view *v,
                             const slots_view *sv) {
  double horizon = (double)(p->slots_cooldown_ns > p->tick_ns ? p->slots_cooldown_ns : p->tick_ns);
  double drain = (double)o->queue_len * (double)o->service_mean_ns / horizon;
  double slots = v->offered / p->target_utilisation + drain;
  return (uint32_t)clampd(ceil(slots / (double)sv->workers), 1, 1e9);
}

static void slots_set(pp_decision *d, pp_ctl_state *st, int64_t now, uint32_t n) {
  d->action = PP_ACTION_SET_SLOTS;
  d->count = n;
  st->threads_wanted = n;
  st->last_slots_ns = now;
}

/* slots.rule gradient (Netflix Gradient2 / Envoy adaptive concurrency, per worker):
 * min(1, max(0.5, tolerance x base / S)), the tolerance being slots.inflation. */
static double slots_gradient(const pp_policy *p, const pp_ctl_state *st, const pp_observation *o) {
  if (!st->svc_base_ns || !o->service_mean_ns) return 1;
  return clampd(p->slots_inflation * (double)st->svc_base_ns / (double)o->service_mean_ns, 0.5, 1);
}

/* "gradient 0.75 (service 200ms, base 100ms)": the grow and take-back reasons' shared part. */
static void put_gradient(line *l, const pp_policy *p, const pp_ctl_state *st,
                         const pp_observation *o) {
  put(l, "gradient ");
  put_ratio(l, slots_gradient(p, st, o));
  put(l, " (service ");
  put_dur(l, o->service_mean_ns);
  put(l, ", base ");
  put_dur(l, st->svc_base_ns);
  put(l, ")");
}

/* Slots per worker rule 4b would grow to on a breach, or 0 (no growth: processes instead). */
static uint32_t slots_grow_target(const pp_policy *p, const pp_ctl_state *st,
                                  const pp_observation *o, const view *v, const slots_view *sv,
                                  int gradient) {
  if (!sv->known || !sv->settled || !sv->cooled || v->tpw >= p->max_slots) return 0;
  double n;
  if (gradient) {
    double g = slots_gradient(p, st, o);
    if (g < 1) return 0;
    n = floor((double)v->tpw * g + sqrt((double)v->tpw));
  } else {
    if (slots_cpu_full(p, o)) return 0; /* GVL- (or, Ractors, core-) bound: processes */
    /* Where Ruby measures GVL wait (>= 3.2), a wait at threads.gvl_wait_max says the same.
     * Unknown (-1, Ruby 3.1) is not zero: it neither allows nor forbids; the CPU share decides. */
    if (o->gvl_wait_ns >= 0 && (uint64_t)o->gvl_wait_ns >= p->gvl_wait_max_ns) return 0;
    n = (double)slots_needed(p, o, v, sv);
    /* Ractor slots with cores to spare: a confirmed breach buys at least one more slot (10 ms
     * and a third of a MB) before a fork (seconds and tens of MB), even when Little's law finds
     * the slots enough (a breach near the target, or CPU-bound work queueing). */
    if (o->ractor_cores && n <= (double)v->tpw) n = (double)v->tpw + 1;
    /* Thread and fiber slots with the CPU to spare: at least a slot for each queued request
     * (microseconds away). The arrival rate of a window that began before a step lags it, and
     * the drain term assumes a slot turns over many times within the horizon, so Little's law
     * alone sized the step's first tick at 4 -> 5 slots with 11 queued, and the slots' cooldown
     * then held the queue for a second (measured on step12-2core, p99 4x the peak static's),
     * or found the slots enough and forked a process. */
    if (!o->ractor_cores && o->queue_len > 0) {
      double q = (double)v->tpw + ceil((double)o->queue_len / (double)sv->workers);
      if (q > n) n = q;
    }
    if (n > (double)sv->n_cpu) n = sv->n_cpu;
  }
  if (st->slots_ceiling && n > (double)st->slots_ceiling) n = st->slots_ceiling;
  if (n > (double)p->max_slots) n = p->max_slots;
  if (n < (double)p->min_slots) n = p->min_slots;
  return (uint32_t)n;
}

/* Off a breach: slots per worker rule 4b takes back, or 0. Only what it added (down to
 * slots_base), never below slots.min: after calm_ticks calm ticks, and once processes added
 * since the last slot change have connected (little), to twice what Little's law needs per
 * worker (when that is a clear excess, over 1.5x); when a worker is at its CPU target with
 * more slots than the CPU can use (little); when service time inflated past the tolerance
 * (gradient). *why names which. */
static uint32_t slots_shrink_target(const pp_policy *p, const pp_ctl_state *st,
                                    const pp_observation *o, const view *v, const slots_view *sv,
                                    int gradient, const char **why) {
  if (!sv->known || !sv->settled || !sv->cooled || !st->slots_base) return 0;
  uint32_t floor_n = st->slots_base > p->min_slots ? st->slots_base : p->min_slots;
  if (v->tpw <= floor_n) return 0;
  double n = 0;
  if (v->calm && st->calm_ticks >= p->calm_ticks) {
    n = 2.0 * ceil(v->offered / p->target_utilisation / (double)sv->workers);
    /* Hysteresis: only a clear excess (over 1.5x that) is taken back, not every tick's jitter. */
    if ((double)v->tpw <= 1.5 * n && n > (double)floor_n) return 0;
    *why = "calm";
  } else if (!gradient && o->workers_booting == 0 &&
             (st->last_spawn_ns > st->last_slots_ns || st->last_activate_ns > st->last_slots_ns)) {
    n = 2.0 * ceil(v->offered / p->target_utilisation / (double)sv->workers);
    if ((double)v->tpw <= 1.5 * n) return 0;
    *why = "processes";
  } else if (gradient && o->completions) {
    double g = slots_gradient(p, st, o);
    if (g >= 1) return 0;
    n = floor((double)v->tpw * g + sqrt((double)v->tpw));
    *why = "gradient";
  } else if (!gradient && slots_cpu_full(p, o) && sv->n_cpu < v->tpw) {
    n = sv->n_cpu;
    *why = "cpu";
  } else {
    return 0;
  }
  if (n < (double)floor_n) n = floor_n;
  return n < (double)v->tpw ? (uint32_t)n : 0;
}

/* The cut: slots per worker rule 4b takes from a GVL-bound worker that it did not add (the
 * configured ones, `-threads 5`), or 0. A worker at its CPU target gains nothing from slots
 * whose requests wait for its one GVL, and they cost the tail: a request then waits at the
 * GVL, where no order holds, instead of in the queue, first in first out (measured on
 * /mix/17/0: 2 x 5 slots, p99 1.37x the static 2 x 1's). On Ruby 3.1 no signal tells GVL wait
 * from I/O wait (both are time off the CPU inside S), so the cut halves and is judged: if the
 * CPU then idles below its target, the slots were waiting on I/O and the cut is reverted
 * (slots_floor). Only when every worker is at the target (the mean, not only the busiest),
 * rule 4b has added nothing to take back (slots_base) and no change awaits judgement; never
 * under slots.min or the floor; not for Ractor slots (a GVL each) or the gradient rule. */
static uint32_t slots_cut_target(const pp_policy *p, const pp_ctl_state *st,
                                 const pp_observation *o, const view *v, const slots_view *sv,
                                 int gradient) {
  if (!p->slots_cut || gradient || !sv->known || !sv->settled || !sv->cooled || o->ractor_cores)
    return 0;
  if (st->slots_base || st->slots_from || st->slots_cut_from) return 0;
  if (!slots_cpu_full(p, o) || !(o->cpu_share_mean >= p->slots_cpu_target)) return 0;
  uint32_t floor_n = st->slots_floor > p->min_slots ? st->slots_floor : p->min_slots;
  if (v->tpw <= floor_n) return 0;
  uint32_t n = v->tpw / 2 + v->tpw % 2;
  if (n < floor_n) n = floor_n;
  return n < v->tpw ? n : 0;
}

/* The cut's reason after its action: "workers at 97% of a core (max 99%) at or over
 * slots.cpu_target 80%: slots wait for the GVL, not in the queue; halved, judged in 1.00s". */
static void put_cut(line *l, const pp_policy *p, const pp_observation *o) {
  put_cpu(l, o);
  put(l, " at or over slots.cpu_target ");
  put_pct(l, p->slots_cpu_target);
  put(l, ": slots wait for the GVL, not in the queue; halved, judged in ");
  put_dur(l, p->slots_cooldown_ns);
}

/* "; 2 from standby, 4 forked": how a spawn that used the standby pool was made up. */
static void put_standby_split(line *l, uint32_t activated, uint32_t forked) {
  if (!activated) return;
  put(l, "; ");
  put_u64(l, activated);
  put(l, " from standby, ");
  put_u64(l, forked);
  put(l, " forked");
}

/* ---- the standby pool behind the slots (rule 6a, standby_cover) ---- */

enum {
  STANDBY_UNMEASURED =
      -1,              /* closed: no CPU per request yet, so nothing says slots cannot carry it */
  STANDBY_CLOSED = 0,  /* closed: slots could carry standby_cover x the load */
  STANDBY_CPU = 1,     /* open: the load's CPU per worker x standby_cover reaches the target */
  STANDBY_SLOTS = 2,   /* open: slots are at their bound (slots.max or the CPU bound) */
  STANDBY_NOSLOTS = 3, /* open: slots.enabled is false, processes are the only actuator */
  STANDBY_ALWAYS = 4,  /* standby_cover 0: the pool is always kept (every earlier release) */
};

/* The share of a core the arriving load's CPU needs per worker: arrival_rate x CPU per request
 * (the requests' own thread CPU), spread over the workers (a Ractor worker's share of the
 * cores). Not the workers' measured CPU demand: that counts run-queue wait, and on a shared
 * machine it read 4-78% of a core per tick for a load needing 6% (pp-bench, step12-2core). */
static double standby_load(const pp_observation *o, const slots_view *sv) {
  return o->arrival_rate * sv->c_req / 1e9 / (double)sv->workers / sv->cores;
}

/* With standby_cover F > 0 the pool is kept only while slots alone could not carry F times
 * today's load: a worker whose load needs u of a core absorbs a step of cpu_target / u by
 * growing slots, so an I/O-leaning app (u small) parks nothing and a CPU-heavy one keeps its
 * pool. */
static int standby_gate(const pp_policy *p, const pp_observation *o, const view *v,
                        const slots_view *sv) {
  if (!p->slots_enabled) return STANDBY_NOSLOTS;
  if (!sv->known || !(sv->c_req > 0)) return STANDBY_UNMEASURED;
  if (standby_load(o, sv) * p->standby_cover >= p->slots_cpu_target) return STANDBY_CPU;
  /* Slots that cannot grow (slots.max, or the CPU bound: a CPU-only app's is 1) carry a step
   * only as far as they are idle: open when F x the load's busy slots (Little's law, per
   * worker) would fill them past target_utilisation. */
  if (v->tpw >= min32(p->max_slots, sv->n_cpu) &&
      v->offered / (double)sv->workers * p->standby_cover >= p->target_utilisation * (double)v->tpw)
    return STANDBY_SLOTS;
  return STANDBY_CLOSED;
}

/* "load 6% of a core per worker (30.00 rps x 2.0ms CPU), x4.00 = 24%" */
static void put_standby_load(line *l, const pp_policy *p, const pp_observation *o,
                             const slots_view *sv) {
  double u = standby_load(o, sv);
  put(l, "load ");
  put_pct_upto(l, u, 1e6);
  put(l, " of a core per worker (");
  put_ratio(l, o->arrival_rate);
  put(l, " rps x ");
  put_dur(l, (uint64_t)sv->c_req);
  put(l, " CPU), x");
  put_ratio(l, p->standby_cover);
  put(l, " = ");
  put_pct_upto(l, u * p->standby_cover, 1e6);
}

/* "; standby 0 of 2: load 6% of a core per worker (...), x4.00 = 24% under slots.cpu_target
 * 80%" */
static void put_standby_held(line *l, const pp_policy *p, const pp_observation *o,
                             const slots_view *sv, uint32_t have, int gate) {
  put(l, "; standby ");
  put_u64(l, have);
  put(l, " of ");
  put_u64(l, p->standby);
  if (gate == STANDBY_UNMEASURED) {
    put(l, ": CPU per request not measured yet");
    return;
  }
  put(l, ": ");
  put_standby_load(l, p, o, sv);
  put(l, " under slots.cpu_target ");
  put_pct(l, p->slots_cpu_target);
}

/* " (load 45% of a core per worker (...), x4.00 = 180% at or over slots.cpu_target 80%)" */
static void put_standby_open(line *l, const pp_policy *p, const pp_observation *o, const view *v,
                             const slots_view *sv, int gate) {
  if (gate == STANDBY_NOSLOTS) {
    put(l, " (slots.enabled is false)");
    return;
  }
  put(l, " (");
  if (gate == STANDBY_CPU) {
    put_standby_load(l, p, o, sv);
    put(l, " at or over slots.cpu_target ");
    put_pct(l, p->slots_cpu_target);
  } else {
    put(l, "slots at their bound of ");
    put_u64(l, min32(p->max_slots, sv->n_cpu));
    put(l, "; x");
    put_ratio(l, p->standby_cover);
    put(l, " the load keeps ");
    put_ratio(l, v->offered / (double)sv->workers * p->standby_cover);
    put(l, " busy, over target_utilisation ");
    put_pct(l, p->target_utilisation);
  }
  put(l, ")");
}

/* "; standby 3 of 4: room for 3 under the cores bound of 8 workers (5 expected)" */
static void put_standby_room(line *l, const pp_policy *p, const pp_ctl_state *st, uint32_t cap,
                             const char *cap_why, uint32_t want) {
  put(l, "; standby ");
  put_u64(l, want);
  put(l, " of ");
  put_u64(l, p->standby);
  put(l, ": room for ");
  put_u64(l, cap > st->workers_wanted ? cap - st->workers_wanted : 0);
  put(l, " under the ");
  put_cap(l, cap_why, cap);
  put(l, " (");
  put_u64(l, st->workers_wanted);
  put(l, " expected)");
}

static int policy_ok(const pp_policy *p, line *l) {
  if (pp_policy_validate(p, NULL) == 0) return 1;
  pp_policy_error e;
  pp_policy_validate(p, &e);
  put(l, "none: invalid policy: ");
  put(l, e.field);
  put(l, " ");
  put(l, e.message);
  return 0;
}

pp_decision pp_decide(const pp_policy *p, pp_ctl_state *st, const pp_observation *o) {
  pp_decision d;
  memset(&d, 0, sizeof d);
  d.action = PP_ACTION_NONE;
  line l = {d.reason, sizeof d.reason, 0};
  d.reason[0] = '\0';
  if (!p || !st || !o) {
    put(&l, "none: invalid input: policy, state and observation are required");
    if (st) d.workers_target = st->workers_wanted, d.shed = st->shedding;
    return d;
  }
  d.shed_budget_ns = pp_policy_shed_budget_ns(p);
  d.workers_target = st->workers_wanted;
  d.shed = st->shedding;
  if (!policy_ok(p, &l)) return d;
  if (!isfinite(o->arrival_rate) || o->arrival_rate < 0) {
    put(&l, "none: invalid observation: arrival_rate is negative or not finite");
    return d;
  }

  /* Reconcile: the observation is the truth about workers that exist or are coming. */
  view v;
  v.expected = sat_add32(o->workers_ready, o->workers_booting);
  st->workers_wanted = v.expected;
  st->standby_wanted = sat_add32(o->workers_standby, o->workers_standby_booting);
  v.standby = o->workers_standby;
  if (o->threads_per_worker) st->threads_wanted = o->threads_per_worker;
  v.tpw =
      o->threads_per_worker ? o->threads_per_worker : (st->threads_wanted ? st->threads_wanted : 1);

  v.wait = pp_observation_predicted_wait(o);
  v.p95 = o->queue_count ? o->queue_p95_ns : 0;
  v.target = p->target_queue_p95_ns;
  v.severe = mul_clamp(v.target, p->severe_factor);
  v.offered = o->arrival_rate * (double)o->service_mean_ns / 1e9;
  v.rho = o->slots_ready ? v.offered / (double)o->slots_ready : 0;
  if (!isfinite(v.rho)) v.rho = 0;
  v.over_p95 = v.p95 > v.target;
  v.over_wait = v.wait > v.target;
  v.breach = v.over_p95 || v.over_wait;
  v.severe_now = v.p95 > v.severe || v.wait > v.severe;
  v.calm = !v.breach && o->queue_len == 0 && o->slots_ready > 0 &&
           v.p95 <= mul_clamp(v.target, p->calm_fraction) &&
           (double)o->slots_busy < p->calm_utilisation * (double)o->slots_ready;
  d.predicted_wait_ns = v.wait;
  d.rho = v.rho;

  /* Hysteresis counters: consecutive breach ticks, consecutive calm ticks. The band between
   * calm and breach resets both, so a signal hovering around the target never retires. */
  if (v.breach) {
    st->breach_ticks = sat_add32(st->breach_ticks, 1);
    st->calm_ticks = 0;
  } else if (v.calm) {
    st->calm_ticks = sat_add32(st->calm_ticks, 1);
    st->breach_ticks = 0;
  } else {
    st->breach_ticks = 0;
    st->calm_ticks = 0;
  }
  /* A calm period clears the floor a reverted cut set (rule 4b's cut may probe again). */
  if (st->calm_ticks >= p->calm_ticks) st->slots_floor = 0;

  /* Shedding recommendation, with its own hysteresis: on above the budget, off at half. */
  int shed_before = st->shedding;
  if (!p->shed_enabled) {
    st->shedding = 0;
  } else if (v.wait != UINT64_MAX) {
    if (!st->shedding && v.wait > pp_policy_shed_budget_ns(p))
      st->shedding = 1;
    else if (st->shedding && v.wait <= pp_policy_shed_budget_ns(p) / 2)
      st->shedding = 0;
  }

  int64_t now = o->time_ns;
  const char *cap_why;
  uint32_t cap = worker_cap(p, o, &v, &cap_why);
  int gvl_known = o->gvl_wait_ns >= 0;
  slots_view sv = slots_derive(p, st, o, &v);
  uint32_t slot_shrink = 0;
  const char *shrink_why = "";
  int gradient = p->slots_rule == PP_SLOTS_RULE_GRADIENT;
  /* Gradient: the baseline service time follows the window's mean down at once, up slowly. */
  if (gradient && p->slots_enabled && o->completions && o->service_mean_ns) {
    if (!st->svc_base_ns || o->service_mean_ns < st->svc_base_ns)
      st->svc_base_ns = o->service_mean_ns;
    else
      st->svc_base_ns += (o->service_mean_ns - st->svc_base_ns) / 64;
  }
  /* Rule 4b's judgement of its last increase, once it has settled: did service time inflate? */
  int judge = !gradient && st->slots_from && sv.settled && sv.cooled && o->completions &&
              o->service_mean_ns && p->slots_enabled;
  /* Inflated: service time grew past slots.inflation and the slots' capacity (slots / S, by
   * Little's law) grew by under 20%: the extra slots wait on the GVL instead of serving. */
  double svc_ratio =
      st->slots_svc_before_ns ? (double)o->service_mean_ns / (double)st->slots_svc_before_ns : 0;
  double slot_ratio = st->slots_from ? (double)v.tpw / (double)st->slots_from : 0;
  int inflated = judge && svc_ratio > p->slots_inflation && slot_ratio < 1.2 * svc_ratio;
  if (judge && !inflated) st->slots_from = 0; /* kept */
  /* Rule 4b's judgement of its last cut, likewise: did the CPU fall under its target? */
  int cut_judge =
      !gradient && st->slots_cut_from && sv.known && sv.settled && sv.cooled && o->completions;
  /* Starved: the busiest worker fell under the CPU target, or by a tenth of its share before
   * the cut, counted at most one core (a worker that was exactly at its core with all its
   * slots would otherwise lose a fifth of its throughput unseen, at 80%; its demand reads over
   * one core on a machine shared with other work, run-queue wait included). */
  double cut_keep = (st->slots_cut_share < 1 ? st->slots_cut_share : 1) * 0.9;
  if (cut_keep < p->slots_cpu_target) cut_keep = p->slots_cpu_target;
  int cut_starved = cut_judge && !(o->cpu_share_max >= cut_keep);
  if (cut_judge) {
    if (!cut_starved) st->slots_cut_from = 0; /* kept */
    st->slots_cut_share = 0;
  }
  uint32_t slot_cut = 0;

  if (inflated) {
    uint32_t back = st->slots_from;
    slots_set(&d, st, now, back);
    put_slots_action(&l, v.tpw, back);
    put(&l, "service mean ");
    put_dur(&l, o->service_mean_ns);
    put(&l, " is ");
    put_ratio(&l, (double)o->service_mean_ns / (double)st->slots_svc_before_ns);
    put(&l, "x the ");
    put_dur(&l, st->slots_svc_before_ns);
    put(&l, " before the increase from ");
    put_u64(&l, back);
    put(&l, " (over slots.inflation ");
    put_ratio(&l, p->slots_inflation);
    put(&l, ") for ");
    put_ratio(&l, slot_ratio);
    put(&l, "x the slots; ");
    if (sv.known) put_cpu(&l, o), put(&l, "; ");
    put(&l, "slots capped at ");
    put_u64(&l, back);
    put(&l, ", processes next");
    st->slots_ceiling = back;
    st->slots_from = 0;
  } else if (cut_starved) {
    uint32_t back = st->slots_cut_from;
    slots_set(&d, st, now, back);
    put_slots_action(&l, v.tpw, back);
    put_cpu(&l, o);
    put(&l, " under ");
    put_pct(&l, cut_keep);
    put(&l, " after the cut from ");
    put_u64(&l, back);
    put(&l, ": the slots waited on I/O, not on the GVL; no cut under ");
    put_u64(&l, back);
    put(&l, " until calm");
    st->slots_floor = back;
    st->slots_cut_from = 0;
  } else if (v.expected < p->min_workers) {
    /* Bounds: the floor. Forks are still behind the settled gate; standby workers are not
     * (they serve within a tick), and are used first. */
    uint32_t deficit = p->min_workers - v.expected;
    uint32_t act = min32(deficit, v.standby);
    if (o->workers_booting > 0 && act == 0) {
      put_action(&l, PP_ACTION_NONE, 0);
      put_count(&l, v.expected, "worker", "workers");
      put(&l, " below min_workers but ");
      put_count(&l, o->workers_booting, "worker", "workers");
      put(&l, " still booting");
    } else {
      uint32_t forks = o->workers_booting > 0 ? 0 : deficit - act;
      d.action = PP_ACTION_SPAWN_WORKER;
      d.count = act + forks;
      d.activate = act;
      st->workers_wanted = v.expected + d.count;
      if (forks) st->last_spawn_ns = now;
      if (act) st->last_activate_ns = now;
      put_action(&l, d.action, d.count);
      put_count(&l, v.expected, "worker", "workers");
      put(&l, " below min_workers ");
      put_u64(&l, p->min_workers);
      put_context(&l, &v, o, 1);
      put_standby_split(&l, act, forks);
    }
  } else if (v.expected > p->max_workers && o->workers_ready > 0) {
    /* Bounds: the ceiling (a policy reload lowered max_workers). One at a time. */
    d.action = PP_ACTION_RETIRE_WORKER;
    d.count = 1;
    st->workers_wanted = v.expected - 1;
    st->last_retire_ns = now;
    put_action(&l, d.action, 1);
    put_count(&l, v.expected, "worker", "workers");
    put(&l, " above max_workers ");
    put_u64(&l, p->max_workers);
  } else if (v.breach) {
    int threads_ok = p->threads_enabled && gvl_known &&
                     (uint64_t)o->gvl_wait_ns < p->gvl_wait_max_ns && v.tpw < p->max_threads &&
                     elapsed_since(now, st->last_thread_ns) >= p->spawn_cooldown_ns;
    uint64_t spawn_wait = elapsed_since(now, st->last_spawn_ns);
    /* Rule 6a, behind the slots (standby_cover > 0): an activation starts the forks'
     * cooldown too. The workers it added serve within a tick, but the window that follows
     * still holds the backlog from before them (dead time, rule 5); a fork made on it arrives
     * seconds later, after the backlog has drained, and stays. Activations are not held. */
    int act_cool = 0;
    if (p->standby_cover > 0 && elapsed_since(now, st->last_activate_ns) < spawn_wait) {
      spawn_wait = elapsed_since(now, st->last_activate_ns);
      act_cool = 1;
    }
    /* Rule 4b: while slots can still grow, a worker's slots are counted at what they can grow
     * to (slots.max, the CPU bound S / c, an inflation ceiling), not at what they are now. */
    uint32_t tpw_eff = v.tpw;
    if (sv.known && !gradient) {
      uint32_t can = min32(p->max_slots, sv.n_cpu);
      if (st->slots_ceiling) can = min32(can, st->slots_ceiling);
      if (can > tpw_eff) tpw_eff = can;
    }
    double need = o->service_mean_ns ? workers_needed(p, o, &v, tpw_eff) : 0;
    /* With the CPU per request measured, a worker carries at most cpu_target / c_req requests
     * per second (one core, the GVL): processes for that, however many slots each has. A
     * worker of Ractor slots carries up to the machine's cores. */
    double need_cpu = 0;
    if (sv.known && sv.c_req > 0)
      need_cpu = ceil(o->arrival_rate * sv.c_req / 1e9 / p->slots_cpu_target /
                      (o->ractor_cores ? (double)o->ractor_cores : 1));
    if (need_cpu > need) need = need_cpu > 1e9 ? 1e9 : need_cpu;
    uint32_t slot_grow = 0;
    /* Sized capacity suffices and the request arriving now would meet the target: the high
     * p95 is the backlog of an earlier shortage draining. Adding more would overshoot. */
    int draining = o->service_mean_ns && need <= (double)v.expected && v.wait <= v.target;
    /* Standby workers serve within a tick, so neither the settled gate nor the spawn cooldown
     * (both there because a fork's capacity is seconds away) holds them back, as long as
     * sizing, which counts booting workers as capacity, still finds a shortfall. */
    uint32_t room = cap > v.expected ? cap - v.expected : 0;
    uint32_t act_now = 0;
    if (v.standby && need > (double)v.expected)
      act_now = min32(min32(v.standby, room), need - (double)v.expected > 1e9
                                                  ? UINT32_MAX
                                                  : (uint32_t)(need - (double)v.expected));
    const char *held = NULL; /* why forks wait, when only standby is activated */
    if (st->breach_ticks < p->breach_ticks && !v.severe_now) {
      put_action(&l, PP_ACTION_NONE, 0);
      put_breach(&l, &v, st->breach_ticks);
      put(&l, " of ");
      put_u64(&l, p->breach_ticks);
      put_context(&l, &v, o, !v.over_p95);
    } else if (!draining && (slot_grow = slots_grow_target(p, st, o, &v, &sv, gradient)) > v.tpw) {
      uint32_t n = slot_grow;
      put_slots_action(&l, v.tpw, n);
      put_breach(&l, &v, st->breach_ticks);
      put(&l, "; ");
      put_cpu(&l, o);
      put(&l, ", ");
      put_count(&l, sv.workers, "worker", "workers");
      if (gradient) {
        put(&l, "; ");
        put_gradient(&l, p, st, o);
      } else {
        put(&l, "; sized ");
        put_u64(&l, slots_needed(p, o, &v, &sv));
        put(&l, " slots (");
        put_ratio(&l, o->arrival_rate);
        put(&l, " rps x ");
        put_dur(&l, o->service_mean_ns);
        put(&l, " / ");
        put_ratio(&l, p->target_utilisation);
        put(&l, ", queue ");
        put_u64(&l, o->queue_len);
        put(&l, "), CPU bound ");
        put_u64(&l, sv.n_cpu);
        if (o->ractor_cores && n > slots_needed(p, o, &v, &sv))
          put(&l, "; a Ractor before a fork");
        else if (n > slots_needed(p, o, &v, &sv))
          put(&l, "; a slot for each queued request");
        if (n == p->max_slots) put(&l, ", capped by slots.max");
        if (st->slots_ceiling && n == st->slots_ceiling) put(&l, ", capped by an inflation revert");
        st->slots_from = v.tpw;
        st->slots_svc_before_ns = o->service_mean_ns;
      }
      if (!st->slots_base) st->slots_base = v.tpw;
      slots_set(&d, st, now, n);
      st->breach_ticks = 0;
    } else if (sv.known && !gradient && !draining && tpw_eff > v.tpw &&
               need <= (double)v.expected && (!sv.cooled || !sv.settled) && !slots_cpu_full(p, o)) {
      /* The settled gate for slots: they grew (or are connecting) and can still grow, the
       * workers wait on I/O, and sizing that counts slots at what they can grow to finds
       * the processes enough: wait for the slots rather than fork. */
      put_action(&l, PP_ACTION_NONE, 0);
      put_breach(&l, &v, st->breach_ticks);
      put(&l, " but slots changed ");
      put_dur(&l, elapsed_since(now, st->last_slots_ns));
      put(&l,
          sv.settled ? " ago (slots.cooldown " : " ago and are still connecting (slots.cooldown ");
      put_dur(&l, p->slots_cooldown_ns);
      put(&l, "); ");
      put_cpu(&l, o);
      put_context(&l, &v, o, 1);
    } else if (o->workers_booting > 0 && act_now) {
      held = "booting";
    } else if (o->workers_booting > 0) {
      /* The settled gate: capacity already on its way has not been seen yet. */
      put_action(&l, PP_ACTION_NONE, 0);
      put(&l, "breach for ");
      put_count(&l, st->breach_ticks, "tick", "ticks");
      put(&l, " but ");
      put_count(&l, o->workers_booting, "worker", "workers");
      put(&l, " still booting");
      put_context(&l, &v, o, 1);
    } else if (draining) {
      put_action(&l, PP_ACTION_NONE, 0);
      put_breach(&l, &v, st->breach_ticks);
      put(&l, " but ");
      put_count(&l, v.expected, "worker", "workers");
      put(&l, " suffice and predicted wait is under target; draining");
      put_context(&l, &v, o, 0);
    } else if (threads_ok) {
      d.action = PP_ACTION_ADD_THREAD;
      d.count = 1;
      st->threads_wanted = v.tpw + 1;
      st->last_thread_ns = now;
      put_action(&l, d.action, 1);
      put_breach(&l, &v, st->breach_ticks);
      st->breach_ticks = 0;
      put(&l, " (gvl wait ");
      put_dur(&l, (uint64_t)o->gvl_wait_ns);
      put(&l, " under ");
      put_dur(&l, p->gvl_wait_max_ns);
      put(&l, ", ");
      put_u64(&l, v.tpw);
      put(&l, " -> ");
      put_u64(&l, v.tpw + 1);
      put(&l, " threads, rho ");
      put_ratio(&l, v.rho);
      put(&l, ")");
    } else if (v.expected >= cap && !act_now &&
               (slot_cut = slots_cut_target(p, st, o, &v, &sv, gradient))) {
      /* No process can be added: slots the GVL cannot use only move the wait from the queue,
       * first in first out, to the GVL. */
      put_slots_action(&l, v.tpw, slot_cut);
      put_breach(&l, &v, st->breach_ticks);
      put(&l, " at the ");
      put_cap(&l, cap_why, cap);
      put(&l, "; ");
      put_cut(&l, p, o);
      st->slots_cut_from = v.tpw;
      st->slots_cut_share = o->cpu_share_max;
      slots_set(&d, st, now, slot_cut);
      st->breach_ticks = 0;
    } else if (spawn_wait < p->spawn_cooldown_ns && act_now) {
      held = "cooldown";
    } else if (spawn_wait < p->spawn_cooldown_ns) {
      put_action(&l, PP_ACTION_NONE, 0);
      put_breach(&l, &v, st->breach_ticks);
      put(&l, " but spawn cooldown has ");
      put_dur(&l, p->spawn_cooldown_ns - spawn_wait);
      put(&l, act_cool ? " left after a standby activation" : " left");
      put_context(&l, &v, o, !v.over_p95);
    } else if (v.expected >= cap) {
      put_action(&l, PP_ACTION_NONE, 0);
      put_breach(&l, &v, st->breach_ticks);
      put(&l, " but at ");
      put_cap(&l, cap_why, cap);
      put_context(&l, &v, o, !v.over_p95);
    } else {
      int64_t add = (int64_t)need - (int64_t)v.expected;
      {
        const char *bound = NULL;
        if (add < 1) add = 1;
        /* Standby first (bounded by the cap only), then forks (bounded by max_step too). */
        uint32_t act =
            min32(min32(v.standby, room), add > (int64_t)UINT32_MAX ? UINT32_MAX : (uint32_t)add);
        int64_t forks = add - act;
        if (forks > (int64_t)p->max_step) forks = p->max_step, bound = "max_step";
        if (act + forks > (int64_t)room) forks = room - act, bound = cap_why;
        d.action = PP_ACTION_SPAWN_WORKER;
        d.count = act + (uint32_t)forks;
        d.activate = act;
        st->workers_wanted = v.expected + d.count;
        if (forks) st->last_spawn_ns = now;
        if (act) st->last_activate_ns = now;
        put_action(&l, d.action, d.count);
        put_breach(&l, &v, st->breach_ticks);
        put_context(&l, &v, o, !v.over_p95);
        if (o->service_mean_ns) {
          put(&l, "; sized ");
          put_u64(&l, (uint64_t)need);
          put(&l, " workers");
          if (bound) {
            put(&l, ", capped by ");
            put(&l, bound);
          }
        }
        put_standby_split(&l, act, (uint32_t)forks);
        st->breach_ticks = 0;
      }
    }
    if (held) {
      /* Forks wait (settled gate or cooldown), standby workers do not. */
      d.action = PP_ACTION_SPAWN_WORKER;
      d.count = act_now;
      d.activate = act_now;
      st->workers_wanted = v.expected + act_now;
      st->last_activate_ns = now;
      put_action(&l, d.action, d.count);
      put_breach(&l, &v, st->breach_ticks);
      /* The context that follows names how many boot; the cooldown needs its time left. */
      if (held[0] == 'b') {
        put(&l, "; forks held while booting");
      } else {
        put(&l, "; forks held: cooldown ");
        put_dur(&l, p->spawn_cooldown_ns - spawn_wait);
        put(&l, act_cool ? " left after a standby activation" : " left");
      }
      put_context(&l, &v, o, !v.over_p95);
      put(&l, "; sized ");
      put_u64(&l, (uint64_t)need);
      put(&l, " workers");
      put_standby_split(&l, act_now, 0);
      st->breach_ticks = 0;
    }
  } else if ((slot_shrink = slots_shrink_target(p, st, o, &v, &sv, gradient, &shrink_why))) {
    uint32_t n = slot_shrink;
    put_slots_action(&l, v.tpw, n);
    if (shrink_why[0] == 'c' && shrink_why[1] == 'a') {
      put(&l, "calm for ");
      put_count(&l, st->calm_ticks, "tick", "ticks");
      put(&l, " (busy ");
      put_u64(&l, o->slots_busy);
      put(&l, "/");
      put_u64(&l, o->slots_ready);
      put(&l, ", ");
      put_ratio(&l, o->arrival_rate);
      put(&l, " rps x ");
      put_dur(&l, o->service_mean_ns);
      put(&l, "); twice the slots Little's law needs");
    } else if (shrink_why[0] == 'p') {
      put(&l, "processes added since the last slot change carry it (");
      put_count(&l, sv.workers, "worker", "workers");
      put(&l, ", ");
      put_ratio(&l, o->arrival_rate);
      put(&l, " rps x ");
      put_dur(&l, o->service_mean_ns);
      put(&l, "); twice the slots Little's law needs per worker");
    } else if (shrink_why[0] == 'g') {
      put_gradient(&l, p, st, o);
    } else {
      put_cpu(&l, o);
      put(&l, " at or over slots.cpu_target ");
      put_pct(&l, p->slots_cpu_target);
      if (o->ractor_cores) put(&l, " of the cores");
      put(&l, "; the CPU uses ");
      put_u64(&l, sv.n_cpu);
      put(&l, " slots (");
      put_dur(&l, (uint64_t)sv.c_req);
      put(&l, " CPU of ");
      put_dur(&l, o->service_mean_ns);
      put(&l, " service)");
    }
    if (st->slots_base && n <= st->slots_base) {
      put(&l, "; back to ");
      put_u64(&l, st->slots_base);
      st->slots_base = 0;
    }
    if (shrink_why[0] == 'c' && shrink_why[1] == 'a') st->slots_ceiling = 0;
    st->slots_from = 0;
    slots_set(&d, st, now, n);
  } else if (p->threads_enabled && gvl_known && (uint64_t)o->gvl_wait_ns > p->gvl_wait_max_ns &&
             v.tpw > p->min_threads &&
             elapsed_since(now, st->last_thread_ns) >= p->spawn_cooldown_ns) {
    /* Threads are fighting over the GVL: one fewer per worker costs nothing in throughput. */
    d.action = PP_ACTION_REMOVE_THREAD;
    d.count = 1;
    st->threads_wanted = v.tpw - 1;
    st->last_thread_ns = now;
    put_action(&l, d.action, 1);
    put(&l, "gvl wait ");
    put_dur(&l, (uint64_t)o->gvl_wait_ns);
    put(&l, " over ");
    put_dur(&l, p->gvl_wait_max_ns);
    put(&l, " (");
    put_u64(&l, v.tpw);
    put(&l, " -> ");
    put_u64(&l, v.tpw - 1);
    put(&l, " threads)");
  } else if (v.calm && st->calm_ticks >= p->calm_ticks) {
    uint64_t since_retire = elapsed_since(now, st->last_retire_ns);
    uint64_t since_spawn = elapsed_since(now, st->last_spawn_ns);
    uint64_t since_activate = elapsed_since(now, st->last_activate_ns);
    if (since_activate < since_spawn) since_spawn = since_activate;
    uint32_t c_after = o->slots_ready > v.tpw ? o->slots_ready - v.tpw : 0;
    double rho_after = c_after ? v.offered / (double)c_after : INFINITY;
    put_action(&l, PP_ACTION_NONE, 0); /* rewritten below if we retire */
    if (v.expected <= p->min_workers) {
      l.len = 0;
      put(&l, "none: calm, at min_workers ");
      put_u64(&l, p->min_workers);
      put_context(&l, &v, o, 1);
    } else if (o->workers_booting > 0) {
      put(&l, "calm but ");
      put_count(&l, o->workers_booting, "worker", "workers");
      put(&l, " still booting");
    } else if (since_retire < p->retire_cooldown_ns || since_spawn < p->retire_cooldown_ns) {
      uint64_t since = since_retire < since_spawn ? since_retire : since_spawn;
      put(&l, "calm for ");
      put_count(&l, st->calm_ticks, "tick", "ticks");
      put(&l, " but retire cooldown has ");
      put_dur(&l, p->retire_cooldown_ns - since);
      put(&l, " left");
    } else if (!(rho_after < p->target_utilisation)) {
      put(&l, "calm for ");
      put_count(&l, st->calm_ticks, "tick", "ticks");
      put(&l, " but one fewer worker would put rho at ");
      put_ratio(&l, rho_after);
      put(&l, " over target ");
      put_ratio(&l, p->target_utilisation);
    } else {
      l.len = 0;
      d.action = PP_ACTION_RETIRE_WORKER;
      d.count = 1;
      put_action(&l, d.action, 1);
      put(&l, "calm for ");
      put_count(&l, st->calm_ticks, "tick", "ticks");
      put(&l, " (queue p95 ");
      put_dur(&l, v.p95);
      put(&l, ", busy ");
      put_u64(&l, o->slots_busy);
      put(&l, "/");
      put_u64(&l, o->slots_ready);
      put(&l, ", rho ");
      put_ratio(&l, v.rho);
      put(&l, " -> ");
      put_ratio(&l, rho_after);
      put(&l, " with one fewer)");
      st->workers_wanted = v.expected - 1;
      st->last_retire_ns = now;
      st->calm_ticks = 0;
    }
  } else {
    put_action(&l, PP_ACTION_NONE, 0);
    if (v.calm) {
      put(&l, "calm for ");
      put_count(&l, st->calm_ticks, "tick", "ticks");
      put(&l, " of ");
      put_u64(&l, p->calm_ticks);
    } else {
      put(&l, "steady");
    }
    put_context(&l, &v, o, 1);
  }

  /* Refill the standby pool: fork replacements for what is missing (activated now, died, or
   * never started). Background work: not capacity, so neither gated nor cooled down; its
   * memory is reserved in the cap. A pool above `standby` (a reload lowered it) is used up by
   * activations and not refilled. */
  st->standby_wanted -= d.activate;
  int gate = p->standby && p->standby_cover > 0 ? standby_gate(p, o, &v, &sv) : STANDBY_ALWAYS;
  if (gate <= STANDBY_CLOSED) {
    if (p->standby > st->standby_wanted) put_standby_held(&l, p, o, &sv, st->standby_wanted, gate);
  } else {
    /* Behind the slots (standby_cover > 0) the pool is also bounded by the room the worker
     * cap leaves after this tick's action: a parked worker beyond it could never be
     * activated, and costs its memory for nothing. */
    uint32_t want = p->standby;
    if (gate != STANDBY_ALWAYS && p->standby > st->standby_wanted) {
      uint32_t room = cap > st->workers_wanted ? cap - st->workers_wanted : 0;
      if (room < want) {
        want = room > st->standby_wanted ? room : st->standby_wanted;
        put_standby_room(&l, p, st, cap, cap_why, want);
      }
    }
    if (want > st->standby_wanted) {
      d.standby_spawn = want - st->standby_wanted;
      put(&l, "; standby +");
      put_u64(&l, d.standby_spawn);
      put(&l, " to ");
      put_u64(&l, want);
      if (gate != STANDBY_ALWAYS) put_standby_open(&l, p, o, &v, &sv, gate);
      st->standby_wanted = want;
    }
  }

  if (st->shedding != shed_before && !p->shed_enabled) {
    put(&l, "; shedding off: disabled by the policy");
  } else if (st->shedding != shed_before) {
    put(&l, st->shedding ? "; shedding on: predicted " : "; shedding off: predicted ");
    put_dur(&l, v.wait);
    put(&l, st->shedding ? " over budget " : " under half the budget ");
    put_dur(&l, pp_policy_shed_budget_ns(p));
  }
  d.workers_target = st->workers_wanted;
  d.shed = st->shedding;
  return d;
}
