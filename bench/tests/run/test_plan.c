/* bench/run/plan.c: the arrival schedule pp-bench sends is the simulator's, arrival for arrival.
 * pp-sim builds its schedule with pp_schedule_build (sim/arrivals.h); pp-bench converts the
 * same call's output. This test rebuilds the simulator's schedule independently and compares
 * every intended time and request path, the digest both tools print, and that the seed (and
 * only the seed) moves it. */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/run/plan.h"
#include "bench/run/run.h"
#include "bench/gen/schedule.h"
#include "sim/arrivals.h"
#include "sim/scenario_file.h"

static const char *scenario_path = PP_SOURCE_DIR "/bench/tests/scenarios/tiny.yaml";

static void load(pp_scenario *scn) {
  pp_scn_error e;
  memset(&e, 0, sizeof e);
  pp_scenario_defaults(scn);
  int rc = pp_scenario_load(scn, scenario_path, &e);
  if (rc) {
    char buf[1024];
    fprintf(stderr, "%s\n", pp_scn_error_format(&e, buf, sizeof buf));
  }
  CU_ASSERT_FATAL(rc == 0);
}

static void test_schedule_identical_to_simulator(void) {
  pp_scenario scn;
  load(&scn);
  pb_schedule mine;
  uint64_t digest = 0;
  CU_ASSERT_FATAL(pb_plan_schedule(&scn, scn.seed, &mine, &digest) == 0);
  pp_schedule sim;
  CU_ASSERT_FATAL(pp_schedule_build(&sim, &scn, scn.seed) == 0);
  CU_ASSERT_EQUAL_FATAL(mine.count, sim.n);
  CU_ASSERT(mine.count > 200); /* 40 rps × 2 s + 120 rps × 2 s ≈ 320 */
  size_t same = 0;
  for (size_t i = 0; i < sim.n; i++) {
    if (mine.arrivals[i].intended_ns == (uint64_t)sim.items[i].t_ns &&
        strcmp(mine.paths[mine.arrivals[i].kind], scn.kinds[sim.items[i].kind].path) == 0)
      same++;
  }
  CU_ASSERT_EQUAL(same, sim.n);
  CU_ASSERT_EQUAL(digest, pp_schedule_digest(&sim));
  /* pp-bench's own digest of its copy agrees with the simulator's. */
  CU_ASSERT_EQUAL(pb_schedule_digest(&mine), pp_schedule_digest(&sim));
  /* Both kinds are used, in roughly their 1:3 weights. */
  size_t hello = 0;
  for (size_t i = 0; i < mine.count; i++)
    hello += strcmp(mine.paths[mine.arrivals[i].kind], "/hello") == 0;
  CU_ASSERT(hello > mine.count / 8 && hello < mine.count / 2);
  pp_schedule_dispose(&sim);
  pb_schedule_dispose(&mine);
  pp_scenario_dispose(&scn);
}

static void test_seed_moves_the_schedule(void) {
  pp_scenario scn;
  load(&scn);
  pb_schedule a, b, c;
  uint64_t da, db, dc;
  CU_ASSERT_FATAL(pb_plan_schedule(&scn, scn.seed, &a, &da) == 0);
  CU_ASSERT_FATAL(pb_plan_schedule(&scn, scn.seed, &b, &db) == 0);
  CU_ASSERT_FATAL(pb_plan_schedule(&scn, scn.seed + 1, &c, &dc) == 0);
  CU_ASSERT_EQUAL(da, db);
  CU_ASSERT_NOT_EQUAL(da, dc);
  CU_ASSERT_EQUAL_FATAL(a.count, b.count);
  CU_ASSERT(memcmp(a.arrivals, b.arrivals, a.count * sizeof *a.arrivals) == 0);
  pb_schedule_dispose(&a);
  pb_schedule_dispose(&b);
  pb_schedule_dispose(&c);
  pp_scenario_dispose(&scn);
}

/* The server command line pb_server_argv builds for `spec`, words joined by spaces. */
static int command_line(const pb_server_spec *spec, char *joined, size_t cap) {
  char *argv[40], storage[4096];
  int argc = pb_server_argv(spec, argv, 40, storage, sizeof storage);
  joined[0] = '\0';
  for (int i = 0; i < argc; i++) {
    strncat(joined, i ? " " : "", cap - strlen(joined) - 1);
    strncat(joined, argv[i], cap - strlen(joined) - 1);
  }
  return argc;
}

static void test_server_specs(void) {
  pp_scenario scn;
  load(&scn);
  pb_server_spec spec;
  char err[256];
  CU_ASSERT_FATAL(pb_plan_server(&scn, 0, "/app/config.ru", "/s", "/tmp", &spec, err, sizeof err) ==
                  0);
  CU_ASSERT_STRING_EQUAL(spec.name, "puma-w1t2");
  CU_ASSERT_EQUAL(spec.kind, PB_SERVER_PUMA);
  CU_ASSERT_EQUAL(spec.workers, 1);
  CU_ASSERT_EQUAL(spec.threads, 2);
  spec.port = 4567;
  char joined[1024];
  CU_ASSERT_FATAL(command_line(&spec, joined, sizeof joined) > 0);
  CU_ASSERT_STRING_EQUAL(joined, "puma --no-config -e production -w 1 -t 2:2 -b "
                                 "tcp://127.0.0.1:4567 /app/config.ru");
  CU_ASSERT(pb_plan_server(&scn, 5, "x", "/s", "/tmp", &spec, err, sizeof err) < 0);
  pp_scenario_dispose(&scn);
}

/* An autoscaling puma-plus gets its policy and, when the run has a log directory, a decision
 * log beside its server log (pb_run_config fills the path; here it is set by hand). */
static void test_autoscale_argv(void) {
  pb_server_spec spec;
  memset(&spec, 0, sizeof spec);
  snprintf(spec.name, sizeof spec.name, "auto");
  spec.kind = PB_SERVER_PUMAPLUS;
  spec.workers = 1;
  spec.threads = 4;
  spec.autoscale = true;
  spec.max_workers = 3;
  spec.port = 4567;
  spec.stats_port = 4568;
  snprintf(spec.app, sizeof spec.app, "/app/config.ru");
  snprintf(spec.policy_path, sizeof spec.policy_path, "/tmp/auto.policy.yaml");
  snprintf(spec.decision_log, sizeof spec.decision_log, "/tmp/auto.decisions.jsonl");
  char joined[1024];
  CU_ASSERT_FATAL(command_line(&spec, joined, sizeof joined) > 0);
  CU_ASSERT_STRING_EQUAL(joined, "puma-plus -e production -w 1 -t 4:4 -b tcp://127.0.0.1:4567 "
                                 "--control-url tcp://127.0.0.1:4568 /app/config.ru -- -quiet "
                                 "-autoscale -policy /tmp/auto.policy.yaml -max-workers 3 "
                                 "-decision-log /tmp/auto.decisions.jsonl");
}

/* slots: ractor: puma-plus runs its slots as Ractors (--ractors, one per slot). */
static void test_ractors_argv(void) {
  pb_server_spec spec;
  memset(&spec, 0, sizeof spec);
  spec.kind = PB_SERVER_PUMAPLUS;
  spec.workers = 1;
  spec.threads = 4;
  spec.ractors = true;
  spec.port = 4567;
  spec.stats_port = 4568;
  snprintf(spec.app, sizeof spec.app, "/app/config.ru");
  char joined[1024];
  CU_ASSERT_FATAL(command_line(&spec, joined, sizeof joined) > 0);
  CU_ASSERT_STRING_EQUAL(joined, "puma-plus -e production -w 1 -t 4:4 --ractors 4 -b "
                                 "tcp://127.0.0.1:4567 --control-url tcp://127.0.0.1:4568 "
                                 "/app/config.ru -- -quiet");
  spec.kind = PB_SERVER_PUMA; /* never passed to puma */
  CU_ASSERT_FATAL(command_line(&spec, joined, sizeof joined) > 0);
  CU_ASSERT_PTR_NULL(strstr(joined, "ractors"));
}

static void touch(const char *path) {
  FILE *f = fopen(path, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fputs("an earlier run\n", f);
  fclose(f);
}

/* A reused -log-dir: a run never appends to the logs an earlier run left (the server appends,
 * and two runs' ticks in one decision log refused the whole store); it gets numbered names
 * beside them, and the earlier files are untouched. */
static void test_fresh_logs(void) {
  char dir[] = "/tmp/test_bench_plan.XXXXXX";
  CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
  pb_server_spec s;
  memset(&s, 0, sizeof s);
  char log[512], dec[512], want[600];
  snprintf(log, sizeof log, "%s/auto-k0.log", dir);
  snprintf(dec, sizeof dec, "%s/auto-k0.decisions.jsonl", dir);
  snprintf(s.log_path, sizeof s.log_path, "%s", log);
  snprintf(s.decision_log, sizeof s.decision_log, "%s", dec);
  CU_ASSERT_EQUAL(pb_run_fresh_logs(&s), 0); /* a fresh directory: kept */
  CU_ASSERT_STRING_EQUAL(s.log_path, log);
  CU_ASSERT_STRING_EQUAL(s.decision_log, dec);
  touch(log);
  touch(dec);
  CU_ASSERT_EQUAL(pb_run_fresh_logs(&s), 2);
  snprintf(want, sizeof want, "%s/auto-k0.2.log", dir);
  CU_ASSERT_STRING_EQUAL(s.log_path, want);
  snprintf(want, sizeof want, "%s/auto-k0.2.decisions.jsonl", dir);
  CU_ASSERT_STRING_EQUAL(s.decision_log, want);
  /* The third run: .2's decision log alone exists (its server log was removed): .3. */
  touch(s.decision_log);
  snprintf(s.log_path, sizeof s.log_path, "%s", log);
  snprintf(s.decision_log, sizeof s.decision_log, "%s", dec);
  CU_ASSERT_EQUAL(pb_run_fresh_logs(&s), 3);
  snprintf(want, sizeof want, "%s/auto-k0.3.log", dir);
  CU_ASSERT_STRING_EQUAL(s.log_path, want);
  /* A static configuration has no decision log: its server log alone is numbered. */
  pb_server_spec t;
  memset(&t, 0, sizeof t);
  snprintf(t.log_path, sizeof t.log_path, "%s", log);
  CU_ASSERT_EQUAL(pb_run_fresh_logs(&t), 2);
  snprintf(want, sizeof want, "%s/auto-k0.2.log", dir);
  CU_ASSERT_STRING_EQUAL(t.log_path, want);
  CU_ASSERT_STRING_EQUAL(t.decision_log, "");
  /* The earlier run's files are as it left them. */
  FILE *f = fopen(log, "r");
  char line[64] = "";
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  CU_ASSERT_PTR_NOT_NULL(fgets(line, sizeof line, f));
  fclose(f);
  CU_ASSERT_STRING_EQUAL(line, "an earlier run\n");
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CU_ASSERT_EQUAL(system(cmd), 0);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 2;
  CU_pSuite s = CU_add_suite("bench_plan", NULL, NULL);
  CU_add_test(s, "schedule identical to the simulator's", test_schedule_identical_to_simulator);
  CU_add_test(s, "slots: ractor gives puma-plus --ractors", test_ractors_argv);
  CU_add_test(s, "seed moves the schedule", test_seed_moves_the_schedule);
  CU_add_test(s, "server specs", test_server_specs);
  CU_add_test(s, "autoscale command line", test_autoscale_argv);
  CU_add_test(s, "a reused log directory gets fresh logs", test_fresh_logs);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failures = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}
