/* `pp-bench compare`'s run loop (compare.h): prerequisites, every cell (start the server, wait,
 * warm up, wrk closed-loop with the tree's CPU before and after, the open-loop generator at a
 * fixed rate, stop), retries on steal, and the result's disposal. Blocking, single-threaded:
 * the server runs in other processes and wrk in its own; the open-loop part is pb_run_target
 * (run.h) on this thread. */
#include "bench/compare/compare.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <uv.h>

#include "bench/gen/gen.h"
#include "bench/run/run.h"
#include "bench/gen/schedule.h"
#include "bench/run/stats.h"

/* ---- processes ---- */

/* Runs argv (PATH lookup) with stdin from /dev/null and stdout+stderr captured into out (the
 * first cap-1 bytes, NUL-terminated); with `gemfile` set, in the RubyGems column's
 * environment. Returns the exit status, 127 when it could not run, or -1 on a local failure.
 * When `timeout_ns` passes the child is killed and 124 returned. */
static int capture(char *const argv[], const char *gem_home, const char *gemfile, char *out,
                   size_t cap, uint64_t timeout_ns) {
  int pfd[2];
  if (cap) out[0] = 0;
  if (pipe2(pfd, O_CLOEXEC) < 0) return -1;
  pid_t pid = fork();
  if (pid < 0) {
    close(pfd[0]);
    close(pfd[1]);
    return -1;
  }
  if (pid == 0) {
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    dup2(pfd[1], 1);
    dup2(pfd[1], 2);
    if (gemfile && gemfile[0]) pb_rubygems_env_apply(gem_home, gemfile);
    execvp(argv[0], argv);
    fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  close(pfd[1]);
  size_t len = 0;
  uint64_t deadline = uv_hrtime() + timeout_ns;
  bool timed_out = false;
  fcntl(pfd[0], F_SETFL, O_NONBLOCK);
  for (;;) {
    char buf[4096];
    ssize_t r = read(pfd[0], buf, sizeof buf);
    if (r > 0) {
      size_t take =
          cap && len + 1 < cap ? ((size_t)r < cap - 1 - len ? (size_t)r : cap - 1 - len) : 0;
      memcpy(out + len, buf, take);
      len += take;
      if (cap) out[len] = 0;
      continue;
    }
    if (r == 0) break;
    if (errno != EAGAIN && errno != EINTR) break;
    if (uv_hrtime() > deadline) {
      kill(pid, SIGKILL);
      timed_out = true;
      break;
    }
    struct timespec ts = {0, 20000000};
    nanosleep(&ts, NULL);
  }
  close(pfd[0]);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  if (timed_out) return 124;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The first line of s, trimmed, into out. */
static void first_line(const char *s, char *out, size_t len) {
  while (*s == ' ' || *s == '\n')
    s++;
  size_t n = strcspn(s, "\r\n");
  while (n && s[n - 1] == ' ')
    n--;
  snprintf(out, len, "%.*s", (int)n, s);
}

/* The line of s that contains `needle`, else the first line. */
static void line_with(const char *s, const char *needle, char *out, size_t len) {
  const char *hit = strstr(s, needle);
  if (hit) {
    while (hit > s && hit[-1] != '\n')
      hit--;
    first_line(hit, out, len);
  } else {
    first_line(s, out, len);
  }
}

#define CAPTURE_NS 60000000000ull

/* The gem CLI and the server binary of config server i (pumaplus or pumaplus@DIR): DIR's for
 * pumaplus@DIR, else the base spec's ("" = the harness's default). */
static void pumaplus_paths(const pb_compare_config *c, size_t i, char *cli, size_t cli_len,
                           char *server, size_t server_len) {
  if (c->server_dirs[i][0]) {
    snprintf(cli, cli_len, "%s/gem/exe/puma-plus", c->server_dirs[i]);
    snprintf(server, server_len, "%s/build/server/puma-plus-server", c->server_dirs[i]);
  } else {
    snprintf(cli, cli_len, "%s", c->base.pumaplus_bin);
    snprintf(server, server_len, "%s", c->base.server_bin);
  }
}

/* The value of `key` (as "KEY:TYPE=value") in a CMakeCache.txt, into out. 0 or -1. */
static int cmake_cache_value(const char *cache, const char *key, char *out, size_t len) {
  FILE *f = fopen(cache, "r");
  if (!f) return -1;
  char line[2048];
  size_t klen = strlen(key);
  int rc = -1;
  while (rc < 0 && fgets(line, sizeof line, f)) {
    if (strncmp(line, key, klen) != 0 || line[klen] != ':') continue;
    const char *eq = strchr(line + klen, '=');
    if (!eq) continue;
    snprintf(out, len, "%.*s", (int)strcspn(eq + 1, "\r\n"), eq + 1);
    rc = 0;
  }
  fclose(f);
  return rc;
}

/* pumaplus@DIR: DIR is a built checkout whose server puts its own C codec on the workers' load
 * path. The server does that only when the gem directory is its own checkout's gem/ (realpath
 * against the source directory CMake was run on, server/shepherd.c), so DIR/build must have been
 * configured from DIR: otherwise the workers of that column silently run the pure-Ruby codec.
 * 0, or -1 with what is missing and how to build it in err. */
static int check_checkout(const pb_compare_config *c, size_t i, char *err, size_t errlen) {
  const char *dir = c->server_dirs[i], *label = pb_cmp_label(c, i);
  struct stat st;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
    snprintf(err, errlen,
             "%s: %s is not a directory (%s): pumaplus@DIR wants another built checkout of this "
             "repository",
             label, dir, stat(dir, &st) != 0 ? strerror(errno) : "not a directory");
    return -1;
  }
  /* The same paths the cells run (pumaplus_paths), and the C codec the server puts first. */
  char cli[sizeof c->base.pumaplus_bin], server[sizeof c->base.server_bin];
  pumaplus_paths(c, i, cli, sizeof cli, server, sizeof server);
  if (access(cli, R_OK) != 0) {
    snprintf(err, errlen, "%s: %s is missing: %s is not a checkout of puma-plus", label, cli, dir);
    return -1;
  }
  char cache[PB_CMP_MAX_DIR + 96], source[PATH_MAX], ext[PB_CMP_MAX_DIR + 96];
  snprintf(cache, sizeof cache, "%s/build/CMakeCache.txt", dir);
  snprintf(ext, sizeof ext, "%s/build/gem/ext-lib/puma_plus/puma_plus_ext.so", dir);
  bool configured = cmake_cache_value(cache, "CMAKE_HOME_DIRECTORY", source, sizeof source) == 0;
  const char *const needs[2] = {server, ext};
  for (int k = 0; k < 2; k++) {
    const char *path = needs[k];
    if (access(path, k == 0 ? X_OK : R_OK) == 0) continue;
    char configure[2 * PB_CMP_MAX_DIR + 64] = "";
    if (!configured)
      snprintf(configure, sizeof configure,
               "cmake -S %s -B %s/build -DCMAKE_BUILD_TYPE=Release && ", dir, dir);
    snprintf(err, errlen,
             "%s: %s is missing (build it: %scmake --build %s/build --target puma-plus-server "
             "puma_plus_ext)",
             label, path, configure, dir);
    return -1;
  }
  if (!configured) {
    snprintf(err, errlen,
             "%s: cannot read CMAKE_HOME_DIRECTORY from %s, so which checkout %s/build serves "
             "is unknown (configure it: cmake -S %s -B %s/build -DCMAKE_BUILD_TYPE=Release)",
             label, cache, dir, dir, dir);
    return -1;
  }
  char gem[PATH_MAX + 8], built_gem[PATH_MAX + 8], real_gem[PATH_MAX], real_built[PATH_MAX];
  snprintf(gem, sizeof gem, "%s/gem", dir);
  snprintf(built_gem, sizeof built_gem, "%s/gem", source);
  if (!realpath(gem, real_gem) || !realpath(built_gem, real_built) ||
      strcmp(real_gem, real_built) != 0) {
    snprintf(err, errlen,
             "%s: %s/build was configured from %.300s, not from %s: its server loads its C codec "
             "only for %.300s/gem, so %s/gem's workers would run the pure-Ruby codec (configure "
             "and build DIR's own build/: cmake -S %s -B %s/build -DCMAKE_BUILD_TYPE=Release && "
             "cmake --build %s/build --target puma-plus-server puma_plus_ext)",
             label, dir, source, dir, source, dir, dir, dir, dir);
    return -1;
  }
  return 0;
}

/* Versions and prerequisites. 0, or -1 with the reason in r->error. */
static int check_prerequisites(const pb_compare_config *c, pb_compare_result *r) {
  char buf[8192];
  char wrk[256];
  snprintf(wrk, sizeof wrk, "%s", c->wrk_bin[0] ? c->wrk_bin : "wrk");
  char *wrk_argv[] = {wrk, "-v", NULL};
  int rc = capture(wrk_argv, NULL, NULL, buf, sizeof buf, CAPTURE_NS);
  if (rc == 127 || rc < 0 || strncmp(buf, "wrk ", 4) != 0) {
    snprintf(r->error, sizeof r->error,
             "the closed-loop load generator '%s' does not run (Debian package wrk; "
             "scripts/install-deps.sh installs it): %.400s",
             wrk, buf);
    return -1;
  }
  first_line(buf, r->wrk_version, sizeof r->wrk_version);
  char *sp = strstr(r->wrk_version, " [");
  if (sp) *sp = 0;
  char *ruby_argv[] = {"ruby", "-e", "print RUBY_DESCRIPTION", NULL};
  if (capture(ruby_argv, NULL, NULL, buf, sizeof buf, CAPTURE_NS) == 0)
    first_line(buf, r->ruby_version, sizeof r->ruby_version);
  bool column_checked = false;
  for (size_t i = 0; i < c->n_servers; i++) {
    char *v = r->versions[i];
    size_t vl = sizeof r->versions[i];
    switch (c->servers[i]) {
    case PB_CMP_PUMAPLUS: {
      if (c->server_dirs[i][0] && check_checkout(c, i, r->error, sizeof r->error) < 0) return -1;
      char cli[sizeof c->base.pumaplus_bin], server[sizeof c->base.server_bin];
      pumaplus_paths(c, i, cli, sizeof cli, server, sizeof server);
      char gem_lib[sizeof cli + 8], exe_dir[sizeof cli], gem_dir[sizeof cli];
      pb_dirname(cli[0] ? cli : "gem/exe/puma-plus", exe_dir, sizeof exe_dir);
      pb_dirname(exe_dir, gem_dir, sizeof gem_dir);
      snprintf(gem_lib, sizeof gem_lib, "%s/lib", gem_dir);
      char *argv[] = {"ruby", "-I", gem_lib, "-e", "require 'puma_plus'; print PumaPlus::VERSION",
                      NULL};
      char gem_version[64] = "?", git[64] = "";
      if (capture(argv, NULL, NULL, buf, sizeof buf, CAPTURE_NS) == 0)
        first_line(buf, gem_version, sizeof gem_version);
      else {
        snprintf(r->error, sizeof r->error, "%s: cannot load the gem from %s: %.300s",
                 pb_cmp_label(c, i), gem_lib, buf);
        return -1;
      }
      const char *src = c->server_dirs[i][0] ? c->server_dirs[i] : c->source_dir;
      if (src[0]) {
        char src_copy[PB_CMP_MAX_DIR + 112];
        snprintf(src_copy, sizeof src_copy, "%s", src);
        char *gargv[] = {"git", "-C", src_copy, "describe", "--always", "--dirty", NULL};
        if (capture(gargv, NULL, NULL, buf, sizeof buf, CAPTURE_NS) == 0)
          first_line(buf, git, sizeof git);
      }
      if (server[0] && access(server, X_OK) != 0) {
        snprintf(r->error, sizeof r->error,
                 "%s: %.400s is not an executable (build it: cmake --build build)",
                 pb_cmp_label(c, i), server);
        return -1;
      }
      snprintf(v, vl, "puma-plus %s%s%s%s", gem_version, git[0] ? " (git " : "", git,
               git[0] ? ")" : "");
      break;
    }
    case PB_CMP_PUMA: {
      char bin[256];
      snprintf(bin, sizeof bin, "%s", c->base.puma_bin[0] ? c->base.puma_bin : "puma");
      char *argv[] = {bin, "--version", NULL};
      rc = capture(argv, NULL, NULL, buf, sizeof buf, CAPTURE_NS);
      if (rc != 0) {
        snprintf(r->error, sizeof r->error,
                 "puma: '%s --version' failed (Debian's puma: package puma, "
                 "scripts/install-deps.sh): %.300s",
                 bin, buf);
        return -1;
      }
      line_with(buf, "version", v, vl);
      break;
    }
    case PB_CMP_PUMA8:
    case PB_CMP_FALCON: {
      const char *name = pb_cmp_server_name(c->servers[i]);
      if (!column_checked) {
        char *argv[] = {"bundle", "check", NULL};
        rc = capture(argv, c->gem_home, c->gemfile, buf, sizeof buf, CAPTURE_NS);
        if (rc != 0) {
          char line[256];
          first_line(buf, line, sizeof line);
          snprintf(r->error, sizeof r->error,
                   "%s needs the RubyGems column (%.300s) installed in GEM_HOME %.300s, and "
                   "`bundle check` says it is not (%.200s): run scripts/install-gems.sh",
                   name, c->gemfile, c->gem_home, line);
          return -1;
        }
        column_checked = true;
      }
      char *argv[] = {"bundle", "exec", c->servers[i] == PB_CMP_PUMA8 ? "puma" : "falcon",
                      "--version", NULL};
      rc = capture(argv, c->gem_home, c->gemfile, buf, sizeof buf, CAPTURE_NS);
      if (rc != 0) {
        snprintf(r->error, sizeof r->error,
                 "%s: 'bundle exec %s --version' failed (scripts/install-gems.sh installs the "
                 "RubyGems column into %s): %.300s",
                 name, argv[2], c->gem_home, buf);
        return -1;
      }
      line_with(buf, c->servers[i] == PB_CMP_PUMA8 ? "version" : "falcon", v, vl);
      break;
    }
    default: break;
    }
  }
  return 0;
}

/* The spec of one cell's server. */
static void cell_spec(const pb_compare_config *c, const pb_cmp_cell *cell, pb_server_spec *spec) {
  *spec = c->base;
  pb_cmp_server server = c->servers[cell->server];
  const pb_cmp_shape *shape = &c->shapes[cell->shape];
  spec->workers = shape->workers;
  spec->threads = shape->threads;
  spec->kind = server == PB_CMP_PUMAPLUS ? PB_SERVER_PUMAPLUS
               : server == PB_CMP_FALCON ? PB_SERVER_FALCON
                                         : PB_SERVER_PUMA;
  spec->gemfile[0] = spec->gem_home[0] = 0;
  if (server == PB_CMP_PUMA8 || server == PB_CMP_FALCON) {
    snprintf(spec->gemfile, sizeof spec->gemfile, "%s", c->gemfile);
    snprintf(spec->gem_home, sizeof spec->gem_home, "%s", c->gem_home);
  }
  if (c->server_dirs[cell->server][0])
    pumaplus_paths(c, cell->server, spec->pumaplus_bin, sizeof spec->pumaplus_bin, spec->server_bin,
                   sizeof spec->server_bin);
  snprintf(spec->app, sizeof spec->app, "%s", c->app);
  snprintf(spec->name, sizeof spec->name, "compare-r%u-%ux%u-%s", cell->round, shape->workers,
           shape->threads, pb_cmp_label(c, cell->server));
  if (cell->attempt > 1) { /* -max-steal's retries keep their own logs */
    size_t l = strlen(spec->name);
    snprintf(spec->name + l, sizeof spec->name - l, "-a%u", cell->attempt);
  }
  spec->port = pb_free_port();
  spec->stats_port = server == PB_CMP_PUMAPLUS ? pb_free_port() : 0;
  if (c->log_dir[0])
    snprintf(spec->log_path, sizeof spec->log_path, "%.440s/%.63s.log", c->log_dir, spec->name);
  else
    spec->log_path[0] = 0;
}

static void command_line(const pb_server_spec *spec, char *out, size_t len) {
  char *argv[48];
  char storage[4096];
  out[0] = 0;
  int n = pb_server_argv(spec, argv, 48, storage, sizeof storage);
  size_t used = 0;
  if (spec->gemfile[0])
    used +=
        (size_t)snprintf(out, len, "GEM_HOME=%s BUNDLE_GEMFILE=%s ", spec->gem_home, spec->gemfile);
  for (int i = 0; i < n && used < len; i++)
    used += (size_t)snprintf(out + used, len - used, "%s%s", i ? " " : "", argv[i]);
}

/* Runs wrk for `secs` whole seconds against the server; 0 with the parsed report, or -1 with a
 * message in err. */
static int run_wrk(const pb_compare_config *c, int port, uint32_t secs, pb_wrk_result *w, char *err,
                   size_t errlen) {
  char wrk[256], conns[16], dur[16], url[512];
  snprintf(wrk, sizeof wrk, "%s", c->wrk_bin[0] ? c->wrk_bin : "wrk");
  snprintf(conns, sizeof conns, "%u", c->conns);
  snprintf(dur, sizeof dur, "%us", secs);
  snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, c->path);
  char *argv[] = {wrk, "-t1", "-c", conns, "-d", dur, "--latency", url, NULL};
  char out[8192];
  int rc = capture(argv, NULL, NULL, out, sizeof out, (secs + 30) * 1000000000ull);
  if (rc != 0) {
    char line[256];
    first_line(out, line, sizeof line);
    snprintf(err, errlen, "wrk exited %d: %s", rc, line);
    return -1;
  }
  if (!pb_wrk_parse(out, w)) {
    char line[256];
    first_line(out, line, sizeof line);
    snprintf(err, errlen, "wrk's report did not parse: %s", line);
    return -1;
  }
  return 0;
}

static double loadavg1(void) {
  double l[1];
  return getloadavg(l, 1) == 1 ? l[0] : -1;
}

/* Processes a server of this shape runs once booted: the gem CLI execs puma-plus-server, which
 * runs the shepherd and W workers; puma's (either) master and W workers; falcon's controller
 * and W forks. */
static uint32_t expected_procs(pb_cmp_server server, const pb_cmp_shape *shape) {
  return shape->workers + (server == PB_CMP_PUMAPLUS ? 2 : 1);
}

/* The steal% of a loop that ran: what /proc/stat said, or the test hook's next value
 * (PP_BENCH_STEAL_SEQ) while it lasts. */
static double steal_reading(const pb_compare_config *c, pb_compare_result *r, double measured) {
  if (r->steal_seq_next < c->n_steal_seq) return c->steal_seq[r->steal_seq_next++];
  return measured;
}

static void open_loop(const pb_compare_config *c, pb_compare_result *r, int port,
                      pb_cmp_cell *cell) {
  pb_schedule sched;
  if (pb_schedule_constant(&sched, c->rate, c->rate_dur_ns, c->path, true, 1) < 0) {
    snprintf(cell->open_error, sizeof cell->open_error, "cannot build a %g rps schedule", c->rate);
    return;
  }
  pb_run_options ro;
  memset(&ro, 0, sizeof ro);
  ro.timeout_ns = 10000000000ull;
  ro.max_connections = 256;
  ro.max_error_ratio = 0;
  ro.label = "compare open loop";
  ro.quiet = true;
  pb_config_result res;
  pb_run_target("127.0.0.1", port, &sched, &ro, &res);
  if (!res.ran) {
    snprintf(cell->open_error, sizeof cell->open_error, "%.250s", res.error);
  } else {
    const pb_summary *s = &res.summary;
    cell->open_ran = true;
    cell->open_offered = s->offered;
    cell->open_ok = s->outcomes[PB_OK];
    cell->open_shed = s->outcomes[PB_SHED];
    cell->open_http_errors = s->outcomes[PB_HTTP_ERROR];
    cell->open_conn_errors = s->outcomes[PB_CONN_ERROR];
    cell->open_timeouts = s->outcomes[PB_TIMEOUT];
    cell->open_achieved_rps = s->achieved_rps;
    cell->open_p50_us = pp_hist_percentile(&s->latency, 50) / 1e3;
    cell->open_p99_us = pp_hist_percentile(&s->latency, 99) / 1e3;
    cell->open_p999_us = pp_hist_percentile(&s->latency, 99.9) / 1e3;
    cell->open_steal_pct = steal_reading(c, r, s->steal_pct);
  }
  pb_config_result_dispose(&res);
  pb_schedule_dispose(&sched);
}

static void run_cell(const pb_compare_config *c, pb_compare_result *r, pb_cmp_cell *cell) {
  pb_server_spec spec;
  cell_spec(c, cell, &spec);
  pb_cmp_server server = c->servers[cell->server];
  const pb_cmp_shape *shape = &c->shapes[cell->shape];
  if (!r->commands[cell->server][0])
    command_line(&spec, r->commands[cell->server], sizeof r->commands[cell->server]);
  cell->frontend_us_per_req = cell->ruby_us_per_req = cell->cpu_us_per_req = -1;
  cell->open_p50_us = cell->open_p99_us = cell->open_p999_us = -1;
  cell->steal_pct = cell->open_steal_pct = -1;
  char attempt[32] = "";
  if (cell->attempt > 1) snprintf(attempt, sizeof attempt, " (attempt %u)", cell->attempt);
  fprintf(stderr, "[compare] round %u/%u  %ux%u  %-8s start%s\n", cell->round, c->rounds,
          shape->workers, shape->threads, pb_cmp_label(c, cell->server), attempt);
  pb_server srv;
  char err[512];
  if (pb_server_start(&spec, &srv, err, sizeof err) < 0) {
    snprintf(cell->error, sizeof cell->error, "%s", err);
    return;
  }
  if (c->running_pgid) *c->running_pgid = (sig_atomic_t)srv.pid;
  if (pb_server_wait_ready(&srv, "127.0.0.1", c->path, c->ready_timeout_ns, err, sizeof err) < 0) {
    snprintf(cell->error, sizeof cell->error, "%.300s (log: %.180s)", err,
             spec.log_path[0] ? spec.log_path : "none");
    goto stop;
  }
  /* What the app answers, before any load: the codec app (tests/apps/codec) says which wire
   * codec the worker loaded, so a test can tell that every puma-plus column runs the C one. */
  char body[256];
  if (pb_http_get("127.0.0.1", spec.port, c->path, 5000000000ull, body, sizeof body) > 0)
    first_line(body, cell->answer, sizeof cell->answer);
  /* Ready means one process answers; wait (at most 20 s) for the rest of the shape to boot. */
  uint32_t want = expected_procs(server, shape), procs = 0;
  uint64_t ticks, own;
  for (uint64_t until = uv_hrtime() + 20000000000ull; uv_hrtime() < until;) {
    if (pb_cmp_tree_cpu(srv.pid, &ticks, &own, &procs) == 0 && procs >= want) break;
    struct timespec ts = {0, 100000000};
    nanosleep(&ts, NULL);
  }
  if (procs < want)
    snprintf(cell->note, sizeof cell->note, "%u of %u expected processes after 20 s", procs, want);
  pb_wrk_result w;
  if (c->warmup_ns &&
      run_wrk(c, spec.port, (uint32_t)(c->warmup_ns / 1000000000ull), &w, err, sizeof err) < 0) {
    snprintf(cell->error, sizeof cell->error, "warm-up: %.480s", err);
    goto stop;
  }
  uint64_t t0, o0, t1, o1;
  uint32_t p0 = 0, p1 = 0;
  if (pb_cmp_tree_cpu(srv.pid, &t0, &o0, &p0) < 0) {
    snprintf(cell->error, sizeof cell->error, "cannot read /proc");
    goto stop;
  }
  pb_cpu_times m0 = pb_cpu_times_now();
  int wrc =
      run_wrk(c, spec.port, (uint32_t)(c->dur_ns / 1000000000ull), &cell->wrk, err, sizeof err);
  int prc = pb_cmp_tree_cpu(srv.pid, &t1, &o1, &p1);
  cell->steal_pct = pb_steal_pct(m0, pb_cpu_times_now());
  if (wrc < 0) {
    snprintf(cell->error, sizeof cell->error, "%s", err);
    goto stop;
  }
  if (prc < 0 || p1 != p0) {
    /* A process of the tree came or went inside the window: its ticks are not all counted. */
    snprintf(cell->note + strlen(cell->note), sizeof cell->note - strlen(cell->note),
             "%sprocesses changed during the measurement (%u -> %u): CPU not exact",
             cell->note[0] ? "; " : "", p0, p1);
  }
  cell->procs = p1;
  cell->ran = true;
  double tck = (double)sysconf(_SC_CLK_TCK);
  if (cell->wrk.requests) {
    double per = 1e6 / tck / (double)cell->wrk.requests;
    cell->cpu_us_per_req = (double)(t1 - t0) * per;
    if (server == PB_CMP_PUMAPLUS) {
      cell->frontend_us_per_req = (double)(o1 - o0) * per;
      cell->ruby_us_per_req = cell->cpu_us_per_req - cell->frontend_us_per_req;
    }
  }
  cell->steal_pct = steal_reading(c, r, cell->steal_pct);
  if (c->rate > 0) open_loop(c, r, spec.port, cell);
  cell->has_errors = cell->wrk.non2xx || cell->wrk.sock_connect || cell->wrk.sock_read ||
                     cell->wrk.sock_write || cell->wrk.sock_timeout || cell->wrk.requests == 0 ||
                     (c->rate > 0 && (!cell->open_ran || cell->open_ok != cell->open_offered));
stop:
  pb_server_stop(&srv, 10000000000ull);
  if (c->running_pgid) *c->running_pgid = 0;
}

/* Appends "; "-separated text to a cell's note. */
static void note_append(pb_cmp_cell *cell, const char *text) {
  size_t l = strlen(cell->note);
  snprintf(cell->note + l, sizeof cell->note - l, "%s%s", l ? "; " : "", text);
}

/* One cell, measured again while -max-steal finds its steal too high (a fresh server each
 * attempt, as for a new cell), then the attempt pb_cmp_steal_pick keeps goes into *cell. What
 * the dropped attempts had (errors, a failure) is noted on the kept one: nothing is hidden. */
static void run_cell_attempts(const pb_compare_config *c, pb_compare_result *r, pb_cmp_cell *cell) {
  const pb_cmp_shape *shape = &c->shapes[cell->shape];
  uint32_t max_attempts = c->max_steal_pct > 0 ? 1 + c->steal_retries : 1;
  pb_cmp_cell *tries = calloc(max_attempts, sizeof *tries);
  if (!tries) {
    fprintf(stderr, "pp-bench compare: out of memory\n");
    abort();
  }
  size_t n = 0;
  for (;;) {
    pb_cmp_cell *t = &tries[n];
    *t = *cell;
    t->attempt = (uint32_t)++n;
    run_cell(c, r, t);
    if (n == max_attempts || !pb_cmp_steal_too_high(t, c->max_steal_pct)) break;
    fprintf(stderr, "[compare] %ux%u %s round %u: steal %.1f%% > %g%%, attempt %zu of %u\n",
            shape->workers, shape->threads, pb_cmp_label(c, cell->server), cell->round,
            pb_cmp_cell_steal(t), c->max_steal_pct, n + 1, max_attempts);
  }
  bool over = false;
  size_t keep = pb_cmp_steal_pick(tries, n, c->max_steal_pct, &over);
  *cell = tries[keep];
  cell->attempts = (uint32_t)n;
  cell->steal_over = over;
  for (size_t i = 0; i < n; i++) {
    if (i == keep) continue;
    char text[200];
    if (!tries[i].ran)
      snprintf(text, sizeof text, "attempt %zu failed: %.150s", i + 1, tries[i].error);
    else
      snprintf(text, sizeof text, "attempt %zu dropped (steal %.1f%%%s)", i + 1,
               pb_cmp_cell_steal(&tries[i]), tries[i].has_errors ? ", had errors" : "");
    note_append(cell, text);
  }
  if (over) {
    fprintf(stderr,
            "[compare] %ux%u %s round %u: steal still %.1f%% > %g%% after %zu attempts: "
            "kept attempt %zu, marked STEAL\n",
            shape->workers, shape->threads, pb_cmp_label(c, cell->server), cell->round,
            pb_cmp_cell_steal(cell), c->max_steal_pct, n, keep + 1);
  }
  free(tries);
}

int pb_compare_run(const pb_compare_config *c, pb_compare_result *r, FILE *out) {
  memset(r, 0, sizeof *r);
  uint64_t start = uv_hrtime();
  r->loadavg_start = loadavg1();
  if (c->dur_ns < 1000000000ull || c->dur_ns % 1000000000ull || c->warmup_ns % 1000000000ull) {
    snprintf(r->error, sizeof r->error,
             "-dur and -warmup must be whole seconds (wrk's -d), -dur at least 1s");
    return 2;
  }
  if (check_prerequisites(c, r) < 0) return 2;
  r->prerequisites_ok = true;
  size_t per_round = c->n_shapes * c->n_servers;
  size_t total = per_round * c->rounds;
  r->cells = calloc(total ? total : 1, sizeof *r->cells);
  if (!r->cells) {
    snprintf(r->error, sizeof r->error, "out of memory");
    return 2;
  }
  fprintf(stderr, "[compare] %u rounds x %zu shapes x %zu servers = %zu runs\n", c->rounds,
          c->n_shapes, c->n_servers, per_round * c->rounds);
  if (c->max_steal_pct > 0)
    fprintf(stderr,
            "[compare] -max-steal %g%%: a cell whose closed- or open-loop steal is above it is "
            "measured again (a fresh server), up to %u more times\n",
            c->max_steal_pct, c->steal_retries);
  if (c->n_steal_seq)
    fprintf(stderr,
            "[compare] PP_BENCH_STEAL_SEQ (test hook): the first %zu steal readings are given, "
            "not measured\n",
            c->n_steal_seq);
  int rc = 0;
  for (uint32_t round = 1; round <= c->rounds; round++) {
    for (size_t sh = 0; sh < c->n_shapes; sh++) {
      /* Interleaved: every shape sees every server in turn, and the first server of a round
       * rotates, so no server always runs first (just after the previous one's teardown). */
      for (size_t k = 0; k < c->n_servers; k++) {
        pb_cmp_cell *cell = &r->cells[r->n_cells++];
        cell->round = round;
        cell->shape = (uint32_t)sh;
        cell->server = (uint32_t)((k + round - 1) % c->n_servers);
        cell->order = (uint32_t)(sh * c->n_servers + k + 1);
        run_cell_attempts(c, r, cell);
        if (!cell->ran) {
          fprintf(stderr, "[compare] round %u %ux%u %s FAILED: %s\n", round, c->shapes[sh].workers,
                  c->shapes[sh].threads, pb_cmp_label(c, cell->server), cell->error);
          rc = 1;
        } else if (cell->has_errors) {
          rc = 1;
        }
      }
    }
    pb_compare_print_round(out, c, r, round);
    fflush(out);
  }
  r->loadavg_end = loadavg1();
  r->wall_s = (uv_hrtime() - start) / 1e9;
  return rc;
}

void pb_compare_result_dispose(pb_compare_result *r) {
  free(r->cells);
  memset(r, 0, sizeof *r);
}
