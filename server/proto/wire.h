/* The puma-plus wire protocol (docs/PROTOCOL.md, version 1): a sans-I/O codec.
 *
 * Frames are an 8-byte header (u8 type | u24 reserved = 0 | u32 payload length, big-endian)
 * followed by the payload. The decoder is incremental over a caller-owned byte buffer: it
 * looks at the bytes the caller has so far and either decodes one whole frame (returning the
 * bytes it consumed), asks for more (PP_WIRE_NEED_MORE, with the total size it needs), or
 * fails with a negative error that stays set until pp_wire_decoder_init() is called again.
 * A decoded frame points into the caller's buffer (no copies); it stays valid until the
 * caller changes those bytes. Encoders write into caller buffers and never allocate.
 *
 * Workload: one decoder per worker connection, tens of thousands of small frames per second,
 * so decoding is a bounds-checked walk with no allocation. */
#ifndef PP_WIRE_H
#define PP_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PP_WIRE_VERSION        1
#define PP_WIRE_HEADER_SIZE    8
#define PP_WIRE_MAX_PAYLOAD    4194304u /* 4 MiB */
#define PP_WIRE_MAX_BODY_CHUNK 65536u   /* most body bytes the server puts in one BODY frame */

#define PP_WIRE_FLAG_BODY_STREAMS 0x01u /* REQUEST flags bit 0 */
#define PP_WIRE_FLAG_HIJACKABLE   0x02u /* REQUEST flags bit 1: HIJACK may be sent */
#define PP_WIRE_FLAG_EARLY_HINTS  0x04u /* REQUEST flags bit 2: EARLY_HINTS may be sent */
/* REQUEST flags bit 4: the body is in a spooled file whose descriptor rides on the frame
 * (SCM_RIGHTS); `body` is empty. */
#define PP_WIRE_FLAG_BODY_FILE 0x10u
#define PP_WIRE_CAP_GVL        0x01u /* HELLO capabilities bit 0 */
#define PP_WIRE_CAP_CPU        0x02u /* HELLO capabilities bit 1 */
#define PP_WIRE_CAP_RACTOR     0x04u /* bit 2: the slot is a Ractor (its own GVL) */

typedef enum pp_wire_type {
  PP_WIRE_HELLO = 0x01,
  PP_WIRE_REQUEST = 0x10,
  PP_WIRE_BODY = 0x11,
  PP_WIRE_BODY_END = 0x12,
  PP_WIRE_CANCEL = 0x13,
  PP_WIRE_HIJACKED = 0x15,           /* 0x14 stays unassigned */
  PP_WIRE_TIMEOUT = 0x16,            /* monitor connection: interrupt a request */
  PP_WIRE_HEARTBEAT_INTERVAL = 0x17, /* monitor connection: the heartbeat period */
  PP_WIRE_SLOTS = 0x18,              /* monitor connection: the worker's target slot count */
  PP_WIRE_SLOT_CLOSE = 0x19,         /* slot connection: end this slot (it is idle) */
  PP_WIRE_RESPONSE_HEAD = 0x20,
  PP_WIRE_RESPONSE_BODY = 0x21,
  PP_WIRE_RESPONSE_END = 0x22,
  PP_WIRE_HIJACK = 0x23,
  PP_WIRE_HEARTBEAT = 0x24,   /* monitor connection: the worker process is alive */
  PP_WIRE_EARLY_HINTS = 0x26, /* worker -> server: a 103 before the RESPONSE_HEAD */
  PP_WIRE_SPAWN = 0x30,
  PP_WIRE_RETIRE = 0x31,
  PP_WIRE_STOP = 0x32,
  PP_WIRE_READY = 0x33,
  PP_WIRE_FORKED = 0x34,
  PP_WIRE_EXITED = 0x35,
  PP_WIRE_ADOPT = 0x39,          /* server -> a restarted shepherd: a live worker it did not fork */
  PP_WIRE_ADOPTED_EXITED = 0x3A, /* server -> shepherd: an adopted worker was reaped */
  PP_WIRE_STANDBY = 0x36,        /* server -> shepherd: fork `count` standby workers */
  PP_WIRE_PARKED = 0x37,         /* shepherd -> server: a standby worker booted and waits */
  PP_WIRE_ACTIVATE = 0x38,       /* server -> shepherd: wake parked worker `pid` */
  /* WebSockets owned by the server (docs/PROTOCOL.md "WebSocket frames") */
  PP_WIRE_WS_OPEN = 0x40,       /* server -> worker (slot): a connection was accepted */
  PP_WIRE_WS_MESSAGE = 0x41,    /* server -> worker (slot): a message arrived */
  PP_WIRE_WS_CLOSE = 0x42,      /* server -> worker (slot): the connection closed */
  PP_WIRE_WS_DONE = 0x43,       /* worker (slot) -> server: the event is finished */
  PP_WIRE_WS_SEND = 0x44,       /* worker -> server: a message to one connection */
  PP_WIRE_WS_TAG = 0x45,        /* worker -> server: tag or untag a connection */
  PP_WIRE_WS_BROADCAST = 0x46,  /* worker -> server: a message to every holder of a tag */
  PP_WIRE_WS_CLOSE_CONN = 0x47, /* worker -> server: close a connection */
} pp_wire_type;

/* WS_OPEN route */
#define PP_WIRE_WS_ROUTE_STICKY   0u
#define PP_WIRE_WS_ROUTE_FLEXIBLE 1u
/* WS_CLOSE by */
#define PP_WIRE_WS_BY_PEER      0u
#define PP_WIRE_WS_BY_SERVER    1u
#define PP_WIRE_WS_BY_TRANSPORT 2u
/* WS_TAG op */
#define PP_WIRE_WS_TAG_ADD        0u
#define PP_WIRE_WS_TAG_REMOVE     1u
#define PP_WIRE_WS_TAG_REMOVE_ALL 2u

/* HIJACKED results: 0 the client's descriptor rides on the frame (SCM_RIGHTS); otherwise no
 * descriptor was sent. */
typedef enum pp_wire_hijack_result {
  PP_WIRE_HIJACK_OK = 0,      /* the descriptor is attached */
  PP_WIRE_HIJACK_GONE = 1,    /* the client went away first */
  PP_WIRE_HIJACK_REFUSED = 2, /* the request cannot be hijacked now (body still arriving) */
} pp_wire_hijack_result;

/* Return codes. PP_WIRE_NEED_MORE is not an error: feed more bytes and call again. */
typedef enum pp_wire_err {
  PP_WIRE_NEED_MORE = 0,
  PP_WIRE_ERESERVED = -1,  /* a reserved header byte is non-zero */
  PP_WIRE_ETYPE = -2,      /* unknown frame type */
  PP_WIRE_ETOO_LARGE = -3, /* length > PP_WIRE_MAX_PAYLOAD */
  PP_WIRE_ELENGTH = -4,    /* payload fields do not exactly fill length */
  PP_WIRE_ENOSPC = -5,     /* encoder: caller's buffer too small */
  PP_WIRE_EINVAL = -6,     /* encoder: a field does not fit its encoding */
} pp_wire_err;

/* A static English description of a pp_wire_err; never NULL. */
const char *pp_wire_strerror(int err);
/* "HELLO", "REQUEST", ... or NULL for an unknown type. */
const char *pp_wire_type_name(int type);
/* Inverse of pp_wire_type_name: the type, or -1. */
int pp_wire_type_parse(const char *name);

/* A run of encoded pairs (u32 count, then count x (bytes key, bytes value)) as it sits in a
 * payload: `data` points at the first key's length, `len` covers all pairs. */
typedef struct pp_wire_pairs {
  const uint8_t *data;
  size_t len;
  uint32_t count;
} pp_wire_pairs;

/* Iterates over pairs. Init with pp_wire_pairs_iter_init, then call next until it returns 0. */
typedef struct pp_wire_pairs_iter {
  const uint8_t *p, *end;
  uint32_t left;
} pp_wire_pairs_iter;
void pp_wire_pairs_iter_init(pp_wire_pairs_iter *it, const pp_wire_pairs *pairs);
/* 1 and the next pair (pointers into the payload), or 0 at the end. Only valid on pairs
 * that came out of pp_wire_decode or the pairs builder (already bounds-checked). */
int pp_wire_pairs_next(pp_wire_pairs_iter *it, const uint8_t **key, uint32_t *key_len,
                       const uint8_t **value, uint32_t *value_len);

/* One decoded frame. Only the fields of `type` are meaningful; the others are zero.
 * `pairs` is env (REQUEST) or headers (RESPONSE_HEAD); `data` is body (REQUEST), chunk
 * (BODY, RESPONSE_BODY) or buffered (HIJACKED). */
/* HEARTBEAT_INTERVAL flags: the server may send TIMEOUT (-request-timeout is set). Without it
 * the worker skips the interrupt machinery around app code. */
#define PP_WIRE_MONITOR_REQUEST_TIMEOUTS 1u

typedef struct pp_wire_frame {
  uint8_t type;
  uint32_t length; /* payload length */
  /* HELLO */
  uint16_t version;
  uint32_t pid; /* HELLO, RETIRE, READY, FORKED, EXITED, HEARTBEAT, ADOPT*, PARKED, ACTIVATE */
  uint32_t worker_index;   /* HELLO, FORKED, HEARTBEAT, ADOPT, PARKED */
  int64_t heap_live_slots; /* HEARTBEAT: the worker's GC.stat(:heap_live_slots), -1 unknown */
  uint32_t thread_index;   /* HELLO, TIMEOUT, SLOT_CLOSE */
  uint32_t capabilities;
  /* REQUEST, BODY, BODY_END, CANCEL, HIJACKED, TIMEOUT, RESPONSE_*, HIJACK */
  uint64_t request_id;
  uint64_t t2b_ns, t3_ns;
  uint8_t flags;
  pp_wire_pairs pairs;
  const uint8_t *data;
  size_t data_len;
  /* RESPONSE_HEAD */
  uint16_t status;
  /* HIJACKED: a pp_wire_hijack_result */
  uint8_t result;
  /* RESPONSE_END */
  uint64_t t4_ns, t5_ns, body_read_ns;
  int64_t gvl_wait_ns, cpu_ns;
  /* SPAWN, STANDBY, SLOTS */
  uint32_t count;
  /* STOP */
  uint32_t grace_ms;
  /* READY, PARKED */
  uint64_t boot_ns;
  /* EXITED, ADOPTED_EXITED */
  int32_t exit_status;
  /* HEARTBEAT_INTERVAL */
  uint32_t interval_ms;
  uint32_t monitor_flags; /* PP_WIRE_MONITOR_* */
  /* WebSocket frames. The event id of WS_OPEN / WS_MESSAGE / WS_CLOSE / WS_DONE is in
   * `request_id` (events and requests share one id space), t_ready_ns in `t2b_ns`, t3_ns in
   * `t3_ns`; WS_DONE's times are in t4_ns, t5_ns, gvl_wait_ns, cpu_ns as for RESPONSE_END.
   * Message bytes (WS_MESSAGE, WS_SEND, WS_BROADCAST) and reasons (WS_CLOSE,
   * WS_CLOSE_CONN) are in `data`; WS_OPEN's env in `pairs`. */
  uint64_t conn_id;       /* WS_OPEN, WS_MESSAGE, WS_CLOSE, WS_SEND, WS_TAG, WS_CLOSE_CONN */
  uint8_t route;          /* WS_OPEN: PP_WIRE_WS_ROUTE_* */
  uint8_t opcode;         /* WS_MESSAGE, WS_SEND, WS_BROADCAST: 1 text, 2 binary */
  uint8_t by;             /* WS_CLOSE: PP_WIRE_WS_BY_* */
  uint8_t tag_op;         /* WS_TAG: PP_WIRE_WS_TAG_* */
  uint16_t code;          /* WS_CLOSE, WS_CLOSE_CONN: the close code */
  const uint8_t *handler; /* WS_OPEN, WS_MESSAGE, WS_CLOSE: the app's handler key (opaque) */
  size_t handler_len;
  pp_wire_pairs tags;      /* WS_OPEN: ("tag", t) per initial tag */
  const uint8_t *protocol; /* WS_OPEN: the subprotocol chosen (may be empty) */
  size_t protocol_len;
  const uint8_t *tag; /* WS_TAG, WS_BROADCAST */
  size_t tag_len;
  const uint8_t *prefix, *suffix; /* WS_TAG: the envelope (both empty: none) */
  size_t prefix_len, suffix_len;
} pp_wire_frame;

typedef struct pp_wire_decoder {
  int err;         /* sticky error, 0 while healthy */
  uint64_t frames; /* frames decoded so far */
} pp_wire_decoder;

void pp_wire_decoder_init(pp_wire_decoder *d);

/* Decodes the frame at the start of buf[0..len). Returns:
 *   > 0  bytes consumed; *out holds the frame (pointing into buf);
 *   PP_WIRE_NEED_MORE (0)  an incomplete frame; *need (if not NULL) is the total number of
 *        bytes the frame needs (8 while the header is incomplete), so the caller can grow its
 *        buffer; an oversized length is rejected from the header alone, never buffered;
 *   < 0  a pp_wire_err; sticky: every later call returns it until re-init. */
ssize_t pp_wire_decode(pp_wire_decoder *d, const uint8_t *buf, size_t len, pp_wire_frame *out,
                       size_t *need);

/* Encodes any frame from the fields of *f (type decides which). Pairs and data are copied as
 * given. Returns the frame's total length, PP_WIRE_ENOSPC if cap is too small, or
 * PP_WIRE_ETYPE / PP_WIRE_EINVAL. */
ssize_t pp_wire_encode(const pp_wire_frame *f, uint8_t *buf, size_t cap);

/* The exact encoded size of *f, or a negative error. */
ssize_t pp_wire_encoded_size(const pp_wire_frame *f);

/* Writes an 8-byte header. */
void pp_wire_put_header(uint8_t *buf, uint8_t type, uint32_t length);

/* Big-endian helpers for callers that assemble frames in place. */
static inline void pp_wire_put_u32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24);
  p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
}
static inline void pp_wire_put_u64(uint8_t *p, uint64_t v) {
  pp_wire_put_u32(p, (uint32_t)(v >> 32));
  pp_wire_put_u32(p + 4, (uint32_t)v);
}
static inline uint32_t pp_wire_get_u32(const uint8_t *p) {
  return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}
static inline uint64_t pp_wire_get_u64(const uint8_t *p) {
  return ((uint64_t)pp_wire_get_u32(p) << 32) | pp_wire_get_u32(p + 4);
}

#endif
