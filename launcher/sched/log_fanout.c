/* The log of several replicas at once (sched.h, mu_sched_log): one log reader (log_reader.c) per
 * replica runs the backend's one-replica log_open; the parent keeps the lines its filter keeps,
 * prefixes each with "role/replica " (as TorchX, one replica's too) and writes whole lines to
 * the output as they come, so that following (-f) several replicas interleaves their lines.
 *
 * The steps: pick the replicas, start one reader each, pump their pipes into the output, reap
 * the readers (a reader that failed says why).
 */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "muster/errno.h"

#include "alloc.h"
#include "fsutil.h"
#include "lines.h"
#include "sched.h"

#define FANOUT_MAX 256          /* replicas followed at once */
#define FANOUT_LINE (64 * 1024) /* a longer line is cut and written in pieces */
#define FANOUT_READ 16384       /* one read of a reader's pipe */

struct fan_src {
  struct mu_log_reader reader;
  const char *role; /* borrowed from the status */
  long id;
  struct mu_line_prefixer lines;
};

/* The replicas of q to read: every one (role NULL), every one of a role (replica < 0), or one;
 * the lines of each are prefixed with its "role/replica ". Returns: 0, or MU_ENOENT / MU_E2BIG
 * with the message in err. Ownership: *srcs is the caller's (release_sources), its roles
 * borrowed from st. */
static int pick_sources(const struct mu_app_status *st, const struct mu_log_query *q,
                        struct fan_src **srcs, size_t *n, struct mu_buf *err)
{
  int role_found = q->role == NULL;
  *n = 0;
  *srcs = mu_calloc(st->nreplicas ? st->nreplicas : 1, sizeof(**srcs));
  for (size_t i = 0; i < st->nreplicas; i++) {
    const struct mu_replica_status *r = &st->replicas[i];
    if (q->role != NULL && strcmp(q->role, r->role) != 0)
      continue;
    role_found = 1;
    if (q->replica >= 0 && r->replica_id != q->replica)
      continue;
    if (*n == FANOUT_MAX) {
      mu_buf_printf(err, "'%s' has more than %d replicas: name a role (HANDLE/ROLE)", q->app_id,
                    FANOUT_MAX);
      return MU_E2BIG;
    }
    struct fan_src *f = &(*srcs)[(*n)++];
    f->reader.fd = f->reader.efd = -1;
    f->reader.pid = -1;
    f->role = r->role;
    f->id = r->replica_id;
    char *prefix = mu_asprintf("%s/%ld ", r->role, r->replica_id);
    mu_line_prefixer_init(&f->lines, prefix, FANOUT_LINE);
    mu_line_prefixer_filter(&f->lines, q->keep, q->keep_data);
    mu_free(prefix);
  }
  if (!role_found) {
    mu_buf_printf(err, "'%s' has no role '%s'; 'muster status' lists its roles", q->app_id,
                  q->role);
    return MU_ENOENT;
  }
  if (*n == 0) {
    mu_buf_printf(err, "'%s' has no replica %s/%ld (yet); 'muster status' lists them", q->app_id,
                  q->role ? q->role : "*", q->replica);
    return MU_ENOENT;
  }
  return 0;
}

/* One replica named by q (role and replica given): its backend's log_open says when there is
 * no such replica, so no status is asked for. Ownership: as pick_sources. */
static struct fan_src *one_source(const struct mu_log_query *q)
{
  struct fan_src *f = mu_calloc(1, sizeof(*f));
  f->reader.fd = f->reader.efd = -1;
  f->reader.pid = -1;
  f->role = q->role;
  f->id = q->replica;
  char *prefix = mu_asprintf("%s/%ld ", q->role, q->replica);
  mu_line_prefixer_init(&f->lines, prefix, FANOUT_LINE);
  mu_line_prefixer_filter(&f->lines, q->keep, q->keep_data);
  mu_free(prefix);
  return f;
}

static void release_sources(struct fan_src *srcs, size_t n)
{
  for (size_t i = 0; i < n; i++)
    mu_line_prefixer_release(&srcs[i].lines);
  mu_free(srcs);
}

/* Starts the reader of every source: its replica's log, as log_open writes it. Returns: 0, or
 * MU_EIO with the reason in err. */
static int start_readers(const struct mu_sched_ops *s, const struct mu_log_query *q,
                         struct fan_src *srcs, size_t n, struct mu_buf *err)
{
  int rc = 0;
  for (size_t i = 0; i < n && rc == 0; i++) {
    struct mu_log_query one = *q;
    one.role = srcs[i].role;
    one.replica = srcs[i].id;
    rc = mu_log_reader_start(&srcs[i].reader, s, &one, 0, err);
  }
  return rc;
}

/* Writes the kept, prefixed complete lines of data (or, at the end of a source, its unfinished
 * line) to out_fd. Returns: 0, or MU_EIO when the output cannot be written. */
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
      pfd[i].fd = srcs[i].reader.fd;
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
      ssize_t r = read(srcs[i].reader.fd, buf, FANOUT_READ);
      if (r < 0 && errno == EINTR)
        continue;
      if (r > 0) {
        rc = write_lines(&srcs[i], buf, (size_t)r, out_fd);
        if (rc != 0)
          mu_buf_printf(err, "cannot write the log: %s", strerror(errno));
        continue;
      }
      write_lines(&srcs[i], NULL, 0, out_fd);
      close(srcs[i].reader.fd);
      srcs[i].reader.fd = -1;
      open_n--;
    }
  }
  mu_free(buf);
  return rc;
}

/* Waits for every reader (stopping them first when rc says the pump failed) and collects the
 * reasons of those that failed (`one`: the one replica asked for, its reason as it is).
 * Returns: rc, or MU_EIO with the reasons in err. */
static int reap(struct fan_src *srcs, size_t n, int one, int rc, struct mu_buf *err)
{
  int failed = 0;
  struct mu_buf reasons = MU_BUF_INIT(SIZE_MAX);
  for (size_t i = 0; i < n; i++) {
    struct mu_buf why = MU_BUF_INIT(SIZE_MAX);
    if (mu_log_reader_finish(&srcs[i].reader, rc != 0, &why) != 0 && rc == 0) {
      if (one)
        mu_buf_puts(&reasons, mu_buf_str(&why));
      else
        mu_buf_printf(&reasons, "%s%s/%ld: %s", failed ? "; " : "", srcs[i].role, srcs[i].id,
                      mu_buf_str(&why));
      failed++;
    }
    mu_buf_release(&why);
  }
  if (rc == 0 && failed > 0 && one) {
    mu_buf_puts(err, mu_buf_str(&reasons));
    rc = MU_EIO;
  } else if (rc == 0 && failed > 0) {
    mu_buf_printf(err, "the log of %d of %zu replicas could not be read: %s", failed, n,
                  mu_buf_str(&reasons));
    rc = MU_EIO;
  }
  mu_buf_release(&reasons);
  return rc;
}

int mu_sched_log(const struct mu_sched_ops *s, const struct mu_log_query *q, int out_fd,
                 struct mu_buf *err)
{
  struct mu_app_status st;
  struct fan_src *srcs = NULL;
  size_t n = 0;
  int one = q->role != NULL && q->replica >= 0, rc = 0;
  memset(&st, 0, sizeof(st));
  if (one) {
    srcs = one_source(q);
    n = 1;
  } else {
    rc = mu_sched_describe(s, q->app_id, q->cfg, &st, err);
    if (rc != 0)
      return rc;
    rc = pick_sources(&st, q, &srcs, &n, err);
  }
  if (rc != 0)
    goto out;
  rc = start_readers(s, q, srcs, n, err);
  if (rc == 0)
    rc = pump(srcs, n, out_fd, err);
  rc = reap(srcs, n, one, rc, err);
out:
  release_sources(srcs, n);
  mu_app_status_release(&st);
  return rc;
}

int mu_sched_log_fanout(const struct mu_sched_ops *s, const char *app_id, const char *role,
                        long replica, const struct mu_log_opts *o, int out_fd,
                        const struct mu_cfg *cfg, struct mu_buf *err)
{
  struct mu_log_query q = {app_id, role, replica, *o, cfg, NULL, NULL};
  return mu_sched_log(s, &q, out_fd, err);
}
