/* systemd's two process contracts, without libsystemd: the notification datagrams
 * (sd_notify: READY=1, STATUS=, RELOADING=1, STOPPING=1, WATCHDOG=1, MAINPID=) and socket
 * activation (LISTEN_PID, LISTEN_FDS, LISTEN_FDNAMES: listening sockets inherited from fd 3
 * on). Both are stable, documented protocols of a few lines each (sd_notify(3),
 * sd_listen_fds(3)); docs/SERVER.md "systemd" says why we speak them directly. The parsing and
 * matching functions are pure (no environment, no sockets) so they are unit-tested; the
 * caller reads the environment and the sockets' addresses. */
#ifndef PP_SYSTEMD_H
#define PP_SYSTEMD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "server/base/config.h"

#define PP_SD_LISTEN_FDS_START 3
#define PP_SD_MAX_FDS          64 /* inherited sockets at most */
#define PP_SD_NAME_MAX         256

/* The notification socket ($NOTIFY_SOCKET): a unix datagram socket path, or "@name" for the
 * abstract namespace. fd is -1 when there is none (every send is then a no-op). */
typedef struct pp_sd_notify {
  int fd;
  struct sockaddr_un addr;
  socklen_t addr_len;
} pp_sd_notify;

/* Prepares sending to `socket_path` (NULL or "": no socket, n->fd = -1, returns 0). Returns 0,
 * or -1 with a message in err (a path too long, or not absolute and not abstract). The socket
 * is created close-on-exec. */
int pp_sd_notify_open(pp_sd_notify *n, const char *socket_path, char *err, size_t err_len);
/* Sends one datagram of newline-separated assignments ("READY=1\nSTATUS=..."). Returns 0 when
 * sent or when there is no socket, else -errno (the caller logs it; a lost notification is
 * never fatal). */
int pp_sd_notify_send(const pp_sd_notify *n, const char *msg);
void pp_sd_notify_close(pp_sd_notify *n);

/* The watchdog period from WATCHDOG_USEC / WATCHDOG_PID as sd_watchdog_enabled(3) reads them:
 * the interval in microseconds when the watchdog is on for process `pid`, else 0 (unset, zero,
 * malformed, or meant for another pid). */
uint64_t pp_sd_watchdog_usec(const char *watchdog_usec, const char *watchdog_pid, long pid);

/* One inherited socket: its descriptor, its LISTEN_FDNAMES name ("unknown" when none was
 * given) and whether a listener took it. */
typedef struct pp_sd_fd {
  int fd;
  char name[PP_SD_NAME_MAX];
  int used;
} pp_sd_fd;

typedef struct pp_sd_listen {
  int count;
  pp_sd_fd fds[PP_SD_MAX_FDS];
} pp_sd_listen;

/* Reads the values of LISTEN_PID, LISTEN_FDS and LISTEN_FDNAMES (any may be NULL) for process
 * `pid`. Returns the count of inherited sockets (0 when LISTEN_FDS is unset or LISTEN_PID is
 * another process's, as sd_listen_fds(3)), or -1 with a message in err for malformed values
 * (a non-number, more than PP_SD_MAX_FDS, a names list whose length differs from the count). */
int pp_sd_listen_parse(pp_sd_listen *l, const char *listen_pid, const char *listen_fds,
                       const char *listen_fdnames, long pid, char *err, size_t err_len);

/* Whether a socket bound to `sa` (getsockname) is the address `a` of a flag: same family,
 * address and port for TCP (port 0 never matches), same path for unix sockets. */
int pp_sd_addr_matches(const pp_addr *a, const struct sockaddr *sa, socklen_t sa_len);

/* Formats `sa` as text for logs ("127.0.0.1:8080", "[::1]:80", "unix:/run/x.sock"). */
void pp_sd_addr_format(const struct sockaddr *sa, socklen_t sa_len, char *out, size_t out_len);

#endif
