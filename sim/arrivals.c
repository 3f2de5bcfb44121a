/* Arrival schedule generator: see arrivals.h for the contract pp-bench relies on.
 * Workload: tens of thousands to tens of millions of arrivals, generated once per run. */
#include "sim/arrivals.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>

uint64_t pp_splitmix64(uint64_t x) {
  uint64_t z = x + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static gsl_rng *stream(uint64_t seed, uint64_t which) {
  gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
  if (!r) return NULL;
  /* mt19937 takes an unsigned long; keep 32 bits so the stream is the same on every ABI. */
  uint32_t s = (uint32_t)pp_splitmix64(seed * 0x100000001b3ull + which);
  gsl_rng_set(r, s ? s : 1);
  return r;
}

static uint64_t clamp_ns(double v) {
  if (!(v >= 0)) return 0;
  if (v > 9e18) return (uint64_t)9e18;
  return (uint64_t)llround(v);
}

/* The lognormal's mu and sigma from its mean and standard deviation. */
static void lognormal_params(const pp_dist *d, double *mu, double *sigma) {
  double m = (double)d->mean_ns, sd = (double)d->sd_ns;
  double s2 = log1p((sd * sd) / (m * m));
  *mu = log(m) - s2 / 2;
  *sigma = sqrt(s2);
}

/* pp_dist_draw with the lognormal parameters computed once (same draws, same values). */
static uint64_t draw_prepared(const pp_dist *d, double mu, double sigma, gsl_rng *rng) {
  if (d->kind == PP_DIST_LOGNORMAL && d->mean_ns > 0)
    return clamp_ns(gsl_ran_lognormal(rng, mu, sigma));
  return pp_dist_draw(d, rng);
}

uint64_t pp_dist_draw(const pp_dist *d, gsl_rng *rng) {
  double v;
  switch (d->kind) {
  case PP_DIST_FIXED: return d->mean_ns;
  case PP_DIST_EXPONENTIAL:
    if (d->mean_ns == 0) return 0;
    v = gsl_ran_exponential(rng, (double)d->mean_ns);
    break;
  case PP_DIST_LOGNORMAL: {
    if (d->mean_ns == 0) return 0;
    double mu, sigma;
    lognormal_params(d, &mu, &sigma);
    v = gsl_ran_lognormal(rng, mu, sigma);
    break;
  }
  case PP_DIST_UNIFORM: v = gsl_ran_flat(rng, (double)d->min_ns, (double)d->max_ns); break;
  default: return d->mean_ns;
  }
  return clamp_ns(v);
}

void pp_arrivals_dispose(pp_arrivals *a) {
  if (a->time_rng) gsl_rng_free(a->time_rng);
  if (a->kind_rng) gsl_rng_free(a->kind_rng);
  if (a->service_rng) gsl_rng_free(a->service_rng);
  a->time_rng = a->kind_rng = a->service_rng = NULL;
}

int pp_arrivals_init(pp_arrivals *a, const pp_scenario *scn, uint64_t seed) {
  memset(a, 0, sizeof *a);
  a->scn = scn;
  if (scn->n_kinds == 0) return PP_SIM_EINVAL;
  a->time_rng = stream(seed, 1);
  a->kind_rng = stream(seed, 2);
  a->service_rng = stream(seed, 3);
  if (!a->time_rng || !a->kind_rng || !a->service_rng) {
    pp_arrivals_dispose(a);
    return PP_SIM_ENOMEM;
  }
  double sum = 0;
  for (uint32_t i = 0; i < scn->n_kinds; i++)
    sum += scn->kinds[i].weight;
  if (!(sum > 0)) {
    pp_arrivals_dispose(a);
    return PP_SIM_EINVAL;
  }
  double c = 0;
  for (uint32_t i = 0; i < scn->n_kinds; i++) {
    c += scn->kinds[i].weight / sum;
    a->kind_cum[i] = c;
  }
  a->kind_cum[scn->n_kinds - 1] = 1.0;
  for (uint32_t i = 0; i < scn->n_kinds; i++) {
    if (scn->kinds[i].cpu.kind == PP_DIST_LOGNORMAL && scn->kinds[i].cpu.mean_ns)
      lognormal_params(&scn->kinds[i].cpu, &a->ln_mu[i][0], &a->ln_sigma[i][0]);
    if (scn->kinds[i].io.kind == PP_DIST_LOGNORMAL && scn->kinds[i].io.mean_ns)
      lognormal_params(&scn->kinds[i].io, &a->ln_mu[i][1], &a->ln_sigma[i][1]);
  }
  return 0;
}

static double phase_rate_at(const pp_phase *p, double tau_ns) {
  if (!p->has_ramp) return p->rate;
  return p->rate + (p->rate_end - p->rate) * (tau_ns / (double)p->duration_ns);
}

/* Next arrival time in ns, or -1 at the end. */
static double next_time(pp_arrivals *a) {
  const pp_scenario *s = a->scn;
  if (s->process == PP_ARRIVALS_TRACE) {
    while (a->trace_pos < s->trace_len) {
      int64_t t = s->trace_ns[a->trace_pos++];
      if ((uint64_t)t < s->duration_ns) return (double)t;
    }
    return -1;
  }
  while (a->phase < s->n_phases) {
    const pp_phase *p = &s->phases[a->phase];
    double end = a->phase_start_ns + (double)p->duration_ns;
    if (s->process == PP_ARRIVALS_UNIFORM) {
      double r0 = p->rate, r1 = p->has_ramp ? p->rate_end : p->rate;
      double d_s = (double)p->duration_ns / 1e9;
      double k = (double)a->k;
      double total = (r0 + r1) / 2 * d_s; /* integrated rate over the phase */
      if (k < total) {
        double qa = (r1 - r0) / (2 * d_s), tau_s;
        if (fabs(qa) < 1e-12)
          tau_s = k / r0;
        else {
          double disc = r0 * r0 + 4 * qa * k;
          tau_s = (-r0 + sqrt(disc > 0 ? disc : 0)) / (2 * qa);
        }
        double t = a->phase_start_ns + tau_s * 1e9;
        if (t < end) {
          a->k++;
          return t;
        }
      }
    } else {
      double rmax = p->rate > p->rate_end ? p->rate : p->rate_end;
      if (rmax > 0) {
        double mean_gap = 1e9 / rmax;
        for (;;) {
          a->t_ns += gsl_ran_exponential(a->time_rng, mean_gap);
          if (a->t_ns >= end) break;
          if (!p->has_ramp) return a->t_ns;
          double r = phase_rate_at(p, a->t_ns - a->phase_start_ns);
          if (gsl_rng_uniform(a->time_rng) * rmax < r) return a->t_ns;
        }
      }
    }
    a->phase++;
    a->phase_start_ns = end;
    a->t_ns = end;
    a->k = 0;
  }
  return -1;
}

int pp_arrivals_next(pp_arrivals *a, pp_arrival *out) {
  if (a->done) return 0;
  double t = next_time(a);
  if (t < 0) {
    a->done = 1;
    return 0;
  }
  const pp_scenario *s = a->scn;
  uint32_t kind = 0;
  if (s->n_kinds > 1) {
    double u = gsl_rng_uniform(a->kind_rng);
    while (kind + 1 < s->n_kinds && u >= a->kind_cum[kind])
      kind++;
  }
  out->t_ns = (int64_t)llround(t);
  out->kind = kind;
  out->seq = a->count++;
  out->cpu_ns =
      draw_prepared(&s->kinds[kind].cpu, a->ln_mu[kind][0], a->ln_sigma[kind][0], a->service_rng);
  out->io_ns =
      draw_prepared(&s->kinds[kind].io, a->ln_mu[kind][1], a->ln_sigma[kind][1], a->service_rng);
  return 1;
}

int pp_schedule_build(pp_schedule *out, const pp_scenario *scn, uint64_t seed) {
  memset(out, 0, sizeof *out);
  pp_arrivals a;
  int rc = pp_arrivals_init(&a, scn, seed);
  if (rc) return rc;
  size_t cap = 1024;
  out->items = malloc(cap * sizeof *out->items);
  if (!out->items) {
    pp_arrivals_dispose(&a);
    return PP_SIM_ENOMEM;
  }
  pp_arrival x;
  while (pp_arrivals_next(&a, &x)) {
    if (out->n == cap) {
      cap *= 2;
      pp_arrival *ni = realloc(out->items, cap * sizeof *ni);
      if (!ni) {
        pp_arrivals_dispose(&a);
        pp_schedule_dispose(out);
        return PP_SIM_ENOMEM;
      }
      out->items = ni;
    }
    out->items[out->n++] = x;
  }
  pp_arrivals_dispose(&a);
  return 0;
}

void pp_schedule_dispose(pp_schedule *s) {
  free(s->items);
  s->items = NULL;
  s->n = 0;
}

uint64_t pp_schedule_digest(const pp_schedule *s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < s->n; i++) {
    uint64_t v[2] = {(uint64_t)s->items[i].t_ns, s->items[i].kind};
    for (int j = 0; j < 2; j++)
      for (int b = 0; b < 8; b++) {
        h ^= (v[j] >> (8 * b)) & 0xff;
        h *= 0x100000001b3ull;
      }
  }
  return h;
}
