/* The local scheduler's plan: one command line and environment per replica, the macros applied
 * (${app_id}, ${replica_id}, ${rdzv_endpoint}, ...) and the variables every replica gets
 * (MUSTER_*, TORCHELASTIC_ERROR_FILE, a device slice).
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "alloc.h"
#include "local.h"
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
  mu_free(p->device_env);
  plan_replicas_clear(p);
  mu_free(p);
}

void mu_local_plan_replicas(struct mu_local_plan *p, const char *endpoint)
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
      struct mu_macros m = {p->app_id, rid, cwd, "TORCHX_RANK0_HOST", endpoint, nrep};
      rp->role = mu_strdup(r->name);
      rp->id = id;
      rp->dir = mu_asprintf("%s/%s/%ld", p->app_dir, r->name, id);
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
}
