/* Tests for control/declog.c: encode -> decode -> encode is byte-identical for random
 * records, exact edge values survive, every truncated prefix of a valid line is rejected,
 * and each malformed field is reported by line and dotted name. */
#include "control/control.h"
#include "test_util.h"

#include <stdio.h>
#include <string.h>

static uint64_t any_u64(test_rng *r) {
  switch (rng_next(r) % 6) {
  case 0: return 0;
  case 1: return UINT64_MAX;
  case 2: return (uint64_t)INT64_MAX + rng_next(r) % 1000;
  case 3: return rng_next(r) % 1000;
  default: return rng_next(r);
  }
}

static int64_t any_i64(test_rng *r) {
  switch (rng_next(r) % 5) {
  case 0: return INT64_MIN;
  case 1: return PP_UNKNOWN_NS;
  case 2: return INT64_MAX;
  default: return (int64_t)rng_next(r);
  }
}

static uint32_t any_u32(test_rng *r) {
  return rng_next(r) % 4 == 0 ? UINT32_MAX : (uint32_t)(rng_next(r) % 5000);
}

static double any_double(test_rng *r) {
  switch (rng_next(r) % 8) {
  case 0: return 0.0;
  case 1: return -0.0;
  case 2: return 5e-324;
  case 3: return 1.7976931348623157e308;
  case 4: return 0.1;
  default: {
    double x;
    uint64_t bits;
    do {
      bits = rng_next(r);
      memcpy(&x, &bits, sizeof x);
    } while (!isfinite(x));
    return x;
  }
  }
}

static void any_text(test_rng *r, char *buf, size_t cap) {
  static const char alphabet[] = "abcXYZ 0123456789:;,.\"\\/\t\n\x01{}[]x";
  size_t n = rng_next(r) % cap;
  for (size_t i = 0; i < n; i++)
    buf[i] = alphabet[rng_next(r) % (sizeof alphabet - 1)];
  buf[n] = '\0';
}

static void any_state(test_rng *r, pp_ctl_state *s) {
  s->breach_ticks = any_u32(r);
  s->calm_ticks = any_u32(r);
  s->last_spawn_ns = any_i64(r);
  s->last_retire_ns = any_i64(r);
  s->last_thread_ns = any_i64(r);
  s->workers_wanted = any_u32(r);
  s->threads_wanted = any_u32(r);
  s->shedding = (int)(rng_next(r) % 2);
  /* Version-2 fields: at their defaults half the time, so both line versions are covered. */
  int v2 = (int)(rng_next(r) % 2);
  s->standby_wanted = v2 ? any_u32(r) : 0;
  s->last_activate_ns = v2 ? any_i64(r) : INT64_MIN;
  /* Version-3 fields (slots): likewise at their defaults half the time. */
  int v3 = (int)(rng_next(r) % 2);
  s->last_slots_ns = v3 ? any_i64(r) : INT64_MIN;
  s->slots_from = v3 ? any_u32(r) : 0;
  s->slots_svc_before_ns = v3 ? any_u64(r) : 0;
  s->slots_ceiling = v3 ? any_u32(r) : 0;
  s->slots_base = v3 ? any_u32(r) : 0;
  s->svc_base_ns = v3 ? any_u64(r) : 0;
  /* Version-5 fields (a cut of configured slots): at their defaults two times in three. */
  int v5 = rng_next(r) % 3 == 0;
  s->slots_cut_from = v5 ? any_u32(r) : 0;
  s->slots_floor = v5 ? any_u32(r) : 0;
  s->slots_cut_share = v5 ? any_double(r) : 0;
}

static void any_record(test_rng *r, pp_declog_record *rec) {
  memset(rec, 0, sizeof *rec);
  rec->tick = any_u64(r);
  rec->time_ns = any_i64(r);
  rec->policy_hash = rng_next(r);
  any_text(r, rec->source, sizeof rec->source);
  pp_observation *o = &rec->obs;
  o->tick = any_u64(r);
  o->time_ns = any_i64(r);
  o->window_ns = any_u64(r);
  o->queue_p50_ns = any_u64(r);
  o->queue_p95_ns = any_u64(r);
  o->queue_p99_ns = any_u64(r);
  o->queue_max_ns = any_u64(r);
  o->queue_count = any_u64(r);
  o->queue_len = any_u32(r);
  o->slots_ready = any_u32(r);
  o->slots_busy = any_u32(r);
  o->workers_ready = any_u32(r);
  o->workers_booting = any_u32(r);
  o->workers_retiring = any_u32(r);
  o->threads_per_worker = any_u32(r);
  o->arrivals = any_u64(r);
  o->completions = any_u64(r);
  o->arrival_rate = any_double(r);
  o->service_mean_ns = any_u64(r);
  o->service_p95_ns = any_u64(r);
  o->service_cpu_mean_ns = any_i64(r);
  o->gvl_wait_ns = any_i64(r);
  o->mem_per_worker_bytes = any_i64(r);
  o->shed = any_u64(r);
  o->timeouts = any_u64(r);
  if (rng_next(r) % 2) {
    o->workers_standby = any_u32(r);
    o->workers_standby_booting = any_u32(r);
  }
  o->cpu_share_mean = o->cpu_share_max = -1;
  o->cpu_per_request_ns = -1;
  if (rng_next(r) % 2) {
    o->cpu_share_mean = any_double(r);
    o->cpu_share_max = any_double(r);
    o->cpu_workers = any_u32(r);
    o->cpu_per_request_ns = any_i64(r);
  }
  if (rng_next(r) % 3 == 0) o->ractor_cores = any_u32(r); /* v4 */
  any_state(r, &rec->state_before);
  any_state(r, &rec->state_after);
  pp_decision *d = &rec->decision;
  d->action = (pp_action)(rng_next(r) % 6);
  d->count = any_u32(r);
  d->workers_target = any_u32(r);
  d->predicted_wait_ns = any_u64(r);
  d->rho = any_double(r);
  d->shed = (int)(rng_next(r) % 2);
  d->shed_budget_ns = any_u64(r);
  any_text(r, d->reason, sizeof d->reason);
  if (rng_next(r) % 2) {
    d->activate = any_u32(r);
    d->standby_spawn = any_u32(r);
  }
}

static char line1[PP_DECLOG_LINE_MAX], line2[PP_DECLOG_LINE_MAX];

static void test_random_round_trip(void) {
  test_rng r = {2024};
  int failures = 0;
  for (int i = 0; i < 1500; i++) {
    pp_declog_record a, b;
    any_record(&r, &a);
    int n1 = pp_declog_encode(&a, line1, sizeof line1);
    CU_ASSERT_FATAL(n1 > 0);
    CU_ASSERT_EQUAL(line1[n1 - 1], '\n');
    CU_ASSERT_PTR_NULL(memchr(line1, '\n', (size_t)n1 - 1)); /* one line */
    pp_declog_error e;
    int rc = pp_declog_decode(&b, line1, (size_t)n1, i + 1, &e);
    if (rc != 0) {
      fprintf(stderr, "decode %d: %s: %s\n%s", i, e.field, e.message, line1);
      failures++;
      continue;
    }
    int n2 = pp_declog_encode(&b, line2, sizeof line2);
    if (n1 != n2 || memcmp(line1, line2, (size_t)n1) != 0) failures++;
    /* Bits, not just text: the doubles and the big unsigned values. */
    if (memcmp(&a.obs.arrival_rate, &b.obs.arrival_rate, sizeof(double)) != 0 ||
        memcmp(&a.decision.rho, &b.decision.rho, sizeof(double)) != 0 ||
        a.policy_hash != b.policy_hash ||
        a.decision.predicted_wait_ns != b.decision.predicted_wait_ns ||
        a.obs.queue_max_ns != b.obs.queue_max_ns ||
        a.state_after.last_spawn_ns != b.state_after.last_spawn_ns ||
        strcmp(a.decision.reason, b.decision.reason) != 0 || strcmp(a.source, b.source) != 0 ||
        memcmp(&a.obs, &b.obs, sizeof a.obs) != 0 ||
        memcmp(&a.state_before, &b.state_before, sizeof a.state_before) != 0 ||
        memcmp(&a.state_after, &b.state_after, sizeof a.state_after) != 0 ||
        a.decision.activate != b.decision.activate ||
        a.decision.standby_spawn != b.decision.standby_spawn)
      failures++;
  }
  CU_ASSERT_EQUAL(failures, 0);
}

static pp_declog_record sample_record(void) {
  pp_declog_record rec;
  memset(&rec, 0, sizeof rec);
  rec.tick = 3;
  rec.time_ns = 3000000000;
  rec.policy_hash = 0x0123456789abcdefull;
  strcpy(rec.source, "sim");
  rec.obs.tick = 3;
  rec.obs.time_ns = 3000000000;
  rec.obs.window_ns = 1000000000;
  rec.obs.queue_p95_ns = 503000000;
  rec.obs.arrival_rate = 700.25;
  rec.obs.gvl_wait_ns = PP_UNKNOWN_NS;
  rec.obs.service_cpu_mean_ns = PP_UNKNOWN_NS;
  rec.obs.mem_per_worker_bytes = -1;
  rec.obs.cpu_share_mean = rec.obs.cpu_share_max = -1; /* unknown, as the builder writes it */
  rec.obs.cpu_per_request_ns = -1;
  rec.obs.slots_ready = 5;
  rec.obs.workers_ready = 1;
  rec.obs.threads_per_worker = 5;
  rec.state_before.last_spawn_ns = INT64_MIN;
  rec.state_before.last_retire_ns = INT64_MIN;
  rec.state_before.last_thread_ns = INT64_MIN;
  rec.state_before.last_activate_ns = INT64_MIN;
  rec.state_before.last_slots_ns = INT64_MIN;
  rec.state_before.workers_wanted = 1;
  rec.state_before.threads_wanted = 5;
  rec.state_after = rec.state_before;
  rec.state_after.workers_wanted = 3;
  rec.state_after.last_spawn_ns = 3000000000;
  rec.decision.action = PP_ACTION_SPAWN_WORKER;
  rec.decision.count = 2;
  rec.decision.workers_target = 3;
  rec.decision.predicted_wait_ns = UINT64_MAX;
  rec.decision.rho = 0.92;
  rec.decision.shed_budget_ns = 10000000000ull;
  strcpy(rec.decision.reason, "spawn_worker x2: queue p95 503ms over target 50ms for 1 tick");
  return rec;
}

static void test_format_and_order(void) {
  pp_declog_record rec = sample_record();
  int n = pp_declog_encode(&rec, line1, sizeof line1);
  CU_ASSERT_FATAL(n > 0);
  CU_ASSERT_NSTRING_EQUAL(
      line1,
      "{\"v\":1,\"tick\":3,\"time_ns\":3000000000,"
      "\"policy_hash\":\"0123456789abcdef\",\"source\":\"sim\",\"obs\":{\"tick\":3,",
      100);
  CU_ASSERT_PTR_NOT_NULL(strstr(line1, "\"arrival_rate\":700.25,"));
  CU_ASSERT_PTR_NOT_NULL(strstr(line1, "\"gvl_wait_ns\":-1,"));
  CU_ASSERT_PTR_NOT_NULL(strstr(line1, "\"predicted_wait_ns\":\"18446744073709551615\""));
  CU_ASSERT_PTR_NOT_NULL(strstr(line1, "\"last_spawn_ns\":-9223372036854775808"));
  CU_ASSERT_PTR_NOT_NULL(strstr(line1, "\"action\":\"spawn_worker\",\"count\":2"));
  CU_ASSERT_PTR_NOT_NULL(strstr(line1, "\"shed\":false"));
  const char *obs = strstr(line1, "\"obs\""), *sb = strstr(line1, "\"state_before\""),
             *dec = strstr(line1, "\"decision\""), *sa = strstr(line1, "\"state_after\"");
  CU_ASSERT(obs && sb && dec && sa && obs < sb && sb < dec && dec < sa);
  /* No spaces outside strings: compact. */
  CU_ASSERT_PTR_NULL(strstr(line1, "\": "));
  /* ENOSPC when the buffer is short, never a partial line. */
  char small[64];
  CU_ASSERT_EQUAL(pp_declog_encode(&rec, small, sizeof small), PP_CTL_ENOSPC);
  CU_ASSERT_EQUAL(pp_declog_encode(&rec, line2, (size_t)n + 1), n);
  CU_ASSERT_EQUAL(pp_declog_encode(&rec, line2, (size_t)n), PP_CTL_ENOSPC);
  /* Unencodable: a non-finite double, an invalid action, invalid UTF-8. */
  pp_declog_record bad = rec;
  bad.decision.rho = NAN;
  CU_ASSERT_EQUAL(pp_declog_encode(&bad, line2, sizeof line2), PP_CTL_EINVAL);
  bad = rec;
  bad.decision.action = (pp_action)9;
  CU_ASSERT_EQUAL(pp_declog_encode(&bad, line2, sizeof line2), PP_CTL_EINVAL);
  bad = rec;
  strcpy(bad.decision.reason, "\xff\xfe");
  CU_ASSERT_EQUAL(pp_declog_encode(&bad, line2, sizeof line2), PP_CTL_EINVAL);
}

static void test_truncated_prefixes(void) {
  test_rng r = {99};
  for (int k = 0; k < 8; k++) {
    pp_declog_record rec;
    if (k == 0)
      rec = sample_record();
    else
      any_record(&r, &rec);
    int n = pp_declog_encode(&rec, line1, sizeof line1);
    CU_ASSERT_FATAL(n > 1);
    int rejected = 0, total = 0;
    for (int len = 0; len < n - 1; len++) { /* n-1 is the whole JSON text without '\n' */
      pp_declog_record out;
      pp_declog_error e;
      memcpy(line2, line1, (size_t)len); /* exact-size copy: ASan sees any overread */
      total++;
      int rc = pp_declog_decode(&out, line2, (size_t)len, 42, &e);
      if (rc == PP_CTL_EPARSE && e.line == 42 && e.message[0]) rejected++;
    }
    CU_ASSERT_EQUAL(rejected, total);
    pp_declog_record out;
    CU_ASSERT_EQUAL(pp_declog_decode(&out, line1, (size_t)n - 1, 1, NULL), 0);
  }
}

/* Replace the first occurrence of `from` by `to` in line1 into line2. */
static void edit(const char *from, const char *to) {
  const char *p = strstr(line1, from);
  CU_ASSERT_PTR_NOT_NULL_FATAL(p);
  size_t pre = (size_t)(p - line1);
  snprintf(line2, sizeof line2, "%.*s%s%s", (int)pre, line1, to, p + strlen(from));
}

static void test_field_errors(void) {
  static const struct {
    const char *from, *to, *field, *message_part;
  } cases[] = {
      {"\"queue_p95_ns\":503000000,", "", "obs.queue_p95_ns", "missing"},
      {"\"queue_p95_ns\":503000000", "\"queue_p95_ns\":\"503ms\"", "obs.queue_p95_ns", "integer"},
      {"\"queue_p95_ns\":503000000", "\"queue_p95_ns\":-5", "obs.queue_p95_ns", "negative"},
      {"\"queue_p95_ns\":503000000", "\"queue_p95_ns\":\"5\"", "obs.queue_p95_ns", "2^63"},
      {"\"queue_p95_ns\":503000000", "\"queue_p95_ns\":\"99999999999999999999\"",
       "obs.queue_p95_ns", "range"},
      {"\"queue_p95_ns\":503000000", "\"queue_p95_ns\":1.5", "obs.queue_p95_ns", "integer"},
      {"\"slots_ready\":5", "\"slots_ready\":4294967296", "obs.slots_ready", "between"},
      {"\"arrival_rate\":700.25", "\"arrival_rate\":\"fast\"", "obs.arrival_rate", "number"},
      {"\"shed\":false", "\"shed\":0", "decision.shed", "true or false"},
      {"\"action\":\"spawn_worker\"", "\"action\":\"explode\"", "decision.action", "spawn_worker"},
      {"\"reason\":\"", "\"reason\":7,\"x\":\"", "decision.reason", "string"},
      {"\"workers_wanted\":1", "\"workers_wanted\":true", "state_before.workers_wanted", "integer"},
      {"\"policy_hash\":\"0123456789abcdef\"", "\"policy_hash\":\"0123456789ABCDEF\"",
       "policy_hash", "hex"},
      {"\"policy_hash\":\"0123456789abcdef\"", "\"policy_hash\":81985529216486895", "policy_hash",
       "hex"},
      {"\"source\":\"sim\"", "\"source\":\"a-very-long-source-name\"", "source", "at most"},
      {"\"v\":1", "\"v\":6", "v", "version"}, /* 5 is known since slots_cut_from */
      {"\"v\":1", "\"v\":0", "v", "version"},
      /* A version-1 line has none of the version-2 fields, and they are not optional in v2. */
      {"\"timeouts\":0", "\"timeouts\":0,\"workers_standby\":2", "obs.workers_standby",
       "version 1"},
      {"\"v\":1", "\"v\":2", "obs.workers_standby", "missing"},
      {"\"tick\":3,\"time_ns\"", "\"tick\":-3,\"time_ns\"", "tick", "negative"},
      {"\"time_ns\":3000000000,\"policy", "\"time_ns\":null,\"policy", "time_ns", "integer"},
      {"\"obs\":{", "\"obs\":7,\"o\":{", "obs", "object"},
      {"\"tick\":3,", "\"tick\":3,\"extra\":1,", "extra", "unknown"},
      {"\"calm_ticks\":0,", "\"calm_ticks\":0,\"mood\":1,", "state_before.mood", "unknown"},
      {"{\"v\":1,", "{\"v\":1,\"v\":1,", "", "duplicate"},
      {"\"state_after\"", "\"state_later\"", "state_after", "missing"},
  };
  pp_declog_record rec = sample_record();
  CU_ASSERT_FATAL(pp_declog_encode(&rec, line1, sizeof line1) > 0);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    edit(cases[i].from, cases[i].to);
    pp_declog_record out;
    pp_declog_error e;
    int rc = pp_declog_decode(&out, line2, strlen(line2), 17, &e);
    int ok = rc == PP_CTL_EPARSE && e.line == 17 && strcmp(e.field, cases[i].field) == 0 &&
             strstr(e.message, cases[i].message_part) != NULL;
    if (!ok) fprintf(stderr, "case %zu: rc %d field '%s': %s\n", i, rc, e.field, e.message);
    CU_ASSERT(ok);
  }
  /* Too long a reason. */
  char big[600];
  memset(big, 'x', 300);
  big[300] = '\0';
  char to[640];
  snprintf(to, sizeof to, "\"reason\":\"%s", big);
  edit("\"reason\":\"", to);
  pp_declog_record out;
  pp_declog_error e;
  CU_ASSERT_EQUAL(pp_declog_decode(&out, line2, strlen(line2), 5, &e), PP_CTL_EPARSE);
  CU_ASSERT_STRING_EQUAL(e.field, "decision.reason");
  /* Not JSON, not an object, empty, NULL. */
  CU_ASSERT_EQUAL(pp_declog_decode(&out, "[1,2]", 5, 1, &e), PP_CTL_EPARSE);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "object"));
  CU_ASSERT_EQUAL(pp_declog_decode(&out, "hello", 5, 1, &e), PP_CTL_EPARSE);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "invalid JSON"));
  CU_ASSERT_EQUAL(pp_declog_decode(&out, "\n", 1, 9, &e), PP_CTL_EPARSE);
  CU_ASSERT_EQUAL(e.line, 9);
  CU_ASSERT_EQUAL(pp_declog_decode(&out, NULL, 0, 9, &e), PP_CTL_EPARSE);
  CU_ASSERT_EQUAL(pp_declog_decode(NULL, line1, strlen(line1), 9, NULL), PP_CTL_EPARSE);
  /* Trailing garbage after the object. */
  snprintf(line2, sizeof line2, "%.*s x\n", (int)strlen(line1) - 1, line1);
  CU_ASSERT_EQUAL(pp_declog_decode(&out, line2, strlen(line2), 1, &e), PP_CTL_EPARSE);
}

/* Version-2 lines: a record with standby fields set is written as v2 with every
 * new key, reads back to the same record and bytes; a record without is v1, byte for byte the
 * old format; each v2 key is required in v2 and refused in v1. */
static void test_version_2(void) {
  pp_declog_record rec = sample_record();
  int n = pp_declog_encode(&rec, line1, sizeof line1);
  CU_ASSERT_FATAL(n > 0);
  static const char *const v2_keys[] = {"\"workers_standby\"", "\"workers_standby_booting\"",
                                        "\"standby_wanted\"",  "\"last_activate_ns\"",
                                        "\"activate\"",        "\"standby_spawn\""};
  for (size_t i = 0; i < sizeof v2_keys / sizeof v2_keys[0]; i++)
    CU_ASSERT_PTR_NULL(strstr(line1, v2_keys[i]));

  rec.obs.workers_standby = 1;
  rec.obs.workers_standby_booting = 1;
  rec.decision.activate = 1;
  rec.decision.standby_spawn = 1;
  rec.state_after.standby_wanted = 2;
  rec.state_after.last_activate_ns = 3000000000;
  n = pp_declog_encode(&rec, line1, sizeof line1);
  CU_ASSERT_FATAL(n > 0);
  CU_ASSERT_NSTRING_EQUAL(line1, "{\"v\":2,", 7);
  for (size_t i = 0; i < sizeof v2_keys / sizeof v2_keys[0]; i++)
    CU_ASSERT_PTR_NOT_NULL(strstr(line1, v2_keys[i]));
  CU_ASSERT_PTR_NOT_NULL(strstr(line1, "\"activate\":1,\"standby_spawn\":1}"));
  CU_ASSERT_PTR_NOT_NULL(strstr(line1, "\"last_activate_ns\":-9223372036854775808"));
  pp_declog_record back;
  pp_declog_error e;
  CU_ASSERT_EQUAL_FATAL(pp_declog_decode(&back, line1, (size_t)n, 1, &e), 0);
  CU_ASSERT_EQUAL(back.decision.activate, 1);
  CU_ASSERT_EQUAL(back.decision.standby_spawn, 1);
  CU_ASSERT_EQUAL(memcmp(&back.state_after, &rec.state_after, sizeof rec.state_after), 0);
  CU_ASSERT_EQUAL(memcmp(&back.obs, &rec.obs, sizeof rec.obs), 0);
  CU_ASSERT_EQUAL(pp_declog_encode(&back, line2, sizeof line2), n);
  CU_ASSERT_STRING_EQUAL(line1, line2);
  /* One set field is enough for v2; every key is then required. */
  pp_declog_record one = sample_record();
  one.state_after.last_activate_ns = 5;
  CU_ASSERT_FATAL(pp_declog_encode(&one, line2, sizeof line2) > 0);
  CU_ASSERT_NSTRING_EQUAL(line2, "{\"v\":2,", 7);
  static const struct {
    const char *from, *to, *field;
  } missing[] = {
      {"\"workers_standby\":1,", "", "obs.workers_standby"},
      {"\"standby_wanted\":0,", "", "state_before.standby_wanted"},
      {",\"activate\":1", "", "decision.activate"},
      {",\"standby_spawn\":1", "", "decision.standby_spawn"},
      {"\"activate\":1", "\"activate\":-1", "decision.activate"},
      {"\"v\":2", "\"v\":1", "obs.workers_standby"},
  };
  for (size_t i = 0; i < sizeof missing / sizeof missing[0]; i++) {
    edit(missing[i].from, missing[i].to);
    int rc = pp_declog_decode(&back, line2, strlen(line2), 8, &e);
    int ok = rc == PP_CTL_EPARSE && e.line == 8 && strcmp(e.field, missing[i].field) == 0;
    if (!ok) fprintf(stderr, "v2 case %zu: rc %d field '%s': %s\n", i, rc, e.field, e.message);
    CU_ASSERT(ok);
  }
}

/* Version-3 lines: the concurrency signal and the slot state. A record without them is still
 * v1 (or v2); with any of them, v3 with every key; absent in an older line, the CPU fields read
 * as unknown (-1), never 0; a set_slots action forces v3. */
static void test_version_3(void) {
  static const char *const v3_keys[] = {"\"cpu_share_mean\"",      "\"cpu_share_max\"",
                                        "\"cpu_workers\"",         "\"cpu_per_request_ns\"",
                                        "\"last_slots_ns\"",       "\"slots_from\"",
                                        "\"slots_svc_before_ns\"", "\"slots_ceiling\"",
                                        "\"slots_base\"",          "\"svc_base_ns\""};
  pp_declog_record rec = sample_record();
  int n = pp_declog_encode(&rec, line1, sizeof line1);
  CU_ASSERT_FATAL(n > 0);
  CU_ASSERT_NSTRING_EQUAL(line1, "{\"v\":1,", 7);
  for (size_t i = 0; i < sizeof v3_keys / sizeof v3_keys[0]; i++)
    CU_ASSERT_PTR_NULL(strstr(line1, v3_keys[i]));
  /* A v1 line reads the CPU fields as unknown. */
  pp_declog_record back;
  pp_declog_error e;
  CU_ASSERT_EQUAL_FATAL(pp_declog_decode(&back, line1, (size_t)n, 1, &e), 0);
  CU_ASSERT_EQUAL(back.obs.cpu_share_mean, -1.0);
  CU_ASSERT_EQUAL(back.obs.cpu_share_max, -1.0);
  CU_ASSERT_EQUAL(back.obs.cpu_workers, 0);
  CU_ASSERT_EQUAL(back.obs.cpu_per_request_ns, -1);
  CU_ASSERT_EQUAL(back.state_after.last_slots_ns, INT64_MIN);

  rec.obs.cpu_share_mean = 0.08;
  rec.obs.cpu_share_max = 0.0; /* a measured 0 is written, and stays 0 */
  rec.obs.cpu_workers = 2;
  rec.obs.cpu_per_request_ns = 400000;
  rec.decision.action = PP_ACTION_SET_SLOTS;
  rec.decision.count = 40;
  rec.state_after.last_slots_ns = 3000000000;
  rec.state_after.slots_from = 5;
  rec.state_after.slots_base = 5;
  rec.state_after.slots_svc_before_ns = 500000000;
  n = pp_declog_encode(&rec, line1, sizeof line1);
  CU_ASSERT_FATAL(n > 0);
  CU_ASSERT_NSTRING_EQUAL(line1, "{\"v\":3,", 7);
  for (size_t i = 0; i < sizeof v3_keys / sizeof v3_keys[0]; i++)
    CU_ASSERT_PTR_NOT_NULL(strstr(line1, v3_keys[i]));
  CU_ASSERT_PTR_NOT_NULL(strstr(line1, "\"action\":\"set_slots\",\"count\":40,"));
  CU_ASSERT_PTR_NOT_NULL(strstr(line1, "\"workers_standby\":0,")); /* v3 holds v2's keys */
  CU_ASSERT_EQUAL_FATAL(pp_declog_decode(&back, line1, (size_t)n, 1, &e), 0);
  CU_ASSERT_EQUAL(memcmp(&back.obs, &rec.obs, sizeof rec.obs), 0);
  CU_ASSERT_EQUAL(memcmp(&back.state_after, &rec.state_after, sizeof rec.state_after), 0);
  CU_ASSERT_EQUAL(back.decision.action, PP_ACTION_SET_SLOTS);
  CU_ASSERT_EQUAL(pp_declog_encode(&back, line2, sizeof line2), n);
  CU_ASSERT_STRING_EQUAL(line1, line2);
  /* set_slots alone forces v3; the v3 keys are required in v3 and refused in v2. */
  pp_declog_record one = sample_record();
  one.decision.action = PP_ACTION_SET_SLOTS;
  CU_ASSERT_FATAL(pp_declog_encode(&one, line1, sizeof line1) > 0);
  CU_ASSERT_NSTRING_EQUAL(line1, "{\"v\":3,", 7);
  CU_ASSERT_PTR_NOT_NULL(strstr(line1, "\"cpu_share_mean\":-1"));
  edit("\"cpu_workers\":0,", "");
  CU_ASSERT_EQUAL(pp_declog_decode(&back, line2, strlen(line2), 4, &e), PP_CTL_EPARSE);
  CU_ASSERT_STRING_EQUAL(e.field, "obs.cpu_workers");
  edit("\"v\":3", "\"v\":2");
  CU_ASSERT_EQUAL(pp_declog_decode(&back, line2, strlen(line2), 4, &e), PP_CTL_EPARSE);
  CU_ASSERT_STRING_EQUAL(e.field, "obs.cpu_share_mean");
  edit("\"v\":3", "\"v\":6");
  CU_ASSERT_EQUAL(pp_declog_decode(&back, line2, strlen(line2), 4, &e), PP_CTL_EPARSE);
  CU_ASSERT_STRING_EQUAL(e.field, "v");
}

/* Version 4: obs.ractor_cores (Ractor slots). Written only when not 0, after v3's keys; a v3
 * line reads it as 0 and refuses it; a v4 line requires it. */
static void test_version_4(void) {
  pp_declog_record rec = sample_record();
  int n = pp_declog_encode(&rec, line1, sizeof line1);
  CU_ASSERT_FATAL(n > 0);
  CU_ASSERT_PTR_NULL(strstr(line1, "ractor_cores")); /* threads: as before, byte for byte */
  rec.obs.cpu_share_mean = rec.obs.cpu_share_max = 0.9;
  rec.obs.cpu_workers = 1;
  rec.obs.cpu_per_request_ns = 17000000;
  rec.obs.ractor_cores = 2;
  n = pp_declog_encode(&rec, line1, sizeof line1);
  CU_ASSERT_FATAL(n > 0);
  CU_ASSERT_NSTRING_EQUAL(line1, "{\"v\":4,", 7);
  CU_ASSERT_PTR_NOT_NULL(strstr(line1, "\"cpu_per_request_ns\":17000000,\"ractor_cores\":2}"));
  pp_declog_record back;
  pp_declog_error e;
  CU_ASSERT_EQUAL_FATAL(pp_declog_decode(&back, line1, (size_t)n, 1, &e), 0);
  CU_ASSERT_EQUAL(back.obs.ractor_cores, 2);
  CU_ASSERT_EQUAL(pp_declog_encode(&back, line2, sizeof line2), n);
  CU_ASSERT_STRING_EQUAL(line1, line2);
  edit(",\"ractor_cores\":2", "");
  CU_ASSERT_EQUAL(pp_declog_decode(&back, line2, strlen(line2), 4, &e), PP_CTL_EPARSE);
  CU_ASSERT_STRING_EQUAL(e.field, "obs.ractor_cores");
  edit("\"v\":4", "\"v\":3");
  CU_ASSERT_EQUAL(pp_declog_decode(&back, line2, strlen(line2), 4, &e), PP_CTL_EPARSE);
  CU_ASSERT_STRING_EQUAL(e.field, "obs.ractor_cores");
  /* at 0 it is not written: the line falls back to v3 */
  rec.obs.ractor_cores = 0;
  CU_ASSERT_FATAL(pp_declog_encode(&rec, line1, sizeof line1) > 0);
  CU_ASSERT_NSTRING_EQUAL(line1, "{\"v\":3,", 7);
}

/* Version 5: state.slots_cut_from and state.slots_floor (a cut of configured slots on a
 * GVL-bound worker). Written only when not 0; a v4 line reads them as 0 and refuses them; a
 * v5 line requires them. */
static void test_version_5(void) {
  pp_declog_record rec = sample_record();
  int n = pp_declog_encode(&rec, line1, sizeof line1);
  CU_ASSERT_FATAL(n > 0);
  CU_ASSERT_PTR_NULL(strstr(line1, "slots_cut_from")); /* no cut: as before, byte for byte */
  rec.state_after.slots_cut_from = 5;
  rec.state_after.slots_floor = 3;
  n = pp_declog_encode(&rec, line1, sizeof line1);
  CU_ASSERT_FATAL(n > 0);
  CU_ASSERT_NSTRING_EQUAL(line1, "{\"v\":5,", 7);
  CU_ASSERT_PTR_NOT_NULL(
      strstr(line1, "\"slots_cut_from\":5,\"slots_floor\":3,\"slots_cut_share\":0.0}"));
  pp_declog_record back;
  pp_declog_error e;
  CU_ASSERT_EQUAL_FATAL(pp_declog_decode(&back, line1, (size_t)n, 1, &e), 0);
  CU_ASSERT_EQUAL(back.state_after.slots_cut_from, 5);
  CU_ASSERT_EQUAL(back.state_after.slots_floor, 3);
  CU_ASSERT_EQUAL(back.state_before.slots_cut_from, 0); /* written as 0 in a v5 line */
  CU_ASSERT_EQUAL(pp_declog_encode(&back, line2, sizeof line2), n);
  CU_ASSERT_STRING_EQUAL(line1, line2);
  edit(",\"slots_floor\":3", "");
  CU_ASSERT_EQUAL(pp_declog_decode(&back, line2, strlen(line2), 4, &e), PP_CTL_EPARSE);
  CU_ASSERT_STRING_EQUAL(e.field, "state_after.slots_floor");
  edit("\"v\":5", "\"v\":4");
  CU_ASSERT_EQUAL(pp_declog_decode(&back, line2, strlen(line2), 4, &e), PP_CTL_EPARSE);
  CU_ASSERT_STRING_EQUAL(e.field, "state_before.slots_cut_from");
  rec.state_after.slots_cut_from = rec.state_after.slots_floor = 0;
  CU_ASSERT_FATAL(pp_declog_encode(&rec, line1, sizeof line1) > 0);
  CU_ASSERT_NSTRING_EQUAL(line1, "{\"v\":1,", 7);
}

static void test_header_lines(void) {
  pp_policy p, back;
  pp_policy_defaults(&p);
  p.max_workers = 12;
  p.target_queue_p95_ns = 25000000;
  pp_declog_header h, h2;
  CU_ASSERT_EQUAL_FATAL(pp_declog_header_init(&h, &p, "server"), 0);
  CU_ASSERT_EQUAL(h.policy_hash, pp_policy_hash(&p));
  int n = pp_declog_encode_header(&h, line1, sizeof line1);
  CU_ASSERT_FATAL(n > 0);
  CU_ASSERT_NSTRING_EQUAL(line1, "{\"v\":1,\"type\":\"header\",\"source\":\"server\",", 40);
  CU_ASSERT_EQUAL(pp_declog_line_kind(line1, (size_t)n), PP_DECLOG_KIND_HEADER);
  pp_declog_error e;
  CU_ASSERT_EQUAL_FATAL(pp_declog_decode_header(&h2, &back, line1, (size_t)n, 1, &e), 0);
  CU_ASSERT_EQUAL(memcmp(&p, &back, sizeof p), 0);
  CU_ASSERT_EQUAL(h2.policy_hash, h.policy_hash);
  CU_ASSERT_STRING_EQUAL(h2.policy, h.policy);
  CU_ASSERT_EQUAL(pp_declog_encode_header(&h2, line2, sizeof line2), n);
  CU_ASSERT_STRING_EQUAL(line1, line2);
  /* A tick decoder refuses a header and says what it is. */
  pp_declog_record rec;
  CU_ASSERT_EQUAL(pp_declog_decode(&rec, line1, (size_t)n, 1, &e), PP_CTL_EPARSE);
  CU_ASSERT_STRING_EQUAL(e.field, "type");
  /* Every truncated prefix is rejected. */
  int rejected = 0;
  for (int len = 0; len < n - 1; len++) {
    memcpy(line2, line1, (size_t)len);
    rejected += pp_declog_decode_header(&h2, NULL, line2, (size_t)len, 3, &e) == PP_CTL_EPARSE &&
                e.line == 3;
  }
  CU_ASSERT_EQUAL(rejected, n - 1);
  /* A hash that does not match its text, an unparsable policy, an unknown key. */
  char wrong[17];
  snprintf(wrong, sizeof wrong, "%016llx", (unsigned long long)(h.policy_hash ^ 1));
  char right[17];
  snprintf(right, sizeof right, "%016llx", (unsigned long long)h.policy_hash);
  edit(right, wrong);
  CU_ASSERT_EQUAL(pp_declog_decode_header(&h2, NULL, line2, strlen(line2), 4, &e), PP_CTL_EPARSE);
  CU_ASSERT_STRING_EQUAL(e.field, "policy_hash");
  CU_ASSERT_PTR_NOT_NULL(strstr(e.message, wrong));
  edit("max_workers: 12", "max_workers: lots");
  CU_ASSERT_EQUAL(pp_declog_decode_header(&h2, NULL, line2, strlen(line2), 4, &e), PP_CTL_EPARSE);
  CU_ASSERT_STRING_EQUAL(e.field, "policy");
  CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "max_workers"));
  edit("\"type\":\"header\",", "\"type\":\"header\",\"extra\":2,");
  CU_ASSERT_EQUAL(pp_declog_decode_header(&h2, NULL, line2, strlen(line2), 4, &e), PP_CTL_EPARSE);
  CU_ASSERT_STRING_EQUAL(e.field, "extra");
  /* The slot kind: written last when not threads, read back, a bad one named. */
  {
    pp_declog_header hr = h;
    snprintf(hr.slots, sizeof hr.slots, "ractor");
    char lr[PP_DECLOG_LINE_MAX * 2];
    int nr = pp_declog_encode_header(&hr, lr, sizeof lr);
    CU_ASSERT_FATAL(nr > 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(lr, "\",\"slots\":\"ractor\"}"));
    CU_ASSERT_EQUAL(pp_declog_decode_header(&h2, NULL, lr, (size_t)nr, 5, &e), 0);
    CU_ASSERT_STRING_EQUAL(h2.slots, "ractor");
    char *at = strstr(lr, "\"ractor\"");
    CU_ASSERT_PTR_NOT_NULL_FATAL(at);
    memcpy(at + 1, "rocket", 6);
    CU_ASSERT_EQUAL(pp_declog_decode_header(&h2, NULL, lr, (size_t)nr, 5, &e), PP_CTL_EPARSE);
    CU_ASSERT_STRING_EQUAL(e.field, "slots");
    CU_ASSERT_EQUAL(e.line, 5);
    CU_ASSERT_EQUAL(pp_declog_decode_header(&h2, NULL, line1, (size_t)n, 1, &e), 0);
    CU_ASSERT_STRING_EQUAL(h2.slots, ""); /* a log without the field: threads */
  }
  edit("\"type\":\"header\"", "\"type\":\"footer\"");
  CU_ASSERT_EQUAL(pp_declog_decode_header(&h2, NULL, line2, strlen(line2), 4, &e), PP_CTL_EPARSE);
  CU_ASSERT_STRING_EQUAL(e.field, "type");
  /* Kinds of other lines. */
  pp_declog_record r = sample_record();
  n = pp_declog_encode(&r, line1, sizeof line1);
  CU_ASSERT_EQUAL(pp_declog_line_kind(line1, (size_t)n), PP_DECLOG_KIND_TICK);
  CU_ASSERT_EQUAL(pp_declog_line_kind("{\"v\":1", 6), PP_CTL_EPARSE);
  CU_ASSERT_EQUAL(pp_declog_line_kind("[]", 2), PP_CTL_EPARSE);
}

int pp_test_register(void) {
  static const test_case cases[] = {
      {"random records round-trip byte-identically", test_random_round_trip},
      {"format, key order, exact edge values", test_format_and_order},
      {"every truncated prefix rejected", test_truncated_prefixes},
      {"field errors name line and field", test_field_errors},
      {"header lines carry the policy", test_header_lines},
      {"version 2: standby fields", test_version_2},
      {"version 3: concurrency signal and slot state", test_version_3},
      {"version 4: Ractor slots (obs.ractor_cores)", test_version_4},
      {"version 5: a cut of configured slots (state)", test_version_5},
      {NULL, NULL},
  };
  return register_suite("declog", cases);
}
