/* Fuzz target for pp-bench's readers of a server's /stats (bench/harness/harness.h,
 * bench/soak/soak.h).
 *
 * Input: a /stats response body (any bytes, taken up to the first NUL as the C string the
 * sampler reads); captured /stats documents are seeds. Properties:
 *  1. pb_stats_parse never crashes; on false every field is left as "not reported" (< 0) or a
 *     value it read; on true the fields are finite or -1.
 *  2. pb_soak_heap_slots never crashes and returns -1 (unknown) or a count >= 0.
 * A violated property aborts, so libFuzzer and the replay driver report it. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/harness/harness.h"
#include "bench/soak/soak.h"

#include "fuzz/check.h"

static void check_field(double v) {
  CHECK(!isnan(v));
  CHECK(v == -1 || v >= 0 || isinf(v) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  CHECK(text != NULL);
  memcpy(text, data, size);
  text[size] = '\0';
  pb_server_stats st;
  memset(&st, 0, sizeof st);
  if (pb_stats_parse(text, &st)) {
    check_field(st.workers);
    check_field(st.queue_depth);
    check_field(st.queue_p95_ms);
    check_field(st.queue_p95_lifetime_ms);
  }
  int64_t slots = pb_soak_heap_slots(text);
  CHECK(slots >= -1);
  free(text);
  return 0;
}
