/* muster builtins [--print NAME | --build NAME ARGS]: the builtin components (TorchX's
 * format), one component's source, or the job spec a component builds from ARGS (the TorchX
 * shim's torchx.components.* run it: spec/python/torchx/_muster.py). */
#include <stdint.h>
#include <stdio.h>

#include "muster/mu.h"

#include "alloc.h"
#include "cmds.h"
#include "component.h"
#include "log.h"
#include "opts.h"

#define BUILTINS_USAGE                                                                             \
  "muster builtins [--print NAME] [--build NAME [ARGS] [-- SCRIPT ARGS]]\n\n"                      \
  "Lists the builtin components; --print NAME prints a component's source (its file, as\n"         \
  "TorchX's builtins --print); --build NAME ARGS prints the job spec (JSON) the component\n"       \
  "builds from ARGS, with no scheduler and no .musterconfig defaults"

/* --build: the component's job spec from the arguments after NAME. */
static int build(const char *name, int argc, char **argv)
{
  struct mu_component *c = NULL;
  struct mu_app *app = NULL;
  struct mu_buf err = MU_BUF_INIT(SIZE_MAX), js = MU_BUF_INIT(SIZE_MAX);
  int rc = MU_EXIT_OK;
  if (mu_component_load(name, &c, &err) != 0 ||
      mu_component_build(c, argc, argv, NULL, &app, &err) != 0) {
    mu_error("%s", mu_buf_str(&err));
    rc = MU_EXIT_USAGE;
  } else {
    mu_app_to_json(app, &js);
    printf("%s\n", mu_buf_str(&js));
  }
  mu_app_free(app);
  mu_component_free(c);
  mu_buf_release(&err);
  mu_buf_release(&js);
  return rc;
}

/* --print: the component's file as it is. */
static int print_source(const char *name)
{
  struct mu_component *c = NULL;
  struct mu_buf err = MU_BUF_INIT(SIZE_MAX), src = MU_BUF_INIT(SIZE_MAX);
  int rc = MU_EXIT_OK;
  if (mu_component_load(name, &c, &err) != 0 || mu_component_source(c, &src, &err) != 0) {
    mu_error("%s", mu_buf_str(&err));
    rc = MU_EXIT_USAGE;
  } else {
    fwrite(src.data ? src.data : "", 1, src.len, stdout);
  }
  mu_component_free(c);
  mu_buf_release(&err);
  mu_buf_release(&src);
  return rc;
}

int cmd_builtins(int argc, char **argv)
{
  const char *print = NULL, *name = NULL;
  struct mu_opt opts[] = {
      MU_OPT_STRING(0, "print", &print, "NAME", "print the component's source (its file)"),
      MU_OPT_STRING(0, "build", &name, "NAME",
                    "print the job spec (JSON) NAME builds from the arguments that follow"),
      MU_OPT_END(),
  };
  int n = mu_opts_parse(opts, argc, argv, MU_OPTS_STOP_AT_NONOPT | MU_OPTS_STOP_AT_UNKNOWN,
                        BUILTINS_USAGE);
  if (n == MU_OPTS_HELP)
    return 0;
  if (n < 0)
    return MU_EXIT_USAGE;
  if (name != NULL)
    return build(name, argc - n, argv + n);
  if (n < argc) {
    mu_error("unexpected argument '%s' (see 'muster builtins -h')", argv[n]);
    return MU_EXIT_USAGE;
  }
  if (print != NULL)
    return print_source(print);
  struct mu_strvec names = MU_STRVEC_INIT, descs = MU_STRVEC_INIT;
  mu_component_builtins(&names, &descs);
  printf("Found %zu builtin components:\n", names.n);
  for (size_t i = 0; i < names.n; i++) { /* the descriptions wrapped under their column */
    struct mu_buf line = MU_BUF_INIT(SIZE_MAX);
    mu_buf_printf(&line, "%3zu. %-22s ", i + 1, names.v[i]);
    mu_component_wrap(&line, descs.v[i], 100, line.len);
    fwrite(line.data, 1, line.len, stdout);
    mu_buf_release(&line);
  }
  mu_strvec_release(&names);
  mu_strvec_release(&descs);
  return 0;
}
