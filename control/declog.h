/* The decision log: one JSON line per controller tick (JSONL), encoded and decoded here.
 *
 * A line holds the tick, the time, the policy hash, the full observation, the state before
 * and after, and the decision with its reason: enough to re-run pp_decide() and compare, and
 * to rebuild the workload of the interval (arrival rate, service time, CPU share) for
 * re-simulation. Integers are written as integers (ns), doubles with %.17g, so decoding
 * gives the same bits and re-encoding gives the same bytes. Field table: docs/CONTROL.md.
 * Works on memory only (jansson); writing and reading files is the caller's job. */
#ifndef PP_DECLOG_H
#define PP_DECLOG_H

#include <stddef.h>
#include <stdint.h>
#include "control/decide.h"
#include "control/observation.h"

#define PP_DECLOG_VERSION 1

typedef struct pp_declog_record {
  uint64_t tick;
  int64_t time_ns;
  uint64_t policy_hash; /* pp_policy_hash() of the policy that decided */
  char source[16];      /* "server" or "sim" (NUL-terminated) */
  pp_observation obs;
  pp_ctl_state state_before;
  pp_decision decision;
  pp_ctl_state state_after;
} pp_declog_record;

/* Where a decode failed: the caller's line number, the JSON field (dotted path, e.g.
 * "obs.queue_p95_ns"; "" for a syntax error) and a full sentence. */
typedef struct pp_declog_error {
  long line;
  char field[64];
  char message[192];
} pp_declog_error;

/* Encodes one record as a single line of JSON followed by '\n' and a NUL. Returns the length
 * (excluding the NUL) or PP_CTL_ENOSPC. 4096 bytes are always enough. */
#define PP_DECLOG_LINE_MAX 4096
int pp_declog_encode(const pp_declog_record *r, char *buf, size_t cap);

/* Decodes one line (with or without its trailing '\n'). `line` is the caller's line number,
 * copied into *err. Every field is required and type-checked. Returns 0, or PP_CTL_EPARSE
 * with *err filled (never crashes on any input, including truncated lines). */
int pp_declog_decode(pp_declog_record *out, const char *text, size_t len, long line,
                     pp_declog_error *err);

#endif
