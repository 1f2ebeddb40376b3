/* delivery.h -- did the client's TCP take the answer we wrote?
 *
 * A client that sends its request and closes its socket (it hung up) and
 * one that only shuts its sending side (a half-close, `nc -N`) look the same
 * to the server until it writes: both sent a FIN.  The difference shows
 * after the answer is written: the half-closed client's TCP acknowledges
 * the bytes, the closed one's answers them with a reset.  So an answer
 * that grants a hold, written after the client's FIN, is watched here until
 * one of the two happens.  Only a reset counts as "not delivered": bytes
 * still unacknowledged when the watch ends (a lost network, no reset) are
 * taken as delivered, since giving back a lock its client may hold would
 * break mutual exclusion, and the lease bounds a ghost anyway. */
#ifndef LOCKGATE_DELIVERY_H
#define LOCKGATE_DELIVERY_H

/* How long a watch waits for an acknowledgement or a reset. */
#define DELIVERY_WATCH_MS 3000

/* 1 when the peer of socket fd has sent its FIN (or reset): it may have
 * half-closed or hung up.  Checked without blocking. */
int delivery_peer_shut(int fd);

/* Watches socket fd (duplicated here, so the caller may close it) on the
 * calling thread's loop and calls fn(arg, delivered) once, on that thread
 * (at once when the loop has stopped, with delivered = 1). */
void delivery_watch(int fd, void (*fn)(void *arg, int delivered), void *arg);

#endif
