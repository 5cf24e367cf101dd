/* The chained hash table (see htab.h). New elements go to the head of their chain; growing
 * rehashes bucket by bucket, chain order, each element to the head of its new chain. */
#include "htab.h"

#include <string.h>

#include "alloc.h"

#define HTAB_FIRST_BUCKETS 16

uint32_t mu_fnv1a(const void *p, size_t n)
{
  const unsigned char *s = p;
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++)
    h = (h ^ s[i]) * 16777619u;
  return h;
}

void mu_htab_init(struct mu_htab *t, size_t buckets)
{
  memset(t, 0, sizeof(*t));
  t->first_nb = buckets ? buckets : HTAB_FIRST_BUCKETS;
  if (buckets != 0) {
    t->nb = buckets;
    t->b = mu_calloc(t->nb, sizeof(*t->b));
  }
}

void mu_htab_release(struct mu_htab *t)
{
  if (t == NULL)
    return;
  mu_free(t->b);
  t->b = NULL;
  t->nb = t->n = 0;
}

struct mu_hnode *mu_htab_find(const struct mu_htab *t, const char *key, size_t len)
{
  if (t->nb == 0)
    return NULL;
  uint32_t h = mu_fnv1a(key, len);
  for (struct mu_hnode *e = t->b[h & (t->nb - 1)]; e != NULL; e = e->next)
    if (e->hash == h && e->len == len && memcmp(e->key, key, len) == 0)
      return e;
  return NULL;
}

static void grow(struct mu_htab *t)
{
  size_t nb = t->nb ? t->nb * 2 : t->first_nb;
  struct mu_hnode **b = mu_calloc(nb, sizeof(*b));
  for (size_t i = 0; i < t->nb; i++) {
    struct mu_hnode *e = t->b[i], *next = NULL;
    for (; e != NULL; e = next) {
      next = e->next;
      e->next = b[e->hash & (nb - 1)];
      b[e->hash & (nb - 1)] = e;
    }
  }
  mu_free(t->b);
  t->b = b;
  t->nb = nb;
}

void mu_htab_add(struct mu_htab *t, struct mu_hnode *e, char *key, size_t len)
{
  if (t->n >= t->nb)
    grow(t);
  e->key = key;
  e->len = (uint32_t)len;
  e->hash = mu_fnv1a(key, len);
  e->next = t->b[e->hash & (t->nb - 1)];
  t->b[e->hash & (t->nb - 1)] = e;
  t->n++;
}

void mu_htab_del(struct mu_htab *t, struct mu_hnode *e)
{
  if (t->nb == 0)
    return;
  struct mu_hnode **pp = &t->b[e->hash & (t->nb - 1)];
  while (*pp != NULL && *pp != e)
    pp = &(*pp)->next;
  if (*pp == e) {
    *pp = e->next;
    t->n--;
  }
  e->next = NULL;
}

struct mu_hnode *mu_htab_next(const struct mu_htab *t, const struct mu_hnode *prev)
{
  if (prev != NULL && prev->next != NULL)
    return prev->next;
  size_t i = prev != NULL ? (prev->hash & (t->nb - 1)) + 1 : 0;
  for (; i < t->nb; i++)
    if (t->b[i] != NULL)
      return t->b[i];
  return NULL;
}

void mu_htab_clear(struct mu_htab *t, mu_hnode_free_fn *fn, void *data)
{
  for (size_t i = 0; i < t->nb; i++) {
    struct mu_hnode *e = t->b[i], *next = NULL;
    t->b[i] = NULL;
    for (; e != NULL; e = next) {
      next = e->next;
      e->next = NULL;
      t->n--;
      if (fn != NULL)
        fn(e, data);
    }
  }
}
