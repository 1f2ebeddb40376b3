/* answer.c -- reading the gateway's answers: what a call's status and code
 * mean for lockctl (enum outcome), its fields, and the one-line error
 * reports with the exit status each means. */
#include "cli/answer.h"
#include "cli/ctl.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

const char *jstr(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

long long jint(const cJSON *o, const char *key, long long dflt) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? (long long)v->valuedouble : dflt;
}

/* A number member copied from the raw body as digits: fences may pass 2^53,
 * which a double (cJSON's number) does not hold exactly.  The gateway's
 * bodies put no key inside a string unescaped, so the first match is it. */
int raw_int(const char *body, const char *key, char *out, size_t cap) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\"", key);
    const char *p = body ? strstr(body, pat) : NULL;
    if (!p) return -1;
    p += strlen(pat);
    while (*p == ' ' || *p == ':') p++;
    size_t n = 0;
    while (isdigit((unsigned char)p[n]) && n + 1 < cap) {
        out[n] = p[n];
        n++;
    }
    out[n] = '\0';
    return n ? 0 : -1;
}

enum outcome call_outcome(const struct call *c) {
    if (c->rc != CURLE_OK || c->status == 0) return OUT_DOWN;
    if (c->status >= 200 && c->status < 300) return OUT_OK;
    const char *code = jstr(c->json, "code");
    code = code ? code : "";
    if (c->status == 409 && strcmp(code, "lock_busy") == 0) return OUT_BUSY;
    if ((c->status == 404 && strcmp(code, "not_held") == 0) ||
        (c->status == 409 && strcmp(code, "not_owner") == 0))
        return OUT_GONE;
    if ((c->status >= 500 && c->status != 501) || c->status == 429) return OUT_DOWN;
    return OUT_REFUSED;
}

void call_why(const struct call *c, char *out, size_t cap) {
    if (c->rc != CURLE_OK) {
        if (c->rc == CURLE_OPERATION_TIMEDOUT)
            snprintf(out, cap, "the gateway at %.300s did not answer in time", ctl_url);
        else
            snprintf(out, cap, "cannot reach the gateway at %.300s: %.300s", ctl_url,
                     c->err[0] ? c->err : curl_easy_strerror(c->rc));
        return;
    }
    const char *detail = jstr(c->json, "detail"), *code = jstr(c->json, "code");
    if (detail && code)
        snprintf(out, cap, "%s (%s)", detail, code);
    else if (code)
        snprintf(out, cap, "HTTP %ld (%s)", c->status, code);
    else
        snprintf(out, cap, "HTTP %ld from the gateway", c->status);
}

int call_report(const struct call *c, const char *what) {
    char why[768];
    call_why(c, why, sizeof why);
    switch (call_outcome(c)) {
    case OUT_DOWN:
        if (c->rc != CURLE_OK)
            ctl_say("%s", why);
        else
            ctl_say("%s: gateway error %ld: %s", what, c->status, why);
        return CTL_EXIT_UNAVAILABLE;
    case OUT_BUSY:
    case OUT_GONE:
    case OUT_REFUSED: ctl_say("%s: %s", what, why); return CTL_EXIT_REFUSED;
    case OUT_OK: break;
    }
    return CTL_EXIT_OK;
}

void print_body(const struct call *c) {
    fputs(c->body ? c->body : "", stdout);
    if (!c->len || c->body[c->len - 1] != '\n') putchar('\n');
}

void say_busy(const char *name, long long retry_after_ms) {
    long long s = retry_after_ms > 0 ? (retry_after_ms + 999) / 1000 : 1;
    ctl_say("lock '%s' is held by someone else (try again in %lld s)", name, s);
}
