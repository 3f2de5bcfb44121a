/* Tests for server/proto/proxy.c, the PROXY protocol header parser: v1 TCP4, TCP6 and
 * UNKNOWN; v2 PROXY over IPv4 and IPv6 with TLVs, LOCAL, unix and UNSPEC; every truncated
 * prefix of each valid header is "need more"; malformed headers and a missing header are
 * errors; the accepted versions are enforced. */
#include <CUnit/Basic.h>
#include <string.h>

#include "server/proto/proxy.h"

static const uint8_t SIG[12] = {0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d,
                                0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a};

/* A v2 header: cmd (0 LOCAL, 1 PROXY), family/protocol byte, the rest. */
static size_t v2(uint8_t *out, int cmd, uint8_t fam, const uint8_t *rest, size_t rest_len) {
  memcpy(out, SIG, 12);
  out[12] = (uint8_t)(0x20 | cmd);
  out[13] = fam;
  out[14] = (uint8_t)(rest_len >> 8);
  out[15] = (uint8_t)rest_len;
  if (rest_len) memcpy(out + 16, rest, rest_len);
  return 16 + rest_len;
}

/* Every prefix shorter than n is MORE; the whole is DONE with header_len n. */
static void check_prefixes(const uint8_t *h, size_t n, unsigned accept) {
  pp_proxy_info info;
  for (size_t i = 0; i < n; i++) {
    pp_proxy_rc rc = pp_proxy_parse(h, i, accept, &info);
    CU_ASSERT_EQUAL(rc, PP_PROXY_MORE);
    if (rc != PP_PROXY_MORE)
      fprintf(stderr, "prefix %zu of %zu: rc %d (%s)\n", i, n, rc, info.error);
  }
  CU_ASSERT_EQUAL(pp_proxy_parse(h, n, accept, &info), PP_PROXY_DONE);
  CU_ASSERT_EQUAL(info.header_len, n);
}

static void test_v1(void) {
  pp_proxy_info info;
  const char *t4 = "PROXY TCP4 192.0.2.7 127.0.0.1 51234 9292\r\nGET / HTTP/1.1\r\n";
  size_t h4 = strlen("PROXY TCP4 192.0.2.7 127.0.0.1 51234 9292\r\n");
  CU_ASSERT_EQUAL(pp_proxy_parse((const uint8_t *)t4, strlen(t4), PP_PROXY_V1, &info),
                  PP_PROXY_DONE);
  CU_ASSERT_EQUAL(info.header_len, h4);
  CU_ASSERT_EQUAL(info.version, 1);
  CU_ASSERT_EQUAL(info.local, 0);
  CU_ASSERT_EQUAL(info.family, 4);
  CU_ASSERT_STRING_EQUAL(info.src, "192.0.2.7");
  CU_ASSERT_STRING_EQUAL(info.dst, "127.0.0.1");
  CU_ASSERT_EQUAL(info.src_port, 51234);
  CU_ASSERT_EQUAL(info.dst_port, 9292);
  check_prefixes((const uint8_t *)t4, h4, PP_PROXY_V1);
  check_prefixes((const uint8_t *)t4, h4, PP_PROXY_ANY);

  const char *t6 = "PROXY TCP6 2001:db8::7 ::1 65535 0\r\n";
  CU_ASSERT_EQUAL(pp_proxy_parse((const uint8_t *)t6, strlen(t6), PP_PROXY_ANY, &info),
                  PP_PROXY_DONE);
  CU_ASSERT_EQUAL(info.family, 6);
  CU_ASSERT_STRING_EQUAL(info.src, "2001:db8::7");
  CU_ASSERT_EQUAL(info.src_port, 65535);
  CU_ASSERT_EQUAL(info.dst_port, 0);
  check_prefixes((const uint8_t *)t6, strlen(t6), PP_PROXY_V1);

  const char *unk = "PROXY UNKNOWN ffff:f...f:ffff ffff:f...f:ffff 65535 65535\r\n";
  CU_ASSERT_EQUAL(pp_proxy_parse((const uint8_t *)unk, strlen(unk), PP_PROXY_V1, &info),
                  PP_PROXY_DONE);
  CU_ASSERT_EQUAL(info.local, 1);
  check_prefixes((const uint8_t *)unk, strlen(unk), PP_PROXY_V1);
  const char *unk2 = "PROXY UNKNOWN\r\n";
  CU_ASSERT_EQUAL(pp_proxy_parse((const uint8_t *)unk2, strlen(unk2), PP_PROXY_V1, &info),
                  PP_PROXY_DONE);
  CU_ASSERT_EQUAL(info.local, 1);

  /* the longest valid line (107 bytes, the spec's worst case) is accepted */
  const char *max = "PROXY UNKNOWN ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff "
                    "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n";
  CU_ASSERT_EQUAL(strlen(max), PP_PROXY_V1_MAX);
  CU_ASSERT_EQUAL(pp_proxy_parse((const uint8_t *)max, strlen(max), PP_PROXY_V1, &info),
                  PP_PROXY_DONE);
}

static void test_v1_malformed(void) {
  static const char *bad[] = {
      "PROXY TCP4 192.0.2.7 127.0.0.1 51234 9292\n",     /* LF without CR */
      "PROXY TCP4 192.0.2.7 127.0.0.1 51234\r\n",        /* 4 fields */
      "PROXY TCP4 192.0.2.7 127.0.0.1 51234 9292 1\r\n", /* 6 fields */
      "PROXY TCP4 192.0.2.7  127.0.0.1 51234 9292\r\n",  /* two spaces */
      "PROXY TCP4 2001:db8::7 ::1 1 2\r\n",              /* IPv6 under TCP4 */
      "PROXY TCP6 192.0.2.7 127.0.0.1 1 2\r\n",          /* IPv4 under TCP6 */
      "PROXY TCP4 192.0.2.256 127.0.0.1 1 2\r\n",        /* not an address */
      "PROXY TCP4 192.0.2.7 127.0.0.1 65536 2\r\n",      /* port over 65535 */
      "PROXY TCP4 192.0.2.7 127.0.0.1 01 2\r\n",         /* leading zero */
      "PROXY TCP4 192.0.2.7 127.0.0.1 -1 2\r\n",         /* not digits */
      "PROXY UDP4 192.0.2.7 127.0.0.1 1 2\r\n",          /* not a TCP protocol */
      "PROXY tcp4 192.0.2.7 127.0.0.1 1 2\r\n",          /* case matters */
      "PROXY TCP4 192.0.2.7 127.0.0.1 1\r2\r\n",         /* CR inside */
      "PROXy TCP4 192.0.2.7 127.0.0.1 1 2\r\n",          /* signature */
      "GET / HTTP/1.1\r\nHost: a\r\n\r\n",               /* no header at all */
  };
  pp_proxy_info info;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    pp_proxy_rc rc = pp_proxy_parse((const uint8_t *)bad[i], strlen(bad[i]), PP_PROXY_ANY, &info);
    CU_ASSERT_EQUAL(rc, PP_PROXY_ERROR);
    if (rc != PP_PROXY_ERROR)
      fprintf(stderr, "accepted: %s\n", bad[i]);
    else
      CU_ASSERT_PTR_NOT_NULL(info.error);
  }
  /* no CRLF within 107 bytes */
  char longl[200];
  memset(longl, 'x', sizeof longl);
  memcpy(longl, "PROXY TCP4 ", 11);
  CU_ASSERT_EQUAL(pp_proxy_parse((const uint8_t *)longl, 106, PP_PROXY_V1, &info), PP_PROXY_MORE);
  CU_ASSERT_EQUAL(pp_proxy_parse((const uint8_t *)longl, 107, PP_PROXY_V1, &info), PP_PROXY_ERROR);
  CU_ASSERT_EQUAL(pp_proxy_parse((const uint8_t *)longl, 200, PP_PROXY_V1, &info), PP_PROXY_ERROR);
  /* a wrong byte is an error at once, not after more bytes: "GET" on its first byte */
  CU_ASSERT_EQUAL(pp_proxy_parse((const uint8_t *)"G", 1, PP_PROXY_ANY, &info), PP_PROXY_ERROR);
  CU_ASSERT_EQUAL(pp_proxy_parse((const uint8_t *)"PROXX", 5, PP_PROXY_ANY, &info), PP_PROXY_ERROR);
  /* v1 on a v2-only listener */
  const char *t4 = "PROXY TCP4 192.0.2.7 127.0.0.1 1 2\r\n";
  CU_ASSERT_EQUAL(pp_proxy_parse((const uint8_t *)t4, strlen(t4), PP_PROXY_V2, &info),
                  PP_PROXY_ERROR);
}

static void test_v2(void) {
  uint8_t h[600], rest[300];
  pp_proxy_info info;
  /* PROXY TCP over IPv4, then the client's bytes */
  const uint8_t a4[12] = {192, 0, 2, 7, 127, 0, 0, 1, 0xc8, 0x22, 0x24, 0x4c};
  size_t n = v2(h, 1, 0x11, a4, 12);
  memcpy(h + n, "GET", 3);
  CU_ASSERT_EQUAL(pp_proxy_parse(h, n + 3, PP_PROXY_V2, &info), PP_PROXY_DONE);
  CU_ASSERT_EQUAL(info.header_len, 28);
  CU_ASSERT_EQUAL(info.version, 2);
  CU_ASSERT_EQUAL(info.local, 0);
  CU_ASSERT_EQUAL(info.family, 4);
  CU_ASSERT_STRING_EQUAL(info.src, "192.0.2.7");
  CU_ASSERT_STRING_EQUAL(info.dst, "127.0.0.1");
  CU_ASSERT_EQUAL(info.src_port, 51234);
  CU_ASSERT_EQUAL(info.dst_port, 9292);
  CU_ASSERT_EQUAL(info.tlv_count, 0);
  check_prefixes(h, n, PP_PROXY_V2);
  check_prefixes(h, n, PP_PROXY_ANY);

  /* PROXY TCP over IPv6 with TLVs (ALPN "h2", an empty NOOP, a 200-byte custom one) */
  memset(rest, 0, sizeof rest);
  rest[15] = 7; /* 2001:db8::7 */
  rest[0] = 0x20, rest[1] = 0x01, rest[2] = 0x0d, rest[3] = 0xb8;
  rest[31] = 1; /* ::1 */
  rest[32] = 0x01, rest[33] = 0xbb, rest[34] = 0x24, rest[35] = 0x4c;
  size_t r = 36;
  const uint8_t tlv[] = {0x01, 0x00, 0x02, 'h', '2', 0x04, 0x00, 0x00, 0xe0, 0x00, 200};
  memcpy(rest + r, tlv, sizeof tlv);
  r += sizeof tlv + 200;
  n = v2(h, 1, 0x21, rest, r);
  CU_ASSERT_EQUAL(pp_proxy_parse(h, n, PP_PROXY_ANY, &info), PP_PROXY_DONE);
  CU_ASSERT_EQUAL(info.family, 6);
  CU_ASSERT_STRING_EQUAL(info.src, "2001:db8::7");
  CU_ASSERT_STRING_EQUAL(info.dst, "::1");
  CU_ASSERT_EQUAL(info.src_port, 443);
  CU_ASSERT_EQUAL(info.tlv_count, 3);
  check_prefixes(h, n, PP_PROXY_V2);

  /* LOCAL (the proxy's own health check): the connection's address stays */
  n = v2(h, 0, 0x00, NULL, 0);
  CU_ASSERT_EQUAL(pp_proxy_parse(h, n, PP_PROXY_V2, &info), PP_PROXY_DONE);
  CU_ASSERT_EQUAL(info.local, 1);
  check_prefixes(h, n, PP_PROXY_V2);
  /* LOCAL may still carry addresses, which are ignored */
  n = v2(h, 0, 0x11, a4, 12);
  CU_ASSERT_EQUAL(pp_proxy_parse(h, n, PP_PROXY_V2, &info), PP_PROXY_DONE);
  CU_ASSERT_EQUAL(info.local, 1);
  /* PROXY over a unix socket, and UNSPEC: local too */
  memset(rest, 0, sizeof rest);
  n = v2(h, 1, 0x31, rest, 216);
  CU_ASSERT_EQUAL(pp_proxy_parse(h, n, PP_PROXY_V2, &info), PP_PROXY_DONE);
  CU_ASSERT_EQUAL(info.local, 1);
  n = v2(h, 1, 0x00, NULL, 0);
  CU_ASSERT_EQUAL(pp_proxy_parse(h, n, PP_PROXY_V2, &info), PP_PROXY_DONE);
  CU_ASSERT_EQUAL(info.local, 1);
}

static void test_v2_malformed(void) {
  uint8_t h[600];
  pp_proxy_info info;
  const uint8_t a4[12] = {192, 0, 2, 7, 127, 0, 0, 1, 0, 1, 0, 2};
  size_t n = v2(h, 1, 0x11, a4, 12);
  h[12] = 0x11; /* version 1 */
  CU_ASSERT_EQUAL(pp_proxy_parse(h, n, PP_PROXY_V2, &info), PP_PROXY_ERROR);
  CU_ASSERT_EQUAL(pp_proxy_parse(h, 13, PP_PROXY_V2, &info), PP_PROXY_ERROR); /* at once */
  h[12] = 0x22;                                                               /* command 2 */
  CU_ASSERT_EQUAL(pp_proxy_parse(h, n, PP_PROXY_V2, &info), PP_PROXY_ERROR);
  h[12] = 0x21;
  h[13] = 0x41; /* family 4 */
  CU_ASSERT_EQUAL(pp_proxy_parse(h, n, PP_PROXY_V2, &info), PP_PROXY_ERROR);
  /* a length shorter than its addresses */
  n = v2(h, 1, 0x21, a4, 12);
  CU_ASSERT_EQUAL(pp_proxy_parse(h, n, PP_PROXY_V2, &info), PP_PROXY_ERROR);
  /* a TLV running past the end, and one cut in its header */
  uint8_t rest[40];
  memcpy(rest, a4, 12);
  const uint8_t over[] = {0x01, 0x00, 0x09, 'a', 'b'};
  memcpy(rest + 12, over, sizeof over);
  n = v2(h, 1, 0x11, rest, 12 + sizeof over);
  CU_ASSERT_EQUAL(pp_proxy_parse(h, n, PP_PROXY_V2, &info), PP_PROXY_ERROR);
  n = v2(h, 1, 0x11, rest, 14);
  CU_ASSERT_EQUAL(pp_proxy_parse(h, n, PP_PROXY_V2, &info), PP_PROXY_ERROR);
  /* longer than we accept: refused from its length field, before the bytes arrive */
  n = v2(h, 1, 0x11, a4, 12);
  h[14] = 0x20, h[15] = 0x00; /* 8192 */
  CU_ASSERT_EQUAL(pp_proxy_parse(h, 16, PP_PROXY_V2, &info), PP_PROXY_ERROR);
  /* a broken signature, and v2 on a v1-only listener */
  n = v2(h, 1, 0x11, a4, 12);
  h[7] = 'X';
  CU_ASSERT_EQUAL(pp_proxy_parse(h, n, PP_PROXY_ANY, &info), PP_PROXY_ERROR);
  CU_ASSERT_EQUAL(pp_proxy_parse(h, 8, PP_PROXY_ANY, &info), PP_PROXY_ERROR);
  h[7] = 'Q';
  CU_ASSERT_EQUAL(pp_proxy_parse(h, n, PP_PROXY_V1, &info), PP_PROXY_ERROR);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("proxy", NULL, NULL);
  CU_add_test(s, "v1 TCP4, TCP6, UNKNOWN and every prefix", test_v1);
  CU_add_test(s, "v1 malformed and missing", test_v1_malformed);
  CU_add_test(s, "v2 PROXY v4/v6 with TLVs, LOCAL, unix, UNSPEC and every prefix", test_v2);
  CU_add_test(s, "v2 malformed", test_v2_malformed);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failures = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}
