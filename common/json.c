/* JSON helpers (see json.h). */
#include "json.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

/* Bytes mu_json_str() must look at: controls, '"', '\\', '<', '>', '&', and 0xe2 (the lead
 * byte of U+2028/U+2029). Every other byte is copied as is, in runs. */
static const unsigned char json_special[256] = {
    1, 1, 1, 1, 1, 1, 1,         1,          1,         1,         1,         1,          1,
    1, 1, 1, 1, 1, 1, 1,         1,          1,         1,         1,         1,          1,
    1, 1, 1, 1, 1, 1, ['"'] = 1, ['\\'] = 1, ['<'] = 1, ['>'] = 1, ['&'] = 1, [0xe2] = 1,
};

void mu_json_str(struct mu_buf *b, const char *s, size_t n)
{
  static const char hex[] = "0123456789abcdef";
  const unsigned char *u = (const unsigned char *)s;
  size_t start = 0;
  mu_buf_putc(b, '"');
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = u[i];
    if (!json_special[ch])
      continue;
    const char *rep = NULL;
    char esc[7];
    if (ch == 0xe2) {
      /* U+2028 and U+2029 are escaped by Go as well */
      if (i + 2 < n && u[i + 1] == 0x80 && (u[i + 2] == 0xa8 || u[i + 2] == 0xa9)) {
        mu_buf_append(b, s + start, i - start);
        mu_buf_puts(b, u[i + 2] == 0xa8 ? "\\u2028" : "\\u2029");
        i += 2;
        start = i + 1;
      }
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
