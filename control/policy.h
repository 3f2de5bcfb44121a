/* The controller's policy: thresholds, cooldowns and bounds, parsed from YAML text.
 *
 * One policy file is read identically by puma-plus-server, pp-sim and pp-replay; its hash
 * (of the canonical text, so comments and field order do not matter) is written in every
 * decision-log line. The parser works on memory only (libyaml); reading the file is the
 * caller's job. Durations accept units: "250us", "25ms", "3s", "1m"; a bare number is
 * seconds. Field reference: docs/CONTROL.md. */
#ifndef PP_POLICY_H
#define PP_POLICY_H

#include <stddef.h>
#include <stdint.h>

typedef struct pp_policy {
  uint64_t tick_ns;           /* tick: controller period (default 1s) */
  uint32_t min_workers;       /* min_workers (default 1) */
  uint32_t max_workers;       /* max_workers (default 8) */
  uint32_t max_step;          /* max_step: most workers added by one decision (default 4) */
  uint32_t cores;             /* cores: CPU bound for sizing, 0 = no bound (default 0) */
  int64_t memory_limit_bytes; /* memory_limit: bound for sizing, 0 = no bound (default 0) */

  uint64_t target_queue_p95_ns; /* target_queue_p95 (default 50ms) */
  double severe_factor;         /* severe_factor: p95 over factor*target acts at once (default 4) */
  uint32_t breach_ticks;        /* breach_ticks: ticks over target before acting (default 2) */
  double calm_fraction;         /* calm_fraction: p95 under fraction*target is calm (default 0.2) */
  double calm_utilisation;      /* calm_utilisation: busy/ready under this is calm (default 0.5) */
  uint32_t calm_ticks;          /* calm_ticks: calm ticks before retiring one (default 30) */
  uint64_t spawn_cooldown_ns;   /* spawn_cooldown (default 3s) */
  uint64_t retire_cooldown_ns;  /* retire_cooldown (default 30s) */
  double target_utilisation;    /* target_utilisation: sizing aims rho at this (default 0.7) */

  int threads_enabled;      /* threads.enabled (default false) */
  uint32_t min_threads;     /* threads.min (default 1) */
  uint32_t max_threads;     /* threads.max (default 16) */
  uint64_t gvl_wait_max_ns; /* threads.gvl_wait_max: add threads only below (default 5ms) */

  int shed_enabled;        /* shed.enabled (default false) */
  uint64_t shed_budget_ns; /* shed.budget: wait beyond which to shed; 0 = "auto", derived from
                              shed.client_timeout and shed.slo (default auto; see
                              pp_policy_shed_budget_ns) */

  /* Admission rule (control/admit.h). Fields added in policy format 2: the canonical text
   * writes them only when they differ from their defaults, and their defaults are what a
   * format-1 policy meant, so every format-1 policy keeps its canonical text and hash. */
  uint32_t shed_rule;              /* shed.rule: a pp_shed_rule (default predicted) */
  uint64_t shed_rate_window_ns;    /* shed.rate_window: drain-rate EWMA time constant (1s) */
  uint64_t shed_target_ns;         /* shed.target: codel sojourn target (default 50ms) */
  uint64_t shed_interval_ns;       /* shed.interval: codel interval (default 500ms) */
  uint64_t shed_client_timeout_ns; /* shed.client_timeout: for budget auto (default 20s) */
  uint64_t shed_slo_ns;            /* shed.slo: for budget auto (default 150ms) */
  uint64_t shed_standing_wait_ns;  /* shed.standing_wait: wait cap while a standing queue is
                                      detected (controlled rules); 0 = "auto" = 2 x the measured
                                      mean service time (default auto) */

  /* Standby workers: policy format 3, written in the canonical text only when not default,
   * like format 2; with the default (0) pp_decide behaves exactly as before. */
  uint32_t standby; /* standby: booted, parked workers to keep ready to activate (default 0) */

  /* Slots per worker as an actuator (docs/CONTROL.md rule 4b): policy format 4, written in the
   * canonical text only when not default. The rule acts only when the observation carries the
   * workers' CPU share (decision log v3); without it pp_decide decides as before. */
  int slots_enabled;          /* slots.enabled: may change slots per worker (default true) */
  uint32_t slots_rule;        /* slots.rule: a pp_slots_rule (default little) */
  uint32_t min_slots;         /* slots.min: fewest slots per worker (default 1) */
  uint32_t max_slots;         /* slots.max: most slots per worker (default 1024, at most 4096) */
  double slots_cpu_target;    /* slots.cpu_target: a worker's CPU share (of one core) that slot
                                 sizing aims at and that counts as GVL-bound (default 0.8) */
  double slots_inflation;     /* slots.inflation: service mean over this x the mean before a
                                 slot increase reverts it (default 1.5) */
  uint64_t slots_cooldown_ns; /* slots.cooldown: least time between slot changes, and the
                                 settling time before judging one (default 1s) */
  /* Policy format 5, likewise written only when not default. */
  int slots_cut; /* slots.cut: may halve a GVL-bound worker's configured slots, each cut judged
                    (docs/CONTROL.md rule 4b; default true) */

  /* The standby pool behind the slots (docs/CONTROL.md rule 6a): policy format 6, written in
   * the canonical text only when not default. 0 keeps the pool parked always (as before);
   * F >= 1 refills it only while slots alone could not carry F times the load: the load's CPU
   * per worker (arrival rate x CPU per request) times F reaches slots.cpu_target, or the
   * slots are at their bound. */
  double standby_cover; /* standby_cover: the load multiple the pool insures against (default 0) */
} pp_policy;

/* slots.rule values (pp_policy.slots_rule); docs/CONTROL.md §3b compares them. */
typedef enum pp_slots_rule {
  PP_SLOTS_RULE_LITTLE = 0,   /* "little": size slots by Little's law, bounded by CPU share */
  PP_SLOTS_RULE_GRADIENT = 1, /* "gradient": limit x min(1, (1+b) x S_min / S) + sqrt(limit) */
} pp_slots_rule;

/* "little", "gradient"; "?" for anything else. */
const char *pp_slots_rule_name(uint32_t rule);

/* shed.rule values (stored in pp_policy.shed_rule). Semantics: control/admit.h, docs/CONTROL.md. */
typedef enum pp_shed_rule {
  PP_SHED_RULE_PREDICTED = 0,  /* "predicted": W = (L - free + 1) * S / c, gated by the tick */
  PP_SHED_RULE_DRAIN = 1,      /* "drain": W = (L - free + 1) / mu, mu measured completions/s */
  PP_SHED_RULE_CODEL = 2,      /* "codel": a standing queue over shed.target for shed.interval */
  PP_SHED_RULE_CONTROLLED = 3, /* "controlled": drain's budget for a burst; once the budget is
                                  broken (a standing queue), waits capped at shed.standing_wait */
  PP_SHED_RULE_CONTROLLED_CODEL = 4, /* "controlled-codel": the same cap, entered CoDel's way
                                        (oldest over the cap for shed.interval) */
  PP_SHED_RULE_CONTROLLED_LIFO = 5,  /* "controlled-lifo": controlled, newest first while
                                        standing (the caller's queue must support it) */
} pp_shed_rule;

/* "predicted", "drain", "codel", "controlled", "controlled-codel", "controlled-lifo"; "?" for
 * anything else. */
const char *pp_shed_rule_name(uint32_t rule);

/* Where a parse or set failed. line/column are 1-based (0 when not from text). */
typedef struct pp_policy_error {
  int line;
  int column;
  char field[64];    /* dotted field name, e.g. "threads.max"; "" if the error is structural */
  char message[192]; /* full sentence, e.g. "expected a duration like 25ms, got \"fast\"" */
} pp_policy_error;

/* Sets every field to its default. */
void pp_policy_defaults(pp_policy *p);

/* Parses YAML text (a mapping of the fields above; nested `threads:` and `shed:` maps, or
 * dotted keys) over the defaults. Unknown keys are errors. Validates the result (see
 * pp_policy_validate). Returns 0, or PP_CTL_EPARSE / PP_CTL_EINVAL with *err filled; on
 * error *out holds defaults merged with whatever parsed before the error. err may be NULL. */
int pp_policy_parse(pp_policy *out, const char *yaml, size_t len, pp_policy_error *err);

/* Sets one field by its dotted name from text, as a flag or a sweep would
 * ("spawn_cooldown", "2s"). Returns 0, PP_CTL_ENOENT for an unknown field, PP_CTL_EINVAL
 * for a bad value. Does not validate cross-field rules: call pp_policy_validate after. */
int pp_policy_set(pp_policy *p, const char *field, const char *value, pp_policy_error *err);

/* Cross-field checks (min <= max, fractions in (0,1], tick > 0 ...). 0 or PP_CTL_EINVAL. */
int pp_policy_validate(const pp_policy *p, pp_policy_error *err);

/* Canonical text: every format-1 field, then each format-2 field (shed.rule ...) whose value
 * differs from its default; fixed order, one `name: value` line each, durations in ns with an
 * "ns" suffix (shed.budget "auto" as `auto`), doubles as %.17g. Parses back to an identical
 * struct. Returns the
 * length written (excluding NUL) or PP_CTL_ENOSPC. */
int pp_policy_canonical(const pp_policy *p, char *buf, size_t cap);

/* The wait budget admission control sheds against: shed.budget when set, else ("auto")
 *   max(shed.slo, shed.client_timeout / 2),
 * so that a served request's queue wait at the 1.5x promise (docs/CONTROL.md) is at most 3/4
 * of the client's timeout, leaving a quarter for service. With the defaults (20s, 150ms) it is
 * 10s, format 1's fixed default. Always > 0 for a valid policy. */
uint64_t pp_policy_shed_budget_ns(const pp_policy *p);

/* FNV-1a 64 of the canonical text. Equal policies hash equal, whatever their source text. */
uint64_t pp_policy_hash(const pp_policy *p);

/* The dotted names of all fields, NULL-terminated, for --help and sweep validation. */
extern const char *const pp_policy_field_names[];

#endif
