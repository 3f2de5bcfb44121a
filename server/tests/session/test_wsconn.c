/* Tests for the pieces of server/session/wsconn.c that need no sockets: the tag table
 * (subscriptions, envelopes, removal, growth), the app's accepting response
 * (pp_ws_accept_parse, pp_ws_accept_skips_field) and the validation of the app's commands
 * (pp_wshub_command: malformed ones name why; a command for an unknown connection is counted
 * and ignored). Connections here are bare structs: the tag table only links them. */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <string.h>

#include "server/base/buf.h"
#include "server/proto/http1.h"
#include "server/session/wsconn.h"

static pp_core core;
static pp_exchange_pool pool;
static pp_wshub hub;

static const uint8_t *B(const char *s) {
  return (const uint8_t *)s;
}

static int tag(pp_wsconn *c, int op, const char *t, const char *pre, const char *suf) {
  return pp_wshub_tag(&hub, c, op, B(t), strlen(t), B(pre), strlen(pre), B(suf), strlen(suf));
}
static uint32_t count(const char *t) {
  return pp_wshub_tag_count(&hub, B(t), strlen(t));
}
static int subs_of(const pp_wsconn *c) {
  int n = 0;
  for (const pp_wssub *s = c->subs; s; s = s->cnext)
    n++;
  return n;
}

static void test_tags(void) {
  pp_wsconn a, b, c;
  memset(&a, 0, sizeof a), memset(&b, 0, sizeof b), memset(&c, 0, sizeof c);
  a.hub = b.hub = c.hub = &hub;
  CU_ASSERT_EQUAL(count("room:1"), 0);
  tag(&a, PP_WIRE_WS_TAG_ADD, "room:1", "", "");
  tag(&b, PP_WIRE_WS_TAG_ADD, "room:1", "{\"m\":", "}");
  tag(&c, PP_WIRE_WS_TAG_ADD, "room:2", "", "");
  CU_ASSERT_EQUAL(count("room:1"), 2);
  CU_ASSERT_EQUAL(count("room:2"), 1);
  CU_ASSERT_EQUAL(count("room:3"), 0);
  /* adding a tag a connection has replaces its envelope, never a second subscription */
  tag(&b, PP_WIRE_WS_TAG_ADD, "room:1", "<", ">");
  CU_ASSERT_EQUAL(count("room:1"), 2);
  CU_ASSERT_EQUAL(b.subs->prefix_len, 1);
  CU_ASSERT(memcmp(b.subs->env, "<>", 2) == 0);
  /* tags are bytes: a comma and an empty tag are tags like any other */
  tag(&a, PP_WIRE_WS_TAG_ADD, "a,b", "", "");
  tag(&a, PP_WIRE_WS_TAG_ADD, "", "", "");
  CU_ASSERT_EQUAL(count("a,b"), 1);
  CU_ASSERT_EQUAL(count(""), 1);
  CU_ASSERT_EQUAL(count("a"), 0);
  CU_ASSERT_EQUAL(subs_of(&a), 3);
  /* remove one; removing a tag it does not have changes nothing */
  tag(&a, PP_WIRE_WS_TAG_REMOVE, "room:1", "", "");
  tag(&a, PP_WIRE_WS_TAG_REMOVE, "room:9", "", "");
  CU_ASSERT_EQUAL(count("room:1"), 1);
  CU_ASSERT_EQUAL(subs_of(&a), 2);
  /* remove all: its tags are gone, the last subscriber's tag is freed */
  tag(&a, PP_WIRE_WS_TAG_REMOVE_ALL, "", "", "");
  CU_ASSERT_PTR_NULL(a.subs);
  CU_ASSERT_EQUAL(count("a,b"), 0);
  CU_ASSERT_EQUAL(count(""), 0);
  size_t before = hub.tags.count;
  tag(&b, PP_WIRE_WS_TAG_REMOVE_ALL, "", "", "");
  tag(&c, PP_WIRE_WS_TAG_REMOVE_ALL, "", "", "");
  CU_ASSERT_EQUAL(hub.tags.count, before - 2);
  CU_ASSERT_EQUAL(hub.tags.count, 0);
}

/* Thousands of tags and subscriptions through several rehashes: every count stays exact. */
static void test_tags_grow(void) {
  enum { CONNS = 64, TAGS = 3000 };
  static pp_wsconn conns[CONNS];
  memset(conns, 0, sizeof conns);
  char name[32];
  for (int t = 0; t < TAGS; t++) {
    snprintf(name, sizeof name, "stream:%d", t);
    for (int k = 0; k <= t % 5; k++)
      tag(&conns[(t + k) % CONNS], PP_WIRE_WS_TAG_ADD, name, "", "");
  }
  CU_ASSERT_EQUAL(hub.tags.count, TAGS);
  CU_ASSERT(hub.tags.cap >= TAGS);
  int bad = 0;
  for (int t = 0; t < TAGS; t++) {
    snprintf(name, sizeof name, "stream:%d", t);
    bad += count(name) != (uint32_t)(t % 5 + 1);
  }
  CU_ASSERT_EQUAL(bad, 0);
  for (int i = 0; i < CONNS; i += 2)
    tag(&conns[i], PP_WIRE_WS_TAG_REMOVE_ALL, "", "", "");
  for (int i = 1; i < CONNS; i += 2)
    tag(&conns[i], PP_WIRE_WS_TAG_REMOVE_ALL, "", "", "");
  CU_ASSERT_EQUAL(hub.tags.count, 0);
}

static pp_wire_frame head_frame(int status, pp_buf *pairs, uint32_t n) {
  pp_wire_frame f;
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_RESPONSE_HEAD;
  f.status = (uint16_t)status;
  f.pairs.data = pairs->data, f.pairs.len = pairs->len, f.pairs.count = n;
  return f;
}

/* The frame's pairs live in `p` until the next case (a->handler and a->protocol point into
 * them, as into a RESPONSE_HEAD frame). */
static pp_buf p;

static int accept_case(int status, const char *offered, pp_ws_accept *a, const char **why,
                       const char *const *kv) {
  p.len = 0;
  uint32_t n = 0;
  for (; kv[2 * n]; n++)
    pp_h1_put_pair(&p, kv[2 * n], strlen(kv[2 * n]), kv[2 * n + 1], strlen(kv[2 * n + 1]));
  pp_wire_frame f = head_frame(status, &p, n);
  return pp_ws_accept_parse(&f, offered, strlen(offered), a, why);
}

static void test_accept_parse(void) {
  pp_ws_accept a;
  const char *why;
  static const char *const sticky[] = {"puma-plus-websocket",
                                       "sticky",
                                       "Puma-Plus-WebSocket-Handler",
                                       "s:1:2",
                                       "puma-plus-websocket-tags",
                                       "room:1",
                                       "puma-plus-websocket-tags",
                                       "user:7, admin",
                                       "set-cookie",
                                       "a=1",
                                       NULL};
  CU_ASSERT_EQUAL(accept_case(101, "", &a, &why, sticky), 1);
  CU_ASSERT_EQUAL(a.route, PP_WIRE_WS_ROUTE_STICKY);
  CU_ASSERT_EQUAL(a.ntags, 2);
  CU_ASSERT(a.handler_len == 5 && memcmp(a.handler, "s:1:2", 5) == 0);
  CU_ASSERT_PTR_NULL(a.protocol);
  static const char *const flex[] = {"puma-plus-websocket", "flexible", "sec-websocket-protocol",
                                     "chat.v2", NULL};
  CU_ASSERT_EQUAL(accept_case(101, "chat.v1, chat.v2", &a, &why, flex), 1);
  CU_ASSERT_EQUAL(a.route, PP_WIRE_WS_ROUTE_FLEXIBLE);
  CU_ASSERT(a.protocol_len == 7 && memcmp(a.protocol, "chat.v2", 7) == 0);
  /* a subprotocol the client did not offer (a prefix of one is not one) */
  CU_ASSERT_EQUAL(accept_case(101, "chat.v22, chat", &a, &why, flex), -1);
  CU_ASSERT_PTR_NOT_NULL(why);
  /* refused: any other status goes out as it is, whatever the fields */
  static const char *const refused[] = {"content-type", "text/plain", NULL};
  CU_ASSERT_EQUAL(accept_case(403, "", &a, &why, refused), 0);
  CU_ASSERT_EQUAL(accept_case(200, "", &a, &why, sticky), 0);
  /* a 101 the server cannot serve */
  CU_ASSERT_EQUAL(accept_case(101, "", &a, &why, refused), -1);
  static const char *const bad_route[] = {"puma-plus-websocket", "Sticky", NULL};
  CU_ASSERT_EQUAL(accept_case(101, "", &a, &why, bad_route), -1);
  static const char *const twice[] = {"puma-plus-websocket", "sticky", "puma-plus-websocket",
                                      "flexible", NULL};
  CU_ASSERT_EQUAL(accept_case(101, "", &a, &why, twice), -1);
  char long_handler[300];
  memset(long_handler, 'h', 256);
  long_handler[256] = 0;
  const char *const big[] = {"puma-plus-websocket", "sticky", "puma-plus-websocket-handler",
                             long_handler, NULL};
  CU_ASSERT_EQUAL(accept_case(101, "", &a, &why, big), -1);
  long_handler[255] = 0;
  CU_ASSERT_EQUAL(accept_case(101, "", &a, &why, big), 1);

  static const char *skipped[] = {"Puma-Plus-WebSocket-Tags",
                                  "upgrade",
                                  "CONNECTION",
                                  "sec-websocket-accept",
                                  "Sec-WebSocket-Extensions",
                                  "sec-websocket-protocol",
                                  "content-length",
                                  "transfer-encoding",
                                  "keep-alive"};
  for (size_t i = 0; i < sizeof skipped / sizeof skipped[0]; i++)
    CU_ASSERT(pp_ws_accept_skips_field(B(skipped[i]), strlen(skipped[i])));
  static const char *kept[] = {"set-cookie", "x-puma-plus-websocket", "date", "upgrade-insecure"};
  for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++)
    CU_ASSERT(!pp_ws_accept_skips_field(B(kept[i]), strlen(kept[i])));
}

static void test_commands(void) {
  pp_wire_frame f;
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_WS_SEND, f.conn_id = 12345, f.opcode = 3;
  CU_ASSERT_PTR_NOT_NULL(pp_wshub_command(&hub, &f)); /* opcode 3 */
  f.opcode = 1, f.data = B("\xc3\x28"), f.data_len = 2;
  CU_ASSERT_PTR_NOT_NULL(pp_wshub_command(&hub, &f)); /* text not UTF-8 */
  f.opcode = 2;                                       /* binary: any bytes */
  uint64_t unknown = core.stats.ws.unknown_conn;
  CU_ASSERT_PTR_NULL(pp_wshub_command(&hub, &f));
  CU_ASSERT_EQUAL(core.stats.ws.unknown_conn, unknown + 1);
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_WS_TAG, f.conn_id = 1, f.tag_op = 3;
  CU_ASSERT_PTR_NOT_NULL(pp_wshub_command(&hub, &f));
  f.tag_op = 0, f.prefix = B("\xff"), f.prefix_len = 1;
  CU_ASSERT_PTR_NOT_NULL(pp_wshub_command(&hub, &f)); /* envelope not UTF-8 */
  f.prefix_len = 0;
  CU_ASSERT_PTR_NULL(pp_wshub_command(&hub, &f));
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_WS_CLOSE_CONN, f.conn_id = 1;
  int bad_codes[] = {0, 999, 1004, 1005, 1006, 1015, 2999, 5000};
  for (size_t i = 0; i < sizeof bad_codes / sizeof bad_codes[0]; i++) {
    f.code = (uint16_t)bad_codes[i];
    CU_ASSERT_PTR_NOT_NULL(pp_wshub_command(&hub, &f));
  }
  f.code = 4000;
  char reason[124];
  memset(reason, 'r', sizeof reason);
  f.data = (const uint8_t *)reason, f.data_len = 124;
  CU_ASSERT_PTR_NOT_NULL(pp_wshub_command(&hub, &f)); /* reason over 123 bytes */
  f.data_len = 123;
  CU_ASSERT_PTR_NULL(pp_wshub_command(&hub, &f));
  /* a broadcast to a tag nobody holds is counted and writes nothing */
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_WS_BROADCAST, f.opcode = 1, f.tag = B("nobody"), f.tag_len = 6;
  uint64_t b = core.stats.ws.broadcasts, fan = core.stats.ws.fanout;
  CU_ASSERT_PTR_NULL(pp_wshub_command(&hub, &f));
  CU_ASSERT_EQUAL(core.stats.ws.broadcasts, b + 1);
  CU_ASSERT_EQUAL(core.stats.ws.fanout, fan);
}

int main(void) {
  memset(&core, 0, sizeof core);
  memset(&pool, 0, sizeof pool);
  pp_wshub_init(&hub, uv_default_loop(), NULL, &core, &pool);
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("wsconn", NULL, NULL);
  CU_add_test(s, "tag table: add, replace, remove, remove all", test_tags);
  CU_add_test(s, "tag table: 3000 tags through rehashes", test_tags_grow);
  CU_add_test(s, "the app's accepting response", test_accept_parse);
  CU_add_test(s, "the app's commands: validation, unknown ids", test_commands);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  pp_buf_dispose(&p);
  unsigned failures = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}
