/* etcd v2 errors (etcd's v2error package): ONE table of {code, message, HTTP status} and ONE
 * writer. Handlers never write error JSON by hand.
 */
#ifndef MUSTERD_ETCD_V2_ERROR_H
#define MUSTERD_ETCD_V2_ERROR_H

#include <stdint.h>

#include "http.h"

/* The codes musterd uses (etcd's names). */
enum v2_ecode {
  V2_KEY_NOT_FOUND = 100,
  V2_TEST_FAILED = 101,
  V2_NOT_FILE = 102,
  V2_NOT_DIR = 104,
  V2_NODE_EXIST = 105,
  V2_ROOT_RONLY = 107,
  V2_DIR_NOT_EMPTY = 108,
  V2_UNAUTHORIZED = 110, /* etcd's auth: "The request requires user authentication" */
  V2_PREV_VALUE_REQUIRED = 201,
  V2_TTL_NAN = 202,
  V2_INDEX_NAN = 203,
  V2_INVALID_FIELD = 209,
  V2_INVALID_FORM = 210,
  V2_REFRESH_VALUE = 211,
  V2_REFRESH_TTL_REQUIRED = 212,
  V2_RAFT_INTERNAL = 300,
  V2_EVENT_INDEX_CLEARED = 401,
  V2_VALUE_OVER_QUOTA = 600, /* musterd's quotas: no etcd equivalent (413) */
  V2_QUOTA_EXCEEDED = 601,   /* (429) */
};

/* Returns: etcd's message for `code` ("Key not found"), or "" for an unknown code.
 * Ownership: static. */
const char *v2_error_message(int code);

/* Returns: the HTTP status etcd answers `code` with (default 400). */
int v2_error_status(int code);

/* Answers `req` with etcd's error JSON
 * {"errorCode":N,"message":"...","cause":"...","index":N}\n, X-Etcd-Index: index and the
 * cluster id header. `cause` may be NULL or "" (omitted). Finishes the request. */
void v2_error_reply(struct rv_req *req, int code, const char *cause, uint64_t index);

/* As v2_error_reply() with HTTP `status` instead of etcd's for `code` (a credential's scope:
 * errorCode 110 with 403 where etcd's auth answers 401). */
void v2_error_reply_status(struct rv_req *req, int code, int status, const char *cause,
                           uint64_t index);

/* The constant cluster id musterd reports in X-Etcd-Cluster-Id. */
#define V2_CLUSTER_ID "cdf818194e3a8c32"

#endif
