/* `pp-bench compare`'s configuration (compare.h): server and metric names, the defaults, and
 * the -servers and -shapes lists (words, labels, pumaplus@DIR checkouts). Pure: no I/O. */
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
