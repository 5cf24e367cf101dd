/* Running the cluster tools (kubectl, sbatch, squeue, sacct, scancel, sinfo) for the kubernetes
 * and slurm schedulers: common/exec.h runs them (argv in, exit status and captured output
 * back); mu_exec_tool() adds one message per failure with a hint. Library code: never prints.
 */
#ifndef MU_SCHED_EXEC_H
#define MU_SCHED_EXEC_H

#include <stddef.h>

#include "buf.h"
#include "exec.h"

/* What is kept of a failed tool's stderr for its error message. */
#define MU_EXEC_STDERR_MAX (64 * 1024)

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

/* mu_exec_tool's message for a tool that exited with `status`: "WHAT failed (exit N): STDERR"
 * (kubectl's repeated klog lines left out when its own summary line is there) and the hint of
 * the first matching row. Returns: MU_ENOENT when a row with a NULL hint matched, else MU_EIO.
 * Ownership: appends to err. */
int mu_exec_failure(const char *what, int status, const char *stderr_text,
                    const struct mu_exec_hint *hints, struct mu_buf *err);

#endif
