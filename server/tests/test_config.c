/* Tests for server/config.c: flag forms, defaults, repeatable -listen, address, duration and
 * size parsing, and clear errors for bad input. */
#include <CUnit/Basic.h>
#include <string.h>

#include "server/config.h"

static int parse(pp_config *c, char *err, int argc, char **argv) {
  pp_config_defaults(c);
  FILE *devnull = fopen("/dev/null", "w");
  int rc = pp_config_parse(c, argc, argv, err, 256, devnull);
  fclose(devnull);
  return rc;
}

static void test_defaults_and_flags(void) {
  pp_config c;
  char err[256];
  char *none[] = {"puma-plus-server"};
  CU_ASSERT_EQUAL(parse(&c, err, 1, none), 0);
  CU_ASSERT_STRING_EQUAL(c.app, "config.ru");
  CU_ASSERT_EQUAL(c.listen_count, 1);
  CU_ASSERT_STRING_EQUAL(c.listen[0].host, "127.0.0.1");
  CU_ASSERT_EQUAL(c.listen[0].port, 9292);
  CU_ASSERT_EQUAL(c.control.port, 9293);
  CU_ASSERT_EQUAL(c.workers, 1);
  CU_ASSERT_EQUAL(c.threads, 5);

  char *argv[] = {"x",
                  "-app",
                  "a.ru",
                  "-workers",
                  "2",
                  "--threads=7",
                  "-listen",
                  "[::1]:80",
                  "-listen",
                  "unix:/tmp/s.sock",
                  "-listen",
                  ":8080",
                  "-control",
                  "off",
                  "-max-body-size",
                  "1MiB",
                  "-header-timeout",
                  "250ms",
                  "-quiet",
                  "-autoscale",
                  "-min-workers",
                  "1",
                  "-target-queue-p95",
                  "25ms",
                  "-standby",
                  "2"};
  CU_ASSERT_EQUAL(parse(&c, err, (int)(sizeof argv / sizeof argv[0]), argv), 0);
  CU_ASSERT_STRING_EQUAL(c.app, "a.ru");
  CU_ASSERT_EQUAL(c.workers, 2);
  CU_ASSERT_EQUAL(c.threads, 7);
  CU_ASSERT_EQUAL(c.listen_count, 3);
  CU_ASSERT_STRING_EQUAL(c.listen[0].host, "::1");
  CU_ASSERT_EQUAL(c.listen[0].port, 80);
  CU_ASSERT(c.listen[1].is_unix && strcmp(c.listen[1].path, "/tmp/s.sock") == 0);
  CU_ASSERT_STRING_EQUAL(c.listen[2].host, "0.0.0.0");
  CU_ASSERT_EQUAL(c.control_enabled, 0);
  CU_ASSERT_EQUAL(c.max_body_bytes, 1u << 20);
  CU_ASSERT_EQUAL(c.header_timeout_ns, 250000000ull);
  CU_ASSERT(c.quiet && c.autoscale);
  CU_ASSERT_STRING_EQUAL(c.target_queue_p95, "25ms");
  CU_ASSERT_STRING_EQUAL(c.standby, "2");

  char *help[] = {"x", "--help"};
  CU_ASSERT_EQUAL(parse(&c, err, 2, help), 1);
}

static void test_errors(void) {
  pp_config c;
  char err[256];
  char *unknown[] = {"x", "-bogus", "1"};
  CU_ASSERT_EQUAL(parse(&c, err, 3, unknown), -1);
  CU_ASSERT(strstr(err, "unknown flag -bogus") != NULL);
  char *missing[] = {"x", "-workers"};
  CU_ASSERT_EQUAL(parse(&c, err, 2, missing), -1);
  CU_ASSERT(strstr(err, "needs a value") != NULL);
  char *badnum[] = {"x", "-threads", "0"};
  CU_ASSERT_EQUAL(parse(&c, err, 3, badnum), -1);
  CU_ASSERT(strstr(err, "-threads") != NULL);
  char *badaddr[] = {"x", "-listen", "example.com:80"};
  CU_ASSERT_EQUAL(parse(&c, err, 3, badaddr), -1);
  char *badport[] = {"x", "-listen", "127.0.0.1:99999"};
  CU_ASSERT_EQUAL(parse(&c, err, 3, badport), -1);
  char *baddur[] = {"x", "-drain-timeout", "soon"};
  CU_ASSERT_EQUAL(parse(&c, err, 3, baddur), -1);
  char *stray[] = {"x", "config.ru"};
  CU_ASSERT_EQUAL(parse(&c, err, 2, stray), -1);

  uint64_t v;
  CU_ASSERT(pp_duration_parse("1m", &v) == 0 && v == 60000000000ull);
  CU_ASSERT(pp_duration_parse("100us", &v) == 0 && v == 100000ull);
  CU_ASSERT(pp_duration_parse("2", &v) == 0 && v == 2000000000ull);
  CU_ASSERT_EQUAL(pp_duration_parse("-1s", &v), -1);
  CU_ASSERT(pp_size_parse("64k", &v) == 0 && v == 65536);
  CU_ASSERT_EQUAL(pp_size_parse("12xb", &v), -1);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("config", NULL, NULL);
  CU_add_test(s, "defaults and every flag form", test_defaults_and_flags);
  CU_add_test(s, "errors name the flag", test_errors);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failures = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}
