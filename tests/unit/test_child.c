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

/* A program run to its end (the cluster tools' runner): its input on stdin, its stdout and
 * stderr captured under their caps, its exit code or signal; one that is not found. */
TEST(child__run_to_its_end)
{
  struct mu_buf out = MU_BUF_INIT(1 << 16), err = MU_BUF_INIT(1 << 16);
  char sh[] = "sh", c[] = "-c", s1[] = "cat; echo oops >&2; exit 7";
  char *cat[] = {sh, c, s1, NULL};
  struct mu_child_run r = {cat, "line one\nline two\n", &out, -1, &err, 0, 0, 0};
  ASSERT_EQ(mu_child_run(&r), 0);
  ASSERT_EQ(r.status, 7);
  ASSERT_STR_EQ(mu_buf_str(&out), "line one\nline two\n");
  ASSERT_STR_EQ(mu_buf_str(&err), "oops\n");
  ASSERT_EQ(r.out_over, 0);

  /* No input: stdin is at its end at once. A signal is 128 + its number. */
  char s2[] = "cat; kill -TERM $$";
  char *killed[] = {sh, c, s2, NULL};
  struct mu_child_run k = {killed, NULL, NULL, -1, NULL, 0, 0, 0};
  ASSERT_EQ(mu_child_run(&k), 0);
  ASSERT_EQ(k.status, 128 + SIGTERM);

  /* Output past the cap: what fits is kept and the run says so; stderr past its cap is cut. */
  struct mu_buf small = MU_BUF_INIT(10), small_err = MU_BUF_INIT(4);
  char s3[] = "seq 1 1000; seq 1 1000 >&2";
  char *lots[] = {sh, c, s3, NULL};
  struct mu_child_run l = {lots, NULL, &small, -1, &small_err, 0, 0, 0};
  ASSERT_EQ(mu_child_run(&l), 0);
  ASSERT_EQ(l.status, 0);
  ASSERT_EQ(l.out_over, 1);
  ASSERT_EQ(small.len, 10);
  ASSERT_EQ(small_err.len, 4);

  /* Its stdout straight to a file descriptor (kubectl logs -f into the caller's output). */
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  char echo_[] = "echo", words[] = "to the fd";
  char *echo[] = {echo_, words, NULL};
  struct mu_child_run e = {echo, NULL, NULL, p[1], NULL, 0, 0, 0};
  ASSERT_EQ(mu_child_run(&e), 0);
  close(p[1]);
  char got[64] = "";
  ASSERT_EQ(read(p[0], got, sizeof(got) - 1), 10);
  ASSERT_STR_EQ(got, "to the fd\n");
  close(p[0]);

  /* keep_stderr: its stderr is ours (here a pipe in place of our fd 2), not captured. */
  char s4[] = "echo said >&2";
  char *says[] = {sh, c, s4, NULL};
  struct mu_buf none = MU_BUF_INIT(64);
  struct mu_child_run k2 = {says, NULL, NULL, -1, &none, 0, 0, 1};
  int saved = dup(2), ep[2];
  ASSERT_EQ(pipe(ep), 0);
  dup2(ep[1], 2);
  int krc = mu_child_run(&k2);
  dup2(saved, 2);
  close(saved);
  close(ep[1]);
  ASSERT_EQ(krc, 0);
  char said[64] = "";
  ASSERT_EQ(read(ep[0], said, sizeof(said) - 1), 5);
  ASSERT_STR_EQ(said, "said\n");
  ASSERT_EQ(none.len, 0);
  close(ep[0]);
  mu_buf_release(&none);

  /* Not found: the libuv error, no status. */
  char tool[] = "/nonexistent/tool";
  char *missing[] = {tool, NULL};
  struct mu_child_run m = {missing, "x", &out, -1, &err, 0, 0, 0};
  ASSERT_EQ(mu_child_run(&m), UV_ENOENT);
  ASSERT_EQ(m.status, -1);
  mu_buf_release(&out);
  mu_buf_release(&err);
  mu_buf_release(&small);
  mu_buf_release(&small_err);
}
