/* The cluster schedulers' tools: common/exec.c runs them, this file turns a failure into one
 * message with the hint that fits. */
#include "sched_exec.h"

#include <string.h>

#include "muster/errno.h"

#include "alloc.h"

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
