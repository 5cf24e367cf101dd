/* muster agent: the per-node torchrun replacement. Parses the command line (torchrun's
 * spellings included), hands over to mu_agent_run() (agent/) and prints what it reports. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "muster/mu.h"

#include "agent.h"
#include "alloc.h"
#include "cmds.h"
#include "log.h"
#include "opts.h"

static const char usage_text[] =
    "muster agent --nnodes MIN[:MAX] --nproc-per-node N --rdzv-endpoint HOST:PORT --rdzv-id ID\n"
    "       [--max-restarts K] [--role NAME] [--log-dir DIR] [--tee] [--standalone] [OPTIONS]\n"
    "       -- CMD [ARGS...]";

/* The agent's reports, on stderr: "[muster agent] ..." lines, as torchrun's agent logs. */
static void print_report(void *data, enum mu_agent_report kind, const char *text)
{
  (void)data;
  switch (kind) {
  case MU_AGENT_PROGRESS:
    fprintf(stderr, "[muster agent] %s\n", text);
    break;
  case MU_AGENT_FAILURE:
    fprintf(stderr, "[muster agent] %s", text);
    break;
  case MU_AGENT_DEBUG:
    mu_debug("%s", text);
    return;
  }
  fflush(stderr);
}

static int valid_run_id(const char *s)
{
  size_t n = strlen(s);
  if (n == 0 || n > 128)
    return 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
          c == '_' || c == '-'))
      return 0;
  }
  return 1;
}

/* `muster agent --exec-worker PPID -- CMD ARGS...`, run by the agent for each worker: the
 * worker is killed when the agent that started it dies, even by SIGKILL (so no orphan keeps a
 * GPU or a port), then CMD replaces this process. Exit 127 when CMD cannot be run. */
static int exec_worker(int argc, char **argv)
{
  long ppid = 0;
  if (argc < 5 || strcmp(argv[3], "--") != 0 || mu_parse_long(argv[2], 1, 1L << 30, &ppid) != 0) {
    mu_error("usage: muster agent --exec-worker PPID -- CMD [ARGS...] (internal)");
    return MU_AGENT_EXIT_USAGE;
  }
#ifdef __linux__
  prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
  if ((long)getppid() != ppid) /* the agent died before prctl() took effect */
    return MU_AGENT_EXIT_FAILED;
  execvp(argv[4], argv + 4);
  mu_error("cannot start worker command '%s': %s", argv[4], strerror(errno));
  return 127;
}

int cmd_agent(int argc, char **argv)
{
  if (argc >= 2 && strcmp(argv[1], "--exec-worker") == 0)
    return exec_worker(argc, argv);
  struct mu_agent_config cfg;
  mu_agent_config_init(&cfg);
  const char *nnodes = "1", *nproc = "1", *endpoint = NULL, *run_id = NULL, *backend = NULL;
  char *etcd_ep = NULL;
  const char *rdzv_conf = NULL, *redirects = NULL;
  int tee = 0, no_python = 0;
  long max_restarts = 0;
  double join_timeout = -1, last_call = -1, lease_ttl = -1, stop_grace = -1;
  struct mu_agent_standalone *sa = NULL;
  char **args = NULL;
  int code = MU_AGENT_EXIT_USAGE;
  struct mu_buf err = MU_BUF_INIT(SIZE_MAX);

  struct mu_opt opts[] = {
      MU_OPT_STRING(0, "nnodes", &nnodes, "MIN[:MAX]", "number of nodes, or an elastic range"),
      MU_OPT_STRING(0, "nproc-per-node", &nproc, "N", "workers on this node (or 'cpu')"),
      MU_OPT_STRING(0, "rdzv-endpoint", &endpoint, "HOST:PORT", "the musterd to rendezvous on"),
      MU_OPT_STRING(0, "rdzv-id", &run_id, "ID", "the run's name, the same on every node"),
      MU_OPT_INT(0, "max-restarts", &max_restarts, "K", "restarts after a worker failure (0)"),
      MU_OPT_DOUBLE(0, "monitor-interval", &cfg.monitor_interval_s, "S",
                    "accepted for torchrun; worker exits are noticed at once"),
      MU_OPT_STRING(0, "role", &cfg.role, "NAME", "ROLE_NAME of the workers (default)"),
      MU_OPT_STRING(0, "log-dir", &cfg.log_dir, "DIR",
                    "write DIR/ID/attempt_N/LOCAL_RANK/{stdout,stderr}.log"),
      MU_OPT_BOOL(0, "tee", &tee, "with --log-dir, also print worker output"),
      MU_OPT_BOOL(0, "standalone", &cfg.standalone, "start an embedded musterd on a free port"),
      MU_OPT_STRING(0, "node-id", &cfg.node_id, "ID", "this node's id (host-pid-random)"),
      MU_OPT_STRING(0, "local-addr", &cfg.local_addr, "ADDR",
                    "address peers reach this node at (the one that reaches musterd)"),
      MU_OPT_DOUBLE(0, "join-timeout", &join_timeout, "S", "give up joining after S s (600)"),
      MU_OPT_DOUBLE(0, "last-call", &last_call, "S",
                    "after MIN nodes joined, wait S s for more (server default 1)"),
      MU_OPT_DOUBLE(0, "lease-ttl", &lease_ttl, "S",
                    "a node silent for S s is dropped (server default 10)"),
      MU_OPT_DOUBLE(0, "stop-grace", &stop_grace, "S", "SIGTERM to SIGKILL delay (5)"),
      MU_OPT_STRING(0, "rdzv-backend", &backend, "NAME",
                    "etcd-v3: an etcd v3 cluster (--rdzv-endpoint H1:P,H2:P...); muster: musterd "
                    "(default); others ignored"),
      MU_OPT_STRING(0, "rdzv-conf", &rdzv_conf, "K=V,...",
                    "torchrun style: join_timeout, last_call_timeout, lease_ttl"),
      MU_OPT_STRING(0, "redirects", &redirects, "N",
                    "etcd-v3: an etcd v3 cluster (--rdzv-endpoint H1:P,H2:P...); muster: musterd "
                    "(default); others ignored"),
      MU_OPT_BOOL(0, "no-python", &no_python, "accepted for torchrun (always true)"),
      MU_OPT_END(),
  };

  /* torchrun's `--tee 3` / `--tee=3`: turn into our flag before parsing. */
  args = mu_calloc((size_t)argc + 1, sizeof(*args));
  int nargs = 0;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--") == 0) {
      for (; i < argc; i++)
        args[nargs++] = argv[i];
      break;
    }
    if (strncmp(a, "--tee=", 6) == 0) {
      args[nargs++] = (char *)"--tee";
      continue;
    }
    args[nargs++] = argv[i];
    if (strcmp(a, "--tee") == 0 && i + 1 < argc && strlen(argv[i + 1]) == 1 &&
        argv[i + 1][0] >= '0' && argv[i + 1][0] <= '3')
      i++;
  }
  args[nargs] = NULL;

  int first = mu_opts_parse(opts, nargs, args, MU_OPTS_STOP_AT_NONOPT, usage_text);
  if (first == MU_OPTS_HELP) {
    code = MU_AGENT_EXIT_OK;
    goto out;
  }
  if (first < 0)
    goto out;
  if (first >= nargs) {
    mu_error("no worker command; put it after '--' (muster agent ... -- python3 train.py)");
    goto out;
  }
  cfg.cmd = args + first;
  cfg.tee = tee;
  if (mu_agent_parse_nnodes(nnodes, &cfg.min_nodes, &cfg.max_nodes, &err) != 0) {
    mu_error("%s", mu_buf_str(&err));
    goto out;
  }
  long n = 0;
  if (strcmp(nproc, "cpu") == 0 || strcmp(nproc, "auto") == 0) {
    n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1)
      n = 1;
  } else if (mu_parse_long(nproc, 1, 4096, &n) != 0) {
    mu_error("--nproc-per-node '%s': expected a number of workers from 1 to 4096, or 'cpu'", nproc);
    goto out;
  }
  cfg.nproc_per_node = (int)n;
  if (max_restarts < 0 || max_restarts > 1000000) {
    mu_error("--max-restarts %ld: expected 0 or more", max_restarts);
    goto out;
  }
  cfg.max_restarts = max_restarts;
  if (rdzv_conf != NULL && mu_agent_parse_rdzv_conf(rdzv_conf, &cfg, &err) != 0) {
    mu_error("%s", mu_buf_str(&err));
    goto out;
  }
  if (join_timeout >= 0)
    cfg.join_timeout_s = join_timeout;
  if (last_call >= 0)
    cfg.last_call_s = last_call;
  if (lease_ttl >= 0)
    cfg.lease_ttl_s = lease_ttl;
  if (stop_grace >= 0)
    cfg.stop_grace_s = stop_grace;
  if (cfg.join_timeout_s <= 0) {
    mu_error("--join-timeout must be positive (seconds)");
    goto out;
  }
  if (cfg.role[0] == '\0') {
    mu_error("--role must not be empty");
    goto out;
  }
  if (run_id == NULL && cfg.standalone)
    run_id = "standalone";
  if (run_id == NULL) {
    mu_error("--rdzv-id is required: the run's name, the same on every node of the job");
    goto out;
  }
  if (!valid_run_id(run_id)) {
    mu_error("--rdzv-id '%s': use 1-128 characters from A-Z a-z 0-9 . _ -", run_id);
    goto out;
  }
  cfg.run_id = run_id;
  char ep[64];
  if (cfg.standalone) {
    if (endpoint != NULL)
      mu_warn("--standalone: ignoring --rdzv-endpoint '%s'", endpoint);
    int rc = mu_agent_standalone_start(&sa, ep, sizeof(ep));
    if (rc != 0) {
      mu_error("--standalone: cannot start the embedded musterd: %s", mu_strerror(rc));
      code = MU_AGENT_EXIT_RENDEZVOUS;
      goto out;
    }
    endpoint = ep;
    char *say = mu_asprintf("standalone: embedded musterd on %s", ep);
    print_report(NULL, MU_AGENT_PROGRESS, say);
    mu_free(say);
  }
  if (endpoint == NULL) {
    mu_error("--rdzv-endpoint HOST:PORT is required (a running musterd), or use --standalone");
    goto out;
  }
  /* --rdzv-backend etcd-v3: the members of an etcd v3 cluster; workers get them as one
   * etcd-v3:// endpoint (include/muster/client.h speaks both) */
  const struct mu_rdzv_ops *ops = mu_agent_backend(backend, endpoint);
  if (ops != NULL)
    cfg.rdzv = ops;
  if (ops != NULL && ops == mu_agent_backend("etcd-v3", NULL) &&
      strncmp(endpoint, "etcd-v3://", 10) != 0)
    endpoint = etcd_ep = mu_asprintf("etcd-v3://%s", endpoint);
  cfg.endpoint = endpoint;
  cfg.out_fd = STDOUT_FILENO;
  cfg.err_fd = STDERR_FILENO;
  cfg.report = print_report;
  code = mu_agent_run(&cfg, &err);
  if (err.len > 0)
    mu_error("%s", mu_buf_str(&err));
out:
  mu_agent_standalone_stop(sa);
  mu_free(etcd_ep);
  mu_buf_release(&err);
  mu_free(args);
  return code;
}
