/* The WebSocket session of server/proto/ws.h: RFC 6455 framing for the server's end, reassembly,
 * UTF-8 checks, control frames, the close handshake and the frame writer.
 *
 * Bytes are processed as they come, whatever the split: a frame header is gathered in
 * ws->hdr (at most 14 bytes) and checked as soon as each of its parts is there (the first two
 * bytes carry most rules, so a bad frame fails before its length or mask arrive); payload
 * bytes are unmasked straight into the message buffer (or the 125-byte control buffer), or
 * through a small stack buffer into the inflater, and a text message is UTF-8 checked as its
 * bytes arrive, so an invalid byte fails the connection at once (RFC 6455 §8.1), not at the
 * end of the message. The workload is many small messages: the common frame (one, short,
 * masked) costs a header parse, one unmask loop and one validation pass over its bytes. */
#include "server/proto/ws.h"

#include <string.h>

#include "server/proto/ws_int.h"

const char *pp_ws_strerror(int err) {
  switch (err) {
  case PP_WS_OK: return "ok";
  case PP_WS_EPROTO: return "the WebSocket connection failed";
  case PP_WS_ECLOSED: return "the WebSocket is closing";
  case PP_WS_EINVAL: return "invalid argument";
  case PP_WS_EFULL: return "output buffer full";
  case PP_WS_EZLIB: return "zlib failure";
  case PP_WS_EBADHEADER: return "malformed Sec-WebSocket-Extensions";
  default: return "unknown error";
  }
}

int pp_ws_close_code_valid(int code) {
  if (code >= 1000 && code <= 1003) return 1;
  if (code >= 1007 && code <= 1014) return 1;
  return code >= 3000 && code <= 4999;
}

/* --- UTF-8 ------------------------------------------------------------------------------
 * The state packs what the next byte must be: 0 = a sequence may start; otherwise bits 0-7
 * hold the smallest and bits 8-15 the largest allowed value of the next continuation byte,
 * bits 16-17 how many continuation bytes remain after it. The first continuation byte's
 * range is what rules out overlong forms, surrogates and code points above U+10FFFF
 * (Unicode Table 3-7). */
static uint32_t utf8_range(uint32_t lo, uint32_t hi, uint32_t rest) {
  return lo | hi << 8 | rest << 16;
}

uint32_t pp_ws_utf8_feed(uint32_t state, const uint8_t *p, size_t n) {
  if (state == PP_WS_UTF8_BAD) return state;
  size_t i = 0;
  while (i < n) {
    if (state == 0) {
      /* ASCII runs, eight bytes at a time. */
      while (i + 8 <= n) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        if (w & 0x8080808080808080ull) break;
        i += 8;
      }
      if (i >= n) break;
      uint8_t c = p[i++];
      if (c < 0x80) continue;
      if (c < 0xC2) return PP_WS_UTF8_BAD; /* a continuation byte, or an overlong C0/C1 */
      if (c < 0xE0)
        state = utf8_range(0x80, 0xBF, 0);
      else if (c == 0xE0)
        state = utf8_range(0xA0, 0xBF, 1);
      else if (c == 0xED)
        state = utf8_range(0x80, 0x9F, 1); /* no surrogates */
      else if (c < 0xF0)
        state = utf8_range(0x80, 0xBF, 1);
      else if (c == 0xF0)
        state = utf8_range(0x90, 0xBF, 2);
      else if (c < 0xF4)
        state = utf8_range(0x80, 0xBF, 2);
      else if (c == 0xF4)
        state = utf8_range(0x80, 0x8F, 2); /* at most U+10FFFF */
      else
        return PP_WS_UTF8_BAD;
    } else {
      uint8_t c = p[i++];
      if (c < (state & 0xFF) || c > ((state >> 8) & 0xFF)) return PP_WS_UTF8_BAD;
      uint32_t rest = state >> 16;
      state = rest ? utf8_range(0x80, 0xBF, rest - 1) : 0;
    }
  }
  return state;
}

int pp_ws_utf8_valid(const uint8_t *p, size_t n) {
  return pp_ws_utf8_feed(0, p, n) == 0;
}

/* --- the frame writer ---------------------------------------------------------------- */

static size_t frame_header(uint8_t *h, int fin, int rsv1, pp_ws_opcode op, uint64_t len) {
  h[0] = (uint8_t)((fin ? 0x80 : 0) | (rsv1 ? 0x40 : 0) | (op & 0x0F));
  if (len < 126) {
    h[1] = (uint8_t)len;
    return 2;
  }
  if (len <= 0xFFFF) {
    h[1] = 126;
    h[2] = (uint8_t)(len >> 8);
    h[3] = (uint8_t)len;
    return 4;
  }
  h[1] = 127;
  for (int i = 0; i < 8; i++)
    h[2 + i] = (uint8_t)(len >> (56 - 8 * i));
  return 10;
}

void pp_ws_frame_write(pp_buf *out, int fin, int rsv1, pp_ws_opcode op, const uint8_t *payload,
                       size_t len) {
  uint8_t h[10];
  size_t hl = frame_header(h, fin, rsv1, op, len);
  pp_buf_reserve(out, hl + len);
  pp_buf_append(out, h, hl);
  pp_buf_append(out, payload, len);
}

/* --- the session --------------------------------------------------------------------- */

void pp_ws_limits_default(pp_ws_limits *l) {
  l->max_message_bytes = 1u << 20;
  l->max_pending_bytes = 4u << 20;
  l->fragment_bytes = 64u << 10;
}

int pp_ws_init(pp_ws *ws, const pp_ws_callbacks *cb, const pp_ws_limits *limits,
               const pp_ws_pmd_params *pmd, const pp_ws_pmd_config *cfg, void *data) {
  memset(ws, 0, sizeof *ws);
  ws->cb = cb;
  ws->limits = limits;
  ws->data = data;
  ws->hdr_need = 2;
  pp_buf_init(&ws->msg);
  pp_buf_init(&ws->out);
  if (pmd) {
    ws->pmd_on = 1;
    ws->pmd_params = *pmd;
    ws->pmd_cfg = cfg;
  }
  return 0;
}

/* The compression state, made at the first compressed message (either way): 0 if it cannot
 * be allocated. */
static int pmd_get(pp_ws *ws) {
  if (ws->pmd) return 1;
  ws->pmd = malloc(sizeof *ws->pmd);
  if (!ws->pmd) return 0;
  pp_ws__pmd_init(ws->pmd, &ws->pmd_params);
  return 1;
}

void pp_ws_dispose(pp_ws *ws) {
  if (ws->pmd) {
    pp_ws__pmd_dispose(ws->pmd);
    free(ws->pmd);
    ws->pmd = NULL;
  }
  pp_buf_dispose(&ws->msg);
  pp_buf_dispose(&ws->out);
}

size_t pp_ws_output(const pp_ws *ws, const uint8_t **data) {
  /* never NULL + 0 (undefined behaviour): an empty output points at a static empty string */
  *data = ws->out.data ? ws->out.data + ws->out_head : (const uint8_t *)"";
  return ws->out.len - ws->out_head;
}

size_t pp_ws_pending(const pp_ws *ws) {
  return ws->out.len - ws->out_head;
}

void pp_ws_output_consumed(pp_ws *ws, size_t n) {
  size_t pending = ws->out.len - ws->out_head;
  if (n > pending) n = pending;
  ws->out_head += n;
  if (ws->out_head == ws->out.len) {
    ws->out_head = ws->out.len = 0;
  } else if (ws->out_head >= 65536 && ws->out_head * 2 >= ws->out.len) {
    /* Keep the buffer from creeping: move the rest to the front once the consumed part is
     * large and at least half. */
    memmove(ws->out.data, ws->out.data + ws->out_head, ws->out.len - ws->out_head);
    ws->out.len -= ws->out_head;
    ws->out_head = 0;
  }
}

void pp_ws_trim(pp_ws *ws) {
  if (ws->msg_opcode == 0 && !ws->in_payload) pp_buf_dispose(&ws->msg);
  if (ws->out.len == ws->out_head) {
    pp_buf_dispose(&ws->out);
    ws->out_head = 0;
  }
  if (ws->pmd && ws->msg_opcode == 0) {
    pp_ws__pmd_trim(ws->pmd);
    if (!ws->pmd->inflater_ready && !ws->pmd->deflater_ready) { /* nothing kept: all of it goes */
      pp_ws__pmd_dispose(ws->pmd);
      free(ws->pmd);
      ws->pmd = NULL;
    }
  }
}

/* Appends a Close frame with code (0: no body) and reason. */
static void queue_close(pp_ws *ws, int code, const char *reason, size_t reason_len) {
  uint8_t body[125];
  size_t n = 0;
  if (code) {
    body[0] = (uint8_t)(code >> 8);
    body[1] = (uint8_t)code;
    if (reason_len > 123) reason_len = 123;
    if (reason_len) memcpy(body + 2, reason, reason_len);
    n = 2 + reason_len;
  }
  pp_ws_frame_write(&ws->out, 1, 0, PP_WS_OP_CLOSE, body, n);
  ws->close_sent = 1;
  ws->close_code_sent = code;
}

/* Fails the connection (RFC 6455 §7.1.7): a Close with the code and reason unless one was
 * sent already, then nothing more is read. Returns PP_WS_EPROTO. */
static int fail(pp_ws *ws, int code, const char *reason) {
  ws->fail_code = code;
  ws->fail_reason = reason;
  if (!ws->close_sent) queue_close(ws, code, reason, strlen(reason));
  ws->state = PP_WS_CLOSED;
  return PP_WS_EPROTO;
}

static const char *reason_for(int code) {
  switch (code) {
  case PP_WS_CLOSE_TOO_BIG: return "message too big";
  case PP_WS_CLOSE_INVALID_PAYLOAD: return "invalid compressed data";
  case PP_WS_CLOSE_POLICY: return "policy violation";
  case PP_WS_CLOSE_UNSUPPORTED_DATA: return "unsupported data";
  default: return "internal error";
  }
}

static void reset_message(pp_ws *ws) {
  ws->msg_opcode = 0;
  ws->msg_compressed = 0;
  ws->msg_wire_bytes = 0;
  ws->utf8_state = 0;
  ws->msg.len = 0;
}

/* The frame header is complete in ws->hdr: checks the length rules and the message size.
 * The first two bytes were checked by check_first_bytes. */
static int check_length(pp_ws *ws) {
  uint8_t len7 = ws->hdr[1] & 0x7F;
  uint64_t len = len7;
  if (len7 == 126) {
    len = (uint64_t)ws->hdr[2] << 8 | ws->hdr[3];
    if (len < 126) return fail(ws, PP_WS_CLOSE_PROTOCOL_ERROR, "16-bit length under 126");
  } else if (len7 == 127) {
    len = 0;
    for (int i = 0; i < 8; i++)
      len = len << 8 | ws->hdr[2 + i];
    if (len >> 63) return fail(ws, PP_WS_CLOSE_PROTOCOL_ERROR, "64-bit length with its MSB set");
    if (len <= 0xFFFF) return fail(ws, PP_WS_CLOSE_PROTOCOL_ERROR, "64-bit length under 65536");
  }
  ws->payload_len = len;
  ws->payload_done = 0;
  size_t ml = ws->hdr_need - 4;
  memcpy(ws->mask, ws->hdr + ml, 4);
  if (ws->opcode >= PP_WS_OP_CLOSE) return 0;
  uint64_t max = ws->limits->max_message_bytes;
  if (ws->msg_compressed) {
    /* Compressed bytes are not buffered, but bound them too (CPU, and a stream of empty
     * blocks that never inflates to anything): the most DEFLATE can need for max bytes. */
    uint64_t bound = max + (max >> 3) + 1024;
    if (len > bound - ws->msg_wire_bytes)
      return fail(ws, PP_WS_CLOSE_TOO_BIG, "compressed message too big");
  } else if (len > max - ws->msg.len) {
    return fail(ws, PP_WS_CLOSE_TOO_BIG, "message too big");
  }
  ws->msg_wire_bytes += len;
  return 0;
}

/* The first two header bytes: every rule that does not need the length or the mask
 * (§5.2 reserved bits and opcodes, §5.1 masking, §5.4 fragmentation, §5.5 control frames,
 * RFC 7692 §6 RSV1). Sets hdr_need. */
static int check_first_bytes(pp_ws *ws) {
  uint8_t b0 = ws->hdr[0], b1 = ws->hdr[1];
  ws->fin = b0 >> 7;
  ws->rsv1 = (b0 >> 6) & 1;
  ws->opcode = b0 & 0x0F;
  if (b0 & 0x30) return fail(ws, PP_WS_CLOSE_PROTOCOL_ERROR, "RSV2 or RSV3 set");
  if (ws->rsv1 && !ws->pmd_on)
    return fail(ws, PP_WS_CLOSE_PROTOCOL_ERROR, "RSV1 set without an extension");
  switch (ws->opcode) {
  case PP_WS_OP_CONTINUATION:
  case PP_WS_OP_TEXT:
  case PP_WS_OP_BINARY:
  case PP_WS_OP_CLOSE:
  case PP_WS_OP_PING:
  case PP_WS_OP_PONG: break;
  default: return fail(ws, PP_WS_CLOSE_PROTOCOL_ERROR, "reserved opcode");
  }
  if (ws->opcode >= PP_WS_OP_CLOSE) {
    if (!ws->fin) return fail(ws, PP_WS_CLOSE_PROTOCOL_ERROR, "fragmented control frame");
    if ((b1 & 0x7F) > 125) return fail(ws, PP_WS_CLOSE_PROTOCOL_ERROR, "control frame over 125");
    if (ws->rsv1) return fail(ws, PP_WS_CLOSE_PROTOCOL_ERROR, "RSV1 on a control frame");
  }
  if (!(b1 & 0x80)) return fail(ws, PP_WS_CLOSE_PROTOCOL_ERROR, "unmasked client frame");
  if (ws->opcode == PP_WS_OP_CONTINUATION) {
    if (!ws->msg_opcode) return fail(ws, PP_WS_CLOSE_PROTOCOL_ERROR, "continuation without start");
    if (ws->rsv1) return fail(ws, PP_WS_CLOSE_PROTOCOL_ERROR, "RSV1 on a continuation frame");
  } else if (ws->opcode < PP_WS_OP_CLOSE) {
    if (ws->msg_opcode)
      return fail(ws, PP_WS_CLOSE_PROTOCOL_ERROR, "new message inside a fragmented one");
    ws->msg_opcode = ws->opcode;
    ws->msg_compressed = ws->rsv1;
    ws->utf8_state = 0;
    if (ws->msg_compressed) {
      if (!pmd_get(ws)) return fail(ws, PP_WS_CLOSE_INTERNAL_ERROR, "internal error");
      ws->pmd->inflate_ended = 0;
    }
  }
  uint8_t len7 = b1 & 0x7F;
  ws->hdr_need = (uint8_t)(2 + (len7 == 126 ? 2 : len7 == 127 ? 8 : 0) + 4);
  return 0;
}

/* Unmasks n payload bytes into dst; the mask phase continues from ws->payload_done. */
static void unmask(pp_ws *ws, uint8_t *dst, const uint8_t *src, size_t n) {
  size_t k = (size_t)(ws->payload_done & 3);
  size_t i = 0;
  /* Byte by byte until the mask phase is 0, then eight bytes at a time. */
  while (i < n && k) {
    dst[i] = src[i] ^ ws->mask[k];
    i++;
    k = (k + 1) & 3;
  }
  uint32_t m32;
  memcpy(&m32, ws->mask, 4);
  uint64_t m64 = (uint64_t)m32 | (uint64_t)m32 << 32;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, src + i, 8);
    w ^= m64;
    memcpy(dst + i, &w, 8);
  }
  for (; i < n; i++)
    dst[i] = src[i] ^ ws->mask[(ws->payload_done + i) & 3];
}

/* Payload bytes of a data frame. */
static int data_payload(pp_ws *ws, const uint8_t *p, size_t n) {
  if (!ws->msg_compressed) {
    size_t at = ws->msg.len;
    pp_buf_reserve(&ws->msg, n);
    unmask(ws, ws->msg.data + at, p, n);
    ws->msg.len += n;
    if (ws->msg_opcode == PP_WS_OP_TEXT) {
      ws->utf8_state = pp_ws_utf8_feed(ws->utf8_state, ws->msg.data + at, n);
      if (ws->utf8_state == PP_WS_UTF8_BAD)
        return fail(ws, PP_WS_CLOSE_INVALID_PAYLOAD, "text is not UTF-8");
    }
    return 0;
  }
  uint8_t tmp[4096];
  while (n) {
    size_t chunk = n < sizeof tmp ? n : sizeof tmp;
    unmask(ws, tmp, p, chunk);
    size_t at = ws->msg.len;
    int code = pp_ws__inflate(ws->pmd, &ws->msg, ws->limits->max_message_bytes, tmp, chunk);
    /* The output inflated before an error is checked first, so which failure is reported does
     * not depend on how the compressed bytes were split into calls. */
    if (ws->msg_opcode == PP_WS_OP_TEXT && ws->msg.len > at) {
      ws->utf8_state = pp_ws_utf8_feed(ws->utf8_state, ws->msg.data + at, ws->msg.len - at);
      if (ws->utf8_state == PP_WS_UTF8_BAD)
        return fail(ws, PP_WS_CLOSE_INVALID_PAYLOAD, "text is not UTF-8");
    }
    if (code) return fail(ws, code, reason_for(code));
    ws->payload_done += chunk;
    p += chunk;
    n -= chunk;
  }
  return 0;
}

/* The last frame of a message has arrived. */
static int message_end(pp_ws *ws) {
  if (ws->msg_compressed) {
    size_t at = ws->msg.len;
    int code = pp_ws__inflate_finish(ws->pmd, &ws->msg, ws->limits->max_message_bytes);
    if (ws->msg_opcode == PP_WS_OP_TEXT && ws->msg.len > at) {
      ws->utf8_state = pp_ws_utf8_feed(ws->utf8_state, ws->msg.data + at, ws->msg.len - at);
      if (ws->utf8_state == PP_WS_UTF8_BAD)
        return fail(ws, PP_WS_CLOSE_INVALID_PAYLOAD, "text is not UTF-8");
    }
    if (code) return fail(ws, code, reason_for(code));
  }
  if (ws->msg_opcode == PP_WS_OP_TEXT && ws->utf8_state != 0)
    return fail(ws, PP_WS_CLOSE_INVALID_PAYLOAD, "text is not UTF-8");
  pp_ws_opcode op = (pp_ws_opcode)ws->msg_opcode;
  int deliver = ws->state == PP_WS_OPEN;
  ws->messages_in++;
  ws->bytes_in += ws->msg.len;
  const uint8_t *data = ws->msg.data ? ws->msg.data : (const uint8_t *)"";
  size_t len = ws->msg.len;
  reset_message(ws);
  if (deliver && ws->cb->on_message) {
    int code = ws->cb->on_message(ws, op, data, len);
    if (code) {
      /* never a code that may not be sent (1005, 1006, 1015, ...) */
      if (!pp_ws_close_code_valid(code)) code = PP_WS_CLOSE_INTERNAL_ERROR;
      return fail(ws, code, reason_for(code));
    }
  }
  return 0;
}

static int control_end(pp_ws *ws) {
  const uint8_t *p = ws->ctl;
  size_t n = ws->ctl_len;
  ws->ctl_len = 0;
  if (ws->opcode == PP_WS_OP_PING) {
    ws->pings_in++;
    if (!ws->close_sent) { /* nothing may follow our Close */
      if (pp_ws_pending(ws) + 2 + n > ws->limits->max_pending_bytes)
        return fail(ws, PP_WS_CLOSE_POLICY, "peer does not read");
      pp_ws_frame_write(&ws->out, 1, 0, PP_WS_OP_PONG, p, n);
    }
    if (ws->cb->on_ping) ws->cb->on_ping(ws, p, n);
    return 0;
  }
  if (ws->opcode == PP_WS_OP_PONG) {
    ws->pongs_in++;
    if (ws->cb->on_pong) ws->cb->on_pong(ws, p, n);
    return 0;
  }
  /* Close (§5.5.1, §7.1.5, §7.4). */
  int code = PP_WS_CLOSE_NO_STATUS;
  if (n == 1) return fail(ws, PP_WS_CLOSE_PROTOCOL_ERROR, "close body of one byte");
  if (n >= 2) {
    code = p[0] << 8 | p[1];
    if (!pp_ws_close_code_valid(code))
      return fail(ws, PP_WS_CLOSE_PROTOCOL_ERROR, "invalid close code");
    if (!pp_ws_utf8_valid(p + 2, n - 2))
      return fail(ws, PP_WS_CLOSE_INVALID_PAYLOAD, "close reason is not UTF-8");
  }
  ws->close_received = 1;
  ws->close_code_received = code;
  /* Echo the code (§5.5.1); a Close without a body is answered without one. */
  if (!ws->close_sent) queue_close(ws, code == PP_WS_CLOSE_NO_STATUS ? 0 : code, NULL, 0);
  ws->state = PP_WS_CLOSED;
  if (ws->cb->on_close) ws->cb->on_close(ws, code, n >= 2 ? p + 2 : p, n >= 2 ? n - 2 : 0);
  return 0;
}

static int frame_end(pp_ws *ws) {
  ws->in_payload = 0;
  ws->hdr_len = 0;
  ws->hdr_need = 2;
  if (ws->opcode >= PP_WS_OP_CLOSE) return control_end(ws);
  if (ws->fin) return message_end(ws);
  return 0;
}

ssize_t pp_ws_feed(pp_ws *ws, const uint8_t *data, size_t len) {
  if (ws->fail_code) return PP_WS_EPROTO;
  size_t i = 0;
  while (i < len) {
    if (ws->close_received) return (ssize_t)len; /* §5.5.1: nothing after the peer's Close */
    if (!ws->in_payload) {
      /* Gather the header: two bytes first (their checks set hdr_need), then the rest. */
      while (i < len && ws->hdr_len < ws->hdr_need) {
        ws->hdr[ws->hdr_len++] = data[i++];
        if (ws->hdr_len == 2 && check_first_bytes(ws)) return PP_WS_EPROTO;
      }
      if (ws->hdr_len < ws->hdr_need) break;
      if (check_length(ws)) return PP_WS_EPROTO;
      ws->in_payload = 1;
    }
    uint64_t left = ws->payload_len - ws->payload_done;
    size_t n = len - i < left ? len - i : (size_t)left;
    if (n) {
      if (ws->opcode >= PP_WS_OP_CLOSE) {
        unmask(ws, ws->ctl + ws->ctl_len, data + i, n);
        ws->ctl_len = (uint8_t)(ws->ctl_len + n);
        ws->payload_done += n;
      } else {
        int rc = data_payload(ws, data + i, n);
        if (rc) return rc;
        if (!ws->msg_compressed) ws->payload_done += n;
      }
      i += n;
    }
    if (ws->payload_done == ws->payload_len && frame_end(ws)) return PP_WS_EPROTO;
  }
  return (ssize_t)len;
}

/* --- sending ------------------------------------------------------------------------- */

/* Frames a message's payload (already compressed when rsv1), fragment_bytes at a time. */
static void frame_message(pp_ws *ws, pp_ws_opcode op, int rsv1, const uint8_t *p, size_t n) {
  size_t frag = ws->limits->fragment_bytes ? ws->limits->fragment_bytes : n;
  if (frag == 0) frag = 1;
  size_t off = 0;
  do {
    size_t chunk = n - off < frag ? n - off : frag;
    int fin = off + chunk == n;
    pp_ws_frame_write(&ws->out, fin, off == 0 ? rsv1 : 0, off == 0 ? op : PP_WS_OP_CONTINUATION,
                      p + off, chunk);
    off += chunk;
  } while (off < n);
}

int pp_ws_send(pp_ws *ws, pp_ws_opcode op, const uint8_t *data, size_t len) {
  if (op != PP_WS_OP_TEXT && op != PP_WS_OP_BINARY) return PP_WS_EINVAL;
  if (len && !data) return PP_WS_EINVAL;
  if (ws->close_sent) return PP_WS_ECLOSED;
  if (op == PP_WS_OP_TEXT && !pp_ws_utf8_valid(data, len)) return PP_WS_EINVAL;
  if (pp_ws_pending(ws) >= ws->limits->max_pending_bytes) return PP_WS_EFULL;
  if (!data) data = (const uint8_t *)"";
  size_t min = ws->pmd_cfg ? ws->pmd_cfg->compress_min_bytes : 0;
  if (ws->pmd_on && len >= min) {
    if (!pmd_get(ws)) return PP_WS_EZLIB;
    int rc = pp_ws__deflate(ws->pmd, data, len);
    if (rc) return rc;
    frame_message(ws, op, 1, ws->pmd->scratch.data, ws->pmd->scratch.len);
  } else {
    frame_message(ws, op, 0, data, len);
  }
  ws->messages_out++;
  ws->bytes_out += len;
  return 0;
}

int pp_ws_send_encoded(pp_ws *ws, const uint8_t *frames, size_t n, size_t payload_len) {
  if (ws->close_sent) return PP_WS_ECLOSED;
  if (pp_ws_pending(ws) >= ws->limits->max_pending_bytes) return PP_WS_EFULL;
  pp_buf_append(&ws->out, frames, n);
  ws->messages_out++;
  ws->bytes_out += payload_len;
  return 0;
}

int pp_ws_ping(pp_ws *ws, const uint8_t *data, size_t len) {
  if (len > 125 || (len && !data)) return PP_WS_EINVAL;
  if (ws->close_sent) return PP_WS_ECLOSED;
  if (pp_ws_pending(ws) >= ws->limits->max_pending_bytes) return PP_WS_EFULL;
  pp_ws_frame_write(&ws->out, 1, 0, PP_WS_OP_PING, data, len);
  return 0;
}

int pp_ws_close(pp_ws *ws, int code, const char *reason, size_t reason_len) {
  if (ws->close_sent) return PP_WS_ECLOSED;
  if (code != 0 && !pp_ws_close_code_valid(code)) return PP_WS_EINVAL;
  if (code == 0 && reason_len) return PP_WS_EINVAL;
  if (reason_len > 123 || (reason_len && !reason)) return PP_WS_EINVAL;
  if (!pp_ws_utf8_valid((const uint8_t *)reason, reason_len)) return PP_WS_EINVAL;
  queue_close(ws, code, reason, reason_len);
  ws->state = ws->close_received ? PP_WS_CLOSED : PP_WS_CLOSING;
  return 0;
}
