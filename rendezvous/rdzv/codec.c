/* The rendezvous state that survives a restart, as one blob, and each change of it as a small
 * record (see rdzv.h; the persist layer writes the blob into snapshots, logs every change, and
 * hands both back at start-up, where the changes are applied in order over the blob).
 *
 * What is kept: each run's config, state and reason; its latest round (number, state) with
 * every member's place (id, addr, local world size, master port, rank offset, left/gone/
 * failed) and, from version 3, its session (session.c: after a restart each member is known by
 * it, as before); its KV; its goodput (restart budget and count, creation and first progress, the
 * round history, the unhealthy nodes). Not kept: pending joins (standbys too), watches and
 * barrier arrivals (their clients see the connection drop and retry). A restored member's lease
 * restarts at restore time, so it has one lease TTL to heartbeat again before the round breaks;
 * an unhealthy node's record gets three.
 *
 * Layout (little-endian): u32 version, u32 runs, then per run the fields in the order
 * rdzv_encode() writes them; strings are u32 length + bytes. Version 1 (before goodput) has
 * no goodput section, and versions 1-2 no member sessions (such a member keeps none: it is not
 * checked until it leaves the run); all are still read.
 *
 * A change (rdzv_encode_change()): u32 version, u32 kind, the run id, then by kind
 *   RUN     the run's fields as in the blob (config, state, reason, round state, KV version,
 *           and from version 2 the goodput section without the unhealthy nodes)
 *   ROUND   the round state and the round as in the blob (number, members)
 *   MEMBER  the round number, the member's rank, and the member as in the blob
 *   KV      the key, u32 1 + the value + its version, or u32 0 (deleted)
 *   SICK    the node id, u32 1 + output, since, last, checks, or u32 0 (forgotten)
 *   DROP    nothing
 * Each says what a piece of the state is now, not what happened to it, so replaying the log
 * needs no clock and no waits: the last record about a piece wins.
 */
#include <string.h>

#include "muster/errno.h"

#include "alloc.h"
#include "rdzv_int.h"

#define RDZV_BLOB_VERSION 3u
#define RDZV_CHANGE_VERSION 3u
#define MEMBER_LEFT_OK 1u
#define MEMBER_GONE 2u
#define MEMBER_FAILED 4u

/* ---------------------------------------------------------------------------------------------
 * Encoding
 */

/* Every append is checked: the first one refused by the buffer's cap fails the whole blob
 * (a blob missing a piece would decode as garbage, or not at all, after a restart). */
struct enc {
  struct mu_buf *b;
  int rc; /* 0, or the first append's error */
};

static void put_bytes(struct enc *e, const void *p, size_t n)
{
  if (e->rc == 0 && n > UINT32_MAX)
    e->rc = MU_E2BIG;
  if (e->rc == 0)
    e->rc = mu_buf_append(e->b, p, n);
}

static void put_u32(struct enc *e, uint32_t v)
{
  unsigned char p[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                        (unsigned char)(v >> 24)};
  put_bytes(e, p, 4);
}

static void put_u64(struct enc *b, uint64_t v)
{
  put_u32(b, (uint32_t)v);
  put_u32(b, (uint32_t)(v >> 32));
}

static void put_str(struct enc *b, const char *s, size_t n)
{
  if (n > UINT32_MAX && b->rc == 0)
    b->rc = MU_E2BIG;
  put_u32(b, (uint32_t)n);
  if (n > 0)
    put_bytes(b, s, n);
}

static void put_member(struct enc *out, const struct rdzv_node *n)
{
  put_str(out, n->h.key, strlen(n->h.key));
  put_str(out, n->addr ? n->addr : "", n->addr ? strlen(n->addr) : 0);
  put_u32(out, n->lws);
  put_u32(out, n->master_port);
  put_u64(out, n->rank_offset);
  put_u32(out, (n->left_ok ? MEMBER_LEFT_OK : 0) | (n->gone ? MEMBER_GONE : 0) |
                   (n->failed ? MEMBER_FAILED : 0));
  put_str(out, n->session, strlen(n->session)); /* version 3 */
}

static void put_round(struct enc *out, const struct rdzv_round *r)
{
  put_u64(out, r ? r->number : 0);
  put_u32(out, r ? r->nnodes : 0);
  for (uint32_t i = 0; r != NULL && i < r->nnodes; i++)
    put_member(out, r->members[i]);
}

/* A run's own fields: config, state, reason, round state. */
static void put_run_head(struct enc *out, const struct rdzv_run *run)
{
  put_u32(out, run->min_nodes);
  put_u32(out, run->max_nodes);
  put_u32(out, run->last_call_ms);
  put_u32(out, run->join_timeout_ms);
  put_u32(out, run->lease_ttl_ms);
  put_u32(out, (uint32_t)run->state);
  put_str(out, run->reason ? run->reason : "", run->reason ? strlen(run->reason) : 0);
  put_u32(out, (uint32_t)run->rstate);
}

static void put_kv(struct enc *out, const struct rdzv_run *run)
{
  uint32_t nkv = 0;
  for (const struct mu_hnode *h = mu_htab_next(&run->kv, NULL); h != NULL;
       h = mu_htab_next(&run->kv, h))
    nkv += MU_CONTAINER_OF(h, const struct kv, h)->val != NULL;
  put_u32(out, nkv);
  for (const struct mu_hnode *h = mu_htab_next(&run->kv, NULL); h != NULL;
       h = mu_htab_next(&run->kv, h)) {
    const struct kv *k = MU_CONTAINER_OF(h, const struct kv, h);
    if (k->val == NULL)
      continue;
    put_str(out, k->h.key, strlen(k->h.key));
    put_str(out, k->val, k->len);
    put_u64(out, k->version);
  }
}

static void put_hist(struct enc *out, const struct rdzv_hist *h)
{
  put_u64(out, h->number);
  put_u64(out, h->world_size);
  put_u32(out, h->nnodes);
  put_u32(out, h->restart_count);
  put_u32(out, h->started_nodes);
  put_u32(out, (uint32_t)h->end | (uint32_t)h->counted << 8);
  put_u64(out, (uint64_t)h->closed_ms);
  put_u64(out, (uint64_t)h->started_ms);
  put_u64(out, (uint64_t)h->progress_ms);
  put_u64(out, (uint64_t)h->ended_ms);
  put_str(out, h->why, strlen(h->why));
}

/* The run's goodput: budget, count, times, the round history (not the unhealthy nodes). */
static void put_goodput(struct enc *out, const struct rdzv_run *run)
{
  put_u64(out, (uint64_t)run->max_restarts);
  put_u32(out, run->restarts);
  put_u64(out, (uint64_t)run->created_ms);
  put_u64(out, (uint64_t)run->first_progress_ms);
  put_u64(out, run->hist_dropped);
  put_u32(out, run->nhist);
  for (uint32_t i = 0; i < run->nhist; i++)
    put_hist(out, &run->hist[i]);
}

static void put_sick_one(struct enc *out, const struct rdzv_sick *s)
{
  put_str(out, s->output, strlen(s->output));
  put_u64(out, (uint64_t)s->since_ms);
  put_u64(out, (uint64_t)s->last_ms);
  put_u32(out, s->checks);
}

static void put_sick(struct enc *out, const struct rdzv_run *run)
{
  put_u32(out, (uint32_t)run->sick.n);
  for (const struct mu_hnode *h = mu_htab_next(&run->sick, NULL); h != NULL;
       h = mu_htab_next(&run->sick, h)) {
    put_str(out, h->key, h->len);
    put_sick_one(out, MU_CONTAINER_OF(h, const struct rdzv_sick, h));
  }
}

int rdzv_encode(const struct rdzv *rv, struct mu_buf *buf)
{
  size_t before = buf->len;
  struct enc e = {buf, 0};
  struct enc *out = &e;
  put_u32(out, RDZV_BLOB_VERSION);
  put_u32(out, (uint32_t)rv->runs.n);
  for (const struct mu_list_node *x = rv->runs_list.head; x != NULL; x = x->next) {
    const struct rdzv_run *run = MU_CONTAINER_OF(x, const struct rdzv_run, link);
    put_str(out, run->h.key, strlen(run->h.key));
    put_run_head(out, run);
    put_round(out, run->round);
    put_u64(out, run->kv_version);
    put_kv(out, run);
    put_goodput(out, run);
    put_sick(out, run);
  }
  if (e.rc != 0 && buf->data != NULL) {
    buf->len = before; /* nothing half-written is left behind */
    buf->data[before] = '\0';
  }
  return e.rc;
}

int rdzv_encode_change(const struct rdzv_change *c, struct mu_buf *buf)
{
  size_t before = buf->len;
  struct enc e = {buf, 0};
  const struct rdzv_run *run = c->run;
  put_u32(&e, RDZV_CHANGE_VERSION);
  put_u32(&e, (uint32_t)c->kind);
  put_str(&e, run->h.key, strlen(run->h.key));
  switch (c->kind) {
  case RDZV_CH_RUN:
    put_run_head(&e, run);
    put_u64(&e, run->kv_version);
    put_goodput(&e, run);
    break;
  case RDZV_CH_ROUND:
    put_u32(&e, (uint32_t)run->rstate);
    put_round(&e, run->round);
    break;
  case RDZV_CH_MEMBER:
    put_u64(&e, run->round != NULL ? run->round->number : 0);
    put_u32(&e, c->node->rank);
    put_member(&e, c->node);
    break;
  case RDZV_CH_KV: {
    const struct mu_hnode *h = mu_htab_find(&run->kv, c->key, strlen(c->key));
    const struct kv *k = h != NULL ? MU_CONTAINER_OF(h, const struct kv, h) : NULL;
    put_str(&e, c->key, strlen(c->key));
    put_u32(&e, k != NULL && k->val != NULL);
    if (k != NULL && k->val != NULL) {
      put_str(&e, k->val, k->len);
      put_u64(&e, k->version);
    }
    break;
  }
  case RDZV_CH_SICK: {
    const struct mu_hnode *h = mu_htab_find(&run->sick, c->key, strlen(c->key));
    put_str(&e, c->key, strlen(c->key));
    put_u32(&e, h != NULL);
    if (h != NULL)
      put_sick_one(&e, MU_CONTAINER_OF(h, const struct rdzv_sick, h));
    break;
  }
  case RDZV_CH_DROP:
    break;
  }
  if (e.rc != 0 && buf->data != NULL) {
    buf->len = before;
    buf->data[before] = '\0';
  }
  return e.rc;
}

/* ---------------------------------------------------------------------------------------------
 * Decoding
 */

struct rd {
  const unsigned char *p;
  size_t n, off;
  int bad;
  uint32_t version; /* of the blob or change being read */
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

/* One member as put_member() wrote it. */
struct member_rec {
  char *id, *addr; /* owned */
  char session[RDZV_SESSION_HEX + 1];
  size_t idlen;
  uint32_t lws, port, flags;
  uint64_t rank_offset;
};

/* A member's session: "", or exactly RDZV_SESSION_HEX hex digits (anything else: r->bad). */
static void get_session(struct rd *r, char out[RDZV_SESSION_HEX + 1])
{
  size_t n = 0;
  char *s = get_str(r, RDZV_SESSION_HEX, &n);
  if (s != NULL && (n == 0 || n == RDZV_SESSION_HEX) && strspn(s, "0123456789abcdef") == n)
    memcpy(out, s, n + 1);
  else
    r->bad = 1;
  mu_free(s);
}

/* Returns: 0, or -1 (r->bad) with nothing left to free. */
static int get_member(struct rd *r, struct member_rec *m)
{
  m->id = get_str(r, RDZV_NODE_ID_MAX, &m->idlen);
  m->addr = get_str(r, RDZV_ADDR_MAX, NULL);
  m->lws = get_u32(r);
  m->port = get_u32(r);
  m->rank_offset = get_u64(r);
  m->flags = get_u32(r);
  m->session[0] = '\0';
  if (r->version >= 3 && !r->bad)
    get_session(r, m->session);
  if (!r->bad && m->id != NULL && m->addr != NULL)
    return 0;
  mu_free(m->id);
  mu_free(m->addr);
  r->bad = 1;
  return -1;
}

/* Reads the `nmembers` members of round `rd` of `run`. Members still in the run get a table
 * entry and a fresh lease. */
static void get_members(struct rd *r, struct rdzv_run *run, struct rdzv_round *rd,
                        uint32_t nmembers, uint64_t now)
{
  struct rdzv *rv = run->rv;
  uint64_t off = 0;
  for (uint32_t i = 0; i < nmembers && !r->bad; i++) {
    struct member_rec m;
    if (get_member(r, &m) != 0)
      break;
    if (rdzv_find_node(run, m.id) != NULL) {
      mu_free(m.id);
      mu_free(m.addr);
      r->bad = 1;
      break;
    }
    struct rdzv_node *n = rdzv_node_new(rv, m.id, m.idlen);
    mu_free(m.id);
    uint32_t flags = m.flags, lws = m.lws;
    uint64_t rank_offset = m.rank_offset;
    rdzv_node_set_addr(n, m.addr);
    n->lws = lws;
    n->master_port = m.port;
    n->round = rd;
    n->rank = i;
    n->rank_offset = rank_offset;
    n->left_ok = (flags & MEMBER_LEFT_OK) != 0;
    n->failed = (flags & MEMBER_FAILED) != 0;
    memcpy(n->session, m.session, sizeof(m.session));
    n->refs = 1; /* the round's */
    rd->members[i] = n;
    rd->nnodes = i + 1;
    off = rank_offset + lws;
    if (flags & MEMBER_GONE) {
      n->gone = 1;
      run->round_gone++;
      run->left_ok += n->left_ok;
      continue;
    }
    run->round_failed += n->failed != 0;
    n->refs++; /* the run's table */
    mu_htab_add(&run->nodes, &n->h, n->h.key, n->h.len);
    rv->st.nodes++;
    if (run->state == RDZV_RUN_OPEN) {
      n->expires = now + run->lease_ttl_ms;
      rdzv_lease_renew(run, n);
    }
  }
  rd->world_size = off;
}

static void get_kv(struct rd *r, struct rdzv_run *run)
{
  run->kv_version = get_u64(r);
  uint32_t nkv = get_u32(r);
  for (uint32_t i = 0; i < nkv && !r->bad; i++) {
    size_t vlen = 0;
    char *key = get_str(r, RDZV_KEY_MAX, NULL);
    char *val = get_str(r, RDZV_VALUE_MAX, &vlen);
    uint64_t version = get_u64(r);
    if (r->bad || key == NULL || val == NULL ||
        rdzv_kv_restore(run, key, val, vlen, version) != 0) {
      mu_free(key);
      mu_free(val);
      r->bad = 1;
      break;
    }
  }
}

/* Reads one round record (put_hist()) into the run's history. */
static void get_hist(struct rd *r, struct rdzv_run *run)
{
  struct rdzv_hist h;
  memset(&h, 0, sizeof(h));
  h.number = get_u64(r);
  h.world_size = get_u64(r);
  h.nnodes = get_u32(r);
  h.restart_count = get_u32(r);
  h.started_nodes = get_u32(r);
  uint32_t end = get_u32(r);
  h.end = (uint8_t)(end & 0xff);
  h.counted = (uint8_t)((end >> 8) & 1);
  h.closed_ms = (int64_t)get_u64(r);
  h.started_ms = (int64_t)get_u64(r);
  h.progress_ms = (int64_t)get_u64(r);
  h.ended_ms = (int64_t)get_u64(r);
  h.why = get_str(r, RDZV_WHY_MAX, NULL);
  if (r->bad || h.why == NULL || h.end >= RDZV_END__COUNT) {
    mu_free(h.why);
    r->bad = 1;
    return;
  }
  rdzv_hist_push(run, &h);
}

/* Reads the goodput section (put_goodput()) of a version 2 blob or change over `run`'s. */
static void get_goodput(struct rd *r, struct rdzv_run *run)
{
  if (r->version < 2)
    return;
  int64_t max_restarts = (int64_t)get_u64(r);
  uint32_t restarts = get_u32(r);
  int64_t created = (int64_t)get_u64(r), progress = (int64_t)get_u64(r);
  uint64_t dropped = get_u64(r);
  uint32_t nhist = get_u32(r);
  if (r->bad || max_restarts < -1 || max_restarts > RDZV_RESTARTS_MAX || nhist > RDZV_HISTORY_MAX) {
    r->bad = 1;
    return;
  }
  rdzv_hist_clear(run); /* a change says what the history is now */
  run->max_restarts = max_restarts;
  run->restarts = restarts;
  run->created_ms = created;
  run->first_progress_ms = progress;
  for (uint32_t i = 0; i < nhist && !r->bad; i++)
    get_hist(r, run);
  run->hist_dropped = dropped;
}

/* Reads one unhealthy node's record after its id (put_sick_one()); `id` is borrowed. */
static void get_sick_one(struct rd *r, struct rdzv_run *run, const char *id)
{
  char *output = get_str(r, RDZV_SICK_OUTPUT_MAX, NULL);
  int64_t since = (int64_t)get_u64(r), last = (int64_t)get_u64(r);
  uint32_t checks = get_u32(r);
  if (r->bad || output == NULL) {
    mu_free(output);
    r->bad = 1;
    return;
  }
  struct rdzv_sick *s = rdzv_sick_set(run, id, output, 3 * (uint64_t)run->lease_ttl_ms);
  s->since_ms = since;
  s->last_ms = last;
  s->checks = checks;
}

static void get_sick(struct rd *r, struct rdzv_run *run)
{
  if (r->version < 2)
    return;
  uint32_t n = get_u32(r);
  for (uint32_t i = 0; i < n && !r->bad; i++) {
    char *id = get_str(r, RDZV_NODE_ID_MAX, NULL);
    if (id == NULL) {
      r->bad = 1;
      return;
    }
    get_sick_one(r, run, id);
    mu_free(id);
  }
}

/* Reads a run's own fields (put_run_head()). Returns: 0, or -1 (nothing left to free). */
static int get_run_head(struct rd *r, struct rdzv_config *c, uint32_t *state, char **reason,
                        uint32_t *rstate)
{
  c->min_nodes = get_u32(r);
  c->max_nodes = get_u32(r);
  c->last_call_ms = get_u32(r);
  c->join_timeout_ms = get_u32(r);
  c->lease_ttl_ms = get_u32(r);
  c->max_restarts = -1; /* the goodput section says (version 2) */
  *state = get_u32(r);
  *reason = get_str(r, 4096, NULL);
  *rstate = get_u32(r);
  if (!r->bad && *reason != NULL && *state <= RDZV_RUN_SHUT && *rstate <= RDZV_ROUND_BROKEN)
    return 0;
  mu_free(*reason);
  *reason = NULL;
  r->bad = 1;
  return -1;
}

/* Reads round `number` (0: none) of `run` with its `nmembers` members (put_round()). */
static void get_round(struct rd *r, struct rdzv_run *run, uint64_t number, uint32_t nmembers)
{
  if (nmembers > RDZV_NODES_MAX || (number == 0 && nmembers > 0)) {
    r->bad = 1;
    return;
  }
  if (number == 0)
    return;
  struct rdzv_round *rd = mu_calloc(1, sizeof(*rd));
  rd->number = number;
  rd->members = mu_calloc(nmembers ? nmembers : 1, sizeof(*rd->members));
  rd->refs = 1;
  run->round = rd;
  get_members(r, run, rd, nmembers, rdzv_now(run->rv));
}

int rdzv_restore(struct rdzv *rv, const void *data, size_t len)
{
  struct rd r = {data, len, 0, 0, 0};
  r.version = get_u32(&r);
  if (rv->runs.n != 0 || r.version < 1 || r.version > RDZV_BLOB_VERSION)
    return -1;
  uint32_t nruns = get_u32(&r);
  for (uint32_t ri = 0; ri < nruns && !r.bad; ri++) {
    char *id = get_str(&r, RDZV_ID_MAX, NULL);
    struct rdzv_config c;
    uint32_t state, rstate;
    char *reason = NULL;
    if (id == NULL || get_run_head(&r, &c, &state, &reason, &rstate) != 0 ||
        rdzv_find(rv, id) != NULL) {
      mu_free(id);
      mu_free(reason);
      return -1;
    }
    struct rdzv_run *run = rdzv_run_new(rv, id, &c);
    mu_free(id);
    run->state = (enum rdzv_run_state)state;
    run->reason = reason;
    run->rstate = (enum rdzv_round_state)rstate;
    uint64_t number = get_u64(&r);
    get_round(&r, run, number, get_u32(&r));
    get_kv(&r, run);
    get_goodput(&r, run);
    get_sick(&r, run);
    rdzv_gc_check(run);
  }
  return r.bad || r.off != r.n ? -1 : 0;
}

/* ---------------------------------------------------------------------------------------------
 * Applying a change
 */

static void apply_run(struct rd *r, struct rdzv *rv, struct rdzv_run **runp, const char *id)
{
  struct rdzv_config c;
  uint32_t state, rstate;
  char *reason = NULL;
  if (get_run_head(r, &c, &state, &reason, &rstate) != 0)
    return;
  uint64_t kv_version = get_u64(r);
  if (r->bad) {
    mu_free(reason);
    return;
  }
  struct rdzv_run *run = *runp;
  if (run == NULL)
    run = *runp = rdzv_run_new(rv, id, &c);
  get_goodput(r, run);
  if (run->state == RDZV_RUN_OPEN && state != RDZV_RUN_OPEN) {
    /* ended: as rdzv_end() leaves it, no lease runs out any more */
    rdzv_deadline_clear(rv, &run->lease_dl);
    rdzv_deadline_clear(rv, &run->last_call_dl);
  }
  run->state = (enum rdzv_run_state)state;
  mu_free(run->reason);
  run->reason = reason;
  run->rstate = (enum rdzv_round_state)rstate;
  if (kv_version > run->kv_version)
    run->kv_version = kv_version;
}

static void apply_round(struct rd *r, struct rdzv_run *run)
{
  uint32_t rstate = get_u32(r);
  uint64_t number = get_u64(r);
  uint32_t nmembers = get_u32(r);
  if (r->bad || rstate > RDZV_ROUND_BROKEN || number == 0) {
    r->bad = 1;
    return;
  }
  rdzv_run_drop_nodes(run); /* in a restored run, the members of the round this one replaces */
  if (run->round != NULL)
    rdzv_round_unref(run->round);
  run->round = NULL;
  run->round_gone = 0;
  run->left_ok = 0;
  run->round_failed = 0;
  run->rstate = (enum rdzv_round_state)rstate;
  get_round(r, run, number, nmembers);
}

static void apply_member(struct rd *r, struct rdzv_run *run)
{
  uint64_t number = get_u64(r);
  uint32_t rank = get_u32(r);
  struct member_rec m;
  if (get_member(r, &m) != 0)
    return;
  struct rdzv_round *rd = run->round;
  struct rdzv_node *n =
      rd != NULL && rd->number == number && rank < rd->nnodes ? rd->members[rank] : NULL;
  int gone = (m.flags & MEMBER_GONE) != 0;
  if (n == NULL || strcmp(n->h.key, m.id) != 0 || (n->gone && !gone)) {
    mu_free(m.id);
    mu_free(m.addr);
    r->bad = 1; /* not a member of the latest round, or one back from gone */
    return;
  }
  mu_free(m.id);
  rdzv_node_set_addr(n, m.addr);
  n->lws = m.lws;
  n->master_port = m.port;
  n->rank_offset = m.rank_offset;
  n->left_ok = (m.flags & MEMBER_LEFT_OK) != 0;
  memcpy(n->session, m.session, sizeof(n->session));
  int failed = (m.flags & MEMBER_FAILED) != 0;
  if (!n->gone) /* the count of failed members that are still in the run */
    run->round_failed += (uint32_t)(failed - (n->failed != 0));
  n->failed = failed;
  if (gone && !n->gone) {
    run->round_failed -= n->failed != 0;
    run->round_gone++;
    run->left_ok += n->left_ok;
    rdzv_node_drop(run, n);
  }
}

static void apply_kv(struct rd *r, struct rdzv_run *run)
{
  size_t vlen = 0;
  char *key = get_str(r, RDZV_KEY_MAX, NULL);
  uint32_t has = get_u32(r);
  char *val = has ? get_str(r, RDZV_VALUE_MAX, &vlen) : NULL;
  uint64_t version = has ? get_u64(r) : 0;
  if (r->bad || key == NULL || has > 1 || (has && val == NULL)) {
    mu_free(key);
    mu_free(val);
    r->bad = 1;
    return;
  }
  rdzv_kv_apply(run, key, val, vlen, version); /* takes val */
  mu_free(key);
}

static void apply_sick(struct rd *r, struct rdzv_run *run)
{
  char *id = get_str(r, RDZV_NODE_ID_MAX, NULL);
  uint32_t has = get_u32(r);
  if (r->bad || id == NULL || has > 1) {
    mu_free(id);
    r->bad = 1;
    return;
  }
  if (has)
    get_sick_one(r, run, id);
  else
    rdzv_sick_drop(run, id);
  mu_free(id);
}

int rdzv_apply_change(struct rdzv *rv, const void *data, size_t len)
{
  struct rd r = {data, len, 0, 0, 0};
  r.version = get_u32(&r);
  if (r.version < 1 || r.version > RDZV_CHANGE_VERSION)
    return -1;
  uint32_t kind = get_u32(&r);
  char *id = get_str(&r, RDZV_ID_MAX, NULL);
  if (r.bad || id == NULL) {
    mu_free(id);
    return -1;
  }
  struct rdzv_run *run = rdzv_find(rv, id);
  if (kind != RDZV_CH_RUN && run == NULL)
    r.bad = 1; /* a change to a run that the state does not hold */
  else if (kind == RDZV_CH_RUN)
    apply_run(&r, rv, &run, id);
  else if (kind == RDZV_CH_ROUND)
    apply_round(&r, run);
  else if (kind == RDZV_CH_MEMBER)
    apply_member(&r, run);
  else if (kind == RDZV_CH_KV)
    apply_kv(&r, run);
  else if (kind == RDZV_CH_SICK && r.version >= 2)
    apply_sick(&r, run);
  else if (kind == RDZV_CH_DROP)
    rdzv_run_free(run);
  else
    r.bad = 1;
  mu_free(id);
  if (kind != RDZV_CH_DROP && run != NULL)
    rdzv_gc_check(run);
  return r.bad || r.off != r.n ? -1 : 0;
}
