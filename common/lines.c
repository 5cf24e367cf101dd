/* Prefixed lines out of a byte stream (see lines.h). */
#include "lines.h"

#include <stdint.h>
#include <string.h>

#include "alloc.h"

void mu_line_prefixer_init(struct mu_line_prefixer *lp, const char *prefix, size_t max_line)
{
  lp->prefix = mu_strdup(prefix);
  mu_buf_init(&lp->partial, max_line);
  lp->keep = NULL;
  lp->keep_data = NULL;
  lp->verdict = -1;
}

void mu_line_prefixer_filter(struct mu_line_prefixer *lp, mu_line_keep_fn *keep, void *data)
{
  lp->keep = keep;
  lp->keep_data = data;
}

void mu_line_prefixer_release(struct mu_line_prefixer *lp)
{
  if (lp == NULL)
    return;
  mu_free(lp->prefix);
  lp->prefix = NULL;
  mu_buf_release(&lp->partial);
}

/* The filter's verdict on the line a + b (1 without a filter). */
static int keep_line(const struct mu_line_prefixer *lp, const char *a, size_t an, const char *b,
                     size_t bn)
{
  if (lp->keep == NULL)
    return 1;
  if (an == 0 || bn == 0)
    return lp->keep(lp->keep_data, an ? a : b, an ? an : bn) != 0;
  struct mu_buf line = MU_BUF_INIT(SIZE_MAX);
  (void)mu_buf_append(&line, a, an);
  (void)mu_buf_append(&line, b, bn);
  int keep = lp->keep(lp->keep_data, line.data, line.len) != 0;
  mu_buf_release(&line);
  return keep;
}

/* prefix + a + b + "\n" into out, when the line (or the line it is a piece of, `piece`) is
 * kept; a whole line ends the pieces. */
static void emit(struct mu_line_prefixer *lp, const char *a, size_t an, const char *b, size_t bn,
                 int piece, struct mu_buf *out)
{
  int keep = lp->verdict >= 0 ? lp->verdict : keep_line(lp, a, an, b, bn);
  lp->verdict = piece ? keep : -1;
  if (!keep)
    return;
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
        emit(lp, lp->partial.data, lp->partial.len, "", 0, 1, out);
        mu_buf_clear(&lp->partial);
      }
      continue;
    }
    size_t len = (size_t)(nl - data);
    emit(lp, lp->partial.len ? lp->partial.data : "", lp->partial.len, data, len, 0, out);
    mu_buf_clear(&lp->partial);
    data = nl + 1;
    n -= len + 1;
  }
}

void mu_line_prefixer_flush(struct mu_line_prefixer *lp, struct mu_buf *out)
{
  if (lp->partial.len > 0)
    emit(lp, lp->partial.data, lp->partial.len, "", 0, 0, out);
  mu_buf_clear(&lp->partial);
  lp->verdict = -1;
}
