/* Tests for common/htab.c: the intrusive string-keyed hash table and FNV-1a. */
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "htab.h"
#include "task.h"

struct ent {
  struct mu_hnode hn;
  int value;
  char name[16];
};

TEST(htab__fnv1a_known_values)
{
  /* the published FNV-1a test vectors */
  ASSERT_EQ(mu_fnv1a("", 0), 0x811c9dc5u);
  ASSERT_EQ(mu_fnv1a("a", 1), 0xe40c292cu);
  ASSERT_EQ(mu_fnv1a("foobar", 6), 0xbf9cf968u);
}

TEST(htab__add_find_del_and_grow)
{
  enum { N = 1000 };
  static struct ent e[N];
  struct mu_htab t;
  mu_htab_init(&t, 0);
  ASSERT_NULL(mu_htab_find(&t, "k1", 2)); /* no buckets yet */
  for (int i = 0; i < N; i++) {
    snprintf(e[i].name, sizeof(e[i].name), "k%d", i);
    e[i].value = i;
    mu_htab_add(&t, &e[i].hn, e[i].name, strlen(e[i].name));
  }
  ASSERT_EQ(t.n, N);
  ASSERT(t.nb >= N && (t.nb & (t.nb - 1)) == 0);
  for (int i = 0; i < N; i++) {
    struct mu_hnode *x = mu_htab_find(&t, e[i].name, strlen(e[i].name));
    ASSERT_NOT_NULL(x);
    ASSERT_EQ(MU_CONTAINER_OF(x, struct ent, hn)->value, i);
  }
  /* keys compare by length too: "k1" is not "k10" */
  ASSERT_NULL(mu_htab_find(&t, "k10x", 4));
  ASSERT(mu_htab_find(&t, "k10x", 3) == &e[10].hn);
  for (int i = 0; i < N; i += 2)
    mu_htab_del(&t, &e[i].hn);
  ASSERT_EQ(t.n, N / 2);
  ASSERT_NULL(mu_htab_find(&t, "k0", 2));
  ASSERT_NOT_NULL(mu_htab_find(&t, "k1", 2));
  mu_htab_release(&t);
}

static void count_free(struct mu_hnode *x, void *data)
{
  (*(int *)data)++;
  mu_free(MU_CONTAINER_OF(x, struct ent, hn));
}

TEST(htab__iterate_and_clear)
{
  struct mu_htab a, b;
  mu_htab_init(&a, 4);
  mu_htab_init(&b, 4);
  for (int i = 0; i < 40; i++) {
    struct ent *x = mu_calloc(1, sizeof(*x));
    struct ent *y = mu_calloc(1, sizeof(*y));
    snprintf(x->name, sizeof(x->name), "n%d", i);
    memcpy(y->name, x->name, sizeof(x->name));
    x->value = y->value = i;
    mu_htab_add(&a, &x->hn, x->name, strlen(x->name));
    mu_htab_add(&b, &y->hn, y->name, strlen(y->name));
  }
  /* every element once, and two tables built alike walk alike */
  int seen[40] = {0}, n = 0;
  const struct mu_hnode *x = mu_htab_next(&a, NULL), *y = mu_htab_next(&b, NULL);
  for (; x != NULL; x = mu_htab_next(&a, x), y = mu_htab_next(&b, y), n++) {
    ASSERT_NOT_NULL(y);
    ASSERT_STR_EQ(x->key, y->key);
    seen[MU_CONTAINER_OF(x, struct ent, hn)->value]++;
  }
  ASSERT_NULL(y);
  ASSERT_EQ(n, 40);
  for (int i = 0; i < 40; i++)
    ASSERT_EQ(seen[i], 1);
  int freed = 0;
  mu_htab_clear(&a, count_free, &freed);
  ASSERT_EQ(freed, 40);
  ASSERT_EQ(a.n, 0);
  ASSERT_NULL(mu_htab_next(&a, NULL));
  mu_htab_clear(&b, count_free, &freed);
  mu_htab_release(&a);
  mu_htab_release(&b);
}
