/* The cmd layer: the muster subcommands, one file each (cmd/cmd_<name>.c, as git's builtin/),
 * each exporting only its cmd_<name>() whose return value is the exit status (0 ok, 1 failed,
 * 2 usage; docs/exit-codes.md). cmd_util.c holds what several of them share (handles, -cfg,
 * the status printout).
 *
 * Owns: the command lines, and everything the user sees: this is the only layer that prints
 * (errors with mu_error(), results on stdout). May call: sched/ (sched.h and, for deploy, the
 * kubernetes renderer), spec/ (components, job spec, config), agent/ (agent.h), common/.
 * Nothing below calls it.
 *
 * Adding a subcommand, the checklist:
 *   1. launcher/cmd/cmd_<name>.c with `int cmd_<name>(int argc, char **argv)`; argv[0] is the
 *      subcommand's name; parse with an MU_OPT table so that -h works.
 *   2. A row in commands[] in launcher/main.c (the usage text comes from it).
 *   3. docs/cli.md: the synopsis, the same as its -h.
 *   4. A test under tests/cli/ (t0001-help.sh checks -h for every row automatically).
 */
#ifndef MU_CMDS_H
#define MU_CMDS_H

typedef int mu_cmd_fn(int argc, char **argv);

int cmd_run(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_log(int argc, char **argv);
int cmd_cancel(int argc, char **argv);
int cmd_list(int argc, char **argv);
int cmd_describe(int argc, char **argv);
int cmd_builtins(int argc, char **argv);
int cmd_runopts(int argc, char **argv);
int cmd_configure(int argc, char **argv);
int cmd_agent(int argc, char **argv);
int cmd_deploy(int argc, char **argv);
int cmd_rdzv(int argc, char **argv);
int cmd_tee(int argc, char **argv);

#endif
