/* The open-loop generator: pacing, connection pool, HTTP/1.1 responses, outcomes.
 * See gen.h for the contract. Single-threaded; everything runs on one private uv loop. */
#include "bench/gen.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <llhttp.h>
#include <uv.h>

/* C_OPEN: connected, nothing in flight, not (yet) on the idle stack. */
enum conn_state { C_FREE = 0, C_CONNECTING, C_OPEN, C_IDLE, C_BUSY, C_CLOSING };

typedef struct gen gen;

typedef struct conn {
  uv_tcp_t tcp;
  uv_connect_t connect_req;
  uv_write_t write_req;
  llhttp_t parser;
  gen *g;
  uint32_t id;
  int state;
  int64_t req; /* result index in flight, -1 if none */
  uint32_t served;
  bool got_bytes; /* any response byte for the request in flight */
  bool message_done;
  int32_t next_free;
} conn;

struct gen {
  const pb_gen_config *cfg;
  const pb_schedule *sched;
  pb_result *results;
  uv_loop_t loop;
  uv_poll_t pacer;
  int timerfd;
  uv_timer_t sweeper;  /* timeouts */
  uv_timer_t progress; /* once a second */
  uint64_t t0;
  uint64_t timeout_ns;
  size_t next_arrival;
  uint64_t completed, completed_at_last_tick, in_flight;
  /* Arrivals due but waiting for a connection: a FIFO ring in intended order. */
  uint32_t *pending;
  size_t pending_head, pending_len;
  conn *conns;
  uint32_t max_conns;
  int32_t free_head;
  uint32_t conn_high; /* slots [0, conn_high) have ever been used: the sweep scans only those */
  uint32_t open_conns, connecting;
  uint32_t *idle; /* stack of idle connection slots */
  uint32_t idle_len;
  uint32_t conn_serial;
  char **requests; /* preformatted request bytes per kind */
  size_t *request_lens;
  struct sockaddr_storage addr;
  llhttp_settings_t settings;
  char readbuf[65536];
  bool stopping;
  bool pacer_active;
};

const char *pb_error_name(int err) {
  if (err == 0) return "";
  if (err == PB_ERR_BAD_HTTP) return "bad_http";
  return uv_err_name(err);
}

const char *pb_outcome_name(pb_outcome o) {
  switch (o) {
  case PB_PENDING: return "pending";
  case PB_OK: return "ok";
  case PB_SHED: return "shed";
  case PB_HTTP_ERROR: return "http_error";
  case PB_TIMEOUT: return "timeout";
  case PB_CONN_ERROR: return "conn_error";
  default: return "?";
  }
}

static uint64_t now_rel(gen *g) {
  uint64_t n = uv_hrtime();
  return n > g->t0 ? n - g->t0 : 0;
}

static void maybe_finish(gen *g);
static void conn_close(conn *c);
static void conn_became_idle(conn *c);
static void maybe_open(gen *g);

static void finish_request(gen *g, uint32_t i, pb_outcome o, uint16_t status, int err) {
  pb_result *r = &g->results[i];
  if (r->outcome != PB_PENDING) return;
  r->outcome = (uint8_t)o;
  r->error = (int16_t)err;
  r->status = status;
  r->done_ns = now_rel(g);
  g->completed++;
}

static pb_outcome outcome_of_status(unsigned status) {
  if (status >= 200 && status <= 299) return PB_OK;
  if (status == 503) return PB_SHED;
  return PB_HTTP_ERROR;
}

/* ---- connections ---- */

static void on_close(uv_handle_t *h) {
  conn *c = h->data;
  gen *g = c->g;
  c->state = C_FREE;
  c->next_free = g->free_head;
  g->free_head = (int32_t)(c - g->conns);
  g->open_conns--;
  /* A connection that died (timeout, reset, server close) is replaced while arrivals wait. */
  if (!g->stopping) maybe_open(g);
  maybe_finish(g);
}

static void idle_remove(gen *g, conn *c) {
  uint32_t slot = (uint32_t)(c - g->conns);
  for (uint32_t k = 0; k < g->idle_len; k++) {
    if (g->idle[k] == slot) {
      g->idle[k] = g->idle[--g->idle_len];
      return;
    }
  }
}

static void conn_close(conn *c) {
  gen *g = c->g;
  if (c->state == C_CLOSING || c->state == C_FREE) return;
  if (c->state == C_IDLE) idle_remove(g, c);
  if (c->state == C_CONNECTING) g->connecting--;
  if (c->state == C_BUSY) g->in_flight--;
  c->state = C_CLOSING;
  c->req = -1;
  uv_close((uv_handle_t *)&c->tcp, on_close);
}

/* The request in flight on `c` failed with `o`; the connection is unusable. */
static void conn_fail(conn *c, pb_outcome o, int err) {
  if (c->req >= 0) finish_request(c->g, (uint32_t)c->req, o, 0, err);
  conn_close(c);
  maybe_finish(c->g);
}

static void on_write(uv_write_t *w, int status) {
  conn *c = w->data;
  if (status < 0 && c->state == C_BUSY) conn_fail(c, PB_CONN_ERROR, status);
}

static void conn_send(conn *c, uint32_t i) {
  gen *g = c->g;
  pb_result *r = &g->results[i];
  uint32_t kind = g->sched->arrivals[i].kind;
  c->state = C_BUSY;
  c->req = i;
  c->got_bytes = false;
  c->message_done = false;
  r->reused = c->served > 0;
  r->conn_id = c->id;
  g->in_flight++;
  uv_buf_t buf = uv_buf_init(g->requests[kind], (unsigned)g->request_lens[kind]);
  c->write_req.data = c;
  r->sent_ns = now_rel(g);
  int rc = uv_write(&c->write_req, (uv_stream_t *)&c->tcp, &buf, 1, on_write);
  if (rc < 0) conn_fail(c, PB_CONN_ERROR, rc);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  conn *c = h->data;
  *buf = uv_buf_init(c->g->readbuf, sizeof c->g->readbuf);
}

static int on_message_complete(llhttp_t *p) {
  conn *c = p->data;
  c->message_done = true;
  return HPE_PAUSED; /* handled after llhttp_execute returns, outside the parser */
}

static void after_message(conn *c) {
  gen *g = c->g;
  bool keep = llhttp_should_keep_alive(&c->parser);
  unsigned status = c->parser.status_code;
  llhttp_resume(&c->parser);
  if (c->req >= 0) {
    finish_request(g, (uint32_t)c->req, outcome_of_status(status), (uint16_t)status, 0);
    c->req = -1;
  }
  g->in_flight--;
  c->served++;
  c->state = C_OPEN;
  if (keep)
    conn_became_idle(c);
  else
    conn_close(c);
  maybe_finish(g);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  conn *c = s->data;
  if (c->state == C_CLOSING || c->state == C_FREE) return;
  if (nread == 0) return;
  if (nread < 0) {
    if (c->state == C_BUSY && nread == UV_EOF && c->got_bytes) {
      /* A close-delimited body ends at EOF. */
      if (llhttp_finish(&c->parser) == HPE_OK && c->message_done) {
        after_message(c);
        if (c->state != C_CLOSING && c->state != C_FREE) conn_close(c);
        return;
      }
    }
    if (c->state == C_BUSY)
      conn_fail(c, PB_CONN_ERROR, (int)nread);
    else
      conn_close(c);
    return;
  }
  if (c->state != C_BUSY) { /* bytes nobody asked for: protocol error, drop the connection */
    conn_close(c);
    return;
  }
  c->got_bytes = true;
  const char *p = buf->base;
  size_t left = (size_t)nread;
  while (left > 0 && c->state == C_BUSY) {
    llhttp_errno_t e = llhttp_execute(&c->parser, p, left);
    if (e == HPE_PAUSED) {
      const char *stop = llhttp_get_error_pos(&c->parser);
      size_t used = stop ? (size_t)(stop - p) : left;
      p += used;
      left -= used;
      after_message(c);
      if (left > 0 && c->state != C_BUSY) { /* more bytes than one response: pipelining? */
        if (c->state != C_CLOSING && c->state != C_FREE) conn_close(c);
      }
      return;
    }
    if (e != HPE_OK) {
      conn_fail(c, PB_CONN_ERROR, PB_ERR_BAD_HTTP);
      return;
    }
    left = 0;
  }
}

static bool pending_pop(gen *g, uint32_t *i) {
  if (g->pending_len == 0) return false;
  *i = g->pending[g->pending_head];
  g->pending_head = (g->pending_head + 1) % g->sched->count;
  g->pending_len--;
  return true;
}

static void pending_push(gen *g, uint32_t i) {
  g->pending[(g->pending_head + g->pending_len) % g->sched->count] = i;
  g->pending_len++;
}

/* `c` is open and has nothing in flight: serve the oldest waiting arrival or park it. */
static void conn_became_idle(conn *c) {
  gen *g = c->g;
  uint32_t i;
  llhttp_init(&c->parser, HTTP_RESPONSE, &g->settings);
  c->parser.data = c;
  while (pending_pop(g, &i)) {
    if (now_rel(g) >= g->results[i].intended_ns + g->timeout_ns) {
      finish_request(g, i, PB_TIMEOUT, 0, 0);
      continue;
    }
    conn_send(c, i);
    return;
  }
  c->state = C_IDLE;
  g->idle[g->idle_len++] = (uint32_t)(c - g->conns);
  maybe_finish(g);
}

static void on_connect(uv_connect_t *req, int status) {
  conn *c = req->data;
  gen *g = c->g;
  if (c->state != C_CONNECTING) return; /* closed meanwhile */
  if (status < 0) {
    /* Charge the failure to the oldest waiting arrival so a dead server produces one error
     * per arrival instead of an endless reconnect loop. */
    uint32_t i;
    if (pending_pop(g, &i)) finish_request(g, i, PB_CONN_ERROR, 0, status);
    conn_close(c);
    maybe_finish(g);
    return;
  }
  g->connecting--;
  uv_tcp_nodelay(&c->tcp, 1);
  c->state = C_OPEN;
  if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) < 0) {
    conn_close(c);
    return;
  }
  conn_became_idle(c);
}

static bool conn_open(gen *g) {
  if (g->free_head < 0) return false;
  conn *c = &g->conns[g->free_head];
  if ((uint32_t)g->free_head + 1 > g->conn_high) g->conn_high = (uint32_t)g->free_head + 1;
  g->free_head = c->next_free;
  memset(c, 0, sizeof *c);
  c->g = g;
  c->id = ++g->conn_serial;
  c->req = -1;
  c->next_free = -1;
  uv_tcp_init(&g->loop, &c->tcp);
  c->tcp.data = c;
  c->connect_req.data = c;
  c->state = C_CONNECTING;
  g->open_conns++;
  g->connecting++;
  int rc = uv_tcp_connect(&c->connect_req, &c->tcp, (const struct sockaddr *)&g->addr, on_connect);
  if (rc < 0) {
    uint32_t i;
    if (pending_pop(g, &i)) finish_request(g, i, PB_CONN_ERROR, 0, rc);
    conn_close(c);
    return false;
  }
  return true;
}

/* ---- pacing ---- */

static void dispatch(gen *g, uint32_t i) {
  g->results[i].dispatched_ns = now_rel(g);
  if (g->idle_len > 0) {
    conn *c = &g->conns[g->idle[--g->idle_len]];
    conn_send(c, i);
    return;
  }
  pending_push(g, i);
  maybe_open(g);
}

/* Opens connections while more arrivals wait than connections are being opened for them. */
static void maybe_open(gen *g) {
  while (g->pending_len > g->connecting && g->open_conns < g->max_conns && g->free_head >= 0) {
    if (!conn_open(g)) break; /* failed at once; its close callback will try again */
  }
}

static void arm_pacer(gen *g) {
  struct itimerspec its = {0};
  uint64_t at = g->t0 + g->sched->arrivals[g->next_arrival].intended_ns;
  its.it_value.tv_sec = (time_t)(at / 1000000000u);
  its.it_value.tv_nsec = (long)(at % 1000000000u);
  if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0) its.it_value.tv_nsec = 1;
  timerfd_settime(g->timerfd, TFD_TIMER_ABSTIME, &its, NULL);
}

static void on_pacer(uv_poll_t *h, int status, int events) {
  (void)status;
  (void)events;
  gen *g = h->data;
  uint64_t expirations;
  ssize_t n = read(g->timerfd, &expirations, sizeof expirations);
  (void)n;
  uint64_t now = now_rel(g);
  while (g->next_arrival < g->sched->count &&
         g->sched->arrivals[g->next_arrival].intended_ns <= now) {
    dispatch(g, (uint32_t)g->next_arrival++);
    now = now_rel(g);
  }
  if (g->next_arrival < g->sched->count) {
    arm_pacer(g);
  } else if (g->pacer_active) {
    g->pacer_active = false;
    uv_poll_stop(&g->pacer);
  }
}

/* ---- timeouts, progress, shutdown ---- */

static void on_sweep(uv_timer_t *t) {
  gen *g = t->data;
  uint64_t now = now_rel(g);
  /* Waiting arrivals are in intended order: only the head can be the oldest. */
  while (g->pending_len > 0) {
    uint32_t i = g->pending[g->pending_head];
    if (now < g->results[i].intended_ns + g->timeout_ns) break;
    pending_pop(g, &i);
    finish_request(g, i, PB_TIMEOUT, 0, 0);
  }
  for (uint32_t k = 0; k < g->conn_high; k++) {
    conn *c = &g->conns[k];
    if (c->state == C_BUSY && c->req >= 0 &&
        now >= g->results[c->req].intended_ns + g->timeout_ns) {
      conn_fail(c, PB_TIMEOUT, 0);
    }
  }
  maybe_finish(g);
}

static void on_progress(uv_timer_t *t) {
  gen *g = t->data;
  if (!g->cfg->progress) return;
  pb_progress p = {
      .elapsed_ns = now_rel(g),
      .offered = g->next_arrival,
      .completed = g->completed,
      .completed_last_second = g->completed - g->completed_at_last_tick,
      .in_flight = g->in_flight,
      .waiting = g->pending_len,
      .open_conns = g->open_conns,
  };
  g->completed_at_last_tick = g->completed;
  g->cfg->progress(&p, g->cfg->data);
}

static void close_all(gen *g) {
  for (uint32_t k = 0; k < g->conn_high; k++) {
    conn *c = &g->conns[k];
    if (c->state != C_FREE && c->state != C_CLOSING) conn_close(c);
  }
}

static void maybe_finish(gen *g) {
  if (g->stopping || g->completed < g->sched->count) return;
  g->stopping = true;
  if (g->pacer_active) uv_poll_stop(&g->pacer);
  uv_timer_stop(&g->sweeper);
  uv_timer_stop(&g->progress);
  close_all(g);
}

/* 4096, or less when the open-file limit would not allow it (keep 64 descriptors spare). */
static uint32_t default_max_conns(void) {
  struct rlimit rl;
  uint32_t cap = 4096;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < cap + 64)
    cap = rl.rlim_cur > 128 ? (uint32_t)rl.rlim_cur - 64 : 64;
  return cap;
}

static int resolve(gen *g, const char *host, int port) {
  if (strchr(host, ':')) return uv_ip6_addr(host, port, (struct sockaddr_in6 *)&g->addr);
  return uv_ip4_addr(host, port, (struct sockaddr_in *)&g->addr);
}

int pb_gen_run(const pb_gen_config *cfg, const pb_schedule *sched, pb_result *results,
               uint64_t *t0_out, char *err, size_t errlen) {
  char dummy[8];
  if (!err) {
    err = dummy;
    errlen = sizeof dummy;
  }
  if (!cfg || !sched || !results || !cfg->host || cfg->port <= 0 || cfg->port > 65535) {
    snprintf(err, errlen, "invalid generator configuration");
    return PB_EINVAL;
  }
  for (size_t i = 0; i < sched->count; i++) {
    if (sched->arrivals[i].kind >= sched->path_count ||
        (i > 0 && sched->arrivals[i].intended_ns < sched->arrivals[i - 1].intended_ns)) {
      snprintf(err, errlen, "arrival %zu: kind out of range or times not sorted", i);
      return PB_EINVAL;
    }
  }
  memset(results, 0, sched->count * sizeof *results);
  for (size_t i = 0; i < sched->count; i++) {
    results[i].intended_ns = sched->arrivals[i].intended_ns;
    results[i].kind = sched->arrivals[i].kind;
  }
  if (sched->count == 0) {
    if (t0_out) *t0_out = uv_hrtime();
    return 0;
  }

  gen *g = calloc(1, sizeof *g);
  if (!g) return PB_ENOMEM;
  int rc = 0;
  g->cfg = cfg;
  g->sched = sched;
  g->results = results;
  g->timeout_ns = cfg->timeout_ns ? cfg->timeout_ns : 20000000000ull;
  g->max_conns = cfg->max_connections ? cfg->max_connections : default_max_conns();
  g->timerfd = -1;
  g->pending = calloc(sched->count, sizeof *g->pending);
  g->conns = calloc(g->max_conns, sizeof *g->conns);
  g->idle = calloc(g->max_conns, sizeof *g->idle);
  g->requests = calloc(sched->path_count, sizeof *g->requests);
  g->request_lens = calloc(sched->path_count, sizeof *g->request_lens);
  if (!g->pending || !g->conns || !g->idle || !g->requests || !g->request_lens) {
    rc = PB_ENOMEM;
    goto out;
  }
  if (resolve(g, cfg->host, cfg->port) < 0) {
    snprintf(err, errlen, "cannot parse address %s (numeric IP expected)", cfg->host);
    rc = PB_EINVAL;
    goto out;
  }
  for (size_t k = 0; k < sched->path_count; k++) {
    int n =
        asprintf(&g->requests[k], "GET %s HTTP/1.1\r\nHost: %s:%d\r\nUser-Agent: pp-bench\r\n\r\n",
                 sched->paths[k], strchr(cfg->host, ':') ? "localhost" : cfg->host, cfg->port);
    if (n < 0) {
      g->requests[k] = NULL;
      rc = PB_ENOMEM;
      goto out;
    }
    g->request_lens[k] = (size_t)n;
  }
  g->free_head = -1;
  for (int32_t k = (int32_t)g->max_conns - 1; k >= 0; k--) {
    g->conns[k].next_free = g->free_head;
    g->free_head = k;
  }
  llhttp_settings_init(&g->settings);
  g->settings.on_message_complete = on_message_complete;

  g->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (g->timerfd < 0) {
    snprintf(err, errlen, "timerfd_create: %s", strerror(errno));
    rc = PB_ESYS;
    goto out;
  }
  uv_loop_init(&g->loop);
  uv_poll_init(&g->loop, &g->pacer, g->timerfd);
  g->pacer.data = g;
  uv_timer_init(&g->loop, &g->sweeper);
  g->sweeper.data = g;
  uv_timer_init(&g->loop, &g->progress);
  g->progress.data = g;

  g->t0 = uv_hrtime() + (cfg->start_delay_ns ? cfg->start_delay_ns : 20000000ull);
  if (cfg->t0_ns) g->t0 = cfg->t0_ns;
  if (t0_out) *t0_out = g->t0;
  g->pacer_active = true;
  uv_poll_start(&g->pacer, UV_READABLE, on_pacer);
  arm_pacer(g);
  uv_timer_start(&g->sweeper, on_sweep, 10, 10);
  uv_timer_start(&g->progress, on_progress, 1000, 1000);
  uv_run(&g->loop, UV_RUN_DEFAULT);

  uv_close((uv_handle_t *)&g->pacer, NULL);
  uv_close((uv_handle_t *)&g->sweeper, NULL);
  uv_close((uv_handle_t *)&g->progress, NULL);
  uv_run(&g->loop, UV_RUN_DEFAULT);
  uv_loop_close(&g->loop);

out:
  if (g->timerfd >= 0) close(g->timerfd);
  if (g->requests)
    for (size_t k = 0; k < sched->path_count; k++)
      free(g->requests[k]);
  free(g->requests);
  free(g->request_lens);
  free(g->pending);
  free(g->conns);
  free(g->idle);
  free(g);
  return rc;
}
