/* Units: durations, sizes, formatting (table-driven). */
#include <string.h>

#include <CUnit/Basic.h>

#include "sim/units.h"

static void test_durations(void) {
  static const struct {
    const char *text;
    int ok;
    uint64_t ns;
  } cases[] = {
      {"250us", 0, 250000},
      {"25ms", 0, 25000000},
      {"3s", 0, 3000000000ull},
      {"1.5m", 0, 90000000000ull},
      {"1h", 0, 3600000000000ull},
      {"2", 0, 2000000000ull},
      {"0.5", 0, 500000000},
      {"10ns", 0, 10},
      {" 5ms ", 0, 5000000},
      {"", -1, 0},
      {"fast", -1, 0},
      {"5 parsecs", -1, 0},
      {"-1s", -1, 0},
      {"5msx", -1, 0},
      {"nan", -1, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint64_t v = 12345;
    int rc = pp_units_parse_duration(cases[i].text, &v);
    CU_ASSERT_EQUAL(rc, cases[i].ok);
    if (rc == 0) CU_ASSERT_EQUAL(v, cases[i].ns);
  }
}

static void test_bytes(void) {
  uint64_t v;
  CU_ASSERT_EQUAL(pp_units_parse_bytes("80MB", &v), 0);
  CU_ASSERT_EQUAL(v, 80000000ull);
  CU_ASSERT_EQUAL(pp_units_parse_bytes("80MiB", &v), 0);
  CU_ASSERT_EQUAL(v, 80ull * 1048576);
  CU_ASSERT_EQUAL(pp_units_parse_bytes("1GiB", &v), 0);
  CU_ASSERT_EQUAL(v, 1073741824ull);
  CU_ASSERT_EQUAL(pp_units_parse_bytes("512", &v), 0);
  CU_ASSERT_EQUAL(v, 512);
  CU_ASSERT_EQUAL(pp_units_parse_bytes("12 apples", &v), -1);
  CU_ASSERT_EQUAL(pp_units_parse_bytes("-5MB", &v), -1);
}

static void test_format(void) {
  char b[32];
  CU_ASSERT_STRING_EQUAL(pp_units_format_ns(27.6e6, b, sizeof b), "27.6ms");
  CU_ASSERT_STRING_EQUAL(pp_units_format_ns(2.76e9, b, sizeof b), "2.76s");
  CU_ASSERT_STRING_EQUAL(pp_units_format_ns(830e3, b, sizeof b), "830us");
  CU_ASSERT_STRING_EQUAL(pp_units_format_ns(-1, b, sizeof b), "-");
  CU_ASSERT_STRING_EQUAL(pp_units_format_bytes(130e6, b, sizeof b), "130MB");
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("units", NULL, NULL);
  CU_add_test(s, "durations", test_durations);
  CU_add_test(s, "bytes", test_bytes);
  CU_add_test(s, "format", test_format);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned fails = CU_get_number_of_failures();
  CU_cleanup_registry();
  return fails ? 1 : 0;
}
