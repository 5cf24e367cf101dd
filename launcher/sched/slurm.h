/* The slurm scheduler's pure parts, exposed for the unit tests: the renderer (slurm_render.c:
 * job spec + cfg + what the cluster told us -> sbatch script) and the parsers (slurm_parse.c:
 * sinfo, squeue and sacct output). slurm.c defines `mu_sched_slurm` on top of these, running
 * the Slurm tools.
 */
#ifndef MU_SLURM_H
#define MU_SLURM_H

#include "buf.h"
#include "job.h"
#include "sched.h"
#include "strvec.h"

/* What rendering needs to know about the cluster. */
struct mu_slurm_env {
  int major, minor; /* Slurm version: --gpus-per-node from 24.11, else --gpus-per-task */
  int nomem;        /* the partition reports <= 1000 MB: leave --mem out (TorchX) */
  /* The programs the script calls unless -cfg muster= / musterd= say otherwise (slurm.c: the
   * absolute path of the running muster and of the musterd beside it; Slurm assumes a shared
   * file system). NULL: "muster" / "musterd" from PATH. A role whose entrypoint is "muster"
   * runs the muster program. */
  const char *muster_bin, *musterd_bin;
};

/* Renders the sbatch script into script and the sbatch options that go on its command line
 * (--comment, --mail-*, --chdir) into opts (without "sbatch --parsable" and the script).
 * Returns: 0, or MU_EINVAL with a message naming the runopt or field in err.
 * Ownership: appends to script and opts. */
int mu_slurm_render(const struct mu_app *app, const struct mu_cfg *cfg,
                    const struct mu_slurm_env *env, struct mu_buf *script, struct mu_strvec *opts,
                    struct mu_buf *err);

/* "slurm 24.05.4" / "slurm-wlm 22.05.8" -> 24, 5. Returns: 0 or MU_EPARSE. */
int mu_slurm_parse_version(const char *sinfo_out, int *major, int *minor);

/* `sinfo --format %P,%m --noconvert` output: 1 when partition (NULL = the '*' default) has
 * at most 1000 MB, else 0. */
int mu_slurm_parse_nomem(const char *sinfo_out, const char *partition);

/* Slurm job state ("CANCELLED by 2166" counts as CANCELLED) -> app state (TorchX case 10). */
enum mu_job_state mu_slurm_state(const char *s);

/* `sacct --parsable2 -j ID` output (header line first) into out. Step rows (ID.batch, ID.0,
 * ID+N.0) are skipped; het components ID+N are replicas; msg is the raw State of the first.
 * Returns: 0, MU_ENOENT when no job row is present, MU_EPARSE on a malformed header.
 * Ownership: out's fields are the caller's (mu_app_status_release). */
int mu_slurm_parse_sacct(const char *text, const char *app_id, struct mu_app_status *out,
                         struct mu_buf *err);

/* `squeue --noheader --format=%i|%j|%T|%N` output, same contract as mu_slurm_parse_sacct. */
int mu_slurm_parse_squeue(const char *text, const char *app_id, struct mu_app_status *out,
                          struct mu_buf *err);

/* `squeue --json` output (the TorchX fixture format; 22.05 ignores -j so jobs are filtered by
 * app_id here). Same contract as mu_slurm_parse_sacct. */
int mu_slurm_parse_squeue_json(const char *json, const char *app_id, struct mu_app_status *out,
                               struct mu_buf *err);

/* `squeue --noheader --format=%i|%j|%T` output into list entries: one per job (het components
 * after the first, ID+N with N > 0, are left out). Ownership: *out is the caller's
 * (mu_app_list_free). */
void mu_slurm_parse_list(const char *text, struct mu_app_list_entry **out, size_t *n);

/* The line of a batch script that carries the app as submitted (its JSON, job.h, on one line):
 * slurm.c appends it to every script it submits; `muster describe` reads it back from the
 * cluster with `scontrol write batch_script ID -`. */
#define MU_SLURM_APP_LINE "# muster-app: "

/* The app in a batch script's MU_SLURM_APP_LINE, with ${app_id} replaced by app_id.
 * Returns: 0; MU_ENOENT when the script has no such line (not muster's, or an older muster's),
 * MU_EPARSE, with the reason in err. Ownership: *out is the caller's (mu_app_free). */
int mu_slurm_parse_app(const char *script, const char *app_id, struct mu_app **out,
                       struct mu_buf *err);

#endif
