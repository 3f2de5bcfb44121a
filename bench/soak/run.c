/* The soak's run (soak.h): one server process, a sampler thread, one generator run per phase on
 * the main thread, the progress line, and the printed table. */
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

/* ---- progress ---- */

typedef struct progress_ctx {
  FILE *f;
  bool tty;
  char label[64];
  sampler *s;
  uint64_t last_line_ns;
} progress_ctx;

static void on_progress(const pb_progress *p, void *data) {
  progress_ctx *ctx = data;
  if (!ctx->tty && p->elapsed_ns < ctx->last_line_ns + 10 * SEC) return;
  ctx->last_line_ns = p->elapsed_ns;
  int32_t fds;
  uint64_t rss;
  pb_soak__sampler_now(ctx->s, &fds, &rss);
  fprintf(ctx->f,
          "%s[soak %s] %4.0fs  offered %" PRIu64 "  done %" PRIu64 "  rps %" PRIu64
          "  in-flight %" PRIu64 "  waiting %" PRIu64 "  conns %" PRIu64 "  fds %d  rss %.1f MB%s",
          ctx->tty ? "\r\033[K" : "", ctx->label, p->elapsed_ns / 1e9, p->offered, p->completed,
          p->completed_last_second, p->in_flight, p->waiting, p->open_conns, (int)fds,
          rss / 1048576.0, ctx->tty ? "" : "\n");
  fflush(ctx->f);
}

static void fmt_heap(int64_t v, char *buf, size_t len) {
  if (v < 0)
    snprintf(buf, len, "unknown");
  else
    snprintf(buf, len, "%" PRId64, v);
}

/* A steal percentage, or "unknown" (-1: /proc/stat unreadable, or the phase did not run). */
static void fmt_steal(double pct, char *buf, size_t len) {
  if (pct < 0)
    snprintf(buf, len, "unknown");
  else
    snprintf(buf, len, "%.1f%%", pct);
}

static void fmt_ms(double ms, char *buf, size_t len) {
  if (ms < 0)
    snprintf(buf, len, "-");
  else
    pb_fmt_ns((uint64_t)(ms * 1e6), buf, len);
}

static void print_phase_line(FILE *f, uint32_t cycle, uint32_t cycles, int phase,
                             const pb_soak_phase *p) {
  char heap[32], ok99[32], s99[32], sshed[32], sq[32], sr[32], steal[16];
  fmt_heap(p->heap_live_slots, heap, sizeof heap);
  fmt_steal(p->steal_pct, steal, sizeof steal);
  fmt_ms(p->p99_ok_ms, ok99, sizeof ok99);
  fmt_ms(p->p99_503_ms, s99, sizeof s99);
  fmt_heap(p->server_shed, sshed, sizeof sshed);
  fmt_heap(p->server_left_queued, sq, sizeof sq);
  fmt_heap(p->server_left_running, sr, sizeof sr);
  fprintf(f,
          "[soak] cycle %u/%u %-8s %6.1fs  requests %" PRIu64 "  2xx %" PRIu64 "  503 %" PRIu64
          "  413 %" PRIu64 "  other %" PRIu64 "  transport %" PRIu64 "  timeouts %" PRIu64
          "  cancelled %" PRIu64 "  failures %" PRIu64 "  p99 2xx %s  p99 503 %s  fds %d (max %d)"
          "  rss %.1f MB  heap slots %s  server: shed %s, left queued %s, left running %s"
          "  steal %s%s%s\n",
          cycle, cycles, pb_soak_phase_name(phase), p->duration_s, p->requests, p->ok, p->shed_503,
          p->too_large_413, p->other_status, p->transport_errors, p->timeouts, p->cancelled,
          p->failures, ok99, s99, (int)p->fds_end, (int)p->fds_max, p->rss_end / 1048576.0, heap,
          sshed, sq, sr, steal, p->transport_causes[0] ? "  transport causes: " : "",
          p->transport_causes);
  fflush(f);
}

/* ---- the run ---- */

static bool server_alive(pb_server *srv) {
  if (srv->exited) return false;
  int st;
  if (waitpid(srv->pid, &st, WNOHANG) == srv->pid) {
    srv->exited = true;
    srv->status = st;
    return false;
  }
  return true;
}

static int write_policy(const char *path, uint64_t budget_ns, char *err, size_t errlen) {
  FILE *f = fopen(path, "w");
  if (!f) {
    snprintf(err, errlen, "cannot write %.300s: %s", path, strerror(errno));
    return -1;
  }
  /* Everything else keeps the policy defaults (docs/CONTROL.md). */
  fprintf(f,
          "# written by pp-bench soak: admission control with a fixed budget\n"
          "shed:\n  enabled: true\n  budget: %" PRIu64 "ms\n",
          (uint64_t)(budget_ns / MS));
  fclose(f);
  return 0;
}

/* One phase: schedule, generator, tally, samples. Returns 0, or -1 with out->error set. */
static int run_phase(const pb_soak_config *c, uint32_t cycle, int phase, double capacity,
                     pb_server *srv, int stats_port, sampler *smp, char *statsbuf,
                     progress_ctx *pctx, pb_soak_phase *ph, pb_soak_result *out) {
  pb_schedule sched;
  pb_kind_spec *kinds;
  uint64_t seed = c->seed * 1000003u + cycle * 10u + (uint64_t)phase;
  if (pb_soak_schedule(c, phase, capacity, seed, &sched, &kinds) < 0) {
    snprintf(out->error, sizeof out->error, "out of memory building the %s schedule",
             pb_soak_phase_name(phase));
    return -1;
  }
  pb_result *res = calloc(sched.count ? sched.count : 1, sizeof *res);
  if (!res) {
    pb_schedule_dispose(&sched);
    free(kinds);
    snprintf(out->error, sizeof out->error, "out of memory");
    return -1;
  }
  snprintf(pctx->label, sizeof pctx->label, "cycle %u/%u %s", cycle + 1, c->cycles,
           pb_soak_phase_name(phase));
  pctx->last_line_ns = 0;
  pb_gen_counters counters;
  pb_gen_config g = {.host = "127.0.0.1",
                     .port = srv->port,
                     .max_connections = c->max_connections,
                     .timeout_ns = c->timeout_ns,
                     .progress = on_progress,
                     .data = pctx,
                     .proto = c->proto,
                     .h2_connections = c->h2_connections,
                     .counters = &counters,
                     .kinds = kinds};
  pb_soak__sampler_take(smp, NULL, NULL);
  server_counts before, after;
  pb_soak__read_counts(stats_port, statsbuf, &before);
  uint64_t t = uv_hrtime();
  pb_cpu_times m0 = pb_cpu_times_now();
  char err[256];
  int rc = pb_gen_run(&g, &sched, res, NULL, err, sizeof err);
  ph->steal_pct = pb_steal_pct(m0, pb_cpu_times_now());
  if (pctx->tty) fprintf(pctx->f, "\r\033[K");
  ph->duration_s = (uv_hrtime() - t) / 1e9;
  if (rc < 0) {
    snprintf(out->error, sizeof out->error, "generator (%s): %s", pb_soak_phase_name(phase), err);
  } else {
    pb_soak_tally(res, sched.count, phase == PB_SOAK_STEADY || phase == PB_SOAK_RECOVERY, ph);
    ph->fds_end = pb_soak__count_fds(srv->pid);
    ph->rss_end = pb_soak__read_rss(srv->pid);
    ph->heap_live_slots = pb_soak__read_heap(stats_port, statsbuf);
    pb_soak__read_counts(stats_port, statsbuf, &after);
    ph->server_shed = pb_soak__delta(before.shed, after.shed);
    ph->server_left_queued = pb_soak__delta(before.left_queued, after.left_queued);
    ph->server_left_running = pb_soak__delta(before.left_running, after.left_running);
    pb_soak__sampler_take(smp, &ph->fds_max, &ph->rss_max);
    if (ph->fds_end > ph->fds_max) ph->fds_max = ph->fds_end;
    if (ph->rss_end > ph->rss_max) ph->rss_max = ph->rss_end;
  }
  free(res);
  free(kinds);
  pb_schedule_dispose(&sched);
  return rc < 0 ? -1 : 0;
}

void pb_soak_run(const pb_soak_config *c, pb_soak_result *out) {
  memset(out, 0, sizeof *out);
  out->fds_baseline = -1;
  out->heap_baseline = -1;
  uint64_t wall0 = uv_hrtime();
  FILE *pf = c->progress ? c->progress : stderr;
  const char *log_dir = c->log_dir ? c->log_dir : "/tmp";
  if (mkdir(log_dir, 0755) < 0 && errno != EEXIST) {
    snprintf(out->error, sizeof out->error, "cannot create %.300s: %s", log_dir, strerror(errno));
    return;
  }
  pb_server_spec spec = c->spec;
  if (!spec.port) spec.port = pb_free_port();
  if (spec.kind == PB_SERVER_PUMAPLUS && !spec.stats_port) spec.stats_port = pb_free_port();
  if (!spec.log_path[0])
    snprintf(spec.log_path, sizeof spec.log_path, "%s/%s.log", log_dir, spec.name);
  if (spec.kind == PB_SERVER_PUMAPLUS && spec.shed && !spec.policy_path[0] && c->shed_budget_ns) {
    snprintf(spec.policy_path, sizeof spec.policy_path, "%s/%s.policy.yaml", log_dir, spec.name);
    if (write_policy(spec.policy_path, c->shed_budget_ns, out->error, sizeof out->error) < 0)
      return;
  }
  snprintf(out->protocol, sizeof out->protocol, "%s", pb_proto_label(c->proto, 0));
  char *argv[40];
  char storage[4096];
  int argc = pb_server_argv(&spec, argv, 40, storage, sizeof storage);
  for (int i = 0; i < argc; i++) {
    size_t len = strlen(out->server_cmd);
    snprintf(out->server_cmd + len, sizeof out->server_cmd - len, "%s%s", i ? " " : "", argv[i]);
  }
  out->capacity_estimated = !(c->capacity_rps > 0);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  out->capacity_rps = out->capacity_estimated
                          ? pb_soak_capacity(spec.workers, spec.threads, MIX_CPU_MS, MIX_SLEEP_MS,
                                             cores > 0 ? (uint32_t)cores : 1)
                          : c->capacity_rps;
  out->cycles = calloc(c->cycles ? c->cycles : 1, sizeof *out->cycles);
  char *statsbuf = spec.kind == PB_SERVER_PUMAPLUS ? malloc(STATS_CAP) : NULL;
  if (!out->cycles || (spec.kind == PB_SERVER_PUMAPLUS && !statsbuf)) {
    snprintf(out->error, sizeof out->error, "out of memory");
    free(statsbuf);
    return;
  }
  for (uint32_t cy = 0; cy < c->cycles; cy++)
    for (int p = 0; p < PB_SOAK_PHASES; p++)
      out->cycles[cy].phase[p].steal_pct = -1; /* until the phase has run */
  int stats_port = spec.kind == PB_SERVER_PUMAPLUS ? spec.stats_port : 0;

  pb_server srv;
  char err[256];
  fprintf(pf, "[soak] starting: %s\n", out->server_cmd);
  if (pb_server_start(&spec, &srv, err, sizeof err) < 0) {
    snprintf(out->error, sizeof out->error, "%s", err);
    free(statsbuf);
    return;
  }
  if (c->running_pgid) *c->running_pgid = (sig_atomic_t)srv.pid;
  if (pb_server_wait_ready(&srv, "127.0.0.1", PATH_HELLO, 60 * SEC, err, sizeof err) < 0) {
    snprintf(out->error, sizeof out->error, "%.200s (log: %.250s)", err, spec.log_path);
    goto stop;
  }
  /* Warm-up: one second of the steady mix, so every path (and the upload path) has been taken
   * before the baseline is read. */
  {
    pb_soak_config w = *c;
    w.phase_ns[PB_SOAK_STEADY] = SEC;
    w.steady_rps = c->steady_rps < 50 ? c->steady_rps : 50;
    pb_schedule ws;
    pb_kind_spec *wk;
    if (pb_soak_schedule(&w, PB_SOAK_STEADY, out->capacity_rps, c->seed, &ws, &wk) == 0) {
      pb_result *wr = calloc(ws.count ? ws.count : 1, sizeof *wr);
      pb_gen_config g = {.host = "127.0.0.1",
                         .port = srv.port,
                         .timeout_ns = c->timeout_ns,
                         .proto = c->proto,
                         .h2_connections = c->h2_connections,
                         .kinds = wk};
      if (wr) pb_gen_run(&g, &ws, wr, NULL, NULL, 0);
      free(wr);
      free(wk);
      pb_schedule_dispose(&ws);
    }
  }
  sampler smp = {
      .pid = srv.pid, .stats_port = stats_port, .fds_now = -1, .fds_max = -1, .heap = -1};
  smp.buf = stats_port ? malloc(STATS_CAP) : NULL;
  uv_mutex_init(&smp.lock);
  uv_cond_init(&smp.cond);
  bool sampling = uv_thread_create(&smp.thread, pb_soak__sampler_main, &smp) == 0;
  if (!sampling) {
    snprintf(out->error, sizeof out->error, "cannot start the sampler thread");
    goto sampler_done;
  }
  out->fds_baseline = pb_soak__settle_fds(srv.pid, -1, c->settle_ns);
  out->rss_baseline = pb_soak__read_rss(srv.pid);
  out->heap_baseline = pb_soak__read_heap(stats_port, statsbuf);
  {
    char heap[32];
    fmt_heap(out->heap_baseline, heap, sizeof heap);
    fprintf(pf, "[soak] baseline: fds %d  rss %.1f MB  heap slots %s\n", (int)out->fds_baseline,
            out->rss_baseline / 1048576.0, heap);
  }
  progress_ctx pctx = {.f = pf, .tty = isatty(fileno(pf)), .s = &smp};
  bool ok = true;
  for (uint32_t cy = 0; cy < c->cycles && ok; cy++) {
    pb_soak_cycle *cyc = &out->cycles[cy];
    for (int p = 0; p < PB_SOAK_PHASES && ok; p++) {
      uint64_t gap = p > 0 ? c->gap_ns : 0;
      if (p == PB_SOAK_RECOVERY) gap += c->recovery_gap_ns;
      if (gap) pb_soak__sleep_ns(gap);
      pb_soak_phase *ph = &cyc->phase[p];
      if (run_phase(c, cy, p, out->capacity_rps, &srv, stats_port, &smp, statsbuf, &pctx, ph, out) <
          0) {
        ok = false;
        break;
      }
      print_phase_line(pf, cy + 1, c->cycles, p, ph);
      if (!server_alive(&srv)) {
        snprintf(out->error, sizeof out->error,
                 "the server exited during cycle %u %s (status %d; log: %.300s)", cy + 1,
                 pb_soak_phase_name(p),
                 WIFEXITED(srv.status) ? WEXITSTATUS(srv.status) : -WTERMSIG(srv.status),
                 spec.log_path);
        ok = false;
      }
    }
    if (!ok) break;
    cyc->fds_end = pb_soak__settle_fds(srv.pid, out->fds_baseline, c->settle_ns);
    cyc->rss_end = pb_soak__read_rss(srv.pid);
    cyc->heap_live_slots = pb_soak__read_heap(stats_port, statsbuf);
    char heap[32];
    fmt_heap(cyc->heap_live_slots, heap, sizeof heap);
    fprintf(pf,
            "[soak] cycle %u/%u end (settled): fds %d (baseline %d)  rss %.1f MB  heap slots %s\n",
            cy + 1, c->cycles, (int)cyc->fds_end, (int)out->fds_baseline, cyc->rss_end / 1048576.0,
            heap);
    out->n_cycles = cy + 1;
  }
  out->ran = ok && out->n_cycles == c->cycles;
  uv_mutex_lock(&smp.lock);
  smp.stop = true;
  uv_cond_signal(&smp.cond);
  uv_mutex_unlock(&smp.lock);
  uv_thread_join(&smp.thread);
sampler_done:
  uv_cond_destroy(&smp.cond);
  uv_mutex_destroy(&smp.lock);
  free(smp.buf);
stop:
  pb_server_stop(&srv, 10 * SEC);
  if (c->running_pgid) *c->running_pgid = 0;
  free(statsbuf);
  int32_t ends[4096];
  size_t n_ends = 0;
  for (uint32_t cy = 0; cy < out->n_cycles; cy++) {
    pb_soak_cycle *cyc = &out->cycles[cy];
    if (n_ends < sizeof ends / sizeof ends[0]) ends[n_ends++] = cyc->fds_end;
    for (int p = 0; p < PB_SOAK_PHASES; p++) {
      out->requests += cyc->phase[p].requests;
      out->failures += cyc->phase[p].failures;
      out->transport_errors += cyc->phase[p].transport_errors;
    }
  }
  out->fds_flat = pb_soak_fds_flat(out->fds_baseline, ends, n_ends, c->fd_tolerance);
  out->passed = out->ran && out->failures == 0 && out->fds_flat;
  out->wall_s = (uv_hrtime() - wall0) / 1e9;
}

void pb_soak_print(FILE *f, const pb_soak_config *c, const pb_soak_result *r) {
  fprintf(f, "soak: %s, %s, %u cycle%s; capacity %.0f rps (%s); overload %.1fx = %.0f rps\n",
          c->spec.name, r->protocol, c->cycles, c->cycles == 1 ? "" : "s", r->capacity_rps,
          r->capacity_estimated ? "estimated from workers x threads for /mix/2/20" : "given",
          c->overload_x, c->overload_x * r->capacity_rps);
  fprintf(f, "server: %s\n", r->server_cmd);
  if (!r->ran && r->error[0]) fprintf(f, "ERROR: %s\n", r->error);
  char heap[32];
  fmt_heap(r->heap_baseline, heap, sizeof heap);
  fprintf(f, "baseline before cycle 1: fds %d  rss %.1f MB  heap slots %s\n\n",
          (int)r->fds_baseline, r->rss_baseline / 1048576.0, heap);
  fprintf(f,
          "%-5s %-8s %7s %9s %9s %7s %5s %5s %5s %7s %6s %13s %7s %9s %9s %7s %7s %7s %10s %8s\n",
          "cycle", "phase", "secs", "requests", "2xx", "503", "413", "other", "trans", "timeout",
          "cancel", "srv-left q/r", "FAIL", "p99 2xx", "p99 503", "fds end", "fds max", "rss MB",
          "heap slots", "steal");
  for (uint32_t cy = 0; cy < r->n_cycles; cy++) {
    const pb_soak_cycle *cyc = &r->cycles[cy];
    for (int p = 0; p < PB_SOAK_PHASES; p++) {
      const pb_soak_phase *ph = &cyc->phase[p];
      char ok99[32], s99[32], fail[16], left[48], steal[16];
      fmt_steal(ph->steal_pct, steal, sizeof steal);
      fmt_ms(ph->p99_ok_ms, ok99, sizeof ok99);
      fmt_ms(ph->p99_503_ms, s99, sizeof s99);
      fmt_heap(ph->heap_live_slots, heap, sizeof heap);
      if (p == PB_SOAK_STEADY || p == PB_SOAK_RECOVERY)
        snprintf(fail, sizeof fail, "%" PRIu64, ph->failures);
      else
        snprintf(fail, sizeof fail, "-");
      if (ph->server_left_queued >= 0 && ph->server_left_running >= 0)
        snprintf(left, sizeof left, "%" PRId64 "/%" PRId64, ph->server_left_queued,
                 ph->server_left_running);
      else
        snprintf(left, sizeof left, "unknown");
      fprintf(f,
              "%-5u %-8s %7.1f %9" PRIu64 " %9" PRIu64 " %7" PRIu64 " %5" PRIu64 " %5" PRIu64
              " %5" PRIu64 " %7" PRIu64 " %6" PRIu64 " %13s %7s %9s %9s %7d %7d %7.1f %10s %8s\n",
              cy + 1, pb_soak_phase_name(p), ph->duration_s, ph->requests, ph->ok, ph->shed_503,
              ph->too_large_413, ph->other_status, ph->transport_errors, ph->timeouts,
              ph->cancelled, left, fail, ok99, s99, (int)ph->fds_end, (int)ph->fds_max,
              ph->rss_end / 1048576.0, heap, steal);
    }
    fmt_heap(cyc->heap_live_slots, heap, sizeof heap);
    fprintf(f,
            "%-5u %-8s %7s %9s %9s %7s %5s %5s %5s %7s %6s %13s %7s %9s %9s %7d %7s %7.1f %10s\n",
            cy + 1, "end", "", "", "", "", "", "", "", "", "", "", "", "", "", (int)cyc->fds_end,
            "", cyc->rss_end / 1048576.0, heap);
  }
  fprintf(f,
          "\ntotal: %" PRIu64 " requests in %.0fs; failures in steady+recovery %" PRIu64
          "; transport errors %" PRIu64 "\n",
          r->requests, r->wall_s, r->failures, r->transport_errors);
  fprintf(f, "descriptors: baseline %d, end of cycle", (int)r->fds_baseline);
  for (uint32_t cy = 0; cy < r->n_cycles; cy++)
    fprintf(f, " %d", (int)r->cycles[cy].fds_end);
  fprintf(f, " (tolerance +-%u): %s\n", c->fd_tolerance, r->fds_flat ? "flat" : "NOT FLAT");
  if (r->n_cycles && r->heap_baseline >= 0 && r->cycles[r->n_cycles - 1].heap_live_slots >= 0)
    fprintf(f, "heap: live slots %+" PRId64 " from baseline to the last cycle's end\n",
            r->cycles[r->n_cycles - 1].heap_live_slots - r->heap_baseline);
  else
    fprintf(f, "heap: live slots unknown (the server's /stats does not report "
               "worker_status[].last_status.heap_live_slots)\n");
  if (r->passed)
    fprintf(f, "verdict: PASS (0 steady/recovery failures, descriptors flat)\n");
  else
    fprintf(f, "verdict: FAIL (%s%s%s)\n", !r->ran ? "did not complete; " : "",
            r->failures ? "steady/recovery failures; " : "",
            r->fds_flat ? "" : "descriptors not flat");
}

void pb_soak_result_dispose(pb_soak_result *r) {
  free(r->cycles);
  r->cycles = NULL;
  r->n_cycles = 0;
}
