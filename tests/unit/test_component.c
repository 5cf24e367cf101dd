/* Tests for launcher/component.c: the YAML format, argument parsing, the template language and
 * the builtin dist.ddp against TorchX's golden 11 (parse_nnodes, --name parsing, debug env). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "muster/errno.h"

#include "alloc.h"
#include "component.h"
#include "task.h"

TEST(component__parse_jobsize_golden11)
{
  long mn, mx, np;
  ASSERT_EQ(mu_parse_jobsize("2", &mn, &mx, &np), 0);
  ASSERT(mn == 1 && mx == 1 && np == 2);
  ASSERT_EQ(mu_parse_jobsize("1x2", &mn, &mx, &np), 0);
  ASSERT(mn == 1 && mx == 1 && np == 2);
  ASSERT_EQ(mu_parse_jobsize("1:2x3", &mn, &mx, &np), 0);
  ASSERT(mn == 1 && mx == 2 && np == 3);
  const char *bad[] = {"1x", "x2", ":3", ":2x1", "1x2:3", "3:1x2", "0x2", "ax2", ""};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    ASSERT_EQ(mu_parse_jobsize(bad[i], &mn, &mx, &np), MU_EINVAL);
}

/* Builds an app from a builtin with the given argv (NULL-terminated). */
static struct mu_app *build(const char *name, const char *const *args, struct mu_buf *err)
{
  struct mu_component *c = NULL;
  if (mu_component_load(name, &c, err) != 0)
    return NULL;
  struct mu_strvec sv = MU_STRVEC_INIT;
  for (size_t i = 0; args[i] != NULL; i++)
    mu_strvec_push(&sv, args[i]);
  struct mu_app *app = NULL;
  mu_component_build(c, (int)sv.n, sv.v, NULL, &app, err);
  mu_strvec_release(&sv);
  mu_component_free(c);
  return app;
}

static char *joined_args(const struct mu_role *r)
{
  struct mu_buf b = MU_BUF_INIT(1 << 16);
  mu_buf_puts(&b, r->entrypoint);
  for (size_t i = 0; i < r->args.n; i++)
    mu_buf_printf(&b, " %s", r->args.v[i]);
  return mu_buf_detach(&b);
}

TEST(component__ddp_name_parsing_golden11)
{
  const struct {
    const char *name, *script, *m, *exp, *run;
  } cases[] = {
      {"foo/bar", "bar/baz.py", NULL, "foo", "bar"},
      {"foo/", "bar/baz.py", NULL, "foo", "baz"},
      {"/bar", "bar/baz.py", NULL, "default-experiment", "bar"},
      {"foobar", NULL, "foo.bar", "default-experiment", "foobar"},
      {"foo/", NULL, "foo.bar.baz", "foo", "baz"},
      {"/", "foo/bar.py", NULL, "default-experiment", "bar"},
      {"baz/trial_1", "foo/bar.py", NULL, "baz", "trial_1"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct mu_buf err = MU_BUF_INIT(4096);
    const char *args[] = {"--name", cases[i].name, cases[i].script ? "--script" : "-m",
                          cases[i].script ? cases[i].script : cases[i].m, NULL};
    struct mu_app *app = build("dist.ddp", args, &err);
    if (app == NULL)
      MU__FAIL("case %zu: %s", i, mu_buf_str(&err));
    ASSERT_STR_EQ(app->name, cases[i].run);
    ASSERT_STR_EQ(mu_kvlist_get(&app->roles[0].env, "MUSTER_TRACKING_EXPERIMENT_NAME"),
                  cases[i].exp);
    ASSERT_STR_EQ(mu_kvlist_get(&app->roles[0].env, "MUSTER_TRACKING_RUN_NAME"), cases[i].run);
    mu_app_free(app);
    mu_buf_release(&err);
  }
}

TEST(component__ddp_appdef)
{
  struct mu_buf err = MU_BUF_INIT(4096);
  const char *a1[] = {"-j",     "2x8",      "--gpu",    "8",  "--cpu", "32",  "--memMB",
                      "200000", "--script", "train.py", "--", "--lr",  "0.1", NULL};
  struct mu_app *app = build("dist.ddp", a1, &err);
  ASSERT_NOT_NULL(app);
  const struct mu_role *r = &app->roles[0];
  ASSERT_STR_EQ(app->name, "train");
  ASSERT_STR_EQ(r->name, "train");
  ASSERT_EQ(r->num_replicas, 2);
  ASSERT_EQ(r->min_replicas, 2); /* always set, as TorchX */
  ASSERT_EQ(r->resource.cpu, 32);
  ASSERT_EQ(r->resource.gpu, 8);
  ASSERT_EQ(r->resource.memMB, 200000);
  ASSERT_STR_EQ(mu_kvlist_get(&r->env, "LOGLEVEL"), "WARNING");
  char *cmd = joined_args(r);
  ASSERT_STR_EQ(cmd, "muster agent --nnodes 2 --nproc-per-node 8 --rdzv-endpoint ${rdzv_endpoint} "
                     "--rdzv-id ${app_id} --max-restarts 0 --role train -- python3 -u train.py "
                     "--lr 0.1");
  mu_free(cmd);
  mu_app_free(app);

  const char *a2[] = {"-j",    "2x1",       "--script",   "foo.py",   "--debug",       "True",
                      "--env", "A=1,B=x y", "--launcher", "torchrun", "--max_retries", "3",
                      NULL};
  app = build("dist.ddp", a2, &err);
  ASSERT_NOT_NULL(app);
  r = &app->roles[0];
  ASSERT_STR_EQ(mu_kvlist_get(&r->env, "B"), "x y");
  ASSERT_STR_EQ(mu_kvlist_get(&r->env, "CUDA_LAUNCH_BLOCKING"), "1");
  ASSERT_STR_EQ(mu_kvlist_get(&r->env, "NCCL_DESYNC_DEBUG"), "1");
  ASSERT_STR_EQ(mu_kvlist_get(&r->env, "TORCH_DISTRIBUTED_DEBUG"), "DETAIL");
  ASSERT_STR_EQ(mu_kvlist_get(&r->env, "TORCH_SHOW_CPP_STACKTRACES"), "1");
  ASSERT_EQ(r->max_retries, 3);
  cmd = joined_args(r);
  ASSERT_STR_EQ(cmd, "torchrun --rdzv_backend c10d --rdzv_endpoint ${c10d_endpoint} --rdzv_conf "
                     "is_host=false --rdzv_id ${app_id} --nnodes 2 --nproc_per_node 1 "
                     "--max_restarts 3 --redirects=1 --tee=1 --role foo foo.py");
  mu_free(cmd);
  mu_app_free(app);

  const char *a3[] = {"-j",     "4",         "-m",       "my.pkg.trainer",
                      "--name", "exp1/run7", "--mounts", "type=bind,src=/dst,dst=/dst,readonly",
                      NULL};
  app = build("dist.ddp", a3, &err);
  ASSERT_NOT_NULL(app);
  ASSERT_STR_EQ(app->name, "run7");
  ASSERT_STR_EQ(app->roles[0].name, "trainer");
  ASSERT_EQ(app->roles[0].num_replicas, 1);
  ASSERT_EQ(app->roles[0].nmounts, 1);
  cmd = joined_args(&app->roles[0]);
  ASSERT(strstr(cmd, "--nproc-per-node 4") != NULL);
  ASSERT(strstr(cmd, "-- python3 -u -m my.pkg.trainer") != NULL);
  mu_free(cmd);
  mu_app_free(app);

  const char *bad[] = {"--script", "a.py", "-m", "b", NULL};
  ASSERT_NULL(build("dist.ddp", bad, &err));
  ASSERT(strstr(mu_buf_str(&err), "exactly one of --script and -m must be specified") != NULL);
  mu_buf_release(&err);
}

static int build_text(const char *yaml, const char *const *args, struct mu_app **app,
                      struct mu_buf *err)
{
  struct mu_component *c = NULL;
  int rc = mu_component_parse(yaml, strlen(yaml), "test.yaml", &c, err);
  if (rc != 0)
    return rc;
  struct mu_strvec sv = MU_STRVEC_INIT;
  for (size_t i = 0; args[i] != NULL; i++)
    mu_strvec_push(&sv, args[i]);
  rc = mu_component_build(c, (int)sv.n, sv.v, NULL, app, err);
  mu_strvec_release(&sv);
  mu_component_free(c);
  return rc;
}

static const char tmpl[] = "name: t\n"
                           "params:\n"
                           "  - {name: flag, type: bool, default: 'false'}\n"
                           "  - {name: opt, type: str}\n"
                           "  - {name: n, type: int, default: '2'}\n"
                           "  - {name: tags, type: list}\n"
                           "  - {name: kv, type: map}\n"
                           "  - {name: rest, type: list, remainder: true}\n"
                           "app:\n"
                           "  name: ${opt ?? 'noname'}\n"
                           "  roles:\n"
                           "    - name: r\n"
                           "      entrypoint: prog\n"
                           "      args:\n"
                           "        - {if: flag, then: [--flag], else: [--noflag]}\n"
                           "        - {if: \"!opt\", then: [--no-opt]}\n"
                           "        - {if: opt == x, then: [--opt-is-x]}\n"
                           "        - ${tags}\n"
                           "        - n=${n}/${app_id}/$${HOME}\n"
                           "        - ${rest|qjoin}\n"
                           "        - ${rest}\n"
                           "      env:\n"
                           "        - {A: '1'}\n"
                           "        - ${kv}\n"
                           "      num_replicas: ${n}\n";

TEST(component__template_language)
{
  struct mu_buf err = MU_BUF_INIT(4096);
  struct mu_app *app = NULL;
  const char *a1[] = {NULL};
  ASSERT_EQ(build_text(tmpl, a1, &app, &err), 0);
  char *cmd = joined_args(&app->roles[0]);
  ASSERT_STR_EQ(cmd, "prog --noflag --no-opt n=2/${app_id}/$${HOME} ");
  ASSERT_STR_EQ(app->name, "noname");
  ASSERT_EQ(app->roles[0].num_replicas, 2);
  mu_free(cmd);
  mu_app_free(app);
  const char *a2[] = {"--flag", "--opt=x", "--tags", "a,b",  "--kv", "A=2,B=3",
                      "--n",    "3",       "--",     "it's", "z",    NULL};
  ASSERT_EQ(build_text(tmpl, a2, &app, &err), 0);
  cmd = joined_args(&app->roles[0]);
  ASSERT_STR_EQ(cmd, "prog --flag --opt-is-x a b n=3/${app_id}/$${HOME} 'it'\"'\"'s' z it's z");
  ASSERT_STR_EQ(mu_kvlist_get(&app->roles[0].env, "A"), "2");
  ASSERT_STR_EQ(mu_kvlist_get(&app->roles[0].env, "B"), "3");
  mu_free(cmd);
  mu_app_free(app);
  const char *a3[] = {"--flg", NULL};
  ASSERT_EQ(build_text(tmpl, a3, &app, &err), MU_EINVAL);
  ASSERT(strstr(mu_buf_str(&err), "unknown argument '--flg'; did you mean '--flag'") != NULL);
  mu_buf_release(&err);
}

static const char split_tmpl[] = "name: t\n"
                                 "params:\n"
                                 "  - {name: sa, type: str, default: ''}\n"
                                 "  - {name: cs, type: str, default: ok, pattern: '[a-z0-9_-]+'}\n"
                                 "  - {name: rest, type: list, remainder: true}\n"
                                 "app:\n"
                                 "  name: x\n"
                                 "  roles:\n"
                                 "    - name: r\n"
                                 "      entrypoint: prog\n"
                                 "      args:\n"
                                 "        - ${sa|split}\n"
                                 "        - ${rest}\n"
                                 "        - q=${sa|split|qjoin}\n"
                                 "        - c=${cs}\n";

/* The split filter: one string -> a spliced list, quotes and backslashes as in sh. */
TEST(component__split_filter)
{
  struct mu_buf err = MU_BUF_INIT(4096);
  struct mu_app *app = NULL;
  const char *a1[] = {"--sa", "--a 1  --b 'x y' \"q\\\"z\" '' a\\ b\\\n c\n\td", "--", "e", NULL};
  ASSERT_EQ(build_text(split_tmpl, a1, &app, &err), 0);
  struct mu_role *r = &app->roles[0];
  ASSERT_EQ(r->args.n, 12);
  const char *want[] = {"--a", "1", "--b", "x y", "q\"z", "", "a b", "c", "d", "e"};
  for (size_t i = 0; i < 10; i++)
    ASSERT_STR_EQ(r->args.v[i], want[i]);
  ASSERT_STR_EQ(r->args.v[10], "q=--a 1 --b 'x y' 'q\"z' '' 'a b' c d");
  ASSERT_STR_EQ(r->args.v[11], "c=ok");
  mu_app_free(app);
  /* An empty string splits into nothing. */
  const char *a2[] = {NULL};
  ASSERT_EQ(build_text(split_tmpl, a2, &app, &err), 0);
  ASSERT_EQ(app->roles[0].args.n, 2);
  ASSERT_STR_EQ(app->roles[0].args.v[0], "q=");
  mu_app_free(app);
  const char *bad[][3] = {{"--sa", "a 'b", NULL}, {"--sa", "a \"b", NULL}, {"--sa", "a\\", NULL}};
  const char *why[] = {"unterminated ' quote", "unterminated \" quote", "trailing backslash"};
  for (size_t i = 0; i < 3; i++) {
    mu_buf_clear(&err);
    ASSERT_EQ(build_text(split_tmpl, bad[i], &app, &err), MU_EINVAL);
    ASSERT(strstr(mu_buf_str(&err), "argument '--sa': cannot split") != NULL);
    ASSERT(strstr(mu_buf_str(&err), why[i]) != NULL);
  }
  /* Unknown filters and filters after split are errors. */
  mu_buf_clear(&err);
  ASSERT_EQ(build_text("name: t\nparams: [{name: a}]\napp: {roles: [{name: r, entrypoint: "
                       "'${a|nope}'}]}\n",
                       a2, &app, &err),
            MU_EINVAL);
  ASSERT(strstr(mu_buf_str(&err), "unknown filter 'nope'") != NULL);
  mu_buf_clear(&err);
  ASSERT_EQ(build_text("name: t\nparams: [{name: a}]\napp: {roles: [{name: r, entrypoint: "
                       "'${a|split|stem}'}]}\n",
                       a2, &app, &err),
            MU_EINVAL);
  ASSERT(strstr(mu_buf_str(&err), "only join or qjoin may follow it") != NULL);
  mu_buf_release(&err);
}

/* pattern: on str parameters, the whole value must match. */
TEST(component__pattern)
{
  struct mu_buf err = MU_BUF_INIT(4096);
  struct mu_app *app = NULL;
  const char *good[] = {"--cs", "bert-large_2", NULL};
  ASSERT_EQ(build_text(split_tmpl, good, &app, &err), 0);
  ASSERT_STR_EQ(app->roles[0].args.v[app->roles[0].args.n - 1], "c=bert-large_2");
  mu_app_free(app);
  const char *bads[] = {"a b", "x/../y", "", "ok;rm"};
  for (size_t i = 0; i < sizeof(bads) / sizeof(bads[0]); i++) {
    const char *bad[] = {"--cs", bads[i], NULL};
    mu_buf_clear(&err);
    ASSERT_EQ(build_text(split_tmpl, bad, &app, &err), MU_EINVAL);
    char want[128];
    snprintf(want, sizeof(want), "argument '--cs': '%s' does not match the pattern [a-z0-9_-]+",
             bads[i]);
    ASSERT(strstr(mu_buf_str(&err), want) != NULL);
    ASSERT(strstr(mu_buf_str(&err), "+ (") == NULL); /* no help: nothing in parentheses */
  }
  /* the parameter's help says what the pattern means (utils.copy: no s3://) */
  const char *s3[] = {"--src", "s3://b/k", NULL};
  mu_buf_clear(&err);
  ASSERT_EQ(build_text("name: t\nparams: [{name: src, pattern: '[^:]+', help: 'a local path, no "
                       "s3://'}]\napp: {name: x, roles: [{name: r, image: i, entrypoint: e}]}\n",
                       s3, &app, &err),
            MU_EINVAL);
  ASSERT(strstr(mu_buf_str(&err), "does not match the pattern [^:]+ (a local path, no s3://); "
                                  "give a value") != NULL);
  const char *none[] = {NULL};
  mu_buf_clear(&err);
  ASSERT_EQ(build_text("name: t\nparams: [{name: a, pattern: '[a-'}]\napp: {roles: []}\n", none,
                       &app, &err),
            MU_EINVAL);
  ASSERT(strstr(mu_buf_str(&err), "params[0].pattern: '[a-' is not a POSIX extended regular") !=
         NULL);
  mu_buf_clear(&err);
  ASSERT_EQ(build_text("name: t\nparams: [{name: a, type: int, pattern: '[0-9]'}]\n"
                       "app: {roles: []}\n",
                       none, &app, &err),
            MU_EINVAL);
  ASSERT(strstr(mu_buf_str(&err), "only str parameters take a pattern") != NULL);
  /* A default that does not match is an error too. */
  mu_buf_clear(&err);
  ASSERT_EQ(build_text("name: t\nparams: [{name: a, default: 'A', pattern: '[a-z]+'}]\n"
                       "app: {roles: [{name: r, entrypoint: x}]}\n",
                       none, &app, &err),
            MU_EINVAL);
  ASSERT(strstr(mu_buf_str(&err), "default of --a: 'A' does not match") != NULL);
  mu_buf_release(&err);
}

/* A pattern whose counted repeats, spelled out as regcomp spells them, pass 1000 parts is refused
 * before regcomp (whose memory grows by the square of that); the count follows groups, brackets,
 * escapes and alternatives. */
TEST(component__pattern_parts)
{
  struct mu_buf err = MU_BUF_INIT(4096);
  struct mu_buf yaml = MU_BUF_INIT(4096);
  const char *ok[] = {"a{0,1000}",   "(ab){500}",  "a{999,}",           "a+{500}",   "\\{{1000}",
                      "[]{(]{1000}", "(a|b){500}", "[[:alpha:]]{1000}", "a|b{1,998}"};
  const char *bad[] = {"a{0,1001}",      "(ab){501}",
                       "a{1000,}",       "a+{501}",
                       "\\{{1001}",      "[]{(]{1001}",
                       "(a|b){501}",     "(a{1,200}){1,200}",
                       "a{99999999999}", "(a{2}){2}{2}{2}{2}{2}{2}{2}{2}{2}"};
  for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]) + sizeof(bad) / sizeof(bad[0]); i++) {
    int good = i < sizeof(ok) / sizeof(ok[0]);
    const char *re = good ? ok[i] : bad[i - sizeof(ok) / sizeof(ok[0])];
    mu_buf_clear(&yaml);
    mu_buf_clear(&err);
    mu_buf_printf(&yaml, "name: t\nparams: [{name: a, pattern: '%s'}]\napp: {roles: []}\n", re);
    struct mu_component *c = NULL;
    int rc = mu_component_parse(mu_buf_str(&yaml), yaml.len, "test.yaml", &c, &err);
    mu_component_free(c);
    if (good) {
      if (rc != 0)
        fprintf(stderr, "pattern %s: %s\n", re, mu_buf_str(&err));
      ASSERT_EQ(rc, 0);
      continue;
    }
    ASSERT_EQ(rc, MU_EINVAL);
    ASSERT(strstr(mu_buf_str(&err), "repeats its parts past 1000") != NULL);
  }
  /* A repeat of a group that can match the empty string: regcomp's time and memory explode
   * (32 of (a*)* take minutes, 300 of (a*)? 3 GB), whatever the count. */
  const char *fine[] = {"(a*b)*", "(a|b)*", "([a-z]+)?", "(a*)(b?)", "(x(a*))+", "(a?b?c)*"};
  const char *empty[] = {"(a*)*", "(a?){0,9}", "(|a)+", "((a*))?",   "(a|b*){2}",
                         "(^)*",  "((ab)*)*",  "(a*)?", "x(y|(z?))*"};
  for (size_t i = 0; i < sizeof(fine) / sizeof(fine[0]) + sizeof(empty) / sizeof(empty[0]); i++) {
    int good = i < sizeof(fine) / sizeof(fine[0]);
    const char *re = good ? fine[i] : empty[i - sizeof(fine) / sizeof(fine[0])];
    mu_buf_clear(&yaml);
    mu_buf_clear(&err);
    mu_buf_printf(&yaml, "name: t\nparams: [{name: a, pattern: '%s'}]\napp: {roles: []}\n", re);
    struct mu_component *c = NULL;
    int rc = mu_component_parse(mu_buf_str(&yaml), yaml.len, "test.yaml", &c, &err);
    mu_component_free(c);
    if (rc != (good ? 0 : MU_EINVAL))
      fprintf(stderr, "pattern %s: %d %s\n", re, rc, mu_buf_str(&err));
    ASSERT_EQ(rc, good ? 0 : MU_EINVAL);
    ASSERT(good || strstr(mu_buf_str(&err), "a group that can match the empty string") != NULL);
  }
  mu_buf_release(&yaml);
  mu_buf_release(&err);
}

TEST(component__format_errors)
{
  struct mu_buf err = MU_BUF_INIT(4096);
  struct mu_app *app = NULL;
  const char *none[] = {NULL};
  ASSERT_EQ(build_text("name: t\nparms: []\napp: {roles: []}\n", none, &app, &err), MU_EINVAL);
  ASSERT(strstr(mu_buf_str(&err), "unknown key 'parms'; did you mean 'params'") != NULL);
  mu_buf_clear(&err);
  ASSERT_EQ(build_text("name: t\nparams: [{name: a, type: double}]\napp: {roles: []}\n", none, &app,
                       &err),
            MU_EINVAL);
  ASSERT(strstr(mu_buf_str(&err), "params[0].type: unknown type 'double'") != NULL);
  mu_buf_clear(&err);
  ASSERT_EQ(build_text("name: t\napp: {roles: [{name: r, entrypoint: '${nope ?? x}'}]}\n", none,
                       &app, &err),
            MU_EINVAL);
  ASSERT(strstr(mu_buf_str(&err), "'nope' is not a parameter") == NULL); /* first alt macro */
  mu_buf_clear(&err);
  ASSERT_EQ(build_text("name: t\n  bad: [\n", none, &app, &err), MU_EPARSE);
  ASSERT(strstr(mu_buf_str(&err), "test.yaml:") != NULL);
  mu_buf_release(&err);
}

TEST(component__builtins_listed)
{
  struct mu_strvec names = MU_STRVEC_INIT;
  ASSERT_EQ(mu_component_builtins(&names, NULL), 0);
  const char *want[] = {"dist.ddp", "utils.booth", "utils.echo", "utils.python", "utils.sh"};
  for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
    int found = 0;
    for (size_t k = 0; k < names.n; k++)
      if (strcmp(names.v[k], want[i]) == 0)
        found = 1;
    if (!found)
      MU__FAIL("builtin %s missing", want[i]);
  }
  mu_strvec_release(&names);
}

/* Conditions with && and integer comparisons, error_if checks, float parameters, mounts as
 * mappings (issue 26: aws.trn1_ddp's instance checks, Python components' mounts). */
static const char cond_tmpl[] =
    "name: c\n"
    "params:\n"
    "  - {name: itype, type: str, default: big}\n"
    "  - {name: nodes, type: int, default: '1'}\n"
    "  - {name: procs, type: int}\n"
    "  - {name: lr, type: float, default: '0.5'}\n"
    "checks:\n"
    "  - {error_if: \"itype == small && nodes > 1\", message: small is one node only}\n"
    "  - {error_if: \"procs >= 3 && itype == small\"}\n"
    "app:\n"
    "  name: c\n"
    "  roles:\n"
    "    - name: r\n"
    "      entrypoint: e\n"
    "      args:\n"
    "        - {if: \"nodes > 1\", then: multi, else: single}\n"
    "        - {if: \"procs < 2\", then: few}\n"
    "        - {if: \"nodes <= 1 && !procs\", then: noprocs}\n"
    "        - ${lr}\n"
    "      mounts:\n"
    "        - {type: bind, src: '/a,b', dst: /c, readonly: 'true'}\n"
    "        - type=volume,src=pvc,dst=/d\n";

static const char *cond_args(const char *const *args, struct mu_buf *err)
{
  static char out[256];
  struct mu_app *app = NULL;
  mu_buf_clear(err);
  if (build_text(cond_tmpl, args, &app, err) != 0)
    return mu_buf_str(err);
  struct mu_buf b = MU_BUF_INIT(SIZE_MAX);
  for (size_t i = 0; i < app->roles[0].args.n; i++)
    mu_buf_printf(&b, "%s%s", i ? " " : "", app->roles[0].args.v[i]);
  const struct mu_mount *m = app->roles[0].mounts;
  mu_buf_printf(&b, " | %s %s %d %s", m[0].src, m[0].dst, m[0].read_only, m[1].src);
  snprintf(out, sizeof(out), "%s", mu_buf_str(&b));
  mu_buf_release(&b);
  mu_app_free(app);
  return out;
}

TEST(component__conditions_checks_float)
{
  struct mu_buf err = MU_BUF_INIT(4096);
  const char *a0[] = {NULL};
  ASSERT_STR_EQ(cond_args(a0, &err), "single noprocs 0.5 | /a,b /c 1 pvc");
  const char *a1[] = {"--nodes", "3", "--procs", "1", "--lr", "0.1", NULL};
  ASSERT_STR_EQ(cond_args(a1, &err), "multi few 0.1 | /a,b /c 1 pvc");
  const char *a2[] = {"--itype", "small", "--nodes", "2", NULL};
  ASSERT_STR_EQ(cond_args(a2, &err), "c: small is one node only");
  const char *a3[] = {"--itype", "small", "--procs", "3", NULL};
  ASSERT_STR_EQ(cond_args(a3, &err),
                "c: these arguments are refused (procs >= 3 && itype == small)");
  const char *a4[] = {"--itype", "small", "--procs", "2", NULL};
  ASSERT_STR_EQ(cond_args(a4, &err), "single 0.5 | /a,b /c 1 pvc");
  const char *a5[] = {"--lr", "fast", NULL};
  ASSERT_STR_EQ(cond_args(a5, &err), "c: argument '--lr' expects a number, got 'fast'");
  /* A comparison with a word that is no number, and a misspelt parameter in any part of &&. */
  struct mu_app *app = NULL;
  mu_buf_clear(&err);
  ASSERT_EQ(build_text("name: t\nparams: [{name: n, type: str, default: x}]\n"
                       "checks: [{error_if: \"n > 1\"}]\napp: {name: t, roles: []}\n",
                       a0, &app, &err),
            MU_EINVAL);
  ASSERT(strstr(mu_buf_str(&err), "condition 'n > 1': 'x' is not a number") != NULL);
  mu_buf_clear(&err);
  ASSERT_EQ(build_text("name: t\nparams: [{name: n, type: int, default: '0'}]\n"
                       "checks: [{error_if: \"n > 1 && nn == 2\"}]\napp: {name: t, roles: []}\n",
                       a0, &app, &err),
            MU_EINVAL);
  ASSERT(strstr(mu_buf_str(&err), "refers to something that is not a parameter") != NULL);
  mu_buf_release(&err);
}

TEST(component__jobsize_messages)
{
  struct mu_buf err = MU_BUF_INIT(4096);
  struct mu_app *app = NULL;
  const char *yaml = "name: j\nparams: [{name: j, short: j, type: jobsize}]\n"
                     "app: {name: j, roles: [{name: r, entrypoint: e}]}\n";
  static const struct {
    const char *j, *want;
  } cases[] = {
      {"3:2x1", "the minimum of 3 nodes is above the maximum of 2; write MIN:MAXxNPROC with MIN "
                "<= MAX (e.g. 2:3x1)"},
      {"0x2", "'0x2': 0 nodes; a job runs on 1 node or more (e.g. 1x2)"},
      {"2x0", "'2x0': 0 workers per node; give 1 or more (e.g. 2x1)"},
      {"0:2x1", "'0:2x1': 0 nodes; an elastic job runs on 1 to MAX nodes"},
      {"0", "'0': 0 workers; give 1 or more"},
      {"x2", "expects NPROC, NNODESxNPROC or MIN:MAXxNPROC"},
      {"99999999999999999999x1", "expects NPROC, NNODESxNPROC or MIN:MAXxNPROC"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    const char *args[] = {"-j", cases[i].j, NULL};
    mu_buf_clear(&err);
    ASSERT_EQ(build_text(yaml, args, &app, &err), MU_EINVAL);
    if (strstr(mu_buf_str(&err), cases[i].want) == NULL)
      fprintf(stderr, "# -j %s: %s\n", cases[i].j, mu_buf_str(&err));
    ASSERT(strstr(mu_buf_str(&err), cases[i].want) != NULL);
  }
  mu_buf_release(&err);
}
