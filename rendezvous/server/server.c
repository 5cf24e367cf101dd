/* The server context: configuration, listener, connection list, idle sweep, modules,
 * graceful shutdown and the socket-less feed used by tests and the fuzzer.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "muster/errno.h"

#include "alloc.h"
#include "log.h"
#include "server.h"
#include "tls.h"

void rv_server_config_init(struct rv_server_config *cfg)
{
  memset(cfg, 0, sizeof(*cfg));
  cfg->listen_host = "127.0.0.1";
  cfg->listen_port = 2379;
  cfg->name = "musterd";
  cfg->max_connections = 10000;
  cfg->max_connections_per_address = 1000;
  cfg->max_body_bytes_per_address = 8 * 1024 * 1024;
  cfg->max_buffer_bytes = (size_t)256 << 20;
  cfg->max_buffer_bytes_per_client = (size_t)32 << 20;
  cfg->client_prefix_v4 = 32;
  cfg->client_prefix_v6 = 64;
  cfg->max_body_bytes = 1024 * 1024;
  cfg->max_header_bytes = 16 * 1024;
  cfg->max_url_bytes = 8 * 1024;
  cfg->max_output_bytes = 8 * 1024 * 1024;
  cfg->idle_timeout_ms = 300000;
  cfg->header_timeout_ms = 10000;
  cfg->body_timeout_ms = 60000;
  cfg->write_timeout_ms = 60000;
}

static char *dup_or_null(const char *s)
{
  return s ? mu_strdup(s) : NULL;
}

struct rv_server *rv_server_create(uv_loop_t *loop, const struct rv_server_config *cfg)
{
  struct rv_server *srv = mu_calloc(1, sizeof(*srv));
  srv->loop = loop;
  srv->cfg = *cfg;
  srv->host = mu_strdup(cfg->listen_host ? cfg->listen_host : "127.0.0.1");
  srv->advertise_url = dup_or_null(cfg->advertise_url);
  srv->name = mu_strdup(cfg->name ? cfg->name : "musterd");
  srv->cfg.listen_host = srv->host;
  srv->cfg.advertise_url = srv->advertise_url;
  srv->cfg.name = srv->name;
  srv->cfg.allowed_origins = NULL;
  if (cfg->nallowed_origins > 0) {
    char **o = mu_calloc(cfg->nallowed_origins, sizeof(*o));
    for (size_t i = 0; i < cfg->nallowed_origins; i++)
      o[i] = mu_strdup(cfg->allowed_origins[i]);
    srv->cfg.allowed_origins = (const char **)o;
  }
  if (srv->cfg.max_connections == 0)
    srv->cfg.max_connections = 1;
  if (srv->cfg.max_connections_per_address == 0)
    srv->cfg.max_connections_per_address = 1;
  if (srv->cfg.max_body_bytes_per_address < srv->cfg.max_body_bytes)
    srv->cfg.max_body_bytes_per_address = srv->cfg.max_body_bytes; /* one whole body fits */
  if (srv->cfg.max_output_bytes < 65536)
    srv->cfg.max_output_bytes = 65536;
  if (srv->cfg.max_buffer_bytes < ((size_t)1 << 20))
    srv->cfg.max_buffer_bytes = (size_t)1 << 20;
  if (srv->cfg.max_buffer_bytes_per_client > srv->cfg.max_buffer_bytes)
    srv->cfg.max_buffer_bytes_per_client = srv->cfg.max_buffer_bytes;
  if (srv->cfg.client_prefix_v4 == 0 || srv->cfg.client_prefix_v4 > 32)
    srv->cfg.client_prefix_v4 = 32;
  if (srv->cfg.client_prefix_v6 == 0 || srv->cfg.client_prefix_v6 > 128)
    srv->cfg.client_prefix_v6 = 64;
  if (srv->cfg.max_header_bytes < 256)
    srv->cfg.max_header_bytes = 256;
  if (srv->cfg.max_header_bytes > 60000) /* header offsets are 16-bit */
    srv->cfg.max_header_bytes = 60000;
  if (srv->cfg.max_url_bytes > srv->cfg.max_header_bytes)
    srv->cfg.max_url_bytes = srv->cfg.max_header_bytes;
  mu_list_init(&srv->conns);
  mu_list_init(&srv->held);
  mu_list_init(&srv->holds);
  mu_htab_init(&srv->addrs, 0);
  uv_timer_init(loop, &srv->sweep);
  srv->sweep.data = srv;
  srv->refs++;
  uv_timer_init(loop, &srv->resume);
  srv->resume.data = srv;
  srv->refs++;
  rv_status_register(srv);
  rv_ui_register(srv);
  rv_origin_setup(srv);
  return srv;
}

const struct rv_server_config *rv_server_config(const struct rv_server *srv)
{
  return &srv->cfg;
}

const char *rv_server_date(struct rv_server *srv)
{
  time_t now = time(NULL);
  if ((uint64_t)now != srv->date_sec) {
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(srv->date, sizeof(srv->date), "%a, %d %b %Y %H:%M:%S GMT", &tm);
    srv->date_sec = (uint64_t)now;
  }
  return srv->date;
}

static void on_connection(uv_stream_t *s, int status)
{
  struct rv_server *srv = s->data;
  if (status < 0) {
    mu_log(MU_LOG_WARN, "accept failed: %s", uv_strerror(status));
    return;
  }
  if (srv->closing)
    return;
  rv_conn_accept(srv);
}

static struct rv_conn *conn_at(struct mu_list_node *x)
{
  return MU_CONTAINER_OF(x, struct rv_conn, link);
}

static void on_sweep(uv_timer_t *t)
{
  struct rv_server *srv = t->data;
  uint64_t now = uv_now(srv->loop);
  if (srv->closing) {
    if (now >= srv->drain_deadline) {
      for (struct mu_list_node *x = srv->conns.head; x != NULL; x = x->next)
        rv_conn_close(conn_at(x));
    }
    return;
  }
  for (struct mu_list_node *x = srv->conns.head; x != NULL; x = x->next) {
    struct rv_conn *c = conn_at(x);
    if (c->flags & CONN_CLOSING)
      continue;
    /* every phase has a deadline: headers, body (c->deadline), a write making no progress */
    if ((c->deadline != 0 && now >= c->deadline) ||
        (c->writing && srv->cfg.write_timeout_ms > 0 &&
         now - c->write_since >= srv->cfg.write_timeout_ms)) {
      srv->conns_timed_out++;
      rv_conn_close(c);
      continue;
    }
    if (c->state != REQ_IDLE || c->writing || srv->cfg.idle_timeout_ms == 0)
      continue;
    if (now - c->last_active >= srv->cfg.idle_timeout_ms) {
      srv->conns_idle_closed++;
      rv_conn_close(c);
    }
  }
}

int rv_server_listen(struct rv_server *srv)
{
  struct sockaddr_storage ss;
  int rc = 0;
  memset(&ss, 0, sizeof(ss));
  if (strchr(srv->host, ':') != NULL)
    rc = uv_ip6_addr(srv->host, srv->cfg.listen_port, (struct sockaddr_in6 *)&ss);
  else
    rc = uv_ip4_addr(srv->host, srv->cfg.listen_port, (struct sockaddr_in *)&ss);
  if (rc != 0)
    return UV_EINVAL;
  rc = uv_tcp_init(srv->loop, &srv->listener);
  if (rc != 0)
    return rc;
  srv->listener.data = srv;
  srv->listening = 1;
  srv->refs++;
  rc = uv_tcp_bind(&srv->listener, (const struct sockaddr *)&ss, 0);
  if (rc == 0)
    rc = uv_listen((uv_stream_t *)&srv->listener, 1024, on_connection);
  if (rc != 0)
    return rc;
  struct sockaddr_storage bound;
  int len = sizeof(bound);
  rc = uv_tcp_getsockname(&srv->listener, (struct sockaddr *)&bound, &len);
  if (rc != 0)
    return rc;
  if (bound.ss_family == AF_INET6)
    srv->port = ntohs(((struct sockaddr_in6 *)&bound)->sin6_port);
  else
    srv->port = ntohs(((struct sockaddr_in *)&bound)->sin_port);
  const char *scheme = srv->tls != NULL ? "https" : "http";
  mu_free(srv->url);
  if (srv->advertise_url != NULL)
    srv->url = mu_strdup(srv->advertise_url);
  else if (strchr(srv->host, ':') != NULL)
    srv->url = mu_asprintf("%s://[%s]:%d", scheme, srv->host, srv->port);
  else
    srv->url = mu_asprintf("%s://%s:%d", scheme, srv->host, srv->port);
  uint64_t every = 1000; /* the sweep runs at least once a second: the phase deadlines */
  uint64_t t[4] = {srv->cfg.idle_timeout_ms, srv->cfg.header_timeout_ms, srv->cfg.body_timeout_ms,
                   srv->cfg.write_timeout_ms};
  for (int i = 0; i < 4; i++)
    if (t[i] > 0 && t[i] / 2 < every)
      every = t[i] / 2;
  if (every < 10)
    every = 10;
  uv_timer_start(&srv->sweep, on_sweep, every, every);
  return 0;
}

int rv_server_port(const struct rv_server *srv)
{
  return srv->port;
}

const char *rv_server_url(const struct rv_server *srv)
{
  if (srv->url != NULL)
    return srv->url;
  return "http://127.0.0.1:2379";
}

uv_loop_t *rv_server_loop(const struct rv_server *srv)
{
  return srv->loop;
}

int rv_server_closing(const struct rv_server *srv)
{
  return srv->closing;
}

int rv_server_set_tls(struct rv_server *srv, struct rv_tls *tls)
{
  if (srv->tls != NULL)
    return MU_EEXIST;
  srv->tls = tls;
  return 0;
}

int rv_server_set_gate(struct rv_server *srv, const struct rv_gate *gate)
{
  if (srv->has_gate)
    return MU_EEXIST;
  srv->gate = *gate;
  srv->has_gate = 1;
  const struct rv_cred *anyone = NULL;
  srv->auth_required = gate->lookup != NULL && !gate->lookup(gate->data, NULL, &anyone);
  return 0;
}

void rv_server_set_barrier(struct rv_server *srv, const struct rv_barrier *b)
{
  if (b != NULL) {
    srv->barrier = *b;
    return;
  }
  memset(&srv->barrier, 0, sizeof(srv->barrier));
  rv_server_durable(srv, UINT64_MAX);
}

void rv_server_durable(struct rv_server *srv, uint64_t done)
{
  /* a held connection waits for a record past `durable`: none can go until it moves (this runs
   * on every loop turn while a group commit gathers writers) */
  if (done <= srv->durable && srv->barrier.need != NULL)
    return;
  if (done > srv->durable)
    srv->durable = done;
  struct mu_list_node *next = NULL;
  for (struct mu_list_node *x = srv->held.head; x != NULL; x = next) {
    next = x->next;
    struct rv_conn *c = MU_CONTAINER_OF(x, struct rv_conn, held_link);
    if (c->out_need <= srv->durable || srv->barrier.need == NULL)
      rv_conn_release_held(c);
  }
  for (struct mu_list_node *x = srv->holds.head; x != NULL; x = next) {
    next = x->next;
    struct rv_hold *h = MU_CONTAINER_OF(x, struct rv_hold, link);
    if (h->need <= srv->durable || srv->barrier.need == NULL) {
      rv_server_unhold(srv, h);
      h->release(h);
    }
  }
}

uint64_t rv_server_barrier_need(struct rv_server *srv)
{
  const struct rv_barrier *b = &srv->barrier;
  return b->need != NULL && !srv->barrier_off ? b->need(b->data) : 0;
}

int rv_server_is_durable(const struct rv_server *srv, uint64_t need)
{
  return need <= srv->durable || srv->barrier.need == NULL;
}

void rv_server_hold(struct rv_server *srv, struct rv_hold *h)
{
  if (h->held)
    return;
  h->held = 1;
  srv->output_held++;
  mu_list_push_back(&srv->holds, &h->link);
}

void rv_server_unhold(struct rv_server *srv, struct rv_hold *h)
{
  if (!h->held)
    return;
  h->held = 0;
  mu_list_remove(&srv->holds, &h->link);
}

const char *rv_server_read_only(struct rv_server *srv)
{
  const struct rv_barrier *b = &srv->barrier;
  return b->read_only != NULL ? b->read_only(b->data) : NULL;
}

uint64_t rv_server_read_index(struct rv_server *srv, const char *key)
{
  const struct rv_barrier *b = &srv->barrier;
  return b->read_index != NULL ? b->read_index(b->data, key) : 0;
}

void rv_server_unheld(struct rv_server *srv, void (*fn)(void *data), void *data)
{
  int was = srv->barrier_off;
  srv->barrier_off = 1;
  fn(data);
  srv->barrier_off = was;
}

int rv_server_add_module(struct rv_server *srv, const struct rv_module *mod)
{
  if (rv_server_module_data(srv, mod->name) != NULL || srv->nmodules >= RV_MAX_MODULES)
    return MU_EEXIST;
  srv->modules[srv->nmodules++] = *mod;
  return 0;
}

void *rv_server_module_data(const struct rv_server *srv, const char *name)
{
  for (size_t i = 0; i < srv->nmodules; i++)
    if (strcmp(srv->modules[i].name, name) == 0)
      return srv->modules[i].data;
  return NULL;
}

/* ---------------------------------------------------------------------------------------------
 * Shutdown
 */

static void server_free(struct rv_server *srv)
{
  rv_server_closed_cb *cb = srv->closed_cb;
  void *data = srv->closed_data;
  mu_htab_release(&srv->addrs); /* empty: every connection gave its share back */
  mu_free(srv->routes);
  mu_free(srv->order);
  mu_free(srv->host);
  mu_free(srv->advertise_url);
  mu_free(srv->name);
  mu_free(srv->url);
  rv_origin_release(srv);
  for (size_t i = 0; i < srv->cfg.nallowed_origins; i++)
    mu_free((char *)srv->cfg.allowed_origins[i]);
  mu_free((void *)srv->cfg.allowed_origins);
  /* after the last connection: their TLS sessions and gate tickets use these */
  if (srv->gate.destroy != NULL)
    srv->gate.destroy(srv->gate.data);
  rv_tls_free(srv->tls);
  mu_free(srv);
  if (cb != NULL)
    cb(data);
}

void rv_server_ref(struct rv_server *srv)
{
  srv->refs++;
}

void rv_server_unref(struct rv_server *srv)
{
  if (--srv->refs == 0 && srv->closing)
    server_free(srv);
}

static void on_handle_closed(uv_handle_t *h)
{
  rv_server_unref(h->data);
}

static void close_sweep(struct rv_server *srv)
{
  if (!srv->resume_closed) {
    srv->resume_closed = 1;
    uv_close((uv_handle_t *)&srv->resume, on_handle_closed);
  }
  if (srv->sweep_closed)
    return;
  srv->sweep_closed = 1;
  uv_close((uv_handle_t *)&srv->sweep, on_handle_closed);
}

static void on_resume(uv_timer_t *t)
{
  struct rv_server *srv = t->data;
  /* take the whole queue: resumed connections may queue again (for the next round) */
  struct rv_conn *c = srv->resume_head;
  srv->resume_head = NULL;
  while (c != NULL) {
    struct rv_conn *next = c->resume_next;
    c->resume_next = NULL;
    c->flags &= ~CONN_RESUME_QUEUED;
    rv_conn_resume(c);
    c = next;
  }
}

void rv_server_queue_resume(struct rv_server *srv, struct rv_conn *c)
{
  if ((c->flags & CONN_RESUME_QUEUED) || srv->resume_closed)
    return;
  c->flags |= CONN_RESUME_QUEUED;
  c->resume_next = srv->resume_head;
  srv->resume_head = c;
  if (!uv_is_active((uv_handle_t *)&srv->resume))
    uv_timer_start(&srv->resume, on_resume, 0, 0);
}

void rv_server_unqueue_resume(struct rv_server *srv, struct rv_conn *c)
{
  struct rv_conn **pp = &srv->resume_head;
  while (*pp != NULL && *pp != c)
    pp = &(*pp)->resume_next;
  if (*pp == c)
    *pp = c->resume_next;
  c->flags &= ~CONN_RESUME_QUEUED;
}

void rv_server_conn_closed(struct rv_server *srv, struct rv_conn *c)
{
  mu_list_remove(&srv->conns, &c->link);
  if (srv->closing && srv->conns.head == NULL)
    close_sweep(srv);
  rv_server_unref(srv);
}

void rv_server_close(struct rv_server *srv, rv_server_closed_cb *cb, void *data)
{
  if (srv->closing)
    return;
  srv->closing = 1;
  srv->closed_cb = cb;
  srv->closed_data = data;
  srv->refs++; /* held until the end of this function */
  if (srv->listening)
    uv_close((uv_handle_t *)&srv->listener, on_handle_closed);
  /* give queued replies a short while to drain, then force (on_sweep) */
  srv->drain_deadline = uv_now(srv->loop) + 1000;
  struct mu_list_node *next = NULL;
  for (struct mu_list_node *x = srv->conns.head; x != NULL; x = next) {
    next = x->next;
    rv_conn_shutdown(conn_at(x));
  }
  for (size_t i = 0; i < srv->nmodules; i++)
    if (srv->modules[i].close != NULL)
      srv->modules[i].close(srv, srv->modules[i].data);
  if (srv->conns.head != NULL)
    uv_timer_start(&srv->sweep, on_sweep, 100, 100);
  else
    close_sweep(srv);
  rv_server_unref(srv);
}

/* ---------------------------------------------------------------------------------------------
 * Without sockets
 */

int rv_server_feed(struct rv_server *srv, const char *data, size_t len, struct mu_buf *out)
{
  struct rv_conn *c = rv_conn_new_fake(srv, out);
  rv_conn_feed_fake(c, data, len, 1);
  int rc = c->fake_out == NULL ? MU_E2BIG : 0;
  rv_conn_free_fake(c);
  return rc;
}

struct rv_conn *rv_server_fake_open(struct rv_server *srv, struct mu_buf *out)
{
  return rv_conn_new_fake(srv, out);
}

int rv_server_fake_send(struct rv_conn *c, const char *data, size_t len)
{
  rv_conn_feed_fake(c, data, len, 0);
  return c->fake_out == NULL ? MU_E2BIG : 0;
}

void rv_server_fake_close(struct rv_conn *c)
{
  if (c != NULL)
    rv_conn_free_fake(c);
}
