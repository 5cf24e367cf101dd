/* Inside the local scheduler: the plan that dryrun makes and schedule hands to the supervisor.
 * local.c is the scheduler (dryrun, schedule, status, cancel, list, logs from the files of a
 * job), local_plan.c the per-replica command lines, local_supervisor.c the process that runs
 * them. Not for other layers: they see the mu_sched_local ops table in sched.h.
 */
#ifndef MU_LOCAL_H
#define MU_LOCAL_H

#include <stddef.h>

#include "buf.h"
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
  /* The rendezvous token (docs/security.md): the file the embedded musterd reads its token from
   * and every replica gets as MUSTER_RDZV_TOKEN_FILE (its MUSTER_RDZV_TOKEN dropped), or NULL.
   * token_made: schedule makes it (<app dir>/rdzv.token, 0600) and the supervisor removes it
   * when the job ends; else it is the user's -cfg rdzv_token_file. */
  char *token_file;
  int token_made;
  char *open_why;  /* the job's musterd is open by rdzv_auth=auto: why (mu_rdzv_auth) */
  char *tls_dir;   /* -cfg rdzv_tls: the embedded musterd serves HTTPS (mu_rdzv_auth), or NULL */
  int tls_clients; /* ... and asks for client certificates */
  long grace;
  int fail_fast;
  int prepend_cwd;
  long devices_per_replica;
  char *device_env;
  struct mu_local_replica *replicas;
  size_t nreplicas;
};

/* The path of one of the scheduler's files from what a user named (local_plan.c): ROOT/APP_ID,
 * then /ROLE/REPLICA when role is not NULL (replica >= 0), then /FILE when file is not NULL.
 * Every path the local scheduler builds from a user's value (an app id from a handle, a role
 * name, a replica id) comes from here, so none leaves its root: a part that is not one path
 * segment (mu_path_segment_ok: "..", "a/b", "") gives NULL.
 * Returns: the path (caller frees with mu_free()), or NULL. */
char *mu_local_path(const char *root, const char *app_id, const char *role, long replica,
                    const char *file);

/* (Re)fills p->replicas from p->app: argv and env with the macros applied, ${rdzv_endpoint}
 * being endpoint and ${c10d_endpoint} p->c10d_endpoint (placeholders in a dryrun)
 * (local_plan.c).
 * Returns: 0, or MU_EINVAL with the role named in err when its name cannot be a directory
 * (mu_app_validate refuses such names first). */
int mu_local_plan_replicas(struct mu_local_plan *p, const char *endpoint, struct mu_buf *err);
/* Frees the plan. Accepts NULL. */
void mu_local_plan_free(struct mu_local_plan *p);

/* The supervisor's body, in the forked child (local_supervisor.c): runs the job's replicas to
 * their end, writing <app dir>/state.json as they go. Returns: its exit status, 0 when the job
 * succeeded. Ownership: borrows p. */
int mu_local_supervise(struct mu_local_plan *p);

#endif
