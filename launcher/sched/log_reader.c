/* A log reader (sched.h): the backend's log_open in a forked child writing into a pipe, because
 * log_open blocks (following a job reads until it ends) while the caller reads several replicas
 * at once (log_fanout.c) or redraws a progress line between their lines (cmd_run.c). A
 * log_open that fails writes its reason into a second pipe, which the caller reads after it.
 */
#define _GNU_SOURCE /* pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "muster/errno.h"

#include "fsutil.h"
#include "sched.h"

#define REASON_MAX 8192 /* a reader's error message: at most this much, so it fits its pipe */

static void close_fd(int *fd)
{
  if (*fd >= 0)
    close(*fd);
  *fd = -1;
}

/* The child: runs log_open into out, its failure's reason into why. Never returns. */
static void run_child(const struct mu_sched_ops *s, const struct mu_log_query *q, int flags,
                      int out, int why)
{
  if (flags & MU_LOG_READER_OWN_GROUP) {
    setpgid(0, 0);
    signal(SIGINT, SIG_IGN);
  }
  signal(SIGTERM, SIG_DFL);
  signal(SIGPIPE, SIG_DFL); /* the reader of the pipe went away: so do we */
  struct mu_buf e = MU_BUF_INIT(SIZE_MAX);
  int rc = s->log_open(q->app_id, q->role, q->replica, &q->opts, out, q->cfg, &e);
  if (rc != 0) /* at most REASON_MAX bytes: fits the pipe, so this never blocks */
    mu_write_all(why, mu_buf_str(&e), e.len < REASON_MAX ? e.len : REASON_MAX);
  _exit(rc == 0 ? 0 : 1);
}

int mu_log_reader_start(struct mu_log_reader *r, const struct mu_sched_ops *s,
                        const struct mu_log_query *q, int flags, struct mu_buf *err)
{
  int p[2] = {-1, -1}, ep[2] = {-1, -1};
  r->fd = r->efd = -1;
  r->pid = -1;
  r->flags = flags;
  if (pipe2(p, O_CLOEXEC) != 0 || pipe2(ep, O_CLOEXEC | O_NONBLOCK) != 0) {
    mu_buf_printf(err, "cannot create a pipe: %s", strerror(errno));
    goto fail;
  }
  fflush(stdout); /* or the child would write our buffered output again */
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    mu_buf_printf(err, "cannot fork: %s", strerror(errno));
    goto fail;
  }
  if (pid == 0) {
    close(p[0]);
    close(ep[0]);
    run_child(s, q, flags, p[1], ep[1]);
  }
  if (flags & MU_LOG_READER_OWN_GROUP)
    setpgid(pid, pid); /* (both sides: no race) */
  close(p[1]);
  close(ep[1]);
  r->fd = p[0];
  r->efd = ep[0];
  r->pid = pid;
  return 0;
fail:
  close_fd(&p[0]);
  close_fd(&p[1]);
  close_fd(&ep[0]);
  close_fd(&ep[1]);
  return MU_EIO;
}

int mu_log_reader_finish(struct mu_log_reader *r, int stop, struct mu_buf *why)
{
  int status = 0, rc = 0;
  close_fd(&r->fd);
  if (r->pid > 0) {
    if (stop)
      kill((r->flags & MU_LOG_READER_OWN_GROUP) ? -r->pid : r->pid, SIGTERM);
    while (waitpid(r->pid, &status, 0) < 0 && errno == EINTR)
      ;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      char text[REASON_MAX + 1];
      ssize_t n = r->efd >= 0 ? read(r->efd, text, sizeof(text) - 1) : -1;
      text[n > 0 ? n : 0] = '\0';
      if (why != NULL)
        mu_buf_puts(why, text[0] ? text : "the log reader died");
      rc = MU_EIO;
    }
  }
  close_fd(&r->efd);
  r->pid = -1;
  return rc;
}
