/* Text tables and gnuplot figures for a run's results. */
#include "sim/report.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sim/units.h"

void pp_report_summary(FILE *out, const pp_report_item *items, size_t n, double slo_ms) {
  char a[24], b[24], c[24], d[24], m[24];
  fprintf(out, "%-22s %8s %8s %8s %8s %8s %11s %7s %7s %6s %6s %8s %9s\n", "config", "offered",
          "achieved", "p50", "p99", "p99.9", "excess_s", "shed", "timeout", "avg_w", "peak_w",
          "avg_mem", "worker_s");
  for (size_t i = 0; i < n; i++) {
    const pp_summary *s = items[i].summary;
    fprintf(out, "%-22s %8.1f %8.1f %8s %8s %8s %11.1f %7llu %7llu %6.2f %6u %8s %9.1f\n",
            items[i].name, s->offered_rps, s->achieved_rps,
            pp_units_format_ns(s->p50_ns, a, sizeof a), pp_units_format_ns(s->p99_ns, b, sizeof b),
            pp_units_format_ns(s->p999_ns, c, sizeof c), s->excess_latency_ns / 1e9,
            (unsigned long long)s->shed, (unsigned long long)s->timed_out, s->avg_workers,
            s->peak_workers, pp_units_format_bytes(s->avg_memory_bytes, m, sizeof m),
            s->worker_seconds);
    (void)d;
  }
  fprintf(out,
          "(latency from intended arrival over served requests; excess_s = total latency above "
          "the %.0fms SLO; achieved = served within the scenario's duration)\n",
          slo_ms);
}

int pp_report_busiest_phase(const pp_scenario *scn, uint32_t *from_s, uint32_t *to_s) {
  if (scn->process == PP_ARRIVALS_TRACE || scn->n_phases == 0) return -1;
  uint64_t start = 0, best_start = 0, best_end = 0;
  double best = -1;
  for (uint32_t i = 0; i < scn->n_phases; i++) {
    const pp_phase *ph = &scn->phases[i];
    double peak = ph->has_ramp && ph->rate_end > ph->rate ? ph->rate_end : ph->rate;
    if (peak > best) {
      best = peak;
      best_start = start;
      best_end = start + ph->duration_ns;
    }
    start += ph->duration_ns;
  }
  *from_s = (uint32_t)(best_start / 1000000000ull);
  *to_s = (uint32_t)(best_end / 1000000000ull);
  return 0;
}

double pp_report_rps_between(const pp_report_item *item, uint32_t from_s, uint32_t to_s) {
  uint64_t sum = 0, n = 0;
  for (size_t i = 0; i < item->timeline_len; i++) {
    const pp_timeline_row *r = &item->timeline[i];
    if (r->t_s < from_s || r->t_s >= to_s) continue;
    sum += r->completed;
    n++;
  }
  return n ? (double)sum / (double)n : -1;
}

void pp_report_admission(FILE *out, const pp_report_item *items, size_t n, const pp_scenario *scn) {
  uint32_t from = 0, to = 0;
  int have_phase = pp_report_busiest_phase(scn, &from, &to) == 0;
  char a[24], b[24], c[24], d[24];
  fprintf(out, "\nadmission\n%-22s %-9s %8s %8s %7s %9s %9s %9s %9s %7s %9s %9s %9s\n", "config",
          "rule", "budget", "served", "shed", "busy_rps", "queue95", "queue99", "queuemax",
          "q99/bud", "ovl_good", "ovl_p99", "std_p99");
  for (size_t i = 0; i < n; i++) {
    const pp_summary *s = items[i].summary;
    const pp_policy *p = items[i].policy;
    int sheds = p && p->shed_enabled;
    double budget = sheds ? (double)pp_policy_shed_budget_ns(p) : -1;
    double rps = have_phase ? pp_report_rps_between(&items[i], from, to) : -1;
    char ratio[16] = "-", rpsbuf[16] = "-";
    if (sheds && s->queue_p99_ns >= 0)
      snprintf(ratio, sizeof ratio, "%.2f", s->queue_p99_ns / budget);
    if (rps >= 0) snprintf(rpsbuf, sizeof rpsbuf, "%.1f", rps);
    char good[16] = "-", ovl[24] = "-", std[24] = "-";
    if (items[i].busy_latency && items[i].busy_s > 0) {
      snprintf(good, sizeof good, "%.1f", (double)items[i].busy_served / items[i].busy_s);
      if (items[i].busy_latency->count)
        pp_units_format_ns((double)pp_hist_percentile(items[i].busy_latency, 99), ovl, sizeof ovl);
      if (items[i].standing_latency && items[i].standing_latency->count)
        pp_units_format_ns((double)pp_hist_percentile(items[i].standing_latency, 99), std,
                           sizeof std);
    }
    fprintf(out, "%-22s %-9s %8s %8llu %7llu %9s %9s %9s %9s %7s %9s %9s %9s\n", items[i].name,
            sheds ? pp_shed_rule_name(p->shed_rule) : "-",
            sheds ? pp_units_format_ns(budget, a, sizeof a) : "-", (unsigned long long)s->completed,
            (unsigned long long)s->shed, rpsbuf, pp_units_format_ns(s->queue_p95_ns, b, sizeof b),
            pp_units_format_ns(s->queue_p99_ns, c, sizeof c),
            pp_units_format_ns(s->queue_max_ns, d, sizeof d), ratio, good, ovl, std);
  }
  if (have_phase)
    fprintf(out,
            "(served requests' queue time, intended arrival to dispatch; busy_rps = served per "
            "second over the busiest phase, %us-%us; ovl_good = served within the client timeout "
            "per second, ovl_p99 = served latency p99, of the requests arriving in every phase "
            "at the highest rate; std_p99 = the same after each such phase's first second)\n",
            from, to);
}

double pp_report_recovery_s(const pp_report_item *item, const pp_scenario *scn) {
  double best = 0, t = 0;
  uint64_t from = 0, to = 0;
  for (uint32_t i = 0; i < scn->n_phases; i++) {
    const pp_phase *ph = &scn->phases[i];
    if (i > 0) {
      const pp_phase *pr = &scn->phases[i - 1];
      double jump = ph->rate - (pr->has_ramp ? pr->rate_end : pr->rate);
      if (jump > best)
        best = jump, from = (uint64_t)(t / 1e9),
        to = (uint64_t)((t + (double)ph->duration_ns) / 1e9);
    }
    t += (double)ph->duration_ns;
  }
  if (best <= 0) return -1;
  double last = -1;
  for (size_t i = 0; i < item->timeline_len; i++) {
    const pp_timeline_row *r = &item->timeline[i];
    if (r->t_s >= from && r->t_s < to && r->p99_ns > (double)scn->slo_ns) last = r->t_s;
  }
  return last < 0 ? 0 : last + 1 - (double)from;
}

uint32_t pp_report_seconds_over_slo(const pp_report_item *item, const pp_scenario *scn) {
  uint32_t n = 0;
  for (size_t i = 0; i < item->timeline_len; i++) {
    const pp_timeline_row *r = &item->timeline[i];
    if ((uint64_t)r->t_s * 1000000000ull < scn->duration_ns && r->p99_ns > (double)scn->slo_ns) n++;
  }
  return n;
}

void pp_report_scaling(FILE *out, const pp_report_item *items, size_t n, const pp_scenario *scn) {
  char a[24];
  double static_mem = -1;
  /* The peak-provisioned static configuration: the static one with the most memory. */
  for (size_t i = 0; i < n; i++)
    if (!items[i].policy && items[i].summary->avg_memory_bytes > static_mem)
      static_mem = items[i].summary->avg_memory_bytes;
  fprintf(out, "\nscaling\n%-18s %3s %5s %3s %5s %5s %8s %8s %8s %4s %4s %5s %7s %7s %5s\n",
          "config", "sb", "tick", "act", "avgsb", "up/dn", "p99", "queue99", "excess_s", "rec",
          "over", "avg_w", "avg_mem", "peak", "mem/s");
  for (size_t i = 0; i < n; i++) {
    const pp_summary *s = items[i].summary;
    const pp_policy *p = items[i].policy;
    double rec = pp_report_recovery_s(&items[i], scn);
    char recbuf[16] = "-", ratio[16] = "-", sb[8] = "-", tick[16] = "-", updn[24] = "-", q[24];
    if (rec >= 0) snprintf(recbuf, sizeof recbuf, "%.0fs", rec);
    if (static_mem > 0) snprintf(ratio, sizeof ratio, "%.2f", s->avg_memory_bytes / static_mem);
    if (p) {
      snprintf(sb, sizeof sb, "%u", p->standby);
      pp_units_format_ns((double)p->tick_ns, tick, sizeof tick);
      snprintf(updn, sizeof updn, "%u/%u", items[i].scale_ups, items[i].scale_downs);
    }
    fprintf(out, "%-18s %3s %5s %3llu %5.2f %5s %8s %8s %8.1f %4s %4u %5.2f %5.0fMB %5.0fMB %5s\n",
            items[i].name, sb, tick, (unsigned long long)items[i].activations, items[i].avg_standby,
            updn, pp_units_format_ns(s->p99_ns, a, sizeof a),
            pp_units_format_ns(s->queue_p99_ns, q, sizeof q), s->excess_latency_ns / 1e9, recbuf,
            pp_report_seconds_over_slo(&items[i], scn), s->avg_workers, s->avg_memory_bytes / 1e6,
            s->peak_memory_bytes / 1e6, ratio);
  }
  fprintf(out, "(sb = standby, act = activations, avgsb = standby workers on average, up/dn = "
               "scale-up/down decisions, rec = seconds from the largest step up until per-second "
               "p99 stays under the SLO, over = seconds whose p99 is over it; memory = sum of PSS, "
               "docs/SIM.md; mem/s = avg_mem / the peak static config's)\n");
}

void pp_report_timeline(FILE *out, const pp_report_item *item) {
  char a[24], b[24], c[24];
  fprintf(out, "\ntimeline: %s\n", item->name);
  fprintf(out, "%6s %7s %9s %9s %6s %10s %8s %6s %7s\n", "t", "rps", "p50", "p99", "procs",
          "queue_p95", "queue", "shed", "timeout");
  for (size_t i = 0; i < item->timeline_len; i++) {
    const pp_timeline_row *r = &item->timeline[i];
    fprintf(out, "%5us %7llu %9s %9s %6u %10s %8lld %6llu %7llu\n", r->t_s,
            (unsigned long long)r->completed, pp_units_format_ns(r->p50_ns, a, sizeof a),
            pp_units_format_ns(r->p99_ns, b, sizeof b), r->workers,
            pp_units_format_ns(r->queue_p95_ns, c, sizeof c), (long long)r->queue_len,
            (unsigned long long)r->shed, (unsigned long long)r->timeouts);
  }
}

static void gp_quote(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') fputc('\\', f);
    fputc(*s, f);
  }
  fputc('"', f);
}

int pp_report_plot(const char *png_path, const char *title, const pp_report_item *items, size_t n,
                   char *errbuf, size_t errcap) {
  char dir[] = "/tmp/pp-sim-plot-XXXXXX";
  if (!mkdtemp(dir)) {
    snprintf(errbuf, errcap, "cannot create a temporary folder: %s", strerror(errno));
    return -1;
  }
  char data[64], script[64];
  snprintf(data, sizeof data, "%s/data.tsv", dir);
  snprintf(script, sizeof script, "%s/plot.gp", dir);
  FILE *f = fopen(data, "w");
  if (!f) {
    snprintf(errbuf, errcap, "cannot write %s: %s", data, strerror(errno));
    rmdir(dir);
    return -1;
  }
  for (size_t i = 0; i < n; i++) {
    fprintf(f, "# %s\n# t rps p50_ms p99_ms workers queue_p95_ms\n", items[i].name);
    for (size_t k = 0; k < items[i].timeline_len; k++) {
      const pp_timeline_row *r = &items[i].timeline[k];
      fprintf(f, "%u %llu ", r->t_s, (unsigned long long)r->completed);
      if (r->p50_ns >= 0)
        fprintf(f, "%.3f %.3f ", r->p50_ns / 1e6, r->p99_ns / 1e6);
      else
        fprintf(f, "NaN NaN ");
      fprintf(f, "%u ", r->workers);
      if (r->queue_p95_ns >= 0)
        fprintf(f, "%.3f\n", r->queue_p95_ns / 1e6);
      else
        fprintf(f, "NaN\n");
    }
    fprintf(f, "\n\n");
  }
  fclose(f);
  f = fopen(script, "w");
  if (!f) {
    snprintf(errbuf, errcap, "cannot write %s: %s", script, strerror(errno));
    unlink(data);
    rmdir(dir);
    return -1;
  }
  fprintf(f, "set terminal pngcairo size 1200,1100 noenhanced font \",10\"\nset output ");
  gp_quote(f, png_path);
  fprintf(f, "\nset multiplot layout 4,1 title ");
  gp_quote(f, title);
  uint32_t tmax = 1;
  for (size_t i = 0; i < n; i++)
    if (items[i].timeline_len && items[i].timeline[items[i].timeline_len - 1].t_s + 1 > tmax)
      tmax = items[i].timeline[items[i].timeline_len - 1].t_s + 1;
  fprintf(f,
          "\nset grid\nset key outside right\nset datafile missing \"NaN\"\n"
          "set xlabel \"t (s)\"\nset xrange [0:%u]\n",
          tmax);
  static const char *panels[][3] = {
      {"p50 latency (ms, log)", "3", "set logscale y"},
      {"completed rps", "2", "unset logscale y"},
      {"workers", "5", "unset logscale y"},
      {"queue p95 (ms)", "6", "unset logscale y"},
  };
  int have_latency = 0; /* a log axis with no point at all makes gnuplot fail */
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; k < items[i].timeline_len; k++)
      if (items[i].timeline[k].p50_ns > 0) have_latency = 1;
  for (int p = 0; p < 4; p++) {
    if (p == 0 && !have_latency) {
      fprintf(f, "set ylabel \"%s\"\nset yrange [0:1]\nplot 1/0 notitle\nset yrange [*:*]\n",
              panels[p][0]);
      continue;
    }
    fprintf(f, "%s\nset ylabel \"%s\"\nplot ", panels[p][2], panels[p][0]);
    for (size_t i = 0; i < n; i++) {
      fprintf(f, "%s\"%s\" index %zu using 1:%s with lines lw 2 title ", i ? ", " : "", data, i,
              panels[p][1]);
      gp_quote(f, items[i].name);
    }
    fprintf(f, "\n");
  }
  fprintf(f, "unset multiplot\n");
  fclose(f);
  pid_t pid = fork();
  if (pid < 0) {
    snprintf(errbuf, errcap, "fork failed: %s", strerror(errno));
    return -1;
  }
  if (pid == 0) {
    execlp("gnuplot", "gnuplot", script, (char *)NULL);
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  unlink(data);
  unlink(script);
  rmdir(dir);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    snprintf(errbuf, errcap,
             WIFEXITED(status) && WEXITSTATUS(status) == 127
                 ? "gnuplot is not installed (apt-get install gnuplot-nox)"
                 : "gnuplot failed (exit status %d)",
             WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return -1;
  }
  return 0;
}
