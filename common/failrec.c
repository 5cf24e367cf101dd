/* Failure records (failrec.h): encode, decode, find in a log, summarise. */
#include <ctype.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "muster/errno.h"

#include "alloc.h"
#include "failrec.h"
#include "json.h"

void mu_failrec_release(struct mu_failrec *r)
{
  if (r == NULL)
    return;
  mu_free(r->run_id);
  mu_free(r->role);
  mu_free(r->node);
  mu_free(r->host);
  mu_free(r->addr);
  mu_free(r->source);
  mu_free(r->exception);
  mu_free(r->details);
  mu_free(r->hung);
  memset(r, 0, sizeof(*r));
}

const char *mu_failrec_signame(int sig)
{
  static const struct {
    int sig;
    const char *name;
  } names[] = {{SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"},
               {SIGILL, "SIGILL"},   {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"},
               {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},   {SIGKILL, "SIGKILL"},
               {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
               {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"},
               {SIGXCPU, "SIGXCPU"}, {SIGXFSZ, "SIGXFSZ"}, {SIGSYS, "SIGSYS"}};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
    if (names[i].sig == sig)
      return names[i].name;
  return NULL;
}

static void add_str(cJSON *o, const char *k, const char *v)
{
  if (v != NULL)
    cJSON_AddStringToObject(o, k, v);
}

char *mu_failrec_to_json(const struct mu_failrec *r)
{
  cJSON *root = cJSON_CreateObject();
  cJSON *msg = cJSON_AddObjectToObject(root, "message");
  cJSON_AddStringToObject(msg, "message", r->exception ? r->exception : "");
  cJSON *extra = cJSON_AddObjectToObject(msg, "extraInfo");
  cJSON_AddStringToObject(extra, "py_callstack", r->details ? r->details : "");
  char ts[32];
  snprintf(ts, sizeof(ts), "%lld", r->time_ms / 1000);
  cJSON_AddStringToObject(extra, "timestamp", ts);
  cJSON *m = cJSON_AddObjectToObject(root, "muster");
  add_str(m, "run_id", r->run_id);
  cJSON_AddNumberToObject(m, "round", (double)r->round);
  cJSON_AddNumberToObject(m, "attempt", r->attempt);
  cJSON_AddNumberToObject(m, "restarts", r->restarts);
  cJSON_AddNumberToObject(m, "rank", r->rank);
  cJSON_AddNumberToObject(m, "local_rank", r->local_rank);
  cJSON_AddNumberToObject(m, "node_rank", r->node_rank);
  add_str(m, "role", r->role);
  add_str(m, "node", r->node);
  add_str(m, "host", r->host);
  add_str(m, "addr", r->addr);
  cJSON_AddNumberToObject(m, "pid", (double)r->pid);
  cJSON_AddNumberToObject(m, "exit_code", r->exit_code);
  cJSON_AddNumberToObject(m, "signal", r->signal);
  const char *sn = r->signal ? mu_failrec_signame(r->signal) : NULL;
  if (sn != NULL)
    cJSON_AddStringToObject(m, "signal_name", sn);
  cJSON_AddBoolToObject(m, "oom", r->oom != 0);
  cJSON_AddNumberToObject(m, "time_ms", (double)r->time_ms);
  add_str(m, "source", r->source);
  add_str(m, "exception", r->exception ? r->exception : "");
  if (r->hung != NULL) {
    cJSON_AddStringToObject(m, "hung", r->hung);
    cJSON_AddBoolToObject(m, "waiting", r->waiting != 0);
  }
  char *s = cJSON_PrintUnformatted(root);
  char *out = mu_strdup(s);
  cJSON_free(s);
  cJSON_Delete(root);
  return out;
}

static char *dup_or_empty(const char *s)
{
  return mu_strdup(s != NULL ? s : "");
}

static char *dup_or_null(const char *s)
{
  return s != NULL ? mu_strdup(s) : NULL;
}

int mu_failrec_parse(const char *text, size_t len, struct mu_failrec *out)
{
  memset(out, 0, sizeof(*out));
  out->rank = out->local_rank = out->node_rank = out->exit_code = -1;
  cJSON *root = cJSON_ParseWithLength(text, len);
  const cJSON *msg = cJSON_GetObjectItemCaseSensitive(root, "message");
  if (!cJSON_IsObject(root) || msg == NULL) {
    cJSON_Delete(root);
    return MU_EINVAL;
  }
  const char *message = NULL, *stack = NULL, *ts = NULL;
  if (cJSON_IsObject(msg)) {
    const cJSON *extra = cJSON_GetObjectItemCaseSensitive(msg, "extraInfo");
    message = mu_json_get_str(msg, "message");
    stack = mu_json_get_str(extra, "py_callstack");
    ts = mu_json_get_str(extra, "timestamp");
  } else if (cJSON_IsString(msg)) {
    message = msg->valuestring;
  }
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "muster");
  if (cJSON_IsObject(m)) {
    out->muster = 1;
    out->run_id = dup_or_null(mu_json_get_str(m, "run_id"));
    out->round = mu_json_get_long(m, "round", 0);
    out->attempt = (int)mu_json_get_long(m, "attempt", 0);
    out->restarts = (int)mu_json_get_long(m, "restarts", 0);
    out->rank = (int)mu_json_get_long(m, "rank", -1);
    out->local_rank = (int)mu_json_get_long(m, "local_rank", -1);
    out->node_rank = (int)mu_json_get_long(m, "node_rank", -1);
    out->role = dup_or_null(mu_json_get_str(m, "role"));
    out->node = dup_or_null(mu_json_get_str(m, "node"));
    out->host = dup_or_null(mu_json_get_str(m, "host"));
    out->addr = dup_or_null(mu_json_get_str(m, "addr"));
    out->pid = mu_json_get_long(m, "pid", 0);
    out->exit_code = (int)mu_json_get_long(m, "exit_code", -1);
    out->signal = (int)mu_json_get_long(m, "signal", 0);
    out->oom = mu_json_get_bool(m, "oom", 0);
    out->time_ms = (long long)mu_json_get_double(m, "time_ms", 0);
    out->source = dup_or_null(mu_json_get_str(m, "source"));
    out->exception = dup_or_null(mu_json_get_str(m, "exception"));
    out->hung = dup_or_null(mu_json_get_str(m, "hung"));
    out->waiting = mu_json_get_bool(m, "waiting", 0);
  } else {
    out->source = mu_strdup("error_file");
  }
  if (out->exception == NULL)
    out->exception = message != NULL ? mu_failrec_exception_line(message) : mu_strdup("");
  out->details = dup_or_empty(stack != NULL && stack[0] ? stack : message);
  if (out->time_ms == 0 && ts != NULL)
    out->time_ms = strtoll(ts, NULL, 10) * 1000;
  cJSON_Delete(root);
  return 0;
}

int mu_failrec_scan(const char *text, size_t len, struct mu_failrec *out)
{
  const char *end = text + len;
  const char *p = end;
  size_t tag = strlen(MU_FAILREC_TAG);
  /* Backwards, line by line: the last record wins. */
  while (p > text) {
    const char *eol = p;
    const char *bol = eol;
    while (bol > text && bol[-1] != '\n')
      bol--;
    p = bol > text ? bol - 1 : text;
    size_t n = (size_t)(eol - bol);
    const char *hit = NULL;
    for (const char *q = bol; q + tag <= eol; q++) {
      if (memcmp(q, MU_FAILREC_TAG, tag) == 0) {
        hit = q + tag;
        break;
      }
    }
    if (hit == NULL || n == 0)
      continue;
    size_t jl = (size_t)(eol - hit);
    while (jl > 0 && (hit[jl - 1] == '\n' || hit[jl - 1] == '\r'))
      jl--;
    if (mu_failrec_parse(hit, jl, out) == 0 && out->muster)
      return 0;
    mu_failrec_release(out);
  }
  return MU_ENOENT;
}

void mu_failrec_summary(const struct mu_failrec *r, struct mu_buf *out)
{
  mu_failrec_summary_replica(r, NULL, -1, out);
}

void mu_failrec_summary_replica(const struct mu_failrec *r, const char *role, long replica,
                                struct mu_buf *out)
{
  if (r->rank >= 0)
    mu_buf_printf(out, "rank %d", r->rank);
  else
    mu_buf_puts(out, "a worker");
  int named = role != NULL && replica >= 0;
  if (named || r->node_rank >= 0 || (r->host && r->host[0])) {
    mu_buf_puts(out, " (");
    if (named)
      mu_buf_printf(out, "replica %s/%ld%s", role, replica,
                    r->node_rank >= 0 || (r->host && r->host[0]) ? ", " : "");
    if (r->node_rank >= 0)
      mu_buf_printf(out, "node rank %d%s", r->node_rank, r->host && r->host[0] ? " " : "");
    if (r->host && r->host[0])
      mu_buf_printf(out, "on host %s", r->host);
    mu_buf_puts(out, ")");
  }
  if (r->hung != NULL) {
    mu_buf_printf(out, " hung: %s", r->hung);
    if (r->waiting)
      mu_buf_puts(out, ", waiting inside a library (another rank is the likely cause)");
  } else if (r->signal > 0) {
    const char *sn = mu_failrec_signame(r->signal);
    if (sn != NULL)
      mu_buf_printf(out, " was killed by %s", sn);
    else
      mu_buf_printf(out, " was killed by signal %d", r->signal);
    if (r->oom)
      mu_buf_puts(out, " (likely killed for memory: the cgroup counted an OOM kill)");
  } else if (r->exit_code >= 0) {
    mu_buf_printf(out, " exited with code %d", r->exit_code);
  } else {
    mu_buf_puts(out, " failed");
  }
  if (r->exception && r->exception[0])
    mu_buf_printf(out, ": %s", r->exception);
}

int mu_failrec_earlier(const struct mu_failrec *a, const struct mu_failrec *b)
{
  int aw = a->hung != NULL && a->waiting, bw = b->hung != NULL && b->waiting;
  if (aw != bw)
    return bw;
  if (a->time_ms == 0)
    return 0;
  if (b->time_ms == 0)
    return 1;
  return a->time_ms < b->time_ms;
}

/* "Name: text" or "Name" where Name is a dotted identifier (a Python exception's form). */
static int looks_like_exception(const char *s, size_t n)
{
  size_t i = 0;
  if (n == 0 || !(isalpha((unsigned char)s[0]) || s[0] == '_'))
    return 0;
  while (i < n && (isalnum((unsigned char)s[i]) || s[i] == '_' || s[i] == '.'))
    i++;
  if (i < n)
    return s[i] == ':';
  static const char *const ends[] = {"Error", "Exception", "Interrupt", "Exit"};
  for (size_t k = 0; k < sizeof(ends) / sizeof(ends[0]); k++) {
    size_t l = strlen(ends[k]);
    if (n >= l && memcmp(s + n - l, ends[k], l) == 0)
      return 1;
  }
  return 0;
}

char *mu_failrec_exception_line(const char *text)
{
  const char *best = NULL, *last = NULL;
  size_t best_n = 0, last_n = 0;
  const char *p = text;
  while (*p != '\0') {
    const char *nl = strchr(p, '\n');
    size_t n = nl ? (size_t)(nl - p) : strlen(p);
    size_t b = 0;
    while (b < n && isspace((unsigned char)p[b]))
      b++;
    size_t e = n;
    while (e > b && isspace((unsigned char)p[e - 1]))
      e--;
    if (e > b) {
      last = p + b;
      last_n = e - b;
      if (looks_like_exception(p + b, e - b)) {
        best = p + b;
        best_n = e - b;
      }
    }
    p += n;
    if (*p == '\n')
      p++;
  }
  if (best == NULL) {
    best = last;
    best_n = last_n;
  }
  char *out = mu_malloc(best_n + 1);
  if (best_n > 0)
    memcpy(out, best, best_n);
  out[best_n] = '\0';
  return out;
}

/* One `  File "PATH", line N in FUNC` line of a dump: PATH, N and FUNC. Returns: 1 when it is. */
static int frame_line(const char *p, size_t n, const char **path, size_t *pl, long *line,
                      const char **fn, size_t *fl)
{
  const char *e = p + n;
  while (p < e && *p == ' ')
    p++;
  if ((size_t)(e - p) < 7 || memcmp(p, "File \"", 6) != 0)
    return 0;
  p += 6;
  const char *q = memchr(p, '"', (size_t)(e - p));
  if (q == NULL || (size_t)(e - q) < 9 || memcmp(q, "\", line ", 8) != 0)
    return 0;
  *path = p;
  *pl = (size_t)(q - p);
  p = q + 8;
  char *end = NULL;
  *line = strtol(p, &end, 10);
  if (end == p || end >= e || (size_t)(e - end) < 4 || memcmp(end, " in ", 4) != 0)
    return 0;
  *fn = end + 4;
  *fl = (size_t)(e - *fn);
  while (*fl > 0 && isspace((unsigned char)(*fn)[*fl - 1]))
    (*fl)--;
  return 1;
}

static int is_library_path(const char *path, size_t n)
{
  static const char *const marks[] = {"/site-packages/", "/dist-packages/", "/lib/python"};
  for (size_t k = 0; k < sizeof(marks) / sizeof(marks[0]); k++) {
    size_t ml = strlen(marks[k]);
    for (size_t i = 0; i + ml <= n; i++)
      if (memcmp(path + i, marks[k], ml) == 0)
        return 1;
  }
  return 0;
}

char *mu_failrec_innermost_frame(const char *text, int *library)
{
  /* the first frame of each block, and which block is which */
  const char *best = NULL, *current = NULL, *first = NULL, *block_first = NULL;
  int in_block = 0, block_current = 0;
  for (const char *p = text; p != NULL && *p != '\0';) {
    const char *nl = strchr(p, '\n');
    size_t n = nl ? (size_t)(nl - p) : strlen(p);
    const char *path, *fn;
    size_t pl, fl;
    long line;
    if ((n >= 7 && memcmp(p, "Thread ", 7) == 0) ||
        (n >= 15 && memcmp(p, "Current thread ", 15) == 0)) {
      in_block = 1;
      block_current = p[0] == 'C';
      block_first = NULL;
    } else if (in_block && frame_line(p, n, &path, &pl, &line, &fn, &fl)) {
      if (block_first == NULL) {
        block_first = p;
        if (first == NULL)
          first = p;
        if (block_current && current == NULL)
          current = p;
      }
      if (best == NULL && fl == 8 && memcmp(fn, "<module>", 8) == 0)
        best = block_first;
    } else if (n > 0) {
      in_block = 0;
    }
    p = nl ? nl + 1 : NULL;
  }
  const char *pick = best ? best : current ? current : first;
  if (pick == NULL)
    return NULL;
  const char *path, *fn;
  size_t pl, fl;
  long line;
  const char *nl = strchr(pick, '\n');
  frame_line(pick, nl ? (size_t)(nl - pick) : strlen(pick), &path, &pl, &line, &fn, &fl);
  if (library != NULL)
    *library = is_library_path(path, pl);
  const char *base = path + pl;
  while (base > path && base[-1] != '/')
    base--;
  return mu_asprintf("%.*s:%ld in %.*s", (int)(path + pl - base), base, line, (int)fl, fn);
}
