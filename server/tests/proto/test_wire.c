/* Tests for server/proto/wire.c: table-driven round trips of every frame type, every truncated
 * prefix of each (must say "need more", never decode or fail), sticky errors, header
 * rejections, and the golden corpus docs/protocol-corpus/ (decode every .bin and compare with
 * its .json; build the frame from the .json alone, encode it and compare the bytes; reject
 * every bad-*.bin with the error class its .json names). */
#include <CUnit/Basic.h>
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/base/buf.h"
#include "server/proto/http1.h"
#include "server/proto/wire.h"

#ifndef PP_CORPUS_DIR
#define PP_CORPUS_DIR "docs/protocol-corpus"
#endif

static uint8_t big[PP_WIRE_MAX_PAYLOAD + 64];

/* Every prefix shorter than the frame must give NEED_MORE with a sensible `need`. */
static void check_prefixes(const uint8_t *bytes, size_t len) {
  for (size_t n = 0; n < len; n++) {
    pp_wire_decoder d;
    pp_wire_decoder_init(&d);
    pp_wire_frame f;
    size_t need = 0;
    ssize_t r = pp_wire_decode(&d, bytes, n, &f, &need);
    CU_ASSERT_EQUAL(r, PP_WIRE_NEED_MORE);
    if (r != PP_WIRE_NEED_MORE) {
      fprintf(stderr, "prefix %zu of %zu: got %zd\n", n, len, r);
      return;
    }
    CU_ASSERT(need > n);
    CU_ASSERT(need <= len);
  }
}

static void roundtrip(const pp_wire_frame *in) {
  uint8_t buf[4096];
  ssize_t n = pp_wire_encode(in, buf, sizeof buf);
  CU_ASSERT_FATAL(n > 0);
  CU_ASSERT_EQUAL(n, pp_wire_encoded_size(in));
  /* too small a buffer */
  CU_ASSERT_EQUAL(pp_wire_encode(in, buf, (size_t)n - 1), PP_WIRE_ENOSPC);
  pp_wire_decoder d;
  pp_wire_decoder_init(&d);
  pp_wire_frame out;
  CU_ASSERT_EQUAL(pp_wire_decode(&d, buf, (size_t)n, &out, NULL), n);
  uint8_t again[4096];
  CU_ASSERT_EQUAL(pp_wire_encode(&out, again, sizeof again), n);
  CU_ASSERT(memcmp(buf, again, (size_t)n) == 0);
  check_prefixes(buf, (size_t)n);
  /* Two frames back to back decode one at a time. */
  uint8_t two[8192];
  memcpy(two, buf, (size_t)n);
  memcpy(two + n, buf, (size_t)n);
  pp_wire_decoder_init(&d);
  CU_ASSERT_EQUAL(pp_wire_decode(&d, two, 2 * (size_t)n, &out, NULL), n);
  CU_ASSERT_EQUAL(pp_wire_decode(&d, two + n, (size_t)n, &out, NULL), n);
  CU_ASSERT_EQUAL(d.frames, 2);
}

static void test_roundtrip_all_types(void) {
  pp_buf pairs;
  pp_buf_init(&pairs);
  pp_h1_put_pair(&pairs, "REQUEST_METHOD", 14, "GET", 3);
  pp_h1_put_pair(&pairs, "", 0, "", 0);
  const uint8_t body[] = {0, 1, 2, 0xff};

  pp_wire_frame f;
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_HELLO, f.version = 1, f.pid = 77, f.worker_index = 3, f.thread_index = 4,
  f.capabilities = 3;
  roundtrip(&f);

  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_REQUEST, f.request_id = UINT64_MAX, f.t2b_ns = 5, f.t3_ns = 6, f.flags = 1;
  f.pairs.data = pairs.data, f.pairs.len = pairs.len, f.pairs.count = 2;
  f.data = body, f.data_len = sizeof body;
  roundtrip(&f);

  int id_types[] = {PP_WIRE_BODY,          PP_WIRE_BODY_END, PP_WIRE_CANCEL,
                    PP_WIRE_RESPONSE_BODY, PP_WIRE_HIJACK,   PP_WIRE_HIJACKED};
  for (int i = 0; i < 6; i++) {
    memset(&f, 0, sizeof f);
    f.type = (uint8_t)id_types[i], f.request_id = 42;
    if (f.type == PP_WIRE_BODY || f.type == PP_WIRE_RESPONSE_BODY || f.type == PP_WIRE_HIJACKED)
      f.data = body, f.data_len = sizeof body;
    if (f.type == PP_WIRE_HIJACKED) f.result = PP_WIRE_HIJACK_REFUSED;
    roundtrip(&f);
  }

  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_RESPONSE_HEAD, f.request_id = 9, f.status = 404;
  f.pairs.data = pairs.data, f.pairs.len = pairs.len, f.pairs.count = 2;
  roundtrip(&f);

  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_RESPONSE_END, f.request_id = 9, f.t4_ns = 1, f.t5_ns = 2, f.body_read_ns = 3,
  f.gvl_wait_ns = -1, f.cpu_ns = 12345;
  roundtrip(&f);

  int u32_types[] = {PP_WIRE_SPAWN,    PP_WIRE_RETIRE, PP_WIRE_STOP,      PP_WIRE_STANDBY,
                     PP_WIRE_ACTIVATE, PP_WIRE_SLOTS,  PP_WIRE_SLOT_CLOSE};
  for (int i = 0; i < 7; i++) {
    memset(&f, 0, sizeof f);
    f.type = (uint8_t)u32_types[i], f.count = 2, f.pid = 2, f.grace_ms = 2;
    if (f.type == PP_WIRE_SLOT_CLOSE) f.count = 0, f.thread_index = 2;
    roundtrip(&f);
  }
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_READY, f.pid = 1, f.boot_ns = 1ull << 40;
  roundtrip(&f);
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_FORKED, f.pid = 1, f.worker_index = 7;
  roundtrip(&f);
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_EXITED, f.pid = 1, f.exit_status = -9;
  roundtrip(&f);
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_PARKED, f.pid = 3, f.worker_index = 2, f.boot_ns = (1ull << 40) + 5;
  roundtrip(&f);

  /* The monitor connection's frames and the shepherd-restart ones. */
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_TIMEOUT, f.request_id = UINT64_MAX - 1, f.thread_index = 7;
  roundtrip(&f);
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_HEARTBEAT_INTERVAL, f.interval_ms = 250;
  roundtrip(&f);
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_HEARTBEAT, f.pid = 4242, f.worker_index = 3;
  roundtrip(&f);
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_ADOPT, f.pid = UINT32_MAX, f.worker_index = 1;
  roundtrip(&f);
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_ADOPTED_EXITED, f.pid = 12, f.exit_status = INT32_MIN;
  roundtrip(&f);

  /* WebSocket frames */
  const uint8_t tag[] = "room:1", pre[] = "{\"m\":", suf[] = "}";
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_WS_OPEN, f.request_id = 5, f.conn_id = UINT64_MAX, f.t2b_ns = 1, f.t3_ns = 2;
  f.route = PP_WIRE_WS_ROUTE_FLEXIBLE, f.protocol = tag, f.protocol_len = 6;
  f.handler = pre, f.handler_len = 3;
  f.tags.data = pairs.data, f.tags.len = pairs.len, f.tags.count = 2;
  f.pairs.data = pairs.data, f.pairs.len = pairs.len, f.pairs.count = 2;
  roundtrip(&f);
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_WS_OPEN, f.request_id = 5, f.conn_id = 1; /* empty protocol, no pairs */
  roundtrip(&f);
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_WS_MESSAGE, f.request_id = 6, f.conn_id = 9, f.opcode = 2;
  f.handler = suf, f.handler_len = 1;
  f.data = body, f.data_len = sizeof body;
  roundtrip(&f);
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_WS_CLOSE, f.request_id = 7, f.conn_id = 9, f.code = 1006,
  f.by = PP_WIRE_WS_BY_TRANSPORT;
  roundtrip(&f);
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_WS_DONE, f.request_id = 7, f.t4_ns = 3, f.t5_ns = 4, f.gvl_wait_ns = -1,
  f.cpu_ns = 99;
  roundtrip(&f);
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_WS_SEND, f.conn_id = 9, f.opcode = 1, f.data = body, f.data_len = 2;
  roundtrip(&f);
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_WS_TAG, f.conn_id = 9, f.tag_op = PP_WIRE_WS_TAG_ADD, f.tag = tag, f.tag_len = 6,
  f.prefix = pre, f.prefix_len = 5, f.suffix = suf, f.suffix_len = 1;
  roundtrip(&f);
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_WS_TAG, f.conn_id = 9, f.tag_op = PP_WIRE_WS_TAG_REMOVE_ALL;
  roundtrip(&f);
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_WS_BROADCAST, f.opcode = 1, f.tag = tag, f.tag_len = 6, f.data = body,
  f.data_len = 1;
  roundtrip(&f);
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_WS_CLOSE_CONN, f.conn_id = 9, f.code = 4000, f.data = tag, f.data_len = 6;
  roundtrip(&f);

  /* Pairs iteration. */
  memset(&f, 0, sizeof f);
  f.pairs.data = pairs.data, f.pairs.len = pairs.len, f.pairs.count = 2;
  pp_wire_pairs_iter it;
  pp_wire_pairs_iter_init(&it, &f.pairs);
  const uint8_t *k, *v;
  uint32_t kl, vl;
  CU_ASSERT_EQUAL(pp_wire_pairs_next(&it, &k, &kl, &v, &vl), 1);
  CU_ASSERT(kl == 14 && memcmp(k, "REQUEST_METHOD", 14) == 0 && vl == 3);
  CU_ASSERT_EQUAL(pp_wire_pairs_next(&it, &k, &kl, &v, &vl), 1);
  CU_ASSERT(kl == 0 && vl == 0);
  CU_ASSERT_EQUAL(pp_wire_pairs_next(&it, &k, &kl, &v, &vl), 0);
  pp_buf_dispose(&pairs);
}

static void test_header_errors_sticky(void) {
  pp_wire_decoder d;
  pp_wire_frame f;
  uint8_t hdr[8];
  /* unknown type, even with length 0 */
  pp_wire_put_header(hdr, 0x14, 0);
  pp_wire_decoder_init(&d);
  CU_ASSERT_EQUAL(pp_wire_decode(&d, hdr, 8, &f, NULL), PP_WIRE_ETYPE);
  /* sticky: a good frame afterwards still fails */
  uint8_t good[16];
  pp_wire_put_header(good, PP_WIRE_CANCEL, 8);
  memset(good + 8, 0, 8);
  CU_ASSERT_EQUAL(pp_wire_decode(&d, good, 16, &f, NULL), PP_WIRE_ETYPE);
  pp_wire_decoder_init(&d);
  CU_ASSERT_EQUAL(pp_wire_decode(&d, good, 16, &f, NULL), 16);
  /* reserved */
  pp_wire_put_header(hdr, PP_WIRE_CANCEL, 8);
  hdr[2] = 1;
  pp_wire_decoder_init(&d);
  CU_ASSERT_EQUAL(pp_wire_decode(&d, hdr, 8, &f, NULL), PP_WIRE_ERESERVED);
  /* too large, from the header alone */
  pp_wire_put_header(hdr, PP_WIRE_RESPONSE_BODY, PP_WIRE_MAX_PAYLOAD + 1);
  pp_wire_decoder_init(&d);
  CU_ASSERT_EQUAL(pp_wire_decode(&d, hdr, 8, &f, NULL), PP_WIRE_ETOO_LARGE);
  /* exactly the maximum is accepted */
  pp_wire_put_header(big, PP_WIRE_RESPONSE_BODY, PP_WIRE_MAX_PAYLOAD);
  pp_wire_decoder_init(&d);
  size_t need = 0;
  CU_ASSERT_EQUAL(pp_wire_decode(&d, big, 100, &f, &need), PP_WIRE_NEED_MORE);
  CU_ASSERT_EQUAL(need, PP_WIRE_MAX_PAYLOAD + 8);
  CU_ASSERT_EQUAL(pp_wire_decode(&d, big, PP_WIRE_MAX_PAYLOAD + 8, &f, NULL),
                  PP_WIRE_MAX_PAYLOAD + 8);
  CU_ASSERT_EQUAL(f.data_len, PP_WIRE_MAX_PAYLOAD - 8);
  /* length mismatch: short and long fixed-size payloads */
  uint8_t shortf[8 + 7] = {0};
  pp_wire_put_header(shortf, PP_WIRE_CANCEL, 7);
  pp_wire_decoder_init(&d);
  CU_ASSERT_EQUAL(pp_wire_decode(&d, shortf, sizeof shortf, &f, NULL), PP_WIRE_ELENGTH);
  uint8_t longf[8 + 9] = {0};
  pp_wire_put_header(longf, PP_WIRE_CANCEL, 9);
  pp_wire_decoder_init(&d);
  CU_ASSERT_EQUAL(pp_wire_decode(&d, longf, sizeof longf, &f, NULL), PP_WIRE_ELENGTH);
  /* pairs count running past the end */
  uint8_t head[8 + 14] = {0};
  pp_wire_put_header(head, PP_WIRE_RESPONSE_HEAD, 14);
  head[8 + 8] = 0, head[8 + 9] = 200;
  pp_wire_put_u32(head + 8 + 10, 1); /* one pair, but no bytes */
  pp_wire_decoder_init(&d);
  CU_ASSERT_EQUAL(pp_wire_decode(&d, head, sizeof head, &f, NULL), PP_WIRE_ELENGTH);
  CU_ASSERT(strlen(pp_wire_strerror(PP_WIRE_ELENGTH)) > 0);
  CU_ASSERT_STRING_EQUAL(pp_wire_type_name(PP_WIRE_EXITED), "EXITED");
  CU_ASSERT_EQUAL(pp_wire_type_parse("BODY_END"), PP_WIRE_BODY_END);
  CU_ASSERT_EQUAL(pp_wire_type_parse("NOPE"), -1);
}

/* ---- golden corpus ---- */

static uint8_t *read_all(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  pp_buf b;
  pp_buf_init(&b);
  uint8_t tmp[65536];
  size_t n;
  while ((n = fread(tmp, 1, sizeof tmp, f)) > 0)
    pp_buf_append(&b, tmp, n);
  fclose(f);
  *len = b.len;
  if (!b.data) b.data = malloc(1);
  return b.data;
}

static int hex_decode(const char *hex, pp_buf *out) {
  size_t n = strlen(hex);
  if (n % 2) return -1;
  for (size_t i = 0; i < n; i += 2) {
    unsigned v;
    if (sscanf(hex + i, "%2x", &v) != 1) return -1;
    uint8_t c = (uint8_t)v;
    pp_buf_append(out, &c, 1);
  }
  return 0;
}

static int pairs_from_json(json_t *arr, pp_buf *out, uint32_t *count) {
  if (!json_is_array(arr)) return -1;
  size_t i;
  json_t *pair;
  *count = 0;
  json_array_foreach(arr, i, pair) {
    json_t *k = json_array_get(pair, 0), *v = json_array_get(pair, 1);
    if (!json_is_string(k) || !json_is_string(v)) return -1;
    pp_h1_put_pair(out, json_string_value(k), json_string_length(k), json_string_value(v),
                   json_string_length(v));
    (*count)++;
  }
  return 0;
}

/* Builds a frame from the .json alone (not from the .bin). Returns 0 or -1 (unknown key). */
static int frame_from_json(json_t *j, pp_wire_frame *f, pp_buf *pairs, pp_buf *data, pp_buf strs[4],
                           const char *file) {
  memset(f, 0, sizeof *f);
  const char *type = json_string_value(json_object_get(j, "type"));
  if (!type || pp_wire_type_parse(type) < 0) return -1;
  f->type = (uint8_t)pp_wire_type_parse(type);
  const char *key;
  json_t *v;
  json_object_foreach(j, key, v) {
    if (strcmp(key, "type") == 0) continue;
    uint64_t u = (uint64_t)json_integer_value(v);
    if (strcmp(key, "version") == 0)
      f->version = (uint16_t)u;
    else if (strcmp(key, "pid") == 0)
      f->pid = (uint32_t)u;
    else if (strcmp(key, "worker_index") == 0)
      f->worker_index = (uint32_t)u;
    else if (strcmp(key, "heap_live_slots") == 0)
      f->heap_live_slots = (int64_t)json_integer_value(v);
    else if (strcmp(key, "thread_index") == 0)
      f->thread_index = (uint32_t)u;
    else if (strcmp(key, "capabilities") == 0)
      f->capabilities = (uint32_t)u;
    else if (strcmp(key, "request_id") == 0)
      f->request_id = u;
    else if (strcmp(key, "t2b_ns") == 0)
      f->t2b_ns = u;
    else if (strcmp(key, "t3_ns") == 0)
      f->t3_ns = u;
    else if (strcmp(key, "flags") == 0)
      f->flags = (uint8_t)u;
    else if (strcmp(key, "result") == 0)
      f->result = (uint8_t)u;
    else if (strcmp(key, "status") == 0 &&
             (f->type == PP_WIRE_EXITED || f->type == PP_WIRE_ADOPTED_EXITED))
      f->exit_status = (int32_t)json_integer_value(v);
    else if (strcmp(key, "status") == 0)
      f->status = (uint16_t)u;
    else if (strcmp(key, "t4_ns") == 0)
      f->t4_ns = u;
    else if (strcmp(key, "t5_ns") == 0)
      f->t5_ns = u;
    else if (strcmp(key, "body_read_ns") == 0)
      f->body_read_ns = u;
    else if (strcmp(key, "gvl_wait_ns") == 0)
      f->gvl_wait_ns = (int64_t)json_integer_value(v);
    else if (strcmp(key, "cpu_ns") == 0)
      f->cpu_ns = (int64_t)json_integer_value(v);
    else if (strcmp(key, "count") == 0)
      f->count = (uint32_t)u;
    else if (strcmp(key, "grace_ms") == 0)
      f->grace_ms = (uint32_t)u;
    else if (strcmp(key, "boot_ns") == 0)
      f->boot_ns = u;
    else if (strcmp(key, "interval_ms") == 0)
      f->interval_ms = (uint32_t)u;
    else if (strcmp(key, "monitor_flags") == 0)
      f->monitor_flags = (uint32_t)u;
    else if (strcmp(key, "event_id") == 0)
      f->request_id = u;
    else if (strcmp(key, "t_ready_ns") == 0)
      f->t2b_ns = u;
    else if (strcmp(key, "conn_id") == 0)
      f->conn_id = u;
    else if (strcmp(key, "route") == 0)
      f->route = (uint8_t)u;
    else if (strcmp(key, "opcode") == 0)
      f->opcode = (uint8_t)u;
    else if (strcmp(key, "by") == 0)
      f->by = (uint8_t)u;
    else if (strcmp(key, "op") == 0)
      f->tag_op = (uint8_t)u;
    else if (strcmp(key, "code") == 0)
      f->code = (uint16_t)u;
    else if (strcmp(key, "tags") == 0) {
      if (pairs_from_json(v, &strs[5], &f->tags.count)) return -1;
    } else if (strcmp(key, "protocol_hex") == 0 || strcmp(key, "tag_hex") == 0 ||
               strcmp(key, "prefix_hex") == 0 || strcmp(key, "suffix_hex") == 0 ||
               strcmp(key, "handler_hex") == 0) {
      pp_buf *b = strcmp(key, "protocol_hex") == 0 ? &strs[0]
                  : strcmp(key, "tag_hex") == 0    ? &strs[1]
                  : strcmp(key, "prefix_hex") == 0 ? &strs[2]
                  : strcmp(key, "suffix_hex") == 0 ? &strs[3]
                                                   : &strs[4];
      if (hex_decode(json_string_value(v), b)) return -1;
    } else if (strcmp(key, "env") == 0 || strcmp(key, "headers") == 0) {
      if (pairs_from_json(v, pairs, &f->pairs.count)) return -1;
    } else if (strcmp(key, "body_hex") == 0 || strcmp(key, "chunk_hex") == 0 ||
               strcmp(key, "buffered_hex") == 0 || strcmp(key, "data_hex") == 0 ||
               strcmp(key, "reason_hex") == 0) {
      if (hex_decode(json_string_value(v), data)) return -1;
    } else {
      fprintf(stderr, "%s: unknown key %s\n", file, key);
      return -1;
    }
  }
  f->pairs.data = pairs->data;
  f->pairs.len = pairs->len;
  f->data = data->data;
  f->data_len = data->len;
  f->protocol = strs[0].data, f->protocol_len = strs[0].len;
  f->tag = strs[1].data, f->tag_len = strs[1].len;
  f->prefix = strs[2].data, f->prefix_len = strs[2].len;
  f->suffix = strs[3].data, f->suffix_len = strs[3].len;
  f->handler = strs[4].data, f->handler_len = strs[4].len;
  f->tags.data = strs[5].data, f->tags.len = strs[5].len;
  return 0;
}

/* Field-by-field comparison of a decoded frame with the one built from JSON. */
static int frames_equal(const pp_wire_frame *a, const pp_wire_frame *b) {
  if (a->type != b->type || a->version != b->version || a->pid != b->pid ||
      a->worker_index != b->worker_index || a->thread_index != b->thread_index ||
      a->capabilities != b->capabilities || a->request_id != b->request_id ||
      a->t2b_ns != b->t2b_ns || a->t3_ns != b->t3_ns || a->flags != b->flags ||
      a->result != b->result || a->status != b->status || a->t4_ns != b->t4_ns ||
      a->t5_ns != b->t5_ns || a->body_read_ns != b->body_read_ns ||
      a->gvl_wait_ns != b->gvl_wait_ns || a->cpu_ns != b->cpu_ns || a->count != b->count ||
      a->grace_ms != b->grace_ms || a->boot_ns != b->boot_ns || a->exit_status != b->exit_status ||
      a->interval_ms != b->interval_ms || a->monitor_flags != b->monitor_flags ||
      a->conn_id != b->conn_id || a->route != b->route || a->opcode != b->opcode ||
      a->by != b->by || a->tag_op != b->tag_op || a->code != b->code)
    return 0;
  if (a->tags.count != b->tags.count) return 0;
  const uint8_t *as[6] = {a->protocol, a->tag, a->prefix, a->suffix, a->handler, a->tags.data};
  const uint8_t *bs[6] = {b->protocol, b->tag, b->prefix, b->suffix, b->handler, b->tags.data};
  size_t al[6] = {a->protocol_len, a->tag_len,     a->prefix_len,
                  a->suffix_len,   a->handler_len, a->tags.len};
  size_t bl[6] = {b->protocol_len, b->tag_len,     b->prefix_len,
                  b->suffix_len,   b->handler_len, b->tags.len};
  for (int i = 0; i < 6; i++)
    if (al[i] != bl[i] || (al[i] && memcmp(as[i], bs[i], al[i]))) return 0;
  if (a->pairs.count != b->pairs.count || a->pairs.len != b->pairs.len) return 0;
  if (a->pairs.len && memcmp(a->pairs.data, b->pairs.data, a->pairs.len)) return 0;
  if (a->data_len != b->data_len) return 0;
  if (a->data_len && memcmp(a->data, b->data, a->data_len)) return 0;
  return 1;
}

static int expected_error(const char *cls) {
  if (strcmp(cls, "reserved") == 0) return PP_WIRE_ERESERVED;
  if (strcmp(cls, "unknown_type") == 0) return PP_WIRE_ETYPE;
  if (strcmp(cls, "too_large") == 0) return PP_WIRE_ETOO_LARGE;
  if (strcmp(cls, "length_mismatch") == 0) return PP_WIRE_ELENGTH;
  if (strcmp(cls, "truncated") == 0) return PP_WIRE_NEED_MORE;
  return 1;
}

static void test_golden_corpus(void) {
  DIR *dir = opendir(PP_CORPUS_DIR);
  CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
  struct dirent *e;
  int good = 0, bad = 0;
  while ((e = readdir(dir))) {
    size_t n = strlen(e->d_name);
    if (n < 5 || strcmp(e->d_name + n - 4, ".bin") != 0) continue;
    char bin_path[1024], json_path[1024];
    snprintf(bin_path, sizeof bin_path, "%s/%s", PP_CORPUS_DIR, e->d_name);
    snprintf(json_path, sizeof json_path, "%s/%.*s.json", PP_CORPUS_DIR, (int)(n - 4), e->d_name);
    size_t len = 0;
    uint8_t *bytes = read_all(bin_path, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(bytes);
    json_error_t jerr;
    json_t *j = json_load_file(json_path, 0, &jerr);
    if (!j) fprintf(stderr, "%s: %s\n", json_path, jerr.text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    pp_wire_decoder d;
    pp_wire_decoder_init(&d);
    pp_wire_frame got;
    if (strncmp(e->d_name, "bad-", 4) == 0) {
      bad++;
      const char *cls = json_string_value(json_object_get(j, "error"));
      CU_ASSERT_PTR_NOT_NULL_FATAL(cls);
      int want = expected_error(cls);
      ssize_t r = pp_wire_decode(&d, bytes, len, &got, NULL);
      if (r != want) fprintf(stderr, "%s: class %s, decoder said %zd\n", e->d_name, cls, r);
      CU_ASSERT_EQUAL(r, want);
      CU_ASSERT(r <= 0); /* never accepted */
    } else {
      good++;
      ssize_t r = pp_wire_decode(&d, bytes, len, &got, NULL);
      if (r != (ssize_t)len) fprintf(stderr, "%s: decode returned %zd of %zu\n", e->d_name, r, len);
      CU_ASSERT_EQUAL_FATAL(r, (ssize_t)len);
      pp_buf pairs, data, strs[6];
      pp_buf_init(&pairs);
      pp_buf_init(&data);
      for (int i = 0; i < 6; i++)
        pp_buf_init(&strs[i]);
      pp_wire_frame want;
      CU_ASSERT_EQUAL_FATAL(frame_from_json(j, &want, &pairs, &data, strs, e->d_name), 0);
      int eq = frames_equal(&got, &want);
      if (!eq) fprintf(stderr, "%s: decoded frame differs from the .json\n", e->d_name);
      CU_ASSERT(eq);
      /* re-encode the decoded frame and the JSON-built frame: both give the .bin bytes */
      ssize_t m = pp_wire_encode(&got, big, sizeof big);
      CU_ASSERT_EQUAL(m, (ssize_t)len);
      CU_ASSERT(m == (ssize_t)len && memcmp(big, bytes, len) == 0);
      m = pp_wire_encode(&want, big, sizeof big);
      CU_ASSERT(m == (ssize_t)len && memcmp(big, bytes, len) == 0);
      if (len <= 4096) check_prefixes(bytes, len);
      pp_buf_dispose(&pairs);
      pp_buf_dispose(&data);
      for (int i = 0; i < 6; i++)
        pp_buf_dispose(&strs[i]);
    }
    json_decref(j);
    free(bytes);
  }
  closedir(dir);
  printf("\n  corpus: %d good, %d bad frames\n", good, bad);
  CU_ASSERT(good >= 20);
  CU_ASSERT(bad >= 5);
}

/* Random bytes and mutated valid frames, deterministic seed: the decoder returns a frame, need
 * more, or a sticky error, never reads out of bounds (ASan), and a decoded frame re-encodes to
 * the same bytes. */
static void test_random_input_never_crashes(void) {
  uint64_t rng = 0x2545f4914f6cdd1dull;
#define NEXT() (rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17, rng)
  uint8_t buf[256], again[512];
  int decoded = 0, errors = 0;
  for (int iter = 0; iter < 50000; iter++) {
    size_t len = 8 + NEXT() % 64;
    for (size_t i = 0; i < len; i++)
      buf[i] = (uint8_t)NEXT();
    /* mostly plausible headers: a known type, zero reserved, a small length */
    static const uint8_t types[] = {0x01, 0x10, 0x11, 0x12, 0x13, 0x16, 0x17, 0x18, 0x19,
                                    0x20, 0x21, 0x22, 0x24, 0x26, 0x30, 0x31, 0x32, 0x33,
                                    0x34, 0x35, 0x36, 0x37, 0x38, 0x39, 0x3a, 0x40, 0x41,
                                    0x42, 0x43, 0x44, 0x45, 0x46, 0x47, 0x14, 0x00};
    buf[0] = types[NEXT() % sizeof types];
    if (NEXT() % 8) buf[1] = buf[2] = buf[3] = 0;
    if (NEXT() % 8) pp_wire_put_u32(buf + 4, (uint32_t)(NEXT() % (len - 7)));
    pp_wire_decoder d;
    pp_wire_decoder_init(&d);
    pp_wire_frame f;
    size_t need = 0;
    ssize_t r = pp_wire_decode(&d, buf, len, &f, &need);
    if (r > 0) {
      decoded++;
      CU_ASSERT((size_t)r <= len);
      CU_ASSERT_EQUAL(pp_wire_encode(&f, again, sizeof again), r);
      CU_ASSERT(memcmp(again, buf, (size_t)r) == 0);
    } else if (r < 0) {
      errors++;
      CU_ASSERT_EQUAL(pp_wire_decode(&d, buf, len, &f, NULL), r); /* sticky */
    }
  }
#undef NEXT
  CU_ASSERT(decoded > 1000);
  CU_ASSERT(errors > 1000);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("wire", NULL, NULL);
  CU_add_test(s, "roundtrip every type and every truncated prefix", test_roundtrip_all_types);
  CU_add_test(s, "header errors, sticky errors, length mismatch", test_header_errors_sticky);
  CU_add_test(s, "golden corpus", test_golden_corpus);
  CU_add_test(s, "random input never crashes", test_random_input_never_crashes);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failures = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}
