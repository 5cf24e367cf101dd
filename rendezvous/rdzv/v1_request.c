/* Reading /v1 requests: the JSON body and its fields, query parameters, and the heartbeat's
 * fast path. Every *_or_reply answers the request with a 400 naming the field and what it must
 * be (docs/rendezvous.md), and returns -1 (or NULL). */
#include <inttypes.h>
#include <string.h>

#include "json.h"
#include "opts.h"
#include "v1_int.h"

/* Returns: 1 when the JSON text holds a raw NUL or the escape \u0000, else 0. */
static int has_nul_escape(const char *s, size_t n)
{
  if (memchr(s, '\0', n) != NULL)
    return 1;
  for (size_t i = 0; i + 5 < n; i++) {
    if (s[i] == '\\' && s[i + 1] == 'u' && s[i + 2] == '0' && s[i + 3] == '0' && s[i + 4] == '0' &&
        s[i + 5] == '0') {
      /* an escaped backslash before it ("\\\\u0000") is text, not an escape */
      size_t k = 0;
      while (k < i && s[i - 1 - k] == '\\')
        k++;
      if (k % 2 == 0)
        return 1;
    }
  }
  return 0;
}

cJSON *v1_body_or_reply(struct rv_req *req, int empty_ok)
{
  if (req->body_len == 0 && empty_ok)
    return cJSON_CreateObject();
  if (req->body_len == 0) {
    v1_bad_request(req, "the request needs a JSON object body (see docs/rendezvous.md)");
    return NULL;
  }
  if (has_nul_escape(req->body, req->body_len)) {
    /* a C string ends at a NUL: refused where it enters, never stored cut short */
    v1_bad_request(req, "the body holds a NUL character (\\u0000), which musterd refuses in ids "
                        "and values");
    return NULL;
  }
  cJSON *j = cJSON_ParseWithLength(req->body, req->body_len);
  if (j == NULL || !cJSON_IsObject(j)) {
    cJSON_Delete(j);
    v1_bad_request(req, "the body is not a JSON object; send e.g. {\"node_id\": \"n1\", ...}");
    return NULL;
  }
  return j;
}

/* Looks up field `name`, which must be `what` ("a string", "an integer"); null counts as
 * absent. Returns: 1 with *f, 0 when absent and optional, or -1 after answering 400 when absent
 * and required. */
static int field_or_reply(struct rv_req *req, const cJSON *j, const char *name, int required,
                          const char *what, const cJSON **f)
{
  *f = cJSON_GetObjectItemCaseSensitive(j, name);
  if (*f != NULL && !cJSON_IsNull(*f))
    return 1;
  if (!required)
    return 0;
  v1_bad_request(req, "field '%s' is missing; it must be %s", name, what);
  return -1;
}

int v1_field_str_or_reply(struct rv_req *req, const cJSON *j, const char *name, int required,
                          const char **out)
{
  const cJSON *f = NULL;
  *out = NULL;
  int rc = field_or_reply(req, j, name, required, "a string", &f);
  if (rc <= 0)
    return rc;
  if (!cJSON_IsString(f)) {
    v1_bad_request(req, "field '%s' must be a string", name);
    return -1;
  }
  *out = f->valuestring;
  return 0;
}

int v1_field_int_or_reply(struct rv_req *req, const cJSON *j, const char *name, int required,
                          int64_t min, int64_t max, int64_t def, int64_t *out)
{
  const cJSON *f = NULL;
  *out = def;
  int rc = field_or_reply(req, j, name, required, "an integer", &f);
  if (rc <= 0)
    return rc;
  if (!cJSON_IsNumber(f)) {
    v1_bad_request(req, "field '%s' must be an integer", name);
    return -1;
  }
  /* Range first: casting an out-of-range double to an integer is undefined. */
  double d = f->valuedouble;
  if (!(d >= (double)min && d <= (double)max)) {
    v1_bad_request(req, "field '%s' must be an integer between %" PRId64 " and %" PRId64 ", got %g",
                   name, min, max, d);
    return -1;
  }
  if (d != (double)(int64_t)d) {
    v1_bad_request(req, "field '%s' must be an integer, got %g", name, d);
    return -1;
  }
  *out = (int64_t)d;
  return 0;
}

int v1_field_bool_or_reply(struct rv_req *req, const cJSON *j, const char *name, int def, int *out)
{
  const cJSON *f = cJSON_GetObjectItemCaseSensitive(j, name);
  if (f != NULL && !cJSON_IsBool(f)) {
    v1_bad_request(req, "field '%s' must be true or false", name);
    return -1;
  }
  *out = mu_json_get_bool(j, name, def);
  return 0;
}

int v1_param_int_or_reply(struct rv_req *req, const char *name, int required, long min, long max,
                          long def, long *out)
{
  const char *s = rv_req_param(req, name);
  *out = def;
  if (s == NULL) {
    if (!required)
      return 0;
    v1_bad_request(req, "query parameter '%s' is missing; it must be an integer", name);
    return -1;
  }
  if (mu_parse_long(s, min, max, out) != 0) {
    v1_bad_request(req, "query parameter '%s' must be an integer between %ld and %ld, got '%s'",
                   name, min, max, s);
    return -1;
  }
  return 0;
}

/* Skips JSON blanks from p. Returns: the first other byte, or `end`. */
static const char *skip_ws(const char *p, const char *end)
{
  while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
    p++;
  return p;
}

/* The common heartbeat body, {"node_id":"ID"} (blanks allowed around the tokens) with a plain ID
 * (no escapes, no control bytes): one per node per lease_ttl_ms / 3, so read without building a
 * cJSON tree. Anything else goes through the JSON parser. */
int v1_heartbeat_fast_id(const struct rv_req *req, char *id, size_t cap)
{
  const char *p = req->body, *end = req->body + req->body_len;
  p = skip_ws(p, end);
  if (p == end || *p++ != '{')
    return 0;
  p = skip_ws(p, end);
  if ((size_t)(end - p) < 9 || memcmp(p, "\"node_id\"", 9) != 0)
    return 0;
  p = skip_ws(p + 9, end);
  if (p == end || *p++ != ':')
    return 0;
  p = skip_ws(p, end);
  if (p == end || *p++ != '"')
    return 0;
  const char *start = p;
  while (p < end && *p != '"' && *p != '\\' && (unsigned char)*p >= 0x20)
    p++;
  if (p == end || *p != '"' || (size_t)(p - start) >= cap)
    return 0;
  size_t n = (size_t)(p - start);
  p = skip_ws(p + 1, end);
  if (p == end || *p++ != '}')
    return 0;
  if (skip_ws(p, end) != end)
    return 0;
  memcpy(id, start, n);
  id[n] = '\0';
  return 1;
}
