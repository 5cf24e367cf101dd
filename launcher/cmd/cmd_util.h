/* Helpers shared by the cmd_*.c files (CLI layer: these print errors with mu_error()). */
#ifndef MU_CMD_UTIL_H
#define MU_CMD_UTIL_H

#include "config.h"
#include "opts.h"
#include "sched.h"

/* Resolves "SCHED://SESSION/APP_ID[/ROLE[/REPLICA]]" (or a bare APP_ID on the default
 * scheduler). *rest gets what follows the app id ("role/0") or NULL.
 * Returns: 0, or an exit code (2) after printing the error. Ownership: *app_id and *rest are
 * the caller's (mu_free). */
int mu_cli_handle(const char *arg, const struct mu_sched_ops **s, char **app_id, char **rest);

/* Finds a scheduler by name, printing an error with the closest name when unknown.
 * Returns: the backend, or NULL. */
const struct mu_sched_ops *mu_cli_sched(const char *name);

/* The help text of a -s option, the schedulers from the table: "the scheduler: local (default),
 * kubernetes, slurm". Returns: buf. */
const char *mu_cli_sched_help(char *buf, size_t n);

/* Loads the config files and resolves the scheduler's cfg with the -cfg string (may be NULL).
 * file may be NULL (then it is loaded and released here). Returns: 0, or 2 after printing. */
int mu_cli_cfg(const struct mu_sched_ops *s, const char *cfgstr, const struct mu_config *file,
               struct mu_cfg *out);

/* Checks the config files' sections and keys ([cli:run], [SCHEDULER] runopts of every
 * scheduler, [component:NAME] left to the component), and says which .torchxconfig was read.
 * Returns: 0, or 2 after printing the unknown word with the closest one. */
int mu_cli_config_check(const struct mu_config *file);

/* The -cfg option row of the subcommands that look a job up (an mu_opts table entry; needs
 * opts.h), also spelt -cfg as TorchX does. p is a const char ** that receives the K=V,...
 * string. */
#define MU_CLI_OPT_CFG(p)                                                                          \
  MU_OPT_STRING_F(0, "cfg", (p), "K=V,...", "scheduler options (e.g. log_dir=...)",                \
                  MU_OPT_SINGLE_DASH)

/* The job that a one-handle subcommand (cancel, describe, log, status) acts on. */
struct mu_cli_job {
  const struct mu_sched_ops *s; /* the backend the handle names */
  char *app_id;                 /* the app id alone */
  char *rest;                   /* "ROLE[/REPLICA]" after the app id, or NULL */
  struct mu_cfg cfg;            /* the backend's cfg: files, then -cfg */
};
/* clang-format off */
#define MU_CLI_JOB_INIT {NULL, NULL, NULL, {MU_KVLIST_INIT}}
/* clang-format on */

/* The shared prologue of the one-handle subcommands: checks that argv[n] is the last argument
 * (else prints "CMD needs exactly one app handle, e.g. 'muster CMD EXAMPLE'"), resolves it with
 * mu_cli_handle() and loads the cfg with mu_cli_cfg() (cfgstr may be NULL).
 * Returns: 0, or an exit code (2) after printing the error.
 * Ownership: j is the caller's; release it with mu_cli_job_release() whatever this returns. */
int mu_cli_job_open(struct mu_cli_job *j, int argc, char **argv, int n, const char *cmd,
                    const char *example, const char *cfgstr);

/* The whole prologue of a one-handle subcommand: parses argv with opts (a table that holds
 * MU_CLI_OPT_CFG(cfgstr); usage is its -h synopsis), then opens the job named by the one
 * argument left, as mu_cli_job_open() does with argv[0] as the command's name.
 * Returns: 0 with j open; MU_CLI_HELP after -h printed the usage (exit 0); or an exit code (2)
 * after printing the error. Ownership: as mu_cli_job_open(). */
#define MU_CLI_HELP (-1)
int mu_cli_job_parse(struct mu_cli_job *j, const struct mu_opt *opts, int argc, char **argv,
                     const char *usage, const char *example, const char *const *cfgstr);

/* mu_cli_job_parse() for a subcommand whose only option is -cfg. */
int mu_cli_job_args(struct mu_cli_job *j, int argc, char **argv, const char *usage,
                    const char *example);

/* Frees what mu_cli_job_open() filled in and resets j to MU_CLI_JOB_INIT. Accepts NULL. */
void mu_cli_job_release(struct mu_cli_job *j);

/* Prints a status in TorchX's text form, or as JSON. */
/* The rendezvous round of the job `st` describes on its musterd (st->rdzv_endpoint, with the
 * token of st->rdzv_token_file when it has one), as " | rdzv round R: N nodes (of MIN:MAX), W
 * waiting", or "" when there is none (yet). Bounded to 200 ms.
 * Ownership: writes at most n bytes to out. */
void mu_cli_rdzv_line(const struct mu_app_status *st, char *out, size_t n);

void mu_cli_status_print(const struct mu_app_status *st, const char *handle, int json);

/* Prints where a run's time went, from its JSON (GET /v1/runs/{id}, or the rdzv_run the local
 * scheduler keeps): time to first step, restarts of the budget, each round after a loss with
 * its downtime and why, standbys, unhealthy nodes with their check's first line. Every line
 * starts with `indent`; `title` 1 prints status's "Name: value" form, 0 muster rdzv's. */
struct cJSON;
void mu_cli_goodput_print(const struct cJSON *run, const char *indent, int title);

/* cmd_status_goodput.c: where the job's wall time went (common/goodput.h), from its run JSON
 * over the job's wall time (st's start to its end, or now). */
struct mu_goodput;
/* Returns: 1 with *g filled, 0 when the run has no round (yet). */
int mu_cli_goodput_of(const struct cJSON *run, const struct mu_app_status *st,
                      struct mu_goodput *g);
/* Prints status's goodput table, the steps line and --hang-timeout auto's value in use. */
void mu_cli_goodput_table(const struct cJSON *run, const struct mu_app_status *st);
/* Adds --json's "goodput" object to o (null without a round). */
void mu_cli_goodput_add_json(struct cJSON *o, const struct cJSON *run,
                             const struct mu_app_status *st);

#endif
