/* Go's path.Clean for rooted paths (see path.h). One pass: `w` is the write position, and a
 * ".." segment backs up to the slash before the last segment written. */
#include "path.h"

#include <string.h>

size_t mu_path_clean(char *dst, const char *p, size_t n, unsigned flags)
{
  size_t w = 0, r = 0;
  dst[w++] = '/';
  while (r < n) {
    if (p[r] == '/') {
      r++;
    } else if (p[r] == '.' && (r + 1 == n || p[r + 1] == '/')) {
      r++;
    } else if (p[r] == '.' && r + 1 < n && p[r + 1] == '.' && (r + 2 == n || p[r + 2] == '/')) {
      r += 2;
      if (w > 1) {
        w--;
        while (w > 1 && dst[w - 1] != '/')
          w--;
        if (w > 1)
          w--;
      }
    } else {
      if (w > 1)
        dst[w++] = '/';
      while (r < n && p[r] != '/')
        dst[w++] = p[r++];
    }
  }
  if ((flags & MU_PATH_KEEP_SLASH) && n > 1 && p[n - 1] == '/' && w > 1)
    dst[w++] = '/';
  dst[w] = '\0';
  return w;
}

int mu_path_segment_ok(const char *s)
{
  size_t n = strlen(s);
  if (n == 0 || n > 255 || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
    return 0;
  for (const unsigned char *c = (const unsigned char *)s; *c != '\0'; c++)
    if (*c == '/' || *c < 0x20 || *c == 0x7f)
      return 0;
  return 1;
}
