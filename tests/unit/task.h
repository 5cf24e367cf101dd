/* The unit-test harness. A case is
 *
 *   TEST(buf__append_over_cap) { ... ASSERT_EQ(rc, MU_E2BIG); }
 *
 * in tests/unit/test_<module>.c. Cases register themselves at load time (a constructor),
 * so adding one needs no list to edit: the test_list.h of STYLE.md #21 was one shared file
 * that every change touched. mu_unit_tests runs each case in a forked child with a timeout
 * and prints TAP. */
#ifndef MU_TASK_H
#define MU_TASK_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The case's own temporary directory (the runner makes one per case, as TMPDIR, and removes it
 * when the case ends). */
static inline const char *mu_test_tmpdir(void)
{
  const char *d = getenv("TMPDIR");
  return d != NULL && d[0] == '/' ? d : "/tmp";
}

typedef void mu_test_fn(void);
void mu_test_register(const char *name, mu_test_fn *fn);

#define TEST(name)                                                                                 \
  static void test_##name(void);                                                                   \
  __attribute__((constructor)) static void register_##name(void)                                   \
  {                                                                                                \
    mu_test_register(#name, test_##name);                                                          \
  }                                                                                                \
  static void test_##name(void)

#define MU__FAIL(...)                                                                              \
  do {                                                                                             \
    fprintf(stderr, "# %s:%d: ", __FILE__, __LINE__);                                              \
    fprintf(stderr, __VA_ARGS__);                                                                  \
    fprintf(stderr, "\n");                                                                         \
    abort();                                                                                       \
  } while (0)

#define ASSERT(cond)                                                                               \
  do {                                                                                             \
    if (!(cond))                                                                                   \
      MU__FAIL("assertion failed: %s", #cond);                                                     \
  } while (0)

#define ASSERT_EQ(a, b)                                                                            \
  do {                                                                                             \
    intmax_t a_ = (intmax_t)(a), b_ = (intmax_t)(b);                                               \
    if (a_ != b_)                                                                                  \
      MU__FAIL("%s == %s: %jd != %jd", #a, #b, a_, b_);                                            \
  } while (0)

#define ASSERT_NE(a, b)                                                                            \
  do {                                                                                             \
    intmax_t a_ = (intmax_t)(a), b_ = (intmax_t)(b);                                               \
    if (a_ == b_)                                                                                  \
      MU__FAIL("%s != %s: both %jd", #a, #b, a_);                                                  \
  } while (0)

#define ASSERT_STR_EQ(a, b)                                                                        \
  do {                                                                                             \
    const char *a_ = (a), *b_ = (b);                                                               \
    if (a_ == NULL || b_ == NULL || strcmp(a_, b_) != 0)                                           \
      MU__FAIL("%s == %s: \"%s\" != \"%s\"", #a, #b, a_ ? a_ : "(null)", b_ ? b_ : "(null)");      \
  } while (0)

#define ASSERT_NULL(a) ASSERT((a) == NULL)
#define ASSERT_NOT_NULL(a) ASSERT((a) != NULL)

#endif
