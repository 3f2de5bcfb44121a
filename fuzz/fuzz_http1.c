/* Fuzz target for the HTTP/1.1 request parser (server/proto/http1.h) and the Rack env builder.
 *
 * Input: byte 0 chooses the limits and the chunking, the rest is what a client sends on one
 * connection (any number of pipelined requests).
 *   bit 7 of byte 0: 1 = small limits (512-byte head, 128-byte URI, 8 headers, 256-byte
 *                    body) so 413/414/431 are cheap to reach; 0 = the server's defaults;
 *   bits 0-6:        the largest chunk of the pseudo-random split (1 + value), also its seed.
 * The stream is parsed three ways, as the server's read loop does it (execute, resume after
 * each completed message, keep unparsed bytes): all at once, byte by byte (inputs up to 2 KiB)
 * and in pseudo-random chunks. Properties:
 *  1. The three parses report the same transcript: every request's method, version, URL,
 *     headers, Rack env, keep-alive, body bytes, and whether the stream ends in a refusal
 *     (the refusal's status may differ: see parse()).
 *  2. consumed never exceeds what was given; NEED_MORE consumes everything; an error is
 *     sticky; a refusal has a status in 400..599 and a reason; the parser always progresses.
 *  3. The Rack env of every request is a well-formed pair list: it goes into a REQUEST frame
 *     that pp_wire_decode accepts with the same pair count.
 * Each window handed to the parser is an exact-size heap copy, so ASan sees over-reads. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/proto/http1.h"
#include "server/proto/wire.h"

#include "fuzz/check.h"

typedef struct owner {
  pp_buf log;  /* the transcript of this parse */
  pp_buf body; /* the current request's body so far */
  pp_buf env;
  uint64_t request_id;
  int status;         /* after a refusal */
  const char *reason; /* after a refusal */
} owner;

static void log_bytes(owner *o, const void *p, size_t n) {
  pp_buf_append_u32(&o->log, (uint32_t)n);
  pp_buf_append(&o->log, p, n);
}

static void log_u64(owner *o, uint64_t v) {
  pp_buf_append(&o->log, &v, sizeof v);
}

/* Property 3: the env is a valid pair list for a REQUEST frame. */
static void check_env(pp_h1 *h, owner *o) {
  o->env.len = 0;
  pp_h1_conninfo ci = {"127.0.0.1",
                       "localhost",
                       "9292",
                       (o->request_id & 1) ? "https" : "http",
                       (int)(o->request_id % 3),
                       NULL,
                       NULL,
                       NULL,
                       0};
  uint32_t pairs = pp_h1_build_env(h, &ci, o->request_id, &o->env);
  CHECK(pairs >= 9);
  pp_wire_frame f;
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_REQUEST;
  f.request_id = o->request_id;
  f.pairs.data = o->env.data;
  f.pairs.len = o->env.len;
  f.pairs.count = pairs;
  ssize_t size = pp_wire_encoded_size(&f);
  if (size < 0) { /* only an env over the 4 MiB frame limit may fail */
    CHECK(size == PP_WIRE_ETOO_LARGE);
    return;
  }
  uint8_t *frame = malloc((size_t)size);
  CHECK(frame != NULL);
  CHECK(pp_wire_encode(&f, frame, (size_t)size) == size);
  pp_wire_decoder d;
  pp_wire_decoder_init(&d);
  pp_wire_frame g;
  CHECK(pp_wire_decode(&d, frame, (size_t)size, &g, NULL) == size);
  CHECK(g.pairs.count == pairs && g.pairs.len == o->env.len);
  pp_wire_pairs_iter it;
  pp_wire_pairs_iter_init(&it, &g.pairs);
  const uint8_t *k, *v;
  uint32_t kl, vl, seen = 0;
  while (pp_wire_pairs_next(&it, &k, &kl, &v, &vl))
    seen++;
  CHECK(seen == pairs);
  free(frame);
  log_bytes(o, o->env.data, o->env.len);
}

static int on_headers(pp_h1 *h) {
  owner *o = h->data;
  o->request_id++;
  o->body.len = 0;
  pp_buf_append(&o->log, "H", 1);
  pp_buf_append(&o->log, &h->method, 1);
  pp_buf_append(&o->log, &h->http_major, 1);
  pp_buf_append(&o->log, &h->http_minor, 1);
  log_bytes(o, h->raw.data ? h->raw.data + h->url.off : (const uint8_t *)"", h->url.len);
  log_u64(o, h->header_count);
  for (uint32_t i = 0; i < h->header_count; i++) {
    CHECK((uint64_t)h->name[i].off + h->name[i].len <= h->raw.len);
    CHECK((uint64_t)h->value[i].off + h->value[i].len <= h->raw.len);
    log_bytes(o, h->raw.data + h->name[i].off, h->name[i].len);
    log_bytes(o, h->raw.data + h->value[i].off, h->value[i].len);
  }
  log_u64(o, (uint64_t)h->keep_alive << 3 | (uint64_t)h->chunked << 2 |
                 (uint64_t)h->expect_continue << 1 | (uint64_t)h->has_content_length);
  log_u64(o, h->content_length);
  size_t n = 0;
  const uint8_t *host = pp_h1_header(h, "host", &n);
  CHECK((host != NULL) == (h->host_index >= 0));
  if (h->http_minor >= 1) CHECK(host != NULL);
  check_env(h, o);
  return 0;
}

static int on_body(pp_h1 *h, const uint8_t *data, size_t len) {
  owner *o = h->data;
  CHECK(len > 0);
  pp_buf_append(&o->body, data, len);
  CHECK(o->body.len == h->body_received);
  CHECK(h->body_received <= h->limits->max_body_bytes);
  if (h->has_content_length) CHECK(h->body_received <= h->content_length);
  return 0;
}

static int on_complete(pp_h1 *h) {
  owner *o = h->data;
  if (h->has_content_length) CHECK(o->body.len == h->content_length);
  pp_buf_append(&o->log, "C", 1);
  log_bytes(o, o->body.data, o->body.len);
  o->body.len = 0;
  return 0;
}

static const pp_h1_callbacks callbacks = {on_headers, on_body, on_complete};

static uint32_t next_rand(uint32_t *s) {
  uint32_t x = *s;
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  return *s = x;
}

/* One parse of data[0..size). chunk 0 = pseudo-random sizes 1..max_chunk. */
static void parse(const uint8_t *data, size_t size, const pp_h1_limits *lim, size_t chunk,
                  size_t max_chunk, uint32_t seed, owner *o) {
  pp_buf_init(&o->log);
  pp_buf_init(&o->body);
  pp_buf_init(&o->env);
  o->request_id = 0;
  o->status = 0;
  o->reason = NULL;
  pp_h1 h;
  pp_h1_init(&h, &callbacks, lim, o);
  size_t fed = 0, pos = 0;
  uint32_t state = seed | 1u;
  int failed = 0, stalls = 0;
  while (fed < size && !failed) {
    size_t step = chunk ? chunk : 1 + next_rand(&state) % max_chunk;
    fed = fed + step < size ? fed + step : size;
    while (pos < fed) {
      size_t have = fed - pos, used = 12345;
      uint8_t *copy = malloc(have);
      CHECK(copy != NULL);
      memcpy(copy, data + pos, have);
      uint64_t before = h.messages;
      pp_h1_result r = pp_h1_execute(&h, copy, have, &used);
      free(copy);
      CHECK(used <= have);
      pos += used;
      if (r == PP_H1_ERROR) {
        CHECK(h.status >= 400 && h.status <= 599);
        CHECK(h.reason != NULL && h.reason[0] != '\0');
        CHECK(strcmp(pp_http_reason_phrase(h.status), "Unknown") != 0);
        size_t again = 1;
        CHECK(pp_h1_execute(&h, (const uint8_t *)"x", 1, &again) == PP_H1_ERROR && again == 0);
        /* The status is not part of the transcript: which limit or rule a bad request
         * trips first may depend on where llhttp's span callbacks fall (a long URL with a bad
         * byte is 414 when split before the byte, 400 when whole). Both are refusals. */
        pp_buf_append(&o->log, "E", 1);
        o->status = h.status;
        o->reason = h.reason;
        failed = 1;
        break;
      }
      if (r == PP_H1_PAUSED) {
        CHECK(h.messages == before + 1);
        /* A completed message must consume bytes, or the server's read loop spins. */
        stalls = used == 0 ? stalls + 1 : 0;
        CHECK(stalls < 4);
        pp_h1_resume(&h);
        continue;
      }
      CHECK(r == PP_H1_NEED_MORE);
      CHECK(used == have);
      break;
    }
  }
  if (!failed) pp_buf_append(&o->log, "N", 1);
  pp_h1_dispose(&h);
  pp_buf_dispose(&o->body);
  pp_buf_dispose(&o->env);
}

/* The end of a transcript, for the report when two parses disagree. */
static void describe(const char *label, const owner *o) {
  fprintf(stderr, "fuzz_http1: %s parse: %llu requests, %s %d (%s)\n", label,
          (unsigned long long)o->request_id, o->status ? "refused with" : "no refusal", o->status,
          o->status ? o->reason : "");
}

static void same_transcript(const owner *a, const owner *b, const char *label) {
  if (a->log.len == b->log.len &&
      (a->log.len == 0 || memcmp(a->log.data, b->log.data, a->log.len) == 0))
    return;
  describe("whole", a);
  describe(label, b);
  CHECK(!"the same bytes split differently give a different transcript");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  uint8_t mode = data[0];
  data++, size--;
  pp_h1_limits lim;
  pp_h1_limits_default(&lim);
  if (mode & 0x80) {
    lim.max_header_bytes = 512;
    lim.max_uri_bytes = 128;
    lim.max_headers = 8;
    lim.max_body_bytes = 256;
  }
  size_t max_chunk = 1 + (mode & 0x7f);
  owner whole, bytewise, chunked;
  parse(data, size, &lim, size ? size : 1, 0, 0, &whole);
  parse(data, size, &lim, 0, max_chunk, mode * 2654435761u, &chunked);
  same_transcript(&whole, &chunked, "chunked");
  if (size <= 2048) {
    parse(data, size, &lim, 1, 0, 0, &bytewise);
    same_transcript(&whole, &bytewise, "byte-by-byte");
    pp_buf_dispose(&bytewise.log);
  }
  pp_buf_dispose(&whole.log);
  pp_buf_dispose(&chunked.log);
  return 0;
}
