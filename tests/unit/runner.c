/* mu_unit_tests [--list] [--timeout S] [NAME...]: runs every registered case (or those whose
 * name starts with one of NAMEs) in a forked child, prints TAP, exits 1 if any failed. */
#define _XOPEN_SOURCE 700 /* nftw */
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alloc.h"
#include "opts.h"
#include "task.h"

struct test_case {
  const char *name;
  mu_test_fn *fn;
};

static struct test_case *cases;
static size_t ncases, capcases;

void mu_test_register(const char *name, mu_test_fn *fn)
{
  if (ncases == capcases) {
    capcases = capcases ? capcases * 2 : 64;
    cases = realloc(cases, capcases * sizeof(*cases));
    if (cases == NULL)
      abort();
  }
  cases[ncases].name = name;
  cases[ncases].fn = fn;
  ncases++;
}

static int by_name(const void *a, const void *b)
{
  return strcmp(((const struct test_case *)a)->name, ((const struct test_case *)b)->name);
}

static int selected(const char *name, int argc, char **argv, int first)
{
  if (first >= argc)
    return 1;
  for (int i = first; i < argc; i++)
    if (strncmp(name, argv[i], strlen(argv[i])) == 0)
      return 1;
  return 0;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  (void)st, (void)flag, (void)ftw;
  remove(path);
  return 0;
}

/* Runs one case in a forked child whose TMPDIR is a directory of its own, removed when the
 * child ends however it ends (a failed case, or one whose helpers leave files for the processes
 * it started, leaves nothing behind). */
static int run_one(const struct test_case *tc, long timeout)
{
  const char *base = getenv("TMPDIR");
  char *dir = mu_asprintf("%s/mu-unit-XXXXXX", base != NULL && base[0] == '/' ? base : "/tmp");
  if (mkdtemp(dir) == NULL) {
    fprintf(stderr, "# %s: cannot make its temporary directory %s\n", tc->name, dir);
    mu_free(dir);
    return -1;
  }
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) {
    rmdir(dir);
    mu_free(dir);
    return -1;
  }
  if (pid == 0) {
    setenv("TMPDIR", dir, 1);
    alarm((unsigned)timeout);
    tc->fn();
    fflush(NULL);
    _exit(0);
  }
  int st = 0;
  while (waitpid(pid, &st, 0) < 0)
    ;
  nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
  mu_free(dir);
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
    return 0;
  if (WIFSIGNALED(st))
    fprintf(stderr, "# %s: killed by signal %d%s\n", tc->name, WTERMSIG(st),
            WTERMSIG(st) == SIGALRM ? " (timeout)" : "");
  else
    fprintf(stderr, "# %s: exit status %d\n", tc->name, WEXITSTATUS(st));
  return -1;
}

int main(int argc, char **argv)
{
  int list = 0;
  /* a guard against a case that hangs, not a bound on its speed: a case that moves 200 MiB
   * (rdzv__encoding_bounded_apart_from_memory) took over 30 s at a load of 10 on 2 cores */
  long timeout = 300;
  struct mu_opt opts[] = {
      MU_OPT_BOOL(0, "list", &list, "list the cases and exit"),
      MU_OPT_INT(0, "timeout", &timeout, "S", "seconds allowed per case, a hang guard (300)"),
      MU_OPT_END(),
  };
  int first = mu_opts_parse(opts, argc, argv, MU_OPTS_STOP_AT_NONOPT,
                            "mu_unit_tests [--list] [--timeout S] [NAME-PREFIX...]");
  if (first == MU_OPTS_HELP)
    return 0;
  if (first < 0)
    return 2;
  mu_alloc_install_hooks();
  qsort(cases, ncases, sizeof(*cases), by_name);
  if (list) {
    for (size_t i = 0; i < ncases; i++)
      printf("%s\n", cases[i].name);
    return 0;
  }
  size_t n = 0;
  for (size_t i = 0; i < ncases; i++)
    n += selected(cases[i].name, argc, argv, first);
  printf("1..%zu\n", n);
  size_t k = 0, failed = 0;
  for (size_t i = 0; i < ncases; i++) {
    if (!selected(cases[i].name, argc, argv, first))
      continue;
    k++;
    int rc = run_one(&cases[i], timeout);
    printf("%s %zu - %s\n", rc == 0 ? "ok" : "not ok", k, cases[i].name);
    if (rc != 0)
      failed++;
  }
  printf("# %zu passed, %zu failed\n", n - failed, failed);
  free(cases);
  return failed ? 1 : 0;
}
