/* The rendezvous state that survives a restart, as one blob (see rdzv.h; the persist layer
 * logs it and hands it back at start-up).
 *
 * What is kept: each run's config, state and reason; its latest round (number, state) with
 * every member's place (id, addr, local world size, master port, rank offset, left/gone); its
 * KV. Not kept: pending joins, watches and barrier arrivals (their clients see the connection
 * drop and retry). A restored member's lease restarts at restore time, so it has one lease TTL
 * to heartbeat again before the round breaks.
 *
 * Layout (little-endian): u32 version, u32 runs, then per run the fields in the order
 * rdzv_encode() writes them; strings are u32 length + bytes.
 */
#include <string.h>

#include "muster/errno.h"

#include "alloc.h"
#include "rdzv_int.h"

#define RDZV_BLOB_VERSION 1u

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

static void put_round(struct enc *out, const struct rdzv_round *r)
{
  put_u64(out, r ? r->number : 0);
  put_u32(out, r ? r->nnodes : 0);
  for (uint32_t i = 0; r != NULL && i < r->nnodes; i++) {
    const struct rdzv_node *n = r->members[i];
    put_str(out, n->h.key, strlen(n->h.key));
    put_str(out, n->addr ? n->addr : "", n->addr ? strlen(n->addr) : 0);
    put_u32(out, n->lws);
    put_u32(out, n->master_port);
    put_u64(out, n->rank_offset);
    put_u32(out, (uint32_t)((n->left_ok ? 1 : 0) | (n->gone ? 2 : 0)));
  }
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
    put_u32(out, run->min_nodes);
    put_u32(out, run->max_nodes);
    put_u32(out, run->last_call_ms);
    put_u32(out, run->join_timeout_ms);
    put_u32(out, run->lease_ttl_ms);
    put_u32(out, (uint32_t)run->state);
    put_str(out, run->reason ? run->reason : "", run->reason ? strlen(run->reason) : 0);
    put_u32(out, (uint32_t)run->rstate);
    put_round(out, run->round);
    put_u64(out, run->kv_version);
    put_kv(out, run);
  }
  if (e.rc != 0 && buf->data != NULL) {
    buf->len = before; /* nothing half-written is left behind */
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

/* Reads the `nmembers` members of round `rd` of `run`. Members still in the run get a table
 * entry and a fresh lease. */
static void get_members(struct rd *r, struct rdzv_run *run, struct rdzv_round *rd,
                        uint32_t nmembers, uint64_t now)
{
  struct rdzv *rv = run->rv;
  uint64_t off = 0;
  for (uint32_t i = 0; i < nmembers && !r->bad; i++) {
    size_t idlen = 0;
    char *nid = get_str(r, RDZV_NODE_ID_MAX, &idlen);
    char *addr = get_str(r, RDZV_ADDR_MAX, NULL);
    uint32_t lws = get_u32(r), port = get_u32(r);
    uint64_t rank_offset = get_u64(r);
    uint32_t flags = get_u32(r);
    if (r->bad || nid == NULL || rdzv_find_node(run, nid) != NULL) {
      mu_free(nid);
      mu_free(addr);
      r->bad = 1;
      break;
    }
    struct rdzv_node *n = rdzv_node_new(nid, idlen);
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
    mu_htab_add(&run->nodes, &n->h, n->h.key, idlen);
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

int rdzv_restore(struct rdzv *rv, const void *data, size_t len)
{
  struct rd r = {data, len, 0, 0};
  if (rv->runs.n != 0 || get_u32(&r) != RDZV_BLOB_VERSION)
    return -1;
  uint32_t nruns = get_u32(&r);
  uint64_t now = rdzv_now(rv);
  for (uint32_t ri = 0; ri < nruns && !r.bad; ri++) {
    char *id = get_str(&r, RDZV_ID_MAX, NULL);
    struct rdzv_config c;
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
    if (r.bad || id == NULL || rdzv_find(rv, id) != NULL || state > RDZV_RUN_SHUT ||
        rstate > RDZV_ROUND_BROKEN || nmembers > RDZV_NODES_MAX || (number == 0 && nmembers > 0)) {
      mu_free(id);
      mu_free(reason);
      return -1;
    }
    struct rdzv_run *run = rdzv_run_new(rv, id, &c);
    mu_free(id);
    run->state = (enum rdzv_run_state)state;
    run->reason = reason;
    run->rstate = (enum rdzv_round_state)rstate;
    if (number > 0) {
      struct rdzv_round *rd = mu_calloc(1, sizeof(*rd));
      rd->number = number;
      rd->members = mu_calloc(nmembers ? nmembers : 1, sizeof(*rd->members));
      rd->refs = 1;
      run->round = rd;
      get_members(&r, run, rd, nmembers, now);
    }
    get_kv(&r, run);
    rdzv_gc_check(run);
  }
  return r.bad || r.off != r.n ? -1 : 0;
}
