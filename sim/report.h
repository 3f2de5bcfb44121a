/* Reports: the summary table, the per-second timeline and the gnuplot figure of one run.
 * Text goes to a caller-supplied FILE; the plot writes a data file and a gnuplot script to a
 * temporary folder and runs gnuplot (the only place the library starts a process). */
#ifndef PP_SIM_REPORT_H
#define PP_SIM_REPORT_H

#include <stddef.h>
#include <stdio.h>

#include "sim/results.h"

typedef struct pp_report_item {
  const char *name;
  const pp_summary *summary;
  const pp_timeline_row *timeline;
  size_t timeline_len;
} pp_report_item;

/* The comparison table, one row per configuration. */
void pp_report_summary(FILE *out, const pp_report_item *items, size_t n, double slo_ms);
/* One configuration's per-second table: t, rps, p50, p99, workers, queue p95, queue length. */
void pp_report_timeline(FILE *out, const pp_report_item *item);
/* A 4-panel PNG (latency p50/p99, rps, workers, queue p95) with one line per configuration.
 * Returns 0, or -1 with a sentence in errbuf (gnuplot missing, failed, ...). */
int pp_report_plot(const char *png_path, const char *title, const pp_report_item *items, size_t n,
                   char *errbuf, size_t errcap);

#endif
