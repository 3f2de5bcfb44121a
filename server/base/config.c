/* Command-line flags of puma-plus-server (see config.h and docs/SERVER.md). */
#include "server/base/config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void pp_config_defaults(pp_config *c) {
  memset(c, 0, sizeof *c);
  c->app = "config.ru";
  c->workers = 1;
  c->threads = 5;
  c->min_threads = 1;
  /* The control app is off unless -control names a place (as puma's control app is off
   * unless activated): two servers on one host never collide on it. */
  pp_addr_parse(&c->control, "127.0.0.1:9293");
  c->control_enabled = 0;
  c->ruby = "ruby";
  c->access_log_format = PP_ACCESS_LOG_COMBINED;
  c->backlog = 1024;
  c->h2_max_streams = 100;
  c->max_header_bytes = 32768;
  c->max_uri_bytes = 8192;
  c->max_headers = 100;
  c->max_body_bytes = PP_BODY_SIZE_NONE;
  c->max_buffered_body_total = 256ull << 20;
  c->max_spool_total = 4ull << 30;
  c->header_timeout_ns = 30ull * 1000000000;
  c->body_timeout_ns = 60ull * 1000000000;
  c->keepalive_timeout_ns = 20ull * 1000000000;
  c->write_timeout_ns = 60ull * 1000000000;
  c->drain_timeout_ns = 30ull * 1000000000;
  c->request_timeout_ns = 0;
  c->ws_ping_interval_ns = 30000000000ull;
  c->ws_max_output_total = 256ull << 20;
  c->worker_kill_grace_ns = 5ull * 1000000000;
  c->worker_timeout_ns = 60ull * 1000000000;
  c->worker_boot_timeout_ns = 60ull * 1000000000;
  c->tick_ns = 1000000000;
}

int pp_addr_parse(pp_addr *a, const char *full) {
  memset(a, 0, sizeof *a);
  if (strlen(full) >= sizeof a->text) return -1;
  strcpy(a->text, full);
  /* options after the address: ",proxy=v1", ",proxy=v2", ",proxy=any" */
  char text[sizeof a->text];
  strcpy(text, full);
  char *opt = strchr(text, ',');
  if (opt) {
    *opt++ = 0;
    if (!strcmp(opt, "proxy=v1"))
      a->proxy = 1;
    else if (!strcmp(opt, "proxy=v2"))
      a->proxy = 2;
    else if (!strcmp(opt, "proxy=any"))
      a->proxy = 3;
    else
      return -1;
  }
  const char *path = NULL;
  if (strncmp(text, "unix:", 5) == 0)
    path = text + 5;
  else if (text[0] == '/' || text[0] == '.')
    path = text;
  if (path) {
    if (!*path || strlen(path) >= sizeof a->path) return -1;
    a->is_unix = 1;
    strcpy(a->path, path);
    return 0;
  }
  const char *colon = strrchr(text, ':');
  if (!colon) return -1;
  size_t host_len = (size_t)(colon - text);
  const char *host = text;
  if (host_len >= 2 && text[0] == '[' && colon[-1] == ']') host++, host_len -= 2;
  if (host_len >= sizeof a->host) return -1;
  memcpy(a->host, host, host_len);
  a->host[host_len] = 0;
  if (host_len == 0)
    strcpy(a->host, "0.0.0.0");
  else if (strcmp(a->host, "localhost") == 0)
    strcpy(a->host, "127.0.0.1");
  char *end;
  errno = 0;
  long port = strtol(colon + 1, &end, 10);
  if (errno || *end || end == colon + 1 || port < 0 || port > 65535) return -1;
  a->port = (int)port;
  unsigned char tmp[16];
  if (inet_pton(AF_INET, a->host, tmp) != 1 && inet_pton(AF_INET6, a->host, tmp) != 1) return -1;
  return 0;
}

/* The address as 4 or 16 bytes (v4-mapped IPv6 as IPv4): its family, or 0. */
static int addr_bytes(const char *text, size_t len, uint8_t out[16]) {
  char tmp[64];
  if (len == 0 || len >= sizeof tmp) return 0;
  memcpy(tmp, text, len);
  tmp[len] = 0;
  if (inet_pton(AF_INET, tmp, out) == 1) return 4;
  if (inet_pton(AF_INET6, tmp, out) != 1) return 0;
  static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (!memcmp(out, mapped, 12)) {
    memmove(out, out + 12, 4);
    return 4;
  }
  return 6;
}

int pp_cidr_parse(pp_cidr *c, const char *text, size_t len) {
  memset(c, 0, sizeof *c);
  const char *slash = memchr(text, '/', len);
  size_t alen = slash ? (size_t)(slash - text) : len;
  c->family = addr_bytes(text, alen, c->addr);
  if (!c->family) return -1;
  int max = c->family == 4 ? 32 : 128;
  c->bits = max;
  if (slash) {
    const char *d = slash + 1;
    size_t dl = len - alen - 1;
    if (dl == 0 || dl > 3) return -1;
    int v = 0;
    for (size_t i = 0; i < dl; i++) {
      if (d[i] < '0' || d[i] > '9') return -1;
      v = v * 10 + (d[i] - '0');
    }
    if (v > max) return -1;
    c->bits = v;
  }
  return 0;
}

int pp_cidr_match(const pp_cidr *list, int n, const char *addr, size_t len) {
  uint8_t a[16];
  int fam = addr_bytes(addr, len, a);
  if (!fam) return 0;
  for (int i = 0; i < n; i++) {
    const pp_cidr *c = &list[i];
    if (c->family != fam) continue;
    int full = c->bits / 8, rest = c->bits % 8;
    if (memcmp(a, c->addr, (size_t)full)) continue;
    if (rest && ((a[full] ^ c->addr[full]) & (uint8_t)(0xff << (8 - rest)))) continue;
    return 1;
  }
  return 0;
}

int pp_duration_parse(const char *text, uint64_t *ns) {
  char *end;
  errno = 0;
  double v = strtod(text, &end);
  if (errno || end == text || !(v >= 0) || !isfinite(v)) return -1;
  for (const char *p = text; p < end; p++) /* decimal only: no "inf", "nan" or hex floats */
    if (!strchr("0123456789.eE+", *p)) return -1;
  double mult;
  if (!*end || strcmp(end, "s") == 0)
    mult = 1e9;
  else if (strcmp(end, "ms") == 0)
    mult = 1e6;
  else if (strcmp(end, "us") == 0)
    mult = 1e3;
  else if (strcmp(end, "ns") == 0)
    mult = 1;
  else if (strcmp(end, "m") == 0)
    mult = 60e9;
  else
    return -1;
  double total = v * mult + 0.5;
  if (total >= 0x1p62) return -1; /* about 146 years: beyond any timeout, and no overflow */
  *ns = (uint64_t)total;
  return 0;
}

int pp_size_parse(const char *text, uint64_t *bytes) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(text, &end, 10);
  if (errno || end == text || text[0] == '-') return -1;
  uint64_t mult = 1;
  if (!*end || strcmp(end, "b") == 0)
    mult = 1;
  else if (!strcasecmp(end, "k") || !strcmp(end, "KiB") || !strcasecmp(end, "kb"))
    mult = 1024;
  else if (!strcasecmp(end, "m") || !strcmp(end, "MiB") || !strcasecmp(end, "mb"))
    mult = 1 << 20;
  else if (!strcasecmp(end, "g") || !strcmp(end, "GiB") || !strcasecmp(end, "gb"))
    mult = 1 << 30;
  else
    return -1;
  if ((uint64_t)v > UINT64_MAX / mult) return -1; /* would wrap */
  *bytes = (uint64_t)v * mult;
  return 0;
}

void pp_config_usage(FILE *out) {
  fputs("usage: puma-plus-server [flags]\n"
        "\n"
        "  -app FILE              rackup file to serve (default config.ru)\n"
        "  -workers N             Ruby worker processes at start (default 1)\n"
        "  -threads N             threads (= connections, slots) per worker at start (default 5)\n"
        "  -min-threads N         fewest slots per worker at run time (default 1)\n"
        "  -max-slots N           most slots per worker at run time, for I/O-bound apps up to\n"
        "                         4096 (default: the starting count; with -autoscale the\n"
        "                         policy's slots.max)\n"
        "  -fibers N              slots are fibers (async gem), N per worker at start; the\n"
        "                         app must be fiber-safe (docs/RACK.md)\n"
        "  -listen ADDR           HTTP listener, repeatable: HOST:PORT, [V6]:PORT, :PORT,\n"
        "                         unix:/PATH or /PATH (default 127.0.0.1:9292)\n"
        "                         ADDR,proxy=v1|v2|any: the peer (a proxy) sends a PROXY\n"
        "                         protocol header first; its client becomes REMOTE_ADDR\n"
        "  -listen-tls ADDR       HTTPS listener (TLS 1.2+, ALPN h2 and http/1.1), repeatable\n"
        "                         (,proxy=... as -listen)\n"
        "  -listen-h3 ADDR        HTTP/3 (QUIC over UDP) listener, repeatable; same certificate\n"
        "                         as -listen-tls. TCP responses then carry Alt-Svc for it\n"
        "  -h3-retry              QUIC address validation: Retry before keeping any state\n"
        "  -no-alt-svc            do not advertise the HTTP/3 listener with Alt-Svc\n"
        "  -no-extended-connect   no SETTINGS_ENABLE_CONNECT_PROTOCOL on HTTP/2 and HTTP/3:\n"
        "                         no WebSockets over them (RFC 8441, RFC 9220)\n"
        "  -early-hints           offer rack.early_hints: the app's 103 Early Hints are sent\n"
        "                         (HTTP/1.1, HTTP/2, HTTP/3; puma's early_hints)\n"
        "  -ws-max-message SIZE   largest WebSocket message, after inflation (default 1m;\n"
        "                         at most 4m - 512): 1009 beyond\n"
        "  -ws-ping-interval DUR  ping a WebSocket idle this long; close it when the ping is\n"
        "                         not answered within as long again (default 30s; 0 = never)\n"
        "  -ws-close-timeout DUR  wait this long for the peer's Close (default 5s)\n"
        "  -ws-no-deflate         never accept permessage-deflate (RFC 7692)\n"
        "  -ws-max-output-total SIZE  output held for all WebSockets together (default 256m;\n"
        "                         0 = no limit): past it, a message closes its connection\n"
        "                         with 1013 (try again later)\n"
        "  -request-start MODE    X-Request-Start t=<us since the epoch> of the moment the\n"
        "                         request was queued, in the env: keep (default: added when\n"
        "                         the request has none), replace (a client's is dropped), off\n"
        "  -tls-cert FILE         certificate chain (PEM) for -listen-tls; without it a\n"
        "                         development certificate is generated in the runtime dir\n"
        "  -tls-key FILE          private key (PEM) for -tls-cert\n"
        "  -no-h2                 TLS listeners offer http/1.1 only\n"
        "  -h2c                   also serve cleartext HTTP/2 on -listen (prior knowledge and\n"
        "                         Upgrade: h2c)\n"
        "  -h2-max-streams N      concurrent HTTP/2 streams per connection (default 100)\n"
        "  -control ADDR          control app listener for /stats and /metrics, e.g.\n"
        "                         127.0.0.1:9293 (default: none, as puma; \"off\" = none)\n"
        "  -control-token TOKEN   require ?token=TOKEN or Authorization: Bearer TOKEN\n"
        "  -gem-dir DIR           the puma-plus gem (default $PUMA_PLUS_GEM_DIR, else the\n"
        "                         repo's gem/ found relative to this executable)\n"
        "  -ruby PATH             Ruby interpreter (default ruby)\n"
        "  -runtime-dir DIR       where the worker socket goes (default a fresh directory\n"
        "                         under $XDG_RUNTIME_DIR or /tmp)\n"
        "  -backlog N             listen backlog (default 1024)\n"
        "  -pidfile FILE          write the server's pid there at start (removed at exit)\n"
        "  -state-path FILE       write puma's state file (YAML: pid, control_url,\n"
        "                         control_auth_token, running_from) there at start\n"
        "  -max-connections N     open client connections; beyond, new ones get 503 and are\n"
        "                         closed (default: the descriptor limit less 128)\n"
        "  -max-header-size SIZE  request line + headers, 431 beyond (default 32KiB)\n"
        "  -max-uri-size SIZE     request-target, 414 beyond (default 8KiB)\n"
        "  -max-headers N         header lines, 431 beyond (default 100)\n"
        "  -max-body-size SIZE    request body, 413 beyond (default none, as puma; 0 = none)\n"
        "  -max-buffered-body-total SIZE  request bodies buffered before dispatch, all\n"
        "                         together in memory; beyond it a body goes to its spool\n"
        "                         file (default 256MiB, 0 = none)\n"
        "  -body-spool-dir DIR    where bodies over 1 MiB are spooled, as unlinked files\n"
        "                         (default $TMPDIR, else /tmp)\n"
        "  -max-spool-total SIZE  spooled bodies on disk, all together; beyond it 503, and\n"
        "                         413 for one body larger than it (default 4GiB, 0 = none)\n"
        "  -body-stream           stream bodies over 1 MiB to the app as they arrive instead\n"
        "                         of spooling them (the slot waits for the client)\n"
        "  -header-timeout DUR    first byte to end of headers (default 30s)\n"
        "  -body-timeout DUR      longest pause between body bytes (default 60s)\n"
        "  -keepalive-timeout DUR idle keep-alive connection (default 20s)\n"
        "  -write-timeout DUR     longest stall writing to a client (default 60s)\n"
        "  -drain-timeout DUR     SIGTERM/SIGINT drain limit (default 30s)\n"
        "  -request-timeout DUR   a request running longer than this (from its dispatch to a\n"
        "                         worker thread) gets 504 and is interrupted in the app with\n"
        "                         PumaPlus::RequestTimeout (default 0 = off)\n"
        "  -worker-kill-grace DUR after a request timeout, how long the thread has to let go\n"
        "                         before its worker is killed and replaced (default 5s)\n"
        "  -worker-timeout DUR    a worker whose heartbeat is silent this long is killed and\n"
        "                         replaced (default 60s, as puma's worker_timeout; 0 = off)\n"
        "  -worker-boot-timeout DUR  a forked worker none of whose threads connected within\n"
        "                         this is killed and replaced (default 60s, as puma; 0 = off)\n"
        "  -max-keep-alive N      close an HTTP/1.1 connection after its Nth request (puma's\n"
        "                         max_keep_alive; default 0 = no cap)\n"
        "  -tick DUR              stats window and controller tick (default 1s)\n"
        "  -quiet                 log only errors\n"
        "  -autoscale             let the controller spawn and retire workers\n"
        "  -policy FILE           controller policy (YAML, as pp-sim reads it)\n"
        "  -min-workers N         policy min_workers (overrides the file)\n"
        "  -standby K             policy standby: K workers parked for activation (overrides)\n"
        "  -max-workers N         policy max_workers (overrides the file)\n"
        "  -target-queue-p95 DUR  policy target_queue_p95 (overrides the file)\n"
        "  -shed                  policy shed.enabled = true (503 when the wait is hopeless)\n"
        "  -decision-log FILE     JSONL decision log, one line per tick (SIGHUP reopens)\n"
        "  -remote-addr-header H  REMOTE_ADDR from this request header (e.g. X-Forwarded-For,\n"
        "                         its right-most address not in -trusted-proxies) when the\n"
        "                         peer is a trusted proxy; ignored from any other peer\n"
        "  -trusted-proxies LIST  addresses or CIDR blocks, comma-separated (default with\n"
        "                         -remote-addr-header: 127.0.0.0/8,::1)\n"
        "  -access-log PATH|-     an access log line per response (\"-\": stdout; SIGHUP\n"
        "                         reopens); default none\n"
        "  -access-log-format F   common, combined (default: combined + queue, service,\n"
        "                         duration, worker, request id) or json (JSON lines)\n"
        "  -print-policy          print the policy these flags resolve to (-policy, -shed,\n"
        "                         -min-workers ...) with the admission rule's effective\n"
        "                         values, and exit (puma-plus --dry-run shows it)\n"
        "  -help, --help          this text\n"
        "\n"
        "DUR: 30s, 250ms, 100us, 1m (bare number = seconds). SIZE: 1048576, 64k, 1MiB.\n",
        out);
}

static int parse_u32(const char *v, uint32_t *out, uint32_t min, uint32_t max) {
  char *end;
  errno = 0;
  unsigned long n = strtoul(v, &end, 10);
  if (errno || *end || end == v || v[0] == '-' || n < min || n > max) return -1;
  *out = (uint32_t)n;
  return 0;
}

int pp_config_parse(pp_config *c, int argc, char **argv, char *err, size_t err_len, FILE *out) {
  int default_listen = 1;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (arg[0] != '-' || !arg[1]) {
      snprintf(err, err_len, "unexpected argument \"%s\" (flags start with -)", arg);
      return -1;
    }
    const char *name = arg + 1;
    if (*name == '-') name++;
    char key[64];
    const char *value = NULL;
    const char *eq = strchr(name, '=');
    size_t key_len = eq ? (size_t)(eq - name) : strlen(name);
    if (key_len >= sizeof key) key_len = sizeof key - 1;
    memcpy(key, name, key_len);
    key[key_len] = 0;
    if (eq) value = eq + 1;

    if (!strcmp(key, "help") || !strcmp(key, "h")) {
      pp_config_usage(out);
      return 1;
    }
    /* boolean flags */
    if (!strcmp(key, "quiet") || !strcmp(key, "autoscale") || !strcmp(key, "shed") ||
        !strcmp(key, "h2c") || !strcmp(key, "no-h2") || !strcmp(key, "h3-retry") ||
        !strcmp(key, "no-alt-svc") || !strcmp(key, "print-policy") || !strcmp(key, "early-hints") ||
        !strcmp(key, "no-extended-connect") || !strcmp(key, "ws-no-deflate") ||
        !strcmp(key, "body-stream")) {
      int on = 1;
      if (value) {
        if (!strcmp(value, "true") || !strcmp(value, "1"))
          on = 1;
        else if (!strcmp(value, "false") || !strcmp(value, "0"))
          on = 0;
        else {
          snprintf(err, err_len, "-%s: expected true or false, got \"%s\"", key, value);
          return -1;
        }
      }
      if (!strcmp(key, "quiet"))
        c->quiet = on;
      else if (!strcmp(key, "autoscale"))
        c->autoscale = on;
      else if (!strcmp(key, "h2c"))
        c->h2c = on;
      else if (!strcmp(key, "no-h2"))
        c->no_h2 = on;
      else if (!strcmp(key, "h3-retry"))
        c->h3_retry = on;
      else if (!strcmp(key, "no-alt-svc"))
        c->no_alt_svc = on;
      else if (!strcmp(key, "no-extended-connect"))
        c->no_extended_connect = on;
      else if (!strcmp(key, "print-policy"))
        c->print_policy = on;
      else if (!strcmp(key, "early-hints"))
        c->early_hints = on;
      else if (!strcmp(key, "ws-no-deflate"))
        c->ws_no_deflate = on;
      else if (!strcmp(key, "body-stream"))
        c->body_stream = on;
      else
        c->shed = on;
      continue;
    }
    if (!value) {
      if (i + 1 >= argc) {
        snprintf(err, err_len, "flag -%s needs a value", key);
        return -1;
      }
      value = argv[++i];
    }
    uint64_t u64;
    int bad = 0;
    if (!strcmp(key, "app"))
      c->app = value;
    else if (!strcmp(key, "workers"))
      bad = parse_u32(value, &c->workers, 1, 256);
    else if (!strcmp(key, "threads"))
      bad = parse_u32(value, &c->threads, 1, 1024);
    else if (!strcmp(key, "min-threads"))
      bad = parse_u32(value, &c->min_threads, 1, PP_MAX_SLOTS);
    else if (!strcmp(key, "max-slots"))
      bad = parse_u32(value, &c->max_slots, 1, PP_MAX_SLOTS);
    else if (!strcmp(key, "fibers"))
      bad = parse_u32(value, &c->fibers, 0, PP_MAX_SLOTS);
    else if (!strcmp(key, "listen")) {
      if (default_listen) c->listen_count = 0, default_listen = 0;
      if (c->listen_count >= PP_MAX_LISTEN) {
        snprintf(err, err_len, "-listen: at most %d listeners", PP_MAX_LISTEN);
        return -1;
      }
      bad = pp_addr_parse(&c->listen[c->listen_count++], value);
    } else if (!strcmp(key, "listen-tls")) {
      if (c->listen_tls_count >= PP_MAX_LISTEN) {
        snprintf(err, err_len, "-listen-tls: at most %d listeners", PP_MAX_LISTEN);
        return -1;
      }
      bad = pp_addr_parse(&c->listen_tls[c->listen_tls_count++], value);
    } else if (!strcmp(key, "listen-h3")) {
      if (c->listen_h3_count >= PP_MAX_LISTEN) {
        snprintf(err, err_len, "-listen-h3: at most %d listeners", PP_MAX_LISTEN);
        return -1;
      }
      bad = pp_addr_parse(&c->listen_h3[c->listen_h3_count], value) ||
            c->listen_h3[c->listen_h3_count].is_unix || c->listen_h3[c->listen_h3_count].proxy;
      c->listen_h3_count++;
    } else if (!strcmp(key, "tls-cert"))
      c->tls_cert = value;
    else if (!strcmp(key, "tls-key"))
      c->tls_key = value;
    else if (!strcmp(key, "request-start")) {
      if (!strcmp(value, "keep"))
        c->request_start = PP_REQUEST_START_KEEP;
      else if (!strcmp(value, "replace"))
        c->request_start = PP_REQUEST_START_REPLACE;
      else if (!strcmp(value, "off"))
        c->request_start = PP_REQUEST_START_OFF;
      else
        bad = 1;
    } else if (!strcmp(key, "h2-max-streams"))
      bad = parse_u32(value, &c->h2_max_streams, 1, 1000);
    else if (!strcmp(key, "control")) {
      if (!strcmp(value, "off") || !*value)
        c->control_enabled = 0;
      else
        c->control_enabled = 1, bad = pp_addr_parse(&c->control, value) || c->control.proxy;
    } else if (!strcmp(key, "control-token"))
      c->control_token = value;
    else if (!strcmp(key, "gem-dir"))
      c->gem_dir = value;
    else if (!strcmp(key, "ruby"))
      c->ruby = value;
    else if (!strcmp(key, "runtime-dir"))
      c->runtime_dir = value;
    else if (!strcmp(key, "pidfile"))
      bad = !*value, c->pidfile = value;
    else if (!strcmp(key, "state-path"))
      bad = !*value, c->state_path = value;
    else if (!strcmp(key, "backlog")) {
      uint32_t n;
      bad = parse_u32(value, &n, 1, 65535);
      c->backlog = (int)n;
    } else if (!strcmp(key, "max-connections"))
      bad = parse_u32(value, &c->max_connections, 1, 10000000);
    else if (!strcmp(key, "max-header-size")) {
      bad = pp_size_parse(value, &u64) || u64 < 256 || u64 > (1u << 24);
      c->max_header_bytes = (size_t)u64;
    } else if (!strcmp(key, "max-uri-size")) {
      bad = pp_size_parse(value, &u64) || u64 < 16 || u64 > (1u << 24);
      c->max_uri_bytes = (size_t)u64;
    } else if (!strcmp(key, "max-headers"))
      bad = parse_u32(value, &c->max_headers, 1, 256);
    else if (!strcmp(key, "max-body-size")) {
      bad = pp_size_parse(value, &c->max_body_bytes);
      if (!bad && (c->max_body_bytes == 0 || c->max_body_bytes > PP_BODY_SIZE_NONE))
        c->max_body_bytes = PP_BODY_SIZE_NONE;
    } else if (!strcmp(key, "max-buffered-body-total"))
      bad = pp_size_parse(value, &c->max_buffered_body_total);
    else if (!strcmp(key, "max-spool-total"))
      bad = pp_size_parse(value, &c->max_spool_total);
    else if (!strcmp(key, "body-spool-dir"))
      c->body_spool_dir = value;
    else if (!strcmp(key, "header-timeout"))
      bad = pp_duration_parse(value, &c->header_timeout_ns);
    else if (!strcmp(key, "body-timeout"))
      bad = pp_duration_parse(value, &c->body_timeout_ns);
    else if (!strcmp(key, "keepalive-timeout"))
      bad = pp_duration_parse(value, &c->keepalive_timeout_ns);
    else if (!strcmp(key, "write-timeout"))
      bad = pp_duration_parse(value, &c->write_timeout_ns);
    else if (!strcmp(key, "drain-timeout"))
      bad = pp_duration_parse(value, &c->drain_timeout_ns);
    else if (!strcmp(key, "request-timeout"))
      bad = pp_duration_parse(value, &c->request_timeout_ns) ||
            (c->request_timeout_ns && c->request_timeout_ns < 1000000);
    else if (!strcmp(key, "ws-max-message"))
      bad = pp_size_parse(value, &c->ws_max_message) || c->ws_max_message < 125 ||
            c->ws_max_message > (4u << 20) - 512;
    else if (!strcmp(key, "ws-max-output-total"))
      bad = pp_size_parse(value, &c->ws_max_output_total);
    else if (!strcmp(key, "ws-ping-interval"))
      bad = pp_duration_parse(value, &c->ws_ping_interval_ns) ||
            (c->ws_ping_interval_ns && c->ws_ping_interval_ns < 100000000);
    else if (!strcmp(key, "ws-close-timeout"))
      bad = pp_duration_parse(value, &c->ws_close_timeout_ns) || c->ws_close_timeout_ns < 10000000;
    else if (!strcmp(key, "worker-kill-grace"))
      bad = pp_duration_parse(value, &c->worker_kill_grace_ns);
    else if (!strcmp(key, "worker-timeout"))
      bad = pp_duration_parse(value, &c->worker_timeout_ns) ||
            (c->worker_timeout_ns && c->worker_timeout_ns < 200000000);
    else if (!strcmp(key, "worker-boot-timeout"))
      bad = pp_duration_parse(value, &c->worker_boot_timeout_ns) ||
            (c->worker_boot_timeout_ns && c->worker_boot_timeout_ns < 100000000);
    else if (!strcmp(key, "max-keep-alive"))
      bad = parse_u32(value, &c->max_keep_alive, 0, 0xffffffffu);
    else if (!strcmp(key, "tick"))
      bad = pp_duration_parse(value, &c->tick_ns) || c->tick_ns == 0;
    else if (!strcmp(key, "policy"))
      c->policy_file = value;
    else if (!strcmp(key, "min-workers"))
      c->min_workers = value;
    else if (!strcmp(key, "standby"))
      c->standby = value;
    else if (!strcmp(key, "max-workers"))
      c->max_workers = value;
    else if (!strcmp(key, "target-queue-p95"))
      c->target_queue_p95 = value;
    else if (!strcmp(key, "decision-log"))
      c->decision_log = value;
    else if (!strcmp(key, "remote-addr-header"))
      bad = !*value || strpbrk(value, " :\t") != NULL, c->remote_addr_header = value;
    else if (!strcmp(key, "trusted-proxies")) {
      c->trusted_count = 0;
      for (const char *p = value; !bad && *p;) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        bad = c->trusted_count >= PP_MAX_TRUSTED ||
              pp_cidr_parse(&c->trusted[c->trusted_count++], p, n) < 0;
        p += n + (e ? 1 : 0);
      }
      bad = bad || !c->trusted_count;
    } else if (!strcmp(key, "access-log"))
      bad = !*value, c->access_log = value;
    else if (!strcmp(key, "access-log-format")) {
      if (!strcmp(value, "common"))
        c->access_log_format = PP_ACCESS_LOG_COMMON;
      else if (!strcmp(value, "combined"))
        c->access_log_format = PP_ACCESS_LOG_COMBINED;
      else if (!strcmp(value, "json"))
        c->access_log_format = PP_ACCESS_LOG_JSON;
      else
        bad = 1;
    } else {
      snprintf(err, err_len, "unknown flag -%s (see --help)", key);
      return -1;
    }
    if (bad) {
      snprintf(err, err_len, "-%s: invalid value \"%s\"", key, value);
      return -1;
    }
  }
  uint32_t initial = pp_config_slots_initial(c);
  c->max_slots_given = c->max_slots != 0;
  if (!c->max_slots) c->max_slots = initial;
  if (c->min_threads > initial || initial > c->max_slots) {
    snprintf(err, err_len,
             "slots per worker: -min-threads %u <= starting count %u (-%s) <= -max-slots %u "
             "does not hold",
             c->min_threads, initial, c->fibers ? "fibers" : "threads", c->max_slots);
    return -1;
  }
  if (!c->tls_cert != !c->tls_key) {
    snprintf(err, err_len, "-tls-cert and -tls-key go together (or neither: a development cert)");
    return -1;
  }
  if (c->remote_addr_header && !c->trusted_count) { /* loopback: a proxy on the same host */
    pp_cidr_parse(&c->trusted[0], "127.0.0.0/8", 11);
    pp_cidr_parse(&c->trusted[1], "::1", 3);
    c->trusted_count = 2;
  }
  if (default_listen && c->listen_count == 0 && c->listen_tls_count == 0 &&
      c->listen_h3_count == 0) {
    pp_addr_parse(&c->listen[0], "127.0.0.1:9292");
    c->listen_count = 1;
  }
  return 0;
}
