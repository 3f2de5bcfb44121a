/* A plain driver for the fuzz targets: runs every file named on the command line (or found
 * in a directory named there) through LLVMFuzzerTestOneInput once, so the seed corpora and
 * the regression reproducers are ordinary tests in the gcc build and under ASan+UBSan.
 *
 * Usage: fuzz-replay-<name> [--suffix=.bin] PATH...
 * A directory is read non-recursively, in name order, skipping dot files; --suffix limits the
 * directories named after it to files ending in that suffix. A missing directory is skipped
 * with a note (regressions/<name>/ exists only once a finding has been fixed). Each input is
 * copied into a heap buffer of exactly its size, so ASan sees any read past its end.
 *
 * A target reports a failed property by aborting, and ASan/UBSan end the process on a
 * finding, so a crash never returns here: the input's path is printed first (from a death
 * callback or a signal handler) and the process exits non-zero, which fails the ctest. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef PP_FUZZ_NAME
#define PP_FUZZ_NAME "target"
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Provided by ASan's runtime (gcc and clang); absent in a plain build. */
extern void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

static char current_path[4096];

static void say_current(void) {
  const char *pre = "fuzz-replay " PP_FUZZ_NAME ": crash on input ";
  ssize_t rc = write(2, pre, strlen(pre));
  rc = write(2, current_path, strlen(current_path));
  rc = write(2, "\n", 1);
  (void)rc;
}

static void on_signal(int sig) {
  say_current();
  raise(sig); /* SA_RESETHAND restored the default action */
}

static int run_file(const char *path, size_t *inputs) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "fuzz-replay %s: cannot open %s: %s\n", PP_FUZZ_NAME, path, strerror(errno));
    return -1;
  }
  size_t cap = 4096, len = 0;
  uint8_t *buf = malloc(cap);
  if (!buf) abort();
  size_t n;
  while ((n = fread(buf + len, 1, cap - len, f)) > 0) {
    len += n;
    if (len == cap) {
      cap *= 2;
      buf = realloc(buf, cap);
      if (!buf) abort();
    }
  }
  int bad = ferror(f);
  fclose(f);
  if (bad) {
    fprintf(stderr, "fuzz-replay %s: cannot read %s\n", PP_FUZZ_NAME, path);
    free(buf);
    return -1;
  }
  /* An exact-size copy: a read one byte past the input is an ASan report, as in libFuzzer. */
  uint8_t *exact = malloc(len ? len : 1);
  if (!exact) abort();
  if (len) memcpy(exact, buf, len);
  free(buf);
  snprintf(current_path, sizeof current_path, "%s", path);
  LLVMFuzzerTestOneInput(exact, len);
  free(exact);
  (*inputs)++;
  return 0;
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static int ends_with(const char *s, const char *suffix) {
  size_t ls = strlen(s), lx = strlen(suffix);
  return ls >= lx && strcmp(s + ls - lx, suffix) == 0;
}

static int run_dir(const char *dir, const char *suffix, size_t *inputs) {
  DIR *d = opendir(dir);
  if (!d) {
    fprintf(stderr, "fuzz-replay %s: note: no directory %s, skipped\n", PP_FUZZ_NAME, dir);
    return 0;
  }
  size_t count = 0, cap = 64;
  char **names = malloc(cap * sizeof *names);
  if (!names) abort();
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    if (suffix && !ends_with(e->d_name, suffix)) continue;
    if (count == cap) {
      cap *= 2;
      names = realloc(names, cap * sizeof *names);
      if (!names) abort();
    }
    names[count++] = strdup(e->d_name);
  }
  closedir(d);
  qsort(names, count, sizeof *names, by_name);
  int rc = 0;
  for (size_t i = 0; i < count; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    struct stat st;
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && run_file(path, inputs) != 0) rc = -1;
    free(names[i]);
  }
  free(names);
  return rc;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s [--suffix=.ext] FILE-OR-DIR...\n", argv[0]);
    return 2;
  }
  if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(say_current);
  /* An alternate stack, so a stack overflow (runaway recursion) is reported too. */
  static char alt_stack[1 << 16];
  stack_t ss = {.ss_sp = alt_stack, .ss_size = sizeof alt_stack, .ss_flags = 0};
  sigaltstack(&ss, NULL);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_ONSTACK | SA_RESETHAND;
  /* Under ASan its own handlers report SEGV and friends (and call say_current); only abort(),
   * which the targets use for failed properties, needs ours there. */
  int sigs[] = {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL};
  size_t nsigs = __sanitizer_set_death_callback ? 1 : sizeof sigs / sizeof sigs[0];
  for (size_t i = 0; i < nsigs; i++)
    sigaction(sigs[i], &sa, NULL);

  size_t inputs = 0;
  int rc = 0;
  const char *suffix = NULL;
  for (int i = 1; i < argc; i++) {
    if (strncmp(argv[i], "--suffix=", 9) == 0) {
      suffix = argv[i] + 9;
      continue;
    }
    struct stat st;
    if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
      if (run_dir(argv[i], suffix, &inputs) != 0) rc = 1;
    } else if (stat(argv[i], &st) == 0) {
      if (run_file(argv[i], &inputs) != 0) rc = 1;
    } else {
      fprintf(stderr, "fuzz-replay %s: note: no file or directory %s, skipped\n", PP_FUZZ_NAME,
              argv[i]);
    }
  }
  /* Every input that reached this line ran to completion; a crash never gets here. */
  printf("fuzz-replay %s: %zu inputs, 0 crashes%s\n", PP_FUZZ_NAME, inputs,
         rc ? " (some inputs could not be read)" : "");
  if (inputs == 0) {
    fprintf(stderr, "fuzz-replay %s: no inputs found\n", PP_FUZZ_NAME);
    return 1;
  }
  return rc;
}
