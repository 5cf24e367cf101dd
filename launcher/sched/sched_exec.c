/* The cluster schedulers' tools: common/exec.c runs them, this file turns a failure into one
 * message with the hint that fits. */
#include "sched_exec.h"

#include <ctype.h>
#include <stdint.h>
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

/* Is the line at l kubectl's (klog's) "E1205 15:30:00.000000   123 file.go:265] ..." form? */
static int klog_line(const char *l)
{
  if (strchr("IWEF", l[0]) == NULL || l[0] == '\0')
    return 0;
  for (int i = 1; i <= 4; i++)
    if (!isdigit((unsigned char)l[i]))
      return 0;
  return l[5] == ' ' && isdigit((unsigned char)l[6]) && isdigit((unsigned char)l[7]) && l[8] == ':';
}

/* A tool's stderr for a message: kubectl's klog lines (the same connection error five times
 * before its own one-line summary) are left out when another line says it; when only klog
 * lines are there, the last one stays. Ownership: a new string (mu_free). */
static char *stderr_summary(const char *e)
{
  struct mu_buf b = MU_BUF_INIT(SIZE_MAX);
  const char *last_klog = NULL;
  size_t last_len = 0;
  for (const char *l = e; *l != '\0';) {
    size_t n = strcspn(l, "\n");
    if (klog_line(l)) {
      last_klog = l;
      last_len = n;
    } else if (n > 0) {
      mu_buf_printf(&b, "%s%.*s", b.len ? "\n" : "", (int)n, l);
    }
    l += n + (l[n] == '\n');
  }
  if (b.len == 0 && last_klog != NULL)
    mu_buf_printf(&b, "%.*s", (int)last_len, last_klog);
  return mu_buf_detach(&b);
}

int mu_exec_failure(const char *what, int status, const char *stderr_text,
                    const struct mu_exec_hint *hints, struct mu_buf *err)
{
  char *e = stderr_summary(stderr_text ? stderr_text : "");
  mu_buf_printf(err, "%s failed (exit %d): %s", what, status, e != NULL && *e ? e : "(no message)");
  const struct mu_exec_hint *h = find_hint(hints, stderr_text ? stderr_text : "");
  int rc = MU_EIO;
  if (h != NULL && h->hint == NULL)
    rc = MU_ENOENT;
  else if (h != NULL)
    mu_buf_printf(err, "\nhint: %s", h->hint);
  mu_free(e);
  return rc;
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
  rc = mu_exec_failure(what, status, mu_exec_chomp(eb.data ? eb.data : (char *)""), hints, err);
out:
  mu_buf_release(&eb);
  return rc;
}
