/* The body of the embedding API (include/musterd/embed.h): the server core with every API
 * musterd serves. Above the etcd and rdzv layers, below main.c: a program that embeds musterd
 * (the launcher) links this and sees only embed.h. */
#include "musterd/embed.h"

#include "buf.h"
#include "http.h"
#include "v1.h"
#include "v2.h"

struct rv_server *rv_server_new(uv_loop_t *loop, const struct rv_server_config *cfg)
{
  struct rv_server *srv = rv_server_create(loop, cfg);
  if (!cfg->no_v2)
    v2_register(srv);
  v1_register(srv);
  return srv;
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
