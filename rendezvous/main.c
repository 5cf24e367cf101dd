/* musterd: the rendezvous server. Options, signals, the start line, the loop.
 *
 *   musterd --listen 127.0.0.1:2379 [--advertise-url URL] [--max-connections N] ...
 *
 * The start line "musterd listening on HOST:PORT" is what launchers and tests parse (with
 * --listen HOST:0 it carries the port the kernel chose).
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "muster/mu.h"

#include "alloc.h"
#include "http.h"
#include "log.h"
#include "proc.h"
#include "opts.h"
#include "persist.h"
#include "security.h"
#include "strvec.h"
#include "v1.h"

struct app {
  uv_loop_t loop;
  struct rv_server *srv;
  struct mu_persist *persist; /* --data-dir */
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
    int prc = mu_persist_stop(app->persist);
    if (prc != 0)
      mu_log(MU_LOG_ERROR, "final snapshot/sync of the data dir failed: %s", strerror(-prc));
  }
  rv_server_close(app->srv, on_server_closed, app);
}

static size_t size_opt(long v)
{
  return (size_t)v;
}

int main(int argc, char **argv)
{
  const char *listen = "127.0.0.1:2379";
  const char *advertise = NULL;
  const char *level_name = "info";
  const char *name = "musterd";
  long max_conns = 10000, max_body = 1024 * 1024, max_header = 16 * 1024, max_url = 8 * 1024;
  long max_output = 8 * 1024 * 1024, idle_ms = 300000;
  int log_requests = 0, version = 0;
  const char *data_dir = NULL, *fsync_name = NULL;
  long snapshot_every = MU_PERSIST_SNAPSHOT_EVERY;
  const char *tls_cert = NULL, *tls_key = NULL, *tls_ca = NULL;
  const char *token_file = NULL, *users_file = NULL;
  struct mu_strvec auth_users = MU_STRVEC_INIT;
  long q_keys = 0, q_value = 0, q_watchers = 0, q_client = 0, q_run = 0, q_run_keys = 0;
  long q_run_bytes = 0;
  long run_gc_s = 600;
  struct rv_security *sec = NULL;
  char sec_err[1024];
  struct mu_opt opts[] = {
      MU_OPT_STRING('l', "listen", &listen, "HOST:PORT",
                    "address to serve on (default 127.0.0.1:2379; port 0 = any free port)"),
      MU_OPT_STRING(0, "advertise-url", &advertise, "URL",
                    "client URL reported by /v2/machines (default http://HOST:PORT)"),
      MU_OPT_STRING(0, "name", &name, "NAME", "member name in /v2/members (default musterd)"),
      MU_OPT_INT(0, "max-connections", &max_conns, "N",
                 "open connections before new ones get 503 (default 10000)"),
      MU_OPT_INT(0, "max-body-bytes", &max_body, "N", "request body limit, 413 (default 1 MiB)"),
      MU_OPT_INT(0, "max-header-bytes", &max_header, "N",
                 "request line + headers limit, 431 (default 16 KiB)"),
      MU_OPT_INT(0, "max-url-bytes", &max_url, "N", "request target limit, 414 (default 8 KiB)"),
      MU_OPT_INT(0, "max-output-bytes", &max_output, "N",
                 "unsent output per connection before it is closed (default 8 MiB)"),
      MU_OPT_INT(0, "idle-timeout-ms", &idle_ms, "MS",
                 "close connections idle this long; 0 = never (default 300000)"),
      MU_OPT_STRING(0, "tls-cert", &tls_cert, "FILE",
                    "serve HTTPS with this PEM certificate chain (with --tls-key)"),
      MU_OPT_STRING(0, "tls-key", &tls_key, "FILE", "the PEM private key of --tls-cert"),
      MU_OPT_STRING(0, "tls-client-ca", &tls_ca, "FILE",
                    "require client certificates signed by this PEM CA bundle"),
      MU_OPT_STRING(0, "token-file", &token_file, "FILE",
                    "require 'Authorization: Bearer TOKEN' (tokens one per line) on /v1 and /v2"),
      MU_OPT_STRING(0, "auth-users", &users_file, "FILE",
                    "etcd v2 basic auth: USER:PASSWORD lines (also accepted on /v1)"),
      MU_OPT_LIST(0, "auth-user", &auth_users, "USER:PASSFILE",
                  "one basic-auth user, password read from PASSFILE (repeatable)"),
      MU_OPT_INT(0, "quota-keys", &q_keys, "N", "keys and dirs in the v2 store (0 = no limit)"),
      MU_OPT_INT(0, "quota-value-bytes", &q_value, "N",
                 "one v2 value or /v1 KV value, 413 (0 = no limit)"),
      MU_OPT_INT(0, "quota-watchers", &q_watchers, "N",
                 "watches and long polls open at once, 429 (0 = no limit)"),
      MU_OPT_INT(0, "quota-watchers-per-client", &q_client, "N",
                 "the same from one client address (0 = no limit)"),
      MU_OPT_INT(0, "quota-run-watchers", &q_run, "N",
                 "long polls open at once on one /v1 run (0 = no limit)"),
      MU_OPT_INT(0, "quota-run-keys", &q_run_keys, "N", "/v1 KV keys of one run (0 = no limit)"),
      MU_OPT_INT(0, "quota-run-bytes", &q_run_bytes, "N",
                 "/v1 KV value bytes of one run (0 = no limit)"),
      MU_OPT_INT(0, "run-gc-seconds", &run_gc_s, "N",
                 "forget a /v1 run N seconds after it closed or lost its last node (default 600)"),
      MU_OPT_STRING(0, "data-dir", &data_dir, "DIR",
                    "keep the v2 store and /v1 runs in DIR (write-ahead log + snapshots) and "
                    "recover them at start-up; default: memory only"),
      MU_OPT_STRING(0, "fsync", &fsync_name, "MODE",
                    "with --data-dir: always, batch (group commit, default) or off"),
      MU_OPT_INT(0, "snapshot-every", &snapshot_every, "N",
                 "with --data-dir: snapshot and compact the log every N writes (default 100000; "
                 "0 = only at shutdown)"),
      MU_OPT_STRING(0, "log-level", &level_name, "LEVEL", "debug, info, warn, error or off"),
      MU_OPT_BOOL(0, "log-requests", &log_requests, "log one line per request"),
      MU_OPT_BOOL('V', "version", &version, "print the version and exit"),
      MU_OPT_END(),
  };
  struct app app;
  struct rv_server_config cfg;
  char host[256];
  int port = 0;
  int rc = 0;

  mu_proc_startup();
  mu_log_setup("musterd", MU_LOG_INFO);
  int n = mu_opts_parse(opts, argc, argv, 0, "musterd [options]");
  if (n == MU_OPTS_HELP)
    return MU_EXIT_OK;
  if (n < 0)
    return MU_EXIT_USAGE;
  if (n < argc) {
    mu_error("unexpected argument '%s' (musterd takes options only; see musterd --help)", argv[n]);
    return MU_EXIT_USAGE;
  }
  if (version) {
    printf("musterd %s (etcd v2 API compatible with etcd 3.4.23)\n", MU_VERSION);
    return fflush(stdout) == 0 && !ferror(stdout) ? MU_EXIT_OK : MU_EXIT_FAILED;
  }
  enum mu_log_level level;
  if (mu_log_level_parse(level_name, &level) != 0) {
    mu_error("invalid --log-level '%s': use debug, info, warn, error or off", level_name);
    return MU_EXIT_USAGE;
  }
  mu_log_setup("musterd", level);
  if (parse_listen(listen, host, sizeof(host), &port) != 0) {
    mu_error("invalid --listen '%s': expected HOST:PORT, e.g. 127.0.0.1:2379", listen);
    return MU_EXIT_USAGE;
  }
  const struct {
    const char *name;
    long value, min;
  } limits[] = {
      {"--max-connections", max_conns, 1},
      {"--max-body-bytes", max_body, 0},
      {"--max-header-bytes", max_header, 256},
      {"--max-url-bytes", max_url, 16},
      {"--max-output-bytes", max_output, 65536},
      {"--idle-timeout-ms", idle_ms, 0},
      {"--quota-keys", q_keys, 0},
      {"--quota-value-bytes", q_value, 0},
      {"--quota-watchers", q_watchers, 0},
      {"--quota-watchers-per-client", q_client, 0},
      {"--quota-run-watchers", q_run, 0},
      {"--quota-run-keys", q_run_keys, 0},
      {"--quota-run-bytes", q_run_bytes, 0},
      {"--run-gc-seconds", run_gc_s, 1},
  };
  for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++) {
    if (limits[i].value < limits[i].min) {
      mu_error("invalid %s %ld: must be at least %ld", limits[i].name, limits[i].value,
               limits[i].min);
      return MU_EXIT_USAGE;
    }
  }
  if (run_gc_s > 100L * 365 * 24 * 3600) {
    mu_error("invalid --run-gc-seconds %ld: must be at most 3153600000 (100 years)", run_gc_s);
    return MU_EXIT_USAGE;
  }
  enum mu_fsync_mode fsync_mode = MU_FSYNC_BATCH;
  if (fsync_name != NULL && mu_fsync_mode_parse(fsync_name, &fsync_mode) != 0) {
    mu_error("invalid --fsync '%s': use always, batch or off", fsync_name);
    return MU_EXIT_USAGE;
  }
  if (data_dir == NULL && (fsync_name != NULL || snapshot_every != MU_PERSIST_SNAPSHOT_EVERY)) {
    mu_error("--fsync and --snapshot-every need --data-dir DIR (without it musterd keeps "
             "everything in memory)");
    return MU_EXIT_USAGE;
  }
  if (data_dir != NULL && data_dir[0] == '\0') {
    mu_error("invalid --data-dir '': give a directory path");
    return MU_EXIT_USAGE;
  }
  if (snapshot_every < 0) {
    mu_error("invalid --snapshot-every %ld: must be at least 0", snapshot_every);
    return MU_EXIT_USAGE;
  }
  if (advertise != NULL && strncmp(advertise, "http://", 7) != 0 &&
      strncmp(advertise, "https://", 8) != 0) {
    mu_error("invalid --advertise-url '%s': expected http://HOST:PORT", advertise);
    return MU_EXIT_USAGE;
  }

  {
    struct rv_security_config scfg;
    memset(&scfg, 0, sizeof(scfg));
    scfg.tls.cert_file = tls_cert;
    scfg.tls.key_file = tls_key;
    scfg.tls.client_ca_file = tls_ca;
    scfg.token_file = token_file;
    scfg.users_file = users_file;
    scfg.auth_users = (const char **)auth_users.v;
    scfg.nauth_users = auth_users.n;
    scfg.quota.max_keys = (uint64_t)q_keys;
    scfg.quota.max_value_bytes = (uint64_t)q_value;
    scfg.quota.max_watchers = (uint64_t)q_watchers;
    scfg.quota.max_watchers_per_client = (uint64_t)q_client;
    scfg.quota.max_run_watchers = (uint64_t)q_run;
    scfg.quota.max_run_keys = (uint64_t)q_run_keys;
    scfg.quota.max_run_bytes = (uint64_t)q_run_bytes;
    rc = rv_security_new(&scfg, &sec, sec_err, sizeof(sec_err));
    mu_strvec_release(&auth_users);
    if (rc != 0) {
      mu_error("%s", sec_err);
      return MU_EXIT_USAGE;
    }
  }

  memset(&app, 0, sizeof(app));
  uv_loop_init(&app.loop);
  rv_server_config_init(&cfg);
  cfg.listen_host = host;
  cfg.listen_port = port;
  cfg.advertise_url = advertise;
  cfg.name = name;
  cfg.max_connections = (unsigned)max_conns;
  cfg.max_body_bytes = size_opt(max_body);
  cfg.max_header_bytes = size_opt(max_header);
  cfg.max_url_bytes = size_opt(max_url);
  cfg.max_output_bytes = size_opt(max_output);
  cfg.idle_timeout_ms = (uint64_t)idle_ms;
  cfg.log_requests = log_requests;
  app.srv = rv_server_new(&app.loop, &cfg);
  rv_v1_set_run_gc_ms(app.srv, (uint64_t)run_gc_s * 1000);
  {
    char what[256];
    rv_security_describe(sec, what, sizeof(what));
    mu_log(MU_LOG_INFO, "security: %s", what);
  }
  rv_security_attach(app.srv, sec); /* takes sec */
  sec = NULL;
  if (data_dir != NULL) {
    char perr[1024];
    struct mu_persist_report rep;
    struct mu_store *store = v2_keys_store(app.srv);
    app.persist = store == NULL
                      ? NULL
                      : mu_persist_open(data_dir, fsync_mode, (uint64_t)snapshot_every, store,
                                        rv_v1_rdzv(app.srv), &app.loop, &rep, perr, sizeof(perr));
    if (app.persist == NULL) {
      mu_error("%s", store == NULL ? "--data-dir needs the v2 store" : perr);
      rv_server_close(app.srv, NULL, NULL);
      uv_run(&app.loop, UV_RUN_DEFAULT);
      uv_loop_close(&app.loop);
      return MU_EXIT_FAILED;
    }
    if (rep.warning[0] != '\0')
      mu_log(MU_LOG_WARN, "%s", rep.warning);
    mu_log(MU_LOG_INFO,
           "recovered data dir '%s' in %.1f ms: %llu keys, %llu dirs, index %llu, %llu events "
           "in history; from %s%s (index %llu, %llu nodes) + %llu log records in %llu "
           "segment(s) (%llu already in the snapshot); %llu keys expired while down; %llu "
           "rendezvous runs; fsync %s",
           data_dir, rep.elapsed_ms, (unsigned long long)rep.keys, (unsigned long long)rep.dirs,
           (unsigned long long)rep.index, (unsigned long long)rep.events,
           rep.snapshot[0] ? "snapshot " : "no snapshot", rep.snapshot,
           (unsigned long long)rep.snapshot_index, (unsigned long long)rep.snapshot_nodes,
           (unsigned long long)rep.records, (unsigned long long)rep.segments,
           (unsigned long long)rep.skipped, (unsigned long long)rep.expired,
           (unsigned long long)rep.runs, mu_fsync_mode_name(fsync_mode));
    mu_persist_attach(app.persist, app.srv);
  }
  rc = rv_server_listen(app.srv);
  if (rc != 0) {
    mu_error("cannot listen on %s:%d: %s%s", host, port, uv_strerror(rc),
             rc == UV_EADDRINUSE ? " (pick another port with --listen HOST:PORT, or 0 for any)"
                                 : "");
    rv_server_close(app.srv, NULL, NULL);
    uv_run(&app.loop, UV_RUN_DEFAULT);
    uv_loop_close(&app.loop);
    mu_persist_free(app.persist);
    return MU_EXIT_FAILED;
  }
  uv_signal_init(&app.loop, &app.sigterm);
  uv_signal_init(&app.loop, &app.sigint);
  app.sigterm.data = app.sigint.data = &app;
  uv_signal_start(&app.sigterm, on_signal, SIGTERM);
  uv_signal_start(&app.sigint, on_signal, SIGINT);
  mu_log(MU_LOG_INFO, "musterd listening on %s:%d (version %s, client URL %s)", host,
         rv_server_port(app.srv), MU_VERSION, rv_server_url(app.srv));
  if (level > MU_LOG_INFO)
    fprintf(stderr, "musterd listening on %s:%d\n", host, rv_server_port(app.srv));

  uv_run(&app.loop, UV_RUN_DEFAULT);
  rc = uv_loop_close(&app.loop);
  mu_persist_free(app.persist);
  if (rc != 0) {
    mu_log(MU_LOG_ERROR, "uv_loop_close: %s (a handle was left open)", uv_strerror(rc));
    return MU_EXIT_FAILED;
  }
  mu_log(MU_LOG_INFO, "musterd stopped");
  return MU_EXIT_OK;
}
