/* The control app's documents: GET /stats (puma's stats JSON, a strict superset, plus a
 * `queue` key) and GET /metrics (Prometheus text). Field reference: docs/SERVER.md. Each is
 * an ordered table of parts (stats_parts, metrics_parts): the modules that own the data write
 * their own (phased.c, h2conn.c, h3conn.c, conn.c, dashboard.c), this file the registry's,
 * the queue's, the counters' and the controller's. Runs only on control requests, so it may
 * allocate (jansson). */
#include <inttypes.h>
#include <stdarg.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "server/base/clock.h"
#include "server/ops/access_log.h"
#include "server/base/prom.h"
#include "server/ops/ops.h"
#include "server/base/procmem.h"
#include "server/core/dispatch.h"
#include "server/ops/dashboard.h"
#include "server/session/h3conn.h"
#include "server/workers/phased.h"
#include "server/workers/wlink.h"

static void iso8601(time_t t, char *out, size_t n) {
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(out, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static double ms(uint64_t ns) {
  return (double)ns / 1e6;
}

/* p50/p95/p99/max/mean/count of a histogram, in milliseconds. */
static json_t *summary(const pp_hist *h) {
  json_t *o = json_object();
  json_object_set_new(o, "count", json_integer((json_int_t)h->count));
  json_object_set_new(o, "p50_ms", json_real(ms(pp_hist_percentile(h, 50))));
  json_object_set_new(o, "p95_ms", json_real(ms(pp_hist_percentile(h, 95))));
  json_object_set_new(o, "p99_ms", json_real(ms(pp_hist_percentile(h, 99))));
  json_object_set_new(o, "max_ms", json_real(ms(h->count ? h->max_ns : 0)));
  json_object_set_new(o, "mean_ms", json_real(ms(pp_hist_mean(h))));
  return o;
}

int pp_proc_mem_read(uint32_t pid, pp_proc_mem *out) {
  return pp_smaps_rollup_read(pid, &out->rss, &out->pss, &out->uss);
}

void pp_stats_sample_cpu(pp_ops *op, int64_t now_ns) {
  for (uint32_t i = 0; i < op->workers->reg.high; i++) {
    pp_worker *w = &op->workers->reg.workers[i];
    if (w->state == PP_WORKER_FREE || w->state == PP_WORKER_PARKED) continue;
    pp_worker_sample_cpu(w, now_ns);
  }
}

int64_t pp_workers_mean_pss(pp_ops *op) {
  uint64_t sum = 0, n = 0;
  for (uint32_t i = 0; i < op->workers->reg.high; i++) {
    pp_worker *w = &op->workers->reg.workers[i];
    pp_proc_mem m;
    if (w->state != PP_WORKER_READY || pp_proc_mem_read(w->pid, &m) != 0) continue;
    sum += m.pss;
    n++;
  }
  return n ? (int64_t)(sum / n) : -1;
}

static json_t *mem_json(const pp_proc_mem *m) {
  json_t *o = json_object();
  json_object_set_new(o, "rss_bytes", json_integer((json_int_t)m->rss));
  json_object_set_new(o, "pss_bytes", json_integer((json_int_t)m->pss));
  json_object_set_new(o, "uss_bytes", json_integer((json_int_t)m->uss));
  return o;
}

static void mem_add(pp_proc_mem *sum, const pp_proc_mem *m) {
  sum->rss += m->rss;
  sum->pss += m->pss;
  sum->uss += m->uss;
}

static const char *worker_state_name(pp_worker_state st) {
  switch (st) {
  case PP_WORKER_READY: return "ready";
  case PP_WORKER_BOOTING: return "booting";
  case PP_WORKER_RETIRING: return "retiring";
  case PP_WORKER_PARKED: return "parked";
  default: return "free";
  }
}

/* puma's top-level fields. */
static void json_head(pp_ops *op, json_t *root) {
  char ts[32];
  iso8601(*op->started_at, ts, sizeof ts);
  uint32_t ready = pp_registry_count(&op->workers->reg, PP_WORKER_READY);
  uint32_t booting = pp_registry_count(&op->workers->reg, PP_WORKER_BOOTING);
  json_object_set_new(root, "started_at", json_string(ts));
  json_object_set_new(root, "workers", json_integer(ready + booting));
  json_object_set_new(root, "phase", json_integer(op->workers->reg.phase));
  json_object_set_new(root, "booted_workers", json_integer(ready));
  /* as puma's: workers of an earlier phase (a phased restart replaces them) */
  json_object_set_new(root, "old_workers", json_integer(pp_phased_old_workers(op->workers)));
}

/* The workers (puma's worker_status) and the memory of every process. */
static void json_workers(pp_ops *op, json_t *root) {
  /* Memory (docs/SERVER.md): every process read once, so the sums are exactly the parts. */
  pp_proc_mem by_state[5], all_workers, mem;
  memset(by_state, 0, sizeof by_state);
  memset(&all_workers, 0, sizeof all_workers);
  uint32_t mem_known = 0;
  json_t *ws = json_array();
  char now_ts[32];
  iso8601(time(NULL), now_ts, sizeof now_ts);
  int64_t mono_now = pp_now_ns();
  time_t wall_now = time(NULL);
  for (int i = 0; i < PP_MAX_WORKERS; i++) {
    pp_worker *w = &op->workers->reg.workers[i];
    if (w->state == PP_WORKER_FREE) continue;
    json_t *o = json_object();
    char started[32];
    iso8601(wall_now - (time_t)((mono_now - w->forked_ns) / 1000000000), started, sizeof started);
    json_object_set_new(o, "started_at", json_string(started));
    json_object_set_new(o, "pid", json_integer(w->pid));
    json_object_set_new(o, "index", json_integer(w->index));
    json_object_set_new(o, "phase", json_integer(w->generation));
    json_object_set_new(o, "booted", json_boolean(w->state == PP_WORKER_READY));
    if (w->heartbeat_ns) { /* as puma's: the last heartbeat */
      char beat[32];
      iso8601(wall_now - (time_t)((mono_now - w->heartbeat_ns) / 1000000000), beat, sizeof beat);
      json_object_set_new(o, "last_checkin", json_string(beat));
    } else {
      json_object_set_new(o, "last_checkin", json_string(now_ts));
    }
    json_object_set_new(o, "heartbeat_age_ms",
                        w->heartbeat_ns ? json_real((double)(mono_now - w->heartbeat_ns) / 1e6)
                                        : json_null());
    json_object_set_new(o, "killed", json_boolean(w->killed));
    json_object_set_new(o, "state", json_string(worker_state_name(w->state)));
    if (pp_proc_mem_read(w->pid, &mem) == 0) {
      json_object_set_new(o, "memory", mem_json(&mem));
      mem_add(&by_state[w->state], &mem);
      mem_add(&all_workers, &mem);
      mem_known++;
    } else {
      json_object_set_new(o, "memory", json_null());
    }
    json_t *ls = json_object();
    json_object_set_new(ls, "backlog", json_integer(0)); /* the one queue is server-wide */
    json_object_set_new(ls, "running", json_integer(w->slots));
    json_object_set_new(ls, "pool_capacity", json_integer(w->slots - w->busy));
    json_object_set_new(ls, "max_threads", json_integer(op->cfg->max_slots));
    json_object_set_new(ls, "requests_count", json_integer((json_int_t)w->requests));
    json_object_set_new(ls, "busy_threads", json_integer(w->busy));
    /* GC.stat(:heap_live_slots) from its last heartbeat: null until one says it */
    json_object_set_new(ls, "heap_live_slots",
                        w->heap_live_slots >= 0 ? json_integer((json_int_t)w->heap_live_slots)
                                                : json_null());
    json_object_set_new(o, "last_status", ls);
    /* Run-time slots (docs/SERVER.md "Slots at run time") and the process's CPU time, whose
     * change per tick is its share of one core (docs/DESIGN.md 3b). */
    json_object_set_new(o, "slots", json_integer(w->slots));
    /* of those, Ractors (HELLO's RACTOR bit: each runs under its own GVL) */
    json_object_set_new(o, "ractor_slots", json_integer(w->ractor_slots));
    json_object_set_new(o, "slots_target", json_integer(pp_wlink_slots_target(op->workers, w)));
    uint64_t cpu_ns;
    json_object_set_new(o, "cpu_ns",
                        pp_proc_cpu_read(w->pid, &cpu_ns) == 0 ? json_integer((json_int_t)cpu_ns)
                                                               : json_null());
    json_object_set_new(o, "cpu_share", w->cpu_share >= 0 ? json_real(w->cpu_share) : json_null());
    json_object_set_new(o, "cpu_demand_share",
                        w->demand_share >= 0 ? json_real(w->demand_share) : json_null());
    json_array_append_new(ws, o);
  }
  json_object_set_new(root, "worker_status", ws);
  json_object_set_new(root, "slots_per_worker",
                      json_integer(op->workers->slots_shape ? op->workers->slots_shape
                                                            : pp_config_slots_initial(op->cfg)));
  /* connected Ractor slots of every worker (the sum of worker_status[].ractor_slots) */
  json_object_set_new(root, "ractor_slots", json_integer(op->workers->reg.ractor_slots));
  json_t *mo = json_object();
  json_object_set_new(mo, "source", json_string("/proc/PID/smaps_rollup"));
  json_object_set_new(mo, "workers_measured", json_integer(mem_known));
  json_object_set_new(mo, "workers", mem_json(&all_workers));
  json_object_set_new(mo, "serving", mem_json(&by_state[PP_WORKER_READY]));
  json_object_set_new(mo, "parked", mem_json(&by_state[PP_WORKER_PARKED]));
  pp_proc_mem shepherd, self, ruby = all_workers, total;
  int have_shepherd =
      op->workers->shepherd_alive && pp_proc_mem_read(op->workers->shepherd_pid, &shepherd) == 0;
  int have_self = pp_proc_mem_read((uint32_t)getpid(), &self) == 0;
  json_object_set_new(mo, "shepherd", have_shepherd ? mem_json(&shepherd) : json_null());
  if (have_shepherd) mem_add(&ruby, &shepherd);
  json_object_set_new(mo, "ruby", mem_json(&ruby)); /* workers + shepherd */
  json_object_set_new(mo, "server", have_self ? mem_json(&self) : json_null());
  total = ruby;
  if (have_self) mem_add(&total, &self);
  json_object_set_new(mo, "total", mem_json(&total)); /* workers + shepherd + this process */
  json_object_set_new(root, "memory", mo);
}

/* The queue: depth, slots, the latency windows, arrivals and completions. */
static void json_queue(pp_ops *op, json_t *root) {
  pp_stats *st = &op->core->stats;
  json_t *q = json_object();
  json_object_set_new(q, "depth", json_integer(op->core->queue.len));
  json_object_set_new(q, "slots_ready", json_integer(op->workers->reg.slots_ready));
  json_object_set_new(q, "slots_busy", json_integer(op->workers->reg.slots_busy));
  json_object_set_new(q, "window_seconds", json_real((double)op->cfg->tick_ns / 1e9));
  json_object_set_new(q, "window", summary(&st->queue_last));
  json_object_set_new(q, "lifetime", summary(&st->queue.lifetime));
  uint64_t wait = pp_dispatch_predicted_wait(op->core);
  json_object_set_new(q, "predicted_wait_ms",
                      wait == UINT64_MAX ? json_null() : json_real(ms(wait)));
  json_t *svc = json_object();
  json_object_set_new(svc, "window", summary(&st->service_last));
  json_object_set_new(svc, "lifetime", summary(&st->service.lifetime));
  json_object_set_new(q, "service", svc);
  json_t *ttfb = json_object();
  json_object_set_new(ttfb, "window", summary(&st->ttfb_last));
  json_object_set_new(ttfb, "lifetime", summary(&st->ttfb.lifetime));
  json_object_set_new(q, "ttfb", ttfb);
  json_object_set_new(q, "total", summary(&st->total.lifetime));
  json_object_set_new(q, "body_wait", summary(&st->body_wait.lifetime));
  json_object_set_new(q, "arrivals", json_integer((json_int_t)st->arrivals));
  json_object_set_new(q, "completions", json_integer((json_int_t)st->completions));
  json_object_set_new(q, "arrival_rate",
                      json_real(st->last_window_ns
                                    ? (double)st->arrivals_last * 1e9 / (double)st->last_window_ns
                                    : 0));
  json_object_set_new(
      q, "completion_rate",
      json_real(st->last_window_ns ? (double)st->completions_last * 1e9 / (double)st->last_window_ns
                                   : 0));
  json_object_set_new(q, "shed", json_integer((json_int_t)st->shed));
  {
    pp_admit_input in;
    pp_dispatch_admit_input(op->core, &in);
    char reason[256];
    pp_admit_reason(&op->core->admit, &op->ctl.policy, &in, reason, sizeof reason);
    json_t *ad = json_object();
    json_object_set_new(ad, "rule", json_string(pp_shed_rule_name(op->ctl.policy.shed_rule)));
    json_object_set_new(ad, "standing", json_boolean(op->core->admit.standing));
    json_object_set_new(ad, "standing_periods",
                        json_integer((json_int_t)op->core->admit.standing_entries));
    json_object_set_new(ad, "standing_wait_ms",
                        json_real(ms(pp_admit_standing_wait(&op->ctl.policy, &in))));
    json_object_set_new(ad, "shed_at_arrival",
                        json_integer((json_int_t)op->core->admit.shed_at_arrival));
    json_object_set_new(ad, "shed_at_dequeue",
                        json_integer((json_int_t)op->core->admit.shed_at_dequeue));
    json_object_set_new(ad, "reason", json_string(reason));
    json_object_set_new(q, "admission", ad);
  }
  json_object_set_new(q, "cancelled_queued", json_integer((json_int_t)st->cancelled_queued));
  json_object_set_new(q, "cancelled_running", json_integer((json_int_t)st->cancelled_running));
  json_object_set_new(q, "hijacked", json_integer((json_int_t)st->hijacked));
  json_object_set_new(q, "slots_closed", json_integer((json_int_t)st->slots_closed));
  json_object_set_new(q, "gvl_wait_mean_ms",
                      st->gvl_count ? json_real(ms((uint64_t)st->gvl_sum_ns / st->gvl_count))
                                    : json_null());
  json_object_set_new(q, "cpu_mean_ms",
                      st->cpu_count ? json_real(ms((uint64_t)st->cpu_sum_ns / st->cpu_count))
                                    : json_null());
  json_object_set_new(root, "queue", q);
}

/* The requests and their endings, and liveness (timeouts, kills, the shepherd). */
static void json_requests(pp_ops *op, json_t *root) {
  pp_stats *st = &op->core->stats;
  json_t *rq = json_object();
  json_object_set_new(rq, "total", json_integer((json_int_t)st->requests));
  json_object_set_new(rq, "responses", json_integer((json_int_t)st->responses));
  json_object_set_new(rq, "status_1xx", json_integer((json_int_t)op->xpool->status_1xx));
  json_object_set_new(rq, "status_2xx", json_integer((json_int_t)op->xpool->status_2xx));
  json_object_set_new(rq, "status_3xx", json_integer((json_int_t)op->xpool->status_3xx));
  json_object_set_new(rq, "status_4xx", json_integer((json_int_t)op->xpool->status_4xx));
  json_object_set_new(rq, "status_5xx", json_integer((json_int_t)op->xpool->status_5xx));
  json_object_set_new(rq, "refused", json_integer((json_int_t)st->refused));
  json_object_set_new(rq, "bad_gateway", json_integer((json_int_t)st->errors_502));
  json_object_set_new(rq, "app_errors_500", json_integer((json_int_t)st->errors_500));
  json_object_set_new(rq, "timeouts", json_integer((json_int_t)st->timeouts));
  json_object_set_new(rq, "connections_accepted",
                      json_integer((json_int_t)st->connections_accepted));
  json_object_set_new(rq, "proxy_headers", json_integer((json_int_t)st->proxy_headers));
  json_object_set_new(rq, "proxy_rejected", json_integer((json_int_t)st->proxy_rejected));
  json_object_set_new(rq, "connections_refused", json_integer((json_int_t)st->connections_refused));
  json_object_set_new(rq, "connections_open", json_integer(op->sess->clients.len));
  json_object_set_new(rq, "max_connections", json_integer(op->sess->max_connections));
  json_object_set_new(rq, "worker_restarts", json_integer((json_int_t)st->worker_restarts));
  json_object_set_new(rq, "body_buffered_bytes",
                      json_integer((json_int_t)op->xpool->body_buffered));
  json_object_set_new(rq, "max_buffered_body_total",
                      json_integer((json_int_t)op->cfg->max_buffered_body_total));
  json_object_set_new(rq, "body_budget_waits", json_integer((json_int_t)st->body_budget_waits));
  json_object_set_new(rq, "body_budget_streamed",
                      json_integer((json_int_t)st->body_budget_streamed));
  json_object_set_new(rq, "body_spooled", json_integer((json_int_t)op->xpool->spooled_bodies));
  json_object_set_new(rq, "body_spool_bytes", json_integer((json_int_t)op->xpool->spool_bytes));
  json_object_set_new(rq, "max_spool_total", json_integer((json_int_t)op->cfg->max_spool_total));
  json_object_set_new(rq, "body_spool_refused_413",
                      json_integer((json_int_t)op->xpool->spool_refused_413));
  json_object_set_new(rq, "body_spool_refused_503",
                      json_integer((json_int_t)op->xpool->spool_refused_503));
  json_object_set_new(rq, "body_spool_errors", json_integer((json_int_t)op->xpool->spool_errors));
  json_object_set_new(rq, "request_timeouts", json_integer((json_int_t)st->request_timeouts));
  json_object_set_new(root, "requests", rq);
  /* the control app's own traffic (/stats, /metrics, /dashboard, ...): in none of the above */
  json_t *ctl = json_object();
  json_object_set_new(ctl, "requests", json_integer((json_int_t)st->control_requests));
  json_object_set_new(ctl, "responses", json_integer((json_int_t)st->control_responses));
  json_object_set_new(root, "control", ctl);

  /* Liveness: request timeouts' kills, heartbeats, shepherd supervision. */
  json_t *lv = json_object();
  json_object_set_new(lv, "request_timeout_ms",
                      json_real((double)op->cfg->request_timeout_ns / 1e6));
  json_object_set_new(lv, "worker_kill_grace_ms",
                      json_real((double)op->cfg->worker_kill_grace_ns / 1e6));
  json_object_set_new(lv, "worker_timeout_ms", json_real((double)op->cfg->worker_timeout_ns / 1e6));
  json_object_set_new(lv, "workers_killed_timeout",
                      json_integer((json_int_t)st->workers_killed_timeout));
  json_object_set_new(lv, "workers_killed_heartbeat",
                      json_integer((json_int_t)st->workers_killed_heartbeat));
  json_object_set_new(lv, "shepherd_pid",
                      json_integer(op->workers->shepherd_alive ? op->workers->shepherd_pid : 0));
  json_object_set_new(lv, "shepherd_alive", json_boolean(op->workers->shepherd_alive));
  json_object_set_new(lv, "shepherd_restarts", json_integer((json_int_t)st->shepherd_restarts));
  json_object_set_new(lv, "workers_adopted", json_integer((json_int_t)st->workers_adopted));
  json_object_set_new(lv, "orphans_reaped", json_integer((json_int_t)st->orphans_reaped));
  json_object_set_new(root, "liveness", lv);
}

/* The controller: autoscaling, standby, shedding and its recent decisions. */
static void json_controller(pp_ops *op, json_t *root) {
  uint32_t ready = pp_registry_count(&op->workers->reg, PP_WORKER_READY);
  uint32_t booting = pp_registry_count(&op->workers->reg, PP_WORKER_BOOTING);
  uint32_t retiring = pp_registry_count(&op->workers->reg, PP_WORKER_RETIRING);
  uint32_t parked = pp_registry_count(&op->workers->reg, PP_WORKER_PARKED);
  controller *ct = &op->ctl;
  json_t *co = json_object();
  json_object_set_new(co, "autoscale", json_boolean(ct->enabled));
  json_object_set_new(co, "workers_wanted", json_integer(op->workers->workers_wanted));
  json_object_set_new(co, "workers_ready", json_integer(ready));
  json_object_set_new(co, "workers_booting", json_integer(booting + op->workers->spawns_pending));
  json_object_set_new(co, "workers_retiring", json_integer(retiring));
  const pp_standby *sb = &op->workers->standby;
  json_object_set_new(co, "standby", json_integer(sb->enabled ? ct->policy.standby : 0));
  json_object_set_new(co, "workers_standby", json_integer(parked));
  json_object_set_new(co, "workers_standby_booting", json_integer(sb->pending));
  json_object_set_new(co, "activations", json_integer((json_int_t)sb->activations));
  json_object_set_new(co, "activations_missed", json_integer((json_int_t)sb->activations_missed));
  json_t *act = summary(&sb->dispatch); /* decision -> first request dispatched */
  json_object_set_new(act, "to_hello", summary(&sb->hello));
  json_object_set_new(act, "to_first_request", summary(&sb->first_request));
  json_t *recent = json_array();
  uint32_t n_recent = sb->recent_n < PP_ACTIVATION_RECENT ? sb->recent_n : PP_ACTIVATION_RECENT;
  for (uint32_t i = sb->recent_n - n_recent; i < sb->recent_n; i++)
    json_array_append_new(recent, json_real(ms((uint64_t)sb->recent_ns[i % PP_ACTIVATION_RECENT])));
  json_object_set_new(act, "recent_ms", recent);
  json_object_set_new(co, "activation", act);
  json_object_set_new(co, "shedding", json_boolean(ct->shedding));
  json_object_set_new(co, "tick", json_integer((json_int_t)ct->tick));
  if (ct->have_last) {
    json_object_set_new(co, "last_action", json_string(pp_action_name(ct->last.action)));
    json_object_set_new(co, "last_reason", json_string(ct->last.reason));
  } else {
    json_object_set_new(co, "last_action", json_null());
    json_object_set_new(co, "last_reason", json_null());
  }
  pp_dashboard *d = &op->dash;
  json_t *decs = json_array(); /* newest first */
  for (uint32_t i = 0; i < d->decisions_len; i++) {
    const pp_dash_decision *e =
        &d->decisions[(d->decisions_head + PP_DASH_DECISIONS - 1 - i) % PP_DASH_DECISIONS];
    json_t *o = json_object();
    char at[32];
    iso8601(e->at, at, sizeof at);
    json_object_set_new(o, "tick", json_integer((json_int_t)e->tick));
    json_object_set_new(o, "at", json_string(at));
    json_object_set_new(o, "action", json_string(pp_action_name(e->action)));
    json_object_set_new(o, "count", json_integer(e->count));
    json_object_set_new(o, "shed", json_boolean(e->shed));
    json_object_set_new(o, "reason", json_string(e->reason));
    json_array_append_new(decs, o);
  }
  json_object_set_new(co, "decisions", decs);
  json_object_set_new(root, "controller", co);
}

typedef void (*json_part)(pp_ops *op, json_t *root);

/* The parts of the layers below whose functions take their own context, or still the server. */
static void json_phased(pp_ops *op, json_t *root) {
  pp_phased_stats_json(op->workers, root);
}
static void json_h2(pp_ops *op, json_t *root) {
  pp_h2conn_stats_json(op->sess, root);
}
static void json_h3(pp_ops *op, json_t *root) {
  pp_h3conn_stats_json(op->sess, root);
}
static void json_tls(pp_ops *op, json_t *root) {
  pp_conn_tls_stats_json(op->sess, root);
}
/* "websocket": connections the server owns, their events through the queue, messages and
 * bytes both ways, fan-out, and closes by code (docs/WEBSOCKET.md "Counters"). */
static const char *const ws_close_names[17] = {"1000", "1001", "1002", "1003", "1004", "1005",
                                               "1006", "1007", "1008", "1009", "1010", "1011",
                                               "1012", "1013", "1014", "1015", "other"};
static void json_websocket(pp_ops *op, json_t *root) {
  const pp_stats *st = &op->core->stats;
  json_t *w = json_object();
#define WS_INT(k, v) json_object_set_new(w, k, json_integer((json_int_t)(v)))
  WS_INT("open", st->ws.open);
  WS_INT("opened", st->ws.opened);
  WS_INT("closed", st->ws.closed);
  WS_INT("events", st->ws.events);
  WS_INT("events_lost", st->ws.events_lost);
  WS_INT("messages_in", st->ws.messages_in);
  WS_INT("messages_out", st->ws.messages_out);
  WS_INT("bytes_in", st->ws.bytes_in);
  WS_INT("bytes_out", st->ws.bytes_out);
  WS_INT("broadcasts", st->ws.broadcasts);
  WS_INT("fanout", st->ws.fanout);
  WS_INT("unknown_conn", st->ws.unknown_conn);
  WS_INT("slow_reader_closes", st->ws.slow_reader_closes);
  WS_INT("worker_gone_closes", st->ws.worker_gone_closes);
  WS_INT("overload_closes", st->ws.overload_closes);
  WS_INT("output_bytes", op->sess->wshub.output_total);
#undef WS_INT
  json_t *closes = json_object();
  for (int i = 0; i < 17; i++)
    if (st->ws.closes[i])
      json_object_set_new(closes, ws_close_names[i], json_integer((json_int_t)st->ws.closes[i]));
  json_object_set_new(w, "closes", closes);
  json_object_set_new(w, "queue", summary(&st->ws.queue.lifetime));
  json_object_set_new(root, "websocket", w);
}

static void prom_hist(pp_buf *b, const char *name, const char *help, const pp_hist *h);

static void metrics_websocket(pp_ops *op, pp_buf *out) {
  const pp_stats *st = &op->core->stats;
  pp_prom_gauge(out, "puma_plus_websocket_connections",
                "WebSocket connections the server holds open.", (double)st->ws.open);
  pp_prom_counter(out, "puma_plus_websocket_opened_total", "WebSocket connections accepted.",
                  st->ws.opened);
  pp_prom_counter(out, "puma_plus_websocket_messages_in_total",
                  "WebSocket messages received from clients.", st->ws.messages_in);
  pp_prom_counter(out, "puma_plus_websocket_messages_out_total",
                  "WebSocket messages queued to clients (a broadcast counts once per subscriber).",
                  st->ws.messages_out);
  pp_prom_counter(out, "puma_plus_websocket_bytes_in_total",
                  "WebSocket message payload bytes received (after inflation).", st->ws.bytes_in);
  pp_prom_counter(out, "puma_plus_websocket_bytes_out_total",
                  "WebSocket message payload bytes sent (before deflation).", st->ws.bytes_out);
  pp_prom_counter(out, "puma_plus_websocket_broadcasts_total", "WS_BROADCAST frames from workers.",
                  st->ws.broadcasts);
  pp_prom_counter(out, "puma_plus_websocket_fanout_total",
                  "Messages written to subscribers by broadcasts.", st->ws.fanout);
  pp_prom_appendf(out, "# HELP puma_plus_websocket_closes_total WebSocket connections closed, by "
                       "close code.\n# TYPE puma_plus_websocket_closes_total counter\n");
  for (int i = 0; i < 17; i++)
    if (st->ws.closes[i])
      pp_prom_appendf(out, "puma_plus_websocket_closes_total{code=\"%s\"} %" PRIu64 "\n",
                      ws_close_names[i], st->ws.closes[i]);
  prom_hist(out, "puma_plus_websocket_event_queue_seconds",
            "Queue time of WebSocket events (open, message, close) before a slot took them.",
            &st->ws.queue.lifetime);
}

static void json_access_log(pp_ops *op, json_t *root) {
  pp_access_log_stats_json(op->access_log, root);
}

/* The /stats document, in this order; each part is written by the module whose data it is
 * (phased.c, h2conn.c, h3conn.c, conn.c, dashboard.c), the rest here from the registry, the
 * queue, the counters and the controller. */
static const json_part stats_parts[] = {
    json_head,       json_phased,    json_workers, json_queue,      json_requests,
    json_h2,         json_h3,        json_tls,     json_controller, pp_dashboard_stats_json,
    json_access_log, json_websocket,
};

void pp_stats_json(pp_ops *op, int pretty, pp_buf *out) {
  json_t *root = json_object();
  for (size_t i = 0; i < sizeof stats_parts / sizeof stats_parts[0]; i++)
    stats_parts[i](op, root);
  char *text = json_dumps(root, (pretty ? JSON_INDENT(2) : JSON_COMPACT) | JSON_REAL_PRECISION(10));
  pp_buf_append_str(out, text);
  pp_buf_append(out, "\n", 1);
  free(text);
  json_decref(root);
}

static const double bounds_s[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                  0.1,    0.25,    0.5,    1,     2.5,    5,     10,   30,    60};

/* A Prometheus histogram from a pp_hist. A bucket counts toward a bound when its whole range
 * lies at or below the bound (pp_hist buckets are < 1% wide, so this is within 1%). */
static void prom_hist(pp_buf *b, const char *name, const char *help, const pp_hist *h) {
  pp_prom_appendf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
  size_t nb = sizeof bounds_s / sizeof bounds_s[0];
  uint64_t cum[sizeof bounds_s / sizeof bounds_s[0]] = {0};
  for (uint32_t i = 0; i < PP_HIST_BUCKETS; i++) {
    if (!h->buckets[i]) continue;
    uint64_t lo, hi;
    pp_hist__bucket_range(i, &lo, &hi);
    for (size_t k = 0; k < nb; k++)
      if ((double)hi <= bounds_s[k] * 1e9) cum[k] += h->buckets[i];
  }
  for (size_t k = 0; k < nb; k++)
    pp_prom_appendf(b, "%s_bucket{le=\"%g\"} %" PRIu64 "\n", name, bounds_s[k], cum[k]);
  pp_prom_appendf(b, "%s_bucket{le=\"+Inf\"} %" PRIu64 "\n", name, h->count);
  pp_prom_appendf(b, "%s_sum %.9f\n%s_count %" PRIu64 "\n", name, (double)h->sum_ns / 1e9, name,
                  h->count);
}

/* The latency histograms, the queue, the workers and the standby activations. */
static void metrics_core(pp_ops *op, pp_buf *out) {
  pp_stats *st = &op->core->stats;
  prom_hist(out, "puma_plus_queue_seconds", "Queue time (T3 - T2b) of dispatched requests.",
            &st->queue.lifetime);
  prom_hist(out, "puma_plus_service_seconds",
            "Service time (T5 - T4 - body read) reported by workers.", &st->service.lifetime);
  prom_hist(out, "puma_plus_ttfb_seconds",
            "First response byte written minus first request byte (T1).", &st->ttfb.lifetime);
  prom_hist(out, "puma_plus_request_duration_seconds",
            "Response flushed (T6) minus first request byte (T1).", &st->total.lifetime);
  prom_hist(
      out, "puma_plus_body_wait_seconds",
      "Time spent waiting for request body bytes (buffered before T2b, or reported by the worker).",
      &st->body_wait.lifetime);
  pp_prom_gauge(out, "puma_plus_queue_depth", "Runnable requests waiting (L).",
                op->core->queue.len);
  uint64_t wait = pp_dispatch_predicted_wait(op->core);
  pp_prom_gauge(out, "puma_plus_predicted_wait_seconds",
                "Predicted wait of a request arriving now (-1: no capacity).",
                wait == UINT64_MAX ? -1.0 : (double)wait / 1e9);
  pp_prom_gauge(out, "puma_plus_slots_ready", "Connected worker threads (capacity).",
                op->workers->reg.slots_ready);
  pp_prom_gauge(out, "puma_plus_slots_busy", "Worker threads running a request.",
                op->workers->reg.slots_busy);
  pp_prom_gauge(
      out, "puma_plus_slots_per_worker",
      "Slots per worker the server asks for (pp_wlink_set_slots_all, else the starting count).",
      op->workers->slots_shape ? op->workers->slots_shape : pp_config_slots_initial(op->cfg));
  pp_prom_appendf(out,
                  "# HELP puma_plus_worker_slots Connected slots of each worker process.\n# TYPE "
                  "puma_plus_worker_slots gauge\n");
  for (uint32_t i = 0; i < op->workers->reg.high; i++) {
    pp_worker *w = &op->workers->reg.workers[i];
    if (w->state == PP_WORKER_FREE) continue;
    pp_prom_appendf(out, "puma_plus_worker_slots{index=\"%u\",pid=\"%u\"} %u\n", w->index, w->pid,
                    w->slots);
  }
  pp_prom_gauge(out, "puma_plus_ractor_slots",
                "Connected slots that are Ractors (HELLO's RACTOR bit), every worker.",
                op->workers->reg.ractor_slots);
  pp_prom_appendf(out, "# HELP puma_plus_worker_ractor_slots Connected Ractor slots of each "
                       "worker process.\n# TYPE puma_plus_worker_ractor_slots gauge\n");
  for (uint32_t i = 0; i < op->workers->reg.high; i++) {
    pp_worker *w = &op->workers->reg.workers[i];
    if (w->state == PP_WORKER_FREE) continue;
    pp_prom_appendf(out, "puma_plus_worker_ractor_slots{index=\"%u\",pid=\"%u\"} %u\n", w->index,
                    w->pid, w->ractor_slots);
  }
  pp_prom_appendf(
      out, "# HELP puma_plus_worker_slots_target Slot target of each worker process.\n# TYPE "
           "puma_plus_worker_slots_target gauge\n");
  for (uint32_t i = 0; i < op->workers->reg.high; i++) {
    pp_worker *w = &op->workers->reg.workers[i];
    if (w->state == PP_WORKER_FREE) continue;
    pp_prom_appendf(out, "puma_plus_worker_slots_target{index=\"%u\",pid=\"%u\"} %u\n", w->index,
                    w->pid, pp_wlink_slots_target(op->workers, w));
  }
  pp_prom_appendf(out,
                  "# HELP puma_plus_worker_cpu_seconds_total CPU time (user + system) of each "
                  "worker process, from /proc/PID/stat.\n# TYPE puma_plus_worker_cpu_seconds_total "
                  "counter\n");
  for (uint32_t i = 0; i < op->workers->reg.high; i++) {
    pp_worker *w = &op->workers->reg.workers[i];
    uint64_t cpu_ns;
    if (w->state == PP_WORKER_FREE || pp_proc_cpu_read(w->pid, &cpu_ns) != 0) continue;
    pp_prom_appendf(out, "puma_plus_worker_cpu_seconds_total{index=\"%u\",pid=\"%u\"} %.3f\n",
                    w->index, w->pid, (double)cpu_ns / 1e9);
  }
  pp_prom_appendf(out,
                  "# HELP puma_plus_worker_cpu_share CPU time of each worker process over the last "
                  "tick, as a share of one core.\n# TYPE puma_plus_worker_cpu_share gauge\n");
  for (uint32_t i = 0; i < op->workers->reg.high; i++) {
    pp_worker *w = &op->workers->reg.workers[i];
    if (w->state == PP_WORKER_FREE || w->cpu_share < 0) continue;
    pp_prom_appendf(out, "puma_plus_worker_cpu_share{index=\"%u\",pid=\"%u\"} %.4f\n", w->index,
                    w->pid, w->cpu_share);
  }
  pp_prom_appendf(out, "# HELP puma_plus_worker_cpu_demand_share CPU time plus run-queue wait of "
                       "each worker process's threads over the last tick, as a share of one "
                       "core (what the controller reads).\n# TYPE "
                       "puma_plus_worker_cpu_demand_share gauge\n");
  for (uint32_t i = 0; i < op->workers->reg.high; i++) {
    pp_worker *w = &op->workers->reg.workers[i];
    if (w->state == PP_WORKER_FREE || w->demand_share < 0) continue;
    pp_prom_appendf(out, "puma_plus_worker_cpu_demand_share{index=\"%u\",pid=\"%u\"} %.4f\n",
                    w->index, w->pid, w->demand_share);
  }
  pp_prom_counter(out, "puma_plus_slots_closed_total",
                  "Slots taken back at run time (SLOT_CLOSE sent).", st->slots_closed);
  pp_prom_appendf(
      out, "# HELP puma_plus_workers Worker processes by state.\n# TYPE puma_plus_workers gauge\n");
  pp_prom_appendf(out, "puma_plus_workers{state=\"ready\"} %u\n",
                  pp_registry_count(&op->workers->reg, PP_WORKER_READY));
  pp_prom_appendf(out, "puma_plus_workers{state=\"booting\"} %u\n",
                  pp_registry_count(&op->workers->reg, PP_WORKER_BOOTING));
  pp_prom_appendf(out, "puma_plus_workers{state=\"retiring\"} %u\n",
                  pp_registry_count(&op->workers->reg, PP_WORKER_RETIRING));
  pp_prom_appendf(out, "puma_plus_workers{state=\"parked\"} %u\n",
                  pp_registry_count(&op->workers->reg, PP_WORKER_PARKED));
  prom_hist(
      out, "puma_plus_standby_activation_seconds",
      "Standby activation: controller decision to the first request dispatched to the worker.",
      &op->workers->standby.dispatch);
  pp_prom_gauge(out, "puma_plus_workers_wanted",
                "Workers the server keeps alive (the controller's target when autoscaling).",
                op->workers->workers_wanted);
}

/* Responses, requests and their endings, liveness, connections, the controller. */
static void metrics_requests(pp_ops *op, pp_buf *out) {
  pp_stats *st = &op->core->stats;
  pp_prom_appendf(out, "# HELP puma_plus_responses_total Responses by status class.\n# TYPE "
                       "puma_plus_responses_total counter\n");
  pp_prom_appendf(out, "puma_plus_responses_total{class=\"1xx\"} %" PRIu64 "\n",
                  op->xpool->status_1xx);
  pp_prom_appendf(out, "puma_plus_responses_total{class=\"2xx\"} %" PRIu64 "\n",
                  op->xpool->status_2xx);
  pp_prom_appendf(out, "puma_plus_responses_total{class=\"3xx\"} %" PRIu64 "\n",
                  op->xpool->status_3xx);
  pp_prom_appendf(out, "puma_plus_responses_total{class=\"4xx\"} %" PRIu64 "\n",
                  op->xpool->status_4xx);
  pp_prom_appendf(out, "puma_plus_responses_total{class=\"5xx\"} %" PRIu64 "\n",
                  op->xpool->status_5xx);
  pp_prom_counter(out, "puma_plus_requests_total",
                  "Requests to the app whose headers were parsed (not the control app's).",
                  st->requests);
  pp_prom_counter(out, "puma_plus_control_requests_total",
                  "Requests to the control app (/stats, /metrics, /dashboard, ...).",
                  st->control_requests);
  pp_prom_counter(out, "puma_plus_control_responses_total",
                  "Responses of the control app (in no puma_plus_responses_total class).",
                  st->control_responses);
  pp_prom_counter(out, "puma_plus_refused_total",
                  "Requests refused by the HTTP parser (400, 413, 414, 431, 501, ...).",
                  st->refused);
  pp_prom_counter(out, "puma_plus_shed_total", "Requests answered 503 by admission control.",
                  st->shed);
  pp_prom_appendf(out, "# HELP puma_plus_cancelled_total Requests whose client went away.\n# TYPE "
                       "puma_plus_cancelled_total counter\n");
  pp_prom_appendf(out, "puma_plus_cancelled_total{where=\"queued\"} %" PRIu64 "\n",
                  st->cancelled_queued);
  pp_prom_appendf(out, "puma_plus_cancelled_total{where=\"running\"} %" PRIu64 "\n",
                  st->cancelled_running);
  pp_prom_appendf(out, "# HELP puma_plus_hijacked_total Requests whose client socket the app took "
                       "(full hijack).\n# TYPE puma_plus_hijacked_total counter\n");
  pp_prom_appendf(out, "puma_plus_hijacked_total %" PRIu64 "\n", st->hijacked);
  pp_prom_counter(out, "puma_plus_bad_gateway_total",
                  "Requests answered 502 because their worker died.", st->errors_502);
  pp_prom_counter(out, "puma_plus_timeouts_total", "Client connections closed by a timeout.",
                  st->timeouts);
  pp_prom_counter(out, "puma_plus_worker_restarts_total",
                  "Workers respawned after an unexpected exit.", st->worker_restarts);
  pp_prom_counter(out, "puma_plus_request_timeouts_total",
                  "Requests answered 504 (or cut) because they ran past -request-timeout.",
                  st->request_timeouts);
  pp_prom_counter(out, "puma_plus_workers_killed_timeout_total",
                  "Workers killed because a timed-out request outlived -worker-kill-grace.",
                  st->workers_killed_timeout);
  pp_prom_counter(out, "puma_plus_workers_killed_heartbeat_total",
                  "Workers killed because their heartbeat was silent past -worker-timeout.",
                  st->workers_killed_heartbeat);
  pp_prom_counter(out, "puma_plus_shepherd_restarts_total",
                  "Shepherds started again after the shepherd died.", st->shepherd_restarts);
  pp_prom_counter(out, "puma_plus_connections_total", "Client connections accepted.",
                  st->connections_accepted);
  pp_prom_counter(out, "puma_plus_proxy_headers_total",
                  "PROXY protocol headers accepted on listeners with ,proxy=.", st->proxy_headers);
  pp_prom_counter(out, "puma_plus_proxy_rejected_total",
                  "Connections closed for a missing or malformed PROXY protocol header.",
                  st->proxy_rejected);
  controller *ct = &op->ctl;
  pp_prom_gauge(out, "puma_plus_autoscale_enabled", "1 when the controller runs.", ct->enabled);
  pp_prom_gauge(out, "puma_plus_shedding", "1 while admission control is on.", ct->shedding);
  pp_prom_counter(out, "puma_plus_controller_ticks_total", "Controller ticks.", ct->tick);
}

/* The controller's last decision. */
static void metrics_last_action(pp_ops *op, pp_buf *out) {
  controller *ct = &op->ctl;
  if (ct->have_last)
    pp_prom_appendf(
        out,
        "# HELP puma_plus_controller_last_action Last decision (1 for its action).\n# TYPE "
        "puma_plus_controller_last_action "
        "gauge\npuma_plus_controller_last_action{action=\"%s\"} 1\n",
        pp_action_name(ct->last.action));
}

typedef void (*metrics_part)(pp_ops *op, pp_buf *out);

static void metrics_phased(pp_ops *op, pp_buf *out) {
  pp_phased_metrics(op->workers, out);
}
static void metrics_access_log(pp_ops *op, pp_buf *out) {
  pp_access_log_metrics(op->access_log, out);
}

/* The /metrics text, in this order; phased.c and dashboard.c write their own lines. */
static const metrics_part metrics_parts[] = {
    metrics_core,        metrics_phased,     metrics_requests, pp_dashboard_metrics,
    metrics_last_action, metrics_access_log, metrics_websocket};

void pp_stats_metrics(pp_ops *op, pp_buf *out) {
  for (size_t i = 0; i < sizeof metrics_parts / sizeof metrics_parts[0]; i++)
    metrics_parts[i](op, out);
}
