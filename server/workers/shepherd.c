/* The shepherd link (see shepherd.h). The control channel is fd 3 of the shepherd, one
 * end of a socketpair; frames are few (a handful per worker lifetime), so each goes out in
 * its own pooled chunk. */
#include "server/workers/shepherd.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "server/process/server_int.h"

static void on_ctl_write(uv_write_t *wr, int status) {
  wchunk *k = (wchunk *)wr;
  (void)status;
  pp_chunk_put(k->net, k);
}

static void ctl_send(server *s, const pp_wire_frame *f) {
  if (!s->workers.ctl_open) return;
  wchunk *k = pp_chunk_get(&s->net, 0);
  k->len = (size_t)pp_wire_encode(f, k->data, k->cap);
  pp_chunk_send(&s->net, (uv_stream_t *)&s->workers.ctl, k, on_ctl_write);
}

void pp_shepherd_spawn(server *s, uint32_t n) {
  pp_wire_frame f;
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_SPAWN;
  f.count = n;
  s->workers.spawns_pending += n;
  s->workers.last_spawn_ns = pp_now_ns();
  ctl_send(s, &f);
}

void pp_shepherd_standby(server *s, uint32_t n) {
  pp_standby *sb = &s->ops.ctl.standby;
  if (!sb->enabled || !n) return;
  pp_wire_frame f;
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_STANDBY;
  f.count = n;
  sb->pending += n;
  sb->last_request_ns = pp_now_ns();
  ctl_send(s, &f);
}

void pp_shepherd_activate(server *s, pp_worker *w, int64_t decided_ns) {
  pp_standby *sb = &s->ops.ctl.standby;
  if (!sb->enabled || w->state != PP_WORKER_PARKED) return;
  pp_wire_frame f;
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_ACTIVATE;
  f.pid = w->pid;
  ctl_send(s, &f);
  /* booting until its first slot connects (HELLO), as any worker; in workers_wanted from now */
  w->state = PP_WORKER_BOOTING;
  w->activated_ns = decided_ns;
  w->forked_ns = pp_now_ns();
  s->workers.workers_wanted++;
  sb->activations++;
  LOG(s, "activating standby worker %u (pid %u), parked %.0f ms", w->index, w->pid,
      (pp_now_ns() - w->parked_ns) / 1e6);
}

/* PARKED: a standby worker booted and waits. Its HELLOs will carry worker_index. */
static void on_parked(server *s, const pp_wire_frame *f, int64_t now) {
  pp_standby *sb = &s->ops.ctl.standby;
  if (sb->pending) sb->pending--;
  sb->parked_total++;
  pp_worker *w = pp_registry_find(&s->workers.reg, f->pid);
  if (w) {
    LOG_ERR(s, "PARKED for pid %u, which is already a %s worker; ignored", f->pid,
            w->state == PP_WORKER_PARKED ? "parked" : "serving");
    return;
  }
  w = pp_registry_add(&s->workers.reg, f->pid, f->worker_index, now);
  if (!w) {
    LOG_ERR(s, "worker registry full: standby pid %u not tracked", f->pid);
    return;
  }
  w->state = PP_WORKER_PARKED;
  w->parked_ns = now;
  LOG(s, "standby worker %u parked (pid %u, booted in %.1f ms)", f->worker_index, f->pid,
      f->boot_ns / 1e6);
}

void pp_shepherd_retire_if_drained(server *s, pp_worker *w) {
  if (!w || w->state != PP_WORKER_RETIRING || w->busy || w->retire_sent) return;
  w->retire_sent = 1;
  pp_wire_frame f;
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_RETIRE;
  f.pid = w->pid;
  ctl_send(s, &f);
  LOG(s, "retiring worker %u (pid %u)", w->index, w->pid);
}

void pp_shepherd_retire(server *s, pp_worker *w) {
  pp_registry_retire(&s->workers.reg, w);
  pp_shepherd_retire_if_drained(s, w);
}

/* Asks for as many workers as are missing from workers_wanted. */
static void respawn_missing(server *s) {
  if (s->stopping || s->draining) return;
  if (!s->workers.shepherd_alive || !s->workers.ctl_open)
    return; /* the restarted shepherd will catch up */
  uint32_t alive = pp_registry_count(&s->workers.reg, PP_WORKER_READY) +
                   pp_registry_count(&s->workers.reg, PP_WORKER_BOOTING) +
                   s->workers.spawns_pending;
  if (alive < s->workers.workers_wanted) {
    s->core.stats.worker_restarts++;
    LOG(s, "respawning (%u of %u workers alive)", alive, s->workers.workers_wanted);
    pp_shepherd_spawn(s, s->workers.workers_wanted - alive);
  }
}

static void on_respawn_timer(uv_timer_t *t) {
  respawn_missing(t->data);
}

static void on_exited(server *s, const pp_wire_frame *f, int64_t now) {
  pp_worker *w = pp_registry_find(&s->workers.reg, f->pid);
  pp_standby *sb = &s->ops.ctl.standby;
  if (!w && sb->pending) {
    /* A pid the server never heard of: a standby worker that died before it parked (standby
     * forks send no FORKED). The controller refills the pool. */
    sb->pending--;
    LOG_ERR(s, "standby worker pid %u exited (status %d) before it parked", f->pid, f->exit_status);
    return;
  }
  if (w && w->state == PP_WORKER_PARKED) {
    pp_registry_remove(&s->workers.reg, w);
    if (!s->stopping)
      LOG_ERR(s, "parked standby worker pid %u exited (status %d)", f->pid, f->exit_status);
    return;
  }
  int retiring = w && w->state == PP_WORKER_RETIRING;
  int64_t w_forked_ns = w ? w->forked_ns : 0;
  if (w) {
    /* its connections are closed (or closing); detach whatever is left */
    pp_wlink_close_pid(&s->workers, f->pid);
    pp_registry_remove(&s->workers.reg, w);
  }
  if (f->exit_status < 0)
    LOG_ERR(s, "worker pid %u exited by signal %d", f->pid, -f->exit_status);
  else
    LOG(s, "worker pid %u exited with status %d", f->pid, f->exit_status);
  if (s->stopping || retiring) return;
  /* A worker that dies young (within 1 s of its fork) is respawned with a growing delay
   * (100 ms doubling to 5 s), so an app that cannot boot does not fork in a tight loop. */
  int young = w_forked_ns && now - w_forked_ns < 1000000000LL;
  if (!young)
    s->workers.respawn_delay_ms = 0;
  else
    s->workers.respawn_delay_ms =
        s->workers.respawn_delay_ms ? s->workers.respawn_delay_ms * 2 : 100;
  if (s->workers.respawn_delay_ms > 5000) s->workers.respawn_delay_ms = 5000;
  if (s->workers.respawn_delay_ms) {
    LOG_ERR(s, "worker died %.0f ms after its fork; respawning in %u ms", (now - w_forked_ns) / 1e6,
            s->workers.respawn_delay_ms);
    uv_timer_start(&s->workers.respawn_timer, on_respawn_timer, s->workers.respawn_delay_ms, 0);
  } else {
    respawn_missing(s);
  }
}

static void ctl_frame(server *s, const pp_wire_frame *f) {
  int64_t now = pp_now_ns();
  switch (f->type) {
  case PP_WIRE_READY:
    s->workers.boot_ns = f->boot_ns;
    s->workers.shepherd_ever_ready = 1;
    LOG(s, "shepherd (pid %u) loaded the app in %.1f ms", f->pid, f->boot_ns / 1e6);
    break;
  case PP_WIRE_FORKED:
    if (s->workers.spawns_pending) s->workers.spawns_pending--;
    pp_registry_add(&s->workers.reg, f->pid, f->worker_index, now);
    LOG(s, "worker %u forked (pid %u)", f->worker_index, f->pid);
    break;
  case PP_WIRE_EXITED: on_exited(s, f, now); break;
  case PP_WIRE_PARKED:
    if (s->ops.ctl.standby.enabled)
      on_parked(s, f, now);
    else /* a shepherd started without --standby never sends it */
      LOG_ERR(s, "control channel: PARKED from a shepherd started without --standby");
    break;
  default:
    LOG_ERR(s, "control channel: unexpected frame %s from the shepherd",
            pp_wire_type_name(f->type));
  }
}

static void on_ctl_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  server *s = h->data;
  (void)suggested;
  pp_buf_reserve(&s->workers.ctl_rbuf, 4096);
  *buf = uv_buf_init((char *)s->workers.ctl_rbuf.data + s->workers.ctl_rbuf.len,
                     (unsigned)(s->workers.ctl_rbuf.cap - s->workers.ctl_rbuf.len));
}

static void on_ctl_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf) {
  server *s = st->data;
  (void)buf;
  if (nread < 0) {
    if (!s->stopping) LOG_ERR(s, "control channel to the shepherd closed");
    uv_read_stop(st);
    return;
  }
  s->workers.ctl_rbuf.len += (size_t)nread;
  size_t pos = 0;
  for (;;) {
    pp_wire_frame f;
    size_t need;
    ssize_t n = pp_wire_decode(&s->workers.ctl_dec, s->workers.ctl_rbuf.data + pos,
                               s->workers.ctl_rbuf.len - pos, &f, &need);
    if (n < 0) {
      LOG_ERR(s, "control channel: protocol error: %s", pp_wire_strerror((int)n));
      uv_read_stop(st);
      return;
    }
    if (n == 0) {
      if (need > s->workers.ctl_rbuf.cap - pos) pp_buf_reserve(&s->workers.ctl_rbuf, need);
      break;
    }
    pos += (size_t)n;
    ctl_frame(s, &f);
  }
  pp_buf_consume(&s->workers.ctl_rbuf, pos);
}

static void shepherd_lost(server *s, int64_t status, int sig);

static void on_shepherd_exit(uv_process_t *p, int64_t status, int sig) {
  server *s = p->data;
  s->workers.shepherd_alive = 0;
  uv_close((uv_handle_t *)p, NULL);
  if (s->stopping) {
    LOG(s, "shepherd exited; bye");
    s->hooks.exit(s, s->exit_code);
    return;
  }
  if (!s->workers.shepherd_ever_ready) {
    /* The first shepherd never loaded the app (a broken config.ru, a missing gem): a
     * restart would fail the same way, so this is a start-up error. */
    LOG_ERR(s, "shepherd exited before loading the app (status %lld, signal %d); stopping",
            (long long)status, sig);
    s->hooks.exit(s, 1);
    return;
  }
  shepherd_lost(s, status, sig);
}

static int file_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

int pp_shepherd_find_gem(server *s, const char *argv0) {
  const char *dir = s->cfg->gem_dir;
  if (!dir) dir = getenv("PUMA_PLUS_GEM_DIR");
  char probe[2 * PATH_MAX];
  if (dir) {
    if (snprintf(s->workers.gem_dir, sizeof s->workers.gem_dir, "%s", dir) >=
        (int)sizeof s->workers.gem_dir)
      return -1;
    if (snprintf(probe, sizeof probe, "%s/exe/puma-plus-shepherd", dir) >= (int)sizeof probe)
      return -1;
    return file_exists(probe) ? 0 : -1;
  }
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) {
    if (!argv0 || !realpath(argv0, exe)) return -1;
  } else {
    exe[n] = 0;
  }
  char *slash = strrchr(exe, '/');
  if (slash) *slash = 0;
  static const char *rel[] = {"/../../gem", "/../gem", "/../../../gem", "/../share/puma-plus/gem",
                              "/gem"};
  for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
    if (snprintf(probe, sizeof probe, "%s%s/exe/puma-plus-shepherd", exe, rel[i]) >=
        (int)sizeof probe)
      continue;
    if (!file_exists(probe)) continue;
    if (snprintf(probe, sizeof probe, "%s%s", exe, rel[i]) >= (int)sizeof probe) continue;
    char real[PATH_MAX];
    const char *found = realpath(probe, real) ? real : probe;
    if (snprintf(s->workers.gem_dir, sizeof s->workers.gem_dir, "%s", found) >=
        (int)sizeof s->workers.gem_dir)
      continue;
    return 0;
  }
#ifdef PP_SOURCE_GEM_DIR
  /* A build directory outside the checkout: the checkout's gem/, known when CMake ran. */
  if (snprintf(probe, sizeof probe, "%s/exe/puma-plus-shepherd", PP_SOURCE_GEM_DIR) <
          (int)sizeof probe &&
      file_exists(probe) &&
      snprintf(s->workers.gem_dir, sizeof s->workers.gem_dir, "%s", PP_SOURCE_GEM_DIR) <
          (int)sizeof s->workers.gem_dir)
    return 0;
#endif
  return -1;
}

static void on_ctl_closed(uv_handle_t *h);

void pp_shepherd_cmd_init(server *s, pp_shepherd_cmd *c, uint32_t workers,
                          const uint32_t *standby) {
  snprintf(c->libdir, sizeof c->libdir, "-I%s/lib", s->workers.gem_dir);
  snprintf(c->exe, sizeof c->exe, "%s/exe/puma-plus-shepherd", s->workers.gem_dir);
  snprintf(c->threads, sizeof c->threads, "%u", pp_config_slots_initial(s->cfg));
  snprintf(c->workers, sizeof c->workers, "%u", workers);
  c->standby[0] = 0;
  c->extdir[0] = 0;
  size_t n = 0;
  char **a = c->args;
  a[n++] = (char *)s->cfg->ruby;
#if defined(PP_SOURCE_GEM_DIR) && defined(PP_BUILD_EXT_LIB)
  /* The checkout's gem/ has no compiled codec of its own: this build's goes first on the load
   * path, so in-tree runs (make run, the tests, pp-bench) use the C codec as an installed gem
   * does, not the pure-Ruby one (PUMA_PLUS_PURE_RUBY=1 still forces that). */
  char probe[8300], here[PATH_MAX], source[PATH_MAX];
  if (realpath(s->workers.gem_dir, here) && realpath(PP_SOURCE_GEM_DIR, source) &&
      strcmp(here, source) == 0 &&
      snprintf(probe, sizeof probe, "%s/puma_plus/puma_plus_ext.so", PP_BUILD_EXT_LIB) <
          (int)sizeof probe &&
      access(probe, R_OK) == 0) {
    snprintf(c->extdir, sizeof c->extdir, "-I%s", PP_BUILD_EXT_LIB);
    a[n++] = c->extdir;
  }
#endif
  a[n++] = c->libdir, a[n++] = c->exe;
  a[n++] = "--app", a[n++] = (char *)s->cfg->app;
  a[n++] = "--threads", a[n++] = c->threads;
  a[n++] = "--socket", a[n++] = s->workers.socket_path;
  a[n++] = "--workers", a[n++] = c->workers;
  if (standby) { /* docs/CONTROL.md section 8: the flag negotiates the standby frames */
    snprintf(c->standby, sizeof c->standby, "%u", *standby);
    a[n++] = "--standby", a[n++] = c->standby;
  }
  if (s->cfg->fibers) a[n++] = "--fibers"; /* the --threads slots are fibers */
  a[n] = NULL;
}

/* Starts a shepherd that forks `initial` workers after READY. 0, or -1 (logged). */
static int shepherd_launch(server *s, uint32_t initial) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
    LOG_ERR(s, "socketpair: %s", strerror(errno));
    return -1;
  }
  uv_pipe_init(s->loop, &s->workers.ctl, 0);
  s->workers.ctl.data = s;
  uv_pipe_open(&s->workers.ctl, sv[0]);
  s->workers.ctl_open = 1;
  pp_standby *sb = &s->ops.ctl.standby;
  pp_shepherd_cmd cmd;
  pp_shepherd_cmd_init(s, &cmd, initial, sb->enabled ? &sb->k : NULL);
  if (sb->enabled) {
    sb->pending = sb->k; /* the shepherd forks K standby workers after the initial ones */
    sb->last_request_ns = pp_now_ns();
  }
  uv_stdio_container_t stdio[4];
  for (int i = 0; i < 3; i++)
    stdio[i].flags = UV_INHERIT_FD, stdio[i].data.fd = i;
  stdio[3].flags = UV_INHERIT_FD;
  stdio[3].data.fd = sv[1];
  uv_process_options_t opt;
  memset(&opt, 0, sizeof opt);
  opt.file = s->cfg->ruby;
  opt.args = cmd.args;
  opt.exit_cb = on_shepherd_exit;
  opt.stdio = stdio;
  opt.stdio_count = 4;
  s->workers.shepherd.data = s;
  int rc = uv_spawn(s->loop, &s->workers.shepherd, &opt);
  close(sv[1]);
  if (rc < 0) {
    LOG_ERR(s, "cannot start the shepherd (%s %s): %s", s->cfg->ruby, cmd.exe, uv_strerror(rc));
    s->workers.ctl_open = 0;
    s->workers.ctl_closing = 1;
    uv_close((uv_handle_t *)&s->workers.ctl, on_ctl_closed);
    return -1;
  }
  s->workers.shepherd_alive = 1;
  s->workers.shepherd_pid = (uint32_t)s->workers.shepherd.pid;
  s->workers.shepherd_started_ns = pp_now_ns();
  s->workers.spawns_pending = initial; /* the shepherd forks --workers at start */
  s->workers.last_spawn_ns = pp_now_ns();
  LOG(s, "shepherd pid %d: %s %s%s%s %s --app %s --threads %s --socket %s --workers %s%s%s%s",
      s->workers.shepherd.pid, s->cfg->ruby, cmd.extdir, cmd.extdir[0] ? " " : "", cmd.libdir,
      cmd.exe, s->cfg->app, cmd.threads, s->workers.socket_path, cmd.workers,
      sb->enabled ? " --standby " : "", cmd.standby, s->cfg->fibers ? " --fibers" : "");
  uv_read_start((uv_stream_t *)&s->workers.ctl, on_ctl_alloc, on_ctl_read);
  return 0;
}

int pp_shepherd_start(server *s) {
  return shepherd_launch(s, s->workers.workers_wanted);
}

void pp_shepherd_stop(server *s) {
  if (s->stopping) return;
  s->stopping = 1;
  s->stop_sent_ns = pp_now_ns();
  if (!s->workers.shepherd_alive) s->hooks.exit(s, s->exit_code);
  pp_wire_frame f;
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_STOP;
  f.grace_ms = 5000;
  ctl_send(s, &f);
  LOG(s, "drained; stopping the workers");
}

/* ---------------------------------------------------------------- supervision
 *
 * The shepherd is a Ruby process and can die (a bug, the OOM killer, an operator's kill).
 * Its workers do not depend on it once forked: they keep serving, and because the server is
 * a child subreaper they become the server's children. The server starts a new shepherd
 * (backoff: 100 ms, doubling while shepherds die within 10 s of their start, at most 10 s),
 * with --workers 0, tells it about every live worker (ADOPT) so that it reuses none of their
 * indexes, then SPAWNs only what is missing from workers_wanted. Adopted workers are reaped
 * here (the shepherd cannot reap what it did not fork) and reported to the shepherd
 * (ADOPTED_EXITED) and to the registry as an EXITED would be. */

#define SHEPHERD_RESTART_MIN_MS 100
#define SHEPHERD_RESTART_MAX_MS 10000
#define SHEPHERD_YOUNG_NS       10000000000LL

static void on_ctl_closed(uv_handle_t *h) {
  server *s = h->data;
  s->workers.ctl_closing = 0;
}

static void shepherd_restart(server *s);

static void on_shepherd_timer(uv_timer_t *t) {
  server *s = t->data;
  if (s->stopping || s->draining || s->workers.shepherd_alive) return;
  if (s->workers.ctl_closing) { /* the old control pipe's close callback has not run yet */
    uv_timer_start(&s->workers.shepherd_timer, on_shepherd_timer, 10, 0);
    return;
  }
  shepherd_restart(s);
}

static void shepherd_lost(server *s, int64_t status, int sig) {
  int64_t lived = pp_now_ns() - s->workers.shepherd_started_ns;
  if (s->workers.ctl_open) {
    s->workers.ctl_open = 0;
    s->workers.ctl_closing = 1;
    uv_read_stop((uv_stream_t *)&s->workers.ctl);
    uv_close((uv_handle_t *)&s->workers.ctl, on_ctl_closed);
  }
  s->workers.spawns_pending = 0; /* a dead shepherd forks nothing more */
  if (!s->draining && pp_phased_swap_planned(s)) {
    /* A phased restart killed it: its successor loads the new code, now. */
    LOG_ERR(s, "phased restart: the old shepherd (pid %u) is gone; starting one with the new code",
            s->workers.shepherd_pid);
    s->workers.shepherd_planned_restart = 1;
    uv_timer_start(&s->workers.shepherd_timer, on_shepherd_timer, 0, 0);
    return;
  }
  if (s->draining) {
    /* A drain needs no new workers; stop when the requests are done. */
    LOG_ERR(s, "shepherd exited (status %lld, signal %d) during the drain", (long long)status, sig);
    return;
  }
  if (lived < SHEPHERD_YOUNG_NS)
    s->workers.shepherd_restart_delay_ms = s->workers.shepherd_restart_delay_ms
                                               ? s->workers.shepherd_restart_delay_ms * 2
                                               : SHEPHERD_RESTART_MIN_MS;
  else
    s->workers.shepherd_restart_delay_ms = SHEPHERD_RESTART_MIN_MS;
  if (s->workers.shepherd_restart_delay_ms > SHEPHERD_RESTART_MAX_MS)
    s->workers.shepherd_restart_delay_ms = SHEPHERD_RESTART_MAX_MS;
  uint32_t live = pp_registry_count(&s->workers.reg, PP_WORKER_READY) +
                  pp_registry_count(&s->workers.reg, PP_WORKER_BOOTING) +
                  pp_registry_count(&s->workers.reg, PP_WORKER_RETIRING);
  LOG_ERR(s,
          "shepherd (pid %u) exited unexpectedly (status %lld, signal %d) after %.1f s; %u "
          "worker(s) keep serving; starting a new shepherd in %u ms",
          s->workers.shepherd_pid, (long long)status, sig, (double)lived / 1e9, live,
          s->workers.shepherd_restart_delay_ms);
  uv_timer_start(&s->workers.shepherd_timer, on_shepherd_timer,
                 s->workers.shepherd_restart_delay_ms, 0);
}

static void shepherd_restart(server *s) {
  pp_wire_decoder_init(&s->workers.ctl_dec);
  s->workers.ctl_rbuf.len = 0;
  int planned = s->workers.shepherd_planned_restart;
  s->workers.shepherd_planned_restart = 0;
  if (!planned) s->core.stats.shepherd_restarts++;
  if (shepherd_launch(s, 0) < 0) {
    s->workers.shepherd_restart_delay_ms = SHEPHERD_RESTART_MAX_MS;
    LOG_ERR(s, "starting a new shepherd failed; trying again in %u ms",
            s->workers.shepherd_restart_delay_ms);
    uv_timer_start(&s->workers.shepherd_timer, on_shepherd_timer,
                   s->workers.shepherd_restart_delay_ms, 0);
    return;
  }
  /* Before it forks anything: the workers it inherits (by index), then what is missing. */
  uint32_t adopted = 0;
  for (uint32_t i = 0; i < s->workers.reg.high; i++) {
    pp_worker *w = &s->workers.reg.workers[i];
    if (w->state == PP_WORKER_FREE || w->killed) continue;
    pp_wire_frame f;
    memset(&f, 0, sizeof f);
    f.type = PP_WIRE_ADOPT;
    f.pid = w->pid;
    f.worker_index = w->index;
    ctl_send(s, &f);
    adopted++;
    /* A RETIRE the dead shepherd may never have acted on goes to the new one. */
    if (w->state == PP_WORKER_RETIRING) {
      w->retire_sent = 0;
      pp_shepherd_retire_if_drained(s, w);
    }
  }
  s->core.stats.workers_adopted += adopted;
  if (planned)
    LOG_ERR(s, "phased restart: new shepherd (pid %u) adopts %u live worker(s)",
            s->workers.shepherd_pid, adopted);
  else
    LOG_ERR(s, "new shepherd (pid %u, restart %llu) adopts %u live worker(s)",
            s->workers.shepherd_pid, (unsigned long long)s->core.stats.shepherd_restarts, adopted);
  respawn_missing(s);
}

void pp_shepherd_worker_gone(server *s, uint32_t pid, int32_t status) {
  pp_wire_frame f;
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_EXITED;
  f.pid = pid;
  f.exit_status = status;
  on_exited(s, &f, pp_now_ns());
}

void pp_shepherd_reap_orphans(server *s) {
  for (;;) {
    siginfo_t info;
    memset(&info, 0, sizeof info);
    /* Peek first (WNOWAIT): the shepherd's own exit belongs to libuv's uv_process_t. */
    if (waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) < 0 || info.si_pid == 0) return;
    if (s->workers.shepherd_alive && (uint32_t)info.si_pid == s->workers.shepherd_pid) return;
    if (pp_phased_owns_pid(s, (uint32_t)info.si_pid)) return; /* libuv's too */
    int status = 0;
    pid_t pid = waitpid(info.si_pid, &status, WNOHANG);
    if (pid <= 0) return;
    int32_t code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    s->core.stats.orphans_reaped++;
    pp_worker *w = pp_registry_find(&s->workers.reg, (uint32_t)pid);
    if (!w) {
      LOG(s, "reaped pid %d (not a worker; reparented to the server)", (int)pid);
      continue;
    }
    if (s->workers.ctl_open) {
      pp_wire_frame f;
      memset(&f, 0, sizeof f);
      f.type = PP_WIRE_ADOPTED_EXITED;
      f.pid = (uint32_t)pid;
      f.exit_status = code;
      ctl_send(s, &f);
    }
    LOG(s, "adopted worker pid %d exited", (int)pid);
    pp_shepherd_worker_gone(s, (uint32_t)pid, code);
  }
}

static void on_sigchld(uv_signal_t *h, int signum) {
  (void)signum;
  pp_shepherd_reap_orphans(h->data);
}

void pp_shepherd_supervise_init(server *s) {
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
    LOG_ERR(s, "prctl(PR_SET_CHILD_SUBREAPER): %s: a dead shepherd's workers cannot be adopted",
            strerror(errno));
  uv_timer_init(s->loop, &s->workers.shepherd_timer);
  s->workers.shepherd_timer.data = s;
  uv_signal_init(s->loop, &s->workers.sig_chld);
  s->workers.sig_chld.data = s;
  uv_signal_start(&s->workers.sig_chld, on_sigchld, SIGCHLD);
  uv_unref((uv_handle_t *)&s->workers.sig_chld);
}
