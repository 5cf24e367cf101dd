/* Inside the local scheduler: the plan that dryrun makes and schedule hands to the supervisor.
 * local.c is the scheduler (dryrun, schedule, status, cancel, list, logs from the files of a
 * job), local_plan.c the per-replica command lines, local_supervisor.c the process that runs
 * them. Not for other layers: they see the mu_sched_local ops table in sched.h.
 */
#ifndef MU_LOCAL_H
#define MU_LOCAL_H

#include <stddef.h>

#include "job.h"
#include "strvec.h"

/* One replica: its command line and environment with the macros applied. */
struct mu_local_replica {
  char *role;
  long id;
  struct mu_strvec argv;
  struct mu_kvlist env; /* what we add on top of the inherited environment */
  char *dir;            /* <app dir>/<role>/<id> */
};

struct mu_local_plan {
  struct mu_app *app; /* a copy, macros not yet applied */
  char *app_id;
  char *root;          /* the log root for this job */
  char *app_dir;       /* <root>/<app_id> */
  int rdzv;            /* 1 = start an embedded musterd */
  char *rdzv_external; /* HOST:PORT of an existing musterd, or NULL */
  char *c10d_endpoint; /* HOST:PORT of the embedded musterd's TCPStore listener (the macro
                        * ${c10d_endpoint}: torchrun --rdzv_backend c10d), or NULL */
  long grace;
  int fail_fast;
  int prepend_cwd;
  long devices_per_replica;
  char *device_env;
  struct mu_local_replica *replicas;
  size_t nreplicas;
};

/* (Re)fills p->replicas from p->app: argv and env with the macros applied, ${rdzv_endpoint}
 * being endpoint and ${c10d_endpoint} p->c10d_endpoint (placeholders in a dryrun)
 * (local_plan.c). */
void mu_local_plan_replicas(struct mu_local_plan *p, const char *endpoint);
/* Frees the plan. Accepts NULL. */
void mu_local_plan_free(struct mu_local_plan *p);

/* The supervisor's body, in the forked child (local_supervisor.c): runs the job's replicas to
 * their end, writing <app dir>/state.json as they go. Returns: its exit status, 0 when the job
 * succeeded. Ownership: borrows p. */
int mu_local_supervise(struct mu_local_plan *p);

#endif
