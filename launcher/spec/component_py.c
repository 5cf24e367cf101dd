/* TorchX Python components: `muster run FILE.py:FUNCTION ARGS` runs a TorchX component file
 * unchanged. The system's python3 runs muster's TorchX shim (python/: a `torchx` package with
 * the names components import, and the runner _muster_torchx.py) twice: once to read the
 * function's parameters from its signature and docstring (they become the component's
 * parameters, so arguments, --help and [component:NAME] defaults work as for YAML), once to call
 * it with the arguments given; the AppDef comes back as JSON over a pipe in the tree form of
 * component_app.c, which makes it a job spec like any YAML component's. Python is needed only
 * here: a missing python3 is an error that says so.
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "muster/errno.h"

#include "alloc.h"
#include "component_impl.h"
#include "exec.h"
#include "fsutil.h"

#define PY_OUT_MAX (16u << 20) /* the runner's answer: read from a process, capped */
#define PY_DEFAULT "/usr/bin/python3"
#define PY_RUNNER "_muster_torchx.py"

/* ---------------------------------------------------------------------------------------------
 * Names and places
 */

static int has_suffix(const char *s, size_t n, const char *suffix)
{
  size_t k = strlen(suffix);
  return n >= k && strncmp(s + n - k, suffix, k) == 0;
}

/* Where FILE ends in "FILE:FUNCTION" (the last ':'), or NULL. */
static const char *function_sep(const char *name)
{
  return strrchr(name, ':');
}

static int is_file(const char *path)
{
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int mu_component_is_python(const char *name)
{
  const char *sep = function_sep(name);
  if (sep == NULL)
    return has_suffix(name, strlen(name), ".py");
  if (has_suffix(name, (size_t)(sep - name), ".py"))
    return 1;
  char *file = mu_strndup(name, (size_t)(sep - name));
  int yes = is_file(file);
  mu_free(file);
  return yes;
}

/* The runner: <exe>/../share/muster/python (installed), else the source tree's copy (the build
 * tree). Returns: a new path (mu_free), or NULL. */
static char *runner_path(void)
{
  char *exe = mu_self_exe();
  char *slash = exe ? strrchr(exe, '/') : NULL;
  if (slash != NULL) {
    *slash = '\0';
    char *p = mu_asprintf("%s/../share/muster/python/%s", exe, PY_RUNNER);
    mu_free(exe);
    if (access(p, R_OK) == 0)
      return p;
    mu_free(p);
  } else {
    mu_free(exe);
  }
#ifdef MU_PYTHON_SHIM_DIR
  char *src = mu_asprintf("%s/%s", MU_PYTHON_SHIM_DIR, PY_RUNNER);
  if (access(src, R_OK) == 0)
    return src;
  mu_free(src);
#endif
  return NULL;
}

/* ---------------------------------------------------------------------------------------------
 * Talking to the runner
 */

/* muster's named resources as {name: {cpu, gpu, memMB, capabilities, devices}}: the shim's
 * torchx.specs.named_resources is this table (resources.c). */
static cJSON *named_table(void)
{
  cJSON *t = cJSON_CreateObject();
  struct mu_app *tmp = mu_app_new("named");
  struct mu_buf e = MU_BUF_INIT(SIZE_MAX);
  for (size_t i = 0; mu_named_resource_at(i) != NULL; i++) {
    const char *name = mu_named_resource_at(i);
    struct mu_role *r = mu_app_add_role(tmp, name);
    if (mu_named_resource(name, &r->resource, &e) != 0)
      continue;
    cJSON *o = cJSON_AddObjectToObject(t, name);
    cJSON_AddNumberToObject(o, "cpu", (double)r->resource.cpu);
    cJSON_AddNumberToObject(o, "gpu", (double)r->resource.gpu);
    cJSON_AddNumberToObject(o, "memMB", (double)r->resource.memMB);
    cJSON *caps = cJSON_AddObjectToObject(o, "capabilities");
    for (size_t k = 0; k < r->resource.capabilities.n; k++)
      cJSON_AddStringToObject(caps, r->resource.capabilities.v[k].key,
                              r->resource.capabilities.v[k].value);
    cJSON *dev = cJSON_AddObjectToObject(o, "devices");
    for (size_t k = 0; k < r->resource.ndevices; k++)
      cJSON_AddNumberToObject(dev, r->resource.devices[k].name,
                              (double)r->resource.devices[k].count);
  }
  mu_buf_release(&e);
  mu_app_free(tmp);
  return t;
}

/* Runs the runner with the request; *answer gets its JSON answer when it says ok.
 * Returns: 0; MU_ENOENT (no python3, no runner); MU_EINVAL with the runner's message (the
 * component's fault); MU_EIO when the runner died. Ownership: takes req; *answer is the
 * caller's (cJSON_Delete). */
static int run_shim(cJSON *req, cJSON **answer, struct mu_buf *err)
{
  const char *py = getenv("MUSTER_PYTHON");
  char *runner = runner_path();
  char *text = NULL;
  struct mu_buf out = MU_BUF_INIT(PY_OUT_MAX), why = MU_BUF_INIT(SIZE_MAX);
  int status = -1, rc = 0;
  *answer = NULL;
  if (py == NULL || py[0] == '\0')
    py = PY_DEFAULT;
  if (runner == NULL) {
    mu_buf_printf(err,
                  "muster's TorchX shim is not installed (share/muster/python/%s next to "
                  "muster); reinstall muster",
                  PY_RUNNER);
    rc = MU_ENOENT;
    goto out;
  }
  char opt_b[] = "-B";
  char *argv[] = {(char *)py, opt_b, runner, NULL};
  text = cJSON_PrintUnformatted(req);
  rc = mu_exec_capture_stdout(argv, text, &out, &why, &status);
  if (rc == MU_ENOENT) {
    mu_buf_printf(err,
                  "a Python component needs python3: %s; install it (apt-get install python3) "
                  "or set MUSTER_PYTHON=/path/to/python3",
                  mu_buf_str(&why));
    goto out;
  }
  *answer = rc == 0 ? cJSON_Parse(mu_buf_str(&out)) : NULL;
  if (*answer == NULL || status != 0) {
    mu_buf_printf(err,
                  "muster's TorchX runner under %s failed (exit %d%s%s); its messages are "
                  "above",
                  py, status, why.len ? ": " : "", mu_buf_str(&why));
    rc = MU_EIO;
    goto out;
  }
  if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(*answer, "ok"))) {
    const char *m = mu_component_str(*answer, "error");
    mu_buf_puts(err, m ? m : "the component failed (no message)");
    rc = MU_EINVAL;
  }
out:
  if (rc != 0) {
    cJSON_Delete(*answer);
    *answer = NULL;
  }
  if (text != NULL)
    cJSON_free(text);
  cJSON_Delete(req);
  mu_free(runner);
  mu_buf_release(&out);
  mu_buf_release(&why);
  return rc;
}

/* A request: op, file, function, the component's name as given (for messages), the named
 * resources and this muster. */
static cJSON *request(const char *op, const char *file, const char *function, const char *label)
{
  cJSON *req = cJSON_CreateObject();
  cJSON_AddStringToObject(req, "op", op);
  cJSON_AddStringToObject(req, "file", file);
  if (function != NULL)
    cJSON_AddStringToObject(req, "function", function);
  cJSON_AddStringToObject(req, "label", label);
  cJSON_AddItemToObject(req, "named_resources", named_table());
  char *exe = mu_self_exe();
  cJSON_AddStringToObject(req, "muster", exe ? exe : "muster");
  mu_free(exe);
  return req;
}

/* ---------------------------------------------------------------------------------------------
 * Loading and building
 */

/* One parameter of the runner's describe answer. */
static int param_from(const cJSON *jp, const char *where, struct mu_param *p, struct mu_buf *err)
{
  const char *name = mu_component_str(jp, "name");
  const char *type = mu_component_str(jp, "type");
  const char *s;
  p->name = mu_strdup(name ? name : "?");
  int t = mu_ptype_find(type);
  p->type = t < 0 ? MU_P_STR : (enum mu_ptype)t;
  if (name == NULL || t < 0) {
    mu_buf_printf(err, "%s: the runner described a parameter it should not ('%s' of type '%s')",
                  where, p->name, type ? type : "?");
    return MU_EINVAL;
  }
  s = mu_component_str(jp, "default");
  p->def = s ? mu_strdup(s) : NULL;
  s = mu_component_str(jp, "help");
  p->help = mu_strdup(s ? s : "");
  s = mu_component_str(jp, "short");
  p->short_name = s && strlen(s) == 1 ? s[0] : '\0';
  p->required = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(jp, "required"));
  p->remainder = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(jp, "remainder"));
  return 0;
}

/* FILE.py without a function: TorchX wants FILE.py:FUNCTION; name the file's functions. */
static int no_function(const char *name, const char *file, struct mu_buf *err)
{
  cJSON *ans = NULL;
  int rc = run_shim(request("list", file, NULL, name), &ans, err);
  if (rc != 0)
    return rc;
  struct mu_buf fns = MU_BUF_INIT(SIZE_MAX);
  const cJSON *f;
  cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(ans, "functions"))
  {
    if (cJSON_IsString(f))
      mu_buf_printf(&fns, "%s%s", fns.len ? ", " : "", f->valuestring);
  }
  mu_buf_printf(err,
                "'%s' is a Python component file: name the function that returns its AppDef, "
                "as TorchX does: muster run %s:FUNCTION (%s%s)",
                name, file, fns.len ? "it defines " : "it defines no function", mu_buf_str(&fns));
  mu_buf_release(&fns);
  cJSON_Delete(ans);
  return MU_EINVAL;
}

int mu_component_py_load(const char *name, struct mu_component **out, struct mu_buf *err)
{
  const char *sep = function_sep(name);
  char *file = sep ? mu_strndup(name, (size_t)(sep - name)) : mu_strdup(name);
  struct mu_component *c = NULL;
  cJSON *ans = NULL;
  int rc = 0;
  *out = NULL;
  if (!is_file(file)) {
    mu_buf_printf(err, "cannot read component '%s': %s", file, strerror(ENOENT));
    rc = MU_ENOENT;
    goto out;
  }
  if (sep == NULL || sep[1] == '\0') {
    rc = no_function(name, file, err);
    goto out;
  }
  rc = run_shim(request("describe", file, sep + 1, name), &ans, err);
  if (rc != 0)
    goto out;
  c = mu_calloc(1, sizeof(*c));
  c->name = mu_strdup(name);
  c->where = mu_strdup(file);
  c->py_file = mu_strdup(file);
  c->py_function = mu_strdup(sep + 1);
  const char *d = mu_component_str(ans, "description");
  c->description = mu_strdup(d ? d : "");
  const cJSON *params = cJSON_GetObjectItemCaseSensitive(ans, "params");
  size_t np = (size_t)cJSON_GetArraySize(params);
  c->params = mu_calloc(np ? np : 1, sizeof(*c->params));
  const cJSON *jp;
  cJSON_ArrayForEach(jp, params)
  {
    rc = param_from(jp, file, &c->params[c->nparams++], err);
    if (rc != 0)
      goto out;
  }
out:
  if (rc != 0) {
    mu_component_free(c);
    c = NULL;
  }
  *out = c;
  cJSON_Delete(ans);
  mu_free(file);
  return rc;
}

int mu_component_py_build(const struct mu_component *c, cJSON **values, struct mu_app **out,
                          struct mu_buf *err)
{
  cJSON *req = request("call", c->py_file, c->py_function, c->name);
  cJSON *given = cJSON_AddObjectToObject(req, "values");
  cJSON *ans = NULL;
  *out = NULL;
  for (size_t i = 0; i < c->nparams; i++)
    if (values[i] != NULL)
      cJSON_AddItemToObject(given, c->params[i].name, cJSON_Duplicate(values[i], 1));
  int rc = run_shim(req, &ans, err);
  if (rc == 0)
    rc = mu_component_app(c->where, cJSON_GetObjectItemCaseSensitive(ans, "app"), out, err);
  cJSON_Delete(ans);
  return rc;
}
