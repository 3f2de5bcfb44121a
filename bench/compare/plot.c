/* `pp-bench compare`'s figure (compare.h): a gnuplot script and its data, rendered to PNG. */
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

/* ---- figure ---- */

static bool gnuplot_has_pngcairo(void) {
  return system("gnuplot -e 'set terminal pngcairo' > /dev/null 2>&1") == 0;
}

int pb_compare_plot(const pb_compare_config *c, const pb_compare_result *r, const char *png,
                    char *err, size_t errlen) {
  size_t ran = 0;
  for (size_t i = 0; i < r->n_cells; i++)
    ran += r->cells[i].ran;
  if (!ran) { /* gnuplot refuses a panel without a single point */
    snprintf(err, errlen, "no plot: no server x shape ran");
    return -1;
  }
  size_t n = c->n_shapes * c->n_servers;
  pb_cmp_median *med = calloc(n ? n : 1, sizeof *med);
  if (!med) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  pb_cmp_medians(r->cells, r->n_cells, c->n_shapes, c->n_servers, med);
  char dat[600], gp[600];
  snprintf(dat, sizeof dat, "%s.dat", png);
  snprintf(gp, sizeof gp, "%s.gp", png);
  FILE *d = fopen(dat, "w");
  if (!d) {
    snprintf(err, errlen, "cannot write %s: %s", dat, strerror(errno));
    free(med);
    return -1;
  }
  /* One block per server (gnuplot's `index`); per shape: x, then median/min/max of req/s,
   * p50 ms, p99 ms, CPU us per request. */
  static const int panels[4] = {PB_CMP_RPS, PB_CMP_P50, PB_CMP_P99, PB_CMP_CPU};
  for (size_t s = 0; s < c->n_servers; s++) {
    fprintf(d, "%s# %s\n", s ? "\n\n" : "", pb_cmp_label(c, s));
    for (size_t sh = 0; sh < c->n_shapes; sh++) {
      fprintf(d, "%zu", sh);
      for (int p = 0; p < 4; p++) {
        const pb_cmp_stat *st = &med[sh * c->n_servers + s].m[panels[p]];
        double scale = panels[p] == PB_CMP_P50 || panels[p] == PB_CMP_P99 ? 1e-3 : 1;
        if (st->n)
          fprintf(d, " %.4f %.4f %.4f", st->med * scale, st->min * scale, st->max * scale);
        else
          fprintf(d, " NaN NaN NaN");
      }
      fprintf(d, "\n");
    }
  }
  fclose(d);
  FILE *g = fopen(gp, "w");
  if (!g) {
    snprintf(err, errlen, "cannot write %s: %s", gp, strerror(errno));
    free(med);
    return -1;
  }
  bool cairo = gnuplot_has_pngcairo();
  /* noenhanced: labels are text, not markup ('@' in pumaplus@NAME is gnuplot's phantom box, '_'
   * a subscript). */
  fprintf(g, "set terminal %s noenhanced size 1400,1000\nset output '%s'\n",
          cairo ? "pngcairo" : "png", png);
  fprintf(g, "set datafile missing 'NaN'\n");
  fprintf(g,
          "set multiplot layout 2,2 title 'pp-bench compare: GET %s by shape (workers x "
          "threads), medians of %u rounds (bars: min..max), wrk -t1 -c%u for %.0fs'\n",
          c->path, c->rounds, c->conns, c->dur_ns / 1e9);
  fprintf(g,
          "set grid ytics\nset key outside bottom center horizontal\nset xrange [-0.5:%zu.5]\nset "
          "xtics (",
          c->n_shapes - 1);
  for (size_t sh = 0; sh < c->n_shapes; sh++)
    fprintf(g, "%s\"%ux%u\" %zu", sh ? ", " : "", c->shapes[sh].workers, c->shapes[sh].threads, sh);
  fprintf(g, ")\nset yrange [0:*]\n");
  static const char *const titles[4] = {"requests/s (closed loop)", "p50 (ms, closed loop)",
                                        "p99 (ms, closed loop)",
                                        "CPU per request (us, whole process tree)"};
  double width = 0.6 / (double)(c->n_servers > 1 ? c->n_servers : 1);
  for (int p = 0; p < 4; p++) {
    fprintf(g, "set ylabel '%s'\nplot ", titles[p]);
    for (size_t s = 0; s < c->n_servers; s++) {
      double off = ((double)s - (double)(c->n_servers - 1) / 2) * width;
      int col = 2 + 3 * p;
      fprintf(g,
              "%s'%s' index %zu using ($1%+.3f):%d:%d:%d with yerrorbars pt 7 ps 1.5 lw 2 lc %zu "
              "title '%s'",
              s ? ", " : "", dat, s, off, col, col + 1, col + 2, s + 1, pb_cmp_label(c, s));
    }
    fprintf(g, "\n");
  }
  fprintf(g, "unset multiplot\n");
  fclose(g);
  free(med);
  char cmd[1400];
  snprintf(cmd, sizeof cmd, "gnuplot '%s'", gp);
  if (system(cmd) != 0) {
    snprintf(err, errlen, "gnuplot failed on %s (Debian package gnuplot-nox)", gp);
    return -1;
  }
  return 0;
}
