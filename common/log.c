/* Logging to stderr. The settings are the one piece of process state in common/; they are
 * written once by main() before any thread starts. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "muster/errno.h"

#include "log.h"

static struct {
  const char *prog;
  enum mu_log_level level;
} log_cfg = {"muster", MU_LOG_INFO};

void mu_log_setup(const char *prog, enum mu_log_level level)
{
  log_cfg.prog = prog;
  log_cfg.level = level;
}

enum mu_log_level mu_log_get_level(void)
{
  return log_cfg.level;
}

int mu_log_level_parse(const char *s, enum mu_log_level *out)
{
  static const char *const names[] = {"debug", "info", "warn", "error", "off"};
  for (int i = 0; i < 5; i++) {
    if (strcasecmp(s, names[i]) == 0) {
      *out = (enum mu_log_level)i;
      return 0;
    }
  }
  if (strcasecmp(s, "warning") == 0) {
    *out = MU_LOG_WARN;
    return 0;
  }
  if (strcasecmp(s, "critical") == 0 || strcasecmp(s, "fatal") == 0) { /* Python's names */
    *out = MU_LOG_ERROR;
    return 0;
  }
  return MU_EINVAL;
}

void mu_log(enum mu_log_level level, const char *fmt, ...)
{
  static const char *const names[] = {"DEBUG", "INFO", "WARN", "ERROR"};
  if (level < log_cfg.level || level >= MU_LOG_OFF)
    return;
  char ts[32];
  struct timespec now;
  struct tm tm;
  clock_gettime(CLOCK_REALTIME, &now);
  gmtime_r(&now.tv_sec, &tm);
  strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
  char line[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  fprintf(stderr, "%s.%03ldZ %s %s %s\n", ts, now.tv_nsec / 1000000, log_cfg.prog, names[level],
          line);
}

static int say(const char *what, const char *fmt, va_list ap)
{
  char line[2048];
  vsnprintf(line, sizeof(line), fmt, ap);
  fprintf(stderr, "%s: %s: %s\n", log_cfg.prog, what, line);
  return -1;
}

int mu_error(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  say("error", fmt, ap);
  va_end(ap);
  return -1;
}

int mu_warn(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  say("warning", fmt, ap);
  va_end(ap);
  return -1;
}
