/* The spec layer, and its center: the job spec, an app of roles, what every scheduler consumes.
 *
 * The layer owns what a job is before anything runs it: the job spec (job.c: roles, resources,
 * mounts, macros, validation, JSON, ids), components (component*.c: YAML files whose typed
 * parameters and template turn command-line arguments into a job spec), the scheduler
 * configuration (config.c: -cfg strings, .musterconfig files, runopt declarations) and YAML
 * trees (yaml_tree.c). It may call common/ only: no scheduler, command or agent header.
 *
 * Components produce a struct mu_app; validation (mu_app_validate) runs before any scheduler
 * sees it and names the field in its error; macros (${app_id}, ${replica_id}, ...) are
 * substituted per replica by mu_macros_apply(). Every string is owned by the struct that
 * holds it; mu_app_free() frees the whole tree. Nothing here prints.
 */
#ifndef MU_JOB_H
#define MU_JOB_H

#include <stddef.h>

#include "buf.h"
#include "strvec.h"

/* The one job-state enum, in TorchX's order. */
enum mu_job_state {
  MU_STATE_UNSUBMITTED = 0,
  MU_STATE_SUBMITTED,
  MU_STATE_PENDING,
  MU_STATE_RUNNING,
  MU_STATE_SUCCEEDED,
  MU_STATE_FAILED,
  MU_STATE_CANCELLED,
  MU_STATE_UNKNOWN,
};

/* "PENDING", "RUNNING", ... Ownership: static. */
const char *mu_job_state_name(enum mu_job_state s);
/* Returns: 1 for SUCCEEDED, FAILED and CANCELLED (the job will not change again), else 0. */
int mu_job_state_is_terminal(enum mu_job_state s);
/* Parses a state name (case-insensitive). Returns: 0, or MU_EINVAL. */
int mu_job_state_parse(const char *name, enum mu_job_state *out);

/* An ordered string map (env, metadata, capabilities, node selector). */
struct mu_kv {
  char *key;
  char *value;
};
struct mu_kvlist {
  struct mu_kv *v;
  size_t n;
  size_t cap;
};
#define MU_KVLIST_INIT                                                                             \
  {                                                                                                \
    NULL, 0, 0                                                                                     \
  }
/* Sets key (replacing an existing value, keeping its position). Copies both. */
void mu_kvlist_set(struct mu_kvlist *l, const char *key, const char *value);
/* Returns: the value or NULL. Ownership: borrowed. */
const char *mu_kvlist_get(const struct mu_kvlist *l, const char *key);
void mu_kvlist_release(struct mu_kvlist *l);

/* A device request: name -> count ("aws.amazon.com/neuron": 16). */
struct mu_device {
  char *name;
  long count;
};

struct mu_resource {
  long cpu;   /* logical cores; -1 = unset */
  long gpu;   /* -1 = unset */
  long memMB; /* -1 = unset */
  struct mu_device *devices;
  size_t ndevices;
  /* Scheduler-interpreted capabilities; "node.kubernetes.io/instance-type" picks the node. */
  struct mu_kvlist capabilities;
};

enum mu_mount_type {
  MU_MOUNT_BIND = 0,  /* host path -> container path */
  MU_MOUNT_VOLUME,    /* named volume / PVC -> container path */
  MU_MOUNT_DEVICE,    /* host device -> container device, with permissions */
  MU_MOUNT_SHM,       /* shared memory (/dev/shm) of size_mb */
  MU_MOUNT_SECRET,    /* Kubernetes Secret src -> files under dst, read-only */
  MU_MOUNT_CONFIGMAP, /* Kubernetes ConfigMap src -> files under dst, read-only */
};

struct mu_mount {
  enum mu_mount_type type;
  char *src; /* host path, volume/claim name, device path, Secret or ConfigMap name; NULL for
              * shm */
  char *dst; /* path in the container */
  int read_only;
  char *perm;   /* device permissions, subset of "rwm" */
  long size_mb; /* shm size; 0 = scheduler default */
};

enum mu_retry_policy {
  MU_RETRY_APPLICATION = 0, /* restart the whole app (TorchX default) */
  MU_RETRY_REPLICA,         /* restart the failed replica only */
  MU_RETRY_ROLE,            /* restart the role */
};

struct mu_port {
  char *name;
  long port;
};

struct mu_role {
  char *name;
  char *image;
  char *entrypoint;
  struct mu_strvec args;
  struct mu_kvlist env;
  long num_replicas; /* nodes; >= 1 */
  long min_replicas; /* elastic floor; -1 = same as num_replicas */
  long max_retries;
  enum mu_retry_policy retry_policy;
  struct mu_resource resource;
  struct mu_mount *mounts;
  size_t nmounts;
  struct mu_port *ports;
  size_t nports;
  struct mu_kvlist metadata; /* "<sched>.<key>" convention, as TorchX */
};

struct mu_app {
  char *name;
  struct mu_role *roles;
  size_t nroles;
  struct mu_kvlist metadata;
};

/* Allocation helpers. mu_app_add_role returns a zeroed role (num_replicas 1, min_replicas -1,
 * cpu/gpu/memMB -1) owned by the app; the pointer is valid until the next add.
 * Returns: never NULL (allocation aborts on OOM). Ownership: the app is the caller's
 * (mu_app_free); copies name. */
struct mu_app *mu_app_new(const char *name);
struct mu_role *mu_app_add_role(struct mu_app *app, const char *name);
/* Accepts NULL. */
void mu_app_free(struct mu_app *app);

/* Checks every field before any scheduler sees the app: the numbers, the names (see
 * MU_NAME_MAX), the variable names, and no control character in any string (tab and newline
 * only in args and env values). Returns: 0, or MU_EINVAL with a message naming the field
 * written to err ("roles[0].resources.memMB: must be a positive integer, got -3"). */
int mu_app_validate(const struct mu_app *app, struct mu_buf *err);

/* Names (the app's, each role's) are at most MU_NAME_MAX letters, digits, '-', '_' and '.',
 * starting with a letter or digit: they become file names, Slurm job names and parts of
 * Kubernetes names, so nothing that a shell, a path or a manifest reads differently. */
#define MU_NAME_MAX 63

/* Checks a name (see MU_NAME_MAX). Returns: 0, or MU_EINVAL with "FIELD: 'x/y' is not a valid
 * name: ..." in err (the value shown with control characters escaped). */
int mu_name_check(const char *field, const char *s, struct mu_buf *err);

enum mu_text_flags {
  MU_TEXT_LINES = 1 << 0, /* tab and newline are allowed (a program's arguments and environment:
                           * code and text); every other control character never is */
};

/* Returns: the byte offset of the first control character in s that `flags` do not allow (C0,
 * DEL, or C1 U+0080-U+009F as UTF-8, which includes NEL U+0085), or -1 when there is none. */
long mu_text_bad(const char *s, unsigned flags);

/* Checks a text field. Returns: 0, or MU_EINVAL with "FIELD: control character 0x0a at byte 3
 * is not allowed ..." in err. */
int mu_text_check(const char *field, const char *s, unsigned flags, struct mu_buf *err);

/* Appends s for an error message: control characters and '\' escaped (\n, \x1b), at most 64
 * bytes then "...", so that a hostile value cannot forge lines or reach a terminal. */
void mu_put_shown(struct mu_buf *out, const char *s);

/* Whether any role's entrypoint, args or env values contain s (e.g. "${rdzv_endpoint}": the job
 * needs a rendezvous endpoint). Returns: 1 or 0. */
int mu_app_mentions(const struct mu_app *app, const char *s);

/* The macro values for one replica. Unset (NULL) macros are left as written. */
struct mu_macros {
  const char *app_id;
  const char *replica_id;
  const char *img_root;
  const char *rank0_env;
  const char *rdzv_endpoint;
  const char *num_replicas;
  const char *c10d_endpoint; /* the job's musterd's TCPStore listener (torchrun's c10d backend) */
};

/* Substitutes ${name} in s ($$ gives $). Returns: a new string; caller frees with mu_free(). */
char *mu_macros_apply(const struct mu_macros *m, const char *s);

/* Writes the app as JSON (the form `muster describe` and `--dryrun --json` print, and that the
 * local scheduler keeps on disk). Returns: 0. Ownership: appends to out. */
int mu_app_to_json(const struct mu_app *app, struct mu_buf *out);
/* Reads that JSON back. Returns: 0, or MU_EPARSE. Ownership: *out is the caller's. */
int mu_app_from_json(const char *json, struct mu_app **out);

/* ---------------------------------------------------------------------------------------------
 * Roles, resources, mounts, names
 */

/* Releases the strings and arrays of one role (the role struct itself stays). */
void mu_role_release(struct mu_role *role);

/* Adds a device request (copies name). */
void mu_resource_add_device(struct mu_resource *r, const char *name, long count);

/* Fills r from a named resource ("gpu.small", "cpu.large", "aws_p4d.24xlarge", ...), as
 * TorchX's named_resources (resources.c). Returns: 0, or MU_ENOENT (err names the closest known
 * one). */
int mu_named_resource(const char *name, struct mu_resource *r, struct mu_buf *err);
/* The GPUs of one node of the named resource; -1 when there is no such name. */
long mu_named_resource_gpus(const char *name);
/* The i-th known named resource, NULL past the end. Ownership: static. */
const char *mu_named_resource_at(size_t i);
/* The NeuronCores one node of an instance type shows at logical-core setting lnc (1 or 2; LNC
 * applies on Trainium2 only, trn1/inf2 show 2 per device at either). Returns: the count, 0 for
 * a type that is not in the table or has no Neuron device. */
long mu_instance_neuron_cores(const char *type, int lnc);

/* Checks each role that names an instance type (the node.kubernetes.io/instance-type
 * capability) of the table against what that type has (resources.c): GPUs, EFA adapters, Neuron
 * devices and cores per node, and more than one node of a Neuron type without EFA (trn1.2xlarge:
 * Neuron collectives need EFA between nodes). An unknown type is not checked. Called by
 * mu_app_validate. Returns: 0, or MU_EINVAL with the field, the numbers and the fix in err. */
int mu_instance_check(const struct mu_app *app, struct mu_buf *err);

/* Parses TorchX's --mounts list form: items as split on ',' ("type=bind", "src=/a", "dst=/b",
 * "readonly", "type=volume", ...). Aliases source/destination/target/read_only as TorchX; for
 * type=secret and type=configmap (Kubernetes), name= is src (TorchX #611's spelling).
 * Returns: 0, or MU_EINVAL with a message in err. Ownership: the mounts are appended to
 * role->mounts (owned by the role). */
int mu_mounts_parse(struct mu_role *role, char *const *items, size_t n, struct mu_buf *err);

/* Normalises a name for ids: lowercase, '_' '.' and ' ' become '-', other characters outside
 * [a-z0-9-] are dropped, leading non-letters are dropped, at most max chars, no trailing '-'.
 * An empty result becomes "app". Returns: a new string; caller frees with mu_free(). */
char *mu_normalize_name(const char *s, size_t max);
/* A unique app id "<normalised name>-<12 random chars>", at most 63 characters; the suffix is
 * mu_app_id_suffix()'s (random.h: $MUSTER_APP_ID_SUFFIX pins it). Returns: the id, or NULL when
 * the kernel gave no random bytes. Ownership: caller frees with mu_free(). */
char *mu_app_id_make(const char *name);

/* Shell-quotes s for a POSIX shell (as Python's shlex.quote). Appends to out.
 * Returns: 0, or MU_E2BIG when out's cap is reached. */
int mu_shell_quote(const char *s, struct mu_buf *out);

#endif
