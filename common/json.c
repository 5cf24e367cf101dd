/* JSON helpers (see json.h). */
#include "json.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

/* Bytes mu_json_str() must look at, each with the length of its escape: controls (\u00XX, or
 * \n \r \t), '"', '\\', '<', '>', '&' (\u003c ...). Every byte of a multi-byte UTF-8 sequence is
 * checked too (as Go's encoder does). Every other byte is copied as is, in runs. */
static const unsigned char json_special[128] = {
    6, 6, 6, 6, 6, 6, 6,         6,          6,         2,         2,         6, 6,
    2, 6, 6, 6, 6, 6, 6,         6,          6,         6,         6,         6, 6,
    6, 6, 6, 6, 6, 6, ['"'] = 2, ['\\'] = 2, ['<'] = 6, ['>'] = 6, ['&'] = 6,
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

/* The escape for the special byte at u[i] (u[i] >= 0x80 or json_special): writes it to `esc`
 * (or leaves `esc` empty when the bytes stay as they are) and returns how many input bytes it
 * covers. */
static size_t json_escape(const unsigned char *u, size_t i, size_t n, char esc[8])
{
  static const char hex[] = "0123456789abcdef";
  unsigned char ch = u[i];
  esc[0] = '\\';
  esc[2] = '\0';
  if (ch >= 0x80) {
    size_t len = utf8_len(u + i, n - i);
    if (len == 0) { /* invalid UTF-8: U+FFFD, as Go's encoder (and so etcd) writes it */
      memcpy(esc, "\\ufffd", 7);
      return 1;
    }
    if (len == 3 && ch == 0xe2 && u[i + 1] == 0x80 && (u[i + 2] == 0xa8 || u[i + 2] == 0xa9)) {
      memcpy(esc, u[i + 2] == 0xa8 ? "\\u2028" : "\\u2029", 7); /* Go escapes these too */
      return 3;
    }
    esc[0] = '\0';
    return len;
  }
  const char *two = ch == '"'    ? "\""
                    : ch == '\\' ? "\\"
                    : ch == '\n' ? "n"
                    : ch == '\r' ? "r"
                    : ch == '\t' ? "t"
                                 : NULL;
  if (two != NULL) {
    esc[1] = two[0];
    return 1;
  }
  memcpy(esc, "\\u00", 4);
  esc[4] = hex[ch >> 4];
  esc[5] = hex[ch & 15];
  esc[6] = '\0';
  return 1;
}

/* Walks `s` once: writes its JSON form at `p` when p is not NULL (room for it reserved).
 * Returns: that form's length, quotes included. */
static size_t json_walk(char *p, const char *s, size_t n)
{
  const unsigned char *u = (const unsigned char *)s;
  size_t start = 0, out = n + 2;
  char *w = p;
  if (w != NULL)
    *w++ = '"';
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = u[i];
    if (ch < 0x80 && (!json_special[ch] || w == NULL)) {
      out += ch < 0x80 && json_special[ch] ? json_special[ch] - 1u : 0;
      continue;
    }
    char esc[8];
    size_t took = json_escape(u, i, n, esc);
    if (esc[0] != '\0') {
      size_t elen = strlen(esc);
      out = out - took + elen;
      if (w != NULL) {
        memcpy(w, s + start, i - start);
        w += i - start;
        memcpy(w, esc, elen);
        w += elen;
      }
      start = i + took;
    }
    i += took - 1;
  }
  if (w != NULL) {
    memcpy(w, s + start, n - start);
    w[n - start] = '"';
  }
  return out;
}

void mu_json_str(struct mu_buf *b, const char *s, size_t n)
{
  size_t len = json_walk(NULL, s, n); /* measured first: one allocation, no append per escape */
  if (mu_buf_reserve(b, len) != 0)
    return;
  json_walk(b->data + b->len, s, n);
  b->len += len;
  b->data[b->len] = '\0';
}

size_t mu_json_str_len(const char *s, size_t n)
{
  return json_walk(NULL, s, n);
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
