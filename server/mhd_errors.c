/* mhd_errors.c -- see mhd_errors.h. */
#define _GNU_SOURCE /* RTLD_NEXT */
#include "server/mhd_errors.h"
#include "common/fatal.h"
#include "server/reply.h"

#include <dlfcn.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* libmicrohttpd's own messages all begin so (connection.c: REQUEST_TOO_BIG,
 * REQUEST_MALFORMED, REQUEST_LACKS_HOST, INTERNAL_ERROR); no answer of
 * the gateway's does. */
#define MHD_OWN_PREFIX "<html><head><title>"

typedef struct MHD_Response *(*create_fn)(size_t, void *, enum MHD_ResponseMemoryMode);
typedef enum MHD_Result (*queue_fn)(struct MHD_Connection *, unsigned int, struct MHD_Response *);

static create_fn real_create;
static queue_fn real_queue;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static unsigned buffer_bytes;

/* The response this thread's libmicrohttpd made last from one of its own
 * messages; it queues it right after making it (transmit_error_response). */
static __thread struct MHD_Response *own_error;

static void resolve(void) {
    real_create = (create_fn)dlsym(RTLD_NEXT, "MHD_create_response_from_buffer");
    real_queue = (queue_fn)dlsym(RTLD_NEXT, "MHD_queue_response");
    if (!real_create || !real_queue)
        fatal("libmicrohttpd's MHD_create_response_from_buffer or MHD_queue_response not found");
}

void mhd_errors_init(unsigned bytes) {
    buffer_bytes = bytes;
    pthread_once(&once, resolve);
}

struct MHD_Response *MHD_create_response_from_buffer(size_t size, void *buffer,
                                                     enum MHD_ResponseMemoryMode mode) {
    pthread_once(&once, resolve);
    struct MHD_Response *r = real_create(size, buffer, mode);
    if (mode == MHD_RESPMEM_PERSISTENT && size >= sizeof MHD_OWN_PREFIX - 1 &&
        memcmp(buffer, MHD_OWN_PREFIX, sizeof MHD_OWN_PREFIX - 1) == 0)
        own_error = r;
    return r;
}

/* The code for one of libmicrohttpd's own statuses, and why; -1: keep its
 * answer.  Its 400s stay as they are: for a malformed Content-Length it
 * writes the header block twice, so a body of another type would not
 * help the client (test_badinput, test_negative_content_length). */
static int code_for(unsigned status, char *detail, size_t len) {
    switch (status) {
    case MHD_HTTP_URI_TOO_LONG:
        snprintf(detail, len,
                 "the request line does not fit the connection's buffer (--connection-memory-kib: "
                 "%u bytes for the request line, headers and answer headers)",
                 buffer_bytes);
        return CODE_URI_TOO_LONG;
    case MHD_HTTP_REQUEST_HEADER_FIELDS_TOO_LARGE:
        snprintf(detail, len,
                 "the request's headers do not fit the connection's buffer "
                 "(--connection-memory-kib: %u bytes for the request line, headers and answer "
                 "headers)",
                 buffer_bytes);
        return CODE_HEADERS_TOO_LARGE;
    default: return -1;
    }
}

enum MHD_Result MHD_queue_response(struct MHD_Connection *connection, unsigned int status_code,
                                   struct MHD_Response *response) {
    pthread_once(&once, resolve);
    char detail[192];
    int code;
    if (!response || response != own_error ||
        (code = code_for(status_code, detail, sizeof detail)) < 0) {
        if (response == own_error) own_error = NULL;
        return real_queue(connection, status_code, response);
    }
    own_error = NULL;
    char *body = problem_body((enum gw_code)code, NULL, detail);
    struct MHD_Response *ours = real_create(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!ours) {
        free(body);
        return real_queue(connection, status_code, response);
    }
    MHD_add_response_header(ours, MHD_HTTP_HEADER_CONTENT_TYPE, "application/problem+json");
    enum MHD_Result ret = real_queue(connection, status_code, ours);
    MHD_destroy_response(ours); /* the connection keeps its own reference */
    return ret;
}
