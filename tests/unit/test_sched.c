/* The generic scheduler code (launcher/sched/sched.c): the job's root cause among the failure
 * records of its replicas, whatever order the backend reads them in. */
#include <stdint.h>
#include <string.h>

#include "alloc.h"
#include "failrec.h"
#include "sched.h"
#include "task.h"

/* The record a failed rank's agent writes: rank, exit code, exception, end time (0: unknown). */
static char *record(int rank, int code, const char *exception, long long time_ms)
{
  struct mu_failrec r;
  memset(&r, 0, sizeof(r));
  r.rank = rank;
  r.local_rank = 0;
  r.node_rank = rank / 2;
  r.exit_code = code;
  r.time_ms = time_ms;
  r.exception = (char *)exception;
  r.details = (char *)"";
  r.source = (char *)"stderr";
  return mu_failrec_to_json(&r);
}

/* Adds the records in the order given to a status of n replicas (record i to replica i) and
 * returns the root cause's exception word. Ownership: the caller frees. */
static char *root_cause_of(char **recs, size_t n, long long *ms)
{
  struct mu_app_status st;
  memset(&st, 0, sizeof(st));
  st.replicas = mu_calloc(n, sizeof(*st.replicas));
  st.nreplicas = n;
  for (size_t i = 0; i < n; i++)
    mu_app_status_add_failure(&st, i, recs[i], strlen(recs[i]));
  ASSERT_NOT_NULL(st.root_cause);
  const char *colon = strrchr(st.root_cause, ':');
  ASSERT_NOT_NULL(colon);
  char *word = mu_strdup(colon + 2);
  *ms = st.root_cause_ms;
  mu_app_status_release(&st);
  return word;
}

TEST(sched__root_cause_is_the_earliest_failure)
{
  char *first = record(2, 3, "FirstError", 1700000000100LL);
  char *second = record(1, 4, "SecondError", 1700000000900LL);
  char *third = record(3, 5, "ThirdError", 1700000005000LL);
  char *untimed = record(0, 6, "UntimedError", 0);
  long long ms = 0;
  char *got;

  /* In time order, and out of it: the earliest wins wherever it comes. */
  char *in_order[] = {first, second, third};
  got = root_cause_of(in_order, 3, &ms);
  ASSERT_STR_EQ(got, "FirstError");
  ASSERT_EQ(ms, 1700000000100LL);
  mu_free(got);
  char *reversed[] = {third, second, first};
  got = root_cause_of(reversed, 3, &ms);
  ASSERT_STR_EQ(got, "FirstError");
  ASSERT_EQ(ms, 1700000000100LL);
  mu_free(got);
  char *middle[] = {second, first, third};
  got = root_cause_of(middle, 3, &ms);
  ASSERT_STR_EQ(got, "FirstError");
  mu_free(got);

  /* A record without a time is later than any with one, before or after it. */
  char *untimed_first[] = {untimed, second};
  got = root_cause_of(untimed_first, 2, &ms);
  ASSERT_STR_EQ(got, "SecondError");
  mu_free(got);
  char *untimed_last[] = {second, untimed};
  got = root_cause_of(untimed_last, 2, &ms);
  ASSERT_STR_EQ(got, "SecondError");
  mu_free(got);
  /* ... and the only one is the root cause. */
  char *alone[] = {untimed};
  got = root_cause_of(alone, 1, &ms);
  ASSERT_STR_EQ(got, "UntimedError");
  ASSERT_EQ(ms, 0);
  mu_free(got);

  mu_free(first);
  mu_free(second);
  mu_free(third);
  mu_free(untimed);
}

/* The one scheduler table: names and aliases, the list every message prints, and capabilities
 * asked of a scheduler instead of which one it is. */
TEST(sched__table_names_and_capabilities)
{
  ASSERT(mu_sched_find(NULL) == mu_sched_at(0));
  ASSERT(mu_sched_find("k8s") == mu_sched_find("kubernetes"));
  ASSERT_NULL(mu_sched_find("k9s"));
  struct mu_buf b = MU_BUF_INIT(SIZE_MAX);
  mu_sched_names(&b, ", ", " or ", 0);
  ASSERT_STR_EQ(mu_buf_str(&b), "local, kubernetes, slurm or local_container");
  mu_buf_clear(&b);
  mu_sched_names(&b, ", ", ", ", 1);
  ASSERT_STR_EQ(mu_buf_str(&b), "local (default), kubernetes, slurm, local_container");
  mu_buf_release(&b);
  size_t follow = 0, prune = 0;
  for (size_t i = 0; mu_sched_at(i) != NULL; i++) {
    follow += (mu_sched_at(i)->caps & MU_SCHED_FOLLOW) != 0;
    prune += mu_sched_at(i)->prune != NULL;
  }
  ASSERT_EQ(follow, 2); /* local, local_container: its jobs run under a process of ours */
  ASSERT_EQ(prune, 2);
  ASSERT(mu_sched_find("local_container")->caps & MU_SCHED_FOLLOW);
  ASSERT(mu_sched_find("local")->caps & MU_SCHED_FOLLOW);
  ASSERT_NOT_NULL(mu_sched_find("local")->prune);
}
