/* JSON helpers (see json.h). */
#include "json.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

/* Bytes mu_json_str() must look at: controls, '"', '\\', '<', '>', '&', and every byte of a
 * multi-byte UTF-8 sequence (checked, as Go's encoder does). Every other byte is copied as
 * is, in runs. */
static const unsigned char json_special[128] = {
    1, 1, 1, 1, 1, 1, 1,         1,          1,         1,         1,         1, 1,
    1, 1, 1, 1, 1, 1, 1,         1,          1,         1,         1,         1, 1,
    1, 1, 1, 1, 1, 1, ['"'] = 1, ['\\'] = 1, ['<'] = 1, ['>'] = 1, ['&'] = 1,
};

/* The length of the valid UTF-8 sequence at u[0..n) (n >= 1, u[0] >= 0x80), or 0 when it is
 * not one (a stray continuation byte, an overlong form, a surrogate, past U+10FFFF, cut). */
static size_t utf8_len(const unsigned char *u, size_t n)
{
  unsigned char c = u[0];
  size_t len = c >= 0xc2 && c <= 0xdf   ? 2
               : c >= 0xe0 && c <= 0xef ? 3
               : c >= 0xf0 && c <= 0xf4 ? 4
                                        : 0;
  if (len == 0 || len > n)
    return 0;
  unsigned char lo = 0x80, hi = 0xbf;
  if (c == 0xe0)
    lo = 0xa0;
  else if (c == 0xed)
    hi = 0x9f;
  else if (c == 0xf0)
    lo = 0x90;
  else if (c == 0xf4)
    hi = 0x8f;
  if (u[1] < lo || u[1] > hi)
    return 0;
  for (size_t i = 2; i < len; i++)
    if (u[i] < 0x80 || u[i] > 0xbf)
      return 0;
  return len;
}

void mu_json_str(struct mu_buf *b, const char *s, size_t n)
{
  static const char hex[] = "0123456789abcdef";
  const unsigned char *u = (const unsigned char *)s;
  size_t start = 0;
  mu_buf_putc(b, '"');
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = u[i];
    if (ch < 0x80 && !json_special[ch])
      continue;
    const char *rep = NULL;
    char esc[7];
    if (ch >= 0x80) {
      size_t len = utf8_len(u + i, n - i);
      if (len == 0) {
        /* invalid UTF-8: U+FFFD, as Go's encoder (and so etcd) writes it */
        mu_buf_append(b, s + start, i - start);
        mu_buf_puts(b, "\\ufffd");
        start = i + 1;
      } else if (len == 3 && ch == 0xe2 && u[i + 1] == 0x80 &&
                 (u[i + 2] == 0xa8 || u[i + 2] == 0xa9)) {
        /* U+2028 and U+2029 are escaped by Go as well */
        mu_buf_append(b, s + start, i - start);
        mu_buf_puts(b, u[i + 2] == 0xa8 ? "\\u2028" : "\\u2029");
        start = i + 3;
      }
      i += len > 0 ? len - 1 : 0;
      continue;
    }
    switch (ch) {
    case '"':
      rep = "\\\"";
      break;
    case '\\':
      rep = "\\\\";
      break;
    case '\n':
      rep = "\\n";
      break;
    case '\r':
      rep = "\\r";
      break;
    case '\t':
      rep = "\\t";
      break;
    default:
      esc[0] = '\\';
      esc[1] = 'u';
      esc[2] = '0';
      esc[3] = '0';
      esc[4] = hex[ch >> 4];
      esc[5] = hex[ch & 15];
      esc[6] = '\0';
      rep = esc;
    }
    mu_buf_append(b, s + start, i - start);
    mu_buf_puts(b, rep);
    start = i + 1;
  }
  mu_buf_append(b, s + start, n - start);
  mu_buf_putc(b, '"');
}

void mu_json_time(struct mu_buf *b, int64_t unix_ns)
{
  time_t sec = (time_t)(unix_ns / 1000000000);
  long ns = (long)(unix_ns % 1000000000);
  struct tm tm;
  char base[40], frac[16];
  gmtime_r(&sec, &tm);
  strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
  frac[0] = '\0';
  if (ns > 0) {
    snprintf(frac, sizeof(frac), ".%09ld", ns);
    size_t l = strlen(frac);
    while (l > 1 && frac[l - 1] == '0')
      frac[--l] = '\0';
  }
  mu_buf_printf(b, "\"%s%sZ\"", base, frac);
}

const char *mu_json_get_str(const cJSON *o, const char *key)
{
  const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsString(it) ? it->valuestring : NULL;
}

long mu_json_get_long(const cJSON *o, const char *key, long dflt)
{
  const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsNumber(it) ? (long)it->valuedouble : dflt;
}

double mu_json_get_double(const cJSON *o, const char *key, double dflt)
{
  const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsNumber(it) ? it->valuedouble : dflt;
}

int mu_json_get_bool(const cJSON *o, const char *key, int dflt)
{
  const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsBool(it) ? cJSON_IsTrue(it) : dflt;
}
