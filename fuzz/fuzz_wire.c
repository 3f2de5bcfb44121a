/* Fuzz target for the wire-frame decoder (server/proto/wire.h).
 *
 * The input is a byte stream of frames as a worker would send it (the golden corpus
 * the .bin files of docs/protocol-corpus/ is a valid seed as is: there is no prefix byte).
 * Properties:
 *  1. Decoding the whole stream at once: every decoded frame re-encodes to exactly the bytes
 *     it was decoded from, pp_wire_encoded_size agrees, and decoding the re-encoded bytes gives
 *     an equal frame. Pairs iterate exactly `count` times and cover exactly `len` bytes.
 *  2. Incremental decoding (byte by byte for small inputs, and in pseudo-random chunks whose
 *     sizes depend on the input) sees the same frames at the same offsets and ends in the same
 *     state (same sticky error, or the same unconsumed tail); "need more" always asks for more
 *     than it has, and never for more than a header plus 4 MiB.
 *  3. Errors are sticky: after a negative return the decoder returns it again.
 * A violated property aborts, so libFuzzer and the replay driver report it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/proto/wire.h"

#include "fuzz/check.h"

#define MAX_FRAMES 4096

typedef struct outcome {
  size_t offsets[MAX_FRAMES]; /* where each frame started */
  size_t lengths[MAX_FRAMES];
  size_t frames;
  ssize_t end_rc; /* final return: a negative error, or 0 (need more / input over) */
  size_t consumed;
} outcome;

static int bytes_eq(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen) {
  return alen == blen && (alen == 0 || memcmp(a, b, alen) == 0);
}

static int frame_eq(const pp_wire_frame *a, const pp_wire_frame *b) {
  return a->type == b->type && a->length == b->length && a->version == b->version &&
         a->pid == b->pid && a->worker_index == b->worker_index &&
         a->heap_live_slots == b->heap_live_slots && a->thread_index == b->thread_index &&
         a->capabilities == b->capabilities && a->request_id == b->request_id &&
         a->t2b_ns == b->t2b_ns && a->t3_ns == b->t3_ns && a->flags == b->flags &&
         a->pairs.count == b->pairs.count &&
         bytes_eq(a->pairs.data, a->pairs.len, b->pairs.data, b->pairs.len) &&
         bytes_eq(a->data, a->data_len, b->data, b->data_len) && a->status == b->status &&
         a->t4_ns == b->t4_ns && a->t5_ns == b->t5_ns && a->body_read_ns == b->body_read_ns &&
         a->gvl_wait_ns == b->gvl_wait_ns && a->cpu_ns == b->cpu_ns && a->count == b->count &&
         a->grace_ms == b->grace_ms && a->boot_ns == b->boot_ns &&
         a->exit_status == b->exit_status && a->interval_ms == b->interval_ms;
}

static void check_pairs(const pp_wire_pairs *pairs) {
  pp_wire_pairs_iter it;
  pp_wire_pairs_iter_init(&it, pairs);
  const uint8_t *k, *v;
  uint32_t kl, vl;
  uint64_t seen = 0, bytes = 0;
  while (pp_wire_pairs_next(&it, &k, &kl, &v, &vl)) {
    CHECK(k >= pairs->data && k + kl <= pairs->data + pairs->len);
    CHECK(v >= pairs->data && v + vl <= pairs->data + pairs->len);
    seen++;
    bytes += 8u + (uint64_t)kl + vl;
  }
  CHECK(seen == pairs->count);
  CHECK(bytes == pairs->len);
}

/* Property 1 for one frame decoded from buf[0..n). */
static void check_roundtrip(const pp_wire_frame *f, const uint8_t *buf, ssize_t n) {
  if (f->type == PP_WIRE_REQUEST || f->type == PP_WIRE_RESPONSE_HEAD) check_pairs(&f->pairs);
  CHECK(pp_wire_type_name(f->type) != NULL);
  CHECK(pp_wire_encoded_size(f) == n);
  uint8_t *enc = malloc((size_t)n);
  CHECK(enc != NULL);
  CHECK(pp_wire_encode(f, enc, (size_t)n) == n);
  CHECK(memcmp(enc, buf, (size_t)n) == 0);
  if (n > 0) CHECK(pp_wire_encode(f, enc, (size_t)n - 1) == PP_WIRE_ENOSPC);
  pp_wire_decoder d;
  pp_wire_decoder_init(&d);
  pp_wire_frame g;
  size_t need = 0;
  CHECK(pp_wire_decode(&d, enc, (size_t)n, &g, &need) == n);
  CHECK(frame_eq(f, &g));
  CHECK(d.frames == 1);
  free(enc);
}

/* Decodes data[0..size) as one buffer. */
static void decode_whole(const uint8_t *data, size_t size, outcome *o) {
  pp_wire_decoder d;
  pp_wire_decoder_init(&d);
  size_t off = 0;
  o->frames = 0;
  o->end_rc = 0;
  for (;;) {
    pp_wire_frame f;
    size_t need = 0;
    ssize_t rc = pp_wire_decode(&d, data + off, size - off, &f, &need);
    if (rc > 0) {
      CHECK((size_t)rc <= size - off);
      CHECK((size_t)rc == PP_WIRE_HEADER_SIZE + f.length);
      check_roundtrip(&f, data + off, rc);
      if (o->frames < MAX_FRAMES) {
        o->offsets[o->frames] = off;
        o->lengths[o->frames] = (size_t)rc;
      }
      o->frames++;
      off += (size_t)rc;
      continue;
    }
    if (rc == PP_WIRE_NEED_MORE) {
      CHECK(need > size - off);
      CHECK(need <= PP_WIRE_HEADER_SIZE + (size_t)PP_WIRE_MAX_PAYLOAD);
    } else {
      CHECK(rc >= PP_WIRE_EINVAL);
      CHECK(pp_wire_strerror((int)rc) != NULL);
      /* Sticky. */
      pp_wire_frame g;
      CHECK(pp_wire_decode(&d, data + off, size - off, &g, NULL) == rc);
      CHECK(d.err == rc);
    }
    o->end_rc = rc;
    break;
  }
  CHECK(d.frames == o->frames);
  o->consumed = off;
}

/* xorshift32: chunk sizes that depend on the input only. */
static uint32_t next_rand(uint32_t *s) {
  uint32_t x = *s;
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  return *s = x;
}

/* Feeds data in chunks (chunk == 0: pseudo-random sizes 1..max_chunk) into a buffer the way
 * the server reads a worker pipe, calling the decoder on an exact-size copy of what it has. */
static void decode_chunked(const uint8_t *data, size_t size, size_t chunk, uint32_t seed,
                           size_t max_chunk, const outcome *whole) {
  pp_wire_decoder d;
  pp_wire_decoder_init(&d);
  size_t fed = 0, off = 0, frames = 0;
  ssize_t end_rc = 0;
  uint32_t state = seed ? seed : 0x9e3779b9u;
  while (fed < size && end_rc >= 0) {
    size_t step = chunk ? chunk : 1 + next_rand(&state) % max_chunk;
    fed = fed + step < size ? fed + step : size;
    for (;;) {
      size_t have = fed - off;
      /* An exact-size copy lets ASan see a read past what has arrived; big windows are
       * passed in place to keep the cost linear. */
      int copied = have <= 16384;
      uint8_t *copy = copied ? malloc(have ? have : 1) : (uint8_t *)(data + off);
      CHECK(copy != NULL);
      if (copied && have) memcpy(copy, data + off, have);
      pp_wire_frame f;
      size_t need = 0;
      ssize_t rc = pp_wire_decode(&d, copy, have, &f, &need);
      if (rc > 0) {
        CHECK(frames < whole->frames);
        if (frames < MAX_FRAMES) {
          CHECK(whole->offsets[frames] == off);
          CHECK(whole->lengths[frames] == (size_t)rc);
        }
        check_roundtrip(&f, copy, rc);
        frames++;
        off += (size_t)rc;
        if (copied) free(copy);
        continue;
      }
      if (copied) free(copy);
      if (rc == PP_WIRE_NEED_MORE) CHECK(need > have);
      end_rc = rc;
      break;
    }
  }
  CHECK(frames == whole->frames);
  CHECK(end_rc == whole->end_rc);
  CHECK(off == whole->consumed);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static outcome whole; /* large; one per process is enough (the target is single-threaded) */
  decode_whole(data, size, &whole);
  uint32_t seed = (uint32_t)size * 2654435761u;
  for (size_t i = 0; i < size && i < 64; i++)
    seed = seed * 31u + data[i];
  if (size <= 1024) decode_chunked(data, size, 1, 0, 0, &whole);
  decode_chunked(data, size, 0, seed, size < 64 ? 8 : 4096, &whole);
  return 0;
}
