/* Unit tests for launcher/sched_kubernetes.c (through k8s.h) and launcher/yaml_emit.c: the
 * TorchX cases 01-07 (tests/golden/torchx-0[1-7]*), each driven by its case.json through
 * golden.h: every subcase's input comes from the file and its expectation is checked here, and
 * a subcase without a check fails the test. Then muster's own kubernetes features.
 *
 * With $MU_MANIFEST_DIR set, every rendered manifest is also written there as NAME.yaml so
 * that tests/cli/t2010-k8s-schema.sh can validate them against the Volcano CRD.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "component.h"
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

/* muster's own divergence on every Job: the app as submitted in an annotation (describe). */
static void expect_equal(cJSON *got, cJSON *want)
{
  cJSON *meta = cJSON_GetObjectItemCaseSensitive(got, "metadata");
  cJSON *ann = cJSON_GetObjectItemCaseSensitive(meta, "annotations");
  ASSERT(cJSON_GetObjectItemCaseSensitive(ann, MU_K8S_APP_ANNOTATION) != NULL);
  cJSON_DeleteItemFromObjectCaseSensitive(ann, MU_K8S_APP_ANNOTATION);
  if (ann->child == NULL)
    cJSON_DeleteItemFromObjectCaseSensitive(meta, "annotations");
  if (!cJSON_Compare(got, want, 1)) {
    char *g = cJSON_Print(got), *w = cJSON_Print(want);
    MU__FAIL("manifest differs\n--- got\n%s\n--- want\n%s", g, w);
  }
}

/* A plain cfg of the given -cfg values. */
static void cfg_set(struct mu_cfg *cfg, const cJSON *o)
{
  mu_cfg_release(cfg);
  memset(cfg, 0, sizeof *cfg);
  cfg_from(cfg, o);
}

static cJSON *task_at(cJSON *job, int i)
{
  return cJSON_GetArrayItem(
      cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(job, "spec"), "tasks"), i);
}

static cJSON *pod_spec(cJSON *task)
{
  return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(task, "template"),
                                          "spec");
}

static cJSON *container_of(cJSON *task)
{
  return cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(pod_spec(task), "containers"), 0);
}

/* A copy of array a without its first `from` items. Returns: a new array (cJSON_Delete). */
static cJSON *array_from(const cJSON *a, int from)
{
  cJSON *out = cJSON_CreateArray();
  for (int i = from; i < cJSON_GetArraySize(a); i++)
    cJSON_AddItemToArray(out, cJSON_Duplicate(cJSON_GetArrayItem(a, i), 1));
  return out;
}

/* The tasks of a job that run the app (not the job's own musterd task). */
static int is_musterd_task(const cJSON *task)
{
  const cJSON *n = cJSON_GetObjectItemCaseSensitive(task, "name");
  return cJSON_IsString(n) && strcmp(n->valuestring, "musterd") == 0;
}

/* The app of case 01 ("input"."app"). */
static struct mu_app *case01_app(void)
{
  cJSON *c = golden_case_json("torchx-01_k8s_single_role_dryrun");
  struct mu_app *app = golden_app_from(golden_at(c, "input", "app", (const char *)NULL));
  cJSON_Delete(c);
  return app;
}

/* A role of a subcase rendered alone in the job "app-name-42" with -cfg queue=q. TorchX renders
 * `image: ""` for a role without one; muster refuses that on kubernetes (DIVERGENCES.md), so
 * such a role gets the image "img". Returns: the job (cJSON_Delete). */
static cJSON *render_role(const cJSON *role_json, const char *save_as)
{
  struct mu_app *app = golden_app_of_role("test", role_json);
  struct mu_cfg cfg = {MU_KVLIST_INIT};
  cJSON *job;
  if (app->roles[0].image == NULL)
    app->roles[0].image = mu_strdup("img");
  mu_kvlist_set(&cfg.values, "queue", "q");
  job = render(app, &cfg, "app-name-42", save_as);
  mu_app_free(app);
  mu_cfg_release(&cfg);
  return job;
}

/* The kubectl stand-in (golden.h) answering OUT on stdout. Returns: its directory. */
static char *fake_kubectl(const char *out, const char *err, int rc)
{
  char *dir = golden_tools_dir();
  golden_tool(dir, "kubectl", out, err, rc);
  return dir;
}

/* ======================================================================= case 01: one role */

/* The whole manifest: parsed-YAML equality with expected.yaml after the divergences. */
static void c01_main(const cJSON *c, const cJSON *item)
{
  const cJSON *in = golden_at(item, "input", (const char *)NULL);
  struct mu_cfg cfg = {MU_KVLIST_INIT};
  struct mu_app *app = golden_app_from(golden_at(in, "app", (const char *)NULL));
  char *rel = mu_asprintf("torchx-01_k8s_single_role_dryrun/%s", golden_str(c, "expected_file"));
  char *txt = golden_slurp(rel);
  struct mu_buf err = MU_BUF_INIT(4096);
  cJSON *got, *want = NULL;

  ASSERT_STR_EQ(golden_str(in, "scheduler"), "kubernetes");
  cfg_from(&cfg, golden_at(in, "cfg", (const char *)NULL));
  got = render(app, &cfg, golden_str(in, "unique_app_id"), "torchx-01");
  ASSERT_EQ(mu_yaml_parse(txt, strlen(txt), &want, &err), 0);
  patch_divergences(want, app->name);
  expect_equal(got, want);
  cJSON_Delete(got);
  cJSON_Delete(want);
  mu_free(rel);
  mu_free(txt);
  mu_app_free(app);
  mu_cfg_release(&cfg);
  mu_buf_release(&err);
}

/* The command of role 0 replica 0, macros resolved. */
static void c01_command(const cJSON *c, const cJSON *item)
{
  const cJSON *in = golden_at(c, "input", (const char *)NULL);
  struct mu_app *app = golden_app_from(golden_at(in, "app", (const char *)NULL));
  struct mu_cfg cfg = {MU_KVLIST_INIT};
  cJSON *job;
  cfg_from(&cfg, golden_at(in, "cfg", (const char *)NULL));
  job = render(app, &cfg, golden_str(in, "unique_app_id"), NULL);
  GOLDEN_JSON_EQ(cJSON_GetObjectItemCaseSensitive(container_of(task_at(job, 0)), "command"), item,
                 "container command");
  cJSON_Delete(job);
  mu_app_free(app);
  mu_cfg_release(&cfg);
}

/* "role_to_pod(service_account='X')": serviceAccountName X on the pod; none without it. */
static void c01_service_account(const cJSON *c, const cJSON *item)
{
  char *sa = golden_quoted(item->string, 0);
  struct mu_app *app = case01_app();
  struct mu_cfg cfg = {MU_KVLIST_INIT};
  cJSON *job;
  (void)c;
  ASSERT(strstr(item->valuestring, "serviceAccountName") != NULL);
  mu_kvlist_set(&cfg.values, "queue", "q");
  job = render(app, &cfg, "app-name-42", NULL);
  ASSERT_NULL(cJSON_GetObjectItemCaseSensitive(pod_spec(task_at(job, 0)), "serviceAccountName"));
  cJSON_Delete(job);
  mu_kvlist_set(&cfg.values, "service_account", sa);
  job = render(app, &cfg, "app-name-42", NULL);
  ASSERT_STR_EQ(cJSON_GetObjectItemCaseSensitive(pod_spec(task_at(job, 0)), "serviceAccountName")
                    ->valuestring,
                sa);
  cJSON_Delete(job);
  mu_free(sa);
  mu_app_free(app);
  mu_cfg_release(&cfg);
}

/* Every torchx.pytorch.org/version label of the job: muster's own version (diverges from
 * TorchX's, as the case asks). */
static int count_version_labels(const cJSON *n)
{
  const cJSON *ch;
  int count = 0;
  if (cJSON_IsObject(n)) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(n, "torchx.pytorch.org/version");
    if (v != NULL) {
      ASSERT_STR_EQ(v->valuestring, MU_VERSION);
      count++;
    }
  }
  cJSON_ArrayForEach(ch, n) count += count_version_labels(ch);
  return count;
}
static void c01_version_label(const cJSON *c, const cJSON *item)
{
  struct mu_app *app = case01_app();
  struct mu_cfg cfg = {MU_KVLIST_INIT};
  cJSON *job;
  (void)c;
  ASSERT(strstr(item->valuestring, "__version__") != NULL);
  mu_kvlist_set(&cfg.values, "queue", "q");
  job = render(app, &cfg, "app-name-42", NULL);
  ASSERT(count_version_labels(job) >= 1);
  cJSON_Delete(job);
  mu_app_free(app);
  mu_cfg_release(&cfg);
}

static const struct golden_check case01[] = {
    {"main", c01_main},
    {"extra_assertions.container_command_role0_replica0", c01_command},
    {"extra_assertions.role_to_pod(service_account='srvacc')", c01_service_account},
    {"extra_assertions.label torchx.pytorch.org/version", c01_version_label},
    {NULL, NULL},
};

TEST(k8s__torchx01_single_role)
{
  golden_case_run("torchx-01_k8s_single_role_dryrun", case01);
}

/* ============================================================ case 02: replicas and rank 0 */

static cJSON *c02_job(const cJSON *c, const char *save_as)
{
  const cJSON *in = golden_at(c, "input", (const char *)NULL);
  struct mu_app *app = golden_app_from(golden_at(in, "app", (const char *)NULL));
  struct mu_cfg cfg = {MU_KVLIST_INIT};
  cJSON *job;
  cfg_from(&cfg, golden_at(in, "cfg", (const char *)NULL));
  job = render(app, &cfg, golden_str(in, "unique_app_id"), save_as);
  mu_app_free(app);
  mu_cfg_release(&cfg);
  return job;
}

static void c02_main(const cJSON *c, const cJSON *item)
{
  char *rel = mu_asprintf("torchx-02_k8s_multi_replica_rank0/%s", golden_str(c, "expected_file"));
  char *txt = golden_slurp(rel);
  struct mu_buf err = MU_BUF_INIT(4096);
  cJSON *got = c02_job(c, "torchx-02"), *want = NULL;
  (void)item;
  ASSERT_EQ(mu_yaml_parse(txt, strlen(txt), &want, &err), 0);
  patch_divergences(want, golden_str(golden_at(c, "input", "app", (const char *)NULL), "name"));
  expect_equal(got, want);
  cJSON_Delete(got);
  cJSON_Delete(want);
  mu_free(rel);
  mu_free(txt);
  mu_buf_release(&err);
}

/* "tasks[N].template.spec.containers[0].command contains 'X'" */
static void c02_command_contains(const cJSON *c, const cJSON *item)
{
  char *want = golden_quoted(item->valuestring, 0);
  int task = -1, found = 0;
  const cJSON *a;
  cJSON *job = c02_job(c, NULL);
  ASSERT_EQ(
      sscanf(item->valuestring, "tasks[%d].template.spec.containers[0].command contains", &task),
      1);
  cJSON_ArrayForEach(a,
                     cJSON_GetObjectItemCaseSensitive(container_of(task_at(job, task)), "command"))
  {
    found |= strcmp(a->valuestring, want) == 0;
  }
  if (!found)
    MU__FAIL("task %d: no '%s' in the command", task, want);
  cJSON_Delete(job);
  mu_free(want);
}

/* "tasks[0].template.spec.containers[0].env contains {name: N, value: V}" */
static void c02_env_contains(const cJSON *c, const cJSON *item)
{
  char name[64] = "", value[64] = "";
  const cJSON *e;
  int task = -1, found = 0;
  cJSON *job = c02_job(c, NULL);
  ASSERT_EQ(sscanf(item->valuestring,
                   "tasks[%d].template.spec.containers[0].env contains {name: %63[^,], value: "
                   "%63[^}]}",
                   &task, name, value),
            3);
  cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(container_of(task_at(job, task)), "env"))
  {
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(e, "name"),
                *v = cJSON_GetObjectItemCaseSensitive(e, "value");
    found |= n && v && cJSON_IsString(v) && strcmp(n->valuestring, name) == 0 &&
             strcmp(v->valuestring, value) == 0;
  }
  if (!found)
    MU__FAIL("task %d: no env %s=%s", task, name, value);
  cJSON_Delete(job);
}

static const struct golden_check case02[] = {
    {"main", c02_main},
    {"tasks[0].template.spec.containers[0].command contains 'TORCHX_RANK0_HOST'",
     c02_command_contains},
    {"tasks[0].template.spec.containers[0].env contains {name: TORCHX_RANK0_HOST, value: "
     "localhost}",
     c02_env_contains},
    {"tasks[1].template.spec.containers[0].command contains 'VC_TRAINERFOO_0_HOSTS'",
     c02_command_contains},
    {NULL, NULL},
};

TEST(k8s__torchx02_multi_replica_rank0)
{
  golden_case_run("torchx-02_k8s_multi_replica_rank0", case02);
}

/* ================================================ case 03: mounts, devices, node selector */

static void c03_volume_mount(const cJSON *c, const cJSON *item)
{
  cJSON *job = render_role(golden_at(item, "input", "role", (const char *)NULL), "torchx-03a");
  (void)c;
  GOLDEN_JSON_EQ(cJSON_GetObjectItemCaseSensitive(pod_spec(task_at(job, 0)), "volumes"),
                 golden_expect(item, "pod.spec.volumes"), "pod.spec.volumes");
  GOLDEN_JSON_EQ(cJSON_GetObjectItemCaseSensitive(container_of(task_at(job, 0)), "volumeMounts"),
                 golden_expect(item, "container.volumeMounts"), "container.volumeMounts");
  cJSON_Delete(job);
}

static void c03_device_mounts(const cJSON *c, const cJSON *item)
{
  cJSON *job = render_role(golden_at(item, "input", "role", (const char *)NULL), "torchx-03b");
  cJSON *vols =
      array_from(cJSON_GetObjectItemCaseSensitive(pod_spec(task_at(job, 0)), "volumes"), 1);
  cJSON *mnts = array_from(
      cJSON_GetObjectItemCaseSensitive(container_of(task_at(job, 0)), "volumeMounts"), 1);
  (void)c;
  GOLDEN_JSON_EQ(vols, golden_expect(item, "pod.spec.volumes[1:]"), "pod.spec.volumes[1:]");
  GOLDEN_JSON_EQ(mnts, golden_expect(item, "container.volumeMounts[1:]"),
                 "container.volumeMounts[1:]");
  GOLDEN_JSON_EQ(
      golden_at(container_of(task_at(job, 0)), "securityContext", "privileged", (const char *)NULL),
      golden_expect(item, "container.securityContext.privileged"), "securityContext.privileged");
  cJSON_Delete(vols);
  cJSON_Delete(mnts);
  cJSON_Delete(job);
}

static void c03_devices(const cJSON *c, const cJSON *item)
{
  cJSON *job = render_role(golden_at(item, "input", "role", (const char *)NULL), "torchx-03c");
  cJSON *ctr = container_of(task_at(job, 0));
  const cJSON *want_req =
      golden_expect(item, "container.resources.requests (derived, not asserted)");
  (void)c;
  GOLDEN_JSON_EQ(golden_at(ctr, "resources", "limits", (const char *)NULL),
                 golden_expect(item, "container.resources.limits"), "resources.limits");
  GOLDEN_JSON_EQ(golden_at(ctr, "resources", "requests", (const char *)NULL), want_req,
                 "resources.requests");
  /* "falsy (unset)" */
  ASSERT(strstr(golden_expect(item, "container.securityContext.privileged")->valuestring,
                "unset") != NULL);
  ASSERT_NULL(golden_at(ctr, "securityContext", "privileged", (const char *)NULL));
  cJSON_Delete(job);
}

static void c03_instance_type(const cJSON *c, const cJSON *item)
{
  cJSON *job = render_role(golden_at(item, "input", "role", (const char *)NULL), "torchx-03d");
  (void)c;
  GOLDEN_JSON_EQ(cJSON_GetObjectItemCaseSensitive(pod_spec(task_at(job, 0)), "nodeSelector"),
                 golden_expect(item, "pod.spec.nodeSelector"), "pod.spec.nodeSelector");
  cJSON_Delete(job);
}

/* The named resource resolves to the case's figures, and renders as expected. */
static void c03_named_resource(const cJSON *c, const cJSON *item)
{
  const cJSON *in = golden_at(item, "input", (const char *)NULL),
              *want = golden_at(in, "resolved_resource", (const char *)NULL);
  struct mu_buf err = MU_BUF_INIT(1024);
  struct mu_app *app = mu_app_new("test");
  struct mu_role *r = mu_app_add_role(app, "foo");
  struct mu_cfg cfg = {MU_KVLIST_INIT};
  cJSON *got = cJSON_CreateObject(), *dev, *job, *ctr;
  (void)c;
  if (mu_named_resource(golden_str(in, "h"), &r->resource, &err) != 0)
    MU__FAIL("named resource %s: %s", golden_str(in, "h"), mu_buf_str(&err));
  cJSON_AddNumberToObject(got, "cpu", (double)r->resource.cpu);
  cJSON_AddNumberToObject(got, "gpu", (double)r->resource.gpu);
  cJSON_AddNumberToObject(got, "memMB", (double)r->resource.memMB);
  dev = cJSON_AddObjectToObject(got, "capabilities");
  for (size_t i = 0; i < r->resource.capabilities.n; i++)
    cJSON_AddStringToObject(dev, r->resource.capabilities.v[i].key,
                            r->resource.capabilities.v[i].value);
  dev = cJSON_AddObjectToObject(got, "devices");
  for (size_t i = 0; i < r->resource.ndevices; i++)
    cJSON_AddNumberToObject(dev, r->resource.devices[i].name, (double)r->resource.devices[i].count);
  GOLDEN_JSON_EQ(got, want, "resolved resource");
  r->image = mu_strdup("img");
  r->entrypoint = mu_strdup("main");
  r->num_replicas = 1;
  mu_kvlist_set(&cfg.values, "queue", "q");
  job = render(app, &cfg, "app-name-42", "torchx-03e");
  ctr = container_of(task_at(job, 0));
  GOLDEN_JSON_EQ(cJSON_GetObjectItemCaseSensitive(ctr, "resources"),
                 golden_expect(item, "container.resources"), "container.resources");
  GOLDEN_JSON_EQ(cJSON_GetObjectItemCaseSensitive(pod_spec(task_at(job, 0)), "nodeSelector"),
                 golden_expect(item, "pod.spec.nodeSelector"), "pod.spec.nodeSelector");
  cJSON_Delete(got);
  cJSON_Delete(job);
  mu_app_free(app);
  mu_cfg_release(&cfg);
  mu_buf_release(&err);
}

static const struct golden_check case03[] = {
    {"a_volume_mount_pvc", c03_volume_mount},
    {"b_device_mounts_privileged", c03_device_mounts},
    {"c_resource_devices_efa", c03_devices},
    {"d_instance_type_node_selector", c03_instance_type},
    {"e_named_resource_aws_p4d_24xlarge (DERIVED)", c03_named_resource},
    {NULL, NULL},
};

TEST(k8s__torchx03_mounts_devices_nodeselector)
{
  golden_case_run("torchx-03_k8s_mounts_devices_nodeselector", case03);
}

/* ============================================ case 04: queue, priority, account, namespace */

/* The case-01 app with NREPLICAS replicas rendered with the subcase's -cfg (ALL) or with its
 * queue alone (to see what the other key adds). Returns: the job (cJSON_Delete). */
static cJSON *c04_job(const cJSON *in_cfg, int all, long nreplicas, const char *save_as)
{
  struct mu_app *app = case01_app();
  struct mu_cfg cfg = {MU_KVLIST_INIT};
  cJSON *job;
  app->roles[0].num_replicas = nreplicas;
  if (all)
    cfg_set(&cfg, in_cfg);
  else
    mu_kvlist_set(&cfg.values, "queue", golden_str(in_cfg, "queue"));
  job = render(app, &cfg, "app-name-42", save_as);
  mu_app_free(app);
  mu_cfg_release(&cfg);
  return job;
}

static void c04_service_account(const cJSON *c, const cJSON *item)
{
  const cJSON *in_cfg = golden_at(item, "input", "cfg", (const char *)NULL);
  const char *sa = golden_str(in_cfg, "service_account");
  cJSON *job = c04_job(in_cfg, 1, 2, "torchx-04-sa");
  (void)c;
  /* "every pod template spec has serviceAccountName: X; absent when cfg has no ..." */
  ASSERT(strstr(golden_str(item, "expected"), "every pod template spec") != NULL);
  for (int i = 0; i < 2; i++)
    ASSERT_STR_EQ(golden_str(pod_spec(task_at(job, i)), "serviceAccountName"), sa);
  cJSON_Delete(job);
  job = c04_job(in_cfg, 0, 2, NULL);
  for (int i = 0; i < 2; i++)
    ASSERT_NULL(cJSON_GetObjectItemCaseSensitive(pod_spec(task_at(job, i)), "serviceAccountName"));
  cJSON_Delete(job);
}

static void c04_priority_class(const cJSON *c, const cJSON *item)
{
  const cJSON *in_cfg = golden_at(item, "input", "cfg", (const char *)NULL);
  const char *pc = golden_str(in_cfg, "priority_class");
  cJSON *job = c04_job(in_cfg, 1, 1, "torchx-04-pc");
  (void)c;
  /* "job spec (not pod) has priorityClassName: X; key absent when not set" */
  ASSERT(strstr(golden_str(item, "expected"), pc) != NULL);
  ASSERT_STR_EQ(golden_at(job, "spec", "priorityClassName", (const char *)NULL)->valuestring, pc);
  ASSERT_NULL(cJSON_GetObjectItemCaseSensitive(pod_spec(task_at(job, 0)), "priorityClassName"));
  cJSON_Delete(job);
  job = c04_job(in_cfg, 0, 1, NULL);
  ASSERT_NULL(golden_at(job, "spec", "priorityClassName", (const char *)NULL));
  cJSON_Delete(job);
}

/* spec.queue from -cfg queue; without one the render fails naming the runopt (TorchX: an
 * InvalidRunConfigException; muster requires it with the volcano scheduler, DIVERGENCES.md). */
static void c04_queue(const cJSON *c, const cJSON *item)
{
  struct mu_app *app = case01_app();
  struct mu_cfg cfg = {MU_KVLIST_INIT};
  struct mu_buf err = MU_BUF_INIT(1024);
  const char *q = golden_str(golden_at(item, "input", "cfg", (const char *)NULL), "queue");
  cJSON *job = NULL;
  (void)c;
  ASSERT(strstr(golden_str(item, "expected"), "REQUIRED") != NULL);
  ASSERT_EQ(mu_k8s_render(app, &cfg, "x", &job, &err), MU_EINVAL);
  ASSERT(strstr(mu_buf_str(&err), "-cfg queue") != NULL);
  ASSERT_NULL(job);
  cfg_set(&cfg, golden_at(item, "input", "cfg", (const char *)NULL));
  job = render(app, &cfg, "app-name-42", NULL);
  ASSERT_STR_EQ(golden_at(job, "spec", "queue", (const char *)NULL)->valuestring, q);
  cJSON_Delete(job);
  mu_app_free(app);
  mu_cfg_release(&cfg);
  mu_buf_release(&err);
}

/* Submission: `kubectl -n NS create -f -` with the Volcano Job on stdin; the app id NS:NAME.
 * The job name is muster's (MUSTER_APP_ID pins it, as the case pins TorchX's metadata.name). */
static void c04_submit_namespace(const cJSON *c, const cJSON *item)
{
  const cJSON *in = golden_at(item, "input", (const char *)NULL),
              *kw = golden_expect(item, "create_namespaced_custom_object kwargs");
  const char *ns = golden_str(golden_at(in, "cfg", (const char *)NULL), "namespace");
  struct mu_app *app = case01_app();
  struct mu_cfg cfg = {MU_KVLIST_INIT};
  struct mu_dryrun req = {0};
  struct mu_buf err = MU_BUF_INIT(4096);
  char *dir = fake_kubectl("job.batch.volcano.sh/testid created\n", NULL, 0), *calls, *body, *want,
       *handle;
  cJSON *sent = NULL;
  (void)c;
  setenv("MUSTER_APP_ID", golden_str(in, "api_response_metadata_name"), 1);
  cfg_set(&cfg, golden_at(in, "cfg", (const char *)NULL));
  if (mu_sched_dryrun(&mu_sched_kubernetes, app, &cfg, &req, &err) != 0 ||
      mu_sched_schedule(&req, &err) != 0)
    MU__FAIL("submit: %s", mu_buf_str(&err));
  ASSERT_STR_EQ(req.app_id, golden_expect(item, "app_id")->valuestring);
  ASSERT_STR_EQ(golden_str(kw, "namespace"), ns);
  calls = golden_tool_calls(dir);
  want = mu_asprintf("kubectl -n %s create -f -\n", golden_str(kw, "namespace"));
  ASSERT_STR_EQ(calls, want);
  body = golden_tool_stdin(dir, "kubectl");
  ASSERT_EQ(mu_yaml_parse(body, strlen(body), &sent, &err), 0);
  mu_free(want);
  want = mu_asprintf("%s/%s", golden_str(kw, "group"), golden_str(kw, "version"));
  ASSERT_STR_EQ(golden_str(sent, "apiVersion"), want);
  ASSERT_STR_EQ(golden_str(sent, "kind"), "Job"); /* plural "jobs" */
  ASSERT_STR_EQ(golden_str(kw, "plural"), "jobs");
  ASSERT_STR_EQ(golden_str(golden_at(sent, "metadata", (const char *)NULL), "name"),
                golden_str(in, "api_response_metadata_name"));
  ASSERT(strstr(golden_str(kw, "body"), "dryrun") != NULL);
  /* Handles carry muster's session, not "torchx" (DIVERGENCES.md). */
  handle = mu_asprintf("kubernetes://%s/%s", MU_SESSION, req.app_id);
  {
    char *theirs = mu_strdup(golden_expect(item, "app_handle")->valuestring);
    char *p = strstr(theirs, "://torchx/");
    ASSERT_NOT_NULL(p);
    memmove(p + 3 + strlen(MU_SESSION), p + 3 + strlen("torchx"),
            strlen(p + 3 + strlen("torchx")) + 1);
    memcpy(p + 3, MU_SESSION, strlen(MU_SESSION));
    ASSERT_STR_EQ(handle, theirs);
    mu_free(theirs);
  }
  cJSON_Delete(sent);
  mu_dryrun_release(&req);
  mu_free(handle);
  mu_free(calls);
  mu_free(body);
  mu_free(want);
  mu_free(dir);
  mu_app_free(app);
  mu_cfg_release(&cfg);
  mu_buf_release(&err);
}

/* A name conflict (409): kubectl's AlreadyExists message and what to do, instead of TorchX's
 * ValueError text (DIVERGENCES.md). */
static void c04_name_conflict(const cJSON *c, const cJSON *item)
{
  const cJSON *e = golden_at(item, "input", "api_error", (const char *)NULL);
  cJSON *details = cJSON_Parse(golden_str(e, "body"));
  const char *name = golden_at(details, "details", "name", (const char *)NULL)->valuestring;
  char *msg, *dir, *want;
  struct mu_app *app = case01_app();
  struct mu_cfg cfg = {MU_KVLIST_INIT};
  struct mu_dryrun req = {0};
  struct mu_buf err = MU_BUF_INIT(4096);
  (void)c;
  /* The API server's 409 Conflict, as kubectl create words it. */
  ASSERT_EQ(golden_at(e, "status", (const char *)NULL)->valueint, 409);
  ASSERT_STR_EQ(golden_str(e, "reason"), "Conflict");
  msg = mu_asprintf("Error from server (AlreadyExists): error when creating \"STDIN\": "
                    "jobs.batch.volcano.sh \"%s\" already exists\n",
                    name);
  dir = fake_kubectl(NULL, msg, 1);
  mu_kvlist_set(&cfg.values, "queue", "q");
  /* TorchX's name may hold '_', which a Kubernetes name may not: muster submits a name of its
   * own, and shows kubectl's message whatever it says. */
  setenv("MUSTER_APP_ID", "test-job", 1);
  ASSERT_EQ(mu_sched_dryrun(&mu_sched_kubernetes, app, &cfg, &req, &err), 0);
  ASSERT_NE(mu_sched_schedule(&req, &err), 0);
  want = mu_asprintf("jobs.batch.volcano.sh \"%s\" already exists", name);
  ASSERT(strstr(mu_buf_str(&err), want) != NULL);
  ASSERT(strstr(mu_buf_str(&err), "a job of that name exists") != NULL);
  /* TorchX: "Job `NAME` already exists..." */
  ASSERT(strstr(golden_str(item, "expected"), "already exists") != NULL);
  mu_dryrun_release(&req);
  cJSON_Delete(details);
  mu_free(msg);
  mu_free(want);
  mu_free(dir);
  mu_app_free(app);
  mu_cfg_release(&cfg);
  mu_buf_release(&err);
}

static const struct mu_runopt *runopt(const char *name)
{
  for (const struct mu_runopt *o = mu_sched_kubernetes.runopts; o->name; o++)
    if (strcmp(o->name, name) == 0)
      return o;
  return NULL;
}

/* TorchX's runopts are muster's, with their defaults, except `quiet` (a docker-build flag,
 * gone) and `queue`, optional in the table: it is required with scheduler_name=volcano, the
 * default, which c04_queue checks (DIVERGENCES.md). */
static void c04_runopts(const cJSON *c, const cJSON *item)
{
  const cJSON *k;
  (void)c;
  cJSON_ArrayForEach(k, golden_expect(item, "keys"))
  {
    if (strcmp(k->valuestring, "quiet") == 0)
      ASSERT_NULL(runopt("quiet"));
    else if (runopt(k->valuestring) == NULL)
      MU__FAIL("no runopt %s", k->valuestring);
  }
  cJSON_ArrayForEach(k, golden_expect(item, "defaults"))
  {
    if (strcmp(k->string, "quiet") == 0)
      continue;
    ASSERT_NOT_NULL(runopt(k->string));
    ASSERT_STR_EQ(runopt(k->string)->def, k->valuestring);
  }
  cJSON_ArrayForEach(k, golden_expect(item, "required"))
  {
    ASSERT_STR_EQ(k->valuestring, "queue");
    ASSERT_EQ(runopt("queue")->required, 0);
    ASSERT_NULL(runopt("scheduler_name")->def); /* volcano with api=volcano (the default) */
  }
}

static void c04_image_repo(const cJSON *c, const cJSON *item)
{
  const cJSON *in = golden_at(item, "input", (const char *)NULL);
  struct mu_app *app = case01_app();
  struct mu_cfg cfg = {MU_KVLIST_INIT};
  cJSON *job;
  (void)c;
  mu_free(app->roles[0].image);
  app->roles[0].image = mu_strdup(golden_str(in, "role.image"));
  cfg_set(&cfg, golden_at(in, "cfg", (const char *)NULL));
  job = render(app, &cfg, "app-name-42", "torchx-04-repo");
  ASSERT_STR_EQ(golden_str(container_of(task_at(job, 0)), "image"),
                golden_expect(item, "container image")->valuestring);
  golden_diverges(item, "images_to_push", "muster builds and pushes no images");
  cJSON_Delete(job);
  mu_app_free(app);
  mu_cfg_release(&cfg);
}

static const struct golden_check case04[] = {
    {"service_account", c04_service_account},
    {"priority_class", c04_priority_class},
    {"queue", c04_queue},
    {"submit_namespace", c04_submit_namespace},
    {"name_conflict", c04_name_conflict},
    {"runopts", c04_runopts},
    {"image_repo_patch", c04_image_repo},
    {NULL, NULL},
};

TEST(k8s__torchx04_queue_priority_service_account_namespace)
{
  golden_case_run("torchx-04_k8s_queue_priority_service_account_namespace", case04);
}

/* ===================================================================== case 05: elastic */

/* "case01 app with num_replicas=N, min_replicas=M" */
static void c05_min_replicas(const cJSON *c, const cJSON *item)
{
  const char *in = golden_str(golden_at(item, "input", (const char *)NULL), "app");
  const cJSON *want = golden_expect(item, "[task.minAvailable for task in spec.tasks]");
  const char *p = strstr(in, "num_replicas="), *q = strstr(in, "min_replicas=");
  struct mu_app *app = case01_app();
  struct mu_cfg cfg = {MU_KVLIST_INIT};
  cJSON *job, *got = cJSON_CreateArray(), *t;
  (void)c;
  ASSERT(strncmp(in, "case01 app", 10) == 0 && p != NULL && q != NULL);
  app->roles[0].num_replicas = strtol(p + 13, NULL, 10);
  app->roles[0].min_replicas = strtol(q + 13, NULL, 10);
  mu_kvlist_set(&cfg.values, "queue", "q");
  job = render(app, &cfg, "app-name-42", "torchx-05");
  cJSON_ArrayForEach(t, golden_at(job, "spec", "tasks", (const char *)NULL))
  {
    cJSON_AddItemToArray(got,
                         cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(t, "minAvailable"), 1));
  }
  GOLDEN_JSON_EQ(got, want, "minAvailable of the tasks");
  /* the rule: no job-level spec.minAvailable */
  ASSERT(strstr(golden_str(item, "rule"), "no job-level spec.minAvailable") != NULL);
  ASSERT_NULL(golden_at(job, "spec", "minAvailable", (const char *)NULL));
  /* muster's divergence (DIVERGENCES.md): a replica to spare, so each task replaces its own
   * lost pod (RestartTask, max_retries 3 + 1 spare), not TorchX's RestartJob of them all */
  t = cJSON_GetArrayItem(golden_at(job, "spec", "tasks", (const char *)NULL), 0);
  ASSERT_STR_EQ(
      golden_str(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(t, "policies"), 1), "action"),
      "RestartTask");
  ASSERT_EQ(cJSON_GetObjectItemCaseSensitive(t, "maxRetry")->valueint, 4);
  ASSERT_EQ(golden_at(job, "spec", "maxRetry", (const char *)NULL)->valueint, 5);
  /* the rule: the key is omitted when min_replicas is unset */
  cJSON_Delete(job);
  app->roles[0].min_replicas = -1;
  job = render(app, &cfg, "app-name-42", NULL);
  cJSON_ArrayForEach(t, golden_at(job, "spec", "tasks", (const char *)NULL))
  {
    ASSERT_NULL(cJSON_GetObjectItemCaseSensitive(t, "minAvailable"));
  }
  cJSON_Delete(got);
  cJSON_Delete(job);
  mu_app_free(app);
  mu_cfg_release(&cfg);
}

/* dist.ddp -j 1:3x4 through the builtin component. */
static void c05_dist_ddp(const cJSON *c, const cJSON *item)
{
  const cJSON *in = golden_at(item, "input", (const char *)NULL), *a, *t;
  struct mu_component *comp = NULL;
  struct mu_strvec argv = MU_STRVEC_INIT;
  struct mu_buf err = MU_BUF_INIT(4096);
  struct mu_app *app = NULL;
  struct mu_cfg cfg = {MU_KVLIST_INIT};
  cJSON *job, *names = cJSON_CreateArray(), *mins = cJSON_CreateArray();
  (void)c;
  unsetenv("LOGLEVEL");
  ASSERT_STR_EQ(golden_str(in, "LOGLEVEL_env_on_host"), "unset");
  if (mu_component_load(golden_str(in, "component"), &comp, &err) != 0)
    MU__FAIL("%s", mu_buf_str(&err));
  cJSON_ArrayForEach(a, golden_at(in, "args", (const char *)NULL))
      mu_strvec_push(&argv, a->valuestring);
  /* TorchX's default image is ghcr.io/pytorch/torchx; muster's is none, which kubernetes
   * refuses (DIVERGENCES.md of case 11, D5) */
  mu_strvec_push(&argv, "--image");
  mu_strvec_push(&argv, "img");
  if (mu_component_build(comp, (int)argv.n, argv.v, NULL, &app, &err) != 0)
    MU__FAIL("%s", mu_buf_str(&err));
  ASSERT_EQ(app->roles[0].min_replicas, golden_expect(item, "role.min_replicas")->valueint);
  ASSERT_EQ(app->roles[0].num_replicas, golden_expect(item, "role.num_replicas")->valueint);
  cfg_set(&cfg, golden_at(in, "cfg", (const char *)NULL));
  mu_kvlist_set(&cfg.values, "muster_image", "reg/muster:1"); /* muster's own, no TorchX twin */
  job = render(app, &cfg, golden_str(in, "unique_app_id"), "torchx-05b");
  cJSON_ArrayForEach(t, golden_at(job, "spec", "tasks", (const char *)NULL))
  {
    if (is_musterd_task(t)) {
      /* the job's own musterd task (DIVERGENCES.md): always needed */
      ASSERT_EQ(golden_at(t, "minAvailable", (const char *)NULL)->valueint, 1);
      continue;
    }
    cJSON_AddItemToArray(names, cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(t, "name"), 1));
    cJSON_AddItemToArray(mins,
                         cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(t, "minAvailable"), 1));
  }
  GOLDEN_JSON_EQ(mins, golden_expect(item, "[task.minAvailable]"), "minAvailable of the tasks");
  GOLDEN_JSON_EQ(names, golden_expect(item, "task names"), "task names");
  golden_diverges(item, "bash -c string (replica 0)",
                  "dist.ddp runs `muster agent` against the job's musterd, not torchrun's c10d");
  golden_diverges(item, "bash -c string (replica 1)",
                  "dist.ddp runs `muster agent` against the job's musterd, not torchrun's c10d");
  cJSON_Delete(names);
  cJSON_Delete(mins);
  cJSON_Delete(job);
  mu_component_free(comp);
  mu_strvec_release(&argv);
  mu_app_free(app);
  mu_cfg_release(&cfg);
  mu_buf_release(&err);
}

static const struct golden_check case05[] = {
    {"a_min_replicas", c05_min_replicas},
    {"b_dist_ddp_elastic_1:3x4 (DERIVED)", c05_dist_ddp},
    {NULL, NULL},
};

TEST(k8s__torchx05_elastic_min_replicas)
{
  golden_case_run("torchx-05_k8s_elastic_min_replicas", case05);
}

/* ===================================================================== case 06: retries */

static cJSON *c06_job(long max_retries, enum mu_retry_policy policy, const char *save_as)
{
  struct mu_app *app = case01_app();
  struct mu_cfg cfg = {MU_KVLIST_INIT};
  cJSON *job;
  /* case 01's app: max_retries 3, retry_policy APPLICATION */
  ASSERT_EQ(app->roles[0].max_retries, 3);
  ASSERT_EQ(app->roles[0].retry_policy, MU_RETRY_APPLICATION);
  app->roles[0].max_retries = max_retries;
  app->roles[0].retry_policy = policy;
  mu_kvlist_set(&cfg.values, "queue", "q");
  job = render(app, &cfg, "app-name-42", save_as);
  mu_app_free(app);
  mu_cfg_release(&cfg);
  return job;
}

/* The task's maxRetry and policies, as the subcase expects them. */
static void c06_task_retries(cJSON *job, const cJSON *item)
{
  GOLDEN_JSON_EQ(golden_at(task_at(job, 0), "maxRetry", (const char *)NULL),
                 golden_expect(item, "task.maxRetry"), "task.maxRetry");
  GOLDEN_JSON_EQ(golden_at(task_at(job, 0), "policies", (const char *)NULL),
                 golden_expect(item, "task.policies"), "task.policies");
}

static void c06_application(const cJSON *c, const cJSON *item)
{
  cJSON *job = c06_job(3, MU_RETRY_APPLICATION, "torchx-06a");
  (void)c;
  c06_task_retries(job, item);
  GOLDEN_JSON_EQ(golden_at(job, "spec", "maxRetry", (const char *)NULL),
                 golden_expect(item, "spec.maxRetry"), "spec.maxRetry");
  cJSON_Delete(job);
}

static void c06_no_retries(const cJSON *c, const cJSON *item)
{
  cJSON *job = c06_job(0, MU_RETRY_APPLICATION, NULL);
  (void)c;
  ASSERT_EQ(golden_at(task_at(job, 0), "maxRetry", (const char *)NULL) != NULL,
            cJSON_IsTrue(golden_expect(item, "task has maxRetry")));
  ASSERT_EQ(golden_at(task_at(job, 0), "policies", (const char *)NULL) != NULL,
            cJSON_IsTrue(golden_expect(item, "task has policies")));
  GOLDEN_JSON_EQ(golden_at(job, "spec", "maxRetry", (const char *)NULL),
                 golden_expect(item, "spec.maxRetry"), "spec.maxRetry");
  cJSON_Delete(job);
}

static void c06_replica(const cJSON *c, const cJSON *item)
{
  cJSON *job = c06_job(3, MU_RETRY_REPLICA, "torchx-06c");
  (void)c;
  c06_task_retries(job, item);
  cJSON_Delete(job);
}

/* "spec.maxRetry = min(role.max_retries over roles)" */
static void c06_rule(const cJSON *c, const cJSON *item)
{
  struct mu_app *app = case01_app();
  struct mu_role *r2;
  struct mu_cfg cfg = {MU_KVLIST_INIT};
  cJSON *job;
  (void)c;
  ASSERT(strstr(item->valuestring, "spec.maxRetry = min(role.max_retries over roles)") != NULL);
  r2 = mu_app_add_role(app, "second");
  r2->image = mu_strdup("img");
  r2->entrypoint = mu_strdup("main");
  r2->num_replicas = 1;
  r2->max_retries = 1;
  mu_kvlist_set(&cfg.values, "queue", "q");
  job = render(app, &cfg, "app-name-42", "torchx-06-two-roles");
  ASSERT_EQ(golden_at(job, "spec", "maxRetry", (const char *)NULL)->valueint, 1);
  cJSON_Delete(job);
  mu_app_free(app);
  mu_cfg_release(&cfg);
}

static const struct golden_check case06[] = {
    {"a_max_retries_3_APPLICATION", c06_application},
    {"b_max_retries_0", c06_no_retries},
    {"c_REPLICA_policy (DERIVED)", c06_replica},
    {"rule", c06_rule},
    {NULL, NULL},
};

TEST(k8s__torchx06_retries)
{
  golden_case_run("torchx-06_k8s_retries", case06);
}

/* ======================================================= case 07: status, logs, cancel, list */

/* The kubectl call that makes the case's API call: `kubectl -n NAMESPACE VERB PLURAL.GROUP REST`.
 * Returns: a new line (mu_free). */
static char *kubectl_call(const cJSON *kw, const char *verb, const char *rest)
{
  return mu_asprintf("kubectl -n %s %s %s.%s %s\n", golden_str(kw, "namespace"), verb,
                     golden_str(kw, "plural"), golden_str(kw, "group"), rest);
}

/* Describe through kubectl: `get jobs.batch.volcano.sh NAME -o json` answered with the case's
 * API object (which has no metadata: so no pod names for the hostnames, as in TorchX). The
 * subcase without an app id or API arguments asks for "ns:x". */
static void c07_describe(const cJSON *c, const cJSON *item)
{
  const cJSON *in = golden_at(item, "input", (const char *)NULL);
  const cJSON *obj =
      golden_at(in, "get_namespaced_custom_object_status returns", (const char *)NULL);
  const cJSON *id = golden_at(in, "app_id", (const char *)NULL);
  char *answer = cJSON_PrintUnformatted(obj ? obj : golden_at(in, "returns", (const char *)NULL));
  char *dir = fake_kubectl(answer, NULL, 0), *calls = golden_tool_calls(dir);
  struct mu_cfg cfg = {MU_KVLIST_INIT};
  struct mu_app_status st;
  struct mu_buf err = MU_BUF_INIT(4096);
  cJSON *roles, *statuses;
  (void)c;
  if (mu_sched_describe(&mu_sched_kubernetes, id ? id->valuestring : "ns:x", &cfg, &st, &err) != 0)
    MU__FAIL("describe: %s", mu_buf_str(&err));
  mu_free(calls);
  calls = golden_tool_calls(dir);
  if (golden_at(item, "expected", "api kwargs", (const char *)NULL)) {
    const cJSON *kw = golden_expect(item, "api kwargs");
    char *rest = mu_asprintf("%s -o json", golden_str(kw, "name")),
         *want = kubectl_call(kw, "get", rest);
    char *pods = mu_asprintf("%skubectl -n %s get pods -l app.kubernetes.io/instance=%s -o json\n",
                             want, golden_str(kw, "namespace"), golden_str(kw, "name"));
    /* TorchX's one call, then (muster's own) the job's pods, to say why it waits. */
    ASSERT_STR_EQ(calls, pods);
    mu_free(rest);
    mu_free(want);
    mu_free(pods);
  }
  ASSERT_STR_EQ(mu_job_state_name(st.state), golden_expect(item, "state")->valuestring);
  golden_status_roles(&st, &roles, &statuses);
  GOLDEN_JSON_EQ(roles, golden_expect(item, "roles"), "roles");
  GOLDEN_JSON_EQ(statuses, golden_expect(item, "roles_statuses"), "roles_statuses");
  cJSON_Delete(roles);
  cJSON_Delete(statuses);
  mu_app_status_release(&st);
  mu_free(answer);
  mu_free(calls);
  mu_free(dir);
  mu_buf_release(&err);
}

/* List through `kubectl get jobs.batch.volcano.sh -l app.kubernetes.io/managed-by=muster`: the
 * label selects muster's jobs (TorchX lists every Volcano job), DIVERGENCES.md. */
static void c07_list(const cJSON *c, const cJSON *item)
{
  const cJSON *in = golden_at(item, "input", (const char *)NULL),
              *kw = golden_expect(item, "api kwargs");
  cJSON *answer = cJSON_CreateObject(), *got = cJSON_CreateArray();
  char *text, *dir, *calls, *want;
  struct mu_cfg cfg = {MU_KVLIST_INIT};
  struct mu_app_list_entry *l = NULL;
  size_t n = 0;
  struct mu_buf err = MU_BUF_INIT(4096);
  (void)c;
  cJSON_AddItemToObject(answer, "items",
                        cJSON_Duplicate(golden_at(in, "items", (const char *)NULL), 1));
  text = cJSON_PrintUnformatted(answer);
  dir = fake_kubectl(text, NULL, 0);
  ASSERT_STR_EQ(golden_str(in, "active kube context namespace"), golden_str(kw, "namespace"));
  if (mu_sched_kubernetes.list(&cfg, &l, &n, &err) != 0)
    MU__FAIL("list: %s", mu_buf_str(&err));
  calls = golden_tool_calls(dir);
  want = kubectl_call(kw, "get", "-l app.kubernetes.io/managed-by=muster -o json");
  ASSERT_STR_EQ(calls, want);
  ASSERT_EQ(golden_at(kw, "timeout_seconds", (const char *)NULL)->valueint, 30); /* kubectl's own */
  for (size_t i = 0; i < n; i++) {
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "app_id", l[i].app_id);
    cJSON_AddStringToObject(e, "state", mu_job_state_name(l[i].state));
    cJSON_AddItemToArray(got, e);
  }
  GOLDEN_JSON_EQ(got, golden_expect(item, "apps"), "apps");
  mu_app_list_free(l, n);
  cJSON_Delete(answer);
  cJSON_Delete(got);
  mu_free(text);
  mu_free(dir);
  mu_free(calls);
  mu_free(want);
  mu_buf_release(&err);
}

/* The log of replica K of a role: `kubectl logs JOB-ROLE-K-0`. muster prints the pod's log as
 * it is: filtering by a regex is grep's job (DIVERGENCES.md). */
static void c07_log(const cJSON *c, const cJSON *item)
{
  const cJSON *in = golden_at(item, "input", (const char *)NULL),
              *kw = golden_expect(item, "read_namespaced_pod_log kwargs"), *line;
  const char *text = golden_str(in, "pod log text"), *regex = golden_str(in, "regex");
  char *dir = fake_kubectl(text, NULL, 0), *calls, *want, outp[] = "/tmp/mu-unit-log-XXXXXX";
  struct mu_cfg cfg = {MU_KVLIST_INIT};
  struct mu_buf err = MU_BUF_INIT(4096), got = MU_BUF_INIT(1 << 20), filtered = MU_BUF_INIT(4096);
  int fd = mkstemp(outp);
  (void)c;
  ASSERT(fd >= 0);
  struct mu_log_opts o = {.stream = MU_STREAM_COMBINED, .tail = -1};
  if (mu_sched_kubernetes.log_open(golden_str(in, "app_id"), golden_str(in, "role_name"),
                                   golden_at(in, "k", (const char *)NULL)->valueint, &o, fd, &cfg,
                                   &err) != 0)
    MU__FAIL("log: %s", mu_buf_str(&err));
  close(fd);
  calls = golden_tool_calls(dir);
  want =
      mu_asprintf("kubectl -n %s logs %s\n", golden_str(kw, "namespace"), golden_str(kw, "name"));
  ASSERT_STR_EQ(calls, want);
  ASSERT_EQ(mu_read_file(outp, 1 << 20, &got), 0);
  ASSERT_STR_EQ(mu_buf_str(&got), text);
  /* the lines TorchX returns are the ones with the regex in them */
  {
    char *copy = mu_strdup(text), *save = NULL;
    for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
      if (strstr(l, regex))
        mu_buf_printf(&filtered, "%s\n", l);
    mu_free(copy);
  }
  {
    struct mu_buf w = MU_BUF_INIT(4096);
    cJSON_ArrayForEach(line, golden_expect(item, "lines")) mu_buf_puts(&w, line->valuestring);
    ASSERT_STR_EQ(mu_buf_str(&filtered), mu_buf_str(&w));
    mu_buf_release(&w);
  }
  ASSERT(cJSON_IsTrue(golden_at(kw, "timestamps", (const char *)NULL))); /* TorchX's; not ours */
  unlink(outp);
  mu_free(dir);
  mu_free(calls);
  mu_free(want);
  mu_buf_release(&err);
  mu_buf_release(&got);
  mu_buf_release(&filtered);
}

static void c07_cancel(const cJSON *c, const cJSON *item)
{
  const cJSON *kw = golden_expect(item, "delete_namespaced_custom_object kwargs");
  char *dir = fake_kubectl("job.batch.volcano.sh deleted\n", NULL, 0), *calls, *want;
  struct mu_cfg cfg = {MU_KVLIST_INIT};
  struct mu_buf err = MU_BUF_INIT(4096);
  (void)c;
  if (mu_sched_kubernetes.cancel_existing(
          golden_str(golden_at(item, "input", (const char *)NULL), "app_id"), &cfg, &err) != 0)
    MU__FAIL("cancel: %s", mu_buf_str(&err));
  calls = golden_tool_calls(dir);
  want = kubectl_call(kw, "delete", golden_str(kw, "name"));
  ASSERT_STR_EQ(calls, want);
  mu_free(dir);
  mu_free(calls);
  mu_free(want);
  mu_buf_release(&err);
}

static void c07_job_states(const cJSON *c, const cJSON *table)
{
  const cJSON *row;
  (void)c;
  cJSON_ArrayForEach(row, table)
  {
    ASSERT_STR_EQ(mu_job_state_name(mu_k8s_job_state(row->string)), row->valuestring);
  }
  ASSERT_EQ(mu_k8s_job_state(NULL), MU_STATE_UNKNOWN);
}

static void c07_task_states(const cJSON *c, const cJSON *table)
{
  const cJSON *row;
  (void)c;
  cJSON_ArrayForEach(row, table)
  {
    ASSERT_STR_EQ(mu_job_state_name(mu_k8s_task_state(row->string)), row->valuestring);
  }
}

static const struct golden_check case07[] = {
    {"describe_completed", c07_describe},
    {"describe_no_status", c07_describe},
    {"list", c07_list},
    {"log_iter", c07_log},
    {"cancel", c07_cancel},
    {"JOB_STATE", c07_job_states},
    {"TASK_STATE", c07_task_states},
    {NULL, NULL},
};

TEST(k8s__torchx07_status_logs_cancel_list)
{
  golden_case_run("torchx-07_k8s_status_logs_cancel_list", case07);
}

TEST(k8s__torchx_every_case_runs)
{
  static const char *const dirs[] = {"torchx-01_k8s_single_role_dryrun",
                                     "torchx-02_k8s_multi_replica_rank0",
                                     "torchx-03_k8s_mounts_devices_nodeselector",
                                     "torchx-04_k8s_queue_priority_service_account_namespace",
                                     "torchx-05_k8s_elastic_min_replicas",
                                     "torchx-06_k8s_retries",
                                     "torchx-07_k8s_status_logs_cancel_list",
                                     NULL};
  golden_all_cases_listed("_k8s_", dirs);
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

/* Fragments that YAML readers treat specially: line breaks YAML 1.1 folds (U+0085, U+2028,
 * U+2029), C0 and C1 controls, the byte-order mark, tabs and spaces, quotes and indicators,
 * the words and numbers YAML 1.1 resolves to something other than a string, and plain Unicode. */
static const char *const hostile[] = {"\xc2\x85",
                                      "\xe2\x80\xa8",
                                      "\xe2\x80\xa9",
                                      "\xc2\x80",
                                      "\xc2\x9f",
                                      "\xc2\xa0",
                                      "\xef\xbb\xbf",
                                      "\t",
                                      " ",
                                      "\r",
                                      "\n",
                                      "\r\n",
                                      "\x01",
                                      "\x1b[31m",
                                      "\x7f",
                                      "'",
                                      "\"",
                                      "\\",
                                      "#",
                                      " #",
                                      ": ",
                                      ":",
                                      "- ",
                                      "-",
                                      "---",
                                      "...",
                                      "?",
                                      "!",
                                      "&a",
                                      "*a",
                                      "|",
                                      ">",
                                      "%",
                                      "@",
                                      "`",
                                      "{",
                                      "}",
                                      "[",
                                      "]",
                                      ",",
                                      "yes",
                                      "no",
                                      "on",
                                      "off",
                                      "y",
                                      "n",
                                      "Y",
                                      "N",
                                      "true",
                                      "False",
                                      "NULL",
                                      "~",
                                      "null",
                                      "<<",
                                      "=",
                                      "0",
                                      "1",
                                      "0x1f",
                                      "0o17",
                                      "017",
                                      "0b101",
                                      "1_000",
                                      "1:20",
                                      "190:20:30",
                                      ".5",
                                      "._1",
                                      "+.5",
                                      "-_1",
                                      "1e3",
                                      "1.0e+3",
                                      "-.inf",
                                      ".NaN",
                                      "2001-12-14",
                                      "2001-12-14t21:59:43.10-05:00",
                                      "\xf0\x9f\x98\x80",
                                      "\xc3\xa9",
                                      "\xef\xbf\xbe",
                                      "\xef\xbf\xbf",
                                      "a",
                                      "b c",
                                      "$(HOME)",
                                      "${x}",
                                      "\xe2\x80\x8b",
                                      "\xed\x9f\xbf",
                                      "\xee\x80\x80",
                                      "\xf4\x8f\xbf\xbf",
                                      "x: y",
                                      "a #b",
                                      "-- ",
                                      "%YAML",
                                      NULL};

/* The n-th hostile string of a seeded run: each fragment alone first, then 1-5 fragments joined
 * at random. Returns: a new string (mu_free). */
static char *hostile_string(size_t n, unsigned long *seed)
{
  size_t nfrag = 0, i, parts;
  struct mu_buf b = MU_BUF_INIT(SIZE_MAX);
  while (hostile[nfrag] != NULL)
    nfrag++;
  if (n < nfrag)
    return mu_strdup(hostile[n]);
  *seed = *seed * 6364136223846793005UL + 1442695040888963407UL;
  parts = 1 + (size_t)((*seed >> 33) % 5);
  for (i = 0; i < parts; i++) {
    *seed = *seed * 6364136223846793005UL + 1442695040888963407UL;
    mu_buf_puts(&b, hostile[(*seed >> 33) % nfrag]);
  }
  return mu_buf_detach(&b);
}

/* Every hostile string, as a value and as a key, is written by the one quoting function and
 * read back by libyaml (a YAML 1.1 parser) as exactly that string. With $MU_YAML_DIR the
 * document and the expected strings (JSON) are saved for tests/cli/t2011-k8s-yaml-roundtrip.sh,
 * which reads them with PyYAML (YAML 1.1: pure Python and libyaml-based) and with the
 * Kubernetes validator's parser. The seed is $MU_YAML_SEED (printed), else fixed. */
TEST(k8s__yaml_hostile_strings_round_trip)
{
  const char *env = getenv("MU_YAML_SEED");
  unsigned long seed = env != NULL ? strtoul(env, NULL, 10) : 20240611UL, seed0 = seed;
  cJSON *doc = cJSON_CreateObject(), *back = NULL, *vals, *keys;
  struct mu_buf y = MU_BUF_INIT(SIZE_MAX), err = MU_BUF_INIT(1024);
  size_t line = 0, i, n = 3000;

  vals = cJSON_AddArrayToObject(doc, "values");
  keys = cJSON_AddObjectToObject(doc, "keys");
  for (i = 0; i < n; i++) {
    char *s = hostile_string(i, &seed), num[24];
    cJSON_AddItemToArray(vals, cJSON_CreateString(s));
    snprintf(num, sizeof num, "%zu", i);
    if (cJSON_GetObjectItemCaseSensitive(keys, s) == NULL)
      cJSON_AddStringToObject(keys, s, num);
    mu_free(s);
  }
  ASSERT_NULL(mu_yaml_invalid(doc));
  ASSERT_EQ(mu_yaml_emit(doc, &y), 0);
  if (getenv("MU_YAML_DIR") != NULL) { /* not a manifest: its own folder */
    char *json = cJSON_PrintUnformatted(doc);
    static const char *const ext[] = {"yaml", "json"};
    for (int f = 0; f < 2; f++) {
      char *path = mu_asprintf("%s/yaml-hostile.%s", getenv("MU_YAML_DIR"), ext[f]);
      FILE *fp = fopen(path, "w");
      ASSERT(fp != NULL);
      fputs(f == 0 ? mu_buf_str(&y) : json, fp);
      fclose(fp);
      mu_free(path);
    }
    mu_free(json);
  }
  if (mu_yaml_read(y.data, y.len, MU_YAML_STRINGS, &back, &line, &err) != 0)
    MU__FAIL("seed %lu: libyaml refused the document at line %zu: %s", seed0, line,
             mu_buf_str(&err));
  for (i = 0; i < n; i++) {
    const char *want = cJSON_GetArrayItem(vals, (int)i)->valuestring;
    const char *got = cJSON_GetArrayItem(cJSON_GetObjectItem(back, "values"), (int)i)->valuestring;
    if (strcmp(want, got) != 0) {
      char *w = cJSON_PrintUnformatted(cJSON_GetArrayItem(vals, (int)i));
      MU__FAIL("seed %lu: value %zu %s came back different", seed0, i, w);
    }
  }
  if (!cJSON_Compare(keys, cJSON_GetObjectItem(back, "keys"), 1))
    MU__FAIL("seed %lu: the keys came back different", seed0);
  /* A string that is not UTF-8 cannot be carried: refused, and found by name. */
  cJSON_AddStringToObject(doc, "bad", "caf\xe9");
  ASSERT_STR_EQ(mu_yaml_invalid(doc), "caf\xe9");
  mu_buf_clear(&y);
  ASSERT_EQ(mu_yaml_emit(doc, &y), MU_EINVAL);
  cJSON_Delete(doc);
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
  /* No muster image: the plan has a marked placeholder, and what is missing says how to get
   * one (k8s__missing_values_named_at_once tests more). */
  {
    struct mu_k8s_plan plan;
    struct mu_buf why = MU_BUF_INIT(SIZE_MAX), y = MU_BUF_INIT(SIZE_MAX);
    ASSERT_EQ(mu_k8s_plan(app, &cfg, "ddp-42", &plan, &err), 0);
    ASSERT_EQ(plan.placeholder, 1);
    ASSERT_EQ(mu_yaml_emit(plan.manifest, &y), 0);
    ASSERT(strstr(mu_buf_str(&y), "image: '" MU_K8S_IMAGE_PLACEHOLDER "'") != NULL);
    mu_k8s_explain_muster_image(app, &why);
    ASSERT(strstr(mu_buf_str(&why), "-cfg muster_image: required") != NULL);
    ASSERT(strstr(mu_buf_str(&why), "scripts/build-image.sh --push") != NULL);
    mu_k8s_plan_release(&plan);
    mu_buf_release(&why);
    mu_buf_release(&y);
  }
  mu_kvlist_set(&cfg.values, "muster_image", "reg/muster:1");
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
  /* The agent by absolute path from the emptyDir that the init container fills. */
  ASSERT_STR_EQ(cJSON_GetArrayItem(cmd, 0)->valuestring, "/muster/bin/muster");
  {
    cJSON *pspec = cJSON_GetObjectItem(cJSON_GetObjectItem(t1, "template"), "spec");
    cJSON *ic = cJSON_GetArrayItem(cJSON_GetObjectItem(pspec, "initContainers"), 0), *v, *m;
    int has_vol = 0, has_mnt = 0;
    ASSERT(ic != NULL);
    ASSERT_STR_EQ(cJSON_GetObjectItem(ic, "image")->valuestring, "reg/muster:1");
    ASSERT_STR_EQ(cJSON_GetArrayItem(cJSON_GetObjectItem(ic, "command"), 1)->valuestring, "deploy");
    cJSON_ArrayForEach(v, cJSON_GetObjectItem(pspec, "volumes")) has_vol |=
        strcmp(cJSON_GetObjectItem(v, "name")->valuestring, "muster-agent") == 0 &&
        cJSON_GetObjectItem(v, "emptyDir") != NULL;
    cJSON_ArrayForEach(m, cJSON_GetObjectItem(container_of(t1), "volumeMounts")) has_mnt |=
        strcmp(cJSON_GetObjectItem(m, "mountPath")->valuestring, "/muster") == 0;
    ASSERT(has_vol && has_mnt);
  }
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

/* ------------------------------------------------------------------------------ JobSet */

/* dist.ddp's shape: one role running the agent against ${rdzv_endpoint}, per-replica macros. */
static struct mu_app *ddp_app(long nodes, long min_nodes)
{
  struct mu_app *app = mu_app_new("ddp");
  struct mu_role *r = mu_app_add_role(app, "trainer");
  r->image = mu_strdup("img:1");
  r->entrypoint = mu_strdup("muster");
  mu_strvec_push(&r->args, "agent");
  mu_strvec_push(&r->args, "--rdzv-endpoint");
  mu_strvec_push(&r->args, "${rdzv_endpoint}");
  mu_strvec_push(&r->args, "--node-rank-hint=${replica_id}");
  mu_strvec_push(&r->args, "--");
  mu_strvec_push(&r->args, "python3");
  mu_strvec_push(&r->args, "-c");
  mu_strvec_push(&r->args, "print('$(HOME) $$ $x')");
  mu_kvlist_set(&r->env, "CACHE", "/data/cache_${replica_id}");
  mu_kvlist_set(&r->env, "RANK0", "${rank0_env}");
  r->num_replicas = nodes;
  r->min_replicas = min_nodes;
  r->max_retries = 2;
  return app;
}

static cJSON *obj_at(cJSON *o, const char *a, const char *b, const char *c, const char *d)
{
  const char *path[] = {a, b, c, d};
  for (int i = 0; i < 4 && path[i] != NULL && o != NULL; i++)
    o = cJSON_GetObjectItemCaseSensitive(o, path[i]);
  return o;
}

static const char *env_value(cJSON *ctr, const char *name)
{
  cJSON *e;
  cJSON_ArrayForEach(e, cJSON_GetObjectItem(ctr, "env"))
  {
    if (strcmp(cJSON_GetObjectItem(e, "name")->valuestring, name) == 0)
      return cJSON_GetObjectItem(e, "value") ? cJSON_GetObjectItem(e, "value")->valuestring
                                             : "(valueFrom)";
  }
  return NULL;
}

TEST(k8s__jobset_shape)
{
  struct mu_app *app = ddp_app(3, -1);
  struct mu_cfg cfg = {MU_KVLIST_INIT};
  cJSON *js, *spec, *rj, *musterd, *pod, *ctr, *cmd, *e0;

  mu_kvlist_set(&cfg.values, "api", "jobset");
  mu_kvlist_set(&cfg.values, "muster_image", "reg/muster:1");
  mu_kvlist_set(&cfg.values, "priority_class", "high");
  js = render(app, &cfg, "ddp-42", "unit-jobset-ddp");
  ASSERT_STR_EQ(cJSON_GetObjectItem(js, "apiVersion")->valuestring, "jobset.x-k8s.io/v1alpha2");
  ASSERT_STR_EQ(cJSON_GetObjectItem(js, "kind")->valuestring, "JobSet");
  spec = cJSON_GetObjectItem(js, "spec");
  ASSERT_EQ(obj_at(spec, "failurePolicy", "maxRestarts", NULL, NULL)->valueint, 2);
  ASSERT(cJSON_IsTrue(obj_at(spec, "network", "enableDNSHostnames", NULL, NULL)));
  ASSERT(cJSON_IsTrue(obj_at(spec, "network", "publishNotReadyAddresses", NULL, NULL)));
  ASSERT_NULL(cJSON_GetObjectItem(spec, "suspend"));
  /* musterd first, which the role depends on; success when the role's Jobs succeed */
  musterd = cJSON_GetArrayItem(cJSON_GetObjectItem(spec, "replicatedJobs"), 0);
  rj = cJSON_GetArrayItem(cJSON_GetObjectItem(spec, "replicatedJobs"), 1);
  ASSERT_STR_EQ(cJSON_GetObjectItem(musterd, "name")->valuestring, "musterd");
  ASSERT_NULL(cJSON_GetObjectItem(musterd, "dependsOn"));
  ASSERT_STR_EQ(cJSON_GetObjectItem(rj, "name")->valuestring, "trainer");
  ASSERT_EQ(cJSON_GetObjectItem(rj, "replicas")->valueint, 3);
  ASSERT_STR_EQ(obj_at(cJSON_GetArrayItem(cJSON_GetObjectItem(rj, "dependsOn"), 0), "status", NULL,
                       NULL, NULL)
                    ->valuestring,
                "Ready");
  ASSERT_STR_EQ(
      cJSON_GetArrayItem(obj_at(spec, "successPolicy", "targetReplicatedJobs", NULL, NULL), 0)
          ->valuestring,
      "trainer");
  ASSERT_STR_EQ(obj_at(rj, "template", "spec", "completionMode", NULL)->valuestring, "Indexed");
  ASSERT_EQ(obj_at(rj, "template", "spec", "completions", NULL)->valueint, 1);
  ASSERT_EQ(obj_at(rj, "template", "spec", "backoffLimit", NULL)->valueint, 0);
  pod = obj_at(rj, "template", "spec", "template", NULL);
  ASSERT_STR_EQ(obj_at(pod, "spec", "restartPolicy", NULL, NULL)->valuestring, "Never");
  ASSERT_STR_EQ(obj_at(pod, "spec", "priorityClassName", NULL, NULL)->valuestring, "high");
  ASSERT_NULL(obj_at(pod, "spec", "schedulerName", NULL, NULL)); /* the cluster's default */
  ASSERT_NULL(obj_at(pod, "metadata", "labels", "torchx.pytorch.org/replica-id", NULL));
  ctr = cJSON_GetArrayItem(obj_at(pod, "spec", "containers", NULL, NULL), 0);
  ASSERT_STR_EQ(cJSON_GetObjectItem(ctr, "name")->valuestring, "trainer");
  /* the replica's index from JobSet's annotation, first, and $(...) where a macro said so */
  e0 = cJSON_GetArrayItem(cJSON_GetObjectItem(ctr, "env"), 0);
  ASSERT_STR_EQ(cJSON_GetObjectItem(e0, "name")->valuestring, "MUSTER_REPLICA_ID");
  ASSERT_STR_EQ(obj_at(e0, "valueFrom", "fieldRef", "fieldPath", NULL)->valuestring,
                "metadata.annotations['jobset.sigs.k8s.io/job-index']");
  ASSERT_STR_EQ(env_value(ctr, "CACHE"), "/data/cache_$(MUSTER_REPLICA_ID)");
  ASSERT_STR_EQ(env_value(ctr, "RANK0"), "TORCHX_RANK0_HOST");
  ASSERT_STR_EQ(env_value(ctr, "TORCHX_RANK0_HOST"), "ddp-42-trainer-0-0.ddp-42");
  ASSERT_STR_EQ(env_value(ctr, "MUSTER_RDZV_TOKEN_FILE"), MU_K8S_TOKEN_FILE);
  cmd = cJSON_GetObjectItem(ctr, "command");
  ASSERT_STR_EQ(cJSON_GetArrayItem(cmd, 0)->valuestring, "/muster/bin/muster");
  ASSERT_STR_EQ(cJSON_GetArrayItem(cmd, 3)->valuestring, "ddp-42-musterd-0-0.ddp-42:29400");
  ASSERT_STR_EQ(cJSON_GetArrayItem(cmd, 4)->valuestring, "--node-rank-hint=$(MUSTER_REPLICA_ID)");
  /* the user's own $( and $$ reach the process as written: doubled for Kubernetes */
  ASSERT_STR_EQ(cJSON_GetArrayItem(cmd, 8)->valuestring, "print('$$(HOME) $ $x')");
  /* the musterd pod: OnFailure (the kubelet restarts it), the token file */
  pod = obj_at(musterd, "template", "spec", "template", NULL);
  ASSERT_STR_EQ(obj_at(pod, "spec", "restartPolicy", NULL, NULL)->valuestring, "OnFailure");
  cmd = cJSON_GetObjectItem(cJSON_GetArrayItem(obj_at(pod, "spec", "containers", NULL, NULL), 0),
                            "command");
  ASSERT_STR_EQ(cJSON_GetArrayItem(cmd, 4)->valuestring, MU_K8S_TOKEN_FILE);
  cJSON_Delete(js);

  /* Kueue: the queue label, and suspended until Kueue admits it; a scheduler when asked */
  mu_kvlist_set(&cfg.values, "kueue_queue", "team-a");
  mu_kvlist_set(&cfg.values, "scheduler_name", "default-scheduler");
  mu_kvlist_set(&cfg.values, "tolerations", "aws.amazon.com/neuron:NoSchedule;spot");
  js = render(app, &cfg, "ddp-42", "unit-jobset-kueue");
  ASSERT(cJSON_IsTrue(obj_at(js, "spec", "suspend", NULL, NULL)));
  ASSERT_STR_EQ(obj_at(js, "metadata", "labels", "kueue.x-k8s.io/queue-name", NULL)->valuestring,
                "team-a");
  pod = obj_at(cJSON_GetArrayItem(obj_at(js, "spec", "replicatedJobs", NULL, NULL), 1), "template",
               "spec", "template", NULL);
  ASSERT_STR_EQ(obj_at(pod, "spec", "schedulerName", NULL, NULL)->valuestring, "default-scheduler");
  ASSERT_EQ(cJSON_GetArraySize(obj_at(pod, "spec", "tolerations", NULL, NULL)), 2);
  cJSON_Delete(js);
  mu_app_free(app);
  mu_cfg_release(&cfg);
}

TEST(k8s__jobset_elastic_retries_and_names)
{
  struct mu_app *app = ddp_app(4, 2);
  struct mu_cfg cfg = {MU_KVLIST_INIT};
  struct mu_buf err = MU_BUF_INIT(1024);
  char *name = NULL;
  cJSON *js, *rj;

  mu_kvlist_set(&cfg.values, "api", "jobset");
  mu_kvlist_set(&cfg.values, "muster_image", "reg/muster:1");
  /* elastic: every replica is created (a JobSet has no minimum); the agent stays elastic */
  js = render(app, &cfg, "ddp-42", "jobset-elastic");
  rj = cJSON_GetArrayItem(obj_at(js, "spec", "replicatedJobs", NULL, NULL), 1);
  ASSERT_EQ(cJSON_GetObjectItem(rj, "replicas")->valueint, 4);
  cJSON_Delete(js);
  /* REPLICA retries: the Job replaces its pod (backoffLimit); the JobSet does not restart.
   * Elastic 2 of 4 (2 to spare): max_retries + spares; 4 of 4 (none): max_retries. */
  app->roles[0].retry_policy = MU_RETRY_REPLICA;
  app->roles[0].max_retries = 5;
  js = render(app, &cfg, "ddp-42", "jobset-replica-retries");
  rj = cJSON_GetArrayItem(obj_at(js, "spec", "replicatedJobs", NULL, NULL), 1);
  ASSERT_EQ(obj_at(rj, "template", "spec", "backoffLimit", NULL)->valueint, 7);
  ASSERT_EQ(obj_at(js, "spec", "failurePolicy", "maxRestarts", NULL)->valueint, 5);
  cJSON_Delete(js);
  app->roles[0].min_replicas = 4;
  js = render(app, &cfg, "ddp-42", NULL);
  rj = cJSON_GetArrayItem(obj_at(js, "spec", "replicatedJobs", NULL, NULL), 1);
  ASSERT_EQ(obj_at(rj, "template", "spec", "backoffLimit", NULL)->valueint, 5);
  cJSON_Delete(js);
  app->roles[0].min_replicas = 2;
  /* names: the longest pod name <jobset>-<role>-<k>-0-<5> stays within 63 */
  mu_free(app->name);
  app->name = mu_strdup("A_Very_Long_Application_Name_That_Goes_On_And_On_For_Far_Too_Many");
  mu_free(app->roles[0].name);
  app->roles[0].name = mu_strdup("an_extremely_long_role_name_for_a_trainer");
  app->roles[0].num_replicas = 12;
  setenv("MUSTER_APP_ID_SUFFIX", "abcdefghijkl", 1);
  unsetenv("MUSTER_APP_ID");
  ASSERT_EQ(mu_k8s_job_name(app, &cfg, &name, &err), 0);
  {
    char *rjn = mu_k8s_rjob_name(app->roles[0].name, 12);
    ASSERT(strlen(name) + 1 + strlen(rjn) + strlen("-11-0-abcde") <= 63);
    mu_free(rjn);
  }
  js = render(app, &cfg, name, "jobset-long-names");
  cJSON_Delete(js);
  mu_free(name);
  mu_app_free(app);
  mu_cfg_release(&cfg);
  mu_buf_release(&err);
}

/* Secrets and ConfigMaps as mounts, and variables from a Secret's (or ConfigMap's) key, on both
 * APIs; a JobSet refuses a Volcano queue, naming Kueue's. */
TEST(k8s__secrets_configmaps_both_apis)
{
  static const char *const apis[] = {"volcano", "jobset"};
  for (int a = 0; a < 2; a++) {
    struct mu_app *app = case01_app();
    struct mu_cfg cfg = {MU_KVLIST_INIT};
    struct mu_buf err = MU_BUF_INIT(1024);
    char items_s[][24] = {"type=secret",    "name=hf-token",    "dst=/var/secrets/hf",
                          "type=configmap", "src=train-config", "dst=/etc/train"};
    char *items[6];
    for (int i = 0; i < 6; i++)
      items[i] = items_s[i];
    cJSON *job, *pod, *ctr, *v, *e;
    const char *vol[2] = {NULL, NULL}, *mnt[2] = {NULL, NULL}, *ref = NULL;
    char save[32];

    ASSERT_EQ(mu_mounts_parse(&app->roles[0], items, 6, &err), 0);
    mu_kvlist_set(&app->roles[0].env, "HF_TOKEN", "[SECRET]hf-token:token");
    mu_kvlist_set(&app->roles[0].env, "LR", "[CONFIGMAP]train-config:lr");
    mu_kvlist_set(&cfg.values, "api", apis[a]);
    mu_kvlist_set(&cfg.values, "queue", "q");
    if (a == 1) { /* a Volcano queue has no place in a JobSet */
      ASSERT_EQ(mu_k8s_render(app, &cfg, "app-name-42", &job, &err), MU_EINVAL);
      ASSERT(strstr(mu_buf_str(&err), "kueue_queue=q") != NULL);
      mu_kvlist_set(&cfg.values, "queue", "");
    }
    snprintf(save, sizeof save, "unit-%s-secrets", apis[a]);
    job = render(app, &cfg, "app-name-42", save);
    pod = a == 0 ? cJSON_GetObjectItem(task_at(job, 0), "template")
                 : obj_at(cJSON_GetArrayItem(obj_at(job, "spec", "replicatedJobs", NULL, NULL), 0),
                          "template", "spec", "template", NULL);
    ctr = cJSON_GetArrayItem(obj_at(pod, "spec", "containers", NULL, NULL), 0);
    cJSON_ArrayForEach(v, obj_at(pod, "spec", "volumes", NULL, NULL))
    {
      if (obj_at(v, "secret", "secretName", NULL, NULL))
        vol[0] = obj_at(v, "secret", "secretName", NULL, NULL)->valuestring;
      if (obj_at(v, "configMap", "name", NULL, NULL))
        vol[1] = obj_at(v, "configMap", "name", NULL, NULL)->valuestring;
    }
    ASSERT_STR_EQ(vol[0], "hf-token");
    ASSERT_STR_EQ(vol[1], "train-config");
    cJSON_ArrayForEach(v, cJSON_GetObjectItem(ctr, "volumeMounts"))
    {
      const char *path = cJSON_GetObjectItem(v, "mountPath")->valuestring;
      if (strcmp(path, "/var/secrets/hf") == 0 || strcmp(path, "/etc/train") == 0) {
        ASSERT(cJSON_IsTrue(cJSON_GetObjectItem(v, "readOnly")));
        mnt[path[1] == 'v' ? 0 : 1] = path;
      }
    }
    ASSERT(mnt[0] != NULL && mnt[1] != NULL);
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(ctr, "env"))
    {
      if (strcmp(cJSON_GetObjectItem(e, "name")->valuestring, "HF_TOKEN") == 0) {
        ASSERT_STR_EQ(obj_at(e, "valueFrom", "secretKeyRef", "name", NULL)->valuestring,
                      "hf-token");
        ASSERT_STR_EQ(obj_at(e, "valueFrom", "secretKeyRef", "key", NULL)->valuestring, "token");
        ref = "secret";
      }
      if (strcmp(cJSON_GetObjectItem(e, "name")->valuestring, "LR") == 0)
        ASSERT_STR_EQ(obj_at(e, "valueFrom", "configMapKeyRef", "key", NULL)->valuestring, "lr");
    }
    ASSERT_STR_EQ(ref, "secret");
    cJSON_Delete(job);
    mu_app_free(app);
    mu_cfg_release(&cfg);
    mu_buf_release(&err);
  }
}

/* Every missing required value is named at once (issue 26); a missing muster image alone is a
 * placeholder in the plan, not an error. */
TEST(k8s__missing_values_named_at_once)
{
  struct mu_app *app = ddp_app(2, -1);
  struct mu_cfg cfg = {MU_KVLIST_INIT};
  struct mu_buf err = MU_BUF_INIT(4096);
  struct mu_k8s_plan plan;

  mu_free(app->roles[0].image);
  app->roles[0].image = NULL;
  ASSERT_EQ(mu_k8s_plan(app, &cfg, "ddp-42", &plan, &err), MU_EINVAL);
  mu_k8s_plan_release(&plan);
  ASSERT(strstr(mu_buf_str(&err), "3 required values are missing:") != NULL);
  ASSERT(strstr(mu_buf_str(&err), "\n  - roles[0].image: required") != NULL);
  ASSERT(strstr(mu_buf_str(&err), "\n  - -cfg queue: required") != NULL);
  ASSERT(strstr(mu_buf_str(&err), "\n  - -cfg muster_image: required") != NULL);
  /* the image given: the queue and the muster image */
  app->roles[0].image = mu_strdup("img");
  mu_buf_clear(&err);
  ASSERT_EQ(mu_k8s_plan(app, &cfg, "ddp-42", &plan, &err), MU_EINVAL);
  mu_k8s_plan_release(&plan);
  ASSERT(strstr(mu_buf_str(&err), "2 required values are missing:\n  - -cfg queue") == err.data);
  ASSERT(strstr(mu_buf_str(&err), "\n  - -cfg muster_image: required") != NULL);
  /* the queue alone */
  mu_kvlist_set(&cfg.values, "muster_image", "m:1");
  mu_buf_clear(&err);
  ASSERT_EQ(mu_k8s_plan(app, &cfg, "ddp-42", &plan, &err), MU_EINVAL);
  mu_k8s_plan_release(&plan);
  ASSERT(strncmp(mu_buf_str(&err), "-cfg queue: required", 20) == 0);
  /* then only the muster image: a plan, marked */
  mu_kvlist_set(&cfg.values, "queue", "q");
  mu_kvlist_set(&cfg.values, "muster_image", "");
  mu_buf_clear(&err);
  ASSERT_EQ(mu_k8s_plan(app, &cfg, "ddp-42", &plan, &err), 0);
  ASSERT_EQ(plan.placeholder, 1);
  ASSERT_STR_EQ(plan.token_secret, "ddp-42-rdzv-token");
  mu_k8s_plan_release(&plan);
  mu_app_free(app);
  mu_cfg_release(&cfg);
  mu_buf_release(&err);
}

/* describe: the app as submitted, read back from the job's object (both APIs), with the job's
 * name and rendezvous in place of their macros. */
TEST(k8s__describe_reads_the_app_back)
{
  static const char *const apis[] = {"volcano", "jobset"};
  for (int a = 0; a < 2; a++) {
    struct mu_app *app = ddp_app(2, 1), *back = NULL;
    struct mu_cfg cfg = {MU_KVLIST_INIT};
    struct mu_buf err = MU_BUF_INIT(1024), want = MU_BUF_INIT(SIZE_MAX),
                  got = MU_BUF_INIT(SIZE_MAX);
    struct mu_buf js = MU_BUF_INIT(SIZE_MAX);
    cJSON *job;
    char *text;

    mu_kvlist_set(&cfg.values, "api", apis[a]);
    mu_kvlist_set(&cfg.values, "queue", a == 0 ? "q" : "");
    mu_kvlist_set(&cfg.values, "muster_image", "m:1");
    mu_kvlist_set(&app->roles[0].env, "JOB", "${app_id}");
    job = render(app, &cfg, "ddp-42", NULL);
    text = cJSON_PrintUnformatted(job);
    ASSERT_EQ(mu_k8s_parse_app(text, &back, &err), 0);
    mu_app_to_json(app, &js);
    mu_buf_put_replaced(&want, mu_buf_str(&js), "${app_id}", "ddp-42");
    mu_buf_clear(&js);
    mu_buf_put_replaced(&js, mu_buf_str(&want), "${rdzv_endpoint}",
                        a == 0 ? "ddp-42-musterd-0.ddp-42:29400"
                               : "ddp-42-musterd-0-0.ddp-42:29400");
    mu_app_to_json(back, &got);
    ASSERT_STR_EQ(mu_buf_str(&got), mu_buf_str(&js));
    ASSERT_STR_EQ(mu_kvlist_get(&back->roles[0].env, "JOB"), "ddp-42");
    ASSERT_STR_EQ(back->roles[0].args.v[7], "print('$(HOME) $$ $x')"); /* as the user wrote it */
    /* a job without the annotation (another tool's): said so */
    cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItem(job, "metadata"), "annotations");
    cJSON_free(text);
    text = cJSON_PrintUnformatted(job);
    mu_app_free(back);
    back = NULL;
    ASSERT_EQ(mu_k8s_parse_app(text, &back, &err), MU_ENOENT);
    ASSERT(strstr(mu_buf_str(&err), "carries no muster.dev/app annotation") != NULL);
    cJSON_free(text);
    cJSON_Delete(job);
    mu_app_free(app);
    mu_cfg_release(&cfg);
    mu_buf_release(&err);
    mu_buf_release(&want);
    mu_buf_release(&got);
    mu_buf_release(&js);
  }
}

/* ------------------------------------------------------------------------- rdzv_tls */

/* The pod template of the job's musterd (which 0) or of its first role (which 1). */
static cJSON *pod_of(cJSON *job, int which)
{
  cJSON *rjobs = obj_at(job, "spec", "replicatedJobs", NULL, NULL);
  if (rjobs != NULL)
    return obj_at(cJSON_GetArrayItem(rjobs, which), "template", "spec", "template", NULL);
  return cJSON_GetObjectItem(task_at(job, which), "template");
}

/* "secretName: key,key" of pod's volume vname, or "" when it has none. */
static char *secret_volume_of(cJSON *pod, const char *vname)
{
  struct mu_buf b = MU_BUF_INIT(SIZE_MAX);
  cJSON *v, *it;
  cJSON_ArrayForEach(v, obj_at(pod, "spec", "volumes", NULL, NULL))
  {
    if (strcmp(cJSON_GetObjectItem(v, "name")->valuestring, vname) != 0)
      continue;
    mu_buf_printf(&b, "%s:", obj_at(v, "secret", "secretName", NULL, NULL)->valuestring);
    cJSON_ArrayForEach(it, obj_at(v, "secret", "items", NULL, NULL))
    {
      ASSERT_STR_EQ(cJSON_GetObjectItem(it, "key")->valuestring,
                    cJSON_GetObjectItem(it, "path")->valuestring);
      mu_buf_printf(&b, " %s", cJSON_GetObjectItem(it, "key")->valuestring);
    }
  }
  return mu_buf_detach(&b);
}

/* The command of pod's first container, joined by ' '. */
static char *command_of(cJSON *pod)
{
  struct mu_buf b = MU_BUF_INIT(SIZE_MAX);
  cJSON *a;
  cJSON_ArrayForEach(
      a, cJSON_GetObjectItem(cJSON_GetArrayItem(obj_at(pod, "spec", "containers", NULL, NULL), 0),
                             "command"))
  {
    mu_buf_printf(&b, "%s%s", b.len ? " " : "", a->valuestring);
  }
  return mu_buf_detach(&b);
}

/* Checks the musterd side of -cfg rdzv_tls (with client certificates or not), and that the
 * Service of the plan selects that pod. */
static void check_tls_musterd(cJSON *pod, const cJSON *svc, int clients)
{
  char *cmd = command_of(pod), *vol = secret_volume_of(pod, "rdzv-tls");
  cJSON *ctr = cJSON_GetArrayItem(obj_at(pod, "spec", "containers", NULL, NULL), 0), *s;
  ASSERT(strstr(cmd, " --tls-cert /var/run/muster/rdzv-tls/tls.crt --tls-key "
                     "/var/run/muster/rdzv-tls/tls.key") != NULL);
  ASSERT_EQ(strstr(cmd, "--tls-client-ca /var/run/muster/rdzv-tls/ca.crt") != NULL, clients);
  ASSERT_STR_EQ(vol, clients ? "rdzv-tls: tls.crt tls.key ca.crt" : "rdzv-tls: tls.crt tls.key");
  if (clients) /* the kubelet has no client certificate: the probe says it listens */
    ASSERT_EQ(obj_at(ctr, "readinessProbe", "tcpSocket", "port", NULL)->valueint, 29400);
  else
    ASSERT_STR_EQ(obj_at(ctr, "readinessProbe", "httpGet", "scheme", NULL)->valuestring, "HTTPS");
  ASSERT_STR_EQ(obj_at((cJSON *)svc, "metadata", "name", NULL, NULL)->valuestring,
                "ddp-42-musterd");
  ASSERT_STR_EQ(obj_at((cJSON *)svc, "spec", "clusterIP", NULL, NULL)->valuestring, "None");
  ASSERT(cJSON_IsTrue(obj_at((cJSON *)svc, "spec", "publishNotReadyAddresses", NULL, NULL)));
  ASSERT_EQ(cJSON_GetObjectItem(
                cJSON_GetArrayItem(obj_at((cJSON *)svc, "spec", "ports", NULL, NULL), 0), "port")
                ->valueint,
            29400);
  cJSON_ArrayForEach(s, obj_at((cJSON *)svc, "spec", "selector", NULL, NULL))
  {
    ASSERT_STR_EQ(obj_at(pod, "metadata", "labels", s->string, NULL)->valuestring, s->valuestring);
  }
  ASSERT_NULL(obj_at((cJSON *)svc, "metadata", "ownerReferences", NULL, NULL)); /* at schedule */
  mu_free(cmd);
  mu_free(vol);
}

/* Checks an agent's side: the CA alone of the musterd's Secret, the client pair, the env, and
 * the endpoint that names the Service. */
static void check_tls_agent(cJSON *pod, int clients)
{
  char *cmd = command_of(pod), *vol = secret_volume_of(pod, "rdzv-tls");
  char *cvol = secret_volume_of(pod, "rdzv-tls-client");
  cJSON *ctr = cJSON_GetArrayItem(obj_at(pod, "spec", "containers", NULL, NULL), 0);
  ASSERT(strstr(cmd, " --rdzv-endpoint https://ddp-42-musterd.ml.svc:29400 ") != NULL);
  ASSERT_STR_EQ(vol, "rdzv-tls: ca.crt"); /* never the server's key */
  ASSERT_STR_EQ(cvol, clients ? "agent-tls: tls.crt tls.key" : "");
  ASSERT_STR_EQ(env_value(ctr, "MUSTER_RDZV_CACERT"), "/var/run/muster/rdzv-tls/ca.crt");
  if (clients) {
    ASSERT_STR_EQ(env_value(ctr, "MUSTER_RDZV_CERT"), "/var/run/muster/rdzv-tls-client/tls.crt");
    ASSERT_STR_EQ(env_value(ctr, "MUSTER_RDZV_KEY"), "/var/run/muster/rdzv-tls-client/tls.key");
  } else {
    ASSERT_NULL(env_value(ctr, "MUSTER_RDZV_CERT"));
  }
  ASSERT_STR_EQ(env_value(ctr, "MUSTER_RDZV_TOKEN_FILE"), MU_K8S_TOKEN_FILE); /* and the token */
  mu_free(cmd);
  mu_free(vol);
  mu_free(cvol);
}

/* -cfg rdzv_tls=SECRET (and rdzv_tls_client=SECRET) on both APIs: the job's musterd serves
 * HTTPS with the Secret's certificate, the agents check it with its CA alone and reach it by
 * the Service's name, which the plan carries for schedule to create. */
TEST(k8s__rdzv_tls_both_apis)
{
  static const char *const apis[] = {"volcano", "jobset"};
  for (int a = 0; a < 6; a++) {
    struct mu_app *app = ddp_app(2, -1);
    struct mu_cfg cfg = {MU_KVLIST_INIT};
    struct mu_buf err = MU_BUF_INIT(1024);
    struct mu_k8s_plan plan;
    char save[32];
    int tls = a < 4, clients = a >= 2 && a < 4;
    mu_kvlist_set(&cfg.values, "api", apis[a % 2]);
    mu_kvlist_set(&cfg.values, "queue", a % 2 == 0 ? "q" : "");
    mu_kvlist_set(&cfg.values, "muster_image", "m:1");
    mu_kvlist_set(&cfg.values, "namespace", "ml");
    if (tls)
      mu_kvlist_set(&cfg.values, "rdzv_tls", "rdzv-tls");
    if (clients)
      mu_kvlist_set(&cfg.values, "rdzv_tls_client", "agent-tls");
    ASSERT_EQ(mu_k8s_plan(app, &cfg, "ddp-42", &plan, &err), 0);
    if (tls) {
      ASSERT(plan.service != NULL);
      snprintf(save, sizeof save, "unit-%s-%s", apis[a % 2], clients ? "mtls" : "tls");
      cJSON *job = render(app, &cfg, "ddp-42", save);
      check_tls_musterd(pod_of(job, 0), plan.service, clients);
      check_tls_agent(pod_of(job, 1), clients);
      cJSON_Delete(job);
    } else { /* without rdzv_tls: no Service, no TLS volume, the pod's own name */
      char *vol = secret_volume_of(pod_of(plan.manifest, 1), "rdzv-tls");
      char *cmd = command_of(pod_of(plan.manifest, 1));
      ASSERT_NULL(plan.service);
      ASSERT_STR_EQ(vol, "");
      ASSERT(strstr(cmd, " --rdzv-endpoint ddp-42-musterd-0") != NULL);
      mu_free(vol);
      mu_free(cmd);
    }
    mu_k8s_plan_release(&plan);
    mu_app_free(app);
    mu_cfg_release(&cfg);
    mu_buf_release(&err);
  }
}

/* Each value -cfg rdzv_tls cannot serve is refused, naming the runopt and the fix. */
TEST(k8s__rdzv_tls_refusals)
{
  static const struct {
    const char *k1, *v1, *k2, *v2, *job, *want;
  } cases[] = {
      {"rdzv_tls", "", NULL, NULL, "ddp-42", "-cfg rdzv_tls: the Secret's name is missing"},
      {"rdzv_tls", "/etc/tls", NULL, NULL, "ddp-42", "not a directory as on local and Slurm"},
      {"rdzv_tls", "Tls_Secret", NULL, NULL, "ddp-42", "'Tls_Secret' is not a Kubernetes Secret"},
      {"rdzv_tls_client", "c", NULL, NULL, "ddp-42", "name that one's Secret with -cfg rdzv_tls"},
      {"rdzv_tls", "t", "rdzv_tls_client", "a b", "ddp-42", "rdzv_tls_client='a b' is not a"},
      {"rdzv_tls", "t", "rdzv", "musterd.infra:2379", "ddp-42", "uses rdzv=musterd.infra:2379"},
      {"rdzv_tls", "t", "rdzv", "none", "plain", "-cfg rdzv=job starts one"},
      {"rdzv_tls", "t", NULL, NULL, "a-very-long-job-name-that-fills-almost-all-of-the-63-chars",
       "leaves no room for its musterd's Service"},
      {"rdzv_token_secret", "Bad_Name", NULL, NULL, "ddp-42", "rdzv_token_secret='Bad_Name'"},
      {"rdzv_tls", "t", "namespace", "ML team", "ddp-42", "namespace='ML team' is not a"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    int plain = strcmp(cases[i].job, "plain") == 0; /* a job that uses no rendezvous */
    struct mu_app *app = plain ? case01_app() : ddp_app(2, -1);
    struct mu_cfg cfg = {MU_KVLIST_INIT};
    struct mu_buf err = MU_BUF_INIT(4096);
    cJSON *job = NULL;
    mu_kvlist_set(&cfg.values, "queue", "q");
    mu_kvlist_set(&cfg.values, "muster_image", "m:1");
    mu_kvlist_set(&cfg.values, cases[i].k1, cases[i].v1);
    if (cases[i].k2 != NULL)
      mu_kvlist_set(&cfg.values, cases[i].k2, cases[i].v2);
    ASSERT_EQ(mu_k8s_render(app, &cfg, cases[i].job, &job, &err), MU_EINVAL);
    if (strstr(mu_buf_str(&err), cases[i].want) == NULL)
      MU__FAIL("case %zu: '%s' does not say '%s'", i, mu_buf_str(&err), cases[i].want);
    cJSON_Delete(job);
    mu_app_free(app);
    mu_cfg_release(&cfg);
    mu_buf_release(&err);
  }
}

/* A role that reaches the job's musterd through torchrun cannot check its certificate; names
 * of Secrets are DNS subdomains. */
TEST(k8s__rdzv_tls_torchrun_and_names)
{
  struct mu_app *app = ddp_app(2, -1);
  struct mu_cfg cfg = {MU_KVLIST_INIT};
  struct mu_buf err = MU_BUF_INIT(4096);
  cJSON *job = NULL;
  mu_free(app->roles[0].entrypoint);
  app->roles[0].entrypoint = mu_strdup("torchrun");
  mu_strvec_release(&app->roles[0].args);
  mu_strvec_push(&app->roles[0].args, "--rdzv_backend=etcd-v2");
  mu_strvec_push(&app->roles[0].args, "--rdzv_endpoint=${rdzv_endpoint}");
  mu_kvlist_set(&cfg.values, "queue", "q");
  mu_kvlist_set(&cfg.values, "muster_image", "m:1");
  mu_kvlist_set(&cfg.values, "rdzv_tls", "t");
  ASSERT_EQ(mu_k8s_render(app, &cfg, "ddp-42", &job, &err), MU_EINVAL);
  ASSERT(strstr(mu_buf_str(&err), "-cfg rdzv_tls: roles[0] (trainer) reaches the job's musterd "
                                  "without `muster agent`") != NULL);
  ASSERT(strstr(mu_buf_str(&err), "--launcher muster") != NULL);
  cJSON_Delete(job);
  job = NULL;
  /* torchrun's c10d backend: PyTorch's TCPStore protocol has no TLS either */
  mu_buf_clear(&err);
  mu_free(app->roles[0].args.v[1]);
  app->roles[0].args.v[1] = mu_strdup("--rdzv_endpoint=${c10d_endpoint}");
  mu_kvlist_set(&cfg.values, "rdzv", "job");
  ASSERT_EQ(mu_k8s_render(app, &cfg, "ddp-42", &job, &err), MU_EINVAL);
  ASSERT(strstr(mu_buf_str(&err), "roles[0] (trainer) reaches the job's musterd without") != NULL);
  cJSON_Delete(job);
  ASSERT_EQ(mu_k8s_subdomain_ok("rdzv-tls"), 1);
  ASSERT_EQ(mu_k8s_subdomain_ok("tls.team-a.example"), 1);
  ASSERT_EQ(mu_k8s_subdomain_ok("a"), 1);
  static const char *const bad[] = {"", "-a", "a-", "a..b", ".a", "a.", "A", "a_b", "a/b", "a b"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    if (mu_k8s_subdomain_ok(bad[i]))
      MU__FAIL("'%s' taken as a Secret name", bad[i]);
  char long_name[256];
  memset(long_name, 'a', 254);
  long_name[254] = '\0';
  ASSERT_EQ(mu_k8s_subdomain_ok(long_name), 0);
  long_name[253] = '\0';
  ASSERT_EQ(mu_k8s_subdomain_ok(long_name), 1);
  mu_app_free(app);
  mu_cfg_release(&cfg);
  mu_buf_release(&err);
}

/* ------------------------------------------------------------------------------ list */

/* `muster list`'s reasons, in the words `muster status` gives: one read of the namespace's pods
 * for every job, its events only when a waiting pod's own status says nothing, and then each
 * job's from them (the newest Warning event about its pod). */
TEST(k8s__list_reasons_read_events_once)
{
  static const char pods[] =
      "{\"items\":["
      "{\"metadata\":{\"name\":\"a-t-0-0\"},\"status\":{\"phase\":\"Pending\","
      "\"containerStatuses\":[{\"name\":\"t-0\",\"state\":{\"waiting\":{\"reason\":"
      "\"ContainerCreating\"}}}]}},"
      "{\"metadata\":{\"name\":\"b-t-0-0\"},\"status\":{\"phase\":\"Pending\","
      "\"containerStatuses\":[{\"name\":\"t-0\",\"state\":{\"waiting\":{\"reason\":"
      "\"ImagePullBackOff\",\"message\":\"Back-off pulling image \\\"x:1\\\"\"}}}]}},"
      "{\"metadata\":{\"name\":\"c-t-0-0\"},\"status\":{\"phase\":\"Pending\"}}]}";
  static const char events[] =
      "{\"items\":["
      "{\"involvedObject\":{\"kind\":\"Pod\",\"name\":\"a-t-0-0\"},\"type\":\"Warning\","
      "\"reason\":\"FailedScheduling\",\"message\":\"old\",\"lastTimestamp\":\"2026-01-01T00:00:"
      "01Z\"},"
      "{\"involvedObject\":{\"kind\":\"Pod\",\"name\":\"a-t-0-0\"},\"type\":\"Warning\","
      "\"reason\":\"FailedMount\",\"message\":\"secret \\\"s\\\" not found\",\"lastTimestamp\":"
      "\"2026-01-01T00:00:09Z\"},"
      "{\"involvedObject\":{\"kind\":\"Pod\",\"name\":\"c-t-0-0\"},\"type\":\"Warning\","
      "\"reason\":\"FailedMount\",\"message\":\"x\"}]}";
  struct mu_app_list_entry *l = mu_calloc(3, sizeof(*l));
  struct mu_buf err = MU_BUF_INIT(1024);
  int want = 0;
  l[0].app_id = mu_strdup("default:a");
  l[0].state = MU_STATE_PENDING;
  l[1].app_id = mu_strdup("default:b");
  l[1].state = MU_STATE_PENDING;
  l[2].app_id = mu_strdup("default:c");
  l[2].state = MU_STATE_FAILED; /* ended: no reason */
  ASSERT_EQ(mu_k8s_list_reasons(pods, NULL, l, 3, &want, &err), 0);
  ASSERT_EQ(want, 1); /* a's pod says nothing of itself */
  ASSERT_NULL(l[0].reason);
  ASSERT_STR_EQ(l[1].reason, "t/0: ImagePullBackOff: Back-off pulling image \"x:1\"");
  ASSERT_EQ(mu_k8s_list_reasons(pods, events, l, 3, &want, &err), 0);
  ASSERT_EQ(want, 0);
  ASSERT_STR_EQ(l[0].reason, "t/0: FailedMount: secret \"s\" not found");
  ASSERT_STR_EQ(l[1].reason, "t/0: ImagePullBackOff: Back-off pulling image \"x:1\"");
  ASSERT_NULL(l[2].reason);
  /* the same words as the job's status */
  {
    struct mu_app_status st = {.app_id = l[0].app_id, .state = MU_STATE_PENDING};
    char *failed = NULL;
    ASSERT_EQ(mu_k8s_apply_pods(pods, events, 0, &st, &failed, &want, &err), 0);
    ASSERT_STR_EQ(st.reason, l[0].reason);
    mu_free(st.reason);
    mu_free(failed);
  }
  ASSERT_EQ(mu_k8s_list_reasons("not json", NULL, l, 3, &want, &err), MU_EPARSE);
  ASSERT(strstr(mu_buf_str(&err), "kubectl get pods: output is not a JSON list") != NULL);
  mu_app_list_free(l, 3);
  mu_buf_release(&err);
}

/* Issue 36: a trn1.32xlarge pod asks for aws.amazon.com/neuron (never neurondevice) and its EFA
 * interfaces; -cfg neuron_resource renames the Neuron request for a cluster older than Neuron
 * 2.20, and a value that is no extended resource name is refused naming the fix. */
static cJSON *trn_limits(const char *neuron_resource, struct mu_buf *err, int *rc)
{
  struct mu_app *app = case01_app();
  struct mu_cfg cfg = {MU_KVLIST_INIT};
  cJSON *tree = NULL, *lim = NULL;
  if (app->roles[0].image == NULL)
    app->roles[0].image = mu_strdup("img");
  ASSERT_EQ(mu_named_resource("aws_trn1.32xlarge", &app->roles[0].resource, err), 0);
  mu_kvlist_set(&cfg.values, "queue", "q");
  if (neuron_resource != NULL)
    mu_kvlist_set(&cfg.values, "neuron_resource", neuron_resource);
  *rc = mu_k8s_render(app, &cfg, "trn-job", &tree, err);
  if (*rc == 0) {
    cJSON *res = cJSON_GetObjectItemCaseSensitive(container_of(task_at(tree, 0)), "resources");
    lim = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(res, "limits"), 1);
  }
  cJSON_Delete(tree);
  mu_app_free(app);
  mu_cfg_release(&cfg);
  return lim;
}

TEST(k8s__neuron_resource_name)
{
  struct mu_buf err = MU_BUF_INIT(4096);
  int rc;
  cJSON *lim = trn_limits(NULL, &err, &rc);
  ASSERT_EQ(rc, 0);
  ASSERT_STR_EQ(
      cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(lim, "aws.amazon.com/neuron")), "16");
  ASSERT_STR_EQ(
      cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(lim, "vpc.amazonaws.com/efa")), "8");
  ASSERT(cJSON_GetObjectItemCaseSensitive(lim, "aws.amazon.com/neurondevice") == NULL);
  cJSON_Delete(lim);

  lim = trn_limits("aws.amazon.com/neurondevice", &err, &rc);
  ASSERT_EQ(rc, 0);
  ASSERT_STR_EQ(
      cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(lim, "aws.amazon.com/neurondevice")),
      "16");
  ASSERT(cJSON_GetObjectItemCaseSensitive(lim, "aws.amazon.com/neuron") == NULL);
  cJSON_Delete(lim);

  lim = trn_limits("neurondevice", &err, &rc);
  ASSERT_EQ(rc, MU_EINVAL);
  ASSERT(lim == NULL);
  ASSERT(strstr(mu_buf_str(&err), "-cfg neuron_resource=neurondevice") != NULL);
  ASSERT(strstr(mu_buf_str(&err), "aws.amazon.com/neuron") != NULL);
  mu_buf_release(&err);
}

/* Issue 35: every waiting reason muster calls stuck has a fixture written from the Kubernetes
 * API's shapes (tests/fixtures/kubectl/pods/REASON.json, the same files t2021 replays through
 * kubectl), and each is said from the pod's status alone, without asking for events. */
TEST(k8s__every_stuck_reason_from_its_fixture)
{
  static const char *const reasons[] = {
      "ErrImagePull",      "ImagePullBackOff",           "InvalidImageName",
      "ErrImageNeverPull", "CreateContainerConfigError", "CreateContainerError",
      "CrashLoopBackOff",  "RunContainerError",          "PreCreateHookError",
      "PostStartHookError"};
  struct mu_buf err = MU_BUF_INIT(1024);
  for (size_t i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++) {
    char *rel = mu_asprintf("../fixtures/kubectl/pods/%s.json", reasons[i]);
    char *txt = golden_slurp(rel);
    cJSON *fx = cJSON_Parse(txt);
    ASSERT_NOT_NULL(fx);
    cJSON *status = cJSON_DetachItemFromObjectCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(fx, "pod"), "status");
    ASSERT_NOT_NULL(status);
    cJSON *items = cJSON_CreateArray(), *pod = cJSON_CreateObject(), *md = cJSON_CreateObject();
    cJSON_AddStringToObject(md, "name", "a-t-0-0");
    cJSON_AddItemToObject(pod, "metadata", md);
    cJSON_AddItemToObject(pod, "status", status);
    cJSON_AddItemToArray(items, pod);
    cJSON *list = cJSON_CreateObject();
    cJSON_AddItemToObject(list, "items", items);
    char *pods = cJSON_PrintUnformatted(list);
    struct mu_app_list_entry *l = mu_calloc(1, sizeof(*l));
    l[0].app_id = mu_strdup("default:a");
    l[0].state = MU_STATE_PENDING;
    int want = -1;
    ASSERT_EQ(mu_k8s_list_reasons(pods, NULL, l, 1, &want, &err), 0);
    if (l[0].reason == NULL || strstr(l[0].reason, reasons[i]) == NULL)
      fprintf(stderr, "# %s: reason %s, want %d\n", rel, l[0].reason ? l[0].reason : "(none)",
              want);
    ASSERT_NOT_NULL(l[0].reason);
    ASSERT_NOT_NULL(strstr(l[0].reason, reasons[i]));
    ASSERT_EQ(want, 0); /* stuck: no need for the events */
    mu_app_list_free(l, 1);
    cJSON_free(pods);
    cJSON_Delete(list);
    cJSON_Delete(fx);
    mu_free(txt);
    mu_free(rel);
  }
  mu_buf_release(&err);
}
