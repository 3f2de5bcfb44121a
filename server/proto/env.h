/* The Rack env pairs of a REQUEST frame (docs/PROTOCOL.md), built the same way for every
 * protocol: a session describes its request as a method, a request-target, a protocol name
 * and a list of header fields, and pp_env_build writes the pairs. Because h1, h2 and h3 all
 * go through this one function, an app sees the same env whichever protocol carried the
 * request, apart from SERVER_PROTOCOL. Pure: no I/O, no allocation beyond *out. */
#ifndef PP_ENV_H
#define PP_ENV_H

#include <stddef.h>
#include <stdint.h>

#include "server/base/buf.h"

#define PP_ENV_MAX_FIELDS 256 /* header fields one request may carry into the env */

typedef struct pp_env_field {
  const char *name; /* any case (h1) or lowercase (h2, h3) */
  size_t name_len;
  const char *value; /* without surrounding whitespace */
  size_t value_len;
} pp_env_field;

/* The connection facts the env needs. */
typedef struct pp_env_conninfo {
  const char *remote_addr; /* textual peer address ("127.0.0.1", "::1") */
  const char *server_name; /* used when the request has no Host */
  const char *server_port;
  const char *url_scheme; /* "http" or "https" */
  /* X-Request-Start (-request-start): 0 keep (a client's passes; *request_start_missing says
   * whether it had one), 1 replace (a client's is dropped), 2 off (passes as sent). */
  int request_start;
  /* Out, when not NULL: 1 if the server is to add HTTP_X_REQUEST_START (dispatch writes it,
   * with T2b): the request had none (keep) or it was dropped (replace); else 0. */
  int *request_start_missing;
  /* -remote-addr-header: when the peer (remote_addr) is in trusted, REMOTE_ADDR is the
   * right-most address of this field's comma-separated list that is not in trusted (all
   * trusted: the left-most); a list with an entry that is not an address is ignored. NULL:
   * REMOTE_ADDR is remote_addr. */
  const char *addr_header;
  const struct pp_cidr *trusted;
  int trusted_count;
} pp_env_conninfo;

typedef struct pp_env_request {
  const char *method;
  size_t method_len;
  const char *target; /* origin-form "/p?q", absolute-form "http://h/p?q", or "*" */
  size_t target_len;
  const char *protocol; /* "HTTP/1.0", "HTTP/1.1", "HTTP/2", "HTTP/3" */
  const pp_env_field *fields;
  uint32_t field_count;
  int host_index;         /* index in fields of Host (h2/h3: the :authority), or -1 */
  int content_type_index; /* index of Content-Type, or -1 */
  int has_content_length;
  uint64_t content_length;
} pp_env_request;

/* Appends the env pairs (without the u32 count) to *out, in PROTOCOL.md's order, ending with
 * REQUEST_URI and puma_plus.request_id; puma_plus.queue_ns is NOT written (dispatch appends
 * it when it is known). Returns the number of pairs written. */
uint32_t pp_env_build(const pp_env_request *rq, const pp_env_conninfo *ci, uint64_t request_id,
                      pp_buf *out);

/* Appends one encoded pair (u32 key length, key, u32 value length, value). */
void pp_env_put_pair(pp_buf *out, const char *key, size_t key_len, const char *value,
                     size_t value_len);

#endif
