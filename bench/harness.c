/* Server processes, readiness, /proc sampling and /stats polling for pp-bench (harness.h).
 * Blocking I/O on purpose: this runs on the main thread before and after a load run, and on
 * the sampler's own thread during it, never on the generator's loop. */
#include "bench/harness.h"
#include "server/base/procmem.h"

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
    last = pb_http_get(host, srv->port, path, 500000000ull, body, sizeof body);
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

/* ---- /proc ---- */

typedef struct proc_entry {
  pid_t pid, ppid, pgid;
  uint64_t rss_pages;
  uint64_t ticks; /* utime + stime, clock ticks, all threads */
  bool zombie;    /* exited, not reaped: no memory, but its CPU time still counts */
} proc_entry;

static bool read_stat(pid_t pid, proc_entry *e) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = 0;
  /* The command name may contain spaces and parentheses: fields start after the last ')'. */
  char *p = strrchr(buf, ')');
  if (!p) return false;
  char state;
  int ppid, pgrp;
  long rss = 0;
  unsigned long long utime, stime;
  /* fields: 3 state 4 ppid 5 pgrp ... 14 utime 15 stime ... 24 rss */
  if (sscanf(p + 2,
             "%c %d %d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d %*d "
             "%*u %*u %ld",
             &state, &ppid, &pgrp, &utime, &stime, &rss) != 6)
    return false;
  e->pid = pid;
  e->ppid = ppid;
  e->pgid = pgrp;
  e->rss_pages = rss > 0 ? (uint64_t)rss : 0;
  e->ticks = utime + stime;
  e->zombie = state == 'Z';
  return true;
}

int pb_smaps_rollup(pid_t pid, uint64_t *rss, uint64_t *pss, uint64_t *uss) {
  return pid < 0 ? -1 : pp_smaps_rollup_read((unsigned)pid, rss, pss, uss);
}

/* The tree of `root`: every process's entry in `all` (of `n`) with in[i] set. */
static int tree_scan(pid_t root, proc_entry **all_out, bool **in_out, size_t *n_out);

int pb_proc_tree(pid_t root, uint32_t *count, uint64_t *rss_bytes) {
  proc_entry *all;
  bool *in;
  size_t n;
  if (tree_scan(root, &all, &in, &n) < 0) return -1;
  uint32_t c = 0;
  uint64_t pages = 0;
  for (size_t i = 0; i < n; i++) {
    if (!in[i] || all[i].zombie) continue;
    c++;
    pages += all[i].rss_pages;
  }
  free(in);
  free(all);
  *count = c;
  *rss_bytes = pages * (uint64_t)sysconf(_SC_PAGESIZE);
  return 0;
}

int pb_proc_tree_mem(pid_t root, pb_tree_mem *out) {
  proc_entry *all;
  bool *in;
  size_t n;
  memset(out, 0, sizeof *out);
  if (tree_scan(root, &all, &in, &n) < 0) return -1;
  uint64_t pages = 0;
  for (size_t i = 0; i < n; i++) {
    if (!in[i] || all[i].zombie) continue;
    out->procs++;
    pages += all[i].rss_pages;
    uint64_t r, p, u;
    if (pb_smaps_rollup(all[i].pid, &r, &p, &u) == 0) {
      out->smaps_procs++;
      out->pss_bytes += p;
      out->uss_bytes += u;
    }
  }
  free(in);
  free(all);
  out->rss_bytes = pages * (uint64_t)sysconf(_SC_PAGESIZE);
  return 0;
}

pb_cpu_times pb_cpu_times_now(void) {
  pb_cpu_times t = {0};
  FILE *f = fopen("/proc/stat", "r");
  if (!f) return t;
  unsigned long long v[8];
  int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                 &v[4], &v[5], &v[6], &v[7]);
  fclose(f);
  if (n != 8) return t;
  t.steal = v[7];
  for (int i = 0; i < 8; i++)
    t.total += v[i];
  t.ok = true;
  return t;
}

double pb_steal_pct(pb_cpu_times before, pb_cpu_times after) {
  if (!before.ok || !after.ok || after.total <= before.total || after.steal < before.steal)
    return -1;
  return 100.0 * (double)(after.steal - before.steal) / (double)(after.total - before.total);
}

void pb_dirname(const char *path, char *out, size_t len) {
  snprintf(out, len, "%s", path);
  char *slash = strrchr(out, '/');
  if (slash)
    *slash = 0;
  else
    snprintf(out, len, ".");
}

int pb_proc_tree_cpu(pid_t root, uint64_t *tree_ticks, uint64_t *root_ticks, uint32_t *procs) {
  proc_entry *all;
  bool *in;
  size_t n;
  if (tree_scan(root, &all, &in, &n) < 0) return -1;
  uint64_t tree = 0, own = 0;
  uint32_t count = 0;
  for (size_t i = 0; i < n; i++) {
    if (!in[i]) continue;
    count++;
    tree += all[i].ticks;
    if (all[i].pid == root) own = all[i].ticks;
  }
  free(in);
  free(all);
  *tree_ticks = tree;
  if (root_ticks) *root_ticks = own;
  if (procs) *procs = count;
  return 0;
}

static int tree_scan(pid_t root, proc_entry **all_out, bool **in_out, size_t *n_out) {
  DIR *d = opendir("/proc");
  if (!d) return -1;
  size_t cap = 512, n = 0;
  proc_entry *all = malloc(cap * sizeof *all);
  if (!all) {
    closedir(d);
    return -1;
  }
  struct dirent *de;
  while ((de = readdir(d))) {
    if (de->d_name[0] < '0' || de->d_name[0] > '9') continue;
    proc_entry e;
    if (!read_stat((pid_t)atoi(de->d_name), &e)) continue;
    if (n == cap) {
      proc_entry *bigger = realloc(all, 2 * cap * sizeof *all);
      if (!bigger) break;
      all = bigger;
      cap *= 2;
    }
    all[n++] = e;
  }
  closedir(d);
  /* In the tree: the root's process group, or a descendant of anything in the tree. Iterate to
   * a fixed point (trees here are a handful of processes deep). */
  bool *in = calloc(n ? n : 1, sizeof *in);
  if (!in) {
    free(all);
    return -1;
  }
  for (size_t i = 0; i < n; i++)
    in[i] = all[i].pid == root || all[i].pgid == root;
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < n; i++) {
      if (in[i]) continue;
      for (size_t j = 0; j < n; j++) {
        if (in[j] && all[i].ppid == all[j].pid) {
          in[i] = changed = true;
          break;
        }
      }
    }
  }
  *all_out = all;
  *in_out = in;
  *n_out = n;
  return 0;
}

/* ---- JSON ---- */

static bool find_number(json_t *j, const char *key, double *out) {
  if (json_is_object(j)) {
    json_t *v = json_object_get(j, key);
    if (v && json_is_number(v)) {
      *out = json_number_value(v);
      return true;
    }
    const char *k;
    json_t *child;
    json_object_foreach(j, k, child) {
      if (find_number(child, key, out)) return true;
    }
  } else if (json_is_array(j)) {
    size_t i;
    json_t *child;
    json_array_foreach(j, i, child) {
      if (find_number(child, key, out)) return true;
    }
  }
  return false;
}

bool pb_json_find_number(const char *json, const char *key, double *out) {
  json_error_t e;
  json_t *root = json_loads(json, 0, &e);
  if (!root) return false;
  bool ok = find_number(root, key, out);
  json_decref(root);
  return ok;
}

bool pb_stats_parse(const char *json, pb_server_stats *out) {
  json_error_t e;
  json_t *root = json_loads(json, 0, &e);
  if (!root) return false;
  out->workers = out->queue_p95_ms = out->queue_p95_lifetime_ms = out->queue_depth = -1;
  out->workers_parked = out->activations = -1;
  out->activation_count = out->activation_p50_ms = out->activation_p99_ms = -1;
  out->activation_max_ms = -1;
  out->activation_recent_n = 0;
  json_t *v = json_object_get(root, "workers");
  if (json_is_number(v)) out->workers = json_number_value(v);
  json_t *co = json_object_get(root, "controller");
  v = json_object_get(co, "workers_standby");
  if (json_is_number(v)) out->workers_parked = json_number_value(v);
  v = json_object_get(co, "activations");
  if (json_is_number(v)) out->activations = json_number_value(v);
  json_t *act = json_object_get(co, "activation");
  if (json_is_object(act)) {
    v = json_object_get(act, "count");
    if (json_is_number(v)) out->activation_count = json_number_value(v);
    v = json_object_get(act, "p50_ms");
    if (json_is_number(v)) out->activation_p50_ms = json_number_value(v);
    v = json_object_get(act, "p99_ms");
    if (json_is_number(v)) out->activation_p99_ms = json_number_value(v);
    v = json_object_get(act, "max_ms");
    if (json_is_number(v)) out->activation_max_ms = json_number_value(v);
    json_t *recent = json_object_get(act, "recent_ms");
    size_t i;
    json_t *x;
    json_array_foreach(recent, i, x) {
      if (out->activation_recent_n < 32 && json_is_number(x))
        out->activation_recent_ms[out->activation_recent_n++] = json_number_value(x);
    }
  }
  json_t *q = json_object_get(root, "queue");
  if (json_is_object(q)) {
    v = json_object_get(q, "depth");
    if (json_is_number(v)) out->queue_depth = json_number_value(v);
    v = json_object_get(json_object_get(q, "window"), "p95_ms");
    if (json_is_number(v)) out->queue_p95_ms = json_number_value(v);
    v = json_object_get(json_object_get(q, "lifetime"), "p95_ms");
    if (json_is_number(v)) out->queue_p95_lifetime_ms = json_number_value(v);
  }
  json_decref(root);
  return true;
}

/* ---- sampler ---- */

struct pb_sampler {
  uv_thread_t thread;
  uv_mutex_t lock;
  uv_cond_t cond;
  bool stop;
  pid_t root;
  char host[64];
  int stats_port;
  char stats_path[128];
  uint64_t t0;
  pb_sample *samples;
  size_t n, cap;
  double last_lifetime_p95_ms;
  pb_server_stats last; /* the last /stats that parsed */
  bool have_last;
};

static void take_sample(pb_sampler *s) {
  pb_sample x = {.queue_p95_ms = -1, .workers = -1, .queue_depth = -1, .workers_parked = -1};
  uint64_t now = uv_hrtime();
  x.t_ns = now > s->t0 ? now - s->t0 : 0;
  pb_tree_mem mem;
  if (pb_proc_tree_mem(s->root, &mem) == 0) {
    x.procs = mem.procs;
    x.rss_bytes = mem.rss_bytes;
    if (mem.procs && mem.smaps_procs == mem.procs) {
      x.pss_bytes = mem.pss_bytes;
      x.uss_bytes = mem.uss_bytes;
    }
  }
  if (s->stats_port) {
    char *body = malloc(65536);
    pb_server_stats st;
    if (body &&
        pb_http_get(s->host, s->stats_port, s->stats_path, 500000000ull, body, 65536) == 200 &&
        pb_stats_parse(body, &st)) {
      x.queue_p95_ms = st.queue_p95_ms;
      x.workers = st.workers;
      x.queue_depth = st.queue_depth;
      x.workers_parked = st.workers_parked;
      s->last_lifetime_p95_ms = st.queue_p95_lifetime_ms;
      s->last = st;
      s->have_last = true;
    }
    free(body);
  }
  if (s->n == s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 256;
    pb_sample *bigger = realloc(s->samples, cap * sizeof *bigger);
    if (!bigger) return;
    s->samples = bigger;
    s->cap = cap;
  }
  s->samples[s->n++] = x;
}

static void sampler_main(void *arg) {
  pb_sampler *s = arg;
  uint64_t next = uv_hrtime();
  uv_mutex_lock(&s->lock);
  while (!s->stop) {
    uint64_t now = uv_hrtime();
    if (now >= next) {
      uv_mutex_unlock(&s->lock);
      take_sample(s);
      uv_mutex_lock(&s->lock);
      next += 1000000000ull;
      continue;
    }
    uv_cond_timedwait(&s->cond, &s->lock, next - now);
  }
  uv_mutex_unlock(&s->lock);
}

int pb_sampler_start(pb_sampler **out, pid_t root, const char *host, int stats_port,
                     const char *stats_path, uint64_t t0_ns) {
  pb_sampler *s = calloc(1, sizeof *s);
  if (!s) return -1;
  s->root = root;
  snprintf(s->host, sizeof s->host, "%s", host);
  s->stats_port = stats_port;
  snprintf(s->stats_path, sizeof s->stats_path, "%s", stats_path ? stats_path : "/stats");
  s->t0 = t0_ns;
  s->last_lifetime_p95_ms = -1;
  uv_mutex_init(&s->lock);
  uv_cond_init(&s->cond);
  if (uv_thread_create(&s->thread, sampler_main, s) != 0) {
    uv_mutex_destroy(&s->lock);
    uv_cond_destroy(&s->cond);
    free(s);
    return -1;
  }
  *out = s;
  return 0;
}

void pb_sampler_stop_stats(pb_sampler *s, pb_sample **samples, size_t *n, pb_server_stats *last) {
  if (last) {
    if (s->have_last) {
      *last = s->last;
    } else {
      pb_stats_parse("{}", last);
    }
  }
  pb_sampler_stop(s, samples, n, NULL);
}

void pb_sampler_stop(pb_sampler *s, pb_sample **samples, size_t *n, double *lifetime_p95_ms) {
  uv_mutex_lock(&s->lock);
  s->stop = true;
  uv_cond_signal(&s->cond);
  uv_mutex_unlock(&s->lock);
  uv_thread_join(&s->thread);
  uv_mutex_destroy(&s->lock);
  uv_cond_destroy(&s->cond);
  *samples = s->samples;
  *n = s->n;
  if (lifetime_p95_ms) *lifetime_p95_ms = s->last_lifetime_p95_ms;
  free(s);
}
