/* muster agent: what this node has (its devices, for --nproc-per-node; its python) and the
 * --exec-worker shim each worker starts through. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "muster/errno.h"

#include "agent.h"
#include "buf.h"
#include "fsutil.h"
#include "opts.h"

int mu_agent_find_python(char *out, size_t n)
{
  const char *pe = getenv("PYTHON_EXEC");
  if (pe != NULL && *pe != '\0') {
    snprintf(out, n, "%s", pe);
    return 0;
  }
  const char *path = getenv("PATH");
  static const char *const names[] = {"python3", "python"};
  for (size_t k = 0; k < 2; k++) {
    const char *p = path != NULL ? path : "/usr/local/bin:/usr/bin:/bin";
    while (*p != '\0') {
      size_t len = strcspn(p, ":");
      if (len > 0 && (size_t)snprintf(out, n, "%.*s/%s", (int)len, p, names[k]) < n &&
          access(out, X_OK) == 0)
        return 0;
      p += len;
      if (*p == ':')
        p++;
    }
  }
  return MU_ENOENT;
}

/* Entries of dir whose name is prefix followed by digits only. */
static int count_devices(const char *dir, const char *prefix)
{
  DIR *d = opendir(dir);
  int count = 0;
  size_t pl = strlen(prefix);
  if (d == NULL)
    return 0;
  for (struct dirent *e = readdir(d); e != NULL; e = readdir(d)) {
    const char *p = e->d_name;
    if (strncmp(p, prefix, pl) != 0 || p[pl] == '\0')
      continue;
    p += pl;
    while (*p >= '0' && *p <= '9')
      p++;
    count += *p == '\0';
  }
  closedir(d);
  return count;
}

/* NVIDIA GPUs: the driver's /dev/nvidiaN files, else the "GPU N:" lines of `nvidia-smi -L`. */
static int count_gpus(const char *devdir)
{
  int n = count_devices(devdir, "nvidia");
  if (n > 0)
    return n;
  FILE *p = popen("nvidia-smi -L 2>/dev/null", "r");
  char line[512];
  if (p == NULL)
    return 0;
  while (fgets(line, sizeof(line), p) != NULL)
    n += strncmp(line, "GPU ", 4) == 0;
  pclose(p);
  return n;
}

/* AWS Neuron cores: each /dev/neuronN device has the cores its sysfs core_count says, 2 when
 * it does not say (trn1, inf2). */
static int count_neuron_cores(const char *devdir)
{
  int devices = count_devices(devdir, "neuron"), cores = 0;
  for (int i = 0; i < devices; i++) {
    char path[128];
    struct mu_buf b = MU_BUF_INIT(64);
    long c = 2;
    snprintf(path, sizeof(path), "/sys/class/neuron_device/neuron%d/core_count", i);
    if (mu_read_file(path, 64, &b) == 0) {
      while (b.len > 0 && (b.data[b.len - 1] == '\n' || b.data[b.len - 1] == ' '))
        b.data[--b.len] = '\0';
      if (mu_parse_long(mu_buf_str(&b), 1, 1024, &c) != 0)
        c = 2;
    }
    mu_buf_release(&b);
    cores += (int)c;
  }
  return cores;
}

int mu_agent_parse_nproc(const char *s, int *n, struct mu_buf *err)
{
  const char *devdir = getenv("MUSTER_DEVICE_DIR");
  long v = 0;
  if (devdir == NULL || *devdir == '\0')
    devdir = "/dev";
  if (mu_parse_long(s, 1, 4096, &v) == 0) {
    *n = (int)v;
    return 0;
  }
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  *n = cpus < 1 ? 1 : (int)cpus;
  if (strcmp(s, "cpu") == 0)
    return 0;
  if (strcmp(s, "gpu") == 0 || strcmp(s, "auto") == 0) {
    int g = count_gpus(devdir);
    if (g == 0)
      g = count_neuron_cores(devdir);
    if (g > 0)
      *n = g;
    if (g > 0 || strcmp(s, "auto") == 0)
      return 0;
    mu_buf_printf(err,
                  "--nproc-per-node gpu: this node has no GPU (no %s/nvidia[0-9]*, no "
                  "'nvidia-smi -L') and no Neuron device (%s/neuron[0-9]*); give a number, or "
                  "'auto'",
                  devdir, devdir);
    return MU_EINVAL;
  }
  mu_buf_printf(err,
                "--nproc-per-node '%s': expected a number of workers from 1 to 4096, or cpu, "
                "gpu, auto",
                s);
  return MU_EINVAL;
}

int mu_agent_exec_worker(long ppid, char **cmd, struct mu_buf *err)
{
#ifdef __linux__
  prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
  if ((long)getppid() != ppid) /* the agent died before prctl() took effect */
    return MU_AGENT_EXIT_FAILED;
  execvp(cmd[0], cmd);
  mu_buf_printf(err, "cannot start worker command '%s': %s", cmd[0], strerror(errno));
  return 127;
}
