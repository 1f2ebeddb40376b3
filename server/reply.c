/* reply.c -- see reply.h.  Exactly one function builds error bodies
 * (problem_body), from one table of codes. */
#include "server/reply.h"
#include "common/alloc.h"
#include "server/request.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct problem_info problems[CODE_COUNT] = {
    [CODE_INVALID_NAME] = {"invalid_name",        400, "Invalid name"                    },
    [CODE_INVALID_FIELD] = {"invalid_field",       400, "Invalid field"                   },
    [CODE_INVALID_JSON] = {"invalid_json",        400, "Body is not a JSON object"       },
    [CODE_INVALID_ID] = {"invalid_id",          400, "Invalid id"                      },
    [CODE_INVALID_TOKEN] = {"invalid_token",       400, "Invalid Lock-Token"              },
    [CODE_MISSING_TOKEN] = {"missing_token",       400, "Lock-Token header required"      },
    [CODE_LOCK_BUSY] = {"lock_busy",           409, "Lock is busy"                    },
    [CODE_MODE_MISMATCH] = {"mode_mismatch",       409, "Held in the other mode"          },
    [CODE_LIMIT_MISMATCH] = {"limit_mismatch",      409, "Semaphore limit differs"         },
    [CODE_NOT_HELD] = {"not_held",            404, "Not held"                        },
    [CODE_NOT_OWNER] = {"not_owner",           409, "Held by another token"           },
    [CODE_NOT_FOUND] = {"not_found",           404, "Not found"                       },
    [CODE_METHOD_NOT_ALLOWED] = {"method_not_allowed",  405, "Method not allowed"              },
    [CODE_PAYLOAD_TOO_LARGE] = {"payload_too_large",   413, "Payload too large"               },
    [CODE_BACKEND_UNAVAILABLE] = {"backend_unavailable", 503, "Backend unavailable"             },
    [CODE_SHUTTING_DOWN] = {"shutting_down",       503, "Shutting down"                   },
    [CODE_UNAUTHORIZED] = {"unauthorized",        401, "Unauthorized"                    },
    [CODE_NOT_IMPLEMENTED] = {"not_implemented",     501, "Not implemented"                 },
    [CODE_TOO_MANY_NAMESPACES] = {"too_many_namespaces", 503, "Id namespaces all in use"        },
    [CODE_INVALID_REQUEST] = {"invalid_request",     400, "Malformed HTTP request"          },
    [CODE_NOT_ACCEPTABLE] = {"not_acceptable",      406, "No acceptable media type"        },
    [CODE_SESSION_NOT_FOUND] = {"session_not_found",   404, "No such session"                 },
    [CODE_SESSION_BOUND] = {"session_bound",       409, "Bound to a session"              },
    [CODE_SESSION_MISMATCH] = {"session_mismatch",    409, "Not held in this session"        },
    [CODE_UNAUTHENTICATED] = {"unauthenticated",     401, "No valid API key"                },
    [CODE_FORBIDDEN] = {"forbidden",           403, "Not granted to this key"         },
    [CODE_IDS_BEHIND] = {"ids_behind",          503, "Redis lost ids handed out"       },
    [CODE_ID_EPOCH_MISMATCH] = {"id_epoch_mismatch",   503, "Id epoch differs from the mark's"},
    [CODE_REDIS_OUT_OF_MEMORY] = {"redis_out_of_memory", 503, "Redis is out of memory"          },
    [CODE_REDIS_MAY_EVICT] = {"redis_may_evict",     503, "Redis may evict locks"           },
    [CODE_REDIS_DATA_LOST] = {"redis_data_lost",     503, "Redis lost its data"             },
    [CODE_LAYOUT_UNSUPPORTED] = {"layout_unsupported",  503, "Redis key layout not understood" },
    [CODE_ORIGIN_FORBIDDEN] = {"origin_forbidden",    403, "Origin not allowed"              },
    [CODE_RATE_LIMITED] = {"rate_limited",        429, "Too many requests for this key"  },
    [CODE_QUOTA_EXCEEDED] = {"quota_exceeded",      429, "This key holds its limit"        },
    [CODE_URI_TOO_LONG] = {"uri_too_long",        414, "Request line too long"           },
    [CODE_HEADERS_TOO_LARGE] = {"headers_too_large",   431, "Request headers too large"       },
    [CODE_TOO_MANY_PREFIXES] = {"too_many_prefixes",   503, "Too many prefixes streamed"      },
};

const struct problem_info *problem_info(enum gw_code code) { return &problems[code]; }

char *problem_body(enum gw_code code, cJSON *extra, const char *detail) {
    const struct problem_info *pi = &problems[code];
    char type[64];
    snprintf(type, sizeof type, "urn:lockgate:problem:%s", pi->code);
    cJSON *o = alloc_check(cJSON_CreateObject());
    cJSON_AddStringToObject(o, "type", type);
    cJSON_AddStringToObject(o, "title", pi->title);
    cJSON_AddNumberToObject(o, "status", pi->status);
    cJSON_AddStringToObject(o, "detail", detail);
    cJSON_AddStringToObject(o, "code", pi->code);
    if (extra) {
        while (extra->child) {
            cJSON *item = cJSON_DetachItemViaPointer(extra, extra->child);
            cJSON_AddItemToObject(o, item->string, item);
        }
        cJSON_Delete(extra);
    }
    char *s = alloc_check(cJSON_PrintUnformatted(o));
    cJSON_Delete(o);
    return s;
}

void reply_header(struct gw_request *req, const char *name, const char *value) {
    if (req->nheaders >= HTTP_MAX_HEADERS) return;
    if (!req->headers) req->headers = alloc_check(calloc(HTTP_MAX_HEADERS, sizeof *req->headers));
    struct gw_header *h = &req->headers[req->nheaders++];
    h->name = name;
    h->value = alloc_check(strdup(value));
}

void reply_raw(struct gw_request *req, int status, const char *content_type, char *body,
               size_t len) {
    req->status = status;
    req->content_type = content_type;
    req->resp = body;
    req->resp_len = len;
    req->done = 1;
    if (req->on_ready) req->on_ready(req);
}

void reply_json(struct gw_request *req, int status, cJSON *body) {
    char *s = alloc_check(cJSON_PrintUnformatted(body));
    cJSON_Delete(body);
    reply_raw(req, status, "application/json", s, strlen(s));
}

void reply_problem_with(struct gw_request *req, enum gw_code code, cJSON *extra, const char *fmt,
                        ...) {
    char detail[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    if (code == CODE_BACKEND_UNAVAILABLE && strstr(detail, "OOM command not allowed"))
        code = CODE_REDIS_OUT_OF_MEMORY;
    int has_retry = 0;
    for (int i = 0; i < req->nheaders; i++)
        has_retry |= strcmp(req->headers[i].name, "Retry-After") == 0;
    if (problems[code].status == 503 && !has_retry) reply_header(req, "Retry-After", "1");
    char *s = problem_body(code, extra, detail);
    reply_raw(req, problems[code].status, "application/problem+json", s, strlen(s));
}

void json_add_int(cJSON *obj, const char *key, long long v) {
    char buf[24];
    snprintf(buf, sizeof buf, "%lld", v);
    cJSON_AddItemToObject(obj, key, alloc_check(cJSON_CreateRaw(buf)));
}
