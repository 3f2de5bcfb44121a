/* Fuzz target for the scenario parser of sim/ (sim/scenario.h), in memory.
 *
 * Input: YAML text, as a scenario file would hold it (the files of scenarios/ are seeds). The same
 * bytes also go to pp_scenario_parse_trace (trace files are outside input too). Properties:
 *  1. pp_scenario_parse and pp_scenario_parse_trace never crash or leak; a failure fills an
 *     error with a message, and pp_scn_error_format works on it.
 *  2. A parsed scenario is within its declared bounds (counts, NUL-terminated names, phase
 *     durations summing to the scenario's), config names are unique, and
 *     pp_scenario_validate runs on it without crashing.
 *  3. A parsed trace has non-decreasing timestamps.
 * A violated property aborts, so libFuzzer and the replay driver report it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/scenario.h"

#include "fuzz/check.h"

#define TERMINATED(a) (memchr((a), '\0', sizeof(a)) != NULL)

static void check_error(int rc, const pp_scn_error *err) {
  CHECK(rc < 0);
  CHECK(TERMINATED(err->file) && TERMINATED(err->field) && TERMINATED(err->message));
  CHECK(err->message[0] != '\0');
  CHECK(err->line >= 0 && err->column >= 0);
  char buf[2048];
  pp_scn_error_format(err, buf, sizeof buf);
  CHECK(strlen(buf) > 0);
}

static void check_scenario(const pp_scenario *s) {
  CHECK(TERMINATED(s->name) && TERMINATED(s->description) && TERMINATED(s->trace_path));
  CHECK(s->n_phases <= PP_SCN_MAX_PHASES);
  CHECK(s->n_kinds >= 1 && s->n_kinds <= PP_SCN_MAX_KINDS);
  CHECK(s->n_configs >= 1 && s->n_configs <= PP_SCN_MAX_CONFIGS);
  if (s->process != PP_ARRIVALS_TRACE) {
    uint64_t sum = 0;
    for (uint32_t i = 0; i < s->n_phases; i++) {
      CHECK(s->phases[i].duration_ns > 0);
      CHECK(s->phases[i].rate >= 0 && s->phases[i].rate_end >= 0);
      sum += s->phases[i].duration_ns;
    }
    CHECK(s->n_phases >= 1 && sum == s->duration_ns);
  }
  for (uint32_t i = 0; i < s->n_kinds; i++) {
    CHECK(TERMINATED(s->kinds[i].path) && s->kinds[i].path[0] == '/');
    CHECK(s->kinds[i].weight >= 0);
    CHECK(pp_dist_mean_ns(&s->kinds[i].cpu) >= 0 && pp_dist_mean_ns(&s->kinds[i].io) >= 0);
  }
  for (uint32_t i = 0; i < s->n_configs; i++) {
    const pp_config *c = &s->configs[i];
    CHECK(TERMINATED(c->name) && TERMINATED(c->policy_path));
    CHECK(pp_scenario_find_config(s, c->name) == (int)i);
    CHECK(c->threads >= 1 && c->threads <= PP_SCN_MAX_THREADS);
    if (c->autoscale) CHECK(c->server == PP_SERVER_PUMAPLUS);
  }
  pp_scn_error err;
  memset(&err, 0, sizeof err);
  int rc = pp_scenario_validate(s, &err);
  if (rc != 0) check_error(rc, &err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static pp_scenario s; /* about 40 KB: keep it off the stack */
  static pp_scn_error err;
  int rc = pp_scenario_parse(&s, (const char *)data, size, "fuzz.yaml", &err);
  if (rc != 0)
    check_error(rc, &err);
  else
    check_scenario(&s);
  pp_scenario_dispose(&s);

  pp_scenario_defaults(&s);
  rc = pp_scenario_parse_trace(&s, (const char *)data, size, "fuzz.trace", &err);
  if (rc != 0) {
    check_error(rc, &err);
  } else {
    for (size_t i = 1; i < s.trace_len; i++)
      CHECK(s.trace_ns[i] >= s.trace_ns[i - 1]);
    CHECK(s.trace_len == 0 || s.trace_ns[0] >= 0);
  }
  pp_scenario_dispose(&s);
  return 0;
}
