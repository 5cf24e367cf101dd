/* The native rendezvous state machine (see rdzv.h for the contract, docs/rendezvous.md for the
 * API it serves).
 *
 * Why it is built this way:
 * - One deadline heap and one uv_timer_t for every timeout: a pending join or watch is a few
 *   words in a caller-owned struct, and withdrawing it never needs a uv_close() round trip.
 * - Leases: the TTL is one per run, so keeping members in renewal order (a list; a heartbeat
 *   moves its node to the tail) makes the head the next to expire. A heartbeat is O(1) and
 *   never touches the heap; the run's single lease deadline fires early at worst and re-arms.
 * - Rounds are reference-counted and hold references on their member nodes, so a node that is
 *   removed while its round still lists it stays readable until the round goes, and a callback
 *   that changes the run (even closes another round) cannot free the round being answered.
 * - Callbacks fire after the state is consistent; lists are detached before firing so a
 *   callback that starts a new wait lands on the live list, not the one being drained.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "buf.h"
#include "rdzv.h"

#define DEFAULT_GC_MS 600000u
#define DEFAULT_LAST_CALL_MS 1000
#define DEFAULT_JOIN_TIMEOUT_MS 600000
#define DEFAULT_LEASE_TTL_MS 10000
#define MAX_TIMEOUT_MS (7LL * 24 * 3600 * 1000) /* one week */

/* ---------------------------------------------------------------------------------------- */
/* A chained hash table of intrusive entries keyed by a string.                             */
/* ---------------------------------------------------------------------------------------- */

struct hent {
  struct hent *hnext;
  char *key;
  uint32_t hash;
};

struct htab {
  struct hent **b;
  size_t nb, n;
};

static uint32_t hash_str(const char *s)
{
  uint32_t h = 2166136261u; /* FNV-1a */
  for (; *s; s++) {
    h ^= (unsigned char)*s;
    h *= 16777619u;
  }
  return h;
}

static struct hent *htab_find(const struct htab *t, const char *key)
{
  if (t->nb == 0)
    return NULL;
  uint32_t h = hash_str(key);
  for (struct hent *e = t->b[h & (t->nb - 1)]; e; e = e->hnext)
    if (e->hash == h && strcmp(e->key, key) == 0)
      return e;
  return NULL;
}

static void htab_add(struct htab *t, struct hent *e)
{
  if (t->n + 1 > t->nb) {
    size_t nb = t->nb ? t->nb * 2 : 16;
    struct hent **b = mu_calloc(nb, sizeof(*b));
    for (size_t i = 0; i < t->nb; i++) {
      struct hent *x = t->b[i];
      while (x) {
        struct hent *next = x->hnext;
        x->hnext = b[x->hash & (nb - 1)];
        b[x->hash & (nb - 1)] = x;
        x = next;
      }
    }
    mu_free(t->b);
    t->b = b;
    t->nb = nb;
  }
  e->hash = hash_str(e->key);
  e->hnext = t->b[e->hash & (t->nb - 1)];
  t->b[e->hash & (t->nb - 1)] = e;
  t->n++;
}

static void htab_del(struct htab *t, struct hent *e)
{
  struct hent **pp = &t->b[e->hash & (t->nb - 1)];
  while (*pp && *pp != e)
    pp = &(*pp)->hnext;
  if (*pp) {
    *pp = e->hnext;
    t->n--;
  }
  e->hnext = NULL;
}

static void htab_release(struct htab *t)
{
  mu_free(t->b);
  t->b = NULL;
  t->nb = t->n = 0;
}

/* ---------------------------------------------------------------------------------------- */
/* Objects.                                                                                   */
/* ---------------------------------------------------------------------------------------- */

struct wlist {
  struct mu_rdzv_wait *head, *tail;
  uint32_t n;
};

struct mu_rdzv_node {
  struct hent h; /* key: node id */
  char *addr;
  uint32_t lws, master_port;
  uint32_t refs; /* +1 while in the run's table, +1 per round that lists it */
  int gone;      /* removed from the run */
  int left_ok;   /* left the active round with success */
  /* lease order (only while it has no pending join) */
  struct mu_rdzv_node *lprev, *lnext;
  int in_lease;
  uint32_t nwatch; /* open watches: while > 0 they hold the lease (no expiry, no heartbeat) */
  uint64_t expires;
  struct mu_rdzv_wait *join; /* its pending join, or NULL */
  /* its place in the latest round that lists it (NULL when none) */
  struct mu_rdzv_round *round;
  uint32_t rank;
  uint64_t rank_offset;
};

struct barrier {
  struct hent h; /* key: name */
  uint32_t count;
  uint64_t generation;
  struct wlist arrivals;
};

struct kv {
  struct hent h; /* key */
  char *val;     /* NULL while absent (only waiters) */
  size_t len;
  uint64_t version;
  struct wlist waiters;
};

enum dl_kind { DL_WAIT = 1, DL_LEASE, DL_LAST_CALL, DL_GC };

struct mu_rdzv_run {
  struct hent h; /* key: run id */
  struct mu_rdzv *rv;
  struct mu_rdzv_run *prev, *next;
  uint32_t min_nodes, max_nodes, last_call_ms, join_timeout_ms, lease_ttl_ms;
  enum mu_rdzv_run_state state;
  char *reason;
  enum mu_rdzv_round_state rstate;
  struct mu_rdzv_round *round; /* the latest closed round, NULL before the first */
  uint32_t round_gone;         /* members of `round` removed since it closed */
  uint32_t left_ok;            /* members of `round` that left with success */
  struct htab nodes;
  struct wlist joins;   /* pending joins, in join order */
  uint32_t joins_prev;  /* pending joins from members of `round` */
  struct wlist watches; /* pending watches */
  struct mu_rdzv_node *lease_head, *lease_tail;
  struct mu_rdzv_deadline lease_dl, last_call_dl, gc_dl;
  struct htab barriers;
  struct htab kv;
  size_t kv_bytes;
  uint32_t pending_other; /* barrier arrivals and KV waiters */
  uint64_t kv_version;
};

struct mu_rdzv {
  uv_loop_t *loop;
  uv_timer_t timer;
  uint64_t armed_at; /* 0: not armed */
  struct mu_rdzv_deadline **heap;
  size_t nheap, capheap;
  uint64_t gc_ms;
  struct htab runs;
  struct mu_rdzv_run *runs_head, *runs_tail;
  struct mu_rdzv_stats st;
  void (*done)(void *);
  void *done_data;
  void (*on_change)(void *); /* persist.c: the durable state changed (mu_rdzv_set_change_hook) */
  void *on_change_data;
};

#define CONTAINER(p, type, member) ((type *)(void *)((char *)(p)-offsetof(type, member)))

/* Tells persist.c that what mu_rdzv_encode() writes has changed. */
static void changed(struct mu_rdzv *rv)
{
  if (rv->on_change != NULL)
    rv->on_change(rv->on_change_data);
}

/* ---------------------------------------------------------------------------------------- */
/* Names.                                                                                     */
/* ---------------------------------------------------------------------------------------- */

const char *mu_rdzv_err_code(int err)
{
  static const char *const codes[] = {"ok",
#define XX(name, code) code,
                                      MU_RDZV_ERR_MAP(XX)
#undef XX
  };
  if (err < 0 || err >= MU_RDZV_E__COUNT)
    return "internal";
  return codes[err];
}

const char *mu_rdzv_run_state_name(enum mu_rdzv_run_state s)
{
  switch (s) {
  case MU_RDZV_RUN_OPEN:
    return "open";
  case MU_RDZV_RUN_CLOSED:
    return "closed";
  case MU_RDZV_RUN_SHUT:
    return "shut";
  }
  return "unknown";
}

const char *mu_rdzv_round_state_name(enum mu_rdzv_round_state s)
{
  switch (s) {
  case MU_RDZV_ROUND_JOINING:
    return "joining";
  case MU_RDZV_ROUND_ACTIVE:
    return "active";
  case MU_RDZV_ROUND_BROKEN:
    return "broken";
  }
  return "unknown";
}

/* ---------------------------------------------------------------------------------------- */
/* The deadline heap.                                                                         */
/* ---------------------------------------------------------------------------------------- */

static void heap_swap(struct mu_rdzv *rv, size_t a, size_t b)
{
  struct mu_rdzv_deadline *t = rv->heap[a];
  rv->heap[a] = rv->heap[b];
  rv->heap[b] = t;
  rv->heap[a]->idx = a + 1;
  rv->heap[b]->idx = b + 1;
}

static void heap_up(struct mu_rdzv *rv, size_t i)
{
  while (i > 0) {
    size_t p = (i - 1) / 2;
    if (rv->heap[p]->at <= rv->heap[i]->at)
      break;
    heap_swap(rv, p, i);
    i = p;
  }
}

static void heap_down(struct mu_rdzv *rv, size_t i)
{
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < rv->nheap && rv->heap[l]->at < rv->heap[m]->at)
      m = l;
    if (r < rv->nheap && rv->heap[r]->at < rv->heap[m]->at)
      m = r;
    if (m == i)
      break;
    heap_swap(rv, i, m);
    i = m;
  }
}

static void on_timer(uv_timer_t *t);

static void arm(struct mu_rdzv *rv)
{
  if (rv->nheap == 0)
    return;
  uint64_t at = rv->heap[0]->at;
  if (rv->armed_at != 0 && rv->armed_at <= at)
    return;
  uint64_t now = uv_now(rv->loop);
  rv->armed_at = at ? at : 1;
  uv_timer_start(&rv->timer, on_timer, at > now ? at - now : 0, 0);
}

static void dl_remove(struct mu_rdzv *rv, struct mu_rdzv_deadline *d)
{
  if (d->idx == 0)
    return;
  size_t i = d->idx - 1;
  d->idx = 0;
  rv->nheap--;
  if (i != rv->nheap) {
    rv->heap[i] = rv->heap[rv->nheap];
    rv->heap[i]->idx = i + 1;
    heap_up(rv, i);
    heap_down(rv, i);
  }
}

/* Queues (or moves) `d` to fire at `at`. */
static void dl_set(struct mu_rdzv *rv, struct mu_rdzv_deadline *d, uint64_t at)
{
  if (d->idx != 0) {
    d->at = at;
    heap_up(rv, d->idx - 1);
    heap_down(rv, d->idx - 1);
  } else {
    if (rv->nheap == rv->capheap) {
      rv->capheap = rv->capheap ? rv->capheap * 2 : 64;
      rv->heap = mu_realloc(rv->heap, rv->capheap * sizeof(*rv->heap));
    }
    d->at = at;
    rv->heap[rv->nheap] = d;
    d->idx = ++rv->nheap;
    heap_up(rv, rv->nheap - 1);
  }
  arm(rv);
}

static uint64_t now_ms(struct mu_rdzv *rv)
{
  return uv_now(rv->loop);
}

/* ---------------------------------------------------------------------------------------- */
/* Wait lists.                                                                                */
/* ---------------------------------------------------------------------------------------- */

static void wl_append(struct wlist *l, struct mu_rdzv_wait *w)
{
  w->list = l;
  w->next = NULL;
  w->prev = l->tail;
  if (l->tail)
    l->tail->next = w;
  else
    l->head = w;
  l->tail = w;
  l->n++;
}

static void wl_unlink(struct mu_rdzv_wait *w)
{
  struct wlist *l = w->list;
  if (l == NULL)
    return;
  if (w->prev)
    w->prev->next = w->next;
  else
    l->head = w->next;
  if (w->next)
    w->next->prev = w->prev;
  else
    l->tail = w->prev;
  l->n--;
  w->prev = w->next = NULL;
  w->list = NULL;
}

/* Moves every wait of `from` onto `to` (emptying `from`). */
static void wl_take(struct wlist *to, struct wlist *from)
{
  *to = *from;
  for (struct mu_rdzv_wait *w = to->head; w; w = w->next)
    w->list = to;
  from->head = from->tail = NULL;
  from->n = 0;
}

/* Detaches `w` from its list and deadline; it is no longer pending. */
static void wait_detach(struct mu_rdzv *rv, struct mu_rdzv_wait *w)
{
  wl_unlink(w);
  dl_remove(rv, &w->dl);
  mu_free(w->barrier_id);
  w->barrier_id = NULL;
  w->kind = MU_RDZV_W_NONE;
  w->obj = NULL;
}

static void fire(struct mu_rdzv_wait *w, const struct mu_rdzv_answer *a)
{
  w->run = NULL;
  w->cb(w, a);
}

static void fire_error(struct mu_rdzv_wait *w, const char *run_id, int err, const char *msg)
{
  struct mu_rdzv_answer a;
  memset(&a, 0, sizeof(a));
  a.err = err;
  a.message = msg;
  a.run_id = run_id;
  fire(w, &a);
}

/* Detaches barrier or KV wait `w` of `run` and drops it from the pending counts. */
static void other_detach(struct mu_rdzv_run *run, struct mu_rdzv_wait *w)
{
  wait_detach(run->rv, w);
  run->pending_other--;
  run->rv->st.pending_other--;
}

/* Answers `a` to every barrier or KV wait on `list` (taken off it first: a callback may queue
 * new waits there) after detaching it and dropping it from the run's pending count. */
static void answer_others(struct mu_rdzv_run *run, struct wlist *list,
                          const struct mu_rdzv_answer *a)
{
  struct wlist todo;
  wl_take(&todo, list);
  struct mu_rdzv_wait *x;
  while ((x = todo.head) != NULL) {
    other_detach(run, x);
    fire(x, a);
  }
}

/* ---------------------------------------------------------------------------------------- */
/* Nodes, leases, rounds.                                                                     */
/* ---------------------------------------------------------------------------------------- */

static void node_unref(struct mu_rdzv_node *n)
{
  if (--n->refs > 0)
    return;
  mu_free(n->addr); /* the id is part of the node's allocation */
  mu_free(n);
}

static void lease_unlink(struct mu_rdzv_run *run, struct mu_rdzv_node *n)
{
  if (!n->in_lease)
    return;
  if (n->lprev)
    n->lprev->lnext = n->lnext;
  else
    run->lease_head = n->lnext;
  if (n->lnext)
    n->lnext->lprev = n->lprev;
  else
    run->lease_tail = n->lprev;
  n->lprev = n->lnext = NULL;
  n->in_lease = 0;
}

/* (Re)starts `n`'s lease: it now expires last. A node with an open watch has no running
 * lease: the watch holds it, and its end starts the lease afresh (watch_release). */
static void lease_renew(struct mu_rdzv_run *run, struct mu_rdzv_node *n)
{
  lease_unlink(run, n);
  if (n->nwatch > 0)
    return;
  n->expires = now_ms(run->rv) + run->lease_ttl_ms;
  n->lprev = run->lease_tail;
  if (run->lease_tail)
    run->lease_tail->lnext = n;
  else
    run->lease_head = n;
  run->lease_tail = n;
  n->in_lease = 1;
  if (run->lease_dl.idx == 0 && run->state == MU_RDZV_RUN_OPEN)
    dl_set(run->rv, &run->lease_dl, run->lease_head->expires);
}

/* A watch parked by member `n` holds its lease: the lease stops until the watch ends. */
static void watch_hold(struct mu_rdzv_run *run, struct mu_rdzv_wait *w, struct mu_rdzv_node *n)
{
  n->refs++;
  n->nwatch++;
  lease_unlink(run, n);
  w->node = n;
}

/* Ends a watch: frees its node id and, if it held a lease, restarts that lease from now (a
 * node whose watch ended has one lease TTL to heartbeat or watch again). */
static void watch_release(struct mu_rdzv_run *run, struct mu_rdzv_wait *w)
{
  struct mu_rdzv_node *n = w->node;
  mu_free(w->obj);
  w->obj = NULL;
  w->node = NULL;
  if (n == NULL)
    return;
  if (--n->nwatch == 0 && !n->gone && n->join == NULL && run->state == MU_RDZV_RUN_OPEN)
    lease_renew(run, n);
  node_unref(n);
}

static void round_unref(struct mu_rdzv_round *r)
{
  if (--r->refs > 0)
    return;
  for (uint32_t i = 0; i < r->nnodes; i++) {
    struct mu_rdzv_node *n = r->members[i];
    if (n->round == r)
      n->round = NULL;
    node_unref(n);
  }
  mu_free(r->members);
  mu_free(r->members_json);
  mu_free(r);
}

/* Is `n` a member of the run's latest round? */
static int in_round(const struct mu_rdzv_run *run, const struct mu_rdzv_node *n)
{
  return run->round != NULL && n->round == run->round && !n->gone;
}

static uint32_t waiting_count(const struct mu_rdzv_run *run)
{
  return run->joins.n;
}

/* The event a watch of round `round` by `node_id` should get now, or NULL (healthy). */
static const char *watch_event(struct mu_rdzv_run *run, const char *node_id, uint64_t round)
{
  if (run->state == MU_RDZV_RUN_CLOSED)
    return "closed";
  if (run->state == MU_RDZV_RUN_SHUT)
    return "shut";
  uint64_t cur = run->round ? run->round->number : 0;
  if (round < cur)
    return "superseded";
  if (round > cur)
    return "broken"; /* a round that never closed: the node must join */
  if (run->rstate != MU_RDZV_ROUND_ACTIVE)
    return "broken";
  struct hent *e = htab_find(&run->nodes, node_id);
  if (e == NULL || !in_round(run, CONTAINER(e, struct mu_rdzv_node, h)))
    return "broken";
  if (run->joins.n > 0 && run->round->nnodes < run->max_nodes)
    return "waiting";
  return NULL;
}

/* Fires every watch that now has an event. */
static void kick_watches(struct mu_rdzv_run *run)
{
  struct wlist todo;
  wl_take(&todo, &run->watches);
  struct mu_rdzv_wait *w;
  while ((w = todo.head) != NULL) {
    const char *ev = watch_event(run, w->obj, w->round);
    wl_unlink(w);
    if (ev == NULL) {
      wl_append(&run->watches, w);
      continue;
    }
    struct mu_rdzv_answer a;
    memset(&a, 0, sizeof(a));
    a.run_id = run->h.key;
    a.event = ev;
    a.round_number = w->round;
    a.waiting = waiting_count(run);
    watch_release(run, w);
    wait_detach(run->rv, w);
    run->rv->st.pending_watches--;
    fire(w, &a);
  }
}

static void break_round(struct mu_rdzv_run *run)
{
  if (run->rstate != MU_RDZV_ROUND_ACTIVE)
    return;
  run->rstate = MU_RDZV_ROUND_BROKEN;
  changed(run->rv);
  kick_watches(run);
}

static void gc_check(struct mu_rdzv_run *run);
static void maybe_close(struct mu_rdzv_run *run, int last_call_over);

/* Withdraws node `n`'s pending join (no callback); the node keeps a lease. */
static void join_withdraw(struct mu_rdzv_run *run, struct mu_rdzv_node *n)
{
  struct mu_rdzv_wait *w = n->join;
  if (w == NULL)
    return;
  n->join = NULL;
  if (in_round(run, n))
    run->joins_prev--;
  wait_detach(run->rv, w);
  run->rv->st.pending_joins--;
  if (run->state == MU_RDZV_RUN_OPEN)
    lease_renew(run, n);
}

/* Removes node `n` from the run (lease expired, left, failed). */
static void node_remove(struct mu_rdzv_run *run, struct mu_rdzv_node *n, int breaks)
{
  if (n->join) {
    struct mu_rdzv_wait *w = n->join;
    join_withdraw(run, n);
    fire_error(w, run->h.key, MU_RDZV_ENOT_MEMBER,
               "the node was removed from the run while its join was pending; join again");
  }
  lease_unlink(run, n);
  htab_del(&run->nodes, &n->h);
  int member = in_round(run, n);
  n->gone = 1;
  if (member) {
    run->round_gone++;
    if (breaks)
      break_round(run);
  }
  node_unref(n);
  run->rv->st.nodes--;
  changed(run->rv);
  maybe_close(run, 0);
  gc_check(run);
}

static void fill_member(const struct mu_rdzv_node *n, struct mu_rdzv_member *m)
{
  m->node_id = n->h.key;
  m->addr = n->addr;
  m->local_world_size = n->lws;
  m->master_port = n->master_port;
  m->node_rank = n->rank;
  m->rank_offset = n->rank_offset;
}

void mu_rdzv_round_member(const struct mu_rdzv_round *round, uint32_t i, struct mu_rdzv_member *out)
{
  const struct mu_rdzv_node *n = round->members[i];
  fill_member(n, out);
  /* n->rank may belong to a later round: the round's own order is authoritative. */
  out->node_rank = i;
}

const char *mu_rdzv_round_members_json(const struct mu_rdzv_round *round, size_t *len)
{
  struct mu_rdzv_round *r = (struct mu_rdzv_round *)round; /* a cache: logically const */
  if (r->members_json == NULL) {
    struct mu_buf b = MU_BUF_INIT((size_t)1 << 30);
    uint64_t off = 0;
    mu_buf_putc(&b, '[');
    for (uint32_t i = 0; i < r->nnodes; i++) {
      const struct mu_rdzv_node *n = r->members[i];
      /* Ids and addresses are checked at join to need no JSON escaping. */
      mu_buf_printf(&b,
                    "%s{\"node_id\":\"%s\",\"addr\":\"%s\",\"local_world_size\":%" PRIu32
                    ",\"node_rank\":%" PRIu32 ",\"rank_offset\":%" PRIu64 "}",
                    i ? "," : "", n->h.key, n->addr, n->lws, i, off);
      off += n->lws;
    }
    mu_buf_putc(&b, ']');
    r->members_json_len = b.len;
    r->members_json = mu_buf_detach(&b);
  }
  if (len)
    *len = r->members_json_len;
  return r->members_json;
}

/* Closes a round with the pending joins: members of the previous round first, in their old
 * order, then newcomers in join order, up to max_nodes. */
static void close_round(struct mu_rdzv_run *run)
{
  struct mu_rdzv *rv = run->rv;
  struct mu_rdzv_round *old = run->round;
  uint32_t k = run->joins.n < run->max_nodes ? run->joins.n : run->max_nodes;
  struct mu_rdzv_round *r = mu_calloc(1, sizeof(*r));
  r->number = (old ? old->number : 0) + 1;
  r->members = mu_calloc(k ? k : 1, sizeof(*r->members));
  r->refs = 1;

  /* Order: old members by old rank (bucketed, O(n)), then newcomers. */
  struct mu_rdzv_wait **chosen = mu_calloc(k ? k : 1, sizeof(*chosen));
  uint32_t nchosen = 0;
  if (old && run->joins_prev > 0) {
    struct mu_rdzv_wait **bucket = mu_calloc(old->nnodes, sizeof(*bucket));
    for (struct mu_rdzv_wait *w = run->joins.head; w; w = w->next) {
      struct mu_rdzv_node *n = w->obj;
      if (in_round(run, n))
        bucket[n->rank] = w;
    }
    for (uint32_t i = 0; i < old->nnodes && nchosen < k; i++)
      if (bucket[i])
        chosen[nchosen++] = bucket[i];
    mu_free(bucket);
  }
  for (struct mu_rdzv_wait *w = run->joins.head; w && nchosen < k; w = w->next) {
    struct mu_rdzv_node *n = w->obj;
    if (!(old && run->joins_prev > 0 && in_round(run, n)))
      chosen[nchosen++] = w;
  }

  /* Leave the old round: its members' places are cleared. */
  run->round = r;
  if (old)
    round_unref(old);
  uint64_t off = 0;
  for (uint32_t i = 0; i < nchosen; i++) {
    struct mu_rdzv_node *n = chosen[i]->obj;
    r->members[i] = n;
    n->refs++;
    n->round = r;
    n->rank = i;
    n->rank_offset = off;
    n->left_ok = 0;
    off += n->lws;
  }
  r->nnodes = nchosen;
  r->world_size = off;
  run->rstate = MU_RDZV_ROUND_ACTIVE;
  run->round_gone = 0;
  run->left_ok = 0;
  run->joins_prev = 0;
  dl_remove(rv, &run->last_call_dl);
  rv->st.rounds_closed++;

  /* Detach the chosen waits and start their leases, then answer. */
  for (uint32_t i = 0; i < nchosen; i++) {
    struct mu_rdzv_node *n = chosen[i]->obj;
    n->join = NULL;
    wait_detach(rv, chosen[i]);
    rv->st.pending_joins--;
    lease_renew(run, n);
  }
  r->refs++; /* held while the callbacks run */
  struct mu_rdzv_answer a;
  memset(&a, 0, sizeof(a));
  a.run_id = run->h.key;
  a.round = r;
  a.round_number = r->number;
  a.lease_ttl_ms = run->lease_ttl_ms;
  if (nchosen > 0)
    mu_rdzv_round_member(r, 0, &a.master);
  for (uint32_t i = 0; i < nchosen; i++) {
    mu_rdzv_round_member(r, i, &a.self);
    a.with_members = chosen[i]->with_members && nchosen <= MU_RDZV_MEMBERS_IN_REPLY;
    fire(chosen[i], &a);
  }
  mu_free(chosen);
  /* Members of older rounds watching them learn they are superseded. */
  changed(rv);
  if (run->round == r)
    kick_watches(run);
  round_unref(r);
}

/* Closes the round if the pending joins allow it, or starts the last call. */
static void maybe_close(struct mu_rdzv_run *run, int last_call_over)
{
  if (run->state != MU_RDZV_RUN_OPEN || run->rstate == MU_RDZV_ROUND_ACTIVE)
    return;
  uint32_t n = run->joins.n;
  if (n < run->min_nodes || n == 0) {
    dl_remove(run->rv, &run->last_call_dl);
    return;
  }
  int known = 0;
  if (run->round && run->joins_prev > 0) {
    uint32_t survivors = run->round->nnodes - run->round_gone;
    known = run->joins_prev >= survivors;
  }
  if (n >= run->max_nodes || known || last_call_over || run->last_call_ms == 0) {
    close_round(run);
    return;
  }
  if (run->last_call_dl.idx == 0)
    dl_set(run->rv, &run->last_call_dl, now_ms(run->rv) + run->last_call_ms);
}

/* ---------------------------------------------------------------------------------------- */
/* Runs.                                                                                      */
/* ---------------------------------------------------------------------------------------- */

static void barrier_free(struct barrier *b)
{
  mu_free(b->h.key);
  mu_free(b);
}

static void kv_free(struct kv *e)
{
  mu_free(e->h.key);
  mu_free(e->val);
  mu_free(e);
}

/* Answers every wait of an ended run (or of a server shutting down with `err`). */
static void answer_all(struct mu_rdzv_run *run, int err, const char *msg)
{
  struct mu_rdzv *rv = run->rv;
  struct mu_rdzv_wait *w;
  while ((w = run->joins.head) != NULL) {
    struct mu_rdzv_node *n = w->obj;
    n->join = NULL;
    wait_detach(rv, w);
    rv->st.pending_joins--;
    fire_error(w, run->h.key, err, msg);
  }
  run->joins_prev = 0;
  while ((w = run->watches.head) != NULL) {
    struct mu_rdzv_answer a;
    memset(&a, 0, sizeof(a));
    a.run_id = run->h.key;
    if (err == MU_RDZV_ESHUTTING_DOWN) {
      a.err = err;
      a.message = msg;
    }
    a.event = run->state == MU_RDZV_RUN_SHUT ? "shut" : "closed";
    a.round_number = w->round;
    watch_release(run, w);
    wait_detach(rv, w);
    rv->st.pending_watches--;
    fire(w, &a);
  }
  for (size_t i = 0; i < run->barriers.nb; i++)
    for (struct hent *e = run->barriers.b[i]; e; e = e->hnext) {
      struct barrier *b = CONTAINER(e, struct barrier, h);
      while ((w = b->arrivals.head) != NULL) {
        other_detach(run, w);
        fire_error(w, run->h.key, err, msg);
      }
    }
  for (size_t i = 0; i < run->kv.nb; i++)
    for (struct hent *e = run->kv.b[i]; e; e = e->hnext) {
      struct kv *x = CONTAINER(e, struct kv, h);
      while ((w = x->waiters.head) != NULL) {
        other_detach(run, w);
        fire_error(w, run->h.key, err, msg);
      }
    }
}

static void run_free(struct mu_rdzv_run *run)
{
  struct mu_rdzv *rv = run->rv;
  char msg[128];
  snprintf(msg, sizeof(msg), "musterd is shutting down; retry against a running server");
  answer_all(run, MU_RDZV_ESHUTTING_DOWN, msg);
  dl_remove(rv, &run->lease_dl);
  dl_remove(rv, &run->last_call_dl);
  dl_remove(rv, &run->gc_dl);
  for (size_t i = 0; i < run->nodes.nb; i++) {
    struct hent *e = run->nodes.b[i];
    while (e) {
      struct hent *next = e->hnext;
      struct mu_rdzv_node *n = CONTAINER(e, struct mu_rdzv_node, h);
      n->gone = 1;
      rv->st.nodes--;
      node_unref(n);
      e = next;
    }
  }
  htab_release(&run->nodes);
  if (run->round)
    round_unref(run->round);
  for (size_t i = 0; i < run->barriers.nb; i++) {
    struct hent *e = run->barriers.b[i];
    while (e) {
      struct hent *next = e->hnext;
      barrier_free(CONTAINER(e, struct barrier, h));
      e = next;
    }
  }
  htab_release(&run->barriers);
  for (size_t i = 0; i < run->kv.nb; i++) {
    struct hent *e = run->kv.b[i];
    while (e) {
      struct hent *next = e->hnext;
      kv_free(CONTAINER(e, struct kv, h));
      e = next;
    }
  }
  htab_release(&run->kv);
  htab_del(&rv->runs, &run->h);
  if (run->prev)
    run->prev->next = run->next;
  else
    rv->runs_head = run->next;
  if (run->next)
    run->next->prev = run->prev;
  else
    rv->runs_tail = run->prev;
  rv->st.runs--;
  mu_free(run->h.key);
  mu_free(run->reason);
  mu_free(run);
}

/* Starts the GC clock of a run that ended or has nothing left in it. */
static void gc_check(struct mu_rdzv_run *run)
{
  int idle = run->nodes.n == 0 && run->pending_other == 0 && run->watches.n == 0;
  if (run->state != MU_RDZV_RUN_OPEN || idle) {
    if (run->gc_dl.idx == 0)
      dl_set(run->rv, &run->gc_dl, now_ms(run->rv) + run->rv->gc_ms);
  } else {
    dl_remove(run->rv, &run->gc_dl);
  }
}

static int valid_id(const char *s, size_t max)
{
  size_t n = strlen(s);
  if (n == 0 || n > max)
    return 0;
  for (; *s; s++) {
    char c = *s;
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
          c == '_' || c == '-'))
      return 0;
  }
  return 1;
}

/* Printable ASCII without '"' and '\\': safe to print in JSON as is. */
static int valid_text(const char *s, size_t max)
{
  size_t n = strlen(s);
  if (n == 0 || n > max)
    return 0;
  for (; *s; s++)
    if (*s < 0x21 || *s > 0x7e || *s == '"' || *s == '\\')
      return 0;
  return 1;
}

static struct mu_rdzv_run *find_run(struct mu_rdzv *rv, const char *run_id)
{
  struct hent *e = htab_find(&rv->runs, run_id);
  return e ? CONTAINER(e, struct mu_rdzv_run, h) : NULL;
}

struct mu_rdzv_run *mu_rdzv_find(struct mu_rdzv *rv, const char *run_id)
{
  return find_run(rv, run_id);
}

void mu_rdzv_run_kv_usage(const struct mu_rdzv_run *run, const char *key, size_t *nkeys,
                          size_t *nbytes, size_t *old_len, int *exists)
{
  const struct hent *he = key != NULL ? htab_find(&run->kv, key) : NULL;
  const struct kv *e = he ? CONTAINER(he, struct kv, h) : NULL;
  *nkeys = run->kv.n;
  *nbytes = run->kv_bytes;
  *exists = e != NULL;
  *old_len = e && e->val ? e->len : 0;
}

struct mu_rdzv_run *mu_rdzv_next_run(struct mu_rdzv *rv, struct mu_rdzv_run *prev)
{
  return prev ? prev->next : rv->runs_head;
}

void mu_rdzv_run_info(const struct mu_rdzv_run *run, struct mu_rdzv_run_info *out)
{
  memset(out, 0, sizeof(*out));
  out->run_id = run->h.key;
  out->state = run->state;
  out->reason = run->reason ? run->reason : "";
  out->round = run->round ? run->round->number : 0;
  out->round_state = run->rstate;
  out->nnodes = run->round ? run->round->nnodes : 0;
  out->waiting = waiting_count(run);
  out->min_nodes = run->min_nodes;
  out->max_nodes = run->max_nodes;
  out->last_call_ms = run->last_call_ms;
  out->join_timeout_ms = run->join_timeout_ms;
  out->lease_ttl_ms = run->lease_ttl_ms;
  out->nodes = (uint32_t)run->nodes.n;
  out->last_round = run->round;
}

/* Checks a join's configuration and fills in the defaults. */
static int config_check(const struct mu_rdzv_config *in, struct mu_rdzv_config *out, char *msg,
                        size_t msg_size)
{
  *out = *in;
  if (out->min_nodes < 1 || out->min_nodes > MU_RDZV_NODES_MAX) {
    snprintf(msg, msg_size, "min_nodes must be between 1 and %d, got %" PRIu32, MU_RDZV_NODES_MAX,
             out->min_nodes);
    return MU_RDZV_EBAD_REQUEST;
  }
  if (out->max_nodes == 0)
    out->max_nodes = out->min_nodes;
  if (out->max_nodes < out->min_nodes || out->max_nodes > MU_RDZV_NODES_MAX) {
    snprintf(msg, msg_size,
             "max_nodes must be between min_nodes (%" PRIu32 ") and %d, got %" PRIu32,
             out->min_nodes, MU_RDZV_NODES_MAX, out->max_nodes);
    return MU_RDZV_EBAD_REQUEST;
  }
  if (out->last_call_ms < 0)
    out->last_call_ms = out->min_nodes == out->max_nodes ? 0 : DEFAULT_LAST_CALL_MS;
  if (out->join_timeout_ms < 0)
    out->join_timeout_ms = DEFAULT_JOIN_TIMEOUT_MS;
  if (out->lease_ttl_ms < 0)
    out->lease_ttl_ms = DEFAULT_LEASE_TTL_MS;
  if (out->last_call_ms > MAX_TIMEOUT_MS || out->join_timeout_ms > MAX_TIMEOUT_MS ||
      out->lease_ttl_ms > MAX_TIMEOUT_MS) {
    snprintf(msg, msg_size,
             "last_call_ms, join_timeout_ms and lease_ttl_ms must be at most "
             "%lld (one week)",
             MAX_TIMEOUT_MS);
    return MU_RDZV_EBAD_REQUEST;
  }
  if (out->join_timeout_ms == 0 || out->lease_ttl_ms == 0) {
    snprintf(msg, msg_size, "join_timeout_ms and lease_ttl_ms must be positive");
    return MU_RDZV_EBAD_REQUEST;
  }
  return 0;
}

static struct mu_rdzv_run *run_new(struct mu_rdzv *rv, const char *run_id,
                                   const struct mu_rdzv_config *c)
{
  struct mu_rdzv_run *run = mu_calloc(1, sizeof(*run));
  run->h.key = mu_strdup(run_id);
  run->rv = rv;
  run->min_nodes = c->min_nodes;
  run->max_nodes = c->max_nodes;
  run->last_call_ms = (uint32_t)c->last_call_ms;
  run->join_timeout_ms = (uint32_t)c->join_timeout_ms;
  run->lease_ttl_ms = (uint32_t)c->lease_ttl_ms;
  run->lease_dl.kind = DL_LEASE;
  run->last_call_dl.kind = DL_LAST_CALL;
  run->gc_dl.kind = DL_GC;
  htab_add(&rv->runs, &run->h);
  run->prev = rv->runs_tail;
  if (rv->runs_tail)
    rv->runs_tail->next = run;
  else
    rv->runs_head = run;
  rv->runs_tail = run;
  rv->st.runs++;
  return run;
}

static int ended_err(const struct mu_rdzv_run *run, char *msg, size_t msg_size)
{
  if (run->state == MU_RDZV_RUN_CLOSED) {
    snprintf(msg, msg_size, "run '%s' is closed%s%s; start a new run id to run again", run->h.key,
             run->reason && *run->reason ? ": " : "", run->reason ? run->reason : "");
    return MU_RDZV_ERUN_CLOSED;
  }
  snprintf(msg, msg_size, "run '%s' was shut down%s%s; start a new run id to run again", run->h.key,
           run->reason && *run->reason ? ": " : "", run->reason ? run->reason : "");
  return MU_RDZV_ERUN_SHUT;
}

/* ---------------------------------------------------------------------------------------- */
/* Public: lifetime.                                                                          */
/* ---------------------------------------------------------------------------------------- */

static void on_timer(uv_timer_t *t)
{
  struct mu_rdzv *rv = t->data;
  rv->armed_at = 0;
  uint64_t now = now_ms(rv);
  while (rv->nheap > 0 && rv->heap[0]->at <= now) {
    struct mu_rdzv_deadline *d = rv->heap[0];
    dl_remove(rv, d);
    switch (d->kind) {
    case DL_WAIT: {
      struct mu_rdzv_wait *w = CONTAINER(d, struct mu_rdzv_wait, dl);
      struct mu_rdzv_run *run = w->run;
      char msg[256];
      if (w->kind == MU_RDZV_W_JOIN) {
        snprintf(msg, sizeof(msg),
                 "no round of run '%s' closed within join_timeout_ms (%" PRIu32
                 " ms): fewer than min_nodes (%" PRIu32 ") nodes joined, or the run is full; "
                 "start more nodes or raise the timeout",
                 run->h.key, run->join_timeout_ms, run->min_nodes);
        join_withdraw(run, w->obj);
        maybe_close(run, 0);
        fire_error(w, run->h.key, MU_RDZV_EJOIN_TIMEOUT, msg);
      } else if (w->kind == MU_RDZV_W_WATCH) {
        struct mu_rdzv_answer a;
        memset(&a, 0, sizeof(a));
        a.run_id = run->h.key;
        a.event = "none";
        a.round_number = w->round;
        a.waiting = waiting_count(run);
        watch_release(run, w);
        wait_detach(rv, w);
        rv->st.pending_watches--;
        gc_check(run);
        fire(w, &a);
      } else if (w->kind == MU_RDZV_W_BARRIER) {
        struct barrier *b = w->obj;
        snprintf(msg, sizeof(msg),
                 "barrier '%s' of run '%s' timed out with %" PRIu32 " of %" PRIu32
                 " arrivals; check that every participant reaches it, or raise timeout_ms",
                 b->h.key, run->h.key, b->arrivals.n, b->count);
        other_detach(run, w);
        gc_check(run);
        fire_error(w, run->h.key, MU_RDZV_EBARRIER_TIMEOUT, msg);
      } else if (w->kind == MU_RDZV_W_KV) {
        struct kv *e = w->obj;
        snprintf(msg, sizeof(msg), "key '%s' of run '%s' was not set within wait_ms", e->h.key,
                 run->h.key);
        other_detach(run, w);
        if (e->val == NULL && e->waiters.n == 0) {
          htab_del(&run->kv, &e->h);
          kv_free(e);
        }
        gc_check(run);
        fire_error(w, run->h.key, MU_RDZV_EKV_TIMEOUT, msg);
      }
      break;
    }
    case DL_LEASE: {
      struct mu_rdzv_run *run = CONTAINER(d, struct mu_rdzv_run, lease_dl);
      while (run->lease_head && run->lease_head->expires <= now) {
        rv->st.leases_expired++;
        node_remove(run, run->lease_head, 1);
      }
      if (run->lease_head && run->lease_dl.idx == 0 && run->state == MU_RDZV_RUN_OPEN)
        dl_set(rv, &run->lease_dl, run->lease_head->expires);
      break;
    }
    case DL_LAST_CALL:
      maybe_close(CONTAINER(d, struct mu_rdzv_run, last_call_dl), 1);
      break;
    case DL_GC: {
      struct mu_rdzv_run *run = CONTAINER(d, struct mu_rdzv_run, gc_dl);
      int idle = run->nodes.n == 0 && run->pending_other == 0 && run->watches.n == 0;
      if (run->state != MU_RDZV_RUN_OPEN || idle)
        run_free(run);
      break;
    }
    }
    now = now_ms(rv);
  }
  arm(rv);
}

struct mu_rdzv *mu_rdzv_new(uv_loop_t *loop, uint64_t gc_ms)
{
  struct mu_rdzv *rv = mu_calloc(1, sizeof(*rv));
  rv->loop = loop;
  rv->gc_ms = gc_ms ? gc_ms : DEFAULT_GC_MS;
  uv_timer_init(loop, &rv->timer);
  rv->timer.data = rv;
  return rv;
}

void mu_rdzv_set_gc_ms(struct mu_rdzv *rv, uint64_t gc_ms)
{
  rv->gc_ms = gc_ms ? gc_ms : DEFAULT_GC_MS;
}

static void on_timer_closed(uv_handle_t *h)
{
  struct mu_rdzv *rv = h->data;
  void (*done)(void *) = rv->done;
  void *data = rv->done_data;
  mu_free(rv->heap);
  mu_free(rv);
  if (done)
    done(data);
}

void mu_rdzv_free(struct mu_rdzv *rv, void (*done)(void *), void *done_data)
{
  if (rv == NULL)
    return;
  while (rv->runs_head)
    run_free(rv->runs_head);
  htab_release(&rv->runs);
  rv->done = done;
  rv->done_data = done_data;
  uv_timer_stop(&rv->timer);
  uv_close((uv_handle_t *)&rv->timer, on_timer_closed);
}

void mu_rdzv_gc(struct mu_rdzv *rv)
{
  struct mu_rdzv_run *run = rv->runs_head;
  while (run) {
    struct mu_rdzv_run *next = run->next;
    if (run->gc_dl.idx != 0)
      dl_set(rv, &run->gc_dl, 0);
    run = next;
  }
  on_timer(&rv->timer);
}

void mu_rdzv_stats(const struct mu_rdzv *rv, struct mu_rdzv_stats *out)
{
  *out = rv->st;
}

/* ---------------------------------------------------------------------------------------- */
/* Public: rounds.                                                                            */
/* ---------------------------------------------------------------------------------------- */

int mu_rdzv_join(struct mu_rdzv *rv, const char *run_id, const struct mu_rdzv_join_req *req,
                 struct mu_rdzv_wait *w, char *msg, size_t msg_size)
{
  struct mu_rdzv_config cfg;
  int rc;
  if (!valid_id(run_id, MU_RDZV_ID_MAX)) {
    snprintf(msg, msg_size, "run_id must be 1-%d characters of A-Z a-z 0-9 . _ -", MU_RDZV_ID_MAX);
    return MU_RDZV_EBAD_REQUEST;
  }
  if (req->node_id == NULL || !valid_text(req->node_id, MU_RDZV_NODE_ID_MAX)) {
    snprintf(msg, msg_size,
             "node_id must be 1-%d printable characters without spaces, quotes or backslashes",
             MU_RDZV_NODE_ID_MAX);
    return MU_RDZV_EBAD_REQUEST;
  }
  if (req->addr == NULL || !valid_text(req->addr, MU_RDZV_ADDR_MAX)) {
    snprintf(msg, msg_size,
             "addr must be 1-%d printable characters without spaces, quotes or backslashes "
             "(a host name or IP address)",
             MU_RDZV_ADDR_MAX);
    return MU_RDZV_EBAD_REQUEST;
  }
  if (req->local_world_size < 1 || req->local_world_size > 65536) {
    snprintf(msg, msg_size, "local_world_size must be between 1 and 65536, got %" PRIu32,
             req->local_world_size);
    return MU_RDZV_EBAD_REQUEST;
  }
  if (req->master_port > 65535) {
    snprintf(msg, msg_size, "master_port must be between 0 and 65535, got %" PRIu32,
             req->master_port);
    return MU_RDZV_EBAD_REQUEST;
  }
  rc = config_check(&req->config, &cfg, msg, msg_size);
  if (rc != 0)
    return rc;

  struct mu_rdzv_run *run = find_run(rv, run_id);
  if (run == NULL) {
    if (rv->runs.n >= MU_RDZV_RUNS_MAX) {
      snprintf(msg, msg_size, "musterd holds %d runs, its limit; close finished runs first",
               MU_RDZV_RUNS_MAX);
      return MU_RDZV_ETOO_MANY;
    }
    run = run_new(rv, run_id, &cfg);
  }
  w->kind = MU_RDZV_W_JOIN;
  w->run = run;
  w->with_members = req->with_members;
  w->list = NULL;
  w->dl.idx = 0;
  w->dl.kind = DL_WAIT;
  w->barrier_id = NULL;
  if (run->state != MU_RDZV_RUN_OPEN) {
    char m[512];
    int err = ended_err(run, m, sizeof(m));
    w->kind = MU_RDZV_W_NONE;
    fire_error(w, run_id, err, m);
    return 0;
  }
  if (cfg.min_nodes != run->min_nodes || cfg.max_nodes != run->max_nodes) {
    char m[512];
    snprintf(m, sizeof(m),
             "run '%s' has nnodes %" PRIu32 ":%" PRIu32 " but this join asks for %" PRIu32
             ":%" PRIu32 "; use the same --nnodes on every node, or a new run id",
             run_id, run->min_nodes, run->max_nodes, cfg.min_nodes, cfg.max_nodes);
    w->kind = MU_RDZV_W_NONE;
    fire_error(w, run_id, MU_RDZV_ECONFIG_MISMATCH, m);
    return 0;
  }

  struct mu_rdzv_node *n = NULL;
  struct hent *e = htab_find(&run->nodes, req->node_id);
  if (e) {
    n = CONTAINER(e, struct mu_rdzv_node, h);
    if (n->join) {
      struct mu_rdzv_wait *old = n->join;
      join_withdraw(run, n);
      fire_error(old, run_id, MU_RDZV_EREPLACED,
                 "a newer join from the same node_id replaced this one");
    }
  } else {
    /* The id lives in the same allocation: one cache line less per lookup. */
    size_t idlen = strlen(req->node_id);
    n = mu_calloc(1, sizeof(*n) + idlen + 1);
    n->h.key = (char *)(n + 1);
    memcpy(n->h.key, req->node_id, idlen + 1);
    n->refs = 1;
    htab_add(&run->nodes, &n->h);
    rv->st.nodes++;
  }
  if (n->addr == NULL || strcmp(n->addr, req->addr) != 0) {
    mu_free(n->addr);
    n->addr = mu_strdup(req->addr);
  }
  n->lws = req->local_world_size;
  n->master_port = req->master_port;
  lease_unlink(run, n);
  n->join = w;
  w->obj = n;
  wl_append(&run->joins, w);
  rv->st.pending_joins++;
  dl_set(rv, &w->dl, now_ms(rv) + run->join_timeout_ms);
  gc_check(run);
  if (in_round(run, n)) {
    run->joins_prev++;
    /* A member that joins again has restarted: its round is over. */
    break_round(run);
  } else if (run->rstate == MU_RDZV_ROUND_ACTIVE) {
    /* A newcomer: members learn of it if their round has room. */
    kick_watches(run);
  }
  maybe_close(run, 0);
  return 0;
}

static struct mu_rdzv_node *find_node(struct mu_rdzv_run *run, const char *node_id)
{
  struct hent *e = htab_find(&run->nodes, node_id);
  return e ? CONTAINER(e, struct mu_rdzv_node, h) : NULL;
}

int mu_rdzv_heartbeat(struct mu_rdzv *rv, const char *run_id, const char *node_id,
                      struct mu_rdzv_answer *out)
{
  struct mu_rdzv_run *run = find_run(rv, run_id);
  memset(out, 0, sizeof(*out));
  if (run == NULL)
    return MU_RDZV_ENO_SUCH_RUN;
  out->run_id = run->h.key;
  if (run->state == MU_RDZV_RUN_CLOSED)
    return MU_RDZV_ERUN_CLOSED;
  if (run->state == MU_RDZV_RUN_SHUT)
    return MU_RDZV_ERUN_SHUT;
  struct mu_rdzv_node *n = find_node(run, node_id);
  if (n == NULL)
    return MU_RDZV_ENOT_MEMBER;
  rv->st.heartbeats++;
  if (n->in_lease)
    lease_renew(run, n);
  out->round_number = run->round ? run->round->number : 0;
  if (in_round(run, n) && n->join == NULL)
    out->state = mu_rdzv_round_state_name(run->rstate);
  else
    out->state = mu_rdzv_round_state_name(MU_RDZV_ROUND_JOINING);
  out->waiting = waiting_count(run);
  return 0;
}

int mu_rdzv_watch(struct mu_rdzv *rv, const char *run_id, const char *node_id, uint64_t round,
                  uint64_t timeout_ms, struct mu_rdzv_wait *w)
{
  struct mu_rdzv_run *run = find_run(rv, run_id);
  if (run == NULL)
    return MU_RDZV_ENO_SUCH_RUN;
  if (timeout_ms > (uint64_t)MAX_TIMEOUT_MS)
    timeout_ms = (uint64_t)MAX_TIMEOUT_MS;
  const char *ev = watch_event(run, node_id, round);
  memset(&w->dl, 0, sizeof(w->dl));
  w->list = NULL;
  w->barrier_id = NULL;
  if (ev != NULL || timeout_ms == 0) {
    struct mu_rdzv_answer a;
    memset(&a, 0, sizeof(a));
    a.run_id = run->h.key;
    a.event = ev ? ev : "none";
    a.round_number = round;
    a.waiting = waiting_count(run);
    w->kind = MU_RDZV_W_NONE;
    fire(w, &a);
    return 0;
  }
  w->kind = MU_RDZV_W_WATCH;
  w->run = run;
  w->obj = mu_strdup(node_id);
  w->node = NULL;
  w->round = round;
  struct mu_rdzv_node *n = find_node(run, node_id);
  if (n != NULL && !n->gone)
    watch_hold(run, w, n);
  w->dl.kind = DL_WAIT;
  wl_append(&run->watches, w);
  rv->st.pending_watches++;
  dl_set(rv, &w->dl, now_ms(rv) + timeout_ms);
  gc_check(run);
  return 0;
}

int mu_rdzv_leave(struct mu_rdzv *rv, const char *run_id, const char *node_id, int failed,
                  const char *reason)
{
  (void)reason;
  struct mu_rdzv_run *run = find_run(rv, run_id);
  if (run == NULL)
    return MU_RDZV_ENO_SUCH_RUN;
  struct mu_rdzv_node *n = find_node(run, node_id);
  if (n == NULL)
    return run->state == MU_RDZV_RUN_OPEN ? MU_RDZV_ENOT_MEMBER : 0;
  if (run->state != MU_RDZV_RUN_OPEN) {
    node_remove(run, n, 0);
    return 0;
  }
  int member_active = in_round(run, n) && run->rstate == MU_RDZV_ROUND_ACTIVE && !n->join;
  if (failed || !member_active) {
    node_remove(run, n, 1);
    return 0;
  }
  struct mu_rdzv_round *r = run->round;
  n->left_ok = 1;
  run->left_ok++;
  node_remove(run, n, 0);
  if (run->round == r && run->left_ok >= r->nnodes)
    mu_rdzv_end(rv, run_id, 0, "every member left with success");
  return 0;
}

int mu_rdzv_end(struct mu_rdzv *rv, const char *run_id, int shut, const char *reason)
{
  struct mu_rdzv_run *run = find_run(rv, run_id);
  if (run == NULL)
    return MU_RDZV_ENO_SUCH_RUN;
  enum mu_rdzv_run_state want = shut ? MU_RDZV_RUN_SHUT : MU_RDZV_RUN_CLOSED;
  if (run->state == want)
    return 0;
  if (run->state != MU_RDZV_RUN_OPEN)
    return run->state == MU_RDZV_RUN_CLOSED ? MU_RDZV_ERUN_CLOSED : MU_RDZV_ERUN_SHUT;
  run->state = want;
  mu_free(run->reason);
  reason = reason ? reason : "";
  run->reason = mu_strndup(reason, strnlen(reason, 512));
  dl_remove(rv, &run->last_call_dl);
  dl_remove(rv, &run->lease_dl);
  char msg[768];
  int err = ended_err(run, msg, sizeof(msg));
  changed(rv);
  answer_all(run, err, msg);
  gc_check(run);
  return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* Public: barriers.                                                                          */
/* ---------------------------------------------------------------------------------------- */

int mu_rdzv_barrier(struct mu_rdzv *rv, const char *run_id, const char *name, uint32_t count,
                    uint64_t timeout_ms, const char *id, struct mu_rdzv_wait *w, char *msg,
                    size_t msg_size)
{
  struct mu_rdzv_run *run = find_run(rv, run_id);
  if (run == NULL) {
    snprintf(msg, msg_size, "no run '%s'; a node must join it first", run_id);
    return MU_RDZV_ENO_SUCH_RUN;
  }
  if (run->state != MU_RDZV_RUN_OPEN)
    return ended_err(run, msg, msg_size);
  if (!valid_text(name, MU_RDZV_NODE_ID_MAX) || !valid_text(id, MU_RDZV_NODE_ID_MAX)) {
    snprintf(msg, msg_size,
             "barrier name and id must be 1-%d printable characters without spaces, quotes or "
             "backslashes",
             MU_RDZV_NODE_ID_MAX);
    return MU_RDZV_EBAD_REQUEST;
  }
  if (count < 1 || count > MU_RDZV_NODES_MAX * 64u) {
    snprintf(msg, msg_size, "count must be between 1 and %u", MU_RDZV_NODES_MAX * 64u);
    return MU_RDZV_EBAD_REQUEST;
  }
  if (timeout_ms > (uint64_t)MAX_TIMEOUT_MS)
    timeout_ms = (uint64_t)MAX_TIMEOUT_MS;
  struct hent *e = htab_find(&run->barriers, name);
  struct barrier *b;
  if (e) {
    b = CONTAINER(e, struct barrier, h);
  } else {
    if (run->barriers.n >= MU_RDZV_BARRIERS_MAX) {
      snprintf(msg, msg_size, "run '%s' has %d barriers, its limit; reuse barrier names", run_id,
               MU_RDZV_BARRIERS_MAX);
      return MU_RDZV_ETOO_MANY;
    }
    b = mu_calloc(1, sizeof(*b));
    b->h.key = mu_strdup(name);
    htab_add(&run->barriers, &b->h);
  }
  if (b->arrivals.n > 0 && b->count != count) {
    snprintf(msg, msg_size,
             "barrier '%s' is waiting for %" PRIu32 " arrivals but this one says count %" PRIu32
             "; every participant must pass the same count",
             name, b->count, count);
    return MU_RDZV_ECOUNT_MISMATCH;
  }
  b->count = count;
  for (struct mu_rdzv_wait *x = b->arrivals.head; x; x = x->next)
    if (strcmp(x->barrier_id, id) == 0) {
      other_detach(run, x);
      fire_error(x, run_id, MU_RDZV_EREPLACED,
                 "a newer arrival with the same id replaced this one");
      break;
    }
  w->kind = MU_RDZV_W_BARRIER;
  w->run = run;
  w->obj = b;
  w->list = NULL;
  w->barrier_id = mu_strdup(id);
  memset(&w->dl, 0, sizeof(w->dl));
  w->dl.kind = DL_WAIT;
  wl_append(&b->arrivals, w);
  run->pending_other++;
  rv->st.pending_other++;
  gc_check(run);
  if (b->arrivals.n < count) {
    dl_set(rv, &w->dl, now_ms(rv) + timeout_ms);
    return 0;
  }
  /* Open: answer everyone, then the barrier is ready for the next generation. */
  b->generation++;
  struct mu_rdzv_answer a;
  memset(&a, 0, sizeof(a));
  a.run_id = run->h.key;
  a.generation = b->generation;
  a.count = count;
  answer_others(run, &b->arrivals, &a);
  gc_check(run);
  return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* Public: KV.                                                                                */
/* ---------------------------------------------------------------------------------------- */

static int valid_key(const char *key)
{
  size_t n = strlen(key);
  return n > 0 && n <= MU_RDZV_KEY_MAX;
}

static int kv_put(struct mu_rdzv_run *run, const char *key, const void *value, size_t len,
                  uint64_t *version)
{
  struct mu_rdzv *rv = run->rv;
  if (run->state != MU_RDZV_RUN_OPEN)
    return run->state == MU_RDZV_RUN_CLOSED ? MU_RDZV_ERUN_CLOSED : MU_RDZV_ERUN_SHUT;
  if (!valid_key(key))
    return MU_RDZV_EBAD_REQUEST;
  if (len > MU_RDZV_VALUE_MAX)
    return MU_RDZV_ETOO_LARGE;
  struct hent *he = htab_find(&run->kv, key);
  struct kv *e = he ? CONTAINER(he, struct kv, h) : NULL;
  size_t old = e && e->val ? e->len : 0;
  if (run->kv_bytes - old + len > MU_RDZV_KV_BYTES_MAX)
    return MU_RDZV_ETOO_LARGE;
  if (e == NULL) {
    if (run->kv.n >= MU_RDZV_KV_KEYS_MAX)
      return MU_RDZV_ETOO_MANY;
    e = mu_calloc(1, sizeof(*e));
    e->h.key = mu_strdup(key);
    htab_add(&run->kv, &e->h);
  }
  char *v = mu_malloc(len + 1);
  memcpy(v, value, len);
  v[len] = '\0';
  mu_free(e->val);
  e->val = v;
  e->len = len;
  run->kv_bytes = run->kv_bytes - old + len;
  e->version = ++run->kv_version;
  if (version)
    *version = e->version;
  changed(rv);
  if (e->waiters.n > 0) {
    /* Answer from a private copy: a callback may overwrite or delete the key. */
    char *copy = mu_malloc(len + 1);
    memcpy(copy, v, len + 1);
    struct mu_rdzv_answer a;
    memset(&a, 0, sizeof(a));
    a.run_id = run->h.key;
    a.value = copy;
    a.value_len = len;
    a.version = e->version;
    answer_others(run, &e->waiters, &a);
    mu_free(copy);
    gc_check(run);
  }
  return 0;
}

int mu_rdzv_kv_set(struct mu_rdzv *rv, const char *run_id, const char *key, const void *value,
                   size_t len, uint64_t *version)
{
  struct mu_rdzv_run *run = find_run(rv, run_id);
  if (run == NULL)
    return MU_RDZV_ENO_SUCH_RUN;
  return kv_put(run, key, value, len, version);
}

int mu_rdzv_kv_get(struct mu_rdzv *rv, const char *run_id, const char *key,
                   struct mu_rdzv_answer *out, uint64_t timeout_ms, struct mu_rdzv_wait *w)
{
  struct mu_rdzv_run *run = find_run(rv, run_id);
  memset(out, 0, sizeof(*out));
  if (run == NULL)
    return MU_RDZV_ENO_SUCH_RUN;
  if (!valid_key(key))
    return MU_RDZV_EBAD_REQUEST;
  out->run_id = run->h.key;
  struct hent *he = htab_find(&run->kv, key);
  struct kv *e = he ? CONTAINER(he, struct kv, h) : NULL;
  if (e && e->val) {
    out->value = e->val;
    out->value_len = e->len;
    out->version = e->version;
    return 0;
  }
  if (w == NULL)
    return MU_RDZV_ENO_SUCH_KEY;
  if (run->state != MU_RDZV_RUN_OPEN)
    return run->state == MU_RDZV_RUN_CLOSED ? MU_RDZV_ERUN_CLOSED : MU_RDZV_ERUN_SHUT;
  if (timeout_ms > (uint64_t)MAX_TIMEOUT_MS)
    timeout_ms = (uint64_t)MAX_TIMEOUT_MS;
  if (e == NULL) {
    if (run->kv.n >= MU_RDZV_KV_KEYS_MAX)
      return MU_RDZV_ETOO_MANY;
    e = mu_calloc(1, sizeof(*e));
    e->h.key = mu_strdup(key);
    htab_add(&run->kv, &e->h);
  }
  w->kind = MU_RDZV_W_KV;
  w->run = run;
  w->obj = e;
  w->list = NULL;
  w->barrier_id = NULL;
  memset(&w->dl, 0, sizeof(w->dl));
  w->dl.kind = DL_WAIT;
  wl_append(&e->waiters, w);
  run->pending_other++;
  rv->st.pending_other++;
  dl_set(rv, &w->dl, now_ms(rv) + timeout_ms);
  gc_check(run);
  return 1;
}

int mu_rdzv_kv_del(struct mu_rdzv *rv, const char *run_id, const char *key)
{
  struct mu_rdzv_run *run = find_run(rv, run_id);
  if (run == NULL)
    return MU_RDZV_ENO_SUCH_RUN;
  struct hent *he = htab_find(&run->kv, key);
  struct kv *e = he ? CONTAINER(he, struct kv, h) : NULL;
  if (e == NULL || e->val == NULL)
    return MU_RDZV_ENO_SUCH_KEY;
  run->kv_bytes -= e->len;
  mu_free(e->val);
  e->val = NULL;
  e->len = 0;
  changed(rv);
  if (e->waiters.n == 0) {
    htab_del(&run->kv, &e->h);
    kv_free(e);
  }
  return 0;
}

int mu_rdzv_kv_add(struct mu_rdzv *rv, const char *run_id, const char *key, int64_t delta,
                   int64_t *result)
{
  struct mu_rdzv_run *run = find_run(rv, run_id);
  if (run == NULL)
    return MU_RDZV_ENO_SUCH_RUN;
  if (run->state != MU_RDZV_RUN_OPEN)
    return run->state == MU_RDZV_RUN_CLOSED ? MU_RDZV_ERUN_CLOSED : MU_RDZV_ERUN_SHUT;
  if (!valid_key(key))
    return MU_RDZV_EBAD_REQUEST;
  struct hent *he = htab_find(&run->kv, key);
  struct kv *e = he ? CONTAINER(he, struct kv, h) : NULL;
  long long cur = 0;
  if (e && e->val) {
    char *end = NULL;
    errno = 0;
    cur = strtoll(e->val, &end, 10);
    if (e->len == 0 || errno != 0 || end != e->val + e->len)
      return MU_RDZV_ENOT_A_COUNTER;
  }
  if ((delta > 0 && cur > INT64_MAX - delta) || (delta < 0 && cur < INT64_MIN - delta))
    return MU_RDZV_EBAD_REQUEST;
  int64_t next = (int64_t)cur + delta;
  char text[32];
  int len = snprintf(text, sizeof(text), "%" PRId64, next);
  int rc = kv_put(run, key, text, (size_t)len, NULL);
  if (rc == 0 && result)
    *result = next;
  return rc;
}

/* ---------------------------------------------------------------------------------------- */
/* Public: waits.                                                                             */
/* ---------------------------------------------------------------------------------------- */

void mu_rdzv_wait_cancel(struct mu_rdzv_wait *w)
{
  if (w == NULL || w->kind == MU_RDZV_W_NONE || w->run == NULL)
    return;
  struct mu_rdzv_run *run = w->run;
  struct mu_rdzv *rv = run->rv;
  switch (w->kind) {
  case MU_RDZV_W_JOIN:
    join_withdraw(run, w->obj);
    maybe_close(run, 0);
    break;
  case MU_RDZV_W_WATCH:
    watch_release(run, w);
    wait_detach(rv, w);
    rv->st.pending_watches--;
    break;
  case MU_RDZV_W_BARRIER:
    other_detach(run, w);
    break;
  case MU_RDZV_W_KV: {
    struct kv *e = w->obj;
    other_detach(run, w);
    if (e->val == NULL && e->waiters.n == 0) {
      htab_del(&run->kv, &e->h);
      kv_free(e);
    }
    break;
  }
  case MU_RDZV_W_NONE:
    break;
  }
  w->run = NULL;
  gc_check(run);
}

/* ---------------------------------------------------------------------------------------- */
/* Durability (persist.c): the state that survives a restart, encoded as one blob.           */
/* ---------------------------------------------------------------------------------------- */

/* What is kept: each run's config, state and reason; its latest round (number, state) with
 * every member's place (id, addr, local world size, master port, rank offset, left/gone);
 * its KV. Not kept: pending joins, watches and barrier arrivals (their clients see the
 * connection drop and retry). A restored member's lease restarts at restore time, so it has
 * one lease TTL to heartbeat again before the round breaks. */

void mu_rdzv_set_change_hook(struct mu_rdzv *rv, void (*fn)(void *), void *data)
{
  rv->on_change = fn;
  rv->on_change_data = data;
}

static void put_u32(struct mu_buf *b, uint32_t v)
{
  unsigned char p[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                        (unsigned char)(v >> 24)};
  mu_buf_append(b, p, 4);
}

static void put_u64(struct mu_buf *b, uint64_t v)
{
  put_u32(b, (uint32_t)v);
  put_u32(b, (uint32_t)(v >> 32));
}

static void put_str(struct mu_buf *b, const char *s, size_t n)
{
  put_u32(b, (uint32_t)n);
  if (n > 0)
    mu_buf_append(b, s, n);
}

#define RDZV_BLOB_VERSION 1u

int mu_rdzv_encode(const struct mu_rdzv *rv, struct mu_buf *out)
{
  size_t before = out->len;
  put_u32(out, RDZV_BLOB_VERSION);
  put_u32(out, (uint32_t)rv->runs.n);
  for (const struct mu_rdzv_run *run = rv->runs_head; run != NULL; run = run->next) {
    put_str(out, run->h.key, strlen(run->h.key));
    put_u32(out, run->min_nodes);
    put_u32(out, run->max_nodes);
    put_u32(out, run->last_call_ms);
    put_u32(out, run->join_timeout_ms);
    put_u32(out, run->lease_ttl_ms);
    put_u32(out, (uint32_t)run->state);
    put_str(out, run->reason ? run->reason : "", run->reason ? strlen(run->reason) : 0);
    put_u32(out, (uint32_t)run->rstate);
    const struct mu_rdzv_round *r = run->round;
    put_u64(out, r ? r->number : 0);
    put_u32(out, r ? r->nnodes : 0);
    for (uint32_t i = 0; r != NULL && i < r->nnodes; i++) {
      const struct mu_rdzv_node *n = r->members[i];
      put_str(out, n->h.key, strlen(n->h.key));
      put_str(out, n->addr ? n->addr : "", n->addr ? strlen(n->addr) : 0);
      put_u32(out, n->lws);
      put_u32(out, n->master_port);
      put_u64(out, n->rank_offset);
      put_u32(out, (uint32_t)((n->left_ok ? 1 : 0) | (n->gone ? 2 : 0)));
    }
    put_u64(out, run->kv_version);
    uint32_t nkv = 0;
    for (size_t i = 0; i < run->kv.nb; i++)
      for (const struct hent *e = run->kv.b[i]; e != NULL; e = e->hnext)
        nkv += CONTAINER(e, const struct kv, h)->val != NULL;
    put_u32(out, nkv);
    for (size_t i = 0; i < run->kv.nb; i++) {
      for (const struct hent *e = run->kv.b[i]; e != NULL; e = e->hnext) {
        const struct kv *k = CONTAINER(e, const struct kv, h);
        if (k->val == NULL)
          continue;
        put_str(out, k->h.key, strlen(k->h.key));
        put_str(out, k->val, k->len);
        put_u64(out, k->version);
      }
    }
  }
  /* a buffer over its cap dropped some appends: the blob would be unreadable */
  return out->len > before ? 0 : -1;
}

struct rd {
  const unsigned char *p;
  size_t n, off;
  int bad;
};

static uint32_t get_u32(struct rd *r)
{
  if (r->bad || r->n - r->off < 4) {
    r->bad = 1;
    return 0;
  }
  const unsigned char *p = r->p + r->off;
  r->off += 4;
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get_u64(struct rd *r)
{
  uint64_t lo = get_u32(r);
  return lo | (uint64_t)get_u32(r) << 32;
}

/* Returns: a new NUL-terminated copy (caller frees), or NULL when the blob is short. */
static char *get_str(struct rd *r, size_t max, size_t *len)
{
  uint32_t n = get_u32(r);
  if (r->bad || n > max || r->n - r->off < n) {
    r->bad = 1;
    return NULL;
  }
  char *s = mu_malloc((size_t)n + 1); /* values are bytes: no strndup, which stops at a NUL */
  memcpy(s, r->p + r->off, n);
  s[n] = '\0';
  r->off += n;
  if (len != NULL)
    *len = n;
  return s;
}

int mu_rdzv_restore(struct mu_rdzv *rv, const void *data, size_t len)
{
  struct rd r = {data, len, 0, 0};
  if (rv->runs.n != 0 || get_u32(&r) != RDZV_BLOB_VERSION)
    return -1;
  uint32_t nruns = get_u32(&r);
  uint64_t now = now_ms(rv);
  for (uint32_t ri = 0; ri < nruns && !r.bad; ri++) {
    char *id = get_str(&r, MU_RDZV_ID_MAX, NULL);
    struct mu_rdzv_config c;
    c.min_nodes = get_u32(&r);
    c.max_nodes = get_u32(&r);
    c.last_call_ms = get_u32(&r);
    c.join_timeout_ms = get_u32(&r);
    c.lease_ttl_ms = get_u32(&r);
    uint32_t state = get_u32(&r);
    char *reason = get_str(&r, 4096, NULL);
    uint32_t rstate = get_u32(&r);
    uint64_t number = get_u64(&r);
    uint32_t nmembers = get_u32(&r);
    if (r.bad || id == NULL || find_run(rv, id) != NULL || state > MU_RDZV_RUN_SHUT ||
        rstate > MU_RDZV_ROUND_BROKEN || nmembers > MU_RDZV_NODES_MAX ||
        (number == 0 && nmembers > 0)) {
      mu_free(id);
      mu_free(reason);
      return -1;
    }
    struct mu_rdzv_run *run = run_new(rv, id, &c);
    mu_free(id);
    run->state = (enum mu_rdzv_run_state)state;
    run->reason = reason;
    run->rstate = (enum mu_rdzv_round_state)rstate;
    if (number > 0) {
      struct mu_rdzv_round *rd = mu_calloc(1, sizeof(*rd));
      rd->number = number;
      rd->members = mu_calloc(nmembers ? nmembers : 1, sizeof(*rd->members));
      rd->refs = 1;
      run->round = rd;
      uint64_t off = 0;
      for (uint32_t i = 0; i < nmembers && !r.bad; i++) {
        size_t idlen = 0;
        char *nid = get_str(&r, MU_RDZV_NODE_ID_MAX, &idlen);
        char *addr = get_str(&r, MU_RDZV_ADDR_MAX, NULL);
        uint32_t lws = get_u32(&r), port = get_u32(&r);
        uint64_t rank_offset = get_u64(&r);
        uint32_t flags = get_u32(&r);
        if (r.bad || nid == NULL || find_node(run, nid) != NULL) {
          mu_free(nid);
          mu_free(addr);
          r.bad = 1;
          break;
        }
        struct mu_rdzv_node *n = mu_calloc(1, sizeof(*n) + idlen + 1);
        n->h.key = (char *)(n + 1);
        memcpy(n->h.key, nid, idlen + 1);
        mu_free(nid);
        n->addr = addr;
        n->lws = lws;
        n->master_port = port;
        n->round = rd;
        n->rank = i;
        n->rank_offset = rank_offset;
        n->left_ok = (flags & 1) != 0;
        n->refs = 1; /* the round's */
        rd->members[i] = n;
        rd->nnodes = i + 1;
        off = rank_offset + lws;
        if (flags & 2) {
          n->gone = 1;
          run->round_gone++;
          run->left_ok += n->left_ok;
          continue;
        }
        n->refs++; /* the run's table */
        htab_add(&run->nodes, &n->h);
        rv->st.nodes++;
        if (run->state == MU_RDZV_RUN_OPEN) {
          n->expires = now + run->lease_ttl_ms;
          lease_renew(run, n);
        }
      }
      rd->world_size = off;
    }
    run->kv_version = get_u64(&r);
    uint32_t nkv = get_u32(&r);
    for (uint32_t i = 0; i < nkv && !r.bad; i++) {
      size_t vlen = 0;
      char *key = get_str(&r, MU_RDZV_KEY_MAX, NULL);
      char *val = get_str(&r, MU_RDZV_VALUE_MAX, &vlen);
      uint64_t version = get_u64(&r);
      if (r.bad || key == NULL || val == NULL || htab_find(&run->kv, key) != NULL) {
        mu_free(key);
        mu_free(val);
        r.bad = 1;
        break;
      }
      struct kv *e = mu_calloc(1, sizeof(*e));
      e->h.key = key;
      e->val = val;
      e->len = vlen;
      e->version = version;
      htab_add(&run->kv, &e->h);
      run->kv_bytes += vlen;
    }
    gc_check(run);
  }
  return r.bad || r.off != r.n ? -1 : 0;
}
