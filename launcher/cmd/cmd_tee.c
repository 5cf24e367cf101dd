/* muster tee FILE -- COMMAND [ARGS]: runs COMMAND with its stdout and stderr passed through,
 * and a copy of every line of both in FILE, in the order they come. The Slurm script runs each
 * replica's command under it (slurm-ID-ROLE-REPLICA.log, which `muster log` reads: srun's .out
 * and .err files lose the order between the two streams); the work is mu_slurm_tee(). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <uv.h>

#include "muster/mu.h"

#include "cmds.h"
#include "log.h"
#include "opts.h"
#include "slurm.h"

#define TEE_USAGE                                                                                  \
  "muster tee FILE -- COMMAND [ARGS...]\n\n"                                                       \
  "Runs COMMAND with its stdout and stderr passed through as they are, and appends every line\n"   \
  "of both to FILE, whole, in the order they come (the Slurm script runs each replica under\n"     \
  "it: slurm-ID-ROLE-REPLICA.log, what 'muster log' reads). Signals to the process group reach\n"  \
  "COMMAND; the exit status is COMMAND's (127: not found, 126: cannot be run)"

/* Ends this process as the command ended: by its signal (no core of ours), else its code. */
static int end_like(int code, int sig)
{
  if (sig != 0) {
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    signal(sig, SIG_DFL);
    raise(sig);
  }
  return code;
}

int cmd_tee(int argc, char **argv)
{
  struct mu_opt opts[] = {MU_OPT_END()};
  int n = mu_opts_parse(opts, argc, argv, MU_OPTS_STOP_AT_NONOPT, TEE_USAGE);
  if (n == MU_OPTS_HELP)
    return MU_EXIT_OK;
  if (n < 0)
    return MU_EXIT_USAGE;
  if (n + 2 >= argc || strcmp(argv[n + 1], "--") != 0) {
    mu_error("muster tee needs a file, '--' and a command: muster tee FILE -- COMMAND [ARGS]");
    return MU_EXIT_USAGE;
  }
  const char *path = argv[n];
  char **cmd = argv + n + 2;
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    /* No combined log: the command runs all the same, its output where it always went. */
    mu_warn("cannot open the combined log '%s': %s; running '%s' without it", path, strerror(errno),
            cmd[0]);
    fflush(NULL);
    execvp(cmd[0], cmd);
    mu_error("cannot run '%s': %s", cmd[0], strerror(errno));
    return errno == ENOENT ? 127 : 126;
  }
  int code = 0, sig = 0, log_err = 0;
  int rc = mu_slurm_tee(fd, cmd, &code, &sig, &log_err);
  if (close(fd) != 0 && log_err == 0)
    log_err = -errno;
  if (rc != 0) {
    mu_error("cannot run '%s': %s", cmd[0], uv_strerror(rc));
    return rc == UV_ENOENT ? 127 : 126;
  }
  if (log_err != 0)
    mu_warn("writing the combined log '%s' failed: %s (the command's output is whole in "
            "srun's files)",
            path, strerror(-log_err));
  return end_like(code, sig);
}
