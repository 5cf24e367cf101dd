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
 * the config's fds. Nothing here prints. The rendezvous is a client of the client library
 * (include/muster/client.h) on one of its backends (client/include/client/backends.h), picked
 * from torchrun's options by mu_agent_rdzv_resolve(). The pieces below the run are exported for
 * the unit tests: nnodes and rdzv_conf parsing, the worker environment, the error-file reader.
 */
#ifndef MU_AGENT_H
#define MU_AGENT_H

#include <stddef.h>

#include "buf.h"
#include "lines.h"
#include "strvec.h"

struct mu_round;
struct mu_client_backend;

/* The agent's exit codes (docs/agent.md). */
enum mu_agent_exit {
  MU_AGENT_EXIT_OK = 0,           /* every worker of the final round succeeded */
  MU_AGENT_EXIT_FAILED = 1,       /* a worker failed with no restart left, or the run was shut */
  MU_AGENT_EXIT_USAGE = 2,        /* bad command line */
  MU_AGENT_EXIT_RENDEZVOUS = 3,   /* cannot reach/join the rendezvous (endpoint, timeout, ...) */
  MU_AGENT_EXIT_NO_PROGRESS = 93, /* stop retrying: no progress over N consecutive restarts */
  MU_AGENT_EXIT_SIGNAL_BASE = 128 /* + N: stopped by signal N (SIGINT 130, SIGTERM 143) */
};

/* The timeout before the job's first progress after a (re)start, when --hang-timeout is on and
 * --hang-initial-timeout is not given: 10 minutes covers `import torch`, the process group's
 * set-up and a first Neuron/XLA graph compilation of a model whose cache is warm, while a job
 * that hangs before its first step still restarts within minutes (docs/agent.md). */
#define MU_AGENT_HANG_INITIAL_DEFAULT_S 600.0
/* --hang-timeout auto's floor, seconds (rules/progress.h's MU_AUTO_FLOOR_MS) */
#define MU_AGENT_AUTO_FLOOR_S 5.0

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
  const char *endpoint; /* the rendezvous, as its backend shows it (mu_agent_rdzv_resolve) */
  const char *run_id;
  long max_restarts;
  double monitor_interval_s; /* accepted for torchrun; monitoring is event-driven */
  const char *role;          /* ROLE_NAME, default "default" */
  const char *log_dir;       /* NULL: no per-worker files */
  int tee;                   /* with log_dir: also print to the console */
  int standalone;            /* run an embedded musterd on a free loopback port */
  const char *node_id;       /* NULL: host-pid-random */
  const char *local_addr;    /* NULL: the address used to reach the endpoint */
  double join_timeout_s;     /* default 600 */
  double last_call_s;        /* < 0: server default */
  double lease_ttl_s;        /* < 0: server default */
  double stop_grace_s;       /* SIGTERM -> SIGKILL delay, default 5 */
  char **cmd;                /* the worker command, NULL-terminated (borrowed from argv) */
  const struct mu_client_backend *backend; /* NULL: the one the endpoint picks */
  int static_rank;                /* torchrun's static rendezvous: this node's --node_rank, the
                                   * node rank it keeps in every round; -1: ranks by join order */
  const char *master_addr;        /* static: MASTER_ADDR of every worker; NULL: rank 0's address */
  const char *redirects_spec;     /* torchrun's --redirects/--tee specs ("3", "0:1,1:2"); NULL:
                                   * not given (then --log-dir alone makes the console quiet) */
  const char *tee_spec;           /* torchrun's --tee spec, the same form; NULL: see tee */
  const char *ranks_filter;       /* torch 2.x --local-ranks-filter "0,2": only these local
                                   * ranks' output shows on the console; NULL: all */
  int out_fd, err_fd;             /* where the workers' prefixed output goes; -1: nowhere */
  const char *error_file;         /* where the failure record goes (docs/agent.md); NULL: none */
  double hang_timeout_s;          /* > 0: the job without progress for this long is hung */
  double hang_initial_timeout_s;  /* the same before the job's first progress after a (re)start;
                                   * <= 0: MU_AGENT_HANG_INITIAL_DEFAULT_S (or hang_timeout_s
                                   * when longer) */
  int hang_auto;                  /* --hang-timeout auto: the step timeout is learned (then
                                   * hang_timeout_s is its floor, only turning the watch on) */
  const char *progress_regex;     /* --progress-regex: only matching output lines are progress */
  int max_no_progress_restarts;   /* stop retrying (exit MU_AGENT_EXIT_NO_PROGRESS) after this
                                   * many consecutive restarts without progress; 0: never */
  const char *health_check;       /* a shell command run before every join; NULL: none */
  double health_check_timeout_s;  /* a check running longer failed (default 60) */
  double health_check_interval_s; /* a failed check is run again this much later (default 30) */
  const char *health_root;        /* the builtin checks read their files under this directory
                                   * (/sys/..., /proc/self/mounts) instead of /; NULL: / */
  const char *signals_to_handle;  /* torch 2.x's TORCHELASTIC_SIGNALS_TO_HANDLE for the workers
                                   * (default SIGTERM,SIGINT,SIGHUP,SIGQUIT) */
  int virtual_local_rank;         /* torch 2.x: LOCAL_RANK=0 and one CUDA device per worker */
  mu_agent_report_fn *report;     /* NULL: reports are dropped */
  void *report_data;
};

/* Fills the defaults above (out_fd and err_fd -1, no report callback; error_file from the
 * agent's own TORCHELASTIC_ERROR_FILE, as torchrun writes its root cause there). */
void mu_agent_config_init(struct mu_agent_config *cfg);
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

/* Parses torch 2.x's --local-ranks-filter: local ranks separated by commas ("0,2"). *in says
 * whether local_rank is one of them. Returns: 0, or MU_EINVAL with the problem in err. */
int mu_agent_parse_ranks_filter(const char *spec, int local_rank, int *in, struct mu_buf *err);

/* Whether stream 1 (stdout) or 2 (stderr) of local_rank shows on the agent's console: never
 * for a rank --local-ranks-filter leaves out (torch 2.x: its files are still written); with
 * no --log-dir always; else as torchrun when --redirects was given (a redirected stream shows
 * only when --tee covers it), else only with --tee. */
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

/* The heartbeat file's line protocol (docs/agent.md, "Progress"): `line` (len bytes, no '\n')
 * is `step N`, `step N/T` (T: the job's total steps) or `checkpoint N` (N, T: 1 to 18 decimal
 * digits; spaces or tabs around the words). Returns: 1 step, 2 checkpoint, with *n, and *total
 * (T, or -1 without one; total may be NULL); 0 for anything else (plain progress, never an
 * error). */
int mu_agent_parse_progress_line(const char *line, size_t len, long long *n, long long *total);

/* Reads a TORCHELASTIC_ERROR_FILE and appends its message's first max_lines lines to out,
 * each prefixed by `indent`. Understands torch's {"message": {"message": ..., "extraInfo":
 * {...}}}, {"message": "..."} and plain text.
 * Returns: 0; MU_ENOENT when the file does not exist or is empty. */
int mu_agent_error_file_summary(const char *path, size_t max_lines, const char *indent,
                                struct mu_buf *out);

/* Runs the node's health check (cfg->health_check, with /bin/sh -c; or the builtin Neuron check,
 * below) to its end, at most cfg->health_check_timeout_s. Appends its output (stdout and stderr
 * together, the last MU_AGENT_CHECK_OUTPUT_MAX bytes; the builtin's: one line per problem) to
 * `output`, and why it failed to `why`; a builtin that passed may leave a note in `why` (what it
 * checked, or why it skipped), for the log.
 * Returns: 0 when it exited 0 in time (the builtin: found no problem); MU_EINVAL when it failed. */
#define MU_AGENT_CHECK_OUTPUT_MAX 4096
int mu_agent_health_check(const struct mu_agent_config *cfg, struct mu_buf *output,
                          struct mu_buf *why);

/* The builtin Neuron check, `--health-check neuron[:KEY=VALUE,...]` (agent_neuron.c;
 * docs/agent.md, "The Neuron health check"): keys type= (an instance type of
 * common/neuron_types.c: the device, core and EFA counts to expect), lnc=1|2 (default 2),
 * devices=N and efa=N (instead of or over the type's), mount=DIR (the job's shared volume). */
struct mu_neuron_type;
struct mu_agent_neuron {
  const struct mu_neuron_type *type; /* NULL: no type given */
  int lnc;                           /* 1 or 2 */
  long devices, efa;                 /* expected per node; -1: not checked */
  char *mount;                       /* a directory that must be a mount point; NULL: none */
};

/* Returns: 1 when `check` names the builtin ("neuron" or "neuron:..."), else 0 (also for NULL). */
int mu_agent_neuron_is_builtin(const char *check);

/* Parses a builtin check's text into *n. Returns: 0, or MU_EINVAL with the problem and the fix
 * in err. Ownership: n's strings are its own (mu_agent_neuron_release). */
int mu_agent_neuron_parse(const char *check, struct mu_agent_neuron *n, struct mu_buf *err);
void mu_agent_neuron_release(struct mu_agent_neuron *n);

/* Runs the Neuron check against the files under `root` (NULL: /): devices and their cores,
 * uncorrectable ECC counters, `neuron-ls -j` when it is on PATH (run at most timeout_s), EFA
 * interfaces, the mount. Appends one line per problem to `out`, each naming the device and the
 * counter; on a pass, what was checked to `note`; without the Neuron driver it passes with the
 * reason in `note`. Returns: 0 on a pass; MU_EINVAL with the count of problems in `note`. */
int mu_agent_neuron_run(const struct mu_agent_neuron *n, const char *root, double timeout_s,
                        struct mu_buf *out, struct mu_buf *note);

/* Returns: the oom_kill count of this process's cgroup (cgroup v2 memory.events), or -1 when
 * it cannot be read. A worker killed by SIGKILL while the count rose was likely killed for
 * memory. */
long mu_agent_oom_kills(void);

/* --nproc-per-node N | cpu | gpu | auto: a number; the CPUs; the GPUs (/dev/nvidiaN, else
 * `nvidia-smi -L`), else the Neuron cores (/dev/neuronN); auto: GPUs or Neuron cores, else the
 * CPUs. MUSTER_DEVICE_DIR replaces /dev (for the tests).
 * Returns: 0 with *n, or MU_EINVAL with the problem in err. */
int mu_agent_parse_nproc(const char *s, int *n, struct mu_buf *err);

/* The interpreter a script runs with (torchrun: PYTHON_EXEC, else its own sys.executable;
 * muster has no interpreter of its own, so: PYTHON_EXEC, else python3, else python, from PATH,
 * made absolute as sys.executable is). Returns: 0, or MU_ENOENT when there is none. */
int mu_agent_find_python(char *out, size_t n);

/* `muster agent --exec-worker PPID -- CMD ARGS...`, run by the agent for each worker: the
 * worker is killed when the agent that started it (ppid) dies, even by SIGKILL, so no orphan
 * keeps a GPU or a port; then cmd replaces this process.
 * Returns (only when cmd could not be run): 127 with the reason in err, or
 * MU_AGENT_EXIT_FAILED when the agent died first. */
int mu_agent_exec_worker(long ppid, char **cmd, struct mu_buf *err);

/* ---------------------------------------------------------------------------------------------
 * The rendezvous (agent_rdzv.c)
 */

/* What torchrun's options say of the rendezvous. */
struct mu_agent_rdzv_args {
  const char *backend;  /* --rdzv-backend; NULL: the endpoint's (static without one) */
  const char *endpoint; /* --rdzv-endpoint */
  const char *run_id;   /* --rdzv-id; NULL: torchrun's default, "none" */
  int standalone;       /* --standalone */
  const char *node_rank, *master_addr, *master_port; /* static */
};

/* What a resolved rendezvous holds. */
struct mu_agent_rdzv {
  struct mu_agent_standalone *server; /* the embedded musterd (standalone, static rank 0) */
  char *endpoint;                     /* what cfg->endpoint points at */
};

/* Picks the rendezvous: --standalone, else the backend of the client's table that
 * --rdzv-backend names (or the endpoint's scheme picks), else static; sets cfg->run_id,
 * backend, endpoint (in the form workers and messages show), static_rank and master_addr, and
 * starts the embedded musterd it needs (said through cfg->report).
 * Returns: 0, or an agent exit code with the words in err.
 * Ownership: cfg points into a and out; release out with mu_agent_rdzv_release(). */
int mu_agent_rdzv_resolve(const struct mu_agent_rdzv_args *a, struct mu_agent_config *cfg,
                          struct mu_agent_rdzv *out, struct mu_buf *err);
/* Stops the embedded musterd and frees. Accepts NULL. */
void mu_agent_rdzv_release(struct mu_agent_rdzv *r);
/* Appends the names --rdzv-backend takes ("muster (musterd, etcd, etcd-v2), etcd-v3 (etcd3),
 * static"). */
void mu_agent_rdzv_names(struct mu_buf *out);
/* Appends one line per backend (name, what it is, its endpoint), for `muster agent -h` (the
 * bash completion reads the names from there). */
void mu_agent_rdzv_help(struct mu_buf *out);

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
