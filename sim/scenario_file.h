/* The I/O edge of scenarios: reads a scenario file, the policy files and the trace it names
 * (paths relative to the scenario's folder), and validates the result. Used by pp-sim and
 * pp-bench; everything else in the library works on memory. */
#ifndef PP_SIM_SCENARIO_FILE_H
#define PP_SIM_SCENARIO_FILE_H

#include <stddef.h>

#include "sim/scenario.h"

/* Reads a whole file into a NUL-terminated heap buffer (caller frees). 0 or PP_SIM_EIO. */
int pp_sim_read_file(const char *path, char **out, size_t *len);

/* Loads and fully resolves a scenario. Returns 0, or an error with *err naming the file
 * (the scenario, a policy or a trace), line and field. *out must be disposed either way. */
int pp_scenario_load(pp_scenario *out, const char *path, pp_scn_error *err);

/* Resolves policy files and the trace of an already parsed scenario; `base_dir` is the folder
 * relative paths start from. Then validates. */
int pp_scenario_resolve(pp_scenario *s, const char *base_dir, const char *scenario_file,
                        pp_scn_error *err);

#endif
