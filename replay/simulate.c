/* pp-replay --simulate: the log -> scenario conversion (see simulate.h). */
#include "replay/simulate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t next_rand(uint64_t *s) { /* splitmix64 */
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* A lognormal with mean m whose p95 is q: sigma solves ln(q/m) = 1.645 s - s^2/2. */
static pp_dist lognormal_from(double m, double q) {
  pp_dist d;
  memset(&d, 0, sizeof d);
  if (m <= 0) {
    d.kind = PP_DIST_FIXED;
    return d;
  }
  double r = q > m ? log(q / m) : 0;
  double disc = 1.645 * 1.645 - 2 * r;
  double sigma = disc > 0 ? 1.645 - sqrt(disc) : 1.645;
  d.kind = PP_DIST_LOGNORMAL;
  d.mean_ns = (uint64_t)llround(m);
  d.sd_ns = (uint64_t)llround(m * sqrt(exp(sigma * sigma) - 1));
  if (d.sd_ns == 0) d.kind = PP_DIST_FIXED;
  return d;
}

static pp_dist scaled(pp_dist d, double f) {
  d.mean_ns = (uint64_t)llround((double)d.mean_ns * f);
  d.sd_ns = (uint64_t)llround((double)d.sd_ns * f);
  if (d.mean_ns == 0) d.kind = PP_DIST_FIXED;
  return d;
}

int pp_replay_build_scenario(const pp_replay_log *log, const pp_policy *logged,
                             const pp_policy *tuned, const pp_replay_sim_options *opt,
                             pp_scenario *out, pp_replay_workload *w, char *errbuf, size_t cap) {
  pp_scenario_defaults(out);
  memset(w, 0, sizeof *w);
  if (log->n == 0) {
    snprintf(errbuf, cap, "the log has no tick records");
    return -1;
  }
  const pp_declog_record *first = &log->recs[0];
  int64_t t0 = first->time_ns - (int64_t)first->obs.window_ns;
  int64_t end = log->recs[log->n - 1].time_ns;
  if (end <= t0) {
    snprintf(errbuf, cap, "the log covers no time (tick times do not increase)");
    return -1;
  }
  uint64_t total = 0;
  double wsum = 0, mean_sum = 0, p95_sum = 0, cpu_num = 0, cpu_den = 0;
  for (size_t i = 0; i < log->n; i++) {
    const pp_observation *o = &log->recs[i].obs;
    total += o->arrivals;
    if (o->completions && o->service_mean_ns) {
      double c = (double)o->completions;
      wsum += c;
      mean_sum += c * (double)o->service_mean_ns;
      p95_sum += c * (double)o->service_p95_ns;
      if (o->service_cpu_mean_ns >= 0) {
        cpu_num += c * (double)o->service_cpu_mean_ns;
        cpu_den += c * (double)o->service_mean_ns;
      }
    }
  }
  if (wsum == 0) {
    snprintf(errbuf, cap, "the log has no completions with a service time; nothing to model");
    return -1;
  }
  if (total > 50000000) {
    snprintf(errbuf, cap, "the log has %llu arrivals; more than this tool re-simulates",
             (unsigned long long)total);
    return -1;
  }
  int64_t *times = malloc((total ? total : 1) * sizeof *times);
  if (!times) {
    snprintf(errbuf, cap, "out of memory for %llu arrivals", (unsigned long long)total);
    return -1;
  }
  uint64_t rng = opt->seed ^ 0x5eed5eed5eedull, k = 0;
  for (size_t i = 0; i < log->n; i++) {
    const pp_observation *o = &log->recs[i].obs;
    int64_t lo = log->recs[i].time_ns - (int64_t)o->window_ns - t0;
    if (lo < 0) lo = 0;
    uint64_t span = o->window_ns ? o->window_ns : 1;
    for (uint64_t j = 0; j < o->arrivals; j++)
      times[k++] = lo + (int64_t)(next_rand(&rng) % span);
  }
  qsort(times, k, sizeof *times, cmp_i64);
  out->trace_ns = times;
  out->trace_len = k;
  out->process = PP_ARRIVALS_TRACE;
  out->duration_ns = (uint64_t)(end - t0);
  out->seed = opt->seed;
  snprintf(out->name, sizeof out->name, "replay");
  if (opt->cores) out->cores = opt->cores;

  double mean = mean_sum / wsum, p95 = p95_sum / wsum;
  double share = opt->cpu_share;
  w->cpu_share_from_log = 0;
  if (share < 0) {
    if (cpu_den > 0) {
      share = cpu_num / cpu_den;
      w->cpu_share_from_log = 1;
    } else {
      share = 0.5;
    }
  }
  if (share > 1) share = 1;
  pp_dist svc = lognormal_from(mean, p95);
  out->n_kinds = 1;
  pp_request_kind *kind = &out->kinds[0];
  snprintf(kind->path, sizeof kind->path, "/replay");
  kind->weight = 1;
  kind->cpu = scaled(svc, share);
  kind->io = scaled(svc, 1 - share);

  uint32_t workers = first->obs.workers_ready + first->obs.workers_booting;
  uint32_t threads = first->obs.threads_per_worker;
  if (workers == 0) workers = 1;
  if (threads == 0)
    threads = first->state_before.threads_wanted ? first->state_before.threads_wanted : 1;
  out->n_configs = tuned ? 2 : 1;
  for (uint32_t c = 0; c < out->n_configs; c++) {
    pp_config *cfg = &out->configs[c];
    snprintf(cfg->name, sizeof cfg->name, "%s", c == 0 ? "logged" : "tuned");
    cfg->server = PP_SERVER_PUMAPLUS;
    cfg->queue = PP_QUEUE_FIFO;
    cfg->workers = workers;
    cfg->threads = threads;
    cfg->autoscale = 1;
    cfg->policy = c == 0 ? *logged : *tuned;
  }
  pp_scn_error e;
  if (pp_scenario_validate(out, &e) != 0) {
    snprintf(errbuf, cap, "%s: %s", e.field, e.message);
    return -1;
  }
  w->arrivals = k;
  w->duration_s = (double)out->duration_ns / 1e9;
  w->service_mean_ns = mean;
  w->service_p95_ns = p95;
  w->cpu_share = share;
  w->workers = workers;
  w->threads = threads;
  return 0;
}
