/* argv-style string vectors. */
#include <stdarg.h>
#include <stdio.h>

#include "alloc.h"
#include "strvec.h"

void mu_strvec_push_owned(struct mu_strvec *sv, char *s)
{
  if (sv->n + 2 > sv->cap) {
    sv->cap = sv->cap ? sv->cap * 2 : 8;
    sv->v = mu_realloc(sv->v, sv->cap * sizeof(char *));
  }
  sv->v[sv->n++] = s;
  sv->v[sv->n] = NULL;
}

void mu_strvec_push(struct mu_strvec *sv, const char *s)
{
  mu_strvec_push_owned(sv, mu_strdup(s));
}

void mu_strvec_pushf(struct mu_strvec *sv, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *s = mu_malloc((size_t)(n < 0 ? 0 : n) + 1);
  va_start(ap, fmt);
  vsnprintf(s, (size_t)(n < 0 ? 0 : n) + 1, fmt, ap);
  va_end(ap);
  mu_strvec_push_owned(sv, s);
}

void mu_strvec_release(struct mu_strvec *sv)
{
  if (sv == NULL)
    return;
  for (size_t i = 0; i < sv->n; i++)
    mu_free(sv->v[i]);
  mu_free(sv->v);
  sv->v = NULL;
  sv->n = sv->cap = 0;
}
