/* The scheduler registry and the generic operations on the vtable (see sched.h). */
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "muster/errno.h"

#include "alloc.h"
#include "failrec.h"
#include "sched.h"

/* The one scheduler table: every name users see (usage, messages, completion, docs) comes from
 * here. The first entry is the default backend. */
static const struct {
  const struct mu_sched_ops *ops;
  const char *alias; /* a short name users type, or NULL */
} backends[] = {
    {&mu_sched_local, NULL},
    {&mu_sched_kubernetes, "k8s"},
    {&mu_sched_slurm, NULL},
    {&mu_sched_local_container, NULL},
};
#define NBACKENDS (sizeof(backends) / sizeof(backends[0]))

const struct mu_sched_ops *mu_sched_find(const char *name)
{
  if (name == NULL)
    return backends[0].ops;
  for (size_t i = 0; i < NBACKENDS; i++)
    if (strcmp(backends[i].ops->name, name) == 0 ||
        (backends[i].alias != NULL && strcmp(backends[i].alias, name) == 0))
      return backends[i].ops;
  return NULL;
}

const struct mu_sched_ops *mu_sched_at(size_t i)
{
  return i < NBACKENDS ? backends[i].ops : NULL;
}

void mu_sched_names(struct mu_buf *out, const char *sep, const char *last, int mark_default)
{
  for (size_t i = 0; i < NBACKENDS; i++) {
    if (i > 0)
      mu_buf_puts(out, i + 1 == NBACKENDS ? last : sep);
    mu_buf_printf(out, "%s%s", backends[i].ops->name, i == 0 && mark_default ? " (default)" : "");
  }
}

int mu_handle_parse(const char *handle, char **sched, char **session, char **app_id)
{
  *sched = *session = *app_id = NULL;
  const char *sep = strstr(handle, "://");
  if (sep == NULL || sep == handle)
    return MU_EINVAL;
  const char *rest = sep + 3;
  const char *slash = strchr(rest, '/');
  if (slash == NULL || slash[1] == '\0')
    return MU_EINVAL;
  *sched = mu_strndup(handle, (size_t)(sep - handle));
  *session = mu_strndup(rest, (size_t)(slash - rest));
  *app_id = mu_strdup(slash + 1);
  return 0;
}

void mu_app_status_release(struct mu_app_status *st)
{
  if (st == NULL)
    return;
  for (size_t i = 0; i < st->nreplicas; i++) {
    mu_free(st->replicas[i].role);
    mu_free(st->replicas[i].hostname);
    mu_free(st->replicas[i].msg);
  }
  mu_free(st->replicas);
  mu_free(st->rdzv_endpoint);
  mu_free(st->rdzv_token_file);
  mu_free(st->ui_url);
  mu_free(st->app_id);
  mu_free(st->msg);
  mu_free(st->reason);
  mu_free(st->root_cause);
  mu_free(st->structured_error_msg);
  mu_free(st->rdzv_run);
  memset(st, 0, sizeof(*st));
}

static void add_record(struct mu_app_status *st, size_t replica, const struct mu_failrec *r,
                       const char *json)
{
  struct mu_buf line = MU_BUF_INIT(SIZE_MAX);
  /* named by the replica it came from: its node rank is the order it joined in */
  if (replica < st->nreplicas)
    mu_failrec_summary_replica(r, st->replicas[replica].role, st->replicas[replica].replica_id,
                               &line);
  else
    mu_failrec_summary(r, &line);
  if (replica < st->nreplicas) {
    mu_free(st->replicas[replica].msg);
    st->replicas[replica].msg = mu_strdup(mu_buf_str(&line));
  }
  if (r->restarts > st->num_restarts)
    st->num_restarts = r->restarts;
  struct mu_failrec cur = {.time_ms = st->root_cause_ms}; /* the root cause so far: its time */
  if (st->root_cause == NULL || mu_failrec_earlier(r, &cur)) {
    mu_free(st->root_cause);
    mu_free(st->structured_error_msg);
    st->root_cause = mu_strdup(mu_buf_str(&line));
    st->structured_error_msg = json != NULL ? mu_strdup(json) : mu_failrec_to_json(r);
    st->root_cause_ms = r->time_ms;
  }
  mu_buf_release(&line);
}

void mu_app_status_add_failure(struct mu_app_status *st, size_t replica, const char *text,
                               size_t len)
{
  struct mu_failrec r;
  if (mu_failrec_parse(text, len, &r) != 0)
    return;
  char *json = mu_strndup(text, len);
  add_record(st, replica, &r, json);
  mu_free(json);
  mu_failrec_release(&r);
}

void mu_app_status_scan_failure(struct mu_app_status *st, size_t replica, const char *log,
                                size_t len)
{
  struct mu_failrec r;
  if (mu_failrec_scan(log, len, &r) == 0) {
    add_record(st, replica, &r, NULL);
    mu_failrec_release(&r);
  }
}

void mu_dryrun_release(struct mu_dryrun *req)
{
  if (req == NULL)
    return;
  if (req->sched != NULL && req->sched->dryrun_free != NULL)
    req->sched->dryrun_free(req);
  mu_free(req->text);
  mu_free(req->app_id);
  mu_free(req->note);
  mu_free(req->warning);
  mu_free(req->objects);
  memset(req, 0, sizeof(*req));
}

void mu_app_list_free(struct mu_app_list_entry *l, size_t n)
{
  for (size_t i = 0; l != NULL && i < n; i++) {
    mu_free(l[i].app_id);
    mu_free(l[i].name);
    mu_free(l[i].reason);
  }
  mu_free(l);
}

static int notsup(const struct mu_sched_ops *s, const char *what, struct mu_buf *err)
{
  mu_buf_printf(err, "the %s scheduler does not support %s", s->name ? s->name : "?", what);
  return MU_ENOTSUP;
}

/* -cfg health_check: a copy of `app` whose every role has MUSTER_HEALTH_CHECK (a role that
 * sets it keeps its own). Returns: the copy, or NULL when there is no check (or the copy
 * failed, said in err). Ownership: caller frees with mu_app_free(). */
static struct mu_app *with_health_check(const struct mu_app *app, const struct mu_cfg *cfg, int *rc,
                                        struct mu_buf *err)
{
  const char *hc = mu_cfg_get(cfg, "health_check");
  struct mu_buf json = MU_BUF_INIT(SIZE_MAX);
  struct mu_app *copy = NULL;
  *rc = 0;
  if (hc == NULL || hc[0] == '\0')
    return NULL;
  if (mu_app_to_json(app, &json) != 0 || mu_app_from_json(mu_buf_str(&json), &copy) != 0) {
    mu_buf_printf(err, "cannot copy the job spec to add -cfg health_check");
    *rc = MU_EINVAL;
  }
  for (size_t i = 0; copy != NULL && i < copy->nroles; i++) {
    struct mu_kvlist *env = &copy->roles[i].env;
    int has = 0;
    for (size_t k = 0; k < env->n; k++)
      has |= strcmp(env->v[k].key, "MUSTER_HEALTH_CHECK") == 0;
    if (!has)
      mu_kvlist_set(env, "MUSTER_HEALTH_CHECK", hc);
  }
  mu_buf_release(&json);
  return copy;
}

int mu_sched_dryrun(const struct mu_sched_ops *s, const struct mu_app *app,
                    const struct mu_cfg *cfg, struct mu_dryrun *out, struct mu_buf *err)
{
  if (s->dryrun == NULL)
    return notsup(s, "dryrun (it is not implemented in this build)", err);
  memset(out, 0, sizeof(*out));
  out->sched = s;
  int rc = 0;
  struct mu_app *copy = with_health_check(app, cfg, &rc, err);
  if (rc != 0)
    return rc;
  rc = s->dryrun(copy != NULL ? copy : app, cfg, out, err);
  mu_app_free(copy);
  return rc;
}

int mu_sched_schedule(struct mu_dryrun *req, struct mu_buf *err)
{
  if (req->sched == NULL || req->sched->schedule == NULL)
    return notsup(req->sched, "submitting jobs", err);
  return req->sched->schedule(req, err);
}

int mu_sched_describe(const struct mu_sched_ops *s, const char *app_id, const struct mu_cfg *cfg,
                      struct mu_app_status *out, struct mu_buf *err)
{
  if (s->describe == NULL)
    return notsup(s, "describe/status", err);
  memset(out, 0, sizeof(*out));
  int rc = s->describe(app_id, cfg, out, err);
  /* A failure the workers recovered from is no root cause of a job that runs or succeeded. */
  if (rc == 0 && out->state != MU_STATE_FAILED) {
    mu_free(out->root_cause);
    mu_free(out->structured_error_msg);
    out->root_cause = out->structured_error_msg = NULL;
  }
  return rc;
}

int mu_sched_cancel(const struct mu_sched_ops *s, const char *app_id, const struct mu_cfg *cfg,
                    struct mu_buf *err)
{
  if (s->cancel_existing == NULL)
    return notsup(s, "cancel", err);
  if (s->describe != NULL) {
    struct mu_app_status st;
    memset(&st, 0, sizeof(st));
    struct mu_buf ignore = MU_BUF_INIT(SIZE_MAX);
    int rc = s->describe(app_id, cfg, &st, &ignore);
    mu_buf_release(&ignore);
    if (rc == MU_ENOENT) {
      mu_buf_printf(err, "no job '%s' on the %s scheduler", app_id, s->name);
      return rc;
    }
    int terminal = rc == 0 && mu_job_state_is_terminal(st.state);
    if (rc == 0)
      mu_app_status_release(&st);
    if (terminal)
      return 0;
  }
  return s->cancel_existing(app_id, cfg, err);
}
