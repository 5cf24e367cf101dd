/* The etcd v2 key tree as JSON: an event's node and prevNode (etcd's NodeExtern, field by field)
 * and a GET rendered in slices (struct v2_walk). store.c keeps the tree and its operations and
 * calls in here for what they answer; both share store_int.h.
 */
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "decimal.h"
#include "store.h"
#include "store_int.h"

static int is_hidden_node(const struct v2_node *n)
{
  const char *slash = strrchr(n->hn.key, '/');
  return slash != NULL && slash[1] == '_';
}

/* ---------------------------------------------------------------------------------------------
 * Rendering (NodeExtern field order: key, value, dir, expiration, ttl, nodes, modifiedIndex,
 * createdIndex; all omitempty)
 */

struct jw {
  struct mu_buf *b;
  int first;
};

static void field(struct jw *w, const char *name)
{
  if (!w->first)
    mu_buf_putc(w->b, ',');
  w->first = 0;
  mu_buf_putc(w->b, '"');
  mu_buf_puts(w->b, name);
  mu_buf_puts(w->b, "\":");
}

static void put_expiry(struct jw *w, int64_t expire_ns, int64_t now)
{
  if (expire_ns == 0)
    return;
  field(w, "expiration");
  mu_json_time(w->b, expire_ns);
  int64_t d = expire_ns - now;
  int64_t ttl = d / 1000000000;
  if (d % 1000000000 > 0)
    ttl++;
  if (ttl != 0) {
    field(w, "ttl");
    mu_buf_printf(w->b, "%lld", (long long)ttl);
  }
}

static void put_u64(struct mu_buf *b, uint64_t v)
{
  char d[RV_DEC_MAX];
  mu_buf_append(b, d, rv_dec(d, v));
}

static void put_indexes(struct jw *w, uint64_t mi, uint64_t ci)
{
  if (mi != 0) {
    field(w, "modifiedIndex");
    put_u64(w->b, mi);
  }
  if (ci != 0) {
    field(w, "createdIndex");
    put_u64(w->b, ci);
  }
}

static void put_key(struct jw *w, const char *key, size_t klen)
{
  if (klen == 1 && key[0] == '/')
    return; /* the root: etcd's "/1" trimmed to "" */
  field(w, "key");
  mu_json_str(w->b, key, klen);
}

/* An event's node (newEvent + the fields each operation sets). */
static void put_event_node(struct mu_buf *b, const char *key, size_t klen,
                           const struct v2_event_src *src)
{
  struct jw w = {b, 1};
  mu_buf_putc(b, '{');
  put_key(&w, key, klen);
  if (src->value != NULL) {
    field(&w, "value");
    mu_json_str(b, src->value, src->vlen);
  }
  if (src->dir) {
    field(&w, "dir");
    mu_buf_puts(b, "true");
  }
  put_expiry(&w, src->expire_ns, src->now);
  put_indexes(&w, src->mi, src->ci);
  mu_buf_putc(b, '}');
}

/* An event's prevNode: node.Repr of the node the write replaced or removed, without children. */
static void put_event_prev(struct mu_buf *b, const char *key, size_t klen,
                           const struct v2_event_src *src)
{
  struct jw w = {b, 1};
  mu_buf_puts(b, ",\"prevNode\":{");
  put_key(&w, key, klen);
  if (!src->prev_dir) {
    field(&w, "value");
    mu_json_str(b, src->prev_value, src->prev_vlen);
  } else {
    field(&w, "dir");
    mu_buf_puts(b, "true");
  }
  put_expiry(&w, src->prev_expire_ns, src->now);
  put_indexes(&w, src->prev_mi, src->prev_ci);
  mu_buf_putc(b, '}');
}

static int cmp_node_key(const void *a, const void *b)
{
  const struct v2_node *x = *(const struct v2_node *const *)a;
  const struct v2_node *y = *(const struct v2_node *const *)b;
  size_t n = x->hn.len < y->hn.len ? x->hn.len : y->hn.len;
  int c = memcmp(x->hn.key, y->hn.key, n);
  if (c != 0)
    return c;
  return x->hn.len < y->hn.len ? -1 : x->hn.len > y->hn.len;
}

/* node.Repr up to its children: {key, value or dir, expiration, ttl. */
static void put_repr_head(struct jw *w, const struct v2_node *n, int64_t now)
{
  mu_buf_putc(w->b, '{');
  put_key(w, n->hn.key, n->hn.len);
  if (!n->is_dir) {
    field(w, "value");
    mu_json_str(w->b, n->value, n->value_len);
  } else {
    field(w, "dir");
    mu_buf_puts(w->b, "true");
  }
  put_expiry(w, n->expire_ns, now);
}

/* A NUL-terminated copy of `n` bytes of `v` (a c10d value holds NULs). */
static char *copy_value(const char *v, size_t n)
{
  char *c = mu_malloc(n + 1);
  memcpy(c, v, n);
  c[n] = '\0';
  return c;
}

struct v2_event *v2_json_event_new(enum v2_event_action a, const char *key, size_t klen,
                                   uint64_t index, int64_t now)
{
  struct v2_event *e = mu_calloc(1, sizeof(*e));
  e->action = a;
  e->index = index;
  e->key = mu_strndup(key, klen);
  e->key_len = klen;
  e->json_head = strlen("{\"action\":\"") + strlen(v2_event_action_name(a)) + 1;
  e->src = mu_calloc(1, sizeof(*e->src));
  e->src->now = now;
  return e;
}

void v2_json_event_node(struct v2_event *e, const char *value, size_t vlen, int dir,
                        int64_t expire_ns, uint64_t mi, uint64_t ci)
{
  struct v2_event_src *src = e->src;
  mu_free(src->value);
  src->value = value != NULL ? copy_value(value, vlen) : NULL;
  src->vlen = value != NULL ? vlen : 0;
  src->dir = dir != 0;
  src->expire_ns = expire_ns;
  src->mi = mi;
  src->ci = ci;
}

void v2_json_event_prev(struct v2_event *e, const struct v2_node *prev, char *value)
{
  struct v2_event_src *src = e->src;
  mu_free(src->prev_value);
  src->has_prev = 1;
  src->prev_dir = prev->is_dir;
  src->prev_value = prev->is_dir ? NULL : value;
  src->prev_vlen = prev->is_dir ? 0 : prev->value_len;
  src->prev_expire_ns = prev->expire_ns;
  src->prev_mi = prev->modified_index;
  src->prev_ci = prev->created_index;
}

void v2_json_event_render(struct v2_event *e)
{
  if (e->src == NULL)
    return;
  const struct v2_event_src *src = e->src;
  struct mu_buf b;
  mu_buf_init(&b, MU_BUF_UNBOUNDED);
  /* one allocation for the usual event (short values, or ones that need no escape) */
  mu_buf_reserve(&b, 256 + 2 * e->key_len + src->vlen + src->prev_vlen);
  mu_buf_puts(&b, "{\"action\":\"");
  mu_buf_puts(&b, v2_event_action_name(e->action));
  mu_buf_puts(&b, "\",\"node\":");
  put_event_node(&b, e->key, e->key_len, src);
  if (src->has_prev)
    put_event_prev(&b, e->key, e->key_len, src);
  mu_buf_puts(&b, "}\n");
  size_t len = b.len;
  v2_event_set_json(e, mu_buf_detach(&b), len, e->json_head);
}

/* ---------------------------------------------------------------------------------------------
 * A GET in slices: the same rendering as etcd's node.Repr, with the recursion turned into a
 * stack of frames so that it can stop after any node and go on later (the tree is frozen
 * meanwhile: s->walks > 0 defers the TTL expiry, and the API parks writes).
 */

/* A merge sort that can stop after any step (a dir of a million children must not be sorted
 * in one go): runs of SORT_RUN sorted with qsort, then bottom-up merge passes between two
 * arrays, each merge resumable element by element. */
#define SORT_RUN 2048
#define SORT_STEP 4096 /* elements per msort_step() */

struct msort {
  struct v2_node **a, **b; /* a: the data; b: the other half of the passes (owned) */
  uint32_t n, w;           /* w: 0 while the runs are sorted, then the merge width */
  uint32_t lo, i, j, k;    /* the run or the merge in progress */
};

/* Returns: 1 when a[] is sorted. */
static int msort_step(struct msort *m)
{
  uint32_t budget = SORT_STEP;
  if (m->w == 0) {
    uint32_t len = m->n - m->lo < SORT_RUN ? m->n - m->lo : SORT_RUN;
    qsort(m->a + m->lo, len, sizeof(*m->a), cmp_node_key);
    m->lo += len;
    if (m->lo < m->n)
      return 0;
    m->w = SORT_RUN;
    m->lo = m->k = 0;
    m->i = 0;
    m->j = m->w < m->n ? m->w : m->n;
  }
  while (m->w < m->n) {
    uint32_t mid = m->lo + m->w < m->n ? m->lo + m->w : m->n;
    uint32_t hi = m->lo + 2 * m->w < m->n ? m->lo + 2 * m->w : m->n;
    while (m->k < hi && budget > 0) {
      if (m->j >= hi || (m->i < mid && cmp_node_key(&m->a[m->i], &m->a[m->j]) <= 0))
        m->b[m->k++] = m->a[m->i++];
      else
        m->b[m->k++] = m->a[m->j++];
      budget--;
    }
    if (m->k < hi)
      return 0;
    m->lo = hi;
    if (m->lo >= m->n) { /* the pass is done: the other array holds it */
      struct v2_node **t = m->a;
      m->a = m->b;
      m->b = t;
      m->w *= 2;
      m->lo = 0;
    }
    m->i = m->k = m->lo;
    m->j = m->lo + m->w < m->n ? m->lo + m->w : m->n;
    if (budget == 0)
      return m->w >= m->n;
  }
  return 1;
}

struct walk_frame {
  const struct v2_node *n;
  struct v2_node **order; /* n->children, or a sorted copy (owned when != n->children) */
  struct msort *sort;     /* a big dir's sort in progress (owned), or NULL */
  uint32_t i;             /* next child */
  int opened;             /* "nodes":[ written */
};

struct v2_walk {
  struct v2_store *s;
  v2_visible_fn *visible; /* NULL: every child */
  void *visible_data;
  int recursive, sorted, done;
  int64_t now;
  uint64_t index;
  const struct v2_node *root; /* not started yet: the node to open first */
  struct walk_frame *st;
  size_t depth, cap;
};

/* Writes the start of `n`'s repr; a dir whose children are listed gets a frame, any other
 * node is complete. */
static void walk_open(struct v2_walk *w, struct mu_buf *b, const struct v2_node *n,
                      int list_children)
{
  struct jw j = {b, 1};
  put_repr_head(&j, n, w->now);
  if (!n->is_dir || !list_children || n->nchildren == 0) {
    put_indexes(&j, n->modified_index, n->created_index);
    mu_buf_putc(b, '}');
    return;
  }
  if (w->depth == w->cap) {
    w->cap = w->cap ? w->cap * 2 : 8;
    w->st = mu_realloc(w->st, w->cap * sizeof(*w->st));
  }
  struct walk_frame *f = &w->st[w->depth++];
  f->n = n;
  f->order = n->children;
  f->i = 0;
  f->opened = 0;
  f->sort = NULL;
  if (w->sorted && n->nchildren > 1) {
    f->order = mu_malloc(n->nchildren * sizeof(*f->order));
    memcpy(f->order, n->children, n->nchildren * sizeof(*f->order));
    if (n->nchildren <= SORT_RUN) {
      qsort(f->order, n->nchildren, sizeof(*f->order), cmp_node_key);
      return;
    }
    f->sort = mu_calloc(1, sizeof(*f->sort));
    f->sort->a = f->order;
    f->sort->b = mu_malloc(n->nchildren * sizeof(*f->order));
    f->sort->n = n->nchildren;
  }
}

/* Ends a frame's sort: f->order is the sorted array. */
static void walk_sorted(struct walk_frame *f)
{
  f->order = f->sort->a;
  mu_free(f->sort->b);
  mu_free(f->sort);
  f->sort = NULL;
}

static void walk_pop(struct v2_walk *w)
{
  struct walk_frame *f = &w->st[--w->depth];
  if (f->sort != NULL)
    walk_sorted(f);
  if (f->order != f->n->children)
    mu_free(f->order);
}

struct v2_walk *v2_store_walk_new(struct v2_store *s, const char *key, int recursive, int sorted,
                                  struct v2_err *err)
{
  struct v2_node *n = v2_store_internal_get(s, key, err);
  if (n == NULL) {
    s->stats.get_fail++;
    return NULL;
  }
  s->stats.get_success++;
  struct v2_walk *w = mu_calloc(1, sizeof(*w));
  w->s = s;
  w->recursive = recursive != 0;
  w->sorted = sorted != 0;
  w->now = v2_now_ns();
  w->index = s->index;
  w->root = n;
  s->walks++;
  return w;
}

void v2_store_walk_filter(struct v2_walk *w, v2_visible_fn *fn, void *data)
{
  w->visible = fn;
  w->visible_data = data;
}

uint64_t v2_store_walk_index(const struct v2_walk *w)
{
  return w->index;
}

int v2_store_walk_step(struct v2_walk *w, struct mu_buf *out, uint64_t until_ns, size_t limit)
{
  if (w->done)
    return 1;
  if (w->root != NULL) {
    const struct v2_node *root = w->root;
    w->root = NULL;
    mu_buf_puts(out, "{\"action\":\"get\",\"node\":");
    walk_open(w, out, root, 1);
  }
  unsigned k = 0;
  while (w->depth > 0) {
    if (out->len > limit || ((++k & 63) == 0 && uv_hrtime() >= until_ns))
      return 0;
    struct walk_frame *f = &w->st[w->depth - 1];
    if (f->sort != NULL) {
      if (msort_step(f->sort))
        walk_sorted(f);
      k |= 63; /* a step is worth a time check */
      continue;
    }
    if (f->i < f->n->nchildren) {
      const struct v2_node *c = f->order[f->i++];
      if (is_hidden_node(c) ||
          (w->visible != NULL && !w->visible(w->visible_data, c->hn.key, c->hn.len, c->is_dir)))
        continue;
      mu_buf_puts(out, f->opened ? "," : ",\"nodes\":[");
      f->opened = 1;
      walk_open(w, out, c, w->recursive);
      continue;
    }
    if (f->opened)
      mu_buf_putc(out, ']');
    struct jw j = {out, 0};
    put_indexes(&j, f->n->modified_index, f->n->created_index);
    mu_buf_putc(out, '}');
    walk_pop(w);
  }
  mu_buf_puts(out, "}\n");
  v2_store_walk_free(w, 0);
  return 1;
}

void v2_store_walk_free(struct v2_walk *w, int free_it)
{
  if (w == NULL)
    return;
  if (!w->done) {
    while (w->depth > 0)
      walk_pop(w);
    mu_free(w->st);
    w->st = NULL;
    w->done = 1;
    if (--w->s->walks == 0 && w->s->ttl_deferred) {
      w->s->ttl_deferred = 0;
      v2_ttl_arm(&w->s->ttl); /* the expirations held back run from the timer, at once */
    }
  }
  if (free_it)
    mu_free(w);
}
