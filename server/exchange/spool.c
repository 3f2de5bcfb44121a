/* Spool files for request bodies (see spool.h). */
#include "server/exchange/spool.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *pp_spool_dir(const char *dir) {
  if (dir && *dir) return dir;
  const char *t = getenv("TMPDIR");
  return t && *t ? t : "/tmp";
}

int pp_spool_open(const char *dir) {
#ifdef O_TMPFILE
  int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0) return fd;
  /* EOPNOTSUPP / EISDIR: the file system has no O_TMPFILE; anything else is real */
  if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL) return -errno;
#endif
  char path[4096];
  int n = snprintf(path, sizeof path, "%s/puma-plus-body.XXXXXX", dir);
  if (n < 0 || (size_t)n >= sizeof path) return -ENAMETOOLONG;
  int tfd = mkostemp(path, O_CLOEXEC);
  if (tfd < 0) return -errno;
  if (unlink(path) < 0) {
    int e = errno;
    close(tfd);
    return -e;
  }
  return tfd;
}

int pp_spool_write(int fd, const uint8_t *data, size_t len) {
  while (len) {
    ssize_t n = write(fd, data, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    if (n == 0) return -ENOSPC;
    data += n;
    len -= (size_t)n;
  }
  return 0;
}
