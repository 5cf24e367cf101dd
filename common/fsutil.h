/* Small POSIX file helpers shared by the launcher's local scheduler, its log readers and the
 * agent. Library code: never prints. */
#ifndef MU_FSUTIL_H
#define MU_FSUTIL_H

#include <stddef.h>

/* Writes all n bytes of p to fd, retrying short writes and EINTR.
 * Returns: 0; MU_EIO when a write fails (the rest is dropped); -EBADF, writing nothing, when fd
 * is negative (so that an optional log fd of -1 can be passed as it is).
 * Ownership: borrows p. */
int mu_write_all(int fd, const void *p, size_t n);

/* Creates the directory path and its missing parents (mode 0755); existing ones are fine.
 * Returns: 0; MU_E2BIG when path is longer than PATH_MAX; -errno from mkdir otherwise.
 * Ownership: borrows path. */
int mu_mkdir_p(const char *path);

#endif
