/* A child process with piped output (see child.h). */
#include "child.h"

#include <string.h>

#include "muster/errno.h"

int mu_child_spawn(uv_loop_t *loop, struct mu_child *c, const struct mu_child_opts *o)
{
  uv_pipe_init(loop, &c->out, 0);
  uv_pipe_init(loop, &c->err, 0);
  c->proc.data = c->out.data = c->err.data = o->data;
  uv_stdio_container_t stdio[3];
  stdio[0].flags = UV_IGNORE;
  stdio[1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
  stdio[1].data.stream = (uv_stream_t *)&c->out;
  stdio[2].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
  stdio[2].data.stream = (uv_stream_t *)&c->err;
  uv_process_options_t po;
  memset(&po, 0, sizeof(po));
  po.exit_cb = o->on_exit;
  po.file = o->file;
  po.args = o->args;
  po.env = o->env;
  po.flags = UV_PROCESS_DETACHED; /* setsid: its own session and process group */
  po.stdio_count = 3;
  po.stdio = stdio;
  int rc = uv_spawn(loop, &c->proc, &po);
  if (rc != 0) {
    /* A failed uv_spawn still initialised the process handle: it needs closing too, or
     * uv_loop_close() fails. */
    c->proc.data = o->data;
    uv_close((uv_handle_t *)&c->proc, o->on_close);
    uv_close((uv_handle_t *)&c->out, o->on_close);
    uv_close((uv_handle_t *)&c->err, o->on_close);
    return rc;
  }
  uv_read_start((uv_stream_t *)&c->out, o->on_alloc, o->on_read);
  uv_read_start((uv_stream_t *)&c->err, o->on_alloc, o->on_read);
  return 0;
}

/* ---------------------------------------------------------------------------------------------
 * A program run to its end
 */

struct run_state {
  struct mu_child_run *r;
  uv_process_t proc;
  uv_pipe_t in, out, err;
  uv_write_t write;
  uv_buf_t input;
  char slab[4096];
};

static void run_closed(uv_handle_t *h)
{
  (void)h;
}

/* Appends what fits of p[0..n) to b (output that is not ours to bound: b's cap is the most
 * kept). Returns: 1 when some of it did not fit, else 0. */
static int append_capped(struct mu_buf *b, const char *p, size_t n)
{
  if (b == NULL || mu_buf_append(b, p, n) == 0)
    return 0;
  mu_buf_append(b, p, b->max - b->len);
  return 1;
}

static void run_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
  struct run_state *st = h->data;
  (void)suggested;
  buf->base = st->slab;
  buf->len = sizeof(st->slab);
}

static void run_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
  struct run_state *st = s->data;
  if (n > 0 && s == (uv_stream_t *)&st->out)
    st->r->out_over |= append_capped(st->r->out, buf->base, (size_t)n);
  else if (n > 0)
    append_capped(st->r->err, buf->base, (size_t)n);
  if (n < 0)
    uv_close((uv_handle_t *)s, run_closed);
}

static void run_exit(uv_process_t *p, int64_t status, int term_signal)
{
  struct run_state *st = p->data;
  st->r->status = term_signal ? 128 + term_signal : (int)status;
  uv_close((uv_handle_t *)p, run_closed);
}

/* The input is written (or the child stopped reading it: EPIPE): its end of file. */
static void run_written(uv_write_t *w, int status)
{
  struct run_state *st = w->data;
  (void)status;
  uv_close((uv_handle_t *)&st->in, run_closed);
}

/* The three stdio slots: stdin from the input pipe or /dev/null, stdout to a pipe or out_fd,
 * stderr to a pipe. */
static void run_stdio(struct run_state *st, uv_stdio_container_t io[3])
{
  io[0].flags = UV_IGNORE;
  if (st->r->input != NULL) {
    io[0].flags = UV_CREATE_PIPE | UV_READABLE_PIPE;
    io[0].data.stream = (uv_stream_t *)&st->in;
  }
  io[1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
  io[1].data.stream = (uv_stream_t *)&st->out;
  if (st->r->out_fd >= 0) {
    io[1].flags = UV_INHERIT_FD;
    io[1].data.fd = st->r->out_fd;
  }
  io[2].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
  io[2].data.stream = (uv_stream_t *)&st->err;
  if (st->r->keep_stderr) {
    io[2].flags = UV_INHERIT_FD;
    io[2].data.fd = 2;
  }
}

int mu_child_run(struct mu_child_run *r)
{
  uv_loop_t loop;
  struct run_state st;
  uv_stdio_container_t io[3];
  uv_process_options_t po;
  memset(&st, 0, sizeof(st));
  memset(&po, 0, sizeof(po));
  st.r = r;
  r->status = -1;
  r->out_over = 0;
  if (uv_loop_init(&loop) != 0)
    return MU_EIO;
  uv_pipe_init(&loop, &st.in, 0);
  uv_pipe_init(&loop, &st.out, 0);
  uv_pipe_init(&loop, &st.err, 0);
  st.proc.data = st.in.data = st.out.data = st.err.data = st.write.data = &st;
  run_stdio(&st, io);
  po.exit_cb = run_exit;
  po.file = r->args[0];
  po.args = r->args;
  po.stdio_count = 3;
  po.stdio = io;
  int rc = uv_spawn(&loop, &st.proc, &po);
  if (rc != 0) {
    uv_close((uv_handle_t *)&st.proc, run_closed);
    uv_close((uv_handle_t *)&st.in, run_closed);
    uv_close((uv_handle_t *)&st.out, run_closed);
    uv_close((uv_handle_t *)&st.err, run_closed);
  } else {
    st.input = uv_buf_init((char *)(r->input ? r->input : ""), r->input ? strlen(r->input) : 0);
    if (st.input.len == 0 ||
        uv_write(&st.write, (uv_stream_t *)&st.in, &st.input, 1, run_written) != 0)
      uv_close((uv_handle_t *)&st.in, run_closed);
    if (r->out_fd >= 0)
      uv_close((uv_handle_t *)&st.out, run_closed);
    else
      uv_read_start((uv_stream_t *)&st.out, run_alloc, run_read);
    if (r->keep_stderr)
      uv_close((uv_handle_t *)&st.err, run_closed);
    else
      uv_read_start((uv_stream_t *)&st.err, run_alloc, run_read);
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
  return rc;
}
