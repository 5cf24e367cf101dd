/* The agent layer: `muster agent`, the per-node torchrun replacement (docs/agent.md).
 *
 * Owns: joining a rendezvous round, running the node's workers with the torchrun environment,
 * stopping and restarting them when a worker fails or the round changes, and the embedded
 * musterd of --standalone. It may call common/ (and the client of include/muster/client.h)
 * and musterd's embedding header (standalone.c only); nothing of cmd/, sched/ or spec/: the
 * same agent runs inside pods and Slurm tasks, where none of them exists.
 *
 * cmd/cmd_agent.c parses the command line into a struct mu_agent_config and calls
 * mu_agent_run(), which returns the exit code and the final error; progress and worker failure
 * reports come through the config's report callback while it runs, and worker output goes to
 * the config's fds. Nothing here prints. The rendezvous calls go through the interface of
 * rdzv_backend.h. The pieces below the run are exported for the unit tests: nnodes and
 * rdzv_conf parsing, the worker environment, and the error-file reader.
 */
#ifndef MU_AGENT_H
#define MU_AGENT_H

#include <stddef.h>

#include "buf.h"
#include "lines.h"
#include "strvec.h"

struct mu_round;
struct mu_rdzv_ops;

/* The agent's exit codes (docs/agent.md). */
enum mu_agent_exit {
  MU_AGENT_EXIT_OK = 0,           /* every worker of the final round succeeded */
  MU_AGENT_EXIT_FAILED = 1,       /* a worker failed with no restart left, or the run was shut */
  MU_AGENT_EXIT_USAGE = 2,        /* bad command line */
  MU_AGENT_EXIT_RENDEZVOUS = 3,   /* cannot reach/join the rendezvous (endpoint, timeout, ...) */
  MU_AGENT_EXIT_SIGNAL_BASE = 128 /* + N: stopped by signal N (SIGINT 130, SIGTERM 143) */
};

/* What the agent reports while it runs (the text has no trailing newline unless said). */
enum mu_agent_report {
  MU_AGENT_PROGRESS, /* one line: joined a round, started the workers, restarting, ... */
  MU_AGENT_FAILURE,  /* a worker failure: several lines, each ending in '\n' */
  MU_AGENT_DEBUG,    /* a detail worth a debug log line (a heartbeat that failed) */
};
/* Called from the agent's main thread, for MU_AGENT_DEBUG also from its watcher thread, and
 * for the waiting line (MU_AGENT_PROGRESS) from the thread that watches a pending join, so it
 * must be safe to call from several threads. Ownership: text is borrowed for the call. */
typedef void mu_agent_report_fn(void *data, enum mu_agent_report kind, const char *text);

struct mu_agent_config {
  int min_nodes, max_nodes;
  int nproc_per_node;
  const char *endpoint; /* HOST:PORT; NULL only with standalone */
  const char *run_id;
  long max_restarts;
  double monitor_interval_s;      /* accepted for torchrun; monitoring is event-driven */
  const char *role;               /* ROLE_NAME, default "default" */
  const char *log_dir;            /* NULL: no per-worker files */
  int tee;                        /* with log_dir: also print to the console */
  int standalone;                 /* run an embedded musterd on a free loopback port */
  const char *node_id;            /* NULL: host-pid-random */
  const char *local_addr;         /* NULL: the address used to reach the endpoint */
  double join_timeout_s;          /* default 600 */
  double last_call_s;             /* < 0: server default */
  double lease_ttl_s;             /* < 0: server default */
  double stop_grace_s;            /* SIGTERM -> SIGKILL delay, default 5 */
  char **cmd;                     /* the worker command, NULL-terminated (borrowed from argv) */
  const struct mu_rdzv_ops *rdzv; /* the rendezvous backend, default musterd's /v1 */
  int static_rank;                /* torchrun's static rendezvous: this node's --node_rank, the
                                   * node rank it keeps in every round; -1: ranks by join order */
  const char *master_addr;        /* static: MASTER_ADDR of every worker; NULL: rank 0's address */
  const char *redirects_spec;     /* torchrun's --redirects/--tee specs ("3", "0:1,1:2"); NULL:
                                   * not given (then --log-dir alone makes the console quiet) */
  const char *tee_spec;           /* torchrun's --tee spec, the same form; NULL: see tee */
  int out_fd, err_fd;             /* where the workers' prefixed output goes; -1: nowhere */
  const char *error_file;         /* where the failure record goes (docs/agent.md); NULL: none */
  double hang_timeout_s;          /* > 0: a worker without progress for this long is hung */
  double hang_initial_timeout_s;  /* the same before a worker's first progress; <= 0: as above */
  const char *health_check;       /* a shell command run before every join; NULL: none */
  double health_check_timeout_s;  /* a check running longer failed (default 60) */
  double health_check_interval_s; /* a failed check is run again this much later (default 30) */
  mu_agent_report_fn *report;     /* NULL: reports are dropped */
  void *report_data;
};

/* Fills the defaults above (out_fd and err_fd -1, no report callback; error_file from the
 * agent's own TORCHELASTIC_ERROR_FILE, as torchrun writes its root cause there). */
void mu_agent_config_init(struct mu_agent_config *cfg);
/* The backend --rdzv-backend NAME picks: "muster"/"musterd" or "etcd-v3" (an etcd v3 cluster);
 * with no name, "etcd-v3" when the endpoint starts with "etcd-v3://". Returns: NULL for any
 * other name (torchrun's c10d, etcd: the default backend stays). Ownership: static. */
const struct mu_rdzv_ops *mu_agent_backend(const char *name, const char *endpoint);

/* Parses "N" or "MIN:MAX". Returns: 0, or MU_EINVAL with the problem in err. */
int mu_agent_parse_nnodes(const char *s, int *min, int *max, struct mu_buf *err);

/* Applies torchrun's --rdzv-conf "k=v,k=v": join_timeout, last_call_timeout, lease_ttl
 * (seconds). Keys torchrun knows but muster does not need are ignored; others are errors.
 * Returns: 0, or MU_EINVAL with a message naming the key in err. */
int mu_agent_parse_rdzv_conf(const char *s, struct mu_agent_config *cfg, struct mu_buf *err);

/* Parses torchrun's Std spec for --redirects/--tee: "0".."3" for every worker, or
 * "LOCAL_RANK:N,..." per worker (1 stdout, 2 stderr, 3 both). *mask gets local_rank's value (0
 * for a rank the map leaves out). Returns: 0, or MU_EINVAL with the problem in err. */
int mu_agent_parse_std(const char *spec, int local_rank, int *mask, struct mu_buf *err);

/* Whether stream 1 (stdout) or 2 (stderr) of local_rank shows on the agent's console: with no
 * --log-dir always; else as torchrun when --redirects was given (a redirected stream shows only
 * when --tee covers it), else only with --tee. */
int mu_agent_console(const struct mu_agent_config *cfg, int local_rank, int stream);

/* Builds the environment of one worker: `base` (NULL-terminated "K=V", may be NULL) without
 * the variables the agent sets, then the torchrun contract (docs/agent.md, "Worker environment"),
 * MUSTER_RDZV_ENDPOINT, MUSTER_RUN_ID and MUSTER_ROUND.
 * Ownership: appends owned strings to *out (release with mu_strvec_release()). */
void mu_agent_worker_env(const struct mu_agent_config *cfg, const char *endpoint,
                         const struct mu_round *r, int local_rank, int restart_count,
                         const char *error_file, char *const *base, struct mu_strvec *out);

/* The worker variables of the progress watch: MUSTER_HEARTBEAT_FILE=heartbeat_file, and with
 * a hang timeout PYTHONFAULTHANDLER=1 unless `base` sets it (a Python worker then prints every
 * thread's stack on SIGABRT). Ownership: appends owned strings to *out. */
void mu_agent_progress_env(const struct mu_agent_config *cfg, const char *heartbeat_file,
                           char *const *base, struct mu_strvec *out);

/* Reads a TORCHELASTIC_ERROR_FILE and appends its message's first max_lines lines to out,
 * each prefixed by `indent`. Understands torch's {"message": {"message": ..., "extraInfo":
 * {...}}}, {"message": "..."} and plain text.
 * Returns: 0; MU_ENOENT when the file does not exist or is empty. */
int mu_agent_error_file_summary(const char *path, size_t max_lines, const char *indent,
                                struct mu_buf *out);

/* Runs the node's health check (cfg->health_check, with /bin/sh -c) to its end, at most
 * cfg->health_check_timeout_s. Appends its output (stdout and stderr together, the last
 * MU_AGENT_CHECK_OUTPUT_MAX bytes) to `output`, and why it failed to `why`.
 * Returns: 0 when it exited 0 in time; MU_EINVAL when it failed. */
#define MU_AGENT_CHECK_OUTPUT_MAX 4096
int mu_agent_health_check(const struct mu_agent_config *cfg, struct mu_buf *output,
                          struct mu_buf *why);

/* Returns: the oom_kill count of this process's cgroup (cgroup v2 memory.events), or -1 when
 * it cannot be read. A worker killed by SIGKILL while the count rose was likely killed for
 * memory. */
long mu_agent_oom_kills(void);

/* Runs the agent to its end: join, run the workers, restart or re-join as the rounds go.
 * Returns: an enum mu_agent_exit value (or 128 + signal); for any code but MU_AGENT_EXIT_OK
 * (and a signal) what went wrong, with what to do about it, is in err. */
int mu_agent_run(const struct mu_agent_config *cfg, struct mu_buf *err);

/* --standalone: an embedded musterd on its own thread (standalone.c).
 * Returns: 0 with the endpoint ("127.0.0.1:PORT") in ep, or a negative code. */
struct mu_agent_standalone;
int mu_agent_standalone_start(struct mu_agent_standalone **out, char *ep, size_t eplen);
/* The same on host:port (an IPv4 literal; "0.0.0.0" is every interface, and ep then names
 * 127.0.0.1): the embedded musterd of a static rendezvous's node rank 0 (--master_port).
 * Returns: 0, or a negative code (MU_EADDRINUSE-like uv codes pass through). */
int mu_agent_standalone_listen(struct mu_agent_standalone **out, const char *host, int port,
                               char *ep, size_t eplen);
/* Stops and frees. Accepts NULL. */
void mu_agent_standalone_stop(struct mu_agent_standalone *s);

#endif
