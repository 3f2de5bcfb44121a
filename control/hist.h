/* Log-linear histogram of durations in nanoseconds (HdrHistogram-style).
 *
 * Values below 2^PP_HIST_SUB_BITS ns are counted exactly; above that each power-of-two
 * range is split into 2^PP_HIST_SUB_BITS linear sub-buckets, so a reported percentile is
 * within 1/2^PP_HIST_SUB_BITS (< 1%) of the true sample value. Values above PP_HIST_MAX_NS
 * (about 275 s) are clamped into the top bucket and still counted; max stays exact.
 * Record is O(1), touches one counter, never allocates. The struct is plain data: copy it,
 * memset it, put it in shared memory. Not thread-safe; one writer per histogram. */
#ifndef PP_HIST_H
#define PP_HIST_H

#include <stdint.h>

#define PP_HIST_SUB_BITS  7
#define PP_HIST_SUB_COUNT (1u << PP_HIST_SUB_BITS)
#define PP_HIST_MAX_BITS  38 /* values up to 2^38 ns ≈ 275 s are resolved */
#define PP_HIST_MAX_NS    ((1ull << PP_HIST_MAX_BITS) - 1)
/* Bucket count: the exact range [0, SUB_COUNT) plus one group of SUB_COUNT linear buckets
 * per power of two from 2^SUB_BITS to 2^MAX_BITS (layout in hist.c). */
#define PP_HIST_BUCKETS ((PP_HIST_MAX_BITS - PP_HIST_SUB_BITS + 1) * PP_HIST_SUB_COUNT)

typedef struct pp_hist {
  uint64_t count;  /* samples recorded */
  uint64_t sum_ns; /* exact sum of recorded values (saturates at UINT64_MAX) */
  uint64_t min_ns; /* exact; UINT64_MAX when empty */
  uint64_t max_ns; /* exact; 0 when empty */
  uint64_t buckets[PP_HIST_BUCKETS];
} pp_hist;

/* A window histogram for ticks: `window` covers the current tick, `lifetime` everything
 * since init. pp_hist_window_roll() clears the window and keeps the lifetime. */
typedef struct pp_hist_window {
  pp_hist window;
  pp_hist lifetime;
} pp_hist_window;

void pp_hist_init(pp_hist *h); /* empty histogram; same as pp_hist_reset */
void pp_hist_reset(pp_hist *h);
void pp_hist_record(pp_hist *h, uint64_t value_ns);
void pp_hist_record_n(pp_hist *h, uint64_t value_ns, uint64_t n);
/* dst += src. */
void pp_hist_merge(pp_hist *dst, const pp_hist *src);
/* The value at percentile q (0..100) by the nearest-rank rule: the smallest recorded value v
 * such that at least q% of samples are <= v, reported as the midpoint of v's bucket (clamped
 * to [min, max], so p0 is min and p100 is max exactly). 0 when empty. */
uint64_t pp_hist_percentile(const pp_hist *h, double q);
/* Mean in ns (sum/count), 0 when empty. */
uint64_t pp_hist_mean(const pp_hist *h);

/* Internal, exposed for tests: the bucket index of a value and the range a bucket covers. */
uint32_t pp_hist__bucket_of(uint64_t value_ns);
void pp_hist__bucket_range(uint32_t bucket, uint64_t *lo_ns, uint64_t *hi_ns);

void pp_hist_window_init(pp_hist_window *w);
void pp_hist_window_record(pp_hist_window *w, uint64_t value_ns);
void pp_hist_window_roll(pp_hist_window *w);

#endif
