/* Child processes whose output is read whole (exec.c): argv in, exit status and the captured
 * output back. The cluster schedulers run their tools through it (sched/sched_exec.h adds the
 * hint tables), the spec layer its Python components. Library code: never prints.
 */
#ifndef MU_EXEC_H
#define MU_EXEC_H

#include <stddef.h>

#include "buf.h"

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

/* As mu_exec_capture but the program's stderr is this process's own (what it says reaches the
 * user as it says it); `why` gets only the reason it could not be started or read.
 * Returns: as mu_exec_capture. Ownership: appends to out and why. */
int mu_exec_capture_stdout(char *const argv[], const char *input, struct mu_buf *out,
                           struct mu_buf *why, int *status);

/* Trims trailing whitespace in place. Returns: s itself. */
char *mu_exec_chomp(char *s);

#endif
