/* An intrusive doubly linked list (as the Linux kernel's and libuv's queue.h): the element
 * embeds a `struct mu_list_node`, the list holds head, tail and count, and no operation
 * allocates. The list is NULL-terminated at both ends (not circular), so `head`/`next` walks
 * read as plain loops:
 *
 *   struct job { struct mu_list_node link; int id; };
 *   struct mu_list jobs = MU_LIST_INIT;
 *   mu_list_push_back(&jobs, &j->link);
 *   for (struct mu_list_node *x = jobs.head; x != NULL; x = x->next)
 *     use(MU_CONTAINER_OF(x, struct job, link));
 *   mu_list_remove(&jobs, &j->link);
 *
 * A node belongs to at most one list at a time and the list is not told which: the caller
 * knows (or records it, as the rendezvous' waits do). Everything is inline: these run on every
 * heartbeat and every parked request.
 */
#ifndef MU_LIST_H
#define MU_LIST_H

#include <stddef.h>

/* The struct of type `type` whose member `member` is at `ptr` (the containers' one macro). */
#define MU_CONTAINER_OF(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

struct mu_list_node {
  struct mu_list_node *prev, *next;
};

struct mu_list {
  struct mu_list_node *head, *tail;
  size_t n;
};

#define MU_LIST_INIT                                                                               \
  {                                                                                                \
    NULL, NULL, 0                                                                                  \
  }

static inline void mu_list_init(struct mu_list *l)
{
  l->head = l->tail = NULL;
  l->n = 0;
}

/* Appends `x` (not on any list) at the tail. */
static inline void mu_list_push_back(struct mu_list *l, struct mu_list_node *x)
{
  x->next = NULL;
  x->prev = l->tail;
  if (l->tail != NULL)
    l->tail->next = x;
  else
    l->head = x;
  l->tail = x;
  l->n++;
}

/* Inserts `x` (not on any list) at the head. */
static inline void mu_list_push_front(struct mu_list *l, struct mu_list_node *x)
{
  x->prev = NULL;
  x->next = l->head;
  if (l->head != NULL)
    l->head->prev = x;
  else
    l->tail = x;
  l->head = x;
  l->n++;
}

/* Unlinks `x`, which must be on `l`; its links are cleared. */
static inline void mu_list_remove(struct mu_list *l, struct mu_list_node *x)
{
  if (x->prev != NULL)
    x->prev->next = x->next;
  else
    l->head = x->next;
  if (x->next != NULL)
    x->next->prev = x->prev;
  else
    l->tail = x->prev;
  x->prev = x->next = NULL;
  l->n--;
}

/* Moves every node of `from` to `to` (whose old content is forgotten), in order; `from` ends
 * empty. Used to drain a list whose callbacks may queue new nodes on it. */
static inline void mu_list_take(struct mu_list *to, struct mu_list *from)
{
  *to = *from;
  mu_list_init(from);
}

#endif
