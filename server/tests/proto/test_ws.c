/* Tests for server/proto/ws.c, ws_deflate.c and ws_handshake.c: the WebSocket codec.
 *
 * The frame cases are one table (cases[]): each row is a list of client frames built by the
 * test (masked unless told, any header bits, minimal or forced length encodings, payloads
 * compressed by the test's own zlib client when the row negotiates permessage-deflate), and
 * the exact outcome: the close code the session fails with (0 = none), the transcript of its
 * callbacks and the transcript of the frames it sent back (the owner echoes every message).
 * Each row is fed whole, byte by byte and split in two at every point, and must give the same
 * outcome; every truncated prefix must give a prefix of the transcript and no failure other
 * than the row's. Negative rows are named by the RFC section whose rule they break. */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>

#include "server/proto/ws.h"
#include "server/proto/ws_int.h" /* to see that idle no-takeover streams are freed */

/* The tables leave trailing fields of a frame (flags that are rarely set) to zero. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

/* --- the owner: a transcript of callbacks, echoing each message ------------------------ */

typedef struct owner {
  pp_buf events;
  int echo;
  int reply_code; /* on_message returns it */
} owner;

/* tag, then the bytes with %xx for anything not printable (and for % and |), then "|". */
static void append_escaped(pp_buf *b, const char *tag, const uint8_t *p, size_t n) {
  pp_buf_append_str(b, tag);
  for (size_t i = 0; i < n; i++) {
    char hex[4];
    if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '%' && p[i] != '|')
      pp_buf_append(b, p + i, 1);
    else {
      snprintf(hex, sizeof hex, "%%%02x", p[i]);
      pp_buf_append_str(b, hex);
    }
  }
  pp_buf_append_str(b, "|");
}

static void ev_append(owner *o, const char *tag, const uint8_t *p, size_t n) {
  append_escaped(&o->events, tag, p, n);
}

static int on_message(pp_ws *ws, pp_ws_opcode op, const uint8_t *p, size_t n) {
  owner *o = ws->data;
  if (n > 64) {
    char tag[48];
    snprintf(tag, sizeof tag, "%s%zu:", op == PP_WS_OP_TEXT ? "T" : "B", n);
    ev_append(o, tag, p, 8);
  } else {
    ev_append(o, op == PP_WS_OP_TEXT ? "T:" : "B:", p, n);
  }
  if (o->echo) CU_ASSERT_EQUAL(pp_ws_send(ws, op, p, n), 0);
  return o->reply_code;
}
static void on_ping(pp_ws *ws, const uint8_t *p, size_t n) {
  ev_append(ws->data, "ping:", p, n);
}
static void on_pong(pp_ws *ws, const uint8_t *p, size_t n) {
  ev_append(ws->data, "pong:", p, n);
}
static void on_close(pp_ws *ws, int code, const uint8_t *p, size_t n) {
  char tag[32];
  snprintf(tag, sizeof tag, "close:%d:", code);
  ev_append(ws->data, tag, p, n);
}
static const pp_ws_callbacks cbs = {on_message, on_ping, on_pong, on_close};

/* --- the test's client: frame builder and a raw-deflate compressor ---------------------- */

static const uint8_t mask_key[4] = {0x37, 0xfa, 0x21, 0x3d};

/* A client frame: b0 (FIN | RSV | opcode), masked unless `unmasked`, the length minimal or
 * forced to the 16-bit (lenenc 16) or 64-bit (64) form, and `claimed` > 0 announcing a length
 * other than the payload's (a frame cut short, or one whose length is a lie). */
static void put_frame(pp_buf *b, uint8_t b0, int unmasked, int lenenc, uint64_t claimed,
                      const uint8_t *p, size_t n) {
  uint64_t len = claimed ? claimed : n;
  uint8_t h[14];
  size_t hl = 0;
  h[hl++] = b0;
  uint8_t mbit = unmasked ? 0 : 0x80;
  if (lenenc == 64 || (lenenc == 0 && len > 0xFFFF)) {
    h[hl++] = mbit | 127;
    for (int i = 0; i < 8; i++)
      h[hl++] = (uint8_t)(len >> (56 - 8 * i));
  } else if (lenenc == 16 || (lenenc == 0 && len >= 126)) {
    h[hl++] = mbit | 126;
    h[hl++] = (uint8_t)(len >> 8);
    h[hl++] = (uint8_t)len;
  } else {
    h[hl++] = mbit | (uint8_t)len;
  }
  if (!unmasked) {
    memcpy(h + hl, mask_key, 4);
    hl += 4;
  }
  pp_buf_append(b, h, hl);
  for (size_t i = 0; i < n; i++) {
    uint8_t c = unmasked ? p[i] : (uint8_t)(p[i] ^ mask_key[i & 3]);
    pp_buf_append(b, &c, 1);
  }
}

/* Compresses a message as a client does (raw DEFLATE, sync flush, tail removed). */
static void client_deflate(z_stream *z, const uint8_t *p, size_t n, pp_buf *out) {
  out->len = 0;
  z->next_in = (Bytef *)p;
  z->avail_in = (uInt)n;
  do {
    pp_buf_reserve(out, 4096);
    z->next_out = out->data + out->len;
    z->avail_out = 4096;
    CU_ASSERT(deflate(z, Z_SYNC_FLUSH) != Z_STREAM_ERROR);
    out->len += 4096 - z->avail_out;
  } while (z->avail_out == 0);
  if (out->len == 0) { /* an empty message after a flush: one 00 byte (RFC 7692 §7.2.3.6) */
    pp_buf_append(out, "", 1);
    return;
  }
  CU_ASSERT_FATAL(out->len >= 4 && memcmp(out->data + out->len - 4, "\0\0\xff\xff", 4) == 0);
  out->len -= 4;
}

/* --- reading what the server sent --------------------------------------------------- */

/* Appends a transcript of server frames: "T:..|", "B:..|", "pong:..|", "ping:..|",
 * "close:CODE:reason|" ("close:-|" without a body), "+" before a continuation, "z" before a
 * compressed message. Server frames must be unmasked, control frames FIN and <= 125.
 * Compressed messages are inflated with inf (context kept unless reset_each). */
static void read_output(const uint8_t *p, size_t n, pp_buf *t, z_stream *inf, int reset_each) {
  size_t i = 0;
  pp_buf msg;
  pp_buf_init(&msg);
  int msg_op = 0, compressed = 0;
  while (i < n) {
    CU_ASSERT_FATAL(n - i >= 2);
    uint8_t b0 = p[i], b1 = p[i + 1];
    CU_ASSERT((b1 & 0x80) == 0); /* server frames are never masked (§5.1) */
    uint64_t len = b1 & 0x7F;
    size_t hl = 2;
    if (len == 126) {
      len = (uint64_t)p[i + 2] << 8 | p[i + 3];
      CU_ASSERT(len >= 126);
      hl = 4;
    } else if (len == 127) {
      len = 0;
      for (int k = 0; k < 8; k++)
        len = len << 8 | p[i + 2 + k];
      CU_ASSERT(len > 0xFFFF);
      hl = 10;
    }
    CU_ASSERT_FATAL(n - i - hl >= len);
    const uint8_t *pl = p + i + hl;
    int op = b0 & 0x0F, fin = b0 >> 7, rsv1 = (b0 >> 6) & 1;
    CU_ASSERT((b0 & 0x30) == 0);
    if (op >= 8) {
      CU_ASSERT(fin && len <= 125 && !rsv1);
      if (op == 8) {
        char tag[32];
        if (len >= 2) {
          snprintf(tag, sizeof tag, "close:%d:", pl[0] << 8 | pl[1]);
          append_escaped(t, tag, pl + 2, len - 2);
        } else {
          CU_ASSERT(len == 0);
          pp_buf_append_str(t, "close:-|");
        }
      } else {
        append_escaped(t, op == 9 ? "ping:" : "pong:", pl, len);
      }
    } else {
      if (op == 0) {
        CU_ASSERT(msg_op != 0 && !rsv1);
        pp_buf_append_str(t, "+");
      } else {
        CU_ASSERT(msg_op == 0);
        msg_op = op;
        compressed = rsv1;
        msg.len = 0;
      }
      pp_buf_append(&msg, pl, len);
      if (fin) {
        if (compressed) {
          CU_ASSERT_FATAL(inf != NULL);
          pp_buf_append(&msg, "\0\0\xff\xff", 4);
          pp_buf plain;
          pp_buf_init(&plain);
          inf->next_in = msg.data;
          inf->avail_in = (uInt)msg.len;
          do {
            pp_buf_reserve(&plain, 65536);
            inf->next_out = plain.data + plain.len;
            inf->avail_out = 65536;
            int rc = inflate(inf, Z_SYNC_FLUSH);
            CU_ASSERT(rc == Z_OK || rc == Z_BUF_ERROR);
            plain.len += 65536 - inf->avail_out;
          } while (inf->avail_out == 0);
          if (reset_each) inflateReset(inf);
          pp_buf_append_str(t, "z");
          pp_buf_dispose(&msg);
          msg = plain;
        }
        char tag[48];
        if (msg.len > 64) {
          snprintf(tag, sizeof tag, "%s%zu|", msg_op == 1 ? "T" : "B", msg.len);
          pp_buf_append_str(t, tag);
        } else {
          append_escaped(t, msg_op == 1 ? "T:" : "B:", msg.data, msg.len);
        }
        msg_op = 0;
        msg.len = 0;
      }
    }
    i += hl + len;
  }
  pp_buf_dispose(&msg);
}

/* --- the frame table ------------------------------------------------------------------ */

typedef struct fspec {
  uint8_t b0;
  const char *payload; /* NULL: `zeros` zero bytes */
  size_t len;
  int unmasked, lenenc;
  uint64_t claimed;
  size_t zeros;
  int compress; /* the test's client deflates the payload (set RSV1 in b0 too) */
  int raw;      /* payload already compressed or garbage: sent as it is */
  int badmask;  /* masked with a key other than the one in the header (each byte ^ 0x80) */
} fspec;

#define P(s) (s), sizeof(s) - 1

typedef struct wcase {
  const char *name;
  int pmd;               /* 0 none, 1 permessage-deflate with takeover, 2 no takeover */
  uint64_t max_message;  /* 0 = default */
  size_t fragment_bytes; /* 0 = no fragmentation of echoes */
  int reply_code;        /* on_message's return */
  fspec f[6];
  int fail_code;      /* the close code of a failure, 0 = none */
  const char *events; /* transcript of callbacks */
  const char *out;    /* transcript of server frames */
} wcase;

static const wcase cases[] = {
    /* Positive. */
    {"echo text (§5.6)", 0, 0, 0, 0, {{0x81, P("Hello")}}, 0, "T:Hello|", "T:Hello|"},
    {"echo binary (§5.6)",
     0,
     0,
     0,
     0,
     {{0x82, P("\x00\x01\xff")}},
     0,
     "B:%00%01%ff|",
     "B:%00%01%ff|"},
    {"empty text message (§5.6)", 0, 0, 0, 0, {{0x81, P("")}}, 0, "T:|", "T:|"},
    {"two messages in a row (§5.6)",
     0,
     0,
     0,
     0,
     {{0x81, P("a")}, {0x82, P("b")}},
     0,
     "T:a|B:b|",
     "T:a|B:b|"},
    {"16-bit length, 126 bytes (§5.2)",
     0,
     0,
     0,
     0,
     {{0x82, NULL, 0, 0, 0, 0, 126}},
     0,
     "B126:%00%00%00%00%00%00%00%00|",
     "B126|"},
    {"64-bit length, 65536 bytes (§5.2)",
     0,
     0,
     0,
     0,
     {{0x82, NULL, 0, 0, 0, 0, 65536}},
     0,
     "B65536:%00%00%00%00%00%00%00%00|",
     "B65536|"},
    {"fragmented text in three frames (§5.4)",
     0,
     0,
     0,
     0,
     {{0x01, P("Hel")}, {0x00, P("l")}, {0x80, P("o")}},
     0,
     "T:Hello|",
     "T:Hello|"},
    {"UTF-8 split across fragments (§5.6, §8.1)",
     0,
     0,
     0,
     0,
     {{0x01, P("\xce")}, {0x80, P("\xba\xe1\xbd\xb9")}},
     0,
     "T:%ce%ba%e1%bd%b9|",
     "T:%ce%ba%e1%bd%b9|"},
    {"ping inside a fragmented message (§5.4, §5.5.2)",
     0,
     0,
     0,
     0,
     {{0x01, P("ab")}, {0x89, P("p1")}, {0x80, P("cd")}},
     0,
     "ping:p1|T:abcd|",
     "pong:p1|T:abcd|"},
    {"ping is answered with the same payload (§5.5.2)",
     0,
     0,
     0,
     0,
     {{0x89, P("hi")}},
     0,
     "ping:hi|",
     "pong:hi|"},
    {"empty ping (§5.5.2)", 0, 0, 0, 0, {{0x89, P("")}}, 0, "ping:|", "pong:|"},
    {"125-byte ping (§5.5)", 0, 0, 0, 0, {{0x89, NULL, 0, 0, 0, 0, 125}}, 0, NULL, NULL},
    {"unsolicited pong is taken (§5.5.3)", 0, 0, 0, 0, {{0x8A, P("x")}}, 0, "pong:x|", ""},
    {"close 1000 is echoed (§5.5.1)",
     0,
     0,
     0,
     0,
     {{0x88, P("\x03\xe8"
               "bye")}},
     0,
     "close:1000:bye|",
     "close:1000:|"},
    {"close without body is echoed without body (§7.1.5)",
     0,
     0,
     0,
     0,
     {{0x88, P("")}},
     0,
     "close:1005:|",
     "close:-|"},
    {"close 4999 (§7.4.2)", 0, 0, 0, 0, {{0x88, P("\x13\x87")}}, 0, "close:4999:|", "close:4999:|"},
    {"close 3000 (§7.4.2)", 0, 0, 0, 0, {{0x88, P("\x0b\xb8")}}, 0, "close:3000:|", "close:3000:|"},
    {"close 1014, IANA registered (§7.4.2)",
     0,
     0,
     0,
     0,
     {{0x88, P("\x03\xf6")}},
     0,
     "close:1014:|",
     "close:1014:|"},
    {"bytes after the peer's close are dropped (§5.5.1)",
     0,
     0,
     0,
     0,
     {{0x88, P("\x03\xe8")}, {0x81, P("late")}, {0x00, P("junk")}},
     0,
     "close:1000:|",
     "close:1000:|"},
    {"deflate: one message (RFC 7692 §7.2)",
     1,
     0,
     0,
     0,
     {{0xC1, P("Hello, Hello, Hello"), 0, 0, 0, 0, 1}},
     0,
     "T:Hello, Hello, Hello|",
     "T:Hello, Hello, Hello|"},
    {"deflate: context takeover across messages (RFC 7692 §7.2.3.2)",
     1,
     0,
     0,
     0,
     {{0xC1, P("compress me compress me compress me compress me compress me four"), 0, 0, 0, 0, 1},
      {0xC1, P("compress me compress me compress me compress me compress me four"), 0, 0, 0, 0, 1}},
     0,
     NULL,
     "zT:compress me compress me compress me compress me compress me four|"
     "zT:compress me compress me compress me compress me compress me four|"},
    {"deflate: no context takeover (RFC 7692 §7.1.1)",
     2,
     0,
     0,
     0,
     {{0xC1, P("compress me compress me compress me compress me compress me four"), 0, 0, 0, 0, 1},
      {0xC1, P("compress me compress me compress me compress me compress me four"), 0, 0, 0, 0, 1}},
     0,
     NULL,
     "zT:compress me compress me compress me compress me compress me four|"
     "zT:compress me compress me compress me compress me compress me four|"},
    {"deflate: compressed message in fragments (RFC 7692 §6.1)",
     1,
     0,
     0,
     0,
     {{0x41, P("\xf2\x48\xcd\xc9"), 0, 0, 0, 0, 0, 1}, {0x80, P("\xc9\x07\x00"), 0, 0, 0, 0, 0, 1}},
     0,
     "T:Hello|",
     "T:Hello|"},
    {"deflate: uncompressed message on a deflate connection (RFC 7692 §6)",
     1,
     0,
     0,
     0,
     {{0x81, P("plain")}},
     0,
     "T:plain|",
     "T:plain|"},
    {"deflate: BFINAL block then tail (RFC 7692 §7.2.3.3)",
     1,
     0,
     0,
     0,
     {{0xC1, P("\xf3\x48\xcd\xc9\xc9\x07\x00"), 0, 0, 0, 0, 0, 1}},
     0,
     "T:Hello|",
     "T:Hello|"},
    {"deflate: empty compressed message, one 00 byte (RFC 7692 §7.2.3.6)",
     1,
     0,
     0,
     0,
     {{0xC2, P("\x00"), 0, 0, 0, 0, 0, 1}},
     0,
     "B:|",
     "B:|"},
    {"deflate: max-size message inflates exactly to the limit (RFC 7692 §8.1)",
     1,
     1000,
     0,
     0,
     {{0xC2, NULL, 0, 0, 0, 0, 1000, 1}},
     0,
     "B1000:%00%00%00%00%00%00%00%00|",
     "zB1000|"},
    {"echo fragmented by the writer (§5.4)",
     0,
     0,
     2,
     0,
     {{0x81, P("Hello")}},
     0,
     "T:Hello|",
     "++T:Hello|"},
    {"app answers 1006, which may not be sent: 1011 (§7.4.1)",
     0,
     0,
     0,
     1006,
     {{0x81, P("y")}},
     1011,
     "T:y|",
     "T:y|close:1011:internal error|"},
    {"app refuses a message with 1003 (§7.4.1)",
     0,
     0,
     0,
     1003,
     {{0x82, P("x")}, {0x81, P("y")}},
     1003,
     "B:x|",
     "B:x|close:1003:unsupported data|"},

    /* Negative: RFC 6455 §5.1 masking. */
    {"§5.1 unmasked text frame",
     0,
     0,
     0,
     0,
     {{0x81, P("Hi"), 1}},
     1002,
     "",
     "close:1002:unmasked client frame|"},
    {"§5.1 unmasked ping", 0, 0, 0, 0, {{0x89, P(""), 1}}, 1002, "", NULL},
    {"§5.1 unmasked close", 0, 0, 0, 0, {{0x88, P("\x03\xe8"), 1}}, 1002, "", NULL},
    {"§5.1 unmasked continuation after a masked start",
     0,
     0,
     0,
     0,
     {{0x01, P("a")}, {0x80, P("b"), 1}},
     1002,
     "",
     NULL},
    {"§5.3 bad mask key garbles text into invalid UTF-8",
     0,
     0,
     0,
     0,
     {{0x81, P("ok"), 0, 0, 0, 0, 0, 0, 1}},
     1007,
     "",
     NULL},
    /* §5.2 reserved bits and opcodes. */
    {"§5.2 RSV1 without an extension",
     0,
     0,
     0,
     0,
     {{0xC1, P("x")}},
     1002,
     "",
     "close:1002:RSV1 set without an extension|"},
    {"§5.2 RSV2 set", 0, 0, 0, 0, {{0xA1, P("x")}}, 1002, "", NULL},
    {"§5.2 RSV3 set", 0, 0, 0, 0, {{0x91, P("x")}}, 1002, "", NULL},
    {"§5.2 RSV2 set with deflate negotiated", 1, 0, 0, 0, {{0xA1, P("x")}}, 1002, "", NULL},
    {"§5.2 reserved data opcode 3", 0, 0, 0, 0, {{0x83, P("")}}, 1002, "", NULL},
    {"§5.2 reserved data opcode 7", 0, 0, 0, 0, {{0x87, P("")}}, 1002, "", NULL},
    {"§5.2 reserved control opcode 0xB", 0, 0, 0, 0, {{0x8B, P("")}}, 1002, "", NULL},
    {"§5.2 reserved control opcode 0xF", 0, 0, 0, 0, {{0x8F, P("")}}, 1002, "", NULL},
    {"§5.2 reserved opcode after a good message",
     0,
     0,
     0,
     0,
     {{0x81, P("ok")}, {0x84, P("")}},
     1002,
     "T:ok|",
     "T:ok|close:1002:reserved opcode|"},
    /* §5.2 lengths. */
    {"§5.2 16-bit length under 126 (not minimal)",
     0,
     0,
     0,
     0,
     {{0x82, P("abc"), 0, 16}},
     1002,
     "",
     NULL},
    {"§5.2 64-bit length under 65536 (not minimal)",
     0,
     0,
     0,
     0,
     {{0x82, P("abc"), 0, 64}},
     1002,
     "",
     NULL},
    {"§5.2 16-bit length of 125 (not minimal)",
     0,
     0,
     0,
     0,
     {{0x82, NULL, 0, 0, 16, 0, 125}},
     1002,
     "",
     NULL},
    {"§5.2 64-bit length of 65535 (not minimal)",
     0,
     0,
     0,
     0,
     {{0x82, NULL, 0, 0, 64, 0, 65535}},
     1002,
     "",
     NULL},
    {"§5.2 64-bit length with the MSB set",
     0,
     0,
     0,
     0,
     {{0x82, P(""), 0, 64, 0x8000000000000001ull}},
     1002,
     "",
     NULL},
    /* §5.4 fragmentation. */
    {"§5.4 continuation without a start",
     0,
     0,
     0,
     0,
     {{0x80, P("x")}},
     1002,
     "",
     "close:1002:continuation without start|"},
    {"§5.4 unfinished continuation without a start", 0, 0, 0, 0, {{0x00, P("x")}}, 1002, "", NULL},
    {"§5.4 text inside a fragmented text",
     0,
     0,
     0,
     0,
     {{0x01, P("a")}, {0x81, P("b")}},
     1002,
     "",
     NULL},
    {"§5.4 binary inside a fragmented text",
     0,
     0,
     0,
     0,
     {{0x01, P("a")}, {0x02, P("b")}},
     1002,
     "",
     NULL},
    {"§5.4 continuation after the message ended",
     0,
     0,
     0,
     0,
     {{0x81, P("a")}, {0x80, P("b")}},
     1002,
     "T:a|",
     NULL},
    /* §5.5 control frames. */
    {"§5.5 ping of 126 bytes",
     0,
     0,
     0,
     0,
     {{0x89, NULL, 0, 0, 0, 0, 126}},
     1002,
     "",
     "close:1002:control frame over 125|"},
    {"§5.5 close of 126 bytes", 0, 0, 0, 0, {{0x88, NULL, 0, 0, 0, 0, 126}}, 1002, "", NULL},
    {"§5.5 pong with a 64-bit length", 0, 0, 0, 0, {{0x8A, P("x"), 0, 64}}, 1002, "", NULL},
    {"§5.5 fragmented ping",
     0,
     0,
     0,
     0,
     {{0x09, P("a")}},
     1002,
     "",
     "close:1002:fragmented control frame|"},
    {"§5.5 fragmented close", 0, 0, 0, 0, {{0x08, P("\x03\xe8")}}, 1002, "", NULL},
    {"§5.5 fragmented pong inside a fragmented message",
     0,
     0,
     0,
     0,
     {{0x01, P("a")}, {0x0A, P("")}},
     1002,
     "",
     NULL},
    /* §5.5.1 / §7.4 close codes and reasons. */
    {"§5.5.1 close body of one byte",
     0,
     0,
     0,
     0,
     {{0x88, P("\x03")}},
     1002,
     "",
     "close:1002:close body of one byte|"},
    {"§7.4.1 close code 1005 on the wire", 0, 0, 0, 0, {{0x88, P("\x03\xed")}}, 1002, "", NULL},
    {"§7.4.1 close code 1006 on the wire", 0, 0, 0, 0, {{0x88, P("\x03\xee")}}, 1002, "", NULL},
    {"§7.4.1 close code 1004 (reserved)", 0, 0, 0, 0, {{0x88, P("\x03\xec")}}, 1002, "", NULL},
    {"§7.4.1 close code 1015 on the wire", 0, 0, 0, 0, {{0x88, P("\x03\xf7")}}, 1002, "", NULL},
    {"§7.4.2 close code 999", 0, 0, 0, 0, {{0x88, P("\x03\xe7")}}, 1002, "", NULL},
    {"§7.4.2 close code 0", 0, 0, 0, 0, {{0x88, P("\x00\x00")}}, 1002, "", NULL},
    {"§7.4.2 close code 2000", 0, 0, 0, 0, {{0x88, P("\x07\xd0")}}, 1002, "", NULL},
    {"§7.4.2 close code 2999", 0, 0, 0, 0, {{0x88, P("\x0b\xb7")}}, 1002, "", NULL},
    {"§7.4.2 close code 5000", 0, 0, 0, 0, {{0x88, P("\x13\x88")}}, 1002, "", NULL},
    {"§7.4.2 close code 65535", 0, 0, 0, 0, {{0x88, P("\xff\xff")}}, 1002, "", NULL},
    {"§5.5.1 close reason not UTF-8",
     0,
     0,
     0,
     0,
     {{0x88, P("\x03\xe8\xce")}},
     1007,
     "",
     "close:1007:close reason is not UTF-8|"},
    {"§5.5.1 close reason with a surrogate",
     0,
     0,
     0,
     0,
     {{0x88, P("\x03\xe8\xed\xa0\x80")}},
     1007,
     "",
     NULL},
    /* §8.1 UTF-8. */
    {"§8.1 invalid byte 0xff in text",
     0,
     0,
     0,
     0,
     {{0x81, P("a\xff")}},
     1007,
     "",
     "close:1007:text is not UTF-8|"},
    {"§8.1 overlong 2-byte form", 0, 0, 0, 0, {{0x81, P("\xc0\xaf")}}, 1007, "", NULL},
    {"§8.1 overlong 3-byte form", 0, 0, 0, 0, {{0x81, P("\xe0\x80\xaf")}}, 1007, "", NULL},
    {"§8.1 overlong 4-byte form", 0, 0, 0, 0, {{0x81, P("\xf0\x80\x80\xaf")}}, 1007, "", NULL},
    {"§8.1 UTF-16 surrogate", 0, 0, 0, 0, {{0x81, P("\xed\xa0\x80")}}, 1007, "", NULL},
    {"§8.1 code point above U+10FFFF", 0, 0, 0, 0, {{0x81, P("\xf4\x90\x80\x80")}}, 1007, "", NULL},
    {"§8.1 lone continuation byte", 0, 0, 0, 0, {{0x81, P("\x80")}}, 1007, "", NULL},
    {"§8.1 truncated sequence at the end of the message",
     0,
     0,
     0,
     0,
     {{0x81, P("ok\xe2\x82")}},
     1007,
     "",
     NULL},
    {"§8.1 invalid across a fragment boundary",
     0,
     0,
     0,
     0,
     {{0x01, P("\xf0\x90")}, {0x80, P("\x80\x28")}},
     1007,
     "",
     NULL},
    {"§8.1 truncated at the end of fragments",
     0,
     0,
     0,
     0,
     {{0x01, P("a")}, {0x80, P("\xce")}},
     1007,
     "",
     NULL},
    {"§8.1 fails fast: bad byte in an unfinished fragment",
     0,
     0,
     0,
     0,
     {{0x01, P("ok\xc1")}},
     1007,
     "",
     NULL},
    {"§8.1 fails fast: bad byte before the frame's end",
     0,
     0,
     0,
     0,
     {{0x81, P("\xfe"), 0, 0, 100}},
     1007,
     "",
     NULL},
    {"§8.1 binary messages are not checked, text after it is",
     0,
     0,
     0,
     0,
     {{0x82, P("\xff")}, {0x81, P("\xff")}},
     1007,
     "B:%ff|",
     NULL},
    /* §10.4 message size. */
    {"§10.4 single frame over the limit, refused at its header",
     0,
     100,
     0,
     0,
     {{0x82, P(""), 0, 0, 101}},
     1009,
     "",
     "close:1009:message too big|"},
    {"§10.4 fragments adding up past the limit",
     0,
     100,
     0,
     0,
     {{0x02, NULL, 0, 0, 0, 0, 60}, {0x80, NULL, 0, 0, 0, 0, 41}},
     1009,
     "",
     NULL},
    {"§10.4 2^63-1 bytes announced",
     0,
     0,
     0,
     0,
     {{0x82, P(""), 0, 64, 0x7fffffffffffffffull}},
     1009,
     "",
     NULL},
    /* RFC 7692. */
    {"RFC 7692 §6.1 RSV1 on a continuation frame",
     1,
     0,
     0,
     0,
     {{0x41, P("\xf2\x48"), 0, 0, 0, 0, 0, 1}, {0xC0, P("\x00"), 0, 0, 0, 0, 0, 1}},
     1002,
     "",
     "close:1002:RSV1 on a continuation frame|"},
    {"RFC 7692 §6.1 RSV1 on a ping", 1, 0, 0, 0, {{0xC9, P("")}}, 1002, "", NULL},
    {"RFC 7692 §6.1 RSV1 on a close", 1, 0, 0, 0, {{0xC8, P("\x03\xe8")}}, 1002, "", NULL},
    {"RFC 7692 §6.2 data that is not DEFLATE",
     1,
     0,
     0,
     0,
     {{0xC2, P("\xff\xff\xff\xff"), 0, 0, 0, 0, 0, 1}},
     1007,
     "",
     "close:1007:invalid compressed data|"},
    {"RFC 7692 §7.2.3.6 empty compressed payload (not one 00 byte)",
     1,
     0,
     0,
     0,
     {{0xC2, P(""), 0, 0, 0, 0, 0, 1}},
     1007,
     "",
     NULL},
    {"RFC 7692 §7.2.1 compressed message ending inside a block",
     1,
     0,
     0,
     0,
     {{0xC1, P("\xf2\x48"), 0, 0, 0, 0, 0, 1}},
     1007,
     "",
     NULL},
    {"RFC 7692 §7.2.2 stored block longer than the message",
     1,
     0,
     0,
     0,
     {{0xC2,
       P("\x00\x05\x00\xfa\xff"
         "ab"),
       0, 0, 0, 0, 0, 1},
      {0x82, P("x")}},
     1007,
     "",
     NULL},
    {"RFC 7692 §8.1 deflate bomb stops at the limit",
     1,
     1000,
     0,
     0,
     {{0xC2, NULL, 0, 0, 0, 0, 1001, 1}},
     1009,
     "",
     "close:1009:message too big|"},
    {"RFC 7692 §8.1 deflate bomb of 64 MiB against 1 MiB",
     1,
     0,
     0,
     0,
     {{0xC2, NULL, 0, 0, 0, 0, 64u << 20, 1}},
     1009,
     "",
     NULL},
    {"RFC 7692 §8.1 compressed text not UTF-8 after inflation",
     1,
     0,
     0,
     0,
     {{0xC1, P("ok\xff"), 0, 0, 0, 0, 1}},
     1007,
     "",
     NULL},
};

/* Compressed payloads of rows with `compress` are made per run with a fresh client
 * deflater; raw rows are sent as given. */
static void build_input(const wcase *c, pp_buf *in) {
  z_stream z;
  memset(&z, 0, sizeof z);
  CU_ASSERT_FATAL(deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) ==
                  Z_OK);
  pp_buf comp, zeros;
  pp_buf_init(&comp);
  pp_buf_init(&zeros);
  for (int k = 0; k < 6 && (c->f[k].b0 || c->f[k].len || c->f[k].zeros || c->f[k].claimed); k++) {
    const fspec *f = &c->f[k];
    const uint8_t *p = (const uint8_t *)f->payload;
    size_t n = f->len;
    if (!p) {
      zeros.len = 0;
      pp_buf_reserve(&zeros, f->zeros);
      memset(zeros.data, 0, f->zeros);
      zeros.len = f->zeros;
      p = zeros.data ? zeros.data : (const uint8_t *)"";
      n = f->zeros;
    }
    if (f->compress) {
      client_deflate(&z, p, n, &comp);
      if (c->pmd == 2) deflateReset(&z);
      p = comp.data;
      n = comp.len;
    }
    if (f->badmask) {
      uint8_t bad[16];
      for (size_t i = 0; i < n && i < sizeof bad; i++)
        bad[i] = (uint8_t)(p[i] ^ mask_key[i & 3] ^ 0x80);
      pp_buf_append(in, (uint8_t[]){f->b0, (uint8_t)(0x80 | n)}, 2);
      pp_buf_append(in, mask_key, 4);
      pp_buf_append(in, bad, n);
      continue;
    }
    put_frame(in, f->b0, f->unmasked, f->lenenc, f->claimed, p, n);
  }
  deflateEnd(&z);
  pp_buf_dispose(&comp);
  pp_buf_dispose(&zeros);
}

typedef struct outcome {
  int fail_code;
  pp_buf events, out;
} outcome;

static const pp_ws_pmd_params pmd_takeover = {0, 0, 15, 15};
static const pp_ws_pmd_params pmd_reset = {1, 1, 15, 15};

/* Feeds in[0..n) split at the given cuts (ascending, 0-terminated list of positions). */
static void run(const wcase *c, const uint8_t *in, size_t n, const size_t *cuts, size_t ncuts,
                outcome *o) {
  pp_ws_limits lim;
  pp_ws_limits_default(&lim);
  if (c->max_message) lim.max_message_bytes = c->max_message;
  lim.fragment_bytes = c->fragment_bytes;
  pp_ws_pmd_config cfg;
  pp_ws_pmd_config_default(&cfg);
  cfg.compress_min_bytes = 64;
  owner ow = {{0}, 1, c->reply_code};
  pp_buf_init(&ow.events);
  pp_ws ws;
  const pp_ws_pmd_params *pmd = c->pmd == 1 ? &pmd_takeover : c->pmd == 2 ? &pmd_reset : NULL;
  CU_ASSERT_FATAL(pp_ws_init(&ws, &cbs, &lim, pmd, &cfg, &ow) == 0);
  size_t at = 0;
  o->fail_code = 0;
  for (size_t k = 0; k <= ncuts; k++) {
    size_t end = k < ncuts ? cuts[k] : n;
    if (end < at) continue;
    /* an exact-size heap copy, so ASan sees reads past the piece */
    uint8_t *piece = malloc(end - at + 1);
    memcpy(piece, in + at, end - at);
    ssize_t r = pp_ws_feed(&ws, piece, end - at);
    free(piece);
    if (r < 0) {
      CU_ASSERT_EQUAL(r, PP_WS_EPROTO);
      o->fail_code = ws.fail_code;
      CU_ASSERT_EQUAL(ws.state, PP_WS_CLOSED);
      /* sticky */
      CU_ASSERT_EQUAL(pp_ws_feed(&ws, (const uint8_t *)"\x81\x80", 2), PP_WS_EPROTO);
      break;
    }
    CU_ASSERT_EQUAL((size_t)r, end - at);
    at = end;
  }
  o->events = ow.events;
  pp_buf_init(&o->out);
  const uint8_t *p;
  size_t len = pp_ws_output(&ws, &p);
  z_stream inf;
  memset(&inf, 0, sizeof inf);
  inflateInit2(&inf, -15);
  read_output(p, len, &o->out, &inf, c->pmd == 2);
  inflateEnd(&inf);
  pp_ws_dispose(&ws);
}

static int same(const pp_buf *b, const char *s) {
  return b->len == strlen(s) && (b->len == 0 || memcmp(b->data, s, b->len) == 0);
}

static int is_prefix(const pp_buf *a, const pp_buf *b) {
  return a->len <= b->len && (a->len == 0 || memcmp(a->data, b->data, a->len) == 0);
}

static void show(const char *name, const char *what, const pp_buf *got, const char *want) {
  fprintf(stderr, "\n  %s: %s\n    got  %.*s\n    want %s\n", name, what, (int)got->len,
          got->data ? (const char *)got->data : "", want);
}

static int negatives, positives;

/* Negative cases per RFC section, printed at the end: the section is the name's prefix up to
 * the end of its "§x.y" ("§5.1 ...", "RFC 7692 §6.1 ..."; "§" alone means RFC 6455). */
static struct {
  char section[64];
  int count;
} sections[64];

static void count_negative(const char *name) {
  negatives++;
  const char *sec = strstr(name, "\xc2\xa7"); /* § in UTF-8 */
  if (!sec) return;
  const char *end = sec + 2;
  while (*end && *end != ' ' && *end != ')' && *end != ',')
    end++;
  char key[64];
  if (end - name > 40) end = name + 40;
  if (sec == name)
    snprintf(key, sizeof key, "RFC 6455 %.*s", (int)(end - sec), sec);
  else
    snprintf(key, sizeof key, "%.*s", (int)(end - name), name);
  for (size_t i = 0; i < sizeof sections / sizeof sections[0]; i++) {
    if (sections[i].count == 0) {
      snprintf(sections[i].section, sizeof sections[i].section, "%s", key);
      sections[i].count = 1;
      return;
    }
    if (strcmp(sections[i].section, key) == 0) {
      sections[i].count++;
      return;
    }
  }
}

static void test_frame_table(void) {
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
    const wcase *c = &cases[ci];
    if (c->fail_code && !c->reply_code)
      count_negative(c->name);
    else
      positives++;
    pp_buf in;
    pp_buf_init(&in);
    build_input(c, &in);
    outcome whole;
    run(c, in.data, in.len, NULL, 0, &whole);
    if (whole.fail_code != c->fail_code)
      fprintf(stderr, "\n  %s: fail code %d, want %d\n", c->name, whole.fail_code, c->fail_code);
    CU_ASSERT_EQUAL(whole.fail_code, c->fail_code);
    if (c->events && !same(&whole.events, c->events)) {
      show(c->name, "events", &whole.events, c->events);
      CU_FAIL("events");
    }
    if (c->out && !same(&whole.out, c->out)) {
      show(c->name, "output", &whole.out, c->out);
      CU_FAIL("output");
    }
    if (c->fail_code) {
      /* the failure's Close is the last thing sent, with the code */
      char want[16];
      snprintf(want, sizeof want, "close:%d:", c->fail_code);
      const char *last = NULL;
      for (size_t i = 0; i + strlen(want) <= whole.out.len; i++)
        if (memcmp(whole.out.data + i, want, strlen(want)) == 0)
          last = (const char *)whole.out.data + i;
      CU_ASSERT(last != NULL);
    }
    /* Split: byte by byte (inputs up to 4 KiB), and in two at every point (up to 600). */
    if (in.len <= 4096) {
      size_t *cuts = malloc(in.len * sizeof *cuts + 1);
      for (size_t i = 0; i < in.len; i++)
        cuts[i] = i + 1;
      outcome bytes;
      run(c, in.data, in.len, cuts, in.len, &bytes);
      CU_ASSERT_EQUAL(bytes.fail_code, whole.fail_code);
      CU_ASSERT(bytes.events.len == whole.events.len && is_prefix(&bytes.events, &whole.events));
      CU_ASSERT(bytes.out.len == whole.out.len && is_prefix(&bytes.out, &whole.out));
      pp_buf_dispose(&bytes.events);
      pp_buf_dispose(&bytes.out);
      free(cuts);
    }
    for (size_t cut = 1; in.len <= 600 && cut < in.len; cut++) {
      outcome two;
      run(c, in.data, in.len, &cut, 1, &two);
      CU_ASSERT_EQUAL(two.fail_code, whole.fail_code);
      CU_ASSERT(two.events.len == whole.events.len && is_prefix(&two.events, &whole.events));
      CU_ASSERT(two.out.len == whole.out.len && is_prefix(&two.out, &whole.out));
      pp_buf_dispose(&two.events);
      pp_buf_dispose(&two.out);
      /* Every truncated prefix: a prefix of the events, no failure but the row's. */
      outcome pre;
      run(c, in.data, cut, NULL, 0, &pre);
      CU_ASSERT(pre.fail_code == 0 || pre.fail_code == whole.fail_code);
      if (pre.fail_code == 0) CU_ASSERT(is_prefix(&pre.events, &whole.events));
      pp_buf_dispose(&pre.events);
      pp_buf_dispose(&pre.out);
    }
    pp_buf_dispose(&whole.events);
    pp_buf_dispose(&whole.out);
    pp_buf_dispose(&in);
  }
}

/* --- UTF-8 against a naive reference ---------------------------------------------------- */

/* Decodes one scalar value the slow way; returns its length or 0 if invalid. */
static size_t ref_utf8_one(const uint8_t *p, size_t n) {
  if (p[0] < 0x80) return 1;
  size_t len = p[0] >= 0xF0 ? 4 : p[0] >= 0xE0 ? 3 : p[0] >= 0xC0 ? 2 : 0;
  if (!len || len > n || p[0] >= 0xF8) return 0;
  uint32_t cp = p[0] & (0x7F >> len);
  for (size_t i = 1; i < len; i++) {
    if ((p[i] & 0xC0) != 0x80) return 0;
    cp = cp << 6 | (p[i] & 0x3F);
  }
  static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < min[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}
static int ref_utf8(const uint8_t *p, size_t n) {
  size_t i = 0;
  while (i < n) {
    size_t l = ref_utf8_one(p + i, n - i);
    if (!l) return 0;
    i += l;
  }
  return 1;
}

static void test_utf8_differential(void) {
  uint8_t b[4];
  size_t mismatches = 0, checked = 0;
  /* every 1-, 2- and 3-byte string, and 4-byte strings with a lead byte of F0..F4 or C2..DF */
  for (uint32_t v = 0; v < 256; v++) {
    b[0] = (uint8_t)v;
    mismatches += pp_ws_utf8_valid(b, 1) != ref_utf8(b, 1);
    checked++;
  }
  for (uint32_t v = 0; v < 65536; v++) {
    b[0] = (uint8_t)(v >> 8), b[1] = (uint8_t)v;
    mismatches += pp_ws_utf8_valid(b, 2) != ref_utf8(b, 2);
    checked++;
  }
  for (uint32_t v = 0; v < (1u << 24); v += 1) {
    b[0] = (uint8_t)(v >> 16), b[1] = (uint8_t)(v >> 8), b[2] = (uint8_t)v;
    if (b[0] < 0xC0 && (v & 0xFF) != 0) continue; /* keep the run short */
    mismatches += pp_ws_utf8_valid(b, 3) != ref_utf8(b, 3);
    checked++;
  }
  uint32_t seed = 1;
  for (int k = 0; k < 2000000; k++) {
    seed = seed * 1103515245u + 12345u;
    b[0] = (uint8_t)(0xF0 + (seed >> 28) % 6);
    b[1] = (uint8_t)(seed >> 8), b[2] = (uint8_t)(seed >> 16), b[3] = (uint8_t)(seed >> 4);
    int want = ref_utf8(b, 4);
    mismatches += pp_ws_utf8_valid(b, 4) != want;
    /* and incrementally, one byte at a time, failing no later than the reference */
    uint32_t st = 0;
    for (int i = 0; i < 4; i++)
      st = pp_ws_utf8_feed(st, b + i, 1);
    mismatches += (st == 0) != want;
    checked++;
  }
  CU_ASSERT_EQUAL(mismatches, 0);
  CU_ASSERT(checked > 2000000);
  /* fail fast: the state is BAD at the first byte that cannot continue */
  CU_ASSERT_EQUAL(pp_ws_utf8_feed(0, (const uint8_t *)"\xe0\x80", 2), PP_WS_UTF8_BAD);
  CU_ASSERT_EQUAL(pp_ws_utf8_feed(0, (const uint8_t *)"\xf4\x90", 2), PP_WS_UTF8_BAD);
  CU_ASSERT(pp_ws_utf8_feed(0, (const uint8_t *)"abcdefgh\xe2\x82", 10) != 0);
  CU_ASSERT(pp_ws_utf8_valid((const uint8_t *)"abcdefghijklmnop\xe2\x82\xac", 19));
}

/* --- the handshake ---------------------------------------------------------------------- */

typedef struct hscase {
  const char *name;
  pp_ws_hs_kind kind;
  const char *method;
  int minor;
  const char *fields; /* "name: value\n" lines */
  int status;
  const char *response; /* expected response fields, or NULL not to check */
} hscase;

#define H1_OK                                                                                      \
  "Host: x\nUpgrade: websocket\nConnection: Upgrade\nSec-WebSocket-Key: "                          \
  "dGhlIHNhbXBsZSBub25jZQ==\n"
#define H2_OK                                                                                      \
  ":method: CONNECT\n:protocol: websocket\n:scheme: https\n:path: /chat\n:authority: x\n"

static const hscase hscases[] = {
    {"RFC 6455 §1.3 example", PP_WS_HS_HTTP1, "GET", 1, H1_OK "Sec-WebSocket-Version: 13\n", 0,
     "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: "
     "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"},
    {"token lists and case (§4.2.1)", PP_WS_HS_HTTP1, "GET", 1,
     "Upgrade: foo, WebSocket\nConnection: keep-alive, UPGRADE\nSec-WebSocket-Key: "
     "dGhlIHNhbXBsZSBub25jZQ==\nSec-WebSocket-Version: 13\n",
     0, NULL},
    {"permessage-deflate accepted (RFC 7692 §5)", PP_WS_HS_HTTP1, "GET", 1,
     H1_OK "Sec-WebSocket-Version: 13\nSec-WebSocket-Extensions: permessage-deflate; "
           "client_max_window_bits\n",
     0,
     "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: "
     "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"
     "Sec-WebSocket-Extensions: permessage-deflate\r\n"},
    {"extensions over two lines (RFC 6455 §9.1)", PP_WS_HS_HTTP1, "GET", 1,
     H1_OK "Sec-WebSocket-Version: 13\nSec-WebSocket-Extensions: x-foo\nSec-WebSocket-Extensions: "
           "permessage-deflate; server_no_context_takeover\n",
     0,
     "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: "
     "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"
     "Sec-WebSocket-Extensions: permessage-deflate; server_no_context_takeover\r\n"},
    {"§4.2.1 method POST", PP_WS_HS_HTTP1, "POST", 1, H1_OK "Sec-WebSocket-Version: 13\n", 400, ""},
    {"§4.2.1 method get in lower case", PP_WS_HS_HTTP1, "get", 1,
     H1_OK "Sec-WebSocket-Version: 13\n", 400, NULL},
    {"§4.2.1 HTTP/1.0", PP_WS_HS_HTTP1, "GET", 0, H1_OK "Sec-WebSocket-Version: 13\n", 400, NULL},
    {"§4.2.1 no Upgrade", PP_WS_HS_HTTP1, "GET", 1,
     "Connection: Upgrade\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\nSec-WebSocket-Version: "
     "13\n",
     400, NULL},
    {"§4.2.1 Upgrade: h2c", PP_WS_HS_HTTP1, "GET", 1,
     "Upgrade: h2c\nConnection: Upgrade\nSec-WebSocket-Key: "
     "dGhlIHNhbXBsZSBub25jZQ==\nSec-WebSocket-Version: 13\n",
     400, NULL},
    {"§4.2.1 Connection without upgrade", PP_WS_HS_HTTP1, "GET", 1,
     "Upgrade: websocket\nConnection: keep-alive\nSec-WebSocket-Key: "
     "dGhlIHNhbXBsZSBub25jZQ==\nSec-WebSocket-Version: 13\n",
     400, NULL},
    {"§4.2.1 Connection: upgraded is not upgrade", PP_WS_HS_HTTP1, "GET", 1,
     "Upgrade: websocket\nConnection: upgraded\nSec-WebSocket-Key: "
     "dGhlIHNhbXBsZSBub25jZQ==\nSec-WebSocket-Version: 13\n",
     400, NULL},
    {"§4.2.1 no Sec-WebSocket-Key", PP_WS_HS_HTTP1, "GET", 1,
     "Upgrade: websocket\nConnection: Upgrade\nSec-WebSocket-Version: 13\n", 400, NULL},
    {"§4.2.1 key of 15 bytes", PP_WS_HS_HTTP1, "GET", 1,
     "Upgrade: websocket\nConnection: Upgrade\nSec-WebSocket-Key: "
     "AAAAAAAAAAAAAAAAAAAA\nSec-WebSocket-Version: 13\n",
     400, NULL},
    {"§4.2.1 key not base64", PP_WS_HS_HTTP1, "GET", 1,
     "Upgrade: websocket\nConnection: Upgrade\nSec-WebSocket-Key: "
     "dGhlIHNhbXBsZSBub25jZ*==\nSec-WebSocket-Version: 13\n",
     400, NULL},
    {"§4.2.1 two keys", PP_WS_HS_HTTP1, "GET", 1,
     H1_OK "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\nSec-WebSocket-Version: 13\n", 400, NULL},
    {"§4.4 version 8", PP_WS_HS_HTTP1, "GET", 1, H1_OK "Sec-WebSocket-Version: 8\n", 426,
     "Sec-WebSocket-Version: 13\r\n"},
    {"§4.4 no version", PP_WS_HS_HTTP1, "GET", 1, H1_OK, 426, "Sec-WebSocket-Version: 13\r\n"},
    {"§4.4 version 13 twice", PP_WS_HS_HTTP1, "GET", 1,
     H1_OK "Sec-WebSocket-Version: 13\nSec-WebSocket-Version: 13\n", 400, NULL},
    {"§9.1 malformed extensions", PP_WS_HS_HTTP1, "GET", 1,
     H1_OK "Sec-WebSocket-Version: 13\nSec-WebSocket-Extensions: permessage-deflate;;\n", 400,
     NULL},
    {"RFC 8441 §4 extended CONNECT", PP_WS_HS_CONNECT, NULL, 0, H2_OK "sec-websocket-version: 13\n",
     0, ""},
    {"RFC 8441 §4 extended CONNECT with deflate", PP_WS_HS_CONNECT, NULL, 0,
     H2_OK "sec-websocket-version: 13\nsec-websocket-extensions: permessage-deflate\n", 0,
     "Sec-WebSocket-Extensions: permessage-deflate\r\n"},
    {"RFC 8441 §4 no :protocol (a plain CONNECT)", PP_WS_HS_CONNECT, NULL, 0,
     ":method: CONNECT\n:authority: x\nsec-websocket-version: 13\n", 400, NULL},
    {"RFC 8441 §4 :protocol webtransport", PP_WS_HS_CONNECT, NULL, 0,
     ":method: CONNECT\n:protocol: webtransport\n:scheme: https\n:path: /\n:authority: "
     "x\nsec-websocket-version: 13\n",
     400, NULL},
    {"RFC 8441 §4 :method GET with :protocol", PP_WS_HS_CONNECT, NULL, 0,
     ":method: GET\n:protocol: websocket\n:scheme: https\n:path: /\n:authority: "
     "x\nsec-websocket-version: 13\n",
     400, NULL},
    {"RFC 8441 §4 no :path", PP_WS_HS_CONNECT, NULL, 0,
     ":method: CONNECT\n:protocol: websocket\n:scheme: https\n:authority: "
     "x\nsec-websocket-version: 13\n",
     400, NULL},
    {"RFC 8441 §4 no :scheme", PP_WS_HS_CONNECT, NULL, 0,
     ":method: CONNECT\n:protocol: websocket\n:path: /\n:authority: x\nsec-websocket-version: 13\n",
     400, NULL},
    {"RFC 8441 §5 no :authority", PP_WS_HS_CONNECT, NULL, 0,
     ":method: CONNECT\n:protocol: websocket\n:scheme: https\n:path: /\nsec-websocket-version: "
     "13\n",
     400, NULL},
    {"RFC 8441 §5 version 12", PP_WS_HS_CONNECT, NULL, 0, H2_OK "sec-websocket-version: 12\n", 426,
     "Sec-WebSocket-Version: 13\r\n"},
    {"RFC 8441 §5 / RFC 9113 §8.2.2 Upgrade field", PP_WS_HS_CONNECT, NULL, 0,
     H2_OK "upgrade: websocket\nsec-websocket-version: 13\n", 400, NULL},
    {"RFC 9220 §3 the same over HTTP/3", PP_WS_HS_CONNECT, NULL, 0,
     H2_OK "sec-websocket-version: 13\n", 0, ""},
};

static void test_handshake(void) {
  pp_ws_pmd_config cfg;
  pp_ws_pmd_config_default(&cfg);
  for (size_t i = 0; i < sizeof hscases / sizeof hscases[0]; i++) {
    const hscase *c = &hscases[i];
    if (c->status)
      count_negative(c->name);
    else
      positives++;
    pp_ws_handshake hs;
    pp_ws_handshake_init(&hs, c->kind);
    if (c->method)
      pp_ws_handshake_request_line(&hs, (const uint8_t *)c->method, strlen(c->method), 1, c->minor);
    const char *p = c->fields;
    while (*p) {
      const char *colon = strchr(p + 1, ':'), *nl = strchr(p, '\n');
      pp_ws_handshake_field(&hs, (const uint8_t *)p, (size_t)(colon - p),
                            (const uint8_t *)colon + 1, (size_t)(nl - colon - 1));
      p = nl + 1;
    }
    int st = pp_ws_handshake_check(&hs, &cfg);
    if (st != c->status)
      fprintf(stderr, "\n  %s: status %d (%s), want %d\n", c->name, st, hs.reason, c->status);
    CU_ASSERT_EQUAL(st, c->status);
    CU_ASSERT_EQUAL(hs.status, c->status);
    if (c->response) {
      pp_buf r;
      pp_buf_init(&r);
      pp_ws_handshake_response_fields(&hs, &r);
      if (!same(&r, c->response)) {
        show(c->name, "response", &r, c->response);
        CU_FAIL("response");
      }
      pp_buf_dispose(&r);
    }
    pp_ws_handshake_dispose(&hs);
  }
  char acc[29];
  CU_ASSERT_EQUAL(pp_ws_accept_key((const uint8_t *)"dGhlIHNhbXBsZSBub25jZQ==", 24, acc), 0);
  CU_ASSERT_STRING_EQUAL(acc, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

/* --- permessage-deflate negotiation ------------------------------------------------- */

typedef struct pmdcase {
  const char *name;
  const char *offer;
  int rc;               /* 1 accepted, 0 declined, PP_WS_EBADHEADER */
  const char *response; /* when accepted */
  int snct, cnct, sbits, cbits;
  int cfg_sbits, cfg_cbits, cfg_snct; /* 0 = default */
} pmdcase;

static const pmdcase pmdcases[] = {
    {"plain offer", "permessage-deflate", 1, "permessage-deflate", 0, 0, 15, 15},
    {"client_max_window_bits without value", "permessage-deflate; client_max_window_bits", 1,
     "permessage-deflate", 0, 0, 15, 15},
    {"we ask the client for a smaller window", "permessage-deflate; client_max_window_bits", 1,
     "permessage-deflate; client_max_window_bits=10", 0, 0, 15, 10, 0, 10},
    {"client_max_window_bits=12 is taken", "permessage-deflate; client_max_window_bits=12", 1,
     "permessage-deflate; client_max_window_bits=12", 0, 0, 15, 12},
    {"server_max_window_bits=10 is kept", "permessage-deflate; server_max_window_bits=10", 1,
     "permessage-deflate; server_max_window_bits=10", 0, 0, 10, 15},
    {"both no_context_takeover",
     "permessage-deflate; server_no_context_takeover; client_no_context_takeover", 1,
     "permessage-deflate; server_no_context_takeover; client_no_context_takeover", 1, 1, 15, 15},
    {"our smaller window is announced", "permessage-deflate", 1,
     "permessage-deflate; server_max_window_bits=12", 0, 0, 12, 15, 12},
    {"we reset our compressor on our own", "permessage-deflate", 1,
     "permessage-deflate; server_no_context_takeover", 1, 0, 15, 15, 0, 0, 1},
    {"quoted value (§9.1)", "permessage-deflate; client_max_window_bits=\"10\"", 1,
     "permessage-deflate; client_max_window_bits=10", 0, 0, 15, 10},
    {"first acceptable offer wins",
     "permessage-deflate; foo, permessage-deflate; server_max_window_bits=11", 1,
     "permessage-deflate; server_max_window_bits=11", 0, 0, 11, 15},
    {"other extensions are skipped", "x-webkit-deflate-frame, permessage-deflate", 1,
     "permessage-deflate", 0, 0, 15, 15},
    {"no permessage-deflate", "x-foo; bar=1", 0},
    {"RFC 7692 §7.1 unknown parameter", "permessage-deflate; foo", 0},
    {"RFC 7692 §7.1 parameter twice",
     "permessage-deflate; client_no_context_takeover; client_no_context_takeover", 0},
    {"RFC 7692 §7.1.1.1 server_no_context_takeover with a value",
     "permessage-deflate; server_no_context_takeover=1", 0},
    {"RFC 7692 §7.1.1.2 client_no_context_takeover with a value",
     "permessage-deflate; client_no_context_takeover=1", 0},
    {"RFC 7692 §7.1.2.1 server_max_window_bits without value",
     "permessage-deflate; server_max_window_bits", 0},
    {"RFC 7692 §7.1.2.1 server_max_window_bits=7", "permessage-deflate; server_max_window_bits=7",
     0},
    {"RFC 7692 §7.1.2.1 server_max_window_bits=16", "permessage-deflate; server_max_window_bits=16",
     0},
    {"RFC 7692 §7.1.2.1 server_max_window_bits=010 (leading zero)",
     "permessage-deflate; server_max_window_bits=010", 0},
    {"RFC 7692 §7.1.2.1 server_max_window_bits=8 (zlib cannot)",
     "permessage-deflate; server_max_window_bits=8", 0},
    {"RFC 7692 §7.1.2.2 client_max_window_bits=0", "permessage-deflate; client_max_window_bits=0",
     0},
    {"RFC 7692 §7.1.2.2 client_max_window_bits=abc",
     "permessage-deflate; client_max_window_bits=abc", 0},
    {"RFC 6455 §9.1 empty parameter", "permessage-deflate; ", PP_WS_EBADHEADER},
    {"RFC 6455 §9.1 unterminated quoted string", "permessage-deflate; a=\"10", PP_WS_EBADHEADER},
    {"RFC 6455 §9.1 value not a token", "permessage-deflate; a=@", PP_WS_EBADHEADER},
    {"RFC 6455 §9.1 junk after an extension", "permessage-deflate x", PP_WS_EBADHEADER},
};

static void test_pmd_negotiation(void) {
  for (size_t i = 0; i < sizeof pmdcases / sizeof pmdcases[0]; i++) {
    const pmdcase *c = &pmdcases[i];
    if (c->rc != 1 && strncmp(c->name, "RFC", 3) == 0)
      count_negative(c->name);
    else
      positives++;
    pp_ws_pmd_config cfg;
    pp_ws_pmd_config_default(&cfg);
    if (c->cfg_sbits) cfg.server_max_window_bits = c->cfg_sbits;
    if (c->cfg_cbits) cfg.client_max_window_bits = c->cfg_cbits;
    cfg.server_no_context_takeover = c->cfg_snct;
    pp_ws_pmd_params pp;
    memset(&pp, 0, sizeof pp);
    char resp[128];
    int rc = pp_ws_pmd_negotiate(&cfg, c->offer, strlen(c->offer), &pp, resp, sizeof resp);
    if (rc != c->rc) fprintf(stderr, "\n  %s: rc %d, want %d\n", c->name, rc, c->rc);
    CU_ASSERT_EQUAL(rc, c->rc);
    if (rc == 1 && c->rc == 1) {
      if (strcmp(resp, c->response))
        fprintf(stderr, "\n  %s: '%s', want '%s'\n", c->name, resp, c->response);
      CU_ASSERT_STRING_EQUAL(resp, c->response);
      CU_ASSERT_EQUAL(pp.server_no_context_takeover, c->snct);
      CU_ASSERT_EQUAL(pp.client_no_context_takeover, c->cnct);
      CU_ASSERT_EQUAL(pp.server_max_window_bits, c->sbits);
      CU_ASSERT_EQUAL(pp.client_max_window_bits, c->cbits);
    } else {
      CU_ASSERT_STRING_EQUAL(resp, "");
    }
  }
  /* disabled: never accepted */
  pp_ws_pmd_config off;
  pp_ws_pmd_config_default(&off);
  off.enabled = 0;
  pp_ws_pmd_params pp;
  char resp[128];
  CU_ASSERT_EQUAL(pp_ws_pmd_negotiate(&off, "permessage-deflate", 18, &pp, resp, sizeof resp), 0);
}

/* --- sending, backpressure, the close handshake ------------------------------------- */

static void test_send_api(void) {
  pp_ws_limits lim;
  pp_ws_limits_default(&lim);
  lim.max_pending_bytes = 100;
  lim.fragment_bytes = 0;
  owner ow = {{0}, 0, 0};
  pp_ws ws;
  CU_ASSERT_FATAL(pp_ws_init(&ws, &cbs, &lim, NULL, NULL, &ow) == 0);
  CU_ASSERT_EQUAL(pp_ws_send(&ws, PP_WS_OP_PING, (const uint8_t *)"x", 1), PP_WS_EINVAL);
  CU_ASSERT_EQUAL(pp_ws_send(&ws, PP_WS_OP_TEXT, (const uint8_t *)"\xff", 1), PP_WS_EINVAL);
  uint8_t big[126] = {0};
  CU_ASSERT_EQUAL(pp_ws_ping(&ws, big, 126), PP_WS_EINVAL);
  CU_ASSERT_EQUAL(pp_ws_close(&ws, 1005, NULL, 0), PP_WS_EINVAL);
  CU_ASSERT_EQUAL(pp_ws_close(&ws, 1000, "\xc0\xaf", 2), PP_WS_EINVAL);
  CU_ASSERT_EQUAL(pp_ws_close(&ws, 1000, (const char *)big, 124), PP_WS_EINVAL);
  /* Backpressure: sends are refused once the output holds max_pending_bytes. */
  CU_ASSERT_EQUAL(pp_ws_send(&ws, PP_WS_OP_BINARY, big, 98), 0); /* 2 + 98 = 100 bytes */
  CU_ASSERT_EQUAL(pp_ws_pending(&ws), 100);
  CU_ASSERT_EQUAL(pp_ws_send(&ws, PP_WS_OP_BINARY, big, 1), PP_WS_EFULL);
  CU_ASSERT_EQUAL(pp_ws_ping(&ws, big, 1), PP_WS_EFULL);
  pp_ws_output_consumed(&ws, 60);
  CU_ASSERT_EQUAL(pp_ws_pending(&ws), 40);
  CU_ASSERT_EQUAL(pp_ws_send(&ws, PP_WS_OP_BINARY, big, 1), 0);
  /* A client that pings but never reads: the pong that would pass the bound fails with 1008. */
  pp_buf in;
  pp_buf_init(&in);
  for (int k = 0; k < 4; k++)
    put_frame(&in, 0x89, 0, 0, 0, big, 50);
  CU_ASSERT_EQUAL(pp_ws_feed(&ws, in.data, in.len), PP_WS_EPROTO);
  CU_ASSERT_EQUAL(ws.fail_code, 1008);
  CU_ASSERT_EQUAL(ws.state, PP_WS_CLOSED);
  /* the Close still goes out, past the bound by at most its own size */
  CU_ASSERT(pp_ws_pending(&ws) <= 100 + 127);
  CU_ASSERT_EQUAL(pp_ws_send(&ws, PP_WS_OP_BINARY, big, 1), PP_WS_ECLOSED);
  pp_ws_dispose(&ws);
  pp_buf_dispose(&in);
  pp_buf_dispose(&ow.events);
  count_negative("backpressure: a reader that does not read, 1008"); /* our bound, no RFC rule */
}

static void test_server_initiated_close(void) {
  pp_ws_limits lim;
  pp_ws_limits_default(&lim);
  owner ow = {{0}, 0, 0};
  pp_buf_init(&ow.events);
  pp_ws ws;
  CU_ASSERT_FATAL(pp_ws_init(&ws, &cbs, &lim, NULL, NULL, &ow) == 0);
  CU_ASSERT_EQUAL(pp_ws_close(&ws, 1001, "bye", 3), 0);
  CU_ASSERT_EQUAL(ws.state, PP_WS_CLOSING);
  CU_ASSERT_EQUAL(pp_ws_close(&ws, 1000, NULL, 0), PP_WS_ECLOSED);
  CU_ASSERT_EQUAL(pp_ws_send(&ws, PP_WS_OP_TEXT, (const uint8_t *)"x", 1), PP_WS_ECLOSED);
  pp_buf in;
  pp_buf_init(&in);
  put_frame(&in, 0x81, 0, 0, 0, (const uint8_t *)"dropped", 7);
  put_frame(&in, 0x89, 0, 0, 0, (const uint8_t *)"p", 1);
  put_frame(&in, 0x88, 0, 0, 0, (const uint8_t *)"\x03\xe9", 2);
  CU_ASSERT_EQUAL(pp_ws_feed(&ws, in.data, in.len), (ssize_t)in.len);
  CU_ASSERT_EQUAL(ws.state, PP_WS_CLOSED);
  /* no message delivered while closing, no pong after our Close, one Close on the wire */
  CU_ASSERT(same(&ow.events, "ping:p|close:1001:|"));
  const uint8_t *p;
  size_t n = pp_ws_output(&ws, &p);
  pp_buf t;
  pp_buf_init(&t);
  read_output(p, n, &t, NULL, 0);
  CU_ASSERT(same(&t, "close:1001:bye|"));
  pp_ws_trim(&ws);
  pp_ws_dispose(&ws);
  pp_buf_dispose(&in);
  pp_buf_dispose(&t);
  pp_buf_dispose(&ow.events);
}

/* Deflate round trips through the session: the test client compresses, the session
 * inflates and echoes (compressing), the test inflates; with and without context takeover,
 * with messages of every size class, and the output fragmented. */
static void round_trip(int mode, size_t fragment) {
  pp_ws_limits lim;
  pp_ws_limits_default(&lim);
  lim.max_message_bytes = 1 << 20;
  lim.max_pending_bytes = 16 << 20;
  lim.fragment_bytes = fragment;
  pp_ws_pmd_config cfg;
  pp_ws_pmd_config_default(&cfg);
  cfg.compress_min_bytes = 0;
  owner ow = {{0}, 1, 0};
  pp_buf_init(&ow.events);
  pp_ws ws;
  CU_ASSERT_FATAL(pp_ws_init(&ws, &cbs, &lim, mode == 1 ? &pmd_takeover : &pmd_reset, &cfg, &ow) ==
                  0);
  CU_ASSERT(ws.pmd == NULL); /* no compression state before the first compressed message */
  pp_ws_trim(&ws);
  CU_ASSERT(ws.pmd == NULL);
  z_stream def, inf;
  memset(&def, 0, sizeof def);
  memset(&inf, 0, sizeof inf);
  deflateInit2(&def, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
  inflateInit2(&inf, -15);
  pp_buf in, comp, msg, t, want;
  pp_buf_init(&in);
  pp_buf_init(&comp);
  pp_buf_init(&msg);
  pp_buf_init(&t);
  pp_buf_init(&want);
  static const size_t sizes[] = {0, 1, 64, 1000, 70000, 300000, 1 << 20};
  uint32_t seed = 7;
  size_t wire_second = 0, wire_first = 0;
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    for (int rep = 0; rep < 2; rep++) {
      msg.len = 0;
      pp_buf_reserve(&msg, sizes[k]);
      for (size_t i = 0; i < sizes[k]; i++) {
        seed = seed * 1103515245u + 12345u;
        msg.data[i] = (uint8_t)('a' + (seed >> 16) % 4); /* compressible, not trivially */
      }
      msg.len = sizes[k];
      client_deflate(&def, msg.data, msg.len, &comp);
      if (mode == 2) deflateReset(&def);
      in.len = 0;
      /* in fragments of 1000 compressed bytes */
      size_t off = 0;
      do {
        size_t chunk = comp.len - off < 1000 ? comp.len - off : 1000;
        uint8_t b0 = (uint8_t)((off + chunk == comp.len ? 0x80 : 0) | (off == 0 ? 0x42 : 0x00));
        put_frame(&in, b0, 0, 0, 0, comp.data + off, chunk);
        off += chunk;
      } while (off < comp.len);
      CU_ASSERT_EQUAL(pp_ws_feed(&ws, in.data, in.len), (ssize_t)in.len);
      const uint8_t *p;
      size_t n = pp_ws_output(&ws, &p);
      if (k == 4) {
        if (rep == 0)
          wire_first = n;
        else
          wire_second = n;
      }
      t.len = 0;
      read_output(p, n, &t, &inf, mode == 2);
      pp_ws_output_consumed(&ws, n);
      char w[128];
      if (msg.len > 64)
        snprintf(w, sizeof w, "zB%zu|", msg.len);
      else
        snprintf(w, sizeof w, "zB:%.*s|", (int)msg.len, msg.len ? (const char *)msg.data : "");
      if (fragment) {
        /* "+" per continuation frame of the compressed echo: just check the end */
        CU_ASSERT(t.len >= strlen(w) && memcmp(t.data + t.len - strlen(w), w, strlen(w)) == 0);
      } else {
        if (!same(&t, w)) show("round trip", "output", &t, w);
        CU_ASSERT(same(&t, w));
      }
    }
  }
  (void)wire_first;
  (void)wire_second;
  CU_ASSERT_EQUAL(ws.messages_in, 14);
  CU_ASSERT_EQUAL(ws.messages_out, 14);
  /* context takeover keeps both streams; without it the idle session keeps no state at all */
  CU_ASSERT_FATAL(ws.pmd != NULL);
  pp_ws_trim(&ws);
  if (mode == 1) CU_ASSERT(ws.pmd && ws.pmd->inflater_ready && ws.pmd->deflater_ready);
  if (mode == 2) CU_ASSERT(ws.pmd == NULL);
  pp_ws_dispose(&ws);
  deflateEnd(&def);
  inflateEnd(&inf);
  pp_buf_dispose(&in);
  pp_buf_dispose(&comp);
  pp_buf_dispose(&msg);
  pp_buf_dispose(&t);
  pp_buf_dispose(&want);
  pp_buf_dispose(&ow.events);
}

static void test_deflate_round_trips(void) {
  round_trip(1, 0);
  round_trip(2, 0);
  round_trip(1, 4096);
  round_trip(2, 777);
}

/* With context takeover a repeated message costs a few bytes; without it, its full size. */
static void test_context_takeover_saves(void) {
  size_t second[3];
  for (int mode = 1; mode <= 2; mode++) {
    pp_ws_limits lim;
    pp_ws_limits_default(&lim);
    pp_ws_pmd_config cfg;
    pp_ws_pmd_config_default(&cfg);
    owner ow = {{0}, 0, 0};
    pp_buf_init(&ow.events);
    pp_ws ws;
    CU_ASSERT_FATAL(
        pp_ws_init(&ws, &cbs, &lim, mode == 1 ? &pmd_takeover : &pmd_reset, &cfg, &ow) == 0);
    uint8_t m[2000];
    uint32_t seed = 3;
    for (size_t i = 0; i < sizeof m; i++) {
      seed = seed * 1103515245u + 12345u;
      m[i] = (uint8_t)(seed >> 16);
    }
    CU_ASSERT_EQUAL(pp_ws_send(&ws, PP_WS_OP_BINARY, m, sizeof m), 0);
    size_t first = pp_ws_pending(&ws);
    CU_ASSERT_EQUAL(pp_ws_send(&ws, PP_WS_OP_BINARY, m, sizeof m), 0);
    second[mode] = pp_ws_pending(&ws) - first;
    pp_ws_dispose(&ws);
    pp_buf_dispose(&ow.events);
  }
  CU_ASSERT(second[1] < 100);
  CU_ASSERT(second[2] > 2000);
}

/* The frame writer's length encodings are minimal (§5.2). */
static void test_frame_writer(void) {
  static const size_t lens[] = {0, 125, 126, 65535, 65536};
  static const size_t hdr[] = {2, 2, 4, 4, 10};
  for (size_t i = 0; i < 5; i++) {
    pp_buf b;
    pp_buf_init(&b);
    uint8_t *p = calloc(1, lens[i] + 1);
    pp_ws_frame_write(&b, 1, 0, PP_WS_OP_BINARY, p, lens[i]);
    CU_ASSERT_EQUAL(b.len, hdr[i] + lens[i]);
    CU_ASSERT_EQUAL(b.data[0], 0x82);
    pp_buf t;
    pp_buf_init(&t);
    read_output(b.data, b.len, &t, NULL, 0);
    free(p);
    pp_buf_dispose(&b);
    pp_buf_dispose(&t);
  }
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("ws", NULL, NULL);
  CU_add_test(s, "frame table: every row whole, byte by byte, split, every prefix",
              test_frame_table);
  CU_add_test(s, "UTF-8 against a naive reference", test_utf8_differential);
  CU_add_test(s, "opening handshake: RFC 6455 and extended CONNECT", test_handshake);
  CU_add_test(s, "permessage-deflate negotiation", test_pmd_negotiation);
  CU_add_test(s, "send API, backpressure, a reader that does not read", test_send_api);
  CU_add_test(s, "server-initiated close handshake", test_server_initiated_close);
  CU_add_test(s, "deflate round trips with and without context takeover", test_deflate_round_trips);
  CU_add_test(s, "context takeover makes a repeated message small", test_context_takeover_saves);
  CU_add_test(s, "frame writer lengths", test_frame_writer);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failures = CU_get_number_of_failures();
  printf("ws: %d negative and %d positive table cases\n", negatives, positives);
  for (size_t i = 0; i < sizeof sections / sizeof sections[0] && sections[i].count; i++)
    printf("  negative %-22s %d\n", sections[i].section, sections[i].count);
  CU_cleanup_registry();
  return failures ? 1 : 0;
}
