/* The component template language: ${param} references with filters and ?? fallbacks in strings,
 * {if: COND, then: X, else: Y} conditionals, {sum: [...]} of integers, and lists that splice
 * (docs/components.md). The
 * template is evaluated with the parameter values into a plain tree of strings, lists and maps;
 * ${...} that names no parameter is a scheduler macro (${app_id}, ${rdzv_endpoint}) and stays.
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "muster/errno.h"

#include "alloc.h"
#include "component_impl.h"
#include "opts.h"

#define EVAL_MAX_DEPTH 32

struct eval {
  const struct mu_component *c;
  cJSON **values;
  struct mu_buf *err;
  const char *path; /* where in the template, for messages */
  cJSON *scratch;   /* an array owning values made while evaluating (split lists) */
};

static const cJSON *lookup_ref(const struct eval *ev, const char *ref, size_t n, int *known)
{
  char name[128];
  if (n >= sizeof(name)) {
    *known = 0;
    return NULL;
  }
  memcpy(name, ref, n);
  name[n] = '\0';
  char *dot = strchr(name, '.');
  if (dot != NULL)
    *dot = '\0';
  const struct mu_param *p = NULL;
  for (size_t i = 0; i < ev->c->nparams; i++)
    if (strcmp(ev->c->params[i].name, name) == 0)
      p = &ev->c->params[i];
  *known = p != NULL;
  if (p == NULL)
    return NULL;
  const cJSON *v = ev->values[mu_param_index(ev->c, p)];
  if (dot == NULL || v == NULL)
    return v;
  const char *field = dot + 1;
  if (cJSON_IsObject(v))
    return cJSON_GetObjectItemCaseSensitive(v, field);
  return NULL;
}

void mu_component_value_text(const cJSON *v, struct mu_buf *out)
{
  if (v == NULL || cJSON_IsNull(v))
    return;
  if (cJSON_IsString(v))
    mu_buf_puts(out, v->valuestring);
  else if (cJSON_IsNumber(v) && v->valuedouble == (double)(long)v->valuedouble)
    mu_buf_printf(out, "%ld", (long)v->valuedouble);
  else if (cJSON_IsNumber(v)) /* a float parameter */
    mu_buf_printf(out, "%.15g", v->valuedouble);
  else if (cJSON_IsBool(v))
    mu_buf_puts(out, cJSON_IsTrue(v) ? "true" : "false");
  else if (cJSON_IsArray(v)) {
    const cJSON *it;
    int first = 1;
    cJSON_ArrayForEach(it, v)
    {
      if (!first)
        mu_buf_putc(out, ',');
      first = 0;
      mu_component_value_text(it, out);
    }
  }
}

int mu_component_is_truthy(const cJSON *v)
{
  if (v == NULL || cJSON_IsNull(v) || cJSON_IsFalse(v))
    return 0;
  if (cJSON_IsString(v))
    return v->valuestring[0] != '\0';
  if (cJSON_IsNumber(v))
    return v->valuedouble != 0;
  if (cJSON_IsArray(v) || cJSON_IsObject(v))
    return cJSON_GetArraySize(v) > 0;
  return 1;
}

/* ---------------------------------------------------------------------------------------------
 * Filters: ${param|filter|...}
 */

/* A text filter: the value's text in, the new text appended to out. */
typedef void text_filter_fn(const char *in, struct mu_buf *out);

/* The part after the last '/'. */
static const char *base_of(const char *s)
{
  const char *slash = strrchr(s, '/');
  return slash ? slash + 1 : s;
}

static void f_basename(const char *in, struct mu_buf *out)
{
  mu_buf_puts(out, base_of(in));
}

static void f_stem(const char *in, struct mu_buf *out)
{
  const char *base = base_of(in);
  const char *dot = strrchr(base, '.');
  mu_buf_append(out, base, dot != NULL && dot != base ? (size_t)(dot - base) : strlen(base));
}

static void f_dirname(const char *in, struct mu_buf *out)
{
  const char *slash = strrchr(in, '/');
  if (slash != NULL)
    mu_buf_append(out, in, (size_t)(slash - in));
}

static void f_ext(const char *in, struct mu_buf *out)
{
  const char *base = base_of(in);
  const char *dot = strrchr(base, '.');
  mu_buf_puts(out, dot && dot != base ? dot : "");
}

static void f_lastdot(const char *in, struct mu_buf *out)
{
  const char *dot = strrchr(in, '.');
  mu_buf_puts(out, dot ? dot + 1 : in);
}

static void f_quote(const char *in, struct mu_buf *out)
{
  mu_shell_quote(in, out);
}

static void f_lower(const char *in, struct mu_buf *out)
{
  for (const char *p = in; *p; p++)
    mu_buf_putc(out, (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p));
}

/* join and qjoin on a value that is not a list leave its text as it is. */
static void f_same(const char *in, struct mu_buf *out)
{
  mu_buf_puts(out, in);
}

enum filter_kind {
  FILTER_TEXT,  /* text in, text out */
  FILTER_JOIN,  /* a list's items joined by ' ' */
  FILTER_QJOIN, /* the same, each item shell-quoted */
  FILTER_SPLIT, /* text split into words as a shell would: a list for join or qjoin */
};

/* The filters of ${param|filter|...}, in the order the unknown-filter message lists them. */
static const struct filter {
  const char *name;
  enum filter_kind kind;
  text_filter_fn *text; /* what the filter does to text (NULL for split) */
} filters[] = {
    {"stem", FILTER_TEXT, f_stem},       {"basename", FILTER_TEXT, f_basename},
    {"dirname", FILTER_TEXT, f_dirname}, {"ext", FILTER_TEXT, f_ext},
    {"lastdot", FILTER_TEXT, f_lastdot}, {"quote", FILTER_TEXT, f_quote},
    {"lower", FILTER_TEXT, f_lower},     {"join", FILTER_JOIN, f_same},
    {"qjoin", FILTER_QJOIN, f_same},     {"split", FILTER_SPLIT, NULL},
};
#define NFILTERS (sizeof(filters) / sizeof(filters[0]))

static const struct filter *find_filter(const char *f, size_t n)
{
  for (size_t i = 0; i < NFILTERS; i++)
    if (strlen(filters[i].name) == n && strncmp(filters[i].name, f, n) == 0)
      return &filters[i];
  return NULL;
}

/* "stem, basename, ... or split", from the table. */
static void filter_names(struct mu_buf *out)
{
  for (size_t i = 0; i < NFILTERS; i++)
    mu_buf_printf(out, "%s%s", i == 0 ? "" : i + 1 == NFILTERS ? " or " : ", ", filters[i].name);
}

/* Replaces out's text with what f makes of it. */
static void apply_text(const struct filter *f, struct mu_buf *out)
{
  char *in = mu_buf_detach(out);
  f->text(in, out);
  mu_free(in);
}

/* Replaces out with the items of list joined by ' ', each shell-quoted with quote. */
static void join_words(const cJSON *list, int quote, struct mu_buf *out)
{
  struct mu_buf word = MU_BUF_INIT(SIZE_MAX);
  const cJSON *it;
  mu_buf_clear(out);
  cJSON_ArrayForEach(it, list)
  {
    if (it != list->child)
      mu_buf_putc(out, ' ');
    mu_buf_clear(&word);
    mu_component_value_text(it, &word);
    if (quote)
      mu_shell_quote(mu_buf_str(&word), out);
    else
      mu_buf_puts(out, mu_buf_str(&word));
  }
  mu_buf_release(&word);
}

/* Splits s into words as a POSIX shell does a literal line (no expansions), as Python's
 * shlex.split: blanks separate words; '...' is literal; in "..." a backslash escapes only
 * $ ` " \ and newline; elsewhere a backslash escapes the next character (a backslash-newline
 * vanishes); '' is an empty word. Appends the words to arr. Returns: 0; MU_EINVAL with *why
 * set for an unterminated quote or a trailing backslash. */
static int shell_split(const char *s, cJSON *arr, const char **why)
{
  struct mu_buf w = MU_BUF_INIT(SIZE_MAX);
  int in_word = 0, rc = 0;
  for (const char *p = s;; p++) {
    char ch = *p;
    if (ch == '\0' || ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r') {
      if (in_word)
        cJSON_AddItemToArray(arr, cJSON_CreateString(mu_buf_str(&w)));
      mu_buf_clear(&w);
      in_word = 0;
      if (ch == '\0')
        break;
      continue;
    }
    in_word = 1;
    if (ch == '\'') {
      const char *close = strchr(p + 1, '\'');
      if (close == NULL) {
        *why = "an unterminated ' quote";
        rc = MU_EINVAL;
        break;
      }
      mu_buf_append(&w, p + 1, (size_t)(close - p - 1));
      p = close;
    } else if (ch == '"') {
      for (p++; *p != '"'; p++) {
        if (*p == '\0')
          break;
        if (*p == '\\' && p[1] != '\0' && strchr("$`\"\\\n", p[1]) != NULL) {
          p++;
          if (*p != '\n')
            mu_buf_putc(&w, *p);
          continue;
        }
        mu_buf_putc(&w, *p);
      }
      if (*p == '\0') {
        *why = "an unterminated \" quote";
        rc = MU_EINVAL;
        break;
      }
    } else if (ch == '\\') {
      if (p[1] == '\0') {
        *why = "a trailing backslash";
        rc = MU_EINVAL;
        break;
      }
      p++;
      if (*p != '\n')
        mu_buf_putc(&w, *p);
      else if (w.len == 0)
        in_word = 0; /* a line continuation between words */
    } else {
      mu_buf_putc(&w, ch);
    }
  }
  mu_buf_release(&w);
  return rc;
}

/* ---------------------------------------------------------------------------------------------
 * Expressions: alternatives, fallbacks, interpolation, conditions
 */

/* Evaluates one alternative "ref|f1|f2" or "'literal'". *known = 0 when ref is no param (a
 * scheduler macro such as ${app_id}), -1 after an error in ev->err. Returns the value as text in
 * out and its truthiness; *raw gets the value itself while no filter changed it. */
static int eval_alt(const struct eval *ev, const char *s, size_t n, struct mu_buf *out, int *known,
                    const cJSON **raw)
{
  while (n > 0 && *s == ' ')
    s++, n--;
  while (n > 0 && s[n - 1] == ' ')
    n--;
  *raw = NULL;
  if (n >= 2 && (s[0] == '\'' || s[0] == '"') && s[n - 1] == s[0]) {
    *known = 1;
    mu_buf_append(out, s + 1, n - 2);
    return n > 2;
  }
  size_t rl = 0;
  while (rl < n && s[rl] != '|')
    rl++;
  size_t rl_trim = rl;
  while (rl_trim > 0 && s[rl_trim - 1] == ' ')
    rl_trim--;
  const cJSON *v = lookup_ref(ev, s, rl_trim, known);
  if (!*known)
    return 0;
  *raw = v;
  mu_component_value_text(v, out);
  const cJSON *list = cJSON_IsArray(v) ? v : NULL; /* what a join or qjoin would join */
  int split = 0;                                   /* list came from split: join must follow */
  for (size_t p = rl; p < n;) {
    size_t a = ++p; /* past the '|' */
    while (p < n && s[p] != '|')
      p++;
    size_t b = p;
    while (a < b && s[a] == ' ')
      a++;
    while (b > a && s[b - 1] == ' ')
      b--;
    const struct filter *f = find_filter(s + a, b - a);
    if (f == NULL) {
      mu_buf_printf(ev->err, "%s: %s: '${%.*s}': unknown filter '%.*s'; use ", ev->c->where,
                    ev->path, (int)n, s, (int)(b - a), s + a);
      filter_names(ev->err);
      *known = -1;
      return 0;
    }
    if (split && f->kind != FILTER_JOIN && f->kind != FILTER_QJOIN) {
      mu_buf_printf(ev->err,
                    "%s: %s: '${%.*s}': 'split' makes a list; only join or qjoin may follow it",
                    ev->c->where, ev->path, (int)n, s);
      *known = -1;
      return 0;
    }
    *raw = NULL;
    if ((f->kind == FILTER_JOIN || f->kind == FILTER_QJOIN) && list != NULL) {
      join_words(list, f->kind == FILTER_QJOIN, out);
    } else if (f->kind == FILTER_SPLIT) {
      const char *why = NULL;
      cJSON *arr = cJSON_CreateArray();
      if (shell_split(mu_buf_str(out), arr, &why) != 0) {
        mu_buf_printf(ev->err,
                      "%s: argument '--%.*s': cannot split '%s' into arguments: %s; close the "
                      "quote or escape the character with a backslash",
                      ev->c->name, (int)rl_trim, s, mu_buf_str(out), why);
        cJSON_Delete(arr);
        *known = -1;
        return 0;
      }
      cJSON_AddItemToArray(ev->scratch, arr);
      mu_buf_clear(out);
      mu_component_value_text(arr, out);
      *raw = list = arr;
      split = 1;
      continue;
    } else {
      apply_text(f, out);
    }
    list = NULL;
    split = 0;
  }
  return out->len > 0 && (*raw == NULL || mu_component_is_truthy(*raw));
}

/* Evaluates "a ?? b ?? 'lit'": the first truthy alternative. *known = 0 if the expression is a
 * macro left for the scheduler. raw gets the untransformed value of a plain ref (for splicing
 * lists and maps). */
static int eval_expr(const struct eval *ev, const char *s, size_t n, struct mu_buf *out, int *known,
                     const cJSON **raw)
{
  *raw = NULL;
  *known = 1;
  const char *p = s;
  const char *end = s + n;
  while (p < end) {
    const char *q = p;
    while (q + 1 < end && !(q[0] == '?' && q[1] == '?'))
      q++;
    if (q + 1 >= end)
      q = end;
    struct mu_buf tmp = MU_BUF_INIT(SIZE_MAX);
    int k = 1;
    const cJSON *r = NULL;
    int t = eval_alt(ev, p, (size_t)(q - p), &tmp, &k, &r);
    if (k < 0) {
      mu_buf_release(&tmp);
      *known = -1;
      return 0;
    }
    if (!k) {
      mu_buf_release(&tmp);
      if (p == s && q == end) {
        *known = 0;
        return 0;
      }
      mu_buf_printf(ev->err, "%s: '${%.*s}': '%.*s' is not a parameter of %s", ev->path, (int)n, s,
                    (int)(q - p), p, ev->c->name);
      *known = -1;
      return 0;
    }
    if (t || q == end) {
      mu_buf_append(out, mu_buf_str(&tmp), tmp.len);
      mu_buf_release(&tmp);
      *raw = r;
      return t;
    }
    mu_buf_release(&tmp);
    p = q + 2;
  }
  return 0;
}

/* The scheduler macros (mu_macros_apply(), docs/components.md): the only ${...} that may name
 * no parameter. */
static const char *const scheduler_macros[] = {
    "app_id",       "replica_id",    "img_root",      "rank0_env",
    "num_replicas", "rdzv_endpoint", "c10d_endpoint", NULL};

/* A ${ref} that is no parameter must be a scheduler macro: else an error naming it with the
 * closest parameter or macro. Returns: 0, or MU_EINVAL with the message in ev->err. */
static int unknown_macro(const struct eval *ev, const char *ref, size_t n)
{
  char name[128];
  snprintf(name, sizeof(name), "%.*s", (int)n, ref);
  for (size_t i = 0; scheduler_macros[i] != NULL; i++)
    if (strcmp(scheduler_macros[i], name) == 0)
      return 0;
  const char *words[160];
  size_t nw = 0;
  for (size_t i = 0; i < ev->c->nparams && nw + 8 < sizeof(words) / sizeof(words[0]); i++)
    words[nw++] = ev->c->params[i].name;
  for (size_t i = 0; scheduler_macros[i] != NULL; i++)
    words[nw++] = scheduler_macros[i];
  words[nw] = NULL;
  const char *best = mu_component_closest(words, name);
  mu_buf_printf(ev->err, "%s: %s: '${%s}' is neither a parameter of %s nor a scheduler macro",
                ev->c->where, ev->path, name, ev->c->name);
  if (best != NULL)
    mu_buf_printf(ev->err, "; did you mean '${%s}'?", best);
  else
    mu_buf_puts(ev->err, " (app_id, replica_id, img_root, rank0_env, num_replicas, "
                         "rdzv_endpoint, c10d_endpoint); write $${ for a literal ${");
  return MU_EINVAL;
}

/* Interpolates a template string. If the whole string is one ${ref} to a list or map param,
 * *splice gets that value. Returns: 0, or MU_EINVAL. */
static int interpolate(const struct eval *ev, const char *s, struct mu_buf *out,
                       const cJSON **splice)
{
  *splice = NULL;
  const char *p = s;
  while (*p) {
    if (p[0] == '$' && p[1] == '$') {
      mu_buf_puts(out, "$$");
      p += 2;
      continue;
    }
    if (p[0] == '$' && p[1] == '{') {
      const char *close = strchr(p + 2, '}');
      if (close == NULL) {
        mu_buf_printf(ev->err, "%s: unterminated '${' in '%s'", ev->path, s);
        return MU_EINVAL;
      }
      int known;
      const cJSON *raw;
      size_t before = out->len;
      eval_expr(ev, p + 2, (size_t)(close - p - 2), out, &known, &raw);
      if (known < 0)
        return MU_EINVAL;
      if (!known && unknown_macro(ev, p + 2, (size_t)(close - p - 2)) != 0)
        return MU_EINVAL;
      if (!known)
        mu_buf_append(out, p, (size_t)(close - p + 1)); /* a scheduler macro */
      if (known && p == s && close[1] == '\0' && before == 0 &&
          (cJSON_IsArray(raw) || cJSON_IsObject(raw)))
        *splice = raw;
      p = close + 1;
      continue;
    }
    mu_buf_putc(out, *p++);
  }
  return 0;
}

/* The comparison operators, longest first: "a OP b". */
static const char *const cmp_ops[] = {"==", "!=", "<=", ">=", "<", ">", NULL};

/* The first comparison operator in cond (its index in cmp_ops in *which), or NULL. */
static const char *find_cmp(const char *cond, size_t *which)
{
  for (const char *p = cond; *p; p++) {
    for (size_t i = 0; cmp_ops[i] != NULL; i++) {
      if (strncmp(p, cmp_ops[i], strlen(cmp_ops[i])) == 0) {
        *which = i;
        return p;
      }
    }
  }
  return NULL;
}

/* The right side of a comparison: an expression, or a bare word taken as a literal
 * (`launcher == torchrun`, `nnodes > 1`). Returns: eval_expr's *known. */
static int cmp_side(const struct eval *ev, const char *s, size_t n, struct mu_buf *out)
{
  const cJSON *raw;
  int known;
  eval_expr(ev, s, n, out, &known, &raw);
  if (known != 0)
    return known;
  while (n > 0 && *s == ' ')
    s++, n--;
  while (n > 0 && s[n - 1] == ' ')
    n--;
  mu_buf_clear(out);
  mu_buf_append(out, s, n);
  return 1;
}

/* Orders two texts as integers: -1, 0 or 1 in *order. Returns: 0; 1 when a side is empty (an
 * unset value: the comparison is false); MU_EINVAL when a side is no integer. */
static int cmp_numbers(const struct eval *ev, const char *cond, const char *a, const char *b,
                       int *order)
{
  long x, y;
  if (a[0] == '\0' || b[0] == '\0')
    return 1;
  int bad_a = mu_parse_long(a, LONG_MIN, LONG_MAX, &x) != 0;
  if (bad_a || mu_parse_long(b, LONG_MIN, LONG_MAX, &y) != 0) {
    mu_buf_printf(ev->err, "%s: condition '%s': '%s' is not a number", ev->path, cond,
                  bad_a ? a : b);
    return MU_EINVAL;
  }
  *order = x < y ? -1 : x > y;
  return 0;
}

/* "a OP b" with OP one of cmp_ops (at op). */
static int eval_cmp(const struct eval *ev, const char *cond, const char *op, size_t which,
                    int *result)
{
  struct mu_buf a = MU_BUF_INIT(SIZE_MAX), b = MU_BUF_INIT(SIZE_MAX);
  const cJSON *raw;
  int ka, kb, rc = 0, order = 0;
  eval_expr(ev, cond, (size_t)(op - cond), &a, &ka, &raw);
  const char *rhs = op + strlen(cmp_ops[which]);
  kb = cmp_side(ev, rhs, strlen(rhs), &b);
  if (ka != 1 || kb != 1) {
    if (ka == 0 || kb == 0)
      mu_buf_printf(ev->err, "%s: condition '%s' refers to something that is not a parameter",
                    ev->path, cond);
    rc = MU_EINVAL;
  } else if (which < 2) {
    int eq = strcmp(mu_buf_str(&a), mu_buf_str(&b)) == 0;
    *result = which == 1 ? !eq : eq;
  } else {
    rc = cmp_numbers(ev, cond, mu_buf_str(&a), mu_buf_str(&b), &order);
    *result = rc == 0 && (which == 2   ? order <= 0
                          : which == 3 ? order >= 0
                          : which == 4 ? order < 0
                                       : order > 0);
    rc = rc == 1 ? 0 : rc;
  }
  mu_buf_release(&a);
  mu_buf_release(&b);
  return rc;
}

/* One condition without &&: a comparison, or a value's truthiness (`debug`, `!quiet`). */
static int eval_term(const struct eval *ev, const char *cond, int *result)
{
  size_t which = 0;
  const char *op = find_cmp(cond, &which);
  if (op != NULL)
    return eval_cmp(ev, cond, op, which, result);
  int neg = 0, known;
  const cJSON *raw;
  while (*cond == ' ')
    cond++;
  if (*cond == '!') {
    neg = 1;
    cond++;
  }
  struct mu_buf a = MU_BUF_INIT(SIZE_MAX);
  int t = eval_expr(ev, cond, strlen(cond), &a, &known, &raw);
  mu_buf_release(&a);
  if (known != 1) {
    if (known == 0)
      mu_buf_printf(ev->err, "%s: condition '%s' is not a parameter of %s", ev->path, cond,
                    ev->c->name);
    return MU_EINVAL;
  }
  *result = neg ? !t : t;
  return 0;
}

/* A condition: terms joined by && (each term is checked, so a typo is an error whatever the
 * values). */
static int eval_cond(const struct eval *ev, const char *cond, int *result)
{
  const char *amp = strstr(cond, "&&");
  if (amp == NULL)
    return eval_term(ev, cond, result);
  char *left = mu_strndup(cond, (size_t)(amp - cond));
  int r1 = 0, r2 = 0;
  int rc = eval_term(ev, left, &r1);
  mu_free(left);
  if (rc == 0)
    rc = eval_cond(ev, amp + 2, &r2);
  *result = r1 && r2;
  return rc;
}

int mu_component_cond(const struct mu_component *c, cJSON **values, const char *where,
                      const char *cond, int *result, struct mu_buf *err)
{
  cJSON *scratch = cJSON_CreateArray();
  struct eval ev = {c, values, err, where, scratch};
  int rc = eval_cond(&ev, cond, result);
  cJSON_Delete(scratch);
  return rc;
}

/* ---------------------------------------------------------------------------------------------
 * Nodes
 */

static cJSON *eval_node(const struct eval *ev, const cJSON *t, int depth);

/* Evaluates a conditional mapping {if: COND, then: X, else: Y}; NULL result with no error
 * means "nothing" (no else). */
static int eval_if(const struct eval *ev, const cJSON *t, int depth, cJSON **out)
{
  static const char *const keys[] = {"if", "then", "else", NULL};
  *out = NULL;
  if (mu_component_check_keys(t, keys, ev->c->where, ev->path, ev->err) != 0)
    return MU_EINVAL;
  const char *cond = mu_component_str(t, "if");
  if (cond == NULL) {
    mu_buf_printf(ev->err, "%s: %s: 'if' must be a condition string", ev->c->where, ev->path);
    return MU_EINVAL;
  }
  int r = 0;
  if (eval_cond(ev, cond, &r) != 0)
    return MU_EINVAL;
  const cJSON *branch = cJSON_GetObjectItemCaseSensitive(t, r ? "then" : "else");
  if (branch == NULL)
    return 0;
  *out = eval_node(ev, branch, depth + 1);
  return *out == NULL ? MU_EINVAL : 0;
}

static int is_if(const cJSON *t)
{
  return cJSON_IsObject(t) && cJSON_GetObjectItemCaseSensitive(t, "if") != NULL;
}

static int is_sum(const cJSON *t)
{
  return cJSON_IsObject(t) && cJSON_GetObjectItemCaseSensitive(t, "sum") != NULL;
}

/* Evaluates {sum: [A, B, ...]}: each item an integer (after interpolation; empty counts 0),
 * the sum as text (num_replicas: {sum: ["${nnodes}", "${spares}"]}). Returns: NULL after
 * writing err. */
static cJSON *eval_sum(const struct eval *ev, const cJSON *t, int depth)
{
  static const char *const keys[] = {"sum", NULL};
  if (mu_component_check_keys(t, keys, ev->c->where, ev->path, ev->err) != 0)
    return NULL;
  const cJSON *items = cJSON_GetObjectItemCaseSensitive(t, "sum");
  if (!cJSON_IsArray(items)) {
    mu_buf_printf(ev->err, "%s: %s: 'sum' must be a list of integers", ev->c->where, ev->path);
    return NULL;
  }
  cJSON *v = eval_node(ev, items, depth + 1);
  long total = 0;
  const cJSON *it;
  cJSON_ArrayForEach(it, v)
  {
    struct mu_buf b = MU_BUF_INIT(SIZE_MAX);
    long n = 0;
    mu_component_value_text(it, &b);
    int bad = b.len > 0 && (mu_parse_long(mu_buf_str(&b), -(1L << 40), 1L << 40, &n) != 0);
    if (bad)
      mu_buf_printf(ev->err, "%s: %s: 'sum' of '%s', which is not an integer", ev->c->where,
                    ev->path, mu_buf_str(&b));
    mu_buf_release(&b);
    if (bad) {
      cJSON_Delete(v);
      return NULL;
    }
    total += n;
  }
  cJSON_Delete(v);
  char text[32];
  snprintf(text, sizeof(text), "%ld", total);
  return cJSON_CreateString(text);
}

/* Returns a new tree, or NULL after writing err. Lists splice: an item that evaluates to a
 * list (a conditional's branch, or "${list_param}") contributes its items. */
static cJSON *eval_node(const struct eval *ev, const cJSON *t, int depth)
{
  if (depth > EVAL_MAX_DEPTH) {
    mu_buf_printf(ev->err, "%s: template nested too deeply", ev->path);
    return NULL;
  }
  if (cJSON_IsString(t)) {
    struct mu_buf b = MU_BUF_INIT(SIZE_MAX);
    const cJSON *splice = NULL;
    if (interpolate(ev, t->valuestring, &b, &splice) != 0) {
      mu_buf_release(&b);
      return NULL;
    }
    if (splice != NULL) {
      mu_buf_release(&b);
      return cJSON_Duplicate(splice, 1);
    }
    cJSON *s = cJSON_CreateString(mu_buf_str(&b));
    mu_buf_release(&b);
    return s;
  }
  if (cJSON_IsArray(t)) {
    cJSON *a = cJSON_CreateArray();
    const cJSON *it;
    cJSON_ArrayForEach(it, t)
    {
      cJSON *v = NULL;
      if (is_if(it)) {
        if (eval_if(ev, it, depth, &v) != 0) {
          cJSON_Delete(a);
          return NULL;
        }
        if (v == NULL)
          continue;
      } else {
        v = eval_node(ev, it, depth + 1);
        if (v == NULL) {
          cJSON_Delete(a);
          return NULL;
        }
      }
      if (cJSON_IsArray(v)) {
        cJSON *x;
        while ((x = cJSON_DetachItemFromArray(v, 0)) != NULL)
          cJSON_AddItemToArray(a, x);
        cJSON_Delete(v);
      } else {
        cJSON_AddItemToArray(a, v);
      }
    }
    return a;
  }
  if (cJSON_IsObject(t)) {
    if (is_if(t)) {
      cJSON *v = NULL;
      if (eval_if(ev, t, depth, &v) != 0)
        return NULL;
      return v ? v : cJSON_CreateNull();
    }
    if (is_sum(t))
      return eval_sum(ev, t, depth);
    cJSON *o = cJSON_CreateObject();
    const cJSON *it;
    cJSON_ArrayForEach(it, t)
    {
      cJSON *v = eval_node(ev, it, depth + 1);
      if (v == NULL) {
        cJSON_Delete(o);
        return NULL;
      }
      cJSON_AddItemToObject(o, it->string, v);
    }
    return o;
  }
  return cJSON_Duplicate(t, 1);
}

cJSON *mu_component_eval(const struct mu_component *c, cJSON **values, struct mu_buf *err)
{
  cJSON *scratch = cJSON_CreateArray();
  struct eval ev = {c, values, err, "app", scratch};
  cJSON *tree = eval_node(&ev, c->app, 0);
  cJSON_Delete(scratch);
  return tree;
}
