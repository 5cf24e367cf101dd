/* musterd: the rendezvous server. The top of the room: options bound straight to the config
 * fields of the layers below (server, security, persist, rdzv), then the server built from
 * them, signals, the start line, the loop.
 *
 *   musterd --listen 127.0.0.1:2379 [--advertise-url URL] [--max-connections N] ...
 *
 * The start line "musterd listening on HOST:PORT" is what launchers and tests parse (with
 * --listen HOST:0 it carries the port the kernel chose).
 */
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "muster/mu.h"

#include "alloc.h"
#include "allow.h"
#include "c10d.h"
#include "http.h"
#include "http_client.h"
#include "log.h"
#include "opts.h"
#include "persist.h"
#include "proc.h"
#include "rdzv.h"
#include "security.h"
#include "strvec.h"
#include "v1.h"
#include "v2.h"

/* Everything the options set. Rows of the option table point straight at these fields. */
struct musterd_config {
  struct rv_server_config server;
  struct sec_config security;
  struct mu_strvec auth_users; /* --auth-user, handed to security.auth_users */
  struct mu_strvec origins;    /* --allowed-origin, handed to server.allowed_origins */
  const char *listen;
  char host[256];          /* --listen's host, what server.listen_host points at */
  const char *c10d_listen; /* --c10d-listen HOST:PORT (NULL: no TCPStore listener) */
  const char *c10d_allow;  /* --c10d-allow LIST (NULL: every peer) */
  char c10d_host[256];
  int c10d_port;
  const char *log_level;
  int version;
  const char *probe; /* --probe URL: the health check of an image without a shell */
  const char *data_dir;
  const char *fsync;
  enum persist_fsync fsync_mode;
  uint64_t snapshot_every;
  uint64_t snapshot_bytes;
  uint64_t run_gc_seconds;
  uint64_t c10d_run_gc_seconds;
  uint64_t v1_max_bytes, v1_max_runs, v1_max_runs_per_client, v1_max_lease_ms;
};

struct app {
  uv_loop_t loop;
  struct rv_server *srv;
  struct persist *persist; /* --data-dir */
  uv_signal_t sigterm, sigint;
  int signals_closed;
};

/* Splits "HOST:PORT", "[V6]:PORT" or "http://HOST:PORT" into host and port. */
static int parse_listen(const char *s, char *host, size_t hsize, int *port)
{
  if (strncmp(s, "http://", 7) == 0)
    s += 7;
  const char *colon = NULL;
  const char *hstart = s;
  size_t hlen = 0;
  if (s[0] == '[') {
    const char *end = strchr(s, ']');
    if (end == NULL || end[1] != ':')
      return -1;
    hstart = s + 1;
    hlen = (size_t)(end - s - 1);
    colon = end + 1;
  } else {
    colon = strrchr(s, ':');
    if (colon == NULL)
      return -1;
    hlen = (size_t)(colon - s);
  }
  if (hlen == 0 || hlen >= hsize)
    return -1;
  long p = 0;
  char portbuf[16];
  size_t plen = strlen(colon + 1);
  if (plen == 0 || plen >= sizeof(portbuf))
    return -1;
  memcpy(portbuf, colon + 1, plen + 1);
  if (portbuf[plen - 1] == '/')
    portbuf[plen - 1] = '\0';
  if (mu_parse_long(portbuf, 0, 65535, &p) != 0)
    return -1;
  memcpy(host, hstart, hlen);
  host[hlen] = '\0';
  if (strcmp(host, "localhost") == 0)
    snprintf(host, hsize, "127.0.0.1");
  *port = (int)p;
  return 0;
}

static void on_signal_closed(uv_handle_t *h)
{
  (void)h;
}

static void on_server_closed(void *data)
{
  struct app *app = data;
  app->srv = NULL;
  if (!app->signals_closed) {
    app->signals_closed = 1;
    uv_close((uv_handle_t *)&app->sigterm, on_signal_closed);
    uv_close((uv_handle_t *)&app->sigint, on_signal_closed);
  }
}

static void on_signal(uv_signal_t *h, int signum)
{
  struct app *app = h->data;
  if (app->srv == NULL)
    return;
  mu_log(MU_LOG_INFO, "musterd shutting down (%s): answering in-flight requests, closing watchers",
         signum == SIGTERM ? "SIGTERM" : "SIGINT");
  if (app->persist != NULL) {
    int prc = persist_stop(app->persist);
    if (prc != 0)
      mu_log(MU_LOG_ERROR, "final snapshot/sync of the data dir failed: %s", strerror(-prc));
  }
  rv_server_close(app->srv, on_server_closed, app);
}

/* The option table, bound to `c`'s fields (defaults are what they hold before parsing). */
#define MAX_RUN_GC_SECONDS (100L * 365 * 24 * 3600) /* 100 years */
static int parse_options(struct musterd_config *c, int argc, char **argv)
{
  struct rv_server_config *sv = &c->server;
  struct sec_quota_config *q = &c->security.quota;
  struct mu_opt opts[] = {
      MU_OPT_STRING('l', "listen", &c->listen, "HOST:PORT",
                    "address to serve on (default 127.0.0.1:2379; port 0 = any free port)"),
      MU_OPT_STRING(0, "c10d-listen", &c->c10d_listen, "HOST:PORT",
                    "also serve PyTorch's TCPStore protocol (torchrun --rdzv_backend c10d) on "
                    "exactly this address, over the same store; off by default; it has no "
                    "credentials (docs/security.md)"),
      MU_OPT_STRING(0, "c10d-allow", &c->c10d_allow, "LIST",
                    "TCPStore: admit only peers in LIST, comma-separated addresses and "
                    "prefixes (10.0.0.5,10.0.1.0/24,::1); others are closed at accept; the "
                    "Slurm scheduler passes the allocation's nodes (default: every peer)"),
      MU_OPT_UINT(0, "c10d-max-value-bytes", &sv->c10d_max_value_bytes, "N",
                  "TCPStore: one value's bytes; a bigger one closes its connection (default 8 "
                  "MiB, torch's own bound)",
                  1, (long)(1u << 30)),
      MU_OPT_UINT(0, "c10d-max-keys", &sv->c10d_max_keys, "N",
                  "TCPStore: keys and queued items held at once; a write past it closes its "
                  "connection (default 1000000)",
                  1, LONG_MAX),
      MU_OPT_UINT(0, "c10d-max-store-bytes", &sv->c10d_max_store_bytes, "N",
                  "TCPStore: what the keys, values and queued items hold together; a write "
                  "that adds bytes past it closes its connection, the store still serves "
                  "(default 128 MiB)",
                  65536, LONG_MAX),
      MU_OPT_UINT(0, "c10d-run-gc-seconds", &c->c10d_run_gc_seconds, "N",
                  "TCPStore: delete a torchrun run's keys N seconds after its last write (its "
                  "agents write every 5 s while it lives); 0 = never (default 600)",
                  0, MAX_RUN_GC_SECONDS),
      MU_OPT_STRING(0, "advertise-url", &sv->advertise_url, "URL",
                    "client URL reported by /v2/machines (default http://HOST:PORT)"),
      MU_OPT_STRING(0, "name", &sv->name, "NAME", "member name in /v2/members (default musterd)"),
      MU_OPT_UINT(0, "max-connections", &sv->max_connections, "N",
                  "open connections before new ones get 503 (default 10000)", 1, UINT_MAX),
      MU_OPT_UINT(0, "max-connections-per-address", &sv->max_connections_per_address, "N",
                  "open connections from one client address before its new ones get 503 "
                  "(default 1000)",
                  1, UINT_MAX),
      MU_OPT_UINT(0, "max-body-bytes-per-address", &sv->max_body_bytes_per_address, "N",
                  "request bodies in progress from one client address before 503 (default 8 "
                  "MiB, at least --max-body-bytes)",
                  0, LONG_MAX),
      MU_OPT_UINT(0, "max-buffer-bytes", &sv->max_buffer_bytes, "N",
                  "what all connections may buffer together: requests, stashed input, answers "
                  "not yet read (default 256 MiB); anonymous connections are closed first past it",
                  1 << 20, LONG_MAX),
      MU_OPT_UINT(0, "max-buffer-bytes-per-client", &sv->max_buffer_bytes_per_client, "N",
                  "the same for one client (an address, or its prefix); an answer past it gets "
                  "429 (default 32 MiB)",
                  65536, LONG_MAX),
      MU_OPT_UINT(0, "client-prefix-v4", &sv->client_prefix_v4, "BITS",
                  "IPv4 addresses with these first bits in common are one client (default 32)", 1,
                  32),
      MU_OPT_UINT(0, "client-prefix-v6", &sv->client_prefix_v6, "BITS",
                  "IPv6 addresses with these first bits in common are one client (default 64)", 1,
                  128),
      MU_OPT_UINT(0, "max-body-bytes", &sv->max_body_bytes, "N",
                  "request body limit, 413 (default 1 MiB)", 0, LONG_MAX),
      MU_OPT_UINT(0, "max-header-bytes", &sv->max_header_bytes, "N",
                  "request line + headers limit, 431 (default 16 KiB)", 256, LONG_MAX),
      MU_OPT_UINT(0, "max-url-bytes", &sv->max_url_bytes, "N",
                  "request target limit, 414 (default 8 KiB)", 16, LONG_MAX),
      MU_OPT_UINT(0, "max-output-bytes", &sv->max_output_bytes, "N",
                  "unsent output per connection before it is closed (default 8 MiB)", 65536,
                  LONG_MAX),
      MU_OPT_UINT(0, "idle-timeout-ms", &sv->idle_timeout_ms, "MS",
                  "close connections idle this long; 0 = never (default 300000)", 0, LONG_MAX),
      MU_OPT_UINT(0, "header-timeout-ms", &sv->header_timeout_ms, "MS",
                  "a request line and headers (and a TLS handshake) must arrive within this, "
                  "else close; 0 = never (default 10000)",
                  0, LONG_MAX),
      MU_OPT_UINT(0, "body-timeout-ms", &sv->body_timeout_ms, "MS",
                  "a request body must arrive within this after its headers; 0 = never "
                  "(default 60000)",
                  0, LONG_MAX),
      MU_OPT_UINT(0, "write-timeout-ms", &sv->write_timeout_ms, "MS",
                  "close a connection whose reply makes no progress this long (client not "
                  "reading); 0 = never (default 60000)",
                  0, LONG_MAX),
      MU_OPT_LIST(0, "allowed-origin", &c->origins, "ORIGIN",
                  "a web page (scheme://host[:port]) whose scripts may use musterd besides its "
                  "own status page (repeatable; browsers from other pages get 403)"),
      MU_OPT_STRING(0, "tls-cert", &c->security.tls.cert_file, "FILE",
                    "serve HTTPS with this PEM certificate chain (with --tls-key)"),
      MU_OPT_STRING(0, "tls-key", &c->security.tls.key_file, "FILE",
                    "the PEM private key of --tls-cert"),
      MU_OPT_STRING(0, "tls-client-ca", &c->security.tls.client_ca_file, "FILE",
                    "require client certificates signed by this PEM CA bundle"),
      MU_OPT_STRING(0, "token-file", &c->security.token_file, "FILE",
                    "require 'Authorization: Bearer TOKEN' on /v1 and /v2: one token a line, "
                    "followed by its scopes if any (runs=GLOB keys=/PREFIX read-only "
                    "quota-watchers=N quota-value-bytes=N)"),
      MU_OPT_STRING(0, "auth-users", &c->security.users_file, "FILE",
                    "etcd v2 basic auth: USER:PASSWORD lines (also accepted on /v1), followed by "
                    "scopes as --token-file's"),
      MU_OPT_LIST(0, "auth-user", &c->auth_users, "USER:PASSFILE",
                  "one basic-auth user, password read from PASSFILE (repeatable)"),
      MU_OPT_UINT(0, "quota-keys", &q->max_keys, "N",
                  "keys and dirs in the v2 store (0 = no limit)", 0, LONG_MAX),
      MU_OPT_UINT(0, "quota-value-bytes", &q->max_value_bytes, "N",
                  "one v2 value or /v1 KV value, 413 (0 = no limit)", 0, LONG_MAX),
      MU_OPT_UINT(0, "quota-watchers", &q->max_watchers, "N",
                  "watches and long polls open at once, 429 (0 = no limit)", 0, LONG_MAX),
      MU_OPT_UINT(0, "quota-watchers-per-client", &q->max_watchers_per_client, "N",
                  "the same from one client address (0 = no limit)", 0, LONG_MAX),
      MU_OPT_UINT(0, "quota-run-watchers", &q->max_run_watchers, "N",
                  "long polls open at once on one /v1 run (0 = no limit)", 0, LONG_MAX),
      MU_OPT_UINT(0, "quota-run-keys", &q->max_run_keys, "N",
                  "/v1 KV keys of one run (0 = no limit)", 0, LONG_MAX),
      MU_OPT_UINT(0, "quota-run-bytes", &q->max_run_bytes, "N",
                  "/v1 KV value bytes of one run (0 = no limit)", 0, LONG_MAX),
      MU_OPT_UINT(0, "run-gc-seconds", &c->run_gc_seconds, "N",
                  "forget a /v1 run N seconds after it closed or lost its last node (default 600)",
                  1, MAX_RUN_GC_SECONDS),
      MU_OPT_UINT(0, "v1-max-bytes", &c->v1_max_bytes, "N",
                  "the memory of all /v1 state (runs, nodes, barriers, KV); a write or join past "
                  "it is refused (default 128 MiB, at most 4 GiB)",
                  65536, RDZV_BYTES_MAX),
      MU_OPT_UINT(0, "v1-max-runs", &c->v1_max_runs, "N",
                  "/v1 runs held at once (default and at most 10000)", 1, RDZV_RUNS_MAX),
      MU_OPT_UINT(0, "v1-max-runs-per-client", &c->v1_max_runs_per_client, "N",
                  "/v1 runs one client address may have created and musterd still holds "
                  "(default 1000)",
                  1, UINT32_MAX),
      MU_OPT_UINT(0, "v1-max-lease-ms", &c->v1_max_lease_ms, "MS",
                  "the longest lease_ttl_ms a /v1 join may ask for (default 600000)", 1,
                  7LL * 24 * 3600 * 1000),
      MU_OPT_STRING(0, "data-dir", &c->data_dir, "DIR",
                    "keep the v2 store and /v1 runs in DIR (write-ahead log + snapshots) and "
                    "recover them at start-up; default: memory only"),
      MU_OPT_STRING(0, "fsync", &c->fsync, "MODE",
                    "with --data-dir: always, batch (group commit, default) or off"),
      MU_OPT_UINT(0, "snapshot-every", &c->snapshot_every, "N",
                  "with --data-dir: snapshot and compact the log every N writes (default 100000; "
                  "0 = only at shutdown)",
                  0, LONG_MAX),
      MU_OPT_UINT(0, "snapshot-bytes", &c->snapshot_bytes, "N",
                  "with --data-dir: also snapshot once the log since the last snapshot exceeds N "
                  "bytes or twice the last snapshot's size, whichever is larger (default 64 MiB; "
                  "0 = no size trigger)",
                  0, LONG_MAX),
      MU_OPT_STRING(0, "log-level", &c->log_level, "LEVEL", "debug, info, warn, error or off"),
      MU_OPT_BOOL(0, "log-requests", &sv->log_requests, "log one line per request"),
      MU_OPT_BOOL('V', "version", &c->version, "print the version and exit"),
      MU_OPT_STRING(0, "probe", &c->probe, "URL",
                    "health check: GET URL (http://HOST:PORT/healthz) and exit 0 on 200, 1 "
                    "otherwise; serves nothing (an image's HEALTHCHECK, no shell needed)"),
      MU_OPT_END(),
  };
  int n = mu_opts_parse(opts, argc, argv, 0, "musterd [options]");
  if (n == MU_OPTS_HELP)
    return MU_EXIT_OK;
  if (n < 0)
    return MU_EXIT_USAGE;
  if (n < argc) {
    mu_error("unexpected argument '%s' (musterd takes options only; see musterd --help)", argv[n]);
    return MU_EXIT_USAGE;
  }
  return -1;
}

/* --c10d-allow: a list musterd can read, and a listener for it. Returns: 0, or -1 after the
 * error. */
static int check_c10d_allow(const struct musterd_config *c)
{
  if (c->c10d_allow == NULL)
    return 0;
  if (c->c10d_listen == NULL) {
    mu_error("--c10d-allow needs --c10d-listen HOST:PORT (it says who may use that listener)");
    return -1;
  }
  struct c10d_allow a = {0};
  char err[256];
  int rc = c10d_allow_parse(c->c10d_allow, &a, err, sizeof(err));
  c10d_allow_free(&a);
  if (rc != 0)
    mu_error("invalid --c10d-allow '%s': %s; give addresses or prefixes separated by commas, "
             "e.g. 10.0.0.5,10.0.1.0/24,::1",
             c->c10d_allow, err);
  return rc;
}

/* The checks that span options, and the strings parsed into their values.
 * Returns: -1 to go on, or the exit status after printing the error. */
static int check_options(struct musterd_config *c)
{
  enum mu_log_level level;
  if (mu_log_level_parse(c->log_level, &level) != 0) {
    mu_error("invalid --log-level '%s': use debug, info, warn, error or off", c->log_level);
    return MU_EXIT_USAGE;
  }
  mu_log_setup("musterd", level);
  if (parse_listen(c->listen, c->host, sizeof(c->host), &c->server.listen_port) != 0) {
    mu_error("invalid --listen '%s': expected HOST:PORT, e.g. 127.0.0.1:2379", c->listen);
    return MU_EXIT_USAGE;
  }
  c->server.listen_host = c->host;
  if (c->c10d_listen != NULL &&
      parse_listen(c->c10d_listen, c->c10d_host, sizeof(c->c10d_host), &c->c10d_port) != 0) {
    mu_error("invalid --c10d-listen '%s': expected HOST:PORT, e.g. 127.0.0.1:29400",
             c->c10d_listen);
    return MU_EXIT_USAGE;
  }
  if (c->c10d_listen != NULL && c->server.no_v2) {
    mu_error("--c10d-listen needs the v2 store");
    return MU_EXIT_USAGE;
  }
  if (check_c10d_allow(c) != 0)
    return MU_EXIT_USAGE;
  if (c->fsync != NULL && persist_fsync_parse(c->fsync, &c->fsync_mode) != 0) {
    mu_error("invalid --fsync '%s': use always, batch or off", c->fsync);
    return MU_EXIT_USAGE;
  }
  if (c->data_dir == NULL && (c->fsync != NULL || c->snapshot_every != PERSIST_SNAPSHOT_EVERY ||
                              c->snapshot_bytes != PERSIST_SNAPSHOT_BYTES)) {
    mu_error("--fsync, --snapshot-every and --snapshot-bytes need --data-dir DIR (without it "
             "musterd keeps everything in memory)");
    return MU_EXIT_USAGE;
  }
  if (c->data_dir != NULL && c->data_dir[0] == '\0') {
    mu_error("invalid --data-dir '': give a directory path");
    return MU_EXIT_USAGE;
  }
  const char *adv = c->server.advertise_url;
  if (adv != NULL && strncmp(adv, "http://", 7) != 0 && strncmp(adv, "https://", 8) != 0) {
    mu_error("invalid --advertise-url '%s': expected http://HOST:PORT", adv);
    return MU_EXIT_USAGE;
  }
  c->security.auth_users = (const char **)c->auth_users.v;
  c->security.nauth_users = c->auth_users.n;
  for (size_t i = 0; i < c->origins.n; i++) {
    const char *o = c->origins.v[i], *p = strstr(o, "://");
    if ((strncmp(o, "http://", 7) != 0 && strncmp(o, "https://", 8) != 0) || p[3] == '\0' ||
        strchr(p + 3, '/') != NULL || strpbrk(o, " \t\r\n,") != NULL) {
      mu_error("invalid --allowed-origin '%s': expected scheme://host[:port] as a browser sends "
               "it in Origin, e.g. https://dash.example.com:8443 (no path)",
               o);
      return MU_EXIT_USAGE;
    }
  }
  c->server.allowed_origins = (const char **)c->origins.v;
  c->server.nallowed_origins = c->origins.n;
  return -1;
}

/* Recovers the data dir into the server's store and runs and starts logging.
 * Returns: 0, or -1 after printing the error. */
static int open_data_dir(struct app *app, const struct musterd_config *c)
{
  struct mu_buf err = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  struct persist_report rep;
  struct v2_store *store = v2_store_of(app->srv);
  int rc = -1;
  memset(&rep, 0, sizeof(rep));
  if (store == NULL) {
    mu_error("--data-dir needs the v2 store");
    goto out;
  }
  app->persist = persist_open(c->data_dir, c->fsync_mode, c->snapshot_every, c->snapshot_bytes,
                              store, v1_rdzv(app->srv), &app->loop, &rep, &err);
  if (app->persist == NULL) {
    mu_error("%s", mu_buf_str(&err));
    goto out;
  }
  if (rep.warning.len > 0)
    mu_log(MU_LOG_WARN, "%s", mu_buf_str(&rep.warning));
  mu_log(MU_LOG_INFO,
         "recovered data dir '%s' in %.1f ms: %llu keys, %llu dirs, index %llu, %llu events "
         "in history; from %s%s (index %llu, %llu nodes) + %llu log records in %llu "
         "segment(s) (%llu already in the snapshot); %llu keys expired while down; %llu "
         "rendezvous runs; fsync %s",
         c->data_dir, rep.elapsed_ms, (unsigned long long)rep.keys, (unsigned long long)rep.dirs,
         (unsigned long long)rep.index, (unsigned long long)rep.events,
         rep.snapshot.len > 0 ? "snapshot " : "no snapshot", mu_buf_str(&rep.snapshot),
         (unsigned long long)rep.snapshot_index, (unsigned long long)rep.snapshot_nodes,
         (unsigned long long)rep.records, (unsigned long long)rep.segments,
         (unsigned long long)rep.skipped, (unsigned long long)rep.expired,
         (unsigned long long)rep.runs, persist_fsync_name(c->fsync_mode));
  persist_attach(app->persist, app->srv);
  rc = 0;
out:
  persist_report_release(&rep);
  mu_buf_release(&err);
  return rc;
}

/* The server that failed to start is closed, and its loop with it. */
static int abandon(struct app *app)
{
  rv_server_close(app->srv, NULL, NULL);
  uv_run(&app->loop, UV_RUN_DEFAULT);
  uv_loop_close(&app->loop);
  persist_free(app->persist);
  return MU_EXIT_FAILED;
}

/* --probe URL: one GET, 3 s at most. Returns: the exit status. */
static int probe(const char *url)
{
  char host[256], path[512] = "/healthz";
  int port = 0, rc = MU_EXIT_FAILED;
  const char *rest = strncmp(url, "http://", 7) == 0 ? url + 7 : url, *slash = strchr(rest, '/');
  char *hostport = mu_strndup(rest, slash ? (size_t)(slash - rest) : strlen(rest));
  if (slash != NULL)
    snprintf(path, sizeof(path), "%s", slash);
  if (parse_listen(hostport, host, sizeof(host), &port) != 0 || port <= 0) {
    mu_error("invalid --probe '%s': expected http://HOST:PORT[/PATH]", url);
    mu_free(hostport);
    return MU_EXIT_USAGE;
  }
  mu_free(hostport);
  struct mu_http_client *cl = mu_http_client_new(host, port);
  struct mu_http_response resp;
  mu_http_response_init(&resp, 4096);
  mu_http_client_set_connect_timeout(cl, 3000);
  if (mu_http_request(cl, "GET", path, NULL, NULL, 0, 3000, &resp) != 0)
    mu_error("probe %s: %s", url, mu_http_client_errmsg(cl));
  else if (resp.status != 200)
    mu_error("probe %s: HTTP %d %s", url, resp.status, mu_buf_str(&resp.body));
  else
    rc = MU_EXIT_OK;
  mu_http_response_release(&resp);
  mu_http_client_free(cl);
  return rc;
}

/* Step 1: the options into `c`, checked, and the security settings they name loaded.
 * Returns: -1 to serve (with *sec set), or the exit status (--help, --version, an error). */
static int configure(struct musterd_config *c, int argc, char **argv, struct sec **sec)
{
  int rc = parse_options(c, argc, argv);
  if (rc < 0 && c->version) {
    printf("musterd %s (etcd v2 API compatible with etcd 3.4.23)\n", MU_VERSION);
    rc = fflush(stdout) == 0 && !ferror(stdout) ? MU_EXIT_OK : MU_EXIT_FAILED;
  }
  if (rc < 0 && c->probe != NULL)
    rc = probe(c->probe);
  if (rc < 0)
    rc = check_options(c);
  if (rc < 0) {
    struct mu_buf err = MU_BUF_INIT(MU_BUF_UNBOUNDED);
    if (sec_new(&c->security, sec, &err) != 0) {
      mu_error("%s", mu_buf_str(&err));
      rc = MU_EXIT_USAGE;
    }
    mu_buf_release(&err);
  }
  mu_strvec_release(&c->auth_users); /* sec_new() kept nothing */
  return rc;
}

/* Step 2: the server with every API, security and the data dir, listening; the signals that
 * stop it. Returns: 0, or the exit status after printing the error. */
static int start(struct app *app, const struct musterd_config *c, struct sec *sec)
{
  uv_loop_init(&app->loop);
  app->srv = rv_server_new(&app->loop, &c->server);
  v1_set_run_gc_ms(app->srv, c->run_gc_seconds * 1000);
  c10d_set_run_gc_ms(app->srv, c->c10d_run_gc_seconds * 1000);
  struct rdzv_limits lim = {c->v1_max_bytes, (uint32_t)c->v1_max_runs,
                            (uint32_t)c->v1_max_runs_per_client, (uint32_t)c->v1_max_lease_ms};
  v1_set_limits(app->srv, &lim); /* before the data dir: recovery is not refused by them */
  struct mu_buf what = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  sec_describe(sec, &what);
  mu_log(MU_LOG_INFO, "security: %s", mu_buf_str(&what));
  mu_buf_clear(&what);
  if (sec != NULL)
    sec_auth_describe(sec->auth, &what); /* one line each: its id, where, its scopes */
  for (char *line = what.data, *nl; line != NULL && *line != '\0'; line = nl + 1) {
    nl = strchr(line, '\n');
    *nl = '\0';
    mu_log(MU_LOG_INFO, "security: %s", line);
  }
  mu_buf_release(&what);
  sec_attach(app->srv, sec); /* takes sec */
  if (c->data_dir != NULL && open_data_dir(app, c) != 0)
    return abandon(app);
  int rc = rv_server_listen(app->srv);
  if (rc != 0) {
    mu_error("cannot listen on %s:%d: %s%s", c->host, c->server.listen_port, uv_strerror(rc),
             rc == UV_EADDRINUSE ? " (pick another port with --listen HOST:PORT, or 0 for any)"
                                 : "");
    return abandon(app);
  }
  if (c->c10d_listen != NULL) {
    char err[256];
    if (c->c10d_allow != NULL && c10d_set_allow(app->srv, c->c10d_allow, err, sizeof(err)) != 0) {
      mu_error("invalid --c10d-allow '%s': %s", c->c10d_allow, err);
      return abandon(app);
    }
    rc = rv_server_listen_c10d(app->srv, c->c10d_host, c->c10d_port);
    if (rc != 0) {
      mu_error("cannot listen for TCPStore clients on %s:%d: %s%s", c->c10d_host, c->c10d_port,
               uv_strerror(rc),
               rc == UV_EADDRINUSE ? " (pick another port with --c10d-listen HOST:PORT, or 0)"
                                   : "");
      return abandon(app);
    }
  }
  uv_signal_init(&app->loop, &app->sigterm);
  uv_signal_init(&app->loop, &app->sigint);
  app->sigterm.data = app->sigint.data = app;
  uv_signal_start(&app->sigterm, on_signal, SIGTERM);
  uv_signal_start(&app->sigint, on_signal, SIGINT);
  mu_log(MU_LOG_INFO, "musterd listening on %s:%d (version %s, client URL %s)", c->host,
         rv_server_port(app->srv), MU_VERSION, rv_server_url(app->srv));
  if (mu_log_get_level() > MU_LOG_INFO)
    fprintf(stderr, "musterd listening on %s:%d\n", c->host, rv_server_port(app->srv));
  if (c->c10d_listen != NULL) {
    mu_log(MU_LOG_INFO,
           "musterd c10d listening on %s:%d (PyTorch TCPStore protocol, no "
           "credentials; peers admitted: %s)",
           c->c10d_host, rv_server_c10d_port(app->srv),
           c->c10d_allow != NULL ? c->c10d_allow : "all (no --c10d-allow)");
    if (mu_log_get_level() > MU_LOG_INFO)
      fprintf(stderr, "musterd c10d listening on %s:%d\n", c->c10d_host,
              rv_server_c10d_port(app->srv));
  }
  return 0;
}

int main(int argc, char **argv)
{
  struct musterd_config c;
  struct sec *sec = NULL;
  struct app app;
  memset(&c, 0, sizeof(c));
  memset(&app, 0, sizeof(app));
  rv_server_config_init(&c.server);
  c.listen = "127.0.0.1:2379";
  c.log_level = "info";
  c.fsync_mode = PERSIST_FSYNC_BATCH;
  c.snapshot_every = PERSIST_SNAPSHOT_EVERY;
  c.snapshot_bytes = PERSIST_SNAPSHOT_BYTES;
  c.run_gc_seconds = 600;
  c.c10d_run_gc_seconds = 600;

  mu_proc_startup();
  mu_log_setup("musterd", MU_LOG_INFO);
  int rc = configure(&c, argc, argv, &sec);
  if (rc < 0) /* else --help, --version, --probe or a usage error: nothing to serve */
    rc = start(&app, &c, sec);
  mu_strvec_release(&c.origins); /* the server copied them */
  if (rc != 0 || app.srv == NULL)
    return rc;
  /* Step 3: serve until a signal closes the server, then the loop */
  uv_run(&app.loop, UV_RUN_DEFAULT);
  rc = uv_loop_close(&app.loop);
  persist_free(app.persist);
  if (rc != 0) {
    mu_log(MU_LOG_ERROR, "uv_loop_close: %s (a handle was left open)", uv_strerror(rc));
    return MU_EXIT_FAILED;
  }
  mu_log(MU_LOG_INFO, "musterd stopped");
  return MU_EXIT_OK;
}
