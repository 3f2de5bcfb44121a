/* pp-replay: verify, explain, and what-if a puma-plus decision log (docs/REPLAY.md).
 *
 *   pp-replay LOG.jsonl                       verify: every logged decision is re-made
 *   pp-replay LOG.jsonl --policy FILE         verify with FILE, or counterfactual if its
 *                                             hash is not the log's
 *   pp-replay LOG.jsonl --policy FILE --counterfactual
 *   pp-replay LOG.jsonl --explain             the log as a human table
 *
 * Exit codes: 0 identical (or report printed), 1 a replayed decision differs, 2 unusable
 * input (malformed log, unreadable file, bad policy, no matching policy, bad flags). */
#include "replay/replay.h"
#ifdef PP_REPLAY_HAVE_SIM
#include "replay/simulate.h"
#endif

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXIT_SAME    0
#define EXIT_DIFFERS 1
#define EXIT_INPUT   2

static const char usage[] =
    "usage: pp-replay LOG.jsonl [--policy FILE] [--verify | --counterfactual | --explain"
#ifdef PP_REPLAY_HAVE_SIM
    " | --simulate"
#endif
    "]\n"
    "\n"
    "Re-runs the controller's decide() on a decision log written by puma-plus-server\n"
    "(-decision-log) or pp-sim, and compares.\n"
    "\n"
    "  (default)         verify: re-decide every tick from its logged state and observation;\n"
    "                    exit 0 if every decision and next state is identical, 1 at the first\n"
    "                    difference (tick, field, logged vs replayed)\n"
    "  --policy FILE     the YAML policy that decided the log (its hash must match the log's\n"
    "                    policy_hash to verify); without it, the policy in the log's header\n"
    "                    line or the defaults are used when their hash matches. If FILE's hash\n"
    "                    differs from the log's and --verify is not given, runs --counterfactual\n"
    "  --verify          verify even with --policy; a hash mismatch is an error\n"
    "  --counterfactual  open-loop what-if: FILE's policy decides on each logged observation;\n"
    "                    lists the ticks where it decides differently, and how\n"
    "  --explain         print the log as a table: tick, action, reason\n"
#ifdef PP_REPLAY_HAVE_SIM
    "  --simulate        re-simulate the logged workload (arrivals per tick, service-time\n"
    "                    summary) closed-loop under the logged policy and, with --policy,\n"
    "                    the tuned one; prints the two summaries side by side\n"
    "    --seed N        arrival placement and simulator seed (default 1)\n"
    "    --cores N       simulated machine cores (default: the simulator's, 8)\n"
    "    --cpu-share X   CPU share of service time, 0..1 (default: from the log, else 0.5)\n"
#endif
    "  -h, --help        this text\n"
    "\n"
    "Exit: 0 identical (or report printed), 1 a decision differs, 2 unusable input\n"
    "(malformed log as file:line: field: message, missing or mismatched policy, bad flags).\n";

static char *read_file(const char *path, size_t *len) {
  FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap + 1);
  while (buf) {
    size_t got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (n < cap) break;
    cap *= 2;
    char *nb = realloc(buf, cap + 1);
    if (!nb) {
      free(buf);
      buf = NULL;
    }
    buf = nb;
  }
  int failed = ferror(f);
  if (f != stdin) fclose(f);
  if (!buf || failed) {
    free(buf);
    if (failed) errno = EIO;
    return NULL;
  }
  buf[n] = '\0';
  *len = n;
  return buf;
}

static int load_policy(const char *path, pp_policy *p) {
  size_t len;
  char *text = read_file(path, &len);
  if (!text) {
    fprintf(stderr, "pp-replay: %s: %s\n", path, strerror(errno));
    return -1;
  }
  pp_policy_error e;
  int rc = pp_policy_parse(p, text, len, &e);
  free(text);
  if (rc) {
    fprintf(stderr, "pp-replay: %s:%d:%d: %s%s%s\n", path, e.line, e.column, e.field,
            e.field[0] ? ": " : "", e.message);
    return -1;
  }
  return 0;
}

static const char *source_name(pp_replay_policy_source s, const char *policy_path) {
  switch (s) {
  case PP_REPLAY_POLICY_GIVEN: return policy_path;
  case PP_REPLAY_POLICY_HEADER: return "the log's header line";
  case PP_REPLAY_POLICY_DEFAULTS: return "the defaults";
  default: return "nowhere";
  }
}

static int explain(const char *path, const pp_replay_log *log) {
  size_t h = 0;
  char line[512];
  printf("# %s: %zu ticks\n", path, log->n);
  for (size_t i = 0; i < log->n; i++) {
    while (h < log->n_headers && log->header_lines[h] < log->rec_lines[i]) {
      printf("# policy %016" PRIx64 " (header, line %ld)\n", log->headers[h].policy_hash,
             log->header_lines[h]);
      h++;
    }
    pp_replay_explain_line(&log->recs[i], line, sizeof line);
    puts(line);
  }
  return EXIT_SAME;
}

static int verify(const char *path, const pp_replay_log *log, const pp_policy *given,
                  const char *policy_path) {
  uint64_t last_hash = 0;
  pp_policy policy;
  pp_replay_policy_source src = PP_REPLAY_POLICY_NONE;
  size_t sources[4] = {0};
  for (size_t i = 0; i < log->n; i++) {
    const pp_declog_record *r = &log->recs[i];
    if (i == 0 || r->policy_hash != last_hash) {
      /* A policy file given to verify must be the one that decided: never silently fall
       * back to the header's or the defaults when the caller named a file. */
      src = given && pp_policy_hash(given) != r->policy_hash
                ? PP_REPLAY_POLICY_NONE
                : pp_replay_policy_for(log, r->policy_hash, given, &policy);
      last_hash = r->policy_hash;
      if (src == PP_REPLAY_POLICY_NONE) {
        pp_policy d;
        pp_policy_defaults(&d);
        fprintf(stderr,
                "pp-replay: %s:%ld: policy_hash: tick %" PRIu64 " was decided by policy %016" PRIx64
                "; ",
                path, log->rec_lines[i], r->tick, r->policy_hash);
        if (given)
          fprintf(stderr, "%s hashes to %016" PRIx64 " (pass --counterfactual for a what-if)\n",
                  policy_path, pp_policy_hash(given));
        else
          fprintf(stderr,
                  "the log has no header line with it and the defaults hash to %016" PRIx64
                  "; pass --policy FILE with the policy file whose hash is %016" PRIx64 "\n",
                  pp_policy_hash(&d), r->policy_hash);
        return EXIT_INPUT;
      }
    }
    sources[src]++;
    pp_replay_diff diff;
    pp_decision replayed;
    if (pp_replay_check_record(&policy, r, &replayed, &diff)) {
      printf("%s:%ld: tick %" PRIu64 ": %s differs\n", path, log->rec_lines[i], r->tick,
             diff.field);
      printf("  logged:          %s\n", diff.logged);
      printf("  replayed:        %s\n", diff.replayed);
      if (strcmp(diff.field, "decision.reason") != 0) {
        printf("  logged reason:   %s\n", r->decision.reason);
        printf("  replayed reason: %s\n", replayed.reason);
      }
      printf("  policy %016" PRIx64 " from %s; %zu earlier ticks replayed identically\n",
             r->policy_hash, source_name(src, policy_path), i);
      return EXIT_DIFFERS;
    }
  }
  printf("%s: %zu ticks replayed identically (policy from", path, log->n);
  const char *sep = " ";
  for (int s = 1; s <= 3; s++) {
    if (sources[s]) {
      printf("%s%s", sep, source_name((pp_replay_policy_source)s, policy_path));
      sep = ", ";
    }
  }
  printf(")\n");
  return EXIT_SAME;
}

static void action_text(const pp_decision *d, char *buf, size_t cap) {
  if (d->action == PP_ACTION_NONE)
    snprintf(buf, cap, "none");
  else
    snprintf(buf, cap, "%s x%u", pp_action_name(d->action), d->count);
  if (d->shed) snprintf(buf + strlen(buf), cap - strlen(buf), " +shed");
}

static int counterfactual(const char *path, const pp_replay_log *log, const pp_policy *tuned,
                          const char *policy_path) {
  uint64_t tuned_hash = pp_policy_hash(tuned);
  printf("# counterfactual, open-loop: %s (policy %016" PRIx64 ") on the observations of %s "
         "(logged policy %016" PRIx64 ")\n",
         policy_path, tuned_hash, path, log->recs[0].policy_hash);
  printf("# the workload is as logged: after the first difference the tuned policy's world\n"
         "# would have been different (a closed-loop comparison needs the simulator)\n");
  pp_ctl_state st = log->recs[0].state_before;
  size_t differ = 0;
  unsigned long logged_units[5] = {0}, tuned_units[5] = {0};
  for (size_t i = 0; i < log->n; i++) {
    const pp_declog_record *r = &log->recs[i];
    pp_decision d = pp_replay_counterfactual_step(tuned, &st, r);
    logged_units[r->decision.action] += r->decision.count;
    if ((unsigned)d.action < 5) tuned_units[d.action] += d.count;
    if (!pp_replay_decisions_differ(&r->decision, &d)) continue;
    differ++;
    char a[48], b[48];
    action_text(&r->decision, a, sizeof a);
    action_text(&d, b, sizeof b);
    printf("tick %-5" PRIu64 " logged %-18s tuned %-18s %s\n", r->tick, a, b, d.reason);
  }
  printf("# %zu of %zu ticks decided differently; workers spawned %lu -> %lu, retired %lu -> "
         "%lu, threads added %lu -> %lu\n",
         differ, log->n, logged_units[PP_ACTION_SPAWN_WORKER], tuned_units[PP_ACTION_SPAWN_WORKER],
         logged_units[PP_ACTION_RETIRE_WORKER], tuned_units[PP_ACTION_RETIRE_WORKER],
         logged_units[PP_ACTION_ADD_THREAD], tuned_units[PP_ACTION_ADD_THREAD]);
  return EXIT_SAME;
}

#ifdef PP_REPLAY_HAVE_SIM
static void row_d(const char *name, double a, double b, int two, const char *fmt) {
  printf("%-24s", name);
  printf(fmt, a);
  if (two) printf(fmt, b);
  printf("\n");
}

static int simulate(const char *path, const pp_replay_log *log, const pp_policy *given,
                    const char *policy_path, const pp_replay_sim_options *opt) {
  pp_policy logged;
  uint64_t hash = log->recs[0].policy_hash;
  pp_replay_policy_source src = pp_replay_policy_for(log, hash, given, &logged);
  if (src == PP_REPLAY_POLICY_NONE) {
    fprintf(stderr,
            "pp-replay: %s: the log's policy %016" PRIx64 " is not in a header line and is not "
            "the defaults; --simulate needs it to re-simulate the logged run\n",
            path, hash);
    return EXIT_INPUT;
  }
  const pp_policy *tuned = given && pp_policy_hash(given) != hash ? given : NULL;
  pp_scenario scn;
  pp_replay_workload w;
  char err[256];
  if (pp_replay_build_scenario(log, &logged, tuned, opt, &scn, &w, err, sizeof err) != 0) {
    fprintf(stderr, "pp-replay: %s: cannot re-simulate: %s\n", path, err);
    pp_scenario_dispose(&scn);
    return EXIT_INPUT;
  }
  printf("# re-simulation of %s: %" PRIu64 " arrivals over %.0f s, service mean %.1f ms p95 "
         "%.1f ms, cpu share %.2f (%s), start %u workers x %u threads, %u cores, seed %" PRIu64
         "\n",
         path, w.arrivals, w.duration_s, w.service_mean_ns / 1e6, w.service_p95_ns / 1e6,
         w.cpu_share, w.cpu_share_from_log ? "from the log" : "assumed", w.workers, w.threads,
         scn.cores, opt->seed);
  printf("# closed loop: the simulated workers follow each policy's own decisions, so the\n"
         "# 'logged' column is the simulator's model of the logged run, not the measurement\n");
  pp_sim_result res[2];
  memset(res, 0, sizeof res);
  int rc = 0;
  for (uint32_t c = 0; c < scn.n_configs && rc == 0; c++) {
    pp_sim_options so;
    pp_sim_options_default(&so, &scn);
    so.seed = opt->seed;
    so.keep_timeline = 0;
    so.keep_decisions = 0;
    rc = pp_sim_run(&scn, c, &so, &res[c]);
  }
  if (rc != 0) {
    fprintf(stderr, "pp-replay: simulation failed: %s\n", pp_sim_strerror(rc));
  } else {
    int two = scn.n_configs == 2;
    char h1[64], h2[64];
    snprintf(h1, sizeof h1, "logged %016" PRIx64, hash);
    snprintf(h2, sizeof h2, "tuned %016" PRIx64, two ? pp_policy_hash(given) : 0);
    printf("%-24s%-24s%s\n", "", h1, two ? h2 : "");
    if (two) printf("%-24s%-24s%s\n", "", source_name(src, policy_path), policy_path);
    const pp_summary *a = &res[0].summary, *b = &res[two ? 1 : 0].summary;
    row_d("requests", (double)a->requests, (double)b->requests, two, "%-24.0f");
    row_d("completed", (double)a->completed, (double)b->completed, two, "%-24.0f");
    row_d("p50 ms", a->p50_ns / 1e6, b->p50_ns / 1e6, two, "%-24.1f");
    row_d("p99 ms", a->p99_ns / 1e6, b->p99_ns / 1e6, two, "%-24.1f");
    row_d("max ms", a->max_ns / 1e6, b->max_ns / 1e6, two, "%-24.1f");
    row_d("excess latency s", a->excess_latency_ns / 1e9, b->excess_latency_ns / 1e9, two,
          "%-24.1f");
    row_d("queue p95 ms", a->queue_p95_ns / 1e6, b->queue_p95_ns / 1e6, two, "%-24.1f");
    row_d("shed", (double)a->shed, (double)b->shed, two, "%-24.0f");
    row_d("timed out", (double)a->timed_out, (double)b->timed_out, two, "%-24.0f");
    row_d("worker-seconds", a->worker_seconds, b->worker_seconds, two, "%-24.1f");
    row_d("avg workers", a->avg_workers, b->avg_workers, two, "%-24.2f");
    row_d("peak workers", (double)a->peak_workers, (double)b->peak_workers, two, "%-24.0f");
  }
  for (uint32_t c = 0; c < scn.n_configs; c++)
    pp_sim_result_dispose(&res[c]);
  pp_scenario_dispose(&scn);
  return rc == 0 ? EXIT_SAME : EXIT_INPUT;
}
#endif

int main(int argc, char **argv) {
  const char *log_path = NULL, *policy_path = NULL;
  int want_verify = 0, want_cf = 0, want_explain = 0, want_sim = 0;
#ifdef PP_REPLAY_HAVE_SIM
  pp_replay_sim_options sim_opt = {1, 0, -1.0};
#endif
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      fputs(usage, stdout);
      return EXIT_SAME;
    } else if (strcmp(a, "--policy") == 0 || strcmp(a, "-policy") == 0) {
      if (++i >= argc) {
        fprintf(stderr, "pp-replay: --policy needs a file\n");
        return EXIT_INPUT;
      }
      policy_path = argv[i];
    } else if (strncmp(a, "--policy=", 9) == 0) {
      policy_path = a + 9;
    } else if (strcmp(a, "--verify") == 0) {
      want_verify = 1;
    } else if (strcmp(a, "--counterfactual") == 0) {
      want_cf = 1;
    } else if (strcmp(a, "--explain") == 0) {
      want_explain = 1;
#ifdef PP_REPLAY_HAVE_SIM
    } else if (strcmp(a, "--simulate") == 0) {
      want_sim = 1;
    } else if (strcmp(a, "--seed") == 0 || strcmp(a, "--cores") == 0 ||
               strcmp(a, "--cpu-share") == 0) {
      char *end = NULL;
      if (++i >= argc) {
        fprintf(stderr, "pp-replay: %s needs a value\n", a);
        return EXIT_INPUT;
      }
      errno = 0;
      if (strcmp(a, "--cpu-share") == 0) {
        double x = strtod(argv[i], &end);
        if (*end || end == argv[i] || !(x >= 0 && x <= 1)) {
          fprintf(stderr, "pp-replay: --cpu-share: expected a number from 0 to 1, got %s\n",
                  argv[i]);
          return EXIT_INPUT;
        }
        sim_opt.cpu_share = x;
      } else {
        unsigned long long x = strtoull(argv[i], &end, 10);
        if (*end || end == argv[i] || errno || argv[i][0] == '-' ||
            (strcmp(a, "--cores") == 0 && (x == 0 || x > 4096))) {
          fprintf(stderr, "pp-replay: %s: expected a positive integer, got %s\n", a, argv[i]);
          return EXIT_INPUT;
        }
        if (strcmp(a, "--seed") == 0)
          sim_opt.seed = x;
        else
          sim_opt.cores = (uint32_t)x;
      }
#endif
    } else if (a[0] == '-' && a[1] != '\0') {
      fprintf(stderr, "pp-replay: unknown option %s (see --help)\n", a);
      return EXIT_INPUT;
    } else if (log_path) {
      fprintf(stderr, "pp-replay: one log at a time (got %s and %s)\n", log_path, a);
      return EXIT_INPUT;
    } else {
      log_path = a;
    }
  }
  if (!log_path) {
    fputs(usage, stderr);
    return EXIT_INPUT;
  }
  if (want_verify + want_cf + want_explain + want_sim > 1) {
    fprintf(stderr,
            "pp-replay: --verify, --counterfactual, --explain and --simulate are exclusive\n");
    return EXIT_INPUT;
  }
  if (want_cf && !policy_path) {
    fprintf(stderr, "pp-replay: --counterfactual needs --policy FILE (the tuned policy)\n");
    return EXIT_INPUT;
  }
  pp_policy given;
  if (policy_path && load_policy(policy_path, &given) != 0) return EXIT_INPUT;

  size_t len;
  char *text = read_file(log_path, &len);
  if (!text) {
    fprintf(stderr, "pp-replay: %s: %s\n", log_path, strerror(errno));
    return EXIT_INPUT;
  }
  pp_replay_log log;
  pp_declog_error err;
  int rc = pp_replay_log_parse(&log, text, len, &err);
  free(text);
  if (rc) {
    fprintf(stderr, "pp-replay: %s:%ld: %s%s%s\n", log_path, err.line, err.field,
            err.field[0] ? ": " : "", err.message);
    return EXIT_INPUT;
  }
  if (log.n == 0) {
    fprintf(stderr, "pp-replay: %s: no tick records\n", log_path);
    pp_replay_log_dispose(&log);
    return EXIT_INPUT;
  }
  int exit_code;
  if (want_explain) {
    exit_code = explain(log_path, &log);
#ifdef PP_REPLAY_HAVE_SIM
  } else if (want_sim) {
    exit_code = simulate(log_path, &log, policy_path ? &given : NULL, policy_path, &sim_opt);
#endif
  } else if (want_cf ||
             (policy_path && !want_verify && pp_policy_hash(&given) != log.recs[0].policy_hash)) {
    if (!want_cf)
      printf("# %s hashes to %016" PRIx64 ", the log's policy is %016" PRIx64
             ": counterfactual (pass --verify to insist on verifying)\n",
             policy_path, pp_policy_hash(&given), log.recs[0].policy_hash);
    exit_code = counterfactual(log_path, &log, &given, policy_path);
  } else {
    exit_code = verify(log_path, &log, policy_path ? &given : NULL, policy_path);
  }
  pp_replay_log_dispose(&log);
  return exit_code;
}
