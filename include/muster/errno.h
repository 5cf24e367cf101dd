/* muster error codes.
 *
 * Every function in muster that can fail returns 0 (or a count) on success and a negative
 * code on failure. The codes are generated from one X-macro list, as libuv does with
 * UV_ERRNO_MAP: the enum, mu_strerror() and mu_err_name() all come from MU_ERRNO_MAP.
 * A system errno passes through negated (-ENOENT), so the MU_ codes start far above them.
 *
 * Codes are never renumbered; a retired code keeps its slot with a comment.
 */
#ifndef MUSTER_ERRNO_H
#define MUSTER_ERRNO_H

#include "muster/export.h"

#define MU_ERRNO_BASE 4000

#define MU_ERRNO_MAP(XX)                                                                           \
  XX(EINVAL, "invalid argument")                                                                   \
  XX(ENOMEM, "out of memory")                                                                      \
  XX(E2BIG, "value over its size limit")                                                           \
  XX(ENOENT, "no such entry")                                                                      \
  XX(EEXIST, "already exists")                                                                     \
  XX(ENOTSUP, "operation not supported")                                                           \
  XX(EPROTO, "protocol error")                                                                     \
  XX(ETIMEDOUT, "timed out")                                                                       \
  XX(ECONN, "connection failed")                                                                   \
  XX(EHTTP, "unexpected HTTP status")                                                              \
  XX(ECLOSED, "run is closed")                                                                     \
  XX(ESHUT, "run was shut down")                                                                   \
  XX(EPARSE, "parse error")                                                                        \
  XX(EIO, "input/output error")                                                                    \
  XX(ECANCELED, "canceled")                                                                        \
  XX(EUSAGE, "usage error")                                                                        \
  XX(ESTATE, "invalid state")                                                                      \
  XX(EFULL, "run is full")                                                                         \
  XX(EAUTH, "not authorized")                                                                      \
  XX(ESESSION, "not this node's session")

/* Slot numbers, in list order (MU__IDX_EINVAL = 1, ...). */
enum mu__errno_idx {
  MU__IDX_ZERO = 0,
#define MU__XX(code, _) MU__IDX_##code,
  MU_ERRNO_MAP(MU__XX)
#undef MU__XX
      MU__IDX_END
};

/* The codes: MU_EINVAL = -4001, MU_ENOMEM = -4002, and so on. */
enum mu_errno {
  MU_OK = 0,
#define MU__XX(code, _) MU_##code = -(MU_ERRNO_BASE + MU__IDX_##code),
  MU_ERRNO_MAP(MU__XX)
#undef MU__XX
};

/* Returns a static message for `err`: one of ours, a negated errno, or "unknown error".
 * Ownership: the string is static; never free it. */
MU_EXTERN const char *mu_strerror(int err);

/* Returns the code's name without prefix ("EINVAL", "ENOENT"), or "UNKNOWN".
 * Ownership: static. */
MU_EXTERN const char *mu_err_name(int err);

#endif
