/* Scenario -> schedule and server specs (plan.h). */
#include "bench/run/plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/arrivals.h"

int pb_plan_schedule(const pp_scenario *scn, uint64_t seed, pb_schedule *out, uint64_t *digest) {
  memset(out, 0, sizeof *out);
  pp_schedule ps;
  if (pp_schedule_build(&ps, scn, seed) != 0) return PB_ENOMEM;
  if (digest) *digest = pp_schedule_digest(&ps);
  out->arrivals = calloc(ps.n ? ps.n : 1, sizeof *out->arrivals);
  out->paths = calloc(scn->n_kinds ? scn->n_kinds : 1, sizeof *out->paths);
  if (!out->arrivals || !out->paths) {
    pp_schedule_dispose(&ps);
    free(out->arrivals);
    free(out->paths);
    memset(out, 0, sizeof *out);
    return PB_ENOMEM;
  }
  for (uint32_t k = 0; k < scn->n_kinds; k++) {
    out->paths[k] = strdup(scn->kinds[k].path);
    out->path_count = k + 1;
    if (!out->paths[k]) break;
  }
  for (size_t i = 0; i < ps.n; i++) {
    out->arrivals[i].intended_ns = ps.items[i].t_ns > 0 ? (uint64_t)ps.items[i].t_ns : 0;
    out->arrivals[i].kind = ps.items[i].kind;
  }
  out->count = ps.n;
  pp_schedule_dispose(&ps);
  return out->path_count == scn->n_kinds ? 0 : PB_ENOMEM;
}

int pb_plan_server(const pp_scenario *scn, uint32_t i, const char *app, const char *scenario_dir,
                   const char *policy_dir, pb_server_spec *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  if (i >= scn->n_configs) {
    snprintf(err, errlen, "no configuration %u", i);
    return -1;
  }
  (void)scenario_dir;
  const pp_config *c = &scn->configs[i];
  snprintf(out->name, sizeof out->name, "%s", c->name);
  out->kind = c->server == PP_SERVER_PUMA ? PB_SERVER_PUMA : PB_SERVER_PUMAPLUS;
  out->workers = c->workers ? c->workers : 1;
  out->threads = c->threads ? c->threads : 1;
  if (c->ractors && c->server == PP_SERVER_PUMA) {
    snprintf(err, errlen, "%s: slots: ractor needs server: pumaplus (puma has no Ractor slots)",
             c->name);
    return -1;
  }
  out->ractors = c->ractors != 0;
  out->autoscale = c->autoscale != 0;
  if (c->autoscale) out->max_workers = c->policy.max_workers;
  if (c->autoscale && policy_dir) {
    /* The policy the simulator loaded (inline or from its file), in canonical form: the server
     * then runs exactly what pp-sim simulates, whatever the server's working directory. */
    char text[8192];
    if (pp_policy_canonical(&c->policy, text, sizeof text) < 0) {
      snprintf(err, errlen, "%s: cannot format the policy", c->name);
      return -1;
    }
    snprintf(out->policy_path, sizeof out->policy_path, "%s/%s.policy.yaml", policy_dir, c->name);
    FILE *f = fopen(out->policy_path, "w");
    if (!f || fputs(text, f) < 0) {
      snprintf(err, errlen, "cannot write %s", out->policy_path);
      if (f) fclose(f);
      return -1;
    }
    fclose(f);
  }
  snprintf(out->app, sizeof out->app, "%s", app);
  return 0;
}
