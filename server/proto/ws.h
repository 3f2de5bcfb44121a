/* The WebSocket protocol (RFC 6455) for the server's end of one connection, without I/O, and
 * the opening handshake's checks (RFC 6455 §4.2 over HTTP/1.1; RFC 8441 / RFC 9220 extended
 * CONNECT over HTTP/2 and HTTP/3), with permessage-deflate (RFC 7692, zlib).
 *
 * A session (pp_ws) takes the bytes a client sent after the handshake (pp_ws_feed) and calls
 * its owner back once per complete message (reassembled from its fragments, unmasked,
 * inflated, UTF-8 checked when text), per ping, per pong and for the peer's Close. Its own
 * answers (pongs, the echoed Close, the Close that fails the connection) and the owner's
 * messages (pp_ws_send) go into one output buffer the owner drains (pp_ws_output /
 * pp_ws_output_consumed) and writes to the transport. The session never touches a socket, a
 * timer or a clock, so a test or a fuzz target drives it with byte arrays.
 *
 * Every rule RFC 6455 and RFC 7692 make for what a client sends is checked, and a violation
 * fails the connection (RFC 6455 §7.1.7) with the close code docs/WEBSOCKET.md lists: the
 * session queues a Close frame carrying the code, pp_ws_feed returns PP_WS_EPROTO from then on
 * (sticky), and the owner flushes the output and closes the transport. Memory is bounded:
 * a message is at most limits.max_message_bytes after inflation (1009 beyond, checked before
 * the bytes are buffered, and while inflating, so a deflate bomb costs at most that much), a
 * control frame at most 125 bytes, and output the session adds on its own (pongs) is refused
 * past limits.max_pending_bytes with a 1008 close (a client that sends but does not read).
 *
 * Workload: one session per WebSocket connection, thousands at once, mostly idle. An idle
 * session holds no heap memory but the buffers it grew for its largest message so far
 * (pp_ws_trim gives them back) and, with permessage-deflate, zlib's two streams. */
#ifndef PP_WS_H
#define PP_WS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "server/base/buf.h"

/* Frame opcodes (RFC 6455 §5.2, §11.8). */
typedef enum pp_ws_opcode {
  PP_WS_OP_CONTINUATION = 0x0,
  PP_WS_OP_TEXT = 0x1,
  PP_WS_OP_BINARY = 0x2,
  PP_WS_OP_CLOSE = 0x8,
  PP_WS_OP_PING = 0x9,
  PP_WS_OP_PONG = 0xA,
} pp_ws_opcode;

/* Close codes (RFC 6455 §7.4.1, and the IANA registry for 1012-1014). */
enum {
  PP_WS_CLOSE_NORMAL = 1000,
  PP_WS_CLOSE_GOING_AWAY = 1001,
  PP_WS_CLOSE_PROTOCOL_ERROR = 1002,
  PP_WS_CLOSE_UNSUPPORTED_DATA = 1003,
  PP_WS_CLOSE_NO_STATUS = 1005, /* never on the wire: a Close without a body */
  PP_WS_CLOSE_ABNORMAL = 1006,  /* never on the wire: the transport ended without a Close */
  PP_WS_CLOSE_INVALID_PAYLOAD = 1007,
  PP_WS_CLOSE_POLICY = 1008,
  PP_WS_CLOSE_TOO_BIG = 1009,
  PP_WS_CLOSE_MANDATORY_EXT = 1010,
  PP_WS_CLOSE_INTERNAL_ERROR = 1011,
  PP_WS_CLOSE_SERVICE_RESTART = 1012,
  PP_WS_CLOSE_TRY_AGAIN_LATER = 1013,
  PP_WS_CLOSE_BAD_GATEWAY = 1014,
};

/* Errors: negative, one enum for the codec (pp_ws_strerror names them). */
typedef enum pp_ws_error {
  PP_WS_OK = 0,
  PP_WS_EPROTO = -1,     /* the connection failed: see pp_ws.fail_code and pp_ws.fail_reason */
  PP_WS_ECLOSED = -2,    /* the session has sent its Close: nothing more may be sent */
  PP_WS_EINVAL = -3,     /* a bad argument: opcode, close code, text not UTF-8, control > 125 */
  PP_WS_EFULL = -4,      /* the output holds more than limits.max_pending_bytes: not queued */
  PP_WS_EZLIB = -5,      /* zlib could not set up or run a stream (out of memory) */
  PP_WS_EBADHEADER = -6, /* a Sec-WebSocket-Extensions value that does not parse */
} pp_ws_error;

const char *pp_ws_strerror(int err);

/* 1 if `code` may be received in a Close frame (RFC 6455 §7.4: 1000-1003, 1007-1014 and
 * 3000-4999), else 0. */
int pp_ws_close_code_valid(int code);

/* Incremental UTF-8 validation (RFC 3629; no surrogates, no overlong forms, nothing above
 * U+10FFFF). Start with state 0; pp_ws_utf8_feed returns the new state, PP_WS_UTF8_BAD as soon
 * as a byte cannot continue a valid sequence (fail fast: RFC 6455 §8.1), and the text is
 * complete and valid iff the final state is 0. */
#define PP_WS_UTF8_BAD 0xFFFFFFFFu
uint32_t pp_ws_utf8_feed(uint32_t state, const uint8_t *p, size_t n);
int pp_ws_utf8_valid(const uint8_t *p, size_t n);

/* --- permessage-deflate (RFC 7692) ---------------------------------------------------- */

/* What the server is willing to do. */
typedef struct pp_ws_pmd_config {
  int enabled;                    /* 0: never accept the extension */
  int server_max_window_bits;     /* our compressor's window, 9..15 (8 is not offered by zlib) */
  int server_no_context_takeover; /* 1: reset our compressor after each message (saves memory) */
  int client_max_window_bits;     /* asked of the client when it allows it, 8..15 */
  int client_no_context_takeover; /* 1: ask the client to reset after each message */
  size_t compress_min_bytes;      /* messages shorter than this are sent uncompressed */
} pp_ws_pmd_config;

void pp_ws_pmd_config_default(pp_ws_pmd_config *c); /* enabled, 15/15, takeover, 64 bytes */

/* The agreed parameters of one connection. */
typedef struct pp_ws_pmd_params {
  int server_no_context_takeover; /* our compressor resets after each message */
  int client_no_context_takeover; /* the client's does (we may reset our decompressor) */
  int server_max_window_bits;     /* our compressor's window, 9..15 */
  int client_max_window_bits;     /* the client's window: our decompressor's, 8..15 */
} pp_ws_pmd_params;

/* Negotiates permessage-deflate from the client's Sec-WebSocket-Extensions value(s) (all of
 * them, joined with ", "). Offers are tried in the client's order; an offer is declined (and
 * the next one tried) when it has an unknown parameter, a parameter twice, a value on
 * server_no_context_takeover / client_no_context_takeover, a window-bits value outside 8..15
 * or not plain digits, server_max_window_bits without a value, or server_max_window_bits=8
 * (zlib's raw deflate cannot keep to a 256-byte window) (RFC 7692 §7.1). Other extensions are
 * skipped. Returns 1 with *params filled and the response value (NUL-terminated, at most
 * 128 bytes with the NUL) in resp, 0 when no offer was accepted (the response names no
 * extension), or PP_WS_EBADHEADER when the value does not follow RFC 6455 §9.1's grammar
 * (the handshake is then refused with 400). */
int pp_ws_pmd_negotiate(const pp_ws_pmd_config *cfg, const char *value, size_t len,
                        pp_ws_pmd_params *params, char *resp, size_t resp_cap);

/* --- the session --------------------------------------------------------------------- */

typedef struct pp_ws_limits {
  uint64_t max_message_bytes; /* a message after reassembly and inflation (1009 beyond) */
  size_t max_pending_bytes;   /* output not yet consumed: pp_ws_send refuses past it (EFULL);
                                 a pong that would pass it fails the connection with 1008 */
  size_t fragment_bytes;      /* pp_ws_send splits messages into frames of at most this much
                                 payload; 0 = one frame per message */
} pp_ws_limits;

void pp_ws_limits_default(pp_ws_limits *l); /* 1 MiB message, 4 MiB pending, 64 KiB frames */

typedef struct pp_ws pp_ws;

/* The owner's callbacks; any may be NULL. Data pointers are valid during the call only. A
 * callback may call pp_ws_send, pp_ws_ping and pp_ws_close (they only append output), never
 * pp_ws_feed or pp_ws_dispose. on_message returns 0 to go on, or a close code to fail the
 * connection with (1003 for a kind of message the app does not take, 1011 for an internal
 * failure; a code pp_ws_close_code_valid refuses becomes 1011); on_ping / on_pong / on_close return
 * nothing. */
typedef struct pp_ws_callbacks {
  /* A complete message: PP_WS_OP_TEXT (valid UTF-8) or PP_WS_OP_BINARY. */
  int (*on_message)(pp_ws *ws, pp_ws_opcode op, const uint8_t *data, size_t len);
  /* A ping (its pong is already queued, unless we sent our Close) and a pong (solicited or
   * not). */
  void (*on_ping)(pp_ws *ws, const uint8_t *data, size_t len);
  void (*on_pong)(pp_ws *ws, const uint8_t *data, size_t len);
  /* The peer's Close: code 1005 when it carried none; its reason is valid UTF-8. The echo is
   * already queued when we had not sent a Close. Once per session. */
  void (*on_close)(pp_ws *ws, int code, const uint8_t *reason, size_t len);
} pp_ws_callbacks;

typedef enum pp_ws_state {
  PP_WS_OPEN = 0,    /* both directions carry messages */
  PP_WS_CLOSING = 1, /* we sent a Close and wait for the peer's (incoming messages dropped) */
  PP_WS_CLOSED = 2,  /* Close sent and received, or the connection failed: flush the output,
                        then close the transport (the server closes first: §7.1.1) */
} pp_ws_state;

struct pp_ws_pmd; /* zlib streams (ws_int.h) */

struct pp_ws {
  const pp_ws_callbacks *cb;
  const pp_ws_limits *limits;
  void *data; /* the owner's */

  /* The frame being read. */
  uint8_t hdr[14];
  uint8_t hdr_len;  /* header bytes held */
  uint8_t hdr_need; /* header bytes the frame's header has (2 until the second byte) */
  uint8_t in_payload;
  uint8_t fin, rsv1, opcode;
  uint8_t mask[4];
  uint64_t payload_len, payload_done;

  /* The message being reassembled (msg_opcode 0: none). */
  uint8_t msg_opcode;
  uint8_t msg_compressed;
  uint8_t pmd_on; /* permessage-deflate was agreed (pmd_params) */
  uint32_t utf8_state;
  uint64_t msg_wire_bytes; /* payload bytes on the wire (compressed ones count here) */
  pp_buf msg;

  uint8_t ctl[125]; /* a control frame's payload */
  uint8_t ctl_len;

  pp_ws_state state;
  int close_sent, close_received;
  int close_code_sent;     /* 0 when our Close had no body */
  int close_code_received; /* 1005 when theirs had none */
  int fail_code;           /* after PP_WS_EPROTO: the close code sent */
  const char *fail_reason; /* after PP_WS_EPROTO: why (the Close frame's reason, and the log) */

  pp_buf out; /* frames for the peer; out.data[out_head..out.len) not yet consumed */
  size_t out_head;

  /* permessage-deflate: the agreed parameters, and the compression state, made at the first
   * compressed message either way and freed again by pp_ws_trim once it keeps no zlib stream
   * (NULL until then, and always without the extension). */
  pp_ws_pmd_params pmd_params;
  struct pp_ws_pmd *pmd;
  const pp_ws_pmd_config *pmd_cfg;

  /* Counters (messages and payload bytes after inflation / before deflation). */
  uint64_t messages_in, messages_out, bytes_in, bytes_out, pings_in, pongs_in;
};

/* Initialises a session; cb and limits must outlive it. pmd is NULL, or the parameters the
 * handshake agreed, with cfg (which must outlive the session) for compress_min_bytes. Returns
 * 0: nothing is allocated here (zlib's state is made on first use; when it cannot be, the
 * connection fails with 1011, or pp_ws_send returns PP_WS_EZLIB). */
int pp_ws_init(pp_ws *ws, const pp_ws_callbacks *cb, const pp_ws_limits *limits,
               const pp_ws_pmd_params *pmd, const pp_ws_pmd_config *cfg, void *data);
void pp_ws_dispose(pp_ws *ws);

/* Feeds bytes the client sent. Returns len (every byte is taken: bytes after the peer's Close
 * are dropped, RFC 6455 §5.5.1), or PP_WS_EPROTO when the connection failed in this call or
 * before (a Close with ws->fail_code is queued; callbacks for the frames before the bad byte
 * have run). The outcome does not depend on how the stream is split into calls. */
ssize_t pp_ws_feed(pp_ws *ws, const uint8_t *data, size_t len);

/* Queues a message (PP_WS_OP_TEXT, which must be valid UTF-8, or PP_WS_OP_BINARY),
 * compressed when permessage-deflate was agreed and it has at least compress_min_bytes, split
 * into frames of limits.fragment_bytes. Returns 0, PP_WS_ECLOSED after our Close,
 * PP_WS_EINVAL, PP_WS_EFULL (nothing queued: the output already holds max_pending_bytes or
 * more; the owner stops reading what feeds it, or closes with 1008 or 1013: docs/WEBSOCKET.md
 * "Backpressure") or PP_WS_EZLIB. */
int pp_ws_send(pp_ws *ws, pp_ws_opcode op, const uint8_t *data, size_t len);

/* Queues one message already encoded as server frames (pp_ws_frame_write, RSV1 clear: sent
 * uncompressed, which RFC 7692 allows per message) of payload_len bytes: fan-out encodes a
 * broadcast once and hands the same bytes to every subscriber. The caller checked the opcode
 * and UTF-8. Returns 0, PP_WS_ECLOSED or PP_WS_EFULL, as pp_ws_send. */
int pp_ws_send_encoded(pp_ws *ws, const uint8_t *frames, size_t n, size_t payload_len);

/* Queues a ping (at most 125 bytes). Returns 0, PP_WS_ECLOSED, PP_WS_EINVAL or PP_WS_EFULL. */
int pp_ws_ping(pp_ws *ws, const uint8_t *data, size_t len);

/* Starts the close handshake: queues a Close with code (0 = no body; else a code
 * pp_ws_close_code_valid accepts) and a reason of at most 123 bytes of UTF-8. Returns 0,
 * PP_WS_ECLOSED (a Close was already sent) or PP_WS_EINVAL. Never refused for a full output:
 * a Close is at most 125 bytes past the bound. */
int pp_ws_close(pp_ws *ws, int code, const char *reason, size_t reason_len);

/* The output not yet consumed: *data points at it (valid until the next call into the
 * session); returns its length. pp_ws_output_consumed drops n of those bytes from the front.
 * pp_ws_pending is the same length, for backpressure decisions. */
size_t pp_ws_output(const pp_ws *ws, const uint8_t **data);
void pp_ws_output_consumed(pp_ws *ws, size_t n);
size_t pp_ws_pending(const pp_ws *ws);

/* Frees the reassembly and output buffers when they are empty (an idle connection). */
void pp_ws_trim(pp_ws *ws);

/* Appends one server frame (FIN and RSV1 as given, unmasked) to out: the frame writer
 * pp_ws_send uses, public for tests and for fan-out (one encoded frame written to many
 * connections). */
void pp_ws_frame_write(pp_buf *out, int fin, int rsv1, pp_ws_opcode op, const uint8_t *payload,
                       size_t len);

/* --- the opening handshake ------------------------------------------------------------ */

typedef enum pp_ws_hs_kind {
  PP_WS_HS_HTTP1 = 1,   /* GET with Upgrade: websocket (RFC 6455 §4.2.1); answer 101 */
  PP_WS_HS_CONNECT = 2, /* extended CONNECT, :protocol websocket (RFC 8441 §4, RFC 9220);
                           answer 200 */
} pp_ws_hs_kind;

/* The request's fields as the caller sees them. Pointers are the caller's and must stay valid
 * until the last call on the handshake. */
typedef struct pp_ws_handshake {
  pp_ws_hs_kind kind;
  const uint8_t *method;
  size_t method_len;
  int http_major, http_minor; /* HTTP/1.x only */
  int upgrade_websocket;      /* an Upgrade element was "websocket" */
  int upgrade_seen, connection_upgrade, connection_seen;
  const uint8_t *key;
  size_t key_len;
  int key_count;
  const uint8_t *version;
  size_t version_len;
  int version_count;
  const uint8_t *protocol; /* :protocol (extended CONNECT) */
  size_t protocol_len;
  int scheme_seen, path_seen, authority_seen;
  const uint8_t *subprotocols; /* Sec-WebSocket-Protocol (the first field line), for the app */
  size_t subprotocols_len;
  pp_buf extensions; /* every Sec-WebSocket-Extensions line, joined with ", " */

  /* Results of pp_ws_handshake_check. */
  int status;         /* 0 accepted, else the HTTP status to answer (400 or 426) */
  const char *reason; /* why, for the log */
  char accept[29];    /* Sec-WebSocket-Accept (HTTP/1.1 only), NUL-terminated */
  int pmd_accepted;
  pp_ws_pmd_params pmd;
  char extensions_response[128]; /* Sec-WebSocket-Extensions to answer, "" for none */
} pp_ws_handshake;

void pp_ws_handshake_init(pp_ws_handshake *hs, pp_ws_hs_kind kind);
void pp_ws_handshake_dispose(pp_ws_handshake *hs);

/* HTTP/1.1: the request line's method and version. */
void pp_ws_handshake_request_line(pp_ws_handshake *hs, const uint8_t *method, size_t len,
                                  int http_major, int http_minor);

/* One field line, in order, as received (names in any case; HTTP/2 and HTTP/3 pass their
 * pseudo-header fields :method, :protocol, :scheme, :path and :authority here too). */
void pp_ws_handshake_field(pp_ws_handshake *hs, const uint8_t *name, size_t name_len,
                           const uint8_t *value, size_t value_len);

/* Checks the request and negotiates permessage-deflate with cfg (NULL: never). Returns 0
 * when the handshake may be accepted, else the status to answer: 426 for a
 * Sec-WebSocket-Version other than 13 (the answer carries "Sec-WebSocket-Version: 13",
 * RFC 6455 §4.4), 400 for everything else; hs->reason says which rule failed. */
int pp_ws_handshake_check(pp_ws_handshake *hs, const pp_ws_pmd_config *cfg);

/* Appends the response's WebSocket field lines ("Name: value\r\n" each) for an accepted
 * handshake: HTTP/1.1 gets Upgrade, Connection and Sec-WebSocket-Accept, both kinds get
 * Sec-WebSocket-Extensions when one was agreed; for a 426 refusal, Sec-WebSocket-Version: 13.
 * The status line (101 / 200 / 4xx) and any Sec-WebSocket-Protocol are the caller's. */
void pp_ws_handshake_response_fields(const pp_ws_handshake *hs, pp_buf *out);

/* Sec-WebSocket-Accept for a key (RFC 6455 §4.2.2: base64(SHA-1(key + GUID))): 28 characters
 * and a NUL into out. Returns 0, or -1 if OpenSSL could not compute the digest. */
int pp_ws_accept_key(const uint8_t *key, size_t key_len, char out[29]);

#endif
