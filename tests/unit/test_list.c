/* Tests for common/list.h: the intrusive doubly linked list. */
#include "list.h"
#include "task.h"

struct item {
  int id;
  struct mu_list_node link;
};

/* The ids of `l` head to tail, as digits ("132"), checking the links both ways. */
static const char *ids(const struct mu_list *l, char *buf)
{
  size_t k = 0;
  const struct mu_list_node *prev = NULL;
  for (const struct mu_list_node *x = l->head; x != NULL; x = x->next) {
    ASSERT(x->prev == prev);
    buf[k++] = (char)('0' + MU_CONTAINER_OF(x, struct item, link)->id);
    prev = x;
  }
  ASSERT(l->tail == prev);
  ASSERT_EQ(k, l->n);
  buf[k] = '\0';
  return buf;
}

TEST(list__push_remove_and_order)
{
  struct item it[5];
  struct mu_list l = MU_LIST_INIT;
  char buf[16];
  for (int i = 0; i < 5; i++)
    it[i].id = i;
  ASSERT_STR_EQ(ids(&l, buf), "");
  mu_list_push_back(&l, &it[1].link);
  mu_list_push_back(&l, &it[2].link);
  mu_list_push_front(&l, &it[0].link);
  mu_list_push_back(&l, &it[3].link);
  ASSERT_STR_EQ(ids(&l, buf), "0123");
  mu_list_remove(&l, &it[2].link); /* middle */
  ASSERT_STR_EQ(ids(&l, buf), "013");
  ASSERT_NULL(it[2].link.prev);
  ASSERT_NULL(it[2].link.next);
  mu_list_remove(&l, &it[0].link); /* head */
  mu_list_remove(&l, &it[3].link); /* tail */
  ASSERT_STR_EQ(ids(&l, buf), "1");
  mu_list_remove(&l, &it[1].link); /* the last one */
  ASSERT_STR_EQ(ids(&l, buf), "");
  ASSERT_NULL(l.head);
  mu_list_push_front(&l, &it[4].link);
  ASSERT_STR_EQ(ids(&l, buf), "4");
}

TEST(list__take_moves_everything)
{
  struct item it[3];
  struct mu_list a = MU_LIST_INIT, b = MU_LIST_INIT;
  char buf[16];
  for (int i = 0; i < 3; i++) {
    it[i].id = i;
    mu_list_push_back(&a, &it[i].link);
  }
  mu_list_take(&b, &a);
  ASSERT_STR_EQ(ids(&a, buf), "");
  ASSERT_STR_EQ(ids(&b, buf), "012");
  /* the drained list takes new nodes while the taken one is walked */
  mu_list_remove(&b, &it[1].link);
  mu_list_push_back(&a, &it[1].link);
  ASSERT_STR_EQ(ids(&a, buf), "1");
  ASSERT_STR_EQ(ids(&b, buf), "02");
}
