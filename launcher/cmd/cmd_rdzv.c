/* muster rdzv ENDPOINT [RUN] [--json] [--watch]: what a rendezvous holds, from the command
 * line: every run (or one) with its state, round, members and, on musterd, the last run events;
 * --watch prints it again at every run event (musterd: the /v1/events long poll, as the status
 * page; etcd: a watch of the runs' keys). ENDPOINT is a musterd's HOST:PORT or an etcd v3
 * cluster, etcd-v3://H:P[,H:P...] (common/etcd3.c reads it in musterd's shape); it may also be
 * given as --endpoint, as -cfg rdzv= takes it.
 * Exit: 0; 1 when the endpoint cannot be read or the run does not exist; 2 bad command line.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "muster/mu.h"

#include "alloc.h"
#include "cmd_util.h"
#include "cmds.h"
#include "etcd3.h"
#include "http_client.h"
#include "json.h"
#include "log.h"
#include "opts.h"

static const char usage_text[] =
    "muster rdzv [--json] [--watch] [--token T] HOST:PORT|etcd-v3://H:P[,H:P...] [RUN]\n"
    "muster rdzv [options] --endpoint ENDPOINT [RUN]\n\n"
    "The runs of the musterd at HOST:PORT, or of an etcd v3 cluster (or one RUN): state, round,\n"
    "members, last events (musterd); --watch prints them again at every run event.\n"
    "TLS and etcd's user/password come from MUSTER_RDZV_CACERT, _CERT, _KEY, _USER, _PASSWORD";

struct conn {
  struct mu_http_client *c; /* a musterd, or */
  struct mu_etcd3 *e;       /* an etcd v3 cluster */
  const char *endpoint;
};

/* GETs path into a JSON tree. Returns: 0, 1 for a 404, or -1 with the error printed. */
static int get_json(struct conn *k, const char *path, long timeout_ms, cJSON **out)
{
  struct mu_http_response resp;
  mu_http_response_init(&resp, 64u << 20);
  int rc = mu_http_request(k->c, "GET", path, NULL, NULL, 0, (int)timeout_ms + 10000, &resp);
  *out = NULL;
  if (rc != 0) {
    mu_error("cannot read %s from '%s': %s; is a musterd listening there?", path, k->endpoint,
             mu_http_client_errmsg(k->c));
    rc = -1;
  } else if (resp.status == 404) {
    rc = 1;
  } else if (resp.status != 200 ||
             (*out = cJSON_ParseWithLength(resp.body.data ? resp.body.data : "", resp.body.len)) ==
                 NULL) {
    mu_error("'%s' answered %s with HTTP %d: %s", k->endpoint, path, resp.status,
             resp.status == 401 ? "it requires credentials (--token)"
                                : "not a musterd rendezvous API");
    rc = -1;
  }
  mu_http_response_release(&resp);
  return rc;
}

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

/* The run list (path NULL) or one run, from musterd or etcd, in musterd's JSON.
 * Returns: 0, 1 when there is no such run, or -1 with the error printed. */
static int get_runs(struct conn *k, const char *run, cJSON **out)
{
  if (k->e == NULL) {
    char *path = run != NULL ? mu_asprintf("/v1/runs/%s", run) : mu_strdup("/v1/runs");
    int rc = get_json(k, path, 0, out);
    mu_free(path);
    return rc;
  }
  int rc = run != NULL ? mu_etcd3_run_json(k->e, run, out) : mu_etcd3_runs_json(k->e, out);
  if (rc == MU_ENOENT)
    return 1;
  if (rc != 0) {
    mu_error("cannot read the runs from etcd at '%s': %s", k->endpoint, mu_etcd3_errmsg(k->e));
    return -1;
  }
  return 0;
}

/* One picture of the server (or of one run). Returns: 0, or an exit code. */
static int show(struct conn *k, const char *run, int json, const cJSON *ev)
{
  cJSON *runs = NULL, *out = cJSON_CreateArray();
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
    if (ev != NULL)
      cJSON_AddItemToObject(o, "events",
                            cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(ev, "events"), 1));
    char *s = cJSON_PrintUnformatted(o);
    printf("%s\n", s);
    cJSON_free(s);
    cJSON_Delete(o);
  } else {
    if (cJSON_GetArraySize(out) == 0)
      printf("no runs on %s\n", k->endpoint);
    cJSON_ArrayForEach(r, out) print_run(r);
    if (ev != NULL && cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(ev, "events")) > 0) {
      printf("events:\n");
      print_events(ev, run, 10);
    }
  }
  fflush(stdout);
out:
  cJSON_Delete(out);
  cJSON_Delete(runs);
  return rc;
}

/* muster rdzv on an etcd v3 cluster: no run events there; --watch waits for any change. */
static int rdzv_etcd(struct conn *k, const char *run, int json, int watch)
{
  char err[512], *shown = NULL;
  if (mu_etcd3_new(k->endpoint, &k->e, err, sizeof(err)) != 0) {
    mu_error("%s", err);
    return MU_EXIT_USAGE;
  }
  if (mu_etcd3_display(k->endpoint, &shown, err, sizeof(err)) == 0)
    k->endpoint = shown; /* the messages show the form the agent shows */
  int rc = 0;
  for (;;) {
    long long rev = 0;
    if (mu_etcd3_revision(k->e, &rev) != 0) {
      mu_error("cannot read etcd at '%s': %s", k->endpoint, mu_etcd3_errmsg(k->e));
      rc = 1;
      break;
    }
    rc = show(k, run, json, NULL);
    if (rc != 0 || !watch)
      break;
    int w;
    do
      w = mu_etcd3_wait_change(k->e, run, rev, 5000);
    while (w == MU_ETIMEDOUT);
    if (w != 0) {
      mu_error("watching etcd at '%s': %s", k->endpoint, mu_etcd3_errmsg(k->e));
      rc = 1;
      break;
    }
    if (!json)
      printf("\n");
  }
  mu_etcd3_free(k->e);
  mu_free(shown);
  return rc ? MU_EXIT_FAILED : MU_EXIT_OK;
}

int cmd_rdzv(int argc, char **argv)
{
  int json = 0, watch = 0;
  const char *token = NULL, *endpoint = NULL;
  struct mu_opt opts[] = {
      MU_OPT_BOOL(0, "json", &json, "print one JSON object (per event with --watch)"),
      MU_OPT_BOOL(0, "watch", &watch, "print again at every run event, until interrupted"),
      MU_OPT_STRING(0, "token", &token, "T", "a bearer token of musterd's --token-file"),
      MU_OPT_STRING(0, "endpoint", &endpoint, "E",
                    "the rendezvous: HOST:PORT of a musterd or etcd-v3://H:P[,H:P...]"),
      MU_OPT_END(),
  };
  int n = mu_opts_parse(opts, argc, argv, MU_OPTS_STOP_AT_NONOPT, usage_text);
  if (n == MU_OPTS_HELP)
    return MU_EXIT_OK;
  if (n < 0)
    return MU_EXIT_USAGE;
  int npos = endpoint != NULL ? 0 : 1;
  if (argc - n < npos || argc - n > npos + 1) {
    mu_error("muster rdzv needs HOST:PORT of a musterd or etcd-v3://H:P[,H:P...] of an etcd "
             "cluster, and optionally a run id: 'muster rdzv 127.0.0.1:2379 job8'");
    return MU_EXIT_USAGE;
  }
  if (endpoint == NULL)
    endpoint = argv[n++];
  const char *run = argc - n == 1 ? argv[n] : NULL;
  if (strncmp(endpoint, MU_ETCD3_SCHEME, strlen(MU_ETCD3_SCHEME)) == 0) {
    struct conn k = {NULL, NULL, endpoint};
    return rdzv_etcd(&k, run, json, watch);
  }
  const char *colon = strrchr(endpoint, ':');
  long port = 0;
  if (colon == NULL || colon == endpoint || mu_parse_long(colon + 1, 1, 65535, &port) != 0) {
    mu_error("'%s' is not HOST:PORT (e.g. 127.0.0.1:2379) or etcd-v3://HOST:PORT[,...]", endpoint);
    return MU_EXIT_USAGE;
  }
  char host[256];
  snprintf(host, sizeof(host), "%.*s", (int)(colon - endpoint), endpoint);
  struct conn k = {mu_http_client_new(host, (int)port), NULL, endpoint};
  if (token != NULL)
    mu_http_client_set_bearer(k.c, token);
  cJSON *ev = NULL;
  int rc = get_json(&k, "/v1/events?after=0&timeout_ms=0", 0, &ev) < 0;
  if (rc == 0)
    rc = show(&k, run, json, ev);
  while (rc == 0 && watch) {
    long after = mu_json_get_long(ev, "seq", 0);
    cJSON_Delete(ev);
    char path[96];
    snprintf(path, sizeof(path), "/v1/events?after=%ld&timeout_ms=25000", after);
    if (get_json(&k, path, 25000, &ev) < 0) {
      rc = 1;
      break;
    }
    if (cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(ev, "events")) == 0)
      continue;
    if (!json)
      printf("\n");
    rc = show(&k, run, json, ev);
  }
  cJSON_Delete(ev);
  mu_http_client_free(k.c);
  return rc ? MU_EXIT_FAILED : MU_EXIT_OK;
}
