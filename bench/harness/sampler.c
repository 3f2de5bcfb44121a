/* The sampler thread (harness.h): once a second during a load run, the server's process tree
 * from /proc and its /stats, on its own thread so the generator's loop is never blocked. */
#include "bench/harness/harness.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <llhttp.h>
#include <uv.h>

/* ---- sampler ---- */

struct pb_sampler {
  uv_thread_t thread;
  uv_mutex_t lock;
  uv_cond_t cond;
  bool stop;
  pid_t root;
  char host[64];
  int stats_port;
  char stats_path[128];
  uint64_t t0;
  pb_sample *samples;
  size_t n, cap;
  double last_lifetime_p95_ms;
  pb_server_stats last; /* the last /stats that parsed */
  bool have_last;
};

static void take_sample(pb_sampler *s) {
  pb_sample x = {.queue_p95_ms = -1, .workers = -1, .queue_depth = -1, .workers_parked = -1};
  uint64_t now = uv_hrtime();
  x.t_ns = now > s->t0 ? now - s->t0 : 0;
  pb_tree_mem mem;
  if (pb_proc_tree_mem(s->root, &mem) == 0) {
    x.procs = mem.procs;
    x.rss_bytes = mem.rss_bytes;
    if (mem.procs && mem.smaps_procs == mem.procs) {
      x.pss_bytes = mem.pss_bytes;
      x.uss_bytes = mem.uss_bytes;
    }
  }
  if (s->stats_port) {
    char *body = malloc(65536);
    pb_server_stats st;
    if (body &&
        pb_http_get(s->host, s->stats_port, s->stats_path, 500000000ull, body, 65536) == 200 &&
        pb_stats_parse(body, &st)) {
      x.queue_p95_ms = st.queue_p95_ms;
      x.workers = st.workers;
      x.queue_depth = st.queue_depth;
      x.workers_parked = st.workers_parked;
      s->last_lifetime_p95_ms = st.queue_p95_lifetime_ms;
      s->last = st;
      s->have_last = true;
    }
    free(body);
  }
  if (s->n == s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 256;
    pb_sample *bigger = realloc(s->samples, cap * sizeof *bigger);
    if (!bigger) return;
    s->samples = bigger;
    s->cap = cap;
  }
  s->samples[s->n++] = x;
}

static void sampler_main(void *arg) {
  pb_sampler *s = arg;
  uint64_t next = uv_hrtime();
  uv_mutex_lock(&s->lock);
  while (!s->stop) {
    uint64_t now = uv_hrtime();
    if (now >= next) {
      uv_mutex_unlock(&s->lock);
      take_sample(s);
      uv_mutex_lock(&s->lock);
      next += 1000000000ull;
      continue;
    }
    uv_cond_timedwait(&s->cond, &s->lock, next - now);
  }
  uv_mutex_unlock(&s->lock);
}

int pb_sampler_start(pb_sampler **out, pid_t root, const char *host, int stats_port,
                     const char *stats_path, uint64_t t0_ns) {
  pb_sampler *s = calloc(1, sizeof *s);
  if (!s) return -1;
  s->root = root;
  snprintf(s->host, sizeof s->host, "%s", host);
  s->stats_port = stats_port;
  snprintf(s->stats_path, sizeof s->stats_path, "%s", stats_path ? stats_path : "/stats");
  s->t0 = t0_ns;
  s->last_lifetime_p95_ms = -1;
  uv_mutex_init(&s->lock);
  uv_cond_init(&s->cond);
  if (uv_thread_create(&s->thread, sampler_main, s) != 0) {
    uv_mutex_destroy(&s->lock);
    uv_cond_destroy(&s->cond);
    free(s);
    return -1;
  }
  *out = s;
  return 0;
}

void pb_sampler_stop_stats(pb_sampler *s, pb_sample **samples, size_t *n, pb_server_stats *last) {
  if (last) {
    if (s->have_last) {
      *last = s->last;
    } else {
      pb_stats_parse("{}", last);
    }
  }
  pb_sampler_stop(s, samples, n, NULL);
}

void pb_sampler_stop(pb_sampler *s, pb_sample **samples, size_t *n, double *lifetime_p95_ms) {
  uv_mutex_lock(&s->lock);
  s->stop = true;
  uv_cond_signal(&s->cond);
  uv_mutex_unlock(&s->lock);
  uv_thread_join(&s->thread);
  uv_mutex_destroy(&s->lock);
  uv_cond_destroy(&s->cond);
  *samples = s->samples;
  *n = s->n;
  if (lifetime_p95_ms) *lifetime_p95_ms = s->last_lifetime_p95_ms;
  free(s);
}
