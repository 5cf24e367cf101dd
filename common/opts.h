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
 * a row named "nproc-per-node". Values come as `--name VALUE` or `--name=VALUE`.
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
  long min, max; /* MU_OPT_T_UINT: the accepted range (an error names it) */
  size_t size;   /* MU_OPT_T_UINT: sizeof the integer at `value` (4 or 8) */
};

#define MU_OPT_BOOL(s, l, v, h)                                                                    \
  {                                                                                                \
    MU_OPT_T_BOOL, (s), (l), (v), NULL, (h), 0, NULL, NULL, 0, 0, 0                                \
  }
#define MU_OPT_INT(s, l, v, a, h)                                                                  \
  {                                                                                                \
    MU_OPT_T_INT, (s), (l), (v), (a), (h), 0, NULL, NULL, 0, 0, 0                                  \
  }
#define MU_OPT_DOUBLE(s, l, v, a, h)                                                               \
  {                                                                                                \
    MU_OPT_T_DOUBLE, (s), (l), (v), (a), (h), 0, NULL, NULL, 0, 0, 0                               \
  }
#define MU_OPT_STRING(s, l, v, a, h)                                                               \
  {                                                                                                \
    MU_OPT_T_STRING, (s), (l), (v), (a), (h), 0, NULL, NULL, 0, 0, 0                               \
  }
/* A string row with flags (MU_OPT_SINGLE_DASH, MU_OPT_HIDDEN). */
#define MU_OPT_STRING_F(s, l, v, a, h, f)                                                          \
  {                                                                                                \
    MU_OPT_T_STRING, (s), (l), (v), (a), (h), (f), NULL, NULL, 0, 0, 0                             \
  }
#define MU_OPT_LIST(s, l, v, a, h)                                                                 \
  {                                                                                                \
    MU_OPT_T_LIST, (s), (l), (v), (a), (h), 0, NULL, NULL, 0, 0, 0                                 \
  }
#define MU_OPT_CALLBACK(s, l, a, h, cb, data, flags)                                               \
  {                                                                                                \
    MU_OPT_T_CALLBACK, (s), (l), NULL, (a), (h), (flags), (cb), (data), 0, 0, 0                    \
  }
/* Binds an option straight to an unsigned config field, with a range check at parse time:
 * MU_OPT_UINT(0, "max-connections", &cfg.max_connections, "N", "...", 1, LONG_MAX). */
#define MU_OPT_UINT(s, l, v, a, h, lo, hi)                                                         \
  {                                                                                                \
    MU_OPT_T_UINT, (s), (l), (v), (a), (h), 0, NULL, NULL, (lo), (hi), sizeof(*(v))                \
  }
#define MU_OPT_END()                                                                               \
  {                                                                                                \
    MU_OPT_T_END, 0, NULL, NULL, NULL, NULL, 0, NULL, NULL, 0, 0, 0                                \
  }

enum mu_opts_parse_flags {
  MU_OPTS_STOP_AT_NONOPT = 1 << 0,  /* stop at the first non-option (else: error) */
  MU_OPTS_KEEP_DASHDASH = 1 << 1,   /* leave a `--` in place instead of skipping it */
  MU_OPTS_STOP_AT_UNKNOWN = 1 << 2, /* stop at an option not in the table, unless its name is
                                       close to a row's (a misspelling: still an error); the
                                       options of what follows (`muster run`'s component) */
};

/* Parses argv[1..] against the table. `-h`/`--help` prints usage to stdout and returns
 * MU_OPTS_HELP; errors name the option and are printed with mu_error().
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
