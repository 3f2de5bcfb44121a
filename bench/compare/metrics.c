/* `pp-bench compare`'s pure arithmetic (compare.h): wrk's report parsed, the /proc CPU reading
 * of a process tree, which attempt of a cell to keep under -max-steal, and medians. No clocks;
 * only pb_cmp_tree_cpu reads /proc. */
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

/* ---- wrk's report ---- */

/* "1.23ms", "830.00us", "2.10s", "1.5m" in microseconds, or -1. */
static double wrk_time_us(const char *s) {
  char *end;
  double v = strtod(s, &end);
  if (end == s) return -1;
  if (strncmp(end, "us", 2) == 0) return v;
  if (strncmp(end, "ms", 2) == 0) return v * 1e3;
  if (*end == 's') return v * 1e6;
  if (*end == 'm') return v * 60e6;
  if (*end == 'h') return v * 3600e6;
  return -1;
}

bool pb_wrk_parse(const char *text, pb_wrk_result *out) {
  memset(out, 0, sizeof *out);
  out->p50_us = out->p99_us = -1;
  out->rps = -1;
  out->seconds = -1;
  bool have_requests = false;
  for (const char *line = text; line && *line;) {
    const char *nl = strchr(line, '\n');
    size_t len = nl ? (size_t)(nl - line) : strlen(line);
    char buf[512];
    if (len >= sizeof buf) len = sizeof buf - 1;
    memcpy(buf, line, len);
    buf[len] = 0;
    const char *p = buf;
    while (*p == ' ' || *p == '\t')
      p++;
    unsigned long long a, b, c, d;
    char dur[32];
    if (strncmp(p, "50%", 3) == 0)
      out->p50_us = wrk_time_us(p + 3 + strspn(p + 3, " \t"));
    else if (strncmp(p, "99%", 3) == 0)
      out->p99_us = wrk_time_us(p + 3 + strspn(p + 3, " \t"));
    else if (sscanf(p, "%llu requests in %31[^,]", &a, dur) == 2) {
      out->requests = a;
      double us = wrk_time_us(dur);
      out->seconds = us >= 0 ? us / 1e6 : -1;
      have_requests = true;
    } else if (sscanf(p, "Socket errors: connect %llu, read %llu, write %llu, timeout %llu", &a, &b,
                      &c, &d) == 4) {
      out->sock_connect = a;
      out->sock_read = b;
      out->sock_write = c;
      out->sock_timeout = d;
    } else if (sscanf(p, "Non-2xx or 3xx responses: %llu", &a) == 1)
      out->non2xx = a;
    else if (strncmp(p, "Requests/sec:", 13) == 0)
      out->rps = strtod(p + 13, NULL);
    line = nl ? nl + 1 : NULL;
  }
  return have_requests && out->seconds > 0 && out->rps >= 0;
}

/* ---- /proc CPU ---- */

int pb_cmp_tree_cpu(pid_t root, uint64_t *tree_ticks, uint64_t *root_ticks, uint32_t *procs) {
  return pb_proc_tree_cpu(root, tree_ticks, root_ticks, procs); /* harness.c's tree walk */
}

/* ---- steal: which attempt of a cell to keep (-max-steal) ---- */

int pb_cmp_parse_steal_seq(const char *list, double *out, size_t max) {
  size_t n = 0;
  const char *p = list;
  for (;;) {
    char *end;
    errno = 0;
    double v = strtod(p, &end);
    if (end == p || errno || !(v >= 0 && v <= 100) || n >= max) return -1;
    out[n++] = v;
    if (*end == 0) return (int)n;
    if (*end != ',') return -1;
    p = end + 1;
  }
}

double pb_cmp_cell_steal(const pb_cmp_cell *cell) {
  double worst = -1;
  if (cell->ran && cell->steal_pct >= 0) worst = cell->steal_pct;
  if (cell->open_ran && cell->open_steal_pct > worst) worst = cell->open_steal_pct;
  return worst;
}

bool pb_cmp_steal_too_high(const pb_cmp_cell *attempt, double max_steal_pct) {
  return max_steal_pct > 0 && attempt->ran && pb_cmp_cell_steal(attempt) > max_steal_pct;
}

size_t pb_cmp_steal_pick(const pb_cmp_cell *attempts, size_t n, double max_steal_pct,
                         bool *steal_over) {
  size_t keep = 0;
  bool found = false;
  for (size_t i = 0; i < n; i++) {
    if (!attempts[i].ran) continue;
    /* Unknown (-1) sorts below every reading: it never triggered a retry, so it is kept. */
    if (!found || pb_cmp_cell_steal(&attempts[i]) < pb_cmp_cell_steal(&attempts[keep])) keep = i;
    found = true;
  }
  if (steal_over) *steal_over = n && pb_cmp_steal_too_high(&attempts[keep], max_steal_pct);
  return keep;
}

/* ---- medians ---- */

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

double pb_cmp_median_of(const double *v, size_t n) {
  if (!n) return -1;
  double *s = malloc(n * sizeof *s);
  if (!s) return -1;
  memcpy(s, v, n * sizeof *s);
  qsort(s, n, sizeof *s, cmp_double);
  double m = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
  free(s);
  return m;
}

double pb_cmp_cell_metric(const pb_cmp_cell *c, int metric) {
  if (!c->ran) return -1;
  switch (metric) {
  case PB_CMP_RPS: return c->wrk.rps;
  case PB_CMP_P50: return c->wrk.p50_us;
  case PB_CMP_P99: return c->wrk.p99_us;
  case PB_CMP_CPU: return c->cpu_us_per_req;
  case PB_CMP_FRONTEND: return c->frontend_us_per_req;
  case PB_CMP_RUBY: return c->ruby_us_per_req;
  case PB_CMP_OPEN_P50: return c->open_ran ? c->open_p50_us : -1;
  case PB_CMP_OPEN_P99: return c->open_ran ? c->open_p99_us : -1;
  case PB_CMP_OPEN_P999: return c->open_ran ? c->open_p999_us : -1;
  default: return -1;
  }
}

void pb_cmp_medians(const pb_cmp_cell *cells, size_t n, size_t n_shapes, size_t n_servers,
                    pb_cmp_median *out) {
  double *v = malloc((n ? n : 1) * sizeof *v);
  for (size_t sh = 0; sh < n_shapes; sh++) {
    for (size_t sv = 0; sv < n_servers; sv++) {
      pb_cmp_median *m = &out[sh * n_servers + sv];
      memset(m, 0, sizeof *m);
      m->shape = (uint32_t)sh;
      m->server = (uint32_t)sv;
      for (size_t i = 0; i < n; i++) {
        if (cells[i].shape != sh || cells[i].server != sv) continue;
        if (!cells[i].ran)
          m->rounds_failed++;
        else
          m->rounds_ran++;
        if (cells[i].ran && cells[i].has_errors) m->rounds_with_errors++;
      }
      for (int k = 0; k < PB_CMP_N_METRICS; k++) {
        size_t got = 0;
        pb_cmp_stat *st = &m->m[k];
        st->min = st->max = st->med = -1;
        for (size_t i = 0; v && i < n; i++) {
          if (cells[i].shape != sh || cells[i].server != sv) continue;
          double x = pb_cmp_cell_metric(&cells[i], k);
          if (x < 0) continue;
          v[got++] = x;
          if (st->min < 0 || x < st->min) st->min = x;
          if (x > st->max) st->max = x;
        }
        st->n = (uint32_t)got;
        if (got) st->med = pb_cmp_median_of(v, got);
      }
    }
  }
  free(v);
}
