/* libFuzzer target: musterd's request path without sockets.
 *
 * Each input is the byte stream one client sends on one connection. It goes through
 * rv_server_feed(): llhttp parsing, limits, routing, the etcd v2 keys handlers (and the /v1
 * ones) on an in-memory store, watches (answered from history or dropped at end of input), and
 * the reply writer. The store persists across inputs so that later inputs meet earlier keys;
 * the server is rebuilt every MU_FUZZ_RESET inputs to keep memory flat.
 *
 * Checked beyond ASan/UBSan: every non-empty output starts with an HTTP/1.1 status line.
 *
 * Build: CC=clang cmake -DMU_FUZZ=ON ...; run: build-fuzz/fuzz/fuzz_http_request corpus/
 * Seeds: fuzz/corpus/fuzz_http_request/.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <uv.h>

#include "buf.h"
#include "http.h"
#include "log.h"

#define MU_FUZZ_RESET 4096
#define MU_FUZZ_OUT_MAX (4u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static uv_loop_t fz_loop;
static struct rv_server *fz_srv;
static unsigned fz_runs;

static struct rv_server *fz_new_server(void)
{
  struct rv_server_config cfg;
  rv_server_config_init(&cfg);
  cfg.listen_port = 0;
  /* Small limits so that the fuzzer reaches the 413/414/431 paths with short inputs. */
  cfg.max_body_bytes = 4096;
  cfg.max_header_bytes = 2048;
  cfg.max_url_bytes = 1024;
  return rv_server_new(&fz_loop, &cfg);
}

static void fz_closed(void *data)
{
  *(int *)data = 1;
}

static void fz_reset(void)
{
  int closed = 0;
  rv_server_close(fz_srv, fz_closed, &closed);
  while (!closed && uv_run(&fz_loop, UV_RUN_ONCE) != 0) {
  }
  if (!closed)
    __builtin_trap(); /* rv_server_close never finished */
  fz_srv = fz_new_server();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  (void)argc;
  (void)argv;
  mu_log_setup("fuzz_http_request", MU_LOG_OFF);
  if (uv_loop_init(&fz_loop) != 0)
    __builtin_trap();
  fz_srv = fz_new_server();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  struct mu_buf out = MU_BUF_INIT(MU_FUZZ_OUT_MAX);
  (void)rv_server_feed(fz_srv, (const char *)data, size, &out);
  if (out.len > 0 && (out.len < 12 || memcmp(out.data, "HTTP/1.1 ", 9) != 0))
    __builtin_trap(); /* the server wrote something that is not an HTTP response */
  mu_buf_release(&out);
  /* Let expired TTL timers and closes run, as the real loop would between reads. */
  uv_run(&fz_loop, UV_RUN_NOWAIT);
  if (++fz_runs % MU_FUZZ_RESET == 0)
    fz_reset();
  return 0;
}
