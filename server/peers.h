/* peers.h -- --max-connections-per-ip across every worker.
 *
 * Each worker has its own libmicrohttpd daemon on its own SO_REUSEPORT
 * socket, and the kernel spreads one client's connections over them, so
 * libmicrohttpd's own per-IP limit (per daemon) would let a client hold
 * the limit once per worker.  This counts open connections per address for
 * the whole gateway instead: a connection is admitted (and counted) at
 * accept, and uncounted when libmicrohttpd closes it.  Only accepts and
 * closes take its lock; requests never do. */
#ifndef LOCKGATE_PEERS_H
#define LOCKGATE_PEERS_H

#include <sys/socket.h>

/* The limit (0: unlimited, the functions below are then never needed). */
void peers_init(int limit);

/* 1 and counted when addr has fewer than the limit open, else 0. */
int peers_admit(const struct sockaddr *addr, socklen_t len);

/* One connection from addr closed. */
void peers_leave(const struct sockaddr *addr);

#endif
