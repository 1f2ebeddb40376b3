/* conns.c -- see conns.h. */
#include "server/conns.h"
#include "common/alloc.h"

#include <stdlib.h>
#include <sys/socket.h>

void conns_init(struct conn_set *s, int header_ms, int body_ms, int next_ms, int throttled_ms) {
    *s = (struct conn_set){
        .timeout_ms = {[CONN_HEADERS] = header_ms,
                       [CONN_BODY] = body_ms,
                       [CONN_NEXT] = next_ms,
                       [CONN_THROTTLED] = throttled_ms}
    };
}

static void unlink_conn(struct conn_set *s, struct conn *c) {
    if (c->phase == CONN_HANDLING) return;
    if (c->prev)
        c->prev->next = c->next;
    else
        s->head[c->phase] = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        s->tail[c->phase] = c->prev;
    c->prev = c->next = NULL;
    c->phase = CONN_HANDLING;
}

void conns_enter(struct conn_set *s, struct conn *c, enum conn_phase phase, int64_t now_ms) {
    unlink_conn(s, c);
    if (phase == CONN_HANDLING) return;
    c->phase = phase;
    c->due_ms = now_ms + s->timeout_ms[phase];
    c->prev = s->tail[phase];
    if (c->prev)
        c->prev->next = c;
    else
        s->head[phase] = c;
    s->tail[phase] = c;
}

struct conn *conns_start(struct conn_set *s, int fd, void *tls, int64_t now_ms) {
    struct conn *c = alloc_check(calloc(1, sizeof *c));
    c->tls = tls;
    c->fd = fd;
    c->phase = CONN_HANDLING;
    conns_enter(s, c, CONN_HEADERS, now_ms);
    return c;
}

void conns_forget(struct conn_set *s, struct conn *c) { unlink_conn(s, c); }

int conns_sweep(struct conn_set *s, int64_t now_ms, int64_t *next_ms) {
    int n = 0;
    *next_ms = INT64_MAX;
    for (int p = 0; p < CONN_THROTTLED; p++) {
        struct conn *c;
        while ((c = s->head[p]) && c->due_ms <= now_ms) {
            unlink_conn(s, c);
            /* libmicrohttpd reads the end of the stream and closes it;
             * its close notification then frees c. */
            shutdown(c->fd, SHUT_RDWR);
            n++;
        }
        if (c && c->due_ms < *next_ms) *next_ms = c->due_ms;
    }
    return n;
}
