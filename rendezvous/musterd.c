/* The body of the embedding API (include/musterd/embed.h): the server core with every API
 * musterd serves. Above the etcd, rdzv and c10d layers, below main.c: a program that embeds
 * musterd (the launcher) links this and sees only embed.h. */
#include "musterd/embed.h"

#include <stdint.h>

#include "buf.h"
#include "c10d.h"
#include "http.h"
#include "security.h"
#include "v1.h"
#include "v2.h"

struct rv_server *rv_server_new(uv_loop_t *loop, const struct rv_server_config *cfg)
{
  struct sec *sec = NULL;
  if (cfg->token_file != NULL || cfg->tls_cert_file != NULL || cfg->tls_key_file != NULL) {
    struct sec_config sc = {
        .token_file = cfg->token_file,
        .tls = {cfg->tls_cert_file, cfg->tls_key_file, cfg->tls_client_ca_file}};
    struct mu_buf err = MU_BUF_INIT(SIZE_MAX);
    int rc = sec_new(&sc, &sec, &err); /* the embedder's own file: it knows what went wrong */
    mu_buf_release(&err);
    if (rc != 0)
      return NULL;
  }
  struct rv_server *srv = rv_server_create(loop, cfg);
  if (!cfg->no_v2) {
    v2_register(srv);
    struct c10d_config cc;
    c10d_config_init(&cc);
    if (cfg->c10d_max_value_bytes > 0)
      cc.max_value_bytes = cfg->c10d_max_value_bytes;
    if (cfg->c10d_max_keys > 0)
      cc.max_keys = cfg->c10d_max_keys;
    if (cfg->c10d_max_store_bytes > 0)
      cc.max_store_bytes = cfg->c10d_max_store_bytes;
    c10d_register(srv, &cc);
  }
  v1_register(srv);
  if (sec != NULL)
    sec_attach(srv, sec); /* takes sec */
  return srv;
}

int rv_server_listen_c10d(struct rv_server *srv, const char *host, int port)
{
  return c10d_listen(srv, host, port);
}

int rv_server_c10d_port(const struct rv_server *srv)
{
  return c10d_port(srv);
}

void rv_server_on_run_event(struct rv_server *srv, rv_run_event_cb *cb, void *data)
{
  v1_events_listen(srv, cb, data);
}

char *rv_server_run_json(struct rv_server *srv, const char *run_id)
{
  struct mu_buf b = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  if (v1_run_json(srv, run_id, &b) != 0) {
    mu_buf_release(&b);
    return NULL;
  }
  return mu_buf_detach(&b);
}
