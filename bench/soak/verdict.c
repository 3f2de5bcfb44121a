/* The soak's tally and verdict (soak.h): a phase's outcomes counted, descriptors flat or not,
 * the heap slots of a /stats document. Pure. */
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

/* ---- tally and verdict (pure) ---- */

void pb_soak_tally(const pb_result *r, size_t n, bool steady, pb_soak_phase *out) {
  pp_hist ok, shed;
  pp_hist_init(&ok);
  pp_hist_init(&shed);
  int errs[16];
  uint64_t counts[16];
  size_t n_errs = 0;
  out->requests = n;
  out->ok = out->shed_503 = out->too_large_413 = out->other_status = 0;
  out->transport_errors = out->timeouts = out->cancelled = out->failures = 0;
  for (size_t i = 0; i < n; i++) {
    const pb_result *x = &r[i];
    uint64_t lat = x->done_ns > x->intended_ns ? x->done_ns - x->intended_ns : 0;
    switch (x->outcome) {
    case PB_OK:
      out->ok++;
      pp_hist_record(&ok, lat);
      break;
    case PB_SHED:
      out->shed_503++;
      pp_hist_record(&shed, lat);
      break;
    case PB_HTTP_ERROR:
      if (x->status == 413)
        out->too_large_413++;
      else
        out->other_status++;
      break;
    case PB_TIMEOUT: out->timeouts++; break;
    case PB_CANCELLED: out->cancelled++; break;
    default: { /* PB_CONN_ERROR, and PB_PENDING, which a finished run never has */
      out->transport_errors++;
      size_t k = 0;
      while (k < n_errs && errs[k] != x->error)
        k++;
      if (k == n_errs && n_errs < 16) {
        errs[n_errs] = x->error;
        counts[n_errs++] = 0;
      }
      if (k < n_errs) counts[k]++;
      break;
    }
    }
  }
  if (steady) out->failures = n - out->ok;
  out->p99_ok_ms = ok.count ? pp_hist_percentile(&ok, 99) / 1e6 : -1;
  out->p99_503_ms = shed.count ? pp_hist_percentile(&shed, 99) / 1e6 : -1;
  /* Causes, most frequent first. */
  out->transport_causes[0] = 0;
  for (size_t done = 0; done < n_errs; done++) {
    size_t best = 0;
    for (size_t k = 1; k < n_errs; k++)
      if (counts[k] > counts[best]) best = k;
    size_t len = strlen(out->transport_causes);
    const char *name = errs[best] ? pb_error_name(errs[best]) : "unfinished";
    snprintf(out->transport_causes + len, sizeof out->transport_causes - len, "%s%s %" PRIu64,
             len ? ", " : "", name, counts[best]);
    counts[best] = 0;
    errs[best] = 0;
  }
}

bool pb_soak_fds_flat(int32_t baseline, const int32_t *ends, size_t n, uint32_t tolerance) {
  if (baseline < 0 || n == 0) return false;
  for (size_t i = 0; i < n; i++) {
    if (ends[i] < 0) return false;
    int64_t d = (int64_t)ends[i] - baseline;
    if (d > (int64_t)tolerance || -d > (int64_t)tolerance) return false;
  }
  return true;
}

int64_t pb_soak_heap_slots(const char *stats_json) {
  json_error_t e;
  json_t *root = json_loads(stats_json, 0, &e);
  if (!root) return -1;
  json_t *workers = json_object_get(root, "worker_status");
  int64_t sum = -1;
  if (json_is_array(workers) && json_array_size(workers) > 0) {
    sum = 0;
    size_t i;
    json_t *w;
    json_array_foreach(workers, i, w) {
      json_t *v = json_object_get(json_object_get(w, "last_status"), "heap_live_slots");
      if (!json_is_integer(v) || json_integer_value(v) < 0) {
        sum = -1;
        break;
      }
      sum += json_integer_value(v);
    }
  }
  json_decref(root);
  return sum;
}
