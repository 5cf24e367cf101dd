/* faultshim: an LD_PRELOAD library for the disk-error tests (tests/integration/durability_*.sh):
 * write(), pwrite(), writev(), fsync(), fdatasync() and fallocate() on files under one directory
 * fail with ENOSPC or EIO, on command, while the process runs. Built with the tests, never
 * installed.
 *
 *   MU_FAULT_DIR  the directory whose files fail (the path of the fd, as /proc/self/fd shows
 *                 it, starts with it); other fds (sockets, logs) are never touched
 *   MU_FAULT_CTL  a control file, read again at most every 10 ms: missing or empty = no fault;
 *                 else "OPS ERRNO", OPS a comma list of write, pwrite, writev, fsync, fdatasync,
 *                 grow or "all", ERRNO "ENOSPC" or "EIO" (e.g. "fdatasync EIO"). grow is a
 *                 fallocate() that reserves space past the start of a file (offset > 0, no
 *                 FALLOC_FL_PUNCH_HOLE): a log segment's reserve growing; a new file's first
 *                 reserve (offset 0) works, as on a disk that has room again just then;
 *                 hold is open() of a new file (O_CREAT) failing: no new log segment or
 *                 snapshot can be made, so a compaction cannot start and what it would end
 *                 lasts until the test lets it go (e.g. "grow,hold ENOSPC", then "grow ENOSPC")
 *
 * A faulted call does nothing and returns -1 with errno set, as a full or failing disk does.
 * It works in the threads and the children of the process too (the control file is shared).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

enum fault_op {
  OP_WRITE = 1 << 0,
  OP_PWRITE = 1 << 1,
  OP_WRITEV = 1 << 2,
  OP_FSYNC = 1 << 3,
  OP_FDATASYNC = 1 << 4,
  OP_GROW = 1 << 5,
  OP_HOLD = 1 << 6,
};

/* The state read from the control file: which ops fail, with which errno. Threads may read it
 * while one re-reads the file: each field is one int, updated atomically. */
static int g_ops, g_errno;
static long long g_checked_ns;

static long long now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int parse_ops(const char *s)
{
  static const struct {
    const char *name;
    int op;
  } names[] = {{"write", OP_WRITE},
               {"pwrite", OP_PWRITE},
               {"writev", OP_WRITEV},
               {"fsync", OP_FSYNC},
               {"fdatasync", OP_FDATASYNC},
               {"grow", OP_GROW},
               {"hold", OP_HOLD},
               {"all", OP_WRITE | OP_PWRITE | OP_WRITEV | OP_FSYNC | OP_FDATASYNC | OP_GROW}};
  int ops = 0;
  while (*s != '\0' && *s != ' ') {
    size_t n = strcspn(s, ", ");
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
      if (strlen(names[i].name) == n && strncmp(s, names[i].name, n) == 0)
        ops |= names[i].op;
    s += n;
    if (*s == ',')
      s++;
  }
  return ops;
}

/* Reads the control file again when it was read more than 10 ms ago. */
static void refresh(void)
{
  long long t = now_ns();
  if (t - __atomic_load_n(&g_checked_ns, __ATOMIC_RELAXED) < 10000000LL)
    return;
  __atomic_store_n(&g_checked_ns, t, __ATOMIC_RELAXED);
  const char *ctl = getenv("MU_FAULT_CTL");
  int ops = 0, err = 0;
  char buf[128];
  int fd = ctl != NULL ? open(ctl, O_RDONLY | O_CLOEXEC) : -1;
  if (fd >= 0) {
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n > 0) {
      buf[n] = '\0';
      ops = parse_ops(buf);
      err = strstr(buf, "EIO") != NULL ? EIO : strstr(buf, "ENOSPC") != NULL ? ENOSPC : 0;
      if (err == 0)
        ops = 0;
    }
  }
  __atomic_store_n(&g_errno, err, __ATOMIC_RELAXED);
  __atomic_store_n(&g_ops, ops, __ATOMIC_RELAXED);
}

/* Returns: 1 when `fd` is a file under MU_FAULT_DIR (its path in `path`, `size` bytes). */
static int in_dir(int fd, char *path, size_t size)
{
  const char *dir = getenv("MU_FAULT_DIR");
  char link[64];
  snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, path, size - 1);
  size_t dl = dir != NULL ? strlen(dir) : 0;
  if (n <= 0 || dl == 0 || (size_t)n < dl || strncmp(path, dir, dl) != 0)
    return 0;
  path[n] = '\0';
  return 1;
}

/* Returns: 1 when `op` on `fd` is to fail now (errno is then set). */
static int faulted(int fd, int op)
{
  int saved = errno;
  refresh();
  if (!(__atomic_load_n(&g_ops, __ATOMIC_RELAXED) & op)) {
    errno = saved;
    return 0;
  }
  char path[4096];
  if (!in_dir(fd, path, sizeof(path))) {
    errno = saved;
    return 0;
  }
  errno = __atomic_load_n(&g_errno, __ATOMIC_RELAXED);
  return 1;
}

/* The real function `name`, looked up once. */
#define REAL(type, name)                                                                           \
  static type real;                                                                                \
  if (real == NULL)                                                                                \
    real = (type)dlsym(RTLD_NEXT, name);

typedef ssize_t (*write_fn)(int, const void *, size_t);
typedef ssize_t (*pwrite_fn)(int, const void *, size_t, off_t);
typedef ssize_t (*writev_fn)(int, const struct iovec *, int);
typedef int (*sync_fn)(int);
typedef int (*fallocate_fn)(int, int, off_t, off_t);

ssize_t write(int fd, const void *buf, size_t n)
{
  REAL(write_fn, "write");
  if (faulted(fd, OP_WRITE))
    return -1;
  return real(fd, buf, n);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
  REAL(pwrite_fn, "pwrite");
  if (faulted(fd, OP_PWRITE))
    return -1;
  return real(fd, buf, n, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off)
{
  REAL(pwrite_fn, "pwrite64");
  if (faulted(fd, OP_PWRITE))
    return -1;
  return real(fd, buf, n, off);
}

ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
  REAL(writev_fn, "writev");
  if (faulted(fd, OP_WRITEV))
    return -1;
  return real(fd, iov, cnt);
}

int fsync(int fd)
{
  REAL(sync_fn, "fsync");
  if (faulted(fd, OP_FSYNC))
    return -1;
  return real(fd);
}

int fdatasync(int fd)
{
  REAL(sync_fn, "fdatasync");
  if (faulted(fd, OP_FDATASYNC))
    return -1;
  return real(fd);
}

int fallocate(int fd, int mode, off_t off, off_t len)
{
  REAL(fallocate_fn, "fallocate");
  if (off > 0 && !(mode & FALLOC_FL_PUNCH_HOLE) && faulted(fd, OP_GROW))
    return -1;
  return real(fd, mode, off, len);
}

/* open(), open64() and openat() of a new file under MU_FAULT_DIR fail while the control file
 * says hold; every other open goes through (the shim's own read of its control file among them:
 * that one has no O_CREAT). */
typedef int (*open_fn)(const char *, int, ...);
typedef int (*openat_fn)(int, const char *, int, ...);

static int open_held(const char *path, int flags)
{
  if (!(flags & O_CREAT))
    return 0;
  int saved = errno;
  refresh();
  const char *dir = getenv("MU_FAULT_DIR");
  size_t dl = dir != NULL ? strlen(dir) : 0;
  if (!(__atomic_load_n(&g_ops, __ATOMIC_RELAXED) & OP_HOLD) || dl == 0 ||
      strncmp(path, dir, dl) != 0) {
    errno = saved;
    return 0;
  }
  errno = __atomic_load_n(&g_errno, __ATOMIC_RELAXED);
  return 1;
}

#define OPEN_MODE(flags, mode)                                                                     \
  mode_t mode = 0;                                                                                 \
  if ((flags) & (O_CREAT | O_TMPFILE)) {                                                           \
    va_list ap;                                                                                    \
    va_start(ap, flags);                                                                           \
    mode = (mode_t)va_arg(ap, int);                                                                \
    va_end(ap);                                                                                    \
  }

int open(const char *path, int flags, ...)
{
  REAL(open_fn, "open");
  OPEN_MODE(flags, mode);
  if (open_held(path, flags))
    return -1;
  return real(path, flags, mode);
}

int open64(const char *path, int flags, ...)
{
  REAL(open_fn, "open64");
  OPEN_MODE(flags, mode);
  if (open_held(path, flags))
    return -1;
  return real(path, flags, mode);
}

int openat(int dirfd, const char *path, int flags, ...)
{
  REAL(openat_fn, "openat");
  OPEN_MODE(flags, mode);
  if (open_held(path, flags))
    return -1;
  return real(dirfd, path, flags, mode);
}
