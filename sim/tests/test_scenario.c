/* Scenario parser: a full example, errors that name line and field (table-driven), every
 * truncated prefix of a valid scenario, traces, and every shipped scenario file. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/Basic.h>

#include "sim/scenario.h"
#include "sim/scenario_file.h"

static const char full[] = "name: demo\n"
                           "description: a demo\n"
                           "seed: 9\n"
                           "arrivals:\n"
                           "  process: poisson\n"
                           "  phases:\n"
                           "    - {rate: 60, duration: 30s}\n"
                           "    - {rate: 100, to: 300, duration: 1m}\n"
                           "requests:\n"
                           "  - path: /mix/5/20\n"
                           "    weight: 3\n"
                           "    cpu: 5ms\n"
                           "    io: {dist: exponential, mean: 20ms}\n"
                           "  - path: /hello\n"
                           "    cpu: {dist: lognormal, mean: 1ms, sd: 500us}\n"
                           "client: {timeout: 10s, slo: 100ms}\n"
                           "machine:\n"
                           "  cores: 2\n"
                           "  memory: {worker: 100MB, per_thread: 1MiB}\n"
                           "  gvl_timeslice: 50ms\n"
                           "  gvl_measured: false\n"
                           "  boot: {dist: uniform, min: 1s, max: 3s}\n"
                           "configs:\n"
                           "  - {name: p, server: puma, workers: 2, threads: 5}\n"
                           "  - name: a\n"
                           "    server: pumaplus\n"
                           "    workers: 1\n"
                           "    threads: 3\n"
                           "    autoscale: true\n"
                           "    policy:\n"
                           "      max_workers: 4\n"
                           "      spawn_cooldown: 2s\n"
                           "      shed: {enabled: true, budget: 5s}\n";

static void test_full(void) {
  pp_scenario s;
  pp_scn_error err;
  int rc = pp_scenario_parse(&s, full, strlen(full), "demo.yaml", &err);
  if (rc) printf("\n  %s:%d %s %s", err.file, err.line, err.field, err.message);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  CU_ASSERT_EQUAL(pp_scenario_validate(&s, &err), 0);
  CU_ASSERT_STRING_EQUAL(s.name, "demo");
  CU_ASSERT_EQUAL(s.seed, 9);
  CU_ASSERT_EQUAL(s.n_phases, 2);
  CU_ASSERT_EQUAL(s.phases[1].has_ramp, 1);
  CU_ASSERT_DOUBLE_EQUAL(s.phases[1].rate_end, 300, 1e-9);
  CU_ASSERT_EQUAL(s.duration_ns, 90000000000ull);
  CU_ASSERT_EQUAL(s.n_kinds, 2);
  CU_ASSERT_EQUAL(s.kinds[0].io.kind, PP_DIST_EXPONENTIAL);
  CU_ASSERT_EQUAL(s.kinds[1].cpu.sd_ns, 500000);
  CU_ASSERT_DOUBLE_EQUAL(s.kinds[1].weight, 1, 1e-9);
  CU_ASSERT_EQUAL(s.client_timeout_ns, 10000000000ull);
  CU_ASSERT_EQUAL(s.cores, 2);
  CU_ASSERT_EQUAL(s.mem_thread_bytes, 1048576);
  CU_ASSERT_EQUAL(s.gvl_measured, 0);
  CU_ASSERT_EQUAL(s.boot.kind, PP_DIST_UNIFORM);
  CU_ASSERT_EQUAL(s.n_configs, 2);
  CU_ASSERT_EQUAL(s.configs[0].queue, PP_QUEUE_PER_WORKER);
  CU_ASSERT_EQUAL(s.configs[1].queue, PP_QUEUE_FIFO);
  CU_ASSERT_EQUAL(s.configs[1].policy.max_workers, 4);
  CU_ASSERT_EQUAL(s.configs[1].policy.spawn_cooldown_ns, 2000000000ull);
  CU_ASSERT_EQUAL(s.configs[1].policy.shed_enabled, 1);
  CU_ASSERT_EQUAL(s.configs[1].policy.shed_budget_ns, 5000000000ull);
  pp_scenario_dispose(&s);
}

/* Replaces the first occurrence of `from` in the full example by `to`. */
static char *mutate(const char *from, const char *to) {
  const char *p = strstr(full, from);
  if (!p) return NULL;
  size_t n = strlen(full) - strlen(from) + strlen(to) + 1;
  char *out = malloc(n);
  size_t pre = (size_t)(p - full);
  memcpy(out, full, pre);
  strcpy(out + pre, to);
  strcat(out, p + strlen(from));
  return out;
}

static void test_errors(void) {
  static const struct {
    const char *from, *to;
    int line;
    const char *field;
  } cases[] = {
      {"seed: 9", "seed: nine", 3, "seed"},
      {"seed: 9", "sede: 9", 3, "sede"},
      {"process: poisson", "process: bursty", 5, "arrivals.process"},
      {"{rate: 60, duration: 30s}", "{rate: 60, duration: soon}", 7, "arrivals.phases[0].duration"},
      {"{rate: 60, duration: 30s}", "{rate: -5, duration: 30s}", 7, "arrivals.phases[0].rate"},
      {"{rate: 60, duration: 30s}", "{duration: 30s}", 7, "arrivals.phases[0]"},
      {"    cpu: 5ms\n", "    cpu: 5 parsecs\n", 12, "requests[0].cpu"},
      {"dist: exponential", "dist: pareto", 13, "requests[0].io.dist"},
      {"mean: 1ms, sd: 500us", "mean: 1ms", 15, "requests[1].cpu"},
      {"- path: /hello", "- path: hello", 14, "requests[1].path"},
      {"timeout: 10s", "timeout: 0s", 16, "client.timeout"},
      {"cores: 2", "cores: 0", 18, "machine.cores"},
      {"worker: 100MB", "worker: lots", 19, "machine.memory.worker"},
      {"per_thread: 1MiB}", "per_thread: 1MiB, shared: half}", 19, "machine.memory.shared"},
      {"per_thread: 1MiB}", "per_thread: 1MiB, standby: -3MB}", 19, "machine.memory.standby"},
      {"per_thread: 1MiB}", "per_thread: 1MiB, stanby: 3MB}", 19, "machine.memory.stanby"},
      {"  gvl_timeslice: 50ms\n", "  activation: {dist: gamma, mean: 5ms}\n", 20,
       "machine.activation.dist"},
      {"server: puma,", "server: unicorn,", 24, "configs[0].server"},
      {"threads: 5}", "threads: 5000}", 24, "configs[0].threads"},
      {"threads: 5}", "threads: 5, slots: ractors}", 24, "configs[0].slots"},
      {"per_thread: 1MiB}", "per_thread: 1MiB, per_ractor: big}", 19, "machine.memory.per_ractor"},
      {"  gvl_timeslice: 50ms\n", "  slot_delay_ractor: later\n", 20, "machine.slot_delay_ractor"},
      {"  gvl_timeslice: 50ms\n", "  background: -1\n", 20, "machine.background"},
      {"  gvl_timeslice: 50ms\n", "  background: busy\n", 20, "machine.background"},
      {"  gvl_timeslice: 50ms\n", "  overhead: -2ms\n", 20, "machine.overhead"},
      {"      max_workers: 4", "      max_wrkrs: 4", 31, "configs[1].policy.max_wrkrs"},
      {"      spawn_cooldown: 2s", "      spawn_cooldown: soon", 32,
       "configs[1].policy.spawn_cooldown"},
      {"    server: pumaplus\n", "    server: puma\n", 25, "configs[1]"},
      {"{name: p,", "{name: a,", 25, "configs[1]"},
      {"  - name: a\n", "  - nme: a\n", 25, "configs[1].nme"},
      {"requests:", "requests: 3\nx:", 9, "requests"},
      {"machine:\n", "machine: [\n", 19, ""}, /* libyaml notices one line later */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *text = mutate(cases[i].from, cases[i].to);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    pp_scenario s;
    pp_scn_error err;
    int rc = pp_scenario_parse(&s, text, strlen(text), "bad.yaml", &err);
    CU_ASSERT_NOT_EQUAL(rc, 0);
    if (rc) {
      CU_ASSERT_STRING_EQUAL(err.file, "bad.yaml");
      CU_ASSERT(err.message[0] != 0);
      if (cases[i].line > 1 && err.line != cases[i].line)
        printf("\n  case %zu: line %d, expected %d (%s)", i, err.line, cases[i].line, err.message);
      if (cases[i].line > 1) CU_ASSERT_EQUAL(err.line, cases[i].line);
      if (strcmp(err.field, cases[i].field) != 0 && cases[i].field[0])
        printf("\n  case %zu: field %s, expected %s (%s)", i, err.field, cases[i].field,
               err.message);
      if (cases[i].field[0]) CU_ASSERT_STRING_EQUAL(err.field, cases[i].field);
    }
    pp_scenario_dispose(&s);
    free(text);
  }
}

/* slots: ractor, with machine.memory.per_ractor and machine.slot_delay_ractor: parsed, and
 * their defaults (notebooks/ractors) when absent. */
static void test_ractor_fields(void) {
  pp_scenario s;
  pp_scn_error err;
  CU_ASSERT_EQUAL_FATAL(pp_scenario_parse(&s, full, strlen(full), "demo.yaml", &err), 0);
  CU_ASSERT_EQUAL(s.configs[0].ractors, 0);
  CU_ASSERT_EQUAL(s.mem_ractor_bytes, 2325000ull);
  CU_ASSERT_EQUAL(s.slot_delay_ractor_ns, 10300000ull);
  pp_scenario_dispose(&s);
  char *text = mutate("threads: 5}", "threads: 5, slots: ractor}");
  CU_ASSERT_PTR_NOT_NULL_FATAL(text);
  char *t2 = NULL;
  {
    const char *from = "  memory: {worker: 100MB, per_thread: 1MiB}\n";
    const char *to = "  memory: {worker: 100MB, per_thread: 1MiB, per_ractor: 3MB}\n"
                     "  slot_delay_ractor: 7ms\n";
    char *at = strstr(text, from);
    CU_ASSERT_PTR_NOT_NULL_FATAL(at);
    size_t n = strlen(text) - strlen(from) + strlen(to) + 1;
    t2 = malloc(n);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t2);
    snprintf(t2, n, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
  }
  CU_ASSERT_EQUAL_FATAL(pp_scenario_parse(&s, t2, strlen(t2), "demo.yaml", &err), 0);
  CU_ASSERT_EQUAL(s.configs[0].ractors, 1);
  CU_ASSERT_EQUAL(s.configs[0].fibers, 0);
  CU_ASSERT_EQUAL(s.configs[1].ractors, 0);
  CU_ASSERT_EQUAL(s.mem_ractor_bytes, 3000000ull);
  CU_ASSERT_EQUAL(s.slot_delay_ractor_ns, 7000000ull);
  pp_scenario_dispose(&s);
  free(t2);
  free(text);
  /* a bad kind names the file, the line and the field, and lists the kinds */
  text = mutate("threads: 5}", "threads: 5, slots: ractors}");
  CU_ASSERT_PTR_NOT_NULL_FATAL(text);
  CU_ASSERT_NOT_EQUAL(pp_scenario_parse(&s, text, strlen(text), "bad.yaml", &err), 0);
  CU_ASSERT_STRING_EQUAL(err.file, "bad.yaml");
  CU_ASSERT_EQUAL(err.line, 24);
  CU_ASSERT_STRING_EQUAL(err.field, "configs[0].slots");
  CU_ASSERT_PTR_NOT_NULL(strstr(err.message, "ractor)"));
  pp_scenario_dispose(&s);
  free(text);
}

/* The standby model's machine fields: parsed with their units, defaults when absent, and a
 * shared part larger than the worker refused by validation. */
static void test_standby_machine_fields(void) {
  pp_scenario s;
  pp_scn_error err;
  CU_ASSERT_EQUAL_FATAL(pp_scenario_parse(&s, full, strlen(full), "demo.yaml", &err), 0);
  CU_ASSERT_EQUAL(s.mem_shared_bytes, 0);
  CU_ASSERT_EQUAL(s.mem_standby_bytes, -1);
  CU_ASSERT_EQUAL(s.activation.kind, PP_DIST_LOGNORMAL);
  CU_ASSERT_EQUAL(s.activation.mean_ns, 10000000ull);
  pp_scenario_dispose(&s);
  char *text = mutate("  memory: {worker: 100MB, per_thread: 1MiB}\n",
                      "  memory: {worker: 100MB, per_thread: 1MiB, shared: 60MB, standby: 12MiB}\n"
                      "  activation: {dist: uniform, min: 2ms, max: 8ms}\n");
  CU_ASSERT_PTR_NOT_NULL_FATAL(text);
  CU_ASSERT_EQUAL_FATAL(pp_scenario_parse(&s, text, strlen(text), "demo.yaml", &err), 0);
  CU_ASSERT_EQUAL(pp_scenario_validate(&s, &err), 0);
  CU_ASSERT_EQUAL(s.mem_shared_bytes, 60000000ull);
  CU_ASSERT_EQUAL(s.mem_standby_bytes, 12 << 20);
  CU_ASSERT_EQUAL(s.activation.kind, PP_DIST_UNIFORM);
  CU_ASSERT_EQUAL(s.activation.max_ns, 8000000ull);
  pp_scenario_dispose(&s);
  free(text);
  text = mutate("  memory: {worker: 100MB, per_thread: 1MiB}\n",
                "  memory: {worker: 100MB, per_thread: 1MiB, shared: 101MB}\n");
  CU_ASSERT_PTR_NOT_NULL_FATAL(text);
  CU_ASSERT_EQUAL_FATAL(pp_scenario_parse(&s, text, strlen(text), "demo.yaml", &err), 0);
  CU_ASSERT_NOT_EQUAL(pp_scenario_validate(&s, &err), 0);
  CU_ASSERT_STRING_EQUAL(err.field, "machine.memory.shared");
  pp_scenario_dispose(&s);
  free(text);
}

/* Every prefix of a valid scenario parses or fails cleanly, never crashes. */
static void test_truncated_prefixes(void) {
  size_t n = strlen(full), ok = 0;
  for (size_t len = 0; len <= n; len++) {
    pp_scenario s;
    pp_scn_error err;
    int rc = pp_scenario_parse(&s, full, len, "cut.yaml", &err);
    if (rc == 0)
      ok++;
    else
      CU_ASSERT(err.message[0] != 0);
    pp_scenario_dispose(&s);
  }
  CU_ASSERT(ok >= 1); /* the whole text at least */
}

static void test_trace(void) {
  pp_scenario s;
  pp_scenario_defaults(&s);
  pp_scn_error err;
  const char *t = "# seconds\n0\n0.5\n\n0.5\n2.25\n";
  CU_ASSERT_EQUAL(pp_scenario_parse_trace(&s, t, strlen(t), "t.txt", &err), 0);
  CU_ASSERT_EQUAL(s.trace_len, 4);
  CU_ASSERT_EQUAL(s.trace_ns[3], 2250000000ll);
  CU_ASSERT_EQUAL(s.duration_ns, 3000000000ull);
  const char *bad = "0\n1\n0.5\n";
  CU_ASSERT_NOT_EQUAL(pp_scenario_parse_trace(&s, bad, strlen(bad), "t.txt", &err), 0);
  CU_ASSERT_EQUAL(err.line, 3);
  const char *bad2 = "0\nsoon\n";
  CU_ASSERT_NOT_EQUAL(pp_scenario_parse_trace(&s, bad2, strlen(bad2), "t.txt", &err), 0);
  CU_ASSERT_EQUAL(err.line, 2);
  pp_scenario_dispose(&s);
}

static void test_shipped_scenarios(void) {
  DIR *d = opendir(PP_SOURCE_DIR "/scenarios");
  CU_ASSERT_PTR_NOT_NULL_FATAL(d);
  struct dirent *e;
  int n = 0;
  while ((e = readdir(d))) {
    size_t l = strlen(e->d_name);
    if (l < 6 || strcmp(e->d_name + l - 5, ".yaml") != 0) continue;
    char path[1024];
    snprintf(path, sizeof path, "%s/scenarios/%s", PP_SOURCE_DIR, e->d_name);
    pp_scenario s;
    pp_scn_error err;
    int rc = pp_scenario_load(&s, path, &err);
    if (rc) {
      char buf[1200];
      printf("\n  %s", pp_scn_error_format(&err, buf, sizeof buf));
    }
    CU_ASSERT_EQUAL(rc, 0);
    pp_scenario_dispose(&s);
    n++;
  }
  closedir(d);
  CU_ASSERT(n >= 7);
}

static void test_missing_policy_file(void) {
  char *text = mutate("    policy:\n      max_workers: 4\n      spawn_cooldown: 2s\n      shed: "
                      "{enabled: true, budget: 5s}\n",
                      "    policy: policies/nope.yaml\n");
  CU_ASSERT_PTR_NOT_NULL_FATAL(text);
  pp_scenario s;
  pp_scn_error err;
  CU_ASSERT_EQUAL(pp_scenario_parse(&s, text, strlen(text), "x.yaml", &err), 0);
  CU_ASSERT_NOT_EQUAL(pp_scenario_validate(&s, &err), 0); /* not loaded yet */
  CU_ASSERT_NOT_EQUAL(pp_scenario_resolve(&s, "/nonexistent", "x.yaml", &err), 0);
  CU_ASSERT_EQUAL(err.line, 30);
  CU_ASSERT(strstr(err.message, "policies/nope.yaml") != NULL);
  pp_scenario_dispose(&s);
  free(text);
}

/* The admission fields of an inline policy: bad values name file, line and dotted field;
 * out-of-domain values (caught by pp_policy_validate after the walk) name the config, the
 * line of its policy and the dotted policy field in the message, as every validation error
 * of an inline policy does. */
static void test_policy_shed_errors(void) {
  static const char policy_block[] = "    policy:\n      max_workers: 4\n      spawn_cooldown: 2s\n"
                                     "      shed: {enabled: true, budget: 5s}\n";
  static const struct {
    const char *to;
    int line;
    const char *field, *message_part;
  } cases[] = {
      {"    policy:\n      shed: {enabled: true, rule: lifo}\n", 31, "configs[1].policy.shed.rule",
       "predicted, drain, codel"},
      {"    policy:\n      shed:\n        budget: whenever\n", 32, "configs[1].policy.shed.budget",
       "auto"},
      {"    policy:\n      shed.interval: 0s\n", 31, "configs[1]",
       "policy: shed.interval: must be greater than 0"},
      {"    policy:\n      shed: {client_timeout: 1s, slo: 3s}\n", 31, "configs[1]",
       "policy: shed.slo: must be less than shed.client_timeout"},
      /* standby (policy format 3) */
      {"    policy:\n      standby: lots\n", 31, "configs[1].policy.standby",
       "non-negative integer"},
      {"    policy:\n      max_workers: 4\n      standby: 99\n", 31, "configs[1]",
       "policy: standby: must be at most 64"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *text = mutate(policy_block, cases[i].to);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    pp_scenario s;
    pp_scn_error err;
    int rc = pp_scenario_parse(&s, text, strlen(text), "shed.yaml", &err);
    int ok = rc != 0 && strcmp(err.file, "shed.yaml") == 0 && err.line == cases[i].line &&
             strcmp(err.field, cases[i].field) == 0 &&
             strstr(err.message, cases[i].message_part) != NULL;
    if (!ok)
      printf("\n  case %zu: rc %d line %d field %s: %s", i, rc, err.line, err.field, err.message);
    CU_ASSERT(ok);
    pp_scenario_dispose(&s);
    free(text);
  }
}

/* Fuzz finding 3: `&p {x: *p}` is a mapping that contains itself (libyaml registers the anchor
 * when the mapping starts), and the inline-policy walk recursed into it until the stack
 * overflowed. Now a mapping below a policy section and a field set twice are errors naming
 * file, line and field, so neither a cycle nor an alias repeated many times can run away. */
static void test_policy_aliases_bounded(void) {
  static const char policy_block[] = "    policy:\n      max_workers: 4\n      spawn_cooldown: 2s\n"
                                     "      shed: {enabled: true, budget: 5s}\n";
  static const struct {
    const char *to;
    int line;
    const char *field, *message_part;
  } cases[] = {
      {"    policy: &p {x: *p}\n", 30, "configs[1].policy.x.x", "nest"},
      {"    policy: &p {shed: *p}\n", 30, "configs[1].policy.shed.shed", "nest"},
      {"    policy: &p {shed: {budget: 5s}, threads: *p}\n", 30, "configs[1].policy.threads.shed",
       "nest"},
      {"    policy: {threads: {a: {b: 1}}}\n", 30, "configs[1].policy.threads.a", "nest"},
      {"    policy:\n      max_workers: 4\n      max_workers: 5\n", 32,
       "configs[1].policy.max_workers", "set twice (first on line 31)"},
      {"    policy:\n      threads.max: 4\n      threads: {max: 5}\n", 32,
       "configs[1].policy.threads.max", "set twice"},
      {"    policy:\n      shed: &s {enabled: true}\n      shed: *s\n", 31,
       "configs[1].policy.shed.enabled", "set twice"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *text = mutate(policy_block, cases[i].to);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    pp_scenario s;
    pp_scn_error err;
    int rc = pp_scenario_parse(&s, text, strlen(text), "alias.yaml", &err);
    int ok = rc != 0 && strcmp(err.file, "alias.yaml") == 0 && err.line == cases[i].line &&
             strcmp(err.field, cases[i].field) == 0 &&
             strstr(err.message, cases[i].message_part) != NULL;
    if (!ok)
      printf("\n  case %zu: rc %d line %d field %s: %s", i, rc, err.line, err.field, err.message);
    CU_ASSERT(ok);
    pp_scenario_dispose(&s);
    free(text);
  }
  /* The fuzzer's reproducer as it was found. */
  const char *repro = "configs: [{policy: &p {x: *p}}]\n";
  pp_scenario s;
  pp_scn_error err;
  CU_ASSERT_NOT_EQUAL(pp_scenario_parse(&s, repro, strlen(repro), "r.yaml", &err), 0);
  CU_ASSERT_EQUAL(err.line, 1);
  CU_ASSERT_STRING_EQUAL(err.field, "configs[0].policy.x.x");
  pp_scenario_dispose(&s);
  /* Sharing one inline policy between configs through an alias is still fine. */
  char *shared =
      mutate(policy_block, "    policy: &p {max_workers: 4, shed: {enabled: true}}\n"
                           "  - {name: b, server: pumaplus, autoscale: true, policy: *p}\n");
  CU_ASSERT_PTR_NOT_NULL_FATAL(shared);
  int rc = pp_scenario_parse(&s, shared, strlen(shared), "shared.yaml", &err);
  if (rc) printf("\n  shared: line %d field %s: %s", err.line, err.field, err.message);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  CU_ASSERT_EQUAL(s.n_configs, 3);
  CU_ASSERT_EQUAL(s.configs[2].policy.max_workers, 4);
  CU_ASSERT_EQUAL(s.configs[2].policy.shed_enabled, 1);
  pp_scenario_dispose(&s);
  free(shared);
  /* The duplicate check covers every policy field (it keeps a fixed-size table). */
  size_t nfields = 0;
  while (pp_policy_field_names[nfields])
    nfields++;
  CU_ASSERT(nfields > 0 && nfields <= 64);
}

/* Cluster mode: `hosts:` and `clusters:` parse into their structs, and a malformed entry names
 * file, line and dotted field as the rest of the parser does. */
static const char cluster_text[] =
    "name: c\n"                                                              /* 1 */
    "arrivals: {phases: [{rate: 100, duration: 10s}]}\n"                     /* 2 */
    "requests: [{path: /mix/2/20, cpu: 2ms, io: 20ms}]\n"                    /* 3 */
    "configs:\n"                                                             /* 4 */
    "  - {name: h, server: pumaplus, workers: 2, threads: 4}\n"              /* 5 */
    "hosts:\n"                                                               /* 6 */
    "  config: h\n"                                                          /* 7 */
    "  count: 3\n"                                                           /* 8 */
    "  cores: 2\n"                                                           /* 9 */
    "  boot: {dist: lognormal, mean: 20s, sd: 4s}\n"                         /* 10 */
    "clusters:\n"                                                            /* 11 */
    "  - {name: s, balancer: round_robin}\n"                                 /* 12 */
    "  - name: q\n"                                                          /* 13 */
    "    balancer: least_outstanding\n"                                      /* 14 */
    "    autoscale:\n"                                                       /* 15 */
    "      metric: queue_p95\n"                                              /* 16 */
    "      target: 25ms\n"                                                   /* 17 */
    "      min: 2\n"                                                         /* 18 */
    "      max: 12\n"                                                        /* 19 */
    "      scale_down: {window: 120s, policies: [{pods: 1, period: 30s}]}\n" /* 20 */
    "  - name: m\n"                                                          /* 21 */
    "    balancer: p2c\n"                                                    /* 22 */
    "    autoscale: {metrics: [{metric: cpu, target: 60%}, {metric: busy, target: 0.7}]}\n";

static char *mutate_in(const char *base, const char *from, const char *to) {
  const char *p = strstr(base, from);
  if (!p) return NULL;
  size_t n = strlen(base) - strlen(from) + strlen(to) + 1;
  char *out = malloc(n);
  size_t pre = (size_t)(p - base);
  memcpy(out, base, pre);
  strcpy(out + pre, to);
  strcat(out, p + strlen(from));
  return out;
}

static void test_cluster_sections(void) {
  pp_scenario s;
  pp_scn_error err;
  int rc = pp_scenario_parse(&s, cluster_text, strlen(cluster_text), "c.yaml", &err);
  if (rc) printf("\n  %s:%d: %s: %s", err.file, err.line, err.field, err.message);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  CU_ASSERT(s.hosts.present);
  CU_ASSERT_EQUAL(s.hosts.config_index, 0);
  CU_ASSERT_EQUAL(s.hosts.count, 3);
  CU_ASSERT_EQUAL(s.hosts.cores, 2);
  CU_ASSERT_EQUAL(s.hosts.boot.mean_ns, 20000000000ull);
  CU_ASSERT_EQUAL(s.n_clusters, 3);
  CU_ASSERT_EQUAL(s.clusters[0].metric, PP_CMETRIC_NONE);
  CU_ASSERT_EQUAL(s.clusters[0].count, 3);
  CU_ASSERT_EQUAL(s.clusters[1].balancer, PP_BAL_LEAST_OUTSTANDING);
  CU_ASSERT_EQUAL(s.clusters[1].metric, PP_CMETRIC_QUEUE);
  CU_ASSERT_DOUBLE_EQUAL(s.clusters[1].target, 0.025, 1e-12);
  CU_ASSERT_EQUAL(s.clusters[1].hpa.min_replicas, 2);
  CU_ASSERT_EQUAL(s.clusters[1].hpa.max_replicas, 12);
  CU_ASSERT_EQUAL(s.clusters[1].hpa.down.window_ns, 120000000000ull);
  CU_ASSERT_EQUAL(s.clusters[1].hpa.down.n_policies, 1);
  CU_ASSERT_EQUAL(s.clusters[1].hpa.down.policies[0].kind, PP_HPA_PODS);
  CU_ASSERT_EQUAL(s.clusters[1].hpa.down.policies[0].period_ns, 30000000000ull);
  /* Kubernetes' defaults where nothing is said. */
  CU_ASSERT_EQUAL(s.clusters[1].hpa.up.window_ns, 0);
  CU_ASSERT_EQUAL(s.clusters[1].hpa.up.n_policies, 2);
  CU_ASSERT_DOUBLE_EQUAL(s.clusters[1].hpa.tolerance, 0.1, 1e-12);
  CU_ASSERT_EQUAL(s.clusters[1].sync_ns, 15000000000ull);
  CU_ASSERT_EQUAL(s.clusters[2].balancer, PP_BAL_P2C);
  CU_ASSERT_EQUAL(s.clusters[2].n_metrics, 2);
  CU_ASSERT_EQUAL(s.clusters[2].metrics[1], PP_CMETRIC_BUSY);
  CU_ASSERT_DOUBLE_EQUAL(s.clusters[2].targets[0], 0.6, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(s.clusters[2].targets[1], 0.7, 1e-12);
  pp_scenario_dispose(&s);

  static const struct {
    const char *from, *to;
    int line;
    const char *field;
  } cases[] = {
      {"  config: h\n", "  config: nope\n", 7, "hosts.config"},
      {"  config: h\n", "  confg: h\n", 7, "hosts.confg"},
      {"  count: 3\n", "  count: three\n", 8, "hosts.count"},
      {"  count: 3\n", "  count: 0\n", 8, "hosts.count"},
      {"  cores: 2\n", "  cores: -2\n", 9, "hosts.cores"},
      {"dist: lognormal, mean: 20s", "dist: weibull, mean: 20s", 10, "hosts.boot.dist"},
      {"{name: s, balancer: round_robin}", "{name: s, balancer: leastconnz}", 12,
       "clusters[0].balancer"},
      {"{name: s, balancer: round_robin}", "{balancer: round_robin}", 12, "clusters[0]"},
      {"{name: s, balancer: round_robin}", "{name: q, balancer: round_robin}", 13, "clusters[1]"},
      {"      metric: queue_p95\n", "      metric: memory\n", 16, "clusters[1].autoscale.metric"},
      {"      target: 25ms\n", "      target: fast\n", 17, "clusters[1].autoscale.target"},
      {"      target: 25ms\n", "      targt: 25ms\n", 17, "clusters[1].autoscale.targt"},
      {"      min: 2\n", "      min: 20\n", 16, "clusters[1].autoscale.min"},
      {"[{pods: 1, period: 30s}]", "[{pods: 1, period: 0s}]", 20,
       "clusters[1].autoscale.scale_down.policies[0].period"},
      {"[{pods: 1, period: 30s}]", "[{pods: 1, percent: 5}]", 20,
       "clusters[1].autoscale.scale_down.policies[0].percent"},
      {"{window: 120s,", "{window: 120s, select: most,", 20,
       "clusters[1].autoscale.scale_down.select"},
      {"{metric: cpu, target: 60%}", "{metric: cpu, target: 160%}", 23,
       "clusters[2].autoscale.metrics[0].target"},
      {"{metric: busy, target: 0.7}", "{metric: busy}", 23,
       "clusters[2].autoscale.metrics[1].target"},
      {"workers: 2, threads: 4}", "workers: 2, threads: 4, queue: per_worker}", 7, "hosts.config"},
      {"clusters:\n", "clustrs:\n", 11, "clustrs"},
      {"  cores: 2\n", "  cores: 1\n", 7, "hosts.config"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *text = mutate_in(cluster_text, cases[i].from, cases[i].to);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    rc = pp_scenario_parse(&s, text, strlen(text), "bad.yaml", &err);
    CU_ASSERT_NOT_EQUAL(rc, 0);
    if (rc) {
      CU_ASSERT_STRING_EQUAL(err.file, "bad.yaml");
      CU_ASSERT(err.message[0] != 0);
      if (err.line != cases[i].line || strcmp(err.field, cases[i].field))
        printf("\n  cluster case %zu: %d %s, expected %d %s (%s)", i, err.line, err.field,
               cases[i].line, cases[i].field, err.message);
      CU_ASSERT_EQUAL(err.line, cases[i].line);
      CU_ASSERT_STRING_EQUAL(err.field, cases[i].field);
    }
    pp_scenario_dispose(&s);
    free(text);
  }
  /* clusters without hosts, and hosts without clusters. */
  const char *cut = strstr(cluster_text, "clusters:\n");
  rc = pp_scenario_parse(&s, cluster_text, (size_t)(cut - cluster_text), "bad.yaml", &err);
  CU_ASSERT_NOT_EQUAL(rc, 0);
  CU_ASSERT_STRING_EQUAL(err.field, "clusters");
  pp_scenario_dispose(&s);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("scenario", NULL, NULL);
  CU_add_test(s, "full example", test_full);
  CU_add_test(s, "errors name line and field", test_errors);
  CU_add_test(s, "every truncated prefix", test_truncated_prefixes);
  CU_add_test(s, "trace files", test_trace);
  CU_add_test(s, "missing policy file", test_missing_policy_file);
  CU_add_test(s, "inline policy aliases stay bounded", test_policy_aliases_bounded);
  CU_add_test(s, "inline policy shed errors name file, line, field", test_policy_shed_errors);
  CU_add_test(s, "standby model machine fields", test_standby_machine_fields);
  CU_add_test(s, "Ractor slot kind and its machine fields", test_ractor_fields);
  CU_add_test(s, "shipped scenarios load", test_shipped_scenarios);
  CU_add_test(s, "cluster sections and their errors", test_cluster_sections);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned fails = CU_get_number_of_failures();
  CU_cleanup_registry();
  return fails ? 1 : 0;
}
