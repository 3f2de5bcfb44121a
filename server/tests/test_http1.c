/* Tests for server/http1.c: the Rack env of PROTOCOL.md, byte-at-a-time feeding, pipelining,
 * chunked bodies, Expect, keep-alive rules, and every refusal of issue 4 with its status. */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include "server/http1.h"
#include "server/wire.h"

typedef struct owner {
  int headers, completes;
  uint32_t header_count; /* h->header_count when the last message completed */
  pp_buf body;
  char env[4096]; /* "K=V\n" per pair of the last request */
  int expect_continue, keep_alive;
} owner;

static void env_text(pp_h1 *h, owner *o) {
  pp_buf env;
  pp_buf_init(&env);
  pp_h1_conninfo ci = {"10.0.0.1", "listen.host", "9292", "http"};
  uint32_t count = pp_h1_build_env(h, &ci, 7, &env);
  pp_wire_pairs pairs = {env.data, env.len, count};
  pp_wire_pairs_iter it;
  pp_wire_pairs_iter_init(&it, &pairs);
  const uint8_t *k, *v;
  uint32_t kl, vl;
  o->env[0] = 0;
  size_t at = 0;
  while (pp_wire_pairs_next(&it, &k, &kl, &v, &vl))
    at += (size_t)snprintf(o->env + at, sizeof o->env - at, "%.*s=%.*s\n", (int)kl, k, (int)vl, v);
  pp_buf_dispose(&env);
}

static int on_headers(pp_h1 *h) {
  owner *o = h->data;
  o->headers++;
  o->expect_continue = h->expect_continue;
  env_text(h, o);
  return 0;
}
static int on_body(pp_h1 *h, const uint8_t *d, size_t n) {
  owner *o = h->data;
  pp_buf_append(&o->body, d, n);
  return 0;
}
static int on_complete(pp_h1 *h) {
  owner *o = h->data;
  o->completes++;
  o->keep_alive = h->keep_alive;
  o->header_count = h->header_count;
  return 0;
}
static const pp_h1_callbacks cbs = {on_headers, on_body, on_complete};

/* Parses text fed `step` bytes at a time (0 = all at once). Returns 0 when every message
 * completed, or the refusal status. */
static int parse(const char *text, size_t step, const pp_h1_limits *lim, owner *o) {
  pp_h1_limits def;
  pp_h1_limits_default(&def);
  memset(o, 0, sizeof *o);
  pp_buf_init(&o->body);
  pp_h1 h;
  pp_h1_init(&h, &cbs, lim ? lim : &def, o);
  size_t len = strlen(text), pos = 0, end = 0;
  int status = 0;
  while (pos < len) {
    if (end <= pos) end = step ? (pos + step < len ? pos + step : len) : len;
    size_t used;
    pp_h1_result r = pp_h1_execute(&h, (const uint8_t *)text + pos, end - pos, &used);
    pos += used;
    if (r == PP_H1_ERROR) {
      status = h.status;
      break;
    }
    if (r == PP_H1_PAUSED) pp_h1_resume(&h);
  }
  pp_h1_dispose(&h);
  return status;
}

static void test_env_get(void) {
  owner o;
  const char *req = "GET /a%20b/c?x=1&y=2 HTTP/1.1\r\nHost: example.org:8080\r\n"
                    "User-Agent: t\r\nAccept: a\r\naccept: b\r\nCookie: c=1\r\nCookie: d=2\r\n"
                    "X_Spoof: no\r\nX-Forwarded-For: 1.2.3.4\r\n\r\n";
  const char *want = "REQUEST_METHOD=GET\nSCRIPT_NAME=\nPATH_INFO=/a%20b/c\nQUERY_STRING=x=1&y=2\n"
                     "SERVER_NAME=example.org\nSERVER_PORT=8080\nSERVER_PROTOCOL=HTTP/1.1\n"
                     "REMOTE_ADDR=10.0.0.1\nrack.url_scheme=http\nHTTP_HOST=example.org:8080\n"
                     "HTTP_USER_AGENT=t\nHTTP_ACCEPT=a, b\nHTTP_COOKIE=c=1; d=2\n"
                     "HTTP_X_FORWARDED_FOR=1.2.3.4\nREQUEST_URI=/a%20b/c?x=1&y=2\n"
                     "puma_plus.request_id=7\n";
  size_t steps[] = {0, 1, 2, 3, 7, 13};
  for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
    CU_ASSERT_EQUAL(parse(req, steps[i], NULL, &o), 0);
    CU_ASSERT_EQUAL(o.completes, 1);
    CU_ASSERT_STRING_EQUAL(o.env, want);
    if (strcmp(o.env, want)) fprintf(stderr, "step %zu:\n%s", steps[i], o.env);
    CU_ASSERT_EQUAL(o.keep_alive, 1);
    pp_buf_dispose(&o.body);
  }
}

static void test_env_post_and_forms(void) {
  owner o;
  CU_ASSERT_EQUAL(parse("POST /echo HTTP/1.1\r\nHost: h\r\nContent-Type: text/plain\r\n"
                        "Content-Length: 5\r\n\r\nhello",
                        1, NULL, &o),
                  0);
  CU_ASSERT(strstr(o.env, "CONTENT_TYPE=text/plain\nCONTENT_LENGTH=5\nHTTP_HOST=h\n") != NULL);
  CU_ASSERT(strstr(o.env, "HTTP_CONTENT") == NULL);
  CU_ASSERT(strstr(o.env, "SERVER_NAME=h\nSERVER_PORT=80\n") != NULL);
  CU_ASSERT(o.body.len == 5 && memcmp(o.body.data, "hello", 5) == 0);
  pp_buf_dispose(&o.body);

  /* absolute-form, IPv6 Host, fragment dropped */
  CU_ASSERT_EQUAL(
      parse("GET http://h.example/p?q=1 HTTP/1.1\r\nHost: [::1]:9\r\n\r\n", 0, NULL, &o), 0);
  CU_ASSERT(strstr(o.env, "PATH_INFO=/p\nQUERY_STRING=q=1\nSERVER_NAME=[::1]\nSERVER_PORT=9\n") !=
            NULL);
  CU_ASSERT(strstr(o.env, "REQUEST_URI=http://h.example/p?q=1\n") != NULL);
  pp_buf_dispose(&o.body);

  /* HTTP/1.0 without Host: listener name; closes by default */
  CU_ASSERT_EQUAL(parse("HEAD / HTTP/1.0\r\n\r\n", 0, NULL, &o), 0);
  CU_ASSERT(strstr(o.env, "REQUEST_METHOD=HEAD\n") != NULL);
  CU_ASSERT(
      strstr(o.env, "SERVER_NAME=listen.host\nSERVER_PORT=9292\nSERVER_PROTOCOL=HTTP/1.0\n") !=
      NULL);
  CU_ASSERT_EQUAL(o.keep_alive, 0);
  pp_buf_dispose(&o.body);

  CU_ASSERT_EQUAL(parse("GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", 0, NULL, &o), 0);
  CU_ASSERT_EQUAL(o.keep_alive, 0);
  pp_buf_dispose(&o.body);
  CU_ASSERT_EQUAL(parse("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", 0, NULL, &o), 0);
  CU_ASSERT_EQUAL(o.keep_alive, 1);
  pp_buf_dispose(&o.body);
  /* Upgrade: answered as HTTP, never switched; the connection closes after it */
  CU_ASSERT_EQUAL(parse("GET /ws HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\n"
                        "Upgrade: websocket\r\n\r\n",
                        0, NULL, &o),
                  0);
  CU_ASSERT_EQUAL(o.completes, 1);
  CU_ASSERT_EQUAL(o.keep_alive, 0);
  pp_buf_dispose(&o.body);
}

static void test_chunked_and_expect(void) {
  owner o;
  const char *req = "POST /u HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
                    "Expect: 100-continue\r\n\r\n5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n";
  for (size_t step = 0; step < 4; step++) {
    CU_ASSERT_EQUAL(parse(req, step, NULL, &o), 0);
    CU_ASSERT_EQUAL(o.completes, 1);
    CU_ASSERT_EQUAL(o.expect_continue, 1);
    CU_ASSERT(o.body.len == 11 && memcmp(o.body.data, "hello world", 11) == 0);
    CU_ASSERT(strstr(o.env, "CONTENT_LENGTH") == NULL);
    pp_buf_dispose(&o.body);
  }
  /* Transfer-Encoding is case-insensitive */
  CU_ASSERT_EQUAL(parse("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: Chunked\r\n\r\n0\r\n\r\n",
                        0, NULL, &o),
                  0);
  pp_buf_dispose(&o.body);
}

static void test_pipelining(void) {
  const char *two = "GET /1 HTTP/1.1\r\nHost: h\r\n\r\nGET /2 HTTP/1.1\r\nHost: h\r\n\r\n";
  pp_h1_limits lim;
  pp_h1_limits_default(&lim);
  owner o;
  memset(&o, 0, sizeof o);
  pp_h1 h;
  pp_h1_init(&h, &cbs, &lim, &o);
  size_t used;
  CU_ASSERT_EQUAL(pp_h1_execute(&h, (const uint8_t *)two, strlen(two), &used), PP_H1_PAUSED);
  CU_ASSERT_EQUAL(used, strlen(two) / 2);
  CU_ASSERT(strstr(o.env, "PATH_INFO=/1\n") != NULL);
  pp_h1_resume(&h);
  size_t used2;
  CU_ASSERT_EQUAL(pp_h1_execute(&h, (const uint8_t *)two + used, strlen(two) - used, &used2),
                  PP_H1_PAUSED);
  CU_ASSERT_EQUAL(used + used2, strlen(two));
  CU_ASSERT(strstr(o.env, "PATH_INFO=/2\n") != NULL);
  CU_ASSERT_EQUAL(o.completes, 2);
  CU_ASSERT_EQUAL(h.messages, 2);
  pp_h1_dispose(&h);
}

static void test_rejections(void) {
  static char long_uri[9000 + 64], big_header[40000], many[120 * 16 + 64];
  strcpy(long_uri, "GET /");
  memset(long_uri + 5, 'a', 9000);
  strcpy(long_uri + 9005, " HTTP/1.1\r\nHost: h\r\n\r\n");
  strcpy(big_header, "GET / HTTP/1.1\r\nHost: h\r\nX-Big: ");
  size_t at = strlen(big_header);
  memset(big_header + at, 'b', 36000);
  strcpy(big_header + at + 36000, "\r\n\r\n");
  strcpy(many, "GET / HTTP/1.1\r\nHost: h\r\n");
  for (int i = 0; i < 120; i++)
    sprintf(many + strlen(many), "X-H%d: v\r\n", i);
  strcat(many, "\r\n");

  struct {
    const char *name, *req;
    int status;
  } cases[] = {
      {"CL+TE",
       "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
       400},
      {"TE+CL",
       "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
       400},
      {"duplicate CL",
       "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc", 400},
      {"CL list", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3, 3\r\n\r\nabc", 400},
      {"CL not a number", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: abc\r\n\r\n", 400},
      {"obs-fold", "GET / HTTP/1.1\r\nHost: h\r\nX-A: one\r\n two\r\n\r\n", 400},
      {"TE gzip", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
      {"TE gzip, chunked", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
       501},
      {"TE twice",
       "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: "
       "chunked\r\n\r\n",
       501},
      {"no Host in 1.1", "GET / HTTP/1.1\r\n\r\n", 400},
      {"two Hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400},
      {"Expect other", "POST / HTTP/1.1\r\nHost: h\r\nExpect: fancy\r\nContent-Length: 1\r\n\r\nx",
       417},
      {"CONNECT", "CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n", 501},
      {"garbage", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 400},
      {"HTTP/0.9 request line", "GET /\r\n\r\n", 505},
      {"missing request-target", "GET  HTTP/1.1\r\nHost: h\r\n\r\n", 400},
      {"space before colon", "GET / HTTP/1.1\r\nHost: h\r\nContent-Length : 0\r\n\r\n", 400},
      {"space in header name", "GET / HTTP/1.1\r\nHost: h\r\nBad Name: v\r\n\r\n", 400},
      {"bad chunk size", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
       400},
      {"body over limit (CL)", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 100\r\n\r\n", 413},
      {"body over limit (chunked)",
       "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: "
       "chunked\r\n\r\n40\r\n0123456789012345678901234567890123456789012345678901234567890123\r\n0"
       "\r\n\r\n",
       413},
      {"URI too long", long_uri, 414},
      {"header section too large", big_header, 431},
      {"too many headers", many, 431},
  };
  pp_h1_limits lim;
  pp_h1_limits_default(&lim);
  lim.max_body_bytes = 50;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    for (size_t step = 0; step < 2; step++) {
      owner o;
      int st = parse(cases[i].req, step ? 1 : 0, &lim, &o);
      if (st != cases[i].status)
        fprintf(stderr, "case %s (step %zu): got %d want %d\n", cases[i].name, step, st,
                cases[i].status);
      CU_ASSERT_EQUAL(st, cases[i].status);
      CU_ASSERT_EQUAL(o.completes, 0);
      pp_buf_dispose(&o.body);
    }
  }
  CU_ASSERT_STRING_EQUAL(pp_h1_reason_phrase(431), "Request Header Fields Too Large");
}

/* Mutation fuzzing, deterministic (fixed seed): byte flips, insertions and truncations of
 * valid requests, fed in random pieces. The parser must end in a defined state (need more,
 * paused, or an error with a 4xx/5xx status) and never touch memory out of bounds (ASan). */
static void test_mutations_never_crash(void) {
  static const char *seeds[] = {
      "GET /a?b=c HTTP/1.1\r\nHost: h\r\nCookie: a=1\r\n\r\n",
      "POST /e HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello",
      "POST /u HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
      "GET / HTTP/1.0\r\n\r\nGET /2 HTTP/1.1\r\nHost: x\r\n\r\n",
  };
  const char alphabet[] = "\r\n :;,\t0123456789abcdefGET/HTTP?=&%\x00\x7f\xff";
  uint64_t rng = 0x9e3779b97f4a7c15ull;
#define NEXT() (rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17, rng)
  pp_h1_limits lim;
  pp_h1_limits_default(&lim);
  lim.max_body_bytes = 64;
  uint8_t buf[512];
  int errors = 0, completes = 0;
  for (int iter = 0; iter < 20000; iter++) {
    const char *seed = seeds[NEXT() % 4];
    size_t len = strlen(seed);
    memcpy(buf, seed, len);
    int muts = 1 + (int)(NEXT() % 4);
    for (int m = 0; m < muts; m++) {
      size_t at = NEXT() % len;
      switch (NEXT() % 3) {
      case 0: buf[at] = (uint8_t)alphabet[NEXT() % (sizeof alphabet - 1)]; break;
      case 1:
        if (len < sizeof buf - 1) {
          memmove(buf + at + 1, buf + at, len - at);
          buf[at] = (uint8_t)alphabet[NEXT() % (sizeof alphabet - 1)];
          len++;
        }
        break;
      default: len = at ? at : 1; break;
      }
    }
    owner o;
    memset(&o, 0, sizeof o);
    pp_buf_init(&o.body);
    pp_h1 h;
    pp_h1_init(&h, &cbs, &lim, &o);
    size_t pos = 0;
    while (pos < len) {
      size_t piece = 1 + NEXT() % 16;
      if (piece > len - pos) piece = len - pos;
      size_t used = 0;
      pp_h1_result r = pp_h1_execute(&h, buf + pos, piece, &used);
      CU_ASSERT(used <= piece);
      pos += used;
      if (r == PP_H1_ERROR) {
        CU_ASSERT(h.status >= 400 && h.status <= 505);
        errors++;
        break;
      }
      if (r == PP_H1_PAUSED) pp_h1_resume(&h), completes++;
    }
    pp_h1_dispose(&h);
    pp_buf_dispose(&o.body);
  }
#undef NEXT
  CU_ASSERT(errors > 1000);    /* the mutations do reach the refusal paths */
  CU_ASSERT(completes > 1000); /* and many still parse */
}

/* One parse of text[0..len) handed to the parser in two reads split at `cut` (or byte by byte
 * when cut == SIZE_MAX), resuming after each completed message as the server does. Returns
 * the refusal status (0: none), with the completed message count in *completes. A PAUSED
 * that completed no message is counted in *stalls and ends the parse (the old parser
 * returned it forever, which hangs the server's read loop). */
static int parse_cut(const char *text, size_t len, size_t cut, int *completes, int *stalls) {
  pp_h1_limits lim;
  pp_h1_limits_default(&lim);
  owner o;
  memset(&o, 0, sizeof o);
  pp_buf_init(&o.body);
  pp_h1 h;
  pp_h1_init(&h, &cbs, &lim, &o);
  size_t pos = 0, fed = 0;
  int status = 0;
  *stalls = 0;
  while (pos < len && !status && !*stalls) {
    if (cut == (size_t)-1)
      fed = fed + 1 < len ? fed + 1 : len;
    else
      fed = fed < cut ? cut : len;
    while (pos < fed) {
      size_t used = 0;
      uint64_t before = h.messages;
      pp_h1_result r = pp_h1_execute(&h, (const uint8_t *)text + pos, fed - pos, &used);
      pos += used;
      if (r == PP_H1_ERROR) {
        status = h.status;
        break;
      }
      if (r == PP_H1_NEED_MORE) break;
      if (h.messages == before) {
        (*stalls)++;
        break;
      }
      pp_h1_resume(&h);
    }
  }
  *completes = o.completes;
  pp_h1_dispose(&h);
  pp_buf_dispose(&o.body);
  return status;
}

/* Every split of `text` into two reads, and byte by byte, gives the same outcome, which is
 * `want_status` after `want_completes` messages, and the parser never stalls. */
static void check_every_split(const char *name, const char *text, int want_status,
                              int want_completes) {
  size_t len = strlen(text);
  for (size_t cut = 0; cut <= len + 1; cut++) {
    size_t c = cut == len + 1 ? (size_t)-1 : cut;
    int completes = 0, stalls = 0;
    int st = parse_cut(text, len, c, &completes, &stalls);
    if (st != want_status || completes != want_completes || stalls)
      fprintf(stderr, "%s: cut %zd: status %d (want %d), %d messages (want %d), %d stalls\n", name,
              c == (size_t)-1 ? (ssize_t)-1 : (ssize_t)c, st, want_status, completes,
              want_completes, stalls);
    CU_ASSERT_EQUAL(st, want_status);
    CU_ASSERT_EQUAL(completes, want_completes);
    CU_ASSERT_EQUAL(stalls, 0);
  }
}

/* Fuzz finding 1 (fuzz/regressions/http1/bare-cr-ends-header-section*): llhttp took CR + any
 * byte as the end of the header section while the obs-fold scan did not, so one read gave 400
 * and byte-by-byte reads served a request. A bare CR in the head is now 400 however split. */
static void test_bare_cr_is_refused_however_split(void) {
  check_every_split("bare CR ends section", "GET / HTTP/1.1\r\nHost: a\r\n\rX\n\t", 400, 0);
  check_every_split("bare CR then request",
                    "GET / HTTP/1.1\r\nHost: a\r\n\rGET / HTTP/1.1\r\nHost: a\r\n\r\n", 400, 0);
  check_every_split("fuzzer minimum", "GET / HTTP/1.0\n\r\xff\n\t", 400, 0);
  check_every_split("bare CR in a value", "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\rc\r\n\r\n", 400, 0);
  check_every_split("bare CR in the request line", "GET /\r HTTP/1.1\r\nHost: a\r\n\r\n", 400, 0);
  /* a refusal after a served request: the second request's head has the bare CR */
  check_every_split("second request",
                    "GET /1 HTTP/1.1\r\nHost: a\r\n\r\nGET /2 HTTP/1.1\r\nHost: a\r\n\rX\r\n\r\n",
                    400, 1);
  /* CR in a body is data */
  check_every_split("CR in body", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\na\rb", 0,
                    1);
}

/* Fuzz finding 5 (fuzz/regressions/http1/upgrade-then-pipelined-*): after an Upgrade request
 * llhttp answered HPE_PAUSED_UPGRADE with nothing consumed on every later call, and
 * pp_h1_execute passed it on as PAUSED without a completed message, so a read loop that
 * feeds the rest spun forever. The request itself is served (keep_alive 0: the server closes
 * after it); any byte after it is a refusal, never a stall. */
static void test_bytes_after_upgrade_never_stall(void) {
  const char *up = "GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: x\r\n\r\n";
  char text[256];
  snprintf(text, sizeof text, "%sX", up);
  check_every_split("upgrade + byte", text, 400, 1);
  snprintf(text, sizeof text, "%sGET / HTTP/1.1\r\nHost: a\r\n\r\n", up);
  check_every_split("upgrade + request", text, 400, 1);
  check_every_split("upgrade alone", up, 0, 1);
}

/* Trailer fields of a chunked body are read and discarded: the header rules (duplicate Host,
 * a second Content-Length) do not apply to them, they are not added to the request's headers,
 * the next pipelined request is served, and their size is bounded like the head's (431). */
static void test_trailers_are_discarded(void) {
  const char *req = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "5\r\nhello\r\n0\r\nHost: b\r\nContent-Length: 9\r\nX-T: 1\r\n\r\n";
  check_every_split("trailers", req, 0, 1);
  char two[512];
  snprintf(two, sizeof two, "%sGET /2 HTTP/1.1\r\nHost: a\r\n\r\n", req);
  check_every_split("trailers then a pipelined request", two, 0, 2);
  owner o;
  CU_ASSERT_EQUAL(parse(req, 0, NULL, &o), 0);
  CU_ASSERT_EQUAL(o.header_count, 2); /* Host and Transfer-Encoding; no trailer */
  CU_ASSERT(o.body.len == 5 && memcmp(o.body.data, "hello", 5) == 0);
  pp_buf_dispose(&o.body);
  pp_h1_limits lim;
  pp_h1_limits_default(&lim);
  lim.max_header_bytes = 256;
  char big[1024];
  snprintf(
      big, sizeof big,
      "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-Big: %0300d\r\n\r\n",
      0);
  CU_ASSERT_EQUAL(parse(big, 0, &lim, &o), 431);
  pp_buf_dispose(&o.body);
  CU_ASSERT_EQUAL(parse(big, 1, &lim, &o), 431);
  pp_buf_dispose(&o.body);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("http1", NULL, NULL);
  CU_add_test(s, "env of a GET, fed in pieces of every size", test_env_get);
  CU_add_test(s, "env of POST, absolute-form, HTTP/1.0, keep-alive", test_env_post_and_forms);
  CU_add_test(s, "chunked body and Expect: 100-continue", test_chunked_and_expect);
  CU_add_test(s, "pipelined requests pause one at a time", test_pipelining);
  CU_add_test(s, "every refusal with its status", test_rejections);
  CU_add_test(s, "20000 mutated requests never crash", test_mutations_never_crash);
  CU_add_test(s, "a bare CR in the head is 400 however the bytes are split",
              test_bare_cr_is_refused_however_split);
  CU_add_test(s, "bytes after an Upgrade request are refused, never a stall",
              test_bytes_after_upgrade_never_stall);
  CU_add_test(s, "chunked trailers are read and discarded, bounded", test_trailers_are_discarded);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failures = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}
