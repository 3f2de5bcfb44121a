/* The decision-log codec: one pp_declog_record <-> one compact JSON line (jansson).
 *
 * Each sub-object (obs, state, decision) is described by a field table, so the encoder and
 * the decoder walk the same list in the same order and cannot drift apart. Exactness rules
 * (docs/CONTROL.md, "Decision log"): integers are JSON integers; a uint64 above INT64_MAX
 * (which jansson's long long cannot hold, e.g. an unbounded predicted wait) is a string of
 * decimal digits; the policy hash is a 16-digit lowercase hex string; doubles are written
 * with 17 significant digits so they read back to the same bits. Workload: one line per
 * tick in the server, a few thousand lines per replay; nothing here is hot. */
#include "control/control.h"

#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum kind { K_U64, K_I64, K_U32, K_F64, K_BOOL, K_ACTION, K_STR };

/* `version` is the log version that added the field: version-N fields are written (and
 * required) only in lines of version N or later; an older line reads them as their defaults:
 * 0, or by `never`: D_NEVER (INT64_MIN, "never", for a K_I64 time) or D_UNKNOWN (-1 for a
 * K_I64 or K_F64 measurement: absent is unknown, never 0). */
enum { D_ZERO = 0, D_NEVER = 1, D_UNKNOWN = 2 };
typedef struct jfield {
  const char *name;
  enum kind kind;
  size_t offset;
  size_t size; /* for K_STR: buffer size including NUL */
  int version;
  int never;
} jfield;

#define OBS(n, k)                                                                                  \
  { #n, k, offsetof(pp_observation, n), 0, 1, 0 }
#define STATE(n, k)                                                                                \
  { #n, k, offsetof(pp_ctl_state, n), 0, 1, 0 }
#define DEC(n, k)                                                                                  \
  { #n, k, offsetof(pp_decision, n), 0, 1, 0 }
#define OBS2(n, k)                                                                                 \
  { #n, k, offsetof(pp_observation, n), 0, 2, 0 }
#define STATE2(n, k, never)                                                                        \
  { #n, k, offsetof(pp_ctl_state, n), 0, 2, never }
#define DEC2(n, k)                                                                                 \
  { #n, k, offsetof(pp_decision, n), 0, 2, 0 }
#define OBS3(n, k, dflt)                                                                           \
  { #n, k, offsetof(pp_observation, n), 0, 3, dflt }
#define OBS4(n, k, dflt)                                                                           \
  { #n, k, offsetof(pp_observation, n), 0, 4, dflt }
#define STATE3(n, k, dflt)                                                                         \
  { #n, k, offsetof(pp_ctl_state, n), 0, 3, dflt }
#define STATE5(n, k, dflt)                                                                         \
  { #n, k, offsetof(pp_ctl_state, n), 0, 5, dflt }

static const jfield obs_fields[] = {
    OBS(tick, K_U64),
    OBS(time_ns, K_I64),
    OBS(window_ns, K_U64),
    OBS(queue_p50_ns, K_U64),
    OBS(queue_p95_ns, K_U64),
    OBS(queue_p99_ns, K_U64),
    OBS(queue_max_ns, K_U64),
    OBS(queue_count, K_U64),
    OBS(queue_len, K_U32),
    OBS(slots_ready, K_U32),
    OBS(slots_busy, K_U32),
    OBS(workers_ready, K_U32),
    OBS(workers_booting, K_U32),
    OBS(workers_retiring, K_U32),
    OBS(threads_per_worker, K_U32),
    OBS(arrivals, K_U64),
    OBS(completions, K_U64),
    OBS(arrival_rate, K_F64),
    OBS(service_mean_ns, K_U64),
    OBS(service_p95_ns, K_U64),
    OBS(service_cpu_mean_ns, K_I64),
    OBS(gvl_wait_ns, K_I64),
    OBS(mem_per_worker_bytes, K_I64),
    OBS(shed, K_U64),
    OBS(timeouts, K_U64),
    OBS2(workers_standby, K_U32),
    OBS2(workers_standby_booting, K_U32),
    OBS3(cpu_share_mean, K_F64, D_UNKNOWN),
    OBS3(cpu_share_max, K_F64, D_UNKNOWN),
    OBS3(cpu_workers, K_U32, D_ZERO),
    OBS3(cpu_per_request_ns, K_I64, D_UNKNOWN),
    OBS4(ractor_cores, K_U32, D_ZERO),
};

static const jfield state_fields[] = {
    STATE(breach_ticks, K_U32),
    STATE(calm_ticks, K_U32),
    STATE(last_spawn_ns, K_I64),
    STATE(last_retire_ns, K_I64),
    STATE(last_thread_ns, K_I64),
    STATE(workers_wanted, K_U32),
    STATE(threads_wanted, K_U32),
    STATE(shedding, K_BOOL),
    STATE2(standby_wanted, K_U32, 0),
    STATE2(last_activate_ns, K_I64, 1),
    STATE3(last_slots_ns, K_I64, D_NEVER),
    STATE3(slots_from, K_U32, D_ZERO),
    STATE3(slots_svc_before_ns, K_U64, D_ZERO),
    STATE3(slots_ceiling, K_U32, D_ZERO),
    STATE3(slots_base, K_U32, D_ZERO),
    STATE3(svc_base_ns, K_U64, D_ZERO),
    STATE5(slots_cut_from, K_U32, D_ZERO),
    STATE5(slots_floor, K_U32, D_ZERO),
    STATE5(slots_cut_share, K_F64, D_ZERO),
};

static const jfield decision_fields[] = {
    DEC(action, K_ACTION),
    DEC(count, K_U32),
    DEC(workers_target, K_U32),
    DEC(predicted_wait_ns, K_U64),
    DEC(rho, K_F64),
    DEC(shed, K_BOOL),
    DEC(shed_budget_ns, K_U64),
    {"reason", K_STR, offsetof(pp_decision, reason), sizeof(((pp_decision *)0)->reason), 1, 0},
    DEC2(activate, K_U32),
    DEC2(standby_spawn, K_U32),
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* ---- encode ---- */

static json_t *u64_value(uint64_t v) {
  if (v <= INT64_MAX) return json_integer((json_int_t)v);
  char digits[24];
  snprintf(digits, sizeof digits, "%" PRIu64, v);
  return json_string(digits);
}

/* Whether a field holds the value a version-1 line reads it as. Bytewise (a -0.0 is not
 * default, so it is written and round-trips). */
static int field_at_default(const void *base, const jfield *f) {
  const char *p = (const char *)base + f->offset;
  switch (f->kind) {
  case K_U32: {
    uint32_t x;
    memcpy(&x, p, sizeof x);
    return x == 0;
  }
  case K_U64: {
    uint64_t x;
    memcpy(&x, p, sizeof x);
    return x == 0;
  }
  case K_I64: {
    int64_t x;
    memcpy(&x, p, sizeof x);
    return x == (f->never == D_NEVER ? INT64_MIN : f->never == D_UNKNOWN ? -1 : 0);
  }
  case K_F64: {
    double d = f->never == D_UNKNOWN ? -1.0 : 0.0;
    uint64_t x, y;
    memcpy(&x, p, sizeof x);
    memcpy(&y, &d, sizeof y);
    return x == y;
  }
  default: return 1; /* no other kind is used by a later-version field */
  }
}

static void field_set_default(void *base, const jfield *f) {
  char *p = (char *)base + f->offset;
  switch (f->kind) {
  case K_U32: memset(p, 0, sizeof(uint32_t)); break;
  case K_U64: memset(p, 0, sizeof(uint64_t)); break;
  case K_I64: {
    int64_t x = f->never == D_NEVER ? INT64_MIN : f->never == D_UNKNOWN ? -1 : 0;
    memcpy(p, &x, sizeof x);
    break;
  }
  case K_F64: {
    double x = f->never == D_UNKNOWN ? -1.0 : 0.0;
    memcpy(p, &x, sizeof x);
    break;
  }
  default: break;
  }
}

/* The lowest version that holds every field of the sub-object not at its default. */
static int needs_version(const void *base, const jfield *f, size_t n) {
  int v = 1;
  for (size_t i = 0; i < n; i++)
    if (f[i].version > v && !field_at_default(base, &f[i])) v = f[i].version;
  return v;
}

static int max_int(int a, int b) {
  return a > b ? a : b;
}

static int encode_fields(json_t *obj, const void *base, const jfield *f, size_t n, int version) {
  for (size_t i = 0; i < n; i++) {
    const char *p = (const char *)base + f[i].offset;
    if (f[i].version > version) continue;
    json_t *v = NULL;
    switch (f[i].kind) {
    case K_U64: {
      uint64_t x;
      memcpy(&x, p, sizeof x);
      v = u64_value(x);
      break;
    }
    case K_I64: {
      int64_t x;
      memcpy(&x, p, sizeof x);
      v = json_integer((json_int_t)x);
      break;
    }
    case K_U32: {
      uint32_t x;
      memcpy(&x, p, sizeof x);
      v = json_integer((json_int_t)x);
      break;
    }
    case K_F64: {
      double x;
      memcpy(&x, p, sizeof x);
      v = isfinite(x) ? json_real(x) : NULL;
      break;
    }
    case K_BOOL: {
      int x;
      memcpy(&x, p, sizeof x);
      v = json_boolean(x);
      break;
    }
    case K_ACTION: {
      pp_action a;
      memcpy(&a, p, sizeof a);
      if (pp_action_name(a)[0] != 'i') v = json_string(pp_action_name(a)); /* not "invalid" */
      break;
    }
    case K_STR: v = memchr(p, '\0', f[i].size) ? json_string(p) : NULL; break;
    }
    if (!v || json_object_set_new(obj, f[i].name, v) != 0) return PP_CTL_EINVAL;
  }
  return 0;
}

static json_t *encode_object(const void *base, const jfield *f, size_t n, int version) {
  json_t *obj = json_object();
  if (!obj) return NULL;
  if (encode_fields(obj, base, f, n, version) != 0) {
    json_decref(obj);
    return NULL;
  }
  return obj;
}

static int set_new(json_t *root, const char *key, json_t *v) {
  return v ? json_object_set_new(root, key, v) : -1;
}

/* Writes `root` (which it releases) as one JSON line plus '\n' and a NUL into buf. `bad` says
 * building root already failed. Returns the length without the NUL, PP_CTL_EINVAL, or
 * PP_CTL_ENOSPC (buf then holds ""). */
static int dump_line(json_t *root, int bad, size_t flags, char *buf, size_t cap) {
  char *text = bad ? NULL : json_dumps(root, flags);
  json_decref(root);
  if (!text) return PP_CTL_EINVAL;
  size_t n = strlen(text);
  if (n + 2 > cap) {
    free(text);
    if (cap) buf[0] = '\0';
    return PP_CTL_ENOSPC;
  }
  memcpy(buf, text, n);
  buf[n] = '\n';
  buf[n + 1] = '\0';
  free(text);
  return (int)(n + 1);
}

int pp_declog_encode(const pp_declog_record *r, char *buf, size_t cap) {
  if (!r || !buf) return PP_CTL_EINVAL;
  char hash[17];
  snprintf(hash, sizeof hash, "%016" PRIx64, r->policy_hash);
  if (!memchr(r->source, '\0', sizeof r->source)) return PP_CTL_EINVAL;
  json_t *root = json_object();
  if (!root) return PP_CTL_EINVAL;
  int version =
      max_int(max_int(needs_version(&r->obs, obs_fields, COUNT(obs_fields)),
                      needs_version(&r->state_before, state_fields, COUNT(state_fields))),
              max_int(needs_version(&r->decision, decision_fields, COUNT(decision_fields)),
                      needs_version(&r->state_after, state_fields, COUNT(state_fields))));
  /* A set_slots action exists only from version 3 on. */
  if (r->decision.action == PP_ACTION_SET_SLOTS && version < 3) version = 3;
  int bad = 0;
  bad |= set_new(root, "v", json_integer(version));
  bad |= set_new(root, "tick", u64_value(r->tick));
  bad |= set_new(root, "time_ns", json_integer((json_int_t)r->time_ns));
  bad |= set_new(root, "policy_hash", json_string(hash));
  bad |= set_new(root, "source", json_string(r->source));
  bad |= set_new(root, "obs", encode_object(&r->obs, obs_fields, COUNT(obs_fields), version));
  bad |= set_new(root, "state_before",
                 encode_object(&r->state_before, state_fields, COUNT(state_fields), version));
  bad |= set_new(root, "decision",
                 encode_object(&r->decision, decision_fields, COUNT(decision_fields), version));
  bad |= set_new(root, "state_after",
                 encode_object(&r->state_after, state_fields, COUNT(state_fields), version));
  return dump_line(root, bad, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17), buf,
                   cap);
}

/* ---- decode ---- */

static int fail(pp_declog_error *err, long line, const char *prefix, const char *name,
                const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static int fail(pp_declog_error *err, long line, const char *prefix, const char *name,
                const char *fmt, ...) {
  if (err) {
    err->line = line;
    snprintf(err->field, sizeof err->field, "%s%s%s", prefix ? prefix : "",
             prefix && prefix[0] && name && name[0] ? "." : "", name ? name : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
  }
  return PP_CTL_EPARSE;
}

typedef struct dctx {
  pp_declog_error *err;
  long line;
} dctx;

static int get_u64(dctx *c, json_t *v, const char *prefix, const char *name, uint64_t *out) {
  if (json_is_integer(v)) {
    json_int_t x = json_integer_value(v);
    if (x < 0) return fail(c->err, c->line, prefix, name, "must not be negative");
    *out = (uint64_t)x;
    return 0;
  }
  if (json_is_string(v)) {
    /* Only values above INT64_MAX are written as strings; accept exactly that form. */
    const char *s = json_string_value(v);
    size_t n = json_string_length(v);
    if (n == 0 || n > 20 || s[0] == '0')
      return fail(c->err, c->line, prefix, name, "expected an integer");
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++) {
      if (s[i] < '0' || s[i] > '9')
        return fail(c->err, c->line, prefix, name, "expected an integer");
      unsigned d = (unsigned)(s[i] - '0');
      if (x > (UINT64_MAX - d) / 10)
        return fail(c->err, c->line, prefix, name, "integer out of range");
      x = x * 10 + d;
    }
    if (x <= INT64_MAX)
      return fail(c->err, c->line, prefix, name, "integers up to 2^63-1 must be JSON numbers");
    *out = x;
    return 0;
  }
  return fail(c->err, c->line, prefix, name, "expected an integer");
}

static int decode_fields(dctx *c, json_t *obj, const char *prefix, void *base, const jfield *f,
                         size_t n, int version) {
  if (!json_is_object(obj)) return fail(c->err, c->line, prefix, "", "expected an object");
  size_t expected = 0;
  for (size_t i = 0; i < n; i++) {
    char *p = (char *)base + f[i].offset;
    const char *name = f[i].name;
    if (f[i].version > version) {
      /* Not in this version's lines: its default, and the key is an unknown field below. */
      field_set_default(base, &f[i]);
      continue;
    }
    expected++;
    json_t *v = json_object_get(obj, name);
    if (!v) return fail(c->err, c->line, prefix, name, "missing");
    switch (f[i].kind) {
    case K_U64: {
      uint64_t x;
      if (get_u64(c, v, prefix, name, &x)) return PP_CTL_EPARSE;
      memcpy(p, &x, sizeof x);
      break;
    }
    case K_I64: {
      if (!json_is_integer(v)) return fail(c->err, c->line, prefix, name, "expected an integer");
      int64_t x = (int64_t)json_integer_value(v);
      memcpy(p, &x, sizeof x);
      break;
    }
    case K_U32: {
      if (!json_is_integer(v)) return fail(c->err, c->line, prefix, name, "expected an integer");
      json_int_t x = json_integer_value(v);
      if (x < 0 || x > UINT32_MAX)
        return fail(c->err, c->line, prefix, name, "must be between 0 and 4294967295");
      uint32_t y = (uint32_t)x;
      memcpy(p, &y, sizeof y);
      break;
    }
    case K_F64: {
      if (!json_is_number(v)) return fail(c->err, c->line, prefix, name, "expected a number");
      double x = json_number_value(v);
      memcpy(p, &x, sizeof x);
      break;
    }
    case K_BOOL: {
      if (!json_is_boolean(v)) return fail(c->err, c->line, prefix, name, "expected true or false");
      int x = json_is_true(v);
      memcpy(p, &x, sizeof x);
      break;
    }
    case K_ACTION: {
      pp_action a;
      if (!json_is_string(v) || pp_action_parse(json_string_value(v), &a) != 0)
        return fail(c->err, c->line, prefix, name,
                    "expected none, spawn_worker, retire_worker, add_thread, remove_thread or "
                    "set_slots");
      memcpy(p, &a, sizeof a);
      break;
    }
    case K_STR: {
      if (!json_is_string(v)) return fail(c->err, c->line, prefix, name, "expected a string");
      size_t len = json_string_length(v);
      if (len >= f[i].size)
        return fail(c->err, c->line, prefix, name, "longer than %zu bytes", f[i].size - 1);
      memcpy(p, json_string_value(v), len + 1);
      break;
    }
    }
  }
  if (json_object_size(obj) != expected) {
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
      size_t i = 0;
      while (i < n && (strcmp(f[i].name, key) != 0 || f[i].version > version))
        i++;
      if (i == n)
        return fail(c->err, c->line, prefix, key,
                    version < PP_DECLOG_VERSION ? "unknown field (in a version %d line)"
                                                : "unknown field",
                    version);
    }
  }
  return 0;
}

/* The first key of `obj` that is not one of `keys`, or NULL. The caller has already checked
 * that every one of `keys` is present, so an object of exactly n keys has no stranger. */
static const char *unknown_key(json_t *obj, const char *const *keys, size_t n) {
  if (json_object_size(obj) == n) return NULL;
  const char *key;
  json_t *v;
  json_object_foreach(obj, key, v) {
    size_t i = 0;
    while (i < n && strcmp(keys[i], key) != 0)
      i++;
    if (i == n) return key;
  }
  return NULL;
}

int pp_declog_decode(pp_declog_record *out, const char *text, size_t len, long line,
                     pp_declog_error *err) {
  dctx c = {err, line};
  if (err) memset(err, 0, sizeof *err), err->line = line;
  if (!out || !text) return fail(err, line, "", "", "no input");
  if (len > 0 && text[len - 1] == '\n') len--;
  if (len == 0) return fail(err, line, "", "", "empty line");
  json_error_t jerr;
  json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
  if (!root)
    return fail(err, line, "", "", "invalid JSON at column %d: %s", jerr.column, jerr.text);
  pp_declog_record r;
  memset(&r, 0, sizeof r);
  int rc = PP_CTL_EPARSE;
  if (!json_is_object(root)) {
    fail(err, line, "", "", "expected a JSON object");
    goto done;
  }
  json_t *v = json_object_get(root, "type");
  if (v) {
    fail(err, line, "", "type",
         "a header line, not a tick record (read it with pp_declog_decode_header)");
    goto done;
  }
  v = json_object_get(root, "v");
  if (!v) {
    fail(err, line, "", "v", "missing");
    goto done;
  }
  if (!json_is_integer(v) || json_integer_value(v) < PP_DECLOG_VERSION_MIN ||
      json_integer_value(v) > PP_DECLOG_VERSION) {
    fail(err, line, "", "v", "unsupported log version (this reader knows versions %d to %d)",
         PP_DECLOG_VERSION_MIN, PP_DECLOG_VERSION);
    goto done;
  }
  int version = (int)json_integer_value(v);
  if (!(v = json_object_get(root, "tick"))) {
    fail(err, line, "", "tick", "missing");
    goto done;
  }
  if (get_u64(&c, v, "", "tick", &r.tick)) goto done;
  if (!(v = json_object_get(root, "time_ns"))) {
    fail(err, line, "", "time_ns", "missing");
    goto done;
  }
  if (!json_is_integer(v)) {
    fail(err, line, "", "time_ns", "expected an integer");
    goto done;
  }
  r.time_ns = (int64_t)json_integer_value(v);
  if (!(v = json_object_get(root, "policy_hash"))) {
    fail(err, line, "", "policy_hash", "missing");
    goto done;
  }
  {
    const char *h = json_is_string(v) ? json_string_value(v) : NULL;
    int ok = h && json_string_length(v) == 16;
    for (int i = 0; ok && i < 16; i++)
      ok = (h[i] >= '0' && h[i] <= '9') || (h[i] >= 'a' && h[i] <= 'f');
    if (!ok) {
      fail(err, line, "", "policy_hash", "expected 16 lowercase hex digits");
      goto done;
    }
    r.policy_hash = strtoull(h, NULL, 16);
  }
  if (!(v = json_object_get(root, "source"))) {
    fail(err, line, "", "source", "missing");
    goto done;
  }
  if (!json_is_string(v) || json_string_length(v) >= sizeof r.source) {
    fail(err, line, "", "source", "expected a string of at most %zu bytes", sizeof r.source - 1);
    goto done;
  }
  memcpy(r.source, json_string_value(v), json_string_length(v) + 1);
  static const struct {
    const char *name;
    size_t offset;
    const jfield *fields;
    size_t n;
  } subs[] = {
      {"obs", offsetof(pp_declog_record, obs), obs_fields, COUNT(obs_fields)},
      {"state_before", offsetof(pp_declog_record, state_before), state_fields, COUNT(state_fields)},
      {"decision", offsetof(pp_declog_record, decision), decision_fields, COUNT(decision_fields)},
      {"state_after", offsetof(pp_declog_record, state_after), state_fields, COUNT(state_fields)},
  };
  for (size_t i = 0; i < COUNT(subs); i++) {
    if (!(v = json_object_get(root, subs[i].name))) {
      fail(err, line, "", subs[i].name, "missing");
      goto done;
    }
    if (decode_fields(&c, v, subs[i].name, (char *)&r + subs[i].offset, subs[i].fields, subs[i].n,
                      version))
      goto done;
  }
  static const char *const top[] = {"v",   "tick",         "time_ns",  "policy_hash", "source",
                                    "obs", "state_before", "decision", "state_after"};
  const char *extra = unknown_key(root, top, COUNT(top));
  if (extra) {
    fail(err, line, "", extra, "unknown field");
    goto done;
  }
  *out = r;
  rc = 0;
done:
  json_decref(root);
  return rc;
}

/* ---- header lines ---- */

int pp_declog_header_init(pp_declog_header *h, const pp_policy *p, const char *source) {
  if (!h || !p) return PP_CTL_EINVAL;
  memset(h, 0, sizeof *h);
  snprintf(h->source, sizeof h->source, "%s", source ? source : "");
  int n = pp_policy_canonical(p, h->policy, sizeof h->policy);
  if (n < 0) return n;
  h->policy_hash = pp_policy_hash(p);
  return 0;
}

int pp_declog_encode_header(const pp_declog_header *h, char *buf, size_t cap) {
  if (!h || !buf) return PP_CTL_EINVAL;
  if (!memchr(h->source, '\0', sizeof h->source) || !memchr(h->policy, '\0', sizeof h->policy))
    return PP_CTL_EINVAL;
  char hash[17];
  snprintf(hash, sizeof hash, "%016" PRIx64, h->policy_hash);
  json_t *root = json_object();
  if (!root) return PP_CTL_EINVAL;
  int bad = 0;
  bad |= set_new(root, "v", json_integer(1)); /* header lines did not change: always 1 */
  bad |= set_new(root, "type", json_string("header"));
  bad |= set_new(root, "source", json_string(h->source));
  bad |= set_new(root, "policy_hash", json_string(hash));
  bad |= set_new(root, "policy", json_string(h->policy));
  if (h->slots[0]) {
    if (!memchr(h->slots, '\0', sizeof h->slots))
      bad = 1;
    else
      bad |= set_new(root, "slots", json_string(h->slots));
  }
  return dump_line(root, bad, JSON_COMPACT | JSON_PRESERVE_ORDER, buf, cap);
}

static json_t *load_line(const char *text, size_t len, long line, pp_declog_error *err) {
  if (!text) {
    fail(err, line, "", "", "no input");
    return NULL;
  }
  if (len > 0 && text[len - 1] == '\n') len--;
  if (len == 0) {
    fail(err, line, "", "", "empty line");
    return NULL;
  }
  json_error_t jerr;
  json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
  if (!root) {
    fail(err, line, "", "", "invalid JSON at column %d: %s", jerr.column, jerr.text);
    return NULL;
  }
  if (!json_is_object(root)) {
    fail(err, line, "", "", "expected a JSON object");
    json_decref(root);
    return NULL;
  }
  return root;
}

int pp_declog_line_kind(const char *text, size_t len) {
  json_t *root = load_line(text, len, 0, NULL);
  if (!root) return PP_CTL_EPARSE;
  json_t *type = json_object_get(root, "type");
  int kind = json_is_string(type) && strcmp(json_string_value(type), "header") == 0
                 ? PP_DECLOG_KIND_HEADER
                 : PP_DECLOG_KIND_TICK;
  json_decref(root);
  return kind;
}

static const char *header_string(json_t *root, const char *key, long line, pp_declog_error *err) {
  json_t *v = json_object_get(root, key);
  if (!v) {
    fail(err, line, "", key, "missing");
    return NULL;
  }
  if (!json_is_string(v)) {
    fail(err, line, "", key, "expected a string");
    return NULL;
  }
  return json_string_value(v);
}

int pp_declog_decode_header(pp_declog_header *out, pp_policy *policy_out, const char *text,
                            size_t len, long line, pp_declog_error *err) {
  if (err) memset(err, 0, sizeof *err), err->line = line;
  if (!out) return fail(err, line, "", "", "no output");
  json_t *root = load_line(text, len, line, err);
  if (!root) return PP_CTL_EPARSE;
  pp_declog_header h;
  memset(&h, 0, sizeof h);
  int rc = PP_CTL_EPARSE;
  const char *s;
  json_t *v = json_object_get(root, "v");
  if (!json_is_integer(v) || json_integer_value(v) != 1) {
    fail(err, line, "", "v", v ? "unsupported log version" : "missing");
    goto done;
  }
  if (!(s = header_string(root, "type", line, err))) goto done;
  if (strcmp(s, "header") != 0) {
    fail(err, line, "", "type", "expected \"header\"");
    goto done;
  }
  if (!(s = header_string(root, "source", line, err))) goto done;
  if (strlen(s) >= sizeof h.source) {
    fail(err, line, "", "source", "longer than %zu bytes", sizeof h.source - 1);
    goto done;
  }
  strcpy(h.source, s);
  if (!(s = header_string(root, "policy_hash", line, err))) goto done;
  {
    int ok = strlen(s) == 16;
    for (int i = 0; ok && i < 16; i++)
      ok = (s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f');
    if (!ok) {
      fail(err, line, "", "policy_hash", "expected 16 lowercase hex digits");
      goto done;
    }
    h.policy_hash = strtoull(s, NULL, 16);
  }
  if (!(s = header_string(root, "policy", line, err))) goto done;
  if (strlen(s) >= sizeof h.policy) {
    fail(err, line, "", "policy", "longer than %zu bytes", sizeof h.policy - 1);
    goto done;
  }
  strcpy(h.policy, s);
  {
    pp_policy p;
    pp_policy_error perr;
    if (pp_policy_parse(&p, h.policy, strlen(h.policy), &perr) != 0) {
      fail(err, line, "", "policy", "policy line %d: %s: %s", perr.line, perr.field, perr.message);
      goto done;
    }
    if (pp_policy_hash(&p) != h.policy_hash) {
      fail(err, line, "", "policy_hash",
           "policy text hashes to %016" PRIx64 ", not the %016" PRIx64 " the header names",
           pp_policy_hash(&p), h.policy_hash);
      goto done;
    }
    if (policy_out) *policy_out = p;
  }
  if (json_object_get(root, "slots")) {
    if (!(s = header_string(root, "slots", line, err))) goto done;
    if (strcmp(s, "thread") != 0 && strcmp(s, "fiber") != 0 && strcmp(s, "ractor") != 0) {
      fail(err, line, "", "slots", "unknown slot kind (thread, fiber, ractor)");
      goto done;
    }
    strcpy(h.slots, strcmp(s, "thread") ? s : "");
  }
  static const char *const keys[] = {"v", "type", "source", "policy_hash", "policy", "slots"};
  /* unknown_key counts keys: "slots" is optional, so only listed when present */
  const char *extra = unknown_key(root, keys, COUNT(keys) - !json_object_get(root, "slots"));
  if (extra) {
    fail(err, line, "", extra, "unknown field");
    goto done;
  }
  *out = h;
  rc = 0;
done:
  json_decref(root);
  return rc;
}
