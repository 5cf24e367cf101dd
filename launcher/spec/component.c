/* Components: a YAML file (name, description, typed parameters, checks, the app template) parsed
 * into the model of component_impl.h, found by name on the search path, described by
 * `muster run NAME --help`, and built into a job spec by the three steps of mu_component_build()
 * (component_args.c, component_eval.c, component_app.c).
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <regex.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "muster/errno.h"

#include "alloc.h"
#include "component_impl.h"
#include "fsutil.h"
#include "suggest.h"
#include "yaml_tree.h"

#define COMPONENT_MAX_BYTES (1 << 20) /* a component file: read from disk, capped */
#define PATTERN_MAX_BYTES 4096        /* a parameter's pattern, as compiled */
/* The parts a pattern may spell out once its counted repeats ({m,n}, +) are written out, as
 * glibc's regcomp writes them out: its memory grows with the square of that (a{0,1000}: 18 MB,
 * a{0,5000}: 400 MB, ((((a{1,200}){1,200}){1,200}){1,200}): every byte the machine has). */
#define PATTERN_MAX_PARTS 1000
#define PATTERN_MAX_DEPTH 32 /* groups within groups */
/* What a pattern with more groups than this may cost to compile is tried in a child process
 * first (a fork per pattern: the builtins' few groups are spared it, ~2 ms of every dryrun) */
#define PATTERN_TRIAL_GROUPS 8
/* What a pattern with groups may cost to compile, tried in a child process first */
#define PATTERN_TRIAL_CPU_S 2
#define PATTERN_TRIAL_BYTES (256UL << 20) /* of address space, past what muster has mapped */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MU_UNDER_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define MU_UNDER_ASAN 1
#endif

const char *const mu_ptype_names[MU_P__COUNT] = {
#define MU__PT(e, name, fn) [MU_P_##e] = name,
    MU_PTYPE_MAP(MU__PT)
#undef MU__PT
};

int mu_ptype_find(const char *name)
{
  for (int i = 0; name != NULL && i < MU_P__COUNT; i++)
    if (strcmp(name, mu_ptype_names[i]) == 0)
      return i;
  return -1;
}

const char *mu_ptype_list(void)
{
  static char list[256];
  if (list[0] == '\0') {
    size_t n = 0;
    for (int i = 0; i < MU_P__COUNT && n < sizeof(list); i++)
      n += (size_t)snprintf(list + n, sizeof(list) - n, "%s%s",
                            i == 0                 ? ""
                            : i + 1 == MU_P__COUNT ? " or "
                                                   : ", ",
                            mu_ptype_names[i]);
  }
  return list;
}

/* ---------------------------------------------------------------------------------------------
 * The model and the helpers the steps share
 */

static void param_release(struct mu_param *p)
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
  mu_free(p->nproc_from);
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
  mu_free(c->py_file);
  mu_free(c->py_function);
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

const char *mu_component_str(const cJSON *o, const char *key)
{
  const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsString(it) ? it->valuestring : NULL;
}

/* The truth words, true ones first. */
static const char *const bool_words[] = {"true", "yes", "1", "on", "false", "no", "0", "off", NULL};

int mu_component_bool_text(const char *s)
{
  for (size_t i = 0; s != NULL && bool_words[i] != NULL; i++)
    if (strcasecmp(s, bool_words[i]) == 0)
      return i < 4;
  return -1;
}

const char *mu_component_bool_closest(const char *s)
{
  return mu_component_closest(bool_words, s);
}

int mu_component_truthy_text(const char *s)
{
  return mu_component_bool_text(s) == 1;
}

const char *mu_component_closest(const char *const *words, const char *w)
{
  struct mu_suggest s;
  mu_suggest_init(&s, w);
  for (size_t i = 0; words[i] != NULL; i++)
    mu_suggest_add(&s, words[i]);
  return mu_suggest_best(&s);
}

int mu_component_check_keys(const cJSON *o, const char *const *allowed, const char *where,
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
      const char *best = mu_component_closest(allowed, it->string);
      mu_buf_printf(err, "%s: %s: unknown key '%s'%s%s%s", where, ctx, it->string,
                    best ? "; did you mean '" : "", best ? best : "", best ? "'?" : "");
      return MU_EINVAL;
    }
  }
  return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Parsing a component file
 */

/* The file's YAML as a tree whose scalars are all strings: types come from the parameter
 * declarations, not from YAML's guessing. */
static int yaml_to_json(const char *text, size_t len, const char *where, cJSON **out,
                        struct mu_buf *err)
{
  struct mu_buf why = MU_BUF_INIT(SIZE_MAX);
  size_t line = 0;
  int rc = mu_yaml_read(text, len, MU_YAML_STRINGS | MU_YAML_MAPPING, out, &line, &why);
  if (rc == MU_EPARSE)
    mu_buf_printf(err, "%s:%zu: %s", where, line, mu_buf_str(&why));
  else if (rc == MU_ENOENT)
    mu_buf_printf(err, "%s: a component file must be a YAML mapping (name:, params:, app:)", where);
  else if (rc == MU_EINVAL)
    mu_buf_printf(err, "%s: unsupported YAML (keys must be plain strings, no anchors)", where);
  else if (rc == MU_E2BIG)
    mu_buf_printf(err, "%s: %s", where, mu_buf_str(&why));
  if (rc == MU_ENOENT || rc == MU_EINVAL || rc == MU_E2BIG)
    rc = MU_EPARSE;
  mu_buf_release(&why);
  return rc;
}

/* The keys of a parameter declaration. */
static const char *const param_keys[] = {
    "name",      "short",        "type",        "default", "required",   "help", "choices",
    "remainder", "nnodes_param", "nproc_param", "pattern", "nproc_from", NULL};

/* A parameter's type: one of mu_ptype_names (str when t is NULL). Returns: 0, or MU_EINVAL with
 * the message in err. */
static int parse_type(const char *t, const char *where, const char *ctx, struct mu_param *p,
                      struct mu_buf *err)
{
  p->type = MU_P_STR;
  if (t == NULL)
    return 0;
  int type = mu_ptype_find(t);
  if (type >= 0) {
    p->type = (enum mu_ptype)type;
    return 0;
  }
  struct mu_suggest s;
  mu_suggest_init(&s, t);
  for (int i = 0; i < MU_P__COUNT; i++)
    mu_suggest_add(&s, mu_ptype_names[i]);
  const char *best = mu_suggest_best(&s);
  mu_buf_printf(err, "%s: %s.type: unknown type '%s'%s%s%s; use %s", where, ctx, t,
                best ? " (did you mean '" : "", best ? best : "", best ? "'?)" : "",
                mu_ptype_list());
  return MU_EINVAL;
}

/* The count of a repeat that starts at re[*i] ('{'): how many copies of the repeated part
 * glibc's regcomp makes ({m,n}: n; {m}: m; {m,}: m + 1), at least 1, with *i past the '}' and
 * *min its m. Returns: that count, or 0 when this is no count (regcomp judges it), *i
 * unchanged. */
static size_t repeat_copies(const char *re, size_t *i, size_t *min)
{
  size_t k = *i + 1, m = 0, n = 0;
  int has_n = 0, comma = 0;
  for (; re[k] >= '0' && re[k] <= '9'; k++) /* saturates: any count past 100000 is too many */
    m = m < 100000 ? m * 10 + (size_t)(re[k] - '0') : m;
  if (re[k] == ',') {
    comma = 1;
    k++;
    for (; re[k] >= '0' && re[k] <= '9'; k++, has_n = 1)
      n = n < 100000 ? n * 10 + (size_t)(re[k] - '0') : n;
  }
  if (re[k] != '}' || k == *i + 1)
    return 0;
  *i = k;
  *min = m;
  size_t copies = has_n ? n : comma ? m + 1 : m;
  return copies > 0 ? copies : 1;
}

/* The ']' that ends the bracket expression starting at re[i] ('['), or the last character when
 * none does (regcomp refuses that pattern). */
static size_t bracket_end(const char *re, size_t i)
{
  size_t n = strlen(re);
  i += re[i + 1] == '^' ? 2 : 1;
  if (re[i] == ']')
    i++; /* a ']' first is one of the set */
  while (i < n && re[i] != ']') {
    char close[3] = {re[i + 1], ']', '\0'};
    const char *end = NULL;
    if (re[i] == '[' && (re[i + 1] == ':' || re[i + 1] == '.' || re[i + 1] == '='))
      end = strstr(re + i + 2, close); /* [:alpha:], [.-.], [=a=] */
    i = end != NULL ? (size_t)(end - re) + 2 : i + 1;
  }
  return i < n ? i : n - 1;
}

/* Adds n to a count that stops past limit. */
static size_t add_upto(size_t a, size_t n, size_t limit)
{
  return a > limit || n > limit - a ? limit + 1 : a + n;
}

#define PATTERN_DEEP SIZE_MAX /* pattern_parts(): groups nest too deep */
#define PATTERN_EMPTY_REPEAT                                                                       \
  (SIZE_MAX - 1) /* pattern_parts(): a group that can match "" repeats                             \
                  */

/* What pattern_parts() knows at one depth of groups. */
struct pattern_level {
  size_t total;  /* parts so far, every alternative's */
  int alt_empty; /* the alternative so far can match the empty string */
  int any_empty; /* an alternative before it could */
};

/* How many parts POSIX extended regular expression `re` spells out once glibc's regcomp has
 * written its counted repeats out (a{3} is aaa, (ab){2,3} is ababab, a+ is aa*), stopping past
 * `limit`. Each character, bracket expression or escape is one part; a repeat multiplies the
 * part or group before it. Returns: the count, limit + 1 when it passes limit, PATTERN_DEEP when
 * the groups nest past PATTERN_MAX_DEPTH, PATTERN_EMPTY_REPEAT when a repeat (*, +, ?, {m,n})
 * follows a group that can match the empty string ((a*)*, (a?){0,9}, (|a)+: regcomp's time and
 * memory grow exponentially with those; 32 of (a*)* take minutes, 300 of (a*)? 3 GB). */
static size_t pattern_parts(const char *re, size_t limit)
{
  struct pattern_level lv[PATTERN_MAX_DEPTH + 1] = {{0, 1, 0}};
  size_t last = 0, depth = 0;
  int last_group = 0, last_empty = 0, alt_before = 1; /* the item before, the alternative before */
  for (size_t i = 0; re[i] != '\0'; i++) {
    size_t copies = 0, min = 1;
    char c = re[i];
    if (c == '(') {
      if (++depth > PATTERN_MAX_DEPTH)
        return PATTERN_DEEP;
      lv[depth] = (struct pattern_level){0, 1, 0};
      last = 0;
    } else if (c == ')' && depth > 0) {
      last_empty = lv[depth].any_empty || lv[depth].alt_empty;
      last = lv[depth--].total;
      lv[depth].total = add_upto(lv[depth].total, last, limit);
      last += last == 0; /* an empty group is an item still: (^)* repeats it */
      alt_before = lv[depth].alt_empty;
      lv[depth].alt_empty = alt_before && last_empty;
      last_group = 1;
    } else if (c == '|') {
      lv[depth].any_empty |= lv[depth].alt_empty;
      lv[depth].alt_empty = 1;
      last = 0;
    } else if (c == '+' || c == '*' || c == '?') {
      copies = c == '+' ? 2 : 1;
      min = c == '+';
    } else if (c == '{' && last > 0 && (copies = repeat_copies(re, &i, &min)) > 0) {
      /* copies of the part or group before */
    } else if (c != '^' && c != '$') {
      if (c == '[')
        i = bracket_end(re, i);
      else if (c == '\\' && re[i + 1] != '\0')
        i++;
      last = 1;
      lv[depth].total = add_upto(lv[depth].total, 1, limit);
      alt_before = lv[depth].alt_empty;
      lv[depth].alt_empty = last_group = last_empty = 0;
    }
    if (copies > 0 && last > 0) { /* a repeat of the part or group before */
      if (last_group && last_empty)
        return PATTERN_EMPTY_REPEAT;
      size_t more = last > limit / copies ? limit + 1 : last * (copies - 1);
      lv[depth].total = add_upto(lv[depth].total, more, limit);
      last = add_upto(last, more, limit);
      if (min == 0) /* the item may now match nothing */
        lv[depth].alt_empty = alt_before, last_empty = 1;
    }
    if (lv[depth].total > limit)
      return limit + 1;
  }
  return lv[0].total > limit ? limit + 1 : lv[0].total;
}

/* The refusal of a pattern for what pattern_parts() found. Returns: MU_EINVAL. */
static int pattern_refusal(size_t parts, const char *s, const char *where, const char *ctx,
                           struct mu_buf *err)
{
  if (parts == PATTERN_DEEP)
    mu_buf_printf(err,
                  "%s: %s.pattern: '%.200s' nests its groups ( ) more than %d deep; write "
                  "it flatter",
                  where, ctx, s, PATTERN_MAX_DEPTH);
  else if (parts == PATTERN_EMPTY_REPEAT)
    mu_buf_printf(err,
                  "%s: %s.pattern: '%.200s' repeats (*, +, ?, {m,n}) a group that can "
                  "match the empty string, which the regular expression library compiles in "
                  "exponential time and memory; repeat what must match something ((a*)* is a*, "
                  "(a?){0,9} is a{0,9})",
                  where, ctx, s);
  else
    mu_buf_printf(err,
                  "%s: %s.pattern: '%.200s' repeats its parts past %d once its counts "
                  "({m,n}, +) are spelled out, and the regular expression library takes memory "
                  "by the square of that; write it with * or smaller counts",
                  where, ctx, s, PATTERN_MAX_PARTS);
  return MU_EINVAL;
}

/* Does regcomp compile `anchored` within PATTERN_TRIAL_CPU_S seconds of CPU and
 * PATTERN_TRIAL_BYTES more memory? Tried in a child process, for what no count of the pattern
 * foresees in glibc's regcomp ((a*|b*) 300 times: minutes). Under ASan, whose shadow memory no
 * address-space limit holds, only the CPU time is bounded. Returns: 1 when it does, or when no
 * child can be made (the compile here then judges); 0 when the child ran out. */
static int trial_compile(const char *anchored)
{
  pid_t pid = fork();
  if (pid < 0)
    return 1;
  if (pid == 0) {
    struct rlimit cpu = {PATTERN_TRIAL_CPU_S, PATTERN_TRIAL_CPU_S + 1}, core = {0, 0};
    setrlimit(RLIMIT_CORE, &core); /* SIGXCPU dumps core by default */
    setrlimit(RLIMIT_CPU, &cpu);
#ifndef MU_UNDER_ASAN
    unsigned long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f != NULL && fscanf(f, "%lu", &pages) != 1)
      pages = 0;
    if (f != NULL)
      fclose(f);
    rlim_t as = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + PATTERN_TRIAL_BYTES;
    struct rlimit mem = {as, as};
    setrlimit(RLIMIT_AS, &mem);
#endif
    regex_t re;
    _exit(regcomp(&re, anchored, REG_EXTENDED | REG_NOSUB) == REG_ESPACE ? 3 : 0);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR)
      return 1;
  }
  return !WIFSIGNALED(status) && !(WIFEXITED(status) && WEXITSTATUS(status) == 3);
}

/* Returns: how many times c occurs in s. */
static size_t count_char(const char *s, char c)
{
  size_t n = 0;
  for (; *s != '\0'; s++)
    n += *s == c;
  return n;
}

/* A str parameter's pattern, compiled as ^(pattern)$: the whole value must match. Returns: 0,
 * or MU_EINVAL with the message in err. */
static int parse_pattern(const char *s, const char *where, const char *ctx, struct mu_param *p,
                         struct mu_buf *err)
{
  if (p->type != MU_P_STR) {
    mu_buf_printf(err, "%s: %s.pattern: only str parameters take a pattern ('%s' is %s)", where,
                  ctx, p->name, mu_ptype_names[p->type]);
    return MU_EINVAL;
  }
  size_t parts = pattern_parts(s, PATTERN_MAX_PARTS);
  if (parts > PATTERN_MAX_PARTS)
    return pattern_refusal(parts, s, where, ctx, err);
  struct mu_buf anchored = MU_BUF_INIT(PATTERN_MAX_BYTES);
  int too_long = mu_buf_printf(&anchored, "^(%s)$", s) != 0;
  if (!too_long && count_char(s, '(') > PATTERN_TRIAL_GROUPS &&
      !trial_compile(mu_buf_str(&anchored))) {
    mu_buf_release(&anchored);
    mu_buf_printf(err,
                  "%s: %s.pattern: '%.200s' takes the regular expression library more than %d s "
                  "or %lu MiB to compile (its cost explodes on groups that can match the empty "
                  "string, such as (a*|b*) many times); write it simpler",
                  where, ctx, s, PATTERN_TRIAL_CPU_S, PATTERN_TRIAL_BYTES >> 20);
    return MU_EINVAL;
  }
  int rc = too_long ? REG_ESPACE : regcomp(&p->re, mu_buf_str(&anchored), REG_EXTENDED | REG_NOSUB);
  mu_buf_release(&anchored);
  if (rc != 0) {
    char why[128] = "longer than 4 KiB";
    if (!too_long)
      regerror(rc, &p->re, why, sizeof(why));
    mu_buf_printf(err, "%s: %s.pattern: '%s' is not a POSIX extended regular expression: %s", where,
                  ctx, s, why);
    return MU_EINVAL;
  }
  p->has_re = 1;
  p->pattern = mu_strdup(s);
  return 0;
}

static int parse_param(const cJSON *jp, size_t idx, const char *where, struct mu_param *p,
                       struct mu_buf *err)
{
  char ctx[64];
  snprintf(ctx, sizeof(ctx), "params[%zu]", idx);
  if (!cJSON_IsObject(jp)) {
    mu_buf_printf(err, "%s: %s: must be a mapping with name:, type:, help:", where, ctx);
    return MU_EINVAL;
  }
  if (mu_component_check_keys(jp, param_keys, where, ctx, err) != 0)
    return MU_EINVAL;
  const char *name = mu_component_str(jp, "name");
  if (name == NULL || name[0] == '\0') {
    mu_buf_printf(err, "%s: %s.name: missing", where, ctx);
    return MU_EINVAL;
  }
  p->name = mu_strdup(name);
  if (parse_type(mu_component_str(jp, "type"), where, ctx, p, err) != 0)
    return MU_EINVAL;
  const char *s = mu_component_str(jp, "short");
  if (s != NULL) {
    if (strlen(s) != 1) {
      mu_buf_printf(err, "%s: %s.short: must be one letter, got '%s'", where, ctx, s);
      return MU_EINVAL;
    }
    p->short_name = s[0];
  }
  s = mu_component_str(jp, "default");
  p->def = s ? mu_strdup(s) : NULL;
  p->required = mu_component_truthy_text(mu_component_str(jp, "required"));
  p->remainder = mu_component_truthy_text(mu_component_str(jp, "remainder"));
  s = mu_component_str(jp, "help");
  p->help = mu_strdup(s ? s : "");
  s = mu_component_str(jp, "nnodes_param");
  p->nnodes_param = s ? mu_strdup(s) : NULL;
  s = mu_component_str(jp, "nproc_param");
  p->nproc_param = s ? mu_strdup(s) : NULL;
  s = mu_component_str(jp, "nproc_from");
  p->nproc_from = s ? mu_strdup(s) : NULL;
  const cJSON *ch = cJSON_GetObjectItemCaseSensitive(jp, "choices");
  const cJSON *c;
  cJSON_ArrayForEach(c, ch)
  {
    if (cJSON_IsString(c))
      mu_strvec_push(&p->choices, c->valuestring);
  }
  if (p->remainder && p->type != MU_P_LIST) {
    mu_buf_printf(err, "%s: %s: a remainder parameter must have type list", where, ctx);
    return MU_EINVAL;
  }
  s = mu_component_str(jp, "pattern");
  return s != NULL ? parse_pattern(s, where, ctx, p, err) : 0;
}

static const char *const top_keys[] = {"name", "description", "params", "checks", "app", NULL};

/* After an unknown top-level key: the keys the top level takes, and where an app's keys go
 * (a file with `roles:` at the top level, as a TorchX AppDef written out, is the usual case). */
static void top_keys_hint(const cJSON *root, struct mu_buf *err)
{
  mu_buf_printf(err, "; the top level takes name, description, params, checks and app");
  if (cJSON_GetObjectItemCaseSensitive(root, "roles") != NULL)
    mu_buf_printf(err, "; roles go under 'app:', as app: {name: NAME, roles: [...]}");
  else if (cJSON_GetObjectItemCaseSensitive(root, "metadata") != NULL)
    mu_buf_printf(err, "; metadata goes under 'app:', as app: {name: NAME, metadata: {...}}");
}

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
  if (mu_component_check_keys(root, top_keys, where, "top level", err) != 0) {
    top_keys_hint(root, err);
    rc = MU_EINVAL;
    goto out;
  }
  const char *name = mu_component_str(root, "name");
  if (name == NULL || name[0] == '\0') {
    mu_buf_printf(err, "%s: name: missing (the component's name, e.g. 'utils.echo')", where);
    rc = MU_EINVAL;
    goto out;
  }
  c->name = mu_strdup(name);
  const char *d = mu_component_str(root, "description");
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

/* ---------------------------------------------------------------------------------------------
 * Finding components: paths, the search path, the builtins
 */

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
  if (mu_component_is_python(name))
    return mu_component_py_load(name, out, err);
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
      const char *best = names.n ? mu_component_closest((const char *const *)names.v, name) : NULL;
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

/* The first sentence of a description (its lines joined): up to the first '.' that ends
 * a word, or the end of the first paragraph. Ownership: a new string (mu_free). */
static char *first_sentence(const char *desc)
{
  struct mu_buf b = MU_BUF_INIT(SIZE_MAX);
  for (const char *p = desc; *p != '\0'; p++) {
    if (p[0] == '\n' && p[1] == '\n')
      break;
    mu_buf_putc(&b, *p == '\n' ? ' ' : *p);
    if (*p == '.' && (p[1] == ' ' || p[1] == '\n' || p[1] == '\0'))
      break;
  }
  while (b.len > 0 && (b.data[b.len - 1] == ' ' || b.data[b.len - 1] == ':'))
    b.len--;
  char *s = mu_strndup(b.data ? b.data : "", b.len);
  mu_buf_release(&b);
  return s;
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
      struct mu_buf e = MU_BUF_INIT(SIZE_MAX);
      if (mu_component_load(found.v[i], &c, &e) == 0) {
        mu_strvec_push_owned(descs, first_sentence(mu_component_description(c)));
      } else {
        mu_strvec_push_owned(descs, mu_asprintf("(cannot be loaded: %s)", mu_buf_str(&e)));
      }
      mu_component_free(c);
      mu_buf_release(&e);
    }
  }
  mu_strvec_release(&found);
  mu_strvec_release(&dirs);
  return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Help and build
 */

int mu_component_source(const struct mu_component *c, struct mu_buf *out, struct mu_buf *err)
{
  int rc = mu_read_file(c->where, COMPONENT_MAX_BYTES, out);
  if (rc != 0)
    mu_buf_printf(err, "cannot read component '%s': %s", c->where, mu_strerror(rc));
  return rc;
}

#define HELP_WIDTH 100

void mu_component_wrap(struct mu_buf *out, const char *text, size_t width, size_t indent)
{
  size_t col = indent; /* the first line's start too: the caller wrote what goes before */
  const char *p = text, *end = text + strlen(text);
  while (end > text && (end[-1] == '\n' || end[-1] == ' '))
    end--;
  while (p < end) {
    if (*p == '\n') {
      mu_buf_printf(out, "\n%*s", (int)indent, "");
      col = indent;
      p++;
      continue;
    }
    size_t sp = strspn(p, " ");
    size_t w = strcspn(p + sp, " \n");
    if (w == 0) { /* spaces before a line break or the end: dropped */
      p += sp;
      continue;
    }
    if (col > indent && col + sp + w > width) {
      mu_buf_printf(out, "\n%*s", (int)indent, "");
      col = indent;
    } else { /* at a line's start: its own indent */
      mu_buf_printf(out, "%*s", (int)sp, "");
      col += sp;
    }
    mu_buf_printf(out, "%.*s", (int)w, p + sp);
    col += w;
    p += sp + w;
  }
  mu_buf_putc(out, '\n');
}

void mu_component_help(const struct mu_component *c, struct mu_buf *out)
{
  mu_buf_printf(out, "usage: muster run [RUN OPTIONS] %s [ARGS]", c->name);
  for (size_t i = 0; i < c->nparams; i++)
    if (c->params[i].remainder)
      mu_buf_printf(out, " [-- %s...]", c->params[i].name);
  mu_buf_printf(out, "\n\n");
  mu_component_wrap(out, c->description, HELP_WIDTH, 0);
  mu_buf_putc(out, '\n');
  mu_buf_printf(out, "arguments (from %s):\n", c->where);
  for (size_t i = 0; i < c->nparams; i++) {
    const struct mu_param *p = &c->params[i];
    char left[128];
    char meta[64];
    snprintf(meta, sizeof(meta), "%s", p->type == MU_P_BOOL ? "[BOOL]" : mu_ptype_names[p->type]);
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

int mu_component_build(const struct mu_component *c, int argc, char **argv,
                       const struct mu_config *cfg, struct mu_app **out, struct mu_buf *err)
{
  cJSON **values = mu_calloc(c->nparams ? c->nparams : 1, sizeof(cJSON *));
  cJSON *tree = NULL;
  *out = NULL;
  int rc = mu_component_values(c, argc, argv, cfg, values, err);
  if (rc == 0 && c->py_file != NULL) {
    rc = mu_component_py_build(c, values, out, err);
  } else if (rc == 0) {
    tree = mu_component_eval(c, values, err);
    rc = tree != NULL ? mu_component_app(c->where, tree, out, err) : MU_EINVAL;
  }
  for (size_t i = 0; i < c->nparams; i++)
    cJSON_Delete(values[i]);
  mu_free(values);
  cJSON_Delete(tree);
  return rc;
}
