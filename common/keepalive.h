/* A silent peer found lost in seconds: TCP keepalive and TCP_USER_TIMEOUT on a long-lived
 * connection. A host that powers off, a dead switch port or a one-way firewall sends no FIN and
 * no RST; without these a connection with nothing to send (a watch, a long poll) stays open for
 * as long as the peer is gone. Both ends of the agent's connections to musterd use it (musterd:
 * every connection either listener accepts), and so do the etcd v3 client's connections
 * (docs/agent.md: "A silent host").
 */
#ifndef MU_COMMON_KEEPALIVE_H
#define MU_COMMON_KEEPALIVE_H

/* The default: a connection whose peer has not answered for 2 s is dropped. */
#define MU_NET_TIMEOUT_MS_DEFAULT 2000

/* The timeout in ms: $MUSTER_NET_TIMEOUT_MS when it is a number from 0 to 3600000 (0: off,
 * the kernel's defaults), else MU_NET_TIMEOUT_MS_DEFAULT. Read once. */
long mu_net_timeout_ms(void);

/* Sets keepalive (first probe after half the timeout, at least 1 s, then one a second or every
 * half timeout) and TCP_USER_TIMEOUT (the timeout: unacknowledged data or probes for that long
 * drop the connection) on TCP socket fd. Errors are ignored: the connection still works, only
 * slower to notice a lost peer. */
void mu_net_keepalive(int fd);

#endif
