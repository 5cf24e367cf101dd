/* The cluster tools for the kubernetes and slurm schedulers (sched_exec.h): each runs to its end
 * through common/child.c (uv_spawn, which tells "not found" apart from "ran and failed"), and a
 * failure becomes one message with the hint of a table. */
#include "sched_exec.h"

#include <stdlib.h>
#include <string.h>

#include "muster/errno.h"

#include "alloc.h"
#include "child.h"

/* Runs argv: stdin from `input`, stdout to out (buffer) or out_fd, stderr to errout. */
static int run(char *const argv[], const char *input, struct mu_buf *out, int out_fd,
               struct mu_buf *errout, int *status)
{
  struct mu_child_run r = {(char **)argv, input, out, out_fd, errout, -1, 0};
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
  return run(argv, input, out, -1, errout, status);
}

int mu_exec_to_fd(char *const argv[], int out_fd, struct mu_buf *errout, int *status)
{
  return run(argv, NULL, NULL, out_fd, errout, status);
}

char *mu_exec_chomp(char *s)
{
  size_t n = s ? strlen(s) : 0;
  while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t'))
    s[--n] = '\0';
  return s;
}

/* The first row of hints whose match list has a substring of e, or NULL. */
static const struct mu_exec_hint *find_hint(const struct mu_exec_hint *hints, const char *e)
{
  for (; hints != NULL && hints->match[0] != NULL; hints++)
    for (size_t i = 0; i < 5 && hints->match[i] != NULL; i++)
      if (strstr(e, hints->match[i]) != NULL)
        return hints;
  return NULL;
}

int mu_exec_tool(char *const argv[], const char *input, const char *what, const char *missing,
                 const struct mu_exec_hint *hints, struct mu_buf *out, struct mu_buf *err)
{
  struct mu_buf eb = MU_BUF_INIT(MU_EXEC_STDERR_MAX);
  int status = -1;
  int rc = mu_exec_capture(argv, input, out, &eb, &status);
  if (rc == MU_ENOENT) {
    mu_buf_puts(err, missing);
    goto out;
  }
  if (rc != 0) {
    mu_buf_puts(err, mu_buf_str(&eb));
    goto out;
  }
  if (status == 0)
    goto out;
  const char *e = mu_exec_chomp(eb.data ? eb.data : (char *)"");
  mu_buf_printf(err, "%s failed (exit %d): %s", what, status, *e ? e : "(no message)");
  const struct mu_exec_hint *h = find_hint(hints, e);
  rc = MU_EIO;
  if (h != NULL && h->hint == NULL)
    rc = MU_ENOENT;
  else if (h != NULL)
    mu_buf_printf(err, "\nhint: %s", h->hint);
out:
  mu_buf_release(&eb);
  return rc;
}
