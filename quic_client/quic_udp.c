/* The UDP edge of the QUIC client kit (quic_udp.h): dialling, and the read and write loops of
 * one connected, non-blocking socket per session. */
#include "quic_client/quic_udp.h"

#include <errno.h>
#include <netdb.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

uint64_t pp_qc_udp_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int pp_qc_udp_dial(pp_qc_session *s, int *fd, const char *host, const char *port,
                   const ngtcp2_transport_params *params, gnutls_certificate_credentials_t cred) {
  *fd = -1;
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_DGRAM}, *ai = NULL;
  if (getaddrinfo(host, port, &hints, &ai) != 0 || !ai) return PP_QC_ERESOLVE;
  int sock = socket(ai->ai_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (sock < 0) {
    freeaddrinfo(ai);
    return PP_QC_ESOCKET;
  }
  int size = 4 << 20;
  setsockopt(sock, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
  setsockopt(sock, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
  struct sockaddr_storage local;
  socklen_t local_len = sizeof local;
  if (connect(sock, ai->ai_addr, ai->ai_addrlen) != 0 ||
      getsockname(sock, (struct sockaddr *)&local, &local_len) != 0) {
    int e = errno;
    close(sock);
    freeaddrinfo(ai);
    errno = e;
    return PP_QC_ESOCKET;
  }
  const pp_qc_client_config cfg = {
      .local = (const struct sockaddr *)&local,
      .local_len = local_len,
      .remote = ai->ai_addr,
      .remote_len = ai->ai_addrlen,
      .params = params,
      .initial_ts = pp_qc_udp_now(),
      .cred = cred,
      .alpn = "h3",
      .sni = "localhost",
  };
  int rv = pp_qc_client_new(s, &cfg); /* copies the path: ai may go */
  freeaddrinfo(ai);
  *fd = sock;
  return rv;
}

int pp_qc_udp_write(pp_qc_session *s, int fd, int *full, int *h3_error) {
  *full = 0;
  *h3_error = 0;
  uint64_t ts = pp_qc_udp_now();
  for (int guard = 0; guard < 4096; guard++) {
    uint8_t buf[1452];
    ngtcp2_ssize n = pp_qc_write_packet(s, buf, sizeof buf, ts, h3_error);
    if (n < 0) return (int)n;
    if (n == 0) break;
    if (send(fd, buf, (size_t)n, 0) < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      *full = 1; /* this datagram is dropped like a lost one; POLLOUT continues */
      break;
    }
  }
  ngtcp2_conn_update_pkt_tx_time(s->qc, ts);
  return 0;
}

int pp_qc_udp_read(pp_qc_session *s, int fd) {
  uint8_t buf[65536];
  for (int i = 0; i < 256; i++) {
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n < 0) break;
    ngtcp2_path path;
    pp_qc_session_path(s, &path);
    ngtcp2_pkt_info pi = {0};
    int rv = ngtcp2_conn_read_pkt(s->qc, &path, &pi, buf, (size_t)n, pp_qc_udp_now());
    if (rv != 0) return rv;
  }
  return 0;
}
