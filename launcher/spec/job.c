/* The job spec: states, the app model, validation, macros, JSON, mounts and app ids (named
 * resources and instance types: resources.c). Nothing here prints; errors go into the caller's
 * buffer.
 */
#include <stdint.h>
#include <ctype.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>

#include "muster/errno.h"

#include "json.h"
#include "alloc.h"
#include "job.h"
#include "opts.h"
#include "random.h"

/* ---------------------------------------------------------------------------------------------
 * Job states
 */

static const char *const state_names[] = {
    "UNSUBMITTED", "SUBMITTED", "PENDING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED", "UNKNOWN",
};

const char *mu_job_state_name(enum mu_job_state s)
{
  if ((unsigned)s >= sizeof(state_names) / sizeof(state_names[0]))
    return "UNKNOWN";
  return state_names[s];
}

int mu_job_state_is_terminal(enum mu_job_state s)
{
  return s == MU_STATE_SUCCEEDED || s == MU_STATE_FAILED || s == MU_STATE_CANCELLED;
}

int mu_job_state_parse(const char *name, enum mu_job_state *out)
{
  for (size_t i = 0; i < sizeof(state_names) / sizeof(state_names[0]); i++) {
    if (strcasecmp(name, state_names[i]) == 0) {
      *out = (enum mu_job_state)i;
      return 0;
    }
  }
  return MU_EINVAL;
}

/* ---------------------------------------------------------------------------------------------
 * Ordered string maps
 */

void mu_kvlist_set(struct mu_kvlist *l, const char *key, const char *value)
{
  for (size_t i = 0; i < l->n; i++) {
    if (strcmp(l->v[i].key, key) == 0) {
      char *v = mu_strdup(value);
      mu_free(l->v[i].value);
      l->v[i].value = v;
      return;
    }
  }
  if (l->n == l->cap) {
    l->cap = l->cap ? l->cap * 2 : 8;
    l->v = mu_realloc(l->v, l->cap * sizeof(*l->v));
  }
  l->v[l->n].key = mu_strdup(key);
  l->v[l->n].value = mu_strdup(value);
  l->n++;
}

const char *mu_kvlist_get(const struct mu_kvlist *l, const char *key)
{
  for (size_t i = 0; i < l->n; i++)
    if (strcmp(l->v[i].key, key) == 0)
      return l->v[i].value;
  return NULL;
}

void mu_kvlist_release(struct mu_kvlist *l)
{
  if (l == NULL)
    return;
  for (size_t i = 0; i < l->n; i++) {
    mu_free(l->v[i].key);
    mu_free(l->v[i].value);
  }
  mu_free(l->v);
  l->v = NULL;
  l->n = l->cap = 0;
}

/* ---------------------------------------------------------------------------------------------
 * Apps and roles
 */

struct mu_app *mu_app_new(const char *name)
{
  struct mu_app *app = mu_calloc(1, sizeof(*app));
  app->name = mu_strdup(name ? name : "");
  return app;
}

struct mu_role *mu_app_add_role(struct mu_app *app, const char *name)
{
  app->roles = mu_realloc(app->roles, (app->nroles + 1) * sizeof(*app->roles));
  struct mu_role *r = &app->roles[app->nroles++];
  memset(r, 0, sizeof(*r));
  r->name = mu_strdup(name ? name : "");
  r->num_replicas = 1;
  r->min_replicas = -1;
  r->resource.cpu = r->resource.gpu = r->resource.memMB = -1;
  return r;
}

void mu_resource_add_device(struct mu_resource *r, const char *name, long count)
{
  for (size_t i = 0; i < r->ndevices; i++) {
    if (strcmp(r->devices[i].name, name) == 0) {
      r->devices[i].count = count;
      return;
    }
  }
  r->devices = mu_realloc(r->devices, (r->ndevices + 1) * sizeof(*r->devices));
  r->devices[r->ndevices].name = mu_strdup(name);
  r->devices[r->ndevices].count = count;
  r->ndevices++;
}

static void resource_release(struct mu_resource *r)
{
  for (size_t i = 0; i < r->ndevices; i++)
    mu_free(r->devices[i].name);
  mu_free(r->devices);
  r->devices = NULL;
  r->ndevices = 0;
  mu_kvlist_release(&r->capabilities);
}

void mu_role_release(struct mu_role *r)
{
  if (r == NULL)
    return;
  mu_free(r->name);
  mu_free(r->image);
  mu_free(r->entrypoint);
  mu_strvec_release(&r->args);
  mu_kvlist_release(&r->env);
  resource_release(&r->resource);
  for (size_t i = 0; i < r->nmounts; i++) {
    mu_free(r->mounts[i].src);
    mu_free(r->mounts[i].dst);
    mu_free(r->mounts[i].perm);
  }
  mu_free(r->mounts);
  for (size_t i = 0; i < r->nports; i++)
    mu_free(r->ports[i].name);
  mu_free(r->ports);
  mu_kvlist_release(&r->metadata);
  memset(r, 0, sizeof(*r));
}

void mu_app_free(struct mu_app *app)
{
  if (app == NULL)
    return;
  for (size_t i = 0; i < app->nroles; i++)
    mu_role_release(&app->roles[i]);
  mu_free(app->roles);
  mu_free(app->name);
  mu_kvlist_release(&app->metadata);
  mu_free(app);
}

/* ---------------------------------------------------------------------------------------------
 * Validation
 */

static int env_name_ok(const char *k)
{
  if (k[0] == '\0' || isdigit((unsigned char)k[0]))
    return 0;
  for (const char *p = k; *p; p++)
    if (!isalnum((unsigned char)*p) && *p != '_')
      return 0;
  return 1;
}

int mu_app_mentions(const struct mu_app *app, const char *s)
{
  for (size_t i = 0; i < app->nroles; i++) {
    const struct mu_role *r = &app->roles[i];
    if (r->entrypoint && strstr(r->entrypoint, s))
      return 1;
    for (size_t j = 0; j < r->args.n; j++)
      if (strstr(r->args.v[j], s))
        return 1;
    for (size_t j = 0; j < r->env.n; j++)
      if (strstr(r->env.v[j].value, s))
        return 1;
  }
  return 0;
}

long mu_text_bad(const char *s, unsigned flags)
{
  const unsigned char *p = (const unsigned char *)s;
  for (size_t i = 0; p[i] != '\0'; i++) {
    if (p[i] == '\t' || p[i] == '\n') {
      if (!(flags & MU_TEXT_LINES))
        return (long)i;
    } else if (p[i] < 0x20 || p[i] == 0x7f ||
               (p[i] == 0xc2 && p[i + 1] >= 0x80 && p[i + 1] <= 0x9f)) {
      return (long)i; /* C0, DEL, or C1 (U+0080-U+009F, NEL among them) */
    }
  }
  return -1;
}

void mu_put_shown(struct mu_buf *out, const char *s)
{
  size_t n = 0;
  for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++, n++) {
    if (n == 64) {
      mu_buf_puts(out, "...");
      return;
    }
    if (*p == '\n')
      mu_buf_puts(out, "\\n");
    else if (*p == '\t')
      mu_buf_puts(out, "\\t");
    else if (*p == '\\')
      mu_buf_puts(out, "\\\\");
    else if (*p < 0x20 || *p == 0x7f || (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f))
      mu_buf_printf(out, "\\x%02x", *p);
    else
      mu_buf_putc(out, (char)*p);
  }
}

int mu_text_check(const char *field, const char *s, unsigned flags, struct mu_buf *err)
{
  long at = mu_text_bad(s, flags);
  if (at < 0)
    return 0;
  const unsigned char *c = (const unsigned char *)s + at;
  mu_buf_printf(err, "%s: ", field);
  if (*c == 0xc2)
    mu_buf_printf(err, "control character U+%04X", c[1]);
  else
    mu_buf_printf(err, "control character 0x%02x", *c);
  mu_buf_printf(err, " at byte %ld is not allowed%s, in '", at,
                flags & MU_TEXT_LINES ? " (of the control characters only tab and newline are)"
                                      : "");
  mu_put_shown(err, s);
  mu_buf_puts(err, "'");
  return MU_EINVAL;
}

int mu_name_check(const char *field, const char *s, struct mu_buf *err)
{
  size_t n = strlen(s), i = 0;
  if (n >= 1 && n <= MU_NAME_MAX && isalnum((unsigned char)s[0]))
    for (i = 1; i < n; i++)
      if (!isalnum((unsigned char)s[i]) && strchr("-_.", s[i]) == NULL)
        break;
  if (n >= 1 && i == n)
    return 0;
  mu_buf_printf(err, "%s: '", field);
  mu_put_shown(err, s);
  mu_buf_printf(err,
                "' is not a valid name: use 1-%d letters, digits, '-', '_' and '.', starting with "
                "a letter or digit (it names files, Slurm jobs and Kubernetes objects)",
                MU_NAME_MAX);
  return MU_EINVAL;
}

/* The app's and the roles' names: valid, and no two roles alike. */
static int validate_names(const struct mu_app *app, struct mu_buf *err)
{
  if (mu_name_check("name", app->name ? app->name : "", err) != 0)
    return MU_EINVAL;
  if (app->nroles == 0) {
    mu_buf_printf(err, "roles: the app has no roles; a component must define at least one");
    return MU_EINVAL;
  }
  for (size_t i = 0; i < app->nroles; i++) {
    char field[48];
    snprintf(field, sizeof(field), "roles[%zu].name", i);
    if (mu_name_check(field, app->roles[i].name ? app->roles[i].name : "", err) != 0)
      return MU_EINVAL;
    for (size_t j = 0; j < i; j++) {
      if (strcmp(app->roles[j].name, app->roles[i].name) == 0) {
        mu_buf_printf(err, "roles[%zu].name: '%s' is already the name of roles[%zu]", i,
                      app->roles[i].name, j);
        return MU_EINVAL;
      }
    }
  }
  return mu_instance_check(app, err);
}

/* One text field of role i: "roles[i].<what>" names it in the error. */
static int role_text(size_t i, const char *what, const char *s, unsigned flags, struct mu_buf *err)
{
  char field[192];
  snprintf(field, sizeof(field), "roles[%zu].%s", i, what);
  return s == NULL ? 0 : mu_text_check(field, s, flags, err);
}

/* Every string of role i that reaches a command line, a script or a manifest: no control
 * characters, except tab and newline in the program's own arguments and environment. */
static int validate_role_text(const struct mu_role *r, size_t i, struct mu_buf *err)
{
  char what[160];
  int rc = role_text(i, "entrypoint", r->entrypoint, 0, err);
  rc = rc ? rc : role_text(i, "image", r->image, 0, err);
  for (size_t k = 0; rc == 0 && k < r->args.n; k++) {
    snprintf(what, sizeof(what), "args[%zu]", k);
    rc = role_text(i, what, r->args.v[k], MU_TEXT_LINES, err);
  }
  for (size_t k = 0; rc == 0 && k < r->env.n; k++) {
    if (!env_name_ok(r->env.v[k].key)) {
      mu_buf_printf(err, "roles[%zu].env: '", i);
      mu_put_shown(err, r->env.v[k].key);
      mu_buf_puts(err, "' is not a valid variable name ([A-Za-z_][A-Za-z0-9_]*)");
      return MU_EINVAL;
    }
    snprintf(what, sizeof(what), "env.%s", r->env.v[k].key);
    rc = role_text(i, what, r->env.v[k].value, MU_TEXT_LINES, err);
  }
  for (size_t k = 0; rc == 0 && k < r->nmounts; k++) {
    snprintf(what, sizeof(what), "mounts[%zu]", k);
    rc = role_text(i, what, r->mounts[k].src, 0, err);
    rc = rc ? rc : role_text(i, what, r->mounts[k].dst, 0, err);
    rc = rc ? rc : role_text(i, what, r->mounts[k].perm, 0, err);
  }
  for (size_t k = 0; rc == 0 && k < r->resource.ndevices; k++)
    rc = role_text(i, "resources.devices", r->resource.devices[k].name, 0, err);
  const struct mu_kvlist *maps[] = {&r->resource.capabilities, &r->metadata};
  for (size_t m = 0; rc == 0 && m < 2; m++)
    for (size_t k = 0; rc == 0 && k < maps[m]->n; k++) {
      snprintf(what, sizeof(what), "%s", m == 0 ? "resources.capabilities" : "metadata");
      rc = role_text(i, what, maps[m]->v[k].key, 0, err);
      rc = rc ? rc : role_text(i, what, maps[m]->v[k].value, 0, err);
    }
  for (size_t k = 0; rc == 0 && k < r->nports; k++)
    rc = role_text(i, "port_map", r->ports[k].name, 0, err);
  return rc;
}

/* The numbers and the parts that must be there. */
static int validate_role_fields(const struct mu_role *r, size_t i, struct mu_buf *err)
{
  if (r->entrypoint == NULL || r->entrypoint[0] == '\0') {
    mu_buf_printf(err, "roles[%zu].entrypoint: must not be empty", i);
    return MU_EINVAL;
  }
  if (r->num_replicas < 1) {
    mu_buf_printf(err, "roles[%zu].num_replicas: must be a positive integer, got %ld", i,
                  r->num_replicas);
    return MU_EINVAL;
  }
  if (r->min_replicas != -1 && (r->min_replicas < 1 || r->min_replicas > r->num_replicas)) {
    mu_buf_printf(err, "roles[%zu].min_replicas: must be between 1 and num_replicas (%ld), got %ld",
                  i, r->num_replicas, r->min_replicas);
    return MU_EINVAL;
  }
  if (r->max_retries < 0) {
    mu_buf_printf(err, "roles[%zu].max_retries: must be 0 or more, got %ld", i, r->max_retries);
    return MU_EINVAL;
  }
  const struct {
    const char *name;
    long v;
  } res[] = {{"cpu", r->resource.cpu}, {"gpu", r->resource.gpu}, {"memMB", r->resource.memMB}};
  for (size_t k = 0; k < 3; k++) {
    if (res[k].v < -1 || (res[k].v == 0 && k == 2)) {
      mu_buf_printf(err, "roles[%zu].resources.%s: must be a positive integer, got %ld", i,
                    res[k].name, res[k].v);
      return MU_EINVAL;
    }
  }
  for (size_t k = 0; k < r->resource.ndevices; k++) {
    if (r->resource.devices[k].count < 0) {
      mu_buf_printf(err, "roles[%zu].resources.devices.%s: must be 0 or more, got %ld", i,
                    r->resource.devices[k].name, r->resource.devices[k].count);
      return MU_EINVAL;
    }
  }
  for (size_t k = 0; k < r->nmounts; k++) {
    const struct mu_mount *m = &r->mounts[k];
    if (m->type != MU_MOUNT_SHM && (m->src == NULL || m->src[0] == '\0')) {
      mu_buf_printf(err, "roles[%zu].mounts[%zu].src: must not be empty", i, k);
      return MU_EINVAL;
    }
    if (m->dst == NULL || m->dst[0] == '\0') {
      mu_buf_printf(err, "roles[%zu].mounts[%zu].dst: must not be empty", i, k);
      return MU_EINVAL;
    }
  }
  for (size_t k = 0; k < r->nports; k++) {
    if (r->ports[k].port < 1 || r->ports[k].port > 65535) {
      mu_buf_printf(err, "roles[%zu].port_map.%s: must be a port number 1-65535, got %ld", i,
                    r->ports[k].name, r->ports[k].port);
      return MU_EINVAL;
    }
  }
  return 0;
}

int mu_app_validate(const struct mu_app *app, struct mu_buf *err)
{
  int rc = validate_names(app, err);
  for (size_t i = 0; rc == 0 && i < app->nroles; i++) {
    rc = validate_role_fields(&app->roles[i], i, err);
    rc = rc ? rc : validate_role_text(&app->roles[i], i, err);
  }
  for (size_t k = 0; rc == 0 && k < app->metadata.n; k++) {
    rc = mu_text_check("metadata", app->metadata.v[k].key, 0, err);
    rc = rc ? rc : mu_text_check("metadata", app->metadata.v[k].value, 0, err);
  }
  return rc;
}

/* ---------------------------------------------------------------------------------------------
 * Macros
 */

char *mu_macros_apply(const struct mu_macros *m, const char *s)
{
  struct mu_buf b = MU_BUF_INIT(SIZE_MAX);
  const struct {
    const char *name;
    const char *value;
  } tab[] = {
      {"app_id", m->app_id},
      {"replica_id", m->replica_id},
      {"img_root", m->img_root},
      {"rank0_env", m->rank0_env},
      {"rdzv_endpoint", m->rdzv_endpoint},
      {"num_replicas", m->num_replicas},
      {"c10d_endpoint", m->c10d_endpoint},
  };
  const char *p = s;
  while (*p) {
    if (p[0] == '$' && p[1] == '$') {
      mu_buf_putc(&b, '$');
      p += 2;
      continue;
    }
    if (p[0] == '$' && p[1] == '{') {
      const char *end = strchr(p + 2, '}');
      if (end != NULL) {
        size_t n = (size_t)(end - (p + 2));
        const char *val = NULL;
        for (size_t i = 0; i < sizeof(tab) / sizeof(tab[0]); i++)
          if (strlen(tab[i].name) == n && strncmp(tab[i].name, p + 2, n) == 0)
            val = tab[i].value;
        if (val != NULL) {
          mu_buf_puts(&b, val);
          p = end + 1;
          continue;
        }
      }
    }
    mu_buf_putc(&b, *p++);
  }
  return mu_buf_detach(&b);
}

/* ---------------------------------------------------------------------------------------------
 * JSON
 */

static const char *const mount_types[] = {"bind", "volume", "device", "shm", "secret", "configmap"};
static const char *const retry_names[] = {"APPLICATION", "REPLICA", "ROLE"};

static cJSON *kv_to_json(const struct mu_kvlist *l)
{
  cJSON *o = cJSON_CreateObject();
  for (size_t i = 0; i < l->n; i++)
    cJSON_AddStringToObject(o, l->v[i].key, l->v[i].value);
  return o;
}

int mu_app_to_json(const struct mu_app *app, struct mu_buf *out)
{
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "name", app->name);
  cJSON *roles = cJSON_AddArrayToObject(root, "roles");
  for (size_t i = 0; i < app->nroles; i++) {
    const struct mu_role *r = &app->roles[i];
    cJSON *jr = cJSON_CreateObject();
    cJSON_AddItemToArray(roles, jr);
    cJSON_AddStringToObject(jr, "name", r->name);
    cJSON_AddStringToObject(jr, "image", r->image ? r->image : "");
    cJSON_AddStringToObject(jr, "entrypoint", r->entrypoint ? r->entrypoint : "");
    cJSON *args = cJSON_AddArrayToObject(jr, "args");
    for (size_t k = 0; k < r->args.n; k++)
      cJSON_AddItemToArray(args, cJSON_CreateString(r->args.v[k]));
    cJSON_AddItemToObject(jr, "env", kv_to_json(&r->env));
    cJSON_AddNumberToObject(jr, "num_replicas", (double)r->num_replicas);
    if (r->min_replicas >= 0)
      cJSON_AddNumberToObject(jr, "min_replicas", (double)r->min_replicas);
    else
      cJSON_AddNullToObject(jr, "min_replicas");
    cJSON_AddNumberToObject(jr, "max_retries", (double)r->max_retries);
    cJSON_AddStringToObject(jr, "retry_policy", retry_names[r->retry_policy]);
    cJSON *res = cJSON_AddObjectToObject(jr, "resource");
    cJSON_AddNumberToObject(res, "cpu", (double)r->resource.cpu);
    cJSON_AddNumberToObject(res, "gpu", (double)r->resource.gpu);
    cJSON_AddNumberToObject(res, "memMB", (double)r->resource.memMB);
    cJSON_AddItemToObject(res, "capabilities", kv_to_json(&r->resource.capabilities));
    cJSON *dev = cJSON_AddObjectToObject(res, "devices");
    for (size_t k = 0; k < r->resource.ndevices; k++)
      cJSON_AddNumberToObject(dev, r->resource.devices[k].name,
                              (double)r->resource.devices[k].count);
    cJSON *ports = cJSON_AddObjectToObject(jr, "port_map");
    for (size_t k = 0; k < r->nports; k++)
      cJSON_AddNumberToObject(ports, r->ports[k].name, (double)r->ports[k].port);
    cJSON *mounts = cJSON_AddArrayToObject(jr, "mounts");
    for (size_t k = 0; k < r->nmounts; k++) {
      const struct mu_mount *m = &r->mounts[k];
      cJSON *jm = cJSON_CreateObject();
      cJSON_AddItemToArray(mounts, jm);
      cJSON_AddStringToObject(jm, "type", mount_types[m->type]);
      if (m->src != NULL)
        cJSON_AddStringToObject(jm, m->type == MU_MOUNT_VOLUME ? "src" : "src_path", m->src);
      cJSON_AddStringToObject(jm, "dst_path", m->dst ? m->dst : "");
      if (m->type == MU_MOUNT_DEVICE)
        cJSON_AddStringToObject(jm, "permissions", m->perm ? m->perm : "rwm");
      else if (m->type == MU_MOUNT_SHM)
        cJSON_AddNumberToObject(jm, "size_mb", (double)m->size_mb);
      else
        cJSON_AddBoolToObject(jm, "read_only", m->read_only);
    }
    cJSON_AddItemToObject(jr, "metadata", kv_to_json(&r->metadata));
  }
  cJSON_AddItemToObject(root, "metadata", kv_to_json(&app->metadata));
  char *s = cJSON_Print(root);
  cJSON_Delete(root);
  int rc = mu_buf_puts(out, s);
  cJSON_free(s);
  return rc;
}

static void kv_from_json(const cJSON *o, struct mu_kvlist *l)
{
  const cJSON *it;
  cJSON_ArrayForEach(it, o)
  {
    if (cJSON_IsString(it))
      mu_kvlist_set(l, it->string, it->valuestring);
  }
}

int mu_app_from_json(const char *json, struct mu_app **out)
{
  cJSON *root = cJSON_Parse(json);
  if (root == NULL || !cJSON_IsObject(root)) {
    cJSON_Delete(root);
    return MU_EPARSE;
  }
  struct mu_app *app = mu_app_new(mu_json_get_str(root, "name"));
  const cJSON *jr;
  cJSON_ArrayForEach(jr, cJSON_GetObjectItemCaseSensitive(root, "roles"))
  {
    struct mu_role *r = mu_app_add_role(app, mu_json_get_str(jr, "name"));
    const char *s = mu_json_get_str(jr, "image");
    r->image = s && *s ? mu_strdup(s) : NULL;
    s = mu_json_get_str(jr, "entrypoint");
    r->entrypoint = s ? mu_strdup(s) : NULL;
    const cJSON *a;
    cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(jr, "args"))
    {
      if (cJSON_IsString(a))
        mu_strvec_push(&r->args, a->valuestring);
    }
    kv_from_json(cJSON_GetObjectItemCaseSensitive(jr, "env"), &r->env);
    r->num_replicas = mu_json_get_long(jr, "num_replicas", 1);
    r->min_replicas = mu_json_get_long(jr, "min_replicas", -1);
    r->max_retries = mu_json_get_long(jr, "max_retries", 0);
    s = mu_json_get_str(jr, "retry_policy");
    for (size_t k = 0; s && k < 3; k++)
      if (strcmp(s, retry_names[k]) == 0)
        r->retry_policy = (enum mu_retry_policy)k;
    const cJSON *res = cJSON_GetObjectItemCaseSensitive(jr, "resource");
    r->resource.cpu = mu_json_get_long(res, "cpu", -1);
    r->resource.gpu = mu_json_get_long(res, "gpu", -1);
    r->resource.memMB = mu_json_get_long(res, "memMB", -1);
    kv_from_json(cJSON_GetObjectItemCaseSensitive(res, "capabilities"), &r->resource.capabilities);
    const cJSON *d;
    cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(res, "devices"))
    {
      if (cJSON_IsNumber(d))
        mu_resource_add_device(&r->resource, d->string, (long)d->valuedouble);
    }
    cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(jr, "port_map"))
    {
      if (!cJSON_IsNumber(d))
        continue;
      r->ports = mu_realloc(r->ports, (r->nports + 1) * sizeof(*r->ports));
      r->ports[r->nports].name = mu_strdup(d->string);
      r->ports[r->nports].port = (long)d->valuedouble;
      r->nports++;
    }
    cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(jr, "mounts"))
    {
      struct mu_mount m = {0};
      s = mu_json_get_str(d, "type");
      for (size_t k = 0; s && k < sizeof(mount_types) / sizeof(mount_types[0]); k++)
        if (strcmp(s, mount_types[k]) == 0)
          m.type = (enum mu_mount_type)k;
      s = mu_json_get_str(d, m.type == MU_MOUNT_VOLUME ? "src" : "src_path");
      m.src = s ? mu_strdup(s) : NULL;
      s = mu_json_get_str(d, "dst_path");
      m.dst = s ? mu_strdup(s) : NULL;
      s = mu_json_get_str(d, "permissions");
      m.perm = s ? mu_strdup(s) : NULL;
      m.read_only = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(d, "read_only"));
      m.size_mb = mu_json_get_long(d, "size_mb", 0);
      r->mounts = mu_realloc(r->mounts, (r->nmounts + 1) * sizeof(*r->mounts));
      r->mounts[r->nmounts++] = m;
    }
    kv_from_json(cJSON_GetObjectItemCaseSensitive(jr, "metadata"), &r->metadata);
  }
  kv_from_json(cJSON_GetObjectItemCaseSensitive(root, "metadata"), &app->metadata);
  cJSON_Delete(root);
  *out = app;
  return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Mounts
 */

static struct mu_mount *mount_add(struct mu_role *role, enum mu_mount_type t)
{
  role->mounts = mu_realloc(role->mounts, (role->nmounts + 1) * sizeof(*role->mounts));
  struct mu_mount *m = &role->mounts[role->nmounts++];
  memset(m, 0, sizeof(*m));
  m->type = t;
  return m;
}

/* Checks the mount just finished (the last one). */
static int mount_finish(struct mu_role *role, size_t first, struct mu_buf *err)
{
  for (size_t i = first; i < role->nmounts; i++) {
    struct mu_mount *m = &role->mounts[i];
    if (m->type != MU_MOUNT_SHM && m->src == NULL) {
      mu_buf_printf(err, "--mounts: mount %zu (type=%s) needs src=%s", i - first + 1,
                    mount_types[m->type],
                    m->type == MU_MOUNT_SECRET || m->type == MU_MOUNT_CONFIGMAP ? "NAME" : "PATH");
      return MU_EINVAL;
    }
    if (m->dst == NULL) {
      if (m->type == MU_MOUNT_DEVICE) {
        m->dst = mu_strdup(m->src);
      } else {
        mu_buf_printf(err, "--mounts: mount %zu (type=%s) needs dst=PATH", i - first + 1,
                      mount_types[m->type]);
        return MU_EINVAL;
      }
    }
    if (m->type == MU_MOUNT_DEVICE && m->perm == NULL)
      m->perm = mu_strdup("rwm");
    if (m->type == MU_MOUNT_SECRET || m->type == MU_MOUNT_CONFIGMAP)
      m->read_only = 1; /* Kubernetes mounts both read-only */
  }
  return 0;
}

/* type=VAL: a mount type (mount_types[], in enum order). Returns: 0, or MU_EINVAL (said). */
static int mount_type(const char *val, enum mu_mount_type *t, struct mu_buf *err)
{
  for (size_t k = 0; val != NULL && k < sizeof(mount_types) / sizeof(mount_types[0]); k++) {
    if (strcmp(val, mount_types[k]) == 0) {
      *t = (enum mu_mount_type)k;
      return 0;
    }
  }
  mu_buf_printf(err,
                "--mounts: unknown mount type '%s'; use bind, volume, device, shm, secret or "
                "configmap",
                val ? val : "");
  return MU_EINVAL;
}

/* One KEY[=VAL] item (KEY the kl bytes of it) of the mount cur. Returns: 0, or MU_EINVAL with
 * the message in err. */
static int mount_option(struct mu_mount *cur, const char *it, size_t kl, const char *val,
                        struct mu_buf *err)
{
#define KEY_IS(k) (kl == strlen(k) && strncmp(it, (k), kl) == 0)
  int named = cur->type == MU_MOUNT_SECRET || cur->type == MU_MOUNT_CONFIGMAP;
  int path = KEY_IS("src") || KEY_IS("source") || (named && KEY_IS("name")) || KEY_IS("dst") ||
             KEY_IS("destination") || KEY_IS("target");
  if (path && val == NULL) {
    mu_buf_printf(err, "--mounts: '%.*s' needs a value (%.*s=PATH)", (int)kl, it, (int)kl, it);
    return MU_EINVAL;
  }
  if (KEY_IS("src") || KEY_IS("source") || (named && KEY_IS("name"))) {
    mu_free(cur->src);
    if (!named && val[0] == '~' && (val[1] == '/' || val[1] == '\0') && getenv("HOME") != NULL)
      cur->src = mu_asprintf("%s%s", getenv("HOME"), val + 1);
    else
      cur->src = mu_strdup(val);
  } else if (path) {
    mu_free(cur->dst);
    cur->dst = mu_strdup(val);
  } else if (KEY_IS("readonly") || KEY_IS("read_only")) {
    cur->read_only = 1;
  } else if (KEY_IS("perm")) {
    if (val == NULL || val[0] == '\0' || strspn(val, "rwm") != strlen(val)) {
      mu_buf_printf(err, "--mounts: perm='%s' must be a subset of 'rwm'", val ? val : "");
      return MU_EINVAL;
    }
    mu_free(cur->perm);
    cur->perm = mu_strdup(val);
  } else if (KEY_IS("size") || KEY_IS("size_mb")) {
    if (val == NULL || mu_parse_long(val, 1, LONG_MAX, &cur->size_mb) != 0) {
      mu_buf_printf(err, "--mounts: size='%s' must be a positive number of MB", val ? val : "");
      return MU_EINVAL;
    }
  } else {
    mu_buf_printf(err,
                  "--mounts: unknown mount option '%.*s'; use type, src, dst, readonly, perm "
                  "or size",
                  (int)kl, it);
    return MU_EINVAL;
  }
  return 0;
#undef KEY_IS
}

int mu_mounts_parse(struct mu_role *role, char *const *items, size_t n, struct mu_buf *err)
{
  size_t first = role->nmounts;
  struct mu_mount *cur = NULL;
  for (size_t i = 0; i < n; i++) {
    const char *it = items[i];
    if (it[0] == '\0')
      continue;
    const char *eq = strchr(it, '=');
    size_t kl = eq ? (size_t)(eq - it) : strlen(it);
    const char *val = eq ? eq + 1 : NULL;
    if (kl == 4 && strncmp(it, "type", 4) == 0) {
      enum mu_mount_type t;
      if (mount_type(val, &t, err) != 0)
        return MU_EINVAL;
      cur = mount_add(role, t);
      continue;
    }
    if (cur == NULL) {
      mu_buf_printf(err, "--mounts: '%s' comes before any type=...; type must be specified first",
                    it);
      return MU_EINVAL;
    }
    if (mount_option(cur, it, kl, val, err) != 0)
      return MU_EINVAL;
  }
  return mount_finish(role, first, err);
}

/* ---------------------------------------------------------------------------------------------
 * Ids and shell quoting
 */

char *mu_normalize_name(const char *s, size_t max)
{
  char *out = mu_malloc(strlen(s) + 4);
  size_t n = 0;
  for (const char *p = s; *p && n < max; p++) {
    char c = (char)tolower((unsigned char)*p);
    if (c == '_' || c == '.' || c == ' ' || c == '/')
      c = '-';
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
      continue;
    if (n == 0 && !(c >= 'a' && c <= 'z'))
      continue;
    if (c == '-' && n > 0 && out[n - 1] == '-')
      continue;
    out[n++] = c;
  }
  while (n > 0 && out[n - 1] == '-')
    n--;
  if (n == 0) {
    memcpy(out, "app", 3);
    n = 3;
  }
  out[n] = '\0';
  return out;
}

char *mu_app_id_make(const char *name)
{
  char suffix[13];
  if (mu_app_id_suffix(suffix) != 0)
    return NULL;
  size_t room = 63 - 1 - strlen(suffix);
  char *base = mu_normalize_name(name, room);
  char *id = mu_asprintf("%s-%s", base, suffix);
  mu_free(base);
  return id;
}

int mu_shell_quote(const char *s, struct mu_buf *out)
{
  if (s[0] != '\0' && strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                "@%+=:,./-_") == strlen(s))
    return mu_buf_puts(out, s);
  int rc = mu_buf_putc(out, '\'');
  for (const char *p = s; *p && rc == 0; p++)
    rc = *p == '\'' ? mu_buf_puts(out, "'\"'\"'") : mu_buf_putc(out, *p);
  return rc ? rc : mu_buf_putc(out, '\'');
}
