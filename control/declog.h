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
#include "control/policy.h"

/* Tick lines are written as the lowest version that holds every field not at its default
 * (docs/CONTROL.md §5): version 5 for a cut of configured slots (state.slots_cut_from,
 * state.slots_floor), version 4 for Ractor slots (obs.ractor_cores), version 3 for the
 * concurrency signal and the slot state (and any set_slots), version 2 for standby, else
 * version 1, byte for byte what earlier releases wrote; all five are read. Header lines are
 * always version 1. */
#define PP_DECLOG_VERSION     5
#define PP_DECLOG_VERSION_MIN 1

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

/* ---- Header lines (an addition to the version-1 format) ----
 *
 * A log may start with a header line that carries the canonical text of the policy that
 * decided the tick lines after it, so pp-replay can verify a log without its policy file:
 *   {"v":1,"type":"header","source":"server","policy_hash":"<16 hex>","policy":"<canonical>"}
 * Writers emit one at the start of a log (and again after reopening it, e.g. on SIGHUP) and
 * a new one whenever the policy changes. Readers that do not know headers can skip any line
 * whose kind is PP_DECLOG_KIND_HEADER. Tick lines are unchanged. An optional last field
 * "slots":"fiber"|"ractor" names the slot kind of the ticks that follow (absent: threads). */
#define PP_DECLOG_POLICY_MAX 2048

typedef struct pp_declog_header {
  uint64_t policy_hash;              /* pp_policy_hash() of the policy below */
  char source[16];                   /* "server" or "sim" (NUL-terminated) */
  char policy[PP_DECLOG_POLICY_MAX]; /* pp_policy_canonical() text, NUL-terminated */
  char slots[8]; /* the slot kind, "fiber" or "ractor"; "" (not written) for thread slots and
                    for logs from before the field */
} pp_declog_header;

/* Fills *h from a policy (canonical text and hash) and a source name (truncated to 15
 * bytes). Returns 0, or PP_CTL_ENOSPC if the canonical text does not fit. */
int pp_declog_header_init(pp_declog_header *h, const pp_policy *p, const char *source);

/* Encodes a header as one line plus '\n' and a NUL. Returns the length or PP_CTL_ENOSPC /
 * PP_CTL_EINVAL. PP_DECLOG_LINE_MAX is always enough. */
int pp_declog_encode_header(const pp_declog_header *h, char *buf, size_t cap);

/* Decodes a header line; checks the policy text parses and hashes to policy_hash. Returns
 * 0 or PP_CTL_EPARSE with *err filled. If policy_out is not NULL it receives the policy. */
int pp_declog_decode_header(pp_declog_header *out, pp_policy *policy_out, const char *text,
                            size_t len, long line, pp_declog_error *err);

enum { PP_DECLOG_KIND_TICK = 0, PP_DECLOG_KIND_HEADER = 1 };

/* The kind of a line: PP_DECLOG_KIND_HEADER when it is a JSON object whose "type" is
 * "header", PP_DECLOG_KIND_TICK for any other object (which pp_declog_decode then checks
 * fully), PP_CTL_EPARSE when it is not a JSON object at all. */
int pp_declog_line_kind(const char *text, size_t len);

#endif
