/* Tests for common/path.c: Go's path.Clean for rooted paths. */
#include <string.h>

#include "path.h"
#include "task.h"

static const char *clean(const char *p, unsigned flags, char *out)
{
  size_t n = mu_path_clean(out, p, strlen(p), flags);
  ASSERT_EQ(n, strlen(out));
  return out;
}

TEST(path__clean_like_go)
{
  /* path.Clean(path.Join("/", p)), from Go's own table where it applies to rooted paths */
  static const char *cases[][2] = {
      {"", "/"},
      {"/", "/"},
      {"abc", "/abc"},
      {"a/b/c", "/a/b/c"},
      {"//a//b", "/a/b"},
      {"/a/b/", "/a/b"},
      {"/./a/./b/.", "/a/b"},
      {"/a/b/..", "/a"},
      {"/a/../..", "/"},
      {"/../a", "/a"},
      {"/a/b/../../c", "/c"},
      {"/..a/b..", "/..a/b.."},
      {"/a/./../b", "/b"},
      {"/abc/def/.", "/abc/def"},
  };
  char out[64];
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
    ASSERT_STR_EQ(clean(cases[i][0], 0, out), cases[i][1]);
}

TEST(path__keep_trailing_slash_as_servemux)
{
  char out[64];
  ASSERT_STR_EQ(clean("/a/b/", MU_PATH_KEEP_SLASH, out), "/a/b/");
  ASSERT_STR_EQ(clean("/a//b//", MU_PATH_KEEP_SLASH, out), "/a/b/");
  ASSERT_STR_EQ(clean("/", MU_PATH_KEEP_SLASH, out), "/");
  ASSERT_STR_EQ(clean("//", MU_PATH_KEEP_SLASH, out), "/");
  ASSERT_STR_EQ(clean("/a/..", MU_PATH_KEEP_SLASH, out), "/");
  ASSERT_STR_EQ(clean("/a/../", MU_PATH_KEEP_SLASH, out), "/");
  /* bytes after the given length are not read */
  ASSERT_EQ(mu_path_clean(out, "/a/b", 2, 0), 2u);
  ASSERT_STR_EQ(out, "/a");
}

TEST(path__segment_ok)
{
  static const char *const bad[] = {"", ".", "..", "a/b", "/", "../x", "a\nb", "a\x7f"};
  static const char *const good[] = {"a", "...", "a..b", ".hidden", "x-1_y.z", "\xe2\x80\xa8"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    ASSERT_EQ(mu_path_segment_ok(bad[i]), 0);
  for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
    ASSERT_EQ(mu_path_segment_ok(good[i]), 1);
  char long_name[300];
  memset(long_name, 'a', sizeof(long_name) - 1);
  long_name[sizeof(long_name) - 1] = '\0';
  ASSERT_EQ(mu_path_segment_ok(long_name), 0);
  long_name[255] = '\0';
  ASSERT_EQ(mu_path_segment_ok(long_name), 1);
}
