/* Issue 24: pp-sim against the real server, per phase (label `sim`, well under a second).
 *
 * sim/tests/fixtures/validate-conc.txt holds what the real server did on
 * scenarios/validate-conc-{io,mixed,cpu}.yaml (1 worker x 5 threads, autoscale), measured with
 * pp-bench by notebooks/sim-vs-real-conc/measure.sh: per phase, the mean of the per-second
 * completions and the mean of the per-second p50s (what `pp-bench report -vs-sim` prints), the
 * median over the rounds. This test runs pp-sim on the same scenarios with the same seed and
 * policy, and with the other work the machine had while it was measured (the fixture's
 * `background` line: machine.background, measured by the script's probe; the machine is shared)
 * and the worker's measured CPU per request outside the app (`overhead`: machine.overhead),
 * and computes the same figures from its timeline: requests/s must be within 10% and
 * p50 within 15% of the measured ones, phase by phase; a phase the fixture lists as a known
 * miss (`known-miss`, with why) must still miss, so the list cannot go stale. A change to the model
 * (service time, GVL, slot actuator, boot) that moves a prediction off what the server did fails
 * here; a re-measurement re-pins the fixture (the file says when and how it was made). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/Basic.h>

#include "sim/engine.h"
#include "sim/scenario.h"
#include "sim/scenario_file.h"

#define FIXTURE PP_SOURCE_DIR "/sim/tests/fixtures/validate-conc.txt"
#define RPS_TOL 0.10
#define P50_TOL 0.15

typedef struct expect {
  char scenario[64], config[64];
  int phase;
  double start_s, end_s, rps, p50_ms;
} expect;

/* The other work on the machine while a scenario was measured: "background scenario B". */
typedef struct background {
  char scenario[64];
  double b;
} background;

static background bgs[8];
static size_t n_bgs;

/* Phases pp-sim is known to miss: "known-miss scenario phase why...". */
typedef struct miss {
  char scenario[64];
  int phase;
} miss;

static miss misses[16];
static size_t n_misses;

static int known_miss(const char *scenario, int phase) {
  for (size_t k = 0; k < n_misses; k++)
    if (!strcmp(misses[k].scenario, scenario) && misses[k].phase == phase) return 1;
  return 0;
}

/* The worker's CPU per request outside the app, measured: "overhead MS" (machine.overhead). */
static double overhead_ms;

static double background_of(const char *scenario) {
  for (size_t k = 0; k < n_bgs; k++)
    if (!strcmp(bgs[k].scenario, scenario)) return bgs[k].b;
  return 0;
}

/* One fixture line: "scenario config phase start_s end_s rps p50_ms [# note]", or
 * "background scenario B" (machine.background for that scenario), or "overhead MS"
 * (machine.overhead for every scenario; it must come before the expectations). Returns 1 for an
 * expectation, 2 for a background, 0 for a blank or comment line, -1 (message printed naming
 * the line and the field) for a malformed one. */
static int parse_line(char *line, int lineno, expect *e) {
  char *hash = strchr(line, '#');
  if (hash) *hash = 0;
  if (!strncmp(line, "known-miss", 10) && (line[10] == ' ' || line[10] == '\t')) {
    char name[64], why[8];
    int phase;
    if (sscanf(line + 10, "%63s %d %7s", name, &phase, why) != 3 || phase < 1 ||
        n_misses == sizeof misses / sizeof misses[0]) {
      printf("\n  %s:%d: field known-miss: expected 'known-miss SCENARIO PHASE WHY...'", FIXTURE,
             lineno);
      return -1;
    }
    snprintf(misses[n_misses].scenario, sizeof misses[n_misses].scenario, "%s", name);
    misses[n_misses++].phase = phase;
    return 2;
  }
  if (!strncmp(line, "overhead", 8) && (line[8] == ' ' || line[8] == '\t')) {
    char extra[8];
    if (sscanf(line + 8, "%lf %7s", &overhead_ms, extra) != 1 || !isfinite(overhead_ms) ||
        overhead_ms < 0 || overhead_ms > 1000) {
      printf("\n  %s:%d: field overhead: expected 'overhead MS' with 0 <= MS <= 1000", FIXTURE,
             lineno);
      return -1;
    }
    return 2;
  }
  if (!strncmp(line, "background", 10) && (line[10] == ' ' || line[10] == '\t')) {
    char name[64], extra[8];
    double b;
    if (sscanf(line + 10, "%63s %lf %7s", name, &b, extra) != 2 || !isfinite(b) || b < 0 ||
        n_bgs == sizeof bgs / sizeof bgs[0]) {
      printf("\n  %s:%d: field background: expected 'background SCENARIO B' with B >= 0", FIXTURE,
             lineno);
      return -1;
    }
    snprintf(bgs[n_bgs].scenario, sizeof bgs[n_bgs].scenario, "%s", name);
    bgs[n_bgs++].b = b;
    return 2;
  }
  static const char *fields[] = {"scenario", "config", "phase", "start_s",
                                 "end_s",    "rps",    "p50_ms"};
  char *tok[7];
  int n = 0;
  for (char *save = NULL, *t = strtok_r(line, " \t\r\n", &save); t;
       t = strtok_r(NULL, " \t\r\n", &save)) {
    if (n == 7) {
      printf("\n  %s:%d: more than 7 fields", FIXTURE, lineno);
      return -1;
    }
    tok[n++] = t;
  }
  if (n == 0) return 0;
  if (n < 7) {
    printf("\n  %s:%d: field %s missing", FIXTURE, lineno, fields[n]);
    return -1;
  }
  snprintf(e->scenario, sizeof e->scenario, "%s", tok[0]);
  snprintf(e->config, sizeof e->config, "%s", tok[1]);
  double v[5];
  for (int k = 0; k < 5; k++) {
    char *end;
    errno = 0;
    v[k] = strtod(tok[2 + k], &end);
    if (errno || *end || !isfinite(v[k]) || v[k] < 0) {
      printf("\n  %s:%d: field %s: '%s' is not a number >= 0", FIXTURE, lineno, fields[2 + k],
             tok[2 + k]);
      return -1;
    }
  }
  e->phase = (int)v[0];
  e->start_s = v[1];
  e->end_s = v[2];
  e->rps = v[3];
  e->p50_ms = v[4];
  if (e->end_s <= e->start_s) {
    printf("\n  %s:%d: field end_s: %g is not after start_s %g", FIXTURE, lineno, e->end_s,
           e->start_s);
    return -1;
  }
  return 1;
}

/* The simulated run of one configuration of one scenario, kept for its phases. */
typedef struct simrun {
  char scenario[64], config[64];
  pp_sim_result r;
} simrun;

static simrun runs[16];
static size_t n_runs;

static const pp_sim_result *simulate(const char *scenario, const char *config) {
  for (size_t k = 0; k < n_runs; k++)
    if (!strcmp(runs[k].scenario, scenario) && !strcmp(runs[k].config, config)) return &runs[k].r;
  if (n_runs == sizeof runs / sizeof runs[0]) return NULL;
  char path[512];
  snprintf(path, sizeof path, "%s/scenarios/%s.yaml", PP_SOURCE_DIR, scenario);
  pp_scenario s;
  pp_scn_error err;
  if (pp_scenario_load(&s, path, &err)) {
    char buf[1200];
    printf("\n  %s", pp_scn_error_format(&err, buf, sizeof buf));
    pp_scenario_dispose(&s);
    return NULL;
  }
  /* The other work on the machine when it was measured (docs/SIM.md "Cores"). */
  s.background = background_of(scenario);
  s.overhead_ns = (uint64_t)llround(overhead_ms * 1e6);
  uint32_t ci = 0;
  while (ci < s.n_configs && strcmp(s.configs[ci].name, config))
    ci++;
  if (ci == s.n_configs) {
    printf("\n  %s: no configuration '%s'", path, config);
    pp_scenario_dispose(&s);
    return NULL;
  }
  pp_sim_options o;
  pp_sim_options_default(&o, &s);
  o.keep_timeline = 1;
  o.keep_decisions = 0;
  simrun *sr = &runs[n_runs];
  int rc = pp_sim_run(&s, ci, &o, &sr->r);
  pp_scenario_dispose(&s);
  if (rc) {
    pp_sim_result_dispose(&sr->r);
    return NULL;
  }
  snprintf(sr->scenario, sizeof sr->scenario, "%s", scenario);
  snprintf(sr->config, sizeof sr->config, "%s", config);
  n_runs++;
  return &sr->r;
}

/* The figures pp-bench report -vs-sim prints for a phase: the mean over the seconds of
 * [start, end) of the completions, and of the p50s (seconds without a completion left out). */
static void phase_of(const pp_sim_result *r, double start, double end, double *rps,
                     double *p50_ms) {
  double sum = 0, psum = 0;
  int n = 0, pn = 0;
  for (size_t k = 0; k < r->timeline_len; k++) {
    const pp_timeline_row *t = &r->timeline[k];
    if (t->t_s < start || t->t_s >= end) continue;
    sum += (double)t->completed;
    n++;
    if (t->p50_ns >= 0) {
      psum += t->p50_ns / 1e6;
      pn++;
    }
  }
  *rps = n ? sum / n : 0;
  *p50_ms = pn ? psum / pn : -1;
}

static void test_phases_against_the_server(void) {
  FILE *f = fopen(FIXTURE, "r");
  if (!f) printf("\n  cannot read %s: %s", FIXTURE, strerror(errno));
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  char line[512];
  int lineno = 0, checked = 0, missed = 0;
  printf("\n  %-22s %-6s %-5s %9s %9s %7s %10s %10s %7s", "scenario", "config", "phase", "rps sim",
         "rps real", "ratio", "p50 sim", "p50 real", "ratio");
  /* All lines first: the directives (background, overhead, known-miss) hold wherever they are. */
  static expect exps[64];
  size_t n_exps = 0;
  while (fgets(line, sizeof line, f)) {
    lineno++;
    expect e;
    int rc = parse_line(line, lineno, &e);
    CU_ASSERT(rc >= 0);
    if (rc == 1 && n_exps < sizeof exps / sizeof exps[0]) exps[n_exps++] = e;
  }
  fclose(f);
  for (size_t k = 0; k < n_exps; k++) {
    expect e = exps[k];
    const pp_sim_result *r = simulate(e.scenario, e.config);
    CU_ASSERT_PTR_NOT_NULL(r);
    if (!r) continue;
    double rps, p50;
    phase_of(r, e.start_s, e.end_s, &rps, &p50);
    double rr = e.rps > 0 ? rps / e.rps : 0, pr = e.p50_ms > 0 ? p50 / e.p50_ms : 0;
    int ok = fabs(rr - 1) <= RPS_TOL && fabs(pr - 1) <= P50_TOL;
    int known = known_miss(e.scenario, e.phase);
    printf("\n  %-22s %-6s %-5d %9.1f %9.1f %7.3f %8.1fms %8.1fms %7.3f%s", e.scenario, e.config,
           e.phase, rps, e.rps, rr, p50, e.p50_ms, pr,
           ok ? (known ? "  <- listed as a known miss, but within: delete its line" : "")
              : (known ? "  <- outside 10% / 15% (known miss)" : "  <- outside 10% / 15%"));
    if (e.phase == 1) printf("  (background %.2f)", background_of(e.scenario));
    if (known) {
      /* Listed as missed: it must still miss, or the list is stale. */
      CU_ASSERT(!ok);
    } else {
      CU_ASSERT(fabs(rr - 1) <= RPS_TOL);
      CU_ASSERT(fabs(pr - 1) <= P50_TOL);
    }
    checked++;
    missed += !ok;
  }
  printf("\n  %d phases checked, %d outside the tolerance (%zu listed as known misses)", checked,
         missed, n_misses);
  /* The three workloads, three phases each: a fixture cut short is a failure, not a pass. */
  CU_ASSERT(checked >= 9);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("validate_conc", NULL, NULL);
  CU_add_test(s, "pp-sim vs the measured server per phase (io, mixed, cpu; 1x5 autoscale)",
              test_phases_against_the_server);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned fails = CU_get_number_of_failures();
  for (size_t k = 0; k < n_runs; k++)
    pp_sim_result_dispose(&runs[k].r);
  CU_cleanup_registry();
  return fails ? 1 : 0;
}
