/* What `muster agent` tells the rendezvous about its node beyond joining (docs/rendezvous.md,
 * "Goodput"): its workers started, made their first progress, failed or hung (the failures
 * count against the run's restart budget, once per round); its health check failed (the node
 * does not join, and shows as unhealthy with the check's output) or passed; and that its watches
 * stand for the node (a closed connection loses it at once). The same calls on every backend.
 * Not part of libmuster's API: the launcher links the client library statically.
 */
#ifndef MU_CLIENT_GOODPUT_H
#define MU_CLIENT_GOODPUT_H

#include "muster/client.h"

enum mu_report_event {
  MU_REPORT_STARTED = 1, /* this node's workers of the round started */
  MU_REPORT_PROGRESS,    /* their first progress (a heartbeat file touched, an output line) */
  MU_REPORT_FAILED,      /* a worker failed: ends the round, a restart of the run's budget */
  MU_REPORT_HUNG,        /* a worker made no progress for the hang timeout: the same */
  MU_REPORT_FAILING,     /* a hint, as soon as a worker fails, hangs or prints a Python
                          * traceback, that a failed or hung report may follow: a backend that
                          * must ask the other members whether they are alive (etcd v3) asks
                          * now and ends the round if one is gone, else writes nothing; musterd
                          * needs nothing (no request). Counts nothing. */
};
/* Returns: "started", "progress", "failed", "hung", "failing". Ownership: static. */
const char *mu_report_event_name(enum mu_report_event ev);

/* The rendezvous's answer to a report. */
struct mu_report_answer {
  char state[16];    /* the run's state after the report: "open", "closed", "shut" */
  char reason[512];  /* why it ended ("": open): "...; no restart left" when this report
                      * found the budget spent */
  int counted;       /* failed/hung: this report ended the round (a restart counted, or the
                      * run shut); 0: the round had already ended another way */
  int restart_count; /* the run's restarts so far */
  long max_restarts; /* its budget; -1 when it keeps none */
};

/* Member node_id reports ev about round `round` (reason: one line, may be NULL).
 * Returns: 0 with *out; MU_ENOENT (not a member any more, or no such run); MU_ECLOSED /
 * MU_ESHUT (the run had ended before); MU_EINVAL; a call's error. */
int mu_client_report(struct mu_client *c, const char *run_id, const char *node_id, long round,
                     enum mu_report_event ev, const char *reason, struct mu_report_answer *out);

/* The node o->node_id's health check: healthy 0 records it as unhealthy with the check's output
 * for ttl_ms (<= 0: the rendezvous's default), creating the run with o's configuration when it
 * does not exist (as a join would; a member of the run is lost at once); healthy 1 forgets the
 * record. *unhealthy (may be NULL) gets the run's unhealthy nodes.
 * Returns: 0; MU_ESTATE (another configuration); MU_ECLOSED / MU_ESHUT (the run ended: stop
 * checking); a call's error. */
int mu_client_health(struct mu_client *c, const char *run_id, const struct mu_join_opts *o,
                     int healthy, const char *output, long ttl_ms, int *unhealthy);

/* on = 1: this client's watches stand for the node (the agent's watcher): when the connection
 * of an open watch closes (the agent died), the rendezvous loses the node at once rather than
 * one lease later. The agent reports or leaves before it ends a watch on purpose. */
void mu_client_set_hold(struct mu_client *c, int on);

#endif
