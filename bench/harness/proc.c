/* /proc readers for pp-bench (harness.h): a process tree's memory (RSS, PSS, USS) and CPU time,
 * the machine's CPU times and steal. */
#include "bench/harness/harness.h"
#include "server/base/procmem.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <llhttp.h>
#include <uv.h>

/* ---- /proc ---- */

typedef struct proc_entry {
  pid_t pid, ppid, pgid;
  uint64_t rss_pages;
  uint64_t ticks; /* utime + stime, clock ticks, all threads */
  bool zombie;    /* exited, not reaped: no memory, but its CPU time still counts */
} proc_entry;

static bool read_stat(pid_t pid, proc_entry *e) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = 0;
  /* The command name may contain spaces and parentheses: fields start after the last ')'. */
  char *p = strrchr(buf, ')');
  if (!p) return false;
  char state;
  int ppid, pgrp;
  long rss = 0;
  unsigned long long utime, stime;
  /* fields: 3 state 4 ppid 5 pgrp ... 14 utime 15 stime ... 24 rss */
  if (sscanf(p + 2,
             "%c %d %d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d %*d "
             "%*u %*u %ld",
             &state, &ppid, &pgrp, &utime, &stime, &rss) != 6)
    return false;
  e->pid = pid;
  e->ppid = ppid;
  e->pgid = pgrp;
  e->rss_pages = rss > 0 ? (uint64_t)rss : 0;
  e->ticks = utime + stime;
  e->zombie = state == 'Z';
  return true;
}

int pb_smaps_rollup(pid_t pid, uint64_t *rss, uint64_t *pss, uint64_t *uss) {
  return pid < 0 ? -1 : pp_smaps_rollup_read((unsigned)pid, rss, pss, uss);
}

/* The tree of `root`: every process's entry in `all` (of `n`) with in[i] set. */
static int tree_scan(pid_t root, proc_entry **all_out, bool **in_out, size_t *n_out);

int pb_proc_tree_mem(pid_t root, pb_tree_mem *out) {
  proc_entry *all;
  bool *in;
  size_t n;
  memset(out, 0, sizeof *out);
  if (tree_scan(root, &all, &in, &n) < 0) return -1;
  uint64_t pages = 0;
  for (size_t i = 0; i < n; i++) {
    if (!in[i] || all[i].zombie) continue;
    out->procs++;
    pages += all[i].rss_pages;
    uint64_t r, p, u;
    if (pb_smaps_rollup(all[i].pid, &r, &p, &u) == 0) {
      out->smaps_procs++;
      out->pss_bytes += p;
      out->uss_bytes += u;
    }
  }
  free(in);
  free(all);
  out->rss_bytes = pages * (uint64_t)sysconf(_SC_PAGESIZE);
  return 0;
}

pb_cpu_times pb_cpu_times_now(void) {
  pb_cpu_times t = {0};
  FILE *f = fopen("/proc/stat", "r");
  if (!f) return t;
  unsigned long long v[8];
  int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                 &v[4], &v[5], &v[6], &v[7]);
  fclose(f);
  if (n != 8) return t;
  t.steal = v[7];
  for (int i = 0; i < 8; i++)
    t.total += v[i];
  t.ok = true;
  return t;
}

double pb_steal_pct(pb_cpu_times before, pb_cpu_times after) {
  if (!before.ok || !after.ok || after.total <= before.total || after.steal < before.steal)
    return -1;
  return 100.0 * (double)(after.steal - before.steal) / (double)(after.total - before.total);
}

void pb_dirname(const char *path, char *out, size_t len) {
  snprintf(out, len, "%s", path);
  char *slash = strrchr(out, '/');
  if (slash)
    *slash = 0;
  else
    snprintf(out, len, ".");
}

int pb_proc_tree_cpu(pid_t root, uint64_t *tree_ticks, uint64_t *root_ticks, uint32_t *procs) {
  proc_entry *all;
  bool *in;
  size_t n;
  if (tree_scan(root, &all, &in, &n) < 0) return -1;
  uint64_t tree = 0, own = 0;
  uint32_t count = 0;
  for (size_t i = 0; i < n; i++) {
    if (!in[i]) continue;
    count++;
    tree += all[i].ticks;
    if (all[i].pid == root) own = all[i].ticks;
  }
  free(in);
  free(all);
  *tree_ticks = tree;
  if (root_ticks) *root_ticks = own;
  if (procs) *procs = count;
  return 0;
}

static int tree_scan(pid_t root, proc_entry **all_out, bool **in_out, size_t *n_out) {
  DIR *d = opendir("/proc");
  if (!d) return -1;
  size_t cap = 512, n = 0;
  proc_entry *all = malloc(cap * sizeof *all);
  if (!all) {
    closedir(d);
    return -1;
  }
  struct dirent *de;
  while ((de = readdir(d))) {
    if (de->d_name[0] < '0' || de->d_name[0] > '9') continue;
    proc_entry e;
    if (!read_stat((pid_t)atoi(de->d_name), &e)) continue;
    if (n == cap) {
      proc_entry *bigger = realloc(all, 2 * cap * sizeof *all);
      if (!bigger) break;
      all = bigger;
      cap *= 2;
    }
    all[n++] = e;
  }
  closedir(d);
  /* In the tree: the root's process group, or a descendant of anything in the tree. Iterate to
   * a fixed point (trees here are a handful of processes deep). */
  bool *in = calloc(n ? n : 1, sizeof *in);
  if (!in) {
    free(all);
    return -1;
  }
  for (size_t i = 0; i < n; i++)
    in[i] = all[i].pid == root || all[i].pgid == root;
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < n; i++) {
      if (in[i]) continue;
      for (size_t j = 0; j < n; j++) {
        if (in[j] && all[i].ppid == all[j].pid) {
          in[i] = changed = true;
          break;
        }
      }
    }
  }
  *all_out = all;
  *in_out = in;
  *n_out = n;
  return 0;
}
