/* systemd's notification and socket-activation protocols (see systemd.h). Workload: a
 * handful of datagrams at start and stop, one STATUS= per tick and one WATCHDOG=1 per half
 * period; parsing runs once at start. */
#include "server/proto/systemd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int pp_sd_notify_open(pp_sd_notify *n, const char *socket_path, char *err, size_t err_len) {
  memset(n, 0, sizeof *n);
  n->fd = -1;
  if (!socket_path || !*socket_path) return 0;
  size_t len = strlen(socket_path);
  if (socket_path[0] != '/' && socket_path[0] != '@') {
    snprintf(err, err_len, "NOTIFY_SOCKET=%.200s: not an absolute path or @abstract name",
             socket_path);
    return -1;
  }
  if (len >= sizeof n->addr.sun_path) {
    snprintf(err, err_len, "NOTIFY_SOCKET=%.200s: path too long", socket_path);
    return -1;
  }
  n->addr.sun_family = AF_UNIX;
  memcpy(n->addr.sun_path, socket_path, len);
  if (socket_path[0] == '@') n->addr.sun_path[0] = 0; /* abstract: no terminating NUL counts */
  n->addr_len =
      (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + (socket_path[0] == '@' ? 0 : 1));
  n->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (n->fd < 0) {
    snprintf(err, err_len, "NOTIFY_SOCKET: socket: %s", strerror(errno));
    return -1;
  }
  return 0;
}

int pp_sd_notify_send(const pp_sd_notify *n, const char *msg) {
  if (n->fd < 0) return 0;
  ssize_t w =
      sendto(n->fd, msg, strlen(msg), MSG_NOSIGNAL, (const struct sockaddr *)&n->addr, n->addr_len);
  return w < 0 ? -errno : 0;
}

void pp_sd_notify_close(pp_sd_notify *n) {
  if (n->fd >= 0) close(n->fd);
  n->fd = -1;
}

/* A decimal without sign, spaces or trailing bytes; -1 if it is not one. */
static long long parse_decimal(const char *text) {
  if (!text || !*text) return -1;
  char *end;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (errno || *end || text[0] < '0' || text[0] > '9' || v < 0) return -1;
  return v;
}

uint64_t pp_sd_watchdog_usec(const char *watchdog_usec, const char *watchdog_pid, long pid) {
  long long usec = parse_decimal(watchdog_usec);
  if (usec <= 0) return 0;
  if (watchdog_pid && *watchdog_pid && parse_decimal(watchdog_pid) != pid) return 0;
  return (uint64_t)usec;
}

int pp_sd_listen_parse(pp_sd_listen *l, const char *listen_pid, const char *listen_fds,
                       const char *listen_fdnames, long pid, char *err, size_t err_len) {
  memset(l, 0, sizeof *l);
  if (!listen_fds || !*listen_fds) return 0;
  if (listen_pid && *listen_pid) {
    long long p = parse_decimal(listen_pid);
    if (p < 0) {
      snprintf(err, err_len, "LISTEN_PID=%.40s: not a process id", listen_pid);
      return -1;
    }
    if (p != pid) return 0; /* meant for another process (our parent) */
  }
  long long count = parse_decimal(listen_fds);
  if (count < 0 || count > PP_SD_MAX_FDS) {
    snprintf(err, err_len, "LISTEN_FDS=%.40s: expected a count from 0 to %d", listen_fds,
             PP_SD_MAX_FDS);
    return -1;
  }
  l->count = (int)count;
  const char *p = listen_fdnames && *listen_fdnames ? listen_fdnames : NULL;
  for (int i = 0; i < l->count; i++) {
    l->fds[i].fd = PP_SD_LISTEN_FDS_START + i;
    const char *end = p ? strchr(p, ':') : NULL;
    if (!p) {
      strcpy(l->fds[i].name, "unknown");
      continue;
    }
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len >= PP_SD_NAME_MAX) {
      snprintf(err, err_len, "LISTEN_FDNAMES: name %d longer than %d bytes", i, PP_SD_NAME_MAX - 1);
      return -1;
    }
    memcpy(l->fds[i].name, p, len);
    l->fds[i].name[len] = 0;
    if (!end && i + 1 < l->count) {
      snprintf(err, err_len, "LISTEN_FDNAMES has %d names for LISTEN_FDS=%d", i + 1, l->count);
      return -1;
    }
    p = end ? end + 1 : NULL;
  }
  if (p) {
    snprintf(err, err_len, "LISTEN_FDNAMES has more names than LISTEN_FDS=%d", l->count);
    return -1;
  }
  return l->count;
}

int pp_sd_addr_matches(const pp_addr *a, const struct sockaddr *sa, socklen_t sa_len) {
  if (a->is_unix) {
    if (sa->sa_family != AF_UNIX) return 0;
    const struct sockaddr_un *un = (const struct sockaddr_un *)sa;
    size_t max = sa_len > offsetof(struct sockaddr_un, sun_path)
                     ? sa_len - offsetof(struct sockaddr_un, sun_path)
                     : 0;
    if (max == 0 || un->sun_path[0] == 0) return 0; /* unnamed or abstract */
    return strnlen(un->sun_path, max) == strlen(a->path) &&
           !strncmp(un->sun_path, a->path, strlen(a->path));
  }
  if (a->port == 0) return 0;
  uint8_t want[16];
  if (sa->sa_family == AF_INET) {
    const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
    if (inet_pton(AF_INET, a->host, want) != 1) return 0;
    return ntohs(in->sin_port) == a->port && !memcmp(&in->sin_addr, want, 4);
  }
  if (sa->sa_family == AF_INET6) {
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
    if (inet_pton(AF_INET6, a->host, want) != 1) return 0;
    return ntohs(in6->sin6_port) == a->port && !memcmp(&in6->sin6_addr, want, 16);
  }
  return 0;
}

void pp_sd_addr_format(const struct sockaddr *sa, socklen_t sa_len, char *out, size_t out_len) {
  char host[INET6_ADDRSTRLEN];
  if (sa->sa_family == AF_INET) {
    const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    snprintf(out, out_len, "%s:%u", host, ntohs(in->sin_port));
  } else if (sa->sa_family == AF_INET6) {
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
    snprintf(out, out_len, "[%s]:%u", host, ntohs(in6->sin6_port));
  } else if (sa->sa_family == AF_UNIX) {
    const struct sockaddr_un *un = (const struct sockaddr_un *)sa;
    size_t max = sa_len > offsetof(struct sockaddr_un, sun_path)
                     ? sa_len - offsetof(struct sockaddr_un, sun_path)
                     : 0;
    if (max == 0)
      snprintf(out, out_len, "unix:(unnamed)");
    else if (un->sun_path[0] == 0)
      snprintf(out, out_len, "unix:@%.*s", (int)(max - 1), un->sun_path + 1);
    else
      snprintf(out, out_len, "unix:%.*s", (int)strnlen(un->sun_path, max), un->sun_path);
  } else {
    snprintf(out, out_len, "(address family %d)", sa->sa_family);
  }
}
