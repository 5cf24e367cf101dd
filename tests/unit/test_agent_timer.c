/* Tests for the request parser of the agent's file timer (launcher/agent/agent_timer.c): the
 * lines torch's FileTimerClient writes to TORCHELASTIC_TIMER_FILE, and the clear errors for
 * anything else. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "muster/errno.h"

#include "agent_timer.h"
#include "alloc.h"
#include "buf.h"
#include "task.h"

/* Parses line; on rc == 0 checks nothing more; else that err names `want`. */
static int parse(const char *line, struct mu_timer_req *r, struct mu_buf *err)
{
  mu_buf_clear(err);
  mu_timer_req_release(r);
  return mu_timer_parse(line, strlen(line), r, err);
}

TEST(agent_timer__requests)
{
  struct mu_timer_req r = {0};
  struct mu_buf err = MU_BUF_INIT(SIZE_MAX);
  /* torch's acquire, as FileTimerRequest.to_json() writes it */
  ASSERT_EQ(parse("{\"version\": 1, \"pid\": 4242, \"scope_id\": \"train.py#42\", "
                  "\"expiration_time\": 1765000000.25, \"signal\": 9}",
                  &r, &err),
            0);
  ASSERT_EQ(r.pid, 4242);
  ASSERT_STR_EQ(r.scope, "train.py#42");
  ASSERT(r.expiration == 1765000000.25);
  ASSERT_EQ(r.signal, SIGKILL);
  ASSERT_EQ(err.len, 0);
  /* its release: expiration_time -1, signal 0 */
  ASSERT_EQ(parse("{\"version\": 1, \"pid\": 4242, \"scope_id\": \"train.py#42\", "
                  "\"expiration_time\": -1, \"signal\": 0}",
                  &r, &err),
            0);
  ASSERT(r.expiration < 0);
  ASSERT_EQ(r.signal, 0);
  /* no version (torch's server does not read it) */
  ASSERT_EQ(
      parse("{\"pid\": 1, \"scope_id\": \"\", \"expiration_time\": 5, \"signal\": -1}", &r, &err),
      0);
  /* the signal's range: NSIG - 1 and NSIG */
  char line[256];
  snprintf(line, sizeof(line),
           "{\"pid\": 7, \"scope_id\": \"s\", \"expiration_time\": 5, \"signal\": %d}", NSIG - 1);
  ASSERT_EQ(parse(line, &r, &err), 0);
  ASSERT_EQ(r.signal, NSIG - 1);
  snprintf(line, sizeof(line),
           "{\"pid\": 7, \"scope_id\": \"s\", \"expiration_time\": 5, \"signal\": %d}", NSIG);
  ASSERT_EQ(parse(line, &r, &err), MU_EINVAL);
  ASSERT_NOT_NULL(strstr(mu_buf_str(&err), "'signal' is not a signal number"));
  mu_timer_req_release(&r);
  mu_buf_release(&err);
}

TEST(agent_timer__bad_requests)
{
  static const struct {
    const char *line, *want;
  } rows[] = {
      {"{\"pid\": 1, \"scope_id\": \"s\", \"expiration_time\": 5, \"signal\": 9",
       "not a JSON object"},
      {"not json", "not a JSON object"},
      {"[1, 2]", "not a JSON object"},
      {"", "not a JSON object"},
      {"{\"scope_id\": \"s\", \"expiration_time\": 5, \"signal\": 9}",
       "the field 'pid' is missing"},
      {"{\"pid\": 1, \"expiration_time\": 5, \"signal\": 9}", "the field 'scope_id' is missing"},
      {"{\"pid\": 1, \"scope_id\": \"s\", \"signal\": 9}",
       "the field 'expiration_time' is missing"},
      {"{\"pid\": 1, \"scope_id\": \"s\", \"expiration_time\": 5}",
       "the field 'signal' is missing"},
      {"{\"pid\": \"1\", \"scope_id\": \"s\", \"expiration_time\": 5, \"signal\": 9}",
       "'pid' is not a process id"},
      {"{\"pid\": 0, \"scope_id\": \"s\", \"expiration_time\": 5, \"signal\": 9}",
       "'pid' is not a process id"},
      {"{\"pid\": -5, \"scope_id\": \"s\", \"expiration_time\": 5, \"signal\": 9}",
       "'pid' is not a process id"},
      {"{\"pid\": 1.5, \"scope_id\": \"s\", \"expiration_time\": 5, \"signal\": 9}",
       "'pid' is not a process id"},
      {"{\"pid\": 1, \"scope_id\": 3, \"expiration_time\": 5, \"signal\": 9}",
       "'scope_id' is not a string"},
      {"{\"pid\": 1, \"scope_id\": \"s\", \"expiration_time\": \"5\", \"signal\": 9}",
       "'expiration_time' is not a number"},
      {"{\"pid\": 1, \"scope_id\": \"s\", \"expiration_time\": 5, \"signal\": \"KILL\"}",
       "'signal' is not an integer"},
  };
  struct mu_timer_req r = {0};
  struct mu_buf err = MU_BUF_INIT(SIZE_MAX);
  for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
    int rc = parse(rows[i].line, &r, &err);
    if (rc != MU_EINVAL || strstr(mu_buf_str(&err), rows[i].want) == NULL ||
        strstr(mu_buf_str(&err), "FileTimerClient") == NULL)
      MU__FAIL("'%s': rc %d, error '%s', want '%s'", rows[i].line, rc, mu_buf_str(&err),
               rows[i].want);
    ASSERT_NULL(r.scope);
  }
  mu_buf_release(&err);
}

/* A line of MU_TIMER_LINE_MAX bytes is read; one more byte is refused, naming the limit. */
TEST(agent_timer__huge_line)
{
  struct mu_timer_req r = {0};
  struct mu_buf err = MU_BUF_INIT(SIZE_MAX);
  char *line = mu_malloc(MU_TIMER_LINE_MAX + 2);
  const char *head = "{\"pid\": 7, \"expiration_time\": 5, \"signal\": 9, \"scope_id\": \"";
  size_t h = strlen(head);
  memcpy(line, head, h);
  memset(line + h, 'x', MU_TIMER_LINE_MAX - h - 2);
  memcpy(line + MU_TIMER_LINE_MAX - 2, "\"}", 3);
  ASSERT_EQ(strlen(line), MU_TIMER_LINE_MAX);
  ASSERT_EQ(mu_timer_parse(line, MU_TIMER_LINE_MAX, &r, &err), 0);
  ASSERT_EQ(strlen(r.scope), MU_TIMER_LINE_MAX - h - 2);
  mu_timer_req_release(&r);
  memmove(line + h + 1, line + h, MU_TIMER_LINE_MAX - h + 1); /* one 'x' more */
  ASSERT_EQ(strlen(line), MU_TIMER_LINE_MAX + 1);
  ASSERT_EQ(mu_timer_parse(line, MU_TIMER_LINE_MAX + 1, &r, &err), MU_E2BIG);
  ASSERT_NOT_NULL(strstr(mu_buf_str(&err), "longer than 4096 bytes (PIPE_BUF"));
  ASSERT_NULL(r.scope);
  mu_free(line);
  mu_buf_release(&err);
}
