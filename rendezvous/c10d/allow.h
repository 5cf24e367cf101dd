/* The addresses the TCPStore listener admits (musterd --c10d-allow LIST). TCPStore has no
 * credential (torch sends none), so a job's store is kept to the job by where its clients are:
 * on Slurm, the allocation's nodes (launcher/sched/slurm_render.c passes them); on Kubernetes a
 * NetworkPolicy does it; locally the listener is on loopback. A connection from anywhere else is
 * closed at accept, before it is read or counted against anyone's share (docs/security.md).
 */
#ifndef MUSTERD_C10D_ALLOW_H
#define MUSTERD_C10D_ALLOW_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct c10d_net {
  int family;       /* AF_INET or AF_INET6 */
  uint8_t addr[16]; /* network byte order; 4 bytes used for AF_INET */
  unsigned bits;    /* prefix length */
};

struct c10d_allow {
  struct c10d_net *nets;
  size_t n; /* 0: everyone (no --c10d-allow) */
};

/* Parses LIST: comma-separated IPv4 or IPv6 addresses, each with an optional /BITS prefix
 * (e.g. "10.0.0.5,10.0.1.0/24,::1"). Host names are refused: resolve them first. Returns: 0,
 * or -1 with the reason in err. `a` is reset first; free it with c10d_allow_free(). */
int c10d_allow_parse(const char *list, struct c10d_allow *a, char *err, size_t errlen);

/* Returns: 1 when `sa` (an IPv4, IPv6 or IPv4-mapped IPv6 peer) is admitted: no list, or in one
 * of its networks; else 0. */
int c10d_allow_match(const struct c10d_allow *a, const struct sockaddr *sa);

void c10d_allow_free(struct c10d_allow *a);

#endif
