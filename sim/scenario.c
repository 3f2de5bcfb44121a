/* Scenario parser: YAML text to pp_scenario, with errors that name file, line and field.
 *
 * Uses libyaml's document API (the whole tree is small: a scenario is a few hundred lines at
 * most) and walks it with a path string so each error can say "configs[1].threads". No I/O:
 * referenced files are recorded as paths for scenario_file.c. */
#include "sim/scenario.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "sim/units.h"

const char *pp_sim_strerror(int err) {
  switch (err) {
  case PP_SIM_OK: return "success";
  case PP_SIM_EINVAL: return "invalid value";
  case PP_SIM_EPARSE: return "parse error";
  case PP_SIM_EIO: return "I/O error";
  case PP_SIM_ENOMEM: return "out of memory";
  case PP_SIM_EDB: return "database error";
  default: return "unknown error";
  }
}

char *pp_scn_error_format(const pp_scn_error *e, char *buf, size_t cap) {
  const char *file = e->file[0] ? e->file : "<scenario>";
  if (e->line > 0 && e->field[0])
    snprintf(buf, cap, "%s:%d:%d: %s: %s", file, e->line, e->column, e->field, e->message);
  else if (e->line > 0)
    snprintf(buf, cap, "%s:%d:%d: %s", file, e->line, e->column, e->message);
  else if (e->field[0])
    snprintf(buf, cap, "%s: %s: %s", file, e->field, e->message);
  else
    snprintf(buf, cap, "%s: %s", file, e->message);
  return buf;
}

static void set_err(pp_scn_error *err, const char *file, int line, int col, const char *field,
                    const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static void set_err(pp_scn_error *err, const char *file, int line, int col, const char *field,
                    const char *fmt, ...) {
  if (!err) return;
  snprintf(err->file, sizeof err->file, "%s", file ? file : "");
  err->line = line;
  err->column = col;
  snprintf(err->field, sizeof err->field, "%s", field ? field : "");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->message, sizeof err->message, fmt, ap);
  va_end(ap);
}

void pp_scenario_defaults(pp_scenario *s) {
  memset(s, 0, sizeof *s);
  snprintf(s->name, sizeof s->name, "unnamed");
  s->seed = 1;
  s->process = PP_ARRIVALS_POISSON;
  s->client_timeout_ns = 20000000000ull;
  s->slo_ns = 150000000ull;
  s->drain_limit_ns = 600000000000ull;
  s->cores = 8;
  s->mem_worker_bytes = 80000000ull;
  s->mem_thread_bytes = 2000000ull;
  s->mem_fiber_bytes = 640000ull;
  /* notebooks/ractors: 4 slots' Ruby PSS 20.2MB as Ractors, 18.9MB as threads: a Ractor slot
   * costs (20.2 - 18.9) / 4 = 325KB more than a thread slot */
  s->mem_ractor_bytes = 2000000ull + 325000ull;
  s->switch_thread_ns = 22000;
  s->switch_fiber_ns = 100;
  s->slot_delay_ns = 1000000ull;
  s->slot_delay_ractor_ns = 10300000ull; /* notebooks/ractors: POST /slots 2->6 connected */
  s->gvl_timeslice_ns = 100000000ull;
  s->gvl_measured = 1;
  s->cpu_measured = 1;
  s->boot.kind = PP_DIST_LOGNORMAL;
  s->boot.mean_ns = 2000000000ull;
  s->boot.sd_ns = 500000000ull;
  s->mem_shared_bytes = 0;
  s->mem_standby_bytes = -1;
  s->activation.kind = PP_DIST_LOGNORMAL;
  s->activation.mean_ns = 10000000ull;
  s->activation.sd_ns = 5000000ull;
  s->hosts.count = 2;
  s->hosts.boot.kind = PP_DIST_LOGNORMAL;
  s->hosts.boot.mean_ns = 30000000000ull;
  s->hosts.boot.sd_ns = 5000000000ull;
}

int pp_scenario_find_cluster(const pp_scenario *s, const char *name) {
  for (uint32_t i = 0; i < s->n_clusters; i++)
    if (!strcmp(s->clusters[i].name, name)) return (int)i;
  return -1;
}

void pp_scenario_dispose(pp_scenario *s) {
  free(s->trace_ns);
  s->trace_ns = NULL;
  s->trace_len = 0;
}

int pp_scenario_find_config(const pp_scenario *s, const char *name) {
  for (uint32_t i = 0; i < s->n_configs; i++)
    if (strcmp(s->configs[i].name, name) == 0) return (int)i;
  return -1;
}

double pp_dist_mean_ns(const pp_dist *d) {
  switch (d->kind) {
  case PP_DIST_UNIFORM: return ((double)d->min_ns + (double)d->max_ns) / 2.0;
  default: return (double)d->mean_ns;
  }
}

/* ---- tree walking ---------------------------------------------------------------------- */

typedef struct walk {
  yaml_document_t *doc;
  const char *file;
  pp_scn_error *err;
} walk;

/* "a" + "." + "b" truncated to cap (field names in errors; never fails). */
static void field_join(char *out, size_t cap, const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b), n = 0;
  for (size_t i = 0; i < la && n + 1 < cap; i++)
    out[n++] = a[i];
  if (la && n + 1 < cap) out[n++] = '.';
  for (size_t i = 0; i < lb && n + 1 < cap; i++)
    out[n++] = b[i];
  out[n] = 0;
}

static yaml_node_t *node_of(walk *w, int id) {
  return yaml_document_get_node(w->doc, id);
}

static int fail(walk *w, const yaml_node_t *n, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(walk *w, const yaml_node_t *n, const char *field, const char *fmt, ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  set_err(w->err, w->file, n ? (int)n->start_mark.line + 1 : 0,
          n ? (int)n->start_mark.column + 1 : 0, field, "%s", msg);
  return PP_SIM_EINVAL;
}

static const char *scalar(const yaml_node_t *n) {
  return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static int want_scalar(walk *w, const yaml_node_t *n, const char *field, const char **out) {
  *out = scalar(n);
  if (!*out) return fail(w, n, field, "expected a single value, got a list or mapping");
  return 0;
}

static int want_mapping(walk *w, const yaml_node_t *n, const char *field) {
  if (!n || n->type != YAML_MAPPING_NODE) return fail(w, n, field, "expected a mapping");
  return 0;
}

static int get_duration(walk *w, const yaml_node_t *n, const char *field, uint64_t *out) {
  const char *v;
  if (want_scalar(w, n, field, &v)) return PP_SIM_EINVAL;
  if (pp_units_parse_duration(v, out))
    return fail(w, n, field, "expected a duration like 25ms, 3s or 1m, got \"%s\"", v);
  return 0;
}

static int get_bytes(walk *w, const yaml_node_t *n, const char *field, uint64_t *out) {
  const char *v;
  if (want_scalar(w, n, field, &v)) return PP_SIM_EINVAL;
  if (pp_units_parse_bytes(v, out))
    return fail(w, n, field, "expected a size like 80MB or 512MiB, got \"%s\"", v);
  return 0;
}

static int get_double(walk *w, const yaml_node_t *n, const char *field, double lo, double hi,
                      double *out) {
  const char *v;
  if (want_scalar(w, n, field, &v)) return PP_SIM_EINVAL;
  if (pp_units_parse_double(v, out)) return fail(w, n, field, "expected a number, got \"%s\"", v);
  if (*out < lo || *out > hi) return fail(w, n, field, "%g is out of range [%g, %g]", *out, lo, hi);
  return 0;
}

static int get_u32(walk *w, const yaml_node_t *n, const char *field, uint32_t lo, uint32_t hi,
                   uint32_t *out) {
  const char *v;
  if (want_scalar(w, n, field, &v)) return PP_SIM_EINVAL;
  char *end = NULL;
  unsigned long long x = strtoull(v, &end, 10);
  if (!*v || *end || v[0] == '-')
    return fail(w, n, field, "expected a whole number, got \"%s\"", v);
  if (x < lo || x > hi) return fail(w, n, field, "%llu is out of range [%u, %u]", x, lo, hi);
  *out = (uint32_t)x;
  return 0;
}

static int get_u64(walk *w, const yaml_node_t *n, const char *field, uint64_t *out) {
  const char *v;
  if (want_scalar(w, n, field, &v)) return PP_SIM_EINVAL;
  char *end = NULL;
  unsigned long long x = strtoull(v, &end, 10);
  if (!*v || *end || v[0] == '-')
    return fail(w, n, field, "expected a whole number, got \"%s\"", v);
  *out = x;
  return 0;
}

static int get_bool(walk *w, const yaml_node_t *n, const char *field, int *out) {
  const char *v;
  if (want_scalar(w, n, field, &v)) return PP_SIM_EINVAL;
  if (!strcmp(v, "true") || !strcmp(v, "yes") || !strcmp(v, "on"))
    *out = 1;
  else if (!strcmp(v, "false") || !strcmp(v, "no") || !strcmp(v, "off"))
    *out = 0;
  else
    return fail(w, n, field, "expected true or false, got \"%s\"", v);
  return 0;
}

static int get_string(walk *w, const yaml_node_t *n, const char *field, char *out, size_t cap) {
  const char *v;
  if (want_scalar(w, n, field, &v)) return PP_SIM_EINVAL;
  if (strlen(v) >= cap) return fail(w, n, field, "longer than %zu characters", cap - 1);
  snprintf(out, cap, "%s", v);
  return 0;
}

#define FOR_PAIRS(w, map, pair)                                                                    \
  for (yaml_node_pair_t *pair = (map)->data.mapping.pairs.start;                                   \
       pair < (map)->data.mapping.pairs.top; pair++)

/* A distribution: a bare duration (fixed) or {dist, mean, sd, min, max}. */
static int get_dist(walk *w, const yaml_node_t *n, const char *field, pp_dist *out) {
  char f[128];
  memset(out, 0, sizeof *out);
  if (n && n->type == YAML_SCALAR_NODE) {
    out->kind = PP_DIST_FIXED;
    return get_duration(w, n, field, &out->mean_ns);
  }
  if (want_mapping(w, n, field)) return PP_SIM_EINVAL;
  int have_dist = 0, have_mean = 0, have_sd = 0, have_min = 0, have_max = 0;
  FOR_PAIRS(w, n, p) {
    yaml_node_t *k = node_of(w, p->key), *v = node_of(w, p->value);
    const char *key = scalar(k);
    if (!key) return fail(w, k, field, "keys must be plain names");
    field_join(f, sizeof f, field, key);
    int rc = 0;
    if (!strcmp(key, "dist")) {
      const char *d;
      if ((rc = want_scalar(w, v, f, &d))) return rc;
      if (!strcmp(d, "fixed"))
        out->kind = PP_DIST_FIXED;
      else if (!strcmp(d, "exponential"))
        out->kind = PP_DIST_EXPONENTIAL;
      else if (!strcmp(d, "lognormal"))
        out->kind = PP_DIST_LOGNORMAL;
      else if (!strcmp(d, "uniform"))
        out->kind = PP_DIST_UNIFORM;
      else
        return fail(w, v, f, "unknown distribution \"%s\" (fixed, exponential, lognormal, uniform)",
                    d);
      have_dist = 1;
    } else if (!strcmp(key, "mean")) {
      rc = get_duration(w, v, f, &out->mean_ns), have_mean = 1;
    } else if (!strcmp(key, "sd")) {
      rc = get_duration(w, v, f, &out->sd_ns), have_sd = 1;
    } else if (!strcmp(key, "min")) {
      rc = get_duration(w, v, f, &out->min_ns), have_min = 1;
    } else if (!strcmp(key, "max")) {
      rc = get_duration(w, v, f, &out->max_ns), have_max = 1;
    } else {
      return fail(w, k, f, "unknown field (expected dist, mean, sd, min, max)");
    }
    if (rc) return rc;
  }
  if (!have_dist)
    return fail(w, n, field, "missing `dist:` (fixed, exponential, lognormal, uniform)");
  switch (out->kind) {
  case PP_DIST_FIXED:
  case PP_DIST_EXPONENTIAL:
    if (!have_mean) return fail(w, n, field, "missing `mean:`");
    break;
  case PP_DIST_LOGNORMAL:
    if (!have_mean || !have_sd) return fail(w, n, field, "lognormal needs `mean:` and `sd:`");
    if (out->mean_ns == 0) return fail(w, n, field, "lognormal mean must be > 0");
    break;
  case PP_DIST_UNIFORM:
    if (!have_min || !have_max) return fail(w, n, field, "uniform needs `min:` and `max:`");
    if (out->min_ns > out->max_ns) return fail(w, n, field, "uniform min is above max");
    break;
  }
  return 0;
}

static int parse_phase(walk *w, const yaml_node_t *n, const char *field, pp_phase *ph) {
  char f[128];
  if (want_mapping(w, n, field)) return PP_SIM_EINVAL;
  int have_rate = 0, have_dur = 0;
  memset(ph, 0, sizeof *ph);
  FOR_PAIRS(w, n, p) {
    yaml_node_t *k = node_of(w, p->key), *v = node_of(w, p->value);
    const char *key = scalar(k);
    if (!key) return fail(w, k, field, "keys must be plain names");
    field_join(f, sizeof f, field, key);
    int rc = 0;
    if (!strcmp(key, "rate"))
      rc = get_double(w, v, f, 0, 1e7, &ph->rate), have_rate = 1;
    else if (!strcmp(key, "to"))
      rc = get_double(w, v, f, 0, 1e7, &ph->rate_end), ph->has_ramp = 1;
    else if (!strcmp(key, "duration"))
      rc = get_duration(w, v, f, &ph->duration_ns), have_dur = 1;
    else
      return fail(w, k, f, "unknown field (expected rate, to, duration)");
    if (rc) return rc;
  }
  if (!have_rate) return fail(w, n, field, "missing `rate:` (requests per second)");
  if (!have_dur || ph->duration_ns == 0) return fail(w, n, field, "missing or zero `duration:`");
  if (!ph->has_ramp) ph->rate_end = ph->rate;
  return 0;
}

static int parse_arrivals(walk *w, const yaml_node_t *n, pp_scenario *s) {
  char f[128];
  if (want_mapping(w, n, "arrivals")) return PP_SIM_EINVAL;
  FOR_PAIRS(w, n, p) {
    yaml_node_t *k = node_of(w, p->key), *v = node_of(w, p->value);
    const char *key = scalar(k);
    if (!key) return fail(w, k, "arrivals", "keys must be plain names");
    snprintf(f, sizeof f, "arrivals.%s", key);
    int rc = 0;
    if (!strcmp(key, "process")) {
      const char *d;
      if ((rc = want_scalar(w, v, f, &d))) return rc;
      if (!strcmp(d, "poisson"))
        s->process = PP_ARRIVALS_POISSON;
      else if (!strcmp(d, "uniform"))
        s->process = PP_ARRIVALS_UNIFORM;
      else if (!strcmp(d, "trace"))
        s->process = PP_ARRIVALS_TRACE;
      else
        return fail(w, v, f, "unknown process \"%s\" (poisson, uniform, trace)", d);
    } else if (!strcmp(key, "trace")) {
      rc = get_string(w, v, f, s->trace_path, sizeof s->trace_path);
    } else if (!strcmp(key, "phases")) {
      if (!v || v->type != YAML_SEQUENCE_NODE) return fail(w, v, f, "expected a list of phases");
      s->n_phases = 0;
      for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top;
           it++) {
        if (s->n_phases == PP_SCN_MAX_PHASES)
          return fail(w, v, f, "more than %d phases", PP_SCN_MAX_PHASES);
        char pf[128];
        snprintf(pf, sizeof pf, "arrivals.phases[%u]", s->n_phases);
        if ((rc = parse_phase(w, node_of(w, *it), pf, &s->phases[s->n_phases]))) return rc;
        s->n_phases++;
      }
    } else {
      return fail(w, k, f, "unknown field (expected process, phases, trace)");
    }
    if (rc) return rc;
  }
  return 0;
}

static int parse_kind(walk *w, const yaml_node_t *n, const char *field, pp_request_kind *kd) {
  char f[128];
  if (want_mapping(w, n, field)) return PP_SIM_EINVAL;
  memset(kd, 0, sizeof *kd);
  kd->weight = 1;
  int have_path = 0;
  FOR_PAIRS(w, n, p) {
    yaml_node_t *k = node_of(w, p->key), *v = node_of(w, p->value);
    const char *key = scalar(k);
    if (!key) return fail(w, k, field, "keys must be plain names");
    field_join(f, sizeof f, field, key);
    int rc = 0;
    if (!strcmp(key, "path")) {
      rc = get_string(w, v, f, kd->path, sizeof kd->path), have_path = 1;
      if (!rc && kd->path[0] != '/') return fail(w, v, f, "a path starts with '/'");
    } else if (!strcmp(key, "weight"))
      rc = get_double(w, v, f, 0, 1e9, &kd->weight);
    else if (!strcmp(key, "cpu"))
      rc = get_dist(w, v, f, &kd->cpu);
    else if (!strcmp(key, "io"))
      rc = get_dist(w, v, f, &kd->io);
    else
      return fail(w, k, f, "unknown field (expected path, weight, cpu, io)");
    if (rc) return rc;
  }
  if (!have_path) return fail(w, n, field, "missing `path:`");
  return 0;
}

static int parse_memory(walk *w, const yaml_node_t *n, pp_scenario *s) {
  char f[128];
  if (want_mapping(w, n, "machine.memory")) return PP_SIM_EINVAL;
  FOR_PAIRS(w, n, p) {
    yaml_node_t *k = node_of(w, p->key), *v = node_of(w, p->value);
    const char *key = scalar(k);
    if (!key) return fail(w, k, "machine.memory", "keys must be plain names");
    snprintf(f, sizeof f, "machine.memory.%s", key);
    int rc;
    if (!strcmp(key, "worker"))
      rc = get_bytes(w, v, f, &s->mem_worker_bytes);
    else if (!strcmp(key, "per_thread"))
      rc = get_bytes(w, v, f, &s->mem_thread_bytes);
    else if (!strcmp(key, "per_fiber"))
      rc = get_bytes(w, v, f, &s->mem_fiber_bytes);
    else if (!strcmp(key, "per_ractor"))
      rc = get_bytes(w, v, f, &s->mem_ractor_bytes);
    else if (!strcmp(key, "shared"))
      rc = get_bytes(w, v, f, &s->mem_shared_bytes);
    else if (!strcmp(key, "standby")) {
      uint64_t b = 0;
      rc = get_bytes(w, v, f, &b);
      if (!rc) s->mem_standby_bytes = b > INT64_MAX ? INT64_MAX : (int64_t)b;
    } else
      return fail(w, k, f,
                  "unknown field (expected worker, per_thread, per_fiber, per_ractor, shared, "
                  "standby)");
    if (rc) return rc;
  }
  return 0;
}

static int parse_machine(walk *w, const yaml_node_t *n, pp_scenario *s) {
  char f[128];
  if (want_mapping(w, n, "machine")) return PP_SIM_EINVAL;
  FOR_PAIRS(w, n, p) {
    yaml_node_t *k = node_of(w, p->key), *v = node_of(w, p->value);
    const char *key = scalar(k);
    if (!key) return fail(w, k, "machine", "keys must be plain names");
    snprintf(f, sizeof f, "machine.%s", key);
    int rc;
    if (!strcmp(key, "cores"))
      rc = get_u32(w, v, f, 1, 4096, &s->cores);
    else if (!strcmp(key, "background"))
      rc = get_double(w, v, f, 0, 4096, &s->background);
    else if (!strcmp(key, "overhead"))
      rc = get_duration(w, v, f, &s->overhead_ns);
    else if (!strcmp(key, "memory"))
      rc = parse_memory(w, v, s);
    else if (!strcmp(key, "gvl_timeslice")) {
      rc = get_duration(w, v, f, &s->gvl_timeslice_ns);
      if (!rc && s->gvl_timeslice_ns == 0) return fail(w, v, f, "must be > 0");
    } else if (!strcmp(key, "gvl_measured"))
      rc = get_bool(w, v, f, &s->gvl_measured);
    else if (!strcmp(key, "cpu_measured"))
      rc = get_bool(w, v, f, &s->cpu_measured);
    else if (!strcmp(key, "boot"))
      rc = get_dist(w, v, f, &s->boot);
    else if (!strcmp(key, "activation"))
      rc = get_dist(w, v, f, &s->activation);
    else if (!strcmp(key, "slot_delay"))
      rc = get_duration(w, v, f, &s->slot_delay_ns);
    else if (!strcmp(key, "slot_delay_ractor"))
      rc = get_duration(w, v, f, &s->slot_delay_ractor_ns);
    else if (!strcmp(key, "switch_thread"))
      rc = get_duration(w, v, f, &s->switch_thread_ns);
    else if (!strcmp(key, "switch_fiber"))
      rc = get_duration(w, v, f, &s->switch_fiber_ns);
    else
      return fail(w, k, f,
                  "unknown field (expected cores, background, overhead, memory, gvl_timeslice, "
                  "gvl_measured, boot, "
                  "activation, slot_delay, slot_delay_ractor, switch_thread, switch_fiber, "
                  "cpu_measured)");
    if (rc) return rc;
  }
  return 0;
}

static int parse_client(walk *w, const yaml_node_t *n, pp_scenario *s) {
  char f[128];
  if (want_mapping(w, n, "client")) return PP_SIM_EINVAL;
  FOR_PAIRS(w, n, p) {
    yaml_node_t *k = node_of(w, p->key), *v = node_of(w, p->value);
    const char *key = scalar(k);
    if (!key) return fail(w, k, "client", "keys must be plain names");
    snprintf(f, sizeof f, "client.%s", key);
    int rc;
    if (!strcmp(key, "timeout"))
      rc = get_duration(w, v, f, &s->client_timeout_ns);
    else if (!strcmp(key, "slo"))
      rc = get_duration(w, v, f, &s->slo_ns);
    else
      return fail(w, k, f, "unknown field (expected timeout, slo)");
    if (rc) return rc;
    if (v && !strcmp(key, "timeout") && s->client_timeout_ns == 0)
      return fail(w, v, f, "must be > 0");
  }
  return 0;
}

/* Inline policy: a mapping of policy fields (a nested map one level deep becomes dotted names,
 * as `threads:` and `shed:` do in a policy file), applied over the defaults through
 * pp_policy_set so the names and value syntax are exactly the policy file's.
 *
 * libyaml's loader resolves aliases to shared nodes and registers an anchor when its mapping
 * starts, so `&p {x: *p}` is a mapping that contains itself. Two rules keep the walk finite
 * and linear in the text: a mapping nested below a section is an error (no recursion beyond
 * depth 1), and a field may be set only once (`set_line`), so aliasing a section again fails at
 * its first field instead of re-applying it. */
#define POLICY_FIELDS_MAX 64

typedef struct policy_walk {
  int set_line[POLICY_FIELDS_MAX]; /* line where each pp_policy_field_names[i] was set, 0 = not */
} policy_walk;

static int policy_field_index(const char *name) {
  for (int i = 0; i < POLICY_FIELDS_MAX && pp_policy_field_names[i]; i++)
    if (strcmp(pp_policy_field_names[i], name) == 0) return i;
  return -1;
}

static int apply_policy_map(walk *w, policy_walk *pw, const yaml_node_t *n, const char *prefix,
                            int depth, const char *field, pp_policy *pol) {
  FOR_PAIRS(w, n, p) {
    yaml_node_t *k = node_of(w, p->key), *v = node_of(w, p->value);
    const char *key = scalar(k);
    if (!key) return fail(w, k, field, "keys must be plain names");
    char name[96], f[160];
    snprintf(name, sizeof name, "%s%s", prefix, key);
    snprintf(f, sizeof f, "%s.%s", field, name);
    if (v && v->type == YAML_MAPPING_NODE) {
      if (depth > 0)
        return fail(w, v, f,
                    "policy sections nest one level at most (threads:, shed:); expected a value");
      char sub[96];
      field_join(sub, sizeof sub, name, "");
      int rc = apply_policy_map(w, pw, v, sub, depth + 1, field, pol);
      if (rc) return rc;
      continue;
    }
    const char *val;
    if (want_scalar(w, v, f, &val)) return PP_SIM_EINVAL;
    int idx = policy_field_index(name);
    if (idx >= 0 && pw->set_line[idx])
      return fail(w, v, f, "set twice (first on line %d)", pw->set_line[idx]);
    pp_policy_error perr;
    memset(&perr, 0, sizeof perr);
    int rc = pp_policy_set(pol, name, val, &perr);
    if (rc)
      return fail(w, rc == PP_CTL_ENOENT ? k : v, f, "%s",
                  perr.message[0] ? perr.message : pp_ctl_strerror(rc));
    if (idx >= 0) pw->set_line[idx] = (int)v->start_mark.line + 1;
  }
  return 0;
}

static int parse_config(walk *w, const yaml_node_t *n, const char *field, pp_config *c) {
  char f[128];
  if (want_mapping(w, n, field)) return PP_SIM_EINVAL;
  memset(c, 0, sizeof *c);
  c->server = PP_SERVER_PUMAPLUS;
  c->workers = 1;
  c->threads = 5;
  pp_policy_defaults(&c->policy);
  int have_name = 0, have_server = 0, have_queue = 0, have_policy = 0;
  const yaml_node_t *policy_node = NULL;
  FOR_PAIRS(w, n, p) {
    yaml_node_t *k = node_of(w, p->key), *v = node_of(w, p->value);
    const char *key = scalar(k);
    if (!key) return fail(w, k, field, "keys must be plain names");
    field_join(f, sizeof f, field, key);
    int rc = 0;
    if (!strcmp(key, "name"))
      rc = get_string(w, v, f, c->name, sizeof c->name), have_name = 1;
    else if (!strcmp(key, "server")) {
      const char *d;
      if ((rc = want_scalar(w, v, f, &d))) return rc;
      if (!strcmp(d, "puma"))
        c->server = PP_SERVER_PUMA;
      else if (!strcmp(d, "pumaplus") || !strcmp(d, "puma-plus"))
        c->server = PP_SERVER_PUMAPLUS;
      else
        return fail(w, v, f, "unknown server \"%s\" (puma, pumaplus)", d);
      have_server = 1;
    } else if (!strcmp(key, "queue")) {
      const char *d;
      if ((rc = want_scalar(w, v, f, &d))) return rc;
      if (!strcmp(d, "fifo"))
        c->queue = PP_QUEUE_FIFO;
      else if (!strcmp(d, "per_worker"))
        c->queue = PP_QUEUE_PER_WORKER;
      else
        return fail(w, v, f, "unknown queue model \"%s\" (fifo, per_worker)", d);
      have_queue = 1;
    } else if (!strcmp(key, "workers"))
      rc = get_u32(w, v, f, 0, 1024, &c->workers);
    else if (!strcmp(key, "threads"))
      rc = get_u32(w, v, f, 1, PP_SCN_MAX_THREADS, &c->threads);
    else if (!strcmp(key, "slots")) {
      const char *d;
      if ((rc = want_scalar(w, v, f, &d))) return rc;
      if (!strcmp(d, "thread"))
        c->fibers = 0, c->ractors = 0;
      else if (!strcmp(d, "fiber"))
        c->fibers = 1, c->ractors = 0;
      else if (!strcmp(d, "ractor"))
        c->fibers = 0, c->ractors = 1;
      else
        return fail(w, v, f, "unknown slot kind \"%s\" (thread, fiber, ractor)", d);
    } else if (!strcmp(key, "autoscale"))
      rc = get_bool(w, v, f, &c->autoscale);
    else if (!strcmp(key, "boot"))
      rc = get_dist(w, v, f, &c->boot), c->has_boot = 1;
    else if (!strcmp(key, "policy")) {
      have_policy = 1;
      policy_node = v;
      c->policy_line = (int)v->start_mark.line + 1;
      if (v->type == YAML_SCALAR_NODE) {
        rc = get_string(w, v, f, c->policy_path, sizeof c->policy_path);
      } else if (v->type == YAML_MAPPING_NODE) {
        policy_walk pw;
        memset(&pw, 0, sizeof pw);
        rc = apply_policy_map(w, &pw, v, "", 0, f, &c->policy);
      } else {
        return fail(w, v, f, "expected a policy file path or an inline mapping");
      }
    } else {
      return fail(w, k, f,
                  "unknown field (expected name, server, queue, workers, threads, slots, "
                  "autoscale, policy, boot)");
    }
    if (rc) return rc;
  }
  if (!have_name) return fail(w, n, field, "missing `name:`");
  if (!have_server) return fail(w, n, field, "missing `server:` (puma or pumaplus)");
  if (!have_queue) c->queue = c->server == PP_SERVER_PUMA ? PP_QUEUE_PER_WORKER : PP_QUEUE_FIFO;
  if (have_policy && !c->autoscale)
    return fail(w, policy_node, field, "a policy is only used with `autoscale: true`");
  if (c->autoscale && c->server != PP_SERVER_PUMAPLUS)
    return fail(w, n, field, "autoscale needs `server: pumaplus` (puma cannot autoscale)");
  if (!c->autoscale && c->workers == 0)
    return fail(w, n, field, "a static configuration needs at least 1 worker");
  if (have_policy && !c->policy_path[0]) {
    pp_policy_error perr;
    memset(&perr, 0, sizeof perr);
    if (pp_policy_validate(&c->policy, &perr))
      return fail(w, policy_node, field, "policy: %s%s%s", perr.field, perr.field[0] ? ": " : "",
                  perr.message);
  }
  return 0;
}

/* ---- cluster mode: hosts: and clusters: ------------------------------------------------- */

static int parse_hosts(walk *w, const yaml_node_t *n, pp_scenario *s) {
  char f[128];
  if (want_mapping(w, n, "hosts")) return PP_SIM_EINVAL;
  s->hosts.present = 1;
  int have_config = 0;
  FOR_PAIRS(w, n, p) {
    yaml_node_t *k = node_of(w, p->key), *v = node_of(w, p->value);
    const char *key = scalar(k);
    if (!key) return fail(w, k, "hosts", "keys must be plain names");
    field_join(f, sizeof f, "hosts", key);
    int rc = 0;
    if (!strcmp(key, "config"))
      rc = get_string(w, v, f, s->hosts.config, sizeof s->hosts.config), have_config = 1;
    else if (!strcmp(key, "count"))
      rc = get_u32(w, v, f, 1, PP_SCN_MAX_HOSTS, &s->hosts.count);
    else if (!strcmp(key, "cores"))
      rc = get_u32(w, v, f, 1, 1024, &s->hosts.cores);
    else if (!strcmp(key, "boot"))
      rc = get_dist(w, v, f, &s->hosts.boot);
    else
      return fail(w, k, f, "unknown field (expected config, count, cores, boot)");
    if (rc) return rc;
  }
  if (!have_config)
    return fail(w, n, "hosts.config", "missing `config:` (the configs: entry every host runs)");
  return 0;
}

/* scale_up: / scale_down: {window, select, policies: [{pods|percent: N, period: D}]} */
static int parse_direction(walk *w, const yaml_node_t *n, const char *field, pp_hpa_direction *d) {
  char f[128];
  if (want_mapping(w, n, field)) return PP_SIM_EINVAL;
  FOR_PAIRS(w, n, p) {
    yaml_node_t *k = node_of(w, p->key), *v = node_of(w, p->value);
    const char *key = scalar(k);
    if (!key) return fail(w, k, field, "keys must be plain names");
    field_join(f, sizeof f, field, key);
    int rc = 0;
    if (!strcmp(key, "window"))
      rc = get_duration(w, v, f, &d->window_ns);
    else if (!strcmp(key, "select")) {
      const char *x;
      if ((rc = want_scalar(w, v, f, &x))) return rc;
      d->select_min = d->disabled = 0;
      if (!strcmp(x, "min"))
        d->select_min = 1;
      else if (!strcmp(x, "disabled"))
        d->disabled = 1;
      else if (strcmp(x, "max"))
        return fail(w, v, f, "unknown selectPolicy \"%s\" (max, min, disabled)", x);
    } else if (!strcmp(key, "policies")) {
      if (!v || v->type != YAML_SEQUENCE_NODE)
        return fail(w, v, f, "expected a list like [{percent: 100, period: 15s}]");
      d->n_policies = 0;
      for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top;
           it++) {
        char pf[160];
        snprintf(pf, sizeof pf, "%s[%u]", f, d->n_policies);
        yaml_node_t *pn = node_of(w, *it);
        if (d->n_policies == PP_HPA_MAX_POLICIES)
          return fail(w, pn, pf, "more than %d policies", PP_HPA_MAX_POLICIES);
        if (want_mapping(w, pn, pf)) return PP_SIM_EINVAL;
        pp_hpa_rate_policy *pol = &d->policies[d->n_policies];
        pol->period_ns = 15000000000ull;
        int have_kind = 0;
        FOR_PAIRS(w, pn, q) {
          yaml_node_t *qk = node_of(w, q->key), *qv = node_of(w, q->value);
          const char *qkey = scalar(qk);
          char qf[200];
          if (!qkey) return fail(w, qk, pf, "keys must be plain names");
          snprintf(qf, sizeof qf, "%s.%s", pf, qkey);
          if (!strcmp(qkey, "pods") || !strcmp(qkey, "percent")) {
            if (have_kind) return fail(w, qk, qf, "a policy is either pods or percent, not both");
            pol->kind = !strcmp(qkey, "pods") ? PP_HPA_PODS : PP_HPA_PERCENT;
            if ((rc = get_u32(w, qv, qf, 1, 100000, &pol->value))) return rc;
            have_kind = 1;
          } else if (!strcmp(qkey, "period")) {
            if ((rc = get_duration(w, qv, qf, &pol->period_ns))) return rc;
            if (pol->period_ns == 0) return fail(w, qv, qf, "must be more than 0");
          } else {
            return fail(w, qk, qf, "unknown field (expected pods or percent, period)");
          }
        }
        if (!have_kind) return fail(w, pn, pf, "missing `pods:` or `percent:`");
        d->n_policies++;
      }
      if (d->n_policies == 0) return fail(w, v, f, "at least one policy is needed");
    } else {
      return fail(w, k, f, "unknown field (expected window, select, policies)");
    }
    if (rc) return rc;
  }
  return 0;
}

static int metric_of(walk *w, const yaml_node_t *v, const char *f, pp_cluster_metric *m) {
  const char *x;
  if (want_scalar(w, v, f, &x)) return PP_SIM_EINVAL;
  if (!strcmp(x, "queue_p95") || !strcmp(x, "queue"))
    *m = PP_CMETRIC_QUEUE;
  else if (!strcmp(x, "cpu"))
    *m = PP_CMETRIC_CPU;
  else if (!strcmp(x, "busy"))
    *m = PP_CMETRIC_BUSY;
  else
    return fail(w, v, f, "unknown metric \"%s\" (queue_p95, cpu, busy)", x);
  return 0;
}

/* A target: a duration for the queue metric, a utilisation (60% or 0.6) for cpu and busy. */
static int target_of(walk *w, const yaml_node_t *v, const char *f, pp_cluster_metric m,
                     double *out) {
  if (m == PP_CMETRIC_QUEUE) {
    uint64_t ns;
    if (get_duration(w, v, f, &ns)) return PP_SIM_EINVAL;
    if (ns == 0) return fail(w, v, f, "must be more than 0");
    *out = (double)ns / 1e9;
    return 0;
  }
  const char *x;
  if (want_scalar(w, v, f, &x)) return PP_SIM_EINVAL;
  size_t xl = strlen(x);
  double val;
  char num[64];
  int pct = xl > 1 && x[xl - 1] == '%';
  snprintf(num, sizeof num, "%.*s", (int)(pct ? xl - 1 : xl), x);
  if (pp_units_parse_double(num, &val))
    return fail(w, v, f, "expected a utilisation like 60%% or 0.6, got \"%s\"", x);
  if (pct) val /= 100.0;
  if (!(val > 0 && val <= 1))
    return fail(w, v, f, "a utilisation target is in (0, 100%%], got \"%s\"", x);
  *out = val;
  return 0;
}

/* One {metric, target} mapping (an entry of `metrics:`). */
static int parse_metric_entry(walk *w, const yaml_node_t *n, const char *field,
                              pp_cluster_metric *m, double *target) {
  char f[128];
  if (want_mapping(w, n, field)) return PP_SIM_EINVAL;
  const yaml_node_t *tn = NULL;
  *m = PP_CMETRIC_NONE;
  FOR_PAIRS(w, n, p) {
    yaml_node_t *k = node_of(w, p->key), *v = node_of(w, p->value);
    const char *key = scalar(k);
    if (!key) return fail(w, k, field, "keys must be plain names");
    field_join(f, sizeof f, field, key);
    if (!strcmp(key, "metric")) {
      if (metric_of(w, v, f, m)) return PP_SIM_EINVAL;
    } else if (!strcmp(key, "target")) {
      tn = v;
    } else {
      return fail(w, k, f, "unknown field (expected metric, target)");
    }
  }
  field_join(f, sizeof f, field, "metric");
  if (*m == PP_CMETRIC_NONE) return fail(w, n, f, "missing `metric:` (queue_p95, cpu or busy)");
  field_join(f, sizeof f, field, "target");
  if (!tn) return fail(w, n, f, "missing `target:`");
  return target_of(w, tn, f, *m, target);
}

static int parse_cluster_autoscale(walk *w, const yaml_node_t *n, const char *field,
                                   pp_cluster_cfg *c) {
  char f[128];
  if (want_mapping(w, n, field)) return PP_SIM_EINVAL;
  const yaml_node_t *target_node = NULL, *metrics_node = NULL;
  int have_min = 0, have_max = 0;
  FOR_PAIRS(w, n, p) {
    yaml_node_t *k = node_of(w, p->key), *v = node_of(w, p->value);
    const char *key = scalar(k);
    if (!key) return fail(w, k, field, "keys must be plain names");
    field_join(f, sizeof f, field, key);
    int rc = 0;
    if (!strcmp(key, "metric"))
      rc = metric_of(w, v, f, &c->metric);
    else if (!strcmp(key, "target"))
      target_node = v;
    else if (!strcmp(key, "metrics")) {
      metrics_node = v;
      if (!v || v->type != YAML_SEQUENCE_NODE)
        return fail(w, v, f, "expected a list like [{metric: queue_p95, target: 25ms}]");
      c->n_metrics = 0;
      for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top;
           it++) {
        char mf[128];
        snprintf(mf, sizeof mf, "%.100s[%u]", f, c->n_metrics);
        yaml_node_t *mn = node_of(w, *it);
        if (c->n_metrics == PP_CLUSTER_MAX_METRICS)
          return fail(w, mn, mf, "more than %d metrics", PP_CLUSTER_MAX_METRICS);
        if ((rc = parse_metric_entry(w, mn, mf, &c->metrics[c->n_metrics],
                                     &c->targets[c->n_metrics])))
          return rc;
        c->n_metrics++;
      }
      if (c->n_metrics == 0) return fail(w, v, f, "at least one metric is needed");
    } else if (!strcmp(key, "quantile"))
      rc = get_double(w, v, f, 0.01, 0.999, &c->quantile);
    else if (!strcmp(key, "min"))
      rc = get_u32(w, v, f, 1, PP_SCN_MAX_HOSTS, &c->hpa.min_replicas), have_min = 1;
    else if (!strcmp(key, "max"))
      rc = get_u32(w, v, f, 1, PP_SCN_MAX_HOSTS, &c->hpa.max_replicas), have_max = 1;
    else if (!strcmp(key, "tolerance"))
      rc = get_double(w, v, f, 0, 0.99, &c->hpa.tolerance);
    else if (!strcmp(key, "sync_period"))
      rc = get_duration(w, v, f, &c->sync_ns);
    else if (!strcmp(key, "scrape_interval"))
      rc = get_duration(w, v, f, &c->scrape_ns);
    else if (!strcmp(key, "rate_window"))
      rc = get_duration(w, v, f, &c->rate_window_ns);
    else if (!strcmp(key, "scale_up"))
      rc = parse_direction(w, v, f, &c->hpa.up);
    else if (!strcmp(key, "scale_down"))
      rc = parse_direction(w, v, f, &c->hpa.down);
    else
      return fail(w, k, f,
                  "unknown field (expected metric, target, metrics, quantile, min, max, "
                  "tolerance, sync_period, scrape_interval, rate_window, scale_up, scale_down)");
    if (rc) return rc;
  }
  char tf[128];
  if (metrics_node) {
    if (c->metric != PP_CMETRIC_NONE || target_node)
      return fail(w, metrics_node, field, "give either metric/target or metrics:, not both");
    c->metric = c->metrics[0];
    c->target = c->targets[0];
  } else {
    field_join(tf, sizeof tf, field, "metric");
    if (c->metric == PP_CMETRIC_NONE)
      return fail(w, n, tf, "missing `metric:` (queue_p95, cpu or busy) or `metrics:`");
    field_join(tf, sizeof tf, field, "target");
    if (!target_node) return fail(w, n, tf, "missing `target:`");
    if (target_of(w, target_node, tf, c->metric, &c->target)) return PP_SIM_EINVAL;
    c->n_metrics = 1;
    c->metrics[0] = c->metric;
    c->targets[0] = c->target;
  }
  if (!c->sync_ns || !c->scrape_ns || !c->rate_window_ns)
    return fail(w, n, field, "sync_period, scrape_interval and rate_window must be more than 0");
  if (c->rate_window_ns < 2 * c->scrape_ns)
    return fail(w, n, field,
                "rate_window must hold two scrapes (at least 2 x scrape_interval), as rate() "
                "needs two samples");
  if (have_min && have_max && c->hpa.min_replicas > c->hpa.max_replicas) {
    field_join(tf, sizeof tf, field, "min");
    return fail(w, n, tf, "min (%u) is more than max (%u)", c->hpa.min_replicas,
                c->hpa.max_replicas);
  }
  return 0;
}

static int parse_cluster(walk *w, const yaml_node_t *n, const char *field, pp_cluster_cfg *c) {
  char f[128];
  if (want_mapping(w, n, field)) return PP_SIM_EINVAL;
  memset(c, 0, sizeof *c);
  pp_hpa_spec_defaults(&c->hpa);
  c->hpa.min_replicas = 1;
  c->hpa.max_replicas = 100;
  c->quantile = 0.95;
  c->sync_ns = 15000000000ull;
  c->scrape_ns = 15000000000ull;
  c->rate_window_ns = 30000000000ull;
  int have_name = 0;
  FOR_PAIRS(w, n, p) {
    yaml_node_t *k = node_of(w, p->key), *v = node_of(w, p->value);
    const char *key = scalar(k);
    if (!key) return fail(w, k, field, "keys must be plain names");
    field_join(f, sizeof f, field, key);
    int rc = 0;
    if (!strcmp(key, "name"))
      rc = get_string(w, v, f, c->name, sizeof c->name), have_name = 1;
    else if (!strcmp(key, "balancer")) {
      const char *x;
      if ((rc = want_scalar(w, v, f, &x))) return rc;
      if (!strcmp(x, "round_robin") || !strcmp(x, "roundrobin"))
        c->balancer = PP_BAL_ROUND_ROBIN;
      else if (!strcmp(x, "least_outstanding") || !strcmp(x, "leastconn"))
        c->balancer = PP_BAL_LEAST_OUTSTANDING;
      else if (!strcmp(x, "p2c") || !strcmp(x, "power_of_two"))
        c->balancer = PP_BAL_P2C;
      else if (!strcmp(x, "random"))
        c->balancer = PP_BAL_RANDOM;
      else
        return fail(w, v, f,
                    "unknown balancer \"%s\" (round_robin, least_outstanding, p2c, random)", x);
    } else if (!strcmp(key, "count"))
      rc = get_u32(w, v, f, 1, PP_SCN_MAX_HOSTS, &c->count);
    else if (!strcmp(key, "autoscale"))
      rc = parse_cluster_autoscale(w, v, f, c);
    else
      return fail(w, k, f, "unknown field (expected name, balancer, count, autoscale)");
    if (rc) return rc;
  }
  if (!have_name) return fail(w, n, field, "missing `name:`");
  if (c->metric != PP_CMETRIC_NONE && c->count &&
      (c->count < c->hpa.min_replicas || c->count > c->hpa.max_replicas))
    return fail(w, n, field, "count %u is outside autoscale min..max (%u..%u)", c->count,
                c->hpa.min_replicas, c->hpa.max_replicas);
  return 0;
}

static int parse_root(walk *w, const yaml_node_t *root, pp_scenario *s) {
  char f[128];
  if (!root) return fail(w, NULL, "", "the scenario is empty");
  if (want_mapping(w, root, "")) return PP_SIM_EINVAL;
  int have_arrivals = 0, have_requests = 0, have_configs = 0, have_duration = 0;
  const yaml_node_t *arr_node = root, *hosts_node = NULL, *clusters_node = NULL;
  FOR_PAIRS(w, root, p) {
    yaml_node_t *k = node_of(w, p->key), *v = node_of(w, p->value);
    const char *key = scalar(k);
    if (!key) return fail(w, k, "", "keys must be plain names");
    snprintf(f, sizeof f, "%s", key);
    int rc = 0;
    if (!strcmp(key, "name"))
      rc = get_string(w, v, f, s->name, sizeof s->name);
    else if (!strcmp(key, "description"))
      rc = get_string(w, v, f, s->description, sizeof s->description);
    else if (!strcmp(key, "seed"))
      rc = get_u64(w, v, f, &s->seed);
    else if (!strcmp(key, "drain_limit"))
      rc = get_duration(w, v, f, &s->drain_limit_ns);
    else if (!strcmp(key, "duration"))
      rc = get_duration(w, v, f, &s->duration_ns), have_duration = 1;
    else if (!strcmp(key, "arrivals"))
      rc = parse_arrivals(w, v, s), have_arrivals = 1, arr_node = v;
    else if (!strcmp(key, "client"))
      rc = parse_client(w, v, s);
    else if (!strcmp(key, "machine"))
      rc = parse_machine(w, v, s);
    else if (!strcmp(key, "requests")) {
      have_requests = 1;
      if (!v || v->type != YAML_SEQUENCE_NODE)
        return fail(w, v, f, "expected a list of request kinds");
      s->n_kinds = 0;
      for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top;
           it++) {
        if (s->n_kinds == PP_SCN_MAX_KINDS)
          return fail(w, v, f, "more than %d request kinds", PP_SCN_MAX_KINDS);
        char kf[64];
        snprintf(kf, sizeof kf, "requests[%u]", s->n_kinds);
        if ((rc = parse_kind(w, node_of(w, *it), kf, &s->kinds[s->n_kinds]))) return rc;
        s->n_kinds++;
      }
      if (s->n_kinds == 0) return fail(w, v, f, "at least one request kind is needed");
    } else if (!strcmp(key, "configs")) {
      have_configs = 1;
      if (!v || v->type != YAML_SEQUENCE_NODE)
        return fail(w, v, f, "expected a list of server configurations");
      s->n_configs = 0;
      for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top;
           it++) {
        if (s->n_configs == PP_SCN_MAX_CONFIGS)
          return fail(w, v, f, "more than %d configs", PP_SCN_MAX_CONFIGS);
        char cf[64];
        snprintf(cf, sizeof cf, "configs[%u]", s->n_configs);
        yaml_node_t *cn = node_of(w, *it);
        if ((rc = parse_config(w, cn, cf, &s->configs[s->n_configs]))) return rc;
        if (pp_scenario_find_config(s, s->configs[s->n_configs].name) >= 0)
          return fail(w, cn, cf, "duplicate config name \"%s\"", s->configs[s->n_configs].name);
        s->n_configs++;
      }
      if (s->n_configs == 0) return fail(w, v, f, "at least one configuration is needed");
    } else if (!strcmp(key, "hosts")) {
      hosts_node = v;
      rc = parse_hosts(w, v, s);
    } else if (!strcmp(key, "clusters")) {
      clusters_node = v;
      if (!v || v->type != YAML_SEQUENCE_NODE)
        return fail(w, v, f, "expected a list of clusters (balancer and autoscaler)");
      s->n_clusters = 0;
      for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top;
           it++) {
        char cf[64];
        snprintf(cf, sizeof cf, "clusters[%u]", s->n_clusters);
        yaml_node_t *cn = node_of(w, *it);
        if (s->n_clusters == PP_SCN_MAX_CLUSTERS)
          return fail(w, cn, cf, "more than %d clusters", PP_SCN_MAX_CLUSTERS);
        if ((rc = parse_cluster(w, cn, cf, &s->clusters[s->n_clusters]))) return rc;
        if (pp_scenario_find_cluster(s, s->clusters[s->n_clusters].name) >= 0)
          return fail(w, cn, cf, "duplicate cluster name \"%s\"", s->clusters[s->n_clusters].name);
        s->n_clusters++;
      }
      if (s->n_clusters == 0) return fail(w, v, f, "at least one cluster is needed");
    } else {
      return fail(w, k, f,
                  "unknown field (expected name, description, seed, duration, drain_limit, "
                  "arrivals, requests, client, machine, configs, hosts, clusters)");
    }
    if (rc) return rc;
  }
  if (!have_arrivals) return fail(w, root, "arrivals", "missing `arrivals:`");
  if (!have_requests) return fail(w, root, "requests", "missing `requests:`");
  if (!have_configs) return fail(w, root, "configs", "missing `configs:`");
  if (clusters_node && !hosts_node)
    return fail(w, clusters_node, "clusters", "clusters need a `hosts:` section (the fleet)");
  if (hosts_node) {
    if (!clusters_node)
      return fail(w, hosts_node, "clusters", "a `hosts:` section needs `clusters:` to compare");
    int ci = pp_scenario_find_config(s, s->hosts.config);
    const yaml_node_t *cfg_node = hosts_node;
    FOR_PAIRS(w, hosts_node, p) {
      const char *key = scalar(node_of(w, p->key));
      if (key && !strcmp(key, "config")) cfg_node = node_of(w, p->value);
    }
    if (ci < 0)
      return fail(w, cfg_node, "hosts.config",
                  "no config named \"%s\" in configs:", s->hosts.config);
    if (s->configs[ci].server != PP_SERVER_PUMAPLUS || s->configs[ci].queue != PP_QUEUE_FIFO)
      return fail(w, cfg_node, "hosts.config",
                  "config \"%s\" is not a puma-plus with its one FIFO (cluster hosts are)",
                  s->hosts.config);
    s->hosts.config_index = (uint32_t)ci;
    if (!s->hosts.cores) s->hosts.cores = s->cores;
    if (s->configs[ci].workers > s->hosts.cores)
      return fail(w, cfg_node, "hosts.config",
                  "config \"%s\" starts %u workers on hosts of %u cores (a cluster host runs at "
                  "most one worker per core)",
                  s->hosts.config, s->configs[ci].workers, s->hosts.cores);
    for (uint32_t i = 0; i < s->n_clusters; i++) {
      pp_cluster_cfg *c = &s->clusters[i];
      if (!c->count) {
        c->count = s->hosts.count;
        if (c->metric != PP_CMETRIC_NONE) {
          if (c->count < c->hpa.min_replicas) c->count = c->hpa.min_replicas;
          if (c->count > c->hpa.max_replicas) c->count = c->hpa.max_replicas;
        }
      }
    }
  }
  if (s->process == PP_ARRIVALS_TRACE) {
    if (!s->trace_path[0])
      return fail(w, arr_node, "arrivals.trace",
                  "process trace needs `trace:` (a file of timestamps)");
  } else {
    if (s->n_phases == 0)
      return fail(w, arr_node, "arrivals.phases", "at least one phase is needed");
    uint64_t sum = 0;
    for (uint32_t i = 0; i < s->n_phases; i++)
      sum += s->phases[i].duration_ns;
    if (have_duration && s->duration_ns != sum)
      return fail(w, root, "duration", "duration differs from the sum of the phases; leave it out");
    s->duration_ns = sum;
  }
  return 0;
}

int pp_scenario_parse(pp_scenario *out, const char *yaml, size_t len, const char *file,
                      pp_scn_error *err) {
  pp_scenario_defaults(out);
  if (err) memset(err, 0, sizeof *err);
  yaml_parser_t parser;
  yaml_document_t doc;
  if (!yaml_parser_initialize(&parser)) {
    set_err(err, file, 0, 0, "", "out of memory");
    return PP_SIM_ENOMEM;
  }
  yaml_parser_set_input_string(&parser, (const unsigned char *)yaml, len);
  if (!yaml_parser_load(&parser, &doc)) {
    set_err(err, file, (int)parser.problem_mark.line + 1, (int)parser.problem_mark.column + 1, "",
            "YAML syntax: %s%s%s", parser.problem ? parser.problem : "malformed",
            parser.context ? " " : "", parser.context ? parser.context : "");
    yaml_parser_delete(&parser);
    return PP_SIM_EPARSE;
  }
  walk w = {&doc, file, err};
  int rc = parse_root(&w, yaml_document_get_root_node(&doc), out);
  yaml_document_delete(&doc);
  yaml_parser_delete(&parser);
  return rc ? PP_SIM_EPARSE : 0;
}

int pp_scenario_parse_trace(pp_scenario *s, const char *text, size_t len, const char *file,
                            pp_scn_error *err) {
  size_t cap = 1024, n = 0;
  int64_t *ts = malloc(cap * sizeof *ts);
  if (!ts) return PP_SIM_ENOMEM;
  size_t pos = 0;
  int line = 0;
  int64_t last = 0;
  char buf[128];
  while (pos < len) {
    size_t e = pos;
    while (e < len && text[e] != '\n')
      e++;
    line++;
    size_t l = e - pos;
    while (l > 0 && (text[pos + l - 1] == '\r' || text[pos + l - 1] == ' '))
      l--;
    size_t b = 0;
    while (b < l && text[pos + b] == ' ')
      b++;
    if (l > b && text[pos + b] != '#') {
      if (l - b >= sizeof buf) {
        set_err(err, file, line, 1, "trace", "line too long");
        free(ts);
        return PP_SIM_EPARSE;
      }
      memcpy(buf, text + pos + b, l - b);
      buf[l - b] = 0;
      double v;
      if (pp_units_parse_double(buf, &v) || v < 0 || v > 1e7) {
        set_err(err, file, line, 1, "trace", "expected a timestamp in seconds, got \"%s\"", buf);
        free(ts);
        return PP_SIM_EPARSE;
      }
      int64_t t = llround(v * 1e9);
      if (t < last) {
        set_err(err, file, line, 1, "trace", "timestamps must not decrease (%s after %.9f)", buf,
                last / 1e9);
        free(ts);
        return PP_SIM_EPARSE;
      }
      last = t;
      if (n == cap) {
        cap *= 2;
        int64_t *nt = realloc(ts, cap * sizeof *ts);
        if (!nt) {
          free(ts);
          return PP_SIM_ENOMEM;
        }
        ts = nt;
      }
      ts[n++] = t;
    }
    pos = e + 1;
  }
  free(s->trace_ns);
  s->trace_ns = ts;
  s->trace_len = n;
  if (s->duration_ns == 0)
    s->duration_ns = n ? (uint64_t)((last / 1000000000 + 1) * 1000000000) : 1000000000;
  return 0;
}

int pp_scenario_validate(const pp_scenario *s, pp_scn_error *err) {
  double wsum = 0;
  for (uint32_t i = 0; i < s->n_kinds; i++)
    wsum += s->kinds[i].weight;
  if (s->n_kinds == 0 || wsum <= 0) {
    set_err(err, "", 0, 0, "requests", "the request weights must add up to more than 0");
    return PP_SIM_EINVAL;
  }
  if (s->process == PP_ARRIVALS_TRACE && !s->trace_ns) {
    set_err(err, "", 0, 0, "arrivals.trace", "the trace file has not been loaded");
    return PP_SIM_EINVAL;
  }
  if (s->duration_ns == 0) {
    set_err(err, "", 0, 0, "arrivals", "the scenario lasts 0 seconds");
    return PP_SIM_EINVAL;
  }
  if (s->mem_shared_bytes > s->mem_worker_bytes) {
    set_err(err, "", 0, 0, "machine.memory.shared", "must not exceed machine.memory.worker");
    return PP_SIM_EINVAL;
  }
  for (uint32_t i = 0; i < s->n_configs; i++) {
    const pp_config *c = &s->configs[i];
    if (c->autoscale) {
      pp_policy_error perr;
      memset(&perr, 0, sizeof perr);
      if (pp_policy_validate(&c->policy, &perr)) {
        set_err(err, "", 0, 0, "policy", "config %s: %s", c->name, perr.message);
        return PP_SIM_EINVAL;
      }
    }
    if (c->autoscale && c->policy_path[0] && !c->policy_loaded) {
      set_err(err, "", 0, 0, "policy", "config %s: policy file %s has not been loaded", c->name,
              c->policy_path);
      return PP_SIM_EINVAL;
    }
  }
  return 0;
}
