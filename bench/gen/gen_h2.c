/* The h2 session of the h1/h2 generator, over gen_tcp.c's connections: an nghttp2 client session
 * per TCP (or TLS) connection. Streams are multiplexed on the pool's connections, all opened at the
 * start. A connection takes no stream before the server's SETTINGS arrived, and at most the
 * server's SETTINGS_MAX_CONCURRENT_STREAMS (capped at PB_H2_STREAM_CAP) at once; arrivals beyond
 * that wait in the core's FIFO. Cleartext h2 is prior knowledge (h2c): the server's first frame
 * must be SETTINGS, or the connection fails with PB_ERR_H2_NO_SETTINGS. nghttp2 callbacks only
 * record what happened; the engine is driven again only after nghttp2_session_mem_recv has
 * returned. The transport reaches this file only through gen_h2_session_ops (the core hands it over
 * in g->session); this file calls the transport's gen_tcp_fail/queue/flush below it. */
#include "bench/gen/gen_int.h"
#include "bench/gen/gen_tcp_int.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nghttp2/nghttp2.h>
#include <uv.h>

static int h2_on_header(nghttp2_session *s, const nghttp2_frame *frame, const uint8_t *name,
                        size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                        void *user_data) {
  (void)flags;
  conn *c = user_data;
  if (frame->hd.type != NGHTTP2_HEADERS || namelen != 7 || memcmp(name, ":status", 7) != 0)
    return 0;
  uintptr_t tag = (uintptr_t)nghttp2_session_get_stream_user_data(s, frame->hd.stream_id);
  if (!tag) return 0;
  unsigned status = 0;
  for (size_t k = 0; k < valuelen && k < 3; k++)
    status = status * 10 + (unsigned)(value[k] - '0');
  if (status >= 200) c->g->results[tag - 1].status = (uint16_t)status; /* scratch until close */
  return 0;
}

static int h2_on_frame_recv(nghttp2_session *s, const nghttp2_frame *frame, void *user_data) {
  (void)s;
  conn *c = user_data;
  gen *g = c->g;
  if (frame->hd.type == NGHTTP2_SETTINGS && !(frame->hd.flags & NGHTTP2_FLAG_ACK)) {
    c->h2_settings_seen = true;
    c->h2_settings_new = true;
  } else if (frame->hd.type == NGHTTP2_GOAWAY) {
    c->goaway = true;
    if (g->counters) g->counters->goaways++;
    char code[64];
    snprintf(code, sizeof code, "%s", nghttp2_http2_strerror(frame->goaway.error_code));
    gen_note_error(g, "the server sent GOAWAY (%s)%s", code,
                   c->h2_settings_seen ? "" : " before SETTINGS: it does not accept h2 here");
  }
  return 0;
}

static int h2_on_stream_close(nghttp2_session *s, int32_t stream_id, uint32_t error_code,
                              void *user_data) {
  conn *c = user_data;
  gen *g = c->g;
  uintptr_t tag = (uintptr_t)nghttp2_session_get_stream_user_data(s, stream_id);
  if (!tag) return 0; /* cancelled by us (timeout) and already accounted for */
  uint32_t i = (uint32_t)(tag - 1);
  gen_stream_remove(c, i);
  g->req_slot[i] = UINT32_MAX;
  g->in_flight--;
  uint16_t status = g->results[i].status;
  g->results[i].status = 0;
  if (error_code == NGHTTP2_NO_ERROR && status >= 200)
    gen_finish_request(g, i, gen_outcome_of_status(status), status, 0);
  else
    gen_finish_request(g, i, PB_CONN_ERROR, 0,
                       error_code == NGHTTP2_REFUSED_STREAM || c->goaway ? PB_ERR_H2_GOAWAY
                                                                         : PB_ERR_H2_RESET);
  return 0;
}

/* Sends what the session has to send, then writes. */
static void h2_pump(conn *c) {
  if (!gen_conn_alive(c) || !c->h2) return;
  while (c->out.len < (1u << 20)) { /* a soft cap; on_write pumps again */
    const uint8_t *data;
    ssize_t n = nghttp2_session_mem_send(c->h2, &data);
    if (n < 0) {
      gen_note_error(c->g, "nghttp2: %s%s", nghttp2_strerror((int)n), "");
      gen_tcp_fail(c, PB_CONN_ERROR, PB_ERR_H2_PROTOCOL);
      return;
    }
    if (n == 0) break;
    if (gen_tcp_queue(c, data, (size_t)n) < 0) {
      gen_tcp_fail(c, PB_CONN_ERROR, c->ssl ? PB_ERR_TLS : UV_ENOMEM);
      return;
    }
  }
  gen_tcp_flush(c);
}

/* h2 upload: the next piece of the body of the stream's request, from the shared buffer. */
static ssize_t h2_body_read(nghttp2_session *s, int32_t stream_id, uint8_t *buf, size_t length,
                            uint32_t *data_flags, nghttp2_data_source *source, void *user_data) {
  (void)source;
  conn *c = user_data;
  gen *g = c->g;
  uintptr_t tag = (uintptr_t)nghttp2_session_get_stream_user_data(s, stream_id);
  if (!tag) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* cancelled: reset the stream */
  uint32_t i = (uint32_t)(tag - 1);
  uint32_t total = gen_kind_body(g, g->results[i].kind), off = g->req_body_off[i];
  size_t n = total - off;
  if (n > length) n = length;
  if (n > BODY_PIECE) n = BODY_PIECE;
  memcpy(buf, g->body, n);
  g->req_body_off[i] = off + (uint32_t)n;
  if (g->req_body_off[i] == total) *data_flags |= NGHTTP2_DATA_FLAG_EOF;
  return (ssize_t)n;
}

/* Opens a stream for arrival `i` on `c` (which has room). */
static void h2_submit(conn *c, uint32_t i) {
  gen *g = c->g;
  pb_result *r = &g->results[i];
  uint32_t kind = g->sched->arrivals[i].kind;
  const char *path = g->sched->paths[kind];
  uint32_t body = gen_kind_body(g, kind);
  char clen[16];
  snprintf(clen, sizeof clen, "%u", body);
#define NV(n, v) {(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), NGHTTP2_NV_FLAG_NONE}
  nghttp2_nv nva[] = {NV(":method", body ? "POST" : "GET"),
                      NV(":scheme", c->ssl ? "https" : "http"),
                      NV(":authority", g->authority),
                      NV(":path", path),
                      NV("user-agent", "pp-bench"),
                      NV("content-length", clen),
                      NV("content-type", "application/octet-stream")};
#undef NV
  nghttp2_data_provider provider = {.read_callback = h2_body_read};
  r->reused = c->served > 0;
  r->conn_id = c->id;
  r->sent_ns = gen_now_rel(g);
  if (body) g->req_body_off[i] = 0;
  int32_t sid = nghttp2_submit_request(c->h2, NULL, nva, body ? 7 : 5, body ? &provider : NULL,
                                       (void *)(uintptr_t)(i + 1));
  if (sid < 0) {
    gen_finish_request(g, i, PB_CONN_ERROR, 0, PB_ERR_H2_PROTOCOL);
    return;
  }
  c->served++;
  c->streams[c->n_streams++] = i;
  g->req_slot[i] = (uint32_t)(c - g->conns);
  g->req_stream[i] = sid;
  g->in_flight++;
  if (g->counters && c->n_streams > g->counters->h2_peak_streams)
    g->counters->h2_peak_streams = c->n_streams;
}

static bool h2_has_room(const conn *c) {
  return c->state == C_OPEN && c->h2 && !c->goaway && c->n_streams < c->h2_cap;
}

/* Moves waiting arrivals onto `c` while it has room. */
static void h2_fill(conn *c) {
  gen *g = c->g;
  uint32_t i;
  while (h2_has_room(c) && gen_pending_pop(g, &i)) {
    if (gen_now_rel(g) >= g->results[i].intended_ns + g->timeout_ns) {
      gen_finish_request(g, i, PB_TIMEOUT, 0, 0);
      continue;
    }
    h2_submit(c, i);
  }
}

/* The least loaded usable h2 connection, NULL when all are full or not ready. */
static conn *h2_pick(gen *g) {
  conn *best = NULL;
  for (uint32_t k = 0; k < g->conn_high; k++) {
    conn *c = &g->conns[(g->rr + k) % g->conn_high];
    if (h2_has_room(c) && (!best || c->n_streams < best->n_streams)) best = c;
  }
  if (best) g->rr = (uint32_t)(best - g->conns) + 1;
  return best;
}

/* The transport is up (TCP, and TLS if any): start the h2 session with our SETTINGS. */
static void h2_start(conn *c) {
  gen *g = c->g;
  if (nghttp2_session_client_new(&c->h2, g->h2_callbacks, c) != 0) {
    c->h2 = NULL;
    gen_conn_fail_setup(c, UV_ENOMEM);
    return;
  }
  nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
                                 {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1u << 20}};
  nghttp2_submit_settings(c->h2, NGHTTP2_FLAG_NONE, iv, sizeof iv / sizeof iv[0]);
  h2_pump(c);
}

/* After the engine consumed input: become usable on the server's SETTINGS, take waiting
 * arrivals, send, and close a connection that is done (GOAWAY drained, or the session ended). */
static void h2_after_input(conn *c) {
  gen *g = c->g;
  if (!gen_conn_alive(c)) return;
  if (c->state == C_CONNECTING && c->h2_settings_seen) {
    uint32_t max =
        nghttp2_session_get_remote_settings(c->h2, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
    if (g->counters &&
        (g->counters->h2_server_max_streams == 0 || max < g->counters->h2_server_max_streams))
      g->counters->h2_server_max_streams = max;
    c->h2_cap = max < PB_H2_STREAM_CAP ? max : PB_H2_STREAM_CAP;
    c->h2_alloc = c->h2_cap;
    c->streams = calloc(c->h2_alloc ? c->h2_alloc : 1, sizeof *c->streams);
    if (!c->streams) {
      gen_conn_fail_setup(c, UV_ENOMEM);
      return;
    }
    g->connecting--;
    c->state = C_OPEN;
    c->h2_settings_new = false;
  } else if (c->state == C_OPEN && c->h2_settings_new) {
    /* The server changed its limit: follow it down, and up as far as the setup allocation. */
    uint32_t max =
        nghttp2_session_get_remote_settings(c->h2, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
    c->h2_cap = max < c->h2_alloc ? max : c->h2_alloc;
    c->h2_settings_new = false;
  }
  h2_fill(c);
  h2_pump(c);
  if (!gen_conn_alive(c)) return;
  if ((c->goaway && c->n_streams == 0) ||
      (!nghttp2_session_want_read(c->h2) && !nghttp2_session_want_write(c->h2))) {
    if (c->state == C_CONNECTING) {
      gen_conn_fail_setup(c, c->goaway ? PB_ERR_H2_GOAWAY : PB_ERR_H2_NO_SETTINGS);
      return;
    }
    gen_conn_close(c);
  }
}

static void h2_input(conn *c, const char *p, size_t n) {
  gen *g = c->g;
  /* Before nghttp2 sees anything, make sure the server speaks h2: its first frame must be
   * SETTINGS (type 0x4, the fourth byte). An HTTP/1 server answers "HTTP/1.1 400 ...". */
  while (c->preface_seen < 4 && n > 0) {
    size_t take = 4 - c->preface_seen < n ? 4 - c->preface_seen : n;
    memcpy(c->preface + c->preface_seen, p, take);
    c->preface_seen += (uint32_t)take;
    if (c->preface_seen == 4) {
      if (memcmp(c->preface, "HTTP", 4) == 0) {
        gen_note_error(g,
                       "the server answered the h2 preface in HTTP/1.x: it does not speak h2%s%s",
                       c->ssl ? "" : " with prior knowledge (h2c)", "");
        gen_conn_fail_setup(c, PB_ERR_H2_NO_SETTINGS);
        return;
      }
      if (c->preface[3] != NGHTTP2_SETTINGS) {
        gen_note_error(g,
                       "the server's first bytes are not an h2 SETTINGS frame: it does not speak "
                       "h2%s%s",
                       c->ssl ? "" : " with prior knowledge (h2c)", "");
        gen_conn_fail_setup(c, PB_ERR_H2_NO_SETTINGS);
        return;
      }
    }
    break; /* the bytes themselves are fed to nghttp2 below */
  }
  ssize_t used = nghttp2_session_mem_recv(c->h2, (const uint8_t *)p, n);
  if (used < 0) {
    gen_note_error(g, "nghttp2 rejected the server's bytes: %s%s", nghttp2_strerror((int)used), "");
    if (c->state == C_CONNECTING)
      gen_conn_fail_setup(c, PB_ERR_H2_NO_SETTINGS);
    else
      gen_tcp_fail(c, PB_CONN_ERROR, PB_ERR_H2_PROTOCOL);
    return;
  }
  h2_after_input(c);
}

static void h2_eof(conn *c, int err) {
  if (c->state == C_CONNECTING) {
    gen_note_error(c->g,
                   "the server closed the connection before sending h2 SETTINGS (%s): it does "
                   "not speak h2%s",
                   uv_err_name(err), c->ssl ? "" : " with prior knowledge (h2c)");
    gen_conn_fail_setup(c, PB_ERR_H2_NO_SETTINGS);
    return;
  }
  gen_tcp_fail(c, PB_CONN_ERROR, c->goaway ? PB_ERR_H2_GOAWAY : err);
}

static int h2_init(gen *g) {
  if (nghttp2_session_callbacks_new(&g->h2_callbacks) != 0) return -1;
  nghttp2_session_callbacks_set_on_header_callback(g->h2_callbacks, h2_on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(g->h2_callbacks, h2_on_frame_recv);
  nghttp2_session_callbacks_set_on_stream_close_callback(g->h2_callbacks, h2_on_stream_close);
  return 0;
}

static void h2_dispose(gen *g) {
  if (g->h2_callbacks) nghttp2_session_callbacks_del(g->h2_callbacks);
  g->h2_callbacks = NULL;
}

/* RST_STREAM(CANCEL); the stream's user data is cleared so its close is not counted twice. */
static void h2_cancel(conn *c, int64_t stream_id) {
  nghttp2_session_set_stream_user_data(c->h2, (int32_t)stream_id, NULL);
  nghttp2_submit_rst_stream(c->h2, NGHTTP2_FLAG_NONE, (int32_t)stream_id, NGHTTP2_CANCEL);
}

static void h2_release(conn *c) {
  if (c->h2) nghttp2_session_del(c->h2);
  c->h2 = NULL;
}

const struct gen_tcp_session_ops gen_h2_session_ops = {
    .init = h2_init,
    .dispose = h2_dispose,
    .start = h2_start,
    .input = h2_input,
    .eof = h2_eof,
    .pump = h2_pump,
    .pick = h2_pick,
    .submit = h2_submit,
    .fill = h2_fill,
    .cancel = h2_cancel,
    .release = h2_release,
};
