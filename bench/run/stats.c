/* Summaries, timelines, spectra and CSV from pb_result arrays (see stats.h). The timeline
 * keeps one histogram per second while it is built: a few hundred seconds of runs at most. */
#include "bench/run/stats.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

const char *pb_fmt_ns(uint64_t ns, char *buf, size_t len) {
  if (ns < 1000000u)
    snprintf(buf, len, "%.0fus", ns / 1e3);
  else if (ns < 1000000000u)
    snprintf(buf, len, "%.1fms", ns / 1e6);
  else
    snprintf(buf, len, "%.2fs", ns / 1e9);
  return buf;
}

void pb_summarize(const pb_result *r, size_t n, uint64_t timeout_ns, double max_error_ratio,
                  pb_summary *s) {
  memset(s, 0, sizeof *s);
  pp_hist_init(&s->latency);
  pp_hist_init(&s->pacer_lateness);
  pp_hist_init(&s->send_lateness);
  s->offered = n;
  s->timeout_ns = timeout_ns;
  s->steal_pct = -1; /* the runner measures it around the generator */
  uint64_t first = UINT64_MAX, last_done = 0;
  uint32_t max_conn = 0;
  for (size_t i = 0; i < n; i++) {
    const pb_result *x = &r[i];
    s->outcomes[x->outcome < PB_OUTCOME_COUNT ? x->outcome : PB_PENDING]++;
    if (x->intended_ns < first) first = x->intended_ns;
    if (x->intended_ns > s->schedule_span_ns) s->schedule_span_ns = x->intended_ns;
    if (x->done_ns > last_done) last_done = x->done_ns;
    if (x->conn_id > max_conn) max_conn = x->conn_id;
    if (x->dispatched_ns) pp_hist_record(&s->pacer_lateness, x->dispatched_ns - x->intended_ns);
    if (x->sent_ns) pp_hist_record(&s->send_lateness, x->sent_ns - x->intended_ns);
    if (x->outcome == PB_OK)
      pp_hist_record(&s->latency, x->done_ns - x->intended_ns);
    else if (x->outcome == PB_TIMEOUT)
      pp_hist_record(&s->latency, timeout_ns);
  }
  s->conns_opened = max_conn;
  /* Causes of connection errors, most frequent first (a handful of distinct codes at most). */
  int codes[16];
  uint64_t counts[16];
  size_t n_codes = 0;
  for (size_t i = 0; i < n; i++) {
    if (r[i].outcome != PB_CONN_ERROR) continue;
    size_t k = 0;
    while (k < n_codes && codes[k] != r[i].error)
      k++;
    if (k == n_codes) {
      if (n_codes == 16) continue;
      codes[n_codes] = r[i].error;
      counts[n_codes++] = 0;
    }
    counts[k]++;
  }
  size_t used = 0;
  for (size_t emitted = 0; emitted < n_codes; emitted++) {
    size_t best = 0;
    for (size_t k = 1; k < n_codes; k++)
      if (counts[k] > counts[best]) best = k;
    if (counts[best] == 0) break;
    int w = snprintf(s->conn_error_causes + used, sizeof s->conn_error_causes - used,
                     "%s%s %" PRIu64, used ? ", " : "",
                     codes[best] ? pb_error_name(codes[best]) : "unknown", counts[best]);
    if (w < 0 || (size_t)w >= sizeof s->conn_error_causes - used) break;
    used += (size_t)w;
    counts[best] = 0;
  }
  if (n == 0) first = 0;
  s->completion_span_ns = last_done > first ? last_done - first : 0;
  /* The schedule spans from 0 to the last arrival; one mean gap is added so that n arrivals
   * at rate R read as R, not R * n / (n - 1). Achieved counts the 2xx that completed inside
   * that same span (the simulator's completed_in_run / duration): a backlog served after
   * the load stopped is not throughput the server sustained. */
  double span = s->schedule_span_ns / 1e9;
  if (n > 1) span += span / (double)(n - 1);
  uint64_t span_ns = (uint64_t)(span * 1e9);
  uint64_t ok_in_span = 0;
  for (size_t i = 0; i < n; i++)
    if (r[i].outcome == PB_OK && r[i].done_ns <= span_ns) ok_in_span++;
  s->offered_rps = span > 0 ? n / span : 0;
  s->achieved_rps = span > 0 ? ok_in_span / span : 0;
  uint64_t errors = s->outcomes[PB_HTTP_ERROR] + s->outcomes[PB_CONN_ERROR];
  s->check_ok = true;
  if (s->outcomes[PB_PENDING]) {
    s->check_ok = false;
    snprintf(s->check_reason, sizeof s->check_reason, "%" PRIu64 " requests without outcome",
             s->outcomes[PB_PENDING]);
  } else if (n > 0 && s->outcomes[PB_OK] == 0) {
    s->check_ok = false;
    snprintf(s->check_reason, sizeof s->check_reason, "no 2xx response at all");
  } else if ((double)errors > max_error_ratio * (double)n) {
    s->check_ok = false;
    snprintf(s->check_reason, sizeof s->check_reason,
             "%" PRIu64 " errors (%.2f%%) exceed the %.2f%% allowed", errors,
             n ? 100.0 * errors / n : 0.0, 100.0 * max_error_ratio);
  }
}

size_t pb_timeline(const pb_result *r, size_t n, pb_second *rows, size_t max_rows) {
  uint64_t last = 0;
  for (size_t i = 0; i < n; i++) {
    uint64_t t = r[i].done_ns > r[i].intended_ns ? r[i].done_ns : r[i].intended_ns;
    if (t > last) last = t;
  }
  size_t need = n ? (size_t)(last / 1000000000u) + 1 : 0;
  size_t use = need < max_rows ? need : max_rows;
  if (use == 0) return need;
  pp_hist *h = malloc(use * sizeof *h);
  if (!h) return 0;
  memset(rows, 0, use * sizeof *rows);
  for (size_t k = 0; k < use; k++) {
    pp_hist_init(&h[k]);
    rows[k].t = (uint32_t)k;
  }
  for (size_t i = 0; i < n; i++) {
    size_t si = (size_t)(r[i].intended_ns / 1000000000u);
    if (si < use) rows[si].offered++;
    size_t sd = (size_t)(r[i].done_ns / 1000000000u);
    if (sd >= use) continue;
    switch (r[i].outcome) {
    case PB_OK:
      rows[sd].ok++;
      pp_hist_record(&h[sd], r[i].done_ns - r[i].intended_ns);
      break;
    case PB_SHED: rows[sd].shed++; break;
    case PB_TIMEOUT: rows[sd].timeouts++; break;
    case PB_HTTP_ERROR:
    case PB_CONN_ERROR: rows[sd].errors++; break;
    default: break;
    }
  }
  for (size_t k = 0; k < use; k++) {
    rows[k].p50_ns = pp_hist_percentile(&h[k], 50);
    rows[k].p99_ns = pp_hist_percentile(&h[k], 99);
    rows[k].max_ns = h[k].count ? h[k].max_ns : 0;
  }
  free(h);
  return need;
}

void pb_summary_print(FILE *f, const char *label, const pb_summary *s) {
  char a[32], b[32], c[32], d[32], e[32];
  const pp_hist *h = &s->latency;
  fprintf(f, "== %s ==\n", label);
  fprintf(f,
          "  requests  offered %" PRIu64 "  ok %" PRIu64 "  shed(503) %" PRIu64
          "  http_errors %" PRIu64 "  conn_errors %" PRIu64 "  timeouts %" PRIu64 "\n",
          s->offered, s->outcomes[PB_OK], s->outcomes[PB_SHED], s->outcomes[PB_HTTP_ERROR],
          s->outcomes[PB_CONN_ERROR], s->outcomes[PB_TIMEOUT]);
  if (s->conn_error_causes[0]) fprintf(f, "  conn_errors by cause: %s\n", s->conn_error_causes);
  if (s->check_ok)
    fprintf(f, "  rate      offered %.1f rps  achieved %.1f rps (2xx done within the schedule)\n",
            s->offered_rps, s->achieved_rps);
  else
    fprintf(f, "  rate      offered %.1f rps  achieved: not reported, CHECK FAILED: %s\n",
            s->offered_rps, s->check_reason);
  fprintf(f, "  latency   p50 %s  p90 %s  p99 %s  p99.9 %s  max %s  (from intended start)\n",
          pb_fmt_ns(pp_hist_percentile(h, 50), a, sizeof a),
          pb_fmt_ns(pp_hist_percentile(h, 90), b, sizeof b),
          pb_fmt_ns(pp_hist_percentile(h, 99), c, sizeof c),
          pb_fmt_ns(pp_hist_percentile(h, 99.9), d, sizeof d),
          pb_fmt_ns(h->count ? h->max_ns : 0, e, sizeof e));
  fprintf(f,
          "  generator pacer lateness p50 %s p99 %s max %s; send lateness p99 %s; conns %" PRIu64
          "\n",
          pb_fmt_ns(pp_hist_percentile(&s->pacer_lateness, 50), a, sizeof a),
          pb_fmt_ns(pp_hist_percentile(&s->pacer_lateness, 99), b, sizeof b),
          pb_fmt_ns(s->pacer_lateness.count ? s->pacer_lateness.max_ns : 0, c, sizeof c),
          pb_fmt_ns(pp_hist_percentile(&s->send_lateness, 99), d, sizeof d), s->conns_opened);
  if (s->steal_pct >= 0)
    fprintf(
        f,
        "  machine   steal %.1f%% of all CPU time during the run (the hypervisor's, /proc/stat)\n",
        s->steal_pct);
  else
    fprintf(f, "  machine   steal unknown (/proc/stat unreadable)\n");
}

void pb_spectrum_print(FILE *f, const pp_hist *h) {
  fprintf(f, "%12s %14s %10s %14s\n", "Value(ms)", "Percentile", "TotalCount", "1/(1-P)");
  if (h->count == 0) return;
  /* HdrHistogram's output: ticks that halve the remaining distance to 100%, 5 per halving. */
  double q = 0;
  for (int halving = 0; halving < 24; halving++) {
    double remaining = 100.0 / (double)(1u << halving);
    for (int step = 0; step < 5; step++) {
      q = 100.0 - remaining + remaining / 2.0 * step / 5.0;
      uint64_t v = pp_hist_percentile(h, q);
      uint64_t below = (uint64_t)((double)h->count * q / 100.0);
      fprintf(f, "%12.3f %14.6f %10" PRIu64 " %14.2f\n", v / 1e6, q / 100.0, below,
              q < 100 ? 100.0 / (100.0 - q) : 0.0);
    }
    if ((double)h->count * remaining / 200.0 < 1.0) break;
  }
  fprintf(f, "%12.3f %14.6f %10" PRIu64 " %14s\n", h->max_ns / 1e6, 1.0, h->count, "inf");
}

void pb_csv_write(FILE *f, const pb_result *r, size_t n, char *const *paths) {
  fprintf(f, "index,intended_ms,dispatched_ms,sent_ms,done_ms,latency_ms,status,outcome,path,"
             "conn,reused,error\n");
  for (size_t i = 0; i < n; i++) {
    const pb_result *x = &r[i];
    fprintf(f, "%zu,%.3f,%.3f,%.3f,%.3f,%.3f,%u,%s,%s,%u,%u,%s\n", i, x->intended_ns / 1e6,
            x->dispatched_ns / 1e6, x->sent_ns / 1e6, x->done_ns / 1e6,
            (x->done_ns - x->intended_ns) / 1e6, x->status, pb_outcome_name(x->outcome),
            paths[x->kind], x->conn_id, x->reused, pb_error_name(x->error));
  }
}
