/* The Date value (base/wallclock.c): known dates, and every day across 1970..2200 against
 * the C library's gmtime_r + strftime in the C locale. */
#include <CUnit/Basic.h>
#include <string.h>
#include <time.h>

#include "server/base/wallclock.h"

static void test_known(void) {
  char out[PP_HTTP_DATE_LEN + 1];
  pp_http_date(784111777, out);
  CU_ASSERT_STRING_EQUAL(out, "Sun, 06 Nov 1994 08:49:37 GMT"); /* RFC 9110's example */
  pp_http_date(0, out);
  CU_ASSERT_STRING_EQUAL(out, "Thu, 01 Jan 1970 00:00:00 GMT");
  pp_http_date(951782400, out);
  CU_ASSERT_STRING_EQUAL(out, "Tue, 29 Feb 2000 00:00:00 GMT");
  CU_ASSERT_EQUAL(strlen(out), PP_HTTP_DATE_LEN);
}

static void test_against_libc(void) {
  char mine[PP_HTTP_DATE_LEN + 1], theirs[64];
  int bad = 0;
  for (int64_t t = 0; t < (int64_t)230 * 365 * 86400; t += 86400 + 3671) {
    time_t tt = (time_t)t;
    struct tm tm;
    gmtime_r(&tt, &tm);
    strftime(theirs, sizeof theirs, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    pp_http_date(t, mine);
    if (strcmp(mine, theirs) != 0 && bad++ < 3)
      printf("\n%lld: %s != %s", (long long)t, mine, theirs);
  }
  CU_ASSERT_EQUAL(bad, 0);
}

static void test_set(void) {
  pp_wallclock w;
  memset(&w, 0, sizeof w);
  pp_wallclock_set(&w, 784111777LL * 1000000000 + 5, 1000);
  CU_ASSERT_STRING_EQUAL(w.date, "Sun, 06 Nov 1994 08:49:37 GMT");
  CU_ASSERT_EQUAL(pp_wallclock_epoch_us(&w, 1000), 784111777LL * 1000000);
  CU_ASSERT_EQUAL(pp_wallclock_epoch_us(&w, 1000 + 2500000), 784111777LL * 1000000 + 2500);
  pp_wallclock_set(&w, 784111778LL * 1000000000, 2000);
  CU_ASSERT_STRING_EQUAL(w.date, "Sun, 06 Nov 1994 08:49:38 GMT");
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("wallclock", NULL, NULL);
  CU_add_test(s, "IMF-fixdate of known instants", test_known);
  CU_add_test(s, "IMF-fixdate against gmtime_r/strftime, 1970..2200", test_against_libc);
  CU_add_test(s, "set: the date and the monotonic offset", test_set);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failures = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}
