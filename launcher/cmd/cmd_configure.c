/* muster configure [-s SCHED] [--all] [--force]: writes ./.musterconfig with a scheduler's
 * runopts, their defaults and help as comments (as `torchx configure` writes .torchxconfig),
 * for the user to uncomment and edit. An existing file is never replaced without --force. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "muster/mu.h"

#include "buf.h"
#include "cmd_util.h"
#include "cmds.h"
#include "fsutil.h"
#include "log.h"
#include "opts.h"

#define CONFIGURE_FILE ".musterconfig"

static const char *const type_names[] = {"str",  "int",       "float",
                                         "bool", "List[str]", "Dict[str, str]"};

/* One scheduler's section: every runopt commented out at its default, its help above it. */
static void write_sched(struct mu_buf *b, const struct mu_sched_ops *s)
{
  mu_buf_printf(b, "[%s]\n", s->name);
  if (s->runopts == NULL || s->runopts[0].name == NULL)
    mu_buf_printf(b, "# (no options)\n");
  for (const struct mu_runopt *o = s->runopts; o != NULL && o->name != NULL; o++) {
    mu_buf_printf(b, "# %s (%s%s)\n", o->help ? o->help : "", type_names[o->type],
                  o->required ? ", required" : "");
    mu_buf_printf(b, "#%s = %s\n", o->name, o->def ? o->def : o->required ? "" : "None");
  }
  mu_buf_putc(b, '\n');
}

/* Writes b to path: a new file only, unless force. Returns: 0, or an exit code (message said). */
static int write_config(const char *path, const struct mu_buf *b, int force)
{
  int rc;
  if (force) {
    rc = mu_write_file_atomic(path, b->data, b->len, 0644, 0);
  } else {
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno == EEXIST) {
      mu_error("%s already exists; it is left as it is (give --force to replace it, or edit it: "
               "'muster runopts' lists the options)",
               path);
      return MU_EXIT_USAGE;
    }
    rc = fd < 0 ? -errno : 0;
    if (fd >= 0)
      rc = mu_write_all(fd, b->data, b->len);
    if (fd >= 0 && close(fd) != 0 && rc == 0)
      rc = -errno;
  }
  if (rc != 0) {
    mu_error("cannot write %s: %s", path, mu_strerror(rc));
    return MU_EXIT_FAILED;
  }
  return MU_EXIT_OK;
}

int cmd_configure(int argc, char **argv)
{
  const char *sched = NULL;
  int all = 0, force = 0;
  char shelp[256];
  struct mu_opt opts[] = {
      MU_OPT_STRING('s', "scheduler", &sched, "SCHED", mu_cli_sched_help(shelp, sizeof(shelp))),
      MU_OPT_BOOL(0, "all", &all, "every scheduler's options"),
      MU_OPT_BOOL(0, "force", &force, "replace an existing " CONFIGURE_FILE),
      MU_OPT_END(),
  };
  int n = mu_opts_parse(opts, argc, argv, 0,
                        "muster configure [-s SCHED | --all] [--force]\n\n"
                        "Writes ./" CONFIGURE_FILE " with the scheduler's -cfg options (local by "
                        "default), their\ndefaults and help, commented out for you to edit");
  if (n == MU_OPTS_HELP)
    return 0;
  if (n < 0)
    return MU_EXIT_USAGE;
  if (all && sched != NULL) {
    mu_error("give -s SCHED or --all, not both");
    return MU_EXIT_USAGE;
  }
  const struct mu_sched_ops *one = all ? NULL : mu_cli_sched(sched ? sched : "local");
  if (!all && one == NULL)
    return MU_EXIT_USAGE;
  struct mu_buf b = MU_BUF_INIT(SIZE_MAX);
  mu_buf_printf(&b, "# muster's configuration (written by 'muster configure'; see docs/cli.md).\n"
                    "# Each option is shown at its default: uncomment a line to change it.\n\n");
  for (size_t i = 0; mu_sched_at(i) != NULL; i++)
    if (all || mu_sched_at(i) == one)
      write_sched(&b, mu_sched_at(i));
  int rc = write_config(CONFIGURE_FILE, &b, force);
  if (rc == MU_EXIT_OK)
    printf("wrote ./%s (%s)\n", CONFIGURE_FILE, all ? "every scheduler" : one->name);
  mu_buf_release(&b);
  return rc;
}
