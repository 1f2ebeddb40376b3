/* test_cli_sse.c -- lockctl's Server-Sent Events reader (cli/sse.c): whole
 * events out of bytes that arrive in any pieces, heartbeats skipped and
 * dropped, fields read as the SSE rules say. */
#include "cli/sse.h"
#include "tests/check.h"

#include <stdlib.h>
#include <string.h>

/* A call whose body is text, as http.c leaves it (malloc'd, NUL-ended). */
static void body(struct call *c, const char *text) {
    memset(c, 0, sizeof *c);
    c->len = strlen(text);
    c->cap = c->len + 1;
    c->body = malloc(c->cap);
    memcpy(c->body, text, c->cap);
}

static void test_events_and_heartbeats(void) {
    struct call c;
    body(&c, ":\n:\nevent: waiting\ndata: {\"state\":\"held\"}\n\n:\nevent: granted\n"
             "data: {\"fence\":7}\n\n:\n");
    struct sse_event ev;
    CHECK_EQ_INT(sse_next(&c, &ev), 1);
    CHECK_EQ_STR(ev.name, "waiting");
    CHECK_EQ_STR(ev.data, "{\"state\":\"held\"}");
    sse_event_free(&ev);
    CHECK_EQ_INT(sse_next(&c, &ev), 1);
    CHECK_EQ_STR(ev.name, "granted");
    CHECK_EQ_STR(ev.data, "{\"fence\":7}");
    sse_event_free(&ev);
    CHECK_EQ_INT(sse_next(&c, &ev), 0);
    CHECK_EQ_INT(c.len, 0); /* the heartbeat after it is dropped: a long hold costs nothing */
    free(c.body);
}

static void test_pieces(void) {
    const char *text = "event: lost\ndata: {\"reason\":\"released: x\"}\n\n";
    size_t n = strlen(text);
    /* Every cut: nothing before the blank line, the whole event after it. */
    for (size_t cut = 0; cut < n; cut++) {
        struct sse_event ev;
        size_t used = 99;
        CHECK_EQ_INT(sse_parse(text, cut, &ev, &used), 0);
        CHECK_EQ_INT(used, 0);
        CHECK(ev.data == NULL);
    }
    struct sse_event ev;
    size_t used = 0;
    CHECK_EQ_INT(sse_parse(text, n, &ev, &used), 1);
    CHECK_EQ_INT(used, n);
    CHECK_EQ_STR(ev.name, "lost");
    CHECK_EQ_STR(ev.data, "{\"reason\":\"released: x\"}");
    sse_event_free(&ev);
}

static void test_fields(void) {
    struct sse_event ev;
    size_t used;
    /* No event field: "message"; data lines joined; no space after the
     * colon; CRLF; id and unknown fields skipped; a comment inside. */
    const char *text = "id: 4\r\ndata:a\r\n: note\r\nfoo: bar\r\ndata: b\r\n\r\n";
    CHECK_EQ_INT(sse_parse(text, strlen(text), &ev, &used), 1);
    CHECK_EQ_STR(ev.name, "message");
    CHECK_EQ_STR(ev.data, "a\nb");
    CHECK_EQ_INT(used, strlen(text));
    sse_event_free(&ev);
    /* An event with no data: data is "", never NULL. */
    text = "event: ping\n\n";
    CHECK_EQ_INT(sse_parse(text, strlen(text), &ev, &used), 1);
    CHECK_EQ_STR(ev.name, "ping");
    CHECK_EQ_STR(ev.data, "");
    sse_event_free(&ev);
    /* A name too long is cut, not overflowed. */
    char longname[128] = "event: ";
    memset(longname + 7, 'x', 100);
    strcpy(longname + 107, "\ndata: 1\n\n");
    CHECK_EQ_INT(sse_parse(longname, strlen(longname), &ev, &used), 1);
    CHECK_EQ_INT(strlen(ev.name), sizeof ev.name - 1);
    sse_event_free(&ev);
}

int main(int argc, char **argv) {
    check_filter(argc > 1 ? argv[1] : NULL);
    RUN_SOME(test_events_and_heartbeats);
    RUN_SOME(test_pieces);
    RUN_SOME(test_fields);
    return check_summary("cli_sse");
}
