/* The PROXY protocol header (HAProxy's proxy-protocol.txt, versions 1 and 2) that a proxy
 * sends before the client's bytes on a listener configured for it (-listen ADDR,proxy=v1|v2|
 * any; docs/SERVER.md "Client addresses"). Sans-I/O: the caller hands the bytes received so
 * far from the start of the connection, and gets "need more", the parsed header and its
 * length, or an error. Pure: no I/O, no allocation, no globals. */
#ifndef PP_PROXY_H
#define PP_PROXY_H

#include <stddef.h>
#include <stdint.h>

#define PP_PROXY_V1     1u
#define PP_PROXY_V2     2u
#define PP_PROXY_ANY    (PP_PROXY_V1 | PP_PROXY_V2)
#define PP_PROXY_V1_MAX 107u  /* the longest v1 line, CRLF included (the spec's bound) */
#define PP_PROXY_V2_MAX 4096u /* a v2 header (16 bytes + addresses + TLVs) we accept */

typedef enum pp_proxy_rc {
  PP_PROXY_ERROR = -1, /* not a valid header of an accepted version (out->error says why) */
  PP_PROXY_MORE = 0,   /* a valid prefix: more bytes are needed */
  PP_PROXY_DONE = 1,   /* out is filled; the header is out->header_len bytes */
} pp_proxy_rc;

typedef struct pp_proxy_info {
  int version;  /* 1 or 2 */
  int local;    /* v2 LOCAL, v1 UNKNOWN, or an address family this server does not use
                 * (unix, unspecified): the connection's own peer address stays */
  int family;   /* 4 or 6 when !local */
  char src[46]; /* the client's address as text (inet_ntop), when !local */
  char dst[46];
  uint16_t src_port, dst_port;
  uint32_t tlv_count; /* v2: TLVs after the addresses (checked for framing, not interpreted) */
  size_t header_len;  /* bytes to skip before the client's own bytes */
  const char *error;  /* PP_PROXY_ERROR: a static message */
} pp_proxy_info;

/* Parses the header at the start of data[0..len) for the versions in `accept` (PP_PROXY_V1,
 * PP_PROXY_V2 or both). MORE only while data is a prefix of some valid header. */
pp_proxy_rc pp_proxy_parse(const uint8_t *data, size_t len, unsigned accept, pp_proxy_info *out);

#endif
