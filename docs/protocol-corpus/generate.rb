#!/usr/bin/env ruby
# frozen_string_literal: true

# Writes the golden corpus of wire frames (docs/PROTOCOL.md, "Golden corpus").
#
# The bytes are built here with Array#pack straight from the field tables of PROTOCOL.md,
# never through the gem's codec or the server's, so the corpus is an independent check of
# both. Each case writes NAME.bin (header + payload, exactly) and NAME.json (its meaning).
# bad-*.bin are malformed frames every decoder must reject; their .json names the reason
# class (see README.md in this folder). Run: ruby docs/protocol-corpus/generate.rb
# It is deterministic: running it again rewrites identical files.

require "json"

DIR = __dir__

TYPES = {
  "HELLO" => 0x01, "REQUEST" => 0x10, "BODY" => 0x11, "BODY_END" => 0x12, "CANCEL" => 0x13,
  "HIJACKED" => 0x15, "RESPONSE_HEAD" => 0x20, "RESPONSE_BODY" => 0x21, "RESPONSE_END" => 0x22,
  "HIJACK" => 0x23, "EARLY_HINTS" => 0x26,
  "SPAWN" => 0x30, "RETIRE" => 0x31, "STOP" => 0x32, "READY" => 0x33, "FORKED" => 0x34,
  "EXITED" => 0x35,
  # the worker's monitor connection (request timeouts, heartbeats)
  "TIMEOUT" => 0x16, "HEARTBEAT_INTERVAL" => 0x17, "HEARTBEAT" => 0x24,
  # run-time concurrency: the target slot count (monitor), end one idle slot (its connection)
  "SLOTS" => 0x18, "SLOT_CLOSE" => 0x19,
  # a restarted shepherd learns the workers it did not fork
  "ADOPT" => 0x39, "ADOPTED_EXITED" => 0x3A,
  "STANDBY" => 0x36, "PARKED" => 0x37, "ACTIVATE" => 0x38,
  # WebSockets owned by the server: events to a slot, and what any worker may send
  "WS_OPEN" => 0x40, "WS_MESSAGE" => 0x41, "WS_CLOSE" => 0x42, "WS_DONE" => 0x43,
  "WS_SEND" => 0x44, "WS_TAG" => 0x45, "WS_BROADCAST" => 0x46, "WS_CLOSE_CONN" => 0x47
}.freeze

# Largest u64 used in the corpus: 2^63-1, so that JSON readers with signed 64-bit integers
# (jansson's json_int_t) read it exactly. Codecs must still handle the full u64 range.
U64_BIG = 9_223_372_036_854_775_807
U32_MAX = 4_294_967_295
U16_MAX = 65_535

def u8(v) = [v].pack("C")
def u16(v) = [v].pack("n")
def u32(v) = [v].pack("N")
def i32(v) = [v].pack("l>")
def u64(v) = [v].pack("Q>")
def i64(v) = [v].pack("q>")
def bytes(s) = u32(s.bytesize) + s.b
def pairs(list) = u32(list.size) + list.map { |k, v| bytes(k) + bytes(v) }.join.b

def header(type, length, reserved: "\0\0\0")
  u8(type) + reserved.b + u32(length)
end

def frame(name, payload) = header(TYPES.fetch(name), payload.bytesize) + payload

def hex(s) = s.unpack1("H*")

CASES = []

def good(name, json, payload)
  CASES << [name, json, frame(json.fetch("type"), payload.b)]
end

def bad(name, error, description, bin)
  CASES << [name, { "error" => error, "description" => description }, bin.b]
end

# ---- HELLO -------------------------------------------------------------------------------
def hello(version, pid, wi, ti, caps)
  [{ "type" => "HELLO", "version" => version, "pid" => pid, "worker_index" => wi,
     "thread_index" => ti, "capabilities" => caps },
   u16(version) + u32(pid) + u32(wi) + u32(ti) + u32(caps)]
end
good("hello", *hello(1, 12_345, 0, 0, 2))
good("hello-all-capabilities", *hello(1, 4242, 3, 4, 7))
good("hello-ractor", *hello(1, 12_346, 1, 2, 6))
good("hello-max", *hello(1, U32_MAX, U32_MAX, U32_MAX, 0))

# ---- REQUEST -----------------------------------------------------------------------------
def request(id, t2b, t3, flags, env, body)
  [{ "type" => "REQUEST", "request_id" => id, "t2b_ns" => t2b, "t3_ns" => t3, "flags" => flags,
     "env" => env, "body_hex" => hex(body.b) },
   u64(id) + u64(t2b) + u64(t3) + u8(flags) + pairs(env) + bytes(body.b)]
end

get_env = [
  ["REQUEST_METHOD", "GET"], ["SCRIPT_NAME", ""], ["PATH_INFO", "/hello%20world"],
  ["QUERY_STRING", "a=1&b=%2F"], ["SERVER_NAME", "localhost"], ["SERVER_PORT", "9292"],
  ["SERVER_PROTOCOL", "HTTP/1.1"], ["REMOTE_ADDR", "127.0.0.1"], ["rack.url_scheme", "http"],
  ["HTTP_HOST", "localhost:9292"], ["HTTP_ACCEPT", "text/html, application/json"],
  ["HTTP_COOKIE", "a=1; b=2"], ["HTTP_X_FORWARDED_FOR", "10.0.0.1, 10.0.0.2"],
  ["REQUEST_URI", "/hello%20world?a=1&b=%2F"], ["puma_plus.request_id", "7"],
  ["puma_plus.queue_ns", "1500"]
]
good("request-get", *request(7, 1_000_000_000, 1_000_001_500, 0, get_env, ""))

post_env = [
  ["REQUEST_METHOD", "POST"], ["SCRIPT_NAME", ""], ["PATH_INFO", "/echo"], ["QUERY_STRING", ""],
  ["SERVER_NAME", "example.org"], ["SERVER_PORT", "443"], ["SERVER_PROTOCOL", "HTTP/2"],
  ["REMOTE_ADDR", "::1"], ["rack.url_scheme", "https"],
  ["CONTENT_TYPE", "application/x-www-form-urlencoded"], ["CONTENT_LENGTH", "7"],
  ["HTTP_HOST", "example.org"], ["REQUEST_URI", "/echo"], ["puma_plus.request_id", "8"],
  ["puma_plus.queue_ns", "0"]
]
good("request-post", *request(8, 2_000_000_000, 2_000_000_000, 0, post_env, "a=1&b=2"))
good("request-empty-env", *request(1, 0, 0, 0, [], ""))
good("request-binary-body",
     *request(9, 5, 6, 0, [["REQUEST_METHOD", "PUT"], ["CONTENT_LENGTH", "256"]],
              (0..255).map(&:chr).join))
good("request-streams",
     *request(10, 3_000_000_000, 3_000_000_100, 1,
              [["REQUEST_METHOD", "POST"], ["CONTENT_LENGTH", "2097152"]], ""))
good("request-utf8-and-empty-values",
     *request(11, 1, 2, 0,
              [["PATH_INFO", "/caf\u00e9"], ["QUERY_STRING", ""], ["HTTP_X_EMPTY", ""],
               ["", "empty key"]], ""))
good("request-hijackable", *request(12, 7, 8, 2, [["REQUEST_METHOD", "GET"]], ""))
# BODY_FILE (bit 4): the body is in the spooled file whose descriptor rides on the frame.
good("request-body-file",
     *request(13, 4_000_000_000, 4_000_000_250, 16,
              [["REQUEST_METHOD", "POST"], ["CONTENT_LENGTH", "104857600"]], ""))
good("request-max-ids", *request(U64_BIG, U64_BIG - 1, U64_BIG, 0, [["REQUEST_METHOD", "GET"]], ""))

# ---- BODY / BODY_END / CANCEL ------------------------------------------------------------
def chunk_frame(type, id, chunk)
  [{ "type" => type, "request_id" => id, "chunk_hex" => hex(chunk.b) }, u64(id) + chunk.b]
end
good("body", *chunk_frame("BODY", 10, "hello, body"))
good("body-empty", *chunk_frame("BODY", 10, ""))
good("body-binary", *chunk_frame("BODY", 10, "\x00\xff\r\n\x80abc".b))
good("body-64k", *chunk_frame("BODY", 10, (0...65_536).map { |i| (i % 251).chr }.join))
good("body-end", { "type" => "BODY_END", "request_id" => 10 }, u64(10))
good("cancel", { "type" => "CANCEL", "request_id" => 12 }, u64(12))

# ---- HIJACK / HIJACKED ----------------------------------------------------------------
# The descriptor of a HIJACKED with result 0 travels as SCM_RIGHTS ancillary data, which a
# byte corpus cannot hold: only the frame bytes are here.
good("hijack", { "type" => "HIJACK", "request_id" => 12 }, u64(12))
def hijacked(id, result, buffered)
  [{ "type" => "HIJACKED", "request_id" => id, "result" => result,
     "buffered_hex" => hex(buffered.b) }, u64(id) + u8(result) + buffered.b]
end
good("hijacked", *hijacked(12, 0, ""))
good("hijacked-buffered", *hijacked(12, 0, "\x81\x85ping!".b))
good("hijacked-gone", *hijacked(13, 1, ""))
good("hijacked-refused", *hijacked(U64_BIG, 2, ""))

# ---- RESPONSE_HEAD / BODY / END ----------------------------------------------------------
def head(id, status, headers)
  [{ "type" => "RESPONSE_HEAD", "request_id" => id, "status" => status, "headers" => headers },
   u64(id) + u16(status) + pairs(headers)]
end
good("response-head", *head(7, 200, [["Content-Type", "text/plain"], ["Content-Length", "5"]]))
good("response-head-multi-value",
     *head(7, 302, [["Location", "/next"], ["Set-Cookie", "a=1; Path=/"],
                    ["Set-Cookie", "b=2; HttpOnly"], ["x-lower", "kept as given"],
                    ["Set-Cookie", "c=3"]]))
good("response-head-no-headers", *head(8, 204, []))
good("response-head-status-999", *head(U64_BIG, 999, [["X-Odd", ""]]))
good("response-head-status-100", *head(1, 100, []))

# EARLY_HINTS: RESPONSE_HEAD's layout without the status (a 103's fields)
def hints(id, headers)
  [{ "type" => "EARLY_HINTS", "request_id" => id, "headers" => headers }, u64(id) + pairs(headers)]
end
good("early-hints", *hints(7, [["link", "</style.css>; rel=preload; as=style"]]))
good("early-hints-multi-value",
     *hints(U64_BIG, [["link", "</a.js>; rel=preload; as=script"], ["link", "</b.css>; rel=preload; as=style"]]))
good("early-hints-no-headers", *hints(1, []))

good("response-body", *chunk_frame("RESPONSE_BODY", 7, "hello"))
good("response-body-empty", *chunk_frame("RESPONSE_BODY", 7, ""))
good("response-body-binary", *chunk_frame("RESPONSE_BODY", 9, (0..255).to_a.reverse.pack("C*")))

def resp_end(id, t4, t5, body_read, gvl, cpu)
  [{ "type" => "RESPONSE_END", "request_id" => id, "t4_ns" => t4, "t5_ns" => t5,
     "body_read_ns" => body_read, "gvl_wait_ns" => gvl, "cpu_ns" => cpu },
   u64(id) + u64(t4) + u64(t5) + u64(body_read) + i64(gvl) + i64(cpu)]
end
good("response-end", *resp_end(7, 1_000_002_000, 1_000_102_000, 0, -1, 95_000))
good("response-end-unknown", *resp_end(8, 10, 20, 0, -1, -1))
good("response-end-all-known", *resp_end(9, 100, 5_000_100, 2_000_000, 150_000, 2_500_000))
good("response-end-zero", *resp_end(1, 0, 0, 0, 0, 0))
good("response-end-max", *resp_end(U64_BIG, U64_BIG - 2, U64_BIG, U64_BIG, U64_BIG, U64_BIG))

# ---- shepherd frames ---------------------------------------------------------------------
good("spawn", { "type" => "SPAWN", "count" => 2 }, u32(2))
good("spawn-max", { "type" => "SPAWN", "count" => U32_MAX }, u32(U32_MAX))
good("retire", { "type" => "RETIRE", "pid" => 31_337 }, u32(31_337))
good("stop", { "type" => "STOP", "grace_ms" => 30_000 }, u32(30_000))
good("stop-zero", { "type" => "STOP", "grace_ms" => 0 }, u32(0))
good("ready", { "type" => "READY", "pid" => 4000, "boot_ns" => 812_345_678 },
     u32(4000) + u64(812_345_678))
good("forked", { "type" => "FORKED", "pid" => 4001, "worker_index" => 0 }, u32(4001) + u32(0))
good("forked-index-5", { "type" => "FORKED", "pid" => 4006, "worker_index" => 5 },
     u32(4006) + u32(5))
good("exited", { "type" => "EXITED", "pid" => 4001, "status" => 0 }, u32(4001) + i32(0))
good("exited-code", { "type" => "EXITED", "pid" => 4002, "status" => 1 }, u32(4002) + i32(1))
good("exited-signal", { "type" => "EXITED", "pid" => 4003, "status" => -9 }, u32(4003) + i32(-9))
good("exited-extremes", { "type" => "EXITED", "pid" => U32_MAX, "status" => -2_147_483_648 },
     u32(U32_MAX) + i32(-2_147_483_648))
good("standby", { "type" => "STANDBY", "count" => 1 }, u32(1))
good("standby-max", { "type" => "STANDBY", "count" => U32_MAX }, u32(U32_MAX))
good("parked", { "type" => "PARKED", "pid" => 4010, "worker_index" => 2, "boot_ns" => 41_500_000 },
     u32(4010) + u32(2) + u64(41_500_000))
good("parked-max", { "type" => "PARKED", "pid" => U32_MAX, "worker_index" => U32_MAX,
                     "boot_ns" => U64_BIG }, u32(U32_MAX) + u32(U32_MAX) + u64(U64_BIG))
good("activate", { "type" => "ACTIVATE", "pid" => 4010 }, u32(4010))

# ---- run-time concurrency: SLOTS (monitor connection), SLOT_CLOSE (slot connection) ------
good("slots", { "type" => "SLOTS", "count" => 200 }, u32(200))
good("slots-max", { "type" => "SLOTS", "count" => U32_MAX }, u32(U32_MAX))
good("slot-close", { "type" => "SLOT_CLOSE", "thread_index" => 7 }, u32(7))

# ---- monitor connection: TIMEOUT / HEARTBEAT_INTERVAL / HEARTBEAT ------------------------
good("timeout", { "type" => "TIMEOUT", "request_id" => 77, "thread_index" => 2 }, u64(77) + u32(2))
good("timeout-max", { "type" => "TIMEOUT", "request_id" => U64_BIG, "thread_index" => U32_MAX },
     u64(U64_BIG) + u32(U32_MAX))
good("heartbeat-interval", { "type" => "HEARTBEAT_INTERVAL", "interval_ms" => 5000, "monitor_flags" => 1 },
     u32(5000) + u32(1))
good("heartbeat-interval-no-timeouts", { "type" => "HEARTBEAT_INTERVAL", "interval_ms" => 250, "monitor_flags" => 0 },
     u32(250) + u32(0))
good("heartbeat", { "type" => "HEARTBEAT", "pid" => 4001, "worker_index" => 0, "heap_live_slots" => 123_456 },
     u32(4001) + u32(0) + i64(123_456))
good("heartbeat-max", { "type" => "HEARTBEAT", "pid" => U32_MAX, "worker_index" => U32_MAX,
                        "heap_live_slots" => -1 },
     u32(U32_MAX) + u32(U32_MAX) + i64(-1))

# ---- shepherd restart: ADOPT / ADOPTED_EXITED ----------------------------------------------
good("adopt", { "type" => "ADOPT", "pid" => 4001, "worker_index" => 1 }, u32(4001) + u32(1))
good("adopted-exited", { "type" => "ADOPTED_EXITED", "pid" => 4001, "status" => -9 },
     u32(4001) + i32(-9))
good("adopted-exited-code", { "type" => "ADOPTED_EXITED", "pid" => U32_MAX, "status" => 2_147_483_647 },
     u32(U32_MAX) + i32(2_147_483_647))

# ---- WebSocket frames ---------------------------------------------------------------------
# Events begin alike: u64 event_id, u64 conn_id, u64 t_ready_ns, u64 t3_ns, bytes handler.
def ws_event_head(event, conn, ready, t3, handler) =
  u64(event) + u64(conn) + u64(ready) + u64(t3) + bytes(handler)
def ws_event_json(type, event, conn, ready, t3, handler)
  { "type" => type, "event_id" => event, "conn_id" => conn, "t_ready_ns" => ready, "t3_ns" => t3,
    "handler_hex" => hex(handler.b) }
end

def ws_open(event, conn, ready, t3, handler, route, protocol, tags, env)
  tag_pairs = tags.map { |t| ["tag", t] }
  [ws_event_json("WS_OPEN", event, conn, ready, t3, handler)
     .merge("route" => route, "protocol_hex" => hex(protocol.b), "tags" => tag_pairs, "env" => env),
   ws_event_head(event, conn, ready, t3, handler) + u8(route) + bytes(protocol) + pairs(tag_pairs) +
     pairs(env)]
end
ws_env = [
  ["REQUEST_METHOD", "GET"], ["SCRIPT_NAME", ""], ["PATH_INFO", "/cable"], ["QUERY_STRING", ""],
  ["SERVER_NAME", "localhost"], ["SERVER_PORT", "9292"], ["SERVER_PROTOCOL", "HTTP/1.1"],
  ["REMOTE_ADDR", "127.0.0.1"], ["rack.url_scheme", "http"], ["HTTP_HOST", "localhost:9292"],
  ["HTTP_COOKIE", "session=abc"], ["HTTP_SEC_WEBSOCKET_PROTOCOL", "actioncable-v1-json, actioncable-unsupported"],
  ["REQUEST_URI", "/cable"], ["puma_plus.request_id", "41"], ["puma_plus.queue_ns", "800"]
]
good("ws-open", *ws_open(42, 1, 5_000_000_000, 5_000_020_000, "cable", 0, "actioncable-v1-json",
                         [], ws_env))
good("ws-open-flexible-no-protocol", *ws_open(43, 2, 10, 20, "", 1, "", [], []))
good("ws-open-tags", *ws_open(50, 4, 11, 21, "chat", 0, "", ["room:42", "user:7, with a comma", ""],
                              [["PATH_INFO", "/chat"]]))
good("ws-open-max", *ws_open(U64_BIG, U64_BIG, U64_BIG - 1, U64_BIG, "h" * 255, 1, "chat.v2",
                             ["caf\u00e9"], [["PATH_INFO", "/caf\u00e9"], ["", ""]]))

def ws_message(event, conn, ready, t3, handler, opcode, data)
  [ws_event_json("WS_MESSAGE", event, conn, ready, t3, handler)
     .merge("opcode" => opcode, "data_hex" => hex(data.b)),
   ws_event_head(event, conn, ready, t3, handler) + u8(opcode) + data.b]
end
good("ws-message-text", *ws_message(44, 1, 6_000_000_000, 6_000_001_000, "cable", 1,
                                    "{\"command\":\"message\",\"data\":\"h\u00e9\"}"))
good("ws-message-binary", *ws_message(45, 2, 7, 8, "", 2, (0..255).to_a.reverse.pack("C*")))
good("ws-message-empty", *ws_message(46, 3, 9, 9, "\x00\xff".b, 1, ""))

def ws_close(event, conn, ready, t3, handler, code, by, reason)
  [ws_event_json("WS_CLOSE", event, conn, ready, t3, handler)
     .merge("code" => code, "by" => by, "reason_hex" => hex(reason.b)),
   ws_event_head(event, conn, ready, t3, handler) + u16(code) + u8(by) + reason.b]
end
good("ws-close-peer", *ws_close(47, 1, 8_000_000_000, 8_000_000_500, "cable", 1000, 0, "bye"))
good("ws-close-no-status", *ws_close(48, 2, 1, 2, "", 1005, 0, ""))
good("ws-close-server", *ws_close(49, 3, 3, 4, "chat", 1009, 1, "message too big"))
good("ws-close-transport-lost", *ws_close(U64_BIG, U64_BIG, 5, 6, "", 1006, 2, ""))

def ws_done(event, t4, t5, gvl, cpu)
  [{ "type" => "WS_DONE", "event_id" => event, "t4_ns" => t4, "t5_ns" => t5,
     "gvl_wait_ns" => gvl, "cpu_ns" => cpu },
   u64(event) + u64(t4) + u64(t5) + i64(gvl) + i64(cpu)]
end
good("ws-done", *ws_done(44, 6_000_002_000, 6_000_052_000, -1, 41_000))
good("ws-done-max", *ws_done(U64_BIG, U64_BIG - 1, U64_BIG, U64_BIG, -1))

def ws_send(conn, opcode, data)
  [{ "type" => "WS_SEND", "conn_id" => conn, "opcode" => opcode, "data_hex" => hex(data.b) },
   u64(conn) + u8(opcode) + data.b]
end
good("ws-send-text", *ws_send(1, 1, "{\"type\":\"welcome\"}"))
good("ws-send-binary", *ws_send(U64_BIG, 2, "\x00\xff\x80".b))
good("ws-send-empty", *ws_send(2, 1, ""))

def ws_tag(conn, op, tag, prefix, suffix)
  [{ "type" => "WS_TAG", "conn_id" => conn, "op" => op, "tag_hex" => hex(tag.b),
     "prefix_hex" => hex(prefix.b), "suffix_hex" => hex(suffix.b) },
   u64(conn) + u8(op) + bytes(tag) + bytes(prefix) + bytes(suffix)]
end
good("ws-tag-add", *ws_tag(1, 0, "room:42", "", ""))
good("ws-tag-add-envelope",
     *ws_tag(1, 0, "chat_room_42",
             "{\"identifier\":\"{\\\"channel\\\":\\\"ChatChannel\\\",\\\"room\\\":42}\",\"message\":", "}"))
good("ws-tag-remove", *ws_tag(2, 1, "room:42", "", ""))
good("ws-tag-remove-all", *ws_tag(U64_BIG, 2, "", "", ""))

def ws_broadcast(opcode, tag, data)
  [{ "type" => "WS_BROADCAST", "opcode" => opcode, "tag_hex" => hex(tag.b), "data_hex" => hex(data.b) },
   u8(opcode) + bytes(tag) + data.b]
end
good("ws-broadcast", *ws_broadcast(1, "chat_room_42", "{\"text\":\"hi\"}"))
good("ws-broadcast-binary-empty-tag", *ws_broadcast(2, "", "\x01\x02".b))

def ws_close_conn(conn, code, reason)
  [{ "type" => "WS_CLOSE_CONN", "conn_id" => conn, "code" => code, "reason_hex" => hex(reason.b) },
   u64(conn) + u16(code) + reason.b]
end
good("ws-close-conn", *ws_close_conn(1, 1000, ""))
good("ws-close-conn-reason", *ws_close_conn(U64_BIG, 4001, "unauthorized"))

# ---- malformed frames --------------------------------------------------------------------
hello_payload = u16(1) + u32(1) + u32(0) + u32(0) + u32(0)
bad("bad-reserved-first", "reserved", "HELLO with reserved byte 1 = 0x01",
    header(0x01, 18, reserved: "\x01\x00\x00") + hello_payload)
bad("bad-reserved-last", "reserved", "SPAWN with reserved byte 3 = 0x80",
    header(0x30, 4, reserved: "\x00\x00\x80") + u32(1))
bad("bad-unknown-type", "unknown_type", "type 0x7f does not exist", header(0x7f, 0))
bad("bad-type-zero", "unknown_type", "type 0x00 does not exist", header(0x00, 4) + u32(0))
bad("bad-type-0x14", "unknown_type", "type 0x14 (next to CANCEL) does not exist",
    header(0x14, 8) + u64(1))
bad("bad-hijack-long", "length_mismatch", "HIJACK payload 9 bytes, fields need 8",
    header(0x23, 9) + u64(1) + "\x00")
bad("bad-hijacked-no-result", "length_mismatch", "HIJACKED payload 8 bytes, no result byte",
    header(0x15, 8) + u64(1))
bad("bad-length-over-max", "too_large",
    "BODY header with length 4 MiB + 1; only the header is present: reject before the payload",
    header(0x11, 4_194_305))
bad("bad-length-u32-max", "too_large", "RESPONSE_BODY header with length 0xffffffff",
    header(0x21, U32_MAX))
bad("bad-hello-short", "length_mismatch", "HELLO payload 17 bytes, fields need 18",
    header(0x01, 17) + hello_payload[0, 17])
bad("bad-hello-long", "length_mismatch", "HELLO payload 19 bytes, one trailing byte",
    header(0x01, 19) + hello_payload + "\x00")
bad("bad-spawn-short", "length_mismatch", "SPAWN payload 3 bytes", header(0x30, 3) + "\x00\x00\x01")
bad("bad-body-end-long", "length_mismatch", "BODY_END payload 9 bytes",
    header(0x12, 9) + u64(1) + "\x00")
bad("bad-cancel-empty", "length_mismatch", "CANCEL with empty payload", header(0x13, 0))
bad("bad-body-no-id", "length_mismatch", "BODY payload 4 bytes, shorter than its u64 request_id",
    header(0x11, 4) + u32(1))
bad("bad-response-end-short", "length_mismatch", "RESPONSE_END payload 40 bytes, fields need 48",
    header(0x22, 40) + u64(1) * 5)
bad("bad-parked-short", "length_mismatch", "PARKED payload 12 bytes (no boot_ns low half), fields need 16",
    header(0x37, 12) + u32(1) + u32(0) + u32(0))
bad("bad-slots-short", "length_mismatch", "SLOTS payload 2 bytes, fields need 4",
    header(0x18, 2) + u8(0) + u8(5))
bad("bad-slot-close-empty", "length_mismatch", "SLOT_CLOSE payload 0 bytes, fields need 4",
    header(0x19, 0))
bad("bad-activate-long", "length_mismatch", "ACTIVATE payload 8 bytes, fields need 4",
    header(0x38, 8) + u32(1) + u32(0))
bad("bad-type-0x3f", "unknown_type", "type 0x3F (after the last control-channel type) does not exist", header(0x3F, 4) + u32(1))
bad("bad-ready-long", "length_mismatch", "READY payload 16 bytes, fields need 12",
    header(0x33, 16) + u32(1) + u64(2) + u32(0))
req_head = u64(1) + u64(2) + u64(3) + u8(0)
p = req_head + u32(5) + bytes("REQUEST_METHOD") + bytes("GET") + bytes("")
bad("bad-request-pairs-overrun", "length_mismatch",
    "REQUEST env pairs count 5 but one pair and the body length fill the payload",
    header(0x10, p.bytesize) + p)
p = req_head + pairs([["A", "b"]]) + u32(100) + "abc"
bad("bad-request-body-overrun", "length_mismatch", "REQUEST body says 100 bytes, 3 present",
    header(0x10, p.bytesize) + p)
p = req_head + pairs([]) + bytes("xy") + "z"
bad("bad-request-trailing", "length_mismatch", "REQUEST with one byte after the body field",
    header(0x10, p.bytesize) + p)
p = req_head + u32(1) + u32(3) + "KEY" + u32(0xffff_fff0)
bad("bad-request-value-huge", "length_mismatch", "REQUEST env value length 0xfffffff0",
    header(0x10, p.bytesize) + p)
p = u64(1) + u16(200) + u32(1) + bytes("Content-Type")
bad("bad-head-pair-missing-value", "length_mismatch",
    "RESPONSE_HEAD pair with a key and no value", header(0x20, p.bytesize) + p)
p = u64(1) + u32(1) + bytes("link")
bad("bad-early-hints-pair-missing-value", "length_mismatch",
    "EARLY_HINTS pair with a key and no value", header(0x26, p.bytesize) + p)
bad("bad-early-hints-short", "length_mismatch", "EARLY_HINTS payload 8 bytes, fields need 12",
    header(0x26, 8) + u64(1))
bad("bad-timeout-short", "length_mismatch", "TIMEOUT payload 8 bytes, fields need 12",
    header(0x16, 8) + u64(1))
bad("bad-heartbeat-long", "length_mismatch", "HEARTBEAT payload 17 bytes, fields need 16",
    header(0x24, 17) + u32(1) + u32(0) + i64(0) + "\x00")
bad("bad-heartbeat-interval-empty", "length_mismatch", "HEARTBEAT_INTERVAL with empty payload",
    header(0x17, 0))
bad("bad-adopt-short", "length_mismatch", "ADOPT payload 4 bytes, fields need 8",
    header(0x39, 4) + u32(1))
bad("bad-type-0x25", "unknown_type", "type 0x25 (next to HEARTBEAT) is unassigned",
    header(0x25, 8) + u64(1))
p = ws_event_head(1, 1, 1, 1, "") + u8(0) + u32(10) + "ab"
bad("bad-ws-open-protocol-overrun", "length_mismatch",
    "WS_OPEN protocol says 10 bytes, 2 present, no tags and no env", header(0x40, p.bytesize) + p)
p = ws_event_head(1, 1, 1, 1, "") + u8(0) + bytes("") + pairs([])
bad("bad-ws-open-no-env", "length_mismatch", "WS_OPEN without its env pairs count",
    header(0x40, p.bytesize) + p)
p = ws_event_head(1, 1, 1, 1, "x")
bad("bad-ws-message-no-opcode", "length_mismatch", "WS_MESSAGE ends after the handler, no opcode byte",
    header(0x41, p.bytesize) + p)
p = u64(1) + u64(1) + u64(1) + u64(1) + u32(5) + "ab"
bad("bad-ws-message-handler-overrun", "length_mismatch",
    "WS_MESSAGE handler says 5 bytes, 2 present", header(0x41, p.bytesize) + p)
p = ws_event_head(1, 1, 1, 1, "") + u16(1000)
bad("bad-ws-close-short", "length_mismatch", "WS_CLOSE ends after the code, no `by` byte",
    header(0x42, p.bytesize) + p)
bad("bad-ws-done-long", "length_mismatch", "WS_DONE payload 41 bytes, fields need 40",
    header(0x43, 41) + u64(1) * 5 + "\x00")
bad("bad-ws-send-short", "length_mismatch", "WS_SEND payload 8 bytes, no opcode byte",
    header(0x44, 8) + u64(1))
p = u64(1) + u8(0) + bytes("room") + bytes("{")
bad("bad-ws-tag-no-suffix", "length_mismatch", "WS_TAG with tag and prefix, no suffix field",
    header(0x45, p.bytesize) + p)
p = u64(1) + u8(0) + bytes("room") + bytes("") + bytes("") + "x"
bad("bad-ws-tag-trailing", "length_mismatch", "WS_TAG with one byte after the suffix field",
    header(0x45, p.bytesize) + p)
p = u8(1) + u32(100) + "room"
bad("bad-ws-broadcast-tag-overrun", "length_mismatch", "WS_BROADCAST tag says 100 bytes, 4 present",
    header(0x46, p.bytesize) + p)
bad("bad-ws-close-conn-short", "length_mismatch", "WS_CLOSE_CONN payload 9 bytes, code needs 2",
    header(0x47, 9) + u64(1) + "\x03")
bad("bad-type-0x48", "unknown_type", "type 0x48 (after WS_CLOSE_CONN) is unassigned",
    header(0x48, 8) + u64(1))
bad("bad-truncated-header", "truncated", "5 bytes of an 8-byte header, then end of input",
    header(0x01, 18)[0, 5])
bad("bad-truncated-payload", "truncated", "HELLO header says 18 bytes, 10 present, then end of input",
    header(0x01, 18) + hello_payload[0, 10])

# ---- write ---------------------------------------------------------------------------------
Dir[File.join(DIR, "*.{bin,json}")].each { |f| File.delete(f) }
CASES.each do |name, json, bin|
  File.binwrite(File.join(DIR, "#{name}.bin"), bin)
  File.write(File.join(DIR, "#{name}.json"), "#{JSON.pretty_generate(json)}\n")
end
puts "wrote #{CASES.size} frames to #{DIR}"
