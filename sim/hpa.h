/* The Kubernetes HorizontalPodAutoscaler's replica algorithm and the Prometheus query the
 * cluster simulator feeds it, as pure functions (no clocks: time is an argument).
 *
 * What is modelled, after the Kubernetes documentation ("Horizontal Pod Autoscaling",
 * algorithm details and configurable scaling behavior):
 *  - desired = ceil(current × metric / target), skipped when |metric / target − 1| is within
 *    the tolerance (0.1 by default). For a Value metric (an External or Object metric, which is
 *    what KEDA's Prometheus scaler with metricType Value and prometheus-adapter's object
 *    metrics give) the multiplier is the number of *ready* replicas; for CPU utilisation
 *    (a resource metric, averaged over pods) unready pods count as 0% on a scale-up, and a
 *    scale-up that this turns into a scale-down (or into "within tolerance") is dropped.
 *  - Stabilisation: every sync records its raw recommendation; the applied one is the current
 *    count raised to the minimum of the recommendations inside the scale-up window and lowered
 *    to the maximum of those inside the scale-down window (default 0 s up, 300 s down).
 *  - Rate policies (behavior.scaleUp/scaleDown.policies): each allows a change per period
 *    relative to the replica count at the period's start; selectPolicy Max picks the one
 *    allowing the larger change. Defaults: up max(100% per 15 s, 4 pods per 15 s); down
 *    100% per 15 s.
 *  - min/max replicas clamp the result.
 * The sync period (15 s by default) is the caller's: call pp_hpa_sync every sync period. */
#ifndef PP_SIM_HPA_H
#define PP_SIM_HPA_H

#include <stddef.h>
#include <stdint.h>

#define PP_HPA_MAX_POLICIES 4
#define PP_HPA_HISTORY      1024 /* recommendations and scale events remembered */

typedef enum pp_hpa_metric_kind {
  PP_HPA_VALUE = 0,       /* External/Object metric, target type Value: × ready replicas */
  PP_HPA_UTILIZATION = 1, /* resource CPU utilisation averaged over pods */
} pp_hpa_metric_kind;

typedef enum pp_hpa_policy_kind { PP_HPA_PODS = 0, PP_HPA_PERCENT = 1 } pp_hpa_policy_kind;

typedef struct pp_hpa_rate_policy {
  pp_hpa_policy_kind kind;
  uint32_t value;     /* pods, or percent */
  uint64_t period_ns; /* periodSeconds */
} pp_hpa_rate_policy;

typedef struct pp_hpa_direction {
  uint64_t window_ns; /* stabilizationWindowSeconds */
  uint32_t n_policies;
  pp_hpa_rate_policy policies[PP_HPA_MAX_POLICIES];
  int select_min; /* selectPolicy: 0 = Max (default), 1 = Min */
  int disabled;   /* selectPolicy: Disabled */
} pp_hpa_direction;

typedef struct pp_hpa_spec {
  uint32_t min_replicas, max_replicas;
  double tolerance; /* 0.1 */
  pp_hpa_direction up, down;
} pp_hpa_spec;

/* Kubernetes' defaults: tolerance 0.1, up window 0 with max(100%/15s, 4 pods/15s), down window
 * 300 s with 100%/15s; min 1, max 10 (the caller sets its own bounds). */
void pp_hpa_spec_defaults(pp_hpa_spec *s);

/* The unstabilised recommendation of one sync (the "replica calculator"), before min/max.
 *   current: the scale's replica count (spec.replicas)
 *   ready:   replicas ready (serving); unready = current − ready
 *   metric:  for VALUE the metric's value; for UTILIZATION the sum over ready pods of their
 *            utilisation (so the mean is metric / ready)
 * A metric that could not be read (no samples) is the caller's to skip: it is never 0. */
uint32_t pp_hpa_replicas(pp_hpa_metric_kind kind, double tolerance, uint32_t current,
                         uint32_t ready, double metric, double target);

typedef struct pp_hpa_event {
  int64_t t_ns;
  int64_t value; /* a recommendation, or a scale event's replica delta */
} pp_hpa_event;

/* An autoscaler's state across syncs. Plain data; the caller allocates. */
typedef struct pp_hpa {
  pp_hpa_spec spec;
  pp_hpa_event recs[PP_HPA_HISTORY];
  size_t n_recs, rec_head;
  pp_hpa_event scale_events[PP_HPA_HISTORY];
  size_t n_events, ev_head;
} pp_hpa;

void pp_hpa_init(pp_hpa *h, const pp_hpa_spec *spec);

/* One sync at now_ns: takes the raw recommendation (from pp_hpa_replicas), applies
 * stabilisation, the rate policies and min/max, records the scale event, and returns the new
 * replica count (== current when nothing changes). */
uint32_t pp_hpa_sync(pp_hpa *h, int64_t now_ns, uint32_t current, uint32_t recommendation);

/* Prometheus' histogram_quantile(q, ...) over cumulative bucket counts: bounds[i] is bucket
 * i's upper bound (`le`), the last bucket is +Inf and holds the total; counts are cumulative
 * (rates work the same). Linear interpolation inside the bucket, the lowest bucket starting
 * at 0; a quantile in the +Inf bucket is the highest finite bound. Returns NaN when the total
 * is 0 (Prometheus returns no value). */
double pp_prom_histogram_quantile(double q, const double *bounds, const double *cum, size_t n);

#endif
