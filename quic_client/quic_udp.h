/* The UDP edge of the QUIC client kit (quic_client.h) for the programs that talk to a real
 * server from one thread over a connected, non-blocking UDP socket and poll(2): ws-h3
 * (server/tests/ws_h3.c) and h3-upload (server/tests/h3_upload.c). The kit itself stays
 * sans-I/O; this file owns the socket calls and the clock those programs share.
 *
 * Workload assumed: a handful of connections to a loopback server, each with its own socket.
 * The server certificate is not verified (quic_client.h). */
#ifndef PP_QUIC_UDP_H
#define PP_QUIC_UDP_H

#include <stdint.h>

#include "quic_client/quic_client.h"

/* The clock of the sessions dialled here: CLOCK_MONOTONIC in ns (ngtcp2's timestamps). */
uint64_t pp_qc_udp_now(void);

/* Resolves host and port (UDP, either family), opens a non-blocking UDP socket connected to the
 * first address (4 MiB send and receive buffers), and creates the client session on that path
 * (pp_qc_client_new: params, cred, ALPN "h3", SNI "localhost", the clock started now).
 * s->h3_callbacks, s->data and s->on_handshake are kept as the caller set them. Returns 0 with
 * *fd the socket (the caller's, to poll and close); PP_QC_ERESOLVE; PP_QC_ESOCKET (errno
 * says why; no socket is left open); or pp_qc_client_new's error (then *fd is open and s holds
 * what was created, for pp_qc_session_dispose). Nothing is sent yet. */
int pp_qc_udp_dial(pp_qc_session *s, int *fd, const char *host, const char *port,
                   const ngtcp2_transport_params *params, gnutls_certificate_credentials_t cred);

/* Sends what the session has (pp_qc_write_packet) until it has nothing more, or the socket is
 * full: then *full is set and the caller waits for POLLOUT. A datagram the socket refuses for
 * another reason (ECONNREFUSED, ...) is lost as on a network: QUIC recovers or times out.
 * Returns 0, or the negative ngtcp2 error that ends the connection; an nghttp3 error is
 * NGTCP2_ERR_CALLBACK_FAILURE with *h3_error its code (0 otherwise). */
int pp_qc_udp_write(pp_qc_session *s, int fd, int *full, int *h3_error);

/* Feeds the session what the socket has (up to 256 datagrams, each stamped with the time it
 * was read). Returns 0, or the negative ngtcp2 error of a datagram that ends the connection. */
int pp_qc_udp_read(pp_qc_session *s, int fd);

#endif
