/* The live controller (issue 5): every tick, build the observation with the shared builder
 * (control/observation.h), call pp_decide(), act on the decision (ACTIVATE parked standby
 * workers, SPAWN n, STANDBY n, RETIRE a drained worker, admission control) and append one
 * JSONL line to the decision log. The decision is made only by pp_decide(); this file only
 * gathers inputs and carries out outputs, in the order docs/CONTROL.md section 8 gives. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "server/base/clock.h"
#include "server/base/hash.h"
#include "server/base/log.h"
#include "server/ops/ops.h"
#include "server/workers/shepherd.h"
#include "server/workers/wlink.h"

static int read_file(const char *path, pp_buf *out) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  char tmp[4096];
  size_t n;
  while ((n = fread(tmp, 1, sizeof tmp, f)) > 0)
    pp_buf_append(out, tmp, n);
  fclose(f);
  pp_buf_append(out, "", 1);
  out->len--;
  return 0;
}

static int set_field(pp_policy *p, const char *field, const char *value, const char *flag) {
  pp_policy_error err;
  memset(&err, 0, sizeof err);
  if (pp_policy_set(p, field, value, &err) != 0) {
    fprintf(stderr, "puma-plus-server: %s %s: %s\n", flag, value, err.message);
    return -1;
  }
  return 0;
}

void pp_autoscale_log_header(pp_ops *op) {
  controller *ct = &op->ctl;
  if (!ct->log) return;
  static pp_declog_header h;
  static char line[PP_DECLOG_LINE_MAX];
  if (pp_declog_header_init(&h, &ct->policy, "server") != 0) return;
  int n = pp_declog_encode_header(&h, line, sizeof line);
  if (n > 0) {
    fwrite(line, 1, (size_t)n, ct->log);
    fflush(ct->log);
  }
}

/* The policy these flags resolve to: the defaults, the -policy file, then the flags that
 * override it; validated, with the server's own refusals. 0, or -1 after printing why. */
static int load_policy(pp_config *cfg, pp_policy *p) {
  pp_policy_defaults(p);
  if (cfg->policy_file) {
    pp_buf text;
    pp_buf_init(&text);
    if (read_file(cfg->policy_file, &text) < 0) {
      fprintf(stderr, "puma-plus-server: -policy %s: %s\n", cfg->policy_file, strerror(errno));
      return -1;
    }
    pp_policy_error err;
    memset(&err, 0, sizeof err);
    int rc = pp_policy_parse(p, (const char *)text.data, text.len, &err);
    pp_buf_dispose(&text);
    if (rc != 0) {
      fprintf(stderr, "puma-plus-server: %s:%d:%d: %s%s%s\n", cfg->policy_file, err.line,
              err.column, err.field, err.field[0] ? ": " : "", err.message);
      return -1;
    }
  }
  if (cfg->min_workers && set_field(p, "min_workers", cfg->min_workers, "-min-workers")) return -1;
  if (cfg->max_workers && set_field(p, "max_workers", cfg->max_workers, "-max-workers")) return -1;
  if (cfg->standby && !cfg->autoscale) {
    fprintf(stderr,
            "puma-plus-server: -standby %s: standby workers need -autoscale (the "
            "controller activates them)\n",
            cfg->standby);
    return -1;
  }
  if (cfg->standby && set_field(p, "standby", cfg->standby, "-standby")) return -1;
  if (cfg->target_queue_p95 &&
      set_field(p, "target_queue_p95", cfg->target_queue_p95, "-target-queue-p95"))
    return -1;
  if (cfg->shed && set_field(p, "shed.enabled", "true", "-shed")) return -1;
  /* Without a policy file the defaults know the machine: processes are bounded by its cores
   * (rule 2's cores bound, which scales with each worker's CPU share, so an I/O-bound app is
   * not held by it). A policy file is taken as written, so pp-sim and the server hash it alike. */
  if (cfg->autoscale && !cfg->policy_file && p->cores == 0) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    char v[24];
    snprintf(v, sizeof v, "%ld", n > 0 ? n : 1);
    if (set_field(p, "cores", v, "-autoscale")) return -1;
  }
  /* Slots per worker (rule 4b): -min-threads raises the policy's floor; an explicit -max-slots
   * caps its ceiling; without one, an autoscaled server may grow slots up to slots.max. */
  if (cfg->autoscale && p->slots_enabled) {
    char v[16];
    if (cfg->min_threads > p->min_slots) {
      snprintf(v, sizeof v, "%u", cfg->min_threads);
      if (set_field(p, "slots.min", v, "-min-threads")) return -1;
    }
    if (cfg->max_slots_given) {
      if (cfg->max_slots < p->max_slots) {
        snprintf(v, sizeof v, "%u", cfg->max_slots);
        if (set_field(p, "slots.max", v, "-max-slots")) return -1;
      }
    } else if (p->max_slots > cfg->max_slots) {
      cfg->max_slots = p->max_slots < PP_MAX_SLOTS ? p->max_slots : PP_MAX_SLOTS;
    }
  }
  pp_policy_error err;
  memset(&err, 0, sizeof err);
  if (pp_policy_validate(p, &err) != 0) {
    fprintf(stderr, "puma-plus-server: policy: %s%s%s\n", err.field, err.field[0] ? ": " : "",
            err.message);
    return -1;
  }
  if (p->shed_enabled && p->shed_rule == PP_SHED_RULE_CONTROLLED_LIFO) {
    /* Newest-first service is modelled in pp-sim only (docs/CONTROL.md section 7). */
    fprintf(stderr, "puma-plus-server: policy: shed.rule: controlled-lifo is a simulator variant "
                    "(this server's queue is first in, first out); use controlled\n");
    return -1;
  }
  if (cfg->autoscale && p->threads_enabled) {
    /* decide() could ask for add_thread/remove_thread, which this server cannot carry out
     * (threads per worker are fixed), and would then prefer threads over workers forever. */
    fprintf(stderr, "puma-plus-server: policy: threads.enabled: thread scaling is not supported "
                    "by this server (threads per worker are fixed by -threads); set it to false\n");
    return -1;
  }
  return 0;
}

int pp_server_print_policy(pp_config *cfg, FILE *out) {
  pp_policy p;
  if (load_policy(cfg, &p) != 0) return 2;
  char text[2048];
  if (pp_policy_canonical(&p, text, sizeof text) < 0) return 2;
  fprintf(out, "policy: %s (hash %016llx)\n", cfg->policy_file ? cfg->policy_file : "(defaults)",
          (unsigned long long)pp_policy_hash(&p));
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
    fprintf(out, "  %s\n", line);
  double budget_s = (double)pp_policy_shed_budget_ns(&p) / 1e9;
  fprintf(out, "admission: shed.enabled %s, shed.rule %s, budget %.3gs%s\n",
          p.shed_enabled ? "true" : "false", pp_shed_rule_name(p.shed_rule), budget_s,
          p.shed_budget_ns ? "" : " (auto: max(shed.slo, shed.client_timeout / 2))");
  if (p.shed_rule == PP_SHED_RULE_CONTROLLED || p.shed_rule == PP_SHED_RULE_CONTROLLED_CODEL) {
    if (p.shed_standing_wait_ns)
      fprintf(out, "  standing queue: waits capped at %.3gms (shed.standing_wait)",
              (double)p.shed_standing_wait_ns / 1e6);
    else
      fprintf(out,
              "  standing queue: waits capped at max(2 x the measured mean service time, "
              "%.3gms = 1.5 x target_queue_p95) (shed.standing_wait auto; %.3gms for the first "
              "term until a service time is measured)",
              (double)(p.target_queue_p95_ns + p.target_queue_p95_ns / 2) / 1e6,
              (double)p.shed_target_ns / 1e6);
    fprintf(out, ", at most the budget; ends %.3gms after the last shed (shed.interval)\n",
            (double)p.shed_interval_ns / 1e6);
  }
  return 0;
}

int pp_autoscale_init(pp_ops *op) {
  controller *ct = &op->ctl;
  pp_config *cfg = op->cfg;
  memset(ct, 0, sizeof *ct);
  ct->mem_pss = -1; /* not read yet */
  ct->enabled = cfg->autoscale;
  if (load_policy(cfg, &ct->policy) != 0) return -1;
  pp_hist_init(&op->workers->standby.dispatch);
  pp_hist_init(&op->workers->standby.hello);
  pp_hist_init(&op->workers->standby.first_request);
  if (ct->enabled && ct->policy.standby) {
    /* docs/CONTROL.md section 8: the shepherd gets --standby K and keeps K workers parked */
    op->workers->standby.enabled = 1;
    op->workers->standby.k = ct->policy.standby;
    /* A pool behind the slots (standby_cover > 0) starts empty: --standby 0 negotiates the
     * frames, and the controller asks for the pool when slots could not carry a step. */
    if (ct->policy.standby_cover > 0) op->workers->standby.k = 0;
  }
  if (ct->enabled) {
    cfg->tick_ns = ct->policy.tick_ns; /* the controller's period is the policy's */
    if (op->workers->workers_wanted < ct->policy.min_workers)
      op->workers->workers_wanted = ct->policy.min_workers;
    if (op->workers->workers_wanted > ct->policy.max_workers)
      op->workers->workers_wanted = ct->policy.max_workers;
  }
  pp_ctl_state_init(&ct->state, &ct->policy, op->workers->workers_wanted, cfg->threads);
  if (cfg->decision_log) {
    ct->log_path = cfg->decision_log;
    ct->log = fopen(cfg->decision_log, "a");
    if (!ct->log) {
      fprintf(stderr, "puma-plus-server: -decision-log %s: %s\n", cfg->decision_log,
              strerror(errno));
      return -1;
    }
    pp_autoscale_log_header(op);
  }
  return 0;
}

/* The parked standby worker to activate: the longest parked (docs/CONTROL.md section 8). */
static pp_worker *longest_parked(pp_ops *op) {
  pp_worker *best = NULL;
  for (uint32_t i = 0; i < op->workers->reg.high; i++) {
    pp_worker *w = &op->workers->reg.workers[i];
    if (w->state == PP_WORKER_PARKED && (!best || w->parked_ns < best->parked_ns)) best = w;
  }
  return best;
}

void pp_autoscale_note_dispatch(pp_ops *op, pp_worker *w, int64_t enqueued_ns) {
  if (!w || !w->activated_ns) return;
  pp_standby *sb = &op->workers->standby;
  int64_t now = pp_now_ns();
  uint64_t to_dispatch = now > w->activated_ns ? (uint64_t)(now - w->activated_ns) : 0;
  uint64_t to_hello = w->ready_ns > w->activated_ns ? (uint64_t)(w->ready_ns - w->activated_ns) : 0;
  /* A request that was already waiting when the worker's first slot said HELLO went to it at
   * once (dispatch prefers the worker with the fewest busy slots), so its dispatch ends the
   * activation. One that arrived later found the worker ready and idle: the activation ended
   * at HELLO, and the rest was waiting for traffic, not for the worker. */
  uint64_t took = enqueued_ns <= w->ready_ns ? to_dispatch : to_hello;
  pp_hist_record(&sb->dispatch, took);
  pp_hist_record(&sb->hello, to_hello);
  pp_hist_record(&sb->first_request, to_dispatch);
  sb->recent_ns[sb->recent_n % PP_ACTIVATION_RECENT] = (int64_t)took;
  sb->recent_n++;
  w->activated_ns = 0;
  LOG(op, "activated worker %u (pid %u): HELLO %.2f ms, first request %.2f ms after the decision%s",
      w->index, w->pid, to_hello / 1e6, to_dispatch / 1e6,
      enqueued_ns <= w->ready_ns ? "" : " (it arrived after HELLO)");
}

/* The ready worker to retire: the one with the fewest busy slots, newest index on ties. */
static pp_worker *retire_candidate(pp_ops *op) {
  pp_worker *best = NULL;
  for (int i = 0; i < PP_MAX_WORKERS; i++) {
    pp_worker *w = &op->workers->reg.workers[i];
    if (w->state != PP_WORKER_READY) continue;
    if (!best || w->busy < best->busy || (w->busy == best->busy && w->index > best->index))
      best = w;
  }
  return best;
}

/* Section 8's memory per worker, the ready workers' mean PSS, read again every
 * PSS_EVERY_TICKS ticks and at once when the ready workers change. One read of
 * /proc/PID/smaps_rollup makes the kernel walk the worker's page tables: 0.45-0.67 ms of the
 * front end's CPU for a mix-app worker of 5-150 thread slots, more for a larger one, and most of
 * an idle autoscaled front end's CPU (notebooks/autoscale-slots, 2026-12-03). */
enum { PSS_EVERY_TICKS = 5 };

static int64_t mean_pss(pp_ops *op, controller *ct) {
  uint64_t key = PP_HASH_SEED; /* the ready workers' pids, hashed */
  for (uint32_t i = 0; i < op->workers->reg.high; i++) {
    const pp_worker *w = &op->workers->reg.workers[i];
    if (w->state != PP_WORKER_READY) continue;
    key = pp_hash_bytes(key, &w->pid, sizeof w->pid);
  }
  if (ct->mem_pss < 0 || key != ct->mem_key || ct->tick - ct->mem_tick >= PSS_EVERY_TICKS) {
    ct->mem_pss = pp_workers_mean_pss(op);
    ct->mem_tick = ct->tick;
    ct->mem_key = key;
  }
  return ct->mem_pss;
}

void pp_autoscale_tick(pp_ops *op) {
  controller *ct = &op->ctl;
  if (!ct->enabled || *op->draining) return;
  if (op->workers->phased.state != PP_PHASED_IDLE) {
    /* The roll owns the worker count until it ends (phased.c logs both ends): no decision is
     * made, so none is logged and the controller's state does not assume actions it lacked. */
    return;
  }
  pp_stats *st = &op->core->stats;
  int64_t now = pp_now_ns();
  uint32_t ready = 0, booting, retiring;
  /* A SPAWN the shepherd never answered with FORKED (it could not fork) must not count as
   * booting forever, or the settled gate would block scaling up for good. */
  if (op->workers->spawns_pending && now - op->workers->last_spawn_ns > 30000000000LL) {
    fprintf(stderr,
            "[puma-plus] %u requested worker(s) never forked in 30 s; not waiting for them\n",
            op->workers->spawns_pending);
    if (op->workers->workers_wanted >= op->workers->spawns_pending)
      op->workers->workers_wanted -= op->workers->spawns_pending;
    op->workers->spawns_pending = 0;
  }
  pp_standby *sb = &op->workers->standby;
  if (sb->pending && now - sb->last_request_ns > 60000000000LL) {
    /* likewise a STANDBY whose workers never parked (an on_worker_boot that hangs) */
    fprintf(stderr, "[puma-plus] %u standby worker(s) never parked in 60 s; not waiting for them\n",
            sb->pending);
    sb->pending = 0;
  }
  for (int i = 0; i < PP_MAX_WORKERS; i++)
    ready += op->workers->reg.workers[i].state == PP_WORKER_READY &&
             op->workers->reg.workers[i].slots > 0;
  booting = pp_registry_count(&op->workers->reg, PP_WORKER_BOOTING) + op->workers->spawns_pending;
  retiring = pp_registry_count(&op->workers->reg, PP_WORKER_RETIRING);

  pp_obs_input in;
  memset(&in, 0, sizeof in);
  in.tick = ct->tick;
  in.now_ns = now;
  in.window_ns = op->cfg->tick_ns;
  in.queue_window = &st->queue.window;
  in.service_window = &st->service.window;
  in.service_lifetime = &st->service.lifetime;
  in.queue_len = op->core->queue.len;
  in.slots_ready = op->workers->reg.slots_ready;
  in.slots_busy = op->workers->reg.slots_busy;
  in.workers_ready = ready;
  in.workers_booting = booting;
  in.workers_retiring = retiring;
  /* The slot count the workers were told (SLOTS), and each serving worker's CPU demand over
   * the tick (docs/CONTROL.md section 9): its CPU time plus its threads' run-queue wait, so a
   * worker bound by its GVL on a machine with fewer free cores than workers still reads near
   * one core; -1 for one sampled once only, which the builder skips. */
  in.threads_per_worker =
      op->workers->slots_shape ? op->workers->slots_shape : pp_config_slots_initial(op->cfg);
  static int64_t worker_cpu[PP_MAX_WORKERS];
  uint32_t n_cpu = 0;
  for (uint32_t i = 0; i < op->workers->reg.high && n_cpu < PP_MAX_WORKERS; i++) {
    const pp_worker *w = &op->workers->reg.workers[i];
    if (w->state != PP_WORKER_READY || w->slots == 0) continue;
    /* A worker of Ractor slots: CPU time only. Its slots are runnable at once (a GVL each),
     * so its threads' run-queue waits add up past the cores (6.5 "cores" of demand on 2,
     * measured, notebooks/ractors step), which read as "the cores are full": fork. */
    worker_cpu[n_cpu++] = w->cpu_delta_ns < 0   ? -1
                          : w->ractor_slots > 0 ? w->cpu_delta_ns
                                                : w->cpu_delta_ns + w->wait_delta_ns;
  }
  in.worker_cpu_ns = worker_cpu;
  in.n_worker_cpu = n_cpu;
  /* Ractor slots (HELLO's RACTOR bit): a GVL each, so rule 4b bounds them by the cores (the
   * policy's, which -autoscale sets from the machine without a policy file, else the
   * machine's) instead of one core a worker. */
  if (op->workers->reg.ractor_slots) {
    long nproc = sysconf(_SC_NPROCESSORS_ONLN);
    in.ractor_cores = ct->policy.cores ? ct->policy.cores : nproc > 0 ? (uint32_t)nproc : 1;
  }
  in.arrivals = st->arrivals_window;
  in.completions = st->completions_window;
  in.shed = st->shed_window;
  in.timeouts = st->timeouts_window;
  in.service_cpu_mean_ns = st->cpu_count ? st->cpu_sum_ns / (int64_t)st->cpu_count : PP_UNKNOWN_NS;
  in.gvl_wait_ns = st->gvl_count ? st->gvl_sum_ns / (int64_t)st->gvl_count : PP_UNKNOWN_NS;
  in.mem_per_worker_bytes = mean_pss(op, ct); /* section 8: serving workers' mean PSS */
  in.workers_standby = pp_registry_count(&op->workers->reg, PP_WORKER_PARKED);
  in.workers_standby_booting = sb->pending;

  static pp_declog_record rec;
  memset(&rec, 0, sizeof rec);
  if (pp_observation_build(&rec.obs, &in) != 0) return;
  rec.tick = ct->tick;
  rec.time_ns = now;
  rec.policy_hash = pp_policy_hash(&ct->policy);
  snprintf(rec.source, sizeof rec.source, "server");
  rec.state_before = ct->state;
  rec.decision = pp_decide(&ct->policy, &ct->state, &rec.obs);
  rec.state_after = ct->state;
  ct->last = rec.decision;
  ct->have_last = 1;
  ct->tick++;

  /* docs/CONTROL.md section 8, in order: activations (longest parked first; SPAWN 1 for one
   * that finds the pool empty), forks for the rest, replacement standby, then retires. */
  uint32_t forks = 0;
  if (rec.decision.action == PP_ACTION_SPAWN_WORKER) {
    uint32_t activate =
        rec.decision.activate < rec.decision.count ? rec.decision.activate : rec.decision.count;
    for (uint32_t i = 0; i < activate; i++) {
      pp_worker *w = longest_parked(op);
      if (w) {
        pp_shepherd_activate(op->workers, w, rec.time_ns);
      } else {
        sb->activations_missed++;
        forks++;
      }
    }
    forks += rec.decision.count - activate;
    if (forks) {
      op->workers->workers_wanted += forks;
      pp_shepherd_spawn(op->workers, forks);
    }
  }
  if (rec.decision.standby_spawn) pp_shepherd_standby(op->workers, rec.decision.standby_spawn);
  switch (rec.decision.action) {
  case PP_ACTION_RETIRE_WORKER:
    for (uint32_t i = 0; i < rec.decision.count; i++) {
      pp_worker *w = retire_candidate(op);
      if (!w) break;
      if (op->workers->workers_wanted) op->workers->workers_wanted--;
      pp_shepherd_retire(op->workers, w);
    }
    break;
  case PP_ACTION_SET_SLOTS:
    /* every serving worker gets SLOTS; workers started later get it when their monitor
     * connection arrives (workers/wlink.c) */
    pp_wlink_set_slots_all(op->workers, rec.decision.count);
    break;
  default: break; /* spawns above; add_thread/remove_thread are refused at start */
  }
  ct->shedding = rec.decision.shed;
  ct->shed_budget_ns = rec.decision.shed_budget_ns;
  if (rec.decision.action != PP_ACTION_NONE && !op->cfg->quiet)
    fprintf(stderr, "[puma-plus] tick %llu %s\n", (unsigned long long)rec.tick,
            rec.decision.reason);
  if (ct->log) {
    static char line[PP_DECLOG_LINE_MAX];
    int n = pp_declog_encode(&rec, line, sizeof line);
    if (n > 0) {
      fwrite(line, 1, (size_t)n, ct->log);
      fflush(ct->log);
    }
  }
}
