/* pp-replay-gen: writes a recorded decision log by driving pp_decide() through a scripted
 * workload on a small fluid model of the server (not the simulator: no randomness beyond a
 * fixed xorshift, no GSL), so the policy regression logs under replay/tests/logs/ can be
 * re-recorded by replay/tests/rerecord.sh whenever decide() changes on purpose.
 *
 *   pp-replay-gen SCRIPT [--policy FILE] [--no-header] > LOG.jsonl
 *   pp-replay-gen --header-only --policy FILE [--source NAME]   (just the header line, to
 *                                               prepend to a log pp-sim wrote)
 *
 * Scripts: "step" (60 -> 700 -> 60 rps at 25 ms, 1 worker x 5 threads, workers boot in 2
 * ticks), "overload" (a long overload beyond max_workers: shedding, threads, the cap).
 * The model per 1 s tick: arrivals from the script with +-5% deterministic noise; capacity
 * slots * 1 s / S; the queue L carries the rest; queue times of the requests served are
 * recorded into a histogram window and the observation is made by pp_observation_build(),
 * exactly as the server and pp-sim do. Spawned workers connect after `boot` ticks. */
#include "control/control.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_NS  1000000000ull
#define MAX_W 64

typedef struct script {
  const char *name;
  uint32_t ticks;
  double (*rate)(uint32_t t);
  uint64_t service_ns;
  int64_t cpu_ns;
  int64_t gvl_ns;
  uint32_t workers, threads, boot_ticks;
} script;

static double step_rate(uint32_t t) {
  return t < 20 ? 60 : t < 80 ? 700 : 60;
}
static double overload_rate(uint32_t t) {
  return t < 10 ? 100 : t < 70 ? 1500 : 100;
}

static const script scripts[] = {
    {"step", 160, step_rate, 25000000, PP_UNKNOWN_NS, PP_UNKNOWN_NS, 1, 5, 2},
    {"overload", 120, overload_rate, 40000000, 4000000, 1000000, 1, 2, 3},
};

static uint64_t rng = 0x2545f4914f6cdd1dull;
static double noise(void) { /* uniform in [-1, 1) */
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (double)(rng >> 11) / 4503599627370496.0 - 1.0;
}

static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  static char buf[1 << 16];
  *len = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[*len] = '\0';
  return buf;
}

int main(int argc, char **argv) {
  const script *sc = NULL;
  const char *policy_path = NULL;
  int header = 1, header_only = 0;
  const char *source = "gen";
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--policy") == 0 && i + 1 < argc)
      policy_path = argv[++i];
    else if (strcmp(argv[i], "--source") == 0 && i + 1 < argc)
      source = argv[++i];
    else if (strcmp(argv[i], "--no-header") == 0)
      header = 0;
    else if (strcmp(argv[i], "--header-only") == 0)
      header_only = 1;
    else {
      for (size_t k = 0; k < sizeof scripts / sizeof scripts[0]; k++)
        if (strcmp(argv[i], scripts[k].name) == 0) sc = &scripts[k];
      if (!sc) {
        fprintf(stderr, "usage: pp-replay-gen step|overload [--policy FILE] [--no-header]\n");
        return 2;
      }
    }
  }
  if (!sc && !header_only) {
    fprintf(stderr, "usage: pp-replay-gen step|overload [--policy FILE] [--no-header]\n");
    return 2;
  }
  pp_policy p;
  pp_policy_defaults(&p);
  if (policy_path) {
    size_t len;
    char *text = read_file(policy_path, &len);
    pp_policy_error e;
    if (!text || pp_policy_parse(&p, text, len, &e) != 0) {
      fprintf(stderr, "pp-replay-gen: %s: cannot load policy (line %d: %s %s)\n", policy_path,
              text ? e.line : 0, text ? e.field : "", text ? e.message : "unreadable");
      return 2;
    }
  }
  uint64_t hash = pp_policy_hash(&p);
  char line[PP_DECLOG_LINE_MAX];
  if (header) {
    pp_declog_header h;
    pp_declog_header_init(&h, &p, header_only ? source : "gen");
    if (pp_declog_encode_header(&h, line, sizeof line) < 0) return 3;
    fputs(line, stdout);
  }
  if (header_only) return 0;

  static pp_hist qwin, swin, slife;
  pp_hist_init(&slife);
  int boot_left[MAX_W]; /* per worker: ticks until connected (0 = ready) */
  uint32_t nworkers = sc->workers, tpw = sc->threads;
  for (uint32_t w = 0; w < MAX_W; w++)
    boot_left[w] = 0;
  pp_ctl_state st;
  pp_ctl_state_init(&st, &p, nworkers, tpw);
  double queue = 0;
  int shedding = 0;
  uint64_t budget = p.shed_budget_ns;
  for (uint32_t t = 0; t < sc->ticks; t++) {
    pp_hist_reset(&qwin);
    pp_hist_reset(&swin);
    uint32_t ready = 0, booting = 0;
    for (uint32_t w = 0; w < nworkers; w++) {
      if (boot_left[w] > 0) boot_left[w]--;
      if (boot_left[w] == 0)
        ready++;
      else
        booting++;
    }
    uint32_t c = ready * tpw;
    double s = (double)sc->service_ns;
    double arrivals = floor(sc->rate(t) * (1.0 + 0.05 * noise()));
    uint64_t shed = 0;
    double capacity = c ? (double)c * 1e9 / s : 0;
    if (shedding && c > 0) {
      /* Admission control, per request in the server: admit while the predicted wait is
       * within the budget, so the queue ends the tick at about the budget's worth. */
      double room = (double)budget * c / s - queue + capacity;
      if (room < 0) room = 0;
      if (arrivals > room) shed = (uint64_t)(arrivals - room), arrivals = room;
    }
    double served = fmin(queue + arrivals, capacity);
    for (uint64_t k = 0; k < (uint64_t)served; k++) {
      double pos = queue - (double)k + (double)k * arrivals / fmax(served, 1.0);
      double wait = pos > 0 ? pos * s / c : 0;
      wait += 100000.0 * (1.0 + noise()); /* dispatch jitter up to 0.2 ms */
      pp_hist_record(&qwin, (uint64_t)(wait > 0 ? wait : 0));
      uint64_t svc = (uint64_t)(s * (1.0 + 0.4 * noise()));
      pp_hist_record(&swin, svc);
      pp_hist_record(&slife, svc);
    }
    double busy_share = capacity > 0 ? served / capacity : 0;
    queue = queue + arrivals - served;
    if (queue < 0.5) queue = 0;
    uint32_t busy = (uint32_t)ceil(busy_share * c);
    if (queue > 0) busy = c;
    pp_obs_input in;
    memset(&in, 0, sizeof in);
    in.tick = t;
    in.now_ns = (int64_t)(t + 1) * (int64_t)S_NS;
    in.window_ns = S_NS;
    in.queue_window = &qwin;
    in.service_window = &swin;
    in.service_lifetime = &slife;
    in.queue_len = (uint32_t)queue;
    in.slots_ready = c;
    in.slots_busy = busy > c ? c : busy;
    in.workers_ready = ready;
    in.workers_booting = booting;
    in.threads_per_worker = tpw;
    in.arrivals = (uint64_t)arrivals + shed;
    in.completions = (uint64_t)served;
    in.shed = shed;
    in.service_cpu_mean_ns = sc->cpu_ns;
    in.gvl_wait_ns = sc->gvl_ns < 0 ? PP_UNKNOWN_NS : sc->gvl_ns * (int64_t)tpw;
    in.mem_per_worker_bytes = 150ll << 20;
    pp_declog_record r;
    memset(&r, 0, sizeof r);
    if (pp_observation_build(&r.obs, &in) != 0) return 3;
    r.tick = t;
    r.time_ns = in.now_ns;
    r.policy_hash = hash;
    strcpy(r.source, "gen");
    r.state_before = st;
    r.decision = pp_decide(&p, &st, &r.obs);
    r.state_after = st;
    if (pp_declog_encode(&r, line, sizeof line) < 0) return 3;
    fputs(line, stdout);
    /* Actuate. */
    switch (r.decision.action) {
    case PP_ACTION_SPAWN_WORKER:
      for (uint32_t k = 0; k < r.decision.count && nworkers < MAX_W; k++)
        boot_left[nworkers++] = (int)sc->boot_ticks + 1;
      break;
    case PP_ACTION_RETIRE_WORKER:
      if (nworkers > 0) nworkers--;
      break;
    case PP_ACTION_ADD_THREAD: tpw++; break;
    case PP_ACTION_REMOVE_THREAD:
      if (tpw > 1) tpw--;
      break;
    default: break;
    }
    shedding = r.decision.shed;
    budget = r.decision.shed_budget_ns;
  }
  return 0;
}
