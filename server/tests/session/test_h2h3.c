/* Tests for the WebSocket pieces of server/session/h2h3.c that need no sockets: the extended
 * CONNECT checked as a WebSocket handshake (pp_h2h3_ws_check), the 200 that accepts it
 * (pp_h2h3_ws_headers), and the env the app sees for it (pp_h2h3_env with websocket set: the
 * env of HTTP/1.1's upgrade). */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <string.h>

#include "server/base/buf.h"
#include "server/session/h2h3.h"

static const uint8_t *B(const char *s) {
  return (const uint8_t *)s;
}

#define HDR(n, v)                                                                                  \
  { B(n), sizeof(n) - 1, B(v), sizeof(v) - 1 }

static pp_h2h3_request connect_request(const pp_h2_header *fields, size_t n, int with_path) {
  pp_h2h3_request rq;
  memset(&rq, 0, sizeof rq);
  rq.method = B("CONNECT"), rq.method_len = 7;
  if (with_path) rq.path = B("/chat?room=1"), rq.path_len = 12;
  rq.authority = B("example.org"), rq.authority_len = 11;
  rq.headers = fields, rq.header_count = n;
  return rq;
}

static int check(const pp_h2_header *fields, size_t n, int with_path, pp_h2h3_ws *t,
                 const pp_ws_pmd_config *pmd) {
  pp_h2h3_request rq = connect_request(fields, n, with_path);
  const char *why = "";
  int st = pp_h2h3_ws_check(t, pmd, &rq, B("websocket"), 9, B("https"), 5, &why);
  CU_ASSERT_PTR_NOT_NULL(why);
  return st;
}

static void test_check(void) {
  pp_ws_pmd_config pmd;
  pp_ws_pmd_config_default(&pmd);
  pp_h2h3_ws t;
  memset(&t, 0, sizeof t);
  pp_buf_init(&t.offered);
  /* valid, with a deflate offer and subprotocols: agreed, the offer kept for the app */
  pp_h2_header ok[] = {
      HDR("sec-websocket-version", "13"), HDR("sec-websocket-protocol", "chat, superchat"),
      HDR("sec-websocket-extensions", "permessage-deflate; client_max_window_bits")};
  CU_ASSERT_EQUAL(check(ok, 3, 1, &t, &pmd), 0);
  CU_ASSERT_EQUAL(t.pmd_ok, 1);
  CU_ASSERT(strstr(t.ext_resp, "permessage-deflate") == t.ext_resp);
  CU_ASSERT(t.offered.len == 15 && !memcmp(t.offered.data, "chat, superchat", 15));
  /* deflate turned off: no agreement, still a WebSocket */
  pmd.enabled = 0;
  CU_ASSERT_EQUAL(check(ok, 3, 1, &t, &pmd), 0);
  CU_ASSERT_EQUAL(t.pmd_ok, 0);
  pmd.enabled = 1;
  /* another version: 426 (RFC 6455 §4.4) */
  pp_h2_header v8[] = {HDR("sec-websocket-version", "8")};
  CU_ASSERT_EQUAL(check(v8, 1, 1, &t, &pmd), 426);
  /* no version at all */
  CU_ASSERT_EQUAL(check(NULL, 0, 1, &t, &pmd), 426);
  /* connection-specific fields have no place in an extended CONNECT (RFC 9113 §8.2.2) */
  pp_h2_header upgrade[] = {HDR("sec-websocket-version", "13"), HDR("upgrade", "websocket")};
  CU_ASSERT_EQUAL(check(upgrade, 2, 1, &t, &pmd), 400);
  /* no :path (the libraries reset such a stream first; the check says 400 as well) */
  pp_h2_header v13[] = {HDR("sec-websocket-version", "13")};
  CU_ASSERT_EQUAL(check(v13, 1, 0, &t, &pmd), 400);
  /* an extensions value that does not parse */
  pp_h2_header badext[] = {HDR("sec-websocket-version", "13"),
                           HDR("sec-websocket-extensions", "permessage-deflate;;")};
  CU_ASSERT_EQUAL(check(badext, 2, 1, &t, &pmd), 400);
  pp_buf_dispose(&t.offered);
}

/* pairs in the wire's encoding: u32 key length, key, u32 value length, value */
static void put_pair(pp_buf *b, const char *k, const char *v) {
  pp_env_put_pair(b, k, strlen(k), v, strlen(v));
}

static const pp_h2_header *find(const pp_buf *out, size_t n, const char *name) {
  const pp_h2_header *h = (const pp_h2_header *)out->data;
  for (size_t i = 0; i < n; i++)
    if (h[i].name_len == strlen(name) && !memcmp(h[i].name, name, h[i].name_len)) return &h[i];
  return NULL;
}

static void test_headers(void) {
  pp_buf pairs, out;
  pp_buf_init(&pairs), pp_buf_init(&out);
  put_pair(&pairs, "puma-plus-websocket", "sticky");
  put_pair(&pairs, "puma-plus-websocket-tags", "room:1");
  put_pair(&pairs, "X-App", "1");
  put_pair(&pairs, "Sec-WebSocket-Protocol", "chat");
  put_pair(&pairs, "content-length", "0");
  pp_wire_pairs wp = {pairs.data, pairs.len, 5};
  pp_h2h3_ws t;
  memset(&t, 0, sizeof t);
  t.pmd_ok = 1;
  snprintf(t.ext_resp, sizeof t.ext_resp, "permessage-deflate");
  pp_ws_accept a;
  memset(&a, 0, sizeof a);
  a.protocol = B("chat"), a.protocol_len = 4;
  size_t n = pp_h2h3_ws_headers(&t, &a, "Thu, 03 Dec 2026 06:00:00 GMT", &wp, &out);
  CU_ASSERT_EQUAL(n, 4); /* x-app, date, sec-websocket-protocol, sec-websocket-extensions */
  CU_ASSERT_PTR_NOT_NULL(find(&out, n, "X-App"));
  CU_ASSERT_PTR_NOT_NULL(find(&out, n, "date"));
  CU_ASSERT_PTR_NULL(find(&out, n, "puma-plus-websocket"));
  CU_ASSERT_PTR_NULL(find(&out, n, "puma-plus-websocket-tags"));
  CU_ASSERT_PTR_NULL(find(&out, n, "content-length"));
  const pp_h2_header *p = find(&out, n, "sec-websocket-protocol");
  CU_ASSERT(p && p->value_len == 4 && !memcmp(p->value, "chat", 4));
  const pp_h2_header *e = find(&out, n, "sec-websocket-extensions");
  CU_ASSERT(e && e->value_len == 18 && !memcmp(e->value, "permessage-deflate", 18));
  /* nothing agreed, no subprotocol chosen: neither field */
  t.pmd_ok = 0;
  a.protocol = NULL, a.protocol_len = 0;
  n = pp_h2h3_ws_headers(&t, &a, NULL, &wp, &out);
  CU_ASSERT_EQUAL(n, 1);
  CU_ASSERT_PTR_NULL(find(&out, n, "sec-websocket-extensions"));
  pp_buf_dispose(&pairs), pp_buf_dispose(&out);
}

/* The value of key among the env pairs of x's REQUEST frame, or NULL. */
static char *env_value(const pp_exchange *x, const char *key, char *buf, size_t cap) {
  const uint8_t *p = x->head.data + 37, *end = x->head.data + x->queue_key_end;
  while (p + 8 <= end) {
    uint32_t kl = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
    const uint8_t *k = p + 4;
    if (k + kl + 4 > end) break;
    const uint8_t *q = k + kl;
    uint32_t vl = (uint32_t)q[0] << 24 | (uint32_t)q[1] << 16 | (uint32_t)q[2] << 8 | q[3];
    const uint8_t *v = q + 4;
    if (kl == strlen(key) && !memcmp(k, key, kl)) {
      snprintf(buf, cap, "%.*s", (int)vl, (const char *)v);
      return buf;
    }
    p = v + vl;
  }
  return NULL;
}

static void test_env(void) {
  pp_exchange x;
  memset(&x, 0, sizeof x);
  pp_buf_init(&x.head), pp_buf_init(&x.body);
  pp_buf scratch;
  pp_buf_init(&scratch);
  pp_h2_header fields[] = {HDR("sec-websocket-version", "13"),
                           HDR("sec-websocket-protocol", "chat"), HDR("cookie", "a=1")};
  pp_h2h3_request rq = connect_request(fields, 3, 1);
  rq.websocket = 1;
  rq.ws_protocols = B("chat"), rq.ws_protocols_len = 4;
  pp_env_conninfo ci = {"127.0.0.1", "localhost", "443", "https", 2, NULL, NULL, NULL, 0};
  pp_h2h3_env(&x, &scratch, "HTTP/2", &ci, &rq);
  char v[128];
  CU_ASSERT_STRING_EQUAL(env_value(&x, "REQUEST_METHOD", v, sizeof v), "GET");
  CU_ASSERT_STRING_EQUAL(env_value(&x, "HTTP_UPGRADE", v, sizeof v), "websocket");
  CU_ASSERT_STRING_EQUAL(env_value(&x, "HTTP_CONNECTION", v, sizeof v), "Upgrade");
  CU_ASSERT_STRING_EQUAL(env_value(&x, "HTTP_SEC_WEBSOCKET_VERSION", v, sizeof v), "13");
  CU_ASSERT_STRING_EQUAL(env_value(&x, "HTTP_HOST", v, sizeof v), "example.org");
  CU_ASSERT_STRING_EQUAL(env_value(&x, "PATH_INFO", v, sizeof v), "/chat");
  CU_ASSERT_STRING_EQUAL(env_value(&x, "QUERY_STRING", v, sizeof v), "room=1");
  CU_ASSERT_STRING_EQUAL(env_value(&x, "SERVER_PROTOCOL", v, sizeof v), "HTTP/2");
  CU_ASSERT_STRING_EQUAL(env_value(&x, "puma_plus.websocket?", v, sizeof v), "true");
  CU_ASSERT_STRING_EQUAL(env_value(&x, "puma_plus.websocket.protocols", v, sizeof v), "chat");
  CU_ASSERT_PTR_NULL(env_value(&x, "HTTP_SEC_WEBSOCKET_KEY", v, sizeof v));
  /* the pair count at offset 33 covers every pair written, and the queue_ns key */
  const uint8_t *c = x.head.data + 33;
  uint32_t count = (uint32_t)c[0] << 24 | (uint32_t)c[1] << 16 | (uint32_t)c[2] << 8 | c[3];
  uint32_t seen = 0;
  for (const uint8_t *p = x.head.data + 37; p < x.head.data + x.queue_key_end;) {
    uint32_t kl = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
    const uint8_t *q = p + 4 + kl;
    if (q + 4 > x.head.data + x.queue_key_end) { /* the queue_ns key: its value comes later */
      seen++;
      break;
    }
    uint32_t vl = (uint32_t)q[0] << 24 | (uint32_t)q[1] << 16 | (uint32_t)q[2] << 8 | q[3];
    p = q + 4 + vl;
    seen++;
  }
  CU_ASSERT_EQUAL(count, seen + (x.add_request_start ? 1 : 0));
  /* not a WebSocket: the method stays, no upgrade fields or pairs */
  rq.websocket = 0;
  pp_h2h3_env(&x, &scratch, "HTTP/2", &ci, &rq);
  CU_ASSERT_STRING_EQUAL(env_value(&x, "REQUEST_METHOD", v, sizeof v), "CONNECT");
  CU_ASSERT_PTR_NULL(env_value(&x, "puma_plus.websocket?", v, sizeof v));
  CU_ASSERT_PTR_NULL(env_value(&x, "HTTP_UPGRADE", v, sizeof v));
  pp_buf_dispose(&x.head), pp_buf_dispose(&x.body), pp_buf_dispose(&scratch);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("h2h3", NULL, NULL);
  CU_add_test(s, "extended CONNECT as a WebSocket handshake: 0, 426, 400", test_check);
  CU_add_test(s, "the accepting 200: the app's fields, protocol, extensions", test_headers);
  CU_add_test(s, "the env of a WebSocket over h2/h3 is HTTP/1.1's upgrade", test_env);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failures = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}
