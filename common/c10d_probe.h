/* Is a TCPStore endpoint a musterd? torchrun's c10d backend names its store HOST:PORT; muster's
 * agent can use that endpoint only when a musterd serves it (musterd --c10d-listen), through
 * musterd's own HTTP API. This asks the endpoint, in the TCPStore protocol every server of it
 * takes (torch 1.13's numbering, docs/c10d.md), for the reserved key musterd answers with its
 * client URL.
 */
#ifndef MU_C10D_PROBE_H
#define MU_C10D_PROBE_H

#include "buf.h"

/* The key musterd answers with its client URL (rendezvous/c10d/c10d.h's C10D_KEY_HTTP_URL). */
#define MU_C10D_HTTP_URL_KEY "musterd.http_url"

/* Sends a GET of MU_C10D_HTTP_URL_KEY to host:port and reads the answer within timeout_ms.
 * Returns: 0 with musterd's client URL ("http://10.0.0.5:2379") in `url`; MU_ENOENT when the
 * endpoint answered but is not a musterd (PyTorch's own store: torch 1.13's server closes the
 * connection on a key it lacks, 2.x's answers an empty value or, wanting its handshake first,
 * nothing: a timeout counts too); MU_ECONN when it cannot be reached. `err` gets what happened
 * in words (no fix: the caller knows its options).
 * Ownership: `url` and `err` are appended to. */
int mu_c10d_probe(const char *host, int port, int timeout_ms, struct mu_buf *url,
                  struct mu_buf *err);

/* Opens a TCP connection to host:port within timeout_ms and closes it. Returns: 0, or MU_ECONN
 * with what happened in `err` ("cannot connect to 127.0.0.1:1: Connection refused"). */
int mu_tcp_reachable(const char *host, int port, int timeout_ms, struct mu_buf *err);

#endif
