/* session_ref.c -- see session_ref.h. */
#include "handlers/session_ref.h"
#include "common/alloc.h"
#include "common/token.h"
#include "handlers/handlers.h"
#include "server/body.h"
#include "server/http.h"
#include "server/reply.h"

#include <stdio.h>
#include <string.h>

void session_key(const char *token, char *out, size_t cap) {
    snprintf(out, cap, "%ssession:{%s}", handlers_config()->key_prefix, token);
}

int session_header_or_reply(struct gw_request *req, char **out) {
    const char *tok = http_header(req, "Session");
    *out = NULL;
    if (!tok) return GW_OK;
    if (!token_valid(tok)) {
        reply_problem(req, CODE_INVALID_TOKEN,
                      "a Session token is %d-%d characters of [A-Za-z0-9_-]", TOKEN_MIN_LEN,
                      TOKEN_MAX_LEN);
        return GW_REPLIED;
    }
    *out = alloc_copy(tok, strlen(tok));
    return GW_OK;
}
