/* Small POSIX file helpers shared by musterd (persistence, key files) and the launcher (job
 * state, components, generated scripts). Library code: never prints. */
#ifndef MU_FSUTIL_H
#define MU_FSUTIL_H

#include <stddef.h>

#include "buf.h"

/* Writes all n bytes of p to fd, retrying short writes and EINTR.
 * Returns: 0; MU_EIO when a write fails (the rest is dropped); -EBADF, writing nothing, when fd
 * is negative (so that an optional log fd of -1 can be passed as it is).
 * Ownership: borrows p. */
int mu_write_all(int fd, const void *p, size_t n);

/* Creates the directory path and its missing parents (mode 0755); existing ones are fine.
 * Returns: 0; MU_E2BIG when path is longer than PATH_MAX; -errno from mkdir otherwise.
 * Ownership: borrows path. */
int mu_mkdir_p(const char *path);

/* Makes `path` (its parent must exist) with `mode` when it is absent, then checks with lstat()
 * that it is a directory of this user's, not a symbolic link: a directory someone else made
 * first, in a shared place like /tmp, is refused, never used. When it is ours but has a bit of
 * `forbid` (e.g. 077: anyone else may read it; 022: anyone else may write in it), those bits are
 * taken away. Returns: 0; -EPERM with the owner and the fix in err when it is another user's or
 * a link; -errno with err set otherwise. Ownership: borrows everything. */
int mu_own_dir(const char *path, unsigned mode, unsigned forbid, struct mu_buf *err);

/* Appends the whole file at `path` to `out`, reading at most `max` bytes (then MU_E2BIG; what
 * was read stays in `out`). The data stays NUL-terminated (a mu_buf always is).
 * Returns: 0; MU_E2BIG over `max`; -errno when the file cannot be opened or read (-ENOENT when
 * it does not exist). Ownership: `out` is the caller's. */
int mu_read_file(const char *path, size_t max, struct mu_buf *out);

/* Appends the last `max` bytes of the file at `path` to `out` (the whole file when smaller):
 * a log's tail. Returns: 0, or -errno. Ownership: `out` is the caller's. */
int mu_read_file_tail(const char *path, size_t max, struct mu_buf *out);

enum mu_write_file_flags {
  MU_WRITE_FSYNC = 1 << 0, /* fsync the file before the rename and the directory after it */
};

/* Replaces `path` with `len` bytes of `data` atomically: writes "<path>.tmp.<pid>" with `mode`,
 * then renames it over `path`, so a reader sees the old file or the new one, never a part.
 * Returns: 0, or -errno (the temporary file is removed). Ownership: borrows everything. */
int mu_write_file_atomic(const char *path, const void *data, size_t len, int mode, unsigned flags);

/* The absolute path of the running program (/proc/self/exe), and the path of a program named
 * `name` in the same directory when that one is executable (musterd beside muster).
 * Returns: the path, or NULL when it cannot be read / there is none.
 * Ownership: the caller frees it with mu_free(). */
char *mu_self_exe(void);
char *mu_sibling_exe(const char *name);

/* Copies the directory tree `src` into `dst` (created as needed): directories, regular files
 * with their permission bits, symbolic links as links; anything else is skipped. Existing
 * files are replaced (written to a temporary name, then renamed). Returns: 0, or a negative
 * MU_E* code with the path that failed and why in err. Ownership: borrows everything. */
struct mu_buf;
int mu_copy_tree(const char *src, const char *dst, struct mu_buf *err);

#endif
