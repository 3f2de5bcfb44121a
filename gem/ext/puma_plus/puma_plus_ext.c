/* The worker's hot codec in C (docs/PROTOCOL.md, docs/RACK.md): REQUEST payload → Request
 * Struct with the env pairs, and the three response encoders. Each function is a drop-in for
 * the pure-Ruby one of the same name in lib/puma_plus/wire.rb, which stays the reference and
 * the fallback: same arguments, same results byte for byte, same ProtocolError reasons and
 * messages. The workload: one REQUEST of ~15 short pairs and one small response per request,
 * where Ruby spends its time in unpack/byteslice calls and small String allocations.
 *
 * Defines on PumaPlus::Wire: native_decode_request, native_decode_request_env,
 * native_decode_request_at,
 * native_append_response_head, native_append_response_headers, native_append_response_body,
 * native_append_response_end, native_decode_ws_message, native_append_ws_done,
 * native_append_ws_send, native_append_ws_broadcast (Wire.codec= picks them),
 * native_send_nowait and native_recv.
 * Sans-I/O but for two functions, native_send_nowait and native_recv, the worker's write of a
 * response to the server and its read of the next frames: no clocks, no globals beyond the
 * cached class, symbol and constant handles. */
#include <ruby.h>
#include <ruby/encoding.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <sys/socket.h>
#include <ruby/thread.h>

#define PP_HEADER_SIZE   8
#define PP_MAX_PAYLOAD   (4u * 1024u * 1024u)
#define PP_REQUEST       0x10
#define KEY_CACHE_MAX    64u /* env keys remembered per connection, by pair index */
#define PP_RESPONSE_HEAD 0x20
#define PP_EARLY_HINTS   0x26
#define PP_RESPONSE_BODY 0x21
#define PP_RESPONSE_END  0x22
#define PP_WS_DONE       0x43
#define PP_WS_SEND       0x44
#define PP_WS_BROADCAST  0x46

static VALUE mWire, mResponse, cRequest, cWsMessage, eProtocolError;
static VALUE empty_body; /* Wire::EMPTY_BODY: the body of every REQUEST without one */
static ID id_new, id_to_s, id_flatten_headers;
static VALUE sym_length_mismatch;

static uint32_t get_u32(const unsigned char *p) {
  return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static uint64_t get_u64(const unsigned char *p) {
  return ((uint64_t)get_u32(p) << 32) | get_u32(p + 4);
}

static void put_u32(unsigned char *p, uint32_t v) {
  p[0] = (unsigned char)(v >> 24), p[1] = (unsigned char)(v >> 16);
  p[2] = (unsigned char)(v >> 8), p[3] = (unsigned char)v;
}

static void put_u64(unsigned char *p, uint64_t v) {
  put_u32(p, (uint32_t)(v >> 32));
  put_u32(p + 4, (uint32_t)v);
}

/* The Ruby codec's `mismatch`: ProtocolError(:length_mismatch, "REQUEST payload of N bytes,
 * fields need ..."). Never returns. */
NORETURN(static void vmismatch(const char *frame, long length, const char *fmt, va_list ap));
static void vmismatch(const char *frame, long length, const char *fmt, va_list ap) {
  char need[160];
  vsnprintf(need, sizeof need, fmt, ap);
  VALUE msg = rb_sprintf("%s payload of %ld bytes, fields need %s", frame, length, need);
  rb_exc_raise(rb_funcall(eProtocolError, id_new, 2, sym_length_mismatch, msg));
}

NORETURN(static void mismatch(long length, const char *fmt, ...));
static void mismatch(long length, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vmismatch("REQUEST", length, fmt, ap);
  va_end(ap);
}

/* mismatch for a WebSocket frame named `frame`. */
NORETURN(static void ws_mismatch(const char *frame, long length, const char *fmt, ...));
static void ws_mismatch(const char *frame, long length, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vmismatch(frame, length, fmt, ap);
  va_end(ap);
}

/* Decodes a REQUEST payload. With `env` nil the pairs become a flat Array [key, value, ...]
 * (the Request's env field); with `env` a Hash they are stored into it in order, so a
 * repeated key keeps its last value, as `env[key] = value` in a loop would. Keys are
 * interned frozen UTF-8 Strings (Hash#[]= then keeps them without a copy), values binary
 * Strings. Raises ProtocolError as the Ruby codec does. */
static VALUE decode_request(const unsigned char *p, long len, VALUE env, VALUE key_cache) {
  if (len < 33) mismatch(len, "at least 33");
  VALUE id = ULL2NUM(get_u64(p)), t2b = ULL2NUM(get_u64(p + 8)), t3 = ULL2NUM(get_u64(p + 16));
  VALUE flags = INT2FIX(p[24]);
  long pos = 25;
  if (pos + 4 > len) mismatch(len, "room for a pairs count at %ld", pos);
  uint32_t count = get_u32(p + pos);
  pos += 4;
  if ((uint64_t)count * 8 > (uint64_t)(len - pos)) mismatch(len, "room for %u pairs", count);
  VALUE flat = NIL_P(env) ? rb_ary_new_capa((long)count * 2) : env;
  rb_encoding *utf8 = rb_utf8_encoding();
  /* Pairs for the env go in with rb_hash_bulk_insert, up to PAIRS_AT_ONCE at a time: the
   * table grows once, not per key, and no per-key update callback runs. The pending VALUEs
   * live on this C stack, which the GC scans. */
  enum { PAIRS_AT_ONCE = 32 };
  VALUE pending[2 * PAIRS_AT_ONCE];
  long npending = 0;
  for (uint32_t i = 0; i < count; i++) {
    if (pos + 4 > len) mismatch(len, "room for a key length at %ld", pos);
    uint32_t n = get_u32(p + pos);
    pos += 4;
    if (n > (uint64_t)(len - pos)) mismatch(len, "%u key bytes at %ld", n, pos);
    VALUE key = Qnil;
    if (!NIL_P(key_cache) && (long)i < RARRAY_LEN(key_cache)) {
      /* The server sends the same keys in the same order request after request: the key
       * this connection saw at this index last time is reused when its bytes match,
       * without hashing them for the intern table. */
      VALUE seen = RARRAY_AREF(key_cache, (long)i);
      if (RB_TYPE_P(seen, T_STRING) && RSTRING_LEN(seen) == (long)n &&
          memcmp(RSTRING_PTR(seen), p + pos, n) == 0)
        key = seen;
    }
    if (NIL_P(key)) {
      key = rb_enc_interned_str((const char *)p + pos, n, utf8);
      if (!NIL_P(key_cache) && i < KEY_CACHE_MAX) rb_ary_store(key_cache, (long)i, key);
    }
    pos += n;
    if (pos + 4 > len) mismatch(len, "room for a value length at %ld", pos);
    n = get_u32(p + pos);
    pos += 4;
    if (n > (uint64_t)(len - pos)) mismatch(len, "%u value bytes at %ld", n, pos);
    VALUE value = rb_str_new((const char *)p + pos, n);
    pos += n;
    if (NIL_P(env)) {
      rb_ary_push(flat, key);
      rb_ary_push(flat, value);
      continue;
    }
    pending[npending++] = key, pending[npending++] = value;
    if (npending == 2 * PAIRS_AT_ONCE) rb_hash_bulk_insert(npending, pending, env), npending = 0;
  }
  if (npending) rb_hash_bulk_insert(npending, pending, env);
  if (pos + 4 > len) mismatch(len, "room for the body length at %ld", pos);
  uint32_t body_len = get_u32(p + pos);
  pos += 4;
  if (body_len != (uint64_t)(len - pos))
    mismatch(len, "%ld (body of %u bytes at %ld)", pos + (long)body_len, body_len, pos);
  VALUE body = body_len ? rb_str_new((const char *)p + pos, body_len) : empty_body;
  VALUE argv[6] = {id, t2b, t3, flags, flat, body};
  return rb_class_new_instance(6, argv, cRequest);
}

/* Wire.native_decode_request(payload) → Request(request_id, t2b_ns, t3_ns, flags, env, body)
 * with env the flat pairs [key, value, ...]. */
static VALUE native_decode_request(VALUE self, VALUE payload) {
  (void)self;
  StringValue(payload);
  VALUE req =
      decode_request((const unsigned char *)RSTRING_PTR(payload), RSTRING_LEN(payload), Qnil, Qnil);
  RB_GC_GUARD(payload);
  return req;
}

/* Wire.native_decode_request_env(payload, proto) → the same Request with env a Hash: a dup of
 * `proto` (the worker's frozen prototype env) holding the pairs. The worker's hot path: no
 * flat Array, no Ruby loop over the pairs. A malformed payload raises; its half-built env is
 * garbage. */
static VALUE native_decode_request_env(VALUE self, VALUE payload, VALUE proto) {
  (void)self;
  StringValue(payload);
  Check_Type(proto, T_HASH);
  VALUE req = decode_request((const unsigned char *)RSTRING_PTR(payload), RSTRING_LEN(payload),
                             rb_hash_dup(proto), Qnil);
  RB_GC_GUARD(payload);
  return req;
}

/* Wire.native_decode_request_at(buf, pos, proto, key_cache) → the REQUEST frame (header and
 * payload) at byte `pos` of `buf` decoded as decode_request_env does, read in place (no payload
 * String); nil when `buf` holds less than the whole frame; false when the frame there is not a
 * well-formed REQUEST header (another type, reserved bytes set, length over MAX_PAYLOAD):
 * the caller's generic decoder then takes it, and raises where it must. The Decoder's hot
 * path; the frame's size is 8 + the header's length field. `key_cache` is an Array the
 * caller keeps per connection and never touches: the env keys by pair index, of Strings
 * only (a key found there with the same bytes is used without interning it again). */
static VALUE native_decode_request_at(VALUE self, VALUE buf, VALUE pos, VALUE proto,
                                      VALUE key_cache) {
  (void)self;
  StringValue(buf);
  Check_Type(proto, T_HASH);
  Check_Type(key_cache, T_ARRAY);
  rb_check_frozen(key_cache);
  long off = NUM2LONG(pos), size = RSTRING_LEN(buf);
  if (off < 0) rb_raise(rb_eArgError, "offset can't be negative");
  if (off > size || size - off < PP_HEADER_SIZE) return Qnil;
  const unsigned char *h = (const unsigned char *)RSTRING_PTR(buf) + off;
  uint32_t length = get_u32(h + 4);
  if (h[0] != PP_REQUEST || h[1] || h[2] || h[3] || length > PP_MAX_PAYLOAD) return Qfalse;
  if ((uint64_t)(size - off - PP_HEADER_SIZE) < length) return Qnil;
  VALUE req = decode_request(h + PP_HEADER_SIZE, (long)length, rb_hash_dup(proto), key_cache);
  RB_GC_GUARD(buf);
  return req;
}

static void check_out(VALUE out) {
  StringValue(out);
  rb_str_modify(out);
}

/* Wire.native_append_response_head(out, request_id, status, flat) → out. */
static VALUE native_append_response_head(VALUE self, VALUE out, VALUE request_id, VALUE status,
                                         VALUE flat) {
  (void)self;
  check_out(out);
  Check_Type(flat, T_ARRAY);
  long n = RARRAY_LEN(flat);
  uint64_t payload = 8 + 2 + 4;
  for (long i = 0; i < n; i++) {
    VALUE s = RARRAY_AREF(flat, i);
    StringValue(s);
    payload += 4 + (uint64_t)RSTRING_LEN(s);
  }
  if (payload > PP_MAX_PAYLOAD)
    rb_raise(rb_eArgError, "response head of %llu bytes over %u", (unsigned long long)payload,
             PP_MAX_PAYLOAD);
  unsigned char fixed[PP_HEADER_SIZE + 14];
  put_u32(fixed, (uint32_t)PP_RESPONSE_HEAD << 24);
  put_u32(fixed + 4, (uint32_t)payload);
  put_u64(fixed + 8, NUM2ULL(request_id));
  unsigned int code = NUM2UINT(status);
  fixed[16] = (unsigned char)(code >> 8), fixed[17] = (unsigned char)code;
  put_u32(fixed + 18, (uint32_t)(n / 2));
  rb_str_buf_cat(out, (const char *)fixed, sizeof fixed);
  for (long i = 0; i < n; i++) {
    VALUE s = RARRAY_AREF(flat, i);
    unsigned char len4[4];
    put_u32(len4, (uint32_t)RSTRING_LEN(s));
    rb_str_buf_cat(out, (const char *)len4, 4);
    rb_str_buf_cat(out, RSTRING_PTR(s), RSTRING_LEN(s));
  }
  return out;
}

/* Wire.native_append_early_hints(out, request_id, flat) → out: RESPONSE_HEAD's layout
 * without the status (docs/PROTOCOL.md, EARLY_HINTS). */
static VALUE native_append_early_hints(VALUE self, VALUE out, VALUE request_id, VALUE flat) {
  (void)self;
  check_out(out);
  Check_Type(flat, T_ARRAY);
  long n = RARRAY_LEN(flat);
  uint64_t payload = 8 + 4;
  for (long i = 0; i < n; i++) {
    VALUE s = RARRAY_AREF(flat, i);
    StringValue(s);
    payload += 4 + (uint64_t)RSTRING_LEN(s);
  }
  if (payload > PP_MAX_PAYLOAD)
    rb_raise(rb_eArgError, "early hints of %llu bytes over %u", (unsigned long long)payload,
             PP_MAX_PAYLOAD);
  unsigned char fixed[PP_HEADER_SIZE + 12];
  put_u32(fixed, (uint32_t)PP_EARLY_HINTS << 24);
  put_u32(fixed + 4, (uint32_t)payload);
  put_u64(fixed + 8, NUM2ULL(request_id));
  put_u32(fixed + 16, (uint32_t)(n / 2));
  rb_str_buf_cat(out, (const char *)fixed, sizeof fixed);
  for (long i = 0; i < n; i++) {
    VALUE s = RARRAY_AREF(flat, i);
    unsigned char len4[4];
    put_u32(len4, (uint32_t)RSTRING_LEN(s));
    rb_str_buf_cat(out, (const char *)len4, 4);
    rb_str_buf_cat(out, RSTRING_PTR(s), RSTRING_LEN(s));
  }
  return out;
}

/* Appends one header pair (u32 length + bytes, twice) to `out`. */
static void append_pair(VALUE out, VALUE key, const char *value, long value_len) {
  unsigned char len4[4];
  put_u32(len4, (uint32_t)RSTRING_LEN(key));
  rb_str_buf_cat(out, (const char *)len4, 4);
  rb_str_buf_cat(out, RSTRING_PTR(key), RSTRING_LEN(key));
  put_u32(len4, (uint32_t)value_len);
  rb_str_buf_cat(out, (const char *)len4, 4);
  rb_str_buf_cat(out, value, value_len);
}

struct head_state {
  VALUE out;
  uint32_t pairs;
};

static VALUE as_string(VALUE v) {
  if (RB_TYPE_P(v, T_STRING)) return v;
  v = rb_funcall(v, id_to_s, 0);
  StringValue(v);
  return v;
}

/* One header of the Hash, as Response.flatten_headers flattens it: "rack.*" names dropped,
 * nil values dropped, a String value split at "\n" (trailing empty lines dropped, as
 * String#split does), an Array value one pair per element, anything else its to_s. */
static int append_header_i(VALUE key, VALUE value, VALUE arg) {
  struct head_state *st = (struct head_state *)arg;
  key = as_string(key);
  if (RSTRING_LEN(key) >= 5 && memcmp(RSTRING_PTR(key), "rack.", 5) == 0) return ST_CONTINUE;
  if (NIL_P(value)) return ST_CONTINUE;
  if (RB_TYPE_P(value, T_ARRAY)) {
    for (long i = 0; i < RARRAY_LEN(value); i++) {
      VALUE v = as_string(RARRAY_AREF(value, i));
      append_pair(st->out, key, RSTRING_PTR(v), RSTRING_LEN(v));
      st->pairs++;
    }
    return ST_CONTINUE;
  }
  value = as_string(value);
  const char *v = RSTRING_PTR(value);
  long n = RSTRING_LEN(value);
  const char *nl = memchr(v, '\n', (size_t)n);
  if (!nl) {
    append_pair(st->out, key, v, n);
    st->pairs++;
    return ST_CONTINUE;
  }
  while (n > 0 && v[n - 1] == '\n')
    n--; /* split drops trailing empty fields */
  const char *end = v + n;
  while (v < end) {
    nl = memchr(v, '\n', (size_t)(end - v));
    const char *line_end = nl ? nl : end;
    append_pair(st->out, key, v, (long)(line_end - v));
    st->pairs++;
    v = nl ? nl + 1 : end;
  }
  return ST_CONTINUE;
}

/* Wire.native_append_response_headers(out, request_id, status, headers) → out: a RESPONSE_HEAD
 * with the Rack headers flattened as Response.flatten_headers does, written straight into
 * `out` (no flat Array). A headers object that is not a Hash goes through
 * Response.flatten_headers. */
static VALUE native_append_response_headers(VALUE self, VALUE out, VALUE request_id, VALUE status,
                                            VALUE headers) {
  if (!RB_TYPE_P(headers, T_HASH)) {
    VALUE flat = rb_funcall(mResponse, id_flatten_headers, 1, headers);
    return native_append_response_head(self, out, request_id, status, flat);
  }
  check_out(out);
  uint64_t id = NUM2ULL(request_id);
  unsigned int code = NUM2UINT(status);
  long start = RSTRING_LEN(out);
  unsigned char fixed[PP_HEADER_SIZE + 14];
  memset(fixed, 0, sizeof fixed);
  rb_str_buf_cat(out, (const char *)fixed, sizeof fixed); /* patched below */
  struct head_state st = {out, 0};
  rb_hash_foreach(headers, append_header_i, (VALUE)&st);
  uint64_t payload = (uint64_t)(RSTRING_LEN(out) - start - PP_HEADER_SIZE);
  if (payload > PP_MAX_PAYLOAD)
    rb_raise(rb_eArgError, "response head of %llu bytes over %u", (unsigned long long)payload,
             PP_MAX_PAYLOAD);
  put_u32(fixed, (uint32_t)PP_RESPONSE_HEAD << 24);
  put_u32(fixed + 4, (uint32_t)payload);
  put_u64(fixed + 8, id);
  fixed[16] = (unsigned char)(code >> 8), fixed[17] = (unsigned char)code;
  put_u32(fixed + 18, st.pairs);
  rb_str_modify(out);
  memcpy(RSTRING_PTR(out) + start, fixed, sizeof fixed);
  return out;
}

/* Wire.native_append_response_body(out, request_id, chunk) → out; split at MAX_PAYLOAD. */
static VALUE native_append_response_body(VALUE self, VALUE out, VALUE request_id, VALUE chunk) {
  (void)self;
  check_out(out);
  StringValue(chunk);
  uint64_t id = NUM2ULL(request_id);
  const char *data = RSTRING_PTR(chunk);
  long size = RSTRING_LEN(chunk), off = 0;
  const long max_part = (long)PP_MAX_PAYLOAD - 8;
  do {
    long part = size - off > max_part ? max_part : size - off;
    unsigned char head[PP_HEADER_SIZE + 8];
    put_u32(head, (uint32_t)PP_RESPONSE_BODY << 24);
    put_u32(head + 4, (uint32_t)(part + 8));
    put_u64(head + 8, id);
    rb_str_buf_cat(out, (const char *)head, sizeof head);
    rb_str_buf_cat(out, data + off, part);
    off += part;
  } while (off < size);
  return out;
}

/* Wire.native_append_response_end(out, request_id, t4, t5, body_read_ns, gvl_wait_ns, cpu_ns). */
static VALUE native_append_response_end(VALUE self, VALUE out, VALUE request_id, VALUE t4, VALUE t5,
                                        VALUE body_read_ns, VALUE gvl_wait_ns, VALUE cpu_ns) {
  (void)self;
  check_out(out);
  unsigned char f[PP_HEADER_SIZE + 48];
  put_u32(f, (uint32_t)PP_RESPONSE_END << 24);
  put_u32(f + 4, 48);
  put_u64(f + 8, NUM2ULL(request_id));
  put_u64(f + 16, NUM2ULL(t4));
  put_u64(f + 24, NUM2ULL(t5));
  put_u64(f + 32, NUM2ULL(body_read_ns));
  put_u64(f + 40, (uint64_t)NUM2LL(gvl_wait_ns));
  put_u64(f + 48, (uint64_t)NUM2LL(cpu_ns));
  rb_str_buf_cat(out, (const char *)f, sizeof f);
  return out;
}

/* Wire.native_send_nowait(fd, str) → the number of bytes of str written to the stream socket
 * fd (0..bytesize), without blocking and without releasing the GVL: send(2) with MSG_DONTWAIT
 * (the descriptor's own mode, blocking for the idle read, is left alone). 0 when the socket
 * buffer is full (EAGAIN) or a signal came first (EINTR): the caller writes the rest with
 * IO#write, which waits with the GVL released. Raises SystemCallError for any other failure
 * (EPIPE with MSG_NOSIGNAL: no SIGPIPE). IO#write would release the GVL around every write; a
 * worker thread whose siblings wait for the GVL then hands it over and takes it back once per
 * response: futex calls and a wake-up for a send(2) that does not block (docs/RACK.md, "Writes
 * and the GVL"). */
static VALUE native_send_nowait(VALUE self, VALUE fd, VALUE str) {
  (void)self;
  StringValue(str);
  int d = NUM2INT(fd);
  long len = RSTRING_LEN(str);
  if (len == 0) return INT2FIX(0);
  ssize_t n = send(d, RSTRING_PTR(str), (size_t)len, MSG_DONTWAIT | MSG_NOSIGNAL);
  RB_GC_GUARD(str);
  if (n >= 0) return LONG2NUM((long)n);
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return INT2FIX(0);
  rb_sys_fail("send");
}

/* ---- WebSocket frames (docs/PROTOCOL.md "WebSocket frames"): the per-message ones. ---- */

/* Wire.native_decode_ws_message(payload) → WsMessage(event_id, conn_id, t_ready_ns, t3_ns,
 * handler, opcode, data), as Wire.ruby_decode_ws_message: the same errors and messages. */
static VALUE native_decode_ws_message(VALUE self, VALUE payload) {
  (void)self;
  StringValue(payload);
  const unsigned char *p = (const unsigned char *)RSTRING_PTR(payload);
  long len = RSTRING_LEN(payload);
  if (len < 37) ws_mismatch("WS_MESSAGE", len, "at least 37");
  uint32_t n = get_u32(p + 32);
  if ((uint64_t)n > (uint64_t)(len - 37))
    ws_mismatch("WS_MESSAGE", len, "%u handler bytes and 1 more at 36", n);
  long pos = 36 + (long)n;
  VALUE argv[7] = {ULL2NUM(get_u64(p)),
                   ULL2NUM(get_u64(p + 8)),
                   ULL2NUM(get_u64(p + 16)),
                   ULL2NUM(get_u64(p + 24)),
                   rb_str_new((const char *)p + 36, n),
                   INT2FIX(p[pos]),
                   rb_str_new((const char *)p + pos + 1, len - pos - 1)};
  RB_GC_GUARD(payload);
  return rb_class_new_instance(7, argv, cWsMessage);
}

/* Wire.native_append_ws_done(out, event_id, t4, t5, gvl_wait_ns, cpu_ns) → out. */
static VALUE native_append_ws_done(VALUE self, VALUE out, VALUE event_id, VALUE t4, VALUE t5,
                                   VALUE gvl_wait_ns, VALUE cpu_ns) {
  (void)self;
  check_out(out);
  unsigned char f[PP_HEADER_SIZE + 40];
  put_u32(f, (uint32_t)PP_WS_DONE << 24);
  put_u32(f + 4, 40);
  put_u64(f + 8, NUM2ULL(event_id));
  put_u64(f + 16, NUM2ULL(t4));
  put_u64(f + 24, NUM2ULL(t5));
  put_u64(f + 32, (uint64_t)NUM2LL(gvl_wait_ns));
  put_u64(f + 40, (uint64_t)NUM2LL(cpu_ns));
  rb_str_buf_cat(out, (const char *)f, sizeof f);
  return out;
}

/* Wire.native_append_ws_send(out, conn_id, opcode, data) → out. */
static VALUE native_append_ws_send(VALUE self, VALUE out, VALUE conn_id, VALUE opcode, VALUE data) {
  (void)self;
  check_out(out);
  StringValue(data);
  uint64_t id = NUM2ULL(conn_id);
  unsigned int op = NUM2UINT(opcode);
  uint64_t length = 9 + (uint64_t)RSTRING_LEN(data);
  if (length > PP_MAX_PAYLOAD)
    rb_raise(rb_eArgError, "WS_SEND payload of %llu bytes over %u", (unsigned long long)length,
             PP_MAX_PAYLOAD);
  unsigned char f[PP_HEADER_SIZE + 9];
  put_u32(f, (uint32_t)PP_WS_SEND << 24);
  put_u32(f + 4, (uint32_t)length);
  put_u64(f + 8, id);
  f[16] = (unsigned char)op;
  rb_str_buf_cat(out, (const char *)f, sizeof f);
  rb_str_buf_cat(out, RSTRING_PTR(data), RSTRING_LEN(data));
  return out;
}

/* Wire.native_append_ws_broadcast(out, opcode, tag, data) → out. */
static VALUE native_append_ws_broadcast(VALUE self, VALUE out, VALUE opcode, VALUE tag,
                                        VALUE data) {
  (void)self;
  check_out(out);
  StringValue(tag);
  StringValue(data);
  unsigned int op = NUM2UINT(opcode);
  long tag_len = RSTRING_LEN(tag);
  uint64_t length = 5 + (uint64_t)tag_len + (uint64_t)RSTRING_LEN(data);
  if (length > PP_MAX_PAYLOAD)
    rb_raise(rb_eArgError, "WS_BROADCAST payload of %llu bytes over %u", (unsigned long long)length,
             PP_MAX_PAYLOAD);
  unsigned char f[PP_HEADER_SIZE + 5];
  put_u32(f, (uint32_t)PP_WS_BROADCAST << 24);
  put_u32(f + 4, (uint32_t)length);
  f[8] = (unsigned char)op;
  put_u32(f + 9, (uint32_t)tag_len);
  rb_str_buf_cat(out, (const char *)f, sizeof f);
  rb_str_buf_cat(out, RSTRING_PTR(tag), tag_len);
  rb_str_buf_cat(out, RSTRING_PTR(data), RSTRING_LEN(data));
  return out;
}

/* One recvmsg(2) on a worker connection, without the GVL: the bytes, and the descriptors that
 * came with them (SCM_RIGHTS: a spooled body's file rides on its REQUEST, docs/PROTOCOL.md). */
#define RECV_MAX_FDS 8
typedef struct recv_args {
  int fd;
  char *buf;
  size_t cap;
  ssize_t n;
  int err, nfds;
  int fds[RECV_MAX_FDS];
} recv_args;

static void *recv_nogvl(void *p) {
  recv_args *a = p;
  struct iovec iov = {a->buf, a->cap};
  union {
    struct cmsghdr h;
    char space[CMSG_SPACE(sizeof(int) * RECV_MAX_FDS)];
  } ctl;
  struct msghdr m;
  memset(&m, 0, sizeof m);
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = &ctl;
  m.msg_controllen = sizeof ctl;
  a->n = recvmsg(a->fd, &m, MSG_CMSG_CLOEXEC);
  a->err = a->n < 0 ? errno : 0;
  a->nfds = 0;
  if (a->n < 0) return NULL;
  for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < k && a->nfds < RECV_MAX_FDS; i++)
      memcpy(&a->fds[a->nfds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
  }
  return NULL;
}

/* Wire.native_recv(fd, buf, fds): the worker thread's wait for the server's next bytes, as
 * IO#readpartial(64 KiB, buf) is, on a socket in blocking mode: one recvmsg(2) that sleeps in the
 * kernel with the GVL released (Thread#raise wakes it: RUBY_UBF_IO, then the pending interrupt is
 * raised here), but with room for descriptors, which a plain read(2) would make the kernel drop.
 * Returns buf holding the bytes, or nil at EOF; each descriptor that came is pushed on `fds` as an
 * Integer (close-on-exec; the caller owns it). :wait_readable if the socket is non-blocking and
 * has nothing. Raises SystemCallError on failure. */
static VALUE native_recv(VALUE self, VALUE fd, VALUE buf, VALUE fds) {
  (void)self;
  StringValue(buf);
  Check_Type(fds, T_ARRAY);
  const long cap = 64 * 1024;
  for (;;) {
    rb_str_resize(buf, cap); /* heap-allocated at this size: its pointer does not move */
    recv_args a;
    memset(&a, 0, sizeof a);
    a.fd = NUM2INT(fd);
    a.buf = RSTRING_PTR(buf);
    a.cap = (size_t)cap;
    rb_thread_call_without_gvl(recv_nogvl, &a, RUBY_UBF_IO, NULL);
    for (int i = 0; i < a.nfds; i++)
      rb_ary_push(fds, INT2NUM(a.fds[i]));
    if (a.n > 0) {
      rb_str_set_len(buf, (long)a.n);
      return buf;
    }
    rb_str_set_len(buf, 0);
    if (a.n == 0) return Qnil;
    if (a.err == EINTR) continue; /* interrupts were checked on the way out */
    if (a.err == EAGAIN || a.err == EWOULDBLOCK) return ID2SYM(rb_intern("wait_readable"));
    rb_syserr_fail(a.err, "recvmsg");
  }
  RB_GC_GUARD(buf);
}

RUBY_FUNC_EXPORTED void Init_puma_plus_ext(void) {
  /* Ractor-safe (docs/RACK.md "Ractor slots"): the statics above are written here, once,
   * before any Ractor can call in, and only read afterwards; each holds a module, a class, a
   * frozen String with no ivars, an ID or a static Symbol, all shareable. Every function works
   * on its arguments alone (the key cache is the caller's Array), and the one Ruby method it
   * calls back (Response.flatten_headers) runs under the calling Ractor's own rules. */
#ifdef HAVE_RB_EXT_RACTOR_SAFE
  rb_ext_ractor_safe(true);
#endif
  VALUE mPumaPlus = rb_define_module("PumaPlus");
  mWire = rb_define_module_under(mPumaPlus, "Wire");
  cRequest = rb_const_get(mWire, rb_intern("Request"));
  cWsMessage = rb_const_get(mWire, rb_intern("WsMessage"));
  rb_gc_register_mark_object(cWsMessage);
  eProtocolError = rb_const_get(mWire, rb_intern("ProtocolError"));
  mResponse = rb_const_get(mPumaPlus, rb_intern("Response"));
  rb_gc_register_mark_object(mResponse);
  rb_gc_register_mark_object(cRequest);
  rb_gc_register_mark_object(eProtocolError);
  empty_body = rb_const_get(mWire, rb_intern("EMPTY_BODY"));
  rb_gc_register_mark_object(empty_body);
  id_new = rb_intern("new");
  id_to_s = rb_intern("to_s");
  id_flatten_headers = rb_intern("flatten_headers");
  sym_length_mismatch = ID2SYM(rb_intern("length_mismatch"));
  rb_define_singleton_method(mWire, "native_decode_request", native_decode_request, 1);
  rb_define_singleton_method(mWire, "native_decode_request_env", native_decode_request_env, 2);
  rb_define_singleton_method(mWire, "native_decode_request_at", native_decode_request_at, 4);
  rb_define_singleton_method(mWire, "native_append_response_head", native_append_response_head, 4);
  rb_define_singleton_method(mWire, "native_append_response_headers",
                             native_append_response_headers, 4);
  rb_define_singleton_method(mWire, "native_append_response_body", native_append_response_body, 3);
  rb_define_singleton_method(mWire, "native_append_response_end", native_append_response_end, 7);
  rb_define_singleton_method(mWire, "native_append_early_hints", native_append_early_hints, 3);
  rb_define_singleton_method(mWire, "native_send_nowait", native_send_nowait, 2);
  rb_define_singleton_method(mWire, "native_decode_ws_message", native_decode_ws_message, 1);
  rb_define_singleton_method(mWire, "native_append_ws_done", native_append_ws_done, 6);
  rb_define_singleton_method(mWire, "native_append_ws_send", native_append_ws_send, 4);
  rb_define_singleton_method(mWire, "native_append_ws_broadcast", native_append_ws_broadcast, 4);
  rb_define_singleton_method(mWire, "native_recv", native_recv, 3);
}
