/* Decimal formatting without printf, shared by the reply writers on musterd's hot paths. */
#ifndef MUSTERD_SERVER_DECIMAL_H
#define MUSTERD_SERVER_DECIMAL_H

#include <stdint.h>
#include <string.h>

/* Room rv_dec() needs: the 20 digits of UINT64_MAX (no NUL is written). */
#define RV_DEC_MAX 20

/* Writes `v` in decimal at `out` (at least RV_DEC_MAX bytes; not NUL-terminated).
 * Returns: the number of digits written. */
static inline size_t rv_dec(char *out, uint64_t v)
{
  char d[24];
  size_t i = sizeof(d);
  do {
    d[--i] = (char)('0' + v % 10);
    v /= 10;
  } while (v != 0);
  memcpy(out, d + i, sizeof(d) - i);
  return sizeof(d) - i;
}

#endif
