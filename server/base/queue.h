/* The one FIFO of runnable requests, and the worker registry that dispatch draws from.
 *
 * Both are plain data with no I/O so that dispatch order is unit-tested without sockets.
 * The queue is an intrusive doubly linked list: push and pop are O(1), and a request whose
 * client goes away while it waits leaves from the middle in O(1). The registry groups slots
 * (one per worker-thread connection) by worker pid; a worker becomes ready when its first
 * connection says HELLO. Dispatch takes an idle slot of the ready worker with the fewest busy
 * slots (spreading load across processes, each with its own GVL), lowest index on ties. */
#ifndef PP_QUEUE_H
#define PP_QUEUE_H

#include <stddef.h>
#include <stdint.h>

typedef struct pp_qnode {
  struct pp_qnode *prev, *next; /* both NULL while not linked */
} pp_qnode;

typedef struct pp_queue {
  pp_qnode head; /* sentinel */
  uint32_t len;  /* L */
} pp_queue;

void pp_queue_init(pp_queue *q);
void pp_queue_push(pp_queue *q, pp_qnode *n); /* at the tail */
pp_qnode *pp_queue_pop(pp_queue *q);          /* from the head, or NULL */
pp_qnode *pp_queue_peek(const pp_queue *q);
void pp_queue_remove(pp_queue *q, pp_qnode *n); /* n must be linked in q */
static inline int pp_qnode_linked(const pp_qnode *n) {
  return n->next != NULL;
}

#define PP_CONTAINER_OF(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

typedef enum pp_worker_state {
  PP_WORKER_FREE = 0,     /* registry entry unused */
  PP_WORKER_BOOTING = 1,  /* forked (or asked for), no connection yet */
  PP_WORKER_READY = 2,    /* at least one connection said HELLO */
  PP_WORKER_RETIRING = 3, /* no more dispatch; exits after its in-flight requests */
  PP_WORKER_PARKED = 4,   /* a standby worker: booted, not connected, waits for ACTIVATE */
} pp_worker_state;

typedef struct pp_worker pp_worker;

/* One worker-thread connection: one unit of capacity. Owned by the caller (embedded in its
 * connection struct); the registry only links it. */
typedef struct pp_slot {
  pp_qnode idle_link; /* in worker->idle while idle */
  pp_worker *worker;
  uint32_t thread_index;
  int busy;
  int ractor; /* the slot is a Ractor (HELLO's RACTOR bit); set by the caller before attach */
  void *data; /* the caller's */
} pp_slot;

struct pp_worker {
  pp_worker_state state;
  uint32_t pid;
  uint32_t index;        /* the shepherd's worker_index */
  uint32_t slots;        /* connected slots */
  uint32_t ractor_slots; /* of those, Ractor slots (HELLO's RACTOR bit) */
  uint32_t busy;         /* slots running a request */
  pp_queue idle;         /* idle slots, FIFO */
  int64_t forked_ns;     /* when FORKED (or first seen) arrived */
  int64_t ready_ns;      /* when the first HELLO arrived; 0 before */
  uint64_t requests;     /* requests dispatched to this worker */
  int retire_sent;       /* RETIRE has been sent to the shepherd */
  /* Liveness (wlink.c): the last HEARTBEAT on its monitor connection (0: none yet, never timed
   * out), and whether the server has killed it (request timeout or silent heartbeat). */
  int64_t heartbeat_ns;
  int64_t heap_live_slots; /* from its last HEARTBEAT (GC.stat), -1 unknown */
  uint32_t slots_target;   /* run-time slot target last sent (SLOTS); 0: never set */
  /* CPU time (utime + stime, /proc/PID/stat) sampled each tick, and its share of one core
   * over the last tick (-1 until two samples): near 1 GVL-bound, small waiting on I/O. */
  uint64_t cpu_ns;
  int64_t cpu_sampled_ns; /* when cpu_ns was read; 0 never */
  double cpu_share;
  int64_t cpu_delta_ns;  /* CPU time over the last tick in ns (-1 until two samples) */
  uint64_t wait_ns;      /* its threads' run-queue wait (schedstat), summed over live threads */
  int64_t wait_delta_ns; /* run-queue wait over the last tick in ns (0 when unknown) */
  double demand_share;   /* (CPU + run-queue wait) over the last tick, a share of one core */
  int killed;
  /* Standby workers (docs/CONTROL.md section 8): when PARKED arrived, and the decision time of
   * its activation until the first request dispatched to it has been timed (then 0). */
  int64_t parked_ns;
  int64_t activated_ns;
  uint32_t generation; /* the registry's phase when the entry was made (phased.h) */
  /* Queued entries that only this worker may run (sticky WebSocket events, pp_runlink.node),
   * oldest first. An entry is not reused for another worker while this holds any. */
  pp_queue sticky;
};

#define PP_MAX_WORKERS 256

typedef struct pp_registry {
  pp_worker workers[PP_MAX_WORKERS];
  uint32_t high;        /* entries [high, PP_MAX_WORKERS) have never been used */
  uint32_t slots_ready; /* connected slots of READY workers */
  uint32_t slots_busy;
  uint32_t ractor_slots; /* connected Ractor slots of every worker, whatever its state */
  uint32_t phase;        /* the generation new entries get; a phased restart increments it */
} pp_registry;

void pp_registry_init(pp_registry *r);
/* The entry of pid, or NULL. */
pp_worker *pp_registry_find(pp_registry *r, uint32_t pid);
/* The entry of pid, created BOOTING if new (NULL if the registry is full). */
pp_worker *pp_registry_add(pp_registry *r, uint32_t pid, uint32_t index, int64_t now_ns);
/* A connection of worker pid said HELLO: link the slot idle, make the worker READY. Returns the
 * worker, or NULL if the registry is full. */
/* Reads worker w's CPU time (/proc/PID/stat) and its threads' run-queue wait (schedstat) at
 * now_ns; from the second reading on, sets cpu_delta_ns, cpu_share, wait_delta_ns and
 * demand_share over the time since the one before. A failed read leaves w as it was. */
void pp_worker_sample_cpu(pp_worker *w, int64_t now_ns);

pp_worker *pp_registry_attach(pp_registry *r, pp_slot *s, uint32_t pid, uint32_t worker_index,
                              uint32_t thread_index, int64_t now_ns);
/* The slot's connection closed. Returns its worker (still registered). */
pp_worker *pp_registry_detach(pp_registry *r, pp_slot *s);
/* Removes a worker entry (its process exited). Its slots must already be detached. */
void pp_registry_remove(pp_registry *r, pp_worker *w);
/* Stops dispatching to w; its busy slots finish. */
void pp_registry_retire(pp_registry *r, pp_worker *w);
/* Takes an idle slot for dispatch (marks it busy), or NULL if none. */
pp_slot *pp_registry_take(pp_registry *r);
/* Takes an idle slot of worker w (READY) for dispatch, or NULL if it has none: a sticky
 * WebSocket event goes only to the worker that accepted its connection. */
pp_slot *pp_registry_take_worker(pp_registry *r, pp_worker *w);
/* Nonzero when pp_registry_take would return a slot. */
int pp_registry_has_idle(const pp_registry *r);
/* The slot finished its request and is idle again (unless its worker is retiring). */
void pp_registry_release(pp_registry *r, pp_slot *s);
/* Counts by state. */
uint32_t pp_registry_count(const pp_registry *r, pp_worker_state state);

/* The run lists: which queued entry an idle slot takes next (core/dispatch.c). Every queued
 * entry is in the one FIFO (the caller's pp_queue, which gives L, the oldest entry and its
 * queue time) and, through its pp_runlink, in one run list: `any` (any slot may run it), its
 * sticky worker's pp_worker.sticky (only that worker's slots may), or `gone` (its worker was
 * not registered when it was queued). The choice looks at the head of each list and never
 * walks past entries that wait for a busy worker: O(workers) per dispatch (as the slot choice
 * of pp_registry_take), whatever the queue holds. Order is kept: each list is FIFO, and the
 * heads compare by when they were queued. */
typedef struct pp_runlink {
  pp_qnode node;       /* in its run list */
  uint64_t seq;        /* queue order */
  uint32_t sticky_pid; /* 0: any slot */
  pp_worker *worker;   /* its sticky worker's entry, or NULL (any slot, or gone) */
} pp_runlink;

typedef struct pp_runq {
  pp_queue any;  /* entries any slot may run */
  pp_queue gone; /* sticky entries whose worker was not registered when they were queued */
  uint64_t next_seq;
  uint32_t waiting; /* entries in workers' lists: none, and the choice is any's head */
  uint64_t looked;  /* list heads pp_runq_first looked at, in total: its cost */
} pp_runq;

void pp_runq_init(pp_runq *q);
/* Links e into its run list (sticky_pid 0: any slot; else that worker's list, or `gone`).
 * Inline: once per request on the hot path. */
static inline void pp_runq_push(pp_runq *q, pp_registry *r, pp_runlink *e, uint32_t sticky_pid) {
  e->seq = q->next_seq++;
  e->sticky_pid = sticky_pid;
  e->worker = sticky_pid ? pp_registry_find(r, sticky_pid) : NULL;
  q->waiting += e->worker != NULL;
  pp_queue_push(e->worker ? &e->worker->sticky : sticky_pid ? &q->gone : &q->any, &e->node);
}
/* Unlinks e (pushed, not yet removed) from its run list. */
static inline void pp_runq_remove(pp_runq *q, pp_runlink *e) {
  q->waiting -= e->worker != NULL;
  pp_queue_remove(e->worker ? &e->worker->sticky : e->sticky_pid ? &q->gone : &q->any, &e->node);
}
/* The entry to take off next, or NULL when no idle slot may run any (then only entries of busy
 * workers wait). *gone = 1: a sticky entry whose worker is gone or no longer takes work (not
 * READY or BOOTING), which the caller fails; these come first. Else the oldest entry an idle
 * slot may run, with *wk its sticky worker (take the slot with pp_registry_take_worker), or
 * NULL (any slot: pp_registry_take). The entry stays linked. */
pp_runlink *pp_runq_first(pp_runq *q, pp_registry *r, pp_worker **wk, int *gone);

#endif
