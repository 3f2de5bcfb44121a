/* Tests for server/base/queue.c: FIFO order, removal from the middle (a client that left while
 * queued), and dispatch order across workers (least busy first, never to a retiring or
 * booting worker, capacity counts exact). */
#include <CUnit/Basic.h>
#include <string.h>

#include "server/base/queue.h"

typedef struct item {
  pp_qnode link;
  int id;
} item;

static void test_fifo(void) {
  pp_queue q;
  pp_queue_init(&q);
  item it[6];
  for (int i = 0; i < 6; i++) {
    memset(&it[i], 0, sizeof it[i]);
    it[i].id = i;
    CU_ASSERT_FALSE(pp_qnode_linked(&it[i].link));
    pp_queue_push(&q, &it[i].link);
  }
  CU_ASSERT_EQUAL(q.len, 6);
  pp_queue_remove(&q, &it[2].link); /* client went away while queued */
  pp_queue_remove(&q, &it[5].link); /* the tail */
  CU_ASSERT_FALSE(pp_qnode_linked(&it[2].link));
  CU_ASSERT_EQUAL(q.len, 4);
  int want[] = {0, 1, 3, 4};
  for (int i = 0; i < 4; i++) {
    pp_qnode *n = pp_queue_pop(&q);
    CU_ASSERT_PTR_NOT_NULL_FATAL(n);
    CU_ASSERT_EQUAL(PP_CONTAINER_OF(n, item, link)->id, want[i]);
  }
  CU_ASSERT_PTR_NULL(pp_queue_pop(&q));
  CU_ASSERT_EQUAL(q.len, 0);
  /* reuse after pop */
  pp_queue_push(&q, &it[0].link);
  CU_ASSERT_PTR_EQUAL(pp_queue_peek(&q), &it[0].link);
}

static void test_dispatch_order(void) {
  static pp_registry r;
  pp_registry_init(&r);
  pp_slot s[6];
  memset(s, 0, sizeof s);
  /* worker 100 (index 0) forked but not connected: booting, no capacity */
  CU_ASSERT_PTR_NOT_NULL(pp_registry_add(&r, 100, 0, 1));
  CU_ASSERT_EQUAL(pp_registry_count(&r, PP_WORKER_BOOTING), 1);
  CU_ASSERT_PTR_NULL(pp_registry_take(&r));
  /* three threads of worker 100 and two of worker 200 say HELLO */
  for (int i = 0; i < 3; i++)
    pp_registry_attach(&r, &s[i], 100, 0, (uint32_t)i, 2);
  for (int i = 3; i < 5; i++)
    pp_registry_attach(&r, &s[i], 200, 1, (uint32_t)(i - 3), 3);
  CU_ASSERT_EQUAL(pp_registry_count(&r, PP_WORKER_READY), 2);
  CU_ASSERT_EQUAL(r.slots_ready, 5);
  /* least busy worker first, lowest index on ties: 100, 200, 100, 200, 100 */
  uint32_t want_pid[] = {100, 200, 100, 200, 100};
  pp_slot *taken[5];
  for (int i = 0; i < 5; i++) {
    taken[i] = pp_registry_take(&r);
    CU_ASSERT_PTR_NOT_NULL_FATAL(taken[i]);
    CU_ASSERT_EQUAL(taken[i]->worker->pid, want_pid[i]);
  }
  CU_ASSERT_PTR_NULL(pp_registry_take(&r));
  CU_ASSERT_EQUAL(r.slots_busy, 5);
  pp_registry_release(&r, taken[1]);
  CU_ASSERT_EQUAL(r.slots_busy, 4);
  CU_ASSERT_PTR_EQUAL(pp_registry_take(&r), taken[1]);
  pp_registry_release(&r, taken[1]);
  /* retire worker 200: its idle slot is no capacity any more, busy one finishes */
  pp_worker *w200 = pp_registry_find(&r, 200);
  pp_registry_retire(&r, w200);
  CU_ASSERT_EQUAL(r.slots_ready, 3);
  CU_ASSERT_EQUAL(r.slots_busy, 3);
  CU_ASSERT_PTR_NULL(pp_registry_take(&r));
  pp_registry_release(&r, taken[3]);
  CU_ASSERT_PTR_NULL(pp_registry_take(&r)); /* never back to a retiring worker */
  pp_registry_detach(&r, &s[3]);
  pp_registry_detach(&r, &s[4]);
  CU_ASSERT_EQUAL(w200->slots, 0);
  pp_registry_remove(&r, w200);
  CU_ASSERT_PTR_NULL(pp_registry_find(&r, 200));
  /* a connection of worker 100 dies while busy: capacity drops by one */
  pp_registry_detach(&r, taken[0]);
  CU_ASSERT_EQUAL(r.slots_ready, 2);
  CU_ASSERT_EQUAL(r.slots_busy, 2);
  pp_registry_release(&r, taken[2]);
  CU_ASSERT_PTR_EQUAL(pp_registry_take(&r), taken[2]);
  /* HELLO from a pid the shepherd has not announced yet still registers it */
  pp_registry_attach(&r, &s[5], 300, 2, 0, 4);
  CU_ASSERT_EQUAL(pp_registry_find(&r, 300)->state, PP_WORKER_READY);
  CU_ASSERT_PTR_EQUAL(pp_registry_take(&r), &s[5]);
}

/* A sticky WebSocket event takes a slot of its own worker only (pp_registry_take_worker),
 * even when another worker is the one plain dispatch would pick; none while that worker is
 * busy, retiring or not connected; the capacity counts move as for pp_registry_take. */
static void test_take_worker(void) {
  static pp_registry r;
  pp_registry_init(&r);
  pp_slot s[3];
  memset(s, 0, sizeof s);
  pp_registry_attach(&r, &s[0], 100, 0, 0, 1);
  pp_registry_attach(&r, &s[1], 200, 1, 0, 1);
  pp_registry_attach(&r, &s[2], 200, 1, 1, 1);
  pp_worker *w100 = pp_registry_find(&r, 100), *w200 = pp_registry_find(&r, 200);
  pp_slot *a = pp_registry_take_worker(&r, w200); /* pp_registry_take would pick 100 */
  CU_ASSERT_PTR_NOT_NULL_FATAL(a);
  CU_ASSERT_EQUAL(a->worker->pid, 200);
  CU_ASSERT_EQUAL(r.slots_busy, 1);
  CU_ASSERT_EQUAL(w200->busy, 1);
  pp_slot *b = pp_registry_take_worker(&r, w200);
  CU_ASSERT_PTR_NOT_NULL_FATAL(b);
  CU_ASSERT_PTR_NULL(pp_registry_take_worker(&r, w200)); /* both its slots busy */
  CU_ASSERT_PTR_EQUAL(pp_registry_take(&r), &s[0]);      /* the other worker still serves */
  CU_ASSERT_PTR_NULL(pp_registry_take_worker(&r, w100));
  CU_ASSERT_PTR_NULL(pp_registry_take_worker(&r, NULL));
  pp_registry_release(&r, a);
  CU_ASSERT_PTR_EQUAL(pp_registry_take_worker(&r, w200), a);
  pp_registry_release(&r, a);
  pp_registry_retire(&r, w200);
  CU_ASSERT_PTR_NULL(pp_registry_take_worker(&r, w200)); /* never a retiring worker */
  CU_ASSERT_EQUAL(pp_registry_add(&r, 300, 2, 1)->state, PP_WORKER_BOOTING);
  CU_ASSERT_PTR_NULL(pp_registry_take_worker(&r, pp_registry_find(&r, 300)));
}

/* A worker's generation is the registry's phase when its entry was made (at FORKED, or at
 * its first HELLO); a later phase changes no existing entry, and a removed entry's slot
 * reused by a new worker takes the new phase. */
static void test_generation(void) {
  static pp_registry r;
  pp_registry_init(&r);
  pp_slot s;
  memset(&s, 0, sizeof s);
  pp_worker *old = pp_registry_add(&r, 100, 0, 1);
  CU_ASSERT_EQUAL(old->generation, 0);
  r.phase = 1;
  CU_ASSERT_EQUAL(pp_registry_add(&r, 100, 0, 2)->generation, 0); /* found, not made */
  pp_worker *seen = pp_registry_attach(&r, &s, 300, 2, 0, 3);     /* first seen at HELLO */
  CU_ASSERT_EQUAL(seen->generation, 1);
  pp_registry_remove(&r, old);
  pp_worker *next = pp_registry_add(&r, 400, 0, 4);
  CU_ASSERT_PTR_EQUAL(next, old); /* the freed entry */
  CU_ASSERT_EQUAL(next->generation, 1);
}

/* Ractor slots (HELLO's RACTOR bit, set on the slot before attach) are counted per worker and
 * in total; a thread slot beside them is not; detaching one takes it off both counts, also
 * after its worker retired. */
static void test_ractor_counts(void) {
  static pp_registry r;
  pp_registry_init(&r);
  pp_slot s[5];
  memset(s, 0, sizeof s);
  s[0].ractor = s[1].ractor = s[3].ractor = 1;
  for (int i = 0; i < 3; i++)
    pp_registry_attach(&r, &s[i], 100, 0, (uint32_t)i, 2);
  pp_registry_attach(&r, &s[3], 200, 1, 0, 3);
  pp_registry_attach(&r, &s[4], 200, 1, 1, 3);
  pp_worker *a = pp_registry_find(&r, 100), *b = pp_registry_find(&r, 200);
  CU_ASSERT_EQUAL(a->slots, 3);
  CU_ASSERT_EQUAL(a->ractor_slots, 2);
  CU_ASSERT_EQUAL(b->ractor_slots, 1);
  CU_ASSERT_EQUAL(r.ractor_slots, 3);
  pp_registry_detach(&r, &s[1]);
  CU_ASSERT_EQUAL(a->ractor_slots, 1);
  CU_ASSERT_EQUAL(r.ractor_slots, 2);
  pp_registry_detach(&r, &s[2]); /* a thread slot: no Ractor count moves */
  CU_ASSERT_EQUAL(a->ractor_slots, 1);
  CU_ASSERT_EQUAL(r.ractor_slots, 2);
  pp_registry_retire(&r, b);
  pp_registry_detach(&r, &s[3]);
  CU_ASSERT_EQUAL(b->ractor_slots, 0);
  CU_ASSERT_EQUAL(r.ractor_slots, 1);
  pp_registry_detach(&r, &s[4]);
  pp_registry_remove(&r, b);
  /* a new worker in the freed entry starts from none */
  CU_ASSERT_EQUAL(pp_registry_add(&r, 300, 2, 4)->ractor_slots, 0);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("queue", NULL, NULL);
  CU_add_test(s, "FIFO with removal from the middle", test_fifo);
  CU_add_test(s, "dispatch order and capacity accounting", test_dispatch_order);
  CU_add_test(s, "worker generation from the registry's phase", test_generation);
  CU_add_test(s, "sticky dispatch: a slot of one worker", test_take_worker);
  CU_add_test(s, "Ractor slots counted per worker and in total", test_ractor_counts);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failures = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}
