/* Spool files for request bodies (docs/SERVER.md "Request bodies"): a body over the memory
 * threshold is written to an unlinked temporary file before its request becomes runnable, and
 * the descriptor goes to the worker with the REQUEST (SCM_RIGHTS), so a slow upload never holds
 * a slot and the body is never copied through the worker socket. The workload: a few large
 * uploads at a time, written in the order their bytes arrive (64 KiB reads at most), so the
 * writes are plain write(2) calls into the page cache. */
#ifndef PP_SPOOL_H
#define PP_SPOOL_H

#include <stddef.h>
#include <stdint.h>

/* The directory bodies are spooled in: dir when set (-body-spool-dir), else $TMPDIR, else
 * /tmp. The returned string is dir or the environment's; it is never freed. */
const char *pp_spool_dir(const char *dir);

/* Opens an anonymous file in dir for reading and writing (O_TMPFILE where the file system has
 * it, else mkstemp then unlink): it has no name, so it vanishes with its last descriptor.
 * Returns the descriptor (close-on-exec), or -errno. */
int pp_spool_open(const char *dir);

/* Writes all len bytes of data at the file's offset, retrying short writes. 0, or -errno
 * (ENOSPC when the disk is full). */
int pp_spool_write(int fd, const uint8_t *data, size_t len);

#endif
