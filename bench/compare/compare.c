/* `pp-bench compare` (compare.h): the run loop, wrk, /proc CPU accounting, medians, tables and
 * the gnuplot figure. Blocking, single-threaded: the server runs in other processes and wrk in
 * its own; the open-loop part is pb_run_target (run.h) on this thread. */
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

static const char *const server_names[PB_CMP_N_SERVERS] = {"pumaplus", "puma", "puma8", "falcon"};

const char *pb_cmp_server_name(pb_cmp_server s) {
  return (unsigned)s < PB_CMP_N_SERVERS ? server_names[s] : "?";
}

static const char *const metric_names[PB_CMP_N_METRICS] = {"rps",
                                                           "p50_ms",
                                                           "p99_ms",
                                                           "cpu_us_per_req",
                                                           "frontend_us_per_req",
                                                           "ruby_us_per_req",
                                                           "open_p50_ms",
                                                           "open_p99_ms",
                                                           "open_p999_ms"};

const char *pb_cmp_metric_name(int metric) {
  return metric >= 0 && metric < PB_CMP_N_METRICS ? metric_names[metric] : "?";
}

void pb_compare_defaults(pb_compare_config *c) {
  memset(c, 0, sizeof *c);
  c->servers[0] = PB_CMP_PUMAPLUS;
  c->servers[1] = PB_CMP_PUMA;
  c->n_servers = 2;
  c->shapes[0] = (pb_cmp_shape){1, 1};
  c->shapes[1] = (pb_cmp_shape){1, 5};
  c->shapes[2] = (pb_cmp_shape){2, 5};
  c->n_shapes = 3;
  c->rounds = 3;
  c->dur_ns = 5000000000ull;
  c->warmup_ns = 1000000000ull;
  c->conns = 10;
  snprintf(c->path, sizeof c->path, "/hello");
  c->rate = 1000;
  c->rate_dur_ns = 10000000000ull;
  c->ready_timeout_ns = 60000000000ull;
  snprintf(c->log_dir, sizeof c->log_dir, "/tmp");
}

/* ---- list parsing ---- */

/* Calls `word` for each comma-separated word of `list`; stops at the first that fails. */
static int each_word(const char *list, int (*word)(const char *w, void *data), void *data,
                     char *bad, size_t badlen) {
  int n = 0;
  const char *p = list;
  for (;;) {
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    char w[PB_CMP_MAX_DIR + 80]; /* pumaplus@DIR=LABEL */
    if (len == 0 || len >= sizeof w) {
      snprintf(bad, badlen, "%.*s", (int)(len < 60 ? len : 60), p);
      return -1;
    }
    memcpy(w, p, len);
    w[len] = 0;
    if (word(w, data) < 0) {
      snprintf(bad, badlen, "%s", w);
      return -1;
    }
    n++;
    if (!comma) return n;
    p = comma + 1;
  }
}

static bool label_char(char ch) {
  return isalnum((unsigned char)ch) || ch == '.' || ch == '_' || ch == '-';
}

/* One word of pb_cmp_parse_server_list; on failure the reason goes to why (not the word). */
typedef struct server_spec_list {
  pb_cmp_server_list *out;
  char why[256];
} server_spec_list;

static int server_spec_word(const char *w, void *data) {
  server_spec_list *l = data;
  pb_cmp_server_list *o = l->out;
  if (o->n == PB_CMP_MAX_SERVERS) {
    snprintf(l->why, sizeof l->why, "'%.60s': at most %d servers", w, PB_CMP_MAX_SERVERS);
    return -1;
  }
  size_t k = o->n;
  o->dirs[k][0] = o->labels[k][0] = 0;
  if (strncmp(w, "pumaplus@", 9) == 0) {
    const char *dir = w + 9, *eq = strrchr(dir, '=');
    size_t dir_len = eq ? (size_t)(eq - dir) : strlen(dir);
    while (dir_len > 1 && dir[dir_len - 1] == '/') /* "base/" is "base" */
      dir_len--;
    if (dir_len == 0 || dir_len >= PB_CMP_MAX_DIR) {
      snprintf(l->why, sizeof l->why, "'%.60s': pumaplus@DIR needs a directory (under %d bytes)", w,
               PB_CMP_MAX_DIR);
      return -1;
    }
    const char *name;
    size_t name_len;
    if (eq) {
      name = eq + 1;
      name_len = strlen(name);
    } else {
      name = dir;
      for (size_t i = 0; i < dir_len; i++)
        if (dir[i] == '/' && i + 1 < dir_len) name = dir + i + 1;
      name_len = (size_t)(dir + dir_len - name);
    }
    bool ok = name_len > 0 && name_len <= PB_CMP_MAX_LABEL_NAME, dots_only = true;
    for (size_t i = 0; ok && i < name_len; i++) {
      ok = label_char(name[i]);
      dots_only = dots_only && name[i] == '.';
    }
    ok = ok && !dots_only; /* "pumaplus@.." says nothing: name it */
    if (!ok) {
      snprintf(l->why, sizeof l->why,
               "'%.60s': the label '%.*s' must be 1..%d letters, digits, '.', '_' or '-' (give "
               "one: pumaplus@DIR=LABEL)",
               w, (int)(name_len < 60 ? name_len : 60), name, PB_CMP_MAX_LABEL_NAME);
      return -1;
    }
    snprintf(o->dirs[k], sizeof o->dirs[k], "%.*s", (int)dir_len, dir);
    snprintf(o->labels[k], sizeof o->labels[k], "pumaplus@%.*s", (int)name_len, name);
    o->servers[k] = PB_CMP_PUMAPLUS;
  } else {
    int s = 0;
    while (s < PB_CMP_N_SERVERS && strcmp(w, server_names[s]) != 0)
      s++;
    if (s == PB_CMP_N_SERVERS) {
      snprintf(l->why, sizeof l->why,
               "unknown server '%.60s' (known: pumaplus, puma, puma8, falcon, pumaplus@DIR, "
               "pumaplus@DIR=LABEL)",
               w);
      return -1;
    }
    o->servers[k] = (pb_cmp_server)s;
    snprintf(o->labels[k], sizeof o->labels[k], "%s", server_names[s]);
  }
  for (size_t i = 0; i < k; i++) {
    if (strcmp(o->labels[i], o->labels[k]) != 0) continue;
    if (o->dirs[k][0])
      snprintf(l->why, sizeof l->why,
               "'%.60s': the label %s is taken (by '%.60s%s'): name this one with "
               "pumaplus@DIR=LABEL",
               w, o->labels[k], o->dirs[i][0] ? "pumaplus@" : "",
               o->dirs[i][0] ? o->dirs[i] : o->labels[i]);
    else
      snprintf(l->why, sizeof l->why, "'%.60s' is repeated", w);
    return -1;
  }
  o->n++;
  return 0;
}

int pb_cmp_parse_server_list(const char *list, pb_cmp_server_list *out, char *bad, size_t badlen) {
  server_spec_list l = {.out = out};
  out->n = 0;
  bad[0] = 0;
  if (each_word(list, server_spec_word, &l, bad, badlen) >= 0) return (int)out->n;
  if (l.why[0]) snprintf(bad, badlen, "%s", l.why);
  return -1;
}

const char *pb_cmp_label(const pb_compare_config *c, size_t i) {
  if (i >= c->n_servers) return "?";
  return c->server_labels[i][0] ? c->server_labels[i] : pb_cmp_server_name(c->servers[i]);
}

void pb_cmp_config_set_servers(pb_compare_config *c, const pb_cmp_server_list *l) {
  c->n_servers = l->n;
  for (size_t i = 0; i < l->n; i++) {
    c->servers[i] = l->servers[i];
    snprintf(c->server_dirs[i], sizeof c->server_dirs[i], "%s", l->dirs[i]);
    snprintf(c->server_labels[i], sizeof c->server_labels[i], "%s", l->labels[i]);
  }
}

typedef struct shape_list {
  pb_cmp_shape *out;
  size_t max, n;
} shape_list;

static bool parse_u32(const char *s, const char **end, uint32_t *out) {
  if (!isdigit((unsigned char)*s)) return false;
  char *e;
  errno = 0;
  unsigned long v = strtoul(s, &e, 10);
  if (errno || v > 100000) return false;
  *out = (uint32_t)v;
  *end = e;
  return true;
}

static int shape_word(const char *w, void *data) {
  shape_list *l = data;
  const char *p = w;
  pb_cmp_shape s;
  if (!parse_u32(p, &p, &s.workers) || (*p != 'x' && *p != 'X')) return -1;
  if (!parse_u32(p + 1, &p, &s.threads) || *p) return -1;
  if (s.workers < 1 || s.workers > 256 || s.threads < 1 || s.threads > 256) return -1;
  if (l->n == l->max) return -1;
  l->out[l->n++] = s;
  return 0;
}

int pb_cmp_parse_shapes(const char *list, pb_cmp_shape *out, size_t max, char *bad, size_t badlen) {
  shape_list l = {.out = out, .max = max};
  bad[0] = 0;
  return each_word(list, shape_word, &l, bad, badlen) < 0 ? -1 : (int)l.n;
}

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

/* ---- processes ---- */

/* Runs argv (PATH lookup) with stdin from /dev/null and stdout+stderr captured into out (the
 * first cap-1 bytes, NUL-terminated); with `gemfile` set, in the RubyGems column's
 * environment. Returns the exit status, 127 when it could not run, or -1 on a local failure.
 * When `timeout_ns` passes the child is killed and 124 returned. */
static int capture(char *const argv[], const char *gem_home, const char *gemfile, char *out,
                   size_t cap, uint64_t timeout_ns) {
  int pfd[2];
  if (cap) out[0] = 0;
  if (pipe2(pfd, O_CLOEXEC) < 0) return -1;
  pid_t pid = fork();
  if (pid < 0) {
    close(pfd[0]);
    close(pfd[1]);
    return -1;
  }
  if (pid == 0) {
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    dup2(pfd[1], 1);
    dup2(pfd[1], 2);
    if (gemfile && gemfile[0]) pb_rubygems_env_apply(gem_home, gemfile);
    execvp(argv[0], argv);
    fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  close(pfd[1]);
  size_t len = 0;
  uint64_t deadline = uv_hrtime() + timeout_ns;
  bool timed_out = false;
  fcntl(pfd[0], F_SETFL, O_NONBLOCK);
  for (;;) {
    char buf[4096];
    ssize_t r = read(pfd[0], buf, sizeof buf);
    if (r > 0) {
      size_t take =
          cap && len + 1 < cap ? ((size_t)r < cap - 1 - len ? (size_t)r : cap - 1 - len) : 0;
      memcpy(out + len, buf, take);
      len += take;
      if (cap) out[len] = 0;
      continue;
    }
    if (r == 0) break;
    if (errno != EAGAIN && errno != EINTR) break;
    if (uv_hrtime() > deadline) {
      kill(pid, SIGKILL);
      timed_out = true;
      break;
    }
    struct timespec ts = {0, 20000000};
    nanosleep(&ts, NULL);
  }
  close(pfd[0]);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  if (timed_out) return 124;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The first line of s, trimmed, into out. */
static void first_line(const char *s, char *out, size_t len) {
  while (*s == ' ' || *s == '\n')
    s++;
  size_t n = strcspn(s, "\r\n");
  while (n && s[n - 1] == ' ')
    n--;
  snprintf(out, len, "%.*s", (int)n, s);
}

/* The line of s that contains `needle`, else the first line. */
static void line_with(const char *s, const char *needle, char *out, size_t len) {
  const char *hit = strstr(s, needle);
  if (hit) {
    while (hit > s && hit[-1] != '\n')
      hit--;
    first_line(hit, out, len);
  } else {
    first_line(s, out, len);
  }
}

#define CAPTURE_NS 60000000000ull

/* The gem CLI and the server binary of config server i (pumaplus or pumaplus@DIR): DIR's for
 * pumaplus@DIR, else the base spec's ("" = the harness's default). */
static void pumaplus_paths(const pb_compare_config *c, size_t i, char *cli, size_t cli_len,
                           char *server, size_t server_len) {
  if (c->server_dirs[i][0]) {
    snprintf(cli, cli_len, "%s/gem/exe/puma-plus", c->server_dirs[i]);
    snprintf(server, server_len, "%s/build/server/puma-plus-server", c->server_dirs[i]);
  } else {
    snprintf(cli, cli_len, "%s", c->base.pumaplus_bin);
    snprintf(server, server_len, "%s", c->base.server_bin);
  }
}

/* The value of `key` (as "KEY:TYPE=value") in a CMakeCache.txt, into out. 0 or -1. */
static int cmake_cache_value(const char *cache, const char *key, char *out, size_t len) {
  FILE *f = fopen(cache, "r");
  if (!f) return -1;
  char line[2048];
  size_t klen = strlen(key);
  int rc = -1;
  while (rc < 0 && fgets(line, sizeof line, f)) {
    if (strncmp(line, key, klen) != 0 || line[klen] != ':') continue;
    const char *eq = strchr(line + klen, '=');
    if (!eq) continue;
    snprintf(out, len, "%.*s", (int)strcspn(eq + 1, "\r\n"), eq + 1);
    rc = 0;
  }
  fclose(f);
  return rc;
}

/* pumaplus@DIR: DIR is a built checkout whose server puts its own C codec on the workers' load
 * path. The server does that only when the gem directory is its own checkout's gem/ (realpath
 * against the source directory CMake was run on, server/shepherd.c), so DIR/build must have been
 * configured from DIR: otherwise the workers of that column silently run the pure-Ruby codec.
 * 0, or -1 with what is missing and how to build it in err. */
static int check_checkout(const pb_compare_config *c, size_t i, char *err, size_t errlen) {
  const char *dir = c->server_dirs[i], *label = pb_cmp_label(c, i);
  struct stat st;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
    snprintf(err, errlen,
             "%s: %s is not a directory (%s): pumaplus@DIR wants another built checkout of this "
             "repository",
             label, dir, stat(dir, &st) != 0 ? strerror(errno) : "not a directory");
    return -1;
  }
  /* The same paths the cells run (pumaplus_paths), and the C codec the server puts first. */
  char cli[sizeof c->base.pumaplus_bin], server[sizeof c->base.server_bin];
  pumaplus_paths(c, i, cli, sizeof cli, server, sizeof server);
  if (access(cli, R_OK) != 0) {
    snprintf(err, errlen, "%s: %s is missing: %s is not a checkout of puma-plus", label, cli, dir);
    return -1;
  }
  char cache[PB_CMP_MAX_DIR + 96], source[PATH_MAX], ext[PB_CMP_MAX_DIR + 96];
  snprintf(cache, sizeof cache, "%s/build/CMakeCache.txt", dir);
  snprintf(ext, sizeof ext, "%s/build/gem/ext-lib/puma_plus/puma_plus_ext.so", dir);
  bool configured = cmake_cache_value(cache, "CMAKE_HOME_DIRECTORY", source, sizeof source) == 0;
  const char *const needs[2] = {server, ext};
  for (int k = 0; k < 2; k++) {
    const char *path = needs[k];
    if (access(path, k == 0 ? X_OK : R_OK) == 0) continue;
    char configure[2 * PB_CMP_MAX_DIR + 64] = "";
    if (!configured)
      snprintf(configure, sizeof configure,
               "cmake -S %s -B %s/build -DCMAKE_BUILD_TYPE=Release && ", dir, dir);
    snprintf(err, errlen,
             "%s: %s is missing (build it: %scmake --build %s/build --target puma-plus-server "
             "puma_plus_ext)",
             label, path, configure, dir);
    return -1;
  }
  if (!configured) {
    snprintf(err, errlen,
             "%s: cannot read CMAKE_HOME_DIRECTORY from %s, so which checkout %s/build serves "
             "is unknown (configure it: cmake -S %s -B %s/build -DCMAKE_BUILD_TYPE=Release)",
             label, cache, dir, dir, dir);
    return -1;
  }
  char gem[PATH_MAX + 8], built_gem[PATH_MAX + 8], real_gem[PATH_MAX], real_built[PATH_MAX];
  snprintf(gem, sizeof gem, "%s/gem", dir);
  snprintf(built_gem, sizeof built_gem, "%s/gem", source);
  if (!realpath(gem, real_gem) || !realpath(built_gem, real_built) ||
      strcmp(real_gem, real_built) != 0) {
    snprintf(err, errlen,
             "%s: %s/build was configured from %.300s, not from %s: its server loads its C codec "
             "only for %.300s/gem, so %s/gem's workers would run the pure-Ruby codec (configure "
             "and build DIR's own build/: cmake -S %s -B %s/build -DCMAKE_BUILD_TYPE=Release && "
             "cmake --build %s/build --target puma-plus-server puma_plus_ext)",
             label, dir, source, dir, source, dir, dir, dir, dir);
    return -1;
  }
  return 0;
}

/* Versions and prerequisites. 0, or -1 with the reason in r->error. */
static int check_prerequisites(const pb_compare_config *c, pb_compare_result *r) {
  char buf[8192];
  char wrk[256];
  snprintf(wrk, sizeof wrk, "%s", c->wrk_bin[0] ? c->wrk_bin : "wrk");
  char *wrk_argv[] = {wrk, "-v", NULL};
  int rc = capture(wrk_argv, NULL, NULL, buf, sizeof buf, CAPTURE_NS);
  if (rc == 127 || rc < 0 || strncmp(buf, "wrk ", 4) != 0) {
    snprintf(r->error, sizeof r->error,
             "the closed-loop load generator '%s' does not run (Debian package wrk; "
             "scripts/install-deps.sh installs it): %.400s",
             wrk, buf);
    return -1;
  }
  first_line(buf, r->wrk_version, sizeof r->wrk_version);
  char *sp = strstr(r->wrk_version, " [");
  if (sp) *sp = 0;
  char *ruby_argv[] = {"ruby", "-e", "print RUBY_DESCRIPTION", NULL};
  if (capture(ruby_argv, NULL, NULL, buf, sizeof buf, CAPTURE_NS) == 0)
    first_line(buf, r->ruby_version, sizeof r->ruby_version);
  bool column_checked = false;
  for (size_t i = 0; i < c->n_servers; i++) {
    char *v = r->versions[i];
    size_t vl = sizeof r->versions[i];
    switch (c->servers[i]) {
    case PB_CMP_PUMAPLUS: {
      if (c->server_dirs[i][0] && check_checkout(c, i, r->error, sizeof r->error) < 0) return -1;
      char cli[sizeof c->base.pumaplus_bin], server[sizeof c->base.server_bin];
      pumaplus_paths(c, i, cli, sizeof cli, server, sizeof server);
      char gem_lib[sizeof cli + 8], exe_dir[sizeof cli], gem_dir[sizeof cli];
      pb_dirname(cli[0] ? cli : "gem/exe/puma-plus", exe_dir, sizeof exe_dir);
      pb_dirname(exe_dir, gem_dir, sizeof gem_dir);
      snprintf(gem_lib, sizeof gem_lib, "%s/lib", gem_dir);
      char *argv[] = {"ruby", "-I", gem_lib, "-e", "require 'puma_plus'; print PumaPlus::VERSION",
                      NULL};
      char gem_version[64] = "?", git[64] = "";
      if (capture(argv, NULL, NULL, buf, sizeof buf, CAPTURE_NS) == 0)
        first_line(buf, gem_version, sizeof gem_version);
      else {
        snprintf(r->error, sizeof r->error, "%s: cannot load the gem from %s: %.300s",
                 pb_cmp_label(c, i), gem_lib, buf);
        return -1;
      }
      const char *src = c->server_dirs[i][0] ? c->server_dirs[i] : c->source_dir;
      if (src[0]) {
        char src_copy[PB_CMP_MAX_DIR + 112];
        snprintf(src_copy, sizeof src_copy, "%s", src);
        char *gargv[] = {"git", "-C", src_copy, "describe", "--always", "--dirty", NULL};
        if (capture(gargv, NULL, NULL, buf, sizeof buf, CAPTURE_NS) == 0)
          first_line(buf, git, sizeof git);
      }
      if (server[0] && access(server, X_OK) != 0) {
        snprintf(r->error, sizeof r->error,
                 "%s: %.400s is not an executable (build it: cmake --build build)",
                 pb_cmp_label(c, i), server);
        return -1;
      }
      snprintf(v, vl, "puma-plus %s%s%s%s", gem_version, git[0] ? " (git " : "", git,
               git[0] ? ")" : "");
      break;
    }
    case PB_CMP_PUMA: {
      char bin[256];
      snprintf(bin, sizeof bin, "%s", c->base.puma_bin[0] ? c->base.puma_bin : "puma");
      char *argv[] = {bin, "--version", NULL};
      rc = capture(argv, NULL, NULL, buf, sizeof buf, CAPTURE_NS);
      if (rc != 0) {
        snprintf(r->error, sizeof r->error,
                 "puma: '%s --version' failed (Debian's puma: package puma, "
                 "scripts/install-deps.sh): %.300s",
                 bin, buf);
        return -1;
      }
      line_with(buf, "version", v, vl);
      break;
    }
    case PB_CMP_PUMA8:
    case PB_CMP_FALCON: {
      const char *name = pb_cmp_server_name(c->servers[i]);
      if (!column_checked) {
        char *argv[] = {"bundle", "check", NULL};
        rc = capture(argv, c->gem_home, c->gemfile, buf, sizeof buf, CAPTURE_NS);
        if (rc != 0) {
          char line[256];
          first_line(buf, line, sizeof line);
          snprintf(r->error, sizeof r->error,
                   "%s needs the RubyGems column (%.300s) installed in GEM_HOME %.300s, and "
                   "`bundle check` says it is not (%.200s): run scripts/install-gems.sh",
                   name, c->gemfile, c->gem_home, line);
          return -1;
        }
        column_checked = true;
      }
      char *argv[] = {"bundle", "exec", c->servers[i] == PB_CMP_PUMA8 ? "puma" : "falcon",
                      "--version", NULL};
      rc = capture(argv, c->gem_home, c->gemfile, buf, sizeof buf, CAPTURE_NS);
      if (rc != 0) {
        snprintf(r->error, sizeof r->error,
                 "%s: 'bundle exec %s --version' failed (scripts/install-gems.sh installs the "
                 "RubyGems column into %s): %.300s",
                 name, argv[2], c->gem_home, buf);
        return -1;
      }
      line_with(buf, c->servers[i] == PB_CMP_PUMA8 ? "version" : "falcon", v, vl);
      break;
    }
    default: break;
    }
  }
  return 0;
}

/* The spec of one cell's server. */
static void cell_spec(const pb_compare_config *c, const pb_cmp_cell *cell, pb_server_spec *spec) {
  *spec = c->base;
  pb_cmp_server server = c->servers[cell->server];
  const pb_cmp_shape *shape = &c->shapes[cell->shape];
  spec->workers = shape->workers;
  spec->threads = shape->threads;
  spec->kind = server == PB_CMP_PUMAPLUS ? PB_SERVER_PUMAPLUS
               : server == PB_CMP_FALCON ? PB_SERVER_FALCON
                                         : PB_SERVER_PUMA;
  spec->gemfile[0] = spec->gem_home[0] = 0;
  if (server == PB_CMP_PUMA8 || server == PB_CMP_FALCON) {
    snprintf(spec->gemfile, sizeof spec->gemfile, "%s", c->gemfile);
    snprintf(spec->gem_home, sizeof spec->gem_home, "%s", c->gem_home);
  }
  if (c->server_dirs[cell->server][0])
    pumaplus_paths(c, cell->server, spec->pumaplus_bin, sizeof spec->pumaplus_bin, spec->server_bin,
                   sizeof spec->server_bin);
  snprintf(spec->app, sizeof spec->app, "%s", c->app);
  snprintf(spec->name, sizeof spec->name, "compare-r%u-%ux%u-%s", cell->round, shape->workers,
           shape->threads, pb_cmp_label(c, cell->server));
  if (cell->attempt > 1) { /* -max-steal's retries keep their own logs */
    size_t l = strlen(spec->name);
    snprintf(spec->name + l, sizeof spec->name - l, "-a%u", cell->attempt);
  }
  spec->port = pb_free_port();
  spec->stats_port = server == PB_CMP_PUMAPLUS ? pb_free_port() : 0;
  if (c->log_dir[0])
    snprintf(spec->log_path, sizeof spec->log_path, "%.440s/%.63s.log", c->log_dir, spec->name);
  else
    spec->log_path[0] = 0;
}

static void command_line(const pb_server_spec *spec, char *out, size_t len) {
  char *argv[48];
  char storage[4096];
  out[0] = 0;
  int n = pb_server_argv(spec, argv, 48, storage, sizeof storage);
  size_t used = 0;
  if (spec->gemfile[0])
    used +=
        (size_t)snprintf(out, len, "GEM_HOME=%s BUNDLE_GEMFILE=%s ", spec->gem_home, spec->gemfile);
  for (int i = 0; i < n && used < len; i++)
    used += (size_t)snprintf(out + used, len - used, "%s%s", i ? " " : "", argv[i]);
}

/* Runs wrk for `secs` whole seconds against the server; 0 with the parsed report, or -1 with a
 * message in err. */
static int run_wrk(const pb_compare_config *c, int port, uint32_t secs, pb_wrk_result *w, char *err,
                   size_t errlen) {
  char wrk[256], conns[16], dur[16], url[512];
  snprintf(wrk, sizeof wrk, "%s", c->wrk_bin[0] ? c->wrk_bin : "wrk");
  snprintf(conns, sizeof conns, "%u", c->conns);
  snprintf(dur, sizeof dur, "%us", secs);
  snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, c->path);
  char *argv[] = {wrk, "-t1", "-c", conns, "-d", dur, "--latency", url, NULL};
  char out[8192];
  int rc = capture(argv, NULL, NULL, out, sizeof out, (secs + 30) * 1000000000ull);
  if (rc != 0) {
    char line[256];
    first_line(out, line, sizeof line);
    snprintf(err, errlen, "wrk exited %d: %s", rc, line);
    return -1;
  }
  if (!pb_wrk_parse(out, w)) {
    char line[256];
    first_line(out, line, sizeof line);
    snprintf(err, errlen, "wrk's report did not parse: %s", line);
    return -1;
  }
  return 0;
}

static double loadavg1(void) {
  double l[1];
  return getloadavg(l, 1) == 1 ? l[0] : -1;
}

/* Processes a server of this shape runs once booted: the gem CLI execs puma-plus-server, which
 * runs the shepherd and W workers; puma's (either) master and W workers; falcon's controller
 * and W forks. */
static uint32_t expected_procs(pb_cmp_server server, const pb_cmp_shape *shape) {
  return shape->workers + (server == PB_CMP_PUMAPLUS ? 2 : 1);
}

/* The steal% of a loop that ran: what /proc/stat said, or the test hook's next value
 * (PP_BENCH_STEAL_SEQ) while it lasts. */
static double steal_reading(const pb_compare_config *c, pb_compare_result *r, double measured) {
  if (r->steal_seq_next < c->n_steal_seq) return c->steal_seq[r->steal_seq_next++];
  return measured;
}

static void open_loop(const pb_compare_config *c, pb_compare_result *r, int port,
                      pb_cmp_cell *cell) {
  pb_schedule sched;
  if (pb_schedule_constant(&sched, c->rate, c->rate_dur_ns, c->path, true, 1) < 0) {
    snprintf(cell->open_error, sizeof cell->open_error, "cannot build a %g rps schedule", c->rate);
    return;
  }
  pb_run_options ro;
  memset(&ro, 0, sizeof ro);
  ro.timeout_ns = 10000000000ull;
  ro.max_connections = 256;
  ro.max_error_ratio = 0;
  ro.label = "compare open loop";
  ro.quiet = true;
  pb_config_result res;
  pb_run_target("127.0.0.1", port, &sched, &ro, &res);
  if (!res.ran) {
    snprintf(cell->open_error, sizeof cell->open_error, "%.250s", res.error);
  } else {
    const pb_summary *s = &res.summary;
    cell->open_ran = true;
    cell->open_offered = s->offered;
    cell->open_ok = s->outcomes[PB_OK];
    cell->open_shed = s->outcomes[PB_SHED];
    cell->open_http_errors = s->outcomes[PB_HTTP_ERROR];
    cell->open_conn_errors = s->outcomes[PB_CONN_ERROR];
    cell->open_timeouts = s->outcomes[PB_TIMEOUT];
    cell->open_achieved_rps = s->achieved_rps;
    cell->open_p50_us = pp_hist_percentile(&s->latency, 50) / 1e3;
    cell->open_p99_us = pp_hist_percentile(&s->latency, 99) / 1e3;
    cell->open_p999_us = pp_hist_percentile(&s->latency, 99.9) / 1e3;
    cell->open_steal_pct = steal_reading(c, r, s->steal_pct);
  }
  pb_config_result_dispose(&res);
  pb_schedule_dispose(&sched);
}

static void run_cell(const pb_compare_config *c, pb_compare_result *r, pb_cmp_cell *cell) {
  pb_server_spec spec;
  cell_spec(c, cell, &spec);
  pb_cmp_server server = c->servers[cell->server];
  const pb_cmp_shape *shape = &c->shapes[cell->shape];
  if (!r->commands[cell->server][0])
    command_line(&spec, r->commands[cell->server], sizeof r->commands[cell->server]);
  cell->frontend_us_per_req = cell->ruby_us_per_req = cell->cpu_us_per_req = -1;
  cell->open_p50_us = cell->open_p99_us = cell->open_p999_us = -1;
  cell->steal_pct = cell->open_steal_pct = -1;
  char attempt[32] = "";
  if (cell->attempt > 1) snprintf(attempt, sizeof attempt, " (attempt %u)", cell->attempt);
  fprintf(stderr, "[compare] round %u/%u  %ux%u  %-8s start%s\n", cell->round, c->rounds,
          shape->workers, shape->threads, pb_cmp_label(c, cell->server), attempt);
  pb_server srv;
  char err[512];
  if (pb_server_start(&spec, &srv, err, sizeof err) < 0) {
    snprintf(cell->error, sizeof cell->error, "%s", err);
    return;
  }
  if (c->running_pgid) *c->running_pgid = (sig_atomic_t)srv.pid;
  if (pb_server_wait_ready(&srv, "127.0.0.1", c->path, c->ready_timeout_ns, err, sizeof err) < 0) {
    snprintf(cell->error, sizeof cell->error, "%.300s (log: %.180s)", err,
             spec.log_path[0] ? spec.log_path : "none");
    goto stop;
  }
  /* What the app answers, before any load: the codec app (tests/apps/codec) says which wire
   * codec the worker loaded, so a test can tell that every puma-plus column runs the C one. */
  char body[256];
  if (pb_http_get("127.0.0.1", spec.port, c->path, 5000000000ull, body, sizeof body) > 0)
    first_line(body, cell->answer, sizeof cell->answer);
  /* Ready means one process answers; wait (at most 20 s) for the rest of the shape to boot. */
  uint32_t want = expected_procs(server, shape), procs = 0;
  uint64_t ticks, own;
  for (uint64_t until = uv_hrtime() + 20000000000ull; uv_hrtime() < until;) {
    if (pb_cmp_tree_cpu(srv.pid, &ticks, &own, &procs) == 0 && procs >= want) break;
    struct timespec ts = {0, 100000000};
    nanosleep(&ts, NULL);
  }
  if (procs < want)
    snprintf(cell->note, sizeof cell->note, "%u of %u expected processes after 20 s", procs, want);
  pb_wrk_result w;
  if (c->warmup_ns &&
      run_wrk(c, spec.port, (uint32_t)(c->warmup_ns / 1000000000ull), &w, err, sizeof err) < 0) {
    snprintf(cell->error, sizeof cell->error, "warm-up: %.480s", err);
    goto stop;
  }
  uint64_t t0, o0, t1, o1;
  uint32_t p0 = 0, p1 = 0;
  if (pb_cmp_tree_cpu(srv.pid, &t0, &o0, &p0) < 0) {
    snprintf(cell->error, sizeof cell->error, "cannot read /proc");
    goto stop;
  }
  pb_cpu_times m0 = pb_cpu_times_now();
  int wrc =
      run_wrk(c, spec.port, (uint32_t)(c->dur_ns / 1000000000ull), &cell->wrk, err, sizeof err);
  int prc = pb_cmp_tree_cpu(srv.pid, &t1, &o1, &p1);
  cell->steal_pct = pb_steal_pct(m0, pb_cpu_times_now());
  if (wrc < 0) {
    snprintf(cell->error, sizeof cell->error, "%s", err);
    goto stop;
  }
  if (prc < 0 || p1 != p0) {
    /* A process of the tree came or went inside the window: its ticks are not all counted. */
    snprintf(cell->note + strlen(cell->note), sizeof cell->note - strlen(cell->note),
             "%sprocesses changed during the measurement (%u -> %u): CPU not exact",
             cell->note[0] ? "; " : "", p0, p1);
  }
  cell->procs = p1;
  cell->ran = true;
  double tck = (double)sysconf(_SC_CLK_TCK);
  if (cell->wrk.requests) {
    double per = 1e6 / tck / (double)cell->wrk.requests;
    cell->cpu_us_per_req = (double)(t1 - t0) * per;
    if (server == PB_CMP_PUMAPLUS) {
      cell->frontend_us_per_req = (double)(o1 - o0) * per;
      cell->ruby_us_per_req = cell->cpu_us_per_req - cell->frontend_us_per_req;
    }
  }
  cell->steal_pct = steal_reading(c, r, cell->steal_pct);
  if (c->rate > 0) open_loop(c, r, spec.port, cell);
  cell->has_errors = cell->wrk.non2xx || cell->wrk.sock_connect || cell->wrk.sock_read ||
                     cell->wrk.sock_write || cell->wrk.sock_timeout || cell->wrk.requests == 0 ||
                     (c->rate > 0 && (!cell->open_ran || cell->open_ok != cell->open_offered));
stop:
  pb_server_stop(&srv, 10000000000ull);
  if (c->running_pgid) *c->running_pgid = 0;
}

/* Appends "; "-separated text to a cell's note. */
static void note_append(pb_cmp_cell *cell, const char *text) {
  size_t l = strlen(cell->note);
  snprintf(cell->note + l, sizeof cell->note - l, "%s%s", l ? "; " : "", text);
}

/* One cell, measured again while -max-steal finds its steal too high (a fresh server each
 * attempt, as for a new cell), then the attempt pb_cmp_steal_pick keeps goes into *cell. What
 * the dropped attempts had (errors, a failure) is noted on the kept one: nothing is hidden. */
static void run_cell_attempts(const pb_compare_config *c, pb_compare_result *r, pb_cmp_cell *cell) {
  const pb_cmp_shape *shape = &c->shapes[cell->shape];
  uint32_t max_attempts = c->max_steal_pct > 0 ? 1 + c->steal_retries : 1;
  pb_cmp_cell *tries = calloc(max_attempts, sizeof *tries);
  if (!tries) {
    fprintf(stderr, "pp-bench compare: out of memory\n");
    abort();
  }
  size_t n = 0;
  for (;;) {
    pb_cmp_cell *t = &tries[n];
    *t = *cell;
    t->attempt = (uint32_t)++n;
    run_cell(c, r, t);
    if (n == max_attempts || !pb_cmp_steal_too_high(t, c->max_steal_pct)) break;
    fprintf(stderr, "[compare] %ux%u %s round %u: steal %.1f%% > %g%%, attempt %zu of %u\n",
            shape->workers, shape->threads, pb_cmp_label(c, cell->server), cell->round,
            pb_cmp_cell_steal(t), c->max_steal_pct, n + 1, max_attempts);
  }
  bool over = false;
  size_t keep = pb_cmp_steal_pick(tries, n, c->max_steal_pct, &over);
  *cell = tries[keep];
  cell->attempts = (uint32_t)n;
  cell->steal_over = over;
  for (size_t i = 0; i < n; i++) {
    if (i == keep) continue;
    char text[200];
    if (!tries[i].ran)
      snprintf(text, sizeof text, "attempt %zu failed: %.150s", i + 1, tries[i].error);
    else
      snprintf(text, sizeof text, "attempt %zu dropped (steal %.1f%%%s)", i + 1,
               pb_cmp_cell_steal(&tries[i]), tries[i].has_errors ? ", had errors" : "");
    note_append(cell, text);
  }
  if (over) {
    fprintf(stderr,
            "[compare] %ux%u %s round %u: steal still %.1f%% > %g%% after %zu attempts: "
            "kept attempt %zu, marked STEAL\n",
            shape->workers, shape->threads, pb_cmp_label(c, cell->server), cell->round,
            pb_cmp_cell_steal(cell), c->max_steal_pct, n, keep + 1);
  }
  free(tries);
}

int pb_compare_run(const pb_compare_config *c, pb_compare_result *r, FILE *out) {
  memset(r, 0, sizeof *r);
  uint64_t start = uv_hrtime();
  r->loadavg_start = loadavg1();
  if (c->dur_ns < 1000000000ull || c->dur_ns % 1000000000ull || c->warmup_ns % 1000000000ull) {
    snprintf(r->error, sizeof r->error,
             "-dur and -warmup must be whole seconds (wrk's -d), -dur at least 1s");
    return 2;
  }
  if (check_prerequisites(c, r) < 0) return 2;
  r->prerequisites_ok = true;
  size_t per_round = c->n_shapes * c->n_servers;
  size_t total = per_round * c->rounds;
  r->cells = calloc(total ? total : 1, sizeof *r->cells);
  if (!r->cells) {
    snprintf(r->error, sizeof r->error, "out of memory");
    return 2;
  }
  fprintf(stderr, "[compare] %u rounds x %zu shapes x %zu servers = %zu runs\n", c->rounds,
          c->n_shapes, c->n_servers, per_round * c->rounds);
  if (c->max_steal_pct > 0)
    fprintf(stderr,
            "[compare] -max-steal %g%%: a cell whose closed- or open-loop steal is above it is "
            "measured again (a fresh server), up to %u more times\n",
            c->max_steal_pct, c->steal_retries);
  if (c->n_steal_seq)
    fprintf(stderr,
            "[compare] PP_BENCH_STEAL_SEQ (test hook): the first %zu steal readings are given, "
            "not measured\n",
            c->n_steal_seq);
  int rc = 0;
  for (uint32_t round = 1; round <= c->rounds; round++) {
    for (size_t sh = 0; sh < c->n_shapes; sh++) {
      /* Interleaved: every shape sees every server in turn, and the first server of a round
       * rotates, so no server always runs first (just after the previous one's teardown). */
      for (size_t k = 0; k < c->n_servers; k++) {
        pb_cmp_cell *cell = &r->cells[r->n_cells++];
        cell->round = round;
        cell->shape = (uint32_t)sh;
        cell->server = (uint32_t)((k + round - 1) % c->n_servers);
        cell->order = (uint32_t)(sh * c->n_servers + k + 1);
        run_cell_attempts(c, r, cell);
        if (!cell->ran) {
          fprintf(stderr, "[compare] round %u %ux%u %s FAILED: %s\n", round, c->shapes[sh].workers,
                  c->shapes[sh].threads, pb_cmp_label(c, cell->server), cell->error);
          rc = 1;
        } else if (cell->has_errors) {
          rc = 1;
        }
      }
    }
    pb_compare_print_round(out, c, r, round);
    fflush(out);
  }
  r->loadavg_end = loadavg1();
  r->wall_s = (uv_hrtime() - start) / 1e9;
  return rc;
}

void pb_compare_result_dispose(pb_compare_result *r) {
  free(r->cells);
  memset(r, 0, sizeof *r);
}

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
