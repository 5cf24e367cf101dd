/* muster agent: the per-node torchrun replacement. Parses the command line (torchrun's
 * spellings included), hands over to mu_agent_run() (agent/) and prints what it reports. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
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
#include "buf.h"
#include "cmds.h"
#include "etcd3.h"
#include "log.h"
#include "opts.h"
#include "fsutil.h"
#include "strvec.h"
#include "suggest.h"

static const char usage_text[] =
    "muster agent [--standalone | --rdzv-endpoint HOST:PORT --rdzv-id ID | --node-rank R\n"
    "       --master-addr HOST --master-port PORT] [--nnodes MIN[:MAX]] [--nproc-per-node N]\n"
    "       [OPTIONS] (SCRIPT.py | -m MODULE | --no-python CMD | -- CMD) [ARGS...]\n"
    "       (torchrun's command line; compat/torchrun is a link to muster: docs/agent.md)";

/* --rdzv-backend: what each name means here. A new backend is one more row (with its ops). */
enum backend_kind {
  BK_MUSTERD, /* musterd's /v1 rendezvous at --rdzv-endpoint */
  BK_ETCD3,   /* an etcd v3 cluster: --rdzv-endpoint H1:P,H2:P or etcd-v3://H1:P,H2:P */
  BK_STATIC,  /* --node-rank/--master-addr/--master-port: node rank 0 hosts the rendezvous */
  BK_REFUSED, /* a torchrun backend muster does not run */
};
struct backend_row {
  const char *name;
  enum backend_kind kind;
  const struct mu_rdzv_ops *ops; /* NULL: musterd's /v1 (cfg default) */
  const char *why;               /* BK_REFUSED: the clear word */
};
static const struct backend_row backends[] = {
    {"muster", BK_MUSTERD, NULL, NULL},
    {"musterd", BK_MUSTERD, NULL, NULL},
    {"etcd", BK_MUSTERD, NULL, NULL},    /* torchrun's etcd backends point at a musterd */
    {"etcd-v2", BK_MUSTERD, NULL, NULL}, /* (it serves etcd's v2 API): the same server */
    {"etcd-v3", BK_ETCD3, NULL, NULL},
    {"etcd3", BK_ETCD3, NULL, NULL},
    {"static", BK_STATIC, NULL, NULL},
    {"c10d", BK_REFUSED, NULL,
     "c10d is torchrun's own TCPStore rendezvous, which muster does not run; use --standalone "
     "(one node), --rdzv-backend static with --node-rank/--master-addr/--master-port, or "
     "--rdzv-backend muster with --rdzv-endpoint HOST:PORT of a musterd"},
};

static const struct backend_row *find_backend(const char *name)
{
  for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++)
    if (strcmp(backends[i].name, name) == 0)
      return &backends[i];
  struct mu_suggest sg;
  mu_suggest_init(&sg, name);
  for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++)
    mu_suggest_add(&sg, backends[i].name);
  const char *best = mu_suggest_best(&sg);
  mu_error("--rdzv-backend '%s' is not known%s%s%s; use muster, etcd, etcd-v2, etcd-v3 or static",
           name, best ? "; did you mean '" : "", best ? best : "", best ? "'?" : "");
  return NULL;
}

/* The interpreter a script runs with (torchrun: PYTHON_EXEC, else its own sys.executable;
 * muster has no interpreter of its own, so: PYTHON_EXEC, else python3, else python, from PATH,
 * made absolute as sys.executable is). Returns: 0, or -1 when there is none. */
static int find_python(char *out, size_t n)
{
  const char *pe = getenv("PYTHON_EXEC");
  if (pe != NULL && *pe != '\0') {
    snprintf(out, n, "%s", pe);
    return 0;
  }
  const char *path = getenv("PATH");
  static const char *const names[] = {"python3", "python"};
  for (size_t k = 0; k < 2; k++) {
    const char *p = path != NULL ? path : "/usr/local/bin:/usr/bin:/bin";
    while (*p != '\0') {
      size_t len = strcspn(p, ":");
      if (len > 0 && (size_t)snprintf(out, n, "%.*s/%s", (int)len, p, names[k]) < n &&
          access(out, X_OK) == 0)
        return 0;
      p += len;
      if (*p == ':')
        p++;
    }
  }
  return -1;
}

/* Entries of dir whose name is prefix followed by digits only. */
static int count_devices(const char *dir, const char *prefix)
{
  DIR *d = opendir(dir);
  int count = 0;
  size_t pl = strlen(prefix);
  if (d == NULL)
    return 0;
  for (struct dirent *e = readdir(d); e != NULL; e = readdir(d)) {
    const char *p = e->d_name;
    if (strncmp(p, prefix, pl) != 0 || p[pl] == '\0')
      continue;
    p += pl;
    while (*p >= '0' && *p <= '9')
      p++;
    count += *p == '\0';
  }
  closedir(d);
  return count;
}

/* NVIDIA GPUs: the driver's /dev/nvidiaN files, else the "GPU N:" lines of `nvidia-smi -L`. */
static int count_gpus(const char *devdir)
{
  int n = count_devices(devdir, "nvidia");
  if (n > 0)
    return n;
  FILE *p = popen("nvidia-smi -L 2>/dev/null", "r");
  char line[512];
  if (p == NULL)
    return 0;
  while (fgets(line, sizeof(line), p) != NULL)
    n += strncmp(line, "GPU ", 4) == 0;
  pclose(p);
  return n;
}

/* AWS Neuron cores: each /dev/neuronN device has the cores its sysfs core_count says, 2 when
 * it does not say (trn1, inf2). */
static int count_neuron_cores(const char *devdir)
{
  int devices = count_devices(devdir, "neuron"), cores = 0;
  for (int i = 0; i < devices; i++) {
    char path[128];
    struct mu_buf b = MU_BUF_INIT(64);
    long c = 2;
    snprintf(path, sizeof(path), "/sys/class/neuron_device/neuron%d/core_count", i);
    if (mu_read_file(path, 64, &b) == 0) {
      while (b.len > 0 && (b.data[b.len - 1] == '\n' || b.data[b.len - 1] == ' '))
        b.data[--b.len] = '\0';
      if (mu_parse_long(mu_buf_str(&b), 1, 1024, &c) != 0)
        c = 2;
    }
    mu_buf_release(&b);
    cores += (int)c;
  }
  return cores;
}

/* --nproc-per-node N | cpu | gpu | auto. MUSTER_DEVICE_DIR replaces /dev (for the tests).
 * Returns: the number of workers, or -1 after printing the error. */
static int nproc_value(const char *s)
{
  const char *devdir = getenv("MUSTER_DEVICE_DIR");
  long n = 0;
  if (devdir == NULL || *devdir == '\0')
    devdir = "/dev";
  if (mu_parse_long(s, 1, 4096, &n) == 0)
    return (int)n;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  if (cpus < 1)
    cpus = 1;
  if (strcmp(s, "cpu") == 0)
    return (int)cpus;
  if (strcmp(s, "gpu") == 0 || strcmp(s, "auto") == 0) {
    int g = count_gpus(devdir);
    if (g == 0)
      g = count_neuron_cores(devdir);
    if (g > 0)
      return g;
    if (strcmp(s, "auto") == 0)
      return (int)cpus;
    mu_error("--nproc-per-node gpu: this node has no GPU (no %s/nvidia[0-9]*, no 'nvidia-smi "
             "-L') and no Neuron device (%s/neuron[0-9]*); give a number, or 'auto'",
             devdir, devdir);
    return -1;
  }
  mu_error("--nproc-per-node '%s': expected a number of workers from 1 to 4096, or cpu, gpu, "
           "auto",
           s);
  return -1;
}

/* A torchrun Std spec as --tee/--redirects take it ("3", "0:1,1:2"). */
static int is_std_spec(const char *s)
{
  int m = 0;
  struct mu_buf e = MU_BUF_INIT(256);
  int ok = mu_agent_parse_std(s, 0, &m, &e) == 0;
  mu_buf_release(&e);
  return ok;
}

/* torchrun's options also come from PET_<NAME> variables (its argparse `env` action): a
 * command-line value wins, then the variable, then the default. */
struct pet_row {
  const char *env;
  const char **value;
};
struct pet_flag {
  const char *env;
  int *value;
};

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

/* "HOST:PORT" split at the last colon. Returns: 0, or -1 when it is not that. */
static int split_hostport(const char *s, char *host, size_t n, long *port)
{
  const char *colon = strrchr(s, ':');
  if (colon == NULL || colon == s || (size_t)(colon - s) >= n ||
      mu_parse_long(colon + 1, 0, 65535, port) != 0)
    return -1;
  memcpy(host, s, (size_t)(colon - s));
  host[colon - s] = '\0';
  return 0;
}

static int is_loopback(const char *host)
{
  return strncmp(host, "127.", 4) == 0 || strcmp(host, "localhost") == 0 ||
         strcmp(host, "::1") == 0;
}

int cmd_agent(int argc, char **argv)
{
  if (argc >= 2 && strcmp(argv[1], "--exec-worker") == 0)
    return exec_worker(argc, argv);
  struct mu_agent_config cfg;
  mu_agent_config_init(&cfg);
  const char *nnodes = "1", *nproc = "1", *endpoint = NULL, *run_id = NULL, *backend = NULL;
  const char *rdzv_conf = NULL, *redirects = NULL, *tee = NULL, *max_restarts_s = NULL;
  const char *monitor_s = NULL, *start_method = NULL, *node_rank_s = NULL, *master_addr = NULL;
  const char *master_port_s = NULL, *log_dir = NULL, *role = NULL;
  int standalone = 0, no_python = 0, module = 0, run_path = 0;
  char *etcd_ep = NULL;
  double join_timeout = -1, last_call = -1, lease_ttl = -1, stop_grace = -1;
  struct mu_agent_standalone *sa = NULL;
  char **args = NULL;
  struct mu_strvec cmdv = MU_STRVEC_INIT;
  int code = MU_AGENT_EXIT_USAGE;
  struct mu_buf err = MU_BUF_INIT(SIZE_MAX);
  char ep[300], python[PATH_MAX];

  struct mu_opt opts[] = {
      MU_OPT_STRING(0, "nnodes", &nnodes, "MIN[:MAX]", "number of nodes, or an elastic range"),
      MU_OPT_STRING(0, "nproc-per-node", &nproc, "N",
                    "workers on this node: N, cpu, gpu (GPUs or Neuron cores), auto"),
      MU_OPT_STRING(0, "rdzv-backend", &backend, "NAME",
                    "muster (= etcd, etcd-v2: a musterd), etcd-v3 (an etcd v3 cluster), static; "
                    "default: static without --rdzv-endpoint"),
      MU_OPT_STRING(0, "rdzv-endpoint", &endpoint, "HOST:PORT", "the musterd to rendezvous on"),
      MU_OPT_STRING(0, "rdzv-id", &run_id, "ID", "the run's name, the same on every node"),
      MU_OPT_STRING(0, "rdzv-conf", &rdzv_conf, "K=V,...",
                    "join_timeout, last_call_timeout, lease_ttl (seconds)"),
      MU_OPT_BOOL(0, "standalone", &standalone, "start an embedded musterd on a free port"),
      MU_OPT_STRING(0, "max-restarts", &max_restarts_s, "K", "restarts after a worker failure (0)"),
      MU_OPT_STRING(0, "monitor-interval", &monitor_s, "S",
                    "accepted for torchrun; worker exits are noticed at once"),
      MU_OPT_STRING(0, "start-method", &start_method, "M",
                    "spawn, fork, forkserver: accepted; workers are always new processes"),
      MU_OPT_STRING(0, "role", &role, "NAME", "ROLE_NAME of the workers (default)"),
      MU_OPT_BOOL('m', "module", &module, "run SCRIPT as a module: python -u -m MODULE"),
      MU_OPT_BOOL(0, "no-python", &no_python, "run SCRIPT itself, not with python"),
      MU_OPT_BOOL(0, "run-path", &run_path, "accepted: the script runs as python -u SCRIPT"),
      MU_OPT_STRING(0, "log-dir", &log_dir, "DIR",
                    "write DIR/ID/attempt_N/LOCAL_RANK/{stdout,stderr}.log"),
      MU_OPT_STRING('r', "redirects", &redirects, "N",
                    "with --log-dir: streams to the files only (1 out, 2 err, 3 both; 0:1,1:2)"),
      MU_OPT_STRING('t', "tee", &tee, "N", "with --log-dir: streams to the files and the console"),
      MU_OPT_STRING(0, "node-rank", &node_rank_s, "R", "static: this node's rank (0)"),
      MU_OPT_STRING(0, "master-addr", &master_addr, "HOST",
                    "static: node rank 0's address (127.0.0.1)"),
      MU_OPT_STRING(0, "master-port", &master_port_s, "PORT",
                    "static: the port node rank 0's agent listens on (29500)"),
      MU_OPT_STRING(0, "local-addr", &cfg.local_addr, "ADDR",
                    "address peers reach this node at (the one that reaches musterd)"),
      MU_OPT_STRING(0, "node-id", &cfg.node_id, "ID", "this node's id (host-pid-random)"),
      MU_OPT_DOUBLE(0, "join-timeout", &join_timeout, "S", "give up joining after S s (600)"),
      MU_OPT_DOUBLE(0, "last-call", &last_call, "S",
                    "after MIN nodes joined, wait S s for more (server default 1)"),
      MU_OPT_DOUBLE(0, "lease-ttl", &lease_ttl, "S",
                    "a node silent for S s is dropped (server default 10)"),
      MU_OPT_DOUBLE(0, "stop-grace", &stop_grace, "S", "SIGTERM to SIGKILL delay (5)"),
      MU_OPT_DOUBLE(0, "hang-timeout", &cfg.hang_timeout_s, "S",
                    "a worker without progress for S s is hung: its stacks, then a restart"),
      MU_OPT_DOUBLE(0, "hang-initial-timeout", &cfg.hang_initial_timeout_s, "S",
                    "the same before a worker's first progress (default --hang-timeout)"),
      MU_OPT_STRING(0, "health-check", &cfg.health_check, "CMD",
                    "a shell command run before every join; a node whose check fails waits"),
      MU_OPT_DOUBLE(0, "health-check-timeout", &cfg.health_check_timeout_s, "S",
                    "a check running longer failed (60)"),
      MU_OPT_DOUBLE(0, "health-check-interval", &cfg.health_check_interval_s, "S",
                    "a failed check runs again S s later (30)"),
      MU_OPT_END(),
  };
  const struct pet_row pet[] = {
      {"PET_NNODES", &nnodes},
      {"PET_NPROC_PER_NODE", &nproc},
      {"PET_RDZV_BACKEND", &backend},
      {"PET_RDZV_ENDPOINT", &endpoint},
      {"PET_RDZV_ID", &run_id},
      {"PET_RDZV_CONF", &rdzv_conf},
      {"PET_MAX_RESTARTS", &max_restarts_s},
      {"PET_MONITOR_INTERVAL", &monitor_s},
      {"PET_START_METHOD", &start_method},
      {"PET_ROLE", &role},
      {"PET_LOG_DIR", &log_dir},
      {"PET_REDIRECTS", &redirects},
      {"PET_TEE", &tee},
      {"PET_NODE_RANK", &node_rank_s},
      {"PET_MASTER_ADDR", &master_addr},
      {"PET_MASTER_PORT", &master_port_s},
      {"MUSTER_HEALTH_CHECK", &cfg.health_check}, /* the schedulers' -cfg health_check */
  };
  const struct pet_flag pet_flags[] = {
      {"PET_STANDALONE", &standalone},
      {"PET_MODULE", &module},
      {"PET_NO_PYTHON", &no_python},
      {"PET_RUN_PATH", &run_path},
  };
  for (size_t i = 0; i < sizeof(pet) / sizeof(pet[0]); i++) {
    const char *v = getenv(pet[i].env);
    if (v != NULL && *v != '\0')
      *pet[i].value = v;
  }
  for (size_t i = 0; i < sizeof(pet_flags) / sizeof(pet_flags[0]); i++) {
    const char *v = getenv(pet_flags[i].env);
    if (v != NULL && *v != '\0' && strcmp(v, "0") != 0)
      *pet_flags[i].value = 1;
  }

  /* muster's `--tee` with no value (before a word that is not a number) is torchrun's
   * `--tee 3`. */
  args = mu_calloc((size_t)argc * 2 + 1, sizeof(*args));
  int nargs = 0;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--") == 0 || (i > 0 && a[0] != '-')) {
      for (; i < argc; i++)
        args[nargs++] = argv[i];
      break;
    }
    args[nargs++] = argv[i];
    if (strcmp(a, "--tee") == 0 &&
        (i + 1 >= argc || !(argv[i + 1][0] >= '0' && argv[i + 1][0] <= '9')))
      args[nargs++] = (char *)"3";
    /* an option's value is not the script: keep it with its option */
    if (a[0] == '-' && strchr(a, '=') == NULL && i + 1 < argc && strcmp(a, "--tee") != 0) {
      for (const struct mu_opt *o = opts; o->type != MU_OPT_T_END; o++) {
        int hit = (a[1] == '-' && o->long_name != NULL && mu_opt_name_eq(o->long_name, a + 2)) ||
                  (a[1] != '-' && a[2] == '\0' && o->short_name == a[1]);
        if (hit && o->type != MU_OPT_T_BOOL) {
          args[nargs++] = argv[++i];
          break;
        }
      }
    }
  }
  args[nargs] = NULL;
  const char *me = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
  char *usage = NULL;
  if (strcmp(me, "torchrun") == 0)
    usage = mu_asprintf("torchrun%s", usage_text + strlen("muster agent"));
  int first = mu_opts_parse(opts, nargs, args, MU_OPTS_STOP_AT_NONOPT | MU_OPTS_KEEP_DASHDASH,
                            usage ? usage : usage_text);
  mu_free(usage);
  if (first == MU_OPTS_HELP) {
    code = MU_AGENT_EXIT_OK;
    goto out;
  }
  if (first < 0)
    goto out;

  /* The worker command: after `--` as given (muster's own form); else torchrun's SCRIPT. */
  int raw = first < nargs && strcmp(args[first], "--") == 0;
  if (raw)
    first++;
  if (first >= nargs) {
    mu_error("no worker command; give a script (muster agent ... train.py ARGS), -m MODULE, or "
             "a command after '--' (muster agent ... -- ./trainer ARGS)");
    goto out;
  }
  if (raw && (module || run_path)) {
    mu_error("-m/--run-path apply to a script; after '--' the command runs as given (drop '--': "
             "muster agent -m %s)",
             args[first]);
    goto out;
  }
  if (module && no_python && !run_path) {
    mu_error("--no-python and -m (--module) do not go together: a module runs with python");
    goto out;
  }
  if (!raw && (!no_python || run_path)) {
    if (find_python(python, sizeof(python)) != 0) {
      mu_error("no python3 (or python) on PATH to run '%s'; set PYTHON_EXEC=/path/to/python, or "
               "use --no-python to run it as a program",
               args[first]);
      goto out;
    }
    mu_strvec_push(&cmdv, python);
    mu_strvec_push(&cmdv, "-u");
    if (module && !run_path)
      mu_strvec_push(&cmdv, "-m");
  }
  for (int i = first; i < nargs; i++)
    mu_strvec_push(&cmdv, args[i]);
  cfg.cmd = cmdv.v;

  if (mu_agent_parse_nnodes(nnodes, &cfg.min_nodes, &cfg.max_nodes, &err) != 0) {
    mu_error("%s", mu_buf_str(&err));
    goto out;
  }
  int n = nproc_value(nproc);
  if (n < 0)
    goto out;
  cfg.nproc_per_node = n;
  long max_restarts = 0, node_rank = 0, master_port = 29500;
  if (max_restarts_s != NULL && mu_parse_long(max_restarts_s, 0, 1000000, &max_restarts) != 0) {
    mu_error("--max-restarts '%s': expected a number from 0", max_restarts_s);
    goto out;
  }
  cfg.max_restarts = max_restarts;
  if (monitor_s != NULL &&
      (mu_parse_double(monitor_s, &cfg.monitor_interval_s) != 0 || cfg.monitor_interval_s <= 0)) {
    mu_error("--monitor-interval '%s': expected seconds (a positive number)", monitor_s);
    goto out;
  }
  if (start_method != NULL && strcmp(start_method, "spawn") != 0 &&
      strcmp(start_method, "fork") != 0 && strcmp(start_method, "forkserver") != 0) {
    mu_error("--start-method '%s': expected spawn, fork or forkserver", start_method);
    goto out;
  }
  if (role != NULL)
    cfg.role = role;
  cfg.log_dir = log_dir;
  if (redirects != NULL && !is_std_spec(redirects)) {
    mu_agent_parse_std(redirects, 0, &n, &err);
    mu_error("--redirects %s", mu_buf_str(&err));
    goto out;
  }
  if (tee != NULL && !is_std_spec(tee)) {
    mu_agent_parse_std(tee, 0, &n, &err);
    mu_error("--tee %s", mu_buf_str(&err));
    goto out;
  }
  cfg.redirects_spec = redirects;
  cfg.tee_spec = tee;
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
  if (cfg.hang_timeout_s < 0 || cfg.hang_initial_timeout_s < 0) {
    mu_error("--hang-timeout and --hang-initial-timeout are seconds (0: no hang watch), not "
             "negative");
    goto out;
  }
  if (cfg.hang_initial_timeout_s > 0 && cfg.hang_timeout_s <= 0) {
    mu_error("--hang-initial-timeout needs --hang-timeout (the watch is on only with it)");
    goto out;
  }
  if (cfg.health_check_timeout_s <= 0 || cfg.health_check_interval_s <= 0) {
    mu_error("--health-check-timeout and --health-check-interval must be positive (seconds)");
    goto out;
  }
  if (cfg.health_check != NULL && cfg.health_check[0] == '\0') {
    mu_error("--health-check needs a command (a shell command line: '/opt/check-gpus.sh --quick')");
    goto out;
  }
  if (cfg.role[0] == '\0') {
    mu_error("--role must not be empty");
    goto out;
  }

  /* The rendezvous: --standalone wins (as torchrun's, it ignores backend, endpoint and id);
   * else the backend named, by default static without an endpoint, musterd with one. */
  const struct backend_row *bk = NULL;
  if (standalone) {
    if (endpoint != NULL)
      mu_warn("--standalone: ignoring --rdzv-endpoint '%s'", endpoint);
    endpoint = NULL;
  } else {
    const char *dflt = endpoint == NULL                                             ? "static"
                       : strncmp(endpoint, "etcd-v3://", strlen("etcd-v3://")) == 0 ? "etcd-v3"
                                                                                    : "muster";
    bk = find_backend(backend != NULL ? backend : dflt);
    if (bk == NULL)
      goto out;
    if (bk->kind == BK_REFUSED) {
      mu_error("--rdzv-backend %s: %s", bk->name, bk->why);
      goto out;
    }
    if (bk->ops != NULL)
      cfg.rdzv = bk->ops;
    if (bk->kind == BK_ETCD3)
      cfg.rdzv = mu_agent_backend("etcd-v3", NULL);
  }
  if (bk != NULL && bk->kind == BK_STATIC) {
    char host[256];
    if (cfg.min_nodes != cfg.max_nodes) {
      mu_error("--rdzv-backend static needs a fixed --nnodes N, not %s; an elastic range needs "
               "a musterd: --rdzv-endpoint HOST:PORT --rdzv-id ID",
               nnodes);
      goto out;
    }
    if (node_rank_s != NULL &&
        mu_parse_long(node_rank_s, 0, (long)cfg.max_nodes - 1, &node_rank) != 0) {
      mu_error("--node-rank '%s': expected a number from 0 to %d (--nnodes %d)", node_rank_s,
               cfg.max_nodes - 1, cfg.max_nodes);
      goto out;
    }
    if (master_port_s != NULL && mu_parse_long(master_port_s, 1, 65535, &master_port) != 0) {
      mu_error("--master-port '%s': expected a port from 1 to 65535", master_port_s);
      goto out;
    }
    /* One node needs no agreed port: the kernel picks one unless --master-port was given. */
    if (master_port_s == NULL && cfg.max_nodes == 1)
      master_port = 0;
    snprintf(host, sizeof(host), "%s", master_addr != NULL ? master_addr : "127.0.0.1");
    if (endpoint != NULL && split_hostport(endpoint, host, sizeof(host), &master_port) != 0) {
      mu_error("--rdzv-endpoint '%s': expected HOST:PORT", endpoint);
      goto out;
    }
    cfg.static_rank = (int)node_rank;
    cfg.master_addr = master_addr != NULL ? master_addr : "127.0.0.1";
    if (run_id == NULL)
      run_id = "none"; /* torchrun's default --rdzv-id */
    if (node_rank == 0) {
      int rc = mu_agent_standalone_listen(&sa, is_loopback(host) ? "127.0.0.1" : "0.0.0.0",
                                          (int)master_port, ep, sizeof(ep));
      if (rc != 0) {
        mu_error("static rendezvous: node rank 0 cannot listen on port %ld: %s; pick another "
                 "--master-port",
                 master_port, mu_strerror(rc));
        code = MU_AGENT_EXIT_RENDEZVOUS;
        goto out;
      }
      char *say = mu_asprintf("static rendezvous: node rank 0 serves it on %s", ep);
      print_report(NULL, MU_AGENT_PROGRESS, say);
      mu_free(say);
    } else {
      snprintf(ep, sizeof(ep), "%s:%ld", host, master_port);
    }
    endpoint = ep;
  }
  if (run_id == NULL && standalone)
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
  if (standalone) {
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
   * etcd-v3:// endpoint (include/muster/client.h speaks both), in the form every message shows
   * and a user can paste back (etcd-v3://h:2379, not etcd-v3://http://h:2379) */
  if (bk != NULL && bk->kind == BK_ETCD3) {
    char why[512];
    if (mu_etcd3_display(endpoint, &etcd_ep, why, sizeof(why)) != 0) {
      mu_error("--rdzv-endpoint: %s; with --rdzv-backend etcd-v3 give the members of the etcd "
               "cluster, e.g. etcd-v3://h1:2379,h2:2379",
               why);
      goto out;
    }
    endpoint = etcd_ep;
  }
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
  mu_strvec_release(&cmdv);
  mu_free(args);
  return code;
}
