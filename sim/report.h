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
  const pp_policy *policy;         /* the policy it ran (autoscale), NULL for a static config */
  uint64_t activations;            /* standby workers activated (pp_sim_result.activations) */
  double avg_standby;              /* standby workers, time-averaged (pp_sim_result.avg_standby) */
  uint32_t scale_ups;              /* decisions that added workers (spawn_worker ticks) */
  uint32_t scale_downs;            /* decisions that removed workers (retire_worker ticks) */
  const pp_hist *busy_latency;     /* pp_sim_result.busy_latency (NULL: not known) */
  const pp_hist *standing_latency; /* pp_sim_result.standing_latency */
  uint64_t busy_served;            /* pp_sim_result.busy_served */
  double busy_s;                   /* pp_sim_result.busy_s */
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
/* Recovery after the scenario's largest step up (the biggest rise of the rate at a phase
 * boundary): seconds from the boundary to the end of the last second of that phase whose p99
 * (by arrival second, from the timeline) is over `slo_ns`; 0 when none is. -1 when the
 * scenario has no rise at a boundary (ramps only, or a trace). */
double pp_report_recovery_s(const pp_report_item *item, const pp_scenario *scn);
/* Seconds of the run (timeline rows before the scenario's end) whose p99 is over `slo_ns`. */
uint32_t pp_report_seconds_over_slo(const pp_report_item *item, const pp_scenario *scn);
/* The scaling table, one row per configuration: standby, predict, tick, activations, average
 * standby workers, scale-up and scale-down decisions, p99, queue p99, excess latency, recovery,
 * seconds over the SLO, average workers and memory (the sum of PSS of docs/SIM.md's model), and
 * memory relative to the static configuration with the most (peak-provisioned). */
void pp_report_scaling(FILE *out, const pp_report_item *items, size_t n, const pp_scenario *scn);
/* One configuration's per-second table: t, rps, p50, p99, workers, queue p95, queue length. */
void pp_report_timeline(FILE *out, const pp_report_item *item);
/* A 4-panel PNG (latency p50/p99, rps, workers, queue p95) with one line per configuration.
 * Returns 0, or -1 with a sentence in errbuf (gnuplot missing, failed, ...). */
int pp_report_plot(const char *png_path, const char *title, const pp_report_item *items, size_t n,
                   char *errbuf, size_t errcap);

#endif
