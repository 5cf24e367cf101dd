/* Quotas (see quota.h): checks before the handler, driven by the route row's flags and its
 * API's usage numbers, and the counts of open long polls by client address and by scope (a /v1
 * run) in two hash tables. */
#include <stdio.h>
#include <string.h>

#include "muster/errno.h"

#include "alloc.h"
#include "htab.h"
#include "quota.h"

#define QUOTA_BUCKETS 1024
#define QUOTA_MESSAGE_MAX 512 /* our sentence plus a run id of at most 128 bytes */

/* Open long polls of one client address or one scope. */
struct quota_entry {
  struct mu_hnode hn; /* key: name */
  uint64_t open;
  char name[];
};

struct sec_quota {
  struct sec_quota_config cfg;
  uint64_t open; /* long polls admitted and not yet released */
  uint64_t refused[SEC_QUOTA_NKINDS];
  struct mu_htab clients, scopes, creds; /* open long polls by address, run, credential */
};

static const char *kind_names[SEC_QUOTA_NKINDS] = {"keys",
                                                   "value_bytes",
                                                   "watchers",
                                                   "watchers_per_client",
                                                   "run_watchers",
                                                   "run_keys",
                                                   "run_bytes",
                                                   "credential_watchers",
                                                   "credential_value_bytes"};

struct sec_quota *sec_quota_new(const struct sec_quota_config *cfg)
{
  struct sec_quota *q = mu_calloc(1, sizeof(*q));
  q->cfg = *cfg;
  mu_htab_init(&q->clients, QUOTA_BUCKETS);
  mu_htab_init(&q->scopes, QUOTA_BUCKETS);
  mu_htab_init(&q->creds, 0);
  return q;
}

static void entry_free(struct mu_hnode *h, void *data)
{
  (void)data;
  mu_free(MU_CONTAINER_OF(h, struct quota_entry, hn));
}

void sec_quota_free(struct sec_quota *q)
{
  if (q == NULL)
    return;
  mu_htab_clear(&q->clients, entry_free, NULL);
  mu_htab_clear(&q->scopes, entry_free, NULL);
  mu_htab_clear(&q->creds, entry_free, NULL);
  mu_htab_release(&q->clients);
  mu_htab_release(&q->scopes);
  mu_htab_release(&q->creds);
  mu_free(q);
}

int sec_quota_enabled(const struct sec_quota *q)
{
  return q != NULL && (q->cfg.max_keys || q->cfg.max_value_bytes || q->cfg.max_watchers ||
                       q->cfg.max_watchers_per_client || q->cfg.max_run_watchers ||
                       q->cfg.max_run_keys || q->cfg.max_run_bytes);
}

uint64_t sec_quota_refused(const struct sec_quota *q, enum sec_quota_kind kind)
{
  return q->refused[kind];
}

/* Finds the entry called s[0..n) in `t`, or NULL. */
static struct quota_entry *entry_find(struct mu_htab *t, const char *s, size_t n)
{
  struct mu_hnode *h = mu_htab_find(t, s, n);
  return h != NULL ? MU_CONTAINER_OF(h, struct quota_entry, hn) : NULL;
}

/* Finds (or adds) the entry called s[0..n) and takes one open count on it. */
static struct quota_entry *entry_take(struct mu_htab *t, struct quota_entry *e, const char *s,
                                      size_t n)
{
  if (e == NULL) {
    e = mu_calloc(1, sizeof(*e) + n + 1);
    memcpy(e->name, s, n);
    mu_htab_add(t, &e->hn, e->name, n);
  }
  e->open++;
  return e;
}

/* Drops one open count; frees the entry at zero. */
static void entry_put(struct mu_htab *t, struct quota_entry *e)
{
  if (--e->open > 0)
    return;
  mu_htab_del(t, &e->hn);
  mu_free(e);
}

static int refuse(struct sec_quota *q, struct rv_req *req, enum sec_quota_kind kind,
                  const char *message)
{
  int large =
      kind == SEC_QUOTA_VALUE || kind == SEC_QUOTA_RUN_BYTES || kind == SEC_QUOTA_CRED_VALUE;
  struct rv_refusal r = {large ? RV_REFUSE_TOO_LARGE : RV_REFUSE_TOO_MANY, message, 0, NULL};
  q->refused[kind]++;
  rv_refuse(req, &r);
  return 1;
}

/* The value, key and per-scope KV quotas of a write. Returns: 0, or 1 after refusing. */
static int check_write(struct sec_quota *q, struct rv_req *req, const struct rv_usage *u)
{
  char msg[QUOTA_MESSAGE_MAX];
  const struct sec_quota_config *c = &q->cfg;
  const struct rv_cred *cr = req->cred;
  if (cr != NULL && cr->quota_value_bytes > 0 && u->has_value &&
      u->value_len > cr->quota_value_bytes) {
    snprintf(msg, sizeof(msg),
             "the value is %llu bytes, over the %llu-byte quota of %s (quota-value-bytes= on "
             "its line)",
             (unsigned long long)u->value_len, (unsigned long long)cr->quota_value_bytes, cr->id);
    return refuse(q, req, SEC_QUOTA_CRED_VALUE, msg);
  }
  if (c->max_value_bytes > 0 && u->has_value && u->value_len > c->max_value_bytes) {
    snprintf(msg, sizeof(msg),
             "the value is %llu bytes, over this server's %llu-byte quota (--quota-value-bytes)",
             (unsigned long long)u->value_len, (unsigned long long)c->max_value_bytes);
    return refuse(q, req, SEC_QUOTA_VALUE, msg);
  }
  if (c->max_keys > 0 && u->counts_keys && u->adds_key > 0 &&
      u->keys + (uint64_t)u->adds_key > c->max_keys) {
    snprintf(msg, sizeof(msg),
             "the store holds %llu keys, this server's quota (--quota-keys): delete keys or "
             "raise the quota",
             (unsigned long long)u->keys);
    return refuse(q, req, SEC_QUOTA_KEYS, msg);
  }
  if (!u->scope_known)
    return 0;
  int idlen = (int)(u->scope_len > 128 ? 128 : u->scope_len);
  if (c->max_run_keys > 0 && u->scope_adds_key && u->scope_keys >= c->max_run_keys) {
    snprintf(msg, sizeof(msg),
             "run '%.*s' holds %llu keys, the per-run quota (--quota-run-keys): delete keys it "
             "no longer needs",
             idlen, u->scope, (unsigned long long)u->scope_keys);
    return refuse(q, req, SEC_QUOTA_RUN_KEYS, msg);
  }
  uint64_t after = u->scope_bytes - u->scope_old_bytes + u->scope_new_bytes;
  if (c->max_run_bytes > 0 && after > c->max_run_bytes) {
    snprintf(msg, sizeof(msg),
             "run '%.*s' would hold %llu bytes of values, over the per-run quota of %llu "
             "(--quota-run-bytes)",
             idlen, u->scope, (unsigned long long)after, (unsigned long long)c->max_run_bytes);
    return refuse(q, req, SEC_QUOTA_RUN_BYTES, msg);
  }
  return 0;
}

/* The long-poll quotas. Returns: 0 with `t` holding the counts taken, or 1 after refusing. */
static int admit_poll(struct sec_quota *q, struct rv_req *req, const char *peer,
                      const struct rv_usage *u, struct rv_ticket *t)
{
  char msg[QUOTA_MESSAGE_MAX];
  const struct sec_quota_config *c = &q->cfg;
  int per_client = c->max_watchers_per_client > 0 && peer != NULL && peer[0] != '\0';
  int per_scope = c->max_run_watchers > 0 && u->scope_len > 0;
  const struct rv_cred *cr = req->cred;
  int per_cred = cr != NULL && cr->quota_watchers > 0;
  if (c->max_watchers > 0 && q->open >= c->max_watchers) {
    snprintf(msg, sizeof(msg),
             "%llu watches and long polls are open, this server's quota (--quota-watchers)",
             (unsigned long long)q->open);
    return refuse(q, req, SEC_QUOTA_WATCHERS, msg);
  }
  struct quota_entry *ce = per_client ? entry_find(&q->clients, peer, strlen(peer)) : NULL;
  if (ce != NULL && ce->open >= c->max_watchers_per_client) {
    snprintf(msg, sizeof(msg),
             "client %s has %llu watches and long polls open, the per-client quota "
             "(--quota-watchers-per-client)",
             peer, (unsigned long long)ce->open);
    return refuse(q, req, SEC_QUOTA_CLIENT_WATCHERS, msg);
  }
  struct quota_entry *se = per_scope ? entry_find(&q->scopes, u->scope, u->scope_len) : NULL;
  if (se != NULL && se->open >= c->max_run_watchers) {
    snprintf(msg, sizeof(msg),
             "run '%.*s' has %llu long polls open, the per-run quota (--quota-run-watchers)",
             (int)(u->scope_len > 128 ? 128 : u->scope_len), u->scope,
             (unsigned long long)se->open);
    return refuse(q, req, SEC_QUOTA_RUN_WATCHERS, msg);
  }
  struct quota_entry *ke = per_cred ? entry_find(&q->creds, cr->id, strlen(cr->id)) : NULL;
  if (ke != NULL && ke->open >= cr->quota_watchers) {
    snprintf(msg, sizeof(msg),
             "%s has %llu watches and long polls open, its quota (quota-watchers= on its line)",
             cr->id, (unsigned long long)ke->open);
    return refuse(q, req, SEC_QUOTA_CRED_WATCHERS, msg);
  }
  /* admitted: take the counts */
  t->counted = 1;
  q->open++;
  if (per_client)
    t->held[0] = entry_take(&q->clients, ce, peer, strlen(peer));
  if (per_scope)
    t->held[1] = entry_take(&q->scopes, se, u->scope, u->scope_len);
  if (per_cred)
    t->held[2] = entry_take(&q->creds, ke, cr->id, strlen(cr->id));
  return 0;
}

int sec_quota_gate(struct sec_quota *q, struct rv_req *req, const char *peer, struct rv_ticket *t)
{
  memset(t, 0, sizeof(*t));
  const struct rv_cred *cr = req->cred;
  int cred_quotas = cr != NULL && (cr->quota_watchers > 0 || cr->quota_value_bytes > 0);
  if (!sec_quota_enabled(q) && !cred_quotas)
    return 0;
  const struct rv_route *r = req->route;
  struct rv_usage u;
  memset(&u, 0, sizeof(u));
  if ((r->flags & (RV_ROUTE_WRITE | RV_ROUTE_MAY_POLL | RV_ROUTE_LONG_POLL)) && r->api != NULL &&
      r->api->usage != NULL)
    r->api->usage(req, &u);
  if ((r->flags & RV_ROUTE_WRITE) && check_write(q, req, &u) != 0)
    return 1;
  int poll = (r->flags & RV_ROUTE_LONG_POLL) || ((r->flags & RV_ROUTE_MAY_POLL) && u.poll);
  const struct sec_quota_config *c = &q->cfg;
  if (!poll || !(c->max_watchers || c->max_watchers_per_client || c->max_run_watchers ||
                 (cr != NULL && cr->quota_watchers > 0)))
    return 0;
  return admit_poll(q, req, peer, &u, t);
}

void sec_quota_release(struct sec_quota *q, struct rv_ticket *t)
{
  if (q == NULL || t == NULL)
    return;
  if (t->counted && q->open > 0)
    q->open--;
  if (t->held[0] != NULL)
    entry_put(&q->clients, t->held[0]);
  if (t->held[1] != NULL)
    entry_put(&q->scopes, t->held[1]);
  if (t->held[2] != NULL)
    entry_put(&q->creds, t->held[2]);
  memset(t, 0, sizeof(*t));
}

void sec_quota_metrics(const struct sec_quota *q, struct mu_buf *out)
{
  if (q == NULL)
    return;
  mu_buf_puts(out, "# HELP musterd_quota_refused_total Requests refused by a quota.\n"
                   "# TYPE musterd_quota_refused_total counter\n");
  for (int i = 0; i < SEC_QUOTA_NKINDS; i++)
    mu_buf_printf(out, "musterd_quota_refused_total{quota=\"%s\"} %llu\n", kind_names[i],
                  (unsigned long long)q->refused[i]);
  mu_buf_printf(out,
                "# HELP musterd_quota_long_polls_open Long polls counted against the quotas.\n"
                "# TYPE musterd_quota_long_polls_open gauge\n"
                "musterd_quota_long_polls_open %llu\n",
                (unsigned long long)q->open);
}
