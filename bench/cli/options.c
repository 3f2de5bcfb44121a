/* pp-bench's common flags (cli.h): usage, the duration, number and size parsers, the option
 * parser of run/report/smoke/floor/schedule/null-server, and the interrupt handling that stops
 * the server being measured. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>
#include <uv.h>

#include "bench/compare/compare.h"
#include "bench/gen/gen.h"
#include "bench/refsrv/nullsrv.h"
#include "bench/run/plan.h"
#include "bench/run/run.h"
#include "bench/store/store.h"
#include "sim/scenario_file.h"
#include "bench/gen/schedule.h"
#include "bench/soak/soak.h"
#include "bench/run/stats.h"

#include "bench/cli/cli.h"

void cli_usage(FILE *f) {
  fprintf(f,
          "usage:\n"
          "  pp-bench smoke [-server null|puma|pumaplus | -url HOST:PORT] [-path /hello]\n"
          "                 [-rate 100] [-dur 10s] [-timeout 20s] [-conns 256] [-seed N]\n"
          "                 [-uniform] [-spectrum] [-timeline] [-csv FILE] [-max-errors 0.01]\n"
          "                 [-w 2] [-t 5] [-app config.ru] [-autoscale] [-policy FILE]\n"
          "                 [-warmup 2s] [-delay MS (null server)]\n"
          "                 [-proto h1|h2|h3] [-tls] [-h2-conns 4]\n"
          "  pp-bench floor [-rate 500] [-dur 10s] [-spectrum] [-proto h1|h2|h3] [-tls]\n"
          "  pp-bench run SCENARIO.yaml [-db results.db] [-only A,B] [-timeline] [-warmup 3s]\n"
          "               [-conns N] [-seed N] [-app config.ru] [-log-dir DIR]\n"
          "               [-proto h1|h2|h3] [-h2-conns 4]\n"
          "  pp-bench report RUN|latest [-db results.db] [-timeline CONFIG] [-plot out.png]\n"
          "               [-vs-sim [SIMRUN]]\n"
          "  pp-bench schedule SCENARIO.yaml [-seed N] [-timeline (list arrivals)]\n"
          "  pp-bench null-server [-port 0] [-delay 0] [-proto h1|h2|h3] [-tls] [-leak-every N]\n"
          "                 (runs until SIGINT/SIGTERM; -tls: a self-signed certificate;\n"
          "                 -leak-every N: every Nth request leaks a descriptor, for tests)\n"
          "  pp-bench soak [-short] [-server pumaplus|puma|null] [-cycles 3] ...\n"
          "                 (overload and bad-traffic cycles; pp-bench soak --help)\n"
          "  pp-bench compare [-servers pumaplus,puma,puma8,falcon,pumaplus@DIR]\n"
          "                 [-shapes 1x1,1x5,2x5]\n"
          "                 [-rounds 3] [-dur 5s] ... (servers side by side; pp-bench compare\n"
          "                 --help)\n"
          "\n"
          "protocol (smoke, run, floor; the same schedule and timing from intended start):\n"
          "  -proto h1       HTTP/1.1, one request per connection at a time, up to -conns\n"
          "                  connections (default)\n"
          "  -proto h2       HTTP/2 (nghttp2): streams multiplexed on -h2-conns connections,\n"
          "                  at most the server's SETTINGS_MAX_CONCURRENT_STREAMS each (and\n"
          "                  1024); arrivals beyond that wait in the generator, still timed\n"
          "                  from their intended start. Cleartext h2 is prior knowledge (h2c)\n"
          "  -proto h3       HTTP/3 (ngtcp2 + nghttp3, QUIC v1, TLS 1.3 through GnuTLS, ALPN\n"
          "                  \"h3\", SNI localhost): streams multiplexed on -h2-conns QUIC\n"
          "                  connections, at most the server's stream credit\n"
          "                  (initial_max_streams_bidi, MAX_STREAMS) each (and 1024). The\n"
          "                  server certificate is NOT verified (loopback development\n"
          "                  certificates). The harness starts puma-plus with -listen-h3 on\n"
          "                  the UDP port of its TCP port number; -url HOST:UDPPORT; the null\n"
          "                  server and floor speak h3 too (-tls is implied)\n"
          "  -h2-conns N     h2/h3 connections, all opened at the start (default 4);\n"
          "                  -h3-conns is the same flag\n"
          "  -tls            TLS (OpenSSL), SNI localhost, ALPN \"h2\" for h2 (required) or\n"
          "                  \"http/1.1\" for h1. The server certificate is NOT verified: the\n"
          "                  targets are loopback servers with development certificates.\n"
          "                  With -url or the null server (the harness starts puma and\n"
          "                  puma-plus without TLS)\n");
}

bool cli_parse_duration(const char *s, uint64_t *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || v < 0) return false;
  double mul;
  if (strcmp(end, "s") == 0 || *end == 0)
    mul = 1e9;
  else if (strcmp(end, "ms") == 0)
    mul = 1e6;
  else if (strcmp(end, "us") == 0)
    mul = 1e3;
  else if (strcmp(end, "m") == 0)
    mul = 60e9;
  else
    return false;
  *out = (uint64_t)(v * mul);
  return true;
}

bool cli_parse_double(const char *s, double *out) {
  char *end;
  errno = 0;
  *out = strtod(s, &end);
  return !errno && end != s && *end == 0;
}

bool cli_parse_size(const char *s, uint32_t *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || v < 0) return false;
  double mul = 1;
  if (*end == 0 || strcmp(end, "B") == 0)
    mul = 1;
  else if (strcmp(end, "K") == 0 || strcmp(end, "KiB") == 0 || strcmp(end, "k") == 0)
    mul = 1024;
  else if (strcmp(end, "M") == 0 || strcmp(end, "MiB") == 0 || strcmp(end, "m") == 0)
    mul = 1024.0 * 1024;
  else
    return false;
  if (v * mul > PB_BODY_MAX) return false;
  *out = (uint32_t)(v * mul);
  return true;
}

bool cli_next_flag(const char *cmd, int argc, char **argv, int *i, const char *const *switches,
                   char *flags, size_t flags_cap, const char **name, const char **value) {
  const char *w = argv[*i];
  size_t fl = strlen(flags);
  snprintf(flags + fl, flags_cap - fl, "%s%s", fl ? " " : "", w);
  if (w[0] != '-') {
    fprintf(stderr, "pp-bench %s: unexpected argument '%s' (pp-bench %s --help)\n", cmd, w, cmd);
    return false;
  }
  *name = w + (w[1] == '-' ? 2 : 1);
  *value = NULL;
  for (const char *const *s = switches; s && *s; s++)
    if (strcmp(*name, *s) == 0) return true;
  if (*i + 1 >= argc) {
    fprintf(stderr, "pp-bench %s: option -%s needs a value\n", cmd, *name);
    return false;
  }
  *value = argv[++*i];
  fl = strlen(flags);
  snprintf(flags + fl, flags_cap - fl, " %s", *value);
  return true;
}

/* Parses -flag value pairs from argv[first..]. Returns false (after printing why) on error. */
bool cli_parse_opts(int argc, char **argv, int first, opts *o) {
  for (int i = first; i < argc; i++) {
    const char *a = argv[i];
    if (a[0] != '-') {
      fprintf(stderr, "pp-bench: unexpected argument '%s'\n", a);
      return false;
    }
    a += (a[1] == '-') ? 2 : 1;
    if (strcmp(a, "uniform") == 0) {
      o->uniform = true;
      continue;
    }
    if (strcmp(a, "spectrum") == 0) {
      o->spectrum = true;
      continue;
    }
    if (strcmp(a, "timeline") == 0) {
      o->timeline = true;
      if (i + 1 < argc && argv[i + 1][0] != '-') o->timeline_config = argv[++i];
      continue;
    }
    if (strcmp(a, "vs-sim") == 0 && (i + 1 >= argc || argv[i + 1][0] == '-')) {
      o->vs_sim = "run";
      continue;
    }
    if (strcmp(a, "autoscale") == 0) {
      o->autoscale = true;
      continue;
    }
    if (strcmp(a, "tls") == 0) {
      o->tls = true;
      continue;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "pp-bench: option -%s needs a value\n", a);
      return false;
    }
    const char *v = argv[++i];
    double d;
    bool ok = true;
    if (strcmp(a, "server") == 0)
      o->server = v;
    else if (strcmp(a, "url") == 0)
      o->url = v;
    else if (strcmp(a, "path") == 0)
      o->path = v;
    else if (strcmp(a, "csv") == 0)
      o->csv = v;
    else if (strcmp(a, "app") == 0)
      o->app = v;
    else if (strcmp(a, "policy") == 0)
      o->policy = v;
    else if (strcmp(a, "db") == 0)
      o->db = v;
    else if (strcmp(a, "only") == 0)
      o->only = v;
    else if (strcmp(a, "log-dir") == 0)
      o->log_dir = v;
    else if (strcmp(a, "plot") == 0)
      o->plot = v;
    else if (strcmp(a, "vs-sim") == 0)
      o->vs_sim = v;
    else if (strcmp(a, "proto") == 0) {
      if (strcmp(v, "h1") == 0)
        o->proto = PB_PROTO_H1;
      else if (strcmp(v, "h2") == 0)
        o->proto = PB_PROTO_H2;
      else if (strcmp(v, "h3") == 0)
        o->proto = PB_PROTO_H3;
      else
        ok = false;
    } else if (strcmp(a, "h2-conns") == 0 || strcmp(a, "h3-conns") == 0)
      ok = cli_parse_double(v, &d) && d >= 1 && d <= 4096 && ((o->h2_conns = (uint32_t)d), 1);
    else if (strcmp(a, "warmup") == 0)
      ok = cli_parse_duration(v, &o->warmup_ns);
    else if (strcmp(a, "w") == 0)
      ok = cli_parse_double(v, &d) && d >= 1 && ((o->workers = (uint32_t)d), 1);
    else if (strcmp(a, "t") == 0)
      ok = cli_parse_double(v, &d) && d >= 1 && ((o->threads = (uint32_t)d), 1);
    else if (strcmp(a, "rate") == 0)
      ok = cli_parse_double(v, &o->rate) && o->rate > 0;
    else if (strcmp(a, "max-errors") == 0)
      ok = cli_parse_double(v, &o->max_errors);
    else if (strcmp(a, "dur") == 0)
      ok = cli_parse_duration(v, &o->dur_ns) && o->dur_ns > 0;
    else if (strcmp(a, "timeout") == 0)
      ok = cli_parse_duration(v, &o->timeout_ns) && o->timeout_ns;
    else if (strcmp(a, "conns") == 0)
      ok = cli_parse_double(v, &d) && d >= 1 && (o->conns = (uint32_t)d);
    else if (strcmp(a, "delay") == 0)
      ok = cli_parse_double(v, &d) && d >= 0 && ((o->delay_ms = (uint32_t)d), 1);
    else if (strcmp(a, "port") == 0)
      ok = cli_parse_double(v, &d) && d >= 0 && d < 65536 && ((o->port = (int)d), 1);
    else if (strcmp(a, "seed") == 0)
      ok = cli_parse_double(v, &d) && d >= 0 && ((o->seed = (uint64_t)d), (o->seed_set = true), 1);
    else if (strcmp(a, "leak-every") == 0)
      ok = cli_parse_double(v, &d) && d >= 0 && ((o->leak_every = (uint32_t)d), 1);
    else {
      fprintf(stderr, "pp-bench: unknown option -%s\n", a);
      return false;
    }
    if (!ok) {
      fprintf(stderr, "pp-bench: bad value '%s' for -%s\n", v, a);
      return false;
    }
  }
  return true;
}

/* The server being measured, so an interrupted pp-bench does not leave it running. */
volatile sig_atomic_t cli_running_pgid;

static void on_interrupt(int sig) {
  if (cli_running_pgid > 0) kill(-(pid_t)cli_running_pgid, SIGTERM);
  signal(sig, SIG_DFL);
  raise(sig);
}

void cli_stop_servers_on_interrupt(void) {
  signal(SIGINT, on_interrupt);
  signal(SIGTERM, on_interrupt);
  signal(SIGHUP, on_interrupt);
}

void cli_run_options(const opts *o, pb_run_options *ro, const char *label) {
  memset(ro, 0, sizeof *ro);
  ro->timeout_ns = o->timeout_ns ? o->timeout_ns : 20000000000ull;
  ro->max_connections = o->conns;
  ro->warmup_ns = o->warmup_ns;
  ro->warmup_rate = o->rate < 50 ? o->rate : 50;
  ro->warmup_path = o->path;
  ro->max_error_ratio = o->max_errors;
  ro->stats_path = "/stats";
  ro->label = label;
  ro->running_pgid = &cli_running_pgid;
  ro->proto = o->proto;
  ro->tls = o->tls;
  ro->h2_connections = o->h2_conns;
}

/* Binaries of this build tree are preferred over PATH: puma-plus-server and the gem's CLI. */
void cli_default_binaries(pb_server_spec *spec) {
  const char *env = getenv("PP_PUMAPLUS");
  if (env)
    snprintf(spec->pumaplus_bin, sizeof spec->pumaplus_bin, "%s", env);
  else
    snprintf(spec->pumaplus_bin, sizeof spec->pumaplus_bin, "%s/gem/exe/puma-plus", PB_SOURCE_DIR);
  env = getenv("PP_PUMA_PLUS_SERVER");
  if (env) snprintf(spec->server_bin, sizeof spec->server_bin, "%s", env);
#ifdef PB_SERVER_BIN
  else
    snprintf(spec->server_bin, sizeof spec->server_bin, "%s", PB_SERVER_BIN);
#endif
  env = getenv("PP_PUMA");
  if (env) snprintf(spec->puma_bin, sizeof spec->puma_bin, "%s", env);
}

int cli_split_hostport(const char *url, char *host, size_t hostlen, int *port) {
  const char *p = url;
  if (strncmp(p, "http://", 7) == 0) p += 7;
  const char *colon = strrchr(p, ':');
  if (!colon || (size_t)(colon - p) >= hostlen) return -1;
  memcpy(host, p, (size_t)(colon - p));
  host[colon - p] = 0;
  if (host[0] == '[') { /* [::1]:8080 */
    memmove(host, host + 1, strlen(host));
    char *rb = strchr(host, ']');
    if (rb) *rb = 0;
  }
  *port = atoi(colon + 1);
  return *port > 0 && *port < 65536 ? 0 : -1;
}
