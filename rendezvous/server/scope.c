/* Credentials' scopes (see http.h): the checks every API calls, and the 403 that words a
 * refusal. A credential without scopes may everything (read-only aside); with scopes, only what
 * its runs= globs and keys= prefixes name: a credential with keys= and no runs= reaches no run.
 */
#include <fnmatch.h>
#include <stdio.h>
#include <string.h>

#include "muster/errno.h"

#include "server.h"

/* Is key path k[0..n) the prefix p (a path without a trailing '/', "" for all) or under it? */
static int under(const char *p, const char *k, size_t n)
{
  size_t pl = strlen(p);
  return n >= pl && memcmp(k, p, pl) == 0 && (n == pl || k[pl] == '/' || pl == 0);
}

/* Is run id r[0..n) matched by one of `cred`'s globs? */
static int run_matches(const struct rv_cred *cred, const char *r, size_t n)
{
  char id[256];
  if (n >= sizeof(id))
    return 0; /* run ids are at most 128 bytes */
  memcpy(id, r, n);
  id[n] = '\0';
  for (size_t i = 0; i < cred->nruns; i++)
    if (fnmatch(cred->runs[i], id, 0) == 0)
      return 1;
  return 0;
}

int rv_cred_allows(const struct rv_cred *cred, enum rv_scope_kind kind, const char *name,
                   size_t len, unsigned access)
{
  if (cred == NULL)
    return 1;
  if ((access & RV_WRITE) && cred->read_only)
    return 0;
  if (!cred->scoped)
    return 1;
  if (kind == RV_SCOPE_RUN)
    return run_matches(cred, name, len);
  for (size_t i = 0; i < cred->nkeys; i++)
    if (under(cred->keys[i], name, len))
      return 1;
  return 0;
}

int rv_cred_above(const struct rv_cred *cred, const char *key, size_t len)
{
  if (cred == NULL || !cred->scoped)
    return 0;
  while (len > 1 && key[len - 1] == '/')
    len--; /* "/a/" is the dir "/a" */
  for (size_t i = 0; i < cred->nkeys; i++) {
    const char *p = cred->keys[i];
    size_t pl = strlen(p);
    /* the root, or a dir whose path and a '/' begin the prefix */
    if (pl > len && (len <= 1 || (memcmp(p, key, len) == 0 && p[len] == '/')))
      return 1;
  }
  return 0;
}

/* Appends the scopes `cred` has ("runs=a-*, keys=/a, read-only") to out[*o..size). */
static void scopes(const struct rv_cred *cred, char *out, size_t size, size_t *o)
{
  const char *sep = "";
  for (size_t i = 0; i < cred->nruns && *o < size; i++, sep = ", ")
    *o += (size_t)snprintf(out + *o, size - *o, "%sruns=%.64s", sep, cred->runs[i]);
  for (size_t i = 0; i < cred->nkeys && *o < size; i++, sep = ", ")
    *o += (size_t)snprintf(out + *o, size - *o, "%skeys=%.64s", sep,
                           cred->keys[i][0] ? cred->keys[i] : "/");
  if (cred->read_only && *o < size)
    *o += (size_t)snprintf(out + *o, size - *o, "%sread-only", sep);
}

void rv_cred_refusal(const struct rv_cred *cred, enum rv_scope_kind kind, const char *name,
                     unsigned access, char *out, size_t size)
{
  size_t o = 0;
  const char *what = kind == RV_SCOPE_RUN ? "run" : "key";
  const char *scope = kind == RV_SCOPE_RUN ? "runs" : "keys";
  int ro = (access & RV_WRITE) && cred->read_only;
  if (ro)
    o = (size_t)snprintf(out, size, "%s is read-only: it may not write %s '%.128s'", cred->id, what,
                         name);
  else
    o = (size_t)snprintf(out, size,
                         "%s lacks the scope %s=%.128s: it may not %s %s '%.128s' (its scopes: ",
                         cred->id, scope, name, (access & RV_WRITE) ? "write" : "read", what, name);
  if (!ro && o < size) {
    scopes(cred, out, size, &o);
    if (o < size)
      o += (size_t)snprintf(out + o, size - o, ")");
  }
  if (o < size)
    snprintf(out + o, size - o, "; use a credential whose scopes cover it");
}

void rv_refuse_scope(struct rv_req *req, enum rv_scope_kind kind, const char *name, unsigned access)
{
  char msg[640];
  rv_cred_refusal(req->cred, kind, name, access, msg, sizeof(msg));
  struct rv_refusal r = {RV_REFUSE_FORBIDDEN, msg, 0, NULL};
  rv_refuse(req, &r);
}

int rv_server_credential(struct rv_server *srv, const char *authorization,
                         const struct rv_cred **cred)
{
  *cred = NULL;
  if (!srv->has_gate)
    return 1;
  if (srv->gate.lookup == NULL)
    return 0;
  return srv->gate.lookup(srv->gate.data, authorization, cred);
}
