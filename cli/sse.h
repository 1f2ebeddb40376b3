/* sse.h -- Server-Sent Events as they arrive: whole events taken out of
 * the bytes a streaming call has received so far.  The parsing (sse_parse)
 * does no I/O; sse_next applies it to a call's body. */
#ifndef LOCKCTL_SSE_H
#define LOCKCTL_SSE_H

#include "cli/http.h"

#include <stddef.h>

/* One event of the stream. */
struct sse_event {
    char name[32]; /* its "event:" field, "message" when it had none */
    char *data;    /* its "data:" lines joined by "\n", NUL-terminated; owned, never NULL */
};

/* Parses the first whole event of buf[0..len).  Returns 1 with *ev filled
 * (free it with sse_event_free) and *used the bytes it took, or 0 with
 * *used the bytes that may be dropped all the same (blank and comment
 * lines before an event: heartbeats) when no whole event is there yet.
 * Lines end at "\n" (a "\r" before it is dropped); comment lines (":")
 * and fields other than event and data are skipped, as the SSE rules say. */
int sse_parse(const char *buf, size_t len, struct sse_event *ev, size_t *used);

/* Takes the next whole event out of a streaming call's body (c->body and
 * c->len shrink by what was read, so that a stream held for days costs no
 * memory).  Returns 1 with *ev filled, or 0. */
int sse_next(struct call *c, struct sse_event *ev);

void sse_event_free(struct sse_event *ev);

#endif
