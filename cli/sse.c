/* sse.c -- see sse.h.  The gateway writes "event: NAME\ndata: JSON\n\n"
 * and heartbeat comment lines (":\n") between events; a stream is read in
 * whatever pieces TCP delivered, so an event is only taken once its blank
 * line has come. */
#include "cli/sse.h"
#include "common/alloc.h"

#include <stdlib.h>
#include <string.h>

/* The value of field `name` on line [p, end), or NULL when the line is
 * another field.  "name:value" and "name: value" are the same. */
static const char *field(const char *p, const char *end, const char *name, size_t *vlen) {
    size_t n = strlen(name);
    if ((size_t)(end - p) < n + 1 || memcmp(p, name, n) != 0 || p[n] != ':') return NULL;
    p += n + 1;
    if (p < end && *p == ' ') p++;
    *vlen = (size_t)(end - p);
    return p;
}

int sse_parse(const char *buf, size_t len, struct sse_event *ev, size_t *used) {
    memset(ev, 0, sizeof *ev);
    *used = 0;
    size_t data_len = 0;
    int fields = 0; /* lines of this event seen so far */
    char *data = NULL;
    for (size_t at = 0; at < len;) {
        const char *line = buf + at, *nl = memchr(line, '\n', len - at);
        if (!nl) break;
        const char *end = nl > line && nl[-1] == '\r' ? nl - 1 : nl;
        size_t next = (size_t)(nl - buf) + 1, vlen = 0;
        const char *v;
        if (end == line) { /* a blank line ends the event */
            *used = next;
            if (!fields) {
                at = next;
                continue;
            }
            if (!ev->name[0]) strcpy(ev->name, "message");
            ev->data = data ? data : alloc_check(calloc(1, 1));
            return 1;
        }
        if (*line == ':') {
            if (!fields) *used = next; /* a heartbeat between events */
        } else if ((v = field(line, end, "event", &vlen))) {
            size_t n = vlen < sizeof ev->name - 1 ? vlen : sizeof ev->name - 1;
            memcpy(ev->name, v, n);
            ev->name[n] = '\0';
            fields++;
        } else if ((v = field(line, end, "data", &vlen))) {
            data = alloc_check(realloc(data, data_len + vlen + 2));
            if (data_len) data[data_len++] = '\n';
            memcpy(data + data_len, v, vlen);
            data_len += vlen;
            data[data_len] = '\0';
            fields++;
        } else {
            fields++; /* id:, retry: or unknown: part of the event, not kept */
        }
        at = next;
    }
    free(data);
    memset(ev, 0, sizeof *ev);
    return 0;
}

int sse_next(struct call *c, struct sse_event *ev) {
    if (!c->body || !c->len) return 0;
    size_t used = 0;
    int got = sse_parse(c->body, c->len, ev, &used);
    if (used) {
        memmove(c->body, c->body + used, c->len - used);
        c->len -= used;
        c->body[c->len] = '\0';
    }
    return got;
}

void sse_event_free(struct sse_event *ev) {
    free(ev->data);
    ev->data = NULL;
}
