/* A joined round: releasing it, and checking that every field of one a backend produced makes
 * sense before the agent turns it into RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT of real
 * workers. A server (or an etcd value) that answers rank_offset=INT_MAX, a node rank past the
 * round, or MASTER_PORT=-7 is refused here, naming the field, instead of being passed on. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "client_int.h"

#define MAX_TEXT 255 /* node ids, addresses: what a DNS name or a node id can be */

void mu_round_release(struct mu_round *r)
{
  if (r == NULL)
    return;
  for (size_t i = 0; i < r->nmembers; i++) {
    mu_free(r->members[i].node_id);
    mu_free(r->members[i].addr);
  }
  mu_free(r->members);
  mu_free(r->run_id);
  mu_free(r->master_addr);
  memset(r, 0, sizeof(*r));
}

int mu__answer_long(const cJSON *o, const char *what, const char *name, int required, long dflt,
                    long lo, long hi, long *out, char *err, size_t n)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
  if (v == NULL && !required) {
    *out = dflt;
    return 0;
  }
  if (v == NULL) {
    snprintf(err, n, "%s: no %s", what, name);
    return MU_EPROTO;
  }
  double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
  if (!isfinite(d) || d != floor(d) || d < (double)lo || d > (double)hi) {
    char shown[40] = "not a number";
    if (cJSON_IsNumber(v))
      snprintf(shown, sizeof(shown), "%.15g", d);
    snprintf(err, n, "%s: %s=%s is not a whole number from %ld to %ld", what, name, shown, lo, hi);
    return MU_EPROTO;
  }
  *out = (long)d;
  return 0;
}

/* ---------------------------------------------------------------------------------------------
 * The round's checks
 */

struct check {
  char *err;
  size_t n;
  int bad; /* the first failure was written */
};

static void fail(struct check *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(struct check *k, const char *fmt, ...)
{
  if (k->bad++)
    return;
  int used = snprintf(k->err, k->n, "invalid join answer: ");
  if (used < 0 || (size_t)used >= k->n)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(k->err + used, k->n - (size_t)used, fmt, ap);
  va_end(ap);
}

/* Text that becomes an environment value or a log line: 1-255 printable ASCII bytes. */
static void text(struct check *k, const char *field, const char *s)
{
  size_t len = s != NULL ? strlen(s) : 0;
  int ok = len > 0 && len <= MAX_TEXT;
  for (size_t i = 0; ok && i < len; i++)
    ok = s[i] > ' ' && s[i] < 0x7f;
  if (!ok)
    fail(k, "%s must be 1-%d printable characters without spaces (got %zu bytes)", field, MAX_TEXT,
         len);
}

/* The sizes and this node's place in them. */
static void check_sizes(struct check *k, const struct mu_round *r, const struct mu_join_opts *o)
{
  if (r->round < 1)
    fail(k, "round=%ld (rounds count from 1)", r->round);
  if (r->nnodes < 1 || (o != NULL && o->max_nodes >= 1 && r->nnodes > o->max_nodes))
    fail(k, "nnodes=%d is outside 1..%d (--nnodes)", r->nnodes, o != NULL ? o->max_nodes : 1);
  if (r->node_rank < 0 || r->node_rank >= r->nnodes)
    fail(k, "node_rank=%d is outside 0..%d (nnodes %d)", r->node_rank, r->nnodes - 1, r->nnodes);
  if (r->local_world_size < 1 ||
      (o != NULL && o->local_world_size >= 1 && r->local_world_size != o->local_world_size))
    fail(k, "local_world_size=%d, this node joined with %d", r->local_world_size,
         o != NULL ? o->local_world_size : 1);
  if (r->world_size < r->nnodes)
    fail(k, "world_size=%d is below nnodes %d (every node runs a worker)", r->world_size,
         r->nnodes);
  if (r->rank_offset < 0 || (long)r->rank_offset + r->local_world_size > (long)r->world_size)
    fail(k, "rank_offset=%d with local_world_size %d passes world_size %d (RANK would be %ld)",
         r->rank_offset, r->local_world_size, r->world_size,
         (long)r->rank_offset + r->local_world_size - 1);
  if (r->lease_ttl_ms <= 0)
    fail(k, "lease_ttl_ms=%ld (a lease lasts a while)", r->lease_ttl_ms);
}

/* The master: where rank 0 listens. Port 0 only as this node's own offer echoed back. */
static void check_master(struct check *k, const struct mu_round *r, const struct mu_join_opts *o)
{
  text(k, "master_addr", r->master_addr);
  int echo0 = r->master_port == 0 && r->node_rank == 0 && o != NULL && o->master_port == 0;
  if ((r->master_port < 1 || r->master_port > 65535) && !echo0)
    fail(k, "master_port=%d is not a port (1-65535)", r->master_port);
}

/* The members, when the answer lists them: in node-rank order, offsets adding up, this node
 * at its rank. */
static void check_members(struct check *k, const struct mu_round *r, const struct mu_join_opts *o)
{
  if (r->nmembers == 0)
    return; /* a big round leaves them out (docs/rendezvous.md) */
  if (r->nmembers != (size_t)r->nnodes) {
    fail(k, "%zu members for nnodes %d", r->nmembers, r->nnodes);
    return;
  }
  long off = 0;
  for (size_t i = 0; i < r->nmembers && !k->bad; i++) {
    const struct mu_member *m = &r->members[i];
    text(k, "a member's node_id", m->node_id);
    text(k, "a member's addr", m->addr);
    if (m->node_rank != (int)i || m->rank_offset != off || m->local_world_size < 1)
      fail(k,
           "member %zu ('%s') has node_rank %d, rank_offset %d, local_world_size %d; expected "
           "node_rank %zu at rank_offset %ld",
           i, m->node_id ? m->node_id : "", m->node_rank, m->rank_offset, m->local_world_size, i,
           off);
    off += m->local_world_size;
  }
  if (!k->bad && off != r->world_size)
    fail(k, "the members' local_world_size add up to %ld, not world_size %d", off, r->world_size);
  const struct mu_member *me = &r->members[r->node_rank];
  if (!k->bad && o != NULL && o->node_id != NULL &&
      (me->node_id == NULL || strcmp(me->node_id, o->node_id) != 0))
    fail(k, "member %d is '%s', not this node '%s'", r->node_rank, me->node_id, o->node_id);
  if (!k->bad && me->rank_offset != r->rank_offset)
    fail(k, "rank_offset=%d, but this node's member entry says %d", r->rank_offset,
         me->rank_offset);
}

int mu__round_check(const struct mu_round *r, const char *run_id, const struct mu_join_opts *o,
                    char *err, size_t n)
{
  struct check k = {err, n, 0};
  if (r->run_id != NULL && run_id != NULL && strcmp(r->run_id, run_id) != 0)
    fail(&k, "run_id='%.64s' is not the run joined, '%.64s'", r->run_id, run_id);
  check_sizes(&k, r, o);
  if (!k.bad)
    check_master(&k, r, o);
  if (!k.bad)
    check_members(&k, r, o);
  return k.bad ? MU_EPROTO : 0;
}
