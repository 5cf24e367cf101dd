/* Process start-up (see proc.h). */
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
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
