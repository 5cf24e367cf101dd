/* The log of several replicas at once for backends whose log_open reads one replica (kubernetes,
 * slurm): one child per replica runs the backend's log_open into a pipe; the parent prefixes
 * every line with "role/replica " and writes whole lines to the output, so that following
 * (-f) several replicas interleaves their lines as they come. */
#define _GNU_SOURCE /* pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "muster/errno.h"

#include "alloc.h"
#include "fsutil.h"
#include "opts.h"
#include "sched.h"

#define FANOUT_MAX 256          /* replicas followed at once */
#define FANOUT_LINE (64 * 1024) /* a longer line is cut and written in pieces */

struct fan_src {
  int fd;
  int efd; /* the child's error message, read after it exits */
  pid_t pid;
  const char *role; /* borrowed from the status */
  long id;
  char *prefix;
  struct mu_buf line;
};

/* Writes prefix + the pending line (+ '\n' when the source ended without one). */
static int flush_line(struct fan_src *f, int out_fd, int add_nl)
{
  struct mu_buf b = MU_BUF_INIT(FANOUT_LINE + 1024);
  mu_buf_puts(&b, f->prefix);
  mu_buf_append(&b, f->line.data ? f->line.data : "", f->line.len);
  if (add_nl)
    mu_buf_putc(&b, '\n');
  int rc = mu_write_all(out_fd, b.data, b.len);
  mu_buf_release(&b);
  mu_buf_clear(&f->line);
  return rc;
}

static int feed(struct fan_src *f, const char *p, size_t n, int out_fd)
{
  for (size_t i = 0; i < n; i++) {
    if (f->line.len >= FANOUT_LINE && flush_line(f, out_fd, 1) != 0)
      return MU_EIO;
    mu_buf_putc(&f->line, p[i]);
    if (p[i] == '\n' && flush_line(f, out_fd, 0) != 0)
      return MU_EIO;
  }
  return 0;
}

int mu_sched_log_fanout(const struct mu_sched_ops *s, const char *app_id, const char *role,
                        long replica, enum mu_log_stream stream, int follow, long tail, int out_fd,
                        const struct mu_cfg *cfg, struct mu_buf *err)
{
  struct mu_app_status st;
  struct fan_src *srcs = NULL;
  size_t n = 0;
  int rc = mu_sched_describe(s, app_id, cfg, &st, err);
  if (rc != 0)
    return rc;
  srcs = mu_calloc(st.nreplicas ? st.nreplicas : 1, sizeof(*srcs));
  int role_found = role == NULL;
  for (size_t i = 0; i < st.nreplicas; i++) {
    const struct mu_replica_status *r = &st.replicas[i];
    if (role != NULL && strcmp(role, r->role) != 0)
      continue;
    role_found = 1;
    if (replica >= 0 && r->replica_id != replica)
      continue;
    if (n == FANOUT_MAX) {
      mu_buf_printf(err, "'%s' has more than %d replicas: name a role (HANDLE/ROLE)", app_id,
                    FANOUT_MAX);
      rc = MU_E2BIG;
      goto out;
    }
    srcs[n].fd = -1;
    srcs[n].efd = -1;
    srcs[n].pid = -1;
    srcs[n].role = r->role;
    srcs[n].id = r->replica_id;
    srcs[n].prefix = mu_asprintf("%s/%ld ", r->role, r->replica_id);
    mu_buf_init(&srcs[n].line, FANOUT_LINE + 1);
    n++;
  }
  if (!role_found) {
    mu_buf_printf(err, "'%s' has no role '%s'; 'muster status' lists its roles", app_id, role);
    rc = MU_ENOENT;
    goto out;
  }
  if (n == 0) {
    mu_buf_printf(err, "'%s' has no replica %s/%ld (yet); 'muster status' lists them", app_id,
                  role ? role : "*", replica);
    rc = MU_ENOENT;
    goto out;
  }
  /* One replica: no prefix, no children. */
  if (n == 1) {
    rc = s->log_open(app_id, srcs[0].role, srcs[0].id, stream, follow, tail, out_fd, cfg, err);
    goto out;
  }
  fflush(stdout);
  fflush(stderr);
  for (size_t i = 0; i < n; i++) {
    int p[2], ep[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
      mu_buf_printf(err, "pipe: %s", strerror(errno));
      rc = MU_EIO;
      goto reap;
    }
    if (pipe2(ep, O_CLOEXEC | O_NONBLOCK) != 0) {
      close(p[0]);
      close(p[1]);
      mu_buf_printf(err, "pipe: %s", strerror(errno));
      rc = MU_EIO;
      goto reap;
    }
    pid_t pid = fork();
    if (pid < 0) {
      close(p[0]);
      close(p[1]);
      close(ep[0]);
      close(ep[1]);
      mu_buf_printf(err, "fork: %s", strerror(errno));
      rc = MU_EIO;
      goto reap;
    }
    if (pid == 0) {
      close(p[0]);
      close(ep[0]);
      for (size_t k = 0; k < i; k++) {
        close(srcs[k].fd);
        close(srcs[k].efd);
      }
      signal(SIGPIPE, SIG_DFL);
      struct mu_buf e = MU_BUF_INIT(8192);
      int crc = s->log_open(app_id, srcs[i].role, srcs[i].id, stream, follow, tail, p[1], cfg, &e);
      if (crc != 0) /* at most 8 KiB: fits the pipe, so this never blocks */
        mu_write_all(ep[1], e.data ? e.data : "", e.len);
      _exit(crc == 0 ? 0 : 1);
    }
    close(p[1]);
    close(ep[1]);
    srcs[i].fd = p[0];
    srcs[i].efd = ep[0];
    srcs[i].pid = pid;
  }
  {
    struct pollfd pfd[FANOUT_MAX];
    char *buf = mu_malloc(16384);
    size_t open_n = n;
    while (open_n > 0) {
      for (size_t i = 0; i < n; i++) {
        pfd[i].fd = srcs[i].fd;
        pfd[i].events = POLLIN;
        pfd[i].revents = 0;
      }
      int pr = poll(pfd, (nfds_t)n, -1);
      if (pr < 0 && errno == EINTR)
        continue;
      if (pr < 0)
        break;
      for (size_t i = 0; i < n && open_n > 0; i++) {
        if (pfd[i].fd < 0 || pfd[i].revents == 0)
          continue;
        ssize_t r = read(srcs[i].fd, buf, 16384);
        if (r < 0 && errno == EINTR)
          continue;
        if (r > 0) {
          if (feed(&srcs[i], buf, (size_t)r, out_fd) != 0) {
            mu_buf_printf(err, "cannot write the log: %s", strerror(errno));
            rc = MU_EIO;
            open_n = 0;
          }
          continue;
        }
        if (srcs[i].line.len > 0)
          flush_line(&srcs[i], out_fd, 1);
        close(srcs[i].fd);
        srcs[i].fd = -1;
        open_n--;
      }
    }
    mu_free(buf);
  }
reap : {
  int failed = 0;
  struct mu_buf reasons = MU_BUF_INIT(8192);
  for (size_t i = 0; i < n; i++) {
    if (srcs[i].fd >= 0) {
      close(srcs[i].fd);
      srcs[i].fd = -1;
    }
    if (srcs[i].pid <= 0)
      continue; /* not started: no pipes either */
    if (rc != 0)
      kill(srcs[i].pid, SIGTERM);
    int status = 0;
    while (waitpid(srcs[i].pid, &status, 0) < 0 && errno == EINTR)
      ;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      char why[2048];
      ssize_t r = read(srcs[i].efd, why, sizeof(why) - 1);
      why[r > 0 ? r : 0] = '\0';
      if (rc == 0)
        mu_buf_printf(&reasons, "%s%s/%ld: %s", failed ? "; " : "", srcs[i].role, srcs[i].id,
                      why[0] ? why : "the log reader died");
      failed++;
    }
    close(srcs[i].efd);
    srcs[i].efd = -1;
  }
  if (rc == 0 && failed > 0) {
    mu_buf_printf(err, "the log of %d of %zu replicas could not be read: %s", failed, n,
                  mu_buf_str(&reasons));
    rc = MU_EIO;
  }
  mu_buf_release(&reasons);
}
out:
  for (size_t i = 0; i < n; i++) {
    mu_free(srcs[i].prefix);
    mu_buf_release(&srcs[i].line);
  }
  mu_free(srcs);
  mu_app_status_release(&st);
  return rc;
}
