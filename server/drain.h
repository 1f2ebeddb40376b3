/* drain.h -- the end of a connection whose request body was refused
 * unread (413): the answer is followed by our FIN, and what the client is
 * still sending is read and thrown away, up to a bound, before the socket
 * is closed.
 *
 * Why: closing a socket with unread data in it makes the kernel send a
 * reset, which can destroy the answer in flight, and a proxy still writing
 * the body gets EPIPE and answers its client 502 (nginx) or nothing
 * (HAProxy) instead of the 413.  Read to the end (or the bound), the close
 * is an orderly one. */
#ifndef LOCKGATE_DRAIN_H
#define LOCKGATE_DRAIN_H

#define DRAIN_MAX_BYTES (1024 * 1024) /* read and thrown away at most */
#define DRAIN_MAX_MS    5000          /* for at most this long */

/* Takes over a duplicate of fd (the caller's stays its own to close):
 * shuts its writing side once what was written has gone, then reads and
 * discards until the client's FIN, DRAIN_MAX_BYTES or DRAIN_MAX_MS, and
 * closes.  On the calling thread's loop; without one, closes at once. */
void drain_start(int fd);


#endif
