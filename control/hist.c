/* Log-linear histogram of nanosecond durations.
 *
 * Bucket layout (SUB = 2^PP_HIST_SUB_BITS = 128):
 *   - values 0 .. SUB-1 each have their own bucket (index = value), so they are exact;
 *   - a value v with its highest set bit at position m >= PP_HIST_SUB_BITS falls in group
 *     g = m - PP_HIST_SUB_BITS + 1, which splits [2^m, 2^(m+1)) into SUB linear sub-buckets
 *     of width 2^(m - PP_HIST_SUB_BITS); index = g * SUB + (v >> (m - SUB_BITS)) - SUB.
 * A bucket's width is at most 1/SUB of its lower bound, so the midpoint reported for a
 * percentile is within 1/(2*SUB) < 0.4% of any sample in it. Groups run up to m = MAX_BITS-1;
 * larger values are clamped into the top bucket (still counted; max_ns stays exact).
 * Workload: millions of records per second from one thread; record is a shift, a clz and
 * an increment, no branches on the common path beyond the small-value test. */
#include "control/hist.h"

#include <string.h>

void pp_hist_init(pp_hist *h) {
  pp_hist_reset(h);
}

void pp_hist_reset(pp_hist *h) {
  memset(h, 0, sizeof *h);
  h->min_ns = UINT64_MAX;
}

uint32_t pp_hist__bucket_of(uint64_t v) {
  if (v < PP_HIST_SUB_COUNT) return (uint32_t)v;
  if (v > PP_HIST_MAX_NS) return PP_HIST_BUCKETS - 1;
  unsigned m = 63u - (unsigned)__builtin_clzll(v);
  unsigned shift = m - PP_HIST_SUB_BITS;
  return (uint32_t)((shift + 1) * PP_HIST_SUB_COUNT + (v >> shift) - PP_HIST_SUB_COUNT);
}

void pp_hist__bucket_range(uint32_t b, uint64_t *lo, uint64_t *hi) {
  if (b >= PP_HIST_BUCKETS) b = PP_HIST_BUCKETS - 1;
  if (b < PP_HIST_SUB_COUNT) {
    *lo = *hi = b;
    return;
  }
  uint32_t group = b / PP_HIST_SUB_COUNT; /* >= 1 */
  uint32_t sub = b % PP_HIST_SUB_COUNT;
  unsigned shift = group - 1;
  uint64_t base = (uint64_t)(PP_HIST_SUB_COUNT + sub) << shift;
  *lo = base;
  *hi = base + ((1ull << shift) - 1);
}

static inline uint64_t sat_add(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

void pp_hist_record(pp_hist *h, uint64_t v) {
  h->buckets[pp_hist__bucket_of(v)]++;
  h->count++;
  h->sum_ns = sat_add(h->sum_ns, v);
  if (v < h->min_ns) h->min_ns = v;
  if (v > h->max_ns) h->max_ns = v;
}

void pp_hist_record_n(pp_hist *h, uint64_t v, uint64_t n) {
  if (n == 0) return;
  h->buckets[pp_hist__bucket_of(v)] += n;
  h->count += n;
  uint64_t total;
  h->sum_ns = sat_add(h->sum_ns, __builtin_mul_overflow(v, n, &total) ? UINT64_MAX : total);
  if (v < h->min_ns) h->min_ns = v;
  if (v > h->max_ns) h->max_ns = v;
}

void pp_hist_merge(pp_hist *dst, const pp_hist *src) {
  if (src->count == 0) return;
  for (uint32_t i = 0; i < PP_HIST_BUCKETS; i++)
    dst->buckets[i] += src->buckets[i];
  dst->count += src->count;
  dst->sum_ns = sat_add(dst->sum_ns, src->sum_ns);
  if (src->min_ns < dst->min_ns) dst->min_ns = src->min_ns;
  if (src->max_ns > dst->max_ns) dst->max_ns = src->max_ns;
}

uint64_t pp_hist_percentile(const pp_hist *h, double q) {
  if (h->count == 0) return 0;
  if (!(q > 0)) return h->min_ns; /* also catches NaN */
  if (q >= 100) return h->max_ns;
  /* Nearest rank: the smallest rank r with r >= q% of count. */
  double exact = q * (double)h->count / 100.0;
  uint64_t rank = (uint64_t)exact;
  if ((double)rank < exact) rank++;
  if (rank == 0) rank = 1;
  if (rank > h->count) rank = h->count;
  uint64_t seen = 0;
  for (uint32_t b = 0; b < PP_HIST_BUCKETS; b++) {
    seen += h->buckets[b];
    if (seen >= rank) {
      uint64_t lo, hi;
      pp_hist__bucket_range(b, &lo, &hi);
      uint64_t mid = lo + (hi - lo) / 2;
      if (mid < h->min_ns) mid = h->min_ns;
      if (mid > h->max_ns) mid = h->max_ns;
      return mid;
    }
  }
  return h->max_ns;
}

uint64_t pp_hist_mean(const pp_hist *h) {
  return h->count ? h->sum_ns / h->count : 0;
}

void pp_hist_window_init(pp_hist_window *w) {
  pp_hist_reset(&w->window);
  pp_hist_reset(&w->lifetime);
}

void pp_hist_window_record(pp_hist_window *w, uint64_t v) {
  pp_hist_record(&w->window, v);
  pp_hist_record(&w->lifetime, v);
}

void pp_hist_window_roll(pp_hist_window *w) {
  pp_hist_reset(&w->window);
}
