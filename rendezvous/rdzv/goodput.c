/* Goodput: what the agents report of their workers (started, first progress, failed, hung),
 * the run's restart budget, the nodes whose health check failed, and each round's timings
 * (see rdzv.h, "Goodput"; docs/rendezvous.md).
 *
 * Why the budget lives here: every node of a run must see the same TORCHELASTIC_RESTART_COUNT
 * and stop after the same number of restarts, whichever node failed and whether an agent
 * restarted or a standby came in; only the rendezvous sees every node. A failure counts once
 * per round: the first report of a failed or hung worker ends the active round; reports that
 * come after (the other nodes' workers failing because a peer is gone) find the round ended
 * and count nothing. A round that ends because a member was lost, left, re-joined, became
 * unhealthy or to take in waiting nodes counts nothing either.
 *
 * Timings are wall-clock ms (what a person reads); the history keeps the latest
 * RDZV_HISTORY_MAX rounds, and the run keeps its first progress (the time to first step).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "goodput.h"
#include "json.h"
#include "rdzv_int.h"

/* ---------------------------------------------------------------------------------------------
 * Names
 */

const char *rdzv_end_name(enum rdzv_end e)
{
  static const char *const names[] = {"",         "failed",   "hung",      "lost",   "left",
                                      "rejoined", "scale-up", "unhealthy", "closed", "shut"};
  return (unsigned)e < RDZV_END__COUNT ? names[e] : "unknown";
}

const char *rdzv_report_name(enum rdzv_report_kind k)
{
  switch (k) {
  case RDZV_REPORT_STARTED:
    return "started";
  case RDZV_REPORT_PROGRESS:
    return "progress";
  case RDZV_REPORT_FAILED:
    return "failed";
  case RDZV_REPORT_HUNG:
    return "hung";
  }
  return NULL;
}

enum rdzv_report_kind rdzv_report_kind(const char *s)
{
  for (int k = RDZV_REPORT_STARTED; k <= RDZV_REPORT_HUNG; k++)
    if (strcmp(s, rdzv_report_name((enum rdzv_report_kind)k)) == 0)
      return (enum rdzv_report_kind)k;
  return (enum rdzv_report_kind)0;
}

/* ---------------------------------------------------------------------------------------------
 * The round history
 */

static void hist_free_one(struct rdzv *rv, struct rdzv_hist *h)
{
  size_t wl = strlen(h->why);
  rv->bytes -= rdzv_why_cost(wl);
  rv->enc -= HIST_ENC + wl;
  mu_free(h->why);
  h->why = NULL;
}

void rdzv_hist_push(struct rdzv_run *run, const struct rdzv_hist *h)
{
  struct rdzv *rv = run->rv;
  if (run->nhist == RDZV_HISTORY_MAX) { /* drop the oldest */
    hist_free_one(rv, &run->hist[0]);
    memmove(run->hist, run->hist + 1, (RDZV_HISTORY_MAX - 1) * sizeof(*run->hist));
    run->nhist--;
    run->hist_dropped++;
  }
  if (run->hist == NULL) {
    run->hist = mu_calloc(RDZV_HISTORY_MAX, sizeof(*run->hist));
    rv->bytes += rdzv_hist_array_cost();
  }
  struct rdzv_hist *o = &run->hist[run->nhist++];
  *o = *h;
  if (o->why == NULL)
    o->why = mu_strdup("");
  size_t wl = strlen(o->why);
  rv->bytes += rdzv_why_cost(wl);
  rv->enc += HIST_ENC + wl;
}

void rdzv_hist_open(struct rdzv_run *run, const struct rdzv_round *r)
{
  struct rdzv_hist h;
  memset(&h, 0, sizeof(h));
  h.number = r->number;
  h.nnodes = r->nnodes;
  h.world_size = r->world_size;
  h.restart_count = run->restarts;
  h.closed_ms = rdzv_wall_ms();
  rdzv_hist_end(run, RDZV_END_REJOINED, 0, "a newer round closed"); /* when none said why */
  rdzv_hist_push(run, &h);
}

struct rdzv_hist *rdzv_hist_cur(struct rdzv_run *run)
{
  if (run->nhist == 0 || run->round == NULL)
    return NULL;
  struct rdzv_hist *h = &run->hist[run->nhist - 1];
  return h->number == run->round->number ? h : NULL;
}

/* The record of round `number`, or NULL when it is not kept. */
static struct rdzv_hist *hist_find(struct rdzv_run *run, uint64_t number)
{
  for (uint32_t i = run->nhist; i > 0; i--)
    if (run->hist[i - 1].number == number)
      return &run->hist[i - 1];
  return NULL;
}

void rdzv_hist_end(struct rdzv_run *run, enum rdzv_end end, int counted, const char *why)
{
  if (run->nhist == 0)
    return;
  struct rdzv_hist *h = &run->hist[run->nhist - 1];
  if (h->end != RDZV_END_NONE)
    return;
  h->end = (uint8_t)end;
  h->counted = (uint8_t)(counted != 0);
  h->ended_ms = rdzv_wall_ms();
  why = why != NULL ? why : "";
  run->rv->bytes -= rdzv_why_cost(strlen(h->why));
  run->rv->enc -= strlen(h->why);
  mu_free(h->why);
  h->why = mu_strndup(why, strnlen(why, RDZV_WHY_MAX));
  run->rv->bytes += rdzv_why_cost(strlen(h->why));
  run->rv->enc += strlen(h->why);
}

/* ---------------------------------------------------------------------------------------------
 * Unhealthy nodes
 */

static struct rdzv_sick *sick_of(struct mu_hnode *h)
{
  return MU_CONTAINER_OF(h, struct rdzv_sick, h);
}

static void sick_free(struct mu_hnode *h, void *data)
{
  struct rdzv *rv = data;
  struct rdzv_sick *s = sick_of(h);
  size_t ol = strlen(s->output);
  rv->bytes -= rdzv_sick_cost(s->h.len) + rdzv_str_cost(ol);
  rv->enc -= SICK_ENC + s->h.len + ol;
  mu_free(s->output);
  mu_free(s);
}

int rdzv_sick_drop(struct rdzv_run *run, const char *node_id)
{
  struct mu_hnode *h = mu_htab_find(&run->sick, node_id, strlen(node_id));
  if (h == NULL)
    return 0;
  mu_htab_del(&run->sick, h);
  sick_free(h, run->rv);
  return 1;
}

void rdzv_sick_forget(struct rdzv_run *run, const char *node_id)
{
  if (rdzv_sick_drop(run, node_id))
    rdzv_changed(run, RDZV_CH_SICK, NULL, node_id);
}

struct rdzv_sick *rdzv_sick_set(struct rdzv_run *run, const char *id, char *output, uint64_t ttl_ms)
{
  struct rdzv *rv = run->rv;
  size_t idlen = strlen(id);
  struct mu_hnode *h = mu_htab_find(&run->sick, id, idlen);
  struct rdzv_sick *s = h != NULL ? sick_of(h) : NULL;
  int64_t now = rdzv_wall_ms();
  if (s == NULL) {
    s = mu_calloc(1, sizeof(*s) + idlen + 1);
    s->h.key = (char *)(s + 1);
    memcpy(s->h.key, id, idlen);
    mu_htab_add(&run->sick, &s->h, s->h.key, idlen);
    s->since_ms = now;
    rv->bytes += rdzv_sick_cost(idlen);
    rv->enc += SICK_ENC + idlen;
  } else {
    rv->bytes -= rdzv_str_cost(strlen(s->output));
    rv->enc -= strlen(s->output);
    mu_free(s->output);
  }
  s->output = output;
  rv->bytes += rdzv_str_cost(strlen(output));
  rv->enc += strlen(output);
  s->last_ms = now;
  s->checks++;
  s->expires = rdzv_now(rv) + ttl_ms;
  return s;
}

uint32_t rdzv_sick_count(struct rdzv_run *run)
{
  uint64_t now = rdzv_now(run->rv);
  struct mu_hnode *h = mu_htab_next(&run->sick, NULL);
  while (h != NULL) {
    struct mu_hnode *next = mu_htab_next(&run->sick, h);
    if (sick_of(h)->expires <= now) { /* its agent stopped reporting: gone or healthy */
      mu_htab_del(&run->sick, h);
      sick_free(h, run->rv);
    }
    h = next;
  }
  return (uint32_t)run->sick.n;
}

void rdzv_hist_clear(struct rdzv_run *run)
{
  for (uint32_t i = 0; i < run->nhist; i++)
    hist_free_one(run->rv, &run->hist[i]);
  if (run->hist != NULL)
    run->rv->bytes -= rdzv_hist_array_cost();
  mu_free(run->hist);
  run->hist = NULL;
  run->nhist = 0;
  run->hist_dropped = 0;
}

void rdzv_goodput_free(struct rdzv_run *run)
{
  rdzv_hist_clear(run);
  mu_htab_clear(&run->sick, sick_free, run->rv);
  mu_htab_release(&run->sick);
}

/* ---------------------------------------------------------------------------------------------
 * Reports
 */

/* started: one member more has its workers up; the round's start is its last member's. */
static void report_started(struct rdzv_run *run, struct rdzv_node *n, struct rdzv_hist *h)
{
  if (h == NULL || n->started_round == h->number)
    return;
  n->started_round = h->number;
  h->started_nodes++;
  if (h->started_nodes < h->nnodes || h->started_ms != 0)
    return;
  h->started_ms = rdzv_wall_ms();
  rdzv_note(run, "started",
            "round %" PRIu64 ": workers started on all %" PRIu32 " node%s, %" PRId64
            " ms after it closed",
            h->number, h->nnodes, h->nnodes == 1 ? "" : "s", h->started_ms - h->closed_ms);
  rdzv_changed(run, RDZV_CH_RUN, NULL, NULL);
}

/* progress: the round's (and maybe the run's) first progress. */
static void report_progress(struct rdzv_run *run, struct rdzv_hist *h)
{
  if (h == NULL || h->progress_ms != 0)
    return;
  h->progress_ms = rdzv_wall_ms();
  if (run->first_progress_ms == 0)
    run->first_progress_ms = h->progress_ms;
  rdzv_note(run, "progress", "round %" PRIu64 ": first progress %" PRId64 " ms after it closed",
            h->number, h->progress_ms - h->closed_ms);
  rdzv_changed(run, RDZV_CH_RUN, NULL, NULL);
}

/* failed/hung: the first report ends the active round, counted against the budget. Returns:
 * 1 when it counted. */
static int report_failure(struct rdzv_run *run, struct rdzv_node *n, uint64_t round,
                          enum rdzv_report_kind kind, const char *reason)
{
  struct mu_rules_view v;
  rdzv_rules_view(run, &v);
  uint64_t cur = run->round != NULL ? run->round->number : 0;
  uint64_t mine = run->round != NULL && n->round == run->round && !n->gone ? cur : 0;
  enum mu_rule rule = mu_rule_failure(&v, cur, round, mine);
  if (rule == MU_RULE_FAILURE_LATE || rule == MU_RULE_FAILURE_SCALE_UP)
    return 0; /* that round already ended (another node's report, a loss, a re-join), or it is
               * ending to take in waiting nodes: a worker that failed as its peers stopped for
               * the scale-up is no restart */
  char why[RDZV_WHY_MAX + 64];
  snprintf(why, sizeof(why), "node '%.*s': %.*s", 96, n->h.key, RDZV_WHY_MAX - 64,
           reason != NULL && reason[0] ? reason
           : kind == RDZV_REPORT_HUNG  ? "a worker hung"
                                       : "a worker failed");
  rdzv_mark_failed(run, n);
  char shut[RDZV_WHY_MAX + 128];
  snprintf(shut, sizeof(shut), "%s; no restart left (max_restarts %lld, %" PRIu32 " done)", why,
           (long long)run->max_restarts, run->restarts);
  /* partition.c: counted (or, with none left, the shut when the next round could close),
   * given back if a member of the round is lost first (MU_RULE_FAILURE_PARTITION) */
  rdzv_failure_counted(run, kind == RDZV_REPORT_HUNG ? RDZV_END_HUNG : RDZV_END_FAILED, why,
                       rule == MU_RULE_BUDGET_SPENT ? shut : NULL);
  return 1;
}

int rdzv_report(struct rdzv *rv, const char *run_id, const char *node_id, uint64_t round,
                enum rdzv_report_kind kind, const char *reason, struct rdzv_report_answer *out,
                struct mu_buf *err)
{
  memset(out, 0, sizeof(*out));
  struct rdzv_run *run = rdzv_find(rv, run_id);
  if (run == NULL)
    return RDZV_ENO_SUCH_RUN;
  if (rdzv_report_name(kind) == NULL) {
    mu_buf_puts(err, "event must be \"started\", \"progress\", \"failed\" or \"hung\"");
    return RDZV_EBAD_REQUEST;
  }
  if (run->state != RDZV_RUN_OPEN)
    return rdzv_ended_err(run, err);
  struct rdzv_node *n = rdzv_find_node(run, node_id);
  if (n == NULL) {
    mu_buf_printf(err,
                  "node '%s' is not in run '%s' (its lease expired or it was lost); join again",
                  node_id, run_id);
    return RDZV_ENOT_MEMBER;
  }
  struct rdzv_hist *h = hist_find(run, round);
  switch (kind) {
  case RDZV_REPORT_STARTED:
    report_started(run, n, h);
    break;
  case RDZV_REPORT_PROGRESS:
    report_progress(run, h);
    break;
  case RDZV_REPORT_FAILED:
  case RDZV_REPORT_HUNG:
    out->counted = report_failure(run, n, round, kind, reason);
    break;
  }
  out->state = rdzv_run_state_name(run->state);
  out->reason = run->reason != NULL ? run->reason : run->shut_why != NULL ? run->shut_why : "";
  out->round = run->round != NULL ? run->round->number : 0;
  out->round_state = rdzv_round_state_name(run->rstate);
  out->restart_count = run->restarts;
  out->max_restarts = run->max_restarts;
  return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Health
 */

/* The output as kept: at most RDZV_SICK_OUTPUT_MAX bytes (its end: what a check says last is
 * what matters), every byte that is not printable or a newline/tab replaced by '?'. */
static char *keep_output(const char *output)
{
  size_t n = output != NULL ? strlen(output) : 0;
  const char *p = n > RDZV_SICK_OUTPUT_MAX ? output + n - RDZV_SICK_OUTPUT_MAX : output;
  size_t len = n > RDZV_SICK_OUTPUT_MAX ? RDZV_SICK_OUTPUT_MAX : n;
  char *s = mu_malloc(len + 1);
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)p[i];
    s[i] = (char)(c == '\n' || c == '\t' || (c >= 0x20 && c < 0x7f) || c >= 0x80 ? c : '?');
  }
  s[len] = '\0';
  return s;
}

/* The first line of `s` for an event (at most 160 bytes). */
static int first_line_len(const char *s)
{
  size_t n = strcspn(s, "\n");
  return (int)(n > 160 ? 160 : n);
}

int rdzv_health(struct rdzv *rv, const char *run_id, const struct rdzv_join_req *req, int healthy,
                const char *output, uint64_t ttl_ms, uint32_t *unhealthy, struct mu_buf *err)
{
  struct rdzv_config cfg;
  struct rdzv_run *run = NULL;
  int rc = rdzv_join_checks(rv, run_id, req, &cfg, err);
  if (rc != 0)
    return rc;
  if (healthy) {
    run = rdzv_find(rv, run_id);
    if (run != NULL && run->state != RDZV_RUN_OPEN)
      return rdzv_ended_err(run, err);
    if (run != NULL)
      rdzv_sick_forget(run, req->node_id);
    if (unhealthy != NULL)
      *unhealthy = run != NULL ? rdzv_sick_count(run) : 0;
    return 0;
  }
  rc = rdzv_run_for(rv, run_id, req, &cfg, &run, err);
  if (rc != 0)
    return rc;
  char *kept = keep_output(output);
  size_t il = strlen(req->node_id), ol = strlen(kept);
  int known = mu_htab_find(&run->sick, req->node_id, il) != NULL;
  if (!known &&
      (rdzv_sick_count(run) >= RDZV_SICK_MAX ||
       rdzv_over_bytes(rv, rdzv_sick_cost(il) + rdzv_str_cost(ol), SICK_ENC + il + ol, err))) {
    if (run->sick.n >= RDZV_SICK_MAX)
      mu_buf_printf(err, "run '%s' already holds %d unhealthy nodes; fix them or start fewer",
                    run_id, RDZV_SICK_MAX);
    mu_free(kept);
    return RDZV_ETOO_MANY;
  }
  if (ttl_ms == 0)
    ttl_ms = 3 * (uint64_t)run->lease_ttl_ms;
  struct rdzv_sick *s = rdzv_sick_set(run, req->node_id, kept, ttl_ms);
  if (s->checks == 1)
    rdzv_note(run, "unhealthy", "node '%s' is unhealthy: %.*s", req->node_id,
              first_line_len(s->output), s->output);
  rdzv_changed(run, RDZV_CH_SICK, NULL, req->node_id);
  struct rdzv_node *n = rdzv_find_node(run, req->node_id);
  if (n != NULL && n->join == NULL)
    rdzv_node_remove(run, n, 1, RDZV_END_UNHEALTHY, "failed its health check");
  if (unhealthy != NULL)
    *unhealthy = rdzv_sick_count(run);
  return 0;
}

/* ---------------------------------------------------------------------------------------------
 * JSON for GET /v1/runs/{id}
 */

static void put_ms(struct mu_buf *b, const char *name, int64_t ms)
{
  if (ms > 0)
    mu_buf_printf(b, ",\"%s\":%" PRId64, name, ms);
  else
    mu_buf_printf(b, ",\"%s\":null", name);
}

static void put_hist(struct mu_buf *b, const struct rdzv_hist *h, const struct rdzv_hist *prev,
                     const struct mu_goodput_steps *steps)
{
  mu_buf_printf(b,
                "{\"round\":%" PRIu64 ",\"nnodes\":%" PRIu32 ",\"world_size\":%" PRIu64
                ",\"restart_count\":%" PRIu32,
                h->number, h->nnodes, h->world_size, h->restart_count);
  put_ms(b, "closed_ms", h->closed_ms);
  put_ms(b, "started_ms", h->started_ms);
  put_ms(b, "first_progress_ms", h->progress_ms);
  put_ms(b, "ended_ms", h->ended_ms);
  /* downtime: from the end of the round before (the loss) to this round's first progress */
  int64_t down = prev != NULL && prev->ended_ms > 0 && h->progress_ms > 0
                     ? h->progress_ms - prev->ended_ms
                     : 0;
  if (down > 0)
    mu_buf_printf(b, ",\"downtime_ms\":%" PRId64, down);
  else
    mu_buf_puts(b, ",\"downtime_ms\":null");
  mu_buf_printf(b, ",\"end\":\"%s\",\"counted\":%s,\"why\":", rdzv_end_name(h->end),
                h->counted ? "true" : "false");
  mu_json_str(b, h->why, strlen(h->why));
  mu_buf_puts(b, ",\"steps\":");
  mu_goodput_steps_json(steps, b);
  mu_buf_putc(b, '}');
}

/* ---------------------------------------------------------------------------------------------
 * What the agents share in the run's KV (launcher/agent/agent_progress.c): each node's steps,
 * `muster.progress.<round>.<node rank>`, and --hang-timeout auto's value in use
 */

#define PROGRESS_PFX "muster.progress."
#define AUTO_KEY "muster.hang_timeout_auto"

/* The kept rounds' steps, folded over their nodes' lines (one pass over the KV). */
struct mu_goodput_steps *rdzv_hist_steps(struct rdzv_run *run)
{
  if (run->nhist == 0)
    return NULL;
  struct mu_goodput_steps *st = mu_malloc(run->nhist * sizeof(*st));
  for (uint32_t i = 0; i < run->nhist; i++)
    st[i] = (struct mu_goodput_steps)MU_GOODPUT_STEPS_INIT;
  const size_t pl = strlen(PROGRESS_PFX);
  for (struct mu_hnode *h = mu_htab_next(&run->kv, NULL); h != NULL;
       h = mu_htab_next(&run->kv, h)) {
    const struct kv *k = MU_CONTAINER_OF(h, struct kv, h);
    char key[64];
    if (k->val == NULL || h->len <= pl || h->len >= sizeof(key) || memcmp(h->key, PROGRESS_PFX, pl))
      continue;
    memcpy(key, h->key, h->len);
    key[h->len] = '\0';
    char *end = NULL;
    unsigned long long r = strtoull(key + pl, &end, 10);
    if (end == key + pl || *end != '.') /* the round's counter, or no round */
      continue;
    for (uint32_t i = 0; i < run->nhist; i++)
      if (run->hist[i].number == r)
        mu_goodput_steps_fold(&st[i], k->val, k->len);
  }
  return st;
}

/* --hang-timeout auto's value in use (ms), 0 when no agent keeps one. */
static long long auto_timeout_ms(struct rdzv_run *run)
{
  struct mu_hnode *h = mu_htab_find(&run->kv, AUTO_KEY, strlen(AUTO_KEY));
  const struct kv *k = h != NULL ? MU_CONTAINER_OF(h, struct kv, h) : NULL;
  char v[24];
  if (k == NULL || k->val == NULL || k->len == 0 || k->len >= sizeof(v))
    return 0;
  memcpy(v, k->val, k->len);
  v[k->len] = '\0';
  long long t = strtoll(v, NULL, 10);
  return t > 0 ? t : 0;
}

void rdzv_run_goodput_json(const struct rdzv_run *crun, struct mu_buf *b)
{
  struct rdzv_run *run = (struct rdzv_run *)crun; /* forgets timed-out records: a cache */
  mu_buf_printf(b, ",\"restart_count\":%" PRIu32, run->restarts);
  if (run->max_restarts >= 0)
    mu_buf_printf(b, ",\"max_restarts\":%lld", (long long)run->max_restarts);
  else
    mu_buf_puts(b, ",\"max_restarts\":null");
  mu_buf_printf(b, ",\"standbys\":%" PRIu32 ",\"unhealthy\":[", rdzv_standbys(run));
  rdzv_sick_count(run);
  int first = 1;
  for (struct mu_hnode *h = mu_htab_next(&run->sick, NULL); h != NULL;
       h = mu_htab_next(&run->sick, h)) {
    const struct rdzv_sick *s = sick_of(h);
    mu_buf_puts(b, first ? "{\"node_id\":" : ",{\"node_id\":");
    first = 0;
    mu_json_str(b, s->h.key, s->h.len);
    mu_buf_puts(b, ",\"output\":");
    mu_json_str(b, s->output, strlen(s->output));
    mu_buf_printf(b, ",\"since_ms\":%" PRId64 ",\"last_ms\":%" PRId64 ",\"checks\":%" PRIu32 "}",
                  s->since_ms, s->last_ms, s->checks);
  }
  mu_buf_printf(b, "],\"timings\":{\"created_ms\":%" PRId64, run->created_ms);
  put_ms(b, "first_progress_ms", run->first_progress_ms);
  if (run->first_progress_ms > 0 && run->created_ms > 0)
    mu_buf_printf(b, ",\"time_to_first_step_ms\":%" PRId64,
                  run->first_progress_ms - run->created_ms);
  else
    mu_buf_puts(b, ",\"time_to_first_step_ms\":null");
  long long auto_ms = auto_timeout_ms(run);
  if (auto_ms > 0)
    mu_buf_printf(b, ",\"hang_timeout_auto_ms\":%lld", auto_ms);
  else
    mu_buf_puts(b, ",\"hang_timeout_auto_ms\":null");
  mu_buf_printf(b, ",\"rounds_dropped\":%" PRIu64 ",\"rounds\":[", run->hist_dropped);
  struct mu_goodput_steps *steps = rdzv_hist_steps(run);
  for (uint32_t i = 0; i < run->nhist; i++) {
    if (i > 0)
      mu_buf_putc(b, ',');
    put_hist(b, &run->hist[i], i > 0 ? &run->hist[i - 1] : NULL, &steps[i]);
  }
  mu_free(steps);
  mu_buf_puts(b, "]}");
}
