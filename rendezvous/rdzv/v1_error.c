/* The /v1 error writer: one reply shape, {"error":code,"message":...[,"reason":...]}, with the
 * code and HTTP status from the one error map (RDZV_ERR_MAP in rdzv.h), and the API's
 * sentences for the state machine's errors. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "v1_int.h"

/* A message that quotes the request (an id, a parameter) is cut here: the client's own bytes
 * are not echoed back without bound. */
#define V1_MESSAGE_MAX 768

void v1_error_reply(struct rv_req *req, int err, const char *message, const char *run_id,
                    const char *extra_headers)
{
  const char *code = rdzv_err_code(err);
  int status = rdzv_err_status(err);
  const char *reason = NULL;
  if (status == 410 && run_id != NULL) {
    struct v1 *v = rv_server_module_data(req->srv, "rdzv");
    struct rdzv_run *run = v != NULL && v->rv != NULL ? rdzv_find(v->rv, run_id) : NULL;
    if (run != NULL) {
      struct rdzv_run_info info;
      rdzv_run_info(run, &info);
      reason = info.reason;
    }
  }
  rv_reply_error(req, status, extra_headers, code, message && *message ? message : code, reason);
}

void v1_bad_request(struct rv_req *req, const char *fmt, ...)
{
  char msg[V1_MESSAGE_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  v1_error_reply(req, RDZV_EBAD_REQUEST, msg, NULL, NULL);
}

/* Is the server's /v1 state within one value of --v1-max-bytes (then a refused write is most
 * likely refused for that)? */
static int near_full(struct rv_req *req)
{
  struct v1 *v = rv_server_module_data(req->srv, "rdzv");
  uint64_t used = 0, max = 0;
  if (v == NULL || v->rv == NULL)
    return 0;
  rdzv_bytes(v->rv, &used, &max);
  return used + RDZV_VALUE_MAX + 4096 > max;
}

static void server_full(struct rv_req *req, char *msg, size_t size)
{
  struct v1 *v = rv_server_module_data(req->srv, "rdzv");
  uint64_t used = 0, max = 0;
  rdzv_bytes(v->rv, &used, &max);
  snprintf(msg, size,
           "musterd holds %llu bytes of /v1 state, near its bound of %llu (--v1-max-bytes): "
           "this write would pass it; finish or close runs, delete KV keys, or raise the bound",
           (unsigned long long)used, (unsigned long long)max);
}

void v1_fail(struct rv_req *req, int err, const char *run_id, const char *what)
{
  char msg[V1_MESSAGE_MAX];
  size_t size = sizeof(msg);
  switch (err) {
  case RDZV_ENO_SUCH_RUN:
    snprintf(msg, size, "no run '%s' (never joined, or finished and forgotten)", run_id);
    break;
  case RDZV_ENOT_MEMBER:
    snprintf(msg, size,
             "node '%s' is not a member of run '%s' (its lease expired or it left); join again",
             what, run_id);
    break;
  case RDZV_ENO_SUCH_KEY:
    snprintf(msg, size, "no key '%s' in run '%s'", what, run_id);
    break;
  case RDZV_ERUN_CLOSED:
    snprintf(msg, size, "run '%s' is closed; start a new run id to run again", run_id);
    break;
  case RDZV_ERUN_SHUT:
    snprintf(msg, size, "run '%s' was shut down; start a new run id to run again", run_id);
    break;
  case RDZV_ENOT_A_COUNTER:
    snprintf(msg, size, "key '%s' holds a value that is not a decimal integer; ?add=N needs one",
             what);
    break;
  case RDZV_ETOO_LARGE:
    if (near_full(req))
      server_full(req, msg, size);
    else
      snprintf(msg, size, "value too large: one value may hold %d bytes and a run %u bytes in all",
               RDZV_VALUE_MAX, RDZV_KV_BYTES_MAX);
    break;
  case RDZV_ETOO_MANY:
    if (near_full(req))
      server_full(req, msg, size);
    else
      snprintf(msg, size, "run '%s' holds %d keys, its limit; delete keys it no longer needs",
               run_id, RDZV_KV_KEYS_MAX);
    break;
  case RDZV_EBAD_REQUEST:
    snprintf(msg, size, "bad request for '%s' (key of 1-%d bytes; counter overflow?)", what,
             RDZV_KEY_MAX);
    break;
  default:
    snprintf(msg, size, "%s", rdzv_err_code(err));
  }
  v1_error_reply(req, err, msg, run_id, NULL);
}
