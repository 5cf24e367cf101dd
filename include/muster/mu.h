/* muster public API: umbrella header. */
#ifndef MUSTER_MU_H
#define MUSTER_MU_H

#include "muster/errno.h"

#ifndef MU_VERSION
#define MU_VERSION "0.1.0"
#endif

/* Exit codes of both binaries (docs/exit-codes.md). */
enum mu_exit {
  MU_EXIT_OK = 0,     /* success */
  MU_EXIT_FAILED = 1, /* the job or the operation failed */
  MU_EXIT_USAGE = 2,  /* bad command line or configuration */
  MU_EXIT_LOOKUP = 3, /* muster status: the job could not be looked up (unknown id, or the
                       * scheduler failed); muster agent: cannot reach the rendezvous */
};

#endif
