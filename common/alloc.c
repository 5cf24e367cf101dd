/* The allocator: jemalloc or libc, aborting on OOM. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <openssl/crypto.h>
#include <uv.h>

#include "alloc.h"

/* Debian's jemalloc is built without a symbol prefix: linking it (MU_USE_JEMALLOC) replaces
 * malloc and friends for the whole process, libuv, cJSON and libyaml included. The include
 * only pulls in its extensions (mallctl) for the stats that musterd reports. */
#ifdef MU_USE_JEMALLOC
#include <jemalloc/jemalloc.h>
#endif
#define RAW_MALLOC(n) malloc(n)
#define RAW_CALLOC(c, n) calloc(c, n)
#define RAW_REALLOC(p, n) realloc(p, n)
#define RAW_FREE(p) free(p)

static void oom(size_t n)
{
  fprintf(stderr, "muster: out of memory allocating %zu bytes\n", n);
  abort();
}

void *mu_malloc(size_t n)
{
  void *p = RAW_MALLOC(n ? n : 1);
  if (p == NULL)
    oom(n);
  return p;
}

void *mu_calloc(size_t count, size_t n)
{
  void *p = RAW_CALLOC(count ? count : 1, n ? n : 1);
  if (p == NULL)
    oom(count * n);
  return p;
}

void *mu_realloc(void *p, size_t n)
{
  void *q = RAW_REALLOC(p, n ? n : 1);
  if (q == NULL)
    oom(n);
  return q;
}

char *mu_strndup(const char *s, size_t n)
{
  n = strnlen(s, n);
  char *d = mu_malloc(n + 1);
  memcpy(d, s, n);
  d[n] = '\0';
  return d;
}

char *mu_strdup(const char *s)
{
  return mu_strndup(s, strlen(s));
}

void mu_free(void *p)
{
  if (p != NULL)
    RAW_FREE(p);
}

#define ALLOC_PAGE ((size_t)4096)
#define ALLOC_LARGE ((size_t)16384) /* from here on an allocation is pages of its own */

size_t mu_alloc_size(size_t n)
{
  if (n >= ALLOC_LARGE) /* its own pages: the rounding up to a size class is never touched */
    return (n + ALLOC_PAGE - 1) & ~(ALLOC_PAGE - 1);
#ifdef MU_USE_JEMALLOC
  size_t got = nallocx(n ? n : 1, 0);
  if (got != 0)
    return got;
#endif
  size_t c = (n + 8 + 15) & ~(size_t)15;
  return c < 32 ? 32 : c;
}

char *mu_asprintf(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0)
    n = 0;
  char *s = mu_malloc((size_t)n + 1);
  va_start(ap, fmt);
  vsnprintf(s, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return s;
}

static void *cjson_malloc(size_t n)
{
  return mu_malloc(n);
}

#if defined(MU_USE_JEMALLOC) && defined(__GLIBC__)
/* glibc's own malloc, still there beside jemalloc (which took over the names malloc and free) */
extern void *__libc_malloc(size_t n);
extern void *__libc_realloc(void *p, size_t n);
extern void __libc_free(void *p);

static void *ossl_malloc(size_t n, const char *file, int line)
{
  (void)file;
  (void)line;
  return __libc_malloc(n);
}

static void *ossl_realloc(void *p, size_t n, const char *file, int line)
{
  (void)file;
  (void)line;
  return __libc_realloc(p, n);
}

static void ossl_free(void *p, const char *file, int line)
{
  (void)file;
  (void)line;
  __libc_free(p);
}
#endif

void mu_alloc_install_hooks(void)
{
  static int done;
  if (done)
    return;
  done = 1;
  uv_replace_allocator(mu_malloc, mu_realloc, mu_calloc, mu_free);
  cJSON_Hooks hooks = {cjson_malloc, mu_free};
  cJSON_InitHooks(&hooks);
#if defined(MU_USE_JEMALLOC) && defined(__GLIBC__)
  /* OpenSSL allocates from glibc's malloc (16-byte steps) rather than jemalloc's size classes
   * (four per doubling): a TLS session's 7,608-byte SSL object took an 8 KiB class and a slab
   * of its own. A session after its handshake holds ~1 KiB less (issue 24: musterd's memory
   * per connection before any credential). Nothing of OpenSSL's is freed with mu_free() nor
   * the reverse. Refused (harmlessly) once OpenSSL has allocated. */
  CRYPTO_set_mem_functions(ossl_malloc, ossl_realloc, ossl_free);
#endif
}
