/* The generator against the fixed-delay reference server (bench/refsrv/nullsrv.c) on loopback.
 *
 * These tests use real sockets and the wall clock, so they are labelled `bench`, not `unit`:
 * under ASan the timing tolerances would not mean much. Each run is short (≤ 3 s) and the
 * tolerances are generous enough for a loaded 2-core machine while still failing the bugs they
 * target: latency measured from the send instead of the intended start, dropped arrivals,
 * non-2xx counted as success, arrivals beyond the connection cap lost. */
#include <CUnit/Basic.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "bench/gen/gen.h"
#include "bench/refsrv/nullsrv.h"
#include "bench/gen/schedule.h"
#include "bench/run/stats.h"

#define MS  1000000ull
#define SEC 1000000000ull

typedef struct run {
  pb_schedule sched;
  pb_result *results;
  pb_summary summary;
  uint64_t t0;
  uint64_t stall_began, stall_ended; /* absolute */
} run;

/* Runs `rate` rps (evenly spaced) on `path` for `dur_ns` against a fresh null server. */
static void run_against(run *r, uint32_t delay_ms, double rate, uint64_t dur_ns, const char *path,
                        uint32_t max_conns, uint64_t timeout_ns, uint64_t stall_offset_ns,
                        uint64_t stall_ns) {
  memset(r, 0, sizeof *r);
  CU_ASSERT_FATAL(pb_schedule_constant(&r->sched, rate, dur_ns, path, false, 1) == 0);
  r->results = calloc(r->sched.count, sizeof *r->results);
  CU_ASSERT_FATAL(r->results != NULL);
  const uint64_t start_delay = 100 * MS;
  pb_nullsrv_config nc = {.delay_ms = delay_ms};
  if (stall_ns) {
    nc.stall_at_ns = uv_hrtime() + start_delay + stall_offset_ns;
    nc.stall_ns = stall_ns;
  }
  pb_nullsrv *srv;
  int port;
  CU_ASSERT_FATAL(pb_nullsrv_start(&nc, &srv, &port) == 0);
  pb_gen_config cfg = {.host = "127.0.0.1",
                       .port = port,
                       .max_connections = max_conns,
                       .timeout_ns = timeout_ns,
                       .start_delay_ns = start_delay};
  char err[128];
  CU_ASSERT_FATAL(pb_gen_run(&cfg, &r->sched, r->results, &r->t0, err, sizeof err) == 0);
  pb_nullsrv_stop(srv, &r->stall_began, &r->stall_ended);
  pb_summarize(r->results, r->sched.count, timeout_ns ? timeout_ns : 20 * SEC, 0.01, &r->summary);
}

static void run_dispose(run *r) {
  free(r->results);
  pb_schedule_dispose(&r->sched);
}

/* Every arrival has exactly one final outcome: nothing is dropped silently. */
static void assert_all_accounted(const run *r) {
  uint64_t total = 0;
  for (int o = PB_OK; o < PB_OUTCOME_COUNT; o++)
    total += r->summary.outcomes[o];
  CU_ASSERT_EQUAL(r->summary.outcomes[PB_PENDING], 0);
  CU_ASSERT_EQUAL(total, r->sched.count);
}

static void test_below_capacity_latency_is_the_delay(void) {
  run r;
  run_against(&r, 20, 100, 1500 * MS, "/hello", 0, 0, 0, 0);
  CU_ASSERT_EQUAL(r.sched.count, 150);
  assert_all_accounted(&r);
  CU_ASSERT_EQUAL(r.summary.outcomes[PB_OK], r.sched.count);
  CU_ASSERT_TRUE(r.summary.check_ok);
  uint64_t p50 = pp_hist_percentile(&r.summary.latency, 50);
  /* The server waits 20 ms; loopback and both event loops add well under 10 ms. */
  CU_ASSERT(p50 >= 19 * MS); /* the null server's timer counts from its cached loop time */
  CU_ASSERT(p50 < 30 * MS);
  /* Offered rate is the schedule's, independent of the server. */
  CU_ASSERT(r.summary.offered_rps > 95 && r.summary.offered_rps < 105);
  /* Concurrency is ~rate*delay = 2 in flight: the pool must reuse keep-alive connections. */
  CU_ASSERT(r.summary.conns_opened <= 16);
  run_dispose(&r);
}

/* The coordinated-omission test. The server's whole event loop freezes for 1 s, one second
 * into a 3 s run at 200 rps. Requests whose intended time falls inside the stall cannot be
 * answered before it ends, so their latency measured from the intended start must be at least
 * (stall end - intended). A closed-loop generator (wrk, ab: each connection sends its next
 * request only after the previous response, timing from the send) fails this test twice over:
 * its connections are blocked during the stall, so it sends almost none of the requests that
 * were due then, and those it sends after the stall are timed from that late send and look
 * fast (≈ the 5 ms delay). The stall would appear as a handful of slow requests, one per
 * connection, instead of ~200. */
static void test_stall_is_measured_from_intended_start(void) {
  run r;
  run_against(&r, 5, 200, 3 * SEC, "/hello", 0, 0, 1 * SEC, 1 * SEC);
  assert_all_accounted(&r);
  CU_ASSERT_EQUAL(r.summary.outcomes[PB_OK], r.sched.count);
  CU_ASSERT_FATAL(r.stall_began > r.t0 && r.stall_ended > r.stall_began);
  uint64_t began = r.stall_began - r.t0, ended = r.stall_ended - r.t0;
  CU_ASSERT(ended - began >= 990 * MS);
  size_t during = 0, honest = 0, slow = 0;
  for (size_t i = 0; i < r.sched.count; i++) {
    const pb_result *x = &r.results[i];
    uint64_t latency = x->done_ns - x->intended_ns;
    if (latency > 250 * MS) slow++;
    /* Margins keep requests racing the stall's edges out of the count. */
    if (x->intended_ns < began + 20 * MS || x->intended_ns > ended - 20 * MS) continue;
    during++;
    if (latency + 2 * MS >= ended - x->intended_ns) honest++;
  }
  CU_ASSERT(during >= 180); /* 200 rps × ~0.96 s */
  CU_ASSERT_EQUAL(honest, during);
  /* Roughly the first three quarters of the stall's arrivals waited more than 250 ms. */
  CU_ASSERT(slow >= 130);
  CU_ASSERT(pp_hist_percentile(&r.summary.latency, 99) >= 800 * MS);
  run_dispose(&r);
}

static void test_non_2xx_is_never_success(void) {
  static const struct {
    const char *path;
    int outcome;
  } cases[] = {
      {"/status/500", PB_HTTP_ERROR}, {"/status/404", PB_HTTP_ERROR},
      {"/status/302", PB_HTTP_ERROR}, {"/status/503", PB_SHED},
      {"/status/204", PB_OK},         {"/status/299", PB_OK},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    run r;
    run_against(&r, 0, 100, 200 * MS, cases[k].path, 0, 0, 0, 0);
    assert_all_accounted(&r);
    CU_ASSERT_EQUAL(r.summary.outcomes[cases[k].outcome], r.sched.count);
    if (cases[k].outcome != PB_OK) {
      CU_ASSERT_EQUAL(r.summary.outcomes[PB_OK], 0);
      CU_ASSERT_FALSE(r.summary.check_ok); /* never reported as throughput */
      CU_ASSERT_EQUAL(r.summary.latency.count, 0);
    } else {
      CU_ASSERT_TRUE(r.summary.check_ok);
    }
    for (size_t i = 0; i < r.sched.count; i++)
      CU_ASSERT_EQUAL(r.results[i].status, (uint16_t)atoi(cases[k].path + 8));
    run_dispose(&r);
  }
}

/* Two connections, 50 ms per request: capacity 40 rps against 100 offered. Arrivals wait in
 * the generator, none is lost, and their latency keeps counting from the intended start. */
static void test_connection_cap_waits_and_still_times_from_intended(void) {
  run r;
  run_against(&r, 50, 100, 1 * SEC, "/hello", 2, 0, 0, 0);
  assert_all_accounted(&r);
  CU_ASSERT_EQUAL(r.summary.outcomes[PB_OK], r.sched.count);
  CU_ASSERT(r.summary.conns_opened <= 2);
  /* 100 requests through 2 × 20 rps take ≥ 2.5 s: the last one waited ≥ 1.4 s. */
  const pb_result *last = &r.results[r.sched.count - 1];
  CU_ASSERT(last->done_ns - last->intended_ns >= 1400 * MS);
  /* ...and its send was late by about as much: that is connection wait, not pacer lateness. */
  CU_ASSERT(last->sent_ns - last->intended_ns >= 1300 * MS);
  CU_ASSERT(last->dispatched_ns - last->intended_ns < 50 * MS);
  run_dispose(&r);
}

/* One connection allowed, and the server closes it after every response. Arrivals that wait
 * for a connection must get a new one when the old one closes, not only when another arrival
 * comes along: here all 20 arrive within 100 ms and nothing follows. */
static void test_closed_connections_are_replaced_for_waiting_arrivals(void) {
  run r;
  run_against(&r, 20, 200, 100 * MS, "/close", 1, 2 * SEC, 0, 0);
  assert_all_accounted(&r);
  CU_ASSERT_EQUAL(r.summary.outcomes[PB_OK], r.sched.count);
  /* One connection per request, one at a time: ~20 × (20 ms + connect) ≈ 0.5 s in all. */
  CU_ASSERT(r.summary.conns_opened >= r.sched.count);
  for (size_t i = 1; i < r.sched.count; i++)
    CU_ASSERT(r.results[i].conn_id != r.results[i - 1].conn_id);
  CU_ASSERT(r.results[r.sched.count - 1].done_ns < 1500 * MS);
  run_dispose(&r);
}

static void test_timeout_from_intended_start(void) {
  run r;
  run_against(&r, 400, 50, 400 * MS, "/hello", 0, 100 * MS, 0, 0);
  assert_all_accounted(&r);
  CU_ASSERT_EQUAL(r.summary.outcomes[PB_TIMEOUT], r.sched.count);
  for (size_t i = 0; i < r.sched.count; i++) {
    uint64_t waited = r.results[i].done_ns - r.results[i].intended_ns;
    CU_ASSERT(waited >= 100 * MS && waited < 160 * MS); /* the sweep runs every 10 ms */
  }
  run_dispose(&r);
}

static void test_dead_server_is_errors_not_silence(void) {
  pb_schedule s;
  CU_ASSERT_FATAL(pb_schedule_constant(&s, 100, 200 * MS, "/hello", false, 1) == 0);
  pb_result *res = calloc(s.count, sizeof *res);
  /* Port 1 on loopback: nothing listens there; connects are refused. */
  pb_gen_config cfg = {.host = "127.0.0.1", .port = 1, .timeout_ns = 1 * SEC};
  CU_ASSERT_FATAL(pb_gen_run(&cfg, &s, res, NULL, NULL, 0) == 0);
  pb_summary sum;
  pb_summarize(res, s.count, cfg.timeout_ns, 0.01, &sum);
  CU_ASSERT_EQUAL(sum.outcomes[PB_CONN_ERROR] + sum.outcomes[PB_TIMEOUT], s.count);
  CU_ASSERT_EQUAL(sum.outcomes[PB_OK], 0);
  CU_ASSERT_FALSE(sum.check_ok);
  if (sum.outcomes[PB_CONN_ERROR])
    CU_ASSERT_PTR_NOT_NULL(strstr(sum.conn_error_causes, "ECONNREFUSED"));
  free(res);
  pb_schedule_dispose(&s);
}

/* ---- request bodies and cancellations (pb_kind_spec), over h1 and h2c ---- */

typedef struct kind_run {
  pb_result *results;
  size_t n;
  pb_gen_counters counters;
  uint64_t served;
} kind_run;

/* `n` arrivals at once of one kind on /echo against a fresh null server answering after
 * `delay_ms`. */
static void run_kind(kind_run *r, pb_proto proto, uint32_t delay_ms, uint32_t n,
                     const pb_kind_spec *kind) {
  memset(r, 0, sizeof *r);
  pb_schedule s = {0};
  s.arrivals = calloc(n, sizeof *s.arrivals);
  s.paths = calloc(1, sizeof *s.paths);
  CU_ASSERT_FATAL(s.arrivals && s.paths && (s.paths[0] = strdup("/echo")));
  s.path_count = 1;
  s.count = n;
  r->results = calloc(n, sizeof *r->results);
  r->n = n;
  CU_ASSERT_FATAL(r->results != NULL);
  pb_nullsrv_config nc = {.delay_ms = delay_ms, .h2 = proto == PB_PROTO_H2};
  pb_nullsrv *srv;
  int port;
  CU_ASSERT_FATAL(pb_nullsrv_start(&nc, &srv, &port) == 0);
  pb_gen_config cfg = {.host = "127.0.0.1",
                       .port = port,
                       .timeout_ns = 10 * SEC,
                       .proto = proto,
                       .h2_connections = 4,
                       .counters = &r->counters,
                       .kinds = kind};
  char err[128];
  CU_ASSERT_FATAL(pb_gen_run(&cfg, &s, r->results, NULL, err, sizeof err) == 0);
  r->served = pb_nullsrv_served(srv);
  pb_nullsrv_stop(srv, NULL, NULL);
  pb_schedule_dispose(&s);
}

static size_t count_outcome(const kind_run *r, pb_outcome o) {
  size_t k = 0;
  for (size_t i = 0; i < r->n; i++)
    k += r->results[i].outcome == o;
  return k;
}

/* 64 concurrent 4 MiB uploads: every one arrives whole (the server answers only after the
 * last body byte: llhttp's message end, h2 END_STREAM) and is answered 2xx. The h2 run pushes
 * 16 streams per connection through nghttp2's flow control. */
static void uploads_arrive_whole(pb_proto proto) {
  pb_kind_spec kind = {.body_bytes = 4u << 20};
  kind_run r;
  run_kind(&r, proto, 0, 64, &kind);
  CU_ASSERT_EQUAL(count_outcome(&r, PB_OK), 64);
  CU_ASSERT_EQUAL(r.served, 64);
  if (proto == PB_PROTO_H2) CU_ASSERT_EQUAL(r.counters.connections_opened, 4);
  free(r.results);
}

static void test_uploads_arrive_whole_h1(void) {
  uploads_arrive_whole(PB_PROTO_H1);
}
static void test_uploads_arrive_whole_h2(void) {
  uploads_arrive_whole(PB_PROTO_H2);
}

/* A client that leaves 50 ms after sending, from a server that answers after 500 ms: every
 * request ends cancelled at 50 ms (+ the 10 ms sweep, + a loaded machine's slack), none is
 * answered or counted as an error. h1 closes each connection; h2 resets the streams and keeps
 * its 4 connections. A response that comes before the cancel time wins. */
static void cancels_leave_on_time(pb_proto proto) {
  pb_kind_spec kind = {.cancel_after_ns = 50 * MS};
  kind_run r;
  run_kind(&r, proto, 500, 20, &kind);
  CU_ASSERT_EQUAL(count_outcome(&r, PB_CANCELLED), 20);
  for (size_t i = 0; i < r.n; i++) {
    uint64_t held = r.results[i].done_ns - r.results[i].sent_ns;
    CU_ASSERT(held >= 50 * MS && held < 250 * MS);
  }
  CU_ASSERT_EQUAL(r.counters.connections_opened, proto == PB_PROTO_H2 ? 4u : 20u);
  free(r.results);
  kind.cancel_after_ns = 1 * SEC;
  run_kind(&r, proto, 10, 20, &kind);
  CU_ASSERT_EQUAL(count_outcome(&r, PB_OK), 20);
  free(r.results);
}

static void test_cancels_leave_on_time_h1(void) {
  cancels_leave_on_time(PB_PROTO_H1);
}
static void test_cancels_leave_on_time_h2(void) {
  cancels_leave_on_time(PB_PROTO_H2);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 2;
  CU_pSuite s = CU_add_suite("bench_gen", NULL, NULL);
  CU_add_test(s, "below capacity latency is the delay", test_below_capacity_latency_is_the_delay);
  CU_add_test(s, "stall measured from intended start", test_stall_is_measured_from_intended_start);
  CU_add_test(s, "non-2xx never success", test_non_2xx_is_never_success);
  CU_add_test(s, "connection cap waits, timed from intended",
              test_connection_cap_waits_and_still_times_from_intended);
  CU_add_test(s, "closed connections replaced",
              test_closed_connections_are_replaced_for_waiting_arrivals);
  CU_add_test(s, "timeout from intended start", test_timeout_from_intended_start);
  CU_add_test(s, "dead server is errors", test_dead_server_is_errors_not_silence);
  CU_add_test(s, "uploads arrive whole (h1)", test_uploads_arrive_whole_h1);
  CU_add_test(s, "uploads arrive whole (h2c)", test_uploads_arrive_whole_h2);
  CU_add_test(s, "cancels leave on time (h1)", test_cancels_leave_on_time_h1);
  CU_add_test(s, "cancels leave on time (h2c)", test_cancels_leave_on_time_h2);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failures = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}
