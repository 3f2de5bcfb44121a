/* The fixed-delay reference server (see nullsrv.h). One thread, one uv loop; connections are
 * malloc'd when accepted (this is test scaffolding, not a hot path). */
#include "bench/nullsrv.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <llhttp.h>
#include <uv.h>

struct pb_nullsrv {
  pb_nullsrv_config cfg;
  uv_loop_t loop;
  uv_tcp_t listener;
  uv_async_t stop_async;
  uv_timer_t stall_timer;
  uv_thread_t thread;
  llhttp_settings_t settings;
  _Atomic uint64_t served;
  uint64_t stall_began, stall_ended;
};

typedef struct sconn {
  uv_tcp_t tcp;
  uv_timer_t delay;
  uv_write_t write_req;
  llhttp_t parser;
  pb_nullsrv *srv;
  char url[256];
  size_t url_len;
  char response[160];
  bool keep_alive;
  bool busy;
  int closing; /* handles still to close */
} sconn;

static void sconn_closed(uv_handle_t *h) {
  sconn *c = h->data;
  if (--c->closing == 0) free(c);
}

static void sconn_close(sconn *c) {
  if (c->closing) return;
  c->closing = 2;
  uv_close((uv_handle_t *)&c->tcp, sconn_closed);
  uv_close((uv_handle_t *)&c->delay, sconn_closed);
}

static void on_written(uv_write_t *w, int status) {
  sconn *c = w->data;
  c->busy = false;
  if (status < 0 || !c->keep_alive) sconn_close(c);
}

static void respond(uv_timer_t *t) {
  sconn *c = t->data;
  unsigned code = 200;
  if (c->url_len > 8 && strncmp(c->url, "/status/", 8) == 0) {
    code = (unsigned)strtoul(c->url + 8, NULL, 10);
    if (code < 100 || code > 599) code = 400;
  }
  if (strcmp(c->url, "/close") == 0) c->keep_alive = false; /* answer, then close */
  int n =
      snprintf(c->response, sizeof c->response, "HTTP/1.1 %u X\r\nContent-Length: 2\r\n%s\r\nok",
               code, c->keep_alive ? "" : "Connection: close\r\n");
  uv_buf_t buf = uv_buf_init(c->response, (unsigned)n);
  c->write_req.data = c;
  atomic_fetch_add(&c->srv->served, 1);
  if (uv_write(&c->write_req, (uv_stream_t *)&c->tcp, &buf, 1, on_written) < 0) sconn_close(c);
}

static int on_url(llhttp_t *p, const char *at, size_t len) {
  sconn *c = p->data;
  if (c->url_len + len < sizeof c->url) {
    memcpy(c->url + c->url_len, at, len);
    c->url_len += len;
    c->url[c->url_len] = 0;
  }
  return 0;
}

static int on_message_begin(llhttp_t *p) {
  sconn *c = p->data;
  c->url_len = 0;
  c->url[0] = 0;
  return 0;
}

static int on_message_complete(llhttp_t *p) {
  sconn *c = p->data;
  c->keep_alive = llhttp_should_keep_alive(p);
  c->busy = true;
  uv_timer_start(&c->delay, respond, c->srv->cfg.delay_ms, 0);
  return 0;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)h;
  buf->base = malloc(suggested);
  buf->len = buf->base ? suggested : 0;
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  sconn *c = s->data;
  if (nread < 0) {
    sconn_close(c);
  } else if (nread > 0 && !c->closing) {
    if (llhttp_execute(&c->parser, buf->base, (size_t)nread) != HPE_OK) sconn_close(c);
  }
  free(buf->base);
}

static void on_connection(uv_stream_t *l, int status) {
  pb_nullsrv *srv = l->data;
  if (status < 0) return;
  sconn *c = calloc(1, sizeof *c);
  if (!c) return;
  c->srv = srv;
  uv_tcp_init(&srv->loop, &c->tcp);
  uv_timer_init(&srv->loop, &c->delay);
  c->tcp.data = c;
  c->delay.data = c;
  if (uv_accept(l, (uv_stream_t *)&c->tcp) < 0) {
    sconn_close(c);
    return;
  }
  uv_tcp_nodelay(&c->tcp, 1);
  llhttp_init(&c->parser, HTTP_REQUEST, &srv->settings);
  c->parser.data = c;
  uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

static void on_stall(uv_timer_t *t) {
  pb_nullsrv *srv = t->data;
  srv->stall_began = uv_hrtime();
  struct timespec ts = {.tv_sec = (time_t)(srv->cfg.stall_ns / 1000000000u),
                        .tv_nsec = (long)(srv->cfg.stall_ns % 1000000000u)};
  while (nanosleep(&ts, &ts) != 0) {}
  srv->stall_ended = uv_hrtime();
}

static void close_walk(uv_handle_t *h, void *arg) {
  if (uv_is_closing(h)) return;
  if (h->data == arg)
    uv_close(h, NULL); /* the server's own handles */
  else
    sconn_close(h->data); /* a connection's tcp or timer: closes both, frees */
}

static void on_stop(uv_async_t *a) {
  pb_nullsrv *srv = a->data;
  /* Connections free their memory in sconn_closed; close them through that path. */
  uv_walk(&srv->loop, close_walk, srv);
}

static void thread_main(void *arg) {
  pb_nullsrv *srv = arg;
  uv_run(&srv->loop, UV_RUN_DEFAULT);
}

int pb_nullsrv_start(const pb_nullsrv_config *cfg, pb_nullsrv **out, int *port_out) {
  pb_nullsrv *srv = calloc(1, sizeof *srv);
  if (!srv) return -1;
  srv->cfg = *cfg;
  if (!srv->cfg.host) srv->cfg.host = "127.0.0.1";
  llhttp_settings_init(&srv->settings);
  srv->settings.on_url = on_url;
  srv->settings.on_message_begin = on_message_begin;
  srv->settings.on_message_complete = on_message_complete;
  uv_loop_init(&srv->loop);
  uv_tcp_init(&srv->loop, &srv->listener);
  srv->listener.data = srv;
  struct sockaddr_in addr;
  int rc = uv_ip4_addr(srv->cfg.host, srv->cfg.port, &addr);
  if (rc == 0) rc = uv_tcp_bind(&srv->listener, (const struct sockaddr *)&addr, 0);
  if (rc == 0) rc = uv_listen((uv_stream_t *)&srv->listener, 1024, on_connection);
  if (rc < 0) {
    fprintf(stderr, "null server: cannot listen on %s:%d: %s\n", srv->cfg.host, srv->cfg.port,
            uv_strerror(rc));
    uv_close((uv_handle_t *)&srv->listener, NULL);
    uv_run(&srv->loop, UV_RUN_DEFAULT);
    uv_loop_close(&srv->loop);
    free(srv);
    return -1;
  }
  struct sockaddr_storage bound;
  int len = sizeof bound;
  uv_tcp_getsockname(&srv->listener, (struct sockaddr *)&bound, &len);
  *port_out = ntohs(((struct sockaddr_in *)&bound)->sin_port);
  uv_async_init(&srv->loop, &srv->stop_async, on_stop);
  srv->stop_async.data = srv;
  uv_timer_init(&srv->loop, &srv->stall_timer);
  srv->stall_timer.data = srv;
  if (srv->cfg.stall_at_ns && srv->cfg.stall_ns) {
    uint64_t now = uv_hrtime();
    uint64_t in_ms = srv->cfg.stall_at_ns > now ? (srv->cfg.stall_at_ns - now) / 1000000u : 0;
    uv_timer_start(&srv->stall_timer, on_stall, in_ms, 0);
  }
  uv_thread_create(&srv->thread, thread_main, srv);
  *out = srv;
  return 0;
}

uint64_t pb_nullsrv_served(const pb_nullsrv *s) {
  return atomic_load(&((pb_nullsrv *)s)->served);
}

void pb_nullsrv_stop(pb_nullsrv *s, uint64_t *stall_began_ns, uint64_t *stall_ended_ns) {
  uv_async_send(&s->stop_async);
  uv_thread_join(&s->thread);
  uv_loop_close(&s->loop);
  if (stall_began_ns) *stall_began_ns = s->stall_began;
  if (stall_ended_ns) *stall_ended_ns = s->stall_ended;
  free(s);
}
