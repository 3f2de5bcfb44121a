/* Arrival schedules: the intended arrival times and request kinds of a scenario, the same in
 * pp-sim and pp-bench.
 *
 * Contract (pp-bench relies on it): for a given scenario text and seed, the sequence of
 * (t_ns, kind) produced here is identical on every run and in every tool that links this
 * library, and the service draws (cpu_ns, io_ns) that the simulator uses are identical too.
 * Three independent GSL mt19937 streams are used, each seeded from the scenario seed with
 * splitmix64: one for inter-arrival times, one for the request kind, one for service times.
 * So changing the service model never moves an arrival, and changing the request weights
 * never moves an arrival time.
 *
 * Processes (docs/SCENARIOS.md):
 *  - poisson: exponential gaps at the phase's rate; at a phase boundary the pending gap is
 *    discarded and redrawn at the new rate (memoryless, so the process is still Poisson);
 *    ramps (`to:`) use thinning against the phase's larger rate.
 *  - uniform: the k-th arrival of a phase (k = 0, 1, ...) sits where the integrated rate
 *    reaches k, so a constant rate gives evenly spaced arrivals starting at the phase start.
 *  - trace: the loaded timestamps, in order; kinds drawn by weight as above.
 * Times are integer nanoseconds from the start of the run (t = 0), strictly inside
 * [0, duration_ns).
 *
 * Two ways to use it: stream with pp_arrivals_next() (O(1) memory, what a load generator
 * wants), or build the whole array with pp_schedule_build(). Both give the same sequence. */
#ifndef PP_SIM_ARRIVALS_H
#define PP_SIM_ARRIVALS_H

#include <stddef.h>
#include <stdint.h>

#include <gsl/gsl_rng.h>

#include "sim/scenario.h"

typedef struct pp_arrival {
  int64_t t_ns;    /* intended arrival, ns from the start of the run */
  uint32_t kind;   /* index into scenario->kinds (its path is kinds[kind].path) */
  uint32_t seq;    /* 0-based position in the schedule */
  uint64_t cpu_ns; /* the simulator's service draw: CPU segment (holds the GVL) */
  uint64_t io_ns;  /* then the IO segment (GVL released) */
} pp_arrival;

/* A streaming generator. Holds a pointer to the scenario, which must outlive it. */
typedef struct pp_arrivals {
  const pp_scenario *scn;
  gsl_rng *time_rng, *kind_rng, *service_rng;
  double kind_cum[PP_SCN_MAX_KINDS]; /* cumulative normalised weights */
  uint32_t phase;
  double phase_start_ns;
  double t_ns; /* poisson: time of the last candidate */
  uint64_t k;  /* uniform: index within the phase */
  size_t trace_pos;
  uint32_t count;
  int done;
  double ln_mu[PP_SCN_MAX_KINDS][2], ln_sigma[PP_SCN_MAX_KINDS][2]; /* lognormal cpu/io */
} pp_arrivals;

/* splitmix64: the seed derivation used for every stream of the library. */
uint64_t pp_splitmix64(uint64_t x);

/* Starts the schedule of `scn` for `seed` (normally scn->seed). 0 or PP_SIM_ENOMEM/EINVAL. */
int pp_arrivals_init(pp_arrivals *a, const pp_scenario *scn, uint64_t seed);
/* Produces the next arrival into *out: returns 1, or 0 when the schedule has ended. */
int pp_arrivals_next(pp_arrivals *a, pp_arrival *out);
void pp_arrivals_dispose(pp_arrivals *a);

/* The whole schedule as an array (owned by the struct; pp_schedule_dispose frees it). */
typedef struct pp_schedule {
  pp_arrival *items;
  size_t n;
} pp_schedule;

int pp_schedule_build(pp_schedule *out, const pp_scenario *scn, uint64_t seed);
void pp_schedule_dispose(pp_schedule *s);

/* FNV-1a 64 over (t_ns, kind) of every arrival, little-endian: a cheap way for two tools to
 * check that they generated the same schedule. */
uint64_t pp_schedule_digest(const pp_schedule *s);

/* Draws one value from a distribution with rng (no draw for fixed). */
uint64_t pp_dist_draw(const pp_dist *d, gsl_rng *rng);

#endif
