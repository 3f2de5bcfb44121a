/* Internals shared by the three files of the HTTP/3 endpoint (h3.h): h3.c (the server
 * context, datagram routing, the connection-ID map, stateless replies, the out queue),
 * h3_quic.c (one connection: ngtcp2, GnuTLS, nghttp3, read/write, timers, close) and
 * h3_stream.c (request streams, the request callbacks up and the response calls down). Not a
 * public API (STYLE.md: a private <module>_int.h). The functions run inside a public call
 * (pp_h3_server.depth > 0) unless said otherwise. */
#ifndef PP_H3_INT_H
#define PP_H3_INT_H

#include <nghttp3/nghttp3.h>
#include <ngtcp2/ngtcp2.h>

#include "server/proto/h3.h"

/* pp_h3_conn.state. CS_DEAD: freed at the end of the current public call (reap in h3.c). */
enum conn_state { CS_OPEN, CS_CLOSING, CS_DRAINING, CS_DEAD };

/* A piece of a stream's response body; nghttp3 points into it until the client acknowledges
 * it, then it goes back to pp_h3_server.chunk_free. */
typedef struct chunk {
  struct chunk *next;
  size_t len;
  uint8_t data[PP_H3_CHUNK];
} chunk;

/* A request stream's record (pp_h3_conn.streams), recycled on pp_h3_server.stream_free. */
struct pp_h3_stream {
  pp_h3_stream *prev, *next;
  int64_t id;
  void *owner_data;
  unsigned owned : 1;     /* on_request accepted it: the owner holds it */
  unsigned detached : 1;  /* on_close already ran */
  unsigned answered : 1;  /* the session answered it */
  unsigned responded : 1; /* a final response head was submitted */
  unsigned ended : 1;     /* send_end (or no body): EOF after the buffered bytes */
  unsigned eof_given : 1; /* EOF handed to nghttp3 */
  unsigned no_body : 1;
  unsigned head : 1;         /* HEAD request */
  unsigned req_fin : 1;      /* the request had no body */
  unsigned hdr_too_big : 1;  /* the field section exceeded max_header_list */
  unsigned headers_done : 1; /* end_headers ran */
  unsigned wouldblock : 1;   /* read_data returned WOULDBLOCK: resume on new data */
  unsigned want_resume : 1;  /* deferred nghttp3_conn_resume_stream */
  unsigned want_stop : 1;    /* deferred STOP_SENDING(H3_NO_ERROR): the session answered */
  unsigned want_reset : 1;   /* deferred full reset with reset_code */
  unsigned want_shut_rd : 1; /* deferred ngtcp2 shutdown read (nghttp3 asked) */
  unsigned want_shut_wr : 1; /* deferred ngtcp2 shutdown write (nghttp3 asked) */
  unsigned released : 1;     /* its bytes no longer count in pp_h3_conn.unacked (detached) */
  unsigned tunnel : 1;       /* an extended CONNECT the owner took (RFC 9220) */
  uint64_t reset_code, shut_rd_code, shut_wr_code;
  uint64_t close_code; /* for on_close when detached by the session */
  int detach_pending;  /* on_close(close_code) owed at the next run_pending */

  pp_buf hdr_raw, hdr_spans, hdr_list;
  size_t hdr_size;
  int has_cl;
  uint64_t cl;
  uint64_t body_received, body_unconsumed;
  pp_buf body_pend; /* body bytes gathered for the next on_body (< limits.body_piece) */

  chunk *head_chunk, *tail_chunk, *send_chunk;
  uint64_t head_base, send_base;
  uint64_t written, sent, acked;
};

/* ---- h3.c: helpers, the connection-ID map, the out queue ---- */

/* len random bytes from cfg.rand, or gnutls_rnd (aborts if that fails). */
void pp_h3__rand_bytes(pp_h3_server *srv, uint8_t *dest, size_t len);
/* calloc that aborts on OOM. */
void *pp_h3__xcalloc(size_t n, size_t size);

/* The map entry of a connection ID (struct cid_entry is h3.c's), or NULL. */
struct cid_entry *pp_h3__cid_find(pp_h3_server *srv, const uint8_t *id, size_t len);
/* Routes id to c. Returns 0, or -1 when id is already mapped or too long. */
int pp_h3__cid_add(pp_h3_server *srv, pp_h3_conn *c, const uint8_t *id, size_t len);
/* Drops one ID from the map (RETIRE_CONNECTION_ID), if it is there. */
void pp_h3__cid_remove(pp_h3_server *srv, const uint8_t *id, size_t len);
/* Drops every ID of c from the map (c is being freed). */
void pp_h3__cid_remove_all(pp_h3_server *srv, pp_h3_conn *c);

/* The next free slot of the out queue, or NULL when it is full. Nothing is queued until
 * pp_h3__out_commit. */
pp_h3_datagram *pp_h3__out_slot(pp_h3_server *srv);
/* Queues the slot from pp_h3__out_slot with len bytes written into it. */
void pp_h3__out_commit(pp_h3_server *srv, pp_h3_datagram *d, size_t len);
/* Sets a datagram's addresses (and ECN 0). */
void pp_h3__out_set_addrs(pp_h3_datagram *d, const struct sockaddr *local, socklen_t local_len,
                          const struct sockaddr *remote, socklen_t remote_len);
/* Copies len bytes into a new queued datagram. Returns 0, or -1 (counted) when the queue is
 * full. */
int pp_h3__out_push(pp_h3_server *srv, const uint8_t *data, size_t len,
                    const struct sockaddr *local, socklen_t local_len,
                    const struct sockaddr *remote, socklen_t remote_len);

/* ---- h3_quic.c: one connection ---- */

/* Creates the connection for a client Initial the server accepted (odcid: the DCID the client
 * first chose, before any Retry) and maps its IDs; on_conn_open runs. Returns 0 with *out set,
 * or -1 (nothing left allocated). */
int pp_h3__conn_new(pp_h3_server *srv, const ngtcp2_pkt_hd *hd, const ngtcp2_cid *odcid,
                    int retried, const ngtcp2_path *path, uint64_t now, pp_h3_conn **out);
/* Feeds one packet to the connection, then writes. */
void pp_h3__conn_recv(pp_h3_conn *c, const uint8_t *pkt, size_t len, const ngtcp2_path *path,
                      uint32_t ecn, uint64_t now);
/* Runs deferred stream work and writes what the connection has to send (a bounded pass). */
void pp_h3__conn_write(pp_h3_conn *c, uint64_t now);
/* Handles the connection's timer at now (may leave it CS_DEAD). */
void pp_h3__conn_expire(pp_h3_conn *c, uint64_t now);
/* on_close for every held stream, on_conn_close, then frees c and unmaps it. Outside the
 * engines only (reap, dispose). */
void pp_h3__conn_free(pp_h3_conn *c);
/* The connection has something to write: marks it for the end of the current call. */
void pp_h3__conn_want(pp_h3_conn *c);
/* Some stream has deferred work (run_pending before the next write). */
void pp_h3__conn_owe_work(pp_h3_conn *c);
/* Puts c on the list the end of the current call visits (nothing to write by itself). */
void pp_h3__conn_mark(pp_h3_conn *c);

/* ---- h3_stream.c: request streams ---- */

/* The nghttp3 callbacks of every connection (nghttp3_conn_server_new in h3_quic.c). */
extern const nghttp3_callbacks pp_h3__request_callbacks;
/* Hands every stream's gathered body bytes to the owner (on_body), outside the engines. */
void pp_h3__conn_deliver_body(pp_h3_conn *c);
/* Frees a stream record (its chunks back to the server's free list). */
void pp_h3__stream_free(pp_h3_conn *c, pp_h3_stream *s);
/* on_close(code) for a stream the owner holds, once. */
void pp_h3__stream_detach(pp_h3_conn *c, pp_h3_stream *s, uint64_t code);
/* The client reset a request stream (RESET_STREAM): the owner hears code at once, the stream is
 * reset our way at the next write. */
void pp_h3__stream_peer_abort(pp_h3_conn *c, int64_t stream_id, uint64_t code);

#endif
