/* Tests for common/lines.c: prefixed lines out of a byte stream cut anywhere. */
#include <stdint.h>
#include <string.h>

#include "alloc.h"
#include "buf.h"
#include "lines.h"
#include "task.h"

TEST(lines__prefixer)
{
  struct mu_line_prefixer lp;
  struct mu_buf out = MU_BUF_INIT(SIZE_MAX);
  mu_line_prefixer_init(&lp, "[3]:", 65536);
  mu_line_prefixer_feed(&lp, "hel", 3, &out);
  ASSERT_EQ(out.len, 0);
  mu_line_prefixer_feed(&lp, "lo\nwor", 6, &out);
  ASSERT_STR_EQ(mu_buf_str(&out), "[3]:hello\n");
  mu_line_prefixer_feed(&lp, "ld\n\nx", 5, &out);
  ASSERT_STR_EQ(mu_buf_str(&out), "[3]:hello\n[3]:world\n[3]:\n");
  mu_line_prefixer_flush(&lp, &out);
  ASSERT_STR_EQ(mu_buf_str(&out), "[3]:hello\n[3]:world\n[3]:\n[3]:x\n");
  mu_line_prefixer_flush(&lp, &out); /* nothing left */
  ASSERT_STR_EQ(mu_buf_str(&out), "[3]:hello\n[3]:world\n[3]:\n[3]:x\n");
  /* A line over the cap comes out in pieces instead of growing without bound. */
  mu_buf_clear(&out);
  char *big = mu_malloc(100000);
  memset(big, 'a', 100000);
  mu_line_prefixer_feed(&lp, big, 100000, &out);
  ASSERT_EQ(out.len, 65536 + 5);
  mu_line_prefixer_flush(&lp, &out);
  ASSERT_EQ(out.len, 65536 + 5 + (100000 - 65536) + 5);
  mu_free(big);
  mu_line_prefixer_release(&lp);
  mu_line_prefixer_release(NULL);
  mu_buf_release(&out);
}

/* The prefix is copied (a caller's temporary is fine) and may be as long as a role name. */
TEST(lines__long_prefix_is_copied)
{
  struct mu_line_prefixer lp;
  struct mu_buf out = MU_BUF_INIT(SIZE_MAX);
  char prefix[200];
  memset(prefix, 'r', sizeof(prefix) - 3);
  memcpy(prefix + sizeof(prefix) - 3, "/0", 3);
  mu_line_prefixer_init(&lp, prefix, 16);
  memset(prefix, 'x', 10);
  mu_line_prefixer_feed(&lp, "one\n", 4, &out);
  ASSERT_EQ(out.len, 199 + 4); /* 197 'r', "/0", "one\n" */
  ASSERT_EQ(memcmp(out.data, "rrrr", 4), 0);
  ASSERT_STR_EQ(out.data + 199, "one\n");
  mu_line_prefixer_release(&lp);
  mu_buf_release(&out);
}

/* Keeps the lines that end in a digit from 0 to 2: the filter sees the line without its newline
 * (a regex with '$' would, too). Counts its calls in *data. */
static int ends_low_digit(void *data, const char *line, size_t n)
{
  (*(int *)data)++;
  return n > 0 && line[n - 1] >= '0' && line[n - 1] <= '2';
}

TEST(lines__filter_sees_the_line_without_its_newline)
{
  struct mu_line_prefixer lp;
  struct mu_buf out = MU_BUF_INIT(SIZE_MAX);
  int calls = 0;
  mu_line_prefixer_init(&lp, "sh/0 ", 8);
  mu_line_prefixer_filter(&lp, ends_low_digit, &calls);
  mu_line_prefixer_feed(&lp, "tick 0\ntick", 11, &out); /* a line cut in two */
  mu_line_prefixer_feed(&lp, " 1\ntick 5\ntick 2", 16, &out);
  ASSERT_STR_EQ(mu_buf_str(&out), "sh/0 tick 0\nsh/0 tick 1\n");
  mu_line_prefixer_flush(&lp, &out); /* the unfinished last line is judged too */
  ASSERT_STR_EQ(mu_buf_str(&out), "sh/0 tick 0\nsh/0 tick 1\nsh/0 tick 2\n");
  ASSERT_EQ(calls, 4);
  /* A line over the cap (8) comes in pieces and goes by its first piece: "xxxxxxx1yy9" is kept,
   * "xxxxxxx9yy1" dropped, whatever the later pieces end in. */
  mu_buf_clear(&out);
  mu_line_prefixer_feed(&lp, "xxxxxxx1yy", 10, &out);
  mu_line_prefixer_feed(&lp, "9\n", 2, &out);
  mu_line_prefixer_feed(&lp, "xxxxxxx9yy", 10, &out);
  mu_line_prefixer_feed(&lp, "1\nok 2\n", 7, &out);
  ASSERT_STR_EQ(mu_buf_str(&out), "sh/0 xxxxxxx1\nsh/0 yy9\nsh/0 ok 2\n");
  mu_line_prefixer_release(&lp);
  mu_buf_release(&out);
}
