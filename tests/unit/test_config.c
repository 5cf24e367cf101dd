/* Tests for launcher/config.c: -cfg strings (TorchX's to_dict / cfg_from_str, golden 15) and
 * .musterconfig parsing and precedence. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "muster/errno.h"

#include "alloc.h"
#include "config.h"
#include "task.h"

static const char *split1(const char *s, const char *key)
{
  static char out[256];
  struct mu_kvlist kv = MU_KVLIST_INIT;
  struct mu_buf err = MU_BUF_INIT(1024);
  int rc = mu_cfg_split(s, &kv, &err);
  const char *v = rc == 0 ? mu_kvlist_get(&kv, key) : NULL;
  snprintf(out, sizeof(out), "%s", v ? v : "<none>");
  mu_kvlist_release(&kv);
  mu_buf_release(&err);
  return rc == 0 ? out : "<error>";
}

TEST(config__to_dict_golden15)
{
  ASSERT_STR_EQ(split1("FOO=v1", "FOO"), "v1");
  ASSERT_STR_EQ(split1("FOO=v1,v2", "FOO"), "v1,v2");
  ASSERT_STR_EQ(split1("FOO=v1;v2", "FOO"), "v1;v2");
  ASSERT_STR_EQ(split1("FOO=''", "FOO"), "");
  ASSERT_STR_EQ(split1("FOO=\"\"", "FOO"), "");
  ASSERT_STR_EQ(split1("FOO=,", "FOO"), ",");
  ASSERT_STR_EQ(split1("FOO=;", "FOO"), ";");
  ASSERT_STR_EQ(split1("FOO=v1,v2,", "FOO"), "v1,v2,");
  ASSERT_STR_EQ(split1("FOO=v1,v2,BAR=v3", "FOO"), "v1,v2");
  ASSERT_STR_EQ(split1("FOO=v1,v2,BAR=v3", "BAR"), "v3");
  ASSERT_STR_EQ(split1("FOO=v1;v2;BAR=v3", "FOO"), "v1;v2");
  ASSERT_STR_EQ(split1("FOO=v1,v2;BAR=v3", "FOO"), "v1,v2");
  ASSERT_STR_EQ(split1("foo=bar1,bar2,bar3,my_key=my_value,new_foo=new_bar1,new_bar2", "foo"),
                "bar1,bar2,bar3");
  ASSERT_STR_EQ(split1("foo=bar1,bar2,bar3,my_key=my_value,new_foo=new_bar1,new_bar2", "new_foo"),
                "new_bar1,new_bar2");
  ASSERT_STR_EQ(split1("key1=value1,,foo=bar", "key1"), "value1,");
  ASSERT_STR_EQ(split1("FOO=\"value with = and , and ;\"", "FOO"), "value with = and , and ;");
  ASSERT_STR_EQ(split1("", "FOO"), "<none>");
  /* The errors of golden 15. */
  ASSERT_STR_EQ(split1("FOO", "FOO"), "<error>");
  ASSERT_STR_EQ(split1("FOO,", "FOO"), "<error>");
  ASSERT_STR_EQ(split1("FOO;", "FOO"), "<error>");
  ASSERT_STR_EQ(split1("FOO=", "FOO"), "<error>");
  ASSERT_STR_EQ(split1("FOO=;BAR=v1", "FOO"), "<error>");
}

static const struct mu_runopt test_opts[] = {
    {"E", MU_RUNOPT_MAP, NULL, 0, "a map"},      {"J", MU_RUNOPT_STR, NULL, 1, "required"},
    {"K", MU_RUNOPT_LIST, NULL, 0, "a list"},    {"N", MU_RUNOPT_INT, "3", 0, "an int"},
    {"B", MU_RUNOPT_BOOL, "false", 0, "a bool"}, {NULL, MU_RUNOPT_STR, NULL, 0, NULL},
};

/* Resolves s against test_opts; returns "K|J|E|N|B" or "<error: ...>". */
static const char *resolve(const char *s, const struct mu_config *file)
{
  static char out[512];
  struct mu_kvlist kv = MU_KVLIST_INIT;
  struct mu_buf err = MU_BUF_INIT(1024);
  struct mu_cfg cfg;
  int rc = mu_cfg_split(s, &kv, &err);
  if (rc == 0)
    rc = mu_cfg_resolve("t", test_opts, &kv, file, &cfg, &err);
  if (rc != 0) {
    snprintf(out, sizeof(out), "<error: %s>", mu_buf_str(&err));
  } else {
    const char *k = mu_cfg_get(&cfg, "K"), *j = mu_cfg_get(&cfg, "J"), *e = mu_cfg_get(&cfg, "E");
    snprintf(out, sizeof(out), "%s|%s|%s|%s|%s", k ? k : "-", j ? j : "-", e ? e : "-",
             mu_cfg_get(&cfg, "N"), mu_cfg_get(&cfg, "B"));
    mu_cfg_release(&cfg);
  }
  mu_kvlist_release(&kv);
  mu_buf_release(&err);
  return out;
}

TEST(config__cfg_from_str_golden15)
{
  ASSERT_STR_EQ(resolve("K=a,J=b", NULL), "a|b|-|3|false");
  ASSERT_STR_EQ(resolve("J=x,K=a,b", NULL), "a,b|x|-|3|false");
  ASSERT_STR_EQ(resolve("J=x,K=a;b", NULL), "a,b|x|-|3|false");
  ASSERT_STR_EQ(resolve("J=x,K=a,b;", NULL), "a,b|x|-|3|false");
  ASSERT_STR_EQ(resolve("K=a,b,J=d", NULL), "a,b|d|-|3|false");
  ASSERT_STR_EQ(resolve("K=a,b;J=d", NULL), "a,b|d|-|3|false");
  ASSERT_STR_EQ(resolve("K=a;b,J=d", NULL), "a,b|d|-|3|false");
  ASSERT_STR_EQ(resolve("K=a;b;J=d", NULL), "a,b|d|-|3|false");
  ASSERT_STR_EQ(resolve("J=d,E=f:b,F:B", NULL), "-|d|f:b,F:B|3|false");
  ASSERT_STR_EQ(resolve("J=d,N=7,B=True", NULL), "-|d|-|7|true");
  /* Divergences (golden 15 drops unknown keys with a warning): an error with a suggestion. */
  ASSERT(strstr(resolve("J=d,KK=a", NULL), "unknown -cfg key 'KK'") != NULL);
  ASSERT(strstr(resolve("J=d,KK=a", NULL), "did you mean 'K'") != NULL);
  /* Types and required options. */
  ASSERT(strstr(resolve("J=d,N=lots", NULL), "N: expects a int, got 'lots'") != NULL);
  ASSERT(strstr(resolve("J=d,B=maybe", NULL), "expects a bool") != NULL);
  ASSERT(strstr(resolve("K=a", NULL), "needs -cfg J=") != NULL);
  ASSERT(strstr(resolve("J=d,E=nocolon", NULL), "is not KEY:VALUE") != NULL);
}

TEST(config__file_precedence)
{
  struct mu_config c = MU_CONFIG_INIT;
  struct mu_buf err = MU_BUF_INIT(1024);
  /* Earlier files win: parse "home" first, then "cwd". */
  ASSERT_EQ(mu_config_parse(&c, "# comment\n[t]\nJ = home\nN = 5\n[cli:run]\nscheduler=t\n", "home",
                            &err),
            0);
  ASSERT_EQ(mu_config_parse(&c, "[t]\nJ = cwd\nK = x;y\nB = None\n", "cwd", &err), 0);
  ASSERT_STR_EQ(mu_config_find(&c, "t", "J")->value, "home");
  ASSERT_STR_EQ(mu_config_find(&c, "t", "J")->where, "home:3");
  ASSERT_STR_EQ(mu_config_find(&c, "cli:run", "scheduler")->value, "t");
  ASSERT_NULL(mu_config_find(&c, "t", "B")->value); /* None */
  ASSERT_STR_EQ(resolve("", &c), "x,y|home|-|5|false");
  ASSERT_STR_EQ(resolve("J=cli,N=9", &c), "x,y|cli|-|9|false");
  mu_config_release(&c);
  ASSERT_EQ(mu_config_parse(&c, "[t]\nZZ = 1\n", "bad", &err), 0);
  ASSERT(strstr(resolve("J=a", &c), "bad:2: unknown -cfg key 'ZZ'") != NULL);
  mu_config_release(&c);
  ASSERT_EQ(mu_config_parse(&c, "J = 1\n", "nosection", &err), MU_EPARSE);
  ASSERT(strstr(mu_buf_str(&err), "nosection:1: 'key = value' before any [section]") != NULL);
  mu_buf_clear(&err);
  ASSERT_EQ(mu_config_parse(&c, "[t\n", "f", &err), MU_EPARSE);
  mu_config_release(&c);
  mu_buf_release(&err);
}

/* -cfg rdzv_auth and rdzv_token_file (issue 24 finding 1): a token by default, open only for
 * torchrun's etcd backends (which send none) or when asked, and the user's token file checked. */
TEST(config__rdzv_auth)
{
  struct mu_app *app = mu_app_new("a");
  struct mu_role *r = mu_app_add_role(app, "w");
  r->entrypoint = mu_strdup("muster");
  mu_strvec_push(&r->args, "${rdzv_endpoint}");
  struct mu_cfg cfg = {MU_KVLIST_INIT};
  struct mu_rdzv_choice own = {1, NULL, ""}, ext = {0, (char *)"h:1", ""};
  struct mu_rdzv_auth a;
  struct mu_buf err = MU_BUF_INIT(SIZE_MAX);
  ASSERT_EQ(mu_cfg_rdzv_auth(&cfg, app, &own, &a, &err), 0);
  ASSERT(!a.open && a.token_file == NULL && a.why_open == NULL);
  mu_kvlist_set(&cfg.values, "rdzv_auth", "none");
  ASSERT_EQ(mu_cfg_rdzv_auth(&cfg, app, &own, &a, &err), 0);
  ASSERT(a.open && a.why_open == NULL);
  mu_kvlist_set(&cfg.values, "rdzv_auth", "tokn");
  ASSERT_EQ(mu_cfg_rdzv_auth(&cfg, app, &own, &a, &err), MU_EINVAL);
  ASSERT(strstr(mu_buf_str(&err), "-cfg rdzv_auth='tokn' is not known; use auto") != NULL);
  /* torchrun with an etcd backend: open under auto (saying why), refused under token. */
  mu_strvec_push(&r->args, "--rdzv_backend=etcd-v2");
  mu_kvlist_set(&cfg.values, "rdzv_auth", "auto");
  ASSERT_EQ(mu_cfg_rdzv_auth(&cfg, app, &own, &a, &err), 0);
  ASSERT(a.open && strstr(a.why_open, "roles[0] runs torchrun with an etcd") != NULL);
  mu_free(a.why_open);
  ASSERT_EQ(mu_cfg_rdzv_auth(&cfg, app, &ext, &a, &err), 0); /* not the job's musterd */
  ASSERT(!a.open);
  mu_kvlist_set(&cfg.values, "rdzv_auth", "token");
  mu_buf_clear(&err);
  ASSERT_EQ(mu_cfg_rdzv_auth(&cfg, app, &own, &a, &err), MU_EINVAL);
  ASSERT(strstr(mu_buf_str(&err), "c10d") != NULL);
  /* The user's token file: read, made absolute; a missing or empty one is named. */
  mu_kvlist_set(&cfg.values, "rdzv_auth", "auto");
  mu_strvec_release(&r->args);
  mu_kvlist_set(&cfg.values, "rdzv_token_file", "/nonexistent/tok");
  mu_buf_clear(&err);
  ASSERT_EQ(mu_cfg_rdzv_auth(&cfg, app, &ext, &a, &err), MU_EINVAL);
  ASSERT(strstr(mu_buf_str(&err), "-cfg rdzv_token_file: cannot read a token from "
                                  "'/nonexistent/tok'") != NULL);
  char path[] = "/tmp/mu-test-token-XXXXXX";
  int fd = mkstemp(path);
  ASSERT(fd >= 0);
  ASSERT_EQ(write(fd, "\n", 1), 1);
  mu_kvlist_set(&cfg.values, "rdzv_token_file", path);
  mu_buf_clear(&err);
  ASSERT_EQ(mu_cfg_rdzv_auth(&cfg, app, &ext, &a, &err), MU_EINVAL);
  ASSERT(strstr(mu_buf_str(&err), "its first line is empty") != NULL);
  ASSERT_EQ(pwrite(fd, "0123456789abcdef\n", 17, 0), 17);
  close(fd);
  ASSERT_EQ(mu_cfg_rdzv_auth(&cfg, app, &ext, &a, &err), 0);
  ASSERT_STR_EQ(a.token_file, path);
  mu_free(a.token_file);
  mu_kvlist_set(&cfg.values, "rdzv_auth", "none");
  ASSERT_EQ(mu_cfg_rdzv_auth(&cfg, app, &own, &a, &err), MU_EINVAL);
  unlink(path);
  mu_buf_release(&err);
  mu_cfg_release(&cfg);
  mu_app_free(app);
}

TEST(config__inline_comments)
{
  struct mu_config c = MU_CONFIG_INIT;
  struct mu_buf err = MU_BUF_INIT(1024);
  /* docs/cli.md's example style: a '#' after a blank starts a comment, on a key line and on a
   * section line; inside quotes or without a blank before it, '#' is part of the value; ';'
   * separates list items and stays. */
  ASSERT_EQ(mu_config_parse(&c,
                            "[kubernetes]            # runopts\n"
                            "queue = test # my queue\n"
                            "namespace = ml\t# tab before\n"
                            "image_repo = reg/x#y\n"
                            "labels = \"team:a #1\"   # quoted\n"
                            "tolerations = a ; b\n",
                            "f", &err),
            0);
  ASSERT_STR_EQ(mu_config_find(&c, "kubernetes", "queue")->value, "test");
  ASSERT_STR_EQ(mu_config_find(&c, "kubernetes", "namespace")->value, "ml");
  ASSERT_STR_EQ(mu_config_find(&c, "kubernetes", "image_repo")->value, "reg/x#y");
  ASSERT_STR_EQ(mu_config_find(&c, "kubernetes", "labels")->value, "\"team:a #1\"");
  ASSERT_STR_EQ(mu_config_find(&c, "kubernetes", "tolerations")->value, "a ; b");
  mu_config_release(&c);
  mu_buf_release(&err);
}
