/* Phased restart (see phased.h). The workload: rare (an operator's deploy), a handful of
 * workers, so the roll is a 50 ms poll over the registry rather than hooks in every place a
 * worker changes state; each step does at most one thing (SPAWN 1, or RETIRE 1 old worker)
 * and only when the previous one has finished, which is what keeps ready capacity from
 * dropping: an old worker is retired only while one more worker than wanted is ready. */
#include "server/workers/phased.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/base/prom.h"
#include "server/base/clock.h"
#include "server/base/log.h"
#include "server/workers/shepherd.h"

#define PROBE_TIMEOUT_MS    60000
#define ROLL_POLL_MS        50
#define ROLL_MAX_FAILURES   3              /* new workers that died before they were ready: abort */
#define ROLL_STEP_MAX_NS    120000000000LL /* a new worker not ready by then: abort */
#define PROBE_STOP_GRACE_MS 1000

const char *pp_phased_state_name(pp_phased_state st) {
  switch (st) {
  case PP_PHASED_PROBING: return "probing";
  case PP_PHASED_ROLLING: return "rolling";
  default: return "idle";
  }
}

uint32_t pp_phased_old_workers(const pp_workers *ws) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < ws->reg.high; i++) {
    const pp_worker *w = &ws->reg.workers[i];
    if (w->state != PP_WORKER_FREE && w->generation < ws->reg.phase) n++;
  }
  return n;
}

static void finish(pp_workers *ws, const char *result, const char *error) {
  pp_phased *ph = &ws->phased;
  uv_timer_stop(&ph->timer);
  ph->state = PP_PHASED_IDLE;
  ph->last_duration_s = (double)(pp_now_ns() - ph->started_ns) / 1e9;
  snprintf(ph->last_result, sizeof ph->last_result, "%s", result);
  snprintf(ph->last_error, sizeof ph->last_error, "%s", error ? error : "");
  if (error) {
    ph->aborted++;
    LOG_ERR(ws, "phased restart aborted after %.1f s: %s; the autoscaler resumes",
            ph->last_duration_s, error);
  } else {
    ph->completed++;
    LOG_ERR(ws,
            "phased restart: phase %u complete in %.1f s: %u old worker(s) replaced; the "
            "autoscaler resumes",
            ws->reg.phase, ph->last_duration_s, ph->workers_replaced);
  }
  ws->hooks->reloading(ws->srv, 0, NULL);
}

/* ---------------------------------------------------------------- the probe */

static void on_probe_closed(uv_handle_t *h) {
  pp_workers *ws = h->data;
  ws->phased.handles_closing--;
}

static void probe_close(pp_workers *ws, uv_handle_t *h) {
  ws->phased.handles_closing++;
  uv_close(h, on_probe_closed);
}

static void probe_close_pipes(pp_workers *ws) {
  pp_phased *ph = &ws->phased;
  if (ph->probe_ctl_open) {
    ph->probe_ctl_open = 0;
    uv_read_stop((uv_stream_t *)&ph->probe_ctl);
    probe_close(ws, (uv_handle_t *)&ph->probe_ctl);
  }
}

static void probe_send_stop(pp_workers *ws) {
  pp_phased *ph = &ws->phased;
  if (!ph->probe_ctl_open) return;
  pp_wire_frame f;
  memset(&f, 0, sizeof f);
  f.type = PP_WIRE_STOP;
  f.grace_ms = PROBE_STOP_GRACE_MS;
  uint8_t buf[64];
  ssize_t n = pp_wire_encode(&f, buf, sizeof buf);
  if (n <= 0) return;
  uv_buf_t b = uv_buf_init((char *)buf, (unsigned)n);
  /* An empty socketpair takes 9 bytes at once; if not, the probe is killed by the timeout. */
  uv_try_write((uv_stream_t *)&ph->probe_ctl, &b, 1);
}

static void swap_shepherd(pp_workers *ws);
static void probe_settle(pp_workers *ws);

static void on_probe_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  pp_workers *ws = h->data;
  (void)suggested;
  pp_buf_reserve(&ws->phased.probe_rbuf, 4096);
  *buf = uv_buf_init((char *)ws->phased.probe_rbuf.data + ws->phased.probe_rbuf.len,
                     (unsigned)(ws->phased.probe_rbuf.cap - ws->phased.probe_rbuf.len));
}

static void on_probe_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf) {
  pp_workers *ws = st->data;
  pp_phased *ph = &ws->phased;
  (void)buf;
  if (nread < 0) {
    uv_read_stop(st);
    return;
  }
  ph->probe_rbuf.len += (size_t)nread;
  size_t pos = 0;
  for (;;) {
    pp_wire_frame f;
    size_t need;
    ssize_t n = pp_wire_decode(&ph->probe_dec, ph->probe_rbuf.data + pos, ph->probe_rbuf.len - pos,
                               &f, &need);
    if (n < 0) {
      LOG_ERR(ws, "phased restart: probe control channel: %s", pp_wire_strerror((int)n));
      uv_read_stop(st);
      if (ph->probe_alive) kill((pid_t)ph->probe_pid, SIGKILL);
      return;
    }
    if (n == 0) break;
    pos += (size_t)n;
    if (f.type == PP_WIRE_READY && !ph->probe_ready) {
      ph->probe_ready = 1;
      LOG_ERR(ws, "phased restart: the new code boots (probe pid %u loaded the app in %.1f ms)",
              ph->probe_pid, f.boot_ns / 1e6);
      probe_send_stop(ws);
    }
  }
  pp_buf_consume(&ph->probe_rbuf, pos);
}

/* The probe's stderr goes on to ours unchanged; the last line that looks like an error is
 * kept for last_error (the shepherd writes "cannot load APP: Class: message"). */
static void on_err_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  pp_workers *ws = h->data;
  (void)suggested;
  *buf = uv_buf_init(ws->phased.probe_err_buf, sizeof ws->phased.probe_err_buf);
}

static void on_err_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf) {
  pp_workers *ws = st->data;
  pp_phased *ph = &ws->phased;
  if (nread < 0) {
    ph->probe_err_open = 0;
    probe_close(ws, (uv_handle_t *)st);
    probe_settle(ws);
    return;
  }
  ssize_t off = 0;
  while (off < nread) {
    ssize_t w = write(2, buf->base + off, (size_t)(nread - off));
    if (w <= 0 && errno != EINTR) break;
    if (w > 0) off += w;
  }
  const char *p = buf->base, *end = buf->base + nread;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t len = (size_t)((nl ? nl : end) - p);
    if (memmem(p, len, "cannot load", 11) || memmem(p, len, "Error", 5)) {
      if (len >= sizeof ph->probe_stderr) len = sizeof ph->probe_stderr - 1;
      memcpy(ph->probe_stderr, p, len);
      ph->probe_stderr[len] = 0;
    }
    p = nl ? nl + 1 : end;
  }
}

/* The probe exited and its stderr was read to the end (or 1 s passed: something it started
 * may hold the pipe), so its error line, if any, is known: swap, or abort. */
static void probe_settle(pp_workers *ws) {
  pp_phased *ph = &ws->phased;
  if (ph->state != PP_PHASED_PROBING || ph->probe_alive || ph->probe_settled) return;
  ph->probe_settled = 1;
  int64_t status = ph->probe_status;
  int sig = ph->probe_sig;
  if (ph->probe_ready && status == 0 && sig == 0) {
    swap_shepherd(ws);
    return;
  }
  char why[sizeof ph->last_error];
  if (ph->probe_ready)
    snprintf(why, sizeof why, "the probe shepherd (pid %u) loaded the app but exited with %s %d",
             ph->probe_pid, sig ? "signal" : "status", sig ? sig : (int)status);
  else
    snprintf(why, sizeof why,
             "the new code failed to boot: the probe shepherd (pid %u) exited with %s %d before "
             "READY%s%s; the old generation keeps serving",
             ph->probe_pid, sig ? "signal" : "status", sig ? sig : (int)status,
             ph->probe_stderr[0] ? ": " : "", ph->probe_stderr);
  finish(ws, "aborted", why);
}

static void on_settle_timer(uv_timer_t *t) {
  probe_settle(t->data);
}

static void on_probe_exit(uv_process_t *p, int64_t status, int sig) {
  pp_workers *ws = p->data;
  pp_phased *ph = &ws->phased;
  ph->probe_alive = 0;
  ph->probe_status = status;
  ph->probe_sig = sig;
  probe_close(ws, (uv_handle_t *)p);
  probe_close_pipes(ws);
  if (ph->state != PP_PHASED_PROBING) return; /* aborted already */
  if (ph->probe_err_open)
    uv_timer_start(&ph->timer, on_settle_timer, 1000, 0); /* or at its stderr's EOF */
  else
    probe_settle(ws);
}

static void on_probe_timeout(uv_timer_t *t) {
  pp_workers *ws = t->data;
  pp_phased *ph = &ws->phased;
  if (ph->state != PP_PHASED_PROBING || !ph->probe_alive) return;
  char why[256];
  snprintf(why, sizeof why,
           "the probe shepherd (pid %u) %s within %d s; killed it; the old generation keeps "
           "serving",
           ph->probe_pid, ph->probe_ready ? "did not exit after STOP" : "did not load the app",
           PROBE_TIMEOUT_MS / 1000);
  kill((pid_t)ph->probe_pid, SIGKILL);
  finish(ws, "aborted", why);
}

/* The same command line as shepherd.c's shepherd_launch, with --workers 0 (keep in step). */
static int probe_launch(pp_workers *ws, char *msg, size_t msg_len) {
  pp_phased *ph = &ws->phased;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
    snprintf(msg, msg_len, "socketpair: %s", strerror(errno));
    return -1;
  }
  uv_pipe_init(ws->loop, &ph->probe_ctl, 0);
  ph->probe_ctl.data = ws;
  uv_pipe_open(&ph->probe_ctl, sv[0]);
  ph->probe_ctl_open = 1;
  uv_pipe_init(ws->loop, &ph->probe_err, 0);
  ph->probe_err.data = ws;
  ph->probe_err_open = 1;
  pp_shepherd_cmd cmd; /* the shepherd's own command line, with no workers and no standby */
  pp_shepherd_cmd_init(ws, &cmd, 0, NULL);
  uv_stdio_container_t stdio[4];
  stdio[0].flags = stdio[1].flags = UV_INHERIT_FD;
  stdio[0].data.fd = 0;
  stdio[1].data.fd = 1;
  stdio[2].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
  stdio[2].data.stream = (uv_stream_t *)&ph->probe_err;
  stdio[3].flags = UV_INHERIT_FD;
  stdio[3].data.fd = sv[1];
  uv_process_options_t opt;
  memset(&opt, 0, sizeof opt);
  opt.file = ws->cfg->ruby;
  opt.args = cmd.args;
  opt.exit_cb = on_probe_exit;
  opt.stdio = stdio;
  opt.stdio_count = 4;
  ph->probe.data = ws;
  int rc = uv_spawn(ws->loop, &ph->probe, &opt);
  close(sv[1]);
  if (rc < 0) {
    snprintf(msg, msg_len, "cannot start the probe shepherd (%s %s): %s", ws->cfg->ruby, cmd.exe,
             uv_strerror(rc));
    probe_close_pipes(ws);
    ph->probe_err_open = 0;
    probe_close(ws, (uv_handle_t *)&ph->probe_err);
    return -1;
  }
  ph->probe_alive = 1;
  ph->probe_pid = (uint32_t)ph->probe.pid;
  ph->probe_ready = 0;
  ph->probe_settled = 0;
  ph->probe_stderr[0] = 0;
  pp_wire_decoder_init(&ph->probe_dec);
  ph->probe_rbuf.len = 0;
  uv_read_start((uv_stream_t *)&ph->probe_ctl, on_probe_alloc, on_probe_read);
  uv_read_start((uv_stream_t *)&ph->probe_err, on_err_alloc, on_err_read);
  return 0;
}

/* ---------------------------------------------------------------- swap and roll */

static void roll_step(pp_workers *ws) {
  pp_phased *ph = &ws->phased;
  if (ph->state != PP_PHASED_ROLLING) return;
  /* Wait for the new shepherd: SPAWN goes over its control channel. */
  if (ph->swap_planned || !ws->shepherd_alive || !ws->ctl_open) return;
  uint32_t phase = ws->reg.phase, threads = ws->cfg->threads;
  uint32_t old_live = 0, old_retiring = 0, new_ready = 0, new_booting = ws->spawns_pending;
  uint32_t live = 0;
  pp_worker *victim = NULL;
  for (uint32_t i = 0; i < ws->reg.high; i++) {
    pp_worker *w = &ws->reg.workers[i];
    if (w->state == PP_WORKER_FREE) continue;
    int old = w->generation < phase;
    if (w->state == PP_WORKER_RETIRING) {
      old_retiring += old;
      continue;
    }
    live++;
    if (old) {
      old_live++;
      /* The old worker to retire: a ready one with the fewest busy threads. */
      if (!victim || (victim->state != PP_WORKER_READY && w->state == PP_WORKER_READY) ||
          (victim->state == w->state && w->busy < victim->busy))
        victim = w;
    } else if (w->state == PP_WORKER_READY && w->slots >= threads && !w->killed) {
      new_ready++;
    } else {
      new_booting++;
    }
  }
  if (old_live == 0) {
    if (old_retiring == 0) finish(ws, "ok", NULL);
    return;
  }
  if (new_booting) {
    /* One at a time: the last SPAWN is not ready yet. The autoscaler's guard against a SPAWN
     * that never forks is suspended with it, so the roll has its own. */
    if (ph->roll_spawned && pp_now_ns() - ph->roll_spawned_ns > ROLL_STEP_MAX_NS) {
      char why[256];
      snprintf(why, sizeof why,
               "a new worker was not ready within %lld s; %u old worker(s) keep serving",
               ROLL_STEP_MAX_NS / 1000000000LL, old_live);
      if (ws->spawns_pending) ws->spawns_pending = 0;
      finish(ws, "aborted", why);
    }
    return;
  }
  if (live > ws->workers_wanted) {
    /* One more than wanted is ready: one old worker can go without losing capacity. */
    ph->roll_spawned = 0;
    ph->roll_failures = 0;
    ph->workers_replaced++;
    LOG_ERR(ws,
            "phased restart: %u new worker(s) ready; retiring old worker %u (pid %u, phase %u); "
            "%u old left",
            new_ready, victim->index, victim->pid, victim->generation, old_live - 1);
    pp_shepherd_retire(ws, victim);
    return;
  }
  if (ph->roll_spawned && ++ph->roll_failures >= ROLL_MAX_FAILURES) {
    /* The SPAWNed worker is gone without becoming ready, three times in a row. */
    char why[256];
    snprintf(why, sizeof why,
             "%u new worker(s) in a row exited before they were ready; %u old worker(s) keep "
             "serving",
             ph->roll_failures, old_live);
    finish(ws, "aborted", why);
    return;
  }
  ph->roll_spawned = 1;
  ph->roll_spawned_ns = pp_now_ns();
  LOG(ws, "phased restart: spawning a phase %u worker (%u old left)", phase, old_live);
  pp_shepherd_spawn(ws, 1);
}

static void on_roll_timer(uv_timer_t *t) {
  roll_step(t->data);
}

static void on_swap_retry(uv_timer_t *t) {
  swap_shepherd(t->data);
}

/* The probe loaded the new code: the shepherd that forks from now on must be one that loads
 * it too. Its workers survive the SIGKILL (the server is their subreaper); shepherd.c starts
 * the new one at once (pp_phased_swap_planned) and it ADOPTs them. */
static void swap_shepherd(pp_workers *ws) {
  pp_phased *ph = &ws->phased;
  if (*ws->draining || *ws->stopping) return;
  if (ws->spawns_pending || ws->ctl_closing) {
    /* A FORKED in flight from the old shepherd would be lost with its control channel. */
    if (pp_now_ns() - ph->started_ns > ROLL_STEP_MAX_NS) {
      finish(ws, "aborted",
             "the shepherd still had an unanswered SPAWN after 120 s; not replacing it (the old "
             "generation keeps serving)");
      return;
    }
    uv_timer_start(&ph->timer, on_swap_retry, ROLL_POLL_MS, 0);
    return;
  }
  ph->state = PP_PHASED_ROLLING;
  ws->reg.phase++;
  ph->roll_spawned = 0;
  ph->roll_failures = 0;
  ph->old_workers_at_start = pp_phased_old_workers(ws);
  if (ws->shepherd_alive) {
    ph->swap_planned = 1;
    LOG_ERR(ws,
            "phased restart: phase %u: replacing the shepherd (pid %u) with one that loads the "
            "new code; %u old worker(s) keep serving",
            ws->reg.phase, ws->shepherd_pid, ph->old_workers_at_start);
    kill((pid_t)ws->shepherd_pid, SIGKILL);
  } else {
    LOG_ERR(ws, "phased restart: phase %u: the next shepherd loads the new code", ws->reg.phase);
  }
  uv_timer_start(&ph->timer, on_roll_timer, ROLL_POLL_MS, ROLL_POLL_MS);
}

/* ---------------------------------------------------------------- start, abort */

long pp_phased_begin(pp_workers *ws, char *msg, size_t msg_len) {
  pp_phased *ph = &ws->phased;
  if (ph->state != PP_PHASED_IDLE) {
    snprintf(msg, msg_len, "a phased restart is already in progress (%s, phase %u)",
             pp_phased_state_name(ph->state), ws->reg.phase);
    return -1;
  }
  if (*ws->draining || *ws->stopping || *ws->life.handed_over) {
    snprintf(msg, msg_len, "the server is draining");
    return -1;
  }
  if (*ws->life.restarting) {
    snprintf(msg, msg_len, "a hot restart is in progress (new pid %ld)", *ws->life.new_pid);
    return -1;
  }
  /* Ready as lifecycle.c's poll would say now (its poll may not have run yet). */
  int ready =
      *ws->life.ready || (pp_registry_count(&ws->reg, PP_WORKER_READY) >= ws->workers_wanted &&
                          ws->reg.slots_ready > 0);
  if (!ready || !ws->shepherd_ever_ready) {
    snprintf(msg, msg_len, "the workers are not ready yet");
    return -1;
  }
  if (!ws->shepherd_alive || !ws->ctl_open) {
    snprintf(msg, msg_len, "the shepherd is being restarted; try again");
    return -1;
  }
  if (ph->probe_alive || ph->probe_ctl_open || ph->probe_err_open || ph->handles_closing) {
    snprintf(msg, msg_len, "the last probe shepherd has not finished closing; try again");
    return -1;
  }
  if (probe_launch(ws, msg, msg_len) < 0) return -1;
  ph->state = PP_PHASED_PROBING;
  ph->started_at = time(NULL);
  ph->started_ns = pp_now_ns();
  ph->workers_replaced = 0;
  ph->last_error[0] = 0;
  ws->hooks->reloading(ws->srv, 1, "phased restart: loading the new code");
  LOG_ERR(ws,
          "phased restart: probe shepherd pid %u loads the new code of %s (phase %u now); the "
          "autoscaler is suspended until the restart ends",
          ph->probe_pid, ws->cfg->app, ws->reg.phase);
  uv_timer_start(&ph->timer, on_probe_timeout, PROBE_TIMEOUT_MS, 0);
  return (long)ph->probe_pid;
}

void pp_phased_abort(pp_workers *ws, const char *why) {
  pp_phased *ph = &ws->phased;
  if (ph->state == PP_PHASED_IDLE) return;
  if (ph->probe_alive) kill((pid_t)ph->probe_pid, SIGKILL);
  ph->swap_planned = 0;
  finish(ws, "aborted", why);
}

static void on_usr1(uv_signal_t *h, int signum) {
  pp_workers *ws = h->data;
  (void)signum;
  char msg[256];
  if (pp_phased_begin(ws, msg, sizeof msg) < 0) LOG_ERR(ws, "SIGUSR1: no phased restart: %s", msg);
}

void pp_phased_init(pp_workers *ws) {
  pp_phased *ph = &ws->phased;
  snprintf(ph->last_result, sizeof ph->last_result, "none");
  pp_buf_init(&ph->probe_rbuf);
  uv_timer_init(ws->loop, &ph->timer);
  ph->timer.data = ws;
  uv_signal_init(ws->loop, &ph->sig_usr1);
  ph->sig_usr1.data = ws;
  uv_signal_start(&ph->sig_usr1, on_usr1, SIGUSR1);
  uv_unref((uv_handle_t *)&ph->sig_usr1);
}

/* /stats "phased_restart" (docs/SERVER.md). */
void pp_phased_stats_json(pp_workers *ws, json_t *root) {
  const pp_phased *ph = &ws->phased;
  json_t *pr = json_object();
  json_object_set_new(pr, "state", json_string(pp_phased_state_name(ph->state)));
  if (ph->started_at) {
    char at[32];
    struct tm tm;
    gmtime_r(&ph->started_at, &tm);
    strftime(at, sizeof at, "%Y-%m-%dT%H:%M:%SZ", &tm);
    json_object_set_new(pr, "started_at", json_string(at));
  } else {
    json_object_set_new(pr, "started_at", json_null());
  }
  json_object_set_new(pr, "last_result", json_string(ph->last_result));
  json_object_set_new(pr, "last_error",
                      ph->last_error[0] ? json_string(ph->last_error) : json_null());
  json_object_set_new(pr, "last_duration_s",
                      ph->completed + ph->aborted ? json_real(ph->last_duration_s) : json_null());
  json_object_set_new(pr, "workers_replaced", json_integer(ph->workers_replaced));
  json_object_set_new(pr, "completed", json_integer((json_int_t)ph->completed));
  json_object_set_new(pr, "aborted", json_integer((json_int_t)ph->aborted));
  json_object_set_new(root, "phased_restart", pr);
}

/* /metrics: the phase, the old workers and the phased restarts. */
void pp_phased_metrics(pp_workers *ws, pp_buf *out) {
  pp_prom_gauge(out, "puma_plus_phase", "The worker generation; each phased restart adds one.",
                ws->reg.phase);
  pp_prom_gauge(out, "puma_plus_old_workers", "Workers of an earlier phase (being replaced).",
                pp_phased_old_workers(ws));
  pp_prom_appendf(out, "# HELP puma_plus_phased_restarts_total Phased restarts by result.\n# TYPE "
                       "puma_plus_phased_restarts_total counter\n");
  pp_prom_appendf(out, "puma_plus_phased_restarts_total{result=\"ok\"} %" PRIu64 "\n",
                  ws->phased.completed);
  pp_prom_appendf(out, "puma_plus_phased_restarts_total{result=\"aborted\"} %" PRIu64 "\n",
                  ws->phased.aborted);
}
