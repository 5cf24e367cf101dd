/* An evaluated component template into the job model (struct mu_app): the app's keys, then one
 * role at a time through a table of role keys and their setters, so that the YAML vocabulary
 * stays apart from the job model and an unknown key is an error naming the closest one.
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>

#include "muster/errno.h"

#include "alloc.h"
#include "component_impl.h"
#include "opts.h"

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
    struct mu_buf t = MU_BUF_INIT(SIZE_MAX);
    mu_component_value_text(it, &t);
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
    struct mu_buf t = MU_BUF_INIT(SIZE_MAX);
    mu_component_value_text(it, &t);
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

/* A mount as a mapping ({type: bind, src: /a, dst: /b, readonly: true}: a Python component's)
 * into the items of the list form, with no splitting at ',' (a path may hold one). */
static int mount_items(const struct build *b, const char *ctx, const cJSON *m,
                       struct mu_strvec *items)
{
  static const char *const keys[] = {"type", "src", "dst", "readonly", "perm", "size", NULL};
  if (mu_component_check_keys(m, keys, b->where, ctx, b->err) != 0)
    return MU_EINVAL;
  const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "type"));
  if (type == NULL) {
    mu_buf_printf(b->err, "%s: a mount mapping needs type: (bind, volume, device or shm)", ctx);
    return MU_EINVAL;
  }
  mu_strvec_pushf(items, "type=%s", type);
  const cJSON *it;
  cJSON_ArrayForEach(it, m)
  {
    if (strcmp(it->string, "type") == 0)
      continue;
    if (strcmp(it->string, "readonly") == 0) {
      if (cJSON_IsTrue(it) || mu_component_truthy_text(cJSON_GetStringValue(it)))
        mu_strvec_push(items, "readonly");
    } else if (cJSON_IsString(it)) {
      mu_strvec_pushf(items, "%s=%s", it->string, it->valuestring);
    }
  }
  return 0;
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
    else if (cJSON_IsObject(it) && mount_items(b, ctx, it, &items) != 0) {
      mu_strvec_release(&items);
      return MU_EINVAL;
    }
  }
  struct mu_buf e = MU_BUF_INIT(SIZE_MAX);
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
  if (mu_component_check_keys(v, keys, b->where, ctx, b->err) != 0)
    return MU_EINVAL;
  const char *h = scalar(cJSON_GetObjectItemCaseSensitive(v, "h"));
  if (h != NULL && h[0] != '\0') {
    /* A named resource wins over cpu/gpu/memMB (TorchX's specs.resource). */
    struct mu_buf e = MU_BUF_INIT(SIZE_MAX);
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

/* The role keys, sorted: key -> setter. "name" is handled by the caller. */
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
      const char *best = mu_component_closest(words, it->string);
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
  if (mu_component_check_keys(t, keys, b->where, "app", b->err) != 0)
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

int mu_component_app(const char *where, const cJSON *tree, struct mu_app **out, struct mu_buf *err)
{
  struct build b = {err, where};
  return build_app(&b, tree, out);
}
