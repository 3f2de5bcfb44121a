/* pp_decide(): the one place a scaling choice is made.
 *
 * Pure and deterministic: the same (policy, state, observation) gives the same decision
 * and the same next state, on any machine, in the server, the simulator or the replayer.
 * No clocks (time comes in obs->time_ns), no globals, no allocation. The rules and their
 * reasons are documented in docs/CONTROL.md. */
#ifndef PP_DECIDE_H
#define PP_DECIDE_H

#include <stdint.h>
#include "control/observation.h"
#include "control/policy.h"

typedef enum pp_action {
  PP_ACTION_NONE = 0,
  PP_ACTION_SPAWN_WORKER = 1,
  PP_ACTION_RETIRE_WORKER = 2,
  PP_ACTION_ADD_THREAD = 3,
  PP_ACTION_REMOVE_THREAD = 4,
  PP_ACTION_SET_SLOTS = 5, /* count = the new number of slots per worker (absolute) */
} pp_action;

/* The controller's memory between ticks. Plain data, logged before and after every tick.
 * INT64_MIN in a *_ns time field means "never". */
typedef struct pp_ctl_state {
  uint32_t breach_ticks;   /* consecutive ticks over target (queue p95 or predicted wait) */
  uint32_t calm_ticks;     /* consecutive calm ticks */
  int64_t last_spawn_ns;   /* time of the last spawn decision */
  int64_t last_retire_ns;  /* time of the last retire decision */
  int64_t last_thread_ns;  /* time of the last thread change */
  uint32_t workers_wanted; /* workers the controller has asked for (ready + booting) */
  uint32_t threads_wanted; /* threads per worker the controller has asked for */
  int shedding;            /* admission control currently on */
  /* Added with standby workers (decision log v2); both stay at their init values (0, never)
   * when the policy has standby 0 and the observation reports no standby workers. */
  uint32_t standby_wanted;  /* standby workers parked + booting, after this tick's action */
  int64_t last_activate_ns; /* time of the last standby activation */
  /* Added with slots as an actuator (decision log v3; docs/CONTROL.md rule 4b). All stay at
   * their init values (never, 0) until the first set_slots, so older logs replay unchanged. */
  int64_t last_slots_ns;        /* time of the last set_slots */
  uint32_t slots_from;          /* slots per worker before the last increase, until it is
                                   judged (0: nothing to judge) */
  uint64_t slots_svc_before_ns; /* service mean at the tick of that increase */
  uint32_t slots_ceiling;       /* slots an increase was reverted to: no growth beyond this
                                   until a calm period clears it (0: none) */
  uint32_t slots_base;          /* slots per worker before rule 4b first added any: what
                                   taking concurrency back returns to (0: none added) */
  uint64_t svc_base_ns;         /* slots.rule gradient: the baseline service time (fast down,
                                   slow up); 0 until measured */
  /* Added with cutting configured slots on GVL-bound workers (decision log v5). Both stay 0
   * until the first cut, so older logs replay unchanged. */
  uint32_t slots_cut_from; /* slots per worker before the last cut of slots the rule did not
                              add, until it is judged (0: nothing to judge) */
  uint32_t slots_floor;    /* a cut that left the CPU idle was reverted to this: no cut below
                              it until a calm period clears it (0: none) */
  double slots_cut_share;  /* the busiest worker's CPU share at that cut (0: none) */
} pp_ctl_state;

typedef struct pp_decision {
  pp_action action;
  uint32_t count;             /* units for the action (0 for NONE) */
  uint32_t workers_target;    /* workers_wanted after this decision */
  uint64_t predicted_wait_ns; /* W_pred at this tick (UINT64_MAX: no capacity) */
  double rho;                 /* utilisation estimate: arrival_rate * S / c */
  int shed;                   /* admission control on after this decision */
  uint64_t shed_budget_ns;    /* wait budget the server sheds against when shed is on */
  char reason[256];           /* one human line, e.g. "spawn_worker x2: queue p95 503ms over ..." */
  /* Standby (decision log v2). Of `count` workers a spawn_worker adds,
   * `activate` are standby workers to activate (one frame each, serving within a tick) and
   * count - activate are forked; `standby_spawn` replacement standby workers are forked to
   * refill the pool, whatever the action. */
  uint32_t activate;
  uint32_t standby_spawn;
} pp_decision;

/* Initial state for a server that starts with `workers` workers and `threads` threads each. */
void pp_ctl_state_init(pp_ctl_state *s, const pp_policy *p, uint32_t workers, uint32_t threads);

/* Decides one tick. Reads *policy and *obs, updates *state to the next state, returns the
 * decision. Never fails: invalid inputs produce a NONE decision whose reason says why. */
pp_decision pp_decide(const pp_policy *policy, pp_ctl_state *state, const pp_observation *obs);

/* "none", "spawn_worker", "retire_worker", "add_thread", "remove_thread", "set_slots". */
const char *pp_action_name(pp_action a);
/* Inverse of pp_action_name. 0, or PP_CTL_EINVAL for an unknown name. */
int pp_action_parse(const char *name, pp_action *out);

#endif
