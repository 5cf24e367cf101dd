/* A replica's combined log on Slurm (`muster tee`, see slurm.h): srun writes a task's stdout
 * and stderr to two files (--output, --error), and the order in which the lines of the two were
 * written is lost there. The script runs each group's command under this tee, which reads the
 * command's two pipes on one loop, passes every byte on to its own stdout and stderr at once (so
 * srun's .out and .err files are what they were), and appends each whole line of either to one
 * file, slurm-ID-ROLE-REPLICA.log, in the order the lines come: `muster log` reads that file.
 *
 * The command stays in the tee's process group: the signals Slurm (or a terminal) sends to the
 * step reach it as before, and the tee only waits for it, to copy its last lines; the exit
 * status is the command's.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "alloc.h"
#include "child.h"
#include "fsutil.h"
#include "lines.h"
#include "slurm.h"

#define TEE_READ 65536 /* one read of a pipe */
#define TEE_LINE 65536 /* a longer line goes to the log in pieces of this size, each a line */
#define TEE_DRAIN_MS                                                                               \
  2000 /* after the command's exit: how long its pipes may stay open (a child                      \
        * it left behind that still holds them) before the tee stops */

struct tee {
  uv_loop_t loop;
  struct mu_child child;
  uv_timer_t drain;
  uv_signal_t sigs[3]; /* SIGINT, SIGTERM, SIGHUP: the command gets them; we wait for it */
  struct mu_line_prefixer lines[2]; /* stdout's and stderr's unfinished line */
  int pass[2];                      /* our stdout and stderr, until a write to one fails */
  int fd;                           /* the combined log */
  int open_pipes;
  int exited, code, sig;
  int log_err; /* the first failed write to the log (-errno), else 0 */
};

static void on_closed(uv_handle_t *h)
{
  (void)h;
}

static void log_lines(struct tee *t, struct mu_buf *b)
{
  if (b->len > 0 && t->log_err == 0 && mu_write_all(t->fd, b->data, b->len) != 0)
    t->log_err = -errno;
  mu_buf_clear(b);
}

static void close_pipe(struct tee *t, int i)
{
  uv_handle_t *h = (uv_handle_t *)(i == 0 ? &t->child.out : &t->child.err);
  if (uv_is_closing(h))
    return;
  struct mu_buf b = MU_BUF_INIT(SIZE_MAX);
  mu_line_prefixer_flush(&t->lines[i], &b); /* the last line, ended */
  log_lines(t, &b);
  mu_buf_release(&b);
  uv_close(h, on_closed);
  if (--t->open_pipes == 0)
    uv_stop(&t->loop);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
  (void)h;
  (void)suggested;
  buf->base = mu_malloc(TEE_READ);
  buf->len = TEE_READ;
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
  struct tee *t = s->data;
  int i = s == (uv_stream_t *)&t->child.err;
  if (n > 0) {
    if (t->pass[i] >= 0 && mu_write_all(t->pass[i], buf->base, (size_t)n) != 0)
      t->pass[i] = -1; /* srun's side is gone: the log still gets the lines */
    struct mu_buf b = MU_BUF_INIT(SIZE_MAX);
    mu_line_prefixer_feed(&t->lines[i], buf->base, (size_t)n, &b);
    log_lines(t, &b);
    mu_buf_release(&b);
  }
  mu_free(buf->base);
  if (n < 0)
    close_pipe(t, i);
}

static void on_drain(uv_timer_t *h)
{
  struct tee *t = h->data;
  close_pipe(t, 0);
  close_pipe(t, 1);
}

static void on_exit_cb(uv_process_t *p, int64_t status, int term_signal)
{
  struct tee *t = p->data;
  t->exited = 1;
  t->code = term_signal ? 128 + term_signal : (int)status;
  t->sig = term_signal;
  uv_close((uv_handle_t *)p, on_closed);
  if (t->open_pipes > 0)
    uv_timer_start(&t->drain, on_drain, TEE_DRAIN_MS, 0);
}

static void on_signal(uv_signal_t *h, int sig)
{
  (void)h;
  (void)sig; /* the command has it too (our process group); its end ends us */
}

/* Closes what is still open and runs the loop until every close callback came. */
static void tee_close(struct tee *t)
{
  for (size_t i = 0; i < sizeof(t->sigs) / sizeof(t->sigs[0]); i++)
    if (!uv_is_closing((uv_handle_t *)&t->sigs[i]))
      uv_close((uv_handle_t *)&t->sigs[i], on_closed);
  if (!uv_is_closing((uv_handle_t *)&t->drain))
    uv_close((uv_handle_t *)&t->drain, on_closed);
  uv_run(&t->loop, UV_RUN_DEFAULT);
  uv_loop_close(&t->loop);
  mu_line_prefixer_release(&t->lines[0]);
  mu_line_prefixer_release(&t->lines[1]);
}

int mu_slurm_tee(int log_fd, char **argv, int *code, int *sig, int *log_err)
{
  static const int signums[] = {SIGINT, SIGTERM, SIGHUP};
  struct tee t;
  memset(&t, 0, sizeof(t));
  t.fd = log_fd;
  t.pass[0] = 1;
  t.pass[1] = 2;
  mu_line_prefixer_init(&t.lines[0], "", TEE_LINE);
  mu_line_prefixer_init(&t.lines[1], "", TEE_LINE);
  uv_loop_init(&t.loop);
  uv_timer_init(&t.loop, &t.drain);
  t.drain.data = &t;
  for (size_t i = 0; i < sizeof(signums) / sizeof(signums[0]); i++) {
    uv_signal_init(&t.loop, &t.sigs[i]);
    uv_signal_start(&t.sigs[i], on_signal, signums[i]);
  }
  struct mu_child_opts o = {argv[0], argv, NULL, on_exit_cb, on_alloc, on_read, on_closed, &t};
  int rc = mu_child_spawn_flags(&t.loop, &t.child, &o, MU_CHILD_SAME_GROUP | MU_CHILD_STDIN);
  if (rc == 0) {
    t.open_pipes = 2;
    uv_run(&t.loop, UV_RUN_DEFAULT); /* until both pipes are closed */
    while (!t.exited && uv_run(&t.loop, UV_RUN_ONCE) != 0)
      ; /* the command closed its pipes and still runs: wait for its end */
  }
  tee_close(&t);
  *code = t.code;
  *sig = t.sig;
  *log_err = t.log_err;
  return rc;
}
