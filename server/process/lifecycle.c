/* The process lifecycle around the loop (see lifecycle.h). Workload: a few events per
 * process lifetime (start, ready, restart, drain, exit) and two periodic datagrams (STATUS= per
 * tick, WATCHDOG=1 per half period); nothing here is on the request path.
 *
 * Hot restart, the model: the old server (P) forks and execs the binary at the path it was
 * started with, with the same arguments, handing it every open TCP/unix listener (HTTP, HTTPS
 * and the control app) as LISTEN_FDS from fd 3 on, named "listen.N" / "listen-tls.N" /
 * "control", plus a pipe (PUMA_PLUS_READY_FD). The new server (N) boots its shepherd and
 * workers while P keeps serving; N does not accept until its workers are ready, so every
 * connection meanwhile goes to P. N then writes one byte on the pipe and starts accepting; P
 * closes its copies of the listeners (the sockets stay open in N: nothing is refused, the
 * backlog moves with them), tells systemd MAINPID=N, drains and exits. If N dies first, P
 * reads EOF, reaps it and keeps serving. */
#include "server/process/lifecycle.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "server/base/alloc.h"
#include "server/base/log.h"
#include "server/core/core.h"
#include "server/net/transport.h"
#include "server/workers/phased.h"
#include "server/workers/workers.h"

extern char **environ;

#define READY_POLL_MS 20

static void notify(pp_lifecycle *l, const char *msg) {
  int rc = pp_sd_notify_send(&l->notify, msg);
  if (rc < 0) LOG_ERR(l, "sd_notify to %s: %s", l->notify_socket, strerror(-rc));
}

/* ---------------------------------------------------------------- environment */

static int take_env_fd(const char *name) {
  const char *v = getenv(name);
  if (!v || !*v) return -1;
  char *end;
  long fd = strtol(v, &end, 10);
  return *end || fd < 3 || fd > 1 << 20 ? -1 : (int)fd;
}

int pp_lifecycle_init(pp_lifecycle *l, server *srv, void (*drain)(server *srv), uv_loop_t *loop,
                      const pp_config *cfg, pp_net *net, const pp_core *core,
                      const pp_workers *workers, const int *draining, int argc, char **argv) {
  memset(l, 0, sizeof *l);
  l->srv = srv, l->drain = drain, l->loop = loop, l->cfg = cfg, l->net = net, l->core = core;
  l->workers = workers, l->draining = draining;
  l->ready_fd = -1;
  l->notify.fd = -1;
  char err[512];
  const char *ns = getenv("NOTIFY_SOCKET");
  if (ns && strlen(ns) < sizeof l->notify_socket) strcpy(l->notify_socket, ns);
  if (pp_sd_notify_open(&l->notify, ns, err, sizeof err) < 0) {
    LOG_ERR(l, "%s", err);
    return -1;
  }
  l->watchdog_usec =
      pp_sd_watchdog_usec(getenv("WATCHDOG_USEC"), getenv("WATCHDOG_PID"), (long)getpid());
  int n = pp_sd_listen_parse(&l->inherited, getenv("LISTEN_PID"), getenv("LISTEN_FDS"),
                             getenv("LISTEN_FDNAMES"), (long)getpid(), err, sizeof err);
  if (n < 0) {
    LOG_ERR(l, "socket activation: %s", err);
    return -1;
  }
  for (int i = 0; i < n; i++) {
    int fd = l->inherited.fds[i].fd;
    if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
      LOG_ERR(l, "socket activation: LISTEN_FDS=%d but fd %d is not open: %s", n, fd,
              strerror(errno));
      return -1;
    }
  }
  if (n > 0) {
    l->ready_fd = take_env_fd("PUMA_PLUS_READY_FD");
    if (l->ready_fd >= 0) {
      fcntl(l->ready_fd, F_SETFD, FD_CLOEXEC);
      l->defer_accept = l->restarted = 1;
    }
  }
  /* The shepherd and the workers inherit our environment: none of this is meant for them. */
  static const char *vars[] = {"NOTIFY_SOCKET", "WATCHDOG_USEC",  "WATCHDOG_PID",      "LISTEN_PID",
                               "LISTEN_FDS",    "LISTEN_FDNAMES", "PUMA_PLUS_READY_FD"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
    unsetenv(vars[i]);
  l->argc = argc;
  l->argv = argv;
  if (argc > 0 && argv[0]) {
    if (strchr(argv[0], '/')) {
      char cwd[PATH_MAX];
      if (argv[0][0] == '/' || !getcwd(cwd, sizeof cwd) ||
          strlen(cwd) + strlen(argv[0]) + 2 > sizeof l->exe)
        snprintf(l->exe, sizeof l->exe, "%s", argv[0]);
      else
        strcat(strcat(strcpy(l->exe, cwd), "/"), argv[0]);
    } else { /* found through $PATH: the file we run from */
      ssize_t len = readlink("/proc/self/exe", l->exe, sizeof l->exe - 1);
      l->exe[len > 0 ? len : 0] = 0;
    }
  }
  return 0;
}

/* ---------------------------------------------------------------- inherited sockets */

int pp_lifecycle_take_inherited(pp_lifecycle *l, listener *ls) {
  pp_sd_listen *in = &l->inherited;
  int found = -1;
  for (int i = 0; i < in->count && found < 0; i++)
    if (!in->fds[i].used && ls->name[0] && !strcmp(in->fds[i].name, ls->name)) found = i;
  for (int i = 0; i < in->count && found < 0; i++) {
    if (in->fds[i].used) continue;
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(in->fds[i].fd, (struct sockaddr *)&ss, &len) == 0 &&
        pp_sd_addr_matches(&ls->addr, (struct sockaddr *)&ss, len))
      found = i;
  }
  if (found < 0) return -1;
  pp_sd_fd *f = &in->fds[found];
  int type = 0, listening = 0;
  socklen_t len = sizeof type;
  getsockopt(f->fd, SOL_SOCKET, SO_TYPE, &type, &len);
  len = sizeof listening;
  getsockopt(f->fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len);
  struct sockaddr_storage ss;
  socklen_t sslen = sizeof ss;
  int is_unix = getsockname(f->fd, (struct sockaddr *)&ss, &sslen) == 0 && ss.ss_family == AF_UNIX;
  if (type != SOCK_STREAM || !listening || is_unix != ls->addr.is_unix) {
    LOG_ERR(l, "inherited fd %d (name %s) for %s is not a listening %s stream socket", f->fd,
            f->name, ls->addr.text, ls->addr.is_unix ? "unix" : "TCP");
    return -2;
  }
  f->used = 1;
  return f->fd;
}

int pp_lifecycle_check_inherited(pp_lifecycle *l) {
  pp_sd_listen *in = &l->inherited;
  int bad = 0;
  for (int i = 0; i < in->count; i++) {
    if (in->fds[i].used) continue;
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    char addr[160] = "(not a socket)";
    if (getsockname(in->fds[i].fd, (struct sockaddr *)&ss, &len) == 0)
      pp_sd_addr_format((struct sockaddr *)&ss, len, addr, sizeof addr);
    LOG_ERR(l,
            "inherited fd %d (name %s, %s) matches no -listen, -listen-tls or -control: give a "
            "flag with its address, or name it listen.N / listen-tls.N / control",
            in->fds[i].fd, in->fds[i].name, addr);
    bad = 1;
  }
  return bad ? -1 : 0;
}

/* ---------------------------------------------------------------- pid and state files */

static void yaml_quoted(FILE *f, const char *v) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
    if (*p == '"' || *p == '\\')
      fprintf(f, "\\%c", *p);
    else if (*p < 0x20 || *p == 0x7f)
      fprintf(f, "\\x%02x", *p);
    else
      fputc(*p, f);
  }
  fputc('"', f);
}

/* Writes path through a temporary file and rename, so a reader never sees half a file. */
static int write_file(pp_lifecycle *l, const char *path, int state) {
  char tmp[PATH_MAX + 32];
  snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, state ? 0600 : 0644);
  FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
  if (!f) {
    LOG_ERR(l, "cannot write %s: %s", tmp, strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
  }
  if (!state) {
    fprintf(f, "%d\n", (int)getpid());
  } else {
    fprintf(f, "---\npid: %d\n", (int)getpid());
    for (int i = 0; i < l->net->listener_count; i++) {
      listener *ls = &l->net->listeners[i];
      if (ls->kind != LISTEN_CONTROL) continue;
      char url[400];
      if (ls->addr.is_unix)
        snprintf(url, sizeof url, "unix://%s", ls->addr.path);
      else if (strchr(ls->addr.host, ':'))
        snprintf(url, sizeof url, "tcp://[%s]:%d", ls->addr.host, ls->addr.port);
      else
        snprintf(url, sizeof url, "tcp://%s:%d", ls->addr.host, ls->addr.port);
      fputs("control_url: ", f);
      yaml_quoted(f, url);
      fputc('\n', f);
      if (l->cfg->control_token) {
        fputs("control_auth_token: ", f);
        yaml_quoted(f, l->cfg->control_token);
        fputc('\n', f);
      }
    }
    char cwd[PATH_MAX];
    if (getcwd(cwd, sizeof cwd)) {
      fputs("running_from: ", f);
      yaml_quoted(f, cwd);
      fputc('\n', f);
    }
  }
  int bad = ferror(f);
  if (fclose(f) != 0) bad = 1;
  if (bad || rename(tmp, path) < 0) {
    LOG_ERR(l, "cannot write %s: %s", path, strerror(errno));
    unlink(tmp);
    return -1;
  }
  return 0;
}

static void write_files(pp_lifecycle *l) {
  if (l->cfg->pidfile && write_file(l, l->cfg->pidfile, 0) == 0)
    LOG(l, "wrote pid %d to %s", (int)getpid(), l->cfg->pidfile);
  if (l->cfg->state_path && write_file(l, l->cfg->state_path, 1) == 0)
    LOG(l, "wrote the state file %s", l->cfg->state_path);
  l->files_written = 1;
}

/* The pid a pid file ("1234\n") or state file ("pid: 1234") names, or -1. */
static long file_pid(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  char line[256];
  long pid = -1;
  while (pid < 0 && fgets(line, sizeof line, f)) {
    const char *p = line;
    if (!strncmp(p, "pid:", 4)) p += 4;
    while (*p == ' ')
      p++;
    if (*p >= '0' && *p <= '9') pid = strtol(p, NULL, 10);
  }
  fclose(f);
  return pid;
}

void pp_lifecycle_exit(pp_lifecycle *l) {
  if (!l->files_written) return;
  const char *paths[] = {l->cfg->pidfile, l->cfg->state_path};
  for (int i = 0; i < 2; i++) /* after a hot restart they name the new server: kept */
    if (paths[i] && file_pid(paths[i]) == (long)getpid()) unlink(paths[i]);
}

/* ---------------------------------------------------------------- ready, status, watchdog */

static void status_text(pp_lifecycle *l, char *out, size_t len) {
  const pp_stats *st = &l->core->stats;
  uint32_t ready = pp_registry_count(&l->workers->reg, PP_WORKER_READY);
  uint32_t booting = pp_registry_count(&l->workers->reg, PP_WORKER_BOOTING);
  char p95[48] = "none";
  if (st->queue_last.count)
    snprintf(p95, sizeof p95, "%.1f ms", pp_hist_percentile(&st->queue_last, 95) / 1e6);
  snprintf(out, len,
           "STATUS=workers %u ready, %u booting; threads %u idle of %u; queue p95 %s over the "
           "last %.0f s (%llu requests), %u queued",
           ready, booting, l->workers->reg.slots_ready - l->workers->reg.slots_busy,
           l->workers->reg.slots_ready, p95, l->cfg->tick_ns / 1e9,
           (unsigned long long)st->queue_last.count, l->core->queue.len);
}

static void on_status(uv_timer_t *t) {
  pp_lifecycle *l = t->data;
  if (*l->draining) return;
  char msg[512];
  status_text(l, msg, sizeof msg);
  notify(l, msg);
}

static void became_ready(pp_lifecycle *l) {
  l->ready = 1;
  char msg[600];
  status_text(l, msg, sizeof msg);
  if (l->ready_fd >= 0) { /* a hot restart: the old server tells systemd we are the main pid */
    pp_listeners_accept_deferred(l->net);
    write_files(l);
    ssize_t w;
    do
      w = write(l->ready_fd, "R", 1);
    while (w < 0 && errno == EINTR);
    close(l->ready_fd);
    l->ready_fd = -1;
    LOG_ERR(l, "hot restart: workers ready; taking over the listeners from the old server");
  } else {
    char ready[640];
    snprintf(ready, sizeof ready, "READY=1\n%s", msg);
    notify(l, ready);
    LOG(l, "ready: %u workers", pp_registry_count(&l->workers->reg, PP_WORKER_READY));
  }
  uint64_t tick_ms = l->cfg->tick_ns / 1000000 ? l->cfg->tick_ns / 1000000 : 1;
  uv_timer_start(&l->ready_timer, on_status, tick_ms, tick_ms);
}

/* Ready: every wanted worker said HELLO (polled, and checked again by whoever needs to know
 * now, so a client that saw the workers ready in /stats never hears "not ready yet"). */
static int check_ready(pp_lifecycle *l) {
  if (l->ready) return 1;
  if (*l->draining) return 0;
  uint32_t want = l->workers->workers_wanted;
  if (pp_registry_count(&l->workers->reg, PP_WORKER_READY) >= want &&
      (want == 0 || l->workers->reg.slots_ready))
    became_ready(l);
  return l->ready;
}

static void on_ready_poll(uv_timer_t *t) {
  check_ready(t->data);
}

static void on_watchdog(uv_timer_t *t) {
  notify(t->data, "WATCHDOG=1");
}

static void on_usr2(uv_signal_t *h, int signum) {
  pp_lifecycle *l = h->data;
  (void)signum;
  char msg[256];
  long pid = pp_restart_begin(l, msg, sizeof msg);
  if (pid < 0) LOG_ERR(l, "SIGUSR2: no hot restart: %s", msg);
}

/* Reaps the new server of a hot restart if it exited (only that pid: libuv reaps the shepherd;
 * shepherd.c's orphan reaper may reap it first, as any child that is not the shepherd). */
static void reap_child(pp_lifecycle *l) {
  if (l->child_pid <= 0) return;
  int status;
  pid_t r = waitpid((pid_t)l->child_pid, &status, WNOHANG);
  if (r < 0 && errno == ECHILD) { /* the orphan reaper (shepherd.c) took it first */
    l->child_pid = 0;
    return;
  }
  if (r != (pid_t)l->child_pid) return;
  if (!l->handed_over)
    LOG_ERR(l, "hot restart: the new server (pid %ld) exited (%s %d)", l->child_pid,
            WIFSIGNALED(status) ? "signal" : "status",
            WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
  l->child_pid = 0;
}

static void on_sigchld(uv_signal_t *h, int signum) {
  (void)signum;
  reap_child(h->data);
}

void pp_lifecycle_start(pp_lifecycle *l) {
  uv_timer_init(l->loop, &l->ready_timer);
  uv_timer_init(l->loop, &l->watchdog_timer);
  uv_timer_init(l->loop, &l->action_timer);
  uv_signal_init(l->loop, &l->sig_usr2);
  uv_signal_init(l->loop, &l->sig_chld);
  l->ready_timer.data = l->watchdog_timer.data = l->action_timer.data = l;
  l->sig_usr2.data = l->sig_chld.data = l;
  uv_signal_start(&l->sig_usr2, on_usr2, SIGUSR2);
  uv_signal_start(&l->sig_chld, on_sigchld, SIGCHLD);
  uv_timer_start(&l->ready_timer, on_ready_poll, READY_POLL_MS, READY_POLL_MS);
  if (l->watchdog_usec) {
    uint64_t half_ms = l->watchdog_usec / 2000 ? l->watchdog_usec / 2000 : 1;
    uv_timer_start(&l->watchdog_timer, on_watchdog, 0, half_ms);
    LOG(l, "systemd watchdog: WATCHDOG=1 every %llu ms", (unsigned long long)half_ms);
  }
  if (l->ready_fd < 0) write_files(l);
}

void pp_lifecycle_draining(pp_lifecycle *l) {
  if (l->handed_over) return;
  if (l->restarting && l->child_pid > 0) {
    /* Stopping wins over a restart under way: the new server would otherwise take over. */
    LOG_ERR(l, "hot restart abandoned: stopping the new server (pid %ld) too", l->child_pid);
    kill((pid_t)l->child_pid, SIGTERM);
  }
  char msg[200];
  snprintf(msg, sizeof msg, "STOPPING=1\nSTATUS=draining: %u queued, %u in flight",
           l->core->queue.len, l->workers->reg.slots_busy);
  notify(l, msg);
}

static uint64_t monotonic_usec(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000;
}

void pp_lifecycle_reloading(pp_lifecycle *l, int begin) {
  pp_lifecycle_reloading_for(l, begin, "SIGHUP: reloading");
}

void pp_lifecycle_reloading_for(pp_lifecycle *l, int begin, const char *what) {
  if (*l->draining || !l->ready) return; /* READY=1 would undo STOPPING=1 or come early */
  char msg[640];
  if (begin)
    snprintf(msg, sizeof msg, "RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS=%s",
             (unsigned long long)monotonic_usec(), what);
  else
    status_text(l, msg + snprintf(msg, sizeof msg, "READY=1\n"), sizeof msg - 8);
  notify(l, msg);
}

static void on_stop_soon(uv_timer_t *t) {
  pp_lifecycle *l = t->data;
  l->drain(l->srv);
}

void pp_lifecycle_stop_soon(pp_lifecycle *l) {
  uv_timer_start(&l->action_timer, on_stop_soon, 0, 0);
}

/* ---------------------------------------------------------------- hot restart */

static void on_child_ready_closed(uv_handle_t *h) {
  (void)h;
}

static void on_child_ready_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  static char byte[16];
  (void)h, (void)suggested;
  *buf = uv_buf_init(byte, sizeof byte);
}

static void on_child_ready(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf) {
  pp_lifecycle *l = st->data;
  (void)buf;
  if (nread == 0) return;
  uv_read_stop(st);
  uv_close((uv_handle_t *)st, on_child_ready_closed);
  l->restarting = 0;
  char msg[300];
  if (nread < 0) { /* EOF: it exited (or closed the pipe) before its workers were ready */
    LOG_ERR(l,
            "hot restart failed: the new server (pid %ld) quit before its workers were "
            "ready; this server (pid %d) keeps serving",
            l->new_pid, (int)getpid());
    if (l->child_pid > 0) kill((pid_t)l->child_pid, SIGTERM); /* closed the pipe, still running */
    write_files(l);
    snprintf(msg, sizeof msg, "READY=1\nSTATUS=hot restart failed (new pid %ld quit); serving",
             l->new_pid);
    notify(l, msg);
    return;
  }
  l->handed_over = 1;
  LOG_ERR(l, "hot restart: pid %ld took over; draining and exiting", l->new_pid);
  snprintf(msg, sizeof msg, "MAINPID=%ld\nREADY=1\nSTATUS=hot restart: pid %ld serving", l->new_pid,
           l->new_pid);
  notify(l, msg);
  pp_listeners_close_control(l->net);
  l->drain(l->srv);
}

/* "NAME=" + decimal, without stdio (it runs between fork and exec). */
static void env_number(char *out, size_t cap, const char *name, long v) {
  size_t n = strlen(name);
  char digits[24];
  int d = 0;
  do
    digits[d++] = (char)('0' + v % 10), v /= 10;
  while (v && d < (int)sizeof digits);
  if (n + (size_t)d + 1 > cap) {
    out[0] = 0;
    return;
  }
  memcpy(out, name, n);
  while (d)
    out[n++] = digits[--d];
  out[n] = 0;
}

static int env_dropped(const char *e) {
  static const char *drop[] = {
      "LISTEN_PID=",    "LISTEN_FDS=",   "LISTEN_FDNAMES=",    "NOTIFY_SOCKET=",
      "WATCHDOG_USEC=", "WATCHDOG_PID=", "PUMA_PLUS_READY_FD="};
  for (size_t i = 0; i < sizeof drop / sizeof drop[0]; i++)
    if (!strncmp(e, drop[i], strlen(drop[i]))) return 1;
  return 0;
}

long pp_restart_begin(pp_lifecycle *l, char *msg, size_t msg_len) {
  if (l->argc == 0 || !l->exe[0]) {
    snprintf(msg, msg_len, "the server's own path and arguments are unknown");
    return -1;
  }
  if (l->restarting) {
    snprintf(msg, msg_len, "a hot restart is already in progress (new pid %ld)", l->new_pid);
    return -1;
  }
  reap_child(l);
  if (l->child_pid > 0 && !l->handed_over) {
    snprintf(msg, msg_len, "the new server of the last hot restart (pid %ld) has not exited yet",
             l->child_pid);
    return -1;
  }
  if (*l->draining || l->handed_over) {
    snprintf(msg, msg_len, "the server is draining");
    return -1;
  }
  if (l->workers->phased.state != PP_PHASED_IDLE) {
    snprintf(msg, msg_len, "a phased restart is in progress (%s)",
             pp_phased_state_name(l->workers->phased.state));
    return -1;
  }
  if (!check_ready(l)) {
    snprintf(msg, msg_len, "the workers are not ready yet");
    return -1;
  }
  if (l->cfg->listen_h3_count) {
    snprintf(msg, msg_len,
             "not with -listen-h3: QUIC connections cannot move to another process "
             "(restart the service instead)");
    return -1;
  }
  int fds[2 * PP_MAX_LISTEN + 1], n = 0;
  char names[(2 * PP_MAX_LISTEN + 1) * 24] = "";
  for (int i = 0; i < l->net->listener_count; i++) {
    listener *ls = &l->net->listeners[i];
    uv_os_fd_t fd;
    if (!ls->open || uv_fileno(&ls->h.handle, &fd) < 0) continue;
    fds[n++] = fd;
    if (n > 1) strcat(names, ":");
    strcat(names, ls->name);
  }
  if (access(l->exe, X_OK) != 0) {
    snprintf(msg, msg_len, "%s: %s", l->exe, strerror(errno));
    return -1;
  }
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) < 0) {
    snprintf(msg, msg_len, "pipe: %s", strerror(errno));
    return -1;
  }
  /* The environment of the new server, built before fork: ours (systemd's variables were
   * cleared from it at start) plus the handover. */
  size_t env_count = 0;
  while (environ[env_count])
    env_count++;
  char **envp = pp_xmalloc((env_count + 8) * sizeof *envp);
  size_t e = 0;
  for (size_t i = 0; i < env_count; i++)
    if (!env_dropped(environ[i])) envp[e++] = environ[i];
  static char listen_fds[32], fdnames[sizeof names + 16], ready_fd[40], listen_pid[32],
      watchdog_usec[48], watchdog_pid[32], notify_socket[sizeof l->notify_socket + 16];
  snprintf(listen_fds, sizeof listen_fds, "LISTEN_FDS=%d", n);
  snprintf(fdnames, sizeof fdnames, "LISTEN_FDNAMES=%s", names);
  snprintf(ready_fd, sizeof ready_fd, "PUMA_PLUS_READY_FD=%d", PP_SD_LISTEN_FDS_START + n);
  envp[e++] = listen_fds;
  envp[e++] = fdnames;
  envp[e++] = ready_fd;
  envp[e++] = listen_pid; /* filled in the child */
  if (l->notify_socket[0]) {
    snprintf(notify_socket, sizeof notify_socket, "NOTIFY_SOCKET=%s", l->notify_socket);
    envp[e++] = notify_socket;
  }
  if (l->watchdog_usec) {
    snprintf(watchdog_usec, sizeof watchdog_usec, "WATCHDOG_USEC=%llu",
             (unsigned long long)l->watchdog_usec);
    envp[e++] = watchdog_usec;
    envp[e++] = watchdog_pid; /* filled in the child */
  }
  envp[e] = NULL;
  /* Signals stay blocked from fork to execve: the child inherits libuv's handlers, which would
   * swallow a SIGTERM meant for it (our drain sends one) into our own signal pipe. */
  sigset_t all, before;
  sigfillset(&all);
  sigprocmask(SIG_SETMASK, &all, &before);
  pid_t pid = fork();
  if (pid == 0) {
    /* The child: only async-signal-safe calls until execve. Default dispositions first (a
     * signal pending now acts when the mask is cleared below). Then move every descriptor above
     * the target range, then into place (dup2 clears close-on-exec on the targets). */
    for (int sig = 1; sig < NSIG; sig++)
      signal(sig, SIG_DFL);
    int base = PP_SD_LISTEN_FDS_START + n + 1, tmp[2 * PP_MAX_LISTEN + 2];
    for (int i = 0; i < n; i++)
      tmp[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, base);
    tmp[n] = fcntl(pipefd[1], F_DUPFD_CLOEXEC, base);
    for (int i = 0; i <= n; i++)
      if (tmp[i] < 0 || dup2(tmp[i], PP_SD_LISTEN_FDS_START + i) < 0) _exit(127);
    long me = (long)getpid();
    env_number(listen_pid, sizeof listen_pid, "LISTEN_PID=", me);
    env_number(watchdog_pid, sizeof watchdog_pid, "WATCHDOG_PID=", me);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execve(l->exe, l->argv, envp);
    _exit(127);
  }
  int fork_errno = errno;
  sigprocmask(SIG_SETMASK, &before, NULL);
  free(envp);
  close(pipefd[1]);
  if (pid < 0) {
    close(pipefd[0]);
    snprintf(msg, msg_len, "fork: %s", strerror(fork_errno));
    return -1;
  }
  l->child_pid = l->new_pid = pid;
  l->restarting = 1;
  uv_pipe_init(l->loop, &l->child_ready, 0);
  l->child_ready.data = l;
  uv_pipe_open(&l->child_ready, pipefd[0]);
  uv_read_start((uv_stream_t *)&l->child_ready, on_child_ready_alloc, on_child_ready);
  LOG_ERR(l, "hot restart: started %s as pid %ld with %d listeners (%s); serving until it is ready",
          l->exe, (long)pid, n, names);
  char note[200];
  snprintf(note, sizeof note,
           "RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS=hot restart: new pid %ld booting",
           (unsigned long long)monotonic_usec(), (long)pid);
  notify(l, note);
  return pid;
}
