/* The rendezvous backends: the one table (backends.h). A new backend is one row here and one
 * file with its struct mu_client_ops. */
#include <string.h>

#include "muster/client.h"

#include "alloc.h"
#include "client/backends.h"
#include "client_int.h"

static const char *const musterd_aliases[] = {"musterd", "etcd", "etcd-v2", NULL};
static const char *const etcd3_aliases[] = {"etcd3", NULL};

/* The first row with scheme NULL is what a bare HOST:PORT means. torchrun's etcd backends
 * ("etcd", "etcd-v2") name a musterd here: it serves etcd's v2 API as well. */
const struct mu_client_backend mu_client_backends[] = {
    {"muster", musterd_aliases, NULL, "musterd", "HOST:PORT of a running musterd",
     "musterd's native /v1 rendezvous (= etcd, etcd-v2: torchrun's names for it)",
     &mu__client_musterd_ops},
    {"etcd-v3", etcd3_aliases, "etcd-v3", "etcd",
     "H1:P,H2:P,... (the members of an etcd v3 cluster)",
     "an etcd v3 cluster through its JSON gateway", &mu__client_etcd3_ops},
    {"c10d", NULL, "c10d", "musterd",
     "HOST:PORT of a musterd's TCPStore listener (musterd --c10d-listen)",
     "torchrun's default: the TCPStore port of a musterd, asked for its /v1 API",
     &mu__client_c10d_ops},
    {NULL, NULL, NULL, NULL, NULL, NULL, NULL},
};

static int named(const struct mu_client_backend *b, const char *name)
{
  if (strcmp(b->name, name) == 0)
    return 1;
  for (const char *const *a = b->aliases; a != NULL && *a != NULL; a++)
    if (strcmp(*a, name) == 0)
      return 1;
  return 0;
}

const struct mu_client_backend *mu_client_backend_find(const char *name)
{
  for (const struct mu_client_backend *b = mu_client_backends; name != NULL && b->name; b++)
    if (named(b, name))
      return b;
  return NULL;
}

const struct mu_client_backend *mu_client_backend_of(const char *endpoint)
{
  const struct mu_client_backend *dflt = NULL;
  for (const struct mu_client_backend *b = mu_client_backends; b->name != NULL; b++) {
    size_t n = b->scheme != NULL ? strlen(b->scheme) : 0;
    if (b->scheme == NULL && dflt == NULL)
      dflt = b;
    else if (b->scheme != NULL && endpoint != NULL && strncmp(endpoint, b->scheme, n) == 0 &&
             strncmp(endpoint + n, "://", 3) == 0)
      return b;
  }
  return dflt;
}

void mu_client_backend_names(struct mu_buf *out)
{
  for (const struct mu_client_backend *b = mu_client_backends; b->name != NULL; b++) {
    mu_buf_printf(out, "%s%s", b == mu_client_backends ? "" : ", ", b->name);
    for (const char *const *a = b->aliases; a != NULL && *a != NULL; a++)
      mu_buf_printf(out, "%s%s", a == b->aliases ? " (" : ", ", *a);
    if (b->aliases != NULL && b->aliases[0] != NULL)
      mu_buf_putc(out, ')');
  }
}

void mu_client_backend_forms(struct mu_buf *out, const char *sep)
{
  for (const struct mu_client_backend *b = mu_client_backends; b->name != NULL; b++)
    mu_buf_printf(out, "%s%s%s%s", b == mu_client_backends ? "" : sep,
                  b->scheme != NULL ? b->scheme : "", b->scheme != NULL ? "://" : "",
                  b->endpoint_form);
}

int mu_client_backend_endpoint(const struct mu_client_backend *b, const char *endpoint, char **out,
                               struct mu_buf *err)
{
  *out = NULL;
  if (b->ops->display == NULL) {
    *out = mu_strdup(endpoint);
    return 0;
  }
  char why[512];
  int rc = b->ops->display(endpoint, out, why, sizeof(why));
  if (rc != 0)
    mu_buf_puts(err, why);
  return rc;
}
