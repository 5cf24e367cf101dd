/* muster runopts [SCHED]: the -cfg options of each scheduler (TorchX's runopts format). */
#include <stdio.h>
#include <string.h>

#include "muster/mu.h"

#include "cmd_util.h"
#include "cmds.h"
#include "log.h"
#include "opts.h"

static const char *const type_names[] = {"str",  "int",       "float",
                                         "bool", "List[str]", "Dict[str, str]"};

static void upper(const char *s, char *out, size_t n)
{
  size_t i = 0;
  for (; s[i] && i + 1 < n; i++)
    out[i] = (char)(s[i] >= 'a' && s[i] <= 'z' ? s[i] - 'a' + 'A' : s[i]);
  out[i] = '\0';
}

static void print_sched(const struct mu_sched_ops *s)
{
  printf("%s:\n", s->name);
  if (s->runopts == NULL || s->runopts[0].name == NULL) {
    printf("    (no options)\n\n");
    return;
  }
  printf("    usage:\n        ");
  int first = 1;
  for (const struct mu_runopt *o = s->runopts; o->name; o++) {
    char u[128];
    upper(o->name, u, sizeof(u));
    printf("%s%s%s=%s%s", first ? "" : ",", o->required ? "" : "[", o->name, u,
           o->required ? "" : "]");
    first = 0;
  }
  printf("\n");
  for (int req = 1; req >= 0; req--) {
    int any = 0;
    for (const struct mu_runopt *o = s->runopts; o->name; o++) {
      if (o->required != req)
        continue;
      if (!any)
        printf("\n    %s arguments:\n", req ? "required" : "optional");
      any = 1;
      char u[128];
      upper(o->name, u, sizeof(u));
      if (req)
        printf("        %s=%s (%s)\n", o->name, u, type_names[o->type]);
      else
        printf("        %s=%s (%s, %s)\n", o->name, u, type_names[o->type],
               o->def ? o->def : "None");
      printf("            %s\n", o->help ? o->help : "");
    }
  }
  printf("\n");
}

int cmd_runopts(int argc, char **argv)
{
  struct mu_opt opts[] = {MU_OPT_END()};
  int n = mu_opts_parse(opts, argc, argv, MU_OPTS_STOP_AT_NONOPT, "muster runopts [SCHED]");
  if (n == MU_OPTS_HELP)
    return 0;
  if (n < 0)
    return MU_EXIT_USAGE;
  if (n < argc) {
    const struct mu_sched_ops *s = mu_cli_sched(argv[n]);
    if (s == NULL)
      return MU_EXIT_USAGE;
    print_sched(s);
    return 0;
  }
  for (size_t i = 0; mu_sched_at(i) != NULL; i++)
    print_sched(mu_sched_at(i));
  return 0;
}
