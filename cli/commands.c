/* commands.c -- the one-shot commands: acquire, extend, release, status,
 * id.  Each sends one request (acquire: until granted or the wait is over)
 * and prints the answer. */
#include "cli/commands.h"
#include "cli/answer.h"
#include "cli/ctl.h"
#include "cli/requests.h"
#include "common/alloc.h"
#include "common/token.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cmd_acquire(struct opts *o) {
    if (o->token && !token_valid(o->token))
        return usage_error("acquire", "a token is 22-128 characters of A-Z a-z 0-9 _ -");
    struct call c;
    long long retry_after = 0;
    char what[256];
    snprintf(what, sizeof what, "acquire '%s'", o->name);
    int out = acquire_loop(o, o->token, &c, &retry_after, wait_deadline(o->wait));
    int rc = CTL_EXIT_OK;
    if (out == OUT_OK) {
        if (o->quiet) {
            const char *t = jstr(c.json, "token");
            if (!t) {
                ctl_say("%s: the gateway's answer has no token", what);
                rc = CTL_EXIT_INTERNAL;
            } else {
                puts(t);
            }
        } else {
            print_body(&c);
        }
    } else if (out == OUT_BUSY) {
        say_busy(o->name, retry_after);
        rc = CTL_EXIT_BUSY;
    } else {
        rc = call_report(&c, what);
    }
    call_free(&c);
    return rc;
}

/* extend, release, status: one request, the answer printed. */
static int one_request(struct opts *o, const char *method, const char *token, cJSON *body) {
    char path[256], what[256];
    lock_path(path, sizeof path, o->name);
    snprintf(what, sizeof what, "%s '%s'", o->cmd, o->name);
    struct call c;
    call_start(&c, method, path, token, body, CTL_REQUEST_MS);
    call_finish(&c);
    int rc = CTL_EXIT_OK;
    if (call_outcome(&c) == OUT_OK) {
        if (!o->quiet) print_body(&c);
    } else if (strcmp(o->cmd, "status") == 0 && c.status == 404 && call_outcome(&c) == OUT_GONE) {
        if (!o->quiet) ctl_say("lock '%s' is not held", o->name);
        rc = CTL_EXIT_NOT_HELD;
    } else {
        rc = call_report(&c, what);
    }
    call_free(&c);
    return rc;
}

static const char *token_arg(struct opts *o, int *rc) {
    const char *t = o->token ? o->token : getenv("LOCKGATE_TOKEN");
    if (!t || !*t) {
        *rc = usage_error(o->cmd, "no token: give --token or set LOCKGATE_TOKEN");
        return NULL;
    }
    if (!token_valid(t)) {
        *rc = usage_error(o->cmd, "a token is 22-128 characters of A-Z a-z 0-9 _ -");
        return NULL;
    }
    return t;
}

int cmd_extend(struct opts *o) {
    int rc = 0;
    const char *t = token_arg(o, &rc);
    if (!t) return rc;
    cJSON *b = NULL;
    if (o->ttl >= 0) {
        b = alloc_check(cJSON_CreateObject());
        add_int(b, "ttl_ms", o->ttl);
    }
    return one_request(o, "PATCH", t, b);
}

int cmd_release(struct opts *o) {
    int rc = 0;
    if (o->force) {
        if (o->token) return usage_error("release", "--force takes no token: it ends every hold");
        char path[256];
        force_path(path, sizeof path, o->name);
        struct call c;
        call_start(&c, "DELETE", path, NULL, NULL, CTL_REQUEST_MS);
        call_finish(&c);
        if (call_outcome(&c) == OUT_OK) {
            if (!o->quiet) print_body(&c);
        } else {
            char what[256];
            snprintf(what, sizeof what, "release --force '%s'", o->name);
            rc = call_report(&c, what);
        }
        call_free(&c);
        return rc;
    }
    const char *t = token_arg(o, &rc);
    return t ? one_request(o, "DELETE", t, NULL) : rc;
}

int cmd_status(struct opts *o) { return one_request(o, "GET", NULL, NULL); }

int cmd_id(struct opts *o) {
    char path[256], what[256];
    snprintf(path, sizeof path, "/v1/ids/%s?count=%lld", o->name, o->count);
    snprintf(what, sizeof what, "id '%s'", o->name);
    struct call c;
    call_start(&c, "POST", path, NULL, NULL, CTL_REQUEST_MS);
    call_finish(&c);
    int rc = CTL_EXIT_OK;
    const cJSON *ids = cJSON_GetObjectItemCaseSensitive(c.json, "ids");
    if (call_outcome(&c) != OUT_OK) {
        const char *code = jstr(c.json, "code");
        if (c.status == 404 && (!code || strcmp(code, "not_found") == 0)) {
            ctl_say("%s: the gateway at %s does not serve /v1/ids (HTTP 404)", what, ctl_url);
            rc = CTL_EXIT_REFUSED;
        } else {
            rc = call_report(&c, what);
        }
    } else if (!cJSON_IsArray(ids)) {
        ctl_say("%s: the gateway's answer has no ids", what);
        rc = CTL_EXIT_INTERNAL;
    } else {
        const cJSON *id;
        cJSON_ArrayForEach(id, ids) {
            if (cJSON_IsString(id)) {
                puts(id->valuestring);
            } else {
                char *s = alloc_check(cJSON_PrintUnformatted(id));
                puts(s);
                cJSON_free(s);
            }
        }
    }
    call_free(&c);
    return rc;
}
