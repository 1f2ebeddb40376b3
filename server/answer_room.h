/* answer_room.h -- whether a request left room for its answer's headers
 * in libmicrohttpd's per-connection buffer.
 *
 * libmicrohttpd 0.9.75 keeps one pool per connection
 * (--connection-memory-kib): the request line and header fields are read
 * into its front and stay there, parsed in place; each field (header,
 * query argument, cookie) takes a record from its back; what is left in
 * between is where the answer's status line and headers are written when
 * the answer goes out.  It answers 431 itself only when the request does
 * not fit at all; a request that fits with too little left for its
 * answer's headers was read, handled, and then closed unanswered ("failed
 * to create response header").  The gateway asks here first, before any
 * work, and answers 431 (http.c). */
#ifndef LOCKGATE_ANSWER_ROOM_H
#define LOCKGATE_ANSWER_ROOM_H

#include <stddef.h>

struct MHD_Connection;

/* The pool's size in bytes (--connection-memory-kib); set once at start. */
void answer_room_init(size_t pool_bytes);

/* 1 when the request on conn (its path: url) leaves fewer bytes of the
 * pool than the largest answer to it needs; *left and *need say how many.
 * Call when the headers are in (the access handler's first call). */
int answer_room_short(struct MHD_Connection *conn, const char *url, size_t *left, size_t *need);

#endif
