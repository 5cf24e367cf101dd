/* Workspaces (TorchX's): `muster run --workspace DIR -cfg image_repo=REPO` layers DIR's files
 * on each role's image with buildah, pushes the result to REPO and points the role at it by
 * digest (REPO@sha256:...), so every node runs exactly the files the user had. DIR's
 * .dockerignore (or .containerignore) excludes files, with Docker's syntax. buildah reads its
 * storage and registry settings from the usual places (containers-storage.conf,
 * containers-registries.conf; CONTAINERS_STORAGE_CONF, CONTAINERS_REGISTRIES_CONF).
 */
#ifndef MU_WORKSPACE_H
#define MU_WORKSPACE_H

#include "buf.h"
#include "job.h"

/* Builds and pushes one image per distinct role image and rewrites those roles' image. spec is
 * DIR or TorchX's file://DIR; "" is no workspace (nothing happens, as TorchX's --workspace "").
 * Returns: 0; MU_EINVAL (DIR is not a directory, another scheme, a role has no image, REPO is
 * empty), MU_ENOENT (buildah is not installed), MU_EIO (a build or the push failed: err names
 * the registry and quotes buildah). Ownership: changes app's role images; appends to err. */
int mu_workspace_build(struct mu_app *app, const char *spec, const char *repo, struct mu_buf *err);

/* --dryrun's mu_workspace_build: the same checks, nothing pulled, built or pushed; each role's
 * image becomes REPO@sha256:<built at submission> and `note` gets one line per image saying
 * what muster run would build. Returns: 0 or MU_EINVAL as mu_workspace_build.
 * Ownership: appends to note and err. */
int mu_workspace_plan(struct mu_app *app, const char *spec, const char *repo, struct mu_buf *note,
                      struct mu_buf *err);

#endif
