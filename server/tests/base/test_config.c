/* Tests for server/base/config.c: flag forms, defaults, repeatable -listen, address, duration and
 * size parsing, and clear errors for bad input. */
#include <CUnit/Basic.h>
#include <string.h>

#include "server/base/config.h"

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
  CU_ASSERT_EQUAL(c.control_enabled, 0); /* off unless -control names a place, as puma */
  CU_ASSERT_EQUAL(c.max_body_bytes, PP_BODY_SIZE_NONE); /* puma: no limit */
  CU_ASSERT_EQUAL(c.worker_boot_timeout_ns, 60000000000ull);
  CU_ASSERT_EQUAL(c.max_keep_alive, 0);
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
                  "-max-keep-alive",
                  "7",
                  "-worker-boot-timeout",
                  "3s",
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
  CU_ASSERT_EQUAL(c.max_keep_alive, 7);
  CU_ASSERT_EQUAL(c.worker_boot_timeout_ns, 3000000000ull);
  CU_ASSERT(c.quiet && c.autoscale);
  CU_ASSERT_STRING_EQUAL(c.target_queue_p95, "25ms");
  CU_ASSERT_STRING_EQUAL(c.standby, "2");

  char *nolimit[] = {"x", "-max-body-size", "0", "-control", "127.0.0.1:9400"};
  CU_ASSERT_EQUAL(parse(&c, err, 5, nolimit), 0);
  CU_ASSERT_EQUAL(c.max_body_bytes, PP_BODY_SIZE_NONE);
  CU_ASSERT(c.control_enabled && c.control.port == 9400);

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
  char *noworkers[] = {"x", "-workers", "0"}; /* the policy's min_workers is at least 1 */
  CU_ASSERT_EQUAL(parse(&c, err, 3, noworkers), -1);
  CU_ASSERT(strstr(err, "-workers") != NULL);
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
  /* found by fuzz/fuzz_flags.c: a huge value overflowed the conversion (undefined) */
  CU_ASSERT_EQUAL(pp_duration_parse("184467440737095516", &v), -1);
  CU_ASSERT_EQUAL(pp_duration_parse("1e300ms", &v), -1);
  CU_ASSERT_EQUAL(pp_duration_parse("inf", &v), -1);
  CU_ASSERT_EQUAL(pp_duration_parse("nan", &v), -1);
  CU_ASSERT_EQUAL(pp_duration_parse("0x10", &v), -1);
  CU_ASSERT(pp_duration_parse("1.5ms", &v) == 0 && v == 1500000ull);
  CU_ASSERT(pp_duration_parse("250ns", &v) == 0 && v == 250ull);
  CU_ASSERT(pp_duration_parse("1e3ms", &v) == 0 && v == 1000000000ull);
  CU_ASSERT_EQUAL(pp_size_parse("18446744073709551615KiB", &v), -1); /* wrapped before */
  CU_ASSERT(pp_size_parse("18446744073709551615", &v) == 0 && v == UINT64_MAX);
  CU_ASSERT(pp_size_parse("64k", &v) == 0 && v == 65536);
  CU_ASSERT_EQUAL(pp_size_parse("12xb", &v), -1);
}

/* Request timeout, kill grace and worker timeout: defaults (off, 5 s, 60 s as puma's
 * worker_timeout), values, 0 turns a timeout off, too-short values are errors. */
static void test_timeouts_of_requests_and_workers(void) {
  pp_config c;
  char err[256];
  char *none[] = {"x"};
  CU_ASSERT_EQUAL(parse(&c, err, 1, none), 0);
  CU_ASSERT_EQUAL(c.request_timeout_ns, 0);
  CU_ASSERT_EQUAL(c.worker_kill_grace_ns, 5000000000ull);
  CU_ASSERT_EQUAL(c.worker_timeout_ns, 60000000000ull);
  char *set[] = {"x", "-request-timeout", "1.5s", "-worker-kill-grace=250ms", "-worker-timeout",
                 "0"};
  CU_ASSERT_EQUAL(parse(&c, err, 6, set), 0);
  CU_ASSERT_EQUAL(c.request_timeout_ns, 1500000000ull);
  CU_ASSERT_EQUAL(c.worker_kill_grace_ns, 250000000ull);
  CU_ASSERT_EQUAL(c.worker_timeout_ns, 0);
  char *off[] = {"x", "-request-timeout", "0"};
  CU_ASSERT_EQUAL(parse(&c, err, 3, off), 0);
  CU_ASSERT_EQUAL(c.request_timeout_ns, 0);
  char *tiny[] = {"x", "-request-timeout", "10us"};
  CU_ASSERT_EQUAL(parse(&c, err, 3, tiny), -1);
  CU_ASSERT(strstr(err, "-request-timeout") != NULL);
  char *fast[] = {"x", "-worker-timeout", "50ms"};
  CU_ASSERT_EQUAL(parse(&c, err, 3, fast), -1);
  CU_ASSERT(strstr(err, "-worker-timeout") != NULL);
  char *bad[] = {"x", "-worker-kill-grace", "later"};
  CU_ASSERT_EQUAL(parse(&c, err, 3, bad), -1);
  CU_ASSERT(strstr(err, "-worker-kill-grace: invalid value") != NULL);
}

/* Run-time slots: -min-threads <= the starting count (-fibers, else -threads) <= -max-slots,
 * -max-slots defaulting to the starting count. */
static void test_slot_bounds(void) {
  pp_config c;
  char err[256];
  char *none[] = {"x"};
  CU_ASSERT_EQUAL(parse(&c, err, 1, none), 0);
  CU_ASSERT_EQUAL(c.min_threads, 1);
  CU_ASSERT_EQUAL(c.max_slots, 5);
  CU_ASSERT_EQUAL(c.fibers, 0);
  CU_ASSERT_EQUAL(pp_config_slots_initial(&c), 5);
  char *up[] = {"x", "-threads", "5", "-min-threads", "2", "-max-slots", "300"};
  CU_ASSERT_EQUAL(parse(&c, err, 7, up), 0);
  CU_ASSERT_EQUAL(c.min_threads, 2);
  CU_ASSERT_EQUAL(c.max_slots, 300);
  char *fib[] = {"x", "-fibers", "64"};
  CU_ASSERT_EQUAL(parse(&c, err, 3, fib), 0);
  CU_ASSERT_EQUAL(pp_config_slots_initial(&c), 64);
  CU_ASSERT_EQUAL(c.max_slots, 64);
  char *low[] = {"x", "-threads", "4", "-min-threads", "6"};
  CU_ASSERT_EQUAL(parse(&c, err, 5, low), -1);
  CU_ASSERT(strstr(err, "-min-threads 6") != NULL);
  char *high[] = {"x", "-threads", "8", "-max-slots", "4"};
  CU_ASSERT_EQUAL(parse(&c, err, 5, high), -1);
  CU_ASSERT(strstr(err, "-max-slots 4") != NULL);
  char *huge[] = {"x", "-max-slots", "5000"};
  CU_ASSERT_EQUAL(parse(&c, err, 3, huge), -1);
  CU_ASSERT(strstr(err, "-max-slots") != NULL);
}

static void test_pid_and_state_files(void) {
  pp_config c;
  char err[256];
  char *none[] = {"x"};
  CU_ASSERT_EQUAL(parse(&c, err, 1, none), 0);
  CU_ASSERT_PTR_NULL(c.pidfile);
  CU_ASSERT_PTR_NULL(c.state_path);
  char *both[] = {"x", "-pidfile", "/run/pp.pid", "--state-path=/run/pp.state"};
  CU_ASSERT_EQUAL(parse(&c, err, 4, both), 0);
  CU_ASSERT_STRING_EQUAL(c.pidfile, "/run/pp.pid");
  CU_ASSERT_STRING_EQUAL(c.state_path, "/run/pp.state");
  char *empty[] = {"x", "-pidfile="};
  CU_ASSERT_EQUAL(parse(&c, err, 2, empty), -1);
  CU_ASSERT(strstr(err, "-pidfile") != NULL);
  char *missing[] = {"x", "-state-path"};
  CU_ASSERT_EQUAL(parse(&c, err, 2, missing), -1);
  CU_ASSERT(strstr(err, "-state-path needs a value") != NULL);
}

static void test_access_log_flags(void) {
  pp_config c;
  char err[256];
  char *none[] = {"x"};
  CU_ASSERT_EQUAL(parse(&c, err, 1, none), 0);
  CU_ASSERT_PTR_NULL(c.access_log);
  CU_ASSERT_EQUAL(c.access_log_format, PP_ACCESS_LOG_COMBINED);
  char *json[] = {"x", "-access-log", "-", "--access-log-format=json"};
  CU_ASSERT_EQUAL(parse(&c, err, 4, json), 0);
  CU_ASSERT_STRING_EQUAL(c.access_log, "-");
  CU_ASSERT_EQUAL(c.access_log_format, PP_ACCESS_LOG_JSON);
  char *common[] = {"x", "-access-log", "/var/log/a.log", "-access-log-format", "common"};
  CU_ASSERT_EQUAL(parse(&c, err, 5, common), 0);
  CU_ASSERT_EQUAL(c.access_log_format, PP_ACCESS_LOG_COMMON);
  char *bad[] = {"x", "-access-log-format", "apache"};
  CU_ASSERT_EQUAL(parse(&c, err, 3, bad), -1);
  CU_ASSERT(strstr(err, "-access-log-format: invalid value \"apache\"") != NULL);
  char *empty[] = {"x", "-access-log="};
  CU_ASSERT_EQUAL(parse(&c, err, 2, empty), -1);
}

static void test_body_spool_flags(void) {
  pp_config c;
  char err[256];
  char *none[] = {"x"};
  CU_ASSERT_EQUAL(parse(&c, err, 1, none), 0);
  CU_ASSERT_PTR_NULL(c.body_spool_dir); /* $TMPDIR, else /tmp */
  CU_ASSERT_EQUAL(c.max_spool_total, 4ull << 30);
  CU_ASSERT_EQUAL(c.body_stream, 0);
  char *set[] = {"x", "-body-spool-dir", "/var/tmp", "--max-spool-total=512MiB", "-body-stream"};
  CU_ASSERT_EQUAL(parse(&c, err, 5, set), 0);
  CU_ASSERT_STRING_EQUAL(c.body_spool_dir, "/var/tmp");
  CU_ASSERT_EQUAL(c.max_spool_total, 512ull << 20);
  CU_ASSERT_EQUAL(c.body_stream, 1);
  char *off[] = {"x", "-max-spool-total", "0", "-body-stream=false"};
  CU_ASSERT_EQUAL(parse(&c, err, 4, off), 0);
  CU_ASSERT_EQUAL(c.max_spool_total, 0); /* no limit */
  CU_ASSERT_EQUAL(c.body_stream, 0);
  char *bad[] = {"x", "-max-spool-total", "lots"};
  CU_ASSERT_EQUAL(parse(&c, err, 3, bad), -1);
  CU_ASSERT(strstr(err, "-max-spool-total") != NULL);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("config", NULL, NULL);
  CU_add_test(s, "defaults and every flag form", test_defaults_and_flags);
  CU_add_test(s, "errors name the flag", test_errors);
  CU_add_test(s, "request timeout, kill grace, worker timeout",
              test_timeouts_of_requests_and_workers);
  CU_add_test(s, "-pidfile and -state-path", test_pid_and_state_files);
  CU_add_test(s, "-access-log and -access-log-format", test_access_log_flags);
  CU_add_test(s, "-body-spool-dir, -max-spool-total, -body-stream", test_body_spool_flags);
  CU_add_test(s, "-min-threads, -max-slots, -fibers", test_slot_bounds);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failures = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}
