/* The policy: defaults, YAML parsing (libyaml, memory only), flag overrides, validation,
 * canonical text and its FNV-1a hash.
 *
 * Every field is described once in the table below (dotted name, kind, offset); parsing,
 * pp_policy_set, the canonical text and the field-name list all walk that table, so a new
 * field is one line here plus its default. Workload: a policy is parsed a few times per
 * process (startup, SIGHUP, a sweep of a few hundred variants); nothing here is hot. */
#include "control/control.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

/* F_BUDGET is a duration or "auto" (stored as 0); F_RULE is one of the shed.rule names. */
enum field_kind { F_DURATION, F_U32, F_BYTES, F_DOUBLE, F_BOOL, F_BUDGET, F_RULE, F_SLOTRULE };

/* `format` is the policy format that introduced the field. Format-1 fields are always in the
 * canonical text; later ones only when they differ from the default, which keeps the text and
 * hash of every format-1 policy (and so every recorded decision log's header) unchanged. Such
 * a text now reads with format 2's defaults for the new fields (shed.rule: drain), which is
 * what changing a default means; pp_decide does not read them, so every logged tick replays. */
typedef struct field {
  const char *name;
  enum field_kind kind;
  size_t offset;
  int format;
} field;

#define FIELD(name, kind, member)                                                                  \
  { name, kind, offsetof(pp_policy, member), 1 }
#define FIELD2(name, kind, member)                                                                 \
  { name, kind, offsetof(pp_policy, member), 2 }
#define FIELD3(name, kind, member)                                                                 \
  { name, kind, offsetof(pp_policy, member), 3 }
#define FIELD4(name, kind, member)                                                                 \
  { name, kind, offsetof(pp_policy, member), 4 }
#define FIELD5(name, kind, member)                                                                 \
  { name, kind, offsetof(pp_policy, member), 5 }
#define FIELD6(name, kind, member)                                                                 \
  { name, kind, offsetof(pp_policy, member), 6 }
static const field fields[] = {
    FIELD("tick", F_DURATION, tick_ns),
    FIELD("min_workers", F_U32, min_workers),
    FIELD("max_workers", F_U32, max_workers),
    FIELD("max_step", F_U32, max_step),
    FIELD("cores", F_U32, cores),
    FIELD("memory_limit", F_BYTES, memory_limit_bytes),
    FIELD("target_queue_p95", F_DURATION, target_queue_p95_ns),
    FIELD("severe_factor", F_DOUBLE, severe_factor),
    FIELD("breach_ticks", F_U32, breach_ticks),
    FIELD("calm_fraction", F_DOUBLE, calm_fraction),
    FIELD("calm_utilisation", F_DOUBLE, calm_utilisation),
    FIELD("calm_ticks", F_U32, calm_ticks),
    FIELD("spawn_cooldown", F_DURATION, spawn_cooldown_ns),
    FIELD("retire_cooldown", F_DURATION, retire_cooldown_ns),
    FIELD("target_utilisation", F_DOUBLE, target_utilisation),
    FIELD("threads.enabled", F_BOOL, threads_enabled),
    FIELD("threads.min", F_U32, min_threads),
    FIELD("threads.max", F_U32, max_threads),
    FIELD("threads.gvl_wait_max", F_DURATION, gvl_wait_max_ns),
    FIELD("shed.enabled", F_BOOL, shed_enabled),
    FIELD("shed.budget", F_BUDGET, shed_budget_ns),
    FIELD2("shed.rule", F_RULE, shed_rule),
    FIELD2("shed.rate_window", F_DURATION, shed_rate_window_ns),
    FIELD2("shed.target", F_DURATION, shed_target_ns),
    FIELD2("shed.interval", F_DURATION, shed_interval_ns),
    FIELD2("shed.client_timeout", F_DURATION, shed_client_timeout_ns),
    FIELD2("shed.slo", F_DURATION, shed_slo_ns),
    FIELD2("shed.standing_wait", F_BUDGET, shed_standing_wait_ns),
    FIELD3("standby", F_U32, standby),
    FIELD4("slots.enabled", F_BOOL, slots_enabled),
    FIELD4("slots.rule", F_SLOTRULE, slots_rule),
    FIELD4("slots.min", F_U32, min_slots),
    FIELD4("slots.max", F_U32, max_slots),
    FIELD4("slots.cpu_target", F_DOUBLE, slots_cpu_target),
    FIELD4("slots.inflation", F_DOUBLE, slots_inflation),
    FIELD4("slots.cooldown", F_DURATION, slots_cooldown_ns),
    FIELD5("slots.cut", F_BOOL, slots_cut),
    FIELD6("standby_cover", F_DOUBLE, standby_cover),
};
#define NFIELDS (sizeof fields / sizeof fields[0])

const char *const pp_policy_field_names[] = {
    "tick",
    "min_workers",
    "max_workers",
    "max_step",
    "cores",
    "memory_limit",
    "target_queue_p95",
    "severe_factor",
    "breach_ticks",
    "calm_fraction",
    "calm_utilisation",
    "calm_ticks",
    "spawn_cooldown",
    "retire_cooldown",
    "target_utilisation",
    "threads.enabled",
    "threads.min",
    "threads.max",
    "threads.gvl_wait_max",
    "shed.enabled",
    "shed.budget",
    "shed.rule",
    "shed.rate_window",
    "shed.target",
    "shed.interval",
    "shed.client_timeout",
    "shed.slo",
    "shed.standing_wait",
    "standby",
    "slots.enabled",
    "slots.rule",
    "slots.min",
    "slots.max",
    "slots.cpu_target",
    "slots.inflation",
    "slots.cooldown",
    "slots.cut",
    "standby_cover",
    NULL,
};

/* Longest duration any field accepts: keeps now + cooldown far from int64 overflow. */
#define DURATION_MAX_NS (1ull << 62)
#define WORKERS_MAX     65536u
#define STANDBY_MAX     64u
#define THREADS_MAX     1024u
#define SLOTS_MAX       4096u

void pp_policy_defaults(pp_policy *p) {
  memset(p, 0, sizeof *p);
  p->tick_ns = 1000000000ull;
  p->min_workers = 1;
  p->max_workers = 8;
  p->max_step = 4;
  p->cores = 0;
  p->memory_limit_bytes = 0;
  p->target_queue_p95_ns = 50000000ull;
  p->severe_factor = 4.0;
  p->breach_ticks = 2;
  p->calm_fraction = 0.2;
  p->calm_utilisation = 0.5;
  p->calm_ticks = 30;
  p->spawn_cooldown_ns = 3000000000ull;
  p->retire_cooldown_ns = 30000000000ull;
  p->target_utilisation = 0.7;
  p->threads_enabled = 0;
  p->min_threads = 1;
  p->max_threads = 16;
  p->gvl_wait_max_ns = 5000000ull;
  p->shed_enabled = 0;
  p->shed_budget_ns = 0; /* auto: 10s with the defaults below, format 1's fixed default */
  p->shed_rule = PP_SHED_RULE_CONTROLLED;
  p->shed_rate_window_ns = 1000000000ull;
  p->shed_target_ns = 50000000ull;
  p->shed_interval_ns = 500000000ull;
  p->shed_client_timeout_ns = 20000000000ull;
  p->shed_slo_ns = 150000000ull;
  p->shed_standing_wait_ns = 0; /* auto: 2 x the measured mean service time */
  p->standby = 0;
  p->slots_enabled = 1;
  p->slots_rule = PP_SLOTS_RULE_LITTLE;
  p->min_slots = 1;
  p->max_slots = 1024;
  p->slots_cpu_target = 0.8;
  p->slots_inflation = 1.5;
  p->slots_cooldown_ns = 1000000000ull;
  p->slots_cut = 1;
  p->standby_cover = 0; /* the pool is always parked, as before */
}

static const char *const slots_rule_names[] = {"little", "gradient"};
#define N_SLOTS_RULES (sizeof slots_rule_names / sizeof slots_rule_names[0])

const char *pp_slots_rule_name(uint32_t rule) {
  return rule < N_SLOTS_RULES ? slots_rule_names[rule] : "?";
}

static const char *const shed_rule_names[] = {
    "predicted", "drain", "codel", "controlled", "controlled-codel", "controlled-lifo"};
#define N_SHED_RULES (sizeof shed_rule_names / sizeof shed_rule_names[0])

const char *pp_shed_rule_name(uint32_t rule) {
  return rule < N_SHED_RULES ? shed_rule_names[rule] : "?";
}

uint64_t pp_policy_shed_budget_ns(const pp_policy *p) {
  if (p->shed_budget_ns) return p->shed_budget_ns;
  uint64_t slo = p->shed_slo_ns, timeout = p->shed_client_timeout_ns;
  uint64_t half = timeout / 2;
  return half > slo ? half : slo;
}

static void set_err(pp_policy_error *err, int line, int column, const char *fieldname,
                    const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void set_err(pp_policy_error *err, int line, int column, const char *fieldname,
                    const char *fmt, ...) {
  if (!err) return;
  err->line = line;
  err->column = column;
  snprintf(err->field, sizeof err->field, "%s", fieldname ? fieldname : "");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->message, sizeof err->message, fmt, ap);
  va_end(ap);
}

static const field *find_field(const char *name) {
  for (size_t i = 0; i < NFIELDS; i++)
    if (strcmp(fields[i].name, name) == 0) return &fields[i];
  return NULL;
}

/* Most significant digits a duration or size may have. With at most 30 digits the mantissa is
 * under 10^30 < 2^100 and 10^frac_digits is at most 10^30, which scale_value relies on. */
#define DECIMAL_DIGITS 30

enum decimal_status { DECIMAL_OK, DECIMAL_TOO_LARGE, DECIMAL_TOO_LONG };

/* Parses "<digits>[.<digits>]" at *s into *mant / 10^*frac_digits. Leading zeros do not count
 * as digits. Returns the number of characters consumed (0 if there is no number) and sets
 * *status: DECIMAL_TOO_LARGE when the integer part alone has more than DECIMAL_DIGITS digits
 * (so the value is at least 10^30, over every limit in every unit), DECIMAL_TOO_LONG when the
 * fraction takes the count over DECIMAL_DIGITS. All digits are consumed either way, so the
 * caller can still check the unit that follows. */
static size_t parse_decimal(const char *s, unsigned __int128 *mant, int *frac_digits,
                            enum decimal_status *status) {
  size_t i = 0;
  unsigned __int128 m = 0;
  int fd = 0, significant = 0, any = 0;
  *status = DECIMAL_OK;
  while (isdigit((unsigned char)s[i])) {
    any = 1;
    if (m != 0 || s[i] != '0') {
      if (significant == DECIMAL_DIGITS)
        *status = DECIMAL_TOO_LARGE;
      else
        m = m * 10 + (unsigned)(s[i] - '0'), significant++;
    }
    i++;
  }
  if (s[i] == '.') {
    size_t j = i + 1;
    while (isdigit((unsigned char)s[j])) {
      any = 1;
      if (m != 0 || s[j] != '0') significant++;
      if (significant > DECIMAL_DIGITS || fd == DECIMAL_DIGITS) {
        if (*status == DECIMAL_OK) *status = DECIMAL_TOO_LONG;
      } else {
        m = m * 10 + (unsigned)(s[j] - '0');
        fd++;
      }
      j++;
    }
    if (!any) return 0;
    i = j;
  }
  if (!any) return 0;
  *mant = m;
  *frac_digits = fd;
  return i;
}

/* mant * unit / 10^fd rounded to nearest (halves up), exactly; -1 if over `limit`.
 * mant < 10^30 < 2^100 and unit < 2^42, so mant * unit can need 142 bits: unit is split into
 * hi * 2^21 + lo (each under 2^21), and each partial product stays under 2^121. With
 * a = mant * hi = qa * div + ra:
 *   mant * unit + div/2 = qa * 2^21 * div + (ra * 2^21 + mant * lo + div/2)
 * where the bracket is under 2^123, so the quotient is qa * 2^21 + bracket / div. */
static int scale_value(unsigned __int128 mant, int fd, uint64_t unit, uint64_t limit,
                       uint64_t *out) {
  unsigned __int128 div = 1;
  for (int k = 0; k < fd; k++)
    div *= 10;
  uint64_t hi = unit >> 21, lo = unit & ((1u << 21) - 1);
  unsigned __int128 a = mant * hi;
  unsigned __int128 qa = a / div, ra = a % div;
  if (qa > (limit >> 21)) return -1; /* the result is at least qa * 2^21 */
  unsigned __int128 v = (qa << 21) + ((ra << 21) + mant * lo + div / 2) / div;
  if (v > limit) return -1;
  *out = (uint64_t)v;
  return 0;
}

/* A number with a unit suffix, as durations and sizes are written. */
typedef struct unit {
  const char *suffix;
  uint64_t scale; /* ns or bytes per unit */
} unit;

typedef struct unit_kind {
  const unit *units;
  size_t n_units;
  uint64_t limit;        /* largest accepted value */
  const char *expected;  /* when there is no number */
  const char *too_large; /* when the value passes `limit` */
  const char *bad_unit;  /* when the suffix is none of `units` */
} unit_kind;

static const unit duration_units[] = {{"ns", 1},
                                      {"us", 1000},
                                      {"\xc2\xb5s", 1000},
                                      {"ms", 1000000},
                                      {"s", 1000000000ull},
                                      {"", 1000000000ull},
                                      {"m", 60000000000ull},
                                      {"h", 3600000000000ull}};
static const unit_kind durations = {
    duration_units,
    sizeof duration_units / sizeof duration_units[0],
    DURATION_MAX_NS,
    "expected a duration like 25ms, 3s or 250us",
    "duration too large",
    "unknown duration unit (use ns, us, ms, s, m or h; a bare number is seconds)"};

static const unit size_units[] = {{"", 1},
                                  {"B", 1},
                                  {"KB", 1000},
                                  {"MB", 1000000},
                                  {"GB", 1000000000ull},
                                  {"TB", 1000000000000ull},
                                  {"KiB", 1ull << 10},
                                  {"MiB", 1ull << 20},
                                  {"GiB", 1ull << 30},
                                  {"TiB", 1ull << 40}};
static const unit_kind sizes = {
    size_units,       sizeof size_units / sizeof size_units[0],
    INT64_MAX,        "expected a size like 512MiB, 2GB or a number of bytes",
    "size too large", "unknown size unit (use B, KB, MB, GB, TB, KiB, MiB, GiB or TiB)"};

/* Parses `s` as a decimal number and one of kind->units, exactly (see scale_value), into
 * *out. 0, or PP_CTL_EINVAL / PP_CTL_ERANGE with *why set. */
static int parse_with_unit(const char *s, const unit_kind *kind, uint64_t *out, const char **why) {
  unsigned __int128 mant;
  int fd;
  enum decimal_status status;
  size_t n = parse_decimal(s, &mant, &fd, &status);
  if (n == 0) {
    *why = kind->expected;
    return PP_CTL_EINVAL;
  }
  const char *u = s + n;
  while (*u == ' ')
    u++;
  for (size_t k = 0; k < kind->n_units; k++) {
    if (strcmp(u, kind->units[k].suffix) == 0) {
      if (status == DECIMAL_TOO_LONG) {
        *why = "too many digits (at most 30)";
        return PP_CTL_EINVAL;
      }
      if (status == DECIMAL_TOO_LARGE ||
          scale_value(mant, fd, kind->units[k].scale, kind->limit, out) < 0) {
        *why = kind->too_large;
        return PP_CTL_ERANGE;
      }
      return 0;
    }
  }
  *why = kind->bad_unit;
  return PP_CTL_EINVAL;
}

static int parse_duration(const char *s, uint64_t *out, const char **why) {
  return parse_with_unit(s, &durations, out, why);
}

static int parse_bytes(const char *s, int64_t *out, const char **why) {
  uint64_t v;
  int rc = parse_with_unit(s, &sizes, &v, why);
  if (rc == 0) *out = (int64_t)v; /* sizes.limit is INT64_MAX */
  return rc;
}

static int parse_u32(const char *s, uint32_t *out, const char **why) {
  if (!isdigit((unsigned char)s[0])) {
    *why = "expected a non-negative integer";
    return PP_CTL_EINVAL;
  }
  uint64_t v = 0;
  for (const char *c = s; *c; c++) {
    if (!isdigit((unsigned char)*c)) {
      *why = "expected a non-negative integer";
      return PP_CTL_EINVAL;
    }
    v = v * 10 + (uint64_t)(*c - '0');
    if (v > UINT32_MAX) {
      *why = "integer too large";
      return PP_CTL_ERANGE;
    }
  }
  *out = (uint32_t)v;
  return 0;
}

static int parse_double(const char *s, double *out, const char **why) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || *end != '\0' || s[0] == ' ') {
    *why = "expected a number";
    return PP_CTL_EINVAL;
  }
  if (errno == ERANGE || !isfinite(v)) {
    *why = "number out of range";
    return PP_CTL_ERANGE;
  }
  /* strtod takes an exact subnormal (0x1p-1074) without ERANGE, but the %.17g canonical text of
   * one is inexact and sets ERANGE: refuse them here so every accepted value reads back. */
  if (v != 0 && fabs(v) < DBL_MIN) {
    *why = "number out of range (too close to 0: under 2.2250738585072014e-308)";
    return PP_CTL_ERANGE;
  }
  *out = v;
  return 0;
}

static int parse_bool(const char *s, int *out, const char **why) {
  static const char *const yes[] = {"true", "yes", "on"}, *const no[] = {"false", "no", "off"};
  for (int k = 0; k < 3; k++) {
    if (strcasecmp(s, yes[k]) == 0) {
      *out = 1;
      return 0;
    }
    if (strcasecmp(s, no[k]) == 0) {
      *out = 0;
      return 0;
    }
  }
  *why = "expected true or false";
  return PP_CTL_EINVAL;
}

/* Sets one described field from text; on error fills *err (line/column from the caller). */
static int set_field(pp_policy *p, const field *f, const char *value, int line, int column,
                     pp_policy_error *err) {
  char *base = (char *)p + f->offset;
  const char *why = "bad value";
  int rc;
  switch (f->kind) {
  case F_DURATION: {
    uint64_t v;
    rc = parse_duration(value, &v, &why);
    if (rc == 0) memcpy(base, &v, sizeof v);
    break;
  }
  case F_U32: {
    uint32_t v;
    rc = parse_u32(value, &v, &why);
    if (rc == 0) memcpy(base, &v, sizeof v);
    break;
  }
  case F_BYTES: {
    int64_t v;
    rc = parse_bytes(value, &v, &why);
    if (rc == 0) memcpy(base, &v, sizeof v);
    break;
  }
  case F_DOUBLE: {
    double v;
    rc = parse_double(value, &v, &why);
    if (rc == 0) memcpy(base, &v, sizeof v);
    break;
  }
  case F_BOOL: {
    int v;
    rc = parse_bool(value, &v, &why);
    if (rc == 0) memcpy(base, &v, sizeof v);
    break;
  }
  case F_BUDGET: {
    uint64_t v = 0;
    if (strcmp(value, "auto") == 0) {
      rc = 0;
    } else {
      rc = parse_duration(value, &v, &why);
      if (rc == 0 && v == 0) {
        why = "expected a duration greater than 0 or \"auto\"";
        rc = PP_CTL_EINVAL;
      }
      if (rc != 0 && why == durations.expected) why = "expected a duration like 1s, or \"auto\"";
    }
    if (rc == 0) memcpy(base, &v, sizeof v);
    break;
  }
  case F_SLOTRULE: {
    rc = PP_CTL_EINVAL;
    why = "expected one of little, gradient";
    for (uint32_t k = 0; k < N_SLOTS_RULES; k++)
      if (strcmp(value, slots_rule_names[k]) == 0) {
        memcpy(base, &k, sizeof k);
        rc = 0;
      }
    break;
  }
  case F_RULE: {
    rc = PP_CTL_EINVAL;
    why = "expected one of predicted, drain, codel, controlled, controlled-codel, controlled-lifo";
    for (uint32_t k = 0; k < N_SHED_RULES; k++)
      if (strcmp(value, shed_rule_names[k]) == 0) {
        memcpy(base, &k, sizeof k);
        rc = 0;
      }
    break;
  }
  default: rc = PP_CTL_EINVAL;
  }
  if (rc != 0) {
    set_err(err, line, column, f->name, "%s, got \"%.80s\"", why, value);
    return PP_CTL_EINVAL;
  }
  return 0;
}

int pp_policy_set(pp_policy *p, const char *name, const char *value, pp_policy_error *err) {
  if (!p || !name || !value) {
    set_err(err, 0, 0, name, "missing field name or value");
    return PP_CTL_EINVAL;
  }
  const field *f = find_field(name);
  if (!f) {
    set_err(err, 0, 0, name, "unknown policy field \"%.40s\"", name);
    return PP_CTL_ENOENT;
  }
  return set_field(p, f, value, 0, 0, err);
}

static int check(pp_policy_error *err, int ok, const char *name, const char *msg) {
  if (ok) return 0;
  set_err(err, 0, 0, name, "%s", msg);
  return PP_CTL_EINVAL;
}

int pp_policy_validate(const pp_policy *p, pp_policy_error *err) {
  int rc = 0;
#define CHECK(cond, name, msg)                                                                     \
  if ((rc = check(err, (cond), name, msg)) != 0) return rc
/* A subnormal fraction is in (0, 1] but its canonical text would not parse back (strtod sets
 * ERANGE on an inexact subnormal), so the canonical-text promise needs them refused. */
#define TOO_SMALL "is too close to 0 (under 2.2250738585072014e-308, a subnormal number)"
  CHECK(p->tick_ns > 0, "tick", "must be greater than 0");
  CHECK(p->min_workers >= 1, "min_workers", "must be at least 1");
  CHECK(p->max_workers <= WORKERS_MAX, "max_workers", "must be at most 65536");
  CHECK(p->min_workers <= p->max_workers, "min_workers", "must not exceed max_workers");
  CHECK(p->max_step >= 1, "max_step", "must be at least 1");
  CHECK(p->memory_limit_bytes >= 0, "memory_limit", "must not be negative");
  CHECK(p->target_queue_p95_ns > 0, "target_queue_p95", "must be greater than 0");
  CHECK(p->severe_factor > 1 && p->severe_factor <= 1e6, "severe_factor",
        "must be greater than 1 and at most 1e6");
  CHECK(p->breach_ticks >= 1, "breach_ticks", "must be at least 1");
  CHECK(p->calm_fraction > 0 && p->calm_fraction <= 1, "calm_fraction", "must be in (0, 1]");
  CHECK(p->calm_fraction >= DBL_MIN, "calm_fraction", TOO_SMALL);
  CHECK(p->calm_utilisation > 0 && p->calm_utilisation <= 1, "calm_utilisation",
        "must be in (0, 1]");
  CHECK(p->calm_utilisation >= DBL_MIN, "calm_utilisation", TOO_SMALL);
  CHECK(p->calm_ticks >= 1, "calm_ticks", "must be at least 1");
  CHECK(p->spawn_cooldown_ns <= DURATION_MAX_NS, "spawn_cooldown", "is too large");
  CHECK(p->retire_cooldown_ns <= DURATION_MAX_NS, "retire_cooldown", "is too large");
  CHECK(p->target_utilisation > 0 && p->target_utilisation <= 1, "target_utilisation",
        "must be in (0, 1]");
  CHECK(p->target_utilisation >= DBL_MIN, "target_utilisation", TOO_SMALL);
  CHECK(p->threads_enabled == 0 || p->threads_enabled == 1, "threads.enabled",
        "must be true or false");
  CHECK(p->min_threads >= 1, "threads.min", "must be at least 1");
  CHECK(p->max_threads <= THREADS_MAX, "threads.max", "must be at most 1024");
  CHECK(p->min_threads <= p->max_threads, "threads.min", "must not exceed threads.max");
  CHECK(p->gvl_wait_max_ns > 0 && p->gvl_wait_max_ns <= DURATION_MAX_NS, "threads.gvl_wait_max",
        "must be greater than 0");
  CHECK(p->shed_enabled == 0 || p->shed_enabled == 1, "shed.enabled", "must be true or false");
  CHECK(p->shed_budget_ns <= DURATION_MAX_NS, "shed.budget", "is too large");
  CHECK(p->shed_rule < N_SHED_RULES, "shed.rule",
        "must be predicted, drain, codel, controlled, controlled-codel or controlled-lifo");
  CHECK(p->shed_rate_window_ns > 0 && p->shed_rate_window_ns <= DURATION_MAX_NS, "shed.rate_window",
        "must be greater than 0");
  CHECK(p->shed_target_ns > 0 && p->shed_target_ns <= DURATION_MAX_NS, "shed.target",
        "must be greater than 0");
  CHECK(p->shed_interval_ns > 0 && p->shed_interval_ns <= DURATION_MAX_NS, "shed.interval",
        "must be greater than 0");
  CHECK(p->shed_client_timeout_ns > 0 && p->shed_client_timeout_ns <= DURATION_MAX_NS,
        "shed.client_timeout", "must be greater than 0");
  CHECK(p->shed_slo_ns > 0 && p->shed_slo_ns <= DURATION_MAX_NS, "shed.slo",
        "must be greater than 0");
  CHECK(p->shed_slo_ns < p->shed_client_timeout_ns, "shed.slo",
        "must be less than shed.client_timeout");
  CHECK(p->shed_standing_wait_ns <= DURATION_MAX_NS, "shed.standing_wait", "is too large");
  CHECK(p->standby <= STANDBY_MAX, "standby", "must be at most 64");
  CHECK(p->slots_enabled == 0 || p->slots_enabled == 1, "slots.enabled", "must be true or false");
  CHECK(p->slots_rule < N_SLOTS_RULES, "slots.rule", "must be little or gradient");
  CHECK(p->min_slots >= 1, "slots.min", "must be at least 1");
  CHECK(p->max_slots <= SLOTS_MAX, "slots.max", "must be at most 4096");
  CHECK(p->min_slots <= p->max_slots, "slots.min", "must not exceed slots.max");
  CHECK(p->slots_cpu_target > 0 && p->slots_cpu_target <= 1, "slots.cpu_target",
        "must be in (0, 1]");
  CHECK(p->slots_cpu_target >= DBL_MIN, "slots.cpu_target", TOO_SMALL);
  CHECK(p->slots_inflation > 1 && p->slots_inflation <= 1e6, "slots.inflation",
        "must be greater than 1 and at most 1e6");
  CHECK(p->slots_cooldown_ns <= DURATION_MAX_NS, "slots.cooldown", "is too large");
  CHECK(p->standby_cover == 0 || (p->standby_cover >= 1 && p->standby_cover <= 1e6),
        "standby_cover", "must be 0 (the pool always parked) or a load multiple from 1 to 1e6");
  CHECK(p->tick_ns <= DURATION_MAX_NS && p->target_queue_p95_ns <= DURATION_MAX_NS, "tick",
        "is too large");
#undef CHECK
#undef TOO_SMALL
  return 0;
}

/* ---- YAML ---- */

typedef struct parse_ctx {
  pp_policy *p;
  pp_policy_error *err;
  int line[NFIELDS]; /* where each field was set (0 = not set), for duplicate and
                        validation errors */
  int column[NFIELDS];
} parse_ctx;

static int apply_pair(parse_ctx *c, const char *name, yaml_node_t *value) {
  const field *f = find_field(name);
  int line = (int)value->start_mark.line + 1, column = (int)value->start_mark.column + 1;
  if (!f) {
    set_err(c->err, line, column, name, "unknown policy field \"%.40s\"", name);
    return PP_CTL_EINVAL;
  }
  size_t idx = (size_t)(f - fields);
  if (value->type != YAML_SCALAR_NODE) {
    set_err(c->err, line, column, name, "expected a single value, got a %s",
            value->type == YAML_MAPPING_NODE ? "mapping" : "list");
    return PP_CTL_EINVAL;
  }
  if (c->line[idx]) {
    set_err(c->err, line, column, name, "set twice (first on line %d)", c->line[idx]);
    return PP_CTL_EINVAL;
  }
  const char *text = (const char *)value->data.scalar.value;
  if (value->data.scalar.length != strlen(text)) {
    set_err(c->err, line, column, name, "value contains a NUL byte");
    return PP_CTL_EINVAL;
  }
  if (text[0] == '\0') {
    set_err(c->err, line, column, name, "expected a value, got nothing");
    return PP_CTL_EINVAL;
  }
  int rc = set_field(c->p, f, text, line, column, c->err);
  if (rc == 0) {
    c->line[idx] = line;
    c->column[idx] = column;
  }
  return rc;
}

static int walk_mapping(parse_ctx *c, yaml_document_t *doc, yaml_node_t *map, const char *prefix) {
  for (yaml_node_pair_t *pair = map->data.mapping.pairs.start; pair < map->data.mapping.pairs.top;
       pair++) {
    yaml_node_t *k = yaml_document_get_node(doc, pair->key);
    yaml_node_t *v = yaml_document_get_node(doc, pair->value);
    if (!k || !v) {
      set_err(c->err, 0, 0, prefix, "malformed mapping");
      return PP_CTL_EPARSE;
    }
    int kline = (int)k->start_mark.line + 1, kcol = (int)k->start_mark.column + 1;
    if (k->type != YAML_SCALAR_NODE) {
      set_err(c->err, kline, kcol, prefix, "expected a field name, got a %s",
              k->type == YAML_MAPPING_NODE ? "mapping" : "list");
      return PP_CTL_EPARSE;
    }
    char name[64];
    const char *key = (const char *)k->data.scalar.value;
    if (snprintf(name, sizeof name, "%s%s%s", prefix, prefix[0] ? "." : "", key) >=
        (int)sizeof name) {
      set_err(c->err, kline, kcol, "", "field name too long: \"%.40s...\"", key);
      return PP_CTL_EINVAL;
    }
    if (v->type == YAML_MAPPING_NODE && prefix[0] == '\0' &&
        (strcmp(name, "threads") == 0 || strcmp(name, "shed") == 0 || strcmp(name, "slots") == 0)) {
      int rc = walk_mapping(c, doc, v, name);
      if (rc) return rc;
      continue;
    }
    if (v->type == YAML_MAPPING_NODE && !find_field(name)) {
      set_err(c->err, kline, kcol, name, "unknown policy section \"%.40s\"", name);
      return PP_CTL_EINVAL;
    }
    if (!find_field(name)) {
      set_err(c->err, kline, kcol, name, "unknown policy field \"%.40s\"", name);
      return PP_CTL_EINVAL;
    }
    int rc = apply_pair(c, name, v);
    if (rc) return rc;
  }
  return 0;
}

int pp_policy_parse(pp_policy *out, const char *yaml, size_t len, pp_policy_error *err) {
  pp_policy_defaults(out);
  if (err) memset(err, 0, sizeof *err);
  if (!yaml && len) {
    set_err(err, 0, 0, "", "no policy text");
    return PP_CTL_EINVAL;
  }
  parse_ctx c;
  memset(&c, 0, sizeof c);
  c.p = out;
  c.err = err;

  yaml_parser_t parser;
  yaml_document_t doc;
  if (!yaml_parser_initialize(&parser)) {
    set_err(err, 0, 0, "", "out of memory initialising the YAML parser");
    return PP_CTL_EPARSE;
  }
  yaml_parser_set_input_string(&parser, (const unsigned char *)(yaml ? yaml : ""), len);
  if (!yaml_parser_load(&parser, &doc)) {
    set_err(err, (int)parser.problem_mark.line + 1, (int)parser.problem_mark.column + 1, "",
            "YAML syntax error: %s%s%s", parser.problem ? parser.problem : "unknown problem",
            parser.context ? " " : "", parser.context ? parser.context : "");
    yaml_parser_delete(&parser);
    return PP_CTL_EPARSE;
  }
  int rc = 0;
  yaml_node_t *root = yaml_document_get_root_node(&doc);
  if (root) {
    if (root->type == YAML_SCALAR_NODE && root->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
        (root->data.scalar.length == 0 || strcmp((char *)root->data.scalar.value, "~") == 0 ||
         strcmp((char *)root->data.scalar.value, "null") == 0)) {
      /* "~" or an empty document: the defaults. */
    } else if (root->type != YAML_MAPPING_NODE) {
      set_err(err, (int)root->start_mark.line + 1, (int)root->start_mark.column + 1, "",
              "a policy must be a mapping of field: value");
      rc = PP_CTL_EPARSE;
    } else {
      rc = walk_mapping(&c, &doc, root, "");
    }
  }
  /* A second document in the same text is a mistake, not something to ignore silently. */
  if (rc == 0 && root) {
    yaml_document_t extra;
    if (yaml_parser_load(&parser, &extra)) {
      yaml_node_t *r2 = yaml_document_get_root_node(&extra);
      if (r2) {
        set_err(err, (int)r2->start_mark.line + 1, (int)r2->start_mark.column + 1, "",
                "a policy is a single YAML document; found a second one");
        rc = PP_CTL_EPARSE;
      }
      yaml_document_delete(&extra);
    } else {
      set_err(err, (int)parser.problem_mark.line + 1, (int)parser.problem_mark.column + 1, "",
              "YAML syntax error: %s", parser.problem ? parser.problem : "unknown problem");
      rc = PP_CTL_EPARSE;
    }
  }
  yaml_document_delete(&doc);
  yaml_parser_delete(&parser);
  if (rc) return rc;

  pp_policy_error verr;
  memset(&verr, 0, sizeof verr);
  rc = pp_policy_validate(out, &verr);
  if (rc) {
    const field *f = find_field(verr.field);
    if (f) {
      verr.line = c.line[f - fields];
      verr.column = c.column[f - fields];
    }
    if (err) *err = verr;
  }
  return rc;
}

/* Whether field f of p holds its default value (compared bytewise: every kind is plain data). */
static int at_default(const pp_policy *p, const field *f) {
  static const size_t size_of[] = {
      [F_DURATION] = sizeof(uint64_t), [F_U32] = sizeof(uint32_t),
      [F_BYTES] = sizeof(int64_t),     [F_DOUBLE] = sizeof(double),
      [F_BOOL] = sizeof(int),          [F_BUDGET] = sizeof(uint64_t),
      [F_RULE] = sizeof(uint32_t),     [F_SLOTRULE] = sizeof(uint32_t)};
  pp_policy d;
  pp_policy_defaults(&d);
  return memcmp((const char *)p + f->offset, (const char *)&d + f->offset, size_of[f->kind]) == 0;
}

int pp_policy_canonical(const pp_policy *p, char *buf, size_t cap) {
  size_t used = 0;
  for (size_t i = 0; i < NFIELDS; i++) {
    const field *f = &fields[i];
    const char *base = (const char *)p + f->offset;
    char value[64];
    if (f->format > 1 && at_default(p, f)) continue;
    switch (f->kind) {
    case F_DURATION: {
      uint64_t v;
      memcpy(&v, base, sizeof v);
      snprintf(value, sizeof value, "%lluns", (unsigned long long)v);
      break;
    }
    case F_U32: {
      uint32_t v;
      memcpy(&v, base, sizeof v);
      snprintf(value, sizeof value, "%u", v);
      break;
    }
    case F_BYTES: {
      int64_t v;
      memcpy(&v, base, sizeof v);
      snprintf(value, sizeof value, "%lld", (long long)v);
      break;
    }
    case F_DOUBLE: {
      double v;
      memcpy(&v, base, sizeof v);
      snprintf(value, sizeof value, "%.17g", v);
      break;
    }
    case F_BOOL: {
      int v;
      memcpy(&v, base, sizeof v);
      snprintf(value, sizeof value, "%s", v ? "true" : "false");
      break;
    }
    case F_BUDGET: {
      uint64_t v;
      memcpy(&v, base, sizeof v);
      if (v)
        snprintf(value, sizeof value, "%lluns", (unsigned long long)v);
      else
        snprintf(value, sizeof value, "auto");
      break;
    }
    case F_RULE: {
      uint32_t v;
      memcpy(&v, base, sizeof v);
      snprintf(value, sizeof value, "%s", pp_shed_rule_name(v));
      break;
    }
    case F_SLOTRULE: {
      uint32_t v;
      memcpy(&v, base, sizeof v);
      snprintf(value, sizeof value, "%s", pp_slots_rule_name(v));
      break;
    }
    }
    char entry[160];
    int n = snprintf(entry, sizeof entry, "%s: %s\n", f->name, value);
    if (buf && used + (size_t)n < cap) memcpy(buf + used, entry, (size_t)n + 1);
    used += (size_t)n;
  }
  if (used >= cap) {
    if (buf && cap) buf[0] = '\0';
    return PP_CTL_ENOSPC;
  }
  return (int)used;
}

uint64_t pp_policy_hash(const pp_policy *p) {
  char buf[2048];
  int n = pp_policy_canonical(p, buf, sizeof buf);
  uint64_t h = 0xcbf29ce484222325ull;
  for (int i = 0; i < n; i++) {
    h ^= (unsigned char)buf[i];
    h *= 0x100000001b3ull;
  }
  return h;
}
