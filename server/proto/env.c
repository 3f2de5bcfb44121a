/* The Rack env builder (see env.h). Workload: one call per request with a few dozen
 * fields; HTTP_* pairs are merged by name with a quadratic scan, which beats hashing at
 * this size and needs no memory. */
#include "server/proto/env.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "server/base/config.h"

void pp_env_put_pair(pp_buf *out, const char *key, size_t key_len, const char *value,
                     size_t value_len) {
  pp_buf_reserve(out, 8 + key_len + value_len);
  pp_buf_append_u32(out, (uint32_t)key_len);
  pp_buf_append(out, key, key_len);
  pp_buf_append_u32(out, (uint32_t)value_len);
  pp_buf_append(out, value, value_len);
}

static void put_cstr(pp_buf *out, const char *key, const char *value) {
  pp_env_put_pair(out, key, strlen(key), value, strlen(value));
}

static int name_is(const pp_env_field *f, const char *name) {
  size_t n = strlen(name);
  return f->name_len == n && strncasecmp(f->name, name, n) == 0;
}

/* -remote-addr-header (see pp_env_conninfo): the client address a trusted proxy forwarded. */
static void forwarded_addr(const pp_env_request *rq, const pp_env_conninfo *ci, const char **ra,
                           size_t *ra_len) {
  if (!pp_cidr_match(ci->trusted, ci->trusted_count, *ra, *ra_len)) return; /* spoofable */
  size_t hl = strlen(ci->addr_header);
  const char *pick = NULL, *left = NULL;
  size_t pick_len = 0, left_len = 0;
  /* the field lines from the last (the nearest proxy appends) to the first, each list from
   * its right end */
  for (uint32_t fi = rq->field_count; fi-- > 0 && !pick;) {
    const pp_env_field *f = &rq->fields[fi];
    if (f->name_len != hl || strncasecmp(f->name, ci->addr_header, hl)) continue;
    size_t end = f->value_len;
    while (!pick) {
      size_t start = end;
      while (start > 0 && f->value[start - 1] != ',')
        start--;
      size_t a = start, b = end;
      while (a < b && (f->value[a] == ' ' || f->value[a] == '\t'))
        a++;
      while (b > a && (f->value[b - 1] == ' ' || f->value[b - 1] == '\t'))
        b--;
      pp_cidr probe;
      if (pp_cidr_parse(&probe, f->value + a, b - a) < 0 || memchr(f->value + a, '/', b - a))
        return; /* not an address: the whole header is ignored */
      if (!pp_cidr_match(ci->trusted, ci->trusted_count, f->value + a, b - a))
        pick = f->value + a, pick_len = b - a;
      else
        left = f->value + a, left_len = b - a;
      if (start == 0) break;
      end = start - 1;
    }
  }
  if (pick)
    *ra = pick, *ra_len = pick_len;
  else if (left)
    *ra = left, *ra_len = left_len;
}

uint32_t pp_env_build(const pp_env_request *rq, const pp_env_conninfo *ci, uint64_t request_id,
                      pp_buf *out) {
  uint32_t pairs = 0;
  pp_env_put_pair(out, "REQUEST_METHOD", 14, rq->method, rq->method_len), pairs++;
  put_cstr(out, "SCRIPT_NAME", ""), pairs++;

  /* The request-target: origin-form "/p?q", or absolute-form "http://host/p?q". */
  const char *url = rq->target;
  size_t url_len = rq->target_len;
  const char *path = url;
  size_t path_len = url_len;
  if (url_len && url[0] != '/' && url_len > 7) {
    const char *scheme_end = memchr(url, ':', url_len);
    if (scheme_end && scheme_end + 3 <= url + url_len && scheme_end[1] == '/' &&
        scheme_end[2] == '/') {
      const char *host = scheme_end + 3;
      const char *slash = memchr(host, '/', (size_t)(url + url_len - host));
      path = slash ? slash : url + url_len;
      path_len = (size_t)(url + url_len - path);
    }
  }
  const char *hash = memchr(path, '#', path_len);
  if (hash) path_len = (size_t)(hash - path);
  const char *q = memchr(path, '?', path_len);
  size_t pinfo_len = q ? (size_t)(q - path) : path_len;
  /* the asterisk-form of OPTIONS * is PATH_INFO "*" (Rack 3.2 SPEC; rack/lint.rb) */
  pp_env_put_pair(out, "PATH_INFO", 9, path, pinfo_len), pairs++;
  if (q)
    pp_env_put_pair(out, "QUERY_STRING", 12, q + 1, path_len - pinfo_len - 1), pairs++;
  else
    put_cstr(out, "QUERY_STRING", ""), pairs++;

  /* SERVER_NAME / SERVER_PORT from Host ("name", "name:port", "[v6]:port"). */
  const char *sname = ci->server_name, *sport = ci->server_port;
  size_t sname_len = strlen(sname), sport_len = strlen(sport);
  if (rq->host_index >= 0) {
    const char *v = rq->fields[rq->host_index].value;
    size_t n = rq->fields[rq->host_index].value_len;
    if (n) {
      const char *colon = NULL;
      if (v[0] == '[') {
        const char *close = memchr(v, ']', n);
        if (close && close + 1 < v + n && close[1] == ':') colon = close + 1;
      } else {
        colon = memchr(v, ':', n);
      }
      if (colon) {
        sname = v, sname_len = (size_t)(colon - v);
        sport = colon + 1, sport_len = (size_t)(v + n - colon - 1);
      } else {
        sname = v, sname_len = n;
        sport = strcmp(ci->url_scheme, "https") == 0 ? "443" : "80";
        sport_len = strlen(sport);
      }
    }
  }
  pp_env_put_pair(out, "SERVER_NAME", 11, sname, sname_len), pairs++;
  pp_env_put_pair(out, "SERVER_PORT", 11, sport, sport_len), pairs++;
  put_cstr(out, "SERVER_PROTOCOL", rq->protocol), pairs++;
  const char *ra = ci->remote_addr;
  size_t ra_len = strlen(ra);
  if (ci->addr_header) forwarded_addr(rq, ci, &ra, &ra_len);
  pp_env_put_pair(out, "REMOTE_ADDR", 11, ra, ra_len), pairs++;
  put_cstr(out, "rack.url_scheme", ci->url_scheme), pairs++;
  if (strcmp(ci->url_scheme, "https") == 0) put_cstr(out, "HTTPS", "on"), pairs++;

  if (rq->content_type_index >= 0) {
    const pp_env_field *f = &rq->fields[rq->content_type_index];
    pp_env_put_pair(out, "CONTENT_TYPE", 12, f->value, f->value_len), pairs++;
  }
  if (rq->has_content_length) {
    char num[24];
    size_t n = pp_fmt_u64(num, rq->content_length);
    pp_env_put_pair(out, "CONTENT_LENGTH", 14, num, n), pairs++;
  }

  /* HTTP_* pairs: one per distinct name, in order of first appearance, repeated values
   * joined. Names with '_' are dropped (they would alias a dashed name, as nginx does). */
  uint8_t done[PP_ENV_MAX_FIELDS] = {0};
  uint32_t count = rq->field_count < PP_ENV_MAX_FIELDS ? rq->field_count : PP_ENV_MAX_FIELDS;
  int request_start_seen = 0;
  for (uint32_t i = 0; i < count; i++) {
    const pp_env_field *fi = &rq->fields[i];
    if (done[i]) continue;
    if (name_is(fi, "content-type") || name_is(fi, "content-length")) continue;
    if (memchr(fi->name, '_', fi->name_len)) continue;
    if (fi->name_len == 15 && name_is(fi, "x-request-start")) {
      request_start_seen = 1;
      if (ci->request_start == 1) continue; /* replace: the server's alone */
    }
    int cookie = name_is(fi, "cookie");
    /* Key: HTTP_ + upper-cased name with '-' -> '_'. */
    size_t key_len = 5 + fi->name_len;
    pp_buf_reserve(out, 8 + key_len);
    pp_buf_append_u32(out, (uint32_t)key_len);
    pp_buf_append(out, "HTTP_", 5);
    uint8_t *key = out->data + out->len; /* room reserved above */
    for (size_t k = 0; k < fi->name_len; k++) {
      uint8_t c = (uint8_t)fi->name[k];
      key[k] = c == '-' ? '_' : (c >= 'a' && c <= 'z') ? (uint8_t)(c - 32) : c;
    }
    out->len += fi->name_len;
    size_t len_at = out->len;
    pp_buf_append_u32(out, 0);
    size_t value_start = out->len;
    for (uint32_t j = i; j < count; j++) {
      const pp_env_field *fj = &rq->fields[j];
      if (j != i && (done[j] || fj->name_len != fi->name_len ||
                     strncasecmp(fj->name, fi->name, fi->name_len) != 0))
        continue;
      done[j] = 1;
      if (out->len > value_start) pp_buf_append(out, cookie ? "; " : ", ", 2);
      pp_buf_append(out, fj->value, fj->value_len);
    }
    uint32_t vlen = (uint32_t)(out->len - value_start);
    out->data[len_at] = (uint8_t)(vlen >> 24);
    out->data[len_at + 1] = (uint8_t)(vlen >> 16);
    out->data[len_at + 2] = (uint8_t)(vlen >> 8);
    out->data[len_at + 3] = (uint8_t)vlen;
    pairs++;
  }

  if (ci->request_start_missing)
    *ci->request_start_missing =
        ci->request_start == 1 || (ci->request_start == 0 && !request_start_seen);
  pp_env_put_pair(out, "REQUEST_URI", 11, url, url_len), pairs++;
  char id[24];
  size_t n = pp_fmt_u64(id, request_id);
  pp_env_put_pair(out, "puma_plus.request_id", 20, id, n), pairs++;
  return pairs;
}
