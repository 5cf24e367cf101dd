/* The log of several replicas at once, for backends whose log_open reads one replica
 * (kubernetes, slurm): one child per replica runs the backend's log_open into a pipe; the parent
 * prefixes every line with "role/replica " and writes whole lines to the output, so that
 * following (-f) several replicas interleaves their lines as they come.
 *
 * The steps: pick the replicas, start one reader each, pump their pipes into the output, reap
 * the readers (a reader that failed says why on a second pipe).
 */
#define _GNU_SOURCE /* pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "muster/errno.h"

#include "alloc.h"
#include "fsutil.h"
#include "lines.h"
#include "sched.h"

#define FANOUT_MAX 256          /* replicas followed at once */
#define FANOUT_LINE (64 * 1024) /* a longer line is cut and written in pieces */
#define FANOUT_READ 16384       /* one read of a reader's pipe */
#define REASON_MAX 8192 /* a reader's error message: at most this much, so it fits its pipe */

struct fan_src {
  int fd;  /* the reader's output */
  int efd; /* the reader's error message, read after it exits */
  pid_t pid;
  const char *role; /* borrowed from the status */
  long id;
  struct mu_line_prefixer lines;
};

/* The replicas of app_id to read: every one (role NULL), every one of a role (replica < 0),
 * or one. Returns: 0, or MU_ENOENT / MU_E2BIG with the message in err. Ownership: *srcs is
 * the caller's (release_sources), its roles borrowed from st. */
static int pick_sources(const struct mu_app_status *st, const char *app_id, const char *role,
                        long replica, struct fan_src **srcs, size_t *n, struct mu_buf *err)
{
  int role_found = role == NULL;
  *n = 0;
  *srcs = mu_calloc(st->nreplicas ? st->nreplicas : 1, sizeof(**srcs));
  for (size_t i = 0; i < st->nreplicas; i++) {
    const struct mu_replica_status *r = &st->replicas[i];
    if (role != NULL && strcmp(role, r->role) != 0)
      continue;
    role_found = 1;
    if (replica >= 0 && r->replica_id != replica)
      continue;
    if (*n == FANOUT_MAX) {
      mu_buf_printf(err, "'%s' has more than %d replicas: name a role (HANDLE/ROLE)", app_id,
                    FANOUT_MAX);
      return MU_E2BIG;
    }
    struct fan_src *f = &(*srcs)[(*n)++];
    f->fd = f->efd = -1;
    f->pid = -1;
    f->role = r->role;
    f->id = r->replica_id;
    char *prefix = mu_asprintf("%s/%ld ", r->role, r->replica_id);
    mu_line_prefixer_init(&f->lines, prefix, FANOUT_LINE);
    mu_free(prefix);
  }
  if (!role_found) {
    mu_buf_printf(err, "'%s' has no role '%s'; 'muster status' lists its roles", app_id, role);
    return MU_ENOENT;
  }
  if (*n == 0) {
    mu_buf_printf(err, "'%s' has no replica %s/%ld (yet); 'muster status' lists them", app_id,
                  role ? role : "*", replica);
    return MU_ENOENT;
  }
  return 0;
}

static void release_sources(struct fan_src *srcs, size_t n)
{
  for (size_t i = 0; i < n; i++)
    mu_line_prefixer_release(&srcs[i].lines);
  mu_free(srcs);
}

/* Forks the reader of srcs[i]: it runs the backend's log_open into a pipe and, when that
 * fails, writes the reason into a second pipe. Returns: 0, or MU_EIO with the reason in err. */
static int start_reader(const struct mu_sched_ops *s, const char *app_id, struct fan_src *srcs,
                        size_t i, const struct mu_log_opts *o, const struct mu_cfg *cfg,
                        struct mu_buf *err)
{
  int p[2], ep[2];
  if (pipe2(p, O_CLOEXEC) != 0) {
    mu_buf_printf(err, "pipe: %s", strerror(errno));
    return MU_EIO;
  }
  if (pipe2(ep, O_CLOEXEC | O_NONBLOCK) != 0) {
    mu_buf_printf(err, "pipe: %s", strerror(errno));
    close(p[0]);
    close(p[1]);
    return MU_EIO;
  }
  pid_t pid = fork();
  if (pid < 0) {
    mu_buf_printf(err, "fork: %s", strerror(errno));
    close(p[0]);
    close(p[1]);
    close(ep[0]);
    close(ep[1]);
    return MU_EIO;
  }
  if (pid == 0) {
    close(p[0]);
    close(ep[0]);
    for (size_t k = 0; k < i; k++) {
      close(srcs[k].fd);
      close(srcs[k].efd);
    }
    signal(SIGPIPE, SIG_DFL);
    struct mu_buf e = MU_BUF_INIT(SIZE_MAX);
    int crc = s->log_open(app_id, srcs[i].role, srcs[i].id, o, p[1], cfg, &e);
    if (crc != 0) /* at most REASON_MAX bytes: fits the pipe, so this never blocks */
      mu_write_all(ep[1], mu_buf_str(&e), e.len < REASON_MAX ? e.len : REASON_MAX);
    _exit(crc == 0 ? 0 : 1);
  }
  close(p[1]);
  close(ep[1]);
  srcs[i].fd = p[0];
  srcs[i].efd = ep[0];
  srcs[i].pid = pid;
  return 0;
}

/* Writes the prefixed complete lines of data (or, at the end of a source, its unfinished line)
 * to out_fd. Returns: 0, or MU_EIO when the output cannot be written. */
static int write_lines(struct fan_src *f, const char *data, size_t n, int out_fd)
{
  struct mu_buf b = MU_BUF_INIT(SIZE_MAX);
  if (data != NULL)
    mu_line_prefixer_feed(&f->lines, data, n, &b);
  else
    mu_line_prefixer_flush(&f->lines, &b);
  int rc = b.len > 0 ? mu_write_all(out_fd, b.data, b.len) : 0;
  mu_buf_release(&b);
  return rc != 0 ? MU_EIO : 0;
}

/* Copies every reader's lines to out_fd as they come, until all pipes ended.
 * Returns: 0, or MU_EIO with the reason in err when the output cannot be written. */
static int pump(struct fan_src *srcs, size_t n, int out_fd, struct mu_buf *err)
{
  struct pollfd pfd[FANOUT_MAX];
  char *buf = mu_malloc(FANOUT_READ);
  size_t open_n = n;
  int rc = 0;
  while (open_n > 0 && rc == 0) {
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
    for (size_t i = 0; i < n && rc == 0; i++) {
      if (pfd[i].fd < 0 || pfd[i].revents == 0)
        continue;
      ssize_t r = read(srcs[i].fd, buf, FANOUT_READ);
      if (r < 0 && errno == EINTR)
        continue;
      if (r > 0) {
        rc = write_lines(&srcs[i], buf, (size_t)r, out_fd);
        if (rc != 0)
          mu_buf_printf(err, "cannot write the log: %s", strerror(errno));
        continue;
      }
      write_lines(&srcs[i], NULL, 0, out_fd);
      close(srcs[i].fd);
      srcs[i].fd = -1;
      open_n--;
    }
  }
  mu_free(buf);
  return rc;
}

/* Waits for every reader (stopping them first when rc says the pump failed) and collects the
 * reasons of those that failed. Returns: rc, or MU_EIO with the reasons in err. */
static int reap(struct fan_src *srcs, size_t n, int rc, struct mu_buf *err)
{
  int failed = 0;
  struct mu_buf reasons = MU_BUF_INIT(SIZE_MAX);
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
      char why[REASON_MAX + 1];
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
  return rc;
}

int mu_sched_log_fanout(const struct mu_sched_ops *s, const char *app_id, const char *role,
                        long replica, const struct mu_log_opts *o, int out_fd,
                        const struct mu_cfg *cfg, struct mu_buf *err)
{
  struct mu_app_status st;
  struct fan_src *srcs = NULL;
  size_t n = 0;
  int rc = mu_sched_describe(s, app_id, cfg, &st, err);
  if (rc != 0)
    return rc;
  rc = pick_sources(&st, app_id, role, replica, &srcs, &n, err);
  if (rc != 0)
    goto out;
  if (n == 1) { /* one replica: no prefix, no children */
    rc = s->log_open(app_id, srcs[0].role, srcs[0].id, o, out_fd, cfg, err);
    goto out;
  }
  fflush(stdout);
  fflush(stderr);
  for (size_t i = 0; i < n && rc == 0; i++)
    rc = start_reader(s, app_id, srcs, i, o, cfg, err);
  if (rc == 0)
    rc = pump(srcs, n, out_fd, err);
  rc = reap(srcs, n, rc, err);
out:
  release_sources(srcs, n);
  mu_app_status_release(&st);
  return rc;
}
