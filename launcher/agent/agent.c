/* muster agent: configuration parsing, the worker environment, output prefixing and the
 * error-file reader. The run itself is in agent_run.c. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "muster/client.h"
#include "muster/errno.h"

#include "agent.h"
#include "alloc.h"
#include "fsutil.h"
#include "opts.h"

#define MAX_ERROR_FILE (1u << 20)

void mu_agent_config_init(struct mu_agent_config *cfg)
{
  memset(cfg, 0, sizeof(*cfg));
  cfg->min_nodes = 1;
  cfg->max_nodes = 1;
  cfg->nproc_per_node = 1;
  cfg->max_restarts = 0;
  cfg->monitor_interval_s = 0.1;
  cfg->role = "default";
  cfg->join_timeout_s = 600;
  cfg->last_call_s = -1;
  cfg->lease_ttl_s = -1;
  cfg->stop_grace_s = 5;
  cfg->health_check_timeout_s = 60;
  cfg->health_check_interval_s = 30;
  cfg->max_no_progress_restarts = 3; /* MU_NO_PROGRESS_RESTARTS_DEFAULT */
  cfg->out_fd = cfg->err_fd = -1;
  const char *ef = getenv("TORCHELASTIC_ERROR_FILE");
  cfg->error_file = ef != NULL && ef[0] != '\0' ? ef : NULL;
  cfg->static_rank = -1;
  cfg->signals_to_handle = "SIGTERM,SIGINT,SIGHUP,SIGQUIT";
}

long mu_agent_oom_kills(void)
{
  struct mu_buf cg = MU_BUF_INIT(65536), ev = MU_BUF_INIT(65536);
  long n = -1;
  char path[PATH_MAX];
  /* cgroup v2: the line "0::/path" of /proc/self/cgroup. */
  if (mu_read_file("/proc/self/cgroup", 65536, &cg) != 0)
    goto out;
  const char *line = strstr(mu_buf_str(&cg), "0::");
  if (line == NULL)
    goto out;
  line += 3;
  size_t len = strcspn(line, "\n");
  if (snprintf(path, sizeof(path), "/sys/fs/cgroup%.*s/memory.events", (int)len, line) >=
          (int)sizeof(path) ||
      mu_read_file(path, 65536, &ev) != 0)
    goto out;
  const char *k = strstr(mu_buf_str(&ev), "oom_kill ");
  if (k != NULL)
    n = strtol(k + 9, NULL, 10);
out:
  mu_buf_release(&cg);
  mu_buf_release(&ev);
  return n;
}

int mu_agent_parse_std(const char *spec, int local_rank, int *mask, struct mu_buf *err)
{
  long v = 0;
  *mask = 0;
  if (mu_parse_long(spec, 0, 3, &v) == 0) {
    *mask = (int)v;
    return 0;
  }
  /* "LOCAL_RANK:N,LOCAL_RANK:N" */
  const char *p = spec;
  while (*p != '\0') {
    char item[32];
    size_t n = strcspn(p, ",");
    if (n == 0 || n >= sizeof(item))
      goto bad;
    memcpy(item, p, n);
    item[n] = '\0';
    char *colon = strchr(item, ':');
    long r = 0;
    if (colon == NULL)
      goto bad;
    *colon = '\0';
    if (mu_parse_long(item, 0, 1 << 20, &r) != 0 || mu_parse_long(colon + 1, 0, 3, &v) != 0)
      goto bad;
    if (r == local_rank)
      *mask = (int)v;
    p += n;
    if (*p == ',')
      p++;
  }
  return 0;
bad:
  mu_buf_printf(err,
                "'%s': expected 0 (none), 1 (stdout), 2 (stderr), 3 (both), or LOCAL_RANK:N,... "
                "(e.g. 0:3,1:2)",
                spec);
  return MU_EINVAL;
}

int mu_agent_parse_ranks_filter(const char *spec, int local_rank, int *in, struct mu_buf *err)
{
  const char *p = spec;
  *in = 0;
  while (*p != '\0') {
    char item[16];
    long r = 0;
    size_t n = strcspn(p, ",");
    if (n == 0 || n >= sizeof(item))
      goto bad;
    memcpy(item, p, n);
    item[n] = '\0';
    if (mu_parse_long(item, 0, 1 << 20, &r) != 0)
      goto bad;
    *in |= r == local_rank;
    p += n;
    if (*p == ',' && *++p == '\0')
      goto bad;
  }
  if (p != spec)
    return 0;
bad:
  mu_buf_printf(err,
                "--local-ranks-filter '%s': expected local ranks separated by commas (e.g. "
                "--local-ranks-filter=0,1,2)",
                spec);
  return MU_EINVAL;
}

int mu_agent_console(const struct mu_agent_config *cfg, int local_rank, int stream)
{
  struct mu_buf ignore = MU_BUF_INIT(256);
  int redir = 0, tee = 0, shown = 1;
  if (cfg->ranks_filter != NULL && cfg->ranks_filter[0] != '\0')
    mu_agent_parse_ranks_filter(cfg->ranks_filter, local_rank, &shown, &ignore);
  if (!shown) {
    mu_buf_release(&ignore);
    return 0;
  }
  if (cfg->redirects_spec != NULL)
    mu_agent_parse_std(cfg->redirects_spec, local_rank, &redir, &ignore);
  if (cfg->tee_spec != NULL)
    mu_agent_parse_std(cfg->tee_spec, local_rank, &tee, &ignore);
  mu_buf_release(&ignore);
  if (cfg->log_dir == NULL || (tee & stream) || (cfg->tee_spec == NULL && cfg->tee))
    return 1;
  if (cfg->redirects_spec != NULL)
    return !(redir & stream);
  return 0;
}

int mu_agent_parse_nnodes(const char *s, int *min, int *max, struct mu_buf *err)
{
  long a = 0, b = 0;
  const char *colon = strchr(s, ':');
  char left[32];
  if (colon == NULL) {
    if (mu_parse_long(s, 1, 1000000, &a) != 0)
      goto bad;
    b = a;
  } else {
    size_t n = (size_t)(colon - s);
    if (n == 0 || n >= sizeof(left))
      goto bad;
    memcpy(left, s, n);
    left[n] = '\0';
    if (mu_parse_long(left, 1, 1000000, &a) != 0 || mu_parse_long(colon + 1, 1, 1000000, &b) != 0)
      goto bad;
    if (b < a) {
      mu_buf_printf(err, "--nnodes '%s': MAX (%ld) is below MIN (%ld); use MIN:MAX with MIN <= MAX",
                    s, b, a);
      return MU_EINVAL;
    }
  }
  *min = (int)a;
  *max = (int)b;
  return 0;
bad:
  mu_buf_printf(err, "--nnodes '%s': expected N or MIN:MAX with positive integers (e.g. 2:4)", s);
  return MU_EINVAL;
}

int mu_agent_parse_rdzv_conf(const char *s, struct mu_agent_config *cfg, struct mu_buf *err)
{
  /* torchrun keys that do not apply to musterd: accepted and ignored. */
  static const char *const ignored[] = {"is_host",
                                        "read_timeout",
                                        "timeout",
                                        "store_type",
                                        "use_libuv",
                                        "keep_alive_interval",
                                        "keep_alive_max_attempt",
                                        "rank"};
  char *copy = mu_strdup(s);
  int rc = 0;
  char *save = NULL;
  for (char *kv = strtok_r(copy, ",", &save); kv != NULL; kv = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(kv, '=');
    if (eq == NULL) {
      mu_buf_printf(err, "--rdzv-conf: '%s' is not KEY=VALUE", kv);
      rc = MU_EINVAL;
      goto out;
    }
    *eq = '\0';
    const char *key = kv, *val = eq + 1;
    double *dst = NULL;
    if (strcmp(key, "join_timeout") == 0)
      dst = &cfg->join_timeout_s;
    else if (strcmp(key, "last_call_timeout") == 0)
      dst = &cfg->last_call_s;
    else if (strcmp(key, "lease_ttl") == 0)
      dst = &cfg->lease_ttl_s;
    if (dst != NULL) {
      double d = 0;
      if (mu_parse_double(val, &d) != 0 || d < 0) {
        mu_buf_printf(err, "--rdzv-conf: %s=%s: expected seconds (a number >= 0)", key, val);
        rc = MU_EINVAL;
        goto out;
      }
      *dst = d;
      continue;
    }
    int known = 0;
    for (size_t i = 0; i < sizeof(ignored) / sizeof(ignored[0]); i++)
      known |= strcmp(ignored[i], key) == 0;
    if (!known) {
      mu_buf_printf(err,
                    "--rdzv-conf: unknown key '%s'; muster knows join_timeout, last_call_timeout "
                    "and lease_ttl",
                    key);
      rc = MU_EINVAL;
      goto out;
    }
  }
out:
  mu_free(copy);
  return rc;
}

/* The variables the agent owns; inherited values of these are dropped. */
static const char *const owned_vars[] = {"RANK",
                                         "LOCAL_RANK",
                                         "WORLD_SIZE",
                                         "LOCAL_WORLD_SIZE",
                                         "GROUP_RANK",
                                         "GROUP_WORLD_SIZE",
                                         "ROLE_RANK",
                                         "ROLE_WORLD_SIZE",
                                         "ROLE_NAME",
                                         "MASTER_ADDR",
                                         "MASTER_PORT",
                                         "TORCHELASTIC_RESTART_COUNT",
                                         "TORCHELASTIC_MAX_RESTARTS",
                                         "TORCHELASTIC_RUN_ID",
                                         "TORCHELASTIC_ERROR_FILE",
                                         "TORCHELASTIC_USE_AGENT_STORE",
                                         "TORCHELASTIC_SIGNALS_TO_HANDLE",
                                         "MUSTER_RDZV_ENDPOINT",
                                         "MUSTER_RUN_ID",
                                         "MUSTER_ROUND",
                                         "MUSTER_HEARTBEAT_FILE"};

static int is_owned(const char *kv)
{
  const char *eq = strchr(kv, '=');
  size_t n = eq ? (size_t)(eq - kv) : strlen(kv);
  for (size_t i = 0; i < sizeof(owned_vars) / sizeof(owned_vars[0]); i++)
    if (strlen(owned_vars[i]) == n && strncmp(owned_vars[i], kv, n) == 0)
      return 1;
  return 0;
}

void mu_agent_progress_env(const struct mu_agent_config *cfg, const char *heartbeat_file,
                           char *const *base, struct mu_strvec *out)
{
  mu_strvec_pushf(out, "MUSTER_HEARTBEAT_FILE=%s", heartbeat_file);
  if (cfg->hang_timeout_s <= 0)
    return;
  for (char *const *e = base; e != NULL && *e != NULL; e++)
    if (strncmp(*e, "PYTHONFAULTHANDLER=", 19) == 0)
      return;
  mu_strvec_push(out, "PYTHONFAULTHANDLER=1");
}

/* --virtual-local-rank: CUDA_VISIBLE_DEVICES names the worker's one device, the local_rank-th
 * of the agent's list (`cuda`, NULL when unset: device local_rank). */
static void push_one_device(struct mu_strvec *out, const char *cuda, int local_rank)
{
  if (cuda == NULL || cuda[0] == '\0') {
    mu_strvec_pushf(out, "CUDA_VISIBLE_DEVICES=%d", local_rank);
    return;
  }
  const char *p = cuda;
  for (int i = 0; i < local_rank && p != NULL; i++) {
    p = strchr(p, ',');
    p = p != NULL ? p + 1 : NULL;
  }
  if (p == NULL) { /* fewer devices than workers: the list as it is */
    mu_strvec_pushf(out, "CUDA_VISIBLE_DEVICES=%s", cuda);
    return;
  }
  mu_strvec_pushf(out, "CUDA_VISIBLE_DEVICES=%.*s", (int)strcspn(p, ","), p);
}

void mu_agent_worker_env(const struct mu_agent_config *cfg, const char *endpoint,
                         const struct mu_round *r, int local_rank, int restart_count,
                         const char *error_file, char *const *base, struct mu_strvec *out)
{
  int has_omp = 0, has_nccl = 0, has_torch_nccl = 0;
  const char *cuda = NULL;
  for (char *const *e = base; e != NULL && *e != NULL; e++) {
    if (is_owned(*e))
      continue;
    if (strncmp(*e, "OMP_NUM_THREADS=", 16) == 0)
      has_omp = 1;
    if (strncmp(*e, "NCCL_ASYNC_ERROR_HANDLING=", 26) == 0)
      has_nccl = 1;
    if (strncmp(*e, "TORCH_NCCL_ASYNC_ERROR_HANDLING=", 32) == 0)
      has_torch_nccl = 1;
    if (cfg->virtual_local_rank && strncmp(*e, "CUDA_VISIBLE_DEVICES=", 21) == 0) {
      cuda = *e + 21; /* replaced below by this worker's one device */
      continue;
    }
    mu_strvec_push(out, *e);
  }
  int rank = r->rank_offset + local_rank;
  mu_strvec_pushf(out, "RANK=%d", rank);
  mu_strvec_pushf(out, "LOCAL_RANK=%d", cfg->virtual_local_rank ? 0 : local_rank);
  if (cfg->virtual_local_rank)
    push_one_device(out, cuda, local_rank);
  mu_strvec_pushf(out, "WORLD_SIZE=%d", r->world_size);
  mu_strvec_pushf(out, "LOCAL_WORLD_SIZE=%d", r->local_world_size);
  mu_strvec_pushf(out, "GROUP_RANK=%d", r->node_rank);
  mu_strvec_pushf(out, "GROUP_WORLD_SIZE=%d", r->nnodes);
  /* One role per run: the role ranks are the global ranks. */
  mu_strvec_pushf(out, "ROLE_RANK=%d", rank);
  mu_strvec_pushf(out, "ROLE_WORLD_SIZE=%d", r->world_size);
  mu_strvec_pushf(out, "ROLE_NAME=%s", cfg->role);
  mu_strvec_pushf(out, "MASTER_ADDR=%s", r->master_addr ? r->master_addr : "127.0.0.1");
  mu_strvec_pushf(out, "MASTER_PORT=%d", r->master_port);
  mu_strvec_pushf(out, "TORCHELASTIC_RESTART_COUNT=%d", restart_count);
  mu_strvec_pushf(out, "TORCHELASTIC_MAX_RESTARTS=%ld", cfg->max_restarts);
  mu_strvec_pushf(out, "TORCHELASTIC_RUN_ID=%s", cfg->run_id);
  if (error_file != NULL)
    mu_strvec_pushf(out, "TORCHELASTIC_ERROR_FILE=%s", error_file);
  /* As torchrun: the agent store is torchrun's own (static rendezvous); muster has none, so
   * rank 0 of the workers hosts the TCPStore of init_method="env://" (docs/agent.md). */
  mu_strvec_push(out, "TORCHELASTIC_USE_AGENT_STORE=False");
  if (!has_nccl)
    mu_strvec_push(out, "NCCL_ASYNC_ERROR_HANDLING=1");
  if (!has_torch_nccl) /* torch >= 2.2's name of the same switch, as torchrun 2.x sets it */
    mu_strvec_push(out, "TORCH_NCCL_ASYNC_ERROR_HANDLING=1");
  mu_strvec_pushf(out, "TORCHELASTIC_SIGNALS_TO_HANDLE=%s",
                  cfg->signals_to_handle ? cfg->signals_to_handle
                                         : "SIGTERM,SIGINT,SIGHUP,SIGQUIT");
  /* torchrun sets OMP_NUM_THREADS=1 only when a node runs more than one worker. */
  if (!has_omp && r->local_world_size > 1)
    mu_strvec_push(out, "OMP_NUM_THREADS=1");
  mu_strvec_pushf(out, "MUSTER_RDZV_ENDPOINT=%s", endpoint);
  mu_strvec_pushf(out, "MUSTER_RUN_ID=%s", cfg->run_id);
  mu_strvec_pushf(out, "MUSTER_ROUND=%ld", r->round);
}

static void append_lines(const char *text, size_t max_lines, const char *indent, struct mu_buf *out)
{
  size_t lines = 0;
  const char *p = text;
  while (*p != '\0' && lines < max_lines) {
    const char *nl = strchr(p, '\n');
    size_t n = nl ? (size_t)(nl - p) : strlen(p);
    (void)mu_buf_printf(out, "%s%.*s\n", indent, (int)n, p);
    lines++;
    p += n;
    if (*p == '\n')
      p++;
  }
  if (*p != '\0')
    (void)mu_buf_printf(out, "%s...\n", indent);
}

int mu_agent_error_file_summary(const char *path, size_t max_lines, const char *indent,
                                struct mu_buf *out)
{
  struct mu_buf text = MU_BUF_INIT(MAX_ERROR_FILE);
  cJSON *j = NULL;
  int rc = mu_read_file(path, MAX_ERROR_FILE, &text);
  /* A file over the cap is summarised from its first MiB; an unreadable one is no file. */
  if ((rc != 0 && rc != MU_E2BIG) || text.len == 0) {
    rc = MU_ENOENT;
    goto out;
  }
  rc = 0;
  j = cJSON_ParseWithLength(text.data, text.len);
  const cJSON *msg = cJSON_GetObjectItemCaseSensitive(j, "message");
  if (cJSON_IsObject(msg)) {
    const cJSON *inner = cJSON_GetObjectItemCaseSensitive(msg, "message");
    const cJSON *extra = cJSON_GetObjectItemCaseSensitive(msg, "extraInfo");
    const cJSON *ts = cJSON_GetObjectItemCaseSensitive(extra, "timestamp");
    const cJSON *stack = cJSON_GetObjectItemCaseSensitive(extra, "py_callstack");
    if (cJSON_IsString(inner))
      append_lines(inner->valuestring, max_lines, indent, out);
    if (cJSON_IsString(ts))
      (void)mu_buf_printf(out, "%s(timestamp %s)\n", indent, ts->valuestring);
    if (!cJSON_IsString(inner) && cJSON_IsString(stack))
      append_lines(stack->valuestring, max_lines, indent, out);
  } else if (cJSON_IsString(msg)) {
    append_lines(msg->valuestring, max_lines, indent, out);
  } else {
    append_lines(text.data, max_lines, indent, out);
  }
out:
  cJSON_Delete(j);
  mu_buf_release(&text);
  return rc;
}
