/* Tests for server/proto/http1.c: the Rack env of PROTOCOL.md, byte-at-a-time feeding, pipelining,
 * chunked bodies, Expect, keep-alive rules, and every refusal of issue 4 with its status. */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include "server/proto/http1.h"
#include "server/proto/wire.h"

typedef struct owner {
  int headers, completes;
  uint32_t header_count; /* h->header_count when the last message completed */
  pp_buf body;
  char env[4096]; /* "K=V\n" per pair of the last request */
  int expect_continue, keep_alive;
} owner;

static int g_request_start;         /* the -request-start mode env_text passes */
static int g_request_start_missing; /* what pp_h1_build_env said of the last request */

static void env_text(pp_h1 *h, owner *o) {
  pp_buf env;
  pp_buf_init(&env);
  pp_h1_conninfo ci = {
      "10.0.0.1", "listen.host", "9292", "http", g_request_start, &g_request_start_missing,
      NULL,       NULL,          0};
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

  /* absolute-form with an IPv6 authority, fragment dropped. RFC 9112 §3.2.2: the target's
   * authority is the host and Host is ignored (before issue 11 the Host field won: this case
   * sent Host: [::1]:9 with http://h.example/, and SERVER_NAME was [::1]). */
  CU_ASSERT_EQUAL(
      parse("GET http://[::1]:9/p?q=1 HTTP/1.1\r\nHost: h.example\r\n\r\n", 0, NULL, &o), 0);
  CU_ASSERT(strstr(o.env, "PATH_INFO=/p\nQUERY_STRING=q=1\nSERVER_NAME=[::1]\nSERVER_PORT=9\n") !=
            NULL);
  CU_ASSERT(strstr(o.env, "REQUEST_URI=http://[::1]:9/p?q=1\n") != NULL);
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
      /* RFC 9112 §6.3: chunked not the final coding is a MUST 400 (501 before issue 11) */
      {"TE gzip", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n", 400},
      {"TE gzip, chunked", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
       501},
      {"TE twice",
       "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: "
       "chunked\r\n\r\n",
       400}, /* chunked twice: RFC 9112 §7.1 (501 before issue 11) */
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
  CU_ASSERT_STRING_EQUAL(pp_http_reason_phrase(431), "Request Header Fields Too Large");
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
static void check_every_split_n(const char *name, const char *text, size_t len, int want_status,
                                int want_completes) {
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

static void check_every_split(const char *name, const char *text, int want_status,
                              int want_completes) {
  check_every_split_n(name, text, strlen(text), want_status, want_completes);
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

/* Issue 11, "Stricter than the parser we link": every MUST-reject of RFC 9112 / RFC 9110 that
 * a server has, each refused whatever llhttp 8.1 does with it (the llhttp column of
 * docs/SERVER.md "HTTP/1.1 refusals" says which ones 8.1 let through), at every split of the
 * input; and the valid neighbours of each rule still served. Cases with a NUL give their
 * length. */
#define H  "Host: h\r\n"
#define P  "POST / HTTP/1.1\r\n" H
#define TE "Transfer-Encoding: chunked\r\n"
static const struct strict_case {
  const char *name, *req;
  int status;
  size_t len; /* 0: strlen */
} strict_cases[] = {
    /* request line, RFC 9112 §3 */
    {"two SP after method", "GET  / HTTP/1.1\r\n" H "\r\n", 400, 0},
    {"two SP before version", "GET /  HTTP/1.1\r\n" H "\r\n", 400, 0},
    {"HTAB as separator", "GET\t/ HTTP/1.1\r\n" H "\r\n", 400, 0},
    {"SP after version", "GET / HTTP/1.1 \r\n" H "\r\n", 400, 0},
    {"SP before method", " GET / HTTP/1.1\r\n" H "\r\n", 400, 0},
    {"lowercase version", "GET / http/1.1\r\n" H "\r\n", 400, 0},
    {"HTTP/1.2", "GET / HTTP/1.2\r\n" H "\r\n", 505, 0},
    {"HTTP/2.0", "GET / HTTP/2.0\r\n" H "\r\n", 505, 0},
    {"HTTP/1.10", "GET / HTTP/1.10\r\n" H "\r\n", 400, 0},
    {"HTTP/01.1", "GET / HTTP/01.1\r\n" H "\r\n", 400, 0},
    {"junk after version", "GET / HTTP/1.1x\r\n" H "\r\n", 400, 0},
    {"method not a token", "G@T / HTTP/1.1\r\n" H "\r\n", 400, 0},
    {"lowercase method", "get / HTTP/1.1\r\n" H "\r\n", 400, 0},
    {"CTL in target", "GET /a\x01 HTTP/1.1\r\n" H "\r\n", 400, 0},
    {"DEL in target", "GET /a\x7f HTTP/1.1\r\n" H "\r\n", 400, 0},
    {"obs-text in target", "GET /a\xff HTTP/1.1\r\n" H "\r\n", 400, 0},
    {"NUL in target", "GET /a\0 HTTP/1.1\r\n" H "\r\n", 400, 34},
    {"asterisk-form for GET", "GET * HTTP/1.1\r\n" H "\r\n", 400, 0},
    {"authority-form for GET", "GET h:80 HTTP/1.1\r\n" H "\r\n", 400, 0},
    {"target not a path", "GET abc HTTP/1.1\r\n" H "\r\n", 400, 0},
    {"absolute-form ftp", "GET ftp://h/ HTTP/1.1\r\n" H "\r\n", 400, 0},
    {"absolute-form empty host", "GET http:///p HTTP/1.1\r\n" H "\r\n", 400, 0},
    {"absolute-form userinfo", "GET http://u@h/p HTTP/1.1\r\n" H "\r\n", 400, 0},
    /* field lines, RFC 9112 §5, RFC 9110 §5.1, §5.5 */
    {"SP before the first field", "GET / HTTP/1.1\r\n " H "\r\n", 400, 0},
    {"NUL in a value", "GET / HTTP/1.1\r\n" H "X-A: a\0b\r\n\r\n", 400, 40},
    {"SOH in a value", "GET / HTTP/1.1\r\n" H "X-A: a\x01z\r\n\r\n", 400, 0},
    {"DEL in a value", "GET / HTTP/1.1\r\n" H "X-A: a\x7fz\r\n\r\n", 400, 0},
    {"ESC in a value", "GET / HTTP/1.1\r\n" H "X-A: \x1b[31m\r\n\r\n", 400, 0},
    {"name not a token", "GET / HTTP/1.1\r\n" H "X(A): v\r\n\r\n", 400, 0},
    {"HTAB before colon", "GET / HTTP/1.1\r\n" H "X-A\t: v\r\n\r\n", 400, 0},
    {"field without colon", "GET / HTTP/1.1\r\n" H "X-A v\r\n\r\n", 400, 0},
    /* Host, RFC 9112 §3.2 */
    {"Host empty", "GET / HTTP/1.1\r\nHost:\r\n\r\n", 400, 0},
    {"Host with a path", "GET / HTTP/1.1\r\nHost: h/x\r\n\r\n", 400, 0},
    {"Host with userinfo", "GET / HTTP/1.1\r\nHost: u@h\r\n\r\n", 400, 0},
    {"Host with SP", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400, 0},
    {"Host bad port", "GET / HTTP/1.1\r\nHost: h:8x\r\n\r\n", 400, 0},
    {"Host empty port", "GET / HTTP/1.1\r\nHost: h:\r\n\r\n", 400, 0},
    {"Host port over 65535", "GET / HTTP/1.1\r\nHost: h:65536\r\n\r\n", 400, 0},
    {"Host two colons", "GET / HTTP/1.1\r\nHost: h:1:2\r\n\r\n", 400, 0},
    {"Host unclosed IPv6", "GET / HTTP/1.1\r\nHost: [::1\r\n\r\n", 400, 0},
    {"Host list", "GET / HTTP/1.1\r\nHost: a, b\r\n\r\n", 400, 0},
    {"two Hosts in HTTP/1.0", "GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n", 400, 0},
    {"invalid Host in HTTP/1.0", "GET / HTTP/1.0\r\nHost: a/b\r\n\r\n", 400, 0},
    /* framing, RFC 9112 §6 */
    {"TE in HTTP/1.0", "POST / HTTP/1.0\r\n" TE "\r\n0\r\n\r\n", 400, 0},
    {"TE chunked, gzip", P "Transfer-Encoding: chunked, gzip\r\n\r\n", 400, 0},
    {"TE chunked then a gzip line", P TE "Transfer-Encoding: gzip\r\n\r\n", 400, 0},
    {"TE gzip then a chunked line", P "Transfer-Encoding: gzip\r\n" TE "\r\n0\r\n\r\n", 501, 0},
    {"TE chunked, chunked", P "Transfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n", 400, 0},
    {"TE empty", P "Transfer-Encoding:\r\n\r\n", 400, 0},
    {"TE chunked;x=1", P "Transfer-Encoding: chunked;x=1\r\n\r\n0\r\n\r\n", 400, 0},
    {"TE xchunked", P "Transfer-Encoding: xchunked\r\n\r\n0\r\n\r\n", 400, 0},
    {"CL +5", P "Content-Length: +5\r\n\r\nhello", 400, 0},
    {"CL -1", P "Content-Length: -1\r\n\r\n", 400, 0},
    {"CL 0x5", P "Content-Length: 0x5\r\n\r\nhello", 400, 0},
    {"CL empty", P "Content-Length:\r\n\r\n", 400, 0},
    {"CL 1 2", P "Content-Length: 1 2\r\n\r\nhello", 400, 0},
    {"CL two different lines", P "Content-Length: 1\r\nContent-Length: 2\r\n\r\nhe", 400, 0},
    /* chunked coding, RFC 9112 §7.1 */
    {"chunk size 0x5", P TE "\r\n0x5\r\nhello\r\n0\r\n\r\n", 400, 0},
    {"chunk size after SP", P TE "\r\n 5\r\nhello\r\n0\r\n\r\n", 400, 0},
    {"SP after chunk size", P TE "\r\n5 \r\nhello\r\n0\r\n\r\n", 400, 0},
    {"HTAB after chunk size", P TE "\r\n5\t\r\nhello\r\n0\r\n\r\n", 400, 0},
    {"chunk size +5", P TE "\r\n+5\r\nhello\r\n0\r\n\r\n", 400, 0},
    {"chunk size -5", P TE "\r\n-5\r\nhello\r\n0\r\n\r\n", 400, 0},
    {"chunk size over the limit", P TE "\r\n10000000000000000\r\nhello\r\n0\r\n\r\n", 413, 0},
    {"chunk-size line bare LF", P TE "\r\n5\nhello\r\n0\r\n\r\n", 400, 0},
    {"chunk-size line bare CR", P TE "\r\n5\rhello\r\n0\r\n\r\n", 400, 0},
    {"chunk data then bare LF", P TE "\r\n5\r\nhello\n0\r\n\r\n", 400, 0},
    {"chunk data then 2 junk bytes", P TE "\r\n5\r\nhelloXY0\r\n\r\n", 400, 0},
    {"chunk data then CR junk", P TE "\r\n5\r\nhello\rX0\r\n\r\n", 400, 0},
    {"chunk data then no CRLF", P TE "\r\n5\r\nhello0\r\n\r\n", 400, 0},
    {"chunk ext without name", P TE "\r\n5;=b\r\nhello\r\n0\r\n\r\n", 400, 0},
    {"chunk ext CTL", P TE "\r\n5;a\x01\r\nhello\r\n0\r\n\r\n", 400, 0},
    {"chunk ext name not a token", P TE "\r\n5;a@b\r\nhello\r\n0\r\n\r\n", 400, 0},
    {"chunk ext value not a token", P TE "\r\n5;a=b@c\r\nhello\r\n0\r\n\r\n", 400, 0},
    {"chunk ext quote unterminated", P TE "\r\n5;a=\"b\r\nhello\r\n0\r\n\r\n", 400, 0},
    {"chunk ext bare LF", P TE "\r\n5;a=b\nhello\r\n0\r\n\r\n", 400, 0},
    {"chunk ext empty", P TE "\r\n5;\r\nhello\r\n0\r\n\r\n", 400, 0},
    {"last chunk bare LF", P TE "\r\n0\n\r\n", 400, 0},
    {"final line bare LF", P TE "\r\n0\r\n\n", 400, 0},
    {"trailer bare LF", P TE "\r\n0\r\nX-T: 1\n\r\n", 400, 0},
    {"trailer obs-fold", P TE "\r\n0\r\nX-T: 1\r\n 2\r\n\r\n", 400, 0},
    {"trailer name not a token", P TE "\r\n0\r\nX T: 1\r\n\r\n", 400, 0},
    {"trailer NUL", P TE "\r\n0\r\nX-T: a\0b\r\n\r\n", 400, 73},
    {"trailer bare CR", P TE "\r\n0\r\nX-T: a\rb\r\n\r\n", 400, 0},
    {"trailer without colon", P TE "\r\n0\r\nX-T\r\n\r\n", 400, 0},
    /* valid neighbours: served */
    {"empty line before the request line", "\r\nGET / HTTP/1.1\r\n" H "\r\n", 0, 0},
    {"HTTP/1.0 without Host", "GET / HTTP/1.0\r\n\r\n", 0, 0},
    {"OPTIONS *", "OPTIONS * HTTP/1.1\r\n" H "\r\n", 0, 0},
    {"absolute-form https with port", "GET https://h:8443/p?q HTTP/1.1\r\n" H "\r\n", 0, 0},
    {"Host IPv6 with port", "GET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n", 0, 0},
    {"Host IPv4, pct-encoded name", "GET / HTTP/1.1\r\nHost: a%41.b\r\n\r\n", 0, 0},
    {"obs-text and HTAB in a value", "GET / HTTP/1.1\r\n" H "X-A: caf\xc3\xa9\tok\r\n\r\n", 0, 0},
    {"CL with leading zeros", P "Content-Length: 005\r\n\r\nhello", 0, 0},
    {"chunk size with leading zeros", P TE "\r\n0005\r\nhello\r\n000\r\n\r\n", 0, 0},
    {"chunk ext token and quoted", P TE "\r\n5;a=\"bc\"\r\nhello\r\n1;a=b\r\nx\r\n0;z\r\n\r\n", 0,
     0},
    {"trailer fields", P TE "\r\n0\r\nX-T: a\tb\r\nY:\r\n\r\n", 0, 0},
};

static void test_strict_rfc9112(void) {
  for (size_t i = 0; i < sizeof strict_cases / sizeof strict_cases[0]; i++) {
    const struct strict_case *k = &strict_cases[i];
    size_t len = k->len ? k->len : strlen(k->req);
    check_every_split_n(k->name, k->req, len, k->status, k->status ? 0 : 1);
  }
}

/* Chunk extensions are bounded per message (by the header-size limit): a client cannot make
 * the server parse an endless extension. 413, at every split. */
static void test_chunk_extensions_bounded(void) {
  static char req[64000];
  strcpy(req, P TE "\r\n1;a=");
  size_t at = strlen(req);
  memset(req + at, 'x', 33000);
  strcpy(req + at + 33000, "\r\nx\r\n0\r\n\r\n");
  int completes, stalls;
  CU_ASSERT_EQUAL(parse_cut(req, strlen(req), (size_t)-1, &completes, &stalls), 413);
  CU_ASSERT_EQUAL(parse_cut(req, strlen(req), 0, &completes, &stalls), 413);
  CU_ASSERT_EQUAL(parse_cut(req, strlen(req), 100, &completes, &stalls), 413);
  /* many small extensions add up */
  char *p = req;
  p += sprintf(p, P TE "\r\n");
  for (int i = 0; i < 1500; i++)
    p += sprintf(p, "1;ext=abcdefghijklmnopqrst\r\nx\r\n");
  sprintf(p, "0\r\n\r\n");
  CU_ASSERT_EQUAL(parse_cut(req, strlen(req), 0, &completes, &stalls), 413);
  /* under the bound: served */
  p = req + sprintf(req, P TE "\r\n");
  for (int i = 0; i < 100; i++)
    p += sprintf(p, "1;ext=abcdefghijklmnopqrst\r\nx\r\n");
  sprintf(p, "0\r\n\r\n");
  CU_ASSERT_EQUAL(parse_cut(req, strlen(req), 0, &completes, &stalls), 0);
  CU_ASSERT_EQUAL(completes, 1);
}

/* Strict framing leaves pipelining intact: a chunked request with extensions and trailers,
 * then a Content-Length one, then a GET, at every split. */
static void test_strict_pipelined(void) {
  check_every_split("chunked, CL, GET",
                    P TE "\r\n5;a=1\r\nhello\r\n0\r\nX-T: 1\r\n\r\n" P
                         "Content-Length: 2\r\n\r\nhiGET /3 HTTP/1.1\r\n" H "\r\n",
                    0, 3);
  check_every_split("served, then junk after chunk data",
                    "GET /1 HTTP/1.1\r\n" H "\r\n" P TE "\r\n5\r\nhelloXY0\r\n\r\n", 400, 1);
}

/* The response checks h1conn.c applies to the app's answer. */
static void test_response_checks(void) {
  CU_ASSERT(pp_h1_token_ok((const uint8_t *)"X-Ok", 4));
  CU_ASSERT(!pp_h1_token_ok((const uint8_t *)"", 0));
  CU_ASSERT(!pp_h1_token_ok((const uint8_t *)"X Bad", 5));
  CU_ASSERT(!pp_h1_token_ok((const uint8_t *)"X:Bad", 5));
  CU_ASSERT(!pp_h1_token_ok((const uint8_t *)"X\r\nSet-Cookie", 13));
  CU_ASSERT(!pp_h1_token_ok((const uint8_t *)"caf\xc3\xa9", 5));
  CU_ASSERT(pp_h1_field_value_ok((const uint8_t *)"a b\tc \xff", 7));
  CU_ASSERT(pp_h1_field_value_ok((const uint8_t *)"", 0));
  CU_ASSERT(!pp_h1_field_value_ok((const uint8_t *)"a\rb", 3));
  CU_ASSERT(!pp_h1_field_value_ok((const uint8_t *)"a\nb", 3));
  CU_ASSERT(!pp_h1_field_value_ok((const uint8_t *)"a\0b", 3));
  CU_ASSERT(!pp_h1_field_value_ok((const uint8_t *)"a\x7f", 2));
  CU_ASSERT(!pp_h1_app_status_ok(99));
  CU_ASSERT(!pp_h1_app_status_ok(100));
  CU_ASSERT(!pp_h1_app_status_ok(101));
  CU_ASSERT(!pp_h1_app_status_ok(199));
  CU_ASSERT(pp_h1_app_status_ok(200));
  CU_ASSERT(pp_h1_app_status_ok(999));
  CU_ASSERT(!pp_h1_app_status_ok(1000));
  CU_ASSERT(!pp_h1_app_status_ok(-200));
  CU_ASSERT(pp_h1_host_ok((const uint8_t *)"a.example:80", 12));
  CU_ASSERT(pp_h1_host_ok((const uint8_t *)"[v1.x]", 6));
  CU_ASSERT(!pp_h1_host_ok((const uint8_t *)"[]", 2));
  CU_ASSERT(!pp_h1_host_ok((const uint8_t *)"a%4", 3));
  CU_ASSERT(!pp_h1_host_ok((const uint8_t *)":80", 3));
}

/* RFC 9112 §3.2.2: with an absolute-form target the server uses the target's authority and
 * ignores Host, so SERVER_NAME, SERVER_PORT and HTTP_HOST come from the target. */
static void test_absolute_form_authority_wins(void) {
  owner o;
  CU_ASSERT_EQUAL(
      parse("GET http://a.example:81/p HTTP/1.1\r\nHost: b.example\r\n\r\n", 1, NULL, &o), 0);
  CU_ASSERT(strstr(o.env, "SERVER_NAME=a.example\nSERVER_PORT=81\n") != NULL);
  CU_ASSERT(strstr(o.env, "HTTP_HOST=a.example:81\n") != NULL);
  CU_ASSERT(strstr(o.env, "b.example") == NULL);
  pp_buf_dispose(&o.body);
  CU_ASSERT_EQUAL(parse("GET http://a.example/p HTTP/1.0\r\n\r\n", 0, NULL, &o), 0);
  CU_ASSERT(strstr(o.env, "SERVER_NAME=a.example\nSERVER_PORT=80\n") != NULL);
  pp_buf_dispose(&o.body);
}

/* OPTIONS * is PATH_INFO "*" (Rack 3.2 SPEC); X-Request-Start per -request-start mode. */
static void test_env_asterisk_and_request_start(void) {
  owner o;
  CU_ASSERT_EQUAL(parse("OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n", 0, NULL, &o), 0);
  CU_ASSERT(strstr(o.env, "REQUEST_METHOD=OPTIONS\nSCRIPT_NAME=\nPATH_INFO=*\nQUERY_STRING=\n") !=
            NULL);
  CU_ASSERT(strstr(o.env, "REQUEST_URI=*\n") != NULL);
  CU_ASSERT_EQUAL(g_request_start_missing, 1); /* keep, and none sent */
  const char *with = "GET / HTTP/1.1\r\nHost: h\r\nX-Request-Start: t=1700000000000000\r\n\r\n";
  g_request_start = 0; /* keep */
  CU_ASSERT_EQUAL(parse(with, 0, NULL, &o), 0);
  CU_ASSERT(strstr(o.env, "HTTP_X_REQUEST_START=t=1700000000000000\n") != NULL);
  CU_ASSERT_EQUAL(g_request_start_missing, 0);
  g_request_start = 1; /* replace */
  CU_ASSERT_EQUAL(parse(with, 0, NULL, &o), 0);
  CU_ASSERT(strstr(o.env, "X_REQUEST_START") == NULL);
  CU_ASSERT_EQUAL(g_request_start_missing, 1);
  g_request_start = 2; /* off */
  CU_ASSERT_EQUAL(parse(with, 0, NULL, &o), 0);
  CU_ASSERT(strstr(o.env, "HTTP_X_REQUEST_START=t=1700000000000000\n") != NULL);
  CU_ASSERT_EQUAL(g_request_start_missing, 0);
  CU_ASSERT_EQUAL(parse("GET / HTTP/1.1\r\nHost: h\r\n\r\n", 0, NULL, &o), 0);
  CU_ASSERT_EQUAL(g_request_start_missing, 0); /* off: never added */
  g_request_start = 0;
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("http1", NULL, NULL);
  CU_add_test(s, "env of a GET, fed in pieces of every size", test_env_get);
  CU_add_test(s, "env of OPTIONS *, X-Request-Start modes", test_env_asterisk_and_request_start);
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
  CU_add_test(s, "every RFC 9112 MUST-reject at every split (issue 11)", test_strict_rfc9112);
  CU_add_test(s, "chunk extensions are bounded per message (413)", test_chunk_extensions_bounded);
  CU_add_test(s, "strict framing keeps pipelining", test_strict_pipelined);
  CU_add_test(s, "response checks: token names, field values, app statuses", test_response_checks);
  CU_add_test(s, "absolute-form: the target's authority, not Host",
              test_absolute_form_authority_wins);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failures = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}
