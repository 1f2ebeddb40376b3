/* conns.h -- what the gateway keeps for each HTTP connection of a worker
 * (its socket context in libmicrohttpd): its hold on a TLS pair, and the
 * deadlines that cut slow clients off.
 *
 * libmicrohttpd's own timeout counts inactivity only: a client sending a
 * header byte a second kept its connection for ever (slowloris).  Here a
 * connection must have sent its whole request line and headers within
 * --header-timeout-ms of being accepted (of the previous answer, for the
 * next request on a kept-alive connection: the connection's idle timeout),
 * and its body within --body-timeout-ms of its headers.  Past a deadline
 * the socket is shut down; libmicrohttpd then sees the end of the stream
 * and closes it as if the client had.  A request being handled or waiting
 * (wait_ms) has no deadline here.
 *
 * Each deadline kind keeps a list in the order the deadlines were set,
 * which is the order they fall due (one timeout per kind), so a sweep
 * looks at list heads only: O(1) per turn when nothing is due. */
#ifndef LOCKGATE_CONNS_H
#define LOCKGATE_CONNS_H

#include <stdint.h>

/* The deadline a connection is under. */
enum conn_phase {
    CONN_HEADERS,               /* its first request's line and headers */
    CONN_BODY,                  /* its request's body */
    CONN_NEXT,                  /* the next request on a kept-alive connection */
    CONN_THROTTLED,             /* suspended until its client reads its answers
                                   (http.c resumes it, or ends it at the
                                   deadline; the sweep leaves it alone) */
    CONN_PHASES,                /* (count) */
    CONN_HANDLING = CONN_PHASES /* none: a request is being handled */
};

struct conn {
    void *tls; /* tls_connection_started's; first, see tls.h */
    void *mhd; /* its struct MHD_Connection (http.c's) */
    union {
        void *held;   /* its request, while throttled (http.c's) */
        void *stream; /* its stream once detached from its request (http.c's
                         http_stream_detach): never while throttled */
    };
    int fd;                   /* its socket */
    enum conn_phase phase;    /* the deadline it is under */
    int64_t due_ms;           /* that deadline */
    struct conn *prev, *next; /* in its phase's list */
};

/* One worker's connections under a deadline. */
struct conn_set {
    struct conn *head[CONN_PHASES]; /* earliest due first */
    struct conn *tail[CONN_PHASES]; /* latest due */
    int timeout_ms[CONN_PHASES];    /* how long each phase may last */
};

/* Sets the phases' timeouts. */
void conns_init(struct conn_set *s, int header_ms, int body_ms, int next_ms, int throttled_ms);

/* A connection accepted now on fd, under its header deadline; tls is
 * tls_connection_started's result. */
struct conn *conns_start(struct conn_set *s, int fd, void *tls, int64_t now_ms);

/* Moves c to phase (CONN_HANDLING: out of every list), due timeout_ms
 * from now. */
void conns_enter(struct conn_set *s, struct conn *c, enum conn_phase phase, int64_t now_ms);

/* Takes c out of its list; the caller frees it. */
void conns_forget(struct conn_set *s, struct conn *c);

/* Shuts down every connection whose deadline has passed (but throttled
 * ones) and takes it out of its list; returns how many.  *next_ms: the earliest deadline left
 * (INT64_MAX when none). */
int conns_sweep(struct conn_set *s, int64_t now_ms, int64_t *next_ms);

#endif
