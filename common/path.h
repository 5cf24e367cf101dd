/* Slash-separated paths as Go's `path` package sees them: the one cleaner that turns a URL path
 * or an etcd key into its canonical rooted form. Library code: never prints. */
#ifndef MU_PATH_H
#define MU_PATH_H

#include <stddef.h>

enum mu_path_flags {
  MU_PATH_KEEP_SLASH = 1 << 0, /* keep a trailing '/' (Go's ServeMux cleanPath), else drop it */
};

/* Writes the clean rooted form of the `n` bytes at `p` into `dst`, as Go's
 * path.Clean(path.Join("/", p)): repeated slashes collapsed, "." segments dropped, ".." segments
 * removing the one before (never above the root); "" and "/" give "/". With MU_PATH_KEEP_SLASH
 * a trailing slash of a path longer than "/" is kept. `dst` needs n + 2 bytes and is
 * NUL-terminated; it must not overlap `p`.
 * Returns: the length written (without the NUL). Ownership: borrows both. */
size_t mu_path_clean(char *dst, const char *p, size_t n, unsigned flags);

/* Whether `s` is one path segment, so that DIR/s names an entry of DIR and nothing else: not
 * empty, not "." or "..", no '/', no control character, at most 255 bytes (NAME_MAX).
 * Returns: 1 or 0. Ownership: borrows s. */
int mu_path_segment_ok(const char *s);

#endif
