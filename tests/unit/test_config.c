/* Tests for launcher/config.c: -cfg strings (TorchX's to_dict / cfg_from_str, golden 15) and
 * .musterconfig parsing and precedence. */
#include <string.h>

#include "muster/errno.h"

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
