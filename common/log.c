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

/* Is s[0..n) (n >= 2) a whole UTF-8 sequence that is no control character (C1, U+0080..U+009F,
 * which terminals may read as ESC)? Returns: its length, or 0. */
static size_t utf8_printable(const unsigned char *s, size_t n)
{
  size_t len = s[0] >= 0xF0 ? 4 : s[0] >= 0xE0 ? 3 : 2;
  if (s[0] < 0xC2 || s[0] > 0xF4 || len > n)
    return 0;
  for (size_t i = 1; i < len; i++)
    if ((s[i] & 0xC0) != 0x80)
      return 0;
  if (s[0] == 0xC2 && s[1] < 0xA0)
    return 0; /* C1 controls */
  if ((s[0] == 0xE0 && s[1] < 0xA0) || (s[0] == 0xF0 && s[1] < 0x90) ||
      (s[0] == 0xF4 && s[1] >= 0x90) || (s[0] == 0xED && s[1] >= 0xA0))
    return 0; /* overlong, past U+10FFFF, surrogates */
  return len;
}

size_t mu_log_escape(char *out, size_t cap, const char *in)
{
  static const char hex[] = "0123456789abcdef";
  const unsigned char *s = (const unsigned char *)in;
  size_t n = strlen(in), o = 0;
  if (cap == 0)
    return 0;
  for (size_t i = 0; i < n;) {
    char e[5];
    size_t k = 0, take = s[i] >= 0x80 ? utf8_printable(s + i, n - i) : 1;
    if (s[i] == '\n' || s[i] == '\r' || s[i] == '\t') {
      e[0] = '\\';
      e[1] = s[i] == '\n' ? 'n' : s[i] == '\r' ? 'r' : 't';
      k = 2;
    } else if (s[i] < 0x20 || s[i] == 0x7f || take == 0) {
      e[0] = '\\';
      e[1] = 'x';
      e[2] = hex[s[i] >> 4];
      e[3] = hex[s[i] & 15];
      k = 4;
      take = 1;
    }
    const char *src = k > 0 ? e : (const char *)s + i;
    size_t len = k > 0 ? k : take;
    if (o + len >= cap)
      break;
    memcpy(out + o, src, len);
    o += len;
    i += take;
  }
  out[o] = '\0';
  return o;
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
  char safe[sizeof(line) * 2];
  mu_log_escape(safe, sizeof(safe), line);
  fprintf(stderr, "%s.%03ldZ %s %s %s\n", ts, now.tv_nsec / 1000000, log_cfg.prog, names[level],
          safe);
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
