/* The puma-plus-server event loop (libuv): listeners, HTTP/1.1 clients, the one queue,
 * worker connections speaking the wire protocol, the shepherd, signals and drain.
 *
 * Workload: many keep-alive clients each sending small requests, a handful of worker
 * connections (workers x threads). The request path parse -> queue -> dispatch -> respond
 * uses pooled request structs, client structs and write chunks whose buffers are kept across
 * uses, so in steady state it does not call malloc. One request per client connection is in
 * flight at a time; pipelined bytes wait unparsed in the client's read buffer, so responses
 * go out in order. Timestamps: T1 first byte, T2 headers parsed, T2b runnable, T3 dispatched,
 * T6 response flushed; queue time is T3 - T2b and nothing else. */
#include "server/server.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "server/server_int.h"

static void logf_(server *s, int always, const char *fmt, ...) {
  if (s && s->cfg->quiet && !always) return;
  char ts[32];
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
  fprintf(stderr, "[puma-plus %s] ", ts);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}
#define LOG(s, ...)     logf_(s, 0, __VA_ARGS__)
#define LOG_ERR(s, ...) logf_(s, 1, __VA_ARGS__)

static void *xmalloc(size_t n) {
  void *p = malloc(n);
  if (!p) {
    fprintf(stderr, "puma-plus: out of memory\n");
    abort();
  }
  return p;
}

static void dispatch_all(server *s);
static void client_process(client *c);
static void client_close(client *c);
static void client_arm_timer(client *c);
static void wconn_close(wconn *w, const char *reason);
static void drain_check(server *s);
static void finish_exit(server *s, int code);
static void retire_if_drained(server *s, pp_worker *w);
void pp__on_worker_write(uv_write_t *wr, int status);
void pp__wconn_resume(wconn *w);
void pp__on_client_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf);

/* Writes bufs at once when the kernel takes them all (returns 0: no callback will fire, no
 * epoll change), else queues what is left with uv_write (returns 1: cb fires later).
 * uv_try_write refuses while earlier writes are queued, so order is kept. <0 on error. */
static int write_or_queue(uv_stream_t *st, uv_write_t *req, uv_buf_t *bufs, unsigned n,
                          uv_write_cb cb) {
  int w = uv_try_write(st, bufs, n);
  if (w < 0 && w != UV_EAGAIN) return w;
  size_t done = w > 0 ? (size_t)w : 0;
  unsigned i = 0;
  while (i < n && done >= bufs[i].len)
    done -= bufs[i].len, i++;
  if (i == n) return 0;
  bufs[i].base += done;
  bufs[i].len -= done;
  int rc = uv_write(req, st, bufs + i, n - i, cb);
  return rc < 0 ? rc : 1;
}

/* ---------------------------------------------------------------- pools */

static wchunk *chunk_get(server *s, size_t need) {
  wchunk *k;
  if (need <= PP_CHUNK_CAP && s->free_chunks) {
    k = s->free_chunks;
    s->free_chunks = k->next_free;
  } else {
    size_t cap = need > PP_CHUNK_CAP ? need : PP_CHUNK_CAP;
    k = xmalloc(sizeof *k + cap);
    k->cap = cap;
    k->data = (uint8_t *)(k + 1);
  }
  k->srv = s;
  k->len = 0;
  k->owner = NULL;
  return k;
}

static void chunk_put(server *s, wchunk *k) {
  if (k->cap != PP_CHUNK_CAP) {
    free(k);
    return;
  }
  k->next_free = s->free_chunks;
  s->free_chunks = k;
}

static request *request_get(server *s) {
  request *r = s->free_requests;
  if (r) {
    s->free_requests = r->next_free;
  } else {
    r = xmalloc(sizeof *r);
    memset(r, 0, sizeof *r);
    pp_buf_init(&r->head);
    pp_buf_init(&r->body);
  }
  pp_buf head = r->head, body = r->body;
  memset(r, 0, sizeof *r);
  r->head = head;
  r->body = body;
  r->head.len = 0;
  r->body.len = 0;
  s->live_requests++;
  return r;
}

/* Returns r to the pool once no write references its buffers. */
static void request_release(server *s, request *r) {
  if (r->writes > 0) {
    r->release_pending = 1;
    return;
  }
  /* A buffer that grew for one huge request does not stay huge. */
  if (r->body.cap > 2 * PP_BODY_BUFFER_LIMIT) pp_buf_dispose(&r->body);
  if (r->head.cap > 262144) pp_buf_dispose(&r->head);
  r->next_free = s->free_requests;
  s->free_requests = r;
  s->live_requests--;
  if (s->draining) drain_check(s);
}

/* ---------------------------------------------------------------- client output */

static void on_client_write(uv_write_t *wr, int status);

static void client_flush(client *c) {
  wchunk *k = c->out;
  if (!k) return;
  c->out = NULL;
  if (k->len == 0 || c->closing) {
    chunk_put(c->srv, k);
    return;
  }
  k->owner = c;
  k->to_client = 1;
  uv_buf_t b = uv_buf_init((char *)k->data, (unsigned)k->len);
  int rc = write_or_queue(&c->h.stream, &k->wr, &b, 1, on_client_write);
  if (rc <= 0) {
    chunk_put(c->srv, k);
    if (rc < 0)
      client_close(c);
    else
      c->last_progress = pp_now_ns();
    return;
  }
  c->writes_in_flight++;
  c->write_bytes += b.len;
  k->len = b.len; /* what is still queued (write_bytes is decremented by it) */
  /* The first pending write starts the write timeout; each completion restarts it. */
  if (c->writes_in_flight == 1) client_arm_timer(c);
}

static void client_out(client *c, const void *data, size_t len) {
  const uint8_t *p = data;
  while (len) {
    if (c->out && c->out->len == c->out->cap) client_flush(c);
    if (!c->out) c->out = chunk_get(c->srv, len > PP_CHUNK_CAP ? len : 0);
    size_t n = c->out->cap - c->out->len;
    if (n > len) n = len;
    memcpy(c->out->data + c->out->len, p, n);
    c->out->len += n;
    p += n;
    len -= n;
  }
}

static void client_outf(client *c, const char *fmt, ...) {
  char tmp[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n > 0) client_out(c, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

static void count_status(server *s, int status) {
  if (status < 200)
    s->stats.status_1xx++;
  else if (status < 300)
    s->stats.status_2xx++;
  else if (status < 400)
    s->stats.status_3xx++;
  else if (status < 500)
    s->stats.status_4xx++;
  else
    s->stats.status_5xx++;
}

/* A complete small response generated by the server (errors, control app). */
static void client_simple_response(client *c, int status, const char *ctype, const char *extra,
                                   const void *body, size_t len, int close) {
  client_outf(c, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s%s\r\n", status,
              pp_h1_reason_phrase(status), ctype, len, extra ? extra : "",
              close ? "Connection: close\r\n" : "");
  if (len && !(c->req && c->req->head_method)) client_out(c, body, len);
  count_status(c->srv, status);
}

/* ---------------------------------------------------------------- client lifecycle */

static void on_client_closed(uv_handle_t *h) {
  client *c = h->data;
  server *s = c->srv;
  pp_h1_dispose(&c->h1); /* here, never while a parser callback may still run */
  if (c->out) chunk_put(s, c->out), c->out = NULL;
  c->next_free = s->free_clients;
  s->free_clients = c;
  if (s->draining) drain_check(s);
}

static void on_timer_closed(uv_handle_t *h) {
  client *c = h->data;
  uv_close(&c->h.handle, on_client_closed);
}

/* The client is gone or being dropped: its request leaves the queue (counted), or the
 * worker running it gets CANCEL. */
static void client_drop_request(client *c) {
  request *r = c->req;
  server *s = c->srv;
  if (!r) return;
  c->req = NULL;
  r->c = NULL;
  switch (r->state) {
  case RS_QUEUED:
    pp_queue_remove(&s->queue, &r->qlink);
    s->stats.cancelled_queued++;
    s->stats.timeouts_window++;
    request_release(s, r);
    break;
  case RS_RUNNING:
    if (r->w) pp__wconn_resume(r->w); /* nobody reads this response any more */
    if (!r->cancelled && r->w) {
      r->cancelled = 1;
      s->stats.cancelled_running++;
      s->stats.timeouts_window++;
      wchunk *k = chunk_get(s, 0);
      pp_wire_frame f;
      memset(&f, 0, sizeof f);
      f.type = PP_WIRE_CANCEL;
      f.request_id = r->id;
      k->len = (size_t)pp_wire_encode(&f, k->data, k->cap);
      k->owner = r->w;
      k->to_client = 0;
      uv_buf_t b = uv_buf_init((char *)k->data, (unsigned)k->len);
      if (write_or_queue((uv_stream_t *)&r->w->pipe, &k->wr, &b, 1, pp__on_worker_write) <= 0)
        chunk_put(s, k);
    }
    /* freed when RESPONSE_END arrives (or the worker connection closes) */
    break;
  default: request_release(s, r); break;
  }
}

static void client_close(client *c) {
  if (c->closing) return;
  c->closing = 1;
  client_drop_request(c);
  if (c->out) chunk_put(c->srv, c->out), c->out = NULL;
  pp_queue_remove(&c->srv->clients, &c->link);
  uv_read_stop(&c->h.stream);
  uv_timer_stop(&c->timer);
  uv_close((uv_handle_t *)&c->timer, on_timer_closed);
}

static void on_client_shutdown(uv_shutdown_t *req, int status) {
  client *c = req->data;
  (void)status;
  if (c->closing) return;
  /* Read and discard what the client still sends, briefly, so that closing does not reset
   * the connection before the client has read our response. */
  c->discarding = 1;
  client_arm_timer(c);
}

static void client_close_graceful(client *c) {
  if (c->closing || c->discarding) return;
  c->discarding = 1;
  c->shutdown_req.data = c;
  if (uv_shutdown(&c->shutdown_req, &c->h.stream, on_client_shutdown) < 0) client_close(c);
  client_arm_timer(c);
}

/* The response of c->req has been fully flushed (T6). */
static void client_response_complete(client *c) {
  server *s = c->srv;
  request *r = c->req;
  c->response_done = 0;
  if (r) {
    int64_t t6 = pp_now_ns();
    if (r->t1) pp_hist_window_record(&s->stats.total, (uint64_t)(t6 - r->t1));
    int keep = r->keep_alive && !r->resp_close;
    /* The app answered before the request's body had all arrived (a streamed upload it did
     * not read): the parser is still inside that body. It goes on reading and discarding the
     * rest (on_h1_body without a request), and the connection is reused when it ends. */
    if (!r->msg_complete && keep && !s->draining) c->discard_body = 1;
    c->req = NULL;
    r->c = NULL;
    request_release(s, r);
    if (!keep || s->draining) c->close_after_write = 1;
  }
  if (c->close_after_write) {
    client_close_graceful(c);
    return;
  }
  if (c->parser_paused) {
    c->parser_paused = 0;
    pp_h1_resume(&c->h1);
  }
  c->t1 = c->rpos < c->rlen && !c->discard_body ? pp_now_ns() : 0;
  client_process(c);
}

static void on_client_write(uv_write_t *wr, int status) {
  wchunk *k = (wchunk *)wr;
  client *c = k->owner;
  server *s = k->srv;
  c->writes_in_flight--;
  c->write_bytes -= k->len;
  chunk_put(s, k);
  if (c->closing) return;
  if (status < 0) {
    client_close(c);
    return;
  }
  c->last_progress = pp_now_ns();
  /* Backpressure: the worker feeding this client may read again. */
  request *r = c->req;
  if (r && r->w && r->w->paused && c->write_bytes < PP_CLIENT_WRITE_LOW) {
    pp__wconn_resume(r->w);
  }
  if (c->writes_in_flight == 0) {
    if (c->response_done) {
      client_response_complete(c);
      return;
    }
    if (c->close_after_write && !c->req) {
      client_close_graceful(c);
      return;
    }
  }
  client_arm_timer(c);
}

/* Refuses the current request with status and closes the connection after the response. */
static void client_fail(client *c, int status, const char *reason) {
  server *s = c->srv;
  request *r = c->req;
  if (r && (r->state == RS_RUNNING || r->head_sent)) {
    /* too late for a status line (a streamed body broke mid-way): drop the connection */
    LOG(s, "client %s: %s, connection dropped", c->remote, reason);
    client_close(c);
    return;
  }
  /* shed requests are counted, not logged one by one (there can be thousands a second) */
  if (status != 503) LOG(s, "client %s: %d %s", c->remote, status, reason ? reason : "");
  s->stats.refused++;
  client_drop_request(c);
  uv_read_stop(&c->h.stream);
  c->reading = 0;
  char body[256];
  int n = snprintf(body, sizeof body, "%d %s: %s\n", status, pp_h1_reason_phrase(status),
                   reason ? reason : "");
  const char *extra = status == 503 ? "Retry-After: 1\r\n" : NULL;
  client_simple_response(c, status, "text/plain", extra, body, (size_t)n, 1);
  c->close_after_write = 1;
  client_flush(c);
  if (c->writes_in_flight == 0 && !c->closing) client_close_graceful(c);
}

/* ---------------------------------------------------------------- timers */

static void on_client_timer(uv_timer_t *t) {
  client *c = t->data;
  server *s = c->srv;
  if (c->closing) return;
  if (c->discarding) {
    client_close(c);
    return;
  }
  if (c->writes_in_flight > 0) {
    LOG(s, "client %s: write timeout", c->remote);
    s->stats.timeouts++;
    client_close(c);
    return;
  }
  if (c->req && c->req->state == RS_BODY) {
    s->stats.timeouts++;
    client_fail(c, 408, "body read timeout");
    return;
  }
  if (c->req && c->req->streaming && !c->req->body_done) {
    s->stats.timeouts++;
    LOG(s, "client %s: body read timeout (streaming)", c->remote);
    client_close(c);
    return;
  }
  if (c->discard_body) { /* its response is out: no 408, just close */
    s->stats.timeouts++;
    LOG(s, "client %s: body read timeout (discarding an unread upload)", c->remote);
    client_close(c);
    return;
  }
  if (!c->req && (c->h1.started || c->rpos < c->rlen)) {
    s->stats.timeouts++;
    client_fail(c, 408, "header read timeout");
    return;
  }
  /* idle keep-alive (or a connection that never sent a byte) */
  client_close(c);
}

static void client_arm_timer(client *c) {
  if (c->closing) return;
  server *s = c->srv;
  pp_config *cfg = s->cfg;
  uint64_t ms = 0;
  int64_t now = pp_now_ns();
  if (c->discarding) {
    ms = 2000;
  } else if (c->writes_in_flight > 0) {
    ms = cfg->write_timeout_ns / 1000000;
  } else if (c->req) {
    request *r = c->req;
    if (r->state == RS_BODY || (r->streaming && !r->body_done && r->state == RS_RUNNING))
      ms = cfg->body_timeout_ns / 1000000;
    else {
      uv_timer_stop(&c->timer);
      return;
    }
  } else if (c->discard_body) {
    ms = cfg->body_timeout_ns / 1000000;
  } else if (c->h1.started || c->rpos < c->rlen) {
    int64_t deadline = c->t1 + (int64_t)cfg->header_timeout_ns;
    ms = deadline > now ? (uint64_t)(deadline - now) / 1000000 : 0;
  } else if (c->h1.messages > 0) {
    ms = cfg->keepalive_timeout_ns / 1000000;
  } else {
    ms = cfg->header_timeout_ns / 1000000;
  }
  uv_timer_start(&c->timer, on_client_timer, ms ? ms : 1, 0);
}

/* ---------------------------------------------------------------- requests */

static void send_request(server *s, request *r, wconn *w);

static void make_runnable(server *s, request *r) {
  r->t2b = pp_now_ns();
  r->state = RS_QUEUED;
  s->stats.arrivals++;
  s->stats.arrivals_window++;
  if (r->t2b > r->t2) pp_hist_window_record(&s->stats.body_wait, (uint64_t)(r->t2b - r->t2));
  pp_queue_push(&s->queue, &r->qlink);
  dispatch_all(s);
}

static void dispatch_all(server *s) {
  while (s->queue.len) {
    pp_slot *slot = pp_registry_take(&s->reg);
    if (!slot) return;
    request *r = PP_CONTAINER_OF(pp_queue_pop(&s->queue), request, qlink);
    send_request(s, r, slot->data);
  }
}

void pp__on_worker_write(uv_write_t *wr, int status) {
  wchunk *k = (wchunk *)wr;
  wconn *w = k->owner;
  chunk_put(k->srv, k);
  /* Backpressure on streamed uploads: the client paused while this worker's write queue was
   * over the limit may be read again. */
  if (status < 0 || !w || w->closing || !w->req) return;
  client *c = w->req->c;
  if (c && !c->closing && !c->in_parse && w->req->streaming && !w->req->body_done &&
      uv_stream_get_write_queue_size((uv_stream_t *)&w->pipe) <= PP_WORKER_WRITE_HIGH / 2)
    client_process(c);
}

static void on_request_written(uv_write_t *wr, int status) {
  request *r = PP_CONTAINER_OF(wr, request, wreq);
  (void)status;
  r->writes--;
  if (r->release_pending && r->writes == 0) {
    r->release_pending = 0;
    /* the server pointer is reachable through the worker only while linked; keep it */
    request_release(wr->data, r);
  }
}

/* Sends `len` body bytes as BODY frames (at most 64 KiB each). */
static void send_body_frames(server *s, request *r, const uint8_t *data, size_t len) {
  wconn *w = r->w;
  while (len) {
    size_t n = len > PP_WIRE_MAX_BODY_CHUNK ? PP_WIRE_MAX_BODY_CHUNK : len;
    wchunk *k = chunk_get(s, n + 16);
    pp_wire_put_header(k->data, PP_WIRE_BODY, (uint32_t)(8 + n));
    pp_wire_put_u64(k->data + 8, r->id);
    memcpy(k->data + 16, data, n);
    k->len = 16 + n;
    k->owner = w;
    k->to_client = 0;
    uv_buf_t b = uv_buf_init((char *)k->data, (unsigned)k->len);
    int rc = write_or_queue((uv_stream_t *)&w->pipe, &k->wr, &b, 1, pp__on_worker_write);
    if (rc <= 0) chunk_put(s, k);
    if (rc < 0) return;
    data += n;
    len -= n;
  }
}

static void send_body_end(server *s, request *r) {
  wchunk *k = chunk_get(s, 0);
  pp_wire_frame f;
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_BODY_END;
  f.request_id = r->id;
  k->len = (size_t)pp_wire_encode(&f, k->data, k->cap);
  k->owner = r->w;
  uv_buf_t b = uv_buf_init((char *)k->data, (unsigned)k->len);
  if (write_or_queue((uv_stream_t *)&r->w->pipe, &k->wr, &b, 1, pp__on_worker_write) <= 0)
    chunk_put(s, k);
}

static void send_request(server *s, request *r, wconn *w) {
  r->t3 = pp_now_ns();
  uint64_t queue_ns = (uint64_t)(r->t3 - r->t2b);
  pp_hist_window_record(&s->stats.queue, queue_ns);
  r->head.len = r->queue_key_end;
  int n = snprintf(r->queue_digits, sizeof r->queue_digits, "%" PRIu64, queue_ns);
  pp_buf_append_u32(&r->head, (uint32_t)n);
  pp_buf_append(&r->head, r->queue_digits, (size_t)n);
  uint8_t *h = r->head.data;
  size_t body_len = r->streaming ? 0 : r->body.len - 4;
  size_t payload = r->head.len - 8 + 4 + body_len;
  pp_wire_put_header(h, PP_WIRE_REQUEST, (uint32_t)payload);
  pp_wire_put_u64(h + 8, r->id);
  pp_wire_put_u64(h + 16, (uint64_t)r->t2b);
  pp_wire_put_u64(h + 24, (uint64_t)r->t3);
  h[32] = r->streaming ? PP_WIRE_FLAG_BODY_STREAMS : 0;
  uv_buf_t bufs[2];
  bufs[0] = uv_buf_init((char *)r->head.data, (unsigned)r->head.len);
  if (r->streaming) {
    memset(r->len_zero, 0, 4);
    bufs[1] = uv_buf_init((char *)r->len_zero, 4);
  } else {
    pp_wire_put_u32(r->body.data, (uint32_t)body_len);
    bufs[1] = uv_buf_init((char *)r->body.data, (unsigned)r->body.len);
  }
  r->w = w;
  w->req = r;
  r->state = RS_RUNNING;
  r->wreq.data = s;
  int rc = write_or_queue((uv_stream_t *)&w->pipe, &r->wreq, bufs, 2, on_request_written);
  if (rc < 0) {
    wconn_close(w, "write failed");
    return;
  }
  if (rc == 1) r->writes++; /* the buffers stay referenced until on_request_written */
  if (r->streaming) {
    if (r->body.len > 4) send_body_frames(s, r, r->body.data + 4, r->body.len - 4);
    r->body.len = 4;
    if (r->body_done) send_body_end(s, r);
    /* reading the client may resume now (unless we are inside its parser right now) */
    if (r->c && !r->c->in_parse) client_process(r->c);
  }
}

/* ---------------------------------------------------------------- HTTP callbacks */

static int on_h1_headers(pp_h1 *h) {
  client *c = h->data;
  server *s = c->srv;
  request *r = request_get(s);
  c->req = r;
  r->c = c;
  r->t1 = c->t1 ? c->t1 : pp_now_ns();
  r->t2 = pp_now_ns();
  r->keep_alive = h->keep_alive;
  r->head_method = h->method == HTTP_HEAD;
  s->stats.requests++;
  if (c->ls->kind == LISTEN_CONTROL) {
    r->state = RS_CONTROL;
    return 0;
  }
  r->id = ++s->next_request_id;
  r->state = RS_BODY;
  /* Admission control (issue 5): refuse at once, never after queueing. */
  if (s->ctl_state.shedding) {
    uint64_t wait = pp_server_predicted_wait(s);
    if (wait != UINT64_MAX ? wait > s->ctl_state.shed_budget_ns : 1) {
      s->stats.shed++;
      s->stats.shed_window++;
      h->reason = "overloaded: predicted wait over the budget (shed)";
      return 503;
    }
  }
  /* REQUEST frame prefix: header, id, t2b, t3, flags, pair count, env pairs. */
  pp_buf_reserve(&r->head, 1024);
  r->head.len = 8 + 8 + 8 + 8 + 1 + 4;
  memset(r->head.data, 0, r->head.len);
  char port[8];
  snprintf(port, sizeof port, "%d", c->ls->addr.port);
  pp_h1_conninfo ci = {c->remote, c->ls->addr.is_unix ? "localhost" : c->ls->addr.host,
                       c->ls->addr.is_unix ? "80" : port, "http"};
  uint32_t pairs = pp_h1_build_env(h, &ci, r->id, &r->head);
  pp_h1_put_pair(&r->head, "puma_plus.queue_ns", 18, "", 0);
  r->head.len -= 4; /* the value (length + digits) is appended at dispatch */
  r->queue_key_end = r->head.len;
  pp_wire_put_u32(r->head.data + 33, pairs + 1);
  pp_buf_reserve(&r->body, 4);
  r->body.len = 4;
  if (h->has_content_length && h->content_length > PP_BODY_BUFFER_LIMIT) r->streaming = 1;
  int has_body = (h->has_content_length && h->content_length > 0) || h->chunked;
  if (h->expect_continue && has_body) {
    client_out(c, "HTTP/1.1 100 Continue\r\n\r\n", 25);
    client_flush(c);
  }
  return 0;
}

static int on_h1_body(pp_h1 *h, const uint8_t *data, size_t len) {
  client *c = h->data;
  server *s = c->srv;
  request *r = c->req;
  /* control requests, and the rest of an upload whose response already ended: discarded */
  if (!r || r->state == RS_CONTROL || r->state == RS_RESPONDED) return 0;
  if (r->state == RS_RUNNING) {
    if (!r->cancelled) send_body_frames(s, r, data, len);
    return 0;
  }
  pp_buf_append(&r->body, data, len);
  if (r->state == RS_BODY && r->body.len - 4 >= PP_BODY_BUFFER_LIMIT) {
    r->streaming = 1;
    make_runnable(s, r);
  }
  return 0;
}

static void handle_control(client *c);

static int on_h1_complete(pp_h1 *h) {
  client *c = h->data;
  server *s = c->srv;
  request *r = c->req;
  if (!r) {
    /* the end of a body discarded after its response: the next request may follow at once
     * (the parser is resumed by client_process, outside this callback) */
    c->discard_body = 0;
    c->discard_done = 1;
    return 0;
  }
  c->parser_paused = 1;
  r->msg_complete = 1;
  if (r->state == RS_CONTROL) {
    handle_control(c);
    return 0;
  }
  if (r->streaming) {
    r->body_done = 1;
    if (r->state == RS_RUNNING && !r->cancelled)
      send_body_end(s, r);
    else if (r->state == RS_BODY)
      make_runnable(s, r); /* (CL > 1 MiB but body shorter) */
    return 0;
  }
  make_runnable(s, r);
  return 0;
}

static const pp_h1_callbacks h1_callbacks = {on_h1_headers, on_h1_body, on_h1_complete};

/* ---------------------------------------------------------------- client input */

static int client_can_parse(client *c) {
  if (c->parser_paused || c->closing || c->discarding) return 0;
  request *r = c->req;
  if (!r) return 1;
  if (r->streaming && r->state == RS_QUEUED) return 0; /* 1 MiB buffered; wait for dispatch */
  if (r->streaming && r->state == RS_RUNNING && r->w &&
      uv_stream_get_write_queue_size((uv_stream_t *)&r->w->pipe) > PP_WORKER_WRITE_HIGH)
    return 0;
  return 1;
}

static void on_client_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  client *c = h->data;
  (void)suggested;
  if (c->discarding) {
    static char sink[4096];
    *buf = uv_buf_init(sink, sizeof sink);
    return;
  }
  if (c->rpos > 0 && c->rpos == c->rlen) c->rpos = c->rlen = 0;
  *buf = uv_buf_init((char *)c->rbuf + c->rlen, (unsigned)(PP_CLIENT_RBUF - c->rlen));
}

static void client_update_reading(client *c) {
  if (c->closing) return;
  int want = c->discarding || (c->rlen < PP_CLIENT_RBUF && !c->eof);
  if (want && !c->reading) {
    uv_read_start(&c->h.stream, on_client_alloc, pp__on_client_read);
    c->reading = 1;
  } else if (!want && c->reading) {
    uv_read_stop(&c->h.stream);
    c->reading = 0;
  }
}

static void client_process(client *c) {
  if (c->in_parse) return; /* never re-enter the parser; the running loop continues */
  while (!c->closing && c->rpos < c->rlen && client_can_parse(c)) {
    if (!c->req && !c->h1.started && !c->t1) c->t1 = pp_now_ns();
    size_t used = 0;
    uint64_t messages = c->h1.messages;
    c->in_parse = 1;
    pp_h1_result res = pp_h1_execute(&c->h1, c->rbuf + c->rpos, c->rlen - c->rpos, &used);
    c->in_parse = 0;
    c->rpos += used;
    if (res == PP_H1_ERROR) {
      if (c->discard_body) { /* the response is out; a second one would corrupt the stream */
        LOG(c->srv, "client %s: %s while discarding an unread upload, connection closed", c->remote,
            c->h1.reason);
        client_close(c);
        return;
      }
      client_fail(c, c->h1.status, c->h1.reason);
      return;
    }
    if (res == PP_H1_PAUSED && c->discard_done) {
      c->discard_done = 0;
      pp_h1_resume(&c->h1);
      c->t1 = 0;
      continue;
    }
    /* Never spin: a PAUSED that consumed nothing and completed no message would be returned
     * again on the next turn of this loop (pp_h1_execute does not do that since fuzz finding
     * 5; this guard keeps a parser regression from hanging the whole event loop). */
    if (res == PP_H1_PAUSED && used == 0 && c->h1.messages == messages) {
      LOG_ERR(c->srv, "client %s: HTTP parser made no progress, connection closed", c->remote);
      client_close(c);
      return;
    }
  }
  if (c->closing) return;
  /* A response finished inside the parser (control app, written at once): complete it now
   * that the parser has returned. */
  if (c->response_done && c->writes_in_flight == 0) {
    client_response_complete(c);
    return;
  }
  if (c->rpos > 0) {
    memmove(c->rbuf, c->rbuf + c->rpos, c->rlen - c->rpos);
    c->rlen -= c->rpos;
    c->rpos = 0;
  }
  client_update_reading(c);
  client_arm_timer(c);
}

void pp__on_client_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf) {
  client *c = st->data;
  (void)buf;
  if (c->closing) return;
  if (nread < 0) {
    c->eof = 1;
    /* EOF or reset. With a request in flight the client has gone away: it leaves the queue,
     * or the worker gets CANCEL. (A half-close after a complete request is treated the same
     * way; HTTP clients that wait for a response do not half-close.) */
    client_close(c);
    return;
  }
  if (c->discarding || nread == 0) return;
  if (!c->t1 && !c->req && !c->h1.started && c->rpos == c->rlen) c->t1 = pp_now_ns();
  c->rlen += (size_t)nread;
  c->last_progress = pp_now_ns();
  client_process(c);
}

/* A client struct from the pool with its stream handle initialised (not yet connected). */
static client *client_new(server *s, listener *ls) {
  client *c = s->free_clients;
  if (c) {
    s->free_clients = c->next_free;
  } else {
    c = xmalloc(sizeof *c);
    memset(c, 0, sizeof *c);
    c->rbuf = xmalloc(PP_CLIENT_RBUF);
  }
  uint8_t *rbuf = c->rbuf;
  memset(c, 0, sizeof *c);
  c->rbuf = rbuf;
  c->srv = s;
  c->ls = ls;
  if (ls->addr.is_unix)
    uv_pipe_init(s->loop, &c->h.pipe, 0);
  else
    uv_tcp_init(s->loop, &c->h.tcp);
  c->h.handle.data = c;
  return c;
}

/* A client whose stream could not be connected: release it through the close callbacks. */
static void client_discard(client *c) {
  c->closing = 1;
  uv_timer_init(c->srv->loop, &c->timer);
  c->timer.data = c;
  uv_close((uv_handle_t *)&c->timer, on_timer_closed);
}

/* The stream is connected: start serving it. */
static void client_start(client *c) {
  server *s = c->srv;
  s->stats.connections_accepted++;
  if (!c->ls->addr.is_unix) {
    uv_tcp_nodelay(&c->h.tcp, 1);
    struct sockaddr_storage ss;
    int len = sizeof ss;
    if (uv_tcp_getpeername(&c->h.tcp, (struct sockaddr *)&ss, &len) == 0) {
      if (ss.ss_family == AF_INET)
        uv_ip4_name((struct sockaddr_in *)&ss, c->remote, sizeof c->remote);
      else
        uv_ip6_name((struct sockaddr_in6 *)&ss, c->remote, sizeof c->remote);
      /* v4-mapped addresses read as plain IPv4, as Rack apps expect */
      if (strncmp(c->remote, "::ffff:", 7) == 0 && strchr(c->remote, '.'))
        memmove(c->remote, c->remote + 7, strlen(c->remote + 7) + 1);
    }
  } else {
    strcpy(c->remote, "127.0.0.1");
  }
  uv_timer_init(s->loop, &c->timer);
  c->timer.data = c;
  pp_h1_init(&c->h1, &h1_callbacks, &s->limits, c);
  pp_queue_push(&s->clients, &c->link);
  client_update_reading(c);
  client_arm_timer(c);
}

static void on_connection(uv_stream_t *ls_stream, int status) {
  listener *ls = ls_stream->data;
  server *s = ls->srv;
  if (status < 0 || s->draining) return;
  client *c = client_new(s, ls);
  if (uv_accept(ls_stream, &c->h.stream) < 0) {
    client_discard(c);
    return;
  }
  client_start(c);
}

/* At drain start: take every connection the kernel has already completed (the listen
 * backlog) before the listener closes, so that a client that connected before SIGTERM is
 * served rather than reset. */
static void accept_backlog(server *s, listener *ls) {
  uv_os_fd_t fd;
  if (uv_fileno(&ls->h.handle, &fd) < 0) return;
  for (int n = 0; n < 4096; n++) {
    int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (cfd < 0) return;
    client *c = client_new(s, ls);
    int rc = ls->addr.is_unix ? uv_pipe_open(&c->h.pipe, cfd) : uv_tcp_open(&c->h.tcp, cfd);
    if (rc < 0) {
      close(cfd);
      client_discard(c);
      continue;
    }
    client_start(c);
  }
}

/* ---------------------------------------------------------------- worker connections */

static void on_worker_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf);

static void on_worker_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  wconn *w = h->data;
  (void)suggested;
  pp_buf_reserve(&w->rbuf, 65536);
  *buf = uv_buf_init((char *)w->rbuf.data + w->rbuf.len, (unsigned)(w->rbuf.cap - w->rbuf.len));
}

void pp__wconn_resume(wconn *w) {
  if (!w->paused || w->closing) return;
  w->paused = 0;
  uv_read_start((uv_stream_t *)&w->pipe, on_worker_alloc, on_worker_read);
}

static void on_wconn_closed(uv_handle_t *h) {
  wconn *w = h->data;
  pp_buf_dispose(&w->rbuf);
  free(w);
}

static void wconn_close(wconn *w, const char *reason) {
  server *s = w->srv;
  if (w->closing) return;
  w->closing = 1;
  if (reason) LOG(s, "worker connection (pid %u): closed: %s", w->pid, reason);
  request *r = w->req;
  w->req = NULL;
  if (r) {
    r->w = NULL;
    client *c = r->c;
    if (c && !r->cancelled) {
      s->stats.errors_502++;
      if (!r->head_sent) {
        static const char msg[] = "502 Bad Gateway: the worker running this request died\n";
        r->state = RS_RESPONDED;
        r->resp_close = 1;
        client_simple_response(c, 502, "text/plain", NULL, msg, sizeof msg - 1, 1);
        c->response_done = 1;
        client_flush(c);
        if (c->writes_in_flight == 0) client_response_complete(c);
      } else {
        /* mid-body: the client sees a truncated response. client_close leaves a running
         * request to its worker connection (RESPONSE_END or this close frees it), and that
         * connection is this one: free it here, or live_requests never drops and a drain
         * waits for the drain timeout. */
        client_close(c);
        request_release(s, r);
      }
    } else {
      r->c = NULL;
      request_release(s, r);
    }
  }
  if (w->hello) {
    pp_worker *wk = pp_registry_detach(&s->reg, &w->slot);
    (void)wk;
  }
  pp_queue_remove(&s->wconns, &w->link);
  uv_read_stop((uv_stream_t *)&w->pipe);
  uv_close((uv_handle_t *)&w->pipe, on_wconn_closed);
  if (s->draining) drain_check(s);
}

/* Writes the HTTP/1.1 status line and headers for RESPONSE_HEAD. */
static void response_head(server *s, client *c, request *r, const pp_wire_frame *f) {
  int status = f->status;
  int64_t content_length = -1;
  r->resp_no_body = r->head_method || status < 200 || status == 204 || status == 304;
  if (s->draining) r->resp_close = 1;
  if (!r->keep_alive) r->resp_close = 1;
  client_outf(c, "HTTP/1.1 %d %s\r\n", status, pp_h1_reason_phrase(status));
  pp_wire_pairs_iter it;
  pp_wire_pairs_iter_init(&it, &f->pairs);
  const uint8_t *k, *v;
  uint32_t kl, vl;
  while (pp_wire_pairs_next(&it, &k, &kl, &v, &vl)) {
    if (kl == 0) continue;
    if ((kl == 10 && !strncasecmp((const char *)k, "connection", 10)) ||
        (kl == 17 && !strncasecmp((const char *)k, "transfer-encoding", 17)) ||
        (kl == 10 && !strncasecmp((const char *)k, "keep-alive", 10)))
      continue;
    if (kl == 14 && !strncasecmp((const char *)k, "content-length", 14)) {
      int64_t n = 0;
      int ok = vl > 0 && vl < 19;
      for (uint32_t i = 0; ok && i < vl; i++) {
        if (v[i] < '0' || v[i] > '9')
          ok = 0;
        else
          n = n * 10 + (v[i] - '0');
      }
      if (!ok || content_length >= 0) continue; /* invalid or repeated: we frame ourselves */
      content_length = n;
    }
    /* Rack 2 joins multiple values with "\n": one header line each. CR never passes. */
    uint32_t start = 0;
    for (uint32_t i = 0; i <= vl; i++) {
      if (i == vl || v[i] == '\n') {
        client_out(c, k, kl);
        client_out(c, ": ", 2);
        for (uint32_t j = start; j < i; j++)
          if (v[j] != '\r') client_out(c, &v[j], 1);
        client_out(c, "\r\n", 2);
        start = i + 1;
      }
    }
  }
  if (!r->resp_no_body && content_length < 0) {
    if (r->c && r->c->h1.http_minor >= 1) {
      client_out(c, "Transfer-Encoding: chunked\r\n", 28);
      r->resp_chunked = 1;
    } else {
      r->resp_close = 1; /* HTTP/1.0: the end of the body is the end of the connection */
    }
  }
  if (r->resp_close)
    client_out(c, "Connection: close\r\n", 19);
  else if (c->h1.http_minor == 0)
    client_out(c, "Connection: keep-alive\r\n", 24);
  client_out(c, "\r\n", 2);
  r->head_sent = 1;
  count_status(s, status);
  s->stats.responses++;
  pp_hist_window_record(&s->stats.ttfb, (uint64_t)(pp_now_ns() - r->t1));
}

static int wconn_frame(wconn *w, const pp_wire_frame *f) {
  server *s = w->srv;

  if (!w->hello) {
    if (f->type != PP_WIRE_HELLO) {
      wconn_close(w, "first frame is not HELLO");
      return -1;
    }
    if (f->version != PP_WIRE_VERSION) {
      char why[64];
      snprintf(why, sizeof why, "unsupported protocol version %u", f->version);
      wconn_close(w, why);
      return -1;
    }
    w->hello = 1;
    w->pid = f->pid;
    w->slot.data = w;
    pp_worker *wk = pp_registry_find(&s->reg, f->pid);
    int was_ready = wk && wk->state == PP_WORKER_READY;
    wk = pp_registry_attach(&s->reg, &w->slot, f->pid, f->worker_index, f->thread_index,
                            pp_now_ns());
    if (!wk) {
      wconn_close(w, "worker registry full");
      return -1;
    }
    if (!was_ready && wk->state == PP_WORKER_READY)
      LOG(s, "worker %u (pid %u) ready", f->worker_index, f->pid);
    dispatch_all(s);
    return 0;
  }
  request *r = w->req;
  switch (f->type) {
  case PP_WIRE_RESPONSE_HEAD:
  case PP_WIRE_RESPONSE_BODY:
  case PP_WIRE_RESPONSE_END:
    if (!r || r->id != f->request_id) {
      wconn_close(w, "response for a request that is not running on this connection");
      return -1;
    }
    break;
  default: {
    char why[64];
    snprintf(why, sizeof why, "unexpected frame %s from a worker", pp_wire_type_name(f->type));
    wconn_close(w, why);
    return -1;
  }
  }
  client *c = r->cancelled ? NULL : r->c;
  if (f->type == PP_WIRE_RESPONSE_HEAD) {
    if (r->head_sent) {
      wconn_close(w, "second RESPONSE_HEAD");
      return -1;
    }
    if (c)
      response_head(s, c, r, f);
    else
      r->head_sent = 1;
    return 0;
  }
  if (f->type == PP_WIRE_RESPONSE_BODY) {
    if (!r->head_sent) {
      wconn_close(w, "RESPONSE_BODY before RESPONSE_HEAD");
      return -1;
    }
    if (c && !r->resp_no_body && f->data_len) {
      if (r->resp_chunked) client_outf(c, "%zx\r\n", f->data_len);
      client_out(c, f->data, f->data_len);
      if (r->resp_chunked) client_out(c, "\r\n", 2);
      /* flushed at the end of this read (one write for all the frames it carried) */
    }
    return 0;
  }
  /* RESPONSE_END */
  uint64_t service = 0;
  if (f->t5_ns > f->t4_ns) service = f->t5_ns - f->t4_ns;
  service = service > f->body_read_ns ? service - f->body_read_ns : 0;
  pp_hist_window_record(&s->stats.service, service);
  if (f->body_read_ns) pp_hist_window_record(&s->stats.body_wait, f->body_read_ns);
  if (f->gvl_wait_ns >= 0) s->stats.gvl_sum_ns += f->gvl_wait_ns, s->stats.gvl_count++;
  if (f->cpu_ns >= 0) s->stats.cpu_sum_ns += f->cpu_ns, s->stats.cpu_count++;
  s->stats.completions++;
  s->stats.completions_window++;
  w->req = NULL;
  r->w = NULL;
  /* Backpressure was against this response's client; the next request may go elsewhere. */
  pp__wconn_resume(w);
  pp_registry_release(&s->reg, &w->slot);
  retire_if_drained(s, w->slot.worker);
  if (c) {
    if (!r->head_sent) {
      static const char msg[] = "500 Internal Server Error\n";
      s->stats.errors_500++;
      r->head_sent = 1;
      client_simple_response(c, 500, "text/plain", NULL, msg, sizeof msg - 1, !r->keep_alive);
      s->stats.responses++;
    } else if (r->resp_chunked) {
      client_out(c, "0\r\n\r\n", 5);
    }
    /* A streamed upload the app did not read to the end: nothing more is forwarded (the
     * worker skips what was already sent: PROTOCOL.md "Stale frames"); once the response is
     * flushed the client's remaining body is read and discarded, and keep-alive goes on
     * (client_response_complete). */
    r->state = RS_RESPONDED;
    c->response_done = 1;
    client_flush(c);
    if (c->writes_in_flight == 0) client_response_complete(c);
  } else {
    r->c = NULL;
    request_release(s, r);
  }
  dispatch_all(s);
  return 0;
}

static void on_worker_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf) {
  wconn *w = st->data;
  (void)buf;
  if (w->closing) return;
  if (nread < 0) {
    wconn_close(w, w->req ? "connection lost with a request in flight" : NULL);
    return;
  }
  w->rbuf.len += (size_t)nread;
  size_t pos = 0;
  while (!w->closing) {
    pp_wire_frame f;
    size_t need = 0;
    ssize_t n = pp_wire_decode(&w->dec, w->rbuf.data + pos, w->rbuf.len - pos, &f, &need);
    if (n < 0) {
      char why[128];
      snprintf(why, sizeof why, "protocol error: %s", pp_wire_strerror((int)n));
      w->srv->stats.worker_protocol_errors++;
      wconn_close(w, why);
      return;
    }
    if (n == 0) {
      if (need > w->rbuf.cap - pos) {
        pp_buf_consume(&w->rbuf, pos);
        pos = 0;
        pp_buf_reserve(&w->rbuf, need - w->rbuf.len);
      }
      break;
    }
    pos += (size_t)n;
    if (wconn_frame(w, &f) < 0) return;
  }
  if (w->closing) return;
  pp_buf_consume(&w->rbuf, pos);
  /* Flush what this read produced for the running request's client; stop reading this
   * worker while that client has too much unwritten (backpressure). */
  request *r = w->req;
  client *c = r && !r->cancelled ? r->c : NULL;
  if (c && !c->closing) {
    client_flush(c);
    if (c->write_bytes > PP_CLIENT_WRITE_HIGH && !w->paused) {
      w->paused = 1;
      uv_read_stop((uv_stream_t *)&w->pipe);
    }
  }
}

static void on_worker_connection(uv_stream_t *ls, int status) {
  server *s = ls->data;
  if (status < 0) return;
  wconn *w = xmalloc(sizeof *w);
  memset(w, 0, sizeof *w);
  w->srv = s;
  pp_wire_decoder_init(&w->dec);
  pp_buf_init(&w->rbuf);
  uv_pipe_init(s->loop, &w->pipe, 0);
  w->pipe.data = w;
  if (uv_accept(ls, (uv_stream_t *)&w->pipe) < 0) {
    uv_close((uv_handle_t *)&w->pipe, on_wconn_closed);
    return;
  }
  pp_queue_push(&s->wconns, &w->link);
  uv_read_start((uv_stream_t *)&w->pipe, on_worker_alloc, on_worker_read);
}

/* ---------------------------------------------------------------- shepherd */

static void ctl_send(server *s, const pp_wire_frame *f) {
  if (!s->ctl_open) return;
  wchunk *k = chunk_get(s, 0);
  k->len = (size_t)pp_wire_encode(f, k->data, k->cap);
  k->owner = NULL;
  uv_buf_t b = uv_buf_init((char *)k->data, (unsigned)k->len);
  if (write_or_queue((uv_stream_t *)&s->ctl, &k->wr, &b, 1, pp__on_worker_write) <= 0)
    chunk_put(s, k);
}

void pp__ctl_spawn(server *s, uint32_t n) {
  pp_wire_frame f;
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_SPAWN;
  f.count = n;
  s->spawns_pending += n;
  s->last_spawn_ns = pp_now_ns();
  ctl_send(s, &f);
}

/* A retiring worker with nothing in flight is told to exit. */
static void retire_if_drained(server *s, pp_worker *w) {
  if (!w || w->state != PP_WORKER_RETIRING || w->busy || w->retire_sent) return;
  w->retire_sent = 1;
  pp_wire_frame f;
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_RETIRE;
  f.pid = w->pid;
  ctl_send(s, &f);
  LOG(s, "retiring worker %u (pid %u)", w->index, w->pid);
}

void pp__ctl_retire(server *s, pp_worker *w) {
  pp_registry_retire(&s->reg, w);
  retire_if_drained(s, w);
}

/* Asks for as many workers as are missing from workers_wanted. */
static void respawn_missing(server *s) {
  if (s->stopping || s->draining) return;
  uint32_t alive = pp_registry_count(&s->reg, PP_WORKER_READY) +
                   pp_registry_count(&s->reg, PP_WORKER_BOOTING) + s->spawns_pending;
  if (alive < s->workers_wanted) {
    s->stats.worker_restarts++;
    LOG(s, "respawning (%u of %u workers alive)", alive, s->workers_wanted);
    pp__ctl_spawn(s, s->workers_wanted - alive);
  }
}

static void on_respawn_timer(uv_timer_t *t) {
  respawn_missing(t->data);
}

static void ctl_frame(server *s, const pp_wire_frame *f) {
  int64_t now = pp_now_ns();
  switch (f->type) {
  case PP_WIRE_READY:
    s->boot_ns = f->boot_ns;
    LOG(s, "shepherd (pid %u) loaded the app in %.1f ms", f->pid, f->boot_ns / 1e6);
    break;
  case PP_WIRE_FORKED:
    if (s->spawns_pending) s->spawns_pending--;
    pp_registry_add(&s->reg, f->pid, f->worker_index, now);
    LOG(s, "worker %u forked (pid %u)", f->worker_index, f->pid);
    break;
  case PP_WIRE_EXITED: {
    pp_worker *w = pp_registry_find(&s->reg, f->pid);
    int retiring = w && w->state == PP_WORKER_RETIRING;
    int64_t w_forked_ns = w ? w->forked_ns : 0;
    if (w) {
      /* its connections are closed (or closing); detach whatever is left */
      pp_qnode *n = s->wconns.head.next;
      while (n != &s->wconns.head) {
        wconn *wc = PP_CONTAINER_OF(n, wconn, link);
        n = n->next;
        if (wc->hello && wc->pid == f->pid) wconn_close(wc, "its worker exited");
      }
      pp_registry_remove(&s->reg, w);
    }
    if (f->exit_status < 0)
      LOG_ERR(s, "worker pid %u exited by signal %d", f->pid, -f->exit_status);
    else
      LOG(s, "worker pid %u exited with status %d", f->pid, f->exit_status);
    if (!s->stopping && !retiring) {
      /* A worker that dies young (within 1 s of its fork) is respawned with a growing delay
       * (100 ms doubling to 5 s), so an app that cannot boot does not fork in a tight loop. */
      int young = w_forked_ns && now - w_forked_ns < 1000000000LL;
      if (!young)
        s->respawn_delay_ms = 0;
      else
        s->respawn_delay_ms = s->respawn_delay_ms ? s->respawn_delay_ms * 2 : 100;
      if (s->respawn_delay_ms > 5000) s->respawn_delay_ms = 5000;
      if (s->respawn_delay_ms) {
        LOG_ERR(s, "worker died %.0f ms after its fork; respawning in %u ms",
                (now - w_forked_ns) / 1e6, s->respawn_delay_ms);
        uv_timer_start(&s->respawn_timer, on_respawn_timer, s->respawn_delay_ms, 0);
      } else {
        respawn_missing(s);
      }
    }
    break;
  }
  default:
    LOG_ERR(s, "control channel: unexpected frame %s from the shepherd",
            pp_wire_type_name(f->type));
  }
}

static void on_ctl_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  server *s = h->data;
  (void)suggested;
  pp_buf_reserve(&s->ctl_rbuf, 4096);
  *buf = uv_buf_init((char *)s->ctl_rbuf.data + s->ctl_rbuf.len,
                     (unsigned)(s->ctl_rbuf.cap - s->ctl_rbuf.len));
}

static void on_ctl_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf) {
  server *s = st->data;
  (void)buf;
  if (nread < 0) {
    if (!s->stopping) LOG_ERR(s, "control channel to the shepherd closed");
    uv_read_stop(st);
    return;
  }
  s->ctl_rbuf.len += (size_t)nread;
  size_t pos = 0;
  for (;;) {
    pp_wire_frame f;
    size_t need;
    ssize_t n =
        pp_wire_decode(&s->ctl_dec, s->ctl_rbuf.data + pos, s->ctl_rbuf.len - pos, &f, &need);
    if (n < 0) {
      LOG_ERR(s, "control channel: protocol error: %s", pp_wire_strerror((int)n));
      uv_read_stop(st);
      return;
    }
    if (n == 0) {
      if (need > s->ctl_rbuf.cap - pos) pp_buf_reserve(&s->ctl_rbuf, need);
      break;
    }
    pos += (size_t)n;
    ctl_frame(s, &f);
  }
  pp_buf_consume(&s->ctl_rbuf, pos);
}

static void on_shepherd_exit(uv_process_t *p, int64_t status, int sig) {
  server *s = p->data;
  s->shepherd_alive = 0;
  uv_close((uv_handle_t *)p, NULL);
  if (s->stopping) {
    LOG(s, "shepherd exited; bye");
    finish_exit(s, s->exit_code);
    return;
  }
  LOG_ERR(s, "shepherd exited unexpectedly (status %lld, signal %d); stopping", (long long)status,
          sig);
  finish_exit(s, 1);
}

static int file_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

static int find_gem_dir(server *s, const char *argv0) {
  const char *dir = s->cfg->gem_dir;
  if (!dir) dir = getenv("PUMA_PLUS_GEM_DIR");
  char probe[2 * PATH_MAX];
  if (dir) {
    if (snprintf(s->gem_dir, sizeof s->gem_dir, "%s", dir) >= (int)sizeof s->gem_dir) return -1;
    if (snprintf(probe, sizeof probe, "%s/exe/puma-plus-shepherd", dir) >= (int)sizeof probe)
      return -1;
    return file_exists(probe) ? 0 : -1;
  }
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) {
    if (!argv0 || !realpath(argv0, exe)) return -1;
  } else {
    exe[n] = 0;
  }
  char *slash = strrchr(exe, '/');
  if (slash) *slash = 0;
  static const char *rel[] = {"/../../gem", "/../gem", "/../../../gem", "/../share/puma-plus/gem",
                              "/gem"};
  for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
    if (snprintf(probe, sizeof probe, "%s%s/exe/puma-plus-shepherd", exe, rel[i]) >=
        (int)sizeof probe)
      continue;
    if (!file_exists(probe)) continue;
    if (snprintf(probe, sizeof probe, "%s%s", exe, rel[i]) >= (int)sizeof probe) continue;
    char real[PATH_MAX];
    const char *found = realpath(probe, real) ? real : probe;
    if (snprintf(s->gem_dir, sizeof s->gem_dir, "%s", found) >= (int)sizeof s->gem_dir) continue;
    return 0;
  }
#ifdef PP_SOURCE_GEM_DIR
  /* A build directory outside the checkout: the checkout's gem/, known when CMake ran. */
  if (snprintf(probe, sizeof probe, "%s/exe/puma-plus-shepherd", PP_SOURCE_GEM_DIR) <
          (int)sizeof probe &&
      file_exists(probe) &&
      snprintf(s->gem_dir, sizeof s->gem_dir, "%s", PP_SOURCE_GEM_DIR) < (int)sizeof s->gem_dir)
    return 0;
#endif
  return -1;
}

static int spawn_shepherd(server *s) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
    LOG_ERR(s, "socketpair: %s", strerror(errno));
    return -1;
  }
  uv_pipe_init(s->loop, &s->ctl, 0);
  s->ctl.data = s;
  uv_pipe_open(&s->ctl, sv[0]);
  s->ctl_open = 1;
  char libdir[8300], exe[8300], threads[16], workers[16];
  snprintf(libdir, sizeof libdir, "-I%s/lib", s->gem_dir);
  snprintf(exe, sizeof exe, "%s/exe/puma-plus-shepherd", s->gem_dir);
  snprintf(threads, sizeof threads, "%u", s->cfg->threads);
  snprintf(workers, sizeof workers, "%u", s->workers_wanted);
  char *args[] = {(char *)s->cfg->ruby, libdir,      exe,     "--app",
                  (char *)s->cfg->app,  "--threads", threads, "--socket",
                  s->socket_path,       "--workers", workers, NULL};
  uv_stdio_container_t stdio[4];
  for (int i = 0; i < 3; i++)
    stdio[i].flags = UV_INHERIT_FD, stdio[i].data.fd = i;
  stdio[3].flags = UV_INHERIT_FD;
  stdio[3].data.fd = sv[1];
  uv_process_options_t opt;
  memset(&opt, 0, sizeof opt);
  opt.file = s->cfg->ruby;
  opt.args = args;
  opt.exit_cb = on_shepherd_exit;
  opt.stdio = stdio;
  opt.stdio_count = 4;
  s->shepherd.data = s;
  int rc = uv_spawn(s->loop, &s->shepherd, &opt);
  close(sv[1]);
  if (rc < 0) {
    LOG_ERR(s, "cannot start the shepherd (%s %s): %s", s->cfg->ruby, exe, uv_strerror(rc));
    return -1;
  }
  s->shepherd_alive = 1;
  s->shepherd_pid = (uint32_t)s->shepherd.pid;
  s->spawns_pending = s->workers_wanted; /* the shepherd forks --workers at start */
  s->last_spawn_ns = pp_now_ns();
  LOG(s, "shepherd pid %d: %s %s %s --app %s --threads %s --socket %s --workers %s",
      s->shepherd.pid, s->cfg->ruby, libdir, exe, s->cfg->app, threads, s->socket_path, workers);
  uv_read_start((uv_stream_t *)&s->ctl, on_ctl_alloc, on_ctl_read);
  return 0;
}

/* ---------------------------------------------------------------- drain and exit */

static void cleanup_files(server *s) {
  if (s->socket_path[0]) unlink(s->socket_path);
  if (s->own_runtime_dir) rmdir(s->runtime_dir);
  for (int i = 0; i < s->listener_count; i++)
    if (s->listeners[i].addr.is_unix) unlink(s->listeners[i].addr.path);
}

static void finish_exit(server *s, int code) {
  if (s->shepherd_alive) kill((pid_t)s->shepherd_pid, SIGTERM);
  cleanup_files(s);
  if (s->ctl_state.log) fclose(s->ctl_state.log);
  fflush(stderr);
  exit(code);
}

static void stop_shepherd(server *s) {
  if (s->stopping) return;
  s->stopping = 1;
  s->stop_sent_ns = pp_now_ns();
  if (!s->shepherd_alive) finish_exit(s, s->exit_code);
  pp_wire_frame f;
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_STOP;
  f.grace_ms = 5000;
  ctl_send(s, &f);
  LOG(s, "drained; stopping the workers");
}

#define PP_DRAIN_GRACE_MS 100

/* An HTTP client with no request, no partial request and nothing being written. */
static int client_idle(const client *c) {
  return c->ls->kind == LISTEN_HTTP && !c->req && !c->h1.started && c->rpos == c->rlen &&
         c->writes_in_flight == 0;
}

static void drain_check(server *s) {
  if (!s->draining || s->stopping) return;
  if (pp_now_ns() - s->drain_started_ns < PP_DRAIN_GRACE_MS * 1000000LL) return;
  /* after the grace: idle connections close; the drain ends when no request is left */
  int partial = 0;
  pp_qnode *n = s->clients.head.next;
  while (n != &s->clients.head) {
    client *c = PP_CONTAINER_OF(n, client, link);
    n = n->next;
    if (c->closing || c->discarding) continue;
    if (client_idle(c))
      client_close(c);
    else if (c->ls->kind == LISTEN_HTTP && !c->req)
      partial = 1;
  }
  if (s->queue.len == 0 && s->live_requests == 0 && !partial) stop_shepherd(s);
}

static void on_drain_timer(uv_timer_t *t) {
  server *s = t->data;
  int64_t now = pp_now_ns();
  if (!s->stopping) {
    if (now - s->drain_started_ns > (int64_t)s->cfg->drain_timeout_ns) {
      LOG_ERR(s, "drain timeout: %u queued, %u live requests dropped", s->queue.len,
              s->live_requests);
      s->exit_code = 0;
      stop_shepherd(s);
    } else {
      drain_check(s);
    }
  } else if (now - s->stop_sent_ns > 8000000000LL) {
    LOG_ERR(s, "shepherd did not exit in time; killing it");
    kill((pid_t)s->shepherd_pid, SIGKILL);
    finish_exit(s, s->exit_code);
  }
}

static void on_listener_closed(uv_handle_t *h) {
  (void)h;
}

static void begin_drain(server *s) {
  if (s->draining) return;
  s->draining = 1;
  s->drain_started_ns = pp_now_ns();
  LOG_ERR(s, "draining: no new connections; %u queued, %u in flight", s->queue.len,
          s->reg.slots_busy);
  for (int i = 0; i < s->listener_count; i++) {
    listener *ls = &s->listeners[i];
    if (ls->kind == LISTEN_HTTP && ls->open) {
      accept_backlog(s, ls);
      ls->open = 0;
      uv_close(&ls->h.handle, on_listener_closed);
    }
  }
  /* Idle connections close after a short grace (PP_DRAIN_GRACE_MS), in which the loop reads
   * request bytes the kernel already holds for them; busy ones close after their response. */
  uv_timer_start(&s->drain_timer, on_drain_timer, 20, 20);
  drain_check(s);
}

static void on_signal(uv_signal_t *h, int signum) {
  server *s = h->data;
  if (signum == SIGQUIT || (signum == SIGINT && s->draining)) {
    LOG_ERR(s, "%s: stopping at once", signum == SIGQUIT ? "SIGQUIT" : "second SIGINT");
    finish_exit(s, 0);
  } else if (signum == SIGHUP) {
    if (s->ctl_state.log && s->ctl_state.log_path) {
      FILE *f = fopen(s->ctl_state.log_path, "a");
      if (f) {
        fclose(s->ctl_state.log);
        s->ctl_state.log = f;
        pp_controller_log_header(s);
        LOG(s, "SIGHUP: reopened %s", s->ctl_state.log_path);
      } else {
        LOG_ERR(s, "SIGHUP: cannot reopen %s: %s", s->ctl_state.log_path, strerror(errno));
      }
    }
  } else {
    begin_drain(s);
  }
}

/* ---------------------------------------------------------------- control app */

static int token_ok(server *s, client *c, const char *query, size_t qlen) {
  const char *tok = s->cfg->control_token;
  if (!tok || !*tok) return 1;
  size_t tl = strlen(tok);
  size_t alen;
  const uint8_t *auth = pp_h1_header(&c->h1, "authorization", &alen);
  if (auth && alen == 7 + tl && !strncasecmp((const char *)auth, "Bearer ", 7) &&
      !memcmp(auth + 7, tok, tl))
    return 1;
  for (size_t i = 0; i + 6 + tl <= qlen; i++) {
    if ((i == 0 || query[i - 1] == '&') && !strncmp(query + i, "token=", 6) &&
        !strncmp(query + i + 6, tok, tl) && (i + 6 + tl == qlen || query[i + 6 + tl] == '&'))
      return 1;
  }
  return 0;
}

static void handle_control(client *c) {
  server *s = c->srv;
  request *r = c->req;
  const char *url = (const char *)c->h1.raw.data + c->h1.url.off;
  size_t url_len = c->h1.url.len;
  const char *q = memchr(url, '?', url_len);
  size_t path_len = q ? (size_t)(q - url) : url_len;
  const char *query = q ? q + 1 : "";
  size_t qlen = q ? url_len - path_len - 1 : 0;
  int close = !r->keep_alive || s->draining;
  r->resp_close = close;
  pp_buf body;
  pp_buf_init(&body);
  if (!token_ok(s, c, query, qlen)) {
    static const char msg[] = "401 Unauthorized: a control token is required\n";
    client_simple_response(c, 401, "text/plain", NULL, msg, sizeof msg - 1, close);
  } else if (c->h1.method != HTTP_GET && c->h1.method != HTTP_HEAD) {
    static const char msg[] = "405 Method Not Allowed\n";
    client_simple_response(c, 405, "text/plain", "Allow: GET, HEAD\r\n", msg, sizeof msg - 1,
                           close);
  } else if (path_len == 6 && !memcmp(url, "/stats", 6)) {
    int pretty = qlen >= 8 && memmem(query, qlen, "pretty=1", 8) != NULL;
    pp_stats_json(s, pretty, &body);
    client_simple_response(c, 200, "application/json", NULL, body.data, body.len, close);
  } else if (path_len == 8 && !memcmp(url, "/metrics", 8)) {
    pp_stats_metrics(s, &body);
    client_simple_response(c, 200, "text/plain; version=0.0.4", NULL, body.data, body.len, close);
  } else {
    static const char msg[] = "404 Not Found (try /stats, /stats?pretty=1 or /metrics)\n";
    client_simple_response(c, 404, "text/plain", NULL, msg, sizeof msg - 1, close);
  }
  pp_buf_dispose(&body);
  r->state = RS_RESPONDED;
  c->response_done = 1;
  client_flush(c);
  /* completion happens in the write callback (never re-enter the parser from here) */
}

/* ---------------------------------------------------------------- startup */

static int open_listener(server *s, listener *ls) {
  int rc;
  ls->srv = s;
  if (ls->addr.is_unix) {
    uv_pipe_init(s->loop, &ls->h.pipe, 0);
    unlink(ls->addr.path);
    rc = uv_pipe_bind(&ls->h.pipe, ls->addr.path);
  } else {
    uv_tcp_init(s->loop, &ls->h.tcp);
    struct sockaddr_storage ss;
    if (strchr(ls->addr.host, ':'))
      rc = uv_ip6_addr(ls->addr.host, ls->addr.port, (struct sockaddr_in6 *)&ss);
    else
      rc = uv_ip4_addr(ls->addr.host, ls->addr.port, (struct sockaddr_in *)&ss);
    if (rc == 0) rc = uv_tcp_bind(&ls->h.tcp, (struct sockaddr *)&ss, 0);
  }
  ls->h.handle.data = ls;
  ls->open = 1;
  if (rc == 0) rc = uv_listen(&ls->h.stream, s->cfg->backlog, on_connection);
  if (rc < 0) {
    LOG_ERR(s, "cannot listen on %s: %s", ls->addr.text, uv_strerror(rc));
    return -1;
  }
  if (!ls->addr.is_unix && ls->addr.port == 0) {
    struct sockaddr_storage ss;
    int len = sizeof ss;
    uv_tcp_getsockname(&ls->h.tcp, (struct sockaddr *)&ss, &len);
    ls->addr.port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
  }
  LOG_ERR(s, "%s listening on %s%s%s (port %d)",
          ls->kind == LISTEN_CONTROL ? "control app" : "HTTP", ls->addr.is_unix ? "unix:" : "",
          ls->addr.is_unix ? ls->addr.path : ls->addr.host, "", ls->addr.port);
  return 0;
}

static void on_tick(uv_timer_t *t) {
  server *s = t->data;
  pp_stats *st = &s->stats;
  st->queue_last = st->queue.window;
  st->service_last = st->service.window;
  st->ttfb_last = st->ttfb.window;
  st->arrivals_last = st->arrivals_window;
  st->completions_last = st->completions_window;
  st->last_window_ns = s->cfg->tick_ns;
  pp_controller_tick(s);
  pp_hist_window_roll(&st->queue);
  pp_hist_window_roll(&st->service);
  pp_hist_window_roll(&st->ttfb);
  pp_hist_window_roll(&st->total);
  pp_hist_window_roll(&st->body_wait);
  st->arrivals_window = st->completions_window = st->shed_window = st->timeouts_window = 0;
}

int pp_server_run(pp_config *cfg, const char *argv0) {
  static server srv;
  server *s = &srv;
  memset(s, 0, sizeof *s);
  s->cfg = cfg;
  s->loop = uv_default_loop();
  s->started_at = time(NULL);
  s->workers_wanted = cfg->workers;
  pp_h1_limits_default(&s->limits);
  s->limits.max_header_bytes = cfg->max_header_bytes;
  s->limits.max_uri_bytes = cfg->max_uri_bytes;
  s->limits.max_headers = cfg->max_headers;
  s->limits.max_body_bytes = cfg->max_body_bytes;
  pp_queue_init(&s->queue);
  pp_queue_init(&s->clients);
  pp_queue_init(&s->wconns);
  pp_registry_init(&s->reg);
  pp_wire_decoder_init(&s->ctl_dec);
  pp_buf_init(&s->ctl_rbuf);
  pp_hist_window_init(&s->stats.queue);
  pp_hist_window_init(&s->stats.service);
  pp_hist_window_init(&s->stats.ttfb);
  pp_hist_window_init(&s->stats.total);
  pp_hist_window_init(&s->stats.body_wait);
  pp_hist_init(&s->stats.queue_last);
  pp_hist_init(&s->stats.service_last);
  pp_hist_init(&s->stats.ttfb_last);
  signal(SIGPIPE, SIG_IGN);

  if (access(cfg->app, R_OK) != 0) {
    LOG_ERR(s, "-app %s: %s", cfg->app, strerror(errno));
    return 2;
  }
  if (find_gem_dir(s, argv0) < 0) {
    LOG_ERR(s, "cannot find the puma-plus gem (exe/puma-plus-shepherd): pass -gem-dir DIR or set "
               "PUMA_PLUS_GEM_DIR");
    return 2;
  }
  if (pp_controller_init(s) < 0) return 2;

  /* Runtime directory and the worker socket. */
  if (cfg->runtime_dir) {
    snprintf(s->runtime_dir, sizeof s->runtime_dir, "%s", cfg->runtime_dir);
    mkdir(s->runtime_dir, 0700);
  } else {
    const char *base = getenv("XDG_RUNTIME_DIR");
    if (!base || access(base, W_OK) != 0) base = "/tmp";
    snprintf(s->runtime_dir, sizeof s->runtime_dir, "%s/puma-plus.XXXXXX", base);
    if (!mkdtemp(s->runtime_dir)) {
      LOG_ERR(s, "mkdtemp %s: %s", s->runtime_dir, strerror(errno));
      return 1;
    }
    s->own_runtime_dir = 1;
  }
  if (snprintf(s->socket_path, sizeof s->socket_path, "%s/workers.sock", s->runtime_dir) >=
      (int)sizeof s->socket_path) {
    LOG_ERR(s, "-runtime-dir %s: path too long", s->runtime_dir);
    return 1;
  }
  unlink(s->socket_path);
  uv_pipe_init(s->loop, &s->worker_listener, 0);
  s->worker_listener.data = s;
  int rc = uv_pipe_bind(&s->worker_listener, s->socket_path);
  if (rc == 0) rc = uv_listen((uv_stream_t *)&s->worker_listener, 1024, on_worker_connection);
  if (rc < 0) {
    LOG_ERR(s, "worker socket %s: %s", s->socket_path, uv_strerror(rc));
    cleanup_files(s);
    return 1;
  }
  s->worker_listener_open = 1;

  for (int i = 0; i < cfg->listen_count; i++) {
    listener *ls = &s->listeners[s->listener_count++];
    ls->addr = cfg->listen[i];
    ls->kind = LISTEN_HTTP;
    if (open_listener(s, ls) < 0) {
      cleanup_files(s);
      return 1;
    }
  }
  if (cfg->control_enabled) {
    listener *ls = &s->listeners[s->listener_count++];
    ls->addr = cfg->control;
    ls->kind = LISTEN_CONTROL;
    if (open_listener(s, ls) < 0) {
      cleanup_files(s);
      return 1;
    }
  }

  uv_signal_init(s->loop, &s->sig_term);
  uv_signal_init(s->loop, &s->sig_int);
  uv_signal_init(s->loop, &s->sig_quit);
  uv_signal_init(s->loop, &s->sig_hup);
  s->sig_term.data = s->sig_int.data = s->sig_quit.data = s->sig_hup.data = s;
  uv_signal_start(&s->sig_term, on_signal, SIGTERM);
  uv_signal_start(&s->sig_int, on_signal, SIGINT);
  uv_signal_start(&s->sig_quit, on_signal, SIGQUIT);
  uv_signal_start(&s->sig_hup, on_signal, SIGHUP);
  uv_timer_init(s->loop, &s->tick_timer);
  uv_timer_init(s->loop, &s->drain_timer);
  uv_timer_init(s->loop, &s->respawn_timer);
  s->tick_timer.data = s->drain_timer.data = s->respawn_timer.data = s;
  uint64_t tick_ms = cfg->tick_ns / 1000000 ? cfg->tick_ns / 1000000 : 1;
  uv_timer_start(&s->tick_timer, on_tick, tick_ms, tick_ms);

  if (spawn_shepherd(s) < 0) {
    cleanup_files(s);
    return 1;
  }
  uv_run(s->loop, UV_RUN_DEFAULT);
  finish_exit(s, s->exit_code);
  return s->exit_code;
}
