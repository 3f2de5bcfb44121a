/* The soak harness's pure parts (bench/soak/soak.c): the per-phase tally, the flat-descriptor
 * verdict, the heap-slot reader of /stats, the capacity estimate and the phase schedules. No
 * sockets, no clocks: labelled unit. The run itself is tested end to end by
 * bench/tests/soak.cmake (puma-plus, and the null server with an injected leak). */
#include <CUnit/Basic.h>
#include <stdlib.h>
#include <string.h>

#include "bench/gen/schedule.h"
#include "bench/soak/soak.h"

#define MS  1000000ull
#define SEC 1000000000ull

static pb_result res(uint8_t outcome, uint16_t status, uint64_t latency_ns, int16_t error) {
  pb_result r = {.intended_ns = 1 * SEC,
                 .done_ns = 1 * SEC + latency_ns,
                 .outcome = outcome,
                 .status = status,
                 .error = error};
  return r;
}

/* Every outcome lands in exactly one column; 413 is split from other statuses; failures count
 * only in steady phases; transport causes are named, most frequent first. */
static void test_tally_splits_outcomes(void) {
  pb_result r[] = {
      res(PB_OK, 200, 10 * MS, 0),          res(PB_OK, 204, 30 * MS, 0),
      res(PB_SHED, 503, 1 * MS, 0),         res(PB_HTTP_ERROR, 413, 2 * MS, 0),
      res(PB_HTTP_ERROR, 500, 2 * MS, 0),   res(PB_HTTP_ERROR, 404, 2 * MS, 0),
      res(PB_TIMEOUT, 0, 10 * SEC, 0),      res(PB_CANCELLED, 0, 50 * MS, 0),
      res(PB_CONN_ERROR, 0, 1 * MS, -104),  res(PB_CONN_ERROR, 0, 1 * MS, -4095),
      res(PB_CONN_ERROR, 0, 1 * MS, -4095),
  };
  size_t n = sizeof r / sizeof r[0];
  pb_soak_phase p;
  memset(&p, 0, sizeof p);
  pb_soak_tally(r, n, true, &p);
  CU_ASSERT_EQUAL(p.requests, n);
  CU_ASSERT_EQUAL(p.ok, 2);
  CU_ASSERT_EQUAL(p.shed_503, 1);
  CU_ASSERT_EQUAL(p.too_large_413, 1);
  CU_ASSERT_EQUAL(p.other_status, 2);
  CU_ASSERT_EQUAL(p.timeouts, 1);
  CU_ASSERT_EQUAL(p.cancelled, 1);
  CU_ASSERT_EQUAL(p.transport_errors, 3);
  CU_ASSERT_EQUAL(p.ok + p.shed_503 + p.too_large_413 + p.other_status + p.timeouts + p.cancelled +
                      p.transport_errors,
                  n);
  CU_ASSERT_EQUAL(p.failures, n - 2);
  CU_ASSERT(p.p99_ok_ms > 29 && p.p99_ok_ms < 31);
  CU_ASSERT(p.p99_503_ms > 0.9 && p.p99_503_ms < 1.1);
  CU_ASSERT_STRING_EQUAL(p.transport_causes, "EOF 2, ECONNRESET 1");
  pb_soak_tally(r, n, false, &p);
  CU_ASSERT_EQUAL(p.failures, 0);
  pb_soak_tally(r, 2, true, &p); /* all 2xx: no failure, no 503 latency */
  CU_ASSERT_EQUAL(p.failures, 0);
  CU_ASSERT(p.p99_503_ms < 0);
  CU_ASSERT_STRING_EQUAL(p.transport_causes, "");
}

static void test_fds_flat_within_tolerance_only(void) {
  int32_t flat[] = {27, 28, 25};
  int32_t leak[] = {27, 33, 40};
  int32_t unknown[] = {27, -1};
  CU_ASSERT_TRUE(pb_soak_fds_flat(27, flat, 3, 2));
  CU_ASSERT_FALSE(pb_soak_fds_flat(27, flat, 3, 1)); /* 25 is 2 below */
  CU_ASSERT_FALSE(pb_soak_fds_flat(27, leak, 3, 4));
  CU_ASSERT_FALSE(pb_soak_fds_flat(27, unknown, 2, 4)); /* unknown is never flat */
  CU_ASSERT_FALSE(pb_soak_fds_flat(-1, flat, 3, 4));
  CU_ASSERT_FALSE(pb_soak_fds_flat(27, flat, 0, 4)); /* no cycle: nothing shown */
}

static void test_heap_slots_sum_or_unknown(void) {
  CU_ASSERT_EQUAL(pb_soak_heap_slots("{\"worker_status\":[{\"last_status\":{\"heap_live_slots\":"
                                     "100}},{\"last_status\":{\"heap_live_slots\":23}}]}"),
                  123);
  /* One worker without it: unknown, not a partial sum. */
  CU_ASSERT_EQUAL(pb_soak_heap_slots("{\"worker_status\":[{\"last_status\":{\"heap_live_slots\":"
                                     "100}},{\"last_status\":{\"running\":5}}]}"),
                  -1);
  CU_ASSERT_EQUAL(pb_soak_heap_slots("{\"worker_status\":[{\"last_status\":{\"running\":5}}]}"),
                  -1);
  CU_ASSERT_EQUAL(pb_soak_heap_slots("{\"worker_status\":[]}"), -1);
  CU_ASSERT_EQUAL(pb_soak_heap_slots("{\"workers\":2}"), -1);
  CU_ASSERT_EQUAL(pb_soak_heap_slots("not json"), -1);
}

static void test_capacity_is_threads_or_cores(void) {
  /* 2 x 5 threads at 22 ms each: 454.5 rps; 2 cores at 2 ms CPU each: 1000 rps. */
  CU_ASSERT_DOUBLE_EQUAL(pb_soak_capacity(2, 5, 2, 20, 2), 10000.0 / 22, 0.01);
  /* 8 x 16 threads would be 5818 rps, but 2 cores give 1000. */
  CU_ASSERT_DOUBLE_EQUAL(pb_soak_capacity(8, 16, 2, 20, 2), 1000, 0.01);
  CU_ASSERT_DOUBLE_EQUAL(pb_soak_capacity(1, 1, 0, 0, 2), 0, 0);
}

static size_t of_kind(const pb_schedule *s, uint32_t k) {
  size_t n = 0;
  for (size_t i = 0; i < s->count; i++)
    n += s->arrivals[i].kind == k;
  return n;
}

/* Each phase's schedule has the paths, bodies and cancel times the phase promises, at the
 * rate it promises, the same for the same seed. */
static void test_phase_schedules(void) {
  pb_soak_config c;
  pb_soak_defaults(&c);
  c.phase_ns[PB_SOAK_STEADY] = 100 * SEC;
  c.steady_rps = 100;
  pb_schedule s, t;
  pb_kind_spec *k, *k2;
  CU_ASSERT_FATAL(pb_soak_schedule(&c, PB_SOAK_STEADY, 400, 7, &s, &k) == 0);
  CU_ASSERT_EQUAL_FATAL(s.path_count, 3);
  CU_ASSERT_STRING_EQUAL(s.paths[0], "/hello");
  CU_ASSERT_STRING_EQUAL(s.paths[1], "/mix/2/20");
  CU_ASSERT_STRING_EQUAL(s.paths[2], "/echo");
  CU_ASSERT_EQUAL(k[2].body_bytes, 256u * 1024);
  CU_ASSERT_EQUAL(k[0].body_bytes, 0);
  CU_ASSERT(s.count > 9500 && s.count < 10500);             /* Poisson 100 rps x 100 s */
  CU_ASSERT(of_kind(&s, 2) > 850 && of_kind(&s, 2) < 1150); /* 10% uploads */
  for (size_t i = 1; i < s.count; i++)
    CU_ASSERT(s.arrivals[i].intended_ns >= s.arrivals[i - 1].intended_ns);
  CU_ASSERT(s.arrivals[s.count - 1].intended_ns < 100 * SEC);
  CU_ASSERT_FATAL(pb_soak_schedule(&c, PB_SOAK_STEADY, 400, 7, &t, &k2) == 0);
  CU_ASSERT_EQUAL(pb_schedule_digest(&s), pb_schedule_digest(&t));
  pb_schedule_dispose(&t);
  free(k2);
  CU_ASSERT_FATAL(pb_soak_schedule(&c, PB_SOAK_STEADY, 400, 8, &t, &k2) == 0);
  CU_ASSERT_NOT_EQUAL(pb_schedule_digest(&s), pb_schedule_digest(&t));
  pb_schedule_dispose(&t);
  free(k2);
  pb_schedule_dispose(&s);
  free(k);

  c.phase_ns[PB_SOAK_OVERLOAD] = 10 * SEC;
  c.overload_x = 4;
  CU_ASSERT_FATAL(pb_soak_schedule(&c, PB_SOAK_OVERLOAD, 400, 1, &s, &k) == 0);
  CU_ASSERT_STRING_EQUAL(s.paths[0], "/mix/2/20");
  CU_ASSERT(s.count > 15000 && s.count < 17000); /* 4 x 400 rps x 10 s */
  pb_schedule_dispose(&s);
  free(k);

  c.phase_ns[PB_SOAK_BODY] = 12 * SEC;
  c.body_every_ns = 5 * SEC;
  c.body_concurrency = 64;
  CU_ASSERT_FATAL(pb_soak_schedule(&c, PB_SOAK_BODY, 400, 1, &s, &k) == 0);
  CU_ASSERT_EQUAL(s.count, 3 * 64); /* bursts at 0, 5 and 10 s */
  CU_ASSERT_EQUAL(k[0].body_bytes, 4u << 20);
  CU_ASSERT_EQUAL(s.arrivals[63].intended_ns, 0);
  CU_ASSERT_EQUAL(s.arrivals[64].intended_ns, 5 * SEC);
  CU_ASSERT_EQUAL(s.arrivals[191].intended_ns, 10 * SEC);
  pb_schedule_dispose(&s);
  free(k);
  c.body_every_ns = 0; /* one burst */
  CU_ASSERT_FATAL(pb_soak_schedule(&c, PB_SOAK_BODY, 400, 1, &s, &k) == 0);
  CU_ASSERT_EQUAL(s.count, 64);
  pb_schedule_dispose(&s);
  free(k);

  c.phase_ns[PB_SOAK_CANCEL] = 50 * SEC;
  c.cancel_rps = 20;
  CU_ASSERT_FATAL(pb_soak_schedule(&c, PB_SOAK_CANCEL, 400, 1, &s, &k) == 0);
  CU_ASSERT_EQUAL_FATAL(s.path_count, 2);
  CU_ASSERT_STRING_EQUAL(s.paths[0], "/mix/0/2000");
  CU_ASSERT_EQUAL(k[0].cancel_after_ns, 50 * MS);
  CU_ASSERT_EQUAL(k[1].cancel_after_ns, 500 * MS);
  CU_ASSERT(of_kind(&s, 0) > 400 && of_kind(&s, 1) > 400);
  pb_schedule_dispose(&s);
  free(k);

  c.phase_ns[PB_SOAK_RECOVERY] = 0; /* a phase of length 0 is skipped: no arrivals */
  CU_ASSERT_FATAL(pb_soak_schedule(&c, PB_SOAK_RECOVERY, 400, 1, &s, &k) == 0);
  CU_ASSERT_EQUAL(s.count, 0);
  pb_schedule_dispose(&s);
  free(k);
}

/* The long form's defaults reach Ruvoy's 2.5 M requests with the default 2 x 5 shape. */
static void test_long_form_is_ruvoy_scale(void) {
  pb_soak_config c;
  pb_soak_defaults(&c);
  double requests, seconds;
  pb_soak_plan(&c, pb_soak_capacity(2, 5, 2, 20, 2), &requests, &seconds);
  CU_ASSERT(requests >= 2.5e6);
  pb_soak_short(&c);
  pb_soak_plan(&c, pb_soak_capacity(2, 5, 2, 20, 2), &requests, &seconds);
  CU_ASSERT(seconds < 45); /* schedules; the rest of the 60 s is start, tails and settling */
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 2;
  CU_pSuite s = CU_add_suite("bench_soak", NULL, NULL);
  CU_add_test(s, "tally splits outcomes", test_tally_splits_outcomes);
  CU_add_test(s, "fds flat within tolerance only", test_fds_flat_within_tolerance_only);
  CU_add_test(s, "heap slots: the sum or unknown", test_heap_slots_sum_or_unknown);
  CU_add_test(s, "capacity is threads or cores", test_capacity_is_threads_or_cores);
  CU_add_test(s, "phase schedules", test_phase_schedules);
  CU_add_test(s, "long form is Ruvoy's scale", test_long_form_is_ruvoy_scale);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failures = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}
