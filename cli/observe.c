/* observe.c -- `lockctl observe NAME`: the election's leader, then every
 * change of leader or value, one JSON object a line, from the gateway's
 * event stream (GET /v1/elections/NAME, Accept: text/event-stream), until
 * a signal stops it or the stream ends. */
#include "cli/observe.h"
#include "cli/answer.h"
#include "cli/ctl.h"
#include "cli/http.h"
#include "cli/signals.h"

#include <stdio.h>
#include <string.h>

/* Prints the data of each whole event in c's body from *done on (an event
 * ends at a blank line; comment lines are heartbeats), moving *done. */
static void print_events(struct call *c, size_t *done, int quiet) {
    while (c->body && *done < c->len) {
        char *start = c->body + *done, *end = strstr(start, "\n\n");
        if (!end) return;
        *end = '\0';
        const char *data = strstr(start, "data: ");
        if (data && !quiet) printf("%s\n", data + 6);
        *end = '\n';
        *done = (size_t)(end - c->body) + 2;
    }
    fflush(stdout);
}

int cmd_observe(struct opts *o) {
    char path[512];
    snprintf(path, sizeof path, "/v1/elections/%s", o->name);
    if (signals_install() < 0) return CTL_EXIT_INTERNAL;
    struct call c;
    call_start_as(&c, "GET", path, NULL, NULL, -1, "text/event-stream");
    size_t done = 0;
    while (!c.done) {
        http_wait(1000);
        if (sig_take_stop()) {
            call_free(&c);
            return CTL_EXIT_OK;
        }
        long status = 0;
        curl_easy_getinfo(c.easy, CURLINFO_RESPONSE_CODE, &status);
        if (status == 200) print_events(&c, &done, o->quiet);
    }
    if (c.status == 200) print_events(&c, &done, o->quiet);
    char what[256];
    snprintf(what, sizeof what, "observe '%s'", o->name);
    int rc = c.status == 200 ? CTL_EXIT_UNAVAILABLE : call_report(&c, what);
    if (c.status == 200) ctl_say("observe '%s': the gateway ended the stream", o->name);
    call_free(&c);
    return rc;
}
