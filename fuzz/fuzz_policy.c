/* Fuzz target for the policy parser (control/policy.h).
 *
 * Input: YAML text, as a policy file would hold it (the files of scenarios/policies/ are seeds).
 * Properties:
 *  1. pp_policy_parse never crashes; on failure the error has a message.
 *  2. On success the policy validates, and its canonical text parses back to a policy with
 *     every field equal (doubles bit for bit), the same canonical text and the same hash.
 *  3. pp_policy_set, fed "field=value" from the first line of the input, never crashes; when
 *     it succeeds and the result validates, the same canonical round trip holds.
 * A violated property aborts, so libFuzzer and the replay driver report it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/control.h"
#include "fuzz/known.h"

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "fuzz_policy: property failed at %s:%d: %s\n", __FILE__, __LINE__, #cond);   \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

#define SAME(field) (memcmp(&a->field, &b->field, sizeof a->field) == 0)

static int policy_eq(const pp_policy *a, const pp_policy *b) {
  return SAME(tick_ns) && SAME(min_workers) && SAME(max_workers) && SAME(max_step) && SAME(cores) &&
         SAME(memory_limit_bytes) && SAME(target_queue_p95_ns) && SAME(severe_factor) &&
         SAME(breach_ticks) && SAME(calm_fraction) && SAME(calm_utilisation) && SAME(calm_ticks) &&
         SAME(spawn_cooldown_ns) && SAME(retire_cooldown_ns) && SAME(target_utilisation) &&
         SAME(threads_enabled) && SAME(min_threads) && SAME(max_threads) && SAME(gvl_wait_max_ns) &&
         SAME(shed_enabled) && SAME(shed_budget_ns);
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
  } else if (pp_policy_validate(&p, &err) == 0) {
    check_canonical_roundtrip(&p);
  }
  free(name);
  free(value);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (pp_fuzz_skip_known()) { /* pending finding 2: subnormal doubles (hex floats) */
    for (size_t i = 0; i + 1 < size; i++)
      if (data[i] == '0' && (data[i + 1] == 'x' || data[i + 1] == 'X')) return 0;
  }
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
