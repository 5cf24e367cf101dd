/* The body of the embedding API (include/musterd/embed.h): the server core with every API
 * musterd serves. Above the etcd, rdzv and c10d layers, below main.c: a program that embeds
 * musterd (the launcher) links this and sees only embed.h. */
#include "musterd/embed.h"

#include "c10d.h"
#include "http.h"
#include "v1.h"
#include "v2.h"

struct rv_server *rv_server_new(uv_loop_t *loop, const struct rv_server_config *cfg)
{
  struct rv_server *srv = rv_server_create(loop, cfg);
  if (!cfg->no_v2) {
    v2_register(srv);
    struct c10d_config cc;
    c10d_config_init(&cc);
    if (cfg->c10d_max_value_bytes > 0)
      cc.max_value_bytes = cfg->c10d_max_value_bytes;
    if (cfg->c10d_max_keys > 0)
      cc.max_keys = cfg->c10d_max_keys;
    c10d_register(srv, &cc);
  }
  v1_register(srv);
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
