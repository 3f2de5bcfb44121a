/* Fuzz target for the PROXY protocol header parser (server/proto/proxy.h).
 *
 * Input: the first byte chooses the accepted versions (bit 0 v1, bit 1 v2; none means both),
 * the rest is what a peer sent first. Properties:
 *  1. pp_proxy_parse never crashes or reads past len, and returns MORE, DONE or ERROR; ERROR
 *     comes with a message.
 *  2. DONE: header_len is within the input, at most PP_PROXY_V2_MAX, and the same bytes cut
 *     to header_len parse to the same result (the header does not depend on what follows);
 *     every shorter prefix is MORE (a header is recognised only once complete, never early);
 *     a non-local result has family 4 or 6 and a NUL-terminated source address.
 *  3. MORE: the input is shorter than the longest header of an accepted version. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/proto/proxy.h"

#include "fuzz/check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  unsigned accept = data[0] & PP_PROXY_ANY;
  if (!accept) accept = PP_PROXY_ANY;
  data++, size--;
  uint8_t *copy = malloc(size ? size : 1); /* exact size: ASan sees any read past len */
  CHECK(copy != NULL);
  memcpy(copy, data, size);
  pp_proxy_info info;
  pp_proxy_rc rc = pp_proxy_parse(copy, size, accept, &info);
  CHECK(rc == PP_PROXY_MORE || rc == PP_PROXY_DONE || rc == PP_PROXY_ERROR);
  if (rc == PP_PROXY_ERROR) CHECK(info.error && info.error[0]);
  if (rc == PP_PROXY_MORE) CHECK(size < PP_PROXY_V2_MAX);
  if (rc == PP_PROXY_DONE) {
    CHECK(info.header_len > 0 && info.header_len <= size && info.header_len <= PP_PROXY_V2_MAX);
    CHECK(info.version == 1 || info.version == 2);
    if (!info.local) {
      CHECK(info.family == 4 || info.family == 6);
      CHECK(memchr(info.src, 0, sizeof info.src) && info.src[0]);
    }
    pp_proxy_info again;
    CHECK(pp_proxy_parse(copy, info.header_len, accept, &again) == PP_PROXY_DONE);
    CHECK(again.header_len == info.header_len && again.local == info.local &&
          !strcmp(again.src, info.src) && again.src_port == info.src_port);
    for (size_t n = 0; n < info.header_len; n++) {
      pp_proxy_info p;
      CHECK(pp_proxy_parse(copy, n, accept, &p) == PP_PROXY_MORE);
    }
  }
  free(copy);
  return 0;
}
