/* Forgetting torchrun runs: PyTorch's store lives as long as the agent that hosts it, musterd's
 * as long as musterd, so without this a shared musterd would keep every job's keys for ever,
 * and a job that reuses a run id (torchrun's default is "none") would find the last one's
 * state, closed. musterd notes each run's last write (torchrun's agents rewrite the state key
 * every 5 s while the run lives) and deletes the keys of a run that has not written for
 * --c10d-run-gc-seconds (through the store: logged, as any delete). Runs found in the store at
 * start-up count from then. Keys of no torchrun run are left alone.
 */
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "c10d_int.h"
#include "log.h"

#define RUN_PREFIX "torch.rendezvous."

struct c10d_run_seen {
  struct mu_hnode h; /* key: the run id (part of the allocation) */
  uint64_t last_ms;
};

int c10d_key_run(const char *k, size_t n, const char **run, size_t *run_len, long *round)
{
  const size_t pl = sizeof(RUN_PREFIX) - 1;
  if (n > 0 && k[0] == '/') {
    k++;
    n--;
  }
  *round = -1;
  if (n <= pl || memcmp(k, RUN_PREFIX, pl) != 0)
    return 0;
  const char *rest = k + pl, *end = k + n, *slash = memchr(rest, '/', (size_t)(end - rest));
  *run = rest;
  if (slash == NULL) { /* the state key: torch.rendezvous.<run_id> */
    *run_len = (size_t)(end - rest);
    return 1;
  }
  /* a round's key: torch.rendezvous.<run_id>.<round>/... */
  *run_len = (size_t)(slash - rest);
  const char *dot = slash;
  while (dot > rest && *dot != '.')
    dot--;
  if (*dot == '.' && dot + 1 < slash) {
    long r = 0;
    const char *d = dot + 1;
    for (; d < slash && *d >= '0' && *d <= '9' && r < 1000000000L; d++)
      r = r * 10 + (*d - '0');
    if (d == slash) {
      *run_len = (size_t)(dot - rest);
      *round = r;
    }
  }
  return *run_len > 0;
}

static struct c10d_run_seen *seen(struct c10d *m, const char *run, size_t n, int add)
{
  struct mu_hnode *h = mu_htab_find(&m->runs, run, n);
  if (h != NULL || !add)
    return h != NULL ? MU_CONTAINER_OF(h, struct c10d_run_seen, h) : NULL;
  struct c10d_run_seen *r = mu_calloc(1, sizeof(*r) + n + 1);
  r->h.key = (char *)(r + 1);
  memcpy(r->h.key, run, n);
  mu_htab_add(&m->runs, &r->h, r->h.key, n);
  return r;
}

void c10d_gc_touch(struct c10d *m, const void *k, size_t n)
{
  const char *run = NULL;
  size_t rl = 0;
  long round = -1;
  if (m->cfg.run_gc_ms == 0 || !c10d_key_run(k, n, &run, &rl, &round))
    return;
  seen(m, run, rl, 1)->last_ms = uv_now(rv_server_loop(m->srv));
}

int64_t c10d_gc_idle_ms(struct c10d *m, const char *run, size_t run_len)
{
  struct c10d_run_seen *r = seen(m, run, run_len, 0);
  return r != NULL ? (int64_t)(uv_now(rv_server_loop(m->srv)) - r->last_ms) : -1;
}

/* Deletes every key of the runs idle past the bound (and, on the first pass, notes the runs
 * the store held at start-up). Returns: keys deleted. */
static uint64_t sweep(struct c10d *m, uint64_t now)
{
  struct v2_node *d = v2_store_lookup(m->store, C10D_DIR);
  struct mu_buf key = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  char **doomed = NULL;
  size_t nd = 0, cap = 0;
  for (uint32_t i = 0; d != NULL && d->is_dir && i < d->nchildren; i++) {
    const char *name = strrchr(d->children[i]->hn.key, '/') + 1, *run = NULL;
    size_t rl = 0;
    long round = -1;
    if (d->children[i]->is_dir || c10d_key_decode(name, strlen(name), &key) != 0 ||
        !c10d_key_run(key.data, key.len, &run, &rl, &round))
      continue;
    struct c10d_run_seen *r = seen(m, run, rl, !m->gc_scanned);
    if (r != NULL && r->last_ms == 0)
      r->last_ms = now; /* there at start-up: counted from now */
    if (r == NULL || now - r->last_ms < m->cfg.run_gc_ms)
      continue;
    if (nd == cap) {
      cap = cap ? cap * 2 : 64;
      doomed = mu_realloc(doomed, cap * sizeof(*doomed));
    }
    doomed[nd++] = mu_strdup(d->children[i]->hn.key);
  }
  mu_buf_release(&key);
  m->gc_scanned = 1;
  v2_watch_hub_hold(&m->store->hub);
  for (size_t i = 0; i < nd; i++) {
    struct v2_err err = {0, NULL, 0};
    v2_store_delete(m->store, doomed[i], 0, 0, &err);
    v2_err_release(&err);
    mu_free(doomed[i]);
  }
  v2_watch_hub_unhold(&m->store->hub);
  mu_free(doomed);
  return nd;
}

static void forget_idle(struct c10d *m, uint64_t now)
{
  struct mu_hnode **gone = NULL;
  size_t ng = 0, cap = 0;
  for (struct mu_hnode *h = mu_htab_next(&m->runs, NULL); h != NULL;
       h = mu_htab_next(&m->runs, h)) {
    struct c10d_run_seen *r = MU_CONTAINER_OF(h, struct c10d_run_seen, h);
    if (now - r->last_ms < m->cfg.run_gc_ms)
      continue;
    if (ng == cap) {
      cap = cap ? cap * 2 : 16;
      gone = mu_realloc(gone, cap * sizeof(*gone));
    }
    gone[ng++] = h;
  }
  for (size_t i = 0; i < ng; i++) {
    mu_log(MU_LOG_INFO, "c10d: forgot torchrun run '%s': no write for %llu s", gone[i]->key,
           (unsigned long long)(m->cfg.run_gc_ms / 1000));
    mu_htab_del(&m->runs, gone[i]);
    mu_free(MU_CONTAINER_OF(gone[i], struct c10d_run_seen, h));
    m->runs_forgotten++;
  }
  mu_free(gone);
}

static void on_gc(uv_timer_t *t)
{
  struct c10d *m = t->data;
  uint64_t now = uv_now(rv_server_loop(m->srv));
  int due = !m->gc_scanned;
  for (struct mu_hnode *h = mu_htab_next(&m->runs, NULL); h != NULL && !due;
       h = mu_htab_next(&m->runs, h))
    due = now - MU_CONTAINER_OF(h, struct c10d_run_seen, h)->last_ms >= m->cfg.run_gc_ms;
  /* deletes are writes: not while the store takes none (they wait for the next tick) */
  if (!due || m->store->walks > 0 || rv_server_read_only(m->srv) != NULL)
    return;
  m->keys_forgotten += sweep(m, now);
  forget_idle(m, now);
}

void c10d_gc_start(struct c10d *m)
{
  if (m->cfg.run_gc_ms == 0)
    return;
  uint64_t every = m->cfg.run_gc_ms / 4;
  if (every > 10000)
    every = 10000;
  if (every < 50)
    every = 50;
  uv_timer_start(&m->gc, on_gc, every, every);
}

static void free_seen(struct mu_hnode *h, void *data)
{
  (void)data;
  mu_free(MU_CONTAINER_OF(h, struct c10d_run_seen, h));
}

void c10d_gc_release(struct c10d *m)
{
  mu_htab_clear(&m->runs, free_seen, NULL);
  mu_htab_release(&m->runs);
}
