/* puma-plus-server's process (the top layer, process/): start-up (runtime directory, worker
 * socket, listeners, shepherd), the hooks every lower layer calls back through, the tick,
 * signals, drain and exit. Everything a request touches lives in a lower layer (docs/SERVER.md,
 * "Architecture"): net/transport.c (listeners, writes), session/ (conn.c, h1conn.c, h2conn.c,
 * h3conn.c: client connections and their protocols), exchange/exchange.c (the protocol-neutral
 * request/response), core/ (dispatch.c: the queue; exchange_owner.c), workers/ (wlink.c: worker
 * connections; shepherd.c, phased.c), ops/ (control_app.c, stats.c, dashboard.c, autoscale.c).
 * Timestamps: T1 first byte, T2 headers parsed, T2b runnable, T3 dispatched, T6 response
 * flushed; queue time is T3 - T2b and nothing else. */
#include "server/process/server.h"

#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "server/core/dispatch.h"
#include "server/ops/access_log.h"
#include "server/ops/control_app.h"
#include "server/ops/dashboard.h"
#include "server/process/server_int.h"

/* ---------------------------------------------------------------- drain and exit */

static void cleanup_files(server *s) {
  /* After a hot restart's handover the new server uses the same -runtime-dir paths and the
   * same unix listeners: they stay. Unix sockets from systemd belong to systemd; the ones a
   * hot restart handed us are ours. */
  int shared_dir = s->life.handed_over && s->cfg->runtime_dir;
  if (s->workers.socket_path[0] && !shared_dir) unlink(s->workers.socket_path);
  if (s->tls_dev_cert[0] && !shared_dir) unlink(s->tls_dev_cert);
  if (s->tls_dev_key[0] && !shared_dir) unlink(s->tls_dev_key);
  if (s->workers.own_runtime_dir) rmdir(s->workers.runtime_dir);
  for (int i = 0; i < s->net.listener_count; i++)
    if (s->net.listeners[i].addr.is_unix && !s->life.handed_over &&
        (!s->net.listeners[i].inherited || s->life.restarted))
      unlink(s->net.listeners[i].addr.path);
  pp_lifecycle_exit(&s->life);
}

void pp_server_exit(server *s, int code) {
  if (s->workers.shepherd_alive) kill((pid_t)s->workers.shepherd_pid, SIGTERM);
  cleanup_files(s);
  if (s->ops.access_log) {
    s->hooks.request_done = NULL;
    pp_access_log_close(s->ops.access_log); /* writes what is buffered */
  }
  if (s->ops.ctl.log) fclose(s->ops.ctl.log);
  fflush(stderr);
  exit(code);
}

#define PP_DRAIN_GRACE_MS 100

/* The drain's end: the process is stopping; STOP to the shepherd (it exits when the shepherd
 * does). Once. */
static void stop_workers(server *s) {
  if (s->stopping) return;
  s->stopping = 1;
  s->stop_sent_ns = pp_now_ns();
  pp_shepherd_stop(&s->workers);
}

void pp_drain_check(server *s) {
  if (!s->draining || s->stopping) return;
  if (pp_now_ns() - s->drain_started_ns < PP_DRAIN_GRACE_MS * 1000000LL) return;
  /* after the grace: idle connections close; the drain ends when no request is left */
  int partial = 0;
  pp_qnode *n = s->sess.clients.head.next;
  while (n != &s->sess.clients.head) {
    client *c = PP_CONTAINER_OF(n, client, link);
    n = n->next;
    if (c->closing || c->discarding) continue;
    if (c->h2) { /* its streams are exchanges: live_requests counts them */
      if (pp_conn_idle(c)) pp_conn_close_graceful(c);
      continue;
    }
    if (pp_conn_idle(c))
      pp_conn_close(c);
    else if (c->ls->kind == LISTEN_HTTP && !c->req)
      partial = 1;
  }
  if (s->core.queue.len || s->xpool.live_requests || partial) return;
  /* QUIC connections close after their GOAWAY; wait briefly so clients see a clean close */
  if (pp_h3conn_live(&s->sess) && pp_now_ns() - s->drain_started_ns < 1000000000LL) return;
  stop_workers(s);
}

static void on_drain_timer(uv_timer_t *t) {
  server *s = t->data;
  int64_t now = pp_now_ns();
  if (!s->stopping) {
    if (now - s->drain_started_ns > (int64_t)s->cfg->drain_timeout_ns) {
      LOG_ERR(s, "drain timeout: %u queued, %u live requests dropped", s->core.queue.len,
              s->xpool.live_requests);
      s->exit_code = 0;
      stop_workers(s);
    } else {
      pp_drain_check(s);
    }
  } else if (now - s->stop_sent_ns > 8000000000LL) {
    LOG_ERR(s, "shepherd did not exit in time; killing it");
    kill((pid_t)s->workers.shepherd_pid, SIGKILL);
    pp_server_exit(s, s->exit_code);
  }
}

static void begin_drain(server *s) {
  if (s->draining) return;
  s->draining = 1;
  s->drain_started_ns = pp_now_ns();
  LOG_ERR(s, "draining: no new connections; %u queued, %u in flight", s->core.queue.len,
          s->workers.reg.slots_busy);
  pp_phased_abort(&s->workers, "the server began to drain");
  pp_lifecycle_draining(&s->life);
  pp_listeners_close_http(&s->net, s->life.handed_over);
  pp_h3conn_drain(&s->sess);
  /* WebSockets get a Close 1001 (going away); they end once the peer answers, or after
   * -ws-close-timeout, and their WS_CLOSE events run before the workers stop. */
  pp_wshub_shutdown(&s->sess.wshub);
  pp_qnode *n = s->sess.clients.head.next;
  while (n != &s->sess.clients.head) { /* HTTP/2 connections: GOAWAY, then their streams finish */
    client *c = PP_CONTAINER_OF(n, client, link);
    n = n->next;
    if (c->h2 && !c->closing) pp_h2conn_drain(c);
  }
  /* Idle connections close after a short grace (PP_DRAIN_GRACE_MS), in which the loop reads
   * request bytes the kernel already holds for them; busy ones close after their response. */
  uv_timer_start(&s->drain_timer, on_drain_timer, 20, 20);
  pp_drain_check(s);
}

void pp_server_drain(server *s) {
  begin_drain(s);
}

static void on_signal(uv_signal_t *h, int signum) {
  server *s = h->data;
  if (signum == SIGQUIT || (signum == SIGINT && s->draining)) {
    LOG_ERR(s, "%s: stopping at once", signum == SIGQUIT ? "SIGQUIT" : "second SIGINT");
    pp_server_exit(s, 0);
  } else if (signum == SIGHUP) {
    pp_lifecycle_reloading(&s->life, 1);
    if (s->sess.tls_enabled && !s->tls_dev_cert[0]) {
      char err[512];
      if (pp_tls_ctx_reload(&s->sess.tls_ctx, err, sizeof err) == 0)
        LOG_ERR(s, "SIGHUP: reloaded the TLS certificate %s", s->cfg->tls_cert);
      else
        LOG_ERR(s, "SIGHUP: TLS certificate not reloaded, the old one stays: %s", err);
    }
    if (s->ops.ctl.log && s->ops.ctl.log_path) {
      FILE *f = fopen(s->ops.ctl.log_path, "a");
      if (f) {
        fclose(s->ops.ctl.log);
        s->ops.ctl.log = f;
        pp_autoscale_log_header(&s->ops);
        LOG(s, "SIGHUP: reopened %s", s->ops.ctl.log_path);
      } else {
        LOG_ERR(s, "SIGHUP: cannot reopen %s: %s", s->ops.ctl.log_path, strerror(errno));
      }
    }
    if (s->ops.access_log) pp_access_log_reopen(s->ops.access_log);
    pp_lifecycle_reloading(&s->life, 0);
  } else {
    begin_drain(s);
  }
}

/* ---------------------------------------------------------------- the tick */

static void on_tick(uv_timer_t *t) {
  server *s = t->data;
  pp_stats *st = &s->core.stats;
  st->queue_last = st->queue.window;
  st->service_last = st->service.window;
  st->ttfb_last = st->ttfb.window;
  st->arrivals_last = st->arrivals_window;
  st->completions_last = st->completions_window;
  st->last_window_ns = s->cfg->tick_ns;
  pp_stats_sample_cpu(&s->ops, pp_now_ns()); /* per-worker CPU share of the tick, before deciding */
  pp_autoscale_tick(&s->ops);
  pp_dashboard_tick(&s->ops); /* sees this tick's windows and decision */
  pp_hist_window_roll(&st->queue);
  pp_hist_window_roll(&st->service);
  pp_hist_window_roll(&st->ttfb);
  pp_hist_window_roll(&st->total);
  pp_hist_window_roll(&st->body_wait);
  pp_hist_window_roll(&st->ws.queue);
  st->arrivals_window = st->completions_window = st->shed_window = st->timeouts_window = 0;
  /* After a spike of connections, the structs and buffers freed beyond the pools sit in the
   * heap's middle, where free() alone never returns them: hand those pages back. */
  if (s->sess.tls_enabled) pp_conn_trim_idle(&s->sess, pp_now_ns(), 1000000000);
  if (s->sess.freed_bytes_since_trim >= 4u << 20) {
    malloc_trim(0);
    s->sess.freed_bytes_since_trim = 0;
  }
}

/* ---------------------------------------------------------------- startup */

/* The worker link's slot_free hook: the core dispatches queued requests. */
static void on_slot_free(server *s) {
  pp_dispatch_all(&s->core);
}

/* Dispatch's activated_dispatch hook: the controller records the activation latency. */
static void on_activated_dispatch(server *s, pp_worker *w, int64_t enqueued_ns) {
  pp_autoscale_note_dispatch(&s->ops, w, enqueued_ns);
}

/* The worker link's worker_gone hook: sticky WebSockets of that worker close with 1012. */
static void on_worker_gone(server *s, uint32_t pid) {
  pp_wshub_worker_gone(&s->sess.wshub, pid);
}

/* The control app (ops/) as the -control listener's local app: pp_control_app, and
 * pp_dashboard_subscribe for /stats/stream, each given the ops layer's context. */
static void control_handle(server *s, const pp_local_request *rq, pp_local_response *out) {
  pp_control_app(&s->ops, rq, out);
}
static void control_subscribe(server *s, client *c, uint32_t heartbeat_s, const pp_sse_ops *ops) {
  pp_dashboard_subscribe(&s->ops, c, heartbeat_s, ops);
}
static const pp_local_app control_local_app = {control_handle, control_subscribe};

/* The lifecycle's part of the hooks (it works on s->life, handed what it reads). */
static void hook_stop_soon(server *s) {
  pp_lifecycle_stop_soon(&s->life);
}

static long hook_hot_restart(server *s, char *msg, size_t msg_len) {
  return pp_restart_begin(&s->life, msg, msg_len);
}

static void hook_reloading(server *s, int begin, const char *what) {
  pp_lifecycle_reloading_for(&s->life, begin, what);
}

static void server_init(server *s, pp_config *cfg) {
  memset(s, 0, sizeof *s);
  s->cfg = cfg;
  s->loop = uv_default_loop();
  s->net.loop = s->loop;
  s->net.cfg = cfg;
  s->started_at = time(NULL);
  s->hooks.slot_free = on_slot_free;
  s->hooks.drain_progress = pp_drain_check;
  s->hooks.activated_dispatch = on_activated_dispatch;
  s->hooks.worker_gone = on_worker_gone;
  s->hooks.exit = pp_server_exit;
  s->hooks.stop_soon = hook_stop_soon;
  s->hooks.hot_restart = hook_hot_restart;
  s->hooks.reloading = hook_reloading;
  s->workers.workers_wanted = cfg->workers;
  pp_h1_limits_default(&s->sess.limits);
  s->sess.limits.max_header_bytes = cfg->max_header_bytes;
  s->sess.limits.max_uri_bytes = cfg->max_uri_bytes;
  s->sess.limits.max_headers = cfg->max_headers;
  s->sess.limits.max_body_bytes = cfg->max_body_bytes;
  s->sess.max_connections = cfg->max_connections;
  if (!s->sess.max_connections) {
    struct rlimit rl;
    uint64_t nofile = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : 1024;
    s->sess.max_connections =
        nofile > 256 ? (uint32_t)(nofile > 10000128 ? 10000000 : nofile - 128) : 128;
  }
  pp_exchange_pool_init(&s->xpool, cfg, s);
  pp_workers_init(&s->workers, s, s->loop, cfg, &s->net, &s->xpool, &s->hooks, &s->core.stats,
                  &s->core.admit, &s->ops.ctl.policy, &s->draining, &s->stopping);
  pp_workers_init_process(&s->workers, &s->exit_code,
                          (pp_workers_life){.ready = &s->life.ready,
                                            .restarting = &s->life.restarting,
                                            .new_pid = &s->life.new_pid,
                                            .handed_over = &s->life.handed_over});
  pp_core_init(&s->core, s, &s->hooks, &s->net, &s->xpool, &s->workers.reg, &s->ops.ctl.policy,
               &s->ops.ctl.shedding);
  pp_ops_init(&s->ops, s, s->loop, cfg, &s->hooks, &s->xpool, &s->workers, &s->core, &s->sess,
              &s->draining, &s->stopping, &s->started_at);
  static const pp_session_starters starters = {.h1 = pp_h1conn_start, .h2 = pp_h2conn_start};
  pp_sessions_init(&s->sess, s, s->loop, cfg, &s->net, &s->xpool, &s->core, &s->hooks, &s->draining,
                   &starters);
  pp_wshub_init(&s->sess.wshub, s->loop, cfg, &s->core, &s->xpool);
  s->sess.wall = &s->wall;
  s->workers.ws_command = pp_wshub_command;
  s->workers.ws_ctx = &s->sess.wshub;
  s->core.wall = &s->wall;
  s->xpool.hooks = &s->hooks;
  pp_queue_init(&s->workers.wconns);
  pp_registry_init(&s->workers.reg);
  pp_wire_decoder_init(&s->workers.ctl_dec);
  pp_buf_init(&s->workers.ctl_rbuf);
  pp_hist_window_init(&s->core.stats.queue);
  pp_hist_window_init(&s->core.stats.service);
  pp_hist_window_init(&s->core.stats.ttfb);
  pp_hist_window_init(&s->core.stats.total);
  pp_hist_window_init(&s->core.stats.body_wait);
  pp_hist_window_init(&s->core.stats.ws.queue);
  pp_hist_init(&s->core.stats.queue_last);
  pp_hist_init(&s->core.stats.service_last);
  pp_hist_init(&s->core.stats.ttfb_last);
}

/* The runtime directory (given, or a fresh one under XDG_RUNTIME_DIR or /tmp) and the
 * worker socket in it. 0, or an exit code (logged). */
static int open_runtime(server *s) {
  pp_config *cfg = s->cfg;
  if (cfg->runtime_dir) {
    snprintf(s->workers.runtime_dir, sizeof s->workers.runtime_dir, "%s", cfg->runtime_dir);
    mkdir(s->workers.runtime_dir, 0700);
  } else {
    const char *base = getenv("XDG_RUNTIME_DIR");
    if (!base || access(base, W_OK) != 0) base = "/tmp";
    snprintf(s->workers.runtime_dir, sizeof s->workers.runtime_dir, "%s/puma-plus.XXXXXX", base);
    if (!mkdtemp(s->workers.runtime_dir)) {
      LOG_ERR(s, "mkdtemp %s: %s", s->workers.runtime_dir, strerror(errno));
      return 1;
    }
    s->workers.own_runtime_dir = 1;
  }
  if (snprintf(s->workers.socket_path, sizeof s->workers.socket_path, "%s/workers.sock",
               s->workers.runtime_dir) >= (int)sizeof s->workers.socket_path) {
    LOG_ERR(s, "-runtime-dir %s: path too long", s->workers.runtime_dir);
    return 1;
  }
  int rc = pp_wlink_listen(&s->workers, s->workers.socket_path);
  if (rc < 0) {
    LOG_ERR(s, "worker socket %s: %s", s->workers.socket_path, uv_strerror(rc));
    return 1;
  }
  s->workers.worker_listener_open = 1;
  return 0;
}

/* The TLS context for -listen-tls: the given pair, or a development certificate generated
 * into the runtime directory. 0, or -1 (logged). */
static int open_tls(server *s) {
  pp_config *cfg = s->cfg;
  if (cfg->listen_tls_count == 0 && cfg->listen_h3_count == 0) return 0;
  char err[512];
  const char *cert = cfg->tls_cert, *key = cfg->tls_key;
  if (!cert) {
    char fp[PP_TLS_FINGERPRINT_LEN];
    if (pp_tls_dev_cert(s->workers.runtime_dir, s->tls_dev_cert, sizeof s->tls_dev_cert,
                        s->tls_dev_key, sizeof s->tls_dev_key, fp, sizeof fp, err,
                        sizeof err) < 0) {
      LOG_ERR(s, "TLS: cannot generate a development certificate: %s", err);
      return -1;
    }
    cert = s->tls_dev_cert, key = s->tls_dev_key;
    LOG_ERR(s,
            "TLS: no -tls-cert given: generated a self-signed development certificate %s "
            "(key %s, SHA-256 %s) for localhost, 127.0.0.1 and ::1, valid 30 days. It is for "
            "development only; pass -tls-cert and -tls-key in production.",
            cert, key, fp);
  }
  if (pp_tls_ctx_init(&s->sess.tls_ctx, cert, key, !cfg->no_h2, err, sizeof err) < 0) {
    LOG_ERR(s, "TLS: %s", err);
    return -1;
  }
  s->sess.tls_enabled = 1;
  return 0;
}

/* A stream listener whose connections go to the client connection glue (session/conn.c), on
 * the socket systemd or a hot restart handed over when one matches (lifecycle.c). */
static int open_listener(server *s, listener *ls) {
  int fd = pp_lifecycle_take_inherited(&s->life, ls);
  if (fd == -2) return -1;
  ls->on_accept = pp_conn_accept;
  ls->owner = &s->sess;
  return pp_listener_open(&s->net, ls, fd, s->life.defer_accept);
}

static int open_listeners(server *s) {
  pp_config *cfg = s->cfg;
  if (open_tls(s) < 0) return -1;
  if (cfg->listen_h3_count &&
      pp_h3conn_open_all(&s->sess, s->sess.tls_ctx.cert_file, s->sess.tls_ctx.key_file) < 0)
    return -1;
  for (int i = 0; i < cfg->listen_tls_count; i++) {
    listener *ls = &s->net.listeners[s->net.listener_count++];
    ls->addr = cfg->listen_tls[i];
    ls->kind = LISTEN_HTTP;
    ls->tls = 1;
    snprintf(ls->name, sizeof ls->name, "listen-tls.%d", i);
    if (open_listener(s, ls) < 0) return -1;
  }
  for (int i = 0; i < cfg->listen_count; i++) {
    listener *ls = &s->net.listeners[s->net.listener_count++];
    ls->addr = cfg->listen[i];
    ls->kind = LISTEN_HTTP;
    snprintf(ls->name, sizeof ls->name, "listen.%d", i);
    if (open_listener(s, ls) < 0) return -1;
  }
  if (cfg->control_enabled) {
    listener *ls = &s->net.listeners[s->net.listener_count++];
    ls->addr = cfg->control;
    ls->kind = LISTEN_CONTROL;
    ls->local_app = &control_local_app;
    snprintf(ls->name, sizeof ls->name, "control");
    if (open_listener(s, ls) < 0) return -1;
  }
  return 0;
}

/* The Date value: both clocks read once a second, just after each realtime second begins
 * (re-armed each time, so the timer never drifts across a boundary). */
static void on_date_timer(uv_timer_t *t) {
  server *s = t->data;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  pp_wallclock_set(&s->wall, (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec, pp_now_ns());
  uv_update_time(s->loop);
  uv_timer_start(&s->date_timer, on_date_timer, (uint64_t)(1000000000 - ts.tv_nsec) / 1000000 + 1,
                 0);
}

static void start_signals_and_timers(server *s) {
  uv_signal_init(s->loop, &s->sig_term);
  uv_signal_init(s->loop, &s->sig_int);
  uv_signal_init(s->loop, &s->sig_quit);
  uv_signal_init(s->loop, &s->sig_hup);
  s->sig_term.data = s->sig_int.data = s->sig_quit.data = s->sig_hup.data = s;
  uv_signal_start(&s->sig_term, on_signal, SIGTERM);
  uv_signal_start(&s->sig_int, on_signal, SIGINT);
  uv_signal_start(&s->sig_quit, on_signal, SIGQUIT);
  uv_signal_start(&s->sig_hup, on_signal, SIGHUP);
  uv_timer_init(s->loop, &s->tick_timer);
  uv_timer_init(s->loop, &s->drain_timer);
  s->tick_timer.data = s->drain_timer.data = s;
  uint64_t tick_ms = s->cfg->tick_ns / 1000000 ? s->cfg->tick_ns / 1000000 : 1;
  uv_timer_start(&s->tick_timer, on_tick, tick_ms, tick_ms);
  uv_timer_init(s->loop, &s->date_timer);
  s->date_timer.data = s;
  on_date_timer(&s->date_timer);
}

int pp_server_run_argv(pp_config *cfg, int argc, char **argv) {
  static server srv;
  server *s = &srv;
  const char *argv0 = argv[0];
  server_init(s, cfg);
  if (pp_lifecycle_init(&s->life, s, pp_server_drain, s->loop, cfg, &s->net, &s->core, &s->workers,
                        &s->draining, argc, argv) < 0)
    return 2;
  signal(SIGPIPE, SIG_IGN);
  /* Large buffers (request bodies of an upload burst) come from mmap and go back to the
   * system when freed: glibc would otherwise raise its threshold after the first such free and
   * keep serving them from a heap that never shrinks. */
  mallopt(M_MMAP_THRESHOLD, 256 * 1024);

  if (access(cfg->app, R_OK) != 0) {
    LOG_ERR(s, "-app %s: %s", cfg->app, strerror(errno));
    return 2;
  }
  if (pp_shepherd_find_gem(&s->workers, argv0) < 0) {
    LOG_ERR(s, "cannot find the puma-plus gem (exe/puma-plus-shepherd): pass -gem-dir DIR or set "
               "PUMA_PLUS_GEM_DIR");
    return 2;
  }
  if (pp_autoscale_init(&s->ops) < 0) return 2;
  if (cfg->access_log) {
    if (!(s->ops.access_log = pp_access_log_open(s->loop, cfg))) return 2;
    s->hooks.request_done = pp_access_log_record;
    s->hooks.request_done_ctx = s->ops.access_log;
  }
  int rc = open_runtime(s);
  if (rc == 0 && open_listeners(s) < 0) rc = 1;
  if (rc == 0 && pp_lifecycle_check_inherited(&s->life) < 0) rc = 1;
  if (rc) {
    cleanup_files(s);
    return rc;
  }
  start_signals_and_timers(s);
  pp_lifecycle_start(&s->life);
  pp_phased_init(&s->workers);
  pp_shepherd_supervise_init(&s->workers);
  pp_wlink_watch_start(&s->workers);
  if (pp_shepherd_start(&s->workers) < 0) {
    cleanup_files(s);
    return 1;
  }
  uv_run(s->loop, UV_RUN_DEFAULT);
  pp_server_exit(s, s->exit_code);
}
