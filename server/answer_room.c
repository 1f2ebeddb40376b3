/* answer_room.c -- see answer_room.h. */
#include "server/answer_room.h"
#include "common/token.h"

#include <microhttpd.h>
#include <string.h>
#include <strings.h>

/* libmicrohttpd 0.9.75's pool rounds each block up to two pointers
 * (memorypool.c, ALIGN_SIZE), and a field's record (internal.h, struct
 * MHD_HTTP_Header: two list pointers, name and value with their lengths,
 * the kind) is 6 pointers and an enum: 64 bytes on 64-bit. */
#define POOL_ALIGN       (2 * sizeof(void *))
#define POOL_ROUND(n)    (((n) + POOL_ALIGN - 1) / POOL_ALIGN * POOL_ALIGN)
#define POOL_FIELD_BYTES POOL_ROUND(6 * sizeof(void *) + sizeof(int))

/* The largest answer's status line and headers, less what it echoes from
 * its request (the path in Location, tokens, the Origin; counted per
 * request in answer_room_short).  Measured with each kind's head read
 * off the wire (a 16 KiB buffer, Origin "http://o"; bench/RESULTS.md,
 * "Room for the answer's headers"): a
 * preflight from an HTTP/1.0 client is the largest, 434 bytes with an
 * 8-byte Origin -- 204 with all seven CORS headers, Date and
 * "Connection: close" -- so 426 of its own; a stream hold's is 369 (with
 * Lock-Token's and Location's values taken out), a 401's about 360, the
 * status page's 406.  464 = 426 + 19 for the "Connection: close" a
 * leaving gateway adds (http_leave) + 19 to spare, e.g. for a longer
 * status line.  Each byte here is a byte less of request headers served. */
#define ANSWER_HEAD_BASE 464

static size_t pool_bytes;

void answer_room_init(size_t bytes) { pool_bytes = bytes; }

/* What the request's fields take from the pool: a record each, and the
 * Cookie header is copied once more to be split into cookies. */
struct field_cost {
    size_t bytes;
};

static enum MHD_Result count_field(void *cls, enum MHD_ValueKind kind, const char *key,
                                   const char *value) {
    struct field_cost *c = cls;
    c->bytes += POOL_FIELD_BYTES;
    if (kind == MHD_HEADER_KIND && key && strcasecmp(key, MHD_HTTP_HEADER_COOKIE) == 0)
        c->bytes += POOL_ROUND(strlen(value ? value : "") + 1);
    return MHD_YES;
}

static size_t header_len(struct MHD_Connection *conn, const char *name) {
    const char *v = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, name);
    return v ? strlen(v) : 0;
}

int answer_room_short(struct MHD_Connection *conn, const char *url, size_t *left, size_t *need) {
    /* The request line and headers as read, from the method to the blank
     * line (spurious blank lines before the request line, which
     * libmicrohttpd skips, are not counted: it does not say how many). */
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
    struct field_cost fields = {0};
    MHD_get_connection_values(conn, MHD_HEADER_KIND | MHD_GET_ARGUMENT_KIND | MHD_COOKIE_KIND,
                              count_field, &fields);
    size_t used = (ci ? POOL_ROUND(ci->header_size) : 0) + fields.bytes;
    *left = used < pool_bytes ? pool_bytes - used : 0;
    /* Echoed: the path (Location names what it names), a token twice (a
     * session's answer has it in Session and in Location; one the
     * gateway makes is TOKEN_NEW_LEN long), the Origin (CORS). */
    size_t token = header_len(conn, "Lock-Token");
    if (header_len(conn, "Session") > token) token = header_len(conn, "Session");
    if (token < TOKEN_NEW_LEN) token = TOKEN_NEW_LEN;
    *need = ANSWER_HEAD_BASE + strlen(url) + 2 * token + header_len(conn, "Origin");
    return *left < *need;
}
