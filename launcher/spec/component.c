/* Components: YAML -> typed parameters + a template -> struct mu_app.
 *
 * The YAML is read with libyaml into a cJSON tree whose scalars are all strings (types come
 * from the parameter declarations, not from YAML's guessing). Parameter values are cJSON too:
 * str -> string, int -> number, bool -> bool, list -> array, map -> object, jobsize -> object
 * {min, max, nproc, nnodes}. The template is evaluated into a plain tree, which a declarative
 * key table (STYLE.md #20) then copies into the job model.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <yaml.h>

#include "muster/errno.h"

#include "fsutil.h"
#include "alloc.h"
#include "component.h"
#include "suggest.h"
#include "opts.h"

#define COMPONENT_MAX_BYTES (1 << 20)
#define EVAL_MAX_DEPTH 32

/* ================================================================================ YAML -> cJSON */

static cJSON *yaml_node_to_json(yaml_document_t *doc, yaml_node_t *n, int depth)
{
  if (n == NULL || depth > 64)
    return NULL;
  switch (n->type) {
  case YAML_SCALAR_NODE:
    return cJSON_CreateString((const char *)n->data.scalar.value);
  case YAML_SEQUENCE_NODE: {
    cJSON *a = cJSON_CreateArray();
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
         it++) {
      cJSON *c = yaml_node_to_json(doc, yaml_document_get_node(doc, *it), depth + 1);
      if (c == NULL) {
        cJSON_Delete(a);
        return NULL;
      }
      cJSON_AddItemToArray(a, c);
    }
    return a;
  }
  case YAML_MAPPING_NODE: {
    cJSON *o = cJSON_CreateObject();
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
      yaml_node_t *k = yaml_document_get_node(doc, p->key);
      if (k == NULL || k->type != YAML_SCALAR_NODE) {
        cJSON_Delete(o);
        return NULL;
      }
      cJSON *v = yaml_node_to_json(doc, yaml_document_get_node(doc, p->value), depth + 1);
      if (v == NULL) {
        cJSON_Delete(o);
        return NULL;
      }
      cJSON_AddItemToObject(o, (const char *)k->data.scalar.value, v);
    }
    return o;
  }
  default:
    return NULL;
  }
}

static int yaml_to_json(const char *text, size_t len, const char *where, cJSON **out,
                        struct mu_buf *err)
{
  yaml_parser_t p;
  yaml_document_t doc;
  int rc = 0;
  *out = NULL;
  if (!yaml_parser_initialize(&p))
    return MU_ENOMEM;
  yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
  if (!yaml_parser_load(&p, &doc)) {
    mu_buf_printf(err, "%s:%zu: %s", where, p.problem_mark.line + 1,
                  p.problem ? p.problem : "YAML syntax error");
    yaml_parser_delete(&p);
    return MU_EPARSE;
  }
  yaml_node_t *root = yaml_document_get_root_node(&doc);
  if (root == NULL || root->type != YAML_MAPPING_NODE) {
    mu_buf_printf(err, "%s: a component file must be a YAML mapping (name:, params:, app:)", where);
    rc = MU_EPARSE;
  } else {
    *out = yaml_node_to_json(&doc, root, 0);
    if (*out == NULL) {
      mu_buf_printf(err, "%s: unsupported YAML (keys must be plain strings, no anchors)", where);
      rc = MU_EPARSE;
    }
  }
  yaml_document_delete(&doc);
  yaml_parser_delete(&p);
  return rc;
}

/* ================================================================================ the model */

enum ptype { P_STR = 0, P_INT, P_BOOL, P_LIST, P_MAP, P_JOBSIZE };
static const char *const ptype_names[] = {"str", "int", "bool", "list", "map", "jobsize"};

struct param {
  char *name;
  char short_name;
  enum ptype type;
  char *def; /* default as text; NULL = none */
  int required;
  char *help;
  struct mu_strvec choices;
  int remainder; /* takes the positional/after-`--` arguments */
  char *pattern; /* str: a POSIX ERE the whole value must match; NULL = any */
  regex_t re;    /* compiled ^(pattern)$, valid when has_re */
  int has_re;
  char *nnodes_param; /* jobsize: a str param that overrides the node part */
  char *nproc_param;  /* jobsize: an int param that overrides nproc */
};

struct mu_component {
  char *name;
  char *description;
  char *where;
  struct param *params;
  size_t nparams;
  cJSON *checks; /* array or NULL; owned by root */
  cJSON *app;    /* the template; owned by root */
  cJSON *root;
};

static void param_release(struct param *p)
{
  mu_free(p->name);
  mu_free(p->def);
  mu_free(p->help);
  mu_strvec_release(&p->choices);
  mu_free(p->pattern);
  if (p->has_re)
    regfree(&p->re);
  mu_free(p->nnodes_param);
  mu_free(p->nproc_param);
}

void mu_component_free(struct mu_component *c)
{
  if (c == NULL)
    return;
  for (size_t i = 0; i < c->nparams; i++)
    param_release(&c->params[i]);
  mu_free(c->params);
  mu_free(c->name);
  mu_free(c->description);
  mu_free(c->where);
  cJSON_Delete(c->root);
  mu_free(c);
}

const char *mu_component_name(const struct mu_component *c)
{
  return c->name;
}

const char *mu_component_description(const struct mu_component *c)
{
  return c->description ? c->description : "";
}

static const char *str_of(const cJSON *o, const char *key)
{
  const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsString(it) ? it->valuestring : NULL;
}

static int truthy_text(const char *s)
{
  return s != NULL && (strcasecmp(s, "true") == 0 || strcasecmp(s, "yes") == 0 ||
                       strcmp(s, "1") == 0 || strcasecmp(s, "on") == 0);
}

/* Suggests the closest of a NULL-terminated list of words. */
static const char *closest_word(const char *const *words, const char *w)
{
  struct mu_suggest s;
  mu_suggest_init(&s, w);
  for (size_t i = 0; words[i] != NULL; i++)
    mu_suggest_add(&s, words[i]);
  return mu_suggest_best(&s);
}

static int check_keys(const cJSON *o, const char *const *allowed, const char *where,
                      const char *ctx, struct mu_buf *err)
{
  const cJSON *it;
  cJSON_ArrayForEach(it, o)
  {
    int ok = 0;
    for (size_t i = 0; allowed[i] != NULL; i++)
      if (strcmp(allowed[i], it->string) == 0)
        ok = 1;
    if (!ok) {
      const char *best = closest_word(allowed, it->string);
      mu_buf_printf(err, "%s: %s: unknown key '%s'%s%s%s", where, ctx, it->string,
                    best ? "; did you mean '" : "", best ? best : "", best ? "'?" : "");
      return MU_EINVAL;
    }
  }
  return 0;
}

/* The keys of a parameter declaration. */
static const char *const param_keys[] = {"name",         "short",       "type",    "default",
                                         "required",     "help",        "choices", "remainder",
                                         "nnodes_param", "nproc_param", "pattern", NULL};

static int parse_param(const cJSON *jp, size_t idx, const char *where, struct param *p,
                       struct mu_buf *err)
{
  char ctx[64];
  snprintf(ctx, sizeof(ctx), "params[%zu]", idx);
  if (!cJSON_IsObject(jp)) {
    mu_buf_printf(err, "%s: %s: must be a mapping with name:, type:, help:", where, ctx);
    return MU_EINVAL;
  }
  if (check_keys(jp, param_keys, where, ctx, err) != 0)
    return MU_EINVAL;
  const char *name = str_of(jp, "name");
  if (name == NULL || name[0] == '\0') {
    mu_buf_printf(err, "%s: %s.name: missing", where, ctx);
    return MU_EINVAL;
  }
  p->name = mu_strdup(name);
  const char *t = str_of(jp, "type");
  p->type = P_STR;
  if (t != NULL) {
    int found = 0;
    for (size_t i = 0; i < sizeof(ptype_names) / sizeof(ptype_names[0]); i++) {
      if (strcmp(t, ptype_names[i]) == 0) {
        p->type = (enum ptype)i;
        found = 1;
      }
    }
    if (!found) {
      mu_buf_printf(err, "%s: %s.type: unknown type '%s'; use str, int, bool, list, map or jobsize",
                    where, ctx, t);
      return MU_EINVAL;
    }
  }
  const char *s = str_of(jp, "short");
  if (s != NULL) {
    if (strlen(s) != 1) {
      mu_buf_printf(err, "%s: %s.short: must be one letter, got '%s'", where, ctx, s);
      return MU_EINVAL;
    }
    p->short_name = s[0];
  }
  s = str_of(jp, "default");
  p->def = s ? mu_strdup(s) : NULL;
  p->required = truthy_text(str_of(jp, "required"));
  p->remainder = truthy_text(str_of(jp, "remainder"));
  s = str_of(jp, "help");
  p->help = mu_strdup(s ? s : "");
  s = str_of(jp, "nnodes_param");
  p->nnodes_param = s ? mu_strdup(s) : NULL;
  s = str_of(jp, "nproc_param");
  p->nproc_param = s ? mu_strdup(s) : NULL;
  const cJSON *ch = cJSON_GetObjectItemCaseSensitive(jp, "choices");
  const cJSON *c;
  cJSON_ArrayForEach(c, ch)
  {
    if (cJSON_IsString(c))
      mu_strvec_push(&p->choices, c->valuestring);
  }
  if (p->remainder && p->type != P_LIST) {
    mu_buf_printf(err, "%s: %s: a remainder parameter must have type list", where, ctx);
    return MU_EINVAL;
  }
  s = str_of(jp, "pattern");
  if (s != NULL) {
    if (p->type != P_STR) {
      mu_buf_printf(err, "%s: %s.pattern: only str parameters take a pattern ('%s' is %s)", where,
                    ctx, p->name, ptype_names[p->type]);
      return MU_EINVAL;
    }
    /* The whole value must match: compile ^(pattern)$. */
    struct mu_buf anchored = MU_BUF_INIT(4096);
    int too_long = mu_buf_printf(&anchored, "^(%s)$", s) != 0;
    int rc =
        too_long ? REG_ESPACE : regcomp(&p->re, mu_buf_str(&anchored), REG_EXTENDED | REG_NOSUB);
    mu_buf_release(&anchored);
    if (rc != 0) {
      char why[128] = "longer than 4 KiB";
      if (!too_long)
        regerror(rc, &p->re, why, sizeof(why));
      mu_buf_printf(err, "%s: %s.pattern: '%s' is not a POSIX extended regular expression: %s",
                    where, ctx, s, why);
      return MU_EINVAL;
    }
    p->has_re = 1;
    p->pattern = mu_strdup(s);
  }
  return 0;
}

static const char *const top_keys[] = {"name", "description", "params", "checks", "app", NULL};

int mu_component_parse(const char *text, size_t len, const char *where, struct mu_component **out,
                       struct mu_buf *err)
{
  cJSON *root = NULL;
  int rc = yaml_to_json(text, len, where, &root, err);
  if (rc != 0)
    return rc;
  struct mu_component *c = mu_calloc(1, sizeof(*c));
  c->root = root;
  c->where = mu_strdup(where);
  if (check_keys(root, top_keys, where, "top level", err) != 0) {
    rc = MU_EINVAL;
    goto out;
  }
  const char *name = str_of(root, "name");
  if (name == NULL || name[0] == '\0') {
    mu_buf_printf(err, "%s: name: missing (the component's name, e.g. 'utils.echo')", where);
    rc = MU_EINVAL;
    goto out;
  }
  c->name = mu_strdup(name);
  const char *d = str_of(root, "description");
  c->description = mu_strdup(d ? d : "");
  const cJSON *params = cJSON_GetObjectItemCaseSensitive(root, "params");
  if (params != NULL && !cJSON_IsArray(params)) {
    mu_buf_printf(err, "%s: params: must be a list of parameter declarations", where);
    rc = MU_EINVAL;
    goto out;
  }
  size_t np = (size_t)cJSON_GetArraySize(params);
  c->params = mu_calloc(np ? np : 1, sizeof(*c->params));
  const cJSON *jp;
  cJSON_ArrayForEach(jp, params)
  {
    rc = parse_param(jp, c->nparams, where, &c->params[c->nparams], err);
    c->nparams++;
    if (rc != 0)
      goto out;
    for (size_t k = 0; k + 1 < c->nparams; k++) {
      if (strcmp(c->params[k].name, c->params[c->nparams - 1].name) == 0) {
        mu_buf_printf(err, "%s: params: '%s' is declared twice", where, c->params[k].name);
        rc = MU_EINVAL;
        goto out;
      }
    }
  }
  c->checks = cJSON_GetObjectItemCaseSensitive(root, "checks");
  c->app = cJSON_GetObjectItemCaseSensitive(root, "app");
  if (!cJSON_IsObject(c->app)) {
    mu_buf_printf(err, "%s: app: missing (the template: name:, roles:)", where);
    rc = MU_EINVAL;
    goto out;
  }
out:
  if (rc != 0) {
    mu_component_free(c);
    c = NULL;
  }
  *out = c;
  return rc;
}

/* The search path: $MUSTER_COMPONENTS_PATH entries, the directory next to the binary
 * (<exe>/../share/muster/components, <exe>/../components), then the compiled-in one. */
static void component_dirs(struct mu_strvec *dirs)
{
  const char *env = getenv("MUSTER_COMPONENTS_PATH");
  if (env != NULL && env[0] != '\0') {
    const char *p = env;
    while (*p) {
      size_t n = strcspn(p, ":");
      if (n > 0)
        mu_strvec_push_owned(dirs, mu_strndup(p, n));
      p += n;
      if (*p)
        p++;
    }
  }
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n > 0) {
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash != NULL) {
      *slash = '\0';
      mu_strvec_pushf(dirs, "%s/../share/muster/components", exe);
    }
  }
#ifdef MU_COMPONENTS_DIR
  mu_strvec_push(dirs, MU_COMPONENTS_DIR);
#endif
}

static int is_path(const char *name)
{
  size_t n = strlen(name);
  return strchr(name, '/') != NULL || (n > 5 && strcmp(name + n - 5, ".yaml") == 0) ||
         (n > 4 && strcmp(name + n - 4, ".yml") == 0);
}

int mu_component_load(const char *name, struct mu_component **out, struct mu_buf *err)
{
  struct mu_buf text = MU_BUF_INIT(COMPONENT_MAX_BYTES);
  struct mu_strvec dirs = MU_STRVEC_INIT;
  char *path = NULL;
  int rc = 0;
  *out = NULL;
  if (is_path(name)) {
    path = mu_strdup(name);
  } else {
    component_dirs(&dirs);
    for (size_t i = 0; i < dirs.n && path == NULL; i++) {
      char *cand = mu_asprintf("%s/%s.yaml", dirs.v[i], name);
      if (access(cand, R_OK) == 0)
        path = cand;
      else
        mu_free(cand);
    }
    if (path == NULL) {
      struct mu_strvec names = MU_STRVEC_INIT;
      mu_component_builtins(&names, NULL);
      const char *best = names.n ? closest_word((const char *const *)names.v, name) : NULL;
      if (best != NULL)
        mu_buf_printf(err, "unknown component '%s'; did you mean '%s'? (see 'muster builtins')",
                      name, best);
      else
        mu_buf_printf(err,
                      "unknown component '%s'; see 'muster builtins', or give a path to a "
                      "YAML file (./mine.yaml)",
                      name);
      mu_strvec_release(&names);
      rc = MU_ENOENT;
      goto out;
    }
  }
  rc = mu_read_file(path, COMPONENT_MAX_BYTES, &text);
  if (rc == MU_E2BIG) {
    mu_buf_printf(err, "component '%s' is larger than %d bytes", path, COMPONENT_MAX_BYTES);
    goto out;
  }
  if (rc != 0) {
    mu_buf_printf(err, "cannot read component '%s': %s", path, mu_strerror(rc));
    rc = rc == -ENOENT ? MU_ENOENT : rc;
    goto out;
  }
  rc = mu_component_parse(mu_buf_str(&text), text.len, path, out, err);
out:
  mu_free(path);
  mu_strvec_release(&dirs);
  mu_buf_release(&text);
  return rc;
}

static int cmp_str(const void *a, const void *b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int mu_component_builtins(struct mu_strvec *names, struct mu_strvec *descs)
{
  struct mu_strvec dirs = MU_STRVEC_INIT;
  struct mu_strvec found = MU_STRVEC_INIT;
  component_dirs(&dirs);
  for (size_t i = 0; i < dirs.n; i++) {
    DIR *d = opendir(dirs.v[i]);
    if (d == NULL)
      continue;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
      size_t n = strlen(e->d_name);
      if (n <= 5 || strcmp(e->d_name + n - 5, ".yaml") != 0 || e->d_name[0] == '.')
        continue;
      char *nm = mu_strndup(e->d_name, n - 5);
      int dup = 0;
      for (size_t k = 0; k < found.n; k++)
        if (strcmp(found.v[k], nm) == 0)
          dup = 1;
      if (dup)
        mu_free(nm);
      else
        mu_strvec_push_owned(&found, nm);
    }
    closedir(d);
  }
  if (found.n > 1)
    qsort(found.v, found.n, sizeof(char *), cmp_str);
  for (size_t i = 0; i < found.n; i++) {
    mu_strvec_push(names, found.v[i]);
    if (descs != NULL) {
      struct mu_component *c = NULL;
      struct mu_buf e = MU_BUF_INIT(4096);
      if (mu_component_load(found.v[i], &c, &e) == 0) {
        const char *desc = mu_component_description(c);
        size_t n = strcspn(desc, "\n");
        mu_strvec_push_owned(descs, mu_strndup(desc, n));
      } else {
        mu_strvec_push(descs, "(cannot be loaded)");
      }
      mu_component_free(c);
      mu_buf_release(&e);
    }
  }
  mu_strvec_release(&found);
  mu_strvec_release(&dirs);
  return 0;
}

/* ================================================================================ help */

void mu_component_help(const struct mu_component *c, struct mu_buf *out)
{
  mu_buf_printf(out, "usage: muster run [RUN OPTIONS] %s [ARGS]", c->name);
  for (size_t i = 0; i < c->nparams; i++)
    if (c->params[i].remainder)
      mu_buf_printf(out, " [-- %s...]", c->params[i].name);
  mu_buf_printf(out, "\n\n%s\n", c->description);
  if (c->description[0] && c->description[strlen(c->description) - 1] != '\n')
    mu_buf_putc(out, '\n');
  mu_buf_printf(out, "arguments (from %s):\n", c->where);
  for (size_t i = 0; i < c->nparams; i++) {
    const struct param *p = &c->params[i];
    char left[128];
    char meta[64];
    snprintf(meta, sizeof(meta), "%s", p->type == P_BOOL ? "[BOOL]" : ptype_names[p->type]);
    for (char *m = meta; *m; m++)
      if (*m >= 'a' && *m <= 'z')
        *m = (char)(*m - 'a' + 'A');
    if (p->remainder)
      snprintf(left, sizeof(left), "-- %s...", p->name);
    else if (p->short_name)
      snprintf(left, sizeof(left), "-%c, --%s %s", p->short_name, p->name, meta);
    else
      snprintf(left, sizeof(left), "    --%s %s", p->name, meta);
    mu_buf_printf(out, "    %-32s %s", left, p->help);
    if (p->required)
      mu_buf_printf(out, " (required)");
    else if (p->def != NULL && p->def[0] != '\0')
      mu_buf_printf(out, " (default: %s)", p->def);
    if (p->choices.n > 0) {
      mu_buf_printf(out, " [");
      for (size_t k = 0; k < p->choices.n; k++)
        mu_buf_printf(out, "%s%s", k ? ", " : "", p->choices.v[k]);
      mu_buf_printf(out, "]");
    }
    if (p->pattern != NULL)
      mu_buf_printf(out, " (matching %s)", p->pattern);
    mu_buf_putc(out, '\n');
  }
  mu_buf_printf(out, "    %-32s %s\n", "    --help", "show this help");
}

/* ================================================================================ values */

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

/* Converts one argument's text into its typed value. src names it in messages. */
static cJSON *param_value(const struct param *p, const char *text, const char *src,
                          struct mu_buf *err)
{
  long l;
  switch (p->type) {
  case P_STR:
    if (p->choices.n > 0) {
      int ok = 0;
      for (size_t i = 0; i < p->choices.n; i++)
        if (strcmp(p->choices.v[i], text) == 0)
          ok = 1;
      if (!ok) {
        const char *best = closest_word((const char *const *)p->choices.v, text);
        mu_buf_printf(err, "%s: '%s' is not one of", src, text);
        for (size_t i = 0; i < p->choices.n; i++)
          mu_buf_printf(err, "%s %s", i ? "," : "", p->choices.v[i]);
        if (best)
          mu_buf_printf(err, "; did you mean '%s'?", best);
        return NULL;
      }
    }
    if (p->has_re && regexec(&p->re, text, 0, NULL, 0) != 0) {
      mu_buf_printf(err, "%s: '%s' does not match the pattern %s; give a value that matches it",
                    src, text, p->pattern);
      return NULL;
    }
    return cJSON_CreateString(text);
  case P_INT:
    if (mu_parse_long(text, LONG_MIN, LONG_MAX, &l) != 0) {
      mu_buf_printf(err, "%s expects an int, got '%s'", src, text);
      return NULL;
    }
    return cJSON_CreateNumber((double)l);
  case P_BOOL:
    if (truthy_text(text))
      return cJSON_CreateTrue();
    if (strcasecmp(text, "false") == 0 || strcmp(text, "0") == 0 || strcasecmp(text, "no") == 0 ||
        strcasecmp(text, "off") == 0)
      return cJSON_CreateFalse();
    mu_buf_printf(err, "%s expects a bool (True or False), got '%s'", src, text);
    return NULL;
  case P_LIST: {
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
  case P_MAP: {
    struct mu_kvlist kv = MU_KVLIST_INIT;
    struct mu_buf e = MU_BUF_INIT(1024);
    if (mu_cfg_split(text, &kv, &e) != 0) {
      mu_buf_printf(err, "%s expects KEY=VALUE,KEY2=VALUE2: %s", src, mu_buf_str(&e));
      mu_buf_release(&e);
      mu_kvlist_release(&kv);
      return NULL;
    }
    mu_buf_release(&e);
    cJSON *o = cJSON_CreateObject();
    for (size_t i = 0; i < kv.n; i++)
      cJSON_AddStringToObject(o, kv.v[i].key, kv.v[i].value);
    mu_kvlist_release(&kv);
    return o;
  }
  case P_JOBSIZE: {
    long mn, mx, np;
    if (mu_parse_jobsize(text, &mn, &mx, &np) != 0) {
      mu_buf_printf(err,
                    "%s expects NPROC, NNODESxNPROC or MIN:MAXxNPROC (e.g. 2x8, 1:4x8), "
                    "got '%s'",
                    src, text);
      return NULL;
    }
    return jobsize_json(mn, mx, np);
  }
  }
  return NULL;
}

/* ================================================================================ arguments */

static const struct param *find_param(const struct mu_component *c, const char *name, size_t n)
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

static int param_index(const struct mu_component *c, const struct param *p)
{
  return (int)(p - c->params);
}

/* Parses argv into values[] (one slot per param, NULL = not given). */
static int parse_args(const struct mu_component *c, int argc, char **argv, cJSON **values,
                      struct mu_buf *err)
{
  const struct param *rem = NULL;
  for (size_t i = 0; i < c->nparams; i++)
    if (c->params[i].remainder)
      rem = &c->params[i];
  int i = 0;
  while (i < argc) {
    const char *a = argv[i];
    if (strcmp(a, "--") == 0 || a[0] != '-' || a[1] == '\0') {
      if (rem == NULL) {
        mu_buf_printf(err,
                      "%s: unexpected argument '%s'; this component takes no script "
                      "arguments (see 'muster run %s --help')",
                      c->name, strcmp(a, "--") == 0 && i + 1 < argc ? argv[i + 1] : a, c->name);
        return MU_EINVAL;
      }
      if (strcmp(a, "--") == 0)
        i++;
      cJSON *arr = cJSON_CreateArray();
      for (; i < argc; i++)
        cJSON_AddItemToArray(arr, cJSON_CreateString(argv[i]));
      values[param_index(c, rem)] = arr;
      break;
    }
    const struct param *p = NULL;
    const char *val = NULL;
    char shown[160];
    if (a[1] == '-') {
      const char *name = a + 2;
      const char *eq = strchr(name, '=');
      size_t n = eq ? (size_t)(eq - name) : strlen(name);
      p = find_param(c, name, n);
      if (eq != NULL)
        val = eq + 1;
      snprintf(shown, sizeof(shown), "--%.*s", (int)n, name);
    } else {
      for (size_t k = 0; k < c->nparams; k++)
        if (c->params[k].short_name == a[1])
          p = &c->params[k];
      if (p != NULL && a[2] != '\0')
        val = a + 2;
      snprintf(shown, sizeof(shown), "-%c", a[1]);
    }
    if (p == NULL) {
      unknown_arg(c, a, err);
      return MU_EINVAL;
    }
    if (val == NULL) {
      if (p->type == P_BOOL) {
        /* `--debug` alone means true; `--debug True|False` as TorchX. */
        if (i + 1 < argc && argv[i + 1][0] != '-' &&
            (truthy_text(argv[i + 1]) || strcasecmp(argv[i + 1], "false") == 0 ||
             strcmp(argv[i + 1], "0") == 0 || strcasecmp(argv[i + 1], "no") == 0 ||
             strcasecmp(argv[i + 1], "off") == 0))
          val = argv[++i];
        else
          val = "true";
      } else {
        if (i + 1 >= argc) {
          mu_buf_printf(err, "%s: argument '%s' needs a value (%s)", c->name, shown,
                        ptype_names[p->type]);
          return MU_EINVAL;
        }
        val = argv[++i];
      }
    }
    int idx = param_index(c, p);
    if (values[idx] != NULL) {
      mu_buf_printf(err, "%s: argument '--%s' given twice; give it once", c->name, p->name);
      return MU_EINVAL;
    }
    char src[200];
    snprintf(src, sizeof(src), "%s: argument '%s'", c->name, shown);
    values[idx] = param_value(p, val, src, err);
    if (values[idx] == NULL)
      return MU_EINVAL;
    i++;
  }
  return 0;
}

/* ================================================================================ template */

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
  const struct param *p = NULL;
  for (size_t i = 0; i < ev->c->nparams; i++)
    if (strcmp(ev->c->params[i].name, name) == 0)
      p = &ev->c->params[i];
  *known = p != NULL;
  if (p == NULL)
    return NULL;
  const cJSON *v = ev->values[param_index(ev->c, p)];
  if (dot == NULL || v == NULL)
    return v;
  const char *field = dot + 1;
  if (cJSON_IsObject(v))
    return cJSON_GetObjectItemCaseSensitive(v, field);
  return NULL;
}

/* Text of a scalar value ("" for null). Lists join with ','. */
static void value_text(const cJSON *v, struct mu_buf *out)
{
  if (v == NULL || cJSON_IsNull(v))
    return;
  if (cJSON_IsString(v))
    mu_buf_puts(out, v->valuestring);
  else if (cJSON_IsNumber(v))
    mu_buf_printf(out, "%ld", (long)v->valuedouble);
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
      value_text(it, out);
    }
  }
}

static int is_truthy(const cJSON *v)
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

static void apply_filter(const char *f, size_t n, struct mu_buf *val)
{
  char *s = mu_buf_detach(val);
#define F_IS(name) (n == strlen(name) && strncmp(f, (name), n) == 0)
  if (F_IS("stem") || F_IS("basename")) {
    const char *base = strrchr(s, '/');
    base = base ? base + 1 : s;
    size_t bl = strlen(base);
    if (F_IS("stem")) {
      const char *dot = strrchr(base, '.');
      if (dot != NULL && dot != base)
        bl = (size_t)(dot - base);
    }
    mu_buf_append(val, base, bl);
  } else if (F_IS("dirname")) {
    const char *slash = strrchr(s, '/');
    if (slash != NULL)
      mu_buf_append(val, s, (size_t)(slash - s));
  } else if (F_IS("ext")) {
    const char *base = strrchr(s, '/');
    base = base ? base + 1 : s;
    const char *dot = strrchr(base, '.');
    mu_buf_puts(val, dot && dot != base ? dot : "");
  } else if (F_IS("lastdot")) {
    const char *dot = strrchr(s, '.');
    mu_buf_puts(val, dot ? dot + 1 : s);
  } else if (F_IS("quote")) {
    mu_shell_quote(s, val);
  } else if (F_IS("lower")) {
    for (char *p = s; *p; p++)
      mu_buf_putc(val, (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p));
  } else {
    mu_buf_puts(val, s); /* join/qjoin on a non-list; unknown filters were rejected by eval_alt */
  }
#undef F_IS
  mu_free(s);
}

/* Splits s into words as a POSIX shell does a literal line (no expansions), as Python's
 * shlex.split: blanks separate words; '...' is literal; in "..." a backslash escapes only
 * $ ` " \ and newline; elsewhere a backslash escapes the next character (a backslash-newline
 * vanishes); '' is an empty word. Appends the words to arr. Returns: 0; MU_EINVAL with *why
 * set for an unterminated quote or a trailing backslash. */
static int shell_split(const char *s, cJSON *arr, const char **why)
{
  struct mu_buf w = MU_BUF_INIT(1 << 20);
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

static int known_filter(const char *f, size_t n)
{
  static const char *const filters[] = {"stem",  "basename", "dirname", "ext",   "lastdot",
                                        "quote", "lower",    "join",    "qjoin", "split"};
  for (size_t i = 0; i < sizeof(filters) / sizeof(filters[0]); i++)
    if (strlen(filters[i]) == n && strncmp(filters[i], f, n) == 0)
      return 1;
  return 0;
}

/* Evaluates one alternative "ref|f1|f2" or "'literal'". *known = 0 when ref is no param (a
 * scheduler macro such as ${app_id}). Returns the value as text in out and its truthiness. */
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
  size_t p = rl;
  const cJSON *split = NULL; /* the list made by a split filter, until join/qjoin */
  /* join / qjoin see the list itself: items joined by ' ' (qjoin shell-quotes each). */
  size_t f0 = p + 1;
  while (f0 < n && s[f0] == ' ')
    f0++;
  int qj = f0 <= n && n - f0 >= 5 && strncmp(s + f0, "qjoin", 5) == 0;
  int pj = f0 <= n && n - f0 >= 4 && strncmp(s + f0, "join", 4) == 0;
  if (p < n && (qj || pj) && cJSON_IsArray(v)) {
    const cJSON *it;
    int first = 1;
    cJSON_ArrayForEach(it, v)
    {
      if (!first)
        mu_buf_putc(out, ' ');
      first = 0;
      struct mu_buf t = MU_BUF_INIT(1 << 20);
      value_text(it, &t);
      if (qj)
        mu_shell_quote(mu_buf_str(&t), out);
      else
        mu_buf_puts(out, mu_buf_str(&t));
      mu_buf_release(&t);
    }
    *raw = NULL;
    p = rl + 1;
    while (p < n && s[p] != '|')
      p++;
  } else {
    value_text(v, out);
  }
  while (p < n) {
    p++; /* '|' */
    size_t fs = p;
    while (p < n && s[p] != '|')
      p++;
    size_t a = fs, b = p;
    while (a < b && s[a] == ' ')
      a++;
    while (b > a && s[b - 1] == ' ')
      b--;
    const char *f = s + a;
    size_t fl = b - a;
    if (!known_filter(f, fl)) {
      mu_buf_printf(ev->err,
                    "%s: %s: '${%.*s}': unknown filter '%.*s'; use stem, basename, dirname, ext, "
                    "lastdot, quote, lower, join, qjoin or split",
                    ev->c->where, ev->path, (int)n, s, (int)fl, f);
      *known = -1;
      return 0;
    }
    if (split != NULL) {
      /* After split only join/qjoin: the words joined by ' ' (qjoin shell-quotes each). */
      int q = fl == 5 && strncmp(f, "qjoin", 5) == 0;
      if (!q && !(fl == 4 && strncmp(f, "join", 4) == 0)) {
        mu_buf_printf(ev->err,
                      "%s: %s: '${%.*s}': 'split' makes a list; only join or qjoin may follow it",
                      ev->c->where, ev->path, (int)n, s);
        *known = -1;
        return 0;
      }
      mu_buf_clear(out);
      const cJSON *it;
      cJSON_ArrayForEach(it, split)
      {
        if (it != split->child)
          mu_buf_putc(out, ' ');
        if (q)
          mu_shell_quote(it->valuestring, out);
        else
          mu_buf_puts(out, it->valuestring);
      }
      split = NULL;
      *raw = NULL;
      continue;
    }
    if (fl == 5 && strncmp(f, "split", 5) == 0) {
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
      value_text(arr, out);
      split = arr;
      *raw = arr;
      continue;
    }
    apply_filter(f, fl, out);
    *raw = NULL;
  }
  return out->len > 0 && (*raw == NULL || is_truthy(*raw));
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
    struct mu_buf tmp = MU_BUF_INIT(1 << 20);
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

static int eval_cond(const struct eval *ev, const char *cond, int *result)
{
  const char *op = strstr(cond, "==");
  int neg_op = 0;
  if (op == NULL) {
    op = strstr(cond, "!=");
    neg_op = op != NULL;
  }
  int known;
  const cJSON *raw;
  if (op != NULL) {
    struct mu_buf a = MU_BUF_INIT(1 << 16), b = MU_BUF_INIT(1 << 16);
    eval_expr(ev, cond, (size_t)(op - cond), &a, &known, &raw);
    int ka = known;
    eval_expr(ev, op + 2, strlen(op + 2), &b, &known, &raw);
    if (known == 0) {
      /* A bare word on the right is a literal: `launcher == torchrun`. */
      const char *w = op + 2;
      while (*w == ' ')
        w++;
      size_t wl = strlen(w);
      while (wl > 0 && w[wl - 1] == ' ')
        wl--;
      mu_buf_clear(&b);
      mu_buf_append(&b, w, wl);
      known = 1;
    }
    int eq = strcmp(mu_buf_str(&a), mu_buf_str(&b)) == 0;
    mu_buf_release(&a);
    mu_buf_release(&b);
    if (ka != 1 || known != 1) {
      if (ka == 0 || known == 0)
        mu_buf_printf(ev->err, "%s: condition '%s' refers to something that is not a parameter",
                      ev->path, cond);
      return MU_EINVAL;
    }
    *result = neg_op ? !eq : eq;
    return 0;
  }
  int neg = 0;
  while (*cond == ' ')
    cond++;
  if (*cond == '!') {
    neg = 1;
    cond++;
  }
  struct mu_buf a = MU_BUF_INIT(1 << 16);
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

static cJSON *eval_node(const struct eval *ev, const cJSON *t, int depth);

/* Evaluates a conditional mapping {if: COND, then: X, else: Y}; NULL result with no error
 * means "nothing" (no else). */
static int eval_if(const struct eval *ev, const cJSON *t, int depth, cJSON **out)
{
  static const char *const keys[] = {"if", "then", "else", NULL};
  *out = NULL;
  if (check_keys(t, keys, ev->c->where, ev->path, ev->err) != 0)
    return MU_EINVAL;
  const char *cond = str_of(t, "if");
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

/* Returns a new tree, or NULL after writing err. Lists splice: an item that evaluates to a
 * list (a conditional's branch, or "${list_param}") contributes its items. */
static cJSON *eval_node(const struct eval *ev, const cJSON *t, int depth)
{
  if (depth > EVAL_MAX_DEPTH) {
    mu_buf_printf(ev->err, "%s: template nested too deeply", ev->path);
    return NULL;
  }
  if (cJSON_IsString(t)) {
    struct mu_buf b = MU_BUF_INIT(1 << 20);
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

/* ================================================================================ tree -> app */

struct build {
  struct mu_buf *err;
  const char *where;
};

/* Text of an evaluated scalar; NULL for null. */
static const char *scalar(const cJSON *v)
{
  return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int get_long(const struct build *b, const char *ctx, const cJSON *v, long min, long *out)
{
  const char *s = scalar(v);
  if (s == NULL && cJSON_IsNumber(v)) {
    *out = (long)v->valuedouble;
    return 0;
  }
  if (s == NULL || mu_parse_long(s, min, LONG_MAX, out) != 0) {
    mu_buf_printf(b->err, "%s: must be an integer >= %ld, got '%s'", ctx, min, s ? s : "?");
    return MU_EINVAL;
  }
  return 0;
}

/* Merges a map (or a list of maps, later ones winning) into kv. */
static int set_map(const struct build *b, const char *ctx, const cJSON *v, struct mu_kvlist *kv)
{
  if (v == NULL || cJSON_IsNull(v))
    return 0;
  if (cJSON_IsArray(v)) {
    const cJSON *it;
    cJSON_ArrayForEach(it, v)
    {
      if (set_map(b, ctx, it, kv) != 0)
        return MU_EINVAL;
    }
    return 0;
  }
  if (!cJSON_IsObject(v)) {
    mu_buf_printf(b->err, "%s: must be a mapping of NAME: VALUE", ctx);
    return MU_EINVAL;
  }
  const cJSON *it;
  cJSON_ArrayForEach(it, v)
  {
    if (cJSON_IsNull(it))
      continue;
    struct mu_buf t = MU_BUF_INIT(1 << 20);
    value_text(it, &t);
    mu_kvlist_set(kv, it->string, mu_buf_str(&t));
    mu_buf_release(&t);
  }
  return 0;
}

typedef int role_setter(const struct build *b, const char *ctx, const cJSON *v, struct mu_role *r);

static int set_image(const struct build *b, const char *ctx, const cJSON *v, struct mu_role *r)
{
  (void)b;
  (void)ctx;
  const char *s = scalar(v);
  mu_free(r->image);
  r->image = s && *s ? mu_strdup(s) : NULL;
  return 0;
}

static int set_entrypoint(const struct build *b, const char *ctx, const cJSON *v, struct mu_role *r)
{
  const char *s = scalar(v);
  if (s == NULL) {
    mu_buf_printf(b->err, "%s: must be a string", ctx);
    return MU_EINVAL;
  }
  mu_free(r->entrypoint);
  r->entrypoint = mu_strdup(s);
  return 0;
}

static int set_args(const struct build *b, const char *ctx, const cJSON *v, struct mu_role *r)
{
  if (!cJSON_IsArray(v)) {
    mu_buf_printf(b->err, "%s: must be a list", ctx);
    return MU_EINVAL;
  }
  const cJSON *it;
  cJSON_ArrayForEach(it, v)
  {
    if (cJSON_IsNull(it))
      continue;
    if (cJSON_IsObject(it)) {
      mu_buf_printf(b->err, "%s: items must be strings, not mappings", ctx);
      return MU_EINVAL;
    }
    struct mu_buf t = MU_BUF_INIT(1 << 20);
    value_text(it, &t);
    mu_strvec_push(&r->args, mu_buf_str(&t));
    mu_buf_release(&t);
  }
  return 0;
}

static int set_env(const struct build *b, const char *ctx, const cJSON *v, struct mu_role *r)
{
  return set_map(b, ctx, v, &r->env);
}

static int set_metadata(const struct build *b, const char *ctx, const cJSON *v, struct mu_role *r)
{
  return set_map(b, ctx, v, &r->metadata);
}

static int set_num_replicas(const struct build *b, const char *ctx, const cJSON *v,
                            struct mu_role *r)
{
  return get_long(b, ctx, v, 1, &r->num_replicas);
}

static int set_min_replicas(const struct build *b, const char *ctx, const cJSON *v,
                            struct mu_role *r)
{
  if (cJSON_IsNull(v) || (scalar(v) && scalar(v)[0] == '\0'))
    return 0;
  return get_long(b, ctx, v, 1, &r->min_replicas);
}

static int set_max_retries(const struct build *b, const char *ctx, const cJSON *v,
                           struct mu_role *r)
{
  return get_long(b, ctx, v, 0, &r->max_retries);
}

static int set_retry_policy(const struct build *b, const char *ctx, const cJSON *v,
                            struct mu_role *r)
{
  const char *s = scalar(v);
  static const char *const names[] = {"APPLICATION", "REPLICA", "ROLE", NULL};
  for (size_t i = 0; s && names[i]; i++) {
    if (strcasecmp(s, names[i]) == 0) {
      r->retry_policy = (enum mu_retry_policy)i;
      return 0;
    }
  }
  mu_buf_printf(b->err, "%s: must be APPLICATION, REPLICA or ROLE, got '%s'", ctx, s ? s : "?");
  return MU_EINVAL;
}

static int set_mounts(const struct build *b, const char *ctx, const cJSON *v, struct mu_role *r)
{
  if (cJSON_IsNull(v))
    return 0;
  if (!cJSON_IsArray(v)) {
    mu_buf_printf(b->err, "%s: must be a list (type=bind,src=..,dst=..)", ctx);
    return MU_EINVAL;
  }
  struct mu_strvec items = MU_STRVEC_INIT;
  const cJSON *it;
  cJSON_ArrayForEach(it, v)
  {
    if (cJSON_IsString(it))
      mu_cfg_split_list(it->valuestring, &items);
  }
  struct mu_buf e = MU_BUF_INIT(1024);
  int rc = mu_mounts_parse(r, items.v, items.n, &e);
  if (rc != 0)
    mu_buf_printf(b->err, "%s", mu_buf_str(&e));
  mu_buf_release(&e);
  mu_strvec_release(&items);
  return rc;
}

static int set_ports(const struct build *b, const char *ctx, const cJSON *v, struct mu_role *r)
{
  if (cJSON_IsNull(v))
    return 0;
  if (!cJSON_IsObject(v)) {
    mu_buf_printf(b->err, "%s: must be a mapping NAME: PORT", ctx);
    return MU_EINVAL;
  }
  const cJSON *it;
  cJSON_ArrayForEach(it, v)
  {
    long port;
    char sub[256];
    snprintf(sub, sizeof(sub), "%s.%s", ctx, it->string);
    if (get_long(b, sub, it, 1, &port) != 0)
      return MU_EINVAL;
    r->ports = mu_realloc(r->ports, (r->nports + 1) * sizeof(*r->ports));
    r->ports[r->nports].name = mu_strdup(it->string);
    r->ports[r->nports].port = port;
    r->nports++;
  }
  return 0;
}

static int set_resource(const struct build *b, const char *ctx, const cJSON *v, struct mu_role *r)
{
  static const char *const keys[] = {"h", "cpu", "gpu", "memMB", "devices", "capabilities", NULL};
  if (cJSON_IsNull(v))
    return 0;
  if (!cJSON_IsObject(v)) {
    mu_buf_printf(b->err, "%s: must be a mapping (h, cpu, gpu, memMB, devices, capabilities)", ctx);
    return MU_EINVAL;
  }
  if (check_keys(v, keys, b->where, ctx, b->err) != 0)
    return MU_EINVAL;
  const char *h = scalar(cJSON_GetObjectItemCaseSensitive(v, "h"));
  if (h != NULL && h[0] != '\0') {
    /* A named resource wins over cpu/gpu/memMB (TorchX's specs.resource). */
    struct mu_buf e = MU_BUF_INIT(1024);
    int rc = mu_named_resource(h, &r->resource, &e);
    if (rc != 0)
      mu_buf_printf(b->err, "%s.h: %s", ctx, mu_buf_str(&e));
    mu_buf_release(&e);
    return rc;
  }
  const struct {
    const char *key;
    long *dst;
  } nums[] = {{"cpu", &r->resource.cpu}, {"gpu", &r->resource.gpu}, {"memMB", &r->resource.memMB}};
  for (size_t i = 0; i < 3; i++) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(v, nums[i].key);
    if (x == NULL || cJSON_IsNull(x) || (scalar(x) && scalar(x)[0] == '\0'))
      continue;
    char sub[256];
    snprintf(sub, sizeof(sub), "%s.%s", ctx, nums[i].key);
    if (get_long(b, sub, x, 0, nums[i].dst) != 0)
      return MU_EINVAL;
  }
  const cJSON *it;
  cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(v, "devices"))
  {
    long n;
    char sub[256];
    snprintf(sub, sizeof(sub), "%s.devices.%s", ctx, it->string ? it->string : "?");
    if (get_long(b, sub, it, 0, &n) != 0)
      return MU_EINVAL;
    if (n > 0)
      mu_resource_add_device(&r->resource, it->string, n);
  }
  return set_map(b, ctx, cJSON_GetObjectItemCaseSensitive(v, "capabilities"),
                 &r->resource.capabilities);
}

/* The role keys (STYLE.md #20): key -> setter. "name" is handled by the caller. */
static const struct role_key {
  const char *key;
  role_setter *set;
} role_keys[] = {
    {"args", set_args},
    {"entrypoint", set_entrypoint},
    {"env", set_env},
    {"image", set_image},
    {"max_retries", set_max_retries},
    {"metadata", set_metadata},
    {"min_replicas", set_min_replicas},
    {"mounts", set_mounts},
    {"num_replicas", set_num_replicas},
    {"port_map", set_ports},
    {"resource", set_resource},
    {"retry_policy", set_retry_policy},
};

static int build_role(const struct build *b, size_t idx, const cJSON *jr, struct mu_app *app)
{
  char ctx[64];
  snprintf(ctx, sizeof(ctx), "app.roles[%zu]", idx);
  if (!cJSON_IsObject(jr)) {
    mu_buf_printf(b->err, "%s: %s: must be a mapping", b->where, ctx);
    return MU_EINVAL;
  }
  const char *name = scalar(cJSON_GetObjectItemCaseSensitive(jr, "name"));
  struct mu_role *r = mu_app_add_role(app, name ? name : "");
  const cJSON *it;
  cJSON_ArrayForEach(it, jr)
  {
    if (strcmp(it->string, "name") == 0)
      continue;
    const struct role_key *k = NULL;
    for (size_t i = 0; i < sizeof(role_keys) / sizeof(role_keys[0]); i++)
      if (strcmp(role_keys[i].key, it->string) == 0)
        k = &role_keys[i];
    if (k == NULL) {
      const char *words[sizeof(role_keys) / sizeof(role_keys[0]) + 2];
      size_t n = 0;
      for (; n < sizeof(role_keys) / sizeof(role_keys[0]); n++)
        words[n] = role_keys[n].key;
      words[n++] = "name";
      words[n] = NULL;
      const char *best = closest_word(words, it->string);
      mu_buf_printf(b->err, "%s: %s: unknown key '%s'%s%s%s", b->where, ctx, it->string,
                    best ? "; did you mean '" : "", best ? best : "", best ? "'?" : "");
      return MU_EINVAL;
    }
    char sub[128];
    snprintf(sub, sizeof(sub), "%s.%s", ctx, it->string);
    if (k->set(b, sub, it, r) != 0)
      return MU_EINVAL;
  }
  return 0;
}

static int build_app(const struct build *b, const cJSON *t, struct mu_app **out)
{
  static const char *const keys[] = {"name", "roles", "metadata", NULL};
  if (check_keys(t, keys, b->where, "app", b->err) != 0)
    return MU_EINVAL;
  const char *name = scalar(cJSON_GetObjectItemCaseSensitive(t, "name"));
  struct mu_app *app = mu_app_new(name ? name : "");
  const cJSON *roles = cJSON_GetObjectItemCaseSensitive(t, "roles");
  int rc = 0;
  if (!cJSON_IsArray(roles)) {
    mu_buf_printf(b->err, "%s: app.roles: must be a list of roles", b->where);
    rc = MU_EINVAL;
    goto out;
  }
  const cJSON *jr;
  size_t i = 0;
  cJSON_ArrayForEach(jr, roles)
  {
    rc = build_role(b, i++, jr, app);
    if (rc != 0)
      goto out;
  }
  rc = set_map(b, "app.metadata", cJSON_GetObjectItemCaseSensitive(t, "metadata"), &app->metadata);
out:
  if (rc != 0) {
    mu_app_free(app);
    app = NULL;
  }
  *out = app;
  return rc;
}

/* ================================================================================ build */

static int run_checks(const struct mu_component *c, cJSON **values, struct mu_buf *err)
{
  static const char *const keys[] = {"exactly_one", "at_most_one", "message", NULL};
  const cJSON *chk;
  size_t idx = 0;
  cJSON_ArrayForEach(chk, c->checks)
  {
    char ctx[32];
    snprintf(ctx, sizeof(ctx), "checks[%zu]", idx++);
    if (check_keys(chk, keys, c->where, ctx, err) != 0)
      return MU_EINVAL;
    const cJSON *set = cJSON_GetObjectItemCaseSensitive(chk, "exactly_one");
    int exactly = set != NULL;
    if (set == NULL)
      set = cJSON_GetObjectItemCaseSensitive(chk, "at_most_one");
    int count = 0;
    const cJSON *n;
    struct mu_buf names = MU_BUF_INIT(1024);
    cJSON_ArrayForEach(n, set)
    {
      if (!cJSON_IsString(n))
        continue;
      mu_buf_printf(&names, "%s--%s", names.len ? ", " : "", n->valuestring);
      for (size_t i = 0; i < c->nparams; i++)
        if (strcmp(c->params[i].name, n->valuestring) == 0 && is_truthy(values[i]))
          count++;
    }
    int bad = exactly ? count != 1 : count > 1;
    if (bad) {
      const char *msg = str_of(chk, "message");
      if (msg != NULL)
        mu_buf_printf(err, "%s: %s", c->name, msg);
      else
        mu_buf_printf(err, "%s: give %s one of %s", c->name, exactly ? "exactly" : "at most",
                      mu_buf_str(&names));
      mu_buf_release(&names);
      return MU_EINVAL;
    }
    mu_buf_release(&names);
  }
  return 0;
}

int mu_component_build(const struct mu_component *c, int argc, char **argv,
                       const struct mu_config *cfg, struct mu_app **out, struct mu_buf *err)
{
  cJSON **values = mu_calloc(c->nparams ? c->nparams : 1, sizeof(cJSON *));
  cJSON *scratch = cJSON_CreateArray();
  cJSON *tree = NULL;
  int rc = 0;
  *out = NULL;
  rc = parse_args(c, argc, argv, values, err);
  if (rc != 0)
    goto out;
  /* Defaults: [component:<name>] in the config files, then the file's default. */
  char section[256];
  snprintf(section, sizeof(section), "component:%s", c->name);
  for (size_t i = 0; cfg != NULL && i < cfg->n; i++) {
    const struct mu_config_entry *e = &cfg->v[i];
    if (strcmp(e->section, section) != 0)
      continue;
    const struct param *p = find_param(c, e->key, strlen(e->key));
    if (p == NULL) {
      struct mu_buf tmp = MU_BUF_INIT(1024);
      unknown_arg(c, e->key, &tmp);
      mu_buf_printf(err, "%s: %s", e->where, mu_buf_str(&tmp));
      mu_buf_release(&tmp);
      rc = MU_EINVAL;
      goto out;
    }
    size_t idx = (size_t)param_index(c, p);
    if (values[idx] != NULL || e->value == NULL)
      continue;
    char src[600];
    snprintf(src, sizeof(src), "%s: %s", e->where, e->key);
    values[idx] = param_value(p, e->value, src, err);
    if (values[idx] == NULL) {
      rc = MU_EINVAL;
      goto out;
    }
  }
  for (size_t i = 0; i < c->nparams; i++) {
    const struct param *p = &c->params[i];
    if (values[i] != NULL)
      continue;
    if (p->required) {
      mu_buf_printf(err, "%s: missing required argument --%s (%s); see 'muster run %s --help'",
                    c->name, p->name, p->help, c->name);
      rc = MU_EINVAL;
      goto out;
    }
    if (p->def != NULL) {
      char src[300];
      snprintf(src, sizeof(src), "%s: default of --%s", c->where, p->name);
      values[i] = param_value(p, p->def, src, err);
      if (values[i] == NULL) {
        rc = MU_EINVAL;
        goto out;
      }
    } else if (p->remainder || p->type == P_LIST) {
      values[i] = cJSON_CreateArray();
    } else if (p->type == P_MAP) {
      values[i] = cJSON_CreateObject();
    } else {
      values[i] = cJSON_CreateNull();
    }
  }
  /* jobsize overrides: --nnodes N|MIN:MAX and --nproc_per_node P. */
  for (size_t i = 0; i < c->nparams; i++) {
    const struct param *p = &c->params[i];
    if (p->type != P_JOBSIZE || !cJSON_IsObject(values[i]))
      continue;
    long mn = (long)cJSON_GetObjectItem(values[i], "min")->valuedouble;
    long mx = (long)cJSON_GetObjectItem(values[i], "max")->valuedouble;
    long np = (long)cJSON_GetObjectItem(values[i], "nproc")->valuedouble;
    const struct param *pn =
        p->nnodes_param ? find_param(c, p->nnodes_param, strlen(p->nnodes_param)) : NULL;
    const struct param *pp =
        p->nproc_param ? find_param(c, p->nproc_param, strlen(p->nproc_param)) : NULL;
    const cJSON *vn = pn ? values[param_index(c, pn)] : NULL;
    const cJSON *vp = pp ? values[param_index(c, pp)] : NULL;
    if (is_truthy(vn)) {
      char tmp[96];
      long a, bb, ignore;
      snprintf(tmp, sizeof(tmp), "%sx1", cJSON_GetStringValue(vn));
      if (mu_parse_jobsize(tmp, &a, &bb, &ignore) != 0) {
        mu_buf_printf(err, "%s: argument '--%s' expects N or MIN:MAX, got '%s'", c->name, pn->name,
                      cJSON_GetStringValue(vn));
        rc = MU_EINVAL;
        goto out;
      }
      mn = a;
      mx = bb;
    }
    if (is_truthy(vp)) {
      np = (long)vp->valuedouble;
      if (np < 1) {
        mu_buf_printf(err, "%s: argument '--%s' must be 1 or more", c->name, pp->name);
        rc = MU_EINVAL;
        goto out;
      }
    }
    cJSON_Delete(values[i]);
    values[i] = jobsize_json(mn, mx, np);
  }
  rc = run_checks(c, values, err);
  if (rc != 0)
    goto out;
  struct eval ev = {c, values, err, "app", scratch};
  tree = eval_node(&ev, c->app, 0);
  if (tree == NULL) {
    rc = MU_EINVAL;
    goto out;
  }
  struct build b = {err, c->where};
  rc = build_app(&b, tree, out);
out:
  for (size_t i = 0; i < c->nparams; i++)
    cJSON_Delete(values[i]);
  mu_free(values);
  cJSON_Delete(tree);
  cJSON_Delete(scratch);
  return rc;
}
