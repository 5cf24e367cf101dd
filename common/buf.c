/* Capped growable buffer. */
#include <stdio.h>
#include <string.h>

#include "muster/errno.h"

#include "alloc.h"
#include "buf.h"

void mu_buf_init(struct mu_buf *b, size_t max)
{
  b->data = NULL;
  b->len = 0;
  b->cap = 0;
  b->max = max;
}

void mu_buf_release(struct mu_buf *b)
{
  if (b == NULL)
    return;
  mu_free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
}

void mu_buf_clear(struct mu_buf *b)
{
  b->len = 0;
  if (b->data != NULL)
    b->data[0] = '\0';
}

static int reserve(struct mu_buf *b, size_t extra)
{
  if (extra > b->max || b->len > b->max - extra)
    return MU_E2BIG;
  size_t need = b->len + extra + 1;
  if (need <= b->cap)
    return 0;
  size_t cap = b->cap ? b->cap : 64;
  while (cap < need)
    cap *= 2;
  b->data = mu_realloc(b->data, cap);
  b->cap = cap;
  return 0;
}

int mu_buf_reserve(struct mu_buf *b, size_t extra)
{
  return reserve(b, extra);
}

int mu_buf_append(struct mu_buf *b, const void *p, size_t n)
{
  int rc = reserve(b, n);
  if (rc != 0)
    return rc;
  if (n > 0)
    memcpy(b->data + b->len, p, n);
  b->len += n;
  b->data[b->len] = '\0';
  return 0;
}

int mu_buf_puts(struct mu_buf *b, const char *s)
{
  return mu_buf_append(b, s, strlen(s));
}

int mu_buf_putc(struct mu_buf *b, char c)
{
  return mu_buf_append(b, &c, 1);
}

int mu_buf_vprintf(struct mu_buf *b, const char *fmt, va_list ap)
{
  va_list cp;
  va_copy(cp, ap);
  int n = vsnprintf(NULL, 0, fmt, cp);
  va_end(cp);
  if (n < 0)
    return MU_EINVAL;
  int rc = reserve(b, (size_t)n);
  if (rc != 0)
    return rc;
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
  b->len += (size_t)n;
  return 0;
}

int mu_buf_printf(struct mu_buf *b, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  int rc = mu_buf_vprintf(b, fmt, ap);
  va_end(ap);
  return rc;
}

void mu_buf_consume(struct mu_buf *b, size_t n)
{
  if (n >= b->len) {
    mu_buf_clear(b);
    return;
  }
  memmove(b->data, b->data + n, b->len - n);
  b->len -= n;
  b->data[b->len] = '\0';
}

char *mu_buf_detach(struct mu_buf *b)
{
  char *d = b->data != NULL ? b->data : mu_strdup("");
  b->data = NULL;
  b->len = b->cap = 0;
  return d;
}

const char *mu_buf_str(const struct mu_buf *b)
{
  return b->data != NULL ? b->data : "";
}

int mu_buf_put_replaced(struct mu_buf *b, const char *s, const char *from, const char *to)
{
  size_t n = strlen(from);
  const char *hit;
  int rc = 0;
  while (rc == 0 && n > 0 && (hit = strstr(s, from)) != NULL) {
    rc = mu_buf_append(b, s, (size_t)(hit - s));
    if (rc == 0)
      rc = mu_buf_puts(b, to);
    s = hit + n;
  }
  return rc != 0 ? rc : mu_buf_puts(b, s);
}
