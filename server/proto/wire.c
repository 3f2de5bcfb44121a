/* The wire codec of docs/PROTOCOL.md: incremental decoder and encoders.
 *
 * Decoding checks the header (type known, reserved zero, length within 4 MiB) as soon as
 * the 8 header bytes are present, then waits for the whole payload and walks it with a
 * bounds-checked cursor; a payload whose fields do not fill `length` exactly is an error.
 * Nothing is copied: the frame points into the caller's buffer. */
#include "server/proto/wire.h"

#include <string.h>

static const struct {
  int type;
  const char *name;
} type_names[] = {
    {PP_WIRE_HELLO, "HELLO"},
    {PP_WIRE_REQUEST, "REQUEST"},
    {PP_WIRE_BODY, "BODY"},
    {PP_WIRE_BODY_END, "BODY_END"},
    {PP_WIRE_CANCEL, "CANCEL"},
    {PP_WIRE_HIJACKED, "HIJACKED"},
    {PP_WIRE_TIMEOUT, "TIMEOUT"},
    {PP_WIRE_HEARTBEAT_INTERVAL, "HEARTBEAT_INTERVAL"},
    {PP_WIRE_SLOTS, "SLOTS"},
    {PP_WIRE_SLOT_CLOSE, "SLOT_CLOSE"},
    {PP_WIRE_RESPONSE_HEAD, "RESPONSE_HEAD"},
    {PP_WIRE_RESPONSE_BODY, "RESPONSE_BODY"},
    {PP_WIRE_RESPONSE_END, "RESPONSE_END"},
    {PP_WIRE_HIJACK, "HIJACK"},
    {PP_WIRE_HEARTBEAT, "HEARTBEAT"},
    {PP_WIRE_EARLY_HINTS, "EARLY_HINTS"},
    {PP_WIRE_SPAWN, "SPAWN"},
    {PP_WIRE_RETIRE, "RETIRE"},
    {PP_WIRE_STOP, "STOP"},
    {PP_WIRE_READY, "READY"},
    {PP_WIRE_FORKED, "FORKED"},
    {PP_WIRE_EXITED, "EXITED"},
    {PP_WIRE_ADOPT, "ADOPT"},
    {PP_WIRE_ADOPTED_EXITED, "ADOPTED_EXITED"},
    {PP_WIRE_STANDBY, "STANDBY"},
    {PP_WIRE_PARKED, "PARKED"},
    {PP_WIRE_ACTIVATE, "ACTIVATE"},
    {PP_WIRE_WS_OPEN, "WS_OPEN"},
    {PP_WIRE_WS_MESSAGE, "WS_MESSAGE"},
    {PP_WIRE_WS_CLOSE, "WS_CLOSE"},
    {PP_WIRE_WS_DONE, "WS_DONE"},
    {PP_WIRE_WS_SEND, "WS_SEND"},
    {PP_WIRE_WS_TAG, "WS_TAG"},
    {PP_WIRE_WS_BROADCAST, "WS_BROADCAST"},
    {PP_WIRE_WS_CLOSE_CONN, "WS_CLOSE_CONN"},
};

const char *pp_wire_type_name(int type) {
  for (size_t i = 0; i < sizeof type_names / sizeof type_names[0]; i++)
    if (type_names[i].type == type) return type_names[i].name;
  return NULL;
}

int pp_wire_type_parse(const char *name) {
  for (size_t i = 0; i < sizeof type_names / sizeof type_names[0]; i++)
    if (strcmp(type_names[i].name, name) == 0) return type_names[i].type;
  return -1;
}

const char *pp_wire_strerror(int err) {
  switch (err) {
  case PP_WIRE_NEED_MORE: return "incomplete frame (need more bytes)";
  case PP_WIRE_ERESERVED: return "reserved header bytes are not zero";
  case PP_WIRE_ETYPE: return "unknown frame type";
  case PP_WIRE_ETOO_LARGE: return "payload length over the 4 MiB limit";
  case PP_WIRE_ELENGTH: return "payload fields do not exactly fill the frame length";
  case PP_WIRE_ENOSPC: return "output buffer too small";
  case PP_WIRE_EINVAL: return "a field does not fit its encoding";
  default: return "unknown wire error";
  }
}

void pp_wire_decoder_init(pp_wire_decoder *d) {
  d->err = 0;
  d->frames = 0;
}

void pp_wire_put_header(uint8_t *buf, uint8_t type, uint32_t length) {
  buf[0] = type;
  buf[1] = buf[2] = buf[3] = 0;
  pp_wire_put_u32(buf + 4, length);
}

/* A bounds-checked read cursor over one payload. Any overrun sets `bad`. */
typedef struct cursor {
  const uint8_t *p, *end;
  int bad;
} cursor;

static int have(cursor *c, size_t n) {
  if (c->bad || (size_t)(c->end - c->p) < n) {
    c->bad = 1;
    return 0;
  }
  return 1;
}
static uint8_t get8(cursor *c) {
  if (!have(c, 1)) return 0;
  return *c->p++;
}
static uint16_t get16(cursor *c) {
  if (!have(c, 2)) return 0;
  uint16_t v = (uint16_t)((c->p[0] << 8) | c->p[1]);
  c->p += 2;
  return v;
}
static uint32_t get32(cursor *c) {
  if (!have(c, 4)) return 0;
  uint32_t v = pp_wire_get_u32(c->p);
  c->p += 4;
  return v;
}
static uint64_t get64(cursor *c) {
  if (!have(c, 8)) return 0;
  uint64_t v = pp_wire_get_u64(c->p);
  c->p += 8;
  return v;
}
static void get_bytes(cursor *c, const uint8_t **data, size_t *len) {
  uint32_t n = get32(c);
  if (!have(c, n)) return;
  *data = c->p;
  *len = n;
  c->p += n;
}
static void get_pairs(cursor *c, pp_wire_pairs *pairs) {
  uint32_t count = get32(c);
  const uint8_t *start = c->p;
  for (uint32_t i = 0; i < count && !c->bad; i++) {
    for (int k = 0; k < 2; k++) {
      uint32_t n = get32(c);
      if (!have(c, n)) break;
      c->p += n;
    }
  }
  if (c->bad) return;
  pairs->data = start;
  pairs->len = (size_t)(c->p - start);
  pairs->count = count;
}
static void get_rest(cursor *c, const uint8_t **data, size_t *len) {
  *data = c->p;
  *len = (size_t)(c->end - c->p);
  c->p = c->end;
}

ssize_t pp_wire_decode(pp_wire_decoder *d, const uint8_t *buf, size_t len, pp_wire_frame *out,
                       size_t *need) {
  if (d->err) return d->err;
  if (len < PP_WIRE_HEADER_SIZE) {
    if (need) *need = PP_WIRE_HEADER_SIZE;
    return PP_WIRE_NEED_MORE;
  }
  uint8_t type = buf[0];
  uint32_t length = pp_wire_get_u32(buf + 4);
  if (!pp_wire_type_name(type)) return d->err = PP_WIRE_ETYPE;
  if (buf[1] || buf[2] || buf[3]) return d->err = PP_WIRE_ERESERVED;
  if (length > PP_WIRE_MAX_PAYLOAD) return d->err = PP_WIRE_ETOO_LARGE;
  size_t total = PP_WIRE_HEADER_SIZE + (size_t)length;
  if (len < total) {
    if (need) *need = total;
    return PP_WIRE_NEED_MORE;
  }

  memset(out, 0, sizeof *out);
  out->type = type;
  out->length = length;
  cursor c = {buf + PP_WIRE_HEADER_SIZE, buf + total, 0};
  switch (type) {
  case PP_WIRE_HELLO:
    out->version = get16(&c);
    out->pid = get32(&c);
    out->worker_index = get32(&c);
    out->thread_index = get32(&c);
    out->capabilities = get32(&c);
    break;
  case PP_WIRE_REQUEST:
    out->request_id = get64(&c);
    out->t2b_ns = get64(&c);
    out->t3_ns = get64(&c);
    out->flags = get8(&c);
    get_pairs(&c, &out->pairs);
    get_bytes(&c, &out->data, &out->data_len);
    break;
  case PP_WIRE_BODY:
  case PP_WIRE_RESPONSE_BODY:
    out->request_id = get64(&c);
    if (!c.bad) get_rest(&c, &out->data, &out->data_len);
    break;
  case PP_WIRE_BODY_END:
  case PP_WIRE_CANCEL:
  case PP_WIRE_HIJACK: out->request_id = get64(&c); break;
  case PP_WIRE_HIJACKED:
    out->request_id = get64(&c);
    out->result = get8(&c);
    if (!c.bad) get_rest(&c, &out->data, &out->data_len);
    break;
  case PP_WIRE_RESPONSE_HEAD:
    out->request_id = get64(&c);
    out->status = get16(&c);
    get_pairs(&c, &out->pairs);
    break;
  case PP_WIRE_EARLY_HINTS:
    out->request_id = get64(&c);
    get_pairs(&c, &out->pairs);
    break;
  case PP_WIRE_RESPONSE_END:
    out->request_id = get64(&c);
    out->t4_ns = get64(&c);
    out->t5_ns = get64(&c);
    out->body_read_ns = get64(&c);
    out->gvl_wait_ns = (int64_t)get64(&c);
    out->cpu_ns = (int64_t)get64(&c);
    break;
  case PP_WIRE_SPAWN:
  case PP_WIRE_STANDBY:
  case PP_WIRE_SLOTS: out->count = get32(&c); break;
  case PP_WIRE_SLOT_CLOSE: out->thread_index = get32(&c); break;
  case PP_WIRE_RETIRE:
  case PP_WIRE_ACTIVATE: out->pid = get32(&c); break;
  case PP_WIRE_STOP: out->grace_ms = get32(&c); break;
  case PP_WIRE_READY:
    out->pid = get32(&c);
    out->boot_ns = get64(&c);
    break;
  case PP_WIRE_FORKED:
    out->pid = get32(&c);
    out->worker_index = get32(&c);
    break;
  case PP_WIRE_EXITED:
  case PP_WIRE_ADOPTED_EXITED:
    out->pid = get32(&c);
    out->exit_status = (int32_t)get32(&c);
    break;
  case PP_WIRE_TIMEOUT:
    out->request_id = get64(&c);
    out->thread_index = get32(&c);
    break;
  case PP_WIRE_HEARTBEAT_INTERVAL:
    out->interval_ms = get32(&c);
    out->monitor_flags = get32(&c);
    break;
  case PP_WIRE_HEARTBEAT:
    out->pid = get32(&c);
    out->worker_index = get32(&c);
    out->heap_live_slots = (int64_t)get64(&c);
    break;
  case PP_WIRE_ADOPT:
    out->pid = get32(&c);
    out->worker_index = get32(&c);
    break;
  case PP_WIRE_PARKED:
    out->pid = get32(&c);
    out->worker_index = get32(&c);
    out->boot_ns = get64(&c);
    break;
  case PP_WIRE_WS_OPEN:
  case PP_WIRE_WS_MESSAGE:
  case PP_WIRE_WS_CLOSE:
    out->request_id = get64(&c);
    out->conn_id = get64(&c);
    out->t2b_ns = get64(&c);
    out->t3_ns = get64(&c);
    get_bytes(&c, &out->handler, &out->handler_len);
    if (type == PP_WIRE_WS_OPEN) {
      out->route = get8(&c);
      get_bytes(&c, &out->protocol, &out->protocol_len);
      get_pairs(&c, &out->tags);
      get_pairs(&c, &out->pairs);
    } else if (type == PP_WIRE_WS_MESSAGE) {
      out->opcode = get8(&c);
      if (!c.bad) get_rest(&c, &out->data, &out->data_len);
    } else {
      out->code = get16(&c);
      out->by = get8(&c);
      if (!c.bad) get_rest(&c, &out->data, &out->data_len);
    }
    break;
  case PP_WIRE_WS_DONE:
    out->request_id = get64(&c);
    out->t4_ns = get64(&c);
    out->t5_ns = get64(&c);
    out->gvl_wait_ns = (int64_t)get64(&c);
    out->cpu_ns = (int64_t)get64(&c);
    break;
  case PP_WIRE_WS_SEND:
    out->conn_id = get64(&c);
    out->opcode = get8(&c);
    if (!c.bad) get_rest(&c, &out->data, &out->data_len);
    break;
  case PP_WIRE_WS_TAG:
    out->conn_id = get64(&c);
    out->tag_op = get8(&c);
    get_bytes(&c, &out->tag, &out->tag_len);
    get_bytes(&c, &out->prefix, &out->prefix_len);
    get_bytes(&c, &out->suffix, &out->suffix_len);
    break;
  case PP_WIRE_WS_BROADCAST:
    out->opcode = get8(&c);
    get_bytes(&c, &out->tag, &out->tag_len);
    if (!c.bad) get_rest(&c, &out->data, &out->data_len);
    break;
  case PP_WIRE_WS_CLOSE_CONN:
    out->conn_id = get64(&c);
    out->code = get16(&c);
    if (!c.bad) get_rest(&c, &out->data, &out->data_len);
    break;
  }
  if (c.bad || c.p != c.end) return d->err = PP_WIRE_ELENGTH;
  d->frames++;
  return (ssize_t)total;
}

/* Payload size of *f, or a negative error. */
static ssize_t payload_size(const pp_wire_frame *f) {
  switch (f->type) {
  case PP_WIRE_HELLO: return 18;
  case PP_WIRE_REQUEST:
    if (f->data_len > UINT32_MAX) return PP_WIRE_EINVAL;
    return 25 + 4 + (ssize_t)f->pairs.len + 4 + (ssize_t)f->data_len;
  case PP_WIRE_BODY:
  case PP_WIRE_RESPONSE_BODY: return 8 + (ssize_t)f->data_len;
  case PP_WIRE_BODY_END:
  case PP_WIRE_CANCEL:
  case PP_WIRE_HIJACK: return 8;
  case PP_WIRE_HIJACKED: return 9 + (ssize_t)f->data_len;
  case PP_WIRE_RESPONSE_HEAD: return 10 + 4 + (ssize_t)f->pairs.len;
  case PP_WIRE_EARLY_HINTS: return 8 + 4 + (ssize_t)f->pairs.len;
  case PP_WIRE_RESPONSE_END: return 48;
  case PP_WIRE_SPAWN:
  case PP_WIRE_RETIRE:
  case PP_WIRE_STOP:
  case PP_WIRE_STANDBY:
  case PP_WIRE_ACTIVATE:
  case PP_WIRE_SLOTS:
  case PP_WIRE_SLOT_CLOSE: return 4;
  case PP_WIRE_PARKED: return 16;
  case PP_WIRE_READY: return 12;
  case PP_WIRE_FORKED:
  case PP_WIRE_EXITED:
  case PP_WIRE_ADOPT:
  case PP_WIRE_ADOPTED_EXITED: return 8;
  case PP_WIRE_HEARTBEAT: return 16;
  case PP_WIRE_TIMEOUT: return 12;
  case PP_WIRE_HEARTBEAT_INTERVAL: return 8;
  case PP_WIRE_WS_OPEN:
    if (f->protocol_len > UINT32_MAX || f->handler_len > UINT32_MAX) return PP_WIRE_EINVAL;
    return 36 + (ssize_t)f->handler_len + 1 + 4 + (ssize_t)f->protocol_len + 4 +
           (ssize_t)f->tags.len + 4 + (ssize_t)f->pairs.len;
  case PP_WIRE_WS_MESSAGE:
    if (f->handler_len > UINT32_MAX) return PP_WIRE_EINVAL;
    return 36 + (ssize_t)f->handler_len + 1 + (ssize_t)f->data_len;
  case PP_WIRE_WS_CLOSE:
    if (f->handler_len > UINT32_MAX) return PP_WIRE_EINVAL;
    return 36 + (ssize_t)f->handler_len + 3 + (ssize_t)f->data_len;
  case PP_WIRE_WS_DONE: return 40;
  case PP_WIRE_WS_SEND: return 9 + (ssize_t)f->data_len;
  case PP_WIRE_WS_TAG:
    if (f->tag_len > UINT32_MAX || f->prefix_len > UINT32_MAX || f->suffix_len > UINT32_MAX)
      return PP_WIRE_EINVAL;
    return 9 + 12 + (ssize_t)(f->tag_len + f->prefix_len + f->suffix_len);
  case PP_WIRE_WS_BROADCAST:
    if (f->tag_len > UINT32_MAX) return PP_WIRE_EINVAL;
    return 1 + 4 + (ssize_t)f->tag_len + (ssize_t)f->data_len;
  case PP_WIRE_WS_CLOSE_CONN: return 10 + (ssize_t)f->data_len;
  default: return PP_WIRE_ETYPE;
  }
}

ssize_t pp_wire_encoded_size(const pp_wire_frame *f) {
  ssize_t n = payload_size(f);
  if (n < 0) return n;
  if ((size_t)n > PP_WIRE_MAX_PAYLOAD) return PP_WIRE_ETOO_LARGE;
  return n + PP_WIRE_HEADER_SIZE;
}

static uint8_t *put16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)(v >> 8);
  p[1] = (uint8_t)v;
  return p + 2;
}
static uint8_t *put32(uint8_t *p, uint32_t v) {
  pp_wire_put_u32(p, v);
  return p + 4;
}
static uint8_t *put64(uint8_t *p, uint64_t v) {
  pp_wire_put_u64(p, v);
  return p + 8;
}
static uint8_t *put_raw(uint8_t *p, const uint8_t *data, size_t len) {
  if (len) memcpy(p, data, len);
  return p + len;
}
static uint8_t *put_bytes(uint8_t *p, const uint8_t *data, size_t len) {
  return put_raw(put32(p, (uint32_t)len), data, len);
}

ssize_t pp_wire_encode(const pp_wire_frame *f, uint8_t *buf, size_t cap) {
  ssize_t total = pp_wire_encoded_size(f);
  if (total < 0) return total;
  if ((size_t)total > cap) return PP_WIRE_ENOSPC;
  pp_wire_put_header(buf, f->type, (uint32_t)(total - PP_WIRE_HEADER_SIZE));
  uint8_t *p = buf + PP_WIRE_HEADER_SIZE;
  switch (f->type) {
  case PP_WIRE_HELLO:
    p = put16(p, f->version);
    p = put32(p, f->pid);
    p = put32(p, f->worker_index);
    p = put32(p, f->thread_index);
    p = put32(p, f->capabilities);
    break;
  case PP_WIRE_REQUEST:
    p = put64(p, f->request_id);
    p = put64(p, f->t2b_ns);
    p = put64(p, f->t3_ns);
    *p++ = f->flags;
    p = put32(p, f->pairs.count);
    p = put_raw(p, f->pairs.data, f->pairs.len);
    p = put32(p, (uint32_t)f->data_len);
    p = put_raw(p, f->data, f->data_len);
    break;
  case PP_WIRE_BODY:
  case PP_WIRE_RESPONSE_BODY:
    p = put64(p, f->request_id);
    p = put_raw(p, f->data, f->data_len);
    break;
  case PP_WIRE_BODY_END:
  case PP_WIRE_CANCEL:
  case PP_WIRE_HIJACK: p = put64(p, f->request_id); break;
  case PP_WIRE_HIJACKED:
    p = put64(p, f->request_id);
    *p++ = f->result;
    p = put_raw(p, f->data, f->data_len);
    break;
  case PP_WIRE_RESPONSE_HEAD:
    p = put64(p, f->request_id);
    p = put16(p, f->status);
    p = put32(p, f->pairs.count);
    p = put_raw(p, f->pairs.data, f->pairs.len);
    break;
  case PP_WIRE_EARLY_HINTS:
    p = put64(p, f->request_id);
    p = put32(p, f->pairs.count);
    p = put_raw(p, f->pairs.data, f->pairs.len);
    break;
  case PP_WIRE_RESPONSE_END:
    p = put64(p, f->request_id);
    p = put64(p, f->t4_ns);
    p = put64(p, f->t5_ns);
    p = put64(p, f->body_read_ns);
    p = put64(p, (uint64_t)f->gvl_wait_ns);
    p = put64(p, (uint64_t)f->cpu_ns);
    break;
  case PP_WIRE_SPAWN:
  case PP_WIRE_STANDBY:
  case PP_WIRE_SLOTS: p = put32(p, f->count); break;
  case PP_WIRE_SLOT_CLOSE: p = put32(p, f->thread_index); break;
  case PP_WIRE_RETIRE:
  case PP_WIRE_ACTIVATE: p = put32(p, f->pid); break;
  case PP_WIRE_STOP: p = put32(p, f->grace_ms); break;
  case PP_WIRE_READY:
    p = put32(p, f->pid);
    p = put64(p, f->boot_ns);
    break;
  case PP_WIRE_FORKED:
    p = put32(p, f->pid);
    p = put32(p, f->worker_index);
    break;
  case PP_WIRE_EXITED:
  case PP_WIRE_ADOPTED_EXITED:
    p = put32(p, f->pid);
    p = put32(p, (uint32_t)f->exit_status);
    break;
  case PP_WIRE_TIMEOUT:
    p = put64(p, f->request_id);
    p = put32(p, f->thread_index);
    break;
  case PP_WIRE_HEARTBEAT_INTERVAL:
    p = put32(p, f->interval_ms);
    p = put32(p, f->monitor_flags);
    break;
  case PP_WIRE_HEARTBEAT:
    p = put32(p, f->pid);
    p = put32(p, f->worker_index);
    p = put64(p, (uint64_t)f->heap_live_slots);
    break;
  case PP_WIRE_ADOPT:
    p = put32(p, f->pid);
    p = put32(p, f->worker_index);
    break;
  case PP_WIRE_PARKED:
    p = put32(p, f->pid);
    p = put32(p, f->worker_index);
    p = put64(p, f->boot_ns);
    break;
  case PP_WIRE_WS_OPEN:
  case PP_WIRE_WS_MESSAGE:
  case PP_WIRE_WS_CLOSE:
    p = put64(p, f->request_id);
    p = put64(p, f->conn_id);
    p = put64(p, f->t2b_ns);
    p = put64(p, f->t3_ns);
    p = put_bytes(p, f->handler, f->handler_len);
    if (f->type == PP_WIRE_WS_OPEN) {
      *p++ = f->route;
      p = put_bytes(p, f->protocol, f->protocol_len);
      p = put32(p, f->tags.count);
      p = put_raw(p, f->tags.data, f->tags.len);
      p = put32(p, f->pairs.count);
      p = put_raw(p, f->pairs.data, f->pairs.len);
    } else if (f->type == PP_WIRE_WS_MESSAGE) {
      *p++ = f->opcode;
      p = put_raw(p, f->data, f->data_len);
    } else {
      p = put16(p, f->code);
      *p++ = f->by;
      p = put_raw(p, f->data, f->data_len);
    }
    break;
  case PP_WIRE_WS_DONE:
    p = put64(p, f->request_id);
    p = put64(p, f->t4_ns);
    p = put64(p, f->t5_ns);
    p = put64(p, (uint64_t)f->gvl_wait_ns);
    p = put64(p, (uint64_t)f->cpu_ns);
    break;
  case PP_WIRE_WS_SEND:
    p = put64(p, f->conn_id);
    *p++ = f->opcode;
    p = put_raw(p, f->data, f->data_len);
    break;
  case PP_WIRE_WS_TAG:
    p = put64(p, f->conn_id);
    *p++ = f->tag_op;
    p = put_bytes(p, f->tag, f->tag_len);
    p = put_bytes(p, f->prefix, f->prefix_len);
    p = put_bytes(p, f->suffix, f->suffix_len);
    break;
  case PP_WIRE_WS_BROADCAST:
    *p++ = f->opcode;
    p = put_bytes(p, f->tag, f->tag_len);
    p = put_raw(p, f->data, f->data_len);
    break;
  case PP_WIRE_WS_CLOSE_CONN:
    p = put64(p, f->conn_id);
    p = put16(p, f->code);
    p = put_raw(p, f->data, f->data_len);
    break;
  }
  return (ssize_t)(p - buf);
}

void pp_wire_pairs_iter_init(pp_wire_pairs_iter *it, const pp_wire_pairs *pairs) {
  it->p = pairs->data;
  it->end = pairs->data ? pairs->data + pairs->len : NULL;
  it->left = pairs->count;
}

int pp_wire_pairs_next(pp_wire_pairs_iter *it, const uint8_t **key, uint32_t *key_len,
                       const uint8_t **value, uint32_t *value_len) {
  if (it->left == 0 || !it->p || it->end - it->p < 8) return 0;
  *key_len = pp_wire_get_u32(it->p);
  *key = it->p + 4;
  it->p += 4 + *key_len;
  *value_len = pp_wire_get_u32(it->p);
  *value = it->p + 4;
  it->p += 4 + *value_len;
  it->left--;
  return 1;
}
