/* malloc_count: an LD_PRELOAD shared object that counts the calls a process makes to malloc,
 * calloc, realloc and free (free of NULL is not counted), and the bytes asked for, so that a
 * script can read allocations per request off a running server (allocs_per_request.sh).
 *
 *   cc -O2 -shared -fPIC -o malloc_count.so server/tools/malloc_count.c -ldl
 *   MALLOC_COUNT_FILE=/tmp/counts LD_PRELOAD=./malloc_count.so puma-plus-server ...
 *   kill -USR2 <pid>; cat /tmp/counts
 *
 * The counts are written to $MALLOC_COUNT_FILE on SIGRTMIN+3 and at exit, as lines "name value"
 * (seq, malloc, calloc, realloc, free, bytes); seq grows by one per dump so a reader can wait
 * for a fresh one. The file is written to FILE.tmp and renamed, with only async-signal-safe
 * calls, so a reader never sees half a dump. posix_memalign / aligned_alloc / memalign are
 * not counted (nothing on the server's path uses them directly).
 *
 * Workload: any number of threads; the counters are relaxed atomics (one locked add per call).
 * LD_PRELOAD is removed from the environment at load time so that the processes the server
 * spawns (the Ruby shepherd and workers) are not counted; set MALLOC_COUNT_INHERIT=1 to keep
 * it. A benchmarking aid, not part of the server. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void (*real_free)(void *);

static atomic_ulong count_malloc, count_calloc, count_realloc, count_free, bytes_asked, dumps;

/* dlsym may call calloc before real_calloc is known: serve those from a static arena. */
static _Alignas(16) char boot_arena[16384];
static atomic_size_t boot_used;
static atomic_int resolving;

static int in_arena(const void *p) {
  return (const char *)p >= boot_arena && (const char *)p < boot_arena + sizeof boot_arena;
}

static void *boot_alloc(size_t n) {
  size_t need = (n + 15) & ~(size_t)15;
  size_t at = atomic_fetch_add(&boot_used, need);
  if (at + need > sizeof boot_arena) return NULL;
  return boot_arena + at; /* static storage: already zero */
}

static void resolve(void) {
  if (real_malloc) return;
  atomic_store(&resolving, 1);
  real_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
  real_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
  real_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
  real_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
  atomic_store(&resolving, 0);
}

void *malloc(size_t n) {
  if (!real_malloc) {
    if (atomic_load(&resolving)) return boot_alloc(n);
    resolve();
  }
  atomic_fetch_add_explicit(&count_malloc, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&bytes_asked, n, memory_order_relaxed);
  return real_malloc(n);
}

void *calloc(size_t k, size_t n) {
  if (!real_calloc) {
    if (atomic_load(&resolving)) return boot_alloc(k * n);
    resolve();
  }
  atomic_fetch_add_explicit(&count_calloc, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&bytes_asked, k * n, memory_order_relaxed);
  return real_calloc(k, n);
}

void *realloc(void *p, size_t n) {
  if (!real_realloc) resolve();
  if (in_arena(p)) { /* never happens in practice: copy out of the arena */
    void *q = malloc(n);
    if (q) memcpy(q, p, n < 64 ? n : 64);
    return q;
  }
  atomic_fetch_add_explicit(&count_realloc, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&bytes_asked, n, memory_order_relaxed);
  return real_realloc(p, n);
}

void free(void *p) {
  if (!p || in_arena(p)) return;
  if (!real_free) resolve();
  atomic_fetch_add_explicit(&count_free, 1, memory_order_relaxed);
  real_free(p);
}

/* ---- dumping, async-signal-safe ---- */

static char out_path[4096], tmp_path[4100];

static size_t put_line(char *buf, size_t at, const char *name, unsigned long v) {
  size_t n = strlen(name);
  memcpy(buf + at, name, n);
  at += n;
  buf[at++] = ' ';
  char digits[24];
  int d = 0;
  do {
    digits[d++] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  while (d)
    buf[at++] = digits[--d];
  buf[at++] = '\n';
  return at;
}

static void dump(void) {
  if (!out_path[0]) return;
  char buf[512];
  size_t at = 0;
  at = put_line(buf, at, "seq", atomic_fetch_add(&dumps, 1) + 1);
  at = put_line(buf, at, "malloc", atomic_load(&count_malloc));
  at = put_line(buf, at, "calloc", atomic_load(&count_calloc));
  at = put_line(buf, at, "realloc", atomic_load(&count_realloc));
  at = put_line(buf, at, "free", atomic_load(&count_free));
  at = put_line(buf, at, "bytes", atomic_load(&bytes_asked));
  int fd = open(tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  ssize_t w = write(fd, buf, at);
  close(fd);
  if (w == (ssize_t)at) rename(tmp_path, out_path);
}

static void on_usr2(int sig) {
  (void)sig;
  int saved = errno;
  dump();
  errno = saved;
}

__attribute__((constructor)) static void malloc_count_init(void) {
  resolve();
  const char *f = getenv("MALLOC_COUNT_FILE");
  if (f && strlen(f) < sizeof out_path) {
    memcpy(out_path, f, strlen(f) + 1);
    memcpy(tmp_path, f, strlen(f));
    memcpy(tmp_path + strlen(f), ".tmp", 5);
  }
  if (!getenv("MALLOC_COUNT_INHERIT")) unsetenv("LD_PRELOAD");
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr2;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGRTMIN + 3, &sa, NULL); /* not SIGUSR2: the server hot-restarts on it */
}

__attribute__((destructor)) static void malloc_count_fini(void) {
  dump();
}
