/* The HPA replica algorithm (see hpa.h). Every function is O(history) at most, and history is
 * bounded by the longest window divided by the sync period. */
#include "sim/hpa.h"

#include <math.h>
#include <string.h>

void pp_hpa_spec_defaults(pp_hpa_spec *s) {
  memset(s, 0, sizeof *s);
  s->min_replicas = 1;
  s->max_replicas = 10;
  s->tolerance = 0.1;
  s->up.window_ns = 0;
  s->up.n_policies = 2;
  s->up.policies[0] = (pp_hpa_rate_policy){PP_HPA_PERCENT, 100, 15000000000ull};
  s->up.policies[1] = (pp_hpa_rate_policy){PP_HPA_PODS, 4, 15000000000ull};
  s->down.window_ns = 300000000000ull;
  s->down.n_policies = 1;
  s->down.policies[0] = (pp_hpa_rate_policy){PP_HPA_PERCENT, 100, 15000000000ull};
}

static uint32_t ceil_u32(double x) {
  if (!(x > 0)) return 0;
  if (x >= 4e9) return UINT32_MAX;
  return (uint32_t)ceil(x);
}

uint32_t pp_hpa_replicas(pp_hpa_metric_kind kind, double tolerance, uint32_t current,
                         uint32_t ready, double metric, double target) {
  if (!(target > 0) || isnan(metric)) return current;
  if (kind == PP_HPA_VALUE) {
    double ratio = metric / target;
    if (current == 0) return ceil_u32(ratio);
    if (fabs(1.0 - ratio) <= tolerance) return current;
    return ceil_u32(ratio * (double)ready);
  }
  /* Utilisation: the mean over the ready pods; with unready pods a scale-up is recomputed with
   * them at 0%, and dropped if that flips its direction or lands within the tolerance. */
  if (ready == 0) return current;
  double ratio = metric / (double)ready / target;
  if (fabs(1.0 - ratio) <= tolerance) return current;
  uint32_t unready = current > ready ? current - ready : 0;
  if (ratio > 1.0 && unready > 0) {
    double n = (double)ready + (double)unready;
    double new_ratio = metric / n / target;
    if (fabs(1.0 - new_ratio) <= tolerance || new_ratio < 1.0) return current;
    uint32_t r = ceil_u32(new_ratio * n);
    return r;
  }
  return ceil_u32(ratio * (double)ready);
}

void pp_hpa_init(pp_hpa *h, const pp_hpa_spec *spec) {
  memset(h, 0, sizeof *h);
  h->spec = *spec;
}

static void ring_add(pp_hpa_event *ring, size_t *n, size_t *head, int64_t t, int64_t v) {
  if (*n == PP_HPA_HISTORY) {
    *head = (*head + 1) % PP_HPA_HISTORY; /* drop the oldest */
    (*n)--;
  }
  ring[(*head + *n) % PP_HPA_HISTORY] = (pp_hpa_event){t, v};
  (*n)++;
}

/* Replicas added (sign > 0) or removed (sign < 0) by scale events inside (now − period, now]. */
static int64_t changed_in_period(const pp_hpa *h, int64_t now, uint64_t period, int sign) {
  int64_t sum = 0;
  for (size_t i = 0; i < h->n_events; i++) {
    const pp_hpa_event *e = &h->scale_events[(h->ev_head + i) % PP_HPA_HISTORY];
    if (e->t_ns <= now - (int64_t)period) continue;
    if (sign > 0 && e->value > 0) sum += e->value;
    if (sign < 0 && e->value < 0) sum -= e->value;
  }
  return sum;
}

static int64_t up_limit(const pp_hpa *h, int64_t now, int64_t current) {
  const pp_hpa_direction *d = &h->spec.up;
  if (d->disabled || d->n_policies == 0) return current;
  int64_t result = d->select_min ? INT64_MAX : INT64_MIN;
  for (uint32_t i = 0; i < d->n_policies; i++) {
    const pp_hpa_rate_policy *p = &d->policies[i];
    int64_t start = current - changed_in_period(h, now, p->period_ns, 1) +
                    changed_in_period(h, now, p->period_ns, -1);
    int64_t proposed = p->kind == PP_HPA_PODS
                           ? start + p->value
                           : (int64_t)ceil((double)start * (1.0 + p->value / 100.0));
    result = d->select_min ? (proposed < result ? proposed : result)
                           : (proposed > result ? proposed : result);
  }
  return result;
}

static int64_t down_limit(const pp_hpa *h, int64_t now, int64_t current) {
  const pp_hpa_direction *d = &h->spec.down;
  if (d->disabled || d->n_policies == 0) return current;
  int64_t result = d->select_min ? INT64_MIN : INT64_MAX;
  for (uint32_t i = 0; i < d->n_policies; i++) {
    const pp_hpa_rate_policy *p = &d->policies[i];
    int64_t start = current - changed_in_period(h, now, p->period_ns, 1) +
                    changed_in_period(h, now, p->period_ns, -1);
    /* Kubernetes truncates here, so a 10% step from 72 removes 8 (64.8 -> 64). */
    int64_t proposed = p->kind == PP_HPA_PODS ? start - p->value
                                              : (int64_t)((double)start * (1.0 - p->value / 100.0));
    result = d->select_min ? (proposed > result ? proposed : result)
                           : (proposed < result ? proposed : result);
  }
  return result;
}

uint32_t pp_hpa_sync(pp_hpa *h, int64_t now, uint32_t current, uint32_t recommendation) {
  const pp_hpa_spec *sp = &h->spec;
  /* Stabilisation over the recorded recommendations, then record this one. */
  int64_t up_rec = recommendation, down_rec = recommendation;
  int64_t up_cut = now - (int64_t)sp->up.window_ns, down_cut = now - (int64_t)sp->down.window_ns;
  for (size_t i = 0; i < h->n_recs; i++) {
    const pp_hpa_event *r = &h->recs[(h->rec_head + i) % PP_HPA_HISTORY];
    if (r->t_ns > up_cut && r->value < up_rec) up_rec = r->value;
    if (r->t_ns > down_cut && r->value > down_rec) down_rec = r->value;
  }
  /* Forget recommendations older than both windows. */
  int64_t oldest = up_cut < down_cut ? up_cut : down_cut;
  while (h->n_recs && h->recs[h->rec_head].t_ns <= oldest) {
    h->rec_head = (h->rec_head + 1) % PP_HPA_HISTORY;
    h->n_recs--;
  }
  ring_add(h->recs, &h->n_recs, &h->rec_head, now, recommendation);
  int64_t desired = current;
  if (desired < up_rec) desired = up_rec;
  if (desired > down_rec) desired = down_rec;

  /* Rate policies and bounds. */
  int64_t cur = current;
  if (desired > cur) {
    int64_t lim = up_limit(h, now, cur);
    if (lim < cur) lim = cur;
    int64_t maxr = sp->max_replicas < lim ? sp->max_replicas : lim;
    if (desired > maxr) desired = maxr;
  } else if (desired < cur) {
    int64_t lim = down_limit(h, now, cur);
    if (lim > cur) lim = cur;
    int64_t minr = sp->min_replicas > lim ? sp->min_replicas : lim;
    if (desired < minr) desired = minr;
  }
  if (desired > sp->max_replicas) desired = sp->max_replicas;
  if (desired < sp->min_replicas) desired = sp->min_replicas;
  if (desired != cur) {
    /* Forget scale events older than every policy period. */
    uint64_t longest = 0;
    for (uint32_t i = 0; i < sp->up.n_policies; i++)
      if (sp->up.policies[i].period_ns > longest) longest = sp->up.policies[i].period_ns;
    for (uint32_t i = 0; i < sp->down.n_policies; i++)
      if (sp->down.policies[i].period_ns > longest) longest = sp->down.policies[i].period_ns;
    while (h->n_events && h->scale_events[h->ev_head].t_ns <= now - (int64_t)longest) {
      h->ev_head = (h->ev_head + 1) % PP_HPA_HISTORY;
      h->n_events--;
    }
    ring_add(h->scale_events, &h->n_events, &h->ev_head, now, desired - cur);
  }
  return (uint32_t)desired;
}

double pp_prom_histogram_quantile(double q, const double *bounds, const double *cum, size_t n) {
  if (n == 0) return NAN;
  double total = cum[n - 1];
  if (!(total > 0)) return NAN;
  double rank = q * total;
  size_t b = 0;
  while (b < n - 1 && cum[b] < rank)
    b++;
  if (b == n - 1) return n >= 2 ? bounds[n - 2] : NAN; /* the +Inf bucket */
  double lo = b == 0 ? 0.0 : bounds[b - 1];
  double below = b == 0 ? 0.0 : cum[b - 1];
  double in = cum[b] - below;
  if (!(in > 0)) return bounds[b];
  return lo + (bounds[b] - lo) * (rank - below) / in;
}
