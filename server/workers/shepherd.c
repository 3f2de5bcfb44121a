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

#include "server/base/clock.h"
#include "server/base/log.h"

static void on_ctl_write(uv_write_t *wr, int status) {
  wchunk *k = (wchunk *)wr;
  (void)status;
  pp_chunk_put(k->net, k);
}

static void ctl_send(pp_workers *ws, const pp_wire_frame *f) {
  if (!ws->ctl_open) return;
  wchunk *k = pp_chunk_get(ws->net, 0);
  k->len = (size_t)pp_wire_encode(f, k->data, k->cap);
  pp_chunk_send(ws->net, (uv_stream_t *)&ws->ctl, k, on_ctl_write);
}

void pp_shepherd_spawn(pp_workers *ws, uint32_t n) {
  pp_wire_frame f;
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_SPAWN;
  f.count = n;
  ws->spawns_pending += n;
  ws->last_spawn_ns = pp_now_ns();
  ctl_send(ws, &f);
}

void pp_shepherd_standby(pp_workers *ws, uint32_t n) {
  pp_standby *sb = &ws->standby;
  if (!sb->enabled || !n) return;
  pp_wire_frame f;
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_STANDBY;
  f.count = n;
  sb->pending += n;
  sb->last_request_ns = pp_now_ns();
  ctl_send(ws, &f);
}

void pp_shepherd_activate(pp_workers *ws, pp_worker *w, int64_t decided_ns) {
  pp_standby *sb = &ws->standby;
  if (!sb->enabled || w->state != PP_WORKER_PARKED) return;
  pp_wire_frame f;
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_ACTIVATE;
  f.pid = w->pid;
  ctl_send(ws, &f);
  /* booting until its first slot connects (HELLO), as any worker; in workers_wanted from now */
  w->state = PP_WORKER_BOOTING;
  w->activated_ns = decided_ns;
  w->forked_ns = pp_now_ns();
  ws->workers_wanted++;
  sb->activations++;
  LOG(ws, "activating standby worker %u (pid %u), parked %.0f ms", w->index, w->pid,
      (pp_now_ns() - w->parked_ns) / 1e6);
}

/* PARKED: a standby worker booted and waits. Its HELLOs will carry worker_index. */
static void on_parked(pp_workers *ws, const pp_wire_frame *f, int64_t now) {
  pp_standby *sb = &ws->standby;
  if (sb->pending) sb->pending--;
  sb->parked_total++;
  pp_worker *w = pp_registry_find(&ws->reg, f->pid);
  if (w) {
    LOG_ERR(ws, "PARKED for pid %u, which is already a %s worker; ignored", f->pid,
            w->state == PP_WORKER_PARKED ? "parked" : "serving");
    return;
  }
  w = pp_registry_add(&ws->reg, f->pid, f->worker_index, now);
  if (!w) {
    LOG_ERR(ws, "worker registry full: standby pid %u not tracked", f->pid);
    return;
  }
  w->state = PP_WORKER_PARKED;
  w->parked_ns = now;
  LOG(ws, "standby worker %u parked (pid %u, booted in %.1f ms)", f->worker_index, f->pid,
      f->boot_ns / 1e6);
}

void pp_shepherd_retire_if_drained(pp_workers *ws, pp_worker *w) {
  if (!w || w->state != PP_WORKER_RETIRING || w->busy || w->retire_sent) return;
  w->retire_sent = 1;
  pp_wire_frame f;
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_RETIRE;
  f.pid = w->pid;
  ctl_send(ws, &f);
  LOG(ws, "retiring worker %u (pid %u)", w->index, w->pid);
}

void pp_shepherd_retire(pp_workers *ws, pp_worker *w) {
  pp_registry_retire(&ws->reg, w);
  pp_shepherd_retire_if_drained(ws, w);
}

/* Asks for as many workers as are missing from workers_wanted. */
static void respawn_missing(pp_workers *ws) {
  if (*ws->stopping || *ws->draining) return;
  if (!ws->shepherd_alive || !ws->ctl_open) return; /* the restarted shepherd will catch up */
  uint32_t alive = pp_registry_count(&ws->reg, PP_WORKER_READY) +
                   pp_registry_count(&ws->reg, PP_WORKER_BOOTING) + ws->spawns_pending;
  if (alive < ws->workers_wanted) {
    ws->stats->worker_restarts++;
    LOG(ws, "respawning (%u of %u workers alive)", alive, ws->workers_wanted);
    pp_shepherd_spawn(ws, ws->workers_wanted - alive);
  }
}

static void on_respawn_timer(uv_timer_t *t) {
  respawn_missing(t->data);
}

static void on_exited(pp_workers *ws, const pp_wire_frame *f, int64_t now) {
  pp_worker *w = pp_registry_find(&ws->reg, f->pid);
  pp_standby *sb = &ws->standby;
  if (!w && sb->pending) {
    /* A pid the server never heard of: a standby worker that died before it parked (standby
     * forks send no FORKED). The controller refills the pool. */
    sb->pending--;
    LOG_ERR(ws, "standby worker pid %u exited (status %d) before it parked", f->pid,
            f->exit_status);
    return;
  }
  if (w && w->state == PP_WORKER_PARKED) {
    pp_registry_remove(&ws->reg, w);
    if (!*ws->stopping)
      LOG_ERR(ws, "parked standby worker pid %u exited (status %d)", f->pid, f->exit_status);
    return;
  }
  int retiring = w && w->state == PP_WORKER_RETIRING;
  int64_t w_forked_ns = w ? w->forked_ns : 0;
  if (w) {
    /* its connections are closed (or closing); detach whatever is left */
    if (ws->close_worker_conns) ws->close_worker_conns(ws, f->pid);
    pp_registry_remove(&ws->reg, w);
  }
  if (f->exit_status < 0)
    LOG_ERR(ws, "worker pid %u exited by signal %d", f->pid, -f->exit_status);
  else
    LOG(ws, "worker pid %u exited with status %d", f->pid, f->exit_status);
  if (*ws->stopping || retiring) return;
  /* A worker that dies young (within 1 s of its fork) is respawned with a growing delay
   * (100 ms doubling to 5 s), so an app that cannot boot does not fork in a tight loop. */
  int young = w_forked_ns && now - w_forked_ns < 1000000000LL;
  if (!young)
    ws->respawn_delay_ms = 0;
  else
    ws->respawn_delay_ms = ws->respawn_delay_ms ? ws->respawn_delay_ms * 2 : 100;
  if (ws->respawn_delay_ms > 5000) ws->respawn_delay_ms = 5000;
  if (ws->respawn_delay_ms) {
    LOG_ERR(ws, "worker died %.0f ms after its fork; respawning in %u ms",
            (now - w_forked_ns) / 1e6, ws->respawn_delay_ms);
    uv_timer_start(&ws->respawn_timer, on_respawn_timer, ws->respawn_delay_ms, 0);
  } else {
    respawn_missing(ws);
  }
}

static void ctl_frame(pp_workers *ws, const pp_wire_frame *f) {
  int64_t now = pp_now_ns();
  switch (f->type) {
  case PP_WIRE_READY:
    ws->boot_ns = f->boot_ns;
    ws->shepherd_ever_ready = 1;
    LOG(ws, "shepherd (pid %u) loaded the app in %.1f ms", f->pid, f->boot_ns / 1e6);
    break;
  case PP_WIRE_FORKED:
    if (ws->spawns_pending) ws->spawns_pending--;
    pp_registry_add(&ws->reg, f->pid, f->worker_index, now);
    LOG(ws, "worker %u forked (pid %u)", f->worker_index, f->pid);
    break;
  case PP_WIRE_EXITED: on_exited(ws, f, now); break;
  case PP_WIRE_PARKED:
    if (ws->standby.enabled)
      on_parked(ws, f, now);
    else /* a shepherd started without --standby never sends it */
      LOG_ERR(ws, "control channel: PARKED from a shepherd started without --standby");
    break;
  default:
    LOG_ERR(ws, "control channel: unexpected frame %s from the shepherd",
            pp_wire_type_name(f->type));
  }
}

static void on_ctl_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  pp_workers *ws = h->data;
  (void)suggested;
  pp_buf_reserve(&ws->ctl_rbuf, 4096);
  *buf = uv_buf_init((char *)ws->ctl_rbuf.data + ws->ctl_rbuf.len,
                     (unsigned)(ws->ctl_rbuf.cap - ws->ctl_rbuf.len));
}

static void on_ctl_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf) {
  pp_workers *ws = st->data;
  (void)buf;
  if (nread < 0) {
    if (!*ws->stopping) LOG_ERR(ws, "control channel to the shepherd closed");
    uv_read_stop(st);
    return;
  }
  ws->ctl_rbuf.len += (size_t)nread;
  size_t pos = 0;
  for (;;) {
    pp_wire_frame f;
    size_t need;
    ssize_t n =
        pp_wire_decode(&ws->ctl_dec, ws->ctl_rbuf.data + pos, ws->ctl_rbuf.len - pos, &f, &need);
    if (n < 0) {
      LOG_ERR(ws, "control channel: protocol error: %s", pp_wire_strerror((int)n));
      uv_read_stop(st);
      return;
    }
    if (n == 0) {
      if (need > ws->ctl_rbuf.cap - pos) pp_buf_reserve(&ws->ctl_rbuf, need);
      break;
    }
    pos += (size_t)n;
    ctl_frame(ws, &f);
  }
  pp_buf_consume(&ws->ctl_rbuf, pos);
}

static void shepherd_lost(pp_workers *ws, int64_t status, int sig);

static void on_shepherd_exit(uv_process_t *p, int64_t status, int sig) {
  pp_workers *ws = p->data;
  ws->shepherd_alive = 0;
  uv_close((uv_handle_t *)p, NULL);
  if (*ws->stopping) {
    LOG(ws, "shepherd exited; bye");
    ws->hooks->exit(ws->srv, *ws->exit_code);
    return;
  }
  if (!ws->shepherd_ever_ready) {
    /* The first shepherd never loaded the app (a broken config.ru, a missing gem): a
     * restart would fail the same way, so this is a start-up error. */
    LOG_ERR(ws, "shepherd exited before loading the app (status %lld, signal %d); stopping",
            (long long)status, sig);
    ws->hooks->exit(ws->srv, 1);
    return;
  }
  shepherd_lost(ws, status, sig);
}

static int file_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

int pp_shepherd_find_gem(pp_workers *ws, const char *argv0) {
  const char *dir = ws->cfg->gem_dir;
  if (!dir) dir = getenv("PUMA_PLUS_GEM_DIR");
  char probe[2 * PATH_MAX];
  if (dir) {
    if (snprintf(ws->gem_dir, sizeof ws->gem_dir, "%s", dir) >= (int)sizeof ws->gem_dir) return -1;
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
    if (snprintf(ws->gem_dir, sizeof ws->gem_dir, "%s", found) >= (int)sizeof ws->gem_dir) continue;
    return 0;
  }
#ifdef PP_SOURCE_GEM_DIR
  /* A build directory outside the checkout: the checkout's gem/, known when CMake ran. */
  if (snprintf(probe, sizeof probe, "%s/exe/puma-plus-shepherd", PP_SOURCE_GEM_DIR) <
          (int)sizeof probe &&
      file_exists(probe) &&
      snprintf(ws->gem_dir, sizeof ws->gem_dir, "%s", PP_SOURCE_GEM_DIR) < (int)sizeof ws->gem_dir)
    return 0;
#endif
  return -1;
}

static void on_ctl_closed(uv_handle_t *h);

void pp_shepherd_cmd_init(pp_workers *ws, pp_shepherd_cmd *c, uint32_t workers,
                          const uint32_t *standby) {
  snprintf(c->libdir, sizeof c->libdir, "-I%s/lib", ws->gem_dir);
  snprintf(c->exe, sizeof c->exe, "%s/exe/puma-plus-shepherd", ws->gem_dir);
  snprintf(c->threads, sizeof c->threads, "%u", pp_config_slots_initial(ws->cfg));
  snprintf(c->workers, sizeof c->workers, "%u", workers);
  c->standby[0] = 0;
  c->extdir[0] = 0;
  size_t n = 0;
  char **a = c->args;
  a[n++] = (char *)ws->cfg->ruby;
#if defined(PP_SOURCE_GEM_DIR) && defined(PP_BUILD_EXT_LIB)
  /* The checkout's gem/ has no compiled codec of its own: this build's goes first on the load
   * path, so in-tree runs (make run, the tests, pp-bench) use the C codec as an installed gem
   * does, not the pure-Ruby one (PUMA_PLUS_PURE_RUBY=1 still forces that). */
  char probe[8300], here[PATH_MAX], source[PATH_MAX];
  if (realpath(ws->gem_dir, here) && realpath(PP_SOURCE_GEM_DIR, source) &&
      strcmp(here, source) == 0 &&
      snprintf(probe, sizeof probe, "%s/puma_plus/puma_plus_ext.so", PP_BUILD_EXT_LIB) <
          (int)sizeof probe &&
      access(probe, R_OK) == 0) {
    snprintf(c->extdir, sizeof c->extdir, "-I%s", PP_BUILD_EXT_LIB);
    a[n++] = c->extdir;
  }
#endif
  a[n++] = c->libdir, a[n++] = c->exe;
  a[n++] = "--app", a[n++] = (char *)ws->cfg->app;
  a[n++] = "--threads", a[n++] = c->threads;
  a[n++] = "--socket", a[n++] = ws->socket_path;
  a[n++] = "--workers", a[n++] = c->workers;
  if (standby) { /* docs/CONTROL.md section 8: the flag negotiates the standby frames */
    snprintf(c->standby, sizeof c->standby, "%u", *standby);
    a[n++] = "--standby", a[n++] = c->standby;
  }
  if (ws->cfg->fibers) a[n++] = "--fibers"; /* the --threads slots are fibers */
  a[n] = NULL;
}

/* Starts a shepherd that forks `initial` workers after READY. 0, or -1 (logged). */
static int shepherd_launch(pp_workers *ws, uint32_t initial) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
    LOG_ERR(ws, "socketpair: %s", strerror(errno));
    return -1;
  }
  uv_pipe_init(ws->loop, &ws->ctl, 0);
  ws->ctl.data = ws;
  uv_pipe_open(&ws->ctl, sv[0]);
  ws->ctl_open = 1;
  pp_standby *sb = &ws->standby;
  pp_shepherd_cmd cmd;
  pp_shepherd_cmd_init(ws, &cmd, initial, sb->enabled ? &sb->k : NULL);
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
  opt.file = ws->cfg->ruby;
  opt.args = cmd.args;
  opt.exit_cb = on_shepherd_exit;
  opt.stdio = stdio;
  opt.stdio_count = 4;
  ws->shepherd.data = ws;
  int rc = uv_spawn(ws->loop, &ws->shepherd, &opt);
  close(sv[1]);
  if (rc < 0) {
    LOG_ERR(ws, "cannot start the shepherd (%s %s): %s", ws->cfg->ruby, cmd.exe, uv_strerror(rc));
    ws->ctl_open = 0;
    ws->ctl_closing = 1;
    uv_close((uv_handle_t *)&ws->ctl, on_ctl_closed);
    return -1;
  }
  ws->shepherd_alive = 1;
  ws->shepherd_pid = (uint32_t)ws->shepherd.pid;
  ws->shepherd_started_ns = pp_now_ns();
  ws->spawns_pending = initial; /* the shepherd forks --workers at start */
  ws->last_spawn_ns = pp_now_ns();
  LOG(ws, "shepherd pid %d: %s %s%s%s %s --app %s --threads %s --socket %s --workers %s%s%s%s",
      ws->shepherd.pid, ws->cfg->ruby, cmd.extdir, cmd.extdir[0] ? " " : "", cmd.libdir, cmd.exe,
      ws->cfg->app, cmd.threads, ws->socket_path, cmd.workers, sb->enabled ? " --standby " : "",
      cmd.standby, ws->cfg->fibers ? " --fibers" : "");
  uv_read_start((uv_stream_t *)&ws->ctl, on_ctl_alloc, on_ctl_read);
  return 0;
}

int pp_shepherd_start(pp_workers *ws) {
  return shepherd_launch(ws, ws->workers_wanted);
}

void pp_shepherd_stop(pp_workers *ws) {
  if (!ws->shepherd_alive) ws->hooks->exit(ws->srv, *ws->exit_code);
  pp_wire_frame f;
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_STOP;
  f.grace_ms = 5000;
  ctl_send(ws, &f);
  LOG(ws, "drained; stopping the workers");
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
  pp_workers *ws = h->data;
  ws->ctl_closing = 0;
}

static void shepherd_restart(pp_workers *ws);

static void on_shepherd_timer(uv_timer_t *t) {
  pp_workers *ws = t->data;
  if (*ws->stopping || *ws->draining || ws->shepherd_alive) return;
  if (ws->ctl_closing) { /* the old control pipe's close callback has not run yet */
    uv_timer_start(&ws->shepherd_timer, on_shepherd_timer, 10, 0);
    return;
  }
  shepherd_restart(ws);
}

static void shepherd_lost(pp_workers *ws, int64_t status, int sig) {
  int64_t lived = pp_now_ns() - ws->shepherd_started_ns;
  if (ws->ctl_open) {
    ws->ctl_open = 0;
    ws->ctl_closing = 1;
    uv_read_stop((uv_stream_t *)&ws->ctl);
    uv_close((uv_handle_t *)&ws->ctl, on_ctl_closed);
  }
  ws->spawns_pending = 0; /* a dead shepherd forks nothing more */
  if (!*ws->draining && pp_phased_swap_planned(ws)) {
    /* A phased restart killed it: its successor loads the new code, now. */
    LOG_ERR(ws, "phased restart: the old shepherd (pid %u) is gone; starting one with the new code",
            ws->shepherd_pid);
    ws->shepherd_planned_restart = 1;
    uv_timer_start(&ws->shepherd_timer, on_shepherd_timer, 0, 0);
    return;
  }
  if (*ws->draining) {
    /* A drain needs no new workers; stop when the requests are done. */
    LOG_ERR(ws, "shepherd exited (status %lld, signal %d) during the drain", (long long)status,
            sig);
    return;
  }
  if (lived < SHEPHERD_YOUNG_NS)
    ws->shepherd_restart_delay_ms =
        ws->shepherd_restart_delay_ms ? ws->shepherd_restart_delay_ms * 2 : SHEPHERD_RESTART_MIN_MS;
  else
    ws->shepherd_restart_delay_ms = SHEPHERD_RESTART_MIN_MS;
  if (ws->shepherd_restart_delay_ms > SHEPHERD_RESTART_MAX_MS)
    ws->shepherd_restart_delay_ms = SHEPHERD_RESTART_MAX_MS;
  uint32_t live = pp_registry_count(&ws->reg, PP_WORKER_READY) +
                  pp_registry_count(&ws->reg, PP_WORKER_BOOTING) +
                  pp_registry_count(&ws->reg, PP_WORKER_RETIRING);
  LOG_ERR(ws,
          "shepherd (pid %u) exited unexpectedly (status %lld, signal %d) after %.1f s; %u "
          "worker(s) keep serving; starting a new shepherd in %u ms",
          ws->shepherd_pid, (long long)status, sig, (double)lived / 1e9, live,
          ws->shepherd_restart_delay_ms);
  uv_timer_start(&ws->shepherd_timer, on_shepherd_timer, ws->shepherd_restart_delay_ms, 0);
}

static void shepherd_restart(pp_workers *ws) {
  pp_wire_decoder_init(&ws->ctl_dec);
  ws->ctl_rbuf.len = 0;
  int planned = ws->shepherd_planned_restart;
  ws->shepherd_planned_restart = 0;
  if (!planned) ws->stats->shepherd_restarts++;
  if (shepherd_launch(ws, 0) < 0) {
    ws->shepherd_restart_delay_ms = SHEPHERD_RESTART_MAX_MS;
    LOG_ERR(ws, "starting a new shepherd failed; trying again in %u ms",
            ws->shepherd_restart_delay_ms);
    uv_timer_start(&ws->shepherd_timer, on_shepherd_timer, ws->shepherd_restart_delay_ms, 0);
    return;
  }
  /* Before it forks anything: the workers it inherits (by index), then what is missing. */
  uint32_t adopted = 0;
  for (uint32_t i = 0; i < ws->reg.high; i++) {
    pp_worker *w = &ws->reg.workers[i];
    if (w->state == PP_WORKER_FREE || w->killed) continue;
    pp_wire_frame f;
    memset(&f, 0, sizeof f);
    f.type = PP_WIRE_ADOPT;
    f.pid = w->pid;
    f.worker_index = w->index;
    ctl_send(ws, &f);
    adopted++;
    /* A RETIRE the dead shepherd may never have acted on goes to the new one. */
    if (w->state == PP_WORKER_RETIRING) {
      w->retire_sent = 0;
      pp_shepherd_retire_if_drained(ws, w);
    }
  }
  ws->stats->workers_adopted += adopted;
  if (planned)
    LOG_ERR(ws, "phased restart: new shepherd (pid %u) adopts %u live worker(s)", ws->shepherd_pid,
            adopted);
  else
    LOG_ERR(ws, "new shepherd (pid %u, restart %llu) adopts %u live worker(s)", ws->shepherd_pid,
            (unsigned long long)ws->stats->shepherd_restarts, adopted);
  respawn_missing(ws);
}

void pp_shepherd_worker_gone(pp_workers *ws, uint32_t pid, int32_t status) {
  pp_wire_frame f;
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_EXITED;
  f.pid = pid;
  f.exit_status = status;
  on_exited(ws, &f, pp_now_ns());
}

void pp_shepherd_reap_orphans(pp_workers *ws) {
  for (;;) {
    siginfo_t info;
    memset(&info, 0, sizeof info);
    /* Peek first (WNOWAIT): the shepherd's own exit belongs to libuv's uv_process_t. */
    if (waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) < 0 || info.si_pid == 0) return;
    if (ws->shepherd_alive && (uint32_t)info.si_pid == ws->shepherd_pid) return;
    if (pp_phased_owns_pid(ws, (uint32_t)info.si_pid)) return; /* libuv's too */
    int status = 0;
    pid_t pid = waitpid(info.si_pid, &status, WNOHANG);
    if (pid <= 0) return;
    int32_t code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    ws->stats->orphans_reaped++;
    pp_worker *w = pp_registry_find(&ws->reg, (uint32_t)pid);
    if (!w) {
      LOG(ws, "reaped pid %d (not a worker; reparented to the server)", (int)pid);
      continue;
    }
    if (ws->ctl_open) {
      pp_wire_frame f;
      memset(&f, 0, sizeof f);
      f.type = PP_WIRE_ADOPTED_EXITED;
      f.pid = (uint32_t)pid;
      f.exit_status = code;
      ctl_send(ws, &f);
    }
    LOG(ws, "adopted worker pid %d exited", (int)pid);
    pp_shepherd_worker_gone(ws, (uint32_t)pid, code);
  }
}

static void on_sigchld(uv_signal_t *h, int signum) {
  (void)signum;
  pp_shepherd_reap_orphans(h->data);
}

void pp_shepherd_supervise_init(pp_workers *ws) {
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
    LOG_ERR(ws, "prctl(PR_SET_CHILD_SUBREAPER): %s: a dead shepherd's workers cannot be adopted",
            strerror(errno));
  uv_timer_init(ws->loop, &ws->shepherd_timer);
  ws->shepherd_timer.data = ws;
  uv_timer_init(ws->loop, &ws->respawn_timer);
  ws->respawn_timer.data = ws;
  uv_signal_init(ws->loop, &ws->sig_chld);
  ws->sig_chld.data = ws;
  uv_signal_start(&ws->sig_chld, on_sigchld, SIGCHLD);
  uv_unref((uv_handle_t *)&ws->sig_chld);
}
