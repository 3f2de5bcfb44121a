/* puma-plus's /stats document read for pp-bench (harness.h): a number by key, and the fields the
 * sampler records. Pure: a string in, numbers out (fuzzed by fuzz/fuzz_benchstats.c). */
#include "bench/harness/harness.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <llhttp.h>
#include <uv.h>

/* ---- JSON ---- */

static bool find_number(json_t *j, const char *key, double *out) {
  if (json_is_object(j)) {
    json_t *v = json_object_get(j, key);
    if (v && json_is_number(v)) {
      *out = json_number_value(v);
      return true;
    }
    const char *k;
    json_t *child;
    json_object_foreach(j, k, child) {
      if (find_number(child, key, out)) return true;
    }
  } else if (json_is_array(j)) {
    size_t i;
    json_t *child;
    json_array_foreach(j, i, child) {
      if (find_number(child, key, out)) return true;
    }
  }
  return false;
}

bool pb_json_find_number(const char *json, const char *key, double *out) {
  json_error_t e;
  json_t *root = json_loads(json, 0, &e);
  if (!root) return false;
  bool ok = find_number(root, key, out);
  json_decref(root);
  return ok;
}

bool pb_stats_parse(const char *json, pb_server_stats *out) {
  json_error_t e;
  json_t *root = json_loads(json, 0, &e);
  if (!root) return false;
  out->workers = out->queue_p95_ms = out->queue_p95_lifetime_ms = out->queue_depth = -1;
  out->workers_parked = out->activations = -1;
  out->activation_count = out->activation_p50_ms = out->activation_p99_ms = -1;
  out->activation_max_ms = -1;
  out->activation_recent_n = 0;
  json_t *v = json_object_get(root, "workers");
  if (json_is_number(v)) out->workers = json_number_value(v);
  json_t *co = json_object_get(root, "controller");
  v = json_object_get(co, "workers_standby");
  if (json_is_number(v)) out->workers_parked = json_number_value(v);
  v = json_object_get(co, "activations");
  if (json_is_number(v)) out->activations = json_number_value(v);
  json_t *act = json_object_get(co, "activation");
  if (json_is_object(act)) {
    v = json_object_get(act, "count");
    if (json_is_number(v)) out->activation_count = json_number_value(v);
    v = json_object_get(act, "p50_ms");
    if (json_is_number(v)) out->activation_p50_ms = json_number_value(v);
    v = json_object_get(act, "p99_ms");
    if (json_is_number(v)) out->activation_p99_ms = json_number_value(v);
    v = json_object_get(act, "max_ms");
    if (json_is_number(v)) out->activation_max_ms = json_number_value(v);
    json_t *recent = json_object_get(act, "recent_ms");
    size_t i;
    json_t *x;
    json_array_foreach(recent, i, x) {
      if (out->activation_recent_n < 32 && json_is_number(x))
        out->activation_recent_ms[out->activation_recent_n++] = json_number_value(x);
    }
  }
  json_t *q = json_object_get(root, "queue");
  if (json_is_object(q)) {
    v = json_object_get(q, "depth");
    if (json_is_number(v)) out->queue_depth = json_number_value(v);
    v = json_object_get(json_object_get(q, "window"), "p95_ms");
    if (json_is_number(v)) out->queue_p95_ms = json_number_value(v);
    v = json_object_get(json_object_get(q, "lifetime"), "p95_ms");
    if (json_is_number(v)) out->queue_p95_lifetime_ms = json_number_value(v);
  }
  json_decref(root);
  return true;
}
