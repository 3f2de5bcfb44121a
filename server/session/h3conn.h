/* h3conn: the -listen-h3 listeners (UDP sockets) and the glue from the sans-I/O HTTP/3
 * endpoint (h3.h) to the exchange layer. See h3conn.c for the I/O choices. */
#ifndef PP_H3CONN_H
#define PP_H3CONN_H

#include <jansson.h>
#include <stddef.h>

#include "server/proto/h3.h"

typedef struct pp_sessions pp_sessions; /* conn.h */
typedef struct pp_h3_listener pp_h3_listener;

/* Opens every -listen-h3 address with the certificate pair (the one the TLS listeners use,
 * or the development pair) and sets the Alt-Svc value. 0, or -1 (logged). */
int pp_h3conn_open_all(pp_sessions *s, const char *cert, const char *key);
/* Drain: every connection gets GOAWAY; Alt-Svc is no longer advertised. */
void pp_h3conn_drain(pp_sessions *s);
/* Live QUIC connections over all listeners. */
size_t pp_h3conn_live(pp_sessions *s);
/* The endpoints' counters summed over all listeners. */
void pp_h3conn_stats(pp_sessions *s, pp_h3_stats *sum);

/* Writes /stats "http3" into root. */
void pp_h3conn_stats_json(pp_sessions *s, json_t *root);

#endif
