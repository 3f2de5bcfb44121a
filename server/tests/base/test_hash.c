/* Tests for server/base/hash.c: FNV-1a 64 against its published test vectors (and continuing a
 * hash), and the chained table against a plain array: thousands of entries added through
 * several grows, looked up, removed from the middle of their chains and added again. */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <string.h>

#include "server/base/hash.h"
#include "server/base/queue.h" /* PP_CONTAINER_OF */

static void test_fnv1a(void) {
  /* the FNV reference's vectors (Fowler, Noll, Vo: FNV-1a 64) */
  CU_ASSERT_EQUAL(pp_hash_bytes(PP_HASH_SEED, "", 0), 0xcbf29ce484222325ull);
  CU_ASSERT_EQUAL(pp_hash_bytes(PP_HASH_SEED, "a", 1), 0xaf63dc4c8601ec8cull);
  CU_ASSERT_EQUAL(pp_hash_bytes(PP_HASH_SEED, "foobar", 6), 0x85944171f73967e8ull);
  /* continuing: "foo" then "bar" is "foobar" */
  CU_ASSERT_EQUAL(pp_hash_bytes(pp_hash_bytes(PP_HASH_SEED, "foo", 3), "bar", 3),
                  0x85944171f73967e8ull);
  /* a seed changes the hash (proto/h3.c seeds with its secret) */
  CU_ASSERT_NOT_EQUAL(pp_hash_bytes(pp_hash_bytes(PP_HASH_SEED, "k", 1), "a", 1),
                      pp_hash_bytes(PP_HASH_SEED, "a", 1));
}

typedef struct ent {
  pp_hnode node;
  uint64_t key;
  int in; /* in the table, by the test's own account */
} ent;

static uint64_t ent_hash(const pp_hnode *n) {
  return PP_CONTAINER_OF(n, ent, node)->key;
}

static ent *find(const pp_htable *t, uint64_t key) {
  for (pp_hnode *n = pp_htable_chain(t, key); n; n = n->next) {
    ent *e = PP_CONTAINER_OF(n, ent, node);
    if (e->key == key) return e;
  }
  return NULL;
}

/* Every entry is found exactly when the test says it is in, and the count agrees. */
static int consistent(const pp_htable *t, ent *es, int n) {
  size_t in = 0;
  for (int i = 0; i < n; i++) {
    if ((find(t, es[i].key) == &es[i]) != es[i].in) return 0;
    in += (size_t)es[i].in;
  }
  return in == t->count;
}

static void test_table(void) {
  enum { N = 5000 };
  static ent es[N];
  pp_htable t;
  pp_htable_init(&t, ent_hash);
  CU_ASSERT_PTR_NULL(pp_htable_chain(&t, 1));
  CU_ASSERT_EQUAL(pp_htable_remove(&t, &es[0].node, 1), 0); /* nothing yet */
  memset(es, 0, sizeof es);
  for (int i = 0; i < N; i++) {
    /* two kinds of keys: sequential ids, and string hashes (low bits alone would collide) */
    char name[16];
    int len = snprintf(name, sizeof name, "room:%d", i);
    es[i].key = i % 2 ? (uint64_t)i + 1 : pp_hash_bytes(PP_HASH_SEED, name, (size_t)len);
    pp_htable_add(&t, &es[i].node, es[i].key);
    es[i].in = 1;
    CU_ASSERT(t.cap >= t.count && (t.cap & (t.cap - 1)) == 0);
  }
  CU_ASSERT_EQUAL(t.count, N);
  CU_ASSERT_EQUAL(t.cap, 8192); /* 64 doubled until it held 5000 */
  CU_ASSERT(consistent(&t, es, N));
  /* the longest chain stays short: the hash spreads both kinds of keys */
  size_t longest = 0;
  for (size_t b = 0; b < t.cap; b++) {
    size_t len = 0;
    for (pp_hnode *n = t.buckets[b]; n; n = n->next)
      len++;
    if (len > longest) longest = len;
  }
  CU_ASSERT(longest <= 8);
  for (int i = 0; i < N; i += 3) { /* out of the middle of chains too */
    CU_ASSERT_EQUAL(pp_htable_remove(&t, &es[i].node, es[i].key), 1);
    es[i].in = 0;
  }
  CU_ASSERT_EQUAL(pp_htable_remove(&t, &es[0].node, es[0].key), 0); /* already out */
  CU_ASSERT(consistent(&t, es, N));
  for (int i = 0; i < N; i += 6) {
    pp_htable_add(&t, &es[i].node, es[i].key);
    es[i].in = 1;
  }
  CU_ASSERT(consistent(&t, es, N));
  pp_htable_dispose(&t);
  CU_ASSERT_EQUAL(t.count, 0);
  CU_ASSERT_PTR_NULL(pp_htable_chain(&t, es[1].key));
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("hash", NULL, NULL);
  CU_add_test(s, "FNV-1a 64: reference vectors, continuing, seeded", test_fnv1a);
  CU_add_test(s, "chained table through grows, against an array", test_table);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failures = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}
