/* pp-replay's logic: load a decision log, find the policy that decided each line, verify
 * that pp_decide() still makes the logged decisions, run a tuned policy open-loop over the
 * logged observations (counterfactual), and print the log as a human table.
 *
 * Sans-I/O like control/: text in, structures and text out; pp_replay.c does the files,
 * flags and exit codes. Field reference and exit codes: docs/REPLAY.md. */
#ifndef PP_REPLAY_H
#define PP_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "control/control.h"

/* A decision log in memory. Tick records and header lines in file order; each record
 * remembers its 1-based line number. Owned arrays; pp_replay_log_dispose frees them. */
typedef struct pp_replay_log {
  pp_declog_record *recs;
  long *rec_lines;
  size_t n;
  pp_declog_header *headers;
  pp_policy *header_policies; /* the policy each header carries */
  long *header_lines;
  size_t n_headers;
} pp_replay_log;

/* Parses JSONL text. Blank lines are skipped; every other line must be a tick record or a
 * header line. Returns 0, or PP_CTL_EPARSE with *err naming the first bad line and field
 * (then the log is empty), or PP_CTL_EINVAL on allocation failure. */
int pp_replay_log_parse(pp_replay_log *log, const char *text, size_t len, pp_declog_error *err);
void pp_replay_log_dispose(pp_replay_log *log);

/* Where a record's policy came from. */
typedef enum pp_replay_policy_source {
  PP_REPLAY_POLICY_NONE = 0,     /* nothing with the record's hash was found */
  PP_REPLAY_POLICY_GIVEN = 1,    /* the --policy file */
  PP_REPLAY_POLICY_HEADER = 2,   /* a header line of the log */
  PP_REPLAY_POLICY_DEFAULTS = 3, /* pp_policy_defaults() */
} pp_replay_policy_source;

/* Finds the policy whose hash is `hash`: `given` (may be NULL) first, then the log's header
 * lines, then the defaults. Fills *out and returns the source, or PP_REPLAY_POLICY_NONE. */
pp_replay_policy_source pp_replay_policy_for(const pp_replay_log *log, uint64_t hash,
                                             const pp_policy *given, pp_policy *out);

/* The first difference between a logged tick and its replay. */
typedef struct pp_replay_diff {
  size_t index;       /* record index */
  long line;          /* its line in the file */
  uint64_t tick;      /* its tick */
  char field[48];     /* "decision.action", "state_after.breach_ticks", ... */
  char logged[288];   /* the logged value, as text */
  char replayed[288]; /* the replayed value, as text */
} pp_replay_diff;

/* Re-runs pp_decide(policy, copy of state_before, obs) for one record and compares the
 * decision (action, count, workers_target, predicted_wait_ns, rho bit-exactly, shed,
 * shed_budget_ns, reason) and the state after. Returns 0 when identical, 1 with *diff filled
 * (index/line are left for the caller). *replayed (may be NULL) receives the replayed
 * decision. */
int pp_replay_check_record(const pp_policy *policy, const pp_declog_record *r,
                           pp_decision *replayed, pp_replay_diff *diff);

/* One line of --explain: "tick 3  spawn_worker x2  queue p95 503ms over target ...".
 * Returns the length written (truncating to cap - 1). */
size_t pp_replay_explain_line(const pp_declog_record *r, char *buf, size_t cap);

/* Counterfactual, open-loop: the tuned policy decides on each logged observation, carrying
 * its own state from the first record's state_before. For record i, *out_i is its decision.
 * `state` is the running state (initialise it with the first record's state_before). */
pp_decision pp_replay_counterfactual_step(const pp_policy *tuned, pp_ctl_state *state,
                                          const pp_declog_record *r);

/* Whether two decisions differ in what an operator would see: action, count, shed. */
int pp_replay_decisions_differ(const pp_decision *a, const pp_decision *b);

#endif
