/* The reference servers' loop, thread, stop, stall and request count (see nullsrv_base.h). */
#include "bench/refsrv/nullsrv_base.h"

#include <fcntl.h>
#include <stdatomic.h>
#include <stddef.h>
#include <time.h>

#include <openssl/x509v3.h>

void pb_nullsrv_loop_init(pb_nullsrv_loop *l, const pb_nullsrv_config *cfg) {
  uv_loop_init(&l->loop);
  l->stall_at_ns = cfg->stall_at_ns;
  l->stall_ns = cfg->stall_ns;
  l->leak_every = cfg->leak_every;
}

/* Blocks the whole loop, as a GC pause or a stuck process would. */
static void on_stall(uv_timer_t *t) {
  pb_nullsrv_loop *l = (pb_nullsrv_loop *)((char *)t - offsetof(pb_nullsrv_loop, stall_timer));
  l->stall_began = uv_hrtime();
  struct timespec ts = {.tv_sec = (time_t)(l->stall_ns / 1000000000u),
                        .tv_nsec = (long)(l->stall_ns % 1000000000u)};
  while (nanosleep(&ts, &ts) != 0) {}
  l->stall_ended = uv_hrtime();
}

static void thread_main(void *arg) {
  pb_nullsrv_loop *l = arg;
  uv_run(&l->loop, UV_RUN_DEFAULT);
}

void pb_nullsrv_loop_run(pb_nullsrv_loop *l, uv_async_cb stop_cb, void *server) {
  uv_async_init(&l->loop, &l->stop_async, stop_cb);
  l->stop_async.data = server;
  uv_timer_init(&l->loop, &l->stall_timer);
  l->stall_timer.data = server;
  if (l->stall_at_ns && l->stall_ns) {
    uint64_t now = uv_hrtime();
    uint64_t in_ms = l->stall_at_ns > now ? (l->stall_at_ns - now) / 1000000u : 0;
    uv_timer_start(&l->stall_timer, on_stall, in_ms, 0);
  }
  uv_thread_create(&l->thread, thread_main, l);
}

void pb_nullsrv_loop_count(pb_nullsrv_loop *l) {
  uint64_t n = atomic_fetch_add(&l->served, 1) + 1;
  if (l->leak_every && n % l->leak_every == 0) {
    int leaked = open("/dev/null", O_RDONLY | O_CLOEXEC);
    (void)leaked;
  }
}

uint64_t pb_nullsrv_loop_served(const pb_nullsrv_loop *l) {
  return atomic_load(&((pb_nullsrv_loop *)l)->served);
}

void pb_nullsrv_loop_stop(pb_nullsrv_loop *l, uint64_t *stall_began_ns, uint64_t *stall_ended_ns) {
  uv_async_send(&l->stop_async);
  uv_thread_join(&l->thread);
  uv_loop_close(&l->loop);
  if (stall_began_ns) *stall_began_ns = l->stall_began;
  if (stall_ended_ns) *stall_ended_ns = l->stall_ended;
}

int pb_nullsrv_self_signed(EVP_PKEY **key_out, X509 **cert_out) {
  EVP_PKEY *key = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
  X509 *x = X509_new();
  int ok = key && x;
  if (ok) {
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_gmtime_adj(X509_getm_notBefore(x), -60);
    X509_gmtime_adj(X509_getm_notAfter(x), 86400);
    X509_set_pubkey(x, key);
    X509_NAME *name = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"localhost", -1, -1,
                               0);
    X509_set_issuer_name(x, name);
    X509_EXTENSION *san =
        X509V3_EXT_conf_nid(NULL, NULL, NID_subject_alt_name, "DNS:localhost,IP:127.0.0.1");
    if (san) {
      X509_add_ext(x, san, -1);
      X509_EXTENSION_free(san);
    }
    ok = X509_sign(x, key, EVP_sha256()) > 0;
  }
  if (!ok) {
    X509_free(x);
    EVP_PKEY_free(key);
    return -1;
  }
  *key_out = key;
  *cert_out = x;
  return 0;
}
