/* observe.c -- `lockctl observe NAME`: the election's leader, then every
 * change of leader or value, one JSON object a line, from the gateway's
 * event stream (GET /v1/elections/NAME, Accept: text/event-stream), until
 * a signal stops it or the stream ends. */
#include "cli/observe.h"
#include "cli/answer.h"
#include "cli/ctl.h"
#include "cli/http.h"
#include "cli/signals.h"
#include "cli/sse.h"

#include <stdio.h>
#include <string.h>

/* Prints the data of each whole event that has come (comment lines are
 * heartbeats). */
static void print_events(struct call *c, int quiet) {
    struct sse_event ev;
    while (sse_next(c, &ev)) {
        if (!quiet) printf("%s\n", ev.data);
        sse_event_free(&ev);
    }
    fflush(stdout);
}

int cmd_observe(struct opts *o) {
    char path[512];
    snprintf(path, sizeof path, "/v1/elections/%s", o->name);
    if (signals_install() < 0) return CTL_EXIT_INTERNAL;
    struct call c;
    call_start_as(&c, "GET", path, NULL, NULL, -1, "text/event-stream");
    while (!c.done) {
        http_wait(1000);
        if (sig_take_stop()) {
            call_free(&c);
            return CTL_EXIT_OK;
        }
        if (call_status_now(&c) == 200) print_events(&c, o->quiet);
    }
    if (c.status == 200) print_events(&c, o->quiet);
    char what[256];
    snprintf(what, sizeof what, "observe '%s'", o->name);
    int rc = c.status == 200 ? CTL_EXIT_UNAVAILABLE : call_report(&c, what);
    if (c.status == 200) ctl_say("observe '%s': the gateway ended the stream", o->name);
    call_free(&c);
    return rc;
}
