/* Prefixed lines out of a byte stream (see lines.h). */
#include "lines.h"

#include <string.h>

#include "alloc.h"

void mu_line_prefixer_init(struct mu_line_prefixer *lp, const char *prefix, size_t max_line)
{
  lp->prefix = mu_strdup(prefix);
  mu_buf_init(&lp->partial, max_line);
}

void mu_line_prefixer_release(struct mu_line_prefixer *lp)
{
  if (lp == NULL)
    return;
  mu_free(lp->prefix);
  lp->prefix = NULL;
  mu_buf_release(&lp->partial);
}

/* prefix + a + b + "\n" into out. */
static void emit(const struct mu_line_prefixer *lp, const char *a, size_t an, const char *b,
                 size_t bn, struct mu_buf *out)
{
  (void)mu_buf_puts(out, lp->prefix);
  (void)mu_buf_append(out, a, an);
  (void)mu_buf_append(out, b, bn);
  (void)mu_buf_putc(out, '\n');
}

void mu_line_prefixer_feed(struct mu_line_prefixer *lp, const char *data, size_t n,
                           struct mu_buf *out)
{
  while (n > 0) {
    const char *nl = memchr(data, '\n', n);
    if (nl == NULL) {
      size_t room = lp->partial.max - lp->partial.len;
      size_t take = n < room ? n : room;
      (void)mu_buf_append(&lp->partial, data, take);
      data += take;
      n -= take;
      if (lp->partial.len == lp->partial.max) {
        emit(lp, lp->partial.data, lp->partial.len, "", 0, out);
        mu_buf_clear(&lp->partial);
      }
      continue;
    }
    size_t len = (size_t)(nl - data);
    emit(lp, lp->partial.len ? lp->partial.data : "", lp->partial.len, data, len, out);
    mu_buf_clear(&lp->partial);
    data = nl + 1;
    n -= len + 1;
  }
}

void mu_line_prefixer_flush(struct mu_line_prefixer *lp, struct mu_buf *out)
{
  if (lp->partial.len > 0)
    emit(lp, lp->partial.data, lp->partial.len, "", 0, out);
  mu_buf_clear(&lp->partial);
}
