/* Tests for common/: buf, opts, strvec, err, suggest, json, fsutil, failrec, log. */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "muster/errno.h"

#include "alloc.h"
#include "buf.h"
#include "failrec.h"
#include "fsutil.h"
#include "http_client.h"
#include "json.h"
#include "log.h"
#include "opts.h"
#include "strvec.h"
#include "suggest.h"
#include "random.h"
#include "task.h"

TEST(buf__append_and_cap)
{
  struct mu_buf b = MU_BUF_INIT(8);
  ASSERT_EQ(mu_buf_puts(&b, "abcd"), 0);
  ASSERT_EQ(mu_buf_printf(&b, "%d", 123), 0);
  ASSERT_STR_EQ(mu_buf_str(&b), "abcd123");
  ASSERT_EQ(mu_buf_puts(&b, "xy"), MU_E2BIG);
  ASSERT_STR_EQ(mu_buf_str(&b), "abcd123");
  mu_buf_consume(&b, 2);
  ASSERT_STR_EQ(mu_buf_str(&b), "cd123");
  mu_buf_release(&b);
  ASSERT_EQ(b.len, 0);
}

TEST(opts__long_short_and_underscore)
{
  long n = 0;
  const char *s = NULL;
  int flag = 0;
  struct mu_strvec list = MU_STRVEC_INIT;
  struct mu_opt opts[] = {
      MU_OPT_INT(0, "nproc-per-node", &n, "N", "workers"),
      MU_OPT_STRING('s', "scheduler", &s, "NAME", "backend"),
      MU_OPT_BOOL(0, "tee", &flag, "tee"),
      MU_OPT_LIST(0, "env", &list, "K=V", "env"),
      MU_OPT_END(),
  };
  char a0[] = "prog", a1[] = "--nproc_per_node=4", a2[] = "-s", a3[] = "local", a4[] = "--tee",
       a5[] = "--env", a6[] = "A=1", a7[] = "--env", a8[] = "B=2", a9[] = "rest";
  char *argv[] = {a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, NULL};
  int i = mu_opts_parse(opts, 10, argv, MU_OPTS_STOP_AT_NONOPT, "prog");
  ASSERT_EQ(i, 9);
  ASSERT_EQ(n, 4);
  ASSERT_STR_EQ(s, "local");
  ASSERT_EQ(flag, 1);
  ASSERT_EQ(list.n, 2);
  ASSERT_STR_EQ(list.v[1], "B=2");
  mu_strvec_release(&list);
}

TEST(opts__bad_int_is_usage_error)
{
  long n = 0;
  struct mu_opt opts[] = {MU_OPT_INT(0, "count", &n, "N", "count"), MU_OPT_END()};
  char a0[] = "prog", a1[] = "--count", a2[] = "12x";
  char *argv[] = {a0, a1, a2, NULL};
  ASSERT_EQ(mu_opts_parse(opts, 3, argv, 0, "prog"), MU_EUSAGE);
}

TEST(err__names_and_messages)
{
  ASSERT_STR_EQ(mu_err_name(MU_ENOENT), "ENOENT");
  ASSERT_EQ(MU_EINVAL, -4001);
  ASSERT_STR_EQ(mu_strerror(MU_E2BIG), "value over its size limit");
}

TEST(edit_distance__basic)
{
  ASSERT_EQ(mu_edit_distance("queue", "queu"), 1);
  ASSERT_EQ(mu_edit_distance("namespace", "namespace"), 0);
}

TEST(suggest__closest_and_too_far)
{
  static const char *const words[] = {"queue", "namespace", "image_repo", "priority_class"};
  struct mu_suggest s;
  mu_suggest_init(&s, "qeue");
  for (size_t i = 0; i < 4; i++)
    mu_suggest_add(&s, words[i]);
  ASSERT_STR_EQ(mu_suggest_best(&s), "queue");
  mu_suggest_init(&s, "namespce=ml"); /* compared up to '=' */
  for (size_t i = 0; i < 4; i++)
    mu_suggest_add(&s, words[i]);
  ASSERT_STR_EQ(mu_suggest_best(&s), "namespace");
  mu_suggest_init(&s, "x"); /* one letter suggests nothing */
  for (size_t i = 0; i < 4; i++)
    mu_suggest_add(&s, words[i]);
  ASSERT_NULL(mu_suggest_best(&s));
  mu_suggest_init(&s, "completelydifferent");
  for (size_t i = 0; i < 4; i++)
    mu_suggest_add(&s, words[i]);
  ASSERT_NULL(mu_suggest_best(&s));
}

TEST(json__escape_and_getters)
{
  struct mu_buf b = MU_BUF_INIT(1024);
  mu_json_str(&b, "a\"<&>\n\x01\xe2\x80\xa8", 10);
  ASSERT_STR_EQ(mu_buf_str(&b), "\"a\\\"\\u003c\\u0026\\u003e\\n\\u0001\\u2028\"");
  mu_buf_release(&b);
  cJSON *o = cJSON_Parse("{\"s\":\"x\",\"n\":42,\"b\":true,\"d\":1.5}");
  ASSERT_STR_EQ(mu_json_get_str(o, "s"), "x");
  ASSERT_NULL(mu_json_get_str(o, "n"));
  ASSERT_EQ(mu_json_get_long(o, "n", -1), 42);
  ASSERT_EQ(mu_json_get_long(o, "missing", -1), -1);
  ASSERT_EQ(mu_json_get_bool(o, "b", 0), 1);
  ASSERT_EQ((long)(mu_json_get_double(o, "d", 0) * 2), 3);
  cJSON_Delete(o);
}

/* mu_json_str_len() is what mu_json_str() writes, for every byte and for random strings rich
 * in what is escaped (UTF-8 valid, cut, overlong, surrogates, U+2028). */
TEST(json__str_len_is_what_str_writes)
{
  struct mu_buf b = MU_BUF_INIT(1 << 16);
  char s[64];
  for (int c = 0; c < 256; c++) {
    s[0] = (char)c;
    mu_buf_clear(&b);
    mu_json_str(&b, s, 1);
    ASSERT_EQ(mu_json_str_len(s, 1), b.len);
  }
  static const unsigned char pick[] = {'a',  '<',  '"',  '\\', '\n', 0x01, 0x7f, 0xc3, 0xa9, 0xe2,
                                       0x80, 0xa8, 0xed, 0xa0, 0xf0, 0x9f, 0x98, 0xff, 0xc0};
  uint32_t x = 12345;
  for (int round = 0; round < 20000; round++) {
    size_t n = 1 + round % (sizeof(s) - 1);
    for (size_t i = 0; i < n; i++) {
      x = x * 1103515245u + 12345u;
      s[i] = (char)pick[(x >> 16) % sizeof(pick)];
    }
    mu_buf_clear(&b);
    mu_json_str(&b, s, n);
    ASSERT_EQ(mu_json_str_len(s, n), b.len);
    ASSERT_EQ(strlen(b.data), b.len); /* what was written is all there, and parses */
    ASSERT_EQ(b.data[b.len - 1], '"');
    cJSON *j = cJSON_Parse(b.data);
    ASSERT(cJSON_IsString(j));
    cJSON_Delete(j);
  }
  ASSERT_EQ(mu_json_str_len("", 0), 2);
  ASSERT_EQ(mu_json_str_len("\xe2\x80\xa9", 3), 8);
  mu_buf_release(&b);
}

TEST(fsutil__atomic_write_and_capped_read)
{
  char dir[] = "/tmp/mu-test-fsutil-XXXXXX";
  ASSERT_NOT_NULL(mkdtemp(dir));
  char *path = mu_asprintf("%s/f", dir);
  ASSERT_EQ(mu_write_file_atomic(path, "hello", 5, 0600, MU_WRITE_FSYNC), 0);
  struct mu_buf b = MU_BUF_INIT(1 << 20);
  ASSERT_EQ(mu_read_file(path, 1 << 20, &b), 0);
  ASSERT_STR_EQ(mu_buf_str(&b), "hello");
  mu_buf_clear(&b);
  ASSERT_EQ(mu_read_file(path, 3, &b), MU_E2BIG);
  ASSERT_STR_EQ(mu_buf_str(&b), "hel");
  mu_buf_clear(&b);
  char *missing = mu_asprintf("%s/none", dir);
  ASSERT_EQ(mu_read_file(missing, 100, &b), -ENOENT);
  char *bad = mu_asprintf("%s/no/such/dir/f", dir);
  ASSERT_EQ(mu_write_file_atomic(bad, "x", 1, 0600, 0), -ENOENT);
  mu_buf_release(&b);
  unlink(path);
  rmdir(dir);
  mu_free(path);
  mu_free(missing);
  mu_free(bad);
}

TEST(http__endpoint_parse)
{
  char host[64];
  int port = 0, https = 0;
  ASSERT_EQ(mu_http_endpoint_parse("127.0.0.1:2379", 14, host, sizeof(host), &port, &https), 0);
  ASSERT_STR_EQ(host, "127.0.0.1");
  ASSERT_EQ(port, 2379);
  ASSERT_EQ(https, 0);
  const char *v6 = "https://[::1]:8443/";
  ASSERT_EQ(mu_http_endpoint_parse(v6, strlen(v6), host, sizeof(host), &port, &https), 0);
  ASSERT_STR_EQ(host, "::1");
  ASSERT_EQ(port, 8443);
  ASSERT_EQ(https, 1);
  /* only the n bytes given count: the first member of a list */
  const char *list = "http://h1:1,h2:2";
  https = 0;
  ASSERT_EQ(mu_http_endpoint_parse(list, 11, host, sizeof(host), &port, &https), 0);
  ASSERT_STR_EQ(host, "h1");
  ASSERT_EQ(port, 1);
  const char *bad[] = {"h1", ":2379", "h1:0", "h1:65536", "h1:x", "a/b:1", "[::1]2379", "h:1/x"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    ASSERT_EQ(mu_http_endpoint_parse(bad[i], strlen(bad[i]), host, sizeof(host), &port, &https),
              MU_EINVAL);
  ASSERT_EQ(mu_http_endpoint_parse("averylonghostname:1", 19, host, 8, &port, &https), MU_EINVAL);
}

/* The random part of every app id (local and Kubernetes): a letter, then 11 of [a-z0-9], never
 * twice the same; a pinned one keeps its letters and digits, lowercased, at most 12. */
TEST(random__app_id_suffix)
{
  char a[13], b[13];
  unsetenv("MUSTER_APP_ID_SUFFIX");
  ASSERT_EQ(mu_app_id_suffix(a), 0);
  ASSERT_EQ(mu_app_id_suffix(b), 0);
  ASSERT_EQ(strlen(a), 12);
  ASSERT(a[0] >= 'a' && a[0] <= 'z');
  ASSERT_EQ(strspn(a, "abcdefghijklmnopqrstuvwxyz0123456789"), 12);
  ASSERT(strcmp(a, b) != 0);
  setenv("MUSTER_APP_ID_SUFFIX", "Ab-9_x", 1);
  ASSERT_EQ(mu_app_id_suffix(a), 0);
  ASSERT_STR_EQ(a, "ab9x");
  setenv("MUSTER_APP_ID_SUFFIX", "0123456789abcdefgh", 1);
  ASSERT_EQ(mu_app_id_suffix(a), 0);
  ASSERT_STR_EQ(a, "0123456789ab");
  setenv("MUSTER_APP_ID_SUFFIX", "--", 1);
  ASSERT_EQ(mu_app_id_suffix(a), 0);
  ASSERT_STR_EQ(a, "0");
  setenv("MUSTER_APP_ID_SUFFIX", "", 1); /* empty: not pinned */
  ASSERT_EQ(mu_app_id_suffix(a), 0);
  ASSERT_EQ(strlen(a), 12);
  unsetenv("MUSTER_APP_ID_SUFFIX");
}

/* A faulthandler dump as Python 3.11 prints it on SIGABRT: a waiting thread, then the main
 * thread (the one with "<module>") sleeping in the user's step(). */
static const char dump[] = "[3]:rank 3: hanging at step 6\n"
                           "Fatal Python error: Aborted\n"
                           "\n"
                           "Thread 0x00007f0a3effd6c0 (most recent call first):\n"
                           "  File \"/usr/lib/python3.11/threading.py\", line 327 in wait\n"
                           "  File \"/usr/lib/python3.11/threading.py\", line 982 in run\n"
                           "\n"
                           "Current thread 0x00007f0a4d1a3040 (most recent call first):\n"
                           "  File \"/home/me/train.py\", line 42 in step\n"
                           "  File \"/home/me/train.py\", line 60 in main\n"
                           "  File \"/home/me/train.py\", line 74 in <module>\n"
                           "\n"
                           "Extension modules: torch._C, numpy.core._multiarray_umath\n";

TEST(failrec__innermost_frame_of_a_dump)
{
  int lib = -1;
  char *f = mu_failrec_innermost_frame(dump, &lib);
  ASSERT_STR_EQ(f, "train.py:42 in step");
  ASSERT_EQ(lib, 0);
  mu_free(f);
  /* a rank that waits in a collective: the frame is the library's */
  const char *waiting = "Current thread 0x1 (most recent call first):\n"
                        "  File \"/usr/lib/python3/dist-packages/torch/distributed/"
                        "distributed_c10d.py\", line 1541 in all_reduce\n"
                        "  File \"/w/x.py\", line 9 in <module>\n";
  f = mu_failrec_innermost_frame(waiting, &lib);
  ASSERT_STR_EQ(f, "distributed_c10d.py:1541 in all_reduce");
  ASSERT_EQ(lib, 1);
  mu_free(f);
  /* no <module> frame: the current thread's; no dump at all: NULL */
  f = mu_failrec_innermost_frame("Thread 0x2 (most recent call first):\n  File \"/a/b.py\", "
                                 "line 3 in f\n\nCurrent thread 0x3 (most recent call first):\n"
                                 "  File \"/a/c.py\", line 7 in g\n",
                                 NULL);
  ASSERT_STR_EQ(f, "c.py:7 in g");
  mu_free(f);
  ASSERT_NULL(mu_failrec_innermost_frame("segfault\n  File \"x\" nothing\n", &lib));
  ASSERT_NULL(mu_failrec_innermost_frame("", &lib));
}

/* A status names the replica whose file held the record: on Slurm the node rank is the order
 * the agents joined in, so replica 0 may well be node rank 1 (issue 34). */
TEST(failrec__summary_names_the_replica_beside_its_node_rank)
{
  struct mu_failrec r;
  memset(&r, 0, sizeof(r));
  r.rank = 2;
  r.node_rank = 1;
  r.host = mu_strdup("vm");
  r.exit_code = 3;
  r.exception = mu_strdup("ValueError: bad shard 7");
  struct mu_buf s = MU_BUF_INIT(SIZE_MAX);
  mu_failrec_summary_replica(&r, "trainer", 0, &s);
  ASSERT_STR_EQ(mu_buf_str(&s), "rank 2 (replica trainer/0, node rank 1 on host vm) exited with "
                                "code 3: ValueError: bad shard 7");
  mu_buf_clear(&s);
  mu_failrec_summary_replica(&r, NULL, 0, &s); /* no replica known: as mu_failrec_summary */
  ASSERT_STR_EQ(mu_buf_str(&s), "rank 2 (node rank 1 on host vm) exited with code 3: "
                                "ValueError: bad shard 7");
  mu_buf_clear(&s);
  r.node_rank = -1;
  mu_free(r.host);
  r.host = NULL;
  mu_failrec_summary_replica(&r, "trainer", 1, &s);
  ASSERT_STR_EQ(mu_buf_str(&s), "rank 2 (replica trainer/1) exited with code 3: ValueError: bad "
                                "shard 7");
  mu_buf_release(&s);
  mu_failrec_release(&r);
}

TEST(failrec__hang_record_roundtrip_summary_and_root_cause)
{
  struct mu_failrec a, b, c;
  memset(&a, 0, sizeof(a));
  a.rank = 3;
  a.node_rank = 1;
  a.host = mu_strdup("vm");
  a.exit_code = -1;
  a.signal = 6;
  a.time_ms = 2000;
  a.exception = mu_strdup("train.py:42 in step");
  a.hung = mu_strdup("no progress for 4 s");
  char *json = mu_failrec_to_json(&a);
  ASSERT(strstr(json, "\"hung\":\"no progress for 4 s\",\"waiting\":false") != NULL);
  ASSERT_EQ(mu_failrec_parse(json, strlen(json), &b), 0);
  ASSERT_STR_EQ(b.hung, "no progress for 4 s");
  ASSERT_EQ(b.waiting, 0);
  struct mu_buf s = MU_BUF_INIT(SIZE_MAX);
  mu_failrec_summary(&b, &s);
  ASSERT_STR_EQ(mu_buf_str(&s),
                "rank 3 (node rank 1 on host vm) hung: no progress for 4 s: train.py:42 in step");
  /* a rank that hung waiting inside a library, even if seen earlier, is not the root cause */
  memset(&c, 0, sizeof(c));
  c.time_ms = 1000;
  c.hung = mu_strdup("no progress for 4 s");
  c.waiting = 1;
  ASSERT(mu_failrec_earlier(&b, &c));
  ASSERT(!mu_failrec_earlier(&c, &b));
  c.waiting = 0;
  ASSERT(mu_failrec_earlier(&c, &b));
  mu_buf_release(&s);
  mu_free(json);
  mu_failrec_release(&a);
  mu_failrec_release(&b);
  mu_failrec_release(&c);
}

TEST(log__escape_one_line)
{
  char out[64];
  /* a forged line and a terminal escape become text; printable UTF-8 stays */
  mu_log_escape(out, sizeof(out), "a\nb\r\tc\x1b[31md\x7f");
  ASSERT_STR_EQ(out, "a\\nb\\r\\tc\\x1b[31md\\x7f");
  mu_log_escape(out, sizeof(out), "caf\xc3\xa9 \xe2\x9c\x93");
  ASSERT_STR_EQ(out, "caf\xc3\xa9 \xe2\x9c\x93");
  /* C1 CSI in UTF-8 (U+009B), a lone continuation byte, a cut sequence, overlong */
  mu_log_escape(out, sizeof(out), "x\xc2\x9by\x80z\xe2\x9c");
  ASSERT_STR_EQ(out, "x\\xc2\\x9by\\x80z\\xe2\\x9c");
  mu_log_escape(out, sizeof(out), "\xc0\xaf");
  ASSERT_STR_EQ(out, "\\xc0\\xaf");
  /* the cap cuts at a whole escape */
  ASSERT_EQ(mu_log_escape(out, 5, "ab\ncd"), 4);
  ASSERT_STR_EQ(out, "ab\\n");
  ASSERT_EQ(mu_log_escape(out, 4, "ab\ncd"), 2);
  ASSERT_STR_EQ(out, "ab");
}
