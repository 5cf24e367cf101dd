/* Component arguments: the command line, the [component:NAME] defaults of the config files and
 * the file's own defaults become one typed value per parameter (see component_impl.h), then the
 * file's checks run on them. TorchX's spellings hold: `--name value`, `--name=value`, `-j 2x8`,
 * a bool alone or followed by True/False, '-' and '_' alike in names, script arguments after
 * `--` for the remainder parameter.
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>

#include "muster/errno.h"

#include "alloc.h"
#include "component_impl.h"
#include "json.h"
#include "opts.h"
#include "suggest.h"

/* ---------------------------------------------------------------------------------------------
 * Values: one argument's text into its typed value
 */

int mu_parse_jobsize(const char *s, long *min_nodes, long *max_nodes, long *nproc)
{
  const char *x = strchr(s, 'x');
  if (x == NULL) {
    *min_nodes = *max_nodes = 1;
    return mu_parse_long(s, 1, 1 << 20, nproc);
  }
  if (strchr(x + 1, ':') != NULL || x == s)
    return MU_EINVAL;
  char nodes[64];
  size_t nl = (size_t)(x - s);
  if (nl >= sizeof(nodes))
    return MU_EINVAL;
  memcpy(nodes, s, nl);
  nodes[nl] = '\0';
  if (mu_parse_long(x + 1, 1, 1 << 20, nproc) != 0)
    return MU_EINVAL;
  char *colon = strchr(nodes, ':');
  if (colon == NULL) {
    if (mu_parse_long(nodes, 1, 1 << 20, max_nodes) != 0)
      return MU_EINVAL;
    *min_nodes = *max_nodes;
    return 0;
  }
  *colon = '\0';
  if (mu_parse_long(nodes, 1, 1 << 20, min_nodes) != 0 ||
      mu_parse_long(colon + 1, 1, 1 << 20, max_nodes) != 0 || *min_nodes > *max_nodes)
    return MU_EINVAL;
  return 0;
}

static cJSON *jobsize_json(long mn, long mx, long np)
{
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "min", (double)mn);
  cJSON_AddNumberToObject(o, "max", (double)mx);
  cJSON_AddNumberToObject(o, "nproc", (double)np);
  char rep[64];
  if (mn == mx)
    snprintf(rep, sizeof(rep), "%ld", mx);
  else
    snprintf(rep, sizeof(rep), "%ld:%ld", mn, mx);
  cJSON_AddStringToObject(o, "nnodes", rep);
  return o;
}

/* Reads a decimal integer at *p (advancing it), then expects the character `end` ('\0': the
 * end of the text). Returns: 0, or -1 when there is no number, it overflows or `end` is not
 * next. */
static int jobsize_num(const char **p, char end, long *v)
{
  char *e = NULL;
  errno = 0;
  *v = strtol(*p, &e, 10);
  if (e == *p || errno != 0 || *e != end)
    return -1;
  *p = end ? e + 1 : e;
  return 0;
}

/* What is wrong with a -j value whose form is right but whose numbers are not (zero nodes or
 * workers, MIN above MAX). Returns: 1 with the message in err, 0 when that is not it. */
static int jobsize_why(const char *text, const char *src, struct mu_buf *err)
{
  long a, b, p;
  const char *q = text;
  if (jobsize_num(&q, ':', &a) == 0 && jobsize_num(&q, 'x', &b) == 0 &&
      jobsize_num(&q, '\0', &p) == 0) {
    if (a > b && b >= 1)
      mu_buf_printf(err,
                    "%s '%s': the minimum of %ld nodes is above the maximum of %ld; write "
                    "MIN:MAXxNPROC with MIN <= MAX (e.g. %ld:%ldx%ld)",
                    src, text, a, b, b, a, p > 0 ? p : 1);
    else if (a < 1 || b < 1)
      mu_buf_printf(err,
                    "%s '%s': %ld nodes; an elastic job runs on 1 to MAX nodes (e.g. 1:%ldx%ld)",
                    src, text, a < 1 ? a : b, b > 1 ? b : 2, p > 0 ? p : 1);
    else if (p < 1)
      mu_buf_printf(err, "%s '%s': %ld workers per node; give 1 or more (e.g. %ld:%ldx1)", src,
                    text, p, a, b);
    return a > b || a < 1 || b < 1 || p < 1;
  }
  q = text;
  if (jobsize_num(&q, 'x', &a) == 0 && jobsize_num(&q, '\0', &p) == 0) {
    if (a < 1)
      mu_buf_printf(err, "%s '%s': %ld nodes; a job runs on 1 node or more (e.g. 1x%ld)", src, text,
                    a, p > 0 ? p : 1);
    else if (p < 1)
      mu_buf_printf(err, "%s '%s': %ld workers per node; give 1 or more (e.g. %ldx1)", src, text, p,
                    a);
    return a < 1 || p < 1;
  }
  q = text;
  if (jobsize_num(&q, '\0', &p) == 0 && p < 1) {
    mu_buf_printf(err, "%s '%s': %ld workers; give 1 or more (e.g. 2)", src, text, p);
    return 1;
  }
  return 0;
}

/* Converters of an argument's text into its typed value, one per type (src names it in
 * messages): the value, or NULL with the message in err. */
typedef cJSON *value_fn(const struct mu_param *p, const char *text, const char *src,
                        struct mu_buf *err);

static cJSON *str_value(const struct mu_param *p, const char *text, const char *src,
                        struct mu_buf *err)
{
  int ok = p->choices.n == 0;
  for (size_t i = 0; i < p->choices.n; i++)
    if (strcmp(p->choices.v[i], text) == 0)
      ok = 1;
  if (!ok) {
    const char *best = mu_component_closest((const char *const *)p->choices.v, text);
    mu_buf_printf(err, "%s: '%s' is not one of", src, text);
    for (size_t i = 0; i < p->choices.n; i++)
      mu_buf_printf(err, "%s %s", i ? "," : "", p->choices.v[i]);
    if (best)
      mu_buf_printf(err, "; did you mean '%s'?", best);
    return NULL;
  }
  if (p->has_re && regexec(&p->re, text, 0, NULL, 0) != 0) {
    mu_buf_printf(err, "%s: '%s' does not match the pattern %s", src, text, p->pattern);
    if (p->help != NULL && p->help[0] != '\0') /* what the pattern means, in the author's words */
      mu_buf_printf(err, " (%s)", p->help);
    mu_buf_puts(err, "; give a value that matches it");
    return NULL;
  }
  return cJSON_CreateString(text);
}

static cJSON *int_value(const struct mu_param *p, const char *text, const char *src,
                        struct mu_buf *err)
{
  long l;
  (void)p;
  if (mu_parse_long(text, LONG_MIN, LONG_MAX, &l) != 0) {
    mu_buf_printf(err, "%s expects an int, got '%s'", src, text);
    return NULL;
  }
  return cJSON_CreateNumber((double)l);
}

static cJSON *float_value(const struct mu_param *p, const char *text, const char *src,
                          struct mu_buf *err)
{
  double d;
  (void)p;
  if (mu_parse_double(text, &d) != 0) {
    mu_buf_printf(err, "%s expects a number, got '%s'", src, text);
    return NULL;
  }
  return cJSON_CreateNumber(d);
}

/* A word that is no truth value for a bool: the word, the words it takes and the closest. */
static void bool_error(const char *src, const char *text, struct mu_buf *err)
{
  const char *best = mu_component_bool_closest(text);
  mu_buf_printf(err,
                "%s is a bool and takes true/false, 1/0, yes/no or on/off (any case), got '%s'",
                src, text);
  if (best != NULL)
    mu_buf_printf(err, "; did you mean '%s'?", best);
}

static cJSON *bool_value(const struct mu_param *p, const char *text, const char *src,
                         struct mu_buf *err)
{
  (void)p;
  int b = mu_component_bool_text(text);
  if (b >= 0)
    return cJSON_CreateBool(b);
  bool_error(src, text, err);
  return NULL;
}

static cJSON *list_value(const struct mu_param *p, const char *text, const char *src,
                         struct mu_buf *err)
{
  (void)p;
  (void)src;
  (void)err;
  cJSON *a = cJSON_CreateArray();
  const char *q = text;
  while (*q) {
    size_t n = strcspn(q, ",");
    if (n > 0) {
      char *item = mu_strndup(q, n);
      cJSON_AddItemToArray(a, cJSON_CreateString(item));
      mu_free(item);
    }
    q += n;
    if (*q)
      q++;
  }
  return a;
}

static cJSON *map_value(const struct mu_param *p, const char *text, const char *src,
                        struct mu_buf *err)
{
  struct mu_kvlist kv = MU_KVLIST_INIT;
  struct mu_buf e = MU_BUF_INIT(SIZE_MAX);
  cJSON *o = NULL;
  (void)p;
  if (mu_cfg_split(text, &kv, &e) != 0) {
    mu_buf_printf(err, "%s expects KEY=VALUE,KEY2=VALUE2: %s", src, mu_buf_str(&e));
  } else {
    o = cJSON_CreateObject();
    for (size_t i = 0; i < kv.n; i++)
      cJSON_AddStringToObject(o, kv.v[i].key, kv.v[i].value);
  }
  mu_buf_release(&e);
  mu_kvlist_release(&kv);
  return o;
}

static cJSON *jobsize_value(const struct mu_param *p, const char *text, const char *src,
                            struct mu_buf *err)
{
  long mn, mx, np;
  if (p->nproc_from != NULL && strchr(text, 'x') == NULL) {
    /* N or MIN:MAX nodes; nproc 0 until jobsize_overrides reads the resource's GPUs */
    char *nodes = mu_asprintf("%sx1", text);
    int bad = mu_parse_jobsize(nodes, &mn, &mx, &np) != 0;
    mu_free(nodes);
    if (!bad)
      return jobsize_json(mn, mx, 0);
  }
  if (mu_parse_jobsize(text, &mn, &mx, &np) != 0) {
    if (jobsize_why(text, src, err))
      return NULL;
    mu_buf_printf(err,
                  "%s expects NPROC, NNODESxNPROC or MIN:MAXxNPROC (e.g. 2x8, 1:4x8), "
                  "got '%s'",
                  src, text);
    return NULL;
  }
  return jobsize_json(mn, mx, np);
}

static value_fn *const converters[MU_P__COUNT] = {
#define MU__PT(e, name, fn) [MU_P_##e] = fn,
    MU_PTYPE_MAP(MU__PT)
#undef MU__PT
};

/* Converts one argument's text into its typed value. src names it in messages. */
static cJSON *param_value(const struct mu_param *p, const char *text, const char *src,
                          struct mu_buf *err)
{
  return converters[p->type](p, text, src, err);
}

/* ---------------------------------------------------------------------------------------------
 * The command line
 */

static const struct mu_param *find_param(const struct mu_component *c, const char *name, size_t n)
{
  for (size_t i = 0; i < c->nparams; i++) {
    const char *pn = c->params[i].name;
    if (strlen(pn) != n || c->params[i].remainder)
      continue;
    size_t k = 0;
    for (; k < n; k++) {
      char a = pn[k] == '-' ? '_' : pn[k];
      char b = name[k] == '-' ? '_' : name[k];
      if (a != b)
        break;
    }
    if (k == n)
      return &c->params[i];
  }
  return NULL;
}

static void unknown_arg(const struct mu_component *c, const char *arg, struct mu_buf *err)
{
  const char *name = arg;
  while (*name == '-')
    name++;
  struct mu_suggest s;
  mu_suggest_init(&s, name);
  for (size_t i = 0; i < c->nparams; i++)
    if (!c->params[i].remainder)
      mu_suggest_add(&s, c->params[i].name);
  const char *best = mu_suggest_best(&s);
  if (best != NULL)
    mu_buf_printf(err,
                  "%s: unknown argument '%s'; did you mean '--%s'? (see 'muster run %s --help')",
                  c->name, arg, best, c->name);
  else
    mu_buf_printf(err,
                  "%s: unknown argument '%s'; see 'muster run %s --help' (script arguments "
                  "go after '--')",
                  c->name, arg, c->name);
}

/* The script arguments from argv[i] on (after '--', or from the first word that is no option)
 * into the remainder parameter's slot. Returns: 0, or MU_EINVAL when the component takes none. */
static int take_remainder(const struct mu_component *c, int argc, char **argv, int i,
                          cJSON **values, struct mu_buf *err)
{
  const struct mu_param *rem = NULL;
  for (size_t k = 0; k < c->nparams; k++)
    if (c->params[k].remainder)
      rem = &c->params[k];
  if (rem == NULL) {
    const char *a = argv[i];
    mu_buf_printf(err,
                  "%s: unexpected argument '%s'; this component takes no script "
                  "arguments (see 'muster run %s --help')",
                  c->name, strcmp(a, "--") == 0 && i + 1 < argc ? argv[i + 1] : a, c->name);
    return MU_EINVAL;
  }
  if (strcmp(argv[i], "--") == 0)
    i++;
  cJSON *arr = cJSON_CreateArray();
  for (; i < argc; i++)
    cJSON_AddItemToArray(arr, cJSON_CreateString(argv[i]));
  values[mu_param_index(c, rem)] = arr;
  return 0;
}

/* The parameter option a names (--name[=VALUE] or -xVALUE), or NULL; *val its attached value
 * (NULL: none), shown the option as written for messages. */
static const struct mu_param *match_option(const struct mu_component *c, const char *a,
                                           const char **val, char *shown, size_t n)
{
  const struct mu_param *p = NULL;
  *val = NULL;
  if (a[1] == '-') {
    const char *name = a + 2;
    const char *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    p = find_param(c, name, len);
    if (eq != NULL)
      *val = eq + 1;
    snprintf(shown, n, "--%.*s", (int)len, name);
    return p;
  }
  for (size_t k = 0; k < c->nparams; k++)
    if (c->params[k].short_name == a[1])
      p = &c->params[k];
  if (p != NULL && a[2] != '\0')
    *val = a + 2;
  snprintf(shown, n, "-%c", a[1]);
  return p;
}

/* The value of option p at argv[*i] that had none attached: the next word (a bool alone means
 * true; a word after it must be a truth value, `--debug True|False` as TorchX: any other word is
 * an error rather than a script argument), *i moved past it. Returns: the value, or NULL with the
 * message in err. */
static const char *next_value(const struct mu_component *c, const struct mu_param *p, int argc,
                              char **argv, int *i, const char *shown, struct mu_buf *err)
{
  const char *next = *i + 1 < argc ? argv[*i + 1] : NULL;
  if (p->type == MU_P_BOOL) {
    if (next == NULL || next[0] == '-')
      return "true";
    if (mu_component_bool_text(next) < 0) { /* never taken silently as a script argument */
      char src[200];
      snprintf(src, sizeof(src), "%s: argument '%s'", c->name, shown);
      bool_error(src, next, err);
      mu_buf_printf(err, " (script arguments go after '--')");
      return NULL;
    }
    ++*i;
    return next;
  }
  if (next == NULL) {
    mu_buf_printf(err, "%s: argument '%s' needs a value (%s)", c->name, shown,
                  mu_ptype_names[p->type]);
    return NULL;
  }
  ++*i;
  return next;
}

/* Parses argv into values[] (one slot per param, NULL = not given). */
static int parse_args(const struct mu_component *c, int argc, char **argv, cJSON **values,
                      struct mu_buf *err)
{
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i], *val;
    if (strcmp(a, "--") == 0 || a[0] != '-' || a[1] == '\0')
      return take_remainder(c, argc, argv, i, values, err);
    char shown[160];
    const struct mu_param *p = match_option(c, a, &val, shown, sizeof(shown));
    if (p == NULL) {
      unknown_arg(c, a, err);
      return MU_EINVAL;
    }
    if (val == NULL)
      val = next_value(c, p, argc, argv, &i, shown, err);
    if (val == NULL)
      return MU_EINVAL;
    size_t idx = mu_param_index(c, p);
    if (values[idx] != NULL) {
      mu_buf_printf(err, "%s: argument '--%s' given twice; give it once", c->name, p->name);
      return MU_EINVAL;
    }
    char src[200];
    snprintf(src, sizeof(src), "%s: argument '%s'", c->name, shown);
    values[idx] = param_value(p, val, src, err);
    if (values[idx] == NULL)
      return MU_EINVAL;
  }
  return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Defaults, jobsize overrides and checks
 */

/* [component:NAME] in the config files: a value for each parameter the command line left out. */
static int config_defaults(const struct mu_component *c, const struct mu_config *cfg,
                           cJSON **values, struct mu_buf *err)
{
  char *section = mu_asprintf("component:%s", c->name);
  int rc = 0;
  for (size_t i = 0; cfg != NULL && i < cfg->n && rc == 0; i++) {
    const struct mu_config_entry *e = &cfg->v[i];
    if (strcmp(e->section, section) != 0)
      continue;
    const struct mu_param *p = find_param(c, e->key, strlen(e->key));
    if (p == NULL) {
      mu_buf_printf(err, "%s: ", e->where);
      unknown_arg(c, e->key, err);
      rc = MU_EINVAL;
      break;
    }
    size_t idx = mu_param_index(c, p);
    if (values[idx] != NULL || e->value == NULL)
      continue;
    char *src = mu_asprintf("%s: %s", e->where, e->key);
    values[idx] = param_value(p, e->value, src, err);
    mu_free(src);
    if (values[idx] == NULL)
      rc = MU_EINVAL;
  }
  mu_free(section);
  return rc;
}

/* The file's default of each parameter still without a value, else an empty value (a required
 * parameter without one is an error). */
static int file_defaults(const struct mu_component *c, cJSON **values, struct mu_buf *err)
{
  for (size_t i = 0; i < c->nparams; i++) {
    const struct mu_param *p = &c->params[i];
    if (values[i] != NULL)
      continue;
    if (c->py_file != NULL && !p->required)
      continue; /* a Python function keeps its own default: pass nothing */
    if (p->required) {
      mu_buf_printf(err, "%s: missing required argument --%s%s%s%s; see 'muster run %s --help'",
                    c->name, p->name, p->help[0] ? " (" : "", p->help, p->help[0] ? ")" : "",
                    c->name);
      return MU_EINVAL;
    }
    if (p->def != NULL) {
      char *src = mu_asprintf("%s: default of --%s", c->where, p->name);
      values[i] = param_value(p, p->def, src, err);
      mu_free(src);
      if (values[i] == NULL)
        return MU_EINVAL;
    } else if (p->remainder || p->type == MU_P_LIST) {
      values[i] = cJSON_CreateArray();
    } else if (p->type == MU_P_MAP) {
      values[i] = cJSON_CreateObject();
    } else {
      values[i] = cJSON_CreateNull();
    }
  }
  return 0;
}

/* A bare -j N of a jobsize with nproc_from: nproc is the GPU count of the named resource in
 * that parameter (TorchX's dist.spmd), an error when it has none. Returns: 0 or MU_EINVAL. */
static int jobsize_nproc_from(const struct mu_component *c, const struct mu_param *p,
                              cJSON **values, long nodes, long *np, struct mu_buf *err)
{
  const struct mu_param *ph = find_param(c, p->nproc_from, strlen(p->nproc_from));
  const char *h = ph ? cJSON_GetStringValue(values[mu_param_index(c, ph)]) : NULL;
  long gpus = h && *h ? mu_named_resource_gpus(h) : -1;
  if (gpus > 0) {
    *np = gpus;
    return 0;
  }
  if (h == NULL || *h == '\0')
    mu_buf_printf(err,
                  "%s: '-%s %ld' takes the workers per node from the GPUs of '--%s', which is "
                  "not set; give -%s %ldxNPROC_PER_NODE (e.g. -%s %ldx8) or --%s",
                  c->name, p->name, nodes, p->nproc_from, p->name, nodes, p->name, nodes,
                  p->nproc_from);
  else
    mu_buf_printf(err,
                  "%s: '-%s %ld' takes the workers per node from the GPUs of '--%s %s', "
                  "which %s; give -%s %ldxNPROC_PER_NODE (e.g. -%s %ldx8)",
                  c->name, p->name, nodes, p->nproc_from, h,
                  gpus == 0 ? "has none" : "is not a named resource", p->name, nodes, p->name,
                  nodes);
  return MU_EINVAL;
}

/* A jobsize's nnodes_param (N or MIN:MAX) and nproc_param (P) win over its own parts. */
static int jobsize_overrides(const struct mu_component *c, cJSON **values, struct mu_buf *err)
{
  for (size_t i = 0; i < c->nparams; i++) {
    const struct mu_param *p = &c->params[i];
    if (p->type != MU_P_JOBSIZE || !cJSON_IsObject(values[i]))
      continue;
    long mn = mu_json_get_long(values[i], "min", 1);
    long mx = mu_json_get_long(values[i], "max", 1);
    long np = mu_json_get_long(values[i], "nproc", 1);
    const struct mu_param *pn =
        p->nnodes_param ? find_param(c, p->nnodes_param, strlen(p->nnodes_param)) : NULL;
    const struct mu_param *pp =
        p->nproc_param ? find_param(c, p->nproc_param, strlen(p->nproc_param)) : NULL;
    const cJSON *vn = pn ? values[mu_param_index(c, pn)] : NULL;
    const cJSON *vp = pp ? values[mu_param_index(c, pp)] : NULL;
    if (mu_component_is_truthy(vn)) {
      char *nodes = mu_asprintf("%sx1", cJSON_GetStringValue(vn));
      long a, b, ignore;
      int bad = mu_parse_jobsize(nodes, &a, &b, &ignore) != 0;
      mu_free(nodes);
      if (bad) {
        mu_buf_printf(err, "%s: argument '--%s' expects N or MIN:MAX, got '%s'", c->name, pn->name,
                      cJSON_GetStringValue(vn));
        return MU_EINVAL;
      }
      mn = a;
      mx = b;
    }
    if (mu_component_is_truthy(vp)) {
      np = (long)vp->valuedouble;
      if (np < 1) {
        mu_buf_printf(err, "%s: argument '--%s' must be 1 or more", c->name, pp->name);
        return MU_EINVAL;
      }
    } else if (np == 0 && p->nproc_from != NULL &&
               jobsize_nproc_from(c, p, values, mx, &np, err) != 0) {
      return MU_EINVAL;
    }
    cJSON_Delete(values[i]);
    values[i] = jobsize_json(mn, mx, np);
  }
  return 0;
}

/* One exactly_one / at_most_one check: how many of its parameters are set. */
static int count_check(const struct mu_component *c, const cJSON *chk, cJSON **values,
                       struct mu_buf *err)
{
  const cJSON *set = cJSON_GetObjectItemCaseSensitive(chk, "exactly_one");
  int exactly = set != NULL;
  if (set == NULL)
    set = cJSON_GetObjectItemCaseSensitive(chk, "at_most_one");
  int count = 0;
  const cJSON *n;
  struct mu_buf names = MU_BUF_INIT(SIZE_MAX);
  cJSON_ArrayForEach(n, set)
  {
    if (!cJSON_IsString(n))
      continue;
    mu_buf_printf(&names, "%s--%s", names.len ? ", " : "", n->valuestring);
    for (size_t i = 0; i < c->nparams; i++)
      if (strcmp(c->params[i].name, n->valuestring) == 0 && mu_component_is_truthy(values[i]))
        count++;
  }
  int bad = exactly ? count != 1 : count > 1;
  if (bad) {
    const char *msg = mu_component_str(chk, "message");
    if (msg != NULL)
      mu_buf_printf(err, "%s: %s", c->name, msg);
    else
      mu_buf_printf(err, "%s: give %s one of %s", c->name, exactly ? "exactly" : "at most",
                    mu_buf_str(&names));
  }
  mu_buf_release(&names);
  return bad ? MU_EINVAL : 0;
}

/* An error_if check: its condition must not hold. */
static int cond_check(const struct mu_component *c, const cJSON *chk, const char *ctx,
                      cJSON **values, struct mu_buf *err)
{
  const char *cond = mu_component_str(chk, "error_if");
  int holds = 0;
  char *where = mu_asprintf("%s: %s.error_if", c->where, ctx);
  int rc = cond ? mu_component_cond(c, values, where, cond, &holds, err) : MU_EINVAL;
  mu_free(where);
  if (cond == NULL)
    mu_buf_printf(err, "%s: %s.error_if: must be a condition (text)", c->where, ctx);
  if (rc != 0 || !holds)
    return rc;
  const char *msg = mu_component_str(chk, "message");
  if (msg != NULL)
    mu_buf_printf(err, "%s: %s", c->name, msg);
  else
    mu_buf_printf(err, "%s: these arguments are refused (%s)", c->name, cond);
  return MU_EINVAL;
}

static int run_checks(const struct mu_component *c, cJSON **values, struct mu_buf *err)
{
  static const char *const keys[] = {"exactly_one", "at_most_one", "error_if", "message", NULL};
  const cJSON *chk;
  size_t idx = 0;
  cJSON_ArrayForEach(chk, c->checks)
  {
    char ctx[32];
    snprintf(ctx, sizeof(ctx), "checks[%zu]", idx++);
    if (mu_component_check_keys(chk, keys, c->where, ctx, err) != 0)
      return MU_EINVAL;
    int rc = cJSON_HasObjectItem(chk, "error_if") ? cond_check(c, chk, ctx, values, err)
                                                  : count_check(c, chk, values, err);
    if (rc != 0)
      return rc;
  }
  return 0;
}

int mu_component_values(const struct mu_component *c, int argc, char **argv,
                        const struct mu_config *cfg, cJSON **values, struct mu_buf *err)
{
  int rc = parse_args(c, argc, argv, values, err);
  if (rc != 0)
    return rc;
  rc = config_defaults(c, cfg, values, err);
  if (rc == 0)
    rc = file_defaults(c, values, err);
  if (rc == 0)
    rc = jobsize_overrides(c, values, err);
  if (rc == 0)
    rc = run_checks(c, values, err);
  return rc;
}
