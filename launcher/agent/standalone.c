/* muster agent --standalone: an embedded musterd on its own thread and loop, listening on a
 * free loopback port, so that a single-node job needs no separate server (as torchrun's
 * --standalone starts a c10d store). */
#include <stdio.h>
#include <string.h>

#include <uv.h>

#include "muster/errno.h"

#include "agent.h"
#include "alloc.h"
#include "musterd/embed.h"

struct mu_agent_standalone {
  uv_thread_t thread;
  uv_loop_t loop;
  uv_async_t stop;
  uv_sem_t ready;
  struct rv_server *srv;
  const char *host; /* borrowed until the server listens */
  int port;
  int rc;
};

static void on_stop(uv_async_t *a)
{
  struct mu_agent_standalone *s = a->data;
  rv_server_close(s->srv, NULL, NULL);
  uv_close((uv_handle_t *)&s->stop, NULL);
}

static void server_main(void *arg)
{
  struct mu_agent_standalone *s = arg;
  struct rv_server_config cfg;
  uv_loop_init(&s->loop);
  rv_server_config_init(&cfg);
  cfg.listen_host = s->host;
  cfg.listen_port = s->port;
  s->srv = rv_server_new(&s->loop, &cfg);
  s->rc = rv_server_listen(s->srv);
  uv_async_init(&s->loop, &s->stop, on_stop);
  s->stop.data = s;
  if (s->rc == 0)
    s->port = rv_server_port(s->srv);
  uv_sem_post(&s->ready);
  if (s->rc != 0) {
    rv_server_close(s->srv, NULL, NULL);
    uv_close((uv_handle_t *)&s->stop, NULL);
  }
  uv_run(&s->loop, UV_RUN_DEFAULT);
  uv_loop_close(&s->loop);
}

int mu_agent_standalone_start(struct mu_agent_standalone **out, char *ep, size_t eplen)
{
  return mu_agent_standalone_listen(out, "127.0.0.1", 0, ep, eplen);
}

int mu_agent_standalone_listen(struct mu_agent_standalone **out, const char *host, int port,
                               char *ep, size_t eplen)
{
  struct mu_agent_standalone *s = mu_calloc(1, sizeof(*s));
  *out = NULL;
  s->host = host;
  s->port = port;
  uv_sem_init(&s->ready, 0);
  if (uv_thread_create(&s->thread, server_main, s) != 0) {
    uv_sem_destroy(&s->ready);
    mu_free(s);
    return MU_EIO;
  }
  uv_sem_wait(&s->ready);
  if (s->rc != 0) {
    int rc = s->rc;
    uv_thread_join(&s->thread);
    uv_sem_destroy(&s->ready);
    mu_free(s);
    return rc;
  }
  snprintf(ep, eplen, "%s:%d", strcmp(host, "0.0.0.0") == 0 ? "127.0.0.1" : host, s->port);
  *out = s;
  return 0;
}

void mu_agent_standalone_stop(struct mu_agent_standalone *s)
{
  if (s == NULL)
    return;
  uv_async_send(&s->stop);
  uv_thread_join(&s->thread);
  uv_sem_destroy(&s->ready);
  mu_free(s);
}
