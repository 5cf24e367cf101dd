/* muster rdzv ENDPOINT [RUN] [--json] [--watch]: what a rendezvous holds, from the command
 * line: every run (or one) with its state, round, members and, on musterd, the last run events;
 * --watch prints it again at every change (musterd: its run events, as the status page; etcd:
 * a change of the runs' keys). ENDPOINT picks its backend from the client's table
 * (client/backends.h): a musterd's HOST:PORT, or etcd-v3://H:P[,H:P...] of an etcd v3 cluster;
 * it may also be given as --endpoint, as -cfg rdzv= takes it.
 * Exit: 0; 1 when the endpoint cannot be read or the run does not exist; 2 bad command line.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "muster/client.h"
#include "muster/mu.h"

#include "alloc.h"
#include "client/backends.h"
#include "cmd_util.h"
#include "cmds.h"
#include "json.h"
#include "log.h"
#include "opts.h"

#define WATCH_MS 5000 /* one wait of --watch: a server that went away is said within it */

static const char usage_head[] =
    "muster rdzv [--json] [--watch] [--token T] ENDPOINT [RUN]\n"
    "muster rdzv [options] --endpoint ENDPOINT [RUN]\n\n"
    "The runs of a rendezvous (or one RUN): state, round, members, last events, and torchrun's\n"
    "c10d runs on its TCPStore listener (musterd); --watch prints them again at every change.\n"
    "ENDPOINT, by rendezvous backend:\n  ";
static const char usage_tail[] =
    "\nTLS and etcd's user/password come from MUSTER_RDZV_CACERT, _CERT, _KEY, _USER, _PASSWORD";

struct conn {
  struct mu_client *c;
  const struct mu_client_backend *b;
  const char *endpoint; /* as messages show it */
};

static const char *str(const cJSON *o, const char *k)
{
  const char *s = mu_json_get_str(o, k);
  return s ? s : "";
}

static void print_run(const cJSON *r)
{
  printf("run %s: %s, round %ld %s, %ld of %ld:%ld nodes, %ld waiting\n", str(r, "run_id"),
         str(r, "state"), mu_json_get_long(r, "round", 0), str(r, "round_state"),
         mu_json_get_long(r, "nnodes", 0), mu_json_get_long(r, "min_nodes", 0),
         mu_json_get_long(r, "max_nodes", 0), mu_json_get_long(r, "waiting", 0));
  if (str(r, "reason")[0])
    printf("  reason: %s\n", str(r, "reason"));
  mu_cli_goodput_print(r, "  ", 0);
  const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(r, "config");
  if (cfg != NULL)
    printf("  lease %.1f s, last call %.1f s, join timeout %.0f s\n",
           mu_json_get_double(cfg, "lease_ttl_ms", 0) / 1000,
           mu_json_get_double(cfg, "last_call_ms", 0) / 1000,
           mu_json_get_double(cfg, "join_timeout_ms", 0) / 1000);
  const cJSON *m;
  cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(r, "members"))
  {
    long off = mu_json_get_long(m, "rank_offset", 0),
         lws = mu_json_get_long(m, "local_world_size", 0);
    printf("  node rank %ld  %s  %s  %ld workers (ranks %ld-%ld)\n",
           mu_json_get_long(m, "node_rank", 0), str(m, "node_id"), str(m, "addr"), lws, off,
           off + lws - 1);
  }
  const cJSON *l;
  cJSON_ArrayForEach(l, cJSON_GetObjectItemCaseSensitive(r, "leases"))
  {
    if (strcmp(str(l, "state"), "lease") == 0)
      printf("  node %s: lease, last seen %.1f s ago\n", str(l, "node_id"),
             mu_json_get_double(l, "last_seen_ms_ago", 0) / 1000);
    else
      printf("  node %s: %s\n", str(l, "node_id"),
             strcmp(str(l, "state"), "watching") == 0 ? "live (its watch holds the lease)"
                                                      : "joining");
  }
  const cJSON *b;
  cJSON_ArrayForEach(b, cJSON_GetObjectItemCaseSensitive(r, "barriers"))
  {
    printf("  barrier %s: %d of %ld arrived", str(b, "name"),
           cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(b, "arrived")),
           mu_json_get_long(b, "count", 0));
    const cJSON *id;
    int first = 1;
    cJSON_ArrayForEach(id, cJSON_GetObjectItemCaseSensitive(b, "arrived"))
    {
      printf("%s%s", first ? " (" : ", ", cJSON_IsString(id) ? id->valuestring : "");
      first = 0;
    }
    printf("%s\n", first ? "" : ")");
  }
}

static void print_events(const cJSON *ev, const char *run, long limit)
{
  const cJSON *list = cJSON_GetObjectItemCaseSensitive(ev, "events");
  long n = cJSON_GetArraySize(list), i = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, list)
  {
    if (i++ < n - limit || (run != NULL && strcmp(str(e, "run_id"), run) != 0))
      continue;
    time_t t = (time_t)(mu_json_get_double(e, "time_ms", 0) / 1000);
    struct tm tm;
    char when[32];
    strftime(when, sizeof(when), "%H:%M:%S", localtime_r(&t, &tm));
    printf("  %s %-6s %s: %s\n", when, str(e, "kind"), str(e, "run_id"), str(e, "text"));
  }
}

/* The torchrun runs on a musterd's TCPStore listener (GET /v1/c10d, or /v1/c10d/RUN): NULL on a
 * backend or a musterd that keeps none. */
static cJSON *get_c10d(struct conn *k, const char *run)
{
  cJSON *o = NULL;
  if (mu_client_c10d_json(k->c, run, &o) != 0) {
    cJSON_Delete(o);
    o = NULL;
  }
  return o;
}

/* torchrun --rdzv_backend c10d runs on musterd's TCPStore listener (docs/c10d.md). */
static void print_c10d(const cJSON *c, const char *run)
{
  const cJSON *r;
  if (run != NULL) {
    printf("c10d run %s: %d keys\n", run,
           cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(c, "keys")));
    cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(c, "keys"))
    {
      printf("  %s  %ld bytes", str(r, "key"), mu_json_get_long(r, "bytes", 0));
      if (mu_json_get_long(r, "round", -1) >= 0)
        printf(", round %ld", mu_json_get_long(r, "round", -1));
      printf("\n");
    }
    return;
  }
  cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(c, "runs"))
  {
    long round = mu_json_get_long(r, "round", -1);
    printf("c10d run %s: ", str(r, "run_id"));
    if (round >= 0)
      printf("round %ld, ", round);
    printf("%ld keys (%ld bytes)%s\n", mu_json_get_long(r, "keys", 0),
           mu_json_get_long(r, "bytes", 0),
           mu_json_get_bool(r, "state", 0) ? "" : ", no state key");
  }
  if (mu_json_get_long(c, "other_keys", 0) > 0)
    printf("c10d: %ld keys of no torchrun run\n", mu_json_get_long(c, "other_keys", 0));
}

/* The run list (run NULL) or one run, in musterd's JSON.
 * Returns: 0, 1 when there is no such run, or -1 with the error printed. */
static int get_runs(struct conn *k, const char *run, cJSON **out)
{
  int rc = mu_client_runs_json(k->c, run, out);
  if (rc == MU_ENOENT && run != NULL)
    return 1;
  if (rc != 0) {
    mu_error("cannot read the runs from %s at '%s': %s", k->b->service, k->endpoint,
             mu_client_errmsg(k->c));
    return -1;
  }
  return 0;
}

/* One picture of the server (or of one run). Returns: 0, or an exit code. */
static int show(struct conn *k, const char *run, int json, const cJSON *ev)
{
  cJSON *runs = NULL, *out = cJSON_CreateArray(), *c10d = get_c10d(k, run);
  int rc = 0;
  if (run != NULL) {
    runs = cJSON_CreateObject();
    cJSON *one = cJSON_AddArrayToObject(runs, "runs");
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "run_id", run);
    cJSON_AddItemToArray(one, r);
  } else if (get_runs(k, NULL, &runs) != 0) {
    rc = 1;
    goto out;
  }
  const cJSON *r;
  cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(runs, "runs"))
  {
    cJSON *full = NULL;
    int g = get_runs(k, str(r, "run_id"), &full);
    if (g == 1 && run != NULL && c10d != NULL)
      continue; /* a torchrun run on the TCPStore listener only */
    if (g == 1 && run != NULL) {
      mu_error("'%s' has no run '%s' (see 'muster rdzv %s')", k->endpoint, run, k->endpoint);
      rc = 1;
      goto out;
    }
    if (g < 0) {
      rc = 1;
      goto out;
    }
    if (full != NULL)
      cJSON_AddItemToArray(out, full);
  }
  if (json) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "runs", out);
    out = NULL;
    if (c10d != NULL) {
      cJSON_AddItemToObject(o, "c10d", c10d);
      c10d = NULL;
    }
    if (ev != NULL)
      cJSON_AddItemToObject(o, "events",
                            cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(ev, "events"), 1));
    char *s = cJSON_PrintUnformatted(o);
    printf("%s\n", s);
    cJSON_free(s);
    cJSON_Delete(o);
  } else {
    if (cJSON_GetArraySize(out) == 0 &&
        (c10d == NULL || (cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(c10d, "runs")) == 0 &&
                          mu_json_get_long(c10d, "other_keys", 0) == 0 && run == NULL)))
      printf("no runs on %s\n", k->endpoint);
    cJSON_ArrayForEach(r, out) print_run(r);
    if (c10d != NULL)
      print_c10d(c10d, run);
    if (ev != NULL && cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(ev, "events")) > 0) {
      printf("events:\n");
      print_events(ev, run, 10);
    }
  }
  fflush(stdout);
out:
  cJSON_Delete(out);
  cJSON_Delete(runs);
  cJSON_Delete(c10d);
  return rc;
}

/* Shows the runs, then with --watch again at every change. Returns: an exit code. */
static int rdzv_show(struct conn *k, const char *run, int json, int watch)
{
  long long cursor = -1;
  cJSON *ev = NULL;
  int rc = mu_client_changes(k->c, run, &cursor, 0, &ev);
  if (rc != 0)
    mu_error("cannot read %s at '%s': %s", k->b->service, k->endpoint, mu_client_errmsg(k->c));
  else
    rc = show(k, run, json, ev);
  while (rc == 0 && watch) {
    cJSON_Delete(ev);
    ev = NULL;
    int w = mu_client_changes(k->c, run, &cursor, WATCH_MS, &ev);
    if (w == MU_ETIMEDOUT)
      continue;
    if (w != 0) {
      mu_error("watching %s at '%s': %s", k->b->service, k->endpoint, mu_client_errmsg(k->c));
      rc = 1;
      break;
    }
    if (!json)
      printf("\n");
    rc = show(k, run, json, ev);
  }
  cJSON_Delete(ev);
  return rc ? MU_EXIT_FAILED : MU_EXIT_OK;
}

/* Opens the client of the backend the endpoint picks (the client's table).
 * Returns: 0, or an exit code after printing the error. */
static int open_endpoint(struct conn *k, const char *endpoint, const char *forms, char **shown)
{
  struct mu_buf err = MU_BUF_INIT(SIZE_MAX);
  int rc = 0;
  k->b = mu_client_backend_of(endpoint);
  if (mu_client_backend_endpoint(k->b, endpoint, shown, &err) != 0 ||
      mu_client_open(k->b, endpoint, &k->c, &err) != 0) {
    mu_error("%s; give %s", mu_buf_str(&err), forms);
    rc = MU_EXIT_USAGE;
  }
  k->endpoint = *shown; /* the messages show the form the agent shows */
  mu_buf_release(&err);
  return rc;
}

int cmd_rdzv(int argc, char **argv)
{
  int json = 0, watch = 0;
  const char *token = NULL, *endpoint = NULL;
  struct mu_buf forms = MU_BUF_INIT(SIZE_MAX), usage = MU_BUF_INIT(SIZE_MAX);
  mu_buf_puts(&usage, usage_head);
  mu_client_backend_forms(&usage, "\n  ");
  mu_buf_puts(&usage, usage_tail);
  mu_client_backend_forms(&forms, ", or ");
  struct mu_opt opts[] = {
      MU_OPT_BOOL(0, "json", &json, "print one JSON object (per event with --watch)"),
      MU_OPT_BOOL(0, "watch", &watch, "print again at every run event, until interrupted"),
      MU_OPT_STRING(0, "token", &token, "T",
                    "a bearer token of musterd's --token-file (default: $MUSTER_RDZV_TOKEN, "
                    "else the first line of $MUSTER_RDZV_TOKEN_FILE)"),
      MU_OPT_STRING(0, "endpoint", &endpoint, "E", "the rendezvous (ENDPOINT above)"),
      MU_OPT_END(),
  };
  struct conn k = {NULL, NULL, NULL};
  char *shown = NULL;
  int rc = MU_EXIT_USAGE,
      n = mu_opts_parse(opts, argc, argv, MU_OPTS_STOP_AT_NONOPT, mu_buf_str(&usage));
  if (n == MU_OPTS_HELP)
    rc = MU_EXIT_OK;
  if (n < 0)
    goto out;
  int npos = endpoint != NULL ? 0 : 1;
  if (argc - n < npos || argc - n > npos + 1) {
    mu_error("muster rdzv needs the rendezvous, %s, and optionally a run id: 'muster rdzv "
             "127.0.0.1:2379 job8'",
             mu_buf_str(&forms));
    goto out;
  }
  if (endpoint == NULL)
    endpoint = argv[n++];
  const char *run = argc - n == 1 ? argv[n] : NULL;
  if (open_endpoint(&k, endpoint, mu_buf_str(&forms), &shown) != 0)
    goto out;
  if (token != NULL)
    mu_client_set_token(k.c, token);
  rc = rdzv_show(&k, run, json, watch);
out:
  mu_client_free(k.c);
  mu_free(shown);
  mu_buf_release(&forms);
  mu_buf_release(&usage);
  return rc;
}
