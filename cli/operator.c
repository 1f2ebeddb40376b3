/* operator.c -- what an operator asks: `lockctl ls [PREFIX]` (who holds
 * what, every page of GET /v1/locks), `lockctl watch NAME` (one line per
 * change of a lock, from GET ?watch_ms=&after=) and `release --force`
 * (commands.c sends it; the path is made here). */
#include "cli/answer.h"
#include "cli/commands.h"
#include "cli/ctl.h"
#include "cli/http.h"
#include "common/alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WATCH_MS 60000 /* one blocking query; the gateway allows 600000 */

/* One line a held name: NAME MODE HOLDERS WAITERS, holders as
 * owner(fence,ttl). */
static void print_lock(const cJSON *e) {
    const cJSON *holders = cJSON_GetObjectItemCaseSensitive(e, "holders"), *h;
    printf("%-32s %-9s", jstr(e, "name") ? jstr(e, "name") : "?",
           jstr(e, "mode") ? jstr(e, "mode") : "?");
    cJSON_ArrayForEach(h, holders) {
        const char *owner = jstr(h, "owner");
        printf(" %s(fence %lld, %lld ms left)", owner ? owner : "-", jint(h, "fence", 0),
               jint(h, "ttl_ms", 0));
    }
    long long waiting = jint(e, "fair_waiters", 0);
    if (waiting) printf(" +%lld waiting", waiting);
    putchar('\n');
}

int cmd_ls(struct opts *o) {
    char cursor[512] = ""; /* the gateway's are at most 332 characters */
    int rc = CTL_EXIT_OK;
    do {
        char path[1024];
        snprintf(path, sizeof path, "/v1/locks?prefix=%s&limit=500&cursor=%s",
                 o->name ? o->name : "", cursor);
        struct call c;
        call_start(&c, "GET", path, NULL, NULL, CTL_REQUEST_MS);
        if (call_finish(&c)) {
            call_free(&c);
            return CTL_EXIT_OK;
        }
        if (call_outcome(&c) != OUT_OK) {
            rc = call_report(&c, "ls");
            call_free(&c);
            return rc;
        }
        const cJSON *locks = cJSON_GetObjectItemCaseSensitive(c.json, "locks"), *e;
        cJSON_ArrayForEach(e, locks) {
            if (o->quiet)
                puts(jstr(e, "name") ? jstr(e, "name") : "?");
            else
                print_lock(e);
        }
        const char *next = jstr(c.json, "cursor");
        snprintf(cursor, sizeof cursor, "%s", next ? next : "");
        call_free(&c);
    } while (cursor[0]);
    return rc;
}

/* Prints the state once and then each change, one JSON object a line (the
 * GET answer, or {"name":..., "holders":0} when nobody holds it), until a
 * signal stops it or the gateway fails. */
int cmd_watch(struct opts *o) {
    long long index = -1; /* nothing seen yet: the first answer comes at once */
    for (;;) {
        char path[512];
        if (index < 0)
            snprintf(path, sizeof path, "/v1/locks/%s", o->name);
        else
            snprintf(path, sizeof path, "/v1/locks/%s?watch_ms=%d&after=%lld", o->name, WATCH_MS,
                     index);
        struct call c;
        call_start(&c, "GET", path, NULL, NULL, WATCH_MS + CTL_REQUEST_MS);
        if (call_finish(&c)) {
            call_free(&c);
            return CTL_EXIT_OK;
        }
        enum outcome out = call_outcome(&c);
        long long now = -1;
        /* The index the gateway watches by (Lockgate-Index: one holder's
         * fence, the sum of a shared lock's holders' fences). */
        if (out == OUT_OK || out == OUT_GONE) {
            now = call_header_int(&c, "Lockgate-Index", -1);
            if (now < 0) now = out == OUT_OK ? jint(c.json, "fence", 0) : 0;
        } else {
            char what[256];
            snprintf(what, sizeof what, "watch '%s'", o->name);
            int rc = call_report(&c, what);
            call_free(&c);
            return rc;
        }
        if (now != index && !o->quiet) {
            if (out == OUT_OK)
                print_body(&c);
            else
                printf("{\"name\":\"%s\",\"holders\":0}\n", o->name);
            fflush(stdout);
        }
        index = now;
        call_free(&c);
    }
}

void force_path(char *out, size_t cap, const char *name) {
    snprintf(out, cap, "/v1/locks/%s?force=true", name);
}
