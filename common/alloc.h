/* The one allocator. Every allocation in muster goes through these; on failure they log
 * and abort(), so callers never check for NULL (as redis zmalloc does). Under
 * MU_USE_JEMALLOC they call jemalloc's prefixed-free API; otherwise libc.
 */
#ifndef MU_ALLOC_H
#define MU_ALLOC_H

#include <stddef.h>

#include "muster/export.h"

void *mu_malloc(size_t n);
void *mu_calloc(size_t count, size_t n);
void *mu_realloc(void *p, size_t n);
char *mu_strdup(const char *s);
char *mu_strndup(const char *s, size_t n);
/* Accepts NULL. Exported by libmuster (include/muster/client.h). */
MU_EXTERN void mu_free(void *p);

/* Returns: the memory an allocation of `n` bytes holds: below 16 KiB jemalloc's size class
 * (nallocx()), or with libc's malloc the chunk (n plus its 8-byte header, rounded up to 16, at
 * least 32); from 16 KiB on, whole pages (a large allocation gets pages of its own, and what a
 * size class rounds up past them is never touched). What a bound on memory counts (musterd's
 * --v1-max-bytes), not what was asked for. */
size_t mu_alloc_size(size_t n);

/* printf into a fresh string. Returns: the string; caller frees with mu_free(). */
char *mu_asprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Routes libuv and cJSON through mu_malloc & co, and (with jemalloc, on glibc) OpenSSL through
 * glibc's malloc, whose 16-byte steps fit its per-connection objects better than jemalloc's size
 * classes. Call once at start-up, before any loop and any OpenSSL call. */
void mu_alloc_install_hooks(void);

#endif
