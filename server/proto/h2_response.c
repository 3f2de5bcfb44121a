/* The HTTP/2 session's response side (see h2.h): the data source that frames a stream's
 * response buffer, and pp_h2_respond / send_data / send_end / consume / reset / goaway. */
#include <stdio.h>
#include <string.h>

#include "server/proto/fields.h"
#include "server/proto/h2_int.h"

/* ---- the data source: the stream's response buffer ---- */

ssize_t pp_h2__read_response(nghttp2_session *session, int32_t stream_id, uint8_t *buf,
                             size_t length, uint32_t *data_flags, nghttp2_data_source *source,
                             void *user_data) {
  (void)session, (void)stream_id, (void)user_data;
  pp_h2_stream *s = source->ptr;
  size_t avail = s->resp.len - s->resp_off;
  if (avail == 0) {
    if (s->ended) {
      *data_flags |= NGHTTP2_DATA_FLAG_EOF;
      return 0;
    }
    s->deferred = 1;
    return NGHTTP2_ERR_DEFERRED;
  }
  size_t n = avail < length ? avail : length;
  memcpy(buf, s->resp.data + s->resp_off, n);
  s->resp_off += n;
  if (s->resp_off == s->resp.len) {
    s->resp.len = s->resp_off = 0; /* keep the capacity for the next chunk */
    if (s->ended) *data_flags |= NGHTTP2_DATA_FLAG_EOF;
  }
  return (ssize_t)n;
}

/* ---- responses ---- */

/* Appends one field to h->scratch / h->nvbuf (offsets now, pointers once scratch is final). */
static void add_field(pp_h2 *h, size_t name_off, size_t name_len, const uint8_t *v, size_t vlen) {
  size_t value_off = pp_fields_value(&h->scratch, v, vlen);
  nghttp2_nv nv = {(uint8_t *)(uintptr_t)name_off, (uint8_t *)(uintptr_t)value_off, name_len,
                   h->scratch.len - value_off, NGHTTP2_NV_FLAG_NONE};
  pp_buf_append(&h->nvbuf, &nv, sizeof nv);
}

static void add_field_cb(void *data, size_t name_off, size_t name_len, const uint8_t *v,
                         size_t vlen) {
  add_field(data, name_off, name_len, v, vlen);
}

int pp_h2_respond(pp_h2 *h, int32_t stream_id, int status, const pp_h2_header *pairs, size_t n,
                  int no_body) {
  pp_h2_stream *s = pp_h2__stream_of(h, stream_id);
  if (!s || !s->owned || s->responded) return PP_H2_ESTREAM;
  if (status < 100 || status > 599 || status == 101) return PP_H2_EINVAL;
  h->scratch.len = h->nvbuf.len = 0;
  char status_text[4] = {(char)('0' + status / 100), (char)('0' + status / 10 % 10),
                         (char)('0' + status % 10), 0};
  pp_buf_append(&h->scratch, ":status", 7);
  add_field(h, 0, 7, (const uint8_t *)status_text, 3);
  pp_fields_from_pairs(&h->scratch, pairs, n, add_field_cb, h);
  nghttp2_nv *nva = (nghttp2_nv *)h->nvbuf.data;
  size_t nvlen = h->nvbuf.len / sizeof(nghttp2_nv);
  for (size_t i = 0; i < nvlen; i++) {
    nva[i].name = h->scratch.data + (uintptr_t)nva[i].name;
    nva[i].value = h->scratch.data + (uintptr_t)nva[i].value;
  }
  int rv;
  if (status < 200) { /* interim: 100, 102, 103 */
    rv = nghttp2_submit_headers(h->session, NGHTTP2_FLAG_NONE, stream_id, NULL, nva, nvlen, NULL);
    return rv < 0 ? PP_H2_ESTREAM : 0;
  }
  if (s->head || status == 204 || status == 304) no_body = 1;
  s->responded = 1;
  s->no_body = no_body != 0;
  if (s->no_body) {
    s->ended = 1;
    s->resp.len = s->resp_off = 0;
  }
  nghttp2_data_provider prd = {.source.ptr = s, .read_callback = pp_h2__read_response};
  rv = nghttp2_submit_response(h->session, stream_id, nva, nvlen, s->no_body ? NULL : &prd);
  if (rv != 0) {
    s->responded = 0;
    return PP_H2_ESTREAM;
  }
  return 0;
}

static void resume(pp_h2 *h, pp_h2_stream *s) {
  if (!s->responded || !s->deferred) return;
  if (h->depth) {
    s->resume = 1;
    pp_h2__owe_work(h);
    return;
  }
  s->deferred = 0;
  nghttp2_session_resume_data(h->session, s->id);
}

int pp_h2_send_data(pp_h2 *h, int32_t stream_id, const uint8_t *data, size_t len) {
  pp_h2_stream *s = pp_h2__stream_of(h, stream_id);
  if (!s || !s->owned || s->ended) {
    /* A body after a no-body head (HEAD, 204, 304) is dropped, as HTTP/1 does. */
    return s && s->owned && s->no_body ? 0 : PP_H2_ESTREAM;
  }
  if (len == 0) return 0;
  pp_buf_append(&s->resp, data, len);
  resume(h, s);
  return 0;
}

int pp_h2_send_end(pp_h2 *h, int32_t stream_id) {
  pp_h2_stream *s = pp_h2__stream_of(h, stream_id);
  if (!s || !s->owned) return PP_H2_ESTREAM;
  if (s->ended) return 0;
  s->ended = 1;
  resume(h, s);
  return 0;
}

size_t pp_h2_stream_pending(pp_h2 *h, int32_t stream_id) {
  pp_h2_stream *s = pp_h2__stream_of(h, stream_id);
  return s ? s->resp.len - s->resp_off : 0;
}

size_t pp_h2_pending_total(pp_h2 *h) {
  size_t total = 0;
  for (pp_h2_stream *s = h->live; s; s = s->next)
    total += s->resp.len - s->resp_off;
  return total;
}

void pp_h2_consume(pp_h2 *h, int32_t stream_id, size_t n) {
  pp_h2_stream *s = pp_h2__stream_of(h, stream_id);
  if (!s || !s->owned) return;
  if (n > s->unconsumed) n = (size_t)s->unconsumed;
  if (n == 0) return;
  s->unconsumed -= n;
  if (h->depth) {
    s->consume_pending += n;
    pp_h2__owe_work(h);
    return;
  }
  nghttp2_session_consume_stream(h->session, stream_id, n);
}

void pp_h2_reset(pp_h2 *h, int32_t stream_id, uint32_t error_code) {
  pp_h2_stream *s = pp_h2__stream_of(h, stream_id);
  if (!s) return;
  s->local_reset = 1;
  nghttp2_submit_rst_stream(h->session, NGHTTP2_FLAG_NONE, stream_id, error_code);
}

void pp_h2_goaway(pp_h2 *h) {
  if (!h->session || h->goaway_sent || h->err) return;
  h->goaway_sent = 1;
  h->goaway_last = nghttp2_session_get_last_proc_stream_id(h->session);
  h->local_goaway = 1;
  nghttp2_submit_goaway(h->session, NGHTTP2_FLAG_NONE, h->goaway_last, NGHTTP2_NO_ERROR, NULL, 0);
}

size_t pp_h2_stream_count(pp_h2 *h) {
  size_t n = 0;
  for (pp_h2_stream *s = h->live; s; s = s->next)
    n++;
  return n;
}
