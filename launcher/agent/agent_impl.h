/* Inside the agent: the state that agent_run.c (join, the rounds, the exit code) and
 * agent_attempt.c (one attempt: the workers on a libuv loop and the watcher thread) share.
 * Not for other layers: cmd/ sees agent.h only.
 */
#ifndef MU_AGENT_IMPL_H
#define MU_AGENT_IMPL_H

#include <limits.h>
#include <regex.h>
#include <stdint.h>

#include <uv.h>

#include "muster/client.h"

#include "client/goodput.h"

#include "agent.h"
#include "agent_timer.h"
#include "child.h"
#include "failrec.h"

/* How an attempt ended. */
enum mu_agent_outcome {
  MU_AGENT_RUNNING = 0,
  MU_AGENT_SUCCEEDED,
  MU_AGENT_WORKER_FAILED,
  MU_AGENT_REJOIN, /* the round broke or nodes wait: re-join without counting a restart */
  MU_AGENT_RUN_CLOSED,
  MU_AGENT_RUN_SHUT,
  MU_AGENT_SIGNALED,
};

struct mu_agent;

struct mu_agent_worker {
  struct mu_agent *ag;
  int local_rank, rank;
  struct mu_child child; /* the process and its stdout/stderr pipes */
  int spawned, exited, out_open, err_open;
  int64_t exit_status;
  int term_signal;
  int spawn_error;      /* a uv error from uv_spawn */
  int stopped;          /* exited after the agent began stopping the workers */
  int log_out, log_err; /* per-worker files, -1 without --log-dir */
  struct mu_line_prefixer pout, perr;
  char *error_file;
  long long exit_order;
  long long end_ms;    /* wall clock when it ended (Unix ms) */
  char err_tail[4096]; /* the last bytes of its stderr, for a failure without error file */
  size_t err_tail_len;
  /* progress (agent_attempt.c): its heartbeat file touched, or a line of output while it never
   * touched it */
  char *heartbeat_file;
  long long hb_mtime_ns; /* the file's mtime when last seen (as the agent created it first) */
  int hb_touched;        /* it touched the file at least once: only touches count now */
  long long progress_ms; /* wall clock of its last progress; 0: none yet */
  long long step;        /* the last `step N` of its heartbeat file; -1: none */
  char re_line[2][512];  /* --progress-regex: the line being read (stdout, stderr), cut */
  size_t re_len[2];
  struct mu_buf stacks; /* its stderr after the agent asked for its stacks (SIGABRT) */
  /* the file timer (agent_timer.c) that reaped it: its scope (NULL: none), signal, lateness */
  char *timer_scope;
  int timer_signal;
  long long timer_late_ms;
};

struct mu_agent {
  const struct mu_agent_config *cfg;
  const char *endpoint;
  char node_id[256];
  char addr[128];
  char base_dir[PATH_MAX]; /* attempt dirs live here */
  char exe[PATH_MAX];      /* this muster binary, for the --exec-worker shim ("" = none) */
  int own_base_dir;        /* a temp dir we remove at the end */
  struct mu_client *rdzv;  /* the main thread's client of the rendezvous */
  struct mu_round round;
  int restart_count;
  int reached; /* the rendezvous answered once: join() retries for the whole join timeout */
  int attempt;
  int shut_pending;     /* its failure found no restart left: the run is shut once others re-join */
  long oom_kills_start; /* the cgroup's oom_kill count when the attempt began; -1 */
  struct mu_failrec last_failure; /* the last failure reported (give_up's reason) */
  regex_t progress_re;            /* --progress-regex, compiled (has_progress_re) */
  int has_progress_re;
  int progress_base; /* the run's restart count at this node's last attempt whose job made
                      * progress, or at its first attempt (progress_base_set): the restarts
                      * since are those without progress (item 7) */
  int progress_base_set;
  long long auto_kept_ms; /* --hang-timeout auto: the value in use, kept across attempts */

  /* Per attempt. */
  uv_loop_t loop;
  struct mu_agent_worker *w;
  int nworkers;
  int nexited;
  int open_handles; /* worker processes and pipes not yet closed */
  enum mu_agent_outcome outcome;
  int stopping;
  int failed_idx; /* the first worker that failed on its own, -1 */
  long long exit_seq;
  int signal_seen;
  uv_timer_t kill_timer;
  uv_timer_t drain_timer;
  uv_signal_t sig_int, sig_term;
  uv_async_t async;
  int loop_handles_closed;
  uv_timer_t watch_timer;      /* the progress and hang watch: heartbeat files, every tick */
  uv_timer_t stacks_timer;     /* the grace after asking for stacks, then stop */
  long long start_ms;          /* wall clock when the workers started */
  long long first_progress_ms; /* the attempt's first progress (any worker), 0: none yet */
  int hung_idx;                /* the worker seen hung first, -1 */
  long long hung_at_ms;        /* wall clock when the agent saw it */
  int asking_stacks;           /* SIGABRT sent: the workers print their stacks and end */
  long long hung_idle_ms;      /* the job's time without progress when the hang was seen */
  int hung_first;              /* the hang came before the job's first progress */
  /* The job's progress (agent_progress.c). Under mu: job_seen_ms, prog_seq, step, checkpoint,
   * auto_ms, share_stop. */
  long long job_local_ms;    /* this node's last progress (loop only), 0: none this attempt */
  long long job_seen_ms;     /* when the sharer last saw another node's progress, 0: never */
  unsigned long prog_seq;    /* this node's progress events this attempt */
  long long step;            /* the highest `step N` of this node's heartbeat files, -1 */
  long long checkpoint;      /* the last `checkpoint N`, -1 */
  long long first_step;      /* the attempt's first `step N`, -1 */
  long long first_step_ms;   /* when it was seen, Unix ms */
  long long total_steps;     /* the job's total (`step N/T`), -1 */
  long long auto_ms;         /* auto: the step timeout in use this attempt, 0 while learning */
  long long auto_slowest_ms; /* auto: the slowest interval between the job's progress (loop) */
  uint32_t auto_intervals;   /* auto: how many were seen (loop) */
  long long auto_prev_ms;    /* auto: the job's progress before (loop) */
  uv_thread_t sharer;
  int sharer_started;
  int share_stop;
  uv_cond_t share_cond;
  /* What the rendezvous heard when the attempt ended (before the watcher's watch closed). */
  struct mu_report_answer answer; /* its answer to the failure report */
  int hinted;                     /* the 'failing' hint was sent this attempt */
  int reported;                   /* 1: answered; 0: not sent; < 0: the call's error */
  char report_err[256];           /* the words of that error */
  int left;                       /* after success: 1 left, < 0 the leave's error */

  struct mu_agent_timer *timer; /* the file timer of this attempt (agent_timer.c), NULL: off */

  /* Watcher thread. */
  uv_thread_t watcher;
  int watcher_started;
  int cancel_pipe[2];
  uv_mutex_t mu;
  int posted; /* enum mu_watch_event + 1, or 0; read under mu */
  char posted_msg[256];

  /* Reporter thread: the reports made from the loop's callbacks (the workers' start, their
   * first progress, the 'failing' hint) go out on it, so a slow rendezvous never stops the
   * loop (the hang watch, the worker monitor). Its state is under mu. */
  uv_thread_t reporter;
  int reporter_started;
  uv_cond_t rep_cond;
  unsigned rep_pending; /* 1 << enum mu_report_event, not sent yet */
  int rep_stop;         /* send what is pending, then end */
};

/* The run's log directory `base_dir` (<--log-dir>/<run id>), made private (0700) when absent
 * and refused when it is someone else's or a link (a planted one would take the workers'
 * output, or point their logs' O_TRUNC at another file): torchrun makes it with mkdtemp().
 * `log_dir` itself must not be renamable by others. Returns: 0, or an exit code with the
 * message in err. */
int mu_agent_own_log_dir(const char *log_dir, const char *base_dir, struct mu_buf *err);

/* A client of the run's rendezvous (a connection per thread: the main thread, the watcher, the
 * waiting line). Returns: 0, or MU_EINVAL with the words in err. Ownership: *out is the
 * caller's (mu_client_free). */
int mu_agent_client(const struct mu_agent *ag, struct mu_client **out, struct mu_buf *err);
/* A client call's result; its words are appended to err when it failed. Returns: rc. */
int mu_agent_said(const struct mu_client *c, int rc, struct mu_buf *err);

/* Formats one report and hands it to the config's report callback (agent_run.c). */
void mu_agent_say(const struct mu_agent *ag, enum mu_agent_report kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* "rank F" or "ranks F-L" for count ranks from first. Returns: buf. */
const char *mu_agent_ranks(char *buf, size_t n, int first, int count);

/* Runs the workers of the joined round to their end (agent_attempt.c). The workers stay in
 * ag->w for the caller to inspect until mu_agent_workers_free().
 * Returns: how the attempt ended. */
enum mu_agent_outcome mu_agent_attempt(struct mu_agent *ag);

/* Builds the failure record of the attempt's failed (or hung) worker into ag->last_failure
 * (after a hang the hung one is picked now: ag->failed_idx). */
void mu_agent_failure_record(struct mu_agent *ag);

/* Reports the failure of ag->w[ag->failed_idx] (and of any other worker that failed on its
 * own) as one MU_AGENT_FAILURE report, with the worker's error file and the restarts the run
 * has left (from the rendezvous's answer); then its failure record (failrec.h) as a progress
 * line and into cfg->error_file. */
void mu_agent_failure_report(struct mu_agent *ag);

/* Describes how a worker ended ("exit code 3", "killed by signal 9 (Killed)").
 * Ownership: writes at most n bytes to out. */
void mu_agent_describe_exit(const struct mu_agent_worker *w, char *out, size_t n);

/* ---------------------------------------------------------------------------------------------
 * The job's progress (agent_progress.c): shared through the rendezvous, the hang decision's
 * inputs, the heartbeat file's lines, --progress-regex, --hang-timeout auto.
 */

/* Compiles --progress-regex (once per agent). Returns: 0, or MU_AGENT_EXIT_USAGE with the
 * message in err. */
int mu_agent_progress_init(struct mu_agent *ag, struct mu_buf *err);
void mu_agent_progress_release(struct mu_agent *ag);
/* Per attempt: clears the job's progress, starts and stops the sharer thread. */
void mu_agent_progress_begin(struct mu_agent *ag);
void mu_agent_sharer_start(struct mu_agent *ag);
void mu_agent_sharer_stop(struct mu_agent *ag);
/* A worker of this node progressed at at_ms (loop). */
void mu_agent_job_progress(struct mu_agent *ag, long long at_ms);
/* The job's last progress seen on this node (any rank on any node), 0: none this attempt. */
long long mu_agent_job_last(struct mu_agent *ag);
/* The step timeout and the initial timeout in use, ms. */
long long mu_agent_step_timeout_ms(struct mu_agent *ag);
long long mu_agent_initial_timeout_ms(const struct mu_agent_config *cfg);
/* Worker w's heartbeat file changed: its last line may say `step N` or `checkpoint N`. */
void mu_agent_heartbeat_line(struct mu_agent *ag, struct mu_agent_worker *w);
/* What w printed (a read of n bytes): does a line of it count as progress? Without
 * --progress-regex every complete line does; with it, only matching ones. */
int mu_agent_output_progress(struct mu_agent_worker *w, int is_err, const char *data, size_t n);

/* At the end of every attempt, whatever ended it: when its job made progress, the run's
 * restart count of its round is the new base of "consecutive restarts without progress". */
void mu_agent_progress_end(struct mu_agent *ag);
/* Item 7, "stop retrying": after an attempt that failed, counts the consecutive restarts whose
 * job made no progress (the run's restarts since the base, whoever reported them); at
 * --max-no-progress-restarts it shuts the run down with a reason that starts with
 * MU_AGENT_STOP_RETRYING (every node then exits MU_AGENT_EXIT_NO_PROGRESS) and returns 1 with
 * the message in err. */
#define MU_AGENT_STOP_RETRYING "stop retrying:"
int mu_agent_stop_retrying(struct mu_agent *ag, struct mu_buf *err);
/* The exit code of a run shut down for `why`: MU_AGENT_EXIT_NO_PROGRESS for a stop-retrying
 * shutdown, else MU_AGENT_EXIT_FAILED. */
int mu_agent_shut_exit(const char *why);

/* The file timer of torch.distributed.elastic.timer (agent_timer.c), per attempt: started on
 * the attempt's loop before the workers when the agent's environment has
 * TORCHELASTIC_ENABLE_FILE_TIMER=1 (ag->timer stays NULL otherwise, or when the pipe cannot be
 * made, which is said); its handles closed with the loop's; freed (the pipe removed) after the
 * loop closed. */
void mu_agent_timer_start(struct mu_agent *ag);
void mu_agent_timer_close(struct mu_agent *ag);
void mu_agent_timer_free(struct mu_agent *ag);
/* The pipe's path for the workers' TORCHELASTIC_TIMER_FILE; NULL when the timer is off. */
const char *mu_agent_timer_path(const struct mu_agent *ag);
/* Appends why the file timer reaped w (w->timer_scope set): its scope, the delay, the signal. */
void mu_agent_timer_describe(const struct mu_agent_worker *w, struct mu_buf *out);

/* Closes the workers' log files and frees them. */
void mu_agent_workers_free(struct mu_agent *ag);

/* Runs args (args[0] looked up on PATH) to its end, at most timeout_s, in its own process group
 * (killed with it at the timeout), keeping its stdout and stderr together: the last `cap` bytes
 * when `tail`, else the first `cap` (more is a failure), appended to `output`; why it failed to
 * `why` (agent_health.c). Returns: 0 when it exited 0 in time; MU_EINVAL when it failed. */
int mu_agent_run_check(char **args, double timeout_s, size_t cap, int tail, struct mu_buf *output,
                       struct mu_buf *why);

/* The builtin Neuron check of cfg->health_check (agent_neuron.c), as mu_agent_health_check. */
int mu_agent_neuron_health(const struct mu_agent_config *cfg, struct mu_buf *output,
                           struct mu_buf *why);

#endif
