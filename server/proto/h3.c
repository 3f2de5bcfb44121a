/* The HTTP/3 endpoint (h3.h): ngtcp2 0.12 + GnuTLS for QUIC, nghttp3 0.8 for HTTP/3, no I/O.
 *
 * This file is the server context: init and dispose, the public calls that enter the engines
 * (recv, flush, the expiry calls, shutdown) and the end of each of them, which visits the
 * connections it touched (flush_all) and frees those that ended (reap(), never from a
 * callback); datagram routing by the connection-ID map; what is answered before any connection
 * state exists (Version Negotiation, Retry, CONNECTION_CLOSE(INVALID_TOKEN), stateless reset);
 * and the bounded out queue every packet goes through. One connection's engines live in
 * h3_quic.c, its request streams in h3_stream.c; h3_int.h holds what the three share. */
#include "server/proto/h3.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <ngtcp2/ngtcp2_crypto.h>

#include "server/base/hash.h"
#include "server/proto/h3_int.h"
/* TLS 1.3 only, the QUIC cipher suites and groups (RFC 9001 §5.3 allows any TLS 1.3 suite but
 * CCM_8); middlebox compatibility mode is meaningless over QUIC. */
#define PRIORITY                                                                                   \
  "NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+AES-128-GCM:+AES-256-GCM:+CHACHA20-POLY1305:"        \
  "+AES-128-CCM:-GROUP-ALL:+GROUP-X25519:+GROUP-SECP256R1:+GROUP-SECP384R1:+GROUP-SECP521R1:"      \
  "%DISABLE_TLS13_COMPAT_MODE"

#define MIN_INITIAL_DATAGRAM 1200

struct cid_entry {
  struct cid_entry *next;      /* hash chain */
  struct cid_entry *conn_next; /* the connection's list */
  pp_h3_conn *conn;
  uint8_t len;
  uint8_t id[NGTCP2_MAX_CIDLEN];
};

const char *pp_h3_strerror(int err) {
  switch (err) {
  case 0: return "success";
  case PP_H3_EINVAL: return "invalid argument";
  case PP_H3_ECERT: return "certificate or key could not be loaded";
  case PP_H3_ETLS: return "GnuTLS failed";
  case PP_H3_ELIBRARY: return "ngtcp2 or nghttp3 failed";
  case PP_H3_ESTREAM: return "no such stream, or not in a state that allows the call";
  case PP_H3_EFULL: return "unacknowledged response data bound reached";
  case PP_H3_EREENTER: return "called from inside a callback";
  case PP_H3_ECLOSED: return "connection closing or gone";
  default: return "unknown error";
  }
}

void pp_h3_limits_default(pp_h3_limits *l) {
  l->max_connections = 10000;
  l->max_streams_bidi = 100;
  l->max_header_list = 65536;
  l->max_body_bytes = 64ull << 20;
  l->stream_window = 256 * 1024;
  l->conn_window = 0; /* max_streams_bidi x stream_window */
  l->body_piece = 65536 - 16;
  l->idle_timeout_ns = 30 * NGTCP2_SECONDS;
  l->handshake_timeout_ns = 10 * NGTCP2_SECONDS;
  l->retry_token_ttl_ns = 10 * NGTCP2_SECONDS;
  l->max_stream_unacked = 1024 * 1024;
  l->max_conn_unacked = 8 * 1024 * 1024;
  l->max_initial_datagram = 1500;
  l->out_queue = 512;
  l->connect_protocol = 1;
  l->reset_burst = 16;
  l->reset_rate = 100;
}

void pp_h3_config_default(pp_h3_config *c) {
  memset(c, 0, sizeof *c);
  pp_h3_limits_default(&c->limits);
}

/* ---- small helpers ---- */

void pp_h3__rand_bytes(pp_h3_server *srv, uint8_t *dest, size_t len) {
  if (srv->cfg.rand)
    srv->cfg.rand(dest, len, srv->data);
  else if (gnutls_rnd(GNUTLS_RND_RANDOM, dest, len) != 0) {
    fprintf(stderr, "puma-plus: gnutls_rnd failed\n");
    abort();
  }
}

static uint64_t min_u64(uint64_t a, uint64_t b) {
  return a < b ? a : b;
}

void *pp_h3__xcalloc(size_t n, size_t size) {
  void *p = calloc(n, size);
  if (!p) {
    fprintf(stderr, "puma-plus: out of memory\n");
    abort();
  }
  return p;
}

/* ---- the connection-ID map ---- */

static size_t cid_hash(const pp_h3_server *srv, const uint8_t *id, size_t len) {
  /* The base hash seeded with the secret: the client picks its first DCID, so the seed keeps
   * it from aiming at one chain. */
  uint64_t h = pp_hash_bytes(pp_hash_bytes(PP_HASH_SEED, srv->cfg.secret, 8), id, len);
  return (size_t)(h ^ (h >> 29)) & (srv->cid_nbuckets - 1);
}

struct cid_entry *pp_h3__cid_find(pp_h3_server *srv, const uint8_t *id, size_t len) {
  struct cid_entry *e = srv->cid_buckets[cid_hash(srv, id, len)];
  for (; e; e = e->next)
    if (e->len == len && memcmp(e->id, id, len) == 0) return e;
  return NULL;
}

static void cid_grow(pp_h3_server *srv) {
  size_t old_n = srv->cid_nbuckets;
  void **old = srv->cid_buckets;
  srv->cid_nbuckets = old_n * 2;
  srv->cid_buckets = pp_h3__xcalloc(srv->cid_nbuckets, sizeof(void *));
  for (size_t i = 0; i < old_n; i++) {
    struct cid_entry *e = old[i];
    while (e) {
      struct cid_entry *next = e->next;
      size_t b = cid_hash(srv, e->id, e->len);
      e->next = srv->cid_buckets[b];
      srv->cid_buckets[b] = e;
      e = next;
    }
  }
  free(old);
}

int pp_h3__cid_add(pp_h3_server *srv, pp_h3_conn *c, const uint8_t *id, size_t len) {
  if (len > NGTCP2_MAX_CIDLEN) return -1;
  if (pp_h3__cid_find(srv, id, len)) return -1;
  if (srv->cid_count + 1 > srv->cid_nbuckets * 2) cid_grow(srv);
  struct cid_entry *e = pp_h3__xcalloc(1, sizeof *e);
  e->conn = c;
  e->len = (uint8_t)len;
  memcpy(e->id, id, len);
  size_t b = cid_hash(srv, id, len);
  e->next = srv->cid_buckets[b];
  srv->cid_buckets[b] = e;
  e->conn_next = c->cids;
  c->cids = e;
  srv->cid_count++;
  return 0;
}

static void cid_unlink_bucket(pp_h3_server *srv, struct cid_entry *e) {
  struct cid_entry **pp = (struct cid_entry **)&srv->cid_buckets[cid_hash(srv, e->id, e->len)];
  while (*pp && *pp != e)
    pp = &(*pp)->next;
  if (*pp) *pp = e->next;
  srv->cid_count--;
}

void pp_h3__cid_remove(pp_h3_server *srv, const uint8_t *id, size_t len) {
  struct cid_entry *e = pp_h3__cid_find(srv, id, len);
  if (!e) return;
  cid_unlink_bucket(srv, e);
  struct cid_entry **pp = (struct cid_entry **)&e->conn->cids;
  while (*pp && *pp != e)
    pp = &(*pp)->conn_next;
  if (*pp) *pp = e->conn_next;
  free(e);
}

void pp_h3__cid_remove_all(pp_h3_server *srv, pp_h3_conn *c) {
  struct cid_entry *e = c->cids;
  while (e) {
    struct cid_entry *next = e->conn_next;
    cid_unlink_bucket(srv, e);
    free(e);
    e = next;
  }
  c->cids = NULL;
}

/* ---- the out queue ---- */

pp_h3_datagram *pp_h3__out_slot(pp_h3_server *srv) {
  if (srv->out_len >= srv->cfg.limits.out_queue) return NULL;
  return &srv->outq[(srv->out_head + srv->out_len) % srv->cfg.limits.out_queue];
}

void pp_h3__out_commit(pp_h3_server *srv, pp_h3_datagram *d, size_t len) {
  d->len = len;
  srv->out_len++;
  srv->stats.datagrams_out++;
  srv->stats.bytes_out += len;
}

void pp_h3__out_set_addrs(pp_h3_datagram *d, const struct sockaddr *local, socklen_t local_len,
                          const struct sockaddr *remote, socklen_t remote_len) {
  memcpy(&d->local, local, local_len);
  d->local_len = local_len;
  memcpy(&d->remote, remote, remote_len);
  d->remote_len = remote_len;
  d->ecn = 0;
}

/* Queues bytes built by the caller in a stack buffer (stateless replies). */
int pp_h3__out_push(pp_h3_server *srv, const uint8_t *data, size_t len,
                    const struct sockaddr *local, socklen_t local_len,
                    const struct sockaddr *remote, socklen_t remote_len) {
  pp_h3_datagram *d = pp_h3__out_slot(srv);
  if (!d || len > sizeof d->data) {
    srv->stats.drop_out_queue_full++;
    return -1;
  }
  pp_h3__out_set_addrs(d, local, local_len, remote, remote_len);
  memcpy(d->data, data, len);
  pp_h3__out_commit(srv, d, len);
  return 0;
}

const pp_h3_datagram *pp_h3_server_out_peek(pp_h3_server *srv) {
  return srv->out_len ? &srv->outq[srv->out_head] : NULL;
}

const pp_h3_datagram *pp_h3_server_out_at(pp_h3_server *srv, size_t i) {
  return i < srv->out_len ? &srv->outq[(srv->out_head + i) % srv->cfg.limits.out_queue] : NULL;
}

void pp_h3_server_out_pop(pp_h3_server *srv) {
  if (!srv->out_len) return;
  srv->out_head = (srv->out_head + 1) % srv->cfg.limits.out_queue;
  srv->out_len--;
}

size_t pp_h3_server_out_count(const pp_h3_server *srv) {
  return srv->out_len;
}

static void reap(pp_h3_server *srv) {
  for (pp_h3_conn *c = srv->conns; c;) {
    pp_h3_conn *next = c->next;
    if (c->state == CS_DEAD) pp_h3__conn_free(c);
    c = next;
  }
}

static void path_of(pp_h3_conn *c, ngtcp2_path *path, const struct sockaddr *local,
                    socklen_t local_len, const struct sockaddr *remote, socklen_t remote_len) {
  (void)c;
  path->local.addr = (ngtcp2_sockaddr *)(uintptr_t)local;
  path->local.addrlen = local_len;
  path->remote.addr = (ngtcp2_sockaddr *)(uintptr_t)remote;
  path->remote.addrlen = remote_len;
  path->user_data = NULL;
}

/* ---- stateless replies ---- */

static void send_version_negotiation(pp_h3_server *srv, const ngtcp2_version_cid *vc,
                                     const struct sockaddr *local, socklen_t local_len,
                                     const struct sockaddr *remote, socklen_t remote_len) {
  uint8_t buf[256];
  uint8_t unused;
  pp_h3__rand_bytes(srv, &unused, 1);
  /* One greased version (RFC 9000 §6.3, 0x?a?a?a?a) beside v1 keeps clients honest. */
  uint32_t sv[2] = {NGTCP2_PROTO_VER_V1, 0x1a2a3a4au};
  ngtcp2_ssize n = ngtcp2_pkt_write_version_negotiation(buf, sizeof buf, unused, vc->scid,
                                                        vc->scidlen, vc->dcid, vc->dcidlen, sv, 2);
  if (n < 0) return;
  if (pp_h3__out_push(srv, buf, (size_t)n, local, local_len, remote, remote_len) == 0)
    srv->stats.version_negotiations++;
}

static void send_retry(pp_h3_server *srv, const ngtcp2_pkt_hd *hd, const struct sockaddr *local,
                       socklen_t local_len, const struct sockaddr *remote, socklen_t remote_len,
                       uint64_t now) {
  uint8_t token[NGTCP2_CRYPTO_MAX_RETRY_TOKENLEN];
  uint8_t scid_bytes[PP_H3_SCID_LEN];
  ngtcp2_cid scid;
  /* The Retry's SCID must differ from the client's DCID (ngtcp2 asserts it; fuzz finding 8,
   * reachable only with a predictable rand): draw again, and drop the datagram if it keeps
   * coming out equal. */
  int tries = 0;
  do {
    if (++tries > 4) return;
    pp_h3__rand_bytes(srv, scid_bytes, sizeof scid_bytes);
    ngtcp2_cid_init(&scid, scid_bytes, sizeof scid_bytes);
  } while (ngtcp2_cid_eq(&scid, &hd->dcid));
  ngtcp2_ssize tokenlen = ngtcp2_crypto_generate_retry_token(
      token, srv->cfg.secret, PP_H3_SECRET_LEN, hd->version, (const ngtcp2_sockaddr *)remote,
      remote_len, &scid, &hd->dcid, now);
  if (tokenlen < 0) return;
  uint8_t buf[256];
  ngtcp2_ssize n = ngtcp2_crypto_write_retry(buf, sizeof buf, hd->version, &hd->scid, &scid,
                                             &hd->dcid, token, (size_t)tokenlen);
  if (n < 0) return;
  if (pp_h3__out_push(srv, buf, (size_t)n, local, local_len, remote, remote_len) == 0)
    srv->stats.retries_sent++;
}

/* CONNECTION_CLOSE(INVALID_TOKEN) in an Initial protected with the keys of the client's DCID
 * (what it expects from us): our SCID is that DCID, as ngtcp2's examples do. */
static void send_invalid_token_close(pp_h3_server *srv, const ngtcp2_pkt_hd *hd,
                                     const struct sockaddr *local, socklen_t local_len,
                                     const struct sockaddr *remote, socklen_t remote_len) {
  uint8_t buf[PP_H3_MAX_DATAGRAM];
  ngtcp2_ssize n = ngtcp2_crypto_write_connection_close(buf, sizeof buf, hd->version, &hd->scid,
                                                        &hd->dcid, NGTCP2_INVALID_TOKEN, NULL, 0);
  if (n > 0) pp_h3__out_push(srv, buf, (size_t)n, local, local_len, remote, remote_len);
}

static void send_stateless_reset(pp_h3_server *srv, const uint8_t *dcid, size_t len, size_t pktlen,
                                 const struct sockaddr *local, socklen_t local_len,
                                 const struct sockaddr *remote, socklen_t remote_len,
                                 uint64_t now) {
  const pp_h3_limits *l = &srv->cfg.limits;
  /* Token bucket: reset_rate per second, reset_burst deep. */
  if (now > srv->reset_last_ns) {
    srv->reset_tokens += (double)(now - srv->reset_last_ns) * l->reset_rate / 1e9;
    if (srv->reset_tokens > l->reset_burst) srv->reset_tokens = l->reset_burst;
    srv->reset_last_ns = now;
  }
  /* RFC 9000 §10.3: shorter than the packet that triggered it (no loops between two servers),
   * and at least 21 bytes, so a packet of 22 bytes or less gets none. */
  size_t randlen = pktlen > 1 + NGTCP2_STATELESS_RESET_TOKENLEN
                       ? pktlen - 1 - NGTCP2_STATELESS_RESET_TOKENLEN
                       : 0;
  if (randlen > 40) randlen = 40;
  if (randlen < NGTCP2_MIN_STATELESS_RESET_RANDLEN + 1 || srv->reset_tokens < 1.0) {
    srv->stats.resets_rate_limited++;
    return;
  }
  srv->reset_tokens -= 1.0;
  ngtcp2_cid cid;
  ngtcp2_cid_init(&cid, dcid, len);
  uint8_t token[NGTCP2_STATELESS_RESET_TOKENLEN];
  if (ngtcp2_crypto_generate_stateless_reset_token(token, srv->cfg.secret, PP_H3_SECRET_LEN,
                                                   &cid) != 0)
    return;
  uint8_t rnd[40], buf[64];
  pp_h3__rand_bytes(srv, rnd, randlen);
  ngtcp2_ssize n = ngtcp2_pkt_write_stateless_reset(buf, sizeof buf, token, rnd, randlen - 1);
  if (n < 0) return;
  if (pp_h3__out_push(srv, buf, (size_t)n, local, local_len, remote, remote_len) == 0)
    srv->stats.stateless_resets++;
}

/* ---- the server ---- */

int pp_h3_server_init(pp_h3_server *srv, const pp_h3_callbacks *cb, const pp_h3_config *cfg,
                      void *data) {
  if (!srv || !cb || !cfg || !cfg->cert_file || !cfg->key_file) return PP_H3_EINVAL;
  memset(srv, 0, sizeof *srv);
  srv->cb = cb;
  srv->cfg = *cfg;
  srv->cfg.cert_file = srv->cfg.key_file = NULL;
  srv->data = data;
  pp_h3_limits *l = &srv->cfg.limits;
  if (l->conn_window == 0) {
    uint64_t sum = (uint64_t)l->max_streams_bidi * l->stream_window;
    l->conn_window = sum > UINT32_MAX ? UINT32_MAX : (uint32_t)sum;
  }
  if (l->body_piece == 0) l->body_piece = 1;
  if (l->out_queue == 0 || l->max_streams_bidi == 0 || l->conn_window < l->stream_window)
    return PP_H3_EINVAL;
  gnutls_certificate_credentials_t cred;
  if (gnutls_certificate_allocate_credentials(&cred) != 0) return PP_H3_ETLS;
  if (gnutls_certificate_set_x509_key_file2(cred, cfg->cert_file, cfg->key_file,
                                            GNUTLS_X509_FMT_PEM, NULL, 0) < 0) {
    gnutls_certificate_free_credentials(cred);
    return PP_H3_ECERT;
  }
  gnutls_priority_t prio;
  if (gnutls_priority_init2(&prio, PRIORITY, NULL, 0) != 0) {
    gnutls_certificate_free_credentials(cred);
    return PP_H3_ETLS;
  }
  srv->cred = cred;
  srv->priority = prio;
  srv->cid_nbuckets = 1024;
  srv->cid_buckets = pp_h3__xcalloc(srv->cid_nbuckets, sizeof(void *));
  srv->outq = pp_h3__xcalloc(l->out_queue, sizeof *srv->outq);
  srv->reset_tokens = l->reset_burst;
  pp_buf_init(&srv->scratch);
  pp_buf_init(&srv->nvbuf);
  return 0;
}

void pp_h3_server_dispose(pp_h3_server *srv) {
  while (srv->conns)
    pp_h3__conn_free(srv->conns);
  for (chunk *k = srv->chunk_free; k;) {
    chunk *next = k->next;
    free(k);
    k = next;
  }
  for (pp_h3_stream *s = srv->stream_free; s;) {
    pp_h3_stream *next = s->next;
    pp_buf_dispose(&s->hdr_raw);
    pp_buf_dispose(&s->hdr_spans);
    pp_buf_dispose(&s->hdr_list);
    pp_buf_dispose(&s->body_pend);
    free(s);
    s = next;
  }
  free(srv->cid_buckets);
  free(srv->outq);
  pp_buf_dispose(&srv->scratch);
  pp_buf_dispose(&srv->nvbuf);
  gnutls_priority_deinit(srv->priority);
  gnutls_certificate_free_credentials(srv->cred);
  memset(srv, 0, sizeof *srv);
}

/* Visits every connection touched since the last visit: hands gathered body bytes to the owner
 * (when `deliver`: the end of the owner's batch, not of each datagram), writes what it has to
 * send and reports a changed deadline. A connection that still wants to write (full out queue)
 * or still holds body bytes goes back on the list for the next flush. */
static void flush_all(pp_h3_server *srv, uint64_t now, int deliver) {
  pp_h3_conn *c = srv->dirty;
  srv->dirty = NULL;
  while (c) {
    pp_h3_conn *next = c->dirty_next;
    /* still marked: what the owner's on_body does to c is written just below */
    if (deliver && c->body_pend) pp_h3__conn_deliver_body(c);
    c->dirty = 0;
    c->dirty_next = NULL;
    if (c->want_write || c->goaway_requested) pp_h3__conn_write(c, now);
    if (c->body_pend && c->state == CS_OPEN) pp_h3__conn_mark(c);
    if (c->state != CS_DEAD && srv->cb->on_conn_timer) {
      uint64_t e = pp_h3_conn_expiry(c);
      if (e != c->armed) {
        c->armed = e;
        srv->cb->on_conn_timer(srv, c, e);
      }
    }
    c = next;
  }
}

int pp_h3_server_recv(pp_h3_server *srv, const uint8_t *pkt, size_t len,
                      const struct sockaddr *local, socklen_t local_len,
                      const struct sockaddr *remote, socklen_t remote_len, uint32_t ecn,
                      uint64_t now_ns) {
  if (srv->depth) return PP_H3_EREENTER;
  if (!pkt || !local || !remote || local_len > sizeof(struct sockaddr_storage) ||
      remote_len > sizeof(struct sockaddr_storage))
    return PP_H3_EINVAL;
  srv->stats.datagrams_in++;
  srv->stats.bytes_in += len;
  if (len == 0) { /* ngtcp2_pkt_decode_version_cid asserts on an empty datagram */
    srv->stats.drop_garbage++;
    return 0;
  }
  ngtcp2_version_cid vc;
  int rv = ngtcp2_pkt_decode_version_cid(&vc, pkt, len, PP_H3_SCID_LEN);
  if (rv == NGTCP2_ERR_VERSION_NEGOTIATION) {
    srv->stats.drop_bad_version++;
    /* Only for a datagram big enough to be a client's first flight (RFC 9000 §6.1). */
    if (len >= MIN_INITIAL_DATAGRAM)
      send_version_negotiation(srv, &vc, local, local_len, remote, remote_len);
    return 0;
  }
  if (rv != 0) {
    /* ngtcp2 only asks for Version Negotiation at 1200 bytes and up; a smaller long header of
     * a version we do not speak is still that, not garbage. */
    if (len >= 5 && (pkt[0] & 0x80)) {
      uint32_t v = (uint32_t)pkt[1] << 24 | (uint32_t)pkt[2] << 16 | (uint32_t)pkt[3] << 8 | pkt[4];
      if (v != 0 && !ngtcp2_is_supported_version(v)) {
        srv->stats.drop_bad_version++;
        return 0;
      }
    }
    srv->stats.drop_garbage++;
    return 0;
  }
  ngtcp2_path path;
  path_of(NULL, &path, local, local_len, remote, remote_len);
  struct cid_entry *e = pp_h3__cid_find(srv, vc.dcid, vc.dcidlen);
  if (e) {
    srv->depth++;
    pp_h3__conn_recv(e->conn, pkt, len, &path, ecn, now_ns);
    flush_all(srv, now_ns, 0);
    srv->depth--;
    reap(srv);
    return 0;
  }
  if (!(pkt[0] & 0x80)) {
    srv->stats.drop_unknown_cid++;
    send_stateless_reset(srv, vc.dcid, vc.dcidlen, len, local, local_len, remote, remote_len,
                         now_ns);
    return 0;
  }
  ngtcp2_pkt_hd hd;
  ngtcp2_ssize hdlen = ngtcp2_pkt_decode_hd_long(&hd, pkt, len);
  if (hdlen < 0) {
    srv->stats.drop_garbage++;
    return 0;
  }
  if (hd.type != NGTCP2_PKT_INITIAL) {
    srv->stats.drop_unknown_cid++; /* 0-RTT / Handshake for no connection of ours */
    return 0;
  }
  if (len < MIN_INITIAL_DATAGRAM) {
    srv->stats.drop_small_initial++;
    return 0;
  }
  if (len > srv->cfg.limits.max_initial_datagram) {
    srv->stats.drop_large_initial++;
    return 0;
  }
  if ((size_t)hdlen + hd.len > len) {
    srv->stats.drop_truncated++;
    return 0;
  }
  if (ngtcp2_accept(&hd, pkt, len) != 0) {
    srv->stats.drop_garbage++;
    return 0;
  }
  ngtcp2_cid odcid = hd.dcid;
  int retried = 0, validated = 0;
  if (hd.token.len) {
    if (hd.token.base[0] == NGTCP2_CRYPTO_TOKEN_MAGIC_RETRY) {
      if (ngtcp2_crypto_verify_retry_token(&odcid, hd.token.base, hd.token.len, srv->cfg.secret,
                                           PP_H3_SECRET_LEN, hd.version,
                                           (const ngtcp2_sockaddr *)remote, remote_len, &hd.dcid,
                                           srv->cfg.limits.retry_token_ttl_ns, now_ns) != 0) {
        srv->stats.drop_token_invalid++;
        send_invalid_token_close(srv, &hd, local, local_len, remote, remote_len);
        return 0;
      }
      retried = validated = 1;
    } else if (hd.token.base[0] == NGTCP2_CRYPTO_TOKEN_MAGIC_REGULAR &&
               ngtcp2_crypto_verify_regular_token(hd.token.base, hd.token.len, srv->cfg.secret,
                                                  PP_H3_SECRET_LEN, (const ngtcp2_sockaddr *)remote,
                                                  remote_len, 3600 * NGTCP2_SECONDS, now_ns) == 0) {
      validated = 1;
    } else {
      hd.token.len = 0; /* unknown or stale: as if none */
    }
  }
  if (srv->cfg.retry && !validated) {
    send_retry(srv, &hd, local, local_len, remote, remote_len, now_ns);
    return 0;
  }
  if (srv->conn_count >= srv->cfg.limits.max_connections) {
    srv->stats.drop_too_many_conns++;
    return 0;
  }
  pp_h3_conn *c;
  srv->depth++;
  if (pp_h3__conn_new(srv, &hd, &odcid, retried, &path, now_ns, &c) == 0) {
    pp_h3__conn_recv(c, pkt, len, &path, ecn, now_ns);
    flush_all(srv, now_ns, 0);
  }
  srv->depth--;
  reap(srv);
  return 0;
}

int pp_h3_server_flush(pp_h3_server *srv, uint64_t now_ns) {
  if (srv->depth) return PP_H3_EREENTER;
  srv->depth++;
  flush_all(srv, now_ns, 1);
  srv->depth--;
  reap(srv);
  return 0;
}

int pp_h3_conn_handle_expiry(pp_h3_conn *c, uint64_t now_ns) {
  pp_h3_server *srv = c->srv;
  if (srv->depth) return PP_H3_EREENTER;
  srv->depth++;
  pp_h3__conn_expire(c, now_ns);
  flush_all(srv, now_ns, 1);
  srv->depth--;
  int gone = c->state == CS_DEAD;
  reap(srv);
  return gone;
}

uint64_t pp_h3_server_expiry(pp_h3_server *srv) {
  uint64_t t = srv->dirty ? 0 : UINT64_MAX; /* touched: a flush is due */
  for (pp_h3_conn *c = srv->conns; c; c = c->next)
    t = min_u64(t, pp_h3_conn_expiry(c));
  return t;
}

int pp_h3_server_handle_expiry(pp_h3_server *srv, uint64_t now_ns) {
  if (srv->depth) return PP_H3_EREENTER;
  srv->depth++;
  for (pp_h3_conn *c = srv->conns; c; c = c->next)
    if (pp_h3_conn_expiry(c) <= now_ns) pp_h3__conn_expire(c, now_ns);
  flush_all(srv, now_ns, 1);
  srv->depth--;
  reap(srv);
  return 0;
}

int pp_h3_server_shutdown(pp_h3_server *srv, uint64_t now_ns) {
  if (srv->depth) return PP_H3_EREENTER;
  for (pp_h3_conn *c = srv->conns; c; c = c->next)
    pp_h3_conn_goaway(c);
  return pp_h3_server_flush(srv, now_ns);
}

size_t pp_h3_server_conn_count(const pp_h3_server *srv) {
  return srv->conn_count;
}
