/* Logging. Library code (common/, store, schedulers) never prints; the binaries do, through
 * these. mu_error() and mu_warn() print "muster: error: ..." and return -1, so a command can
 * write `return mu_error("cannot open '%s'", path);`.
 */
#ifndef MU_LOG_H
#define MU_LOG_H

#include <stddef.h>

enum mu_log_level { MU_LOG_DEBUG = 0, MU_LOG_INFO, MU_LOG_WARN, MU_LOG_ERROR, MU_LOG_OFF };

/* Process-wide settings, set once by main(): the program name shown in every line and the
 * lowest level printed. */
void mu_log_setup(const char *prog, enum mu_log_level level);
/* Parses "debug", "info", "warn", "error", "off". Returns: 0, or MU_EINVAL. */
int mu_log_level_parse(const char *s, enum mu_log_level *out);
enum mu_log_level mu_log_get_level(void);

/* One line to stderr: "<time> <prog> <LEVEL> message", the message escaped by mu_log_escape():
 * whatever a client sent and the message quotes (a reason, a key), the log gets one line of it
 * and a terminal reading the log no escape sequence. */
void mu_log(enum mu_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Copies `in` into `out` (cap bytes, NUL-terminated, cut at a whole character) with newline,
 * CR and tab as \n \r \t, every other control byte (C0, DEL, the UTF-8 C1 controls) and every
 * byte of invalid UTF-8 as \xHH; printable UTF-8 stays as it is.
 * Returns: the length written. */
size_t mu_log_escape(char *out, size_t cap, const char *in);

/* "<prog>: error: message" to stderr. Returns: -1. */
int mu_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "<prog>: warning: message" to stderr. Returns: -1. */
int mu_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define mu_debug(...) mu_log(MU_LOG_DEBUG, __VA_ARGS__)
#define mu_info(...) mu_log(MU_LOG_INFO, __VA_ARGS__)

#endif
