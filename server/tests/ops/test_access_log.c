/* Tests for server/ops/access_log.c's formatting (pp_access_log_format): the three formats
 * from a record with env pairs, from one without (a response the server made before the env
 * existed), escaping of quotes and control bytes, and the fields that are unknown. */
#include <CUnit/Basic.h>
#include <stdlib.h>
#include <string.h>

#include "server/ops/access_log.h"
#include "server/proto/env.h"

/* 2026-12-03T03:00:00.250Z on the wall clock is 10 s on the monotonic one. */
#define WALL (1796266800LL * 1000000000LL + 250000000LL)
#define MONO (10LL * 1000000000LL)

static pp_buf env;

static void put(const char *k, const char *v) {
  pp_env_put_pair(&env, k, strlen(k), v, strlen(v));
}

static pp_access_rec rec_with_env(void) {
  env.len = 0;
  put("REQUEST_METHOD", "GET");
  put("SERVER_PROTOCOL", "HTTP/2");
  put("REMOTE_ADDR", "::1");
  put("HTTP_USER_AGENT", "ua \"q\"\x01");
  put("REQUEST_URI", "/a?b=1");
  pp_access_rec r = {.env = env.data,
                     .env_len = env.len,
                     .env_count = 5,
                     .status = 200,
                     .bytes = 13,
                     .id = 42,
                     .t1 = MONO - 5000000, /* 5 ms before the end */
                     .t2b = MONO - 4000000,
                     .t3 = MONO - 3000000,
                     .t_end = MONO,
                     .service_ns = 2500000,
                     .worker = 3};
  return r;
}

static char *fmt(int format, const pp_access_rec *r) {
  static pp_buf out;
  out.len = 0;
  pp_access_log_format(format, r, WALL, MONO, &out);
  pp_buf_append(&out, "", 1);
  return (char *)out.data;
}

static void test_json(void) {
  pp_access_rec r = rec_with_env();
  CU_ASSERT_STRING_EQUAL(
      fmt(PP_ACCESS_LOG_JSON, &r),
      "{\"time\":\"2026-12-03T03:00:00.245Z\",\"remote\":\"::1\",\"method\":\"GET\",\"path\":\"/"
      "a?b=1\",\"protocol\":\"HTTP/2\",\"status\":200,\"bytes\":13,\"duration_ms\":5.000,"
      "\"queue_ms\":1.000,\"service_ms\":2.500,\"worker\":3,\"request_id\":42,\"referer\":null,"
      "\"user_agent\":\"ua \\\"q\\\"\\u0001\"}\n");
}

static void test_common_and_combined(void) {
  setenv("TZ", "UTC", 1);
  pp_access_rec r = rec_with_env();
  CU_ASSERT_STRING_EQUAL(fmt(PP_ACCESS_LOG_COMMON, &r),
                         "::1 - - [03/Dec/2026:03:00:00 +0000] \"GET /a?b=1 HTTP/2\" 200 13\n");
  CU_ASSERT_STRING_EQUAL(fmt(PP_ACCESS_LOG_COMBINED, &r),
                         "::1 - - [03/Dec/2026:03:00:00 +0000] \"GET /a?b=1 HTTP/2\" 200 13 \"-\" "
                         "\"ua \\\"q\\\"\\x01\" queue=1.000 service=2.500 duration=5.000 "
                         "worker=3 id=42\n");
}

/* A 431 the session answered before the env existed: no queue, service, worker or id. */
static void test_without_env(void) {
  setenv("TZ", "UTC", 1);
  pp_access_rec r = {.remote = "127.0.0.1",
                     .protocol = NULL,
                     .method = "POST",
                     .method_len = 4,
                     .target = "/x",
                     .target_len = 2,
                     .status = 431,
                     .bytes = 0,
                     .t1 = MONO - 1000000,
                     .t_end = MONO,
                     .service_ns = -1,
                     .worker = -1};
  CU_ASSERT_STRING_EQUAL(fmt(PP_ACCESS_LOG_COMBINED, &r),
                         "127.0.0.1 - - [03/Dec/2026:03:00:00 +0000] \"POST /x\" 431 - \"-\" \"-\" "
                         "queue=- service=- duration=1.000 worker=- id=-\n");
  CU_ASSERT_STRING_EQUAL(
      fmt(PP_ACCESS_LOG_JSON, &r),
      "{\"time\":\"2026-12-03T03:00:00.249Z\",\"remote\":\"127.0.0.1\",\"method\":\"POST\","
      "\"path\":\"/x\",\"protocol\":null,\"status\":431,\"bytes\":0,\"duration_ms\":1.000,"
      "\"queue_ms\":null,\"service_ms\":null,\"worker\":null,\"request_id\":null,\"referer\":"
      "null,\"user_agent\":null}\n");
  r.method = r.target = NULL; /* the request line was not read */
  r.status = 0;
  CU_ASSERT_STRING_EQUAL(fmt(PP_ACCESS_LOG_COMMON, &r),
                         "127.0.0.1 - - [03/Dec/2026:03:00:00 +0000] \"-\" - -\n");
}

/* UTF-8 stays as it is in JSON, becomes \xHH in the NCSA formats (as Apache writes it). */
static void test_non_ascii(void) {
  setenv("TZ", "UTC", 1);
  pp_access_rec r = {.remote = "1.2.3.4",
                     .method = "GET",
                     .method_len = 3,
                     .target = "/caf\xc3\xa9\\",
                     .target_len = 7,
                     .status = 200,
                     .t_end = MONO,
                     .service_ns = -1,
                     .worker = -1};
  CU_ASSERT_STRING_EQUAL(
      fmt(PP_ACCESS_LOG_COMMON, &r),
      "1.2.3.4 - - [03/Dec/2026:03:00:00 +0000] \"GET /caf\\xc3\\xa9\\\\\" 200 -\n");
  CU_ASSERT(strstr(fmt(PP_ACCESS_LOG_JSON, &r), "\"path\":\"/caf\xc3\xa9\\\\\"") != NULL);
}

int main(void) {
  pp_buf_init(&env);
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("access_log", NULL, NULL);
  CU_add_test(s, "JSON lines", test_json);
  CU_add_test(s, "common and combined", test_common_and_combined);
  CU_add_test(s, "a record without env pairs", test_without_env);
  CU_add_test(s, "bytes over 0x7f", test_non_ascii);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failures = CU_get_number_of_failures();
  CU_cleanup_registry();
  pp_buf_dispose(&env);
  return failures ? 1 : 0;
}
