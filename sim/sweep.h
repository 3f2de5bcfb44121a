/* Sweeps: `--set policy.spawn_cooldown=1s,2s,5s` axes and their cross product.
 *
 * Each axis names a policy field (the names of pp_policy_field_names, optionally prefixed
 * with "policy.") and a comma-separated list of values. Variant k of the cross product is
 * decoded in mixed radix, the first axis varying slowest, so the order is stable and a
 * variant's label says exactly what it set. Pure: no I/O, no allocation. */
#ifndef PP_SIM_SWEEP_H
#define PP_SIM_SWEEP_H

#include <stddef.h>

#include "control/control.h"

#define PP_SWEEP_MAX_AXES   8
#define PP_SWEEP_MAX_VALUES 64
#define PP_SWEEP_VALUE_MAX  32

typedef struct pp_sweep_axis {
  char field[64];
  size_t n_values;
  char values[PP_SWEEP_MAX_VALUES][PP_SWEEP_VALUE_MAX];
} pp_sweep_axis;

typedef struct pp_sweep {
  size_t n_axes;
  pp_sweep_axis axes[PP_SWEEP_MAX_AXES];
} pp_sweep;

void pp_sweep_init(pp_sweep *sw);
/* Adds an axis from "field=v1,v2". Each value is checked against a default policy with
 * pp_policy_set. Returns 0, or -1 with a sentence in errbuf. */
int pp_sweep_add(pp_sweep *sw, const char *spec, char *errbuf, size_t errcap);
/* Number of variants (1 with no axes). */
size_t pp_sweep_count(const pp_sweep *sw);
/* Applies variant k to *p (over its current values) and validates it; writes a label like
 * "spawn_cooldown=2s max_step=4". Returns 0, or -1 with errbuf filled. */
int pp_sweep_apply(const pp_sweep *sw, size_t k, pp_policy *p, char *label, size_t label_cap,
                   char *errbuf, size_t errcap);

#endif
