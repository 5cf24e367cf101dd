/* The local_container scheduler: the local scheduler's jobs (supervisor, embedded musterd,
 * state files, status/log/cancel/list) with each replica inside its role's image, and no
 * daemon. At submission every image is pulled with skopeo into one OCI layout under the image
 * cache and unpacked with umoci into <cache>/rootfs/<digest>, once per digest. Each replica
 * then runs as
 *
 *   unshare --mount --pid --fork --kill-child sh -c SCRIPT
 *
 * where SCRIPT (host tools, in the new mount namespace) lays a private overlay over the
 * unpacked root (writes go to a tmpfs and vanish with the replica), mounts /proc, a minimal
 * /dev and a tmpfs /dev/shm, binds the portable muster bundle read-only at /muster (the agent,
 * with its own loader and libraries, whatever libc the image has), the job's app directory at
 * its own path (token, error files) and the role's --mounts, then execs `env -i IMAGE-ENV
 * REPLICA-ENV unshare --root ROOT --wd WORKDIR -- COMMAND`. The network namespace is the
 * host's: the agents reach the job's musterd on loopback, as on -s local. Every mount lives in
 * the replica's namespace and goes with its last process.
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
#include "fsutil.h"
#include "local.h"
#include "path.h"
#include "sched.h"
#include "sched_exec.h"

#define NEURON_DEVICE "aws.amazon.com/neuron"
#define EFA_DEVICE "vpc.amazonaws.com/efa"
#define CONFIG_MAX (4u << 20) /* an index.json or config.json read back */

static const struct mu_runopt container_runopts[] = {
    MU_LOCAL_RUNOPTS,
    {"image_cache", MU_RUNOPT_STR, NULL, 0,
     "where pulled images (an OCI layout) and their unpacked roots go (default "
     "$XDG_CACHE_HOME/muster/images, else ~/.cache/muster/images); a root is unpacked once per "
     "image digest"},
    {"muster_dir", MU_RUNOPT_STR, NULL, 0,
     "the portable muster bundle (bin/muster, lib/ld-linux-x86-64.so.2) bound read-only at "
     "/muster in every replica (default: the build tree's portable/muster beside this muster)"},
    {"tls_verify", MU_RUNOPT_BOOL, "true", 0,
     "check the registry's certificate when pulling (false for a plain-HTTP registry)"},
    {NULL, MU_RUNOPT_STR, NULL, 0, NULL},
};

struct image {
  char *ref;            /* as the role names it */
  char *rootfs;         /* <cache>/rootfs/<hex>/rootfs once pulled; NULL in a dryrun */
  struct mu_kvlist env; /* the image's Env */
  char *cwd;            /* the image's WorkingDir */
};

struct mu_local_container {
  char *cache;
  char *muster_dir;
  int tls_verify;
  struct image *img;
  size_t nimg;
};

void mu_local_container_free(struct mu_local_container *c)
{
  if (c == NULL)
    return;
  for (size_t i = 0; i < c->nimg; i++) {
    mu_free(c->img[i].ref);
    mu_free(c->img[i].rootfs);
    mu_kvlist_release(&c->img[i].env);
    mu_free(c->img[i].cwd);
  }
  mu_free(c->img);
  mu_free(c->cache);
  mu_free(c->muster_dir);
  mu_free(c);
}

static struct image *image_of(const struct mu_local_container *c, const char *ref)
{
  for (size_t i = 0; i < c->nimg; i++)
    if (strcmp(c->img[i].ref, ref) == 0)
      return &c->img[i];
  return NULL;
}

/* The portable bundle beside this muster (a build tree's portable/muster), or NULL. */
static char *bundle_default(void)
{
  char *exe = mu_self_exe();
  char *slash = exe ? strrchr(exe, '/') : NULL;
  if (slash == NULL) {
    mu_free(exe);
    return NULL;
  }
  *slash = '\0';
  char *dir = mu_asprintf("%s/portable/muster", exe);
  mu_free(exe);
  return dir;
}

static int bundle_check(const char *dir, struct mu_buf *err)
{
  char *bin = mu_asprintf("%s/bin/muster", dir);
  char *ld = mu_asprintf("%s/lib/ld-linux-x86-64.so.2", dir);
  int ok = access(bin, X_OK) == 0 && access(ld, R_OK) == 0;
  mu_free(bin);
  mu_free(ld);
  if (ok)
    return 0;
  mu_buf_printf(err,
                "-cfg muster_dir='%s' is no portable muster bundle (bin/muster and "
                "lib/ld-linux-x86-64.so.2): build muster without sanitizers (cmake builds "
                "build/portable/muster) and name that directory with -cfg muster_dir=DIR",
                dir);
  return MU_EINVAL;
}

/* The cache directory: -cfg image_cache, else the user's cache. */
static char *cache_dir(const struct mu_cfg *cfg)
{
  const char *v = mu_cfg_get(cfg, "image_cache");
  if (v != NULL && *v)
    return mu_strdup(v);
  const char *x = getenv("XDG_CACHE_HOME");
  if (x != NULL && *x == '/')
    return mu_asprintf("%s/muster/images", x);
  const char *h = getenv("HOME");
  return mu_asprintf("%s/.cache/muster/images", h && *h ? h : "/tmp");
}

/* The job's images, one per distinct role image, and the runopts. Returns: 0 or MU_EINVAL. */
static int container_new(const struct mu_app *app, const struct mu_cfg *cfg,
                         struct mu_local_container **out, struct mu_buf *err)
{
  struct mu_local_container *c = mu_calloc(1, sizeof(*c));
  c->img = mu_calloc(app->nroles ? app->nroles : 1, sizeof(*c->img));
  int rc = 0;
  for (size_t i = 0; i < app->nroles && rc == 0; i++) {
    const char *ref = app->roles[i].image;
    if (ref == NULL || *ref == '\0' || strchr(ref, ' ') != NULL) {
      mu_buf_printf(err,
                    "role '%s' has no image: -s local_container runs every replica in its "
                    "role's image; pass --image REGISTRY/NAME:TAG (or use -s local)",
                    app->roles[i].name);
      rc = MU_EINVAL;
    } else if (image_of(c, ref) == NULL) {
      c->img[c->nimg++].ref = mu_strdup(ref);
    }
  }
  const char *md = mu_cfg_get(cfg, "muster_dir");
  c->muster_dir = md && *md ? mu_strdup(md) : bundle_default();
  if (rc == 0 && c->muster_dir == NULL) {
    mu_buf_printf(err, "cannot find this program's path: name the portable muster bundle with "
                       "-cfg muster_dir=DIR");
    rc = MU_EINVAL;
  }
  rc = rc ? rc : bundle_check(c->muster_dir, err);
  c->cache = cache_dir(cfg);
  c->tls_verify = mu_cfg_get(cfg, "tls_verify") == NULL || mu_cfg_get_bool(cfg, "tls_verify");
  if (rc != 0) {
    mu_local_container_free(c);
    return rc;
  }
  *out = c;
  return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Pulling and unpacking
 */

/* The tag of an image in the cache's OCI layout: its name with [^A-Za-z0-9._-] as '-', and a
 * hash of the whole, so two names never share a tag. */
static char *layout_tag(const char *ref)
{
  uint64_t h = 1469598103934665603ull;
  struct mu_buf b = MU_BUF_INIT(SIZE_MAX);
  for (const char *s = ref; *s; s++) {
    h = (h ^ (unsigned char)*s) * 1099511628211ull;
    int ok = (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
             *s == '.' || *s == '_' || *s == '-';
    if (b.len < 80)
      mu_buf_putc(&b, ok ? *s : '-');
  }
  mu_buf_printf(&b, "-%016llx", (unsigned long long)h);
  return mu_buf_detach(&b);
}

static const struct mu_exec_hint pull_hints[] = {
    {{"connection refused", "no such host", "i/o timeout", "dial tcp", NULL},
     "the registry cannot be reached: check the image's registry address and that it runs"},
    {{"http response to https client", "server gave HTTP response", NULL},
     "the registry speaks plain HTTP: add -cfg tls_verify=false"},
    {{"manifest unknown", "name unknown", "not found", NULL},
     "the registry has no such image or tag: check --image (skopeo list-tags docker://REPO)"},
    {{"unauthorized", "authentication required", "denied", NULL},
     "the registry refuses us: log in with `skopeo login REGISTRY`"},
    {{NULL}, NULL},
};

/* The manifest digest's hex that index.json gives tag. Returns: it, or NULL. */
static char *layout_digest(const char *layout, const char *tag)
{
  char *path = mu_asprintf("%s/index.json", layout);
  struct mu_buf text = MU_BUF_INIT(CONFIG_MAX);
  char *hex = NULL;
  if (mu_read_file(path, CONFIG_MAX, &text) == 0) {
    cJSON *j = cJSON_Parse(mu_buf_str(&text));
    const cJSON *m;
    cJSON_ArrayForEach(m, cJSON_GetObjectItem(j, "manifests"))
    {
      const cJSON *n = cJSON_GetObjectItem(cJSON_GetObjectItem(m, "annotations"),
                                           "org.opencontainers.image.ref.name");
      const char *d = cJSON_GetStringValue(cJSON_GetObjectItem(m, "digest"));
      if (cJSON_IsString(n) && strcmp(n->valuestring, tag) == 0 && d != NULL &&
          strncmp(d, "sha256:", 7) == 0 && strspn(d + 7, "0123456789abcdef") == 64) {
        mu_free(hex);
        hex = mu_strdup(d + 7);
      }
    }
    cJSON_Delete(j);
  }
  mu_buf_release(&text);
  mu_free(path);
  return hex;
}

/* skopeo copy docker://REF oci:<cache>/oci:TAG (blobs already there are not fetched again).
 * Returns: 0 with *hex the manifest digest, or an error in err. */
static int pull(const struct mu_local_container *c, const char *ref, char **hex, struct mu_buf *err)
{
  char *layout = mu_asprintf("%s/oci", c->cache);
  char *tag = layout_tag(ref);
  struct mu_strvec av = MU_STRVEC_INIT;
  mu_strvec_push(&av, "skopeo");
  mu_strvec_push(&av, "copy");
  mu_strvec_push(&av, "--quiet");
  mu_strvec_push(&av, "--retry-times=0");
  mu_strvec_pushf(&av, "--src-tls-verify=%s", c->tls_verify ? "true" : "false");
  mu_strvec_pushf(&av, "%s%s", strstr(ref, "://") || strchr(ref, ':') == ref ? "" : "docker://",
                  ref);
  mu_strvec_pushf(&av, "oci:%s:%s", layout, tag);
  char *what = mu_asprintf("skopeo copy (pulling the image '%s')", ref);
  int rc = mu_mkdir_p(layout);
  if (rc != 0)
    mu_buf_printf(err, "cannot create the image cache '%s': %s (set -cfg image_cache=DIR)", layout,
                  mu_strerror(rc));
  else
    rc = mu_exec_tool(av.v, NULL, what,
                      "-s local_container pulls images with skopeo, which is not installed: "
                      "apt-get install skopeo",
                      pull_hints, NULL, err);
  if (rc == 0 && (*hex = layout_digest(layout, tag)) == NULL) {
    mu_buf_printf(err, "skopeo pulled '%s' but %s/index.json names no manifest for it", ref,
                  layout);
    rc = MU_EIO;
  }
  mu_free(what);
  mu_strvec_release(&av);
  mu_free(tag);
  mu_free(layout);
  return rc;
}

/* umoci unpack into <cache>/rootfs/<hex>, unless a run before did. Returns: 0 or an error. */
static int unpack(const struct mu_local_container *c, const char *ref, const char *bundle,
                  struct mu_buf *err)
{
  struct stat st;
  if (stat(bundle, &st) == 0)
    return 0; /* unpacked before: a bundle appears whole, by rename */
  char *tmp = mu_asprintf("%s.tmp.%ld", bundle, (long)getpid());
  char *tag = layout_tag(ref);
  struct mu_strvec av = MU_STRVEC_INIT;
  mu_strvec_push(&av, "umoci");
  mu_strvec_push(&av, "unpack");
  mu_strvec_pushf(&av, "--image=%s/oci:%s", c->cache, tag);
  mu_strvec_push(&av, tmp);
  char *parent = mu_asprintf("%s/rootfs", c->cache);
  int rc = mu_mkdir_p(parent);
  if (rc == 0)
    rc = mu_exec_tool(av.v, NULL, "umoci unpack",
                      "-s local_container unpacks images with umoci, which is not installed: "
                      "apt-get install umoci",
                      NULL, NULL, err);
  else
    mu_buf_printf(err, "cannot create '%s': %s", parent, mu_strerror(rc));
  if (rc == 0 && rename(tmp, bundle) != 0 && stat(bundle, &st) != 0) {
    mu_buf_printf(err, "cannot rename '%s' to '%s': %s", tmp, bundle, strerror(errno));
    rc = MU_EIO;
  }
  if (stat(tmp, &st) == 0) { /* failed, or another run unpacked the same digest first */
    struct mu_strvec rm = MU_STRVEC_INIT;
    mu_strvec_push(&rm, "rm");
    mu_strvec_push(&rm, "-rf");
    mu_strvec_push(&rm, "--");
    mu_strvec_push(&rm, tmp);
    struct mu_buf ignore = MU_BUF_INIT(4096);
    int status;
    mu_exec_capture(rm.v, NULL, NULL, &ignore, &status);
    mu_buf_release(&ignore);
    mu_strvec_release(&rm);
  }
  mu_strvec_release(&av);
  mu_free(parent);
  mu_free(tag);
  mu_free(tmp);
  return rc;
}

/* The image's Env and WorkingDir from the runtime config umoci wrote. */
static void read_config(struct image *im, const char *bundle)
{
  char *path = mu_asprintf("%s/config.json", bundle);
  struct mu_buf text = MU_BUF_INIT(CONFIG_MAX);
  cJSON *j = mu_read_file(path, CONFIG_MAX, &text) == 0 ? cJSON_Parse(mu_buf_str(&text)) : NULL;
  const cJSON *proc = cJSON_GetObjectItem(j, "process"), *e;
  cJSON_ArrayForEach(e, cJSON_GetObjectItem(proc, "env"))
  {
    const char *kv = cJSON_GetStringValue(e);
    const char *eq = kv ? strchr(kv, '=') : NULL;
    if (eq != NULL && eq != kv) {
      char *k = mu_strndup(kv, (size_t)(eq - kv));
      mu_kvlist_set(&im->env, k, eq + 1);
      mu_free(k);
    }
  }
  const char *cwd = cJSON_GetStringValue(cJSON_GetObjectItem(proc, "cwd"));
  mu_free(im->cwd);
  im->cwd = mu_strdup(cwd && *cwd == '/' ? cwd : "/");
  cJSON_Delete(j);
  mu_buf_release(&text);
  mu_free(path);
}

static int pull_all(struct mu_local_container *c, struct mu_buf *err)
{
  for (size_t i = 0; i < c->nimg; i++) {
    struct image *im = &c->img[i];
    char *hex = NULL;
    int rc = pull(c, im->ref, &hex, err);
    char *bundle = rc == 0 ? mu_asprintf("%s/rootfs/%s", c->cache, hex) : NULL;
    rc = rc ? rc : unpack(c, im->ref, bundle, err);
    if (rc == 0) {
      read_config(im, bundle);
      mu_free(im->rootfs);
      im->rootfs = mu_asprintf("%s/rootfs", bundle);
    }
    mu_free(bundle);
    mu_free(hex);
    if (rc != 0)
      return rc;
  }
  return 0;
}

/* ---------------------------------------------------------------------------------------------
 * The replica's command: its namespace, its mounts, its root
 */

static void put_q(struct mu_buf *s, const char *word)
{
  mu_shell_quote(word, s);
}

/* SRC bound at ROOT/DST ("$r" in the script); a file is bound onto a file. */
static void put_bind(struct mu_buf *s, const char *src, const char *dst, int ro)
{
  mu_buf_puts(s, "s=");
  put_q(s, src);
  mu_buf_puts(s, "; t=\"$r\"");
  put_q(s, dst);
  /* a symbolic link in the image is replaced, never followed out of the root */
  mu_buf_puts(s, "\nif [ -L \"$t\" ]; then rm -f \"$t\"; fi\n"
                 "if [ -d \"$s\" ]; then mkdir -p \"$t\"; else mkdir -p \"${t%/*}\"; "
                 ": >>\"$t\"; fi\nmount --bind \"$s\" \"$t\"\n");
  if (ro)
    mu_buf_puts(s, "mount -o remount,bind,ro \"$t\"\n");
}

/* The role's --mounts: host paths and devices bound, shm a tmpfs, a named volume (a
 * PersistentVolumeClaim on Kubernetes) a directory <image cache>/volumes/NAME that outlives the
 * job, as a container runtime's named volume. Returns: 0, or MU_EINVAL for a Kubernetes object.
 */
static int put_mounts(struct mu_buf *s, const struct mu_local_plan *p, const struct mu_role *r,
                      struct mu_buf *err)
{
  for (size_t i = 0; i < r->nmounts; i++) {
    const struct mu_mount *m = &r->mounts[i];
    if (m->type == MU_MOUNT_BIND || m->type == MU_MOUNT_DEVICE) {
      put_bind(s, m->src, m->dst, m->read_only);
    } else if (m->type == MU_MOUNT_VOLUME && m->src && mu_path_segment_ok(m->src)) {
      char *dir = mu_asprintf("%s/volumes/%s", p->container->cache, m->src);
      mu_buf_puts(s, "mkdir -p ");
      put_q(s, dir);
      mu_buf_putc(s, '\n');
      put_bind(s, dir, m->dst, m->read_only);
      mu_free(dir);
    } else if (m->type == MU_MOUNT_SHM) {
      mu_buf_puts(s, "t=\"$r\"");
      put_q(s, m->dst);
      mu_buf_printf(s, "\nmkdir -p \"$t\"\nmount -t tmpfs -o mode=1777,size=%ldm shm \"$t\"\n",
                    m->size_mb ? m->size_mb : 64);
    } else {
      mu_buf_printf(err,
                    "role '%s': a --mounts of type secret or configmap (or a volume whose name "
                    "is not one path segment) names a Kubernetes object, which -s "
                    "local_container does not have; bind a host directory instead: "
                    "type=bind,src=/host/dir,dst=%s",
                    r->name, m->dst ? m->dst : "/path");
      return MU_EINVAL;
    }
  }
  return 0;
}

/* How many devices named name (aws.amazon.com/neuron, ...) the role asks for. */
static long role_devices(const struct mu_role *r, const char *name)
{
  for (size_t i = 0; i < r->resource.ndevices; i++)
    if (strcmp(r->resource.devices[i].name, name) == 0)
      return r->resource.devices[i].count;
  return 0;
}

/* The part of the script that makes the root: a tmpfs-backed overlay over the unpacked image,
 * /proc, /dev, /dev/shm, the bundle at /muster and the app directory at its own path. */
static void put_root(struct mu_buf *s, const struct mu_local_plan *p,
                     const struct mu_local_replica *rp, const char *lower)
{
  mu_buf_puts(s, "set -e\nd=");
  put_q(s, rp->dir);
  mu_buf_puts(s, "/.container\nmkdir -p \"$d\"\nmount -t tmpfs -o mode=0700 muster-ctr \"$d\"\n"
                 "mkdir \"$d/up\" \"$d/work\" \"$d/root\"\nmount -t overlay -o lowerdir=");
  put_q(s, lower);
  mu_buf_puts(s,
              ",upperdir=\"$d/up\",workdir=\"$d/work\" overlay \"$d/root\"\nr=\"$d/root\"\n"
              "mkdir -p \"$r/proc\" \"$r/dev\" \"$r/tmp\" \"$r/muster\"\n"
              "mount -t proc proc \"$r/proc\"\n"
              "mount -t tmpfs -o mode=0755,nosuid muster-dev \"$r/dev\"\n"
              "for n in null zero full random urandom tty; do : >\"$r/dev/$n\"; "
              "mount --bind \"/dev/$n\" \"$r/dev/$n\"; done\n"
              "mkdir \"$r/dev/shm\" \"$r/dev/pts\"\n"
              "mount -t tmpfs -o mode=1777,nosuid,nodev shm \"$r/dev/shm\"\n"
              "ln -s /proc/self/fd \"$r/dev/fd\"\nln -s /proc/self/fd/0 \"$r/dev/stdin\"\n"
              "ln -s /proc/self/fd/1 \"$r/dev/stdout\"\nln -s /proc/self/fd/2 \"$r/dev/stderr\"\n");
  /* the host's names, as a container runtime writes its own: the agents resolve this host */
  static const char *const etc[] = {"/etc/hosts", "/etc/resolv.conf", "/etc/hostname"};
  for (size_t i = 0; i < sizeof(etc) / sizeof(etc[0]); i++)
    if (access(etc[i], R_OK) == 0)
      put_bind(s, etc[i], etc[i], 1);
  put_bind(s, p->container->muster_dir, "/muster", 1);
  put_bind(s, p->app_dir, p->app_dir, 0);
  if (p->token_file != NULL && !p->token_made)
    put_bind(s, p->token_file, p->token_file, 1);
  if (p->tls_dir != NULL)
    put_bind(s, p->tls_dir, p->tls_dir, 1);
}

/* The environment inside: the image's, then the replica's, PATH with /muster/bin first. */
static void put_env(struct mu_strvec *av, const struct image *im, const struct mu_local_replica *rp)
{
  struct mu_kvlist env = MU_KVLIST_INIT;
  mu_kvlist_set(&env, "HOME", "/root");
  for (size_t i = 0; i < im->env.n; i++)
    mu_kvlist_set(&env, im->env.v[i].key, im->env.v[i].value);
  for (size_t i = 0; i < rp->env.n; i++)
    mu_kvlist_set(&env, rp->env.v[i].key, rp->env.v[i].value);
  if (mu_kvlist_get(&env, "PYTHONUNBUFFERED") == NULL)
    mu_kvlist_set(&env, "PYTHONUNBUFFERED", "x");
  const char *path = mu_kvlist_get(&env, "PATH");
  char *np =
      mu_asprintf("/muster/bin:%s",
                  path ? path : "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
  mu_kvlist_set(&env, "PATH", np);
  mu_free(np);
  for (size_t i = 0; i < env.n; i++)
    mu_strvec_pushf(av, "%s=%s", env.v[i].key, env.v[i].value);
  mu_kvlist_release(&env);
}

static const struct mu_role *role_of(const struct mu_app *app, const char *name)
{
  for (size_t i = 0; i < app->nroles; i++)
    if (strcmp(app->roles[i].name, name) == 0)
      return &app->roles[i];
  return NULL;
}

/* A host program's path from $PATH (the inner commands run with the image's PATH), else name. */
static char *host_tool(const char *name)
{
  const char *path = getenv("PATH");
  char *copy = mu_strdup(path && *path ? path : "/usr/sbin:/usr/bin:/sbin:/bin");
  char *found = NULL, *save = NULL;
  for (char *d = strtok_r(copy, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
    char *f = mu_asprintf("%s/%s", d, name);
    if (*d == '/' && access(f, X_OK) == 0)
      found = f;
    else
      mu_free(f);
  }
  mu_free(copy);
  return found ? found : mu_strdup(name);
}

/* One replica's argv: unshare ... sh -c SCRIPT NAME env -i ENV... unshare --root=ROOT
 * --wd=WORKDIR -- CMD... Returns: 0 or MU_EINVAL. */
static int wrap_one(struct mu_local_plan *p, struct mu_local_replica *rp, struct mu_buf *err)
{
  const struct mu_role *r = role_of(p->app, rp->role);
  const struct image *im = r ? image_of(p->container, r->image) : NULL;
  if (im == NULL) {
    mu_buf_printf(err, "role '%s' has no image: pass --image", rp->role);
    return MU_EINVAL;
  }
  char *job = mu_asprintf("local_container://%s/%s", MU_SESSION, p->app_id);
  mu_kvlist_set(&rp->env, "MUSTER_JOB_ID", job);
  mu_free(job);
  struct mu_buf s = MU_BUF_INIT(SIZE_MAX);
  char *lower = im->rootfs
                    ? mu_strdup(im->rootfs)
                    : mu_asprintf("%s/rootfs/<digest of %s>/rootfs", p->container->cache, im->ref);
  put_root(&s, p, rp, lower);
  mu_free(lower);
  int rc = put_mounts(&s, p, r, err);
  if (role_devices(r, NEURON_DEVICE) > 0) /* the host's Neuron devices, where it has them */
    mu_buf_puts(&s, "for n in /dev/neuron[0-9]*; do if [ -e \"$n\" ]; then : >\"$r$n\"; "
                    "mount --bind \"$n\" \"$r$n\"; fi; done\n");
  mu_buf_puts(&s, "exec \"$@\"\n");
  struct mu_strvec av = MU_STRVEC_INIT;
  char *unshare = host_tool("unshare");
  mu_strvec_push(&av, unshare);
  mu_strvec_push(&av, "--mount");
  mu_strvec_push(&av, "--pid");
  mu_strvec_push(&av, "--fork");
  mu_strvec_push(&av, "--kill-child");
  mu_strvec_push(&av, "--");
  mu_strvec_push(&av, "/bin/sh");
  mu_strvec_push(&av, "-c");
  mu_strvec_push(&av, mu_buf_str(&s));
  mu_strvec_push(&av, "muster-container");
  mu_strvec_push_owned(&av, host_tool("env"));
  mu_strvec_push(&av, "-i");
  put_env(&av, im, rp);
  mu_strvec_push(&av, unshare);
  mu_strvec_pushf(&av, "--root=%s/.container/root", rp->dir);
  mu_strvec_pushf(&av, "--wd=%s", im->cwd ? im->cwd : "/");
  mu_strvec_push(&av, "--");
  for (size_t a = 0; a < rp->argv.n; a++)
    mu_strvec_push(&av, rp->argv.v[a]);
  mu_free(unshare);
  mu_buf_release(&s);
  mu_strvec_release(&rp->argv);
  rp->argv = av;
  return rc;
}

int mu_local_container_wrap(struct mu_local_plan *p, struct mu_buf *err)
{
  for (size_t i = 0; i < p->nreplicas; i++) {
    int rc = wrap_one(p, &p->replicas[i], err);
    if (rc != 0)
      return rc;
  }
  return 0;
}

void mu_local_container_text(const struct mu_local_plan *p, struct mu_buf *t)
{
  const struct mu_local_container *c = p->container;
  mu_buf_printf(t,
                "image cache: %s (skopeo pulls into oci/, umoci unpacks each digest once "
                "into rootfs/)\nagent: the portable bundle %s, read-only at /muster\n",
                c->cache, c->muster_dir);
  for (size_t i = 0; i < c->nimg; i++)
    mu_buf_printf(t, "image: %s%s\n", c->img[i].ref,
                  c->img[i].rootfs ? "" : " (pulled at submission)");
  mu_buf_printf(t, "each replica: private mount and PID namespaces, chrooted into a "
                   "throw-away overlay of its image; the host's network\n");
}

/* ---------------------------------------------------------------------------------------------
 * The scheduler: local's, with the images
 */

/* Says which accelerator steps a CPU box skips: a role that asks for Neuron devices on a
 * machine without /dev/neuron0, or for EFA adapters (never bound: the host's network). */
static void accel_note(const struct mu_app *app, struct mu_dryrun *out)
{
  struct mu_buf b = MU_BUF_INIT(SIZE_MAX);
  int have_neuron = access("/dev/neuron0", F_OK) == 0;
  for (size_t i = 0; i < app->nroles; i++) {
    const struct mu_role *r = &app->roles[i];
    long nd = role_devices(r, NEURON_DEVICE), efa = role_devices(r, EFA_DEVICE);
    if (nd > 0 && !have_neuron)
      mu_buf_printf(&b,
                    "%srole '%s' asks for %ld Neuron device(s) and this machine has none "
                    "(/dev/neuron*): the Neuron-only steps are skipped (no Neuron device in the "
                    "replicas; NEURON_RT_* and NEURON_CC_FLAGS have no effect; a "
                    "neuron_parallel_compile or torch-neuronx step fails): the workers run on "
                    "CPU",
                    b.len ? "\n" : "", r->name, nd);
    if (efa > 0)
      mu_buf_printf(&b,
                    "%srole '%s' asks for %ld EFA adapter(s): skipped, the replicas use the "
                    "host's network (FI_PROVIDER=efa has no adapter here)",
                    b.len ? "\n" : "", r->name, efa);
  }
  if (b.len > 0 && out->note != NULL) {
    char *both = mu_asprintf("%s\n%s", out->note, mu_buf_str(&b));
    mu_free(out->note);
    out->note = both;
  } else if (b.len > 0) {
    out->note = mu_strdup(mu_buf_str(&b));
  }
  mu_buf_release(&b);
}

static int container_dryrun(const struct mu_app *app, const struct mu_cfg *cfg,
                            struct mu_dryrun *out, struct mu_buf *err)
{
  struct mu_local_container *c = NULL;
  int rc = container_new(app, cfg, &c, err);
  rc = rc ? rc : mu_local_dryrun_with(app, cfg, c, out, err);
  if (rc == 0)
    accel_note(app, out);
  return rc;
}

static int container_schedule(struct mu_dryrun *req, struct mu_buf *err)
{
  struct mu_local_plan *p = req->priv;
  int rc = pull_all(p->container, err);
  /* the commands again, with the unpacked roots (the supervisor plans them once more with
   * the job's endpoint) */
  rc = rc ? rc : mu_local_plan_replicas(p, "127.0.0.1:<port>", err);
  char *mark = mu_local_path(p->root, p->app_id, NULL, -1, MU_LOCAL_CONTAINER_MARK);
  if (rc == 0 && (rc = mu_mkdir_p(p->app_dir)) == 0)
    rc = mu_write_file_atomic(mark, "", 0, 0644, 0);
  if (rc != 0 && err->len == 0)
    mu_buf_printf(err, "cannot write '%s': %s", mark, mu_strerror(rc));
  mu_free(mark);
  return rc ? rc : mu_sched_local.schedule(req, err);
}

static void container_dryrun_free(struct mu_dryrun *req)
{
  mu_sched_local.dryrun_free(req);
}

static int container_describe(const char *app_id, const struct mu_cfg *cfg,
                              struct mu_app_status *out, struct mu_buf *err)
{
  return mu_sched_local.describe(app_id, cfg, out, err);
}

static int container_list(const struct mu_cfg *cfg, struct mu_app_list_entry **out, size_t *n,
                          struct mu_buf *err)
{
  return mu_local_list(cfg, out, n, 1, err);
}

static int container_cancel(const char *app_id, const struct mu_cfg *cfg, struct mu_buf *err)
{
  return mu_sched_local.cancel_existing(app_id, cfg, err);
}

static int container_app_spec(const char *app_id, const struct mu_cfg *cfg, struct mu_app **out,
                              struct mu_buf *err)
{
  return mu_sched_local.app_spec(app_id, cfg, out, err);
}

static int container_prune(double before, struct mu_strvec *removed, struct mu_buf *err)
{
  return mu_sched_local.prune(before, removed, err);
}

static int container_log(const char *app_id, const char *role, long replica,
                         const struct mu_log_opts *o, int out, const struct mu_cfg *cfg,
                         struct mu_buf *err)
{
  return mu_sched_local.log_open(app_id, role, replica, o, out, cfg, err);
}

const struct mu_sched_ops mu_sched_local_container = {
    .name = "local_container",
    .help = "the local scheduler with each replica in its role's --image, no daemon: skopeo "
            "pulls, umoci unpacks, each replica in private mount and PID namespaces, chrooted",
    .caps = MU_SCHED_FOLLOW,
    .rdzv_macro = "127.0.0.1:PORT of the job's own musterd on the host's loopback (the "
                  "replicas share the host's network), as on -s local",
    .runopts = container_runopts,
    .dryrun = container_dryrun,
    .schedule = container_schedule,
    .describe = container_describe,
    .list = container_list,
    .cancel_existing = container_cancel,
    .log_open = container_log,
    .dryrun_free = container_dryrun_free,
    .app_spec = container_app_spec,
    .prune = container_prune,
};
