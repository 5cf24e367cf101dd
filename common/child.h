/* Child processes, all through uv_spawn. A child on a libuv loop with its stdout and stderr on
 * pipes, in its own session (so in its own process group: kill(-pid, sig) reaches it and
 * whatever it forks): `muster agent`'s workers and the local supervisor's replicas, which read
 * the pipes on the loop and wait for the exit callback. And a program run to its end on a loop
 * of its own (mu_child_run): the cluster tools (sched_exec.c). Library code: never prints.
 *
 *   struct mu_child c;
 *   struct mu_child_opts o = {file, args, env, on_exit, on_alloc, on_read, on_close, data};
 *   int rc = mu_child_spawn(loop, &c, &o);
 *   (0: on_read gets the output of c.out and c.err; close each pipe at its EOF and c.proc in
 *    on_exit. < 0: the three handles are already closing, on_close fires for each.)
 */
#ifndef MU_CHILD_H
#define MU_CHILD_H

#include <uv.h>

#include "buf.h"

struct mu_child {
  uv_process_t proc;
  uv_pipe_t out; /* the child's stdout */
  uv_pipe_t err; /* the child's stderr */
};

enum mu_child_flags {
  MU_CHILD_SAME_GROUP = 1 << 0, /* stays in our session and process group (not setsid), so that
                                 * a signal to our group (a terminal's, Slurm's) reaches it */
  MU_CHILD_STDIN = 1 << 1,      /* inherits our stdin instead of /dev/null */
};

struct mu_child_opts {
  const char *file; /* a name is looked up on the PATH of env */
  char **args;      /* NULL-terminated, args[0] included */
  char **env;       /* NULL-terminated "K=V"; NULL inherits this process's environment */
  uv_exit_cb on_exit;
  uv_alloc_cb on_alloc;
  uv_read_cb on_read; /* for both pipes: tell them apart by the stream pointer */
  uv_close_cb on_close;
  void *data; /* the .data of the process and of both pipes */
};

/* Starts the child with stdin on /dev/null, in its own session, and starts reading both pipes
 * (mu_child_spawn_flags: as `flags`, enum mu_child_flags, say).
 * Returns: 0; or the negative libuv error of uv_spawn, after which the process handle and the
 * two pipes are closing and o->on_close fires once for each of the three (never on_exit).
 * Ownership: c is the caller's and must stay put until the three handles are closed; o and
 * what it points to are borrowed for the call only. */
int mu_child_spawn(uv_loop_t *loop, struct mu_child *c, const struct mu_child_opts *o);
int mu_child_spawn_flags(uv_loop_t *loop, struct mu_child *c, const struct mu_child_opts *o,
                         int flags);

/* ---------------------------------------------------------------------------------------------
 * A program run to its end (the cluster tools: kubectl, sbatch, squeue, buildah...)
 */

struct mu_child_run {
  char **args;        /* NULL-terminated, args[0] looked up on PATH */
  const char *input;  /* written to its stdin, then EOF; NULL: stdin is /dev/null */
  struct mu_buf *out; /* its stdout, at most out's cap (NULL: discarded) */
  int out_fd;         /* >= 0: its stdout goes straight to this fd instead (out unused) */
  struct mu_buf *err; /* its stderr, at most err's cap, the rest dropped (NULL: discarded) */
  int status;         /* set: the exit code, or 128 + the signal that ended it */
  int out_over;       /* set: its stdout passed out's cap (what fits is kept) */
  int keep_stderr;    /* 1: its stderr is ours (what it says reaches the user), err unused */
};

/* Runs r->args to its end on a loop of its own (uv_spawn: same process group as ours), with the
 * pipes r asks for, and waits for it. Blocks the calling thread.
 * Returns: 0 when it ran (whatever r->status); the negative libuv error of uv_spawn (UV_ENOENT,
 * UV_EACCES...) when it could not be started; MU_EIO when no loop could be made.
 * Ownership: r and what it points to are the caller's; appends to r->out and r->err. */
int mu_child_run(struct mu_child_run *r);

#endif
