/* libFuzzer target: every TCPStore query run by a real musterd's handlers (rendezvous/c10d/:
 * ops.c, wait.c, the queue handlers), WAIT, MULTI_GET, MULTI_SET and the queues included, where
 * fuzz_c10d_frame.c checks only the parser. The fuzzer's bytes go to musterd's TCPStore listener
 * over loopback, as a client sends them; ASan/UBSan check what the handlers do with them.
 *
 * Input: the format of fuzz_c10d_frame's seeds (two bytes of its own, then what a client
 * sends), so both targets share seeds; byte 1 picks whether the client half-closes after its
 * bytes (even) or waits for musterd to read them all first (odd: a WAIT stays parked and the
 * next input's SETs may wake it on its own connection, kept until then). One musterd serves
 * every input: what one input stored is there for the next (keys, queues, waits).
 *
 * Dictionary: fuzz/fuzz_c10d_ops.dict (query ids, the V2 handshake, u64 lengths and counts).
 * Build: CC=clang cmake -DMU_FUZZ=ON ...; run: build-fuzz/fuzz/fuzz_c10d_ops \
 *   -dict=fuzz/fuzz_c10d_ops.dict corpus/ fuzz/corpus/fuzz_c10d_frame/
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <uv.h>

#include "musterd/embed.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uv_loop_t loop;
static struct rv_server *srv;
static int c10d_port;
static int parked = -1; /* the previous input's connection, its WAIT possibly parked */

static void start_server(void)
{
  struct rv_server_config cfg;
  uv_loop_init(&loop);
  rv_server_config_init(&cfg);
  cfg.listen_port = 0;
  cfg.max_connections_per_address = 64;
  srv = rv_server_new(&loop, &cfg);
  if (srv == NULL || rv_server_listen(srv) != 0 || rv_server_listen_c10d(srv, "127.0.0.1", 0) != 0)
    __builtin_trap();
  c10d_port = rv_server_c10d_port(srv);
}

static int connect_client(void)
{
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof(sa));
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sa.sin_port = htons((uint16_t)c10d_port);
  if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
    __builtin_trap();
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

/* Turns the loop while `fd` takes p[0..n) and drains its answers. With `until_eof`, until
 * musterd closes the connection; else until the loop has nothing left to do at once.
 * A connection musterd neither answers nor closes within ~10,000 idle turns is a finding. */
static void pump(int fd, const uint8_t *p, size_t n, int until_eof)
{
  size_t sent = 0;
  int shut = 0;
  char sink[65536];
  for (long idle = 0; idle < 10000; idle++) {
    if (sent < n) {
      ssize_t w = send(fd, p + sent, n - sent, MSG_NOSIGNAL);
      if (w > 0) {
        sent += (size_t)w;
        idle = 0;
      } else if (w < 0 && errno != EAGAIN) {
        return; /* closed by musterd (a bound): fine */
      }
    }
    if (sent == n && until_eof && !shut) {
      shutdown(fd, SHUT_WR);
      shut = 1;
    }
    uv_run(&loop, UV_RUN_NOWAIT);
    ssize_t r = recv(fd, sink, sizeof(sink), 0);
    if (r == 0 || (r < 0 && errno != EAGAIN))
      return;
    if (r > 0)
      idle = 0;
    if (!until_eof && sent == n && idle > 64)
      return;
  }
  if (until_eof)
    __builtin_trap(); /* musterd kept a half-closed connection with nothing to send */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (srv == NULL)
    start_server();
  if (size < 2)
    return 0;
  int until_eof = !(data[1] & 1);
  int fd = connect_client();
  pump(fd, data + 2, size - 2, until_eof);
  if (parked >= 0)
    close(parked);
  parked = -1;
  if (until_eof)
    close(fd);
  else
    parked = fd;
  for (int i = 0; i < 16; i++)
    uv_run(&loop, UV_RUN_NOWAIT); /* the closes */
  return 0;
}
