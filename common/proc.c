/* Process start-up (see proc.h). */
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"

void mu_proc_startup(void)
{
  for (int fd = 0; fd < 3; fd++) {
    if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
      int n = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
      if (n >= 0 && n != fd)
        close(n);
    }
  }
  signal(SIGPIPE, SIG_IGN);
  mu_alloc_install_hooks();
}

void mu_proc_catch(void (*fn)(int), const int *signals)
{
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = fn;
  sigemptyset(&sa.sa_mask);
  for (const int *s = signals; *s != 0; s++)
    sigaction(*s, &sa, NULL);
}

unsigned long long mu_proc_start_time(long pid)
{
  char path[64], buf[1024];
  if (pid <= 0 || snprintf(path, sizeof(path), "/proc/%ld/stat", pid) >= (int)sizeof(path))
    return 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 0;
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0)
    return 0;
  buf[n] = '\0';
  /* "PID (COMM) S PPID ...": COMM may hold spaces and ')', so count from the last ')'. */
  char *p = strrchr(buf, ')');
  if (p == NULL)
    return 0;
  p++;
  for (int field = 3; field < 22; field++) { /* skip fields 3..21 */
    while (*p == ' ')
      p++;
    while (*p != ' ' && *p != '\0')
      p++;
  }
  char *end = NULL;
  errno = 0;
  unsigned long long t = strtoull(p, &end, 10);
  return (end == p || errno != 0) ? 0 : t;
}

int mu_proc_is(long pid, unsigned long long start)
{
  return pid > 1 && start != 0 && mu_proc_start_time(pid) == start;
}
