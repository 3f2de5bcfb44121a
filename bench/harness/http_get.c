/* A blocking HTTP/1.1 GET on loopback (harness.h, pb_http_get): the readiness probe and the
 * sampler's /stats reads. Never on the generator's loop. */
#include "bench/harness/harness.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <llhttp.h>
#include <uv.h>

/* ---- blocking HTTP GET ---- */

typedef struct get_ctx {
  char *body;
  size_t cap, len;
  bool done;
} get_ctx;

static int get_on_body(llhttp_t *p, const char *at, size_t n) {
  get_ctx *c = p->data;
  if (c->cap && c->len + 1 < c->cap) {
    size_t take = n < c->cap - 1 - c->len ? n : c->cap - 1 - c->len;
    memcpy(c->body + c->len, at, take);
    c->len += take;
    c->body[c->len] = 0;
  }
  return 0;
}

static int get_on_complete(llhttp_t *p) {
  ((get_ctx *)p->data)->done = true;
  return 0;
}

int pb_http_get(const char *host, int port, const char *path, uint64_t timeout_ns, char *body,
                size_t cap) {
  if (cap) body[0] = 0;
  struct sockaddr_storage ss;
  socklen_t sl;
  int family = strchr(host, ':') ? AF_INET6 : AF_INET;
  memset(&ss, 0, sizeof ss);
  if (family == AF_INET) {
    struct sockaddr_in *a = (struct sockaddr_in *)&ss;
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &a->sin_addr) != 1) return -1;
    sl = sizeof *a;
  } else {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
    a->sin6_family = AF_INET6;
    a->sin6_port = htons((uint16_t)port);
    if (inet_pton(AF_INET6, host, &a->sin6_addr) != 1) return -1;
    sl = sizeof *a;
  }
  int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  uint64_t deadline = uv_hrtime() + timeout_ns;
  int status = -1;
  if (connect(fd, (struct sockaddr *)&ss, sl) < 0 && errno != EINPROGRESS) goto out;
  struct pollfd pfd = {.fd = fd, .events = POLLOUT};
  int left_ms = (int)(timeout_ns / 1000000u);
  if (poll(&pfd, 1, left_ms) != 1) goto out;
  int soerr = 0;
  socklen_t el = sizeof soerr;
  getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &el);
  if (soerr) goto out;
  char req[512];
  int n = snprintf(req, sizeof req,
                   "GET %s HTTP/1.1\r\nHost: %s:%d\r\nUser-Agent: pp-bench\r\nConnection: "
                   "close\r\n\r\n",
                   path, family == AF_INET ? host : "localhost", port);
  if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n) goto out;
  llhttp_settings_t st;
  llhttp_settings_init(&st);
  st.on_body = get_on_body;
  st.on_message_complete = get_on_complete;
  llhttp_t parser;
  llhttp_init(&parser, HTTP_RESPONSE, &st);
  get_ctx ctx = {.body = body, .cap = cap};
  parser.data = &ctx;
  char buf[8192];
  while (!ctx.done) {
    uint64_t now = uv_hrtime();
    if (now >= deadline) goto out;
    pfd.events = POLLIN;
    if (poll(&pfd, 1, (int)((deadline - now) / 1000000u) + 1) != 1) goto out;
    ssize_t r = recv(fd, buf, sizeof buf, 0);
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (r <= 0) {
      if (llhttp_finish(&parser) != HPE_OK) goto out;
      break;
    }
    if (llhttp_execute(&parser, buf, (size_t)r) != HPE_OK) goto out;
  }
  if (ctx.done) status = parser.status_code;
out:
  close(fd);
  return status;
}
