/* Sweep axes and the cross product; see sweep.h. */
#include "sim/sweep.h"

#include <stdio.h>
#include <string.h>

void pp_sweep_init(pp_sweep *sw) {
  memset(sw, 0, sizeof *sw);
}

int pp_sweep_add(pp_sweep *sw, const char *spec, char *errbuf, size_t errcap) {
  if (sw->n_axes == PP_SWEEP_MAX_AXES) {
    snprintf(errbuf, errcap, "at most %d --set axes", PP_SWEEP_MAX_AXES);
    return -1;
  }
  const char *eq = strchr(spec, '=');
  if (!eq || eq == spec || !eq[1]) {
    snprintf(errbuf, errcap, "--set %s: expected field=value[,value...]", spec);
    return -1;
  }
  pp_sweep_axis *ax = &sw->axes[sw->n_axes];
  memset(ax, 0, sizeof *ax);
  const char *name = spec;
  size_t nlen = (size_t)(eq - spec);
  if (nlen > 7 && strncmp(name, "policy.", 7) == 0) name += 7, nlen -= 7;
  if (nlen >= sizeof ax->field) {
    snprintf(errbuf, errcap, "--set %s: field name too long", spec);
    return -1;
  }
  memcpy(ax->field, name, nlen);
  ax->field[nlen] = 0;
  for (size_t i = 0; i < sw->n_axes; i++)
    if (strcmp(sw->axes[i].field, ax->field) == 0) {
      snprintf(errbuf, errcap, "--set %s: field %s is already swept", spec, ax->field);
      return -1;
    }
  const char *v = eq + 1;
  while (*v) {
    const char *c = strchr(v, ',');
    size_t len = c ? (size_t)(c - v) : strlen(v);
    if (len == 0 || len >= PP_SWEEP_VALUE_MAX) {
      snprintf(errbuf, errcap, "--set %s: empty or too long value", spec);
      return -1;
    }
    if (ax->n_values == PP_SWEEP_MAX_VALUES) {
      snprintf(errbuf, errcap, "--set %s: at most %d values", spec, PP_SWEEP_MAX_VALUES);
      return -1;
    }
    memcpy(ax->values[ax->n_values], v, len);
    ax->values[ax->n_values][len] = 0;
    pp_policy probe;
    pp_policy_defaults(&probe);
    pp_policy_error perr;
    memset(&perr, 0, sizeof perr);
    int rc = pp_policy_set(&probe, ax->field, ax->values[ax->n_values], &perr);
    if (rc) {
      snprintf(errbuf, errcap, "--set %s: %s: %s", spec, ax->field,
               rc == PP_CTL_ENOENT ? "unknown policy field (see pp-sim sweep --help)"
               : perr.message[0]   ? perr.message
                                   : pp_ctl_strerror(rc));
      return -1;
    }
    ax->n_values++;
    v += len;
    if (*v == ',') v++;
  }
  if (ax->n_values == 0) {
    snprintf(errbuf, errcap, "--set %s: no values", spec);
    return -1;
  }
  sw->n_axes++;
  return 0;
}

size_t pp_sweep_count(const pp_sweep *sw) {
  size_t n = 1;
  for (size_t i = 0; i < sw->n_axes; i++)
    n *= sw->axes[i].n_values;
  return n;
}

int pp_sweep_apply(const pp_sweep *sw, size_t k, pp_policy *p, char *label, size_t label_cap,
                   char *errbuf, size_t errcap) {
  size_t idx[PP_SWEEP_MAX_AXES];
  for (size_t i = sw->n_axes; i-- > 0;) {
    idx[i] = k % sw->axes[i].n_values;
    k /= sw->axes[i].n_values;
  }
  size_t used = 0;
  if (label_cap) label[0] = 0;
  for (size_t i = 0; i < sw->n_axes; i++) {
    const pp_sweep_axis *ax = &sw->axes[i];
    pp_policy_error perr;
    memset(&perr, 0, sizeof perr);
    if (pp_policy_set(p, ax->field, ax->values[idx[i]], &perr)) {
      snprintf(errbuf, errcap, "%s=%s: %s", ax->field, ax->values[idx[i]], perr.message);
      return -1;
    }
    if (used < label_cap) {
      int n = snprintf(label + used, label_cap - used, "%s%s=%s", i ? " " : "", ax->field,
                       ax->values[idx[i]]);
      if (n > 0) used += (size_t)n;
    }
  }
  pp_policy_error perr;
  memset(&perr, 0, sizeof perr);
  if (pp_policy_validate(p, &perr)) {
    snprintf(errbuf, errcap, "%s: %s%s%s", label_cap ? label : "variant", perr.field,
             perr.field[0] ? ": " : "", perr.message);
    return -1;
  }
  return 0;
}
