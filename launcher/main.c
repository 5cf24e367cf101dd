/* muster: process start-up, the global options, the command table and dispatch (as git's
 * run_builtin): find the row, call its cmd_*(), then check that stdout was written. The usage
 * text comes from the same table. main.c sees the cmd layer only (cmds.h). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "muster/mu.h"

#include "alloc.h"
#include "cmds.h"
#include "log.h"
#include "proc.h"
#include "opts.h"
#include "suggest.h"

struct cmd {
  const char *name;
  mu_cmd_fn *fn;
  const char *help; /* the line of `muster -h` */
};

static const struct cmd commands[] = {
    {"run", cmd_run, "resolve a component into a job and submit it"},
    {"status", cmd_status, "show the state of a job"},
    {"log", cmd_log, "print or follow the logs of a job's replicas"},
    {"cancel", cmd_cancel, "stop a job"},
    {"list", cmd_list, "list the jobs of a scheduler"},
    {"describe", cmd_describe, "print the job spec of a submitted job"},
    {"builtins", cmd_builtins, "list the builtin components"},
    {"runopts", cmd_runopts, "list the -cfg options of the schedulers"},
    {"configure", cmd_configure, "write ./.musterconfig with a scheduler's options"},
    {"agent", cmd_agent, "per-node agent: join the rendezvous and run the workers"},
    {"deploy", cmd_deploy, "print manifests for a cluster-wide musterd"},
    {"rdzv", cmd_rdzv, "show the runs, rounds and members of a musterd"},
    {"tee", cmd_tee, "run a command, copying its stdout and stderr into one log in order"},
};

static void usage(FILE *out)
{
  fprintf(out, "usage: muster [--log-level LEVEL] [--version] COMMAND [ARGS...]\n\n"
               "--log-level (TorchX's --log_level): debug, info, warning or error (default "
               "warning)\n\ncommands:\n");
  for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
    fprintf(out, "    %-10s %s\n", commands[i].name, commands[i].help);
  fprintf(out, "\n'muster COMMAND -h' shows the options of a command.\n");
}

/* One global option at argv[*i] (advanced past what it takes): --version, -h, and
 * --log-level LEVEL (TorchX's --log_level, =LEVEL too). Returns: -1 to go on, else the exit
 * code. */
static int global_option(int argc, char **argv, int *i, enum mu_log_level *level)
{
  const char *a = argv[*i], *v = NULL;
  if (strcmp(a, "--version") == 0) {
    printf("muster %s\n", MU_VERSION);
    return fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1;
  }
  if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
    usage(stdout);
    return 0;
  }
  size_t n = strcspn(a + 2, "=");
  if (strncmp(a, "--", 2) == 0 && n == 9 &&
      (strncmp(a + 2, "log-level", n) == 0 || strncmp(a + 2, "log_level", n) == 0)) {
    v = a[2 + n] == '=' ? a + 3 + n : (*i + 1 < argc ? argv[++*i] : NULL);
    if (v == NULL) {
      mu_error("%s needs a level: debug, info, warning or error", a);
      return MU_EXIT_USAGE;
    }
    if (mu_log_level_parse(v, level) != 0) {
      mu_error("unknown log level '%s'; use debug, info, warning (warn) or error (critical)", v);
      return MU_EXIT_USAGE;
    }
    return -1;
  }
  mu_error("unknown option '%s'", a);
  usage(stderr);
  return MU_EXIT_USAGE;
}

int main(int argc, char **argv)
{
  mu_proc_startup();
  enum mu_log_level level = MU_LOG_WARN;
  int i = 1;
  /* Called as `torchrun` (a link to muster): `muster agent`, with torchrun's command line. */
  const char *base = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
  if (strcmp(base, "torchrun") == 0) {
    mu_log_setup("torchrun", level);
    int rc = cmd_agent(argc, argv);
    if (fflush(stdout) != 0 || ferror(stdout)) {
      mu_error("cannot write to standard output");
      return MU_EXIT_FAILED;
    }
    return rc;
  }
  for (; i < argc && argv[i][0] == '-'; i++) {
    int rc = global_option(argc, argv, &i, &level);
    if (rc >= 0)
      return rc;
  }
  mu_log_setup("muster", level);
  if (i >= argc) {
    usage(stderr);
    return MU_EXIT_USAGE;
  }
  const struct cmd *hit = NULL;
  for (size_t k = 0; k < sizeof(commands) / sizeof(commands[0]); k++)
    if (strcmp(commands[k].name, argv[i]) == 0)
      hit = &commands[k];
  if (hit == NULL) {
    struct mu_suggest sg;
    mu_suggest_init(&sg, argv[i]);
    for (size_t k = 0; k < sizeof(commands) / sizeof(commands[0]); k++)
      mu_suggest_add(&sg, commands[k].name);
    const char *best = mu_suggest_best(&sg);
    if (best != NULL)
      mu_error("unknown command '%s'; did you mean '%s'?", argv[i], best);
    else
      mu_error("unknown command '%s'; see 'muster -h'", argv[i]);
    return MU_EXIT_USAGE;
  }
  int rc = hit->fn(argc - i, argv + i);
  if (fflush(stdout) != 0 || ferror(stdout)) {
    mu_error("cannot write to standard output");
    return MU_EXIT_FAILED;
  }
  return rc;
}
