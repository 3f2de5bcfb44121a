/* The soak's configuration and phase schedules (soak.h): names, defaults, the short form, the
 * capacity estimate, each phase's request shapes and its open-loop schedule. Pure. */
#include "bench/soak/soak.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <jansson.h>
#include <uv.h>

#include "bench/run/run.h"
#include "bench/gen/schedule.h"
#include "bench/run/stats.h"
#include "control/hist.h"

#include "bench/soak/soak_int.h"

static const char *const phase_names[PB_SOAK_PHASES] = {"steady", "overload", "body", "cancel",
                                                        "recovery"};

const char *pb_soak_phase_name(int phase) {
  return phase >= 0 && phase < PB_SOAK_PHASES ? phase_names[phase] : "?";
}

void pb_soak_defaults(pb_soak_config *c) {
  memset(c, 0, sizeof *c);
  c->cycles = 3;
  /* Long form: with 2 x 5 threads (454 rps estimated) about 850,000 requests a cycle, 2.5 M
   * over three: Ruvoy's scale. Most of them are the overload phase's. */
  c->phase_ns[PB_SOAK_STEADY] = 300 * SEC;
  c->phase_ns[PB_SOAK_OVERLOAD] = 420 * SEC;
  c->phase_ns[PB_SOAK_BODY] = 30 * SEC;
  c->phase_ns[PB_SOAK_CANCEL] = 30 * SEC;
  c->phase_ns[PB_SOAK_RECOVERY] = 300 * SEC;
  c->steady_rps = 150;
  c->overload_x = 4;
  c->echo_bytes = 256 * KIB;
  c->body_concurrency = 64;
  c->body_bytes = 4 * MIB;
  c->body_every_ns = 5 * SEC;
  c->cancel_rps = 20;
  c->cancel_queued_ns = 50 * MS;
  c->cancel_running_ns = 500 * MS;
  c->timeout_ns = 10 * SEC;
  c->fd_tolerance = 4;
  c->settle_ns = 5 * SEC;
  c->recovery_gap_ns = 2 * SEC;
  c->seed = 1;
}

void pb_soak_short(pb_soak_config *c) {
  c->phase_ns[PB_SOAK_STEADY] = 3 * SEC;
  c->phase_ns[PB_SOAK_OVERLOAD] = 2 * SEC;
  c->phase_ns[PB_SOAK_BODY] = 1 * SEC;
  c->phase_ns[PB_SOAK_CANCEL] = 2 * SEC;
  c->phase_ns[PB_SOAK_RECOVERY] = 3 * SEC;
  c->body_every_ns = 0; /* one burst */
  c->settle_ns = 3 * SEC;
}

double pb_soak_capacity(uint32_t workers, uint32_t threads, double cpu_ms, double sleep_ms,
                        uint32_t cores) {
  if (!(cpu_ms + sleep_ms > 0)) return 0;
  double cap = (double)workers * threads * 1000.0 / (cpu_ms + sleep_ms);
  if (cpu_ms > 0 && cores > 0) cap = fmin(cap, cores * 1000.0 / cpu_ms);
  return cap;
}

/* ---- schedules (pure) ---- */

typedef struct phase_shape {
  const char *paths[3];
  pb_kind_spec kinds[3];
  double weights[3];
  size_t n;
  double rate; /* Poisson arrivals per second, or 0 for bursts */
  bool bursts; /* body: body_concurrency arrivals at once, every body_every_ns */
} phase_shape;

static void shape_of(const pb_soak_config *c, int phase, double capacity, phase_shape *s) {
  memset(s, 0, sizeof *s);
  switch (phase) {
  case PB_SOAK_STEADY:
  case PB_SOAK_RECOVERY:
    s->n = 3;
    s->paths[0] = PATH_HELLO;
    s->paths[1] = PATH_MIX;
    s->paths[2] = PATH_ECHO;
    s->kinds[2].body_bytes = c->echo_bytes;
    s->weights[0] = 0.5;
    s->weights[1] = 0.4;
    s->weights[2] = 0.1;
    s->rate = c->steady_rps;
    break;
  case PB_SOAK_OVERLOAD:
    s->n = 1;
    s->paths[0] = PATH_MIX;
    s->weights[0] = 1;
    s->rate = c->overload_x * capacity;
    break;
  case PB_SOAK_BODY:
    s->n = 1;
    s->paths[0] = PATH_ECHO;
    s->kinds[0].body_bytes = c->body_bytes;
    s->weights[0] = 1;
    s->bursts = true;
    break;
  default: /* PB_SOAK_CANCEL: half leave while queued, half while running */
    s->n = 2;
    s->paths[0] = PATH_CANCEL;
    s->paths[1] = PATH_CANCEL;
    s->kinds[0].cancel_after_ns = c->cancel_queued_ns;
    s->kinds[1].cancel_after_ns = c->cancel_running_ns;
    s->weights[0] = 0.5;
    s->weights[1] = 0.5;
    s->rate = c->cancel_rps;
    break;
  }
}

int pb_soak_schedule(const pb_soak_config *c, int phase, double capacity_rps, uint64_t seed,
                     pb_schedule *sched, pb_kind_spec **kinds) {
  memset(sched, 0, sizeof *sched);
  *kinds = NULL;
  if (phase < 0 || phase >= PB_SOAK_PHASES) return PB_EINVAL;
  phase_shape sh;
  shape_of(c, phase, capacity_rps, &sh);
  uint64_t dur = c->phase_ns[phase];
  size_t cap;
  size_t bursts = 0;
  if (sh.bursts) {
    bursts = dur == 0 || c->body_concurrency == 0 ? 0
             : c->body_every_ns ? (size_t)((dur + c->body_every_ns - 1) / c->body_every_ns)
                                : 1;
    cap = bursts * c->body_concurrency;
  } else {
    double expected = sh.rate > 0 ? sh.rate * (double)dur / 1e9 : 0;
    cap = expected > 0 ? (size_t)(expected + 10.0 * sqrt(expected) + 16.0) : 0;
  }
  sched->arrivals = calloc(cap ? cap : 1, sizeof *sched->arrivals);
  sched->paths = calloc(sh.n, sizeof *sched->paths);
  *kinds = calloc(sh.n, sizeof **kinds);
  if (!sched->arrivals || !sched->paths || !*kinds) goto nomem;
  for (size_t k = 0; k < sh.n; k++) {
    if (!(sched->paths[k] = strdup(sh.paths[k]))) goto nomem;
    sched->path_count = k + 1;
    (*kinds)[k] = sh.kinds[k];
  }
  if (sh.bursts) {
    for (size_t b = 0; b < bursts; b++)
      for (uint32_t j = 0; j < c->body_concurrency; j++) {
        sched->arrivals[sched->count].intended_ns = b * c->body_every_ns;
        sched->arrivals[sched->count].kind = 0;
        sched->count++;
      }
    return 0;
  }
  if (cap == 0) return 0;
  gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
  if (!rng) goto nomem;
  gsl_rng_set(rng, (unsigned long)seed);
  double t = 0;
  for (;;) {
    t += gsl_ran_exponential(rng, 1.0 / sh.rate);
    uint64_t ns = (uint64_t)llround(t * 1e9);
    if (ns >= dur || sched->count == cap) break;
    double u = gsl_rng_uniform(rng), acc = 0;
    uint32_t kind = (uint32_t)sh.n - 1;
    for (size_t k = 0; k < sh.n; k++) {
      acc += sh.weights[k];
      if (u < acc) {
        kind = (uint32_t)k;
        break;
      }
    }
    sched->arrivals[sched->count].intended_ns = ns;
    sched->arrivals[sched->count].kind = kind;
    sched->count++;
  }
  gsl_rng_free(rng);
  return 0;
nomem:
  pb_schedule_dispose(sched);
  free(*kinds);
  *kinds = NULL;
  return PB_ENOMEM;
}

void pb_soak_plan(const pb_soak_config *c, double capacity_rps, double *requests, double *seconds) {
  double n = 0, s = 0;
  for (int p = 0; p < PB_SOAK_PHASES; p++) {
    phase_shape sh;
    shape_of(c, p, capacity_rps, &sh);
    double dur = c->phase_ns[p] / 1e9;
    s += dur + (p ? c->gap_ns / 1e9 : 0) + (p == PB_SOAK_RECOVERY ? c->recovery_gap_ns / 1e9 : 0);
    if (sh.bursts)
      n += c->phase_ns[p] == 0 ? 0
           : c->body_every_ns
               ? ceil((double)c->phase_ns[p] / (double)c->body_every_ns) * c->body_concurrency
               : c->body_concurrency;
    else
      n += sh.rate * dur;
  }
  *requests = n * c->cycles;
  *seconds = s * c->cycles;
}
