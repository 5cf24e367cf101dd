/* Table-driven option parsing and -h text. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "muster/errno.h"

#include "log.h"
#include "opts.h"
#include "strvec.h"
#include "suggest.h"

int mu_parse_long(const char *s, long min, long max, long *out)
{
  if (s == NULL || *s == '\0')
    return MU_EINVAL;
  char *end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < min || v > max)
    return MU_EINVAL;
  *out = v;
  return 0;
}

int mu_parse_double(const char *s, double *out)
{
  if (s == NULL || *s == '\0')
    return MU_EINVAL;
  char *end = NULL;
  errno = 0;
  double v = strtod(s, &end);
  if (errno != 0 || end == s || *end != '\0' || !isfinite(v))
    return MU_EINVAL;
  *out = v;
  return 0;
}

/* Compares an option name with '-' and '_' alike. n is the length of `arg`'s name part. */
static int name_eq(const char *want, const char *arg, size_t n)
{
  if (strlen(want) != n)
    return 0;
  for (size_t i = 0; i < n; i++) {
    char a = want[i] == '_' ? '-' : want[i];
    char b = arg[i] == '_' ? '-' : arg[i];
    if (a != b)
      return 0;
  }
  return 1;
}

int mu_opt_name_eq(const char *want, const char *arg)
{
  return name_eq(want, arg, strlen(arg));
}

static int takes_value(const struct mu_opt *o)
{
  if (o->type == MU_OPT_T_BOOL)
    return 0;
  if (o->type == MU_OPT_T_CALLBACK)
    return !(o->flags & MU_OPT_NOARG);
  return 1;
}

/* MU_OPT_T_UINT: the value in range, stored at the width of its field. */
static int set_uint(const struct mu_opt *o, const char *shown, const char *val)
{
  long l;
  if (mu_parse_long(val, LONG_MIN, LONG_MAX, &l) != 0) {
    mu_error("option '%s' expects an integer, got '%s'", shown, val);
    return MU_EUSAGE;
  }
  if (l < o->min) {
    mu_error("invalid --%s %ld: must be at least %ld", o->long_name, l, o->min);
    return MU_EUSAGE;
  }
  if (l > o->max) {
    mu_error("invalid --%s %ld: must be at most %ld", o->long_name, l, o->max);
    return MU_EUSAGE;
  }
  if (o->size == sizeof(uint32_t)) {
    uint32_t v = (uint32_t)l;
    memcpy(o->value, &v, sizeof(v));
  } else {
    uint64_t v = (uint64_t)l;
    memcpy(o->value, &v, sizeof(v));
  }
  return 0;
}

static int set_value(const struct mu_opt *o, const char *shown, const char *val)
{
  long l;
  double d;
  switch (o->type) {
  case MU_OPT_T_BOOL:
    *(int *)o->value = 1;
    return 0;
  case MU_OPT_T_INT:
    if (mu_parse_long(val, LONG_MIN, LONG_MAX, &l) != 0) {
      mu_error("option '%s' expects an integer, got '%s'", shown, val);
      return MU_EUSAGE;
    }
    *(long *)o->value = l;
    return 0;
  case MU_OPT_T_DOUBLE:
    if (mu_parse_double(val, &d) != 0) {
      mu_error("option '%s' expects a number, got '%s'", shown, val);
      return MU_EUSAGE;
    }
    *(double *)o->value = d;
    return 0;
  case MU_OPT_T_STRING:
    *(const char **)o->value = val;
    return 0;
  case MU_OPT_T_LIST:
    mu_strvec_push((struct mu_strvec *)o->value, val);
    return 0;
  case MU_OPT_T_CALLBACK:
    return o->cb(o, val) != 0 ? MU_EUSAGE : 0;
  case MU_OPT_T_UINT:
    return set_uint(o, shown, val);
  case MU_OPT_T_END:
    break;
  }
  return MU_EUSAGE;
}

static const struct mu_opt *closest(const struct mu_opt *opts, const char *name, size_t n)
{
  char buf[80];
  if (n >= sizeof(buf))
    return NULL;
  memcpy(buf, name, n);
  buf[n] = '\0';
  struct mu_suggest s;
  const struct mu_opt *o;
  mu_suggest_init(&s, buf);
  for (o = opts; o->type != MU_OPT_T_END; o++)
    if (!(o->flags & MU_OPT_HIDDEN))
      mu_suggest_add(&s, o->long_name);
  const char *best = mu_suggest_best(&s);
  for (o = opts; best != NULL && o->type != MU_OPT_T_END; o++)
    if (o->long_name == best)
      return o;
  return NULL;
}

/* The MU_OPT_SINGLE_DASH row whose long name is `name` (up to a '='); *val gets what follows
 * the '=', if any. Returns: the row, or NULL. */
static const struct mu_opt *single_dash(const struct mu_opt *opts, const char *name,
                                        const char **val)
{
  const char *eq = strchr(name, '=');
  size_t n = eq ? (size_t)(eq - name) : strlen(name);
  for (const struct mu_opt *o = opts; o->type != MU_OPT_T_END; o++) {
    if ((o->flags & MU_OPT_SINGLE_DASH) && o->long_name != NULL && name_eq(o->long_name, name, n)) {
      *val = eq ? eq + 1 : NULL;
      return takes_value(o) || eq == NULL ? o : NULL;
    }
  }
  return NULL;
}

/* The command messages point at: usage's first words up to an option or an argument ("muster
 * agent" of "muster agent [--standalone ..."), else argv[0]. */
static void command_name(const char *usage, const char *argv0, char *out, size_t n)
{
  size_t len = 0;
  for (const char *p = usage != NULL ? usage : ""; *p != '\0' && *p != '\n';) {
    size_t w = strcspn(p, " \n");
    int word = w > 0 && ((p[0] >= 'a' && p[0] <= 'z') || (p[0] >= '0' && p[0] <= '9'));
    for (size_t i = 0; word && i < w; i++)
      word = (p[i] >= 'a' && p[i] <= 'z') || (p[i] >= '0' && p[i] <= '9') || p[i] == '-' ||
             p[i] == '_' || p[i] == '.';
    if (!word)
      break;
    len = (size_t)(p + w - usage);
    p += w;
    while (*p == ' ')
      p++;
  }
  if (len > 0)
    snprintf(out, n, "%.*s", (int)len, usage);
  else
    snprintf(out, n, "%s", argv0);
}

/* The rows that read an environment variable, from it (non-empty). */
static int apply_env(const struct mu_opt *opts)
{
  for (const struct mu_opt *o = opts; o->type != MU_OPT_T_END; o++) {
    const char *v = o->env != NULL ? getenv(o->env) : NULL;
    if (v == NULL || *v == '\0')
      continue;
    if (o->type == MU_OPT_T_BOOL && strcmp(v, "0") == 0)
      continue;
    int rc = set_value(o, o->env, v);
    if (rc != 0)
      return rc;
  }
  return 0;
}

/* The row of "--name[=VALUE]" (*val: VALUE, or NULL). Returns: 0; 1 to stop here (unknown, with
 * MU_OPTS_STOP_AT_UNKNOWN); MU_EUSAGE after saying what is wrong. */
static int long_row(const struct mu_opt *opts, const char *arg, int flags, const char *cmd,
                    const struct mu_opt **hit, const char **val)
{
  const char *name = arg + 2, *eq = strchr(name, '=');
  size_t n = eq ? (size_t)(eq - name) : strlen(name);
  *hit = NULL;
  for (const struct mu_opt *o = opts; o->type != MU_OPT_T_END && *hit == NULL; o++)
    if (o->long_name != NULL && name_eq(o->long_name, name, n))
      *hit = o;
  if (*hit == NULL) {
    const struct mu_opt *c = closest(opts, name, n);
    if (c == NULL && (flags & MU_OPTS_STOP_AT_UNKNOWN))
      return 1;
    if (c != NULL)
      mu_error("unknown option '--%.*s'; did you mean '--%s'?", (int)n, name, c->long_name);
    else
      mu_error("unknown option '--%.*s'; see '%s -h'", (int)n, name, cmd);
    return MU_EUSAGE;
  }
  if (eq != NULL && !takes_value(*hit)) {
    mu_error("option '--%s' takes no value", (*hit)->long_name);
    return MU_EUSAGE;
  }
  *val = eq != NULL ? eq + 1 : NULL;
  return 0;
}

/* The row of "-x[VALUE]". Returns: as long_row(). */
static int short_row(const struct mu_opt *opts, const char *arg, int flags, const char *cmd,
                     const struct mu_opt **hit, const char **val)
{
  *hit = NULL;
  for (const struct mu_opt *o = opts; o->type != MU_OPT_T_END && *hit == NULL; o++)
    if (o->short_name != 0 && o->short_name == arg[1])
      *hit = o;
  if (*hit == NULL && (flags & MU_OPTS_STOP_AT_UNKNOWN))
    return 1;
  if (*hit == NULL) {
    mu_error("unknown option '%s'; see '%s -h'", arg, cmd);
    return MU_EUSAGE;
  }
  if (arg[2] != '\0' && !takes_value(*hit)) {
    mu_error("option '-%c' takes no value", arg[1]);
    return MU_EUSAGE;
  }
  *val = arg[2] != '\0' ? arg + 2 : NULL;
  return 0;
}

/* The value of a row that takes one and got none attached: its optional value, or the next
 * word (*i moves past it). Returns: 0, or MU_EUSAGE after saying so. */
static int next_value(const struct mu_opt *hit, const char *shown, int argc, char **argv, int *i,
                      const char **val)
{
  int next = *i + 1 < argc;
  if (hit->optval != NULL && !(next && hit->accepts != NULL && hit->accepts(argv[*i + 1]))) {
    *val = hit->optval;
    return 0;
  }
  if (!next) {
    mu_error("option '%s' needs a value (%s)", shown, hit->argh ? hit->argh : "VALUE");
    return MU_EUSAGE;
  }
  *val = argv[++*i];
  return 0;
}

int mu_opts_parse(const struct mu_opt *opts, int argc, char **argv, int flags, const char *usage)
{
  char cmd[96], canon[96];
  command_name(usage, argc > 0 ? argv[0] : "", cmd, sizeof(cmd));
  int i = 1, rc = apply_env(opts);
  for (; i < argc && rc == 0; i++) {
    const char *arg = argv[i], *val = NULL, *shown = arg; /* shown: as messages name it */
    const struct mu_opt *hit = NULL;
    if (strcmp(arg, "--") == 0)
      return (flags & MU_OPTS_KEEP_DASHDASH) ? i : i + 1;
    if (arg[0] != '-' || arg[1] == '\0') {
      if (flags & MU_OPTS_STOP_AT_NONOPT)
        return i;
      mu_error("unexpected argument '%s'; see '%s -h'", arg, cmd);
      return MU_EUSAGE;
    }
    if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
      mu_opts_usage(stdout, opts, usage);
      return MU_OPTS_HELP;
    }
    if (arg[1] == '-') {
      rc = long_row(opts, arg, flags, cmd, &hit, &val);
    } else if ((hit = single_dash(opts, arg + 1, &val)) != NULL) {
      snprintf(canon, sizeof(canon), "--%s", hit->long_name); /* -cfg K=V is --cfg K=V */
      shown = canon;
    } else {
      rc = short_row(opts, arg, flags, cmd, &hit, &val);
    }
    if (rc == 1)
      return i; /* an option of what follows */
    if (rc == 0 && takes_value(hit) && val == NULL)
      rc = next_value(hit, shown, argc, argv, &i, &val);
    if (rc == 0)
      rc = set_value(hit, shown, val);
  }
  return rc != 0 ? rc : i;
}

void mu_opts_usage(FILE *out, const struct mu_opt *opts, const char *usage)
{
  fprintf(out, "usage: %s\n\n", usage);
  for (const struct mu_opt *o = opts; o->type != MU_OPT_T_END; o++) {
    if (o->flags & MU_OPT_HIDDEN)
      continue;
    char left[96];
    int n = 0;
    if (o->short_name && o->long_name)
      n = snprintf(left, sizeof(left), "-%c, --%s", o->short_name, o->long_name);
    else if (o->short_name)
      n = snprintf(left, sizeof(left), "-%c", o->short_name);
    else
      n = snprintf(left, sizeof(left), "    --%s", o->long_name);
    if (takes_value(o) && n > 0 && (size_t)n < sizeof(left))
      snprintf(left + n, sizeof(left) - (size_t)n, " %s", o->argh ? o->argh : "VALUE");
    fprintf(out, "    %-30s %s\n", left, o->help ? o->help : "");
  }
  fprintf(out, "    %-30s %s\n", "-h, --help", "show this help");
}
