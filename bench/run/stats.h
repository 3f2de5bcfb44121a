/* Turning per-request results into what pp-bench reports: a summary, a per-second timeline,
 * an HDR-style percentile spectrum and a per-request CSV log. Pure functions over arrays
 * (plus stdio writers); no clocks, no sockets.
 *
 * Latency is always measured from the intended start. The latency histogram holds successes
 * (2xx) and timeouts (recorded at the timeout, a lower bound: the client gave up there), so a
 * server that times out requests cannot look fast by losing them; fast 503s (shed) and errors
 * are counted, not folded into latency. */
#ifndef PP_BENCH_STATS_H
#define PP_BENCH_STATS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "bench/gen/gen.h"
#include "control/hist.h"

typedef struct pb_summary {
  uint64_t offered;                    /* arrivals in the schedule */
  uint64_t outcomes[PB_OUTCOME_COUNT]; /* by pb_outcome; sums to offered */
  uint64_t schedule_span_ns;           /* last intended time (offered rps = offered / span) */
  uint64_t completion_span_ns;         /* first intended .. last completion */
  double offered_rps;
  double achieved_rps;    /* 2xx per second over the completion span; meaningless if !check_ok */
  pp_hist latency;        /* ok + timeouts (at timeout_ns), from intended start */
  pp_hist pacer_lateness; /* intended -> dispatched: the generator's own lateness */
  pp_hist send_lateness;  /* intended -> written (adds waiting for a connection) */
  uint64_t timeout_ns;
  uint64_t conns_opened;       /* distinct connections used */
  char conn_error_causes[160]; /* "ECONNRESET 500, EOF 66" (most frequent first), "" if none */
  bool check_ok;               /* the success check passed */
  char check_reason[160];
  /* The hypervisor's steal over the generator's run, % of all CPU time (pb_steal_pct); -1 when
   * unknown. */
  double steal_pct;
} pb_summary;

/* Success check: at least one 2xx and (http_error + conn_error) <= max_error_ratio * offered.
 * Timeouts and shed are outcomes a server may legitimately produce under overload; they are
 * reported, not failed. */
void pb_summarize(const pb_result *r, size_t n, uint64_t timeout_ns, double max_error_ratio,
                  pb_summary *out);

/* One row per second of the run (by completion time, as clients see it). */
typedef struct pb_second {
  uint32_t t;       /* seconds since run start */
  uint32_t offered; /* arrivals whose intended time falls in this second */
  uint32_t ok;      /* 2xx completed in this second */
  uint32_t shed, errors, timeouts;
  uint64_t p50_ns, p99_ns, max_ns; /* over ok responses completed in this second */
} pb_second;

/* Fills up to `max_rows` rows (second 0 .. last completion) and returns the number of rows
 * needed (which may exceed max_rows; call again with a bigger array). */
size_t pb_timeline(const pb_result *r, size_t n, pb_second *rows, size_t max_rows);

/* Human-readable duration: "830us", "27.6ms", "2.73s". Writes into buf and returns it. */
const char *pb_fmt_ns(uint64_t ns, char *buf, size_t len);

void pb_summary_print(FILE *f, const char *label, const pb_summary *s);
/* HdrHistogram-style percentile distribution: Value(ms) Percentile TotalCount 1/(1-P). */
void pb_spectrum_print(FILE *f, const pp_hist *h);
/* Per-request CSV: header line then one line per result. `paths` names the kinds. */
void pb_csv_write(FILE *f, const pb_result *r, size_t n, char *const *paths);

#endif
