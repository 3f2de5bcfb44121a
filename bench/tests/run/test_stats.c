/* Unit tests for bench/run/stats.c and bench/gen/schedule.c: pure functions over arrays, no
 * sockets. */
#include <CUnit/Basic.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/harness/harness.h"
#include "bench/gen/schedule.h"
#include "bench/run/stats.h"

#define MS  1000000ull
#define SEC 1000000000ull

static pb_result mk(uint64_t intended, uint64_t done, pb_outcome o, uint16_t status) {
  pb_result r = {.intended_ns = intended,
                 .dispatched_ns = intended + 10000,
                 .sent_ns = intended + 20000,
                 .done_ns = done,
                 .status = status,
                 .outcome = (uint8_t)o,
                 .conn_id = 1};
  return r;
}

static void test_outcomes_and_latency_population(void) {
  pb_result r[6] = {
      mk(0, 10 * MS, PB_OK, 200),
      mk(100 * MS, 120 * MS, PB_OK, 201),
      mk(200 * MS, 201 * MS, PB_SHED, 503),       /* fast 503: not latency */
      mk(300 * MS, 301 * MS, PB_HTTP_ERROR, 500), /* error: not latency */
      mk(400 * MS, 400 * MS + 5 * SEC, PB_TIMEOUT, 0),
      mk(500 * MS, 530 * MS, PB_OK, 200),
  };
  pb_summary s;
  pb_summarize(r, 6, 5 * SEC, 0.5, &s);
  CU_ASSERT_EQUAL(s.offered, 6);
  CU_ASSERT_EQUAL(s.outcomes[PB_OK], 3);
  CU_ASSERT_EQUAL(s.outcomes[PB_SHED], 1);
  CU_ASSERT_EQUAL(s.outcomes[PB_HTTP_ERROR], 1);
  CU_ASSERT_EQUAL(s.outcomes[PB_TIMEOUT], 1);
  /* 3 successes + 1 timeout (recorded at the timeout) */
  CU_ASSERT_EQUAL(s.latency.count, 4);
  CU_ASSERT_EQUAL(s.latency.max_ns, 5 * SEC);
  CU_ASSERT_EQUAL(s.latency.min_ns, 10 * MS);
  CU_ASSERT_TRUE(s.check_ok); /* 1 error of 6 is within the 50% allowed here */
  CU_ASSERT_EQUAL(s.pacer_lateness.count, 6);
  CU_ASSERT_EQUAL(s.pacer_lateness.max_ns, 10000);
}

static void test_check_fails_on_errors_and_on_no_success(void) {
  pb_result r[4] = {mk(0, 1, PB_OK, 200), mk(1, 2, PB_CONN_ERROR, 0), mk(2, 3, PB_OK, 200),
                    mk(3, 4, PB_OK, 200)};
  pb_summary s;
  pb_summarize(r, 4, SEC, 0.01, &s);
  CU_ASSERT_FALSE(s.check_ok);
  CU_ASSERT_PTR_NOT_NULL(strstr(s.check_reason, "errors"));
  pb_summarize(r, 4, SEC, 0.30, &s);
  CU_ASSERT_TRUE(s.check_ok);
  pb_result shed[2] = {mk(0, 1, PB_SHED, 503), mk(1, 2, PB_SHED, 503)};
  pb_summarize(shed, 2, SEC, 0.01, &s);
  CU_ASSERT_FALSE(s.check_ok); /* all shed: nothing to call throughput */
  pb_result pending[2] = {mk(0, 1, PB_OK, 200), mk(1, 0, PB_PENDING, 0)};
  pb_summarize(pending, 2, SEC, 0.01, &s);
  CU_ASSERT_FALSE(s.check_ok);
}

static void test_timeline_buckets_by_completion(void) {
  pb_result r[5] = {
      mk(100 * MS, 200 * MS, PB_OK, 200),
      mk(900 * MS, 1100 * MS, PB_OK, 200), /* offered in second 0, completes in second 1 */
      mk(1200 * MS, 1300 * MS, PB_SHED, 503),
      mk(1500 * MS, 2600 * MS, PB_TIMEOUT, 0),
      mk(2100 * MS, 2150 * MS, PB_CONN_ERROR, 0),
  };
  pb_second rows[8];
  size_t n = pb_timeline(r, 5, rows, 8);
  CU_ASSERT_EQUAL_FATAL(n, 3);
  CU_ASSERT_EQUAL(rows[0].offered, 2);
  CU_ASSERT_EQUAL(rows[0].ok, 1);
  CU_ASSERT_EQUAL(rows[1].offered, 2);
  CU_ASSERT_EQUAL(rows[1].ok, 1);
  CU_ASSERT_EQUAL(rows[1].shed, 1);
  CU_ASSERT(rows[1].p50_ns >= 198 * MS && rows[1].p50_ns <= 202 * MS);
  CU_ASSERT_EQUAL(rows[2].timeouts, 1);
  CU_ASSERT_EQUAL(rows[2].errors, 1);
  CU_ASSERT_EQUAL(rows[2].ok, 0);
  /* A too-small array is filled as far as it goes and the needed size is returned. */
  CU_ASSERT_EQUAL(pb_timeline(r, 5, rows, 2), 3);
}

static void test_uniform_schedule(void) {
  pb_schedule s;
  CU_ASSERT_FATAL(pb_schedule_constant(&s, 200, 2 * SEC, "/x", false, 7) == 0);
  CU_ASSERT_EQUAL(s.count, 400);
  CU_ASSERT_EQUAL(s.arrivals[0].intended_ns, 0);
  CU_ASSERT_EQUAL(s.arrivals[1].intended_ns, 5 * MS);
  CU_ASSERT_EQUAL(s.arrivals[399].intended_ns, 1995 * MS);
  CU_ASSERT_STRING_EQUAL(s.paths[s.arrivals[10].kind], "/x");
  pb_schedule_dispose(&s);
  CU_ASSERT_PTR_NULL(s.arrivals);
  CU_ASSERT(pb_schedule_constant(&s, 0, SEC, "/x", false, 1) == PB_EINVAL);
}

static void test_poisson_schedule_seeded(void) {
  pb_schedule a, b, c;
  CU_ASSERT_FATAL(pb_schedule_constant(&a, 500, 4 * SEC, "/x", true, 42) == 0);
  CU_ASSERT_FATAL(pb_schedule_constant(&b, 500, 4 * SEC, "/x", true, 42) == 0);
  CU_ASSERT_FATAL(pb_schedule_constant(&c, 500, 4 * SEC, "/x", true, 43) == 0);
  CU_ASSERT_EQUAL_FATAL(a.count, b.count);
  CU_ASSERT(memcmp(a.arrivals, b.arrivals, a.count * sizeof *a.arrivals) == 0);
  CU_ASSERT(a.count != c.count ||
            memcmp(a.arrivals, c.arrivals, a.count * sizeof *a.arrivals) != 0);
  /* 2000 expected; 5 standard deviations is ±224. */
  CU_ASSERT(a.count > 1776 && a.count < 2224);
  for (size_t i = 1; i < a.count; i++)
    CU_ASSERT_FATAL(a.arrivals[i].intended_ns >= a.arrivals[i - 1].intended_ns);
  pb_schedule_dispose(&a);
  pb_schedule_dispose(&b);
  pb_schedule_dispose(&c);
}

static void test_fmt_ns(void) {
  char b[32];
  CU_ASSERT_STRING_EQUAL(pb_fmt_ns(830000, b, sizeof b), "830us");
  CU_ASSERT_STRING_EQUAL(pb_fmt_ns(27600000, b, sizeof b), "27.6ms");
  CU_ASSERT_STRING_EQUAL(pb_fmt_ns(2730000000ull, b, sizeof b), "2.73s");
}

static void test_stats_parse(void) {
  /* The shape of puma-plus's /stats (server/stats.c); p95_ms also appears under service and
   * ttfb, which must not be mistaken for queue time. */
  const char *json = "{\"workers\": 3, \"booted_workers\": 2, \"queue\": {\"depth\": 17,"
                     " \"service\": {\"window\": {\"p95_ms\": 99.0}},"
                     " \"window\": {\"count\": 10, \"p95_ms\": 604.5},"
                     " \"lifetime\": {\"p95_ms\": 120.25}}}";
  pb_server_stats st;
  CU_ASSERT_FATAL(pb_stats_parse(json, &st));
  CU_ASSERT_DOUBLE_EQUAL(st.workers, 3, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(st.queue_depth, 17, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(st.queue_p95_ms, 604.5, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(st.queue_p95_lifetime_ms, 120.25, 1e-9);
  CU_ASSERT(st.workers_parked < 0); /* no controller key */
  CU_ASSERT_FATAL(pb_stats_parse("{\"controller\": {\"workers_standby\": 2}}", &st));
  CU_ASSERT_DOUBLE_EQUAL(st.workers_parked, 2, 1e-9);
  CU_ASSERT_TRUE(pb_stats_parse("{}", &st));
  CU_ASSERT(st.queue_p95_ms < 0 && st.workers < 0 && st.workers_parked < 0);
  CU_ASSERT_FALSE(pb_stats_parse("not json", &st));
}

/* Memory from smaps_rollup: this process and a forked child that dirties memory of its own.
 * USS <= PSS <= RSS per process; the tree's sums are its processes' sums. */
static void test_tree_memory(void) {
  uint64_t rss, pss, uss;
  CU_ASSERT_FATAL(pb_smaps_rollup(getpid(), &rss, &pss, &uss) == 0);
  CU_ASSERT(uss > 0 && uss <= pss && pss <= rss);
  CU_ASSERT(pb_smaps_rollup(-1, &rss, &pss, &uss) < 0);
  int go[2];
  CU_ASSERT_FATAL(pipe(go) == 0);
  pid_t kid = fork();
  CU_ASSERT_FATAL(kid >= 0);
  if (kid == 0) { /* its own group, as the harness starts servers; 8 MiB of private pages */
    setpgid(0, 0);
    size_t n = 8u << 20;
    volatile char *p = malloc(n); /* volatile: the stores are not optimised away */
    for (size_t i = 0; p && i < n; i += 4096)
      p[i] = 1;
    if (write(go[1], "r", 1) != 1) _exit(1);
    pause();
    _exit(0);
  }
  char c;
  CU_ASSERT_FATAL(read(go[0], &c, 1) == 1);
  /* The child's PSS moves whenever this process writes a page they still share (copy on
   * write: every allocation of the tree scan can do it, more so under ASan), so the tree is
   * compared with a direct read taken while the child's own numbers held still: a direct read
   * before and after the scan that agree (a few tries). */
  pb_tree_mem m;
  uint64_t krss, kpss, kuss, r0, p0, u0;
  int stable = 0;
  for (int attempt = 0; attempt < 20 && !stable; attempt++) {
    CU_ASSERT_FATAL(pb_smaps_rollup(kid, &r0, &p0, &u0) == 0);
    CU_ASSERT_FATAL(pb_proc_tree_mem(kid, &m) == 0);
    CU_ASSERT_FATAL(pb_smaps_rollup(kid, &krss, &kpss, &kuss) == 0);
    stable = p0 == kpss && u0 == kuss;
  }
  CU_ASSERT(stable);
  CU_ASSERT_EQUAL(m.procs, 1);
  CU_ASSERT_EQUAL(m.smaps_procs, 1);
  CU_ASSERT_EQUAL(m.pss_bytes, kpss);
  CU_ASSERT_EQUAL(m.uss_bytes, kuss);
  CU_ASSERT(m.uss_bytes >= (8u << 20) && m.uss_bytes <= m.pss_bytes && m.pss_bytes <= krss);
  CU_ASSERT(m.rss_bytes > 0);
  kill(kid, SIGKILL);
  waitpid(kid, NULL, 0);
  close(go[0]);
  close(go[1]);
}

static void test_pumaplus_argv(void) {
  pb_server_spec s;
  memset(&s, 0, sizeof s);
  s.kind = PB_SERVER_PUMAPLUS;
  s.workers = 1;
  s.threads = 5;
  s.port = 4000;
  s.stats_port = 4001;
  s.autoscale = true;
  s.max_workers = 6;
  strcpy(s.policy_path, "/p.yaml");
  strcpy(s.pumaplus_bin, "/g/puma-plus");
  strcpy(s.app, "/a/config.ru");
  char *argv[40], storage[4096], joined[2048] = "";
  int argc = pb_server_argv(&s, argv, 40, storage, sizeof storage);
  CU_ASSERT_FATAL(argc > 0);
  for (int i = 0; i < argc; i++) {
    strcat(joined, i ? " " : "");
    strcat(joined, argv[i]);
  }
  CU_ASSERT_STRING_EQUAL(joined, "/g/puma-plus -e production -w 1 -t 5:5 -b tcp://127.0.0.1:4000"
                                 " --control-url tcp://127.0.0.1:4001 /a/config.ru -- -quiet"
                                 " -autoscale -policy /p.yaml -max-workers 6");
  CU_ASSERT(pb_server_argv(&s, argv, 5, storage, sizeof storage) < 0); /* too small */
}

/* -proto h3: puma-plus also listens for QUIC on the UDP port of its TCP port number. */
static void test_pumaplus_argv_h3(void) {
  pb_server_spec s;
  memset(&s, 0, sizeof s);
  s.kind = PB_SERVER_PUMAPLUS;
  s.workers = 1;
  s.threads = 2;
  s.port = 4000;
  s.stats_port = 4001;
  s.h3 = true;
  strcpy(s.pumaplus_bin, "/g/puma-plus");
  strcpy(s.app, "/a/config.ru");
  char *argv[40], storage[4096], joined[2048] = "";
  int argc = pb_server_argv(&s, argv, 40, storage, sizeof storage);
  CU_ASSERT_FATAL(argc > 0);
  for (int i = 0; i < argc; i++) {
    strcat(joined, i ? " " : "");
    strcat(joined, argv[i]);
  }
  CU_ASSERT_STRING_EQUAL(joined, "/g/puma-plus -e production -w 1 -t 2:2 -b tcp://127.0.0.1:4000"
                                 " --control-url tcp://127.0.0.1:4001 /a/config.ru -- -quiet"
                                 " -listen-h3 127.0.0.1:4000");
  CU_ASSERT_STRING_EQUAL(pb_proto_label(PB_PROTO_H3, 0), "h3");
  CU_ASSERT_STRING_EQUAL(pb_proto_label(PB_PROTO_H3, 1), "h3");
  CU_ASSERT_STRING_EQUAL(pb_error_name(PB_ERR_QUIC), "quic");
  CU_ASSERT_STRING_EQUAL(pb_error_name(PB_ERR_H3_RESET), "h3_reset");
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 2;
  CU_pSuite s = CU_add_suite("bench_stats", NULL, NULL);
  CU_add_test(s, "outcomes and latency population", test_outcomes_and_latency_population);
  CU_add_test(s, "check fails on errors / no success",
              test_check_fails_on_errors_and_on_no_success);
  CU_add_test(s, "timeline buckets by completion", test_timeline_buckets_by_completion);
  CU_add_test(s, "uniform schedule", test_uniform_schedule);
  CU_add_test(s, "process tree memory from smaps_rollup", test_tree_memory);
  CU_add_test(s, "poisson schedule seeded", test_poisson_schedule_seeded);
  CU_add_test(s, "fmt_ns", test_fmt_ns);
  CU_add_test(s, "stats parse", test_stats_parse);
  CU_add_test(s, "puma-plus argv", test_pumaplus_argv);
  CU_add_test(s, "puma-plus argv for h3", test_pumaplus_argv_h3);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failures = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}
