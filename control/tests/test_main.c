/* Shared main for the control/ CUnit executables: each test_<module>.c defines
 * pp_test_register(), which adds that module's one suite. */
#include <CUnit/Basic.h>
#include <stdio.h>

int pp_test_register(void);

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 2;
  if (pp_test_register() != 0) {
    fprintf(stderr, "suite registration failed: %s\n", CU_get_error_msg());
    CU_cleanup_registry();
    return 2;
  }
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failures = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}
