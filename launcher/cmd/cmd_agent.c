/* muster agent: the per-node torchrun replacement. Parses the command line (torchrun's
 * spellings and its PET_* variables included), hands over to agent/ (the rendezvous:
 * mu_agent_rdzv_resolve(); the run: mu_agent_run()) and prints what it reports. */
#include <assert.h>
#include <limits.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "muster/mu.h"

#include "agent.h"
#include "alloc.h"
#include "buf.h"
#include "cmds.h"
#include "log.h"
#include "opts.h"
#include "strvec.h"

static const char usage_text[] =
    "muster agent [--standalone | --rdzv-endpoint HOST:PORT --rdzv-id ID | --node-rank R\n"
    "       --master-addr HOST --master-port PORT] [--nnodes MIN[:MAX]] [--nproc-per-node N]\n"
    "       [OPTIONS] (SCRIPT.py | -m MODULE | --no-python CMD | -- CMD) [ARGS...]\n"
    "       (torchrun's command line; compat/torchrun is a link to muster: docs/agent.md)\n"
    "Options also come from torchrun's PET_<OPTION> variables (PET_NNODES=2).\n\n";

/* What counts as progress: said in --help and docs/agent.md ("Progress"). */
static const char progress_text[] =
    "\nprogress (the hang watch of --hang-timeout; docs/agent.md):\n"
    "  progress is a change of a worker's MUSTER_HEARTBEAT_FILE modification time (a touch;\n"
    "  its last line may be 'step N', 'step N/TOTAL' or 'checkpoint N'), or, for a worker\n"
    "  that never touched it, a complete line on its stdout or stderr (with --progress-regex,\n"
    "  a line matching it).\n"
    "  It is the job's: the agents share it through the rendezvous, and the job is hung only\n"
    "  when no rank on any node progressed for --hang-timeout (--hang-initial-timeout, default\n"
    "  600 s, before the first progress after a start). A hung job: every rank's stack, the\n"
    "  suspects named, a restart. No progress over --max-no-progress-restarts consecutive\n"
    "  restarts (3): every agent exits 93.\n";

/* What the command line (and PET_*) says, before it is checked. */
struct agent_cli {
  const char *nnodes, *nproc, *rdzv_conf, *redirects, *tee, *max_restarts, *monitor;
  const char *start_method, *log_dir, *role, *ranks_filter;
  /* torchrun 2.14's options (docs/agent.md, "torchrun 2.x options") */
  const char *shutdown_timeout, *signals, *numa, *prefix_template, *dup_out, *dup_err;
  const char *event_log, *logs_specs;
  const char *hang_timeout, *no_progress; /* --hang-timeout S|auto, --max-no-progress-restarts */
  int virtual_local_rank;
  struct mu_agent_rdzv_args rz;
  int no_python, module, run_path;
  double join_timeout, last_call, lease_ttl, stop_grace;
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

/* `muster agent --exec-worker PPID -- CMD ARGS...` (agent.h, mu_agent_exec_worker()). */
static int exec_worker(int argc, char **argv)
{
  long ppid = 0;
  struct mu_buf err = MU_BUF_INIT(SIZE_MAX);
  if (argc < 5 || strcmp(argv[3], "--") != 0 || mu_parse_long(argv[2], 1, 1L << 30, &ppid) != 0) {
    mu_error("usage: muster agent --exec-worker PPID -- CMD [ARGS...] (internal)");
    return MU_AGENT_EXIT_USAGE;
  }
  int code = mu_agent_exec_worker(ppid, argv + 4, &err);
  if (err.len > 0)
    mu_error("%s", mu_buf_str(&err));
  mu_buf_release(&err);
  return code;
}

/* muster's `--tee` alone is torchrun's `--tee 3`: the next word is its value when it is one. */
static int std_spec_word(const char *w)
{
  return w[0] >= '0' && w[0] <= '9';
}

/* torchrun's options of every version (and their PET_* variables): writes them to `out`. */
static size_t opts_torchrun(struct agent_cli *a, const char *backends, struct mu_opt *out)
{
  const struct mu_opt o[] = {
      MU_OPT_STRING_ENV(0, "nnodes", &a->nnodes, "MIN[:MAX]",
                        "number of nodes, or an elastic range", "PET_NNODES"),
      MU_OPT_STRING_ENV(0, "nproc-per-node", &a->nproc, "N",
                        "workers on this node: N, cpu, gpu (GPUs or Neuron cores), auto",
                        "PET_NPROC_PER_NODE"),
      MU_OPT_STRING_ENV(0, "rdzv-backend", &a->rz.backend, "NAME", backends, "PET_RDZV_BACKEND"),
      MU_OPT_STRING_ENV(0, "rdzv-endpoint", &a->rz.endpoint, "HOST:PORT",
                        "the rendezvous (a musterd; see the backends above)", "PET_RDZV_ENDPOINT"),
      MU_OPT_STRING_ENV(0, "rdzv-id", &a->rz.run_id, "ID",
                        "the run's name, the same on every node (none)", "PET_RDZV_ID"),
      MU_OPT_STRING_ENV(0, "rdzv-conf", &a->rdzv_conf, "K=V,...",
                        "join_timeout, last_call_timeout, lease_ttl (seconds)", "PET_RDZV_CONF"),
      MU_OPT_BOOL_ENV(0, "standalone", &a->rz.standalone,
                      "start an embedded musterd on a free port", "PET_STANDALONE"),
      MU_OPT_STRING_ENV(0, "max-restarts", &a->max_restarts, "K",
                        "the run's restarts after worker failures, shared by every node (0)",
                        "PET_MAX_RESTARTS"),
      MU_OPT_STRING_ENV(0, "monitor-interval", &a->monitor, "S",
                        "accepted for torchrun; worker exits are noticed at once",
                        "PET_MONITOR_INTERVAL"),
      MU_OPT_STRING_ENV(0, "start-method", &a->start_method, "M",
                        "spawn, fork, forkserver: accepted; workers are always new processes",
                        "PET_START_METHOD"),
      MU_OPT_STRING_ENV(0, "role", &a->role, "NAME", "ROLE_NAME of the workers (default)",
                        "PET_ROLE"),
      MU_OPT_BOOL_ENV('m', "module", &a->module, "run SCRIPT as a module: python -u -m MODULE",
                      "PET_MODULE"),
      MU_OPT_BOOL_ENV(0, "no-python", &a->no_python, "run SCRIPT itself, not with python",
                      "PET_NO_PYTHON"),
      MU_OPT_BOOL_ENV(0, "run-path", &a->run_path, "accepted: the script runs as python -u SCRIPT",
                      "PET_RUN_PATH"),
      MU_OPT_STRING_ENV(0, "log-dir", &a->log_dir, "DIR",
                        "write DIR/ID/attempt_N/LOCAL_RANK/{stdout,stderr}.log", "PET_LOG_DIR"),
      MU_OPT_STRING_ENV('r', "redirects", &a->redirects, "N",
                        "with --log-dir: streams to the files only (1 out, 2 err, 3 both; 0:1,1:2)",
                        "PET_REDIRECTS"),
      MU_OPT_STRING_OPTVAL('t', "tee", &a->tee, "N",
                           "with --log-dir: streams to the files and the console (alone: 3)",
                           "PET_TEE", "3", std_spec_word),
      MU_OPT_STRING_ENV(0, "local-ranks-filter", &a->ranks_filter, "R,R",
                        "only these local ranks' output shows on the console (torch 2.x)",
                        "PET_LOCAL_RANKS_FILTER"),
  };
  memcpy(out, o, sizeof(o));
  return sizeof(o) / sizeof(o[0]);
}

/* The options torchrun 2.x added, and the static rendezvous' own. */
static size_t opts_torch2(struct agent_cli *a, struct mu_opt *out)
{
  const struct mu_opt o[] = {
      MU_OPT_STRING_ENV(0, "shutdown-timeout", &a->shutdown_timeout, "S",
                        "torch 2.x: SIGTERM to SIGKILL delay (as --stop-grace)",
                        "PET_SHUTDOWN_TIMEOUT"),
      MU_OPT_STRING_ENV(
          0, "signals-to-handle", &a->signals, "SIG,...",
          "torch 2.x: signals passed on to the workers (SIGTERM,SIGINT,SIGHUP,SIGQUIT)",
          "PET_SIGNALS_TO_HANDLE"),
      MU_OPT_BOOL_ENV(0, "virtual-local-rank", &a->virtual_local_rank,
                      "torch 2.x: every worker sees LOCAL_RANK=0 and its own one device",
                      "PET_VIRTUAL_LOCAL_RANK"),
      MU_OPT_STRING_ENV(0, "numa-binding", &a->numa, "MODE",
                        "torch 2.x: node, socket, exclusive, core-complex (accepted; no binding)",
                        "PET_NUMA_BINDING"),
      MU_OPT_STRING_ENV(0, "log-line-prefix-template", &a->prefix_template, "T",
                        "torch 2.x: accepted; lines keep muster's [RANK] prefix",
                        "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"),
      MU_OPT_STRING_ENV(0, "duplicate-stdout-filters", &a->dup_out, "S,...",
                        "torch 2.x: accepted; --log-dir files keep every line",
                        "PET_DUPLICATE_STDOUT_FILTERS"),
      MU_OPT_STRING_ENV(0, "duplicate-stderr-filters", &a->dup_err, "S,...",
                        "torch 2.x: accepted; --log-dir files keep every line",
                        "PET_DUPLICATE_STDERR_FILTERS"),
      MU_OPT_STRING_ENV(0, "event-log-handler", &a->event_log, "NAME",
                        "torch 2.x: accepted; events are the agent's [muster agent] lines",
                        "PET_EVENT_LOG_HANDLER"),
      MU_OPT_STRING_ENV(0, "logs-specs", &a->logs_specs, "NAME",
                        "torch 2.x: accepted; the --log-dir layout is muster's own",
                        "PET_LOGS_SPECS"),
      MU_OPT_STRING_ENV(0, "node-rank", &a->rz.node_rank, "R", "static: this node's rank (0)",
                        "PET_NODE_RANK"),
      MU_OPT_STRING_ENV(0, "master-addr", &a->rz.master_addr, "HOST",
                        "static: node rank 0's address (127.0.0.1)", "PET_MASTER_ADDR"),
      MU_OPT_STRING_ENV(0, "master-port", &a->rz.master_port, "PORT",
                        "static: the port node rank 0's agent listens on (29500)",
                        "PET_MASTER_PORT"),
  };
  memcpy(out, o, sizeof(o));
  return sizeof(o) / sizeof(o[0]);
}

/* muster's own: the node's address and id, timeouts, hang and health. */
static size_t opts_muster(struct agent_cli *a, struct mu_agent_config *cfg, struct mu_opt *out)
{
  const struct mu_opt o[] = {
      MU_OPT_STRING(0, "local-addr", &cfg->local_addr, "ADDR",
                    "address peers reach this node at (the one that reaches musterd)"),
      MU_OPT_STRING(0, "node-id", &cfg->node_id, "ID", "this node's id (host-pid-random)"),
      MU_OPT_DOUBLE(0, "join-timeout", &a->join_timeout, "S", "give up joining after S s (600)"),
      MU_OPT_DOUBLE(0, "last-call", &a->last_call, "S",
                    "after MIN nodes joined, wait S s for more (server default 1)"),
      MU_OPT_DOUBLE(0, "lease-ttl", &a->lease_ttl, "S",
                    "a node silent for S s is dropped (server default 10)"),
      MU_OPT_DOUBLE(0, "stop-grace", &a->stop_grace, "S", "SIGTERM to SIGKILL delay (5)"),
      MU_OPT_STRING(0, "hang-timeout", &a->hang_timeout, "S|auto",
                    "the job without progress on any rank for S s is hung: stacks, restart; "
                    "auto: 10 x the slowest step interval, at least 5 s"),
      MU_OPT_DOUBLE(0, "hang-initial-timeout", &cfg->hang_initial_timeout_s, "S",
                    "the same before the job's first progress after a start (600)"),
      MU_OPT_STRING(0, "progress-regex", &cfg->progress_regex, "ERE",
                    "only output lines matching this POSIX extended regex are progress"),
      MU_OPT_STRING(0, "max-no-progress-restarts", &a->no_progress, "N",
                    "exit 93 after N consecutive restarts without progress (3; 0: never)"),
      MU_OPT_STRING_ENV(0, "health-check", &cfg->health_check, "CMD",
                        "a shell command run before every join; a node whose check fails waits "
                        "(neuron[:type=T,lnc=N,mount=DIR]: the builtin Neuron check)",
                        "MUSTER_HEALTH_CHECK"),
      MU_OPT_STRING_ENV(0, "health-root", &cfg->health_root, "DIR",
                        "the builtin checks read /sys and /proc under DIR (for tests; default /)",
                        "MUSTER_HEALTH_ROOT"),
      MU_OPT_DOUBLE(0, "health-check-timeout", &cfg->health_check_timeout_s, "S",
                    "a check running longer failed (60)"),
      MU_OPT_DOUBLE(0, "health-check-interval", &cfg->health_check_interval_s, "S",
                    "a failed check runs again S s later (30)"),
  };
  memcpy(out, o, sizeof(o));
  return sizeof(o) / sizeof(o[0]);
}

#define AGENT_OPTS_MAX 80

/* Parses argv (and the PET_* variables) into a and cfg. Returns: the index of the worker
 * command, MU_OPTS_HELP, or a negative code after the error was printed. */
static int parse(struct agent_cli *a, struct mu_agent_config *cfg, int argc, char **argv,
                 const char *usage, const char *backends)
{
  struct mu_opt opts[AGENT_OPTS_MAX];
  size_t n = opts_torchrun(a, backends, opts);
  n += opts_torch2(a, opts + n);
  n += opts_muster(a, cfg, opts + n);
  assert(n < AGENT_OPTS_MAX);
  opts[n] = (struct mu_opt)MU_OPT_END();
  return mu_opts_parse(opts, argc, argv, MU_OPTS_STOP_AT_NONOPT | MU_OPTS_KEEP_DASHDASH, usage);
}

/* The worker command: after `--` as given (muster's own form); else torchrun's SCRIPT, run by
 * python unless --no-python. Returns: 0, or -1 after printing the error. */
static int worker_command(const struct agent_cli *a, int argc, char **argv, int first,
                          struct mu_strvec *cmd)
{
  char python[PATH_MAX];
  int raw = first < argc && strcmp(argv[first], "--") == 0;
  first += raw;
  if (first >= argc)
    return mu_error("no worker command; give a script (muster agent ... train.py ARGS), -m "
                    "MODULE, or a command after '--' (muster agent ... -- ./trainer ARGS)");
  if (raw && (a->module || a->run_path))
    return mu_error("-m/--run-path apply to a script; after '--' the command runs as given "
                    "(drop '--': muster agent -m %s)",
                    argv[first]);
  if (a->module && a->no_python && !a->run_path)
    return mu_error("--no-python and -m (--module) do not go together: a module runs with python");
  if (!raw && (!a->no_python || a->run_path)) {
    if (mu_agent_find_python(python, sizeof(python)) != 0)
      return mu_error(
          "no python3 (or python) on PATH to run '%s'; set PYTHON_EXEC=/path/to/python, "
          "or use --no-python to run it as a program",
          argv[first]);
    mu_strvec_push(cmd, python);
    mu_strvec_push(cmd, "-u");
    if (a->module && !a->run_path)
      mu_strvec_push(cmd, "-m");
  }
  for (int i = first; i < argc; i++)
    mu_strvec_push(cmd, argv[i]);
  return 0;
}

/* The sizes and counts: --nnodes, --nproc-per-node, --max-restarts, --monitor-interval,
 * --start-method. Returns: 0, or -1 after printing the error. */
static int apply_counts(const struct agent_cli *a, struct mu_agent_config *cfg, struct mu_buf *err)
{
  long max_restarts = 0;
  if (mu_agent_parse_nnodes(a->nnodes, &cfg->min_nodes, &cfg->max_nodes, err) != 0 ||
      mu_agent_parse_nproc(a->nproc, &cfg->nproc_per_node, err) != 0)
    return mu_error("%s", mu_buf_str(err));
  if (a->max_restarts != NULL && mu_parse_long(a->max_restarts, 0, 1000000, &max_restarts) != 0)
    return mu_error("--max-restarts '%s': expected a number from 0", a->max_restarts);
  cfg->max_restarts = max_restarts;
  if (a->monitor != NULL &&
      (mu_parse_double(a->monitor, &cfg->monitor_interval_s) != 0 || cfg->monitor_interval_s <= 0))
    return mu_error("--monitor-interval '%s': expected seconds (a positive number)", a->monitor);
  const char *sm = a->start_method;
  if (sm != NULL && strcmp(sm, "spawn") != 0 && strcmp(sm, "fork") != 0 &&
      strcmp(sm, "forkserver") != 0)
    return mu_error("--start-method '%s': expected spawn, fork or forkserver", sm);
  return 0;
}

/* --hang-timeout S|auto, --progress-regex, --max-no-progress-restarts. Returns: 0, or -1
 * after printing the error. */
static int apply_progress(const struct agent_cli *a, struct mu_agent_config *cfg)
{
  long n = 0;
  if (a->hang_timeout != NULL && strcmp(a->hang_timeout, "auto") == 0) {
    cfg->hang_auto = 1;
    cfg->hang_timeout_s = MU_AGENT_AUTO_FLOOR_S; /* the floor; turns the watch on */
  } else if (a->hang_timeout != NULL &&
             mu_parse_double(a->hang_timeout, &cfg->hang_timeout_s) != 0) {
    return mu_error("--hang-timeout '%s': expected seconds (0: no hang watch) or 'auto'",
                    a->hang_timeout);
  }
  if (a->no_progress != NULL && mu_parse_long(a->no_progress, 0, 1000000, &n) != 0)
    return mu_error("--max-no-progress-restarts '%s': expected a number from 0 (0: never stop)",
                    a->no_progress);
  if (a->no_progress != NULL)
    cfg->max_no_progress_restarts = (int)n;
  if (cfg->progress_regex != NULL) {
    regex_t re;
    int rc = regcomp(&re, cfg->progress_regex, REG_EXTENDED | REG_NOSUB);
    if (rc != 0) {
      char why[256];
      regerror(rc, &re, why, sizeof(why));
      return mu_error("--progress-regex '%s': %s; give a POSIX extended regular expression "
                      "(e.g. '^step [0-9]+')",
                      cfg->progress_regex, why);
    }
    regfree(&re);
  }
  return 0;
}

/* The hang watch and the health check. Returns: 0, or -1 after printing the error. */
static int apply_goodput(const struct agent_cli *a, struct mu_agent_config *cfg)
{
  if (apply_progress(a, cfg) != 0)
    return -1;
  if (cfg->hang_timeout_s < 0 || cfg->hang_initial_timeout_s < 0)
    return mu_error("--hang-timeout and --hang-initial-timeout are seconds (0: no hang watch), "
                    "not negative");
  if (cfg->hang_initial_timeout_s > 0 && cfg->hang_timeout_s <= 0)
    return mu_error("--hang-initial-timeout needs --hang-timeout (the watch is on only with it)");
  if (cfg->health_check_timeout_s <= 0 || cfg->health_check_interval_s <= 0)
    return mu_error("--health-check-timeout and --health-check-interval must be positive "
                    "(seconds)");
  if (cfg->health_check != NULL && cfg->health_check[0] == '\0')
    return mu_error("--health-check needs a command (a shell command line: "
                    "'/opt/check-gpus.sh --quick')");
  if (mu_agent_neuron_is_builtin(cfg->health_check)) {
    struct mu_agent_neuron n;
    struct mu_buf err = MU_BUF_INIT(SIZE_MAX);
    int rc = mu_agent_neuron_parse(cfg->health_check, &n, &err);
    mu_agent_neuron_release(&n);
    if (rc != 0)
      rc = mu_error("%s", mu_buf_str(&err));
    mu_buf_release(&err);
    return rc;
  }
  return 0;
}

/* The workers' output and the timings: --role, --log-dir, --redirects, --tee,
 * --local-ranks-filter, --rdzv-conf and the seconds. Returns: 0, or -1 after printing. */
static int apply_output(const struct agent_cli *a, struct mu_agent_config *cfg, struct mu_buf *err)
{
  int ignore = 0;
  if (a->role != NULL)
    cfg->role = a->role;
  cfg->log_dir = a->log_dir;
  if (a->redirects != NULL && mu_agent_parse_std(a->redirects, 0, &ignore, err) != 0)
    return mu_error("--redirects %s", mu_buf_str(err));
  if (a->tee != NULL && mu_agent_parse_std(a->tee, 0, &ignore, err) != 0)
    return mu_error("--tee %s", mu_buf_str(err));
  if (a->ranks_filter != NULL && a->ranks_filter[0] != '\0' &&
      mu_agent_parse_ranks_filter(a->ranks_filter, 0, &ignore, err) != 0)
    return mu_error("%s", mu_buf_str(err));
  cfg->redirects_spec = a->redirects;
  cfg->tee_spec = a->tee;
  cfg->ranks_filter = a->ranks_filter;
  if (a->rdzv_conf != NULL && mu_agent_parse_rdzv_conf(a->rdzv_conf, cfg, err) != 0)
    return mu_error("%s", mu_buf_str(err));
  if (a->join_timeout >= 0)
    cfg->join_timeout_s = a->join_timeout;
  if (a->last_call >= 0)
    cfg->last_call_s = a->last_call;
  if (a->lease_ttl >= 0)
    cfg->lease_ttl_s = a->lease_ttl;
  if (a->stop_grace >= 0)
    cfg->stop_grace_s = a->stop_grace;
  if (cfg->join_timeout_s <= 0)
    return mu_error("--join-timeout must be positive (seconds)");
  if (cfg->role[0] == '\0')
    return mu_error("--role must not be empty");
  return apply_goodput(a, cfg);
}

/* Whether every name of the comma-separated `list` is a signal torchrun 2.x handles. */
static int signals_ok(const char *list)
{
  static const char *const known[] = {"SIGTERM", "SIGINT",  "SIGHUP",
                                      "SIGQUIT", "SIGUSR1", "SIGUSR2"};
  const char *p = list;
  for (;;) {
    size_t n = strcspn(p, ",");
    int ok = 0;
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]) && !ok; i++)
      ok = strlen(known[i]) == n && strncmp(known[i], p, n) == 0;
    if (!ok)
      return 0;
    if (p[n] == '\0')
      return 1;
    p += n + 1;
  }
}

/* torchrun 2.14's options: --shutdown-timeout, --signals-to-handle, --virtual-local-rank,
 * --numa-binding; the rest are accepted as they are (docs/agent.md). Returns: 0, or -1 after
 * printing the error. */
static int apply_torch2(const struct agent_cli *a, struct mu_agent_config *cfg)
{
  double st = 0;
  if (a->shutdown_timeout != NULL) {
    if (mu_parse_double(a->shutdown_timeout, &st) != 0 || st < 0)
      return mu_error("--shutdown-timeout '%s': expected seconds (0 or more)", a->shutdown_timeout);
    if (a->stop_grace < 0)
      cfg->stop_grace_s = st;
  }
  if (a->signals != NULL) {
    if (!signals_ok(a->signals))
      return mu_error("--signals-to-handle '%s': expected signal names separated by commas, "
                      "from SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2",
                      a->signals);
    cfg->signals_to_handle = a->signals;
  }
  const char *numa = a->numa;
  if (numa != NULL && strcmp(numa, "node") != 0 && strcmp(numa, "socket") != 0 &&
      strcmp(numa, "exclusive") != 0 && strcmp(numa, "core-complex") != 0)
    return mu_error("--numa-binding '%s': expected node, socket, exclusive or core-complex", numa);
  cfg->virtual_local_rank = a->virtual_local_rank;
  return 0;
}

/* The usage, named as called (compat/torchrun is a link to muster), with the backends.
 * Ownership: the caller's (mu_free). */
static char *usage_of(const char *argv0)
{
  const char *me = strrchr(argv0, '/') ? strrchr(argv0, '/') + 1 : argv0;
  struct mu_buf u = MU_BUF_INIT(SIZE_MAX);
  if (strcmp(me, "torchrun") == 0)
    mu_buf_printf(&u, "torchrun%s", usage_text + strlen("muster agent"));
  else
    mu_buf_puts(&u, usage_text);
  mu_agent_rdzv_help(&u);
  mu_buf_puts(&u, progress_text);
  if (u.len > 0 && u.data[u.len - 1] == '\n')
    u.data[--u.len] = '\0';
  return mu_buf_detach(&u);
}

int cmd_agent(int argc, char **argv)
{
  if (argc >= 2 && strcmp(argv[1], "--exec-worker") == 0)
    return exec_worker(argc, argv);
  struct agent_cli a = {.nnodes = "1",
                        .nproc = "1",
                        .join_timeout = -1,
                        .last_call = -1,
                        .lease_ttl = -1,
                        .stop_grace = -1};
  struct mu_agent_config cfg;
  struct mu_agent_rdzv rz = {0};
  struct mu_strvec cmd = MU_STRVEC_INIT;
  struct mu_buf err = MU_BUF_INIT(SIZE_MAX), backends = MU_BUF_INIT(SIZE_MAX);
  int code = MU_AGENT_EXIT_USAGE;
  char *usage = usage_of(argv[0]);
  mu_agent_config_init(&cfg);
  mu_agent_rdzv_names(&backends);
  mu_buf_puts(&backends, "; default: static without --rdzv-endpoint");
  int first = parse(&a, &cfg, argc, argv, usage, mu_buf_str(&backends));
  if (first == MU_OPTS_HELP)
    code = MU_AGENT_EXIT_OK;
  if (first < 0 || worker_command(&a, argc, argv, first, &cmd) != 0 ||
      apply_counts(&a, &cfg, &err) != 0 || apply_output(&a, &cfg, &err) != 0 ||
      apply_torch2(&a, &cfg) != 0)
    goto out;
  cfg.cmd = cmd.v;
  cfg.out_fd = STDOUT_FILENO;
  cfg.err_fd = STDERR_FILENO;
  cfg.report = print_report;
  if (a.rz.standalone && a.rz.endpoint != NULL)
    mu_warn("--standalone: ignoring --rdzv-endpoint '%s'", a.rz.endpoint);
  code = mu_agent_rdzv_resolve(&a.rz, &cfg, &rz, &err);
  if (code == 0)
    code = mu_agent_run(&cfg, &err);
  if (err.len > 0)
    mu_error("%s", mu_buf_str(&err));
out:
  mu_agent_rdzv_release(&rz);
  mu_buf_release(&err);
  mu_buf_release(&backends);
  mu_strvec_release(&cmd);
  mu_free(usage);
  return code;
}
