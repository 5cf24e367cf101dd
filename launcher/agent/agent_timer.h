/* The file-based watchdog of torch.distributed.elastic.timer (agent_timer.c): with
 * TORCHELASTIC_ENABLE_FILE_TIMER=1 in the agent's environment, each attempt makes a named pipe,
 * gives its path to the workers as TORCHELASTIC_TIMER_FILE, reads the requests torch's
 * FileTimerClient writes there and kills a worker whose timer expired (docs/agent.md, "The file
 * timer"). This header is the request parser, exported for the unit tests; the server itself is
 * agent_impl.h's.
 */
#ifndef MU_AGENT_TIMER_H
#define MU_AGENT_TIMER_H

#include <stddef.h>

#include "buf.h"

/* The longest request line, its newline excluded: PIPE_BUF (4096 on Linux), as torch's client
 * refuses to send more (a longer write to a pipe is not atomic). */
#define MU_TIMER_LINE_MAX 4096

/* One request of torch's FileTimerClient: a JSON object on one line,
 *   {"version": 1, "pid": 1234, "scope_id": "train.py#42", "expiration_time": 1.7e9,
 *    "signal": 9}
 * acquire: expiration_time is the Unix time (seconds) when the timer expires; release:
 * expiration_time -1 (any negative value) and signal 0. */
struct mu_timer_req {
  long pid;          /* the worker process that holds the timer */
  char *scope;       /* scope_id: the timer's name within the process */
  double expiration; /* Unix seconds; < 0: a release */
  int signal;        /* the signal that reaps the process; <= 0: do not reap */
};

/* Parses one request line of n bytes (no newline). Returns: 0 with *out filled (release it);
 * MU_EINVAL with the problem and its fix in err (bad JSON, a field missing or of the wrong
 * type, a pid or signal out of range); MU_E2BIG for a line over MU_TIMER_LINE_MAX. */
int mu_timer_parse(const char *line, size_t n, struct mu_timer_req *out, struct mu_buf *err);

/* Frees the request's strings and zeroes it. Accepts NULL. */
void mu_timer_req_release(struct mu_timer_req *r);

#endif
