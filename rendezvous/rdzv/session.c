/* A node speaks only for itself (issue 33 item 7; docs/rendezvous.md, "Sessions"). The job
 * token lets a client into the run; the session says which node it is. A member gets one when
 * a round first takes it in, keeps it while the run holds it (re-joins, lost rounds, a restart
 * of musterd: codec.c keeps it with the member), and every call that names the node must carry
 * it. Sessions are never logged: no note, event or GET shows one; only the member's own join
 * answer carries it. */
#include <stdio.h>
#include <string.h>

#include "random.h"
#include "rdzv_int.h"

void rdzv_session_issue(struct rdzv_node *n)
{
  if (n->session[0] != '\0')
    return;
  /* 128 bits from the kernel; should it ever refuse, the node keeps none and is not checked
   * (as a member restored from a state written before sessions) rather than locked out */
  if (mu_random_hex(n->session, RDZV_SESSION_HEX / 2) != 0)
    n->session[0] = '\0';
}

/* The node `node_id` of `run` that a call may speak for: one the run holds, else (lost_too) a
 * member of its latest round that was lost (its success may still come: partition.c's
 * late_success()). A join never looks there: a lost node joins again as a newcomer. */
static const struct rdzv_node *speaker(struct rdzv_run *run, const char *node_id, int lost_too)
{
  const struct rdzv_node *n = rdzv_find_node(run, node_id);
  const struct rdzv_round *r = lost_too ? run->round : NULL;
  for (uint32_t i = 0; n == NULL && r != NULL && i < r->nnodes; i++)
    if (strcmp(r->members[i]->h.key, node_id) == 0)
      n = r->members[i];
  return n;
}

/* Compares in time that does not depend on where the strings differ. */
static int same_session(const char *want, const char *got)
{
  size_t n = strlen(want);
  if (strlen(got) != n)
    return 0;
  unsigned char d = 0;
  for (size_t i = 0; i < n; i++)
    d |= (unsigned char)(want[i] ^ got[i]);
  return d == 0;
}

int rdzv_session_check(struct rdzv *rv, const char *run_id, const char *node_id,
                       const char *session, int lost_too, struct mu_buf *err)
{
  struct rdzv_run *run = rdzv_find(rv, run_id);
  const struct rdzv_node *n =
      run != NULL && node_id != NULL ? speaker(run, node_id, lost_too) : NULL;
  if (n == NULL || n->session[0] == '\0')
    return 0;
  if (session != NULL && same_session(n->session, session))
    return 0;
  mu_buf_printf(err,
                "node '%.256s' of run '%.128s' speaks only for itself: %s; send header '%s' with "
                "the session of that node's own join answer (a node that lost it joins again "
                "once the run lets the node go: its lease expires); nothing was changed",
                node_id, run_id,
                session == NULL || *session == '\0' ? "no session was sent"
                                                    : "the session sent is not this node's",
                RDZV_SESSION_HEADER);
  rv->st.wrong_sessions++;
  return RDZV_EWRONG_SESSION;
}
