/* body.c -- see body.h. */
#include "server/body.h"
#include "server/request.h"
#include "server/reply.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <string.h>

/* Strict UTF-8 (no overlongs, no surrogates, nothing past U+10FFFF) and no
 * NUL byte: JSON text is UTF-8, and a NUL would cut strings short in C. */
static int utf8_valid(const unsigned char *s, size_t len) {
    size_t i = 0;
    while (i < len) {
        unsigned char c = s[i];
        if (c == 0) return 0;
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t n;
        unsigned cp;
        if (c >= 0xC2 && c <= 0xDF) {
            n = 1;
            cp = c & 0x1F;
        } else if (c >= 0xE0 && c <= 0xEF) {
            n = 2;
            cp = c & 0x0F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            n = 3;
            cp = c & 0x07;
        } else
            return 0;
        if (i + n >= len) return 0;
        for (size_t k = 1; k <= n; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return 0;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10FFFF)) ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += n + 1;
    }
    return 1;
}

/* 1 when a JSON string holds the escape \u0000: cJSON would decode it to a
 * NUL byte and every C string after it would silently end there. */
static int has_escaped_nul(const char *s, size_t len) {
    int in_string = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '"') {
            in_string = !in_string;
        } else if (in_string && s[i] == '\\' && i + 1 < len) {
            if (s[i + 1] == 'u' && i + 5 < len && memcmp(s + i + 2, "0000", 4) == 0) return 1;
            i++; /* skip the escaped character, \" included */
        }
    }
    return 0;
}

int body_parse_or_reply(struct gw_request *req) {
    if (req->body_len > 0 && !utf8_valid((const unsigned char *)req->body, req->body_len)) {
        reply_problem(req, CODE_INVALID_JSON, "the body is not UTF-8 text");
        return GW_REPLIED;
    }
    if (has_escaped_nul(req->body, req->body_len)) {
        reply_problem(req, CODE_INVALID_JSON, "a string in the body holds \\u0000");
        return GW_REPLIED;
    }
    if (req->body_len == 0) {
        req->json = cJSON_CreateObject();
        return GW_OK;
    }
    const char *end = NULL;
    req->json = cJSON_ParseWithLengthOpts(req->body, req->body_len, &end, 0);
    if (!req->json) {
        reply_problem(req, CODE_INVALID_JSON, "the body is not valid JSON");
        return GW_REPLIED;
    }
    /* Only white space may follow the value. */
    for (; end && end < req->body + req->body_len; end++)
        if (!strchr(" \t\r\n", *end) || *end == '\0') {
            reply_problem(req, CODE_INVALID_JSON, "the body has data after the JSON value");
            return GW_REPLIED;
        }
    if (!cJSON_IsObject(req->json)) {
        reply_problem(req, CODE_INVALID_JSON, "the body must be a JSON object");
        return GW_REPLIED;
    }
    return GW_OK;
}

static cJSON *field_of(struct gw_request *req, const char *field) {
    cJSON *v = req->json ? cJSON_GetObjectItemCaseSensitive(req->json, field) : NULL;
    return cJSON_IsNull(v) ? NULL : v;
}

int body_int_or_reply(struct gw_request *req, const char *field, long long def, long long lo,
                      long long hi, long long *out, int *present) {
    cJSON *v = field_of(req, field);
    if (present) *present = v != NULL;
    if (!v) {
        *out = def;
        return GW_OK;
    }
    double d = v->valuedouble;
    if (!cJSON_IsNumber(v) || d != floor(d) || d < (double)lo || d > (double)hi) {
        reply_problem(req, CODE_INVALID_FIELD, "%s must be an integer from %lld to %lld", field, lo,
                      hi);
        return GW_REPLIED;
    }
    *out = (long long)d;
    return GW_OK;
}

int body_bool_or_reply(struct gw_request *req, const char *field, int def, int *out) {
    cJSON *v = field_of(req, field);
    if (!v) {
        *out = def;
        return GW_OK;
    }
    if (!cJSON_IsBool(v)) {
        reply_problem(req, CODE_INVALID_FIELD, "%s must be true or false", field);
        return GW_REPLIED;
    }
    *out = cJSON_IsTrue(v);
    return GW_OK;
}

int body_string_or_reply(struct gw_request *req, const char *field, size_t maxlen,
                         const char **out) {
    cJSON *v = field_of(req, field);
    *out = NULL;
    if (!v) return GW_OK;
    if (!cJSON_IsString(v) || strlen(v->valuestring) > maxlen) {
        reply_problem(req, CODE_INVALID_FIELD, "%s must be a string of at most %zu bytes", field,
                      maxlen);
        return GW_REPLIED;
    }
    *out = v->valuestring;
    return GW_OK;
}
