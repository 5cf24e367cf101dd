/* mu_strerror() and mu_err_name(), generated from MU_ERRNO_MAP. */
#include <string.h>

#include "muster/errno.h"

const char *mu_strerror(int err)
{
  switch (err) {
  case 0:
    return "success";
#define MU__XX(code, msg)                                                                          \
  case MU_##code:                                                                                  \
    return msg;
    MU_ERRNO_MAP(MU__XX)
#undef MU__XX
  default:
    break;
  }
  if (err < 0 && err > -MU_ERRNO_BASE)
    return strerror(-err);
  return "unknown error";
}

const char *mu_err_name(int err)
{
  switch (err) {
  case 0:
    return "OK";
#define MU__XX(code, msg)                                                                          \
  case MU_##code:                                                                                  \
    return #code;
    MU_ERRNO_MAP(MU__XX)
#undef MU__XX
  default:
    return "UNKNOWN";
  }
}
