/* The access log (see access_log.h): formatting on the loop thread, writing on a thread of
 * its own, reopen on SIGHUP. */
#include "server/ops/access_log.h"

#include <errno.h>
#include <jansson.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "server/base/log.h"
#include "server/base/prom.h"
#include "server/base/alloc.h"
#include "server/base/clock.h"
#include "server/base/config.h"
#include "server/proto/wire.h"

struct pp_access_log {
  const pp_config *cfg;
  int format;
  const char *path; /* NULL: stdout */
  uv_timer_t timer;
  pp_buf fill;    /* the loop thread's: lines formatted since the last hand-over ... */
  int fill_fd;    /* ... which belong to this descriptor */
  int pending_fd; /* SIGHUP opened this: lines go to it from the next hand-over; -1: none */

  /* Shared with the writer thread, under mu. */
  uv_mutex_t mu;
  uv_cond_t cv;
  uv_thread_t thread;
  pp_buf out;             /* the writer's batch: set by the loop when the writer is idle ... */
  int out_fd;             /* ... written to this descriptor ... */
  int out_close;          /* ... which is closed after it when >= 0 (the file before a reopen) */
  int busy;               /* the writer holds `out` */
  int stop;               /* end once idle */
  pp_access_log_stats st; /* lines, dropped, reopens: the loop's; bytes, errors: the writer's */
};

/* ---------------------------------------------------------------- formatting */

#define LIT(out, lit) pp_buf_append(out, lit, sizeof lit - 1) /* a string literal */

typedef struct fields {
  const char *remote, *method, *target, *protocol, *referer, *agent;
  size_t remote_len, method_len, target_len, protocol_len, referer_len, agent_len;
} fields;

static void from_env(const pp_access_rec *r, fields *f) {
  pp_wire_pairs pairs = {r->env, r->env_len, r->env_count};
  pp_wire_pairs_iter it;
  pp_wire_pairs_iter_init(&it, &pairs);
  const uint8_t *k, *v;
  uint32_t kl, vl;
  while (pp_wire_pairs_next(&it, &k, &kl, &v, &vl)) {
#define KEY(name, field)                                                                           \
  if (kl == sizeof name - 1 && !memcmp(k, name, kl)) {                                             \
    f->field = (const char *)v, f->field##_len = vl;                                               \
    continue;                                                                                      \
  }
    KEY("REQUEST_METHOD", method)
    KEY("REQUEST_URI", target)
    KEY("SERVER_PROTOCOL", protocol)
    KEY("REMOTE_ADDR", remote)
    KEY("HTTP_REFERER", referer)
    KEY("HTTP_USER_AGENT", agent)
#undef KEY
  }
}

/* Bytes that need escaping in a quoted field: 1 in both formats (quote, backslash, control
 * bytes, DEL), 2 only outside JSON (bytes >= 0x80: Apache writes \xHH, JSON keeps UTF-8). */
static const uint8_t ESC[256] = {
    [0 ... 0x1f] = 1, ['"'] = 1, ['\\'] = 1, [0x7f] = 1, [0x80 ... 0xff] = 2,
};

/* Appends s, escaped for a double-quoted field: JSON's rules (json) or Apache's (\" \\ \xHH).
 * Runs of plain bytes are copied at once (the common case: nothing to escape). */
static void put_escaped(pp_buf *out, const char *s, size_t n, int json) {
  const uint8_t stop = json ? 1 : 3; /* the ESC bits that need escaping */
  size_t i = 0;
  while (i < n) {
    size_t run = i;
    while (run < n && !(ESC[(uint8_t)s[run]] & stop))
      run++;
    pp_buf_append(out, s + i, run - i);
    if (run == n) return;
    unsigned char ch = (unsigned char)s[run];
    char e[8];
    int k;
    if (ch == '"' || ch == '\\')
      e[0] = '\\', e[1] = (char)ch, k = 2;
    else
      k = json ? snprintf(e, sizeof e, "\\u%04x", ch) : snprintf(e, sizeof e, "\\x%02x", ch);
    pp_buf_append(out, e, (size_t)k);
    i = run + 1;
  }
}

static void put_str_or_dash(pp_buf *out, const char *s, size_t n) {
  if (s && n)
    put_escaped(out, s, n, 0);
  else
    pp_buf_append(out, "-", 1);
}

static void put_u64(pp_buf *out, uint64_t v) {
  char d[20];
  pp_buf_append(out, d, pp_fmt_u64(d, v));
}

/* Milliseconds with microsecond precision ("1.234"), or `none` when ns < 0. */
static void put_ms(pp_buf *out, int64_t ns, const char *none) {
  if (ns < 0) {
    pp_buf_append_str(out, none);
    return;
  }
  uint64_t us = (uint64_t)(ns + 500) / 1000;
  put_u64(out, us / 1000);
  char frac[4] = {'.', (char)('0' + us / 100 % 10), (char)('0' + us / 10 % 10),
                  (char)('0' + us % 10)};
  pp_buf_append(out, frac, 4);
}

/* The time text of a second, cached: formatted once a second, not once a line. */
typedef struct time_cache {
  time_t sec;
  int json;
  char text[40];
} time_cache;

static const char *time_text(time_cache *tc, time_t sec, int json) {
  if (tc->sec == sec && tc->json == json && tc->text[0]) return tc->text;
  struct tm tm;
  if (json) {
    gmtime_r(&sec, &tm);
    strftime(tc->text, sizeof tc->text, "%Y-%m-%dT%H:%M:%S", &tm);
  } else {
    localtime_r(&sec, &tm);
    strftime(tc->text, sizeof tc->text, "%d/%b/%Y:%H:%M:%S %z", &tm);
  }
  tc->sec = sec, tc->json = json;
  return tc->text;
}

void pp_access_log_format(int format, const pp_access_rec *r, int64_t wall_ns, int64_t mono_ns,
                          pp_buf *out) {
  static time_cache tc; /* the loop thread's only */
  fields f = {0};
  if (r->env) from_env(r, &f);
  if (!f.remote && r->remote) f.remote = r->remote, f.remote_len = strlen(r->remote);
  if (!f.protocol && r->protocol) f.protocol = r->protocol, f.protocol_len = strlen(r->protocol);
  if (!f.method && r->method) f.method = r->method, f.method_len = r->method_len;
  if (!f.target && r->target) f.target = r->target, f.target_len = r->target_len;
  /* The request's time is its first byte's (Apache's %t), on the wall clock. */
  int64_t start = r->t1 ? r->t1 : r->t_end;
  int64_t wall = wall_ns - (mono_ns - start);
  time_t sec = (time_t)(wall / 1000000000);
  int64_t duration = r->t1 && r->t_end >= r->t1 ? r->t_end - r->t1 : -1;
  int64_t queue = r->t3 && r->t2b && r->t3 >= r->t2b ? r->t3 - r->t2b : -1;
  if (format == PP_ACCESS_LOG_JSON) {
    LIT(out, "{\"time\":\"");
    pp_buf_append_str(out, time_text(&tc, sec, 1));
    char ms[6] = {'.',
                  (char)('0' + wall / 100000000 % 10),
                  (char)('0' + wall / 10000000 % 10),
                  (char)('0' + wall / 1000000 % 10),
                  'Z',
                  '"'};
    pp_buf_append(out, ms, 6);
#define JSTR(key, s, n)                                                                            \
  do {                                                                                             \
    LIT(out, ",\"" key "\":");                                                                     \
    if (s) {                                                                                       \
      pp_buf_append(out, "\"", 1);                                                                 \
      put_escaped(out, s, n, 1);                                                                   \
      pp_buf_append(out, "\"", 1);                                                                 \
    } else {                                                                                       \
      LIT(out, "null");                                                                            \
    }                                                                                              \
  } while (0)
    JSTR("remote", f.remote, f.remote_len);
    JSTR("method", f.method, f.method_len);
    JSTR("path", f.target, f.target_len);
    JSTR("protocol", f.protocol, f.protocol_len);
    LIT(out, ",\"status\":");
    if (r->status)
      put_u64(out, (uint64_t)r->status);
    else
      LIT(out, "null");
    LIT(out, ",\"bytes\":");
    put_u64(out, r->bytes);
    LIT(out, ",\"duration_ms\":");
    put_ms(out, duration, "null");
    LIT(out, ",\"queue_ms\":");
    put_ms(out, queue, "null");
    LIT(out, ",\"service_ms\":");
    put_ms(out, r->service_ns, "null");
    LIT(out, ",\"worker\":");
    if (r->worker >= 0)
      put_u64(out, (uint64_t)r->worker);
    else
      LIT(out, "null");
    LIT(out, ",\"request_id\":");
    if (r->id)
      put_u64(out, r->id);
    else
      LIT(out, "null");
    JSTR("referer", f.referer, f.referer_len);
    JSTR("user_agent", f.agent, f.agent_len);
#undef JSTR
    LIT(out, "}\n");
    return;
  }
  /* NCSA: host ident authuser [date] "request" status bytes */
  put_str_or_dash(out, f.remote, f.remote_len);
  LIT(out, " - - [");
  pp_buf_append_str(out, time_text(&tc, sec, 0));
  LIT(out, "] \"");
  if (f.method && f.target) {
    put_escaped(out, f.method, f.method_len, 0);
    pp_buf_append(out, " ", 1);
    put_escaped(out, f.target, f.target_len, 0);
    if (f.protocol) {
      pp_buf_append(out, " ", 1);
      put_escaped(out, f.protocol, f.protocol_len, 0);
    }
  } else {
    pp_buf_append(out, "-", 1);
  }
  LIT(out, "\" ");
  if (r->status)
    put_u64(out, (uint64_t)r->status);
  else
    pp_buf_append(out, "-", 1);
  pp_buf_append(out, " ", 1);
  if (r->bytes)
    put_u64(out, r->bytes);
  else
    pp_buf_append(out, "-", 1);
  if (format == PP_ACCESS_LOG_COMBINED) {
    LIT(out, " \"");
    put_str_or_dash(out, f.referer, f.referer_len);
    LIT(out, "\" \"");
    put_str_or_dash(out, f.agent, f.agent_len);
    LIT(out, "\" queue=");
    put_ms(out, queue, "-");
    LIT(out, " service=");
    put_ms(out, r->service_ns, "-");
    LIT(out, " duration=");
    put_ms(out, duration, "-");
    LIT(out, " worker=");
    if (r->worker >= 0)
      put_u64(out, (uint64_t)r->worker);
    else
      pp_buf_append(out, "-", 1);
    LIT(out, " id=");
    if (r->id)
      put_u64(out, r->id);
    else
      pp_buf_append(out, "-", 1);
  }
  pp_buf_append(out, "\n", 1);
}

/* ---------------------------------------------------------------- the writer thread */

static void write_all(pp_access_log *al, int fd, const uint8_t *p, size_t n) {
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w > 0) {
      p += w, n -= (size_t)w;
      __atomic_add_fetch(&al->st.bytes, (uint64_t)w, __ATOMIC_RELAXED);
    } else if (w < 0 && errno == EINTR) {
      continue;
    } else if (w < 0 && errno == EAGAIN) { /* a non-blocking stdout (a pipe, a tty) */
      struct pollfd pfd = {.fd = fd, .events = POLLOUT};
      poll(&pfd, 1, 1000);
    } else {
      __atomic_add_fetch(&al->st.write_errors, 1, __ATOMIC_RELAXED);
      return;
    }
  }
}

static void writer_main(void *arg) {
  pp_access_log *al = arg;
  uv_mutex_lock(&al->mu);
  for (;;) {
    while (!al->busy && !al->stop)
      uv_cond_wait(&al->cv, &al->mu);
    if (!al->busy) break; /* stop, and nothing left */
    int fd = al->out_fd, close_fd = al->out_close;
    uv_mutex_unlock(&al->mu); /* the loop may buffer meanwhile; `out` is ours */
    write_all(al, fd, al->out.data, al->out.len);
    if (close_fd > 2) close(close_fd);
    uv_mutex_lock(&al->mu);
    al->out.len = 0;
    al->out_close = -1;
    al->busy = 0;
    uv_cond_broadcast(&al->cv);
  }
  uv_mutex_unlock(&al->mu);
}

/* Hands the filled buffer to the writer if it is idle (swapping buffers, no copy); after a
 * reopen, the lines from then on go to the new descriptor. Never waits for the writer. */
static void hand_over(pp_access_log *al) {
  if (!al->fill.len && al->pending_fd < 0) return;
  uv_mutex_lock(&al->mu);
  if (!al->busy) {
    int old_fd = al->fill_fd;
    if (al->fill.len) {
      pp_buf t = al->out;
      al->out = al->fill;
      al->fill = t;
      al->out_fd = old_fd;
      al->out_close = -1;
      al->busy = 1;
    }
    if (al->pending_fd >= 0) {
      al->fill_fd = al->pending_fd;
      al->pending_fd = -1;
      if (al->busy)
        al->out_close = old_fd; /* after the old file's last batch */
      else if (old_fd > 2)
        close(old_fd);
    }
    if (al->busy) uv_cond_signal(&al->cv);
  }
  uv_mutex_unlock(&al->mu);
}

/* ---------------------------------------------------------------- the loop side */

void pp_access_log_record(void *ctx, const pp_access_rec *r) {
  pp_access_log *al = ctx;
  size_t before = al->fill.len;
  if (before >= PP_ACCESS_LOG_MAX) {
    al->st.dropped++;
    return;
  }
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  int64_t wall = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
  pp_access_log_format(al->format, r, wall, pp_now_ns(), &al->fill);
  al->st.lines++;
  if (al->fill.len >= PP_ACCESS_LOG_BATCH) hand_over(al);
}

static void on_flush_timer(uv_timer_t *t) {
  hand_over(t->data);
}

static int open_path(const char *path) {
  return open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
}

pp_access_log *pp_access_log_open(uv_loop_t *loop, const pp_config *cfg) {
  const char *path = cfg->access_log;
  int to_stdout = !strcmp(path, "-");
  int fd = to_stdout ? STDOUT_FILENO : open_path(path);
  if (fd < 0) {
    pp_log(cfg, 1, "-access-log: cannot open %s: %s", path, strerror(errno));
    return NULL;
  }
  pp_access_log *al = pp_xmalloc(sizeof *al);
  memset(al, 0, sizeof *al);
  al->cfg = cfg;
  al->format = cfg->access_log_format;
  al->path = to_stdout ? NULL : path;
  al->fill_fd = fd;
  al->pending_fd = -1;
  al->out_close = -1;
  pp_buf_init(&al->fill);
  pp_buf_init(&al->out);
  pp_buf_reserve(&al->fill, PP_ACCESS_LOG_BATCH + 4096);
  pp_buf_reserve(&al->out, PP_ACCESS_LOG_BATCH + 4096);
  uv_mutex_init(&al->mu);
  uv_cond_init(&al->cv);
  if (uv_thread_create(&al->thread, writer_main, al) != 0) {
    pp_log(cfg, 1, "-access-log: cannot start its writer thread");
    return NULL;
  }
  uv_timer_init(loop, &al->timer);
  al->timer.data = al;
  uv_timer_start(&al->timer, on_flush_timer, PP_ACCESS_LOG_FLUSH_MS, PP_ACCESS_LOG_FLUSH_MS);
  uv_unref((uv_handle_t *)&al->timer);
  return al;
}

void pp_access_log_reopen(pp_access_log *al) {
  if (!al->path) return;
  int fd = open_path(al->path);
  if (fd < 0) {
    pp_log(al->cfg, 1, "SIGHUP: cannot reopen the access log %s: %s (it goes on to the old file)",
           al->path, strerror(errno));
    return;
  }
  if (al->pending_fd > 2) close(al->pending_fd); /* two SIGHUPs before a hand-over */
  al->pending_fd = fd;
  hand_over(al); /* what is buffered goes to the old file; if the writer is busy, the switch
                  * happens at the next hand-over (until then lines go to the old file) */
  al->st.reopens++;
  pp_log(al->cfg, 0, "SIGHUP: reopened the access log %s", al->path);
}

void pp_access_log_close(pp_access_log *al) {
  for (int i = 0; i < 3; i++) { /* the batch in progress, then what is buffered, then the switch */
    uv_mutex_lock(&al->mu);
    while (al->busy)
      uv_cond_wait(&al->cv, &al->mu);
    uv_mutex_unlock(&al->mu);
    hand_over(al);
  }
  uv_mutex_lock(&al->mu);
  while (al->busy)
    uv_cond_wait(&al->cv, &al->mu);
  al->stop = 1;
  uv_cond_signal(&al->cv);
  uv_mutex_unlock(&al->mu);
  uv_thread_join(&al->thread);
  if (al->fill_fd > 2) close(al->fill_fd);
  uv_timer_stop(&al->timer); /* the struct stays: the process is exiting */
}

void pp_access_log_stats_get(const pp_access_log *al, pp_access_log_stats *out) {
  memset(out, 0, sizeof *out);
  if (!al) return;
  *out = al->st;
  out->bytes = __atomic_load_n(&al->st.bytes, __ATOMIC_RELAXED);
  out->write_errors = __atomic_load_n(&al->st.write_errors, __ATOMIC_RELAXED);
}

void pp_access_log_stats_json(const pp_access_log *al, json_t *root) {
  if (!al) {
    json_object_set_new(root, "access_log", json_null());
    return;
  }
  pp_access_log_stats st;
  pp_access_log_stats_get(al, &st);
  json_t *o = json_object();
  json_object_set_new(o, "path", json_string(al->cfg->access_log));
  json_object_set_new(o, "format",
                      json_string(al->format == PP_ACCESS_LOG_JSON     ? "json"
                                  : al->format == PP_ACCESS_LOG_COMMON ? "common"
                                                                       : "combined"));
  json_object_set_new(o, "lines", json_integer((json_int_t)st.lines));
  json_object_set_new(o, "dropped", json_integer((json_int_t)st.dropped));
  json_object_set_new(o, "bytes", json_integer((json_int_t)st.bytes));
  json_object_set_new(o, "write_errors", json_integer((json_int_t)st.write_errors));
  json_object_set_new(o, "reopens", json_integer((json_int_t)st.reopens));
  json_object_set_new(root, "access_log", o);
}

void pp_access_log_metrics(const pp_access_log *al, pp_buf *out) {
  if (!al) return;
  pp_access_log_stats st;
  pp_access_log_stats_get(al, &st);
  pp_prom_counter(out, "puma_plus_access_log_lines_total", "Access log lines formatted.", st.lines);
  pp_prom_counter(out, "puma_plus_access_log_dropped_total",
                  "Access log lines dropped because the buffer was full (slow disk).", st.dropped);
  pp_prom_counter(out, "puma_plus_access_log_write_errors_total",
                  "Access log writes that failed (their lines are lost).", st.write_errors);
}
