/* muster builtins [--print NAME]: the builtin components (TorchX's format). */
#include <stdint.h>
#include <stdio.h>

#include "muster/mu.h"

#include "alloc.h"
#include "cmds.h"
#include "component.h"
#include "log.h"
#include "opts.h"

int cmd_builtins(int argc, char **argv)
{
  const char *print = NULL;
  struct mu_opt opts[] = {
      MU_OPT_STRING(0, "print", &print, "NAME", "print the component's arguments (its --help)"),
      MU_OPT_END(),
  };
  int n = mu_opts_parse(opts, argc, argv, 0, "muster builtins [--print NAME]");
  if (n == MU_OPTS_HELP)
    return 0;
  if (n < 0)
    return MU_EXIT_USAGE;
  struct mu_component *c = NULL;
  struct mu_buf err = MU_BUF_INIT(SIZE_MAX), h = MU_BUF_INIT(SIZE_MAX);
  struct mu_strvec names = MU_STRVEC_INIT, descs = MU_STRVEC_INIT;
  int rc = 0;
  if (print != NULL) {
    if (mu_component_load(print, &c, &err) != 0) {
      mu_error("%s", mu_buf_str(&err));
      rc = MU_EXIT_USAGE;
      goto out;
    }
    mu_component_help(c, &h);
    fputs(mu_buf_str(&h), stdout);
    goto out;
  }
  mu_component_builtins(&names, &descs);
  printf("Found %zu builtin components:\n", names.n);
  for (size_t i = 0; i < names.n; i++)
    printf("%3zu. %-22s %s\n", i + 1, names.v[i], descs.v[i]);
out:
  mu_strvec_release(&names);
  mu_strvec_release(&descs);
  mu_buf_release(&h);
  mu_buf_release(&err);
  mu_component_free(c);
  return rc;
}
