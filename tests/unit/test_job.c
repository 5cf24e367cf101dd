/* Tests for launcher/job.c and launcher/sched.c: states, validation, macros, JSON, mounts
 * (golden 15), named resources, app ids and handles (golden 15). */
#include <stdlib.h>
#include <string.h>

#include "muster/errno.h"

#include "alloc.h"
#include "job.h"
#include "sched.h"
#include "task.h"

/* mu_mounts_parse takes writable strings; copy literals into a vector. */
static int mounts(struct mu_role *r, struct mu_buf *err, size_t n, const char *const *items)
{
  struct mu_strvec sv = MU_STRVEC_INIT;
  for (size_t i = 0; i < n; i++)
    mu_strvec_push(&sv, items[i]);
  int rc = mu_mounts_parse(r, sv.v, sv.n, err);
  mu_strvec_release(&sv);
  return rc;
}
#define MOUNTS(r, err, ...)                                                                        \
  mounts((r), (err), sizeof((const char *[]){__VA_ARGS__}) / sizeof(const char *),                 \
         (const char *[]){__VA_ARGS__})

TEST(job__state_names)
{
  ASSERT_STR_EQ(mu_job_state_name(MU_STATE_RUNNING), "RUNNING");
  ASSERT_EQ(MU_STATE_SUCCEEDED, 4); /* TorchX's AppState numbers (golden 15) */
  ASSERT_EQ(MU_STATE_FAILED, 5);
  ASSERT_EQ(MU_STATE_UNKNOWN, 7);
  enum mu_job_state s;
  ASSERT_EQ(mu_job_state_parse("cancelled", &s), 0);
  ASSERT_EQ(s, MU_STATE_CANCELLED);
  ASSERT_EQ(mu_job_state_parse("nope", &s), MU_EINVAL);
  ASSERT(mu_job_state_is_terminal(MU_STATE_FAILED));
  ASSERT(!mu_job_state_is_terminal(MU_STATE_RUNNING));
}

static struct mu_app *sample(void)
{
  struct mu_app *app = mu_app_new("trainer");
  struct mu_role *r = mu_app_add_role(app, "worker");
  r->entrypoint = mu_strdup("python3");
  mu_strvec_push(&r->args, "--id=${app_id}/${replica_id}");
  mu_strvec_push(&r->args, "cost $$5 ${unknown}");
  mu_kvlist_set(&r->env, "EP", "${rdzv_endpoint}");
  r->num_replicas = 2;
  r->resource.memMB = 2048;
  return app;
}

TEST(job__validate_names_the_field)
{
  struct mu_app *app = sample();
  struct mu_buf err = MU_BUF_INIT(1024);
  ASSERT_EQ(mu_app_validate(app, &err), 0);
  app->roles[0].resource.memMB = -3;
  ASSERT_EQ(mu_app_validate(app, &err), MU_EINVAL);
  ASSERT_STR_EQ(mu_buf_str(&err), "roles[0].resources.memMB: must be a positive integer, got -3");
  app->roles[0].resource.memMB = 1;
  app->roles[0].min_replicas = 3;
  mu_buf_clear(&err);
  ASSERT_EQ(mu_app_validate(app, &err), MU_EINVAL);
  ASSERT(strstr(mu_buf_str(&err), "roles[0].min_replicas") != NULL);
  app->roles[0].min_replicas = -1;
  mu_kvlist_set(&app->roles[0].env, "BAD-NAME", "x");
  mu_buf_clear(&err);
  ASSERT_EQ(mu_app_validate(app, &err), MU_EINVAL);
  ASSERT(strstr(mu_buf_str(&err), "roles[0].env: 'BAD-NAME'") != NULL);
  mu_buf_release(&err);
  mu_app_free(app);
}

/* Names are DNS-label-like; no control characters anywhere (tab and newline in args and env
 * values only); every error names the field and shows the value escaped (issue 24 finding 2). */
TEST(job__validate_names_and_text)
{
  static const char *const bad_names[] = {
      "",
      "../x",
      "a/b",
      "a b",
      "a\nb",
      "-a",
      ".a",
      "..",
      "a$b",
      "a'b",
      "a%b",
      "\xe2\x80\xa8",
      "0123456789012345678901234567890123456789012345678901234567890123" /* 64 */};
  static const char *const good_names[] = {"a",
                                           "A1",
                                           "ring_allreduce",
                                           "dist.ddp",
                                           "x-1_y.z",
                                           "012345678901234567890123456789012345678901234567890"
                                           "123456789012" /* 63 */};
  struct mu_buf err = MU_BUF_INIT(SIZE_MAX);
  for (size_t i = 0; i < sizeof(bad_names) / sizeof(bad_names[0]); i++) {
    struct mu_app *app = sample();
    mu_free(app->roles[0].name);
    app->roles[0].name = mu_strdup(bad_names[i]);
    mu_buf_clear(&err);
    ASSERT_EQ(mu_app_validate(app, &err), MU_EINVAL);
    ASSERT(strncmp(mu_buf_str(&err), "roles[0].name: '", 16) == 0);
    ASSERT(strchr(mu_buf_str(&err), '\n') == NULL);
    mu_free(app->name);
    app->name = mu_strdup(bad_names[i]);
    mu_buf_clear(&err);
    ASSERT_EQ(mu_app_validate(app, &err), MU_EINVAL);
    ASSERT(strncmp(mu_buf_str(&err), "name: '", 7) == 0);
    mu_app_free(app);
  }
  for (size_t i = 0; i < sizeof(good_names) / sizeof(good_names[0]); i++) {
    struct mu_app *app = sample();
    mu_free(app->roles[0].name);
    app->roles[0].name = mu_strdup(good_names[i]);
    mu_buf_clear(&err);
    ASSERT_EQ(mu_app_validate(app, &err), 0);
    mu_app_free(app);
  }
  /* Text: args and env values may hold tab and newline (code: python -c), nothing else. */
  struct mu_app *app = sample();
  mu_strvec_push(&app->roles[0].args,
                 "import os\n\tprint(1)  \xe2\x80\xa8 $(id) `id` ' \" , = % #");
  mu_kvlist_set(&app->roles[0].env, "CODE", "a\nb");
  ASSERT_EQ(mu_app_validate(app, &err), 0);
  mu_strvec_push(&app->roles[0].args, "ok\r\nno");
  mu_buf_clear(&err);
  ASSERT_EQ(mu_app_validate(app, &err), MU_EINVAL);
  ASSERT_STR_EQ(mu_buf_str(&err), "roles[0].args[3]: control character 0x0d at byte 2 is not "
                                  "allowed (of the control characters only tab and newline "
                                  "are), in 'ok\\x0d\\nno'");
  mu_app_free(app);
  app = sample();
  mu_kvlist_set(&app->roles[0].env, "NEL",
                "a\xc2\x85"
                "b"); /* U+0085, a C1 control */
  mu_buf_clear(&err);
  ASSERT_EQ(mu_app_validate(app, &err), MU_EINVAL);
  ASSERT(strstr(mu_buf_str(&err), "roles[0].env.NEL: control character U+0085 at byte 1") != NULL);
  mu_app_free(app);
  app = sample();
  app->roles[0].image = mu_strdup("img\n--privileged");
  mu_buf_clear(&err);
  ASSERT_EQ(mu_app_validate(app, &err), MU_EINVAL);
  ASSERT(strstr(mu_buf_str(&err), "roles[0].image: control character 0x0a at byte 3 is not "
                                  "allowed, in 'img\\n--privileged'") != NULL);
  mu_app_free(app);
  app = sample();
  mu_kvlist_set(&app->roles[0].metadata, "k", "\x1b[2J");
  mu_buf_clear(&err);
  ASSERT_EQ(mu_app_validate(app, &err), MU_EINVAL);
  ASSERT(strstr(mu_buf_str(&err), "roles[0].metadata: control character 0x1b") != NULL);
  mu_app_free(app);
  mu_buf_release(&err);
}

TEST(job__macros)
{
  struct mu_macros m = {"app-1",       "3", "/img",           "MUSTER_RANK0_HOST",
                        "127.0.0.1:9", "4", "127.0.0.1:29400"};
  char *s = mu_macros_apply(&m, "--id=${app_id}/${replica_id} ${rdzv_endpoint} $${x} ${nope} "
                                "${c10d_endpoint}");
  ASSERT_STR_EQ(s, "--id=app-1/3 127.0.0.1:9 ${x} ${nope} 127.0.0.1:29400");
  mu_free(s);
  struct mu_macros none = {0};
  s = mu_macros_apply(&none, "${app_id}");
  ASSERT_STR_EQ(s, "${app_id}");
  mu_free(s);
}

TEST(job__json_roundtrip)
{
  struct mu_app *app = sample();
  struct mu_buf err = MU_BUF_INIT(1024);
  ASSERT_EQ(MOUNTS(&app->roles[0], &err, "type=bind", "src=/a", "dst=/b", "readonly", "type=device",
                   "src=/dev/x"),
            0);
  ASSERT_EQ(mu_named_resource("aws_p4d.24xlarge", &app->roles[0].resource, &err), 0);
  struct mu_buf a = MU_BUF_INIT(1 << 20), b = MU_BUF_INIT(1 << 20);
  ASSERT_EQ(mu_app_to_json(app, &a), 0);
  struct mu_app *back = NULL;
  ASSERT_EQ(mu_app_from_json(mu_buf_str(&a), &back), 0);
  ASSERT_EQ(mu_app_to_json(back, &b), 0);
  ASSERT_STR_EQ(mu_buf_str(&a), mu_buf_str(&b));
  ASSERT_EQ(back->roles[0].resource.cpu, 96);
  ASSERT_EQ(back->roles[0].resource.memMB, 1152 * 983);
  ASSERT_STR_EQ(back->roles[0].resource.devices[0].name, "vpc.amazonaws.com/efa");
  ASSERT_EQ(back->roles[0].resource.devices[0].count, 4);
  ASSERT_STR_EQ(
      mu_kvlist_get(&back->roles[0].resource.capabilities, "node.kubernetes.io/instance-type"),
      "p4d.24xlarge");
  ASSERT_EQ(mu_app_from_json("not json", &back), MU_EPARSE);
  mu_app_free(back);
  mu_app_free(app);
  mu_buf_release(&a);
  mu_buf_release(&b);
  mu_buf_release(&err);
}

TEST(job__mounts_golden15)
{
  setenv("HOME", "/home/u", 1);
  struct mu_app *app = mu_app_new("m");
  struct mu_role *r = mu_app_add_role(app, "r");
  struct mu_buf err = MU_BUF_INIT(1024);
  ASSERT_EQ(MOUNTS(r, &err, "type=bind", "src=foo", "dst=dst", "type=bind", "source=foo1",
                   "readonly", "target=dst1", "type=volume", "destination=dst2", "source=foo2",
                   "readonly", "type=device", "src=duck", "type=device", "src=foo", "dst=bar",
                   "perm=rw", "type=bind", "src=~/foo", "dst=dst"),
            0);
  ASSERT_EQ(r->nmounts, 6);
  ASSERT_EQ(r->mounts[0].type, MU_MOUNT_BIND);
  ASSERT_STR_EQ(r->mounts[0].src, "foo");
  ASSERT_EQ(r->mounts[0].read_only, 0);
  ASSERT_STR_EQ(r->mounts[1].dst, "dst1");
  ASSERT_EQ(r->mounts[1].read_only, 1);
  ASSERT_EQ(r->mounts[2].type, MU_MOUNT_VOLUME);
  ASSERT_STR_EQ(r->mounts[2].src, "foo2");
  ASSERT_EQ(r->mounts[2].read_only, 1);
  ASSERT_STR_EQ(r->mounts[3].dst, "duck"); /* device dst defaults to src */
  ASSERT_STR_EQ(r->mounts[3].perm, "rwm");
  ASSERT_STR_EQ(r->mounts[4].perm, "rw");
  ASSERT_STR_EQ(r->mounts[5].src, "/home/u/foo");
  ASSERT_EQ(MOUNTS(r, &err, "src=foo"), MU_EINVAL);
  ASSERT(strstr(mu_buf_str(&err), "type must be specified first") != NULL);
  mu_buf_clear(&err);
  ASSERT_EQ(MOUNTS(r, &err, "type=bind", "blah=foo"), MU_EINVAL);
  ASSERT(strstr(mu_buf_str(&err), "unknown mount option 'blah'") != NULL);
  mu_buf_clear(&err);
  ASSERT_EQ(MOUNTS(r, &err, "type=bind"), MU_EINVAL);
  ASSERT(strstr(mu_buf_str(&err), "needs src=PATH") != NULL);
  ASSERT_EQ(MOUNTS(r, &err, "type=device", "src=/dev/x", "perm=rwx"), MU_EINVAL);
  ASSERT_EQ(MOUNTS(r, &err, "type=nfs"), MU_EINVAL);
  mu_buf_release(&err);
  mu_app_free(app);
}

TEST(job__app_ids)
{
  char *n = mu_normalize_name("My_Trainer.v2!", 50);
  ASSERT_STR_EQ(n, "my-trainer-v2");
  mu_free(n);
  n = mu_normalize_name("__9lives", 50);
  ASSERT_STR_EQ(n, "lives");
  mu_free(n);
  n = mu_normalize_name("___", 50);
  ASSERT_STR_EQ(n, "app");
  mu_free(n);
  unsetenv("MUSTER_APP_ID_SUFFIX");
  char long_name[200];
  memset(long_name, 'a', sizeof(long_name) - 1);
  long_name[sizeof(long_name) - 1] = '\0';
  char *id = mu_app_id_make(long_name);
  ASSERT(strlen(id) <= 63);
  ASSERT(id[0] >= 'a' && id[0] <= 'z');
  char *id2 = mu_app_id_make(long_name);
  ASSERT(strcmp(id, id2) != 0);
  mu_free(id);
  mu_free(id2);
  setenv("MUSTER_APP_ID_SUFFIX", "42", 1);
  id = mu_app_id_make("train");
  ASSERT_STR_EQ(id, "train-42");
  mu_free(id);
  unsetenv("MUSTER_APP_ID_SUFFIX");
}

TEST(job__handles_golden15)
{
  const struct {
    const char *h, *s, *sess, *id;
  } ok[] = {
      {"k8s://default/foo_bar", "k8s", "default", "foo_bar"},
      {"k8s:///foo_bar", "k8s", "", "foo_bar"},
      {"kubernetes://torchx/default:echo-xyz", "kubernetes", "torchx", "default:echo-xyz"},
      {"local://my_session/my_app_id_1234", "local", "my_session", "my_app_id_1234"},
  };
  for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
    char *s, *sess, *id;
    ASSERT_EQ(mu_handle_parse(ok[i].h, &s, &sess, &id), 0);
    ASSERT_STR_EQ(s, ok[i].s);
    ASSERT_STR_EQ(sess, ok[i].sess);
    ASSERT_STR_EQ(id, ok[i].id);
    mu_free(s);
    mu_free(sess);
    mu_free(id);
  }
  char *s, *sess, *id;
  ASSERT_EQ(mu_handle_parse("local://x", &s, &sess, &id), MU_EINVAL);
  ASSERT_EQ(mu_handle_parse("://a/b", &s, &sess, &id), MU_EINVAL);
  ASSERT_EQ(mu_handle_parse("plain", &s, &sess, &id), MU_EINVAL);
}

TEST(job__registry)
{
  ASSERT_STR_EQ(mu_sched_at(0)->name, "local");
  ASSERT(mu_sched_find("local") == &mu_sched_local);
  ASSERT(mu_sched_find("kubernetes") == &mu_sched_kubernetes);
  ASSERT(mu_sched_find("slurm") == &mu_sched_slurm);
  ASSERT_NULL(mu_sched_find("locl"));
}

TEST(job__shell_quote)
{
  struct mu_buf b = MU_BUF_INIT(1024);
  mu_shell_quote("plain-word_1.py", &b);
  mu_buf_putc(&b, ' ');
  mu_shell_quote("it's", &b);
  mu_buf_putc(&b, ' ');
  mu_shell_quote("", &b);
  ASSERT_STR_EQ(mu_buf_str(&b), "plain-word_1.py 'it'\"'\"'s' ''");
  mu_buf_release(&b);
}

/* Issue 36: every named resource asks for devices by the names today's device plugins advertise
 * (the Neuron plugin dropped aws.amazon.com/neurondevice in Neuron 2.20, so a pod asking for it
 * stays Pending), and the Neuron types have the devices, EFA interfaces and cores of their
 * instance type (docs/components.md). */
TEST(job__named_resources_use_current_device_names)
{
  static const char *const current[] = {"vpc.amazonaws.com/efa", "aws.amazon.com/neuron"};
  struct mu_buf err = MU_BUF_INIT(1024);
  size_t n = 0, neuron_types = 0;
  for (const char *name; (name = mu_named_resource_at(n)) != NULL; n++) {
    struct mu_app *app = mu_app_new("x");
    struct mu_role *r = mu_app_add_role(app, "r");
    ASSERT_EQ(mu_named_resource(name, &r->resource, &err), 0);
    for (size_t d = 0; d < r->resource.ndevices; d++) {
      const char *dev = r->resource.devices[d].name;
      int ok = strcmp(dev, current[0]) == 0 || strcmp(dev, current[1]) == 0;
      if (!ok)
        MU__FAIL("%s asks for device '%s', which no current device plugin advertises", name, dev);
      neuron_types += strcmp(dev, current[1]) == 0;
    }
    mu_app_free(app);
  }
  ASSERT(n > 50);
  ASSERT_EQ(neuron_types, 9); /* trn1 x3, trn2, trn2u, inf2 x4 */
  mu_buf_release(&err);
}

static long device_of(const char *named, const char *dev)
{
  struct mu_app *app = mu_app_new("x");
  struct mu_role *r = mu_app_add_role(app, "r");
  struct mu_buf err = MU_BUF_INIT(256);
  long n = 0;
  ASSERT_EQ(mu_named_resource(named, &r->resource, &err), 0);
  for (size_t d = 0; d < r->resource.ndevices; d++)
    if (strcmp(r->resource.devices[d].name, dev) == 0)
      n += r->resource.devices[d].count;
  mu_app_free(app);
  mu_buf_release(&err);
  return n;
}

TEST(job__trainium_types_and_logical_cores)
{
  ASSERT_EQ(device_of("aws_trn1.32xlarge", "aws.amazon.com/neuron"), 16);
  ASSERT_EQ(device_of("aws_trn1.32xlarge", "vpc.amazonaws.com/efa"), 8);
  ASSERT_EQ(device_of("aws_trn2.48xlarge", "aws.amazon.com/neuron"), 16);
  ASSERT_EQ(device_of("aws_trn2.48xlarge", "vpc.amazonaws.com/efa"), 16);
  ASSERT_EQ(device_of("aws_trn2u.48xlarge", "vpc.amazonaws.com/efa"), 16);
  ASSERT_EQ(mu_instance_neuron_cores("trn2.48xlarge", 2), 64);
  ASSERT_EQ(mu_instance_neuron_cores("trn2.48xlarge", 1), 128);
  ASSERT_EQ(mu_instance_neuron_cores("trn2u.48xlarge", 2), 64);
  ASSERT_EQ(mu_instance_neuron_cores("trn1.32xlarge", 2), 32); /* no LNC on trn1 */
  ASSERT_EQ(mu_instance_neuron_cores("trn1.32xlarge", 1), 32);
  ASSERT_EQ(mu_instance_neuron_cores("p4d.24xlarge", 2), 0);
  ASSERT_EQ(mu_instance_neuron_cores("nope", 2), 0);

  /* A trn2 node holds 128 NeuronCores (LNC=1) and not 129; 16 devices and not 17. */
  struct mu_app *app = mu_app_new("x");
  struct mu_role *r = mu_app_add_role(app, "r");
  struct mu_buf err = MU_BUF_INIT(1024);
  r->entrypoint = mu_strdup("true");
  r->image = mu_strdup("img");
  ASSERT_EQ(mu_named_resource("aws_trn2.48xlarge", &r->resource, &err), 0);
  mu_resource_add_device(&r->resource, "aws.amazon.com/neuroncore", 128);
  ASSERT_EQ(mu_instance_check(app, &err), 0);
  mu_resource_add_device(&r->resource, "aws.amazon.com/neuroncore", 129);
  ASSERT_EQ(mu_instance_check(app, &err), MU_EINVAL);
  ASSERT(strstr(mu_buf_str(&err), "129 asked for") != NULL);
  mu_buf_clear(&err);
  mu_resource_add_device(&r->resource, "aws.amazon.com/neuroncore", 128);
  mu_resource_add_device(&r->resource, "aws.amazon.com/neuron", 17);
  ASSERT_EQ(mu_instance_check(app, &err), MU_EINVAL);
  ASSERT(strstr(mu_buf_str(&err), "aws.amazon.com/neuron: 17 asked for") != NULL);
  mu_app_free(app);
  mu_buf_release(&err);
}
