/* fuzz.h -- what the libFuzzer harnesses share (tests/fuzz/README.md):
 * the input as a NUL-terminated copy, and a request without a connection
 * (reply_* then completes it in place, as in tests/unit/test_body.c). */
#ifndef LOCKGATE_FUZZ_H
#define LOCKGATE_FUZZ_H

#include "server/http.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A malloc'd copy of data with a NUL after it; the caller frees it. */
static inline char *fuzz_cstr(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1);
    if (!s) abort();
    memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

static inline struct gw_request *fuzz_request(const uint8_t *body, size_t len) {
    struct gw_request *req = calloc(1, sizeof *req);
    if (!req) abort();
    req->route = -1;
    if (len) {
        req->body = fuzz_cstr(body, len);
        req->body_len = (uint32_t)len; /* libFuzzer's inputs are far below 4 GiB */
    }
    return req;
}

static inline void fuzz_request_free(struct gw_request *req) {
    for (int i = 0; i < req->nheaders; i++) free(req->headers[i].value);
    free(req->headers);
    cJSON_Delete(req->json);
    free(req->body);
    free(req->resp);
    free(req->name);
    free(req->token);
    free(req->key_id);
    free(req);
}

#endif
