/* ws-echo: a minimal blocking WebSocket echo server over the codec of server/proto/ws.h, for the
 * interoperability test tests/ws/interop.py (python3-websockets as the client). It is a test
 * program, not the server: one connection at a time, plain sockets, no libuv. It exists so
 * that an independent client implementation exercises the handshake checks, the
 * permessage-deflate negotiation and the session before the front end uses them.
 *
 * Usage: ws-echo  (listens on 127.0.0.1, an ephemeral port, printed as "port N" on stdout;
 * serves until killed). Paths choose the configuration: /nodeflate (permessage-deflate
 * refused), /reset (no context takeover both ways), /small (1000-byte message limit),
 * anything else the defaults. Text messages "close:CODE" and "ping" make the server close
 * with CODE or ping ("srv"); a pong is reported back as the text message "pong:PAYLOAD";
 * every other message is echoed. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/proto/ws.h"

static int on_message(pp_ws *ws, pp_ws_opcode op, const uint8_t *p, size_t n) {
  if (op == PP_WS_OP_TEXT && n > 6 && memcmp(p, "close:", 6) == 0) {
    char code[16];
    snprintf(code, sizeof code, "%.*s", (int)(n - 6 < 15 ? n - 6 : 15), (const char *)p + 6);
    pp_ws_close(ws, atoi(code), "bye", 3);
    return 0;
  }
  if (op == PP_WS_OP_TEXT && n == 4 && memcmp(p, "ping", 4) == 0) {
    pp_ws_ping(ws, (const uint8_t *)"srv", 3);
    return 0;
  }
  return pp_ws_send(ws, op, p, n) ? PP_WS_CLOSE_INTERNAL_ERROR : 0;
}

static void on_pong(pp_ws *ws, const uint8_t *p, size_t n) {
  char msg[140] = "pong:";
  memcpy(msg + 5, p, n);
  pp_ws_send(ws, PP_WS_OP_TEXT, (const uint8_t *)msg, 5 + n);
}

static const pp_ws_callbacks cbs = {on_message, NULL, on_pong, NULL};

static int write_all(int fd, const uint8_t *p, size_t n) {
  while (n) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

static void serve(int fd) {
  uint8_t head[16384];
  size_t have = 0;
  uint8_t *end = NULL;
  while (!end) {
    if (have == sizeof head) return;
    ssize_t r = recv(fd, head + have, sizeof head - have, 0);
    if (r <= 0) return;
    have += (size_t)r;
    end = memmem(head, have, "\r\n\r\n", 4);
  }
  size_t head_len = (size_t)(end - head) + 4;

  /* Request line and fields, as a parser would hand them over. */
  pp_ws_handshake hs;
  pp_ws_handshake_init(&hs, PP_WS_HS_HTTP1);
  uint8_t *line = head, *eol = memmem(head, head_len, "\r\n", 2);
  uint8_t *sp1 = memchr(line, ' ', (size_t)(eol - line));
  uint8_t *sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1)) : NULL;
  if (!sp1 || !sp2) return;
  int minor = eol - sp2 == 9 && memcmp(sp2 + 1, "HTTP/1.", 7) == 0 ? sp2[8] - '0' : -1;
  pp_ws_handshake_request_line(&hs, line, (size_t)(sp1 - line), 1, minor);
  char path[256];
  snprintf(path, sizeof path, "%.*s", (int)(sp2 - sp1 - 1), (const char *)sp1 + 1);
  for (line = eol + 2; line < end; line = eol + 2) {
    eol = memmem(line, (size_t)(end + 2 - line), "\r\n", 2);
    uint8_t *colon = memchr(line, ':', (size_t)(eol - line));
    if (!colon) break;
    pp_ws_handshake_field(&hs, line, (size_t)(colon - line), colon + 1, (size_t)(eol - colon - 1));
  }

  pp_ws_pmd_config cfg;
  pp_ws_pmd_config_default(&cfg);
  pp_ws_limits lim;
  pp_ws_limits_default(&lim);
  if (strcmp(path, "/nodeflate") == 0) cfg.enabled = 0;
  if (strcmp(path, "/reset") == 0)
    cfg.server_no_context_takeover = cfg.client_no_context_takeover = 1;
  if (strcmp(path, "/small") == 0) lim.max_message_bytes = 1000;
  int status = pp_ws_handshake_check(&hs, &cfg);
  pp_buf resp;
  pp_buf_init(&resp);
  if (status) {
    char sl[128];
    snprintf(sl, sizeof sl, "HTTP/1.1 %d %s\r\n", status,
             status == 426 ? "Upgrade Required" : "Bad Request");
    pp_buf_append_str(&resp, sl);
    pp_ws_handshake_response_fields(&hs, &resp);
    pp_buf_append_str(&resp, "Content-Length: 0\r\nConnection: close\r\n\r\n");
    write_all(fd, resp.data, resp.len);
    pp_buf_dispose(&resp);
    pp_ws_handshake_dispose(&hs);
    return;
  }
  pp_buf_append_str(&resp, "HTTP/1.1 101 Switching Protocols\r\n");
  pp_ws_handshake_response_fields(&hs, &resp);
  pp_buf_append_str(&resp, "\r\n");
  int ok = write_all(fd, resp.data, resp.len) == 0;
  pp_buf_dispose(&resp);

  pp_ws ws;
  pp_ws_pmd_params pmd = hs.pmd;
  if (pp_ws_init(&ws, &cbs, &lim, hs.pmd_accepted ? &pmd : NULL, &cfg, NULL)) ok = 0;
  pp_ws_handshake_dispose(&hs);
  if (ok && have > head_len) pp_ws_feed(&ws, head + head_len, have - head_len);
  uint8_t buf[65536];
  while (ok) {
    const uint8_t *out;
    size_t n = pp_ws_output(&ws, &out);
    if (n) {
      if (write_all(fd, out, n)) break;
      pp_ws_output_consumed(&ws, n);
    }
    if (ws.state == PP_WS_CLOSED) break; /* the server closes the TCP connection first */
    ssize_t r = recv(fd, buf, sizeof buf, 0);
    if (r <= 0) break;
    pp_ws_feed(&ws, buf, (size_t)r); /* a failure queues its Close: written above */
  }
  pp_ws_dispose(&ws);
}

int main(void) {
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t al = sizeof a;
  if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 16) ||
      getsockname(ls, (struct sockaddr *)&a, &al)) {
    perror("ws-echo");
    return 1;
  }
  printf("port %d\n", ntohs(a.sin_port));
  fflush(stdout);
  for (;;) {
    int fd = accept(ls, NULL, NULL);
    if (fd < 0) continue;
    serve(fd);
    shutdown(fd, SHUT_WR);
    /* let the client read the Close before the socket goes (no RST over unread bytes) */
    struct pollfd pf = {fd, POLLIN, 0};
    char sink[4096];
    while (poll(&pf, 1, 200) > 0 && recv(fd, sink, sizeof sink, 0) > 0) {}
    close(fd);
  }
}
