/* A growable byte buffer with a cap (as curl's dynbuf): an append that would pass `max`
 * fails with MU_E2BIG and leaves the buffer as it was. The data is always NUL-terminated.
 */
#ifndef MU_BUF_H
#define MU_BUF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

struct mu_buf {
  char *data; /* NUL-terminated; NULL until the first append */
  size_t len;
  size_t cap; /* allocated bytes */
  size_t max; /* the cap on len */
};

/* The `max` of a buffer that holds what the program writes itself (a reply, a record, a
 * report): no cap of its own, memory is the limit. Buffers fed by untrusted input take a real
 * cap instead. Half of SIZE_MAX, so that len + extra + 1 never wraps. */
#define MU_BUF_UNBOUNDED (SIZE_MAX / 2)

#define MU_BUF_INIT(max)                                                                           \
  {                                                                                                \
    NULL, 0, 0, (max)                                                                              \
  }

void mu_buf_init(struct mu_buf *b, size_t max);
/* Frees the data; the buffer can be used again. Accepts NULL. */
void mu_buf_release(struct mu_buf *b);
/* Empties without freeing. */
void mu_buf_clear(struct mu_buf *b);
/* Makes room for `extra` more bytes (one allocation ahead of a known-size append).
 * Returns: 0, or MU_E2BIG when len + extra would pass the cap. */
int mu_buf_reserve(struct mu_buf *b, size_t extra);
/* Returns: 0, or MU_E2BIG over the cap (nothing appended). */
int mu_buf_append(struct mu_buf *b, const void *p, size_t n);
int mu_buf_puts(struct mu_buf *b, const char *s);
int mu_buf_putc(struct mu_buf *b, char c);
int mu_buf_printf(struct mu_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s with every occurrence of `from` (not empty) replaced by `to`.
 * Returns: 0, or MU_E2BIG at the cap. */
int mu_buf_put_replaced(struct mu_buf *b, const char *s, const char *from, const char *to);
int mu_buf_vprintf(struct mu_buf *b, const char *fmt, va_list ap);
/* Drops the first n bytes. */
void mu_buf_consume(struct mu_buf *b, size_t n);
/* Returns: the data (never NULL: "" when empty). Ownership: the caller now owns it and frees
 * it with mu_free(); the buffer is empty afterwards. */
char *mu_buf_detach(struct mu_buf *b);
/* Returns: the data, "" when empty. Ownership: borrowed until the next call on b. */
const char *mu_buf_str(const struct mu_buf *b);

#endif
