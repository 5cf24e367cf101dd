/* Declarative command-line options (as git's parse-options): a table of MU_OPT_* rows ending
 * with MU_OPT_END() parses argv and produces the -h text from the same rows.
 *
 *   const char *listen = "127.0.0.1:2379"; int verbose = 0;
 *   struct mu_opt opts[] = {
 *     MU_OPT_STRING(0, "listen", &listen, "ADDR", "address to listen on"),
 *     MU_OPT_BOOL('v', "verbose", &verbose, "say more"),
 *     MU_OPT_END(),
 *   };
 *   int n = mu_opts_parse(opts, argc, argv, MU_OPTS_STOP_AT_NONOPT, &usage);
 *
 * Long names match with '-' and '_' treated alike, so torchrun's `--nproc_per_node` finds
 * a row named "nproc-per-node". Values come as `--name VALUE` or `--name=VALUE`. A row may
 * also read an environment variable (torchrun's PET_* variables) and may have an optional
 * value (`--tee` alone is `--tee 3`).
 */
#ifndef MU_OPTS_H
#define MU_OPTS_H

#include <stdio.h>

enum mu_opt_type {
  MU_OPT_T_END = 0,
  MU_OPT_T_BOOL,     /* int *: set to 1 (no value) */
  MU_OPT_T_INT,      /* long *: decimal, range-checked */
  MU_OPT_T_DOUBLE,   /* double * */
  MU_OPT_T_STRING,   /* const char **: points into argv */
  MU_OPT_T_LIST,     /* struct mu_strvec *: repeatable, each value appended */
  MU_OPT_T_CALLBACK, /* mu_opt_cb: called with the value (NULL when the row takes none) */
  MU_OPT_T_UINT,     /* an unsigned integer of any width (unsigned, size_t, uint64_t): decimal,
                      * within [min, max], stored in the `size` bytes `value` points at */
};

struct mu_opt;
/* Returns: 0, or a negative code after printing an error with mu_error(). */
typedef int mu_opt_cb(const struct mu_opt *opt, const char *value);

enum mu_opt_flags {
  MU_OPT_NOARG = 1 << 0,       /* a callback row that takes no value */
  MU_OPT_HIDDEN = 1 << 1,      /* left out of -h */
  MU_OPT_SINGLE_DASH = 1 << 2, /* the long name also matches with one dash (TorchX's -cfg) */
};

/* Whether the next word is this row's value (MU_OPT_STRING_OPTVAL). Returns: nonzero if so. */
typedef int mu_opt_accepts_fn(const char *word);

struct mu_opt {
  enum mu_opt_type type;
  char short_name;       /* 0 for none */
  const char *long_name; /* NULL for none */
  void *value;
  const char *argh; /* the value's name in -h ("N", "ADDR") */
  const char *help;
  int flags;
  mu_opt_cb *cb;
  void *cb_data;
  long min, max;      /* MU_OPT_T_UINT: the accepted range (an error names it) */
  size_t size;        /* MU_OPT_T_UINT: sizeof the integer at `value` (4 or 8) */
  const char *env;    /* also read from this environment variable (non-empty) when the command
                       * line does not give the option; a bool is set unless it is "0" */
  const char *optval; /* the value may be left out: then it is this one */
  mu_opt_accepts_fn *accepts; /* with optval: whether the next word is the value (else only
                               * --name=VALUE gives one) */
};

#define MU_OPT_BOOL(s, l, v, h)                                                                    \
  {                                                                                                \
    .type = MU_OPT_T_BOOL, .short_name = (s), .long_name = (l), .value = (v), .help = (h)          \
  }
#define MU_OPT_INT(s, l, v, a, h)                                                                  \
  {                                                                                                \
    .type = MU_OPT_T_INT, .short_name = (s), .long_name = (l), .value = (v), .argh = (a),          \
    .help = (h)                                                                                    \
  }
#define MU_OPT_DOUBLE(s, l, v, a, h)                                                               \
  {                                                                                                \
    .type = MU_OPT_T_DOUBLE, .short_name = (s), .long_name = (l), .value = (v), .argh = (a),       \
    .help = (h)                                                                                    \
  }
#define MU_OPT_STRING(s, l, v, a, h)                                                               \
  {                                                                                                \
    .type = MU_OPT_T_STRING, .short_name = (s), .long_name = (l), .value = (v), .argh = (a),       \
    .help = (h)                                                                                    \
  }
/* A string row with flags (MU_OPT_SINGLE_DASH, MU_OPT_HIDDEN). */
#define MU_OPT_STRING_F(s, l, v, a, h, f)                                                          \
  {                                                                                                \
    .type = MU_OPT_T_STRING, .short_name = (s), .long_name = (l), .value = (v), .argh = (a),       \
    .help = (h), .flags = (f)                                                                      \
  }
/* Rows that also read an environment variable (torchrun's PET_NNODES for --nnodes): the
 * command line wins, then the variable, then the value the field had. */
#define MU_OPT_STRING_ENV(s, l, v, a, h, e)                                                        \
  {                                                                                                \
    .type = MU_OPT_T_STRING, .short_name = (s), .long_name = (l), .value = (v), .argh = (a),       \
    .help = (h), .env = (e)                                                                        \
  }
#define MU_OPT_BOOL_ENV(s, l, v, h, e)                                                             \
  {                                                                                                \
    .type = MU_OPT_T_BOOL, .short_name = (s), .long_name = (l), .value = (v), .help = (h),         \
    .env = (e)                                                                                     \
  }
/* A string row whose value may be left out (then it is `dflt`): `--tee=V`, or `--tee V` when
 * accepts(V) says V is one, else `--tee` alone. e (may be NULL) as MU_OPT_STRING_ENV. */
#define MU_OPT_STRING_OPTVAL(s, l, v, a, h, e, dflt, acc)                                          \
  {                                                                                                \
    .type = MU_OPT_T_STRING, .short_name = (s), .long_name = (l), .value = (v), .argh = (a),       \
    .help = (h), .env = (e), .optval = (dflt), .accepts = (acc)                                    \
  }
#define MU_OPT_LIST(s, l, v, a, h)                                                                 \
  {                                                                                                \
    .type = MU_OPT_T_LIST, .short_name = (s), .long_name = (l), .value = (v), .argh = (a),         \
    .help = (h)                                                                                    \
  }
#define MU_OPT_CALLBACK(s, l, a, h, f, data, fl)                                                   \
  {                                                                                                \
    .type = MU_OPT_T_CALLBACK, .short_name = (s), .long_name = (l), .argh = (a), .help = (h),      \
    .flags = (fl), .cb = (f), .cb_data = (data)                                                    \
  }
/* Binds an option straight to an unsigned config field, with a range check at parse time:
 * MU_OPT_UINT(0, "max-connections", &cfg.max_connections, "N", "...", 1, LONG_MAX). */
#define MU_OPT_UINT(s, l, v, a, h, lo, hi)                                                         \
  {                                                                                                \
    .type = MU_OPT_T_UINT, .short_name = (s), .long_name = (l), .value = (v), .argh = (a),         \
    .help = (h), .min = (lo), .max = (hi), .size = sizeof(*(v))                                    \
  }
#define MU_OPT_END()                                                                               \
  {                                                                                                \
    .type = MU_OPT_T_END                                                                           \
  }

enum mu_opts_parse_flags {
  MU_OPTS_STOP_AT_NONOPT = 1 << 0,  /* stop at the first non-option (else: error) */
  MU_OPTS_KEEP_DASHDASH = 1 << 1,   /* leave a `--` in place instead of skipping it */
  MU_OPTS_STOP_AT_UNKNOWN = 1 << 2, /* stop at an option not in the table, unless its name is
                                       close to a row's (a misspelling: still an error); the
                                       options of what follows (`muster run`'s component) */
};

/* Parses argv[1..] against the table: first the environment variables of the rows that name
 * one, then argv. `-h`/`--help` prints usage to stdout and returns MU_OPTS_HELP; errors name
 * the option (or the variable) and are printed with mu_error(), which points at `usage`'s
 * command ("see 'muster agent -h'"). Ownership: string values point into argv or environ.
 * Returns: the index of the first argument not consumed (>= 1), MU_OPTS_HELP, or
 * MU_EUSAGE after an error was printed. */
#define MU_OPTS_HELP (-1)
int mu_opts_parse(const struct mu_opt *opts, int argc, char **argv, int flags, const char *usage);

/* Whether option name `arg` (no dashes, no "=VALUE") is `want`, '-' and '_' alike. */
int mu_opt_name_eq(const char *want, const char *arg);

/* Prints "usage: <usage>\n\n" and one line per row. */
void mu_opts_usage(FILE *out, const struct mu_opt *opts, const char *usage);

/* Strict number parsing (no atoi): the whole string, in range, base 10.
 * Returns: 0, or MU_EINVAL. */
int mu_parse_long(const char *s, long min, long max, long *out);
int mu_parse_double(const char *s, double *out);

#endif
