/* Reports: the summary table, the per-second timeline and the gnuplot figure of one run.
 * Text goes to a caller-supplied FILE; the plot writes a data file and a gnuplot script to a
 * temporary folder and runs gnuplot (the only place the library starts a process). */
#ifndef PP_SIM_REPORT_H
#define PP_SIM_REPORT_H

#include <stddef.h>
#include <stdio.h>

#include "sim/results.h"
#include "sim/scenario.h"

typedef struct pp_report_item {
  const char *name;
  const pp_summary *summary;
  const pp_timeline_row *timeline;
  size_t timeline_len;
  const pp_policy *policy; /* the policy it ran (autoscale), NULL for a static config */
} pp_report_item;

/* The comparison table, one row per configuration. */
void pp_report_summary(FILE *out, const pp_report_item *items, size_t n, double slo_ms);
/* The admission-control table, one row per configuration: its shed.rule and effective budget
 * (or "-" when it does not shed), requests served and shed, served per second over the
 * scenario's busiest phase (from the timelines, so they must be kept), and the queue time
 * (intended arrival to dispatch) p50/p99/max of the served requests with p99 / budget. */
void pp_report_admission(FILE *out, const pp_report_item *items, size_t n, const pp_scenario *scn);
/* The scenario's busiest phase (highest rate, the first of equals) as whole seconds
 * [*from_s, *to_s). 0, or -1 for a trace (no phases). */
int pp_report_busiest_phase(const pp_scenario *scn, uint32_t *from_s, uint32_t *to_s);
/* Mean served per second over timeline seconds [from_s, to_s); -1 when none are covered. */
double pp_report_rps_between(const pp_report_item *item, uint32_t from_s, uint32_t to_s);
/* One configuration's per-second table: t, rps, p50, p99, workers, queue p95, queue length. */
void pp_report_timeline(FILE *out, const pp_report_item *item);
/* A 4-panel PNG (latency p50/p99, rps, workers, queue p95) with one line per configuration.
 * Returns 0, or -1 with a sentence in errbuf (gnuplot missing, failed, ...). */
int pp_report_plot(const char *png_path, const char *title, const pp_report_item *items, size_t n,
                   char *errbuf, size_t errcap);

#endif
