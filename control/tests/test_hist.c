/* Tests for control/hist.c: bucket geometry, percentiles against exact percentiles of the
 * sorted samples (random and adversarial distributions), merge, reset, the window. */
#include "control/hist.h"
#include "test_util.h"

#include <stdlib.h>
#include <string.h>

static pp_hist h, h2; /* 32 KiB each: keep them off the stack */

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Percentiles to check, in permille so the exact rank is integer arithmetic. */
static const unsigned permilles[] = {1, 10, 100, 250, 500, 750, 900, 950, 990, 999, 1000};

/* Checks every listed percentile of h against the sorted samples: relative error <= 1%
 * (the layout promises < 0.4%), and p100 == max exactly. */
static void check_against_sorted(uint64_t *v, size_t n) {
  qsort(v, n, sizeof *v, cmp_u64);
  for (size_t i = 0; i < sizeof permilles / sizeof permilles[0]; i++) {
    uint64_t pm = permilles[i];
    uint64_t rank = (pm * n + 999) / 1000;
    if (rank == 0) rank = 1;
    uint64_t exact = v[rank - 1];
    uint64_t got = pp_hist_percentile(&h, (double)pm / 10.0);
    double err = exact ? fabs((double)got - (double)exact) / (double)exact : (double)got;
    if (err > 0.01)
      fprintf(stderr, "p%.1f: exact %llu got %llu (err %.4f)\n", pm / 10.0,
              (unsigned long long)exact, (unsigned long long)got, err);
    CU_ASSERT(err <= 0.01);
  }
  CU_ASSERT_EQUAL(pp_hist_percentile(&h, 100), v[n - 1]);
  CU_ASSERT_EQUAL(pp_hist_percentile(&h, 0), v[0]);
  CU_ASSERT_EQUAL(h.min_ns, v[0]);
  CU_ASSERT_EQUAL(h.max_ns, v[n - 1]);
  CU_ASSERT_EQUAL(h.count, n);
}

#define N 20000
static uint64_t samples[N];

static void fill_and_check(uint64_t (*gen)(test_rng *), uint64_t seed) {
  test_rng r = {seed};
  pp_hist_init(&h);
  for (size_t i = 0; i < N; i++) {
    samples[i] = gen(&r);
    pp_hist_record(&h, samples[i]);
  }
  check_against_sorted(samples, N);
}

static uint64_t gen_uniform(test_rng *r) { /* 1 us .. 100 s */
  return 1000 + rng_next(r) % 100000000000ull;
}
static uint64_t gen_exponential(test_rng *r) { /* mean 25 ms */
  return (uint64_t)(-log(1.0 - rng_unit(r)) * 25e6) + 1000;
}
static uint64_t gen_lognormal(test_rng *r) { /* median 20 ms, heavy tail */
  double x = exp(log(20e6) + 1.5 * rng_normal(r));
  return x > 1e11 ? 100000000000ull : (uint64_t)x + 1000;
}
static uint64_t gen_small(test_rng *r) { /* the exact range and its first groups */
  return rng_next(r) % 2000;
}

static void test_uniform(void) {
  fill_and_check(gen_uniform, 1);
}
static void test_exponential(void) {
  fill_and_check(gen_exponential, 2);
}
static void test_lognormal(void) {
  fill_and_check(gen_lognormal, 3);
}
static void test_small_values(void) {
  fill_and_check(gen_small, 4);
}

static void test_bucket_geometry(void) {
  /* Every bucket's range maps back to itself, ranges tile [0, MAX] without gaps, and a
   * bucket is never wider than 1/128 of its lower bound. */
  uint64_t expect_lo = 0;
  for (uint32_t b = 0; b < PP_HIST_BUCKETS; b++) {
    uint64_t lo, hi;
    pp_hist__bucket_range(b, &lo, &hi);
    CU_ASSERT_EQUAL_FATAL(lo, expect_lo);
    CU_ASSERT(hi >= lo);
    CU_ASSERT_EQUAL(pp_hist__bucket_of(lo), b);
    CU_ASSERT_EQUAL(pp_hist__bucket_of(hi), b);
    if (lo >= PP_HIST_SUB_COUNT) CU_ASSERT((hi - lo + 1) * PP_HIST_SUB_COUNT <= lo);
    expect_lo = hi + 1;
  }
  CU_ASSERT_EQUAL(expect_lo, PP_HIST_MAX_NS + 1);
  CU_ASSERT_EQUAL(pp_hist__bucket_of(PP_HIST_MAX_NS + 1), PP_HIST_BUCKETS - 1);
  CU_ASSERT_EQUAL(pp_hist__bucket_of(UINT64_MAX), PP_HIST_BUCKETS - 1);
}

static void test_all_equal(void) {
  pp_hist_init(&h);
  for (int i = 0; i < 1000; i++)
    pp_hist_record(&h, 12345678);
  for (double q = 0; q <= 100; q += 0.5)
    CU_ASSERT_EQUAL(pp_hist_percentile(&h, q), 12345678);
  CU_ASSERT_EQUAL(pp_hist_mean(&h), 12345678);
}

static void test_two_point(void) {
  size_t n = 0;
  pp_hist_init(&h);
  for (int i = 0; i < 500; i++)
    samples[n++] = 1000, pp_hist_record(&h, 1000);
  for (int i = 0; i < 500; i++)
    samples[n++] = 1000000000, pp_hist_record(&h, 1000000000);
  uint64_t p50 = pp_hist_percentile(&h, 50);
  CU_ASSERT(p50 >= 1000 && p50 <= 1010);
  uint64_t p51 = pp_hist_percentile(&h, 50.1);
  CU_ASSERT(p51 >= 990000000 && p51 <= 1010000000);
  check_against_sorted(samples, n);
}

static void test_powers_of_two_and_edges(void) {
  size_t n = 0;
  pp_hist_init(&h);
  for (unsigned k = 0; k < PP_HIST_MAX_BITS; k++) {
    uint64_t v = 1ull << k;
    samples[n++] = v, pp_hist_record(&h, v);
    samples[n++] = v - 1, pp_hist_record(&h, v - 1);
    samples[n++] = v + 1, pp_hist_record(&h, v + 1);
  }
  check_against_sorted(samples, n);
  /* Each single-sample histogram at a bucket edge reports that exact sample (clamping). */
  test_rng r = {9};
  for (int i = 0; i < 2000; i++) {
    uint32_t b = (uint32_t)(rng_next(&r) % PP_HIST_BUCKETS);
    uint64_t lo, hi;
    pp_hist__bucket_range(b, &lo, &hi);
    pp_hist_init(&h2);
    pp_hist_record(&h2, lo);
    pp_hist_record(&h2, hi);
    uint64_t p50 = pp_hist_percentile(&h2, 50);
    CU_ASSERT(p50 >= lo && p50 <= hi);
    CU_ASSERT_EQUAL(pp_hist_percentile(&h2, 100), hi);
    CU_ASSERT_EQUAL(pp_hist_percentile(&h2, 0), lo);
  }
}

static void test_huge_values(void) {
  pp_hist_init(&h);
  pp_hist_record(&h, 5);
  pp_hist_record(&h, UINT64_MAX);
  pp_hist_record(&h, PP_HIST_MAX_NS + 12345);
  CU_ASSERT_EQUAL(h.count, 3);
  CU_ASSERT_EQUAL(h.max_ns, UINT64_MAX);
  CU_ASSERT_EQUAL(h.sum_ns, UINT64_MAX); /* saturated, not wrapped */
  CU_ASSERT_EQUAL(pp_hist_percentile(&h, 100), UINT64_MAX);
  CU_ASSERT_EQUAL(pp_hist_percentile(&h, 30), 5);
  uint64_t p60 = pp_hist_percentile(&h, 60);
  CU_ASSERT(p60 >= PP_HIST_MAX_NS / 2); /* clamped into the top bucket, never below it */
  pp_hist_record_n(&h, UINT64_MAX / 2, 4);
  CU_ASSERT_EQUAL(h.count, 7);
  CU_ASSERT_EQUAL(h.sum_ns, UINT64_MAX);
}

static void test_empty_and_mean(void) {
  pp_hist_init(&h);
  CU_ASSERT_EQUAL(pp_hist_percentile(&h, 50), 0);
  CU_ASSERT_EQUAL(pp_hist_mean(&h), 0);
  CU_ASSERT_EQUAL(h.min_ns, UINT64_MAX);
  pp_hist_record(&h, 10);
  pp_hist_record(&h, 21);
  CU_ASSERT_EQUAL(pp_hist_mean(&h), 15);
  CU_ASSERT_EQUAL(h.sum_ns, 31);
  CU_ASSERT_EQUAL(pp_hist_percentile(&h, -5), 10);
  CU_ASSERT_EQUAL(pp_hist_percentile(&h, 250), 21);
}

static void test_record_n_matches_loop(void) {
  pp_hist_init(&h);
  pp_hist_init(&h2);
  test_rng r = {11};
  for (int i = 0; i < 200; i++) {
    uint64_t v = rng_next(&r) % 5000000000ull, n = rng_next(&r) % 5;
    pp_hist_record_n(&h, v, n);
    for (uint64_t k = 0; k < n; k++)
      pp_hist_record(&h2, v);
  }
  CU_ASSERT_EQUAL(memcmp(&h, &h2, sizeof h), 0);
}

static void test_merge(void) {
  static pp_hist a, b, all;
  pp_hist_init(&a);
  pp_hist_init(&b);
  pp_hist_init(&all);
  test_rng r = {12};
  for (int i = 0; i < 5000; i++) {
    uint64_t v = gen_lognormal(&r);
    pp_hist_record(i % 3 ? &a : &b, v);
    pp_hist_record(&all, v);
  }
  pp_hist_merge(&a, &b);
  CU_ASSERT_EQUAL(memcmp(&a, &all, sizeof a), 0);
  pp_hist_init(&b);
  pp_hist_merge(&a, &b); /* merging an empty histogram changes nothing */
  CU_ASSERT_EQUAL(memcmp(&a, &all, sizeof a), 0);
  pp_hist_merge(&b, &all); /* into an empty one copies it */
  CU_ASSERT_EQUAL(memcmp(&b, &all, sizeof b), 0);
}

static void test_reset(void) {
  pp_hist_init(&h2);
  pp_hist_init(&h);
  for (int i = 0; i < 100; i++)
    pp_hist_record(&h, (uint64_t)i * 7919);
  pp_hist_reset(&h);
  CU_ASSERT_EQUAL(memcmp(&h, &h2, sizeof h), 0);
}

static void test_window_roll(void) {
  static pp_hist_window w;
  pp_hist_window_init(&w);
  for (int i = 1; i <= 100; i++)
    pp_hist_window_record(&w, (uint64_t)i * 1000000);
  CU_ASSERT_EQUAL(w.window.count, 100);
  CU_ASSERT_EQUAL(w.lifetime.count, 100);
  pp_hist_window_roll(&w);
  CU_ASSERT_EQUAL(w.window.count, 0);
  CU_ASSERT_EQUAL(pp_hist_percentile(&w.window, 99), 0);
  CU_ASSERT_EQUAL(w.lifetime.count, 100);
  pp_hist_window_record(&w, 500000000);
  CU_ASSERT_EQUAL(pp_hist_percentile(&w.window, 50), 500000000);
  CU_ASSERT_EQUAL(w.lifetime.count, 101);
  CU_ASSERT_EQUAL(w.lifetime.max_ns, 500000000);
  uint64_t p50 = pp_hist_percentile(&w.lifetime, 50);
  CU_ASSERT(p50 >= 50000000 * 0.99 && p50 <= 51000000 * 1.01);
}

int pp_test_register(void) {
  static const test_case cases[] = {
      {"bucket geometry tiles the range", test_bucket_geometry},
      {"uniform 1us..100s vs sorted", test_uniform},
      {"exponential vs sorted", test_exponential},
      {"lognormal vs sorted", test_lognormal},
      {"small values exact range vs sorted", test_small_values},
      {"all equal", test_all_equal},
      {"two point", test_two_point},
      {"powers of two and bucket edges", test_powers_of_two_and_edges},
      {"huge values clamp and saturate", test_huge_values},
      {"empty, mean", test_empty_and_mean},
      {"record_n equals n records", test_record_n_matches_loop},
      {"merge", test_merge},
      {"reset", test_reset},
      {"window roll keeps lifetime", test_window_roll},
      {NULL, NULL},
  };
  return register_suite("hist", cases);
}
