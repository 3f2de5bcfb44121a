/* Server processes for pp-bench (harness.h): the command line of each server kind, start in its
 * own process group, readiness, and stop (SIGTERM to the group, SIGKILL after the grace period,
 * reaped). Blocking, on the main thread, never on the generator's loop. */
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

/* ---- argv ---- */

typedef struct argv_builder {
  char **argv;
  int max, n;
  char *store;
  size_t left;
  bool overflow;
} argv_builder;

static void add(argv_builder *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(argv_builder *b, const char *fmt, ...) {
  if (b->n + 1 >= b->max) {
    b->overflow = true;
    return;
  }
  va_list ap;
  va_start(ap, fmt);
  int len = vsnprintf(b->store, b->left, fmt, ap);
  va_end(ap);
  if (len < 0 || (size_t)len >= b->left) {
    b->overflow = true;
    return;
  }
  b->argv[b->n++] = b->store;
  b->argv[b->n] = NULL;
  b->store += len + 1;
  b->left -= (size_t)len + 1;
}

int pb_server_argv(const pb_server_spec *s, char **argv, int max, char *storage,
                   size_t storage_len) {
  argv_builder b = {.argv = argv, .max = max, .store = storage, .left = storage_len};
  if (max < 1) return -1;
  argv[0] = NULL;
  if (s->kind == PB_SERVER_NULL) {
    add(&b, "%s", s->null_bin[0] ? s->null_bin : "pp-bench");
    add(&b, "null-server");
    add(&b, "-port");
    add(&b, "%d", s->port);
    if (s->h2c || s->h3) {
      add(&b, "-proto");
      add(&b, s->h3 ? "h3" : "h2");
    }
    if (s->null_leak_every) {
      add(&b, "-leak-every");
      add(&b, "%u", s->null_leak_every);
    }
    return b.overflow ? -1 : b.n;
  }
  bool bundled = s->gemfile[0] && (s->kind == PB_SERVER_PUMA || s->kind == PB_SERVER_FALCON);
  if (bundled) {
    add(&b, "bundle");
    add(&b, "exec");
  }
  if (s->kind == PB_SERVER_FALCON) {
    /* falcon serve: fibers, so only processes count (--count); --forked is its default model,
     * spelled out so a changed default cannot change the comparison. */
    add(&b, "falcon");
    add(&b, "serve");
    add(&b, "--bind");
    add(&b, "http://127.0.0.1:%d", s->port);
    add(&b, "--count");
    add(&b, "%u", s->workers);
    add(&b, "--forked");
    add(&b, "--config");
    add(&b, "%s", s->app);
    return b.overflow ? -1 : b.n;
  }
  int puma = s->kind == PB_SERVER_PUMA;
  /* puma, or the gem's CLI (docs/CONFIG.md), which execs puma-plus-server in place (same pid).
   * Both take puma's flag names, so the two servers get the same shape word for word. */
  if (puma) {
    add(&b, "%s", s->puma_bin[0] && !bundled ? s->puma_bin : "puma");
    add(&b, "--no-config");
  } else {
    add(&b, "%s", s->pumaplus_bin[0] ? s->pumaplus_bin : "puma-plus");
  }
  add(&b, "-e");
  add(&b, "production");
  add(&b, "-w");
  add(&b, "%u", s->workers);
  add(&b, "-t");
  add(&b, "%u:%u", s->threads, s->threads);
  if (!puma && s->ractors) {
    add(&b, "--ractors");
    add(&b, "%u", s->threads);
  }
  add(&b, "-b");
  add(&b, "tcp://127.0.0.1:%d", s->port);
  if (puma) {
    add(&b, "%s", s->app);
  } else {
    /* The control app gets a private port: the default 9293 would collide between runs. */
    add(&b, "--control-url");
    add(&b, "tcp://127.0.0.1:%d", s->stats_port ? s->stats_port : s->port + 1);
    if (s->server_bin[0]) {
      add(&b, "--server");
      add(&b, "%s", s->server_bin);
    }
    add(&b, "%s", s->app);
    add(&b, "--");
    add(&b, "-quiet");
    if (s->h2c) add(&b, "-h2c");
    if (s->h3) {
      add(&b, "-listen-h3");
      add(&b, "127.0.0.1:%d", s->port);
    }
    if (s->autoscale) {
      add(&b, "-autoscale");
      if (s->policy_path[0]) {
        add(&b, "-policy");
        add(&b, "%s", s->policy_path);
      }
      if (s->max_workers) {
        add(&b, "-max-workers");
        add(&b, "%u", s->max_workers);
      }
      if (s->decision_log[0]) {
        add(&b, "-decision-log");
        add(&b, "%s", s->decision_log);
      }
    }
    if (s->shed) {
      add(&b, "-shed");
      if (!s->autoscale && s->policy_path[0]) {
        add(&b, "-policy");
        add(&b, "%s", s->policy_path);
      }
    }
  }
  return b.overflow ? -1 : b.n;
}

int pb_server_start(const pb_server_spec *spec, pb_server *srv, char *err, size_t errlen) {
  char *argv[40];
  char storage[4096];
  memset(srv, 0, sizeof *srv);
  if (pb_server_argv(spec, argv, 40, storage, sizeof storage) < 0) {
    snprintf(err, errlen, "%s: server command line too long", spec->name);
    return -1;
  }
  int logfd = open(spec->log_path[0] ? spec->log_path : "/dev/null",
                   O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (logfd < 0) {
    snprintf(err, errlen, "%s: cannot open log %s: %s", spec->name, spec->log_path,
             strerror(errno));
    return -1;
  }
  /* A pipe reports exec failure (its write end closes on a successful exec). */
  int pfd[2];
  if (pipe2(pfd, O_CLOEXEC) < 0) {
    close(logfd);
    snprintf(err, errlen, "pipe: %s", strerror(errno));
    return -1;
  }
  pid_t pid = fork();
  if (pid < 0) {
    snprintf(err, errlen, "fork: %s", strerror(errno));
    close(logfd);
    close(pfd[0]);
    close(pfd[1]);
    return -1;
  }
  if (pid == 0) {
    setpgid(0, 0);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    dup2(logfd, 1);
    dup2(logfd, 2);
    setenv("RACK_ENV", "production", 1);
    if (spec->gemfile[0]) pb_rubygems_env_apply(spec->gem_home, spec->gemfile);
    execvp(argv[0], argv);
    int e = errno;
    ssize_t w = write(pfd[1], &e, sizeof e);
    (void)w;
    _exit(127);
  }
  setpgid(pid, pid); /* also from the parent, so kill(-pid) works at once */
  close(logfd);
  close(pfd[1]);
  int child_errno = 0;
  ssize_t r = read(pfd[0], &child_errno, sizeof child_errno);
  close(pfd[0]);
  if (r == (ssize_t)sizeof child_errno) {
    waitpid(pid, NULL, 0);
    snprintf(err, errlen, "%s: cannot run %s: %s", spec->name, argv[0], strerror(child_errno));
    return -1;
  }
  srv->pid = pid;
  srv->port = spec->port;
  return 0;
}

void pb_rubygems_env_apply(const char *gem_home, const char *gemfile) {
  static const char *const column_keys[] = {
      "GEM_HOME",          "GEM_PATH",         "BUNDLE_GEMFILE", "BUNDLE_FROZEN",
      "BUNDLE_APP_CONFIG", "BUNDLE_USER_HOME", "RUBYOPT",        "BUNDLE_BIN_PATH"};
  for (size_t i = 0; i < sizeof column_keys / sizeof column_keys[0]; i++)
    unsetenv(column_keys[i]);
  if (!gemfile || !gemfile[0]) return;
  char buf[600];
  setenv("GEM_HOME", gem_home, 1);
  setenv("BUNDLE_GEMFILE", gemfile, 1);
  setenv("BUNDLE_FROZEN", "true", 1);
  snprintf(buf, sizeof buf, "%s/.bundle-config", gem_home);
  setenv("BUNDLE_APP_CONFIG", buf, 1);
  snprintf(buf, sizeof buf, "%s/.bundle-home", gem_home);
  setenv("BUNDLE_USER_HOME", buf, 1);
}

static bool reap(pb_server *srv) {
  if (srv->exited) return true;
  int st;
  pid_t r = waitpid(srv->pid, &st, WNOHANG);
  if (r == srv->pid) {
    srv->exited = true;
    srv->status = st;
  }
  return srv->exited;
}

static void sleep_ns(uint64_t ns) {
  struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000u), .tv_nsec = (long)(ns % 1000000000u)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

int pb_server_wait_ready(pb_server *srv, const char *host, const char *path, uint64_t timeout_ns,
                         char *err, size_t errlen) {
  uint64_t deadline = uv_hrtime() + timeout_ns;
  int last = -1;
  while (uv_hrtime() < deadline) {
    if (reap(srv)) {
      snprintf(err, errlen, "server exited before answering (status %d)",
               WIFEXITED(srv->status) ? WEXITSTATUS(srv->status) : -WTERMSIG(srv->status));
      return -1;
    }
    char body[256];
    /* Each probe may take as long as the path does (a scenario's /mix/0/500 sleeps 500 ms:
     * a 500 ms probe timeout failed it whenever the answer came a millisecond late), up to 5 s
     * and the deadline. */
    uint64_t now = uv_hrtime();
    uint64_t per = deadline > now ? deadline - now : 0;
    if (per > 5000000000ull) per = 5000000000ull;
    if (per < 100000000ull) per = 100000000ull;
    last = pb_http_get(host, srv->port, path, per, body, sizeof body);
    if (last >= 200 && last <= 299) return 0;
    sleep_ns(100000000ull);
  }
  snprintf(err, errlen, "server did not answer GET %s with 2xx within %.0fs (last: %d)", path,
           timeout_ns / 1e9, last);
  return -1;
}

void pb_server_stop(pb_server *srv, uint64_t grace_ns) {
  if (srv->pid <= 0) return;
  kill(-srv->pid, SIGTERM);
  uint64_t deadline = uv_hrtime() + grace_ns;
  while (!reap(srv) && uv_hrtime() < deadline)
    sleep_ns(20000000ull);
  /* The leader may be gone while children of its group linger: sweep the group either way. */
  kill(-srv->pid, SIGKILL);
  if (!srv->exited) {
    waitpid(srv->pid, &srv->status, 0);
    srv->exited = true;
  }
}
