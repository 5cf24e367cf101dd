/* The slurm scheduler's pure renderer: a job spec, its cfg and what the cluster told us
 * (struct mu_slurm_env) into an sbatch script in TorchX's heterogeneous-job layout (every
 * replica of every role is one het group; one srun with ':'-separated groups). No process or
 * file here: slurm.c runs sinfo and sbatch, the unit tests call this directly.
 *
 * When a role uses ${rdzv_endpoint} (or -cfg rdzv=job) the script starts the job's own musterd
 * on the batch host before srun and hands its endpoint to every node, so no rendezvous service
 * needs installing. -cfg rdzv=HOST:PORT points at an existing musterd or etcd instead.
 *
 * Every value reaches the script through the one quoting function of the syntax it lands in
 * (the section "Quoting"): a shell word (mu_shell_quote, and shell_word() for words that hold
 * a runtime variable), an #SBATCH directive's value, an item of srun's --export list.
 *
 * Divergences from TorchX (docs/slurm.md): the banner names muster; --comment/--mail-* come in
 * a fixed order; --account exists.
 */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "muster/errno.h"
#include "muster/mu.h"

#include "alloc.h"
#include "opts.h"
#include "slurm.h"

#define SLURM_RANK0_ENV "SLURM_JOB_NODELIST_HET_GROUP_0"

/* ---------------------------------------------------------------------------------------------
 * Quoting: one function per syntax
 */

/* The macros that become shell variables at run time stand in the rendered text as a control
 * character and a digit: mu_app_validate() lets no control character other than tab and
 * newline into a job spec, so a user's "${app_id}" (after $$) can never be taken for one. */
#define VAR_APP_ID                                                                                 \
  "\001"                                                                                           \
  "1"
#define VAR_RDZV                                                                                   \
  "\001"                                                                                           \
  "2"
#define VAR_C10D                                                                                   \
  "\001"                                                                                           \
  "3"

static const struct {
  const char *mark;
  const char *shell; /* what the script says instead: a double-quoted expansion */
} script_vars[] = {{VAR_APP_ID, "\"$SLURM_JOB_ID\""},
                   {VAR_RDZV, "\"$MUSTER_RDZV_ENDPOINT\""},
                   {VAR_C10D, "\"$MUSTER_C10D_ENDPOINT\""}};

/* One shell word that may hold script_vars' marks (TorchX's srun token quoting): the pieces
 * between the marks each mu_shell_quote()d, '' for an empty one, the variables in double
 * quotes between them. Returns: 0, or MU_E2BIG. */
static int shell_word(const char *s, struct mu_buf *out)
{
  const char *p = s;
  for (;;) {
    const char *mark = strchr(p, '\001');
    size_t vi = 0;
    while (mark != NULL && vi < sizeof(script_vars) / sizeof(script_vars[0]) &&
           strncmp(mark, script_vars[vi].mark, 2) != 0)
      vi++;
    char *piece = mu_strndup(p, mark ? (size_t)(mark - p) : strlen(p));
    int rc = mu_shell_quote(piece, out);
    mu_free(piece);
    if (rc != 0 || mark == NULL)
      return rc;
    if (vi == sizeof(script_vars) / sizeof(script_vars[0]))
      return MU_EINVAL; /* a stray mark: mu_app_validate() lets none in */
    rc = mu_buf_puts(out, script_vars[vi].shell);
    if (rc != 0)
      return rc;
    p = mark + 2;
  }
}

int mu_slurm_quote_directive(const char *v, struct mu_buf *out)
{
  if (mu_text_bad(v, 0) >= 0)
    return MU_EINVAL; /* a directive is one line */
  if (v[0] != '\0' && strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                "@%+=:,./_-") == strlen(v))
    return mu_buf_puts(out, v);
  int rc = mu_buf_putc(out, '"');
  for (const char *p = v; *p != '\0' && rc == 0; p++) {
    if (*p == '"' || *p == '\\')
      rc = mu_buf_putc(out, '\\');
    if (rc == 0)
      rc = mu_buf_putc(out, *p);
  }
  return rc ? rc : mu_buf_putc(out, '"');
}

/* What Slurm's --export list parser (find_quote_token in srun and sbatch) makes of `tok`, the
 * text from a list separator to the end: 1 when it reads exactly one item equal to `want` (the
 * rest of tok, if any, starting after a ','), else 0. Its rules: ' and " each toggle a flag
 * wherever they stand (there is no escape), a ',' splits only while both flags are off, and an
 * item that begins and ends with the same quote loses those two. */
static int export_reads_as(const char *tok, const char *want)
{
  int single = 0, dbl = 0;
  size_t i;
  for (i = 0;; i++) {
    if (tok[i] == '\'')
      single ^= 1;
    else if (tok[i] == '"')
      dbl ^= 1;
    else if ((tok[i] == ',' || tok[i] == '\0') && !single && !dbl)
      break;
    else if (tok[i] == '\0')
      return 0; /* "Improperly formed environment variable" */
  }
  const char *start = tok;
  if (i >= 2 && (tok[0] == '\'' || tok[0] == '"') && tok[i - 1] == tok[0]) {
    start++;
    i -= 2;
  }
  return strlen(want) == i && strncmp(start, want, i) == 0;
}

int mu_slurm_quote_export(const char *name, const char *value, struct mu_buf *out)
{
  char *item = mu_asprintf("%s=%s", name, value);
  char *forms[3] = {mu_strdup(item), mu_asprintf("\"%s\"", item), mu_asprintf("'%s'", item)};
  int rc = MU_EINVAL;
  for (size_t i = 0; i < 3 && rc == MU_EINVAL; i++)
    if (export_reads_as(forms[i], item))
      rc = mu_buf_puts(out, forms[i]);
  for (size_t i = 0; i < 3; i++)
    mu_free(forms[i]);
  mu_free(item);
  return rc;
}

/* ---------------------------------------------------------------------------------------------
 * The steps of one script
 */

struct render {
  const struct mu_app *app;
  const struct mu_cfg *cfg;
  const struct mu_slurm_env *env;
  const char *rdzv;       /* an existing service's endpoint, or NULL (the job's own, or none) */
  int own_rdzv;           /* the script starts the job's musterd */
  int c10d;               /* ... which listens for TCPStore too: the job uses ${c10d_endpoint} */
  long port;              /* -cfg rdzv_port, 0 = from the job id */
  long min_retries;       /* the smallest max_retries of the roles: the script's requeues */
  int covered;            /* a role has more replicas than it needs (standbys, an elastic floor):
                           * the rendezvous covers a lost one, so srun keeps the step going */
  const char *muster_bin; /* the program a role with entrypoint "muster" runs */
  struct mu_buf *script;  /* the #SBATCH lines, the set-up, then the srun */
  struct mu_buf srun;     /* the srun command, one group per replica */
  struct mu_buf groups;   /* the groups' names, each a shell word after a space */
  struct mu_buf *err;
};

/* Whether s may stand for the host nodes reach the job's musterd at: it is substituted into
 * --export items at run time, so it holds none of their syntax. */
static int host_ok(const char *s)
{
  for (const char *p = s; *p != '\0'; p++)
    if (!isalnum((unsigned char)*p) && strchr(".-_:[]", *p) == NULL)
      return 0;
  return s[0] != '\0';
}

/* Step 1: the app and the cfg checked, the rendezvous chosen. Returns: 0 or MU_EINVAL. */
static int check(struct render *r)
{
  const struct mu_app *app = r->app;
  if (app->nroles == 0) {
    mu_buf_puts(r->err, "app has no roles; a component must define at least one");
    return MU_EINVAL;
  }
  if (mu_app_validate(app, r->err) != 0) /* what cmd_run checked: the renderer stands alone */
    return MU_EINVAL;
  struct mu_rdzv_choice rz;
  if (mu_cfg_rdzv(r->cfg, app, &rz, r->err) != 0)
    return MU_EINVAL;
  r->own_rdzv = rz.own;
  r->rdzv = rz.endpoint != NULL ? mu_cfg_get(r->cfg, "rdzv") : NULL;
  mu_free(rz.endpoint);
  r->c10d = mu_app_mentions(app, "${c10d_endpoint}");
  if (r->rdzv != NULL && r->c10d) {
    mu_buf_printf(r->err,
                  "the job uses ${c10d_endpoint} (torchrun --rdzv_backend c10d) and -cfg "
                  "rdzv=%s names a musterd whose TCPStore port muster does not know; use -cfg "
                  "rdzv=auto (the job's own musterd), or --rdzv_backend etcd-v2",
                  r->rdzv);
    return MU_EINVAL;
  }
  const char *v = mu_cfg_get(r->cfg, "rdzv_port");
  if (v && mu_parse_long(v, 1, 65535, &r->port) != 0) {
    mu_buf_printf(r->err, "-cfg rdzv_port: '%s' is not a port number (1-65535)", v);
    return MU_EINVAL;
  }
  v = mu_cfg_get(r->cfg, "rdzv_host");
  if (v && !host_ok(v)) {
    mu_buf_puts(r->err, "-cfg rdzv_host: '");
    mu_put_shown(r->err, v);
    mu_buf_puts(r->err, "' is not a host name or address (letters, digits, '.', '-', ':')");
    return MU_EINVAL;
  }
  r->min_retries = -1;
  for (size_t i = 0; i < app->nroles; i++) {
    if (r->min_retries < 0 || app->roles[i].max_retries < r->min_retries)
      r->min_retries = app->roles[i].max_retries;
    if (app->roles[i].min_replicas >= 0 && app->roles[i].min_replicas < app->roles[i].num_replicas)
      r->covered = 1;
  }
  return 0;
}

/* Step 2: the banner, and the options that go on sbatch's command line (shown as it). */
static void header(struct render *r, struct mu_strvec *opts)
{
  static const char *const job_opts[] = {"comment", "mail-user", "mail-type"};
  const char *v = mu_cfg_get(r->cfg, "job_dir");
  if (v)
    mu_strvec_pushf(opts, "--chdir=%s", v);
  for (size_t i = 0; i < sizeof(job_opts) / sizeof(job_opts[0]); i++) {
    v = mu_cfg_get(r->cfg, job_opts[i]);
    if (v)
      mu_strvec_pushf(opts, "--%s=%s", job_opts[i], v);
  }
  mu_buf_printf(r->script,
                "#!/bin/bash\n#\n# Generated by muster %s\n# Run with: sbatch --parsable",
                MU_VERSION);
  for (size_t i = 0; i < opts->n; i++) {
    mu_buf_putc(r->script, ' ');
    mu_shell_quote(opts->v[i], r->script); /* one line a user can paste */
  }
  mu_buf_puts(r->script, "\n#\n");
}

/* Step 3a: the #SBATCH line of one het group. Returns: 0, or MU_EINVAL naming the runopt. */
static int group_directive(struct render *r, const struct mu_role *role, const char *name)
{
  static const char *const group_opts[] = {"partition", "time", "account", "constraint", "qos"};
  const struct mu_resource *res = &role->resource;
  const struct mu_slurm_env *env = r->env;
  mu_buf_printf(r->script, "#SBATCH --job-name=%s --requeue", name);
  for (size_t i = 0; i < sizeof(group_opts) / sizeof(group_opts[0]); i++) {
    const char *v = mu_cfg_get(r->cfg, group_opts[i]);
    if (v == NULL)
      continue;
    mu_buf_printf(r->script, " --%s=", group_opts[i]);
    if (mu_slurm_quote_directive(v, r->script) != 0) {
      mu_buf_printf(r->err, "-cfg %s: an #SBATCH line cannot hold a control character",
                    group_opts[i]);
      return MU_EINVAL;
    }
  }
  mu_buf_puts(r->script, " --ntasks-per-node=1");
  if (res->cpu > 0)
    mu_buf_printf(r->script, " --cpus-per-task=%ld", res->cpu);
  if (res->memMB > 0 && !env->nomem)
    mu_buf_printf(r->script, " --mem=%ld", res->memMB);
  if (res->gpu > 0) {
    if (env->major > 24 || (env->major == 24 && env->minor >= 11))
      mu_buf_printf(r->script, " --gpus-per-node=%ld", res->gpu);
    else
      mu_buf_printf(r->script, " --gpus-per-task=%ld --ntasks=1", res->gpu);
  }
  /* Neuron devices are no GRES (AWS's Trainium Slurm examples take whole nodes): the role gets
   * its nodes exclusively instead. */
  for (size_t i = 0; i < res->ndevices; i++)
    if (strncmp(res->devices[i].name, "aws.amazon.com/neuron", 21) == 0) {
      mu_buf_puts(r->script, " --exclusive");
      break;
    }
  return mu_buf_putc(r->script, '\n');
}

/* The role's env as one --export=ALL,K=V,... word. Returns: 0, or MU_EINVAL naming the value
 * srun's list cannot carry. */
static int export_word(struct render *r, size_t ri, const struct mu_macros *m)
{
  const struct mu_role *role = &r->app->roles[ri];
  struct mu_buf list = MU_BUF_INIT(SIZE_MAX);
  int rc = mu_buf_puts(&list, "--export=ALL");
  for (size_t i = 0; i < role->env.n && rc == 0; i++) {
    char *v = mu_macros_apply(m, role->env.v[i].value);
    mu_buf_putc(&list, ',');
    rc = mu_slurm_quote_export(role->env.v[i].key, v, &list);
    mu_free(v);
    if (rc == MU_EINVAL)
      mu_buf_printf(r->err,
                    "roles[%zu].env.%s: Slurm's srun --export cannot carry this value: its list "
                    "has no escape, and ' and \" toggle its quoting, so a value with an odd "
                    "number of either cannot be passed; change the value, or pass it in a file",
                    ri, role->env.v[i].key);
  }
  if (rc == 0) {
    mu_buf_putc(&r->srun, ' ');
    rc = shell_word(mu_buf_str(&list), &r->srun);
  }
  mu_buf_release(&list);
  return rc;
}

/* Step 3b: one group of the srun command: its output files, its env, its command line. */
static int srun_group(struct render *r, size_t ri, long k, const char *name, int first)
{
  const struct mu_role *role = &r->app->roles[ri];
  char rid[24], nrep[24];
  snprintf(rid, sizeof(rid), "%ld", k);
  snprintf(nrep, sizeof(nrep), "%ld", role->num_replicas);
  struct mu_macros m = {VAR_APP_ID,
                        rid,
                        role->image ? role->image : "",
                        SLURM_RANK0_ENV,
                        r->rdzv ? r->rdzv : VAR_RDZV,
                        nrep,
                        VAR_C10D};
  mu_buf_puts(&r->srun, first ? "srun " : " :\\\n     ");
  char *s = mu_asprintf("--output=slurm-" VAR_APP_ID "-%s.out", name);
  int rc = shell_word(s, &r->srun);
  mu_free(s);
  s = mu_asprintf("--error=slurm-" VAR_APP_ID "-%s.err", name);
  mu_buf_putc(&r->srun, ' ');
  rc = rc ? rc : shell_word(s, &r->srun);
  mu_free(s);
  /* A task that ends badly ends the step, others 60 s after the first task ended; not when the
   * rendezvous covers a lost task (docs/slurm.md): then every task runs to its own end. */
  mu_buf_puts(&r->srun,
              r->covered ? " --wait=0 --kill-on-bad-exit=0" : " --wait=60 --kill-on-bad-exit=1");
  if (rc == 0 && role->env.n > 0)
    rc = export_word(r, ri, &m);
  /* muster tee: both streams also in one file, in the order they come (muster log reads it) */
  mu_buf_putc(&r->srun, ' ');
  rc = rc ? rc : mu_shell_quote(r->muster_bin ? r->muster_bin : "muster", &r->srun);
  s = mu_asprintf("slurm-" VAR_APP_ID "-%s.log", name);
  mu_buf_puts(&r->srun, " tee ");
  rc = rc ? rc : shell_word(s, &r->srun);
  mu_free(s);
  mu_buf_puts(&r->srun, " --");
  mu_buf_putc(&r->groups, ' ');
  rc = rc ? rc : mu_shell_quote(name, &r->groups);
  if (role->entrypoint && strcmp(role->entrypoint, "muster") == 0 && r->muster_bin)
    s = mu_strdup(r->muster_bin);
  else
    s = mu_macros_apply(&m, role->entrypoint ? role->entrypoint : "");
  mu_buf_putc(&r->srun, ' ');
  rc = rc ? rc : shell_word(s, &r->srun);
  mu_free(s);
  for (size_t i = 0; i < role->args.n && rc == 0; i++) {
    s = mu_macros_apply(&m, role->args.v[i]);
    mu_buf_putc(&r->srun, ' ');
    rc = shell_word(s, &r->srun);
    mu_free(s);
  }
  return rc;
}

/* Step 3: every replica of every role: its #SBATCH group and its srun group. */
static int groups(struct render *r)
{
  int rc = 0, first = 1;
  for (size_t ri = 0; ri < r->app->nroles && rc == 0; ri++) {
    const struct mu_role *role = &r->app->roles[ri];
    for (long k = 0; k < role->num_replicas && rc == 0; k++, first = 0) {
      char *name = mu_asprintf("%s-%ld", role->name, k);
      if (!first)
        mu_buf_puts(r->script, "#SBATCH hetjob\n");
      rc = group_directive(r, role, name);
      rc = rc ? rc : srun_group(r, ri, k, name, first);
      mu_free(name);
    }
  }
  return rc;
}

/* Step 4a: the token, by its file: musterd and every agent read it from there (srun passes
 * the environment on), so it is in no command line and not in this script. */
static void token(struct render *r)
{
  mu_buf_puts(r->script, r->env->spool ? "\n# The rendezvous token (docs/security.md): a 0600 "
                                         "file that muster run made in the job's spool.\n"
                                       : "\n# The rendezvous token (docs/security.md): the file "
                                         "of -cfg rdzv_token_file.\n");
  mu_buf_puts(r->script, "# The job's musterd and every agent read it there: it is in no "
                         "command line.\nexport MUSTER_RDZV_TOKEN_FILE=");
  mu_shell_quote(r->env->token_file, r->script);
  mu_buf_puts(r->script, "\nunset MUSTER_RDZV_TOKEN\n");
}

/* What the EXIT trap does: stop musterd, and remove the job's spool unless the job requeued
 * itself (its next run needs the token). */
static void exit_trap(struct render *r)
{
  if (r->env->spool == NULL) {
    mu_buf_puts(r->script, "trap 'kill \"$MUSTERD_PID\" 2>/dev/null || true' EXIT\n");
    return;
  }
  mu_buf_puts(r->script, "muster_exit() {\n"
                         "    kill \"$MUSTERD_PID\" 2>/dev/null || true\n"
                         "    # The token goes with the job; a run that requeued itself keeps it.\n"
                         "    if [ -z \"${MUSTER_REQUEUED:-}\" ]; then\n"
                         "        rm -f \"$MUSTER_RDZV_TOKEN_FILE\"\n"
                         "        rmdir ");
  mu_shell_quote(r->env->spool, r->script);
  mu_buf_puts(r->script, "\n    fi\n}\ntrap muster_exit EXIT\n");
}

/* Step 4b: with -cfg rdzv_tls, what the agents check the job's musterd with (and present). */
static void tls_env(struct render *r)
{
  static const char *const vars[][2] = {{"MUSTER_RDZV_CACERT", "ca.pem"},
                                        {"MUSTER_RDZV_CERT", "client.pem"},
                                        {"MUSTER_RDZV_KEY", "client.key"}};
  mu_buf_puts(r->script, "\n# The job's musterd serves HTTPS (-cfg rdzv_tls): the agents check it "
                         "with this CA.\n");
  for (size_t i = 0; i < (r->env->tls_clients ? 3u : 1u); i++) {
    char *f = mu_asprintf("%s/%s", r->env->tls_dir, vars[i][1]);
    mu_buf_printf(r->script, "export %s=", vars[i][0]);
    mu_shell_quote(f, r->script);
    mu_buf_putc(r->script, '\n');
    mu_free(f);
  }
}

/* The musterd command line: where it listens, and the files of its token and its TLS (paths
 * only), its output to the job's musterd log. */
static void musterd_line(struct render *r, const char *host, const char *bin)
{
  static const char *const tls[][2] = {
      {"--tls-cert", "server.pem"}, {"--tls-key", "server.key"}, {"--tls-client-ca", "ca.pem"}};
  mu_shell_quote(bin ? bin : "musterd", r->script);
  /* With an explicit rdzv_host musterd listens on that address only; else on all. */
  mu_buf_printf(r->script, " --listen \"%s:$MUSTER_RDZV_PORT\"",
                host ? "$MUSTER_RDZV_HOST" : "0.0.0.0");
  if (r->c10d)
    mu_buf_puts(r->script,
                " --c10d-listen \"${MUSTER_C10D_ADDR:-$MUSTER_RDZV_HOST}:$MUSTER_C10D_PORT\""
                " --c10d-allow \"$MUSTER_C10D_ALLOW\"");
  if (r->env->token_file != NULL)
    mu_buf_puts(r->script, " --token-file \"$MUSTER_RDZV_TOKEN_FILE\"");
  for (size_t i = 0; r->env->tls_dir && i < (r->env->tls_clients ? 3u : 2u); i++) {
    char *f = mu_asprintf("%s/%s", r->env->tls_dir, tls[i][1]);
    mu_buf_printf(r->script, " %s ", tls[i][0]);
    mu_shell_quote(f, r->script);
    mu_free(f);
  }
  mu_buf_puts(r->script, " > slurm-\"$SLURM_JOB_ID\"-musterd.log 2>&1 &\nMUSTERD_PID=$!\n");
}

/* Step 4: the job's own musterd on the batch host, started and waited for before srun. */
static void own_musterd(struct render *r)
{
  const char *host = mu_cfg_get(r->cfg, "rdzv_host"), *bin = mu_cfg_get(r->cfg, "musterd");
  if (bin == NULL)
    bin = r->env->musterd_bin;
  mu_buf_puts(r->script, "\n# The job's own rendezvous: musterd on the batch host, for every "
                         "node's muster agent.\n");
  if (host) {
    mu_buf_puts(r->script, "MUSTER_RDZV_HOST=");
    mu_shell_quote(host, r->script);
    mu_buf_putc(r->script, '\n');
  } else {
    mu_buf_puts(r->script, "MUSTER_RDZV_HOST=$(hostname)\n");
  }
  if (r->port > 0)
    mu_buf_printf(r->script, "MUSTER_RDZV_PORT=%ld\n", r->port);
  else
    mu_buf_puts(r->script, "MUSTER_RDZV_PORT=$((29400 + SLURM_JOB_ID % 2000))\n");
  mu_buf_printf(r->script,
                "export MUSTER_RDZV_ENDPOINT=\"%s$MUSTER_RDZV_HOST:$MUSTER_RDZV_PORT\"\n",
                r->env->tls_dir ? "https://" : "");
  /* A job that uses ${c10d_endpoint} (torchrun --rdzv_backend c10d): musterd speaks PyTorch's
   * TCPStore too, which has no credentials: on the batch host's own address only, never
   * 0.0.0.0 (docs/security.md) */
  if (r->c10d && r->port > 0)
    mu_buf_puts(r->script, "MUSTER_C10D_PORT=$((MUSTER_RDZV_PORT + 1))\n");
  else if (r->c10d)
    mu_buf_puts(r->script, "MUSTER_C10D_PORT=$((31400 + SLURM_JOB_ID % 2000))\n");
  if (r->c10d)
    mu_buf_puts(r->script,
                "MUSTER_C10D_ADDR=$(getent ahostsv4 \"$MUSTER_RDZV_HOST\" | awk 'NR==1{print "
                "$1}')\n"
                "export MUSTER_C10D_ENDPOINT=\"$MUSTER_RDZV_HOST:$MUSTER_C10D_PORT\"\n"
                "# TCPStore has no credential: only the allocation's nodes (and this host's\n"
                "# loopback) may use it (musterd --c10d-allow, docs/security.md)\n"
                "MUSTER_C10D_ALLOW=$({ echo 127.0.0.0/8; echo ::1; echo \"$MUSTER_C10D_ADDR\"\n"
                "  for h in $(scontrol show hostnames \"$SLURM_JOB_NODELIST\"); do\n"
                "    getent ahosts \"$h\" | awk '{print $1}'; done; } | awk 'NF && !seen[$1]++' "
                "| paste -sd, -)\n");
  musterd_line(r, host, bin);
  exit_trap(r);
  mu_buf_puts(r->script,
              "musterd_failed() {\n"
              "    # One line for `muster status` and the failure summary (slurm.c reads it).\n"
              "    echo \"the job's musterd did not start on $(hostname) (--listen port "
              "$MUSTER_RDZV_PORT): $1; see slurm-$SLURM_JOB_ID-musterd.log, or pick another "
              "-cfg rdzv_port / -cfg musterd\" | tee slurm-\"$SLURM_JOB_ID\"-failure.txt >&2\n"
              "    exit 1\n"
              "}\n"
              /* Ready when its log says it listens (a port that only accepts could be
               * someone else's server); gone first: it could not start. */
              "for _ in $(seq 100); do\n"
              "    if grep -q 'listening on' slurm-\"$SLURM_JOB_ID\"-musterd.log; then break; fi\n"
              "    kill -0 \"$MUSTERD_PID\" 2>/dev/null ||\n"
              "        musterd_failed \"$(tail -n 1 slurm-\"$SLURM_JOB_ID\"-musterd.log)\"\n"
              "    sleep 0.1\n"
              "done\n"
              "grep -q 'listening on' slurm-\"$SLURM_JOB_ID\"-musterd.log ||\n"
              "    musterd_failed \"not listening after 10 s\"\n");
}

/* Step 5: the environment every step shares, the musterd, srun and the requeue logic.
 * Returns: 0, or MU_E2BIG. */
static int body(struct render *r)
{
  mu_buf_puts(r->script, "\nset -evx\n\nexport PYTHONUNBUFFERED=1\nexport SLURM_UNBUFFEREDIO=1\n");
  mu_buf_printf(r->script, "export TORCHX_MAX_RETRIES=%ld\n",
                r->min_retries < 0 ? 0 : r->min_retries);
  if (r->env->token_file != NULL)
    token(r);
  if (r->own_rdzv && r->env->tls_dir != NULL)
    tls_env(r);
  if (r->own_rdzv)
    own_musterd(r);
  mu_buf_puts(r->script, "\n# Each replica's stdout and stderr in one log too, in the order "
                         "written (muster tee,\n# in srun below): made here, before srun makes "
                         "the .out and .err files.\nfor group in");
  mu_buf_puts(r->script, mu_buf_str(&r->groups));
  mu_buf_puts(r->script, "; do : >slurm-\"$SLURM_JOB_ID\"-\"$group\".log; done\n");
  mu_buf_puts(r->script, "\nset +e\n");
  mu_buf_puts(r->script, mu_buf_str(&r->srun));
  mu_buf_puts(r->script, "\nexitcode=$?\nset -e\n\necho \"job exited with code $exitcode\"\n"
                         "if [ $exitcode -ne 0 ]; then\n"
                         "    if [ \"$TORCHX_MAX_RETRIES\" -gt \"${SLURM_RESTART_COUNT:-0}\" ]; "
                         "then\n");
  if (r->env->spool != NULL && r->own_rdzv)
    mu_buf_puts(r->script, "        MUSTER_REQUEUED=1\n");
  return mu_buf_puts(r->script, "        scontrol requeue \"$SLURM_JOB_ID\"\n"
                                "    fi\n"
                                "    exit $exitcode\n"
                                "fi\n");
}

int mu_slurm_render(const struct mu_app *app, const struct mu_cfg *cfg,
                    const struct mu_slurm_env *env, struct mu_buf *script, struct mu_strvec *opts,
                    struct mu_buf *err)
{
  struct render r = {.app = app, .cfg = cfg, .env = env, .script = script, .err = err};
  r.muster_bin = mu_cfg_get(cfg, "muster") ? mu_cfg_get(cfg, "muster") : env->muster_bin;
  mu_buf_init(&r.srun, SIZE_MAX);
  mu_buf_init(&r.groups, SIZE_MAX);
  int rc = check(&r);
  if (rc == 0) {
    header(&r, opts);
    rc = groups(&r);
  }
  if (rc == 0 && body(&r) != 0) {
    mu_buf_puts(err, "the sbatch script is over its size limit");
    rc = MU_E2BIG;
  }
  mu_buf_release(&r.srun);
  mu_buf_release(&r.groups);
  return rc;
}
