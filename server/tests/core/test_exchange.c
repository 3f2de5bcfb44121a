/* The exchange contract (server/exchange/exchange.h) with a fake protocol: an owner that records
 * every ops callback, and a fake worker thread (a plain blocking unix socket that says HELLO and
 * answers with hand-written frames). The real exchange, dispatch and worker link run on a
 * real libuv loop in between; no HTTP session is involved, which is the point: anything that
 * speaks this contract is served the same way. */
#include <CUnit/Basic.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "server/core/dispatch.h"
#include "server/process/server_int.h"

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
static int fail_statuses[8], n_fails; /* every fail(), in order */

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
  pp_exchange_release(x->pool, x); /* the owner is done at once (no client to flush to) */
}
static void o_fail(pp_exchange *x, int status, const char *msg) {
  (void)msg;
  last_status = status;
  if (n_fails < 8) fail_statuses[n_fails++] = status;
  note("fail");
  x->state = PP_X_RESPONDED;
  x->owner = NULL;
  pp_exchange_release(x->pool, x);
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
                                         o_flush, o_body_writable, NULL,  NULL};
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
static int received_fds[8], n_received_fds; /* descriptors that came with the bytes */

/* recv(2) that keeps the descriptors riding on the bytes (SCM_RIGHTS), as the gem does. */
static ssize_t recv_with_fds(int fd, uint8_t *buf, size_t cap) {
  struct iovec iov = {buf, cap};
  union {
    struct cmsghdr h;
    char space[CMSG_SPACE(sizeof(int) * 4)];
  } ctl;
  struct msghdr m = {
      .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &ctl, .msg_controllen = sizeof ctl};
  ssize_t r = recvmsg(fd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  if (r < 0) return r;
  for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < n && n_received_fds < 8; i++)
      memcpy(&received_fds[n_received_fds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
  }
  return r;
}
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
    ssize_t r = recv_with_fds(worker_fd, frame_buf + frame_len, sizeof frame_buf - frame_len);
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
  for (int i = 0; i < 500 && !pp_registry_has_idle(&srv.workers.reg); i++)
    spin(1);
  CU_ASSERT_FATAL(pp_registry_has_idle(&srv.workers.reg));
}

static void worker_disconnect(void) {
  close(worker_fd);
  worker_fd = -1;
  frame_len = 0;
  spin(50);
}

/* ---------------------------------------------------------------- helpers */

static pp_exchange *new_exchange(const char *path, size_t body) {
  pp_exchange *x = pp_exchange_get(&srv.xpool, &fake_ops, &fake_owner);
  x->id = ++srv.core.next_request_id;
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
  n_fails = 0;
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
  uint32_t live = srv.xpool.live_requests;
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
  CU_ASSERT_EQUAL(srv.xpool.live_requests, live);
  CU_ASSERT(pp_registry_has_idle(&srv.workers.reg)); /* the slot is free again */
  worker_disconnect();
}

static void test_abandon_queued_leaves_the_queue(void) {
  reset_events();
  uint64_t before = srv.core.stats.cancelled_queued;
  uint32_t live = srv.xpool.live_requests;
  pp_exchange *x = new_exchange("/q", 0); /* no worker connected: stays queued */
  pp_exchange_body_done(x);
  CU_ASSERT_EQUAL(x->state, PP_X_QUEUED);
  CU_ASSERT_EQUAL(srv.core.queue.len, 1);
  pp_exchange_abandon(x);
  CU_ASSERT_EQUAL(srv.core.queue.len, 0);
  CU_ASSERT_EQUAL(srv.core.stats.cancelled_queued, before + 1);
  CU_ASSERT_EQUAL(srv.xpool.live_requests, live);
  CU_ASSERT_EQUAL(n_events, 0); /* no callback after abandon */
}

static void test_abandon_running_sends_cancel(void) {
  worker_connect();
  reset_events();
  uint64_t before = srv.core.stats.cancelled_running;
  uint32_t live = srv.xpool.live_requests;
  pp_exchange *x = new_exchange("/r", 0);
  uint64_t id = x->id;
  pp_exchange_body_done(x);
  pp_wire_frame f;
  CU_ASSERT_FATAL(worker_recv(&f));
  CU_ASSERT_EQUAL(f.type, PP_WIRE_REQUEST);
  pp_exchange_abandon(x);
  CU_ASSERT_EQUAL(srv.core.stats.cancelled_running, before + 1);
  CU_ASSERT_FATAL(worker_recv(&f));
  CU_ASSERT_EQUAL(f.type, PP_WIRE_CANCEL);
  CU_ASSERT_EQUAL(f.request_id, id);
  /* still held by dispatch until the worker answers; then freed with no callback */
  CU_ASSERT_EQUAL(srv.xpool.live_requests, live + 1);
  respond(id, 200, "late");
  for (int i = 0; i < 200 && srv.xpool.live_requests != live; i++)
    spin(1);
  CU_ASSERT_EQUAL(srv.xpool.live_requests, live);
  CU_ASSERT_EQUAL(n_events, 0);
  worker_disconnect();
}

static void test_worker_lost_is_a_502(void) {
  worker_connect();
  reset_events();
  uint32_t live = srv.xpool.live_requests;
  pp_exchange *x = new_exchange("/lost", 0);
  pp_exchange_body_done(x);
  pp_wire_frame f;
  CU_ASSERT_FATAL(worker_recv(&f));
  worker_disconnect(); /* the worker dies with the request running */
  CU_ASSERT(saw("fail"));
  CU_ASSERT_EQUAL(last_status, 502);
  CU_ASSERT_EQUAL(srv.xpool.live_requests, live);
}

static void test_streamed_body(void) {
  cfg.body_stream = 1; /* -body-stream: the path before spooling */
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
  cfg.body_stream = 0;
}

/* A spooled body: the request is not runnable (no slot taken) until its last byte, then the
 * REQUEST has BODY_FILE, an empty body, and one descriptor whose file holds the body. With a
 * Content-Length the file is used from the first byte; without one, the first MiB is in
 * memory and moves to the file when the body outgrows it. */
static void spooled_body(int64_t content_length) {
  worker_connect();
  reset_events();
  n_received_fds = 0;
  size_t total = PP_BODY_BUFFER_LIMIT + 100003;
  pp_exchange *x = new_exchange("/upload", 0);
  x->content_length = content_length; /* (new_exchange's env_end said 0) */
  static uint8_t chunk[65536];
  size_t sent = 0;
  uint32_t idle_before = srv.workers.reg.slots_ready - srv.workers.reg.slots_busy;
  while (sent < total) {
    size_t n = total - sent < sizeof chunk ? total - sent : sizeof chunk;
    for (size_t i = 0; i < n; i++)
      chunk[i] = (uint8_t)((sent + i) * 7 % 251);
    CU_ASSERT(pp_exchange_can_take_body(x));
    pp_exchange_body_in(x, chunk, n);
    sent += n;
    if (content_length < 0 && sent <= PP_BODY_BUFFER_LIMIT) {
      CU_ASSERT(!x->spooling);
      CU_ASSERT_EQUAL(srv.xpool.body_buffered, sent);
    } else {
      CU_ASSERT(x->spooling);
      CU_ASSERT_EQUAL(srv.xpool.body_buffered, 0); /* nothing of it held in memory */
    }
    CU_ASSERT_EQUAL(x->state, PP_X_BODY); /* not runnable: no slot is held while it arrives */
  }
  CU_ASSERT_EQUAL(srv.workers.reg.slots_ready - srv.workers.reg.slots_busy, idle_before);
  CU_ASSERT_EQUAL(srv.xpool.spool_bytes, total);
  pp_exchange_body_done(x);
  CU_ASSERT_EQUAL(x->state, PP_X_RUNNING);
  pp_wire_frame f;
  CU_ASSERT_FATAL(worker_recv(&f));
  CU_ASSERT_EQUAL(f.type, PP_WIRE_REQUEST);
  CU_ASSERT(f.flags & PP_WIRE_FLAG_BODY_FILE);
  CU_ASSERT(!(f.flags & PP_WIRE_FLAG_BODY_STREAMS));
  CU_ASSERT_EQUAL(f.data_len, 0);
  CU_ASSERT_EQUAL_FATAL(n_received_fds, 1);
  int fd = received_fds[0];
  CU_ASSERT_EQUAL(lseek(fd, 0, SEEK_END), (off_t)total);
  CU_ASSERT_EQUAL(lseek(fd, 0, SEEK_SET), 0);
  static uint8_t back[PP_BODY_BUFFER_LIMIT + 200000];
  size_t got = 0;
  ssize_t r;
  while ((r = read(fd, back + got, sizeof back - got)) > 0)
    got += (size_t)r;
  CU_ASSERT_EQUAL(got, total);
  int same = got == total;
  for (size_t i = 0; same && i < total; i++)
    same = back[i] == (uint8_t)(i * 7 % 251);
  CU_ASSERT(same);
  close(fd);
  respond(x->id, 200, "ok");
  for (int i = 0; i < 200 && !saw("end"); i++)
    spin(1);
  CU_ASSERT(saw("end"));
  CU_ASSERT_EQUAL(srv.xpool.spool_bytes, 0); /* released with the exchange */
  worker_disconnect();
}

static void test_spooled_body_with_length(void) {
  spooled_body(PP_BODY_BUFFER_LIMIT + 100003);
}

static void test_spooled_body_without_length(void) {
  spooled_body(-1);
}

/* -max-spool-total: a body larger than the whole budget is a 413, one that does not fit
 * beside the others a 503; each answered through fail() from the loop, never inside
 * body_in; later bytes are dropped, and the budget comes back. */
static void test_spool_budget_refusals(void) {
  cfg.max_spool_total = 3u << 20;
  reset_events();
  static uint8_t chunk[65536];
  pp_exchange *big = new_exchange("/big", 0);
  big->content_length = 4 << 20;
  pp_exchange_body_in(big, chunk, sizeof chunk);
  CU_ASSERT(!saw("fail"));                       /* not from inside the owner's call */
  pp_exchange_body_in(big, chunk, sizeof chunk); /* dropped */
  for (int i = 0; i < 50 && !saw("fail"); i++)
    spin(1);
  CU_ASSERT_EQUAL(n_fails, 1);
  CU_ASSERT_EQUAL(fail_statuses[0], 413);
  CU_ASSERT_EQUAL(srv.xpool.spool_bytes, 0);

  reset_events();
  pp_exchange *a = new_exchange("/a", 0);
  a->content_length = 2 << 20;
  pp_exchange_body_in(a, chunk, sizeof chunk);
  CU_ASSERT(a->spooling);
  CU_ASSERT_EQUAL(srv.xpool.spool_bytes, 2u << 20); /* a known length is reserved whole */
  pp_exchange *b = new_exchange("/b", 0);           /* no length: grows past 1 MiB, then no room */
  for (size_t sent = 0; sent < (2u << 20); sent += sizeof chunk)
    pp_exchange_body_in(b, chunk, sizeof chunk);
  for (int i = 0; i < 50 && !saw("fail"); i++)
    spin(1);
  CU_ASSERT_EQUAL(n_fails, 1);
  CU_ASSERT_EQUAL(fail_statuses[0], 503);
  CU_ASSERT(a->spooling && !a->refuse_status);
  pp_exchange_abandon(a); /* its client went away: file closed, budget back */
  CU_ASSERT_EQUAL(srv.xpool.spool_bytes, 0);
  CU_ASSERT_EQUAL(srv.xpool.spool_refused_413, 1);
  CU_ASSERT_EQUAL(srv.xpool.spool_refused_503, 1);

  /* a Content-Length known at the head is checked there, before any body byte (HTTP/1.1
   * then sends no 100 Continue): refused at env_end */
  reset_events();
  pp_exchange *early = new_exchange("/early", 4u << 20);
  CU_ASSERT_EQUAL(early->refuse_status, 413);
  for (int i = 0; i < 50 && !saw("fail"); i++)
    spin(1);
  CU_ASSERT_EQUAL(n_fails, 1);
  CU_ASSERT_EQUAL(fail_statuses[0], 413);
  pp_exchange *fits = new_exchange("/fits", 2u << 20); /* spooling at once, reserved whole */
  CU_ASSERT(fits->spooling && !fits->refuse_status);
  CU_ASSERT_EQUAL(srv.xpool.spool_bytes, 2u << 20);
  pp_exchange_abandon(fits);
  CU_ASSERT_EQUAL(srv.xpool.spool_bytes, 0);
  cfg.max_spool_total = 4ull << 30;
}

/* ---------------------------------------------------------------- liveness (wlink.c) */

/* Another connection of a fake worker process: HELLO (a thread) or HEARTBEAT (its monitor). */
static int dial(uint8_t first, uint32_t pid, uint32_t thread_index) {
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  snprintf(a.sun_path, sizeof a.sun_path, "%s", sock_path);
  CU_ASSERT_FATAL(connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
  pp_wire_frame f;
  memset(&f, 0, sizeof f);
  f.type = first;
  f.version = PP_WIRE_VERSION;
  f.pid = pid;
  f.thread_index = thread_index;
  uint8_t buf[64];
  ssize_t n = pp_wire_encode(&f, buf, sizeof buf);
  CU_ASSERT_FATAL(write(fd, buf, (size_t)n) == n);
  spin(20);
  return fd;
}

/* One small frame from fd (the loop turns while waiting): 1, or 0 after ~2 s. */
static int fd_recv(int fd, pp_wire_frame *f, uint8_t *buf, size_t cap) {
  size_t len = 0;
  for (int turn = 0; turn < 2000; turn++) {
    pp_wire_decoder dec;
    pp_wire_decoder_init(&dec);
    if (len && pp_wire_decode(&dec, buf, len, f, NULL) > 0) return 1;
    uv_run(srv.loop, UV_RUN_NOWAIT);
    /* one frame at a time: the header, then exactly its payload */
    size_t want = len < 8 ? 8 - len : 8 + pp_wire_get_u32(buf + 4) - len;
    if (len + want > cap) return 0;
    ssize_t r = recv(fd, buf + len, want, MSG_DONTWAIT);
    if (r > 0) len += (size_t)r;
    if (r <= 0) usleep(1000);
  }
  return 0;
}

static void fd_send(int fd, const pp_wire_frame *f) {
  uint8_t buf[4096];
  ssize_t n = pp_wire_encode(f, buf, sizeof buf);
  CU_ASSERT_FATAL(n > 0 && write(fd, buf, (size_t)n) == n);
}

static void fd_respond_end(int fd, uint64_t id) {
  pp_wire_frame f;
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_RESPONSE_HEAD;
  f.request_id = id;
  f.status = 500;
  fd_send(fd, &f);
  f.type = PP_WIRE_RESPONSE_END;
  f.t4_ns = 1, f.t5_ns = 2, f.gvl_wait_ns = f.cpu_ns = -1;
  fd_send(fd, &f);
}

/* Runs the watch (as its timer would) until cond or ~2 s. */
#define WATCH_UNTIL(cond)                                                                          \
  for (int turn_ = 0; turn_ < 2000 && !(cond); turn_++) {                                          \
    pp_wlink_watch(&srv.workers, pp_now_ns());                                                     \
    spin(1);                                                                                       \
  }

/* A real process to stand for a worker, so that the kill under test has a target. */
static pid_t fake_worker_process(void) {
  pid_t pid = fork();
  if (pid == 0) {
    pause();
    _exit(0);
  }
  return pid;
}

/* The registry entry of a fake worker goes (as its EXITED would remove it), so that a later
 * test's watch never looks at it. */
static void forget_worker(uint32_t pid) {
  pp_worker *w = pp_registry_find(&srv.workers.reg, pid);
  if (w) pp_registry_remove(&srv.workers.reg, w);
}

static int killed_by_sigkill(pid_t pid) {
  int st = 0;
  for (int i = 0; i < 2000; i++) {
    if (waitpid(pid, &st, WNOHANG) == pid) return WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
    usleep(1000);
  }
  kill(pid, SIGKILL);
  waitpid(pid, &st, 0);
  return 0;
}

/* -request-timeout: fail(504) to the owner, TIMEOUT (request id, thread index) on the monitor
 * connection, the slot busy and the late answer discarded until RESPONSE_END; then free. */
static void test_request_timeout_answers_504_and_interrupts(void) {
  cfg.request_timeout_ns = 40000000;
  cfg.worker_kill_grace_ns = 60000000000ull;
  reset_events();
  uint64_t before = srv.core.stats.request_timeouts;
  uint32_t live = srv.xpool.live_requests;
  pid_t pid = fake_worker_process();
  int thread = dial(PP_WIRE_HELLO, (uint32_t)pid, 3);
  int monitor = dial(PP_WIRE_HEARTBEAT, (uint32_t)pid, 0);
  uint8_t mbuf[256], tbuf[65536];
  pp_wire_frame f;
  CU_ASSERT_FATAL(fd_recv(monitor, &f, mbuf, sizeof mbuf));
  CU_ASSERT_EQUAL(f.type, PP_WIRE_HEARTBEAT_INTERVAL);
  CU_ASSERT_EQUAL(f.interval_ms, 5000); /* a quarter of 60 s, at most 5 s */
  pp_worker *wk = pp_registry_find(&srv.workers.reg, (uint32_t)pid);
  CU_ASSERT_FATAL(wk != NULL);
  CU_ASSERT(wk->heartbeat_ns > 0);

  pp_exchange *x = new_exchange("/slow", 0);
  uint64_t id = x->id;
  pp_exchange_body_done(x);
  CU_ASSERT_FATAL(fd_recv(thread, &f, tbuf, sizeof tbuf));
  CU_ASSERT_EQUAL(f.type, PP_WIRE_REQUEST);
  int64_t t0 = pp_now_ns();
  pp_wlink_watch(&srv.workers, t0); /* not yet */
  CU_ASSERT(!saw("fail"));
  WATCH_UNTIL(saw("fail"));
  CU_ASSERT(pp_now_ns() - t0 >= 30000000); /* not before the deadline (from T3) */
  CU_ASSERT_EQUAL(last_status, 504);
  CU_ASSERT_EQUAL(srv.core.stats.request_timeouts, before + 1);
  CU_ASSERT_FATAL(fd_recv(monitor, &f, mbuf, sizeof mbuf));
  CU_ASSERT_EQUAL(f.type, PP_WIRE_TIMEOUT);
  CU_ASSERT_EQUAL(f.request_id, id);
  CU_ASSERT_EQUAL(f.thread_index, 3);
  CU_ASSERT(!pp_registry_has_idle(&srv.workers.reg)); /* the thread still holds it */
  CU_ASSERT_EQUAL(srv.xpool.live_requests, live);     /* the exchange itself is gone */

  fd_respond_end(thread, id); /* the interrupted app's 500: discarded */
  for (int i = 0; i < 500 && !pp_registry_has_idle(&srv.workers.reg); i++)
    spin(1);
  CU_ASSERT(pp_registry_has_idle(&srv.workers.reg));
  CU_ASSERT(!saw("head"));
  CU_ASSERT_EQUAL(n_fails, 1);

  /* The freed thread takes the next request and answers it normally. */
  cfg.request_timeout_ns = 0;
  x = new_exchange("/next", 0);
  id = x->id;
  pp_exchange_body_done(x);
  CU_ASSERT_FATAL(fd_recv(thread, &f, tbuf, sizeof tbuf));
  CU_ASSERT_EQUAL(f.request_id, id);
  fd_respond_end(thread, id);
  for (int i = 0; i < 200 && !saw("end"); i++)
    spin(1);
  CU_ASSERT(saw("head") && saw("end"));
  CU_ASSERT(!wk->killed);
  close(thread);
  close(monitor);
  spin(50);
  forget_worker((uint32_t)pid);
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
}

/* -worker-kill-grace: the thread keeps the timed-out request; after the grace the worker is
 * SIGKILLed, its other in-flight request fails 502. */
static void test_kill_after_the_grace(void) {
  cfg.request_timeout_ns = 30000000;
  cfg.worker_kill_grace_ns = 30000000;
  reset_events();
  uint64_t kills = srv.core.stats.workers_killed_timeout, bad = srv.core.stats.errors_502;
  pid_t pid = fake_worker_process();
  int t0fd = dial(PP_WIRE_HELLO, (uint32_t)pid, 0);
  int t1fd = dial(PP_WIRE_HELLO, (uint32_t)pid, 1);
  uint8_t buf[65536];
  pp_wire_frame f;
  pp_exchange *a = new_exchange("/stubborn", 0);
  pp_exchange_body_done(a);
  CU_ASSERT_FATAL(fd_recv(t0fd, &f, buf, sizeof buf) || fd_recv(t1fd, &f, buf, sizeof buf));
  WATCH_UNTIL(n_fails == 1);
  CU_ASSERT_EQUAL(fail_statuses[0], 504);
  cfg.request_timeout_ns = 0; /* the sibling is not timed out itself */
  pp_exchange *b = new_exchange("/sibling", 0);
  pp_exchange_body_done(b);
  CU_ASSERT_EQUAL(b->state, PP_X_RUNNING);
  WATCH_UNTIL(n_fails == 2);
  CU_ASSERT_EQUAL(n_fails, 2);
  CU_ASSERT_EQUAL(fail_statuses[1], 502);
  CU_ASSERT_EQUAL(srv.core.stats.workers_killed_timeout, kills + 1);
  CU_ASSERT_EQUAL(srv.core.stats.errors_502, bad + 1);
  pp_worker *wk = pp_registry_find(&srv.workers.reg, (uint32_t)pid);
  CU_ASSERT(wk && wk->killed && wk->slots == 0);
  CU_ASSERT(killed_by_sigkill(pid));
  pp_wlink_watch(&srv.workers, pp_now_ns() + 1000000000LL); /* killed once */
  CU_ASSERT_EQUAL(srv.core.stats.workers_killed_timeout, kills + 1);
  close(t0fd);
  close(t1fd);
  spin(50);
  forget_worker((uint32_t)pid);
}

/* -worker-timeout: a worker with a monitor connection whose heartbeat goes silent is killed;
 * a HEARTBEAT refreshes it; a worker that never dialled a monitor is never timed out. */
static void test_silent_heartbeat_kills(void) {
  cfg.request_timeout_ns = 0;
  cfg.worker_timeout_ns = 500000000;
  reset_events();
  uint64_t kills = srv.core.stats.workers_killed_heartbeat;
  pid_t pid = fake_worker_process();
  int monitor = dial(PP_WIRE_HEARTBEAT, (uint32_t)pid, 0);
  int thread = dial(PP_WIRE_HELLO, (uint32_t)pid, 0);
  uint8_t mbuf[256];
  pp_wire_frame f;
  CU_ASSERT_FATAL(fd_recv(monitor, &f, mbuf, sizeof mbuf));
  CU_ASSERT_EQUAL(f.interval_ms, 125); /* a quarter of 500 ms */
  pp_worker *wk = pp_registry_find(&srv.workers.reg, (uint32_t)pid);
  CU_ASSERT_FATAL(wk != NULL);
  int64_t now = pp_now_ns();
  pp_wlink_watch(&srv.workers, now + 400000000); /* within the timeout */
  CU_ASSERT(!wk->killed);
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_HEARTBEAT;
  f.pid = (uint32_t)pid;
  usleep(100000);
  int64_t before_beat = wk->heartbeat_ns;
  fd_send(monitor, &f);
  for (int i = 0; i < 200 && wk->heartbeat_ns == before_beat; i++)
    spin(1);
  CU_ASSERT(wk->heartbeat_ns > before_beat);
  pp_wlink_watch(&srv.workers, wk->heartbeat_ns + 450000000); /* refreshed: still alive */
  CU_ASSERT(!wk->killed);
  pp_worker *no_monitor = pp_registry_find(&srv.workers.reg, 4242); /* earlier tests' worker */
  pp_wlink_watch(&srv.workers, wk->heartbeat_ns + 600000000);
  CU_ASSERT(wk->killed);
  CU_ASSERT_EQUAL(srv.core.stats.workers_killed_heartbeat, kills + 1);
  CU_ASSERT(no_monitor == NULL || !no_monitor->killed);
  CU_ASSERT(killed_by_sigkill(pid));
  /* A silent worker that is already gone (no such process) is forgotten as an EXITED would
   * be, so that it is replaced rather than counted alive. */
  pid_t dead = fake_worker_process();
  kill(dead, SIGKILL);
  waitpid(dead, NULL, 0);
  int m_dead = dial(PP_WIRE_HEARTBEAT, (uint32_t)dead, 0);
  CU_ASSERT_FATAL(fd_recv(m_dead, &f, mbuf, sizeof mbuf));
  pp_worker *ghost = pp_registry_find(&srv.workers.reg, (uint32_t)dead);
  CU_ASSERT_FATAL(ghost != NULL);
  pp_wlink_watch(&srv.workers, ghost->heartbeat_ns + 600000000);
  CU_ASSERT_PTR_NULL(pp_registry_find(&srv.workers.reg, (uint32_t)dead));
  CU_ASSERT_EQUAL(srv.core.stats.workers_killed_heartbeat, kills + 2);
  close(m_dead);
  /* Any frame but HEARTBEAT on a monitor connection is a protocol error: it closes. */
  forget_worker((uint32_t)pid);
  int m2 = dial(PP_WIRE_HEARTBEAT, 4343, 0);
  CU_ASSERT_FATAL(fd_recv(m2, &f, mbuf, sizeof mbuf));
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_RESPONSE_END;
  fd_send(m2, &f);
  spin(50);
  char c;
  CU_ASSERT_EQUAL(recv(m2, &c, 1, MSG_DONTWAIT), 0); /* EOF */
  cfg.worker_timeout_ns = 0;
  forget_worker(4343); /* never watched: the timeout is off from here */
  close(m2);
  close(monitor);
  close(thread);
  spin(50);
}

/* Nonzero when a frame (or EOF) is waiting on fd after the loop turned a little. */
static int has_bytes(int fd) {
  spin(20);
  char c;
  return recv(fd, &c, 1, MSG_DONTWAIT | MSG_PEEK) >= 0;
}

static void expect_frame(int fd, uint8_t type, uint32_t value) {
  uint8_t buf[256];
  pp_wire_frame f;
  CU_ASSERT_FATAL(fd_recv(fd, &f, buf, sizeof buf));
  CU_ASSERT_EQUAL(f.type, type);
  CU_ASSERT_EQUAL(type == PP_WIRE_SLOTS ? f.count : f.thread_index, value);
}

static uint64_t dispatch_one(int fd) {
  pp_exchange *x = new_exchange("/run", 0);
  uint64_t id = x->id;
  pp_exchange_body_done(x);
  uint8_t buf[65536];
  pp_wire_frame f;
  CU_ASSERT_FATAL(fd_recv(fd, &f, buf, sizeof buf));
  CU_ASSERT_EQUAL(f.type, PP_WIRE_REQUEST);
  CU_ASSERT_EQUAL(f.request_id, id);
  return id;
}

/* Run-time slots (pp_wlink_set_slots, docs/PROTOCOL.md "SLOTS, SLOT_CLOSE"): the target goes
 * to the monitor (SLOTS), clamped to -min-threads..-max-slots; idle slots above it get
 * SLOT_CLOSE at once and stop being capacity, busy ones right after their RESPONSE_END; a slot
 * that says HELLO above the target is closed at once; a closed slot's EOF with the worker
 * under its target sends SLOTS again; a worker without a monitor cannot take a target. */
static void test_slots_actuator(void) {
  cfg.min_threads = 1;
  cfg.max_slots = 8;
  reset_events();
  uint64_t closed0 = srv.core.stats.slots_closed;
  const uint32_t pid = 5151;
  int monitor = dial(PP_WIRE_HEARTBEAT, pid, 0);
  expect_frame(monitor, PP_WIRE_HEARTBEAT_INTERVAL, 0);
  int t0 = dial(PP_WIRE_HELLO, pid, 0);
  pp_worker *wk = pp_registry_find(&srv.workers.reg, pid);
  CU_ASSERT_FATAL(wk != NULL && wk->state == PP_WORKER_READY);
  uint64_t id0 = dispatch_one(t0); /* t0 busy */
  int t1 = dial(PP_WIRE_HELLO, pid, 1), t2 = dial(PP_WIRE_HELLO, pid, 2);
  CU_ASSERT_EQUAL(wk->slots, 3);
  CU_ASSERT_EQUAL(pp_wlink_slots_target(&srv.workers, wk), 5); /* never set: the starting count */

  const char *why = NULL;
  CU_ASSERT_EQUAL(pp_wlink_set_slots(&srv.workers, wk, 0, &why), 1); /* clamped to -min-threads */
  expect_frame(monitor, PP_WIRE_SLOTS, 1);
  expect_frame(t1, PP_WIRE_SLOT_CLOSE, 1); /* the idle ones, at once */
  expect_frame(t2, PP_WIRE_SLOT_CLOSE, 2);
  CU_ASSERT_EQUAL(wk->slots, 1);
  CU_ASSERT_EQUAL(srv.workers.reg.slots_ready, 1);
  CU_ASSERT(!has_bytes(t0)); /* the busy one is the one kept */
  close(t1), close(t2);
  spin(20);
  CU_ASSERT(!has_bytes(monitor)); /* at its target: no SLOTS again */

  int t3 = dial(PP_WIRE_HELLO, pid, 3); /* dialled for an older, higher target */
  expect_frame(t3, PP_WIRE_SLOT_CLOSE, 3);
  CU_ASSERT_EQUAL(wk->slots, 1);
  close(t3);
  CU_ASSERT(!has_bytes(monitor)); /* its EOF finds the worker at its target */

  CU_ASSERT_EQUAL(pp_wlink_set_slots(&srv.workers, wk, 99, &why), 8); /* clamped to -max-slots */
  expect_frame(monitor, PP_WIRE_SLOTS, 8);
  CU_ASSERT_EQUAL(pp_wlink_set_slots(&srv.workers, wk, 3, &why), 3);
  expect_frame(monitor, PP_WIRE_SLOTS, 3);
  int t4 = dial(PP_WIRE_HELLO, pid, 4), t5 = dial(PP_WIRE_HELLO, pid, 5);
  CU_ASSERT_EQUAL(wk->slots, 3);
  uint64_t id4 = dispatch_one(t4), id5 = dispatch_one(t5); /* all three busy */

  CU_ASSERT_EQUAL(pp_wlink_set_slots(&srv.workers, wk, 1, &why), 1);
  expect_frame(monitor, PP_WIRE_SLOTS, 1);
  CU_ASSERT(!has_bytes(t0) && !has_bytes(t4) && !has_bytes(t5)); /* nothing while busy */
  CU_ASSERT_EQUAL(wk->slots, 3);
  fd_respond_end(t0, id0);
  fd_respond_end(t4, id4);
  fd_respond_end(t5, id5);
  spin(50);
  CU_ASSERT_EQUAL(n_events >= 3, 1);
  int fds[3] = {t0, t4, t5}, closing = 0, kept = -1;
  for (int i = 0; i < 3; i++) {
    if (has_bytes(fds[i])) {
      uint8_t buf[256];
      pp_wire_frame f;
      CU_ASSERT_FATAL(fd_recv(fds[i], &f, buf, sizeof buf));
      CU_ASSERT_EQUAL(f.type, PP_WIRE_SLOT_CLOSE);
      closing++;
    } else {
      kept = fds[i];
    }
  }
  CU_ASSERT_EQUAL(closing, 2); /* each after its RESPONSE_END */
  CU_ASSERT_EQUAL(wk->slots, 1);
  CU_ASSERT_EQUAL(srv.workers.reg.slots_ready, 1);
  CU_ASSERT(pp_registry_has_idle(&srv.workers.reg));
  CU_ASSERT_EQUAL(srv.core.stats.slots_closed, closed0 + 5);

  /* The target goes up before the worker has read the two SLOT_CLOSEs: their EOFs find it
   * under target, and SLOTS is sent again for each. */
  CU_ASSERT_EQUAL(pp_wlink_set_slots(&srv.workers, wk, 3, &why), 3);
  expect_frame(monitor, PP_WIRE_SLOTS, 3);
  for (int i = 0; i < 3; i++)
    if (fds[i] != kept) close(fds[i]);
  expect_frame(monitor, PP_WIRE_SLOTS, 3);
  expect_frame(monitor, PP_WIRE_SLOTS, 3);

  /* No monitor connection: no target. */
  int lone = dial(PP_WIRE_HELLO, 6161, 0);
  pp_worker *other = pp_registry_find(&srv.workers.reg, 6161);
  CU_ASSERT_FATAL(other != NULL);
  CU_ASSERT_EQUAL(pp_wlink_set_slots(&srv.workers, other, 2, &why), -1);
  CU_ASSERT_STRING_EQUAL(why, "the worker has no monitor connection");

  close(lone), close(kept), close(monitor);
  spin(50);
  forget_worker(pid);
  forget_worker(6161);
  cfg.max_slots = 0;
}

/* ---------------------------------------------------------------- retire (wlink.c, shepherd.c)
 *
 * A worker retired while it runs something gets RETIRE on the shepherd's control channel once
 * the last of it ends, whichever frame ends it: RESPONSE_END, a WebSocket event's WS_DONE, or
 * the RESPONSE_END of a request that had timed out. The channel here is a socketpair whose far
 * end the test reads in place of the shepherd. */

typedef enum { WORK_REQUEST, WORK_WS_EVENT, WORK_TIMED_OUT } retire_work;

/* An exchange of a WebSocket event (as session/wsconn.c makes one): its WS_MESSAGE frame whole
 * in head (dispatch fills in its two times), flexible (no sticky pid). */
static pp_exchange *new_ws_event(void) {
  pp_exchange *x = pp_exchange_get(&srv.xpool, &fake_ops, &fake_owner);
  x->ws_event = 1;
  x->logged = 1;
  x->id = ++srv.core.next_request_id;
  x->t1 = x->t2 = pp_now_ns();
  x->state = PP_X_BODY;
  pp_wire_frame f;
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_WS_MESSAGE;
  f.request_id = x->id;
  f.conn_id = 7;
  f.opcode = 1;
  f.data = (const uint8_t *)"hi";
  f.data_len = 2;
  ssize_t n = pp_wire_encoded_size(&f);
  CU_ASSERT_FATAL(n > 40);
  pp_buf_reserve(&x->head, (size_t)n);
  CU_ASSERT_FATAL(pp_wire_encode(&f, x->head.data, (size_t)n) == n);
  x->head.len = (size_t)n;
  return x;
}

/* Nothing waits on the control channel (the loop turns a little first). */
static int ctl_quiet(int fd) {
  spin(20);
  uint8_t b;
  return recv(fd, &b, 1, MSG_DONTWAIT | MSG_PEEK) < 0 && errno == EAGAIN;
}

static void retire_after(retire_work work, uint32_t pid, int ctl_fd) {
  reset_events();
  cfg.request_timeout_ns = work == WORK_TIMED_OUT ? 30000000 : 0;
  cfg.worker_kill_grace_ns = 60000000000ull;
  int thread = dial(PP_WIRE_HELLO, pid, 0);
  pp_worker *wk = pp_registry_find(&srv.workers.reg, pid);
  CU_ASSERT_FATAL(wk != NULL && wk->state == PP_WORKER_READY);
  uint8_t buf[65536];
  pp_wire_frame f;
  pp_exchange *x = work == WORK_WS_EVENT ? new_ws_event() : new_exchange("/long", 0);
  uint64_t id = x->id;
  if (work == WORK_WS_EVENT)
    pp_dispatch_push(x);
  else
    pp_exchange_body_done(x);
  CU_ASSERT_FATAL(fd_recv(thread, &f, buf, sizeof buf));
  CU_ASSERT_EQUAL(f.type, work == WORK_WS_EVENT ? PP_WIRE_WS_MESSAGE : PP_WIRE_REQUEST);
  CU_ASSERT_EQUAL(f.request_id, id);
  if (work == WORK_TIMED_OUT) {
    WATCH_UNTIL(saw("fail"));
    CU_ASSERT_EQUAL(last_status, 504); /* answered; the thread still holds the slot */
    cfg.request_timeout_ns = 0;
  }
  CU_ASSERT_EQUAL(wk->busy, 1);

  pp_shepherd_retire(&srv.workers, wk);
  CU_ASSERT_EQUAL(wk->state, PP_WORKER_RETIRING);
  CU_ASSERT(ctl_quiet(ctl_fd)); /* busy: no RETIRE yet */

  if (work == WORK_WS_EVENT) {
    memset(&f, 0, sizeof f);
    f.type = PP_WIRE_WS_DONE;
    f.request_id = id;
    f.t4_ns = 1, f.t5_ns = 2, f.gvl_wait_ns = f.cpu_ns = -1;
    fd_send(thread, &f);
  } else {
    fd_respond_end(thread, id);
  }
  uint8_t cbuf[64];
  int got = fd_recv(ctl_fd, &f, cbuf, sizeof cbuf);
  CU_ASSERT(got);
  if (got) {
    CU_ASSERT_EQUAL(f.type, PP_WIRE_RETIRE);
    CU_ASSERT_EQUAL(f.pid, pid);
  }
  CU_ASSERT_EQUAL(wk->busy, 0);
  CU_ASSERT(wk->retire_sent);
  CU_ASSERT(work == WORK_TIMED_OUT ? n_fails == 1 && !saw("end") : saw("end"));
  CU_ASSERT(ctl_quiet(ctl_fd)); /* once */
  close(thread);
  spin(50);
  forget_worker(pid);
}

static void test_retire_after_the_last_work(void) {
  int sv[2];
  CU_ASSERT_FATAL(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
  pp_workers *ws = &srv.workers;
  uv_pipe_init(srv.loop, &ws->ctl, 0);
  ws->ctl.data = ws;
  CU_ASSERT_FATAL(uv_pipe_open(&ws->ctl, sv[0]) == 0);
  ws->ctl_open = 1;
  retire_after(WORK_REQUEST, 7101, sv[1]);
  retire_after(WORK_WS_EVENT, 7102, sv[1]);
  retire_after(WORK_TIMED_OUT, 7103, sv[1]);
  ws->ctl_open = 0;
  uv_close((uv_handle_t *)&ws->ctl, NULL);
  spin(5);
  close(sv[1]);
}

static void slot_free(server *s) {
  pp_dispatch_all(&s->core);
}

static int suite_init(void) {
  pp_config_defaults(&cfg);
  cfg.quiet = 1;
  memset(&srv, 0, sizeof srv);
  srv.cfg = &cfg;
  srv.loop = uv_default_loop();
  srv.net.loop = srv.loop; /* a spooled body's descriptor is wrapped in a handle of this loop */
  /* what process/server.c hands the worker link: the core's dispatch */
  srv.hooks.slot_free = slot_free;
  pp_exchange_pool_init(&srv.xpool, &cfg, &srv);
  pp_workers_init(&srv.workers, &srv, srv.loop, &cfg, &srv.net, &srv.xpool, &srv.hooks,
                  &srv.core.stats, &srv.core.admit, &srv.ops.ctl.policy, &srv.draining,
                  &srv.stopping);
  pp_core_init(&srv.core, &srv, &srv.hooks, &srv.net, &srv.xpool, &srv.workers.reg,
               &srv.ops.ctl.policy, &srv.ops.ctl.shedding);
  pp_queue_init(&srv.sess.clients);
  pp_queue_init(&srv.workers.wconns);
  pp_registry_init(&srv.workers.reg);
  pp_hist_window_init(&srv.core.stats.queue);
  pp_hist_window_init(&srv.core.stats.service);
  pp_hist_window_init(&srv.core.stats.ttfb);
  pp_hist_window_init(&srv.core.stats.total);
  pp_hist_window_init(&srv.core.stats.body_wait);
  pp_buf_init(&body_seen);
  uv_timer_init(srv.loop, &srv.workers.respawn_timer); /* a forgotten worker's respawn may arm it */
  srv.workers.respawn_timer.data = &srv.workers;       /* shepherd.c works on pp_workers */
  snprintf(sock_path, sizeof sock_path, "/tmp/pp-test-exchange-%d.sock", (int)getpid());
  return pp_wlink_listen(&srv.workers, sock_path) == 0 ? 0 : -1;
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
  CU_add_test(s, "-body-stream: a body over 1 MiB streams as BODY frames", test_streamed_body);
  CU_add_test(s, "a body over 1 MiB is spooled, runnable when whole, its file passed",
              test_spooled_body_with_length);
  CU_add_test(s, "a body of unknown length moves from memory to its spool file at 1 MiB",
              test_spooled_body_without_length);
  CU_add_test(s, "-max-spool-total: 413 for one body over it, 503 beside others",
              test_spool_budget_refusals);
  CU_add_test(s, "request timeout: 504, TIMEOUT, slot held until RESPONSE_END",
              test_request_timeout_answers_504_and_interrupts);
  CU_add_test(s, "a thread that keeps a timed-out request: killed after the grace",
              test_kill_after_the_grace);
  CU_add_test(s, "a silent heartbeat kills the worker", test_silent_heartbeat_kills);
  CU_add_test(s, "slots at run time: SLOTS, SLOT_CLOSE idle now and busy after the response",
              test_slots_actuator);
  CU_add_test(s,
              "a retired worker gets RETIRE after its last RESPONSE_END, WS_DONE or timed-out end",
              test_retire_after_the_last_work);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failures = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}
