/* --c10d-allow: which peers the TCPStore listener admits (see allow.h). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "allow.h"

void c10d_allow_free(struct c10d_allow *a)
{
  mu_free(a->nets);
  a->nets = NULL;
  a->n = 0;
}

/* Parses one entry "ADDR[/BITS]" (`len` bytes at `s`) into `net`. Returns: 0, or -1 with err. */
static int parse_net(const char *s, size_t len, struct c10d_net *net, char *err, size_t errlen)
{
  char buf[INET6_ADDRSTRLEN + 8];
  if (len == 0 || len >= sizeof(buf)) {
    snprintf(err, errlen, "%s entry '%.*s'", len == 0 ? "an empty" : "a too long",
             (int)(len > 64 ? 64 : len), s);
    return -1;
  }
  memcpy(buf, s, len);
  buf[len] = '\0';
  char *slash = strchr(buf, '/');
  if (slash != NULL)
    *slash = '\0';
  memset(net, 0, sizeof(*net));
  unsigned max;
  if (inet_pton(AF_INET, buf, net->addr) == 1) {
    net->family = AF_INET;
    max = 32;
  } else if (inet_pton(AF_INET6, buf, net->addr) == 1) {
    net->family = AF_INET6;
    max = 128;
  } else {
    snprintf(err, errlen,
             "'%s' is not an IPv4 or IPv6 address (a host name? resolve it first, e.g. with "
             "getent hosts NAME)",
             buf);
    return -1;
  }
  net->bits = max;
  if (slash != NULL) {
    char *end;
    unsigned long b = strtoul(slash + 1, &end, 10);
    if (slash[1] < '0' || slash[1] > '9' || *end != '\0' || b > max) {
      snprintf(err, errlen, "'%s/%s': the prefix length must be 0-%u", buf, slash + 1, max);
      return -1;
    }
    net->bits = (unsigned)b;
  }
  return 0;
}

int c10d_allow_parse(const char *list, struct c10d_allow *a, char *err, size_t errlen)
{
  c10d_allow_free(a);
  size_t cap = 1;
  for (const char *p = list; *p != '\0'; p++)
    cap += *p == ',';
  a->nets = mu_calloc(cap, sizeof(*a->nets));
  const char *s = list;
  for (;;) {
    size_t len = strcspn(s, ",");
    if (parse_net(s, len, &a->nets[a->n], err, errlen) != 0) {
      c10d_allow_free(a);
      return -1;
    }
    a->n++;
    if (s[len] == '\0')
      return 0;
    s += len + 1;
  }
}

/* Returns: 1 when the first `bits` bits of x and y agree. */
static int same_prefix(const uint8_t *x, const uint8_t *y, unsigned bits)
{
  unsigned whole = bits / 8, rest = bits % 8;
  if (memcmp(x, y, whole) != 0)
    return 0;
  if (rest == 0)
    return 1;
  uint8_t mask = (uint8_t)(0xffu << (8 - rest));
  return (x[whole] & mask) == (y[whole] & mask);
}

int c10d_allow_match(const struct c10d_allow *a, const struct sockaddr *sa)
{
  if (a->n == 0)
    return 1;
  uint8_t addr[16];
  int family = sa->sa_family;
  if (family == AF_INET) {
    memcpy(addr, &((const struct sockaddr_in *)sa)->sin_addr, 4);
  } else if (family == AF_INET6) {
    const uint8_t *b = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (memcmp(b, mapped, 12) == 0) { /* ::ffff:a.b.c.d: an IPv4 peer on a dual-stack socket */
      family = AF_INET;
      memcpy(addr, b + 12, 4);
    } else {
      memcpy(addr, b, 16);
    }
  } else {
    return 0;
  }
  for (size_t i = 0; i < a->n; i++)
    if (a->nets[i].family == family && same_prefix(addr, a->nets[i].addr, a->nets[i].bits))
      return 1;
  return 0;
}
