/* Tests for the parsing modes of common/opts.c that `muster run` and the one-handle
 * subcommands need (TorchX's single-dash long option -cfg; stopping at an option that belongs
 * to what follows while a misspelt one stays an error), and for the range-checked unsigned rows
 * (MU_OPT_UINT) that bind musterd's options straight to config fields of any width, rows that
 * read an environment variable and rows with an optional value (muster agent's torchrun
 * options). */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "muster/errno.h"

#include "opts.h"
#include "task.h"

TEST(opts__single_dash_long_name)
{
  const char *cfg = NULL;
  int dry = 0;
  struct mu_opt opts[] = {
      MU_OPT_STRING_F(0, "cfg", &cfg, "K=V", "options", MU_OPT_SINGLE_DASH),
      MU_OPT_BOOL(0, "dryrun", &dry, "print only"),
      MU_OPT_END(),
  };
  char a0[] = "run", a1[] = "-cfg", a2[] = "a=1", a3[] = "rest";
  char *argv[] = {a0, a1, a2, a3, NULL};
  ASSERT_EQ(mu_opts_parse(opts, 4, argv, MU_OPTS_STOP_AT_NONOPT, "u"), 3);
  ASSERT_STR_EQ(cfg, "a=1");
  char b1[] = "-cfg=b=2", b2[] = "--cfg=c=3";
  char *argv2[] = {a0, b1, NULL};
  ASSERT_EQ(mu_opts_parse(opts, 2, argv2, 0, "u"), 2);
  ASSERT_STR_EQ(cfg, "b=2");
  char *argv3[] = {a0, b2, NULL};
  ASSERT_EQ(mu_opts_parse(opts, 2, argv3, 0, "u"), 2);
  ASSERT_STR_EQ(cfg, "c=3");
  /* Only rows that ask for it: -dryrun is no option. */
  char c1[] = "-dryrun";
  char *argv4[] = {a0, c1, NULL};
  ASSERT_EQ(mu_opts_parse(opts, 2, argv4, 0, "u"), MU_EUSAGE);
  ASSERT_EQ(dry, 0);
  /* Without a value it says what is missing. */
  char *argv5[] = {a0, a1, NULL};
  ASSERT_EQ(mu_opts_parse(opts, 2, argv5, 0, "u"), MU_EUSAGE);
}

TEST(opts__stop_at_unknown)
{
  const char *s = NULL;
  int dry = 0;
  struct mu_opt opts[] = {
      MU_OPT_STRING('s', "scheduler", &s, "S", "scheduler"),
      MU_OPT_BOOL(0, "dryrun", &dry, "print only"),
      MU_OPT_END(),
  };
  char a0[] = "run", a1[] = "--dryrun", a2[] = "--msg", a3[] = "hi", a4[] = "-j", a5[] = "2x8";
  char *argv[] = {a0, a1, a2, a3, NULL};
  /* --msg is not ours and not close to one of ours: it starts what follows. */
  ASSERT_EQ(mu_opts_parse(opts, 4, argv, MU_OPTS_STOP_AT_NONOPT | MU_OPTS_STOP_AT_UNKNOWN, "u"), 2);
  ASSERT_EQ(dry, 1);
  char *argv2[] = {a0, a4, a5, NULL};
  ASSERT_EQ(mu_opts_parse(opts, 3, argv2, MU_OPTS_STOP_AT_NONOPT | MU_OPTS_STOP_AT_UNKNOWN, "u"),
            1);
  /* Without the flag the same words are errors. */
  ASSERT_EQ(mu_opts_parse(opts, 4, argv, MU_OPTS_STOP_AT_NONOPT, "u"), MU_EUSAGE);
  /* A misspelling of ours is still an error, not the start of what follows. */
  char b1[] = "--dryrn";
  char *argv3[] = {a0, b1, a2, NULL};
  ASSERT_EQ(mu_opts_parse(opts, 3, argv3, MU_OPTS_STOP_AT_NONOPT | MU_OPTS_STOP_AT_UNKNOWN, "u"),
            MU_EUSAGE);
}

struct fields {
  unsigned u;
  size_t z;
  uint64_t q;
};

static int parse(struct fields *f, const char *a, const char *b)
{
  struct mu_opt opts[] = {
      MU_OPT_UINT(0, "conns", &f->u, "N", "at least 1", 1, UINT_MAX),
      MU_OPT_UINT(0, "bytes", &f->z, "N", "any", 0, LONG_MAX),
      MU_OPT_UINT(0, "days", &f->q, "N", "at most a week", 0, 7),
      MU_OPT_END(),
  };
  char *argv[] = {(char *)"prog", (char *)a, (char *)b, NULL};
  return mu_opts_parse(opts, b != NULL ? 3 : 2, argv, 0, "prog [options]");
}

TEST(opts__uint_rows_bind_fields_of_any_width)
{
  struct fields f = {10, 20, 3};
  ASSERT_EQ(parse(&f, "--conns", "4000000000"), 3);
  ASSERT_EQ(f.u, 4000000000u);
  ASSERT_EQ(f.z, 20); /* the neighbours are untouched */
  ASSERT_EQ(parse(&f, "--bytes=9000000000", NULL), 2);
  ASSERT(f.z == 9000000000u);
  ASSERT_EQ(f.u, 4000000000u);
  ASSERT_EQ(parse(&f, "--days", "7"), 3);
  ASSERT(f.q == 7);
}

TEST(opts__uint_rows_refuse_out_of_range)
{
  struct fields f = {10, 20, 3};
  ASSERT_EQ(parse(&f, "--conns", "0"), MU_EUSAGE);
  ASSERT_EQ(parse(&f, "--conns", "-5"), MU_EUSAGE);
  ASSERT_EQ(parse(&f, "--days", "8"), MU_EUSAGE);
  ASSERT_EQ(parse(&f, "--bytes", "12x"), MU_EUSAGE);
  ASSERT_EQ(f.u, 10); /* nothing stored on a refusal */
  ASSERT_EQ(f.z, 20);
  ASSERT(f.q == 3);
}

/* Rows that read an environment variable (torchrun's PET_*): the command line wins, then the
 * variable (non-empty; a bool unless "0"), then the field's own value; a bad value in the
 * variable is an error naming it. */
TEST(opts__env_rows)
{
  const char *nn = "1", *id = NULL;
  int sa = 0, mod = 0;
  double t = 5;
  struct mu_opt opts[] = {
      MU_OPT_STRING_ENV(0, "nnodes", &nn, "N", "nodes", "MU_T_NNODES"),
      MU_OPT_STRING_ENV(0, "rdzv-id", &id, "ID", "run", "MU_T_ID"),
      MU_OPT_BOOL_ENV(0, "standalone", &sa, "embedded", "MU_T_SA"),
      MU_OPT_BOOL_ENV('m', "module", &mod, "module", "MU_T_MOD"),
      {.type = MU_OPT_T_DOUBLE, .long_name = "timeout", .value = &t, .env = "MU_T_TIMEOUT"},
      MU_OPT_END(),
  };
  setenv("MU_T_NNODES", "2:4", 1);
  setenv("MU_T_ID", "", 1); /* empty: unset */
  setenv("MU_T_SA", "1", 1);
  setenv("MU_T_MOD", "0", 1); /* "0": false */
  char a0[] = "agent", a1[] = "--nnodes", a2[] = "3", a3[] = "x.py";
  char *argv[] = {a0, a1, a2, a3, NULL};
  ASSERT_EQ(mu_opts_parse(opts, 4, argv, MU_OPTS_STOP_AT_NONOPT, "muster agent [OPTIONS]"), 3);
  ASSERT_STR_EQ(nn, "3"); /* the command line wins */
  ASSERT_NULL(id);
  ASSERT_EQ(sa, 1);
  ASSERT_EQ(mod, 0);
  char *argv2[] = {a0, a3, NULL};
  ASSERT_EQ(mu_opts_parse(opts, 2, argv2, MU_OPTS_STOP_AT_NONOPT, "muster agent [OPTIONS]"), 1);
  ASSERT_STR_EQ(nn, "2:4"); /* then the variable */
  ASSERT(t == 5);
  setenv("MU_T_TIMEOUT", "soon", 1);
  ASSERT_EQ(mu_opts_parse(opts, 2, argv2, MU_OPTS_STOP_AT_NONOPT, "muster agent [OPTIONS]"),
            MU_EUSAGE);
  unsetenv("MU_T_TIMEOUT");
}

static int digit_first(const char *w)
{
  return w[0] >= '0' && w[0] <= '9';
}

/* A row whose value may be left out: `--tee` alone is its default; `--tee 2` and `--tee=2`
 * give one; a next word it does not accept is not its value (`--tee train.py`). */
TEST(opts__optional_value)
{
  const char *tee = NULL;
  struct mu_opt opts[] = {
      MU_OPT_STRING_OPTVAL('t', "tee", &tee, "N", "tee", NULL, "3", digit_first),
      MU_OPT_END(),
  };
  char a0[] = "agent", a1[] = "--tee", a2[] = "train.py", a3[] = "2", a4[] = "--tee=1",
       a5[] = "-t";
  char *argv[] = {a0, a1, a2, NULL};
  ASSERT_EQ(mu_opts_parse(opts, 3, argv, MU_OPTS_STOP_AT_NONOPT, "u"), 2);
  ASSERT_STR_EQ(tee, "3");
  char *argv2[] = {a0, a1, a3, a2, NULL};
  ASSERT_EQ(mu_opts_parse(opts, 4, argv2, MU_OPTS_STOP_AT_NONOPT, "u"), 3);
  ASSERT_STR_EQ(tee, "2");
  char *argv3[] = {a0, a4, a2, NULL};
  ASSERT_EQ(mu_opts_parse(opts, 3, argv3, MU_OPTS_STOP_AT_NONOPT, "u"), 2);
  ASSERT_STR_EQ(tee, "1");
  char *argv4[] = {a0, a5, NULL}; /* last word, short form */
  ASSERT_EQ(mu_opts_parse(opts, 2, argv4, MU_OPTS_STOP_AT_NONOPT, "u"), 2);
  ASSERT_STR_EQ(tee, "3");
}
