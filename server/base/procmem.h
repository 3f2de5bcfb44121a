/* A process's memory from /proc/PID/smaps_rollup: RSS, PSS and USS (Private_Clean +
 * Private_Dirty), and its CPU time and run-queue wait. Header-only, shared by the server's
 * /stats and controller (ops/stats.c, workers/wlink.c) and pp-bench's samples
 * (bench/harness/proc.c), which must measure the same way. */
#ifndef PP_PROCMEM_H
#define PP_PROCMEM_H

#include <dirent.h>
#include <fcntl.h>
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

/* A process's time on a CPU and time runnable but waiting for one (the run queue), summed over
 * its threads, from /proc/PID/task/TID/schedstat (ns). Their sum over a tick is the process's CPU
 * demand: a worker bound by Ruby's GVL demands about one core even when the machine gives it
 * less (more workers than cores, a busy neighbour), which utime + stime alone cannot show; a
 * worker that waits on I/O demands little either way. One read per thread: a worker of 1,000
 * thread slots costs 1,000 small reads per tick. 0, or -1 when the process is gone. */
static inline int pp_proc_sched_read(unsigned pid, uint64_t *run_ns, uint64_t *wait_ns) {
  char path[96], line[128];
  *run_ns = *wait_ns = 0;
  snprintf(path, sizeof path, "/proc/%u/task", pid);
  DIR *d = opendir(path);
  if (!d) return -1;
  struct dirent *e;
  int seen = 0;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    snprintf(path, sizeof path, "/proc/%u/task/%.16s/schedstat", pid, e->d_name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue; /* the thread ended meanwhile */
    ssize_t n = read(fd, line, sizeof line - 1);
    close(fd);
    if (n <= 0) continue;
    line[n] = 0;
    unsigned long long run, wait;
    if (sscanf(line, "%llu %llu", &run, &wait) != 2) continue;
    *run_ns += run;
    *wait_ns += wait;
    seen++;
  }
  closedir(d);
  return seen ? 0 : -1;
}

#endif
