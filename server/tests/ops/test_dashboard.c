/* Tests for server/ops/dashboard.c without sockets: the decision history that /stats shows as
 * controller.decisions (which decisions are kept, the tick each carries, the ring's size and
 * order in the JSON), and the tick counter that is the stream's event id. The stream itself
 * (framing, fan-out, disconnects) is tested end to end by tests/e2e/test_stats_stream.rb. */
#include <CUnit/Basic.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "server/process/server_int.h"

static server srv; /* large: static, zeroed per test by fresh() */
static pp_config cfg;

static void fresh(void) {
  memset(&srv, 0, sizeof srv);
  pp_config_defaults(&cfg);
  srv.cfg = &cfg;
  static const pp_session_starters starters = {.h1 = pp_h1conn_start, .h2 = pp_h2conn_start};
  pp_sessions_init(&srv.sess, &srv, srv.loop, &cfg, &srv.net, &srv.xpool, &srv.core, &srv.hooks,
                   &srv.draining, &starters);
  pp_wshub_init(&srv.sess.wshub, srv.loop, &cfg, &srv.core, &srv.xpool);
  pp_exchange_pool_init(&srv.xpool, &cfg, &srv);
  pp_core_init(&srv.core, &srv, &srv.hooks, &srv.net, &srv.xpool, &srv.workers.reg,
               &srv.ops.ctl.policy, &srv.ops.ctl.shedding);
  pp_ops_init(&srv.ops, &srv, srv.loop, &cfg, &srv.hooks, &srv.xpool, &srv.workers, &srv.core,
              &srv.sess, &srv.draining, &srv.stopping, &srv.started_at);
  pp_policy_defaults(&srv.ops.ctl.policy);
  srv.ops.ctl.enabled = 1;
}

/* One server tick in which the controller decided (action, count, shed). */
static void tick_with(pp_action action, uint32_t count, int shed, const char *reason) {
  controller *ct = &srv.ops.ctl;
  memset(&ct->last, 0, sizeof ct->last);
  ct->last.action = action;
  ct->last.count = count;
  ct->last.shed = shed;
  snprintf(ct->last.reason, sizeof ct->last.reason, "%s", reason);
  ct->have_last = 1;
  ct->tick++; /* as pp_autoscale_tick counts it */
  pp_dashboard_tick(&srv.ops);
}

static const pp_dash_decision *newest(uint32_t i) {
  pp_dashboard *d = &srv.ops.dash;
  return &d->decisions[(d->decisions_head + PP_DASH_DECISIONS - 1 - i) % PP_DASH_DECISIONS];
}

static void test_which_decisions_are_kept(void) {
  fresh();
  pp_dashboard_tick(&srv.ops); /* no controller decision yet (e.g. -autoscale off) */
  CU_ASSERT_EQUAL(srv.ops.dash.ticks, 1);
  CU_ASSERT_EQUAL(srv.ops.dash.decisions_len, 0);
  tick_with(PP_ACTION_NONE, 0, 0, "none: steady");         /* tick 0: the first is kept */
  tick_with(PP_ACTION_NONE, 0, 0, "none: steady again");   /* 1: dropped */
  tick_with(PP_ACTION_SPAWN_WORKER, 2, 0, "spawn x2");     /* 2: kept */
  tick_with(PP_ACTION_NONE, 0, 1, "none: shedding on");    /* 3: shed flips: kept */
  tick_with(PP_ACTION_NONE, 0, 1, "none: still shedding"); /* 4: dropped */
  tick_with(PP_ACTION_RETIRE_WORKER, 1, 1, "retire x1");   /* 5: kept */
  tick_with(PP_ACTION_NONE, 0, 0, "none: shedding off");   /* 6: shed flips back: kept */
  CU_ASSERT_EQUAL(srv.ops.dash.ticks, 8);
  CU_ASSERT_EQUAL_FATAL(srv.ops.dash.decisions_len, 5);
  uint64_t ticks[] = {6, 5, 3, 2, 0}; /* newest first, numbered as in the decision log */
  const char *reasons[] = {"none: shedding off", "retire x1", "none: shedding on", "spawn x2",
                           "none: steady"};
  for (uint32_t i = 0; i < 5; i++) {
    CU_ASSERT_EQUAL(newest(i)->tick, ticks[i]);
    CU_ASSERT_STRING_EQUAL(newest(i)->reason, reasons[i]);
  }
  CU_ASSERT_EQUAL(newest(3)->action, PP_ACTION_SPAWN_WORKER);
  CU_ASSERT_EQUAL(newest(3)->count, 2);
  CU_ASSERT_EQUAL(newest(2)->shed, 1);
}

static void test_a_tick_without_a_decision_adds_nothing(void) {
  fresh();
  tick_with(PP_ACTION_SPAWN_WORKER, 1, 0, "spawn x1");
  /* draining: pp_autoscale_tick returns early, ct->tick and ct->last stay as they were */
  pp_dashboard_tick(&srv.ops);
  pp_dashboard_tick(&srv.ops);
  CU_ASSERT_EQUAL(srv.ops.dash.decisions_len, 1);
  CU_ASSERT_EQUAL(srv.ops.dash.ticks, 3);
}

static void test_ring_keeps_the_newest(void) {
  fresh();
  char reason[32];
  for (int i = 0; i < 3 * PP_DASH_DECISIONS + 5; i++) {
    snprintf(reason, sizeof reason, "spawn #%d", i);
    tick_with(PP_ACTION_SPAWN_WORKER, 1, 0, reason);
  }
  CU_ASSERT_EQUAL(srv.ops.dash.decisions_len, PP_DASH_DECISIONS);
  CU_ASSERT_EQUAL(newest(0)->tick, 3 * PP_DASH_DECISIONS + 4);
  CU_ASSERT_EQUAL(newest(PP_DASH_DECISIONS - 1)->tick, 2 * PP_DASH_DECISIONS + 5);

  /* /stats: controller.decisions newest first, and the stream counters */
  pp_buf out;
  pp_buf_init(&out);
  pp_stats_json(&srv.ops, 0, &out);
  json_error_t err;
  json_t *root = json_loadb((const char *)out.data, out.len, 0, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(root);
  json_t *decs = json_object_get(json_object_get(root, "controller"), "decisions");
  CU_ASSERT_EQUAL_FATAL(json_array_size(decs), PP_DASH_DECISIONS);
  for (size_t i = 0; i < PP_DASH_DECISIONS; i++) {
    json_t *e = json_array_get(decs, i);
    int64_t want = 3 * PP_DASH_DECISIONS + 4 - (int64_t)i;
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(e, "tick")), want);
    snprintf(reason, sizeof reason, "spawn #%d", (int)want);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(e, "reason")), reason);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(e, "action")), "spawn_worker");
    CU_ASSERT_EQUAL(strlen(json_string_value(json_object_get(e, "at"))), 20); /* ISO 8601 */
  }
  json_t *stream = json_object_get(root, "stream");
  CU_ASSERT_EQUAL(json_integer_value(json_object_get(stream, "ticks")), 3 * PP_DASH_DECISIONS + 5);
  CU_ASSERT_EQUAL(json_integer_value(json_object_get(stream, "subscribers")), 0);
  CU_ASSERT_EQUAL(json_integer_value(json_object_get(stream, "events")), 0);
  json_decref(root);
  pp_buf_dispose(&out);
}

/* The tick history a new subscriber gets first (and GET /stats/history): the newest
 * PP_DASH_HISTORY ticks, oldest first, each with what /stats showed on that tick. */
static void test_history_keeps_the_newest_ticks_with_their_figures(void) {
  fresh();
  pp_stats *st = &srv.core.stats;
  uint32_t n = PP_DASH_HISTORY + 7;
  for (uint32_t i = 1; i <= n; i++) {
    st->arrivals_last = i; /* window of 1 s: i arrivals/s on tick i */
    st->completions_last = 2 * i;
    st->last_window_ns = 1000000000;
    st->shed = 10 * i;
    st->timeouts = i / 2;
    pp_dashboard_tick(&srv.ops);
  }
  CU_ASSERT_EQUAL(srv.ops.dash.points_len, PP_DASH_HISTORY);
  pp_buf out;
  pp_buf_init(&out);
  pp_dashboard_history_json(&srv.ops, &out);
  json_error_t err;
  json_t *root = json_loadb((const char *)out.data, out.len, 0, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(root);
  CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(root, "window_seconds")), 1.0, 1e-12);
  json_t *pts = json_object_get(root, "points");
  CU_ASSERT_EQUAL_FATAL(json_array_size(pts), PP_DASH_HISTORY);
  for (size_t k = 0; k < PP_DASH_HISTORY; k++) {
    json_t *p = json_array_get(pts, k);
    uint64_t tick = n - PP_DASH_HISTORY + 1 + k; /* oldest first, consecutive */
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(p, "id")), (json_int_t)tick);
    CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(p, "arrival_rate")), (double)tick,
                           1e-9);
    CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(p, "completion_rate")), 2.0 * tick,
                           1e-9);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(p, "shed")), (json_int_t)(10 * tick));
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(p, "timeouts")), (json_int_t)(tick / 2));
    CU_ASSERT_PTR_NOT_NULL(json_object_get(p, "p95_ms"));
  }
  json_decref(root);
  /* the stream's prelude: the history event, then the latest stats event, both with its id */
  out.len = 0;
  pp_dashboard_stream_prelude(&srv.ops, &out);
  pp_buf_append(&out, "", 1);
  const char *text = (const char *)out.data;
  char want[64];
  snprintf(want, sizeof want, "id: %u\nevent: history\ndata: {", n);
  const char *hist = strstr(text, want);
  snprintf(want, sizeof want, "id: %u\nevent: stats\ndata: {", n);
  const char *stats = strstr(text, want);
  CU_ASSERT_PTR_NOT_NULL(hist);
  CU_ASSERT_PTR_NOT_NULL(stats);
  CU_ASSERT(hist && stats && hist < stats);
  pp_buf_dispose(&out);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("dashboard", NULL, NULL);
  CU_add_test(s, "kept: the first, every action, every shed change", test_which_decisions_are_kept);
  CU_add_test(s, "a tick without a decision adds nothing",
              test_a_tick_without_a_decision_adds_nothing);
  CU_add_test(s, "the ring keeps the newest, /stats lists them newest first",
              test_ring_keeps_the_newest);
  CU_add_test(s, "the tick history: the newest ticks, oldest first, first in the stream",
              test_history_keeps_the_newest_ticks_with_their_figures);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failures = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}
