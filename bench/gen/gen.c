/* The open-loop generator's core: pacing, the connection pool, the waiting FIFO, timeouts and
 * outcomes, and pb_gen_run (see gen.h for the contract). Single-threaded; everything runs on one
 * private uv loop.
 *
 * The wire protocols are not here: each is a generator behind gen_proto_ops (gen_int.h) that
 * this file drives without naming its functions: the h1/h2 generator over TCP and TLS
 * (gen_tcp.c, with the h2 session in gen_h2.c) and the h3 generator over QUIC (gen_h3.c). The
 * core hands an arrival to the protocol when it is due (dispatch), parks it in intended order
 * when no connection can take it, opens connections for waiting arrivals (open), closes them
 * (close), and every 10 ms times out waiting arrivals, lets the protocol check its own deadlines
 * (sweep_conn) and, for the multiplexed protocols (h2, h3), times out and cancels streams
 * (cancel_stream) and refills connections (fill). */
#include "bench/gen/gen.h"
#include "bench/gen/gen_int.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <uv.h>

const char *pb_error_name(int err) {
  switch (err) {
  case 0: return "";
  case PB_ERR_BAD_HTTP: return "bad_http";
  case PB_ERR_TLS: return "tls";
  case PB_ERR_ALPN: return "alpn";
  case PB_ERR_H2_NO_SETTINGS: return "h2_no_settings";
  case PB_ERR_H2_PROTOCOL: return "h2_protocol";
  case PB_ERR_H2_GOAWAY: return "h2_goaway";
  case PB_ERR_H2_RESET: return "h2_reset";
  case PB_ERR_QUIC: return "quic";
  case PB_ERR_H3_PROTOCOL: return "h3_protocol";
  case PB_ERR_H3_RESET: return "h3_reset";
  case PB_ERR_H3_GOAWAY: return "h3_goaway";
  default: return uv_err_name(err);
  }
}

const char *pb_proto_label(pb_proto proto, int tls) {
  if (proto == PB_PROTO_H3) return "h3";
  if (proto == PB_PROTO_H2) return tls ? "h2+tls" : "h2";
  return tls ? "h1+tls" : "h1";
}

const char *pb_outcome_name(pb_outcome o) {
  switch (o) {
  case PB_PENDING: return "pending";
  case PB_OK: return "ok";
  case PB_SHED: return "shed";
  case PB_HTTP_ERROR: return "http_error";
  case PB_TIMEOUT: return "timeout";
  case PB_CONN_ERROR: return "conn_error";
  case PB_CANCELLED: return "cancelled";
  default: return "?";
  }
}

uint64_t gen_now_rel(gen *g) {
  uint64_t n = uv_hrtime();
  return n > g->t0 ? n - g->t0 : 0;
}

static void maybe_open(gen *g);

void gen_finish_request(gen *g, uint32_t i, pb_outcome o, uint16_t status, int err) {
  pb_result *r = &g->results[i];
  if (r->outcome != PB_PENDING) return;
  r->outcome = (uint8_t)o;
  r->error = (int16_t)err;
  r->status = status;
  r->done_ns = gen_now_rel(g);
  g->completed++;
}

pb_outcome gen_outcome_of_status(unsigned status) {
  if (status >= 200 && status <= 299) return PB_OK;
  if (status == 503) return PB_SHED;
  return PB_HTTP_ERROR;
}

/* Keeps the first connection-level failure, in words, for the caller. */
void gen_note_error(gen *g, const char *fmt, const char *a, const char *b) {
  if (!g->counters || g->counters->first_error[0]) return;
  snprintf(g->counters->first_error, sizeof g->counters->first_error, fmt, a ? a : "", b ? b : "");
}

/* ---- connections ---- */

void gen_conn_release(conn *c) {
  gen *g = c->g;
  free(c->out.p);
  free(c->wbuf.p);
  free(c->streams);
  c->out = c->wbuf = (bytes){0};
  c->streams = NULL;
  c->state = C_FREE;
  c->next_free = g->free_head;
  g->free_head = (int32_t)(c - g->conns);
  g->open_conns--;
  /* A connection that died (timeout, reset, server close) is replaced while arrivals wait. */
  if (!g->stopping) maybe_open(g);
  gen_maybe_finish(g);
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

void gen_conn_close(conn *c) {
  gen *g = c->g;
  if (c->state == C_CLOSING || c->state == C_FREE) return;
  if (c->state == C_IDLE) idle_remove(g, c);
  if (c->state == C_CONNECTING) g->connecting--;
  if (c->state == C_BUSY) g->in_flight--;
  /* h2, h3: every stream still in flight fails with the connection. */
  int cause = c->close_cause ? c->close_cause : (c->goaway ? PB_ERR_H2_GOAWAY : UV_EOF);
  for (uint32_t k = 0; k < c->n_streams; k++) {
    uint32_t i = c->streams[k];
    g->req_slot[i] = UINT32_MAX;
    g->in_flight--;
    gen_finish_request(g, i, PB_CONN_ERROR, 0, cause);
  }
  c->n_streams = 0;
  c->state = C_CLOSING;
  g->ops->close(c); /* the protocol tears down, then releases the slot (gen_conn_release) */
}

/* A connection failed before it could carry a request (connect refused, TLS, ALPN, no h2
 * SETTINGS): nothing is in flight on it, so the failure is charged to the oldest waiting
 * arrival. A dead or wrong server thus produces one error per arrival instead of an endless
 * reconnect loop. */
void gen_conn_fail_setup(conn *c, int err) {
  gen *g = c->g;
  uint32_t i;
  if (gen_pending_pop(g, &i)) gen_finish_request(g, i, PB_CONN_ERROR, 0, err);
  c->close_cause = err;
  gen_conn_close(c);
  gen_maybe_finish(g);
}

void gen_stream_remove(conn *c, uint32_t i) {
  for (uint32_t k = 0; k < c->n_streams; k++) {
    if (c->streams[k] == i) {
      c->streams[k] = c->streams[--c->n_streams];
      return;
    }
  }
}

bool gen_pending_pop(gen *g, uint32_t *i) {
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

/* Takes a free slot and has the protocol start connecting it; false if it failed at once. */
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
  c->state = C_CONNECTING;
  g->open_conns++;
  g->connecting++;
  if (g->counters) {
    g->counters->connections_opened++;
    if (g->open_conns > g->counters->connections_peak)
      g->counters->connections_peak = g->open_conns;
  }
  return g->ops->open(c);
}

/* ---- pacing ---- */

static void dispatch(gen *g, uint32_t i) {
  g->results[i].dispatched_ns = gen_now_rel(g);
  if (g->ops->dispatch(g, i)) return;
  pending_push(g, i);
  maybe_open(g);
}

/* Opens connections while more arrivals wait than connections are being opened for them. For
 * h2 and h3 the pool is the cap, all opened at the start, so this replaces a lost connection
 * when arrivals wait, one connection attempt per waiting arrival at most. */
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
  uint64_t now = gen_now_rel(g);
  while (g->next_arrival < g->sched->count &&
         g->sched->arrivals[g->next_arrival].intended_ns <= now) {
    dispatch(g, (uint32_t)g->next_arrival++);
    now = gen_now_rel(g);
  }
  if (g->next_arrival < g->sched->count) {
    arm_pacer(g);
  } else if (g->pacer_active) {
    g->pacer_active = false;
    uv_poll_stop(&g->pacer);
  }
}

/* ---- timeouts, progress, shutdown ---- */

/* h2 and h3 streams past the client timeout are cancelled (the protocol resets them) and
 * counted as timeouts; the connection stays. Streams are opened in intended order, so a cursor over
 * the results that skips finished ones finds every overdue stream without scanning all of them. */
static void mux_sweep(gen *g, uint64_t now) {
  while (g->sweep_cursor < g->next_arrival) {
    uint32_t i = (uint32_t)g->sweep_cursor;
    pb_result *r = &g->results[i];
    if (r->outcome != PB_PENDING) {
      g->sweep_cursor++;
      continue;
    }
    if (now < r->intended_ns + g->timeout_ns) break;
    uint32_t slot = g->req_slot[i];
    if (slot != UINT32_MAX) {
      conn *c = &g->conns[slot];
      gen_stream_remove(c, i);
      g->req_slot[i] = UINT32_MAX;
      g->in_flight--;
      g->ops->cancel_stream(c, g->req_stream[i]);
    }
    g->results[i].status = 0;
    gen_finish_request(g, i, PB_TIMEOUT, 0, 0);
    g->sweep_cursor++;
  }
  for (uint32_t k = 0; k < g->conn_high; k++) {
    conn *c = &g->conns[k];
    if (c->state != C_OPEN) continue;
    /* Clients that leave: their streams are reset, the connection stays. */
    for (uint32_t s = 0; g->any_cancel && s < c->n_streams;) {
      uint32_t i = c->streams[s];
      uint64_t after = g->kinds[g->results[i].kind].cancel_after_ns;
      if (!after || now < g->results[i].sent_ns + after) {
        s++;
        continue;
      }
      c->streams[s] = c->streams[--c->n_streams];
      g->req_slot[i] = UINT32_MAX;
      g->in_flight--;
      g->ops->cancel_stream(c, g->req_stream[i]);
      g->results[i].status = 0;
      gen_finish_request(g, i, PB_CANCELLED, 0, 0);
    }
    g->ops->fill(c);
  }
}

static void on_sweep(uv_timer_t *t) {
  gen *g = t->data;
  uint64_t now = gen_now_rel(g);
  /* Waiting arrivals are in intended order: only the head can be the oldest. */
  while (g->pending_len > 0) {
    uint32_t i = g->pending[g->pending_head];
    if (now < g->results[i].intended_ns + g->timeout_ns) break;
    gen_pending_pop(g, &i);
    gen_finish_request(g, i, PB_TIMEOUT, 0, 0);
  }
  /* The protocol's own deadlines: connection setup, and for h1 the request on each connection. */
  for (uint32_t k = 0; k < g->conn_high; k++)
    g->ops->sweep_conn(&g->conns[k], now);
  if (g->mux) mux_sweep(g, now);
  gen_maybe_finish(g);
}

static void on_progress(uv_timer_t *t) {
  gen *g = t->data;
  if (!g->cfg->progress) return;
  pb_progress p = {
      .elapsed_ns = gen_now_rel(g),
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
    if (c->state != C_FREE && c->state != C_CLOSING) gen_conn_close(c);
  }
}

void gen_maybe_finish(gen *g) {
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

/* The arguments of pb_gen_run: 0, or PB_EINVAL with a message. */
static int check_input(const pb_gen_config *cfg, const pb_schedule *sched, const pb_result *results,
                       char *err, size_t errlen) {
  if (!cfg || !sched || !results || !cfg->host || cfg->port <= 0 || cfg->port > 65535) {
    snprintf(err, errlen, "invalid generator configuration");
    return PB_EINVAL;
  }
  for (size_t k = 0; cfg->kinds && k < sched->path_count; k++) {
    if (cfg->kinds[k].body_bytes > PB_BODY_MAX) {
      snprintf(err, errlen, "kind %zu: a body of %u bytes is over the %u limit", k,
               cfg->kinds[k].body_bytes, PB_BODY_MAX);
      return PB_EINVAL;
    }
  }
  for (size_t i = 0; i < sched->count; i++) {
    if (sched->arrivals[i].kind >= sched->path_count ||
        (i > 0 && sched->arrivals[i].intended_ns < sched->arrivals[i - 1].intended_ns)) {
      snprintf(err, errlen, "arrival %zu: kind out of range or times not sorted", i);
      return PB_EINVAL;
    }
  }
  return 0;
}

/* Everything of a run but the loop: the pool, per-request state, the protocol generator's own
 * set-up, the target's address. 0 or a PB_E* code; teardown() frees whatever was made. */
static int setup(gen *g, const pb_gen_config *cfg, const pb_schedule *sched, pb_result *results,
                 char *err, size_t errlen) {
  g->cfg = cfg;
  g->sched = sched;
  g->results = results;
  g->timeout_ns = cfg->timeout_ns ? cfg->timeout_ns : 20000000000ull;
  g->max_conns = cfg->max_connections ? cfg->max_connections : default_max_conns();
  if (cfg->proto == PB_PROTO_H2 || cfg->proto == PB_PROTO_H3)
    g->max_conns = cfg->h2_connections ? cfg->h2_connections : 4;
  g->timerfd = -1;
  g->pending = calloc(sched->count, sizeof *g->pending);
  g->conns = calloc(g->max_conns, sizeof *g->conns);
  g->idle = calloc(g->max_conns, sizeof *g->idle);
  g->counters = cfg->counters;
  if (g->counters) memset(g->counters, 0, sizeof *g->counters);
  g->h2 = cfg->proto == PB_PROTO_H2;
  g->mux = cfg->proto == PB_PROTO_H2 || cfg->proto == PB_PROTO_H3;
  g->ops = cfg->proto == PB_PROTO_H3 ? &gen_quic_ops : &gen_tcp_ops;
  g->session = g->h2 ? &gen_h2_session_ops : NULL;
  g->kinds = cfg->kinds;
  bool any_body = false;
  for (size_t k = 0; g->kinds && k < sched->path_count; k++) {
    if (g->kinds[k].cancel_after_ns) g->any_cancel = true;
    if (g->kinds[k].body_bytes) any_body = true;
  }
  if (any_body) {
    g->body = malloc(BODY_PIECE);
    g->req_body_off = g->mux ? calloc(sched->count, sizeof *g->req_body_off) : NULL;
    if (!g->body || (g->mux && !g->req_body_off)) {
      return PB_ENOMEM;
    }
    for (uint32_t k = 0; k < BODY_PIECE; k++) /* printable, so a server log of it reads */
      g->body[k] = (char)('a' + k % 26);
  }
  if (g->mux) {
    g->req_slot = malloc(sched->count * sizeof *g->req_slot);
    g->req_stream = calloc(sched->count, sizeof *g->req_stream);
    if (!g->req_slot || !g->req_stream) {
      return PB_ENOMEM;
    }
    memset(g->req_slot, 0xff, sched->count * sizeof *g->req_slot);
  }
  int rc = g->ops->init(g, err, errlen);
  if (rc < 0) return rc;
  if (!g->pending || !g->conns || !g->idle) {
    return PB_ENOMEM;
  }
  if (resolve(g, cfg->host, cfg->port) < 0) {
    snprintf(err, errlen, "cannot parse address %s (numeric IP expected)", cfg->host);
    return PB_EINVAL;
  }
  if (strchr(cfg->host, ':'))
    snprintf(g->authority, sizeof g->authority, "[%s]:%d", cfg->host, cfg->port);
  else
    snprintf(g->authority, sizeof g->authority, "%s:%d", cfg->host, cfg->port);
  g->free_head = -1;
  for (int32_t k = (int32_t)g->max_conns - 1; k >= 0; k--) {
    g->conns[k].next_free = g->free_head;
    g->free_head = k;
  }
  return 0;
}

/* The pacer, the sweep and progress timers, the loop until every arrival has an outcome. */
static int run_loop(gen *g, const pb_gen_config *cfg, uint64_t *t0_out, char *err, size_t errlen) {
  g->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (g->timerfd < 0) {
    snprintf(err, errlen, "timerfd_create: %s", strerror(errno));
    return PB_ESYS;
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
  /* h2, h3: the whole pool is opened before the first arrival. */
  if (g->mux)
    for (uint32_t k = 0; k < g->max_conns; k++)
      conn_open(g);
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
  return 0;
}

static void teardown(gen *g) {
  if (g->timerfd >= 0) close(g->timerfd);
  free(g->pending);
  free(g->conns);
  free(g->idle);
  free(g->req_slot);
  free(g->req_stream);
  free(g->req_body_off);
  free(g->body);
  g->ops->dispose(g);
  free(g);
}

int pb_gen_run(const pb_gen_config *cfg, const pb_schedule *sched, pb_result *results,
               uint64_t *t0_out, char *err, size_t errlen) {
  char dummy[8];
  if (!err) {
    err = dummy;
    errlen = sizeof dummy;
  }
  int rc = check_input(cfg, sched, results, err, errlen);
  if (rc < 0) return rc;
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
  rc = setup(g, cfg, sched, results, err, errlen);
  if (rc == 0) rc = run_loop(g, cfg, t0_out, err, errlen);
  teardown(g);
  return rc;
}
