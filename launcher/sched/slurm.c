/* The slurm scheduler: the sbatch script of slurm_render.c submitted with `sbatch --parsable`,
 * watched with squeue (sacct once squeue forgot the job), stopped with scancel, its logs read
 * from the job directory; every tool runs through sched_exec.c, its errors turned into advice.
 * `log` without a stream prints stdout then stderr (a divergence from TorchX, docs/slurm.md).
 */
#include <stdint.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "muster/errno.h"
#include "muster/mu.h"

#include "alloc.h"
#include "fsutil.h"
#include "random.h"
#include "sched_exec.h"
#include "slurm.h"

#define SLURM_OUT_MAX (8u << 20) /* what squeue or sacct may print: read from a process, capped */
#define SLURM_JOBDIRS ".musterslurmjobdirs"
#define SLURM_SCRIPT "muster-sbatch.sh"
#define SLURM_SPOOL_PREFIX ".muster-spool-" /* the job's spool: its rendezvous token */

static const struct mu_runopt slurm_runopts[] = {
    {"partition", MU_RUNOPT_STR, NULL, 0, "partition of every het group (#SBATCH --partition)"},
    {"time", MU_RUNOPT_STR, NULL, 0, "time limit, e.g. 1:00:00 (#SBATCH --time)"},
    {"account", MU_RUNOPT_STR, NULL, 0, "account to charge (#SBATCH --account)"},
    {"constraint", MU_RUNOPT_STR, NULL, 0, "node features (#SBATCH --constraint)"},
    {"qos", MU_RUNOPT_STR, NULL, 0, "quality of service (#SBATCH --qos)"},
    {"comment", MU_RUNOPT_STR, NULL, 0, "job comment (sbatch --comment)"},
    {"mail-user", MU_RUNOPT_STR, NULL, 0, "where Slurm mails job events (sbatch --mail-user)"},
    {"mail-type", MU_RUNOPT_STR, NULL, 0, "which events, e.g. END,FAIL (sbatch --mail-type)"},
    {"job_dir", MU_RUNOPT_STR, NULL, 0,
     "directory the job runs in (must not exist; created); logs go there and it is recorded "
     "in ./" SLURM_JOBDIRS},
    {"slurm_version", MU_RUNOPT_STR, NULL, 0,
     "Slurm version for the GPU flag (default: from sinfo --version, else 24.05)"},
    {"rdzv", MU_RUNOPT_STR, "auto", 0,
     "rendezvous for ${rdzv_endpoint}: auto (the script starts its own musterd when a role "
     "uses it), job (always), or HOST:PORT of an existing musterd or etcd"},
    {"rdzv_host", MU_RUNOPT_STR, NULL, 0,
     "address the nodes reach the job's musterd at (default: the batch host's hostname)"},
    {"rdzv_port", MU_RUNOPT_INT, NULL, 0,
     "port of the job's musterd (default: 29400 + job id modulo 2000)"},
    {"rdzv_auth", MU_RUNOPT_STR, "auto", 0,
     "who may use the job's musterd: auto (only the job, by a token muster run makes in a 0600 "
     "file in the job's spool; anyone who reaches its port when torchrun's etcd backend, which "
     "sends none, must use it), token (always the token), none (anyone)"},
    {"rdzv_tls", MU_RUNOPT_STR, NULL, 0,
     "a directory (shared file system) with server.pem, server.key (naming rdzv_host) and "
     "ca.pem: the job's musterd serves HTTPS, the agents check it with ca.pem; client.pem and "
     "client.key as well: client certificates required"},
    {"rdzv_token_file", MU_RUNOPT_STR, NULL, 0,
     "a file whose first line is the token: of the musterd of rdzv=HOST:PORT, or the job's "
     "own instead of a new one (the nodes must see it: a shared file system)"},
    {"musterd", MU_RUNOPT_STR, NULL, 0,
     "musterd program on the batch host (default: the musterd beside this muster, by its "
     "absolute path, else musterd from PATH)"},
    {"muster", MU_RUNOPT_STR, NULL, 0,
     "muster program the nodes run for `muster agent` (default: this muster's absolute path; "
     "Slurm's nodes share the file system)"},
    {"user", MU_RUNOPT_STR, NULL, 0,
     "muster list: whose jobs (squeue --user; ALL for every user; default: yours); "
     "partition= narrows the list to a partition"},
    MU_RUNOPT_HEALTH_CHECK,
    {NULL, 0, NULL, 0, NULL},
};

/* ---------------------------------------------------------------------------------------------
 * Running the Slurm tools
 */

struct slurm_priv {
  char *script;
  char *muster_bin, *musterd_bin; /* what the script calls (struct mu_slurm_env) */
  struct mu_strvec opts;          /* --chdir, --comment, ... */
  char *job_dir;
  char *app_name;   /* the app's name, recorded for `muster list` */
  char *token_file; /* the rendezvous token's file (struct mu_slurm_env), or NULL */
  char *spool;      /* the job's spool that schedule makes, with the token in it, or NULL */
  char *tls_dir;    /* -cfg rdzv_tls (struct mu_slurm_env), or NULL */
  int tls_clients;
};

/* What a Slurm tool's stderr means, in the order it is checked (see mu_exec_tool). */
static const struct mu_exec_hint slurm_hints[] = {
    {{"invalid partition", "Invalid partition"},
     "`sinfo` lists the partitions; pick one with -cfg partition=NAME"},
    {{"Invalid job id", "Invalid job ID"}, NULL},
    {{"Unable to contact slurm controller", "configuration"},
     "the Slurm controller is not reachable; check SLURM_CONF and that slurmctld runs"},
    {{NULL}, NULL},
};

/* Runs a Slurm command; on failure writes Slurm's own message plus what to do into err. */
static int slurm_run(struct mu_strvec *av, struct mu_buf *out, struct mu_buf *err)
{
  char *missing = mu_asprintf("%s not found: install the Slurm client tools (Debian: "
                              "slurm-client) or run on a Slurm login node",
                              av->v[0]);
  int rc = mu_exec_tool(av->v, NULL, av->v[0], missing, slurm_hints, out, err);
  mu_free(missing);
  return rc;
}

static void cluster_env(const struct mu_app *app, const struct mu_cfg *cfg,
                        struct mu_slurm_env *env)
{
  const char *ver = mu_cfg_get(cfg, "slurm_version");
  int need_gpu = 0, need_mem = 0;
  size_t i;

  env->major = 24;
  env->minor = 5;
  env->nomem = 0;
  for (i = 0; i < app->nroles; i++) {
    need_gpu |= app->roles[i].resource.gpu > 0;
    need_mem |= app->roles[i].resource.memMB > 0;
  }
  if (ver) {
    char *s = mu_asprintf("slurm %s", ver);
    mu_slurm_parse_version(s, &env->major, &env->minor);
    mu_free(s);
  } else if (need_gpu) {
    struct mu_strvec av = MU_STRVEC_INIT;
    struct mu_buf out = MU_BUF_INIT(4096);
    int status;
    mu_strvec_push(&av, "sinfo");
    mu_strvec_push(&av, "--version");
    if (mu_exec_capture(av.v, NULL, &out, NULL, &status) == 0 && status == 0)
      mu_slurm_parse_version(mu_buf_str(&out), &env->major, &env->minor);
    mu_buf_release(&out);
    mu_strvec_release(&av);
  }
  if (need_mem) {
    struct mu_strvec av = MU_STRVEC_INIT;
    struct mu_buf out = MU_BUF_INIT(1 << 20);
    int status;
    mu_strvec_push(&av, "sinfo");
    mu_strvec_push(&av, "--format");
    mu_strvec_push(&av, "%P,%m");
    mu_strvec_push(&av, "--noconvert");
    if (mu_exec_capture(av.v, NULL, &out, NULL, &status) == 0 && status == 0)
      env->nomem = mu_slurm_parse_nomem(mu_buf_str(&out), mu_cfg_get(cfg, "partition"));
    mu_buf_release(&out);
    mu_strvec_release(&av);
  }
}

/* The job's spool, named now and made by schedule: a directory of its own (0700) in the job's
 * directory (job_dir, else the submit directory), which the nodes see as the script does. */
static char *spool_path(const struct mu_cfg *cfg)
{
  const char *jd = mu_cfg_get(cfg, "job_dir");
  char cwd[PATH_MAX], rnd[2 * 6 + 1];
  if (getcwd(cwd, sizeof(cwd)) == NULL || mu_random_hex(rnd, 6) != 0)
    return NULL;
  if (jd == NULL)
    return mu_asprintf("%s/" SLURM_SPOOL_PREFIX "%s", cwd, rnd);
  if (jd[0] == '/')
    return mu_asprintf("%s/" SLURM_SPOOL_PREFIX "%s", jd, rnd);
  return mu_asprintf("%s/%s/" SLURM_SPOOL_PREFIX "%s", cwd, jd, rnd);
}

/* Who may use the job's rendezvous (mu_cfg_rdzv_auth): p->token_file and p->spool, and the
 * note when its musterd runs open. Returns: 0, or MU_EINVAL. */
static int plan_token(const struct mu_app *app, const struct mu_cfg *cfg, struct slurm_priv *p,
                      struct mu_dryrun *out, struct mu_buf *err)
{
  struct mu_rdzv_choice rz;
  struct mu_rdzv_auth auth;
  if (mu_cfg_rdzv(cfg, app, &rz, err) != 0)
    return MU_EINVAL;
  int rc = mu_cfg_rdzv_auth(cfg, app, &rz, &auth, err);
  mu_free(rz.endpoint);
  if (rc != 0)
    return rc;
  p->token_file = auth.token_file;
  p->tls_dir = auth.tls_dir;
  p->tls_clients = auth.tls_clients;
  if (rz.own && !auth.open && p->token_file == NULL) {
    p->spool = spool_path(cfg);
    if (p->spool == NULL) {
      mu_buf_puts(err, "cannot name the job's spool (no working directory, or no randomness)");
      return MU_EIO;
    }
    p->token_file = mu_asprintf("%s/rdzv.token", p->spool);
  }
  if (auth.why_open != NULL)
    out->note =
        mu_asprintf("the job's musterd is open to anyone who reaches its port: %s", auth.why_open);
  mu_free(auth.why_open);
  return 0;
}

/* The app's JSON (job.h) on one line. Ownership: appends to out. */
static void app_json_line(const struct mu_app *app, struct mu_buf *out)
{
  struct mu_buf js = MU_BUF_INIT(SIZE_MAX);
  mu_app_to_json(app, &js);
  cJSON *tree = cJSON_Parse(mu_buf_str(&js));
  char *line = cJSON_PrintUnformatted(tree);
  mu_buf_puts(out, line ? line : "{}");
  cJSON_free(line);
  cJSON_Delete(tree);
  mu_buf_release(&js);
}

static int slurm_dryrun(const struct mu_app *app, const struct mu_cfg *cfg, struct mu_dryrun *out,
                        struct mu_buf *err)
{
  struct mu_buf script = MU_BUF_INIT(SIZE_MAX);
  struct mu_slurm_env env;
  struct slurm_priv *p = mu_calloc(1, sizeof *p);
  const char *jd = mu_cfg_get(cfg, "job_dir");
  int rc;

  cluster_env(app, cfg, &env);
  /* The programs by absolute path: the nodes need not have this build on their PATH. */
  p->muster_bin = mu_cfg_get(cfg, "muster") ? mu_strdup(mu_cfg_get(cfg, "muster")) : mu_self_exe();
  p->musterd_bin = mu_cfg_get(cfg, "musterd") ? mu_strdup(mu_cfg_get(cfg, "musterd"))
                                              : mu_sibling_exe("musterd");
  env.muster_bin = p->muster_bin;
  env.musterd_bin = p->musterd_bin;
  out->priv = p;
  out->sched = &mu_sched_slurm; /* from here mu_dryrun_release() frees p */
  rc = plan_token(app, cfg, p, out, err);
  env.token_file = p->token_file;
  env.spool = p->spool;
  env.tls_dir = p->tls_dir;
  env.tls_clients = p->tls_clients;
  rc = rc ? rc : mu_slurm_render(app, cfg, &env, &script, &p->opts, err);
  if (rc != 0) {
    mu_buf_release(&script);
    return rc;
  }
  /* The app as submitted, on one comment line, for `muster describe` (scontrol gives the
   * script back); JSON escapes every control character, so it stays one line. */
  mu_buf_puts(&script, "\n# The job spec as submitted ('muster describe' reads it back):\n");
  mu_buf_puts(&script, MU_SLURM_APP_LINE);
  app_json_line(app, &script);
  mu_buf_putc(&script, '\n');
  p->script = mu_strdup(mu_buf_str(&script));
  p->job_dir = jd ? mu_strdup(jd) : NULL;
  p->app_name = app->name ? mu_strdup(app->name) : NULL;
  out->text = mu_buf_detach(&script);
  out->app_id = mu_strdup("<assigned by sbatch>");
  return 0;
}

static void slurm_dryrun_free(struct mu_dryrun *req)
{
  struct slurm_priv *p = req ? req->priv : NULL;
  if (p == NULL)
    return;
  mu_free(p->script);
  mu_free(p->muster_bin);
  mu_free(p->musterd_bin);
  mu_strvec_release(&p->opts);
  mu_free(p->job_dir);
  mu_free(p->token_file);
  mu_free(p->spool);
  mu_free(p->tls_dir);
  mu_free(p->app_name);
  mu_free(p);
  req->priv = NULL;
}

/* Removes a job's spool: its token file, then the directory (nothing else is ever in it). */
static void spool_remove(const char *spool)
{
  char *tok = mu_asprintf("%s/rdzv.token", spool);
  unlink(tok);
  rmdir(spool);
  mu_free(tok);
}

/* The directory the script is written to (job_dir, made now, else a temporary one), and the
 * job's spool with its token (0700, 0600). Returns: 0, or an error with err set. */
static int make_dirs(const struct slurm_priv *p, char **dir, struct mu_buf *err)
{
  char tmpl[] = "/tmp/muster-sbatch-XXXXXX";
  if (p->job_dir && mkdir(p->job_dir, 0777) != 0) {
    mu_buf_printf(err, "-cfg job_dir: cannot create '%s': %s (it must not exist yet)", p->job_dir,
                  strerror(errno));
    return MU_EINVAL;
  }
  if (!p->job_dir && mkdtemp(tmpl) == NULL) {
    mu_buf_printf(err, "cannot create a temporary directory: %s", strerror(errno));
    return MU_EIO;
  }
  *dir = mu_strdup(p->job_dir ? p->job_dir : tmpl);
  if (p->spool == NULL)
    return 0;
  int rc = mkdir(p->spool, 0700) == 0 ? mu_random_token_file(p->token_file) : -errno;
  if (rc != 0) {
    mu_buf_printf(err, "cannot make the job's rendezvous token in '%s': %s", p->spool,
                  mu_strerror(rc));
    spool_remove(p->spool);
  }
  return rc;
}

/* Notes in ./.musterslurmjobdirs where job `id` lives: "ID = DIR" for a job_dir (logs), "ID
 * spool = DIR" for its spool (cancel removes it), "ID name = APP" for its app's name (muster
 * list: Slurm's job name is the first replica's, ROLE-0). */
static void record(const struct slurm_priv *p, const char *id)
{
  FILE *fp = p->job_dir || p->spool || p->app_name ? fopen(SLURM_JOBDIRS, "a") : NULL;
  if (fp == NULL)
    return;
  if (p->job_dir) {
    char *abs = realpath(p->job_dir, NULL);
    fprintf(fp, "%s = %s\n", id, abs ? abs : p->job_dir);
    free(abs); /* realpath's buffer comes from libc */
  }
  if (p->spool)
    fprintf(fp, "%s spool = %s\n", id, p->spool);
  if (p->app_name && p->app_name[0] && strpbrk(p->app_name, "\r\n") == NULL)
    fprintf(fp, "%s name = %s\n", id, p->app_name);
  fclose(fp);
}

static int slurm_schedule(struct mu_dryrun *req, struct mu_buf *err)
{
  struct slurm_priv *p = req->priv;
  struct mu_strvec av = MU_STRVEC_INIT;
  struct mu_buf out = MU_BUF_INIT(4096);
  char *dir = NULL, *path = NULL, *id;
  int rc = make_dirs(p, &dir, err);
  if (rc != 0)
    goto out;
  path = mu_asprintf("%s/%s", dir, SLURM_SCRIPT);
  rc = mu_write_file_atomic(path, p->script, strlen(p->script), 0644, 0);
  if (rc != 0) {
    mu_buf_printf(err, "cannot write '%s': %s", path, mu_strerror(rc));
    goto out;
  }
  mu_strvec_push(&av, "sbatch");
  mu_strvec_push(&av, "--parsable");
  for (size_t i = 0; i < p->opts.n; i++)
    mu_strvec_push(&av, p->opts.v[i]);
  mu_strvec_push(&av, path);
  rc = slurm_run(&av, &out, err);
  if (rc != 0)
    goto out;
  id = mu_exec_chomp(out.data ? out.data : (char *)"");
  id[strcspn(id, ";")] = '\0'; /* "123;cluster" on federations */
  if (*id == '\0') {
    mu_buf_puts(err, "sbatch printed no job id");
    rc = MU_EPROTO;
    goto out;
  }
  mu_free(req->app_id);
  req->app_id = mu_strdup(id);
  record(p, id);
out:
  if (rc != 0 && dir != NULL && p->spool != NULL)
    spool_remove(p->spool); /* no job will read it */
  if (path && !p->job_dir)
    unlink(path);
  if (dir && !p->job_dir)
    rmdir(dir);
  mu_free(path);
  mu_free(dir);
  mu_strvec_release(&av);
  mu_buf_release(&out);
  return rc;
}

static char *job_dir_of(const char *app_id);

/* The failure records the agents printed in the last lines of each replica's stderr file
 * (failrec.h), for the root cause and the restart count. */
static void add_failures(const char *app_id, struct mu_app_status *st)
{
  char *dir = job_dir_of(app_id);
  for (size_t i = 0; i < st->nreplicas; i++) {
    const struct mu_replica_status *r = &st->replicas[i];
    if (r->role == NULL || r->state == MU_STATE_PENDING)
      continue;
    char *path = mu_asprintf("%s/slurm-%s-%s-%ld.err", dir, app_id, r->role, r->replica_id);
    struct mu_buf tail = MU_BUF_INIT(SIZE_MAX);
    if (mu_read_file_tail(path, 64 * 1024, &tail) == 0)
      mu_app_status_scan_failure(st, i, tail.data ? tail.data : "", tail.len);
    mu_buf_release(&tail);
    mu_free(path);
  }
  mu_free(dir);
}

static void failure_note(const char *app_id, struct mu_app_status *out);

static int slurm_describe(const char *app_id, const struct mu_cfg *cfg, struct mu_app_status *out,
                          struct mu_buf *err)
{
  struct mu_strvec av = MU_STRVEC_INIT;
  struct mu_buf o = MU_BUF_INIT(SLURM_OUT_MAX), e1 = MU_BUF_INIT(4096);
  int rc;

  (void)cfg;
  memset(out, 0, sizeof *out);
  mu_strvec_push(&av, "squeue");
  mu_strvec_push(&av, "--noheader");
  mu_strvec_pushf(&av, "--jobs=%s", app_id);
  mu_strvec_push(&av, "--states=all");
  mu_strvec_push(&av, "--format=%i|%j|%T|%N");
  rc = slurm_run(&av, &o, &e1);
  if (rc == 0)
    rc = mu_slurm_parse_squeue(mu_buf_str(&o), app_id, out, err);
  if (rc == MU_ENOENT && strstr(mu_buf_str(&e1), "not found")) {
    mu_buf_puts(err, mu_buf_str(&e1));
    goto out;
  }
  if (rc != 0) {
    /* Gone from squeue (purged after MinJobAge): ask accounting. */
    mu_app_status_release(out);
    memset(out, 0, sizeof *out);
    mu_strvec_release(&av);
    mu_buf_clear(&o);
    mu_strvec_push(&av, "sacct");
    mu_strvec_push(&av, "--parsable2");
    mu_strvec_push(&av, "-j");
    mu_strvec_push(&av, app_id);
    rc = slurm_run(&av, &o, err);
    if (rc == 0)
      rc = mu_slurm_parse_sacct(mu_buf_str(&o), app_id, out, err);
    if (rc == MU_ENOENT || (rc != 0 && strstr(mu_buf_str(err), "accounting storage is "
                                                               "disabled"))) {
      mu_buf_clear(err);
      mu_buf_printf(err, "slurm job '%s' not found in squeue%s", app_id,
                    rc == MU_ENOENT ? " or sacct" : " (and accounting is disabled)");
      rc = MU_ENOENT;
    }
  }
  if (rc == 0)
    add_failures(app_id, out);
out:
  if (rc == 0)
    failure_note(app_id, out);
  mu_strvec_release(&av);
  mu_buf_release(&o);
  mu_buf_release(&e1);
  return rc;
}

static char *recorded(const char *app_id, const char *what);
/* The app as submitted, from the batch script slurmctld keeps while it knows the job. */
static int slurm_app_spec(const char *app_id, const struct mu_cfg *cfg, struct mu_app **out,
                          struct mu_buf *err)
{
  struct mu_strvec av = MU_STRVEC_INIT;
  struct mu_buf script = MU_BUF_INIT(SLURM_OUT_MAX);
  int rc;
  (void)cfg;
  mu_strvec_push(&av, "scontrol");
  mu_strvec_push(&av, "write");
  mu_strvec_push(&av, "batch_script");
  mu_strvec_push(&av, app_id);
  mu_strvec_push(&av, "-");
  rc = slurm_run(&av, &script, err);
  if (rc != 0)
    mu_buf_puts(err, "\n(slurmctld keeps a job's batch script until MinJobAge after it ends)");
  else
    rc = mu_slurm_parse_app(mu_buf_str(&script), app_id, out, err);
  mu_strvec_release(&av);
  mu_buf_release(&script);
  return rc;
}

static int slurm_cancel(const char *app_id, const struct mu_cfg *cfg, struct mu_buf *err)
{
  struct mu_strvec av = MU_STRVEC_INIT;
  int rc;
  (void)cfg;
  mu_strvec_push(&av, "scancel");
  mu_strvec_push(&av, app_id);
  rc = slurm_run(&av, NULL, err);
  mu_strvec_release(&av);
  /* The token goes with the job: a job cancelled before (or while) its script ran leaves its
   * spool behind, and only the spools muster made are removed. */
  char *spool = rc == 0 ? recorded(app_id, " spool = ") : NULL;
  const char *base = spool ? strrchr(spool, '/') : NULL;
  if (base != NULL && strncmp(base + 1, SLURM_SPOOL_PREFIX, strlen(SLURM_SPOOL_PREFIX)) == 0)
    spool_remove(spool);
  mu_free(spool);
  return rc;
}

static int slurm_list(const struct mu_cfg *cfg, struct mu_app_list_entry **out, size_t *n,
                      struct mu_buf *err)
{
  struct mu_strvec av = MU_STRVEC_INIT;
  struct mu_buf o = MU_BUF_INIT(SLURM_OUT_MAX);
  const char *user = mu_cfg_get(cfg, "user");
  const char *partition = mu_cfg_get(cfg, "partition");
  *out = NULL;
  *n = 0;
  mu_strvec_push(&av, "squeue");
  if (user == NULL)
    mu_strvec_push(&av, "--me"); /* the user's jobs, as sacct's default */
  else if (strcmp(user, "ALL") != 0)
    mu_strvec_pushf(&av, "--user=%s", user);
  if (partition != NULL)
    mu_strvec_pushf(&av, "--partition=%s", partition);
  mu_strvec_push(&av, "--noheader");
  mu_strvec_push(&av, "--states=all");
  mu_strvec_push(&av, "--format=%i|%j|%T");
  int rc = slurm_run(&av, &o, err);
  if (rc == 0)
    mu_slurm_parse_list(mu_buf_str(&o), out, n);
  /* The app's name, as local lists it, for the jobs submitted from here (recorded) */
  for (size_t i = 0; rc == 0 && i < *n; i++) {
    char *name = recorded((*out)[i].app_id, " name = ");
    if (name != NULL) {
      mu_free((*out)[i].name);
      (*out)[i].name = name;
    }
  }
  mu_strvec_release(&av);
  mu_buf_release(&o);
  return rc;
}

/* The last "ID<what>PATH" line of ./.musterslurmjobdirs for app_id, or NULL. */
static char *recorded(const char *app_id, const char *what)
{
  FILE *fp = fopen(SLURM_JOBDIRS, "r");
  char line[4096], *found = NULL;
  size_t n = strlen(app_id), w = strlen(what);
  while (fp && fgets(line, sizeof line, fp)) {
    if (strncmp(line, app_id, n) == 0 && strncmp(line + n, what, w) == 0) {
      mu_free(found);
      found = mu_strdup(mu_exec_chomp(line + n + w));
    }
  }
  if (fp)
    fclose(fp);
  return found;
}

/* The directory the job's output files are in: ./.musterslurmjobdirs, else ".". */
static char *job_dir_of(const char *app_id)
{
  char *found = recorded(app_id, " = ");
  return found ? found : mu_strdup(".");
}

/* The batch script's own account of why the job failed before srun (its musterd did not
 * start: slurm_render.c writes slurm-ID-failure.txt in the job's directory), as the status
 * message, in words instead of Slurm's bare state. */
static void failure_note(const char *app_id, struct mu_app_status *out)
{
  char *dir = job_dir_of(app_id), *path = mu_asprintf("%s/slurm-%s-failure.txt", dir, app_id);
  struct mu_buf text = MU_BUF_INIT(4096);
  if (mu_read_file(path, 4096, &text) == 0 && text.len > 0) {
    mu_free(out->msg);
    out->msg = mu_exec_chomp(mu_buf_detach(&text));
  }
  mu_buf_release(&text);
  mu_free(path);
  mu_free(dir);
}

static int copy_new(int fd, int out_fd, off_t *off)
{
  char b[8192];
  ssize_t r;
  int any = 0;
  while ((r = pread(fd, b, sizeof b, *off)) > 0) {
    if (write(out_fd, b, (size_t)r) != r)
      return -1;
    *off += r;
    any = 1;
  }
  return any;
}

/* Offset where the last `tail` lines of fd start. */
static off_t tail_offset(int fd, long tail)
{
  struct stat st;
  char c;
  off_t pos;
  long lines = 0;
  if (tail < 0 || fstat(fd, &st) != 0)
    return 0;
  for (pos = st.st_size - 1; pos >= 0; pos--) {
    if (pread(fd, &c, 1, pos) != 1)
      break;
    if (c == '\n' && pos != st.st_size - 1 && ++lines == tail)
      return pos + 1;
  }
  return 0;
}

/* The files `muster log` reads for one replica: for stdout or stderr srun's .out or .err; for
 * both, the combined log (slurm-ID-ROLE-N.log: every line of both in the order they came, which
 * `muster tee` writes in the script's srun), or, for a job submitted by a muster before it (a
 * .out or .err and no .log), the .out then the .err. Returns: how many paths it set (1 or 2);
 * each is the caller's to free. */
static int log_paths(const char *dir, const char *app_id, const char *role, long replica,
                     enum mu_log_stream s, char *paths[2])
{
  const char *ext[3] = {"log", "out", "err"};
  char *p[3];
  struct stat st;
  for (int i = 0; i < 3; i++)
    p[i] = mu_asprintf("%s/slurm-%s-%s-%ld.%s", dir, app_id, role, replica, ext[i]);
  int nf = 0, old = stat(p[0], &st) != 0 && (stat(p[1], &st) == 0 || stat(p[2], &st) == 0);
  if (s == MU_STREAM_COMBINED && !old) {
    paths[nf++] = p[0];
    p[0] = NULL;
  }
  if (s == MU_STREAM_STDOUT || (s == MU_STREAM_COMBINED && old)) {
    paths[nf++] = p[1];
    p[1] = NULL;
  }
  if (s == MU_STREAM_STDERR || (s == MU_STREAM_COMBINED && old)) {
    paths[nf++] = p[2];
    p[2] = NULL;
  }
  for (int i = 0; i < 3; i++)
    mu_free(p[i]);
  return nf;
}

static int slurm_log(const char *app_id, const char *role, long replica,
                     const struct mu_log_opts *o, int out_fd, const struct mu_cfg *cfg,
                     struct mu_buf *err)
{
  enum mu_log_stream s = o->stream;
  int follow = o->follow;
  long tail = o->tail;
  char *dir = NULL, *paths[2] = {NULL, NULL};
  int fds[2] = {-1, -1}, rc = 0, i, nf = 0;
  off_t offs[2] = {0, 0};

  /* Every replica (of the role): each one's files, lines prefixed role/replica. */
  if (role == NULL || replica < 0)
    return mu_sched_log_fanout(&mu_sched_slurm, app_id, role, replica, o, out_fd, cfg, err);
  dir = job_dir_of(app_id);
  nf = log_paths(dir, app_id, role, replica, s, paths);
  for (i = 0; i < nf; i++) {
    fds[i] = open(paths[i], O_RDONLY | O_CLOEXEC);
    if (fds[i] < 0 && !follow) {
      mu_buf_printf(err,
                    "no log file '%s' (%s): the job has not started, the role/replica is "
                    "wrong, or it ran in another directory (run muster log from the submit "
                    "directory)",
                    paths[i], strerror(errno));
      rc = MU_ENOENT;
      goto out;
    }
    if (fds[i] >= 0)
      offs[i] = tail_offset(fds[i], tail);
  }
  for (;;) {
    struct mu_app_status st;
    struct mu_buf ignore = MU_BUF_INIT(SIZE_MAX);
    int terminal = 1;
    for (i = 0; i < nf; i++) {
      if (fds[i] < 0)
        fds[i] = open(paths[i], O_RDONLY | O_CLOEXEC);
      if (fds[i] >= 0 && copy_new(fds[i], out_fd, &offs[i]) < 0) {
        rc = MU_EIO;
        goto out;
      }
    }
    if (!follow)
      break;
    if (slurm_describe(app_id, cfg, &st, &ignore) == 0)
      terminal = mu_job_state_is_terminal(st.state);
    mu_app_status_release(&st);
    mu_buf_release(&ignore);
    if (terminal) {
      for (i = 0; i < nf; i++)
        if (fds[i] >= 0 && copy_new(fds[i], out_fd, &offs[i]) < 0)
          rc = MU_EIO;
      break;
    }
    {
      struct timespec ts = {0, 300 * 1000 * 1000};
      nanosleep(&ts, NULL);
    }
  }
out:
  for (i = 0; i < 2; i++) {
    if (fds[i] >= 0)
      close(fds[i]);
    mu_free(paths[i]);
  }
  mu_free(dir);
  return rc;
}

const struct mu_sched_ops mu_sched_slurm = {
    .name = "slurm",
    .help = "Slurm through sbatch/squeue/sacct/scancel (heterogeneous job per app)",
    .rdzv_macro = "$MUSTER_RDZV_ENDPOINT: the job's own musterd, started by the script on the "
                  "first node, or the -cfg rdzv=HOST:PORT given",
    .runopts = slurm_runopts,
    .dryrun = slurm_dryrun,
    .schedule = slurm_schedule,
    .describe = slurm_describe,
    .list = slurm_list,
    .cancel_existing = slurm_cancel,
    .log_open = slurm_log,
    .dryrun_free = slurm_dryrun_free,
    .app_spec = slurm_app_spec,
};
