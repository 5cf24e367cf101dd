/* -cfg strings and .musterconfig files (see config.h for the rules). */
#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "muster/errno.h"

#include "alloc.h"
#include "client/backends.h"
#include "config.h"
#include "fsutil.h"
#include "opts.h"
#include "suggest.h"

#define CONFIG_MAX_BYTES (1 << 20)

/* ---------------------------------------------------------------------------------------------
 * INI files
 */

static char *trim(char *s)
{
  while (isspace((unsigned char)*s))
    s++;
  size_t n = strlen(s);
  while (n > 0 && isspace((unsigned char)s[n - 1]))
    s[--n] = '\0';
  return s;
}

static void entry_add(struct mu_config *c, const char *section, const char *key, const char *value,
                      const char *where)
{
  if (mu_config_find(c, section, key) != NULL)
    return; /* earlier files win */
  if (c->n == c->cap) {
    c->cap = c->cap ? c->cap * 2 : 16;
    c->v = mu_realloc(c->v, c->cap * sizeof(*c->v));
  }
  struct mu_config_entry *e = &c->v[c->n++];
  e->section = mu_strdup(section);
  e->key = mu_strdup(key);
  e->value = value ? mu_strdup(value) : NULL;
  e->where = mu_strdup(where);
}

/* Cuts an inline comment: a '#' that follows a blank, outside quotes (`queue = test  # the
 * team's queue`). A value holding " #" is quoted: `"a #b"`. (';' stays: it separates list
 * items, `a ; b`.) */
static void cut_comment(char *t)
{
  char quote = 0;
  for (char *p = t; *p; p++) {
    if (quote) {
      quote = *p == quote ? 0 : quote;
    } else if (*p == '"' || *p == '\'') {
      quote = *p;
    } else if (*p == '#' && p > t && isspace((unsigned char)p[-1])) {
      *p = '\0';
      return;
    }
  }
}

int mu_config_parse(struct mu_config *c, const char *text, const char *where, struct mu_buf *err)
{
  char *copy = mu_strdup(text);
  char *section = NULL;
  int rc = 0;
  int lineno = 0;
  char *save = copy;
  while (save != NULL && *save != '\0') {
    char *line = save;
    char *nl = strchr(line, '\n');
    if (nl != NULL) {
      *nl = '\0';
      save = nl + 1;
    } else {
      save = NULL;
    }
    lineno++;
    char *t = trim(line);
    if (*t == '\0' || *t == '#' || *t == ';')
      continue;
    cut_comment(t);
    t = trim(t);
    if (*t == '[') {
      char *end = strchr(t, ']');
      if (end == NULL || end[1] != '\0' || end == t + 1) {
        mu_buf_printf(err, "%s:%d: malformed section header '%s'; write [name]", where, lineno, t);
        rc = MU_EPARSE;
        goto out;
      }
      *end = '\0';
      mu_free(section);
      section = mu_strdup(trim(t + 1));
      continue;
    }
    char *eq = strchr(t, '=');
    if (eq == NULL) {
      char *colon = strchr(t, ':');
      eq = colon;
    }
    if (eq == NULL) {
      mu_buf_printf(err, "%s:%d: expected 'key = value', got '%s'", where, lineno, t);
      rc = MU_EPARSE;
      goto out;
    }
    if (section == NULL) {
      mu_buf_printf(err, "%s:%d: 'key = value' before any [section]", where, lineno);
      rc = MU_EPARSE;
      goto out;
    }
    *eq = '\0';
    char *key = trim(t);
    char *val = trim(eq + 1);
    if (*key == '\0') {
      mu_buf_printf(err, "%s:%d: empty key", where, lineno);
      rc = MU_EPARSE;
      goto out;
    }
    char loc[512];
    snprintf(loc, sizeof(loc), "%s:%d", where, lineno);
    entry_add(c, section, key, strcmp(val, "None") == 0 ? NULL : val, loc);
  }
out:
  mu_free(section);
  mu_free(copy);
  return rc;
}

static int load_file(struct mu_config *c, const char *path, struct mu_buf *err)
{
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return errno == ENOENT
               ? 0
               : (mu_buf_printf(err, "cannot read '%s': %s", path, strerror(errno)), -errno);
  struct mu_buf b = MU_BUF_INIT(CONFIG_MAX_BYTES);
  char chunk[4096];
  size_t n;
  int rc = 0;
  while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
    if (mu_buf_append(&b, chunk, n) != 0) {
      mu_buf_printf(err, "'%s' is larger than %d bytes", path, CONFIG_MAX_BYTES);
      rc = MU_E2BIG;
      goto out;
    }
  }
  rc = mu_config_parse(c, mu_buf_str(&b), path, err);
out:
  fclose(f);
  mu_buf_release(&b);
  return rc;
}

/* Loads $VAR when it is set (and not empty), else $HOME/NAME then ./NAME. *found counts the
 * files that exist; *first (may be NULL) gets the first one's path. */
static int load_set(struct mu_config *c, const char *var, const char *name, int *found,
                    char **first, struct mu_buf *err)
{
  const char *env = getenv(var);
  const char *home = getenv("HOME");
  char path[4096];
  const char *paths[2];
  size_t np = 0;
  if (env != NULL && env[0] != '\0') {
    paths[np++] = env;
  } else {
    if (home != NULL && home[0] != '\0') {
      snprintf(path, sizeof(path), "%s/%s", home, name);
      paths[np++] = path;
    }
    paths[np++] = name;
  }
  for (size_t i = 0; i < np; i++) {
    if (access(paths[i], F_OK) != 0)
      continue;
    (*found)++;
    if (first != NULL && *first == NULL)
      *first = mu_strdup(paths[i]);
    int rc = load_file(c, paths[i], err);
    if (rc != 0)
      return rc;
  }
  return 0;
}

int mu_config_load(struct mu_config *c, struct mu_buf *err)
{
  int found = 0;
  int rc = load_set(c, "MUSTERCONFIG", ".musterconfig", &found, NULL, err);
  const char *env = getenv("MUSTERCONFIG");
  if (rc != 0 || found > 0 || (env != NULL && env[0] != '\0'))
    return rc;
  rc = load_set(c, "TORCHXCONFIG", ".torchxconfig", &found, &c->torchx, err);
  /* TorchX's local scheduler is local_cwd. */
  for (size_t i = 0; i < c->n; i++) {
    if (strcmp(c->v[i].section, "local_cwd") == 0) {
      mu_free(c->v[i].section);
      c->v[i].section = mu_strdup("local");
    }
  }
  return rc;
}

const struct mu_config_entry *mu_config_find(const struct mu_config *c, const char *section,
                                             const char *key)
{
  for (size_t i = 0; c != NULL && i < c->n; i++)
    if (strcmp(c->v[i].section, section) == 0 && strcmp(c->v[i].key, key) == 0)
      return &c->v[i];
  return NULL;
}

void mu_config_release(struct mu_config *c)
{
  if (c == NULL)
    return;
  for (size_t i = 0; i < c->n; i++) {
    mu_free(c->v[i].section);
    mu_free(c->v[i].key);
    mu_free(c->v[i].value);
    mu_free(c->v[i].where);
  }
  mu_free(c->v);
  mu_free(c->torchx);
  c->v = NULL;
  c->torchx = NULL;
  c->n = c->cap = 0;
}

/* ---------------------------------------------------------------------------------------------
 * -cfg strings and the resolved configuration
 */

/* Strips one pair of matching outer quotes. Returns a new string. */
static char *unquote(const char *s, size_t n)
{
  /* Only a value that is one quoted string: "a";"b" keeps its quotes (a list's items). */
  if (n >= 2 && (s[0] == '\'' || s[0] == '"') && s[n - 1] == s[0] &&
      memchr(s + 1, s[0], n - 2) == NULL)
    return mu_strndup(s + 1, n - 2);
  return mu_strndup(s, n);
}

/* The index of the first of `chars` in s[i, end) outside quotes ('...' or "..." from i on), or
 * end when there is none. */
static size_t outside_quotes(const char *s, size_t i, size_t end, const char *chars)
{
  char q = 0;
  for (; i < end; i++) {
    if (q) {
      if (s[i] == q)
        q = 0;
    } else if (s[i] == '\'' || s[i] == '"') {
      q = s[i];
    } else if (strchr(chars, s[i]) != NULL) {
      return i;
    }
  }
  return end;
}

/* The '=' of s outside quotes, into cuts (room for strlen(s) + 1). Returns: how many. */
static size_t find_cuts(const char *s, size_t len, size_t *cuts)
{
  size_t n = 0;
  for (size_t i = outside_quotes(s, 0, len, "="); i < len; i = outside_quotes(s, i + 1, len, "="))
    cuts[n++] = i;
  return n;
}

/* Returns: the last ',' or ';' outside quotes in s[from, to), or SIZE_MAX. */
static size_t last_separator(const char *s, size_t from, size_t to)
{
  size_t d = SIZE_MAX;
  for (size_t i = outside_quotes(s, from, to, ",;"); i < to; i = outside_quotes(s, i + 1, to, ",;"))
    d = i;
  return d;
}

/* Sets key = s[from, vend) (unquoted) in out. Returns: 0, or MU_EINVAL with the message in err
 * (an empty key, no value). */
static int add_pair(const char *s, char *key, size_t from, size_t vend, struct mu_kvlist *out,
                    struct mu_buf *err)
{
  char *k = mu_strdup(trim(key));
  int rc = 0;
  if (*k == '\0') {
    mu_buf_printf(err, "empty key in '%s'", s);
    rc = MU_EINVAL;
  } else if (vend == from) {
    mu_buf_printf(err, "'%s' has no value; write %s=VALUE (quote an empty value: %s='')", k, k, k);
    rc = MU_EINVAL;
  } else {
    char *v = unquote(s + from, vend - from);
    mu_kvlist_set(out, k, v);
    mu_free(v);
  }
  mu_free(k);
  return rc;
}

int mu_cfg_split(const char *s, struct mu_kvlist *out, struct mu_buf *err)
{
  if (s == NULL || *s == '\0')
    return 0;
  size_t len = strlen(s);
  size_t *cuts = mu_malloc((len + 2) * sizeof(size_t));
  size_t ncuts = find_cuts(s, len, cuts);
  int rc = 0;
  char *key = NULL;
  if (ncuts == 0) {
    mu_buf_printf(err, "'%s' is not KEY=VALUE; write -cfg key=value,key2=value2", s);
    rc = MU_EINVAL;
  } else {
    key = mu_strndup(s, cuts[0]);
  }
  /* Each value runs to the last separator before the next '=', which starts the next key. */
  for (size_t c = 0; rc == 0 && c < ncuts; c++) {
    size_t from = cuts[c] + 1, to = c + 1 < ncuts ? cuts[c + 1] : len;
    size_t vend = c + 1 < ncuts ? last_separator(s, from, to) : to;
    if (vend == SIZE_MAX) {
      /* Most likely a value with '=' in it (kubectl's taint form k=v:Effect): show how to
       * quote it, up to the next ',' after that '='. */
      size_t vto = to + strcspn(s + to, ",");
      char *k = mu_strdup(trim(key));
      mu_buf_printf(err,
                    "cannot split '%.*s' into VALUE,NEXTKEY: separate pairs with ',' or ';', "
                    "and quote a value that contains '=': -cfg '%s=\"%.*s\"'",
                    (int)(to - from), s + from, k, (int)(vto - from), s + from);
      mu_free(k);
      rc = MU_EINVAL;
      break;
    }
    rc = add_pair(s, key, from, vend, out, err);
    mu_free(key);
    key = c + 1 < ncuts ? mu_strndup(s + vend + 1, to - vend - 1) : NULL;
  }
  mu_free(key);
  mu_free(cuts);
  return rc;
}

/* Appends the trimmed non-empty pieces of [a, b) split on ',' and ';'. */
static void push_pieces(const char *a, const char *b, struct mu_strvec *out)
{
  while (a <= b) {
    const char *e = a;
    while (e < b && *e != ',' && *e != ';')
      e++;
    const char *x = a, *y = e;
    while (x < y && isspace((unsigned char)*x))
      x++;
    while (y > x && isspace((unsigned char)y[-1]))
      y--;
    if (y > x)
      mu_strvec_push_owned(out, mu_strndup(x, (size_t)(y - x)));
    a = e + 1;
  }
}

void mu_cfg_split_list(const char *v, struct mu_strvec *out)
{
  const char *p = v;
  while (*p) {
    /* An item ends at ',' or ';' outside quotes; a quoted item loses its quotes and is split
     * again inside (quotes protect '=' from -cfg, not the list separators). */
    size_t n = 0;
    char q = 0;
    for (; p[n] != '\0' && (q || (p[n] != ',' && p[n] != ';')); n++) {
      if (q && p[n] == q)
        q = 0;
      else if (!q && (p[n] == '"' || p[n] == '\''))
        q = p[n];
    }
    const char *a = p, *b = p + n;
    while (a < b && isspace((unsigned char)*a))
      a++;
    while (b > a && isspace((unsigned char)b[-1]))
      b--;
    if (b - a >= 2 && (*a == '"' || *a == '\'') && b[-1] == *a &&
        memchr(a + 1, *a, (size_t)(b - a - 2)) == NULL) {
      a++;
      b--;
    }
    push_pieces(a, b, out);
    p += n;
    if (*p)
      p++;
  }
}

static const char *const type_names[] = {"str", "int", "float", "bool", "list", "map"};

/* Checks and normalises one value. Returns a new string or NULL with err set. */
static char *cast_value(const struct mu_runopt *o, const char *v, const char *where,
                        struct mu_buf *err)
{
  long l;
  double d;
  switch (o->type) {
  case MU_RUNOPT_STR:
    return mu_strdup(v);
  case MU_RUNOPT_INT:
    if (mu_parse_long(v, LONG_MIN, LONG_MAX, &l) == 0)
      return mu_asprintf("%ld", l);
    break;
  case MU_RUNOPT_FLOAT:
    if (mu_parse_double(v, &d) == 0)
      return mu_strdup(v);
    break;
  case MU_RUNOPT_BOOL:
    if (strcasecmp(v, "true") == 0 || strcmp(v, "1") == 0 || strcasecmp(v, "yes") == 0 ||
        strcasecmp(v, "on") == 0)
      return mu_strdup("true");
    if (strcasecmp(v, "false") == 0 || strcmp(v, "0") == 0 || strcasecmp(v, "no") == 0 ||
        strcasecmp(v, "off") == 0)
      return mu_strdup("false");
    break;
  case MU_RUNOPT_LIST: {
    struct mu_strvec sv = MU_STRVEC_INIT;
    struct mu_buf b = MU_BUF_INIT(SIZE_MAX);
    mu_cfg_split_list(v, &sv);
    for (size_t i = 0; i < sv.n; i++)
      mu_buf_printf(&b, "%s%s", i ? "," : "", sv.v[i]);
    mu_strvec_release(&sv);
    return mu_buf_detach(&b);
  }
  case MU_RUNOPT_MAP: {
    struct mu_strvec sv = MU_STRVEC_INIT;
    struct mu_buf b = MU_BUF_INIT(SIZE_MAX);
    mu_cfg_split_list(v, &sv);
    for (size_t i = 0; i < sv.n; i++) {
      if (strchr(sv.v[i], ':') == NULL) {
        mu_buf_printf(err, "%s%s: item '%s' of '%s' is not KEY:VALUE (map runopt: k:v;k2:v2)",
                      where, o->name, sv.v[i], v);
        mu_strvec_release(&sv);
        mu_buf_release(&b);
        return NULL;
      }
      mu_buf_printf(&b, "%s%s", i ? "," : "", sv.v[i]);
    }
    mu_strvec_release(&sv);
    return mu_buf_detach(&b);
  }
  }
  mu_buf_printf(err, "%s%s: expects a %s, got '%s'", where, o->name, type_names[o->type], v);
  return NULL;
}

static const struct mu_runopt *runopt_find(const struct mu_runopt *runopts, const char *key)
{
  for (const struct mu_runopt *o = runopts; o != NULL && o->name != NULL; o++)
    if (strcmp(o->name, key) == 0)
      return o;
  return NULL;
}

static void unknown_key(const char *sched, const struct mu_runopt *runopts, const char *key,
                        const char *where, struct mu_buf *err)
{
  struct mu_suggest sg;
  mu_suggest_init(&sg, key);
  for (const struct mu_runopt *o = runopts; o != NULL && o->name != NULL; o++)
    mu_suggest_add(&sg, o->name);
  const char *best = mu_suggest_best(&sg);
  if (best != NULL)
    mu_buf_printf(err,
                  "%sunknown -cfg key '%s' for the %s scheduler; did you mean '%s'? (see "
                  "'muster runopts %s')",
                  where, key, sched, best, sched);
  else
    mu_buf_printf(err, "%sunknown -cfg key '%s' for the %s scheduler; see 'muster runopts %s'",
                  where, key, sched, sched);
}

int mu_cfg_resolve(const char *sched, const struct mu_runopt *runopts, const struct mu_kvlist *cli,
                   const struct mu_config *file, struct mu_cfg *out, struct mu_buf *err)
{
  int rc = 0;
  memset(out, 0, sizeof(*out));
  for (size_t i = 0; cli != NULL && i < cli->n; i++) {
    if (runopt_find(runopts, cli->v[i].key) == NULL) {
      unknown_key(sched, runopts, cli->v[i].key, "", err);
      return MU_EINVAL;
    }
  }
  for (size_t i = 0; file != NULL && i < file->n; i++) {
    const struct mu_config_entry *e = &file->v[i];
    if (strcmp(e->section, sched) == 0 && runopt_find(runopts, e->key) == NULL) {
      char where[600];
      snprintf(where, sizeof(where), "%s: ", e->where);
      unknown_key(sched, runopts, e->key, where, err);
      return MU_EINVAL;
    }
  }
  for (const struct mu_runopt *o = runopts; o != NULL && o->name != NULL; o++) {
    const char *v = cli ? mu_kvlist_get(cli, o->name) : NULL;
    char where[600] = "-cfg ";
    if (v == NULL) {
      const struct mu_config_entry *e = mu_config_find(file, sched, o->name);
      if (e != NULL) {
        snprintf(where, sizeof(where), "%s: ", e->where);
        v = e->value; /* NULL for None: falls back to the default */
      }
    }
    if (v == NULL) {
      v = o->def;
      snprintf(where, sizeof(where), "default of ");
    }
    if (v == NULL) {
      if (o->required) {
        mu_buf_printf(err, "the %s scheduler needs -cfg %s=%s (%s); see 'muster runopts %s'", sched,
                      o->name, type_names[o->type], o->help ? o->help : "", sched);
        rc = MU_EINVAL;
        goto out;
      }
      continue;
    }
    char field[700];
    snprintf(field, sizeof(field), "%s%s", where, o->name);
    if (mu_text_check(field, v, 0, err) != 0) { /* it may reach a script or a manifest */
      rc = MU_EINVAL;
      goto out;
    }
    char *cast = cast_value(o, v, where, err);
    if (cast == NULL) {
      rc = MU_EINVAL;
      goto out;
    }
    mu_kvlist_set(&out->values, o->name, cast);
    mu_free(cast);
  }
out:
  if (rc != 0)
    mu_cfg_release(out);
  return rc;
}

const char *mu_cfg_get(const struct mu_cfg *cfg, const char *key)
{
  return cfg == NULL ? NULL : mu_kvlist_get(&cfg->values, key);
}

int mu_cfg_get_bool(const struct mu_cfg *cfg, const char *key)
{
  const char *v = mu_cfg_get(cfg, key);
  return v != NULL && (strcasecmp(v, "true") == 0 || strcmp(v, "1") == 0 ||
                       strcasecmp(v, "yes") == 0 || strcasecmp(v, "on") == 0);
}

void mu_cfg_release(struct mu_cfg *cfg)
{
  if (cfg != NULL)
    mu_kvlist_release(&cfg->values);
}

/* ---------------------------------------------------------------------------------------------
 * -cfg rdzv: the words, then the endpoint forms: the rendezvous backends' table
 * (client/backends.h), a scheme prefix each, the bare HOST:PORT for the default one.
 */

enum rdzv_word { RDZV_AUTO, RDZV_JOB, RDZV_NONE };
static const struct {
  const char *word;
  enum rdzv_word what;
} rdzv_words[] = {
    {"auto", RDZV_AUTO}, {"job", RDZV_JOB},    {"always", RDZV_JOB},
    {"none", RDZV_NONE}, {"never", RDZV_NONE},
};
/* A job's torchrun may also be pointed at a real etcd's v2 API by HOST:PORT. */
#define BARE_TOO " (or etcd with the v2 API)"

/* HOST:PORT, or several separated by commas (a cluster's members). */
static int host_port_ok(const char *s)
{
  char one[300];
  for (;;) {
    size_t n = strcspn(s, ",");
    if (n == 0 || n >= sizeof(one))
      return 0;
    memcpy(one, s, n);
    one[n] = '\0';
    const char *colon = strrchr(one, ':');
    long port = 0;
    if (colon == NULL || colon == one || mu_parse_long(colon + 1, 1, 65535, &port) != 0)
      return 0;
    if (s[n] == '\0')
      return 1;
    s += n + 1;
  }
}

int mu_cfg_rdzv(const struct mu_cfg *cfg, const struct mu_app *app, struct mu_rdzv_choice *out,
                struct mu_buf *err)
{
  const char *v = mu_cfg_get(cfg, "rdzv");
  memset(out, 0, sizeof(*out));
  out->form = "";
  if (v == NULL)
    v = "auto";
  int uses_rdzv = app != NULL && mu_app_mentions(app, "${rdzv_endpoint}");
  int uses = uses_rdzv || (app != NULL && mu_app_mentions(app, "${c10d_endpoint}"));
  for (size_t i = 0; i < sizeof(rdzv_words) / sizeof(rdzv_words[0]); i++) {
    if (strcmp(v, rdzv_words[i].word) != 0)
      continue;
    if (rdzv_words[i].what == RDZV_NONE && uses) {
      mu_buf_printf(err,
                    "-cfg rdzv=%s: the job uses %s and gets no musterd; use rdzv=auto, or "
                    "rdzv=HOST:PORT of a running one",
                    v, uses_rdzv ? "${rdzv_endpoint}" : "${c10d_endpoint}");
      return MU_EINVAL;
    }
    out->own = rdzv_words[i].what == RDZV_JOB || (rdzv_words[i].what == RDZV_AUTO && uses);
    return 0;
  }
  for (const struct mu_client_backend *b = mu_client_backends; b->name != NULL; b++) {
    const char *rest = v;
    if (b->scheme != NULL) {
      size_t n = strlen(b->scheme);
      if (strncmp(v, b->scheme, n) != 0 || strncmp(v + n, "://", 3) != 0)
        continue;
      rest = v + n + 3;
    } else if (strstr(v, "://") != NULL) {
      continue;
    }
    if (host_port_ok(rest)) {
      out->endpoint = mu_strdup(v);
      out->form = b->scheme != NULL ? b->scheme : "";
      return 0;
    }
  }
  struct mu_suggest sg;
  mu_suggest_init(&sg, v);
  for (size_t i = 0; i < sizeof(rdzv_words) / sizeof(rdzv_words[0]); i++)
    mu_suggest_add(&sg, rdzv_words[i].word);
  const char *best = mu_suggest_best(&sg);
  mu_buf_printf(err, "-cfg rdzv='%s' is not known", v);
  if (best != NULL)
    mu_buf_printf(err, "; did you mean '%s'?", best);
  mu_buf_puts(err, "; use auto (a musterd for the job when it uses ${rdzv_endpoint}), job "
                   "(always one), none");
  for (const struct mu_client_backend *b = mu_client_backends; b->name != NULL; b++)
    mu_buf_printf(err, ", %s%s%s%s", b->scheme != NULL ? b->scheme : "",
                  b->scheme != NULL ? "://" : "", b->endpoint_form, b->scheme ? "" : BARE_TOO);
  return MU_EINVAL;
}

/* ---------------------------------------------------------------------------------------------
 * -cfg rdzv_auth, rdzv_token_file
 */

/* The index of a role that runs torchrun with an etcd rendezvous backend (it sends no token:
 * torch's etcd clients have no bearer token), or -1. */
static long etcd_torchrun_role(const struct mu_app *app)
{
  static const char *const backends[] = {"etcd", "etcd-v2"};
  for (size_t i = 0; i < app->nroles; i++) {
    const struct mu_strvec *a = &app->roles[i].args;
    for (size_t k = 0; k < a->n; k++) {
      const char *v = NULL;
      if ((strcmp(a->v[k], "--rdzv_backend") == 0 || strcmp(a->v[k], "--rdzv-backend") == 0) &&
          k + 1 < a->n)
        v = a->v[k + 1];
      else if (strncmp(a->v[k], "--rdzv_backend=", 15) == 0 ||
               strncmp(a->v[k], "--rdzv-backend=", 15) == 0)
        v = a->v[k] + 15;
      for (size_t b = 0; v != NULL && b < sizeof(backends) / sizeof(backends[0]); b++)
        if (strcmp(v, backends[b]) == 0)
          return (long)i;
    }
  }
  return -1;
}

/* rdzv_token_file: readable, a first line, as an absolute path. */
static int token_file_check(const char *v, char **out, struct mu_buf *err)
{
  struct mu_buf b = MU_BUF_INIT(4096);
  int rc = mu_read_file(v, 4096, &b);
  size_t n = b.data != NULL ? strcspn(b.data, "\r\n") : 0;
  for (volatile char *p = b.data; p != NULL && p < b.data + b.len; p++)
    *p = '\0'; /* a secret: not left in freed memory */
  mu_buf_release(&b);
  if (rc != 0 || n == 0) {
    mu_buf_printf(err,
                  "-cfg rdzv_token_file: cannot read a token from '%s': %s (the file's first "
                  "line is the token; make one with: openssl rand -hex 32 > FILE; chmod 600 FILE)",
                  v, rc != 0 ? mu_strerror(rc) : "its first line is empty");
    return MU_EINVAL;
  }
  char *abs = realpath(v, NULL);
  *out = mu_strdup(abs != NULL ? abs : v);
  free(abs); /* realpath's buffer comes from libc */
  return 0;
}

/* rdzv_tls=DIR: its files readable (the client pair both or neither), as an absolute path. */
static int tls_dir_check(const char *v, const struct mu_rdzv_choice *rz, struct mu_rdzv_auth *out,
                         struct mu_buf *err)
{
  static const char *const need[] = {"server.pem", "server.key", "ca.pem"};
  if (!rz->own) {
    mu_buf_puts(err, "-cfg rdzv_tls: the job's own musterd serves TLS, and this job has none "
                     "(rdzv=HOST:PORT: give its agents MUSTER_RDZV_CACERT=FILE instead)");
    return MU_EINVAL;
  }
  int has[2] = {0, 0};
  for (size_t i = 0; i < 5; i++) {
    const char *f = i < 3 ? need[i] : i == 3 ? "client.pem" : "client.key";
    char *path = mu_asprintf("%s/%s", v, f);
    int ok = access(path, R_OK) == 0;
    mu_free(path);
    if (i >= 3) {
      has[i - 3] = ok;
      continue;
    }
    if (!ok) {
      mu_buf_printf(err,
                    "-cfg rdzv_tls: cannot read '%s/%s': the directory holds server.pem and "
                    "server.key (the job's musterd's certificate, naming the address the nodes "
                    "use) and ca.pem (the CA the agents check it with); client.pem and "
                    "client.key as well ask for client certificates",
                    v, f);
      return MU_EINVAL;
    }
  }
  if (has[0] != has[1]) {
    mu_buf_printf(err, "-cfg rdzv_tls: '%s' has client.%s but not client.%s: give both or neither",
                  v, has[0] ? "pem" : "key", has[0] ? "key" : "pem");
    return MU_EINVAL;
  }
  char *abs = realpath(v, NULL);
  out->tls_dir = mu_strdup(abs != NULL ? abs : v);
  free(abs); /* realpath's buffer comes from libc */
  out->tls_clients = has[0];
  return 0;
}

int mu_cfg_rdzv_auth(const struct mu_cfg *cfg, const struct mu_app *app,
                     const struct mu_rdzv_choice *rz, struct mu_rdzv_auth *out, struct mu_buf *err)
{
  const char *v = mu_cfg_get(cfg, "rdzv_auth"), *tf = mu_cfg_get(cfg, "rdzv_token_file");
  long role = rz->own ? etcd_torchrun_role(app) : -1;
  memset(out, 0, sizeof(*out));
  if (v == NULL)
    v = "auto";
  if (strcmp(v, "none") == 0) {
    out->open = 1;
  } else if (strcmp(v, "auto") == 0 && role >= 0) {
    out->open = 1;
    out->why_open = mu_asprintf(
        "roles[%ld] runs torchrun with an etcd rendezvous backend, which "
        "sends no token (with torchrun's c10d backend the job's HTTP API keeps its token; "
        "its TCPStore port has none: docs/security.md)",
        role);
  } else if (strcmp(v, "token") == 0 && role >= 0) {
    mu_buf_printf(err,
                  "-cfg rdzv_auth=token: roles[%ld] runs torchrun with an etcd rendezvous "
                  "backend, which cannot send the token (torch's etcd clients have none): use "
                  "torchrun's c10d backend (dist.ddp --rdzv_backend c10d), or rdzv_auth=auto to "
                  "leave the job's musterd open to anyone who reaches its port "
                  "(docs/security.md)",
                  role);
    return MU_EINVAL;
  } else if (strcmp(v, "auto") != 0 && strcmp(v, "token") != 0) {
    mu_buf_printf(err,
                  "-cfg rdzv_auth='%s' is not known; use auto (a token made for the job, unless "
                  "torchrun's etcd backend must reach its musterd: the default), token (always) "
                  "or none (open to anyone who reaches its port)",
                  v);
    return MU_EINVAL;
  }
  if (tf != NULL && out->open) {
    mu_buf_printf(err, "-cfg rdzv_token_file: the job's musterd runs open (%s): drop one",
                  out->why_open ? out->why_open : "rdzv_auth=none");
    mu_free(out->why_open);
    out->why_open = NULL;
    return MU_EINVAL;
  }
  if (tf != NULL && token_file_check(tf, &out->token_file, err) != 0)
    return MU_EINVAL;
  const char *tls = mu_cfg_get(cfg, "rdzv_tls");
  if (tls != NULL && tls_dir_check(tls, rz, out, err) != 0) {
    mu_free(out->token_file);
    mu_free(out->why_open);
    memset(out, 0, sizeof(*out));
    return MU_EINVAL;
  }
  return 0;
}
