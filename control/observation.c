/* The observation builder and the predicted wait (Little's law).
 *
 * Called once per controller tick by the server and by the simulator with their own
 * histogram windows and counters; everything a tick means is decided here, once. Cheap:
 * a handful of percentile scans over 4096 buckets per tick. */
#include "control/control.h"

#include <string.h>

int pp_observation_build(pp_observation *out, const pp_obs_input *in) {
  if (!out || !in || !in->queue_window || !in->service_window || in->window_ns == 0)
    return PP_CTL_EINVAL;
  pp_observation o;
  memset(&o, 0, sizeof o);
  o.tick = in->tick;
  o.time_ns = in->now_ns;
  o.window_ns = in->window_ns;

  const pp_hist *q = in->queue_window;
  if (q->count) {
    o.queue_p50_ns = pp_hist_percentile(q, 50);
    o.queue_p95_ns = pp_hist_percentile(q, 95);
    o.queue_p99_ns = pp_hist_percentile(q, 99);
    o.queue_max_ns = q->max_ns;
  }
  o.queue_count = q->count;
  o.queue_len = in->queue_len;

  o.slots_ready = in->slots_ready;
  o.slots_busy = in->slots_busy;
  o.workers_ready = in->workers_ready;
  o.workers_booting = in->workers_booting;
  o.workers_retiring = in->workers_retiring;
  o.threads_per_worker = in->threads_per_worker;

  o.arrivals = in->arrivals;
  o.completions = in->completions;
  o.arrival_rate = (double)in->arrivals * 1e9 / (double)in->window_ns;

  /* Service time: this window's completions; when there were none, the lifetime figures so
   * the predicted wait of a queue that is stuck (nothing completing) is not zero. */
  const pp_hist *s = in->service_window;
  if (s->count == 0 && in->service_lifetime && in->service_lifetime->count)
    s = in->service_lifetime;
  if (s->count) {
    o.service_mean_ns = pp_hist_mean(s);
    o.service_p95_ns = pp_hist_percentile(s, 95);
  }
  o.service_cpu_mean_ns = in->service_cpu_mean_ns < 0 ? PP_UNKNOWN_NS : in->service_cpu_mean_ns;
  o.gvl_wait_ns = in->gvl_wait_ns < 0 ? PP_UNKNOWN_NS : in->gvl_wait_ns;
  o.mem_per_worker_bytes = in->mem_per_worker_bytes < 0 ? -1 : in->mem_per_worker_bytes;

  o.shed = in->shed;
  o.timeouts = in->timeouts;
  o.workers_standby = in->workers_standby;
  o.workers_standby_booting = in->workers_standby_booting;

  /* CPU share of one core per worker: the window's CPU time over the window's length. */
  o.cpu_share_mean = -1;
  o.cpu_share_max = -1;
  o.cpu_per_request_ns = -1;
  if (in->worker_cpu_ns) {
    double sum = 0, mx = 0;
    uint32_t n = 0;
    for (uint32_t i = 0; i < in->n_worker_cpu; i++) {
      if (in->worker_cpu_ns[i] < 0) continue;
      double share = (double)in->worker_cpu_ns[i] / (double)in->window_ns;
      sum += share;
      if (share > mx) mx = share;
      n++;
    }
    if (n) {
      o.cpu_share_mean = sum / n;
      o.cpu_share_max = mx;
      o.cpu_workers = n;
      /* CPU per request: all covered workers' CPU over all completions, scaled to the workers
       * covered (completions are counted over every worker). */
      if (in->completions && in->workers_ready) {
        double per =
            sum * (double)in->window_ns / ((double)in->completions * n / (double)in->workers_ready);
        if (n > in->workers_ready) per = sum * (double)in->window_ns / (double)in->completions;
        o.cpu_per_request_ns = (int64_t)(per + 0.5);
      }
    }
  }
  o.ractor_cores = in->ractor_cores;
  *out = o;
  return PP_CTL_OK;
}

uint64_t pp_observation_predicted_wait(const pp_observation *obs) {
  uint64_t c = obs->slots_ready;
  if (c == 0) return UINT64_MAX;
  uint64_t free_slots = obs->slots_busy >= c ? 0 : c - obs->slots_busy;
  uint64_t len = obs->queue_len;
  if (len < free_slots) return 0;
  unsigned __int128 w = (unsigned __int128)(len - free_slots + 1) * obs->service_mean_ns / c;
  /* UINT64_MAX is reserved for "no capacity"; a finite wait saturates just below it. */
  return w >= UINT64_MAX ? UINT64_MAX - 1 : (uint64_t)w;
}
