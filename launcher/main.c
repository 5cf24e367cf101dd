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
    {"agent", cmd_agent, "per-node agent: join the rendezvous and run the workers"},
    {"deploy", cmd_deploy, "print manifests for a cluster-wide musterd"},
    {"rdzv", cmd_rdzv, "show the runs, rounds and members of a musterd"},
};

static void usage(FILE *out)
{
  fprintf(out, "usage: muster [--log-level LEVEL] [--version] COMMAND [ARGS...]\n\ncommands:\n");
  for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
    fprintf(out, "    %-10s %s\n", commands[i].name, commands[i].help);
  fprintf(out, "\n'muster COMMAND -h' shows the options of a command.\n");
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
    if (strcmp(argv[i], "--version") == 0) {
      printf("muster %s\n", MU_VERSION);
      return fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1;
    } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      usage(stdout);
      return 0;
    } else if (strcmp(argv[i], "--log-level") == 0 && i + 1 < argc) {
      if (mu_log_level_parse(argv[++i], &level) != 0) {
        mu_error("unknown log level '%s'; use debug, info, warn or error", argv[i]);
        return MU_EXIT_USAGE;
      }
    } else {
      mu_error("unknown option '%s'", argv[i]);
      usage(stderr);
      return MU_EXIT_USAGE;
    }
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
