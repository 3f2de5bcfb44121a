/* The core's own context (core/): the one request queue, the request ids, the admission
 * rule's memory, and the front end's counters and latency windows that /stats and /metrics
 * report (pp_stats, proto/stats.h). struct server holds one (s->core). */
#ifndef PP_CORE_H
#define PP_CORE_H

#include <stdint.h>

#include "control/admit.h"
#include "server/base/hooks.h"
#include "server/base/queue.h"
#include "server/base/wallclock.h"
#include "server/exchange/exchange.h"
#include "server/net/transport.h"
#include "server/proto/stats.h"
#include "server/proto/tls.h"

typedef struct pp_core {
  pp_queue queue; /* runnable exchanges waiting for a worker (PP_X_QUEUED), oldest first */
  pp_runq runq;   /* the same exchanges by who may run them (base/queue.h; x->run) */
  uint64_t next_request_id;
  pp_stats stats;
  pp_admit_state admit; /* the admission rule's memory (control/admit.h) */
  /* Handed in at set-up (pp_core_init): the lower layers' contexts the core drives, and what
   * it reads of the layers above it. */
  pp_net *net;              /* write chunks for REQUEST, BODY, CANCEL */
  pp_exchange_pool *xpool;  /* the exchanges (its `up` is this context) */
  pp_registry *reg;         /* the workers' idle slots (workers/) */
  const pp_policy *policy;  /* the controller's policy (ops/): admission */
  const int *shedding;      /* the controller's shedding flag (ops/) */
  const pp_hooks *hooks;    /* activated_dispatch */
  server *srv;              /* handed to the hooks; never read here */
  const pp_wallclock *wall; /* realtime - monotonic, for X-Request-Start (base/wallclock.h) */
  /* Answers the spool budget's refusals (xpool->refusals) from the loop, outside the owner's
   * calls: started on the first refusal (refuse_idle_on: initialised). */
  uv_idle_t refuse_idle;
  int refuse_idle_on;
} pp_core;

/* The core of an exchange (from its pool). */
#define PP_CORE_OF(x) ((pp_core *)(x)->pool->up)

/* Sets up c (its queue, admission memory) with what it is handed, and makes it the `up` of
 * xpool. The counters' windows are the caller's to initialise. */
void pp_core_init(pp_core *c, server *srv, const pp_hooks *hooks, pp_net *net,
                  pp_exchange_pool *xpool, pp_registry *reg, const pp_policy *policy,
                  const int *shedding);

#endif
