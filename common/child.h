/* A child process on a libuv loop with its stdout and stderr on pipes, in its own session (so in
 * its own process group: kill(-pid, sig) reaches it and whatever it forks). Used by `muster
 * agent` for its workers and by the local scheduler's supervisor for the replicas; both read
 * the pipes on the loop and wait for the exit callback. Library code: never prints.
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

struct mu_child {
  uv_process_t proc;
  uv_pipe_t out; /* the child's stdout */
  uv_pipe_t err; /* the child's stderr */
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

/* Starts the child with stdin on /dev/null and starts reading both pipes.
 * Returns: 0; or the negative libuv error of uv_spawn, after which the process handle and the
 * two pipes are closing and o->on_close fires once for each of the three (never on_exit).
 * Ownership: c is the caller's and must stay put until the three handles are closed; o and
 * what it points to are borrowed for the call only. */
int mu_child_spawn(uv_loop_t *loop, struct mu_child *c, const struct mu_child_opts *o);

#endif
