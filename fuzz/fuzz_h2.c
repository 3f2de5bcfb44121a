/* Fuzz target for the HTTP/2 session (server/proto/h2.h).
 *
 * Input: bytes 0-1 (big-endian) choose a split point, the rest is what a client sends after
 * the 24-byte preface (the target puts the preface in front, so a seed is a plain frame
 * stream). Inputs are cut at MAX_INPUT bytes: fewer than 1000 RST_STREAM frames fit, so
 * nghttp2's rapid-reset token bucket (its own clock, 33 tokens/s) cannot empty in one run and
 * make two runs of the same bytes differ by timing.
 *
 * The owner answers every request it is given: 200 with a 3-byte body, at once in on_request
 * when the request has no body or its stream id is 1 mod 4 (a response before the request
 * body is complete), otherwise in on_body_end. It consumes every body byte in on_body.
 *
 * Each input runs twice: the whole stream in one pp_h2_feed, and in two pp_h2_feed calls cut
 * at the chosen point; pp_h2_output is drained only after the last feed (at most OUT_STEP
 * bytes per call), so both runs see the same sequence of session events. Properties:
 *  1. No crash, no leak, no UBSan report (ASan/UBSan builds, libFuzzer's leak check).
 *  2. pp_h2_feed returns len or a pp_h2_err; after a failure it returns PP_H2_EFINISHED.
 *     The first result is the same however the bytes are split (h2.h: "The result does not
 *     depend on how the bytes are split"), and so are finished(), the stats, the sequence of
 *     owner callbacks (bodies compared as whole per-stream bytes, since DATA frames cut by the
 *     split arrive in two pieces; not for a stream that was reset, see on_close) and the
 *     bytes out.
 *  3. Bounded output: every pp_h2_output call appends at most up to its bound, the drain ends
 *     within MAX_OUTPUT_CALLS calls, and the bytes out stay under 4 KiB + 16 x the input (the
 *     largest legitimate answer per input byte is an ack or a short response).
 *  4. The callback contract: on_request gets :method, :scheme and :path and lowercase field
 *     names, never twice for a stream; on_body / on_body_end only for an accepted stream still
 *     open, never after on_body_end or on_close, no body beyond max_body_bytes (but for an
 *     extended CONNECT's tunnel, whose :protocol only comes with CONNECT), no on_body_end
 *     when the request had no body; on_close exactly once for every accepted stream (the
 *     remaining ones in pp_h2_dispose, with CANCEL). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/proto/h2.h"

#include "fuzz/check.h"

#define MAX_INPUT        12000
#define OUT_STEP         4096
#define MAX_OUTPUT_CALLS 20000
#define MAX_STREAMS      4096

typedef struct stream_rec {
  int32_t id;
  unsigned accepted : 1, no_body : 1, body_ended : 1, closed : 1, answered : 1, tunnel : 1;
  uint64_t body_len, body_hash;
} stream_rec;

typedef struct owner {
  stream_rec streams[MAX_STREAMS];
  size_t nstreams;
  uint64_t events; /* FNV-1a over the callback sequence (not body chunk boundaries) */
  uint64_t accepted, closed;
} owner;

static owner runs[2];

static void mix(uint64_t *h, const void *p, size_t n) {
  const uint8_t *b = p;
  for (size_t i = 0; i < n; i++) {
    *h ^= b[i];
    *h *= 1099511628211ull;
  }
}

static void event(owner *o, char kind, int32_t id, uint64_t extra) {
  mix(&o->events, &kind, 1);
  mix(&o->events, &id, sizeof id);
  mix(&o->events, &extra, sizeof extra);
}

static stream_rec *find(owner *o, int32_t id) {
  for (size_t i = o->nstreams; i-- > 0;)
    if (o->streams[i].id == id) return &o->streams[i];
  return NULL;
}

static void answer(pp_h2 *h, stream_rec *s) {
  static const pp_h2_header ctype = {(const uint8_t *)"content-type", 12,
                                     (const uint8_t *)"text/plain", 10};
  CHECK(!s->answered);
  s->answered = 1;
  CHECK(pp_h2_respond(h, s->id, 200, &ctype, 1, 0) == 0);
  CHECK(pp_h2_send_data(h, s->id, (const uint8_t *)"ok\n", 3) == 0);
  CHECK(pp_h2_send_end(h, s->id) == 0);
}

static int on_request(pp_h2 *h, const pp_h2_request *rq, void **stream_data) {
  owner *o = h->data;
  CHECK(rq->stream_id > 0 && (rq->stream_id & 1));
  CHECK(find(o, rq->stream_id) == NULL);
  CHECK(o->nstreams < MAX_STREAMS);
  CHECK(rq->method && rq->method_len > 0);
  CHECK(rq->scheme && rq->scheme_len > 0);
  CHECK(rq->path && rq->path_len > 0);
  for (size_t i = 0; i < rq->header_count; i++) {
    const pp_h2_header *f = &rq->headers[i];
    CHECK(f->name_len > 0 && f->name[0] != ':');
    for (size_t k = 0; k < f->name_len; k++)
      CHECK(!(f->name[k] >= 'A' && f->name[k] <= 'Z'));
  }
  stream_rec *s = &o->streams[o->nstreams++];
  memset(s, 0, sizeof *s);
  s->id = rq->stream_id;
  s->accepted = 1;
  s->no_body = rq->end_stream != 0;
  s->tunnel = rq->protocol != NULL; /* extended CONNECT (RFC 8441): a tunnel */
  if (rq->protocol) CHECK(rq->method_len == 7 && !memcmp(rq->method, "CONNECT", 7));
  s->body_hash = 14695981039346656037ull;
  o->accepted++;
  uint64_t shape =
      rq->header_count << 8 | (uint64_t)rq->end_stream << 1 | (uint64_t)rq->has_content_length;
  event(o, 'R', rq->stream_id, shape);
  mix(&o->events, rq->method, rq->method_len);
  mix(&o->events, rq->path, rq->path_len);
  *stream_data = s;
  if (rq->end_stream || (rq->stream_id & 3) == 1) answer(h, s);
  return 0;
}

static int on_body(pp_h2 *h, int32_t id, void *stream_data, const uint8_t *data, size_t len) {
  owner *o = h->data;
  stream_rec *s = stream_data;
  CHECK(s && s == find(o, id));
  CHECK(s->accepted && !s->closed && !s->body_ended && !s->no_body);
  s->body_len += len;
  CHECK(s->tunnel || s->body_len <= h->limits.max_body_bytes);
  mix(&s->body_hash, data, len);
  pp_h2_consume(h, id, len);
  return 0;
}

static int on_body_end(pp_h2 *h, int32_t id, void *stream_data) {
  owner *o = h->data;
  stream_rec *s = stream_data;
  CHECK(s && s == find(o, id));
  CHECK(s->accepted && !s->closed && !s->body_ended && !s->no_body);
  s->body_ended = 1;
  event(o, 'E', id, s->body_len);
  mix(&o->events, &s->body_hash, sizeof s->body_hash);
  if (!s->answered) answer(h, s);
  return 0;
}

static void on_close(pp_h2 *h, int32_t id, void *stream_data, uint32_t error_code) {
  owner *o = h->data;
  stream_rec *s = stream_data;
  CHECK(s && s == find(o, id));
  CHECK(s->accepted && !s->closed);
  s->closed = 1;
  o->closed++;
  event(o, 'C', id, error_code);
  /* The body of a stream that ended normally is compared whole. That of a reset stream is not:
   * nghttp2 checks content-length per DATA chunk, so of a DATA frame that overruns it, the
   * part that arrived in an earlier feed was delivered (on_body) before the reset, while the
   * same frame read in one piece is refused before any of it is (first found by this target).
   * The reset itself, its code and the order of events are still compared. */
  if (error_code == 0) {
    mix(&o->events, &s->body_len, sizeof s->body_len);
    mix(&o->events, &s->body_hash, sizeof s->body_hash);
  }
}

static const pp_h2_callbacks callbacks = {on_request, on_body, on_body_end, on_close, NULL};

typedef struct outcome {
  ssize_t first_error; /* the first negative feed result, or 0 */
  int finished;
  pp_h2_stats stats;
  pp_buf out;
} outcome;

static int is_h2_err(ssize_t rc) {
  return rc == PP_H2_EPROTO || rc == PP_H2_EFLOOD || rc == PP_H2_ELIBRARY || rc == PP_H2_EFINISHED;
}

static void run(owner *o, const uint8_t *data, size_t size, size_t split, outcome *res) {
  memset(o, 0, sizeof *o);
  o->events = 14695981039346656037ull;
  pp_h2 h;
  CHECK(pp_h2_init(&h, &callbacks, NULL, o) == 0);
  res->first_error = 0;
  pp_buf_init(&res->out);
  size_t pieces[2] = {split, size - split};
  size_t off = 0;
  for (int i = 0; i < 2; i++) {
    if (pieces[i] == 0 && i == 1) break;
    ssize_t rc = pp_h2_feed(&h, data + off, pieces[i]);
    if (res->first_error) {
      CHECK(rc == PP_H2_EFINISHED);
    } else if (rc < 0) {
      CHECK(is_h2_err(rc) && rc != PP_H2_EFINISHED);
      res->first_error = rc;
    } else {
      CHECK((size_t)rc == pieces[i]);
    }
    off += pieces[i];
  }
  pp_buf chunk;
  pp_buf_init(&chunk);
  int calls = 0;
  for (;;) {
    chunk.len = 0;
    ssize_t n = pp_h2_output(&h, &chunk, OUT_STEP);
    CHECK(n >= 0);
    CHECK((size_t)n == chunk.len && chunk.len <= OUT_STEP);
    if (n == 0) break;
    pp_buf_append(&res->out, chunk.data, chunk.len);
    CHECK(++calls < MAX_OUTPUT_CALLS);
  }
  CHECK(res->out.len <= 4096 + 16 * size);
  CHECK(!pp_h2_want_write(&h));
  res->finished = pp_h2_finished(&h) != 0;
  if (res->first_error) CHECK(res->finished);
  res->stats = h.stats;
  CHECK(res->stats.bytes_out == res->out.len);
  pp_buf_dispose(&chunk);
  pp_h2_dispose(&h);
  /* 4: on_close exactly once for every accepted stream */
  CHECK(o->accepted == o->closed);
  for (size_t i = 0; i < o->nstreams; i++)
    CHECK(o->streams[i].closed);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  size_t split_seed = (size_t)data[0] << 8 | data[1];
  data += 2;
  size -= 2;
  if (size > MAX_INPUT) size = MAX_INPUT;
  size_t total = 24 + size;
  uint8_t *stream = malloc(total);
  CHECK(stream != NULL);
  memcpy(stream, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24);
  if (size) memcpy(stream + 24, data, size);
  size_t split = split_seed % (total + 1);

  outcome whole, cut;
  run(&runs[0], stream, total, total, &whole);
  run(&runs[1], stream, total, split, &cut);

  /* 2: split independence */
  CHECK(whole.first_error == cut.first_error);
  CHECK(whole.finished == cut.finished);
  /* bytes fed after the session failed are refused (PP_H2_EFINISHED), not counted in */
  if (whole.first_error) whole.stats.bytes_in = cut.stats.bytes_in = 0;
  CHECK(memcmp(&whole.stats, &cut.stats, sizeof whole.stats) == 0);
  CHECK(runs[0].events == runs[1].events);
  CHECK(runs[0].accepted == runs[1].accepted);
  CHECK(whole.out.len == cut.out.len);
  CHECK(whole.out.len == 0 || memcmp(whole.out.data, cut.out.data, whole.out.len) == 0);

  pp_buf_dispose(&whole.out);
  pp_buf_dispose(&cut.out);
  free(stream);
  return 0;
}
