/* The ops layer's own context (ops/): the autoscaling controller's state (autoscale.c: its
 * policy, memory, decision log and shedding flag; the standby pool it drives is the workers
 * layer's, pp_standby in workers/workers.h) and the dashboard's
 * (dashboard.c). struct server holds one (s->ops). */
#ifndef PP_OPS_H
#define PP_OPS_H

#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <uv.h>

#include "control/control.h"
#include "control/hist.h"
#include "server/base/buf.h"
#include "server/base/config.h"
#include "server/base/hooks.h"
#include "server/core/core.h"
#include "server/exchange/exchange.h"
#include "server/ops/dashboard_state.h"
#include "server/session/conn.h"
#include "server/workers/workers.h"

typedef struct controller {
  int enabled;
  pp_policy policy;
  pp_ctl_state state;
  pp_decision last;
  int have_last;
  uint64_t tick;
  FILE *log;
  const char *log_path;
  int shedding;
  uint64_t shed_budget_ns;
  /* The observation's mem_per_worker_bytes as last read (autoscale.c, pss_every_ticks): at
   * tick mem_tick, for the ready workers whose pids hash to mem_key; -1 before the first read. */
  int64_t mem_pss;
  uint64_t mem_tick, mem_key;
} controller;
typedef struct pp_ops pp_ops;

struct pp_ops {
  controller ctl;    /* autoscale.c */
  pp_dashboard dash; /* /stats/stream and the decision history (dashboard.c) */
  struct pp_access_log
      *access_log; /* -access-log (access_log.c, opened by the process); NULL: none */
  /* Handed in at set-up (pp_ops_init): the lower layers' contexts it reads and drives, what
   * it reads of the process's state, and the process's hooks. */
  uv_loop_t *loop;
  pp_config *cfg; /* the controller's period follows the policy (cfg->tick_ns) */
  const pp_hooks *hooks;
  pp_exchange_pool *xpool;
  pp_workers *workers;
  pp_core *core;
  pp_sessions *sess;
  const int *draining;      /* the process is draining (SIGTERM, POST /stop) */
  const int *stopping;      /* the process is stopping its workers (the drain's end) */
  const time_t *started_at; /* when the process started */
  server *srv;              /* handed to the hooks */
  /* The /stats writer (pp_stats_json, set by pp_ops_init), which the dashboard's events carry:
   * dashboard.c calls it here, so it and stats.c (which asks it for its part) do not name each
   * other both ways. */
  void (*stats_json)(pp_ops *op, int pretty, pp_buf *out);
};

void pp_ops_init(pp_ops *op, server *srv, uv_loop_t *loop, pp_config *cfg, const pp_hooks *hooks,
                 pp_exchange_pool *xpool, pp_workers *workers, pp_core *core, pp_sessions *sess,
                 const int *draining, const int *stopping, const time_t *started_at);

/* stats.c */
/* Writes the /stats JSON (pretty: indented) into out. */
void pp_stats_json(pp_ops *op, int pretty, pp_buf *out);
/* Writes the Prometheus text of /metrics into out. */
void pp_stats_metrics(pp_ops *op, pp_buf *out);

/* autoscale.c */
/* Reads the policy (-policy, flags) and opens the decision log. 0, or -1 (logged). */
int pp_autoscale_init(pp_ops *op);
/* Writes the decision log's header line (the policy), at open and after SIGHUP. */
void pp_autoscale_log_header(pp_ops *op);
/* One controller tick: observation, pp_decide(), actuators, decision log. */
void pp_autoscale_tick(pp_ops *op);
/* A request that became runnable at enqueued_ns was just dispatched to w: if it is an
 * activated standby worker's first, its activation latency is recorded (pp_standby). */
void pp_autoscale_note_dispatch(pp_ops *op, pp_worker *w, int64_t enqueued_ns);

/* Memory of one process from /proc/PID/smaps_rollup, in bytes: USS = Private_Clean +
 * Private_Dirty, PSS = Pss, RSS = Rss. */
typedef struct pp_proc_mem {
  uint64_t rss, pss, uss;
} pp_proc_mem;
/* stats.c: 0, or -1 when the file cannot be read or parsed (the process is gone). */
int pp_proc_mem_read(uint32_t pid, pp_proc_mem *out);
/* stats.c: the mean PSS of the ready workers, -1 when none could be read. */
int64_t pp_workers_mean_pss(pp_ops *op);
/* stats.c: reads each worker's CPU time (/proc/PID/stat) and sets its cpu_share over the time
 * since the last sample (the tick calls it, before the controller). */
void pp_stats_sample_cpu(pp_ops *op, int64_t now_ns);

#endif
