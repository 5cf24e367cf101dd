/* `muster agent --health-check neuron[:KEY=VALUE,...]`: the builtin Neuron check, run before
 * every join as any health check (docs/agent.md, "The Neuron health check"). What it reads:
 *
 *   /sys/devices/virtual/neuron_device/neuron<D>/           the Neuron driver's devices
 *       core_count                                          NeuronCores of the device
 *       stats/hardware/mem_ecc_uncorrected                  uncorrectable HBM ECC events
 *       stats/hardware/mem_ecc_repairable_uncorrected       repairable uncorrectable HBM ones
 *       stats/hardware/sram_ecc_uncorrected                 uncorrectable SRAM ECC events
 *   neuron-ls -j (when on PATH)                             per device: nc_count,
 *       logical_neuroncore_config, neuron_processes[].pid/command
 *   /sys/class/infiniband/                                  the RDMA (EFA) interfaces
 *   /proc/self/mounts                                       the job's shared volume
 *
 * (aws-neuron-sdk tools/neuron-sys-tools/neuron-sysfs-user-guide.rst and neuron-ls.rst.) A
 * counter may be a file or a directory holding `total` (the guide's counter layout). Without
 * the driver's directory the check passes and says why: the node has no Neuron driver.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "muster/errno.h"

#include "agent.h"
#include "agent_impl.h"
#include "alloc.h"
#include "fsutil.h"
#include "json.h"
#include "neuron_types.h"
#include "opts.h"

#define DRIVER_DIR "/sys/devices/virtual/neuron_device"
#define RDMA_DIR "/sys/class/infiniband"
#define MOUNTS "/proc/self/mounts"
#define MAX_DEVICES 256         /* more neuron<D> entries than any instance has */
#define NEURON_LS_MAX (1 << 20) /* neuron-ls -j of 16 devices is some 10 KiB */

int mu_agent_neuron_is_builtin(const char *check)
{
  return check != NULL && strncmp(check, "neuron", 6) == 0 && (check[6] == '\0' || check[6] == ':');
}

void mu_agent_neuron_release(struct mu_agent_neuron *n)
{
  if (n == NULL)
    return;
  mu_free(n->mount);
  n->mount = NULL;
}

/* ---------------------------------------------------------------------------------------------
 * The check's text
 */

static void known_types(struct mu_buf *err)
{
  const struct mu_neuron_type *t;
  for (size_t i = 0; (t = mu_neuron_type_at(i)) != NULL; i++)
    mu_buf_printf(err, "%s%s", i > 0 ? ", " : "", t->name);
}

/* One KEY=VALUE of the check's text. Returns: 0, or MU_EINVAL with err set. */
static int parse_key(struct mu_agent_neuron *n, const char *key, size_t klen, const char *val,
                     struct mu_buf *err)
{
  long v = 0;
#define IS(k) (klen == strlen(k) && strncmp(key, k, klen) == 0)
  if (IS("type")) {
    n->type = mu_neuron_type_find(val);
    if (n->type != NULL)
      return 0;
    mu_buf_printf(
        err, "--health-check neuron: type=%s is not a Neuron instance type muster knows (", val);
    known_types(err);
    mu_buf_puts(err, "); for another type give its counts: devices=N,efa=N");
    return MU_EINVAL;
  }
  if (IS("lnc")) {
    if (mu_parse_long(val, 1, 2, &v) == 0) {
      n->lnc = (int)v;
      return 0;
    }
    mu_buf_printf(err, "--health-check neuron: lnc=%s: the logical NeuronCore setting is 1 or 2",
                  val);
    return MU_EINVAL;
  }
  if (IS("devices") || IS("efa")) {
    if (mu_parse_long(val, 0, MAX_DEVICES, &v) == 0) {
      *(IS("efa") ? &n->efa : &n->devices) = v;
      return 0;
    }
    mu_buf_printf(err, "--health-check neuron: %.*s=%s: expected a count from 0 to %d", (int)klen,
                  key, val, MAX_DEVICES);
    return MU_EINVAL;
  }
  if (IS("mount")) {
    if (val[0] == '/') {
      mu_free(n->mount);
      n->mount = mu_strdup(val);
      return 0;
    }
    mu_buf_printf(err, "--health-check neuron: mount=%s: expected an absolute directory (/data)",
                  val);
    return MU_EINVAL;
  }
#undef IS
  mu_buf_printf(err,
                "--health-check neuron: unknown key '%.*s'; the builtin takes type=, lnc=, "
                "devices=, efa= and mount= (neuron:type=trn2.48xlarge,lnc=2,mount=/data)",
                (int)klen, key);
  return MU_EINVAL;
}

int mu_agent_neuron_parse(const char *check, struct mu_agent_neuron *n, struct mu_buf *err)
{
  memset(n, 0, sizeof(*n));
  n->lnc = 2;
  n->devices = n->efa = -1;
  if (!mu_agent_neuron_is_builtin(check)) {
    mu_buf_printf(err, "'%s' is not the builtin Neuron check (neuron or neuron:KEY=VALUE,...)",
                  check ? check : "");
    return MU_EINVAL;
  }
  const char *p = check[6] == ':' ? check + 7 : check + 6;
  char val[PATH_MAX];
  while (*p != '\0') {
    size_t len = strcspn(p, ","), klen = strcspn(p, "=");
    if (klen >= len || len - klen - 1 >= sizeof(val)) {
      mu_buf_printf(err,
                    "--health-check neuron: '%.*s' is not KEY=VALUE (neuron:type=trn2.48xlarge,"
                    "lnc=2,mount=/data)",
                    (int)len, p);
      mu_agent_neuron_release(n);
      return MU_EINVAL;
    }
    snprintf(val, sizeof(val), "%.*s", (int)(len - klen - 1), p + klen + 1);
    if (parse_key(n, p, klen, val, err) != 0) {
      mu_agent_neuron_release(n);
      return MU_EINVAL;
    }
    p += len + (p[len] == ',');
  }
  if (n->type != NULL && n->devices < 0)
    n->devices = n->type->devices;
  if (n->type != NULL && n->efa < 0)
    n->efa = n->type->efa;
  return 0;
}

/* ---------------------------------------------------------------------------------------------
 * The probe: what the check found, one problem a line
 */

struct probe {
  const struct mu_agent_neuron *n;
  const char *root; /* "" for / */
  struct mu_buf *out;
  int problems;
  unsigned char present[MAX_DEVICES]; /* neuron<D> exists */
  long ndevices;                      /* how many do */
};

__attribute__((format(printf, 2, 3))) static void problem(struct probe *p, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  mu_buf_vprintf(p->out, fmt, ap);
  va_end(ap);
  mu_buf_putc(p->out, '\n');
  p->problems++;
}

/* What the expectation is named after: "a trn2.48xlarge" or "the check's devices=16". */
static const char *type_name(const struct probe *p)
{
  return p->n->type != NULL ? p->n->type->name : "node (the check's counts)";
}

/* Reads a counter: the file at path, or path/total when it is a directory. Returns: 0 with *v;
 * -errno when it cannot be read; MU_EINVAL when it holds no number. */
static int read_counter(const char *path, long *v)
{
  struct stat st;
  struct mu_buf b = MU_BUF_INIT(256);
  char *total = NULL;
  int rc;
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
    path = total = mu_asprintf("%s/total", path);
  rc = mu_read_file(path, 255, &b);
  if (rc == 0) {
    const char *s = mu_buf_str(&b);
    char *end = NULL;
    while (isspace((unsigned char)*s))
      s++;
    errno = 0;
    *v = strtol(s, &end, 10);
    while (end != NULL && isspace((unsigned char)*end))
      end++;
    rc = end == s || end == NULL || *end != '\0' || errno != 0 ? MU_EINVAL : 0;
  }
  mu_buf_release(&b);
  mu_free(total);
  return rc;
}

/* Whether the driver's directory is there: 1 yes (p->present filled), 0 no (the reason in
 * note), -1 when it cannot be read (a problem). */
static int list_devices(struct probe *p, struct mu_buf *note)
{
  char *dir = mu_asprintf("%s" DRIVER_DIR, p->root);
  DIR *d = opendir(dir);
  struct dirent *e;
  int rc = 1;
  if (d == NULL && (errno == ENOENT || errno == ENOTDIR)) {
    mu_buf_printf(note, "Neuron check skipped: this node has no Neuron driver (%s does not exist)",
                  dir);
    rc = 0;
  } else if (d == NULL) {
    problem(p, "driver: cannot read %s: %s", dir, strerror(errno));
    rc = -1;
  }
  while (d != NULL && (e = readdir(d)) != NULL) {
    long idx;
    if (strncmp(e->d_name, "neuron", 6) != 0 ||
        mu_parse_long(e->d_name + 6, 0, MAX_DEVICES - 1, &idx) != 0)
      continue;
    p->present[idx] = 1;
    p->ndevices++;
  }
  if (d != NULL)
    closedir(d);
  mu_free(dir);
  return rc;
}

/* The device count against the expectation: each missing device and each one too many. */
static void check_device_count(struct probe *p)
{
  long want = p->n->devices;
  if (want < 0)
    return;
  for (long i = 0; i < MAX_DEVICES; i++) {
    if (i < want && !p->present[i])
      problem(p,
              "neuron%ld: missing: %s" DRIVER_DIR "/neuron%ld does not exist; a %s has %ld "
              "Neuron devices (neuron0..neuron%ld), this node shows %ld",
              i, p->root, i, type_name(p), want, want - 1, p->ndevices);
    else if (i >= want && p->present[i])
      problem(p,
              "neuron%ld: unexpected: a %s has %ld Neuron devices (neuron0..neuron%ld); is the "
              "instance type right?",
              i, type_name(p), want, want - 1);
  }
}

/* One device: its core_count (physical cores, or logical ones at the job's LNC: the sysfs
 * guide does not say which it counts) and its uncorrectable ECC counters. */
static void check_device(struct probe *p, long d)
{
  static const struct {
    const char *name, *what, *fix;
  } ecc[] = {
      {"mem_ecc_uncorrected", "unrepairable uncorrectable HBM ECC errors",
       "replace the instance (stop and start it, or terminate it)"},
      {"mem_ecc_repairable_uncorrected", "repairable uncorrectable HBM ECC errors",
       "reload the Neuron driver or reboot the instance"},
      {"sram_ecc_uncorrected", "uncorrectable SRAM ECC errors",
       "replace the instance (stop and start it, or terminate it)"},
  };
  char path[PATH_MAX];
  long v = 0;
  const struct mu_neuron_type *t = p->n->type;
  snprintf(path, sizeof(path), "%s" DRIVER_DIR "/neuron%ld/core_count", p->root, d);
  if (t != NULL && read_counter(path, &v) == 0 && v != t->phys_cores &&
      v != mu_neuron_type_cores(t, p->n->lnc))
    problem(p, "neuron%ld: core_count is %ld; a %s device has %ld NeuronCores (%ld at LNC=%d)", d,
            v, t->name, t->phys_cores, mu_neuron_type_cores(t, p->n->lnc), p->n->lnc);
  for (size_t i = 0; i < sizeof(ecc) / sizeof(ecc[0]); i++) {
    snprintf(path, sizeof(path), "%s" DRIVER_DIR "/neuron%ld/stats/hardware/%s", p->root, d,
             ecc[i].name);
    if (read_counter(path, &v) == 0 && v > 0)
      problem(p, "neuron%ld: stats/hardware/%s is %ld: %s on this device; %s", d, ecc[i].name, v,
              ecc[i].what, ecc[i].fix);
  }
}

/* ---------------------------------------------------------------------------------------------
 * neuron-ls -j: the cores each device shows, the LNC setting, the processes on them
 */

static int on_path(const char *name, char *out, size_t n)
{
  const char *path = getenv("PATH");
  const char *p = path != NULL ? path : "/usr/local/bin:/usr/bin:/bin";
  while (*p != '\0') {
    size_t len = strcspn(p, ":");
    if (len > 0 && (size_t)snprintf(out, n, "%.*s/%s", (int)len, p, name) < n &&
        access(out, X_OK) == 0)
      return 1;
    p += len + (p[len] == ':');
  }
  return 0;
}

/* The cores of one device of neuron-ls -j, as "NeuronCores 4-7" (its neuroncore_ids). */
static void core_ids(const cJSON *dev, struct mu_buf *b)
{
  const cJSON *ids = cJSON_GetObjectItemCaseSensitive(dev, "neuroncore_ids");
  int n = cJSON_GetArraySize(ids);
  if (n <= 0 || !cJSON_IsNumber(cJSON_GetArrayItem(ids, 0)))
    return;
  mu_buf_printf(b, " (NeuronCores %d", cJSON_GetArrayItem(ids, 0)->valueint);
  if (n > 1 && cJSON_IsNumber(cJSON_GetArrayItem(ids, n - 1)))
    mu_buf_printf(b, "-%d", cJSON_GetArrayItem(ids, n - 1)->valueint);
  mu_buf_putc(b, ')');
}

/* One device object of neuron-ls -j. */
static void check_ls_device(struct probe *p, const cJSON *dev, long i)
{
  const struct mu_neuron_type *t = p->n->type;
  long d = mu_json_get_long(dev, "neuron_device", i);
  long nc = mu_json_get_long(dev, "nc_count", -1);
  long lnc = mu_json_get_long(dev, "logical_neuroncore_config", -1);
  if (t != NULL && nc >= 0 && nc != mu_neuron_type_cores(t, p->n->lnc))
    problem(p,
            "neuron%ld: nc_count is %ld (neuron-ls -j); a %s device shows %ld at LNC=%d: the node "
            "runs another logical NeuronCore setting than the job",
            d, nc, t->name, mu_neuron_type_cores(t, p->n->lnc), p->n->lnc);
  if (t != NULL && t->has_lnc && lnc > 0 && lnc != p->n->lnc)
    problem(p,
            "neuron%ld: logical_neuroncore_config is %ld (neuron-ls -j), the job runs at LNC=%d: "
            "set the node's LNC to %d, or run the job with --lnc %ld",
            d, lnc, p->n->lnc, p->n->lnc, lnc);
  const cJSON *proc;
  cJSON_ArrayForEach(proc, cJSON_GetObjectItemCaseSensitive(dev, "neuron_processes"))
  {
    long pid = mu_json_get_long(proc, "pid", -1);
    const char *cmd = mu_json_get_str(proc, "command");
    if (pid == (long)getpid())
      continue;
    struct mu_buf cores = MU_BUF_INIT(64);
    core_ids(dev, &cores);
    problem(p,
            "neuron%ld: neuron_processes: pid %ld (%s) holds its NeuronCores%s: another process "
            "uses this device; stop it (a worker of an earlier job?) before this node joins",
            d, pid, cmd != NULL ? cmd : "?", mu_buf_str(&cores));
    mu_buf_release(&cores);
  }
}

/* Runs neuron-ls -j when it is on PATH. Returns: 1 when it ran, 0 when it is not there. */
static int check_neuron_ls(struct probe *p, double timeout_s)
{
  char exe[PATH_MAX];
  if (!on_path("neuron-ls", exe, sizeof(exe)))
    return 0;
  char *args[] = {exe, (char *)"-j", NULL};
  struct mu_buf out = MU_BUF_INIT(SIZE_MAX), why = MU_BUF_INIT(SIZE_MAX);
  if (mu_agent_run_check(args, timeout_s, NEURON_LS_MAX, 0, &out, &why) != 0) {
    problem(p, "neuron-ls -j: %s: %.300s", mu_buf_str(&why), mu_buf_str(&out));
  } else {
    cJSON *all = cJSON_Parse(mu_buf_str(&out));
    const cJSON *dev;
    long i = 0;
    if (!cJSON_IsArray(all))
      problem(p, "neuron-ls -j: its output is not a JSON array of devices: %.300s",
              mu_buf_str(&out));
    else if (p->n->devices >= 0 && cJSON_GetArraySize(all) != p->n->devices)
      problem(p, "neuron-ls -j: lists %d Neuron devices; a %s has %ld", cJSON_GetArraySize(all),
              type_name(p), p->n->devices);
    if (cJSON_IsArray(all))
      cJSON_ArrayForEach(dev, all) check_ls_device(p, dev, i++);
    cJSON_Delete(all);
  }
  mu_buf_release(&out);
  mu_buf_release(&why);
  return 1;
}

/* ---------------------------------------------------------------------------------------------
 * EFA and the shared volume
 */

static void check_efa(struct probe *p)
{
  if (p->n->efa <= 0)
    return;
  char *dir = mu_asprintf("%s" RDMA_DIR, p->root);
  struct mu_buf names = MU_BUF_INIT(4096);
  long n = 0;
  DIR *d = opendir(dir);
  struct dirent *e;
  while (d != NULL && (e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.')
      continue;
    mu_buf_printf(&names, "%s%s", n > 0 ? ", " : "", e->d_name);
    n++;
  }
  if (d == NULL)
    problem(p,
            "efa: %s cannot be read (%s): no EFA interface; a %s has %ld (is the EFA driver "
            "loaded, and did the pod ask for vpc.amazonaws.com/efa?)",
            dir, strerror(errno), type_name(p), p->n->efa);
  else if (n < p->n->efa)
    problem(p, "efa: %ld EFA interfaces in %s (%s); a %s has %ld", n, dir,
            n > 0 ? mu_buf_str(&names) : "none", type_name(p), p->n->efa);
  if (d != NULL)
    closedir(d);
  mu_buf_release(&names);
  mu_free(dir);
}

/* Copies field `k` (0-based, blank-separated) of the mounts line [l, end) into out, decoding the
 * kernel's octal escapes (\040 for a space, ...). Returns: 0, or -1 when the line is shorter. */
static int mount_field(const char *l, const char *end, int k, char *out, size_t n)
{
  for (; k > 0 && l < end; k--) {
    l = memchr(l, ' ', (size_t)(end - l));
    if (l == NULL)
      return -1;
    l++;
  }
  size_t i = 0;
  while (l < end && *l != ' ' && i + 1 < n) {
    if (l[0] == '\\' && end - l > 3 && isdigit((unsigned char)l[1])) {
      out[i++] = (char)((l[1] - '0') * 64 + (l[2] - '0') * 8 + (l[3] - '0'));
      l += 4;
    } else {
      out[i++] = *l++;
    }
  }
  out[i] = '\0';
  return k == 0 && i > 0 ? 0 : -1;
}

/* Whether fstype is a shared (network or cluster) file system. */
static int shared_fs(const char *fstype)
{
  static const char *const shared[] = {"nfs",  "nfs4",      "lustre", "cifs",   "smb3",
                                       "ceph", "glusterfs", "gpfs",   "beegfs", "wekafs"};
  for (size_t i = 0; i < sizeof(shared) / sizeof(shared[0]); i++)
    if (strcmp(fstype, shared[i]) == 0)
      return 1;
  return strncmp(fstype, "fuse", 4) == 0; /* fuse.s3fs, mountpoint-s3, fuse.glusterfs, ... */
}

/* The mount that holds `want` in the mounts file (the longest mount point over it): its mount
 * point into dir and type into fstype. */
static void mount_of(const char *mounts, const char *want, char *dir, char *fstype, size_t n)
{
  char d[PATH_MAX], t[64];
  size_t best = 0;
  snprintf(dir, n, "/");
  snprintf(fstype, n, "?");
  for (const char *l = mounts; *l != '\0';) {
    const char *end = l + strcspn(l, "\n");
    size_t dl;
    if (mount_field(l, end, 1, d, sizeof(d)) == 0 && mount_field(l, end, 2, t, sizeof(t)) == 0 &&
        (dl = strlen(d)) >= best && strncmp(want, d, dl) == 0 &&
        (want[dl] == '\0' || want[dl] == '/' || strcmp(d, "/") == 0)) {
      best = dl;
      snprintf(dir, n, "%s", d);
      snprintf(fstype, n, "%s", t);
    }
    l = end + (*end == '\n');
  }
}

/* The job's shared volume: `mount` is a mount point of its own (the pod's volume), or lies on a
 * shared file system (a Slurm cluster's /fsx holding it), not on the node's own disk. */
static void check_mount(struct probe *p)
{
  if (p->n->mount == NULL)
    return;
  char *path = mu_asprintf("%s" MOUNTS, p->root);
  char dir[PATH_MAX], fstype[PATH_MAX];
  struct mu_buf b = MU_BUF_INIT(SIZE_MAX);
  int rc = mu_read_file(path, 16 << 20, &b);
  if (rc != 0) {
    problem(p, "mount: cannot read %s (%s) to find %s", path, mu_strerror(rc), p->n->mount);
  } else {
    mount_of(mu_buf_str(&b), p->n->mount, dir, fstype, sizeof(dir));
    if (strcmp(dir, p->n->mount) != 0 && !shared_fs(fstype))
      problem(p,
              "mount: %s is not mounted: it is on %s (%s, this node's own; %s), not on a shared "
              "volume; check the job's volume (on Kubernetes the PersistentVolumeClaim, --claim; "
              "elsewhere the shared file system)",
              p->n->mount, dir, fstype, path);
  }
  mu_buf_release(&b);
  mu_free(path);
}

/* ---------------------------------------------------------------------------------------------
 * The check
 */

/* What a pass checked, for the log. */
static void pass_note(const struct probe *p, int ls_ran, struct mu_buf *note)
{
  const struct mu_agent_neuron *n = p->n;
  mu_buf_printf(note, "Neuron check passed: %ld Neuron devices", p->ndevices);
  if (n->type != NULL)
    mu_buf_printf(note, " (%s), %ld NeuronCores each at LNC=%d", n->type->name,
                  mu_neuron_type_cores(n->type, n->lnc), n->lnc);
  mu_buf_puts(note, ", no uncorrectable ECC error");
  mu_buf_puts(note, ls_ran ? ", no other process on the NeuronCores (neuron-ls -j)"
                           : "; neuron-ls is not on PATH: NeuronCore users not checked");
  if (n->efa > 0)
    mu_buf_printf(note, ", %ld EFA interfaces", n->efa);
  if (n->mount != NULL)
    mu_buf_printf(note, ", %s on a shared volume", n->mount);
}

int mu_agent_neuron_run(const struct mu_agent_neuron *n, const char *root, double timeout_s,
                        struct mu_buf *out, struct mu_buf *note)
{
  struct probe *p = mu_calloc(1, sizeof(*p));
  int ls_ran = 0, rc = 0;
  p->n = n;
  p->root = root != NULL && strcmp(root, "/") != 0 ? root : "";
  p->out = out;
  int found = list_devices(p, note);
  if (found > 0) {
    check_device_count(p);
    for (long d = 0; d < MAX_DEVICES; d++)
      if (p->present[d])
        check_device(p, d);
    ls_ran = check_neuron_ls(p, timeout_s);
    check_efa(p);
    check_mount(p);
  }
  if (p->problems > 0) {
    mu_buf_printf(note, "the Neuron check found %d problem%s", p->problems,
                  p->problems == 1 ? "" : "s");
    rc = MU_EINVAL;
  } else if (found > 0) {
    pass_note(p, ls_ran, note);
  }
  mu_free(p);
  return rc;
}

int mu_agent_neuron_health(const struct mu_agent_config *cfg, struct mu_buf *output,
                           struct mu_buf *why)
{
  struct mu_agent_neuron n;
  if (mu_agent_neuron_parse(cfg->health_check, &n, why) != 0)
    return MU_EINVAL;
  int rc = mu_agent_neuron_run(&n, cfg->health_root, cfg->health_check_timeout_s, output, why);
  mu_agent_neuron_release(&n);
  return rc;
}
