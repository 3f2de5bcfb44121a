/* Fuzz target for pp-replay's whole-log reader (replay/replay.h).
 *
 * Input: a whole decision log (JSONL text, any bytes), as pp-replay reads a file; the logs of
 * replay/tests/logs/ are seeds. Properties:
 *  1. pp_replay_log_parse never crashes; a failure returns PP_CTL_EPARSE with a message, a
 *     field and a line number within the input's lines, and leaves the log empty.
 *  2. On success every record's line number is increasing and within the input, and so is
 *     every header's.
 *  3. Every record goes through what `pp-replay` and `pp-replay --explain` do with it: the
 *     policy lookup, pp_replay_check_record (pp_decide on the logged state and observation),
 *     the explain line (NUL-terminated, within its buffer) and a counterfactual step under the
 *     defaults, without a crash or a UBSan report.
 * A violated property aborts, so libFuzzer and the replay driver report it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay/replay.h"

#include "fuzz/check.h"

static long count_lines(const uint8_t *data, size_t size) {
  long n = 1;
  for (size_t i = 0; i < size; i++)
    if (data[i] == '\n') n++;
  return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  pp_replay_log log;
  pp_declog_error err;
  memset(&err, 0, sizeof err);
  long lines = count_lines(data, size);
  int rc = pp_replay_log_parse(&log, (const char *)data, size, &err);
  if (rc != 0) {
    CHECK(rc == PP_CTL_EPARSE || rc == PP_CTL_EINVAL);
    if (rc == PP_CTL_EPARSE) {
      CHECK(memchr(err.message, '\0', sizeof err.message) != NULL && err.message[0]);
      CHECK(memchr(err.field, '\0', sizeof err.field) != NULL);
      CHECK(err.line >= 1 && err.line <= lines);
    }
    CHECK(log.n == 0 && log.n_headers == 0);
    pp_replay_log_dispose(&log);
    return 0;
  }
  for (size_t i = 0; i < log.n; i++) {
    CHECK(log.rec_lines[i] >= 1 && log.rec_lines[i] <= lines);
    if (i) CHECK(log.rec_lines[i] > log.rec_lines[i - 1]);
  }
  for (size_t i = 0; i < log.n_headers; i++)
    CHECK(log.header_lines[i] >= 1 && log.header_lines[i] <= lines);
  pp_policy defaults;
  pp_policy_defaults(&defaults);
  pp_ctl_state cf_state;
  if (log.n) cf_state = log.recs[0].state_before;
  for (size_t i = 0; i < log.n && i < 4096; i++) {
    const pp_declog_record *r = &log.recs[i];
    pp_policy p;
    if (pp_replay_policy_for(&log, r->policy_hash, NULL, &p) != PP_REPLAY_POLICY_NONE) {
      pp_decision replayed;
      pp_replay_diff diff;
      memset(&diff, 0, sizeof diff);
      if (pp_replay_check_record(&p, r, &replayed, &diff)) {
        CHECK(memchr(diff.field, '\0', sizeof diff.field) != NULL && diff.field[0]);
        CHECK(memchr(diff.logged, '\0', sizeof diff.logged) != NULL);
        CHECK(memchr(diff.replayed, '\0', sizeof diff.replayed) != NULL);
      }
    }
    char line[512];
    memset(line, 'x', sizeof line);
    size_t n = pp_replay_explain_line(r, line, sizeof line);
    CHECK(n < sizeof line && line[n] == '\0');
    pp_decision d = pp_replay_counterfactual_step(&defaults, &cf_state, r);
    CHECK(memchr(d.reason, '\0', sizeof d.reason) != NULL);
  }
  pp_replay_log_dispose(&log);
  return 0;
}
