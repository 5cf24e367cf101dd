/* Tests for launcher/spec/yaml_tree.c's reader: what a document may expand to through aliases
 * (issue 24 finding 6). The emitter is tested through the renderers (test_sched_kubernetes.c). */
#include <stdio.h>
#include <string.h>

#include "muster/errno.h"

#include "alloc.h"
#include "task.h"
#include "yaml_tree.h"

static int read_doc(const char *text, cJSON **out, struct mu_buf *err)
{
  size_t line = 0;
  return mu_yaml_read(text, strlen(text), MU_YAML_STRINGS, out, &line, err);
}

/* "k: &a [s, s, ...]" followed by `refs` aliases *a in one sequence: (refs + 1) * n scalars. */
static char *aliased(size_t n, const char *scalar, size_t refs)
{
  struct mu_buf b = MU_BUF_INIT(SIZE_MAX);
  mu_buf_puts(&b, "a: &a [");
  for (size_t i = 0; i < n; i++)
    mu_buf_printf(&b, "%s%s", i ? "," : "", scalar);
  mu_buf_puts(&b, "]\nb: [");
  for (size_t i = 0; i < refs; i++)
    mu_buf_printf(&b, "%s*a", i ? "," : "");
  mu_buf_puts(&b, "]\n");
  return mu_buf_detach(&b);
}

TEST(yaml_tree__aliases_bounded_by_nodes)
{
  struct mu_buf err = MU_BUF_INIT(SIZE_MAX);
  cJSON *out = NULL;
  /* 1000 scalars named 60 times: 60,000 more nodes, within the 64 Ki allowance. */
  char *ok = aliased(1000, "x", 60);
  ASSERT_EQ(read_doc(ok, &out, &err), 0);
  ASSERT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(out, "b")), 60);
  cJSON_Delete(out);
  /* 70 times: 70,000 more, past it. */
  char *bad = aliased(1000, "x", 70);
  out = NULL;
  ASSERT_EQ(read_doc(bad, &out, &err), MU_E2BIG);
  ASSERT(out == NULL);
  ASSERT(strstr(mu_buf_str(&err), "aliases expand it past 65536 nodes") != NULL);
  mu_free(ok);
  mu_free(bad);
  mu_buf_release(&err);
}

TEST(yaml_tree__aliases_bounded_by_bytes)
{
  struct mu_buf err = MU_BUF_INIT(SIZE_MAX), big = MU_BUF_INIT(SIZE_MAX);
  cJSON *out = NULL;
  for (int i = 0; i < 100000; i++)
    mu_buf_putc(&big, 'z');
  /* One 100 kB scalar named 50 times: 5 MB more, past the 4 MiB allowance, in 51 nodes. */
  char *bad = aliased(1, mu_buf_str(&big), 50);
  ASSERT_EQ(read_doc(bad, &out, &err), MU_E2BIG);
  mu_buf_clear(&err);
  /* 30 times: 3 MB, within it. */
  char *ok = aliased(1, mu_buf_str(&big), 30);
  ASSERT_EQ(read_doc(ok, &out, &err), 0);
  cJSON_Delete(out);
  mu_free(ok);
  mu_free(bad);
  mu_buf_release(&big);
  mu_buf_release(&err);
}

TEST(yaml_tree__spelled_out_documents_are_not_limited)
{
  /* 200,000 scalars without an alias: more than the alias allowance, all written out. */
  struct mu_buf b = MU_BUF_INIT(SIZE_MAX), err = MU_BUF_INIT(SIZE_MAX);
  cJSON *out = NULL;
  mu_buf_puts(&b, "k: [");
  for (int i = 0; i < 200000; i++)
    mu_buf_puts(&b, i ? ",x" : "x");
  mu_buf_puts(&b, "]\n");
  ASSERT_EQ(read_doc(mu_buf_str(&b), &out, &err), 0);
  ASSERT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(out, "k")), 200000);
  cJSON_Delete(out);
  mu_buf_release(&b);
  mu_buf_release(&err);
}

TEST(yaml_tree__billion_laughs_parse_error)
{
  /* Through mu_yaml_parse: the error says what happened. */
  struct mu_buf b = MU_BUF_INIT(SIZE_MAX), err = MU_BUF_INIT(SIZE_MAX);
  cJSON *out = NULL;
  mu_buf_puts(&b, "l0: &l0 [lol,lol,lol,lol,lol,lol,lol,lol,lol]\n");
  for (int i = 1; i < 9; i++)
    mu_buf_printf(&b, "l%d: &l%d [*l%d,*l%d,*l%d,*l%d,*l%d,*l%d,*l%d,*l%d,*l%d]\n", i, i, i - 1,
                  i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1);
  ASSERT_EQ(mu_yaml_parse(b.data, b.len, &out, &err), MU_EPARSE);
  ASSERT(out == NULL);
  ASSERT(strstr(mu_buf_str(&err), "YAML: its aliases expand it past") != NULL);
  mu_buf_release(&b);
  mu_buf_release(&err);
}
