/* The soak's watcher of the server (soak_int.h): descriptors and RSS from /proc, counters and
 * heap slots from /stats, a sampler thread once a second, and the settle wait after a cycle. */
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

/* ---- /proc and /stats ---- */

int32_t pb_soak__count_fds(pid_t pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
  DIR *d = opendir(path);
  if (!d) return -1;
  int32_t n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

uint64_t pb_soak__read_rss(pid_t pid) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  uint64_t kb = 0;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "VmRSS: %" SCNu64 " kB", &kb) == 1) break;
  fclose(f);
  return kb * 1024;
}

int64_t pb_soak__read_heap(int stats_port, char *buf) {
  if (stats_port <= 0 || !buf) return -1;
  int st = pb_http_get("127.0.0.1", stats_port, "/stats", 500 * MS, buf, STATS_CAP);
  return st == 200 ? pb_soak_heap_slots(buf) : -1;
}

void pb_soak__read_counts(int stats_port, char *buf, server_counts *out) {
  out->shed = out->left_queued = out->left_running = -1;
  if (stats_port <= 0 || !buf) return;
  if (pb_http_get("127.0.0.1", stats_port, "/stats", 500 * MS, buf, STATS_CAP) != 200) return;
  double v;
  if (pb_json_find_number(buf, "shed", &v)) out->shed = (int64_t)v;
  if (pb_json_find_number(buf, "cancelled_queued", &v)) out->left_queued = (int64_t)v;
  if (pb_json_find_number(buf, "cancelled_running", &v)) out->left_running = (int64_t)v;
}

int64_t pb_soak__delta(int64_t before, int64_t after) {
  return before >= 0 && after >= before ? after - before : -1;
}

void pb_soak__sampler_main(void *arg) {
  sampler *s = arg;
  uv_mutex_lock(&s->lock);
  while (!s->stop) {
    uv_mutex_unlock(&s->lock);
    int32_t fds = pb_soak__count_fds(s->pid);
    uint64_t rss = pb_soak__read_rss(s->pid);
    int64_t heap = pb_soak__read_heap(s->stats_port, s->buf);
    uv_mutex_lock(&s->lock);
    s->fds_now = fds;
    s->rss_now = rss;
    s->heap = heap;
    if (fds > s->fds_max) s->fds_max = fds;
    if (rss > s->rss_max) s->rss_max = rss;
    if (!s->stop) uv_cond_timedwait(&s->cond, &s->lock, SEC);
  }
  uv_mutex_unlock(&s->lock);
}

/* The phase's maxima so far, and a fresh start for the next phase's. */
void pb_soak__sampler_take(sampler *s, int32_t *fds_max, uint64_t *rss_max) {
  uv_mutex_lock(&s->lock);
  if (fds_max) *fds_max = s->fds_max;
  if (rss_max) *rss_max = s->rss_max;
  s->fds_max = s->fds_now;
  s->rss_max = s->rss_now;
  uv_mutex_unlock(&s->lock);
}

void pb_soak__sampler_now(sampler *s, int32_t *fds, uint64_t *rss) {
  uv_mutex_lock(&s->lock);
  *fds = s->fds_now;
  *rss = s->rss_now;
  uv_mutex_unlock(&s->lock);
}

void pb_soak__sleep_ns(uint64_t ns) {
  struct timespec ts = {.tv_sec = (time_t)(ns / SEC), .tv_nsec = (long)(ns % SEC)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

/* Waits for the descriptor count to settle: back at or below `target` (when target >= 0), or
 * unchanged for 500 ms, or `max_ns` passed. Returns the last count (-1 unknown). The server
 * closes its side of the generator's connections a little after the generator did, so a count
 * read at once would overstate what it keeps. */
int32_t pb_soak__settle_fds(pid_t pid, int32_t target, uint64_t max_ns) {
  uint64_t end = uv_hrtime() + max_ns;
  int32_t last = -2;
  int stable = 0;
  for (;;) {
    int32_t n = pb_soak__count_fds(pid);
    if (n < 0) return -1;
    if (target >= 0 && n <= target) return n;
    stable = n == last ? stable + 1 : 0;
    last = n;
    if (stable >= 5 || uv_hrtime() >= end) return n;
    pb_soak__sleep_ns(100 * MS);
  }
}
