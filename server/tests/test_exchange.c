/* The exchange contract (server/exchange.h) with a fake protocol: an owner that records every
 * ops callback, and a fake worker thread (a plain blocking unix socket that says HELLO and
 * answers with hand-written frames). The real exchange, dispatch and worker link run on a
 * real libuv loop in between; no HTTP session is involved, which is the point: anything that
 * speaks this contract is served the same way. */
#include <CUnit/Basic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "server/dispatch.h"
#include "server/server_int.h"

static server srv;
static pp_config cfg;
static char sock_path[108];
static int worker_fd = -1;

/* ---------------------------------------------------------------- the fake owner */

#define MAX_EVENTS 32
static char events[MAX_EVENTS][48];
static int n_events;
static int last_status;
static pp_buf body_seen;

static void note(const char *what) {
  if (n_events < MAX_EVENTS) snprintf(events[n_events++], sizeof events[0], "%s", what);
}
static void o_head(pp_exchange *x, const pp_wire_frame *f) {
  (void)x;
  last_status = f->status;
  note("head");
}
static void o_body(pp_exchange *x, const uint8_t *d, size_t n) {
  (void)x;
  pp_buf_append(&body_seen, d, n);
  note("body");
}
static void o_end(pp_exchange *x) {
  note("end");
  x->state = PP_X_RESPONDED;
  x->owner = NULL;
  pp_exchange_release(x->srv, x); /* the owner is done at once (no client to flush to) */
}
static void o_fail(pp_exchange *x, int status, const char *msg) {
  (void)msg;
  last_status = status;
  note("fail");
  x->state = PP_X_RESPONDED;
  x->owner = NULL;
  pp_exchange_release(x->srv, x);
}
static size_t o_flush(pp_exchange *x) {
  (void)x;
  note("flush");
  return 0;
}
static void o_body_writable(pp_exchange *x) {
  (void)x;
  note("body_writable");
}
static const pp_exchange_ops fake_ops = {o_head,  o_body,          o_end, o_fail,
                                         o_flush, o_body_writable, NULL};
static int fake_owner; /* its address is the owner pointer */

static int saw(const char *what) {
  for (int i = 0; i < n_events; i++)
    if (!strcmp(events[i], what)) return 1;
  return 0;
}

/* ---------------------------------------------------------------- the fake worker */

static void spin(int turns) {
  for (int i = 0; i < turns; i++) {
    uv_run(srv.loop, UV_RUN_NOWAIT);
    usleep(1000);
  }
}

static void worker_send(const pp_wire_frame *f) {
  uint8_t buf[4096];
  ssize_t n = pp_wire_encode(f, buf, sizeof buf);
  CU_ASSERT_FATAL(n > 0);
  CU_ASSERT_FATAL(write(worker_fd, buf, (size_t)n) == n);
}

/* Reads one frame from the server (the loop turns while waiting). 1, or 0 on timeout. */
static uint8_t frame_buf[1 << 21];
static size_t frame_len;
static int worker_recv(pp_wire_frame *f) {
  pp_wire_decoder dec;
  for (int turn = 0; turn < 2000; turn++) {
    pp_wire_decoder_init(&dec);
    size_t need = 0;
    ssize_t n = pp_wire_decode(&dec, frame_buf, frame_len, f, &need);
    CU_ASSERT_FATAL(n >= 0);
    if (n > 0) {
      static uint8_t keep[1 << 21];
      memcpy(keep, frame_buf, (size_t)n);
      memmove(frame_buf, frame_buf + n, frame_len - (size_t)n);
      frame_len -= (size_t)n;
      pp_wire_decoder_init(&dec);
      pp_wire_decode(&dec, keep, (size_t)n, f, NULL); /* pointers into keep */
      return 1;
    }
    uv_run(srv.loop, UV_RUN_NOWAIT);
    ssize_t r = recv(worker_fd, frame_buf + frame_len, sizeof frame_buf - frame_len, MSG_DONTWAIT);
    if (r > 0) frame_len += (size_t)r;
    if (r <= 0) usleep(1000);
  }
  return 0;
}

static void worker_connect(void) {
  worker_fd = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  snprintf(a.sun_path, sizeof a.sun_path, "%s", sock_path);
  CU_ASSERT_FATAL(connect(worker_fd, (struct sockaddr *)&a, sizeof a) == 0);
  pp_wire_frame f;
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_HELLO;
  f.version = PP_WIRE_VERSION;
  f.pid = 4242;
  worker_send(&f);
  for (int i = 0; i < 500 && !pp_registry_has_idle(&srv.reg); i++)
    spin(1);
  CU_ASSERT_FATAL(pp_registry_has_idle(&srv.reg));
}

static void worker_disconnect(void) {
  close(worker_fd);
  worker_fd = -1;
  frame_len = 0;
  spin(50);
}

/* ---------------------------------------------------------------- helpers */

static pp_exchange *new_exchange(const char *path, size_t body) {
  pp_exchange *x = pp_exchange_get(&srv, &fake_ops, &fake_owner);
  x->id = ++srv.next_request_id;
  x->t1 = x->t2 = pp_now_ns();
  x->state = PP_X_BODY;
  pp_exchange_env_begin(x);
  pp_env_put_pair(&x->head, "REQUEST_METHOD", 14, "GET", 3);
  pp_env_put_pair(&x->head, "PATH_INFO", 9, path, strlen(path));
  pp_exchange_env_end(x, 2, (int64_t)body);
  return x;
}

static void reset_events(void) {
  n_events = 0;
  last_status = 0;
  body_seen.len = 0;
}

static void respond(uint64_t id, int status, const char *body) {
  pp_wire_frame f;
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_RESPONSE_HEAD;
  f.request_id = id;
  f.status = (uint16_t)status;
  worker_send(&f);
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_RESPONSE_BODY;
  f.request_id = id;
  f.data = (const uint8_t *)body;
  f.data_len = strlen(body);
  worker_send(&f);
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_RESPONSE_END;
  f.request_id = id;
  f.t4_ns = 1, f.t5_ns = 2;
  f.gvl_wait_ns = f.cpu_ns = -1;
  worker_send(&f);
}

/* ---------------------------------------------------------------- tests */

static void test_dispatch_and_response(void) {
  worker_connect();
  reset_events();
  uint32_t live = srv.live_requests;
  pp_exchange *x = new_exchange("/a", 0);
  uint64_t id = x->id;
  pp_exchange_body_done(x); /* runnable: dispatched at once to the idle slot */
  CU_ASSERT_EQUAL(x->state, PP_X_RUNNING);
  CU_ASSERT(x->t2b > 0 && x->t3 >= x->t2b);
  pp_wire_frame f;
  CU_ASSERT_FATAL(worker_recv(&f));
  CU_ASSERT_EQUAL(f.type, PP_WIRE_REQUEST);
  CU_ASSERT_EQUAL(f.request_id, id);
  CU_ASSERT_EQUAL(f.pairs.count, 3); /* the two pairs and puma_plus.queue_ns */
  respond(id, 201, "hello");
  for (int i = 0; i < 200 && !saw("end"); i++)
    spin(1);
  /* head, body, end in that order (flush may come between reads) */
  int head = -1, body = -1, end = -1;
  for (int i = 0; i < n_events; i++) {
    if (!strcmp(events[i], "head") && head < 0) head = i;
    if (!strcmp(events[i], "body") && body < 0) body = i;
    if (!strcmp(events[i], "end") && end < 0) end = i;
  }
  CU_ASSERT(head >= 0 && head < body && body < end);
  CU_ASSERT_EQUAL(last_status, 201);
  CU_ASSERT_EQUAL(body_seen.len, 5);
  CU_ASSERT_EQUAL(srv.live_requests, live);
  CU_ASSERT(pp_registry_has_idle(&srv.reg)); /* the slot is free again */
  worker_disconnect();
}

static void test_abandon_queued_leaves_the_queue(void) {
  reset_events();
  uint64_t before = srv.stats.cancelled_queued;
  uint32_t live = srv.live_requests;
  pp_exchange *x = new_exchange("/q", 0); /* no worker connected: stays queued */
  pp_exchange_body_done(x);
  CU_ASSERT_EQUAL(x->state, PP_X_QUEUED);
  CU_ASSERT_EQUAL(srv.queue.len, 1);
  pp_exchange_abandon(x);
  CU_ASSERT_EQUAL(srv.queue.len, 0);
  CU_ASSERT_EQUAL(srv.stats.cancelled_queued, before + 1);
  CU_ASSERT_EQUAL(srv.live_requests, live);
  CU_ASSERT_EQUAL(n_events, 0); /* no callback after abandon */
}

static void test_abandon_running_sends_cancel(void) {
  worker_connect();
  reset_events();
  uint64_t before = srv.stats.cancelled_running;
  uint32_t live = srv.live_requests;
  pp_exchange *x = new_exchange("/r", 0);
  uint64_t id = x->id;
  pp_exchange_body_done(x);
  pp_wire_frame f;
  CU_ASSERT_FATAL(worker_recv(&f));
  CU_ASSERT_EQUAL(f.type, PP_WIRE_REQUEST);
  pp_exchange_abandon(x);
  CU_ASSERT_EQUAL(srv.stats.cancelled_running, before + 1);
  CU_ASSERT_FATAL(worker_recv(&f));
  CU_ASSERT_EQUAL(f.type, PP_WIRE_CANCEL);
  CU_ASSERT_EQUAL(f.request_id, id);
  /* still held by dispatch until the worker answers; then freed with no callback */
  CU_ASSERT_EQUAL(srv.live_requests, live + 1);
  respond(id, 200, "late");
  for (int i = 0; i < 200 && srv.live_requests != live; i++)
    spin(1);
  CU_ASSERT_EQUAL(srv.live_requests, live);
  CU_ASSERT_EQUAL(n_events, 0);
  worker_disconnect();
}

static void test_worker_lost_is_a_502(void) {
  worker_connect();
  reset_events();
  uint32_t live = srv.live_requests;
  pp_exchange *x = new_exchange("/lost", 0);
  pp_exchange_body_done(x);
  pp_wire_frame f;
  CU_ASSERT_FATAL(worker_recv(&f));
  worker_disconnect(); /* the worker dies with the request running */
  CU_ASSERT(saw("fail"));
  CU_ASSERT_EQUAL(last_status, 502);
  CU_ASSERT_EQUAL(srv.live_requests, live);
}

static void test_streamed_body(void) {
  worker_connect();
  reset_events();
  size_t total = PP_BODY_BUFFER_LIMIT + 100000; /* over the buffer limit: streams */
  pp_exchange *x = new_exchange("/upload", total);
  CU_ASSERT(x->streaming);
  static uint8_t chunk[65536];
  memset(chunk, 'b', sizeof chunk);
  size_t sent = 0;
  while (sent < PP_BODY_BUFFER_LIMIT) { /* buffered until 1 MiB, then runnable */
    pp_exchange_body_in(x, chunk, sizeof chunk);
    sent += sizeof chunk;
  }
  CU_ASSERT_EQUAL(x->state, PP_X_RUNNING);
  CU_ASSERT(saw("body_writable")); /* the owner may read the client again */
  while (sent < total) {
    size_t n = total - sent < sizeof chunk ? total - sent : sizeof chunk;
    CU_ASSERT(pp_exchange_can_take_body(x));
    pp_exchange_body_in(x, chunk, n);
    sent += n;
  }
  pp_exchange_body_done(x);
  pp_wire_frame f;
  size_t body_bytes = 0;
  int ended = 0;
  CU_ASSERT_FATAL(worker_recv(&f));
  CU_ASSERT_EQUAL(f.type, PP_WIRE_REQUEST);
  CU_ASSERT(f.flags & PP_WIRE_FLAG_BODY_STREAMS);
  while (!ended && worker_recv(&f)) {
    if (f.type == PP_WIRE_BODY) body_bytes += f.data_len;
    if (f.type == PP_WIRE_BODY_END) ended = 1;
  }
  CU_ASSERT(ended);
  CU_ASSERT_EQUAL(body_bytes, total);
  respond(x->id, 200, "ok");
  for (int i = 0; i < 200 && !saw("end"); i++)
    spin(1);
  CU_ASSERT(saw("end"));
  worker_disconnect();
}

static int suite_init(void) {
  pp_config_defaults(&cfg);
  cfg.quiet = 1;
  memset(&srv, 0, sizeof srv);
  srv.cfg = &cfg;
  srv.loop = uv_default_loop();
  pp_queue_init(&srv.queue);
  pp_queue_init(&srv.clients);
  pp_queue_init(&srv.wconns);
  pp_registry_init(&srv.reg);
  pp_admit_state_init(&srv.admit);
  pp_hist_window_init(&srv.stats.queue);
  pp_hist_window_init(&srv.stats.service);
  pp_hist_window_init(&srv.stats.ttfb);
  pp_hist_window_init(&srv.stats.total);
  pp_hist_window_init(&srv.stats.body_wait);
  pp_buf_init(&body_seen);
  snprintf(sock_path, sizeof sock_path, "/tmp/pp-test-exchange-%d.sock", (int)getpid());
  return pp_wlink_listen(&srv, sock_path) == 0 ? 0 : -1;
}

static int suite_clean(void) {
  unlink(sock_path);
  pp_buf_dispose(&body_seen);
  return 0;
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("exchange", suite_init, suite_clean);
  CU_add_test(s, "dispatch, then head/body/end to the owner", test_dispatch_and_response);
  CU_add_test(s, "abandon while queued leaves the queue", test_abandon_queued_leaves_the_queue);
  CU_add_test(s, "abandon while running sends CANCEL", test_abandon_running_sends_cancel);
  CU_add_test(s, "the worker dies: fail(502)", test_worker_lost_is_a_502);
  CU_add_test(s, "a body over 1 MiB streams as BODY frames", test_streamed_body);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failures = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}
