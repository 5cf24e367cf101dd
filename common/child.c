/* A child process with piped output (see child.h). */
#include "child.h"

#include <string.h>

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
