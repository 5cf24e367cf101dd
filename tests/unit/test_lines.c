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
