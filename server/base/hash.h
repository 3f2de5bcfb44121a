/* hash (base/): the front end's one hash of byte strings (FNV-1a, 64-bit), and a chained hash
 * table whose entries link through a pp_hnode embedded in them (the caller allocates and
 * frees the entries; the table owns only its bucket array).
 *
 * The tables it serves map open WebSockets by id and tags by name (session/wsconn.c): up to
 * some hundred thousand entries, added and removed one at a time. The bucket count is a power
 * of two; it doubles (64 the first time) when an add finds as many entries as buckets, and it
 * never shrinks. A grow rehashes every entry through the table's hash_of, so an entry keeps
 * (or can recompute) its hash. Allocation aborts on out-of-memory (STYLE.md). No I/O. */
#ifndef PP_HASH_H
#define PP_HASH_H

#include <stddef.h>
#include <stdint.h>

#define PP_HASH_SEED 0xcbf29ce484222325ull /* FNV-1a 64's offset basis: a fresh hash */

/* FNV-1a 64 of the n bytes at p, continuing from h (PP_HASH_SEED, or the hash of what came
 * before: hashing "ab" equals hashing "b" from the hash of "a"). Not keyed: a table whose
 * keys come from outside hashes a secret first (proto/h3.c's connection ids). */
uint64_t pp_hash_bytes(uint64_t h, const void *p, size_t n);

typedef struct pp_hnode {
  struct pp_hnode *next; /* in its chain */
} pp_hnode;

typedef struct pp_htable {
  pp_hnode **buckets; /* cap chains, or NULL before the first add */
  size_t cap, count;
  uint64_t (*hash_of)(const pp_hnode *n); /* an entry's hash, for the rehash of a grow */
} pp_htable;

void pp_htable_init(pp_htable *t, uint64_t (*hash_of)(const pp_hnode *n));
/* Frees the buckets (not the entries); t is empty and may be used again. */
void pp_htable_dispose(pp_htable *t);
/* The first entry of hash's chain (walk on through ->next), or NULL. */
pp_hnode *pp_htable_chain(const pp_htable *t, uint64_t hash);
/* Links n, whose hash is hash (= hash_of(n)), first growing the table when it is full. */
void pp_htable_add(pp_htable *t, pp_hnode *n, uint64_t hash);
/* Unlinks n (hash = hash_of(n)). 1, or 0 if n was not in the table. */
int pp_htable_remove(pp_htable *t, pp_hnode *n, uint64_t hash);

#endif
