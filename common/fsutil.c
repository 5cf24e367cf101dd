/* POSIX file helpers (see fsutil.h). */
#include "fsutil.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "muster/errno.h"

#include "alloc.h"
#include "buf.h"

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

int mu_read_file_tail(const char *path, size_t max, struct mu_buf *out)
{
  struct stat st;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  int rc = 0;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (size_t)st.st_size > max &&
      lseek(fd, st.st_size - (off_t)max, SEEK_SET) < 0)
    rc = -errno;
  char chunk[16384];
  size_t total = 0;
  while (rc == 0 && total < max) {
    size_t want = max - total < sizeof(chunk) ? max - total : sizeof(chunk);
    ssize_t n = read(fd, chunk, want);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      rc = -errno;
    if (n <= 0)
      break;
    if (mu_buf_append(out, chunk, (size_t)n) != 0)
      break;
    total += (size_t)n;
  }
  close(fd);
  return rc;
}

int mu_read_file(const char *path, size_t max, struct mu_buf *out)
{
  char chunk[16384];
  int rc = 0;
  size_t total = 0;
  struct stat st;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
    mu_buf_reserve(out, (size_t)st.st_size < max ? (size_t)st.st_size : max);
  for (;;) {
    ssize_t n = read(fd, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      rc = -errno;
      break;
    }
    if (n == 0)
      break;
    if ((size_t)n > max - total) {
      mu_buf_append(out, chunk, max - total);
      rc = MU_E2BIG;
      break;
    }
    if (mu_buf_append(out, chunk, (size_t)n) != 0) {
      rc = MU_E2BIG;
      break;
    }
    total += (size_t)n;
  }
  close(fd);
  return rc;
}

static int fsync_dir_of(const char *path)
{
  char dir[PATH_MAX];
  const char *slash = strrchr(path, '/');
  if (slash == NULL)
    snprintf(dir, sizeof(dir), ".");
  else if (slash == path)
    snprintf(dir, sizeof(dir), "/");
  else if (snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path) >= (int)sizeof(dir))
    return MU_E2BIG;
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  int rc = fsync(fd) == 0 ? 0 : -errno;
  close(fd);
  return rc;
}

int mu_write_file_atomic(const char *path, const void *data, size_t len, int mode, unsigned flags)
{
  char tmp[PATH_MAX];
  int rc = 0, fd = -1;
  if (snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof(tmp))
    return MU_E2BIG;
  fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0)
    return -errno;
  const char *p = data;
  while (len > 0) {
    ssize_t w = write(fd, p, len);
    if (w < 0 && errno == EINTR)
      continue;
    if (w < 0) {
      rc = -errno;
      goto out;
    }
    p += w;
    len -= (size_t)w;
  }
  if ((flags & MU_WRITE_FSYNC) && fsync(fd) != 0) {
    rc = -errno;
    goto out;
  }
  if (close(fd) != 0) {
    fd = -1;
    rc = -errno;
    goto out;
  }
  fd = -1;
  if (rename(tmp, path) != 0) {
    rc = -errno;
    goto out;
  }
  if (flags & MU_WRITE_FSYNC)
    rc = fsync_dir_of(path);
  return rc;
out:
  if (fd >= 0)
    close(fd);
  unlink(tmp);
  return rc;
}

char *mu_self_exe(void)
{
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0)
    return NULL;
  exe[n] = '\0';
  return mu_strdup(exe);
}

char *mu_sibling_exe(const char *name)
{
  char *exe = mu_self_exe(), *slash, *path = NULL;
  if (exe == NULL)
    return NULL;
  slash = strrchr(exe, '/');
  if (slash != NULL) {
    *slash = '\0';
    path = mu_asprintf("%s/%s", exe, name);
    if (access(path, X_OK) != 0) {
      mu_free(path);
      path = NULL;
    }
  }
  mu_free(exe);
  return path;
}

static int copy_file(const char *src, const char *dst, mode_t mode, struct mu_buf *err)
{
  char *tmp = mu_asprintf("%s.tmp.%ld", dst, (long)getpid()), buf[65536];
  int in = open(src, O_RDONLY | O_CLOEXEC), out = -1, rc = 0;
  ssize_t n;
  if (in < 0) {
    mu_buf_printf(err, "cannot read '%s': %s", src, strerror(errno));
    rc = MU_EIO;
    goto out;
  }
  out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode & 07777);
  if (out < 0) {
    mu_buf_printf(err, "cannot create '%s': %s", tmp, strerror(errno));
    rc = MU_EIO;
    goto out;
  }
  while ((n = read(in, buf, sizeof(buf))) > 0) {
    if (mu_write_all(out, buf, (size_t)n) != 0) {
      mu_buf_printf(err, "cannot write '%s': %s", tmp, strerror(errno));
      rc = MU_EIO;
      goto out;
    }
  }
  if (n < 0 || fchmod(out, mode & 07777) != 0 || close(out) != 0) {
    out = -1;
    mu_buf_printf(err, "cannot copy '%s' to '%s': %s", src, tmp, strerror(errno));
    rc = MU_EIO;
    goto out;
  }
  out = -1;
  if (rename(tmp, dst) != 0) {
    mu_buf_printf(err, "cannot rename '%s' to '%s': %s", tmp, dst, strerror(errno));
    rc = MU_EIO;
  }
out:
  if (in >= 0)
    close(in);
  if (out >= 0)
    close(out);
  if (rc != 0)
    unlink(tmp);
  mu_free(tmp);
  return rc;
}

int mu_copy_tree(const char *src, const char *dst, struct mu_buf *err)
{
  struct stat st;
  DIR *d;
  struct dirent *e;
  int rc = 0;
  if (mu_mkdir_p(dst) != 0) {
    mu_buf_printf(err, "cannot create the directory '%s': %s", dst, strerror(errno));
    return MU_EIO;
  }
  d = opendir(src);
  if (d == NULL) {
    mu_buf_printf(err, "cannot read the directory '%s': %s", src, strerror(errno));
    return MU_EIO;
  }
  while (rc == 0 && (e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    char *s = mu_asprintf("%s/%s", src, e->d_name), *t = mu_asprintf("%s/%s", dst, e->d_name);
    if (lstat(s, &st) != 0) {
      mu_buf_printf(err, "cannot stat '%s': %s", s, strerror(errno));
      rc = MU_EIO;
    } else if (S_ISDIR(st.st_mode)) {
      rc = mu_copy_tree(s, t, err);
    } else if (S_ISREG(st.st_mode)) {
      rc = copy_file(s, t, st.st_mode, err);
    } else if (S_ISLNK(st.st_mode)) {
      char target[PATH_MAX];
      ssize_t n = readlink(s, target, sizeof(target) - 1);
      if (n >= 0) {
        target[n] = '\0';
        unlink(t);
        if (symlink(target, t) != 0) {
          mu_buf_printf(err, "cannot create the link '%s': %s", t, strerror(errno));
          rc = MU_EIO;
        }
      }
    }
    mu_free(s);
    mu_free(t);
  }
  closedir(d);
  return rc;
}

int mu_own_dir(const char *path, unsigned mode, unsigned forbid, struct mu_buf *err)
{
  struct stat st;
  if (mkdir(path, (mode_t)mode) != 0 && errno != EEXIST) {
    int e = errno;
    mu_buf_printf(err, "cannot create the directory '%s': %s", path, strerror(e));
    return -e;
  }
  if (lstat(path, &st) != 0) {
    int e = errno;
    mu_buf_printf(err, "cannot check the directory '%s': %s", path, strerror(e));
    return -e;
  }
  if (S_ISLNK(st.st_mode) || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
    mu_buf_printf(err,
                  "'%s' is %s, owned by uid %ld, not a directory of yours (uid %ld): someone "
                  "else may have made it first to read or replace your files; not used. Remove "
                  "it (as its owner or root), or choose another directory",
                  path,
                  S_ISLNK(st.st_mode)   ? "a symbolic link"
                  : S_ISDIR(st.st_mode) ? "a directory"
                                        : "not a directory",
                  (long)st.st_uid, (long)geteuid());
    return -EPERM;
  }
  if ((st.st_mode & forbid) != 0 && chmod(path, st.st_mode & 07777 & ~(mode_t)forbid) != 0) {
    int e = errno;
    mu_buf_printf(err, "cannot make '%s' private (chmod): %s", path, strerror(e));
    return -e;
  }
  return 0;
}
