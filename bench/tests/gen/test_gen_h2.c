/* The generator's HTTP/2 and TLS paths against the reference server (bench/refsrv/nullsrv.c)
 * speaking h2c, h2 over TLS and h1 over TLS on loopback, with the server's behaviour under the
 * test's control: a fixed delay per stream, a stall of its whole loop,
 * SETTINGS_MAX_CONCURRENT_STREAMS, RST_STREAM, GOAWAY and ALPN.
 *
 * The h1 suite (test_gen.c) holds the generator to open-loop timing; this one holds every other
 * protocol to the same rules: latency from the intended start (through a server stall, and for
 * arrivals waiting for a free stream), one outcome per arrival, non-2xx never success, timeouts
 * from the intended start, and connection-level failures as conn_errors with a cause and a
 * message, never a hang. Real sockets and the wall clock: labelled `bench`, like test_gen. */
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
  pb_gen_counters counters;
  uint64_t t0;
  uint64_t stall_began, stall_ended; /* absolute */
  uint64_t wall_ns;                  /* how long pb_gen_run took */
} run;

/* What the server does and how the generator talks to it. */
typedef struct setup {
  pb_nullsrv_config srv;
  pb_proto proto;
  int tls;
  uint32_t h2_conns;
  uint64_t timeout_ns;
  uint64_t stall_offset_ns; /* from the run start; with srv.stall_ns */
} setup;

static void run_against(run *r, const setup *su, double rate, uint64_t dur_ns, const char *path) {
  memset(r, 0, sizeof *r);
  CU_ASSERT_FATAL(pb_schedule_constant(&r->sched, rate, dur_ns, path, false, 1) == 0);
  r->results = calloc(r->sched.count, sizeof *r->results);
  CU_ASSERT_FATAL(r->results != NULL);
  const uint64_t start_delay = 100 * MS;
  pb_nullsrv_config nc = su->srv;
  if (nc.stall_ns) nc.stall_at_ns = uv_hrtime() + start_delay + su->stall_offset_ns;
  pb_nullsrv *srv;
  int port;
  CU_ASSERT_FATAL(pb_nullsrv_start(&nc, &srv, &port) == 0);
  pb_gen_config cfg = {.host = "127.0.0.1",
                       .port = port,
                       .timeout_ns = su->timeout_ns,
                       .start_delay_ns = start_delay,
                       .proto = su->proto,
                       .tls = su->tls,
                       .h2_connections = su->h2_conns,
                       .counters = &r->counters};
  char err[128];
  uint64_t began = uv_hrtime();
  CU_ASSERT_FATAL(pb_gen_run(&cfg, &r->sched, r->results, &r->t0, err, sizeof err) == 0);
  r->wall_ns = uv_hrtime() - began;
  pb_nullsrv_stop(srv, &r->stall_began, &r->stall_ended);
  pb_summarize(r->results, r->sched.count, su->timeout_ns ? su->timeout_ns : 20 * SEC, 0.01,
               &r->summary);
}

static void run_dispose(run *r) {
  free(r->results);
  pb_schedule_dispose(&r->sched);
}

static void assert_all_accounted(const run *r) {
  uint64_t total = 0;
  for (int o = PB_OK; o < PB_OUTCOME_COUNT; o++)
    total += r->summary.outcomes[o];
  CU_ASSERT_EQUAL(r->summary.outcomes[PB_PENDING], 0);
  CU_ASSERT_EQUAL(total, r->sched.count);
}

/* Every arrival failed as a conn_error with cause `err`. */
static void assert_all_conn_errors(const run *r, int err) {
  assert_all_accounted(r);
  CU_ASSERT_EQUAL(r->summary.outcomes[PB_CONN_ERROR], r->sched.count);
  CU_ASSERT_FALSE(r->summary.check_ok);
  for (size_t i = 0; i < r->sched.count; i++)
    CU_ASSERT_EQUAL(r->results[i].error, err);
}

/* Most requests in flight at once, from the per-request [sent, done] intervals (a request done
 * at the instant another is sent does not overlap it). */
static uint32_t max_overlap(const run *r) {
  uint32_t best = 0;
  for (size_t i = 0; i < r->sched.count; i++) {
    const pb_result *x = &r->results[i];
    if (!x->sent_ns) continue;
    uint32_t n = 0;
    for (size_t j = 0; j < r->sched.count; j++) {
      const pb_result *y = &r->results[j];
      if (y->sent_ns && y->sent_ns <= x->sent_ns && y->done_ns > x->sent_ns) n++;
    }
    if (n > best) best = n;
  }
  return best;
}

static void test_h2c_latency_is_the_delay_on_the_pool(void) {
  setup su = {.srv = {.delay_ms = 20, .h2 = 1}, .proto = PB_PROTO_H2, .h2_conns = 2};
  run r;
  run_against(&r, &su, 200, 1 * SEC, "/hello");
  assert_all_accounted(&r);
  CU_ASSERT_EQUAL(r.summary.outcomes[PB_OK], r.sched.count);
  CU_ASSERT_TRUE(r.summary.check_ok);
  uint64_t p50 = pp_hist_percentile(&r.summary.latency, 50);
  CU_ASSERT(p50 >= 19 * MS); /* the null server's timer counts from its cached loop time */
  CU_ASSERT(p50 < 30 * MS);
  /* Exactly the pool: two TCP connections, both used, streams multiplexed on them. */
  CU_ASSERT_EQUAL(r.counters.connections_opened, 2);
  CU_ASSERT_EQUAL(r.summary.conns_opened, 2);
  CU_ASSERT_EQUAL(r.counters.h2_server_max_streams, 100);
  CU_ASSERT(r.counters.h2_peak_streams >= 2); /* ~200 rps × 20 ms = 4 in flight */
  CU_ASSERT(r.summary.outcomes[PB_CONN_ERROR] == 0 && r.counters.first_error[0] == 0);
  run_dispose(&r);
}

/* The coordinated-omission test of test_gen.c over h2: the server's loop freezes for 1 s; every
 * arrival due inside the freeze must show at least (freeze end - intended) of latency. */
static void test_h2_stall_is_measured_from_intended_start(void) {
  setup su = {.srv = {.delay_ms = 5, .h2 = 1, .stall_ns = 1 * SEC},
              .proto = PB_PROTO_H2,
              .stall_offset_ns = 1 * SEC};
  run r;
  run_against(&r, &su, 200, 3 * SEC, "/hello");
  assert_all_accounted(&r);
  CU_ASSERT_EQUAL(r.summary.outcomes[PB_OK], r.sched.count);
  CU_ASSERT_FATAL(r.stall_began > r.t0 && r.stall_ended > r.stall_began);
  uint64_t began = r.stall_began - r.t0, ended = r.stall_ended - r.t0;
  size_t during = 0, honest = 0;
  for (size_t i = 0; i < r.sched.count; i++) {
    const pb_result *x = &r.results[i];
    if (x->intended_ns < began + 20 * MS || x->intended_ns > ended - 20 * MS) continue;
    during++;
    if (x->done_ns - x->intended_ns + 2 * MS >= ended - x->intended_ns) honest++;
  }
  CU_ASSERT(during >= 180);
  CU_ASSERT_EQUAL(honest, during);
  CU_ASSERT(pp_hist_percentile(&r.summary.latency, 99) >= 800 * MS);
  /* The stall did not cost a connection: the pool stayed at its default of 4. */
  CU_ASSERT_EQUAL(r.counters.connections_opened, 4);
  run_dispose(&r);
}

/* The server allows 2 streams, one connection, 50 ms each: capacity 40 rps against 100 offered.
 * Never more than 2 streams in flight; arrivals beyond wait in the generator, none is lost, and
 * their latency counts from the intended start. */
static void test_h2_max_streams_cap_waits_and_times_from_intended(void) {
  setup su = {
      .srv = {.delay_ms = 50, .h2 = 1, .h2_max_streams = 2}, .proto = PB_PROTO_H2, .h2_conns = 1};
  run r;
  run_against(&r, &su, 100, 1 * SEC, "/hello");
  assert_all_accounted(&r);
  CU_ASSERT_EQUAL(r.summary.outcomes[PB_OK], r.sched.count);
  CU_ASSERT_EQUAL(r.counters.connections_opened, 1);
  CU_ASSERT_EQUAL(r.counters.h2_server_max_streams, 2);
  CU_ASSERT_EQUAL(r.counters.h2_peak_streams, 2);
  CU_ASSERT(max_overlap(&r) <= 2);
  /* 100 requests at 2 × 20 rps take ≥ 2.5 s: the last one waited ≥ 1.4 s, in the generator. */
  const pb_result *last = &r.results[r.sched.count - 1];
  CU_ASSERT(last->done_ns - last->intended_ns >= 1400 * MS);
  CU_ASSERT(last->sent_ns - last->intended_ns >= 1300 * MS);
  CU_ASSERT(last->dispatched_ns - last->intended_ns < 50 * MS);
  run_dispose(&r);
}

/* A stream past the client timeout ends as a timeout counted from its intended start and is
 * cancelled (RST_STREAM); the connection carries on, so the pool does not grow. */
static void test_h2_timeout_from_intended_start_keeps_the_connection(void) {
  setup su = {.srv = {.delay_ms = 400, .h2 = 1},
              .proto = PB_PROTO_H2,
              .h2_conns = 2,
              .timeout_ns = 100 * MS};
  run r;
  run_against(&r, &su, 50, 400 * MS, "/hello");
  assert_all_accounted(&r);
  CU_ASSERT_EQUAL(r.summary.outcomes[PB_TIMEOUT], r.sched.count);
  for (size_t i = 0; i < r.sched.count; i++) {
    uint64_t waited = r.results[i].done_ns - r.results[i].intended_ns;
    CU_ASSERT(waited >= 100 * MS && waited < 160 * MS);
  }
  CU_ASSERT_EQUAL(r.counters.connections_opened, 2);
  run_dispose(&r);
}

static void test_h2_non_2xx_is_never_success(void) {
  static const struct {
    const char *path;
    int outcome;
  } cases[] = {{"/status/500", PB_HTTP_ERROR},
               {"/status/404", PB_HTTP_ERROR},
               {"/status/503", PB_SHED},
               {"/status/204", PB_OK}};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    setup su = {.srv = {.h2 = 1}, .proto = PB_PROTO_H2};
    run r;
    run_against(&r, &su, 100, 200 * MS, cases[k].path);
    assert_all_accounted(&r);
    CU_ASSERT_EQUAL(r.summary.outcomes[cases[k].outcome], r.sched.count);
    CU_ASSERT_EQUAL(r.summary.check_ok, cases[k].outcome == PB_OK);
    for (size_t i = 0; i < r.sched.count; i++)
      CU_ASSERT_EQUAL(r.results[i].status, (uint16_t)atoi(cases[k].path + 8));
    run_dispose(&r);
  }
}

static void test_h2_reset_and_goaway_are_conn_errors(void) {
  setup su = {.srv = {.h2 = 1}, .proto = PB_PROTO_H2};
  run r;
  run_against(&r, &su, 100, 200 * MS, "/reset");
  assert_all_conn_errors(&r, PB_ERR_H2_RESET);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.summary.conn_error_causes, "h2_reset"));
  run_dispose(&r);

  /* Each GOAWAY refuses its stream and ends that connection; the generator reconnects for the
   * arrivals that follow, and none of them is left without an outcome. */
  run_against(&r, &su, 100, 200 * MS, "/goaway");
  assert_all_conn_errors(&r, PB_ERR_H2_GOAWAY);
  CU_ASSERT(r.counters.goaways >= 1);
  CU_ASSERT(r.counters.connections_opened > 4);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.counters.first_error, "GOAWAY"));
  run_dispose(&r);
}

/* h2 with prior knowledge against an HTTP/1.1 server: it answers the preface with a 400 or
 * closes. Every arrival is a conn_error "h2_no_settings", the message says why, and the run
 * ends about when the schedule does instead of hanging until the client timeout. */
static void test_h2_against_an_h1_server_is_a_clear_error(void) {
  setup su = {.srv = {.h2 = 0}, .proto = PB_PROTO_H2};
  run r;
  run_against(&r, &su, 100, 300 * MS, "/hello");
  assert_all_conn_errors(&r, PB_ERR_H2_NO_SETTINGS);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.counters.first_error, "does not speak h2"));
  CU_ASSERT(r.wall_ns < 2 * SEC);
  run_dispose(&r);
}

static void test_tls_h2_and_h1(void) {
  run r;
  setup h2 = {
      .srv = {.delay_ms = 10, .h2 = 1, .tls = 1}, .proto = PB_PROTO_H2, .tls = 1, .h2_conns = 3};
  run_against(&r, &h2, 200, 1 * SEC, "/hello");
  assert_all_accounted(&r);
  CU_ASSERT_EQUAL(r.summary.outcomes[PB_OK], r.sched.count);
  CU_ASSERT_EQUAL(r.counters.connections_opened, 3);
  uint64_t p50 = pp_hist_percentile(&r.summary.latency, 50);
  CU_ASSERT(p50 >= 10 * MS && p50 < 20 * MS);
  run_dispose(&r);

  setup h1 = {.srv = {.delay_ms = 10, .tls = 1}, .proto = PB_PROTO_H1, .tls = 1};
  run_against(&r, &h1, 200, 1 * SEC, "/hello");
  assert_all_accounted(&r);
  CU_ASSERT_EQUAL(r.summary.outcomes[PB_OK], r.sched.count);
  p50 = pp_hist_percentile(&r.summary.latency, 50);
  CU_ASSERT(p50 >= 10 * MS && p50 < 20 * MS);
  CU_ASSERT(r.summary.conns_opened <= 16); /* keep-alive reuse over TLS too */
  run_dispose(&r);
}

static void test_tls_errors_are_clear(void) {
  run r;
  /* The server's ALPN takes only http/1.1: an h2 client gets no_application_protocol. */
  setup alpn = {.srv = {.tls = 1, .tls_alpn = "http/1.1"}, .proto = PB_PROTO_H2, .tls = 1};
  run_against(&r, &alpn, 100, 200 * MS, "/hello");
  assert_all_conn_errors(&r, PB_ERR_ALPN);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.counters.first_error, "ALPN"));
  run_dispose(&r);

  /* ...and the other way round. */
  setup alpn1 = {.srv = {.tls = 1, .h2 = 1}, .proto = PB_PROTO_H1, .tls = 1};
  run_against(&r, &alpn1, 100, 200 * MS, "/hello");
  assert_all_conn_errors(&r, PB_ERR_ALPN);
  run_dispose(&r);

  /* TLS to a cleartext server: the handshake fails on its HTTP answer. */
  setup plain = {.srv = {.h2 = 1}, .proto = PB_PROTO_H2, .tls = 1};
  run_against(&r, &plain, 100, 200 * MS, "/hello");
  assert_all_conn_errors(&r, PB_ERR_TLS);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.counters.first_error, "TLS"));
  CU_ASSERT(r.wall_ns < 2 * SEC);
  run_dispose(&r);
}

static void test_dead_server_over_h2_is_errors(void) {
  pb_schedule s;
  CU_ASSERT_FATAL(pb_schedule_constant(&s, 100, 200 * MS, "/hello", false, 1) == 0);
  pb_result *res = calloc(s.count, sizeof *res);
  pb_gen_counters k;
  pb_gen_config cfg = {.host = "127.0.0.1",
                       .port = 1,
                       .timeout_ns = 1 * SEC,
                       .proto = PB_PROTO_H2,
                       .tls = 1,
                       .counters = &k};
  CU_ASSERT_FATAL(pb_gen_run(&cfg, &s, res, NULL, NULL, 0) == 0);
  pb_summary sum;
  pb_summarize(res, s.count, cfg.timeout_ns, 0.01, &sum);
  CU_ASSERT_EQUAL(sum.outcomes[PB_CONN_ERROR] + sum.outcomes[PB_TIMEOUT], s.count);
  CU_ASSERT_EQUAL(sum.outcomes[PB_OK], 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(sum.conn_error_causes, "ECONNREFUSED"));
  /* At most one connection attempt per arrival, plus the pool opened at the start. */
  CU_ASSERT(k.connections_opened <= s.count + 4);
  free(res);
  pb_schedule_dispose(&s);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 2;
  CU_pSuite s = CU_add_suite("bench_gen_h2", NULL, NULL);
  CU_add_test(s, "h2c latency is the delay, on the pool",
              test_h2c_latency_is_the_delay_on_the_pool);
  CU_add_test(s, "h2 stall measured from intended start",
              test_h2_stall_is_measured_from_intended_start);
  CU_add_test(s, "h2 max streams cap waits, timed from intended",
              test_h2_max_streams_cap_waits_and_times_from_intended);
  CU_add_test(s, "h2 timeout from intended, connection kept",
              test_h2_timeout_from_intended_start_keeps_the_connection);
  CU_add_test(s, "h2 non-2xx never success", test_h2_non_2xx_is_never_success);
  CU_add_test(s, "h2 reset and goaway are conn errors", test_h2_reset_and_goaway_are_conn_errors);
  CU_add_test(s, "h2 against an h1 server is a clear error",
              test_h2_against_an_h1_server_is_a_clear_error);
  CU_add_test(s, "tls h2 and h1", test_tls_h2_and_h1);
  CU_add_test(s, "tls errors are clear", test_tls_errors_are_clear);
  CU_add_test(s, "dead server over h2+tls is errors", test_dead_server_over_h2_is_errors);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failures = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}
