/* Running the cluster tools (kubectl, sbatch, squeue, sacct, scancel, sinfo) for the kubernetes
 * and slurm schedulers: argv in, exit status and captured output back. Library code: never
 * prints.
 */
#ifndef MU_SCHED_EXEC_H
#define MU_SCHED_EXEC_H

#include <stddef.h>

#include "buf.h"

/* What is kept of a failed tool's stderr for its error message. */
#define MU_EXEC_STDERR_MAX (64 * 1024)

/* Runs argv (argv[0] looked up on PATH) with `input` (may be NULL) on its stdin and captures
 * its stdout and stderr into out and errout (either may be NULL to discard). A buffer's cap is
 * the most that is kept of that stream: stderr beyond it is dropped, stdout beyond it makes the
 * call fail. *status is the exit code, or 128+signal.
 * Returns: 0 when the program ran (whatever its status); MU_ENOENT when it could not be
 * started (not found or not executable), with the reason in errout; MU_E2BIG when its stdout
 * passed out's cap, with a message in errout.
 * Ownership: appends to out and errout. */
int mu_exec_capture(char *const argv[], const char *input, struct mu_buf *out,
                    struct mu_buf *errout, int *status);

/* As mu_exec_capture but the program's stdout goes straight to fd out_fd (for `log -f`).
 * Returns: as mu_exec_capture. */
int mu_exec_to_fd(char *const argv[], int out_fd, struct mu_buf *errout, int *status);

/* One row of a hint table for mu_exec_tool(). When a tool fails and one of `match` occurs in
 * its stderr, "\nhint: " and `hint` are appended to the error; a NULL hint instead makes the
 * call return MU_ENOENT (the object asked for does not exist). The first matching row wins; a
 * table ends with a row whose match[0] is NULL. */
struct mu_exec_hint {
  const char *match[5]; /* substrings, NULL-terminated */
  const char *hint;     /* the advice, or NULL for "not found" */
};

/* Runs a cluster tool as mu_exec_capture() does and writes any failure as one message into
 * err: `missing` when the tool cannot be started, else "WHAT failed (exit N): STDERR" followed
 * by the hint of the first row of `hints` (may be NULL) that matches stderr.
 * Returns: 0 when the tool exited 0; MU_ENOENT when it could not be started or a row with a
 * NULL hint matched; MU_EIO for any other failure.
 * Ownership: appends to out (may be NULL) and err; borrows the rest. */
int mu_exec_tool(char *const argv[], const char *input, const char *what, const char *missing,
                 const struct mu_exec_hint *hints, struct mu_buf *out, struct mu_buf *err);

/* Trims trailing whitespace in place. Returns: s itself. */
char *mu_exec_chomp(char *s);

#endif
