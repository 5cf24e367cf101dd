/* QUEUE_POP in O(1) (issue 33/3): each queue's items in push order beside the store, so a pop
 * takes the oldest at once where it scanned every item (3,000 pops of a 200k-item queue cost
 * 12 s of CPU). The store stays the truth: an item is "<queue dir>/<index, 20 digits>", made in
 * order by QUEUE_PUSH; the order here holds those indexes. An index whose item is gone (a v2
 * client deleted it, or the queue) is skipped; when the store holds items the order lacks (after
 * a restart, or a v2 client's POST into the dir), it is read again from the dir once, sorted.
 */
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "c10d_int.h"

struct c10d_queue {
  struct mu_hnode h; /* key: the queue's store path (part of the allocation) */
  uint64_t *idx;     /* item indexes, oldest at idx[head] */
  size_t head, n, cap;
};

static struct c10d_queue *queue_get(struct c10d *m, const char *qpath, int make)
{
  size_t len = strlen(qpath);
  struct mu_hnode *h = mu_htab_find(&m->queues, qpath, len);
  if (h != NULL || !make)
    return h != NULL ? MU_CONTAINER_OF(h, struct c10d_queue, h) : NULL;
  struct c10d_queue *q = mu_calloc(1, sizeof(*q) + len + 1);
  q->h.key = (char *)(q + 1);
  memcpy(q->h.key, qpath, len);
  mu_htab_add(&m->queues, &q->h, q->h.key, len);
  return q;
}

static void queue_drop(struct c10d *m, struct c10d_queue *q)
{
  mu_htab_del(&m->queues, &q->h);
  mu_free(q->idx);
  mu_free(q);
}

static void queue_append(struct c10d_queue *q, uint64_t index)
{
  if (q->n == q->cap && q->head > 0) { /* slide down what is left: amortized by the pops */
    memmove(q->idx, q->idx + q->head, (q->n - q->head) * sizeof(q->idx[0]));
    q->n -= q->head;
    q->head = 0;
  }
  if (q->n == q->cap) {
    q->cap = q->cap ? q->cap * 2 : 16;
    q->idx = mu_realloc(q->idx, q->cap * sizeof(q->idx[0]));
  }
  q->idx[q->n++] = index;
}

/* The index an item's name stands for. Returns: 0, or -1 when it is not 20 digits. */
static int item_index(const char *key, uint64_t *out)
{
  const char *name = strrchr(key, '/');
  name = name != NULL ? name + 1 : key;
  uint64_t v = 0;
  size_t i = 0;
  for (; name[i] >= '0' && name[i] <= '9'; i++)
    v = v * 10 + (uint64_t)(name[i] - '0');
  if (i != 20 || name[i] != '\0')
    return -1;
  *out = v;
  return 0;
}

static int cmp_u64(const void *a, const void *b)
{
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Reads the order again from the queue's dir `d`. */
static void queue_rebuild(struct c10d_queue *q, const struct v2_node *d)
{
  q->head = q->n = 0;
  for (uint32_t i = 0; i < d->nchildren; i++) {
    uint64_t v;
    if (!d->children[i]->is_dir && item_index(d->children[i]->hn.key, &v) == 0)
      queue_append(q, v);
  }
  qsort(q->idx, q->n, sizeof(q->idx[0]), cmp_u64);
}

void c10d_queue_pushed(struct c10d *m, const char *qpath, const char *item_key)
{
  uint64_t v;
  struct v2_node *d = v2_store_lookup(m->store, qpath);
  if (d == NULL || !d->is_dir || item_index(item_key, &v) != 0)
    return;
  struct c10d_queue *q = queue_get(m, qpath, 1);
  if (q->n - q->head + 1 < d->nchildren)
    queue_rebuild(q, d); /* items it does not know: the new one is among them */
  else
    queue_append(q, v);
}

struct v2_node *c10d_queue_oldest(struct c10d *m, const char *qpath, const struct v2_node *d)
{
  struct c10d_queue *q = queue_get(m, qpath, 1);
  if (q->n - q->head < d->nchildren)
    queue_rebuild(q, d);
  struct mu_buf *path = &m->path2;
  for (int again = 0; again < 2; again++) {
    while (q->head < q->n) {
      mu_buf_clear(path);
      mu_buf_printf(path, "%s/%020llu", qpath, (unsigned long long)q->idx[q->head++]);
      struct v2_node *n = v2_store_lookup(m->store, mu_buf_str(path));
      if (n != NULL && !n->is_dir)
        return n;
    }
    queue_rebuild(q, d); /* every index stale, items left: not ones it knew */
  }
  queue_drop(m, q);
  return NULL;
}

void c10d_queue_forget(struct c10d *m, const char *qpath)
{
  struct c10d_queue *q = queue_get(m, qpath, 0);
  if (q != NULL && q->head == q->n)
    queue_drop(m, q);
}

static void free_queue(struct mu_hnode *h, void *data)
{
  (void)data;
  struct c10d_queue *q = MU_CONTAINER_OF(h, struct c10d_queue, h);
  mu_free(q->idx);
  mu_free(q);
}

void c10d_queues_release(struct c10d *m)
{
  mu_htab_clear(&m->queues, free_queue, NULL);
  mu_htab_release(&m->queues);
}
