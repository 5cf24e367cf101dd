/* Barriers and the small KV of each run (see rdzv.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "rdzv_int.h"

static struct barrier *barrier_of(struct mu_hnode *h)
{
  return MU_CONTAINER_OF(h, struct barrier, h);
}

static struct kv *kv_of(struct mu_hnode *h)
{
  return MU_CONTAINER_OF(h, struct kv, h);
}

/* `data` is the rendezvous whose byte count holds them. */
static void barrier_free(struct mu_hnode *h, void *data)
{
  struct rdzv *rv = data;
  struct barrier *b = barrier_of(h);
  rv->bytes -= rdzv_barrier_cost(b->h.len);
  rv->enc -= BARRIER_ENC + b->h.len;
  mu_free(b->h.key);
  mu_free(b);
}

static void kv_free(struct mu_hnode *h, void *data)
{
  struct rdzv *rv = data;
  struct kv *e = kv_of(h);
  rv->bytes -= rdzv_kv_cost(e->h.len) + rdzv_value_cost(e->val, e->len);
  rv->enc -= KV_ENC + e->h.len + (e->val != NULL ? e->len : 0);
  mu_free(e->h.key);
  mu_free(e->val);
  mu_free(e);
}

void rdzv_barriers_kv_free(struct rdzv_run *run)
{
  mu_htab_clear(&run->barriers, barrier_free, run->rv);
  mu_htab_release(&run->barriers);
  run->kv_bytes = 0;
  mu_htab_clear(&run->kv, kv_free, run->rv);
  mu_htab_release(&run->kv);
}

/* Answers every wait of `list` with `err`, one at a time (a callback may start new ones). */
static void answer_list(struct rdzv_run *run, struct mu_list *list, int err, const char *msg)
{
  while (list->head != NULL) {
    struct rdzv_wait *w = wait_of(list->head);
    rdzv_other_detach(run, w);
    rdzv_fire_error(w, run->h.key, err, msg);
  }
}

void rdzv_barriers_kv_answer(struct rdzv_run *run, int err, const char *msg)
{
  for (struct mu_hnode *h = mu_htab_next(&run->barriers, NULL); h != NULL;
       h = mu_htab_next(&run->barriers, h))
    answer_list(run, &barrier_of(h)->arrivals, err, msg);
  for (struct mu_hnode *h = mu_htab_next(&run->kv, NULL); h != NULL; h = mu_htab_next(&run->kv, h))
    answer_list(run, &kv_of(h)->waiters, err, msg);
}

/* ---------------------------------------------------------------------------------------------
 * Barriers
 */

/* Checks a barrier arrival. Returns: 0, or the error with `err` saying why. */
static int barrier_check(struct rdzv *rv, const char *run_id, const char *name, uint32_t count,
                         const char *id, struct mu_buf *err, struct rdzv_run **out)
{
  struct rdzv_run *run = rdzv_find(rv, run_id);
  if (run == NULL) {
    mu_buf_printf(err, "no run '%s'; a node must join it first", run_id);
    return RDZV_ENO_SUCH_RUN;
  }
  if (run->state != RDZV_RUN_OPEN)
    return rdzv_ended_err(run, err);
  if (!rdzv_valid_text(name, RDZV_NODE_ID_MAX) || !rdzv_valid_text(id, RDZV_NODE_ID_MAX)) {
    mu_buf_printf(err,
                  "barrier name and id must be 1-%d printable characters without spaces, quotes "
                  "or backslashes",
                  RDZV_NODE_ID_MAX);
    return RDZV_EBAD_REQUEST;
  }
  if (count < 1 || count > RDZV_NODES_MAX * 64u) {
    mu_buf_printf(err, "count must be between 1 and %u", RDZV_NODES_MAX * 64u);
    return RDZV_EBAD_REQUEST;
  }
  *out = run;
  return 0;
}

int rdzv_barrier(struct rdzv *rv, const char *run_id, const char *name, uint32_t count,
                 uint64_t timeout_ms, const char *id, struct rdzv_wait *w, struct mu_buf *err)
{
  struct rdzv_run *run = NULL;
  int rc = barrier_check(rv, run_id, name, count, id, err, &run);
  if (rc != 0)
    return rc;
  if (timeout_ms > (uint64_t)MAX_TIMEOUT_MS)
    timeout_ms = (uint64_t)MAX_TIMEOUT_MS;
  struct mu_hnode *h = mu_htab_find(&run->barriers, name, strlen(name));
  struct barrier *b;
  if (h != NULL) {
    b = barrier_of(h);
  } else {
    if (run->barriers.n >= RDZV_BARRIERS_MAX) {
      mu_buf_printf(err, "run '%s' has %d barriers, its limit; reuse barrier names", run_id,
                    RDZV_BARRIERS_MAX);
      return RDZV_ETOO_MANY;
    }
    if (rdzv_over_bytes(rv, rdzv_barrier_cost(strlen(name)), BARRIER_ENC + strlen(name), err))
      return RDZV_ETOO_MANY;
    b = mu_calloc(1, sizeof(*b));
    char *key = mu_strdup(name);
    mu_htab_add(&run->barriers, &b->h, key, strlen(key));
    rv->bytes += rdzv_barrier_cost(b->h.len);
    rv->enc += BARRIER_ENC + b->h.len;
  }
  if (b->arrivals.n > 0 && b->count != count) {
    mu_buf_printf(err,
                  "barrier '%s' is waiting for %" PRIu32
                  " arrivals but this one says count %" PRIu32
                  "; every participant must pass the same count",
                  name, b->count, count);
    return RDZV_ECOUNT_MISMATCH;
  }
  b->count = count;
  for (struct mu_list_node *x = b->arrivals.head; x != NULL; x = x->next) {
    struct rdzv_wait *other = wait_of(x);
    if (strcmp(other->barrier_id, id) == 0) {
      rdzv_other_detach(run, other);
      rdzv_fire_error(other, run_id, RDZV_EREPLACED,
                      "a newer arrival with the same id replaced this one");
      break;
    }
  }
  rdzv_wait_start(w, RDZV_W_BARRIER, run, b);
  w->barrier_id = mu_strdup(id);
  rdzv_wait_queue(&b->arrivals, w);
  run->pending_other++;
  rv->st.pending_other++;
  rdzv_gc_check(run);
  if (b->arrivals.n < count) {
    rdzv_deadline_after(rv, &w->dl, timeout_ms);
    return 0;
  }
  /* Open: answer everyone, then the barrier is ready for the next generation. */
  b->generation++;
  struct rdzv_answer a;
  memset(&a, 0, sizeof(a));
  a.run_id = run->h.key;
  a.generation = b->generation;
  a.count = count;
  rdzv_answer_others(run, &b->arrivals, &a);
  rdzv_gc_check(run);
  return 0;
}

void rdzv_barrier_timed_out(struct rdzv_wait *w)
{
  struct rdzv_run *run = w->run;
  struct barrier *b = w->obj;
  struct mu_buf m = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  mu_buf_printf(&m,
                "barrier '%s' of run '%s' timed out with %zu of %" PRIu32
                " arrivals; check that every participant reaches it, or raise timeout_ms",
                b->h.key, run->h.key, b->arrivals.n, b->count);
  rdzv_other_detach(run, w);
  rdzv_gc_check(run);
  rdzv_fire_error(w, run->h.key, RDZV_EBARRIER_TIMEOUT, mu_buf_str(&m));
  mu_buf_release(&m);
}

/* ---------------------------------------------------------------------------------------------
 * KV
 */

static int valid_key(const char *key)
{
  size_t n = strlen(key);
  return n > 0 && n <= RDZV_KEY_MAX;
}

static struct kv *kv_find(struct rdzv_run *run, const char *key)
{
  struct mu_hnode *h = mu_htab_find(&run->kv, key, strlen(key));
  return h != NULL ? kv_of(h) : NULL;
}

static struct kv *kv_add(struct rdzv_run *run, char *key)
{
  struct kv *e = mu_calloc(1, sizeof(*e));
  mu_htab_add(&run->kv, &e->h, key, strlen(key));
  run->rv->bytes += rdzv_kv_cost(e->h.len);
  run->rv->enc += KV_ENC + e->h.len;
  return e;
}

/* Drops a KV entry that holds no value and has no waiter. */
static void kv_drop_if_empty(struct rdzv_run *run, struct kv *e)
{
  if (e->val != NULL || e->waiters.n > 0)
    return;
  mu_htab_del(&run->kv, &e->h);
  kv_free(&e->h, run->rv);
}

void rdzv_run_kv_usage(const struct rdzv_run *run, const char *key, size_t *nkeys, size_t *nbytes,
                       size_t *old_len, int *exists)
{
  const struct mu_hnode *h = key != NULL ? mu_htab_find(&run->kv, key, strlen(key)) : NULL;
  const struct kv *e = h ? MU_CONTAINER_OF(h, const struct kv, h) : NULL;
  *nkeys = run->kv.n;
  *nbytes = run->kv_bytes;
  *exists = e != NULL;
  *old_len = e && e->val ? e->len : 0;
}

static int kv_put(struct rdzv_run *run, const char *key, const void *value, size_t len,
                  uint64_t *version)
{
  struct rdzv *rv = run->rv;
  if (run->state != RDZV_RUN_OPEN)
    return run->state == RDZV_RUN_CLOSED ? RDZV_ERUN_CLOSED : RDZV_ERUN_SHUT;
  if (!valid_key(key))
    return RDZV_EBAD_REQUEST;
  if (len > RDZV_VALUE_MAX)
    return RDZV_ETOO_LARGE;
  struct kv *e = kv_find(run, key);
  size_t old = e && e->val ? e->len : 0;
  if (run->kv_bytes - old + len > RDZV_KV_BYTES_MAX)
    return RDZV_ETOO_LARGE;
  uint64_t was = e != NULL ? rdzv_value_cost(e->val, e->len) : 0, now = rdzv_str_cost(len);
  uint64_t more = (e == NULL ? rdzv_kv_cost(strlen(key)) : 0) + (now > was ? now - was : 0);
  uint64_t more_enc = (e == NULL ? KV_ENC + strlen(key) : 0) + (len > old ? len - old : 0);
  if ((more > 0 || more_enc > 0) && rdzv_over_bytes(rv, more, more_enc, NULL))
    return RDZV_ETOO_LARGE; /* the API names --v1-max-bytes (rdzv_bytes()) */
  if (e == NULL) {
    if (run->kv.n >= RDZV_KV_KEYS_MAX)
      return RDZV_ETOO_MANY;
    e = kv_add(run, mu_strdup(key));
  }
  char *v = mu_malloc(len + 1);
  memcpy(v, value, len);
  v[len] = '\0';
  rv->bytes = rv->bytes - rdzv_value_cost(e->val, e->len) + now;
  rv->enc = rv->enc - old + len;
  mu_free(e->val);
  e->val = v;
  e->len = len;
  run->kv_bytes = run->kv_bytes - old + len;
  e->version = ++run->kv_version;
  if (version)
    *version = e->version;
  rdzv_changed(run, RDZV_CH_KV, NULL, e->h.key);
  if (e->waiters.n > 0) {
    /* Answer from a private copy: a callback may overwrite or delete the key. */
    char *copy = mu_malloc(len + 1);
    memcpy(copy, v, len + 1);
    struct rdzv_answer a;
    memset(&a, 0, sizeof(a));
    a.run_id = run->h.key;
    a.value = copy;
    a.value_len = len;
    a.version = e->version;
    rdzv_answer_others(run, &e->waiters, &a);
    mu_free(copy);
    rdzv_gc_check(run);
  }
  return 0;
}

int rdzv_kv_set(struct rdzv *rv, const char *run_id, const char *key, const void *value, size_t len,
                uint64_t *version)
{
  struct rdzv_run *run = rdzv_find(rv, run_id);
  if (run == NULL)
    return RDZV_ENO_SUCH_RUN;
  return kv_put(run, key, value, len, version);
}

int rdzv_kv_get(struct rdzv *rv, const char *run_id, const char *key, struct rdzv_answer *out,
                uint64_t timeout_ms, struct rdzv_wait *w)
{
  struct rdzv_run *run = rdzv_find(rv, run_id);
  memset(out, 0, sizeof(*out));
  if (run == NULL)
    return RDZV_ENO_SUCH_RUN;
  if (!valid_key(key))
    return RDZV_EBAD_REQUEST;
  out->run_id = run->h.key;
  struct kv *e = kv_find(run, key);
  if (e && e->val) {
    out->value = e->val;
    out->value_len = e->len;
    out->version = e->version;
    return 0;
  }
  if (w == NULL)
    return RDZV_ENO_SUCH_KEY;
  if (run->state != RDZV_RUN_OPEN)
    return run->state == RDZV_RUN_CLOSED ? RDZV_ERUN_CLOSED : RDZV_ERUN_SHUT;
  if (timeout_ms > (uint64_t)MAX_TIMEOUT_MS)
    timeout_ms = (uint64_t)MAX_TIMEOUT_MS;
  if (e == NULL) {
    if (run->kv.n >= RDZV_KV_KEYS_MAX ||
        rdzv_over_bytes(rv, rdzv_kv_cost(strlen(key)), KV_ENC + strlen(key), NULL))
      return RDZV_ETOO_MANY;
    e = kv_add(run, mu_strdup(key));
  }
  rdzv_wait_start(w, RDZV_W_KV, run, e);
  rdzv_wait_queue(&e->waiters, w);
  run->pending_other++;
  rv->st.pending_other++;
  rdzv_deadline_after(rv, &w->dl, timeout_ms);
  rdzv_gc_check(run);
  return 1;
}

void rdzv_kv_timed_out(struct rdzv_wait *w)
{
  struct rdzv_run *run = w->run;
  struct kv *e = w->obj;
  struct mu_buf m = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  mu_buf_printf(&m, "key '%s' of run '%s' was not set within wait_ms", e->h.key, run->h.key);
  rdzv_other_detach(run, w);
  kv_drop_if_empty(run, e);
  rdzv_gc_check(run);
  rdzv_fire_error(w, run->h.key, RDZV_EKV_TIMEOUT, mu_buf_str(&m));
  mu_buf_release(&m);
}

void rdzv_kv_cancel(struct rdzv_wait *w)
{
  struct rdzv_run *run = w->run;
  struct kv *e = w->obj;
  rdzv_other_detach(run, w);
  kv_drop_if_empty(run, e);
}

int rdzv_kv_del(struct rdzv *rv, const char *run_id, const char *key)
{
  struct rdzv_run *run = rdzv_find(rv, run_id);
  if (run == NULL)
    return RDZV_ENO_SUCH_RUN;
  struct kv *e = kv_find(run, key);
  if (e == NULL || e->val == NULL)
    return RDZV_ENO_SUCH_KEY;
  run->kv_bytes -= e->len;
  rv->bytes -= rdzv_value_cost(e->val, e->len);
  rv->enc -= e->len;
  mu_free(e->val);
  e->val = NULL;
  e->len = 0;
  rdzv_changed(run, RDZV_CH_KV, NULL, e->h.key);
  kv_drop_if_empty(run, e);
  return 0;
}

int rdzv_kv_add(struct rdzv *rv, const char *run_id, const char *key, int64_t delta,
                int64_t *result)
{
  struct rdzv_run *run = rdzv_find(rv, run_id);
  if (run == NULL)
    return RDZV_ENO_SUCH_RUN;
  if (run->state != RDZV_RUN_OPEN)
    return run->state == RDZV_RUN_CLOSED ? RDZV_ERUN_CLOSED : RDZV_ERUN_SHUT;
  if (!valid_key(key))
    return RDZV_EBAD_REQUEST;
  struct kv *e = kv_find(run, key);
  long long cur = 0;
  if (e && e->val) {
    char *end = NULL;
    errno = 0;
    cur = strtoll(e->val, &end, 10);
    if (e->len == 0 || errno != 0 || end != e->val + e->len)
      return RDZV_ENOT_A_COUNTER;
  }
  if ((delta > 0 && cur > INT64_MAX - delta) || (delta < 0 && cur < INT64_MIN - delta))
    return RDZV_EBAD_REQUEST;
  int64_t next = (int64_t)cur + delta;
  char text[32];
  int len = snprintf(text, sizeof(text), "%" PRId64, next);
  int rc = kv_put(run, key, text, (size_t)len, NULL);
  if (rc == 0 && result)
    *result = next;
  return rc;
}

int rdzv_kv_restore(struct rdzv_run *run, char *key, char *val, size_t len, uint64_t version)
{
  if (kv_find(run, key) != NULL)
    return -1;
  struct kv *e = kv_add(run, key);
  e->val = val;
  e->len = len;
  e->version = version;
  run->kv_bytes += len;
  run->rv->bytes += rdzv_value_cost(val, len);
  run->rv->enc += len;
  return 0;
}

void rdzv_kv_apply(struct rdzv_run *run, const char *key, char *val, size_t len, uint64_t version)
{
  struct kv *e = kv_find(run, key);
  if (e != NULL && e->val != NULL) {
    run->kv_bytes -= e->len;
    run->rv->bytes -= rdzv_value_cost(e->val, e->len);
    run->rv->enc -= e->len;
    mu_free(e->val);
    e->val = NULL;
    e->len = 0;
  }
  if (val == NULL) {
    if (e != NULL)
      kv_drop_if_empty(run, e);
    return;
  }
  if (e == NULL)
    e = kv_add(run, mu_strdup(key));
  e->val = val;
  e->len = len;
  e->version = version;
  run->kv_bytes += len;
  run->rv->bytes += rdzv_value_cost(val, len);
  run->rv->enc += len;
  if (version > run->kv_version)
    run->kv_version = version;
}
