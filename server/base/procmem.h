/* A process's memory from /proc/PID/smaps_rollup: RSS, PSS and USS (Private_Clean +
 * Private_Dirty). Header-only, shared by the server's /stats (stats.c) and pp-bench's
 * samples (bench/harness.c), which must measure the same way. */
#ifndef PP_PROCMEM_H
#define PP_PROCMEM_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* 0, or -1 when the file cannot be read or lacks a field (the process is gone). */
static inline int pp_smaps_rollup_read(unsigned pid, uint64_t *rss, uint64_t *pss, uint64_t *uss) {
  char path[64], line[256];
  *rss = *pss = *uss = 0;
  snprintf(path, sizeof path, "/proc/%u/smaps_rollup", pid);
  FILE *f = fopen(path, "re");
  if (!f) return -1;
  uint64_t r = 0, p = 0, clean = 0, dirty = 0;
  int seen = 0;
  while (fgets(line, sizeof line, f)) {
    unsigned long long kb;
    /* "Pss:" alone, not Pss_Anon / Pss_File / Pss_Shmem / Pss_Dirty (kernel 5.x and later) */
    if (sscanf(line, "Rss: %llu kB", &kb) == 1)
      r = kb * 1024, seen |= 1;
    else if (sscanf(line, "Pss: %llu kB", &kb) == 1)
      p = kb * 1024, seen |= 2;
    else if (sscanf(line, "Private_Clean: %llu kB", &kb) == 1)
      clean = kb * 1024, seen |= 4;
    else if (sscanf(line, "Private_Dirty: %llu kB", &kb) == 1)
      dirty = kb * 1024, seen |= 8;
  }
  fclose(f);
  if (seen != 15) return -1;
  *rss = r;
  *pss = p;
  *uss = clean + dirty;
  return 0;
}

/* A process's CPU time (utime + stime, all its threads) from /proc/PID/stat, in nanoseconds:
 * the per-worker signal of docs/DESIGN.md 3b (its change per tick is a share of one core).
 * 0, or -1 when the file cannot be read or parsed (the process is gone). */
static inline int pp_proc_cpu_read(unsigned pid, uint64_t *cpu_ns) {
  char path[64], line[1024];
  *cpu_ns = 0;
  snprintf(path, sizeof path, "/proc/%u/stat", pid);
  FILE *f = fopen(path, "re");
  if (!f) return -1;
  size_t n = fread(line, 1, sizeof line - 1, f);
  fclose(f);
  line[n] = 0;
  /* comm (field 2) may hold spaces and parentheses: fields 3.. start after the last ')' */
  const char *p = strrchr(line, ')');
  unsigned long long utime, stime;
  if (!p ||
      sscanf(p + 1, "%*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %llu %llu", &utime, &stime) != 2)
    return -1;
  long hz = sysconf(_SC_CLK_TCK);
  if (hz <= 0) hz = 100;
  *cpu_ns = (utime + stime) * (1000000000ull / (uint64_t)hz);
  return 0;
}

#endif
