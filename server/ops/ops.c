/* The ops layer's context (see ops.h): what it is handed at set-up. */
#include "server/ops/ops.h"

void pp_ops_init(pp_ops *op, server *srv, uv_loop_t *loop, pp_config *cfg, const pp_hooks *hooks,
                 pp_exchange_pool *xpool, pp_workers *workers, pp_core *core, pp_sessions *sess,
                 const int *draining, const int *stopping, const time_t *started_at) {
  op->srv = srv;
  op->loop = loop;
  op->cfg = cfg;
  op->hooks = hooks;
  op->xpool = xpool;
  op->workers = workers;
  op->core = core;
  op->sess = sess;
  op->draining = draining;
  op->stopping = stopping;
  op->started_at = started_at;
  op->stats_json = pp_stats_json;
}
