/* Tests for control/admit.c. */
#include "control/control.h"
#include "control/tests/test_util.h"

int pp_test_register(void) {
  static const test_case cases[] = {
      {NULL, NULL},
  };
  return register_suite("admit", cases);
}
