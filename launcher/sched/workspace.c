/* Workspaces: DIR layered on each role's image with buildah and pushed (workspace.h). */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "muster/errno.h"

#include "alloc.h"
#include "sched_exec.h"
#include "strvec.h"
#include "workspace.h"

#define WS_OUT_MAX (64 * 1024)

static const struct mu_exec_hint ws_hints[] = {
    {{"connection refused", "no such host", "dial tcp", "i/o timeout", NULL},
     "the registry of -cfg image_repo cannot be reached: check the address, and that it runs"},
    {{"unauthorized", "authentication required", "denied", NULL},
     "the registry refused the push: log in first (buildah login REGISTRY)"},
    {{"StatusCode: 405", "StatusCode: 403", "Method not allowed", "forbidden", NULL},
     "the registry refused the push (read-only, or this repository is not writable for you): "
     "pick an -cfg image_repo you may push to"},
    {{"http: server gave HTTP response to HTTPS client", NULL},
     "a plain-HTTP registry: mark it insecure in registries.conf ([[registry]] location=... "
     "insecure=true)"},
    {{NULL}, NULL},
};

/* Pulling the role's image (buildah from): a failure is the base image's, not image_repo's. */
static const struct mu_exec_hint from_hints[] = {
    {{"connection refused", "no such host", "dial tcp", "i/o timeout", NULL},
     "the registry of the role's image (--image, the base the workspace is layered on) cannot "
     "be reached: check the image's name and that its registry runs"},
    {{"unauthorized", "authentication required", "denied", "manifest unknown", NULL},
     "the role's image (--image) cannot be pulled: check its name and tag, or log in to its "
     "registry (buildah login REGISTRY)"},
    {{"http: server gave HTTP response to HTTPS client", NULL},
     "the role's image is on a plain-HTTP registry: mark it insecure in registries.conf "
     "([[registry]] location=... insecure=true)"},
    {{NULL}, NULL},
};

static int buildah_with(struct mu_strvec *av, const char *what, const struct mu_exec_hint *hints,
                        struct mu_buf *out, struct mu_buf *err)
{
  int rc = mu_exec_tool(av->v, NULL, what,
                        "buildah is not installed: --workspace builds images with it (apt-get "
                        "install buildah)",
                        hints, out, err);
  mu_strvec_release(av);
  return rc;
}

static int buildah(struct mu_strvec *av, const char *what, struct mu_buf *out, struct mu_buf *err)
{
  return buildah_with(av, what, ws_hints, out, err);
}

/* DIR into working container ctr, without what DIR's .dockerignore (or .containerignore)
 * excludes. Returns: 0, or the tool's error in err. */
static int copy_dir(const char *ctr, const char *dir, struct mu_buf *err)
{
  struct mu_strvec av = MU_STRVEC_INIT;
  char *ignore = NULL;
  mu_strvec_push(&av, "buildah");
  mu_strvec_push(&av, "copy");
  mu_strvec_push(&av, "--quiet");
  mu_strvec_pushf(&av, "--contextdir=%s", dir);
  for (int i = 0; i < 2 && ignore == NULL; i++) {
    char *p = mu_asprintf("%s/%s", dir, i == 0 ? ".dockerignore" : ".containerignore");
    if (access(p, R_OK) == 0)
      ignore = p;
    else
      mu_free(p);
  }
  if (ignore)
    mu_strvec_pushf(&av, "--ignorefile=%s", ignore);
  mu_strvec_push(&av, ctr);
  mu_strvec_push(&av, dir);
  int rc = buildah(&av, "buildah copy (the workspace)", NULL, err);
  mu_free(ignore);
  return rc;
}

/* Pushes image tag to its repository. Returns: 0 with *ref = REPO@sha256:..., or an error in
 * err. */
static int push(const char *tag, const char *repo, char **ref, struct mu_buf *err)
{
  struct mu_strvec av = MU_STRVEC_INIT;
  char dig[160] = "";
  char *digest_file = mu_asprintf("/tmp/muster-ws-digest.%ld", (long)getpid());
  mu_strvec_push(&av, "buildah");
  mu_strvec_push(&av, "push");
  mu_strvec_push(&av, "--quiet");
  mu_strvec_push(&av, "--retry=0");
  mu_strvec_push(&av, "--retry-delay=1ms"); /* buildah 1.28 retries 3 times anyway */
  mu_strvec_pushf(&av, "--digestfile=%s", digest_file);
  mu_strvec_push(&av, tag);
  mu_strvec_pushf(&av, "docker://%s", tag);
  int rc = buildah(&av, "buildah push (to -cfg image_repo)", NULL, err);
  FILE *fp = rc == 0 ? fopen(digest_file, "r") : NULL;
  if (rc == 0 &&
      (fp == NULL || fgets(dig, sizeof dig, fp) == NULL || strncmp(dig, "sha256:", 7) != 0)) {
    mu_buf_printf(err, "buildah push did not report the digest of %s", tag);
    rc = MU_EIO;
  }
  if (fp)
    fclose(fp);
  if (rc == 0)
    *ref = mu_asprintf("%s@%s", repo, mu_exec_chomp(dig));
  unlink(digest_file);
  mu_free(digest_file);
  return rc;
}

/* One image: FROM base, DIR copied into the working directory, committed, pushed by digest.
 * Returns: as mu_workspace_build; *ref = REPO@sha256:... */
static int build_one(const char *base, const char *dir, const char *repo, char **ref,
                     struct mu_buf *err)
{
  struct mu_strvec av = MU_STRVEC_INIT;
  struct mu_buf out = MU_BUF_INIT(WS_OUT_MAX);
  char *ctr = NULL, *tag = NULL;
  int rc;

  mu_strvec_push(&av, "buildah");
  mu_strvec_push(&av, "from");
  mu_strvec_push(&av, "--quiet");
  mu_strvec_push(&av, base);
  char *what = mu_asprintf("buildah from %s (pulling the role's image)", base);
  rc = buildah_with(&av, what, from_hints, &out, err);
  mu_free(what);
  if (rc != 0 && rc != MU_ENOENT)
    mu_buf_printf(err,
                  "\nthe base image is %s (the role's --image); -cfg image_repo is only where "
                  "the workspace image is pushed",
                  base);
  if (rc != 0)
    goto out;
  ctr = mu_strdup(mu_exec_chomp((char *)mu_buf_str(&out)));
  rc = copy_dir(ctr, dir, err);
  if (rc != 0)
    goto out;
  tag = mu_asprintf("%s:ws-%lx%lx", repo, (long)time(NULL), (long)getpid());
  mu_strvec_push(&av, "buildah");
  mu_strvec_push(&av, "commit");
  mu_strvec_push(&av, "--quiet");
  mu_strvec_push(&av, "--rm");
  mu_strvec_push(&av, ctr);
  mu_strvec_push(&av, tag);
  mu_buf_clear(&out);
  rc = buildah(&av, "buildah commit", &out, err);
  if (rc != 0)
    goto out;
  mu_free(ctr);
  ctr = NULL;
  rc = push(tag, repo, ref, err);
out:
  if (ctr) { /* a failed build leaves no working container behind */
    struct mu_buf ignore_err = MU_BUF_INIT(4096);
    mu_strvec_push(&av, "buildah");
    mu_strvec_push(&av, "rm");
    mu_strvec_push(&av, ctr);
    buildah(&av, "buildah rm", NULL, &ignore_err);
    mu_buf_release(&ignore_err);
  }
  mu_free(ctr);
  mu_free(tag);
  mu_buf_release(&out);
  mu_strvec_release(&av);
  return rc;
}

/* The directory of a workspace spec: DIR, or TorchX's file://DIR (the trn1 tutorial's
 * --workspace="file:///$PWD/docker"); another scheme is refused. NULL for "" (no workspace). */
static const char *workspace_dir(const char *spec, struct mu_buf *err, int *bad)
{
  const char *scheme = strstr(spec, "://");
  *bad = 0;
  if (strncmp(spec, "file://", 7) == 0)
    return spec + 7;
  if (scheme != NULL && strchr(spec, '/') > scheme) {
    mu_buf_printf(err,
                  "--workspace '%s': only a directory on this machine works (DIR or "
                  "file://DIR), not a %.*s:// workspace",
                  spec, (int)(scheme - spec), spec);
    *bad = 1;
    return NULL;
  }
  return spec[0] != '\0' ? spec : NULL;
}

/* --dryrun: what one role's workspace image would be, built by nothing. */
static void plan_one(const char *base, const char *dir, const char *repo, char **ref,
                     struct mu_buf *note)
{
  mu_buf_printf(note,
                "%s--workspace with --dryrun builds nothing: muster run would layer %s on %s "
                "with buildah and push it to %s (the role's image becomes %s@sha256:...)",
                note->len ? "\n" : "", dir, base, repo, repo);
  *ref = mu_asprintf("%s@sha256:<built at submission>", repo);
}

/* Both: with note != NULL nothing is built and note says what would be. */
static int workspace_apply(struct mu_app *app, const char *spec, const char *repo,
                           struct mu_buf *note, struct mu_buf *err)
{
  struct stat st;
  int bad;
  const char *dir = workspace_dir(spec, err, &bad);
  if (bad)
    return MU_EINVAL;
  if (dir == NULL)
    return 0; /* --workspace "": none, as TorchX */
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
    mu_buf_printf(err, "--workspace '%s': %s is not a directory", spec, dir);
    return MU_EINVAL;
  }
  if (repo == NULL || *repo == '\0') {
    mu_buf_puts(err, "--workspace needs -cfg image_repo=REGISTRY/REPO: where the workspace image "
                     "is pushed for the nodes to pull");
    return MU_EINVAL;
  }
  struct mu_strvec bases = MU_STRVEC_INIT, refs = MU_STRVEC_INIT;
  int rc = 0;
  for (size_t i = 0; i < app->nroles && rc == 0; i++) {
    struct mu_role *r = &app->roles[i];
    char *ref = NULL;
    if (r->image == NULL || *r->image == '\0') {
      mu_buf_printf(err,
                    "roles[%zu].image: --workspace layers the files on the role's image; "
                    "give one with --image",
                    i);
      rc = MU_EINVAL;
      break;
    }
    /* Roles that share an image share the workspace image. */
    for (size_t j = 0; j < bases.n && ref == NULL; j++)
      if (strcmp(bases.v[j], r->image) == 0)
        ref = mu_strdup(refs.v[j]);
    if (ref == NULL) {
      if (note != NULL)
        plan_one(r->image, dir, repo, &ref, note);
      else
        rc = build_one(r->image, dir, repo, &ref, err);
      if (rc != 0)
        break;
      mu_strvec_push(&bases, r->image);
      mu_strvec_push(&refs, ref);
    }
    mu_free(r->image);
    r->image = ref;
  }
  mu_strvec_release(&bases);
  mu_strvec_release(&refs);
  return rc;
}

int mu_workspace_build(struct mu_app *app, const char *spec, const char *repo, struct mu_buf *err)
{
  return workspace_apply(app, spec, repo, NULL, err);
}

int mu_workspace_plan(struct mu_app *app, const char *spec, const char *repo, struct mu_buf *note,
                      struct mu_buf *err)
{
  return workspace_apply(app, spec, repo, note, err);
}
