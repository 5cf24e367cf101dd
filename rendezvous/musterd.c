/* The body of the embedding API (include/musterd/embed.h): the server core with every API
 * musterd serves. Above the etcd and rdzv layers, below main.c: a program that embeds musterd
 * (the launcher) links this and sees only embed.h. */
#include "musterd/embed.h"

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
