/* From a scenario (the simulator's loader, sim/scenario_file.h) to what pp-bench measures: the
 * arrival schedule, built by the simulator's own generator (sim/arrivals.h) so pp-sim and
 * pp-bench see the same intended times and request kinds for the same seed, and one server
 * spec per configuration of the scenario. */
#ifndef PP_BENCH_PLAN_H
#define PP_BENCH_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "bench/gen/gen.h"
#include "bench/harness/harness.h"
#include "sim/scenario.h"

/* Fills `out` with the scenario's schedule for `seed` (normally scn->seed): times and kinds
 * exactly as pp_schedule_build produces them, paths from scn->kinds. Returns 0 or a negative
 * PB_E* code. Free with pb_schedule_dispose. `digest`, if not NULL, receives
 * pp_schedule_digest of the simulator's schedule (printed so two tools can be compared). */
int pb_plan_schedule(const pp_scenario *scn, uint64_t seed, pb_schedule *out, uint64_t *digest);

/* The server spec for scn->configs[i]. `app` is the Rack app. An autoscale configuration's
 * policy (as the scenario loader resolved it, inline or from a file) is written in canonical
 * form to <policy_dir>/<config>.policy.yaml for the server to read. `scenario_dir` is unused
 * (kept for callers). Returns 0 or -1 with a message in err. The port is left 0: the caller
 * picks one right before starting. */
int pb_plan_server(const pp_scenario *scn, uint32_t i, const char *app, const char *scenario_dir,
                   const char *policy_dir, pb_server_spec *out, char *err, size_t errlen);

#endif
