/* Fuzz target for the decision-log codec (control/declog.h).
 *
 * Input: one line of a decision log (tick record or header), as pp-replay reads it; lines of
 * the logs of replay/tests/logs/ are seeds. Properties:
 *  1. pp_declog_line_kind, pp_declog_decode and pp_declog_decode_header never crash; a failed
 *     decode fills a message.
 *  2. A decoded tick record encodes, and encode -> decode -> encode gives the same bytes.
 *  3. A decoded header encodes, and encode -> decode -> encode gives the same bytes; the policy
 *     it returns hashes to the header's policy_hash.
 *  4. pp_decide (which pp-replay runs on every decoded record) never crashes or trips UBSan on
 *     the decoded observation and state, under the default policy and under the header's.
 *  5. The input taken as policy text: if it parses, a header carrying it verbatim encodes and
 *     decodes back to the same text and hash.
 * A violated property aborts, so libFuzzer and the replay driver report it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/control.h"

#include "fuzz/check.h"

static void check_error(const pp_declog_error *err) {
  CHECK(memchr(err->message, '\0', sizeof err->message) != NULL);
  CHECK(memchr(err->field, '\0', sizeof err->field) != NULL);
  CHECK(err->message[0] != '\0');
  CHECK(err->line == 7);
}

static void run_decide(const pp_policy *p, const pp_declog_record *r) {
  pp_ctl_state state = r->state_before;
  pp_decision d = pp_decide(p, &state, &r->obs);
  CHECK(memchr(d.reason, '\0', sizeof d.reason) != NULL);
  CHECK(pp_action_name(d.action) != NULL);
}

static void fuzz_tick(const uint8_t *data, size_t size) {
  static pp_declog_record r, r2; /* large: keep them off the stack */
  static char line1[PP_DECLOG_LINE_MAX], line2[PP_DECLOG_LINE_MAX];
  pp_declog_error err;
  int rc = pp_declog_decode(&r, (const char *)data, size, 7, &err);
  if (rc != 0) {
    CHECK(rc == PP_CTL_EPARSE);
    check_error(&err);
    return;
  }
  int n1 = pp_declog_encode(&r, line1, sizeof line1);
  CHECK(n1 > 0 && line1[n1 - 1] == '\n' && line1[n1] == '\0');
  rc = pp_declog_decode(&r2, line1, (size_t)n1, 8, &err);
  if (rc != 0) fprintf(stderr, "fuzz_declog: re-decode failed: %s: %s\n", err.field, err.message);
  CHECK(rc == 0);
  int n2 = pp_declog_encode(&r2, line2, sizeof line2);
  CHECK(n2 == n1 && memcmp(line1, line2, (size_t)n1) == 0);
  CHECK(r2.tick == r.tick && r2.time_ns == r.time_ns && r2.policy_hash == r.policy_hash);
  pp_policy p;
  pp_policy_defaults(&p);
  run_decide(&p, &r);
}

static void fuzz_header(const uint8_t *data, size_t size) {
  static pp_declog_header h, h2;
  static char line1[PP_DECLOG_LINE_MAX], line2[PP_DECLOG_LINE_MAX]; /* "always enough" */
  pp_policy p;
  pp_declog_error err;
  int rc = pp_declog_decode_header(&h, &p, (const char *)data, size, 7, &err);
  if (rc != 0) {
    CHECK(rc == PP_CTL_EPARSE);
    check_error(&err);
    return;
  }
  CHECK(pp_policy_hash(&p) == h.policy_hash);
  int n1 = pp_declog_encode_header(&h, line1, sizeof line1);
  CHECK(n1 > 0 && line1[n1 - 1] == '\n' && line1[n1] == '\0');
  pp_policy p2;
  rc = pp_declog_decode_header(&h2, &p2, line1, (size_t)n1, 8, &err);
  if (rc != 0) fprintf(stderr, "fuzz_declog: re-decode failed: %s: %s\n", err.field, err.message);
  CHECK(rc == 0);
  int n2 = pp_declog_encode_header(&h2, line2, sizeof line2);
  CHECK(n2 == n1 && memcmp(line1, line2, (size_t)n1) == 0);
  CHECK(h2.policy_hash == h.policy_hash && pp_policy_hash(&p2) == h.policy_hash);
}

/* Property 5: a header carrying any policy text that parses (not only canonical text) survives
 * encode -> decode (JSON escaping of every byte the YAML allows), with the same hash. Random
 * bytes rarely carry a matching policy_hash, so this builds the header line itself. */
static void fuzz_header_text(const uint8_t *data, size_t size) {
  static pp_declog_header h, h2;
  static char line[PP_DECLOG_LINE_MAX * 8];
  if (size >= sizeof h.policy || memchr(data, '\0', size)) return;
  pp_policy p, p2;
  pp_policy_error perr;
  if (pp_policy_parse(&p, (const char *)data, size, &perr) != 0) return;
  memset(&h, 0, sizeof h);
  memcpy(h.policy, data, size);
  h.policy_hash = pp_policy_hash(&p);
  snprintf(h.source, sizeof h.source, "fuzz");
  int n = pp_declog_encode_header(&h, line, sizeof line);
  if (n == PP_CTL_EINVAL) return; /* text that is not UTF-8: jansson refuses it, as it should */
  CHECK(n > 0);
  pp_declog_error err;
  int rc = pp_declog_decode_header(&h2, &p2, line, (size_t)n, 1, &err);
  if (rc != 0) fprintf(stderr, "fuzz_declog: header text: %s: %s\n", err.field, err.message);
  CHECK(rc == 0);
  CHECK(strcmp(h2.policy, h.policy) == 0 && h2.policy_hash == h.policy_hash);
  CHECK(pp_policy_hash(&p2) == h.policy_hash);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  int kind = pp_declog_line_kind((const char *)data, size);
  CHECK(kind == PP_DECLOG_KIND_TICK || kind == PP_DECLOG_KIND_HEADER || kind == PP_CTL_EPARSE);
  fuzz_tick(data, size);
  fuzz_header(data, size);
  fuzz_header_text(data, size);
  /* A header's policy decides the ticks after it: run decide under a fuzzed policy too, with
   * the observation and state of a tick record that follows on the next line (if any). */
  const uint8_t *nl = memchr(data, '\n', size);
  if (nl && (size_t)(nl - data) + 1 < size) {
    static pp_declog_header h;
    static pp_declog_record r;
    pp_policy p;
    pp_declog_error err;
    size_t first = (size_t)(nl - data) + 1;
    if (pp_declog_decode_header(&h, &p, (const char *)data, first, 1, &err) == 0 &&
        pp_declog_decode(&r, (const char *)data + first, size - first, 2, &err) == 0)
      run_decide(&p, &r);
  }
  return 0;
}
