/* The native rendezvous state machine: its lifetime, its deadlines with their one timer, and
 * the waits (see rdzv.h for the contract, docs/rendezvous.md for the API it serves).
 *
 * Why it is built this way:
 * - One uv_timer_t for every timeout: a pending join or watch is a few words in a caller-owned
 *   struct, and withdrawing it never needs a uv_close() round trip.
 * - A wait's deadline goes on the FIFO of its duration (a run's join timeout, the agent's 30 s
 *   watch): set in time order, so each FIFO is sorted as it grows, and setting, firing and
 *   withdrawing are O(1) with a million parked watches (a heap's O(log n) pop misses the cache
 *   at every level there). The timer fires at the earliest head. The few run deadlines (lease,
 *   last call, GC), and waits of durations past RDZV_FIFOS at once, go on a binary heap.
 * - Leases: the TTL is one per run, so keeping members in renewal order (a list; a heartbeat
 *   moves its node to the tail) makes the head the next to expire. A heartbeat is O(1) and
 *   never touches the heap; the run's single lease deadline fires early at worst and re-arms.
 * - Rounds are reference-counted and hold references on their member nodes, so a node that is
 *   removed while its round still lists it stays readable until the round goes, and a callback
 *   that changes the run (even closes another round) cannot free the round being answered.
 * - Callbacks fire after the state is consistent; lists are detached before firing so a
 *   callback that starts a new wait lands on the live list, not the one being drained.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "rdzv_int.h"

/* ---------------------------------------------------------------------------------------------
 * Names
 */

const char *rdzv_err_code(int err)
{
  static const char *const codes[] = {"ok",
#define XX(name, code, status) code,
                                      RDZV_ERR_MAP(XX)
#undef XX
  };
  if (err < 0 || err >= RDZV_E__COUNT)
    return "internal";
  return codes[err];
}

int rdzv_err_status(int err)
{
  static const int statuses[] = {200,
#define XX(name, code, status) status,
                                 RDZV_ERR_MAP(XX)
#undef XX
  };
  if (err < 0 || err >= RDZV_E__COUNT)
    return 500;
  return statuses[err];
}

const char *rdzv_run_state_name(enum rdzv_run_state s)
{
  switch (s) {
  case RDZV_RUN_OPEN:
    return "open";
  case RDZV_RUN_CLOSED:
    return "closed";
  case RDZV_RUN_SHUT:
    return "shut";
  }
  return "unknown";
}

const char *rdzv_round_state_name(enum rdzv_round_state s)
{
  switch (s) {
  case RDZV_ROUND_JOINING:
    return "joining";
  case RDZV_ROUND_ACTIVE:
    return "active";
  case RDZV_ROUND_BROKEN:
    return "broken";
  }
  return "unknown";
}

int rdzv_valid_text(const char *s, size_t max)
{
  size_t n = strlen(s);
  if (n == 0 || n > max)
    return 0;
  for (; *s; s++)
    if (*s < 0x21 || *s > 0x7e || *s == '"' || *s == '\\')
      return 0;
  return 1;
}

/* ---------------------------------------------------------------------------------------------
 * Deadlines: FIFOs by duration and a heap, one timer
 */

static void on_timer(uv_timer_t *t);

uint64_t rdzv_now(const struct rdzv *rv)
{
  return uv_now(rv->loop);
}

int64_t rdzv_wall_ms(void)
{
  uv_timeval64_t tv;
  if (uv_gettimeofday(&tv) != 0)
    return 0;
  return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

/* Returns: the deadline that fires first (the heap's top or a FIFO's head), or NULL. */
static struct rdzv_deadline *earliest(struct rdzv *rv)
{
  struct mu_heap_node *top = mu_heap_top(&rv->deadlines);
  struct rdzv_deadline *best = top ? MU_CONTAINER_OF(top, struct rdzv_deadline, hn) : NULL;
  for (int i = 0; i < RDZV_FIFOS; i++) {
    struct mu_list_node *h = rv->fifos[i].list.head;
    if (h == NULL)
      continue;
    struct rdzv_deadline *d = MU_CONTAINER_OF(h, struct rdzv_deadline, link);
    if (best == NULL || d->hn.key < best->hn.key)
      best = d;
  }
  return best;
}

/* Starts the timer for the earliest deadline, unless it is armed for that one or earlier. */
static void arm(struct rdzv *rv)
{
  struct rdzv_deadline *d = earliest(rv);
  if (d == NULL)
    return;
  uint64_t at = (uint64_t)d->hn.key;
  if (rv->armed_at != 0 && rv->armed_at <= at)
    return;
  uint64_t now = rdzv_now(rv);
  rv->armed_at = at ? at : 1;
  uv_timer_start(&rv->timer, on_timer, at > now ? at - now : 0, 0);
}

void rdzv_deadline_set(struct rdzv *rv, struct rdzv_deadline *d, uint64_t at)
{
  rdzv_deadline_clear(rv, d);
  d->hn.key = (int64_t)at;
  mu_heap_push(&rv->deadlines, &d->hn);
  arm(rv);
}

void rdzv_deadline_after(struct rdzv *rv, struct rdzv_deadline *d, uint64_t ms)
{
  rdzv_deadline_clear(rv, d);
  int pick = -1;
  for (int i = 0; i < RDZV_FIFOS; i++) {
    struct rdzv_fifo *f = &rv->fifos[i];
    if (f->list.head != NULL && f->ms == ms) {
      pick = i;
      break;
    }
    if (f->list.head == NULL && pick < 0)
      pick = i; /* free: taken unless a FIFO of this duration comes later */
  }
  if (pick < 0) {
    rdzv_deadline_set(rv, d, rdzv_now(rv) + ms); /* too many durations at once */
    return;
  }
  struct rdzv_fifo *f = &rv->fifos[pick];
  f->ms = ms;
  d->hn.key = (int64_t)(rdzv_now(rv) + ms);
  d->fifo = (uint8_t)(pick + 1);
  mu_list_push_back(&f->list, &d->link);
  arm(rv);
}

void rdzv_deadline_clear(struct rdzv *rv, struct rdzv_deadline *d)
{
  if (d->fifo != 0) {
    mu_list_remove(&rv->fifos[d->fifo - 1].list, &d->link);
    d->fifo = 0;
    return;
  }
  mu_heap_remove(&rv->deadlines, &d->hn);
}

void rdzv_changed(struct rdzv_run *run, enum rdzv_change_kind kind, const struct rdzv_node *n,
                  const char *key)
{
  struct rdzv *rv = run->rv;
  if (rv->on_change == NULL)
    return;
  struct rdzv_change c = {kind, run, n, key};
  rv->on_change(rv->on_change_data, &c);
}

int rdzv_over_bytes(struct rdzv *rv, uint64_t more, uint64_t more_enc, struct mu_buf *err)
{
  int mem_ok = more <= rv->lim.max_bytes && rv->bytes <= rv->lim.max_bytes - more;
  if (mem_ok && more_enc <= RDZV_ENC_MAX && rv->enc <= RDZV_ENC_MAX - more_enc)
    return 0;
  if (err != NULL && mem_ok)
    mu_buf_printf(err,
                  "the /v1 state would not fit one snapshot record (%llu MiB encoded): finish or "
                  "close runs, or delete KV keys",
                  (unsigned long long)(RDZV_ENC_MAX >> 20));
  else if (err != NULL)
    mu_buf_printf(err,
                  "musterd holds %llu bytes of /v1 state and this would add %llu, over its bound "
                  "of %llu (--v1-max-bytes): finish or close runs, delete KV keys, or raise the "
                  "bound",
                  (unsigned long long)rv->bytes, (unsigned long long)more,
                  (unsigned long long)rv->lim.max_bytes);
  return 1;
}

/* A deadline fired: the wait it belongs to times out. */
static void wait_timed_out(struct rdzv_wait *w)
{
  switch (w->kind) {
  case RDZV_W_JOIN:
    rdzv_join_timed_out(w);
    break;
  case RDZV_W_WATCH:
    rdzv_watch_timed_out(w);
    break;
  case RDZV_W_BARRIER:
    rdzv_barrier_timed_out(w);
    break;
  case RDZV_W_KV:
    rdzv_kv_timed_out(w);
    break;
  case RDZV_W_NONE:
    break;
  }
}

static void on_timer(uv_timer_t *t)
{
  struct rdzv *rv = t->data;
  rv->armed_at = 0;
  uint64_t now = rdzv_now(rv);
  struct rdzv_deadline *d;
  while ((d = earliest(rv)) != NULL && (uint64_t)d->hn.key <= now) {
    rdzv_deadline_clear(rv, d);
    switch (d->kind) {
    case DL_WAIT:
      wait_timed_out(MU_CONTAINER_OF(d, struct rdzv_wait, dl));
      break;
    case DL_LEASE:
      rdzv_leases_expire(MU_CONTAINER_OF(d, struct rdzv_run, lease_dl), now);
      break;
    case DL_LAST_CALL:
      rdzv_maybe_close(MU_CONTAINER_OF(d, struct rdzv_run, last_call_dl), 1);
      break;
    case DL_GC: {
      struct rdzv_run *run = MU_CONTAINER_OF(d, struct rdzv_run, gc_dl);
      if (run->state != RDZV_RUN_OPEN || rdzv_run_idle(run)) {
        rdzv_changed(run, RDZV_CH_DROP, NULL, NULL);
        rdzv_run_free(run);
      }
      break;
    }
    }
    now = rdzv_now(rv);
  }
  arm(rv);
}

/* ---------------------------------------------------------------------------------------------
 * Waits
 */

void rdzv_wait_start(struct rdzv_wait *w, enum rdzv_wait_kind kind, struct rdzv_run *run, void *obj)
{
  w->kind = kind;
  w->run = run;
  w->obj = obj;
  w->node = NULL;
  w->list = NULL;
  w->barrier_id = NULL;
  memset(&w->dl, 0, sizeof(w->dl));
  w->dl.kind = DL_WAIT;
}

void rdzv_wait_queue(struct mu_list *l, struct rdzv_wait *w)
{
  w->list = l;
  mu_list_push_back(l, &w->link);
}

void rdzv_wait_unqueue(struct rdzv_wait *w)
{
  if (w->list == NULL)
    return;
  mu_list_remove(w->list, &w->link);
  w->list = NULL;
}

void rdzv_wait_detach(struct rdzv *rv, struct rdzv_wait *w)
{
  rdzv_wait_unqueue(w);
  rdzv_deadline_clear(rv, &w->dl);
  mu_free(w->barrier_id);
  w->barrier_id = NULL;
  w->kind = RDZV_W_NONE;
  w->obj = NULL;
}

void rdzv_fire(struct rdzv_wait *w, const struct rdzv_answer *a)
{
  w->run = NULL;
  w->cb(w, a);
}

void rdzv_fire_error(struct rdzv_wait *w, const char *run_id, int err, const char *msg)
{
  struct rdzv_answer a;
  memset(&a, 0, sizeof(a));
  a.err = err;
  a.message = msg;
  a.run_id = run_id;
  rdzv_fire(w, &a);
}

void rdzv_other_detach(struct rdzv_run *run, struct rdzv_wait *w)
{
  rdzv_wait_detach(run->rv, w);
  run->pending_other--;
  run->rv->st.pending_other--;
}

void rdzv_wait_take(struct mu_list *to, struct mu_list *from)
{
  mu_list_take(to, from);
  for (struct mu_list_node *x = to->head; x != NULL; x = x->next)
    wait_of(x)->list = to;
}

void rdzv_answer_others(struct rdzv_run *run, struct mu_list *list, const struct rdzv_answer *a)
{
  struct mu_list todo;
  rdzv_wait_take(&todo, list);
  while (todo.head != NULL) {
    struct rdzv_wait *w = wait_of(todo.head);
    rdzv_other_detach(run, w);
    rdzv_fire(w, a);
  }
}

void rdzv_wait_cancel(struct rdzv_wait *w)
{
  if (w == NULL || w->kind == RDZV_W_NONE || w->run == NULL)
    return;
  struct rdzv_run *run = w->run;
  switch (w->kind) {
  case RDZV_W_JOIN:
    rdzv_join_cancel(w);
    break;
  case RDZV_W_WATCH:
    rdzv_watch_cancel(w);
    break;
  case RDZV_W_BARRIER:
    rdzv_other_detach(run, w);
    break;
  case RDZV_W_KV:
    rdzv_kv_cancel(w);
    break;
  case RDZV_W_NONE:
    break;
  }
  w->run = NULL;
  rdzv_gc_check(run);
}

void rdzv_wait_gone(struct rdzv_wait *w)
{
  if (w == NULL || w->kind != RDZV_W_WATCH || w->run == NULL) {
    rdzv_wait_cancel(w);
    return;
  }
  struct rdzv_run *run = w->run;
  rdzv_watch_gone(w);
  w->run = NULL;
  rdzv_gc_check(run);
}

/* ---------------------------------------------------------------------------------------------
 * Lifetime
 */

struct rdzv *rdzv_new(uv_loop_t *loop, uint64_t gc_ms)
{
  struct rdzv *rv = mu_calloc(1, sizeof(*rv));
  rv->loop = loop;
  rv->gc_ms = gc_ms ? gc_ms : DEFAULT_GC_MS;
  struct rdzv_limits none = {0, 0, 0, 0};
  rdzv_set_limits(rv, &none);
  mu_htab_init(&rv->clients, 0);
  mu_htab_init(&rv->runs, 0);
  mu_list_init(&rv->runs_list);
  for (int i = 0; i < RDZV_FIFOS; i++)
    mu_list_init(&rv->fifos[i].list);
  uv_timer_init(loop, &rv->timer);
  rv->timer.data = rv;
  return rv;
}

void rdzv_set_gc_ms(struct rdzv *rv, uint64_t gc_ms)
{
  rv->gc_ms = gc_ms ? gc_ms : DEFAULT_GC_MS;
}

void rdzv_set_limits(struct rdzv *rv, const struct rdzv_limits *l)
{
  struct rdzv_limits *o = &rv->lim;
  o->max_bytes = l->max_bytes == 0               ? RDZV_BYTES_DEFAULT
                 : l->max_bytes > RDZV_BYTES_MAX ? RDZV_BYTES_MAX
                                                 : l->max_bytes;
  o->max_runs = l->max_runs == 0 || l->max_runs > RDZV_RUNS_MAX ? RDZV_RUNS_MAX : l->max_runs;
  o->max_runs_per_client =
      l->max_runs_per_client == 0 ? RDZV_RUNS_PER_CLIENT_DEFAULT : l->max_runs_per_client;
  o->max_lease_ms = l->max_lease_ms == 0 ? RDZV_MAX_LEASE_DEFAULT : l->max_lease_ms;
}

void rdzv_bytes(const struct rdzv *rv, uint64_t *used, uint64_t *max)
{
  *used = rv->bytes;
  *max = rv->lim.max_bytes;
}

void rdzv_clear(struct rdzv *rv)
{
  while (rv->runs_list.head != NULL)
    rdzv_run_free(MU_CONTAINER_OF(rv->runs_list.head, struct rdzv_run, link));
}

static void on_timer_closed(uv_handle_t *h)
{
  struct rdzv *rv = h->data;
  void (*done)(void *) = rv->done;
  void *data = rv->done_data;
  mu_heap_release(&rv->deadlines);
  mu_free(rv);
  if (done)
    done(data);
}

void rdzv_free(struct rdzv *rv, void (*done)(void *), void *done_data)
{
  if (rv == NULL)
    return;
  rdzv_clear(rv);
  mu_htab_release(&rv->runs);
  mu_htab_release(&rv->clients); /* empty: every run gave its client entry back */
  rv->done = done;
  rv->done_data = done_data;
  uv_timer_stop(&rv->timer);
  uv_close((uv_handle_t *)&rv->timer, on_timer_closed);
}

void rdzv_gc(struct rdzv *rv)
{
  for (struct mu_list_node *x = rv->runs_list.head; x != NULL; x = x->next) {
    struct rdzv_run *run = MU_CONTAINER_OF(x, struct rdzv_run, link);
    if (rdzv_deadline_queued(&run->gc_dl))
      rdzv_deadline_set(rv, &run->gc_dl, 0);
  }
  on_timer(&rv->timer);
}

void rdzv_stats(const struct rdzv *rv, struct rdzv_stats *out)
{
  *out = rv->st;
}

void rdzv_set_event_hook(struct rdzv *rv, rdzv_event_fn *fn, void *data)
{
  rv->on_event = fn;
  rv->on_event_data = data;
}

void rdzv_note(const struct rdzv_run *run, const char *kind, const char *fmt, ...)
{
  struct rdzv *rv = run->rv;
  if (rv->on_event == NULL)
    return;
  char text[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  rv->on_event(rv->on_event_data, run->h.key, kind, text);
}

void rdzv_set_change_hook(struct rdzv *rv, rdzv_change_fn *fn, void *data)
{
  rv->on_change = fn;
  rv->on_change_data = data;
}
