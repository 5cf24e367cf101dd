/* Random bytes (random.h). */
#include "random.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <uv.h>

#include "fsutil.h"

int mu_random_bytes(void *buf, size_t n)
{
  /* uv_random() with no loop runs synchronously: getrandom(2), or /dev/urandom where the
   * kernel has no getrandom. */
  return uv_random(NULL, NULL, buf, n, 0, NULL);
}

int mu_random_hex(char *out, size_t nbytes)
{
  static const char digits[] = "0123456789abcdef";
  unsigned char raw[64];
  size_t done = 0;
  out[0] = '\0';
  while (done < nbytes) {
    size_t chunk = nbytes - done < sizeof(raw) ? nbytes - done : sizeof(raw);
    int rc = mu_random_bytes(raw, chunk);
    if (rc != 0) {
      out[0] = '\0';
      return rc;
    }
    for (size_t i = 0; i < chunk; i++) {
      out[2 * (done + i)] = digits[raw[i] >> 4];
      out[2 * (done + i) + 1] = digits[raw[i] & 15];
    }
    done += chunk;
  }
  out[2 * nbytes] = '\0';
  return 0;
}

int mu_app_id_suffix(char out[13])
{
  static const char alnum[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  const char *pin = getenv("MUSTER_APP_ID_SUFFIX");
  size_t k = 0;
  if (pin != NULL && pin[0] != '\0') {
    for (const char *q = pin; *q && k < 12; q++) {
      char c = (char)tolower((unsigned char)*q);
      if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))
        out[k++] = c;
    }
    if (k == 0)
      out[k++] = '0';
    out[k] = '\0';
    return 0;
  }
  unsigned char rnd[12];
  int rc = mu_random_bytes(rnd, sizeof(rnd));
  if (rc != 0) {
    out[0] = '\0';
    return rc;
  }
  out[0] = alnum[rnd[0] % 26]; /* a letter first, as TorchX's make_unique */
  for (k = 1; k < 12; k++)
    out[k] = alnum[rnd[k] % 36];
  out[12] = '\0';
  return 0;
}

int mu_random_token_file(const char *path)
{
  char tok[2 * 32 + 2];
  int rc = mu_random_hex(tok, 32);
  int fd = rc == 0 ? open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600) : -1;
  if (rc == 0 && fd < 0)
    rc = -errno;
  if (rc == 0) {
    tok[64] = '\n';
    rc = mu_write_all(fd, tok, 65);
  }
  if (fd >= 0 && close(fd) != 0 && rc == 0)
    rc = -errno;
  if (rc != 0 && fd >= 0)
    unlink(path);
  for (volatile char *p = tok; p < tok + sizeof(tok); p++)
    *p = '\0';
  return rc;
}
