/* Internals shared by server/proto/ws.c (framing, the session) and server/ws_deflate.c
 * (permessage-deflate: negotiation and the zlib streams). Not for other modules. */
#ifndef PP_WS_INT_H
#define PP_WS_INT_H

#include <zlib.h>

#include "server/proto/ws.h"

/* A connection's compression state. The streams are set up on first use, so a connection
 * that never sends (or never receives) a compressed message does not pay for that side. */
struct pp_ws_pmd {
  pp_ws_pmd_params params;
  z_stream inflater, deflater;
  int inflater_ready, deflater_ready;
  int inflate_ended;   /* the current message's DEFLATE stream ended (a BFINAL block) */
  uint64_t inflate_in; /* compressed bytes of the current message */
  pp_buf scratch;      /* pp_ws_send's compressed message */
};

/* Sets up p for params (streams not yet allocated). */
void pp_ws__pmd_init(struct pp_ws_pmd *p, const pp_ws_pmd_params *params);
void pp_ws__pmd_dispose(struct pp_ws_pmd *p);

/* Inflates n compressed bytes of the current message, appending the output to msg. Returns 0,
 * or the close code that fails the connection: 1009 once msg would pass max bytes (the
 * inflater stops there: at most max + 1 bytes are ever produced), 1007 for data that is not
 * DEFLATE, 1011 when zlib cannot allocate. */
int pp_ws__inflate(struct pp_ws_pmd *p, pp_buf *msg, uint64_t max, const uint8_t *in, size_t n);

/* The end of a compressed message: inflates the 00 00 ff ff tail (RFC 7692 §7.2.2) and
 * resets the inflater when the client does not keep its context. Same returns. */
int pp_ws__inflate_finish(struct pp_ws_pmd *p, pp_buf *msg, uint64_t max);

/* Compresses one message into p->scratch (without the 00 00 ff ff tail, RFC 7692 §7.2.1).
 * Returns 0 or PP_WS_EZLIB. */
int pp_ws__deflate(struct pp_ws_pmd *p, const uint8_t *in, size_t n);

/* Frees the streams of the sides that reset after every message (pp_ws_trim). */
void pp_ws__pmd_trim(struct pp_ws_pmd *p);

#endif
