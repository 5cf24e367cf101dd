/* Child processes whose output is read whole (exec.h), through mu_child_run() (child.c: uv_spawn,
 * which tells "not found" apart from "ran and failed"). The cluster schedulers' tools
 * (sched/sched_exec.c) and Python components (spec/component_py.c) run through it.
 */
#include "exec.h"

#include <string.h>

#include "muster/errno.h"

#include "child.h"

/* The common body: stdin from `input`, stdout to out (buffer) or out_fd, stderr to errout, or
 * (keep_stderr) left as ours, errout then getting only the reason a start failed. */
static int run(char *const argv[], const char *input, struct mu_buf *out, int out_fd,
               struct mu_buf *errout, int keep_stderr, int *status)
{
  struct mu_child_run r = {(char **)argv, input, out, out_fd, errout, -1, 0, keep_stderr};
  int rc = mu_child_run(&r);
  *status = r.status;
  if (rc != 0) {
    if (errout)
      mu_buf_printf(errout, "cannot run '%s': %s", argv[0], strerror(rc < 0 ? -rc : rc));
    return MU_ENOENT;
  }
  if (r.out_over) {
    if (errout)
      mu_buf_printf(errout, "'%s' printed more than %zu bytes; its output was not read", argv[0],
                    out->max);
    return MU_E2BIG;
  }
  return 0;
}

int mu_exec_capture(char *const argv[], const char *input, struct mu_buf *out,
                    struct mu_buf *errout, int *status)
{
  return run(argv, input, out, -1, errout, 0, status);
}

int mu_exec_to_fd(char *const argv[], int out_fd, struct mu_buf *errout, int *status)
{
  return run(argv, NULL, NULL, out_fd, errout, 0, status);
}

int mu_exec_capture_stdout(char *const argv[], const char *input, struct mu_buf *out,
                           struct mu_buf *why, int *status)
{
  return run(argv, input, out, -1, why, 1, status);
}

char *mu_exec_chomp(char *s)
{
  size_t n = s ? strlen(s) : 0;
  while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t'))
    s[--n] = '\0';
  return s;
}
