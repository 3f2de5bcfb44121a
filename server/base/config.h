/* puma-plus-server's command line: Go-flag style (`-name value`, `-name=value`, `--name` also
 * accepted), every flag documented in docs/SERVER.md and in pp_config_usage(). Parsing is
 * pure (no I/O besides the caller's error buffer) so it is unit-tested. */
#ifndef PP_CONFIG_H
#define PP_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define PP_MAX_LISTEN 16
#define PP_MAX_SLOTS  4096 /* slots per worker process, the most -max-slots allows */

/* -max-body-size 0 (and the default, as puma's http_content_length_limit nil): no limit. A
 * large finite number rather than UINT64_MAX, so that the parsers' chunk-size arithmetic
 * ((size << 4) + digit, compared against it) cannot wrap. 2^59 bytes = 512 PiB. */
#define PP_BODY_SIZE_NONE (1ull << 59)

typedef struct pp_addr {
  int is_unix;    /* 1: `path` is a unix socket path */
  char host[256]; /* numeric address ("127.0.0.1", "::1", "0.0.0.0") for TCP */
  int port;
  char port_text[8]; /* port in decimal, NUL-terminated (the Rack env's SERVER_PORT) */
  char path[108];    /* unix socket path */
  char text[300];    /* as given, for logs */
  unsigned proxy;    /* ",proxy=v1|v2|any": the PROXY versions required first (proto/proxy.h
                      * PP_PROXY_V1 | PP_PROXY_V2); 0: none */
} pp_addr;

/* -request-start: X-Request-Start "t=<microseconds since the epoch>" of T2b in the env (the
 * same values as pp_env_conninfo's request_start). */
#define PP_REQUEST_START_KEEP    0 /* added when the request has none; a proxy's is kept */
#define PP_REQUEST_START_REPLACE 1 /* always the server's; a client's is dropped */
#define PP_REQUEST_START_OFF     2 /* never added; a client's passes as sent */

/* An address block of -trusted-proxies: an address and a prefix length. */
typedef struct pp_cidr {
  int family; /* 4 or 6 */
  uint8_t addr[16];
  int bits;
} pp_cidr;
#define PP_MAX_TRUSTED 32

typedef struct pp_config {
  const char *app;  /* -app: the rackup file */
  uint32_t workers; /* -workers */
  uint32_t threads; /* -threads */
  /* Slots per worker at run time (docs/SERVER.md "Slots at run time"): a worker starts with
   * -threads slots (or -fibers); SLOTS / SLOT_CLOSE keep it within [min_threads, max_slots]. */
  uint32_t min_threads; /* -min-threads (default 1) */
  uint32_t max_slots;   /* -max-slots (default: the starting count; with -autoscale, slots.max) */
  int max_slots_given;  /* -max-slots was on the command line */
  uint32_t fibers;      /* -fibers N: slots are fibers, N per worker at start (0: threads) */
  pp_addr listen[PP_MAX_LISTEN];
  int listen_count; /* -listen (repeatable) */
  pp_addr listen_tls[PP_MAX_LISTEN];
  int listen_tls_count; /* -listen-tls (repeatable) */
  pp_addr listen_h3[PP_MAX_LISTEN];
  int listen_h3_count;     /* -listen-h3 (repeatable): HTTP/3 over QUIC (UDP) */
  int h3_retry;            /* -h3-retry: address validation by Retry before any state */
  int no_alt_svc;          /* -no-alt-svc: no Alt-Svc header for the HTTP/3 listener */
  int no_extended_connect; /* -no-extended-connect: no RFC 8441 / 9220 on HTTP/2 and HTTP/3 */
  int request_start;       /* -request-start: PP_REQUEST_START_KEEP (default), _REPLACE, _OFF */
  int early_hints;         /* -early-hints: offer rack.early_hints (103) to the app */
  /* WebSockets owned by the server (docs/WEBSOCKET.md) */
  uint64_t ws_max_message;      /* -ws-max-message: bytes after inflation (0: 1 MiB) */
  uint64_t ws_ping_interval_ns; /* -ws-ping-interval: ping an idle connection (0: never) */
  uint64_t ws_close_timeout_ns; /* -ws-close-timeout: wait for the peer's Close (0: 5 s) */
  int ws_no_deflate;            /* -ws-no-deflate: never accept permessage-deflate */
  uint64_t ws_max_output_total; /* -ws-max-output-total: all WebSockets' unsent output (0: none) */
  const char *tls_cert;         /* -tls-cert (PEM, chain included; NULL: a development cert) */
  const char *tls_key;          /* -tls-key */
  int h2c;                      /* -h2c: cleartext HTTP/2 (prior knowledge, Upgrade) on -listen */
  int no_h2;                    /* -no-h2: TLS listeners offer http/1.1 only */
  uint32_t h2_max_streams;      /* -h2-max-streams: SETTINGS_MAX_CONCURRENT_STREAMS */
  pp_addr control;              /* -control */
  int control_enabled;
  const char *control_token; /* -control-token (NULL: none) */
  const char *gem_dir;       /* -gem-dir (NULL: find it) */
  const char *ruby;          /* -ruby */
  const char *runtime_dir;   /* -runtime-dir (NULL: mkdtemp under $XDG_RUNTIME_DIR or /tmp) */
  int backlog;               /* -backlog */
  uint32_t max_connections;  /* -max-connections (0: from the descriptor limit at start) */
  const char *pidfile;       /* -pidfile: our pid, written at start, removed at exit */
  const char *state_path;    /* -state-path: puma's state file (YAML: pid, control_url, ...) */

  size_t max_header_bytes;          /* -max-header-size */
  size_t max_uri_bytes;             /* -max-uri-size */
  uint32_t max_headers;             /* -max-headers */
  uint64_t max_body_bytes;          /* -max-body-size; PP_BODY_SIZE_NONE = no limit */
  uint64_t max_buffered_body_total; /* -max-buffered-body-total: all bodies buffered before
                                       dispatch; 0 none */
  const char *body_spool_dir;       /* -body-spool-dir (NULL: $TMPDIR, else /tmp) */
  uint64_t max_spool_total;         /* -max-spool-total: spooled bodies on disk; 0 none */
  int body_stream;                  /* -body-stream: bodies over 1 MiB stream (BODY frames)
                                       instead of being spooled */

  uint64_t header_timeout_ns;    /* -header-timeout */
  uint64_t body_timeout_ns;      /* -body-timeout */
  uint64_t keepalive_timeout_ns; /* -keepalive-timeout */
  uint64_t write_timeout_ns;     /* -write-timeout */
  uint64_t drain_timeout_ns;     /* -drain-timeout */
  uint64_t request_timeout_ns;   /* -request-timeout: from dispatch (T3); 0 = off */
  uint64_t worker_kill_grace_ns; /* -worker-kill-grace: after a TIMEOUT, before the kill */
  uint64_t worker_timeout_ns;    /* -worker-timeout: heartbeat silence that kills; 0 = off */
  uint64_t tick_ns;              /* -tick: stats window and controller period */
  int quiet;                     /* -quiet: no per-event logs */

  /* puma's worker_boot_timeout and max_keep_alive (issue 26). */
  uint64_t worker_boot_timeout_ns; /* -worker-boot-timeout: FORKED to first HELLO; 0 = off */
  uint32_t max_keep_alive; /* -max-keep-alive: HTTP/1.1 requests per connection; 0 = no cap */

  /* Autoscaling (issue 5). */
  int autoscale;                /* -autoscale */
  const char *policy_file;      /* -policy */
  const char *min_workers;      /* -min-workers (text: applied with pp_policy_set) */
  const char *standby;          /* -standby K: policy standby (text, as -min-workers) */
  const char *max_workers;      /* -max-workers */
  const char *target_queue_p95; /* -target-queue-p95 */
  int shed;                     /* -shed: turn on admission control (policy shed.enabled) */
  int print_policy;             /* -print-policy: print the resolved policy and exit */
  const char *decision_log;     /* -decision-log */

  /* Client addresses behind proxies (docs/SERVER.md "Client addresses"). */
  const char *remote_addr_header;  /* -remote-addr-header NAME (e.g. X-Forwarded-For); NULL: none */
  pp_cidr trusted[PP_MAX_TRUSTED]; /* -trusted-proxies: peers whose header is believed */
  int trusted_count;

  /* The access log (issue 26, ops/access_log.c). */
  const char *access_log; /* -access-log PATH, or "-" for stdout; NULL: none */
  int access_log_format;  /* -access-log-format: PP_ACCESS_LOG_COMBINED (default) ... */
} pp_config;

#define PP_ACCESS_LOG_COMMON   0 /* NCSA common log format */
#define PP_ACCESS_LOG_COMBINED 1 /* NCSA combined, then queue/service/duration/worker/id */
#define PP_ACCESS_LOG_JSON     2 /* one JSON object a line */

void pp_config_defaults(pp_config *c);

/* Parses argv (argv[0] skipped). Returns 0, 1 if --help/-help was given (usage printed to
 * `out`), or -1 with a one-line message in err. Strings point into argv. */
/* The slots a worker starts with: -fibers when set, else -threads. */
static inline uint32_t pp_config_slots_initial(const pp_config *c) {
  return c->fibers ? c->fibers : c->threads;
}

int pp_config_parse(pp_config *c, int argc, char **argv, char *err, size_t err_len, FILE *out);

/* "host:port", "[v6]:port", ":port", "unix:/path", "/path" or "./path". 0 or -1. */
int pp_addr_parse(pp_addr *a, const char *text);
/* "10.0.0.0/8", "::1", "fd00::/8" (no prefix: the one address). 0, or -1. */
int pp_cidr_parse(pp_cidr *c, const char *text, size_t len);
/* Is the textual address (IPv4, IPv6; v4-mapped IPv6 as IPv4) in one of the blocks? */
int pp_cidr_match(const pp_cidr *list, int n, const char *addr, size_t len);
/* "30s", "250ms", "100us", "5000ns", "1m", bare number = seconds. 0 or -1. */
int pp_duration_parse(const char *text, uint64_t *ns);
/* "1048576", "64k", "64KiB", "1m", "1MiB", "1g". 0 or -1. */
int pp_size_parse(const char *text, uint64_t *bytes);

void pp_config_usage(FILE *out);

#endif
