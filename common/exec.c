/* Child processes whose output is read whole: fork + execvp, with an O_CLOEXEC pipe that
 * carries execvp's errno back so that "not found" is told apart from "ran and failed"
 * (exec.h). The cluster schedulers' tools (sched/sched_exec.c) and Python components
 * (spec/component_py.c) run through it.
 */
#include "exec.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "muster/errno.h"

static void close_fd(int *fd)
{
  if (*fd >= 0)
    close(*fd);
  *fd = -1;
}

static int cloexec_pipe(int p[2])
{
  if (pipe(p) != 0)
    return -1;
  fcntl(p[0], F_SETFD, FD_CLOEXEC);
  fcntl(p[1], F_SETFD, FD_CLOEXEC);
  return 0;
}

/* Appends what fits of p[0..n) to b (a tool's output, which is not ours to bound: b's cap is
 * the most we read). Returns: 1 when some of it did not fit, else 0. */
static int append_capped(struct mu_buf *b, const char *p, size_t n)
{
  if (mu_buf_append(b, p, n) == 0)
    return 0;
  mu_buf_append(b, p, b->max - b->len);
  return 1;
}

/* The common body: stdin from `input`, stdout to out (buffer) or out_fd, stderr to errout, or
 * (keep_stderr) left as ours, errout then getting only the reason a start failed. */
static int run(char *const argv[], const char *input, struct mu_buf *out, int out_fd,
               struct mu_buf *errout, int keep_stderr, int *status)
{
  int in_p[2] = {-1, -1}, out_p[2] = {-1, -1}, err_p[2] = {-1, -1}, exec_p[2] = {-1, -1};
  int rc = 0, child_errno = 0, wst = 0, out_over = 0;
  size_t in_off = 0, in_len = input ? strlen(input) : 0;
  pid_t pid = -1;
  char chunk[4096];
  ssize_t n;

  *status = -1;
  if (cloexec_pipe(in_p) || (!keep_stderr && cloexec_pipe(err_p)) || cloexec_pipe(exec_p) ||
      (out_fd < 0 && cloexec_pipe(out_p))) {
    rc = MU_EIO;
    if (errout)
      mu_buf_printf(errout, "cannot create a pipe: %s", strerror(errno));
    goto out;
  }
  pid = fork();
  if (pid < 0) {
    rc = MU_EIO;
    if (errout)
      mu_buf_printf(errout, "cannot fork: %s", strerror(errno));
    goto out;
  }
  if (pid == 0) {
    signal(SIGPIPE, SIG_DFL);
    dup2(in_p[0], 0);
    dup2(out_fd >= 0 ? out_fd : out_p[1], 1);
    if (err_p[1] >= 0)
      dup2(err_p[1], 2);
    execvp(argv[0], argv);
    child_errno = errno;
    if (write(exec_p[1], &child_errno, sizeof child_errno) < 0)
      _exit(127);
    _exit(127);
  }
  close_fd(&in_p[0]);
  close_fd(&out_p[1]);
  close_fd(&err_p[1]);
  close_fd(&exec_p[1]);
  if (in_len == 0)
    close_fd(&in_p[1]);
  else
    fcntl(in_p[1], F_SETFL, O_NONBLOCK);

  for (;;) {
    struct pollfd pf[3];
    int np = 0, i;
    if (in_p[1] >= 0)
      pf[np++] = (struct pollfd){.fd = in_p[1], .events = POLLOUT};
    if (out_p[0] >= 0)
      pf[np++] = (struct pollfd){.fd = out_p[0], .events = POLLIN};
    if (err_p[0] >= 0)
      pf[np++] = (struct pollfd){.fd = err_p[0], .events = POLLIN};
    if (np == 0)
      break;
    if (poll(pf, (nfds_t)np, -1) < 0) {
      if (errno == EINTR)
        continue;
      break;
    }
    for (i = 0; i < np; i++) {
      if (pf[i].revents == 0)
        continue;
      if (pf[i].fd == in_p[1]) {
        n = write(in_p[1], input + in_off, in_len - in_off);
        if (n > 0)
          in_off += (size_t)n;
        if (n < 0 && errno != EAGAIN && errno != EINTR)
          in_off = in_len; /* the reader went away (EPIPE): stop feeding */
        if (in_off >= in_len)
          close_fd(&in_p[1]);
        continue;
      }
      n = read(pf[i].fd, chunk, sizeof chunk);
      if (n <= 0) {
        if (n < 0 && errno == EINTR)
          continue;
        if (pf[i].fd == out_p[0])
          close_fd(&out_p[0]);
        else
          close_fd(&err_p[0]);
        continue;
      }
      if (pf[i].fd == out_p[0] && out)
        out_over |= append_capped(out, chunk, (size_t)n);
      else if (pf[i].fd == err_p[0] && errout)
        append_capped(errout, chunk, (size_t)n);
    }
  }
  while (waitpid(pid, &wst, 0) < 0 && errno == EINTR)
    ;
  if (read(exec_p[0], &child_errno, sizeof child_errno) == (ssize_t)sizeof child_errno) {
    rc = MU_ENOENT;
    if (errout)
      mu_buf_printf(errout, "cannot run '%s': %s", argv[0], strerror(child_errno));
    goto out;
  }
  *status = WIFEXITED(wst) ? WEXITSTATUS(wst) : 128 + (WIFSIGNALED(wst) ? WTERMSIG(wst) : 0);
  if (out_over) {
    rc = MU_E2BIG;
    if (errout)
      mu_buf_printf(errout, "'%s' printed more than %zu bytes; its output was not read", argv[0],
                    out->max);
  }
out:
  close_fd(&in_p[0]);
  close_fd(&in_p[1]);
  close_fd(&out_p[0]);
  close_fd(&out_p[1]);
  close_fd(&err_p[0]);
  close_fd(&err_p[1]);
  close_fd(&exec_p[0]);
  close_fd(&exec_p[1]);
  return rc;
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
