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
#include "sched.h"
#include "strvec.h"

/* The runopts of the local scheduler, which local_container has as well (its table adds its
 * own). */
#define MU_LOCAL_RUNOPTS                                                                           \
  {"log_dir", MU_RUNOPT_STR, NULL, 0,                                                              \
   "where logs and job state go (default $MUSTER_LOG_DIR, else $XDG_RUNTIME_DIR/muster, "          \
   "else /tmp/muster/$USER)"},                                                                     \
      {"prepend_cwd", MU_RUNOPT_BOOL, "false", 0,                                                  \
       "put the working directory first on PATH instead of last"},                                 \
      {"devices_per_replica", MU_RUNOPT_INT, "0", 0,                                               \
       "give each replica its own N devices: a slice of 0..N*replicas-1 in device_env"},           \
      {"device_env", MU_RUNOPT_STR, "CUDA_VISIBLE_DEVICES", 0,                                     \
       "the variable that carries the slice (CUDA_VISIBLE_DEVICES, NEURON_RT_VISIBLE_CORES)"},     \
      {"grace_period", MU_RUNOPT_INT, "10", 0,                                                     \
       "seconds between SIGTERM and SIGKILL when the job is cancelled"},                           \
      {"fail_fast", MU_RUNOPT_BOOL, "true", 0,                                                     \
       "no more retries: when a replica fails and nothing covers it (a process killed by a "       \
       "signal is first restarted while its role's max_retries lasts, and a standby of the "       \
       "rendezvous may take its place), stop the others at once (false: let them run to their "    \
       "own end, as TorchX)"},                                                                     \
      {"rdzv", MU_RUNOPT_STR, "auto", 0,                                                           \
       "rendezvous for ${rdzv_endpoint}: auto (an embedded musterd when a role uses it), job "     \
       "(always), none, HOST:PORT of a running musterd or etcd, or etcd-v3://H1:P,H2:P (an etcd "  \
       "v3 cluster)"},                                                                             \
      {"rdzv_auth", MU_RUNOPT_STR, "auto", 0,                                                      \
       "who may use the job's musterd: auto (only the job, by a token made for it in a 0600 "      \
       "file; anyone on this machine when torchrun's etcd backend, which sends none, must reach "  \
       "it), token (always the token), none (anyone)"},                                            \
      {"rdzv_token_file", MU_RUNOPT_STR, NULL, 0,                                                  \
       "a file whose first line is the token: of the musterd of rdzv=HOST:PORT, or the job's "     \
       "own instead of a new one"},                                                                \
      {"rdzv_tls", MU_RUNOPT_STR, NULL, 0,                                                         \
       "a directory with server.pem, server.key (for 127.0.0.1) and ca.pem: the job's musterd "    \
       "serves HTTPS, the agents check it with ca.pem; client.pem and client.key as well: "        \
       "client certificates required"},                                                            \
      MU_RUNOPT_HEALTH_CHECK

/* The images of a local_container job and where they are unpacked (local_container.c). */
struct mu_local_container;

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
  /* -s local_container: each replica runs in its role's image (local_container.c); NULL for
   * -s local. Owned by the plan. */
  struct mu_local_container *container;
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

/* The local scheduler's dryrun with the images of a local_container job (c; NULL for -s
 * local), which the plan takes over (local.c). Returns: as mu_sched_ops.dryrun. */
int mu_local_dryrun_with(const struct mu_app *app, const struct mu_cfg *cfg,
                         struct mu_local_container *c, struct mu_dryrun *out, struct mu_buf *err);

/* The jobs of -s local (container 0) or of -s local_container (1: those whose app dir holds
 * MU_LOCAL_CONTAINER_MARK), as mu_sched_ops.list (local.c). */
#define MU_LOCAL_CONTAINER_MARK "local_container"
int mu_local_list(const struct mu_cfg *cfg, struct mu_app_list_entry **out, size_t *n,
                  int container, struct mu_buf *err);

/* local_container.c, called by the local scheduler when p->container is set:
 * wrap: turns each planned replica's command into that command in its image (a private mount
 * and PID namespace, chrooted); called at the end of mu_local_plan_replicas.
 * Returns: 0, or MU_EINVAL with err set.
 * text: the lines --dryrun prints about the images. free: accepts NULL. */
int mu_local_container_wrap(struct mu_local_plan *p, struct mu_buf *err);
void mu_local_container_text(const struct mu_local_plan *p, struct mu_buf *t);
void mu_local_container_free(struct mu_local_container *c);

/* The supervisor's body, in the forked child (local_supervisor.c): runs the job's replicas to
 * their end, writing <app dir>/state.json as they go. Returns: its exit status, 0 when the job
 * succeeded. Ownership: borrows p. */
int mu_local_supervise(struct mu_local_plan *p);

#endif
