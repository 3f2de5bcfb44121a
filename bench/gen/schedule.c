/* Constant-rate schedules for quick checks (see schedule.h). */
#include "bench/gen/schedule.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

int pb_schedule_constant(pb_schedule *s, double rate, uint64_t duration_ns, const char *path,
                         bool poisson, uint64_t seed) {
  memset(s, 0, sizeof *s);
  if (!(rate > 0) || duration_ns == 0 || !path) return PB_EINVAL;
  double expected = rate * (double)duration_ns / 1e9;
  size_t cap = (size_t)(expected + 10.0 * sqrt(expected) + 16.0);
  s->arrivals = calloc(cap, sizeof *s->arrivals);
  s->paths = calloc(1, sizeof *s->paths);
  if (!s->arrivals || !s->paths || !(s->paths[0] = strdup(path))) {
    pb_schedule_dispose(s);
    return PB_ENOMEM;
  }
  s->path_count = 1;
  gsl_rng *rng = NULL;
  if (poisson) {
    rng = gsl_rng_alloc(gsl_rng_mt19937);
    if (!rng) {
      pb_schedule_dispose(s);
      return PB_ENOMEM;
    }
    gsl_rng_set(rng, (unsigned long)seed);
  }
  double t = 0; /* seconds */
  for (;;) {
    double gap = poisson ? gsl_ran_exponential(rng, 1.0 / rate) : 1.0 / rate;
    if (!poisson && s->count == 0) gap = 0;
    t += gap;
    uint64_t ns = (uint64_t)llround(t * 1e9);
    if (ns >= duration_ns || s->count == cap) break;
    s->arrivals[s->count].intended_ns = ns;
    s->arrivals[s->count].kind = 0;
    s->count++;
  }
  if (rng) gsl_rng_free(rng);
  return 0;
}

uint64_t pb_schedule_digest(const pb_schedule *s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < s->count; i++) {
    uint64_t v[2] = {s->arrivals[i].intended_ns, s->arrivals[i].kind};
    for (int j = 0; j < 2; j++) {
      for (int b = 0; b < 8; b++) {
        h ^= (v[j] >> (8 * b)) & 0xff;
        h *= 0x100000001b3ull;
      }
    }
  }
  return h;
}

void pb_schedule_dispose(pb_schedule *s) {
  if (s->paths)
    for (size_t k = 0; k < s->path_count; k++)
      free(s->paths[k]);
  free(s->paths);
  free(s->arrivals);
  memset(s, 0, sizeof *s);
}
