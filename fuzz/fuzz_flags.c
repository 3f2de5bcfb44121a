/* Fuzz target for the server's flag parser (server/base/config.h).
 *
 * Input: an argument vector, the arguments separated by NUL bytes (argv[0] is supplied), as
 * a shell or systemd unit would pass them; seeds are the command lines of the tests and the
 * README. Properties:
 *  1. pp_config_parse never crashes, never writes past its error buffer, and returns 0, 1
 *     (-help / -version: printed, exit 0) or -1 with a NUL-terminated, non-empty message.
 *  2. On 0 the configuration is coherent: workers and threads at least 1, every listen
 *     address is a unix path or a TCP host with a port in 0–65535, and its text is a string.
 *  3. The duration, size and address parsers, given each argument alone, never crash.
 * A violated property aborts, so libFuzzer and the replay driver report it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/base/config.h"

#include "fuzz/check.h"

#define MAX_ARGS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static FILE *sink;
  if (!sink) sink = fopen("/dev/null", "w");
  char *copy = malloc(size + 1);
  CHECK(copy != NULL);
  memcpy(copy, data, size);
  copy[size] = '\0';
  char *argv[MAX_ARGS + 2];
  int argc = 0;
  argv[argc++] = "puma-plus-server";
  for (size_t i = 0; i <= size && argc <= MAX_ARGS;) {
    argv[argc++] = copy + i;
    i += strlen(copy + i) + 1;
  }
  argv[argc] = NULL;
  for (int i = 1; i < argc; i++) {
    uint64_t v;
    pp_addr a;
    (void)pp_duration_parse(argv[i], &v);
    (void)pp_size_parse(argv[i], &v);
    (void)pp_addr_parse(&a, argv[i]);
  }
  static pp_config c; /* large: keep it off the stack */
  pp_config_defaults(&c);
  char err[256];
  memset(err, 'x', sizeof err);
  int rc = pp_config_parse(&c, argc, argv, err, sizeof err, sink);
  CHECK(rc == 0 || rc == 1 || rc == -1);
  if (rc == -1) CHECK(memchr(err, '\0', sizeof err) != NULL && err[0] != '\0');
  if (rc == 0) {
    CHECK(c.workers >= 1 && c.threads >= 1);
    CHECK(c.listen_count >= 0 && c.listen_count <= PP_MAX_LISTEN);
    for (int i = 0; i < c.listen_count; i++) {
      const pp_addr *a = &c.listen[i];
      CHECK(memchr(a->text, '\0', sizeof a->text) != NULL);
      if (a->is_unix)
        CHECK(memchr(a->path, '\0', sizeof a->path) != NULL && a->path[0]);
      else
        CHECK(a->port >= 0 && a->port <= 65535 && memchr(a->host, '\0', sizeof a->host));
    }
  }
  free(copy);
  return 0;
}
