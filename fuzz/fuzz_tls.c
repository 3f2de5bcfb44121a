/* Fuzz target for the TLS filter (server/proto/tls.h).
 *
 * The input is what a client sends to a TLS listener, as it is (no prefix byte), so a captured
 * ClientHello is a seed as it is. The server side is one fixed context over a development
 * certificate generated once, at the first input, into a temporary directory (removed again
 * as soon as the context has loaded it), with h2 offered.
 * Properties:
 *  1. pp_tls_conn_feed returns 0 or one of the five connection failures, and a failure has
 *     the matching cause, a cause name and a reason; success leaves the cause NONE. OpenSSL's
 *     error queue is empty after every call.
 *  2. These bytes alone never complete a handshake (a client's Finished needs the server's
 *     fresh ephemeral secret, and a ticket needs the context's fresh ticket key): the
 *     handshake stays incomplete, no plaintext comes out, pp_tls_conn_write is refused.
 *  3. Failures are sticky: feeding again returns the same code and appends nothing.
 *  4. The outcome does not depend on how the stream is split: fed whole, byte by byte (inputs
 *     up to 2 KiB) and in pseudo-random chunks (seeded by the input), the return code and the
 *     cause are the same.
 *  5. Bounded: the read BIO never held more than PP_TLS_FEED_CHUNK bytes, and what the server
 *     sends back stays under 16 KiB (its one flight plus an alert: no amplification).
 *  6. pp_tls_conn_eof keeps a recorded failure's cause, and otherwise says closed mid-handshake
 *     (or none when no byte came).
 * A violated property aborts, so libFuzzer and the replay driver report it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/err.h>

#include "server/proto/tls.h"

#include "fuzz/check.h"

#define MAX_WIRE (16 * 1024)

static pp_tls_ctx ctx;

static void setup_once(void) {
  static int ready;
  if (ready) return;
  char dir[] = "/tmp/pp-fuzz-tls.XXXXXX";
  char cert[PP_TLS_PATH_MAX], key[PP_TLS_PATH_MAX], fp[PP_TLS_FINGERPRINT_LEN], err[512];
  if (!mkdtemp(dir)) {
    perror("fuzz_tls: mkdtemp");
    abort();
  }
  if (pp_tls_dev_cert(dir, cert, sizeof cert, key, sizeof key, fp, sizeof fp, err, sizeof err) !=
          0 ||
      pp_tls_ctx_init(&ctx, cert, key, 1, err, sizeof err) != 0) {
    fprintf(stderr, "fuzz_tls: setup: %s\n", err);
    abort();
  }
  unlink(cert);
  unlink(key);
  rmdir(dir);
  ready = 1;
}

typedef struct outcome {
  int rc;
  pp_tls_cause cause;
  size_t wire_len;
} outcome;

static int is_conn_failure(int rc) {
  return rc == PP_TLS_ENOTTLS || rc == PP_TLS_EHANDSHAKE || rc == PP_TLS_EALERT ||
         rc == PP_TLS_EEOF || rc == PP_TLS_EPROTO;
}

static int error_of(pp_tls_cause cause) {
  switch (cause) {
  case PP_TLS_CAUSE_NOT_TLS: return PP_TLS_ENOTTLS;
  case PP_TLS_CAUSE_HANDSHAKE: return PP_TLS_EHANDSHAKE;
  case PP_TLS_CAUSE_ALERT: return PP_TLS_EALERT;
  case PP_TLS_CAUSE_EOF_HANDSHAKE: return PP_TLS_EEOF;
  case PP_TLS_CAUSE_PROTOCOL: return PP_TLS_EPROTO;
  default: return 0;
  }
}

static uint64_t next_rand(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

/* Feeds the stream in chunks: 0 = whole, 1 = byte by byte, 2 = pseudo-random (1..4096). */
static outcome run(const uint8_t *data, size_t size, int mode, uint64_t seed) {
  pp_tls_conn c;
  CHECK(pp_tls_conn_init(&c, &ctx) == 0);
  pp_buf plain, wire;
  pp_buf_init(&plain);
  pp_buf_init(&wire);
  int rc = 0;
  size_t off = 0;
  do {
    size_t n = size - off;
    if (mode == 1 && n > 1) n = 1;
    if (mode == 2) {
      size_t want = 1 + (size_t)(next_rand(&seed) % 4096);
      if (n > want) n = want;
    }
    rc = pp_tls_conn_feed(&c, data + off, n, &plain, &wire);
    CHECK(ERR_peek_error() == 0);
    CHECK(rc == 0 || is_conn_failure(rc));
    off += n;
  } while (rc == 0 && off < size);

  /* 1: the code and the cause agree */
  pp_tls_cause cause = pp_tls_conn_cause(&c);
  CHECK(cause >= PP_TLS_CAUSE_NONE && cause < PP_TLS_CAUSE_COUNT);
  CHECK(strcmp(pp_tls_cause_name(cause), "unknown") != 0);
  if (rc) {
    CHECK(error_of(cause) == rc);
    CHECK(c.reason != NULL && c.reason[0] != '\0');
    CHECK(strcmp(pp_tls_strerror(rc), "unknown error") != 0);
  } else {
    CHECK(cause == PP_TLS_CAUSE_NONE);
  }
  /* 2: no handshake, no plaintext */
  CHECK(!pp_tls_conn_handshake_done(&c));
  CHECK(plain.len == 0);
  CHECK(pp_tls_conn_alpn(&c) == NULL);
  size_t wire_before = wire.len;
  int wrc = pp_tls_conn_write(&c, (const uint8_t *)"x", 1, &wire);
  CHECK(wrc == (rc ? rc : PP_TLS_ENOTREADY));
  CHECK(pp_tls_conn_shutdown(&c, &wire) == (rc ? rc : PP_TLS_ENOTREADY));
  CHECK(wire.len == wire_before);
  /* 3: sticky */
  if (rc) {
    CHECK(pp_tls_conn_feed(&c, data, size, &plain, &wire) == rc);
    CHECK(wire.len == wire_before && plain.len == 0);
  }
  /* 5: bounded */
  CHECK(c.rbio_peak <= PP_TLS_FEED_CHUNK);
  CHECK(wire.len <= MAX_WIRE);
  /* 6: EOF */
  pp_tls_cause at_eof = pp_tls_conn_eof(&c);
  if (rc)
    CHECK(at_eof == cause);
  else
    CHECK(at_eof == (size ? PP_TLS_CAUSE_EOF_HANDSHAKE : PP_TLS_CAUSE_NONE));
  CHECK(ERR_peek_error() == 0);

  outcome o = {.rc = rc, .cause = cause, .wire_len = wire.len};
  pp_buf_dispose(&plain);
  pp_buf_dispose(&wire);
  pp_tls_conn_dispose(&c);
  return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  setup_once();
  outcome whole = run(data, size, 0, 0);
  /* 4: split independence */
  uint64_t seed = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < size; i++)
    seed = (seed ^ data[i]) * 0x100000001b3ull;
  if (!seed) seed = 1;
  outcome random = run(data, size, 2, seed);
  CHECK(random.rc == whole.rc && random.cause == whole.cause);
  if (size <= 2048) {
    outcome bytes = run(data, size, 1, 0);
    CHECK(bytes.rc == whole.rc && bytes.cause == whole.cause);
  }
  return 0;
}
