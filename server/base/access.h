/* One access-log record: what a session or the exchange layer knows about a response when it
 * is done, handed up through hooks.request_done (base/hooks.h) to whatever logs it (the
 * access log, ops/access_log.c). Plain data; every pointer is valid only during the call. */
#ifndef PP_ACCESS_H
#define PP_ACCESS_H

#include <stddef.h>
#include <stdint.h>

typedef struct pp_access_rec {
  /* The request's Rack env pairs as the REQUEST frame carries them (docs/PROTOCOL.md), or
   * NULL when the server answered before building them (a parse error, a refusal at the
   * header section): then the fields below describe the request as far as it was read. */
  const uint8_t *env;
  size_t env_len;
  uint32_t env_count;
  const char *remote;   /* the peer's address (when env is NULL) */
  const char *protocol; /* "HTTP/1.1", "HTTP/2", "HTTP/3" (when env is NULL) */
  const char *method;   /* NULL: not read */
  size_t method_len;
  const char *target; /* NULL: not read */
  size_t target_len;

  int status;         /* the status sent; 0: none (the client went away first) */
  uint64_t bytes;     /* response body bytes handed to the connection */
  uint64_t id;        /* the request id (puma_plus.request_id), 0: none given */
  int64_t t1;         /* first byte of the request (pp_now_ns), 0: unknown */
  int64_t t2b, t3;    /* runnable (queued), dispatched; 0: never */
  int64_t t_end;      /* the response was done (pp_now_ns) */
  int64_t service_ns; /* the worker's service time (T5 - T4 without body waits), -1: none */
  int32_t worker;     /* the worker index that served it, -1: none */
} pp_access_rec;

#endif
