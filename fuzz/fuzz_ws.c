/* Fuzz target for the WebSocket frame parser (server/proto/ws.h): pp_ws_feed and its callbacks, the
 * owner's echo through pp_ws_send, the output a session writes.
 *
 * Input: byte 0 = mode: bit 0 permessage-deflate agreed, bit 1 no context takeover (both
 * sides), bit 2 echo messages fragmented in 7-byte frames, bits 3-7 the largest chunk - 1 of
 * the pseudo-random split (and its seed); the rest is what a client sends after the
 * handshake. Limits are small (4 KiB messages) so 1009 is cheap to reach. Properties:
 *  1. Fed whole, byte by byte (inputs up to 2 KiB) and in pseudo-random chunks, the session
 *     reports the same transcript (every message, ping, pong and close with its bytes), fails
 *     with the same close code (or none) and writes the same output bytes.
 *  2. pp_ws_feed returns all of its input or PP_WS_EPROTO, and PP_WS_EPROTO is sticky; a
 *     failure's code is one of 1002, 1007, 1009 and leaves the state CLOSED.
 *  3. A delivered message is at most the limit, text is valid UTF-8, nothing is delivered
 *     after the peer's Close, on_close comes once with a valid code (or 1005) and a UTF-8
 *     reason.
 *  4. The output is a sequence of well-formed server frames (unmasked, minimal lengths,
 *     control frames final and at most 125 bytes, no reserved bits but RSV1 on a compressed
 *     first frame), at most one Close and nothing after it; each echoed message, inflated
 *     by the target's own zlib when compressed, equals the message delivered; each pong
 *     carries a ping's payload.
 * Each window handed to the session is an exact-size heap copy, so ASan sees over-reads. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "server/proto/ws.h"

#include "fuzz/check.h"

#define MAX_MESSAGE 4096

typedef struct owner {
  pp_buf log;      /* transcript */
  pp_buf messages; /* delivered messages: u8 op, u32 len, bytes (for property 4) */
  pp_buf pings;    /* ping payloads: u32 len, bytes */
  int closes;
} owner;

static void log_event(owner *o, uint8_t kind, int code, const uint8_t *p, size_t n) {
  pp_buf_append(&o->log, &kind, 1);
  pp_buf_append_u32(&o->log, (uint32_t)code);
  pp_buf_append_u32(&o->log, (uint32_t)n);
  pp_buf_append(&o->log, p, n);
}

static int on_message(pp_ws *ws, pp_ws_opcode op, const uint8_t *p, size_t n) {
  owner *o = ws->data;
  CHECK(op == PP_WS_OP_TEXT || op == PP_WS_OP_BINARY);
  CHECK(n <= MAX_MESSAGE);
  CHECK(o->closes == 0);
  if (op == PP_WS_OP_TEXT) CHECK(pp_ws_utf8_valid(p, n));
  log_event(o, 'M', op, p, n);
  uint8_t opb = (uint8_t)op;
  pp_buf_append(&o->messages, &opb, 1);
  pp_buf_append_u32(&o->messages, (uint32_t)n);
  pp_buf_append(&o->messages, p, n);
  CHECK(pp_ws_send(ws, op, p, n) == 0);
  return 0;
}
static void on_ping(pp_ws *ws, const uint8_t *p, size_t n) {
  owner *o = ws->data;
  CHECK(n <= 125 && o->closes == 0);
  log_event(o, 'P', 0, p, n);
  if (!ws->close_sent) {
    pp_buf_append_u32(&o->pings, (uint32_t)n);
    pp_buf_append(&o->pings, p, n);
  }
}
static void on_pong(pp_ws *ws, const uint8_t *p, size_t n) {
  owner *o = ws->data;
  CHECK(n <= 125 && o->closes == 0);
  log_event(o, 'O', 0, p, n);
}
static void on_close(pp_ws *ws, int code, const uint8_t *p, size_t n) {
  owner *o = ws->data;
  CHECK(o->closes == 0);
  o->closes++;
  CHECK(code == PP_WS_CLOSE_NO_STATUS || pp_ws_close_code_valid(code));
  CHECK(n <= 123 && pp_ws_utf8_valid(p, n));
  CHECK(code != PP_WS_CLOSE_NO_STATUS || n == 0);
  log_event(o, 'C', code, p, n);
}
static const pp_ws_callbacks cbs = {on_message, on_ping, on_pong, on_close};

typedef struct result {
  int fail_code;
  pp_buf log, out, messages, pings;
} result;

/* Feeds data split by `mode`: 0 whole, 1 byte by byte, 2 pseudo-random chunks. */
static void parse(const uint8_t *data, size_t size, uint8_t cfgbits, int mode, result *r) {
  pp_ws_limits lim;
  pp_ws_limits_default(&lim);
  lim.max_message_bytes = MAX_MESSAGE;
  lim.max_pending_bytes = (size_t)1 << 40; /* never EFULL here: the split must not matter */
  lim.fragment_bytes = (cfgbits & 4) ? 7 : 0;
  pp_ws_pmd_config cfg;
  pp_ws_pmd_config_default(&cfg);
  cfg.compress_min_bytes = 16;
  pp_ws_pmd_params pmd = {(cfgbits & 2) != 0, (cfgbits & 2) != 0, 15, 15};
  owner o;
  memset(&o, 0, sizeof o);
  pp_ws ws;
  CHECK(pp_ws_init(&ws, &cbs, &lim, (cfgbits & 1) ? &pmd : NULL, &cfg, &o) == 0);
  uint32_t seed = cfgbits;
  size_t max_chunk = (size_t)(cfgbits >> 3) + 1;
  size_t at = 0;
  r->fail_code = 0;
  while (at < size) {
    size_t n = size - at;
    if (mode == 1) n = 1;
    if (mode == 2) {
      seed = seed * 1103515245u + 12345u;
      size_t c = 1 + (seed >> 16) % (max_chunk * 37);
      if (c < n) n = c;
    }
    uint8_t *piece = malloc(n);
    CHECK(piece != NULL);
    memcpy(piece, data + at, n);
    ssize_t rc = pp_ws_feed(&ws, piece, n);
    free(piece);
    if (rc < 0) {
      CHECK(rc == PP_WS_EPROTO);
      CHECK(ws.fail_code == 1002 || ws.fail_code == 1007 || ws.fail_code == 1009);
      CHECK(ws.state == PP_WS_CLOSED);
      r->fail_code = ws.fail_code;
      CHECK(pp_ws_feed(&ws, data, size) == PP_WS_EPROTO); /* sticky */
      break;
    }
    CHECK((size_t)rc == n);
    at += n;
  }
  const uint8_t *p;
  size_t len = pp_ws_output(&ws, &p);
  pp_buf_init(&r->out);
  pp_buf_append(&r->out, p, len);
  CHECK(pp_ws_pending(&ws) == len);
  pp_ws_output_consumed(&ws, len);
  CHECK(pp_ws_pending(&ws) == 0);
  r->log = o.log;
  r->messages = o.messages;
  r->pings = o.pings;
  pp_ws_dispose(&ws);
}

/* Property 4: the output's frames, and echoes equal to the delivered messages. */
static void check_output(const result *r, uint8_t cfgbits) {
  const uint8_t *p = r->out.data;
  size_t n = r->out.len, i = 0;
  size_t mi = 0, pi = 0; /* read positions in messages and pings */
  int closes = 0, msg_op = 0, compressed = 0;
  pp_buf msg;
  pp_buf_init(&msg);
  z_stream inf;
  memset(&inf, 0, sizeof inf);
  CHECK(inflateInit2(&inf, -15) == Z_OK);
  while (i < n) {
    CHECK(closes == 0); /* nothing after a Close */
    CHECK(n - i >= 2);
    uint8_t b0 = p[i], b1 = p[i + 1];
    CHECK((b1 & 0x80) == 0 && (b0 & 0x30) == 0);
    uint64_t len = b1 & 0x7F;
    size_t hl = 2;
    if (len == 126) {
      CHECK(n - i >= 4);
      len = (uint64_t)p[i + 2] << 8 | p[i + 3];
      CHECK(len >= 126);
      hl = 4;
    } else if (len == 127) {
      CHECK(n - i >= 10);
      len = 0;
      for (int k = 0; k < 8; k++)
        len = len << 8 | p[i + 2 + k];
      CHECK(len > 0xFFFF);
      hl = 10;
    }
    CHECK(n - i - hl >= len);
    const uint8_t *pl = p + i + hl;
    int op = b0 & 0x0F, fin = b0 >> 7, rsv1 = (b0 >> 6) & 1;
    if (op >= 8) {
      CHECK(fin && len <= 125 && !rsv1);
      if (op == PP_WS_OP_CLOSE) {
        closes++;
        CHECK(len == 0 || len >= 2);
        if (len >= 2) CHECK(pp_ws_close_code_valid(pl[0] << 8 | pl[1]));
      } else {
        CHECK(op == PP_WS_OP_PONG);
        CHECK(r->pings.len - pi >= 4);
        const uint8_t *q = r->pings.data + pi;
        uint32_t pn = (uint32_t)q[0] << 24 | (uint32_t)q[1] << 16 | (uint32_t)q[2] << 8 | q[3];
        CHECK(pn == len && memcmp(q + 4, pl, len) == 0);
        pi += 4 + pn;
      }
    } else {
      CHECK(op == 0 || op == 1 || op == 2);
      if (op == 0) {
        CHECK(msg_op != 0 && !rsv1);
      } else {
        CHECK(msg_op == 0);
        CHECK(!rsv1 || (cfgbits & 1));
        msg_op = op;
        compressed = rsv1;
        msg.len = 0;
      }
      pp_buf_append(&msg, pl, (size_t)len);
      if (fin) {
        if (compressed) {
          pp_buf_append(&msg, "\0\0\xff\xff", 4);
          pp_buf plain;
          pp_buf_init(&plain);
          inf.next_in = msg.data;
          inf.avail_in = (uInt)msg.len;
          do {
            pp_buf_reserve(&plain, MAX_MESSAGE + 64);
            inf.next_out = plain.data + plain.len;
            inf.avail_out = MAX_MESSAGE + 64;
            int rc = inflate(&inf, Z_SYNC_FLUSH);
            CHECK(rc == Z_OK || rc == Z_BUF_ERROR);
            plain.len += MAX_MESSAGE + 64 - inf.avail_out;
            CHECK(plain.len <= MAX_MESSAGE);
          } while (inf.avail_out == 0);
          CHECK(inf.avail_in == 0);
          if (cfgbits & 2) CHECK(inflateReset(&inf) == Z_OK);
          pp_buf_dispose(&msg);
          msg = plain;
        }
        /* the next delivered message */
        CHECK(r->messages.len - mi >= 5);
        const uint8_t *q = r->messages.data + mi;
        uint32_t qn = (uint32_t)q[1] << 24 | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 8 | q[4];
        CHECK(q[0] == msg_op && qn == msg.len && (qn == 0 || memcmp(q + 5, msg.data, qn) == 0));
        mi += 5 + qn;
        msg_op = 0;
        msg.len = 0;
      }
    }
    i += hl + (size_t)len;
  }
  CHECK(msg_op == 0);
  CHECK(mi == r->messages.len); /* every message was echoed */
  CHECK(pi == r->pings.len);    /* every ping before our Close was answered */
  CHECK(closes <= 1);
  if (r->fail_code) CHECK(closes == 1);
  inflateEnd(&inf);
  pp_buf_dispose(&msg);
}

static int same_buf(const pp_buf *a, const pp_buf *b) {
  return a->len == b->len && (a->len == 0 || memcmp(a->data, b->data, a->len) == 0);
}

static void dispose(result *r) {
  pp_buf_dispose(&r->log);
  pp_buf_dispose(&r->out);
  pp_buf_dispose(&r->messages);
  pp_buf_dispose(&r->pings);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  uint8_t cfgbits = data[0];
  data++;
  size--;
  result whole, chunks;
  parse(data, size, cfgbits, 0, &whole);
  check_output(&whole, cfgbits);
  parse(data, size, cfgbits, 2, &chunks);
  CHECK(chunks.fail_code == whole.fail_code);
  CHECK(same_buf(&chunks.log, &whole.log));
  CHECK(same_buf(&chunks.out, &whole.out));
  dispose(&chunks);
  if (size <= 2048) {
    result bytes;
    parse(data, size, cfgbits, 1, &bytes);
    CHECK(bytes.fail_code == whole.fail_code);
    CHECK(same_buf(&bytes.log, &whole.log));
    CHECK(same_buf(&bytes.out, &whole.out));
    dispose(&bytes);
  }
  dispose(&whole);
  return 0;
}
