/* Fuzz target for the policy parser (control/policy.h).
 *
 * Input: YAML text, as a policy file would hold it (the files of scenarios/policies/ are seeds).
 * Properties:
 *  1. pp_policy_parse never crashes; on failure the error has a message.
 *  2. On success the policy validates, and its canonical text parses back to a policy with
 *     every field equal (doubles bit for bit), the same canonical text and the same hash.
 *  3. pp_policy_set, fed "field=value" from the first line of the input, never crashes; when
 *     it succeeds and the result validates, the same canonical round trip holds.
 *  4. A duration or size accepted by pp_policy_set has the value its text says (compared with
 *     a naive long-double reference), and one over the field's limit is refused.
 * A violated property aborts, so libFuzzer and the replay driver report it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/control.h"

#include "fuzz/check.h"

#define SAME(field) (memcmp(&a->field, &b->field, sizeof a->field) == 0)

static int policy_eq(const pp_policy *a, const pp_policy *b) {
  return SAME(tick_ns) && SAME(min_workers) && SAME(max_workers) && SAME(max_step) && SAME(cores) &&
         SAME(memory_limit_bytes) && SAME(target_queue_p95_ns) && SAME(severe_factor) &&
         SAME(breach_ticks) && SAME(calm_fraction) && SAME(calm_utilisation) && SAME(calm_ticks) &&
         SAME(spawn_cooldown_ns) && SAME(retire_cooldown_ns) && SAME(target_utilisation) &&
         SAME(threads_enabled) && SAME(min_threads) && SAME(max_threads) && SAME(gvl_wait_max_ns) &&
         SAME(shed_enabled) && SAME(shed_budget_ns) && SAME(shed_rule) &&
         SAME(shed_rate_window_ns) && SAME(shed_target_ns) && SAME(shed_interval_ns) &&
         SAME(shed_client_timeout_ns) && SAME(shed_slo_ns);
}

static void check_canonical_roundtrip(const pp_policy *p) {
  char text[2048], again[2048];
  int n = pp_policy_canonical(p, text, sizeof text);
  CHECK(n > 0 && (size_t)n < sizeof text && strlen(text) == (size_t)n);
  CHECK(pp_policy_canonical(p, NULL, 0) == PP_CTL_ENOSPC);
  pp_policy q;
  pp_policy_error err;
  int rc = pp_policy_parse(&q, text, (size_t)n, &err);
  if (rc != 0)
    fprintf(stderr, "fuzz_policy: canonical text does not parse: line %d %s: %s\n%s", err.line,
            err.field, err.message, text);
  CHECK(rc == 0);
  CHECK(policy_eq(p, &q));
  int m = pp_policy_canonical(&q, again, sizeof again);
  CHECK(m == n && memcmp(text, again, (size_t)n) == 0);
  CHECK(pp_policy_hash(p) == pp_policy_hash(&q));
}

static void check_error(int rc, const pp_policy_error *err) {
  CHECK(rc < 0);
  CHECK(memchr(err->message, '\0', sizeof err->message) != NULL);
  CHECK(memchr(err->field, '\0', sizeof err->field) != NULL);
  CHECK(err->message[0] != '\0');
  CHECK(err->line >= 0 && err->column >= 0);
}

/* A naive reference for duration and size text ("<digits>[.<digits>][ ]*<unit>", the grammar of
 * docs/CONTROL.md) in long double. Returns 1 and the value with its field's upper limit, or 0
 * when the field is not a duration/size or the text is not of that shape. */
static int reference_value(const char *name, const char *text, long double *value,
                           long double *limit) {
  static const char *const durations[] = {"tick",
                                          "target_queue_p95",
                                          "spawn_cooldown",
                                          "retire_cooldown",
                                          "threads.gvl_wait_max",
                                          "shed.budget",
                                          "shed.rate_window",
                                          "shed.target",
                                          "shed.interval",
                                          "shed.client_timeout",
                                          "shed.slo"};
  static const struct {
    const char *suffix;
    long double scale;
  } dunits[] = {{"ns", 1},   {"us", 1e3L}, {"\xc2\xb5s", 1e3L}, {"ms", 1e6L},
                {"s", 1e9L}, {"", 1e9L},   {"m", 60e9L},        {"h", 3600e9L}},
    bunits[] = {{"", 1},
                {"B", 1},
                {"KB", 1e3L},
                {"MB", 1e6L},
                {"GB", 1e9L},
                {"TB", 1e12L},
                {"KiB", 1024.0L},
                {"MiB", 1048576.0L},
                {"GiB", 1073741824.0L},
                {"TiB", 1099511627776.0L}};
  int is_duration = 0;
  for (size_t i = 0; i < sizeof durations / sizeof durations[0]; i++)
    if (strcmp(name, durations[i]) == 0) is_duration = 1;
  if (!is_duration && strcmp(name, "memory_limit") != 0) return 0;
  const char *p = text;
  long double mant = 0, div = 1;
  int digits = 0;
  while (*p >= '0' && *p <= '9')
    mant = mant * 10 + (*p++ - '0'), digits++;
  if (*p == '.') {
    p++;
    while (*p >= '0' && *p <= '9')
      mant = mant * 10 + (*p++ - '0'), div *= 10, digits++;
  }
  if (digits == 0) return 0;
  while (*p == ' ')
    p++;
  size_t n = is_duration ? sizeof dunits / sizeof dunits[0] : sizeof bunits / sizeof bunits[0];
  for (size_t i = 0; i < n; i++) {
    const char *suffix = is_duration ? dunits[i].suffix : bunits[i].suffix;
    if (strcmp(p, suffix) == 0) {
      *value = mant * (is_duration ? dunits[i].scale : bunits[i].scale) / div;
      *limit = is_duration ? 4611686018427387904.0L /* 2^62 */ : 9223372036854775807.0L;
      return 1;
    }
  }
  return 0;
}

/* The value of a duration or size field, by its dotted name. */
static long double field_value(const pp_policy *p, const char *name) {
  if (strcmp(name, "tick") == 0) return p->tick_ns;
  if (strcmp(name, "target_queue_p95") == 0) return p->target_queue_p95_ns;
  if (strcmp(name, "spawn_cooldown") == 0) return p->spawn_cooldown_ns;
  if (strcmp(name, "retire_cooldown") == 0) return p->retire_cooldown_ns;
  if (strcmp(name, "threads.gvl_wait_max") == 0) return p->gvl_wait_max_ns;
  if (strcmp(name, "shed.budget") == 0) return p->shed_budget_ns;
  if (strcmp(name, "shed.rate_window") == 0) return p->shed_rate_window_ns;
  if (strcmp(name, "shed.target") == 0) return p->shed_target_ns;
  if (strcmp(name, "shed.interval") == 0) return p->shed_interval_ns;
  if (strcmp(name, "shed.client_timeout") == 0) return p->shed_client_timeout_ns;
  if (strcmp(name, "shed.slo") == 0) return p->shed_slo_ns;
  CHECK(strcmp(name, "memory_limit") == 0);
  return p->memory_limit_bytes;
}

/* Property 4: a duration or size that pp_policy_set accepts has the value the text says
 * (within rounding), and a value over the field's limit is refused. */
static void check_value(const pp_policy *p, const char *name, const char *text) {
  long double ref, limit;
  if (!reference_value(name, text, &ref, &limit)) return;
  long double got = field_value(p, name);
  long double tolerance = ref * 1e-12L + 1;
  if (!(got >= ref - tolerance && got <= ref + tolerance && ref <= limit + tolerance))
    fprintf(stderr, "fuzz_policy: %s=%s gave %.0Lf, the text says %.3Lf (limit %.0Lf)\n", name,
            text, got, ref, limit);
  CHECK(ref <= limit + tolerance);
  CHECK(got >= ref - tolerance && got <= ref + tolerance);
}

static void fuzz_set(const uint8_t *data, size_t size) {
  /* "name=value" from the first line; both NUL-terminated copies. */
  const uint8_t *nl = memchr(data, '\n', size);
  size_t line = nl ? (size_t)(nl - data) : size;
  const uint8_t *eq = memchr(data, '=', line);
  if (!eq) return;
  size_t nlen = (size_t)(eq - data), vlen = line - nlen - 1;
  char *name = malloc(nlen + 1), *value = malloc(vlen + 1);
  CHECK(name && value);
  memcpy(name, data, nlen);
  name[nlen] = '\0';
  memcpy(value, eq + 1, vlen);
  value[vlen] = '\0';
  pp_policy p;
  pp_policy_defaults(&p);
  pp_policy_error err;
  memset(&err, 0, sizeof err);
  int rc = pp_policy_set(&p, name, value, &err);
  if (rc != 0) {
    check_error(rc, &err);
    free(name);
    free(value);
    return;
  }
  check_value(&p, name, value);
  if (pp_policy_validate(&p, &err) == 0) {
    check_canonical_roundtrip(&p);
  }
  free(name);
  free(value);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  pp_policy p;
  pp_policy_error err;
  int rc = pp_policy_parse(&p, (const char *)data, size, &err);
  if (rc != 0) {
    check_error(rc, &err);
  } else {
    pp_policy_error verr;
    CHECK(pp_policy_validate(&p, &verr) == 0);
    check_canonical_roundtrip(&p);
  }
  fuzz_set(data, size);
  return 0;
}
