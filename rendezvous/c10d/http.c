/* The c10d module: registration, shutdown, /metrics lines, and the HTTP view of the keys by
 * run (the status page and `muster rdzv` read it):
 *   GET /v1/c10d            the listener, counts, and every run's keys (torchrun names them
 *                           torch.rendezvous.<run_id> for its state and
 *                           torch.rendezvous.<run_id>.<round>/... for the round's keys)
 *   GET /v1/c10d/{run_id}   one run's keys: name, bytes, modified index, short values
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "muster/errno.h"

#include "alloc.h"
#include "c10d_int.h"
#include "json.h"
#include "v2.h"

void c10d_config_init(struct c10d_config *cfg)
{
  cfg->max_value_bytes = C10D_MAX_VALUE_DEFAULT;
  cfg->max_keys = C10D_MAX_KEYS_DEFAULT;
  cfg->max_store_bytes = C10D_MAX_STORE_DEFAULT;
  cfg->run_gc_ms = C10D_RUN_GC_DEFAULT_MS;
}

static struct c10d *module_of(const struct rv_server *srv)
{
  return rv_server_module_data(srv, "c10d");
}

/* ---------------------------------------------------------------------------------------------
 * Keys by run
 */

#define VALUE_SHOWN 256 /* /v1/c10d/{run_id} shows values up to this many bytes */

struct key_ref {
  char *key; /* decoded */
  size_t klen;
  const char *run; /* into key */
  size_t run_len;
  long round; /* -1: the run's state key, or no round */
  const struct v2_node *n;
};

static int cmp_ref(const void *a, const void *b)
{
  const struct key_ref *x = a, *y = b;
  if ((x->run == NULL) != (y->run == NULL)) /* keys of no run last */
    return x->run == NULL ? 1 : -1;
  if (x->run == NULL)
    return strcmp(x->key, y->key);
  size_t n = x->run_len < y->run_len ? x->run_len : y->run_len;
  int c = memcmp(x->run, y->run, n);
  if (c != 0 || x->run_len != y->run_len)
    return c != 0 ? c : x->run_len < y->run_len ? -1 : 1;
  return strcmp(x->key, y->key);
}

/* Where key k belongs: its run (NULL: no torchrun run) and round (gc.c reads keys the same). */
static void classify(struct key_ref *r)
{
  if (!c10d_key_run(r->key, r->klen, &r->run, &r->run_len, &r->round)) {
    r->run = NULL;
    r->run_len = 0;
  }
}

/* Every c10d key, decoded and classified, sorted by run. Free with refs_free(). */
static struct key_ref *collect(struct c10d *m, size_t *count)
{
  struct v2_node *d = v2_store_lookup(m->store, C10D_DIR);
  size_t n = d != NULL && d->is_dir ? d->nchildren : 0, k = 0;
  struct key_ref *refs = mu_calloc(n + 1, sizeof(*refs));
  struct mu_buf key = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  for (size_t i = 0; i < n; i++) {
    const struct v2_node *c = d->children[i];
    const char *name = strrchr(c->hn.key, '/') + 1;
    if (c->is_dir || c10d_key_decode(name, strlen(name), &key) != 0)
      continue;
    refs[k].klen = key.len;
    refs[k].key = mu_buf_detach(&key);
    refs[k].n = c;
    classify(&refs[k]);
    k++;
  }
  mu_buf_release(&key);
  qsort(refs, k, sizeof(*refs), cmp_ref);
  *count = k;
  return refs;
}

static void refs_free(struct key_ref *refs, size_t n)
{
  for (size_t i = 0; i < n; i++)
    mu_free(refs[i].key);
  mu_free(refs);
}

/* {"run_id":..,"keys":N,"bytes":B,"round":R,"state":bool,"modified_index":I,"idle_ms":MS}
 * for refs[i..j) (idle_ms: since its last write; -1 when musterd has seen none). */
static void put_run(struct c10d *m, struct mu_buf *b, const struct key_ref *refs, size_t i,
                    size_t j)
{
  uint64_t bytes = 0, idx = 0;
  long round = -1;
  int state = 0;
  for (size_t x = i; x < j; x++) {
    bytes += refs[x].n->value_len;
    if (refs[x].n->modified_index > idx)
      idx = refs[x].n->modified_index;
    if (refs[x].round > round)
      round = refs[x].round;
    if (refs[x].round < 0 && strchr(refs[x].run, '/') == NULL)
      state = 1;
  }
  mu_buf_puts(b, "{\"run_id\":");
  mu_json_str(b, refs[i].run, refs[i].run_len);
  mu_buf_printf(b,
                ",\"keys\":%zu,\"bytes\":%llu,\"round\":%ld,\"state\":%s,"
                "\"modified_index\":%llu,\"idle_ms\":%lld}",
                j - i, (unsigned long long)bytes, round, state ? "true" : "false",
                (unsigned long long)idx,
                (long long)c10d_gc_idle_ms(m, refs[i].run, refs[i].run_len));
}

/* GET /v1/c10d. A credential with scopes sees, and has counted, only the runs it may read (and
 * the keys of no run when it may read their dir). */
static void c10d_overview(struct rv_req *req)
{
  struct c10d *m = module_of(req->srv);
  size_t n = 0, other = 0, hidden = 0;
  struct key_ref *refs = collect(m, &n);
  int see_other = rv_cred_allows(req->cred, RV_SCOPE_KEY, C10D_DIR, strlen(C10D_DIR), RV_READ);
  struct mu_buf runs = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  for (size_t i = 0; i < n;) {
    size_t j = i + 1;
    if (refs[i].run == NULL) {
      other += see_other;
      hidden += !see_other;
      i = j;
      continue;
    }
    while (j < n && refs[j].run != NULL && refs[j].run_len == refs[i].run_len &&
           memcmp(refs[j].run, refs[i].run, refs[i].run_len) == 0)
      j++;
    if (!rv_cred_allows(req->cred, RV_SCOPE_RUN, refs[i].run, refs[i].run_len, RV_READ)) {
      hidden += j - i; /* runs outside the credential's scopes: neither listed nor counted */
      i = j;
      continue;
    }
    if (runs.len > 0)
      mu_buf_putc(&runs, ',');
    put_run(m, &runs, refs, i, j);
    i = j;
  }
  struct mu_buf b = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  mu_buf_puts(&b, "{\"listen\":");
  if (m->listening)
    mu_buf_printf(&b, "\"%s:%d\"", m->host, m->port);
  else
    mu_buf_puts(&b, "null");
  mu_buf_printf(&b, ",\"keys\":%zu,\"connections\":%zu,\"waited_keys\":%llu,\"runs\":[", n - hidden,
                (size_t)m->conns.n, (unsigned long long)m->wait_keys);
  if (runs.len > 0)
    mu_buf_puts(&b, mu_buf_str(&runs));
  mu_buf_printf(&b, "],\"other_keys\":%zu}\n", other);
  refs_free(refs, n);
  mu_buf_release(&runs);
  rv_reply_take(req, 200, "application/json", NULL, &b);
  mu_buf_release(&b);
}

static void c10d_run(struct rv_req *req)
{
  struct c10d *m = module_of(req->srv);
  const char *run = req->vars[0];
  size_t n = 0, rl = strlen(run), shown = 0;
  struct key_ref *refs = collect(m, &n);
  struct mu_buf b = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  mu_buf_puts(&b, "{\"run_id\":");
  mu_json_str(&b, run, rl);
  mu_buf_puts(&b, ",\"keys\":[");
  for (size_t i = 0; i < n; i++) {
    if (refs[i].run == NULL || refs[i].run_len != rl || memcmp(refs[i].run, run, rl) != 0)
      continue;
    const struct v2_node *k = refs[i].n;
    mu_buf_puts(&b, shown++ ? ",{\"key\":" : "{\"key\":");
    mu_json_str(&b, refs[i].key, refs[i].klen);
    mu_buf_printf(&b, ",\"round\":%ld,\"bytes\":%u,\"modified_index\":%llu", refs[i].round,
                  (unsigned)k->value_len, (unsigned long long)k->modified_index);
    if (k->value_len <= VALUE_SHOWN) {
      mu_buf_puts(&b, ",\"value\":");
      mu_json_str(&b, k->value, k->value_len);
    }
    mu_buf_putc(&b, '}');
  }
  mu_buf_puts(&b, "]}\n");
  refs_free(refs, n);
  if (shown == 0) {
    mu_buf_release(&b);
    rv_reply_error(req, 404, NULL, "no_such_run", "no c10d key of this run", NULL);
    return;
  }
  rv_reply_take(req, 200, "application/json", NULL, &b);
  mu_buf_release(&b);
}

/* A credential's scopes: a run's keys are the run's (runs=GLOB), as for /v1/runs; the keys of no
 * run are the v2 dir they live in (keys=/_c10d or above). */
static int c10d_refuse(struct rv_req *req, const struct rv_refusal *r)
{
  if (r->kind != RV_REFUSE_FORBIDDEN)
    return 0; /* the server words the others */
  rv_reply_error(req, 403, NULL, "forbidden", r->message, NULL);
  return 1;
}

static int c10d_target(struct rv_req *req, struct rv_target *t)
{
  if (req->nvars == 0)
    return 0; /* /v1/c10d: the handler lists what the credential may read */
  t->kind = RV_SCOPE_RUN;
  t->name = req->vars[0];
  t->len = strlen(req->vars[0]);
  t->access = RV_READ;
  return 1;
}

static const struct rv_api c10d_api = {"c10d", c10d_refuse, NULL, c10d_target};

static const struct rv_route c10d_routes[] = {
    {RV_GET, "/v1/c10d", RV_ROUTE_SLASH, c10d_overview, "c10d", &c10d_api},
    {RV_GET, "/v1/c10d/{run_id}", RV_ROUTE_REST, c10d_run, "c10d", &c10d_api},
    {0, NULL, 0, NULL, NULL, NULL},
};

/* ---------------------------------------------------------------------------------------------
 * The module
 */

static void c10d_metrics(struct rv_server *srv, void *data, struct mu_buf *b)
{
  (void)srv;
  struct c10d *m = data;
  mu_buf_printf(b,
                "# HELP musterd_c10d_connections Open TCPStore (c10d) connections.\n"
                "# TYPE musterd_c10d_connections gauge\nmusterd_c10d_connections %zu\n"
                "# HELP musterd_c10d_connections_accepted_total TCPStore connections accepted, "
                "by protocol (legacy: torch <= 2.0; v2: VALIDATE first).\n"
                "# TYPE musterd_c10d_connections_accepted_total counter\n"
                "musterd_c10d_connections_accepted_total %llu\n"
                "musterd_c10d_connections_protocol_total{protocol=\"legacy\"} %llu\n"
                "musterd_c10d_connections_protocol_total{protocol=\"v2\"} %llu\n"
                "# HELP musterd_c10d_waited_keys Keys waited on now (WAIT, watch_key).\n"
                "# TYPE musterd_c10d_waited_keys gauge\nmusterd_c10d_waited_keys %llu\n"
                "# HELP musterd_c10d_wait_bytes What the waited keys hold (in the memory "
                "budget: --max-buffer-bytes, --max-buffer-bytes-per-client).\n"
                "# TYPE musterd_c10d_wait_bytes gauge\nmusterd_c10d_wait_bytes %llu\n"
                "# HELP musterd_c10d_waits_woken_total WAITs answered after waiting.\n"
                "# TYPE musterd_c10d_waits_woken_total counter\n"
                "musterd_c10d_waits_woken_total %llu\n"
                "# HELP musterd_c10d_parked_total Writes that waited for the store (a disk "
                "error, a GET in slices).\n"
                "# TYPE musterd_c10d_parked_total counter\nmusterd_c10d_parked_total %llu\n"
                "# HELP musterd_c10d_yielded_total Turns a connection's pipelined frames "
                "yielded to other clients (their share of a loop turn ran).\n"
                "# TYPE musterd_c10d_yielded_total counter\nmusterd_c10d_yielded_total %llu\n"
                "# HELP musterd_c10d_runs_forgotten_total torchrun runs whose keys were "
                "deleted after --c10d-run-gc-seconds without a write.\n"
                "# TYPE musterd_c10d_runs_forgotten_total counter\n"
                "musterd_c10d_runs_forgotten_total %llu\n"
                "# HELP musterd_c10d_keys_forgotten_total Their keys.\n"
                "# TYPE musterd_c10d_keys_forgotten_total counter\n"
                "musterd_c10d_keys_forgotten_total %llu\n"
                "# HELP musterd_c10d_queries_total TCPStore queries run, by query.\n"
                "# TYPE musterd_c10d_queries_total counter\n",
                (size_t)m->conns.n, (unsigned long long)m->accepted,
                (unsigned long long)m->by_proto[C10D_PROTO_LEGACY],
                (unsigned long long)m->by_proto[C10D_PROTO_V2], (unsigned long long)m->wait_keys,
                (unsigned long long)m->wait_bytes, (unsigned long long)m->waits_woken,
                (unsigned long long)m->parked_total, (unsigned long long)m->yielded_total,
                (unsigned long long)m->runs_forgotten, (unsigned long long)m->keys_forgotten);
  for (int i = 0; i < C10D_OP_COUNT; i++)
    if (m->queries[i] > 0)
      mu_buf_printf(b, "musterd_c10d_queries_total{query=\"%s\"} %llu\n",
                    c10d_op_name((enum c10d_op)i), (unsigned long long)m->queries[i]);
  mu_buf_puts(b, "# HELP musterd_c10d_closed_total TCPStore connections closed, by reason.\n"
                 "# TYPE musterd_c10d_closed_total counter\n");
  for (int i = 0; i < C10D_R_COUNT; i++)
    if (m->closed[i] > 0)
      mu_buf_printf(b, "musterd_c10d_closed_total{reason=\"%s\"} %llu\n",
                    c10d_reason_name((enum c10d_reason)i), (unsigned long long)m->closed[i]);
}

void c10d_free(struct c10d *m)
{
  c10d_gc_release(m);
  c10d_allow_free(&m->allow);
  mu_htab_release(&m->addrs);
  c10d_queues_release(m);
  mu_buf_release(&m->path);
  mu_buf_release(&m->path2);
  c10d_watch_unstash(m);
  mu_free(m);
}

static void c10d_module_close(struct rv_server *srv, void *data)
{
  (void)srv;
  struct c10d *m = data;
  c10d_shutdown(m); /* m is freed by the last handle's close */
}

int c10d_register(struct rv_server *srv, const struct c10d_config *cfg)
{
  struct v2_store *store = v2_store_of(srv);
  if (store == NULL)
    return MU_ENOENT;
  if (module_of(srv) != NULL)
    return MU_EEXIST;
  struct c10d *m = mu_calloc(1, sizeof(*m));
  m->srv = srv;
  m->store = store;
  m->cfg = *cfg;
  if (m->cfg.max_value_bytes == 0)
    m->cfg.max_value_bytes = C10D_MAX_VALUE_DEFAULT;
  /* no value is taken that cannot be read back: a GET answers its u64 length and its bytes, and
   * unsent answers are bounded by --max-output-bytes */
  size_t out_max = rv_server_config(srv)->max_output_bytes;
  if (out_max > 8 && m->cfg.max_value_bytes > out_max - 8)
    m->cfg.max_value_bytes = out_max - 8;
  c10d_limits_init(&m->lim, m->cfg.max_value_bytes);
  mu_list_init(&m->conns);
  mu_list_init(&m->parked);
  mu_htab_init(&m->addrs, 0);
  mu_htab_init(&m->queues, 0);
  mu_htab_init(&m->runs, 0);
  mu_buf_init(&m->path, MU_BUF_UNBOUNDED);
  mu_buf_init(&m->path2, MU_BUF_UNBOUNDED);
  mu_buf_init(&m->stash_key, MU_BUF_UNBOUNDED);
  mu_buf_init(&m->stash_val, MU_BUF_UNBOUNDED);
  uv_timer_init(rv_server_loop(srv), &m->sweep);
  uv_timer_init(rv_server_loop(srv), &m->retry);
  uv_timer_init(rv_server_loop(srv), &m->gc);
  uv_idle_init(rv_server_loop(srv), &m->turn);
  mu_list_init(&m->ready);
  m->sweep.data = m->retry.data = m->gc.data = m->turn.data = m;
  c10d_ref(m);
  c10d_ref(m);
  c10d_ref(m);
  c10d_ref(m);
  struct rv_module mod = {"c10d", m, c10d_module_close, c10d_metrics};
  int rc = rv_server_add_module(srv, &mod);
  if (rc != 0) {
    /* every module slot is taken: nothing of the module runs */
    m->closing = 1;
    c10d_shutdown(m);
    return rc;
  }
  rv_server_add_routes(srv, c10d_routes);
  c10d_gc_start(m);
  return 0;
}

int c10d_set_run_gc_ms(struct rv_server *srv, uint64_t gc_ms)
{
  struct c10d *m = module_of(srv);
  if (m == NULL)
    return MU_ENOENT;
  m->cfg.run_gc_ms = gc_ms;
  uv_timer_stop(&m->gc);
  c10d_gc_start(m);
  return 0;
}

int c10d_set_allow(struct rv_server *srv, const char *list, char *err, size_t errlen)
{
  struct c10d *m = module_of(srv);
  if (m == NULL)
    return MU_ENOENT;
  return c10d_allow_parse(list, &m->allow, err, errlen) == 0 ? 0 : MU_EINVAL;
}

int c10d_listen(struct rv_server *srv, const char *host, int port)
{
  struct c10d *m = module_of(srv);
  return m == NULL ? MU_ENOENT : c10d_listen_on(m, host, port);
}

int c10d_port(const struct rv_server *srv)
{
  struct c10d *m = module_of(srv);
  return m != NULL && m->listening ? m->port : 0;
}
