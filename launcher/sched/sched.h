/* The scheduler layer: the interface every backend implements (as TorchX's Scheduler: dryrun,
 * schedule, describe, list, cancel, log), a static registry whose first entry is the default,
 * and the generic operations built on the slots.
 *
 * Owns: turning a validated job spec into a request for a place to run it (the local machine,
 * Kubernetes, Slurm), submitting it and reading it back. Files: sched.c (registry, generic
 * operations), local*.c (processes on this machine under a supervisor), kubernetes*.c and
 * slurm*.c (each a pure renderer, pure parsers and the scheduler that runs the cluster's tools),
 * sched_exec.c (the tool runner), log_reader.c (a backend's log_open in a child, into a pipe),
 * log_fanout.c (several replicas' logs at once, filtered and prefixed).
 * May call: spec/ (job.h, config.h, yaml_tree.h), common/, and musterd's embedding header
 * (local_supervisor.c only). Never cmd/ or agent/: a scheduler starts `muster agent` as a
 * program, by name, on the nodes it reaches.
 *
 * Nothing here prints: errors come back as a negative MU_E* code plus a message in `err`.
 */
#ifndef MU_SCHED_H
#define MU_SCHED_H

#include <stddef.h>
#include <sys/types.h>

#include "buf.h"
#include "config.h"
#include "job.h"
#include "lines.h"
#include "strvec.h"

/* The printable plan that schedule() submits: for local a process list, for kubernetes the
 * Volcano Job YAML, for slurm the sbatch script. `text` is what --dryrun prints. */
struct mu_dryrun {
  char *text;
  char *app_id;  /* the id the scheduler will use */
  char *note;    /* what the user should know even without --dryrun (cmd_run prints it to
                  * stderr: "the job's musterd is open: ..."), or NULL */
  char *warning; /* what --dryrun says on stderr about the plan (a placeholder in it), or NULL */
  char *objects; /* YAML documents of what the scheduler creates with the job besides text
                  * (Kubernetes: claim templates, NetworkPolicy), or NULL */
  void *priv;    /* backend data; freed by the backend's dryrun_free */
  const struct mu_sched_ops *sched;
};

struct mu_replica_status {
  char *role;
  long replica_id;
  enum mu_job_state state;
  char *hostname;
  int exit_code; /* -1 unknown */
  char *msg;
};

struct mu_app_status {
  char *app_id;
  enum mu_job_state state;
  long num_restarts;
  char *msg;
  /* Why the job cannot make progress (an image that cannot be pulled, pods that cannot be
   * scheduled, a container that crashes on start...), one line naming the replica; NULL when
   * nothing holds it up. Shown first by `muster status` and printed by `run --wait` when it
   * changes. */
  char *reason;
  struct mu_replica_status *replicas;
  size_t nreplicas;
  char *rdzv_endpoint;   /* HOST:PORT of the job's musterd when known, else NULL (local) */
  char *rdzv_token_file; /* the file of the token it requires, when the job has one (local) */
  char *ui_url;          /* the job's musterd status page while it serves one, else NULL */
  /* The job's root cause: its earliest worker failure (failrec.h), kept only when the job
   * FAILED. root_cause is one line (rank, exit, exception), structured_error_msg the record's
   * JSON; both NULL when no record was found. */
  char *root_cause;
  char *structured_error_msg;
  long long root_cause_ms;
  double started_at, ended_at; /* Unix seconds; 0 when the backend does not know */
  /* The job's rendezvous run as the local scheduler keeps it (GET /v1/runs/{id}'s run_id,
   * state, round, restart_count, max_restarts, standbys, unhealthy, timings), JSON text;
   * NULL when the backend does not know it. */
  char *rdzv_run;
};

struct mu_app_list_entry {
  char *app_id;
  char *name;
  enum mu_job_state state;
  char *reason;      /* why it cannot make progress (mu_app_status.reason), or NULL */
  double started_at; /* Unix seconds; 0 when the backend does not know */
};

/* Log stream choice for log_open. */
enum mu_log_stream { MU_STREAM_COMBINED = 0, MU_STREAM_STDOUT, MU_STREAM_STDERR };

/* What `muster log` asks of a backend's log_open, beyond the replica. */
struct mu_log_opts {
  enum mu_log_stream stream;
  int follow;        /* keep printing until the job ends (TorchX's -t) */
  long tail;         /* only the last N lines of each replica; 0: every line */
  const char *since; /* only lines newer than this: a duration ("5m", "1h30m") or an RFC 3339
                      * time; NULL: all. Only with MU_SCHED_LOG_SINCE. */
  int previous;      /* the run before a restarted container's last (MU_SCHED_LOG_PREVIOUS) */
};

/* What a backend's log_open can do beyond the replica's whole log (mu_sched_ops.log_caps). */
enum mu_sched_log_caps {
  MU_SCHED_LOG_SINCE = 1 << 0,    /* it honours mu_log_opts.since */
  MU_SCHED_LOG_PREVIOUS = 1 << 1, /* it honours mu_log_opts.previous */
};

/* What a scheduler does that the others do not; a command asks these, never which one it is. */
enum mu_sched_caps {
  /* Its jobs run on this machine, under a process of ours: `muster run` follows every job to its
   * end and streams its logs by default (--wait and --log are implied). */
  MU_SCHED_FOLLOW = 1 << 0,
  /* It runs the roles' images: a workspace ([cli:run] workspace= too) is built into them. */
  MU_SCHED_IMAGES = 1 << 1,
};
/* The -cfg key every scheduler has (a row of each runopt table): the health check every node's
 * muster agent runs before it joins, passed as MUSTER_HEALTH_CHECK in every role's environment
 * by mu_sched_dryrun() (a role that sets it keeps its own). */
#define MU_RUNOPT_HEALTH_CHECK                                                                     \
  {                                                                                                \
    "health_check", MU_RUNOPT_STR, NULL, 0,                                                        \
        "a shell command every node's muster agent runs before it joins (MUSTER_HEALTH_CHECK); "   \
        "a node whose check fails does not join and shows as unhealthy"                            \
  }

struct mu_sched_ops {
  const char *name; /* the registry (sched.c) adds the aliases users type */
  const char *help;
  unsigned caps; /* enum mu_sched_caps */
  /* What ${rdzv_endpoint} becomes on this scheduler (--dryrun and describe say it). */
  const char *rdzv_macro;
  const struct mu_runopt *runopts; /* terminated by a row with name == NULL */
  int (*dryrun)(const struct mu_app *app, const struct mu_cfg *cfg, struct mu_dryrun *out,
                struct mu_buf *err);
  int (*schedule)(struct mu_dryrun *req, struct mu_buf *err);
  int (*describe)(const char *app_id, const struct mu_cfg *cfg, struct mu_app_status *out,
                  struct mu_buf *err);
  int (*list)(const struct mu_cfg *cfg, struct mu_app_list_entry **out, size_t *n,
              struct mu_buf *err);
  int (*cancel_existing)(const char *app_id, const struct mu_cfg *cfg, struct mu_buf *err);
  /* Writes the log of one replica to fd `out` (of every replica, or every one of a role, with
   * role NULL or replica < 0, each line prefixed "role/replica "); with o->follow, until the
   * app is terminal. */
  int (*log_open)(const char *app_id, const char *role, long replica, const struct mu_log_opts *o,
                  int out, const struct mu_cfg *cfg, struct mu_buf *err);
  unsigned log_caps; /* enum mu_sched_log_caps */
  void (*dryrun_free)(struct mu_dryrun *req);
  /* The job spec of a submitted job (`muster describe`); NULL = not supported. Ownership:
   * *out is the caller's (mu_app_free). */
  int (*app_spec)(const char *app_id, const struct mu_cfg *cfg, struct mu_app **out,
                  struct mu_buf *err);
  /* Removes the files of every finished job (SUCCEEDED, FAILED, CANCELLED) that started before
   * `before` (Unix seconds) and appends their app ids to *removed (`muster list --prune`);
   * NULL: the scheduler keeps no files of ours. Returns: 0 or a negative MU_E* with err. */
  int (*prune)(double before, struct mu_strvec *removed, struct mu_buf *err);
};

/* The registry: the first entry is the default backend. Returns: the backend of a name or an
 * alias (k8s), or NULL for an unknown name. Ownership: static. */
const struct mu_sched_ops *mu_sched_find(const char *name);
/* Iterates: i = 0.. until NULL. Returns: the i-th backend, or NULL past the end. Ownership:
 * static. */
const struct mu_sched_ops *mu_sched_at(size_t i);

/* Appends the names of the registry, in its order, separated by sep with `last` before the last
 * one ("local, kubernetes or slurm"); with mark_default, the first is followed by " (default)".
 * Every message and help text that lists the schedulers writes them with this. */
void mu_sched_names(struct mu_buf *out, const char *sep, const char *last, int mark_default);

/* Handles: "SCHED://SESSION/APP_ID". Returns: 0 or MU_EINVAL. Ownership: caller frees the
 * three strings with mu_free(). */
int mu_handle_parse(const char *handle, char **sched, char **session, char **app_id);

void mu_app_status_release(struct mu_app_status *st);

/* Adds one replica's failure record (the JSON of an agent's error file or log line, or a
 * plain PyTorch error file) to st: the replica's msg becomes the record's summary, num_restarts
 * the largest restart count seen, and the record becomes the root cause when it is the
 * earliest. A text that is no record is ignored. Ownership: borrows text. */
void mu_app_status_add_failure(struct mu_app_status *st, size_t replica, const char *text,
                               size_t len);

/* The same for a log's tail: the last "failure record:" line in it, if any. */
void mu_app_status_scan_failure(struct mu_app_status *st, size_t replica, const char *log,
                                size_t len);

/* The backends (local.c, local_container.c, kubernetes.c, slurm.c). */
extern const struct mu_sched_ops mu_sched_local;
extern const struct mu_sched_ops mu_sched_local_container;
extern const struct mu_sched_ops mu_sched_kubernetes;
extern const struct mu_sched_ops mu_sched_slurm;

/* The session part of every handle muster makes. */
#define MU_SESSION "muster"

/* Frees what a dryrun produced (calls the backend's dryrun_free). Accepts NULL fields. */
void mu_dryrun_release(struct mu_dryrun *req);
void mu_app_list_free(struct mu_app_list_entry *l, size_t n);

/* ---------------------------------------------------------------------------------------------
 * Logs (log_reader.c, log_fanout.c)
 */

/* What to read: log_open's arguments, and a filter of the lines. */
struct mu_log_query {
  const char *app_id;
  const char *role; /* NULL: every role */
  long replica;     /* < 0: every replica (of the role) */
  struct mu_log_opts opts;
  const struct mu_cfg *cfg;
  mu_line_keep_fn *keep; /* NULL: every line; else the lines it keeps (lines.h), seen as written */
  void *keep_data;
};

/* A log reader: the backend's log_open running in a child process (it blocks, and follows for as
 * long as the job runs), writing into a pipe the caller reads. */
struct mu_log_reader {
  int fd;    /* the read end: the log's bytes; the caller may close it (-1) before finishing */
  int efd;   /* the read end of the child's reason pipe */
  pid_t pid; /* the child; -1 when not started */
  int flags;
};

enum mu_log_reader_flags {
  /* The child leads its own process group (what it starts, e.g. kubectl logs -f, stops with it)
   * and ignores SIGINT: a terminal's Ctrl-C is for the caller, which stops it with SIGTERM. */
  MU_LOG_READER_OWN_GROUP = 1 << 0,
};

/* Starts the reader of q's log (q->keep is not applied: the bytes are as log_open wrote them).
 * Returns: 0; MU_EIO with the reason in err when no pipe or child could be made.
 * Ownership: q is borrowed for the call; finish r with mu_log_reader_finish(). */
int mu_log_reader_start(struct mu_log_reader *r, const struct mu_sched_ops *s,
                        const struct mu_log_query *q, int flags, struct mu_buf *err);

/* Closes r's pipes and waits for its child, stopping it first (SIGTERM) with `stop`.
 * Returns: 0 when its log_open succeeded; MU_EIO when it failed or died, with its reason (or
 * "the log reader died") appended to why (may be NULL). Accepts a reader never started. */
int mu_log_reader_finish(struct mu_log_reader *r, int stop, struct mu_buf *why);

/* The log of every replica (role NULL), of every replica of a role (replica < 0), or of one,
 * through the backend's one-replica log_open, the replicas read at once by log readers, every
 * line prefixed "role/replica " (one replica's too, as TorchX), each line kept or not by
 * q->keep before its prefix, whole lines written to out_fd as they come (nothing is buffered
 * past a read). Returns: 0; MU_ENOENT for an unknown role or replica; the backend's error, or
 * MU_EIO with each failed replica's reason in err. */
int mu_sched_log(const struct mu_sched_ops *s, const struct mu_log_query *q, int out_fd,
                 struct mu_buf *err);

/* mu_sched_log() without a filter, for backends whose log_open reads one replica. */
int mu_sched_log_fanout(const struct mu_sched_ops *s, const char *app_id, const char *role,
                        long replica, const struct mu_log_opts *o, int out_fd,
                        const struct mu_cfg *cfg, struct mu_buf *err);

/* The generic operations: a NULL slot gives MU_ENOTSUP with a message in err.
 * Returns: 0, or a negative MU_E* code with the reason in err. Ownership: dryrun fills out
 * (release with mu_dryrun_release); describe fills out (mu_app_status_release). */
int mu_sched_dryrun(const struct mu_sched_ops *s, const struct mu_app *app,
                    const struct mu_cfg *cfg, struct mu_dryrun *out, struct mu_buf *err);
int mu_sched_schedule(struct mu_dryrun *req, struct mu_buf *err);
int mu_sched_describe(const struct mu_sched_ops *s, const char *app_id, const struct mu_cfg *cfg,
                      struct mu_app_status *out, struct mu_buf *err);
/* Idempotent: cancelling a terminal app is 0. MU_ENOENT for an unknown app. */
int mu_sched_cancel(const struct mu_sched_ops *s, const char *app_id, const struct mu_cfg *cfg,
                    struct mu_buf *err);

#endif
