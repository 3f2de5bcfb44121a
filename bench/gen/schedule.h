/* Small arrival schedules built inside pp-bench for quick checks (`smoke`, `floor`, tests):
 * a constant rate, either evenly spaced or Poisson. Scenario runs take their schedule from the
 * simulator library instead (sim/arrivals.h, called from bench/run/plan.c), so pp-sim and
 * pp-bench agree. */
#ifndef PP_BENCH_SCHEDULE_H
#define PP_BENCH_SCHEDULE_H

#include <stdbool.h>
#include <stdint.h>

#include "bench/gen/gen.h"

/* Builds `rate` arrivals per second for `duration_ns`, all of kind 0 = `path`. Poisson gaps
 * come from GSL's mt19937 seeded with `seed`; otherwise gaps are exactly 1/rate. Returns 0, or
 * a negative PB_E* code. Free with pb_schedule_dispose. */
int pb_schedule_constant(pb_schedule *s, double rate, uint64_t duration_ns, const char *path,
                         bool poisson, uint64_t seed);

/* FNV-1a 64 over (intended_ns, kind) of every arrival, each as 8 little-endian bytes: the
 * digest `pp-sim schedule` prints (sim/arrivals.h), computed here from pp-bench's own copy of
 * the schedule so the two tools can be compared from outside. */
uint64_t pb_schedule_digest(const pb_schedule *s);

/* Frees what a pb_schedule owns and zeroes it. */
void pb_schedule_dispose(pb_schedule *s);

#endif
