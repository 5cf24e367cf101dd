/* Unit tests for launcher/sched_kubernetes.c (through k8s.h) and launcher/yaml_emit.c: the
 * TorchX cases 01-07 from tests/golden/torchx-0[1-7]*, compared as parsed YAML.
 *
 * With $MU_MANIFEST_DIR set, every rendered manifest is also written there as NAME.yaml so
 * that tests/cli/t2100-k8s-schema.sh can validate them against the Volcano CRD.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "golden.h"
#include "job.h"
#include "kubernetes.h"
#include "muster/errno.h"
#include "muster/mu.h"
#include "sched.h"
#include "task.h"
#include "yaml_tree.h"

/* ---------------------------------------------------------------------------- helpers */

static void cfg_from(struct mu_cfg *cfg, const cJSON *o)
{
  const cJSON *c;
  cJSON_ArrayForEach(c, o)
  {
    if (cJSON_IsString(c))
      mu_kvlist_set(&cfg->values, c->string, c->valuestring);
  }
}

static void save_manifest(const char *name, const char *yaml)
{
  const char *dir = getenv("MU_MANIFEST_DIR");
  char *path;
  FILE *fp;
  if (dir == NULL || *dir == '\0')
    return;
  path = mu_asprintf("%s/%s.yaml", dir, name);
  fp = fopen(path, "w");
  if (fp) {
    fputs(yaml, fp);
    fclose(fp);
  }
  mu_free(path);
}

/* Renders, emits, re-parses (checking the emitter round-trips) and returns the parsed tree. */
static cJSON *render(const struct mu_app *app, const struct mu_cfg *cfg, const char *job,
                     const char *save_as)
{
  struct mu_buf err = MU_BUF_INIT(4096), y = MU_BUF_INIT(1 << 22);
  cJSON *tree = NULL, *back = NULL;
  int rc = mu_k8s_render(app, cfg, job, &tree, &err);
  if (rc != 0)
    MU__FAIL("render: %s", mu_buf_str(&err));
  ASSERT_EQ(mu_yaml_emit(tree, &y), 0);
  rc = mu_yaml_parse(y.data, y.len, &back, &err);
  if (rc != 0)
    MU__FAIL("re-parse: %s\n%s", mu_buf_str(&err), mu_buf_str(&y));
  if (!cJSON_Compare(tree, back, 1))
    MU__FAIL("YAML round trip differs:\n%s", mu_buf_str(&y));
  if (save_as)
    save_manifest(save_as, mu_buf_str(&y));
  cJSON_Delete(tree);
  mu_buf_release(&err);
  mu_buf_release(&y);
  return back;
}

/* The divergences from TorchX we chose (docs/kubernetes.md), applied to TorchX's expected
 * manifest: our version and managed-by values, and labels on the Job itself. */
static void patch_divergences(cJSON *n, const char *app_name)
{
  cJSON *c;
  if (cJSON_IsObject(n)) {
    cJSON *v = cJSON_GetObjectItemCaseSensitive(n, "torchx.pytorch.org/version");
    if (v)
      cJSON_ReplaceItemInObjectCaseSensitive(n, "torchx.pytorch.org/version",
                                             cJSON_CreateString(MU_VERSION));
    v = cJSON_GetObjectItemCaseSensitive(n, "app.kubernetes.io/managed-by");
    if (v)
      cJSON_ReplaceItemInObjectCaseSensitive(n, "app.kubernetes.io/managed-by",
                                             cJSON_CreateString("muster"));
    if (cJSON_GetObjectItemCaseSensitive(n, "apiVersion")) {
      cJSON *meta = cJSON_GetObjectItemCaseSensitive(n, "metadata");
      cJSON *l = cJSON_AddObjectToObject(meta, "labels");
      cJSON_AddStringToObject(l, "app.kubernetes.io/managed-by", "muster");
      cJSON_AddStringToObject(l, "app.kubernetes.io/name", app_name);
    }
  }
  cJSON_ArrayForEach(c, n) patch_divergences(c, app_name);
}

static void expect_equal(cJSON *got, cJSON *want)
{
  if (!cJSON_Compare(got, want, 1)) {
    char *g = cJSON_Print(got), *w = cJSON_Print(want);
    MU__FAIL("manifest differs\n--- got\n%s\n--- want\n%s", g, w);
  }
}

static cJSON *task_at(cJSON *job, int i)
{
  return cJSON_GetArrayItem(
      cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(job, "spec"), "tasks"), i);
}

static cJSON *container_of(cJSON *task)
{
  cJSON *spec =
      cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(task, "template"), "spec");
  return cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(spec, "containers"), 0);
}

static cJSON *pod_spec(cJSON *task)
{
  return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(task, "template"),
                                          "spec");
}

/* A golden case whose whole manifest is given. */
static void full_case(const char *dir, const char *expected_file, const char *save_as)
{
  cJSON *c = golden_case_json(dir), *in = cJSON_GetObjectItemCaseSensitive(c, "input"), *got, *want;
  struct mu_cfg cfg = {MU_KVLIST_INIT};
  struct mu_app *app = golden_app_from(cJSON_GetObjectItemCaseSensitive(in, "app"));
  char *rel = mu_asprintf("%s/%s", dir, expected_file), *txt = golden_slurp(rel);
  struct mu_buf err = MU_BUF_INIT(4096);

  cfg_from(&cfg, cJSON_GetObjectItemCaseSensitive(in, "cfg"));
  got = render(app, &cfg, cJSON_GetObjectItemCaseSensitive(in, "unique_app_id")->valuestring,
               save_as);
  ASSERT_EQ(mu_yaml_parse(txt, strlen(txt), &want, &err), 0);
  patch_divergences(want, app->name);
  expect_equal(got, want);
  cJSON_Delete(got);
  cJSON_Delete(want);
  cJSON_Delete(c);
  mu_free(rel);
  mu_free(txt);
  mu_app_free(app);
  mu_cfg_release(&cfg);
  mu_buf_release(&err);
}

/* The case-01 app with changes, for the cases that assert parts. */
static struct mu_app *case01_app(void)
{
  cJSON *c = golden_case_json("torchx-01_k8s_single_role_dryrun");
  struct mu_app *app = golden_app_from(
      cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(c, "input"), "app"));
  cJSON_Delete(c);
  return app;
}

/* ------------------------------------------------------------------------------ YAML */

TEST(k8s__yaml_quoting_round_trips)
{
  static const char *const vals[] = {"0",    "false",      "",    "yes",  "No",    "1e3",
                                     "a: b", "#x",         "- x", "~",    "5:13",  "0x1f",
                                     "a'b",  "line\nnext", "-1",  ".5",   "on",    "null",
                                     "x #y", " lead",      "@at", "--ok", "a/b:c", NULL};
  cJSON *o = cJSON_CreateObject(), *back = NULL;
  struct mu_buf y = MU_BUF_INIT(1 << 16), err = MU_BUF_INIT(1024);
  size_t i;
  char key[16];
  for (i = 0; vals[i]; i++) {
    snprintf(key, sizeof key, "k%zu", i);
    cJSON_AddStringToObject(o, key, vals[i]);
  }
  cJSON_AddItemToObject(o, "nested", cJSON_CreateArray());
  cJSON_AddItemToArray(cJSON_GetObjectItem(o, "nested"), cJSON_CreateObject());
  cJSON_AddNumberToObject(o, "n", 42);
  cJSON_AddTrueToObject(o, "t");
  ASSERT_EQ(mu_yaml_emit(o, &y), 0);
  ASSERT_EQ(mu_yaml_parse(y.data, y.len, &back, &err), 0);
  if (!cJSON_Compare(o, back, 1))
    MU__FAIL("round trip differs:\n%s", mu_buf_str(&y));
  cJSON_Delete(o);
  cJSON_Delete(back);
  mu_buf_release(&y);
  mu_buf_release(&err);
}

TEST(k8s__yaml_parse_error_names_line)
{
  struct mu_buf err = MU_BUF_INIT(1024);
  cJSON *out = NULL;
  const char *bad = "a: b\nc: [1, 2\n";
  ASSERT_EQ(mu_yaml_parse(bad, strlen(bad), &out, &err), MU_EPARSE);
  ASSERT(strstr(mu_buf_str(&err), "line") != NULL);
  ASSERT_NULL(out);
  mu_buf_release(&err);
}

/* ------------------------------------------------------------------------ TorchX 01-06 */

TEST(k8s__torchx01_single_role)
{
  full_case("torchx-01_k8s_single_role_dryrun", "expected.yaml", "torchx-01");
}

TEST(k8s__torchx02_multi_replica_rank0)
{
  full_case("torchx-02_k8s_multi_replica_rank0", "expected.derived.yaml", "torchx-02");
}

TEST(k8s__torchx03_mounts_devices_nodeselector)
{
  struct mu_app *app = case01_app();
  struct mu_role *r = &app->roles[0];
  struct mu_cfg cfg = {MU_KVLIST_INIT};
  struct mu_buf err = MU_BUF_INIT(1024);
  cJSON *job, *ctr, *vols, *mnts, *lim;

  mu_kvlist_set(&cfg.values, "queue", "q");
  /* a: a PVC; b: device mounts rwm and r */
  mu_role_release(r);
  memset(r, 0, sizeof *r);
  r->name = mu_strdup("foo");
  r->image = mu_strdup("pytorch/torchx:latest");
  r->entrypoint = mu_strdup("main");
  r->num_replicas = 1;
  r->min_replicas = -1;
  r->resource.cpu = 96;
  r->resource.gpu = 8;
  r->resource.memMB = 1132416;
  mu_resource_add_device(&r->resource, "vpc.amazonaws.com/efa", 4);
  mu_kvlist_set(&r->resource.capabilities, "node.kubernetes.io/instance-type", "p4d.24xlarge");
  {
    static const char *const items[] = {"type=volume", "src=name", "dst=/dst", "readonly",
                                        "type=device", "src=foo",  "dst=bar",  "perm=rwm",
                                        "type=device", "src=foo2", "dst=bar2", "perm=r"};
    struct mu_strvec sv = MU_STRVEC_INIT;
    size_t j;
    for (j = 0; j < 12; j++)
      mu_strvec_push(&sv, items[j]);
    if (mu_mounts_parse(r, sv.v, 12, &err) != 0)
      MU__FAIL("mounts: %s", mu_buf_str(&err));
    mu_strvec_release(&sv);
  }
  job = render(app, &cfg, "app-name-42", "torchx-03");
  ctr = container_of(task_at(job, 0));
  vols = cJSON_GetObjectItemCaseSensitive(pod_spec(task_at(job, 0)), "volumes");
  mnts = cJSON_GetObjectItemCaseSensitive(ctr, "volumeMounts");
  ASSERT_STR_EQ(
      cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(vols, 1), "persistentVolumeClaim"),
                          "claimName")
          ->valuestring,
      "name");
  ASSERT(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetArrayItem(mnts, 1), "readOnly")));
  ASSERT_STR_EQ(
      cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(vols, 2), "hostPath"), "path")
          ->valuestring,
      "foo");
  ASSERT(cJSON_IsFalse(cJSON_GetObjectItem(cJSON_GetArrayItem(mnts, 2), "readOnly")));
  ASSERT(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetArrayItem(mnts, 3), "readOnly")));
  ASSERT(
      cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(ctr, "securityContext"), "privileged")));
  lim = cJSON_GetObjectItem(cJSON_GetObjectItem(ctr, "resources"), "limits");
  ASSERT_STR_EQ(cJSON_GetObjectItem(lim, "cpu")->valuestring, "96000m");
  ASSERT_STR_EQ(cJSON_GetObjectItem(lim, "memory")->valuestring, "1132416M");
  ASSERT_STR_EQ(cJSON_GetObjectItem(lim, "vpc.amazonaws.com/efa")->valuestring, "4");
  lim = cJSON_GetObjectItem(cJSON_GetObjectItem(ctr, "resources"), "requests");
  ASSERT_STR_EQ(cJSON_GetObjectItem(lim, "cpu")->valuestring, "95900m");
  ASSERT_STR_EQ(cJSON_GetObjectItem(lim, "memory")->valuestring, "1131392M");
  ASSERT_NULL(cJSON_GetObjectItem(lim, "vpc.amazonaws.com/efa"));
  ASSERT_STR_EQ(cJSON_GetObjectItem(cJSON_GetObjectItem(pod_spec(task_at(job, 0)), "nodeSelector"),
                                    "node.kubernetes.io/instance-type")
                    ->valuestring,
                "p4d.24xlarge");
  cJSON_Delete(job);
  mu_app_free(app);
  mu_cfg_release(&cfg);
  mu_buf_release(&err);
}

TEST(k8s__torchx04_queue_priority_service_account)
{
  struct mu_app *app = case01_app();
  struct mu_cfg cfg = {MU_KVLIST_INIT};
  struct mu_buf err = MU_BUF_INIT(1024);
  cJSON *job = NULL, *spec;

  /* queue is required with Volcano */
  ASSERT_EQ(mu_k8s_render(app, &cfg, "x", &job, &err), MU_EINVAL);
  ASSERT(strstr(mu_buf_str(&err), "-cfg queue") != NULL);
  mu_kvlist_set(&cfg.values, "queue", "testqueue");
  mu_kvlist_set(&cfg.values, "priority_class", "high");
  mu_kvlist_set(&cfg.values, "service_account", "srvacc");
  mu_kvlist_set(&cfg.values, "image_repo", "example.com/some/repo");
  mu_free(app->roles[0].image);
  app->roles[0].image = mu_strdup("sha256:testhash");
  job = render(app, &cfg, "app-name-42", "torchx-04");
  spec = cJSON_GetObjectItem(job, "spec");
  ASSERT_STR_EQ(cJSON_GetObjectItem(spec, "queue")->valuestring, "testqueue");
  ASSERT_STR_EQ(cJSON_GetObjectItem(spec, "priorityClassName")->valuestring, "high");
  ASSERT_STR_EQ(cJSON_GetObjectItem(pod_spec(task_at(job, 0)), "serviceAccountName")->valuestring,
                "srvacc");
  ASSERT_STR_EQ(cJSON_GetObjectItem(container_of(task_at(job, 0)), "image")->valuestring,
                "example.com/some/repo:testhash");
  cJSON_Delete(job);
  mu_app_free(app);
  mu_cfg_release(&cfg);
  mu_buf_release(&err);
}

TEST(k8s__torchx05_min_replicas)
{
  struct mu_app *app = case01_app();
  struct mu_cfg cfg = {MU_KVLIST_INIT};
  cJSON *job;
  int i;
  static const int want[] = {1, 1, 0};

  mu_kvlist_set(&cfg.values, "queue", "q");
  app->roles[0].num_replicas = 3;
  app->roles[0].min_replicas = 2;
  job = render(app, &cfg, "app-name-42", "torchx-05");
  for (i = 0; i < 3; i++)
    ASSERT_EQ(cJSON_GetObjectItem(task_at(job, i), "minAvailable")->valueint, want[i]);
  ASSERT_NULL(cJSON_GetObjectItem(cJSON_GetObjectItem(job, "spec"), "minAvailable"));
  cJSON_Delete(job);
  mu_app_free(app);
  mu_cfg_release(&cfg);
}

TEST(k8s__torchx06_retries)
{
  struct mu_app *app = case01_app();
  struct mu_cfg cfg = {MU_KVLIST_INIT};
  cJSON *job, *t;

  mu_kvlist_set(&cfg.values, "queue", "q");
  app->roles[0].max_retries = 0;
  job = render(app, &cfg, "app-name-42", NULL);
  t = task_at(job, 0);
  ASSERT_NULL(cJSON_GetObjectItem(t, "maxRetry"));
  ASSERT_NULL(cJSON_GetObjectItem(t, "policies"));
  ASSERT_EQ(cJSON_GetObjectItem(cJSON_GetObjectItem(job, "spec"), "maxRetry")->valueint, 0);
  cJSON_Delete(job);
  app->roles[0].max_retries = 3;
  app->roles[0].retry_policy = MU_RETRY_REPLICA;
  job = render(app, &cfg, "app-name-42", "torchx-06");
  t = task_at(job, 0);
  ASSERT_EQ(cJSON_GetObjectItem(t, "maxRetry")->valueint, 3);
  ASSERT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(t, "policies")), 0);
  cJSON_Delete(job);
  mu_app_free(app);
  mu_cfg_release(&cfg);
}

/* ----------------------------------------------------------------------- muster's own */

TEST(k8s__runopts_node_selector_tolerations_secrets_labels)
{
  struct mu_app *app = case01_app();
  struct mu_cfg cfg = {MU_KVLIST_INIT};
  struct mu_buf err = MU_BUF_INIT(1024);
  cJSON *job, *ps, *tol, *l;

  mu_kvlist_set(&cfg.values, "queue", "q");
  mu_kvlist_set(&cfg.values, "node_selector", "disk:ssd,zone=us-east-1a");
  mu_kvlist_set(&cfg.values, "tolerations",
                "aws.amazon.com/neuron:NoSchedule;dedicated=ml:NoExecute;spot;team:ml;"
                "gpu:yes:PreferNoSchedule");
  mu_kvlist_set(&cfg.values, "image_pull_secret", "regcred");
  mu_kvlist_set(&cfg.values, "labels", "team:ml");
  mu_kvlist_set(&cfg.values, "annotations", "owner:alice");
  mu_kvlist_set(&cfg.values, "kueue_queue", "lq");
  mu_kvlist_set(&cfg.values, "scheduler_name", "default-scheduler");
  job = render(app, &cfg, "app-name-42", "runopts-all");
  ps = pod_spec(task_at(job, 0));
  ASSERT_STR_EQ(cJSON_GetObjectItem(cJSON_GetObjectItem(ps, "nodeSelector"), "zone")->valuestring,
                "us-east-1a");
  tol = cJSON_GetObjectItem(ps, "tolerations");
  ASSERT_EQ(cJSON_GetArraySize(tol), 5);
  ASSERT_STR_EQ(cJSON_GetObjectItem(cJSON_GetArrayItem(tol, 0), "operator")->valuestring, "Exists");
  ASSERT_STR_EQ(cJSON_GetObjectItem(cJSON_GetArrayItem(tol, 1), "value")->valuestring, "ml");
  ASSERT_STR_EQ(cJSON_GetObjectItem(cJSON_GetArrayItem(tol, 1), "effect")->valuestring,
                "NoExecute");
  ASSERT_NULL(cJSON_GetObjectItem(cJSON_GetArrayItem(tol, 2), "effect"));
  ASSERT_STR_EQ(cJSON_GetObjectItem(cJSON_GetArrayItem(tol, 2), "operator")->valuestring, "Exists");
  ASSERT_STR_EQ(cJSON_GetObjectItem(cJSON_GetArrayItem(tol, 3), "value")->valuestring, "ml");
  ASSERT_NULL(cJSON_GetObjectItem(cJSON_GetArrayItem(tol, 3), "effect"));
  ASSERT_STR_EQ(cJSON_GetObjectItem(cJSON_GetArrayItem(tol, 4), "key")->valuestring, "gpu");
  ASSERT_STR_EQ(cJSON_GetObjectItem(cJSON_GetArrayItem(tol, 4), "value")->valuestring, "yes");
  ASSERT_STR_EQ(cJSON_GetObjectItem(cJSON_GetArrayItem(tol, 4), "effect")->valuestring,
                "PreferNoSchedule");
  ASSERT_STR_EQ(cJSON_GetObjectItem(
                    cJSON_GetArrayItem(cJSON_GetObjectItem(ps, "imagePullSecrets"), 0), "name")
                    ->valuestring,
                "regcred");
  l = cJSON_GetObjectItem(cJSON_GetObjectItem(job, "metadata"), "labels");
  ASSERT_STR_EQ(cJSON_GetObjectItem(l, "kueue.x-k8s.io/queue-name")->valuestring, "lq");
  ASSERT_STR_EQ(cJSON_GetObjectItem(l, "team")->valuestring, "ml");
  ASSERT_STR_EQ(cJSON_GetObjectItem(cJSON_GetObjectItem(job, "spec"), "schedulerName")->valuestring,
                "default-scheduler");
  cJSON_Delete(job);

  /* bad effect, bad map */
  mu_kvlist_set(&cfg.values, "tolerations", "k:v:Never");
  ASSERT_EQ(mu_k8s_render(app, &cfg, "x", &job, &err), MU_EINVAL);
  ASSERT(strstr(mu_buf_str(&err), "NoSchedule") != NULL);
  mu_kvlist_set(&cfg.values, "tolerations", "k");
  mu_kvlist_set(&cfg.values, "labels", "novalue");
  mu_buf_clear(&err);
  ASSERT_EQ(mu_k8s_render(app, &cfg, "x", &job, &err), MU_EINVAL);
  ASSERT(strstr(mu_buf_str(&err), "-cfg labels") != NULL);
  mu_app_free(app);
  mu_cfg_release(&cfg);
  mu_buf_release(&err);
}

TEST(k8s__names_fit_63)
{
  struct mu_app *app =
      mu_app_new("A_Very_Long_Application_Name_That_Goes_On_And_On_For_Far_Too_Many_Characters");
  struct mu_role *r = mu_app_add_role(app, "an_extremely_long_role_name_for_a_trainer");
  struct mu_cfg cfg = {MU_KVLIST_INIT};
  struct mu_buf err = MU_BUF_INIT(1024);
  char *name = NULL, *task;
  cJSON *job;

  r->image = mu_strdup("img");
  r->entrypoint = mu_strdup("main");
  r->num_replicas = 12;
  setenv("MUSTER_APP_ID_SUFFIX", "abcdefghijkl", 1);
  unsetenv("MUSTER_APP_ID");
  ASSERT_EQ(mu_k8s_job_name(app, &cfg, &name, &err), 0);
  task = mu_k8s_task_name(r->name, 11);
  ASSERT(strlen(task) <= 20);
  ASSERT(strlen(name) + 1 + strlen(task) + 3 <= 63);
  ASSERT(strstr(name, "-abcdefghijkl") != NULL);
  ASSERT(name[0] == 'a');
  mu_kvlist_set(&cfg.values, "queue", "q");
  job = render(app, &cfg, name, "long-names");
  cJSON_Delete(job);
  setenv("MUSTER_APP_ID", "Bad_Name", 1);
  mu_free(name);
  ASSERT_EQ(mu_k8s_job_name(app, &cfg, &name, &err), MU_EINVAL);
  unsetenv("MUSTER_APP_ID");
  mu_free(task);
  mu_app_free(app);
  mu_cfg_release(&cfg);
  mu_buf_release(&err);
}

TEST(k8s__own_musterd_task_and_rdzv_override)
{
  struct mu_app *app = mu_app_new("ddp");
  struct mu_role *r = mu_app_add_role(app, "trainer");
  struct mu_cfg cfg = {MU_KVLIST_INIT};
  struct mu_buf err = MU_BUF_INIT(1024);
  cJSON *job, *t0, *t1, *cmd, *probe;

  r->image = mu_strdup("img");
  r->entrypoint = mu_strdup("muster");
  mu_strvec_push(&r->args, "agent");
  mu_strvec_push(&r->args, "--rdzv-endpoint");
  mu_strvec_push(&r->args, "${rdzv_endpoint}");
  r->num_replicas = 2;
  mu_kvlist_set(&cfg.values, "queue", "q");
  job = render(app, &cfg, "ddp-42", "own-musterd");
  t0 = task_at(job, 0);
  ASSERT_STR_EQ(cJSON_GetObjectItem(t0, "name")->valuestring, "musterd");
  probe = cJSON_GetObjectItem(container_of(t0), "readinessProbe");
  ASSERT_STR_EQ(cJSON_GetObjectItem(cJSON_GetObjectItem(probe, "httpGet"), "path")->valuestring,
                "/healthz");
  ASSERT_EQ(cJSON_GetObjectItem(cJSON_GetObjectItem(job, "spec"), "minSuccess")->valueint, 2);
  t1 = task_at(job, 2);
  cmd = cJSON_GetObjectItem(container_of(t1), "command");
  ASSERT_STR_EQ(cJSON_GetArrayItem(cmd, 3)->valuestring, "ddp-42-musterd-0.ddp-42:29400");
  cJSON_Delete(job);

  mu_kvlist_set(&cfg.values, "rdzv", "rdzv.infra:2379");
  job = render(app, &cfg, "ddp-42", NULL);
  ASSERT_STR_EQ(cJSON_GetObjectItem(task_at(job, 0), "name")->valuestring, "trainer-0");
  cmd = cJSON_GetObjectItem(container_of(task_at(job, 0)), "command");
  ASSERT_STR_EQ(cJSON_GetArrayItem(cmd, 3)->valuestring, "rdzv.infra:2379");
  cJSON_Delete(job);

  mu_kvlist_set(&cfg.values, "rdzv", "nohostport");
  ASSERT_EQ(mu_k8s_render(app, &cfg, "x", &job, &err), MU_EINVAL);
  ASSERT(strstr(mu_buf_str(&err), "HOST:PORT") != NULL);
  mu_app_free(app);
  mu_cfg_release(&cfg);
  mu_buf_release(&err);
}

/* ----------------------------------------------------------------------------- TorchX 07 */

TEST(k8s__torchx07_states_and_describe)
{
  struct mu_app_status st;
  struct mu_buf err = MU_BUF_INIT(1024);
  const char *completed = "{\"metadata\":{\"name\":\"testid\"},\"status\":{\"state\":{\"phase\":"
                          "\"Completed\"},\"succeeded\":1,\"taskStatusCount\":{\"echo-0\":{"
                          "\"phase\":{\"Succeeded\":1}},\"musterd\":{\"phase\":{\"Running\":1}}}}}";

  ASSERT_EQ(mu_k8s_job_state("Pending"), MU_STATE_PENDING);
  ASSERT_EQ(mu_k8s_job_state("Aborting"), MU_STATE_RUNNING);
  ASSERT_EQ(mu_k8s_job_state("Aborted"), MU_STATE_CANCELLED);
  ASSERT_EQ(mu_k8s_job_state("Restarting"), MU_STATE_RUNNING);
  ASSERT_EQ(mu_k8s_job_state("Completed"), MU_STATE_SUCCEEDED);
  ASSERT_EQ(mu_k8s_job_state("Terminating"), MU_STATE_RUNNING);
  ASSERT_EQ(mu_k8s_job_state("Terminated"), MU_STATE_FAILED);
  ASSERT_EQ(mu_k8s_job_state("Failed"), MU_STATE_FAILED);
  ASSERT_EQ(mu_k8s_job_state(NULL), MU_STATE_UNKNOWN);
  ASSERT_EQ(mu_k8s_task_state("Bound"), MU_STATE_PENDING);
  ASSERT_EQ(mu_k8s_task_state("Releasing"), MU_STATE_RUNNING);
  ASSERT_EQ(mu_k8s_task_state("Unknown"), MU_STATE_UNKNOWN);

  ASSERT_EQ(mu_k8s_parse_status(completed, "testnamespace:testid", &st, &err), 0);
  ASSERT_EQ(st.state, MU_STATE_SUCCEEDED);
  ASSERT_EQ(st.nreplicas, 1);
  ASSERT_STR_EQ(st.replicas[0].role, "echo");
  ASSERT_EQ(st.replicas[0].replica_id, 0);
  ASSERT_EQ(st.replicas[0].state, MU_STATE_SUCCEEDED);
  ASSERT_STR_EQ(st.replicas[0].hostname, "testid-echo-0-0");
  mu_app_status_release(&st);

  ASSERT_EQ(mu_k8s_parse_status("{}", "ns:x", &st, &err), 0);
  ASSERT_EQ(st.state, MU_STATE_UNKNOWN);
  ASSERT_EQ(st.nreplicas, 0);
  mu_app_status_release(&st);
  ASSERT_EQ(mu_k8s_parse_status("not json", "ns:x", &st, &err), MU_EPARSE);
  mu_app_status_release(&st);
  mu_buf_release(&err);
}

TEST(k8s__torchx07_list)
{
  struct mu_app_list_entry *l = NULL;
  size_t n = 0;
  struct mu_buf err = MU_BUF_INIT(1024);
  const char *js = "{\"items\":[{\"metadata\":{\"name\":\"cifar-trainer-something\"},"
                   "\"status\":{\"state\":{\"phase\":\"Completed\"}}},{\"metadata\":{\"name\":"
                   "\"test-trainer\"},\"status\":{\"state\":{\"phase\":\"Terminated\"}}}]}";
  ASSERT_EQ(mu_k8s_parse_list(js, "default", &l, &n, &err), 0);
  ASSERT_EQ(n, 2);
  ASSERT_STR_EQ(l[0].app_id, "default:cifar-trainer-something");
  ASSERT_EQ(l[0].state, MU_STATE_SUCCEEDED);
  ASSERT_STR_EQ(l[1].app_id, "default:test-trainer");
  ASSERT_EQ(l[1].state, MU_STATE_FAILED);
  mu_app_list_free(l, n);
  ASSERT_EQ(mu_k8s_parse_list("{}", "default", &l, &n, &err), MU_EPARSE);
  mu_buf_release(&err);
}

TEST(k8s__torchx07_log_pod_name)
{
  char *t = mu_k8s_task_name("role_blah", 1);
  ASSERT_STR_EQ(t, "roleblah-1");
  mu_free(t);
}
