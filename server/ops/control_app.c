/* The control app (see control_app.h). The token comparison looks at the Authorization
 * header first, then at each token= parameter of the query. */
#include "server/ops/control_app.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "server/ops/dashboard.h"
#include "server/workers/phased.h"
#include "server/workers/wlink.h"
#include "server/ops/ops.h"

static int token_ok(pp_ops *op, const pp_control_request *rq, const char *query, size_t qlen) {
  const char *tok = op->cfg->control_token;
  if (!tok || !*tok) return 1;
  size_t tl = strlen(tok);
  const uint8_t *auth = rq->authorization;
  size_t alen = rq->authorization_len;
  if (auth && alen == 7 + tl && !strncasecmp((const char *)auth, "Bearer ", 7) &&
      !memcmp(auth + 7, tok, tl))
    return 1;
  for (size_t i = 0; i + 6 + tl <= qlen; i++) {
    if ((i == 0 || query[i - 1] == '&') && !strncmp(query + i, "token=", 6) &&
        !strncmp(query + i + 6, tok, tl) && (i + 6 + tl == qlen || query[i + 6 + tl] == '&'))
      return 1;
  }
  return 0;
}

static void text(pp_control_response *out, int status, const char *msg) {
  out->status = status;
  out->content_type = "text/plain";
  pp_buf_append_str(&out->body, msg);
}

/* The value of the query parameter `name` (NULL when absent; *len its length). */
static const char *query_param(const char *query, size_t qlen, const char *name, size_t *len) {
  size_t nl = strlen(name);
  for (size_t i = 0; i + nl + 1 <= qlen; i++) {
    if ((i == 0 || query[i - 1] == '&') && !strncmp(query + i, name, nl) && query[i + nl] == '=') {
      const char *v = query + i + nl + 1;
      const char *end = memchr(v, '&', qlen - (size_t)(v - query));
      *len = end ? (size_t)(end - v) : qlen - (size_t)(v - query);
      return v;
    }
  }
  return NULL;
}

/* POST /restart (restart 1): a hot restart (lifecycle.h), answered once the new server is
 * started (not yet ready); POST /phased-restart (restart 2): a phased restart (phased.h),
 * answered once the probe shepherd is started, with the phase it replaces; POST /stop
 * (restart 0): a drain as SIGTERM. All answer JSON; anything but POST is 405. */
static void lifecycle_verb(pp_ops *op, const pp_control_request *rq, int restart,
                           pp_control_response *out) {
  char body[640];
  if (!rq->post) {
    text(out, 405, "405 Method Not Allowed (POST)\n");
    out->allow = "POST";
    return;
  }
  out->content_type = "application/json";
  if (!restart) {
    snprintf(body, sizeof body, "{\"status\":\"ok\",\"action\":\"stop\",\"pid\":%d}\n",
             (int)getpid());
    out->status = *op->draining ? 409 : 202;
    if (*op->draining)
      snprintf(body, sizeof body, "{\"status\":\"error\",\"error\":\"already draining\"}\n");
    else
      op->hooks->stop_soon(op->srv);
  } else {
    char why[256];
    long pid = restart == 2 ? pp_phased_begin(op->workers, why, sizeof why)
                            : op->hooks->hot_restart(op->srv, why, sizeof why);
    out->status = pid > 0 ? 202 : 409;
    if (pid > 0 && restart == 2)
      snprintf(body, sizeof body,
               "{\"status\":\"ok\",\"action\":\"phased-restart\",\"phase\":%u,\"probe_pid\":%ld}\n",
               op->workers->reg.phase, pid);
    else if (pid > 0)
      snprintf(body, sizeof body,
               "{\"status\":\"ok\",\"action\":\"restart\",\"old_pid\":%d,\"new_pid\":%ld}\n",
               (int)getpid(), pid);
    else {
      char esc[2 * sizeof why];
      size_t n = 0;
      for (const char *p = why; *p && n + 2 < sizeof esc;
           p++) { /* JSON string: a path may hold quotes */
        if (*p == '"' || *p == '\\') esc[n++] = '\\';
        esc[n++] = (unsigned char)*p < 0x20 ? ' ' : *p;
      }
      esc[n] = 0;
      snprintf(body, sizeof body, "{\"status\":\"error\",\"error\":\"%s\"}\n", esc);
    }
  }
  pp_buf_append_str(&out->body, body);
}

/* A query parameter as a whole number 0..max (-1: absent or not one). */
static long query_u32(const char *query, size_t qlen, const char *name, unsigned long max) {
  size_t vlen;
  const char *v = query_param(query, qlen, name, &vlen);
  char tmp[16], *end;
  if (!v || !vlen || vlen >= sizeof tmp || v[0] < '0' || v[0] > '9') return -1;
  memcpy(tmp, v, vlen);
  tmp[vlen] = 0;
  unsigned long n = strtoul(tmp, &end, 10);
  return *end || n > max ? -1 : (long)n;
}

/* POST /slots?worker=N&count=K: worker index N's slot target becomes K, clamped to
 * [-min-threads, -max-slots] (pp_wlink_set_slots); without worker=, every worker's and later
 * ones' (pp_wlink_set_slots_all). docs/SERVER.md "Slots at run time". For tests and operators;
 * the autoscale glue calls the same functions. Answers JSON. */
static void slots_verb(pp_ops *op, const pp_control_request *rq, const char *query, size_t qlen,
                       pp_control_response *out) {
  char body[256];
  if (!rq->post) {
    text(out, 405, "405 Method Not Allowed (POST)\n");
    out->allow = "POST";
    return;
  }
  size_t vlen;
  int all = query_param(query, qlen, "worker", &vlen) == NULL;
  long index = all ? 0 : query_u32(query, qlen, "worker", PP_MAX_WORKERS - 1);
  long count = query_u32(query, qlen, "count", PP_MAX_SLOTS);
  if (index < 0 || count < 1) {
    text(out, 400,
         "400 Bad Request: POST /slots?count=K or /slots?worker=INDEX&count=K (K from 1)\n");
    return;
  }
  out->content_type = "application/json";
  if (all && (*op->draining || *op->stopping)) {
    out->status = 409;
    pp_buf_append_str(&out->body, "{\"status\":\"error\",\"error\":\"the server is draining\"}\n");
    return;
  }
  if (all) { /* every worker, and those that connect later */
    uint32_t set = pp_wlink_set_slots_all(op->workers, (uint32_t)count);
    out->status = 200;
    snprintf(body, sizeof body,
             "{\"status\":\"ok\",\"slots_per_worker\":%u,\"requested\":%ld,\"slots_ready\":%u}\n",
             set, count, op->workers->reg.slots_ready);
    pp_buf_append_str(&out->body, body);
    return;
  }
  pp_worker *wk = NULL;
  for (uint32_t i = 0; i < op->workers->reg.high && !wk; i++) {
    pp_worker *w = &op->workers->reg.workers[i];
    if (w->state == PP_WORKER_READY && w->index == (uint32_t)index) wk = w;
  }
  if (!wk) {
    out->status = 404;
    snprintf(body, sizeof body,
             "{\"status\":\"error\",\"error\":\"no serving worker with index %ld\"}\n", index);
    pp_buf_append_str(&out->body, body);
    return;
  }
  const char *why = "";
  int set = pp_wlink_set_slots(op->workers, wk, (uint32_t)count, &why);
  if (set < 0) {
    out->status = 409;
    snprintf(body, sizeof body, "{\"status\":\"error\",\"error\":\"%s\"}\n", why);
  } else {
    out->status = 200;
    snprintf(body, sizeof body,
             "{\"status\":\"ok\",\"worker\":%ld,\"pid\":%u,\"slots_target\":%d,"
             "\"requested\":%ld,\"slots\":%u}\n",
             index, wk->pid, set, count, wk->slots);
  }
  pp_buf_append_str(&out->body, body);
}

/* GET /dashboard and GET /stats/stream (dashboard.h). 1 if the path was one of them. */
static int dashboard_routes(pp_ops *op, const pp_control_request *rq, const char *url,
                            size_t path_len, const char *query, size_t qlen,
                            pp_control_response *out) {
  if (path_len == 10 && !memcmp(url, "/dashboard", 10)) {
    pp_buf_append(&out->body, pp_dashboard_html, pp_dashboard_html_len);
    out->status = 200;
    out->content_type = "text/html; charset=utf-8";
    return 1;
  }
  if (path_len != 13 || memcmp(url, "/stats/stream", 13)) return 0;
  uint32_t heartbeat = PP_DASH_HEARTBEAT_DEFAULT;
  size_t vlen;
  const char *v = query_param(query, qlen, "heartbeat", &vlen);
  if (v) {
    char tmp[16], *end;
    unsigned long n = 0;
    if (vlen && vlen < sizeof tmp) {
      memcpy(tmp, v, vlen);
      tmp[vlen] = 0;
      n = strtoul(tmp, &end, 10);
    }
    if (!vlen || vlen >= sizeof tmp || *end || tmp[0] < '0' || tmp[0] > '9' || n < 1 ||
        n > PP_DASH_HEARTBEAT_MAX) {
      char msg[128];
      snprintf(msg, sizeof msg, "400 Bad Request: heartbeat must be whole seconds, 1 to %d\n",
               PP_DASH_HEARTBEAT_MAX);
      text(out, 400, msg);
      return 1;
    }
    heartbeat = (uint32_t)n;
  }
  out->status = 200;
  out->content_type = "text/event-stream";
  if (rq->head_method) return 1; /* the head of the stream, no body */
  out->stream = 1;
  out->heartbeat_s = heartbeat;
  pp_dashboard_stream_prelude(op, &out->body);
  return 1;
}

/* /ready, the load balancer's health check (HAProxy `option httpchk GET /ready`, a Kubernetes
 * readinessProbe): 200 while the server takes requests and has a connected worker thread;
 * 503 while draining (after SIGTERM, so the balancer stops sending before the listeners have
 * finished closing) and while booting (no worker has connected yet). */
static void ready(pp_ops *op, pp_control_response *out) {
  if (*op->draining)
    text(out, 503, "draining\n");
  else if (op->workers->reg.slots_ready == 0)
    text(out, 503, "booting: no worker connected\n");
  else
    text(out, 200, "ready\n");
}

void pp_control_app(pp_ops *op, const pp_control_request *rq, pp_control_response *out) {
  memset(out, 0, sizeof *out);
  pp_buf_init(&out->body);
  const char *url = rq->target;
  size_t url_len = rq->target_len;
  const char *q = memchr(url, '?', url_len);
  size_t path_len = q ? (size_t)(q - url) : url_len;
  const char *query = q ? q + 1 : "";
  size_t qlen = q ? url_len - path_len - 1 : 0;
  int is_restart = path_len == 8 && !memcmp(url, "/restart", 8);
  int is_stop = path_len == 5 && !memcmp(url, "/stop", 5);
  int is_phased = path_len == 15 && !memcmp(url, "/phased-restart", 15);
  int is_slots = path_len == 6 && !memcmp(url, "/slots", 6);
  if (!token_ok(op, rq, query, qlen)) {
    text(out, 401, "401 Unauthorized: a control token is required\n");
  } else if (is_restart || is_stop || is_phased) {
    lifecycle_verb(op, rq, is_phased ? 2 : is_restart, out);
  } else if (is_slots) {
    slots_verb(op, rq, query, qlen, out);
  } else if (!rq->get_or_head) {
    text(out, 405, "405 Method Not Allowed\n");
    out->allow = "GET, HEAD";
  } else if (dashboard_routes(op, rq, url, path_len, query, qlen, out)) {
    /* answered */
  } else if (path_len == 6 && !memcmp(url, "/stats", 6)) {
    int pretty = qlen >= 8 && memmem(query, qlen, "pretty=1", 8) != NULL;
    pp_stats_json(op, pretty, &out->body);
    out->status = 200;
    out->content_type = "application/json";
  } else if (path_len == 14 && !memcmp(url, "/stats/history", 14)) {
    pp_dashboard_history_json(op, &out->body); /* the dashboard's charts, oldest tick first */
    pp_buf_append(&out->body, "\n", 1);
    out->status = 200;
    out->content_type = "application/json";
  } else if (path_len == 8 && !memcmp(url, "/metrics", 8)) {
    pp_stats_metrics(op, &out->body);
    out->status = 200;
    out->content_type = "text/plain; version=0.0.4";
  } else if (path_len == 6 && !memcmp(url, "/ready", 6)) {
    ready(op, out);
  } else {
    text(out, 404,
         "404 Not Found (try /stats, /stats?pretty=1, /metrics, /ready, /dashboard, /stats/stream, "
         "/stats/history, "
         "POST /restart, POST /phased-restart, POST /stop or POST /slots)\n");
  }
}
