/* Fuzz target for permessage-deflate (server/proto/ws.h, ws_deflate.c): the negotiation of
 * Sec-WebSocket-Extensions, the bounded inflater and the compressor.
 *
 * Input: the first line (up to '\n') is a Sec-WebSocket-Extensions value; then byte 0 of the
 * rest = mode (bit 0: no context takeover; bits 1-3: the client's window bits - 8, for the
 * negotiated client_max_window_bits; bit 4: the payloads are plain text the target
 * compresses, so the inflater sees valid DEFLATE, else they are sent as they are: arbitrary
 * or bomb-shaped DEFLATE), then records of [u8 flags][u16 length][bytes]: one message each,
 * sent as a compressed (RSV1) masked frame, text if flags bit 0, split into two fragments at
 * flags >> 1 when that is inside it. Properties:
 *  1. pp_ws_pmd_negotiate returns 1, 0 or PP_WS_EBADHEADER; the response is NUL-terminated
 *     and empty unless 1; on 1 the parameters are in range (server 9-15, client 8-15) and the
 *     response, read back as an offer, is accepted with the same parameters.
 *  2. No message is ever larger than the limit (1 KiB: a deflate bomb stops there with 1009),
 *     text is valid UTF-8, and a failure is 1007 or 1009 (or 1002 for a frame rule).
 *  3. With valid DEFLATE (bit 4) and messages within the limit, every message arrives equal
 *     to what was compressed, and nothing fails.
 *  4. The owner echoes every message through pp_ws_send; the echoes, inflated by the target's
 *     own zlib (context kept or not as agreed), equal the messages. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "server/proto/ws.h"

#include "fuzz/check.h"

#define MAX_MESSAGE 1024

typedef struct owner {
  pp_buf got; /* delivered messages, concatenated with u32 lengths */
  int count;
} owner;

static int on_message(pp_ws *ws, pp_ws_opcode op, const uint8_t *p, size_t n) {
  owner *o = ws->data;
  CHECK(n <= MAX_MESSAGE);
  if (op == PP_WS_OP_TEXT) CHECK(pp_ws_utf8_valid(p, n));
  pp_buf_append_u32(&o->got, (uint32_t)n);
  pp_buf_append(&o->got, p, n);
  o->count++;
  CHECK(pp_ws_send(ws, op, p, n) == 0);
  return 0;
}
static const pp_ws_callbacks cbs = {on_message, NULL, NULL, NULL};

static void check_negotiation(const char *v, size_t n) {
  pp_ws_pmd_config cfg;
  pp_ws_pmd_config_default(&cfg);
  cfg.client_max_window_bits = 8 + (int)(n % 8); /* vary what we ask of the client */
  pp_ws_pmd_params pp;
  char resp[128];
  memset(resp, 'x', sizeof resp);
  int rc = pp_ws_pmd_negotiate(&cfg, v, n, &pp, resp, sizeof resp);
  CHECK(rc == 1 || rc == 0 || rc == PP_WS_EBADHEADER);
  CHECK(memchr(resp, 0, sizeof resp) != NULL);
  if (rc != 1) {
    CHECK(resp[0] == 0);
    return;
  }
  CHECK(pp.server_max_window_bits >= 9 && pp.server_max_window_bits <= 15);
  CHECK(pp.client_max_window_bits >= 8 && pp.client_max_window_bits <= 15);
  pp_ws_pmd_params again;
  char resp2[128];
  CHECK(pp_ws_pmd_negotiate(&cfg, resp, strlen(resp), &again, resp2, sizeof resp2) == 1);
  CHECK(again.server_max_window_bits == pp.server_max_window_bits);
  CHECK(again.server_no_context_takeover == pp.server_no_context_takeover);
  CHECK(again.client_max_window_bits <= pp.client_max_window_bits);
}

static const uint8_t mask_key[4] = {0xa1, 0x02, 0x5c, 0xe7};

static void put_frame(pp_buf *b, uint8_t b0, const uint8_t *p, size_t n) {
  uint8_t h[8];
  size_t hl = 0;
  h[hl++] = b0;
  if (n < 126) {
    h[hl++] = (uint8_t)(0x80 | n);
  } else {
    h[hl++] = 0x80 | 126;
    h[hl++] = (uint8_t)(n >> 8);
    h[hl++] = (uint8_t)n;
  }
  pp_buf_append(b, h, hl);
  pp_buf_append(b, mask_key, 4);
  for (size_t i = 0; i < n; i++) {
    uint8_t c = p[i] ^ mask_key[i & 3];
    pp_buf_append(b, &c, 1);
  }
}

/* A client's compression of one message (sync flush, tail removed, 00 when empty). */
static void client_deflate(z_stream *z, const uint8_t *p, size_t n, pp_buf *out) {
  out->len = 0;
  z->next_in = (Bytef *)p;
  z->avail_in = (uInt)n;
  do {
    pp_buf_reserve(out, 1024);
    z->next_out = out->data + out->len;
    z->avail_out = 1024;
    CHECK(deflate(z, Z_SYNC_FLUSH) != Z_STREAM_ERROR);
    out->len += 1024 - z->avail_out;
  } while (z->avail_out == 0);
  if (out->len == 0) {
    pp_buf_append(out, "", 1);
    return;
  }
  CHECK(out->len >= 4);
  out->len -= 4;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const uint8_t *nl = memchr(data, '\n', size);
  size_t line = nl ? (size_t)(nl - data) : size;
  check_negotiation((const char *)data, line);
  if (!nl) return 0;
  data += line + 1;
  size -= line + 1;
  if (size < 1) return 0;
  uint8_t mode = data[0];
  data++;
  size--;
  int reset = mode & 1;
  int client_bits = 8 + ((mode >> 1) & 7);
  int valid = (mode >> 4) & 1;

  pp_ws_limits lim;
  pp_ws_limits_default(&lim);
  lim.max_message_bytes = MAX_MESSAGE;
  lim.max_pending_bytes = (size_t)1 << 40;
  pp_ws_pmd_config cfg;
  pp_ws_pmd_config_default(&cfg);
  cfg.compress_min_bytes = 0;
  pp_ws_pmd_params pmd = {reset, reset, 15, client_bits};
  owner o;
  memset(&o, 0, sizeof o);
  pp_ws ws;
  CHECK(pp_ws_init(&ws, &cbs, &lim, &pmd, &cfg, &o) == 0);

  z_stream def;
  memset(&def, 0, sizeof def);
  /* zlib's raw deflate turns a window of 8 into 9: keep to what the client may use. */
  CHECK(deflateInit2(&def, 6, Z_DEFLATED, -(client_bits < 9 ? 9 : client_bits), 8,
                     Z_DEFAULT_STRATEGY) == Z_OK);
  pp_buf in, comp, sent;
  pp_buf_init(&in);
  pp_buf_init(&comp);
  pp_buf_init(&sent);
  int fail = 0, messages = 0;
  size_t i = 0;
  while (i + 3 <= size && !fail) {
    uint8_t flags = data[i];
    size_t n = (size_t)data[i + 1] << 8 | data[i + 2];
    i += 3;
    if (n > size - i) n = size - i;
    const uint8_t *msg = data + i;
    i += n;
    int text = flags & 1;
    if (valid && text && !pp_ws_utf8_valid(msg, n)) text = 0;
    const uint8_t *payload = msg;
    size_t plen = n;
    if (valid) {
      client_deflate(&def, msg, n, &comp);
      if (reset) CHECK(deflateReset(&def) == Z_OK);
      payload = comp.data;
      plen = comp.len;
    }
    size_t cut = (size_t)(flags >> 1);
    in.len = 0;
    uint8_t op = text ? 0x01 : 0x02;
    if (cut > 0 && cut < plen) {
      put_frame(&in, 0x40 | op, payload, cut);
      put_frame(&in, 0x80, payload + cut, plen - cut);
    } else {
      put_frame(&in, 0xC0 | op, payload, plen);
    }
    ssize_t rc = pp_ws_feed(&ws, in.data, in.len);
    if (rc < 0) {
      CHECK(rc == PP_WS_EPROTO);
      CHECK(ws.fail_code == 1007 || ws.fail_code == 1009 || ws.fail_code == 1002);
      fail = ws.fail_code;
      /* property 3: valid DEFLATE only fails when the message is over the limit */
      if (valid) CHECK(fail == 1009 && n > MAX_MESSAGE);
      break;
    }
    CHECK((size_t)rc == in.len);
    messages++;
    if (valid) {
      if (n <= MAX_MESSAGE) {
        pp_buf_append_u32(&sent, (uint32_t)n);
        pp_buf_append(&sent, msg, n);
      }
    }
  }
  CHECK(o.count <= messages);
  if (valid) {
    CHECK(o.count == messages);
    CHECK(sent.len == o.got.len && (sent.len == 0 || memcmp(sent.data, o.got.data, sent.len) == 0));
  }

  /* Property 4: inflate the echoes. */
  const uint8_t *out;
  size_t olen = pp_ws_output(&ws, &out);
  z_stream inf;
  memset(&inf, 0, sizeof inf);
  CHECK(inflateInit2(&inf, -15) == Z_OK);
  size_t at = 0, gi = 0;
  pp_buf plain;
  pp_buf_init(&plain);
  while (at < olen) {
    CHECK(olen - at >= 2);
    uint8_t b0 = out[at], b1 = out[at + 1];
    size_t len = b1 & 0x7F, hl = 2;
    CHECK(len != 127); /* echoes are at most 1 KiB and a bit */
    if (len == 126) {
      CHECK(olen - at >= 4);
      len = (size_t)out[at + 2] << 8 | out[at + 3];
      hl = 4;
    }
    CHECK(olen - at - hl >= len);
    const uint8_t *pl = out + at + hl;
    at += hl + len;
    if ((b0 & 0x0F) == PP_WS_OP_CLOSE) {
      CHECK(at == olen && fail);
      break;
    }
    CHECK((b0 & 0xC0) == 0xC0); /* one compressed frame per echo (no fragmentation set) */
    comp.len = 0;
    pp_buf_append(&comp, pl, len);
    pp_buf_append(&comp, "\0\0\xff\xff", 4);
    plain.len = 0;
    inf.next_in = comp.data;
    inf.avail_in = (uInt)comp.len;
    do {
      pp_buf_reserve(&plain, 2048);
      inf.next_out = plain.data + plain.len;
      inf.avail_out = 2048;
      int rc = inflate(&inf, Z_SYNC_FLUSH);
      CHECK(rc == Z_OK || rc == Z_BUF_ERROR);
      plain.len += 2048 - inf.avail_out;
      CHECK(plain.len <= MAX_MESSAGE);
    } while (inf.avail_out == 0);
    if (reset) CHECK(inflateReset(&inf) == Z_OK);
    CHECK(o.got.len - gi >= 4);
    const uint8_t *q = o.got.data + gi;
    uint32_t qn = (uint32_t)q[0] << 24 | (uint32_t)q[1] << 16 | (uint32_t)q[2] << 8 | q[3];
    CHECK(qn == plain.len && (qn == 0 || memcmp(q + 4, plain.data, qn) == 0));
    gi += 4 + qn;
  }
  CHECK(gi == o.got.len);
  inflateEnd(&inf);
  deflateEnd(&def);
  pp_ws_dispose(&ws);
  pp_buf_dispose(&in);
  pp_buf_dispose(&comp);
  pp_buf_dispose(&sent);
  pp_buf_dispose(&plain);
  pp_buf_dispose(&o.got);
  return 0;
}
