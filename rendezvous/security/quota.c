/* Quotas (see quota.h): checks before the handler, and counts of open long polls by client
 * address and by /v1 run in two small chained hash tables. */
#include <stdio.h>
#include <string.h>

#include "muster/errno.h"

#include "alloc.h"
#include "quota.h"
#include "rdzv.h"
#include "store.h"
#include "v2_error.h"

#define QUOTA_BUCKETS 1024

struct quota_entry {
  struct quota_entry *next;
  uint64_t open;
  uint32_t hash;
  char name[]; /* client address or run id */
};

struct quota_table {
  struct quota_entry *b[QUOTA_BUCKETS];
  size_t n;
};

struct rv_quota {
  struct rv_quota_config cfg;
  struct mu_store *store;
  struct mu_rdzv *rdzv;
  uint64_t open; /* long polls admitted and not yet released */
  uint64_t refused[RV_QUOTA_NKINDS];
  struct quota_table clients, runs;
};

static const char *kind_names[RV_QUOTA_NKINDS] = {
    "keys",         "value_bytes", "watchers", "watchers_per_client",
    "run_watchers", "run_keys",    "run_bytes"};

struct rv_quota *rv_quota_new(const struct rv_quota_config *cfg)
{
  struct rv_quota *q = mu_calloc(1, sizeof(*q));
  q->cfg = *cfg;
  return q;
}

static void table_clear(struct quota_table *t)
{
  for (size_t i = 0; i < QUOTA_BUCKETS; i++) {
    struct quota_entry *e = t->b[i];
    while (e != NULL) {
      struct quota_entry *next = e->next;
      mu_free(e);
      e = next;
    }
    t->b[i] = NULL;
  }
  t->n = 0;
}

void rv_quota_free(struct rv_quota *q)
{
  if (q == NULL)
    return;
  table_clear(&q->clients);
  table_clear(&q->runs);
  mu_free(q);
}

int rv_quota_enabled(const struct rv_quota *q)
{
  return q != NULL && (q->cfg.max_keys || q->cfg.max_value_bytes || q->cfg.max_watchers ||
                       q->cfg.max_watchers_per_client || q->cfg.max_run_watchers ||
                       q->cfg.max_run_keys || q->cfg.max_run_bytes);
}

int rv_quota_wants_peer(const struct rv_quota *q)
{
  return q != NULL && q->cfg.max_watchers_per_client > 0;
}

void rv_quota_set_store(struct rv_quota *q, struct mu_store *store)
{
  q->store = store;
}

void rv_quota_set_rdzv(struct rv_quota *q, struct mu_rdzv *rdzv)
{
  q->rdzv = rdzv;
}

uint64_t rv_quota_refused(const struct rv_quota *q, enum rv_quota_kind kind)
{
  return q->refused[kind];
}

static uint32_t fnv(const char *s, size_t n)
{
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++) {
    h ^= (unsigned char)s[i];
    h *= 16777619u;
  }
  return h;
}

/* Finds (or with `create`, adds) the entry called s[0..n). */
static struct quota_entry *table_get(struct quota_table *t, const char *s, size_t n, int create)
{
  uint32_t h = fnv(s, n);
  struct quota_entry **slot = &t->b[h % QUOTA_BUCKETS];
  for (struct quota_entry *e = *slot; e != NULL; e = e->next)
    if (e->hash == h && strncmp(e->name, s, n) == 0 && e->name[n] == '\0')
      return e;
  if (!create)
    return NULL;
  struct quota_entry *e = mu_calloc(1, sizeof(*e) + n + 1);
  memcpy(e->name, s, n);
  e->hash = h;
  e->next = *slot;
  *slot = e;
  t->n++;
  return e;
}

/* Drops one open count; frees the entry at zero. */
static void table_put(struct quota_table *t, struct quota_entry *x)
{
  if (--x->open > 0)
    return;
  struct quota_entry **p = &t->b[x->hash % QUOTA_BUCKETS];
  while (*p != NULL && *p != x)
    p = &(*p)->next;
  if (*p == x) {
    *p = x->next;
    t->n--;
    mu_free(x);
  }
}

int rv_quota_is_long_poll(const struct rv_req *req, const char **run, size_t *runlen)
{
  const char *p = req->path;
  *run = NULL;
  *runlen = 0;
  if (strncmp(p, "/v2/keys", 8) == 0 && (p[8] == '/' || p[8] == '\0')) {
    const char *w = rv_req_param(req, "wait");
    return req->method == RV_GET && w != NULL && strcmp(w, "true") == 0;
  }
  if (strncmp(p, "/v1/runs/", 9) != 0)
    return 0;
  const char *id = p + 9;
  const char *slash = strchr(id, '/');
  if (slash == NULL || slash == id)
    return 0;
  const char *rest = slash + 1;
  int lp = 0;
  if (strcmp(rest, "join") == 0 && req->method == RV_POST)
    lp = 1;
  else if (strcmp(rest, "watch") == 0 && req->method == RV_GET)
    lp = 1;
  else if (strncmp(rest, "barrier/", 8) == 0 && req->method == RV_POST)
    lp = 1;
  else if (strncmp(rest, "kv/", 3) == 0 && req->method == RV_GET &&
           rv_req_param(req, "wait_ms") != NULL)
    lp = 1;
  if (lp) {
    *run = id;
    *runlen = (size_t)(slash - id);
  }
  return lp;
}

static uint64_t store_index(const struct rv_quota *q)
{
  return q->store != NULL ? q->store->index : 0;
}

static int refuse_v2(struct rv_quota *q, struct rv_req *req, enum rv_quota_kind kind, int code,
                     const char *cause)
{
  q->refused[kind]++;
  v2_error_reply(req, code, cause, store_index(q));
  return 1;
}

static int refuse_v1(struct rv_quota *q, struct rv_req *req, enum rv_quota_kind kind,
                     const char *message)
{
  q->refused[kind]++;
  if (kind == RV_QUOTA_VALUE || kind == RV_QUOTA_RUN_BYTES)
    rv_reply_error(req, 413, "too_large", message);
  else
    rv_reply_error(req, 429, "too_many", message);
  return 1;
}

static int refuse(struct rv_quota *q, struct rv_req *req, enum rv_quota_kind kind,
                  const char *message)
{
  if (strncmp(req->path, "/v2/", 4) == 0)
    return refuse_v2(q, req, kind, kind == RV_QUOTA_VALUE ? RV_QUOTA_V2_VALUE : RV_QUOTA_V2_FULL,
                     message);
  return refuse_v1(q, req, kind, message);
}

/* Would this v2 write add a node to the store? */
static int v2_adds_node(const struct rv_quota *q, const struct rv_req *req)
{
  if (req->method == RV_POST)
    return 1; /* in-order create: always a new key */
  if (req->method != RV_PUT || q->store == NULL)
    return 0;
  const char *k = req->path + 8;
  char *key = mu_store_clean_key(k, strlen(k));
  int missing = mu_store_lookup(q->store, key) == NULL;
  mu_free(key);
  return missing;
}

int rv_quota_gate(struct rv_quota *q, struct rv_req *req, const char *peer,
                  struct rv_quota_ticket *t)
{
  char msg[256];
  memset(t, 0, sizeof(*t));
  if (!rv_quota_enabled(q))
    return 0;
  const char *p = req->path;
  int v2keys = strncmp(p, "/v2/keys", 8) == 0 && (p[8] == '/' || p[8] == '\0');

  /* value size */
  if (q->cfg.max_value_bytes > 0) {
    uint64_t len = 0;
    int is_value = 0;
    if (v2keys && (req->method & (RV_PUT | RV_POST))) {
      const char *v = rv_req_param(req, "value");
      is_value = v != NULL;
      len = is_value ? strlen(v) : 0;
    } else if (strncmp(p, "/v1/runs/", 9) == 0 && strstr(p, "/kv/") != NULL &&
               req->method == RV_PUT) {
      is_value = 1;
      len = req->body_len;
    }
    if (is_value && len > q->cfg.max_value_bytes) {
      snprintf(msg, sizeof(msg),
               "the value is %llu bytes, over this server's %llu-byte quota (--quota-value-bytes)",
               (unsigned long long)len, (unsigned long long)q->cfg.max_value_bytes);
      return refuse(q, req, RV_QUOTA_VALUE, msg);
    }
  }

  /* key count */
  if (q->cfg.max_keys > 0 && v2keys && q->store != NULL && q->store->nnodes >= q->cfg.max_keys &&
      v2_adds_node(q, req)) {
    snprintf(msg, sizeof(msg),
             "the store holds %llu keys, this server's quota (--quota-keys): delete keys or "
             "raise the quota",
             (unsigned long long)q->store->nnodes);
    return refuse(q, req, RV_QUOTA_KEYS, msg);
  }

  /* per-run KV: PUT /v1/runs/ID/kv/KEY (and POST ?add=, which may create the key) */
  if ((q->cfg.max_run_keys || q->cfg.max_run_bytes) && q->rdzv != NULL &&
      (req->method & (RV_PUT | RV_POST)) && strncmp(p, "/v1/runs/", 9) == 0) {
    const char *id = p + 9;
    const char *kv = strstr(id, "/kv/");
    size_t idlen = kv != NULL ? (size_t)(kv - id) : 0;
    if (idlen > 0 && idlen <= 128 && memchr(id, '/', idlen) == NULL && kv[4] != '\0') {
      char runid[129];
      memcpy(runid, id, idlen);
      runid[idlen] = '\0';
      struct mu_rdzv_run *r = mu_rdzv_find(q->rdzv, runid);
      if (r != NULL) {
        size_t nkeys, nbytes, old;
        int exists;
        mu_rdzv_run_kv_usage(r, kv + 4, &nkeys, &nbytes, &old, &exists);
        if (q->cfg.max_run_keys > 0 && !exists && nkeys >= q->cfg.max_run_keys) {
          snprintf(msg, sizeof(msg),
                   "run '%s' holds %zu keys, the per-run quota (--quota-run-keys): delete keys "
                   "it no longer needs",
                   runid, nkeys);
          return refuse_v1(q, req, RV_QUOTA_RUN_KEYS, msg);
        }
        uint64_t len = req->method == RV_PUT ? req->body_len : 24;
        if (q->cfg.max_run_bytes > 0 && nbytes - old + len > q->cfg.max_run_bytes) {
          snprintf(msg, sizeof(msg),
                   "run '%s' would hold %llu bytes of values, over the per-run quota of %llu "
                   "(--quota-run-bytes)",
                   runid, (unsigned long long)(nbytes - old + len),
                   (unsigned long long)q->cfg.max_run_bytes);
          return refuse_v1(q, req, RV_QUOTA_RUN_BYTES, msg);
        }
      }
    }
  }

  /* long polls */
  const char *run = NULL;
  size_t runlen = 0;
  if (!(q->cfg.max_watchers || q->cfg.max_watchers_per_client || q->cfg.max_run_watchers) ||
      !rv_quota_is_long_poll(req, &run, &runlen))
    return 0;
  if (q->cfg.max_watchers > 0 && q->open >= q->cfg.max_watchers) {
    snprintf(msg, sizeof(msg),
             "%llu watches and long polls are open, this server's quota (--quota-watchers)",
             (unsigned long long)q->open);
    return refuse(q, req, RV_QUOTA_WATCHERS, msg);
  }
  struct quota_entry *ce = NULL, *re = NULL;
  if (q->cfg.max_watchers_per_client > 0 && peer != NULL && peer[0] != '\0') {
    ce = table_get(&q->clients, peer, strlen(peer), 0);
    if (ce != NULL && ce->open >= q->cfg.max_watchers_per_client) {
      snprintf(msg, sizeof(msg),
               "client %s has %llu watches and long polls open, the per-client quota "
               "(--quota-watchers-per-client)",
               peer, (unsigned long long)ce->open);
      return refuse(q, req, RV_QUOTA_CLIENT_WATCHERS, msg);
    }
  }
  if (q->cfg.max_run_watchers > 0 && runlen > 0) {
    re = table_get(&q->runs, run, runlen, 0);
    if (re != NULL && re->open >= q->cfg.max_run_watchers) {
      snprintf(msg, sizeof(msg),
               "run '%.*s' has %llu long polls open, the per-run quota (--quota-run-watchers)",
               (int)(runlen > 128 ? 128 : runlen), run, (unsigned long long)re->open);
      return refuse(q, req, RV_QUOTA_RUN_WATCHERS, msg);
    }
  }
  /* admitted: take the counts */
  t->counted = 1;
  q->open++;
  if (q->cfg.max_watchers_per_client > 0 && peer != NULL && peer[0] != '\0') {
    ce = ce != NULL ? ce : table_get(&q->clients, peer, strlen(peer), 1);
    ce->open++;
    t->client = ce;
  }
  if (q->cfg.max_run_watchers > 0 && runlen > 0) {
    re = re != NULL ? re : table_get(&q->runs, run, runlen, 1);
    re->open++;
    t->run = re;
  }
  return 0;
}

void rv_quota_release(struct rv_quota *q, struct rv_quota_ticket *t)
{
  if (q == NULL || t == NULL)
    return;
  if (t->counted && q->open > 0)
    q->open--;
  if (t->client != NULL)
    table_put(&q->clients, t->client);
  if (t->run != NULL)
    table_put(&q->runs, t->run);
  memset(t, 0, sizeof(*t));
}

void rv_quota_metrics(const struct rv_quota *q, struct mu_buf *out)
{
  if (q == NULL)
    return;
  mu_buf_puts(out, "# HELP musterd_quota_refused_total Requests refused by a quota.\n"
                   "# TYPE musterd_quota_refused_total counter\n");
  for (int i = 0; i < RV_QUOTA_NKINDS; i++)
    mu_buf_printf(out, "musterd_quota_refused_total{quota=\"%s\"} %llu\n", kind_names[i],
                  (unsigned long long)q->refused[i]);
  mu_buf_printf(out,
                "# HELP musterd_quota_long_polls_open Long polls counted against the quotas.\n"
                "# TYPE musterd_quota_long_polls_open gauge\n"
                "musterd_quota_long_polls_open %llu\n",
                (unsigned long long)q->open);
}
