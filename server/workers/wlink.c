/* The worker link (see wlink.h). Workload: a handful of long-lived connections (workers x
 * threads), each carrying one exchange at a time: a REQUEST out, then RESPONSE_HEAD, any
 * number of RESPONSE_BODY frames and RESPONSE_END back. All frames decoded from one read are
 * handled before the owner flushes once, so a small response costs one client write. */
#include "server/workers/wlink.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/base/alloc.h"
#include "server/base/clock.h"
#include "server/base/log.h"
#include "server/workers/shepherd.h"
#include "server/workers/workers.h"

static void on_worker_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf);
static void slots_reconcile(pp_workers *ws, uint32_t pid);
static void slot_close_now(wconn *w);
static void slots_shape_to_new_worker(pp_workers *ws, pp_worker *wk, wconn *m);

static void on_worker_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  wconn *w = h->data;
  (void)suggested;
  pp_buf_reserve(&w->rbuf, 65536);
  *buf = uv_buf_init((char *)w->rbuf.data + w->rbuf.len, (unsigned)(w->rbuf.cap - w->rbuf.len));
}

void pp_wlink_resume(wconn *w) {
  if (!w->paused || w->closing) return;
  w->paused = 0;
  uv_read_start((uv_stream_t *)&w->pipe, on_worker_alloc, on_worker_read);
}

static void on_wconn_closed(uv_handle_t *h) {
  wconn *w = h->data;
  pp_buf_dispose(&w->rbuf);
  free(w);
}

void pp_wlink_close(wconn *w, const char *reason) {
  pp_workers *ws = w->ws;
  if (w->closing) return;
  w->closing = 1;
  if (reason) LOG(ws, "worker connection (pid %u): closed: %s", w->pid, reason);
  pp_exchange *r = w->req;
  w->req = NULL;
  if (r) {
    r->w = NULL;
    if (r->owner && !r->cancelled) {
      ws->stats->errors_502++;
      r->ops->fail(r, 502, "502 Bad Gateway: the worker running this request died\n");
    } else {
      r->owner = NULL;
      pp_exchange_release(ws->xpool, r);
    }
  }
  if (w->hello && !w->monitor) pp_registry_detach(&ws->reg, &w->slot);
  if (w->slot_closed) slots_reconcile(ws, w->pid);
  w->timed_out_id = 0;
  pp_queue_remove(&ws->wconns, &w->link);
  uv_read_stop((uv_stream_t *)&w->pipe);
  uv_close((uv_handle_t *)&w->pipe, on_wconn_closed);
  if (*ws->draining && ws->hooks->drain_progress) ws->hooks->drain_progress(ws->srv);
}

void pp_wlink_close_pid(pp_workers *ws, uint32_t pid) {
  pp_qnode *n = ws->wconns.head.next;
  while (n != &ws->wconns.head) {
    wconn *wc = PP_CONTAINER_OF(n, wconn, link);
    n = n->next;
    if (wc->hello && wc->pid == pid) pp_wlink_close(wc, "its worker exited");
  }
  if (ws->hooks->worker_gone) ws->hooks->worker_gone(ws->srv, pid);
}

static void on_worker_write(uv_write_t *wr, int status) {
  wchunk *k = (wchunk *)wr;
  wconn *w = k->owner;
  pp_chunk_put(k->net, k);
  /* Backpressure on streamed uploads: the client paused while this worker's write queue was
   * over the limit may be read again. */
  if (status < 0 || w->closing || !w->req) return;
  pp_exchange *r = w->req;
  if (r->owner && r->streaming && !r->body_done &&
      pp_wlink_write_queue(w) <= PP_WORKER_WRITE_HIGH / 2)
    r->ops->body_writable(r);
}

int pp_wlink_send(wconn *w, wchunk *k) {
  k->owner = w;
  return pp_chunk_send(w->ws->net, (uv_stream_t *)&w->pipe, k, on_worker_write);
}

int pp_wlink_writev(wconn *w, uv_write_t *req, uv_buf_t *bufs, unsigned n, uv_write_cb cb) {
  int rc = pp_write_or_queue((uv_stream_t *)&w->pipe, req, bufs, n, cb);
  if (rc < 0) pp_wlink_close(w, "write failed");
  return rc;
}

int pp_wlink_writev_handle(wconn *w, uv_write_t *req, uv_buf_t *bufs, unsigned n,
                           uv_stream_t *handle, uv_write_cb cb) {
  int rc = uv_write2(req, (uv_stream_t *)&w->pipe, bufs, n, handle, cb);
  return rc < 0 ? rc : 1;
}

size_t pp_wlink_write_queue(wconn *w) {
  return uv_stream_get_write_queue_size((uv_stream_t *)&w->pipe);
}

/* One HIJACKED frame on its way (rare: one per hijack, so it is malloc'ed). */
typedef struct hijack_write {
  uv_write_t wr;
  void (*sent)(void *arg, int status);
  void *arg;
  uint8_t frame[];
} hijack_write;

static void on_hijacked_written(uv_write_t *wr, int status) {
  hijack_write *hw = PP_CONTAINER_OF(wr, hijack_write, wr);
  if (hw->sent) hw->sent(hw->arg, status);
  free(hw);
}

int pp_wlink_hijacked(pp_exchange *x, int result, uv_stream_t *client, const uint8_t *buffered,
                      size_t len, void (*sent)(void *arg, int status), void *arg) {
  wconn *w = x->w;
  if (!w || w->closing) return UV_ECANCELED;
  pp_wire_frame f;
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_HIJACKED;
  f.request_id = x->id;
  f.result = (uint8_t)result;
  f.data = buffered;
  f.data_len = len;
  ssize_t size = pp_wire_encoded_size(&f);
  if (size < 0) return UV_EINVAL;
  hijack_write *hw = pp_xmalloc(sizeof *hw + (size_t)size);
  hw->sent = sent;
  hw->arg = arg;
  pp_wire_encode(&f, hw->frame, (size_t)size);
  uv_buf_t b = uv_buf_init((char *)hw->frame, (unsigned)size);
  /* uv_write2 queues behind any frame still unwritten and sends the descriptor with the
   * frame's first bytes (the worker pipe is an IPC pipe for this reason). */
  int rc = client && result == PP_WIRE_HIJACK_OK
               ? uv_write2(&hw->wr, (uv_stream_t *)&w->pipe, &b, 1, client, on_hijacked_written)
               : uv_write(&hw->wr, (uv_stream_t *)&w->pipe, &b, 1, on_hijacked_written);
  if (rc < 0) {
    free(hw);
    LOG(w->ws, "worker connection (pid %u): HIJACKED not sent: %s", w->pid, uv_strerror(rc));
    pp_wlink_close(w, "write failed");
    return rc;
  }
  return 0;
}

/* HIJACK: allowed once, while the request runs, on a REQUEST flagged hijackable, before any
 * RESPONSE_HEAD. A client already gone is answered at once (GONE); else the owner decides. */
static int on_hijack(wconn *w, pp_exchange *r) {
  if (!r->hijackable || r->head_sent || r->hijack_seen) {
    pp_wlink_close(w, r->hijackable ? "HIJACK after RESPONSE_HEAD or a second HIJACK"
                                    : "HIJACK on a request that was not hijackable");
    return -1;
  }
  r->hijack_seen = 1;
  if (!r->owner || r->cancelled || !r->ops->hijack) {
    int result = r->ops->hijack ? PP_WIRE_HIJACK_GONE : PP_WIRE_HIJACK_REFUSED;
    return pp_wlink_hijacked(r, result, NULL, NULL, 0, NULL, NULL) < 0 ? -1 : 0;
  }
  r->ops->hijack(r);
  return w->closing ? -1 : 0;
}

void pp_wlink_assign(wconn *w, pp_exchange *x) {
  w->req = x;
}

static int on_monitor_hello(wconn *w, const pp_wire_frame *f);

static int on_hello(wconn *w, const pp_wire_frame *f) {
  pp_workers *ws = w->ws;
  if (f->type == PP_WIRE_HEARTBEAT) return on_monitor_hello(w, f);
  if (f->type != PP_WIRE_HELLO) {
    pp_wlink_close(w, "first frame is not HELLO");
    return -1;
  }
  if (f->version != PP_WIRE_VERSION) {
    char why[64];
    snprintf(why, sizeof why, "unsupported protocol version %u", f->version);
    pp_wlink_close(w, why);
    return -1;
  }
  w->hello = 1;
  w->pid = f->pid;
  w->slot.data = w;
  w->slot.ractor = (f->capabilities & PP_WIRE_CAP_RACTOR) != 0;
  pp_worker *wk = pp_registry_find(&ws->reg, f->pid);
  int was_ready = wk && wk->state == PP_WORKER_READY;
  wk =
      pp_registry_attach(&ws->reg, &w->slot, f->pid, f->worker_index, f->thread_index, pp_now_ns());
  if (!wk) {
    pp_wlink_close(w, "worker registry full");
    return -1;
  }
  if (!was_ready && wk->state == PP_WORKER_READY) {
    LOG(ws, "worker %u (pid %u) ready", f->worker_index, f->pid);
    /* the first CPU reading now, so the controller's next tick already has a delta */
    if (!wk->cpu_sampled_ns) pp_worker_sample_cpu(wk, pp_now_ns());
  }
  /* A slot dialled for a target since lowered (SLOTS and SLOT_CLOSE crossed): end it now. */
  if (wk->slots_target && wk->slots > wk->slots_target && wk->state == PP_WORKER_READY) {
    slot_close_now(w);
    return 0;
  }
  ws->hooks->slot_free(ws->srv);
  return 0;
}

/* RESPONSE_END: the slot is free again; the owner completes the response. */
static void on_response_end(wconn *w, pp_exchange *r, const pp_wire_frame *f) {
  pp_workers *ws = w->ws;
  /* The worker closed its copy of a spooled body's file before RESPONSE_END (PROTOCOL.md): the
   * disk it held leaves -max-spool-total now, not when the client has taken the response. */
  pp_exchange_unspool(r);
  uint64_t service = 0;
  if (f->t5_ns > f->t4_ns) service = f->t5_ns - f->t4_ns;
  service = service > f->body_read_ns ? service - f->body_read_ns : 0;
  pp_hist_window_record(&ws->stats->service, service);
  r->service_ns = (int64_t)service; /* for the access log */
  if (w->slot.worker) r->worker = (int32_t)w->slot.worker->index + 1;
  if (f->body_read_ns) pp_hist_window_record(&ws->stats->body_wait, f->body_read_ns);
  if (f->gvl_wait_ns >= 0) ws->stats->gvl_sum_ns += f->gvl_wait_ns, ws->stats->gvl_count++;
  if (f->cpu_ns >= 0) ws->stats->cpu_sum_ns += f->cpu_ns, ws->stats->cpu_count++;
  ws->stats->completions++;
  ws->stats->completions_window++;
  pp_admit_complete(ws->admit, ws->policy, pp_now_ns());
  w->req = NULL;
  r->w = NULL;
  /* Backpressure was against this response's client; the next request may go elsewhere. */
  pp_wlink_resume(w);
  pp_worker *wk = w->slot.worker;
  pp_registry_release(&ws->reg, &w->slot);
  if (w->slot_closing) slot_close_now(w); /* the target was lowered while it ran */
  pp_shepherd_retire_if_drained(ws, wk);
  /* The freed slot gets its next request before this response goes to its client: the
   * worker thread starts on it one client write sooner. */
  ws->hooks->slot_free(ws->srv);
  if (r->owner && !r->cancelled) {
    r->ops->end(r);
  } else {
    r->owner = NULL;
    pp_exchange_release(ws->xpool, r);
  }
  ws->hooks->slot_free(ws->srv);
}

static int monitor_frame(wconn *w, const pp_wire_frame *f);
static int timed_out_frame(wconn *w, const pp_wire_frame *f);

/* WS_DONE: the WebSocket event that ran on w is finished; the slot is free again. */
static void on_ws_done(wconn *w, pp_exchange *r, const pp_wire_frame *f) {
  pp_workers *ws = w->ws;
  r->service_ns = f->t5_ns > f->t4_ns ? (int64_t)(f->t5_ns - f->t4_ns) : 0;
  if (w->slot.worker) r->worker = (int32_t)w->slot.worker->index + 1;
  /* an event is an arrival (dispatch counted it) and a completion, like a request; its
   * service time is not mixed into the requests' */
  ws->stats->completions++;
  ws->stats->completions_window++;
  pp_admit_complete(ws->admit, ws->policy, pp_now_ns());
  w->req = NULL;
  r->w = NULL;
  pp_wlink_resume(w);
  pp_worker *wk = w->slot.worker;
  pp_registry_release(&ws->reg, &w->slot);
  if (w->slot_closing) slot_close_now(w);
  pp_shepherd_retire_if_drained(ws, wk);
  if (r->owner) {
    r->ops->end(r);
  } else {
    pp_exchange_release(ws->xpool, r);
  }
  ws->hooks->slot_free(ws->srv);
}

/* WS_SEND, WS_TAG, WS_BROADCAST, WS_CLOSE_CONN: any connection of a worker, any time. */
static int ws_command(wconn *w, const pp_wire_frame *f) {
  pp_workers *ws = w->ws;
  const char *why = "WebSocket command, but WebSockets are off";
  if (ws->ws_command && (why = ws->ws_command(ws->ws_ctx, f)) == NULL) return 0;
  w->ws->stats->worker_protocol_errors++;
  pp_wlink_close(w, why);
  return -1;
}

static int wconn_frame(wconn *w, const pp_wire_frame *f) {
  if (!w->hello) return on_hello(w, f);
  if (f->type >= PP_WIRE_WS_SEND && f->type <= PP_WIRE_WS_CLOSE_CONN) return ws_command(w, f);
  if (w->monitor) return monitor_frame(w, f);
  if (!w->req && w->timed_out_id && f->request_id == w->timed_out_id &&
      (f->type == PP_WIRE_RESPONSE_HEAD || f->type == PP_WIRE_RESPONSE_BODY ||
       f->type == PP_WIRE_RESPONSE_END || f->type == PP_WIRE_HIJACK ||
       f->type == PP_WIRE_EARLY_HINTS || f->type == PP_WIRE_WS_DONE))
    return timed_out_frame(w, f);
  pp_exchange *r = w->req;
  if (f->type == PP_WIRE_WS_DONE) {
    if (!r || r->id != f->request_id || !r->ws_event) {
      pp_wlink_close(w, "WS_DONE for an event that is not running on this connection");
      return -1;
    }
    on_ws_done(w, r, f);
    return 0;
  }
  if (r && r->ws_event) {
    pp_wlink_close(w, "a response frame while a WebSocket event runs");
    return -1;
  }
  switch (f->type) {
  case PP_WIRE_RESPONSE_HEAD:
  case PP_WIRE_RESPONSE_BODY:
  case PP_WIRE_RESPONSE_END:
  case PP_WIRE_HIJACK:
  case PP_WIRE_EARLY_HINTS:
    if (!r || r->id != f->request_id) {
      pp_wlink_close(w, "response for a request that is not running on this connection");
      return -1;
    }
    break;
  default: {
    char why[64];
    snprintf(why, sizeof why, "unexpected frame %s from a worker", pp_wire_type_name(f->type));
    pp_wlink_close(w, why);
    return -1;
  }
  }
  if (f->type == PP_WIRE_HIJACK) return on_hijack(w, r);
  int live = r->owner && !r->cancelled;
  if (f->type == PP_WIRE_EARLY_HINTS) {
    if (r->head_sent) {
      pp_wlink_close(w, "EARLY_HINTS after RESPONSE_HEAD");
      return -1;
    }
    /* not offered (no REQUEST flag) or nobody to tell: dropped */
    if (live && r->early_hints && r->ops->early_hints) r->ops->early_hints(r, f);
    return 0;
  }
  if (f->type == PP_WIRE_RESPONSE_HEAD) {
    if (r->head_sent) {
      pp_wlink_close(w, "second RESPONSE_HEAD");
      return -1;
    }
    if (live) r->ops->head(r, f);
    r->head_sent = 1;
    return 0;
  }
  if (f->type == PP_WIRE_RESPONSE_BODY) {
    if (!r->head_sent) {
      pp_wlink_close(w, "RESPONSE_BODY before RESPONSE_HEAD");
      return -1;
    }
    if (live) r->ops->body(r, f->data, f->data_len);
    return 0;
  }
  on_response_end(w, r, f);
  return 0;
}

/* Frames past this size that are RESPONSE_BODY are handed up as they arrive (body_piece). */
#define BODY_PIECE_MIN 65536

/* A RESPONSE_BODY frame of the running exchange that is bigger than the read buffer (the app's
 * body is split into frames of up to 4 MiB: /echo of a 4 MiB upload is one) is handed up in the
 * pieces that have arrived instead of being buffered whole. The owner's backpressure (flush,
 * after the loop) can then pause this worker in the middle of the frame, and the rest waits in
 * the worker's socket instead of in a 4 MiB read buffer here plus a 4 MiB copy per response
 * in the owner. Returns 0 when buf does not start such a frame (the normal path decodes it
 * once complete); else 1 with *used the bytes handed up (0: none arrived yet), their place
 * taken by the header of the rest, rewritten in place just before its first byte. */
static int body_piece(wconn *w, uint8_t *buf, size_t len, size_t *used) {
  pp_exchange *r = w->req;
  *used = 0;
  if (!r || !r->head_sent || len < PP_WIRE_HEADER_SIZE + 8 || buf[0] != PP_WIRE_RESPONSE_BODY ||
      buf[1] || buf[2] || buf[3])
    return 0;
  uint32_t length = pp_wire_get_u32(buf + 4);
  if (length < 8 || length > PP_WIRE_MAX_PAYLOAD || pp_wire_get_u64(buf + 8) != r->id) return 0;
  size_t have = len - PP_WIRE_HEADER_SIZE - 8, rest = (size_t)length - 8;
  if (have >= rest) return 0; /* complete after all */
  if (have == 0) return 1;
  if (r->owner && !r->cancelled) r->ops->body(r, buf + PP_WIRE_HEADER_SIZE + 8, have);
  uint8_t *h = buf + have; /* owners copy what they are given: these bytes are free */
  pp_wire_put_header(h, PP_WIRE_RESPONSE_BODY, (uint32_t)(8 + rest - have));
  pp_wire_put_u64(h + PP_WIRE_HEADER_SIZE, r->id);
  *used = have;
  return 1;
}

static void on_worker_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf) {
  wconn *w = st->data;
  (void)buf;
  if (w->closing) return;
  if (nread < 0) {
    pp_wlink_close(w, w->req ? "connection lost with a request in flight" : NULL);
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
      w->ws->stats->worker_protocol_errors++;
      pp_wlink_close(w, why);
      return;
    }
    if (n == 0) {
      size_t used;
      if (need > BODY_PIECE_MIN && body_piece(w, w->rbuf.data + pos, w->rbuf.len - pos, &used)) {
        if (w->closing) return;
        if (used) {
          pos += used;
          continue;
        }
        break; /* its next bytes go to the read buffer as it is */
      }
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
  /* Flush what this read produced for the running exchange's client; stop reading this
   * worker while that client has too much unwritten (backpressure). */
  pp_exchange *r = w->req;
  if (r && r->owner && !r->cancelled) {
    size_t unwritten = r->ops->flush(r);
    if (unwritten > PP_CLIENT_WRITE_HIGH && !w->paused) {
      w->paused = 1;
      uv_read_stop((uv_stream_t *)&w->pipe);
    }
  }
}

static void on_worker_connection(uv_stream_t *ls, int status) {
  pp_workers *ws = ls->data;
  if (status < 0) return;
  wconn *w = pp_xmalloc(sizeof *w);
  memset(w, 0, sizeof *w);
  w->ws = ws;
  pp_wire_decoder_init(&w->dec);
  pp_buf_init(&w->rbuf);
  uv_pipe_init(ws->loop, &w->pipe, 1); /* IPC: full hijack sends descriptors (uv_write2) */
  w->pipe.data = w;
  if (uv_accept(ls, (uv_stream_t *)&w->pipe) < 0) {
    uv_close((uv_handle_t *)&w->pipe, on_wconn_closed);
    return;
  }
  pp_queue_push(&ws->wconns, &w->link);
  uv_read_start((uv_stream_t *)&w->pipe, on_worker_alloc, on_worker_read);
}

int pp_wlink_listen(pp_workers *ws, const char *path) {
  ws->close_worker_conns = pp_wlink_close_pid; /* the shepherd's exit reports (workers.h) */
  unlink(path);
  uv_pipe_init(ws->loop, &ws->worker_listener, 0);
  ws->worker_listener.data = ws;
  int rc = uv_pipe_bind(&ws->worker_listener, path);
  if (rc == 0) rc = uv_listen((uv_stream_t *)&ws->worker_listener, 1024, on_worker_connection);
  return rc;
}

/* ---------------------------------------------------------------- run-time slots
 *
 * docs/PROTOCOL.md "SLOTS, SLOT_CLOSE". The server owns the choice of which slots end: only
 * it knows which are idle, so a REQUEST never crosses a closing slot. */

static wconn *monitor_of(pp_workers *ws, uint32_t pid);
static void send_small(wconn *w, const pp_wire_frame *f);

uint32_t pp_wlink_slots_target(const pp_workers *ws, const pp_worker *wk) {
  return wk->slots_target ? wk->slots_target : pp_config_slots_initial(ws->cfg);
}

/* SLOT_CLOSE on idle slot connection w: no longer capacity; the worker's EOF follows. */
static void slot_close_now(wconn *w) {
  pp_workers *ws = w->ws;
  pp_wire_frame f;
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_SLOT_CLOSE;
  f.thread_index = w->slot.thread_index;
  w->slot_closing = 0;
  w->slot_closed = 1;
  pp_registry_detach(&ws->reg, &w->slot);
  send_small(w, &f);
  ws->stats->slots_closed++;
}

static uint32_t slots_clamp(const pp_config *c, uint32_t count) {
  if (count < c->min_threads) count = c->min_threads;
  if (count > c->max_slots) count = c->max_slots;
  return count;
}

static void send_slots(wconn *m, uint32_t count) {
  pp_wire_frame f;
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_SLOTS;
  f.count = count;
  send_small(m, &f);
}

/* A closed slot's EOF: if the worker now has fewer slots than its target (a SLOTS that raised
 * it was read before the SLOT_CLOSEs that lowered it), tell it the target again. */
static void slots_reconcile(pp_workers *ws, uint32_t pid) {
  pp_worker *wk = pp_registry_find(&ws->reg, pid);
  if (!wk || !wk->slots_target || wk->state != PP_WORKER_READY || *ws->draining || *ws->stopping)
    return;
  /* Slots dialled but not yet said HELLO are not counted here; SLOTS is idempotent (the worker
   * dials target - live), so asking again is harmless. */
  if (wk->slots >= wk->slots_target) return;
  wconn *m = monitor_of(ws, pid);
  if (m) send_slots(m, wk->slots_target);
}

int pp_wlink_set_slots(pp_workers *ws, pp_worker *wk, uint32_t count, const char **why) {
  const pp_config *c = ws->cfg;
  if (*ws->draining || *ws->stopping) {
    *why = "the server is draining";
    return -1;
  }
  if (!wk || wk->state != PP_WORKER_READY) {
    *why = "the worker is not serving";
    return -1;
  }
  wconn *m = monitor_of(ws, wk->pid);
  if (!m) {
    *why = "the worker has no monitor connection";
    return -1;
  }
  count = slots_clamp(c, count);
  uint32_t before = pp_wlink_slots_target(ws, wk);
  wk->slots_target = count;
  /* The slots that stay: connected, not closed and not about to be. A slot marked to close
   * after its request is kept instead when the target went up again. */
  uint32_t keep = 0;
  for (pp_qnode *n = ws->wconns.head.next; n != &ws->wconns.head; n = n->next) {
    wconn *w = PP_CONTAINER_OF(n, wconn, link);
    if (w->closing || w->monitor || !w->hello || w->slot_closed || w->pid != wk->pid) continue;
    if (w->slot_closing && keep < count) w->slot_closing = 0;
    if (!w->slot_closing) keep++;
  }
  send_slots(m, count);
  if (keep > count) {
    uint32_t excess = keep - count;
    /* Idle slots first (they end now), then busy ones after their request. */
    for (int pass = 0; pass < 2 && excess; pass++) {
      pp_qnode *n = ws->wconns.head.next;
      while (n != &ws->wconns.head && excess) {
        wconn *w = PP_CONTAINER_OF(n, wconn, link);
        n = n->next;
        if (w->closing || w->monitor || !w->hello || w->slot_closed || w->slot_closing ||
            w->pid != wk->pid)
          continue;
        if (pass == 0 && !w->slot.busy) {
          slot_close_now(w);
          excess--;
        } else if (pass == 1) {
          w->slot_closing = 1;
          excess--;
        }
      }
    }
  }
  if (count != before)
    LOG(ws, "worker %u (pid %u): slots %u -> %u (%u connected)", wk->index, wk->pid, before, count,
        wk->slots);
  ws->hooks->slot_free(ws->srv);
  return (int)count;
}

uint32_t pp_wlink_set_slots_all(pp_workers *ws, uint32_t count) {
  count = slots_clamp(ws->cfg, count);
  ws->slots_shape = count;
  for (uint32_t i = 0; i < ws->reg.high; i++) {
    pp_worker *wk = &ws->reg.workers[i];
    const char *why;
    if (wk->state == PP_WORKER_READY) pp_wlink_set_slots(ws, wk, count, &why);
  }
  return count;
}

/* A worker's monitor connection said HEARTBEAT: if a shape was set for all workers, this one
 * (forked or activated after it) is told too. */
static void slots_shape_to_new_worker(pp_workers *ws, pp_worker *wk, wconn *m) {
  if (!ws->slots_shape || wk->slots_target == ws->slots_shape) return;
  const char *why;
  if (wk->state == PP_WORKER_READY) {
    pp_wlink_set_slots(ws, wk, ws->slots_shape, &why);
  } else { /* no slot connected yet: those above the target are closed as they say HELLO */
    wk->slots_target = ws->slots_shape;
    send_slots(m, ws->slots_shape);
  }
}

/* ---------------------------------------------------------------- liveness and timeouts
 *
 * Each worker process dials one monitor connection (first frame HEARTBEAT, docs/PROTOCOL.md
 * "Monitor connection"). It is never a slot: it carries the worker's heartbeats in and the
 * server's TIMEOUT interrupts out. One watch timer checks, a few times per deadline, every
 * running request against -request-timeout (measured from T3, its dispatch), every timed-out
 * request against -worker-kill-grace, and every worker's last heartbeat against
 * -worker-timeout. Connections are workers x threads (hundreds at most), so a linear pass is
 * cheaper than a timer per request and costs nothing on the request path. */

static wconn *monitor_of(pp_workers *ws, uint32_t pid) {
  for (pp_qnode *n = ws->wconns.head.next; n != &ws->wconns.head; n = n->next) {
    wconn *wc = PP_CONTAINER_OF(n, wconn, link);
    if (wc->monitor && !wc->closing && wc->pid == pid) return wc;
  }
  return NULL;
}

/* A small frame on w (HEARTBEAT_INTERVAL, TIMEOUT, HIJACKED GONE) in a pooled chunk. */
static void send_small(wconn *w, const pp_wire_frame *f) {
  wchunk *k = pp_chunk_get(w->ws->net, 0);
  k->len = (size_t)pp_wire_encode(f, k->data, k->cap);
  pp_wlink_send(w, k);
}

/* The heartbeat period the worker is told: a quarter of the timeout, within 100 ms .. 5 s
 * (puma checks in every 5 s); with the timeout off, 5 s (its heartbeats then only show in
 * /stats). */
static uint32_t heartbeat_interval_ms(const pp_workers *ws) {
  uint64_t t = ws->cfg->worker_timeout_ns / 4000000;
  if (!ws->cfg->worker_timeout_ns || t > 5000) t = 5000;
  if (t < 100) t = 100;
  return (uint32_t)t;
}

static int on_monitor_hello(wconn *w, const pp_wire_frame *f) {
  pp_workers *ws = w->ws;
  w->hello = 1;
  w->monitor = 1;
  w->pid = f->pid;
  pp_worker *wk = pp_registry_add(&ws->reg, f->pid, f->worker_index, pp_now_ns());
  if (!wk) {
    pp_wlink_close(w, "worker registry full");
    return -1;
  }
  wk->heartbeat_ns = pp_now_ns();
  wk->heap_live_slots = f->heap_live_slots;
  pp_wire_frame out;
  memset(&out, 0, sizeof out);
  out.type = PP_WIRE_HEARTBEAT_INTERVAL;
  out.interval_ms = heartbeat_interval_ms(ws);
  out.monitor_flags = ws->cfg->request_timeout_ns ? PP_WIRE_MONITOR_REQUEST_TIMEOUTS : 0;
  send_small(w, &out);
  slots_shape_to_new_worker(ws, wk, w);
  return 0;
}

static int monitor_frame(wconn *w, const pp_wire_frame *f) {
  pp_workers *ws = w->ws;
  if (f->type != PP_WIRE_HEARTBEAT || f->pid != w->pid) {
    char why[96];
    snprintf(why, sizeof why, "unexpected frame %s on a monitor connection",
             pp_wire_type_name(f->type));
    pp_wlink_close(w, why);
    return -1;
  }
  pp_worker *wk = pp_registry_find(&ws->reg, w->pid);
  if (wk) wk->heartbeat_ns = pp_now_ns(), wk->heap_live_slots = f->heap_live_slots;
  return 0;
}

/* Frames of a request the server already answered because it timed out: discarded; its
 * RESPONSE_END frees the slot (the thread was interrupted or finished). */
static int timed_out_frame(wconn *w, const pp_wire_frame *f) {
  pp_workers *ws = w->ws;
  if (f->type == PP_WIRE_HIJACK) { /* the client is gone as far as the app is concerned */
    pp_wire_frame out;
    memset(&out, 0, sizeof out);
    out.type = PP_WIRE_HIJACKED;
    out.request_id = f->request_id;
    out.result = PP_WIRE_HIJACK_GONE;
    send_small(w, &out);
    return 0;
  }
  if (f->type != PP_WIRE_RESPONSE_END && f->type != PP_WIRE_WS_DONE) return 0;
  LOG(ws, "worker %u (pid %u): the thread of timed-out request %" PRIu64 " is free again",
      w->slot.worker ? w->slot.worker->index : 0, w->pid, w->timed_out_id);
  w->timed_out_id = 0;
  pp_admit_complete(ws->admit, ws->policy, pp_now_ns());
  pp_worker *wk = w->slot.worker;
  pp_registry_release(&ws->reg, &w->slot);
  if (w->slot_closing) slot_close_now(w);
  pp_shepherd_retire_if_drained(ws, wk);
  ws->hooks->slot_free(ws->srv);
  return 0;
}

/* x ran past -request-timeout on w: the client gets 504 (or, after the head, a cut
 * response), the worker gets TIMEOUT on its monitor connection, and the slot stays busy until
 * the thread lets go (RESPONSE_END) or the grace ends. */
static void request_timed_out(wconn *w, int64_t now) {
  pp_workers *ws = w->ws;
  pp_exchange *r = w->req;
  ws->stats->request_timeouts++;
  LOG_ERR(ws,
          "request %" PRIu64 " ran past -request-timeout (%.0f ms on worker pid %u thread %u): "
          "%s, interrupting it",
          r->id, (double)(now - r->t3) / 1e6, w->pid, w->slot.thread_index,
          r->head_sent ? "response cut" : "504");
  w->req = NULL;
  r->w = NULL;
  w->timed_out_id = r->id;
  w->timed_out_deadline_ns = now + (int64_t)ws->cfg->worker_kill_grace_ns;
  pp_wlink_resume(w); /* nobody reads this response any more */
  wconn *m = monitor_of(ws, w->pid);
  if (m) {
    pp_wire_frame f;
    memset(&f, 0, sizeof f);
    f.type = PP_WIRE_TIMEOUT;
    f.request_id = r->id;
    f.thread_index = w->slot.thread_index;
    send_small(m, &f);
  }
  if (r->owner && !r->cancelled) {
    r->ops->fail(r, 504, "504 Gateway Timeout: the app ran past the request timeout\n");
  } else {
    r->owner = NULL;
    pp_exchange_release(ws->xpool, r);
  }
}

void pp_wlink_kill_worker(pp_workers *ws, pp_worker *wk, const char *why) {
  if (!wk || wk->killed || !wk->pid) return;
  wk->killed = 1;
  uint32_t pid = wk->pid;
  LOG_ERR(ws, "killing worker %u (pid %u): %s", wk->index, pid, why);
  int gone = kill((pid_t)pid, SIGKILL) < 0 && errno == ESRCH;
  /* Its requests are lost now, not when the kernel has closed its sockets: answer them 502
   * and stop dispatching to it. The exit report (EXITED, or the reaper) respawns. */
  pp_qnode *n = ws->wconns.head.next;
  while (n != &ws->wconns.head) {
    wconn *wc = PP_CONTAINER_OF(n, wconn, link);
    n = n->next;
    if (wc->hello && wc->pid == pid) pp_wlink_close(wc, "its worker is being killed");
  }
  if (ws->hooks->worker_gone) ws->hooks->worker_gone(ws->srv, pid);
  /* No such process: it exited and nobody will report it (it never was, or no longer is, a
   * child anyone reaps for us): forget it now, as an EXITED would, so it is replaced. */
  if (gone) {
    LOG_ERR(ws, "worker pid %u was already gone", pid);
    pp_shepherd_worker_gone(ws, pid, -SIGKILL);
  }
}

void pp_wlink_watch(pp_workers *ws, int64_t now) {
  if (*ws->stopping) return;
  uint64_t rt = ws->cfg->request_timeout_ns;
  pp_qnode *n = ws->wconns.head.next;
  while (n != &ws->wconns.head) {
    wconn *w = PP_CONTAINER_OF(n, wconn, link);
    n = n->next;
    if (w->closing || w->monitor) continue;
    /* A fully hijacked request (its socket handed to the app: HIJACK seen, owner let go, not
     * a client that left) belongs to the app now, e.g. a WebSocket: no deadline. */
    pp_exchange *r = w->req;
    int handed_over = r && r->hijack_seen && !r->owner && !r->cancelled;
    if (rt && r && r->t3 && !handed_over && now - r->t3 >= (int64_t)rt) request_timed_out(w, now);
    if (!w->req && w->timed_out_id && now >= w->timed_out_deadline_ns) {
      pp_worker *wk = w->slot.worker ? w->slot.worker : pp_registry_find(&ws->reg, w->pid);
      if (wk && !wk->killed) {
        char why[160];
        snprintf(why, sizeof why,
                 "timed-out request %" PRIu64 " still holds thread %u after -worker-kill-grace",
                 w->timed_out_id, w->slot.thread_index);
        ws->stats->workers_killed_timeout++;
        pp_wlink_kill_worker(ws, wk, why);
        n = ws->wconns.head.next; /* the kill closed connections: walk again */
      }
    }
  }
  /* -worker-boot-timeout: a forked worker none of whose threads said HELLO in time. */
  uint64_t bt = ws->cfg->worker_boot_timeout_ns;
  for (uint32_t i = 0; bt && i < ws->reg.high; i++) {
    pp_worker *wk = &ws->reg.workers[i];
    if (wk->state != PP_WORKER_BOOTING || wk->killed || !wk->forked_ns) continue;
    if (now - wk->forked_ns <= (int64_t)bt) continue;
    char why[128];
    snprintf(why, sizeof why, "not connected %.1f s after its fork (-worker-boot-timeout %.1f s)",
             (double)(now - wk->forked_ns) / 1e9, (double)bt / 1e9);
    pp_wlink_kill_worker(ws, wk, why);
  }
  uint64_t wt = ws->cfg->worker_timeout_ns;
  if (!wt) return;
  for (uint32_t i = 0; i < ws->reg.high; i++) {
    pp_worker *wk = &ws->reg.workers[i];
    if (wk->state == PP_WORKER_FREE || wk->killed || !wk->heartbeat_ns) continue;
    if (now - wk->heartbeat_ns <= (int64_t)wt) continue;
    char why[128];
    snprintf(why, sizeof why, "no heartbeat for %.1f s (-worker-timeout %.1f s)",
             (double)(now - wk->heartbeat_ns) / 1e9, (double)wt / 1e9);
    ws->stats->workers_killed_heartbeat++;
    pp_wlink_kill_worker(ws, wk, why);
  }
}

static void on_watch_timer(uv_timer_t *t) {
  pp_workers *ws = t->data;
  pp_wlink_watch(ws, pp_now_ns());
  pp_shepherd_reap_orphans(ws);
}

void pp_wlink_watch_start(pp_workers *ws) {
  /* A few passes per shortest deadline: a request times out within ~5% of its limit. */
  uint64_t period_ms = 100;
  uint64_t shortest = ws->cfg->request_timeout_ns;
  if (ws->cfg->worker_kill_grace_ns && (!shortest || ws->cfg->worker_kill_grace_ns < shortest))
    shortest = ws->cfg->worker_kill_grace_ns;
  if (shortest && shortest / 20000000 < period_ms) period_ms = shortest / 20000000;
  if (period_ms < 5) period_ms = 5;
  uv_timer_init(ws->loop, &ws->watch_timer);
  ws->watch_timer.data = ws;
  uv_timer_start(&ws->watch_timer, on_watch_timer, period_ms, period_ms);
}
