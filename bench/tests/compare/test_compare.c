/* The pure parts of `pp-bench compare` (bench/compare/): the -servers and -shapes lists, wrk's
 * report, medians over rounds (errors kept, failures not counted), -max-steal's rule (which
 * attempt of a cell is kept, when it is marked) and its test hook, and the /proc CPU reader on
 * this test's own process tree. The run itself is tested end to end by bench/tests/compare.sh
 * against real servers. */
#include <CUnit/Basic.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench/compare/compare.h"

static void test_servers_list(void) {
  pb_cmp_server_list l;
  char bad[256];
  CU_ASSERT_EQUAL(pb_cmp_parse_server_list("pumaplus,puma,puma8,falcon", &l, bad, sizeof bad), 4);
  CU_ASSERT_EQUAL(l.servers[0], PB_CMP_PUMAPLUS);
  CU_ASSERT_EQUAL(l.servers[2], PB_CMP_PUMA8);
  CU_ASSERT_EQUAL(l.servers[3], PB_CMP_FALCON);
  CU_ASSERT_STRING_EQUAL(l.labels[1], "puma");
  CU_ASSERT_STRING_EQUAL(l.dirs[1], "");
  CU_ASSERT_EQUAL(pb_cmp_parse_server_list("falcon", &l, bad, sizeof bad), 1);
  CU_ASSERT_EQUAL(l.servers[0], PB_CMP_FALCON);
  CU_ASSERT_EQUAL(pb_cmp_parse_server_list("puma,unicorn", &l, bad, sizeof bad), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(bad, "unicorn"));
  CU_ASSERT_EQUAL(pb_cmp_parse_server_list("puma,puma", &l, bad, sizeof bad), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(bad, "repeated"));
  CU_ASSERT_EQUAL(pb_cmp_parse_server_list("puma,,falcon", &l, bad, sizeof bad), -1);
  CU_ASSERT_EQUAL(pb_cmp_parse_server_list("", &l, bad, sizeof bad), -1);
  CU_ASSERT_EQUAL(pb_cmp_parse_server_list("puma,puma8,falcon,pumaplus,pumaplus@a,pumaplus@b,"
                                           "pumaplus@c,pumaplus@d,pumaplus@e",
                                           &l, bad, sizeof bad),
                  -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(bad, "at most"));
}

/* Steal time: a percentage of the window from two /proc/stat readings, unknown when a reading
 * failed or the counters did not move forward. */
static void test_steal(void) {
  pb_cpu_times a = {true, 10, 1000}, b = {true, 35, 1500}, c = {true, 10, 1200};
  pb_cpu_times bad = {false, 35, 1500}, same = {true, 35, 1000}, back = {true, 5, 1500};
  CU_ASSERT_DOUBLE_EQUAL(pb_steal_pct(a, b), 5.0, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(pb_steal_pct(a, c), 0.0, 1e-9);
  CU_ASSERT(pb_steal_pct(bad, b) < 0);
  CU_ASSERT(pb_steal_pct(a, bad) < 0);
  CU_ASSERT(pb_steal_pct(a, same) < 0); /* no tick passed */
  CU_ASSERT(pb_steal_pct(a, back) < 0); /* steal went back */
  pb_cpu_times n0 = pb_cpu_times_now(), n1 = pb_cpu_times_now();
  CU_ASSERT(n0.ok && n1.ok);
  CU_ASSERT(n0.total > 0 && n0.steal <= n0.total);
  CU_ASSERT(n1.total >= n0.total && n1.steal >= n0.steal);
}

/* An attempt for -max-steal's rule: ran or not, closed- and open-loop steal (-1 = unknown; the
 * open loop ran when its steal is given). */
static pb_cmp_cell attempt(bool ran, double closed, double open) {
  pb_cmp_cell c;
  memset(&c, 0, sizeof c);
  c.ran = ran;
  c.steal_pct = closed;
  c.open_ran = open >= 0;
  c.open_steal_pct = open;
  return c;
}

/* -max-steal: the worse of the two loops triggers a retry and ranks the attempts; the lowest is
 * kept (not the last), the earliest on a tie; a failed attempt is never kept over one that ran
 * and never triggers a retry; the kept one is marked only when it is still above the limit. */
static void test_steal_rule(void) {
  pb_cmp_cell a = attempt(true, 5, 40);
  CU_ASSERT_DOUBLE_EQUAL(pb_cmp_cell_steal(&a), 40, 1e-12); /* the open loop's */
  CU_ASSERT(pb_cmp_steal_too_high(&a, 10));
  CU_ASSERT(!pb_cmp_steal_too_high(&a, 40)); /* at the limit is not above it */
  CU_ASSERT(!pb_cmp_steal_too_high(&a, 0));  /* 0 = off */
  pb_cmp_cell closed_only = attempt(true, 12, -1);
  CU_ASSERT_DOUBLE_EQUAL(pb_cmp_cell_steal(&closed_only), 12, 1e-12);
  CU_ASSERT(pb_cmp_steal_too_high(&closed_only, 10));
  /* an open loop that did not run has no reading, whatever the field holds */
  pb_cmp_cell stale = attempt(true, 3, -1);
  stale.open_steal_pct = 90;
  CU_ASSERT_DOUBLE_EQUAL(pb_cmp_cell_steal(&stale), 3, 1e-12);
  pb_cmp_cell unknown = attempt(true, -1, -1), failed = attempt(false, 50, -1);
  CU_ASSERT(pb_cmp_cell_steal(&unknown) < 0);
  CU_ASSERT(!pb_cmp_steal_too_high(&unknown, 10));
  CU_ASSERT(pb_cmp_cell_steal(&failed) < 0);
  CU_ASSERT(!pb_cmp_steal_too_high(&failed, 10));

  bool over = true;
  /* one attempt under the limit: kept, not marked */
  pb_cmp_cell one[] = {attempt(true, 2, 3)};
  CU_ASSERT_EQUAL(pb_cmp_steal_pick(one, 1, 10, &over), 0);
  CU_ASSERT(!over);
  /* the retry got under the limit: the last one */
  pb_cmp_cell retried[] = {attempt(true, 5, 40), attempt(true, 3, 2)};
  CU_ASSERT_EQUAL(pb_cmp_steal_pick(retried, 2, 10, &over), 1);
  CU_ASSERT(!over);
  /* none got under: the lowest max(closed, open), not the last, and marked */
  pb_cmp_cell none[] = {attempt(true, 20, 1), attempt(true, 1, 40), attempt(true, 30, 25)};
  CU_ASSERT_EQUAL(pb_cmp_steal_pick(none, 3, 10, &over), 0);
  CU_ASSERT(over);
  pb_cmp_cell later[] = {attempt(true, 35, 1), attempt(true, 11, 12), attempt(true, 30, 25)};
  CU_ASSERT_EQUAL(pb_cmp_steal_pick(later, 3, 10, &over), 1);
  CU_ASSERT(over);
  /* a tie: the earliest */
  pb_cmp_cell tie[] = {attempt(true, 15, 15), attempt(true, 15, 2)};
  CU_ASSERT_EQUAL(pb_cmp_steal_pick(tie, 2, 10, &over), 0);
  CU_ASSERT(over);
  /* a failed retry is never kept over an attempt that ran, even one above the limit */
  pb_cmp_cell failed_retry[] = {attempt(true, 30, 30), attempt(false, -1, -1)};
  CU_ASSERT_EQUAL(pb_cmp_steal_pick(failed_retry, 2, 10, &over), 0);
  CU_ASSERT(over);
  pb_cmp_cell failed_first[] = {attempt(false, -1, -1)};
  CU_ASSERT_EQUAL(pb_cmp_steal_pick(failed_first, 1, 10, &over), 0);
  CU_ASSERT(!over);
  /* an unknown reading (the loop stopped there) is kept over readings above the limit */
  pb_cmp_cell then_unknown[] = {attempt(true, 30, 30), attempt(true, -1, -1)};
  CU_ASSERT_EQUAL(pb_cmp_steal_pick(then_unknown, 2, 10, &over), 1);
  CU_ASSERT(!over);
  /* -max-steal off: nothing is ever marked */
  CU_ASSERT_EQUAL(pb_cmp_steal_pick(none, 1, 0, &over), 0);
  CU_ASSERT(!over);
  CU_ASSERT_EQUAL(pb_cmp_steal_pick(none, 3, 10, NULL), 0);

  /* PP_BENCH_STEAL_SEQ */
  double seq[4];
  CU_ASSERT_EQUAL(pb_cmp_parse_steal_seq("40,2.5,0", seq, 4), 3);
  CU_ASSERT_DOUBLE_EQUAL(seq[0], 40, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(seq[1], 2.5, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(seq[2], 0, 1e-12);
  CU_ASSERT_EQUAL(pb_cmp_parse_steal_seq("100", seq, 4), 1);
  CU_ASSERT_EQUAL(pb_cmp_parse_steal_seq("", seq, 4), -1);
  CU_ASSERT_EQUAL(pb_cmp_parse_steal_seq("40,", seq, 4), -1);
  CU_ASSERT_EQUAL(pb_cmp_parse_steal_seq("40,,2", seq, 4), -1);
  CU_ASSERT_EQUAL(pb_cmp_parse_steal_seq("101", seq, 4), -1);
  CU_ASSERT_EQUAL(pb_cmp_parse_steal_seq("-1", seq, 4), -1);
  CU_ASSERT_EQUAL(pb_cmp_parse_steal_seq("4x", seq, 4), -1);
  CU_ASSERT_EQUAL(pb_cmp_parse_steal_seq("nan", seq, 4), -1);
  CU_ASSERT_EQUAL(pb_cmp_parse_steal_seq("1,2,3,4,5", seq, 4), -1);
}

/* pumaplus@DIR[=LABEL]: the directory, the label from its basename or =LABEL, and every
 * clash or bad label refused with a reason that names the word. */
static void test_server_spec_list(void) {
  pb_cmp_server_list l;
  char why[512];
  CU_ASSERT_EQUAL(pb_cmp_parse_server_list("pumaplus,pumaplus@/work/wt-base,puma,"
                                           "pumaplus@../old/=v1.2_rc-3",
                                           &l, why, sizeof why),
                  4);
  CU_ASSERT_EQUAL(l.servers[0], PB_CMP_PUMAPLUS);
  CU_ASSERT_STRING_EQUAL(l.dirs[0], "");
  CU_ASSERT_STRING_EQUAL(l.labels[0], "pumaplus");
  CU_ASSERT_EQUAL(l.servers[1], PB_CMP_PUMAPLUS);
  CU_ASSERT_STRING_EQUAL(l.dirs[1], "/work/wt-base");
  CU_ASSERT_STRING_EQUAL(l.labels[1], "pumaplus@wt-base");
  CU_ASSERT_EQUAL(l.servers[2], PB_CMP_PUMA);
  CU_ASSERT_STRING_EQUAL(l.labels[2], "puma");
  CU_ASSERT_STRING_EQUAL(l.dirs[3], "../old"); /* the trailing slash goes */
  CU_ASSERT_STRING_EQUAL(l.labels[3], "pumaplus@v1.2_rc-3");
  CU_ASSERT_EQUAL(pb_cmp_parse_server_list("pumaplus@base/", &l, why, sizeof why), 1);
  CU_ASSERT_STRING_EQUAL(l.labels[0], "pumaplus@base");

  pb_compare_config c;
  pb_compare_defaults(&c);
  CU_ASSERT_STRING_EQUAL(pb_cmp_label(&c, 1), "puma"); /* no list given: the names */
  CU_ASSERT_EQUAL(pb_cmp_parse_server_list("puma8,pumaplus@/a/b=old", &l, why, sizeof why), 2);
  pb_cmp_config_set_servers(&c, &l);
  CU_ASSERT_EQUAL(c.n_servers, 2);
  CU_ASSERT_STRING_EQUAL(pb_cmp_label(&c, 0), "puma8");
  CU_ASSERT_STRING_EQUAL(pb_cmp_label(&c, 1), "pumaplus@old");
  CU_ASSERT_STRING_EQUAL(c.server_dirs[1], "/a/b");
  CU_ASSERT_STRING_EQUAL(c.server_dirs[0], "");

  static const struct {
    const char *list, *why; /* what the reason must contain */
  } bads[] = {
      {"pumaplus@/x/base,pumaplus@/y/base", "pumaplus@base is taken"},
      {"pumaplus@/x/a=old,pumaplus@/y/b=old", "pumaplus@old is taken"},
      {"pumaplus@/x/a,pumaplus@/x/a", "is taken"},
      {"pumaplus,pumaplus", "'pumaplus' is repeated"},
      {"pumaplus@", "needs a directory"},
      {"pumaplus@=old", "needs a directory"},
      {"pumaplus@/x/a=", "the label ''"},
      {"pumaplus@/x/a=b/c", "the label 'b/c'"},
      {"pumaplus@/x/a b", "the label 'a b'"},
      {"pumaplus@..", "the label '..'"},
      {"pumaplus@/x/a=abcdefghijklmnopqrstuvwxyz0123456", "1..32"},
      {"pumaplus@/x", "the label"} /* fine: "x" */,
      {"unicorn", "unknown server 'unicorn'"},
      {"puma,,falcon", ""},
  };
  for (size_t i = 0; i < sizeof bads / sizeof bads[0]; i++) {
    int n = pb_cmp_parse_server_list(bads[i].list, &l, why, sizeof why);
    if (strcmp(bads[i].list, "pumaplus@/x") == 0) {
      CU_ASSERT_EQUAL(n, 1);
      CU_ASSERT_STRING_EQUAL(l.labels[0], "pumaplus@x");
      continue;
    }
    CU_ASSERT_EQUAL(n, -1);
    if (!strstr(why, bads[i].why)) {
      fprintf(stderr, "%s: '%s' does not say '%s'\n", bads[i].list, why, bads[i].why);
      CU_FAIL("the reason does not name the problem");
    }
  }
  char nine[512] = "pumaplus";
  for (int i = 1; i <= 8; i++)
    snprintf(nine + strlen(nine), sizeof nine - strlen(nine), ",pumaplus@/d/%d", i);
  CU_ASSERT_EQUAL(pb_cmp_parse_server_list(nine, &l, why, sizeof why), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(why, "at most 8 servers"));
}

static void test_shapes_list(void) {
  pb_cmp_shape s[PB_CMP_MAX_SHAPES];
  char bad[64];
  CU_ASSERT_EQUAL(pb_cmp_parse_shapes("1x1,1x5,2x5", s, 16, bad, sizeof bad), 3);
  CU_ASSERT_EQUAL(s[1].workers, 1);
  CU_ASSERT_EQUAL(s[1].threads, 5);
  CU_ASSERT_EQUAL(s[2].workers, 2);
  CU_ASSERT_EQUAL(pb_cmp_parse_shapes("16X4", s, 16, bad, sizeof bad), 1);
  CU_ASSERT_EQUAL(s[0].workers, 16);
  CU_ASSERT_EQUAL(s[0].threads, 4);
  const char *bads[] = {"0x1", "1x0", "1x", "x5", "1x5x2", "2*5", "1x-1", "1x257", "a", ""};
  for (size_t i = 0; i < sizeof bads / sizeof bads[0]; i++) {
    char list[32];
    snprintf(list, sizeof list, "1x1,%s", bads[i]);
    CU_ASSERT_EQUAL(pb_cmp_parse_shapes(list, s, 16, bad, sizeof bad), -1);
    if (bads[i][0]) CU_ASSERT_STRING_EQUAL(bad, bads[i]);
  }
}

static const char wrk_report[] = "Running 5s test @ http://127.0.0.1:40111/hello\n"
                                 "  1 threads and 10 connections\n"
                                 "  Thread Stats   Avg      Stdev     Max   +/- Stdev\n"
                                 "    Latency     1.06ms  312.04us   9.87ms   88.10%\n"
                                 "    Req/Sec     9.41k   402.17    10.02k    72.00%\n"
                                 "  Latency Distribution\n"
                                 "     50%  994.00us\n"
                                 "     75%    1.17ms\n"
                                 "     90%    1.38ms\n"
                                 "     99%    2.41ms\n"
                                 "  46812 requests in 5.00s, 4.42MB read\n"
                                 "  Socket errors: connect 0, read 2, write 0, timeout 5\n"
                                 "  Non-2xx or 3xx responses: 17\n"
                                 "Requests/sec:   9361.18\n"
                                 "Transfer/sec:      0.88MB\n";

static void test_wrk_report(void) {
  pb_wrk_result w;
  CU_ASSERT_TRUE(pb_wrk_parse(wrk_report, &w));
  CU_ASSERT_EQUAL(w.requests, 46812);
  CU_ASSERT_DOUBLE_EQUAL(w.seconds, 5.0, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(w.rps, 9361.18, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(w.p50_us, 994.0, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(w.p99_us, 2410.0, 1e-6);
  CU_ASSERT_EQUAL(w.non2xx, 17);
  CU_ASSERT_EQUAL(w.sock_read, 2);
  CU_ASSERT_EQUAL(w.sock_timeout, 5);
  CU_ASSERT_EQUAL(w.sock_connect, 0);
  /* A clean run prints neither error line; seconds-scale percentiles. */
  const char clean[] = "  Latency Distribution\n     50%    1.50s\n     99%    2.00s\n"
                       "  10 requests in 1.00m, 1.00KB read\nRequests/sec:      0.17\n";
  CU_ASSERT_TRUE(pb_wrk_parse(clean, &w));
  CU_ASSERT_EQUAL(w.non2xx, 0);
  CU_ASSERT_EQUAL(w.sock_timeout, 0);
  CU_ASSERT_DOUBLE_EQUAL(w.p50_us, 1.5e6, 1e-3);
  CU_ASSERT_DOUBLE_EQUAL(w.seconds, 60.0, 1e-9);
  /* Without --latency there are no percentiles: unknown, not zero. */
  const char nolat[] = "  100 requests in 1.00s, 1.00KB read\nRequests/sec:    100.00\n";
  CU_ASSERT_TRUE(pb_wrk_parse(nolat, &w));
  CU_ASSERT(w.p50_us < 0);
  CU_ASSERT(w.p99_us < 0);
  /* wrk's usage or an error is not a report. */
  CU_ASSERT_FALSE(pb_wrk_parse("unable to connect to 127.0.0.1:1 Connection refused\n", &w));
  CU_ASSERT_FALSE(pb_wrk_parse("", &w));
}

static pb_cmp_cell cell(uint32_t round, uint32_t shape, uint32_t server, double rps, bool ran,
                        bool errors) {
  pb_cmp_cell c;
  memset(&c, 0, sizeof c);
  c.round = round;
  c.shape = shape;
  c.server = server;
  c.ran = ran;
  c.has_errors = errors;
  c.wrk.rps = rps;
  c.wrk.p50_us = rps / 10;
  c.wrk.p99_us = -1; /* not reported */
  c.cpu_us_per_req = 100 + round;
  c.frontend_us_per_req = server == 0 ? 20 : -1;
  c.ruby_us_per_req = server == 0 ? 80.0 + round : -1.0;
  c.open_ran = round != 2;
  c.open_p99_us = 5000.0 * round;
  return c;
}

static void test_medians(void) {
  /* 2 shapes x 2 servers; shape 0 server 0: rps 300, 100, 200 (median 200, odd n); server 1:
   * rounds 1 and 3 ran (400, 500: median 450), round 2 failed; shape 1 server 0: one round
   * with errors, kept. */
  pb_cmp_cell cells[] = {
      cell(1, 0, 0, 300, true, false), cell(1, 0, 1, 400, true, false),
      cell(2, 0, 0, 100, true, true),  cell(2, 0, 1, 9999, false, false),
      cell(3, 0, 0, 200, true, false), cell(3, 0, 1, 500, true, false),
      cell(1, 1, 0, 700, true, true),
  };
  pb_cmp_median m[4];
  pb_cmp_medians(cells, sizeof cells / sizeof cells[0], 2, 2, m);
  const pb_cmp_median *a = &m[0], *b = &m[1], *c = &m[2], *d = &m[3];
  CU_ASSERT_EQUAL(a->rounds_ran, 3);
  CU_ASSERT_EQUAL(a->rounds_with_errors, 1);
  CU_ASSERT_DOUBLE_EQUAL(a->m[PB_CMP_RPS].med, 200, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(a->m[PB_CMP_RPS].min, 100, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(a->m[PB_CMP_RPS].max, 300, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(a->m[PB_CMP_P50].med, 20, 1e-9);
  CU_ASSERT_EQUAL(a->m[PB_CMP_P99].n, 0);
  CU_ASSERT(a->m[PB_CMP_P99].med < 0);
  CU_ASSERT_DOUBLE_EQUAL(a->m[PB_CMP_RUBY].med, 82, 1e-9);
  /* the open loop did not run in round 2: two values, 5000 and 15000 */
  CU_ASSERT_EQUAL(a->m[PB_CMP_OPEN_P99].n, 2);
  CU_ASSERT_DOUBLE_EQUAL(a->m[PB_CMP_OPEN_P99].med, 10000, 1e-9);
  CU_ASSERT_EQUAL(b->rounds_ran, 2);
  CU_ASSERT_EQUAL(b->rounds_failed, 1);
  CU_ASSERT_DOUBLE_EQUAL(b->m[PB_CMP_RPS].med, 450, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(b->m[PB_CMP_RPS].max, 500, 1e-9);
  CU_ASSERT_EQUAL(b->m[PB_CMP_FRONTEND].n, 0);
  CU_ASSERT_EQUAL(c->rounds_ran, 1);
  CU_ASSERT_EQUAL(c->rounds_with_errors, 1);
  CU_ASSERT_DOUBLE_EQUAL(c->m[PB_CMP_RPS].med, 700, 1e-9);
  CU_ASSERT_EQUAL(d->rounds_ran + d->rounds_failed, 0);
  CU_ASSERT(d->m[PB_CMP_RPS].med < 0);
  double v[] = {3, 1, 2, 10};
  CU_ASSERT_DOUBLE_EQUAL(pb_cmp_median_of(v, 4), 2.5, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(pb_cmp_median_of(v, 3), 2, 1e-12);
  CU_ASSERT(pb_cmp_median_of(v, 0) < 0);
}

static uint64_t own_ticks(void) {
  uint64_t tree, own;
  uint32_t procs;
  CU_ASSERT_EQUAL_FATAL(pb_cmp_tree_cpu(getpid(), &tree, &own, &procs), 0);
  return own;
}

/* The tree is this process and a forked child that burns CPU: both are counted, and the
 * ticks grow with work done (a 10 ms tick; the loop stops at the first one, 5 s at most). */
static void test_tree_cpu(void) {
  uint64_t t0 = own_ticks();
  volatile uint64_t x = 0;
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  do {
    for (int i = 0; i < 1000000; i++)
      x += (uint64_t)i;
    clock_gettime(CLOCK_MONOTONIC, &now);
  } while (own_ticks() == t0 && now.tv_sec - start.tv_sec < 5);
  CU_ASSERT(own_ticks() > t0);
  pid_t child = fork();
  if (child == 0) {
    for (;;)
      x++;
  }
  CU_ASSERT_FATAL(child > 0);
  uint64_t tree = 0, own = 0;
  uint32_t procs = 0;
  clock_gettime(CLOCK_MONOTONIC, &start);
  do {
    pb_cmp_tree_cpu(getpid(), &tree, &own, &procs);
    clock_gettime(CLOCK_MONOTONIC, &now);
  } while (tree <= own + 1 && now.tv_sec - start.tv_sec < 5);
  CU_ASSERT_EQUAL(procs, 2);
  CU_ASSERT(tree > own); /* the child's ticks are in the tree, not in the root's own */
  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  pb_cmp_tree_cpu(getpid(), &tree, &own, &procs);
  CU_ASSERT_EQUAL(procs, 1);
}

static void joined_argv(const pb_server_spec *s, char *joined, size_t len) {
  char *argv[48], storage[4096];
  int argc = pb_server_argv(s, argv, 48, storage, sizeof storage);
  joined[0] = 0;
  CU_ASSERT_FATAL(argc > 0);
  for (int i = 0; i < argc; i++) {
    strncat(joined, i ? " " : "", len - strlen(joined) - 1);
    strncat(joined, argv[i], len - strlen(joined) - 1);
  }
}

/* puma 8 and falcon from the RubyGems column run under bundle exec; falcon gets processes
 * (--count) and no thread count; Debian's puma (no gemfile) is unchanged. */
static void test_server_command_lines(void) {
  pb_server_spec s;
  memset(&s, 0, sizeof s);
  s.kind = PB_SERVER_PUMA;
  s.workers = 2;
  s.threads = 5;
  s.port = 4000;
  strcpy(s.app, "/a/config.ru");
  char joined[2048];
  joined_argv(&s, joined, sizeof joined);
  CU_ASSERT_STRING_EQUAL(joined, "puma --no-config -e production -w 2 -t 5:5 -b "
                                 "tcp://127.0.0.1:4000 /a/config.ru");
  strcpy(s.gemfile, "/r/Gemfile");
  strcpy(s.gem_home, "/r/gems");
  strcpy(s.puma_bin, "/usr/bin/puma"); /* Debian's binary is not the bundle's */
  joined_argv(&s, joined, sizeof joined);
  CU_ASSERT_STRING_EQUAL(joined, "bundle exec puma --no-config -e production -w 2 -t 5:5 -b "
                                 "tcp://127.0.0.1:4000 /a/config.ru");
  s.kind = PB_SERVER_FALCON;
  joined_argv(&s, joined, sizeof joined);
  CU_ASSERT_STRING_EQUAL(joined, "bundle exec falcon serve --bind http://127.0.0.1:4000 --count 2 "
                                 "--forked --config /a/config.ru");
  CU_ASSERT_PTR_NULL(strstr(joined, "5"));
}

static void test_rubygems_env(void) {
  setenv("RUBYOPT", "-rsomething", 1);
  setenv("GEM_PATH", "/elsewhere", 1);
  pb_rubygems_env_apply("/r/gems", "/r/Gemfile");
  CU_ASSERT_STRING_EQUAL(getenv("GEM_HOME"), "/r/gems");
  CU_ASSERT_STRING_EQUAL(getenv("BUNDLE_GEMFILE"), "/r/Gemfile");
  CU_ASSERT_STRING_EQUAL(getenv("BUNDLE_FROZEN"), "true");
  CU_ASSERT_STRING_EQUAL(getenv("BUNDLE_APP_CONFIG"), "/r/gems/.bundle-config");
  CU_ASSERT_STRING_EQUAL(getenv("BUNDLE_USER_HOME"), "/r/gems/.bundle-home");
  CU_ASSERT_PTR_NULL(getenv("RUBYOPT"));
  CU_ASSERT_PTR_NULL(getenv("GEM_PATH"));
  pb_rubygems_env_apply(NULL, NULL); /* Debian's column: none of them */
  CU_ASSERT_PTR_NULL(getenv("GEM_HOME"));
  CU_ASSERT_PTR_NULL(getenv("BUNDLE_GEMFILE"));
  CU_ASSERT_PTR_NULL(getenv("BUNDLE_APP_CONFIG"));
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 2;
  CU_pSuite s = CU_add_suite("bench_compare", NULL, NULL);
  CU_add_test(s, "servers list", test_servers_list);
  CU_add_test(s, "steal time", test_steal);
  CU_add_test(s, "steal retry rule", test_steal_rule);
  CU_add_test(s, "server spec list", test_server_spec_list);
  CU_add_test(s, "shapes list", test_shapes_list);
  CU_add_test(s, "wrk report", test_wrk_report);
  CU_add_test(s, "medians", test_medians);
  CU_add_test(s, "tree cpu", test_tree_cpu);
  CU_add_test(s, "server command lines", test_server_command_lines);
  CU_add_test(s, "rubygems env", test_rubygems_env);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failures = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}
