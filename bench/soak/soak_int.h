/* What the soak's files share (plan.c, verdict.c, watch.c, run.c): units, the request shapes of
 * the phases, and the watcher of the server (its descriptors, RSS and /stats, sampled on a
 * thread of its own). Not part of soak.h. */
#ifndef PP_BENCH_SOAK_INT_H
#define PP_BENCH_SOAK_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <uv.h>

#define MS  1000000ull
#define SEC 1000000000ull
#define KIB 1024u
#define MIB (1024u * 1024u)

/* The request shapes the phases use (scenarios/apps/mix/app.rb). */
#define PATH_HELLO   "/hello"
#define PATH_MIX     "/mix/2/20"
#define PATH_ECHO    "/echo"
#define PATH_CANCEL  "/mix/0/2000"
#define MIX_CPU_MS   2.0
#define MIX_SLEEP_MS 20.0

/* Room for one /stats document. */
#define STATS_CAP (512u * 1024u)

/* queue.shed, queue.cancelled_queued, queue.cancelled_running from /stats; -1 unknown. */
typedef struct server_counts {
  int64_t shed, left_queued, left_running;
} server_counts;

/* The sampler thread's state: the server's process and /stats port, and the latest and maximum
 * readings, under `lock`. */
typedef struct sampler {
  uv_thread_t thread;
  uv_mutex_t lock;
  uv_cond_t cond;
  bool stop;
  pid_t pid;
  int stats_port;
  char *buf;
  int32_t fds_now, fds_max;
  uint64_t rss_now, rss_max;
  int64_t heap;
} sampler;

/* watch.c */
int32_t pb_soak__count_fds(pid_t pid); /* open descriptors of `pid`, -1 unknown */
uint64_t pb_soak__read_rss(pid_t pid); /* VmRSS in bytes, 0 unknown */
/* Live heap slots from /stats (`buf` holds STATS_CAP bytes), -1 unknown. */
int64_t pb_soak__read_heap(int stats_port, char *buf);
void pb_soak__read_counts(int stats_port, char *buf, server_counts *out);
int64_t pb_soak__delta(int64_t before, int64_t after); /* after - before, -1 unknown */
void pb_soak__sampler_main(void *arg);                 /* the thread: once a second */
void pb_soak__sampler_take(sampler *s, int32_t *fds_max, uint64_t *rss_max);
void pb_soak__sampler_now(sampler *s, int32_t *fds, uint64_t *rss);
void pb_soak__sleep_ns(uint64_t ns);
int32_t pb_soak__settle_fds(pid_t pid, int32_t target, uint64_t max_ns);

#endif
