/* Inside components: the model that component.c parses from the YAML file, and the three steps
 * of mu_component_build(), one file each:
 *
 *   component_args.c   the arguments (command line, [component:NAME] defaults, the file's
 *                      defaults) into one typed value per parameter, then the checks
 *   component_eval.c   the template evaluated with those values into a plain tree
 *   component_app.c    the tree copied into the job model through a key table
 *
 * Values are cJSON: str -> string, int and float -> number, bool -> bool, list -> array, map ->
 * object, jobsize -> object {min, max, nproc, nnodes}.
 *
 * A TorchX Python component (FILE.py:FUNCTION) is the same model with py_file set: its
 * parameters come from the function's signature and its app from calling it (component_py.c),
 * so that arguments, help and config defaults work as for YAML. Not for other layers: they see
 * component.h.
 */
#ifndef MU_COMPONENT_IMPL_H
#define MU_COMPONENT_IMPL_H

#include <regex.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "buf.h"
#include "component.h"
#include "config.h"
#include "job.h"
#include "strvec.h"

/* The parameter types, one row each, as include/muster/errno.h's MU_ERRNO_MAP:
 * XX(ENUM, "name in YAML and describe", converter). The enum, mu_ptype_names and the converters
 * (component_args.c) all come from this list, so adding a type is one row here and one
 * converter there; the order is free. */
#define MU_PTYPE_MAP(XX)                                                                           \
  XX(STR, "str", str_value)                                                                        \
  XX(INT, "int", int_value)                                                                        \
  XX(FLOAT, "float", float_value)                                                                  \
  XX(BOOL, "bool", bool_value)                                                                     \
  XX(LIST, "list", list_value)                                                                     \
  XX(MAP, "map", map_value)                                                                        \
  XX(JOBSIZE, "jobsize", jobsize_value)

enum mu_ptype {
#define MU__PT(e, name, fn) MU_P_##e,
  MU_PTYPE_MAP(MU__PT)
#undef MU__PT
      MU_P__COUNT
};
/* "str", "int", ... by enum mu_ptype. */
extern const char *const mu_ptype_names[MU_P__COUNT];
/* The type called name; -1 when there is none. */
int mu_ptype_find(const char *name);
/* "str, int, ... or jobsize": the types for a message. Ownership: static. */
const char *mu_ptype_list(void);
/* Truth words for bools ("true", "yes", "1", "on" and their opposites, any case): 1, 0, or -1
 * when s is none of them. */
int mu_component_bool_text(const char *s);
/* The truth word closest to s (for "did you mean"), or NULL. Ownership: static. */
const char *mu_component_bool_closest(const char *s);

struct mu_param {
  char *name;
  char short_name;
  enum mu_ptype type;
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
  char *nproc_from;   /* jobsize: a str param naming a named resource: a bare N is N nodes
                       * with that resource's GPU count as nproc (TorchX's dist.spmd) */
};

struct mu_component {
  char *name;
  char *description;
  char *where; /* the file, for messages */
  struct mu_param *params;
  size_t nparams;
  cJSON *checks; /* array or NULL; owned by root */
  cJSON *app;    /* the template; owned by root */
  cJSON *root;
  char *py_file;     /* a Python component: its file (NULL for YAML) */
  char *py_function; /* and the function that returns its AppDef */
};

/* The slot of p in c->params (and in the values array of the steps). */
static inline size_t mu_param_index(const struct mu_component *c, const struct mu_param *p)
{
  return (size_t)(p - c->params);
}

/* ---------------------------------------------------------------------------------------------
 * Shared helpers (component.c)
 */

/* Returns: the string member key of o, or NULL. Ownership: borrowed from o. */
const char *mu_component_str(const cJSON *o, const char *key);
/* Returns: 1 for "true", "yes", "on", "1" (any case), else 0. */
int mu_component_truthy_text(const char *s);
/* Returns: the closest of a NULL-terminated word list to w, or NULL. Ownership: a list entry. */
const char *mu_component_closest(const char *const *words, const char *w);
/* Checks that o has only keys from the NULL-terminated allowed list.
 * Returns: 0, or MU_EINVAL with "WHERE: CTX: unknown key 'k'; did you mean ...?" in err. */
int mu_component_check_keys(const cJSON *o, const char *const *allowed, const char *where,
                            const char *ctx, struct mu_buf *err);

/* ---------------------------------------------------------------------------------------------
 * The steps of mu_component_build()
 */

/* Fills values[i] for every parameter: argv, then cfg's [component:NAME] section (cfg may be
 * NULL), then the file's defaults (or an empty value); applies the jobsize overrides and runs
 * the file's checks (component_args.c).
 * Returns: 0, or MU_EINVAL with the message in err. Ownership: values[] (c->nparams slots, all
 * NULL on entry) gets trees the caller deletes, also on error. */
int mu_component_values(const struct mu_component *c, int argc, char **argv,
                        const struct mu_config *cfg, cJSON **values, struct mu_buf *err);

/* Evaluates the template c->app with values (component_eval.c).
 * Returns: the tree, or NULL with the message in err. Ownership: the caller's (cJSON_Delete). */
cJSON *mu_component_eval(const struct mu_component *c, cJSON **values, struct mu_buf *err);

/* Evaluates a template condition (`a == b`, `n > 1`, `x && !y`, docs/components.md) with
 * values; `where` names it in messages (component_eval.c).
 * Returns: 0 with *result 0 or 1, or MU_EINVAL with the message in err. */
int mu_component_cond(const struct mu_component *c, cJSON **values, const char *where,
                      const char *cond, int *result, struct mu_buf *err);

/* Copies an evaluated tree into a new app (component_app.c). where names the file.
 * Returns: 0, or MU_EINVAL with the message naming the key in err.
 * Ownership: *out is the caller's (mu_app_free); NULL on error. */
int mu_component_app(const char *where, const cJSON *tree, struct mu_app **out, struct mu_buf *err);

/* ---------------------------------------------------------------------------------------------
 * Python components (component_py.c)
 */

/* Whether name is a Python component: FILE.py, FILE.py:FUNCTION, or FILE:FUNCTION of an
 * existing file (TorchX's form). */
int mu_component_is_python(const char *name);
/* Loads a Python component: runs the system's python3 ($MUSTER_PYTHON, else /usr/bin/python3)
 * on muster's TorchX shim to read the function's parameters. Returns: 0; MU_ENOENT when
 * python3 cannot be run or the file is missing; MU_EINVAL / MU_EPARSE for a component that
 * cannot be loaded (err names the file, line and name). Ownership: *out is the caller's. */
int mu_component_py_load(const char *name, struct mu_component **out, struct mu_buf *err);
/* Calls the function with the given values (values[i] NULL: its own default) and reads its
 * AppDef back. Returns: 0, or MU_EINVAL / MU_ENOENT with the message in err.
 * Ownership: *out is the caller's (mu_app_free). */
int mu_component_py_build(const struct mu_component *c, cJSON **values, struct mu_app **out,
                          struct mu_buf *err);

/* Text of a value: "" for null, lists joined by ',' (component_eval.c). */
void mu_component_value_text(const cJSON *v, struct mu_buf *out);
/* Truthiness of a value: null, false, "", 0, [] and {} are false (component_eval.c). */
int mu_component_is_truthy(const cJSON *v);

#endif
