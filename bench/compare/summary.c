/* `pp-bench compare`'s tables (compare.h): the line printed after each round and the summary
 * of medians and ratios against puma and puma8. */
#include "bench/compare/compare.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <uv.h>

#include "bench/gen/gen.h"
#include "bench/run/run.h"
#include "bench/gen/schedule.h"
#include "bench/run/stats.h"

/* ---- tables ---- */

static const char *fmt_us(double us, char *buf, size_t len) {
  if (us < 0) return "-";
  return pb_fmt_ns((uint64_t)(us * 1e3 + 0.5), buf, len);
}

static const char *fmt_num(double v, const char *fmt, char *buf, size_t len) {
  if (v < 0) return "-";
  snprintf(buf, len, fmt, v);
  return buf;
}

/* The width of the server column: the longest label, at least 8 ("pumaplus"). */
static int label_width(const pb_compare_config *c) {
  size_t w = 8;
  for (size_t i = 0; i < c->n_servers; i++)
    if (strlen(pb_cmp_label(c, i)) > w) w = strlen(pb_cmp_label(c, i));
  return (int)w;
}

void pb_compare_print_round(FILE *f, const pb_compare_config *c, const pb_compare_result *r,
                            uint32_t round) {
  int w = label_width(c);
  if (round)
    fprintf(f, "\nround %u of %u (closed loop: wrk -t1 -c%u %.0fs %s; open loop: %.0f rps %.0fs)\n",
            round, c->rounds, c->conns, c->dur_ns / 1e9, c->path, c->rate, c->rate_dur_ns / 1e9);
  fprintf(f, "%5s %-6s %-*s %9s %9s %9s %8s %8s %8s %5s %6s %9s %9s %9s %11s %6s %7s  %s\n",
          "round", "shape", w, "server", "req/s", "p50", "p99", "cpu_us", "front_us", "ruby_us",
          "procs", "steal%", "open_p50", "open_p99", "open_p999", "open_ok", "steal%", "attempt",
          "errors");
  for (size_t i = 0; i < r->n_cells; i++) {
    const pb_cmp_cell *x = &r->cells[i];
    if (round && x->round != round) continue;
    char shape[24], a[32], b[32], d[32], e[32], g[32], h[32], k[32], l[32], ok[40];
    snprintf(shape, sizeof shape, "%ux%u", c->shapes[x->shape].workers,
             c->shapes[x->shape].threads);
    const char *name = pb_cmp_label(c, x->server);
    if (!x->ran) {
      fprintf(f, "%5u %-6s %-*s FAILED: %s\n", x->round, shape, w, name, x->error);
      continue;
    }
    if (x->open_ran)
      snprintf(ok, sizeof ok, "%" PRIu64 "/%" PRIu64, x->open_ok, x->open_offered);
    else
      snprintf(ok, sizeof ok, "%s", c->rate > 0 ? "FAILED" : "-");
    char errs[512] = "";
    if (x->wrk.non2xx)
      snprintf(errs + strlen(errs), sizeof errs - strlen(errs), "non2xx %" PRIu64 " ",
               x->wrk.non2xx);
    uint64_t sock =
        x->wrk.sock_connect + x->wrk.sock_read + x->wrk.sock_write + x->wrk.sock_timeout;
    if (sock)
      snprintf(errs + strlen(errs), sizeof errs - strlen(errs),
               "socket %" PRIu64 " (connect %" PRIu64 " read %" PRIu64 " write %" PRIu64
               " timeout %" PRIu64 ") ",
               sock, x->wrk.sock_connect, x->wrk.sock_read, x->wrk.sock_write, x->wrk.sock_timeout);
    if (x->open_ran && x->open_ok != x->open_offered)
      snprintf(errs + strlen(errs), sizeof errs - strlen(errs),
               "open: shed %" PRIu64 " http %" PRIu64 " conn %" PRIu64 " timeout %" PRIu64 " ",
               x->open_shed, x->open_http_errors, x->open_conn_errors, x->open_timeouts);
    if (c->rate > 0 && !x->open_ran)
      snprintf(errs + strlen(errs), sizeof errs - strlen(errs), "open: %.200s ", x->open_error);
    char st[16], ost[16], att[24], marks[24];
    /* attempt: the kept one of how many (-max-steal); STEAL: still above the limit, kept. */
    snprintf(att, sizeof att, "%u/%u", x->attempt ? x->attempt : 1, x->attempts ? x->attempts : 1);
    snprintf(marks, sizeof marks, "%s%s", x->has_errors ? "ERRORS " : "",
             x->steal_over ? "STEAL " : "");
    fprintf(f, "%5u %-6s %-*s %9.0f %9s %9s %8s %8s %8s %5u %6s %9s %9s %9s %11s %6s %7s  %s%s\n",
            x->round, shape, w, name, x->wrk.rps, fmt_us(x->wrk.p50_us, a, sizeof a),
            fmt_us(x->wrk.p99_us, b, sizeof b), fmt_num(x->cpu_us_per_req, "%.1f", d, sizeof d),
            fmt_num(x->frontend_us_per_req, "%.1f", e, sizeof e),
            fmt_num(x->ruby_us_per_req, "%.1f", g, sizeof g), x->procs,
            fmt_num(x->steal_pct, "%.1f", st, sizeof st), fmt_us(x->open_p50_us, h, sizeof h),
            fmt_us(x->open_p99_us, k, sizeof k), fmt_us(x->open_p999_us, l, sizeof l), ok,
            fmt_num(x->open_steal_pct, "%.1f", ost, sizeof ost), att, marks[0] ? marks : "-", errs);
    if (x->note[0]) fprintf(f, "      note: %s\n", x->note);
  }
}

static const pb_cmp_median *find_median(const pb_cmp_median *med, const pb_compare_config *c,
                                        size_t shape, pb_cmp_server server) {
  for (size_t s = 0; s < c->n_servers; s++)
    if (c->servers[s] == server) return &med[shape * c->n_servers + s];
  return NULL;
}

static const char *ratio(double a, double b, char *buf, size_t len) {
  if (a < 0 || b <= 0) return "-";
  snprintf(buf, len, "%.3g", a / b);
  return buf;
}

void pb_compare_print_summary(FILE *f, const pb_compare_config *c, const pb_compare_result *r) {
  size_t n = c->n_shapes * c->n_servers;
  pb_cmp_median *med = calloc(n ? n : 1, sizeof *med);
  if (!med) return;
  pb_cmp_medians(r->cells, r->n_cells, c->n_shapes, c->n_servers, med);
  int w = label_width(c);
  fprintf(f, "\nmedians over the rounds that ran (min..max); errors = rounds with errors (kept "
             "in the medians)\n");
  fprintf(f, "%-6s %-*s %6s %6s %22s %9s %9s %8s %8s %8s %9s %9s %9s\n", "shape", w, "server",
          "rounds", "errors", "req/s (min..max)", "p50", "p99", "cpu_us", "front_us", "ruby_us",
          "open_p50", "open_p99", "open_p999");
  for (size_t i = 0; i < n; i++) {
    const pb_cmp_median *m = &med[i];
    char shape[24], rps[64], a[32], b[32], d[32], e[32], g[32], h[32], k[32], l[32];
    snprintf(shape, sizeof shape, "%ux%u", c->shapes[m->shape].workers,
             c->shapes[m->shape].threads);
    const pb_cmp_stat *s = &m->m[PB_CMP_RPS];
    if (s->n)
      snprintf(rps, sizeof rps, "%.0f (%.0f..%.0f)", s->med, s->min, s->max);
    else
      snprintf(rps, sizeof rps, "-");
    char rounds[16];
    snprintf(rounds, sizeof rounds, "%u/%u", m->rounds_ran, m->rounds_ran + m->rounds_failed);
    fprintf(f, "%-6s %-*s %6s %6u %22s %9s %9s %8s %8s %8s %9s %9s %9s\n", shape, w,
            pb_cmp_label(c, m->server), rounds, m->rounds_with_errors, rps,
            fmt_us(m->m[PB_CMP_P50].med, a, sizeof a), fmt_us(m->m[PB_CMP_P99].med, b, sizeof b),
            fmt_num(m->m[PB_CMP_CPU].med, "%.1f", d, sizeof d),
            fmt_num(m->m[PB_CMP_FRONTEND].med, "%.1f", e, sizeof e),
            fmt_num(m->m[PB_CMP_RUBY].med, "%.1f", g, sizeof g),
            fmt_us(m->m[PB_CMP_OPEN_P50].med, h, sizeof h),
            fmt_us(m->m[PB_CMP_OPEN_P99].med, k, sizeof k),
            fmt_us(m->m[PB_CMP_OPEN_P999].med, l, sizeof l));
  }
  const pb_cmp_server refs[2] = {PB_CMP_PUMA, PB_CMP_PUMA8};
  for (int ri = 0; ri < 2; ri++) {
    bool have = false;
    for (size_t s = 0; s < c->n_servers; s++)
      if (c->servers[s] == refs[ri]) have = true;
    if (!have) continue;
    const char *ref = pb_cmp_server_name(refs[ri]);
    fprintf(f,
            "\nratios against %s (medians): req/s x, CPU per request x, open-loop p99 x; "
            "ruby_share = pumaplus's Ruby CPU / %s's whole CPU per request\n",
            ref, ref);
    fprintf(f, "%-6s %-*s %8s %8s %9s %10s\n", "shape", w, "server", "req/s", "cpu", "open_p99",
            "ruby_share");
    for (size_t sh = 0; sh < c->n_shapes; sh++) {
      const pb_cmp_median *base = find_median(med, c, sh, refs[ri]);
      for (size_t s = 0; s < c->n_servers; s++) {
        if (c->servers[s] == refs[ri]) continue;
        const pb_cmp_median *m = &med[sh * c->n_servers + s];
        char shape[24], a[16], b[16], d[16], e[16];
        snprintf(shape, sizeof shape, "%ux%u", c->shapes[sh].workers, c->shapes[sh].threads);
        fprintf(f, "%-6s %-*s %8s %8s %9s %10s\n", shape, w, pb_cmp_label(c, s),
                ratio(m->m[PB_CMP_RPS].med, base->m[PB_CMP_RPS].med, a, sizeof a),
                ratio(m->m[PB_CMP_CPU].med, base->m[PB_CMP_CPU].med, b, sizeof b),
                ratio(m->m[PB_CMP_OPEN_P99].med, base->m[PB_CMP_OPEN_P99].med, d, sizeof d),
                c->servers[s] == PB_CMP_PUMAPLUS
                    ? ratio(m->m[PB_CMP_RUBY].med, base->m[PB_CMP_CPU].med, e, sizeof e)
                    : "-");
      }
    }
  }
  /* A/B: every pumaplus@ column against this build's pumaplus, when both are present. */
  size_t base = c->n_servers, others = 0;
  for (size_t s = 0; s < c->n_servers; s++) {
    if (c->servers[s] != PB_CMP_PUMAPLUS) continue;
    if (c->server_dirs[s][0])
      others++;
    else
      base = s;
  }
  if (base < c->n_servers && others) {
    fprintf(f, "\nratios against pumaplus (medians, this build = 1): req/s x, CPU per request x, "
               "front-end and Ruby CPU per request x, open-loop p99 x\n");
    fprintf(f, "%-6s %-*s %8s %8s %8s %8s %9s\n", "shape", w, "server", "req/s", "cpu", "front_us",
            "ruby_us", "open_p99");
    for (size_t sh = 0; sh < c->n_shapes; sh++) {
      const pb_cmp_median *b = &med[sh * c->n_servers + base];
      for (size_t s = 0; s < c->n_servers; s++) {
        if (c->servers[s] != PB_CMP_PUMAPLUS || !c->server_dirs[s][0]) continue;
        const pb_cmp_median *m = &med[sh * c->n_servers + s];
        char shape[24], a[16], d[16], e[16], g[16], h[16];
        snprintf(shape, sizeof shape, "%ux%u", c->shapes[sh].workers, c->shapes[sh].threads);
        fprintf(f, "%-6s %-*s %8s %8s %8s %8s %9s\n", shape, w, pb_cmp_label(c, s),
                ratio(m->m[PB_CMP_RPS].med, b->m[PB_CMP_RPS].med, a, sizeof a),
                ratio(m->m[PB_CMP_CPU].med, b->m[PB_CMP_CPU].med, d, sizeof d),
                ratio(m->m[PB_CMP_FRONTEND].med, b->m[PB_CMP_FRONTEND].med, e, sizeof e),
                ratio(m->m[PB_CMP_RUBY].med, b->m[PB_CMP_RUBY].med, g, sizeof g),
                ratio(m->m[PB_CMP_OPEN_P99].med, b->m[PB_CMP_OPEN_P99].med, h, sizeof h));
      }
    }
  }
  for (size_t i = 0; i < c->n_servers; i++)
    fprintf(f, "%s %-*s %s\n", i ? "        " : "\nversions", w, pb_cmp_label(c, i),
            r->versions[i]);
  fprintf(f, "load generator: %s (closed loop), pp-bench (open loop); ruby: %s\n", r->wrk_version,
          r->ruby_version);
  fprintf(f, "load average (1 min): %.2f at the start, %.2f at the end; %.0f s in all\n",
          r->loadavg_start, r->loadavg_end, r->wall_s);
  if (c->max_steal_pct > 0) {
    uint32_t retried = 0, extra = 0, over = 0; /* from the kept cells' attempts and marks */
    for (size_t i = 0; i < r->n_cells; i++) {
      const pb_cmp_cell *x = &r->cells[i];
      if (x->attempts > 1) retried++, extra += x->attempts - 1;
      over += x->steal_over;
    }
    fprintf(f,
            "steal: -max-steal %g%% -steal-retries %u: %u of %zu cells measured again (%u extra "
            "attempts); %u stayed above %g%% (marked STEAL, kept in the medians)\n",
            c->max_steal_pct, c->steal_retries, retried, r->n_cells, extra, over, c->max_steal_pct);
  }
  if (c->n_steal_seq)
    fprintf(f,
            "steal readings: the first %zu from PP_BENCH_STEAL_SEQ (a test hook), not "
            "/proc/stat\n",
            c->n_steal_seq);
  bool falcon = false;
  for (size_t i = 0; i < c->n_servers; i++)
    if (c->servers[i] == PB_CMP_FALCON) falcon = true;
  if (falcon)
    fprintf(f, "falcon runs W processes (--count W) of fibers: the threads of a shape do not "
               "apply to it\n");
  free(med);
}
