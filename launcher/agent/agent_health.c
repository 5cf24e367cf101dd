/* `muster agent --health-check CMD`: the node's check, run before every join as `/bin/sh -c
 * CMD` in its own process group on a loop of its own, its stdout and stderr kept together (the
 * last MU_AGENT_CHECK_OUTPUT_MAX bytes: what a check says last matters most). It passes when it
 * exits 0 within --health-check-timeout; at the timeout its group gets SIGKILL and it failed.
 * `--health-check neuron[:...]` is the builtin Neuron check instead (agent_neuron.c), which runs
 * its one program (neuron-ls -j) through the same runner, keeping the head of its output.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <uv.h>

#include "muster/errno.h"

#include "agent.h"
#include "agent_impl.h"
#include "alloc.h"
#include "child.h"

struct check {
  struct mu_child child;
  uv_timer_t timer;
  char *out;  /* tail: a ring of the last cap bytes; else the first cap bytes */
  size_t cap; /* of out */
  size_t len, start;
  int tail, over; /* over: more came than the first cap bytes (not tail) */
  int open_handles;
  int exited, timed_out;
  int out_open, err_open;
  int64_t status;
  int term_signal;
};

static void on_closed(uv_handle_t *h)
{
  struct check *c = h->data;
  c->open_handles--;
}

static void keep(struct check *c, const char *p, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    if (c->len < c->cap) {
      c->out[(c->start + c->len++) % c->cap] = p[i];
    } else if (!c->tail) {
      c->over = 1;
      return;
    } else {
      c->out[c->start] = p[i];
      c->start = (c->start + 1) % c->cap;
    }
  }
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
  (void)h;
  (void)suggested;
  static _Thread_local char slab[16384];
  buf->base = slab;
  buf->len = sizeof(slab);
}

static void close_pipe(struct check *c, uv_stream_t *s)
{
  int *open = s == (uv_stream_t *)&c->child.out ? &c->out_open : &c->err_open;
  if (!*open)
    return;
  *open = 0;
  uv_read_stop(s);
  uv_close((uv_handle_t *)s, on_closed);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
  struct check *c = s->data;
  if (n > 0)
    keep(c, buf->base, (size_t)n);
  else if (n < 0)
    close_pipe(c, s);
}

static void on_exit_cb(uv_process_t *p, int64_t status, int term_signal)
{
  struct check *c = p->data;
  c->exited = 1;
  c->status = status;
  c->term_signal = term_signal;
  uv_close((uv_handle_t *)p, on_closed);
  /* what it started may hold the pipes: the group goes with the check */
  kill(-c->child.proc.pid, SIGKILL);
}

/* At the timeout: a check still running is killed (its group); one that ended but left
 * something holding its output open is read no further. */
static void on_timeout(uv_timer_t *t)
{
  struct check *c = t->data;
  if (c->exited) {
    close_pipe(c, (uv_stream_t *)&c->child.out);
    close_pipe(c, (uv_stream_t *)&c->child.err);
    return;
  }
  c->timed_out = 1;
  if (kill(-c->child.proc.pid, SIGKILL) != 0)
    kill(c->child.proc.pid, SIGKILL);
}

int mu_agent_run_check(char **args, double timeout_s, size_t cap, int tail, struct mu_buf *output,
                       struct mu_buf *why)
{
  uv_loop_t loop;
  struct check *c = mu_calloc(1, sizeof(*c));
  int rc = MU_EINVAL;
  c->out = mu_malloc(cap > 0 ? cap : 1);
  c->cap = cap > 0 ? cap : 1;
  c->tail = tail;
  uv_loop_init(&loop);
  uv_timer_init(&loop, &c->timer);
  c->timer.data = c;
  c->open_handles = 1;
  struct mu_child_opts o = {args[0], args, NULL, on_exit_cb, on_alloc, on_read, on_closed, c};
  c->open_handles += 3;
  int sp = mu_child_spawn(&loop, &c->child, &o);
  if (sp != 0) {
    mu_buf_printf(why, "cannot run it: %s", uv_strerror(sp));
  } else {
    c->out_open = c->err_open = 1;
    uint64_t ms = (uint64_t)(timeout_s * 1000);
    uv_timer_start(&c->timer, on_timeout, ms, ms);
  }
  /* until the process and both pipes are closed; then the timer */
  while (c->open_handles > 1 && uv_run(&loop, UV_RUN_ONCE) != 0) {
  }
  uv_close((uv_handle_t *)&c->timer, on_closed);
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
  for (size_t i = 0; i < c->len; i++)
    (void)mu_buf_putc(output, c->out[(c->start + i) % c->cap]);
  if (sp != 0) {
  } else if (c->timed_out) {
    mu_buf_printf(why, "it ran longer than --health-check-timeout (%g s)", timeout_s);
  } else if (c->term_signal != 0) {
    mu_buf_printf(why, "it was killed by signal %d (%s)", c->term_signal,
                  strsignal(c->term_signal));
  } else if (c->status != 0) {
    mu_buf_printf(why, "it exited with code %lld", (long long)c->status);
  } else if (c->over) {
    mu_buf_printf(why, "its output passed %zu bytes", cap);
  } else {
    rc = 0;
  }
  mu_free(c->out);
  mu_free(c);
  return rc;
}

int mu_agent_health_check(const struct mu_agent_config *cfg, struct mu_buf *output,
                          struct mu_buf *why)
{
  if (mu_agent_neuron_is_builtin(cfg->health_check))
    return mu_agent_neuron_health(cfg, output, why);
  char *args[] = {(char *)"/bin/sh", (char *)"-c", (char *)cfg->health_check, NULL};
  return mu_agent_run_check(args, cfg->health_check_timeout_s, MU_AGENT_CHECK_OUTPUT_MAX, 1, output,
                            why);
}
