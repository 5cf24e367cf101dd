/* Running the cluster tools (kubectl, sbatch, squeue, sacct, scancel, sinfo) for the kubernetes
 * and slurm schedulers: argv in, exit status and captured output back. Library code: never
 * prints.
 */
#ifndef MU_SCHED_EXEC_H
#define MU_SCHED_EXEC_H

#include <stddef.h>

#include "buf.h"

/* Runs argv (argv[0] looked up on PATH) with `input` (may be NULL) on its stdin and captures
 * its stdout and stderr into out and errout (either may be NULL to discard; output over a
 * buffer's cap is dropped). *status is the exit code, or 128+signal.
 * Returns: 0 when the program ran (whatever its status); MU_ENOENT when it could not be
 * started (not found or not executable), with the reason in errout.
 * Ownership: appends to out and errout. */
int mu_exec_capture(char *const argv[], const char *input, struct mu_buf *out,
                    struct mu_buf *errout, int *status);

/* As mu_exec_capture but the program's stdout goes straight to fd out_fd (for `log -f`).
 * Returns: as mu_exec_capture. */
int mu_exec_to_fd(char *const argv[], int out_fd, struct mu_buf *errout, int *status);

/* Trims trailing whitespace in place; returns s. */
char *mu_exec_chomp(char *s);

#endif
