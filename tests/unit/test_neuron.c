/* Tests for the builtin Neuron health check (launcher/agent/agent_neuron.c) and the one table of
 * Neuron instance types (common/neuron_types.c). The check reads trees built here from the
 * driver's documented layout (aws-neuron-sdk neuron-sysfs-user-guide.rst: neuron<D>/core_count,
 * neuron<D>/stats/hardware/<counter>, a counter being a file or a directory with `total`) under a
 * root of the test's own, and a stand-in neuron-ls printing neuron-ls.rst's `-j` form. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "muster/errno.h"

#include "agent.h"
#include "alloc.h"
#include "buf.h"
#include "fsutil.h"
#include "golden.h"
#include "job.h"
#include "neuron_types.h"
#include "task.h"

static void put(const char *root, const char *rel, const char *text)
{
  char *path = mu_asprintf("%s/%s", root, rel);
  char *dir = mu_strdup(path);
  *strrchr(dir, '/') = '\0';
  ASSERT_EQ(mu_mkdir_p(dir), 0);
  ASSERT_EQ(mu_write_file_atomic(path, text, strlen(text), 0644, 0), 0);
  mu_free(dir);
  mu_free(path);
}

/* A healthy node of `devices` devices of `cores` cores each, `efa` EFA interfaces and /data
 * mounted. Device 1's counters are directories with total/present (the guide's counter form),
 * the others plain files. Returns: the root (mu_free). */
static char *healthy_tree(int devices, int cores, int efa)
{
  char tmpl[] = "/tmp/mu-unit-neuron-XXXXXX";
  ASSERT_NOT_NULL(mkdtemp(tmpl));
  static const char *const ecc[] = {"mem_ecc_uncorrected", "mem_ecc_repairable_uncorrected",
                                    "sram_ecc_uncorrected"};
  char rel[256], n[16];
  snprintf(n, sizeof(n), "%d\n", cores);
  for (int d = 0; d < devices; d++) {
    snprintf(rel, sizeof(rel), "sys/devices/virtual/neuron_device/neuron%d/core_count", d);
    put(tmpl, rel, n);
    for (int i = 0; i < 3; i++) {
      snprintf(rel, sizeof(rel), "sys/devices/virtual/neuron_device/neuron%d/stats/hardware/%s%s",
               d, ecc[i], d == 1 ? "/total" : "");
      put(tmpl, rel, "0\n");
      if (d == 1) {
        snprintf(rel, sizeof(rel),
                 "sys/devices/virtual/neuron_device/neuron%d/stats/hardware/%s/present", d, ecc[i]);
        put(tmpl, rel, "0\n");
      }
    }
  }
  for (int i = 0; i < efa; i++) {
    snprintf(rel, sizeof(rel), "sys/class/infiniband/rdmap%ds27/node_type", i);
    put(tmpl, rel, "1: CA\n");
  }
  put(tmpl, "proc/self/mounts",
      "overlay / overlay rw 0 0\nfs-1.fsx.aws:/x /data lustre rw 0 0\n"
      "tmpfs /mnt/with\\040space tmpfs rw 0 0\n/dev/nvme1n1 /local xfs rw 0 0\n"
      "fs-2.fsx.aws@tcp:/y /fsx lustre rw 0 0\n");
  return mu_strdup(tmpl);
}

static int run(const char *spec, const char *root, struct mu_buf *out, struct mu_buf *note)
{
  struct mu_agent_neuron n;
  struct mu_buf err = MU_BUF_INIT(SIZE_MAX);
  mu_buf_clear(out);
  mu_buf_clear(note);
  ASSERT_EQ(mu_agent_neuron_parse(spec, &n, &err), 0);
  int rc = mu_agent_neuron_run(&n, root, 10, out, note);
  mu_agent_neuron_release(&n);
  mu_buf_release(&err);
  return rc;
}

static void rm_rf(const char *root)
{
  char *cmd = mu_asprintf("rm -rf '%s'", root);
  ASSERT_EQ(system(cmd), 0);
  mu_free(cmd);
}

/* The two tables agree on every Neuron type: named resource aws_<type> asks for the devices
 * and EFA interfaces the type has, and the cores follow the LNC setting on Trainium2 only. */
TEST(neuron__tables_agree)
{
  const struct mu_neuron_type *t;
  size_t i;
  for (i = 0; (t = mu_neuron_type_at(i)) != NULL; i++) {
    char *named = mu_asprintf("aws_%s", t->name);
    struct mu_app *app = mu_app_new("x");
    struct mu_resource *r = &mu_app_add_role(app, "r")->resource;
    struct mu_buf err = MU_BUF_INIT(256);
    ASSERT_EQ(mu_named_resource(named, r, &err), 0);
    long neuron = 0, efa = 0;
    for (size_t d = 0; d < r->ndevices; d++) {
      neuron += strcmp(r->devices[d].name, "aws.amazon.com/neuron") == 0 ? r->devices[d].count : 0;
      efa += strcmp(r->devices[d].name, "vpc.amazonaws.com/efa") == 0 ? r->devices[d].count : 0;
    }
    if (neuron != t->devices || efa != t->efa)
      MU__FAIL("%s: named resource %ld devices %ld EFA, neuron_types.c %ld and %ld", t->name,
               neuron, efa, t->devices, t->efa);
    ASSERT_EQ(mu_instance_neuron_cores(t->name, 1), t->devices * t->phys_cores);
    mu_app_free(app);
    mu_buf_release(&err);
    mu_free(named);
  }
  ASSERT_EQ(i, 9);
  ASSERT_EQ(mu_neuron_type_cores(mu_neuron_type_find("trn2.48xlarge"), 2), 4);
  ASSERT_EQ(mu_neuron_type_cores(mu_neuron_type_find("TRN2U.48xlarge"), 1), 8);
  ASSERT_EQ(mu_neuron_type_cores(mu_neuron_type_find("trn1.32xlarge"), 2), 2);
  ASSERT_NULL(mu_neuron_type_find("p4d.24xlarge"));
}

TEST(neuron__parse)
{
  struct mu_agent_neuron n;
  struct mu_buf err = MU_BUF_INIT(SIZE_MAX);
  ASSERT(mu_agent_neuron_is_builtin("neuron"));
  ASSERT(mu_agent_neuron_is_builtin("neuron:lnc=1"));
  ASSERT(!mu_agent_neuron_is_builtin("neuron-check.sh"));
  ASSERT(!mu_agent_neuron_is_builtin("/opt/neuron"));
  ASSERT(!mu_agent_neuron_is_builtin(NULL));
  ASSERT_EQ(mu_agent_neuron_parse("neuron", &n, &err), 0);
  ASSERT_NULL(n.type);
  ASSERT_EQ(n.devices, -1);
  ASSERT_EQ(n.lnc, 2);
  ASSERT_EQ(mu_agent_neuron_parse("neuron:type=trn2.48xlarge,lnc=1,mount=/data", &n, &err), 0);
  ASSERT_STR_EQ(n.type->name, "trn2.48xlarge");
  ASSERT_EQ(n.devices, 16);
  ASSERT_EQ(n.efa, 16);
  ASSERT_EQ(n.lnc, 1);
  ASSERT_STR_EQ(n.mount, "/data");
  mu_agent_neuron_release(&n);
  ASSERT_EQ(mu_agent_neuron_parse("neuron:type=trn1.32xlarge,efa=4", &n, &err), 0);
  ASSERT_EQ(n.efa, 4); /* the user's count wins over the type's */
  ASSERT_EQ(mu_agent_neuron_parse("neuron:devices=256", &n, &err), 0);
  ASSERT_EQ(mu_agent_neuron_parse("neuron:devices=257", &n, &err), MU_EINVAL);
  ASSERT_NOT_NULL(strstr(mu_buf_str(&err), "devices=257: expected a count from 0 to 256"));
  mu_buf_clear(&err);
  ASSERT_EQ(mu_agent_neuron_parse("neuron:lnc=3", &n, &err), MU_EINVAL);
  ASSERT_NOT_NULL(strstr(mu_buf_str(&err), "lnc=3: the logical NeuronCore setting is 1 or 2"));
  mu_buf_clear(&err);
  ASSERT_EQ(mu_agent_neuron_parse("neuron:type=trn3.big", &n, &err), MU_EINVAL);
  ASSERT_NOT_NULL(strstr(mu_buf_str(&err), "type=trn3.big is not a Neuron instance type"));
  ASSERT_NOT_NULL(strstr(mu_buf_str(&err), "trn2u.48xlarge"));
  ASSERT_NOT_NULL(strstr(mu_buf_str(&err), "devices=N,efa=N"));
  mu_buf_clear(&err);
  ASSERT_EQ(mu_agent_neuron_parse("neuron:tpye=trn2.48xlarge", &n, &err), MU_EINVAL);
  ASSERT_NOT_NULL(strstr(mu_buf_str(&err), "unknown key 'tpye'"));
  mu_buf_clear(&err);
  ASSERT_EQ(mu_agent_neuron_parse("neuron:mount=data", &n, &err), MU_EINVAL);
  ASSERT_NOT_NULL(strstr(mu_buf_str(&err), "expected an absolute directory"));
  mu_buf_clear(&err);
  ASSERT_EQ(mu_agent_neuron_parse("neuron:lnc", &n, &err), MU_EINVAL);
  ASSERT_NOT_NULL(strstr(mu_buf_str(&err), "'lnc' is not KEY=VALUE"));
  mu_buf_release(&err);
}

/* Healthy passes; one device missing and one uncorrectable ECC count fail, each named. */
TEST(neuron__check_devices_and_ecc)
{
  struct mu_buf out = MU_BUF_INIT(SIZE_MAX), note = MU_BUF_INIT(SIZE_MAX);
  char *root = healthy_tree(16, 8, 16);
  const char *spec = "neuron:type=trn2.48xlarge,lnc=2,mount=/data";
  setenv("PATH", "/usr/bin:/bin", 1); /* no neuron-ls */
  ASSERT_EQ(run(spec, root, &out, &note), 0);
  ASSERT_EQ(out.len, 0);
  ASSERT_NOT_NULL(strstr(mu_buf_str(&note), "Neuron check passed: 16 Neuron devices "
                                            "(trn2.48xlarge), 4 NeuronCores each at LNC=2"));
  ASSERT_NOT_NULL(strstr(mu_buf_str(&note), "neuron-ls is not on PATH"));
  ASSERT_NOT_NULL(strstr(mu_buf_str(&note), "16 EFA interfaces, /data on a shared volume"));
  /* the mount point with an escaped space */
  ASSERT_EQ(run("neuron:type=trn2.48xlarge,mount=/mnt/with space", root, &out, &note), 0);

  char *gone = mu_asprintf("%s/sys/devices/virtual/neuron_device/neuron7", root);
  rm_rf(gone);
  ASSERT_EQ(run(spec, root, &out, &note), MU_EINVAL);
  ASSERT_NOT_NULL(strstr(mu_buf_str(&out), "neuron7: missing: "));
  ASSERT_NOT_NULL(strstr(mu_buf_str(&out),
                         "a trn2.48xlarge has 16 Neuron devices (neuron0..neuron15), "
                         "this node shows 15"));
  ASSERT_STR_EQ(mu_buf_str(&note), "the Neuron check found 1 problem");
  put(root, "sys/devices/virtual/neuron_device/neuron7/core_count", "8\n");

  /* ECC: a file counter and a directory counter (its total) */
  put(root, "sys/devices/virtual/neuron_device/neuron5/stats/hardware/mem_ecc_uncorrected", "2\n");
  put(root, "sys/devices/virtual/neuron_device/neuron1/stats/hardware/sram_ecc_uncorrected/total",
      "1\n");
  ASSERT_EQ(run(spec, root, &out, &note), MU_EINVAL);
  ASSERT_NOT_NULL(strstr(mu_buf_str(&out), "neuron5: stats/hardware/mem_ecc_uncorrected is 2: "
                                           "unrepairable uncorrectable HBM ECC errors"));
  ASSERT_NOT_NULL(strstr(mu_buf_str(&out), "neuron1: stats/hardware/sram_ecc_uncorrected is 1"));
  ASSERT_STR_EQ(mu_buf_str(&note), "the Neuron check found 2 problems");
  put(root, "sys/devices/virtual/neuron_device/neuron5/stats/hardware/mem_ecc_uncorrected", "0\n");
  put(root, "sys/devices/virtual/neuron_device/neuron1/stats/hardware/sram_ecc_uncorrected/total",
      "0\n");
  ASSERT_EQ(run(spec, root, &out, &note), 0);

  /* a device too many, a core count of neither setting, and the LNC=1 view of a good one */
  put(root, "sys/devices/virtual/neuron_device/neuron16/core_count", "8\n");
  put(root, "sys/devices/virtual/neuron_device/neuron3/core_count", "6\n");
  ASSERT_EQ(run(spec, root, &out, &note), MU_EINVAL);
  ASSERT_NOT_NULL(strstr(mu_buf_str(&out), "neuron16: unexpected: a trn2.48xlarge has 16"));
  ASSERT_NOT_NULL(strstr(mu_buf_str(&out), "neuron3: core_count is 6; a trn2.48xlarge device has "
                                           "8 NeuronCores (4 at LNC=2)"));
  mu_free(gone);
  rm_rf(root);
  mu_free(root);
  mu_buf_release(&out);
  mu_buf_release(&note);
}

/* EFA interfaces and the mount, and a node without the driver (skipped, saying why). */
TEST(neuron__check_efa_mount_and_no_driver)
{
  struct mu_buf out = MU_BUF_INIT(SIZE_MAX), note = MU_BUF_INIT(SIZE_MAX);
  char *root = healthy_tree(16, 2, 7);
  setenv("PATH", "/usr/bin:/bin", 1);
  ASSERT_EQ(run("neuron:type=trn1.32xlarge,mount=/data", root, &out, &note), MU_EINVAL);
  ASSERT_NOT_NULL(strstr(mu_buf_str(&out), "efa: 7 EFA interfaces in "));
  ASSERT_NOT_NULL(strstr(mu_buf_str(&out), "; a trn1.32xlarge has 8"));
  put(root, "sys/class/infiniband/rdmap7s27/node_type", "1: CA\n");
  ASSERT_EQ(run("neuron:type=trn1.32xlarge,mount=/data", root, &out, &note), 0);
  /* not mounted: on the node's own disk, the root's or another; on a shared one it is fine */
  ASSERT_EQ(run("neuron:type=trn1.32xlarge,mount=/datum", root, &out, &note), MU_EINVAL);
  ASSERT_NOT_NULL(strstr(mu_buf_str(&out), "mount: /datum is not mounted: it is on / (overlay, "
                                           "this node's own; "));
  ASSERT_EQ(run("neuron:type=trn1.32xlarge,mount=/local/data", root, &out, &note), MU_EINVAL);
  ASSERT_NOT_NULL(strstr(mu_buf_str(&out), "it is on /local (xfs, "));
  ASSERT_EQ(run("neuron:type=trn1.32xlarge,mount=/fsx/data", root, &out, &note), 0);
  ASSERT_EQ(run("neuron:type=trn1.32xlarge,mount=/fsxdata", root, &out, &note), MU_EINVAL);
  ASSERT_EQ(run("neuron:type=trn1.32xlarge,mount=/local", root, &out, &note), 0);
  /* trn1n has 16; a user's count replaces the type's */
  ASSERT_EQ(run("neuron:type=trn1n.32xlarge", root, &out, &note), MU_EINVAL);
  ASSERT_NOT_NULL(strstr(mu_buf_str(&out), "efa: 8 EFA interfaces"));
  ASSERT_EQ(run("neuron:type=trn1n.32xlarge,efa=8", root, &out, &note), 0);
  char *drv = mu_asprintf("%s/sys/devices", root);
  rm_rf(drv);
  ASSERT_EQ(run("neuron:type=trn1.32xlarge,mount=/nowhere", root, &out, &note), 0);
  ASSERT_EQ(out.len, 0);
  ASSERT_NOT_NULL(strstr(mu_buf_str(&note), "Neuron check skipped: this node has no Neuron "
                                            "driver ("));
  ASSERT_NOT_NULL(strstr(mu_buf_str(&note), "/sys/devices/virtual/neuron_device does not exist)"));
  mu_free(drv);
  rm_rf(root);
  mu_free(root);
  mu_buf_release(&out);
  mu_buf_release(&note);
}

/* neuron-ls -j: a foreign process on a device's cores, the node's LNC against the job's, and a
 * neuron-ls that fails. */
TEST(neuron__check_neuron_ls)
{
  struct mu_buf out = MU_BUF_INIT(SIZE_MAX), note = MU_BUF_INIT(SIZE_MAX);
  char *root = healthy_tree(2, 8, 0);
  char *tools = golden_tools_dir();
  const char *spec = "neuron:devices=2,type=trn2.48xlarge,devices=2,efa=0";
  struct mu_buf js = MU_BUF_INIT(SIZE_MAX);
  mu_buf_puts(&js, "[");
  for (int d = 0; d < 2; d++)
    mu_buf_printf(&js,
                  "%s{\"neuron_device\": %d, \"nc_count\": 4, \"logical_neuroncore_config\": 2, "
                  "\"neuroncore_ids\": [%d, %d, %d, %d], \"neuron_processes\": %s}",
                  d ? "," : "", d, 4 * d, 4 * d + 1, 4 * d + 2, 4 * d + 3,
                  d == 1 ? "[{\"pid\": 4242, \"command\": \"python3 old.py\"}]" : "[]");
  mu_buf_puts(&js, "]\n");
  golden_tool(tools, "neuron-ls", mu_buf_str(&js), NULL, 0);
  ASSERT_EQ(run(spec, root, &out, &note), MU_EINVAL);
  ASSERT_NOT_NULL(strstr(mu_buf_str(&out), "neuron1: neuron_processes: pid 4242 (python3 old.py) "
                                           "holds its NeuronCores (NeuronCores 4-7)"));
  ASSERT_NULL(strstr(mu_buf_str(&out), "neuron0"));
  /* the job at LNC=1 on a node at LNC=2 */
  ASSERT_EQ(run("neuron:type=trn2.48xlarge,devices=2,efa=0,lnc=1", root, &out, &note), MU_EINVAL);
  ASSERT_NOT_NULL(strstr(mu_buf_str(&out), "neuron0: nc_count is 4 (neuron-ls -j); a trn2.48xlarge "
                                           "device shows 8 at LNC=1"));
  ASSERT_NOT_NULL(strstr(mu_buf_str(&out),
                         "neuron0: logical_neuroncore_config is 2 (neuron-ls -j), "
                         "the job runs at LNC=1"));
  golden_tool(tools, "neuron-ls", "[]\n", NULL, 0);
  ASSERT_EQ(run(spec, root, &out, &note), MU_EINVAL);
  ASSERT_NOT_NULL(strstr(mu_buf_str(&out), "neuron-ls -j: lists 0 Neuron devices; a trn2.48xlarge "
                                           "has 2"));
  mu_buf_clear(&js);
  mu_buf_puts(&js, "[{\"neuron_device\": 0, \"nc_count\": 4, \"neuron_processes\": []},"
                   "{\"neuron_device\": 1, \"nc_count\": 4}]");
  golden_tool(tools, "neuron-ls", mu_buf_str(&js), NULL, 0);
  ASSERT_EQ(run(spec, root, &out, &note), 0);
  ASSERT_NOT_NULL(strstr(mu_buf_str(&note), "no other process on the NeuronCores (neuron-ls -j)"));
  golden_tool(tools, "neuron-ls", "", "neuron-ls: no driver\n", 3);
  ASSERT_EQ(run(spec, root, &out, &note), MU_EINVAL);
  ASSERT_NOT_NULL(strstr(mu_buf_str(&out), "neuron-ls -j: it exited with code 3: neuron-ls: no "
                                           "driver"));
  mu_buf_release(&js);
  rm_rf(tools);
  mu_free(tools);
  rm_rf(root);
  mu_free(root);
  mu_buf_release(&out);
  mu_buf_release(&note);
}
