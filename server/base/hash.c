/* The hash of byte strings and the chained table (hash.h). */
#include "server/base/hash.h"

#include <stdlib.h>
#include <string.h>

#include "server/base/alloc.h"

uint64_t pp_hash_bytes(uint64_t h, const void *p, size_t n) {
  const uint8_t *b = p;
  for (size_t i = 0; i < n; i++)
    h = (h ^ b[i]) * 1099511628211ull; /* FNV-1a 64's prime */
  return h;
}

void pp_htable_init(pp_htable *t, uint64_t (*hash_of)(const pp_hnode *n)) {
  memset(t, 0, sizeof *t);
  t->hash_of = hash_of;
}

void pp_htable_dispose(pp_htable *t) {
  free(t->buckets);
  t->buckets = NULL;
  t->cap = t->count = 0;
}

/* FNV-1a's low bits depend only on the low bits of each byte: the high half is folded in
 * before the mask picks the chain (a hash under 2^32, such as a connection id, is its own
 * index). */
static size_t index_of(const pp_htable *t, uint64_t hash) {
  return (size_t)(hash ^ (hash >> 32)) & (t->cap - 1);
}

pp_hnode *pp_htable_chain(const pp_htable *t, uint64_t hash) {
  return t->cap ? t->buckets[index_of(t, hash)] : NULL;
}

static void grow(pp_htable *t) {
  size_t old_cap = t->cap;
  pp_hnode **old = t->buckets;
  t->cap = old_cap ? old_cap * 2 : 64;
  t->buckets = pp_xmalloc(t->cap * sizeof *t->buckets);
  memset(t->buckets, 0, t->cap * sizeof *t->buckets);
  for (size_t i = 0; i < old_cap; i++)
    for (pp_hnode *n = old[i], *next; n; n = next) {
      next = n->next;
      pp_hnode **b = &t->buckets[index_of(t, t->hash_of(n))];
      n->next = *b;
      *b = n;
    }
  free(old);
}

void pp_htable_add(pp_htable *t, pp_hnode *n, uint64_t hash) {
  if (t->count >= t->cap) grow(t);
  pp_hnode **b = &t->buckets[index_of(t, hash)];
  n->next = *b;
  *b = n;
  t->count++;
}

int pp_htable_remove(pp_htable *t, pp_hnode *n, uint64_t hash) {
  if (!t->cap) return 0;
  for (pp_hnode **p = &t->buckets[index_of(t, hash)]; *p; p = &(*p)->next)
    if (*p == n) {
      *p = n->next;
      n->next = NULL;
      t->count--;
      return 1;
    }
  return 0;
}
