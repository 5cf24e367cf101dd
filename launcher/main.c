/* muster: global options, the command table, dispatch (STYLE.md #1, #2, #23). */
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

enum cmd_flags {
  CMD_NONE = 0,
  CMD_TX_CFG = 1, /* accept TorchX's single-dash -cfg (and -cfg=...) anywhere in the arguments */
};

struct cmd {
  const char *name;
  mu_cmd_fn *fn;
  int flags;
  const char *help;
};

static const struct cmd commands[] = {
    {"run", cmd_run, CMD_NONE, "resolve a component into a job and submit it"},
    {"status", cmd_status, CMD_TX_CFG, "show the state of a job"},
    {"log", cmd_log, CMD_TX_CFG, "print or follow the logs of a job's replicas"},
    {"cancel", cmd_cancel, CMD_TX_CFG, "stop a job"},
    {"list", cmd_list, CMD_TX_CFG, "list the jobs of a scheduler"},
    {"describe", cmd_describe, CMD_TX_CFG, "print the job spec of a submitted job"},
    {"builtins", cmd_builtins, CMD_NONE, "list the builtin components"},
    {"runopts", cmd_runopts, CMD_NONE, "list the -cfg options of the schedulers"},
    {"agent", cmd_agent, CMD_NONE, "per-node agent: join the rendezvous and run the workers"},
    {"deploy", cmd_deploy, CMD_NONE, "print manifests for a cluster-wide musterd"},
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
  char **av = argv + i;
  if (hit->flags & CMD_TX_CFG) {
    av = mu_calloc((size_t)(argc - i) + 1, sizeof(char *));
    for (int k = 0; k < argc - i; k++) {
      const char *a = argv[i + k];
      if (strcmp(a, "-cfg") == 0 || strncmp(a, "-cfg=", 5) == 0)
        av[k] = mu_asprintf("-%s", a);
      else
        av[k] = mu_strdup(a);
    }
  }
  int rc = hit->fn(argc - i, av);
  if (av != argv + i) {
    for (int k = 0; k < argc - i; k++)
      mu_free(av[k]);
    mu_free(av);
  }
  if (fflush(stdout) != 0 || ferror(stdout)) {
    mu_error("cannot write to standard output");
    return MU_EXIT_FAILED;
  }
  return rc;
}
