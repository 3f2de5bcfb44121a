/* Tests for server/proto/systemd.c: LISTEN_PID/LISTEN_FDS/LISTEN_FDNAMES parsing (table-driven,
 * with every malformed form), WATCHDOG_USEC/WATCHDOG_PID, address matching of inherited sockets,
 * and the notification datagram as a receiving socket sees it (path and abstract names). */
#include <CUnit/Basic.h>
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "server/proto/systemd.h"

static void test_listen_parse(void) {
  pp_sd_listen l;
  char err[256];
  struct {
    const char *pid, *fds, *names;
    int want;
    const char *first_name, *last_name;
  } cases[] = {
      {NULL, NULL, NULL, 0, NULL, NULL},          /* not activated */
      {"42", "2", NULL, 2, "unknown", "unknown"}, /* names are optional */
      {NULL, "1", "web", 1, "web", "web"},        /* LISTEN_PID is optional */
      {"42", "3", "a:b:c", 3, "a", "c"},          /* one name per descriptor */
      {"42", "2", ":b", 2, "", "b"},              /* an empty name is a name */
      {"43", "2", "a:b", 0, NULL, NULL},          /* our parent's: not ours */
      {"42", "0", NULL, 0, NULL, NULL},           /* zero sockets */
      {"x", "2", NULL, -1, NULL, NULL},           /* malformed pid */
      {"42", "two", NULL, -1, NULL, NULL},        /* malformed count */
      {"42", "-1", NULL, -1, NULL, NULL},         /* negative count */
      {"42", "65", NULL, -1, NULL, NULL},         /* over PP_SD_MAX_FDS */
      {"42", "2 ", NULL, -1, NULL, NULL},         /* trailing bytes */
      {"42", "3", "a:b", -1, NULL, NULL},         /* too few names */
      {"42", "1", "a:b", -1, NULL, NULL},         /* too many names */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    err[0] = 0;
    int n = pp_sd_listen_parse(&l, cases[i].pid, cases[i].fds, cases[i].names, 42, err, sizeof err);
    if (n != cases[i].want) fprintf(stderr, "case %zu: got %d (%s)\n", i, n, err);
    CU_ASSERT_EQUAL(n, cases[i].want);
    if (n < 0) CU_ASSERT(strlen(err) > 0);
    if (n > 0) {
      CU_ASSERT_EQUAL(l.fds[0].fd, 3);
      CU_ASSERT_EQUAL(l.fds[n - 1].fd, 3 + n - 1);
      CU_ASSERT_STRING_EQUAL(l.fds[0].name, cases[i].first_name);
      CU_ASSERT_STRING_EQUAL(l.fds[n - 1].name, cases[i].last_name);
      CU_ASSERT_EQUAL(l.fds[0].used, 0);
    }
  }
}

static void test_watchdog(void) {
  CU_ASSERT_EQUAL(pp_sd_watchdog_usec(NULL, NULL, 42), 0);
  CU_ASSERT_EQUAL(pp_sd_watchdog_usec("3000000", NULL, 42), 3000000);
  CU_ASSERT_EQUAL(pp_sd_watchdog_usec("3000000", "42", 42), 3000000);
  CU_ASSERT_EQUAL(pp_sd_watchdog_usec("3000000", "41", 42), 0); /* another process's */
  CU_ASSERT_EQUAL(pp_sd_watchdog_usec("0", NULL, 42), 0);
  CU_ASSERT_EQUAL(pp_sd_watchdog_usec("3s", NULL, 42), 0);
}

static void test_addr_matches(void) {
  pp_addr a;
  struct sockaddr_in in;
  memset(&in, 0, sizeof in);
  in.sin_family = AF_INET;
  in.sin_port = htons(8080);
  inet_pton(AF_INET, "127.0.0.1", &in.sin_addr);
  pp_addr_parse(&a, "127.0.0.1:8080");
  CU_ASSERT(pp_sd_addr_matches(&a, (struct sockaddr *)&in, sizeof in));
  pp_addr_parse(&a, "localhost:8080");
  CU_ASSERT(pp_sd_addr_matches(&a, (struct sockaddr *)&in, sizeof in));
  pp_addr_parse(&a, "127.0.0.1:8081");
  CU_ASSERT(!pp_sd_addr_matches(&a, (struct sockaddr *)&in, sizeof in));
  pp_addr_parse(&a, "0.0.0.0:8080");
  CU_ASSERT(!pp_sd_addr_matches(&a, (struct sockaddr *)&in, sizeof in));
  pp_addr_parse(&a, "[::1]:8080");
  CU_ASSERT(!pp_sd_addr_matches(&a, (struct sockaddr *)&in, sizeof in));
  in.sin_port = 0;
  pp_addr_parse(&a, "127.0.0.1:0"); /* port 0 never matches by address */
  CU_ASSERT(!pp_sd_addr_matches(&a, (struct sockaddr *)&in, sizeof in));

  struct sockaddr_in6 in6;
  memset(&in6, 0, sizeof in6);
  in6.sin6_family = AF_INET6;
  in6.sin6_port = htons(443);
  inet_pton(AF_INET6, "::1", &in6.sin6_addr);
  pp_addr_parse(&a, "[::1]:443");
  CU_ASSERT(pp_sd_addr_matches(&a, (struct sockaddr *)&in6, sizeof in6));
  pp_addr_parse(&a, "127.0.0.1:443");
  CU_ASSERT(!pp_sd_addr_matches(&a, (struct sockaddr *)&in6, sizeof in6));

  struct sockaddr_un un;
  memset(&un, 0, sizeof un);
  un.sun_family = AF_UNIX;
  strcpy(un.sun_path, "/run/pp.sock");
  socklen_t un_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 13);
  pp_addr_parse(&a, "unix:/run/pp.sock");
  CU_ASSERT(pp_sd_addr_matches(&a, (struct sockaddr *)&un, un_len));
  pp_addr_parse(&a, "unix:/run/pp.soc");
  CU_ASSERT(!pp_sd_addr_matches(&a, (struct sockaddr *)&un, un_len));
  pp_addr_parse(&a, "127.0.0.1:80");
  CU_ASSERT(!pp_sd_addr_matches(&a, (struct sockaddr *)&un, un_len));

  char text[128];
  pp_sd_addr_format((struct sockaddr *)&in6, sizeof in6, text, sizeof text);
  CU_ASSERT_STRING_EQUAL(text, "[::1]:443");
  pp_sd_addr_format((struct sockaddr *)&un, un_len, text, sizeof text);
  CU_ASSERT_STRING_EQUAL(text, "unix:/run/pp.sock");
}

/* Binds a datagram socket at `name` (a path, or "@x" abstract), sends through pp_sd_notify,
 * and returns what arrived. */
static void roundtrip(const char *name) {
  int rx = socket(AF_UNIX, SOCK_DGRAM, 0);
  CU_ASSERT_FATAL(rx >= 0);
  struct sockaddr_un sa;
  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  strcpy(sa.sun_path, name);
  socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(name));
  if (name[0] == '@')
    sa.sun_path[0] = 0;
  else
    len++, unlink(name);
  CU_ASSERT_FATAL(bind(rx, (struct sockaddr *)&sa, len) == 0);
  pp_sd_notify n;
  char err[256];
  CU_ASSERT_EQUAL(pp_sd_notify_open(&n, name, err, sizeof err), 0);
  CU_ASSERT_EQUAL(pp_sd_notify_send(&n, "READY=1\nSTATUS=up"), 0);
  char buf[64];
  ssize_t got = recv(rx, buf, sizeof buf - 1, 0);
  CU_ASSERT_EQUAL(got, 17);
  buf[got > 0 ? got : 0] = 0;
  CU_ASSERT_STRING_EQUAL(buf, "READY=1\nSTATUS=up");
  pp_sd_notify_close(&n);
  close(rx);
  if (name[0] != '@') unlink(name);
}

static void test_notify(void) {
  char path[64], abstract[64];
  snprintf(path, sizeof path, "/tmp/pp-test-notify-%d.sock", (int)getpid());
  snprintf(abstract, sizeof abstract, "@pp-test-notify-%d", (int)getpid());
  roundtrip(path);
  roundtrip(abstract);
  pp_sd_notify n;
  char err[256];
  CU_ASSERT_EQUAL(pp_sd_notify_open(&n, NULL, err, sizeof err), 0); /* no socket: no-op */
  CU_ASSERT_EQUAL(n.fd, -1);
  CU_ASSERT_EQUAL(pp_sd_notify_send(&n, "READY=1"), 0);
  CU_ASSERT_EQUAL(pp_sd_notify_open(&n, "relative.sock", err, sizeof err), -1);
  CU_ASSERT(strstr(err, "NOTIFY_SOCKET") != NULL);
  /* nobody listening at the path: the error comes back, it is not fatal */
  CU_ASSERT_EQUAL(pp_sd_notify_open(&n, path, err, sizeof err), 0);
  CU_ASSERT(pp_sd_notify_send(&n, "READY=1") < 0);
  pp_sd_notify_close(&n);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("systemd", NULL, NULL);
  CU_add_test(s, "LISTEN_* parsing", test_listen_parse);
  CU_add_test(s, "WATCHDOG_USEC / WATCHDOG_PID", test_watchdog);
  CU_add_test(s, "inherited socket address matching", test_addr_matches);
  CU_add_test(s, "notification datagrams", test_notify);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failures = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}
