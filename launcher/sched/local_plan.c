/* The local scheduler's plan: one command line and environment per replica, the macros applied
 * (${app_id}, ${replica_id}, ${rdzv_endpoint}, ${c10d_endpoint}, ...) and the variables every
 * replica gets
 * (MUSTER_*, TORCHELASTIC_ERROR_FILE, a device slice).
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "muster/errno.h"

#include "alloc.h"
#include "local.h"
#include "path.h"
#include "sched.h"

/* Frees the plan's replicas and leaves it with none. */
static void plan_replicas_clear(struct mu_local_plan *p)
{
  for (size_t i = 0; i < p->nreplicas; i++) {
    mu_free(p->replicas[i].role);
    mu_strvec_release(&p->replicas[i].argv);
    mu_kvlist_release(&p->replicas[i].env);
    mu_free(p->replicas[i].dir);
  }
  mu_free(p->replicas);
  p->replicas = NULL;
  p->nreplicas = 0;
}

void mu_local_plan_free(struct mu_local_plan *p)
{
  if (p == NULL)
    return;
  mu_app_free(p->app);
  mu_free(p->app_id);
  mu_free(p->root);
  mu_free(p->app_dir);
  mu_free(p->rdzv_external);
  mu_free(p->c10d_endpoint);
  mu_free(p->token_file);
  mu_free(p->open_why);
  mu_free(p->tls_dir);
  mu_free(p->device_env);
  plan_replicas_clear(p);
  mu_local_container_free(p->container);
  mu_free(p);
}

char *mu_local_path(const char *root, const char *app_id, const char *role, long replica,
                    const char *file)
{
  char rid[32];
  snprintf(rid, sizeof(rid), "%ld", replica);
  const char *parts[] = {app_id, role, role != NULL && replica >= 0 ? rid : NULL, file};
  struct mu_buf b = MU_BUF_INIT(SIZE_MAX);
  mu_buf_puts(&b, root);
  for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
    if (parts[i] == NULL)
      continue;
    if (!mu_path_segment_ok(parts[i])) {
      mu_buf_release(&b);
      return NULL;
    }
    mu_buf_putc(&b, '/');
    mu_buf_puts(&b, parts[i]);
  }
  return mu_buf_detach(&b);
}

/* With -cfg rdzv_tls: the CA that checks the job's musterd, and the client certificate. */
static void plan_tls_env(const struct mu_local_plan *p, struct mu_kvlist *env)
{
  static const char *const vars[][2] = {{"MUSTER_RDZV_CACERT", "ca.pem"},
                                        {"MUSTER_RDZV_CERT", "client.pem"},
                                        {"MUSTER_RDZV_KEY", "client.key"}};
  for (size_t i = 0; p->tls_dir != NULL && i < (p->tls_clients ? 3u : 1u); i++) {
    char *f = mu_asprintf("%s/%s", p->tls_dir, vars[i][1]);
    mu_kvlist_set(env, vars[i][0], f);
    mu_free(f);
  }
}

int mu_local_plan_replicas(struct mu_local_plan *p, const char *endpoint, struct mu_buf *err)
{
  plan_replicas_clear(p);
  size_t total = 0;
  for (size_t i = 0; i < p->app->nroles; i++)
    total += (size_t)p->app->roles[i].num_replicas;
  p->replicas = mu_calloc(total ? total : 1, sizeof(*p->replicas));
  char cwd[PATH_MAX];
  if (getcwd(cwd, sizeof(cwd)) == NULL)
    snprintf(cwd, sizeof(cwd), ".");
  size_t k = 0;
  for (size_t i = 0; i < p->app->nroles; i++) {
    const struct mu_role *r = &p->app->roles[i];
    char nrep[32];
    snprintf(nrep, sizeof(nrep), "%ld", r->num_replicas);
    for (long id = 0; id < r->num_replicas; id++, k++) {
      struct mu_local_replica *rp = &p->replicas[k];
      char rid[32];
      snprintf(rid, sizeof(rid), "%ld", id);
      /* ${rank0_env} names TorchX's variable, as its local_cwd scheduler does. */
      struct mu_macros m = {p->app_id,       rid, cwd, "TORCHX_RANK0_HOST", endpoint, nrep,
                            p->c10d_endpoint};
      rp->role = mu_strdup(r->name);
      rp->id = id;
      rp->dir = mu_local_path(p->root, p->app_id, r->name, id, NULL);
      if (rp->dir == NULL) {
        mu_buf_printf(err, "roles[%zu].name: '", i);
        mu_put_shown(err, r->name);
        mu_buf_printf(err, "' cannot name a directory under '%s'", p->app_dir);
        p->nreplicas = k + 1;
        plan_replicas_clear(p);
        return MU_EINVAL;
      }
      mu_strvec_push_owned(&rp->argv, mu_macros_apply(&m, r->entrypoint));
      for (size_t a = 0; a < r->args.n; a++)
        mu_strvec_push_owned(&rp->argv, mu_macros_apply(&m, r->args.v[a]));
      for (size_t e = 0; e < r->env.n; e++) {
        char *v = mu_macros_apply(&m, r->env.v[e].value);
        mu_kvlist_set(&rp->env, r->env.v[e].key, v);
        mu_free(v);
      }
      char *job = mu_asprintf("local://%s/%s", MU_SESSION, p->app_id);
      mu_kvlist_set(&rp->env, "MUSTER_JOB_ID", job);
      mu_free(job);
      mu_kvlist_set(&rp->env, "MUSTER_APP_ID", p->app_id);
      mu_kvlist_set(&rp->env, "MUSTER_ROLE_NAME", r->name);
      mu_kvlist_set(&rp->env, "MUSTER_REPLICA_ID", rid);
      mu_kvlist_set(&rp->env, "MUSTER_RANK0_HOST", "localhost");
      mu_kvlist_set(&rp->env, "TORCHX_RANK0_HOST", "localhost"); /* as on Kubernetes */
      if (p->rdzv || p->rdzv_external)
        mu_kvlist_set(&rp->env, "MUSTER_RDZV_ENDPOINT", endpoint);
      if (p->token_file != NULL)
        mu_kvlist_set(&rp->env, "MUSTER_RDZV_TOKEN_FILE", p->token_file);
      plan_tls_env(p, &rp->env);
      if (mu_kvlist_get(&rp->env, "TORCHELASTIC_ERROR_FILE") == NULL) {
        char *ef = mu_asprintf("%s/error.json", rp->dir);
        mu_kvlist_set(&rp->env, "TORCHELASTIC_ERROR_FILE", ef);
        mu_free(ef);
      }
      if (p->devices_per_replica > 0) {
        struct mu_buf b = MU_BUF_INIT(SIZE_MAX);
        for (long d = 0; d < p->devices_per_replica; d++)
          mu_buf_printf(&b, "%s%ld", d ? "," : "", (long)k * p->devices_per_replica + d);
        mu_kvlist_set(&rp->env, p->device_env, mu_buf_str(&b));
        mu_buf_release(&b);
      }
    }
  }
  p->nreplicas = k;
  return p->container != NULL ? mu_local_container_wrap(p, err) : 0;
}
