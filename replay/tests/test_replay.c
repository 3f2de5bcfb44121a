/* Tests for replay/replay.c: parsing a log with header lines, finding the policy by hash,
 * verifying records (every compared field is detected when edited), the explain line, and
 * the counterfactual step. The recorded logs themselves are replayed by cli_test.sh. */
#include "replay/replay.h"

#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char text[1 << 16];

/* A three-tick log decided by `p`, with a header line when `header`. */
static size_t make_log(const pp_policy *p, int header, pp_declog_record *recs) {
  size_t len = 0;
  char line[PP_DECLOG_LINE_MAX];
  if (header) {
    pp_declog_header h;
    CU_ASSERT_EQUAL_FATAL(pp_declog_header_init(&h, p, "test"), 0);
    int n = pp_declog_encode_header(&h, line, sizeof line);
    CU_ASSERT_FATAL(n > 0);
    memcpy(text + len, line, (size_t)n);
    len += (size_t)n;
  }
  pp_ctl_state st;
  pp_ctl_state_init(&st, p, 1, 5);
  for (int t = 0; t < 3; t++) {
    pp_declog_record *r = &recs[t];
    memset(r, 0, sizeof *r);
    r->tick = (uint64_t)t;
    r->time_ns = (int64_t)(t + 1) * 1000000000;
    r->policy_hash = pp_policy_hash(p);
    strcpy(r->source, "test");
    pp_observation *o = &r->obs;
    o->tick = r->tick;
    o->time_ns = r->time_ns;
    o->window_ns = 1000000000;
    o->queue_count = 100;
    o->queue_p95_ns = t == 0 ? 10000000 : 503000000;
    o->queue_len = t == 0 ? 0 : 400;
    o->slots_ready = 5;
    o->slots_busy = 5;
    o->workers_ready = 1;
    o->threads_per_worker = 5;
    o->arrival_rate = t == 0 ? 60 : 700;
    o->service_mean_ns = 25000000;
    o->service_cpu_mean_ns = PP_UNKNOWN_NS;
    o->gvl_wait_ns = PP_UNKNOWN_NS;
    o->mem_per_worker_bytes = -1;
    r->state_before = st;
    r->decision = pp_decide(p, &st, o);
    r->state_after = st;
    int n = pp_declog_encode(r, line, sizeof line);
    CU_ASSERT_FATAL(n > 0);
    memcpy(text + len, line, (size_t)n);
    len += (size_t)n;
    if (t == 0) text[len++] = '\n'; /* a blank line is skipped */
  }
  text[len] = '\0';
  return len;
}

static void test_parse_and_policy_lookup(void) {
  pp_policy p, found;
  pp_policy_defaults(&p);
  p.max_workers = 5;
  pp_declog_record recs[3];
  size_t len = make_log(&p, 1, recs);
  pp_replay_log log;
  pp_declog_error e;
  CU_ASSERT_EQUAL_FATAL(pp_replay_log_parse(&log, text, len, &e), 0);
  CU_ASSERT_EQUAL(log.n, 3);
  CU_ASSERT_EQUAL(log.n_headers, 1);
  CU_ASSERT_EQUAL(log.header_lines[0], 1);
  CU_ASSERT_EQUAL(log.rec_lines[0], 2);
  CU_ASSERT_EQUAL(log.rec_lines[1], 4); /* after the blank line */
  CU_ASSERT_EQUAL(pp_replay_policy_for(&log, pp_policy_hash(&p), NULL, &found),
                  PP_REPLAY_POLICY_HEADER);
  CU_ASSERT_EQUAL(memcmp(&found, &p, sizeof p), 0);
  CU_ASSERT_EQUAL(pp_replay_policy_for(&log, pp_policy_hash(&p), &p, &found),
                  PP_REPLAY_POLICY_GIVEN);
  pp_policy d;
  pp_policy_defaults(&d);
  CU_ASSERT_EQUAL(pp_replay_policy_for(&log, pp_policy_hash(&d), NULL, &found),
                  PP_REPLAY_POLICY_DEFAULTS);
  CU_ASSERT_EQUAL(pp_replay_policy_for(&log, 12345, &d, &found), PP_REPLAY_POLICY_NONE);
  pp_replay_log_dispose(&log);
  /* Without the header, p is found nowhere. */
  len = make_log(&p, 0, recs);
  CU_ASSERT_EQUAL_FATAL(pp_replay_log_parse(&log, text, len, &e), 0);
  CU_ASSERT_EQUAL(log.n_headers, 0);
  CU_ASSERT_EQUAL(pp_replay_policy_for(&log, pp_policy_hash(&p), NULL, &found),
                  PP_REPLAY_POLICY_NONE);
  pp_replay_log_dispose(&log);
}

static void test_parse_errors_name_line(void) {
  pp_policy p;
  pp_policy_defaults(&p);
  pp_declog_record recs[3];
  size_t len = make_log(&p, 1, recs);
  pp_replay_log log;
  pp_declog_error e;
  /* Cut in the middle of the last record (line 5). */
  CU_ASSERT_EQUAL(pp_replay_log_parse(&log, text, len - 40, &e), PP_CTL_EPARSE);
  CU_ASSERT_EQUAL(e.line, 5);
  CU_ASSERT_EQUAL(log.n, 0);
  CU_ASSERT_PTR_NULL(log.recs);
  /* Garbage on line 2. */
  char *bad = strdup(text);
  char *nl = strchr(bad, '\n');
  nl[1] = '#';
  CU_ASSERT_EQUAL(pp_replay_log_parse(&log, bad, strlen(bad), &e), PP_CTL_EPARSE);
  CU_ASSERT_EQUAL(e.line, 2);
  free(bad);
}

static void test_check_detects_each_field(void) {
  pp_policy p;
  pp_policy_defaults(&p);
  pp_declog_record recs[3];
  make_log(&p, 0, recs);
  pp_replay_diff diff;
  for (int t = 0; t < 3; t++)
    CU_ASSERT_EQUAL(pp_replay_check_record(&p, &recs[t], NULL, &diff), 0);
  static const char *const fields[] = {"decision.action",
                                       "decision.count",
                                       "decision.workers_target",
                                       "decision.predicted_wait_ns",
                                       "decision.rho",
                                       "decision.shed",
                                       "decision.shed_budget_ns",
                                       "decision.reason",
                                       "state_after.breach_ticks",
                                       "state_after.last_spawn_ns",
                                       "state_after.workers_wanted",
                                       "state_after.shedding"};
  for (size_t k = 0; k < sizeof fields / sizeof fields[0]; k++) {
    pp_declog_record r = recs[1];
    switch (k) {
    case 0: r.decision.action = PP_ACTION_NONE; break;
    case 1: r.decision.count++; break;
    case 2: r.decision.workers_target++; break;
    case 3: r.decision.predicted_wait_ns--; break;
    case 4: r.decision.rho = nextafter(r.decision.rho, 10.0); break;
    case 5: r.decision.shed = !r.decision.shed; break;
    case 6: r.decision.shed_budget_ns++; break;
    case 7: r.decision.reason[0] = 'X'; break;
    case 8: r.state_after.breach_ticks++; break;
    case 9: r.state_after.last_spawn_ns--; break;
    case 10: r.state_after.workers_wanted++; break;
    case 11: r.state_after.shedding = !r.state_after.shedding; break;
    }
    pp_decision replayed;
    CU_ASSERT_EQUAL(pp_replay_check_record(&p, &r, &replayed, &diff), 1);
    CU_ASSERT_STRING_EQUAL(diff.field, fields[k]);
    CU_ASSERT_EQUAL(diff.tick, 1);
    CU_ASSERT_STRING_NOT_EQUAL(diff.logged, diff.replayed);
  }
  /* A different policy diverges too (the same log under max_step 1). */
  pp_policy q = p;
  q.max_step = 1;
  CU_ASSERT_EQUAL(pp_replay_check_record(&q, &recs[1], NULL, &diff), 1);
  CU_ASSERT_STRING_EQUAL(diff.field, "decision.count");
}

static void test_explain_line(void) {
  pp_policy p;
  pp_policy_defaults(&p);
  pp_declog_record recs[3];
  make_log(&p, 0, recs);
  char buf[512];
  pp_replay_explain_line(&recs[1], buf, sizeof buf);
  CU_ASSERT_NSTRING_EQUAL(buf, "tick 1     spawn_worker x4   queue p95 503ms over severe 200ms",
                          62);
  pp_replay_explain_line(&recs[0], buf, sizeof buf);
  CU_ASSERT_NSTRING_EQUAL(buf, "tick 0     none              steady (queue p95 10ms", 49);
  char tiny[8];
  CU_ASSERT_EQUAL(pp_replay_explain_line(&recs[0], tiny, sizeof tiny), 7);
  CU_ASSERT_STRING_EQUAL(tiny, "tick 0 ");
}

/* A log with standby activations (the recorded pp-sim one, decision log v2): every record
 * verifies under its header's policy, and an edit to each standby field is named. */
static void test_standby_log(void) {
  FILE *f = fopen(PP_REPLAY_LOGS "/sim-standby-step.jsonl", "rb");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  static char big[1 << 20];
  size_t len = fread(big, 1, sizeof big - 1, f);
  fclose(f);
  CU_ASSERT_FATAL(len > 0 && len < sizeof big - 1);
  big[len] = '\0';
  pp_replay_log log;
  pp_declog_error e;
  CU_ASSERT_EQUAL_FATAL(pp_replay_log_parse(&log, big, len, &e), 0);
  pp_policy p;
  CU_ASSERT_EQUAL_FATAL(pp_replay_policy_for(&log, log.recs[0].policy_hash, NULL, &p),
                        PP_REPLAY_POLICY_HEADER);
  CU_ASSERT_EQUAL(p.standby, 1);
  size_t first = log.n, activations = 0, refills = 0;
  pp_replay_diff diff;
  for (size_t i = 0; i < log.n; i++) {
    CU_ASSERT_EQUAL(pp_replay_check_record(&p, &log.recs[i], NULL, &diff), 0);
    activations += log.recs[i].decision.activate;
    refills += log.recs[i].decision.standby_spawn;
    if (first == log.n && log.recs[i].decision.activate) first = i;
  }
  CU_ASSERT(activations >= 2);
  CU_ASSERT_EQUAL(refills, activations);
  CU_ASSERT_FATAL(first < log.n);
  static const char *const fields[] = {"decision.activate", "decision.standby_spawn",
                                       "state_after.standby_wanted",
                                       "state_after.last_activate_ns"};
  for (size_t k = 0; k < 4; k++) {
    pp_declog_record r = log.recs[first];
    switch (k) {
    case 0: r.decision.activate = 0; break;
    case 1: r.decision.standby_spawn++; break;
    case 2: r.state_after.standby_wanted++; break;
    case 3: r.state_after.last_activate_ns = INT64_MIN; break;
    }
    CU_ASSERT_EQUAL(pp_replay_check_record(&p, &r, NULL, &diff), 1);
    CU_ASSERT_STRING_EQUAL(diff.field, fields[k]);
  }
  /* The same observations under standby 0: no activation, every standby field at rest. */
  pp_policy q = p;
  q.standby = 0;
  pp_ctl_state st = log.recs[first].state_before;
  pp_declog_record r = log.recs[first];
  r.obs.workers_standby = 0;
  pp_decision d = pp_decide(&q, &st, &r.obs);
  CU_ASSERT_EQUAL(d.activate, 0);
  CU_ASSERT_EQUAL(d.standby_spawn, 0);
  CU_ASSERT_EQUAL(d.action, PP_ACTION_SPAWN_WORKER);
  pp_replay_log_dispose(&log);
}

static void test_counterfactual_step(void) {
  pp_policy p, tuned;
  pp_policy_defaults(&p);
  pp_declog_record recs[3];
  make_log(&p, 0, recs);
  tuned = p;
  tuned.max_step = 8;
  pp_ctl_state st = recs[0].state_before;
  int differ = 0;
  for (int t = 0; t < 3; t++) {
    pp_decision d = pp_replay_counterfactual_step(&tuned, &st, &recs[t]);
    if (pp_replay_decisions_differ(&recs[t].decision, &d)) {
      differ++;
      CU_ASSERT_EQUAL(t, 1);
      /* 700 rps x 25 ms / 0.7 = 25 slots, + 400 queued x 25 ms / 3 s = 3.3: 6 workers, 5 more */
      CU_ASSERT_EQUAL(d.count, 5);
    }
  }
  CU_ASSERT_EQUAL(differ, 1);
  /* The same policy never differs. */
  st = recs[0].state_before;
  for (int t = 0; t < 3; t++) {
    pp_decision d = pp_replay_counterfactual_step(&p, &st, &recs[t]);
    CU_ASSERT_FALSE(pp_replay_decisions_differ(&recs[t].decision, &d));
  }
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 2;
  CU_pSuite s = CU_add_suite("replay", NULL, NULL);
  if (!s || !CU_add_test(s, "parse log, policy lookup by hash", test_parse_and_policy_lookup) ||
      !CU_add_test(s, "parse errors name the line", test_parse_errors_name_line) ||
      !CU_add_test(s, "verify detects every compared field", test_check_detects_each_field) ||
      !CU_add_test(s, "explain line", test_explain_line) ||
      !CU_add_test(s, "counterfactual step", test_counterfactual_step) ||
      !CU_add_test(s, "a log with standby activations verifies", test_standby_log)) {
    CU_cleanup_registry();
    return 2;
  }
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failures = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}
