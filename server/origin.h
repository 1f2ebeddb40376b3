/* origin.h -- which web origins may call the gateway from a browser
 * (README, "Browsers"): the gateway's own (same origin: its status page),
 * and those named by --cors-origin.  Pure: parsing and the decision only;
 * the HTTP layer (http.c) answers and adds the CORS headers. */
#ifndef LOCKGATE_ORIGIN_H
#define LOCKGATE_ORIGIN_H

#include <stddef.h>

#define ORIGIN_MAX     16  /* --cors-origin entries */
#define ORIGIN_MAX_LEN 255 /* bytes of one origin */

/* What a request's Origin header is to the gateway. */
enum origin_verdict {
    ORIGIN_NONE,    /* no Origin header: not from a browser's fetch */
    ORIGIN_SAME,    /* the gateway's own origin (scheme and Host agree) */
    ORIGIN_LISTED,  /* an origin --cors-origin allows: CORS headers go out */
    ORIGIN_REFUSED, /* any other, "null" included: 403 before any handler */
};

/* 0 when s is an origin as browsers serialise it: "http://" or "https://",
 * a host (name, IPv4 or [IPv6]) and an optional :port, no path, no
 * trailing slash; -1 otherwise. */
int origin_parse(const char *s);

/* Sets the origins allowed besides the gateway's own (each already
 * checked with origin_parse); called once at start, before any request. */
void origin_init(const char (*origins)[ORIGIN_MAX_LEN + 1], int n);

/* 1 when some origin is allowed by --cors-origin. */
int origin_cors_enabled(void);

/* The verdict for a request whose Origin header is origin (NULL: none),
 * whose Host header is host (may be NULL), over TLS when tls.  Origins and
 * hosts compare case-insensitively, a default port (:80 for http, :443 for
 * https) counting as none. */
enum origin_verdict origin_check(const char *origin, const char *host, int tls);

#endif
