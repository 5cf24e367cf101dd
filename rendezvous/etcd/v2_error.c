/* The etcd v2 error table and writer. */
#include <stdio.h>
#include <string.h>

#include "event.h"
#include "v2_error.h"

struct v2_error_row {
  int code;
  const char *message;
  int status;
};

/* From etcd's v2error/error.go. Codes not listed in errorStatus there answer 400.
 * MUST be sorted by code (bsearch). */
static const struct v2_error_row rows[] = {
    {100, "Key not found", 404},
    {101, "Compare failed", 412},
    {102, "Not a file", 403},
    {103, "Reached the max number of peers in the cluster", 400},
    {104, "Not a directory", 400},
    {105, "Key already exists", 412},
    {106, "The prefix of given key is a keyword in etcd", 400},
    {107, "Root is read only", 400},
    {108, "Directory not empty", 403},
    {109, "Peer address has existed", 400},
    {110, "The request requires user authentication", 401},
    {200, "Value is Required in POST form", 400},
    {201, "PrevValue is Required in POST form", 400},
    {202, "The given TTL in POST form is not a number", 400},
    {203, "The given index in POST form is not a number", 400},
    {204, "Value or TTL is required in POST form", 400},
    {205, "The given timeout in POST form is not a number", 400},
    {206, "Name is required in POST form", 400},
    {207, "Index or value is required", 400},
    {208, "Index and value cannot both be specified", 400},
    {209, "Invalid field", 400},
    {210, "Invalid POST form", 400},
    {211, "Value provided on refresh", 400},
    {212, "A TTL must be provided on refresh", 400},
    {300, "Raft Internal Error", 500},
    {301, "During Leader Election", 500},
    {400, "watcher is cleared due to etcd recovery", 400},
    {401, "The event in requested index is outdated and cleared", 400},
    {402, "Standby Internal Error", 400},
    {403, "Invalid active size", 400},
    {404, "Standby remove delay", 400},
    {500, "Client Internal Error", 400},
    /* musterd's quotas (security/quota.h): no etcd v2 equivalent */
    {600, "Value over quota", 413},
    {601, "Quota exceeded", 429},
};

static const struct v2_error_row *find(int code)
{
  size_t lo = 0, hi = sizeof(rows) / sizeof(rows[0]);
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (rows[mid].code == code)
      return &rows[mid];
    if (rows[mid].code < code)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}

const char *v2_error_message(int code)
{
  const struct v2_error_row *r = find(code);
  return r ? r->message : "";
}

int v2_error_status(int code)
{
  const struct v2_error_row *r = find(code);
  return r ? r->status : 400;
}

void v2_error_reply(struct rv_req *req, int code, const char *cause, uint64_t index)
{
  v2_error_reply_status(req, code, v2_error_status(code), cause, index);
}

void v2_error_reply_status(struct rv_req *req, int code, int status, const char *cause,
                           uint64_t index)
{
  struct mu_buf b = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  char hdr[160];
  mu_buf_printf(&b, "{\"errorCode\":%d,\"message\":", code);
  const char *msg = v2_error_message(code);
  mu_json_str(&b, msg, strlen(msg));
  if (cause != NULL && cause[0] != '\0') {
    mu_buf_puts(&b, ",\"cause\":");
    mu_json_str(&b, cause, strlen(cause));
  }
  mu_buf_printf(&b, ",\"index\":%llu}\n", (unsigned long long)index);
  snprintf(hdr, sizeof(hdr), "X-Etcd-Cluster-Id: %s\r\nX-Etcd-Index: %llu\r\n", V2_CLUSTER_ID,
           (unsigned long long)index);
  rv_reply(req, status, "application/json", hdr, b.data, b.len);
  mu_buf_release(&b);
}
