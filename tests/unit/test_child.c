/* Tests for common/child.c: a child on a libuv loop with piped stdout and stderr, in its own
 * process group; and the close of all three handles when it cannot start. */
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "buf.h"
#include "child.h"
#include "task.h"

struct run {
  struct mu_child c;
  struct mu_buf out, err;
  int closed;
  int exited;
  int64_t status;
  int term_signal;
  char slab[256];
};

static void on_close(uv_handle_t *h)
{
  struct run *r = h->data;
  r->closed++;
}

static void on_exit_cb(uv_process_t *p, int64_t status, int term_signal)
{
  struct run *r = p->data;
  r->exited = 1;
  r->status = status;
  r->term_signal = term_signal;
  uv_close((uv_handle_t *)p, on_close);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
  struct run *r = h->data;
  (void)suggested;
  buf->base = r->slab;
  buf->len = sizeof(r->slab);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
  struct run *r = s->data;
  if (n > 0)
    mu_buf_append(s == (uv_stream_t *)&r->c.err ? &r->err : &r->out, buf->base, (size_t)n);
  else if (n < 0)
    uv_close((uv_handle_t *)s, on_close);
}

TEST(child__pipes_exit_and_process_group)
{
  uv_loop_t loop;
  struct run r;
  memset(&r, 0, sizeof(r));
  mu_buf_init(&r.out, SIZE_MAX);
  mu_buf_init(&r.err, SIZE_MAX);
  ASSERT_EQ(uv_loop_init(&loop), 0);
  char sh[] = "sh", c[] = "-c";
  /* Its own process group: its pgrp (field 5 of /proc/PID/stat) is its pid. */
  char script[] = "echo out; echo err >&2; read -r p c s pp pg rest </proc/$$/stat; "
                  "test \"$pg\" = $$ || exit 9; exit 7";
  char *args[] = {sh, c, script, NULL};
  struct mu_child_opts o = {"sh", args, NULL, on_exit_cb, on_alloc, on_read, on_close, &r};
  ASSERT_EQ(mu_child_spawn(&loop, &r.c, &o), 0);
  ASSERT(r.c.proc.pid > 0);
  uv_run(&loop, UV_RUN_DEFAULT);
  ASSERT_EQ(r.exited, 1);
  ASSERT_EQ(r.status, 7);
  ASSERT_EQ(r.term_signal, 0);
  ASSERT_EQ(r.closed, 3);
  ASSERT_STR_EQ(mu_buf_str(&r.out), "out\n");
  ASSERT_STR_EQ(mu_buf_str(&r.err), "err\n");
  ASSERT_EQ(uv_loop_close(&loop), 0);
  mu_buf_release(&r.out);
  mu_buf_release(&r.err);
}

TEST(child__cannot_start_closes_all_three)
{
  uv_loop_t loop;
  struct run r;
  memset(&r, 0, sizeof(r));
  ASSERT_EQ(uv_loop_init(&loop), 0);
  char prog[] = "/nonexistent/program";
  char *args[] = {prog, NULL};
  struct mu_child_opts o = {args[0], args, NULL, on_exit_cb, on_alloc, on_read, on_close, &r};
  ASSERT_EQ(mu_child_spawn(&loop, &r.c, &o), UV_ENOENT);
  uv_run(&loop, UV_RUN_DEFAULT);
  ASSERT_EQ(r.closed, 3);
  ASSERT_EQ(r.exited, 0);
  ASSERT_EQ(uv_loop_close(&loop), 0);
}
