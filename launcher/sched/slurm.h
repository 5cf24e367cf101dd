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
  /* The rendezvous token (docs/security.md): the file the job's musterd requires its token from
   * and every agent reads (MUSTER_RDZV_TOKEN_FILE), or NULL when the rendezvous is open. spool:
   * the job's spool directory that holds it when muster run made it, which the script removes
   * when the job is done (not when it requeues itself), else NULL. */
  const char *token_file, *spool;
  /* -cfg rdzv_tls (struct mu_rdzv_auth): the job's musterd serves HTTPS with tls_dir's files,
   * the agents check it with its ca.pem (and present its client.pem when tls_clients); NULL:
   * plain HTTP. */
  const char *tls_dir;
  int tls_clients;
};

/* Renders the sbatch script into script and the sbatch options that go on its command line
 * (--comment, --mail-*, --chdir) into opts (without "sbatch --parsable" and the script). The
 * app is validated first (mu_app_validate), so the renderer is safe on its own.
 * Returns: 0, or MU_EINVAL with a message naming the runopt or field in err.
 * Ownership: appends to script and opts. */
int mu_slurm_render(const struct mu_app *app, const struct mu_cfg *cfg,
                    const struct mu_slurm_env *env, struct mu_buf *script, struct mu_strvec *opts,
                    struct mu_buf *err);

/* Quoting, one function per syntax the script holds besides a shell word (mu_shell_quote):
 *
 * mu_slurm_quote_directive() appends v as the value of an option on an #SBATCH line, as
 * sbatch reads it: as it is when it is made of [A-Za-z0-9@%+=:,./_-], else in double quotes
 * with '"' and '\' backslashed (an unquoted space ends the option, an unquoted '#' the line).
 * Returns: 0; MU_EINVAL for a control character (a directive is one line); MU_E2BIG.
 *
 * mu_slurm_quote_export() appends NAME=VALUE as one item of srun's --export list (after
 * "ALL,"), as srun's parser reads it: as it is, else in double or single quotes, whichever
 * it reads back exactly (the list splits at ',' outside quotes; ' and " toggle quoting
 * wherever they stand, with no escape). The item is shell-quoted after that, as any word.
 * Returns: 0; MU_EINVAL when no form reads back exactly (an odd number of ' or "); MU_E2BIG. */
int mu_slurm_quote_directive(const char *v, struct mu_buf *out);
int mu_slurm_quote_export(const char *name, const char *value, struct mu_buf *out);

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
