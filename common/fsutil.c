/* POSIX file helpers (see fsutil.h). */
#include "fsutil.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "muster/errno.h"

int mu_write_all(int fd, const void *p, size_t n)
{
  const char *c = p;
  if (fd < 0)
    return -EBADF;
  while (n > 0) {
    ssize_t w = write(fd, c, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return MU_EIO;
    c += w;
    n -= (size_t)w;
  }
  return 0;
}

int mu_mkdir_p(const char *path)
{
  char tmp[PATH_MAX];
  if (snprintf(tmp, sizeof(tmp), "%s", path) >= (int)sizeof(tmp))
    return MU_E2BIG;
  for (char *p = tmp + 1; *p; p++) {
    if (*p == '/') {
      *p = '\0';
      if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
        return -errno;
      *p = '/';
    }
  }
  if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
    return -errno;
  return 0;
}
