/* Helpers shared by the control/ tests: a seeded PRNG of our own (tests never call rand(),
 * so a failure reproduces from its seed) and a suite-registration macro. */
#ifndef PP_TEST_UTIL_H
#define PP_TEST_UTIL_H

#include <CUnit/CUnit.h>
#include <math.h>
#include <stdint.h>

/* splitmix64: tiny, good enough for test data, same sequence everywhere. */
typedef struct test_rng {
  uint64_t s;
} test_rng;

static inline uint64_t rng_next(test_rng *r) {
  uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static inline double rng_unit(test_rng *r) {
  return (double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

/* Standard normal by Box-Muller. */
static inline double rng_normal(test_rng *r) {
  double u = rng_unit(r), v = rng_unit(r);
  if (u < 1e-300) u = 1e-300;
  return sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * v);
}

typedef struct test_case {
  const char *name;
  void (*fn)(void);
} test_case;

static inline int register_suite(const char *name, const test_case *cases) {
  CU_pSuite s = CU_add_suite(name, NULL, NULL);
  if (!s) return -1;
  for (const test_case *c = cases; c->name; c++)
    if (!CU_add_test(s, c->name, c->fn)) return -1;
  return 0;
}

#endif
