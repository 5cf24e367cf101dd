/* torchrun's c10d backend: --rdzv-endpoint HOST:PORT names a TCPStore. When a musterd serves it
 * (musterd --c10d-listen; docs/c10d.md), that port answers the reserved key musterd.http_url
 * with musterd's client URL (common/c10d_probe.c asks it), and the client moves onto the musterd
 * backend there (mu__client_become()): the agent runs on musterd's native /v1 API, the same
 * service torchrun's agents use through the TCPStore. Any other TCPStore (PyTorch's own, hosted
 * by a torchrun agent) is refused with what to use instead: muster agent runs its own
 * rendezvous protocol, which a bare TCPStore cannot serve.
 */
#include <stdio.h>
#include <string.h>

#include "muster/errno.h"

#include "alloc.h"
#include "c10d_probe.h"
#include "client_int.h"
#include "http_client.h"

#define PROBE_MS_MAX 10000 /* one probe; the agent's calls retry a failed one */

struct c10d {
  char host[256];
  int port;
};

static int c10d_open(struct mu_client *c, const char *endpoint)
{
  const char *e = strncmp(endpoint, "c10d://", 7) == 0 ? endpoint + 7 : endpoint;
  struct c10d *s = mu_calloc(1, sizeof(*s));
  int https = 0;
  if (mu_http_endpoint_parse(e, strlen(e), s->host, sizeof(s->host), &s->port, &https) != 0 ||
      https) {
    mu__client_say(c, "'%s' is not HOST:PORT of a TCPStore (a musterd's --c10d-listen port)",
                   endpoint);
    mu_free(s);
    return MU_EINVAL;
  }
  c->impl = s;
  return 0;
}

/* The endpoint with the scheme, as workers get it (MUSTER_RDZV_ENDPOINT): their clients pick
 * this backend from it and resolve it the same way. */
static int c10d_display(const char *endpoint, char **out, char *err, size_t n)
{
  const char *e = strncmp(endpoint, "c10d://", 7) == 0 ? endpoint + 7 : endpoint;
  char host[256];
  int port = 0, https = 0;
  if (mu_http_endpoint_parse(e, strlen(e), host, sizeof(host), &port, &https) != 0 || https) {
    snprintf(err, n, "'%s' is not HOST:PORT of a TCPStore (a musterd's --c10d-listen port)",
             endpoint);
    return MU_EINVAL;
  }
  *out = strchr(host, ':') != NULL ? mu_asprintf("c10d://[%s]:%d", host, port)
                                   : mu_asprintf("c10d://%s:%d", host, port);
  return 0;
}

static void c10d_close(struct mu_client *c)
{
  mu_free(c->impl);
  c->impl = NULL;
}

static int c10d_resolve(struct mu_client *c)
{
  struct c10d *s = c->impl;
  struct mu_buf url = MU_BUF_INIT(1024), err = MU_BUF_INIT(1024);
  char where[300];
  if (s == NULL)
    return MU_ECONN;
  snprintf(where, sizeof(where), "%s:%d", s->host, s->port);
  long t = c->timeout_ms < PROBE_MS_MAX ? c->timeout_ms : PROBE_MS_MAX;
  int rc = mu_c10d_probe(s->host, s->port, (int)t, &url, &err);
  if (rc == 0) {
    rc = mu__client_become(c, &mu__client_musterd_ops, mu_buf_str(&url));
  } else if (rc == MU_ENOENT) {
    mu__client_say(c,
                   "--rdzv-backend c10d: %s; muster agent needs a musterd there: start musterd "
                   "with --c10d-listen %s (then torchrun and muster agent share it), or point "
                   "--rdzv-endpoint at a musterd's HTTP port with --rdzv-backend muster, or use "
                   "--rdzv-backend static with --master-addr/--master-port, or etcd-v3",
                   mu_buf_str(&err), where);
    rc = MU_EPROTO;
  } else {
    mu__client_say(c, "--rdzv-backend c10d: %s (is a musterd with --c10d-listen %s running?)",
                   mu_buf_str(&err), where);
  }
  mu_buf_release(&url);
  mu_buf_release(&err);
  return rc;
}

/* Only the lifecycle and `resolve`: every call resolves first, and runs on musterd's ops. */
const struct mu_client_ops mu__client_c10d_ops = {
    .open = c10d_open,
    .close = c10d_close,
    .display = c10d_display,
    .resolve = c10d_resolve,
};
