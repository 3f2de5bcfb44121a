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

static int parse_u64(const char *s, size_t len, uint64_t *out) {
  if (len == 0 || len > 20) return -1;
  uint64_t v = 0;
  for (size_t i = 0; i < len; i++) {
    if (s[i] < '0' || s[i] > '9') return -1;
    uint64_t d = (uint64_t)(s[i] - '0');
    if (v > (UINT64_MAX - d) / 10) return -1;
    v = v * 10 + d;
  }
  *out = v;
  return 0;
}

int pp_sweep_set_seeds(pp_sweep *sw, const char *spec, char *errbuf, size_t errcap) {
  size_t n = 0;
  const char *v = spec;
  if (!*v) {
    snprintf(errbuf, errcap, "--seeds: no seeds");
    return -1;
  }
  while (*v) {
    const char *c = strchr(v, ',');
    size_t len = c ? (size_t)(c - v) : strlen(v);
    const char *dash = memchr(v, '-', len);
    uint64_t lo, hi;
    if (dash ? parse_u64(v, (size_t)(dash - v), &lo) ||
                   parse_u64(dash + 1, len - (size_t)(dash - v) - 1, &hi)
             : parse_u64(v, len, &lo)) {
      snprintf(errbuf, errcap, "--seeds %s: \"%.*s\" is not a seed or a range A-B of whole numbers",
               spec, (int)len, v);
      return -1;
    }
    if (!dash) hi = lo;
    if (hi < lo) {
      snprintf(errbuf, errcap, "--seeds %s: range %.*s runs backwards", spec, (int)len, v);
      return -1;
    }
    for (uint64_t s = lo;; s++) {
      if (n == PP_SWEEP_MAX_SEEDS) {
        snprintf(errbuf, errcap, "--seeds %s: at most %d seeds", spec, PP_SWEEP_MAX_SEEDS);
        return -1;
      }
      for (size_t k = 0; k < n; k++)
        if (sw->seeds[k] == s) {
          snprintf(errbuf, errcap, "--seeds %s: seed %llu is given twice", spec,
                   (unsigned long long)s);
          return -1;
        }
      sw->seeds[n++] = s;
      if (s == hi) break;
    }
    v += len;
    if (*v == ',') {
      v++;
      if (!*v) {
        snprintf(errbuf, errcap, "--seeds %s: trailing comma", spec);
        return -1;
      }
    }
  }
  sw->n_seeds = n;
  return 0;
}

size_t pp_sweep_units(const pp_sweep *sw) {
  return pp_sweep_count(sw) * (sw->n_seeds ? sw->n_seeds : 1);
}

int pp_sweep_parse_shard(const char *spec, uint32_t *index, uint32_t *count, char *errbuf,
                         size_t errcap) {
  const char *slash = strchr(spec, '/');
  uint64_t i, n;
  if (!slash || parse_u64(spec, (size_t)(slash - spec), &i) ||
      parse_u64(slash + 1, strlen(slash + 1), &n)) {
    snprintf(errbuf, errcap, "--shard %s: expected I/N, e.g. 3/10", spec);
    return -1;
  }
  if (n < 1 || n > 1000000 || i < 1 || i > n) {
    snprintf(errbuf, errcap, "--shard %s: need 1 <= I <= N <= 1000000 (shards count from 1)", spec);
    return -1;
  }
  *index = (uint32_t)i;
  *count = (uint32_t)n;
  return 0;
}

int pp_sweep_in_shard(size_t unit, uint32_t index, uint32_t count) {
  return unit % count == (size_t)(index - 1);
}

size_t pp_sweep_shard_size(size_t units, uint32_t index, uint32_t count) {
  size_t first = (size_t)(index - 1);
  return units > first ? (units - first - 1) / count + 1 : 0;
}

size_t pp_sweep_shard_unit(size_t k, uint32_t index, uint32_t count) {
  return (size_t)(index - 1) + k * count;
}

int pp_sweep_canonical(const pp_sweep *sw, char *buf, size_t cap) {
  size_t used = 0;
#define PUT(...)                                                                                   \
  do {                                                                                             \
    int w_ = snprintf(buf + used, used < cap ? cap - used : 0, __VA_ARGS__);                       \
    if (w_ < 0) return -1;                                                                         \
    used += (size_t)w_;                                                                            \
  } while (0)
  if (cap) buf[0] = 0;
  for (size_t i = 0; i < sw->n_axes; i++) {
    PUT("set %s=", sw->axes[i].field);
    for (size_t k = 0; k < sw->axes[i].n_values; k++)
      PUT("%s%s", k ? "," : "", sw->axes[i].values[k]);
    PUT("\n");
  }
  PUT("seeds");
  for (size_t k = 0; k < sw->n_seeds; k++)
    PUT("%s%llu", k ? "," : " ", (unsigned long long)sw->seeds[k]);
  PUT("\n");
#undef PUT
  return used < cap ? (int)used : -1;
}

uint64_t pp_sweep_fnv1a(uint64_t h, const void *data, size_t len) {
  const unsigned char *p = data;
  for (size_t i = 0; i < len; i++) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}
