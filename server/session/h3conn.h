/* h3conn: the -listen-h3 listeners (UDP sockets) and the glue from the sans-I/O HTTP/3
 * endpoint (h3.h) to the exchange layer. See h3conn.c for the I/O choices. */
#ifndef PP_H3CONN_H
#define PP_H3CONN_H

#include <jansson.h>
#include <stddef.h>

#include "server/proto/h3.h"

typedef struct server server;
typedef struct pp_h3_listener pp_h3_listener;

/* Opens every -listen-h3 address with the certificate pair (the one the TLS listeners use,
 * or the development pair) and sets the Alt-Svc value. 0, or -1 (logged). */
int pp_h3conn_open_all(server *s, const char *cert, const char *key);
/* Drain: every connection gets GOAWAY; Alt-Svc is no longer advertised. */
void pp_h3conn_drain(server *s);
/* Live QUIC connections over all listeners. */
size_t pp_h3conn_live(server *s);
/* The endpoints' counters summed over all listeners. */
void pp_h3conn_stats(server *s, pp_h3_stats *sum);

/* Writes /stats "http3" into root. */
void pp_h3conn_stats_json(server *s, json_t *root);

#endif
