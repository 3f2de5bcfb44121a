/* Tests for server/base/queue.c: FIFO order, removal from the middle (a client that left while
 * queued), dispatch order across workers (least busy first, never to a retiring or booting
 * worker, capacity counts exact), and the run lists of sticky dispatch. */
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

/* ---------------------------------------------------------------- the run lists */

/* A queued entry of the test: the one FIFO's node and its run list's. */
typedef struct qent {
  pp_qnode link;
  pp_runlink run;
  int id;
} qent;

static pp_queue fifo;
static pp_runq runq;

static void q_push(pp_registry *r, qent *e, int id, uint32_t sticky_pid) {
  memset(e, 0, sizeof *e);
  e->id = id;
  pp_queue_push(&fifo, &e->link);
  pp_runq_push(&runq, r, &e->run, sticky_pid);
}

static void q_remove(qent *e) {
  pp_queue_remove(&fifo, &e->link);
  pp_runq_remove(&runq, &e->run);
}

/* The id pp_runq_first gives (-1: none), with its worker's pid (0: any slot) and whether it
 * is gone; the entry stays queued. */
static int q_first(pp_registry *r, uint32_t *pid, int *gone) {
  pp_worker *wk;
  pp_runlink *e = pp_runq_first(&runq, r, &wk, gone);
  *pid = wk ? wk->pid : 0;
  return e ? PP_CONTAINER_OF(e, qent, run)->id : -1;
}

/* Sticky dispatch without walking the queue (pp_runq): 20,000 events wait for worker 100's one
 * busy slot while younger entries of any slot and of worker 200 are dispatched past them, each
 * choice looking at no more than one list head per worker and one of `any` (the walk from the
 * queue's head this replaces looked at all 20,000 each time: 400 million steps here). Order:
 * the oldest entry an idle slot may run; the waiting ones keep their order and come before
 * younger ones once their worker is idle. Entries of a worker that is not registered, retired
 * or gone come first, as gone; removal from the middle of each list; a worker entry that
 * still holds waiting entries is not reused. */
static void test_sticky_run_lists(void) {
  static pp_registry r;
  static qent e[20000], a[20000], b[4], g[4];
  enum { N = 20000 };
  pp_registry_init(&r);
  pp_queue_init(&fifo);
  pp_runq_init(&runq);
  pp_slot s[2];
  memset(s, 0, sizeof s);
  pp_registry_attach(&r, &s[0], 100, 0, 0, 1);
  pp_registry_attach(&r, &s[1], 200, 1, 0, 1);
  pp_worker *w100 = pp_registry_find(&r, 100), *w200 = pp_registry_find(&r, 200);
  CU_ASSERT_PTR_EQUAL_FATAL(pp_registry_take_worker(&r, w100), &s[0]); /* 100 is busy */
  for (int i = 0; i < N; i++)
    q_push(&r, &e[i], i, 100);
  for (int i = 0; i < N; i++)
    q_push(&r, &a[i], N + i, 0);
  CU_ASSERT_EQUAL(fifo.len, 2 * N);
  uint32_t pid;
  int gone;
  uint64_t looked = runq.looked;
  for (int i = 0; i < N; i++) { /* worker 200's slot runs every entry of `any`, in order */
    int id = q_first(&r, &pid, &gone);
    CU_ASSERT_EQUAL(id, N + i);
    CU_ASSERT(pid == 0 && !gone);
    if (id != N + i) break;
    q_remove(&a[i]);
  }
  CU_ASSERT(runq.looked - looked <= 2u * N); /* one head per worker with entries, and any's */
  CU_ASSERT_EQUAL(fifo.len, N);
  /* 200's own entries and a younger one of any: 200's first while 100 stays busy */
  q_push(&r, &b[0], 900, 200);
  q_push(&r, &a[0], 901, 0);
  CU_ASSERT_EQUAL(q_first(&r, &pid, &gone), 900);
  CU_ASSERT_EQUAL(pid, 200);
  q_remove(&b[0]);
  pp_slot *t = pp_registry_take_worker(&r, w200);
  CU_ASSERT_PTR_EQUAL(t, &s[1]);
  CU_ASSERT_EQUAL(q_first(&r, &pid, &gone), -1); /* no idle slot: nothing may run */
  pp_registry_release(&r, &s[0]);                /* 100 is idle: its oldest before any's */
  CU_ASSERT_EQUAL(q_first(&r, &pid, &gone), 0);
  CU_ASSERT_EQUAL(pid, 100);
  /* removal from the middle of a worker's list and of any's */
  q_remove(&e[1]);
  q_remove(&a[0]);
  looked = runq.looked;
  for (int i = 0; i < N; i++) {
    if (i == 1) continue;
    int id = q_first(&r, &pid, &gone);
    CU_ASSERT_EQUAL(id, i);
    CU_ASSERT(pid == 100 && !gone);
    if (id != i) break;
    q_remove(&e[i]);
  }
  CU_ASSERT(runq.looked - looked <= 2u * N);
  CU_ASSERT_EQUAL(fifo.len, 0);
  CU_ASSERT_EQUAL(q_first(&r, &pid, &gone), -1);
  pp_registry_release(&r, t);

  /* a pid the registry does not know: gone, ahead of a runnable older entry */
  q_push(&r, &a[0], 1, 0);
  q_push(&r, &g[0], 2, 999);
  CU_ASSERT_EQUAL(q_first(&r, &pid, &gone), 2);
  CU_ASSERT(gone && pid == 0);
  q_remove(&g[0]);
  CU_ASSERT_EQUAL(q_first(&r, &pid, &gone), 1);
  CU_ASSERT(!gone);
  q_remove(&a[0]);
  /* a retiring worker's waiting entries are gone */
  q_push(&r, &b[1], 3, 200);
  pp_registry_retire(&r, w200);
  CU_ASSERT_EQUAL(q_first(&r, &pid, &gone), 3);
  CU_ASSERT(gone);
  q_remove(&b[1]);
  /* a removed worker's too, and its entry is not reused until they left */
  q_push(&r, &b[2], 4, 100);
  q_push(&r, &b[3], 5, 100);
  pp_registry_detach(&r, &s[0]);
  pp_registry_remove(&r, w100);
  pp_registry_detach(&r, &s[1]);
  pp_registry_remove(&r, w200);
  pp_worker *n1 = pp_registry_add(&r, 300, 2, 2);
  CU_ASSERT_PTR_EQUAL(n1, w200); /* 200's entry holds nothing: reused */
  pp_worker *n2 = pp_registry_add(&r, 400, 3, 2);
  CU_ASSERT(n2 != w100); /* 100's still holds two */
  CU_ASSERT_EQUAL(q_first(&r, &pid, &gone), 4);
  CU_ASSERT(gone);
  q_remove(&b[2]);
  CU_ASSERT_EQUAL(q_first(&r, &pid, &gone), 5);
  CU_ASSERT(gone);
  q_remove(&b[3]);
  CU_ASSERT_EQUAL(q_first(&r, &pid, &gone), -1);
  CU_ASSERT_PTR_EQUAL(pp_registry_add(&r, 500, 4, 3), w100); /* free to reuse now */
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("queue", NULL, NULL);
  CU_add_test(s, "FIFO with removal from the middle", test_fifo);
  CU_add_test(s, "dispatch order and capacity accounting", test_dispatch_order);
  CU_add_test(s, "worker generation from the registry's phase", test_generation);
  CU_add_test(s, "sticky dispatch: a slot of one worker", test_take_worker);
  CU_add_test(s, "sticky dispatch: run lists, no walk past waiting entries", test_sticky_run_lists);
  CU_add_test(s, "Ractor slots counted per worker and in total", test_ractor_counts);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failures = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}
