/* Tests for server/proto/env.c's REMOTE_ADDR under -remote-addr-header / -trusted-proxies:
 * the right-most untrusted address of the forwarded list when the peer is trusted, the peer
 * when it is not (a spoofed header), several field lines, all-trusted chains, and lists with
 * something that is not an address. Also the CIDR parser and matcher (base/config.c). */
#include <CUnit/Basic.h>
#include <string.h>

#include "server/base/config.h"
#include "server/proto/env.h"
#include "server/proto/wire.h"

static pp_cidr trusted[4];
static int trusted_n;

/* REMOTE_ADDR of a GET / from peer with the given X-Forwarded-For lines (NULL-terminated). */
static const char *remote(const char *peer, const char **xff) {
  static char out[64];
  pp_env_field f[8];
  uint32_t n = 0;
  for (; xff && xff[n]; n++)
    f[n] = (pp_env_field){"X-Forwarded-For", 15, xff[n], strlen(xff[n])};
  pp_env_request rq = {.method = "GET",
                       .method_len = 3,
                       .target = "/",
                       .target_len = 1,
                       .protocol = "HTTP/1.1",
                       .fields = f,
                       .field_count = n,
                       .host_index = -1,
                       .content_type_index = -1};
  pp_env_conninfo ci = {.remote_addr = peer,
                        .server_name = "h",
                        .server_port = "80",
                        .url_scheme = "http",
                        .addr_header = "x-forwarded-for",
                        .trusted = trusted,
                        .trusted_count = trusted_n};
  pp_buf env;
  pp_buf_init(&env);
  uint32_t count = pp_env_build(&rq, &ci, 1, &env);
  pp_wire_pairs pairs = {env.data, env.len, count};
  pp_wire_pairs_iter it;
  pp_wire_pairs_iter_init(&it, &pairs);
  const uint8_t *k, *v;
  uint32_t kl, vl;
  out[0] = 0;
  while (pp_wire_pairs_next(&it, &k, &kl, &v, &vl))
    if (kl == 11 && !memcmp(k, "REMOTE_ADDR", 11) && vl < sizeof out) {
      memcpy(out, v, vl);
      out[vl] = 0;
    }
  pp_buf_dispose(&env);
  return out;
}

static void test_cidr(void) {
  pp_cidr c;
  CU_ASSERT_EQUAL(pp_cidr_parse(&c, "10.0.0.0/8", 10), 0);
  CU_ASSERT(pp_cidr_match(&c, 1, "10.200.3.4", 10));
  CU_ASSERT(!pp_cidr_match(&c, 1, "11.0.0.1", 8));
  CU_ASSERT(pp_cidr_match(&c, 1, "::ffff:10.1.2.3", 15)); /* v4-mapped */
  CU_ASSERT_EQUAL(pp_cidr_parse(&c, "fd00::/8", 8), 0);
  CU_ASSERT(pp_cidr_match(&c, 1, "fd12::1", 7));
  CU_ASSERT(!pp_cidr_match(&c, 1, "fe80::1", 7));
  CU_ASSERT_EQUAL(pp_cidr_parse(&c, "192.0.2.1", 9), 0);
  CU_ASSERT_EQUAL(c.bits, 32);
  CU_ASSERT(pp_cidr_match(&c, 1, "192.0.2.1", 9));
  CU_ASSERT(!pp_cidr_match(&c, 1, "192.0.2.2", 9));
  CU_ASSERT_EQUAL(pp_cidr_parse(&c, "172.16.0.0/12", 13), 0);
  CU_ASSERT(pp_cidr_match(&c, 1, "172.31.255.255", 14));
  CU_ASSERT(!pp_cidr_match(&c, 1, "172.32.0.0", 10));
  CU_ASSERT_EQUAL(pp_cidr_parse(&c, "10.0.0.0/33", 11), -1);
  CU_ASSERT_EQUAL(pp_cidr_parse(&c, "10.0.0.0/", 9), -1);
  CU_ASSERT_EQUAL(pp_cidr_parse(&c, "nope", 4), -1);
  CU_ASSERT_EQUAL(pp_cidr_parse(&c, "::/0", 4), 0);
  CU_ASSERT(pp_cidr_match(&c, 1, "2001:db8::1", 11));
  CU_ASSERT(!pp_cidr_match(&c, 1, "1.2.3.4", 7)); /* families differ */
}

static void test_forwarded(void) {
  trusted_n = 0;
  pp_cidr_parse(&trusted[trusted_n++], "127.0.0.0/8", 11);
  pp_cidr_parse(&trusted[trusted_n++], "10.0.0.0/8", 10);
  const char *one[] = {"203.0.113.9", NULL};
  CU_ASSERT_STRING_EQUAL(remote("127.0.0.1", one), "203.0.113.9");
  /* a spoofed header from an untrusted peer is ignored */
  CU_ASSERT_STRING_EQUAL(remote("198.51.100.1", one), "198.51.100.1");
  /* the right-most untrusted: what the client put on the left is not believed */
  const char *chain[] = {"6.6.6.6, 203.0.113.9 ,10.1.1.1", NULL};
  CU_ASSERT_STRING_EQUAL(remote("10.0.0.2", chain), "203.0.113.9");
  /* several field lines: the last one is the nearest proxy's */
  const char *lines[] = {"6.6.6.6", "203.0.113.7, 10.2.2.2", NULL};
  CU_ASSERT_STRING_EQUAL(remote("127.0.0.1", lines), "203.0.113.7");
  const char *lines2[] = {"203.0.113.8", "10.2.2.2", NULL};
  CU_ASSERT_STRING_EQUAL(remote("127.0.0.1", lines2), "203.0.113.8");
  /* all trusted: the left-most */
  const char *inner[] = {"10.9.9.9, 127.0.0.5", NULL};
  CU_ASSERT_STRING_EQUAL(remote("127.0.0.1", inner), "10.9.9.9");
  /* IPv6 entries */
  const char *v6[] = {"2001:db8::5", NULL};
  CU_ASSERT_STRING_EQUAL(remote("127.0.0.1", v6), "2001:db8::5");
  /* not an address (a port, garbage, an empty entry, a block): the header is ignored */
  const char *bad1[] = {"203.0.113.9:1234", NULL};
  CU_ASSERT_STRING_EQUAL(remote("127.0.0.1", bad1), "127.0.0.1");
  const char *bad2[] = {"unknown, 203.0.113.9", NULL};
  CU_ASSERT_STRING_EQUAL(remote("127.0.0.1", bad2), "203.0.113.9"); /* stops before it */
  const char *bad3[] = {"203.0.113.9,,10.1.1.1", NULL};
  CU_ASSERT_STRING_EQUAL(remote("127.0.0.1", bad3), "127.0.0.1");
  const char *bad4[] = {"", NULL};
  CU_ASSERT_STRING_EQUAL(remote("127.0.0.1", bad4), "127.0.0.1");
  const char *bad5[] = {"10.0.0.0/8", NULL};
  CU_ASSERT_STRING_EQUAL(remote("127.0.0.1", bad5), "127.0.0.1");
  /* no header: the peer */
  CU_ASSERT_STRING_EQUAL(remote("127.0.0.1", NULL), "127.0.0.1");
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("env", NULL, NULL);
  CU_add_test(s, "CIDR blocks", test_cidr);
  CU_add_test(s, "REMOTE_ADDR from a trusted proxy's forwarded header", test_forwarded);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failures = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}
