/* pp-replay's logic (see replay.h). Workload: logs of a few thousand to a few hundred
 * thousand lines, read once; each record is re-decided once. Nothing here is hot. */
#include "replay/replay.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void pp_replay_log_dispose(pp_replay_log *log) {
  free(log->recs);
  free(log->rec_lines);
  free(log->headers);
  free(log->header_policies);
  free(log->header_lines);
  memset(log, 0, sizeof *log);
}

static int grow(void **p, size_t elem, size_t *cap, size_t need) {
  if (need <= *cap) return 0;
  size_t ncap = *cap ? *cap * 2 : 64;
  while (ncap < need)
    ncap *= 2;
  void *q = realloc(*p, ncap * elem);
  if (!q) return -1;
  *p = q;
  *cap = ncap;
  return 0;
}

int pp_replay_log_parse(pp_replay_log *log, const char *text, size_t len, pp_declog_error *err) {
  memset(log, 0, sizeof *log);
  size_t cap_r = 0, cap_rl = 0, cap_h = 0, cap_hp = 0, cap_hl = 0;
  long line = 0;
  size_t pos = 0;
  while (pos < len) {
    const char *start = text + pos;
    const char *nl = memchr(start, '\n', len - pos);
    size_t n = nl ? (size_t)(nl - start) : len - pos;
    pos += n + (nl ? 1 : 0);
    line++;
    size_t k = 0;
    while (k < n && (start[k] == ' ' || start[k] == '\t' || start[k] == '\r'))
      k++;
    if (k == n) continue; /* blank */
    int kind = pp_declog_line_kind(start, n);
    int rc;
    if (kind == PP_DECLOG_KIND_HEADER) {
      if (grow((void **)&log->headers, sizeof *log->headers, &cap_h, log->n_headers + 1) ||
          grow((void **)&log->header_policies, sizeof *log->header_policies, &cap_hp,
               log->n_headers + 1) ||
          grow((void **)&log->header_lines, sizeof(long), &cap_hl, log->n_headers + 1))
        goto oom;
      rc = pp_declog_decode_header(&log->headers[log->n_headers],
                                   &log->header_policies[log->n_headers], start, n, line, err);
      if (rc) goto bad;
      log->header_lines[log->n_headers++] = line;
    } else {
      if (grow((void **)&log->recs, sizeof *log->recs, &cap_r, log->n + 1) ||
          grow((void **)&log->rec_lines, sizeof(long), &cap_rl, log->n + 1))
        goto oom;
      rc = pp_declog_decode(&log->recs[log->n], start, n, line, err);
      if (rc) goto bad;
      log->rec_lines[log->n++] = line;
    }
  }
  return 0;
bad:
  pp_replay_log_dispose(log);
  return PP_CTL_EPARSE;
oom:
  pp_replay_log_dispose(log);
  if (err) {
    err->line = line;
    err->field[0] = '\0';
    snprintf(err->message, sizeof err->message, "out of memory");
  }
  return PP_CTL_EINVAL;
}

pp_replay_policy_source pp_replay_policy_for(const pp_replay_log *log, uint64_t hash,
                                             const pp_policy *given, pp_policy *out) {
  if (given && pp_policy_hash(given) == hash) {
    *out = *given;
    return PP_REPLAY_POLICY_GIVEN;
  }
  for (size_t i = 0; log && i < log->n_headers; i++) {
    if (log->headers[i].policy_hash == hash) {
      *out = log->header_policies[i];
      return PP_REPLAY_POLICY_HEADER;
    }
  }
  pp_policy d;
  pp_policy_defaults(&d);
  if (pp_policy_hash(&d) == hash) {
    *out = d;
    return PP_REPLAY_POLICY_DEFAULTS;
  }
  return PP_REPLAY_POLICY_NONE;
}

static void set_diff(pp_replay_diff *d, const char *field, const char *logged,
                     const char *replayed) {
  if (!d) return;
  snprintf(d->field, sizeof d->field, "%s", field);
  snprintf(d->logged, sizeof d->logged, "%s", logged);
  snprintf(d->replayed, sizeof d->replayed, "%s", replayed);
}

static int diff_u64(pp_replay_diff *d, const char *field, uint64_t a, uint64_t b) {
  if (a == b) return 0;
  char x[32], y[32];
  snprintf(x, sizeof x, "%" PRIu64, a);
  snprintf(y, sizeof y, "%" PRIu64, b);
  set_diff(d, field, x, y);
  return 1;
}

static int diff_i64(pp_replay_diff *d, const char *field, int64_t a, int64_t b) {
  if (a == b) return 0;
  char x[32], y[32];
  snprintf(x, sizeof x, "%" PRId64, a);
  snprintf(y, sizeof y, "%" PRId64, b);
  set_diff(d, field, x, y);
  return 1;
}

static int diff_state(pp_replay_diff *d, const char *prefix, const pp_ctl_state *a,
                      const pp_ctl_state *b) {
  char f[48];
#define S_U(name)                                                                                  \
  snprintf(f, sizeof f, "%s.%s", prefix, #name);                                                   \
  if (diff_u64(d, f, a->name, b->name)) return 1
#define S_I(name)                                                                                  \
  snprintf(f, sizeof f, "%s.%s", prefix, #name);                                                   \
  if (diff_i64(d, f, a->name, b->name)) return 1
  S_U(breach_ticks);
  S_U(calm_ticks);
  S_I(last_spawn_ns);
  S_I(last_retire_ns);
  S_I(last_thread_ns);
  S_U(workers_wanted);
  S_U(threads_wanted);
  S_I(shedding);
  S_U(standby_wanted);
  S_I(last_activate_ns);
#undef S_U
#undef S_I
  return 0;
}

int pp_replay_check_record(const pp_policy *policy, const pp_declog_record *r,
                           pp_decision *replayed, pp_replay_diff *diff) {
  pp_ctl_state st = r->state_before;
  pp_decision d = pp_decide(policy, &st, &r->obs);
  if (replayed) *replayed = d;
  const pp_decision *l = &r->decision;
  if (diff) {
    diff->tick = r->tick;
    diff->field[0] = '\0';
  }
  if (l->action != d.action) {
    set_diff(diff, "decision.action", pp_action_name(l->action), pp_action_name(d.action));
    return 1;
  }
  if (diff_u64(diff, "decision.count", l->count, d.count)) return 1;
  if (diff_u64(diff, "decision.workers_target", l->workers_target, d.workers_target)) return 1;
  if (diff_u64(diff, "decision.predicted_wait_ns", l->predicted_wait_ns, d.predicted_wait_ns))
    return 1;
  if (memcmp(&l->rho, &d.rho, sizeof(double)) != 0) {
    char x[40], y[40];
    snprintf(x, sizeof x, "%.17g", l->rho);
    snprintf(y, sizeof y, "%.17g", d.rho);
    set_diff(diff, "decision.rho", x, y);
    return 1;
  }
  if (diff_i64(diff, "decision.shed", l->shed, d.shed)) return 1;
  if (diff_u64(diff, "decision.shed_budget_ns", l->shed_budget_ns, d.shed_budget_ns)) return 1;
  if (diff_u64(diff, "decision.activate", l->activate, d.activate)) return 1;
  if (diff_u64(diff, "decision.standby_spawn", l->standby_spawn, d.standby_spawn)) return 1;
  if (strcmp(l->reason, d.reason) != 0) {
    set_diff(diff, "decision.reason", l->reason, d.reason);
    return 1;
  }
  return diff_state(diff, "state_after", &r->state_after, &st);
}

size_t pp_replay_explain_line(const pp_declog_record *r, char *buf, size_t cap) {
  if (cap == 0) return 0;
  char action[48];
  const pp_decision *d = &r->decision;
  if (d->action == PP_ACTION_NONE)
    snprintf(action, sizeof action, "none");
  else
    snprintf(action, sizeof action, "%s x%u", pp_action_name(d->action), d->count);
  /* The reason repeats the action as its prefix ("spawn_worker x2: "); drop it here. */
  const char *why = d->reason;
  const char *colon = strstr(why, ": ");
  if (colon && (size_t)(colon - why) < 40 &&
      strncmp(why, pp_action_name(d->action), strlen(pp_action_name(d->action))) == 0)
    why = colon + 2;
  int n = snprintf(buf, cap, "tick %-4" PRIu64 "  %-16s  %s", r->tick, action, why);
  if (n < 0) {
    buf[0] = '\0';
    return 0;
  }
  return (size_t)n < cap ? (size_t)n : cap - 1;
}

pp_decision pp_replay_counterfactual_step(const pp_policy *tuned, pp_ctl_state *state,
                                          const pp_declog_record *r) {
  return pp_decide(tuned, state, &r->obs);
}

int pp_replay_decisions_differ(const pp_decision *a, const pp_decision *b) {
  return a->action != b->action || a->count != b->count || a->shed != b->shed ||
         a->activate != b->activate || a->standby_spawn != b->standby_spawn;
}
